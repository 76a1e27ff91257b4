//! Meta-log replay routing: turning one filer meta-log event into the
//! lifecycle [`Match`]es it makes due at some time. A pure function of
//! (snapshot, event): no filer lookups, no `now`. What each event means, the
//! deferred lookups of `.versions` pointer moves and what is left to the walker
//! are set out in docs/meta-log.md#routing (also docs/meta-log.md#event-paths,
//! docs/meta-log.md#per-operation, docs/rule-hash.md#shard-function).
//!
//! The event and its location live in [`event`](crate::engine::event), what
//! routing produces in [`matches`](crate::engine::matches), and the pointer's
//! deferred matches in [`deferred`](crate::engine::deferred).

use std::collections::BTreeMap;

use crate::engine::deferred::{Pointer, route_pointer};
use crate::engine::evaluate::{ObjectInfo, due_at};
use crate::engine::event::{MetaEvent, locate};
use crate::engine::matches::{Match, PendingMatch};
use crate::engine::progress::subject_of;
use crate::engine::versions::{
    is_delete_marker, mtime_known, mtime_ns, noncurrent_since_of, size_of, version_id_of,
};
use crate::engine::walk::{under_reserved, upload_dest};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleMode, Snapshot, TimeConfig, filter, keys,
    shard_id,
};
use crate::pb::filer_pb::Entry;

/// The result of routing one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub bucket: String,
    /// Physical key of the event (`k.versions/v_<id>`, `.uploads/<id>`, …).
    pub key: String,
    /// `shard_id(bucket, key)`: the replay shard that owns the event.
    pub shard: u8,
    /// Matches, with due times; the caller compares them with its `now`.
    /// From [`route_for_pass`], only those due by the pass's `now`.
    pub matches: Vec<Match>,
    /// From [`route_for_pass`]: the matches due after its `now`, as much of
    /// them as the shard's tracker needs to keep them pending. Always empty
    /// from [`route`].
    pub pending: Vec<PendingMatch>,
    /// The event's object (or upload) has no real mtime, in a bucket of the
    /// view: it routed nothing and is counted as skipped
    /// (docs/filer-layout.md#entries-without-attributes).
    pub skipped_no_mtime: bool,
}

/// Routes one event against `view` (normally the replay view): locates it,
/// computes its shard and its matches. `None` when the event is outside the
/// buckets root. The caller filters by `shard`.
pub fn route(view: &Snapshot, buckets_root: &str, ev: &MetaEvent) -> Option<Routed> {
    route_by(view, buckets_root, ev, None)
}

/// [`route`] for a pass evaluating at `now`. A match due after `now` cannot
/// be sent in that pass (the shard keeps it pending, by the same `now`), so
/// it comes as a [`PendingMatch`]: no strings and no identity (the head fid
/// and the SHA-256 of the extended attributes were a tenth of a replay's
/// CPU, and the four strings of a match another tenth, when nearly every
/// match was pending: the replay's scan rate,
/// docs/entry-identity.md#when-it-is-computed).
pub fn route_for_pass(
    view: &Snapshot,
    buckets_root: &str,
    ev: &MetaEvent,
    now: Nanos,
) -> Option<Routed> {
    route_by(view, buckets_root, ev, Some(now))
}

fn route_by(
    view: &Snapshot,
    buckets_root: &str,
    ev: &MetaEvent,
    send_by: Option<Nanos>,
) -> Option<Routed> {
    let (bucket, key) = locate(buckets_root, ev)?;
    let shard = shard_id(&bucket, &key);
    let mut found = Found {
        matches: Vec::new(),
        pending: Vec::new(),
        send_by,
    };
    let b = view.bucket(&bucket);
    if let Some(b) = b {
        let at = At {
            buckets_root,
            bucket: &bucket,
            key: &key,
            shard,
        };
        route_actions_by(b.actions(), &view.time(), &at, ev, &mut found);
    }
    // An object, version or upload (something replay would evaluate) without
    // a real mtime ([`mtime_known`]).
    let skipped_no_mtime = b.is_some()
        && (ev.new_entry.as_ref())
            .and_then(|e| classify(&key, e))
            .is_some_and(|s| !mtime_known(s.entry()));
    Some(Routed {
        bucket,
        key,
        shard,
        matches: found.matches,
        pending: found.pending,
        skipped_no_mtime,
    })
}

