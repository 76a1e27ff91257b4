//! `s3-lifecycled worker` under a real `weed admin` (docs/plugin-worker.md): two workers share the
//! shards of a run triggered through the admin's HTTP API, the admin's rate share holds per
//! worker, a worker killed with SIGKILL loses nothing and reports its lost job when it comes back,
//! a job in the Go detector's shape runs every shard, and `run-once` refuses (and `serve`) to
//! delete while a Go `weed worker` serves `s3_lifecycle` (and, on `weed mini`, what a pass says
//! of its own Go worker).
//!
//! One admin is shared by the tests that use our workers; they run one at a time (the admin's
//! job-type config and worker set are global). Lifecycle time is a 2 s day without rounding, so
//! a 1-day rule is due 2 s after the PUT and the passes the admin starts at the wall clock see it.

mod common;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::admin::{LifecycleWorker, WeedAdmin};
use common::*;
use serde_json::{Value, json};

/// A 1-day rule is due 2 s after the PUT; `keep/` (100,000 days) never in these tests.
const ENV_DAY: [(&str, &str); 2] = [
    ("S3_LIFECYCLED__TIME__DAY", "2s"),
    ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
];
const KEEP: usize = 40;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static ADMIN: OnceLock<WeedAdmin> = OnceLock::new();

fn admin() -> &'static WeedAdmin {
    ADMIN.get_or_init(|| WeedAdmin::start(common::cluster()))
}

/// A bucket with `due` objects under `due/` (due 2 s after the PUT) and [`KEEP`] under `keep/`.
async fn bucket(
    c: &Cluster,
    name: &str,
    due: usize,
) -> (String, BTreeSet<String>, BTreeSet<String>) {
    let b = c.new_bucket(name).await.unwrap();
    let d = keys("due/", due);
    let k = keys("keep/", KEEP);
    c.put_objects_bulk(&b, &d, b"x").await.unwrap();
    c.put_objects_bulk(&b, &k, b"x").await.unwrap();
    let rules = days_rule("due", "due/", 1) + &days_rule("keep", "keep/", 100_000);
    c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
    // Past the due time of every `due/` object.
    tokio::time::sleep(Duration::from_secs(3)).await;
    (b, d.into_iter().collect(), k.into_iter().collect())
}

/// Worker environment: the test's bucket and cursor dir, the short day, and `extra`.
fn worker_env<'a>(
    bucket: &'a str,
    cursor_dir: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("S3_LIFECYCLED__PASS__BUCKETS", bucket),
        ("S3_LIFECYCLED__CURSOR__DIR", cursor_dir),
    ];
    env.extend_from_slice(&ENV_DAY);
    env.extend_from_slice(extra);
    env
}

/// Runtime settings for manual runs only (no scheduled pass interferes), `jobs` per detection.
fn runtime(jobs: i64) -> Vec<(&'static str, Value)> {
    vec![
        ("enabled", json!(false)),
        ("max_jobs_per_detection", json!(jobs)),
        ("global_execution_concurrency", json!(jobs)),
        ("per_worker_execution_concurrency", json!(1)),
        ("retry_limit", json!(0)),
    ]
}

async fn remaining(
    c: &Cluster,
    b: &str,
    due: &BTreeSet<String>,
    keep: &BTreeSet<String>,
) -> (usize, usize) {
    let left = list_keys(&c.s3_client(), b).await;
    (
        left.intersection(due).count(),
        left.intersection(keep).count(),
    )
}

/// An `int64_value` output of a job detail, wherever the admin put the output map.
fn output_int(detail: &Value, key: &str) -> Option<i64> {
    let v = detail
        .pointer(&format!("/job/result_output_values/{key}"))
        .or_else(|| detail.pointer(&format!("/result_output_values/{key}")))?;
    v["int64_value"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v["int64_value"].as_i64())
}

/// The succeeded jobs among `before`'s complement: (job id, worker id, detail).
async fn new_jobs(a: &WeedAdmin, before: &BTreeSet<String>) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for j in a.jobs().await {
        let id = j["job_id"].as_str().unwrap_or_default().to_string();
        if before.contains(&id) {
            continue;
        }
        let detail = a.get(&format!("/api/plugin/jobs/{id}/detail")).await;
        out.push((
            id,
            j["worker_id"].as_str().unwrap_or_default().to_string(),
            detail,
        ));
    }
    out
}

