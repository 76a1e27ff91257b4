//! `s3-lifecycled explain`: which rules match one object and why the others
//! do not, its due time per action, what the walker would do to one of its
//! versions, and the journal's last delete of it. Reads the filer only.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::Args;

use super::journal_cmd::{line, nothing_found, read};
use super::{EXIT_OK, Fail, failed, rule_label, usage};
use crate::config::Settings;
use crate::engine::explain::{RuleVerdict, VersionVerdict, explain_version};
use crate::engine::journal::{JournalEntry, JournalFilter};
use crate::engine::versions::{VersionedObject, expand_versions, is_null_version, version_id_of};
use crate::engine::walk::WalkItem;
use crate::engine::{Nanos, keys};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{DEFAULT_PAGE, FilerClient, join_path, split_path};
use crate::status::format_time;

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

pub fn run(args: &ExplainArgs) -> Result<i32, Fail> {
    crate::engine::safety::check_bucket_name(&args.bucket).map_err(usage)?;
    let text = args.source.block_on(async |s| explain(s, args).await)?;
    print!("{text}");
    Ok(EXIT_OK)
}

async fn explain(s: &Settings, args: &ExplainArgs) -> Result<String, Fail> {
    let (bucket, key) = (args.bucket.as_str(), args.key.as_str());
    let client = crate::cli::first_filer(s).await?;
    let (root, info) = crate::cli::bucket_info(s, &client, bucket).await?;
    let item = match look_up(&client, &root, bucket, key).await? {
        Found::Item(item) => *item,
        Found::FolderMarker(text) => return Ok(text),
        Found::Nothing(looked) => return gone(s, args, &looked).await,
    };
    let listed = match &item {
        WalkItem::Versions {
            logical_key,
            folder,
            versions,
            null_version,
        } => expand_versions(logical_key, folder, versions, null_version.as_ref()),
        _ => Vec::new(),
    };
    // The version explained: the one asked for, else the current one.
    let target = args.version_id.clone().or_else(|| {
        listed
            .iter()
            .find(|v| v.info.is_latest)
            .map(|v| v.version_id.clone())
    });
    let (size, tags, mtime) = attributes(&item, &listed, target.as_deref(), bucket, key)?;
    let time = s.time.time_config();
    let verdicts = crate::engine::explain::explain(&info.rules, key, size, &tags, mtime, &time);
    let mut out = format!(
        "object {bucket}/{key}: {size} bytes, mtime {}, tags {tags:?}\n",
        format_time(mtime)
    );
    if info.rules.is_empty() {
        out.push_str("the bucket has no lifecycle rules\n");
    }
    rule_lines(&mut out, &verdicts, target.is_some());
    // For a versioned key (or an explicit version), what the walker would
    // do to that version: noncurrent and delete-marker actions depend on
    // the key's other versions, which the rule-level lines above cannot show.
    if let Some(v) = target.as_deref() {
        let view = crate::engine::Snapshot::compile(vec![info.to_config()], time).recovery_view();
        // Far enough ahead that every action that will ever fire has.
        let horizon = Nanos::MAX / 4;
        let Some(vv) = explain_version(&view, bucket, &item, v, horizon) else {
            return Err(failed(format!(
                "version {v} of {bucket}/{key} not found: the key is not versioned (its only version is null)"
            )));
        };
        version_lines(&mut out, &vv);
    }
    let _ = match last_journal_entry(s, args).await {
        Ok((Some(e), _)) => writeln!(out, "last decision: {}", line(&e)),
        Ok((None, days)) if days.is_empty() => writeln!(
            out,
            "last decision: {}",
            nothing_found(&s.cursor.dir, &days)
        ),
        Ok((None, _)) => writeln!(out, "last decision: no delete of it in the journal"),
        Err((_, e)) => writeln!(out, "last decision: journal unreadable ({e})"),
    };
    Ok(out)
}

/// What the filer holds under a key.
enum Found {
    /// An object, or a versioned key with its versions.
    Item(Box<WalkItem>),
    /// The whole answer for a folder marker.
    FolderMarker(String),
    /// Nothing: the paths looked up, for the message.
    Nothing(String),
}

/// The key as the walker lists it: the bare entry, and the versions in its
/// `.versions` folder when it has any (docs/filer-layout.md#versioned-objects).
async fn look_up(client: &FilerClient, root: &str, bucket: &str, key: &str) -> Result<Found, Fail> {
    let (dir, name) = split_path(&join_path(&join_path(root, bucket), key));
    let bare = client.lookup(&dir, &name).await.map_err(failed)?;
    let folder_name = format!("{name}{}", keys::VERSIONS_SUFFIX);
    let folder = client.lookup(&dir, &folder_name).await.map_err(failed)?;
    let folder = folder.filter(|f| f.is_directory);
    let mut versions = Vec::new();
    if folder.is_some() {
        versions = version_files(client, &join_path(&dir, &folder_name)).await?;
    }
    Ok(match (folder, bare) {
        (Some(folder), bare) if !versions.is_empty() => Found::Item(Box::new(WalkItem::Versions {
            logical_key: key.to_string(),
            folder,
            versions,
            null_version: bare.filter(is_null_version),
        })),
        (_, Some(b)) if !b.is_directory => Found::Item(Box::new(WalkItem::Object {
            key: key.to_string(),
            entry: b,
        })),
        // `PUT dir/` stores a directory carrying an ETag: S3 lists it as the
        // object `dir/`, but lifecycle never expires directories
        // (docs/filer-layout.md#objects-and-directories), so "not found" would be
        // wrong and say nothing of why it stays.
        (_, Some(b)) if b.extended.contains_key(keys::ETAG) => {
            let mtime = b.attributes.as_ref().map_or(0, |a| a.mtime) * 1_000_000_000;
            Found::FolderMarker(format!(
                "object {bucket}/{key}: a folder marker (the directory {dir}/{name}), mtime {}\n\
                 no rule applies: lifecycle never expires directories, folder markers \
                 included (docs/filer-layout.md#objects-and-directories); delete it through S3 if it must go\n",
                format_time(mtime)
            ))
        }
        _ => Found::Nothing(format!("looked up {dir}/{name} and {dir}/{folder_name}")),
    })
}

