//! End-to-end: a bucket's lifecycle configuration changes while a pass is deleting its objects
//! (docs/lifecycle-config.md#changes-during-a-pass). The pass re-reads the configurations every
//! `pass.config_refresh` (1 s by default) and withdraws every delete whose rule left the
//! configuration, right before it would be sent, so the bucket's deletes stop within seconds, not
//! at the end of an hours-long pass.
//!
//! Each test seeds thousands of due objects, runs `run-once` under a 200/s delete rate (the
//! process runs in the background while the test watches the bucket through ListObjectsV2),
//! changes the configuration through S3 once about a second's worth of deletes happened, and
//! bounds the deletes that still happened after the change. Own buckets, own cursor dir,
//! `--now` moving forward only.

use crate::common;

use std::time::{Duration, Instant};

use common::*;

/// Deletes per second the passes are capped at.
const RATE: usize = 200;

/// What the watcher saw while the pass ran.
struct Watched {
    /// The pass.
    pass: Pass,
    /// Objects counted by the listing that ended just before the change was made.
    before_change: usize,
    /// How long that listing took: objects deleted while it ran may be missing from its count
    /// or not, so up to this long's worth of deletes counted "after the change" happened before.
    before_listing: Duration,
    /// Objects at the end of the pass.
    after_pass: usize,
    /// From the change to the end of the first listing that counted `after_pass` objects: when
    /// the last delete happened, plus up to two listings (the one it overlapped may still have
    /// counted the object, the next cannot).
    settled_after: Duration,
    /// Time one listing took (the precision of `settled_after`).
    listing: Duration,
}

