//! The always-on service behind `s3-lifecycled serve`: the daily schedule
//! ([`next_start`]), one pass at a time through a long-lived
//! [`PassRunner`], the [`AdminBackend`] the admin gRPC API calls, and the
//! shutdown sequence (stop dispatching, drain, save cursors, within a deadline).

pub mod instance;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::admin::{AdminBackend, AdminError, Approved, Paused, TriggerAccepted, TriggerRequest};
use crate::clock::wall_ns;
use crate::config::{FUTURE_NOW_TOLERANCE, Settings};
use crate::engine::Nanos;
use crate::engine::cursor::ShardCursor;
use crate::pass::observe::{PassObserver, StatusBoard};
use crate::pass::options::{PassOptions, StopSignal};
use crate::pass::ports::{ClusterError, ClusterPort, controls_for, on_controls};
use crate::pass::runner::PassRunner;
use crate::status::{PassSummary, ServiceState, StatusSnapshot};

const DAY_SECS: i128 = 86_400;

/// The next scheduled start strictly after `now_ns`.
///
/// Starts are at `k·day + offset` ns since the Unix epoch for every integer
/// `k`, where `offset = schedule_secs / 86400 · day`: the `HH:MM` time of day
/// scaled to the configured day length. With the real 24 h day that is every
/// day at `HH:MM` UTC; with `time.day = "10s"` and `schedule = "12:00"` it is
/// every 10 s at 5 s past each multiple of 10 s since the epoch.
pub fn next_start(now_ns: Nanos, schedule_secs: u32, day: Duration) -> Nanos {
    let day_ns = i128::try_from(day.as_nanos()).unwrap_or(i128::MAX).max(1);
    let offset = i128::from(schedule_secs) * day_ns / DAY_SECS;
    let k = (i128::from(now_ns) - offset).div_euclid(day_ns) + 1;
    i64::try_from(k * day_ns + offset).unwrap_or(i64::MAX)
}

/// How far `now_ns` lies past `wall_ns`, when that is more than
/// [`FUTURE_NOW_TOLERANCE`]; `None` for a `now` near or before the wall clock.
pub fn far_future(now_ns: Nanos, wall_ns: Nanos) -> Option<Duration> {
    let ahead = i128::from(now_ns) - i128::from(wall_ns);
    let tolerance = i128::try_from(FUTURE_NOW_TOLERANCE.as_nanos()).unwrap_or(i128::MAX);
    (ahead > tolerance).then(|| Duration::from_nanos(u64::try_from(ahead).unwrap_or(u64::MAX)))
}

/// Why a pass cannot start now, if it cannot: shutting down, not ready,
/// or standing by (a scheduled start then counts as missed).
fn refusal(inner: &mut Inner, cause: Cause) -> Option<AdminError> {
    if inner.shutting_down {
        return Some(AdminError::Unavailable(
            "the service is shutting down; no new pass starts".into(),
        ));
    }
    if !inner.ready {
        return Some(AdminError::Unavailable(
            "the service is starting (cluster not reached yet); try again shortly".into(),
        ));
    }
    let why = inner.standby.clone()?;
    if cause == Cause::Schedule {
        inner.missed_schedule = true;
    }
    Some(AdminError::Unavailable(format!(
        "this serve stands by: {why}; trigger that one, or stop it and this one takes over"
    )))
}

/// Whether `serve` accepts a trigger's `now`: a `now` far past the wall clock
/// makes the pass delete everything the rules would delete by that date, so
/// it is allowed only for a dry run or with `service.allow_future_now`
/// (test clusters). The error names the setting.
pub fn check_trigger_now(
    now_ns: Option<Nanos>,
    wall_ns: Nanos,
    dry_run: bool,
    allow_future_now: bool,
) -> Result<(), String> {
    let Some(now) = now_ns else { return Ok(()) };
    match far_future(now, wall_ns) {
        Some(ahead) if !dry_run && !allow_future_now => Err(format!(
            "now: {} is {} past this service's clock (more than {} ahead); a pass at that time \
             would delete everything the rules would delete by then. Use --dry-run to preview \
             it, or set service.allow_future_now = true (test clusters only)",
            crate::status::format_time(now),
            humantime::format_duration(Duration::from_secs(ahead.as_secs())),
            humantime::format_duration(FUTURE_NOW_TOLERANCE),
        )),
        _ => Ok(()),
    }
}

