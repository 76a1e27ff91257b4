//! The task that drives one pass's phases from a `tokio::spawn`ed future
//! (walk, drain, replay, finish), talking to the shard actors only by
//! message: the walk's listings, and the replay's one subscription per
//! merged range fanned out by shard in batches (docs/meta-log.md#replay-batches).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::{FutureExt as _, StreamExt};
use tokio::sync::watch;
use tracing::Span;

use crate::engine::cursor::ShardCursor;
use crate::engine::due_index::{cut_ranges, merge_ranges};
use crate::engine::event::MetaEvent;
use crate::engine::resume::{is_after, listing_start};
use crate::engine::walk::WalkItem;
use crate::engine::{Nanos, Snapshot, route, walk};
use crate::pass::actors::{
    BeginPass, Drain, DrainTimedOut, Finish, ListingDone, ReadRanges, ReplayBatch, ShardActor,
    StartReplay, WalkBatch,
};
use crate::pass::observe::PassObserver;
use crate::pass::options::StopSignal;
use crate::pass::plan::{self, PassPlan};
use crate::pass::ports::{ClusterError, ClusterPort, EventStream};
use crate::pass::report::{ReplayRead, ShardOutcome, ShardReport, ShardResult};
use crate::pass::retry::DRAIN_TIMEOUT;
use crate::pass::shard_plan::{self, ShardPlan, WalkRole};
use crate::pass::shard_run::ReplayItem;
use crate::status::ShardPhase;
use crate::telemetry;

/// Up to where the replay read everything: the last event delivered, or,
/// when the stream ran to its end, the filer's clock from before the read if
/// that is later (a quiet log, a `now` ahead of the filer), never past the
/// last range's `until`. A stopped read vouches only for what it delivered.
fn stream_end(
    last: Option<Nanos>,
    clock: Option<Nanos>,
    until: Option<Nanos>,
    stopped: bool,
) -> Option<Nanos> {
    if stopped {
        return last;
    }
    let by_clock = clock.zip(until).map(|(c, u)| c.min(u));
    last.max(by_clock)
}

/// The phases, as a Send future talking to shard actors by message.
pub(crate) struct Driver {
    pub(crate) port: Arc<dyn ClusterPort>,
    pub(crate) plan: Arc<PassPlan>,
    pub(crate) shards: BTreeMap<u8, (Addr<ShardActor>, ShardPlan, Span)>,
    /// Each selected shard's per-pass state, sent before anything else.
    pub(crate) begins: Vec<(Addr<ShardActor>, BeginPass)>,
    pub(crate) dry_run: bool,
    pub(crate) obs: PassObserver,
    /// How long one `Drain` may wait ([`drain_bound`]).
    pub(crate) drain_bound: Duration,
    /// When the walk phase is cut so replay still runs
    /// (`pass.walk_budget_fraction` of `pass.max_runtime`).
    pub(crate) walk_deadline: Option<Instant>,
}

/// The walkers of one bucket: where each resumes, and which recover it.
#[derive(Default)]
struct Walkers<'a> {
    froms: BTreeMap<u8, Option<&'a str>>,
    recovering: BTreeSet<u8>,
}

impl Walkers<'_> {
    fn resumes_after(&self, s: u8) -> Option<&str> {
        self.froms.get(&s).copied().flatten()
    }
}

/// How one bucket's listing ended.
enum ListingEnd {
    Done,
    Failed,
    /// The pass was asked to stop.
    Stopped,
    /// The walk budget ran out; why, for the report.
    Cut(String),
}

