//! The status model, pure data shared by everything that reports on passes:
//! the [`StatusSnapshot`] (service state, the running pass, the last pass per
//! shard and per bucket), [`ShardPhase`], [`DeleteCounts`], [`RunOutcome`]
//! (with its one ordering) and [`MatchDecision`], plus the time formatting the
//! page and the CLI share. The pass publishes it (`crate::pass::observe`); the
//! HTTP page, the admin API and the CLI read it. It depends on nothing but
//! the engine's [`DeleteOutcome`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::DeleteOutcome;

/// How a shard's run or a whole pass ended (the `outcome` label of the
/// per-run metrics and of `s3_lifecycled_pass_total`).
///
/// The variants are declared from best to worst; `Ord` follows that order,
/// so the outcome of several runs is their maximum ([`RunOutcome::worst`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Everything due was handled and the cursor reached the pass's end.
    Completed,
    /// `pass.max_runtime` ran out (or the service stopped); cursors were
    /// saved where they were.
    Truncated,
    /// A delete came back RETRY_LATER/BLOCKED/RPC_ERROR (or an operator
    /// halted): the cursor stays at the last fully resolved event.
    Halted,
    /// The run failed (cursor load/save, meta-log or listing error).
    Failed,
    /// An outcome number this build does not know, read from a newer
    /// service's admin API; never produced by a pass here.
    Unknown,
}

impl RunOutcome {
    /// Every outcome a pass produces, for clearing stale series.
    pub const ALL: [RunOutcome; 4] = [
        RunOutcome::Completed,
        RunOutcome::Truncated,
        RunOutcome::Halted,
        RunOutcome::Failed,
    ];

    /// The worse of two outcomes.
    pub fn worst(self, other: RunOutcome) -> RunOutcome {
        self.max(other)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Halted => "halted",
            RunOutcome::Truncated => "truncated",
            RunOutcome::Failed => "failed",
            RunOutcome::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the pass did with an action that matched an entry (the `decision`
/// label of `s3_lifecycled_matches_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchDecision {
    /// Due now: a `LifecycleDelete` was sent.
    Dispatched,
    /// Not yet due: left for a later pass.
    Pending,
    /// Matched but deliberately not sent (e.g. shadowed by another rule, or
    /// the entry is not the one the action is for).
    Skipped,
}

impl MatchDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchDecision::Dispatched => "dispatched",
            MatchDecision::Pending => "pending",
            MatchDecision::Skipped => "skipped",
        }
    }
}

/// What the service is doing. Serialized in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    /// Loading configuration, connecting, reading cursors.
    #[default]
    Starting,
    /// Waiting for the next scheduled pass.
    Idle,
    /// A pass is running.
    Running,
    /// Draining in-flight deletes and saving cursors before exit.
    ShuttingDown,
    /// Another live `serve` on the same cursor dir runs our shards; this one
    /// takes over when it is gone (docs/serve-instances.md).
    Standby,
    /// A state number this build does not know (as [`ShardPhase::Unknown`]).
    Unknown,
}

impl ServiceState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Starting => "starting",
            ServiceState::Idle => "idle",
            ServiceState::Running => "running",
            ServiceState::ShuttingDown => "shutting down",
            ServiceState::Standby => "standby",
            ServiceState::Unknown => "unknown",
        }
    }
}

/// Deletes by outcome, one counter per [`DeleteOutcome`]. Serialized with
/// snake_case field names (`/status.json`); `other` counts
/// [`DeleteOutcome::Unspecified`] (the field name predates the enum).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCounts {
    pub done: u64,
    /// NOOP_RESOLVED (already gone, identity changed, …).
    pub noop_resolved: u64,
    pub skipped_object_lock: u64,
    /// RETRY_LATER (halts the shard).
    pub retry_later: u64,
    /// BLOCKED (halts the shard).
    pub blocked: u64,
    /// Transport failure after retries (halts the shard).
    pub rpc_error: u64,
    /// DRY_RUN: decided, not sent (`--dry-run` passes).
    #[serde(default)]
    pub dry_run: u64,
    /// UNSPECIFIED or an unknown outcome number (halts the shard).
    pub other: u64,
    /// WITHDRAWN: not sent (the bucket's configuration changed mid-pass,
    /// the deletion cap held it, or the pass was stopped first).
    #[serde(default)]
    pub withdrawn: u64,
}

