//! What a pass did, as one value: per shard its outcome and counters, for the
//! pass the buckets skipped, paused, held and approved, and what replay read.
//! Pure data with the few questions every audience asks of it (the worst
//! outcome, the saved cursors); the summary line, JSON, the admin API, the
//! plugin outputs and the metrics each render it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::engine::cursor::ShardCursor;
use crate::engine::go_activity::GoActivity;
use crate::engine::reclaim::{FreedByRule, PlacedByBucket, ReclaimReport, merge_all, merge_placed};
use crate::engine::safety::{Held, PauseRecord};
use crate::engine::{ActionKind, Nanos};
use crate::lifecycle::BucketError;
use crate::pass::plan::RecoveryReason;
use crate::status::{DeleteCounts, MatchDecision, RunOutcome};

/// Per-shard counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Meta-log events routed to this shard.
    pub events_scanned: u64,
    /// Matches seen (walker and replay).
    pub matches: u64,
    /// Replay matches not yet due.
    pub pending: u64,
    /// Objects, versions and uploads skipped because they have no real mtime
    /// (docs/filer-layout.md#entries-without-attributes): never deleted.
    pub skipped_no_mtime: u64,
    pub deletes: DeleteCounts,
    /// Matches left unresolved (retried next pass, no halt) because a
    /// "nothing to do" answer could not be confirmed by a filer lookup, or
    /// an abort's completion-stamp check could not decide.
    pub unconfirmed: u64,
    /// Matches left unresolved because their version is under an active
    /// object lock (retried next pass).
    pub locked: u64,
    /// `.uploads/<id>` folders of uploads that were in fact completed: never
    /// aborted (docs/lifecycle-delete.md#completed-upload-leftovers).
    pub completed_upload_leftovers: u64,
    /// Matches by action kind and what was done with them (for
    /// `s3_lifecycled_matches_total`; `skipped` = resolved in an earlier pass).
    pub decisions: BTreeMap<(ActionKind, MatchDecision), u64>,
    /// What the DONE deletes removed, per bucket and rule
    /// (docs/reclaimed-space.md).
    pub freed: FreedByRule,
    /// The volumes the DONE deletes' data was in, per bucket: what says
    /// which collections the reclaim report reads
    /// (docs/reclaimed-space.md#which-collections).
    pub placed: PlacedByBucket,
}

impl Counters {
    /// The buckets a `DONE` answer came from (the freed tally counts every
    /// one): where a filer crash may have lost deletes
    /// (docs/meta-log.md#filer-crash).
    pub fn buckets_deleted_in(&self) -> std::collections::BTreeSet<&str> {
        self.freed.keys().map(|(b, _)| b.as_str()).collect()
    }

    pub fn decided(&mut self, kind: ActionKind, decision: MatchDecision) {
        *self.decisions.entry((kind, decision)).or_default() += 1;
    }

    /// Adds `other` into `self` (O(outcomes + kinds), not O(deletes)).
    pub fn add(&mut self, other: &Counters) {
        self.events_scanned += other.events_scanned;
        self.matches += other.matches;
        self.pending += other.pending;
        self.skipped_no_mtime += other.skipped_no_mtime;
        self.unconfirmed += other.unconfirmed;
        self.locked += other.locked;
        self.completed_upload_leftovers += other.completed_upload_leftovers;
        self.deletes.add(&other.deletes);
        for (k, v) in &other.decisions {
            *self.decisions.entry(*k).or_default() += v;
        }
        merge_all(&mut self.freed, &other.freed);
        merge_placed(&mut self.placed, &other.placed);
    }
}

/// How a shard's pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardOutcome {
    /// Everything ran; the cursor advanced as far as the log allowed.
    Completed,
    /// An unresolved delete stopped the shard; reason recorded.
    Halted,
    /// The shard could not run (cursor unreadable, crashed, stream broken).
    Failed,
}

impl ShardOutcome {
    /// The shard's [`RunOutcome`] within a pass that was (or was not) cut
    /// short: a completed shard of a truncated pass is `truncated`.
    pub fn in_pass(self, truncated: bool) -> RunOutcome {
        match self {
            ShardOutcome::Failed => RunOutcome::Failed,
            ShardOutcome::Halted => RunOutcome::Halted,
            ShardOutcome::Completed if truncated => RunOutcome::Truncated,
            ShardOutcome::Completed => RunOutcome::Completed,
        }
    }

    /// `completed`, `halted` or `failed`: the [`RunOutcome`] label.
    pub fn as_str(self) -> &'static str {
        self.in_pass(false).as_str()
    }
}

/// One shard's summary for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardReport {
    pub shard: u8,
    pub outcome: ShardOutcome,
    /// Buckets with enabled actions in this pass.
    pub buckets: usize,
    /// Distinct rules across those buckets.
    pub rules: usize,
    pub counters: Counters,
    /// Whether any walk ran on this shard.
    pub walker_ran: bool,
    /// Buckets recovered (or attempted), with the reason.
    pub recovery: Vec<(String, RecoveryReason)>,
    /// Why the shard halted or failed.
    pub halt_reason: Option<String>,
    /// Buckets whose walk stopped on an unresolved walker delete (the shard
    /// went on without them), with the first reason. Non-empty makes the
    /// shard `Halted`: that bucket's due deletions wait for the next pass.
    pub walk_failures: Vec<(String, String)>,
}

