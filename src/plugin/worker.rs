//! `s3-lifecycled worker`: one long-lived `WorkerStream` to `weed admin`
//! (docs/plugin-worker.md). It says hello, answers the schema request,
//! heartbeats (periodically and right after every state change), answers
//! detections with one proposal per shard set, runs each execution as one
//! pass through the same Coordinator and ShardActors as `run-once`, reports
//! progress per phase and shard, honours cancels, and reconnects with
//! backoff. Executions in progress are recorded in the state directory, so
//! that after a crash the next process reports them as lost instead of
//! leaving the admin waiting for up to 24 hours.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::config::Settings;
use crate::pass::coordinator::{Coordinator, RunPass};
use crate::pass::observe::{PassObserver, StatusBoard};
use crate::pass::options::{PassOptions, StopSignal};
use crate::pass::report::PassResult;
use crate::pb::plugin::{
    ActivityEvent, ActivitySource, AdminToWorkerMessage, ConfigSchemaResponse, DetectionComplete,
    DetectionProposals, ExecuteJobRequest, JobCompleted, JobProgressUpdate, JobResult, JobState,
    RunDetectionRequest, RunningWork, WorkKind, WorkerAcknowledge, WorkerHeartbeat, WorkerHello,
    WorkerToAdminMessage, admin_to_worker_message::Body as In,
    plugin_control_service_client::PluginControlServiceClient,
    worker_to_admin_message::Body as Out,
};
use crate::plugin::http::{JobResult as Ended, WorkerStats};
use crate::plugin::job::{self, JOB_TYPE};
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
use crate::seaweed::tls::{ClientTls, speaks_tls};
use crate::seaweed::tls_failure::TlsFailure;
use crate::status::{RunOutcome, StatusSnapshot};

/// Pause before dialling again after the stream ended (the admin advises 5 s).
pub const RECONNECT_DELAY: Duration = Duration::from_secs(5);
/// At most one progress update per execution this often (phase changes
/// and finished shards wait for the next tick, not for a new pass).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The text the admin reads as "not now, re-queue" (docs/plugin-worker.md#capacity).
pub const AT_CAPACITY: &str = "executor is at capacity";
/// How the error of a stopped (canceled, shut down) execution begins.
const STOPPED: &str = "pass stopped";
/// What a restarted worker reports for an execution its predecessor lost.
pub const LOST: &str = "worker restarted; job lost";

/// Executions in progress, persisted as `in-flight.json` in the state
/// directory: request id → job id.
#[derive(Debug, Clone)]
pub struct StateDir(PathBuf);

impl StateDir {
    /// The directory (created when missing).
    pub fn open(dir: &Path) -> Result<StateDir, String> {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "weed_admin.state_dir {}: cannot create it ({e}); point it at a writable directory",
                dir.display()
            )
        })?;
        Ok(StateDir(dir.to_path_buf()))
    }

    /// This worker's id: the configured one, else the one kept here, else a
    /// new one (kept here for the next start: a restarted worker must come
    /// back under the same id to report its lost jobs).
    pub fn worker_id(&self, configured: &str) -> Result<String, String> {
        if !configured.trim().is_empty() {
            return Ok(configured.trim().to_string());
        }
        let path = self.0.join("worker-id");
        if let Ok(id) = std::fs::read_to_string(&path)
            && !id.trim().is_empty()
        {
            return Ok(id.trim().to_string());
        }
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".into());
        let id = format!("s3lc-{host}-{:08x}", rand::random::<u32>());
        std::fs::write(&path, &id)
            .map_err(|e| format!("cannot keep the worker id in {}: {e}", path.display()))?;
        Ok(id)
    }

    fn in_flight_path(&self) -> PathBuf {
        self.0.join("in-flight.json")
    }

    /// The executions recorded as in progress.
    pub fn in_flight(&self) -> BTreeMap<String, String> {
        std::fs::read(self.in_flight_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Records `jobs` as the executions in progress (write, then rename, so
    /// a crash mid-write leaves the previous record).
    pub fn save_in_flight(&self, jobs: &BTreeMap<String, String>) {
        let tmp = self.0.join("in-flight.json.tmp");
        let body = serde_json::to_vec(jobs).unwrap_or_default();
        if let Err(e) =
            std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, self.in_flight_path()))
        {
            tracing::warn!(error = %e, dir = %self.0.display(), "cannot record executions in progress");
        }
    }
}

