//! Several filers and S3 gateways on one real cluster: one master, one volume server, two filers
//! with their own stores, two gateways each given both filers (`multi_cluster`,
//! docs/test-cluster.md#multi-cluster). A filer or a gateway killed mid-pass loses nothing and
//! deletes nothing early; a pass configured with only `cluster.master` discovers both filers and
//! both gateways. The cross-filer event delay that sets `pass.reorder_margin` is measured and
//! printed: `cargo test --test two_filers -- --nocapture`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use s3_lifecycled::pb::filer_pb::SubscribeMetadataRequest;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;

/// Objects due at the pass's `--now`.
const DUE: usize = 1_500;
/// Objects not yet due at the pass's `--now`.
const KEEP: usize = 500;
/// 500 deletes per second and a burst of 10: 1,500 deletes take about 3 s, long enough to kill
/// a server in the middle; short transport backoffs so a halt comes quickly.
const SLOW: [(&str, &str); 4] = [
    ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "500"),
    ("S3_LIFECYCLED__RATE__BURST", "10"),
    ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "50ms"),
    ("S3_LIFECYCLED__DISPATCH__RETRY_MAX_BACKOFF", "200ms"),
];
/// Deletes done before a server is killed (the pass is mid-way).
const KILL_AFTER: usize = 300;
/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);
/// How long a listing through either gateway may lag the deletes (a hang guard).
const CONVERGE: Duration = Duration::from_secs(60);
/// The default `pass.reorder_margin` (config/default.toml).
const REORDER_MARGIN: Duration = Duration::from_secs(5);

use crate::SERIAL;

/// One run's bucket: its keys, its scope and the `--now` its passes use.
struct Setup {
    bucket: String,
    scope: Scope,
    due: BTreeSet<String>,
    keep: BTreeSet<String>,
    now: i64,
}

async fn setup(c: &SplitCluster, name: &str, due: usize, keep: usize) -> Setup {
    let bucket = c.new_bucket(name).await.unwrap();
    // The bucket, then its rules, on both filers before any object is written
    // (docs/test-cluster.md#multi-cluster).
    c.bucket_on_both_filers(&bucket, false).await;
    let rules = days_rule("due", "due/", 1) + &days_rule("keep", "keep/", 30);
    c.put_rules(&bucket, &lifecycle(&rules)).await;
    let due_keys = keys("due/", due);
    let keep_keys = keys("keep/", keep);
    let (a, b) = tokio::join!(
        c.put_objects_bulk(&bucket, &due_keys, b"x"),
        c.put_objects_bulk(&bucket, &keep_keys, b"x")
    );
    a.unwrap();
    b.unwrap();
    let scope = Scope::new(&[&bucket]);
    Setup {
        bucket,
        scope,
        due: due_keys.into_iter().collect(),
        keep: keep_keys.into_iter().collect(),
        now: plus(now_ns(), 3, 0),
    }
}

/// Both filers and both gateways, filer 1 and gateway 1 first.
fn both(c: &SplitCluster) -> [String; 4] {
    [
        "--filer".into(),
        format!("{},{}", c.filer_grpc_addr(), c.filer2_grpc_addr()),
        "--s3-grpc".into(),
        format!("{},{}", c.s3_grpc_addr(), c.s3_2_grpc_addr()),
    ]
}

/// `run-once --json` for `s` at `now` with `cluster` flags (no `--filer`/`--s3-grpc` when
/// empty) and `env`, not yet spawned.
fn pass_command(
    s: &Setup,
    now: i64,
    cluster: &[String],
    env: &[(&str, &str)],
) -> tokio::process::Command {
    let mut args: Vec<String> = vec!["run-once".into(), "--json".into()];
    args.extend(cluster.iter().cloned());
    args.extend([
        "--buckets".into(),
        s.scope.buckets.join(","),
        "--now".into(),
        rfc3339(now),
    ]);
    let mut all_env = vec![("S3_LIFECYCLED__CURSOR__DIR", s.scope.cursor_dir.as_str())];
    all_env.extend_from_slice(env);
    command(&args, &all_env)
}

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

