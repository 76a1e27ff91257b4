//! Service configuration: TOML files (see `config/default.toml`, which documents
//! every key next to its default) layered under `S3_LIFECYCLED__SECTION__KEY`
//! environment overrides, then validated. Errors name the offending key.

mod cluster;
mod pass;
mod rails;
mod service;
mod tls;
mod values;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub use cluster::*;
pub use pass::*;
pub use rails::*;
pub use service::*;
pub use tls::*;
use values::normalize_filer_path;
pub use values::parse_duration;

/// Prefix of environment overrides: `S3_LIFECYCLED__RATE__DELETES_PER_SECOND=50`.
pub const ENV_PREFIX: &str = "S3_LIFECYCLED";

/// A configuration problem. Maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or an override could not be read or does not fit the schema.
    #[error("configuration: {0}")]
    Load(String),
    /// A value is out of range.
    #[error("configuration key `{key}`: {message}")]
    Invalid {
        /// Dotted key, e.g. `rate.burst`.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The TLS material the settings name cannot be used.
    #[error("TLS material from {from}: {error}")]
    Tls {
        /// Where the settings came from: `[tls]` or `cluster.security_toml (FILE)`.
        from: String,
        /// What is wrong with a file, naming it.
        error: crate::seaweed::tls::TlsConfigError,
    },
}

pub(super) fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

/// `Ok` when `ok`, else [`invalid`].
pub(super) fn require(ok: bool, key: &str, message: impl Into<String>) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(invalid(key, message))
    }
}

/// All settings. Every field has a default, so no file is needed at all.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Where the SeaweedFS cluster is.
    pub cluster: ClusterSettings,
    /// What one pass covers and how it decides.
    pub pass: PassSettings,
    /// Lifecycle time: day length and due-time rounding.
    pub time: TimeSettings,
    /// Delete rate limits.
    pub rate: RateSettings,
    /// Delete dispatch: concurrency and transport retries.
    pub dispatch: DispatchSettings,
    /// Cursor storage in the filer.
    pub cursor: CursorSettings,
    /// The always-on service (`serve`).
    pub service: ServiceSettings,
    /// Logs and traces.
    pub telemetry: TelemetrySettings,
    /// gRPC client TLS towards the cluster (docs/tls.md).
    pub tls: TlsSettings,
    /// Safety rails: deletion caps (ops/runbook.md (h)).
    pub safety: SafetySettings,
    /// The deletion journal in the filer.
    pub journal: JournalSettings,
    /// Reclaimed-space reports and the optional vacuum after a pass
    /// (docs/reclaimed-space.md).
    pub reclaim: ReclaimSettings,
    /// The legacy-TTL audit (docs/ttl-audit.md).
    pub audit: AuditSettings,
    /// `weed admin`: the plugin worker, and the one-enforcer check.
    pub weed_admin: WeedAdminSettings,
}

/// The sections of [`Settings`], as the TOML tables and the `<SECTION>` of a
/// variable name spell them.
const SECTIONS: [&str; 14] = [
    "cluster",
    "pass",
    "time",
    "rate",
    "dispatch",
    "cursor",
    "service",
    "telemetry",
    "tls",
    "safety",
    "journal",
    "reclaim",
    "audit",
    "weed_admin",
];

/// A variable meant as a setting but not read as one: our prefix in any case
/// and with any underscores, then `<SECTION>__<KEY>` of a real section. Other
/// names that merely start like ours (a wrapper's `S3_LIFECYCLED_BIN`) are
/// not ours to judge.
fn misspelt_setting(k: &str) -> bool {
    let upper = k.to_ascii_uppercase();
    let Some(rest) = upper.strip_prefix(ENV_PREFIX) else {
        return false;
    };
    let rest = rest.trim_start_matches('_');
    match rest.split_once("__") {
        Some((section, _)) => SECTIONS.contains(&section.to_ascii_lowercase().as_str()),
        None => false,
    }
}

