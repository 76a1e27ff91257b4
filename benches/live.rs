//! Live figures against a loopback SeaweedFS 4.48 cluster: meta-log reader
//! replay rate, bucket lister rate, and whole `run-once` passes (deletes/s and
//! events scanned/s) next to the Go reference `s3.lifecycle.run-shard` run on
//! identical data in the same session. Prints a table; asserts no timings.
//!
//! Run (release build; several minutes, most of it PUTting fixtures):
//!
//! ```text
//! cargo bench --bench live
//! ```
//!
//! `weed` is found like the tests find it (`WEED_BIN`, `.tools/seaweedfs/bin/weed`,
//! `PATH`). Knobs (environment): `LIVE_BENCH_EVENTS` (cold/ PUTs for the scan,
//! reader and lister figures, default 100000), `LIVE_BENCH_DUE` (objects per
//! deletes run, default 10000), `LIVE_BENCH_RUNS` (runs per figure, default 3),
//! `LIVE_BENCH_MIN_AGE_S` (how old the replayed events must be before the
//! reader figure, default 130: the filer batches only events older than ~2 min).
//! `LIVE_BENCH_WINDOW` (events in the window fixture of rows (a)–(d),
//! default 1000000; 0 skips them), `LIVE_BENCH_MIXED` (new events and due
//! objects of the mixed day, default 50000), `LIVE_BENCH_CLASSIC` (0 skips the
//! reader/lister/scan/deletes rows below, default 1).
//! `LIVE_BENCH_HOLD_S` (seconds to keep the window fixture up once it is
//! settled, printing a `run-once --dry-run` that reads all of it: for
//! profiling by hand; default 0).
//! `BENCH_DIRECT_LOG_READS=0` runs our passes with `pass.direct_log_reads`
//! off (the filer streams its persisted log), `1` with it on (the default:
//! the files read from the volume servers).
//! `BENCH_PERF=/tmp/p` runs each of our passes under `perf record`
//! (`/tmp/p-<n>.data`, numbered in the order printed), for profiling.
//! `LIVE_BENCH_EVENTS=2000 LIVE_BENCH_DUE=500 LIVE_BENCH_RUNS=1
//! LIVE_BENCH_MIN_AGE_S=0 LIVE_BENCH_WINDOW=3000 LIVE_BENCH_MIXED=300
//! cargo test --bench live` is a quick debug-build smoke run. The window
//! rows alone, at scale: `LIVE_BENCH_CLASSIC=0 LIVE_BENCH_RUNS=1 cargo
//! bench --bench live` (seeds 1 M objects through the filer's CreateEntry).
//!
//! What each row means (all medians of `LIVE_BENCH_RUNS` runs):
//! - **reader**: events/s of `seaweed::metalog::MetaLogReader` replaying the
//!   scan fixture's events (PUTs under `cold/`, from the persisted log, batching
//!   on) and counting them; baseline d2 (docs/baselines.md#figures; Python grpcio,
//!   batched, ~150k ev/s). `ev/resp` shows how many events a gRPC response
//!   carried (1 = the filer did not batch).
//! - **lister**: entries/s of `seaweed::lister::list_bucket` over the scan
//!   bucket (`LIVE_BENCH_EVENTS` + 1 objects); baseline d8 (docs/baselines.md#figures; Python, raw
//!   bytes, limit 10000, ~39k entries/s).
//! - **pass deletes/s**: one `run-once` over `LIVE_BENCH_DUE` due objects
//!   (Expiration Date 2020-01-01, unversioned, fresh bucket, fresh cursor dir),
//!   against one Go `s3.lifecycle.run-shard -shards 0-15 -events 0` pass over
//!   its own fresh bucket of the same shape (docs/baselines.md#go-reference-pass,
//!   row b). Rates use process wall time (both include process start); the
//!   pass time (ours: `duration_ms`; Go: the glog `daily_run … duration=`) is shown too.
//! - **pass events/s**: nothing-due event scan (docs/baselines.md#figures, c'): a `Days 1` rule on
//!   `hot/` only, `LIVE_BENCH_EVENTS` PUTs under `cold/` and one under `hot/`
//!   after both services' cursors exist, one pass. Ours runs from a cursor dir
//!   seeded by one pass before the fixture (one dir per run, so each run scans
//!   the same window); Go's 16 cursor files under
//!   `/etc/s3/lifecycle/daily-cursors` are saved before the fixture and
//!   written back before each Go run. Ours counts `events_scanned`; Go's count
//!   is the number of `/buckets` events after its oldest saved cursor. Our
//!   runs set `pass.meta_log_retention` to 10 years, as Go assumes an unbounded
//!   log: the default probe sees a minutes-old log on a fresh cluster and would
//!   (rightly) serve the `Days 1` rule by walking instead of replaying.
//!
//! - **window rows** (docs/baselines.md#window-rows), on one bucket with a
//!   30-day rule on everything and a 3-day rule on `d/`, `LIVE_BENCH_WINDOW`
//!   events (the first `LIVE_BENCH_MIXED` under `d/`) written after both services'
//!   cursors exist, then left to age `LIVE_BENCH_MIN_AGE_S` (and past the
//!   reorder margin, with a marker event elsewhere):
//!   - **(d) scan rate**: our pass at the real now must read every event
//!     (all new); events/s by its own `duration_ms`, next to the Go pass from
//!     its saved cursors (events in its window / its `daily_run` duration),
//!     and next to our bare reader over the same events, streamed by the
//!     filer and with direct log-file reads (after one uncounted read of
//!     each, so no reading pays for the first load of the log);
//!   - **(a) steady pass**: ours at `--now` +2 d from the cursors (d) left,
//!     nothing due: events read and duration; Go from the cursors its own
//!     pass left (before its first pending match: it reads the whole window);
//!     the ratio is Go's time over ours;
//!   - **(b) mixed day**: `LIVE_BENCH_MIXED` new objects under `n/`, then ours
//!     at `--now` +5 d, once as a dry run (reads and decides, sends nothing)
//!     and once for real (the `d/` objects due: all deleted); Go from the
//!     same cursors reads the window and the new events but deletes nothing
//!     (it has no `--now`), so the ratio is Go's time over our dry run's;
//!   - **(c) walk**: the rule replaced by a never-due Expiration Date (walked
//!     every pass by both); objects / pass duration, ours (fresh cursor dir,
//!     one listing) vs Go (its walk lists the bucket once per shard).
//!
//! The box is small and shared: figures vary by up to 2× between runs
//! (docs/baselines.md#reading-the-figures). Compare the ratios, measured back to back.

