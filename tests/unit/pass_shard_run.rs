//! The pure per-shard state machine: recovery planning, the in-flight window,
//! halts, cursor building, and (proptest) the invariant that the saved cursor
//! never passes an event with a pending or unresolved match.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use s3_lifecycled::engine::cursor::ShardCursor;
use s3_lifecycled::engine::keys;
use s3_lifecycled::engine::matches::{DeferredLookup, Expect, PendingMatch};
use s3_lifecycled::engine::{
    ActionKind, BucketConfig, DueRounding, EntryIdentity, Match, Nanos, Snapshot, TimeConfig,
    Versioning, promoted_hash_by_bucket, replay_content_hash_by_bucket,
};
use s3_lifecycled::engine::{CallResult, DeleteOutcome};
use s3_lifecycled::lifecycle::FlatRule;
use s3_lifecycled::pass::plan::{PassPlan, RecoveryReason};
use s3_lifecycled::pass::report::ShardOutcome;
use s3_lifecycled::pass::shard_plan::{coverage_walkers, plan_shard, progress_key, replay_matches};
use s3_lifecycled::pass::shard_run::{LookupAnswer, ReplayItem, SendId, ShardRun, Work};
use s3_lifecycled::pb::filer_pb::{Entry, FileChunk, FileId, FuseAttributes};
use s3_lifecycled::status::MatchDecision;

const S: Nanos = 1_000_000_000;

fn time() -> TimeConfig {
    TimeConfig {
        day: Duration::from_secs(10),
        rounding: DueRounding::None,
    }
}

fn snapshot() -> Snapshot {
    Snapshot::compile(
        vec![BucketConfig {
            name: "b".into(),
            versioning: Versioning::Unversioned,
            object_lock: false,
            rules: vec![FlatRule {
                id: "d1".into(),
                enabled: true,
                expiration_days: 1,
                ..FlatRule::default()
            }],
        }],
        time(),
    )
}

fn plan(now: Nanos) -> Arc<PassPlan> {
    plan_of(snapshot(), now)
}

/// The plan of shard 0 for `snap` at `now` (no skew margin, no retention limit).
fn plan_of(snap: Snapshot, now: Nanos) -> Arc<PassPlan> {
    plan_full(snap, now, now, None)
}

/// [`plan_of`] whose walk observed the cluster up to `observed`, with the
/// meta-log reaching back to `earliest`.
fn plan_full(
    snap: Snapshot,
    now: Nanos,
    observed: Nanos,
    earliest: Option<Nanos>,
) -> Arc<PassPlan> {
    let window = Duration::MAX;
    let (replay, walk) = snap.rules_for_shard(0, window);
    Arc::new(PassPlan {
        now,
        observed_until: observed,
        read_until: now,
        filer_clock: None,
        time: time(),
        skew_margin: Duration::ZERO,
        reorder_margin: Duration::from_secs(5),
        walker_interval: Duration::ZERO,
        tail_budget: 1 << 20,
        earliest,
        rule_set_hash: replay_content_hash_by_bucket(&snap),
        promoted_hash: promoted_hash_by_bucket(&snap, window),
        global_rule_set_hash: [0; 32],
        global_promoted_hash: [0; 32],
        replay,
        walk,
        recovery: snap.recovery_view(),
        keep: BTreeSet::new(),
        live: s3_lifecycled::pass::plan::live_actions(&snap),
        filers: None,
        go_cursors: None,
    })
}

fn action_match(p: &PassPlan, key: &str, due: Nanos) -> Match {
    let a = p.recovery.actions().next().unwrap();
    Match {
        bucket: "b".into(),
        key: key.into(),
        object_path: key.into(),
        version_id: String::new(),
        rule_hash: a.rule_hash(),
        kind: ActionKind::ExpirationDays,
        due,
        identity: EntryIdentity::default(),
        shard: 0,
        lookup: None,
    }
}

fn ok() -> CallResult {
    CallResult::answered(DeleteOutcome::Done, "")
}

fn retry_later() -> CallResult {
    CallResult::answered(DeleteOutcome::RetryLater, "busy")
}

/// A steady shard: a first pass with a successful (empty) recovery walk.
fn steady(now: Nanos) -> (Arc<PassPlan>, ShardCursor) {
    let p = plan(now);
    let mut run = ShardRun::new(0, p.clone(), None, 4);
    run.listing_done("b", true);
    run.start_replay();
    let (rep, cursor) = run.finish(None);
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    (p, cursor.unwrap())
}

#[test]
fn cold_start_then_steady_then_rule_edit() {
    let p = plan(100 * S);
    let sp = plan_shard(&p, None);
    assert_eq!(sp.recover.get("b"), Some(&RecoveryReason::ColdStart));
    let (_, cursor) = steady(100 * S);
    assert!(plan_shard(&p, Some(&cursor)).recover.is_empty());
    let mut edited = cursor.clone();
    edited.buckets.get_mut("b").unwrap().rule_set_hash = [9; 32];
    assert_eq!(
        plan_shard(&p, Some(&edited)).recover.get("b"),
        Some(&RecoveryReason::RuleEdit)
    );
    let mut lost = cursor.clone();
    lost.buckets.get_mut("b").unwrap().rules = Default::default();
    assert_eq!(
        plan_shard(&p, Some(&lost)).recover.get("b"),
        Some(&RecoveryReason::ColdStart),
        "missing progress for a current replay action is a cold start"
    );
}

#[test]
fn recovered_bucket_resumes_at_the_rewind_point() {
    let (_, cursor) = steady(100 * S);
    let key = progress_key(&plan(0).recovery.actions().next().unwrap().key());
    let p = cursor.buckets["b"].rules[&key].clone();
    assert_eq!(p.ts, 100 * S - 10 * S, "now − ttl (no rounding, no skew)");
    assert_eq!((p.through, p.through_now), (100 * S, 100 * S));
}

#[test]
fn failed_listing_keeps_the_old_bucket_state() {
    let p = plan(100 * S);
    let mut run = ShardRun::new(0, p, None, 4);
    run.listing_done("b", false);
    assert_eq!(run.start_replay(), None);
    let (_, cursor) = run.finish(None);
    assert!(
        cursor.unwrap().buckets.is_empty(),
        "a cold start whose walk failed saves no bucket state, so it recovers again"
    );
}

#[test]
fn window_bounds_in_flight_and_backpressures() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 2);
    assert_eq!(run.start_replay(), Some(90 * S));
    for i in 0..3 {
        let ts = 100 * S + i;
        run.replay_event(ts, &[action_match(&p, &format!("k{i}"), ts + 10 * S)]);
    }
    let sent = run.next_sends();
    assert_eq!(sent.len(), 2);
    assert!(!run.accepting(), "a third delete waits for a slot");
    let (w, t) = sent.into_iter().next().unwrap();
    let Work::Delete(_) = w else { panic!() };
    run.outcome(t, &ok());
    assert_eq!(run.next_sends().len(), 1);
    assert!(run.accepting());
}

