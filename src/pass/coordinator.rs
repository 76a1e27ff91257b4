//! The Coordinator actor, started once per process and sent one [`RunPass`]
//! per pass. When it starts it starts the [`SHARD_COUNT`] supervised
//! [`ShardActor`]s, which live as long as it does. For each pass it takes one
//! `now` and one consistent snapshot, owns the shared rate limiter and the
//! [`DeleteDispatcher`], hands each selected shard its per-pass state
//! ([`BeginPass`]), then drives the phases (walk, replay, finish,
//! save) from a `tokio::spawn`ed task that talks to the shards only by message,
//! stops dispatching early on a [`StopSignal`] or `pass.max_runtime` (the pass
//! is then `truncated`), and reports to a [`PassObserver`]. I/O stays in Send
//! futures on the runtime pool; actors are created only here, on the System
//! arbiter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::{FutureExt as _, StreamExt};
use tokio::sync::watch;
use tracing::{Instrument as _, Span};

use crate::config::Settings;
use crate::engine::DeleteRequest;
use crate::engine::cursor::ShardCursor;
use crate::engine::due_index::merge_ranges;
use crate::engine::journal::{self, JournalEntry, JournalPart, JournalSpool};
use crate::engine::resume::{is_after, listing_start};
use crate::engine::safety::{CapBook, Held, HoldRecord, PauseRecord, Selection, grace_decision};
use crate::engine::{CallResult, RuleHash, shard_id};
use crate::engine::{Nanos, SHARD_COUNT, Snapshot, route, walk};
use crate::lifecycle::BucketError;
use crate::pass::actors::{
    BeginPass, Drain, DrainTimedOut, Finish, ListingDone, ReadRanges, ReplayBatch, ShardActor,
    ShardTelemetry, StartReplay, WalkBatch,
};
use crate::pass::dispatch::{DeleteDispatcher, DeletePort, Gate, Record, limiter};
use crate::pass::observe::PassObserver;
use crate::pass::plan::{self, PassPlan, RuleChanges, live_actions};
use crate::pass::ports::ClusterPort;
use crate::pass::report::{PassResult, ReplayRead, ShardOutcome, ShardReport, ShardResult};
use crate::pass::retry::{DRAIN_TIMEOUT, RetryPolicy, drain_bound};
use crate::pass::shard_run::{self, ReplayItem, ShardPlan, WalkRole, plan_shard};
use crate::status::{RunOutcome, ShardPhase};
use crate::telemetry;

/// What a pass is asked to do.
#[derive(Debug, Clone)]
pub struct PassOptions {
    /// The pass's `now` (ns).
    pub now: Nanos,
    /// Shards to run.
    pub shards: Vec<u8>,
    /// Decide and report, delete nothing, save nothing.
    pub dry_run: bool,
    /// Settings (pass.buckets, rates, windows, time…).
    pub settings: Settings,
    /// The pass id (logs, the `pass` span, status page, admin API).
    pub run_id: String,
    /// Stops the pass early (shutdown): dispatching stops, in-flight deletes
    /// drain, cursors are saved and the pass is reported `truncated`.
    pub stop: StopSignal,
}

/// A stop request for a running pass (`serve` sets it on SIGTERM/SIGINT).
/// The default never fires.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Option<watch::Receiver<Option<String>>>);

impl StopSignal {
    /// A signal and the sender that fires it with a reason.
    pub fn new() -> (watch::Sender<Option<String>>, StopSignal) {
        let (tx, rx) = watch::channel(None);
        (tx, StopSignal(Some(rx)))
    }

    /// The reason, when the stop was already requested.
    pub fn current(&self) -> Option<String> {
        self.0.as_ref().and_then(|rx| rx.borrow().clone())
    }

    /// Resolves with the reason once the stop is requested; never when the
    /// sender is gone without firing.
    pub async fn fired(&self) -> String {
        if let Some(rx) = &self.0 {
            let mut rx = rx.clone();
            if let Ok(v) = rx.wait_for(Option::is_some).await {
                return v.clone().unwrap_or_default();
            }
        }
        std::future::pending().await
    }
}

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

/// Everything read before the shards start.
struct Prepared {
    plan: Arc<PassPlan>,
    buckets: Vec<String>,
    bucket_errors: Vec<BucketError>,
    unknown_buckets: Vec<String>,
    paused: Vec<PauseRecord>,
    caps: CapBook,
    approved: Vec<String>,
    released: Vec<String>,
    cursors: BTreeMap<u8, Result<Option<ShardCursor>, String>>,
}

