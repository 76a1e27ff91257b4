//! `s3-lifecycled journal`: what the service deleted, when and under which
//! rule, read straight from the deletion journal in the filer
//! (docs/filer-layout.md#journal); no running service needed.

use std::fmt::Write as _;

use clap::Args;

use super::{EXIT_OK, Fail, failed, parse_time, print_json_or, rule_kv, rule_label, usage};
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
fn nothing_found(cursor_dir: &str, days: &[String]) -> String {
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
async fn read(
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
fn line(e: &JournalEntry) -> String {
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

#[derive(Debug, Clone, Args)]
#[command(mut_arg("config", |a| a.help("Configuration file (`cluster.filer`, `cursor.dir`, `time.*`)")))]
pub struct ExplainArgs {
    #[command(flatten)]
    pub source: crate::cli::FilerSource,
    /// The bucket.
    pub bucket: String,
    /// The object key.
    pub key: String,
    /// Explain this version of a versioned key (`null` for the null
    /// version) instead of its current version.
    #[arg(long, value_name = "V")]
    pub version_id: Option<String>,
}

pub fn run_explain(args: &ExplainArgs) -> Result<i32, Fail> {
    crate::engine::safety::check_bucket_name(&args.bucket).map_err(usage)?;
    let text = args.source.block_on(async |s| explain(s, args).await)?;
    print!("{text}");
    Ok(EXIT_OK)
}

async fn explain(s: &Settings, args: &ExplainArgs) -> Result<String, Fail> {
    use crate::engine::explain::explain_version;
    use crate::engine::versions::{expand_versions, is_null_version, version_id_of};
    use crate::engine::walk::WalkItem;
    use crate::seaweed::filer::{DEFAULT_PAGE, join_path, split_path};
    use futures::StreamExt as _;
    let (bucket, key) = (args.bucket.as_str(), args.key.as_str());
    let version_id = args.version_id.as_deref();
    let client = crate::cli::first_filer(s).await?;
    let (root, info) = crate::cli::bucket_info(s, &client, bucket).await?;
    // The key as the walker lists it: the bare entry, and the versions in
    // its `.versions` folder when it has any (docs/filer-layout.md#versioned-objects).
    let (dir, name) = split_path(&join_path(&join_path(&root, bucket), key));
    let bare = client.lookup(&dir, &name).await.map_err(failed)?;
    let folder_name = format!("{name}{}", crate::engine::keys::VERSIONS_SUFFIX);
    let folder = client.lookup(&dir, &folder_name).await.map_err(failed)?;
    let folder = folder.filter(|f| f.is_directory);
    let mut versions = Vec::new();
    if folder.is_some() {
        let folder_path = join_path(&dir, &folder_name);
        let mut listing = std::pin::pin!(client.list_all(&folder_path, DEFAULT_PAGE));
        while let Some(e) = listing.next().await {
            let e = e.map_err(failed)?;
            if !e.is_directory && !version_id_of(&e).is_empty() {
                versions.push(e);
            }
        }
    }
    let item = match (folder, bare) {
        (Some(folder), bare) if !versions.is_empty() => WalkItem::Versions {
            logical_key: key.to_string(),
            folder,
            versions,
            null_version: bare.filter(is_null_version),
        },
        (_, Some(b)) if !b.is_directory => WalkItem::Object {
            key: key.to_string(),
            entry: b,
        },
        // `PUT dir/` stores a directory carrying an ETag: S3 lists it as the
        // object `dir/`, but lifecycle never expires directories
        // (docs/filer-layout.md#objects-and-directories), so "not found" would be
        // wrong and say nothing of why it stays.
        (_, Some(b)) if b.extended.contains_key(crate::engine::keys::ETAG) => {
            let mtime = b.attributes.as_ref().map_or(0, |a| a.mtime) * 1_000_000_000;
            return Ok(format!(
                "object {bucket}/{key}: a folder marker (the directory {dir}/{name}), mtime {}\n\
                 no rule applies: lifecycle never expires directories, folder markers \
                 included (docs/filer-layout.md#objects-and-directories); delete it through S3 if it must go\n",
                format_time(mtime)
            ));
        }
        _ => {
            // "Why is my object gone?": if we deleted it, the journal says
            // by which rule, in which pass and when.
            return match last_journal_entry(s, args).await {
                Ok((Some(e), _)) => Ok(format!(
                    "object {bucket}/{key} does not exist: s3-lifecycled deleted it\n  {}\n  \
                     rule {} ({}), pass {}, at {}\n",
                    line(&e),
                    if e.rule_id.is_empty() {
                        &e.rule_hash
                    } else {
                        &e.rule_id
                    },
                    e.kind,
                    e.run_id,
                    format_time(e.ts_ns)
                )),
                Ok((None, days)) if days.is_empty() => Err(failed(format!(
                    "object {bucket}/{key} not found (looked up {dir}/{name} and {dir}/{folder_name}); {}",
                    nothing_found(&s.cursor.dir, &days)
                ))),
                Ok((None, _)) => Err(failed(format!(
                    "object {bucket}/{key} not found (looked up {dir}/{name} and {dir}/{folder_name}), \
                     and the deletion journal holds no delete of it by s3-lifecycled"
                ))),
                Err((_, j)) => Err(failed(format!(
                    "object {bucket}/{key} not found (looked up {dir}/{name} and {dir}/{folder_name}); \
                     the deletion journal cannot be read ({j})"
                ))),
            };
        }
    };
    // The version explained: the one asked for, else the current one.
    let listed = match &item {
        WalkItem::Versions {
            logical_key,
            folder,
            versions,
            null_version,
        } => expand_versions(logical_key, folder, versions, null_version.as_ref()),
        _ => Vec::new(),
    };
    let target = match version_id {
        Some(v) => Some(v.to_string()),
        None => listed
            .iter()
            .find(|v| v.info.is_latest)
            .map(|v| v.version_id.clone()),
    };
    let time = s.time.time_config();
    let (size, tags, mtime) = match (&item, &target) {
        (WalkItem::Object { entry, .. }, _) => {
            let attrs = entry.attributes.clone().unwrap_or_default();
            (
                i64::try_from(attrs.file_size).unwrap_or(i64::MAX),
                crate::engine::filter::tags_of(entry),
                attrs.mtime * 1_000_000_000 + i64::from(attrs.mtime_ns),
            )
        }
        (_, Some(v)) => {
            let Some(found) = listed.iter().find(|x| &x.version_id == v) else {
                let ids: Vec<&str> = listed.iter().map(|x| x.version_id.as_str()).collect();
                return Err(failed(format!(
                    "version {v} of {bucket}/{key} not found; its versions are: {}",
                    ids.join(", ")
                )));
            };
            let i = &found.info;
            (i.size, i.tags.clone(), i.mod_time)
        }
        (_, None) => return Err(failed(format!("{bucket}/{key} has no versions listed"))),
    };
    let verdicts = crate::engine::explain::explain(&info.rules, key, size, &tags, mtime, &time);
    let versioned = target.is_some() || version_id.is_some();
    let mut out = format!(
        "object {bucket}/{key}: {size} bytes, mtime {}, tags {tags:?}\n",
        format_time(mtime)
    );
    if info.rules.is_empty() {
        out.push_str("the bucket has no lifecycle rules\n");
    }
    for v in &verdicts {
        let id = rule_label(&v.rule_id, v.position);
        if v.matches && versioned {
            // Which actions apply depends on the version: listed below.
            out.push_str(&format!("rule {id}: filter matches\n"));
        } else if v.matches {
            out.push_str(&format!("rule {id}: matches\n"));
            for a in &v.actions {
                let _ = match a.due_ns {
                    Some(t) => writeln!(out, "  {}: due {} ({})", a.kind, format_time(t), a.note),
                    None => writeln!(out, "  {}: {}", a.kind, a.note),
                };
            }
        } else {
            let _ = writeln!(out, "rule {id}: does not match: {}", v.reasons.join("; "));
        }
    }
    // For a versioned key (or an explicit version), what the walker would
    // do to that version: noncurrent and delete-marker actions depend on
    // the key's other versions, which the rule-level lines above cannot show.
    if let Some(v) = target.as_deref().or(version_id) {
        let view = crate::engine::Snapshot::compile(vec![info.to_config()], time).recovery_view();
        // Far enough ahead that every action that will ever fire has.
        let horizon = crate::engine::Nanos::MAX / 4;
        let Some(vv) = explain_version(&view, bucket, &item, v, horizon) else {
            return Err(failed(format!(
                "version {v} of {bucket}/{key} not found: the key is not versioned (its only version is null)"
            )));
        };
        let state = match (vv.is_delete_marker, vv.is_latest, vv.noncurrent_since) {
            (true, ..) => "delete marker".to_string(),
            (_, true, _) => "current version".to_string(),
            (_, _, Some(t)) => format!("noncurrent since {}", format_time(t)),
            (_, _, None) => "noncurrent".to_string(),
        };
        out.push_str(&format!(
            "version {}: {state}, {} bytes, mtime {}, {} version(s) of the key\n",
            vv.version_id,
            vv.size,
            format_time(vv.mod_time),
            vv.num_versions
        ));
        if vv.actions.is_empty() {
            out.push_str("  no rule action applies to this version\n");
        }
        for a in &vv.actions {
            out.push_str(&format!(
                "  rule {}: {}: due {}\n",
                a.rule,
                a.kind,
                format_time(a.due_ns)
            ));
        }
    }
    match last_journal_entry(s, args).await {
        Ok((Some(e), _)) => out.push_str(&format!("last decision: {}\n", line(&e))),
        Ok((None, days)) if days.is_empty() => out.push_str(&format!(
            "last decision: {}\n",
            nothing_found(&s.cursor.dir, &days)
        )),
        Ok((None, _)) => out.push_str("last decision: no delete of it in the journal\n"),
        Err((_, e)) => out.push_str(&format!("last decision: journal unreadable ({e})\n")),
    }
    Ok(out)
}

/// The journal's last record of `bucket/key` (of `version_id` when given),
/// and the journal's days.
async fn last_journal_entry(
    s: &Settings,
    a: &ExplainArgs,
) -> Result<(Option<JournalEntry>, Vec<String>), Fail> {
    let filter = JournalFilter {
        bucket: Some(a.bucket.clone()),
        key_prefix: Some(a.key.clone()),
        since_ns: None,
    };
    let version = a.version_id.as_deref();
    read(s, &filter).await.map(|(es, days)| {
        let last = es
            .into_iter()
            .rfind(|e| e.key == a.key && version.is_none_or(|v| e.version_id == v));
        (last, days)
    })
}
