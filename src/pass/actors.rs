//! The shard actors: [`ShardActor`] (supervised, one per shard, started once
//! per process by the coordinator and reused by every pass) with its
//! [`Replay`] and [`Walker`] children. They are thin: [`BeginPass`] gives the
//! shard a fresh pure [`ShardRun`], each later message becomes a call on it,
//! and the deletes it hands out go to the pass's
//! [`DeleteDispatcher`](crate::pass::dispatch::DeleteDispatcher), which answers the child that sent them.
//!
//! Backpressure: a `WalkBatch` or `ReplayEvent` is answered only once the shard
//! has room in its window for everything it queued, so the sender (the
//! coordinator's listing or meta-log task, awaiting `send`) stops reading until
//! outcomes free slots. Memory per shard is the window plus one event's matches.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix::WeakRecipient;
use actix::prelude::*;
use tokio::sync::oneshot;

use std::collections::HashMap;

use tracing::Span;

use crate::engine::cursor::ShardCursor;
use crate::engine::{CallResult, DeleteOutcome, DeleteRequest};
use crate::engine::{Match, Nanos, null_still_displaced};
use crate::pass::dispatch::{Dispatch, Outcome};
use crate::pass::observe::PassObserver;
use crate::pass::plan::PassPlan;
use crate::pass::ports::ClusterPort;
use crate::pass::shard_run::{DeleteTicket, ShardOutcome, ShardReport, ShardRun, Work};
use crate::pb::filer_pb::Entry;
use crate::telemetry;

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

/// The shard's open spans: `replay` from StartReplay to Finish, one `walk`
/// per bucket from its first walker delete to its ListingDone.
#[derive(Default)]
struct Spans {
    replay: Option<Span>,
    walk: HashMap<String, Span>,
}

/// A delete as the dispatcher takes it.
pub type DeleteDispatch = Dispatch<DeleteRequest, DeleteTicket>;
/// A delete's fate as the shard's children receive it.
pub type DeleteDone = Outcome<DeleteRequest, DeleteTicket>;

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
    pub persisted: Option<ShardCursor>,
    /// `dispatch.max_in_flight_per_shard`.
    pub window: usize,
    /// The pass's dispatcher.
    pub dispatcher: Recipient<DeleteDispatch>,
    /// The pass's spans and observer.
    pub tele: ShardTelemetry,
}

/// What a shard actor is, across passes (identity and counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, MessageResponse)]
pub struct ShardInfo {
    /// The shard.
    pub shard: u8,
    /// Process-unique id of this actor; kept across supervisor restarts.
    pub actor_id: u64,
    /// Passes begun on this actor since it was created.
    pub passes: u64,
    /// Supervisor restarts counted against the budget.
    pub restarts: u32,
}

/// Answers the shard's [`ShardInfo`].
#[derive(Message)]
#[rtype(result = "ShardInfo")]
pub struct GetShardInfo;

/// Walker matches of one listed item, all due.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WalkBatch {
    /// Bucket listed.
    pub bucket: String,
    /// Matches to delete.
    pub matches: Vec<Match>,
}

/// A bucket's listing ended.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ListingDone {
    /// Bucket listed.
    pub bucket: String,
    /// Without error.
    pub ok: bool,
}

/// Ends the walk phase; answers where the shard needs the meta-log from.
#[derive(Message)]
#[rtype(result = "Option<Nanos>")]
pub struct StartReplay;

/// One meta-log event routed to the shard.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReplayEvent {
    /// Event ts.
    pub ts: Nanos,
    /// Its matches in the replay view.
    pub matches: Vec<Match>,
}

/// Answers once every sent delete has an outcome.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain;

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

/// The filer's answer to a deferred match's lookup.
#[derive(Message)]
#[rtype(result = "()")]
pub struct LookupDone {
    /// The deferred match.
    pub m: Box<Match>,
    /// Its ticket.
    pub ticket: DeleteTicket,
    /// The entry (`None`: not found) or the lookup error.
    pub entry: Result<Option<Entry>, String>,
}

/// A child hit a bug; the shard restarts.
#[derive(Message)]
#[rtype(result = "()")]
struct Crashed(String);

/// Stops a child.
#[derive(Message)]
#[rtype(result = "()")]
struct Stop;

