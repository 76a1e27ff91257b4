//! Everything a pass reads before its shards start, together so it starts
//! after the slowest read rather than their sum: the buckets and their
//! rules, pauses, approvals, holds and rule records (the safety rails), and
//! the selected shards' cursors; from them, the pass plan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::engine::cursor::{FilerRegistrations, GoSeen, ShardCursor};
use crate::engine::go_activity::{self, GoActivity};
use crate::engine::safety::{CapBook, PauseRecord, Selection, grace_decision};
use crate::engine::{Nanos, Snapshot};
use crate::lifecycle::BucketError;
use crate::pass::plan::PassPlan;
use crate::pass::ports::{ClusterError, ClusterPort, FilerClock, on_controls};
use crate::seaweed::buckets::{BucketInfo, BucketScan};
use crate::seaweed::cursor::GO_CURSOR_DIR;

use crate::pass::options::PassOptions;

/// Everything read before the shards start.
pub(crate) struct Prepared {
    pub(crate) plan: Arc<PassPlan>,
    pub(crate) buckets: Vec<String>,
    pub(crate) bucket_errors: Vec<BucketError>,
    pub(crate) unknown_buckets: Vec<String>,
    pub(crate) paused: Vec<PauseRecord>,
    pub(crate) caps: CapBook,
    pub(crate) approved: Vec<String>,
    pub(crate) released: Vec<String>,
    pub(crate) cursors: BTreeMap<u8, Result<Option<ShardCursor>, ClusterError>>,
    pub(crate) go_activity: GoActivity,
}