/// Seeds `n` objects under `x/` with a 1-day rule, runs a pass 3 days later at [`RATE`]/s in the
/// background, and calls `change` once the bucket lost at least a second's worth of objects.
async fn change_mid_pass<F, Fut>(
    c: &Cluster,
    b: &str,
    scope: &Scope,
    n: usize,
    change: F,
) -> Watched
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let s3 = c.s3_client();
    c.put_objects_bulk(b, &keys("x/", n), b"data")
        .await
        .unwrap();
    c.put_lifecycle_xml(b, &lifecycle(&days_rule("x", "x/", 1)))
        .await
        .unwrap();
    assert_eq!(count_objects(&s3, b).await, n);
    let t0 = now_ns();
    let rate = RATE.to_string();
    let env = [
        ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", rate.as_str()),
        ("S3_LIFECYCLED__RATE__BURST", "1"),
    ];
    let args = run_once_args(c, scope, Some(plus(t0, 3, 0)), &[]);
    let mut cmd = run_once_command(c, scope, Some(plus(t0, 3, 0)), &[], &env);
    let child = cmd.spawn().expect("spawning run-once");
    let pass = tokio::spawn(async move { child.wait_with_output().await });

    // Wait for about a second's worth of deletes.
    let started = Instant::now();
    let (mut before_change, mut before_listing);
    loop {
        let t = Instant::now();
        before_change = count_objects(&s3, b).await;
        before_listing = t.elapsed();
        if before_change <= n - RATE {
            break;
        }
        assert!(
            !pass.is_finished(),
            "the pass ended before deleting {RATE} objects ({before_change} left)"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the pass deleted fewer than {RATE} objects in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let changed_at = Instant::now();
    change().await;

    // Watch until the pass ends; note when the count stopped moving.
    let mut samples: Vec<(Instant, usize)> = Vec::new();
    let mut listing = Duration::ZERO;
    loop {
        let t = Instant::now();
        let count = count_objects(&s3, b).await;
        listing = listing.max(t.elapsed());
        samples.push((Instant::now(), count));
        if pass.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = pass.await.unwrap().expect("waiting for run-once");
    let pass = Pass {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        args,
    };
    let after_pass = count_objects(&s3, b).await;
    let settled_at = samples
        .iter()
        .find(|(_, n)| *n == after_pass)
        .map_or_else(Instant::now, |(t, _)| *t);
    Watched {
        pass,
        before_change,
        before_listing,
        after_pass,
        settled_after: settled_at.saturating_duration_since(changed_at),
        listing,
    }
}

/// Checks that at most two seconds' worth of deletes happened after the change, and that the
/// rest were withdrawn, not sent.
fn assert_stopped_within_two_seconds(w: &Watched, n: usize) {
    let p = &w.pass;
    let r = p.ok();
    let after_change = w.before_change - w.after_pass;
    eprintln!(
        "{n} due objects at {RATE}/s: {} left when the configuration changed, {} deleted after \
         it, count settled {:?} after the change (one listing takes up to {:?}), {} deletes \
         withdrawn",
        w.before_change,
        after_change,
        w.settled_after,
        w.listing,
        r.v["totals"]["deletes"]["WITHDRAWN"]
    );
    // Two seconds' worth, plus what the listing before the change may have counted although
    // it was deleted before the change (under load one listing took 2 s, and 478 deletes were
    // counted after the change).
    let bound = 2 * RATE + (RATE as f64 * w.before_listing.as_secs_f64()).ceil() as usize;
    assert!(
        after_change <= bound,
        "{after_change} objects deleted after the change (at most {bound}: 2 s at {RATE}/s, and \
         {:?} of the listing before it):\n{}",
        w.before_listing,
        p.describe()
    );
    assert!(
        w.settled_after <= Duration::from_secs(2) + 2 * w.listing,
        "the bucket kept losing objects for {:?} after the change:\n{}",
        w.settled_after,
        p.describe()
    );
    assert!(w.after_pass > 0, "{}", p.describe());
    let withdrawn = r.v["totals"]["deletes"]["WITHDRAWN"].as_i64().unwrap_or(0);
    assert!(withdrawn > 0, "no delete was withdrawn:\n{}", p.describe());
    assert_eq!(
        r.total("DONE") + withdrawn,
        i64::try_from(n).unwrap(),
        "every due object is either deleted or withdrawn:\n{}",
        p.describe()
    );
    assert_eq!(
        r.total("DONE"),
        i64::try_from(n - w.after_pass).unwrap(),
        "{}",
        p.describe()
    );
}

/// 5,000 due objects under a 200/s cap; the bucket's lifecycle configuration is deleted through
/// S3 about a second into the deletes. The deletes stop within 2 s and the next pass deletes
/// nothing.
#[tokio::test]
async fn deleting_the_lifecycle_configuration_mid_pass_stops_its_deletes() {
    const N: usize = 5_000;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-cfg-delete").await.unwrap();
    let scope = Scope::new(&[&b]);
    let w = change_mid_pass(c, &b, &scope, N, || async {
        s3.delete_bucket_lifecycle()
            .bucket(&b)
            .send()
            .await
            .expect("DeleteBucketLifecycle");
    })
    .await;
    let entry = c.lookup_entry(c.buckets_root(), &b).await.unwrap().unwrap();
    assert!(
        !entry.extended.keys().any(|k| k.contains("ifecycle")),
        "the lifecycle configuration is still stored: {:?}",
        entry.extended.keys().collect::<Vec<_>>()
    );
    assert_stopped_within_two_seconds(&w, N);

    let p = run_once(c, &scope, Some(plus(now_ns(), 3, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        count_objects(&s3, &b).await,
        w.after_pass,
        "{}",
        p.describe()
    );
}

/// Raising the rule's TTL from 1 to 30 days mid-pass stops the deletes of objects that are no
/// longer due; the next pass (a recovery) deletes nothing, and the pass after the new
/// TTL deletes every remaining object: nothing is lost.
#[tokio::test]
async fn raising_a_ttl_mid_pass_stops_deletes_no_longer_due() {
    const N: usize = 2_000;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-cfg-raise").await.unwrap();
    let scope = Scope::new(&[&b]);
    let t0 = now_ns();
    let w = change_mid_pass(c, &b, &scope, N, || async {
        c.put_lifecycle_xml(&b, &lifecycle(&days_rule("x", "x/", 30)))
            .await
            .unwrap();
    })
    .await;
    assert_stopped_within_two_seconds(&w, N);

    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    // A recovery (the first pass's cold start did not finish, or the rule edit).
    assert!(!r.recovery_reasons(&b).is_empty(), "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, w.after_pass);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        r.total("DONE"),
        i64::try_from(w.after_pass).unwrap(),
        "{}",
        p.describe()
    );
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
}
