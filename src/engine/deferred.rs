//! Deferred matches: the two `.versions` pointer moves whose entry no event
//! carries, routed as matches that name a filer lookup, and the pure half of
//! that lookup once it is due ([`resolve_deferred`], [`null_still_displaced`];
//! docs/meta-log.md#deferred-lookups).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::engine::evaluate::{ObjectInfo, due_at};
use crate::engine::matches::{DeferredLookup, Expect, Match};
use crate::engine::versions::{
    compare_version_ids, ext_str, is_delete_marker, is_null_version, mtime_known, mtime_ns,
    size_of, version_id_of,
};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleMode, TimeConfig, filter, keys, rule_hash,
};
use crate::lifecycle::FlatRule;
use crate::pb::filer_pb::Entry;

/// A located `.versions` folder event: the buckets root (only to name the
/// entries of deferred lookups), the bucket, the folder's logical key and the
/// shard of the event.
pub(crate) struct Pointer<'a> {
    pub(crate) buckets_root: &'a str,
    pub(crate) bucket: &'a str,
    pub(crate) logical: &'a str,
    pub(crate) shard: u8,
}

impl Pointer<'_> {
    fn bucket_dir(&self) -> String {
        let root = self.buckets_root.trim_end_matches('/');
        format!("{root}/{}", self.bucket)
    }

    /// Where the bare `<logical>` entry lives: (parent directory, name).
    fn bare_entry(&self) -> (String, String) {
        match self.logical.rsplit_once('/') {
            Some((parent, name)) => (format!("{}/{parent}", self.bucket_dir()), name.to_owned()),
            None => (self.bucket_dir(), self.logical.to_owned()),
        }
    }

    /// The `<logical>.versions` folder's full path.
    fn folder_dir(&self) -> String {
        let dir = self.bucket_dir();
        format!("{dir}/{}{}", self.logical, keys::VERSIONS_SUFFIX)
    }
}

/// `Seaweed-X-Amz-Latest-Version-Id` of a folder entry, if non-empty.
fn pointer_of(folder: &Entry) -> Option<&str> {
    ext_str(folder, keys::LATEST_VERSION_ID).filter(|id| !id.is_empty())
}

fn flag(folder: &Entry, key: &str) -> bool {
    ext_str(folder, key) == Some("true")
}

/// Deferred matches of a `.versions` folder write
/// (docs/meta-log.md#deferred-lookups): case A, a bare null version displaced
/// by the new latest; case B, an older version restored to latest.
pub(crate) fn route_pointer(
    actions: &[CompiledAction],
    time: &TimeConfig,
    at: &Pointer<'_>,
    old: Option<&Entry>,
    new: &Entry,
    ts_ns: Nanos,
) -> Vec<Match> {
    let Some(new_id) = pointer_of(new) else {
        return Vec::new();
    };
    // Both signals at once is not a state SeaweedFS writes; the null would
    // be latest, so nothing was displaced or restored.
    if flag(new, keys::NULL_VERSION_IS_LATEST) {
        return Vec::new();
    }
    let old_id = old.and_then(pointer_of);
    let null_was_latest = old.is_some_and(|o| flag(o, keys::NULL_VERSION_IS_LATEST));
    let candidates = |kind: ActionKind| {
        actions.iter().filter(move |a| {
            let r = a.rule();
            a.is_active()
                && a.mode() == RuleMode::EventDriven
                && a.kind() == kind
                && r.enabled
                && (kind != ActionKind::NoncurrentDays || r.newer_noncurrent_versions <= 0)
                // Size and tag filters need the entry: resolve_deferred.
                && at.logical.as_bytes().starts_with(r.prefix.as_bytes())
        })
    };
    let deferred =
        |a: &CompiledAction, version_id: &str, due: Nanos, lookup: DeferredLookup| Match {
            bucket: at.bucket.to_owned(),
            key: at.logical.to_owned(),
            object_path: at.logical.to_owned(),
            version_id: version_id.to_owned(),
            rule_hash: a.rule_hash(),
            kind: a.kind(),
            due,
            identity: EntryIdentity::default(),
            shard: at.shard,
            lookup: Some(lookup),
        };

    // Case A. A new pointer after "null is latest" or after no pointer at
    // all (the key's first versioned write, old = None for a folder created
    // with its pointer already set). A new latest that is itself the null
    // version (`v_null`, a Suspended-bucket delete marker) replaced the bare
    // null rather than displacing it.
    if null_was_latest || old_id.is_none() {
        if new_id == keys::NULL_VERSION {
            return Vec::new();
        }
        let (directory, name) = at.bare_entry();
        return candidates(ActionKind::NoncurrentDays)
            .filter(|a| a.rule().noncurrent_days > 0)
            .map(|a| {
                // The bare entry is never stamped: it became noncurrent when
                // this pointer moved.
                let due = time.due_after(ts_ns, a.rule().noncurrent_days);
                let lookup = DeferredLookup {
                    directory: directory.clone(),
                    name: name.clone(),
                    expect: Expect::NullVersion,
                };
                deferred(a, keys::NULL_VERSION, due, lookup)
            })
            .collect();
    }

    // Case B. The pointer moved back to an older version that is not a
    // delete marker: the latest (version or marker) above it was deleted.
    let Some(old_id) = old_id else {
        return Vec::new();
    };
    // A `/` in the id would make the lookup name another path.
    if new_id == old_id
        || new_id.contains('/')
        || compare_version_ids(new_id, old_id) != Ordering::Greater
        || flag(new, keys::LATEST_VERSION_IS_DELETE_MARKER)
    {
        return Vec::new();
    }
    // The folder caches the latest's mtime in whole seconds; without it
    // there is no due time to give (Go's pointer path gives up likewise).
    let Some(mtime) = ext_str(new, keys::LATEST_VERSION_MTIME)
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|s| *s > 0)
        .map(|s| s.saturating_mul(1_000_000_000))
    else {
        return Vec::new();
    };
    let directory = at.folder_dir();
    candidates(ActionKind::ExpirationDays)
        .filter(|a| a.rule().expiration_days > 0)
        .map(|a| {
            let due = time.due_after(mtime, a.rule().expiration_days);
            let lookup = DeferredLookup {
                directory: directory.clone(),
                name: format!("{}{new_id}", keys::VERSION_FILE_PREFIX),
                expect: Expect::Version {
                    version_id: new_id.to_owned(),
                },
            };
            // Empty version id: expire whatever is latest, and only if it
            // is still this version (the CAS on its identity).
            deferred(a, "", due, lookup)
        })
        .collect()
}