impl ShardReport {
    /// The report of a shard that could not run its pass at all.
    pub fn failed(shard: u8, reason: String) -> ShardReport {
        ShardReport {
            shard,
            outcome: ShardOutcome::Failed,
            buckets: 0,
            rules: 0,
            counters: Counters::default(),
            walker_ran: false,
            recovery: Vec::new(),
            halt_reason: Some(reason),
            walk_failures: Vec::new(),
        }
    }
}

/// One shard's result with its wall time.
#[derive(Debug, Clone)]
pub struct ShardResult {
    pub report: ShardReport,
    /// Time from pass start to the shard's finish.
    pub duration: Duration,
    /// The cursor the shard ended with (saved unless dry run); `None` when
    /// the shard failed.
    pub cursor: Option<ShardCursor>,
    /// Whether this pass saved `cursor` (stamped with the pass's `now`, as
    /// the store stamps it): it is then the filer's copy, and `serve`
    /// refreshes the forecast from it instead of reading it back
    /// (docs/forecast.md#refresh). `false` in a dry run, when the save
    /// failed and when the shard failed.
    pub saved: bool,
}

/// What a pass did.
#[derive(Debug, Clone, Default)]
pub struct PassResult {
    /// The pass's `now`.
    pub now: Nanos,
    /// Buckets in the pass (with enabled actions, after `pass.buckets`).
    pub buckets: Vec<String>,
    /// Buckets skipped for configuration errors.
    pub bucket_errors: Vec<BucketError>,
    /// The names in `pass.buckets` the cluster does not have (each also in
    /// `bucket_errors`, with the buckets that do exist).
    pub unknown_buckets: Vec<String>,
    /// Buckets left alone because an operator paused them (their cursor
    /// state was kept; docs/filer-layout.md#pause-files).
    pub paused: Vec<PauseRecord>,
    /// Buckets the deletion cap held in this pass (their remaining matches
    /// stay pending until `approve`).
    pub held: Vec<Held>,
    /// Buckets whose approval this pass used (and removed).
    pub approved: Vec<String>,
    /// Per shard, in shard order.
    pub shards: Vec<ShardResult>,
    /// A runtime error that failed the pass (stream broken, save failed…).
    pub error: Option<String>,
    /// Why the pass was cut short (`pass.max_runtime`, shutdown), if it was.
    /// Cursors were saved where they were.
    pub truncated: Option<String>,
    /// Wall time of the pass.
    pub duration: Duration,
    /// What the replay read of the meta-log.
    pub replay: ReplayRead,
    /// How much of what the pass deleted is still on disk, and the vacuum
    /// (docs/reclaimed-space.md); `None` when nothing was deleted or
    /// reports are off.
    pub reclaim: Option<ReclaimReport>,
    /// The shards the Go worker ran since this service's last pass over
    /// them (docs/go-cursor.md#another-enforcer).
    pub go_worker: GoActivity,
}

/// What one pass's replay read of the meta-log (docs/due-index.md#reading).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayRead {
    /// The merged `(since, until]` ranges subscribed to, oldest first.
    pub ranges: Vec<(Nanos, Nanos)>,
    /// Events the subscriptions delivered (every bucket, routed or not).
    pub events_read: u64,
    /// `ReplayBatch` messages those events reached the shards in (one per
    /// shard per up to 512 events; docs/meta-log.md#replay-batches).
    pub batches: u64,
}

impl ReplayRead {
    /// The summed length of the ranges, in ns.
    pub fn span_ns(&self) -> i64 {
        self.ranges.iter().map(|r| r.1.saturating_sub(r.0)).sum()
    }
}

impl PassResult {
    /// What the pass's DONE deletes removed, per bucket and rule, over
    /// every shard.
    pub fn freed(&self) -> FreedByRule {
        let mut out = FreedByRule::new();
        for r in &self.shards {
            merge_all(&mut out, &r.report.counters.freed);
        }
        out
    }

    /// The cursors this pass saved, by shard: what the filer holds for
    /// those shards now (docs/forecast.md#refresh).
    pub fn saved_cursors(&self) -> BTreeMap<u8, ShardCursor> {
        self.shards
            .iter()
            .filter(|s| s.saved)
            .filter_map(|s| s.cursor.clone().map(|c| (s.report.shard, c)))
            .collect()
    }

    /// Every shard's counters added up.
    pub fn totals(&self) -> Counters {
        let mut t = Counters::default();
        for s in &self.shards {
            t.add(&s.report.counters);
        }
        t
    }

    /// The shards that halted, in shard order.
    pub fn halted(&self) -> impl Iterator<Item = &ShardReport> {
        self.shards
            .iter()
            .map(|s| &s.report)
            .filter(|r| r.outcome == ShardOutcome::Halted)
    }

    /// `bucket: reason` of every bucket the cap held, `; `-separated (the
    /// summary line's `held=`).
    pub fn held_list(&self) -> String {
        self.held
            .iter()
            .map(|h| format!("{}: {}", h.bucket, h.reason()))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The paused buckets the pass left alone, comma-separated (the
    /// summary line's `paused=`).
    pub fn paused_list(&self) -> String {
        self.paused
            .iter()
            .map(|p| p.bucket.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The worst of the shards' outcomes ([`RunOutcome`]'s one ordering:
    /// failed > halted > truncated > completed); `failed` on a runtime error.
    pub fn outcome(&self) -> RunOutcome {
        let truncated = self.truncated.is_some();
        let base = if self.error.is_some() {
            RunOutcome::Failed
        } else if truncated {
            RunOutcome::Truncated
        } else {
            RunOutcome::Completed
        };
        self.shards
            .iter()
            .map(|s| s.report.outcome.in_pass(truncated))
            .fold(base, RunOutcome::worst)
    }
}