/// State shared by a shard actor and its children (all on one arbiter).
struct Core {
    run: Option<ShardRun>,
    /// The current pass's dispatcher (none before the first pass).
    dispatcher: Option<Recipient<DeleteDispatch>>,
    replay_to: Option<Recipient<DeleteDone>>,
    lookup_to: Option<Recipient<LookupDone>>,
    port: Arc<dyn ClusterPort>,
    walk_to: Option<Recipient<DeleteDone>>,
    accept_waiters: Vec<oneshot::Sender<()>>,
    idle_waiters: Vec<oneshot::Sender<()>>,
    extra_events: u64,
    tele: ShardTelemetry,
    spans: Spans,
}

type SharedCore = Rc<RefCell<Core>>;

impl Core {
    fn run(&mut self) -> Option<&mut ShardRun> {
        self.run.as_mut()
    }

    /// Sends what the window allows and wakes whoever waits for room or idle.
    fn pump(&mut self) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        for (work, ticket) in run.next_sends() {
            let call = match work {
                Work::Delete(call) => call,
                Work::Lookup(m) => {
                    let Some(reply) = self.lookup_to.clone() else {
                        run.lookup_done(&m, ticket, Err("shard restarting".into()));
                        continue;
                    };
                    let Some(l) = m.lookup.as_ref() else {
                        run.lookup_done(&m, ticket, Ok(None));
                        continue;
                    };
                    let fut = self.port.lookup(&l.directory, &l.name);
                    // A displaced null version is deleted only while its key's
                    // folder still points at a non-null version: the server
                    // would delete a null that became current again.
                    let folder = l.folder().map(|(d, n)| self.port.lookup(&d, &n));
                    // I/O on the runtime pool; the answer comes back by message
                    // (awaited send: a lost answer would wedge the window).
                    tokio::spawn(async move {
                        let mut entry = fut.await;
                        if let (Ok(Some(_)), Some(folder)) = (&entry, folder) {
                            match folder.await {
                                Ok(f) if !null_still_displaced(f.as_ref()) => entry = Ok(None),
                                Ok(_) => {}
                                Err(e) => entry = Err(e),
                            }
                        }
                        let _ = reply.send(LookupDone { m, ticket, entry }).await;
                    });
                    continue;
                }
            };
            let to = match ticket {
                DeleteTicket::Walk { .. } => self.walk_to.clone(),
                DeleteTicket::Replay(_) => self.replay_to.clone(),
            };
            let (Some(reply_to), Some(dispatcher)) = (to, self.dispatcher.as_ref()) else {
                // No child to answer to (restarting): report it as lost so the
                // window and the cursor stay honest.
                let r = CallResult::transport("shard restarting; delete not sent");
                run.outcome(&call, ticket, &r);
                continue;
            };
            let parent = match &ticket {
                DeleteTicket::Walk { bucket } => {
                    let shard_span = &self.tele.span;
                    let shard = run.shard();
                    self.spans
                        .walk
                        .entry(bucket.clone())
                        .or_insert_with(|| telemetry::walk_span(shard_span, shard, bucket))
                        .clone()
                }
                DeleteTicket::Replay(_) => self.spans.replay.clone().unwrap_or_else(Span::none),
            };
            let span = telemetry::delete_span(
                &parent,
                &call.bucket,
                &call.object_path,
                &call.rule_hash.0,
                call.kind,
            );
            let shard = run.shard();
            self.tele.obs.board(|b| b.delete_sent(shard));
            // do_send: queued even when the dispatcher's mailbox is full; the
            // total is bounded by the shards' windows.
            dispatcher.do_send(Dispatch {
                call,
                ticket,
                reply_to,
                span,
            });
        }
        let (accepting, idle) = match self.run.as_ref() {
            Some(r) => (r.accepting(), r.idle()),
            None => (true, true),
        };
        if accepting {
            for w in self.accept_waiters.drain(..) {
                let _ = w.send(());
            }
        }
        if idle {
            for w in self.idle_waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }

    fn wait_accepting(&mut self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.accept_waiters.push(tx);
        self.pump();
        rx
    }

