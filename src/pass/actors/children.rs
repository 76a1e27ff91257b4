//! The shard's two children and the messages between them and the shard: the
//! **Replay** child (replay span, deferred lookups and confirming checks, replay
//! deletes) and the **Walker** (one `walk` span per bucket, walker deletes).
//! Both only do I/O and telemetry and report every result to the shard
//! ([`super::ShardActor`]), which alone decides.

use super::*;

/// Work the shard sends a child, or a child's answer to it, stamped with the
/// shard's epoch and the work's id.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Stamped<T> {
    pub(super) epoch: u64,
    pub(super) id: SendId,
    pub(super) body: T,
}

/// The filer's answers to a deferred match's lookups (Replay → shard).
pub(super) type LookupDone = Stamped<LookupAnswer>;
/// The filer's answers to a check's probes (Replay → shard).
pub(super) type CheckDone = Stamped<Vec<Result<Vec<Entry>, String>>>;
/// Read a check's probes (shard → Replay, whatever the phase: the Replay
/// child owns the filer reads).
pub(super) type SendCheck = Stamped<Box<Check>>;
/// Send this delete through the dispatcher (shard → the child of its phase).
pub(super) type SendDelete = Stamped<DeleteRequest>;
/// Look a deferred match's entry up (shard → Replay).
pub(super) type SendLookup = Stamped<Box<Match>>;

/// A child hit a bug; the shard restarts (child → shard).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Crashed(pub(super) String);

/// What a child needs to send deletes for the current pass; sent for a new
/// pass or incarnation (shard → children). The epoch its reports carry comes
/// with each piece of work ([`Stamped`]).
#[derive(Message, Default)]
#[rtype(result = "()")]
pub(super) struct ChildPass {
    pub(super) shard: u8,
    pub(super) tele: ShardTelemetry,
    pub(super) dispatcher: Option<Recipient<DeleteDispatch>>,
}

/// The replay phase starts: open the `replay` span (shard → Replay).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct OpenReplay;

/// A bucket's listing ended: close its `walk` span (shard → Walker).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct CloseWalk {
    pub(super) bucket: String,
    pub(super) ok: bool,
}

/// The pass ended for the shard with `outcome`: close and release every span
/// (shard → children).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct EndPass {
    pub(super) outcome: &'static str,
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Stop;

pub(super) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// A child's link to its shard. Weak: the children live as long as the shard
/// (which stops them in `stopped`), and a strong link would keep the shard
/// alive after its coordinator is gone.
pub(super) struct Parent(pub(super) actix::WeakAddr<ShardActor>);

impl Parent {
    /// Sends `m` to the shard while it is there. do_send: queued even on a
    /// full mailbox; an outcome must never be dropped (it frees a window slot
    /// and may carry a halt).
    pub(super) fn tell<M>(&self, m: M)
    where
        M: Message<Result = ()> + Send + 'static,
        ShardActor: Handler<M>,
    {
        if let Some(shard) = self.0.upgrade() {
            shard.do_send(m);
        }
    }

    /// Runs `f`; a panic is reported to the shard (which restarts) instead
    /// of unwinding through the arbiter.
    pub(super) fn guard(&self, f: impl FnOnce()) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
            self.tell(Crashed(panic_message(p)));
        }
    }
}

impl ChildPass {
    /// Hands the delete to the dispatcher with `reply_to`, under `parent`
    /// span; reports it lost when there is no dispatcher (between passes).
    fn send(
        &self,
        d: SendDelete,
        parent_span: &Span,
        reply_to: Recipient<DeleteDone>,
        to_shard: &Parent,
    ) {
        let Some(dispatcher) = self.dispatcher.as_ref() else {
            to_shard.tell(Outcome {
                ticket: (d.epoch, d.id),
                result: CallResult::transport("no dispatcher; delete not sent"),
                attempts: 0,
                limiter_wait: Duration::ZERO,
            });
            return;
        };
        let c = &d.body;
        let span = telemetry::delete_span(
            parent_span,
            &c.bucket,
            &c.object_path,
            &c.rule_hash.0,
            c.kind,
        );
        self.tele.obs.board(|b| b.delete_sent(self.shard));
        // do_send: queued even when the dispatcher's mailbox is full; the
        // total is bounded by the shards' windows.
        dispatcher.do_send(Dispatch {
            call: d.body,
            ticket: (d.epoch, d.id),
            reply_to,
            span,
        });
    }
}

/// A shard's child: the phase's spans (`S`), its deletes and their outcomes.
pub struct Child<S> {
    pub(super) parent: Parent,
    pub(super) port: Arc<dyn ClusterPort>,
    pub(super) state: ChildPass,
    pub(super) spans: S,
}

/// Replay child: the replay span, replay deletes and the lookups of deferred
/// matches.
pub type Replay = Child<Option<Span>>;

/// Walker child: one `walk` span per bucket, walker deletes and their outcomes.
pub type Walker = Child<HashMap<String, Span>>;

/// The spans a child keeps for its phase.
pub trait PhaseSpans: Default + Unpin + 'static {
    /// The span a delete of `bucket` by `shard` (under `shard_span`) is
    /// sent under.
    fn parent_span(&mut self, shard: u8, shard_span: &Span, bucket: &str) -> Span;
    /// Closes every span with the pass's `outcome`.
    fn end(&mut self, outcome: &'static str);
}

impl PhaseSpans for Option<Span> {
    fn parent_span(&mut self, _: u8, _: &Span, _: &str) -> Span {
        self.clone().unwrap_or_else(Span::none)
    }

    fn end(&mut self, outcome: &'static str) {
        if let Some(span) = self.take() {
            telemetry::record_outcome(&span, outcome);
        }
    }
}

