//! Fault figures on the real cluster: `s3-lifecycled run-once` killed with SIGKILL at random
//! points, the S3 gateway restarted mid-pass, the filer restarted mid-pass. Each restart run has
//! 5,000 objects due at the pass's `--now` and 5,000 that are not (each SIGKILL run 2,500 and
//! 1,000, at half the rate); after the next pass completes, every due object is gone and every
//! other one is still there. The figures (counts, exit codes, timings) are printed:
//! `cargo test --test faults -- --nocapture`.
//!
//! Runs on a split cluster (`weed master|volume|filer|s3` as separate processes) so the filer
//! and the gateway can be restarted on their own (docs/test-cluster.md#split-cluster).

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, SeedableRng};

/// Objects due at the pass's `--now`.
const DUE: usize = 5_000;
/// Objects not yet due at the pass's `--now`.
const KEEP: usize = 5_000;
/// Days of the rule over `due/`: due (after rounding) within 2 days of the PUT.
const DUE_DAYS: u32 = 1;
/// Days of the rule over `keep/`: far past the pass's `--now`.
const KEEP_DAYS: u32 = 30;
/// The pass evaluates this many days after the PUTs: past `DUE_DAYS` + rounding, before `KEEP_DAYS`.
const NOW_DAYS: i64 = 3;
/// A pass that is to be interrupted: 1,000 deletes per second and a burst of 10 (the default
/// burst is twice the rate), so 5,000 deletes take at least 5 s.
const SLOW: [(&str, &str); 2] = [
    ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "1000"),
    ("S3_LIFECYCLED__RATE__BURST", "10"),
];
/// [`SLOW`], with short retry backoffs so a pass facing a dead gateway halts quickly.
const FAST_RETRY: [(&str, &str); 4] = [
    SLOW[0],
    SLOW[1],
    ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "50ms"),
    ("S3_LIFECYCLED__DISPATCH__RETRY_MAX_BACKOFF", "200ms"),
];
/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);
/// Deletes that must be done before a process of the cluster is restarted (the pass is mid-way).
const RESTART_AFTER: usize = 500;
/// SIGKILL runs.
const KILL_RUNS: usize = 10;
/// Due and not-due objects of each SIGKILL run's bucket: fewer than the
/// other tests' so ten fresh buckets fill quickly; [`SLOW_KILL`] keeps the
/// deletes stretched over the same 5 s, so the kill points still fall
/// anywhere from start-up to late in the deletes.
const KILL_DUE: usize = 2_500;
const KILL_KEEP: usize = 1_000;
/// [`SLOW`] for [`KILL_DUE`]: 500 deletes per second, 2,500 take at least 5 s.
const SLOW_KILL: [(&str, &str); 2] = [
    ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "500"),
    ("S3_LIFECYCLED__RATE__BURST", "10"),
];

/// One test at a time: a restarted filer or gateway would disturb another test's pass.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One run's bucket: its keys, its scope and the `--now` its passes use.
struct Setup {
    bucket: String,
    scope: Scope,
    due: BTreeSet<String>,
    keep: BTreeSet<String>,
    now: i64,
}

/// A fresh bucket with [`DUE`] objects under `due/` and [`KEEP`] under `keep/`, and a
/// lifecycle configuration that makes exactly the first ones due at `now`.
async fn setup(c: &Cluster, name: impl AsRef<str>) -> Setup {
    setup_sized(c, name, DUE, KEEP).await
}

/// [`setup`] with `due_n` due and `keep_n` not-due objects.
async fn setup_sized(c: &Cluster, name: impl AsRef<str>, due_n: usize, keep_n: usize) -> Setup {
    let bucket = c.new_bucket(name.as_ref()).await.unwrap();
    let due = keys("due/", due_n);
    let keep = keys("keep/", keep_n);
    let (a, b) = tokio::join!(
        c.put_objects_bulk(&bucket, &due, b"x"),
        c.put_objects_bulk(&bucket, &keep, b"x")
    );
    a.unwrap();
    b.unwrap();
    let rules = days_rule("due", "due/", DUE_DAYS) + &days_rule("keep", "keep/", KEEP_DAYS);
    c.put_lifecycle_xml(&bucket, &lifecycle(&rules))
        .await
        .unwrap();
    let scope = Scope::new(&[&bucket]);
    Setup {
        bucket,
        scope,
        due: due.into_iter().collect(),
        keep: keep.into_iter().collect(),
        now: plus(now_ns(), NOW_DAYS, 0),
    }
}

