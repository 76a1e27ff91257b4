//! `s3-lifecycled journal`: what the service deleted, when and under which
//! rule, read straight from the deletion journal in the filer
//! (docs/filer-layout.md#journal); no running service needed.

use std::path::PathBuf;

use clap::Args;

use super::{EXIT_ERROR, EXIT_OK, EXIT_USAGE};
use crate::config::Settings;
use crate::engine::journal::{JournalEntry, JournalFilter, decode_lines};
use crate::seaweed::controls::ControlStore;
use crate::seaweed::filer::FilerClient;
use crate::status::format_time;

/// `s3-lifecycled journal`.
#[derive(Debug, Clone, Args)]
pub struct JournalArgs {
    /// Configuration file (`cluster.filer`, `cursor.dir`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Filer gRPC address (overrides `cluster.filer`).
    #[arg(long, value_name = "HOST:PORT")]
    pub filer: Option<String>,
    /// Only this bucket.
    #[arg(long)]
    pub bucket: Option<String>,
    /// Only keys starting with this.
    #[arg(long, value_name = "P")]
    pub key_prefix: Option<String>,
    /// Only deletes at or after this RFC 3339 time.
    #[arg(long, value_name = "RFC3339")]
    pub since: Option<String>,
    /// One JSON array on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `journal`; returns the exit code.
pub fn run(args: &JournalArgs) -> i32 {
    let since_ns = match args.since.as_deref().map(crate::admin::parse_rfc3339_ns) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            eprintln!(
                "error: --since: `{}` is not an RFC 3339 time such as 2026-01-02T03:04:05Z ({e})",
                args.since.as_deref().unwrap_or_default()
            );
            return EXIT_USAGE;
        }
    };
    let mut s = match Settings::load(args.config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(f) = &args.filer {
        s.cluster.filer = f.clone();
    }
    let filter = JournalFilter {
        bucket: args.bucket.clone(),
        key_prefix: args.key_prefix.clone(),
        since_ns,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_ERROR;
        }
    };
    match rt.block_on(read(&s, &filter)) {
        Ok(entries) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&entries).unwrap_or_default()
                );
            } else {
                for e in &entries {
                    println!("{}", line(e));
                }
            }
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_ERROR
        }
    }
}

async fn read(s: &Settings, filter: &JournalFilter) -> Result<Vec<JournalEntry>, String> {
    let client = FilerClient::connect(&s.cluster.filer)
        .await
        .map_err(|e| format!("filer {}: {e}", s.cluster.filer))?;
    let store = ControlStore::new(client, &s.cursor.dir);
    let mut out = Vec::new();
    for day in store.journal_days().await? {
        if !filter.day_may_match(&day) {
            continue;
        }
        for (path, content) in store.journal_batches(&day).await? {
            let entries = decode_lines(&content).map_err(|e| format!("{path}: {e}"))?;
            out.extend(entries.into_iter().filter(|e| filter.matches(e)));
        }
    }
    out.sort_by(|a, b| (a.ts_ns, &a.bucket, &a.key).cmp(&(b.ts_ns, &b.bucket, &b.key)));
    Ok(out)
}

/// `<time> <OUTCOME> <bucket>/<key> [version] rule=<id> (<kind>) run=<id>`.
fn line(e: &JournalEntry) -> String {
    let version = if e.version_id.is_empty() {
        String::new()
    } else {
        format!(" version={}", e.version_id)
    };
    let rule = if e.rule_id.is_empty() {
        format!("rule_hash={}", e.rule_hash)
    } else {
        format!("rule={}", e.rule_id)
    };
    format!(
        "{} {} {}/{}{version} {rule} ({}) run={}",
        format_time(e.ts_ns),
        e.outcome,
        e.bucket,
        e.key,
        e.kind,
        e.run_id
    )
}
