//! Conversions between the status types the pass publishes
//! ([`crate::status`]) and the admin API's protobuf messages, both ways: the
//! service sends what `/status.json` and the status page show, and the CLI
//! reads it back into the same types to print it.

use std::collections::HashMap;

use crate::engine::DeleteOutcome;
use crate::engine::reclaim::{CollectionGarbage, FreedRow, ReclaimReport, VacuumReport};
use crate::pb::admin as pb;
use crate::status::{
    BucketSummary, DeleteCounts, GoWorkerSeen, PassProgress, PassSummary, PausedBucket, RunOutcome,
    ServiceState, ShardPhase, ShardSummary, StatusSnapshot,
};

/// `$T` with the fields both sides name alike copied from `$v`, then the
/// fields given after `;` and the rest: a conversion and its inverse below
/// each list a shared field once.
macro_rules! like {
    ($($T:ident)::+, $v:ident: $($f:ident),* $(; $($g:ident: $e:expr),+)? $(; ..$rest:expr)?) => {
        $($T)::+ { $($f: Clone::clone(&$v.$f),)* $($($g: $e,)+)? $(..$rest)? }
    };
}

/// The delete-count map: every [`DeleteOutcome::REPORTED`](crate::engine::delete::DeleteOutcome::REPORTED) key always
/// present, `LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED` only when non-zero.
pub fn deletes_map(d: &DeleteCounts) -> HashMap<String, u64> {
    d.by_label().into_iter().collect()
}

/// The service state as the protobuf enum.
pub fn service_state(s: ServiceState) -> pb::ServiceState {
    match s {
        ServiceState::Starting => pb::ServiceState::Starting,
        ServiceState::Idle => pb::ServiceState::Idle,
        ServiceState::Running => pb::ServiceState::Running,
        ServiceState::ShuttingDown => pb::ServiceState::ShuttingDown,
        ServiceState::Standby => pb::ServiceState::Standby,
        ServiceState::Unknown => pb::ServiceState::Unspecified,
    }
}

/// A run outcome as the protobuf enum; `None` (still running) is UNSPECIFIED.
pub fn run_outcome(o: Option<RunOutcome>) -> pb::RunOutcome {
    match o {
        None => pb::RunOutcome::Unspecified,
        Some(RunOutcome::Completed) => pb::RunOutcome::Completed,
        Some(RunOutcome::Halted) => pb::RunOutcome::Halted,
        Some(RunOutcome::Truncated) => pb::RunOutcome::Truncated,
        Some(RunOutcome::Failed) => pb::RunOutcome::Failed,
        Some(RunOutcome::Unknown) => pb::RunOutcome::Unspecified,
    }
}

/// A shard phase as the protobuf enum.
pub fn shard_phase(p: ShardPhase) -> pb::ShardPhase {
    match p {
        ShardPhase::Waiting => pb::ShardPhase::Waiting,
        ShardPhase::Walking => pb::ShardPhase::Walking,
        ShardPhase::Replaying => pb::ShardPhase::Replaying,
        ShardPhase::Draining => pb::ShardPhase::Draining,
        ShardPhase::Done => pb::ShardPhase::Done,
        ShardPhase::Halted => pb::ShardPhase::Halted,
        ShardPhase::Failed => pb::ShardPhase::Failed,
        ShardPhase::Unknown => pb::ShardPhase::Unspecified,
    }
}

/// [`deletes_map`] read back; a label this build does not know counts as
/// unspecified rather than vanishing.
pub fn deletes_from_map(m: &HashMap<String, u64>) -> DeleteCounts {
    let mut d = DeleteCounts::default();
    for (label, n) in m {
        let o = DeleteOutcome::from_label(label).unwrap_or(DeleteOutcome::Unspecified);
        d.add_n(o, *n);
    }
    d
}

/// The value of `all` that `to_pb` puts on the wire as `v`: each `*_from_pb`
/// is the inverse of its `to_pb`, so the two cannot disagree.
fn from_pb<D: Copy, P: Into<i32>>(all: &[D], to_pb: impl Fn(D) -> P, v: i32) -> Option<D> {
    all.iter().copied().find(|d| to_pb(*d).into() == v)
}

/// A run outcome read back; UNSPECIFIED (still running) is `None`, a number
/// this build does not know is [`RunOutcome::Unknown`] (not "running").
fn outcome_from_pb(v: i32) -> Option<RunOutcome> {
    let known = from_pb(&RunOutcome::ALL, |o| run_outcome(Some(o)), v);
    known.or((v != 0).then_some(RunOutcome::Unknown))
}