/// Why a pass started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The daily schedule.
    Schedule,
    /// An admin `TriggerRun`.
    Trigger,
}

struct Current {
    run_id: String,
    stop: watch::Sender<Option<String>>,
    done: watch::Receiver<bool>,
}

#[derive(Default)]
struct Inner {
    current: Option<Current>,
    ready: bool,
    shutting_down: bool,
    /// Why this instance stands by (another live `serve` runs its shards).
    standby: Option<String>,
    /// A scheduled start came while standing by: run it on taking over.
    missed_schedule: bool,
}

/// Work to do before every pass, e.g. reloading rotated TLS certificates
/// (docs/tls.md#rotation).
pub type BeforePass = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// One pass at a time through the [`PassRunner`]; cheap to share (`Arc`).
pub struct Service {
    before_pass: OnceLock<BeforePass>,
    runner: PassRunner,
    board: Arc<StatusBoard>,
    settings: Settings,
    shards: Vec<u8>,
    inner: Mutex<Inner>,
    /// Set once the cluster is reached ([`Service::attach_controls`]).
    controls: OnceLock<Controls>,
}

impl Service {
    /// A service running `shards` with `settings`, reporting to `board`.
    pub fn new(
        runner: PassRunner,
        board: Arc<StatusBoard>,
        settings: Settings,
        shards: Vec<u8>,
    ) -> Arc<Service> {
        Arc::new(Service {
            before_pass: OnceLock::new(),
            runner,
            board,
            settings,
            shards,
            inner: Mutex::default(),
            controls: OnceLock::new(),
        })
    }

    /// Lets pause and resume reach the cluster and show their effect on
    /// `obs`; then reads the paused buckets once so the status page shows
    /// them before the first pass.
    pub async fn attach_controls(&self, port: Arc<dyn ClusterPort>, obs: PassObserver) {
        let c = self.controls.get_or_init(|| Controls { port, obs });
        c.refresh().await;
        // No pass has run yet: every cursor comes from the filer.
        c.refresh_forecast(
            &self.settings.time.time_config(),
            wall_ns(),
            &Default::default(),
        )
        .await;
        self.audit_in_background();
    }