impl Settings {
    /// Loads the optional TOML file, then the `S3_LIFECYCLED__*` variables of
    /// `env` (pass `std::env::vars()` in production; tests pass a map), then
    /// validates.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let mut b = config::Config::builder();
        if let Some(path) = file {
            if !path.exists() {
                return Err(ConfigError::Load(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            b = b.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        let prefix = format!("{ENV_PREFIX}__");
        let mut vars = HashMap::new();
        for (k, v) in env {
            if k.starts_with(&prefix) {
                vars.insert(k, v);
            } else if misspelt_setting(&k) {
                // `S3_LIFECYCLED_PASS__SHARDS` or a lower-case prefix was read as
                // nothing at all, leaving the default in force without a word.
                return Err(ConfigError::Load(format!(
                    "environment variable {k} is not a setting: settings are \
                     {prefix}<SECTION>__<KEY>, in upper case with two underscores, e.g. \
                     {prefix}PASS__SHARDS; rename or unset it"
                )));
            }
        }
        b = b.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(Some(vars)),
        );
        let cfg = b.build().map_err(|e| ConfigError::Load(e.to_string()))?;
        let s: Settings = cfg
            .try_deserialize()
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Range checks that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        require(
            self.service.instance_ttl >= Duration::from_secs(3),
            "service.instance_ttl",
            "must be at least 3s (the instance file is renewed every third of it)",
        )?;
        self.validate_weed_admin()?;
        self.cluster.validate()?;
        self.pass.validate()?;
        require(
            !self.time.day.is_zero(),
            "time.day",
            "must be a positive duration such as 24h or 10s",
        )?;
        for (key, v) in [
            ("rate.deletes_per_second", self.rate.deletes_per_second),
            (
                "rate.cluster_deletes_per_second",
                self.rate.cluster_deletes_per_second,
            ),
        ] {
            let message = format!("must be 0 (unlimited) or a positive number, got {v}");
            require(v.is_finite() && v >= 0.0, key, message)?;
        }
        let f = self.safety.max_delete_fraction;
        require(
            f.is_finite() && (0.0..=1.0).contains(&f),
            "safety.max_delete_fraction",
            format!("must be 0 (off) or a fraction of a bucket such as 0.1 (at most 1), got {f}"),
        )?;
        for (key, v) in [
            ("reclaim.vacuum_threshold", self.reclaim.vacuum_threshold),
            (
                "reclaim.master_garbage_threshold",
                self.reclaim.master_garbage_threshold,
            ),
        ] {
            let message = format!("must be a garbage ratio from 0 to 1 such as 0.3, got {v}");
            require(v.is_finite() && (0.0..=1.0).contains(&v), key, message)?;
        }
        require(
            !self.reclaim.vacuum || self.reclaim.max_vacuum_volumes != 0,
            "reclaim.max_vacuum_volumes",
            "must be at least 1 when reclaim.vacuum is on (or turn reclaim.vacuum off)",
        )?;
        require(
            self.audit.max_entries != 0 && self.audit.max_listings != 0,
            "audit.max_entries",
            "audit.max_entries and audit.max_listings must be at least 1 (turn the service's \
             audit off with audit.in_service = false)",
        )?;
        require(self.rate.workers != 0, "rate.workers", "must be at least 1")?;
        require(
            self.dispatch.max_in_flight != 0 && self.dispatch.max_in_flight_per_shard != 0,
            "dispatch.max_in_flight",
            "max_in_flight and max_in_flight_per_shard must be at least 1",
        )?;
        require(
            self.dispatch.retry_attempts != 0,
            "dispatch.retry_attempts",
            "must be at least 1 (1 = no retry)",
        )?;
        for (key, d, example) in [
            ("dispatch.call_timeout", self.dispatch.call_timeout, "60s"),
            (
                "cluster.filer_call_timeout",
                self.cluster.filer_call_timeout,
                "30s",
            ),
        ] {
            require(
                !d.is_zero(),
                key,
                format!(
                    "must be a positive duration such as {example}: without a deadline one \
                     unanswered call hangs the pass"
                ),
            )?;
        }
        require(
            self.cursor.dir.starts_with('/'),
            "cursor.dir",
            "must be an absolute filer path such as /etc/s3/lifecycle/s3-lifecycled",
        )?;
        // Compared after normalising: the filer resolves `//`, `.` and `..`, so any spelling
        // of the Go directory would still overwrite the Go worker's cursors.
        require(
            normalize_filer_path(&self.cursor.dir) != "/etc/s3/lifecycle/daily-cursors",
            "cursor.dir",
            "is the Go worker's cursor directory; s3-lifecycled must not write there (it only reads it when migrating)",
        )?;
        if !schedule_off(&self.service.schedule) {
            parse_schedule(&self.service.schedule).map_err(|m| invalid("service.schedule", m))?;
        }
        require(
            matches!(self.telemetry.log_format.as_str(), "text" | "json"),
            "telemetry.log_format",
            "must be `text` or `json`",
        )?;
        self.validate_tls()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::values::MAX_DURATION;
    use super::*;
    use crate::engine::DueRounding;
    use std::path::PathBuf;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_file_gives_defaults() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.time.day, Duration::from_secs(86_400));
    }

    #[test]
    fn a_variable_with_one_underscore_after_the_prefix_was_ignored_silently() {
        for k in [
            "S3_LIFECYCLED_PASS__SHARDS",
            "s3_lifecycled__pass__shards",
            "S3_LIFECYCLEDPASS__SHARDS",
        ] {
            let e = Settings::load(None, env(&[(k, "3")]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(k) && e.contains("S3_LIFECYCLED__PASS__SHARDS"),
                "{k}: {e}"
            );
        }
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__SHARDS", "3")])).unwrap();
        assert_eq!(s.pass.shards, "3");
        // Other programs' variables are none of ours, nor a wrapper's that only starts like ours.
        let others = [
            ("S3_BUCKET", "x"),
            ("PATH", "/bin"),
            ("S3_LIFECYCLED_BIN", "/x"),
        ];
        assert!(Settings::load(None, env(&others)).is_ok());
    }

    #[test]
    fn the_sections_a_misspelt_variable_is_checked_against_are_all_of_them() {
        // serde lists every section when one is unknown.
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__NOPE__X", "1")]))
            .unwrap_err()
            .to_string();
        let listed = e.split("expected one of ").nth(1).unwrap_or_default();
        let listed: Vec<&str> = listed.split(", ").map(|s| s.trim_matches('`')).collect();
        assert_eq!(listed, SECTIONS, "{e}");
    }

    #[test]
    fn tls_settings_resolve_and_half_set_ones_name_the_key() {
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__TLS__CA", "/c/ca.crt"),
                ("S3_LIFECYCLED__TLS__CERT", "/c/client.crt"),
                ("S3_LIFECYCLED__TLS__KEY", "/c/client.key"),
            ]),
        )
        .unwrap();
        let f = s.tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/c/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/c/client.crt")));
        assert_eq!(f.server_name, None);
        assert_eq!(Settings::default().tls_files(env(&[])).unwrap(), None);
        for (pairs, key) in [
            (vec![("S3_LIFECYCLED__TLS__CERT", "/c/x.crt")], "tls.cert"),
            (
                vec![
                    ("S3_LIFECYCLED__TLS__CERT", "/c/x.crt"),
                    ("S3_LIFECYCLED__TLS__KEY", "/c/x.key"),
                ],
                "tls.ca",
            ),
            (
                vec![("S3_LIFECYCLED__TLS__SERVER_NAME", "filer")],
                "tls.server_name",
            ),
            (
                vec![
                    ("S3_LIFECYCLED__TLS__CA", "/c/ca.crt"),
                    (
                        "S3_LIFECYCLED__CLUSTER__SECURITY_TOML",
                        "/etc/seaweedfs/security.toml",
                    ),
                ],
                "cluster.security_toml",
            ),
        ] {
            let e = Settings::load(None, env(&pairs)).unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    /// `weed shell` on a host with `security.toml` in its working directory
    /// or `~/.seaweedfs` speaks TLS with no flag; we dialled in plaintext and
    /// were refused (exit 10) until told where the file was.
    #[test]
    fn a_security_toml_where_weed_looks_was_ignored() {
        let dir = std::env::temp_dir().join(format!("cfg-find-{}", std::process::id()));
        let (cwd, home) = (dir.join("cwd"), dir.join("home"));
        std::fs::create_dir_all(home.join(".seaweedfs")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let toml =
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.client]\ncert = \"/s/c.crt\"\nkey = \"/s/c.key\"\n";
        let in_home = home.join(".seaweedfs/security.toml");
        std::fs::write(&in_home, toml).unwrap();
        let home_env = || env(&[("HOME", home.to_str().unwrap())]);
        let found = |s: &Settings| {
            (
                s.cluster.security_toml.clone(),
                s.cluster.security_toml_found,
            )
        };

        // $HOME/.seaweedfs, when the working directory has none.
        let mut s = Settings::default();
        s.find_security_toml(home_env(), Some(&cwd));
        assert_eq!(found(&s), (in_home.display().to_string(), true));
        let f = s.tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.cert, Some(PathBuf::from("/s/c.crt")));
        assert!(
            s.client_tls()
                .is_err_and(|e| e.to_string().contains("found where weed looks"))
        );

        // The working directory first, as weed.
        let in_cwd = cwd.join("security.toml");
        std::fs::write(&in_cwd, toml).unwrap();
        let mut s = Settings::default();
        s.find_security_toml(home_env(), Some(&cwd));
        assert_eq!(found(&s), (in_cwd.display().to_string(), true));

        // A found file that is not TOML is an error that says where it was found and how
        // to skip it, not a silent plaintext dial.
        std::fs::write(&in_cwd, "[grpc\n").unwrap();
        let e = s.tls_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("found where weed looks") && e.contains("\"none\" skips it"),
            "{e}"
        );
        std::fs::write(&in_cwd, toml).unwrap();

