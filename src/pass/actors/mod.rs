//! The shard actors: [`ShardActor`] (supervised, one per shard, started once
//! per process by the coordinator and reused by every pass) with its
//! [`Replay`] and [`Walker`] children. Each owns what it decides on and they
//! talk by messages only:
//!
//! - the **ShardActor** owns the pass's pure [`ShardRun`] (cursor, window,
//!   halts) and is the only caller of it: every message becomes a call on it,
//!   and the work it hands out goes to the child of that phase under a
//!   [`SendId`]. The run keeps what it sent, so answers carry the id, and the
//!   shard records each delete's metrics and status from its own copy;
//! - the **Walker** owns the walk phase's telemetry (one `walk` span per
//!   bucket): it sends the shard's walker deletes to the pass's
//!   [`DeleteDispatcher`](crate::pass::dispatch::DeleteDispatcher) and
//!   reports each outcome to the shard;
//! - the **Replay** child owns the replay span and the filer lookups of
//!   deferred matches (the I/O), and does the same for replay deletes.
//!
//! Backpressure: a `WalkBatch` or `ReplayBatch` is answered only
//! once the shard has room in its window for everything it queued, so the
//! sender (the coordinator's listing or meta-log task, awaiting `send`) stops
//! reading until outcomes free slots. Memory per shard is the window plus one
//! batch's matches.
//!
//! Every message between a shard and its children carries the shard's
//! `epoch` (bumped by every pass and every restart), so an answer to work of an
//! earlier incarnation is dropped instead of being applied to the new one.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use std::collections::HashMap;

use tracing::Span;

use crate::engine::check::{Check, Probe, Purpose, Verdict};
use crate::engine::cursor::ShardCursor;
use crate::engine::{CallResult, DeleteRequest};
use crate::engine::{Match, Nanos};
use crate::pass::dispatch::{Dispatch, Outcome};
use crate::pass::observe::PassObserver;
use crate::pass::plan::PassPlan;
use crate::pass::ports::ClusterPort;
use crate::pass::report::ShardReport;
use crate::pass::shard_run::{LookupAnswer, ReplayItem, SendId, ShardRun, Work};
use crate::pb::filer_pb::Entry;
use crate::telemetry;
use futures::FutureExt;

mod children;
use children::*;
pub use children::{Replay, Walker};

/// Where a shard reports: its `shard` span (parent of its replay and walk
/// spans) and the pass observer (metrics, status board).
#[derive(Clone, Debug)]
pub struct ShardTelemetry {
    /// The shard's span in the pass's trace.
    pub span: Span,
    /// Metrics and status board.
    pub obs: PassObserver,
}

impl Default for ShardTelemetry {
    fn default() -> Self {
        ShardTelemetry {
            span: Span::none(),
            obs: PassObserver::default(),
        }
    }
}

/// A delete as the dispatcher takes it; the ticket is the shard's epoch and
/// the delete's id in its run.
pub type DeleteDispatch = Dispatch<DeleteRequest, (u64, SendId)>;
/// A delete's fate as the shard's children receive it.
pub type DeleteDone = Outcome<(u64, SendId)>;

/// Restarts allowed per shard for the whole process before it is left failed
/// for the rest of its pass (the next pass gives it a fresh budget).
pub const RESTART_BUDGET: u32 = 3;

/// Backoff before restart number `n` (1-based): `1.5^min(10, n−1)` seconds.
pub fn restart_backoff(n: u32) -> Duration {
    Duration::from_secs_f64(1.5f64.powi(n.saturating_sub(1).min(10) as i32))
}

