//! `s3-lifecycled forecast`: per bucket and rule, what becomes due on each of
//! the next days and what is overdue now, read from the pending tallies the
//! passes keep in the cursors (docs/forecast.md); it never lists a bucket.

use std::path::PathBuf;

use clap::Args;

use super::{EXIT_OK, Fail, failed, print_json_or, rule_kv, usage};
use crate::cli::admin_client::{AdminAddress, fetch_forecast};
use crate::engine::SHARD_COUNT;
use crate::engine::cursor::ShardCursor;
use crate::engine::forecast::{Forecast, check_days};
use crate::seaweed::buckets::list_bucket_configs;
use crate::seaweed::cursor::CursorStore;
use crate::status::format_time;

#[derive(Debug, Clone, Args)]
#[command(mut_arg("config", |a| a.help("Configuration file (`cluster.filer`, `cursor.dir`, `time.*`)")))]
pub struct ForecastArgs {
    #[command(flatten)]
    pub source: crate::cli::FilerSource,
    /// Only this bucket.
    #[arg(long)]
    pub bucket: Option<String>,
    /// Days to show after `--now`.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    /// Forecast as of this RFC 3339 time (default: now).
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// One JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Ask a running service's admin API (HOST:PORT) instead of reading the
    /// filer.
    #[arg(long, value_name = "HOST:PORT")]
    pub admin: Option<String>,
    /// With `--admin`: the file holding the service's bearer token (default:
    /// `service.admin_token_file` of the configuration).
    #[arg(long = "admin-token-file", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
}

pub fn run(args: &ForecastArgs) -> Result<i32, Fail> {
    let days = check_days(args.days).map_err(|e| usage(format!("flag --days: {e}")))?;
    let now = match args.now.as_deref() {
        None => crate::clock::wall_ns(),
        Some(t) => crate::cli::run_once::parse_now(t)?,
    };
    let bucket = args.bucket.as_deref();
    let r = if args.admin.is_some() {
        let address = AdminAddress {
            admin: args.admin.clone(),
            config: args.source.config.clone(),
            admin_token_file: args.admin_token_file.clone(),
        };
        fetch_forecast(&address, bucket, days, args.now.as_ref().map(|_| now))?
    } else {
        args.source.block_on(async |s| {
            let client = crate::cli::first_filer(s).await?;
            if let Some(b) = bucket {
                // A typo must not read as "nothing pending".
                let root = client.buckets_root().await.map_err(failed)?;
                // One lookup for a bucket that exists; the scan only to word a refusal.
                let found = client.lookup(&root, b).await.map_err(failed)?;
                if !found.is_some_and(|e| e.is_directory) {
                    let scan = list_bucket_configs(&client, &root).await.map_err(failed)?;
                    crate::engine::names::check_exists(b, scan.names())
                        .map_err(|e| usage(format!("flag --bucket: {e}")))?;
                }
            }
            let cursors = load_cursors(&CursorStore::new(client, &s.cursor.dir)).await?;
            Ok(Forecast::of(
                &cursors,
                &s.time.time_config(),
                now,
                days,
                bucket,
            ))
        })?
    };
    print_json_or(args.json, &r, text);
    Ok(EXIT_OK)
}

/// Every shard's cursor (`None`: the shard has none yet).
pub async fn load_cursors(store: &CursorStore) -> Result<Vec<Option<ShardCursor>>, Fail> {
    let mut cursors = Vec::new();
    for shard in 0..SHARD_COUNT as u8 {
        let c = store.load(shard).await;
        cursors.push(c.map_err(|e| failed(format!("reading {}: {e}", store.path(shard))))?);
    }
    Ok(cursors)
}

/// The text form: one block per bucket rule, one line per non-empty day.
pub fn text(r: &Forecast) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "forecast now={} days={} day={}s\n",
        format_time(r.now_ns),
        r.days,
        r.day_seconds
    );
    if !r.cold_shards.is_empty() {
        let _ = writeln!(
            out,
            "note: {} shard(s) have no cursor yet (no pass ran): their buckets are missing",
            r.cold_shards.len()
        );
    }
    if r.rules.is_empty() {
        out.push_str("nothing pending\n");
    }
    for f in &r.rules {
        let rule = rule_kv(&f.rule_id, &f.rule_hash);
        let known = if f.known {
            ""
        } else {
            " (unknown: counts are a lower bound until the next passes re-read the window)"
        };
        let _ = writeln!(
            out,
            "bucket={} {rule} kind={} pending={} overdue={} overdue_bytes={}{known}",
            f.bucket,
            f.kind,
            f.pending(),
            f.overdue.objects,
            f.overdue.bytes
        );
        if let Some(t) = f.oldest_overdue_ns {
            let _ = writeln!(out, "  overdue since {}", format_time(t));
        }
        for d in f.days.iter().filter(|d| d.count.objects > 0) {
            let _ = writeln!(
                out,
                "  day {:>3} by {}  objects={} bytes={}",
                d.day,
                format_time(d.due_by_ns),
                d.count.objects,
                d.count.bytes
            );
        }
        if f.later.objects > 0 {
            let _ = writeln!(
                out,
                "  later            objects={} bytes={}",
                f.later.objects, f.later.bytes
            );
        }
    }
    let _ = writeln!(out, "note: {}", r.caveat);
    out
}
