//! After a pass: how much of what it deleted is still on disk, and the
//! optional vacuum (docs/reclaimed-space.md). Runs once every delete of the
//! pass was answered, never while they are in flight; the decisions are
//! `engine::reclaim`'s.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::TryFutureExt as _;
use tokio::time::Instant;

use crate::config::ReclaimSettings;
use crate::engine::reclaim::{
    CollectionGarbage, PlacedByBucket, ReclaimReport, VacuumReport, VolumeUsage, by_collection,
    collections_report, touched_collections, vacuum_plan,
};
use crate::pass::options::StopSignal;
use crate::pass::ports::{ClusterError, ClusterPort};

/// How often the master is re-read while waiting for its view to change.
const POLL: Duration = Duration::from_millis(500);

/// How long the master's figure must hold still to be taken as final: one
/// volume-server heartbeat (5 s) after the filer's chunk deletion queue
/// (about 1 s), and a margin. Deletes can reach the master over two
/// heartbeats, and a read at the first change counted only part of them
/// (docs/reclaimed-space.md#settling).
const QUIET: Duration = Duration::from_secs(8);

/// Reads the volumes with `read` (the port's; tests script one) again until
/// the touched collections' `field` has held still for [`QUIET`], since the
/// start or its last change, or `settle` elapsed, or `stop` fired. Returns
/// the last reading and whether it held still so.
async fn settle_on<F>(
    mut read: impl FnMut() -> F,
    touched: &BTreeSet<String>,
    base: &[CollectionGarbage],
    settle: Duration,
    field: fn(&CollectionGarbage) -> u64,
    stop: &StopSignal,
) -> Result<(Vec<VolumeUsage>, bool), ClusterError>
where
    F: Future<Output = Result<Vec<VolumeUsage>, ClusterError>>,
{
    let start = Instant::now();
    let values = |c: &[CollectionGarbage]| c.iter().map(field).collect::<Vec<_>>();
    let (mut last, mut since) = (values(base), start);
    loop {
        let v = read().await?;
        let now = values(&by_collection(&v, touched.iter().map(String::as_str)));
        if now != last {
            (last, since) = (now, Instant::now());
        }
        let quiet = since.elapsed() >= QUIET;
        // A shutdown takes the reading as it is: the cursors are saved by
        // now, and waiting out `settle` here would spend
        // `service.shutdown_deadline` on a report (docs/reclaimed-space.md#settling).
        if quiet || start.elapsed() >= settle || stop.current().is_some() {
            return Ok((v, quiet));
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = stop.fired() => {}
        }
    }
}

/// The reclaim step after a pass whose DONE deletes removed data from the
/// buckets and volumes `placed`; the collections it reads and vacuums are
/// those volumes' ([`touched_collections`]). `None` when there is nothing to
/// say: reports off, nothing deleted, or no master (fakes).
pub(crate) async fn after_pass(
    port: &dyn ClusterPort,
    s: &ReclaimSettings,
    placed: &PlacedByBucket,
    dry_run: bool,
    stopped: bool,
    stop: &StopSignal,
) -> Option<ReclaimReport> {
    if placed.is_empty() || !(s.report || s.vacuum) {
        return None;
    }
    // The report is the pure core's: it keeps the reason as text.
    let fail = |e: ClusterError| ReclaimReport {
        error: Some(e.to_string()),
        ..ReclaimReport::default()
    };
    let first = match port.volumes().await {
        Ok(Some(v)) => v,
        Ok(None) => return None,
        Err(e) => return Some(fail(e)),
    };
    // Volumes keep their collection: the first reading names them all.
    let touched = touched_collections(placed, &first);
    let names = || touched.iter().map(String::as_str);
    let base = by_collection(&first, names());
    let garbage = |c: &CollectionGarbage| c.garbage_bytes;
    let read = || port.volumes().map_ok(Option::unwrap_or_default);
    let (volumes, settled) = if s.settle.is_zero() {
        (first, false)
    } else {
        match settle_on(read, &touched, &base, s.settle, garbage, stop).await {
            Ok(r) => r,
            Err(e) => return Some(fail(e)),
        }
    };
    let mut report = ReclaimReport {
        collections: collections_report(&volumes, &touched, placed),
        settled,
        error: None,
        vacuum: None,
    };
    if s.vacuum {
        // A shutdown during the settling counts as a stopped pass too.
        let stopped = stopped || stop.current().is_some();
        let mut v = vacuum(port, s, &touched, &volumes, dry_run, stopped).await;
        if !v.vacuumed.is_empty() {
            let size = |c: &CollectionGarbage| c.size_bytes;
            match settle_on(read, &touched, &report.collections, s.settle, size, stop).await {
                Ok((after, _)) => report.collections = collections_report(&after, &touched, placed),
                Err(e) => report.error = Some(format!("after the vacuum: {e}")),
            }
            v.size_after = report.collections.iter().map(|c| c.size_bytes).sum();
        }
        report.vacuum = Some(v);
    }
    Some(report)
}