/// What is left of the bucket: (due objects remaining, not-due objects remaining).
async fn remaining(s3: &aws_sdk_s3::Client, s: &Setup) -> (usize, usize) {
    remaining_of(s3, &s.bucket, &s.due, &s.keep).await
}

/// Asserts nothing was deleted early: every not-due object is still there.
async fn assert_nothing_early(s3: &aws_sdk_s3::Client, s: &Setup, when: &str) {
    let (_, keep_left) = remaining(s3, s).await;
    assert_eq!(
        keep_left,
        s.keep.len(),
        "{when}: {} not-due objects deleted early",
        s.keep.len() - keep_left
    );
}

/// Runs the next pass to completion and asserts the end state: every due object gone, every
/// other one still there, exit 0. Returns the pass's DONE count and its duration.
async fn next_pass_completes(c: &Cluster, s: &Setup, gone_before: usize) -> (i64, Duration) {
    let s3 = c.s3_client();
    let started = Instant::now();
    // A minute later than the interrupted pass: time only moves forward for cursors.
    let p = run_once(c, &s.scope, Some(s.now + 60 * SEC_NS), &[], &[]).await;
    let took = started.elapsed();
    let r = p.ok();
    let left = list_keys(&s3, &s.bucket).await;
    assert_eq!(
        left,
        s.keep,
        "after the next pass: {} due objects left, {} not-due objects gone:\n{}",
        left.intersection(&s.due).count(),
        s.keep.len() - left.intersection(&s.keep).count(),
        p.describe()
    );
    let done = r.total("DONE");
    assert_eq!(
        done as usize + gone_before,
        s.due.len(),
        "DONE + already gone = all due:\n{}",
        p.describe()
    );
    (done, took)
}

/// What the meta-log holds under the bucket's `due/` now: (events, creates). A restarted filer
/// may have lost its unflushed tail (docs/retention-probe.md#crash-gap).
async fn due_events_in_log(c: &Cluster, s: &Setup) -> (usize, usize) {
    let events = c
        .subscribe_events(&format!("/buckets/{}/due/", s.bucket), 0, now_ns())
        .await
        .unwrap();
    let creates = events
        .iter()
        .filter(|e| {
            e.event_notification
                .as_ref()
                .is_some_and(|n| n.old_entry.is_none() && n.new_entry.is_some())
        })
        .count();
    (events.len(), creates)
}

/// Waits until `n` due objects are gone while `child` runs; panics if it ends first.
async fn wait_for_deletes(
    s3: &aws_sdk_s3::Client,
    s: &Setup,
    child: &mut tokio::process::Child,
    n: usize,
) {
    wait_for_deletes_of(s3, &s.bucket, &s.due, child, n, GUARD).await;
}

