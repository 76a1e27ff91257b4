//! `s3-lifecycled journal`: what the service deleted, when and under which
//! rule, read straight from the deletion journal in the filer
//! (docs/filer-layout.md#journal); no running service needed.

use clap::Args;

use super::{EXIT_OK, Fail, failed, parse_time, print_json_or, rule_kv, usage};
use crate::config::Settings;
use crate::engine::journal::{JournalEntry, JournalFilter, decode_lines};
use crate::seaweed::controls::ControlStore;
use crate::status::format_time;

#[derive(Debug, Clone, Args)]
#[command(mut_arg("config", |a| a.help("Configuration file (`cluster.filer`, `cursor.dir`)")))]
pub struct JournalArgs {
    #[command(flatten)]
    pub source: crate::cli::FilerSource,
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

pub fn run(args: &JournalArgs) -> Result<i32, Fail> {
    let since_ns = args
        .since
        .as_deref()
        .map(|t| parse_time("--since", t))
        .transpose()?;
    if let Some(b) = &args.bucket {
        crate::engine::safety::check_bucket_name(b).map_err(usage)?;
    }
    let filter = JournalFilter {
        bucket: args.bucket.clone(),
        key_prefix: args.key_prefix.clone(),
        since_ns,
    };
    let (entries, days, dir) = args.source.block_on(async |s| {
        let (entries, days) = read(s, &filter).await?;
        Ok((entries, days, s.cursor.dir.clone()))
    })?;
    print_json_or(args.json, &entries, |es| {
        es.iter().map(|e| line(e) + "\n").collect()
    });
    if entries.is_empty() {
        // Runbook (o) reads "not in the journal" as "s3-lifecycled did not
        // delete it": an empty answer says where it looked, on stderr (stdout
        // stays the empty list), so a wrong `cursor.dir` is not taken for that.
        eprintln!("{}", nothing_found(&dir, &days));
    }
    Ok(EXIT_OK)
}

/// The note for an empty answer: the journal read, and the days it holds.
pub(super) fn nothing_found(cursor_dir: &str, days: &[String]) -> String {
    let journal =
        crate::seaweed::filer::join_path(cursor_dir, crate::seaweed::controls::JOURNAL_SUBDIR);
    match (days.iter().min(), days.iter().max()) {
        (Some(first), Some(last)) => format!(
            "no journaled delete matches in {journal} (it holds the days {first} to {last}; \
             journal.retention)"
        ),
        _ => format!(
            "no deletion journal in {journal}: nothing was deleted under this cursor.dir; \
             if the service uses another, pass its --config"
        ),
    }
}

/// The matching entries, oldest first, and the journal's day directories.
pub(super) async fn read(
    s: &Settings,
    filter: &JournalFilter,
) -> Result<(Vec<JournalEntry>, Vec<String>), Fail> {
    let client = crate::cli::first_filer(s).await?;
    let store = ControlStore::new(client, &s.cursor.dir);
    let mut out = Vec::new();
    let days = store.journal_days().await.map_err(failed)?;
    for day in &days {
        if !filter.day_may_match(day) {
            continue;
        }
        for (path, content) in store.journal_batches(day).await.map_err(failed)? {
            let entries = decode_lines(&content).map_err(|e| failed(format!("{path}: {e}")))?;
            out.extend(entries.into_iter().filter(|e| filter.matches(e)));
        }
    }
    out.sort_by(|a, b| (a.ts_ns, &a.bucket, &a.key).cmp(&(b.ts_ns, &b.bucket, &b.key)));
    Ok((out, days))
}

/// `<time> <OUTCOME> <bucket>/<key> [version] rule=<id> (<kind>) run=<id>`.
pub(super) fn line(e: &JournalEntry) -> String {
    let version = if e.version_id.is_empty() {
        String::new()
    } else {
        format!(" version={}", e.version_id)
    };
    format!(
        "{} {} {}/{}{version} {} ({}) run={}",
        format_time(e.ts_ns),
        e.outcome,
        e.bucket,
        e.key,
        rule_kv(&e.rule_id, &e.rule_hash),
        e.kind,
        e.run_id
    )
}
