//! `s3-lifecycled rules preview`: what a lifecycle document that is not
//! installed would delete in a bucket, now (or `--at`) and on each following
//! day. One listing of the bucket through the filer, evaluated by the
//! walker's own code (`engine::walk::evaluate` over the document's recovery
//! view). Read-only: it writes nothing anywhere.

use std::path::PathBuf;

use clap::Args;
use futures::StreamExt as _;

use super::{EXIT_OK, Fail, failed, parse_time, rule_label, usage};
use crate::config::Settings;
use crate::engine::preview::{Preview, Tally};
use crate::engine::{Snapshot, walk};
use crate::lifecycle::{self, Severity};
use crate::status::format_time;

#[derive(Debug, Clone, Args)]
#[command(mut_arg("config", |a| a.help("Configuration file (`cluster.*`, `time.*`)")))]
pub struct PreviewArgs {
    /// The lifecycle document (XML); `-` reads standard input.
    pub file: PathBuf,
    /// The bucket to evaluate it against.
    #[arg(long)]
    pub bucket: String,
    /// Evaluate as of this RFC 3339 time (default: now).
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// Following days to show.
    #[arg(long, default_value_t = 30)]
    pub days: usize,
    /// One JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub source: crate::cli::FilerSource,
}

pub fn run(args: &PreviewArgs) -> Result<i32, Fail> {
    let (rules, at) = prepare(args).map_err(usage)?;
    let p = args
        .source
        .block_on(async |s| preview(s, args, rules, at).await)?;
    print_preview(args, at, &p);
    Ok(EXIT_OK)
}

/// The document's rules and the time to evaluate them at.
fn prepare(args: &PreviewArgs) -> Result<(Vec<lifecycle::FlatRule>, i64), String> {
    crate::engine::safety::check_bucket_name(&args.bucket).map_err(|e| format!("--bucket: {e}"))?;
    let at = match &args.at {
        None => crate::clock::wall_ns(),
        Some(t) => parse_time("--at", t).map_err(|(_, e)| e)?,
    };
    let bytes = if args.file.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
            .map_err(|e| format!("reading standard input: {e}"))?;
        b
    } else {
        std::fs::read(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?
    };
    let config = lifecycle::parse(&bytes).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let errors: Vec<String> = lifecycle::validate(&config)
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "{} is not a valid lifecycle document (see `rules check`):\n{}",
            args.file.display(),
            errors.join("\n")
        ));
    }
    Ok((config.flatten(), at))
}

async fn preview(
    s: &Settings,
    args: &PreviewArgs,
    rules: Vec<lifecycle::FlatRule>,
    at: i64,
) -> Result<Preview, Fail> {
    let client = crate::cli::first_filer(s).await?;
    let bucket = &args.bucket;
    let (root, mut info) = crate::cli::bucket_info(s, &client, bucket).await?;
    // The document under preview replaces the installed one (not written).
    info.rules = rules;
    let time = s.time.time_config();
    let view = Snapshot::compile(vec![info.to_config()], time).recovery_view();
    let labels: std::collections::BTreeMap<_, String> = view
        .buckets()
        .iter()
        .flat_map(|b| b.actions().iter())
        .map(|a| {
            (
                (a.rule_hash(), a.kind()),
                rule_label(&a.rule().id, a.rule().position),
            )
        })
        .collect();
    let day_ns = i64::try_from(time.day.as_nanos()).unwrap_or(i64::MAX);
    let days = i64::try_from(args.days).unwrap_or(i64::MAX);
    let horizon = at.saturating_add(day_ns.saturating_mul(days));
    let mut p = Preview::new(args.days);
    let mut items = crate::seaweed::lister::list_bucket(&client, &root, bucket);
    while let Some(item) = items.next().await {
        let item = item.map_err(|e| failed(format!("listing bucket {bucket}: {e}")))?;
        let matches = walk::evaluate(&view, bucket, &item, horizon);
        // An upload's bytes are its parts, files inside its directory: one
        // more listing, only for uploads the document would abort.
        let upload_bytes = match &item {
            walk::WalkItem::Upload { upload_id, .. } if !matches.is_empty() => {
                let dir = format!(
                    "{root}/{bucket}/{}/{upload_id}",
                    crate::engine::keys::UPLOADS_DIR
                );
                Some(parts_bytes(&client, &dir).await?)
            }
            _ => None,
        };
        for m in matches {
            let rule = labels
                .get(&(m.rule_hash, m.kind))
                .cloned()
                .unwrap_or_default();
            let bytes = upload_bytes.unwrap_or_else(|| crate::engine::preview::size_of(&item, &m));
            p.add_sized(&m, bytes, &rule, at, day_ns);
        }
    }
    Ok(p)
}

/// Bytes of the part files in an upload's directory
/// (docs/filer-layout.md#multipart-uploads).
async fn parts_bytes(client: &crate::seaweed::filer::FilerClient, dir: &str) -> Result<u64, Fail> {
    let mut total = 0u64;
    let mut parts = std::pin::pin!(client.list_all(dir, crate::seaweed::filer::DEFAULT_PAGE));
    while let Some(e) = parts.next().await {
        let e = e.map_err(|e| failed(format!("listing upload {dir}: {e}")))?;
        if !e.is_directory {
            total = total.saturating_add(e.attributes.as_ref().map_or(0, |a| a.file_size));
        }
    }
    Ok(total)
}

fn tally_text(t: &Tally) -> String {
    format!(
        "objects={} versions={} delete_markers={} uploads={} bytes={}",
        t.objects, t.versions, t.delete_markers, t.uploads, t.bytes
    )
}

fn print_preview(args: &PreviewArgs, at: i64, p: &Preview) {
    if args.json {
        let doc = serde_json::json!({
            "bucket": args.bucket,
            "at_ns": at,
            "at": p.at,
            "per_rule": p.per_rule,
            "per_day": p.per_day,
            "sample": p.sample,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    println!(
        "bucket {} at {}: would delete {}",
        args.bucket,
        format_time(at),
        tally_text(&p.at)
    );
    for (rule, t) in &p.per_rule {
        println!("  rule {rule}: {}", tally_text(t));
    }
    for k in &p.sample {
        println!("  e.g. {k}");
    }
    for (i, t) in p.per_day.iter().enumerate() {
        if *t != Tally::default() {
            println!("  day +{}: {}", i + 1, tally_text(t));
        }
    }
    println!("(preview only: nothing was written)");
}