    /// Runs the legacy-TTL audit off the pass's path (docs/ttl-audit.md),
    /// when `audit.in_service` is on; a failure is logged and keeps what
    /// was shown.
    fn audit_in_background(&self) {
        let Some(c) = self.controls.get().cloned() else {
            return;
        };
        if !self.settings.audit.in_service {
            return;
        }
        let run = crate::seaweed::ttl_scan::AuditRun {
            only: None,
            budget: self.settings.audit.budget(),
            day: self.settings.time.day,
            now: wall_ns(),
        };
        tokio::spawn(async move {
            match c.port.ttl_audit(run).await {
                Ok(Some(r)) => {
                    tracing::info!(
                        findings = r.findings.len(),
                        conflicting = r.conflicting().count(),
                        calls = r.calls,
                        "ttl audit"
                    );
                    c.obs.ttl_audit(r);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "the ttl audit failed"),
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the work run before every pass (once; later calls are ignored).
    pub fn set_before_pass(&self, hook: BeforePass) {
        let _ = self.before_pass.set(hook);
    }

    /// The cluster was reached and a bucket scan succeeded: passes may start.
    pub fn set_ready(&self) {
        let mut inner = self.lock();
        inner.ready = true;
        self.board.set_state(if inner.standby.is_some() {
            ServiceState::Standby
        } else {
            ServiceState::Idle
        });
    }

    /// Stands by (`Some`: why, naming the holder) or runs passes (`None`),
    /// as the instance files decide (docs/serve-instances.md). Taking over
    /// after a scheduled start was missed standing by starts that pass now.
    pub fn set_standby(self: &Arc<Self>, why: Option<String>) {
        let mut inner = self.lock();
        let was = std::mem::replace(&mut inner.standby, why.clone());
        self.board.set_standby(why.clone());
        let idle = inner.current.is_none() && !inner.shutting_down;
        match (&was, &why) {
            (None, Some(w)) => {
                tracing::warn!(holder = %w, "standing by: another serve runs these shards")
            }
            (Some(_), None) => {
                tracing::info!("taking over: no live serve runs these shards any more")
            }
            _ => {}
        }
        if idle && inner.ready {
            let state = if why.is_some() {
                ServiceState::Standby
            } else {
                ServiceState::Idle
            };
            self.board.set_state(state);
        }
        let missed = why.is_none() && std::mem::take(&mut inner.missed_schedule);
        drop(inner);
        if missed {
            tracing::info!("running the scheduled pass missed while standing by");
            if let Err(e) = self.start(TriggerRequest::default(), Cause::Schedule) {
                tracing::warn!(error = %e, "the missed scheduled pass did not start");
            }
        }
    }

    /// Starts a pass unless one runs (then answers with its id).
    pub fn start(
        self: &Arc<Self>,
        req: TriggerRequest,
        cause: Cause,
    ) -> Result<TriggerAccepted, AdminError> {
        check_trigger_now(
            req.now_ns,
            wall_ns(),
            req.dry_run,
            self.settings.service.allow_future_now,
        )
        .map_err(AdminError::FailedPrecondition)?;
        let mut inner = self.lock();
        if let Some(refused) = refusal(&mut inner, cause) {
            return Err(refused);
        }
        if let Some(c) = &inner.current {
            return Ok(TriggerAccepted {
                run_id: c.run_id.clone(),
                already_running: true,
            });
        }
        let shards = if req.shards.is_empty() {
            self.shards.clone()
        } else {
            if let Some(s) = req.shards.iter().find(|s| !self.shards.contains(s)) {
                return Err(AdminError::FailedPrecondition(format!(
                    "shards: {s} is not one of this instance's shards (pass.shards = {})",
                    self.settings.pass.shards
                )));
            }
            req.shards.clone()
        };
        let run_id = crate::pass::new_run_id();
        let (stop_tx, stop) = StopSignal::new();
        let (done_tx, done) = watch::channel(false);
        inner.current = Some(Current {
            run_id: run_id.clone(),
            stop: stop_tx,
            done,
        });
        drop(inner);
        self.board.pass_started(&run_id, &shards);
        tracing::info!(
            run_id,
            ?cause,
            shards = shards.len(),
            dry_run = req.dry_run,
            "pass starting"
        );
        let opts = PassOptions {
            now: req.now_ns.unwrap_or_else(wall_ns),
            shards,
            dry_run: req.dry_run,
            settings: self.settings.clone(),
            run_id: run_id.clone(),
            stop,
        };
        tokio::spawn(self.clone().run_pass(opts, done_tx));
        Ok(TriggerAccepted {
            run_id,
            already_running: false,
        })
    }

    /// The pass [`Service::start`] admitted, to its end: the hook, the
    /// one-enforcer check, the run, then what waits on it.
    async fn run_pass(self: Arc<Self>, opts: PassOptions, done_tx: watch::Sender<bool>) {
        let (id, pass_now) = (opts.run_id.clone(), opts.now);
        if let Some(hook) = self.before_pass.get() {
            hook().await;
        }
        // One enforcer at a time (docs/plugin-worker.md#one-enforcer): the
        // refusal fails this pass, visibly, and the next one asks again.
        let allowed = if opts.dry_run {
            Ok(())
        } else {
            crate::plugin::enforcer::one_enforcer(&self.settings).await
        };
        let result = match allowed {
            Err(e) => Err(e),
            Ok(()) => self.runner.run(opts).await.map_err(|e| e.to_string()),
        };
        match &result {
            Ok(r) => crate::pass::observe::log_pass_finished(&id, r),
            Err(e) => tracing::error!(run_id = id, error = %e, "pass could not run"),
        }
        // Before the pass shows as finished, so whoever waits for it sees the
        // forecast and lag gauges of its cursors. The cursors the pass just
        // saved are handed over, not read back (docs/forecast.md#refresh).
        if let Some(c) = self.controls.get() {
            let saved = result
                .as_ref()
                .map(|r| r.saved_cursors())
                .unwrap_or_default();
            c.refresh_forecast(&self.settings.time.time_config(), pass_now, &saved)
                .await;
        }
        self.audit_in_background();
        self.board.pass_finished(&id, &result);
        self.lock().current = None;
        let _ = done_tx.send(true);
    }

    /// Refuses new passes and asks the running one (if any) to stop; answers
    /// a receiver that turns `true` when it has ended, or `None` when no pass
    /// runs.
    pub fn begin_shutdown(&self, reason: &str) -> Option<watch::Receiver<bool>> {
        let mut inner = self.lock();
        inner.shutting_down = true;
        self.board.set_state(ServiceState::ShuttingDown);
        self.board.set_next_pass(None);
        inner.current.as_ref().map(|c| {
            let _ = c.stop.send(Some(reason.to_string()));
            c.done.clone()
        })
    }

    /// Runs the daily schedule until `shutdown` turns true.
    pub async fn schedule_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        if crate::config::schedule_off(&self.settings.service.schedule) {
            tracing::info!("service.schedule = off: passes start only on trigger");
            return;
        }
        let Ok(secs) = crate::config::parse_schedule(&self.settings.service.schedule) else {
            // validate() already refused a bad schedule; nothing to run.
            return;
        };
        let day = self.settings.time.day;
        loop {
            let now = wall_ns();
            let next = next_start(now, secs, day);
            self.board.set_next_pass(Some(next));
            let wait = Duration::from_nanos(u64::try_from(next - now).unwrap_or(0));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|v| *v) => return,
            }
            let Some(mut running) = self.start_scheduled() else {
                continue;
            };
            // A pass that outlasts its day would otherwise push the next
            // one a whole day on: what fell due since its `now` would wait
            // up to two days. The scheduled pass starts as soon as it ends.
            tokio::select! {
                _ = running.wait_for(|v| *v) => {}
                _ = shutdown.wait_for(|v| *v) => return,
            }
            self.start_scheduled();
        }
    }

    /// Starts a scheduled pass; when one is still running, answers the
    /// receiver that turns `true` when it has ended (the start is deferred
    /// to then).
    fn start_scheduled(self: &Arc<Self>) -> Option<watch::Receiver<bool>> {
        // Twice at most: a pass that ends between the refusal and the look
        // at it leaves no pass to wait for, and the second start runs.
        for _ in 0..2 {
            match self.start(TriggerRequest::default(), Cause::Schedule) {
                Ok(a) if a.already_running => {
                    if let Some(c) = self.lock().current.as_ref() {
                        tracing::warn!(
                            run_id = a.run_id,
                            "scheduled pass deferred: a pass is still running; it starts when that one ends"
                        );
                        return Some(c.done.clone());
                    }
                }
                Ok(_) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, "scheduled pass not started");
                    return None;
                }
            }
        }
        None
    }
}