/// Whether a displaced null version is still noncurrent, judged from its
/// key's `.versions` folder as looked up at dispatch time: the folder exists,
/// its pointer names a non-null version, and it does not say the null version
/// is latest. Anything else (folder gone, pointer cleared by a Suspended
/// write, pointer back at `null`) means the bare entry may be current again,
/// and deleting it would destroy the latest version — the server would not
/// stop it (docs/meta-log.md#deferred-lookups, "A server blind spot").
pub fn null_still_displaced(folder: Option<&Entry>) -> bool {
    folder.is_some_and(|f| {
        f.is_directory
            && pointer_of(f).is_some_and(|id| id != keys::NULL_VERSION)
            && !flag(f, keys::NULL_VERSION_IS_LATEST)
    })
}

/// Turns a deferred match into a concrete one, given the entry its
/// [`DeferredLookup`] names (`None` = not found) and the rule the match came
/// from (the one with `m.rule_hash`). Pure: the caller does the lookup, once
/// the deferred match is due.
///
/// Returns `None` — nothing to do, the match is resolved — unless the entry
/// exists, has the expected shape and is inside the rule's full filter
/// (prefix, size, tags):
/// - [`Expect::NullVersion`] (NoncurrentDays): the entry counts as a null
///   version ([`versions::is_null_version`](crate::engine::versions::is_null_version)).
///   A null delete marker is accepted: AWS expires noncurrent delete markers
///   under NoncurrentVersionExpiration too. The entry must also be older
///   than the demotion (mtime ≤ due − days): a bare entry written after the
///   pointer moved is a new (current) null version, not the displaced one.
///   The due time is kept (it comes from the demotion, which the entry does
///   not record).
/// - [`Expect::Version`] (ExpirationDays): the entry has that version id
///   and is not a delete marker; due = the later of the match's and the
///   entry's own `mtime + days` (never earlier than either source says).
///
/// The result has `lookup: None` and `identity = EntryIdentity::of(entry)`,
/// so the server's CAS refuses if the entry changes before the delete. Its
/// `due` may be later than the deferred one: compare it with `now` again.
/// Not a deferred match, a rule whose hash is not `m.rule_hash`, or a kind
/// that does not go with the expectation → `None`.
pub fn resolve_deferred(
    m: &Match,
    entry: Option<&Entry>,
    time: &TimeConfig,
    rule: &FlatRule,
) -> Option<Match> {
    let lookup = m.lookup.as_ref()?;
    let entry = entry?;
    // A lookup answer for another name means the caller mixed up entries;
    // acting on it could delete the wrong object.
    if entry.name != lookup.name || rule_hash(rule) != m.rule_hash {
        return None;
    }
    // docs/filer-layout.md#entries-without-attributes
    if !mtime_known(entry) {
        return None;
    }
    let info = |is_latest: bool| ObjectInfo {
        mod_time: mtime_ns(entry),
        size: size_of(entry),
        is_latest,
        is_delete_marker: is_delete_marker(entry),
        tags: if rule.tags.is_empty() {
            BTreeMap::new()
        } else {
            filter::tags_of(entry)
        },
        ..ObjectInfo::default()
    };
    let due = match (&lookup.expect, m.kind) {
        (Expect::NullVersion, ActionKind::NoncurrentDays) => {
            if !is_null_version(entry) {
                return None;
            }
            let ttl =
                i64::try_from(time.days(rule.noncurrent_days).as_nanos()).unwrap_or(Nanos::MAX);
            if mtime_ns(entry) > m.due.saturating_sub(ttl) {
                return None;
            }
            // Gate only (enabled, filter, shape); the base is the demotion.
            due_at(rule, m.kind, &m.key, &info(false), time)?;
            m.due
        }
        (Expect::Version { version_id }, ActionKind::ExpirationDays) => {
            if entry.is_directory || version_id_of(entry) != version_id || is_delete_marker(entry) {
                return None;
            }
            due_at(rule, m.kind, &m.key, &info(true), time)?.max(m.due)
        }
        _ => return None,
    };
    Some(Match {
        due,
        identity: EntryIdentity::of(entry),
        lookup: None,
        ..m.clone()
    })
}

#[cfg(test)]
mod tests;