        // Not looked for when the settings name the material: a file, "none", or [tls].
        for (key, value) in [("file", "/x/security.toml"), ("none", "none"), ("tls", "")] {
            let mut s = Settings::default();
            s.cluster.security_toml = value.to_string();
            if key == "tls" {
                s.tls.ca = "/t/ca.crt".into();
            }
            s.find_security_toml(home_env(), Some(&cwd));
            assert_eq!(found(&s), (value.to_string(), false), "{key}");
        }
        // No file anywhere: weed's WEED_GRPC_* variables alone, as weed reads them.
        let vars = [
            ("WEED_GRPC_CA", "/e/ca.crt"),
            ("WEED_GRPC_CLIENT_CERT", "/e/c.crt"),
            ("WEED_GRPC_CLIENT_KEY", "/e/c.key"),
        ];
        let s = Settings::default();
        let f = s.tls_files(env(&vars)).unwrap().unwrap();
        assert_eq!(
            (f.ca, f.cert),
            ("/e/ca.crt".into(), Some("/e/c.crt".into()))
        );
        let mut s = Settings::default();
        s.tls.ca = "/t/ca.crt".into();
        let f = s.tls_files(env(&vars)).unwrap().unwrap();
        assert_eq!((f.ca, f.cert), ("/t/ca.crt".into(), None), "[tls] wins");
        // "none" reads no file, and goes with [tls].
        let mut s = Settings::default();
        s.cluster.security_toml = "none".into();
        assert_eq!(s.tls_files(env(&vars)).unwrap(), None);
        s.tls.ca = "/t/ca.crt".into();
        s.validate().unwrap();
        assert_eq!(
            s.tls_files(env(&[])).unwrap().unwrap().ca,
            PathBuf::from("/t/ca.crt")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn volume_read_key_comes_from_jwt_signing_read_and_weed_variables_win() {
        let dir = std::env::temp_dir().join(format!("cfg-jwt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        let key = |s: &Settings, vars: &[(&str, &str)]| {
            s.volume_read_key(env(vars))
                .map(|k| k.map(|k| format!("{k:?}")))
        };
        // No file, no variable: the cluster does not sign reads.
        assert_eq!(key(&s, &[]).unwrap(), None);
        // weed reads the variable without a file.
        let k = key(&s, &[("WEED_JWT_SIGNING_READ_KEY", "v")])
            .unwrap()
            .unwrap();
        assert!(k.contains("lifetime: 60s") && !k.contains("\"v\""), "{k}");
        // A write key alone signs no reads.
        std::fs::write(&file, "[jwt.signing]\nkey = \"w\"\n").unwrap();
        s.cluster.security_toml = file.display().to_string();
        assert_eq!(key(&s, &[]).unwrap(), None);
        std::fs::write(
            &file,
            "[jwt.signing.read]\nkey = \"r\"\nexpires_after_seconds = 30\n",
        )
        .unwrap();
        assert!(key(&s, &[]).unwrap().unwrap().contains("lifetime: 30s"));
        let k = key(&s, &[("WEED_JWT_SIGNING_READ_EXPIRES_AFTER_SECONDS", "0")]);
        assert!(k.unwrap().unwrap().contains("lifetime: 0ns"));
        let e = key(&s, &[("WEED_JWT_SIGNING_READ_EXPIRES_AFTER_SECONDS", "1m")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster.security_toml") && e.contains("expires_after_seconds = \"1m\""),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn security_toml_gives_grpc_ca_and_client_cert_and_weed_variables_win() {
        let dir = std::env::temp_dir().join(format!("cfg-sec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.filer]\ncert = \"/s/filer.crt\"\nkey = \"/s/filer.key\"\n\
             [grpc.client]\ncert = \"/s/client.crt\"\nkey = \"/s/client.key\"\n",
        )
        .unwrap();
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        let f = s.tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/client.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/client.key")));
        let f = s
            .tls_files(env(&[
                ("WEED_GRPC_CA", "/e/ca.crt"),
                ("WEED_GRPC_CLIENT_CERT", "/e/c.crt"),
                ("WEED_GRPC_CLIENT_KEY", "/e/c.key"),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(f.ca, PathBuf::from("/e/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/e/c.crt")));
        // A security.toml without [grpc] ca: weed runs plaintext, and so do we.
        std::fs::write(&file, "[jwt.signing]\nkey = \"\"\n").unwrap();
        assert_eq!(s.tls_files(env(&[])).unwrap(), None);
        s.cluster.security_toml = dir.join("missing.toml").display().to_string();
        let e = s.tls_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("cluster.security_toml") && e.contains("missing.toml"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_tls_comes_from_grpc_worker_and_grpc_admin_without_it_names_grpc_worker() {
        let dir = std::env::temp_dir().join(format!("cfg-admin-sec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        // The cluster's [grpc.client] is not the worker's certificate: no [grpc.worker], no
        // [grpc.admin] is plaintext to the admin, as `weed worker` dials.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.client]\ncert = \"/s/c.crt\"\nkey = \"/s/c.key\"\n",
        )
        .unwrap();
        assert_eq!(s.admin_tls_files(env(&[])).unwrap(), None);
        // [grpc.admin] alone: the admin requires a client certificate we do not have.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.admin]\ncert = \"/s/a.crt\"\nkey = \"/s/a.key\"\n",
        )
        .unwrap();
        let e = s.admin_tls_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("[grpc.worker]") && e.contains("cluster.security_toml"),
            "{e}"
        );
        // [grpc.worker] cert/key, client_cert/client_key preferred, WEED_ variables win.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.admin]\ncert = \"/s/a.crt\"\nkey = \"/s/a.key\"\n\
             [grpc.worker]\ncert = \"/s/w.crt\"\nkey = \"/s/w.key\"\n",
        )
        .unwrap();
        let f = s.admin_tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/w.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/w.key")));
        let f = s
            .admin_tls_files(env(&[
                ("WEED_GRPC_WORKER_CLIENT_CERT", "/e/wc.crt"),
                ("WEED_GRPC_WORKER_CLIENT_KEY", "/e/wc.key"),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(f.cert, Some(PathBuf::from("/e/wc.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/e/wc.key")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_https_comes_from_https_client_and_refuses_skipping_verification() {
        let dir = std::env::temp_dir().join(format!("cfg-admin-https-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        assert_eq!(
            s.admin_https_files(env(&[])).unwrap(),
            None,
            "no file: HTTP"
        );
        s.cluster.security_toml = file.display().to_string();
        // The scaffold's [https.client] is off: plain HTTP.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[https.client]\nenabled = false\nca = \"/s/h.crt\"\n",
        )
        .unwrap();
        assert_eq!(s.admin_https_files(env(&[])).unwrap(), None);
        // On: ca, cert and key of [https.client], not [grpc]'s.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[https.client]\nenabled = true\nca = \"/s/h.crt\"\n\
             cert = \"/s/hc.crt\"\nkey = \"/s/hc.key\"\n",
        )
        .unwrap();
        let f = s.admin_https_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/h.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/hc.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/hc.key")));
        // WEED_HTTPS_CLIENT_* win, as in SeaweedFS.
        let f = s
            .admin_https_files(env(&[("WEED_HTTPS_CLIENT_CA", "/e/h.crt")]))
            .unwrap()
            .unwrap();
        assert_eq!(f.ca, PathBuf::from("/e/h.crt"));
        assert_eq!(
            s.admin_https_files(env(&[("WEED_HTTPS_CLIENT_ENABLED", "false")]))
                .unwrap(),
            None
        );
        // On without ca, half a client certificate, skipping verification: errors naming them.
        std::fs::write(&file, "[https.client]\nenabled = true\n").unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("[https.client]") && e.contains("ca") && e.contains("cluster.security_toml"),
            "{e}"
        );
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\nca = \"/s/h.crt\"\ncert = \"/s/hc.crt\"\n",
        )
        .unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(e.contains("cert and key must be set together"), "{e}");
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\ninsecure_skip_verify = true\n",
        )
        .unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(e.contains("insecure_skip_verify"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn volume_https_follows_https_client_as_weeds_http_clients_do() {
        let dir = std::env::temp_dir().join(format!("cfg-vhttps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        let vh = |s: &Settings, vars: &[(&str, &str)]| s.volume_https(env(vars));
        // Not enabled (an [https.volume] alone is the servers' side): plain HTTP.
        std::fs::write(
            &file,
            "[https.volume]\ncert = \"/s/v.crt\"\nkey = \"/s/v.key\"\n",
        )
        .unwrap();
        assert_eq!(vh(&s, &[]).unwrap(), VolumeHttps::Plain);
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\nca = \"/s/h.crt\"\ncert = \"/s/c.crt\"\nkey = \"/s/c.key\"\n",
        )
        .unwrap();
        let VolumeHttps::Tls(f) = vh(&s, &[]).unwrap() else {
            panic!("HTTPS expected")
        };
        assert_eq!(
            (f.ca, f.cert, f.key, f.server_name),
            (
                PathBuf::from("/s/h.crt"),
                Some(PathBuf::from("/s/c.crt")),
                Some(PathBuf::from("/s/c.key")),
                None
            )
        );
        // What weed would do and s3-lifecycled will not: the filer streams instead, and says why.
        for (toml, why) in [
            ("[https.client]\nenabled = true\n", "has no ca"),
            (
                "[https.client]\nenabled = true\nca = \"/s/h.crt\"\ninsecure_skip_verify = true\n",
                "insecure_skip_verify",
            ),
        ] {
            std::fs::write(&file, toml).unwrap();
            match vh(&s, &[]).unwrap() {
                VolumeHttps::Unverifiable(m) => assert!(m.contains(why), "{m}"),
                other => panic!("{toml}: {other:?}"),
            }
        }
        // Half a client certificate is an error, as in weed.
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\nca = \"/s/h.crt\"\nkey = \"/k\"\n",
        )
        .unwrap();
        let e = vh(&s, &[]).unwrap_err().to_string();
        assert!(e.contains("cert and key must be set together"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shipped_default_toml_equals_built_in_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
        let s = Settings::load(Some(&path), env(&[])).unwrap();
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn env_overrides_nested_keys_with_underscores() {
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "50"),
                ("S3_LIFECYCLED__TIME__DAY", "10s"),
                ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
                ("OTHER__RATE__BURST", "9"),
            ]),
        )
        .unwrap();
        assert_eq!(s.rate.deletes_per_second, 50.0);
        assert_eq!(s.time.day, Duration::from_secs(10));
        assert_eq!(s.time.due_rounding, DueRounding::None);
        assert_eq!(s.rate.burst, 0);
    }

    #[test]
    fn a_wrong_due_rounding_named_the_rust_enum_not_the_choices() {
        let e = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__TIME__DUE_ROUNDING", "midnight")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`midnight` is not a due rounding; use next_day")
                && e.contains("or none")
                && e.contains("time.due_rounding")
                && !e.contains("DueRounding"),
            "{e}"
        );
        let s = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__TIME__DUE_ROUNDING", "next_day")]),
        );
        assert_eq!(s.unwrap().time.due_rounding, DueRounding::NextDay);
    }

    #[test]
    fn go_cursor_dir_guard_sees_through_path_spelling() {
        for dir in [
            "/etc/s3/lifecycle//daily-cursors",
            "//etc/s3/lifecycle/daily-cursors/",
            "/etc/s3/./lifecycle/daily-cursors/.",
            "/etc/s3/lifecycle/x/../daily-cursors",
        ] {
            let e = Settings::load(None, env(&[("S3_LIFECYCLED__CURSOR__DIR", dir)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains("cursor.dir"), "{dir}: {e}");
        }
        assert!(
            Settings::load(
                None,
                env(&[(
                    "S3_LIFECYCLED__CURSOR__DIR",
                    "/etc/s3/lifecycle/daily-cursors-2"
                )])
            )
            .is_ok()
        );
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.toml");
        std::fs::write(&f, "[rate]\ndeletes_per_secnd = 5\n").unwrap();
        let e = Settings::load(Some(&f), env(&[])).unwrap_err().to_string();
        assert!(e.contains("deletes_per_secnd"), "{e}");
    }

    #[test]
    fn filer_and_s3_grpc_accept_a_string_a_comma_list_or_an_array() {
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("multi.toml");
        std::fs::write(
            &f,
            "[cluster]\nfiler = \"a:18888\"\ns3_grpc = [\"g1:18333\", \"g2:18333\"]\n",
        )
        .unwrap();
        let s = Settings::load(Some(&f), env(&[])).unwrap();
        assert_eq!(s.cluster.filer, ["a:18888"]);
        assert_eq!(s.cluster.s3_grpc, ["g1:18333", "g2:18333"]);
        let s =
            Settings::load(None, env(&[("S3_LIFECYCLED__CLUSTER__FILER", "a:1, b:2")])).unwrap();
        assert_eq!(s.cluster.filer, ["a:1", "b:2"]);
        // Nothing set: the loopback defaults, no discovery.
        let d = Settings::default();
        assert_eq!(d.cluster.static_filers().unwrap(), [DEFAULT_FILER]);
        assert_eq!(d.cluster.static_s3_grpc().unwrap(), [DEFAULT_S3_GRPC]);
        // A master and no lists: both discovered; an explicit list still wins.
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__CLUSTER__MASTER", "m:19333"),
                ("S3_LIFECYCLED__CLUSTER__S3_GRPC", "g:1"),
            ]),
        )
        .unwrap();
        assert_eq!(s.cluster.static_filers(), None);
        assert_eq!(s.cluster.static_s3_grpc().unwrap(), ["g:1"]);
    }

    #[test]
    fn bad_cluster_lists_and_margins_name_the_key() {
        for (k, v, key) in [
            ("S3_LIFECYCLED__CLUSTER__FILER", "a:1,a:1", "cluster.filer"),
            ("S3_LIFECYCLED__CLUSTER__S3_GRPC", "g 1", "cluster.s3_grpc"),
            (
                "S3_LIFECYCLED__CLUSTER__MASTER",
                "m:1,m:1",
                "cluster.master",
            ),
            (
                "S3_LIFECYCLED__CLUSTER__MASTER",
                "m:1,m 2",
                "cluster.master",
            ),
            (
                "S3_LIFECYCLED__PASS__REORDER_MARGIN",
                "0",
                "pass.reorder_margin",
            ),
            (
                "S3_LIFECYCLED__PASS__REORDER_MARGIN",
                "2h",
                "pass.reorder_margin",
            ),
        ] {
            let e = Settings::load(None, env(&[(k, v)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{v}: {e}");
        }
        let s =
            Settings::load(None, env(&[("S3_LIFECYCLED__PASS__REORDER_MARGIN", "2s")])).unwrap();
        assert_eq!(s.pass.reorder_margin, Duration::from_secs(2));
        // Several masters, as weed's `-master` takes them.
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__CLUSTER__MASTER", "m:1, m:2")]));
        assert_eq!(s.unwrap().cluster.master, "m:1, m:2");
    }

    /// weed's `HOST:HTTPPORT.GRPCPORT` (what `weed shell -filer=…` takes) in
    /// `cluster.filer` or `cluster.s3_grpc` was refused ("the port must be a
    /// number"): it names the gRPC port, which is dialled; the same server in
    /// both forms is listed twice.
    #[test]
    fn weeds_dot_form_in_filer_and_s3_grpc_was_refused() {
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__CLUSTER__FILER", "h:8888.18888,g:18888"),
                ("S3_LIFECYCLED__CLUSTER__S3_GRPC", "h:8333.18333"),
            ]),
        )
        .unwrap();
        let w = s.cluster.wanted();
        assert_eq!(w.filers.unwrap(), ["h:18888", "g:18888"]);
        assert_eq!(w.s3_grpc.unwrap(), ["h:18333"]);
        let e = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__CLUSTER__FILER", "h:8888.18888,h:18888")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cluster.filer") && e.contains("twice"), "{e}");
    }

    /// `--filer 127.0.0.1:99999` dialled 127.0.0.1:80, and `--filer nohost` or a
    /// master without a port failed at the first pass (exit 1): each is a
    /// configuration error naming the key (exit 2).
    #[test]
    fn cluster_addresses_with_a_bad_or_missing_port_are_configuration_errors() {
        const FILER: &str = "S3_LIFECYCLED__CLUSTER__FILER";
        const S3_GRPC: &str = "S3_LIFECYCLED__CLUSTER__S3_GRPC";
        const MASTER: &str = "S3_LIFECYCLED__CLUSTER__MASTER";
        // (variable, value, key named, the item named, why)
        for (k, v, key, bad, why) in [
            (
                FILER,
                "127.0.0.1:99999",
                "cluster.filer",
                "127.0.0.1:99999",
                "1 to 65535",
            ),
            (
                FILER,
                "a:18888,nohost",
                "cluster.filer",
                "`nohost`",
                "no port",
            ),
            (S3_GRPC, "g:0", "cluster.s3_grpc", "`g:0`", "1 to 65535"),
            (S3_GRPC, ":18333", "cluster.s3_grpc", "`:18333`", "no host"),
            (
                MASTER,
                "127.0.0.1:99999",
                "cluster.master",
                "127.0.0.1:99999",
                "port",
            ),
            (MASTER, "nohost", "cluster.master", "`nohost`", "no port"),
        ] {
            let e = Settings::load(None, env(&[(k, v)]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(key) && e.contains(bad) && e.contains(why),
                "{v}: {e}"
            );
        }
        for (k, v) in [
            ("S3_LIFECYCLED__CLUSTER__FILER", "http://127.0.0.1:18888"),
            ("S3_LIFECYCLED__CLUSTER__FILER", "[::1]:18888,filer-2:18888"),
            ("S3_LIFECYCLED__CLUSTER__MASTER", "m:9333.19333"),
            ("S3_LIFECYCLED__CLUSTER__MASTER", "m:19333"),
        ] {
            assert!(Settings::load(None, env(&[(k, v)])).is_ok(), "{v}");
        }
    }

    #[test]
    fn tail_budget_below_one_mark_per_shard_is_rejected_naming_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__TAIL_BUDGET", "15")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pass.tail_budget") && e.contains("at least 16"),
            "{e}"
        );
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__TAIL_BUDGET", "16")])).unwrap();
        assert_eq!(s.pass.tail_budget, 16);
        assert_eq!(
            Settings::load(None, env(&[])).unwrap().pass.tail_budget,
            1 << 20
        );
    }

    #[test]
    fn invalid_values_name_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__SHARDS", "3-20")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("pass.shards") && e.contains("20"), "{e}");
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__TIME__DAY", "soon")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
        let e = Settings::load(
            None,
            env(&[(
                "S3_LIFECYCLED__CURSOR__DIR",
                "/etc/s3/lifecycle/daily-cursors",
            )]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cursor.dir"), "{e}");
        let e = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__PASS__CONFIG_REFRESH", "10ms")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("pass.config_refresh") && e.contains("100ms"),
            "{e}"
        );
        for bad in ["0", "1.5", "-0.1", "NaN"] {
            let e = Settings::load(
                None,
                env(&[("S3_LIFECYCLED__PASS__WALK_BUDGET_FRACTION", bad)]),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("pass.walk_budget_fraction") && e.contains("(0, 1]"),
                "{bad}: {e}"
            );
        }
        let s = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__PASS__WALK_BUDGET_FRACTION", "0.25")]),
        )
        .unwrap();
        assert_eq!(s.pass.walk_budget_fraction, 0.25);
        for ok in ["0", "100ms", "5s"] {
            Settings::load(None, env(&[("S3_LIFECYCLED__PASS__CONFIG_REFRESH", ok)]))
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn pass_buckets_from_env_list_and_toml_array() {
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__BUCKETS", "a, b,,c")])).unwrap();
        assert_eq!(s.pass.buckets, vec!["a", "b", "c"]);
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__BUCKETS", "solo")])).unwrap();
        assert_eq!(s.pass.buckets, vec!["solo"]);
        let s = Settings::load(None, env(&[])).unwrap();
        assert!(s.pass.buckets.is_empty());
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-b-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("b.toml");
        std::fs::write(&f, "[pass]\nbuckets = [\"x\", \"y\"]\n").unwrap();
        let s = Settings::load(Some(&f), env(&[])).unwrap();
        assert_eq!(s.pass.buckets, vec!["x", "y"]);
    }

    #[test]
    fn call_timeouts_must_be_positive() {
        for key in ["DISPATCH__CALL_TIMEOUT", "CLUSTER__FILER_CALL_TIMEOUT"] {
            let var = format!("S3_LIFECYCLED__{key}");
            let e = Settings::load(None, env(&[(var.as_str(), "0")]))
                .unwrap_err()
                .to_string();
            let dotted = key.to_lowercase().replace("__", ".");
            assert!(e.contains(&dotted) && e.contains("deadline"), "{e}");
            let s = Settings::load(None, env(&[(var.as_str(), "2s")])).unwrap();
            assert!(
                s.dispatch.call_timeout == Duration::from_secs(2)
                    || s.cluster.filer_call_timeout == Duration::from_secs(2)
            );
        }
    }

    #[test]
    fn shard_lists() {
        assert_eq!(parse_shards("0-15").unwrap().len(), 16);
        assert_eq!(parse_shards("3, 1,3,2-4").unwrap(), vec![1, 2, 3, 4]);
        assert!(parse_shards("").is_err());
        assert!(parse_shards("5-2").is_err());
        assert!(parse_shards("16").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "h", "10", "10x", "-1s", "99999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn duration_forms_of_the_old_parser_still_parse() {
        let secs = Duration::from_secs;
        for (s, want) in [
            ("90s", secs(90)),
            ("5m", secs(300)),
            ("2d", secs(172_800)),
            ("24h", secs(86_400)),
            ("1d2h3m4s5ms", secs(93_784) + Duration::from_millis(5)),
            // Units in any order, repeated, summed.
            ("30m1h", secs(5400)),
            ("1m1m", secs(120)),
            ("0s", Duration::ZERO),
            ("007s", secs(7)),
            // Whitespace around the value (an env override, a TOML string).
            (" 0 ", Duration::ZERO),
            ("\t10s\n", secs(10)),
            // The old ceiling: u32::MAX of the largest unit.
            ("4294967295d", MAX_DURATION),
            ("4294967295ms", Duration::from_millis(4_294_967_295)),
        ] {
            assert_eq!(parse_duration(s), Ok(want), "{s:?}");
        }
    }

    #[test]
    fn duration_errors_quote_the_value_and_show_the_forms() {
        for bad in ["soon", "10", "99999999999d"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
            assert!(e.contains("24h") && e.contains("1h30m"), "{e}");
        }
        assert!(parse_duration("4294967295d1s").is_err());
    }

    #[test]
    fn duration_errors_name_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__TIME__DAY", "10x")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("time.day") && e.contains("`10x`"), "{e}");
    }

    #[test]
    fn effective_rate() {
        let mut r = RateSettings::default();
        assert_eq!(r.effective(), None);
        r.deletes_per_second = 10.0;
        assert_eq!(r.effective(), Some((10.0, 20)));
        r.cluster_deletes_per_second = 100.0;
        r.workers = 4;
        r.burst = 7;
        assert_eq!(r.effective(), Some((25.0, 7)));
        r.burst = 0;
        r.cluster_deletes_per_second = 0.2;
        r.workers = 1;
        assert_eq!(r.effective(), Some((0.2, 1)));
    }

    #[test]
    fn schedule() {
        assert_eq!(parse_schedule("00:30").unwrap(), 1800);
        assert!(parse_schedule("24:00").is_err());
        assert!(parse_schedule("noon").is_err());
        assert!(schedule_off("off") && schedule_off(" OFF ") && !schedule_off("00:30"));
    }
}