async fn prepare(port: Arc<dyn ClusterPort>, opts: &PassOptions) -> Result<Prepared, String> {
    let s = &opts.settings;
    port.refresh().await?;
    let limits = s.safety.cap_limits();
    let grace = s.safety.rule_change_grace;
    // Approvals matter to the deletion cap and to the rule-change grace.
    let rails = limits.enabled() || !grace.is_zero();
    // Every read below depends on settings only, not on another's answer:
    // they go out together, so a pass starts after the slowest of them, not
    // after their sum (sixteen cursor files alone took ~10 ms one after
    // another on loopback; issue 9's scan rate counts the pass's start).
    // Errors are still taken in the order of the old sequence.
    let (scan, pause_records, earliest, approvals, holds, rule_records, cursors) = futures::join!(
        port.buckets(),
        // Read at every pass start, so a pause made through any instance
        // holds from the next pass on (docs/filer-layout.md#pause-files).
        port.paused(),
        async {
            if s.pass.meta_log_retention.is_zero() {
                port.earliest_available().await
            } else {
                Ok(None)
            }
        },
        async {
            if rails {
                port.approvals().await
            } else {
                Ok(Vec::new())
            }
        },
        // Holds of earlier passes. Read even with the caps off, so turning
        // them off releases the holds.
        port.holds(),
        async {
            if grace.is_zero() {
                Ok(Vec::new())
            } else {
                port.rule_records().await
            }
        },
        futures::future::join_all(opts.shards.iter().map(|&shard| {
            let load = port.load_cursor(shard);
            async move { (shard, load.await) }
        })),
    );
    let scan = scan?;
    // Unreadable pauses fail the pass rather than risk deleting a paused
    // bucket.
    let pause_records = pause_records?;
    let filter: BTreeSet<&str> = s.pass.buckets.iter().map(String::as_str).collect();
    let paused_names: BTreeSet<&str> = pause_records.iter().map(|r| r.bucket.as_str()).collect();
    let selected = |name: &str| filter.is_empty() || filter.contains(name);
    let mut keep = BTreeSet::new();
    let mut bucket_errors = Vec::new();
    let mut unknown_buckets = Vec::new();
    // A name in `pass.buckets` (or `--buckets`) that the cluster does not
    // have is a configuration error of its own, reported like a broken
    // document, so a typo does not pass for a quiet bucket; the other
    // buckets go on.
    let listed = scan.names();
    for name in &filter {
        if let Err(e) = crate::engine::names::check_exists(name, listed.iter().copied()) {
            unknown_buckets.push(name.to_string());
            bucket_errors.push(BucketError {
                bucket: name.to_string(),
                reason: format!("named by pass.buckets or --buckets, but {e}"),
            });
        }
    }
    for e in scan.errors {
        keep.insert(e.bucket.clone());
        if selected(&e.bucket) {
            bucket_errors.push(e);
        }
    }
    let mut configs = Vec::new();
    let mut paused = Vec::new();
    for b in &scan.buckets {
        let sel = Selection::of(
            &b.name,
            filter.iter().copied(),
            paused_names.iter().copied(),
        );
        if sel.keeps_state() {
            keep.insert(b.name.clone());
            if sel == Selection::Paused
                && let Some(r) = pause_records.iter().find(|r| r.bucket == b.name)
            {
                paused.push(r.clone());
            }
            continue;
        }
        if b.has_rules() {
            configs.push(b.to_config());
        }
    }
    let time = s.time.time_config();
    let snap = Snapshot::compile(configs, time);
    let earliest = earliest?;
    let wall = crate::clock::wall_ns();
    let pass_plan = PassPlan::build(&snap, opts.now, wall, earliest, &s.pass, keep);
    let buckets: Vec<String> = pass_plan.buckets().map(str::to_string).collect();
    // The deletion cap (docs/design-deviations.md#safety-cap): approvals and,
    // for a fractional cap, one count of every enforced bucket. Approvals
    // are empty unless `rails` (not read then).
    let approved: Vec<String> = approvals?
        .into_iter()
        .map(|a| a.bucket)
        .filter(|b| buckets.contains(b))
        .collect();
    let mut counts = Vec::new();
    if rails && limits.max_fraction > 0.0 {
        for b in &buckets {
            match port.count_bucket(b).await {
                Ok(n) => counts.push((b.clone(), n)),
                // Uncounted: only the absolute cap applies to it.
                Err(e) => {
                    tracing::warn!(bucket = b, error = %e, "counting the bucket for safety.max_delete_fraction failed")
                }
            }
        }
    }
    // A pass over some shards only sends its shards' share of each cap.
    let mut caps = CapBook::new(
        limits,
        counts.iter().map(|(b, n)| (b.as_str(), *n)),
        approved.iter().map(String::as_str),
    )
    .for_shards(&opts.shards);
    let holds: Vec<_> = holds?
        .into_iter()
        .filter(|h| buckets.contains(&h.bucket))
        .collect();
    let released = caps.carry_holds(&holds);
    // The rule-change grace (docs/design-deviations.md#rule-change-grace):
    // a bucket whose lifecycle document changed less than the grace ago is
    // evaluated dry.
    if !grace.is_zero() {
        let records = rule_records?;
        let seen = opts.now.min(wall);
        for info in scan.buckets.iter().filter(|b| buckets.contains(&b.name)) {
            let doc = info.lifecycle_xml.as_deref().unwrap_or_default();
            let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(doc));
            let prev = records.iter().find(|r| r.bucket == info.name);
            let d = grace_decision(
                &info.name,
                prev,
                !records.is_empty(),
                &hash,
                seen,
                opts.now,
                grace,
                approved.contains(&info.name),
            );
            if let Some((changed, until)) = d.in_grace {
                caps.grace(&info.name, changed, until);
            }
            if let Some(rec) = d.write
                && !opts.dry_run
            {
                port.put_rule_record(rec, wall).await?;
            }
        }
    }
    let cursors: BTreeMap<_, _> = cursors.into_iter().collect();
    Ok(Prepared {
        plan: Arc::new(pass_plan),
        buckets,
        bucket_errors,
        unknown_buckets,
        paused,
        caps,
        approved,
        released,
        cursors,
    })
}

