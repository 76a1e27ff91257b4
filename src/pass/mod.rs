//! The daily pass: per-bucket recovery planning, retry policy, the per-shard
//! state machine (pure), the cluster ports, and the actors that run a pass
//! (Coordinator → ShardActor → Replay/Walker, plus the DeleteDispatcher). The
//! lifecycle decisions themselves live in [`crate::engine`].

pub mod actors;
pub mod cluster;
pub mod cluster_error;
pub mod coordinator;
pub mod dispatch;
pub mod driver;
pub mod gateways;
pub mod log_streams;
pub mod migrate;
pub mod observe;
pub mod options;
pub mod plan;
pub mod ports;
pub mod prepare;
pub mod reclaim;
pub mod records;
pub mod report;
pub mod retry;
pub mod runner;
pub mod shard_plan;
pub mod shard_run;

/// Locks `m`, going on past a poisoned lock: what the pass guards with one
/// (plain bookkeeping) stays usable after a panic elsewhere.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new pass id: 16 lowercase hex digits, in every log line, journal record
/// and report of the pass.
pub fn new_run_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}