    fn wait_idle(&mut self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.idle_waiters.push(tx);
        self.pump();
        rx
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Runs `f` on the core; a panic marks the shard failed and returns `Err`.
fn guarded<R>(core: &SharedCore, f: impl FnOnce(&mut Core) -> R) -> Result<R, String> {
    let r = catch_unwind(AssertUnwindSafe(|| f(&mut core.borrow_mut())));
    r.map_err(|p| {
        let msg = panic_message(p);
        if let Ok(mut c) = core.try_borrow_mut() {
            if let Some(run) = c.run() {
                run.fail(format!("shard crashed: {msg}"));
            }
            c.pump();
        }
        msg
    })
}

/// A child's link to its shard. Weak: the children live as long as the shard
/// (which stops them in `stopped`), and a strong link would keep the shard
/// alive after its coordinator is gone.
#[derive(Clone)]
struct Parent(WeakRecipient<Crashed>);

impl Parent {
    fn do_send(&self, m: Crashed) {
        if let Some(p) = self.0.upgrade() {
            p.do_send(m);
        }
    }
}

async fn await_rx(rx: oneshot::Receiver<()>) {
    // A dropped sender means the shard restarted; the caller goes on.
    let _ = rx.await;
}

/// Replay child: applies routed events and replay outcomes.
pub struct Replay {
    core: SharedCore,
    parent: Parent,
}

impl Actor for Replay {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        let mut c = self.core.borrow_mut();
        c.replay_to = Some(ctx.address().recipient());
        c.lookup_to = Some(ctx.address().recipient());
    }
}

impl Handler<LookupDone> for Replay {
    type Result = ();
    fn handle(&mut self, d: LookupDone, _: &mut Context<Self>) {
        let r = guarded(&self.core, |c| {
            let shard = c.run.as_ref().map(|r| r.shard());
            if let Some(run) = c.run()
                && let Some(reason) = run.lookup_done(&d.m, d.ticket, d.entry)
            {
                tracing::warn!(shard, %reason, "shard halted");
            }
            c.pump();
        });
        if let Err(e) = r {
            self.parent.do_send(Crashed(e));
        }
    }
}

impl Handler<ReplayEvent> for Replay {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, m: ReplayEvent, _: &mut Context<Self>) -> Self::Result {
        match guarded(&self.core, |c| {
            if let Some(run) = c.run() {
                run.replay_event(m.ts, &m.matches);
            }
            c.wait_accepting()
        }) {
            Ok(rx) => Box::pin(await_rx(rx)),
            Err(e) => {
                self.parent.do_send(Crashed(e));
                Box::pin(async {})
            }
        }
    }
}

impl Handler<DeleteDone> for Replay {
    type Result = ();
    fn handle(&mut self, o: DeleteDone, _: &mut Context<Self>) {
        on_outcome(&self.core, &self.parent, o);
    }
}

impl Handler<Stop> for Replay {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// Walker child: applies walker matches and walker outcomes.
pub struct Walker {
    core: SharedCore,
    parent: Parent,
}

impl Actor for Walker {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.core.borrow_mut().walk_to = Some(ctx.address().recipient());
    }
}

impl Handler<WalkBatch> for Walker {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, m: WalkBatch, _: &mut Context<Self>) -> Self::Result {
        match guarded(&self.core, |c| {
            if let Some(run) = c.run() {
                run.walk_matches(&m.bucket, m.matches);
            }
            c.wait_accepting()
        }) {
            Ok(rx) => Box::pin(await_rx(rx)),
            Err(e) => {
                self.parent.do_send(Crashed(e));
                Box::pin(async {})
            }
        }
    }
}

impl Handler<DeleteDone> for Walker {
    type Result = ();
    fn handle(&mut self, o: DeleteDone, _: &mut Context<Self>) {
        on_outcome(&self.core, &self.parent, o);
    }
}