impl Driver {
    pub(crate) async fn run(
        mut self,
        started: Instant,
        halt: watch::Receiver<Option<String>>,
    ) -> (Vec<ShardResult>, Option<String>, Option<String>, ReplayRead) {
        let mut read = ReplayRead::default();
        // Awaited: every shard has its fresh run before the first batch.
        // A shard that is gone fails at Finish ("shard actor gone").
        for (addr, begin) in std::mem::take(&mut self.begins) {
            let _ = addr.send(begin).await;
        }
        let walk_cut = self.walk_phase(&halt).await;
        self.drain().await;
        // A walk cut by its budget still leaves replay its share of the pass
        // (docs/design-deviations.md#resumable-recovery-walks): the cut
        // buckets' recoveries failed for this pass and are not replayed, every
        // other bucket is.
        let (stream_end, not_routed, error) = if halt.borrow().is_none() {
            self.replay_phase(&halt, &mut read).await
        } else {
            // Stopped: no replay. Buckets whose recovery did not finish keep
            // their old state and where their walk resumes; steady buckets
            // keep their old progress.
            (None, HashMap::new(), None)
        };
        for &shard in self.shards.keys() {
            self.obs
                .board(|b| b.shard_phase(shard, ShardPhase::Draining));
        }
        self.drain().await;
        let mut finished = Vec::new();
        for (&shard, (addr, _, span)) in &self.shards {
            let fin = Finish {
                stream_end,
                events_not_routed: not_routed.get(&shard).copied().unwrap_or(0),
            };
            finished.push((shard, span, addr.send(fin).await));
        }
        // A filer with a store of its own that failed during the pass may
        // have lost deletes it acknowledged, on its store and its peers'
        // (docs/meta-log.md#filer-crash): what each shard deleted in is
        // walked again next pass.
        let lost = self.port.filers_failed_since(started);
        mark_rewalk(finished.iter_mut().map(|(_, _, a)| a), &lost);
        let saved_all = self.save_cursors(&mut finished, &lost, started).await;
        let results = finished
            .into_iter()
            .zip(saved_all)
            .map(|((shard, span, answer), save)| {
                self.shard_result(shard, span, answer, save, started)
            })
            .collect();
        (results, error, walk_cut, read)
    }

    /// Saves each finished shard's cursor (none in a dry run); what each
    /// save answered, `None` where nothing was saved.
    async fn save_cursors(
        &self,
        finished: &mut [(u8, &Span, Finished)],
        lost: &[String],
        started: Instant,
    ) -> Vec<Option<Result<(), ClusterError>>> {
        // Each shard's cursor is its own file: they are saved a few at a
        // time, so the pass ends a few saves after the last shard answered,
        // not sixteen (one after another they were most of a steady pass's
        // tail). Not all at once: with 1,000 rules a cursor is ~2 MB, and
        // sixteen encoded requests at once raised the pass's peak by ~29 MB
        // (heaptrack, docs/due-index.md#memory).
        let (dry_run, now) = (self.dry_run, self.plan.now);
        // The port's future does nothing until polled.
        let saves: Vec<_> = finished
            .iter()
            .map(|(_, _, answer)| match answer {
                Ok((_, Some(c))) if !dry_run => {
                    self.port.save_cursor(c.clone(), now).map(Some).boxed()
                }
                _ => futures::future::ready(None).boxed(),
            })
            .collect();
        let mut saved_all: Vec<Option<Result<(), ClusterError>>> = futures::stream::iter(saves)
            .buffered(CURSOR_SAVES_AT_ONCE)
            .collect()
            .await;
        // A failure first seen while saving (the saves fail over): the
        // cursors just saved vouch for deletes that may be lost; save them
        // again, marked.
        let lost_late = self.port.filers_failed_since(started);
        if !dry_run && lost_late.len() > lost.len() {
            let marked = mark_rewalk(finished.iter_mut().map(|(_, _, a)| a), &lost_late);
            for ((_, _, answer), saved) in finished.iter().zip(saved_all.iter_mut()) {
                if let (Ok((r, Some(c))), Some(_)) = (answer, &saved)
                    && marked.contains(&r.shard)
                {
                    *saved = Some(self.port.save_cursor(c.clone(), now).await);
                }
            }
        }
        saved_all
    }

