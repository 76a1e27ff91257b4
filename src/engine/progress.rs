//! Replay progress: which meta-log events a pass may skip next time, per action.
//!
//! Per compiled action (bucket, rule hash, kind) an [`ActionProgress`] (`ts`,
//! `through` / `through_now`, `tail`), and a [`ProgressTracker`] that updates
//! them during a pass with O(in-flight + pending-blocker) memory
//! (docs/design-deviations.md#per-action-progress). Events arrive slightly out
//! of `ts_ns` order, so progress stays [`REORDER_MARGIN`] behind the newest
//! processed event and remembers what resolved in that sliver in
//! [`ActionProgress::tail`] (docs/design-deviations.md#reorder-margin,
//! docs/design-deviations.md#resolved-tail).
//!
//! Invariants (property-tested below): `ts` never passes an event with a pending,
//! in-flight or failed match; a match is never skipped unless it resolved in an
//! earlier pass; progress never moves backwards.

use std::collections::{BTreeMap, HashMap};

use super::cursor::ActionProgress;
use super::due_index;
use super::pending;
use super::time::{Nanos, TimeConfig};

/// How far behind the newest processed event progress stays, for events that
/// arrive out of `ts_ns` order (see the module docs). Seconds of re-reading per
/// pass against silently skipping an event forever.
pub const REORDER_MARGIN: Nanos = 5_000_000_000;

/// Most tail marks kept per action: the deletes that resolved after `through`.
/// Normally only the reorder margin's worth; after a halt everything resolved
/// past the halting event, and beyond this cap the oldest of those may be
/// re-sent once (they come back as no-ops).
pub const TAIL_CAP: usize = 4096;

/// A stable 64-bit name for what a match deletes (FNV-1a over the object path
/// and version id). Persisted in cursors: never change it.
pub fn subject_of(object_path: &str, version_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in object_path
        .as_bytes()
        .iter()
        .chain(std::iter::once(&0u8))
        .chain(version_id.as_bytes())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What to do with one match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Resolved in an earlier pass (or the event is before the action's cursor).
    Skip,
    /// Not due yet: nothing to send, and the action's `ts` stays before the event.
    Pending,
    /// Send a delete; report its fate with [`ProgressTracker::resolved`].
    Dispatch(Ticket),
}

/// Identifies one dispatched delete inside a [`ProgressTracker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    action: usize,
    seq: u64,
}

#[derive(Debug)]
struct Track<K> {
    key: K,
    start: ActionProgress,
    first_pending: Option<Nanos>,
    first_failed: Option<Nanos>,
    /// Dispatched and unanswered: seq → (event ts, subject, due, bytes).
    in_flight: BTreeMap<u64, (Nanos, u64, Nanos, u64)>,
    /// Resolved (ts, subject) marks near the newest processed event.
    marks: std::collections::VecDeque<(Nanos, u64)>,
    /// The ranges this action needs in this pass ([`ActionProgress::ranges_for`]).
    own: Vec<(Nanos, Nanos)>,
    /// Unresolved matches seen this pass, by span: start → (end, earliest due).
    observed: BTreeMap<Nanos, (Nanos, Nanos)>,
    /// The same matches counted by due day, for the forecast.
    tally: pending::Observed,
}

/// Tracks one pass's decisions and outcomes for a set of actions (one shard).
///
/// Feed it events in meta-log order: [`decide_sized`](Self::decide_sized) for
/// each match of an event, then [`event_processed`](Self::event_processed) once
/// every match of that event was decided; report each dispatched delete's fate
/// with [`resolved`](Self::resolved) in any order; then [`finish`](Self::finish).
#[derive(Debug)]
pub struct ProgressTracker<K> {
    now: Nanos,
    tracks: Vec<Track<K>>,
    index: HashMap<K, usize>,
    processed_through: Option<Nanos>,
    next_seq: u64,
    margin: Nanos,
    /// Due-index upkeep, with the pass's time settings (`None`: off, every
    /// action reads from its `ts` and no index is written).
    index_time: Option<TimeConfig>,
    /// Most resolved marks held in this pass, summed over every action
    /// ([`with_tail_budget`](Self::with_tail_budget)).
    budget: usize,
    /// Marks held now, summed over every action.
    marks_held: usize,
}

impl<K: Clone + Eq + std::hash::Hash> ProgressTracker<K> {
    /// Overrides [`REORDER_MARGIN`] (tests of exact cursor arithmetic use 0).
    pub fn with_reorder_margin(mut self, margin: Nanos) -> Self {
        self.margin = margin.max(0);
        self
    }

    /// Bounds the resolved marks held in this pass, over all actions
    /// together, at `budget` (docs/due-index.md#memory). Marks are only "do
    /// not re-send" hints: past the budget the tracker first forgets the ones
    /// [`finish`](Self::finish) would drop anyway, then asks its caller to
    /// stop taking events while deletes are in flight
    /// ([`over_budget`](Self::over_budget)), and with nothing in flight drops
    /// the oldest (re-sent once by a later pass, as no-ops). Pending,
    /// in-flight and failed matches are never forgotten, so a budget can cost
    /// a re-send, never a skip.
    pub fn with_tail_budget(mut self, budget: usize) -> Self {
        self.budget = budget.max(1);
        self
    }