/// Vacuums what [`vacuum_plan`] picks, unless something else does it or
/// the pass must not (docs/reclaimed-space.md#vacuum).
async fn vacuum(
    port: &dyn ClusterPort,
    s: &ReclaimSettings,
    touched: &BTreeSet<String>,
    volumes: &[VolumeUsage],
    dry_run: bool,
    stopped: bool,
) -> VacuumReport {
    let size_before = by_collection(volumes, touched.iter().map(String::as_str))
        .iter()
        .map(|c| c.size_bytes)
        .sum();
    let mut out = VacuumReport {
        size_before,
        size_after: size_before,
        ..VacuumReport::default()
    };
    let skip = if dry_run {
        Some("dry run: nothing is vacuumed".to_string())
    } else if stopped {
        Some("the pass was stopped before its end".to_string())
    } else {
        match port.weed_admin().await {
            Ok(Some(holder)) => Some(format!(
                "weed admin {holder} is connected: its vacuum jobs compact the volumes"
            )),
            Ok(None) => None,
            Err(e) => Some(format!(
                "could not ask the master whether weed admin runs: {e}"
            )),
        }
    };
    if let Some(why) = skip {
        out.skipped = Some(why);
        return out;
    }
    // The master's own loop takes volumes at or above its threshold, but
    // not read-only ones (docs/reclaimed-space.md#read-only).
    let (mine, theirs): (Vec<VolumeUsage>, Vec<VolumeUsage>) =
        volumes.iter().cloned().partition(|v| {
            v.read_only
                || s.master_garbage_threshold >= 1.0
                || v.ratio() < s.master_garbage_threshold
        });
    let master_threshold = s.master_garbage_threshold.max(s.vacuum_threshold);
    out.left_to_master = vacuum_plan(&theirs, touched, master_threshold, usize::MAX).0;
    let (now, later) = vacuum_plan(&mine, touched, s.vacuum_threshold, s.max_vacuum_volumes);
    out.deferred = later;
    for id in now {
        match port.vacuum(id, s.vacuum_threshold, s.vacuum_timeout).await {
            Ok(()) => out.vacuumed.push(id),
            Err(e) => out.failed.push(e.to_string()),
        }
    }
    if out.vacuumed.is_empty() && out.failed.is_empty() && out.skipped.is_none() {
        out.skipped = Some(if out.left_to_master.is_empty() {
            format!(
                "no volume of the touched collections is at reclaim.vacuum_threshold ({})",
                s.vacuum_threshold
            )
        } else {
            format!(
                "the master vacuums volumes at or above its garbage threshold ({}) itself",
                s.master_garbage_threshold
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(garbage: u64) -> Vec<VolumeUsage> {
        vec![VolumeUsage {
            id: 1,
            collection: "b".into(),
            server: "v:8080".into(),
            size: 1 << 20,
            garbage,
            read_only: false,
            ttl: 0,
            erasure_coded: false,
            ec_ttl: None,
            remote: false,
        }]
    }

    /// The master's garbage for `b` at each poll, then the last one forever.
    async fn run(script: &[u64], settle: Duration) -> (u64, bool, Duration) {
        let touched = BTreeSet::from(["b".to_string()]);
        let base = by_collection(&volume(script[0]), ["b"]);
        let mut polls = script.iter().copied().skip(1);
        let mut last = script[0];
        let read = || {
            last = polls.next().unwrap_or(last);
            futures::future::ready(Ok(volume(last)))
        };
        let start = Instant::now();
        let garbage = |c: &CollectionGarbage| c.garbage_bytes;
        let stop = StopSignal::default();
        let (v, settled) = settle_on(read, &touched, &base, settle, garbage, &stop)
            .await
            .unwrap();
        (v[0].garbage, settled, start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn reclaim_report_settled_at_the_first_of_two_heartbeats() {
        // 0 before; half the deletes in one heartbeat (poll 2), the rest in
        // the next (poll 12, 5 s later).
        let mut script = vec![0, 0, 400];
        script.extend([400; 9]);
        script.push(800);
        let (garbage, settled, took) = run(&script, Duration::from_secs(20)).await;
        assert_eq!((garbage, settled), (800, true));
        assert!(took >= Duration::from_secs(5) + QUIET, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn figures_the_master_had_counted_before_settle_in_one_quiet_window() {
        let (garbage, settled, took) = run(&[700], Duration::from_secs(20)).await;
        assert_eq!((garbage, settled), (700, true));
        assert!(
            took >= QUIET && took < QUIET + Duration::from_secs(1),
            "{took:?}"
        );
    }

    /// SIGTERM while the figures settle: the reading at hand is the report,
    /// at once, instead of `settle` eating `service.shutdown_deadline` (a
    /// `serve` that had saved every cursor exited 1 saying they were not).
    #[tokio::test(start_paused = true)]
    async fn sigterm_during_reclaim_settle_ends_the_wait_at_once() {
        let touched = BTreeSet::from(["b".to_string()]);
        let base = by_collection(&volume(0), ["b"]);
        let mut n = 0;
        let mut read = || {
            n += 1;
            futures::future::ready(Ok(volume(n)))
        };
        let (tx, stop) = StopSignal::new();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let _ = tx.send(Some("shutdown (SIGTERM)".into()));
            std::future::pending::<()>().await;
        });
        let start = Instant::now();
        let garbage = |c: &CollectionGarbage| c.garbage_bytes;
        let (_, settled) = settle_on(
            &mut read,
            &touched,
            &base,
            Duration::from_secs(20),
            garbage,
            &stop,
        )
        .await
        .unwrap();
        let took = start.elapsed();
        assert!(!settled);
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_millis(2600),
            "{took:?}"
        );

        // Stopped before the step began: one reading.
        let (_, settled) = settle_on(
            read,
            &touched,
            &base,
            Duration::from_secs(20),
            garbage,
            &stop,
        )
        .await
        .unwrap();
        assert!(!settled);
        assert!(
            start.elapsed() - took < Duration::from_millis(1),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn figures_still_moving_at_the_deadline_are_not_settled() {
        let script: Vec<u64> = (0..100).collect();
        let (_, settled, took) = run(&script, Duration::from_secs(20)).await;
        assert!(!settled);
        assert!(took >= Duration::from_secs(20) && took < Duration::from_secs(21));
    }
}