#[path = "common/mod.rs"]
mod bench;
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use common::{BIN, Cluster, cluster, keys, now_ns};
use futures::StreamExt;
use s3_lifecycled::pb::filer_pb::Entry;
use s3_lifecycled::seaweed::filer::FilerClient;
use s3_lifecycled::seaweed::lister::list_bucket;
use s3_lifecycled::seaweed::metalog::{
    DEFAULT_CLIENT_NAME, MetaLogReader, ReaderOptions, SubscribeParams,
};

/// The binary's allocator (src/main.rs), so the bare reader measured in this process allocates
/// as a pass does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Where the Go pass keeps its cursors (docs/go-cursor.md#location).
const GO_CURSOR_DIR: &str = "/etc/s3/lifecycle/daily-cursors";
const HOT_XML: &[u8] = b"<LifecycleConfiguration><Rule><ID>hot1</ID><Status>Enabled</Status>\
<Filter><Prefix>hot/</Prefix></Filter><Expiration><Days>1</Days></Expiration></Rule>\
</LifecycleConfiguration>";
const PAST_DATE_XML: &[u8] =
    b"<LifecycleConfiguration><Rule><ID>past-date</ID><Status>Enabled</Status>\
<Filter><Prefix>old/</Prefix></Filter><Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration>\
</Rule></LifecycleConfiguration>";
/// 100-byte bodies, as in docs/baselines.md#fixtures.
const BODY: &[u8] = &[b'x'; 100];

struct Knobs {
    events: usize,
    due: usize,
    runs: usize,
    min_age: Duration,
    /// Run the reader/lister/scan/deletes rows (`LIVE_BENCH_CLASSIC`, 1).
    classic: bool,
    /// Events in the window fixture (`LIVE_BENCH_WINDOW`; 0 skips its rows).
    window: usize,
    /// New events and due objects of the mixed day (`LIVE_BENCH_MIXED`).
    mixed: usize,
    /// Seconds to keep the window fixture up for profiling by hand
    /// (`LIVE_BENCH_HOLD_S`, 0: no hold).
    hold: Duration,
}

fn env_num(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("{name}={v:?} is not a whole number")),
        Err(_) => Ok(default),
    }
}

impl Knobs {
    fn from_env() -> anyhow::Result<Knobs> {
        Ok(Knobs {
            events: env_num("LIVE_BENCH_EVENTS", 100_000)?.max(1) as usize,
            due: env_num("LIVE_BENCH_DUE", 10_000)?.max(1) as usize,
            runs: env_num("LIVE_BENCH_RUNS", 3)?.max(1) as usize,
            min_age: Duration::from_secs(env_num("LIVE_BENCH_MIN_AGE_S", 130)?),
            classic: env_num("LIVE_BENCH_CLASSIC", 1)? != 0,
            window: env_num("LIVE_BENCH_WINDOW", 1_000_000)? as usize,
            mixed: env_num("LIVE_BENCH_MIXED", 50_000)?.max(1) as usize,
            hold: Duration::from_secs(env_num("LIVE_BENCH_HOLD_S", 0)?),
        })
    }
}