/// (due objects left, not-due objects left), listed through `s3`.
async fn remaining(s3: &aws_sdk_s3::Client, s: &Setup) -> (usize, usize) {
    remaining_of(s3, &s.bucket, &s.due, &s.keep).await
}

/// Waits until every shard cursor file under `dir` on filer 2 is on filer 1 with the same
/// content (a restarted filer 1 catching up on its peer's changes).
async fn filer1_has_filer2s_cursors(c: &SplitCluster, dir: &str) {
    use s3_lifecycled::seaweed::filer::FilerClient;
    let f1 = c.filer().await;
    let f2 = FilerClient::connect(&c.filer2_grpc_addr().to_string())
        .await
        .unwrap();
    eventually(GUARD, Duration::from_millis(200), async || {
        for shard in 0..16u8 {
            let name = format!("shard-{shard:02}.json");
            let on2 = f2.lookup(dir, &name).await.map_err(|e| e.to_string())?;
            let Some(on2) = on2 else { continue };
            let on1 = f1.lookup(dir, &name).await.map_err(|e| e.to_string())?;
            if on1.map(|e| e.content) != Some(on2.content) {
                return Err(format!("{dir}/{name} not yet caught up on filer 1"));
            }
        }
        Ok(())
    })
    .await;
}

/// The due keys either filer's own store holds (listed on each filer directly).
async fn due_on_either_store(c: &SplitCluster, s: &Setup) -> BTreeSet<String> {
    use futures::StreamExt;
    use s3_lifecycled::seaweed::filer::FilerClient;
    let dir = format!("{}/{}/due", c.buckets_root(), s.bucket);
    let mut keys = BTreeSet::new();
    for addr in [c.filer_grpc_addr(), c.filer2_grpc_addr()] {
        let f = FilerClient::connect(&addr.to_string()).await.unwrap();
        let entries: Vec<_> = f.list_all(&dir, 1024).collect().await;
        for e in entries {
            keys.insert(format!("due/{}", e.unwrap().name));
        }
    }
    keys
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

/// Asserts every due object is gone and every other one is still there (listed through `s3`).
/// A gateway lists through its own filer first, and a filer applies what its peer deleted a
/// few seconds later, longer while it reconnects after a restart (docs/test-cluster.md#multi-cluster):
/// the listing is polled until it shows that state. A lost delete or an early one never
/// converges, and fails after [`CONVERGE`] with the last listing's counts.
async fn assert_end_state(s3: &aws_sdk_s3::Client, s: &Setup, p: &Pass, when: &str) {
    eventually(CONVERGE, Duration::from_millis(500), async || {
        let left = list_keys(s3, &s.bucket).await;
        if left == s.keep {
            return Ok(());
        }
        // Which ones, and whether gateway 1's filer still lists them too: a key only one
        // filer lists is a replication lag between the stores, one both list was never
        // deleted.
        let due_left: Vec<&String> = left.intersection(&s.due).collect();
        let via_1 = list_keys(&multi_cluster().s3_client(), &s.bucket).await;
        let on_both = due_left.iter().filter(|k| via_1.contains(**k)).count();
        Err(format!(
            "{when}: {} due objects left ({on_both} of them listed through gateway 1 as well; \
             first: {:?}), {} not-due objects gone:\n{}",
            due_left.len(),
            due_left.iter().take(10).collect::<Vec<_>>(),
            s.keep.len() - left.intersection(&s.keep).count(),
            p.describe()
        ))
    })
    .await;
}

/// Events written through filer 2 (via gateway 2) reach a live subscription on filer 1 (the
/// filers aggregate each other's meta-logs, docs/meta-log.md#several-filers), and a bounded
/// subscription on filer 1, as a pass makes, holds them all. Measures how late they arrive:
/// the figure `pass.reorder_margin` is set from; it must stay below the default margin.
#[tokio::test(flavor = "multi_thread")]
async fn cross_filer_events_reach_the_other_filer_within_the_reorder_margin() {
    const N: usize = 60;
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let bucket = c.new_bucket("multi-delay").await.unwrap();
    c.bucket_on_both_filers(&bucket, false).await;
    let prefix = format!("/buckets/{bucket}/");
    let since = now_ns();
    // A live (unbounded) subscription on filer 1, and one on filer 2 for comparison.
    let arrivals = |addr: std::net::SocketAddr| {
        let prefix = prefix.clone();
        tokio::spawn(async move {
            let mut client = SeaweedFilerClient::connect(format!("http://{addr}"))
                .await
                .unwrap();
            let req = SubscribeMetadataRequest {
                client_name: "s3-lifecycled-tests".into(),
                path_prefix: prefix,
                since_ns: since,
                client_id: rand::random_range(1..i32::MAX),
                ..Default::default()
            };
            let mut stream = client.subscribe_metadata(req).await.unwrap().into_inner();
            let mut seen: BTreeMap<String, (i64, i64)> = BTreeMap::new();
            while seen.len() < N {
                let Ok(Some(resp)) = stream.message().await else {
                    break;
                };
                let arrived = now_ns();
                let batch = resp.events.clone();
                for ev in std::iter::once(resp).chain(batch) {
                    let name = entry_name_of(&ev);
                    if name.starts_with("obj-") {
                        seen.entry(name).or_insert((ev.ts_ns, arrived));
                    }
                }
            }
            seen
        })
    };
    let on_filer1 = arrivals(c.filer_grpc_addr());
    let on_filer2 = arrivals(c.filer2_grpc_addr());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s3_2 = s3_client_at(&c.s3_2_endpoint());
    for i in 0..N {
        put(&s3_2, &bucket, &format!("obj-{i:03}"), b"x", None).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (f1, f2) = tokio::time::timeout(Duration::from_secs(60), async {
        (on_filer1.await.unwrap(), on_filer2.await.unwrap())
    })
    .await
    .expect("every event reached both subscriptions within 60 s");
    assert_eq!(
        f1.len(),
        N,
        "filer 1 saw {} of {N} events written through filer 2",
        f1.len()
    );
    assert_eq!(f2.len(), N);
    let delays = |m: &BTreeMap<String, (i64, i64)>| {
        let mut d: Vec<i64> = m.values().map(|(ts, at)| (at - ts) / 1_000_000).collect();
        d.sort_unstable();
        d
    };
    let (d1, d2) = (delays(&f1), delays(&f2));
    let pct = |d: &[i64], p: usize| d[(d.len() - 1) * p / 100];
    println!(
        "multi: cross-filer delay (written through filer 2, seen on filer 1) n={N} min_ms={} \
         median_ms={} p95_ms={} max_ms={}; local (seen on filer 2) median_ms={} max_ms={}",
        d1[0],
        pct(&d1, 50),
        pct(&d1, 95),
        d1[N - 1],
        pct(&d2, 50),
        d2[N - 1]
    );
    let max = Duration::from_millis(u64::try_from(d1[N - 1]).unwrap_or(0));
    assert!(
        max < REORDER_MARGIN,
        "a peer's event arrived {max:?} late, beyond the default reorder margin {REORDER_MARGIN:?}"
    );
    // The timestamps are filer 2's (the writer's), not filer 1's arrival time.
    for (name, (ts1, _)) in &f1 {
        assert_eq!(*ts1, f2[name].0, "{name}: same ts_ns on both filers");
    }
    // A bounded read of filer 1's log, as a pass makes, holds every one of them.
    let mut filer1 = SeaweedFilerClient::connect(format!("http://{}", c.filer_grpc_addr()))
        .await
        .unwrap();
    let req = SubscribeMetadataRequest {
        client_name: "s3-lifecycled-tests".into(),
        path_prefix: prefix.clone(),
        since_ns: since,
        until_ns: now_ns(),
        client_id: rand::random_range(1..i32::MAX),
        client_supports_batching: true,
        ..Default::default()
    };
    let mut stream = filer1.subscribe_metadata(req).await.unwrap().into_inner();
    let mut bounded = BTreeSet::new();
    while let Some(resp) = stream.message().await.unwrap() {
        let batch = resp.events.clone();
        for ev in std::iter::once(resp).chain(batch) {
            let name = entry_name_of(&ev);
            if name.starts_with("obj-") {
                bounded.insert(name);
            }
        }
    }
    assert_eq!(bounded.len(), N, "a bounded read of filer 1 holds all {N}");
}

fn entry_name_of(ev: &s3_lifecycled::pb::filer_pb::SubscribeMetadataResponse) -> String {
    ev.event_notification
        .as_ref()
        .and_then(|n| n.new_entry.as_ref().or(n.old_entry.as_ref()))
        .map(|e| e.name.clone())
        .unwrap_or_default()
}

/// Filer 1 (the one the pass uses first) is SIGKILLed mid-pass. Filer calls move to filer 2.
/// The filers here have their own stores, so the meta-log cannot move with them (filer 1's
/// events are only in its log, docs/meta-log.md#several-filers): the pass completes if its
/// replay needs no stream from filer 1, and otherwise fails or halts loudly, naming filer 1,
/// without deleting anything early. Once filer 1 is back, the next pass completes with every
/// due object gone and every other one kept.
#[tokio::test(flavor = "multi_thread")]
async fn filer_killed_mid_pass_fails_over_to_the_other_filer_and_loses_nothing() {
    kill_filer_1_mid_pass("multi-filer-kill", &SLOW, KILL_AFTER, None).await;
}

/// The same with filer 2 frozen (SIGSTOP) for [`PEER_FROZEN`] before filer 1 is killed, as a
/// loaded filer 2 lags behind its peer: the deletes filer 1 acknowledged meanwhile never reach
/// filer 2 (filer 1's unflushed log tail dies with it), and filer 1 itself can come back
/// without some of them (docs/meta-log.md#filer-crash). Before, the first pass's walk vouched
/// for them and every later pass walked nothing: 29 due objects stayed, listed through both
/// gateways (once by itself in about 8 runs of the test above: 337).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "open: an entry left on filer 2 only can stay unconfirmed past the third pass when \
            gateway 1 reads filer 1 again (docs/meta-log.md#filer-crash); run with --ignored"]
async fn filer_killed_while_its_peer_lagged_left_due_objects_after_a_filer_crash() {
    let slower = [
        ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "100"),
        SLOW[1],
        SLOW[2],
        SLOW[3],
    ];
    kill_filer_1_mid_pass("multi-filer-lag", &slower, 100, Some(PEER_FROZEN)).await;
}

/// How long filer 2 is frozen before filer 1 is killed, in
/// [`filer_killed_while_its_peer_lagged_left_due_objects_after_a_filer_crash`].
const PEER_FROZEN: Duration = Duration::from_millis(1_500);

/// Sends `sig` (`-STOP`, `-CONT`) to filer 2.
fn signal_filer_2(c: &SplitCluster, sig: &str) {
    let pid = c.pid(Role::Filer2).expect("filer 2 runs").to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// The pass at `env`'s rate; filer 1 SIGKILLed once `kill_after` due objects are gone (filer 2
/// frozen for `freeze` first, when given); filer 1 restarted; up to three more passes.
async fn kill_filer_1_mid_pass(
    name: &str,
    env: &[(&str, &str)],
    kill_after: usize,
    freeze: Option<Duration>,
) {
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let s = setup(c, name, DUE, KEEP).await;
    // Listed through gateway 2, which prefers filer 2: it keeps answering while filer 1 is down.
    let s3 = s3_client_at(&c.s3_2_endpoint());
    let started = Instant::now();
    let mut child = pass_command(&s, s.now, &both(c), env).spawn().unwrap();
    wait_for_deletes(&s3, &s, &mut child, kill_after).await;
    let kill_at = started.elapsed();
    if let Some(d) = freeze {
        signal_filer_2(c, "-STOP");
        tokio::time::sleep(d).await;
    }
    tokio::task::spawn_blocking(|| multi_cluster().kill(Role::Filer))
        .await
        .unwrap();
    if freeze.is_some() {
        signal_filer_2(c, "-CONT");
    }
    let p = collect(child, "run-once while filer 1 is killed").await;
    // Back before any assertion, so a failure does not leave filer 1 down for later tests.
    tokio::task::spawn_blocking(|| multi_cluster().start_role(Role::Filer))
        .await
        .unwrap();
    let r = p.json();
    let (_, keep_left) = remaining(&s3, &s).await;
    assert_eq!(keep_left, KEEP, "nothing early:\n{}", p.describe());
    let outcome = r.v["outcome"].as_str().unwrap_or_default().to_string();
    let filer1 = c.filer_grpc_addr().to_string();
    match p.code {
        0 => assert_eq!(outcome, "completed", "{}", p.describe()),
        1 | 3 => assert!(
            p.stderr.contains(&filer1),
            "a pass that could not finish names filer 1 ({filer1}):\n{}",
            p.describe()
        ),
        _ => panic!("unexpected exit:\n{}", p.describe()),
    }
    let first_done = r.total("DONE");
    // With separate stores a restarted filer applies its peer's changes as it catches up
    // (docs/meta-log.md#several-filers): until then the cursors the first pass saved through
    // filer 2 look absent on filer 1, and a save through filer 1 is refused as a second
    // writer (safe, and the pass after would go on). Wait for the catch-up, as the first
    // pass's cursors must be what the next pass starts from.
    filer1_has_filer2s_cursors(c, &s.scope.cursor_dir).await;
    // A filer killed mid-pass can lose deletes it acknowledged (docs/meta-log.md#filer-crash):
    // what gateway 2 lists now is what the next passes must delete, each object once. Without
    // a lost delete that is every due object the first pass did not delete.
    // A delete lost on filer 1's store only is made again once a gateway reads that store:
    // counted between what gateway 2 lists and what either store holds.
    let (left, _) = remaining(&s3, &s).await;
    let lost = first_done + left as i64 - DUE as i64;
    let lost_anywhere = first_done + due_on_either_store(c, &s).await.len() as i64 - DUE as i64;
    // The next pass completes. While filer 1 catches up, a gateway can answer NOT_FOUND for an
    // entry the other filer still shows; the pass reports such answers as unconfirmed and the
    // pass after retries them (docs/lifecycle-delete.md#outcomes): run passes while any are.
    let mut next_done = 0;
    let mut passes = Vec::new();
    for i in 1..=3 {
        let next = pass_command(&s, s.now + i * 60 * SEC_NS, &both(c), &[])
            .spawn()
            .unwrap();
        let p2 = collect(next, "the next pass, filer 1 back").await;
        let r2 = p2.ok();
        next_done += r2.total("DONE");
        let unconfirmed = r2.totals("unconfirmed");
        passes.push(p2);
        if unconfirmed == 0 {
            break;
        }
    }
    let p2 = passes.last().unwrap();
    assert_end_state(&s3, &s, p2, "after the next pass").await;
    assert!(
        lost >= 0,
        "{left} due objects left after the first pass's {first_done} deletes:\n{}",
        p.describe()
    );
    let done = first_done + next_done;
    assert!(
        (DUE as i64 + lost..=DUE as i64 + lost_anywhere).contains(&done),
        "each due object deleted once, and again each one whose delete the crash lost \
         ({lost} listed by gateway 2, {lost_anywhere} on either store): {done} deletes:\n{}\n{}",
        p.describe(),
        passes
            .iter()
            .map(Pass::describe)
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!(
        "multi: filer-kill bucket={} killed_at_ms={} pass_exit={} outcome={outcome} done={first_done} \
         lost_deletes={lost} next_pass_exit=0 next_pass_done={next_done} due_left=0 \
         not_due_left={KEEP}",
        s.bucket,
        kill_at.as_millis(),
        p.code
    );
}

/// Gateway 1 is SIGKILLed mid-pass: its deletes go to gateway 2 and the pass completes
/// without a halt, every due object gone, nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn gateway_killed_mid_pass_the_other_carries_on_without_a_halt() {
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let s = setup(c, "multi-gw-kill", DUE, KEEP).await;
    let s3 = s3_client_at(&c.s3_2_endpoint());
    let started = Instant::now();
    let mut child = pass_command(&s, s.now, &both(c), &SLOW).spawn().unwrap();
    wait_for_deletes(&s3, &s, &mut child, KILL_AFTER).await;
    let kill_at = started.elapsed();
    tokio::task::spawn_blocking(|| multi_cluster().kill(Role::S3))
        .await
        .unwrap();
    let p = collect(child, "run-once while gateway 1 is killed").await;
    // Back before any assertion: a failure here must not leave the shared cluster without
    // gateway 1 for the tests after it.
    tokio::task::spawn_blocking(|| multi_cluster().start_role(Role::S3))
        .await
        .unwrap();
    let r = p.ok();
    assert_end_state(&s3, &s, &p, "after the pass").await;
    assert_eq!(
        r.total("DONE") + r.total("NOOP_RESOLVED"),
        DUE as i64,
        "every due object resolved once:\n{}",
        p.describe()
    );
    println!(
        "multi: gateway-kill bucket={} killed_at_ms={} pass_exit=0 done={} noop={} rpc_error={} \
         pass_ms={} due_left=0 not_due_left={KEEP}",
        s.bucket,
        kill_at.as_millis(),
        r.total("DONE"),
        r.total("NOOP_RESOLVED"),
        r.total("RPC_ERROR"),
        started.elapsed().as_millis()
    );
}

/// Only `cluster.master` set: the pass reads both filers and both gateways from the master's
/// membership and completes.
#[tokio::test(flavor = "multi_thread")]
async fn pass_with_only_the_master_configured_discovers_filers_and_gateways() {
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let s = setup(c, "multi-discovery", 40, 20).await;
    let master = c.master_grpc_addr().to_string();
    let p = collect(
        pass_command(
            &s,
            s.now,
            &[],
            &[("S3_LIFECYCLED__CLUSTER__MASTER", master.as_str())],
        )
        .spawn()
        .unwrap(),
        "run-once with only cluster.master",
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 40, "{}", p.describe());
    assert_end_state(&c.s3_client(), &s, &p, "after the discovered pass").await;
    // Both gateways and both filers came from the master.
    for addr in [
        c.filer_grpc_addr(),
        c.filer2_grpc_addr(),
        c.s3_grpc_addr(),
        c.s3_2_grpc_addr(),
    ] {
        assert!(
            p.stderr.contains(&addr.to_string()),
            "the membership names {addr}:\n{}",
            p.describe()
        );
    }
}

/// No filer reachable: the pass fails loudly, naming every filer tried. Every gateway down:
/// the shard halts, as with one gateway.
#[tokio::test(flavor = "multi_thread")]
async fn no_reachable_filer_fails_and_no_reachable_gateway_halts() {
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let s = setup(c, "multi-none", 5, 5).await;
    let dead = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
    let p = collect(
        pass_command(
            &s,
            s.now,
            &[
                "--filer".into(),
                dead.join(","),
                "--s3-grpc".into(),
                c.s3_grpc_addr().to_string(),
            ],
            &[],
        )
        .spawn()
        .unwrap(),
        "run-once with no reachable filer",
    )
    .await;
    assert_eq!(p.code, 1, "{}", p.describe());
    for d in &dead {
        assert!(
            p.stderr.contains(d.as_str()),
            "names {d}:\n{}",
            p.describe()
        );
    }
    let filers = format!("{},{}", c.filer_grpc_addr(), c.filer2_grpc_addr());
    let p = collect(
        pass_command(
            &s,
            s.now,
            &["--filer".into(), filers, "--s3-grpc".into(), dead.join(",")],
            &SLOW,
        )
        .spawn()
        .unwrap(),
        "run-once with no reachable gateway",
    )
    .await;
    assert_eq!(p.code, 3, "halted:\n{}", p.describe());
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    assert!(r.total("RPC_ERROR") >= 1, "{}", p.describe());
    assert_eq!(remaining(&c.s3_client(), &s).await, (5, 5));
}
