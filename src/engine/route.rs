//! Meta-log replay routing: turning one filer meta-log event into the
//! lifecycle [`Match`]es it makes due at some time (facts doc §4.2, §13.5,
//! §13.11; seaweedfs-live.md §1).
//!
//! # Our routing design (differs from Go's `router.Route`)
//!
//! The router is a pure function of (snapshot, event): it does **no filer
//! lookups** and does not compare with `now` — it returns due times and the
//! caller decides (design.md "Why correct": due times of replay kinds are
//! monotonic enough that the first not-yet-due match ends a rule's scan).
//! Only the replay kinds (ExpirationDays, NoncurrentDays, AbortMpu) of active
//! EventDriven actions are routed; walker kinds are the walker's job.
//!
//! What an event means is read off the event's own entry:
//!
//! - **Skipped:** deletes (no `new_entry`), bucket-level events (key `""`),
//!   directories — folder markers, implicit parents, `.versions` folders (so
//!   the pointer updates) — except MPU init directories, MPU parts and
//!   anything else under `.uploads/`, anything under `.system/`, and files in
//!   a `.versions` folder without a version id (not S3 objects).
//! - **MPU init** (directory `.uploads/<id>` with a non-empty Extended `key`):
//!   AbortMpu on the destination key (filters see that key, size 0, no tags),
//!   due = round(dir mtime + days); `object_path` = `.uploads/<id>`.
//! - **Version file** (`<logical>.versions/v_<id>` with a non-empty
//!   `Seaweed-X-Amz-Version-Id`): with a `Noncurrent-Since-Ns` stamp it is a
//!   demoted version → NoncurrentDays on `<logical>` + its version id, due =
//!   round(stamp + days). The filer writes the stamp as a separate UPDATE of
//!   the demoted version right after the pointer moves, so every demotion
//!   yields its own event carrying the exact entry. Without a stamp and not a
//!   delete marker it is the new latest → ExpirationDays on `<logical>` with
//!   version id `""`. This fixes Go's §13.5: replay expires current versions
//!   of versioning-enabled buckets too.
//! - **Plain file**: with a stamp it is a demoted null version →
//!   NoncurrentDays with version id `null`; without → ExpirationDays with
//!   version id `""`.
//!
//! ExpirationDays always targets the logical key with an empty version id: the
//! server then acts on whatever is latest, and our identity CAS refuses if that
//! is no longer the entry we evaluated. Sending the latest's version id would
//! be wrong: it could put a delete marker over a newer version.
//!
//! Every create and update (overwrite, tag change, stamp) yields a fresh match
//! carrying the entry's current identity; older matches for the same object
//! then fail the server's CAS (`NOOP_RESOLVED`/`STALE_IDENTITY`) — intended.
//! A stale stamp (left on a version restored to latest when the marker above
//! it was deleted; live §10.2) can yield a NoncurrentDays match for a current
//! version; the server answers `VERSION_IS_LATEST` and nothing is deleted.
//!
//! Known gaps, covered by the walker (recovery walks evaluate every kind):
//! - A NoncurrentDays action whose rule also has `NewerNoncurrentVersions`
//!   N > 0 needs the version's rank among its siblings, which one event does
//!   not carry; the router skips it.
//! - A version restored to latest by deleting the version above it keeps a
//!   stale stamp and gets no new unstamped event, so replay holds no valid
//!   ExpirationDays match for it until its next write.

use std::collections::BTreeMap;

use crate::engine::evaluate::{ObjectInfo, due_at};
use crate::engine::versions::{
    is_delete_marker, mtime_ns, noncurrent_since_of, size_of, version_id_of,
};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleHash, RuleMode, Snapshot, TimeConfig,
    filter, keys, shard_id,
};
use crate::pb::filer_pb::{Entry, SubscribeMetadataResponse};