/// The shard keeps what it sent and an answer names it by id, so a second
/// answer to one delete (a duplicated message) changes nothing: it used to
/// count the delete twice and free a second window slot.
#[test]
fn a_delete_answered_twice_was_counted_twice() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 1);
    run.start_replay();
    for i in 0..2 {
        let ts = 100 * S + i;
        run.replay_event(ts, &[action_match(&p, &format!("k{i}"), ts + 10 * S)]);
    }
    let (w, t) = run.next_sends().remove(0);
    let Work::Delete(sent) = w else { panic!() };
    assert_eq!(run.request_of(t), Some(&sent), "the run keeps what it sent");
    assert_eq!(run.outcome(t, &ok()), None);
    assert_eq!(run.request_of(t), None);
    let (_, second) = run.next_sends().remove(0);
    assert_eq!(run.outcome(t, &ok()), None, "a repeat is ignored");
    assert_eq!(run.in_flight(), 1, "the second delete still holds its slot");
    run.outcome(second, &ok());
    let (rep, _) = run.finish(Some(200 * S));
    assert_eq!(rep.counters.deletes.total(), 2, "{rep:?}");
}

#[test]
fn unresolved_outcome_halts_only_new_work_and_blocks_the_cursor() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    let evs: Vec<Nanos> = (0..4).map(|i| 100 * S + i * S).collect();
    for (i, &ts) in evs.iter().enumerate() {
        run.replay_event(ts, &[action_match(&p, &format!("k{i}"), ts + 10 * S)]);
    }
    let sent = run.next_sends();
    assert_eq!(sent.len(), 4);
    let mut halt = None;
    for (i, (w, t)) in sent.into_iter().enumerate() {
        let Work::Delete(_) = w else { panic!() };
        let r = if i == 1 { retry_later() } else { ok() };
        if let Some(h) = run.outcome(t, &r) {
            halt = Some(h);
        }
    }
    assert_eq!(halt.as_deref(), Some("RETRY_LATER b/k1: busy"));
    run.replay_event(200 * S - 1, &[action_match(&p, "late", 150 * S)]);
    assert!(run.next_sends().is_empty(), "halted: no new deletes");
    let (rep, cursor) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Halted);
    let c = cursor.unwrap();
    let prog = c.buckets["b"].rules.values().next().unwrap();
    assert!(prog.ts < evs[1], "cursor stops before the unresolved event");
    assert_eq!(
        c.buckets["b"].halted.as_deref(),
        Some("RETRY_LATER b/k1: busy")
    );
}

/// Single-item intake for these tests, through the entry points the pass
/// uses: one event as a batch of one (every match as given, none pending), a
/// walked item without a listing position, a listing's end without one.
trait Intake {
    fn replay_event(&mut self, ts: Nanos, matches: &[Match]);
    fn walk_matches(&mut self, bucket: &str, matches: Vec<Match>);
    fn listing_done(&mut self, bucket: &str, ok: bool);
}

impl Intake for ShardRun {
    fn replay_event(&mut self, ts: Nanos, matches: &[Match]) {
        self.replay_batch(&[ReplayItem {
            ts,
            matches: matches.to_vec(),
            bucket: String::new(),
            pending: Vec::new(),
            skipped_no_mtime: false,
        }]);
    }

    fn walk_matches(&mut self, bucket: &str, matches: Vec<Match>) {
        self.walk_item(bucket, None, matches);
    }

    fn listing_done(&mut self, bucket: &str, ok: bool) {
        self.listing_ended(bucket, ok, None);
    }
}

/// The item the coordinator builds for one event: matches due after the
/// plan's `now` go as [`PendingMatch`]es (`route_for_pass`).
fn replay_item(p: &PassPlan, ts: Nanos, matches: Vec<Match>, skipped: bool) -> ReplayItem {
    let (due, later): (Vec<Match>, Vec<Match>) = matches.into_iter().partition(|m| m.due <= p.now);
    ReplayItem {
        ts,
        bucket: later.first().map(|m| m.bucket.clone()).unwrap_or_default(),
        pending: later.iter().map(PendingMatch::of).collect(),
        matches: due,
        skipped_no_mtime: skipped,
    }
}

/// Scan rate (docs/meta-log.md#replay-batches): the coordinator now hands a
/// shard its events in batches, with the matches not yet due stripped to what
/// the tracker needs. A batch is exactly the same events one by one with their
/// full matches: same sends, same report, same cursor (due index and forecast
/// tallies included).
#[test]
fn replay_batch_is_the_same_as_its_events_one_by_one() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let events: Vec<(Nanos, Vec<Match>, bool)> = (0..40)
        .map(|i| {
            let ts = 100 * S + i * S;
            let due = if i % 3 == 0 { 300 * S } else { ts + 10 * S };
            let m = action_match(&p, &format!("k{i:02}"), due);
            (ts, vec![m], i % 7 == 0)
        })
        .collect();
    let items: Vec<ReplayItem> = events
        .iter()
        .map(|(ts, m, skipped)| replay_item(&p, *ts, m.clone(), *skipped))
        .collect();
    assert_eq!(items.iter().map(|i| i.pending.len()).sum::<usize>(), 14);
    let drive = |batched: bool| {
        let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor.clone())), 8);
        run.start_replay();
        if batched {
            for chunk in items.chunks(16) {
                run.replay_batch(chunk);
            }
        } else {
            for (ts, matches, skipped) in &events {
                run.skipped_no_mtime(u64::from(*skipped));
                run.replay_event(*ts, matches);
            }
        }
        let mut sent = Vec::new();
        loop {
            let batch = run.next_sends();
            if batch.is_empty() {
                break;
            }
            for (w, t) in batch {
                let Work::Delete(req) = w else { panic!() };
                sent.push(format!("{req:?}"));
                run.outcome(t, &ok());
            }
        }
        let (rep, cursor) = run.finish(Some(200 * S));
        (sent, format!("{rep:?}"), cursor)
    };
    let one = drive(false);
    let batched = drive(true);
    assert_eq!(one.0.len(), 26, "the 26 due matches are sent");
    assert_eq!(one, batched);
}

/// A halt takes effect at the next batch as it did at the next event: the
/// batch's events are counted, nothing of it is sent, and the cursor stays
/// before the unresolved event.
#[test]
fn batch_after_a_halt_sends_nothing_and_keeps_the_cursor_before_the_halt() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    let first = replay_item(&p, 100 * S, vec![action_match(&p, "k0", 110 * S)], false);
    run.replay_batch(std::slice::from_ref(&first));
    let (w, t) = run.next_sends().pop().unwrap();
    let Work::Delete(_) = w else { panic!() };
    assert!(run.outcome(t, &retry_later()).is_some(), "halts");
    let later: Vec<ReplayItem> = (1..5)
        .map(|i| {
            let m = action_match(&p, &format!("k{i}"), 110 * S + i * S);
            replay_item(&p, 100 * S + i * S, vec![m], false)
        })
        .collect();
    run.replay_batch(&later);
    assert!(
        run.next_sends().is_empty(),
        "halted: nothing of the batch is sent"
    );
    let (rep, cursor) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Halted);
    assert_eq!(rep.counters.events_scanned, 5, "{rep:?}");
    let prog = cursor.unwrap().buckets["b"]
        .rules
        .values()
        .next()
        .unwrap()
        .clone();
    assert!(
        prog.ts < 100 * S,
        "cursor stays before the halting event: {prog:?}"
    );
}