/// Runs a pass. Answered with the pass result, or `Err` when the pass could
/// not start at all (cluster unreachable, bucket listing failed). The
/// coordinator lives as long as the process: `run-once` sends one `RunPass`,
/// `serve` one per scheduled or triggered pass (never two at once).
#[derive(Message)]
#[rtype(result = "Result<PassResult, String>")]
pub struct RunPass(pub PassOptions);

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
        for shard in 0..SHARD_COUNT {
            let Ok(shard) = u8::try_from(shard) else {
                continue;
            };
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
    type Result = ResponseActFuture<Self, Result<PassResult, String>>;

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
            let prepared = match joined {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(format!("pass preparation task failed: {e}")),
            };
            let fut: std::pin::Pin<Box<dyn Future<Output = Result<PassResult, String>>>> =
                match prepared {
                    Err(e) => {
                        telemetry::record_outcome(&span, "failed");
                        act.obs
                            .metrics
                            .pass_finished(RunOutcome::Failed, crate::clock::wall_ns());
                        Box::pin(async move { Err(e) })
                    }
                    Ok(p) => {
                        let run = act.start_pass(opts, p, started, span);
                        Box::pin(async move {
                            run.await
                                .map_err(|e| format!("pass driver task failed: {e}"))
                        })
                    }
                };
            fut.into_actor(act)
        }))
    }
}