/// One lifecycle delete to perform (when `due` has passed), from replay or the
/// walker. Maps 1:1 onto a `LifecycleDelete` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Bucket name.
    pub bucket: String,
    /// The logical object key the rule was evaluated on (for an MPU, the
    /// destination key).
    pub key: String,
    /// `LifecycleDelete.object_path`: the logical key, or `.uploads/<id>` for
    /// AbortMpu (sending the destination key there is BLOCKED by the server).
    pub object_path: String,
    /// `LifecycleDelete.version_id`: `""` for ExpirationDays/Date and
    /// AbortMpu; the version id (may be `null`) for the noncurrent and
    /// delete-marker kinds.
    pub version_id: String,
    /// Rule the match came from.
    pub rule_hash: RuleHash,
    /// What to do.
    pub kind: ActionKind,
    /// When the action becomes (or became) due.
    pub due: Nanos,
    /// CAS witness: identity of the entry that was evaluated.
    pub identity: EntryIdentity,
    /// Shard that owns the match: the event's physical path for replay, the
    /// logical key (MPU: destination key) for the walker (facts doc §13.11).
    pub shard: u8,
}

/// One meta-log event (one element of a `SubscribeMetadataResponse`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaEvent {
    /// Filer timestamp of the event.
    pub ts_ns: Nanos,
    /// Parent directory of the old entry (of the new one for a create).
    pub directory: String,
    /// Parent directory of the new entry; set whenever `new_entry` is.
    pub new_parent_path: String,
    /// Entry before the change; absent for a create.
    pub old_entry: Option<Entry>,
    /// Entry after the change; absent for a delete.
    pub new_entry: Option<Entry>,
}

impl MetaEvent {
    /// The event in one response, ignoring its batched tail (`events`). `None`
    /// for keepalives and progress ticks: no event notification, or no entry
    /// with a name.
    pub fn from_response(resp: &SubscribeMetadataResponse) -> Option<MetaEvent> {
        let n = resp.event_notification.as_ref()?;
        let name = n
            .new_entry
            .as_ref()
            .or(n.old_entry.as_ref())
            .map(|e| e.name.as_str())?;
        if name.is_empty() {
            return None;
        }
        Some(MetaEvent {
            ts_ns: resp.ts_ns,
            directory: resp.directory.clone(),
            new_parent_path: n.new_parent_path.clone(),
            old_entry: n.old_entry.clone(),
            new_entry: n.new_entry.clone(),
        })
    }

    /// Every event a response carries, in order: the response itself, then
    /// its batched tail (`client_supports_batching`).
    pub fn all_from_response(resp: &SubscribeMetadataResponse) -> Vec<MetaEvent> {
        std::iter::once(resp)
            .chain(resp.events.iter())
            .filter_map(MetaEvent::from_response)
            .collect()
    }

    /// The entry name: the new entry's, else the old one's.
    fn name(&self) -> Option<&str> {
        self.new_entry
            .as_ref()
            .or(self.old_entry.as_ref())
            .map(|e| e.name.as_str())
    }
}

/// Bucket and physical key of an event (facts doc §4.2 steps 2–3): the
/// directory is `new_parent_path` if set, else `directory`; an event directly
/// in the buckets root is bucket-level (key `""`). `None` outside the buckets
/// root or when the bucket name is empty.
pub fn locate(buckets_root: &str, ev: &MetaEvent) -> Option<(String, String)> {
    let name = ev.name().filter(|n| !n.is_empty())?;
    let dir = if ev.new_parent_path.is_empty() {
        ev.directory.as_str()
    } else {
        ev.new_parent_path.as_str()
    };
    let bare = buckets_root.trim_end_matches('/');
    if dir.trim_end_matches('/') == bare && dir.len() <= bare.len() + 1 {
        return Some((name.to_owned(), String::new()));
    }
    let rest = dir.strip_prefix(bare)?.strip_prefix('/')?;
    let (bucket, parent) = match rest.split_once('/') {
        Some((b, p)) => (b, p),
        None => (rest, ""),
    };
    if bucket.is_empty() {
        return None;
    }
    let key = if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    };
    Some((bucket.to_owned(), key))
}