/// One execution in progress.
#[derive(Debug)]
struct Running {
    job_id: String,
    stop: watch::Sender<Option<String>>,
    stage: String,
    percent: f64,
}

/// What the worker shares between its stream sessions and its executions.
#[derive(Clone)]
struct Shared {
    base: Settings,
    id: String,
    slots: u32,
    state: StateDir,
    running: Arc<Mutex<BTreeMap<String, Running>>>,
    /// TLS of the stream to the admin (`[grpc.worker]`); `None`: plaintext.
    tls: Option<ClientTls>,
    /// Whether a stream was ever accepted: a TLS refusal before that is a
    /// configuration error (exit), after it a reason to reconnect.
    connected: Arc<std::sync::atomic::AtomicBool>,
    /// One registry for every job of the process, served on
    /// `weed_admin.metrics_listen`.
    metrics: crate::metrics::Metrics,
    /// Jobs by result, executions running, stream up.
    stats: WorkerStats,
    /// Messages for the admin from executions; a session forwards them, so a
    /// completion made while the stream was down goes out on the next one.
    outbox: mpsc::UnboundedSender<Out>,
    /// Pokes the session to heartbeat now (a state change).
    changed: mpsc::UnboundedSender<()>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persist(&self) {
        let jobs: BTreeMap<String, String> = self
            .lock()
            .iter()
            .map(|(r, j)| (r.clone(), j.job_id.clone()))
            .collect();
        self.state.save_in_flight(&jobs);
    }

    fn heartbeat(&self) -> Out {
        let running = self.lock();
        Out::Heartbeat(WorkerHeartbeat {
            worker_id: self.id.clone(),
            running_work: running
                .values()
                .map(|r| RunningWork {
                    work_id: r.job_id.clone(),
                    kind: WorkKind::Execution.into(),
                    job_type: JOB_TYPE.into(),
                    state: JobState::Running.into(),
                    progress_percent: r.percent,
                    stage: r.stage.clone(),
                })
                .collect(),
            detection_slots_used: 0,
            detection_slots_total: 1,
            execution_slots_used: i32::try_from(running.len()).unwrap_or(i32::MAX),
            execution_slots_total: i32::try_from(self.slots).unwrap_or(i32::MAX),
            queued_jobs_by_type: Default::default(),
            metadata: [("runtime".to_string(), "s3-lifecycled".to_string())]
                .into_iter()
                .collect(),
        })
    }
}

fn envelope(id: &str, body: Out) -> WorkerToAdminMessage {
    WorkerToAdminMessage {
        worker_id: id.to_string(),
        sent_at: Some(timestamp(crate::clock::wall_ns())),
        body: Some(body),
    }
}

fn timestamp(ns: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ns.div_euclid(1_000_000_000),
        nanos: i32::try_from(ns.rem_euclid(1_000_000_000)).unwrap_or(0),
    }
}

fn completed(
    request_id: &str,
    job_id: &str,
    success: bool,
    error: &str,
    result: Option<JobResult>,
) -> Out {
    Out::JobCompleted(JobCompleted {
        request_id: request_id.into(),
        job_id: job_id.into(),
        // The admin ignores a completion without it (docs/plugin-worker.md#execution).
        job_type: JOB_TYPE.into(),
        success,
        error_message: error.into(),
        result,
        activities: Vec::new(),
        completed_at: Some(timestamp(crate::clock::wall_ns())),
    })
}

fn progress(request_id: &str, job_id: &str, percent: f64, stage: &str, message: String) -> Out {
    Out::JobProgressUpdate(JobProgressUpdate {
        request_id: request_id.into(),
        job_id: job_id.into(),
        job_type: JOB_TYPE.into(),
        // The admin copies the state verbatim; only running keeps the job active.
        state: JobState::Running.into(),
        progress_percent: percent,
        stage: stage.into(),
        message,
        metrics: Default::default(),
        activities: Vec::new(),
        updated_at: Some(timestamp(crate::clock::wall_ns())),
    })
}

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
    let state = match StateDir::open(Path::new(&w.state_dir)) {
        Ok(s) => s,
        Err(e) => return Err(WorkerError::Config(e.to_string())),
    };
    let id = match state.worker_id(&w.worker_id) {
        Ok(i) => i,
        Err(e) => return Err(WorkerError::Config(e.to_string())),
    };
    let grpc = match crate::seaweed::endpoint::ServerAddress::parse(&w.address) {
        Ok(g) => g.grpc(),
        Err(e) => return Err(WorkerError::Config(format!("weed admin address {e}"))),
    };
    let tls = match admin_tls(&base) {
        Ok(t) => t,
        Err(e) => return Err(WorkerError::Config(e.to_string())),
    };
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

