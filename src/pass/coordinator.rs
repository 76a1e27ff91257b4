//! The Coordinator actor: one daily pass over the selected shards. It takes one
//! `now` and one consistent snapshot, owns the shared rate limiter and the
//! [`DeleteDispatcher`], starts the supervised [`ShardActor`]s, then drives the
//! phases (walk, replay, finish, save) from a `tokio::spawn`ed task that talks
//! to the shards only by message. I/O stays in Send futures on the runtime pool;
//! actors are created only here, on the System arbiter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::StreamExt;

use crate::config::Settings;
use crate::engine::{
    Nanos, Snapshot, promoted_hash, promoted_hash_by_bucket, replay_content_hash,
    replay_content_hash_by_bucket, route, walk,
};
use crate::pass::actors::{
    Drain, Finish, ListingDone, ReplayEvent, ShardActor, StartReplay, WalkBatch,
};
use crate::pass::dispatch::{DeleteDispatcher, DeletePort, limiter};
use crate::pass::plan;
use crate::pass::ports::ClusterPort;
use crate::pass::retry::RetryPolicy;
use crate::pass::shard_run::{
    PassPlan, ShardOutcome, ShardPlan, ShardReport, WalkRole, plan_shard,
};
use crate::seaweed::buckets::BucketError;
use crate::seaweed::cursor::ShardCursor;
use crate::seaweed::delete::DeleteRequest;

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
}

/// One shard's result with its wall time.
#[derive(Debug, Clone)]
pub struct ShardResult {
    /// The shard's report.
    pub report: ShardReport,
    /// Time from pass start to the shard's finish.
    pub duration: Duration,
}

/// What a pass did.
#[derive(Debug, Clone)]
pub struct PassResult {
    /// The pass's `now`.
    pub now: Nanos,
    /// Buckets in the pass (with enabled actions, after `pass.buckets`).
    pub buckets: Vec<String>,
    /// Buckets skipped for configuration errors.
    pub bucket_errors: Vec<BucketError>,
    /// Per shard, in shard order.
    pub shards: Vec<ShardResult>,
    /// A runtime error that failed the pass (stream broken, save failed…).
    pub error: Option<String>,
    /// Wall time of the pass.
    pub duration: Duration,
}

impl PassResult {
    /// `failed` on a runtime error or a failed shard, `halted` when a shard
    /// halted, else `completed`.
    pub fn outcome(&self) -> &'static str {
        if self.error.is_some()
            || self
                .shards
                .iter()
                .any(|s| s.report.outcome == ShardOutcome::Failed)
        {
            "failed"
        } else if self
            .shards
            .iter()
            .any(|s| s.report.outcome == ShardOutcome::Halted)
        {
            "halted"
        } else {
            "completed"
        }
    }
}

/// Everything read before the shards start.
struct Prepared {
    plan: Arc<PassPlan>,
    buckets: Vec<String>,
    bucket_errors: Vec<BucketError>,
    cursors: BTreeMap<u8, Result<Option<ShardCursor>, String>>,
}

async fn prepare(port: Arc<dyn ClusterPort>, opts: &PassOptions) -> Result<Prepared, String> {
    let s = &opts.settings;
    let scan = port.buckets().await?;
    let filter: BTreeSet<&str> = s.pass.buckets.iter().map(String::as_str).collect();
    let selected = |name: &str| filter.is_empty() || filter.contains(name);
    let mut keep = BTreeSet::new();
    let mut bucket_errors = Vec::new();
    for e in scan.errors {
        keep.insert(e.bucket.clone());
        if selected(&e.bucket) {
            bucket_errors.push(e);
        }
    }
    let mut configs = Vec::new();
    for b in &scan.buckets {
        if !selected(&b.name) {
            keep.insert(b.name.clone());
            continue;
        }
        if b.has_rules() {
            configs.push(b.to_config());
        }
    }
    let time = s.time.time_config();
    let snap = Snapshot::compile(configs, time);
    let earliest = if s.pass.meta_log_retention.is_zero() {
        port.earliest_available().await?
    } else {
        None
    };
    let window = plan::retention_window(opts.now, earliest, s.pass.meta_log_retention);
    let (replay, walk_view) = snap.rules_for_shard(0, window);
    let recovery = snap.recovery_view();
    let buckets: Vec<String> = recovery
        .buckets()
        .iter()
        .map(|b| b.name().to_string())
        .collect();
    let pass_plan = PassPlan {
        now: opts.now,
        time,
        skew_margin: s.pass.clock_skew_margin,
        walker_interval: s.pass.walker_interval,
        earliest: if s.pass.meta_log_retention.is_zero() {
            earliest
        } else {
            // A configured retention: the horizon is now − retention.
            let back = i64::try_from(s.pass.meta_log_retention.as_nanos()).unwrap_or(i64::MAX);
            Some(opts.now.saturating_sub(back))
        },
        rule_set_hash: replay_content_hash_by_bucket(&snap),
        promoted_hash: promoted_hash_by_bucket(&snap, window),
        global_rule_set_hash: replay_content_hash(&snap),
        global_promoted_hash: promoted_hash(&snap, window),
        replay,
        walk: walk_view,
        recovery,
        keep,
    };
    let mut cursors = BTreeMap::new();
    for &shard in &opts.shards {
        cursors.insert(shard, port.load_cursor(shard).await);
    }
    Ok(Prepared {
        plan: Arc::new(pass_plan),
        buckets,
        bucket_errors,
        cursors,
    })
}