    /// A shard's result: its report, failed when its cursor could not be
    /// saved, and the cursor as saved.
    fn shard_result(
        &self,
        shard: u8,
        span: &Span,
        answer: Finished,
        save: Option<Result<(), ClusterError>>,
        started: Instant,
    ) -> ShardResult {
        let (mut report, mut cursor) = match answer {
            Ok(r) => r,
            Err(e) => (
                ShardReport::failed(shard, format!("shard actor gone: {e}")),
                None,
            ),
        };
        let saved = match (cursor.as_mut(), save) {
            (Some(c), Some(Ok(()))) => {
                c.updated_ns = self.plan.now;
                self.obs
                    .metrics
                    .cursor_saved(shard, c.ts_ns, c.last_walked_ns);
                true
            }
            (Some(_), Some(Err(e))) => {
                report.outcome = ShardOutcome::Failed;
                report.halt_reason = Some(format!("saving cursor: {e}"));
                false
            }
            _ => false,
        };
        telemetry::record_outcome(span, report.outcome.as_str());
        ShardResult {
            report,
            duration: started.elapsed(),
            cursor,
            saved,
        }
    }

    /// Waits until every shard's sent work is answered, at most
    /// `drain_bound`; a shard still waiting then halts with
    /// [`DRAIN_TIMEOUT`] (docs/lifecycle-delete.md#deadlines), so one hung
    /// call cannot wedge the pass (and with it `serve`'s schedule).
    async fn drain(&self) {
        let bound = self.drain_bound;
        let waits = self.shards.iter().map(|(&shard, (a, _, _))| async move {
            if tokio::time::timeout(bound, a.send(Drain)).await.is_err() {
                let reason = format!(
                    "{DRAIN_TIMEOUT}: work still unanswered after {} (dispatch.call_timeout × \
                     dispatch.retry_attempts + backoff; cluster.filer_call_timeout for lookups)",
                    humantime::format_duration(Duration::from_millis(
                        u64::try_from(bound.as_millis()).unwrap_or(u64::MAX)
                    ))
                );
                tracing::warn!(shard, %reason, "drain timed out");
                let _ = a.send(DrainTimedOut { reason }).await;
            }
        });
        futures::future::join_all(waits).await;
    }

    /// Lists each bucket that some shard walks, once, and hands each item's
    /// due matches to the shard that owns its key, and its replay-kind
    /// matches to the recovering shards that must cover it
    /// (docs/design-deviations.md#walk-coverage). A recovery walk resumes
    /// after each shard's resume point; the listing starts at the earliest
    /// (docs/design-deviations.md#resumable-recovery-walks). Returns why the
    /// walk was cut by its budget, if it was (a stop ends it too, silently).
    async fn walk_phase(&self, halt: &watch::Receiver<Option<String>>) -> Option<String> {
        for (&shard, (_, sp, _)) in &self.shards {
            if self.plan.buckets().any(|b| sp.walk_role(b).is_some()) {
                self.obs
                    .board(|b| b.shard_phase(shard, ShardPhase::Walking));
            }
        }
        let mut cut = None;
        let mut complete = true;
        for bucket in self.plan.buckets() {
            let walkers = self.walkers(bucket);
            if walkers.froms.is_empty() {
                continue;
            }
            // After a stop or a cut, the buckets left are not listed: each
            // walker hears its listing failed.
            let (ok, reached) = if complete {
                let (end, reached) = self.walk_bucket(bucket, &walkers, halt).await;
                let ok = matches!(end, ListingEnd::Done);
                complete = matches!(end, ListingEnd::Done | ListingEnd::Failed);
                if let ListingEnd::Cut(why) = end {
                    cut = Some(why);
                }
                (ok, reached)
            } else {
                (false, None)
            };
            for &s in walkers.froms.keys() {
                let done = ListingDone {
                    bucket: bucket.to_string(),
                    ok,
                    reached: reached.clone(),
                };
                self.tell(s, done).await;
            }
        }
        cut
    }