impl PhaseSpans for HashMap<String, Span> {
    fn parent_span(&mut self, shard: u8, shard_span: &Span, bucket: &str) -> Span {
        self.entry(bucket.to_string())
            .or_insert_with_key(|b| telemetry::walk_span(shard_span, shard, b))
            .clone()
    }

    fn end(&mut self, outcome: &'static str) {
        for (_, span) in self.drain() {
            telemetry::record_outcome(&span, outcome);
        }
    }
}

impl<S: PhaseSpans> Actor for Child<S> {
    type Context = Context<Self>;
}

impl<S: PhaseSpans> Handler<ChildPass> for Child<S> {
    type Result = ();
    fn handle(&mut self, m: ChildPass, _: &mut Context<Self>) {
        self.state = m;
        self.spans = S::default();
    }
}

impl<S: PhaseSpans> Handler<SendDelete> for Child<S> {
    type Result = ();
    fn handle(&mut self, d: SendDelete, ctx: &mut Context<Self>) {
        let (shard, shard_span) = (self.state.shard, &self.state.tele.span);
        let parent_span = self.spans.parent_span(shard, shard_span, &d.body.bucket);
        let me = ctx.address().recipient();
        let (state, parent) = (&self.state, &self.parent);
        parent.guard(|| state.send(d, &parent_span, me, parent));
    }
}

impl<S: PhaseSpans> Handler<DeleteDone> for Child<S> {
    type Result = ();
    fn handle(&mut self, o: DeleteDone, _: &mut Context<Self>) {
        self.parent.guard(|| self.parent.tell(o));
    }
}

impl<S: PhaseSpans> Handler<EndPass> for Child<S> {
    type Result = ();
    fn handle(&mut self, m: EndPass, _: &mut Context<Self>) {
        self.spans.end(m.outcome);
        // Release the pass's shard span: a span is exported only once every
        // handle is gone, and a long-lived child holding it would keep the
        // whole pass trace unexported until the next pass.
        self.state.tele.span = Span::none();
        self.state.dispatcher = None;
    }
}

impl<S: PhaseSpans> Handler<Stop> for Child<S> {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<OpenReplay> for Replay {
    type Result = ();
    fn handle(&mut self, _: OpenReplay, _: &mut Context<Self>) {
        self.spans = Some(telemetry::replay_span(
            &self.state.tele.span,
            self.state.shard,
        ));
    }
}

impl Handler<SendLookup> for Replay {
    type Result = ();
    fn handle(&mut self, l: SendLookup, _: &mut Context<Self>) {
        let Some(reply) = self.parent.0.upgrade() else {
            return;
        };
        let port = self.port.clone();
        self.parent.guard(move || {
            let (epoch, id, m) = (l.epoch, l.id, l.body);
            let Some(d) = m.lookup.as_ref() else {
                let body = LookupAnswer {
                    entry: Ok(None),
                    folder: None,
                };
                reply.do_send(LookupDone { epoch, id, body });
                return;
            };
            let entry = port.lookup(&d.directory, &d.name);
            let folder = d.folder().map(|(dir, name)| port.lookup(&dir, &name));
            // I/O on the runtime pool; the answer comes back by message
            // (do_send: a lost answer would wedge the window).
            // The shard's state machine is pure: it takes the reasons as text.
            tokio::spawn(async move {
                let entry = entry.await.map_err(|e| e.to_string());
                let folder = futures::future::OptionFuture::from(folder).await;
                let folder = folder.map(|f| f.map_err(|e| e.to_string()));
                let body = LookupAnswer { entry, folder };
                reply.do_send(LookupDone { epoch, id, body });
            });
        });
    }
}

impl Handler<SendCheck> for Replay {
    type Result = ();
    fn handle(&mut self, c: SendCheck, _: &mut Context<Self>) {
        let Some(reply) = self.parent.0.upgrade() else {
            return;
        };
        let port = self.port.clone();
        self.parent.guard(move || {
            let (epoch, id, check) = (c.epoch, c.id, c.body);
            let root = port.buckets_root();
            let bucket = check.request.bucket.clone();
            // A lost-looking answer is settled only when no filer's store
            // still holds the entry: after a filer crash a store of its own
            // can keep an entry its peers and the gateway no longer see
            // (docs/meta-log.md#filer-crash).
            let confirm = matches!(check.purpose, Purpose::Confirm(_));
            let reads: Vec<_> = check
                .probes()
                .iter()
                .map(|p| {
                    let dir = p.full_dir(&root, &bucket);
                    match p {
                        Probe::Lookup { name, .. } if confirm => {
                            port.lookup_on_every_store(&dir, name)
                        }
                        Probe::Lookup { name, .. } => port
                            .lookup(&dir, name)
                            .map(|r| r.map(|e| e.into_iter().collect()))
                            .boxed(),
                        Probe::List { .. } if confirm => port.list_dir_on_every_store(&dir),
                        Probe::List { .. } => port.list_dir(&dir),
                    }
                })
                .collect();
            // I/O on the runtime pool; the answer comes back by message
            // (do_send: a lost answer would wedge the window).
            tokio::spawn(async move {
                let body = futures::future::join_all(reads)
                    .await
                    .into_iter()
                    .map(|r| r.map_err(|e| e.to_string()))
                    .collect();
                reply.do_send(CheckDone { epoch, id, body });
            });
        });
    }
}

impl Handler<CloseWalk> for Walker {
    type Result = ();
    fn handle(&mut self, m: CloseWalk, _: &mut Context<Self>) {
        if let Some(span) = self.spans.remove(&m.bucket) {
            telemetry::record_outcome(&span, if m.ok { "completed" } else { "failed" });
        }
    }
}
