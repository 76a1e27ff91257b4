//! Prometheus metrics: one typed method per emitted event over a private
//! `prometheus-client` registry (no globals, so tests and several instances in
//! one process never share counters).
//!
//! # Names
//! Where the meaning is the Go worker's, the name is the Go worker's
//! (`SeaweedFS_s3_lifecycle_*`, docs/go-cursor.md#go-metrics), so existing dashboards and
//! alerts keep working after the switch. README.md ("HTTP: metrics, health,
//! status page") lists every exposed name; each is emitted by the method of
//! [`Metrics`] named after its event.
//!
//! The design's three per-run metrics (docs/go-cursor.md#go-metrics:
//! `daily_run_duration_seconds`,
//! `daily_run_events_scanned`, `daily_run_deletes_issued`, labelled by shard
//! and *run* outcome) describe the shard's most recent run. The two counts are
//! gauges, not counters, for two reasons: a counter named
//! `…daily_run_events_scanned` would be exposed as `…_events_scanned_total`,
//! colliding with the Go worker's per-event counter of that exact name; and
//! "how much did the last run do" is a gauge question. Only the series for the
//! latest outcome of a shard is kept, so `sum by (shard)` is that run's value.
//!
//! # Exposition
//! [`Metrics::encode`] produces the Prometheus text format 0.0.4 (what the Go
//! worker's `promhttp` serves and every Prometheus 2.x/3.x scrapes); serve it
//! with [`CONTENT_TYPE`]. It is *not* OpenMetrics, on purpose: in OpenMetrics a
//! counter's family name drops `_total`, so the Go counter
//! `…daily_run_events_scanned_total{shard}` and the design's gauge
//! `…daily_run_events_scanned{shard,outcome}` would be two families with one
//! name, which scrapers reject. In 0.0.4 they are distinct. prometheus-client
//! only writes OpenMetrics, so [`Metrics::encode`] converts its output: counter
//! families are renamed to their `_total` sample name in `# HELP`/`# TYPE`,
//! and the `# EOF` trailer is dropped. Counters are registered *without*
//! `_total` because the encoder appends it; a test pins every exposed line.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use crate::engine::{ActionKind, DeleteOutcome};
use crate::status::{MatchDecision, RunOutcome};

/// HTTP `Content-Type` of [`Metrics::encode`]'s output (Prometheus text 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Go worker prefix (`Namespace` + `Subsystem`), kept for dashboard parity.
const GO_PREFIX: &str = "SeaweedFS_s3_lifecycle_";
/// Prefix of metrics the Go worker has no equivalent for.
const OWN_PREFIX: &str = "s3_lifecycled_";

/// Buckets of the limiter-wait histogram: the Go worker's, so quantiles
/// computed across a mixed fleet during cutover stay comparable.
const LIMITER_WAIT_BUCKETS: [f64; 11] = [
    0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Buckets of the per-shard run duration histograms (the Go worker's).
const RUN_DURATION_BUCKETS: [f64; 10] =
    [0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0];

mod labels;
mod text;

use labels::*;
use text::openmetrics_to_prometheus_text;

/// A count as a gauge value. Saturate rather than wrap: a count beyond
/// i64::MAX is not reachable in practice, but a negative gauge would be a lie.
fn gauge_value(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Sets `family` to exactly `rows`, one series per bucket: every other
/// bucket's series is removed.
fn replace_buckets<'a>(
    family: &Family<BucketLabels, Gauge>,
    rows: impl IntoIterator<Item = (&'a str, i64)>,
) {
    family.clear();
    for (b, value) in rows {
        family.get_or_create(&bucket(b)).set(value);
    }
}

/// The registry while [`Metrics::new`] fills it: each call registers one
/// metric under its prefix and hands it back (clones share the series), so
/// the registration order, which is the exposition order, is the order the
/// fields are written in.
struct Registrar(Registry);

impl Registrar {
    /// A Go worker metric (`SeaweedFS_s3_lifecycle_` + `name`), starting empty.
    fn go<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.go_with(name, help, M::default())
    }

    /// [`Registrar::go`] for a metric that needs a constructor.
    fn go_with<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0
            .register(format!("{GO_PREFIX}{name}"), help, metric.clone());
        metric
    }

    /// A metric of our own (`s3_lifecycled_` + `name`), starting empty.
    fn own<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        let metric = M::default();
        self.0
            .register(format!("{OWN_PREFIX}{name}"), help, metric.clone());
        metric
    }
}