fn runs_text(v: &[f64], unit: &str) -> String {
    v.iter()
        .map(|x| format!("{x:.3}{unit}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// PUTs `n` objects under `prefix` and logs the fixture rate.
async fn seed(c: &Cluster, bucket: &str, prefix: &str, n: usize) -> anyhow::Result<()> {
    let t = Instant::now();
    c.put_objects_bulk(bucket, &keys(prefix, n), BODY).await?;
    let el = t.elapsed().as_secs_f64();
    eprintln!(
        "  fixture: {n} PUTs into {bucket}/{prefix} in {el:.1}s ({:.0} PUT/s)",
        n as f64 / el
    );
    Ok(())
}

/// Removes a bucket's lifecycle configuration, so later Go passes (which act
/// on every configured bucket) do not walk or replay it.
async fn drop_lifecycle(c: &Cluster, bucket: &str) -> anyhow::Result<()> {
    c.s3_client()
        .delete_bucket_lifecycle()
        .bucket(bucket)
        .send()
        .await
        .with_context(|| format!("DeleteBucketLifecycle {bucket}"))?;
    Ok(())
}

/// One of our passes.
struct Ours {
    wall: Duration,
    json: serde_json::Value,
}

impl Ours {
    fn pass_ms(&self) -> f64 {
        self.json["duration_ms"].as_f64().unwrap_or(f64::NAN)
    }
    fn total(&self, key: &str) -> u64 {
        self.json["totals"][key].as_u64().unwrap_or(0)
    }
    fn done(&self) -> u64 {
        self.json["totals"]["deletes"]["DONE"].as_u64().unwrap_or(0)
    }
}

fn run_ours(c: &Cluster, bucket: &str, cursor_dir: &str) -> anyhow::Result<Ours> {
    run_ours_at(c, bucket, cursor_dir, None, &[])
}

/// [`run_ours`] with `--now` (ns) when given: time travel, never sleeps;
/// `extra` arguments after the others (`--dry-run`).
fn run_ours_at(
    c: &Cluster,
    bucket: &str,
    cursor_dir: &str,
    now: Option<i64>,
    extra: &[&str],
) -> anyhow::Result<Ours> {
    let mut cmd = bench::run_once_command(BIN, c, bucket, cursor_dir);
    cmd.stdin(Stdio::null()).args(extra);
    if let Some(n) = now {
        cmd.args(["--now", &common::rfc3339(n)]);
    }
    cmd.env("RUST_LOG", "warn");
    let t = Instant::now();
    let out = cmd.output().with_context(|| format!("spawning {BIN}"))?;
    let wall = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(0) {
        bail!(
            "run-once exited {:?}\nstdout: {stdout}\nstderr: {stderr}",
            out.status.code()
        );
    }
    let json = serde_json::from_str(stdout.trim())
        .with_context(|| format!("run-once printed no JSON: {stdout}\nstderr: {stderr}"))?;
    Ok(Ours { wall, json })
}

/// One Go `s3.lifecycle.run-shard` pass through `weed shell`.
struct Go {
    wall: Duration,
    /// The `daily_run … duration=` figure (glog, needs `-debug`).
    pass: Option<Duration>,
}

fn run_go(c: &Cluster) -> anyhow::Result<Go> {
    let script = format!(
        "s3.lifecycle.run-shard -shards 0-15 -s3 {} -events 0 -runtime 600s\nexit\n",
        c.s3_grpc_addr()
    );
    let t = Instant::now();
    let mut child = Command::new(&c.weed_bin)
        .args([
            "shell",
            "-debug",
            &format!("-master={}", c.master_weed_arg()),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {} shell", c.weed_bin.display()))?;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow!("weed shell has no stdin"))?
        .write_all(script.as_bytes())
        .context("writing the weed shell script")?;
    let out = child.wait_with_output().context("waiting for weed shell")?;
    let wall = t.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !text.contains("complete") {
        bail!("Go pass did not report completion:\n{text}");
    }
    let pass = text
        .lines()
        .find(|l| l.contains("daily_run:"))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("duration="))
        })
        .and_then(parse_go_duration);
    Ok(Go { wall, pass })
}

/// Parses the Go durations glog prints (`56ms`, `1.026s`, `1m2.5s`, `850µs`).
fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let (scale, len) = [
            ("ns", 1e-9),
            ("µs", 1e-6),
            ("us", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ]
        .iter()
        .find(|(u, _)| rest.starts_with(u))
        .map(|(u, f)| (*f, u.len()))?;
        total += value * scale;
        rest = &rest[len..];
    }
    Some(Duration::from_secs_f64(total))
}

/// The 16 Go cursor files, as stored.
async fn save_go_cursors(c: &Cluster) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for s in 0..16 {
        let name = format!("shard-{s:02}.json");
        let e = c
            .lookup_entry(GO_CURSOR_DIR, &name)
            .await?
            .ok_or_else(|| anyhow!("Go cursor {GO_CURSOR_DIR}/{name} missing after a Go pass"))?;
        out.push(e);
    }
    Ok(out)
}

async fn restore_go_cursors(c: &Cluster, saved: &[Entry]) -> anyhow::Result<()> {
    for e in saved {
        c.update_entry(GO_CURSOR_DIR, e.clone()).await?;
    }
    Ok(())
}

/// The oldest non-zero `ts_ns` among saved Go cursors: where its next
/// subscription starts.
fn go_since(saved: &[Entry]) -> anyhow::Result<i64> {
    saved
        .iter()
        .filter_map(|e| serde_json::from_slice::<serde_json::Value>(&e.content).ok())
        .filter_map(|v| v["ts_ns"].as_i64())
        .filter(|ts| *ts > 0)
        .min()
        .ok_or_else(|| anyhow!("no saved Go cursor has a ts_ns"))
}

/// Replays `(since, until]` under `/buckets` with our reader and counts events.
async fn replay_count(c: &Cluster, since: i64, until: i64) -> anyhow::Result<(u64, u64)> {
    replay_count_with(c, since, until, ReaderOptions::default()).await
}

/// [`replay_count`] with reader `options` (e.g. direct log-file reads).
async fn replay_count_with(
    c: &Cluster,
    since: i64,
    until: i64,
    options: ReaderOptions,
) -> anyhow::Result<(u64, u64)> {
    // Built on the main runtime: the channel's buffer task lives there.
    let channel =
        s3_lifecycled::seaweed::pool::lazy_channel(&c.filer_grpc_addr().to_string(), None)
            .map_err(|e| anyhow!(e))?;
    let params = SubscribeParams {
        buckets_root: "/buckets".into(),
        since_ns: since,
        until_ns: until,
        client_name: DEFAULT_CLIENT_NAME.into(),
    };
    let mut reader = MetaLogReader::open(channel, params, options).await?;
    let mut n = 0u64;
    while let Some(ev) = reader.next().await {
        ev?;
        n += 1;
    }
    if !reader.completed() {
        bail!("meta-log replay ended without the filer's end of stream");
    }
    Ok((n, reader.summary().responses))
}