/// Starts a pass on a shard: replaces its per-pass state (a fresh
/// [`ShardRun`] from `plan` and `persisted`), its dispatcher and telemetry.
/// Sent before any other per-pass message; a shard not sent `BeginPass`
/// takes no part in the pass.
#[derive(Message)]
#[rtype(result = "()")]
pub struct BeginPass {
    /// The pass's snapshot and window.
    pub plan: Arc<PassPlan>,
    /// The shard's cursor as loaded at pass start.
    /// Shared with each run built from it, so a restarted run does not
    /// copy a cursor of every bucket.
    pub persisted: Option<Arc<ShardCursor>>,
    /// `dispatch.max_in_flight_per_shard`.
    pub window: usize,
    pub dispatcher: Recipient<DeleteDispatch>,
    /// The pass's spans and observer.
    pub tele: ShardTelemetry,
}

/// What a shard actor is, across passes (identity and counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, MessageResponse)]
pub struct ShardInfo {
    pub shard: u8,
    /// Process-unique id of this actor; kept across supervisor restarts.
    pub actor_id: u64,
    /// Passes begun on this actor since it was created.
    pub passes: u64,
    /// Supervisor restarts counted against the budget.
    pub restarts: u32,
}

#[derive(Message)]
#[rtype(result = "ShardInfo")]
pub struct GetShardInfo;

/// Walker matches of one listed item, all due.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WalkBatch {
    pub bucket: String,
    pub matches: Vec<Match>,
    /// Entries of the item skipped for want of a real mtime.
    pub skipped_no_mtime: u64,
    /// The item's listing position, for the resume point of a recovery walk
    /// (docs/design-deviations.md#resumable-recovery-walks).
    pub pos: Option<String>,
}

/// A bucket's listing ended.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ListingDone {
    pub bucket: String,
    /// Complete and without error.
    pub ok: bool,
    /// The last position delivered to every shard (a cut or failed listing
    /// still moves resume points up to it).
    pub reached: Option<String>,
}

/// Ends the walk phase; answers where the shard needs the meta-log from.
#[derive(Message)]
#[rtype(result = "Option<Nanos>")]
pub struct StartReplay;

/// After [`StartReplay`]: the meta-log ranges `(since, until]` the shard
/// needs (docs/due-index.md), sorted and merged.
#[derive(Message)]
#[rtype(result = "Vec<(Nanos, Nanos)>")]
pub struct ReadRanges;

/// A batch of meta-log events routed to the shard, in log order: one actor
/// round trip per batch instead of per event (the scan rate). Answered once
/// the shard's queue fits its window.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReplayBatch {
    /// The events, oldest first.
    pub events: Vec<ReplayItem>,
}

/// Answers once every sent delete has an outcome.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain;

/// `Drain` outlived its bound: halt with `reason` (see
/// [`ShardRun::drain_timed_out`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct DrainTimedOut {
    /// The halt reason (`DRAIN_TIMEOUT: …`).
    pub reason: String,
}

/// Ends the pass for the shard.
#[derive(Message)]
#[rtype(result = "(ShardReport, Option<ShardCursor>)")]
pub struct Finish {
    /// ts of the last event when the stream ended normally.
    pub stream_end: Option<Nanos>,
    /// Events routed to the shard that were not sent to it (buckets outside
    /// the replay view), for the events_scanned counter.
    pub events_not_routed: u64,
}

// --- The shard ----------------------------------------------------------------

/// Ids for [`ShardInfo::actor_id`].
static NEXT_ACTOR_ID: AtomicU64 = AtomicU64::new(1);