/// A shard number read back (shards are 0..15).
fn shard_from_pb(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// `finish - cursor`, where finish is the row's own finish, else the pass's;
/// 0 when the cursor is cold or the run unfinished (a lag against "never"
/// would be a meaningless huge number).
pub fn cursor_lag_ns(finished_ns: i64, pass_finished_ns: i64, cursor_ts_ns: i64) -> i64 {
    let finish = Some(finished_ns)
        .filter(|f| *f != 0)
        .unwrap_or(pass_finished_ns);
    if cursor_ts_ns == 0 || finish == 0 {
        0
    } else {
        finish.saturating_sub(cursor_ts_ns).max(0)
    }
}

/// One shard of the running pass.
pub fn shard_progress(s: &ShardSummary) -> pb::ShardProgress {
    like! { pb::ShardProgress, s: events_scanned, matches, in_flight, halt_reason, restarts;
    shard: u32::from(s.shard), phase: shard_phase(s.phase) as i32, deletes: deletes_map(&s.deletes) }
}

/// The running pass.
pub fn pass_progress(p: &PassProgress) -> pb::PassProgress {
    like! { pb::PassProgress, p: run_id, shards_running, shards_done;
    start_ns: p.started_ns, shards: p.shards.iter().map(shard_progress).collect() }
}

/// `GetStatus`: state, running pass, next pass. The last pass is served by
/// `GetLastRun` instead, so a status poll stays small.
pub fn status_response(s: &StatusSnapshot) -> pb::GetStatusResponse {
    pb::GetStatusResponse {
        state: service_state(s.service_state) as i32,
        current_pass: s.current_pass.as_ref().map(pass_progress),
        next_pass_ns: s.next_pass_ns,
        paused: s
            .paused
            .iter()
            .map(|p| like! { pb::PausedBucket, p: bucket, paused_ns, reason })
            .collect(),
        standby_reason: s.standby_reason.clone(),
        go_worker: s.go_worker.as_ref().map(|g| pb::GoWorkerSeen {
            shards: g.shards.iter().copied().map(u32::from).collect(),
            last_write_ns: g.last_write_ns,
        }),
    }
}

/// [`status_response`] read back (`status`); what `GetStatus` does not
/// carry stays at its default.
pub fn status_from_pb(s: &pb::GetStatusResponse) -> StatusSnapshot {
    use ServiceState::*;
    use ShardPhase::*;
    let phases = [Waiting, Walking, Replaying, Draining, Done, Halted, Failed];
    let states = [Starting, Idle, Running, ShuttingDown, Standby];
    let shard = |r: &pb::ShardProgress| {
        like! { ShardSummary, r: events_scanned, matches, in_flight, halt_reason, restarts;
        shard: shard_from_pb(r.shard), phase: from_pb(&phases, shard_phase, r.phase).unwrap_or(ShardPhase::Unknown),
        deletes: deletes_from_map(&r.deletes); ..Default::default() }
    };
    StatusSnapshot {
        service_state: from_pb(&states, service_state, s.state).unwrap_or(ServiceState::Unknown),
        next_pass_ns: s.next_pass_ns,
        current_pass: s.current_pass.as_ref().map(|p| {
            like! { PassProgress, p: run_id, shards_running, shards_done;
            started_ns: p.start_ns, shards: p.shards.iter().map(shard).collect() }
        }),
        paused: s
            .paused
            .iter()
            .map(|p| like! { PausedBucket, p: bucket, paused_ns, reason })
            .collect(),
        standby_reason: s.standby_reason.clone(),
        go_worker: s.go_worker.as_ref().map(|g| GoWorkerSeen {
            shards: g.shards.iter().map(|&n| shard_from_pb(n)).collect(),
            last_write_ns: g.last_write_ns,
        }),
        ..Default::default()
    }
}

/// One shard of a finished pass. A shard without its own finish time is
/// measured against the pass's.
pub fn shard_run(s: &ShardSummary, pass_finish_ns: i64) -> pb::ShardRun {
    like! { pb::ShardRun, s: events_scanned, matches, halt_reason, cursor_ts_ns, restarts, unconfirmed, locked,
    completed_upload_leftovers;
    shard: u32::from(s.shard), start_ns: s.started_ns, finish_ns: s.finished_ns,
    outcome: run_outcome(s.outcome) as i32, deletes: deletes_map(&s.deletes),
    cursor_lag_ns: cursor_lag_ns(s.finished_ns, pass_finish_ns, s.cursor_ts_ns), last_walk_ns: s.last_walked_ns }
}

/// One bucket of a finished pass.
pub fn bucket_run(b: &BucketSummary, pass_finish_ns: i64) -> pb::BucketRun {
    like! { pb::BucketRun, b: bucket, events_scanned, halt_reason, cursor_ts_ns, config_error, held_reason;
    start_ns: b.started_ns, finish_ns: b.finished_ns, outcome: run_outcome(b.outcome) as i32,
    deletes: deletes_map(&b.deletes), last_walk_ns: b.last_walked_ns,
    cursor_lag_ns: cursor_lag_ns(b.finished_ns, pass_finish_ns, b.cursor_ts_ns),
    deleted: b.deleted.iter().map(|f| like! { pb::RuleDeleted, f: rule, objects, bytes }).collect() }
}

/// The reclaimed-space report on the wire.
pub fn space_to_pb(r: &ReclaimReport) -> pb::SpaceReport {
    like! { pb::SpaceReport, r: settled, error;
    collections: r.collections.iter().map(|c| like! { pb::CollectionSpace, c: collection, volumes, size_bytes,
    garbage_bytes, ec_volumes, ec_deleted_bytes, read_only_volumes, read_only_deleted_bytes }).collect(),
    vacuum: r.vacuum.as_ref().map(|v| like! { pb::VacuumResult, v: skipped, vacuumed, deferred, left_to_master,
    failed, size_before, size_after }) }
}

/// [`space_to_pb`] read back (`status --last`).
pub fn space_from_pb(r: &pb::SpaceReport) -> ReclaimReport {
    like! { ReclaimReport, r: settled, error;
    collections: r.collections.iter().map(|c| like! { CollectionGarbage, c: collection, volumes, size_bytes,
    garbage_bytes, ec_volumes, ec_deleted_bytes, read_only_volumes, read_only_deleted_bytes }).collect(),
    vacuum: r.vacuum.as_ref().map(|v| like! { VacuumReport, v: skipped, vacuumed, deferred, left_to_master,
    failed, size_before, size_after }) }
}

/// [`last_run_response`] read back (`status --last`): the lags are not
/// kept, they follow from the times ([`cursor_lag_ns`]).
pub fn last_run_from_pb(r: &pb::GetLastRunResponse) -> PassSummary {
    let shard = |s: &pb::ShardRun| {
        like! { ShardSummary, s: matches, cursor_ts_ns, halt_reason, restarts,
        events_scanned, unconfirmed, locked, completed_upload_leftovers;
        shard: shard_from_pb(s.shard), started_ns: s.start_ns, finished_ns: s.finish_ns,
        outcome: outcome_from_pb(s.outcome), last_walked_ns: s.last_walk_ns,
        deletes: deletes_from_map(&s.deletes); ..Default::default() }
    };
    let bucket = |b: &pb::BucketRun| {
        like! { BucketSummary, b: bucket, events_scanned, config_error, halt_reason,
        cursor_ts_ns, held_reason;
        started_ns: b.start_ns, finished_ns: b.finish_ns, outcome: outcome_from_pb(b.outcome),
        deletes: deletes_from_map(&b.deletes), last_walked_ns: b.last_walk_ns,
        deleted: b.deleted.iter().map(|d| like! { FreedRow, d: rule, objects, bytes; bucket: b.bucket.clone() })
        .collect() }
    };
    like! { PassSummary, r: run_id;
    started_ns: r.start_ns, finished_ns: r.finish_ns, outcome: outcome_from_pb(r.outcome),
    shards: r.shards.iter().map(shard).collect(), buckets: r.buckets.iter().map(bucket).collect(),
    space: r.space.as_ref().map(space_from_pb) }
}

/// `GetLastRun`.
pub fn last_run_response(p: &PassSummary) -> pb::GetLastRunResponse {
    like! { pb::GetLastRunResponse, p: run_id;
    start_ns: p.started_ns, finish_ns: p.finished_ns, outcome: run_outcome(p.outcome) as i32,
    shards: p.shards.iter().map(|s| shard_run(s, p.finished_ns)).collect(),
    buckets: p.buckets.iter().map(|b| bucket_run(b, p.finished_ns)).collect(),
    space: p.space.as_ref().map(space_to_pb) }
}

fn count_to_pb(c: &crate::engine::forecast::Count) -> Option<pb::ForecastCount> {
    Some(like! { pb::ForecastCount, c: objects, bytes })
}

fn count_from_pb(c: Option<&pb::ForecastCount>) -> crate::engine::forecast::Count {
    use crate::engine::forecast::Count;
    c.map_or_else(Count::default, |c| like! { Count, c: objects, bytes })
}

/// `GetForecast`'s answer for a forecast (docs/forecast.md).
pub fn forecast_to_pb(f: &crate::engine::forecast::Forecast) -> pb::GetForecastResponse {
    let rule = |r: &crate::engine::forecast::RuleForecast| {
        like! { pb::RuleForecast, r: bucket, rule_id, rule_hash, kind, known;
        overdue: count_to_pb(&r.overdue), oldest_overdue_ns: r.oldest_overdue_ns.unwrap_or(0),
        days: r.days.iter().map(|d| like! { pb::ForecastDay, d: day, due_by_ns; count: count_to_pb(&d.count) })
        .collect(), later: count_to_pb(&r.later) }
    };
    like! { pb::GetForecastResponse, f: now_ns, day_seconds, days, caveat;
    cold_shards: f.cold_shards.iter().map(|s| u32::from(*s)).collect(), rules: f.rules.iter().map(rule).collect() }
}

/// The forecast back from `GetForecast`'s answer (the CLI prints it like
/// the filer-read one).
pub fn forecast_from_pb(p: &pb::GetForecastResponse) -> crate::engine::forecast::Forecast {
    use crate::engine::forecast::{DayCount, Forecast, RuleForecast};
    let rule = |r: &pb::RuleForecast| {
        like! { RuleForecast, r: bucket, rule_id, rule_hash, kind, known;
        overdue: count_from_pb(r.overdue.as_ref()),
        oldest_overdue_ns: (r.oldest_overdue_ns != 0).then_some(r.oldest_overdue_ns),
        days: r.days.iter().map(|d| like! { DayCount, d: day, due_by_ns; count: count_from_pb(d.count.as_ref()) })
        .collect(), later: count_from_pb(r.later.as_ref()) }
    };
    like! { Forecast, p: now_ns, day_seconds, days, caveat;
    cold_shards: p.cold_shards.iter().filter_map(|s| u8::try_from(*s).ok()).collect(),
    rules: p.rules.iter().map(rule).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_map_has_every_known_key_and_unspecified_only_when_seen() {
        let mut d = DeleteCounts::default();
        d.record(DeleteOutcome::Done);
        d.record(DeleteOutcome::DryRun);
        d.record(DeleteOutcome::DryRun);
        let m = deletes_map(&d);
        let mut keys: Vec<&str> = m.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "BLOCKED",
                "DONE",
                "DRY_RUN",
                "NOOP_RESOLVED",
                "RETRY_LATER",
                "RPC_ERROR",
                "SKIPPED_OBJECT_LOCK"
            ]
        );
        assert_eq!((m["DONE"], m["DRY_RUN"], m["BLOCKED"]), (1, 2, 0));
        d.record(DeleteOutcome::Unspecified);
        assert_eq!(deletes_map(&d)["LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED"], 1);
    }

    #[test]
    fn cursor_lag_is_zero_when_cold_or_unfinished() {
        assert_eq!(cursor_lag_ns(100, 0, 0), 0);
        assert_eq!(cursor_lag_ns(0, 0, 50), 0);
        assert_eq!(cursor_lag_ns(100, 7, 40), 60);
        assert_eq!(cursor_lag_ns(0, 100, 40), 60, "the pass's finish");
        // A cursor ahead of the finish (clock disagreement) is not a negative lag.
        assert_eq!(cursor_lag_ns(100, 0, 140), 0);
    }

    #[test]
    fn unresolved_and_leftover_counts_reach_the_last_run() {
        let s = ShardSummary {
            unconfirmed: 2,
            locked: 1,
            completed_upload_leftovers: 3,
            ..Default::default()
        };
        let r = shard_run(&s, 0);
        assert_eq!(
            (r.unconfirmed, r.locked, r.completed_upload_leftovers),
            (2, 1, 3)
        );
    }

    #[test]
    fn unfinished_shard_lag_is_measured_against_the_pass_finish() {
        let s = ShardSummary {
            shard: 4,
            cursor_ts_ns: 1_000,
            ..Default::default()
        };
        let r = shard_run(&s, 5_000);
        assert_eq!((r.shard, r.finish_ns, r.cursor_lag_ns), (4, 0, 4_000));
        assert_eq!(r.outcome, pb::RunOutcome::Unspecified as i32);
    }
}