/// One printed row.
struct Row {
    what: String,
    ours: String,
    baseline: String,
    ratio: String,
    runs: String,
}

fn ratio(ours: f64, base: f64) -> String {
    if base > 0.0 && ours.is_finite() {
        format!("{:.2}x", ours / base)
    } else {
        "n/a".into()
    }
}

fn main() -> anyhow::Result<()> {
    let knobs = Knobs::from_env()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let rows = rt.block_on(run(&knobs))?;
    print_table(&knobs, &rows);
    Ok(())
}

fn print_table(k: &Knobs, rows: &[Row]) {
    use bench::Align::{Left, Right};
    let mut t = bench::Table::new(&[
        ("what", Left, 4),
        ("ours", Left, 4),
        ("baseline", Left, 8),
        ("ratio", Right, 6),
        ("runs", Left, 0),
    ]);
    for r in rows {
        t.row(vec![
            r.what.clone(),
            r.ours.clone(),
            r.baseline.clone(),
            r.ratio.clone(),
            r.runs.clone(),
        ]);
    }
    let lines = t.plain_lines();
    // The rule as it always was: the text columns' widths plus 24.
    let rule = lines[0].len() + 2;
    println!();
    println!(
        "live bench: events={} due={} runs={} (medians; ratio = ours / baseline)",
        k.events, k.due, k.runs
    );
    println!("{}", lines[0]);
    println!("{}", "-".repeat(rule));
    for l in &lines[1..] {
        println!("{l}");
    }
}

async fn run(k: &Knobs) -> anyhow::Result<Vec<Row>> {
    let c = cluster();
    eprintln!(
        "cluster up: master {} filer {} s3-grpc {} (weed {})",
        c.master_weed_arg(),
        c.filer_grpc_addr(),
        c.s3_grpc_addr(),
        c.weed_bin.display()
    );
    let mut rows = Vec::new();
    if k.classic {
        rows.extend(classic_rows(c, k).await?);
    }
    if k.window > 0 {
        rows.extend(window_rows(c, k).await?);
    }
    Ok(rows)
}

/// A fresh bucket named after `prefix` with the lifecycle document `xml`,
/// `dirs` cursor directories of ours seeded by one pass each (so each later
/// pass from one of them reads the same window), and the Go worker's cursors
/// seeded by one pass and saved (to restore before each Go run). Returns the
/// bucket, our cursor directories and the saved Go cursors.
async fn cursored_bucket(
    c: &Cluster,
    prefix: &str,
    xml: &[u8],
    dirs: usize,
) -> anyhow::Result<(String, Vec<String>, Vec<Entry>)> {
    let bucket = c.new_bucket(prefix).await?;
    c.put_lifecycle_xml(&bucket, xml).await?;
    let mut ours = Vec::new();
    for i in 0..dirs {
        let dir = format!("/etc/s3/lifecycle/bench-{bucket}-{i}");
        run_ours(c, &bucket, &dir).context("seeding our cursor dir")?;
        ours.push(dir);
    }
    run_go(c).context("seeding the Go cursors")?;
    let go = save_go_cursors(c).await?;
    Ok((bucket, ours, go))
}