    /// Where each walker's part of `bucket`'s walk resumes (`None`: from the
    /// start; every steady walk and every fresh recovery), and the shards
    /// recovering it here: only their walks vouch for matches
    /// (docs/design-deviations.md#walk-coverage).
    fn walkers<'a>(&'a self, bucket: &str) -> Walkers<'a> {
        let mut w = Walkers::default();
        for (&s, (_, sp, _)) in &self.shards {
            let Some(role) = sp.walk_role(bucket) else {
                continue;
            };
            if role == WalkRole::Recovery {
                w.recovering.insert(s);
            }
            w.froms.insert(s, sp.resume_from(bucket));
        }
        w
    }

    /// Lists `bucket` once, from the earliest resume point, handing each item
    /// to its walkers, until the listing ends, fails, is stopped or reaches
    /// the walk budget. Also answers the last position listed.
    async fn walk_bucket(
        &self,
        bucket: &str,
        walkers: &Walkers<'_>,
        halt: &watch::Receiver<Option<String>>,
    ) -> (ListingEnd, Option<String>) {
        let start = listing_start(walkers.froms.values().copied()).map(str::to_string);
        if let Some(from) = &start {
            tracing::info!(bucket, after = %from, "recovery walk resumes");
        }
        let deadline = self.walk_deadline;
        let budget = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(budget);
        // Only the keys some walk rule can match are listed; a recovery
        // evaluates every enabled action.
        let prefixes = plan::walk_prefixes(&self.plan, bucket, !walkers.recovering.is_empty());
        let mut listing = self.port.list_bucket_after(bucket, start, prefixes);
        let signal = StopSignal::from(halt.clone());
        let stop = signal.fired();
        tokio::pin!(stop);
        let mut reached: Option<String> = None;
        loop {
            let item = tokio::select! {
                biased;
                _ = &mut stop => {
                    tracing::info!(bucket, "stop requested; walk abandoned");
                    return (ListingEnd::Stopped, reached);
                }
                () = &mut budget => {
                    let why = format!(
                        "walk budget reached (pass.walk_budget_fraction of \
                         pass.max_runtime); bucket {bucket}'s walk resumes next pass"
                    );
                    tracing::info!(bucket, "{why}");
                    return (ListingEnd::Cut(why), reached);
                }
                item = listing.next() => item,
            };
            let Some(item) = item else {
                return (ListingEnd::Done, reached);
            };
            let (pos, item) = match item {
                Ok(i) => i,
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "walk listing failed");
                    return (ListingEnd::Failed, reached);
                }
            };
            // Every send for this item completes before the next select, so
            // a cut never falls inside an item.
            reached = Some(pos.clone());
            self.hand_out(bucket, walkers, pos, &item).await;
        }
    }

    /// Sends one listed item's matches: to the recovering shards whose
    /// resume point lies before it and that must cover it, then to the shard
    /// that owns its key.
    async fn hand_out(&self, bucket: &str, walkers: &Walkers<'_>, pos: String, item: &WalkItem) {
        let now = self.plan.now;
        let Some(s) = item.shard(bucket) else {
            return;
        };
        let covering: BTreeSet<u8> = walkers
            .recovering
            .iter()
            .copied()
            .filter(|r| is_after(&pos, walkers.resumes_after(*r)))
            .collect();
        if !covering.is_empty() && !covering.contains(&s) {
            let extra = shard_plan::coverage_walkers(s, &item.replay_owners(bucket), &covering);
            if !extra.is_empty() {
                let matches = shard_plan::replay_matches(
                    &self.plan,
                    bucket,
                    walk::evaluate(&self.plan.recovery, bucket, item, now),
                );
                for o in extra.into_iter().filter(|_| !matches.is_empty()) {
                    let batch = WalkBatch {
                        bucket: bucket.to_string(),
                        matches: matches.clone(),
                        skipped_no_mtime: 0,
                        pos: Some(pos.clone()),
                    };
                    self.tell(o, batch).await;
                }
            }
        }
        let Some((_, sp, _)) = self.shards.get(&s) else {
            return;
        };
        let view = match sp.walk_role(bucket) {
            // Walked by an earlier segment of this shard's walk.
            Some(WalkRole::Recovery) if !is_after(&pos, walkers.resumes_after(s)) => return,
            Some(WalkRole::Recovery) => &self.plan.recovery,
            Some(WalkRole::Steady) => match &self.plan.walk {
                Some(w) => w,
                None => return,
            },
            None => return,
        };
        let matches = walk::evaluate(view, bucket, item, now);
        let skipped_no_mtime = walk::no_mtime_entries(item);
        if matches.is_empty() && skipped_no_mtime == 0 {
            return;
        }
        let batch = WalkBatch {
            bucket: bucket.to_string(),
            matches,
            skipped_no_mtime,
            pos: Some(pos),
        };
        self.tell(s, batch).await;
    }

    /// Sends `m` to `shard` (when it takes part) and waits for its answer.
    async fn tell<M>(&self, shard: u8, m: M)
    where
        M: Message<Result = ()> + Send + 'static,
        ShardActor: Handler<M>,
    {
        if let Some((addr, _, _)) = self.shards.get(&shard) {
            let _ = addr.send(m).await;
        }
    }

    /// One subscription for every shard; events fanned out by shard. A stop
    /// ends the read early: `stream_end` is then the last event delivered
    /// (every event up to it reached its shard, every later one did not).
    async fn replay_phase(
        &self,
        halt: &watch::Receiver<Option<String>>,
        read: &mut ReplayRead,
    ) -> (Option<Nanos>, HashMap<u8, u64>, Option<String>) {
        let mut wanted = Vec::new();
        for (&shard, (addr, _, _)) in &self.shards {
            self.obs
                .board(|b| b.shard_phase(shard, ShardPhase::Replaying));
            if let Ok(Some(_)) = addr.send(StartReplay).await
                && let Ok(r) = addr.send(ReadRanges).await
            {
                wanted.extend(r);
            }
        }
        // One SubscribeMetadata per merged range, oldest first: every shard
        // sees its events in log order (docs/due-index.md#reading). Nothing
        // past the pass's start is read (docs/due-index.md#pass-start): the
        // log is read as it stood then, and what the pass itself writes is
        // the next pass's.
        let ranges = cut_ranges(merge_ranges(wanted), self.plan.read_until);
        read.ranges.clone_from(&ranges);
        let mut not_routed: HashMap<u8, u64> = HashMap::new();
        let Some(view) = self.plan.replay.as_ref().filter(|_| !ranges.is_empty()) else {
            return (None, not_routed, None);
        };
        tracing::info!(
            ranges = ranges.len(),
            read_ns = ranges.iter().map(|r| r.1 - r.0).sum::<i64>(),
            since = ranges[0].0,
            "meta-log ranges to read"
        );
        // Taken at the pass start, before any range is read: events the
        // filer stamped up to a reorder margin before it are all in its log
        // by the time the stream ends, so a quiet log lets the index move up
        // to it rather than stay at the last event read
        // (docs/due-index.md#filer-clock).
        let clock = self.plan.filer_clock;
        let root = self.port.buckets_root();
        let signal = StopSignal::from(halt.clone());
        let stop = signal.fired();
        tokio::pin!(stop);
        let mut last_ts = None;
        let mut stopped = false;
        let mut out: HashMap<u8, Outbox> = self
            .shards
            .keys()
            .map(|&s| (s, Outbox::default()))
            .collect();
        'ranges: for &(since, until) in &ranges {
            let mut events = match self.port.subscribe(since, until).await {
                Ok(s) => s,
                Err(e) => {
                    self.deliver_all(&mut out).await;
                    return (None, not_routed, Some(e.to_string()));
                }
            };
            loop {
                let Some(ev) = self
                    .next_event(&mut events, halt, stop.as_mut(), &mut out)
                    .await
                else {
                    tracing::info!("stop requested; meta-log replay ends early");
                    stopped = true;
                    break 'ranges;
                };
                let Some(ev) = ev else { break };
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => {
                        self.deliver_all(&mut out).await;
                        return (None, not_routed, Some(e.to_string()));
                    }
                };
                read.events_read += 1;
                last_ts = Some(ev.ts_ns);
                self.take_event(view, &root, &ev, &mut out, &mut not_routed)
                    .await;
            }
            // Range end: the next range is later in the log; deliver this
            // one's events first.
            self.flush_all(&mut out).await;
        }
        // Normal end or a stop: every event read so far reaches its shard
        // before `stream_end` (the last one read) is reported.
        self.deliver_all(&mut out).await;
        read.batches = out.values().map(|o| o.sent).sum();
        let until = ranges.last().map(|r| r.1);
        (stream_end(last_ts, clock, until, stopped), not_routed, None)
    }

    /// The stream's next event (`Some(None)` at its end), or `None` once the
    /// pass is asked to stop. The stop is checked before taking an event:
    /// what was read is delivered, so `stream_end` stays the last event
    /// every shard got. What the stream has ready is taken at once. When it
    /// has nothing (the end of a response), it gets [`REPLAY_LINGER`]: fresh
    /// events come one per response, and flushing after each would send one
    /// message per event again. Past that the stream is quiet: what is
    /// buffered is delivered before waiting, so no event waits on the next.
    async fn next_event(
        &self,
        events: &mut EventStream,
        halt: &watch::Receiver<Option<String>>,
        mut stop: Pin<&mut impl Future<Output = String>>,
        out: &mut HashMap<u8, Outbox>,
    ) -> Option<Option<Result<MetaEvent, ClusterError>>> {
        if halt.borrow().is_some() {
            return None;
        }
        if let Some(ev) = events.next().now_or_never() {
            return Some(ev);
        }
        let quick = tokio::select! {
            biased;
            _ = &mut stop => return None,
            ev = events.next() => Some(ev),
            () = tokio::time::sleep(REPLAY_LINGER) => None,
        };
        if quick.is_some() {
            return quick;
        }
        self.flush_all(out).await;
        tokio::select! {
            biased;
            _ = &mut stop => None,
            ev = events.next() => Some(ev),
        }
    }

    /// Routes one event into its shard's outbox; a full batch goes out.
    async fn take_event(
        &self,
        view: &Snapshot,
        root: &str,
        ev: &MetaEvent,
        out: &mut HashMap<u8, Outbox>,
        not_routed: &mut HashMap<u8, u64>,
    ) {
        let Some(routed) = route::route_for_pass(view, root, ev, self.plan.now) else {
            return;
        };
        let shard = routed.shard;
        let Some(ob) = out.get_mut(&shard) else {
            return;
        };
        ob.count(&routed.bucket);
        if view.bucket(&routed.bucket).is_none() {
            *not_routed.entry(shard).or_default() += 1;
            return;
        }
        ob.events.push(ReplayItem {
            ts: ev.ts_ns,
            matches: routed.matches,
            bucket: if routed.pending.is_empty() {
                String::new()
            } else {
                routed.bucket
            },
            pending: routed.pending,
            skipped_no_mtime: routed.skipped_no_mtime,
        });
        if ob.events.len() >= REPLAY_BATCH {
            self.flush(shard, ob).await;
        }
    }

    /// Sends `shard` its buffered events as one [`ReplayBatch`] (awaited:
    /// answered once the shard's queue fits its window, the replay's
    /// backpressure) and the board its event counts.
    async fn flush(&self, shard: u8, ob: &mut Outbox) {
        for (bucket, n) in ob.seen.drain(..) {
            self.obs.board(|b| b.events(shard, &bucket, n));
        }
        if ob.events.is_empty() {
            return;
        }
        // One batch in flight per shard: the shard processes it while the
        // driver reads and routes the next, and the next goes only once the
        // previous one was answered (its queue fit the window). So each shard
        // gets its batches in log order, and the read still stops when a
        // shard's window is full.
        if let Some(prev) = ob.in_flight.take() {
            let _ = prev.await;
        }
        let events = std::mem::replace(&mut ob.events, Vec::with_capacity(REPLAY_BATCH));
        if let Some((addr, _, _)) = self.shards.get(&shard) {
            ob.sent += 1;
            // Spawned so it is polled (a full mailbox delivers it only when
            // polled) even while the driver waits on the stream.
            ob.in_flight = Some(tokio::spawn(addr.send(ReplayBatch { events })));
        }
    }

    /// [`Driver::flush`] for every shard, concurrently: each shard still
    /// gets its batches one after another, in log order.
    async fn flush_all(&self, out: &mut HashMap<u8, Outbox>) {
        futures::future::join_all(out.iter_mut().map(|(&s, ob)| self.flush(s, ob))).await;
    }

    /// Delivers every buffered event and waits until every shard answered
    /// its last batch: what was read has reached the shards.
    async fn deliver_all(&self, out: &mut HashMap<u8, Outbox>) {
        self.flush_all(out).await;
        let answers = out.values_mut().filter_map(|ob| ob.in_flight.take());
        futures::future::join_all(answers).await;
    }
}