/// Whether TLS is why the stream to `addr` failed: with TLS, the last
/// handshake's failure; without, whether the admin answers TLS (a plaintext
/// client only sees "connection closed", docs/tls.md#how-failures-surface).
async fn tls_cause(tls: Option<&ClientTls>, addr: &str) -> Option<TlsFailure> {
    match tls {
        Some(t) => t.diagnose(addr).await,
        None => speaks_tls(addr).await.then_some(TlsFailure::Required),
    }
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

/// One stream: hello, then messages both ways until it breaks (`Err`) or
/// shutdown (`Ok`).
async fn session(
    shared: &Shared,
    grpc: &str,
    lost: &mut Vec<(String, String)>,
    outbox_rx: &mut mpsc::UnboundedReceiver<Out>,
    changed_rx: &mut mpsc::UnboundedReceiver<()>,
    shutdown: &mut watch::Receiver<Option<&'static str>>,
) -> Result<(), String> {
    if let Some(t) = &shared.tls {
        // Rotated [grpc.worker] files are used from the next stream on (docs/tls.md#rotation).
        t.refresh().await;
    }
    let endpoint = GrpcEndpoint::new(grpc, &EndpointOptions::seaweed().tls(shared.tls.clone()))
        .map_err(|e| format!("weed admin {grpc}: {e}"))?;
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("weed admin {grpc}: cannot connect ({e}); is it the admin's worker gRPC port (HTTP + 10000, or host:http.grpc)?"))?;
    let mut client = PluginControlServiceClient::new(channel)
        .max_decoding_message_size(crate::seaweed::endpoint::MAX_MESSAGE_BYTES);
    let (tx, rx) = mpsc::channel::<WorkerToAdminMessage>(256);
    let id = shared.id.clone();
    let hello = Out::Hello(WorkerHello {
        worker_id: id.clone(),
        worker_instance_id: format!("inst-{:08x}", rand::random::<u32>()),
        address: std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        worker_version: job::worker_version(),
        protocol_version: "plugin.v1".into(),
        capabilities: vec![job::capability(shared.slots)],
        metadata: [("runtime".to_string(), "s3-lifecycled".to_string())]
            .into_iter()
            .collect(),
    });
    // The hello must be the first message on the stream.
    tx.send(envelope(&id, hello))
        .await
        .map_err(|_| "stream closed".to_string())?;
    let mut inbound = client
        .worker_stream(ReceiverStream::new(rx))
        .await
        .map_err(|s| format!("WorkerStream: {}", s.message()))?
        .into_inner();
    let send = |body: Out| {
        let tx = tx.clone();
        let id = id.clone();
        async move {
            tx.send(envelope(&id, body))
                .await
                .map_err(|_| "stream closed".to_string())
        }
    };
    for (req, job) in lost.drain(..) {
        send(completed(&req, &job, false, LOST, None)).await?;
        shared.stats.job(Ended::Lost);
    }
    send(shared.heartbeat()).await?;
    let mut tick = tokio::time::interval(shared.base.weed_admin.heartbeat_interval);
    tick.tick().await;
    loop {
        tokio::select! {
            msg = inbound.message() => match msg {
                Ok(Some(m)) => {
                    shared.connected.store(true, std::sync::atomic::Ordering::SeqCst);
                    shared.stats.set_connected(true);
                    handle(shared, m, &send).await?
                }
                Ok(None) => return Err("the admin closed the stream".into()),
                Err(s) => return Err(format!("stream error: {} ({:?})", s.message(), s.code())),
            },
            Some(body) = outbox_rx.recv() => send(body).await?,
            Some(()) = changed_rx.recv() => send(shared.heartbeat()).await?,
            _ = tick.tick() => send(shared.heartbeat()).await?,
            _ = shutdown.wait_for(Option::is_some) => {
                tracing::info!("shutting down: stopping executions, then closing the stream");
                for r in shared.lock().values() {
                    let _ = r.stop.send(Some("worker shutting down".into()));
                }
                // Completions go out on this stream while it lasts.
                let deadline = tokio::time::Instant::now() + shared.base.service.shutdown_deadline;
                while !shared.lock().is_empty() && tokio::time::Instant::now() < deadline {
                    if let Ok(Some(body)) = tokio::time::timeout(Duration::from_millis(100), outbox_rx.recv()).await {
                        send(body).await?;
                    }
                }
                while let Ok(body) = outbox_rx.try_recv() {
                    send(body).await?;
                }
                return Ok(());
            }
        }
    }
}