/// What one event is, for routing.
enum Subject<'a> {
    /// MPU init: destination key, upload dir entry.
    Upload { dest: &'a str, entry: &'a Entry },
    /// A version file or plain file: logical key, entry, version id ("" for
    /// a plain file).
    Object {
        logical: &'a str,
        entry: &'a Entry,
        version_id: &'a str,
    },
}

impl Subject<'_> {
    fn entry(&self) -> &Entry {
        match self {
            Subject::Upload { entry, .. } | Subject::Object { entry, .. } => entry,
        }
    }
}

fn classify<'a>(key: &'a str, entry: &'a Entry) -> Option<Subject<'a>> {
    if key.is_empty() {
        return None;
    }
    if let Some(upload) = key
        .strip_prefix(keys::UPLOADS_DIR)
        .and_then(|r| r.strip_prefix('/'))
    {
        // Only the upload dir itself; parts (`.uploads/<id>/<part>`) and the
        // `.uploads` dir are not objects.
        if upload.is_empty() || upload.contains('/') || !entry.is_directory {
            return None;
        }
        let dest = upload_dest(entry)?;
        return Some(Subject::Upload { dest, entry });
    }
    if under_reserved(key) || entry.is_directory {
        return None;
    }
    let (parent, _) = key.rsplit_once('/').unwrap_or(("", key));
    let parent_segment = parent.rsplit('/').next().unwrap_or("");
    if let Some(logical_tail) = parent_segment.strip_suffix(keys::VERSIONS_SUFFIX) {
        let version_id = version_id_of(entry);
        // Files in a `.versions` folder without a version id are not S3
        // objects; a bucket-root `.versions` folder has no logical key.
        if version_id.is_empty() || logical_tail.is_empty() {
            return None;
        }
        let logical = &parent[..parent.len() - keys::VERSIONS_SUFFIX.len()];
        return Some(Subject::Object {
            logical,
            entry,
            version_id,
        });
    }
    Some(Subject::Object {
        logical: key,
        entry,
        version_id: "",
    })
}

/// Where an event sits: what the routing core is told besides the event.
struct At<'a> {
    buckets_root: &'a str,
    bucket: &'a str,
    key: &'a str,
    shard: u8,
}

/// What routing one event found: matches to act on by `send_by`, and with
/// a `send_by`, the ones due after it as [`PendingMatch`]es.
struct Found {
    matches: Vec<Match>,
    pending: Vec<PendingMatch>,
    send_by: Option<Nanos>,
}

impl Found {
    /// Whether a match due at `due` is pending (due after `send_by`).
    fn pends(&self, due: Nanos) -> bool {
        self.send_by.is_some_and(|n| due > n)
    }

    /// Files a match built in full (the rare deferred ones).
    fn file(&mut self, m: Match) {
        if self.pends(m.due) {
            self.pending.push(PendingMatch::of(&m));
        } else {
            self.matches.push(m);
        }
    }
}