/// One shard: lives for the whole process (the coordinator starts it once,
/// supervised by [`actix::Supervisor`]) and owns the current pass's
/// [`ShardRun`] and cursor; its children do the per-phase I/O and telemetry.
pub struct ShardActor {
    shard: u8,
    actor_id: u64,
    passes: u64,
    /// Stamped on everything sent to the children; bumped by every pass and
    /// every restart, so stale answers are recognised.
    epoch: u64,
    /// The current pass's [`BeginPass`], kept so a restart can rebuild the
    /// shard's run from the persisted cursor.
    pass: Option<BeginPass>,
    run: Option<ShardRun>,
    port: Arc<dyn ClusterPort>,
    replay: Option<Addr<Replay>>,
    walker: Option<Addr<Walker>>,
    /// Who waits for room in the run (`[0]`) and for it to be idle (`[1]`).
    waiters: [Vec<oneshot::Sender<()>>; 2],
    /// The delayed respawn of the children after a restart, so a pass begun
    /// during the backoff can spawn them at once.
    respawn: Option<SpawnHandle>,
    /// Restarts since the process started (or since the budget was last
    /// renewed, see [`BeginPass`]).
    restarts: u32,
    /// The budget ran out during the current pass: the shard stays failed
    /// until the next `BeginPass`.
    exhausted: bool,
    crash: Option<String>,
}

impl ShardActor {
    /// Shard `shard`, reading lookups through `port`. It takes part in a
    /// pass once sent [`BeginPass`].
    pub fn new(shard: u8, port: Arc<dyn ClusterPort>) -> ShardActor {
        ShardActor {
            shard,
            actor_id: NEXT_ACTOR_ID.fetch_add(1, Ordering::Relaxed),
            passes: 0,
            epoch: 0,
            pass: None,
            run: None,
            port,
            replay: None,
            walker: None,
            waiters: Default::default(),
            respawn: None,
            restarts: 0,
            exhausted: false,
            crash: None,
        }
    }

    fn tele(&self) -> ShardTelemetry {
        self.pass
            .as_ref()
            .map(|p| p.tele.clone())
            .unwrap_or_default()
    }

    fn spawn_children(&mut self, ctx: &mut Context<Self>) {
        self.respawn = None;
        self.replay = Some(self.child(ctx));
        self.walker = Some(self.child(ctx));
        self.brief_children();
    }

    fn child<S: PhaseSpans>(&self, ctx: &mut Context<Self>) -> Addr<Child<S>> {
        Child {
            parent: Parent(ctx.address().downgrade()),
            port: self.port.clone(),
            state: ChildPass::default(),
            spans: S::default(),
        }
        .start()
    }

    /// Sends `m()` to each child there is.
    fn tell_children<M>(&self, m: impl Fn() -> M)
    where
        M: Message<Result = ()> + Send + 'static,
        Replay: Handler<M>,
        Walker: Handler<M>,
    {
        tell(&self.replay, m());
        tell(&self.walker, m());
    }

    /// Tells the children the current epoch, telemetry and dispatcher.
    fn brief_children(&self) {
        let dispatcher = self.pass.as_ref().map(|p| p.dispatcher.clone());
        self.tell_children(|| ChildPass {
            shard: self.shard,
            tele: self.tele(),
            dispatcher: dispatcher.clone(),
        });
    }

    fn stop_children(&mut self) {
        tell(&self.replay.take(), Stop);
        tell(&self.walker.take(), Stop);
    }

    /// A fresh run for the current pass from the persisted cursor (`None`
    /// when no pass is under way).
    fn fresh_run(&self) -> Option<ShardRun> {
        let p = self.pass.as_ref()?;
        let (plan, persisted) = (p.plan.clone(), p.persisted.clone());
        Some(ShardRun::new(self.shard, plan, persisted, p.window))
    }

    /// A run for the current pass from the persisted cursor, failed with
    /// `why` (`None` when no pass is under way).
    fn failed_run(&self, why: String) -> Option<ShardRun> {
        let mut run = self.fresh_run()?;
        run.fail(why);
        Some(run)
    }