/// The admin API over the service.
pub struct Backend(pub Arc<Service>);

impl AdminBackend for Backend {
    fn trigger(
        &self,
        req: TriggerRequest,
    ) -> BoxFuture<'static, Result<TriggerAccepted, AdminError>> {
        let r = self.0.start(req, Cause::Trigger);
        async move { r }.boxed()
    }

    fn status(&self) -> BoxFuture<'static, Result<StatusSnapshot, AdminError>> {
        let s = self.0.board.snapshot();
        async move { Ok(s) }.boxed()
    }

    fn last_run(&self) -> BoxFuture<'static, Result<Option<PassSummary>, AdminError>> {
        let s = self.0.board.snapshot().last_pass;
        async move { Ok(s) }.boxed()
    }

    fn pause(
        &self,
        bucket: String,
        reason: String,
        create_if_missing: bool,
    ) -> BoxFuture<'static, Result<Paused, AdminError>> {
        let controls = self.0.controls.get().cloned();
        async move {
            let c = controls.ok_or_else(not_connected)?;
            if !create_if_missing {
                c.check_exists(
                    &bucket,
                    "; to pause it before it is created, add --create-if-missing",
                )
                .await?;
            }
            let (r, was_paused) = controls_for(&*c.port, "pause", &bucket, "pauses")
                .map_err(unavailable)?
                .pause(&bucket, wall_ns(), &reason)
                .await
                .map_err(unavailable)?;
            tracing::warn!(
                bucket,
                reason = r.reason,
                was_paused,
                "bucket paused: passes leave it alone until resume"
            );
            c.refresh().await;
            Ok(Paused {
                paused_ns: r.paused_ns,
                was_paused,
                reason: r.reason,
            })
        }
        .boxed()
    }

    fn resume(&self, bucket: String) -> BoxFuture<'static, Result<bool, AdminError>> {
        let controls = self.0.controls.get().cloned();
        async move {
            let c = controls.ok_or_else(not_connected)?;
            let was = controls_for(&*c.port, "resume", &bucket, "pauses")
                .map_err(unavailable)?
                .resume(&bucket)
                .await
                .map_err(unavailable)?;
            tracing::info!(bucket, was_paused = was, "bucket resumed");
            c.refresh().await;
            Ok(was)
        }
        .boxed()
    }

    fn approve(&self, bucket: String) -> BoxFuture<'static, Result<Approved, AdminError>> {
        let controls = self.0.controls.get().cloned();
        async move {
            let c = controls.ok_or_else(not_connected)?;
            c.check_exists(&bucket, "").await?;
            let store =
                controls_for(&*c.port, "approve", &bucket, "approvals").map_err(unavailable)?;
            let r = store
                .approve(&bucket, wall_ns())
                .await
                .map_err(unavailable)?;
            // An approval with nothing held is kept for the next pass that
            // would cap the bucket; say so rather than imply work was released.
            // The approval is written: a failed read of the holds only
            // loses the nuance, so the plain wording is kept.
            let held = match store.holds().await {
                Ok(holds) => holds.iter().any(|h| h.bucket == bucket),
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "approved; reading the holds failed");
                    true
                }
            };
            tracing::warn!(
                bucket,
                held,
                "bucket approved: the next pass does not cap it"
            );
            Ok(Approved {
                approved_ns: r.approved_ns,
                held,
            })
        }
        .boxed()
    }

    fn forecast(
        &self,
        bucket: Option<String>,
        days: u32,
        now: i64,
    ) -> BoxFuture<'static, Result<crate::engine::forecast::Forecast, AdminError>> {
        let controls = self.0.controls.get().cloned();
        let time = self.0.settings.time.time_config();
        async move {
            let c = controls.ok_or_else(not_connected)?;
            if let Some(b) = bucket.as_deref() {
                c.check_exists(b, "").await?;
            }
            let cursors = c.cursors().await.map_err(unavailable)?;
            Ok(crate::engine::forecast::Forecast::of(
                &cursors,
                &time,
                now,
                days,
                bucket.as_deref(),
            ))
        }
        .boxed()
    }
}

