//! Peak RSS of one `s3-lifecycled run-once` pass against a loopback SeaweedFS
//! 4.48 cluster, as the meta-log it reads grows: the pass must stay flat (±10%)
//! from 100 k to 2 M events, with one rule, with 1,000 rules across 100
//! buckets, and with 3,000 buckets of one rule each (what a shard keeps per
//! bucket, times 16 shards). Prints a table with each row's ratio to the
//! smallest size; asserts nothing. Figures: docs/due-index.md#memory.
//!
//! Run (release build; seeding 2 M entries takes several minutes):
//!
//! ```text
//! cargo bench --bench rss
//! ```
//!
//! Knobs (environment): `RSS_BENCH_SIZES` (comma-separated event counts,
//! cumulative, default `100000,1000000,2000000`), `RSS_BENCH_SEED_IN_FLIGHT`
//! (concurrent CreateEntry calls, default 64), `RSS_BENCH_BIN` (the binary
//! measured, default the one cargo built with the bench; e.g.
//! `target/release/s3-lifecycled` to measure a release build from a debug
//! driver), `RSS_BENCH_MALLOC_ARENA_MAX` (passed to the child as
//! `MALLOC_ARENA_MAX`; only a build on glibc's malloc, from before mimalloc,
//! reads it; unset: glibc's default), `RSS_BENCH_BASELINE_BIN` (a second binary, e.g. an
//! older build, measured over the same fixture in the same run with cursor
//! directories of its own; its rows are marked `baseline`),
//! `RSS_BENCH_REPEATS` (passes per variant and size, default 3: the peak of
//! one pass depends on how the reader and the shards race and varies by up to
//! half between runs, so each row is the median of its passes, with their
//! range; the passes of the variants alternate). A quick
//! debug-build smoke run:
//! `RSS_BENCH_SIZES=2000,8000 cargo test --bench rss`.
//!
//! How: the fixture is written through the filer's `CreateEntry`, each entry a
//! copy of a real PUT's entry (same attributes, chunks and Extended, fresh
//! name and mtime), so the meta-log holds the CREATE events a PUT of a new key
//! writes (docs/meta-log.md#per-operation) at thousands per second. A third
//! go to bucket `rss-one` (one `Days 30` rule), a third to 100 buckets
//! `rss-many-*` with ten `Days 30` prefix rules each, a third to
//! `RSS_BENCH_WIDE` (default 3,000) buckets `rss-wide-*` with one `Days 30`
//! rule each. Every pass reads the whole fixture:
//! before seeding, one pass per (variant, size) creates a cursor directory of
//! its own, and that directory's pass after seeding up to its size replays
//! everything written since (nothing is due). Peak RSS is the child's
//! `VmHWM` (/proc/<pid>/status), sampled every 10 ms until it exits (the
//! crate forbids the `unsafe` a `getrusage` call would need; `VmHWM` only
//! grows, so the last sample is the peak up to the last 10 ms).

#[path = "common/mod.rs"]
mod bench;
#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use common::{BIN, Cluster, cluster, days_rule, lifecycle};
use futures::{StreamExt, TryStreamExt};
use s3_lifecycled::pb::filer_pb::Entry;

/// Buckets of the many-rules variant, each with [`RULES_PER_BUCKET`] rules.
const MANY_BUCKETS: usize = 100;
const RULES_PER_BUCKET: usize = 10;
/// Subdirectories of `rss-one`, so no directory grows past ~100 k entries.
const ONE_DIRS: usize = 16;