    /// Calls `f` on the run; a panic (a bug in the pure core) crashes the
    /// shard like a child's would.
    fn on_run<R>(
        &mut self,
        ctx: &mut Context<Self>,
        f: impl FnOnce(&mut ShardRun) -> R,
    ) -> Option<R> {
        let run = self.run.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| f(run))) {
            Ok(r) => Some(r),
            Err(p) => {
                let msg = panic_message(p);
                if let Some(run) = self.run.as_mut() {
                    run.fail(format!("shard crashed: {msg}"));
                }
                self.crashed(msg, ctx);
                None
            }
        }
    }

    /// A halt just happened: log it and show it.
    fn halted(&self, reason: &str) {
        tracing::warn!(shard = self.shard, %reason, "shard halted");
        self.tele()
            .obs
            .board(|b| b.shard_halted(self.shard, reason));
    }

    /// `f` on the run, then [`pump`](Self::pump); a halt `f` answers is
    /// logged and shown.
    fn settle(&mut self, ctx: &mut Context<Self>, f: impl FnOnce(&mut ShardRun) -> Option<String>) {
        if let Some(Some(reason)) = self.on_run(ctx, f) {
            self.halted(&reason);
        }
        self.pump();
    }

    /// Sends what the window allows, each to the child of its phase, and
    /// wakes whoever waits for room or idle.
    fn pump(&mut self) {
        if let Some(run) = self.run.as_mut() {
            for (work, id) in run.next_sends() {
                let epoch = self.epoch;
                // No child to send through (restarting): the work is lost,
                // reported so the window and the cursor stay honest.
                match work {
                    Work::Lookup(body) => {
                        if !tell(&self.replay, Stamped { epoch, id, body }) {
                            let lost = LookupAnswer {
                                entry: Err("shard restarting; lookup not sent".into()),
                                folder: None,
                            };
                            run.lookup_done(id, lost);
                        }
                    }
                    Work::Check(body) => {
                        if !tell(&self.replay, Stamped { epoch, id, body }) {
                            run.check_done(id, &[Err("shard restarting; check not sent".into())]);
                        }
                    }
                    Work::Delete(body) => {
                        let m = Stamped { epoch, id, body };
                        let sent = if id.walk() {
                            tell(&self.walker, m)
                        } else {
                            tell(&self.replay, m)
                        };
                        if !sent {
                            let r = CallResult::transport("shard restarting; delete not sent");
                            run.outcome(id, &r);
                        }
                    }
                }
            }
        }
        let run = self.run.as_ref();
        let ready = [
            run.is_none_or(ShardRun::accepting),
            run.is_none_or(ShardRun::idle),
        ];
        for (waiters, ready) in self.waiters.iter_mut().zip(ready) {
            if ready {
                for w in waiters.drain(..) {
                    let _ = w.send(());
                }
            }
        }
    }

    /// Answers once the run accepts more (`idle`: once it is idle).
    fn wait(&mut self, idle: bool) -> ResponseFuture<()> {
        let (tx, rx) = oneshot::channel();
        self.waiters[usize::from(idle)].push(tx);
        self.pump();
        // A dropped sender means the shard restarted; the caller goes on.
        Box::pin(async move { drop(rx.await) })
    }

    fn crashed(&mut self, why: String, ctx: &mut Context<Self>) {
        tracing::error!(shard = self.shard, error = %why, "shard crashed");
        self.crash = Some(why);
        if self.restarts < RESTART_BUDGET {
            ctx.stop();
        } else {
            // No restart, but the same clean slate a restart gives: the
            // crashed run may hold work that will never get an outcome (a
            // lookup that panicked before it was sent), and Drain would wait
            // for it forever. The shard sits the rest of the pass out.
            self.exhausted = true;
            tracing::error!(
                shard = self.shard,
                restarts = self.restarts,
                "shard restart budget exhausted; it stays failed for this pass"
            );
            self.epoch += 1;
            self.brief_children();
            self.run = self.failed_run(format!(
                "shard crashed with its restart budget ({RESTART_BUDGET}) spent: {}",
                self.crash.as_deref().unwrap_or("unknown failure")
            ));
            self.pump();
        }
    }
}

/// Sends `m` to `child`; `false` when there is none (restarting).
fn tell<A, M>(child: &Option<Addr<A>>, m: M) -> bool
where
    A: Actor<Context = Context<A>> + Handler<M>,
    M: Message<Result = ()> + Send + 'static,
{
    child.as_ref().map(|c| c.do_send(m)).is_some()
}