/// The version files of a `.versions` folder.
async fn version_files(client: &FilerClient, folder: &str) -> Result<Vec<Entry>, Fail> {
    use futures::StreamExt as _;
    let mut versions = Vec::new();
    let mut listing = std::pin::pin!(client.list_all(folder, DEFAULT_PAGE));
    while let Some(e) = listing.next().await {
        let e = e.map_err(failed)?;
        if !e.is_directory && !version_id_of(&e).is_empty() {
            versions.push(e);
        }
    }
    Ok(versions)
}

/// "Why is my object gone?": if we deleted it, the journal says by which
/// rule, in which pass and when; otherwise the answer is an error.
async fn gone(s: &Settings, args: &ExplainArgs, looked: &str) -> Result<String, Fail> {
    let (bucket, key) = (&args.bucket, &args.key);
    match last_journal_entry(s, args).await {
        Ok((Some(e), _)) => Ok(format!(
            "object {bucket}/{key} does not exist: s3-lifecycled deleted it\n  {}\n  \
             rule {} ({}), pass {}, at {}\n",
            line(&e),
            crate::status::rule_name(&e.rule_id, &e.rule_hash),
            e.kind,
            e.run_id,
            format_time(e.ts_ns)
        )),
        Ok((None, days)) if days.is_empty() => Err(failed(format!(
            "object {bucket}/{key} not found ({looked}); {}",
            nothing_found(&s.cursor.dir, &days)
        ))),
        Ok((None, _)) => Err(failed(format!(
            "object {bucket}/{key} not found ({looked}), \
             and the deletion journal holds no delete of it by s3-lifecycled"
        ))),
        Err((_, j)) => Err(failed(format!(
            "object {bucket}/{key} not found ({looked}); \
             the deletion journal cannot be read ({j})"
        ))),
    }
}

/// Size, tags and mtime of the object, or of the version `target`.
fn attributes(
    item: &WalkItem,
    listed: &[VersionedObject],
    target: Option<&str>,
    bucket: &str,
    key: &str,
) -> Result<(i64, BTreeMap<String, String>, Nanos), Fail> {
    match (item, target) {
        (WalkItem::Object { entry, .. }, _) => {
            let attrs = entry.attributes.clone().unwrap_or_default();
            Ok((
                i64::try_from(attrs.file_size).unwrap_or(i64::MAX),
                crate::engine::filter::tags_of(entry),
                attrs.mtime * 1_000_000_000 + i64::from(attrs.mtime_ns),
            ))
        }
        (_, Some(v)) => {
            let Some(found) = listed.iter().find(|x| x.version_id == v) else {
                let ids: Vec<&str> = listed.iter().map(|x| x.version_id.as_str()).collect();
                return Err(failed(format!(
                    "version {v} of {bucket}/{key} not found; its versions are: {}",
                    ids.join(", ")
                )));
            };
            let i = &found.info;
            Ok((i.size, i.tags.clone(), i.mod_time))
        }
        (_, None) => Err(failed(format!("{bucket}/{key} has no versions listed"))),
    }
}

/// A line per rule; for a versioned key, which actions apply depends on the
/// version and is listed by [`version_lines`].
fn rule_lines(out: &mut String, verdicts: &[RuleVerdict], versioned: bool) {
    for v in verdicts {
        let id = rule_label(&v.rule_id, v.position);
        if v.matches && versioned {
            let _ = writeln!(out, "rule {id}: filter matches");
        } else if v.matches {
            let _ = writeln!(out, "rule {id}: matches");
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
}

/// The version's state and the actions the walker would take on it.
fn version_lines(out: &mut String, vv: &VersionVerdict) {
    let state = match (vv.is_delete_marker, vv.is_latest, vv.noncurrent_since) {
        (true, ..) => "delete marker".to_string(),
        (_, true, _) => "current version".to_string(),
        (_, _, Some(t)) => format!("noncurrent since {}", format_time(t)),
        (_, _, None) => "noncurrent".to_string(),
    };
    let _ = writeln!(
        out,
        "version {}: {state}, {} bytes, mtime {}, {} version(s) of the key",
        vv.version_id,
        vv.size,
        format_time(vv.mod_time),
        vv.num_versions
    );
    if vv.actions.is_empty() {
        out.push_str("  no rule action applies to this version\n");
    }
    for a in &vv.actions {
        let _ = writeln!(
            out,
            "  rule {}: {}: due {}",
            a.rule,
            a.kind,
            format_time(a.due_ns)
        );
    }
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