/// Collects an exited (or about to exit) child's output as a [`Pass`].
async fn collect(child: tokio::process::Child, what: &str) -> Pass {
    let out = tokio::time::timeout(GUARD, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what}: run-once did not exit within {GUARD:?} (hung?)"))
        .unwrap();
    Pass {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        args: vec![what.to_string()],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_at_ten_random_points_loses_nothing_and_deletes_nothing_early() {
    let _serial = SERIAL.lock().await;
    let c = split_cluster();
    let s3 = c.s3_client();
    // FAULTS_SEED replays a failing run's points.
    let seed: u64 = std::env::var("FAULTS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    println!("faults: sigkill seed={seed} (FAULTS_SEED={seed} replays these points)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ok_runs = 0;
    let total = Instant::now();
    let name = |run: usize| format!("faults-kill-{run}");
    // The next run's bucket fills while this run's rate-limited pass waits on its limiter.
    let mut next = Some(tokio::spawn(setup_sized(c, name(0), KILL_DUE, KILL_KEEP)));
    for run in 0..KILL_RUNS {
        let t_setup = Instant::now();
        let s = next.take().expect("set up").await.unwrap();
        let setup_wait = t_setup.elapsed();
        if run + 1 < KILL_RUNS {
            next = Some(tokio::spawn(setup_sized(
                c,
                name(run + 1),
                KILL_DUE,
                KILL_KEEP,
            )));
        }
        // Anywhere from start-up (connect, bucket listing, replay) to late in the deletes, which
        // the limiter stretches to at least 5 s ([`SLOW_KILL`]): always before the pass ends.
        let delay = Duration::from_millis(rng.random_range(0..4_500));
        let mut child = run_once_command(c, &s.scope, Some(s.now), &[], &SLOW_KILL)
            .spawn()
            .unwrap();
        tokio::time::sleep(delay).await;
        let finished_first = child.try_wait().unwrap();
        child.start_kill().unwrap();
        let killed = collect(child, "killed run-once").await;
        assert!(
            finished_first.is_none() && killed.code == -1,
            "run {run}: the pass ended ({finished_first:?}) before the kill at {delay:?}, so this \
             run killed nothing:\n{}",
            killed.describe()
        );
        assert_nothing_early(&s3, &s, "after the kill").await;
        let (due_left, _) = remaining(&s3, &s).await;
        let gone_before = s.due.len() - due_left;
        let (done, took) = next_pass_completes(c, &s, gone_before).await;
        ok_runs += 1;
        println!(
            "faults: sigkill run={run} bucket={} kill_after_ms={} killed=yes(SIGKILL) \
             deleted_before_kill={gone_before} next_pass_exit=0 next_pass_done={done} \
             next_pass_ms={} due_left=0 not_due_left={KILL_KEEP} waited_for_setup_ms={}",
            s.bucket,
            delay.as_millis(),
            took.as_millis(),
            setup_wait.as_millis()
        );
    }
    println!(
        "faults: sigkill {ok_runs} of {KILL_RUNS} runs lost nothing and deleted nothing early \
         (total {:.1}s)",
        total.elapsed().as_secs_f64()
    );
    assert_eq!(ok_runs, KILL_RUNS);
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_gateway_restarted_mid_pass_halts_the_shard_then_the_next_pass_completes() {
    let _serial = SERIAL.lock().await;
    let c = split_cluster();
    let s3 = c.s3_client();
    let s = setup(c, "faults-s3-restart").await;
    let started = Instant::now();
    let mut child = run_once_command(c, &s.scope, Some(s.now), &[], &FAST_RETRY)
        .spawn()
        .unwrap();
    wait_for_deletes(&s3, &s, &mut child, RESTART_AFTER).await;
    let stop_at = started.elapsed();
    let stop_took = tokio::task::spawn_blocking(|| split_cluster().stop(Role::S3))
        .await
        .unwrap();
    let p = collect(child, "run-once during the gateway restart").await;
    let exit_at = started.elapsed();
    assert_eq!(p.code, 3, "a halted shard exits 3:\n{}", p.describe());
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    let halted = r.halted_shards().len();
    assert!(halted >= 1, "{}", p.describe());
    assert!(r.total("RPC_ERROR") >= 1, "{}", p.describe());
    let start_took = tokio::task::spawn_blocking(|| split_cluster().start_role(Role::S3))
        .await
        .unwrap();
    assert_nothing_early(&s3, &s, "after the halted pass").await;
    let (due_left, _) = remaining(&s3, &s).await;
    let gone_before = DUE - due_left;
    let (done, took) = next_pass_completes(c, &s, gone_before).await;
    println!(
        "faults: s3-restart bucket={} stopped_at_ms={} stop_ms={} halted_pass_exit={} \
         halted_pass_exit_at_ms={} halted_shards={halted} done_before={} rpc_error={} \
         gateway_start_ms={} next_pass_exit=0 next_pass_done={done} next_pass_ms={} due_left=0 \
         not_due_left={KEEP}",
        s.bucket,
        stop_at.as_millis(),
        stop_took.as_millis(),
        p.code,
        exit_at.as_millis(),
        r.total("DONE"),
        r.total("RPC_ERROR"),
        start_took.as_millis(),
        took.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn filer_stopped_mid_pass_fails_loudly_then_the_next_pass_completes() {
    let _serial = SERIAL.lock().await;
    let c = split_cluster();
    let s3 = c.s3_client();
    let s = setup(c, "faults-filer-restart").await;
    let started = Instant::now();
    let mut child = run_once_command(c, &s.scope, Some(s.now), &[], &FAST_RETRY)
        .spawn()
        .unwrap();
    wait_for_deletes(&s3, &s, &mut child, RESTART_AFTER).await;
    let restart_at = started.elapsed();
    // The filer stays down until the pass has exited. Restarted beside the
    // pass, it was back in time for the cursor saves whenever its graceful
    // stop was quick and the listing was done: the pass then rightly
    // completed (what it could not confirm waits for the next pass), and
    // the test's outcome hung on a race.
    let stop = tokio::task::spawn_blocking(|| split_cluster().stop(Role::Filer));
    let p = collect(child, "run-once while the filer is down").await;
    let exit_at = started.elapsed();
    let stop_took = stop.await.unwrap();
    let start_took = tokio::task::spawn_blocking(|| split_cluster().start_role(Role::Filer))
        .await
        .unwrap();
    // Failed, not halted: the filer holds the cursors, so nothing can be recorded; the next pass
    // starts from the last saved cursors (src/cli/run_once.rs: exit 1 is a runtime error).
    assert_eq!(
        p.code,
        1,
        "a pass that lost its filer exits 1:\n{}",
        p.describe()
    );
    let r = p.json();
    assert_eq!(r.v["outcome"], "failed", "{}", p.describe());
    let filer = c.filer_grpc_addr().to_string();
    assert!(
        p.stderr.contains("error") && p.stderr.contains("filer") && p.stderr.contains(&filer),
        "the error names the filer ({filer}):\n{}",
        p.describe()
    );
    let (log_events, log_creates) = due_events_in_log(c, &s).await;
    assert_nothing_early(&s3, &s, "after the failed pass").await;
    let (due_left, _) = remaining(&s3, &s).await;
    let gone_before = DUE - due_left;
    let (done, took) = next_pass_completes(c, &s, gone_before).await;
    println!(
        "faults: filer-stop bucket={} stopped_at_ms={} stop_ms={} start_ms={} \
         failed_pass_exit={} failed_pass_exit_at_ms={} failed_pass_done={} failed_pass_noop={} \
         metalog_due_events={log_events} metalog_due_creates={log_creates} \
         deleted_before_next={gone_before} next_pass_exit=0 next_pass_done={done} next_pass_ms={} due_left=0 not_due_left={KEEP}",
        s.bucket,
        restart_at.as_millis(),
        stop_took.as_millis(),
        start_took.as_millis(),
        p.code,
        exit_at.as_millis(),
        r.total("DONE"),
        r.total("NOOP_RESOLVED"),
        took.as_millis()
    );
}

/// A filer crash (SIGKILL, back within about a second) mid-pass makes the gateway answer
/// `NOOP_RESOLVED` for objects that are still there
/// (docs/lifecycle-delete.md#server-lookup-failures), and the crash loses the objects' creates
/// from the meta-log (docs/retention-probe.md#crash-gap), so no later replay can find them. Before
/// lost-looking answers were confirmed by a lookup, a pass that completed took them as final and
/// hundreds of due objects stayed forever (2 of 4 runs). Now they stay unresolved and the next
/// pass deletes them.
#[tokio::test(flavor = "multi_thread")]
async fn filer_killed_and_restarted_mid_pass_loses_nothing_once_the_next_pass_completes() {
    let _serial = SERIAL.lock().await;
    let c = split_cluster();
    let s3 = c.s3_client();
    let s = setup(c, "faults-filer-crash").await;
    let started = Instant::now();
    let mut child = run_once_command(c, &s.scope, Some(s.now), &[], &FAST_RETRY)
        .spawn()
        .unwrap();
    wait_for_deletes(&s3, &s, &mut child, RESTART_AFTER).await;
    let crash_at = started.elapsed();
    // A crash, not a shutdown: the filer is back within about a second, while the pass runs on.
    let (kill_took, start_took) = tokio::task::spawn_blocking(|| {
        let split = split_cluster();
        (split.kill(Role::Filer), split.start_role(Role::Filer))
    })
    .await
    .unwrap();
    let p = collect(child, "run-once across the filer crash").await;
    let exit_at = started.elapsed();
    let r = p.json();
    if std::env::var_os("E2E_DEBUG").is_some() {
        eprintln!("{}", p.describe());
    }
    assert_nothing_early(&s3, &s, "after the pass across the crash").await;
    let (due_left, _) = remaining(&s3, &s).await;
    let gone_before = DUE - due_left;
    println!(
        "faults: filer-crash bucket={} crashed_at_ms={} kill_ms={} start_ms={} pass_exit={} \
         pass_exit_at_ms={} pass_outcome={} pass_done={} pass_noop={} due_left_after_pass={due_left}",
        s.bucket,
        crash_at.as_millis(),
        kill_took.as_millis(),
        start_took.as_millis(),
        p.code,
        exit_at.as_millis(),
        r.v["outcome"],
        r.total("DONE"),
        r.total("NOOP_RESOLVED"),
    );
    let shard0 = &r.shards()[0];
    println!(
        "faults: filer-crash first shard: outcome={} recovery={} halt={}",
        shard0["outcome"], shard0["recovery"], shard0["halt_reason"]
    );
    let (events, creates) = due_events_in_log(c, &s).await;
    println!(
        "faults: filer-crash meta-log after the crash holds {events} events under due/, {creates} creates"
    );
    let (done, took) = next_pass_completes(c, &s, gone_before).await;
    println!(
        "faults: filer-crash next_pass_exit=0 next_pass_done={done} next_pass_ms={} due_left=0 \
         not_due_left={KEEP}",
        took.as_millis()
    );
}

/// Objects PUT in the last seconds before the filer is killed between two passes.
const GAP_OBJECTS: usize = 200;

/// A filer killed between two passes, and started again on its store, lost the meta-log events
/// it had not flushed (it flushes about once a minute): the objects PUT in its last seconds are
/// in its store but in no log. The next pass's replay never saw them and nothing walked the
/// bucket again, so they stayed for good. The master registers the restarted filer anew, and the
/// pass walks the bucket again (docs/meta-log.md#filer-restart). A second bucket the pass after
/// the restart leaves out (`--buckets`) keeps the mark and is walked by the pass that takes it.
#[tokio::test(flavor = "multi_thread")]
async fn filer_killed_between_passes_left_the_objects_of_its_unflushed_log_for_good() {
    let _serial = SERIAL.lock().await;
    let c = split_cluster();
    let s3 = c.s3_client();
    let rules = days_rule("due", "due/", DUE_DAYS) + &days_rule("keep", "keep/", KEEP_DAYS);
    let mut buckets = Vec::new();
    for name in ["faults-restart-gap", "faults-restart-later"] {
        let b = c.new_bucket(name).await.unwrap();
        c.put_objects_bulk(&b, &keys("keep/", 10), b"x")
            .await
            .unwrap();
        c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
        buckets.push(b);
    }
    let (bucket, later) = (&buckets[0], &buckets[1]);
    let both = Scope::new(&[bucket, later]);
    // The same cursors, the first bucket only.
    let first_only = Scope {
        buckets: vec![bucket.clone()],
        cursor_dir: both.cursor_dir.clone(),
    };
    let t0 = now_ns();
    // Pass 1: the buckets cold-start (nothing due), their cursors are saved.
    run_once(c, &both, Some(t0), &[], &[])
        .await
        .ok()
        .assert_no_deletes();
    // PUTs, then SIGKILL at once: their events are in the filer's memory only.
    let due = keys("due/", GAP_OBJECTS);
    let (a, b) = tokio::join!(
        c.put_objects_bulk(bucket, &due, b"x"),
        c.put_objects_bulk(later, &due, b"x")
    );
    a.unwrap();
    b.unwrap();
    tokio::task::spawn_blocking(|| {
        let split = split_cluster();
        split.kill(Role::Filer);
        split.start_role(Role::Filer);
    })
    .await
    .unwrap();
    let events = c
        .subscribe_events(&format!("/buckets/{bucket}/due/"), 0, now_ns())
        .await
        .unwrap();
    println!(
        "faults: restart-gap objects={GAP_OBJECTS} creates_in_log_after_restart={}",
        events.len()
    );
    let due_left = async |b: &str| {
        let left = list_keys(&s3, b).await;
        let due = left.iter().filter(|k| k.starts_with("due/")).count();
        (due, left.len() - due)
    };
    // Pass 2, three days on, the first bucket only: every `due/` object is due.
    let p = run_once(c, &first_only, Some(plus(t0, NOW_DAYS, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        due_left(bucket).await,
        (0, 10),
        "due objects left, or not-due ones gone, after the pass ({} of {GAP_OBJECTS} creates in \
         the log after the restart)\n{}",
        events.len(),
        p.describe()
    );
    assert!(
        r.recovery_reasons(bucket).contains("filer_lost"),
        "the bucket was walked again because the filer restarted\n{}",
        p.describe()
    );
    assert!(
        p.stderr.contains("registered with the master anew"),
        "the pass said why it walks: {}",
        p.describe()
    );
    // Pass 3 takes the second bucket too: it was marked although pass 2 left it alone, and the
    // first one is not walked again (the registration is remembered).
    let p = run_once(c, &both, Some(plus(t0, NOW_DAYS, 60)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(due_left(later).await, (0, 10), "{}", p.describe());
    assert_eq!(
        (r.recovery_reasons(bucket), r.recovery_reasons(later)),
        (BTreeSet::new(), BTreeSet::from(["filer_lost".to_string()])),
        "{}",
        p.describe()
    );
}
