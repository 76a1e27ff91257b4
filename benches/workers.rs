//! Two `s3-lifecycled worker`s against one under a real `weed admin` (docs/plugin-worker.md):
//! the same number of due deletes (`WORKERS_BENCH_DUE`, default 100,000; Expiration Date
//! 2020-01-01, unversioned, a fresh bucket and cursor dir per run) is run once through one
//! worker (one job over all 16 shards) and once through two (two jobs of 8 shards, one per
//! worker). Each worker process is pinned to one core with `taskset -c N` when `taskset` exists
//! (worker i on core i mod cores). Prints deletes/s for each and the ratio; asserts that every
//! due object is gone, no timings.
//!
//! Run (release build; most of the time is PUTting the fixtures):
//!
//! ```text
//! cargo bench --bench workers
//! ```
//!
//! `WORKERS_BENCH_DUE=200 cargo test --bench workers` is a quick debug-build smoke run.
//!
//! The admin's scheduler runs the jobs (a manual run of a disabled job type cancels executions
//! after 90 s): the wall time runs from enabling the job type to the last job's success
//! (detection within 5 s, dispatch, the passes); the slowest job's own pass time
//! (`duration_ms`) and the rate over it are shown too. The cluster (master, volume, filer, S3) shares the
//! machine with the workers, so on a 2-core box the second worker competes with SeaweedFS for
//! CPU: read the ratio as "what a second worker buys on this box", not as scaling.

#[path = "common/mod.rs"]
mod bench;
#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use common::admin::WeedAdmin;
use common::{BIN, Cluster, cluster, keys};
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes};
use serde_json::{Value, json};

const PAST_DATE_XML: &[u8] =
    b"<LifecycleConfiguration><Rule><ID>past-date</ID><Status>Enabled</Status>\
<Filter><Prefix>old/</Prefix></Filter><Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration>\
</Rule></LifecycleConfiguration>";
/// 100-byte bodies, as in docs/baselines.md#fixtures.
const BODY: &[u8] = &[b'x'; 100];

fn due_count() -> anyhow::Result<usize> {
    match std::env::var("WORKERS_BENCH_DUE") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .map(|n| n.max(1))
            .with_context(|| format!("WORKERS_BENCH_DUE={v:?} is not a whole number")),
        Err(_) => Ok(100_000),
    }
}

/// A fresh bucket with `n` due objects under `old/`, created through the filer's gRPC
/// `CreateEntry` (100-byte inline content, `IN_FLIGHT` at once): many times the rate of S3 PUTs
/// from a debug-built client, and the same entries for the walker and the gateway's delete.
async fn fixture(c: &Cluster, n: usize) -> anyhow::Result<String> {
    const IN_FLIGHT: usize = 128;
    let b = c.new_bucket("bench-workers").await?;
    let dir = format!("/buckets/{b}/old");
    let names = keys("", n);
    let what = format!("fixture: {n} filer CreateEntry into {b}/old/");
    bench::create_entries(c, n, IN_FLIGHT, &what, |i| {
        let entry = Entry {
            name: names[i].clone(),
            content: BODY.to_vec(),
            attributes: Some(FuseAttributes {
                file_size: BODY.len() as u64,
                file_mode: 0o644,
                ..Default::default()
            }),
            ..Default::default()
        };
        (dir.clone(), entry)
    })
    .await?;
    c.put_lifecycle_xml(&b, PAST_DATE_XML).await?;
    Ok(b)
}

/// Starts worker `id` pinned to `cpu` (when taskset exists), killed on drop.
fn start_worker(
    a: &WeedAdmin,
    id: &str,
    cpu: Option<usize>,
    bucket: &str,
    cursor: &str,
    state: &std::path::Path,
) -> anyhow::Result<tokio::process::Child> {
    std::fs::create_dir_all(state)?;
    let log = std::fs::File::create(state.join(format!("{id}.log")))?;
    let mut cmd = match cpu {
        Some(n) => {
            let mut c = tokio::process::Command::new("taskset");
            c.args(["-c", &n.to_string(), BIN]);
            c
        }
        None => tokio::process::Command::new(BIN),
    };
    cmd.args([
        "worker",
        "--admin",
        &a.worker_arg(),
        "--id",
        id,
        "--state-dir",
    ])
    .arg(state)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("S3_LIFECYCLED__PASS__BUCKETS", bucket)
    .env("S3_LIFECYCLED__CURSOR__DIR", cursor)
    .env("S3_LIFECYCLED__TELEMETRY__LOG_FILTER", "warn")
    .stdin(Stdio::null())
    .stdout(Stdio::from(log.try_clone()?))
    .stderr(Stdio::from(log))
    .kill_on_drop(true);
    cmd.spawn().context("spawning s3-lifecycled worker")
}

struct Figure {
    workers: usize,
    deletes: usize,
    wall: Duration,
    slowest_pass_ms: i64,
}

