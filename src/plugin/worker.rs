//! `s3-lifecycled worker`: one long-lived `WorkerStream` to `weed admin`
//! (docs/plugin-worker.md). It says hello, answers the schema request,
//! heartbeats (periodically and right after every state change), answers
//! detections with one proposal per shard set, runs each execution as one
//! pass through the same Coordinator and ShardActors as `run-once`, reports
//! progress per phase and shard, honours cancels, and reconnects with
//! backoff. Executions in progress are recorded in the state directory, so
//! that after a crash the next process reports them as lost instead of
//! leaving the admin waiting for up to 24 hours.
//!
//! This file holds the entry point ([`run`]) and the reconnect loop; the
//! stream session is [`crate::plugin::session`], one execution is
//! `plugin::execute`, what both share is `plugin::shared`, and the state
//! directory is [`crate::plugin::state_dir`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::config::Settings;
use crate::pb::plugin::worker_to_admin_message::Body as Out;
use crate::plugin::http::WorkerStats;
use crate::plugin::session::session;
use crate::plugin::shared::Shared;
use crate::plugin::state_dir::StateDir;
use crate::seaweed::tls::{ClientTls, tls_cause};
use crate::seaweed::tls_failure::TlsFailure;

/// Pause before dialling again after the stream ended (the admin advises 5 s).
pub const RECONNECT_DELAY: Duration = Duration::from_secs(5);

/// Why the worker stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// A setting or the state directory cannot be used (the message names it).
    #[error("{0}")]
    Config(String),
    /// TLS to the admin was refused before the first stream came up: the
    /// settings are wrong, not the network.
    #[error("{message}")]
    Tls {
        /// The cause, for the exit code.
        failure: TlsFailure,
        /// What to tell the operator, naming the setting to change.
        message: String,
    },
}