/// The reader, lister, nothing-due scan and deletes rows.
async fn classic_rows(c: &Cluster, k: &Knobs) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();

    // --- Fixture for the scan, reader and lister figures (first, so the Go
    // cursors' window holds little else). ---
    eprintln!("scan fixture: seeding cursors");
    let (scan, our_dirs, go_saved) = cursored_bucket(c, "bench-scan", HOT_XML, k.runs).await?;
    let go_from = go_since(&go_saved)?;
    let fixture_start = now_ns();
    seed(c, &scan, "cold/", k.events).await?;
    c.put_objects_bulk(&scan, &["hot/000000".to_string()], BODY)
        .await?;
    let fixture_end = now_ns();

    // --- Pass, events scanned/s (nothing due). ---
    eprintln!("scan: {} passes each", k.runs);
    let (mut ours_rate, mut ours_wall, mut ours_pass) = (vec![], vec![], vec![]);
    let (mut go_rate, mut go_wall, mut go_pass) = (vec![], vec![], vec![]);
    let mut ours_events = 0;
    let mut go_events = 0;
    for dir in &our_dirs {
        let r = run_ours(c, &scan, dir)?;
        if r.done() != 0 {
            bail!("the scan pass deleted something: {}", r.json);
        }
        ours_events = r.total("events_scanned");
        if std::env::var_os("LIVE_BENCH_VERBOSE").is_some() {
            eprintln!("  ours report: {}", r.json);
        }
        let recovering = r.json["shards"].as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["recovery"].as_array().is_some_and(|v| !v.is_empty()))
        });
        if recovering || ours_events == 0 {
            bail!(
                "our scan pass recovered instead of replaying; not a scan: {}",
                r.json
            );
        }
        let wall = r.wall.as_secs_f64();
        eprintln!(
            "  ours: {ours_events} events in {wall:.3}s wall (pass {:.0} ms)",
            r.pass_ms()
        );
        ours_rate.push(ours_events as f64 / wall);
        ours_wall.push(wall);
        ours_pass.push(r.pass_ms() / 1e3);

        restore_go_cursors(c, &go_saved).await?;
        let started = now_ns();
        // Go's window: after its oldest saved cursor, up to its run's now.
        let (n, _) = replay_count(c, go_from, started).await?;
        go_events = n;
        let g = run_go(c)?;
        let wall = g.wall.as_secs_f64();
        eprintln!(
            "  Go: {go_events} events in {wall:.3}s wall (pass {:?})",
            g.pass
        );
        go_rate.push(go_events as f64 / wall);
        go_wall.push(wall);
        go_pass.push(g.pass.map_or(f64::NAN, |d| d.as_secs_f64()));
    }
    let (o, g) = (
        bench::median(ours_rate.clone()),
        bench::median(go_rate.clone()),
    );
    rows.push(Row {
        what: format!("pass events/s, nothing due (ours {ours_events} ev, Go {go_events} ev)"),
        ours: format!("{o:.0} ev/s"),
        baseline: format!("Go same run {g:.0} ev/s (docs/baselines.md#figures c': ~108k)"),
        ratio: ratio(o, g),
        runs: format!(
            "wall ours {} | Go {}; pass ours {} | Go {}",
            runs_text(&ours_wall, "s"),
            runs_text(&go_wall, "s"),
            runs_text(&ours_pass, "s"),
            runs_text(&go_pass, "s")
        ),
    });
    let (op, gp) = (bench::median(ours_pass), bench::median(go_pass));
    rows.push(Row {
        what: "pass events/s, pass-internal time".into(),
        ours: format!("{:.0} ev/s", ours_events as f64 / op),
        baseline: format!("Go same run {:.0} ev/s", go_events as f64 / gp),
        ratio: ratio(ours_events as f64 / op, go_events as f64 / gp),
        runs: "ours duration_ms vs Go daily_run duration".into(),
    });
    // Later Go passes must not replay this bucket's events again.
    drop_lifecycle(c, &scan).await?;

    // --- Lister. ---
    eprintln!("lister: {} runs", k.runs);
    let filer = FilerClient::connect(&c.filer_grpc_addr().to_string()).await?;
    let (mut rates, mut times) = (vec![], vec![]);
    let mut listed = 0u64;
    for _ in 0..k.runs {
        let t = Instant::now();
        let mut listing = list_bucket(&filer, "/buckets", &scan);
        let mut n = 0u64;
        while let Some(item) = listing.next().await {
            item?;
            n += 1;
        }
        let el = t.elapsed().as_secs_f64();
        let seen = listing.stats().snapshot().entries_seen;
        eprintln!("  listed {n} items ({seen} entries) in {el:.3}s");
        listed = n;
        rates.push(n as f64 / el);
        times.push(el);
    }
    let o = bench::median(rates);
    rows.push(Row {
        what: format!("lister list_bucket, {listed} objects"),
        ours: format!("{o:.0} entries/s"),
        baseline: "docs/baselines.md#figures d8, Python limit 10000: ~39000/s".into(),
        ratio: ratio(o, 39_000.0),
        runs: runs_text(&times, "s"),
    });

    // --- Reader: replay the scan fixture's events once they are old enough
    // to come batched from the persisted log. ---
    let age = Duration::from_nanos((now_ns() - fixture_end).max(0) as u64);
    if age < k.min_age {
        let wait = k.min_age - age;
        eprintln!(
            "reader: waiting {wait:?} until the fixture's events are {:?} old",
            k.min_age
        );
        tokio::time::sleep(wait).await;
    }
    eprintln!("reader: {} runs", k.runs);
    let (mut rates, mut times) = (vec![], vec![]);
    let (mut events, mut responses) = (0, 0);
    for _ in 0..k.runs {
        let t = Instant::now();
        let (n, resp) = replay_count(c, fixture_start, fixture_end).await?;
        let el = t.elapsed().as_secs_f64();
        eprintln!("  replayed {n} events in {resp} responses, {el:.3}s");
        (events, responses) = (n, resp);
        rates.push(n as f64 / el);
        times.push(el);
    }
    let o = bench::median(rates);
    rows.push(Row {
        what: format!(
            "reader MetaLogReader, {events} events ({:.0} ev/resp)",
            events as f64 / responses.max(1) as f64
        ),
        ours: format!("{o:.0} ev/s"),
        baseline: "docs/baselines.md#figures d2, Python batched: ~150000/s".into(),
        ratio: ratio(o, 150_000.0),
        runs: runs_text(&times, "s"),
    });

    // --- Pass, deletes/s: ours and Go's, each on its own fresh bucket. ---
    eprintln!("deletes: {} rounds of {} due objects each", k.runs, k.due);
    let (mut ours_rate, mut ours_wall, mut ours_pass) = (vec![], vec![], vec![]);
    let (mut go_rate, mut go_wall, mut go_pass) = (vec![], vec![], vec![]);
    for i in 0..k.runs {
        let b = c.new_bucket(&format!("bench-ours-{i}")).await?;
        c.put_lifecycle_xml(&b, PAST_DATE_XML).await?;
        seed(c, &b, "old/", k.due).await?;
        let r = run_ours(c, &b, &format!("/etc/s3/lifecycle/bench-{b}"))?;
        let left = common::count_objects(&c.s3_client(), &b).await;
        if r.done() != k.due as u64 || left != 0 {
            bail!(
                "our pass deleted {} of {}, {left} left: {}",
                r.done(),
                k.due,
                r.json
            );
        }
        drop_lifecycle(c, &b).await?;
        let wall = r.wall.as_secs_f64();
        eprintln!(
            "  ours: {} deleted in {wall:.3}s wall (pass {:.0} ms)",
            r.done(),
            r.pass_ms()
        );
        ours_rate.push(k.due as f64 / wall);
        ours_wall.push(wall);
        ours_pass.push(r.pass_ms() / 1e3);

        let g = c.new_bucket(&format!("bench-go-{i}")).await?;
        c.put_lifecycle_xml(&g, PAST_DATE_XML).await?;
        seed(c, &g, "old/", k.due).await?;
        let run = run_go(c)?;
        let gone = k.due - common::count_objects(&c.s3_client(), &g).await;
        drop_lifecycle(c, &g).await?;
        let wall = run.wall.as_secs_f64();
        eprintln!(
            "  Go: {gone} deleted in {wall:.3}s wall (pass {:?})",
            run.pass
        );
        if gone != k.due {
            eprintln!("  warning: the Go pass left {} objects", k.due - gone);
        }
        go_rate.push(gone as f64 / wall);
        go_wall.push(wall);
        go_pass.push(run.pass.map_or(f64::NAN, |d| d.as_secs_f64()));
    }
    let (o, g) = (bench::median(ours_rate), bench::median(go_rate));
    rows.push(Row {
        what: format!("pass deletes/s, {} due objects", k.due),
        ours: format!("{o:.0} del/s"),
        baseline: format!("Go same run {g:.0} del/s (docs/baselines.md#figures b: ~2510)"),
        ratio: ratio(o, g),
        runs: format!(
            "wall ours {} | Go {}; pass ours {} | Go {}",
            runs_text(&ours_wall, "s"),
            runs_text(&go_wall, "s"),
            runs_text(&ours_pass, "s"),
            runs_text(&go_pass, "s")
        ),
    });
    let (op, gp) = (bench::median(ours_pass), bench::median(go_pass));
    rows.push(Row {
        what: "pass deletes/s, pass-internal time".into(),
        ours: format!("{:.0} del/s", k.due as f64 / op),
        baseline: format!("Go same run {:.0} del/s", k.due as f64 / gp),
        ratio: ratio(k.due as f64 / op, k.due as f64 / gp),
        runs: "ours duration_ms vs Go daily_run duration".into(),
    });
    Ok(rows)
}