async fn handle<F, Fut>(shared: &Shared, msg: AdminToWorkerMessage, send: &F) -> Result<(), String>
where
    F: Fn(Out) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let Some(body) = msg.body else {
        return Ok(());
    };
    match body {
        In::Hello(h) => {
            if !h.accepted {
                return Err(format!("the admin refused this worker: {}", h.message));
            }
            tracing::info!(message = h.message, "connected to weed admin");
        }
        In::RequestConfigSchema(r) => {
            let ours = r.job_type.is_empty() || r.job_type == JOB_TYPE;
            send(Out::ConfigSchemaResponse(ConfigSchemaResponse {
                request_id: msg.request_id.clone(),
                job_type: r.job_type.clone(),
                success: ours,
                error_message: if ours {
                    String::new()
                } else {
                    format!("job type `{}` is not served here", r.job_type)
                },
                job_type_descriptor: ours.then(job::descriptor),
            }))
            .await?;
        }
        In::RunDetectionRequest(r) => detection(r, send).await?,
        In::ExecuteJobRequest(r) => {
            let job_id = r.job.as_ref().map(|j| j.job_id.clone()).unwrap_or_default();
            let full = u32::try_from(shared.lock().len()).unwrap_or(u32::MAX) >= shared.slots;
            if full {
                // Re-queued by the admin about 200 ms later; never queue here.
                send(completed(&r.request_id, &job_id, false, AT_CAPACITY, None)).await?;
                shared.stats.job(Ended::AtCapacity);
            } else {
                start_execution(shared, r);
            }
        }
        In::CancelRequest(c) => {
            let found = shared
                .lock()
                .get(&c.target_id)
                .map(|r| {
                    r.stop
                        .send(Some(format!("canceled by weed admin: {}", c.reason)))
                })
                .is_some();
            send(Out::Acknowledge(WorkerAcknowledge {
                request_id: msg.request_id.clone(),
                accepted: found,
                message: if found {
                    "stopping: dispatching stops, in-flight deletes drain, cursors are saved".into()
                } else {
                    format!("no execution {} here", c.target_id)
                },
            }))
            .await?;
        }
        In::Shutdown(s) => {
            tracing::info!(
                reason = s.reason,
                "the admin asked this worker to shut down"
            );
        }
    }
    Ok(())
}

async fn detection<F, Fut>(r: RunDetectionRequest, send: &F) -> Result<(), String>
where
    F: Fn(Out) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let complete = |success: bool, error: String, total: usize| {
        Out::DetectionComplete(DetectionComplete {
            request_id: r.request_id.clone(),
            job_type: JOB_TYPE.into(),
            success,
            error_message: error,
            total_proposals: i32::try_from(total).unwrap_or(i32::MAX),
        })
    };
    match job::detect(&r, crate::clock::wall_ns()) {
        Ok(proposals) if proposals.is_empty() => {
            // A detection-stage activity, as the Go detector reports it.
            send(Out::JobProgressUpdate(JobProgressUpdate {
                request_id: r.request_id.clone(),
                job_type: JOB_TYPE.into(),
                activities: vec![ActivityEvent {
                    source: ActivitySource::Detector.into(),
                    message: "skipped: no filer addresses in cluster context".into(),
                    stage: "skipped".into(),
                    details: Default::default(),
                    created_at: Some(timestamp(crate::clock::wall_ns())),
                }],
                ..Default::default()
            }))
            .await?;
            send(complete(true, String::new(), 0)).await
        }
        Ok(proposals) => {
            let n = proposals.len();
            send(Out::DetectionProposals(DetectionProposals {
                request_id: r.request_id.clone(),
                job_type: JOB_TYPE.into(),
                proposals,
                has_more: false,
            }))
            .await?;
            send(complete(true, String::new(), n)).await
        }
        Err(e) => send(complete(false, e, 0)).await,
    }
}

