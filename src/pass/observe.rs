//! What a pass tells the outside world while it runs: Prometheus metrics
//! ([`Metrics`]) and the [`StatusBoard`], the one place that builds the
//! [`StatusSnapshot`] the status page, `/status.json` and the admin API read
//! (published through a `tokio::sync::watch` channel). The coordinator, the
//! shard actors and the service call it; it never blocks on a reader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::clock::wall_ns;
use crate::engine::DeleteOutcome;
use crate::engine::safety::PauseRecord;
use crate::metrics::Metrics;
use crate::pass::lock;
use crate::pass::report::{PassResult, ShardOutcome};
use crate::status::{
    BucketSummary, DeleteCounts, PassProgress, PassSummary, PausedBucket, RunOutcome, ServiceState,
    ShardPhase, ShardSummary, StatusSnapshot,
};

/// Snapshots are re-published at most this often for counter changes
/// (phase changes and pass boundaries publish at once), so a pass with
/// millions of deletes does not clone the snapshot per delete.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// The one "pass finished" log event of a pass that ran, the same for
/// `serve` and `run-once`.
pub fn log_pass_finished(run_id: &str, r: &PassResult) {
    let totals = r.totals();
    tracing::info!(
        run_id,
        outcome = r.outcome().as_str(),
        shards = r.shards.len(),
        halted = r.halted().count(),
        events = totals.events_scanned,
        events_read = r.replay.events_read,
        ranges_read = r.replay.ranges.len(),
        matches = totals.matches,
        deletes_done = totals.deletes.done,
        truncated = r.truncated.as_deref().unwrap_or(""),
        paused = r.paused_list(),
        held = r.held_list(),
        duration_s = r.duration.as_secs_f64(),
        "pass finished"
    );
}

/// Metrics plus, in `serve`, the status board. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct PassObserver {
    pub metrics: Metrics,
    /// The status board (`None` in `run-once`).
    pub board: Option<Arc<StatusBoard>>,
}

impl PassObserver {
    /// Runs `f` on the board when there is one.
    pub fn board(&self, f: impl FnOnce(&StatusBoard)) {
        if let Some(b) = &self.board {
            f(b);
        }
    }

    /// The paused buckets are now exactly `paused` (metrics and board).
    pub fn paused(&self, paused: &[PauseRecord]) {
        self.metrics
            .paused_buckets(paused.iter().map(|r| r.bucket.as_str()));
        self.board(|b| b.set_paused(paused));
    }

    /// The forecast after a pass (docs/forecast.md): the lag gauges and the
    /// status page's chart.
    pub fn forecast(&self, f: crate::engine::forecast::Forecast) {
        self.metrics.forecast(&f);
        self.board(|b| b.set_forecast(f));
    }

    /// A delete of `shard` in `bucket` ended as `outcome` after waiting
    /// `limiter_wait` for the rate limiter (metrics and board).
    pub fn delete_done(
        &self,
        shard: u8,
        req: &crate::engine::DeleteRequest,
        outcome: DeleteOutcome,
        limiter_wait: Duration,
    ) {
        self.metrics.dispatch(&req.bucket, req.kind, outcome);
        // Neither a dry run nor a withdrawn call
        // (docs/lifecycle-config.md#changes-during-a-pass) was sent: their
        // waits would skew the limiter histogram.
        if !matches!(outcome, DeleteOutcome::DryRun | DeleteOutcome::Withdrawn) {
            self.metrics.limiter_wait(limiter_wait);
        }
        self.board(|b| b.delete_done(shard, &req.bucket, outcome));
    }

    /// The supervisor restarted `shard` (metrics and board).
    pub fn shard_restarted(&self, shard: u8) {
        self.metrics.shard_restarted(shard);
        self.board(|b| b.shard_restarted(shard));
    }