/// The window fixture: one 30-day rule over the bucket and a 3-day rule on
/// `d/` (the mixed day's due objects).
const WINDOW_XML: &[u8] = b"<LifecycleConfiguration>\
<Rule><ID>all30</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
<Expiration><Days>30</Days></Expiration></Rule>\
<Rule><ID>due3</ID><Status>Enabled</Status><Filter><Prefix>d/</Prefix></Filter>\
<Expiration><Days>3</Days></Expiration></Rule></LifecycleConfiguration>";
/// The walk row's rule: walker-only (Expiration Date), never due.
const WALK_XML: &[u8] = b"<LifecycleConfiguration><Rule><ID>walk2099</ID>\
<Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
<Expiration><Date>2099-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>";
/// CreateEntry calls in flight while seeding through the filer.
const FILER_SEED_IN_FLIGHT: usize = 64;
const DAY_NS: i64 = 86_400_000_000_000;

/// Creates `n` objects `{prefix}{i:06}` of 100 bytes through the filer's
/// CreateEntry (far faster than S3 PUTs at a million objects): each a copy of
/// one object PUT through S3 (same attributes and extended keys), with a
/// fresh mtime and the body inline. One meta-log create event each.
async fn seed_filer(c: &Cluster, bucket: &str, prefix: &str, n: usize) -> anyhow::Result<()> {
    let template_key = format!("{prefix}template");
    c.put_objects_bulk(bucket, std::slice::from_ref(&template_key), BODY)
        .await?;
    let (dir, name) = template_key.rsplit_once('/').unwrap_or(("", &template_key));
    let dir = format!("/buckets/{bucket}/{dir}")
        .trim_end_matches('/')
        .to_string();
    let mut template = c
        .lookup_entry(&dir, name)
        .await?
        .ok_or_else(|| anyhow!("seed template {dir}/{name} missing after its PUT"))?;
    template.chunks.clear();
    template.content = BODY.to_vec();
    if let Some(a) = template.attributes.as_mut() {
        a.file_size = BODY.len() as u64;
    }
    let keys = keys(prefix, n);
    let what = format!("fixture: {n} CreateEntry into {bucket}/{prefix}");
    bench::create_entries(c, n, FILER_SEED_IN_FLIGHT, &what, |i| {
        let mut e = template.clone();
        e.name = keys[i].rsplit('/').next().unwrap_or(&keys[i]).to_string();
        (dir.clone(), e)
    })
    .await
}

/// `replay.events_read` of one of our passes.
fn events_read(r: &Ours) -> u64 {
    r.json["replay"]["events_read"].as_u64().unwrap_or(0)
}

/// Go time / our time, as the speed-up.
fn speedup(ours_s: f64, go_s: f64) -> String {
    if ours_s > 0.0 && go_s.is_finite() {
        format!("{:.1}x", go_s / ours_s)
    } else {
        "n/a".into()
    }
}

