//! What the worker's stream sessions and its executions share: the table of
//! executions in progress (reported in every heartbeat), the outbox to the
//! admin, and the completion message both of them send.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use crate::config::Settings;
use crate::pb::plugin::{
    JobCompleted, JobResult, JobState, RunningWork, WorkKind, WorkerHeartbeat,
    worker_to_admin_message::Body as Out,
};
use crate::plugin::http::WorkerStats;
use crate::plugin::job::JOB_TYPE;
use crate::plugin::state_dir::StateDir;
use crate::seaweed::tls::ClientTls;

/// One execution in progress.
#[derive(Debug)]
pub(super) struct Running {
    pub(super) job_id: String,
    pub(super) stop: watch::Sender<Option<String>>,
    pub(super) stage: String,
    pub(super) percent: f64,
}

/// What the worker shares between its stream sessions and its executions.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) base: Settings,
    pub(super) id: String,
    pub(super) slots: u32,
    pub(super) state: StateDir,
    pub(super) running: Arc<Mutex<BTreeMap<String, Running>>>,
    /// TLS of the stream to the admin (`[grpc.worker]`); `None`: plaintext.
    pub(super) tls: Option<ClientTls>,
    /// Whether a stream was ever accepted: a TLS refusal before that is a
    /// configuration error (exit), after it a reason to reconnect.
    pub(super) connected: Arc<std::sync::atomic::AtomicBool>,
    /// One registry for every job of the process, served on
    /// `weed_admin.metrics_listen`.
    pub(super) metrics: crate::metrics::Metrics,
    /// Jobs by result, executions running, stream up.
    pub(super) stats: WorkerStats,
    /// Messages for the admin from executions; a session forwards them, so a
    /// completion made while the stream was down goes out on the next one.
    pub(super) outbox: mpsc::UnboundedSender<Out>,
    /// Pokes the session to heartbeat now (a state change).
    pub(super) changed: mpsc::UnboundedSender<()>,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn persist(&self) {
        let jobs: BTreeMap<String, String> = self
            .lock()
            .iter()
            .map(|(r, j)| (r.clone(), j.job_id.clone()))
            .collect();
        self.state.save_in_flight(&jobs);
    }

    pub(super) fn heartbeat(&self) -> Out {
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

pub(super) fn timestamp(ns: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ns.div_euclid(1_000_000_000),
        nanos: i32::try_from(ns.rem_euclid(1_000_000_000)).unwrap_or(0),
    }
}

pub(super) fn completed(
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