/// A delete that never answers (docs/lifecycle-delete.md#deadlines). Once `Drain` outlives its
/// bound the shard halts with DRAIN_TIMEOUT, its window is given up (so it is idle), and its
/// cursor stays before the unanswered event; the walk it took part in counts as not fully done.
#[test]
fn drain_timeout_halts_and_keeps_the_cursor_before_unanswered_work() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.listing_done("b", true);
    run.start_replay();
    let evs: Vec<Nanos> = (0..3).map(|i| 100 * S + i * S).collect();
    for (i, &ts) in evs.iter().enumerate() {
        run.replay_event(ts, &[action_match(&p, &format!("k{i}"), ts + 10 * S)]);
    }
    let sent = run.next_sends();
    assert_eq!(sent.len(), 3);
    // k0 is answered; k1 and k2 hang.
    let (w, t) = sent.into_iter().next().unwrap();
    let Work::Delete(_) = w else { panic!() };
    assert_eq!(run.outcome(t, &ok()), None);
    assert!(!run.idle());
    let halt = run.drain_timed_out("DRAIN_TIMEOUT: 2 unanswered".into());
    assert_eq!(halt.as_deref(), Some("DRAIN_TIMEOUT: 2 unanswered"));
    assert!(
        run.idle(),
        "the window is given up: a later Drain does not wait"
    );
    assert!(run.next_sends().is_empty());
    // A second timeout changes nothing (already idle).
    assert_eq!(run.drain_timed_out("again".into()), None);
    let (rep, cursor) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Halted);
    assert_eq!(
        rep.halt_reason.as_deref(),
        Some("DRAIN_TIMEOUT: 2 unanswered")
    );
    let c = cursor.unwrap();
    let prog = c.buckets["b"].rules.values().next().unwrap();
    assert!(prog.ts < evs[1], "cursor stops before the unanswered event");
}

#[test]
fn drain_timeout_without_outstanding_work_is_no_halt() {
    let (_, cursor) = steady(100 * S);
    let mut run = ShardRun::new(0, plan(200 * S), Some(Arc::new(cursor)), 8);
    run.start_replay();
    assert_eq!(run.drain_timed_out("DRAIN_TIMEOUT".into()), None);
    assert_eq!(run.finish(None).0.outcome, ShardOutcome::Completed);
}

#[test]
fn pending_match_holds_the_cursor_but_later_due_matches_are_sent() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    run.replay_event(110 * S, &[action_match(&p, "a", 120 * S)]);
    run.replay_event(120 * S, &[action_match(&p, "b", 500 * S)]);
    run.replay_event(130 * S, &[action_match(&p, "c", 140 * S)]);
    let sent = run.next_sends();
    assert_eq!(sent.len(), 2, "a and c are due; b is pending");
    for (w, t) in sent {
        let Work::Delete(_) = w else { panic!() };
        run.outcome(t, &ok());
    }
    let (rep, cursor) = run.finish(Some(130 * S));
    assert_eq!(rep.counters.pending, 1);
    // Fed to s3_lifecycled_matches_total{kind,decision}.
    assert_eq!(
        rep.counters.decisions,
        [
            ((ActionKind::ExpirationDays, MatchDecision::Dispatched), 2),
            ((ActionKind::ExpirationDays, MatchDecision::Pending), 1),
        ]
        .into_iter()
        .collect()
    );
    let prog = cursor.unwrap().buckets["b"]
        .rules
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(prog.ts, 120 * S - 1);
    // Progress stays a reorder margin behind the newest event (filer ts_ns
    // are not strictly ordered).
    assert_eq!(
        prog.through,
        130 * S - s3_lifecycled::engine::progress::REORDER_MARGIN
    );
}

/// A delete withdrawn because the bucket's configuration changed mid-pass
/// (docs/lifecycle-config.md#changes-during-a-pass) is not due: no halt, later deletes still go
/// out, and the cursor stays before its event so a pass under the same rules would send it again.
#[test]
fn withdrawn_replay_delete_neither_halts_nor_moves_the_cursor_past_it() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    let evs: Vec<Nanos> = (0..3).map(|i| 100 * S + i * S).collect();
    for (i, &ts) in evs.iter().enumerate() {
        run.replay_event(ts, &[action_match(&p, &format!("k{i}"), ts + 10 * S)]);
    }
    let sent = run.next_sends();
    assert_eq!(sent.len(), 3);
    for (i, (w, t)) in sent.into_iter().enumerate() {
        let Work::Delete(_) = w else { panic!() };
        let r = if i == 1 {
            CallResult::withdrawn("configuration changed")
        } else {
            ok()
        };
        assert_eq!(run.outcome(t, &r), None, "a withdrawal never halts");
    }
    run.replay_event(150 * S, &[action_match(&p, "later", 160 * S)]);
    let later = run.next_sends();
    assert_eq!(later.len(), 1, "later deletes still go out");
    for (w, t) in later {
        let Work::Delete(_) = w else { panic!() };
        run.outcome(t, &ok());
    }
    let (rep, cursor) = run.finish(Some(150 * S));
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    assert_eq!(rep.counters.deletes.withdrawn, 1);
    assert_eq!(
        rep.counters.deletes.total(),
        3,
        "a withdrawn delete was not issued"
    );
    let c = cursor.unwrap();
    let prog = c.buckets["b"].rules.values().next().unwrap();
    assert!(prog.ts < evs[1], "cursor stays before the withdrawn event");
    assert_eq!(c.buckets["b"].halted, None);
}

/// A recovery walk with a withdrawn delete did not vouch for the bucket: the bucket keeps its
/// old state (here none), so the next pass recovers it again, under the rules of that pass.
#[test]
fn withdrawn_walker_delete_fails_the_recovery_without_halting() {
    let p = plan(100 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 4);
    run.walk_matches("b", vec![action_match(&p, "k", 50 * S)]);
    let (w, t) = run.next_sends().into_iter().next().unwrap();
    let Work::Delete(_) = w else { panic!() };
    assert_eq!(
        run.outcome(t, &CallResult::withdrawn("configuration deleted")),
        None
    );
    run.listing_done("b", true);
    assert_eq!(run.start_replay(), None);
    let (rep, cursor) = run.finish(None);
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    let cursor = cursor.unwrap();
    let b = &cursor.buckets["b"];
    assert!(b.is_walk_placeholder(), "only the backlog is kept: {b:?}");
    assert!(b.rules.is_empty());
    let next = ShardRun::new(0, plan(200 * S), Some(Arc::new(cursor.clone())), 4);
    assert_eq!(
        next.shard_plan().recover.get("b"),
        Some(&RecoveryReason::ColdStart)
    );
}