/// The routing core over one bucket's actions: the matches of an event at
/// `at` (`key` = physical key, `shard` its shard; `buckets_root` only names
/// the entries of deferred lookups). With `send_by`, matches due after it get
/// a light identity ([`route_for_pass`]).
fn route_actions_by(
    actions: &[CompiledAction],
    time: &TimeConfig,
    at: &At<'_>,
    ev: &MetaEvent,
    found: &mut Found,
) {
    let Some(entry) = ev.new_entry.as_ref() else {
        return;
    };
    if entry.is_directory
        && let Some(logical) = versions_folder_logical(at.key)
    {
        let folder = Pointer {
            buckets_root: at.buckets_root,
            bucket: at.bucket,
            logical,
            shard: at.shard,
        };
        for m in route_pointer(
            actions,
            time,
            &folder,
            ev.old_entry.as_deref(),
            entry,
            ev.ts_ns,
        ) {
            found.file(m);
        }
        return;
    }
    let routable = |kind: ActionKind| {
        actions
            .iter()
            .filter(move |a| a.is_active() && a.mode() == RuleMode::EventDriven && a.kind() == kind)
    };
    let Some(subject) = classify(at.key, entry) else {
        return;
    };
    // No real mtime: it would read as epoch-old and due under every age rule
    // (docs/filer-layout.md#entries-without-attributes).
    if !mtime_known(subject.entry()) {
        return;
    }
    let mut emit = |a: &CompiledAction,
                    logical: &str,
                    info: &ObjectInfo,
                    object_path: &str,
                    version_id: &str| {
        let Some(due) = due_at(a.rule(), a.kind(), logical, info, time) else {
            return;
        };
        if found.pends(due) {
            found.pending.push(PendingMatch {
                rule_hash: a.rule_hash(),
                kind: a.kind(),
                due,
                subject: subject_of(object_path, version_id),
                bytes: u64::try_from(size_of(entry)).unwrap_or(0),
            });
            return;
        }
        found.matches.push(Match {
            bucket: at.bucket.to_owned(),
            key: logical.to_owned(),
            object_path: object_path.to_owned(),
            version_id: version_id.to_owned(),
            rule_hash: a.rule_hash(),
            kind: a.kind(),
            due,
            identity: EntryIdentity::of(entry),
            shard: at.shard,
            lookup: None,
        });
    };
    match subject {
        Subject::Upload { dest, entry } => {
            let mut candidates = routable(ActionKind::AbortMpu).peekable();
            if candidates.peek().is_none() {
                return;
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                is_mpu_init: true,
                ..ObjectInfo::default()
            };
            for a in candidates {
                emit(a, dest, &info, at.key, "");
            }
        }
        Subject::Object {
            logical,
            entry,
            version_id,
        } => {
            let stamp = noncurrent_since_of(entry);
            let marker = is_delete_marker(entry);
            let (kind, target_version) = match stamp {
                Some(_) => (
                    ActionKind::NoncurrentDays,
                    if version_id.is_empty() {
                        keys::NULL_VERSION
                    } else {
                        version_id
                    },
                ),
                // A new delete marker is only ExpiredDeleteMarker's business.
                None if marker => return,
                None => (ActionKind::ExpirationDays, ""),
            };
            // One event cannot rank a version among its siblings, so a
            // NoncurrentDays rule that keeps N newer versions is left to the
            // walker (due_at would refuse it for an unknown rank anyway).
            let candidates: Vec<&CompiledAction> = routable(kind)
                .filter(|a| {
                    kind != ActionKind::NoncurrentDays || a.rule().newer_noncurrent_versions <= 0
                })
                .filter(|a| logical.as_bytes().starts_with(a.rule().prefix.as_bytes()))
                .collect();
            if candidates.is_empty() {
                return;
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                size: size_of(entry),
                is_latest: stamp.is_none(),
                is_delete_marker: marker,
                // Unknown from one event; no replay kind looks at it.
                num_versions: 0,
                noncurrent_since: stamp,
                tags: if candidates.iter().any(|a| !a.rule().tags.is_empty()) {
                    filter::tags_of(entry)
                } else {
                    BTreeMap::new()
                },
                ..ObjectInfo::default()
            };
            for a in candidates {
                emit(a, logical, &info, logical, target_version);
            }
        }
    }
}

/// The logical key of a `<logical>.versions` folder key; `None` for any
/// other key, a bucket-root `.versions` (no logical key) and reserved paths.
fn versions_folder_logical(key: &str) -> Option<&str> {
    if under_reserved(key) {
        return None;
    }
    let name = key.rsplit('/').next().unwrap_or(key);
    let tail = name.strip_suffix(keys::VERSIONS_SUFFIX)?;
    if tail.is_empty() {
        return None;
    }
    Some(&key[..key.len() - keys::VERSIONS_SUFFIX.len()])
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests;
