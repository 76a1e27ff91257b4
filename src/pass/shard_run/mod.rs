//! The per-shard state machine of one daily pass, pure: which buckets recover,
//! walker and replay bookkeeping, the in-flight window, halt state, counters, and
//! the new cursor. The actors in [`crate::pass::actors`] only move messages in and
//! out of it; every decision is made here and unit-tested with plain calls.
//!
//! Life of a [`ShardRun`] within one pass:
//! 1. [`ShardRun::new`] from the pass plan and the persisted cursor (the recovery
//!    decisions are made there, see [`plan_shard`]);
//! 2. walk phase: [`ShardRun::walk_item`] for every listed item with due walker
//!    matches, then [`ShardRun::listing_ended`] per listed bucket;
//! 3. [`ShardRun::start_replay`] builds the progress tracker and says where the
//!    shard needs the meta-log to start;
//! 4. replay phase: [`ShardRun::replay_batch`] per routed batch of events, in
//!    log order;
//! 5. throughout: [`ShardRun::next_sends`] hands out work while the window has
//!    room, each piece under a [`SendId`]; the run keeps what it sent, and
//!    [`ShardRun::outcome`], [`ShardRun::lookup_done`] and
//!    [`ShardRun::check_done`] take the answers by that id (in any order);
//! 6. [`ShardRun::finish`] returns the report and the cursor to save.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::engine::check::{Check, Verdict, judge};
use crate::engine::cursor::{ActionMap, ActionProgress};
use crate::engine::cursor::{
    BacklogCount, BucketCursor, CURSOR_VERSION, ShardCursor, WalkBacklog, WalkResume,
};
use crate::engine::deferred::{null_still_displaced, resolve_deferred};
use crate::engine::delete::{CallResult, DeleteOutcome, DeleteRequest, halt_reason};
use crate::engine::progress::{Decision, ProgressTracker, Ticket, subject_of};
use crate::engine::reclaim::{Parts, fid_volume, freed_bytes, place};
use crate::engine::resume::{WalkProgress, later};
use crate::engine::{ActionKey, ActionKind, Match, Nanos, PendingMatch, RuleHash, Versioning};
use crate::pass::plan::{self, PassPlan};
use crate::pass::report::{Counters, ShardOutcome, ShardReport};
use crate::pass::shard_plan::{ShardPlan, action_key, plan_shard, progress_key};
use crate::pb::filer_pb::Entry;
use crate::status::MatchDecision;

/// How often a delete whose gateway answered it gone while a store still
/// holds it is sent again within one pass: with two gateways that read
/// different stores, two resends miss the right one a quarter of the time,
/// and the next pass tries again (docs/lifecycle-delete.md#server-lookup-failures).
pub const STILL_THERE_RESENDS: u8 = 2;

mod answers;
mod finish;

/// One routed meta-log event of a replay batch ([`ShardRun::replay_batch`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayItem {
    pub ts: Nanos,
    /// Its matches in the replay view due by the pass's `now`.
    pub matches: Vec<Match>,
    /// Its bucket, when `pending` is not empty (the matches carry their own).
    pub bucket: String,
    /// Its matches due after the pass's `now` ([`crate::engine::route::route_for_pass`]).
    pub pending: Vec<PendingMatch>,
    /// Its entry was skipped for want of a real mtime.
    pub skipped_no_mtime: bool,
}

/// A piece of work handed out by [`ShardRun::next_sends`]: its answer names
/// it, and the run looks up what it sent. Says which child sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendId {
    n: u64,
    walk: bool,
}

impl SendId {
    /// Work of the walk phase (sent by the Walker; else by the Replay child).
    pub fn walk(self) -> bool {
        self.walk
    }
}

/// What a piece of work settles within the shard: which phase queued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeleteTicket {
    /// A walker delete of `bucket`.
    Walk {
        bucket: String,
        /// The listed item's number in the bucket's [`WalkProgress`]
        /// (`None`: not tracked).
        seq: Option<u64>,
        /// What the delete settles, counted in the bucket's backlog when it
        /// does not resolve.
        owed: WalkDue,
    },
    /// A replay delete; the tracker ticket.
    Replay(Ticket),
}