impl Handler<Stop> for Walker {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

fn on_outcome(core: &SharedCore, parent: &Parent, o: DeleteDone) {
    let r = guarded(core, |c| {
        let shard = c.run.as_ref().map(|r| r.shard());
        let outcome = o.result.outcome;
        let obs = &c.tele.obs;
        obs.metrics.dispatch(&o.call.bucket, o.call.kind, outcome);
        if outcome != DeleteOutcome::DryRun {
            obs.metrics.limiter_wait(o.limiter_wait);
        }
        if let Some(s) = shard {
            obs.board(|b| b.delete_done(s, &o.call.bucket, outcome));
        }
        if let Some(run) = c.run()
            && let Some(reason) = run.outcome(&o.call, o.ticket, &o.result)
        {
            tracing::warn!(shard, %reason, "shard halted");
            if let Some(s) = shard {
                c.tele.obs.board(|b| b.shard_halted(s, &reason));
            }
        }
        c.pump();
    });
    if let Err(e) = r {
        parent.do_send(Crashed(e));
    }
}

/// Ids for [`ShardInfo::actor_id`].
static NEXT_ACTOR_ID: AtomicU64 = AtomicU64::new(1);

/// The per-pass state [`BeginPass`] hands over; kept so a restart can rebuild
/// the shard's run from the persisted cursor.
struct PassState {
    plan: Arc<PassPlan>,
    persisted: Option<ShardCursor>,
    window: usize,
}

/// One shard: lives for the whole process (the coordinator starts it once,
/// supervised by [`actix::Supervisor`]) and owns the current pass's state and
/// cursor; its children do the per-phase work.
pub struct ShardActor {
    shard: u8,
    actor_id: u64,
    passes: u64,
    pass: Option<PassState>,
    core: SharedCore,
    replay: Option<Addr<Replay>>,
    walker: Option<Addr<Walker>>,
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
            pass: None,
            core: Rc::new(RefCell::new(Core {
                run: None,
                dispatcher: None,
                replay_to: None,
                lookup_to: None,
                port,
                walk_to: None,
                accept_waiters: Vec::new(),
                idle_waiters: Vec::new(),
                extra_events: 0,
                tele: ShardTelemetry::default(),
                spans: Spans::default(),
            })),
            replay: None,
            walker: None,
            respawn: None,
            restarts: 0,
            exhausted: false,
            crash: None,
        }
    }

    fn spawn_children(&mut self, ctx: &mut Context<Self>) {
        self.respawn = None;
        let parent = Parent(ctx.address().recipient::<Crashed>().downgrade());
        self.replay = Some(
            Replay {
                core: self.core.clone(),
                parent: parent.clone(),
            }
            .start(),
        );
        self.walker = Some(
            Walker {
                core: self.core.clone(),
                parent,
            }
            .start(),
        );
    }

    fn stop_children(&mut self) {
        if let Some(r) = self.replay.take() {
            r.do_send(Stop);
        }
        if let Some(w) = self.walker.take() {
            w.do_send(Stop);
        }
    }

    /// A run for the current pass from the persisted cursor, failed with
    /// `why` (`None` when no pass is under way).
    fn failed_run(&self, why: String) -> Option<ShardRun> {
        let p = self.pass.as_ref()?;
        let mut run = ShardRun::new(self.shard, p.plan.clone(), p.persisted.clone(), p.window);
        run.fail(why);
        Some(run)
    }
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
        // hold the shard's state and must not outlive this incarnation.
        self.stop_children();
    }
}

impl Supervised for ShardActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.restarts += 1;
        self.respawn = None;
        {
            let c = self.core.borrow();
            c.tele.obs.metrics.shard_restarted(self.shard);
            c.tele.obs.board(|b| b.shard_restarted(self.shard));
        }
        self.stop_children();
        // Rebuild from the persisted cursor. Events already read this pass
        // cannot be read again, so the shard sits the rest of the pass out
        // (failed, cursor not saved) and the next pass resumes from the
        // persisted cursor.
        let run = self.failed_run(format!(
            "restarted ({} of {RESTART_BUDGET}) after: {}",
            self.restarts,
            self.crash.as_deref().unwrap_or("unknown failure")
        ));
        let mut c = self.core.borrow_mut();
        c.run = run;
        c.replay_to = None;
        c.lookup_to = None;
        c.walk_to = None;
        c.pump();
    }
}

impl Handler<Crashed> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: Crashed, ctx: &mut Context<Self>) {
        tracing::error!(shard = self.shard, error = %m.0, "shard crashed");
        self.crash = Some(m.0);
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
            let run = self.failed_run(format!(
                "shard crashed with its restart budget ({RESTART_BUDGET}) spent: {}",
                self.crash.as_deref().unwrap_or("unknown failure")
            ));
            let mut c = self.core.borrow_mut();
            c.run = run;
            c.pump();
        }
    }
}