    /// The pass ended as `result`: each shard's counters, decisions, halts
    /// and recovery walks, what the replay read, the held buckets, the bytes
    /// freed and the touched collections (metrics), each shard's outcome
    /// (board), and the pass's outcome.
    pub fn pass_ended(&self, result: &PassResult) {
        let m = &self.metrics;
        for r in &result.shards {
            let (rep, c) = (&r.report, &r.report.counters);
            let o = rep.outcome.in_pass(result.truncated.is_some());
            m.events_scanned(rep.shard, c.events_scanned);
            m.skipped_no_mtime(rep.shard, c.skipped_no_mtime);
            for ((kind, decision), n) in &c.decisions {
                m.matched_n(*kind, *decision, *n);
            }
            let deletes = c.deletes.total();
            m.shard_run_finished(rep.shard, o, r.duration, c.events_scanned, deletes);
            m.shard_halted(rep.shard, rep.outcome == ShardOutcome::Halted);
            for (_, reason) in &rep.recovery {
                m.recovered(reason.as_str());
            }
            self.board(|b| b.shard_finished(rep.shard, o));
        }
        let read = &result.replay;
        m.replay_read(read.events_read, read.ranges.len(), read.span_ns());
        m.go_worker_shards(result.go_worker.shards().len());
        self.board(|b| b.set_go_worker(&result.go_worker));
        let held = result.held.iter();
        m.held_buckets(held.map(|h| (h.bucket.as_str(), h.would_delete.saturating_sub(h.cap))));
        m.freed(&result.freed());
        if let Some(r) = &result.reclaim {
            m.collections(&r.collections);
        }
        m.pass_finished(result.outcome(), wall_ns());
    }

    /// A legacy-TTL audit (docs/ttl-audit.md): its gauge and the status page.
    pub fn ttl_audit(&self, r: crate::engine::audit::AuditReport) {
        self.metrics.ttl_audit(&r);
        self.board(|b| b.set_ttl_audit(r));
    }
}

struct BoardState {
    snap: StatusSnapshot,
    /// Restarts per shard since the process started.
    restarts: BTreeMap<u8, u32>,
    /// Per bucket, in the running pass.
    bucket_events: BTreeMap<String, u64>,
    bucket_deletes: BTreeMap<String, DeleteCounts>,
    last_publish: Instant,
}

/// Builds and publishes the [`StatusSnapshot`].
pub struct StatusBoard {
    /// Taken with `pass::lock`: a panic while holding it leaves a
    /// consistent-enough snapshot (plain counters); keep serving it.
    state: Mutex<BoardState>,
    tx: watch::Sender<StatusSnapshot>,
}

impl std::fmt::Debug for StatusBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusBoard").finish_non_exhaustive()
    }
}

impl StatusBoard {
    /// A board publishing to `tx`.
    pub fn new(tx: watch::Sender<StatusSnapshot>) -> StatusBoard {
        let snap = tx.borrow().clone();
        StatusBoard {
            state: Mutex::new(BoardState {
                snap,
                restarts: BTreeMap::new(),
                bucket_events: BTreeMap::new(),
                bucket_deletes: BTreeMap::new(),
                last_publish: Instant::now(),
            }),
            tx,
        }
    }

    fn publish(&self, st: &mut BoardState, force: bool) {
        if force || st.last_publish.elapsed() >= PUBLISH_EVERY {
            st.last_publish = Instant::now();
            self.tx.send_replace(st.snap.clone());
        }
    }

    /// The snapshots as they are published.
    pub fn subscribe(&self) -> watch::Receiver<StatusSnapshot> {
        self.tx.subscribe()
    }

    /// The latest snapshot (not throttled).
    pub fn snapshot(&self) -> StatusSnapshot {
        lock(&self.state).snap.clone()
    }

    /// `f` on the snapshot, published at once.
    fn set(&self, f: impl FnOnce(&mut StatusSnapshot)) {
        let mut st = lock(&self.state);
        f(&mut st.snap);
        self.publish(&mut st, true);
    }

    pub fn set_state(&self, s: ServiceState) {
        self.set(|snap| snap.service_state = s);
    }

    /// Which `serve` this one stands by for (`None`: it runs its shards).
    pub fn set_standby(&self, why: Option<String>) {
        self.set(|snap| snap.standby_reason = why);
    }