    /// Whether the marks held exceed the budget even after pruning, while
    /// deletes are in flight: the caller should take no new event until an
    /// outcome arrives ([`resolved`](Self::resolved) prunes again).
    pub fn over_budget(&self) -> bool {
        self.marks_held > self.budget
    }

    /// Keeps each action's due index (docs/due-index.md): each action then
    /// needs only [`ranges_for`](ActionProgress::ranges_for) of its progress, and
    /// [`finish`](Self::finish) writes the updated index.
    pub fn with_due_index(mut self, time: TimeConfig) -> Self {
        self.index_time = Some(time);
        let now = self.now;
        for t in &mut self.tracks {
            t.own = t.start.ranges_for(now, &time);
        }
        self
    }

    /// The meta-log ranges `(since, until]` this tracker's actions need,
    /// sorted and merged. Without the due index: `(min ts, now]`.
    pub fn ranges(&self) -> Vec<(Nanos, Nanos)> {
        due_index::merge_ranges(
            self.tracks
                .iter()
                .flat_map(|t| t.own.iter().copied())
                .collect(),
        )
    }

    /// A tracker for a pass at `now`, starting from each action's persisted
    /// progress.
    pub fn new(now: Nanos, starts: impl IntoIterator<Item = (K, ActionProgress)>) -> Self {
        let mut t = ProgressTracker {
            now,
            tracks: Vec::new(),
            index: HashMap::new(),
            processed_through: None,
            next_seq: 0,
            margin: REORDER_MARGIN,
            index_time: None,
            budget: usize::MAX,
            marks_held: 0,
        };
        // A repeated key keeps the state it was first given.
        for (key, start) in starts {
            if t.index.contains_key(&key) {
                continue;
            }
            t.index.insert(key.clone(), t.tracks.len());
            // Without the due index: `(ts, now]` (`with_due_index` redoes it).
            let own = due_index::merge_ranges(vec![(start.ts, now)]);
            t.tracks.push(Track {
                key,
                start,
                own,
                observed: BTreeMap::new(),
                tally: pending::Observed::new(),
                first_pending: None,
                first_failed: None,
                in_flight: BTreeMap::new(),
                marks: std::collections::VecDeque::new(),
            });
        }
        t
    }