/// All metrics of one s3-lifecycled instance. Cheap to clone; clones share
/// the same series (hand one to every actor).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    dispatch: Family<DispatchLabels, Counter>,
    cursor_min_ts_ns: Family<ShardLabels, Gauge>,
    last_walked_ns: Family<ShardLabels, Gauge>,
    events_scanned_total: Family<ShardLabels, Counter>,
    limiter_wait: Histogram,
    shard_duration: HistogramFamily<ShardLabels>,
    run_duration: HistogramFamily<ShardOutcomeLabels>,
    run_events_scanned: Family<ShardOutcomeLabels, Gauge>,
    run_deletes_issued: Family<ShardOutcomeLabels, Gauge>,
    shard_restarts: Family<ShardLabels, Counter>,
    shard_halted: Family<ShardLabels, Gauge>,
    pass_total: Family<OutcomeLabels, Counter>,
    last_pass_timestamp: Gauge<f64, std::sync::atomic::AtomicU64>,
    last_pass_events_read: Gauge,
    last_pass_ranges_read: Gauge,
    go_worker_shards: Gauge,
    last_pass_read_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    matches: Family<MatchLabels, Counter>,
    checks: Family<CheckLabels, Counter>,
    bucket_config_errors: Family<BucketLabels, Gauge>,
    skipped_no_mtime: Family<ShardLabels, Counter>,
    bucket_paused: Family<BucketLabels, Gauge>,
    bucket_held: Family<BucketLabels, Gauge>,
    stale_bucket: Family<BucketLabels, Gauge>,
    stale_count: Gauge,
    instance_active: Gauge,
    matches_pending: Family<RuleLabels, Gauge>,
    matches_overdue: Family<RuleLabels, Gauge>,
    oldest_overdue_age: Family<RuleLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    deleted_bytes: Family<RuleLabels, Counter>,
    deleted_objects: Family<RuleLabels, Counter>,
    collection_garbage: Family<CollectionLabels, Gauge>,
    collection_size: Family<CollectionLabels, Gauge>,
    collection_ratio: Family<CollectionLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    collection_ec_deleted: Family<CollectionLabels, Gauge>,
    collection_read_only_deleted: Family<CollectionLabels, Gauge>,
    ttl_findings: Family<TtlLabels, Gauge>,
    recoveries: Family<ReasonLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered (families start empty;
    /// see [`Metrics::init_shards`]).
    pub fn new() -> Metrics {
        let mut r = Registrar(Registry::default());
        Metrics {
            dispatch: r.go(
                "dispatch",
                "LifecycleDelete calls by bucket, action kind and outcome (enum name or RPC_ERROR)",
            ),
            cursor_min_ts_ns: r.go(
                "cursor_min_ts_ns",
                "Per-shard saved cursor timestamp in ns since epoch (replay lag = now - this)",
            ),
            last_walked_ns: r.go(
                "daily_run_last_walked_ns",
                "Per-shard time (ns since epoch) of the last successful walk; 0 = never walked",
            ),
            events_scanned_total: r.go(
                "daily_run_events_scanned",
                "Meta-log events processed by the daily pass, by shard",
            ),
            limiter_wait: r.go_with(
                "dispatch_limiter_wait_seconds",
                "Time spent waiting on the delete rate limiter before a LifecycleDelete call",
                Histogram::new(LIMITER_WAIT_BUCKETS),
            ),
            shard_duration: r.go_with(
                "daily_run_shard_duration_seconds",
                "Wall-clock seconds of one shard's daily run",
                Family::new_with_constructor(run_duration_histogram),
            ),
            run_duration: r.go_with(
                "daily_run_duration_seconds",
                "Wall-clock seconds of one shard's daily run, by run outcome",
                Family::new_with_constructor(run_duration_histogram),
            ),
            run_events_scanned: r.go(
                "daily_run_events_scanned",
                "Meta-log events scanned by the shard's most recent run, labelled with its outcome",
            ),
            run_deletes_issued: r.go(
                "daily_run_deletes_issued",
                "LifecycleDelete calls issued by the shard's most recent run, labelled with its outcome",
            ),
            shard_restarts: r.own("shard_restarts", "Shard actor restarts by the supervisor"),
            shard_halted: r.own(
                "shard_halted",
                "1 while the shard is halted (head-of-line blocked or stopped by an operator), else 0",
            ),
            pass_total: r.own(
                "pass",
                "Finished passes by outcome (completed, halted, truncated, failed)",
            ),
            last_pass_timestamp: r.own(
                "last_pass_timestamp_seconds",
                "Unix time at which the last pass finished; 0 = none yet",
            ),
            last_pass_events_read: r.own(
                "last_pass_events_read",
                "Meta-log events the last pass's replay read (docs/due-index.md)",
            ),
            last_pass_ranges_read: r.own(
                "last_pass_ranges_read",
                "SubscribeMetadata ranges the last pass's replay read (docs/due-index.md)",
            ),
            go_worker_shards: r.own(
                "go_worker_shards",
                "Shards the Go s3_lifecycle worker ran since this service's last pass over them, as the last pass found (another enforcer: docs/go-cursor.md#another-enforcer); 0 when none",
            ),
            last_pass_read_seconds: r.own(
                "last_pass_read_seconds",
                "Summed length of meta-log time the last pass's replay read",
            ),
            matches: r.own(
                "matches",
                "Actions that matched an entry, by kind and decision (dispatched, pending, skipped)",
            ),
            checks: r.own(
                "check_verdicts",
                "Filer checks that kept a match unresolved or an abort unsent, by verdict (unconfirmed, locked, completed_upload_leftover)",
            ),
            bucket_config_errors: r.own(
                "bucket_config_errors",
                "1 while the bucket's lifecycle configuration cannot be used (its rules are not enforced)",
            ),
            skipped_no_mtime: r.own(
                "entries_skipped_no_mtime",
                "Objects, versions and uploads skipped (never deleted) because they have no real mtime",
            ),
            bucket_paused: r.own(
                "bucket_paused",
                "1 while an operator has paused the bucket (`s3-lifecycled pause`): passes leave it alone",
            ),
            bucket_held: r.own(
                "bucket_held",
                "Deletes the safety cap held in the bucket in the last pass (pending until `s3-lifecycled approve`); no series when none",
            ),
            stale_bucket: r.own(
                "bucket_without_recent_pass",
                "1 while the bucket has a lifecycle configuration but no pass finished it on every shard within 2 lifecycle days",
            ),
            stale_count: r.own(
                "buckets_without_recent_pass",
                "Buckets with a lifecycle configuration but no pass that finished them on every shard within 2 lifecycle days",
            ),
            instance_active: r.own(
                "instance_active",
                "1 while this serve runs its shards, 0 while it stands by for another serve on the same cursor dir (docs/serve-instances.md)",
            ),
            matches_pending: r.own(
                "matches_pending",
                "Matches seen by replay and not due yet, per bucket and rule, as of the last pass (docs/forecast.md)",
            ),
            matches_overdue: r.own(
                "matches_overdue",
                "Matches due but not deleted yet (paused, held by a cap or grace, halted, failed), per bucket and rule, as of the last pass",
            ),
            oldest_overdue_age: r.own(
                "oldest_overdue_age_seconds",
                "Age of the oldest overdue match (now − its due time), per bucket and rule; 0 without one",
            ),
            deleted_bytes: r.own(
                "deleted_bytes",
                "Bytes removed by DONE lifecycle deletes, per bucket and rule (an upload counts its parts; docs/reclaimed-space.md)",
            ),
            deleted_objects: r.own(
                "deleted_objects",
                "Entries removed by DONE lifecycle deletes, per bucket and rule",
            ),
            collection_garbage: r.own(
                "collection_garbage_bytes",
                "Deleted bytes still on disk (volume garbage, all replicas) of a collection a pass deleted from, as the master reported after it",
            ),
            collection_size: r.own(
                "collection_size_bytes",
                "Disk bytes of a collection's volumes (all replicas), as the master reported after the last pass that deleted from it",
            ),
            collection_ratio: r.own(
                "collection_garbage_ratio",
                "Garbage over size of a collection's volumes; the master vacuums a volume past its -garbageThreshold (0.3)",
            ),
            collection_ec_deleted: r.own(
                "collection_ec_deleted_bytes",
                "Bytes the last pass that deleted from a collection deleted from its erasure-coded volumes: no vacuum compacts those, ec.decode does (docs/reclaimed-space.md#erasure-coded)",
            ),
            collection_read_only_deleted: r.own(
                "collection_read_only_deleted_bytes",
                "Bytes the last pass that deleted from a collection deleted from its read-only volumes: one marked read-only without deletes refuses them (docs/reclaimed-space.md#read-only)",
            ),
            ttl_findings: r.own(
                "ttl_findings",
                "TTLs outside the lifecycle documents found by the last audit, per bucket, source (location, entries, volumes) and conflict (none when harmless today); docs/ttl-audit.md",
            ),
            recoveries: r.own(
                "recoveries",
                "Buckets a shard walked from the start to recover its progress, by reason (cold_start, rule_edit, partition_flip, retention_loss, filer_lost; docs/design-deviations.md#recovery-triggers)",
            ),
            registry: Arc::new(r.0),
        }
    }

    /// Creates the zero-valued per-shard series (halted = 0, restarts = 0,
    /// events scanned = 0) for the shards this instance runs, so dashboards
    /// and `absent()`-free alerts see a 0 rather than no data before the first
    /// event.
    pub fn init_shards(&self, shards: &[u8]) {
        for &s in shards {
            self.shard_halted.get_or_create(&shard(s)).set(0);
            let _ = self.shard_restarts.get_or_create(&shard(s));
            let _ = self.events_scanned_total.get_or_create(&shard(s));
        }
    }

    /// One `LifecycleDelete` finished. The `outcome` label is
    /// [`DeleteOutcome::label`]: the response's enum name or `RPC_ERROR`
    /// after transport retries ran out (the labels the Go worker uses), or
    /// `DRY_RUN`.
    pub fn dispatch(&self, bucket: &str, kind: ActionKind, outcome: DeleteOutcome) {
        self.dispatch
            .get_or_create(&DispatchLabels {
                bucket: bucket.to_string(),
                kind: kind.as_str(),
                outcome: outcome.label(),
            })
            .inc();
    }

    /// A shard's cursor was saved: its replay position and last walk time
    /// (both ns since epoch; `last_walked_ns` 0 = never walked).
    pub fn cursor_saved(&self, shard_id: u8, ts_ns: i64, last_walked_ns: i64) {
        let labels = shard(shard_id);
        self.cursor_min_ts_ns.get_or_create(&labels).set(ts_ns);
        self.last_walked_ns
            .get_or_create(&labels)
            .set(last_walked_ns);
    }

    /// `n` meta-log events were processed by a shard (call per event or per
    /// batch; only the sum matters).
    pub fn events_scanned(&self, shard_id: u8, n: u64) {
        self.events_scanned_total
            .get_or_create(&shard(shard_id))
            .inc_by(n);
    }

    /// A delete waited `waited` on the rate limiter before being sent.
    pub fn limiter_wait(&self, waited: Duration) {
        self.limiter_wait.observe(waited.as_secs_f64());
    }

    /// A shard's run ended. Records the duration in both histograms and
    /// replaces the shard's "last run" gauges with this run's counts under
    /// this outcome (series of the shard's other outcomes are removed).
    pub fn shard_run_finished(
        &self,
        shard_id: u8,
        outcome: RunOutcome,
        duration: Duration,
        events_scanned: u64,
        deletes_issued: u64,
    ) {
        let secs = duration.as_secs_f64();
        let labels = shard_outcome(shard_id, outcome);
        self.shard_duration
            .get_or_create(&shard(shard_id))
            .observe(secs);
        self.run_duration.get_or_create(&labels).observe(secs);
        for other in RunOutcome::ALL.into_iter().filter(|o| *o != outcome) {
            self.run_events_scanned
                .remove(&shard_outcome(shard_id, other));
            self.run_deletes_issued
                .remove(&shard_outcome(shard_id, other));
        }
        let (events, deletes) = (gauge_value(events_scanned), gauge_value(deletes_issued));
        self.run_events_scanned.get_or_create(&labels).set(events);
        self.run_deletes_issued.get_or_create(&labels).set(deletes);
    }

    /// A shard skipped `n` entries without a real mtime in its run
    /// (docs/filer-layout.md#entries-without-attributes).
    pub fn skipped_no_mtime(&self, shard_id: u8, n: u64) {
        if n > 0 {
            self.skipped_no_mtime
                .get_or_create(&shard(shard_id))
                .inc_by(n);
        }
    }

    /// The supervisor restarted a shard actor.
    pub fn shard_restarted(&self, shard_id: u8) {
        self.shard_restarts.get_or_create(&shard(shard_id)).inc();
    }

    /// A shard entered (`true`) or left (`false`) the halted state.
    pub fn shard_halted(&self, shard_id: u8, halted: bool) {
        self.shard_halted
            .get_or_create(&shard(shard_id))
            .set(i64::from(halted));
    }

    /// A whole pass finished at `finished_ns` (ns since epoch; the caller's
    /// clock, so tests control it).
    pub fn pass_finished(&self, outcome: RunOutcome, finished_ns: i64) {
        self.pass_total
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            })
            .inc();
        self.last_pass_timestamp.set(finished_ns as f64 / 1e9);
    }

    /// One shard recovers one bucket for `reason` (`RecoveryReason::as_str`).
    pub fn recovered(&self, reason: &'static str) {
        self.recoveries
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// What the pass's replay read: `events` delivered over `ranges`
    /// subscriptions covering `span_ns` of meta-log time.
    pub fn replay_read(&self, events: u64, ranges: usize, span_ns: i64) {
        self.last_pass_events_read.set(gauge_value(events));
        self.last_pass_ranges_read.set(gauge_value(ranges));
        self.last_pass_read_seconds.set(span_ns as f64 / 1e9);
    }

    /// The shards the last pass found the Go worker had run
    /// (docs/go-cursor.md#another-enforcer).
    pub fn go_worker_shards(&self, n: usize) {
        self.go_worker_shards.set(gauge_value(n));
    }

    /// `n` matches of `kind` with `decision`, as a shard reports them at its end.
    pub fn matched_n(&self, kind: ActionKind, decision: MatchDecision, n: u64) {
        self.matches
            .get_or_create(&MatchLabels {
                kind: kind.as_str(),
                decision: decision.as_str(),
            })
            .inc_by(n);
    }

    /// A filer check around a delete of `kind` in `bucket` ended with
    /// `verdict`: `unconfirmed` (a "nothing to do" answer not confirmed, or
    /// an abort's stamp check undecided; retried next pass), `locked`, or
    /// `completed_upload_leftover` (an abort not sent).
    pub fn check_verdict(&self, bucket: &str, kind: ActionKind, verdict: &'static str) {
        self.checks
            .get_or_create(&CheckLabels {
                bucket: bucket.to_string(),
                kind: kind.as_str(),
                verdict,
            })
            .inc();
    }

    /// A bucket's lifecycle configuration failed to load (`true`) or loads
    /// again (`false`). A fixed or deleted bucket's series is removed rather
    /// than set to 0, so the label set does not grow without bound.
    pub fn bucket_config_error(&self, bucket: &str, failing: bool) {
        let labels = labels::bucket(bucket);
        if failing {
            self.bucket_config_errors.get_or_create(&labels).set(1);
        } else {
            self.bucket_config_errors.remove(&labels);
        }
    }

    /// The paused buckets are exactly `buckets`: their series are 1, every
    /// other bucket's series is removed (a resumed bucket's series goes away
    /// rather than turning 0, so the label set does not grow without bound).
    pub fn paused_buckets<'a>(&self, buckets: impl IntoIterator<Item = &'a str>) {
        replace_buckets(&self.bucket_paused, buckets.into_iter().map(|b| (b, 1)));
    }

    /// The buckets the last pass held, with the deletes held in each
    /// (would delete − cap); every other bucket's series is removed.
    pub fn held_buckets<'a>(&self, held: impl IntoIterator<Item = (&'a str, u64)>) {
        replace_buckets(
            &self.bucket_held,
            held.into_iter().map(|(b, n)| (b, gauge_value(n))),
        );
    }

    /// Whether this `serve` runs its shards (1) or stands by (0).
    pub fn instance_active(&self, active: bool) {
        self.instance_active.set(i64::from(active));
    }

    /// The stale buckets now (replaces the previous set; a bucket that is
    /// enforced again loses its series).
    pub fn stale_buckets(&self, stale: &[crate::status::StaleBucket]) {
        let rows = stale.iter().map(|b| (b.bucket.as_str(), 1));
        replace_buckets(&self.stale_bucket, rows);
        self.stale_count.set(gauge_value(stale.len()));
    }

    /// What a pass's DONE deletes removed, per bucket and rule
    /// (docs/reclaimed-space.md).
    pub fn freed(&self, freed: &crate::engine::reclaim::FreedByRule) {
        for ((bucket, rule), f) in freed {
            let (bucket, rule) = (bucket.clone(), rule.clone());
            let l = RuleLabels { bucket, rule };
            self.deleted_bytes.get_or_create(&l).inc_by(f.bytes);
            self.deleted_objects.get_or_create(&l).inc_by(f.objects);
        }
    }

    /// The touched collections' size and garbage after a pass; other
    /// collections keep the series of the last pass that touched them.
    pub fn collections(&self, collections: &[crate::engine::reclaim::CollectionGarbage]) {
        for c in collections {
            let l = CollectionLabels {
                collection: c.collection.clone(),
            };
            let (garbage, size) = (gauge_value(c.garbage_bytes), gauge_value(c.size_bytes));
            self.collection_garbage.get_or_create(&l).set(garbage);
            self.collection_size.get_or_create(&l).set(size);
            self.collection_ratio.get_or_create(&l).set(c.ratio());
            self.collection_ec_deleted
                .get_or_create(&l)
                .set(gauge_value(c.ec_deleted_bytes));
            self.collection_read_only_deleted
                .get_or_create(&l)
                .set(gauge_value(c.read_only_deleted_bytes));
        }
    }

    /// The lag gauges from a forecast (docs/forecast.md): one series per
    /// bucket and rule (kinds summed), replacing the previous set so a
    /// removed rule's series goes away.
    pub fn forecast(&self, f: &crate::engine::forecast::Forecast) {
        let mut rows: BTreeMap<RuleLabels, (u64, u64, f64)> = BTreeMap::new();
        for r in &f.rules {
            let bucket = r.bucket.clone();
            let rule = crate::status::rule_name(&r.rule_id, &r.rule_hash).to_string();
            let e = rows.entry(RuleLabels { bucket, rule }).or_default();
            e.0 += r.pending();
            e.1 += r.overdue.objects;
            e.2 = e.2.max(r.oldest_overdue_age_secs(f.now_ns));
        }
        self.matches_pending.clear();
        self.matches_overdue.clear();
        self.oldest_overdue_age.clear();
        for (l, (pending, overdue, age)) in rows {
            let (pending, overdue) = (gauge_value(pending), gauge_value(overdue));
            self.matches_pending.get_or_create(&l).set(pending);
            self.matches_overdue.get_or_create(&l).set(overdue);
            self.oldest_overdue_age.get_or_create(&l).set(age);
        }
    }

    /// The last legacy-TTL audit: one series per bucket, source and
    /// conflict kind; the previous audit's series are dropped.
    pub fn ttl_audit(&self, r: &crate::engine::audit::AuditReport) {
        let mut rows: BTreeMap<TtlLabels, i64> = BTreeMap::new();
        for f in &r.findings {
            let source = f.source.as_str().to_string();
            let kinds: Vec<String> = if f.conflicts.is_empty() {
                vec!["none".into()]
            } else {
                f.conflicts.iter().map(|c| c.kind().to_string()).collect()
            };
            for conflict in kinds {
                let (bucket, source) = (f.bucket.clone(), source.clone());
                *rows
                    .entry(TtlLabels {
                        bucket,
                        source,
                        conflict,
                    })
                    .or_default() += 1;
            }
        }
        self.ttl_findings.clear();
        for (l, n) in rows {
            self.ttl_findings.get_or_create(&l).set(n);
        }
    }

    /// The Prometheus text (0.0.4) exposition of every series (serve with
    /// [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut om = String::new();
        // Writing into a String cannot fail; an Err here could only come from
        // a label value's Display, and ours are plain strings.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut om, &self.registry) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        openmetrics_to_prometheus_text(&om)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(m: &Metrics) -> Vec<String> {
        m.encode().lines().map(str::to_string).collect()
    }

    /// The module docs leave the list of names to the README: a family it
    /// does not name is one an operator cannot find. Not touched here: the
    /// forecast, freed-bytes and TTL-audit families, whose inputs take a
    /// pass's worth of building (their own tests pin their lines).
    #[test]
    fn every_exposed_metric_is_in_the_readme() {
        let readme = include_str!("../../README.md");
        let m = Metrics::new();
        touch_every_family(&m);
        m.check_verdict("b", ActionKind::ExpirationDays, "locked");
        m.skipped_no_mtime(0, 1);
        m.paused_buckets(["b"]);
        m.held_buckets([("b", 1)]);
        m.stale_buckets(&[crate::status::StaleBucket {
            bucket: "b".into(),
            last_completed_ns: 0,
        }]);
        m.collections(&[crate::engine::reclaim::CollectionGarbage {
            collection: "b".into(),
            ..Default::default()
        }]);
        let families: Vec<String> = lines(&m)
            .iter()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        assert!(families.len() >= 25, "{families:?}");
        let missing: Vec<&String> = families
            .iter()
            .filter(|f| !readme.contains(f.as_str()))
            .collect();
        assert!(missing.is_empty(), "README.md does not name {missing:?}");
    }

    /// Every non-blank line of `want`, trimmed, is a line of the exposition.
    fn has(m: &Metrics, want: &str) {
        let text = m.encode();
        for line in want.lines().map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                text.lines().any(|l| l == line),
                "missing line `{line}` in:\n{text}"
            );
        }
    }

    fn lacks_prefix(m: &Metrics, prefix: &str) {
        let text = m.encode();
        assert!(
            !text.lines().any(|l| l.starts_with(prefix)),
            "unexpected `{prefix}…` in:\n{text}"
        );
    }

    /// A sample in every family.
    fn touch_every_family(m: &Metrics) {
        m.dispatch("b", ActionKind::ExpirationDays, DeleteOutcome::Done);
        m.cursor_saved(0, 1, 1);
        m.events_scanned(0, 1);
        m.limiter_wait(Duration::ZERO);
        m.shard_run_finished(0, RunOutcome::Completed, Duration::ZERO, 1, 1);
        m.shard_restarted(0);
        m.shard_halted(0, true);
        m.pass_finished(RunOutcome::Completed, 1);
        m.matched_n(ActionKind::ExpirationDays, MatchDecision::Dispatched, 1);
        m.bucket_config_error("b", true);
        m.recovered("filer_lost");
    }

    /// Bytes deleted from erasure-coded and read-only volumes, which no
    /// garbage figure shows, had no series (docs/reclaimed-space.md).
    #[test]
    fn erasure_coded_and_read_only_deleted_bytes_had_no_series() {
        let m = Metrics::new();
        m.collections(&[crate::engine::reclaim::CollectionGarbage {
            collection: "b".into(),
            garbage_bytes: 3,
            ec_deleted_bytes: 5,
            read_only_deleted_bytes: 7,
            ..Default::default()
        }]);
        has(
            &m,
            r#"
            s3_lifecycled_collection_garbage_bytes{collection="b"} 3
            s3_lifecycled_collection_ec_deleted_bytes{collection="b"} 5
            s3_lifecycled_collection_read_only_deleted_bytes{collection="b"} 7
            "#,
        );
    }

    #[test]
    fn exposition_is_prometheus_text_and_declares_every_family() {
        let m = Metrics::new();
        // Before any event only the unlabelled metrics have samples.
        has(
            &m,
            r#"
            s3_lifecycled_last_pass_timestamp_seconds 0.0
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_count 0
            "#,
        );
        lacks_prefix(&m, "SeaweedFS_s3_lifecycle_dispatch_total");

        touch_every_family(&m);
        let text = m.encode();
        assert!(!text.contains("# EOF"), "{text}");
        for t in [
            "# TYPE SeaweedFS_s3_lifecycle_dispatch_total counter",
            "# TYPE SeaweedFS_s3_lifecycle_cursor_min_ts_ns gauge",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_last_walked_ns gauge",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_events_scanned_total counter",
            "# TYPE SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds histogram",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_shard_duration_seconds histogram",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_duration_seconds histogram",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_events_scanned gauge",
            "# TYPE SeaweedFS_s3_lifecycle_daily_run_deletes_issued gauge",
            "# TYPE s3_lifecycled_shard_restarts_total counter",
            "# TYPE s3_lifecycled_shard_halted gauge",
            "# TYPE s3_lifecycled_pass_total counter",
            "# TYPE s3_lifecycled_last_pass_timestamp_seconds gauge",
            "# TYPE s3_lifecycled_matches_total counter",
            "# TYPE s3_lifecycled_bucket_config_errors gauge",
            "# TYPE s3_lifecycled_buckets_without_recent_pass gauge",
        ] {
            has(&m, t);
        }
    }

    #[test]
    fn recoveries_are_counted_by_reason() {
        let m = Metrics::new();
        m.recovered("filer_lost");
        m.recovered("filer_lost");
        m.recovered("cold_start");
        has(
            &m,
            r#"
            s3_lifecycled_recoveries_total{reason="filer_lost"} 2
            s3_lifecycled_recoveries_total{reason="cold_start"} 1
            "#,
        );
    }

    #[test]
    fn dispatch_counter_is_exposed_with_total_suffix_once() {
        let m = Metrics::new();
        m.dispatch("photos", ActionKind::ExpirationDays, DeleteOutcome::Done);
        m.dispatch("photos", ActionKind::ExpirationDays, DeleteOutcome::Done);
        m.dispatch("photos", ActionKind::AbortMpu, DeleteOutcome::RpcError);
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_dispatch_total{bucket="photos",kind="expiration_days",outcome="DONE"} 2
            SeaweedFS_s3_lifecycle_dispatch_total{bucket="photos",kind="abort_mpu",outcome="RPC_ERROR"} 1
            "#,
        );
        lacks_prefix(&m, "SeaweedFS_s3_lifecycle_dispatch_total_total");
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.dispatch("a\"b\\c", ActionKind::NoncurrentDays, DeleteOutcome::Done);
        has(
            &m,
            r#"SeaweedFS_s3_lifecycle_dispatch_total{bucket="a\"b\\c",kind="noncurrent_days",outcome="DONE"} 1"#,
        );
    }

    #[test]
    fn cursor_saved_sets_both_gauges() {
        let m = Metrics::new();
        m.cursor_saved(3, 1_700_000_000_000_000_123, 0);
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_cursor_min_ts_ns{shard="3"} 1700000000000000123
            SeaweedFS_s3_lifecycle_daily_run_last_walked_ns{shard="3"} 0
            "#,
        );
        m.cursor_saved(3, 1_700_000_000_000_000_999, 1_700_000_000_000_000_000);
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_cursor_min_ts_ns{shard="3"} 1700000000000000999
            SeaweedFS_s3_lifecycle_daily_run_last_walked_ns{shard="3"} 1700000000000000000
            "#,
        );
    }

    #[test]
    fn events_scanned_total_keeps_the_go_name() {
        let m = Metrics::new();
        m.events_scanned(15, 40);
        m.events_scanned(15, 2);
        has(
            &m,
            r#"SeaweedFS_s3_lifecycle_daily_run_events_scanned_total{shard="15"} 42"#,
        );
    }

    #[test]
    fn limiter_wait_histogram_uses_go_buckets() {
        let m = Metrics::new();
        m.limiter_wait(Duration::from_millis(30));
        m.limiter_wait(Duration::from_secs(20));
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_bucket{le="0.01"} 0
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_bucket{le="0.05"} 1
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_bucket{le="10.0"} 1
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_bucket{le="+Inf"} 2
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_count 2
            SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_sum 20.03
            "#,
        );
    }

    #[test]
    fn shard_run_finished_keeps_only_the_latest_outcome() {
        let m = Metrics::new();
        m.shard_run_finished(2, RunOutcome::Halted, Duration::from_secs(3), 100, 7);
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_daily_run_events_scanned{shard="2",outcome="halted"} 100
            SeaweedFS_s3_lifecycle_daily_run_deletes_issued{shard="2",outcome="halted"} 7
            SeaweedFS_s3_lifecycle_daily_run_shard_duration_seconds_bucket{le="5.0",shard="2"} 1
            SeaweedFS_s3_lifecycle_daily_run_shard_duration_seconds_bucket{le="1.0",shard="2"} 0
            SeaweedFS_s3_lifecycle_daily_run_duration_seconds_count{shard="2",outcome="halted"} 1
            "#,
        );

        m.shard_run_finished(2, RunOutcome::Completed, Duration::from_secs(1), 5, 0);
        has(
            &m,
            r#"SeaweedFS_s3_lifecycle_daily_run_events_scanned{shard="2",outcome="completed"} 5"#,
        );
        lacks_prefix(
            &m,
            r#"SeaweedFS_s3_lifecycle_daily_run_events_scanned{shard="2",outcome="halted"}"#,
        );
        lacks_prefix(
            &m,
            r#"SeaweedFS_s3_lifecycle_daily_run_deletes_issued{shard="2",outcome="halted"}"#,
        );
        // Histograms accumulate across outcomes (they are distributions).
        has(
            &m,
            r#"
            SeaweedFS_s3_lifecycle_daily_run_shard_duration_seconds_count{shard="2"} 2
            SeaweedFS_s3_lifecycle_daily_run_duration_seconds_count{shard="2",outcome="halted"} 1
            SeaweedFS_s3_lifecycle_daily_run_duration_seconds_count{shard="2",outcome="completed"} 1
            "#,
        );
    }

    #[test]
    fn own_counters_and_gauges() {
        let m = Metrics::new();
        m.init_shards(&[0, 1]);
        has(
            &m,
            r#"
            s3_lifecycled_shard_halted{shard="0"} 0
            s3_lifecycled_shard_restarts_total{shard="1"} 0
            SeaweedFS_s3_lifecycle_daily_run_events_scanned_total{shard="1"} 0
            "#,
        );

        m.shard_restarted(1);
        m.shard_halted(0, true);
        has(
            &m,
            r#"
            s3_lifecycled_shard_restarts_total{shard="1"} 1
            s3_lifecycled_shard_halted{shard="0"} 1
            "#,
        );
        m.shard_halted(0, false);
        has(&m, r#"s3_lifecycled_shard_halted{shard="0"} 0"#);

        m.pass_finished(RunOutcome::Truncated, 1_700_000_000_500_000_000);
        has(
            &m,
            r#"
            s3_lifecycled_pass_total{outcome="truncated"} 1
            s3_lifecycled_last_pass_timestamp_seconds 1700000000.5
            "#,
        );

        m.matched_n(ActionKind::ExpiredDeleteMarker, MatchDecision::Pending, 1);
        m.matched_n(
            ActionKind::ExpiredDeleteMarker,
            MatchDecision::Dispatched,
            1,
        );
        m.matched_n(
            ActionKind::ExpiredDeleteMarker,
            MatchDecision::Dispatched,
            1,
        );
        has(
            &m,
            r#"
            s3_lifecycled_matches_total{kind="expired_delete_marker",decision="pending"} 1
            s3_lifecycled_matches_total{kind="expired_delete_marker",decision="dispatched"} 2
            "#,
        );
        lacks_prefix(
            &m,
            r#"s3_lifecycled_matches_total{kind="expired_delete_marker",decision="skipped"}"#,
        );

        m.bucket_config_error("logs", true);
        has(&m, r#"s3_lifecycled_bucket_config_errors{bucket="logs"} 1"#);
        m.bucket_config_error("logs", false);
        lacks_prefix(&m, r#"s3_lifecycled_bucket_config_errors{bucket="logs"}"#);
    }

    #[test]
    fn forecast_sets_the_lag_gauges_per_bucket_and_rule_and_drops_old_series() {
        use crate::engine::forecast::{Count, Forecast, RuleForecast};
        let m = Metrics::new();
        let rule = |bucket: &str, id: &str, overdue: u64, oldest: Option<i64>| RuleForecast {
            bucket: bucket.into(),
            rule_id: id.into(),
            rule_hash: "ab12".into(),
            kind: "expiration".into(),
            known: true,
            overdue: Count {
                objects: overdue,
                bytes: 0,
            },
            oldest_overdue_ns: oldest,
            days: Vec::new(),
            later: Count {
                objects: 7,
                bytes: 0,
            },
        };
        let now = 10 * 86_400 * 1_000_000_000;
        m.forecast(&Forecast {
            now_ns: now,
            rules: vec![
                rule("b", "r1", 3, Some(now - 3 * 86_400 * 1_000_000_000)),
                rule("c", "", 0, None),
            ],
            ..Default::default()
        });
        has(
            &m,
            r#"
            s3_lifecycled_matches_pending{bucket="b",rule="r1"} 7
            s3_lifecycled_matches_overdue{bucket="b",rule="r1"} 3
            s3_lifecycled_oldest_overdue_age_seconds{bucket="b",rule="r1"} 259200.0
            "#,
        );
        // A rule without an ID is named by its hash.
        has(
            &m,
            r#"s3_lifecycled_matches_overdue{bucket="c",rule="ab12"} 0"#,
        );
        m.forecast(&Forecast::default());
        lacks_prefix(&m, r#"s3_lifecycled_matches_pending{bucket="b""#);
    }

    /// Regression: in OpenMetrics form the Go counter `…events_scanned_total`
    /// and the per-run gauge `…events_scanned` were two families named
    /// `…events_scanned`, which a scraper rejects.
    #[test]
    fn families_are_unique_and_every_sample_is_declared() {
        let m = Metrics::new();
        m.init_shards(&[4]);
        m.shard_run_finished(4, RunOutcome::Completed, Duration::from_secs(2), 9, 1);
        m.dispatch("b", ActionKind::ExpirationDate, DeleteOutcome::Done);
        m.matched_n(ActionKind::AbortMpu, MatchDecision::Skipped, 1);
        m.pass_finished(RunOutcome::Completed, 1);
        m.bucket_config_error("b", true);
        let text = m.encode();
        let mut families = std::collections::HashMap::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(
                    families
                        .insert(name.to_string(), kind.to_string())
                        .is_none(),
                    "family {name} declared twice:\n{text}"
                );
            }
        }
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            let declared = families.contains_key(name)
                || ["_bucket", "_sum", "_count"].iter().any(|suf| {
                    name.strip_suffix(suf)
                        .is_some_and(|base| families.get(base).is_some_and(|k| k == "histogram"))
                });
            assert!(declared, "sample {name} has no # TYPE:\n{text}");
        }
        assert!(families.contains_key("SeaweedFS_s3_lifecycle_daily_run_events_scanned"));
        assert!(families.contains_key("SeaweedFS_s3_lifecycle_daily_run_events_scanned_total"));
    }

    /// The shipped Grafana dashboard parses, uses a Prometheus data-source
    /// variable, and queries only series this registry actually exposes (a
    /// renamed metric would otherwise leave a silently empty panel).
    #[test]
    fn grafana_dashboard_parses_and_queries_exposed_series() {
        let raw = include_str!("../../ops/grafana/s3-lifecycled.json");
        let d: serde_json::Value = serde_json::from_str(raw).expect("dashboard is JSON");
        assert!(d["schemaVersion"].as_u64().unwrap() >= 36);
        let vars = d["templating"]["list"].as_array().unwrap();
        assert!(
            vars.iter()
                .any(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        );

        let m = Metrics::new();
        touch_every_family(&m);
        m.forecast(&crate::engine::forecast::Forecast {
            rules: vec![crate::engine::forecast::RuleForecast {
                bucket: "b".into(),
                rule_id: "r".into(),
                rule_hash: String::new(),
                kind: "expiration".into(),
                known: true,
                overdue: Default::default(),
                oldest_overdue_ns: None,
                days: Vec::new(),
                later: Default::default(),
            }],
            ..Default::default()
        });
        let exposed: std::collections::HashSet<String> = m
            .encode()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
            .collect();

        let mut used = 0;
        for panel in d["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap();
                for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if word.starts_with("SeaweedFS_s3_lifecycle_")
                        || word.starts_with("s3_lifecycled_")
                    {
                        used += 1;
                        assert!(
                            exposed.contains(word),
                            "panel `{}` queries unknown {word}",
                            panel["title"]
                        );
                    }
                }
            }
        }
        assert!(used >= 10, "only {used} metric references");
    }

    #[test]
    fn clones_share_series() {
        let a = Metrics::new();
        let b = a.clone();
        b.shard_restarted(9);
        assert!(
            lines(&a).contains(&r#"s3_lifecycled_shard_restarts_total{shard="9"} 1"#.to_string())
        );
    }
}