    pub fn set_paused(&self, paused: &[PauseRecord]) {
        let rows = paused.iter().map(|r| PausedBucket {
            bucket: r.bucket.clone(),
            paused_ns: r.paused_ns,
            reason: r.reason.clone(),
        });
        self.set(|snap| snap.paused = rows.collect());
    }

    pub fn set_next_pass(&self, ns: Option<i64>) {
        self.set(|snap| snap.next_pass_ns = ns);
    }

    /// The buckets whose rules no pass enforced lately (see
    /// [`crate::status::stale_buckets`]), and the age that makes one stale.
    pub fn set_stale(&self, stale: Vec<crate::status::StaleBucket>, after_ns: i64) {
        let mut st = lock(&self.state);
        if st.snap.stale_buckets != stale || st.snap.stale_after_ns != after_ns {
            st.snap.stale_buckets = stale;
            st.snap.stale_after_ns = after_ns;
            self.publish(&mut st, true);
        }
    }

    /// What the last pass found of the Go worker
    /// (docs/go-cursor.md#another-enforcer).
    pub fn set_go_worker(&self, found: &crate::engine::go_activity::GoActivity) {
        let seen = (!found.is_empty()).then(|| crate::status::GoWorkerSeen {
            shards: found.shards(),
            last_write_ns: found.last_write_ns,
        });
        self.set(|snap| snap.go_worker = seen);
    }

    /// The legacy-TTL audit shown on the status page and in `/status.json`.
    pub fn set_ttl_audit(&self, r: crate::engine::audit::AuditReport) {
        self.set(|snap| snap.ttl_audit = Some(r));
    }

    /// The forecast shown on the status page and in `/status.json`.
    pub fn set_forecast(&self, f: crate::engine::forecast::Forecast) {
        self.set(|snap| snap.forecast = Some(f));
    }

    /// A pass started over `shards`.
    pub fn pass_started(&self, run_id: &str, shards: &[u8]) {
        let mut st = lock(&self.state);
        let now = wall_ns();
        let rows = shards
            .iter()
            .map(|&s| ShardSummary {
                shard: s,
                started_ns: now,
                restarts: st.restarts.get(&s).copied().unwrap_or(0),
                ..ShardSummary::default()
            })
            .collect();
        st.snap.current_pass = Some(PassProgress {
            run_id: run_id.to_string(),
            started_ns: now,
            shards_running: u32::try_from(shards.len()).unwrap_or(u32::MAX),
            shards_done: 0,
            shards: rows,
        });
        st.snap.service_state = match st.snap.service_state {
            ServiceState::ShuttingDown => ServiceState::ShuttingDown,
            _ => ServiceState::Running,
        };
        st.bucket_events.clear();
        st.bucket_deletes.clear();
        self.publish(&mut st, true);
    }

    fn with_shard(&self, shard: u8, force: bool, f: impl FnOnce(&mut ShardSummary)) {
        let mut st = lock(&self.state);
        if let Some(p) = st.snap.current_pass.as_mut()
            && let Some(row) = p.shards.iter_mut().find(|r| r.shard == shard)
        {
            f(row);
        }
        self.publish(&mut st, force);
    }

    pub fn shard_phase(&self, shard: u8, phase: ShardPhase) {
        self.with_shard(shard, true, |r| r.phase = phase);
    }

    /// `n` meta-log events of `bucket` went to `shard` (one update per
    /// replay batch instead of one per event).
    pub fn events(&self, shard: u8, bucket: &str, n: u64) {
        {
            let mut st = lock(&self.state);
            *st.bucket_events.entry(bucket.to_string()).or_default() += n;
        }
        self.with_shard(shard, false, |r| r.events_scanned += n);
    }

    pub fn delete_sent(&self, shard: u8) {
        self.with_shard(shard, false, |r| {
            r.in_flight += 1;
            r.matches += 1;
        });
    }

    /// A delete of `bucket` sent by `shard` ended with `outcome`.
    pub fn delete_done(&self, shard: u8, bucket: &str, outcome: DeleteOutcome) {
        {
            let mut st = lock(&self.state);
            st.bucket_deletes
                .entry(bucket.to_string())
                .or_default()
                .record(outcome);
        }
        self.with_shard(shard, false, |r| {
            r.in_flight = r.in_flight.saturating_sub(1);
            r.deletes.record(outcome);
        });
    }