    /// Decides a match of `key` from the event at `ev_ts` about `subject`
    /// ([`subject_of`]), due at `due`, of `bytes` bytes (counted in the
    /// forecast tally, docs/forecast.md, while unresolved). An unknown action
    /// is skipped: it is not part of this pass's view.
    pub fn decide_sized(
        &mut self,
        key: &K,
        ev_ts: Nanos,
        subject: u64,
        due: Nanos,
        bytes: u64,
    ) -> Decision {
        let Some(&i) = self.index.get(key) else {
            return Decision::Skip;
        };
        let t = &mut self.tracks[i];
        if !t.start.needs(ev_ts, subject, due) {
            if ev_ts > t.start.through && ev_ts > t.start.ts {
                // Resolved in the old tail: it stays resolved in the new one.
                self.marks_held += push_mark(&mut t.marks, (ev_ts, subject));
                self.enforce_budget();
            }
            return Decision::Skip;
        }
        if due > self.now {
            t.first_pending = Some(t.first_pending.map_or(ev_ts, |p| p.min(ev_ts)));
            if let Some(time) = &self.index_time {
                due_index::observe(&mut t.observed, due_index::span_width(time), ev_ts, due);
                pending::observe(&mut t.tally, time, ev_ts, due, bytes);
            }
            return Decision::Pending;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        t.in_flight.insert(seq, (ev_ts, subject, due, bytes));
        Decision::Dispatch(Ticket { action: i, seq })
    }

    /// Marks the event at `ev_ts` as fully decided (every match has a decision).
    pub fn event_processed(&mut self, ev_ts: Nanos) {
        self.processed_through = Some(self.processed_through.map_or(ev_ts, |p| p.max(ev_ts)));
        if self.marks_held > self.budget {
            self.enforce_budget();
        }
    }

    /// Reports a dispatched delete's fate: `ok` for DONE, NOOP_RESOLVED and
    /// SKIPPED_OBJECT_LOCK; not ok for anything that leaves it unresolved.
    pub fn resolved(&mut self, ticket: Ticket, ok: bool) {
        let Some(t) = self.tracks.get_mut(ticket.action) else {
            return;
        };
        if let Some((ev_ts, subject, due, bytes)) = t.in_flight.remove(&ticket.seq) {
            if ok {
                self.marks_held += push_mark(&mut t.marks, (ev_ts, subject));
            } else {
                t.first_failed = Some(t.first_failed.map_or(ev_ts, |f| f.min(ev_ts)));
                if let Some(time) = &self.index_time {
                    // Due already: the next pass reads this span again.
                    due_index::observe(&mut t.observed, due_index::span_width(time), ev_ts, due);
                    pending::observe(&mut t.tally, time, ev_ts, due, bytes);
                }
            }
        }
        self.enforce_budget();
    }

    /// The newest event ts whose resolved marks [`finish`](Self::finish)
    /// will not keep: every match due by `now` of the events up to it will be
    /// covered by the new `through`. It is the earliest of the unresolved
    /// dispatches (in flight or failed) minus one and the processed end minus
    /// the reorder margin (events arrive at most that far out of order, so no
    /// later dispatch lands before it). `None` while it is before the
    /// action's old `through`, which `finish` then keeps as it was.
    fn prune_frontier(t: &Track<K>, processed: Option<Nanos>, margin: Nanos) -> Option<Nanos> {
        let end = processed?.saturating_sub(margin);
        let blocker = min_opt(t.in_flight.values().map(|v| v.0).min(), t.first_failed);
        let f = blocker.map_or(end, |b| b.saturating_sub(1).min(end));
        (f >= t.start.through).then_some(f)
    }

    /// Forgets the marks at or before each action's prune frontier. Returns
    /// how many went.
    fn prune(&mut self) -> usize {
        let processed = self.processed_through;
        let margin = self.margin;
        let mut gone = 0;
        for t in &mut self.tracks {
            if let Some(f) = Self::prune_frontier(t, processed, margin) {
                let before = t.marks.len();
                t.marks.retain(|m| m.0 > f);
                gone += before - t.marks.len();
                if t.marks.capacity() > 64 && t.marks.len() < t.marks.capacity() / 4 {
                    // Emptied actions give their room back: the budget is on
                    // what the pass holds, not on what it once held.
                    t.marks.shrink_to_fit();
                }
            }
        }
        self.marks_held -= gone;
        gone
    }

    /// Keeps the marks within the budget: prune; then, with nothing in flight
    /// (waiting cannot move a frontier), drop the oldest marks of the
    /// fullest actions down to seven eighths of the budget, so the next
    /// prune is that many marks away. With deletes in flight the caller
    /// waits instead ([`over_budget`](Self::over_budget)).
    fn enforce_budget(&mut self) {
        if self.marks_held <= self.budget {
            return;
        }
        self.prune();
        if self.marks_held <= self.budget || self.in_flight() > 0 {
            return;
        }
        let target = self.budget - self.budget / 8;
        while self.marks_held > target {
            let Some(t) = self.tracks.iter_mut().max_by_key(|t| t.marks.len()) else {
                break;
            };
            let excess = (self.marks_held - target).min(t.marks.len());
            if excess == 0 {
                break;
            }
            t.marks.drain(..excess);
            self.marks_held -= excess;
        }
    }

    /// Number of dispatched deletes without an outcome yet.
    pub fn in_flight(&self) -> usize {
        self.tracks.iter().map(|t| t.in_flight.len()).sum()
    }

    /// Ends the pass and returns each action's new progress.
    ///
    /// `stream_end` is the pass's `until_ns` when the meta-log stream was read to
    /// its normal end and every event was processed, so a quiet action may
    /// advance to it; `None` after a halt, an error or a truncated pass, which
    /// advance at most to the last processed event. Deletes still in flight count
    /// as unresolved.
    pub fn finish(self, stream_end: Option<Nanos>) -> Vec<(K, ActionProgress)> {
        let now = self.now;
        let margin = self.margin;
        let index_time = self.index_time;
        let end = stream_end
            .or(self.processed_through)
            .map(|e| e.saturating_sub(margin));
        self.tracks
            .into_iter()
            .map(|mut t| {
                let (index, carried_from, pending) = match index_time {
                    None => (None, None, None),
                    Some(time) => {
                        let width = due_index::span_width(&time);
                        for &(ev_ts, _, due, bytes) in t.in_flight.values() {
                            due_index::observe(&mut t.observed, width, ev_ts, due);
                            pending::observe(&mut t.tally, &time, ev_ts, due, bytes);
                        }
                        let old = t.start.usable(&time);
                        let (index, carried) =
                            due_index::rebuild(old, &time, t.start.ts, &t.own, end, &t.observed);
                        let tally = pending::rebuild(
                            t.start.pending.as_ref(),
                            old,
                            &index,
                            &time,
                            pending::PassRead {
                                start_ts: t.start.ts,
                                own: &t.own,
                                limit: end,
                            },
                            &t.tally,
                        );
                        (Some(index), carried, Some(tally))
                    }
                };
                let start = t.start;
                let dispatch_blocker =
                    min_opt(t.in_flight.values().map(|v| v.0).min(), t.first_failed);
                let blocker = min_opt(dispatch_blocker, t.first_pending);
                let upto = |b: Option<Nanos>| min_opt(b.map(|b| b.saturating_sub(1)), end);
                let mut ts = upto(blocker).map_or(start.ts, |v| v.max(start.ts));
                if let Some(first) = carried_from {
                    // Unread spans may hold pending matches this pass never
                    // saw: `ts` stays before them.
                    ts = ts.min(first.saturating_sub(1)).max(start.ts);
                }
                let (mut through, mut through_now) = (start.through, start.through_now);
                if let Some(cand) = upto(dispatch_blocker)
                    && cand >= start.through
                {
                    // Every match due by `now` of events up to `cand` resolved:
                    // older ones skipped as resolved earlier, the rest this pass.
                    through = cand;
                    through_now = now;
                }
                if ts >= through {
                    // Everything up to `ts` is finished, whatever its due time.
                    through = ts;
                    through_now = through_now.max(now);
                }
                // Resolved matches `through` does not cover are named one by
                // one. When `through` moved to `now`, everything resolved at or
                // before it is covered; otherwise keep all past `ts`.
                let floor = if through_now == now { through } else { ts };
                let mut tail: Vec<(Nanos, u64)> = start
                    .tail
                    .iter()
                    .copied()
                    .chain(t.marks)
                    .filter(|m| m.0 > floor)
                    .collect();
                tail.sort_unstable();
                tail.dedup();
                // Keep the newest: after a halt they are the likeliest to be
                // re-read first.
                if tail.len() > TAIL_CAP {
                    tail.drain(..tail.len() - TAIL_CAP);
                }
                (
                    t.key,
                    ActionProgress {
                        ts,
                        through,
                        through_now,
                        tail,
                        due: index,
                        pending,
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
impl<K: Clone + Eq + std::hash::Hash> ProgressTracker<K> {
    /// [`decide_sized`](Self::decide_sized) of an unknown subject and size.
    pub fn decide(&mut self, key: &K, ev_ts: Nanos, due: Nanos) -> Decision {
        self.decide_subject(key, ev_ts, 0, due)
    }

    /// [`decide_sized`](Self::decide_sized) of an unknown size.
    pub fn decide_subject(&mut self, key: &K, ev_ts: Nanos, subject: u64, due: Nanos) -> Decision {
        self.decide_sized(key, ev_ts, subject, due, 0)
    }

    /// Resolved marks held now, over all actions.
    pub fn marks_held(&self) -> usize {
        self.marks_held
    }
}

/// Remembers a resolved match; past [`TAIL_CAP`] the oldest marks go first
/// (in a pass without a halt, `through` covers them anyway). Returns the
/// change in the number of marks held (0 or 1).
fn push_mark(marks: &mut std::collections::VecDeque<(Nanos, u64)>, mark: (Nanos, u64)) -> usize {
    marks.push_back(mark);
    if marks.len() > TAIL_CAP {
        marks.pop_front();
        return 0;
    }
    1
}

fn min_opt(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    a.into_iter().chain(b).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        start: ActionProgress,
        now: Nanos,
        events: &[(Nanos, Nanos)],
        fail: &[Nanos],
        stream_end: Option<Nanos>,
    ) -> (Vec<Decision>, ActionProgress) {
        let mut t = ProgressTracker::new(now, [("r", start)]).with_reorder_margin(0);
        let mut ds = Vec::new();
        for &(ts, due) in events {
            let d = t.decide(&"r", ts, due);
            if let Decision::Dispatch(tk) = d {
                t.resolved(tk, !fail.contains(&ts));
            }
            ds.push(d);
            t.event_processed(ts);
        }
        let out = t.finish(stream_end);
        (ds, out.into_iter().next().unwrap().1)
    }

    #[test]
    fn cursor_stops_before_first_pending_event_but_later_due_matches_are_sent() {
        let (ds, p) = run(
            ActionProgress::at(0),
            100,
            &[(10, 50), (20, 500), (30, 60)],
            &[],
            Some(100),
        );
        assert!(matches!(ds[0], Decision::Dispatch(_)));
        assert_eq!(ds[1], Decision::Pending);
        assert!(matches!(ds[2], Decision::Dispatch(_)));
        assert_eq!(p.ts, 19);
        assert_eq!((p.through, p.through_now), (100, 100));
    }

    #[test]
    fn resolved_deletes_after_a_pending_event_are_not_resent_next_pass() {
        // Regression for Go's daily re-sends (docs/design-deviations.md#per-action-progress).
        let (_, p1) = run(
            ActionProgress::at(0),
            100,
            &[(10, 50), (20, 500), (30, 60)],
            &[],
            Some(100),
        );
        let (ds, p2) = run(
            p1.clone(),
            200,
            &[(20, 500), (30, 60), (150, 160)],
            &[],
            Some(200),
        );
        assert_eq!(ds[0], Decision::Pending, "still not due at 200");
        assert_eq!(ds[1], Decision::Skip, "resolved in pass 1");
        assert!(matches!(ds[2], Decision::Dispatch(_)));
        assert_eq!(p2.ts, 19);
        let (ds, p3) = run(
            p2.clone(),
            600,
            &[(20, 500), (30, 60), (150, 160)],
            &[],
            Some(600),
        );
        assert!(matches!(ds[0], Decision::Dispatch(_)));
        assert_eq!(ds[1], Decision::Skip);
        assert_eq!(ds[2], Decision::Skip);
        assert_eq!(p3.ts, 600);
    }

    #[test]
    fn failure_blocks_both_cursors_and_is_retried_next_pass() {
        let (_, p) = run(
            ActionProgress::at(0),
            100,
            &[(10, 50), (20, 60), (30, 70)],
            &[20],
            None,
        );
        assert_eq!(p.ts, 19);
        assert_eq!(p.through, 19);
        let (ds, _) = run(p, 101, &[(20, 60), (30, 70)], &[], Some(101));
        assert!(matches!(ds[0], Decision::Dispatch(_)));
        assert_eq!(
            ds[1],
            Decision::Skip,
            "resolved after the failure in pass 1: remembered in the tail"
        );
    }

    #[test]
    fn tally_counts_pending_failed_and_in_flight_but_not_resolved_matches() {
        use std::time::Duration;
        let time = TimeConfig {
            day: Duration::from_nanos(2400),
            rounding: super::super::time::DueRounding::None,
        };
        let mut t = ProgressTracker::new(1_000, [("r", ActionProgress::at(0))])
            .with_due_index(time)
            .with_reorder_margin(0);
        // Pending (due later), resolved, failed, in flight at finish.
        assert_eq!(t.decide_sized(&"r", 10, 1, 5_000, 100), Decision::Pending);
        let Decision::Dispatch(ok) = t.decide_sized(&"r", 20, 2, 500, 200) else {
            panic!("expected dispatch")
        };
        let Decision::Dispatch(bad) = t.decide_sized(&"r", 30, 3, 600, 400) else {
            panic!("expected dispatch")
        };
        let Decision::Dispatch(_) = t.decide_sized(&"r", 40, 4, 700, 800) else {
            panic!("expected dispatch")
        };
        for ts in [10, 20, 30, 40] {
            t.event_processed(ts);
        }
        t.resolved(ok, true);
        t.resolved(bad, false);
        let (_, p) = t.finish(Some(1_000)).remove(0);
        let tally = p.pending.expect("a tally next to the index");
        let bins: Vec<_> = tally.bins().copied().collect();
        // 5000 → day boundary 7200; 600 and 700 → 2400 (one bin, first due 600).
        assert_eq!(bins, vec![(2400, 2, 1200, 600), (7200, 1, 100, 5000)]);
        assert!(tally.complete);
    }

    #[test]
    fn in_flight_at_finish_counts_as_unresolved() {
        let mut t =
            ProgressTracker::new(100, [("r", ActionProgress::at(0))]).with_reorder_margin(0);
        let Decision::Dispatch(_) = t.decide(&"r", 10, 5) else {
            panic!("expected dispatch")
        };
        t.event_processed(10);
        t.event_processed(20);
        let p = t.finish(Some(100)).remove(0).1;
        assert_eq!(p.ts, 9);
    }

    #[test]
    fn quiet_action_advances_to_stream_end_only_when_stream_completed() {
        let (_, p) = run(ActionProgress::at(5), 100, &[], &[], Some(100));
        assert_eq!(p.ts, 100);
        let (_, p) = run(ActionProgress::at(5), 100, &[], &[], None);
        assert_eq!(p.ts, 5);
    }

    #[test]
    fn halt_before_old_through_keeps_old_through_claim() {
        let start = ActionProgress {
            ts: 0,
            through: 50,
            through_now: 40,
            tail: Vec::new(),
            due: None,
            pending: None,
        };
        // Pass halts at event 10 (failure); events up to 50 with due ≤ 40 stay resolved.
        let (_, p) = run(start, 100, &[(10, 90)], &[10], None);
        assert_eq!((p.ts, p.through, p.through_now), (9, 50, 40));
    }

    #[test]
    fn progress_stays_a_margin_behind_the_newest_event() {
        // Regression: events arrive up to milliseconds out of ts order; a
        // cursor at the newest ts would skip a late-appended older event.
        let mut t =
            ProgressTracker::new(100, [("r", ActionProgress::at(0))]).with_reorder_margin(5);
        t.event_processed(50);
        let p = t.finish(Some(60)).remove(0).1;
        assert_eq!((p.ts, p.through), (55, 55));
        let mut t = ProgressTracker::new(100, [("r", ActionProgress::at(0))]);
        t.event_processed(50 + REORDER_MARGIN);
        assert_eq!(t.finish(None)[0].1.ts, 50);
    }

    #[test]
    fn tail_marks_stop_resends_inside_the_reorder_margin() {
        // Regression: the margin made every pass re-read (and re-send) the
        // deletes of its last seconds, day after day on a quiet bucket.
        let mut t =
            ProgressTracker::new(100, [("r", ActionProgress::at(0))]).with_reorder_margin(5);
        let Decision::Dispatch(tk) = t.decide_subject(&"r", 58, 7, 50) else {
            panic!("expected dispatch")
        };
        t.resolved(tk, true);
        t.event_processed(58);
        let p = t.finish(Some(60)).remove(0).1;
        assert_eq!((p.ts, p.through, p.tail.clone()), (55, 55, vec![(58, 7)]));
        let mut t = ProgressTracker::new(200, [("r", p)]).with_reorder_margin(5);
        assert_eq!(t.decide_subject(&"r", 58, 7, 50), Decision::Skip);
        // A late-appended event in the margin is still looked at.
        assert!(matches!(
            t.decide_subject(&"r", 57, 9, 50),
            Decision::Dispatch(_)
        ));
        assert_ne!(subject_of("a", ""), subject_of("a", "null"));
        assert_eq!(subject_of("k", "v1"), subject_of("k", "v1"));
    }

    #[test]
    fn tail_budget_prunes_covered_marks_during_the_pass() {
        // Regression: every action kept up to TAIL_CAP resolved marks for the
        // whole pass, so many busy actions multiplied into gigabytes.
        let keys: Vec<String> = (0..50).map(|i| format!("r{i}")).collect();
        let mut t = ProgressTracker::new(
            1_000_000,
            keys.iter().map(|k| (k.clone(), ActionProgress::at(0))),
        )
        .with_reorder_margin(10)
        .with_tail_budget(64);
        let mut most = 0;
        for ts in 1..=20_000i64 {
            let k = &keys[(ts % 50) as usize];
            let Decision::Dispatch(tk) = t.decide_subject(k, ts, ts as u64, 0) else {
                panic!("due at once")
            };
            t.resolved(tk, true);
            t.event_processed(ts);
            assert!(!t.over_budget(), "nothing in flight: never waits");
            most = most.max(t.marks_held());
        }
        assert!(most <= 64, "held {most} marks with a budget of 64");
        // The marks still held are the reorder margin's: the next pass does
        // not re-send them, and `through` covers the rest.
        let out = t.finish(Some(20_000));
        for (_, p) in &out {
            assert_eq!(p.through, 19_990);
            assert!(p.tail.iter().all(|m| m.0 > 19_990));
        }
    }

    #[test]
    fn over_tail_budget_waits_for_in_flight_then_forgets_oldest_never_pending() {
        let mut t = ProgressTracker::new(100, [("r", ActionProgress::at(0))])
            .with_reorder_margin(1_000)
            .with_tail_budget(4);
        // A pending match first: it must survive whatever the budget does.
        assert_eq!(t.decide_subject(&"r", 1, 1, 500), Decision::Pending);
        t.event_processed(1);
        let mut tickets = Vec::new();
        for ts in 2..=8 {
            let Decision::Dispatch(tk) = t.decide_subject(&"r", ts, ts as u64, 50) else {
                panic!("due")
            };
            tickets.push(tk);
            t.event_processed(ts);
        }
        // Six answers with one still in flight: over the budget, and the
        // margin keeps the frontier from moving: wait.
        for tk in tickets.drain(..6) {
            t.resolved(tk, true);
        }
        assert!(t.over_budget(), "waits while a delete is in flight");
        // The last answer: nothing in flight, the oldest marks go.
        t.resolved(tickets.pop().unwrap(), true);
        assert!(!t.over_budget());
        assert!(t.marks_held() <= 4);
        let p = t.finish(Some(100)).remove(0).1;
        assert_eq!(p.ts, 0, "the pending match at 1 still holds the cursor");
        // Next pass: the forgotten marks are re-sent (no-ops at the gateway),
        // the kept ones skipped, the pending one still pending.
        let mut t = ProgressTracker::new(200, [("r", p)]).with_reorder_margin(1_000);
        assert_eq!(t.decide_subject(&"r", 1, 1, 500), Decision::Pending);
        assert!(matches!(
            t.decide_subject(&"r", 2, 2, 50),
            Decision::Dispatch(_)
        ));
        assert_eq!(t.decide_subject(&"r", 8, 8, 50), Decision::Skip);
    }

    #[test]
    fn unknown_actions_are_skipped() {
        let mut t = ProgressTracker::new(100, [("r", ActionProgress::at(0))]);
        assert_eq!(t.decide(&"other", 10, 5), Decision::Skip);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        /// One pass of the due-index model: what the pass read and did.
        /// `mode`: 0 runs to the end; 1 halts at the first failing delete; 2
        /// is truncated after `cut` delivered events.
        #[allow(clippy::too_many_arguments)]
        fn model_pass(
            evs: &[(Nanos, Nanos, Nanos)],
            progress: &ActionProgress,
            now: Nanos,
            clock: Nanos,
            time: TimeConfig,
            margin: Nanos,
            mode: u8,
            cut: usize,
            fail: &[bool],
            resolved: &mut std::collections::HashSet<usize>,
        ) -> Result<(ActionProgress, bool), TestCaseError> {
            let mut t = ProgressTracker::new(now, [("r", progress.clone())])
                .with_reorder_margin(margin)
                .with_due_index(time);
            let ranges = t.ranges();
            // The log in append order (ts + delay); visible once appended,
            // by the filer's clock (which may lag the pass's `now` or lead it).
            let mut log: Vec<usize> = (0..evs.len())
                .filter(|&i| evs[i].0 + evs[i].2 <= clock)
                .collect();
            log.sort_by_key(|&i| (evs[i].0 + evs[i].2, i));
            let mut last = None;
            let mut delivered = 0;
            let mut halted = false;
            for &r in &ranges {
                for &i in &log {
                    let (ts, due, _) = evs[i];
                    if ts <= r.0 || ts > r.1 {
                        continue;
                    }
                    if (mode == 2 && delivered >= cut) || halted {
                        break;
                    }
                    delivered += 1;
                    last = Some(ts);
                    match t.decide_subject(&"r", ts, i as u64, due) {
                        Decision::Skip => {}
                        Decision::Pending => prop_assert!(due > now),
                        Decision::Dispatch(tk) => {
                            prop_assert!(due <= now, "sent {i} before it was due");
                            prop_assert!(!resolved.contains(&i), "re-sent resolved {i}");
                            let ok = !(mode == 1 && fail[i % fail.len()]);
                            t.resolved(tk, ok);
                            if ok {
                                resolved.insert(i);
                            } else {
                                halted = true;
                            }
                        }
                    }
                    // As in ShardRun: every match of a delivered event is
                    // decided before the halt takes effect.
                    t.event_processed(ts);
                }
                if halted || (mode == 2 && delivered >= cut) {
                    break;
                }
            }
            let complete = !(halted || (mode == 2 && delivered >= cut));
            // As the coordinator's stream end: a read to its end vouches for
            // the filer's clock too (never past the last range); a stopped
            // one only for what it delivered; a halt for nothing.
            let end = if halted {
                None
            } else if complete {
                last.max(ranges.last().map(|r| clock.min(r.1)))
            } else {
                last
            };
            let next = t.finish(end).remove(0).1;
            prop_assert!(next.ts >= progress.ts);
            Ok((next, complete))
        }

        // The planner's promise (docs/due-index.md#why-it-is-exact): over
        // passes with halts, truncations, late-appended events, due times in
        // any order and rule edits, (1) nothing is sent before it is due or
        // twice, and (2) after every complete pass, every visible match due
        // by its `now` has resolved — the ranges read covered it.
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn due_index_reads_cover_every_due_match(
                evs in proptest::collection::vec((1i64..300, 0i64..900, 0i64..4), 0..60),
                passes in proptest::collection::vec((0i64..120, 0u8..3, 0usize..30, any::<bool>(), -20i64..100), 1..8),
                fail in proptest::collection::vec(any::<bool>(), 1..8),
            ) {
                let time = TimeConfig { day: std::time::Duration::from_nanos(240), rounding: crate::engine::DueRounding::None };
                let margin = 4;
                let mut evs = evs;
                let mut progress = ActionProgress::at(0);
                let mut resolved = std::collections::HashSet::new();
                let mut now = 0;
                // The filer's clock: it never runs back, and lags the pass's
                // `now` by up to 100 (a `--now` ahead, a fast host clock) or
                // leads it by up to 20.
                let mut clock = 0;
                for (step, mode, cut, edit, lag) in passes {
                    now += step;
                    clock = (now - lag).max(clock);
                    if edit {
                        // A rule edit: a new action with other due times,
                        // recovered from the start of the log (no index).
                        for e in &mut evs { e.1 = (e.1 * 7 + 13) % 900; }
                        progress = ActionProgress::at(0);
                        resolved.clear();
                    }
                    let (next, complete) = model_pass(&evs, &progress, now, clock, time, margin, mode, cut, &fail, &mut resolved)?;
                    if complete {
                        for (i, &(ts, due, delay)) in evs.iter().enumerate() {
                            if due <= now && ts <= now && ts + delay <= clock {
                                prop_assert!(resolved.contains(&i), "due match {i} (ts {ts}, due {due}) missed at now {now}");
                            }
                        }
                    }
                    progress = next;
                }
                // A final complete pass after everything is due resolves all.
                now += 1_000;
                let (_, complete) = model_pass(&evs, &progress, now, now, time, margin, 0, 0, &fail, &mut resolved)?;
                prop_assert!(complete);
                prop_assert_eq!(resolved.len(), evs.len());
            }
        }

        // The tail budget costs re-sends, never a skip: with budgets of a few
        // marks, deletes answered out of order and intake stopped while the
        // tracker is over budget (as ShardRun::accepting does), every due
        // match resolves in each complete pass, nothing is sent before it is
        // due, and the tracker never waits with nothing in flight.
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn tail_budget_never_causes_a_skip(
                evs in proptest::collection::vec((1i64..300, 0i64..900), 0..60),
                nows in proptest::collection::vec(1i64..200, 1..6),
                budget in 1usize..6,
                window in 1usize..5,
                order in proptest::collection::vec(any::<u8>(), 64),
                margin in 0i64..20,
            ) {
                let time = TimeConfig { day: std::time::Duration::from_nanos(240), rounding: crate::engine::DueRounding::None };
                let mut evs = evs;
                evs.sort_by_key(|e| e.0);
                let mut progress = [ActionProgress::at(0), ActionProgress::at(0)];
                let mut resolved = std::collections::HashSet::new();
                let mut now = 0;
                let mut steps = nows;
                steps.push(2_000);
                for step in steps {
                    now += step;
                    let [pa, pb] = progress.clone();
                    let mut t = ProgressTracker::new(now, [("a", pa), ("b", pb)])
                        .with_reorder_margin(margin)
                        .with_due_index(time)
                        .with_tail_budget(budget);
                    let ranges = t.ranges();
                    let mut flying: Vec<(Ticket, usize)> = Vec::new();
                    let mut o = 0usize;
                    let mut answer = |t: &mut ProgressTracker<&str>, flying: &mut Vec<(Ticket, usize)>, resolved: &mut std::collections::HashSet<(usize, bool)>| {
                        let k = order[o % order.len()] as usize % flying.len();
                        o += 1;
                        let (tk, id) = flying.swap_remove(k);
                        t.resolved(tk, true);
                        resolved.insert((id >> 1, id & 1 == 1));
                    };
                    for &r in &ranges {
                        for (i, &(ts, due)) in evs.iter().enumerate() {
                            if ts <= r.0 || ts > r.1 || ts > now {
                                continue;
                            }
                            // Intake stops while over budget or the window is full.
                            while t.over_budget() || flying.len() >= window {
                                prop_assert!(!flying.is_empty(), "over budget with nothing in flight");
                                answer(&mut t, &mut flying, &mut resolved);
                            }
                            for (key, b) in [("a", false), ("b", true)] {
                                let due = if b { due / 2 } else { due };
                                match t.decide_subject(&key, ts, i as u64, due) {
                                    Decision::Skip => prop_assert!(resolved.contains(&(i, b)), "skipped unresolved {i}"),
                                    Decision::Pending => prop_assert!(due > now),
                                    Decision::Dispatch(tk) => {
                                        prop_assert!(due <= now, "sent {i} before due");
                                        flying.push((tk, i << 1 | usize::from(b)));
                                    }
                                }
                            }
                            t.event_processed(ts);
                        }
                    }
                    while !flying.is_empty() {
                        answer(&mut t, &mut flying, &mut resolved);
                    }
                    prop_assert!(t.marks_held() <= budget, "{} marks held", t.marks_held());
                    for (i, &(ts, due)) in evs.iter().enumerate() {
                        if ts <= now {
                            for b in [false, true] {
                                let due = if b { due / 2 } else { due };
                                if due <= now {
                                    prop_assert!(resolved.contains(&(i, b)), "due match {i}/{b} missed at {now}");
                                }
                            }
                        }
                    }
                    for (k, p) in t.finish(Some(now)) {
                        progress[usize::from(k == "b")] = p;
                    }
                }
            }
        }

        #[test]
        fn steady_pass_with_nothing_due_reads_only_the_tail() {
            let time = TimeConfig {
                day: std::time::Duration::from_nanos(240),
                rounding: crate::engine::DueRounding::None,
            };
            // 1,000 events over 1..=1000, each due 2,400 after its event.
            let mut t = ProgressTracker::new(1_010, [("r", ActionProgress::at(0))])
                .with_reorder_margin(4)
                .with_due_index(time);
            assert_eq!(t.ranges(), vec![(0, 1_010)]);
            for ts in 1..=1_000 {
                assert_eq!(t.decide(&"r", ts, ts + 2_400), Decision::Pending);
                t.event_processed(ts);
            }
            let p = t.finish(Some(1_000)).remove(0).1;
            assert_eq!(p.ts, 0);
            let idx = p.due.clone().unwrap();
            assert_eq!(idx.through, 996);
            // 10-ns spans (240 / 24), each due 2,400 after its first event.
            assert_eq!(idx.spans.len(), 101);
            assert_eq!(idx.spans[1], (10, 19, 2_410));
            // Next pass: nothing due, only the new tail is read.
            let t = ProgressTracker::new(1_200, [("r", p.clone())]).with_due_index(time);
            assert_eq!(t.ranges(), vec![(996, 1_200)]);
            // At 2,425 the first three spans and the tail.
            let t = ProgressTracker::new(2_425, [("r", p)]).with_due_index(time);
            assert_eq!(t.ranges(), vec![(0, 29), (996, 2_425)]);
        }

        // A model check over several passes: every match with due ≤ now of a
        // pass must have been resolved by the end of that pass or earlier, and
        // no match is dispatched after it resolved (unless a halt hid it).
        proptest! {
            #[test]
            fn never_skips_unresolved_and_never_passes_blockers(
                evs in proptest::collection::vec((1i64..50, 0i64..400), 0..40),
                nows in proptest::collection::vec(0i64..400, 1..5),
                fail_mask in proptest::collection::vec(any::<bool>(), 40),
            ) {
                let mut evs: Vec<(Nanos, Nanos)> = evs;
                evs.sort_by_key(|e| e.0);
                evs.dedup_by_key(|e| e.0);
                let mut nows = nows;
                nows.sort();
                let mut progress = ActionProgress::at(0);
                let mut resolved = std::collections::HashSet::new();
                for (pass, &now) in nows.iter().enumerate() {
                    let mut t = ProgressTracker::new(now, [("r", progress.clone())]).with_reorder_margin(3);
                    let mut halted = false;
                    let mut pending_seen = None;
                    let mut failed_at = None;
                    for (i, &(ts, due)) in evs.iter().enumerate() {
                        if halted { break; }
                        match t.decide(&"r", ts, due) {
                            Decision::Skip => {
                                prop_assert!(ts <= progress.ts || resolved.contains(&i),
                                    "skipped unresolved event {i} in pass {pass}");
                            }
                            Decision::Pending => {
                                prop_assert!(due > now);
                                pending_seen.get_or_insert(ts);
                            }
                            Decision::Dispatch(tk) => {
                                prop_assert!(due <= now);
                                // Nothing resolved is sent twice, halts included
                                // (far below TAIL_CAP here).
                                prop_assert!(!resolved.contains(&i),
                                    "re-sent resolved event {i} in pass {pass}");
                                // Fail only in the first pass so later passes converge.
                                let ok = pass > 0 || !fail_mask[i];
                                t.resolved(tk, ok);
                                if ok { resolved.insert(i); } else { halted = true; failed_at = Some(ts); }
                            }
                        }
                        t.event_processed(ts);
                    }
                    let end = if halted { None } else { Some(now.max(evs.last().map_or(0, |e| e.0))) };
                    let next = t.finish(end).remove(0).1;
                    prop_assert!(next.ts >= progress.ts);
                    if let Some(p) = pending_seen { prop_assert!(next.ts < p); }
                    if let Some(f) = failed_at { prop_assert!(next.ts < f && next.through < f.max(progress.through + 1)); }
                    progress = next;
                }
            }
        }
    }
}