impl DeleteCounts {
    fn slot(&mut self, o: DeleteOutcome) -> &mut u64 {
        match o {
            DeleteOutcome::Done => &mut self.done,
            DeleteOutcome::NoopResolved => &mut self.noop_resolved,
            DeleteOutcome::SkippedObjectLock => &mut self.skipped_object_lock,
            DeleteOutcome::RetryLater => &mut self.retry_later,
            DeleteOutcome::Blocked => &mut self.blocked,
            DeleteOutcome::Unspecified => &mut self.other,
            DeleteOutcome::RpcError => &mut self.rpc_error,
            DeleteOutcome::DryRun => &mut self.dry_run,
            DeleteOutcome::Withdrawn => &mut self.withdrawn,
        }
    }

    /// The count of `o`. Read through `slot` on a copy (nine
    /// integers), so the outcome-to-field mapping is written once.
    pub fn get(&self, o: DeleteOutcome) -> u64 {
        *self.clone().slot(o)
    }

    pub fn record(&mut self, o: DeleteOutcome) {
        self.add_n(o, 1);
    }

    /// Counts `n` deletes of outcome `o`.
    pub fn add_n(&mut self, o: DeleteOutcome, n: u64) {
        let s = self.slot(o);
        *s = s.saturating_add(n);
    }

    /// Adds every count of `other` (O(outcomes), whatever the totals).
    pub fn add(&mut self, other: &DeleteCounts) {
        for (o, n) in other.rows() {
            self.add_n(o, n);
        }
    }

    /// Sum of all outcomes but WITHDRAWN (= deletes issued; a withdrawn
    /// delete was never sent).
    pub fn total(&self) -> u64 {
        self.rows()
            .iter()
            .filter(|(o, _)| *o != DeleteOutcome::Withdrawn)
            .fold(0u64, |a, (_, n)| a.saturating_add(*n))
    }

    /// `(outcome, count)` for every outcome, in [`DeleteOutcome::ALL`] order.
    pub fn rows(&self) -> [(DeleteOutcome, u64); 9] {
        DeleteOutcome::ALL.map(|o| (o, self.get(o)))
    }

    /// Every [`DeleteOutcome::REPORTED`] outcome (zeros included) and the
    /// others when non-zero, in [`DeleteOutcome::ALL`] order: what every
    /// report lists.
    pub fn reported(&self) -> impl Iterator<Item = (DeleteOutcome, u64)> {
        self.rows()
            .into_iter()
            .filter(|(o, n)| *n > 0 || DeleteOutcome::REPORTED.contains(o))
    }

    /// `label → count` of the [`reported`](Self::reported) outcomes; the
    /// shape of the admin API and of `run-once --json`.
    pub fn by_label(&self) -> BTreeMap<String, u64> {
        self.reported()
            .map(|(o, n)| (o.label().to_string(), n))
            .collect()
    }
}

/// Where a shard is within a pass. Serialized in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ShardPhase {
    /// Waiting for the walk or the stream to start.
    #[default]
    Waiting,
    /// Walking bucket listings (recovery or steady-state walk).
    Walking,
    /// Replaying the meta-log.
    Replaying,
    /// No new deletes; waiting for in-flight ones, then saving the cursor.
    Draining,
    /// Finished this pass.
    Done,
    /// Halted on an unresolved delete.
    Halted,
    /// Could not run this pass.
    Failed,
    /// A phase number this build does not know, read from a newer
    /// service's admin API (`status` during a rolling upgrade).
    Unknown,
}

impl ShardPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardPhase::Waiting => "waiting",
            ShardPhase::Walking => "walking",
            ShardPhase::Replaying => "replaying",
            ShardPhase::Draining => "draining",
            ShardPhase::Done => "done",
            ShardPhase::Halted => "halted",
            ShardPhase::Failed => "failed",
            ShardPhase::Unknown => "unknown",
        }
    }
}