    pub fn shard_halted(&self, shard: u8, reason: &str) {
        self.with_shard(shard, true, |r| {
            r.halt_reason = Some(reason.to_string());
            r.phase = ShardPhase::Halted;
        });
    }

    pub fn shard_restarted(&self, shard: u8) {
        let n = {
            let mut st = lock(&self.state);
            let n = st.restarts.entry(shard).or_default();
            *n += 1;
            *n
        };
        self.with_shard(shard, true, |r| r.restarts = n);
    }

    /// Shards still running in the current pass, with their in-flight
    /// deletes (for the shutdown log past the deadline).
    pub fn unfinished(&self) -> Vec<(u8, u64)> {
        let st = lock(&self.state);
        (st.snap.current_pass.iter().flat_map(|p| &p.shards))
            .filter(|r| r.finished_ns == 0)
            .map(|r| (r.shard, r.in_flight))
            .collect()
    }

    /// A shard finished its part of the pass.
    pub fn shard_finished(&self, shard: u8, outcome: RunOutcome) {
        let mut st = lock(&self.state);
        if let Some(p) = st.snap.current_pass.as_mut()
            && let Some(row) = p.shards.iter_mut().find(|r| r.shard == shard)
            && row.finished_ns == 0
        {
            row.finished_ns = wall_ns();
            row.outcome = Some(outcome);
            row.phase = match outcome {
                RunOutcome::Failed => ShardPhase::Failed,
                RunOutcome::Halted => ShardPhase::Halted,
                _ => ShardPhase::Done,
            };
            p.shards_done += 1;
            p.shards_running = p.shards_running.saturating_sub(1);
        }
        self.publish(&mut st, true);
    }

    /// The pass ended (or could not start: `result` is `Err`): moves it to
    /// `last_pass` and clears the current pass.
    pub fn pass_finished(&self, run_id: &str, result: &Result<PassResult, String>) {
        let mut st = lock(&self.state);
        let finished = wall_ns();
        let progress = st.snap.current_pass.take();
        let started = progress.as_ref().map_or(finished, |p| p.started_ns);
        let summary = match result {
            Err(e) => PassSummary {
                run_id: run_id.to_string(),
                started_ns: started,
                finished_ns: finished,
                outcome: Some(RunOutcome::Failed),
                shards: progress.map(|p| p.shards).unwrap_or_default(),
                buckets: vec![BucketSummary {
                    bucket: "(pass)".into(),
                    started_ns: started,
                    finished_ns: finished,
                    outcome: Some(RunOutcome::Failed),
                    halt_reason: Some(e.clone()),
                    ..BucketSummary::default()
                }],
                space: None,
            },
            Ok(r) => self.summary(&st, run_id, started, finished, progress, r),
        };
        st.snap.last_pass = Some(summary);
        if st.snap.service_state == ServiceState::Running {
            st.snap.service_state = ServiceState::Idle;
        }
        self.publish(&mut st, true);
    }

