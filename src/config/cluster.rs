//! `[cluster]`: where the SeaweedFS cluster is, and the defaults without
//! a master.

use std::time::Duration;

use serde::Deserialize;

use super::values::{de_duration, de_list};
use super::{ConfigError, invalid, require};

/// `[cluster]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// Filer gRPC addresses, `host:port` (filer HTTP port + 10000 by default)
    /// or weed's `host:httpPort.grpcPort`:
    /// one string (the form before lists), a comma-separated string or a
    /// TOML array. The first reachable one serves the pass; the others take
    /// over when it fails (docs/meta-log.md#several-filers). Empty: discovered
    /// from `master` when that is set, else [`DEFAULT_FILER`].
    #[serde(deserialize_with = "de_list")]
    pub filer: Vec<String>,
    /// S3 gRPC addresses, where `LifecycleDelete` is served (S3 port +
    /// 10000), in the same forms as `filer`. Deletes are spread across them.
    /// Empty: discovered from `master` when that is set, else
    /// [`DEFAULT_S3_GRPC`].
    #[serde(deserialize_with = "de_list")]
    pub s3_grpc: Vec<String>,
    /// Master gRPC address (`host:port`, or SeaweedFS's `host:httpPort.grpcPort`),
    /// or several separated by commas as weed's `-master` takes them: the
    /// first that answers leads us to the leader (docs/grpc.md#several-masters).
    /// When set, an empty `filer` or `s3_grpc` list is read from the master's
    /// cluster membership at every pass; empty = no discovery.
    pub master: String,
    /// Buckets root in the filer; empty = ask the filer (`GetFilerConfiguration`).
    pub buckets_root: String,
    /// Deadline of each unary filer call (lookups, listing pages, cursor
    /// load/save, bucket scan); not of the meta-log subscription.
    #[serde(deserialize_with = "de_duration")]
    pub filer_call_timeout: Duration,
    /// SeaweedFS `security.toml` to take the gRPC TLS material from
    /// (`[grpc] ca`, `[grpc.client] cert/key`, `WEED_GRPC_*` overrides).
    /// Empty: `[tls]` when it is set, else the first `security.toml` where
    /// `weed` looks for one ([`find_security_toml`](super::Settings::find_security_toml)); `"none"`:
    /// no file, whatever is there.
    pub security_toml: String,
    /// `security_toml` was not set, and was found where `weed` looks.
    #[serde(skip)]
    pub security_toml_found: bool,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            filer: Vec::new(),
            s3_grpc: Vec::new(),
            master: String::new(),
            buckets_root: String::new(),
            filer_call_timeout: Duration::from_secs(30),
            security_toml: String::new(),
            security_toml_found: false,
        }
    }
}

/// The filer address used when neither `cluster.filer` nor `cluster.master` is set.
pub const DEFAULT_FILER: &str = "127.0.0.1:18888";
/// The S3 gRPC address used when neither `cluster.s3_grpc` nor `cluster.master` is set.
pub const DEFAULT_S3_GRPC: &str = "127.0.0.1:18333";

impl ClusterSettings {
    /// The configured filers: `filer`, else [`DEFAULT_FILER`] without a
    /// master; `None` when they are to be discovered from the master.
    pub fn static_filers(&self) -> Option<Vec<String>> {
        static_or_default(&self.filer, &self.master, DEFAULT_FILER)
    }

    /// The configured S3 gRPC addresses, as [`ClusterSettings::static_filers`].
    pub fn static_s3_grpc(&self) -> Option<Vec<String>> {
        static_or_default(&self.s3_grpc, &self.master, DEFAULT_S3_GRPC)
    }

    /// What discovery is asked for: the static lists, or the master.
    pub fn wanted(&self) -> crate::seaweed::discovery::Wanted {
        crate::seaweed::discovery::Wanted {
            master: self.master.clone(),
            filers: self.static_filers(),
            s3_grpc: self.static_s3_grpc(),
        }
    }

    /// The filers for messages: the list, or where they come from.
    pub fn filer_label(&self) -> String {
        match self.static_filers() {
            Some(list) => list.join(","),
            None => format!("(discovered from master {})", self.master),
        }
    }
}

/// The address dialled for a configured one: weed's `HOST:HTTPPORT.GRPCPORT`
/// names its gRPC port (`HOST:GRPCPORT`); every other form as given.
fn dialled(addr: &str) -> String {
    crate::seaweed::endpoint::ServerAddress::grpc_as_given(addr)
        .unwrap_or_else(|_| addr.to_string())
}

pub(super) fn static_or_default(
    list: &[String],
    master: &str,
    default: &str,
) -> Option<Vec<String>> {
    if !list.is_empty() {
        Some(list.iter().map(|a| dialled(a)).collect())
    } else if master.trim().is_empty() {
        Some(vec![default.to_string()])
    } else {
        None
    }
}

impl ClusterSettings {
    /// The server addresses parse as the pass will dial them, each once.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, list, example) in [
            ("cluster.filer", &self.filer, "127.0.0.1:18888"),
            ("cluster.s3_grpc", &self.s3_grpc, "127.0.0.1:18333"),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for addr in list {
                let port = example.rsplit(':').next().unwrap_or_default();
                require(
                    !addr.contains(char::is_whitespace),
                    key,
                    format!(
                        "`{addr}` is not a gRPC address; give HOST:PORT items, e.g. \
                         [\"{example}\"] or \"{example},10.0.0.2:{port}\""
                    ),
                )?;
                // Parsed as the pass will dial it, so a bad port is a
                // configuration error (exit 2), not a failure at the first pass.
                let options = crate::seaweed::endpoint::EndpointOptions::new();
                let dial = dialled(addr);
                if let Err(e) = crate::seaweed::endpoint::GrpcEndpoint::new(&dial, &options) {
                    let why = e.reason();
                    return Err(invalid(
                        key,
                        format!(
                            "`{addr}` is not a gRPC address ({why}); give HOST:PORT items, e.g. \
                             [\"{example}\"] or \"{example},10.0.0.2:{port}\""
                        ),
                    ));
                }
                let twice = format!("lists `{addr}` twice; give each server once");
                require(seen.insert(dial), key, twice)?;
            }
        }
        // One master, or several as weed's `-master` takes them: `a:9333,b:9333`.
        let mut seen = std::collections::HashSet::new();
        for master in crate::seaweed::discovery::masters(&self.master) {
            require(
                !master.contains(char::is_whitespace),
                "cluster.master",
                format!(
                    "`{master}` is not a master gRPC address; give HOST:PORT, e.g. \
                     127.0.0.1:19333, or several separated by commas"
                ),
            )?;
            crate::seaweed::endpoint::ServerAddress::grpc_as_given(&master)
                .map_err(|e| invalid("cluster.master", e.to_string()))?;
            let twice = format!("lists `{master}` twice; give each master once");
            require(seen.insert(master.clone()), "cluster.master", twice)?;
        }
        Ok(())
    }
}
