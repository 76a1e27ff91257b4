//! Client TLS settings: `[tls]`, `cluster.security_toml` read the way
//! SeaweedFS reads it, and the TLS of the worker's stream to `weed admin`
//! (docs/tls.md, docs/plugin-worker.md#tls).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::seaweed::tls::TlsFiles;

use super::{ConfigError, Settings, invalid, require};
use crate::seaweed::volume_jwt::VolumeReadKey;

/// `[tls]`: mutual TLS towards the filer and the S3 gateway. Empty `ca` =
/// plaintext (unless `cluster.security_toml` names a file that enables it).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// CA bundle (PEM) the servers' certificates must chain to.
    pub ca: String,
    /// Client certificate (PEM) presented to the servers.
    pub cert: String,
    /// The client certificate's private key (PEM).
    pub key: String,
    /// Host name the server certificates must carry; empty = check the chain
    /// only (SeaweedFS certificates are often CN-only; docs/tls.md).
    pub server_name: String,
}

/// An error in `cluster.security_toml` or the file it names.
fn bad_toml(message: impl Into<String>) -> ConfigError {
    invalid("cluster.security_toml", message)
}

/// `cluster.security_toml` for "no file, do not look for one".
pub const NO_SECURITY_TOML: &str = "none";

/// Where `weed` looks for `security.toml` when no `-config_dir` is given, in
/// its order: the working directory, `$HOME/.seaweedfs`, then the BSD and
/// the Linux system directories (docs/tls.md#how-seaweedfs-enables-it).
fn weed_config_dirs(cwd: Option<&Path>, home: Option<&str>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cwd.map(Path::to_path_buf).into_iter().collect();
    dirs.extend(
        home.filter(|h| !h.is_empty())
            .map(|h| Path::new(h).join(".seaweedfs")),
    );
    dirs.push(PathBuf::from("/usr/local/etc/seaweedfs"));
    dirs.push(PathBuf::from("/etc/seaweedfs"));
    dirs
}

impl Settings {
    pub(super) fn validate_tls(&self) -> Result<(), ConfigError> {
        let t = &self.tls;
        let set = |v: &str| !v.trim().is_empty();
        let st = set(&self.cluster.security_toml)
            && self.cluster.security_toml.trim() != NO_SECURITY_TOML;
        require(
            !(st && (set(&t.ca) || set(&t.cert) || set(&t.key))),
            "cluster.security_toml",
            "is set together with tls.ca/tls.cert/tls.key; use one source of TLS material \
             (tls.server_name may go with either)",
        )?;
        require(
            set(&t.cert) == set(&t.key),
            "tls.cert",
            "tls.cert and tls.key must be set together (the client certificate and its key)",
        )?;
        require(
            !set(&t.cert) || set(&t.ca),
            "tls.ca",
            "must be set when tls.cert is: the CA bundle the servers' certificates chain to \
             (SeaweedFS's [grpc] ca)",
        )?;
        require(
            !set(&t.server_name) || set(&t.ca) || st,
            "tls.server_name",
            "only applies with TLS: set tls.ca (and tls.cert/tls.key) or cluster.security_toml",
        )
    }

    /// The client TLS of gRPC connections, loaded and checked now, so that a
    /// bad file is a configuration error at start-up rather than a failed
    /// pass. `None`: plaintext.
    pub fn client_tls(&self) -> Result<Option<crate::seaweed::tls::ClientTls>, ConfigError> {
        let toml = self.security_toml(std::env::vars())?;
        // A found file and the variables alone say where they came from.
        let from = match &toml {
            None => "[tls]".to_string(),
            Some(t) if self.cluster.security_toml.trim().is_empty() => t.path.clone(),
            Some(t) if self.cluster.security_toml_found => t.path.clone(),
            Some(t) => format!("cluster.security_toml ({})", t.path),
        };
        let Some(files) = self.files_from(toml)? else {
            return Ok(None);
        };
        crate::seaweed::tls::ClientTls::load(files)
            .map(Some)
            .map_err(|error| ConfigError::Tls { from, error })
    }