/// What a shard's [`Finish`] answers: its report and the cursor to save.
type Finished = Result<(ShardReport, Option<ShardCursor>), MailboxError>;

/// Marks, in each finished shard's cursor, the buckets the shard deleted in
/// (`DONE` answers) to be walked
/// again, when `lost` names filers that failed during the pass
/// (docs/meta-log.md#filer-crash). Returns the shards whose cursor it marked.
fn mark_rewalk<'a>(
    finished: impl Iterator<Item = &'a mut Finished>,
    lost: &[String],
) -> BTreeSet<u8> {
    let mut marked = BTreeSet::new();
    if lost.is_empty() {
        return marked;
    }
    let why = format!(
        "filer {} failed during a pass that deleted here; deletes it acknowledged may be lost",
        lost.join(", ")
    );
    for (report, cursor) in finished.filter_map(|a| a.as_mut().ok()) {
        let buckets = report.counters.buckets_deleted_in();
        let Some(c) = cursor.as_mut().filter(|_| !buckets.is_empty()) else {
            continue;
        };
        tracing::warn!(
            shard = report.shard,
            buckets = ?buckets,
            filers = ?lost,
            "a filer failed during the pass: the buckets this shard deleted in are walked again next pass"
        );
        c.mark_rewalk(buckets, &why);
        marked.insert(report.shard);
    }
    marked
}

