//! The Coordinator actor, started once per process and sent one [`RunPass`]
//! per pass. When it starts it starts the [`SHARD_COUNT`] supervised
//! [`ShardActor`]s, which live as long as it does. For each pass it takes one
//! `now` and one consistent snapshot ([`crate::pass::prepare`]), owns the
//! shared rate limiter and the [`DeleteDispatcher`], hands each selected
//! shard its per-pass state ([`BeginPass`]), lets the
//! driver (`crate::pass::driver`) run the phases from a
//! `tokio::spawn`ed task, stops dispatching early on a [`StopSignal`] or
//! `pass.max_runtime` (the pass is then `truncated`), writes the journal and
//! the holds ([`crate::pass::records`]) and reports to a [`PassObserver`].
//! I/O stays in Send futures on the runtime pool; actors are created only
//! here, on the System arbiter.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::watch;
use tracing::{Instrument as _, Span};

use crate::engine::DeleteRequest;
use crate::engine::reclaim::{PlacedByBucket, merge_placed};
use crate::engine::safety::CapBook;
use crate::engine::{SHARD_COUNT, Snapshot};
use crate::pass::actors::{BeginPass, ShardActor, ShardTelemetry};
use crate::pass::dispatch::{DeleteDispatcher, DeletePort, Gate, Limiter};
use crate::pass::observe::PassObserver;
use crate::pass::plan::{PassPlan, RuleChanges, live_actions};
use crate::pass::ports::{ClusterError, ClusterPort};
use crate::pass::report::{PassResult, ShardReport, ShardResult};
use crate::pass::retry::{RetryPolicy, drain_bound};
use crate::pass::shard_plan::{ShardPlan, plan_shard};
use crate::pass::{lock, reclaim};
use crate::status::RunOutcome;
use crate::telemetry;

use crate::pass::driver::Driver;
use crate::pass::options::{PassOptions, StopSignal};
use crate::pass::prepare::{Prepared, prepare};
use crate::pass::records::{PassJournal, settle_caps};

/// Runs a pass. Answered with the pass result, or `Err` when the pass could
/// not start at all (cluster unreachable, bucket listing failed). The
/// coordinator lives as long as the process: `run-once` sends one `RunPass`,
/// `serve` one per scheduled or triggered pass (never two at once).
#[derive(Message)]
#[rtype(result = "Result<PassResult, PassError>")]
pub struct RunPass(pub PassOptions);

/// Why a pass could not run to its report. The cluster's error is kept whole,
/// so a TLS cause in it is found without dialling again
/// (docs/tls.md#how-failures-surface).
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// Its preparation could not read the cluster (membership, buckets,
    /// cursors, controls).
    #[error(transparent)]
    Prepare(#[from] ClusterError),
    /// A task of the pass panicked or was cancelled.
    #[error("pass {stage} task failed: {source}")]
    Task {
        stage: &'static str,
        source: tokio::task::JoinError,
    },
}

/// Answers the addresses of the coordinator's shard actors (the same ones for
/// every pass), by shard.
#[derive(Message)]
#[rtype(result = "BTreeMap<u8, Addr<ShardActor>>")]
pub struct GetShards;

/// Owns the shard actors (for the whole process) and each pass's limiter and
/// dispatcher.
pub struct Coordinator {
    port: Arc<dyn ClusterPort>,
    deletes: Arc<dyn DeletePort<DeleteRequest>>,
    obs: PassObserver,
    /// Started in `started`; a shard's Supervisor keeps its address across
    /// restarts, so every pass reaches the same actor.
    shards: BTreeMap<u8, Addr<ShardActor>>,
}

impl Coordinator {
    /// A coordinator over a cluster and a delete port that reports to `obs`
    /// (metrics, status board).
    pub fn new(
        port: Arc<dyn ClusterPort>,
        deletes: Arc<dyn DeletePort<DeleteRequest>>,
        obs: PassObserver,
    ) -> Self {
        Coordinator {
            port,
            deletes,
            obs,
            shards: BTreeMap::new(),
        }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        for shard in (0..SHARD_COUNT).filter_map(|s| u8::try_from(s).ok()) {
            let port = self.port.clone();
            let addr = Supervisor::start(move |_| ShardActor::new(shard, port));
            self.shards.insert(shard, addr);
        }
    }
}

