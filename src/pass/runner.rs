//! The one way a pass is started, whatever asked for it (`run-once`, `serve`,
//! the plugin worker): a [`Coordinator`] over a connected cluster runs it, and
//! the caller gets the pass's report or a typed reason it could not run.
//! Rendering the report, and mapping a [`RunError`] to an exit code, is the
//! caller's.

use std::sync::Arc;

use actix::{Actor, Addr};

use crate::config::{ClusterSettings, Settings, VolumeHttps};
use crate::engine::delete::DeleteRequest;
use crate::pass::cluster::SeaweedCluster;
use crate::pass::cluster_error::ClusterError;
use crate::pass::coordinator::{Coordinator, PassError, RunPass};
use crate::pass::dispatch::DeletePort;
use crate::pass::gateways::SeaweedDelete;
use crate::pass::observe::PassObserver;
use crate::pass::options::PassOptions;
use crate::pass::ports::ClusterPort;
use crate::pass::report::PassResult;
use crate::seaweed::logfile::VolumeAccess;
use crate::seaweed::pool::AddressError;
use crate::seaweed::tls::ClientTls;
use crate::seaweed::tls_failure::TlsUse;
use crate::seaweed::weed_form;

/// Why a pass did not run, or did not run to a report.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting cannot work, e.g. a malformed address: the operator must
    /// change it, and retrying does not help.
    #[error("{0}")]
    Config(String),
    /// No filer answered, or discovery failed: retrying later may help.
    /// The source keeps what the transport said, a TLS cause among it
    /// ([`crate::seaweed::tls::HandshakeError::find`]).
    #[error("{message}")]
    Unreachable {
        /// What failed, for the operator.
        message: String,
        /// The error underneath.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The pass started and could not go on (e.g. its bucket scan failed);
    /// it saved no cursor past anything it did not resolve.
    #[error(transparent)]
    Failed(#[from] PassError),
    /// The coordinator's mailbox closed: the actor system is going down.
    #[error("coordinator stopped: {0}")]
    Stopped(#[from] actix::MailboxError),
}

/// `c` with each configured address (`cluster.master`, `cluster.filer`,
/// `cluster.s3_grpc`) read as weed reads it where only that reading answers
/// gRPC (docs/grpc.md#weed-form): what every command that dials the cluster
/// works from.
pub async fn settled_cluster(c: &ClusterSettings, tls: Option<&ClientTls>) -> ClusterSettings {
    let (master, filer, s3_grpc) = tokio::join!(
        weed_form::settle_masters(&c.master, tls),
        weed_form::settle_all("cluster.filer", &c.filer, tls),
        weed_form::settle_all("cluster.s3_grpc", &c.s3_grpc, tls),
    );
    ClusterSettings {
        master,
        filer,
        s3_grpc,
        ..c.clone()
    }
}

/// The cluster and delete adapters for `s`: the configured filers and
/// gateways, or the master's membership (`cluster.master`), which every pass
/// then re-reads (docs/grpc.md#discovery). Build on the main runtime.
pub async fn connect_cluster(
    s: &crate::config::Settings,
    tls: Option<ClientTls>,
) -> Result<(SeaweedCluster, SeaweedDelete), RunError> {
    let direct_log_reads = s.pass.direct_log_reads.then(|| volume_access(s)).flatten();
    let c = settled_cluster(&s.cluster, tls.as_ref()).await;
    let members = crate::seaweed::discovery::resolve(&c.wanted(), tls.as_ref())
        .await
        .map_err(|e| RunError::Unreachable {
            message: e.to_string(),
            source: e.into(),
        })?;
    let deletes = SeaweedDelete::connect_many(&members.s3_grpc, tls.clone())
        .map_err(|e| RunError::Config(format!("configuration key `cluster.s3_grpc`: {e}")))?;
    let cluster = SeaweedCluster::connect_many(
        &members.filers,
        &c.buckets_root,
        &s.cursor.dir,
        s.pass.event_buffer,
        c.filer_call_timeout,
        tls.clone(),
    )
    .await
    .map_err(|e| match e {
        ClusterError::Address(AddressError::Invalid { .. }) => {
            RunError::Config(format!("configuration key `cluster.filer`: {e}"))
        }
        _ => RunError::Unreachable {
            message: format!("filer {}: {e}", members.filers.join(",")),
            source: e.into(),
        },
    })?
    .with_resume_margin(s.pass.reorder_margin)
    .with_direct_log_reads(direct_log_reads)
    .with_master(&c.master, tls.clone());
    let cluster = if c.master.trim().is_empty() {
        cluster
    } else {
        cluster.with_discovery(c, deletes.gateways(), tls)
    };
    Ok((cluster, deletes))
}

/// How the direct log-file reads reach the volume servers: the read token
/// and the HTTPS of `security.toml`, as weed's own HTTP clients have them
/// (docs/meta-log.md#read-tokens, #https-volume-servers). `None` when they
/// cannot: HTTPS s3-lifecycled will not speak, or settings for these reads
/// that do not load. The reads only spare the filer work, so that never
/// stops a pass: the filer streams the files, said once here rather than by
/// a warning per file and pass.
fn volume_access(s: &Settings) -> Option<VolumeAccess> {
    let off = |why: String| {
        tracing::warn!(
            "pass.direct_log_reads is off for this process, the filer streams the meta-log \
             files: {why}"
        );
        None
    };
    let read_key = match s.volume_read_key(std::env::vars()) {
        Ok(k) => k,
        Err(e) => return off(e.to_string()),
    };
    let https = match s.volume_https(std::env::vars()) {
        Ok(VolumeHttps::Plain) => None,
        Ok(VolumeHttps::Tls(files)) => match ClientTls::load_for(files, TlsUse::VolumeHttps) {
            Ok(tls) => Some(tls),
            Err(e) => {
                let st = s.cluster.security_toml.trim();
                return off(format!("cluster.security_toml {st}: {e}"));
            }
        },
        Ok(VolumeHttps::Unverifiable(why)) => return off(why),
        Err(e) => return off(e.to_string()),
    };
    Some(VolumeAccess { read_key, https })
}

/// Runs passes over one cluster, one at a time per caller. Cheap to clone:
/// every clone drives the same Coordinator and its 16 ShardActors.
#[derive(Clone)]
pub struct PassRunner {
    coordinator: Addr<Coordinator>,
}

impl PassRunner {
    /// A runner over an already connected cluster, reporting to `obs`.
    pub fn start(
        cluster: Arc<dyn ClusterPort>,
        deletes: Arc<dyn DeletePort<DeleteRequest>>,
        obs: PassObserver,
    ) -> Self {
        PassRunner {
            coordinator: Coordinator::new(cluster, deletes, obs).start(),
        }
    }

    /// Connects the cluster `s` names (discovery, the store signature, the
    /// gateways) and starts a runner over it.
    pub async fn connect(
        s: &Settings,
        tls: Option<ClientTls>,
        obs: PassObserver,
    ) -> Result<Self, RunError> {
        let (cluster, deletes) = connect_cluster(s, tls).await?;
        Ok(PassRunner::start(Arc::new(cluster), Arc::new(deletes), obs))
    }

    /// Runs one pass to its report. A report is returned for every pass
    /// that reached its shards, halted or truncated ones included.
    pub async fn run(&self, opts: PassOptions) -> Result<PassResult, RunError> {
        self.coordinator
            .send(RunPass(opts))
            .await?
            .map_err(RunError::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seaweed::filer::FilerError;
    use crate::seaweed::tls::HandshakeError;
    use rustls::AlertDescription;
    use std::io;

    /// Settings for the direct reads that do not load turn the reads off,
    /// never the pass: they only spare the filer work.
    #[test]
    fn volume_read_settings_that_do_not_load_turn_direct_reads_off_not_the_pass() {
        let dir = std::env::temp_dir().join(format!("runner-vol-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        let on = |toml: &str| {
            std::fs::write(&file, toml).unwrap();
            volume_access(&s).map(|a| (a.read_key.is_some(), a.https.is_some()))
        };
        assert_eq!(on("[jwt.signing]\nkey = \"w\"\n"), Some((false, false)));
        assert_eq!(on("[jwt.signing.read]\nkey = \"r\"\n"), Some((true, false)));
        let missing = dir.join("missing-ca.crt").display().to_string();
        for off in [
            "[jwt.signing.read]\nkey = \"r\"\nexpires_after_seconds = \"soon\"\n".to_string(),
            format!("[https.client]\nenabled = true\nca = \"{missing}\"\n"),
            "[https.client]\nenabled = true\n".to_string(),
            "[https.client]\nenabled = true\nca = \"/x\"\ncert = \"/c\"\n".to_string(),
        ] {
            assert_eq!(on(&off), None, "{off}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A pass whose preparation failed (its bucket listing, on a filer that
    /// refused our certificate) reached `run-once` as text, and the TLS
    /// cause had to be found by dialling again.
    #[test]
    fn a_pass_that_failed_to_prepare_kept_its_tls_cause() {
        let alert = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(AlertDescription::BadCertificate),
        );
        let status = tonic::Status::from_error(Box::new(HandshakeError::late(alert)));
        let listing = ClusterError::ListBuckets {
            root: "/buckets".into(),
            source: FilerError::Transport {
                op: "ListEntries",
                path: "/buckets".into(),
                status,
            },
        };
        let e = RunError::from(PassError::Prepare(listing));
        assert!(
            e.to_string()
                .starts_with("listing buckets under /buckets: "),
            "{e}"
        );
        assert!(HandshakeError::find(&e).is_some(), "{e:?}");
    }
}