/// One run through `n` workers over a fresh fixture of `due` objects.
async fn run(c: &Cluster, a: &WeedAdmin, n: usize, due: usize) -> anyhow::Result<Figure> {
    eprintln!("{n} worker(s):");
    let b = fixture(c, due).await?;
    let cursor = format!("/etc/s3/lifecycle/bench-{b}");
    let state = std::env::temp_dir().join(format!("s3lc-bench-workers-{b}"));
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let pin = std::path::Path::new("/usr/bin/taskset").exists()
        || std::process::Command::new("taskset")
            .arg("-V")
            .output()
            .is_ok();
    let ids: Vec<String> = (0..n).map(|i| format!("bench-{b}-{i}")).collect();
    let mut children = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let cpu = pin.then_some(i % cores);
        children.push(start_worker(a, id, cpu, &b, &cursor, &state)?);
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    a.wait_workers(&refs).await;
    // A manual run of a disabled job type ignores the stored runtime and cancels an
    // execution after 90 s (docs/plugin-worker.md#execution-timeout), so the scheduler runs
    // these: disabling clears its next detection, enabling detects within 5 s.
    let runtime = |enabled: bool| {
        vec![
            ("enabled", json!(enabled)),
            ("detection_interval_minutes", json!(1440)),
            ("max_jobs_per_detection", json!(n)),
            ("global_execution_concurrency", json!(n)),
            ("per_worker_execution_concurrency", json!(1)),
            ("retry_limit", json!(0)),
            ("execution_timeout_seconds", json!(3600)),
            ("job_type_max_runtime_seconds", json!(3600)),
        ]
    };
    a.configure(&[("cluster_deletes_per_second", 0)], &runtime(false))
        .await;
    let before: std::collections::BTreeSet<String> = job_ids(a).await;
    let t = Instant::now();
    a.configure(&[("cluster_deletes_per_second", 0)], &runtime(true))
        .await;
    let (wall, slowest, deleted) = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if t.elapsed() > Duration::from_secs(3600) {
            bail!("{n} worker(s): jobs not done after an hour");
        }
        let new: Vec<String> = job_ids(a).await.difference(&before).cloned().collect();
        if new.len() < n {
            continue;
        }
        let mut done = 0;
        let (mut s, mut d) = (0, 0);
        for id in &new {
            let detail = a.get(&format!("/api/plugin/jobs/{id}/detail")).await;
            // The job's own state (the detail also carries other jobs' history).
            let state = detail
                .pointer("/job/state")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if state.contains("failed") || state.contains("canceled") {
                bail!("{n} worker(s): job {id} did not succeed: {detail}");
            }
            if !state.contains("succeeded") {
                continue;
            }
            done += 1;
            let int = |k: &str| {
                detail
                    .pointer(&format!("/job/result_output_values/{k}/int64_value"))
                    .and_then(|v| {
                        v.as_str()
                            .and_then(|s| s.parse().ok())
                            .or_else(|| v.as_i64())
                    })
                    .unwrap_or(0)
            };
            s = s.max(int("duration_ms"));
            d += int("deleted");
            eprintln!(
                "  job {id}: deleted={} pass={} ms; {}",
                int("deleted"),
                int("duration_ms"),
                detail
                    .pointer("/job/result_summary")
                    .or_else(|| detail.pointer("/job/summary"))
                    .unwrap_or(&Value::Null)
            );
        }
        if done == new.len() {
            break (t.elapsed(), s, d);
        }
    };
    a.configure(&[("cluster_deletes_per_second", 0)], &runtime(false))
        .await;
    let left = common::count_objects(&c.s3_client(), &b).await;
    if left != 0 || deleted != due as i64 {
        bail!("{n} worker(s): {left} objects left, {deleted} deletes reported for {due} due");
    }
    drop(children);
    // The admin lists a worker for 2 minutes after it went: the next run's set is new ids.
    Ok(Figure {
        workers: n,
        deletes: due,
        wall,
        slowest_pass_ms: slowest,
    })
}

async fn job_ids(a: &WeedAdmin) -> std::collections::BTreeSet<String> {
    a.jobs()
        .await
        .iter()
        .filter_map(|j: &Value| j["job_id"].as_str().map(str::to_string))
        .collect()
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; this harness has no options.
    let due = due_count()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let c = cluster();
        let a = WeedAdmin::start(c);
        let one = run(c, &a, 1, due).await?;
        let two = run(c, &a, 2, due).await?;
        let rate = |f: &Figure| f.deletes as f64 / f.wall.as_secs_f64();
        let pass_rate = |f: &Figure| f.deletes as f64 * 1000.0 / f.slowest_pass_ms.max(1) as f64;
        let mut t = bench::Table::new(&[
            ("workers", bench::Align::Left, 0),
            ("due deletes", bench::Align::Left, 0),
            ("enable → all jobs done", bench::Align::Left, 0),
            ("deletes/s", bench::Align::Left, 0),
            ("slowest job's pass", bench::Align::Left, 0),
            ("deletes/s over it", bench::Align::Left, 0),
        ]);
        for f in [&one, &two] {
            t.row(vec![
                f.workers.to_string(),
                f.deletes.to_string(),
                format!("{:.1} s", f.wall.as_secs_f64()),
                format!("{:.0}", rate(f)),
                format!("{:.1} s", f.slowest_pass_ms as f64 / 1000.0),
                format!("{:.0}", pass_rate(f)),
            ]);
        }
        println!();
        for l in t.markdown_lines() {
            println!("{l}");
        }
        println!(
            "two workers / one worker: {:.2}x (deletes/s, wall), {:.2}x (over the slowest pass)",
            rate(&two) / rate(&one),
            pass_rate(&two) / pass_rate(&one)
        );
        Ok(())
    })
}