pub(crate) async fn prepare(
    port: Arc<dyn ClusterPort>,
    opts: &PassOptions,
) -> Result<Prepared, ClusterError> {
    let s = &opts.settings;
    port.refresh().await?;
    let limits = s.safety.cap_limits();
    let grace = s.safety.rule_change_grace;
    // Approvals matter to the deletion cap and to the rule-change grace.
    let rails = limits.enabled() || !grace.is_zero();
    // Every read below depends on settings only, not on another's answer:
    // they go out together, so a pass starts after the slowest of them, not
    // after their sum (sixteen cursor files alone took ~10 ms one after
    // another on loopback; a pass's scan rate counts its start too).
    // Errors are still taken in the order of the old sequence.
    let (scan, pause_records, earliest, approvals, holds, rule_records, cursors, filers, clock, go) = futures::join!(
        port.buckets(),
        // Read at every pass start, so a pause made through any instance
        // holds from the next pass on (docs/filer-layout.md#pause-files).
        on_controls(&*port, |c| async move { c.paused().await }),
        read_if(
            s.pass.meta_log_retention.is_zero(),
            port.earliest_available()
        ),
        read_if(
            rails,
            on_controls(&*port, |c| async move { c.approvals().await })
        ),
        // Holds of earlier passes. Read even with the caps off, so turning
        // them off releases the holds.
        on_controls(&*port, |c| async move { c.holds().await }),
        read_if(
            !grace.is_zero(),
            on_controls(&*port, |c| async move { c.rule_records().await })
        ),
        futures::future::join_all(opts.shards.iter().map(|&shard| {
            let load = port.load_cursor(shard);
            async move { (shard, load.await) }
        })),
        port.filer_registrations(),
        port.filer_clock(),
        port.list_dir(GO_CURSOR_DIR),
    );
    let scan = scan?;
    // Unreadable pauses fail the pass rather than risk deleting a paused
    // bucket.
    let pause_records = pause_records?;
    let chosen = choose_buckets(&scan, &s.pass.buckets, pause_records);
    let snap = Snapshot::compile(chosen.configs, s.time.time_config());
    let earliest = earliest?;
    let wall = crate::clock::wall_ns();
    let mut pass_plan = PassPlan::build(&snap, opts.now, wall, earliest, &s.pass, chosen.keep);
    // The replay reads the log as it stood now (docs/due-index.md#pass-start);
    // without the filer's clock, ours stands in for it.
    let clock = clock.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read the filer's clock: the replay reads up to our own, and the index stops at the last event read");
        Some(FilerClock { ns: wall, vouches: false })
    });
    if let Some(c) = clock {
        pass_plan.read_until = pass_plan.read_until.min(c.ns);
        pass_plan.filer_clock = c.vouches.then_some(c.ns);
    }
    // Not asked, not compared: a master we cannot reach says nothing about
    // restarts, and the cursors keep the last registrations they saw.
    pass_plan.filers = filers.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot ask the master when the filers registered; a filer restart since the last pass goes unnoticed in this one");
        None
    });
    let buckets: Vec<String> = pass_plan.buckets().map(str::to_string).collect();
    // Approvals are empty unless `rails` (not read then).
    let approved: Vec<String> = approvals?
        .into_iter()
        .map(|a| a.bucket)
        .filter(|b| buckets.contains(b))
        .collect();
    let counts = if rails && limits.max_fraction > 0.0 {
        count_buckets(&*port, &buckets).await
    } else {
        Vec::new()
    };
    // The deletion cap (docs/design-deviations.md#safety-cap). A pass over
    // some shards only sends its shards' share of each cap.
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
    if !grace.is_zero() {
        let records = rule_records?;
        let enforced = scan.buckets.iter().filter(|b| buckets.contains(&b.name));
        let graced = GraceRead {
            records: &records,
            approved: &approved,
            wall,
        };
        graced.apply(&*port, opts, enforced, &mut caps).await?;
    }
    let mut cursors: BTreeMap<_, _> = cursors.into_iter().collect();
    warn_if_earlier(&cursors, opts.now);
    if let Some(now) = &pass_plan.filers {
        note_filer_restarts(&mut cursors, now);
    }
    let go_activity = match go {
        Ok(listing) => {
            let seen = go_activity::stamps(&listing);
            let found = note_go_passes(&mut cursors, &seen, wall);
            pass_plan.go_cursors = Some(seen);
            found
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot list the Go worker's cursors; a Go pass since the last one goes unnoticed in this pass");
            GoActivity::default()
        }
    };
    Ok(Prepared {
        plan: Arc::new(pass_plan),
        buckets,
        bucket_errors: chosen.bucket_errors,
        unknown_buckets: chosen.unknown_buckets,
        paused: chosen.paused,
        caps,
        approved,
        released,
        cursors,
        go_activity,
    })
}

/// Which buckets a pass enforces, from the scan, `pass.buckets` (`named`,
/// empty: all) and the pause files.
struct Chosen {
    /// The lifecycle configurations of the enforced buckets with rules.
    configs: Vec<crate::engine::BucketConfig>,
    /// Buckets whose cursor state is kept though the pass leaves them alone
    /// (paused, not named, configuration unreadable).
    keep: BTreeSet<String>,
    paused: Vec<PauseRecord>,
    bucket_errors: Vec<BucketError>,
    /// Names in `pass.buckets` the cluster does not have.
    unknown_buckets: Vec<String>,
}