/// Events a shard receives per [`ReplayBatch`] at most: one round trip per
/// event capped the scan rate below the Go worker's, and 256 was slower
/// without saving memory (docs/meta-log.md#replay-batches, docs/due-index.md#memory).
const REPLAY_BATCH: usize = 512;

/// Cursor files saved at the same time at a pass's end (see [`Driver::run`]'s
/// end): four of sixteen took the steady pass's tail from ~16 ms to ~4 ms of
/// saves while holding at most four encoded cursors.
const CURSOR_SAVES_AT_ONCE: usize = 4;

/// How long the replay waits for the stream's next event before it delivers
/// the buffered ones (docs/meta-log.md#replay-batches).
const REPLAY_LINGER: Duration = Duration::from_millis(2);

/// One shard's meta-log events read but not yet sent to it.
#[derive(Default)]
struct Outbox {
    events: Vec<ReplayItem>,
    /// Events per bucket for the status board, reported with the batch
    /// rather than one board update (two locks) per event.
    seen: Vec<(String, u64)>,
    /// Batches sent so far (the pass report's `replay.batches`).
    sent: u64,
    /// The last batch sent, until the shard answers it.
    in_flight: Option<tokio::task::JoinHandle<Result<(), MailboxError>>>,
}

impl Outbox {
    fn count(&mut self, bucket: &str) {
        match self.seen.iter_mut().find(|(b, _)| b == bucket) {
            Some((_, n)) => *n += 1,
            None => self.seen.push((bucket.to_string(), 1)),
        }
    }
}