impl Handler<GetShards> for Coordinator {
    type Result = MessageResult<GetShards>;
    fn handle(&mut self, _: GetShards, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.shards.clone())
    }
}

impl Handler<RunPass> for Coordinator {
    type Result = ResponseActFuture<Self, Result<PassResult, PassError>>;

    fn handle(&mut self, msg: RunPass, _: &mut Context<Self>) -> Self::Result {
        let opts = msg.0;
        let started = Instant::now();
        let port = self.port.clone();
        let prep_opts = opts.clone();
        let span = telemetry::pass_span(&opts.run_id);
        let prep_span = span.clone();
        let prep = async move {
            tokio::spawn(async move { prepare(port, &prep_opts).await }.instrument(prep_span)).await
        };
        Box::pin(prep.into_actor(self).then(move |joined, act, _ctx| {
            let failed_span = span.clone();
            let run = match joined {
                Ok(Ok(p)) => Ok(act.start_pass(opts, p, started, span)),
                Ok(Err(e)) => Err(PassError::Prepare(e)),
                Err(source) => Err(PassError::Task {
                    stage: "preparation",
                    source,
                }),
            };
            if run.is_err() {
                telemetry::record_outcome(&failed_span, "failed");
                act.obs
                    .metrics
                    .pass_finished(RunOutcome::Failed, crate::clock::wall_ns());
            }
            async move {
                run?.await.map_err(|source| PassError::Task {
                    stage: "driver",
                    source,
                })
            }
            .into_actor(act)
        }))
    }
}

/// What `start_pass` sets up around the dispatcher and its driver needs
/// again once the shards have finished.
struct Dispatch {
    addr: Addr<DeleteDispatcher<DeleteRequest>>,
    policy: RetryPolicy,
    /// Where `watch_configs` publishes configuration changes.
    changes: watch::Sender<Arc<RuleChanges>>,
    /// The per-pass deletion caps the dispatcher admits against.
    caps: Arc<Mutex<CapBook>>,
    journal: PassJournal,
    /// The one "stop dispatching" flag for both causes: shutdown and
    /// `pass.max_runtime`.
    halt: (
        watch::Sender<Option<String>>,
        watch::Receiver<Option<String>>,
    ),
}

/// The shards a pass runs, with what each is sent first, and those it cannot
/// run with why.
#[derive(Default)]
struct Briefed {
    shards: BTreeMap<u8, (Addr<ShardActor>, ShardPlan, Span)>,
    begins: Vec<(Addr<ShardActor>, BeginPass)>,
    failed: Vec<(u8, String)>,
}