impl Actor for ShardActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        if self.restarts == 0 {
            self.spawn_children(ctx);
        } else {
            let h = ctx.run_later(restart_backoff(self.restarts), |act, ctx| {
                act.spawn_children(ctx)
            });
            self.respawn = Some(h);
        }
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // On a restart and at the end of the process alike: the children
        // work for this incarnation and must not outlive it.
        self.stop_children();
    }
}

impl Supervised for ShardActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.restarts += 1;
        self.respawn = None;
        self.epoch += 1;
        self.tele().obs.shard_restarted(self.shard);
        self.stop_children();
        // Rebuild from the persisted cursor. Events already read this pass
        // cannot be read again, so the shard sits the rest of the pass out
        // (failed, cursor not saved) and the next pass resumes from the
        // persisted cursor.
        self.run = self.failed_run(format!(
            "restarted ({} of {RESTART_BUDGET}) after: {}",
            self.restarts,
            self.crash.as_deref().unwrap_or("unknown failure")
        ));
        self.pump();
    }
}

impl Handler<Crashed> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: Crashed, ctx: &mut Context<Self>) {
        self.crashed(m.0, ctx);
    }
}

impl Handler<BeginPass> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: BeginPass, ctx: &mut Context<Self>) {
        self.passes += 1;
        self.epoch += 1;
        if self.exhausted {
            tracing::warn!(
                shard = self.shard,
                restarts = self.restarts,
                "shard exhausted its restart budget in an earlier pass; giving it a fresh chance"
            );
            self.exhausted = false;
            self.restarts = 0;
        }
        // A pass begun during a restart's backoff must not lose its deletes
        // to missing children: spawn them now.
        if let Some(h) = self.respawn.take() {
            ctx.cancel_future(h);
        }
        self.pass = Some(m);
        self.run = self.fresh_run();
        self.crash = None;
        if self.replay.is_none() || self.walker.is_none() {
            self.stop_children();
            self.spawn_children(ctx);
        } else {
            self.brief_children();
        }
    }
}

impl Handler<GetShardInfo> for ShardActor {
    type Result = ShardInfo;
    fn handle(&mut self, _: GetShardInfo, _: &mut Context<Self>) -> ShardInfo {
        ShardInfo {
            shard: self.shard,
            actor_id: self.actor_id,
            passes: self.passes,
            restarts: self.restarts,
        }
    }
}

impl Handler<WalkBatch> for ShardActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, m: WalkBatch, ctx: &mut Context<Self>) -> Self::Result {
        self.on_run(ctx, |run| {
            run.skipped_no_mtime(m.skipped_no_mtime);
            run.walk_item(&m.bucket, m.pos.as_deref(), m.matches);
        });
        self.wait(false)
    }
}

impl Handler<ReplayBatch> for ShardActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, m: ReplayBatch, ctx: &mut Context<Self>) -> Self::Result {
        self.on_run(ctx, |run| run.replay_batch(&m.events));
        self.wait(false)
    }
}

impl Handler<DeleteDone> for ShardActor {
    type Result = ();
    fn handle(&mut self, o: DeleteDone, ctx: &mut Context<Self>) {
        let (epoch, id) = o.ticket;
        if epoch != self.epoch {
            // An answer to an earlier incarnation's delete: that run is gone.
            return;
        }
        if let Some(req) = self.run.as_ref().and_then(|run| run.request_of(id)) {
            let obs = self.tele().obs;
            obs.delete_done(self.shard, req, o.result.outcome, o.limiter_wait);
        }
        self.settle(ctx, |run| run.outcome(id, &o.result));
    }
}