fn not_connected() -> AdminError {
    unavailable("the service has not reached the cluster yet; try again")
}

fn unavailable(e: impl ToString) -> AdminError {
    AdminError::Unavailable(e.to_string())
}

/// What pause and resume act on: the cluster's pause files, and the metrics
/// and board that show them.
#[derive(Clone)]
pub struct Controls {
    port: Arc<dyn ClusterPort>,
    obs: PassObserver,
}

impl Controls {
    /// `NotFound` when the cluster has no bucket `bucket`, naming those it
    /// has (a typo must not pass for a paused or approved bucket); `hint`
    /// ends the message.
    pub async fn check_exists(&self, bucket: &str, hint: &str) -> Result<(), AdminError> {
        // One lookup answers the usual case; the whole scan (every bucket's
        // lifecycle document) is read only to word a refusal.
        let root = self.port.buckets_root();
        if let Ok(Some(e)) = self.port.lookup(&root, bucket).await
            && e.is_directory
        {
            return Ok(());
        }
        let scan = self.port.buckets().await.map_err(unavailable)?;
        crate::engine::names::check_exists(bucket, scan.names())
            .map_err(|e| AdminError::NotFound(format!("{e}{hint}")))
    }

    /// Re-reads the paused buckets and shows them; a failed read keeps what
    /// was shown (logged).
    pub async fn refresh(&self) {
        match on_controls(&*self.port, |c| async move { c.paused().await }).await {
            Ok(p) => self.obs.paused(&p),
            Err(e) => tracing::warn!(error = %e, "reading the paused buckets failed"),
        }
    }

