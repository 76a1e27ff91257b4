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
use crate::engine::journal::{JournalEntry, JournalSpool};
use crate::engine::reclaim::{PlacedByBucket, merge_placed};
use crate::engine::{CallResult, RuleHash, shard_id};
use crate::engine::{SHARD_COUNT, Snapshot};
use crate::pass::actors::{BeginPass, ShardActor, ShardTelemetry};
use crate::pass::dispatch::{DeleteDispatcher, DeletePort, Gate, Limiter, Record};
use crate::pass::observe::PassObserver;
use crate::pass::plan::{PassPlan, RuleChanges, live_actions};
use crate::pass::ports::{ClusterError, ClusterPort};
use crate::pass::report::{PassResult, ShardOutcome, ShardReport, ShardResult};
use crate::pass::retry::{RetryPolicy, drain_bound};
use crate::pass::shard_plan::plan_shard;
use crate::pass::{lock, reclaim};
use crate::status::RunOutcome;
use crate::telemetry;

use crate::pass::driver::Driver;
use crate::pass::options::{PassOptions, StopSignal};
use crate::pass::prepare::{Prepared, prepare};
use crate::pass::records::{JOURNAL_PART_BYTES, settle_caps, write_journal, write_journal_part};

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
    /// A coordinator over a cluster and a delete port (metrics go to a
    /// private registry nobody reads).
    pub fn new(port: Arc<dyn ClusterPort>, deletes: Arc<dyn DeletePort<DeleteRequest>>) -> Self {
        Coordinator::with_observer(port, deletes, PassObserver::default())
    }

    /// A coordinator that reports to `obs` (metrics, status board).
    pub fn with_observer(
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
        let (changes_tx, changes_rx) = watch::channel(Arc::new(RuleChanges::default()));
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
        // The deletion journal (docs/filer-layout.md#journal): every delete
        // sent, with its final outcome, per shard, written in parts of at
        // most JOURNAL_PART_BYTES as they fill (a pass holds one unfinished
        // part per shard, docs/due-index.md#memory) and the rest after the
        // drain. A dry run sends nothing and writes no journal.
        let rule_ids: BTreeMap<(String, RuleHash), String> = p
            .plan
            .recovery
            .actions()
            .map(|a| ((a.bucket().to_string(), a.rule_hash()), a.rule().id.clone()))
            .collect();
        // The spool, and the writes of the parts it filled.
        let journal: Journal = Arc::new(Mutex::new(new_journal()));
        let (jbook, jport, run_id) = (journal.clone(), self.port.clone(), opts.run_id.clone());
        let record: Record<DeleteRequest> =
            Arc::new(move |req: &DeleteRequest, result: &CallResult| {
                let e = JournalEntry {
                    ts_ns: crate::clock::wall_ns(),
                    run_id: run_id.clone(),
                    bucket: req.bucket.clone(),
                    key: req.object_path.clone(),
                    version_id: req.version_id.clone(),
                    rule_id: rule_ids
                        .get(&(req.bucket.clone(), req.rule_hash))
                        .cloned()
                        .unwrap_or_default(),
                    rule_hash: req.rule_hash.to_hex(),
                    kind: req.kind.as_str().to_string(),
                    outcome: result.outcome.label().to_string(),
                    reason: result.reason.clone(),
                };
                let (spool, writes) = &mut *lock(&jbook);
                if let Some(part) = spool.push(shard_id(&req.bucket, &req.object_path), &e) {
                    writes.push(tokio::spawn(write_journal_part(&*jport, &run_id, part)));
                }
            });
        // One "stop dispatching" flag for both causes: shutdown and
        // `pass.max_runtime`. Seeded with a stop already requested, so a pass
        // started during shutdown sends nothing.
        let (halt_tx, halt_rx) = watch::channel(opts.stop.current());
        let dispatcher = DeleteDispatcher::new(
            self.deletes.clone(),
            limiter,
            s.dispatch.max_in_flight,
            policy,
            opts.dry_run,
        )
        .with_stop(StopSignal::from(halt_rx.clone()))
        .with_gate(gate)
        .with_admit(admit)
        .with_record(record)
        .one_at_a_time(Arc::new(|r: &DeleteRequest| {
            format!("{}/{}", r.bucket, r.object_path)
        }))
        .start();
        let refresh = s.pass.config_refresh;
        let watcher = (!refresh.is_zero()).then(|| {
            tokio::spawn(watch_configs(
                self.port.clone(),
                p.plan.clone(),
                refresh,
                changes_tx,
            ))
        });
        for e in &p.bucket_errors {
            self.obs.metrics.bucket_config_error(&e.bucket, true);
        }
        for b in &p.buckets {
            self.obs.metrics.bucket_config_error(b, false);
        }
        let window = s.dispatch.max_in_flight_per_shard;
        let mut shards = BTreeMap::new();
        let mut begins = Vec::new();
        let mut failed = Vec::new();
        for (shard, cursor) in std::mem::take(&mut p.cursors) {
            let Some(addr) = self.shards.get(&shard).cloned() else {
                let why = format!("shard {shard} does not exist (shards are 0..{SHARD_COUNT})");
                failed.push((shard, why));
                continue;
            };
            match cursor {
                Ok(persisted) => {
                    let shard_plan = plan_shard(&p.plan, persisted.as_ref());
                    let shard_span = telemetry::shard_span(&span, shard);
                    let tele = ShardTelemetry {
                        span: shard_span.clone(),
                        obs: self.obs.clone(),
                    };
                    begins.push((
                        addr.clone(),
                        BeginPass {
                            plan: p.plan.clone(),
                            persisted,
                            window,
                            dispatcher: dispatcher.clone().recipient(),
                            tele,
                        },
                    ));
                    shards.insert(shard, (addr, shard_plan, shard_span));
                }
                Err(e) => failed.push((shard, e.to_string())),
            }
        }
        // Outstanding work of every shard: its window plus the event or
        // batch being taken in.
        let outstanding = shards.len().saturating_mul(window.saturating_mul(2));
        let drain_bound = drain_bound(
            &policy,
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
        tokio::spawn(
            async move {
                let (s, dry_run) = (&opts.settings, opts.dry_run);
                let (stop, max_runtime) = (opts.stop.clone(), s.pass.max_runtime);
                let trigger = tokio::spawn(async move {
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
                    let _ = halt_tx.send(Some(reason));
                    // Keep the sender alive so receivers see the value.
                    std::future::pending::<()>().await;
                });
                let (mut results, error, walk_cut, replay) = driver.run(started, halt_rx.clone()).await;
                trigger.abort();
                if let Some(w) = watcher {
                    w.abort();
                }
                let truncated = halt_rx.borrow().clone().or(walk_cut);
                let limits = s.safety.cap_limits();
                let held = settle_caps(&*port, &caps, limits, &p.approved, &p.released, dry_run).await;
                let (spool, written) = std::mem::replace(&mut *lock(&journal), new_journal());
                if !dry_run {
                    let rest = spool.finish();
                    write_journal(&*port, &opts.run_id, rest, written, s.journal.retention).await;
                }
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
                let reclaim = reclaim::after_pass(
                    &*port, &s.reclaim, &placed, dry_run, stopped, &opts.stop,
                )
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
                };
                let (outcome, m) = (result.outcome(), &obs.metrics);
                for r in &result.shards {
                    let (rep, c) = (&r.report, &r.report.counters);
                    let o = rep.outcome.in_pass(result.truncated.is_some());
                    m.events_scanned(rep.shard, c.events_scanned);
                    m.skipped_no_mtime(rep.shard, c.skipped_no_mtime);
                    for ((kind, decision), n) in &c.decisions {
                        m.matched_n(*kind, *decision, *n);
                    }
                    let deletes = c.deletes.total();
                    m.shard_run_finished(rep.shard, o, r.duration, c.events_scanned, deletes);
                    m.shard_halted(rep.shard, rep.outcome == ShardOutcome::Halted);
                    for (_, reason) in &rep.recovery {
                        m.recovered(reason.as_str());
                    }
                    obs.board(|b| b.shard_finished(rep.shard, o));
                }
                let read = &result.replay;
                m.replay_read(read.events_read, read.ranges.len(), read.span_ns());
                let held = result.held.iter();
                m.held_buckets(held.map(|h| (h.bucket.as_str(), h.would_delete.saturating_sub(h.cap))));
                m.freed(&result.freed());
                if let Some(r) = &result.reclaim {
                    m.collections(&r.collections);
                }
                m.pass_finished(outcome, crate::clock::wall_ns());
                telemetry::record_outcome(&pass_span, outcome.as_str());
                result
            }
            .instrument(span),
        )
    }
}

/// The pass's journal spool and the writes of the parts it filled.
type Journal = Arc<Mutex<(JournalSpool, Vec<tokio::task::JoinHandle<()>>)>>;

fn new_journal() -> (JournalSpool, Vec<tokio::task::JoinHandle<()>>) {
    (JournalSpool::new(JOURNAL_PART_BYTES), Vec::new())
}

/// Re-reads the buckets' lifecycle configurations every `every` while the
/// pass runs and publishes how they differ from the pass's snapshot.
///
/// A periodic re-read rather than the bucket entry's meta-log update: the
/// walk phase has no subscription open, and a replay that is catching up
/// reads events hours or days old, so the update would reach it only at the
/// end of the pass. One listing of the buckets directory per interval is
/// cheap next to a pass's deletes. A failed re-read keeps what was known
/// (docs/lifecycle-config.md#changes-during-a-pass).
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