impl Handler<BeginPass> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: BeginPass, ctx: &mut Context<Self>) {
        self.passes += 1;
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
        if self.replay.is_none() || self.walker.is_none() {
            self.stop_children();
            self.spawn_children(ctx);
        }
        let run = ShardRun::new(self.shard, m.plan.clone(), m.persisted.clone(), m.window);
        self.pass = Some(PassState {
            plan: m.plan,
            persisted: m.persisted,
            window: m.window,
        });
        self.crash = None;
        let mut c = self.core.borrow_mut();
        c.run = Some(run);
        c.dispatcher = Some(m.dispatcher);
        c.tele = m.tele;
        c.spans = Spans::default();
        c.extra_events = 0;
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
    fn handle(&mut self, m: WalkBatch, _: &mut Context<Self>) -> Self::Result {
        match &self.walker {
            Some(w) => {
                let w = w.clone();
                Box::pin(async move {
                    let _ = w.send(m).await;
                })
            }
            None => {
                if let Some(run) = self.core.borrow_mut().run() {
                    run.walk_matches(&m.bucket, m.matches);
                }
                Box::pin(async {})
            }
        }
    }
}

impl Handler<ReplayEvent> for ShardActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, m: ReplayEvent, _: &mut Context<Self>) -> Self::Result {
        match &self.replay {
            Some(r) => {
                let r = r.clone();
                Box::pin(async move {
                    let _ = r.send(m).await;
                })
            }
            None => {
                if let Some(run) = self.core.borrow_mut().run() {
                    run.replay_event(m.ts, &m.matches);
                }
                Box::pin(async {})
            }
        }
    }
}

impl Handler<ListingDone> for ShardActor {
    type Result = ();
    fn handle(&mut self, m: ListingDone, _: &mut Context<Self>) {
        let mut c = self.core.borrow_mut();
        if let Some(span) = c.spans.walk.remove(&m.bucket) {
            telemetry::record_outcome(&span, if m.ok { "completed" } else { "failed" });
        }
        if let Some(run) = c.run() {
            run.listing_done(&m.bucket, m.ok);
        }
    }
}

impl Handler<StartReplay> for ShardActor {
    type Result = Option<Nanos>;
    fn handle(&mut self, _: StartReplay, _: &mut Context<Self>) -> Option<Nanos> {
        let mut c = self.core.borrow_mut();
        let span = telemetry::replay_span(&c.tele.span, self.shard);
        c.spans.replay = Some(span);
        c.run().and_then(|r| r.start_replay())
    }
}

impl Handler<Drain> for ShardActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        let rx = self.core.borrow_mut().wait_idle();
        Box::pin(await_rx(rx))
    }
}

impl Handler<Finish> for ShardActor {
    type Result = MessageResult<Finish>;
    fn handle(&mut self, m: Finish, _: &mut Context<Self>) -> Self::Result {
        let mut c = self.core.borrow_mut();
        c.extra_events += m.events_not_routed;
        let extra = c.extra_events;
        let taken = c.run.take();
        drop(c);
        let Some(run) = taken.or_else(|| self.failed_run("shard state lost".into())) else {
            // Finish without BeginPass: the shard took no part in the pass.
            let report = ShardReport {
                shard: self.shard,
                outcome: ShardOutcome::Failed,
                buckets: 0,
                rules: 0,
                counters: Default::default(),
                walker_ran: false,
                recovery: Vec::new(),
                halt_reason: Some("shard was not started for this pass".into()),
            };
            return MessageResult((report, None));
        };
        let (mut report, cursor) = run.finish(m.stream_end);
        report.counters.events_scanned += extra;
        let mut c = self.core.borrow_mut();
        if let Some(span) = c.spans.replay.take() {
            telemetry::record_outcome(&span, report.outcome.as_str());
        }
        for (_, span) in c.spans.walk.drain() {
            telemetry::record_outcome(&span, report.outcome.as_str());
        }
        c.extra_events = 0;
        // The pass's dispatcher ends with the pass; the children stay for
        // the next one. No ctx.stop(): a stop would make the Supervisor
        // restart the shard.
        c.dispatcher = None;
        // Release the pass's shard span: a span is exported only once every
        // handle is gone, and a long-lived shard holding it would keep the
        // whole pass trace (its parent) unexported until the next pass.
        c.tele.span = Span::none();
        MessageResult((report, cursor))
    }
}