    /// The 16 shard cursors (`None`: the shard has none yet).
    pub async fn cursors(&self) -> Result<Vec<Option<ShardCursor>>, ClusterError> {
        cursors_after(&*self.port, &BTreeMap::new()).await
    }

    /// Publishes the forecast as of `now` (docs/forecast.md): lag gauges and
    /// the status page. `saved` holds the cursors the pass that just ended
    /// saved (empty at start-up): they are the filer's copies, so only the
    /// other shards' cursors are read (docs/forecast.md#refresh). A failed
    /// read keeps what was shown (logged); it never affects a pass.
    pub async fn refresh_forecast(
        &self,
        time: &crate::engine::TimeConfig,
        now: i64,
        saved: &BTreeMap<u8, ShardCursor>,
    ) {
        let cursors = match cursors_after(&*self.port, saved).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "reading the cursors for the forecast failed");
                return;
            }
        };
        let from_pass = cursors.len().min(saved.len());
        tracing::debug!(
            cursors_from_pass = from_pass,
            cursors_read = cursors.len() - from_pass,
            "forecast refreshed"
        );
        self.obs.forecast(crate::engine::forecast::Forecast::of(
            &cursors,
            time,
            now,
            FORECAST_DAYS,
            None,
        ));
    }
}

/// The 16 shard cursors: those in `saved` as given (a pass just saved them),
/// the others read from the filer.
async fn cursors_after(
    port: &dyn ClusterPort,
    saved: &BTreeMap<u8, ShardCursor>,
) -> Result<Vec<Option<ShardCursor>>, ClusterError> {
    let mut cursors = Vec::with_capacity(crate::engine::SHARD_COUNT);
    for shard in 0..crate::engine::SHARD_COUNT as u8 {
        cursors.push(match saved.get(&shard) {
            Some(c) => Some(c.clone()),
            None => port.load_cursor(shard).await?,
        });
    }
    Ok(cursors)
}

/// Days of forecast on the status page and in the lag gauges' source.
pub const FORECAST_DAYS: u32 = 30;