/// A walker match as the bucket's backlog counts it
/// (docs/forecast.md#walk-backlog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkDue {
    pub rule_hash: RuleHash,
    pub kind: ActionKind,
    /// When it became due.
    pub due: Nanos,
    /// The listed entry's size.
    pub bytes: u64,
}

impl WalkDue {
    /// The backlog's view of `m`.
    pub fn of(m: &Match) -> WalkDue {
        WalkDue {
            rule_hash: m.rule_hash,
            kind: m.kind,
            due: m.due,
            bytes: u64::try_from(m.identity.size).unwrap_or(0),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct WalkBook {
    /// `Some(ok)` once the listing ended.
    listed: Option<bool>,
    /// A delete of this bucket did not resolve (or was never sent).
    unresolved: bool,
    /// Which listed items' deletes all resolved, in listing order.
    progress: WalkProgress,
    /// The listing's last delivered position.
    reached: Option<String>,
    /// Due matches left unresolved, per action.
    backlog: BTreeMap<(RuleHash, ActionKind), BacklogCount>,
}

impl WalkBook {
    /// A due match of this bucket will not resolve in this pass.
    fn owe(&mut self, d: WalkDue) {
        self.unresolved = true;
        self.backlog
            .entry((d.rule_hash, d.kind))
            .or_default()
            .add(d.due, d.bytes);
    }
}

/// One shard's pass state. See the module docs for the order of calls.
#[derive(Debug)]
pub struct ShardRun {
    shard: u8,
    plan: Arc<PassPlan>,
    shard_plan: ShardPlan,
    persisted: Option<Arc<ShardCursor>>,
    window: usize,
    in_flight: usize,
    queue: VecDeque<(Work, DeleteTicket)>,
    /// What was handed out and not answered yet, by id. A drain that timed
    /// out gives up the window but keeps these, so a late answer still lands.
    sent: HashMap<SendId, (Work, DeleteTicket)>,
    next_id: u64,
    walks: BTreeMap<String, WalkBook>,
    tracker: Option<ProgressTracker<ActionKey>>,
    /// Buckets whose recovery failed (listing error or unresolved walk).
    failed_recovery: BTreeSet<String>,
    /// Buckets whose walk stopped on an unresolved walker delete, and why
    /// (the first reason).
    walk_failures: BTreeMap<String, String>,
    halted: Option<String>,
    failed: Option<String>,
    counters: Counters,
    /// The parts (bytes, volumes) of aborts about to be sent, by (bucket,
    /// upload path), read by their stamp check (docs/reclaimed-space.md); at
    /// most the window's worth.
    abort_parts: BTreeMap<(String, String), Parts>,
    /// How often each delete (bucket, path, version) was sent again because a
    /// store still held what its gateway answered gone ([`STILL_THERE_RESENDS`]).
    resent: HashMap<(String, String, String), u8>,
    /// The bucket name of the last replayed match, shared by the next
    /// match's key when it is the same bucket (nearly always): one string
    /// copy per match was a visible share of a replay's CPU.
    last_bucket: Option<Arc<str>>,
}

impl ShardRun {
    /// A shard about to run `plan`, from its persisted cursor, sending at most
    /// `window` deletes at a time.
    pub fn new(
        shard: u8,
        plan: Arc<PassPlan>,
        persisted: Option<Arc<ShardCursor>>,
        window: usize,
    ) -> ShardRun {
        let shard_plan = plan_shard(&plan, persisted.as_deref());
        ShardRun {
            shard,
            plan,
            shard_plan,
            persisted,
            window: window.max(1),
            in_flight: 0,
            queue: VecDeque::new(),
            sent: HashMap::new(),
            next_id: 0,
            walks: BTreeMap::new(),
            tracker: None,
            failed_recovery: BTreeSet::new(),
            walk_failures: BTreeMap::new(),
            halted: None,
            failed: None,
            counters: Counters::default(),
            abort_parts: BTreeMap::new(),
            resent: HashMap::new(),
            last_bucket: None,
        }
    }

    /// This shard's recovery and walk decisions.
    pub fn shard_plan(&self) -> &ShardPlan {
        &self.shard_plan
    }

    /// Marks the shard failed for this pass (crash, restart): it sends nothing
    /// more and its cursor is not saved, so the next pass starts again from the
    /// persisted one.
    pub fn fail(&mut self, reason: String) {
        self.queue.clear();
        self.failed.get_or_insert(reason);
    }

    /// Whether the shard stopped sending (halted or failed).
    pub fn stopped(&self) -> bool {
        self.halted.is_some() || self.failed.is_some()
    }

    /// Whether another event can be taken: nothing waits for a window slot,
    /// and the resolved marks are within the shard's share of
    /// `pass.tail_budget` (past it, in-flight answers move the frontier
    /// first; docs/due-index.md#memory).
    pub fn accepting(&self) -> bool {
        self.stopped()
            || (self.queue.is_empty()
                && !self
                    .tracker
                    .as_ref()
                    .is_some_and(ProgressTracker::over_budget))
    }

    /// Whether every sent delete has an outcome and nothing waits to be sent.
    pub fn idle(&self) -> bool {
        self.in_flight == 0 && (self.queue.is_empty() || self.stopped())
    }

    /// Deletes sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Takes the walker matches (all due at `now`) of the item listed at
    /// position `pos` of `bucket`; positions arrive in listing order
    /// (docs/design-deviations.md#resumable-recovery-walks).
    pub fn walk_item(&mut self, bucket: &str, pos: Option<&str>, matches: Vec<Match>) {
        let stopped = self.stopped() || self.walk_failures.contains_key(bucket);
        let book = self.walks.entry(bucket.to_string()).or_default();
        let seq = match pos {
            // Nothing more is sent for this bucket: its resume point stays.
            Some(_) if stopped => {
                book.progress.block();
                None
            }
            Some(p) => book.progress.item(p, matches.len()),
            None => None,
        };
        for m in matches {
            self.counters.matches += 1;
            if stopped {
                book.owe(WalkDue::of(&m));
                continue;
            }
            self.counters.decided(m.kind, MatchDecision::Dispatched);
            self.queue.push_back((
                work_for(&m),
                DeleteTicket::Walk {
                    bucket: bucket.to_string(),
                    seq,
                    owed: WalkDue::of(&m),
                },
            ));
        }
    }

    /// `n` entries (walked or replayed) were skipped for want of a real mtime.
    pub fn skipped_no_mtime(&mut self, n: u64) {
        self.counters.skipped_no_mtime += n;
    }

    /// The listing of `bucket` ended (`ok`: complete, without error);
    /// `reached` is the last position it delivered to every shard.
    pub fn listing_ended(&mut self, bucket: &str, ok: bool, reached: Option<String>) {
        let book = self.walks.entry(bucket.to_string()).or_default();
        book.listed = Some(ok);
        book.reached = reached;
    }

    /// The resume point of `bucket`'s unfinished recovery walk after this
    /// pass: the later of the one it started from and what this pass walked
    /// with every delete resolved (`None`: nothing walked yet).
    fn next_resume(&self, bucket: &str) -> Option<WalkResume> {
        let plan = &self.plan;
        let prev = self.shard_plan.resume.get(bucket);
        let now_done = self
            .walks
            .get(bucket)
            .and_then(|b| b.progress.resume_point(b.reached.as_deref()));
        let after = later(prev.map(|r| r.after.as_str()), now_done.as_deref())?.to_string();
        Some(WalkResume {
            after,
            first_now: prev.map_or(plan.now, |r| r.first_now),
            first_observed_until: prev.map_or(plan.observed_until, |r| r.first_observed_until),
            rule_set_hash: plan.rule_set_hash_of(bucket),
            promoted_hash: plan.promoted_hash_of(bucket),
        })
    }

    /// What this pass's walk of `bucket` left unresolved, as the cursor
    /// keeps it (docs/forecast.md#walk-backlog); `recovering` when the bucket
    /// keeps its old state for another recovery.
    fn backlog(&self, bucket: &str, recovering: bool) -> WalkBacklog {
        let book = self.walks.get(bucket);
        let rule_id = |hash: RuleHash, kind: ActionKind| {
            [Some(&self.plan.recovery), self.plan.walk.as_ref()]
                .into_iter()
                .flatten()
                .find_map(|v| v.action(bucket, hash, kind))
                .map(|a| a.rule().id.clone())
                .unwrap_or_default()
        };
        WalkBacklog {
            recovering,
            complete: book.is_some_and(|b| b.listed == Some(true)),
            actions: (book.iter().flat_map(|b| &b.backlog))
                .map(|(&(hash, kind), c)| {
                    let count = BacklogCount {
                        rule_id: rule_id(hash, kind),
                        ..c.clone()
                    };
                    (action_key(hash, kind), count)
                })
                .collect(),
        }
    }

    /// Counts what a DONE `request` removed and the volumes it was in
    /// (docs/reclaimed-space.md): `parts` are an abort's parts.
    fn count_freed(&mut self, request: &DeleteRequest, parts: Parts) {
        let (p, name) = (&self.plan, &request.bucket);
        let views = [Some(&p.recovery), p.replay.as_ref(), p.walk.as_ref()];
        let bucket = views.iter().flatten().find_map(|v| v.bucket(name));
        let versioning = bucket.map_or(Versioning::Unversioned, |b| b.versioning());
        let rule = bucket
            .and_then(|b| b.action(request.rule_hash, request.kind))
            .map(|a| a.rule().id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| request.rule_hash.to_hex());
        let bytes = freed_bytes(request.kind, versioning, request.identity.size, parts.bytes);
        self.counters
            .freed
            .entry((request.bucket.clone(), rule))
            .or_default()
            .add(bytes);
        // The head chunk's volume stands for the entry's: its chunks were
        // written under one location rule (docs/reclaimed-space.md#which-collections).
        let placed = self
            .counters
            .placed
            .entry(request.bucket.clone())
            .or_default();
        if let Some(id) = fid_volume(&request.identity.head_fid) {
            place(placed, id, bytes);
        }
        for (id, part_bytes) in parts.volumes {
            place(placed, id, part_bytes);
        }
    }

    fn walk_succeeded(&self, bucket: &str) -> bool {
        self.walks
            .get(bucket)
            .is_some_and(|b| b.listed == Some(true) && !b.unresolved)
            && !self.stopped()
    }

    /// Ends the walk phase and builds the replay tracker. Returns the earliest
    /// meta-log position this shard needs (`None`: nothing to replay).
    pub fn start_replay(&mut self) -> Option<Nanos> {
        for bucket in self.shard_plan.recover.keys() {
            if !self.walk_succeeded(bucket) {
                self.failed_recovery.insert(bucket.clone());
            }
        }
        if self.stopped() {
            return None;
        }
        let plan = self.plan.clone();
        let mut starts = Vec::new();
        for bucket in plan.buckets() {
            if self.failed_recovery.contains(bucket) {
                continue;
            }
            let recovered = self.shard_plan.recover.contains_key(bucket);
            let persisted = self.persisted.as_ref().and_then(|c| c.buckets.get(bucket));
            for (key, ttl) in plan.replay_actions(bucket) {
                let start = if recovered {
                    // The walks resolved every match due by `now` of the events
                    // this shard owns: its own items, and those whose walk owner
                    // does not recover here (docs/design-deviations.md#walk-coverage).
                    // Replay only has to find the first not-yet-due event. A walk
                    // split over several passes vouches only for what its first
                    // segment could (docs/design-deviations.md#resumable-recovery-walks).
                    let (now, observed) = self
                        .shard_plan
                        .resume
                        .get(bucket)
                        .map_or((plan.now, plan.observed_until), |r| {
                            (r.first_now, r.first_observed_until)
                        });
                    ActionProgress {
                        ts: plan::rewind_point(now, ttl, &plan.time, plan.skew_margin)
                            .min(observed),
                        through: observed,
                        through_now: now,
                        tail: Vec::new(),
                        // Recovery reads the whole window and builds one.
                        due: None,
                        pending: None,
                    }
                } else {
                    match persisted.and_then(|b| b.rules.get(&progress_key(&key))) {
                        Some(p) => p.clone(),
                        // plan_shard recovers such a bucket; unreachable in
                        // practice, and skipping is the safe answer.
                        None => continue,
                    }
                };
                starts.push((key, start));
            }
        }
        let since = starts.iter().map(|(_, p)| p.ts).min();
        let margin = i64::try_from(plan.reorder_margin.as_nanos()).unwrap_or(i64::MAX);
        self.tracker = Some(
            ProgressTracker::new(plan.now, starts)
                .with_due_index(plan.time)
                .with_reorder_margin(margin)
                .with_tail_budget(plan.tail_budget / crate::engine::shard::SHARD_COUNT),
        );
        since
    }

    /// The meta-log ranges `(since, until]` this shard needs after
    /// [`ShardRun::start_replay`]: per action, the due-index spans due by
    /// `now` and the events since its last pass (docs/due-index.md), merged.
    /// Empty when nothing is replayed.
    pub fn read_ranges(&self) -> Vec<(Nanos, Nanos)> {
        if self.stopped() {
            return Vec::new();
        }
        self.tracker
            .as_ref()
            .map(ProgressTracker::ranges)
            .unwrap_or_default()
    }

    /// A batch of meta-log events routed to this shard, in log order, taken
    /// one by one. The coordinator batches its fan-out so a shard takes
    /// one message per batch instead of one per event; nothing halts within a
    /// call (halts come only from outcomes, which arrive between messages), so
    /// a halt still stops the shard at the first batch after it, and its
    /// cursor at the unresolved event, exactly as with single events.
    pub fn replay_batch(&mut self, events: &[ReplayItem]) {
        for e in events {
            self.skipped_no_mtime(u64::from(e.skipped_no_mtime));
            self.counters.events_scanned += 1;
            if self.stopped() || self.tracker.is_none() {
                continue;
            }
            let ts = e.ts;
            for m in &e.matches {
                let key = self.action_key(&m.bucket, m.rule_hash, m.kind);
                let subject = subject_of(&m.object_path, &m.version_id);
                let bytes = u64::try_from(m.identity.size).unwrap_or(0);
                if let Some(t) = self.decide(&key, ts, subject, m.due, bytes) {
                    let work = if m.lookup.is_some() {
                        Work::Lookup(Box::new(m.clone()))
                    } else {
                        work_for(m)
                    };
                    self.queue.push_back((work, DeleteTicket::Replay(t)));
                }
            }
            for p in &e.pending {
                let key = self.action_key(&e.bucket, p.rule_hash, p.kind);
                if let Some(t) = self.decide(&key, ts, p.subject, p.due, p.bytes) {
                    // Routing and the tracker judge "due" by the same `now`,
                    // so this does not happen; if it did, there is nothing to
                    // send: leave the event unresolved (its span is read
                    // again next pass) rather than count it done.
                    tracing::warn!(
                        shard = self.shard,
                        bucket = e.bucket.as_str(),
                        due_ns = p.due,
                        "a match routed as pending was due; left for the next pass"
                    );
                    self.settle_ticket(DeleteTicket::Replay(t), false);
                }
            }
            if let Some(tr) = self.tracker.as_mut() {
                tr.event_processed(ts);
            }
        }
    }

    /// The tracker's key for a match in `bucket`, sharing the previous
    /// match's bucket name when it is the same bucket.
    fn action_key(&mut self, bucket: &str, rule_hash: RuleHash, kind: ActionKind) -> ActionKey {
        let bucket = match &self.last_bucket {
            Some(b) if **b == *bucket => Arc::clone(b),
            _ => {
                let b: Arc<str> = Arc::from(bucket);
                self.last_bucket = Some(Arc::clone(&b));
                b
            }
        };
        ActionKey {
            bucket,
            rule_hash,
            kind,
        }
    }

    /// The tracker's decision on one match, counted; the ticket when it is
    /// to be sent.
    fn decide(
        &mut self,
        key: &ActionKey,
        ts: Nanos,
        subject: u64,
        due: Nanos,
        bytes: u64,
    ) -> Option<Ticket> {
        let (tracker, kind) = (self.tracker.as_mut()?, key.kind);
        match tracker.decide_sized(key, ts, subject, due, bytes) {
            Decision::Skip => {
                self.counters.decided(kind, MatchDecision::Skipped);
                None
            }
            Decision::Pending => {
                self.counters.matches += 1;
                self.counters.pending += 1;
                self.counters.decided(kind, MatchDecision::Pending);
                None
            }
            Decision::Dispatch(t) => {
                self.counters.matches += 1;
                self.counters.decided(kind, MatchDecision::Dispatched);
                Some(t)
            }
        }
    }

    /// Work to send now: as many as the window allows, each under the id its
    /// answer names.
    pub fn next_sends(&mut self) -> Vec<(Work, SendId)> {
        let mut out = Vec::new();
        while self.in_flight < self.window && !self.stopped() {
            let Some((work, ticket)) = self.queue.pop_front() else {
                break;
            };
            self.in_flight += 1;
            self.next_id += 1;
            let id = SendId {
                n: self.next_id,
                walk: matches!(ticket, DeleteTicket::Walk { .. }),
            };
            out.push((work.clone(), id));
            self.sent.insert(id, (work, ticket));
        }
        out
    }

    /// The delete that `id` sends or confirms (for the shell's logs and
    /// metrics); `None` for a lookup or an id already answered.
    pub fn request_of(&self, id: SendId) -> Option<&DeleteRequest> {
        match self.sent.get(&id) {
            Some((Work::Delete(r), _)) => Some(r),
            Some((Work::Check(c), _)) => Some(&c.request),
            _ => None,
        }
    }

    /// Takes back what `id` sent, counting its slot free.
    fn answered(&mut self, id: SendId) -> Option<(Work, DeleteTicket)> {
        let sent = self.sent.remove(&id)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        Some(sent)
    }

    /// The fate of the delete sent as `id`. Returns the halt reason when this
    /// outcome halted the shard. An id not (or no longer) waiting for an
    /// answer is ignored.
    pub fn outcome(&mut self, id: SendId, result: &CallResult) -> Option<String> {
        match self.answered(id)? {
            (Work::Delete(request), ticket) => self.settle(&request, ticket, result),
            _ => None,
        }
    }

    /// A delete's fate, once its slot is free.
    fn settle(
        &mut self,
        request: &DeleteRequest,
        ticket: DeleteTicket,
        result: &CallResult,
    ) -> Option<String> {
        self.counters.deletes.record(result.outcome);
        let parts = self
            .abort_parts
            .remove(&(request.bucket.clone(), request.object_path.clone()));
        if result.outcome == DeleteOutcome::Done {
            self.count_freed(request, parts.unwrap_or_default());
        }
        if result.outcome == DeleteOutcome::Withdrawn {
            // Not sent (a rule gone mid-pass, the deletion cap, a stop):
            // never a halt (docs/lifecycle-config.md#changes-during-a-pass,
            // docs/lifecycle-delete.md#stopping). Replay keeps its progress
            // before the event and a recovering bucket keeps its old state,
            // so the next pass sees the match again.
            self.settle_ticket(ticket, false);
            return None;
        }
        // An answer the gateway also gives when its own filer read failed is
        // confirmed by a lookup before it settles anything
        // (docs/lifecycle-delete.md#server-lookup-failures).
        if let Some(check) = Check::confirm(&request.object_path, request, result) {
            if self.stopped() {
                // No new work once halted: leave it for the next pass.
                self.counters.unconfirmed += 1;
                self.settle_ticket(ticket, false);
            } else {
                self.queue
                    .push_front((Work::Check(Box::new(check)), ticket));
            }
            return None;
        }
        if result.is_resolved() {
            self.settle_ticket(ticket, true);
            return None;
        }
        if let DeleteTicket::Walk { bucket, owed, .. } = ticket {
            // Scoped to its bucket: the shard goes on with the other
            // buckets and with replay (docs/design-deviations.md#walk-failures).
            self.walk_failed(bucket, owed, halt_reason(request, result));
            return None;
        }
        self.settle_ticket(ticket, false);
        if self.halted.is_some() {
            return None;
        }
        let reason = halt_reason(request, result);
        // Queued walker deletes never go out: their buckets did not walk fully.
        for (_, t) in std::mem::take(&mut self.queue) {
            if matches!(t, DeleteTicket::Walk { .. }) {
                self.settle_ticket(t, false);
            }
        }
        self.halted = Some(reason.clone());
        Some(reason)
    }

    /// Settles what `ticket` queued: resolved when `ok`, else unresolved
    /// without halting: replay progress stays before its event, a walked
    /// bucket does not count as walked, so the next pass tries it again.
    fn settle_ticket(&mut self, ticket: DeleteTicket, ok: bool) {
        match ticket {
            DeleteTicket::Replay(t) => {
                if let Some(tr) = self.tracker.as_mut() {
                    tr.resolved(t, ok);
                }
            }
            DeleteTicket::Walk { bucket, seq, .. } if ok => {
                if let (Some(seq), Some(book)) = (seq, self.walks.get_mut(&bucket)) {
                    book.progress.resolved(seq);
                }
            }
            DeleteTicket::Walk { bucket, owed, .. } => {
                let book = self.walks.entry(bucket).or_default();
                book.owe(owed);
                book.progress.block();
            }
        }
    }

    /// A walker delete of `bucket` did not resolve: the bucket's walk did not
    /// finish (a recovering bucket keeps its old state and recovers again; a
    /// steady walk is due again next pass), and its queued walker work is
    /// dropped — its gateway answers are suspect — but nothing else stops.
    fn walk_failed(&mut self, bucket: String, owed: WalkDue, reason: String) {
        let book = self.walks.entry(bucket.clone()).or_default();
        book.owe(owed);
        self.queue.retain(|(_, t)| match t {
            DeleteTicket::Walk {
                bucket: b, owed, ..
            } if *b == bucket => {
                book.owe(*owed);
                false
            }
            _ => true,
        });
        book.unresolved = true;
        book.progress.block();
        self.walk_failures.entry(bucket).or_insert(reason);
    }
}

/// What the filer said to a [`Work::Lookup`]: the match's entry and, for a
/// displaced null version ([`crate::engine::matches::DeferredLookup::folder`]),
/// its key's `.versions` folder. The shell fetches both; the decision is
/// [`ShardRun::lookup_done`]'s.
#[derive(Debug, Clone)]
pub struct LookupAnswer {
    /// The entry (`None`: not found), or why the lookup failed.
    pub entry: Result<Option<Entry>, String>,
    /// The folder lookup, when the match has one.
    pub folder: Option<Result<Option<Entry>, String>>,
}

/// One unit of work for the window: a delete, or a deferred match that needs
/// a filer lookup first ([`crate::engine::deferred::resolve_deferred`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    Delete(DeleteRequest),
    /// Look the match's entry up, then [`ShardRun::lookup_done`].
    Lookup(Box<Match>),
    /// Read the check's probes from the filer, then [`ShardRun::check_done`].
    Check(Box<Check>),
}

/// The work that carries out a concrete match: an abort is preceded by its
/// completion-stamp check (docs/lifecycle-delete.md#completed-upload-leftovers),
/// everything else is a plain delete.
fn work_for(m: &Match) -> Work {
    let request = DeleteRequest::of(m);
    if m.kind == ActionKind::AbortMpu {
        Work::Check(Box::new(Check::before_abort(&m.key, &request)))
    } else {
        Work::Delete(request)
    }
}
