//! Walker evaluation (pure): what the bucket lister hands over
//! ([`WalkItem`]) and which [`Match`]es an item yields at `now` (facts doc
//! §7.2–7.3). The listing itself is I/O and lives in `seaweed`.
//!
//! Differences from Go's walker, on purpose:
//! - Every match carries the evaluated entry's identity, so the server's CAS
//!   refuses to delete an object that changed after listing (Go sends none,
//!   §13.17).
//! - ExpirationDays/Date target the logical key with an empty version id even
//!   on versioned buckets (Go sends the latest's id): the server then acts on
//!   whatever is latest, and the CAS refuses unless that is still the version
//!   we evaluated. Sending the id would put a delete marker over a newer
//!   version written in between.
//! - Directories (folder markers, implicit parents) and everything under
//!   `.uploads/` other than the upload directories themselves (i.e. parts) are
//!   never objects; Go expires stale parts as ordinary objects (§13.21).

use crate::engine::evaluate::{ObjectInfo, due_at, fires};
use crate::engine::route::Match;
use crate::engine::versions::{expand_versions, mtime_ns, size_of};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleMode, Snapshot, TimeConfig, filter, keys,
    shard_id,
};
use crate::pb::filer_pb::Entry;

/// One thing the bucket lister found.
///
/// How the lister decides between `Object` and `Versions`: a bare file
/// `<key>` is part of `Versions` (as `null_version`) exactly when a sibling
/// `<key>.versions` folder holds at least one version file and the bare entry
/// counts as a null version ([`crate::engine::versions::is_null_version`]).
/// Otherwise it is an `Object`, whatever the bucket's versioning: a bare file
/// with no versions beside it is the key's only version (a pre-versioning
/// object or a Suspended-bucket null version) and so its latest, which is all
/// evaluation needs to know.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkItem {
    /// A file in the bucket; `key` is its bucket-relative path.
    Object {
        /// Bucket-relative path.
        key: String,
        /// The file entry.
        entry: Entry,
    },
    /// A versioned key: its `.versions` folder, the version files in it and
    /// the bare null version if any.
    Versions {
        /// The key without the `.versions` suffix.
        logical_key: String,
        /// The `<logical_key>.versions` directory entry (carries the pointer).
        folder: Entry,
        /// Entries listed inside the folder.
        versions: Vec<Entry>,
        /// The bare `<logical_key>` entry when it counts as a null version.
        null_version: Option<Entry>,
    },
    /// An in-progress multipart upload: the `.uploads/<upload_id>` directory.
    Upload {
        /// The upload id (directory name).
        upload_id: String,
        /// The directory entry; Extended `key` is the destination key.
        entry: Entry,
    },
}

impl WalkItem {
    /// The key the walker shards and matches on: the logical key, or an
    /// upload's destination key (`None` when the upload has none).
    pub fn match_key(&self) -> Option<&str> {
        match self {
            WalkItem::Object { key, .. } => Some(key),
            WalkItem::Versions { logical_key, .. } => Some(logical_key),
            WalkItem::Upload { entry, .. } => upload_dest(entry),
        }
    }

    /// The walker shard of this item, `shard_id(bucket, match_key)`.
    pub fn shard(&self, bucket: &str) -> Option<u8> {
        self.match_key().map(|k| shard_id(bucket, k))
    }
}

fn upload_dest(entry: &Entry) -> Option<&str> {
    entry
        .extended
        .get(keys::MPU_KEY)
        .and_then(|v| std::str::from_utf8(v).ok())
        .filter(|d| !d.is_empty())
}

/// An upload id the server accepts in `.uploads/<id>` (facts doc §9.2):
/// anything else would be BLOCKED and halt the shard.
fn valid_upload_id(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains('/')
}

/// Matches of one item against `view`'s actions for `bucket` at `now`.
pub fn evaluate(view: &Snapshot, bucket: &str, item: &WalkItem, now: Nanos) -> Vec<Match> {
    match view.bucket(bucket) {
        Some(b) => evaluate_item(b.actions(), bucket, item, now, &view.time()),
        None => Vec::new(),
    }
}

/// Matches of one item against one bucket's actions at `now`: every active,
/// non-Disabled action that [`fires`] for the item (or one of its versions).
pub fn evaluate_item(
    actions: &[CompiledAction],
    bucket: &str,
    item: &WalkItem,
    now: Nanos,
    time: &TimeConfig,
) -> Vec<Match> {
    let live: Vec<&CompiledAction> = actions
        .iter()
        .filter(|a| a.is_active() && a.mode() != RuleMode::Disabled)
        .collect();
    if live.is_empty() {
        return Vec::new();
    }
    let Some(key) = item.match_key() else {
        return Vec::new();
    };
    let shard = shard_id(bucket, key);
    let mut out = Vec::new();
    let mut try_emit = |a: &CompiledAction,
                        info: &ObjectInfo,
                        object_path: &str,
                        version_id: &str,
                        identity: &EntryIdentity| {
        if !fires(a.rule(), a.kind(), key, info, now, time) {
            return;
        }
        // fires() implies due_at() is Some.
        let due = due_at(a.rule(), a.kind(), key, info, time).unwrap_or(now);
        out.push(Match {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            object_path: object_path.to_owned(),
            version_id: version_id.to_owned(),
            rule_hash: a.rule_hash(),
            kind: a.kind(),
            due,
            identity: identity.clone(),
            shard,
        });
    };
    match item {
        WalkItem::Object { key, entry } => {
            if entry.is_directory || under_reserved(key) {
                return Vec::new();
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                size: size_of(entry),
                is_latest: true,
                is_delete_marker: false,
                num_versions: 1,
                noncurrent_since: None,
                noncurrent_index: None,
                tags: filter::tags_of(entry),
                is_mpu_init: false,
            };
            let identity = EntryIdentity::of(entry);
            for a in &live {
                try_emit(a, &info, key, "", &identity);
            }
        }
        WalkItem::Versions {
            logical_key,
            folder,
            versions,
            null_version,
        } => {
            if logical_key.is_empty() || under_reserved(logical_key) {
                return Vec::new();
            }
            for v in expand_versions(logical_key, folder, versions, null_version.as_ref()) {
                for a in &live {
                    let version_id = match a.kind() {
                        ActionKind::ExpirationDays | ActionKind::ExpirationDate => "",
                        _ => v.version_id.as_str(),
                    };
                    try_emit(a, &v.info, logical_key, version_id, &v.identity);
                }
            }
        }
        WalkItem::Upload { upload_id, entry } => {
            if !entry.is_directory || !valid_upload_id(upload_id) {
                return Vec::new();
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                is_mpu_init: true,
                ..ObjectInfo::default()
            };
            let identity = EntryIdentity::of(entry);
            let path = format!("{}/{upload_id}", keys::UPLOADS_DIR);
            for a in &live {
                try_emit(a, &info, &path, "", &identity);
            }
        }
    }
    out
}

/// Keys under `.uploads/` (MPU parts) or `.system/` are not user objects.
fn under_reserved(key: &str) -> bool {
    let top = key.split('/').next().unwrap_or("");
    top == keys::UPLOADS_DIR || top == ".system"
}
