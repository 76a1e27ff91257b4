//! What the live benches (`live.rs`, `rss.rs`, `workers.rs`) share: seeding
//! a fixture through the filer's `CreateEntry`, starting one `run-once` pass
//! with the benches' settings, and printing result tables.
//!
//! Included with `#[path = "common/mod.rs"] mod bench;` next to
//! `tests/common` (as `mod common`), whose cluster it seeds. Not every
//! bench uses every helper.
#![allow(dead_code)]

use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail};
use futures::{StreamExt, TryStreamExt};
use s3_lifecycled::pb::filer_pb::{CreateEntryRequest, Entry};

use crate::common::{Cluster, now_ns};

/// Creates `n` entries through the filer's `CreateEntry`, `in_flight` at
/// once: entry `i` is `entry_at(i)` (its directory and entry), stamped with
/// the wall clock as mtime and crtime when it is sent, so each is one
/// meta-log create event of a fresh object (docs/meta-log.md#per-operation)
/// at many times the rate of S3 PUTs from a debug-built client. Logs
/// `  {what} in {s}s ({rate}/s)` to stderr when done.
pub async fn create_entries<F>(
    c: &Cluster,
    n: usize,
    in_flight: usize,
    what: &str,
    mut entry_at: F,
) -> anyhow::Result<()>
where
    F: FnMut(usize) -> (String, Entry),
{
    let client = c.filer_client().await?;
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let mut client = client.clone();
            let (dir, mut e) = entry_at(i);
            async move {
                let now_s = now_ns() / 1_000_000_000;
                if let Some(a) = e.attributes.as_mut() {
                    a.mtime = now_s;
                    a.crtime = now_s;
                }
                let name = e.name.clone();
                let r = client
                    .create_entry(CreateEntryRequest {
                        directory: dir.clone(),
                        entry: Some(e),
                        o_excl: false,
                        ..Default::default()
                    })
                    .await
                    .map_err(|s| anyhow!("CreateEntry {dir}/{name}: {s}"))?
                    .into_inner();
                if !r.error.is_empty() {
                    bail!("CreateEntry {dir}/{name}: {}", r.error);
                }
                Ok(())
            }
        })
        .buffer_unordered(in_flight.max(1))
        .try_for_each(|()| async { Ok(()) })
        .await?;
    let el = t.elapsed().as_secs_f64();
    eprintln!("  {what} in {el:.1}s ({:.0}/s)", n as f64 / el);
    Ok(())
}

/// The median of `v` (the mean of the middle two of an even count; NaN when
/// empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `bin run-once --json` over `buckets` of `c` from `cursor_dir`, with no
/// inherited `S3_LIFECYCLED__*` override (it would silently change what is
/// measured) and `pass.meta_log_retention` at ten years: the test cluster's
/// log is minutes old, and with the default probe a `Days` rule would count
/// as unreplayable and flip to the walker (docs/retention-probe.md), while Go
/// assumes an unbounded log. The caller adds `--now`, stdio and `RUST_LOG`.
pub fn run_once_command(bin: &str, c: &Cluster, buckets: &str, cursor_dir: &str) -> Command {
    let mut cmd = match std::env::var("BENCH_PERF") {
        // Profiling: each of our passes runs under `perf record` (call
        // graphs from DWARF unwinding, so a release build without frame
        // pointers still gives stacks), one numbered file per pass.
        Ok(prefix) if !prefix.is_empty() => {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let out = format!("{prefix}-{n}.data");
            eprintln!("  perf: pass {n} recorded to {out}");
            let mut perf = Command::new("perf");
            perf.args(["record", "-F", "999", "--call-graph", "dwarf,32768"])
                .args(["-o", &out, "--", bin]);
            perf
        }
        _ => Command::new(bin),
    };
    cmd.arg("run-once")
        .args(["--filer", &c.filer_grpc_addr().to_string()])
        .args(["--s3-grpc", &c.s3_grpc_addr().to_string()])
        .args(["--buckets", buckets, "--json"]);
    for (k, _) in std::env::vars() {
        if k.starts_with("S3_LIFECYCLED__") {
            cmd.env_remove(k);
        }
    }
    cmd.env("S3_LIFECYCLED__CURSOR__DIR", cursor_dir)
        .env("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "87600h");
    // `BENCH_DIRECT_LOG_READS=1` (or `0`): our passes read the persisted log
    // files from the volume servers, the default (or have the filer stream
    // them) (`pass.direct_log_reads`).
    match std::env::var("BENCH_DIRECT_LOG_READS").as_deref() {
        Ok("0") => {
            cmd.env("S3_LIFECYCLED__PASS__DIRECT_LOG_READS", "false");
        }
        Ok("1") => {
            cmd.env("S3_LIFECYCLED__PASS__DIRECT_LOG_READS", "true");
        }
        _ => {}
    }
    cmd
}

/// How a column's cells are padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A result table: a header and rows of cells, printed as plain text or as
/// Markdown.
pub struct Table {
    /// Per column: header, alignment, minimum width.
    cols: Vec<(String, Align, usize)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of these columns (header, alignment, minimum width).
    pub fn new(cols: &[(&str, Align, usize)]) -> Table {
        Table {
            cols: cols
                .iter()
                .map(|&(h, a, w)| (h.to_string(), a, w))
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The header and the rows as plain text: cells `" | "`-separated, each
    /// padded to its column's widest cell (at least its minimum width),
    /// except the last column's, which is never padded.
    pub fn plain_lines(&self) -> Vec<String> {
        let widths: Vec<usize> = (0..self.cols.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|s| s.chars().count())
                    .chain([self.cols[i].2])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            let last = cells.len().saturating_sub(1);
            cells
                .iter()
                .enumerate()
                .map(|(i, s)| match (i == last, self.cols[i].1) {
                    (true, _) => (*s).to_string(),
                    (false, Align::Left) => format!("{s:<w$}", w = widths[i]),
                    (false, Align::Right) => format!("{s:>w$}", w = widths[i]),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let mut out = vec![line(self.cols.iter().map(|c| c.0.as_str()).collect())];
        out.extend(
            self.rows
                .iter()
                .map(|r| line(r.iter().map(String::as_str).collect())),
        );
        out
    }

    /// The header, the `|---|` line and the rows as a Markdown table.
    pub fn markdown_lines(&self) -> Vec<String> {
        let line = |cells: Vec<&str>| format!("| {} |", cells.join(" | "));
        let mut out = vec![
            line(self.cols.iter().map(|c| c.0.as_str()).collect()),
            format!("|{}", "---|".repeat(self.cols.len())),
        ];
        out.extend(
            self.rows
                .iter()
                .map(|r| line(r.iter().map(String::as_str).collect())),
        );
        out
    }
}