/// Regression: a recovery walk held by the deletion cap (or a rule-change
/// grace) left no trace in the cursor, so the forecast and the lag gauges
/// showed nothing overdue for a bucket with its whole backlog held. Every due
/// walker match that does not resolve is now counted in the bucket's
/// backlog: the one withdrawn, those dropped from the queue after it, and
/// those the walk found once the bucket had stopped.
#[test]
fn held_recovery_walk_left_no_backlog_for_the_forecast() {
    let p = plan(100 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 2);
    let sized = |key: &str, due: Nanos, size: i64| {
        let mut m = action_match(&p, key, due);
        m.identity.size = size;
        m
    };
    run.walk_item("b", Some("a"), vec![sized("a", 50 * S, 10)]);
    run.walk_item("b", Some("b"), vec![sized("b", 40 * S, 20)]);
    run.walk_item("b", Some("c"), vec![sized("c", 60 * S, 30)]);
    let sends = run.next_sends();
    assert_eq!(sends.len(), 2, "a window of two");
    let mut sends = sends.into_iter();
    let (Work::Delete(_), ta) = sends.next().unwrap() else {
        panic!()
    };
    let (Work::Delete(_), tb) = sends.next().unwrap() else {
        panic!()
    };
    run.outcome(ta, &ok());
    run.outcome(tb, &CallResult::withdrawn("safety cap: reached"));
    // Found after the bucket stopped: never sent, still owed.
    run.walk_item("b", Some("d"), vec![sized("d", 70 * S, 40)]);
    run.listing_done("b", true);
    assert_eq!(run.start_replay(), None);
    let (_, cursor) = run.finish(None);
    let cursor = cursor.unwrap();
    let backlog = &cursor.buckets["b"].backlog;
    assert!(backlog.recovering && backlog.complete, "{backlog:?}");
    let key = progress_key(&p.recovery.actions().next().unwrap().key());
    let held = &backlog.actions[&key];
    assert_eq!(
        (held.objects, held.bytes, held.oldest_due_ns),
        (3, 90, 40 * S),
        "b (withdrawn), c (dropped from the queue), d (found after the stop); a resolved"
    );
    assert_eq!(held.rule_id, "d1");

    let f = s3_lifecycled::engine::forecast::forecast(&[cursor], &time(), 100 * S, 3, None);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].overdue.objects, f[0].overdue.bytes), (3, 90));
    assert_eq!(f[0].oldest_overdue_ns, Some(40 * S));
    assert_eq!(f[0].rule_id, "d1");
    assert!(!f[0].known, "the days after now are not counted by a walk");
}

/// A versioned bucket whose only rule expires noncurrent versions after a day.
fn versioned_plan(now: Nanos) -> Arc<PassPlan> {
    let snap = Snapshot::compile(
        vec![BucketConfig {
            name: "v".into(),
            versioning: Versioning::Enabled,
            object_lock: false,
            rules: vec![FlatRule {
                id: "nc".into(),
                enabled: true,
                noncurrent_days: 1,
                ..FlatRule::default()
            }],
        }],
        time(),
    );
    plan_of(snap, now)
}