/// One shard's row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSummary {
    pub shard: u8,
    /// Where the shard is in the pass (meaningful while a pass runs).
    #[serde(default)]
    pub phase: ShardPhase,
    /// When this shard's part of the pass started, ns since epoch; 0 = not yet.
    #[serde(default)]
    pub started_ns: i64,
    /// When it finished, ns since epoch; 0 = not finished.
    #[serde(default)]
    pub finished_ns: i64,
    /// How this shard's run ended; `None` while running.
    #[serde(default)]
    pub outcome: Option<RunOutcome>,
    /// Rule matches seen in this pass (due or not).
    #[serde(default)]
    pub matches: u64,
    /// Deletes sent and not yet answered.
    #[serde(default)]
    pub in_flight: u64,
    /// Saved cursor position, ns since epoch; 0 = cold (no cursor yet).
    pub cursor_ts_ns: i64,
    /// Last successful walk, ns since epoch; 0 = never.
    pub last_walked_ns: i64,
    /// Why the shard is halted, if it is.
    pub halt_reason: Option<String>,
    /// Supervisor restarts since the process started.
    pub restarts: u32,
    /// Meta-log events scanned in this pass.
    pub events_scanned: u64,
    /// Deletes in this pass by outcome.
    pub deletes: DeleteCounts,
    /// Matches left unresolved (retried next pass, no halt) because a
    /// "nothing to do" answer could not be confirmed.
    #[serde(default)]
    pub unconfirmed: u64,
    /// Matches left unresolved because of an object lock.
    #[serde(default)]
    pub locked: u64,
    /// Completed uploads' `.uploads/<id>` folders that were not aborted.
    #[serde(default)]
    pub completed_upload_leftovers: u64,
}

/// One bucket's "Last run" card.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketSummary {
    pub bucket: String,
    /// When the pass started on this bucket, ns since epoch.
    pub started_ns: i64,
    /// When it finished, ns since epoch; 0 = not finished.
    pub finished_ns: i64,
    pub outcome: Option<RunOutcome>,
    /// Meta-log events of this bucket scanned.
    pub events_scanned: u64,
    pub deletes: DeleteCounts,
    /// Last successful walk of the bucket, ns since epoch; 0 = never.
    pub last_walked_ns: i64,
    /// Why the bucket's lifecycle configuration is not enforced, if so.
    pub config_error: Option<String>,
    /// Why a shard stopped enforcing this bucket in the pass, if one did.
    #[serde(default)]
    pub halt_reason: Option<String>,
    /// Oldest saved replay position of the bucket over all shards, ns since
    /// epoch; 0 = cold (no cursor yet).
    #[serde(default)]
    pub cursor_ts_ns: i64,
    /// Why a safety rail held the bucket's deletes in the pass
    /// (`safety cap: would delete X of Y (Z%)…`), if one did.
    #[serde(default)]
    pub held_reason: Option<String>,
    /// What the pass's DONE deletes removed, per rule
    /// (docs/reclaimed-space.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<crate::engine::reclaim::FreedRow>,
}

/// A pass in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassProgress {
    pub run_id: String,
    pub started_ns: i64,
    pub shards_running: u32,
    pub shards_done: u32,
    pub shards: Vec<ShardSummary>,
}

/// A finished pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassSummary {
    pub run_id: String,
    pub started_ns: i64,
    pub finished_ns: i64,
    pub outcome: Option<RunOutcome>,
    pub shards: Vec<ShardSummary>,
    pub buckets: Vec<BucketSummary>,
    /// How much of what the pass deleted is still on disk, and the vacuum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<crate::engine::reclaim::ReclaimReport>,
}

impl PassSummary {
    /// What the pass's DONE deletes removed, per bucket and rule: the bucket
    /// cards' rows, in card order.
    pub fn deleted(&self) -> Vec<crate::engine::reclaim::FreedRow> {
        self.buckets
            .iter()
            .flat_map(|b| b.deleted.clone())
            .collect()
    }
}

/// A rule as the reports name it: its ID, else its hash.
pub fn rule_name<'a>(id: &'a str, hash: &'a str) -> &'a str {
    if id.is_empty() { hash } else { id }
}

/// An outcome's label; a run without one is still `running`.
pub fn outcome_label(o: Option<RunOutcome>) -> &'static str {
    o.map_or("running", RunOutcome::as_str)
}