/// Runs the worker until SIGTERM/SIGINT fires `shutdown`. An error is one
/// the worker cannot recover from by reconnecting: bad settings, or TLS to
/// the admin refused before any stream was ever up.
pub async fn run(
    base: Settings,
    mut shutdown: watch::Receiver<Option<&'static str>>,
) -> Result<(), WorkerError> {
    let w = base.weed_admin.clone();
    let state = StateDir::open(Path::new(&w.state_dir)).map_err(WorkerError::Config)?;
    let id = state.worker_id(&w.worker_id).map_err(WorkerError::Config)?;
    let grpc = crate::seaweed::endpoint::ServerAddress::parse(&w.address)
        .map_err(|e| WorkerError::Config(format!("weed admin address {e}")))?
        .grpc();
    let tls = admin_tls(&base).map_err(WorkerError::Config)?;
    let (outbox, mut outbox_rx) = mpsc::unbounded_channel();
    let (changed, mut changed_rx) = mpsc::unbounded_channel();
    let shared = Shared {
        base,
        id: id.clone(),
        slots: w.execution_slots,
        state,
        running: Arc::new(Mutex::new(BTreeMap::new())),
        tls,
        connected: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        metrics: crate::metrics::Metrics::new(),
        stats: WorkerStats::default(),
        outbox,
        changed,
    };
    // Executions a previous process of this id left behind: report each as
    // failed on the first stream, so the admin stops waiting for them.
    let mut lost: Vec<(String, String)> = shared.state.in_flight().into_iter().collect();
    shared.state.save_in_flight(&BTreeMap::new());
    for (req, job) in &lost {
        tracing::warn!(
            request_id = req,
            job_id = job,
            "execution lost by a previous process of this worker; reporting it as failed"
        );
    }
    serve_metrics(&shared, &shutdown)
        .await
        .map_err(WorkerError::Config)?;
    tracing::info!(worker_id = id, admin = grpc, "plugin worker starting");
    loop {
        let ended = session(
            &shared,
            &grpc,
            &mut lost,
            &mut outbox_rx,
            &mut changed_rx,
            &mut shutdown,
        )
        .await;
        match ended {
            Ok(()) => break,
            Err(e) => {
                shared.stats.set_connected(false);
                let ever = shared.connected.load(std::sync::atomic::Ordering::SeqCst);
                if let Some(f) = tls_cause(shared.tls.as_ref(), &grpc).await {
                    let msg = admin_tls_message(&f, &grpc);
                    if !ever {
                        // Never connected: the TLS settings are wrong, not the network.
                        return Err(WorkerError::Tls {
                            failure: f,
                            message: msg,
                        });
                    }
                    tracing::error!(admin = grpc, error = %msg, "TLS to weed admin failed; reconnecting in {RECONNECT_DELAY:?}");
                } else {
                    tracing::warn!(admin = grpc, error = %e, "admin stream ended; reconnecting in {RECONNECT_DELAY:?}")
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RECONNECT_DELAY) => {}
            _ = shutdown.wait_for(Option::is_some) => break,
        }
    }
    drain(&shared, &mut outbox_rx).await;
    Ok(())
}

/// Serves `/metrics` and `/health` on `weed_admin.metrics_listen` (none when
/// empty) until shutdown; a port that cannot be bound is a start-up error.
async fn serve_metrics(
    shared: &Shared,
    shutdown: &watch::Receiver<Option<&'static str>>,
) -> Result<(), String> {
    let addr = shared.base.weed_admin.metrics_listen.trim();
    if addr.is_empty() {
        return Ok(());
    }
    let sa: std::net::SocketAddr = addr.parse().map_err(|e| {
        format!("configuration key `weed_admin.metrics_listen`: `{addr}` is not an IP:port address ({e})")
    })?;
    let listener = tokio::net::TcpListener::bind(sa)
        .await
        .map_err(|e| format!("cannot listen on {sa} (weed_admin.metrics_listen): {e}"))?;
    tracing::info!(addr = %sa, "worker metrics at http://{sa}/metrics");
    let router = crate::plugin::http::router(shared.metrics.clone(), shared.stats.clone());
    let mut stop = shutdown.clone();
    tokio::spawn(crate::http::serve(listener, router, async move {
        let _ = stop.wait_for(Option::is_some).await;
    }));
    Ok(())
}

/// The worker's TLS to the admin, loaded now so bad files are a start-up
/// error (docs/plugin-worker.md#tls).
fn admin_tls(s: &Settings) -> Result<Option<ClientTls>, String> {
    let Some(files) = s
        .admin_tls_files(std::env::vars())
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    ClientTls::load(files).map(Some).map_err(|e| {
        format!(
            "TLS to weed admin from cluster.security_toml ([grpc] ca, [grpc.worker] cert/key): {e}"
        )
    })
}

/// A TLS failure of the stream to the admin, naming the worker's own
/// settings (`[grpc.worker]`, not the cluster's `[grpc.client]`).
pub fn admin_tls_message(f: &TlsFailure, addr: &str) -> String {
    let fix = "the worker's TLS to weed admin is [grpc] ca with [grpc.worker] cert and key in the \
               security.toml named by cluster.security_toml, as for `weed worker`";
    match f {
        TlsFailure::Required => format!(
            "weed admin {addr} requires mutual TLS (its security.toml has [grpc.admin]) and this \
             worker has no client certificate: {fix}"
        ),
        TlsFailure::ClientCertificate(d) => format!(
            "weed admin {addr} refused the worker's client certificate ({d}): {fix}, signed by \
             the CA the admin trusts"
        ),
        other => format!("{} ({fix})", other.message(addr)),
    }
}

/// On shutdown: stop every execution (they save their cursors) and wait,
/// within `service.shutdown_deadline`, for them to finish.
async fn drain(shared: &Shared, outbox_rx: &mut mpsc::UnboundedReceiver<Out>) {
    for r in shared.lock().values() {
        let _ = r.stop.send(Some("worker shutting down".into()));
    }
    let deadline = tokio::time::Instant::now() + shared.base.service.shutdown_deadline;
    while !shared.lock().is_empty() && tokio::time::Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(100), outbox_rx.recv()).await;
    }
    let left = shared.lock().len();
    if left > 0 {
        tracing::error!(
            executions = left,
            "shutdown deadline passed with executions unfinished; the next start reports them as lost"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_tls_failures_name_grpc_worker_not_the_cluster_client_settings() {
        let m = admin_tls_message(&TlsFailure::Required, "127.0.0.1:33646");
        assert!(
            m.contains("requires mutual TLS") && m.contains("[grpc.worker] cert and key"),
            "{m}"
        );
        assert!(m.contains("cluster.security_toml"), "{m}");
        let m = admin_tls_message(
            &TlsFailure::ClientCertificate("bad certificate".into()),
            "127.0.0.1:33646",
        );
        assert!(
            m.contains("refused the worker's client certificate") && m.contains("[grpc.worker]"),
            "{m}"
        );
        let m = admin_tls_message(&TlsFailure::UnknownCa("x".into()), "a:1");
        assert!(
            m.contains("unknown CA") && m.contains("[grpc.worker]"),
            "{m}"
        );
    }
}