/// Runs a pass. Answered with the pass result, or `Err` when the pass could
/// not start at all (cluster unreachable, bucket listing failed).
#[derive(Message)]
#[rtype(result = "Result<PassResult, String>")]
pub struct RunPass(pub PassOptions);

/// Owns the pass's limiter, dispatcher and shard actors.
pub struct Coordinator {
    port: Arc<dyn ClusterPort>,
    deletes: Arc<dyn DeletePort<DeleteRequest>>,
}

impl Coordinator {
    /// A coordinator over a cluster and a delete port.
    pub fn new(port: Arc<dyn ClusterPort>, deletes: Arc<dyn DeletePort<DeleteRequest>>) -> Self {
        Coordinator { port, deletes }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;
}

impl Handler<RunPass> for Coordinator {
    type Result = ResponseActFuture<Self, Result<PassResult, String>>;

    fn handle(&mut self, msg: RunPass, _: &mut Context<Self>) -> Self::Result {
        let opts = msg.0;
        let started = Instant::now();
        let port = self.port.clone();
        let prep_opts = opts.clone();
        let prep =
            async move { tokio::spawn(async move { prepare(port, &prep_opts).await }).await };
        Box::pin(prep.into_actor(self).then(move |joined, act, _ctx| {
            let prepared = match joined {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(format!("pass preparation task failed: {e}")),
            };
            let fut: std::pin::Pin<Box<dyn Future<Output = Result<PassResult, String>>>> =
                match prepared {
                    Err(e) => Box::pin(async move { Err(e) }),
                    Ok(p) => {
                        let run = act.start_pass(opts, p, started);
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
        };
        let dispatcher = DeleteDispatcher::new(
            self.deletes.clone(),
            limiter,
            s.dispatch.max_in_flight,
            policy,
            opts.dry_run,
        )
        .start();
        let window = s.dispatch.max_in_flight_per_shard;
        let mut shards = BTreeMap::new();
        let mut failed = Vec::new();
        for (shard, cursor) in p.cursors {
            match cursor {
                Ok(persisted) => {
                    let shard_plan = plan_shard(&p.plan, persisted.as_ref());
                    let plan = p.plan.clone();
                    let d = dispatcher.clone().recipient();
                    let port = self.port.clone();
                    let addr = Supervisor::start(move |_| {
                        ShardActor::new(shard, plan, persisted, window, d, port)
                    });
                    shards.insert(shard, (addr, shard_plan));
                }
                Err(e) => failed.push((shard, e)),
            }
        }
        let driver = Driver {
            port: self.port.clone(),
            plan: p.plan,
            shards,
            dry_run: opts.dry_run,
        };
        let buckets = p.buckets;
        let bucket_errors = p.bucket_errors;
        tokio::spawn(async move {
            let (mut results, error) = driver.run(started).await;
            for (shard, e) in failed {
                results.push(ShardResult {
                    report: failed_report(shard, e),
                    duration: started.elapsed(),
                });
            }
            results.sort_by_key(|r| r.report.shard);
            PassResult {
                now: opts.now,
                buckets,
                bucket_errors,
                shards: results,
                error,
                duration: started.elapsed(),
            }
        })
    }
}

fn failed_report(shard: u8, reason: String) -> ShardReport {
    ShardReport {
        shard,
        outcome: ShardOutcome::Failed,
        buckets: 0,
        rules: 0,
        counters: Default::default(),
        walker_ran: false,
        recovery: Vec::new(),
        halt_reason: Some(reason),
    }
}

/// The phases, as a Send future talking to shard actors by message.
struct Driver {
    port: Arc<dyn ClusterPort>,
    plan: Arc<PassPlan>,
    shards: BTreeMap<u8, (Addr<ShardActor>, ShardPlan)>,
    dry_run: bool,
}

impl Driver {
    async fn run(self, started: Instant) -> (Vec<ShardResult>, Option<String>) {
        let mut error = None;
        self.walk_phase().await;
        self.drain().await;
        let (stream_end, not_routed, e) = self.replay_phase().await;
        if e.is_some() {
            error = e;
        }
        self.drain().await;
        let mut results = Vec::new();
        for (&shard, (addr, _)) in &self.shards {
            let fin = Finish {
                stream_end,
                events_not_routed: not_routed.get(&shard).copied().unwrap_or(0),
            };
            match addr.send(fin).await {
                Ok((mut report, cursor)) => {
                    if let Some(c) = cursor
                        && !self.dry_run
                        && let Err(e) = self.port.save_cursor(c, self.plan.now).await
                    {
                        report.outcome = ShardOutcome::Failed;
                        report.halt_reason = Some(format!("saving cursor: {e}"));
                    }
                    results.push(ShardResult {
                        report,
                        duration: started.elapsed(),
                    });
                }
                Err(e) => results.push(ShardResult {
                    report: failed_report(shard, format!("shard actor gone: {e}")),
                    duration: started.elapsed(),
                }),
            }
        }
        (results, error)
    }

    async fn drain(&self) {
        let waits = self.shards.values().map(|(a, _)| a.send(Drain));
        futures::future::join_all(waits).await;
    }

    /// Lists each bucket that some shard walks, once, and hands each item's
    /// due matches to the shard that owns its key.
    async fn walk_phase(&self) {
        let now = self.plan.now;
        for bucket in self.plan.buckets() {
            let walkers: Vec<u8> = self
                .shards
                .iter()
                .filter(|(_, (_, sp))| sp.walk_role(bucket).is_some())
                .map(|(s, _)| *s)
                .collect();
            if walkers.is_empty() {
                continue;
            }
            let mut listing = self.port.list_bucket(bucket);
            let mut ok = true;
            while let Some(item) = listing.next().await {
                let item = match item {
                    Ok(i) => i,
                    Err(e) => {
                        tracing::warn!(bucket, error = %e, "walk listing failed");
                        ok = false;
                        break;
                    }
                };
                let Some(s) = item.shard(bucket) else {
                    continue;
                };
                let Some((addr, sp)) = self.shards.get(&s) else {
                    continue;
                };
                let view = match sp.walk_role(bucket) {
                    Some(WalkRole::Recovery) => &self.plan.recovery,
                    Some(WalkRole::Steady) => match &self.plan.walk {
                        Some(w) => w,
                        None => continue,
                    },
                    None => continue,
                };
                let matches = walk::evaluate(view, bucket, &item, now);
                if matches.is_empty() {
                    continue;
                }
                let _ = addr
                    .send(WalkBatch {
                        bucket: bucket.to_string(),
                        matches,
                    })
                    .await;
            }
            for s in walkers {
                if let Some((addr, _)) = self.shards.get(&s) {
                    let _ = addr
                        .send(ListingDone {
                            bucket: bucket.to_string(),
                            ok,
                        })
                        .await;
                }
            }
        }
    }

    /// One subscription for every shard; events fanned out by shard.
    async fn replay_phase(&self) -> (Option<Nanos>, HashMap<u8, u64>, Option<String>) {
        let mut since: Option<Nanos> = None;
        for (addr, _) in self.shards.values() {
            if let Ok(Some(ts)) = addr.send(StartReplay).await {
                since = Some(since.map_or(ts, |s: Nanos| s.min(ts)));
            }
        }
        let mut not_routed: HashMap<u8, u64> = HashMap::new();
        let (Some(since), Some(view)) = (since, self.plan.replay.as_ref()) else {
            return (None, not_routed, None);
        };
        let root = self.port.buckets_root();
        let mut events = match self.port.subscribe(since, self.plan.now).await {
            Ok(s) => s,
            Err(e) => return (None, not_routed, Some(e)),
        };
        let mut last_ts = None;
        while let Some(ev) = events.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => return (None, not_routed, Some(e)),
            };
            last_ts = Some(ev.ts_ns);
            let Some(routed) = route::route(view, &root, &ev) else {
                continue;
            };
            let Some((addr, _)) = self.shards.get(&routed.shard) else {
                continue;
            };
            if view.bucket(&routed.bucket).is_none() {
                *not_routed.entry(routed.shard).or_default() += 1;
                continue;
            }
            let _ = addr
                .send(ReplayEvent {
                    ts: ev.ts_ns,
                    matches: routed.matches,
                })
                .await;
        }
        (last_ts, not_routed, None)
    }
}