impl Coordinator {
    /// Creates the limiter, dispatcher and shards (on this arbiter), then
    /// spawns the driver on the runtime pool.
    fn start_pass(
        &mut self,
        opts: PassOptions,
        mut p: Prepared,
        started: Instant,
        span: Span,
    ) -> tokio::task::JoinHandle<PassResult> {
        let s = &opts.settings;
        let d = self.dispatch(&opts, &mut p);
        let refresh = s.pass.config_refresh;
        let watcher = (!refresh.is_zero()).then(|| {
            let (port, plan) = (self.port.clone(), p.plan.clone());
            tokio::spawn(watch_configs(port, plan, refresh, d.changes))
        });
        for e in &p.bucket_errors {
            self.obs.metrics.bucket_config_error(&e.bucket, true);
        }
        for b in &p.buckets {
            self.obs.metrics.bucket_config_error(b, false);
        }
        let window = s.dispatch.max_in_flight_per_shard;
        let Briefed {
            shards,
            begins,
            failed,
        } = self.brief_shards(&mut p, &d.addr, window, &span);
        // Outstanding work of every shard: its window plus the event or
        // batch being taken in.
        let outstanding = shards.len().saturating_mul(window.saturating_mul(2));
        let drain_bound = drain_bound(
            &d.policy,
            s.cluster.filer_call_timeout,
            outstanding,
            s.dispatch.max_in_flight,
            s.rate.effective().map(|(rate, _)| rate),
        );
        let driver = Driver {
            port: self.port.clone(),
            plan: p.plan.clone(),
            shards,
            begins,
            dry_run: opts.dry_run,
            obs: self.obs.clone(),
            drain_bound,
            walk_deadline: s.pass.walk_budget().map(|b| started + b),
        };
        self.obs.paused(&p.paused);
        let (port, obs, pass_span) = (self.port.clone(), self.obs.clone(), span.clone());
        let (halt_tx, halt_rx) = d.halt;
        let (caps, journal) = (d.caps, d.journal);
        tokio::spawn(
            async move {
                let (s, dry_run) = (&opts.settings, opts.dry_run);
                let trigger = stop_trigger(opts.stop.clone(), s.pass.max_runtime, halt_tx);
                let (mut results, error, walk_cut, replay) =
                    driver.run(started, halt_rx.clone()).await;
                trigger.abort();
                if let Some(w) = watcher {
                    w.abort();
                }
                let truncated = halt_rx.borrow().clone().or(walk_cut);
                let limits = s.safety.cap_limits();
                let held =
                    settle_caps(&*port, &caps, limits, &p.approved, &p.released, dry_run).await;
                journal.finish(dry_run, s.journal.retention).await;
                for (shard, e) in failed {
                    results.push(ShardResult {
                        report: ShardReport::failed(shard, e),
                        duration: started.elapsed(),
                        cursor: None,
                        saved: false,
                    });
                }
                results.sort_by_key(|r| r.report.shard);
                // After every delete was answered (docs/reclaimed-space.md).
                let mut placed = PlacedByBucket::new();
                for r in &results {
                    merge_placed(&mut placed, &r.report.counters.placed);
                }
                let stopped = halt_rx.borrow().is_some();
                let reclaim =
                    reclaim::after_pass(&*port, &s.reclaim, &placed, dry_run, stopped, &opts.stop)
                        .await;
                let result = PassResult {
                    now: opts.now,
                    buckets: p.buckets,
                    bucket_errors: p.bucket_errors,
                    unknown_buckets: p.unknown_buckets,
                    paused: p.paused,
                    held,
                    approved: p.approved,
                    shards: results,
                    error,
                    truncated,
                    duration: started.elapsed(),
                    replay,
                    reclaim,
                    go_worker: p.go_activity,
                };
                obs.pass_ended(&result);
                telemetry::record_outcome(&pass_span, result.outcome().as_str());
                result
            }
            .instrument(span),
        )
    }

    /// The pass's dispatcher, with its limiter, retry policy, the gate of
    /// configuration changes, the deletion cap, the journal and the stop flag.
    fn dispatch(&self, opts: &PassOptions, p: &mut Prepared) -> Dispatch {
        let s = &opts.settings;
        let limiter = s
            .rate
            .effective()
            .map(|(rate, burst)| Arc::new(Limiter::new(rate, burst)));
        let policy = RetryPolicy {
            attempts: s.dispatch.retry_attempts,
            initial: s.dispatch.retry_initial_backoff,
            max: s.dispatch.retry_max_backoff,
            call_timeout: s.dispatch.call_timeout,
        };
        // Configuration changes during the pass
        // (docs/lifecycle-config.md#changes-during-a-pass): `watch_configs`
        // publishes them, the dispatcher's gate withdraws every delete whose
        // rule left its bucket's configuration, right before it would be sent.
        let (changes, changes_rx) = watch::channel(Arc::new(RuleChanges::default()));
        let gate: Gate<DeleteRequest> = Arc::new(move |req: &DeleteRequest| {
            let changes = changes_rx.borrow();
            (!changes.still_due(&req.bucket, req.rule_hash, req.kind)).then(|| {
                format!(
                    "the lifecycle configuration of bucket {} changed during the pass; \
                     rule {} ({}) is no longer in it",
                    req.bucket, req.rule_hash, req.kind
                )
            })
        });
        // The deletion cap: each delete is admitted once, right before it
        // would be sent; past a bucket's cap it is held (withdrawn: pending,
        // never a halt), so the bucket stops at exactly its cap.
        let caps = Arc::new(Mutex::new(std::mem::take(&mut p.caps)));
        let book = caps.clone();
        let admit: Gate<DeleteRequest> =
            Arc::new(move |req: &DeleteRequest| lock(&book).admit(&req.bucket));
        let journal = PassJournal::new(self.port.clone(), &opts.run_id);
        // Seeded with a stop already requested, so a pass started during
        // shutdown sends nothing.
        let (halt_tx, halt_rx) = watch::channel(opts.stop.current());
        let addr = DeleteDispatcher::new(
            self.deletes.clone(),
            limiter,
            s.dispatch.max_in_flight,
            policy,
            opts.dry_run,
        )
        .with_stop(StopSignal::from(halt_rx.clone()))
        .with_gate(gate)
        .with_admit(admit)
        .with_record(journal.recorder(&p.plan))
        .one_at_a_time(Arc::new(|r: &DeleteRequest| {
            format!("{}/{}", r.bucket, r.object_path)
        }))
        .start();
        Dispatch {
            addr,
            policy,
            changes,
            caps,
            journal,
            halt: (halt_tx, halt_rx),
        }
    }