fn file_entry(name: &str, mtime_s: i64) -> Entry {
    Entry {
        name: name.into(),
        attributes: Some(FuseAttributes {
            mtime: mtime_s,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn folder_pointing_at(latest: &str) -> Entry {
    let mut f = Entry {
        name: format!("k{}", keys::VERSIONS_SUFFIX),
        is_directory: true,
        ..Default::default()
    };
    f.extended
        .insert(keys::LATEST_VERSION_ID.into(), latest.as_bytes().to_vec());
    f
}

/// Replays one due "displaced null version" match of key `k` and answers its
/// lookups with `entry` and `folder`; returns what the shard then sends.
fn null_version_after_lookup(
    folder: Result<Option<Entry>, String>,
) -> (Vec<(Work, SendId)>, Option<String>) {
    let now = 1_000 * S;
    let p = versioned_plan(now);
    let a = p
        .replay
        .as_ref()
        .expect("noncurrent days is a replay action")
        .actions()
        .next()
        .unwrap();
    let m = Match {
        bucket: "v".into(),
        key: "k".into(),
        object_path: "k".into(),
        version_id: "null".into(),
        rule_hash: a.rule_hash(),
        kind: ActionKind::NoncurrentDays,
        due: now - S,
        identity: EntryIdentity::default(),
        shard: 0,
        lookup: Some(DeferredLookup {
            directory: "/buckets/v".into(),
            name: "k".into(),
            expect: Expect::NullVersion,
        }),
    };
    let mut run = ShardRun::new(0, p, None, 8);
    run.listing_done("v", true);
    run.start_replay();
    // After the recovery walk's horizon, so replay must act on it.
    run.replay_event(now + S, std::slice::from_ref(&m));
    let sent = run.next_sends();
    assert!(
        matches!(sent.as_slice(), [(Work::Lookup(_), _)]),
        "a deferred match is looked up first: {sent:?}"
    );
    let (_, ticket) = sent.into_iter().next().unwrap();
    let answer = LookupAnswer {
        entry: Ok(Some(file_entry("k", 10))),
        folder: Some(folder),
    };
    let halt = run.lookup_done(ticket, answer);
    (run.next_sends(), halt)
}

#[test]
fn displaced_null_version_is_deleted_while_its_folder_points_elsewhere() {
    let (sent, halt) = null_version_after_lookup(Ok(Some(folder_pointing_at("v2"))));
    assert_eq!(halt, None);
    assert!(
        matches!(sent.as_slice(), [(Work::Delete(r), _)] if r.version_id == "null"),
        "{sent:?}"
    );
}

#[test]
fn null_version_that_became_current_again_is_kept() {
    for folder in [Ok(Some(folder_pointing_at("null"))), Ok(None)] {
        let (sent, halt) = null_version_after_lookup(folder.clone());
        assert_eq!(halt, None);
        assert!(
            sent.is_empty(),
            "folder {folder:?}: nothing to delete: {sent:?}"
        );
    }
}

#[test]
fn failed_folder_lookup_halts_instead_of_deleting() {
    let (sent, halt) = null_version_after_lookup(Err("filer down".into()));
    assert!(sent.is_empty(), "{sent:?}");
    let halt = halt.expect("a failed lookup halts the shard");
    assert!(halt.contains("filer down"), "{halt}");
}

proptest! {
    /// Whatever the order of outcomes and their results, the saved cursor
    /// never passes an event with a pending match or an unresolved delete.
    #[test]
    fn cursor_never_passes_unresolved_or_pending(
        evs in proptest::collection::vec((1i64..1000, 0i64..400, any::<bool>()), 1..40),
        window in 1usize..6,
        order_seed in any::<u64>(),
    ) {
        let (_, cursor) = steady(100 * S);
        let now = 300 * S;
        let p = plan(now);
        let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), window);
        run.start_replay();
        let mut evs = evs;
        evs.sort_by_key(|e| e.0);
        evs.dedup_by_key(|e| e.0);
        let mut outcome_of = BTreeMap::new();
        let mut blockers: Vec<Nanos> = Vec::new();
        let mut inflight: Vec<(Work, SendId, Nanos)> = Vec::new();
        let mut seed = order_seed;
        let mut halted = false;
        for (i, &(off, due_s, fail)) in evs.iter().enumerate() {
            let ts = 100 * S + off * 1_000_000;
            let due = 100 * S + due_s * S;
            if due > now { blockers.push(ts); }
            outcome_of.insert(format!("k{i}"), (ts, fail));
            run.replay_event(ts, &[action_match(&p, &format!("k{i}"), due)]);
            loop {
                for (w, t) in run.next_sends() {
                    let Work::Delete(r) = &w else { unreachable!() };
                    let ts = outcome_of[&r.object_path].0;
                    inflight.push((w, t, ts));
                }
                if run.accepting() || inflight.is_empty() { break; }
                // Answer a pseudo-random in-flight delete.
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let k = (seed >> 33) as usize % inflight.len();
                let (w, t, ts) = inflight.swap_remove(k);
                let Work::Delete(r) = w else { unreachable!() };
                let fail = outcome_of[&r.object_path].1;
                if fail { blockers.push(ts); }
                let res = if fail { retry_later() } else { ok() };
                if run.outcome(t, &res).is_some() { halted = true; }
            }
        }
        // Deletes never answered count as unresolved.
        for (_, _, ts) in &inflight { blockers.push(*ts); }
        let last = evs.last().map(|e| 100 * S + e.0 * 1_000_000);
        let (rep, cursor) = run.finish(last);
        prop_assert_eq!(rep.outcome == ShardOutcome::Halted, halted);
        let prog = cursor.unwrap().buckets["b"].rules.values().next().unwrap().clone();
        if let Some(&b) = blockers.iter().min() {
            prop_assert!(prog.ts < b, "cursor {} passed blocker {}", prog.ts, b);
        }
        prop_assert!(prog.ts >= 90 * S, "never moves backwards");
    }
}

// --- Checks around a delete (engine::check) ---------------------------------

fn entry_named(name: &str, mtime_s: i64) -> Entry {
    Entry {
        name: name.into(),
        attributes: Some(FuseAttributes {
            mtime: mtime_s,
            file_size: 5,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn not_found() -> CallResult {
    CallResult::answered(DeleteOutcome::NoopResolved, "NOT_FOUND")
}

/// Replays three due matches whose entries are `entries[i]`; answers k1 with
/// NOT_FOUND and the others with DONE; answers k1's confirmation with
/// `probe`. Returns the run (not finished) and the events' ts.
fn lost_answer_run(
    cursor: ShardCursor,
    p: &Arc<PassPlan>,
    probe: Result<Vec<Entry>, String>,
) -> (ShardRun, Vec<Nanos>) {
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    let evs: Vec<Nanos> = (0..3).map(|i| 100 * S + i * S).collect();
    for (i, &ts) in evs.iter().enumerate() {
        let mut m = action_match(p, &format!("k{i}"), ts + 10 * S);
        m.identity = EntryIdentity::of(&entry_named(&format!("k{i}"), 100 + i as i64));
        run.replay_event(ts, &[m]);
    }
    let sent = run.next_sends();
    assert_eq!(sent.len(), 3);
    for (i, (w, t)) in sent.into_iter().enumerate() {
        let Work::Delete(_) = w else { panic!() };
        let r = if i == 1 { not_found() } else { ok() };
        assert_eq!(run.outcome(t, &r), None, "never a halt");
    }
    let mut checks = run.next_sends();
    assert_eq!(checks.len(), 1, "NOT_FOUND is confirmed by one check");
    let (Work::Check(c), t) = checks.remove(0) else {
        panic!("expected a check")
    };
    assert_eq!(c.request.object_path, "k1");
    assert_eq!(
        c.probes().len(),
        2,
        "the bare entry and the key's .versions"
    );
    // k1 unchanged (mtime 101, as replayed) is still there; another mtime is a changed entry.
    let still_there = matches!(&probe, Ok(v) if v.first().and_then(|e| e.attributes.as_ref()).is_some_and(|a| a.mtime == 101));
    run.check_done(t, &[probe.clone(), Ok(vec![])]);
    if still_there {
        // A store still holds what the gateway answered gone: sent again, answered gone
        // again, until the resends are spent.
        for _ in 0..s3_lifecycled::pass::shard_run::STILL_THERE_RESENDS {
            let (w, t) = resend_of(&mut run, "k1");
            let Work::Delete(_) = w else { panic!() };
            assert_eq!(run.outcome(t, &not_found()), None);
            let (Work::Check(_), t) = resend_of(&mut run, "k1") else {
                panic!("expected a check")
            };
            run.check_done(t, &[probe.clone(), Ok(vec![])]);
        }
    }
    assert!(run.next_sends().is_empty());
    (run, evs)
}

/// The one piece of work the run hands out next, about `key`.
fn resend_of(run: &mut ShardRun, key: &str) -> (Work, SendId) {
    let mut sent = run.next_sends();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (w, t) = sent.remove(0);
    let path = match &w {
        Work::Delete(r) => r.object_path.clone(),
        Work::Check(c) => c.request.object_path.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(path, key);
    (w, t)
}

/// A gateway that reads another filer's store answered NOT_FOUND for an entry ours still held;
/// the answer waited a whole pass (the next pass retried). It is sent again at once, and the
/// resend, answered DONE, settles it in the same pass.
#[test]
fn an_entry_a_gateway_answered_gone_while_a_store_held_it_waited_a_pass() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    run.start_replay();
    let mut m = action_match(&p, "k1", 110 * S);
    m.identity = EntryIdentity::of(&entry_named("k1", 101));
    run.replay_event(100 * S, &[m]);
    let (_, t) = resend_of(&mut run, "k1");
    assert_eq!(run.outcome(t, &not_found()), None);
    let (_, t) = resend_of(&mut run, "k1");
    run.check_done(t, &[Ok(vec![entry_named("k1", 101)]), Ok(vec![])]);
    let (w, t) = resend_of(&mut run, "k1");
    assert!(matches!(w, Work::Delete(_)), "sent again: {w:?}");
    assert_eq!(run.outcome(t, &ok()), None);
    assert!(run.next_sends().is_empty());
    let (rep, c) = run.finish(Some(200 * S));
    assert_eq!(rep.counters.unconfirmed, 0);
    let prog = c.unwrap().buckets["b"]
        .rules
        .values()
        .next()
        .unwrap()
        .clone();
    assert!(prog.ts >= 100 * S - s3_lifecycled::engine::progress::REORDER_MARGIN);
}

#[test]
fn lost_gateway_answer_keeps_a_live_object_unresolved_without_halting() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let (run, evs) = lost_answer_run(cursor, &p, Ok(vec![entry_named("k1", 101)]));
    let (rep, c) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Completed, "no halt");
    assert_eq!(rep.counters.unconfirmed, 1);
    let c = c.unwrap();
    let prog = c.buckets["b"].rules.values().next().unwrap().clone();
    assert!(prog.ts < evs[1], "cursor stays before k1's event");
    assert!(c.buckets["b"].halted.is_none());
    // The next pass resends k1 only: k0 and k2 resolved in the tail.
    let mut next = ShardRun::new(0, plan(300 * S), Some(Arc::new(c)), 8);
    next.start_replay();
    for (i, &ts) in evs.iter().enumerate() {
        let mut m = action_match(&p, &format!("k{i}"), ts + 10 * S);
        m.identity = EntryIdentity::of(&entry_named(&format!("k{i}"), 100 + i as i64));
        next.replay_event(ts, &[m]);
    }
    let again: Vec<String> = next
        .next_sends()
        .into_iter()
        .map(|(w, _)| match w {
            Work::Delete(r) => r.object_path,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(again, ["k1"]);
}

#[test]
fn confirmed_not_found_and_changed_entries_settle() {
    for probe in [Ok(vec![]), Ok(vec![entry_named("k1", 999)])] {
        let (_, cursor) = steady(100 * S);
        let p = plan(200 * S);
        let (run, evs) = lost_answer_run(cursor, &p, probe);
        let (rep, c) = run.finish(Some(200 * S));
        assert_eq!(rep.counters.unconfirmed, 0);
        let prog = c.unwrap().buckets["b"]
            .rules
            .values()
            .next()
            .unwrap()
            .clone();
        assert!(prog.ts >= evs[2] - s3_lifecycled::engine::progress::REORDER_MARGIN);
    }
}

#[test]
fn failed_confirmation_lookup_is_unresolved_not_a_halt() {
    let (_, cursor) = steady(100 * S);
    let p = plan(200 * S);
    let (run, evs) = lost_answer_run(cursor, &p, Err("filer unavailable".into()));
    let (rep, c) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    assert_eq!(rep.counters.unconfirmed, 1);
    assert!(c.unwrap().buckets["b"].rules.values().next().unwrap().ts < evs[1]);
}

fn abort_match(p: &PassPlan) -> Match {
    let mut m = action_match(p, "dest/obj", 50 * S);
    m.kind = ActionKind::AbortMpu;
    m.object_path = ".uploads/up1".into();
    m
}

/// Walks one abort match; answers its stamp check with `answers`. Returns
/// the report, the saved cursor and what was sent after the check.
fn walked_abort(
    answers: Vec<Result<Vec<Entry>, String>>,
) -> (
    s3_lifecycled::pass::report::ShardReport,
    ShardCursor,
    Vec<Work>,
) {
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 4);
    run.walk_matches("b", vec![abort_match(&p)]);
    let mut sent = run.next_sends();
    assert_eq!(sent.len(), 1);
    let (Work::Check(c), t) = sent.remove(0) else {
        panic!("an abort is preceded by its stamp check")
    };
    assert_eq!(c.upload_id(), "up1");
    assert_eq!(c.key, "dest/obj");
    run.check_done(t, &answers);
    let after: Vec<(Work, SendId)> = run.next_sends();
    for (w, t) in &after {
        if let Work::Delete(_) = w {
            run.outcome(*t, &ok());
        }
    }
    run.listing_done("b", true);
    run.start_replay();
    let (rep, c) = run.finish(None);
    (rep, c.unwrap(), after.into_iter().map(|(w, _)| w).collect())
}

#[test]
fn abort_of_a_completed_upload_is_never_sent() {
    let mut stamped = entry_named("obj", 100);
    stamped.extended.insert(
        s3_lifecycled::engine::check::UPLOAD_ID_KEY.into(),
        b"up1".to_vec(),
    );
    // Destination entry stamped, or a version under dest/obj.versions.
    for answers in [
        vec![Ok(vec![stamped.clone()]), Ok(vec![]), Ok(vec![])],
        vec![
            Ok(vec![]),
            Ok(vec![entry_named("v_a", 1), stamped.clone()]),
            Ok(vec![]),
        ],
    ] {
        let (rep, c, after) = walked_abort(answers);
        assert!(after.is_empty(), "no abort sent: {after:?}");
        assert_eq!(rep.counters.completed_upload_leftovers, 1);
        assert_eq!(rep.outcome, ShardOutcome::Completed);
        assert_eq!(c.buckets["b"].last_walked_ns, 200 * S, "settled");
    }
}

#[test]
fn abort_without_a_stamp_is_sent_and_an_undecided_check_is_not() {
    // The third answer lists the parts: it counts bytes, never decides.
    let (_, _, after) = walked_abort(vec![
        Ok(vec![entry_named("obj", 1)]),
        Ok(vec![]),
        Err("parts listing failed".into()),
    ]);
    assert!(
        matches!(&after[..], [Work::Delete(r)] if r.object_path == ".uploads/up1"),
        "{after:?}"
    );
    let (rep, c, after) = walked_abort(vec![Ok(vec![]), Err("filer down".into()), Ok(vec![])]);
    assert!(after.is_empty(), "undecided: no abort");
    assert_eq!(rep.counters.unconfirmed, 1);
    assert_eq!(rep.outcome, ShardOutcome::Completed, "no halt");
    assert_ne!(c.buckets.get("b").map(|b| b.last_walked_ns), Some(200 * S));
}

/// An entry named `name` whose one chunk is in volume `volume`.
fn entry_in(name: &str, volume: u32) -> Entry {
    let mut e = entry_named(name, 1);
    e.chunks = vec![FileChunk {
        fid: Some(FileId {
            volume_id: volume,
            file_key: 0x1234,
            cookie: 7,
        }),
        ..FileChunk::default()
    }];
    e
}

/// The volumes the DONE deletes' data was in are what the reclaim report
/// reads collections from (docs/reclaimed-space.md#which-collections): the
/// head chunk's of an object, every part's of an aborted upload, each with
/// the bytes deleted there; a delete that named none still lists its bucket.
#[test]
fn done_deletes_record_the_volumes_their_data_was_in() {
    let (rep, _, after) = walked_abort(vec![
        Ok(vec![]),
        Ok(vec![]),
        Ok(vec![entry_in("0001.part", 3), entry_in("0002.part", 4)]),
    ]);
    assert!(matches!(&after[..], [Work::Delete(_)]), "{after:?}");
    assert_eq!(
        rep.counters.placed["b"],
        BTreeMap::from([(3, 5), (4, 5)]),
        "each part's bytes in its volume"
    );

    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 4);
    let mut chunked = action_match(&p, "k1", 150 * S);
    chunked.identity = EntryIdentity::of(&entry_in("k1", 7));
    let mut refused = action_match(&p, "k2", 150 * S);
    refused.identity = EntryIdentity::of(&entry_in("k2", 8));
    let inline = action_match(&p, "k3", 150 * S);
    run.walk_matches("b", vec![chunked, refused, inline]);
    for (w, t) in run.next_sends() {
        let Work::Delete(r) = w else { panic!() };
        run.outcome(
            t,
            &if r.object_path == "k2" {
                retry_later()
            } else {
                ok()
            },
        );
    }
    run.listing_done("b", true);
    run.start_replay();
    let (rep, _) = run.finish(None);
    assert_eq!(
        rep.counters.placed,
        BTreeMap::from([("b".to_string(), BTreeMap::from([(7, 5)]))]),
        "only a DONE delete's volume, with its bytes"
    );
}

#[test]
fn a_locked_version_is_retried_next_pass_and_never_halts() {
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 4);
    let mut held = entry_named("k", 100);
    held.extended.insert(
        s3_lifecycled::engine::lock::LEGAL_HOLD_KEY.into(),
        b"ON".to_vec(),
    );
    let mut m = action_match(&p, "k", 150 * S);
    m.identity = EntryIdentity::of(&held);
    run.walk_matches("b", vec![m]);
    let (Work::Delete(_), t) = run.next_sends().remove(0) else {
        panic!()
    };
    let skipped = CallResult::answered(DeleteOutcome::SkippedObjectLock, "object under legal hold");
    assert_eq!(run.outcome(t, &skipped), None, "a lock never halts");
    let (Work::Check(_), t) = run.next_sends().remove(0) else {
        panic!("SKIPPED_OBJECT_LOCK is confirmed by a lookup")
    };
    let v = run.check_done(t, &[Ok(vec![held]), Ok(vec![])]);
    assert!(
        matches!(&v, s3_lifecycled::engine::check::Verdict::Locked(s) if s.contains("legal hold")),
        "{v:?}"
    );
    run.listing_done("b", true);
    run.start_replay();
    let (rep, c) = run.finish(None);
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    assert_eq!(rep.counters.locked, 1);
    let c = c.unwrap();
    let b = &c.buckets["b"];
    assert!(
        b.is_walk_placeholder() && b.walk_resume.is_none(),
        "the bucket's recovery is not done: the next pass walks it again ({b:?})"
    );
    assert_eq!(
        b.backlog.actions.values().map(|h| h.objects).sum::<u64>(),
        1
    );
}

/// Buckets `a` and `b`, each with an ExpirationDays rule.
fn two_bucket_plan(now: Nanos) -> Arc<PassPlan> {
    let rule = FlatRule {
        id: "d1".into(),
        enabled: true,
        expiration_days: 1,
        ..FlatRule::default()
    };
    let bucket = |name: &str| BucketConfig {
        name: name.into(),
        versioning: Versioning::Unversioned,
        object_lock: false,
        rules: vec![rule.clone()],
    };
    plan_of(
        Snapshot::compile(vec![bucket("a"), bucket("b")], time()),
        now,
    )
}

fn match_in(p: &PassPlan, bucket: &str, key: &str, due: Nanos) -> Match {
    let a = p
        .recovery
        .actions()
        .find(|a| &**a.bucket() == bucket)
        .unwrap();
    Match {
        bucket: bucket.into(),
        rule_hash: a.rule_hash(),
        ..action_match(p, key, due)
    }
}

/// Walk failures (docs/design-deviations.md#walk-failures): a walker delete that does not
/// resolve used to halt the whole shard, and with it the replay of every other bucket. It now
/// stops that bucket's walk only: the other bucket replays and its cursor advances, the failed
/// bucket keeps no new state (so it recovers again next pass), and the shard reports the
/// failure (halted, exit 3).
#[test]
fn failed_walker_delete_stops_only_its_bucket_and_replay_goes_on() {
    let (_, cursor) = steady(100 * S);
    let p = two_bucket_plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(cursor)), 8);
    assert!(run.shard_plan().recover.contains_key("a"));
    assert!(!run.shard_plan().recover.contains_key("b"));
    run.walk_matches(
        "a",
        vec![
            match_in(&p, "a", "k1", 50 * S),
            match_in(&p, "a", "k2", 50 * S),
            match_in(&p, "a", "k3", 50 * S),
        ],
    );
    let mut sent = run.next_sends().into_iter();
    let (w, t) = sent.next().unwrap();
    let Work::Delete(_) = w else { panic!() };
    assert_eq!(run.outcome(t, &retry_later()), None, "no shard halt");
    assert!(!run.stopped());
    for (w, t) in sent {
        let Work::Delete(_) = w else { panic!() };
        run.outcome(t, &ok());
    }
    // Walker work of `a` that comes later is not sent.
    run.walk_matches("a", vec![match_in(&p, "a", "k4", 50 * S)]);
    assert!(run.next_sends().is_empty());
    run.listing_done("a", true);

    assert!(run.start_replay().is_some(), "b still replays");
    let ts = 150 * S;
    run.replay_event(ts, &[match_in(&p, "b", "x", ts)]);
    let sent = run.next_sends();
    assert_eq!(sent.len(), 1, "b's replay delete goes out");
    for (w, t) in sent {
        let Work::Delete(req) = w else { panic!() };
        assert_eq!(req.bucket, "b");
        assert_eq!(run.outcome(t, &ok()), None);
    }
    let (rep, cursor) = run.finish(Some(200 * S));
    assert_eq!(rep.outcome, ShardOutcome::Halted);
    let why = rep.halt_reason.unwrap();
    assert!(
        why.starts_with("walk of bucket a did not finish") && why.contains("RETRY_LATER a/k1"),
        "{why}"
    );
    assert_eq!(rep.walk_failures.len(), 1);
    let c = cursor.unwrap();
    assert!(
        c.buckets["a"].is_walk_placeholder(),
        "a recovers again next pass, its backlog kept: {:?}",
        c.buckets["a"]
    );
    let b = &c.buckets["b"];
    assert_eq!(b.halted, None);
    assert!(
        b.rules.values().all(|p| p.ts >= ts),
        "b's cursor moved past its replayed event: {b:?}"
    );
}

// Walk coverage (docs/design-deviations.md#walk-coverage): a
// recovering shard's replay vouches only for matches some walk covered.

fn set_of(v: &[u8]) -> BTreeSet<u8> {
    v.iter().copied().collect()
}

#[test]
fn coverage_walkers_only_when_the_walk_owner_does_not_recover_here() {
    let owners = set_of(&[3, 7, 9]);
    // Cold start of every shard: the walk owner walks, nobody else (no
    // duplicate deletes).
    let all: BTreeSet<u8> = (0..16).collect();
    assert!(coverage_walkers(3, &owners, &all).is_empty());
    // One shard reset: it walks the items it replays but does not own.
    assert_eq!(coverage_walkers(3, &owners, &set_of(&[7])), vec![7]);
    // A recovering shard that replays none of the item's events does not.
    assert!(coverage_walkers(3, &owners, &set_of(&[5])).is_empty());
    // The walk owner recovering here covers every replay owner.
    assert!(coverage_walkers(3, &owners, &set_of(&[3, 7, 9])).is_empty());
    // Disjoint instances: the owner is not on this instance at all.
    assert_eq!(coverage_walkers(3, &owners, &set_of(&[7, 9])), vec![7, 9]);
}

#[test]
fn replay_owners_name_the_physical_paths_events_carry() {
    use s3_lifecycled::engine::shard_id;
    use s3_lifecycled::engine::walk::WalkItem;
    let file = |name: &str| Entry {
        name: name.into(),
        ..Entry::default()
    };
    let item = WalkItem::Versions {
        logical_key: "d/k".into(),
        folder: file("k.versions"),
        versions: vec![file("v_a1"), file("v_b2")],
        null_version: None,
    };
    let owners = item.replay_owners("b");
    for path in [
        "d/k",
        "d/k.versions",
        "d/k.versions/v_a1",
        "d/k.versions/v_b2",
    ] {
        assert!(owners.contains(&shard_id("b", path)), "{path}");
    }
    let mut upload = file("u1");
    upload.is_directory = true;
    upload
        .extended
        .insert(keys::MPU_KEY.into(), b"dest/x".to_vec());
    let up = WalkItem::Upload {
        upload_id: "u1".into(),
        entry: upload,
    };
    assert_eq!(up.shard("b"), Some(shard_id("b", "dest/x")));
    assert_eq!(
        up.replay_owners("b"),
        set_of(&[shard_id("b", ".uploads/u1")])
    );
}

#[test]
fn coverage_walkers_act_only_on_replay_kinds() {
    let p = plan(100 * S);
    let replayed = action_match(&p, "k", 10 * S);
    let mut walker_only = replayed.clone();
    walker_only.kind = ActionKind::ExpirationDate;
    let kept = replay_matches(&p, "b", vec![replayed.clone(), walker_only]);
    assert_eq!(kept, vec![replayed]);
}

// Resumable recovery walks (docs/design-deviations.md#resumable-recovery-walks).

/// The plan at `now` whose walk observed the cluster only up to `observed`.
fn plan_observed(now: Nanos, observed: Nanos) -> Arc<PassPlan> {
    plan_full(snapshot(), now, observed, None)
}

/// Sends every queued delete and answers each with `answer(key)`.
fn answer_all(run: &mut ShardRun, answer: impl Fn(&str) -> Option<CallResult>) {
    for (w, t) in run.next_sends() {
        let Work::Delete(req) = w else { panic!() };
        if let Some(r) = answer(&req.object_path) {
            run.outcome(t, &r);
        }
    }
}

#[test]
fn walk_resume_cut_cold_start_resumes_and_vouches_with_the_first_segment() {
    // Pass 1 (now 100 s, walk observed up to 95 s): items a, b, c; a's delete
    // resolves, b's is still unanswered when the walk is cut after c.
    let p1 = plan_observed(100 * S, 95 * S);
    let mut run = ShardRun::new(0, p1.clone(), None, 8);
    run.walk_item("b", Some("a"), vec![action_match(&p1, "a", 50 * S)]);
    run.walk_item("b", Some("b"), vec![action_match(&p1, "b", 50 * S)]);
    run.walk_item("b", Some("c"), vec![]);
    answer_all(&mut run, |k| (k == "a").then(ok));
    run.listing_ended("b", false, Some("c".into()));
    assert_eq!(run.start_replay(), None, "the cut bucket does not replay");
    let (_, cursor) = run.finish(None);
    let cursor = cursor.unwrap();
    let b = &cursor.buckets["b"];
    assert!(b.is_walk_placeholder(), "{b:?}");
    let r = b.walk_resume.clone().unwrap();
    assert_eq!(
        r.after, "a",
        "b's delete never resolved: it is listed again"
    );
    assert_eq!((r.first_now, r.first_observed_until), (100 * S, 95 * S));

    // Pass 2 (now 200 s): still a cold start, resuming after `a`.
    let p2 = plan_observed(200 * S, 190 * S);
    let mut run = ShardRun::new(0, p2.clone(), Some(Arc::new(cursor.clone())), 8);
    assert_eq!(
        run.shard_plan().recover.get("b"),
        Some(&RecoveryReason::ColdStart)
    );
    assert_eq!(run.shard_plan().resume_from("b"), Some("a"));
    run.walk_item("b", Some("b"), vec![action_match(&p2, "b", 50 * S)]);
    answer_all(&mut run, |_| Some(ok()));
    run.listing_ended("b", true, Some("c".into()));
    // Replay starts at the first segment's rewind point, 100 s − 10 s, not at
    // this pass's (190 s).
    assert_eq!(run.start_replay(), Some(90 * S));
    // Segment 1 vouched only for matches due by its own now (100 s) of events
    // up to what it observed (95 s).
    run.replay_event(92 * S, &[action_match(&p2, "walked", 99 * S)]);
    assert!(
        run.next_sends().is_empty(),
        "due by 100 s, event by 95 s: walked"
    );
    run.replay_event(93 * S, &[action_match(&p2, "due-later", 150 * S)]);
    run.replay_event(97 * S, &[action_match(&p2, "seen-later", 98 * S)]);
    let sent: Vec<String> = run
        .next_sends()
        .into_iter()
        .map(|(w, _)| match w {
            Work::Delete(r) => r.object_path,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sent, vec!["due-later", "seen-later"]);
    let (rep, cursor) = run.finish(None);
    assert_eq!(rep.outcome, ShardOutcome::Completed);
    let b = &cursor.unwrap().buckets["b"];
    assert_eq!(
        b.walk_resume, None,
        "the last segment finished the recovery"
    );
    assert!(!b.is_walk_placeholder());
}

#[test]
fn walk_resume_stays_before_an_unresolved_item_and_moves_over_resolved_ones() {
    let p = plan(100 * S);
    let mut run = ShardRun::new(0, p.clone(), None, 8);
    run.walk_item("b", Some("a"), vec![action_match(&p, "a", 50 * S)]);
    run.walk_item("b", Some("b/x"), vec![action_match(&p, "b/x", 50 * S)]);
    run.walk_item("b", Some("c"), vec![action_match(&p, "c", 50 * S)]);
    answer_all(&mut run, |k| {
        Some(if k == "b/x" { retry_later() } else { ok() })
    });
    // Items after the failure are not sent any more; none moves the point.
    run.walk_item("b", Some("d"), vec![action_match(&p, "d", 50 * S)]);
    assert!(run.next_sends().is_empty());
    run.listing_ended("b", true, Some("d".into()));
    run.start_replay();
    let (rep, cursor) = run.finish(None);
    assert_eq!(rep.outcome, ShardOutcome::Halted);
    let r = cursor.unwrap().buckets["b"].walk_resume.clone().unwrap();
    assert_eq!(r.after, "a");

    // Without any outstanding delete, the point moves to where the listing got.
    let mut run = ShardRun::new(0, p.clone(), None, 8);
    run.walk_item("b", Some("a"), vec![action_match(&p, "a", 50 * S)]);
    answer_all(&mut run, |_| Some(ok()));
    run.listing_ended("b", false, Some("q/r".into()));
    run.start_replay();
    let (_, cursor) = run.finish(None);
    let r = cursor.unwrap().buckets["b"].walk_resume.clone().unwrap();
    assert_eq!(r.after, "q/r");

    // An unconfirmed answer leaves its item unresolved like a failure.
    let mut run = ShardRun::new(0, p.clone(), None, 8);
    run.walk_item("b", Some("a"), vec![action_match(&p, "a", 50 * S)]);
    for (w, t) in run.next_sends() {
        let Work::Delete(_) = w else { panic!() };
        run.outcome(
            t,
            &CallResult::answered(DeleteOutcome::Withdrawn, "rule gone"),
        );
    }
    run.listing_ended("b", false, Some("z".into()));
    run.start_replay();
    let (_, cursor) = run.finish(None);
    let b = &cursor.unwrap().buckets["b"];
    assert!(
        b.is_walk_placeholder() && b.walk_resume.is_none(),
        "nothing resolved, nothing to resume from: the walk starts over ({b:?})"
    );
}

#[test]
fn walk_resume_is_dropped_when_the_rules_change_or_the_log_no_longer_reaches_back() {
    let p1 = plan(100 * S);
    let mut run = ShardRun::new(0, p1.clone(), None, 8);
    run.walk_item("b", Some("k"), vec![]);
    run.listing_ended("b", false, Some("k".into()));
    let (_, cursor) = run.finish(None);
    let cursor = cursor.unwrap();
    assert_eq!(cursor.buckets["b"].walk_resume.as_ref().unwrap().after, "k");

    let p2 = plan(150 * S);
    assert_eq!(plan_shard(&p2, Some(&cursor)).resume_from("b"), Some("k"));
    let mut edited = cursor.clone();
    edited
        .buckets
        .get_mut("b")
        .unwrap()
        .walk_resume
        .as_mut()
        .unwrap()
        .rule_set_hash = [9; 32];
    let sp = plan_shard(&p2, Some(&edited));
    assert_eq!(sp.recover.get("b"), Some(&RecoveryReason::ColdStart));
    assert_eq!(sp.resume_from("b"), None, "another rule set: start over");
    // The first segment's rewind point (90 s) fell out of the meta-log.
    let lost = plan_full(snapshot(), 150 * S, 150 * S, Some(95 * S));
    assert_eq!(plan_shard(&lost, Some(&cursor)).resume_from("b"), None);
    let kept = plan_full(snapshot(), 150 * S, 150 * S, Some(90 * S));
    assert_eq!(plan_shard(&kept, Some(&cursor)).resume_from("b"), Some("k"));
}

#[test]
fn walk_resume_of_a_recovering_bucket_keeps_its_old_state() {
    let (_, cursor) = steady(100 * S);
    let mut edited = cursor.clone();
    edited.buckets.get_mut("b").unwrap().rule_set_hash = [9; 32];
    let p = plan(200 * S);
    let mut run = ShardRun::new(0, p.clone(), Some(Arc::new(edited.clone())), 8);
    assert_eq!(
        run.shard_plan().recover.get("b"),
        Some(&RecoveryReason::RuleEdit)
    );
    run.walk_item("b", Some("m"), vec![]);
    run.listing_ended("b", false, Some("m".into()));
    run.start_replay();
    let (_, c) = run.finish(None);
    let b = c.unwrap().buckets["b"].clone();
    assert_eq!(b.rule_set_hash, [9; 32], "old state kept: recovers again");
    assert_eq!(b.rules, edited.buckets["b"].rules);
    assert_eq!(b.walk_resume.unwrap().after, "m");
}