    /// The gRPC client TLS material: from `[tls]`, or from the
    /// `security.toml` named by `cluster.security_toml` with SeaweedFS's
    /// `WEED_GRPC_CA` / `WEED_GRPC_CLIENT_CERT` / `WEED_GRPC_CLIENT_KEY`
    /// overrides taken from `env` (they win over the file, as in `weed`;
    /// docs/tls.md#how-seaweedfs-enables-it). `None`: plaintext, which is also
    /// what `weed` does when the file has no `[grpc] ca`.
    pub fn tls_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        self.files_from(self.security_toml(env)?)
    }

    /// [`Settings::tls_files`] of an already read `security.toml` (`None`: `[tls]`).
    fn files_from(&self, toml: Option<SecurityToml>) -> Result<Option<TlsFiles>, ConfigError> {
        let server_name = self.tls_server_name();
        let path = |s: &str| Some(PathBuf::from(s.trim())).filter(|p| !p.as_os_str().is_empty());
        let Some(toml) = toml else {
            let Some(ca) = path(&self.tls.ca) else {
                return Ok(None);
            };
            let (cert, key) = (path(&self.tls.cert), path(&self.tls.key));
            return Ok(Some(TlsFiles {
                ca,
                cert,
                key,
                server_name,
            }));
        };
        let st = toml.path.as_str();
        let ca = toml.get("grpc.ca");
        let cert = toml.get("grpc.client.cert");
        let key = toml.get("grpc.client.key");
        let Some(ca) = path(&ca) else {
            if !cert.trim().is_empty() {
                return Err(bad_toml(format!(
                    "{st} sets [grpc.client] cert but no [grpc] ca (nor WEED_GRPC_CA)"
                )));
            }
            return Ok(None);
        };
        if cert.trim().is_empty() != key.trim().is_empty() {
            return Err(bad_toml(format!(
                "{st}: [grpc.client] cert and key must be set together \
                 (or WEED_GRPC_CLIENT_CERT and WEED_GRPC_CLIENT_KEY)"
            )));
        }
        let (cert, key) = (path(&cert), path(&key));
        Ok(Some(TlsFiles {
            ca,
            cert,
            key,
            server_name,
        }))
    }

    /// The client TLS of the worker's stream to `weed admin`, as SeaweedFS's own
    /// `weed worker` has it (docs/plugin-worker.md#tls): from the `security.toml`
    /// named by `cluster.security_toml`, `[grpc] ca` with the `[grpc.worker]`
    /// client certificate (`client_cert`/`client_key` preferred, else
    /// `cert`/`key`; `WEED_GRPC_WORKER_*` variables of `env` win). `None`:
    /// plaintext, what `weed worker` does without `[grpc.worker]`. A file that
    /// sets `[grpc.admin]` (the admin serves mutual TLS) without a
    /// `[grpc.worker]` certificate is an error naming that section: the admin
    /// would refuse every handshake.
    pub fn admin_tls_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let Some(toml) = self.security_toml(env)? else {
            return Ok(None);
        };
        let st = toml.path.as_str();
        let get = |key: &str| toml.get(key);
        let (mut cert, mut key) = (
            get("grpc.worker.client_cert"),
            get("grpc.worker.client_key"),
        );
        if cert.is_empty() || key.is_empty() {
            (cert, key) = (get("grpc.worker.cert"), get("grpc.worker.key"));
        }
        let ca = get("grpc.ca");
        if !cert.is_empty() && !key.is_empty() && !ca.is_empty() {
            return Ok(Some(TlsFiles {
                ca: PathBuf::from(ca),
                cert: Some(PathBuf::from(cert)),
                key: Some(PathBuf::from(key)),
                server_name: self.tls_server_name(),
            }));
        }
        if !get("grpc.admin.cert").is_empty() && !get("grpc.admin.key").is_empty() {
            return Err(bad_toml(format!(
                "{st} has [grpc.admin] (weed admin serves mutual TLS to its workers) but no \
                 worker client certificate: set [grpc.worker] cert and key (and [grpc] ca), \
                 as for `weed worker`"
            )));
        }
        Ok(None)
    }

    /// The client TLS of calls to `weed admin`'s HTTP API when that API is
    /// HTTPS (`[https.admin]` on the admin; docs/plugin-worker.md#admin-https),
    /// as SeaweedFS's own HTTP clients have it: from the `security.toml` named
    /// by `cluster.security_toml`, `[https.client]` with `enabled = true`,
    /// `ca` (the admin's certificate must chain to it) and, for an admin with
    /// `[https.admin] ca`, `cert` and `key`; `WEED_HTTPS_CLIENT_*` variables
    /// of `env` win. `None`: plain HTTP. The server name is left for the
    /// caller to set to the admin's host (checked, as Go's clients check it).
    pub fn admin_https_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let Some(h) = self.https_client(env)? else {
            return Ok(None);
        };
        let st = h.path.as_str();
        if h.insecure {
            return Err(bad_toml(format!(
                "{st}: [https.client] insecure_skip_verify = true: s3-lifecycled always \
                 verifies weed admin's HTTPS certificate; set [https.client] ca to the CA \
                 that issued the admin's [https.admin] certificate and drop \
                 insecure_skip_verify"
            )));
        }
        if h.files.ca.as_os_str().is_empty() {
            return Err(bad_toml(format!(
                "{st}: [https.client] enabled = true needs ca (the CA that issued weed \
                 admin's [https.admin] certificate; or WEED_HTTPS_CLIENT_CA)"
            )));
        }
        Ok(Some(h.files))
    }

    /// How the direct log-file reads reach the volume servers
    /// (docs/meta-log.md#https-volume-servers): as weed's own HTTP clients,
    /// HTTPS when `[https.client] enabled = true` in the `security.toml`
    /// named by `cluster.security_toml` (`WEED_HTTPS_CLIENT_*` of `env` win),
    /// with its `ca` and, for volume servers with `[https.volume] ca`, its
    /// `cert` and `key`.
    pub fn volume_https(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<VolumeHttps, ConfigError> {
        let Some(h) = self.https_client(env)? else {
            return Ok(VolumeHttps::Plain);
        };
        let st = h.path.as_str();
        if h.insecure {
            return Ok(VolumeHttps::Unverifiable(format!(
                "{st}: [https.client] insecure_skip_verify = true; s3-lifecycled does not read \
                 from servers it cannot verify"
            )));
        }
        if h.files.ca.as_os_str().is_empty() {
            return Ok(VolumeHttps::Unverifiable(format!(
                "{st}: [https.client] has no ca (weed then trusts the system's CAs, which \
                 s3-lifecycled does not read); set it to the CA that issued the volume \
                 servers' [https.volume] certificates"
            )));
        }
        Ok(VolumeHttps::Tls(h.files))
    }

    /// `[https.client]` when `enabled = true`; `cert` and `key` must come
    /// together. `ca` may be empty (weed then takes the system's CAs).
    fn https_client(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<HttpsClient>, ConfigError> {
        let Some(toml) = self.security_toml(env)? else {
            return Ok(None);
        };
        let st = toml.path.as_str();
        let (get, on) = (|key: &str| toml.get(key), |key: &str| toml.on(key));
        if !on("https.client.enabled") {
            return Ok(None);
        }
        let (cert, key) = (get("https.client.cert"), get("https.client.key"));
        if cert.is_empty() != key.is_empty() {
            return Err(bad_toml(format!(
                "{st}: [https.client] cert and key must be set together \
                 (or WEED_HTTPS_CLIENT_CERT and WEED_HTTPS_CLIENT_KEY)"
            )));
        }
        let path = |p: String| Some(PathBuf::from(p)).filter(|p| !p.as_os_str().is_empty());
        Ok(Some(HttpsClient {
            files: TlsFiles {
                ca: PathBuf::from(get("https.client.ca")),
                cert: path(cert),
                key: path(key),
                server_name: None,
            },
            insecure: on("https.client.insecure_skip_verify"),
            path: toml.path.clone(),
        }))
    }

    /// The volume servers' read key, `[jwt.signing.read] key` of the
    /// `security.toml` named by `cluster.security_toml` (or
    /// `WEED_JWT_SIGNING_READ_KEY` of `env`), with its `expires_after_seconds`
    /// (weed's default 60). `None`: the cluster does not sign reads
    /// (docs/meta-log.md#read-tokens).
    pub fn volume_read_key(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<VolumeReadKey>, ConfigError> {
        let env: HashMap<String, String> = env.into_iter().collect();
        // Without a file, weed still reads `WEED_JWT_SIGNING_READ_KEY`.
        let toml = self
            .security_toml(env.clone())?
            .unwrap_or_else(|| SecurityToml {
                path: "the WEED_* variables (no security.toml)".to_string(),
                cfg: config::Config::default(),
                env,
            });
        let key = toml.get("jwt.signing.read.key");
        if key.is_empty() {
            return Ok(None);
        }
        let expires = toml.get("jwt.signing.read.expires_after_seconds");
        let lifetime = if expires.is_empty() {
            crate::seaweed::volume_jwt::DEFAULT_LIFETIME
        } else {
            let secs: i64 = expires.parse().map_err(|_| {
                bad_toml(format!(
                    "{}: [jwt.signing.read] expires_after_seconds = {expires:?} is not a \
                     whole number of seconds",
                    toml.path
                ))
            })?;
            std::time::Duration::from_secs(secs.max(0).unsigned_abs())
        };
        Ok(Some(VolumeReadKey::new(&key, lifetime)))
    }

    /// With neither `cluster.security_toml` nor `[tls]` set, takes the first
    /// `security.toml` where `weed` itself looks (`cwd`, then `$HOME` of
    /// `env`, then the system directories), as `weed shell` or `weed worker`
    /// on the same host would: the Go worker we stand in for finds its TLS
    /// material that way. Marks it found, for the start-up log.
    pub fn find_security_toml(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
        cwd: Option<&Path>,
    ) {
        let set = |v: &str| !v.trim().is_empty();
        let t = &self.tls;
        if set(&self.cluster.security_toml) || set(&t.ca) || set(&t.cert) || set(&t.key) {
            return;
        }
        let home = env.into_iter().find(|(k, _)| k == "HOME").map(|(_, v)| v);
        let found = weed_config_dirs(cwd, home.as_deref())
            .into_iter()
            .map(|d| d.join("security.toml"))
            .find(|f| f.is_file());
        if let Some(f) = found {
            self.cluster.security_toml = f.display().to_string();
            self.cluster.security_toml_found = true;
        }
    }

    /// `tls.server_name`, `None` when empty: the name the gRPC servers'
    /// certificates must carry, whichever source the TLS material comes from.
    fn tls_server_name(&self) -> Option<String> {
        Some(self.tls.server_name.trim().to_string()).filter(|s| !s.is_empty())
    }

    /// The file `cluster.security_toml` names, read; without one, weed's
    /// `WEED_GRPC_*` / `WEED_HTTPS_*` variables alone when any is set and
    /// `[tls]` is not; `None` otherwise, and always for `"none"`.
    fn security_toml(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<SecurityToml>, ConfigError> {
        let st = self.cluster.security_toml.trim();
        if st == NO_SECURITY_TOML {
            return Ok(None);
        }
        if !st.is_empty() {
            let label = if self.cluster.security_toml_found {
                format!("{st} (found where weed looks; cluster.security_toml = \"none\" skips it)")
            } else {
                st.to_string()
            };
            return SecurityToml::read(Path::new(st), label, env).map(Some);
        }
        // No file: weed still reads its `WEED_*` variables (its configuration
        // takes them with or without a file), unless `[tls]` is ours.
        let t = &self.tls;
        let tls_set = [&t.ca, &t.cert, &t.key]
            .iter()
            .any(|v| !v.trim().is_empty());
        let env: HashMap<String, String> = env.into_iter().collect();
        let weed_tls = |k: &str| k.starts_with("WEED_GRPC_") || k.starts_with("WEED_HTTPS_");
        let any = env.iter().any(|(k, v)| weed_tls(k) && !v.trim().is_empty());
        Ok((any && !tls_set).then(|| SecurityToml {
            path: "the WEED_* variables (no security.toml)".to_string(),
            cfg: config::Config::default(),
            env,
        }))
    }
}

/// How the volume servers' HTTP port is reached ([`Settings::volume_https`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeHttps {
    /// Plain HTTP (`[https.client]` not enabled).
    Plain,
    /// HTTPS with this `[https.client]` material; each volume server's
    /// certificate is checked against `ca` and must name the host dialled.
    Tls(TlsFiles),
    /// HTTPS that s3-lifecycled will not speak, and why: the filer streams
    /// the log files instead.
    Unverifiable(String),
}

/// `[https.client]` as read, before a use decides what it needs.
struct HttpsClient {
    files: TlsFiles,
    insecure: bool,
    /// The file, for messages.
    path: String,
}

/// SeaweedFS's `security.toml` (`cluster.security_toml`), read as `weed`
/// reads it: a `WEED_<KEY>` variable (dots as underscores, upper case, e.g.
/// `WEED_GRPC_CLIENT_CERT` for `grpc.client.cert`) wins over the file.
struct SecurityToml {
    /// The file, for messages.
    path: String,
    cfg: config::Config,
    env: HashMap<String, String>,
}

impl SecurityToml {
    /// `file`, parsed; an error naming the setting, and the file as `st`
    /// says it, when it is missing or not TOML.
    fn read(
        file: &Path,
        st: String,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<SecurityToml, ConfigError> {
        if !file.is_file() {
            return Err(bad_toml(format!(
                "{st} does not exist or is not a file (SeaweedFS's security.toml)"
            )));
        }
        let cfg = config::Config::builder()
            .add_source(config::File::from(file).format(config::FileFormat::Toml))
            .build()
            .map_err(|e| bad_toml(format!("{st}: {e}")))?;
        Ok(SecurityToml {
            path: st,
            cfg,
            env: env.into_iter().collect(),
        })
    }

    /// `key` (e.g. `grpc.ca`), trimmed; empty when unset. A boolean reads as
    /// `true` or `false`.
    fn get(&self, key: &str) -> String {
        let var = format!("WEED_{}", key.replace('.', "_").to_uppercase());
        self.env
            .get(&var)
            .cloned()
            .or_else(|| {
                self.cfg
                    .get_string(key)
                    .ok()
                    .or_else(|| self.cfg.get_bool(key).ok().map(|b| b.to_string()))
            })
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Whether `key` is `true` (or `1`).
    fn on(&self, key: &str) -> bool {
        matches!(self.get(key).to_ascii_lowercase().as_str(), "true" | "1")
    }
}