    /// Each selected shard's [`BeginPass`] (its plan, persisted cursor,
    /// window, the dispatcher and its span), and the shards that cannot run:
    /// no such shard, or its cursor failed to load.
    fn brief_shards(
        &self,
        p: &mut Prepared,
        dispatcher: &Addr<DeleteDispatcher<DeleteRequest>>,
        window: usize,
        span: &Span,
    ) -> Briefed {
        let mut b = Briefed::default();
        let (shards, begins, failed) = (&mut b.shards, &mut b.begins, &mut b.failed);
        for (shard, cursor) in std::mem::take(&mut p.cursors) {
            let Some(addr) = self.shards.get(&shard).cloned() else {
                let why = format!("shard {shard} does not exist (shards are 0..{SHARD_COUNT})");
                failed.push((shard, why));
                continue;
            };
            match cursor {
                Ok(persisted) => {
                    let shard_plan = plan_shard(&p.plan, persisted.as_ref());
                    let shard_span = telemetry::shard_span(span, shard);
                    let tele = ShardTelemetry {
                        span: shard_span.clone(),
                        obs: self.obs.clone(),
                    };
                    let begin = BeginPass {
                        plan: p.plan.clone(),
                        persisted: persisted.map(Arc::new),
                        window,
                        dispatcher: dispatcher.clone().recipient(),
                        tele,
                    };
                    begins.push((addr.clone(), begin));
                    shards.insert(shard, (addr, shard_plan, shard_span));
                }
                Err(e) => failed.push((shard, e.to_string())),
            }
        }
        b
    }
}

/// Raises the stop flag when `stop` fires or after `max_runtime` (0: never).
fn stop_trigger(
    stop: StopSignal,
    max_runtime: Duration,
    halt: watch::Sender<Option<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let cap = async {
            if max_runtime.is_zero() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(max_runtime).await;
        };
        let reason = tokio::select! {
            r = stop.fired() => r,
            () = cap => format!("pass.max_runtime ({}s) reached", max_runtime.as_secs_f64()),
        };
        let _ = halt.send(Some(reason));
        // Keep the sender alive so receivers see the value.
        std::future::pending::<()>().await;
    })
}

/// Re-reads the buckets' lifecycle configurations every `every` while the
/// pass runs and publishes how they differ from the pass's snapshot; a failed
/// re-read keeps what was known. Why a re-read and not the bucket entry's
/// meta-log update: docs/lifecycle-config.md#changes-during-a-pass.
async fn watch_configs(
    port: Arc<dyn ClusterPort>,
    plan: Arc<PassPlan>,
    every: Duration,
    tx: watch::Sender<Arc<RuleChanges>>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the snapshot was read a moment ago.
    tick.tick().await;
    loop {
        tick.tick().await;
        let scan = match port.buckets().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "re-reading lifecycle configurations failed; keeping the last reading");
                continue;
            }
        };
        let unusable: BTreeSet<String> = scan
            .errors
            .iter()
            .filter(|e| plan.live.contains_key(&e.bucket))
            .map(|e| e.bucket.clone())
            .collect();
        let configs = scan
            .buckets
            .iter()
            .filter(|b| plan.live.contains_key(&b.name) && b.has_rules())
            .map(|b| b.to_config())
            .collect();
        let now = live_actions(&Snapshot::compile(configs, plan.time));
        let changes = RuleChanges::between(&plan.live, &now, &unusable);
        if changes != **tx.borrow() {
            for b in changes.buckets() {
                tracing::info!(
                    bucket = b,
                    "lifecycle configuration changed during the pass; deletes under rules no longer in it are withdrawn"
                );
            }
            tx.send_replace(Arc::new(changes));
        }
    }
}