/// The result of routing one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// Bucket the event is in.
    pub bucket: String,
    /// Physical key of the event (`k.versions/v_<id>`, `.uploads/<id>`, …).
    pub key: String,
    /// `shard_id(bucket, key)`: the replay shard that owns the event.
    pub shard: u8,
    /// Matches, with due times; the caller compares them with its `now`.
    pub matches: Vec<Match>,
}

/// Routes one event against `view` (normally the replay view): locates it,
/// computes its shard and its matches. `None` when the event is outside the
/// buckets root. The caller filters by `shard` (cheaply, before
/// [`route_located`] if it wants to skip work for foreign shards).
pub fn route(view: &Snapshot, buckets_root: &str, ev: &MetaEvent) -> Option<Routed> {
    let (bucket, key) = locate(buckets_root, ev)?;
    let shard = shard_id(&bucket, &key);
    let matches = route_located(view, &bucket, &key, shard, ev);
    Some(Routed {
        bucket,
        key,
        shard,
        matches,
    })
}

/// Matches of an already located event (`key` = physical key, `shard` its
/// shard). Empty when the bucket has no routable action.
pub fn route_located(
    view: &Snapshot,
    bucket: &str,
    key: &str,
    shard: u8,
    ev: &MetaEvent,
) -> Vec<Match> {
    let Some(b) = view.bucket(bucket) else {
        return Vec::new();
    };
    route_actions(b.actions(), &view.time(), bucket, key, shard, ev)
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

/// First path segments SeaweedFS's S3 gateway reserves inside a bucket.
fn reserved_top(key: &str) -> bool {
    let top = key.split('/').next().unwrap_or("");
    top == keys::UPLOADS_DIR || top == ".system"
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
        let dest = entry
            .extended
            .get(keys::MPU_KEY)
            .and_then(|v| std::str::from_utf8(v).ok())
            .filter(|d| !d.is_empty())?;
        return Some(Subject::Upload { dest, entry });
    }
    if reserved_top(key) || entry.is_directory {
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

/// The routing core over one bucket's actions. Public so callers holding a
/// [`crate::engine::BucketView`] (or tests) can route without a snapshot.
pub fn route_actions(
    actions: &[CompiledAction],
    time: &TimeConfig,
    bucket: &str,
    key: &str,
    shard: u8,
    ev: &MetaEvent,
) -> Vec<Match> {
    let Some(entry) = ev.new_entry.as_ref() else {
        return Vec::new();
    };
    let routable = |kind: ActionKind| {
        actions
            .iter()
            .filter(move |a| a.is_active() && a.mode() == RuleMode::EventDriven && a.kind() == kind)
    };
    let Some(subject) = classify(key, entry) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut emit = |a: &CompiledAction,
                    logical: &str,
                    info: &ObjectInfo,
                    object_path: &str,
                    version_id: &str| {
        if let Some(due) = due_at(a.rule(), a.kind(), logical, info, time) {
            out.push(Match {
                bucket: bucket.to_owned(),
                key: logical.to_owned(),
                object_path: object_path.to_owned(),
                version_id: version_id.to_owned(),
                rule_hash: a.rule_hash(),
                kind: a.kind(),
                due,
                identity: EntryIdentity::of(entry),
                shard,
            });
        }
    };
    match subject {
        Subject::Upload { dest, entry } => {
            let mut candidates = routable(ActionKind::AbortMpu).peekable();
            if candidates.peek().is_none() {
                return Vec::new();
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                is_mpu_init: true,
                ..ObjectInfo::default()
            };
            for a in candidates {
                emit(a, dest, &info, key, "");
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
                None if marker => return Vec::new(),
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
                return Vec::new();
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                size: size_of(entry),
                is_latest: stamp.is_none(),
                is_delete_marker: marker,
                // Unknown from one event; no replay kind looks at it.
                num_versions: 0,
                noncurrent_since: stamp,
                noncurrent_index: None,
                tags: if candidates.iter().any(|a| !a.rule().tags.is_empty()) {
                    filter::tags_of(entry)
                } else {
                    BTreeMap::new()
                },
                is_mpu_init: false,
            };
            for a in candidates {
                emit(a, logical, &info, logical, target_version);
            }
        }
    }
    out
}