fn choose_buckets(scan: &BucketScan, named: &[String], pauses: Vec<PauseRecord>) -> Chosen {
    let filter: BTreeSet<&str> = named.iter().map(String::as_str).collect();
    let paused_names: BTreeSet<&str> = pauses.iter().map(|r| r.bucket.as_str()).collect();
    let selected = |name: &str| filter.is_empty() || filter.contains(name);
    let mut c = Chosen {
        configs: Vec::new(),
        keep: BTreeSet::new(),
        paused: Vec::new(),
        bucket_errors: Vec::new(),
        unknown_buckets: Vec::new(),
    };
    // A name in `pass.buckets` (or `--buckets`) that the cluster does not
    // have is a configuration error of its own, reported like a broken
    // document, so a typo (or a bucket deleted since) does not pass for a
    // quiet bucket; the other buckets go on.
    let listed = scan.names();
    for name in &filter {
        if let Err(e) = crate::engine::names::check_exists(name, listed.iter().copied()) {
            c.unknown_buckets.push(name.to_string());
            c.bucket_errors.push(BucketError {
                bucket: name.to_string(),
                reason: format!("named by pass.buckets or --buckets, but {e}"),
            });
        }
    }
    for e in &scan.errors {
        c.keep.insert(e.bucket.clone());
        if selected(&e.bucket) {
            c.bucket_errors.push(e.clone());
        }
    }
    for b in &scan.buckets {
        // A document AWS would refuse, which the gateway stores anyway, is
        // enforced as SeaweedFS reads it, and that can differ from what it
        // says: an element with a typo is skipped (a `<prefix>` empties a
        // filter), a `Status` other than exactly `Enabled` disables the rule.
        // Every pass says so (docs/lifecycle-config.md#put-validation).
        for d in b.validation_errors().filter(|_| selected(&b.name)) {
            tracing::warn!(
                bucket = b.name,
                "lifecycle configuration AWS would refuse, enforced as SeaweedFS reads it: {d}"
            );
        }
        let (named, paused) = (filter.iter().copied(), paused_names.iter().copied());
        let sel = Selection::of(&b.name, named, paused);
        if sel.keeps_state() {
            c.keep.insert(b.name.clone());
            if sel == Selection::Paused
                && let Some(r) = pauses.iter().find(|r| r.bucket == b.name)
            {
                c.paused.push(r.clone());
            }
            continue;
        }
        if b.has_rules() {
            c.configs.push(b.to_config());
        }
    }
    c
}

/// One count of every enforced bucket, for a fractional deletion cap. A
/// bucket that cannot be counted gets only the absolute cap.
async fn count_buckets(port: &dyn ClusterPort, buckets: &[String]) -> Vec<(String, u64)> {
    let mut counts = Vec::new();
    for b in buckets {
        match port.count_bucket(b).await {
            Ok(n) => counts.push((b.clone(), n)),
            Err(e) => {
                tracing::warn!(bucket = b, error = %e, "counting the bucket for safety.max_delete_fraction failed")
            }
        }
    }
    counts
}

/// What the rule-change grace (docs/design-deviations.md#rule-change-grace)
/// decides with: the rule records of earlier passes, the approved buckets
/// and the wall clock at the pass's start.
struct GraceRead<'a> {
    records: &'a [crate::engine::safety::RuleRecord],
    approved: &'a [String],
    wall: Nanos,
}

impl GraceRead<'_> {
    /// A bucket whose lifecycle document changed less than the grace ago is
    /// evaluated dry (its deletes held in `caps`); a changed document gets a
    /// new record, unless a dry run.
    async fn apply(
        &self,
        port: &dyn ClusterPort,
        opts: &PassOptions,
        enforced: impl Iterator<Item = &BucketInfo>,
        caps: &mut CapBook,
    ) -> Result<(), ClusterError> {
        let (grace, wall) = (opts.settings.safety.rule_change_grace, self.wall);
        let seen = opts.now.min(wall);
        for info in enforced {
            let doc = info.lifecycle_xml.as_deref().unwrap_or_default();
            let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(doc));
            let prev = self.records.iter().find(|r| r.bucket == info.name);
            let d = grace_decision(
                &info.name,
                prev,
                !self.records.is_empty(),
                &hash,
                seen,
                opts.now,
                grace,
                self.approved.contains(&info.name),
            );
            if let Some((changed, until)) = d.in_grace {
                caps.grace(&info.name, changed, until);
            }
            if let Some(rec) = d.write
                && !opts.dry_run
            {
                on_controls(port, |c| async move { c.put_rule_record(&rec, wall).await }).await?;
            }
        }
        Ok(())
    }
}