fn start_execution(shared: &Shared, r: ExecuteJobRequest) {
    let job_id = r.job.as_ref().map(|j| j.job_id.clone()).unwrap_or_default();
    let (stop_tx, stop) = StopSignal::new();
    shared.lock().insert(
        r.request_id.clone(),
        Running {
            job_id: job_id.clone(),
            stop: stop_tx,
            stage: "starting".into(),
            percent: 0.0,
        },
    );
    shared.persist();
    shared.stats.set_running(shared.lock().len());
    let _ = shared.changed.send(());
    let shared = shared.clone();
    // On the actix System's thread: the pass starts its own Coordinator.
    actix::spawn(async move {
        let request_id = r.request_id.clone();
        let out = execute(&shared, r, &job_id, stop).await;
        shared.lock().remove(&request_id);
        shared.persist();
        shared.stats.set_running(shared.lock().len());
        if let Out::JobCompleted(c) = &out {
            shared.stats.job(if c.success {
                Ended::Succeeded
            } else if c.error_message.starts_with(STOPPED) {
                Ended::Canceled
            } else {
                Ended::Failed
            });
        }
        let _ = shared.outbox.send(out);
        let _ = shared.changed.send(());
    });
}

/// Runs one execution and answers its completion.
async fn execute(shared: &Shared, r: ExecuteJobRequest, job_id: &str, stop: StopSignal) -> Out {
    let req_id = r.request_id.clone();
    let fail = |e: String| {
        tracing::warn!(request_id = req_id, job_id, error = %e, "execution failed");
        completed(&req_id, job_id, false, &e, None)
    };
    if let Some(ctx) = &r.cluster_context {
        tracing::info!(
            request_id = req_id,
            job_id,
            filers = ?ctx.filer_addresses,
            s3 = ?ctx.s3_grpc_addresses,
            masters = ?ctx.master_grpc_addresses,
            "execution requested"
        );
    }
    let plan = match job::plan(&r, &shared.base) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let wa = &shared.base.weed_admin;
    if !wa.allow_other_enforcers
        && let Err(e) =
            crate::plugin::enforcer::check_settings(&shared.base, Some(&shared.id)).await
    {
        return fail(e);
    }
    let s = plan.settings.clone();
    let rate = match s.rate.effective() {
        Some((r, b)) => format!("rate={r}/s burst={b} ({})", plan.rate_source),
        None => "rate=unlimited".into(),
    };
    let _ = shared.outbox.send(progress(
        &req_id,
        job_id,
        0.0,
        "starting",
        format!(
            "s3-lifecycled pass over shards {} filer={} s3={} {rate}",
            s.pass.shards,
            s.cluster.filer.join(","),
            s.cluster.s3_grpc.join(",")
        ),
    ));
    let tls = match s.client_tls() {
        Ok(t) => t,
        Err(e) => return fail(e.to_string()),
    };
    let (cluster, deletes) = match crate::pass::cluster::connect_cluster(&s, tls).await {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let (snap_tx, snap_rx) = watch::channel(StatusSnapshot::default());
    let board = Arc::new(StatusBoard::new(snap_tx));
    let obs = PassObserver {
        metrics: shared.metrics.clone(),
        board: Some(board.clone()),
    };
    let coordinator = actix::Actor::start(Coordinator::with_observer(
        Arc::new(cluster),
        Arc::new(deletes),
        obs,
    ));
    let run_id = crate::pass::new_run_id();
    board.pass_started(&run_id, &plan.shards);
    let opts = PassOptions {
        now: crate::clock::wall_ns(),
        shards: plan.shards.clone(),
        dry_run: false,
        settings: s,
        run_id: run_id.clone(),
        stop: stop.clone(),
    };
    let reporter = actix::spawn(report_progress(
        shared.clone(),
        req_id.clone(),
        job_id.to_string(),
        snap_rx,
    ));
    let result = match coordinator.send(RunPass(opts)).await {
        Ok(r) => r,
        Err(e) => Err(format!("coordinator stopped: {e}")),
    };
    reporter.abort();
    board.pass_finished(&run_id, &result);
    match result {
        Err(e) => fail(e),
        Ok(result) => finish(&req_id, job_id, &run_id, &result, stop.current()),
    }
}

/// Progress per phase and per shard: one update when the shard phases or
/// the finished count change, at most every [`PROGRESS_EVERY`].
async fn report_progress(
    shared: Shared,
    req_id: String,
    job_id: String,
    mut snaps: watch::Receiver<StatusSnapshot>,
) {
    let mut last = String::new();
    loop {
        if snaps.changed().await.is_err() {
            return;
        }
        let Some(p) = snaps.borrow_and_update().current_pass.clone() else {
            continue;
        };
        let total = p.shards.len().max(1);
        let done = p.shards.iter().filter(|s| s.outcome.is_some()).count();
        let phases: Vec<String> = p
            .shards
            .iter()
            .map(|s| format!("{:02}:{}", s.shard, s.phase.as_str()))
            .collect();
        let key = phases.join(" ");
        if key != last {
            last = key.clone();
            let percent = 100.0 * done as f64 / total as f64;
            let deletes: u64 = p.shards.iter().map(|s| s.deletes.total()).sum();
            let events: u64 = p.shards.iter().map(|s| s.events_scanned).sum();
            let stage = dominant_phase(&p.shards);
            if let Some(r) = shared.lock().get_mut(&req_id) {
                r.stage = stage.clone();
                r.percent = percent;
            }
            let _ = shared.outbox.send(progress(
                &req_id,
                &job_id,
                percent,
                &stage,
                format!("{done}/{total} shards done, events={events} deletes={deletes}; {key}"),
            ));
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

fn dominant_phase(shards: &[crate::status::ShardSummary]) -> String {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for s in shards.iter().filter(|s| s.outcome.is_none()) {
        *counts.entry(s.phase.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(p, _)| p.to_string())
        .unwrap_or_else(|| "finishing".into())
}

/// The completion of a finished pass: summary, output values, and success
/// unless a shard halted, the pass failed, or it was stopped (cancel,
/// shutdown). A pass cut by `pass.max_runtime` is a success: it saved its
/// cursors and the next one goes on from there.
fn finish(
    req_id: &str,
    job_id: &str,
    run_id: &str,
    r: &PassResult,
    stopped: Option<String>,
) -> Out {
    let mut totals = crate::pass::report::Counters::default();
    for s in &r.shards {
        totals.add(&s.report.counters);
    }
    let halted: Vec<String> = r
        .shards
        .iter()
        .filter(|s| s.report.outcome == crate::pass::report::ShardOutcome::Halted)
        .map(|s| {
            format!(
                "{:02} ({})",
                s.report.shard,
                s.report.halt_reason.as_deref().unwrap_or("halted")
            )
        })
        .collect();
    let shards: Vec<u8> = r.shards.iter().map(|s| s.report.shard).collect();
    let outcome = r.outcome();
    let d = &totals.deletes;
    let summary = format!(
        "s3-lifecycled pass {run_id} over shards {}: {outcome}; deleted={} events={} matches={} pending={} halted_shards={} in {:.1}s",
        job::shards_label(&shards),
        d.done,
        totals.events_scanned,
        totals.matches,
        totals.pending,
        halted.len(),
        r.duration.as_secs_f64()
    );
    let mut out: std::collections::HashMap<String, crate::pb::plugin::ConfigValue> = d
        .by_label()
        .into_iter()
        .map(|(k, v)| (format!("deletes_{k}"), job::int(v as i64)))
        .collect();
    for (k, v) in [
        ("deleted", d.done),
        ("events_scanned", totals.events_scanned),
        ("matches", totals.matches),
        ("pending", totals.pending),
        ("unconfirmed", totals.unconfirmed),
        ("locked", totals.locked),
        ("halted_shards", halted.len() as u64),
        (
            "duration_ms",
            u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
        ),
    ] {
        out.insert(k.into(), job::int(i64::try_from(v).unwrap_or(i64::MAX)));
    }
    out.insert("run_id".into(), job::string(run_id));
    out.insert("outcome".into(), job::string(outcome.as_str()));
    out.insert("shards".into(), job::string(job::shards_label(&shards)));
    if !halted.is_empty() {
        out.insert("halted".into(), job::string(halted.join("; ")));
    }
    let result = Some(JobResult {
        output_values: out,
        summary: summary.clone(),
    });
    let error = if let Some(e) = &r.error {
        Some(format!("pass failed: {e}"))
    } else if let Some(why) = stopped {
        Some(format!(
            "{STOPPED} ({why}); cursors saved where the shards stopped"
        ))
    } else if outcome == RunOutcome::Halted {
        Some(format!(
            "{} shard(s) halted: {}; the next pass retries from their cursors",
            halted.len(),
            halted.join("; ")
        ))
    } else {
        None
    };
    tracing::info!(request_id = req_id, job_id, summary, "execution finished");
    match error {
        None => completed(req_id, job_id, true, "", result),
        Some(e) => completed(req_id, job_id, false, &e, result),
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