async fn job_ids(a: &WeedAdmin) -> BTreeSet<String> {
    a.jobs()
        .await
        .iter()
        .filter_map(|j| j["job_id"].as_str().map(str::to_string))
        .collect()
}

fn state_dir(name: &str) -> TmpDir {
    TmpDir::new(&format!("s3lc-worker-{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_shards_and_delete_every_due_object_once() {
    let _serial = SERIAL.lock().await;
    let c = common::cluster();
    let a = admin();
    let (b, due, keep) = bucket(c, "e2e-plugin-two", 300).await;
    let cursor = format!("/etc/s3/lifecycle/e2e-{b}");
    let dir = state_dir("two");
    let env = worker_env(&b, &cursor, &[]);
    let w1 = LifecycleWorker::start(a, "s3lc-two-a", dir.path(), &env);
    let w2 = LifecycleWorker::start(a, "s3lc-two-b", dir.path(), &env);
    a.wait_workers(&["s3lc-two-a", "s3lc-two-b"]).await;
    a.configure(&[("cluster_deletes_per_second", 0)], &runtime(2))
        .await;
    let before = job_ids(a).await;

    let run = a.run(300).await;
    assert_eq!(run["detected_count"], 2, "{run}");
    assert_eq!(
        run["success_count"],
        2,
        "{run}\n{}\n{}",
        w1.log_text(),
        w2.log_text()
    );
    assert_eq!(run["error_count"], 0, "{run}");

    let jobs = new_jobs(a, &before).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let workers: BTreeSet<&str> = jobs.iter().map(|(_, w, _)| w.as_str()).collect();
    assert_eq!(
        workers,
        BTreeSet::from(["s3lc-two-a", "s3lc-two-b"]),
        "{jobs:?}"
    );
    let mut deleted = 0;
    for (id, _, detail) in &jobs {
        println!("job {id} as the admin records it: {detail}");
        let text = detail.to_string();
        assert!(text.contains("job_state_succeeded"), "{id}: {detail}");
        assert!(
            text.contains("s3-lifecycled pass"),
            "{id}: no summary: {detail}"
        );
        deleted += output_int(detail, "deleted")
            .unwrap_or_else(|| panic!("{id}: no deleted output: {detail}"));
    }
    assert_eq!(deleted, 300, "each due object deleted exactly once");
    assert_eq!(remaining(c, &b, &due, &keep).await, (0, KEEP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_worker_keeps_to_its_share_of_the_cluster_rate() {
    let _serial = SERIAL.lock().await;
    let c = common::cluster();
    let a = admin();
    let (b, due, keep) = bucket(c, "e2e-plugin-rate", 400).await;
    let cursor = format!("/etc/s3/lifecycle/e2e-{b}");
    let dir = state_dir("rate");
    let env = worker_env(&b, &cursor, &[]);
    let _w1 = LifecycleWorker::start(a, "s3lc-rate-a", dir.path(), &env);
    let _w2 = LifecycleWorker::start(a, "s3lc-rate-b", dir.path(), &env);
    a.wait_workers(&["s3lc-rate-a", "s3lc-rate-b"]).await;
    // 40/s and a burst of 2 for the cluster: 20/s and a burst of 1 per worker.
    a.configure(
        &[
            ("cluster_deletes_per_second", 40),
            ("cluster_deletes_burst", 2),
        ],
        &runtime(2),
    )
    .await;
    let before = job_ids(a).await;
    let run = a.run(300).await;
    assert_eq!(run["success_count"], 2, "{run}");
    let jobs = new_jobs(a, &before).await;
    let mut total = 0;
    for (id, worker, detail) in &jobs {
        let deleted = output_int(detail, "deleted").unwrap();
        let ms = output_int(detail, "duration_ms").unwrap();
        total += deleted;
        assert!(deleted > 0, "{id} on {worker} deleted nothing: {detail}");
        // One token of burst, then 20 per second: at least (deleted - 1) / 20 s.
        let rate = (deleted - 1) as f64 / (ms as f64 / 1000.0);
        println!(
            "rate share: job {id} on {worker}: {deleted} deletes in {ms} ms = {rate:.1}/s (share 20/s)"
        );
        assert!(
            rate <= 22.0,
            "{id} on {worker}: {rate:.1}/s exceeds its 20/s share by more than 10%"
        );
    }
    assert_eq!(total, 400);
    assert_eq!(remaining(c, &b, &due, &keep).await, (0, KEEP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_reports_the_lost_job_and_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let c = common::cluster();
    let a = admin();
    let (b, due, keep) = bucket(c, "e2e-plugin-kill", 600).await;
    let cursor = format!("/etc/s3/lifecycle/e2e-{b}");
    let dir = state_dir("kill");
    let env = worker_env(&b, &cursor, &[]);
    let mut w = LifecycleWorker::start(a, "s3lc-kill", dir.path(), &env);
    a.wait_workers(&["s3lc-kill"]).await;
    a.configure(
        &[
            ("cluster_deletes_per_second", 30),
            ("cluster_deletes_burst", 1),
        ],
        &runtime(1),
    )
    .await;
    let before = job_ids(a).await;
    let admin_http = a.http_addr();
    let first = tokio::spawn(async move {
        s3_lifecycled::plugin::admin_http::call(
            None,
            &admin_http,
            "POST",
            "/api/plugin/job-types/s3_lifecycle/run",
            Some(&json!({"timeout_seconds": 600})),
            Duration::from_secs(600),
        )
        .await
    });
    // Mid-job: some deletes done, most not.
    let started = Instant::now();
    loop {
        let (left, _) = remaining(c, &b, &due, &keep).await;
        if left <= 550 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no deletes yet:\n{}",
            w.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    w.child.start_kill().unwrap(); // SIGKILL
    let _ = w.child.wait().await;
    let (left_at_kill, keep_at_kill) = remaining(c, &b, &due, &keep).await;
    assert!(left_at_kill > 0, "the job finished before the kill");
    assert_eq!(keep_at_kill, KEEP);

    // Same id, same state dir: it reports the execution it lost, and the pending run ends.
    let w = LifecycleWorker::start(a, "s3lc-kill", dir.path(), &env);
    let (status, run) = tokio::time::timeout(Duration::from_secs(120), first)
        .await
        .expect("the first run is released by the lost-job report")
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(run["error_count"], 1, "{run}\n{}", w.log_text());
    let lost = new_jobs(a, &before).await;
    assert!(
        lost.iter()
            .any(|(_, _, d)| d.to_string().contains("worker restarted; job lost")),
        "{lost:?}"
    );
    a.wait_workers(&["s3lc-kill"]).await;
    let before = job_ids(a).await;
    let run = a.run(300).await;
    assert_eq!(run["success_count"], 1, "{run}\n{}", w.log_text());
    assert_eq!(
        remaining(c, &b, &due, &keep).await,
        (0, KEEP),
        "{:?}",
        new_jobs(a, &before).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_in_the_go_detectors_shape_runs_every_shard() {
    let _serial = SERIAL.lock().await;
    let c = common::cluster();
    let a = admin();
    let (b, due, keep) = bucket(c, "e2e-plugin-go-shape", 100).await;
    let cursor = format!("/etc/s3/lifecycle/e2e-{b}");
    let dir = state_dir("goshape");
    let env = worker_env(&b, &cursor, &[]);
    let w = LifecycleWorker::start(a, "s3lc-goshape", dir.path(), &env);
    a.wait_workers(&["s3lc-goshape"]).await;
    a.configure(&[("cluster_deletes_per_second", 0)], &runtime(1))
        .await;
    // What the Go detector proposes: no shards, no dedupe key, only the filer's gRPC address.
    let job = json!({
        "job": {
            "job_type": "s3_lifecycle",
            "job_id": format!("go-shaped-{}", std::process::id()),
            "parameters": {"filer_grpc_address": {"string_value": c.filer_grpc_addr().to_string()}}
        },
        "timeout_seconds": 300
    });
    let (status, done) = a.call("POST", "/api/plugin/jobs/execute", Some(job)).await;
    assert_eq!(status, 200, "{done}\n{}", w.log_text());
    let text = done.to_string();
    assert_eq!(done["success"], true, "{done}");
    assert!(text.contains("0-15"), "not every shard ran: {done}");
    assert_eq!(remaining(c, &b, &due, &keep).await, (0, KEEP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_refuses_to_delete_while_a_go_worker_serves_s3_lifecycle() {
    let c = common::cluster();
    // An admin of its own: the Go worker must never get a job from the shared one.
    let a = WeedAdmin::start(c);
    let work = TmpDir::new("s3lc-go-worker");
    let mut go = tokio::process::Command::new(&c.weed_bin)
        .args([
            "worker".to_string(),
            format!("-admin={}", a.worker_arg()),
            "-jobType=s3_lifecycle".to_string(),
            format!("-workingDir={}", work.path().display()),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning weed worker");
    a.wait_any_lifecycle_worker("the Go worker").await;
    let b = c.new_bucket("e2e-plugin-enforcer").await.unwrap();
    let s3 = c.s3_client();
    put(&s3, &b, "due/1", b"x", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("due", "due/", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let admin_addr = a.worker_arg();
    let mut env = vec![("S3_LIFECYCLED__WEED_ADMIN__ADDRESS", admin_addr.as_str())];
    env.extend_from_slice(&ENV_DAY);
    let now = Some(now_ns() + 10 * SEC_NS);

    let p = run_once(c, &scope, now, &[], &env).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("refusing to delete"), "{}", p.describe());
    assert!(
        p.stderr.contains("-jobType="),
        "the fix is named: {}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, set(&["due/1"]));

    // `serve` asks before every pass: the pass fails, visibly, and deletes nothing.
    let srv = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__WEED_ADMIN__ADDRESS", admin_addr.as_str())],
    )
    .await;
    let (run_id, _) = srv.trigger(&[]).await;
    let last = srv.wait_last(&run_id, Duration::from_secs(60)).await;
    assert_eq!(last["outcome"], "failed", "{last}");
    assert!(
        srv.log_text().contains("refusing to delete"),
        "{}",
        srv.log_text()
    );
    drop(srv);
    assert_eq!(list_keys(&s3, &b).await, set(&["due/1"]));

    let checked = env.clone();
    env.push(("S3_LIFECYCLED__WEED_ADMIN__ALLOW_OTHER_ENFORCERS", "true"));
    let p = run_once(c, &scope, now, &[], &env).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(list_keys(&s3, &b).await.is_empty());

    // `weed mini`'s own worker offers s3_lifecycle and cannot be restarted without it, so the
    // check refused every pass there. With the job type disabled at the admin the worker gets
    // no scheduled job: the pass goes on, with a warning, and without the override.
    put(&s3, &b, "due/2", b"x", None).await;
    a.configure(&[], &[("enabled", json!(false))]).await;
    let p = run_once(c, &scope, Some(now_ns() + 10 * SEC_NS), &[], &checked).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(
        p.stderr
            .contains(s3_lifecycled::plugin::enforcer::DISABLED_AT_ADMIN),
        "{}",
        p.describe()
    );
    assert!(list_keys(&s3, &b).await.is_empty());
    let _ = go.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_known_to_the_master_but_not_configured_is_named_in_a_warning() {
    let _serial = SERIAL.lock().await;
    let c = common::cluster();
    let a = admin();
    let master = c.master_weed_arg();
    // What 4.48 tells about an admin (docs/plugin-worker.md#admin-discovery): it is no cluster
    // node (ListClusterNodes lists none of client type "admin"), but it holds the master's
    // "admin-server" lock while it runs; nowhere is its address.
    let nodes = s3_lifecycled::seaweed::discovery::list_nodes(&master, "admin", None)
        .await
        .unwrap();
    assert!(nodes.is_empty(), "the master lists an admin: {nodes:?}");
    let started = Instant::now();
    let holder = loop {
        match s3_lifecycled::seaweed::discovery::admin_presence(&master, None)
            .await
            .unwrap()
        {
            Some(h) => break h,
            None => {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "the master never reports the admin's lock; admin log:\n{}",
                    a.log_tail()
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    assert!(holder.contains("admin-server"), "{holder}");

    // `run-once` with only the master to find the admin by: it warns, naming the setting, and
    // (no foreign worker being known) still runs.
    let b = c.new_bucket("e2e-plugin-undiscovered").await.unwrap();
    let s3 = c.s3_client();
    put(&s3, &b, "due/1", b"x", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("due", "due/", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let mut env = vec![("S3_LIFECYCLED__CLUSTER__MASTER", master.as_str())];
    env.extend_from_slice(&ENV_DAY);
    let p = run_once(c, &scope, Some(now_ns() + 10 * SEC_NS), &[], &env).await;
    assert!(
        p.stderr
            .contains(s3_lifecycled::plugin::enforcer::UNCONFIGURED_ADMIN)
            && p.stderr.contains("master reports a weed admin connected"),
        "{}",
        p.describe()
    );
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
}

/// `weed mini`, as a beginner starts it: its own admin schedules the Go `s3_lifecycle` worker
/// it runs. Before: with no admin configured nothing said a Go worker ran beside us, and with
/// `weed_admin.address` set every pass was refused, since that worker always offers the job
/// type and takes no `-jobType=` (docs/go-cursor.md#another-enforcer,
/// docs/plugin-worker.md#one-enforcer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weed_minis_go_worker_went_unnoticed_or_refused_every_pass() {
    use s3_lifecycled::pass::prepare::GO_WORKER;
    use s3_lifecycled::plugin::enforcer::DISABLED_AT_ADMIN;
    let m = common::mini::mini();
    let a = &m.admin;
    a.wait_any_lifecycle_worker("weed mini's worker").await;
    let b = m.bucket_due_in_a_day("e2e-mini").await;
    let s3 = m.s3_client();
    let scope = Scope::new(&[&b]);
    let all: Vec<u8> = (0..16).collect();
    let admin_addr = a.worker_arg();
    let mut with_admin = vec![("S3_LIFECYCLED__WEED_ADMIN__ADDRESS", admin_addr.as_str())];
    with_admin.extend_from_slice(&ENV_DAY);
    // The admin's first Go pass comes 5 minutes after start; its "Run now" is the same pass.
    a.run(120).await;

    // No admin configured: the pass deletes, and says the Go worker may still run.
    let p = run_once(m, &scope, Some(now_ns() + 10 * SEC_NS), &[], &ENV_DAY).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    assert_eq!(r.v["go_worker"]["recent"], json!(all), "{}", p.describe());
    assert!(
        p.stderr.contains(&format!("{GO_WORKER} may still run")),
        "{}",
        p.describe()
    );

    // With the admin configured, its worker is refused, and the refusal names the job type's
    // switch, the only fix on `weed mini`.
    put(&s3, &b, "o/later", b"x", None).await;
    let now = Some(now_ns() + 10 * SEC_NS);
    let p = run_once(m, &scope, now, &[], &with_admin).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("refusing to delete") && p.stderr.contains("admin_runtime.enabled false"),
        "{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, set(&["o/later"]));
    // The job type disabled: the pass goes on, with a warning.
    a.configure(&[], &[("enabled", json!(false))]).await;
    let p = run_once(m, &scope, now, &[], &with_admin).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(p.stderr.contains(DISABLED_AT_ADMIN), "{}", p.describe());
    assert!(!p.stderr.contains(GO_WORKER), "{}", p.describe());

    // "Run now" still starts a Go pass (weed stamps its files in whole seconds: one second
    // apart from our last look), and the next pass names it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    a.run(120).await;
    let p = run_once(m, &scope, Some(now_ns() + 10 * SEC_NS), &[], &with_admin).await;
    let r = p.ok();
    assert_eq!(
        r.v["go_worker"]["since_last_pass"],
        json!(all),
        "{}",
        p.describe()
    );
    assert!(
        p.stderr
            .contains(&format!("{GO_WORKER} runs on this cluster")),
        "{}",
        p.describe()
    );
}