/// A pass time before one an earlier pass saved these cursors at: within one
/// cluster time only moves forward, so such a `--now` is most likely a typo.
/// Nothing is unsafe about it (what the later pass resolved stays resolved,
/// a progress behind it is read again), so it is a warning, not a refusal.
fn warn_if_earlier(cursors: &BTreeMap<u8, Result<Option<ShardCursor>, ClusterError>>, now: Nanos) {
    let latest = cursors
        .values()
        .filter_map(|c| c.as_ref().ok().and_then(Option::as_ref))
        .map(ShardCursor::latest_pass_now)
        .max()
        .unwrap_or(0);
    if latest > now {
        tracing::warn!(
            now = %crate::status::format_time(now),
            earlier_pass = %crate::status::format_time(latest),
            "this pass's time is before the time an earlier pass saved these cursors at: that \
             pass already judged everything due by its time, this one judges only what is due \
             by its own earlier time. Was --now meant to be later?"
        );
    }
}

/// Marks for a rewalk, in each loaded cursor, the buckets whose events a
/// filer restarted since that cursor's last pass may have lost
/// (docs/meta-log.md#filer-restart), and notes the registrations read now.
fn note_filer_restarts(
    cursors: &mut BTreeMap<u8, Result<Option<ShardCursor>, ClusterError>>,
    now: &FilerRegistrations,
) {
    let mut anew = BTreeSet::new();
    for c in cursors
        .values_mut()
        .filter_map(|c| c.as_mut().ok()?.as_mut())
    {
        anew.extend(c.note_filers(now));
    }
    if !anew.is_empty() {
        tracing::warn!(
            filers = ?anew,
            "filers registered with the master anew since the last pass (restarted): a filer \
             killed loses the meta-log events it had not flushed, so this pass walks the \
             buckets again (recovery filer_lost)"
        );
    }
}

/// Compares each shard's Go cursor file with what its cursor recorded, and
/// warns when the Go worker ran since (docs/go-cursor.md#another-enforcer):
/// two enforcers keep different cursors and delete by different rules.
fn note_go_passes(
    cursors: &mut BTreeMap<u8, Result<Option<ShardCursor>, ClusterError>>,
    seen: &BTreeMap<u8, GoSeen>,
    wall: Nanos,
) -> GoActivity {
    let found = go_activity::note(
        cursors
            .iter_mut()
            .filter_map(|(shard, c)| Some((*shard, c.as_mut().ok()?.as_mut()))),
        seen,
        wall / 1_000_000_000,
    );
    if !found.is_empty() {
        tracing::warn!(
            shards = ?found.shards(),
            last_write = %crate::status::format_time(found.last_write_ns),
            "{GO_WORKER} {} (in {GO_CURSOR_DIR}). Two enforcers keep different cursors and \
             delete by different rules. `weed mini` and `weed admin` schedule it daily: disable \
             job type s3_lifecycle in the admin (UI, or PUT \
             /api/plugin/job-types/s3_lifecycle/config with admin_runtime.enabled false), \
             restart `weed worker`s with a -jobType= list without it, and stop any cron'd \
             `s3.lifecycle.run-shard`. Set weed_admin.address to have passes refused while a \
             Go worker serves it",
            if found.since_last_pass.is_empty() {
                "may still run on this cluster: it wrote its cursor files within the last two \
                 days, and this service had not looked at them before (if it was stopped since, \
                 this warning does not come back)"
            } else {
                "runs on this cluster: it rewrote its cursor files since this service's last pass \
                 over these shards"
            }
        );
    }
    found
}

/// The start of the warning a pass logs when the Go worker ran.
pub const GO_WORKER: &str = "the Go s3_lifecycle worker";

/// `read`'s answer when `wanted`, else what an empty store answers (and
/// nothing is read).
async fn read_if<T: Default>(
    wanted: bool,
    read: impl std::future::Future<Output = Result<T, ClusterError>>,
) -> Result<T, ClusterError> {
    if wanted { read.await } else { Ok(T::default()) }
}