/// Keeps the "buckets without a recent pass" report current: every
/// `day / 24` (1 s to 1 h), and as soon as a pass of this service finished,
/// it reads the bucket list and the 16 shard cursors and publishes the
/// buckets no pass finished lately, on the status page and in metrics. A
/// bucket outside `pass.buckets` (when set) is another instance's business
/// and is not reported.
pub async fn stale_watch(
    port: Arc<dyn ClusterPort>,
    board: Arc<StatusBoard>,
    metrics: crate::metrics::Metrics,
    settings: Settings,
    mut shutdown: watch::Receiver<bool>,
) {
    // Reported past 2 lifecycle days: a daily schedule that missed one day is still fine.
    let after = settings.time.day.saturating_mul(2);
    let after_ns = i64::try_from(after.as_nanos()).unwrap_or(i64::MAX);
    let period = (settings.time.day / 24).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    // With 24 h days the timer alone left every bucket a pass had just
    // enforced listed as "never run" for up to an hour after it.
    let mut snaps = board.subscribe();
    let mut seen = last_run_id(&board.snapshot());
    loop {
        match stale_now(&*port, &settings.pass.buckets, after_ns).await {
            Ok(list) => {
                metrics.stale_buckets(&list);
                board.set_stale(list, after_ns);
            }
            Err(e) => tracing::warn!(error = %e, "cannot check which buckets went without a pass"),
        }
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = next_finished_pass(&mut snaps, &mut seen) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

fn last_run_id(s: &StatusSnapshot) -> Option<String> {
    s.last_pass.as_ref().map(|p| p.run_id.clone())
}

/// Returns once the board shows a finished pass other than `seen` (and
/// records it); never when the board is gone.
async fn next_finished_pass(
    snaps: &mut watch::Receiver<StatusSnapshot>,
    seen: &mut Option<String>,
) {
    loop {
        if snaps.changed().await.is_err() {
            return std::future::pending().await;
        }
        let id = last_run_id(&snaps.borrow_and_update());
        if id != *seen {
            *seen = id;
            return;
        }
    }
}

async fn stale_now(
    port: &dyn ClusterPort,
    only: &[String],
    after_ns: i64,
) -> Result<Vec<crate::status::StaleBucket>, ClusterError> {
    let scan = port.buckets().await?;
    let mut names: Vec<String> = scan
        .buckets
        .iter()
        .filter(|b| b.lifecycle_xml.is_some())
        .map(|b| b.name.clone())
        .chain(scan.errors.iter().map(|e| e.bucket.clone()))
        .filter(|b| only.is_empty() || only.contains(b))
        .collect();
    names.sort();
    names.dedup();
    let cursors = cursors_after(port, &BTreeMap::new()).await?;
    Ok(crate::status::stale_buckets(
        &names,
        &cursors,
        wall_ns(),
        after_ns,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn real_day_fires_at_the_utc_time_of_day() {
        let day = Duration::from_secs(86_400);
        // 2026-01-02T00:00:00Z
        let midnight = 1_767_312_000 * S;
        assert_eq!(next_start(midnight, 1800, day), midnight + 1800 * S);
        // Exactly at the start: the next one is a day later.
        assert_eq!(
            next_start(midnight + 1800 * S, 1800, day),
            midnight + 86_400 * S + 1800 * S
        );
        assert_eq!(
            next_start(midnight + 3600 * S, 1800, day),
            midnight + 86_400 * S + 1800 * S
        );
    }

    #[test]
    fn a_now_far_in_the_future_is_refused_unless_dry_run_or_opted_in() {
        let wall = 1_767_312_000 * S;
        // No `now`, the past, and up to the tolerance: accepted.
        for now in [None, Some(wall - 86_400 * S), Some(wall + 300 * S)] {
            assert_eq!(check_trigger_now(now, wall, false, false), Ok(()));
        }
        let far = Some(wall + 301 * S);
        let e = check_trigger_now(far, wall, false, false).unwrap_err();
        assert!(
            e.contains("service.allow_future_now") && e.contains("--dry-run"),
            "{e}"
        );
        assert_eq!(check_trigger_now(far, wall, true, false), Ok(()));
        assert_eq!(check_trigger_now(far, wall, false, true), Ok(()));
        // 2262: the largest `now` an i64 of ns holds; no overflow.
        assert!(check_trigger_now(Some(i64::MAX), i64::MIN, false, false).is_err());
        assert_eq!(far_future(wall + 300 * S, wall), None);
        assert_eq!(
            far_future(wall + 3600 * S, wall),
            Some(Duration::from_secs(3600))
        );
    }

    #[test]
    fn short_day_scales_the_offset() {
        let day = Duration::from_secs(10);
        // 12:00 is half a day: 5 s into every 10 s.
        assert_eq!(next_start(100 * S, 12 * 3600, day), 105 * S);
        assert_eq!(next_start(105 * S, 12 * 3600, day), 115 * S);
        assert_eq!(next_start(106 * S, 0, day), 110 * S);
    }
}
