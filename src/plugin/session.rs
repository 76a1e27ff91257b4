//! One `WorkerStream` session with the admin: the hello, heartbeats
//! (periodic and on every state change), answers to schema requests,
//! detections and cancels, and the hand-off of executions.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::pb::plugin::{
    ActivityEvent, ActivitySource, AdminToWorkerMessage, ConfigSchemaResponse, DetectionComplete,
    DetectionProposals, JobProgressUpdate, RunDetectionRequest, WorkerAcknowledge, WorkerHello,
    WorkerToAdminMessage, admin_to_worker_message::Body as In,
    plugin_control_service_client::PluginControlServiceClient,
    worker_to_admin_message::Body as Out,
};
use crate::plugin::execute::start_execution;
use crate::plugin::http::JobResult as Ended;
use crate::plugin::job::{self, JOB_TYPE};
use crate::plugin::shared::{Shared, completed, timestamp};
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};

/// The text the admin reads as "not now, re-queue" (docs/plugin-worker.md#capacity).
pub const AT_CAPACITY: &str = "executor is at capacity";
/// What a restarted worker reports for an execution its predecessor lost.
pub const LOST: &str = "worker restarted; job lost";

fn envelope(id: &str, body: Out) -> WorkerToAdminMessage {
    WorkerToAdminMessage {
        worker_id: id.to_string(),
        sent_at: Some(timestamp(crate::clock::wall_ns())),
        body: Some(body),
    }
}

/// One stream: hello, then messages both ways until it breaks (`Err`) or
/// shutdown (`Ok`).
pub(super) async fn session(
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
    let send = |body: Out| {
        let tx = tx.clone();
        let id = id.clone();
        async move {
            tx.send(envelope(&id, body))
                .await
                .map_err(|_| "stream closed".to_string())
        }
    };
    // The hello must be the first message on the stream.
    send(hello).await?;
    let mut inbound = client
        .worker_stream(ReceiverStream::new(rx))
        .await
        .map_err(|s| format!("WorkerStream: {}", s.message()))?
        .into_inner();
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
        In::Shutdown(s) => tracing::info!(
            reason = s.reason,
            "the admin asked this worker to shut down"
        ),
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