struct Knobs {
    sizes: Vec<usize>,
    /// Buckets of the wide variant (`RSS_BENCH_WIDE`), one rule each.
    wide: usize,
    in_flight: usize,
    /// The binaries measured: (row label prefix, path).
    bins: Vec<(&'static str, String)>,
    /// Passes per variant and size (`RSS_BENCH_REPEATS`).
    repeats: usize,
}

fn knobs() -> anyhow::Result<Knobs> {
    let sizes = match std::env::var("RSS_BENCH_SIZES") {
        Ok(v) => v
            .split(',')
            .map(|s| {
                s.trim().parse::<usize>().with_context(|| {
                    format!("RSS_BENCH_SIZES={v:?}: {s:?} is not a whole number; give e.g. 100000,1000000")
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        Err(_) => vec![100_000, 1_000_000, 2_000_000],
    };
    if sizes.is_empty() || sizes.windows(2).any(|w| w[0] >= w[1]) {
        bail!("RSS_BENCH_SIZES must be increasing event counts, e.g. 100000,1000000,2000000");
    }
    let in_flight = match std::env::var("RSS_BENCH_SEED_IN_FLIGHT") {
        Ok(v) => v.trim().parse().with_context(|| {
            format!("RSS_BENCH_SEED_IN_FLIGHT={v:?} is not a whole number; give e.g. 64")
        })?,
        Err(_) => 64,
    };
    let mut bins = vec![(
        "",
        std::env::var("RSS_BENCH_BIN").unwrap_or_else(|_| BIN.to_string()),
    )];
    if let Ok(b) = std::env::var("RSS_BENCH_BASELINE_BIN") {
        bins.push(("baseline ", b));
    }
    let repeats = match std::env::var("RSS_BENCH_REPEATS") {
        Ok(v) => v.trim().parse().with_context(|| {
            format!("RSS_BENCH_REPEATS={v:?} is not a whole number; give e.g. 3")
        })?,
        Err(_) => 3,
    };
    let wide = match std::env::var("RSS_BENCH_WIDE") {
        Ok(v) => v.trim().parse().with_context(|| {
            format!("RSS_BENCH_WIDE={v:?} is not a whole number; give e.g. 3000")
        })?,
        Err(_) => 3_000,
    };
    Ok(Knobs {
        sizes,
        wide: std::cmp::max(wide, 1),
        in_flight: std::cmp::max(in_flight, 1),
        bins,
        repeats: std::cmp::max(repeats, 1),
    })
}

/// One variant at one size: the median of its passes.
struct Row {
    variant: String,
    size: usize,
    /// Median peak RSS of the passes.
    rss_kib: u64,
    /// Lowest and highest peak RSS of the passes.
    rss_range: (u64, u64),
    events_read: i64,
    /// Median pass duration.
    pass_ms: f64,
}

/// Runs `bin run-once` over `buckets` from `cursor_dir`, sampling its peak RSS.
fn pass(
    c: &Cluster,
    bin: &str,
    buckets: &str,
    cursor_dir: &str,
) -> anyhow::Result<(u64, serde_json::Value)> {
    let out_path = std::env::temp_dir().join(format!("rss-bench-{}.json", std::process::id()));
    let out = std::fs::File::create(&out_path).context("creating the pass output file")?;
    let mut cmd = bench::run_once_command(bin, c, buckets, cursor_dir);
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::inherit())
        // The fixture's concurrent writes are out of ts order by design; one
        // warning per event would cost more than the pass.
        .env("RUST_LOG", "error");
    if let Ok(v) = std::env::var("RSS_BENCH_MALLOC_ARENA_MAX") {
        cmd.env("MALLOC_ARENA_MAX", v);
    } else {
        cmd.env_remove("MALLOC_ARENA_MAX");
    }
    let mut child = cmd.spawn().with_context(|| format!("spawning {bin}"))?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file)
            && let Some(kib) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if let Some(st) = child.try_wait().context("waiting for run-once")? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    if status.code() != Some(0) {
        bail!("run-once exited {:?}: {stdout}", status.code());
    }
    let json = serde_json::from_str(stdout.trim())
        .with_context(|| format!("run-once printed no JSON: {stdout}"))?;
    Ok((peak, json))
}

/// Writes entries `from..to` of the fixture (see the module docs).
async fn seed(
    c: &Cluster,
    template: &Entry,
    (from, to): (usize, usize),
    k: &Knobs,
) -> anyhow::Result<()> {
    let root = c.buckets_root().to_string();
    let what = format!("seeded {} entries", to - from);
    bench::create_entries(c, to - from, k.in_flight, &what, |j| {
        let i = from + j;
        let mut e = template.clone();
        let (dir, name) = match i % 3 {
            0 => (
                format!("{root}/rss-one/d{:02}", (i / 3) % ONE_DIRS),
                format!("k{i:08}"),
            ),
            1 => {
                let b = (i / 3) % MANY_BUCKETS;
                let p = (i / 3 / MANY_BUCKETS) % RULES_PER_BUCKET;
                (format!("{root}/rss-many-{b:03}/p{p}"), format!("k{i:08}"))
            }
            _ => (
                format!("{root}/rss-wide-{:05}/logs", (i / 3) % k.wide),
                format!("k{i:08}"),
            ),
        };
        e.name = name;
        (dir, e)
    })
    .await
}

async fn run(k: &Knobs) -> anyhow::Result<Vec<Row>> {
    let c = cluster();
    let s3 = c.s3_client();
    // Fixed bucket names: the bench owns its cluster.
    s3.create_bucket()
        .bucket("rss-one")
        .send()
        .await
        .context("CreateBucket rss-one")?;
    c.put_lifecycle_xml("rss-one", &lifecycle(&days_rule("all", "", 30)))
        .await?;
    let many: Vec<String> = (0..MANY_BUCKETS)
        .map(|b| format!("rss-many-{b:03}"))
        .collect();
    let rules: String = (0..RULES_PER_BUCKET)
        .map(|p| days_rule(&format!("p{p}"), &format!("p{p}/"), 30))
        .collect();
    for b in &many {
        s3.create_bucket()
            .bucket(b)
            .send()
            .await
            .with_context(|| format!("CreateBucket {b}"))?;
        c.put_lifecycle_xml(b, &lifecycle(&rules)).await?;
    }
    let wide: Vec<String> = (0..k.wide).map(|b| format!("rss-wide-{b:05}")).collect();
    let one_rule = lifecycle(&days_rule("all", "", 30));
    futures::stream::iter(&wide)
        .map(|b| {
            let (s3, one_rule) = (&s3, &one_rule);
            async move {
                s3.create_bucket()
                    .bucket(b)
                    .send()
                    .await
                    .with_context(|| format!("CreateBucket {b}"))?;
                c.put_lifecycle_xml(b, one_rule).await
            }
        })
        .buffer_unordered(16)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    // The template: a real PUT's entry.
    common::put(&s3, "rss-one", "template", &[b'x'; 100], None).await;
    let template = c
        .lookup_entry(&format!("{}/rss-one", c.buckets_root()), "template")
        .await?
        .context("the template object's entry is missing")?;
    let many_arg = many.join(",");
    let wide_arg = wide.join(",");
    let wide_label = format!("{} buckets", k.wide);
    // (row label, buckets, binary): each binary over both bucket sets.
    let variants: Vec<(String, &str, &str)> = k
        .bins
        .iter()
        .flat_map(|(label, bin)| {
            [
                (format!("{label}1 rule"), "rss-one", bin.as_str()),
                (
                    format!("{label}1,000 rules"),
                    many_arg.as_str(),
                    bin.as_str(),
                ),
                (
                    format!("{label}{wide_label}"),
                    wide_arg.as_str(),
                    bin.as_str(),
                ),
            ]
        })
        .collect();
    // One cursor directory per (variant, size, repeat), created before the
    // fixture: each pass after seeding reads everything written since.
    let dir = |v: usize, size: usize, r: usize| format!("/etc/s3/rss-bench/v{v}-{size}-{r}");
    for &size in &k.sizes {
        for r in 0..k.repeats {
            for (v, (_, buckets, bin)) in variants.iter().enumerate() {
                pass(c, bin, buckets, &dir(v, size, r))?;
            }
        }
    }
    let mut rows = Vec::new();
    let mut seeded = 0;
    for &size in &k.sizes {
        seed(c, &template, (seeded, size), k).await?;
        seeded = size;
        // (peak KiB, pass ms) of each variant's passes; the variants
        // alternate, so a slow spell of the shared box hits them alike.
        let mut seen: Vec<Vec<(u64, f64)>> = vec![Vec::new(); variants.len()];
        let mut read = vec![-1; variants.len()];
        for r in 0..k.repeats {
            for (v, (name, buckets, bin)) in variants.iter().enumerate() {
                let (rss_kib, json) = pass(c, bin, buckets, &dir(v, size, r))?;
                let pass_ms = json["duration_ms"].as_f64().unwrap_or(f64::NAN);
                read[v] = json["replay"]["events_read"].as_i64().unwrap_or(-1);
                eprintln!(
                    "  {name} at {size}, pass {}: peak RSS {rss_kib} KiB, events_read {}, {pass_ms:.0} ms, matches {} pending {}",
                    r + 1,
                    read[v],
                    json["totals"]["matches"],
                    json["totals"]["pending"]
                );
                seen[v].push((rss_kib, pass_ms));
            }
        }
        for (v, (name, _, _)) in variants.iter().enumerate() {
            let rss: Vec<u64> = seen[v].iter().map(|p| p.0).collect();
            let ms: Vec<f64> = seen[v].iter().map(|p| p.1).collect();
            rows.push(Row {
                variant: name.clone(),
                size,
                rss_kib: bench::median(rss.iter().map(|&k| k as f64).collect()) as u64,
                rss_range: (
                    rss.iter().copied().min().unwrap_or(0),
                    rss.iter().copied().max().unwrap_or(0),
                ),
                events_read: read[v],
                pass_ms: bench::median(ms),
            });
        }
    }
    Ok(rows)
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing to parse.
    let k = knobs()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let rows = rt.block_on(run(&k))?;
    use bench::Align::{Left, Right};
    let ratio_to = format!("ratio to {}", k.sizes[0]);
    let mut t = bench::Table::new(&[
        ("variant", Left, 21),
        ("events", Right, 9),
        ("events_read", Right, 11),
        ("peak MiB", Right, 9),
        ("range MiB", Right, 12),
        ("pass ms", Right, 8),
        (&ratio_to, Left, 0),
    ]);
    for r in &rows {
        let base = rows
            .iter()
            .find(|b| b.variant == r.variant)
            .map_or(r.rss_kib, |b| b.rss_kib);
        t.row(vec![
            r.variant.clone(),
            r.size.to_string(),
            r.events_read.to_string(),
            format!("{:.1}", r.rss_kib as f64 / 1024.0),
            format!(
                "{:.1}-{:.1}",
                r.rss_range.0 as f64 / 1024.0,
                r.rss_range.1 as f64 / 1024.0
            ),
            format!("{:.0}", r.pass_ms),
            format!("{:.3}", r.rss_kib as f64 / base as f64),
        ]);
    }
    println!();
    println!(
        "rss bench: peak RSS of a run-once pass reading the fixture (nothing due); median of {} passes per row",
        k.repeats
    );
    for l in t.plain_lines() {
        println!("{l}");
    }
    Ok(())
}