impl Handler<LookupDone> for ShardActor {
    type Result = ();
    fn handle(&mut self, d: LookupDone, ctx: &mut Context<Self>) {
        if d.epoch != self.epoch {
            return;
        }
        self.settle(ctx, |run| run.lookup_done(d.id, d.body));
    }
}

impl Handler<CheckDone> for ShardActor {
    type Result = ();
    fn handle(&mut self, d: CheckDone, ctx: &mut Context<Self>) {
        if d.epoch != self.epoch {
            return;
        }
        let what = self
            .run
            .as_ref()
            .and_then(|run| run.request_of(d.id))
            .map(|req| (req.bucket.clone(), req.kind));
        let Some(verdict) = self.on_run(ctx, |run| run.check_done(d.id, &d.body)) else {
            return;
        };
        let label = match &verdict {
            Verdict::Settled | Verdict::Send => None,
            Verdict::CompletedLeftover(why) => {
                tracing::warn!(shard = self.shard, reason = %why, "completed upload's leftover not aborted");
                Some("completed_upload_leftover")
            }
            Verdict::Locked(why) => {
                tracing::info!(shard = self.shard, reason = %why, "locked; retried next pass");
                Some("locked")
            }
            Verdict::Unconfirmed(why) | Verdict::StillThere(why) => {
                tracing::warn!(shard = self.shard, reason = %why, "answer not confirmed; retried next pass");
                Some("unconfirmed")
            }
        };
        if let (Some(label), Some((bucket, kind))) = (label, &what) {
            self.tele().obs.metrics.check_verdict(bucket, *kind, label);
        }
        self.pump();
    }
}

impl Handler<ListingDone> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: ListingDone, ctx: &mut Context<Self>) {
        let (bucket, ok) = (m.bucket.clone(), m.ok);
        tell(&self.walker, CloseWalk { bucket, ok });
        self.on_run(ctx, |run| run.listing_ended(&m.bucket, m.ok, m.reached));
    }
}

impl Handler<StartReplay> for ShardActor {
    type Result = Option<Nanos>;
    fn handle(&mut self, _: StartReplay, ctx: &mut Context<Self>) -> Option<Nanos> {
        tell(&self.replay, OpenReplay);
        self.on_run(ctx, |run| run.start_replay()).flatten()
    }
}

impl Handler<ReadRanges> for ShardActor {
    type Result = Vec<(Nanos, Nanos)>;
    fn handle(&mut self, _: ReadRanges, ctx: &mut Context<Self>) -> Vec<(Nanos, Nanos)> {
        self.on_run(ctx, |run| run.read_ranges())
            .unwrap_or_default()
    }
}

impl Handler<Drain> for ShardActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        self.wait(true)
    }
}

impl Handler<DrainTimedOut> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: DrainTimedOut, ctx: &mut Context<Self>) {
        // Pumping wakes the idle waiters: the window was given up.
        self.settle(ctx, |run| run.drain_timed_out(m.reason));
    }
}

impl Handler<Finish> for ShardActor {
    type Result = MessageResult<Finish>;
    fn handle(&mut self, m: Finish, _: &mut Context<Self>) -> Self::Result {
        let taken = self.run.take();
        let Some(run) = taken.or_else(|| self.failed_run("shard state lost".into())) else {
            // Finish without BeginPass: the shard took no part in the pass.
            let report =
                ShardReport::failed(self.shard, "shard was not started for this pass".into());
            return MessageResult((report, None));
        };
        let (mut report, cursor) = run.finish(m.stream_end);
        report.counters.events_scanned += m.events_not_routed;
        let outcome = report.outcome.as_str();
        self.tell_children(|| EndPass { outcome });
        // The pass's dispatcher and spans end with the pass; the children
        // stay for the next one. No ctx.stop(): a stop would make the
        // Supervisor restart the shard. Releasing the shard span matters: a
        // span is exported only once every handle is gone.
        if let Some(p) = self.pass.as_mut() {
            p.tele.span = Span::none();
        }
        MessageResult((report, cursor))
    }
}
