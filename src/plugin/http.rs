//! The worker's HTTP endpoint (`weed_admin.metrics_listen`,
//! docs/plugin-worker.md#metrics): `/metrics` with the same pass metrics as
//! `serve` (one registry for every job of the process, so deletes by outcome,
//! events read and pass durations add up across jobs) followed by the
//! worker's own job counters, and `/health`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::{self, Metrics};

/// How an execution ended, as counted by `s3_lifecycled_worker_jobs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum JobResult {
    /// Completed with `success = true`.
    Succeeded,
    /// Completed with `success = false` (halted shard, failed pass, refused).
    Failed,
    /// Stopped by the admin's cancel or by shutdown; cursors saved.
    Canceled,
    /// Answered "executor is at capacity" (the admin re-queues it).
    AtCapacity,
    /// Lost by a previous process of this worker and reported as failed.
    Lost,
}

impl JobResult {
    pub fn as_str(self) -> &'static str {
        match self {
            JobResult::Succeeded => "succeeded",
            JobResult::Failed => "failed",
            JobResult::Canceled => "canceled",
            JobResult::AtCapacity => "at_capacity",
            JobResult::Lost => "lost",
        }
    }
}

/// The worker's own series: jobs by result, executions running, and
/// whether the stream to the admin is up. Cheap to clone; clones share.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    jobs: Arc<Mutex<BTreeMap<JobResult, u64>>>,
    running: Arc<AtomicU64>,
    connected: Arc<AtomicBool>,
}

impl WorkerStats {
    /// Counts one job that ended as `r`.
    pub fn job(&self, r: JobResult) {
        *self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(r)
            .or_default() += 1;
    }

    /// Executions in progress now.
    pub fn set_running(&self, n: usize) {
        self.running.store(n as u64, Ordering::Relaxed);
    }

    /// Whether the admin accepted the current stream.
    pub fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
    }

    /// Prometheus text (0.0.4) of the worker's series; every result label is
    /// present from the start so rates need no `absent()`.
    pub fn encode(&self) -> String {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut out = String::from(
            "# HELP s3_lifecycled_worker_jobs_total Executions of s3_lifecycle jobs by how they ended\n\
             # TYPE s3_lifecycled_worker_jobs_total counter\n",
        );
        for r in [
            JobResult::Succeeded,
            JobResult::Failed,
            JobResult::Canceled,
            JobResult::AtCapacity,
            JobResult::Lost,
        ] {
            out.push_str(&format!(
                "s3_lifecycled_worker_jobs_total{{result=\"{}\"}} {}\n",
                r.as_str(),
                jobs.get(&r).copied().unwrap_or(0)
            ));
        }
        out.push_str(&format!(
            "# HELP s3_lifecycled_worker_executions_running Executions in progress on this worker\n\
             # TYPE s3_lifecycled_worker_executions_running gauge\n\
             s3_lifecycled_worker_executions_running {}\n\
             # HELP s3_lifecycled_worker_admin_connected 1 while weed admin has accepted the worker's stream\n\
             # TYPE s3_lifecycled_worker_admin_connected gauge\n\
             s3_lifecycled_worker_admin_connected {}\n",
            self.running.load(Ordering::Relaxed),
            u8::from(self.connected.load(Ordering::Relaxed)),
        ));
        out
    }
}

#[derive(Clone)]
struct HttpState {
    metrics: Metrics,
    stats: WorkerStats,
}

/// `/metrics` and `/health`.
pub fn router(metrics: Metrics, stats: WorkerStats) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/health", get(|| async { "ok\n" }))
        .with_state(HttpState { metrics, stats })
}

async fn metrics_text(State(s): State<HttpState>) -> Response {
    let mut body = s.metrics.encode();
    body.push_str(&s.stats.encode());
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_counters_list_every_result_and_count_each_end() {
        let s = WorkerStats::default();
        s.job(JobResult::Succeeded);
        s.job(JobResult::Succeeded);
        s.job(JobResult::AtCapacity);
        s.set_running(1);
        s.set_connected(true);
        let t = s.encode();
        assert!(
            t.contains("s3_lifecycled_worker_jobs_total{result=\"succeeded\"} 2\n"),
            "{t}"
        );
        assert!(
            t.contains("s3_lifecycled_worker_jobs_total{result=\"at_capacity\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("s3_lifecycled_worker_jobs_total{result=\"lost\"} 0\n"),
            "{t}"
        );
        assert!(
            t.contains("s3_lifecycled_worker_executions_running 1\n"),
            "{t}"
        );
        assert!(
            t.contains("s3_lifecycled_worker_admin_connected 1\n"),
            "{t}"
        );
    }
}