/// Everything the status page and `/status.json` show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    pub service_state: ServiceState,
    /// While [`ServiceState::Standby`]: which `serve` runs our shards
    /// (docs/serve-instances.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_reason: Option<String>,
    /// Next scheduled pass, ns since epoch, if known.
    pub next_pass_ns: Option<i64>,
    pub current_pass: Option<PassProgress>,
    pub last_pass: Option<PassSummary>,
    /// Buckets an operator paused, as last read from the filer (at service
    /// start, at each pass start, and at each pause/resume through this
    /// instance).
    #[serde(default)]
    pub paused: Vec<PausedBucket>,
    /// Buckets with a lifecycle configuration but no completed pass within
    /// `stale_after_ns` (2 lifecycle days): rules accepted but not enforced.
    #[serde(default)]
    pub stale_buckets: Vec<StaleBucket>,
    /// The age past which a bucket counts as stale, ns.
    #[serde(default)]
    pub stale_after_ns: i64,
    /// What becomes due per bucket and rule, as of the last pass
    /// (docs/forecast.md); `None` until the cursors were read once.
    #[serde(default)]
    pub forecast: Option<crate::engine::forecast::Forecast>,
    /// The last legacy-TTL audit (docs/ttl-audit.md); `None` until one ran.
    #[serde(default)]
    pub ttl_audit: Option<crate::engine::audit::AuditReport>,
    /// The Go worker's passes the last pass found: another enforcer
    /// (docs/go-cursor.md#another-enforcer); `None` when it found none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_worker: Option<GoWorkerSeen>,
}

/// Shards the Go worker ran since this service's last pass over them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoWorkerSeen {
    pub shards: Vec<u8>,
    /// The latest write of those shards' Go cursor files, ns since epoch.
    pub last_write_ns: i64,
}

impl StatusSnapshot {
    /// Keeps only what concerns `bucket` in the per-bucket lists (the last
    /// pass's buckets, the forecast, paused and stale buckets): what
    /// `/status.json?bucket=NAME` serves (docs/forecast.md#status-page).
    pub fn only_bucket(&mut self, bucket: &str) {
        if let Some(p) = self.last_pass.as_mut() {
            p.buckets.retain(|b| b.bucket == bucket);
        }
        if let Some(f) = self.forecast.as_mut() {
            f.rules.retain(|r| r.bucket == bucket);
        }
        self.paused.retain(|p| p.bucket == bucket);
        self.stale_buckets.retain(|s| s.bucket == bucket);
    }
}

/// A paused bucket (`s3-lifecycled pause`): passes leave it alone and its
/// matches stay pending until `resume`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedBucket {
    pub bucket: String,
    /// When it was paused, ns since epoch.
    pub paused_ns: i64,
    /// The operator's note; may be empty.
    #[serde(default)]
    pub reason: String,
}

/// A bucket whose rules no pass has enforced lately.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleBucket {
    pub bucket: String,
    /// The oldest over the 16 shards of the last pass that finished the
    /// bucket without a halt, wall ns; 0 = some shard never did.
    pub last_completed_ns: i64,
}

/// The buckets (with a lifecycle configuration) that not every one of the 16
/// shards has finished, without a halt, within `max_age_ns` of `now_ns`.
/// `cursors` holds every shard's saved cursor (`None` = never saved). A
/// bucket counts as enforced only when all shards did it recently: each
/// shard owns a part of its keys.
pub fn stale_buckets(
    buckets: &[String],
    cursors: &[Option<crate::engine::cursor::ShardCursor>],
    now_ns: i64,
    max_age_ns: i64,
) -> Vec<StaleBucket> {
    buckets
        .iter()
        .filter_map(|b| {
            let last = if cursors.len() < crate::engine::SHARD_COUNT {
                0
            } else {
                cursors
                    .iter()
                    .map(|c| {
                        c.as_ref()
                            .and_then(|c| c.buckets.get(b))
                            .map_or(0, |bc| bc.completed_ns)
                    })
                    .min()
                    .unwrap_or(0)
            };
            (last == 0 || now_ns.saturating_sub(last) > max_age_ns).then(|| StaleBucket {
                bucket: b.clone(),
                last_completed_ns: last,
            })
        })
        .collect()
}