/// One Go pass from `saved` cursors: (events in its window, pass seconds).
async fn go_pass_from(c: &Cluster, saved: &[Entry]) -> anyhow::Result<(u64, f64, f64)> {
    restore_go_cursors(c, saved).await?;
    let started = now_ns();
    let (n, _) = replay_count(c, go_since(saved)?, started).await?;
    let g = run_go(c)?;
    let pass = g.pass.map_or(f64::NAN, |d| d.as_secs_f64());
    eprintln!(
        "  Go: {n} events in its window, pass {pass:.3}s (wall {:.3}s)",
        g.wall.as_secs_f64()
    );
    Ok((n, pass, g.wall.as_secs_f64()))
}

/// Window rows (a)–(d) on one bucket of `LIVE_BENCH_WINDOW` events:
/// scan rate of a pass that must read everything (vs Go and our bare
/// reader), the steady pass at +2 d, the mixed day at +5 d, the walk.
async fn window_rows(c: &Cluster, k: &Knobs) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let n = k.window;
    let m = k.mixed.min(n / 2).max(1);
    eprintln!("window fixture: {n} events ({m} under d/), then {m} new");
    // With a hold, one more cursor dir, the spare: dry runs save no cursor,
    // so every dry run from it reads the whole window again.
    let extra = usize::from(!k.hold.is_zero());
    let (w, mut dirs, go_before) =
        cursored_bucket(c, "bench-window", WINDOW_XML, k.runs + extra).await?;
    let spare = if extra == 1 {
        dirs.pop().unwrap_or_default()
    } else {
        String::new()
    };
    let start = now_ns();
    seed_filer(c, &w, "d/", m - 1).await?;
    seed_filer(c, &w, "w/", n - m - 1).await?;
    let end = now_ns();
    // The events must be old enough to come batched from the persisted log,
    // and a pass keeps its progress 5 s (the reorder margin) behind the
    // newest event it read: a marker written after that, outside the bucket,
    // lets the steady pass start after the fixture (docs/due-index.md#reading).
    let settle = k.min_age.max(Duration::from_secs(6));
    let age = Duration::from_nanos((now_ns() - end).max(0) as u64);
    if age < settle {
        let wait = settle - age;
        eprintln!("window: waiting {wait:?} (batched log, reorder margin)");
        tokio::time::sleep(wait).await;
    }
    let marker = c.new_bucket("bench-marker").await?;
    c.put_objects_bulk(&marker, &["marker".to_string()], BODY)
        .await?;
    if !k.hold.is_zero() {
        let mut cmd = bench::run_once_command(BIN, c, &w, &spare);
        cmd.arg("--dry-run");
        eprintln!(
            "hold: the window is up for {:?}; each of these reads all of it:\n{cmd:?}",
            k.hold
        );
        tokio::time::sleep(k.hold).await;
    }

    // --- (d) reader, then the scan rate of a pass that must read everything.
    // One read first, not counted: the filer loads its log files from the
    // volume server on the first read of a window, and the reader, read
    // first, would carry that cost alone (at 1 M events it ran at 0.7x the
    // pass that read the same window after it).
    let (ev, _) = replay_count(c, start, end).await?;
    eprintln!("  warm-up read: {ev} events (not counted)");
    let mut reader = vec![];
    let mut direct_reader = vec![];
    let direct = ReaderOptions {
        direct_log_reads: Some(Default::default()),
        ..ReaderOptions::default()
    };
    let _ = replay_count_with(c, start, end, direct.clone()).await?;
    for _ in 0..k.runs {
        let t = Instant::now();
        let (ev, resp) = replay_count(c, start, end).await?;
        let el = t.elapsed().as_secs_f64();
        eprintln!("  reader: {ev} events in {resp} responses, {el:.3}s");
        reader.push(ev as f64 / el);
        // The reader as a pass uses it by default: the files from the
        // volume servers, the rest streamed.
        let t = Instant::now();
        let (ev, _) = replay_count_with(c, start, end, direct.clone()).await?;
        let el = t.elapsed().as_secs_f64();
        eprintln!("  reader, direct log reads: {ev} events, {el:.3}s");
        direct_reader.push(ev as f64 / el);
    }
    let (mut ours_rate, mut ours_pass, mut go_rate, mut go_pass) = (vec![], vec![], vec![], vec![]);
    let (mut ours_ev, mut go_ev) = (0, 0);
    for dir in &dirs {
        let r = run_ours(c, &w, dir)?;
        if r.done() != 0 || events_read(&r) < n as u64 {
            bail!("the scan pass deleted or missed something: {}", r.json);
        }
        ours_ev = events_read(&r);
        let pass = r.pass_ms() / 1e3;
        eprintln!(
            "  ours: {ours_ev} events, pass {pass:.3}s, {} batches",
            r.json["replay"]["batches"]
        );
        ours_rate.push(ours_ev as f64 / pass);
        ours_pass.push(pass);
        let (gn, gp, _) = go_pass_from(c, &go_before).await?;
        go_ev = gn;
        go_rate.push(gn as f64 / gp);
        go_pass.push(gp);
    }
    let (o, g, rd) = (
        bench::median(ours_rate),
        bench::median(go_rate),
        bench::median(reader.clone()),
    );
    rows.push(Row {
        what: format!("(d) scan rate, pass reads everything (ours {ours_ev} ev, Go {go_ev} ev)"),
        ours: format!("{o:.0} ev/s"),
        baseline: format!("Go same run {g:.0} ev/s (pass-internal times)"),
        ratio: ratio(o, g),
        runs: format!(
            "pass ours {} | Go {}",
            runs_text(&ours_pass, "s"),
            runs_text(&go_pass, "s")
        ),
    });
    rows.push(Row {
        what: "(d) scan rate vs our bare reader (same events)".into(),
        ours: format!("{o:.0} ev/s"),
        baseline: format!("reader {rd:.0} ev/s"),
        ratio: ratio(o, rd),
        runs: format!("reader {}", runs_text(&reader, " ev/s")),
    });
    let dr = bench::median(direct_reader.clone());
    rows.push(Row {
        what: "(d) scan rate vs our bare reader, direct log reads".into(),
        ours: format!("{o:.0} ev/s"),
        baseline: format!("direct reader {dr:.0} ev/s"),
        ratio: ratio(o, dr),
        runs: format!("direct reader {}", runs_text(&direct_reader, " ev/s")),
    });

    // --- (a) steady pass at +2 d: nothing due. Go's cursors are where its
    // own last pass left them (before the first pending match).
    let go_after = save_go_cursors(c).await?;
    let t2 = now_ns() + 2 * DAY_NS;
    let (mut ours_s, mut ours_read, mut go_s) = (vec![], 0, vec![]);
    for dir in &dirs {
        let r = run_ours_at(c, &w, dir, Some(t2), &[])?;
        if r.done() != 0 {
            bail!("the steady pass deleted something: {}", r.json);
        }
        ours_read = events_read(&r);
        ours_s.push(r.pass_ms() / 1e3);
        eprintln!(
            "  ours steady: {ours_read} events read, pass {:.3}s",
            r.pass_ms() / 1e3
        );
        let (gn, gp, _) = go_pass_from(c, &go_after).await?;
        go_ev = gn;
        go_s.push(gp);
    }
    let (o, g) = (bench::median(ours_s.clone()), bench::median(go_s.clone()));
    rows.push(Row {
        what: format!("(a) steady pass +2d, {n} ev window, nothing due"),
        ours: format!("{ours_read} ev read, {o:.3}s"),
        baseline: format!("Go same data {go_ev} ev, {g:.3}s"),
        ratio: speedup(o, g),
        runs: format!(
            "less time than Go; pass ours {} | Go {}",
            runs_text(&ours_s, "s"),
            runs_text(&go_s, "s")
        ),
    });

    // --- (b) mixed day at +5 d: m new events, the m objects under d/ due.
    seed_filer(c, &w, "n/", m).await?;
    let t5 = now_ns() + 5 * DAY_NS;
    // First a dry run at the same `now`: it reads and decides what the real
    // pass will, sends nothing and saves nothing, so it does the work Go's
    // pass does here (Go has no `--now`: it only reads).
    let dry = run_ours_at(c, &w, &dirs[0], Some(t5), &["--dry-run"])?;
    let (od, dry_read) = (dry.pass_ms() / 1e3, events_read(&dry));
    eprintln!("  ours mixed, dry run: {dry_read} events read, pass {od:.3}s");
    let r = run_ours_at(c, &w, &dirs[0], Some(t5), &[])?;
    let due = m as u64;
    if r.done() != due {
        bail!(
            "the mixed-day pass deleted {} of {due}: {}",
            r.done(),
            r.json
        );
    }
    let (o, read) = (r.pass_ms() / 1e3, events_read(&r));
    eprintln!(
        "  ours mixed: {read} events read, {} deleted, pass {o:.3}s",
        r.done()
    );
    let (gn, gp, _) = go_pass_from(c, &go_after).await?;
    rows.push(Row {
        what: format!("(b) mixed day +5d: {m} new events, {m} due"),
        ours: format!("{dry_read} ev read, dry run {od:.3}s"),
        baseline: format!("Go same data {gn} ev, {gp:.3}s (reads only: its clock is real)"),
        ratio: speedup(od, gp),
        runs: format!(
            "one run; ratio = Go time / our dry run's; the real pass: {read} ev read, {} deleted, {o:.3}s",
            r.done()
        ),
    });

    // --- (c) walk: a walker-only rule (never due) over the whole bucket.
    c.put_lifecycle_xml(&w, WALK_XML).await?;
    // w/: n − m objects, n/: m + 1 (its template); d/ was deleted.
    let objects = n + 1;
    let (mut ours_w, mut go_w) = (vec![], vec![]);
    for i in 0..k.runs {
        let r = run_ours(c, &w, &format!("/etc/s3/lifecycle/bench-{w}-walk-{i}"))?;
        let pass = r.pass_ms() / 1e3;
        eprintln!("  ours walk: pass {pass:.3}s, {} deleted", r.done());
        ours_w.push(pass);
        let g = run_go(c)?;
        let gp = g.pass.map_or(f64::NAN, |d| d.as_secs_f64());
        eprintln!("  Go walk: pass {gp:.3}s");
        go_w.push(gp);
    }
    let (o, g) = (bench::median(ours_w.clone()), bench::median(go_w.clone()));
    let (or, gr) = (objects as f64 / o, objects as f64 / g);
    rows.push(Row {
        what: format!("(c) walk, {objects}-object bucket"),
        ours: format!("{or:.0} entries/s"),
        baseline: format!("Go same bucket {gr:.0} entries/s"),
        ratio: ratio(or, gr),
        runs: format!(
            "pass ours {} | Go {}",
            runs_text(&ours_w, "s"),
            runs_text(&go_w, "s")
        ),
    });
    drop_lifecycle(c, &w).await?;
    Ok(rows)
}