impl Coordinator {
    /// Creates the limiter, dispatcher and shards (on this arbiter), then
    /// spawns the driver on the runtime pool.
    fn start_pass(
        &mut self,
        opts: PassOptions,
        p: Prepared,
        started: Instant,
        span: Span,
    ) -> tokio::task::JoinHandle<PassResult> {
        let s = &opts.settings;
        let limiter = s
            .rate
            .effective()
            .map(|(rate, burst)| Arc::new(limiter(rate, burst)));
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
        let caps = Arc::new(std::sync::Mutex::new(p.caps));
        let book = caps.clone();
        let admit: Gate<DeleteRequest> = Arc::new(move |req: &DeleteRequest| {
            book.lock()
                .unwrap_or_else(|e| e.into_inner())
                .admit(&req.bucket)
        });
        // The deletion journal (docs/filer-layout.md#journal): every delete
        // sent, with its final outcome, per shard, written in parts of at
        // most JOURNAL_PART_BYTES as they fill (a pass holds one unfinished
        // part per shard, docs/due-index.md#memory) and the rest after the
        // drain. A dry run sends nothing and writes no journal.
        let rule_ids: Arc<BTreeMap<(String, RuleHash), String>> = Arc::new(
            p.plan
                .recovery
                .buckets()
                .iter()
                .flat_map(|b| b.actions().iter())
                .map(|a| ((a.bucket().to_string(), a.rule_hash()), a.rule().id.clone()))
                .collect(),
        );
        let journal = Arc::new(std::sync::Mutex::new(JournalSpool::new(JOURNAL_PART_BYTES)));
        let jbook = journal.clone();
        let jwrites: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let jwrites_rec = jwrites.clone();
        let jport = self.port.clone();
        let jdry = opts.dry_run;
        let run_id = opts.run_id.clone();
        let run_id_rec = opts.run_id.clone();
        let record: Record<DeleteRequest> =
            Arc::new(move |req: &DeleteRequest, result: &CallResult| {
                if jdry {
                    return;
                }
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
                let full = jbook
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(shard_id(&req.bucket, &req.object_path), &e);
                if let Some(part) = full {
                    let write = write_journal_part(&*jport, &run_id_rec, part);
                    jwrites_rec
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(tokio::spawn(write));
                }
            });
        let dispatcher = DeleteDispatcher::new(
            self.deletes.clone(),
            limiter,
            s.dispatch.max_in_flight,
            policy,
            opts.dry_run,
        )
        .with_gate(gate)
        .with_admit(admit)
        .with_record(record)
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
        for (shard, cursor) in p.cursors {
            let Some(addr) = self.shards.get(&shard).cloned() else {
                failed.push((
                    shard,
                    format!(
                        "shard {shard} does not exist (shards are 0..{})",
                        SHARD_COUNT
                    ),
                ));
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
                Err(e) => failed.push((shard, e)),
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
            plan: p.plan,
            shards,
            begins,
            dry_run: opts.dry_run,
            obs: self.obs.clone(),
            drain_bound,
            walk_deadline: s.pass.walk_budget().map(|b| started + b),
        };
        let buckets = p.buckets;
        let bucket_errors = p.bucket_errors;
        let unknown_buckets = p.unknown_buckets;
        let paused = p.paused;
        self.obs.paused(&paused);
        let approved = p.approved;
        let released = p.released;
        let limits = s.safety.cap_limits();
        let journal_retention = s.journal.retention;
        let run_id_j = opts.run_id.clone();
        let port = self.port.clone();
        let dry_run = opts.dry_run;
        let stop = opts.stop.clone();
        let max_runtime = s.pass.max_runtime;
        let obs = self.obs.clone();
        let pass_span = span.clone();
        tokio::spawn(
            async move {
                // One "stop dispatching" flag for both causes: shutdown and
                // `pass.max_runtime`.
                // Seeded with a stop already requested, so a pass started during
                // shutdown sends nothing.
                let (halt_tx, halt_rx) = watch::channel(stop.current());
                let trigger = tokio::spawn(async move {
                    let cap = async {
                        if max_runtime.is_zero() {
                            std::future::pending::<()>().await;
                        }
                        tokio::time::sleep(max_runtime).await;
                    };
                    let reason = tokio::select! {
                        r = stop.fired() => r,
                        () = cap => format!("pass.max_runtime ({}) reached", humantime(max_runtime)),
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
                let held = settle_caps(&*port, &caps, limits, &approved, &released, dry_run).await;
                let rest = std::mem::replace(
                    &mut *journal.lock().unwrap_or_else(|e| e.into_inner()),
                    JournalSpool::new(JOURNAL_PART_BYTES),
                )
                .finish();
                let written = std::mem::take(&mut *jwrites.lock().unwrap_or_else(|e| e.into_inner()));
                if !dry_run {
                    write_journal(&*port, &run_id_j, rest, written, journal_retention).await;
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
                let result = PassResult {
                    now: opts.now,
                    buckets,
                    bucket_errors,
                    unknown_buckets,
                    paused,
                    held,
                    approved,
                    shards: results,
                    error,
                    truncated,
                    duration: started.elapsed(),
                    replay,
                };
                let outcome = result.outcome();
                for r in &result.shards {
                    let rep = &r.report;
                    let o = rep.outcome.in_pass(result.truncated.is_some());
                    obs.metrics.events_scanned(rep.shard, rep.counters.events_scanned);
                    obs.metrics
                        .skipped_no_mtime(rep.shard, rep.counters.skipped_no_mtime);
                    for ((kind, decision), n) in &rep.counters.decisions {
                        obs.metrics.matched_n(*kind, *decision, *n);
                    }
                    obs.metrics.shard_run_finished(
                        rep.shard,
                        o,
                        r.duration,
                        rep.counters.events_scanned,
                        rep.counters.deletes.total(),
                    );
                    obs.metrics
                        .shard_halted(rep.shard, rep.outcome == ShardOutcome::Halted);
                    obs.board(|b| b.shard_finished(rep.shard, o));
                }
                obs.metrics.replay_read(
                    result.replay.events_read,
                    result.replay.ranges.len(),
                    result.replay.span_ns(),
                );
                obs.metrics.held_buckets(
                    result
                        .held
                        .iter()
                        .map(|h| (h.bucket.as_str(), h.would_delete.saturating_sub(h.cap))),
                );
                obs.metrics
                    .pass_finished(outcome, crate::clock::wall_ns());
                telemetry::record_outcome(&pass_span, outcome.as_str());
                result
            }
            .instrument(span),
        )
    }
}

/// Largest journal batch file; a shard's batch beyond it is split into
/// numbered parts so every file stays a small inline filer entry.
const JOURNAL_PART_BYTES: usize = 1 << 20;

/// Stores one part of a shard's journal batch. A failed write is logged,
/// never fails the pass: the deletes happened, and metrics and logs still
/// record them.
fn write_journal_part(
    port: &dyn ClusterPort,
    run_id: &str,
    part: JournalPart,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let now = crate::clock::wall_ns();
    let name = journal::part_name(run_id, part.shard, part.part);
    let shard = part.shard;
    let write = port.write_journal(&journal::day_dir(now), &name, part.bytes, now);
    async move {
        if let Err(e) = write.await {
            tracing::error!(shard, error = %e, "writing the deletion journal failed");
        }
    }
}

/// Finishes the pass's journal: waits for the parts written during the pass,
/// writes each shard's last part, then drops the day directories past
/// `journal.retention`.
async fn write_journal(
    port: &dyn ClusterPort,
    run_id: &str,
    rest: Vec<JournalPart>,
    written: Vec<tokio::task::JoinHandle<()>>,
    retention: Duration,
) {
    for w in written {
        let _ = w.await;
    }
    for part in rest {
        write_journal_part(port, run_id, part).await;
    }
    let now = crate::clock::wall_ns();
    if retention.is_zero() {
        return;
    }
    match port.journal_days().await {
        Ok(days) => {
            for d in journal::expired_days(days.iter().map(String::as_str), now, retention) {
                if let Err(e) = port.drop_journal_day(&d).await {
                    tracing::warn!(day = d, error = %e, "removing an expired journal day failed");
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "listing the journal for retention failed"),
    }
}

/// After the pass: the buckets the cap held, each with the size of the
/// bucket (counted now when it was not counted at the start: what is left
/// plus what the pass sent). Unless a dry run (which changes nothing): newly
/// held buckets get a hold file, so later passes send nothing for them until
/// `approve`; used approvals and holds that no longer apply are removed
/// (docs/filer-layout.md#approval-files).
async fn settle_caps(
    port: &dyn ClusterPort,
    caps: &std::sync::Mutex<CapBook>,
    limits: crate::engine::safety::CapLimits,
    approved: &[String],
    released: &[String],
    dry_run: bool,
) -> Vec<Held> {
    let mut held = caps.lock().unwrap_or_else(|e| e.into_inner()).held();
    let now = crate::clock::wall_ns();
    for h in &mut held {
        if h.entries.is_none() {
            let sent = if dry_run { 0 } else { h.cap };
            match port.count_bucket(&h.bucket).await {
                Ok(n) => h.entries = Some(n.saturating_add(sent)),
                Err(e) => {
                    tracing::warn!(bucket = h.bucket, error = %e, "counting a held bucket failed")
                }
            }
        }
        tracing::warn!(
            bucket = h.bucket,
            reason = h.reason(),
            "bucket held by the deletion cap"
        );
        if !dry_run
            && h.since_ns.is_none()
            && h.grace.is_none()
            && let Err(e) = port.hold(HoldRecord::new(h, limits, now)).await
        {
            // Not recorded: the next pass caps the bucket again, afresh.
            tracing::warn!(bucket = h.bucket, error = %e, "recording a hold failed");
        }
    }
    if !dry_run {
        for b in approved.iter().chain(released) {
            if let Err(e) = port.release(b).await {
                tracing::warn!(bucket = b, error = %e, "removing a hold failed");
            }
        }
        for b in approved {
            if let Err(e) = port.clear_approval(b).await {
                tracing::warn!(bucket = b, error = %e, "removing a used approval failed");
            }
        }
    }
    held
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

fn humantime(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The phases, as a Send future talking to shard actors by message.
struct Driver {
    port: Arc<dyn ClusterPort>,
    plan: Arc<PassPlan>,
    shards: BTreeMap<u8, (Addr<ShardActor>, ShardPlan, Span)>,
    /// Each selected shard's per-pass state, sent before anything else.
    begins: Vec<(Addr<ShardActor>, BeginPass)>,
    dry_run: bool,
    obs: PassObserver,
    /// How long one `Drain` may wait ([`drain_bound`]).
    drain_bound: Duration,
    /// When the walk phase is cut so replay still runs
    /// (`pass.walk_budget_fraction` of `pass.max_runtime`).
    walk_deadline: Option<Instant>,
}

/// Resolves once the pass is asked to stop dispatching.
async fn halted(mut rx: watch::Receiver<Option<String>>) {
    if rx.wait_for(Option::is_some).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Driver {
    async fn run(
        mut self,
        started: Instant,
        halt: watch::Receiver<Option<String>>,
    ) -> (Vec<ShardResult>, Option<String>, Option<String>, ReplayRead) {
        let mut error = None;
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
        let (stream_end, not_routed) = if halt.borrow().is_none() {
            let (end, not_routed, e) = self.replay_phase(&halt, &mut read).await;
            if e.is_some() {
                error = e;
            }
            (end, not_routed)
        } else {
            // Stopped: no replay. Buckets whose recovery did not finish keep
            // their old state and where their walk resumes; steady buckets
            // keep their old progress.
            (None, HashMap::new())
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
        // Each shard's cursor is its own file: they are saved a few at a
        // time, so the pass ends a few saves after the last shard answered,
        // not sixteen (one after another they were most of a steady pass's
        // tail). Not all at once: with 1,000 rules a cursor is ~2 MB, and
        // sixteen encoded requests at once raised the pass's peak by ~29 MB
        // (heaptrack, docs/due-index.md#memory).
        let (dry_run, now) = (self.dry_run, self.plan.now);
        let saves: Vec<futures::future::BoxFuture<'static, Option<Result<(), String>>>> = finished
            .iter()
            .map(|(_, _, answer)| match answer {
                // The port's future does nothing until polled.
                Ok((_, Some(c))) if !dry_run => {
                    self.port.save_cursor(c.clone(), now).map(Some).boxed()
                }
                _ => futures::future::ready(None).boxed(),
            })
            .collect();
        let saved_all: Vec<_> = futures::stream::iter(saves)
            .buffered(CURSOR_SAVES_AT_ONCE)
            .collect()
            .await;
        let mut results = Vec::new();
        for ((shard, span, answer), save) in finished.into_iter().zip(saved_all) {
            match answer {
                Ok((mut report, mut cursor)) => {
                    let mut saved = false;
                    if let (Some(c), Some(save)) = (cursor.as_mut(), save) {
                        match save {
                            Ok(()) => {
                                c.updated_ns = self.plan.now;
                                saved = true;
                                self.obs
                                    .metrics
                                    .cursor_saved(shard, c.ts_ns, c.last_walked_ns);
                            }
                            Err(e) => {
                                report.outcome = ShardOutcome::Failed;
                                report.halt_reason = Some(format!("saving cursor: {e}"));
                            }
                        }
                    }
                    telemetry::record_outcome(span, report.outcome.as_str());
                    results.push(ShardResult {
                        report,
                        duration: started.elapsed(),
                        cursor,
                        saved,
                    });
                }
                Err(e) => {
                    telemetry::record_outcome(span, "failed");
                    results.push(ShardResult {
                        report: ShardReport::failed(shard, format!("shard actor gone: {e}")),
                        duration: started.elapsed(),
                        cursor: None,
                        saved: false,
                    })
                }
            }
        }
        (results, error, walk_cut, read)
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
        let now = self.plan.now;
        for (&shard, (_, sp, _)) in &self.shards {
            if self.plan.buckets().any(|b| sp.walk_role(b).is_some()) {
                self.obs
                    .board(|b| b.shard_phase(shard, ShardPhase::Walking));
            }
        }
        let deadline = self.walk_deadline;
        let budget = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(budget);
        let mut cut = None;
        let mut complete = true;
        for bucket in self.plan.buckets() {
            let walkers: Vec<u8> = self
                .shards
                .iter()
                .filter(|(_, (_, sp, _))| sp.walk_role(bucket).is_some())
                .map(|(s, _)| *s)
                .collect();
            if walkers.is_empty() {
                continue;
            }
            // Shards recovering this bucket here: only their walks vouch for
            // matches (docs/design-deviations.md#walk-coverage).
            let recovering: BTreeSet<u8> = self
                .shards
                .iter()
                .filter(|(_, (_, sp, _))| sp.walk_role(bucket) == Some(WalkRole::Recovery))
                .map(|(s, _)| *s)
                .collect();
            // Where each walker's part of the walk resumes (`None`: from the
            // start; every steady walk and every fresh recovery).
            let froms: BTreeMap<u8, Option<String>> = walkers
                .iter()
                .map(|s| {
                    let from = self
                        .shards
                        .get(s)
                        .and_then(|(_, sp, _)| sp.resume_from(bucket))
                        .map(str::to_string);
                    (*s, from)
                })
                .collect();
            let from_of = |s: u8| froms.get(&s).and_then(|f| f.as_deref());
            let start = listing_start(froms.values().map(|f| f.as_deref())).map(str::to_string);
            let mut ok = complete;
            let mut reached: Option<String> = None;
            if complete {
                if let Some(from) = &start {
                    tracing::info!(bucket, after = %from, "recovery walk resumes");
                }
                // Only the keys some walk rule can match are listed; a
                // recovery evaluates every enabled action.
                let prefixes = plan::walk_prefixes(&self.plan, bucket, !recovering.is_empty());
                let mut listing = self.port.list_bucket_after(bucket, start.clone(), prefixes);
                let stop = halted(halt.clone());
                tokio::pin!(stop);
                loop {
                    let item = tokio::select! {
                        biased;
                        () = &mut stop => {
                            tracing::info!(bucket, "stop requested; walk abandoned");
                            ok = false;
                            complete = false;
                            break;
                        }
                        () = &mut budget => {
                            let why = format!(
                                "walk budget reached (pass.walk_budget_fraction of \
                                 pass.max_runtime); bucket {bucket}'s walk resumes next pass"
                            );
                            tracing::info!(bucket, "{why}");
                            cut = Some(why);
                            ok = false;
                            complete = false;
                            break;
                        }
                        item = listing.next() => item,
                    };
                    let Some(item) = item else { break };
                    let (pos, item) = match item {
                        Ok(i) => i,
                        Err(e) => {
                            tracing::warn!(bucket, error = %e, "walk listing failed");
                            ok = false;
                            break;
                        }
                    };
                    // Every send for this item completes before the next
                    // select, so a cut never falls inside an item.
                    reached = Some(pos.clone());
                    let Some(s) = item.shard(bucket) else {
                        continue;
                    };
                    // Recovering shards whose resume point lies before this
                    // item: they walk it in this segment.
                    let covering: BTreeSet<u8> = recovering
                        .iter()
                        .copied()
                        .filter(|r| is_after(&pos, from_of(*r)))
                        .collect();
                    if !covering.is_empty() && !covering.contains(&s) {
                        let extra =
                            shard_run::coverage_walkers(s, &item.replay_owners(bucket), &covering);
                        if !extra.is_empty() {
                            let matches = shard_run::replay_matches(
                                &self.plan,
                                bucket,
                                walk::evaluate(&self.plan.recovery, bucket, &item, now),
                            );
                            for o in extra {
                                if let Some((addr, _, _)) = self.shards.get(&o)
                                    && !matches.is_empty()
                                {
                                    let _ = addr
                                        .send(WalkBatch {
                                            bucket: bucket.to_string(),
                                            matches: matches.clone(),
                                            skipped_no_mtime: 0,
                                            pos: Some(pos.clone()),
                                        })
                                        .await;
                                }
                            }
                        }
                    }
                    let Some((addr, sp, _)) = self.shards.get(&s) else {
                        continue;
                    };
                    let view = match sp.walk_role(bucket) {
                        // Walked by an earlier segment of this shard's walk.
                        Some(WalkRole::Recovery) if !is_after(&pos, from_of(s)) => continue,
                        Some(WalkRole::Recovery) => &self.plan.recovery,
                        Some(WalkRole::Steady) => match &self.plan.walk {
                            Some(w) => w,
                            None => continue,
                        },
                        None => continue,
                    };
                    let matches = walk::evaluate(view, bucket, &item, now);
                    let skipped_no_mtime = walk::no_mtime_entries(&item);
                    if matches.is_empty() && skipped_no_mtime == 0 {
                        continue;
                    }
                    let _ = addr
                        .send(WalkBatch {
                            bucket: bucket.to_string(),
                            matches,
                            skipped_no_mtime,
                            pos: Some(pos),
                        })
                        .await;
                }
            }
            for s in walkers {
                if let Some((addr, _, _)) = self.shards.get(&s) {
                    let _ = addr
                        .send(ListingDone {
                            bucket: bucket.to_string(),
                            ok,
                            reached: reached.clone(),
                        })
                        .await;
                }
            }
        }
        cut
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
        // sees its events in log order (docs/due-index.md#reading).
        let ranges = merge_ranges(wanted);
        read.ranges.clone_from(&ranges);
        let mut not_routed: HashMap<u8, u64> = HashMap::new();
        let Some(view) = self.plan.replay.as_ref() else {
            return (None, not_routed, None);
        };
        if ranges.is_empty() {
            return (None, not_routed, None);
        }
        tracing::info!(
            ranges = ranges.len(),
            read_ns = ranges.iter().map(|r| r.1 - r.0).sum::<i64>(),
            since = ranges[0].0,
            "meta-log ranges to read"
        );
        // Taken before the first range is read: events the filer stamped up
        // to a reorder margin before this are all in its log by the time the
        // stream ends, so a quiet log lets the index move up to it rather
        // than stay at the last event read (docs/due-index.md#filer-clock).
        let clock = match self.port.filer_clock().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the filer's clock; the index stops at the last event read");
                None
            }
        };
        let root = self.port.buckets_root();
        let stop = halted(halt.clone());
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
                    return (None, not_routed, Some(e));
                }
            };
            loop {
                // Checked before taking the next event: what was read is
                // delivered (below), so `stream_end` stays the last event
                // every shard got.
                if halt.borrow().is_some() {
                    tracing::info!("stop requested; meta-log replay ends early");
                    stopped = true;
                    break 'ranges;
                }
                // Take what the stream has ready. When it has nothing (the
                // end of a response), give it REPLAY_LINGER: fresh events
                // come one per response, and flushing after each would send
                // one message per event again. Past that the stream is
                // quiet: deliver what is buffered before waiting, so no
                // event waits on the next one.
                let ev = match events.next().now_or_never() {
                    Some(ev) => ev,
                    None => {
                        let quick = tokio::select! {
                            biased;
                            () = &mut stop => {
                                tracing::info!("stop requested; meta-log replay ends early");
                                stopped = true;
                                break 'ranges;
                            }
                            ev = events.next() => Some(ev),
                            () = tokio::time::sleep(REPLAY_LINGER) => None,
                        };
                        match quick {
                            Some(ev) => ev,
                            None => {
                                self.flush_all(&mut out).await;
                                tokio::select! {
                                    biased;
                                    () = &mut stop => {
                                        tracing::info!("stop requested; meta-log replay ends early");
                                        stopped = true;
                                        break 'ranges;
                                    }
                                    ev = events.next() => ev,
                                }
                            }
                        }
                    }
                };
                let Some(ev) = ev else { break };
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => {
                        self.deliver_all(&mut out).await;
                        return (None, not_routed, Some(e));
                    }
                };
                read.events_read += 1;
                last_ts = Some(ev.ts_ns);
                let Some(routed) = route::route_for_pass(view, &root, &ev, self.plan.now) else {
                    continue;
                };
                let shard = routed.shard;
                let Some(ob) = out.get_mut(&shard) else {
                    continue;
                };
                ob.count(&routed.bucket);
                if view.bucket(&routed.bucket).is_none() {
                    *not_routed.entry(shard).or_default() += 1;
                    continue;
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

/// Events a shard receives per [`ReplayBatch`] at most. One actor round trip
/// per event capped the pass's scan rate below the Go worker's (issue 9);
/// batches are also flushed whenever the stream has nothing ready, at each
/// range's end and before a stop is honored (docs/meta-log.md#replay-batches).
/// With a reader faster than the shards every shard holds two full batches
/// (one being built, one in flight); 256 (with a 1,024-event reader buffer)
/// made 1-2 M-event direct-read passes 5-30% slower without a peak RSS
/// saving that stood out of the run-to-run spread (docs/due-index.md#memory).
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