pub use crate::engine::time::format_time;

/// Age `now - then` as `1d 2h`, `3h 4m`, `5m 6s` or `7s`; `—` when `then`
/// is 0 (never) and `in the future` when the clocks disagree.
pub fn format_age(now_ns: i64, then_ns: i64) -> String {
    if then_ns == 0 {
        return "—".into();
    }
    let d = now_ns.saturating_sub(then_ns);
    if d < 0 {
        return "in the future".into();
    }
    let s = d / 1_000_000_000;
    let (days, h, m, sec) = (s / 86_400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if days > 0 {
        format!("{days}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {sec}s")
    } else {
        format!("{sec}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_outcome_order_is_completed_truncated_halted_failed() {
        use RunOutcome::*;
        assert_eq!(Completed.worst(Truncated), Truncated);
        assert_eq!(Halted.worst(Truncated), Halted);
        assert_eq!(Halted.worst(Failed), Failed);
        assert_eq!(Failed.worst(Completed), Failed);
        let mut sorted = RunOutcome::ALL;
        sorted.sort();
        assert_eq!(sorted, RunOutcome::ALL);
    }

    #[test]
    fn delete_counts_have_one_slot_per_outcome() {
        let mut d = DeleteCounts::default();
        for (i, o) in DeleteOutcome::ALL.into_iter().enumerate() {
            d.add_n(o, i as u64 + 1);
        }
        for (i, o) in DeleteOutcome::ALL.into_iter().enumerate() {
            assert_eq!(d.get(o), i as u64 + 1, "{o}");
        }
        // WITHDRAWN (the ninth) was never issued: not in the total.
        assert_eq!(d.total(), (1..=8).sum::<u64>());
        let mut twice = d.clone();
        twice.add(&d);
        assert_eq!(twice.total(), 2 * d.total());
        let by = d.by_label();
        assert_eq!(by.len(), 9);
        assert_eq!(by["WITHDRAWN"], 9);
        assert_eq!(by["DONE"], 1);
        assert_eq!(by["DRY_RUN"], 7);
        assert_eq!(by["LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED"], 8);
        let mut one = DeleteCounts::default();
        one.record(DeleteOutcome::Done);
        let by = one.by_label();
        assert_eq!(
            by.len(),
            7,
            "unspecified and withdrawn only when seen: {by:?}"
        );
        assert!(!by.contains_key(DeleteOutcome::Unspecified.label()));
    }

    #[test]
    fn adding_huge_counts_is_constant_time_and_saturates() {
        // A summary of a pass with billions of deletes must not loop per delete.
        let mut d = DeleteCounts::default();
        d.add_n(DeleteOutcome::Done, u64::MAX - 1);
        d.add_n(DeleteOutcome::Done, 5);
        assert_eq!(d.done, u64::MAX);
    }

    #[test]
    fn a_bucket_is_stale_until_every_shard_finished_it_recently() {
        use crate::engine::cursor::{BucketCursor, ShardCursor};
        let cursor = |stamp: i64| {
            let fresh = BucketCursor {
                completed_ns: stamp,
                ..Default::default()
            };
            Some(ShardCursor {
                version: 1,
                buckets: [("fresh".to_string(), fresh)].into(),
                ..Default::default()
            })
        };
        let names = vec!["fresh".to_string(), "never".to_string()];
        let all: Vec<_> = (0..16).map(|_| cursor(100)).collect();
        let stale = stale_buckets(&names, &all, 150, 100);
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].bucket, "never");
        assert_eq!(stale[0].last_completed_ns, 0);
        // Too old.
        assert_eq!(stale_buckets(&names, &all, 300, 100).len(), 2);
        // One shard never saved: the bucket is not enforced everywhere.
        let mut holes = all.clone();
        holes[7] = None;
        assert_eq!(stale_buckets(&names, &holes, 150, 100).len(), 2);
        // One shard halted on it ever since an old pass: its old stamp counts.
        let mut old = all;
        old[3] = cursor(10);
        let s = stale_buckets(&names, &old, 150, 100);
        assert_eq!(
            s.iter()
                .find(|b| b.bucket == "fresh")
                .unwrap()
                .last_completed_ns,
            10
        );
    }
}