    fn summary(
        &self,
        st: &BoardState,
        run_id: &str,
        started: i64,
        finished: i64,
        progress: Option<PassProgress>,
        r: &PassResult,
    ) -> PassSummary {
        let truncated = r.truncated.is_some();
        let live: BTreeMap<u8, ShardSummary> = progress
            .map(|p| p.shards.into_iter().map(|s| (s.shard, s)).collect())
            .unwrap_or_default();
        let shards = r.shards.iter().map(|s| {
            let rep = &s.report;
            let row = live.get(&rep.shard).cloned().unwrap_or_default();
            let (cursor_ts, walked) = s
                .cursor
                .as_ref()
                .map_or((0, 0), |c| (c.ts_ns, c.last_walked_ns));
            ShardSummary {
                shard: rep.shard,
                phase: match rep.outcome {
                    ShardOutcome::Failed => ShardPhase::Failed,
                    ShardOutcome::Halted => ShardPhase::Halted,
                    ShardOutcome::Completed => ShardPhase::Done,
                },
                started_ns: Some(row.started_ns).filter(|&n| n != 0).unwrap_or(started),
                finished_ns: Some(row.finished_ns)
                    .filter(|&n| n != 0)
                    .unwrap_or(finished),
                outcome: Some(rep.outcome.in_pass(truncated)),
                matches: rep.counters.matches,
                in_flight: 0,
                cursor_ts_ns: cursor_ts,
                last_walked_ns: walked,
                halt_reason: rep.halt_reason.clone(),
                restarts: st.restarts.get(&rep.shard).copied().unwrap_or(0),
                events_scanned: rep.counters.events_scanned,
                deletes: rep.counters.deletes.clone(),
                unconfirmed: rep.counters.unconfirmed,
                locked: rep.counters.locked,
                completed_upload_leftovers: rep.counters.completed_upload_leftovers,
            }
        });
        let outcome = r.outcome();
        let errors = r.bucket_errors.iter().map(|e| &e.bucket);
        let names: BTreeSet<&str> = r.buckets.iter().chain(errors).map(String::as_str).collect();
        let freed = crate::engine::reclaim::rows(&r.freed());
        let mut buckets = Vec::new();
        for name in names {
            let mut b = BucketSummary {
                bucket: name.to_string(),
                started_ns: started,
                finished_ns: finished,
                outcome: Some(outcome),
                events_scanned: st.bucket_events.get(name).copied().unwrap_or(0),
                deletes: st.bucket_deletes.get(name).cloned().unwrap_or_default(),
                ..BucketSummary::default()
            };
            if let Some(e) = r.bucket_errors.iter().find(|e| e.bucket == name) {
                b.config_error = Some(e.reason.clone());
                b.outcome = Some(RunOutcome::Failed);
            }
            let cursors = r
                .shards
                .iter()
                .filter_map(|s| s.cursor.as_ref()?.buckets.get(name));
            let replayed = cursors.clone().filter(|bc| !bc.rules.is_empty());
            b.cursor_ts_ns = replayed.map(|bc| bc.ts_ns).min().unwrap_or(0);
            for bc in cursors {
                b.last_walked_ns = b.last_walked_ns.max(bc.last_walked_ns);
                if let Some(h) = &bc.halted
                    && h.contains(&format!(" {name}/"))
                {
                    b.halt_reason = Some(h.clone());
                    b.outcome = Some(RunOutcome::Halted);
                }
            }
            if let Some(h) = r.held.iter().find(|h| h.bucket == name) {
                b.held_reason = Some(h.reason());
            }
            b.deleted = freed.iter().filter(|f| f.bucket == name).cloned().collect();
            buckets.push(b);
        }
        PassSummary {
            run_id: run_id.to_string(),
            started_ns: started,
            finished_ns: finished,
            outcome: Some(outcome),
            shards: shards.collect(),
            buckets,
            space: r.reclaim.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_tracks_a_pass_and_publishes() {
        let (tx, rx) = watch::channel(StatusSnapshot::default());
        let b = StatusBoard::new(tx);
        b.pass_started("r1", &[0, 1]);
        b.delete_sent(1);
        b.delete_done(1, "bk", DeleteOutcome::Done);
        b.shard_finished(0, RunOutcome::Completed);
        let s = b.snapshot();
        let p = s.current_pass.as_ref().unwrap();
        assert_eq!((p.shards_done, p.shards_running), (1, 1));
        assert_eq!(p.shards[1].deletes.done, 1);
        assert_eq!(p.shards[1].in_flight, 0);
        assert_eq!(b.unfinished(), vec![(1, 0)]);
        assert_eq!(rx.borrow().service_state, ServiceState::Running);
        b.pass_finished("r1", &Err("filer down".into()));
        let s = rx.borrow().clone();
        assert!(s.current_pass.is_none());
        assert_eq!(s.last_pass.unwrap().outcome, Some(RunOutcome::Failed));
        assert_eq!(s.service_state, ServiceState::Idle);
    }
}
