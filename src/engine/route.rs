//! Meta-log replay routing: turning one filer meta-log event into the
//! lifecycle [`Match`]es it makes due at some time (docs/meta-log.md#event-paths,
//! docs/meta-log.md#per-operation, docs/rule-hash.md#shard-function).
//!
//! # Our routing design (differs from Go's `router.Route`)
//!
//! The router is a pure function of (snapshot, event): it does **no filer
//! lookups** and does not compare with `now` — it returns due times and the
//! caller decides (docs/design-deviations.md#no-early-stop: a not-yet-due match
//! holds its action's progress but never ends the scan).
//! Only the replay kinds (ExpirationDays, NoncurrentDays, AbortMpu) of active
//! EventDriven actions are routed; walker kinds are the walker's job. Where
//! one event cannot name the entry to act on, the router emits a *deferred*
//! match that names a lookup for the caller to do ("Deferred lookups").
//!
//! What an event means is read off the event's own entry:
//!
//! - **Skipped:** deletes (no `new_entry`), bucket-level events (key `""`),
//!   directories — folder markers, implicit parents — except MPU init
//!   directories and `.versions` folders; MPU parts and anything else under
//!   `.uploads/`, anything under `.system/`, and files in a `.versions`
//!   folder without a version id (not S3 objects).
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
//!   version id `""`. Unlike Go, replay thus expires current versions of
//!   versioning-enabled buckets (docs/design-deviations.md#versioned-current-versions).
//! - **Plain file**: with a stamp it is a demoted null version →
//!   NoncurrentDays with version id `null`; without → ExpirationDays with
//!   version id `""`.
//! - **`.versions` folder** (the pointer `Seaweed-X-Amz-Latest-Version-*`):
//!   only the two deferred cases below; every other folder write (first
//!   creation without a pointer, a forward move by a PUT or a new delete
//!   marker, a touch, a Suspended write clearing the pointer) routes nothing,
//!   because the version files' own events already cover it.
//!
//! ExpirationDays always targets the logical key with an empty version id: the
//! server then acts on whatever is latest, and our identity CAS refuses if that
//! is no longer the entry we evaluated. Sending the latest's version id would
//! be wrong: it could put a delete marker over a newer version.
//!
//! Every create and update (overwrite, tag change, stamp) yields a fresh match
//! carrying the entry's current identity; older matches for the same object
//! then fail the server's CAS (`NOOP_RESOLVED`/`STALE_IDENTITY`) — intended.
//! A stale stamp (left on a version restored to latest when the marker above it
//! was deleted; docs/filer-layout.md#noncurrent-stamp) can yield a NoncurrentDays
//! match for a current version; the server answers `VERSION_IS_LATEST` and nothing is deleted.
//!
//! # Deferred lookups
//!
//! Two state changes show up **only** as a `<logical>.versions` folder UPDATE
//! (recorded on 4.48, `tests/fixtures/events/README.md`, pinned by
//! `tests/route_recorded.rs`): no event carries the entry that has to be
//! acted on, so there is no identity to send. For these the router emits
//! matches with [`Match::lookup`] set and an empty identity, one per action
//! of the view whose rule **prefix** matches `<logical>` (size and tag
//! filters need the entry; [`resolve_deferred`] applies them). The caller
//! keeps them like any other match; once one is due it looks the named entry
//! up (`LookupDirectoryEntry(directory, name)`) and sends only what
//! [`resolve_deferred`] returns, with the looked-up identity as the CAS
//! witness.
//!
//! - **A. Displaced null version.** The old folder said
//!   `Null-Version-Is-Latest: true` or had no `Latest-Version-Id` (the key's
//!   first versioned write; old entry absent counts too) and the new folder
//!   has one (other than `null`: a `v_null` latest replaced the bare null
//!   instead of displacing it). A bare null version (pre-versioning object
//!   or Suspended-era write) that was latest is now noncurrent, but SeaweedFS
//!   neither stamps nor touches it — no event has it. → NoncurrentDays on
//!   `<logical>`, version `null`, due = round(event `ts_ns` + days) (the
//!   pointer event is the demotion), lookup of the bare `<logical>` entry
//!   ([`Expect::NullVersion`]).
//! - **B. Restored latest version.** The pointer moved from Y back to an
//!   older X ([`compare_version_ids`]) that is not a delete marker: the
//!   latest version or marker Y was deleted by id. X is current again but
//!   still carries its stale `Noncurrent-Since-Ns`, so its original
//!   ExpirationDays match fails the CAS (the stamp changed its Extended) and
//!   no new unstamped event comes. → ExpirationDays on `<logical>`, version
//!   `""`, due = round(folder `Latest-Version-Mtime` s + days), lookup of
//!   `<logical>.versions/v_<X>` ([`Expect::Version`]). Without a
//!   `Latest-Version-Mtime` the router gives up, as Go's pointer path does.
//!
//! **Cost.** Case A fires on *every* first versioned write of a key (the
//! folder's first pointer), because only a lookup can tell whether a bare
//! null existed: the recordings show the same three events (folder CREATE,
//! version CREATE, pointer UPDATE) with and without a bare null beside it,
//! the bare entry gets no event, and the folder's old Extended is empty in
//! both. So case A costs one filer lookup per first versioned write to a key
//! under a NoncurrentDays rule's prefix — and only once that match is due,
//! because the lookup is done at dispatch time, not at routing time (a key
//! deleted or rewritten before then costs nothing extra and resolves to
//! nothing). Case B costs one lookup per restore (delete of the latest by
//! id) under an ExpirationDays rule's prefix, also at dispatch time.
//!
//! **A server blind spot, closed here.** The server's NoncurrentDays check
//! only asks whether the folder's `Latest-Version-Id` equals `null`; a bare
//! null that became latest again (its versions all deleted by id, or a
//! Suspended rewrite that set `Null-Version-Is-Latest` and cleared the
//! pointer) is "not latest" to it, and our identity (taken at dispatch)
//! would match. So for [`Expect::NullVersion`] the pass also looks up the
//! `<key>.versions` folder ([`DeferredLookup::folder`]) and sends nothing
//! unless [`null_still_displaced`] says a non-null version is latest.
//! [`resolve_deferred`] additionally refuses an entry rewritten after the
//! pointer event (newer than the demotion, to due-rounding precision).
//!
//! # Known gaps, covered by the walker
//!
//! Recovery walks evaluate every kind:
//! - A NoncurrentDays action whose rule also has `NewerNoncurrentVersions`
//!   N > 0 needs the version's rank among its siblings, which one event does
//!   not carry; the router skips it (also for deferred matches).
//!
//! Tag changes after a deferred match was routed need no extra care: the
//! filter is checked on the entry looked up at dispatch time.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::engine::evaluate::{ObjectInfo, due_at};
use crate::engine::progress::subject_of;
use crate::engine::versions::{
    compare_version_ids, ext_str, is_delete_marker, is_null_version, mtime_known, mtime_ns,
    noncurrent_since_of, size_of, version_id_of,
};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleHash, RuleMode, Snapshot, TimeConfig,
    filter, keys, rule_hash, shard_id,
};
use crate::lifecycle::FlatRule;
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
    /// When the action becomes (or became) due; for a deferred match, when
    /// to do its lookup (the resolved match may come out later).
    pub due: Nanos,
    /// CAS witness: identity of the entry that was evaluated; empty for a
    /// deferred match, which must never be sent as is.
    pub identity: EntryIdentity,
    /// Shard that owns the match: the event's physical path for replay, the
    /// logical key (MPU: destination key) for the walker (docs/rule-hash.md#shard-function).
    pub shard: u8,
    /// `Some` for a *deferred* match: the event alone could not show which
    /// entry to act on, so the caller must look it up (once the match is
    /// due) and turn it into a concrete match with [`resolve_deferred`]
    /// before sending anything. Such a match has an empty `identity`. `None`
    /// for every concrete match (all walker matches, all other replay ones).
    pub lookup: Option<DeferredLookup>,
}

/// The filer entry a deferred [`Match`] depends on: `LookupDirectoryEntry`
/// of `directory` + `name`, then [`resolve_deferred`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredLookup {
    /// Full filer directory path of the entry, e.g. `/buckets/b/docs`.
    pub directory: String,
    /// Entry name inside `directory`, e.g. `a.txt` or `v_<id>`.
    pub name: String,
    /// What the entry must be for the match to stand.
    pub expect: Expect,
}

impl DeferredLookup {
    /// For [`Expect::NullVersion`]: the `<key>.versions` folder (directory,
    /// name) whose pointer must still name a non-null version when the match
    /// is dispatched; see [`null_still_displaced`]. `None` for other lookups.
    pub fn folder(&self) -> Option<(String, String)> {
        match self.expect {
            Expect::NullVersion => Some((
                self.directory.clone(),
                format!("{}{}", self.name, keys::VERSIONS_SUFFIX),
            )),
            Expect::Version { .. } => None,
        }
    }
}

/// Whether a displaced null version is still noncurrent, judged from its
/// key's `.versions` folder as looked up at dispatch time: the folder exists,
/// its pointer names a non-null version, and it does not say the null version
/// is latest. Anything else (folder gone, pointer cleared by a Suspended
/// write, pointer back at `null`) means the bare entry may be current again,
/// and deleting it would destroy the latest version — the server would not
/// stop it (see the module docs).
pub fn null_still_displaced(folder: Option<&Entry>) -> bool {
    let Some(f) = folder else {
        return false;
    };
    let latest = ext_str(f, keys::LATEST_VERSION_ID).unwrap_or_default();
    let null_latest = ext_str(f, keys::NULL_VERSION_IS_LATEST).is_some_and(|v| v == "true");
    f.is_directory && !latest.is_empty() && latest != keys::NULL_VERSION && !null_latest
}

/// The shape a looked-up entry must have (see [`resolve_deferred`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The bare `<key>` entry, counting as the key's null version
    /// (docs/filer-layout.md#null-version), displaced by a versioned write.
    NullVersion,
    /// The version file with this id, not a delete marker.
    Version {
        /// Expected `Seaweed-X-Amz-Version-Id`.
        version_id: String,
    },
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
    pub old_entry: Option<Box<Entry>>,
    /// Entry after the change; absent for a delete.
    pub new_entry: Option<Box<Entry>>,
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

    /// [`MetaEvent::from_response`] taking the response apart instead of
    /// copying its entries: the replay's path, where a copy of every entry
    /// (name, chunks, extended attributes) cost a good share of the scan rate
    /// (issue 9). The batched tail (`events`) is dropped: callers flatten
    /// first.
    pub fn from_owned(resp: SubscribeMetadataResponse) -> Option<MetaEvent> {
        let n = resp.event_notification?;
        let named = n
            .new_entry
            .as_ref()
            .or(n.old_entry.as_ref())
            .is_some_and(|e| !e.name.is_empty());
        named.then_some(MetaEvent {
            ts_ns: resp.ts_ns,
            directory: resp.directory,
            new_parent_path: n.new_parent_path,
            old_entry: n.old_entry,
            new_entry: n.new_entry,
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

/// Bucket and physical key of an event (docs/meta-log.md#event-paths): the
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

/// A replay match due after the pass's `now`: all the shard's tracker
/// needs to keep it pending and to tally it (its action, due time, subject
/// and size). It is never sent, so it carries no strings and no identity
/// ([`route_for_pass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMatch {
    /// Rule the match came from.
    pub rule_hash: RuleHash,
    /// What would be done.
    pub kind: ActionKind,
    /// When it becomes due (after the pass's `now`).
    pub due: Nanos,
    /// [`subject_of`] its object path and version id.
    pub subject: u64,
    /// The entry's size in bytes (0 for a deferred match), for the forecast.
    pub bytes: u64,
}

impl PendingMatch {
    /// The pending form of a match built in full.
    pub fn of(m: &Match) -> PendingMatch {
        PendingMatch {
            rule_hash: m.rule_hash,
            kind: m.kind,
            due: m.due,
            subject: subject_of(&m.object_path, &m.version_id),
            bytes: u64::try_from(m.identity.size).unwrap_or(0),
        }
    }
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
/// match was pending; issue 9's scan rate,
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
    if let Some(b) = view.bucket(&bucket) {
        let at = At {
            buckets_root,
            bucket: &bucket,
            key: &key,
            shard,
        };
        route_actions_by(b.actions(), &view.time(), &at, ev, &mut found);
    }
    let skipped_no_mtime = view.bucket(&bucket).is_some() && no_mtime_subject(&key, ev);
    Some(Routed {
        bucket,
        key,
        shard,
        matches: found.matches,
        pending: found.pending,
        skipped_no_mtime,
    })
}

/// Whether the event's new entry is an object, version or upload (something
/// replay would evaluate) without a real mtime ([`mtime_known`]).
pub fn no_mtime_subject(key: &str, ev: &MetaEvent) -> bool {
    ev.new_entry
        .as_ref()
        .and_then(|e| classify(key, e))
        .is_some_and(|s| !mtime_known(s.entry()))
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

/// Where an event sits: what the routing core is told besides the event.
struct At<'a> {
    buckets_root: &'a str,
    bucket: &'a str,
    key: &'a str,
    shard: u8,
}

/// The routing core over one bucket's actions: the matches of an event at
/// `at` (`key` = physical key, `shard` its shard; `buckets_root` only names
/// the entries of deferred lookups). With `send_by`, matches due after it get
/// a light identity ([`route_for_pass`]).
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

fn route_actions_by(
    actions: &[CompiledAction],
    time: &TimeConfig,
    at: &At<'_>,
    ev: &MetaEvent,
    found: &mut Found,
) {
    let At {
        buckets_root,
        bucket,
        key,
        shard,
    } = *at;
    let Some(entry) = ev.new_entry.as_ref() else {
        return;
    };
    if entry.is_directory
        && let Some(logical) = versions_folder_logical(key)
    {
        let at = Pointer {
            buckets_root,
            bucket,
            logical,
            shard,
        };
        for m in route_pointer(actions, time, &at, ev.old_entry.as_deref(), entry, ev.ts_ns) {
            found.file(m);
        }
        return;
    }
    let routable = |kind: ActionKind| {
        actions
            .iter()
            .filter(move |a| a.is_active() && a.mode() == RuleMode::EventDriven && a.kind() == kind)
    };
    let Some(subject) = classify(key, entry) else {
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
            bucket: bucket.to_owned(),
            key: logical.to_owned(),
            object_path: object_path.to_owned(),
            version_id: version_id.to_owned(),
            rule_hash: a.rule_hash(),
            kind: a.kind(),
            due,
            identity: EntryIdentity::of(entry),
            shard,
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
}

/// The logical key of a `<logical>.versions` folder key; `None` for any
/// other key, a bucket-root `.versions` (no logical key) and reserved paths.
fn versions_folder_logical(key: &str) -> Option<&str> {
    if reserved_top(key) {
        return None;
    }
    let name = key.rsplit('/').next().unwrap_or(key);
    let tail = name.strip_suffix(keys::VERSIONS_SUFFIX)?;
    if tail.is_empty() {
        return None;
    }
    Some(&key[..key.len() - keys::VERSIONS_SUFFIX.len()])
}

/// A located `.versions` folder event.
struct Pointer<'a> {
    buckets_root: &'a str,
    bucket: &'a str,
    logical: &'a str,
    shard: u8,
}

impl Pointer<'_> {
    fn bucket_dir(&self) -> String {
        format!(
            "{}/{}",
            self.buckets_root.trim_end_matches('/'),
            self.bucket
        )
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
        format!(
            "{}/{}{}",
            self.bucket_dir(),
            self.logical,
            keys::VERSIONS_SUFFIX
        )
    }
}

/// `Seaweed-X-Amz-Latest-Version-Id` of a folder entry, if non-empty.
fn pointer_of(folder: &Entry) -> Option<&str> {
    ext_str(folder, keys::LATEST_VERSION_ID).filter(|id| !id.is_empty())
}

fn flag(folder: &Entry, key: &str) -> bool {
    ext_str(folder, key) == Some("true")
}

/// Deferred matches of a `.versions` folder write (module docs, "Deferred
/// lookups"): case A, a bare null version displaced by the new latest; case
/// B, an older version restored to latest.
fn route_pointer(
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
        num_versions: 0,
        noncurrent_since: None,
        noncurrent_index: None,
        tags: if rule.tags.is_empty() {
            BTreeMap::new()
        } else {
            filter::tags_of(entry)
        },
        is_mpu_init: false,
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
mod tests {
    use super::*;
    use crate::engine::versions::testkit::*;

    #[test]
    fn null_version_deleted_only_while_a_non_null_version_is_latest() {
        // Regression: a Suspended rewrite clears the pointer and sets
        // Null-Version-Is-Latest; the server would then treat the current
        // null as noncurrent and delete it.
        let folder = |pairs: &[(&str, &str)]| Entry {
            name: "k.versions".into(),
            is_directory: true,
            extended: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
            ..Default::default()
        };
        assert!(null_still_displaced(Some(&folder(&[(
            keys::LATEST_VERSION_ID,
            "abc"
        )]))));
        assert!(!null_still_displaced(None));
        assert!(!null_still_displaced(Some(&folder(&[(
            keys::NULL_VERSION_IS_LATEST,
            "true"
        )]))));
        assert!(!null_still_displaced(Some(&folder(&[(
            keys::LATEST_VERSION_ID,
            "null"
        )]))));
        assert!(!null_still_displaced(Some(&folder(&[
            (keys::LATEST_VERSION_ID, "abc"),
            (keys::NULL_VERSION_IS_LATEST, "true"),
        ]))));
        let lookup = DeferredLookup {
            directory: "/buckets/b/docs".into(),
            name: "k".into(),
            expect: Expect::NullVersion,
        };
        assert_eq!(
            lookup.folder(),
            Some(("/buckets/b/docs".into(), "k.versions".into()))
        );
        let v = DeferredLookup {
            expect: Expect::Version {
                version_id: "x".into(),
            },
            ..lookup
        };
        assert_eq!(v.folder(), None);
    }
    use crate::engine::{BucketConfig, Versioning};
    use crate::lifecycle::FlatRule;
    use crate::pb::filer_pb::EventNotification;

    const S: i64 = 1_000_000_000;
    const DAY: i64 = 86_400 * S;
    const ROOT: &str = "/buckets";
    const V1: &str = "67129c57f463efb319b449220aef50bb";
    const V2: &str = "67129c57c458226179466ab670c6e266";
    const DM: &str = "67129c575817aaaaaaaaaaaaaaaaaaaa";

    fn exact() -> TimeConfig {
        TimeConfig {
            rounding: crate::engine::DueRounding::None,
            ..TimeConfig::default()
        }
    }

    fn enabled(f: impl FnOnce(&mut FlatRule)) -> FlatRule {
        let mut r = FlatRule {
            enabled: true,
            ..FlatRule::default()
        };
        f(&mut r);
        r
    }

    /// Bucket `b` (versioned) with Days 10, NoncurrentDays 3, AbortMpu 2, and
    /// the walker kinds, which the router must ignore.
    fn snapshot() -> Snapshot {
        snapshot_with(vec![
            enabled(|r| r.expiration_days = 10),
            enabled(|r| r.noncurrent_days = 3),
            enabled(|r| r.abort_mpu_days = 2),
            enabled(|r| {
                r.expired_object_delete_marker = true;
                r.expiration_date = Some(time::macros::datetime!(2000-01-01 0:00 UTC));
                r.newer_noncurrent_versions = 1;
            }),
        ])
    }

    fn snapshot_with(rules: Vec<FlatRule>) -> Snapshot {
        Snapshot::compile(
            vec![BucketConfig {
                name: "b".into(),
                versioning: Versioning::Enabled,
                object_lock: false,
                rules,
            }],
            exact(),
        )
    }

    fn hash_of(snap: &Snapshot, kind: ActionKind) -> RuleHash {
        snap.actions()
            .find(|a| a.kind() == kind)
            .map(|a| a.rule_hash())
            .expect("kind in snapshot")
    }

    fn create(dir: &str, e: Entry) -> MetaEvent {
        MetaEvent {
            ts_ns: 1,
            directory: dir.into(),
            new_parent_path: dir.into(),
            old_entry: None,
            new_entry: Some(Box::new(e)),
        }
    }

    fn update(dir: &str, old: Entry, new: Entry) -> MetaEvent {
        MetaEvent {
            old_entry: Some(Box::new(old)),
            ..create(dir, new)
        }
    }

    fn delete(dir: &str, e: Entry) -> MetaEvent {
        MetaEvent {
            ts_ns: 1,
            directory: dir.into(),
            new_parent_path: String::new(),
            old_entry: Some(Box::new(e)),
            new_entry: None,
        }
    }

    fn run(snap: &Snapshot, ev: &MetaEvent) -> Routed {
        route(snap, ROOT, ev).expect("inside buckets root")
    }

    #[test]
    fn entries_without_mtime_route_nothing_and_are_flagged() {
        let snap = snapshot();
        let dated = [
            ("/buckets/b/docs", file("a.txt", 1000, 10)),
            ("/buckets/b/k.versions", version(V1, 1000, 1).stamped(5 * S)),
            (
                "/buckets/b/.uploads",
                dir("u1", 1000).with(keys::MPU_KEY, "k"),
            ),
        ];
        for (d, e) in dated {
            let r = run(&snap, &create(d, e.clone()));
            assert!(!r.matches.is_empty() && !r.skipped_no_mtime, "{d}");
            let mut zero = e.clone();
            let a = zero.attributes.as_mut().unwrap();
            a.mtime = 0;
            a.mtime_ns = 0;
            let mut go_zero = e.clone();
            go_zero.attributes.as_mut().unwrap().mtime = crate::engine::versions::GO_ZERO_TIME_UNIX;
            let mut bare = e;
            bare.attributes = None;
            for e in [zero, go_zero, bare] {
                let r = run(&snap, &create(d, e.clone()));
                assert!(r.matches.is_empty(), "{d}: {e:?}");
                assert!(r.skipped_no_mtime, "{d}: {e:?}");
            }
        }
        // A directory or a bucket outside the view is not counted.
        let mut d = dir("sub", 0);
        d.attributes = None;
        assert!(!run(&snap, &create("/buckets/b", d)).skipped_no_mtime);
        let mut f = file("a", 0, 1);
        f.attributes = None;
        assert!(!run(&snap, &create("/buckets/other", f)).skipped_no_mtime);
    }

    #[test]
    fn plain_put_expires_the_logical_key_with_empty_version() {
        let snap = snapshot();
        let e = file("a.txt", 1000, 10);
        let r = run(&snap, &create("/buckets/b/docs", e.clone()));
        assert_eq!((r.bucket.as_str(), r.key.as_str()), ("b", "docs/a.txt"));
        assert_eq!(r.shard, shard_id("b", "docs/a.txt"));
        assert_eq!(
            r.matches,
            vec![Match {
                bucket: "b".into(),
                key: "docs/a.txt".into(),
                object_path: "docs/a.txt".into(),
                version_id: String::new(),
                rule_hash: hash_of(&snap, ActionKind::ExpirationDays),
                kind: ActionKind::ExpirationDays,
                due: 1000 * S + 10 * DAY,
                identity: EntryIdentity::of(&e),
                shard: r.shard,
                lookup: None,
            }]
        );
    }

    #[test]
    fn overwrite_and_tag_update_yield_a_match_with_the_new_identity() {
        let snap = snapshot();
        let old = file("a", 1000, 10);
        let new = file("a", 2000, 20);
        let r = run(&snap, &update("/buckets/b", old, new.clone()));
        assert_eq!(r.matches.len(), 1);
        assert_eq!(r.matches[0].identity, EntryIdentity::of(&new));
        assert_eq!(r.matches[0].due, 2000 * S + 10 * DAY);
        // Tagging: mtime unchanged, Extended changed → identity changed.
        let tagged = new.clone().with("X-Amz-Tagging-env", "dev");
        let r = run(&snap, &update("/buckets/b", new.clone(), tagged.clone()));
        assert_eq!(r.matches[0].identity, EntryIdentity::of(&tagged));
        assert_ne!(r.matches[0].identity, EntryIdentity::of(&new));
        assert_eq!(r.matches[0].due, 2000 * S + 10 * DAY);
    }

    #[test]
    fn pass_routing_gives_full_matches_only_to_those_due_by_now() {
        let snap = snapshot();
        let entry = file("a", 1000, 10);
        let ev = create("/buckets/b", entry.clone());
        let plain = run(&snap, &ev);
        assert!(plain.pending.is_empty(), "route never defers to pending");
        let due = plain.matches[0].due;
        let full = EntryIdentity::of(&entry);
        assert!(!full.head_fid.is_empty() && !full.extended_hash.is_empty());
        // Due by now (exactly at, and after): sendable, the same match as
        // `route`'s, full identity included.
        for now in [due, due + DAY] {
            let r = route_for_pass(&snap, ROOT, &ev, now).unwrap();
            assert_eq!(r.matches, plain.matches, "now = due + {}", now - due);
            assert!(r.pending.is_empty());
        }
        // Due later: pending in this pass, with what the tracker needs.
        let r = route_for_pass(&snap, ROOT, &ev, due - 1).unwrap();
        assert!(r.matches.is_empty());
        assert_eq!(r.pending, vec![PendingMatch::of(&plain.matches[0])]);
        let p = r.pending[0];
        assert_eq!((p.due, p.bytes), (due, 10));
        assert_eq!(p.subject, subject_of("a", ""));
    }

    #[test]
    fn tag_filters_are_re_evaluated_on_the_new_state() {
        let snap = snapshot_with(vec![enabled(|r| {
            r.expiration_days = 1;
            r.tags = [("env".to_string(), "dev".to_string())].into();
        })]);
        let plain = file("a", 1000, 10);
        assert!(
            run(&snap, &create("/buckets/b", plain.clone()))
                .matches
                .is_empty()
        );
        let tagged = plain.clone().with("X-Amz-Tagging-env", "dev");
        assert_eq!(
            run(&snap, &update("/buckets/b", plain, tagged))
                .matches
                .len(),
            1
        );
    }

    #[test]
    fn versioned_put_expires_the_logical_key_not_the_version() {
        // Go routes nothing here, we do (docs/design-deviations.md#versioned-current-versions).
        let snap = snapshot();
        let v = version(V2, 1000, 4);
        let r = run(&snap, &create("/buckets/b/docs/k.versions", v.clone()));
        assert_eq!(r.key, format!("docs/k.versions/v_{V2}"));
        assert_eq!(r.shard, shard_id("b", &r.key));
        assert_eq!(r.matches.len(), 1);
        let m = &r.matches[0];
        assert_eq!(m.kind, ActionKind::ExpirationDays);
        assert_eq!(
            (
                m.key.as_str(),
                m.object_path.as_str(),
                m.version_id.as_str()
            ),
            ("docs/k", "docs/k", "")
        );
        assert_eq!(m.identity, EntryIdentity::of(&v));
        assert_eq!(m.shard, r.shard);
    }

    #[test]
    fn demotion_stamp_yields_noncurrent_days_for_that_version() {
        let snap = snapshot();
        let before = version(V1, 1000, 3);
        let stamped = before.clone().stamped(5000 * S + 7);
        let r = run(
            &snap,
            &update("/buckets/b/k.versions", before, stamped.clone()),
        );
        assert_eq!(r.matches.len(), 1);
        let m = &r.matches[0];
        assert_eq!(m.kind, ActionKind::NoncurrentDays);
        assert_eq!(m.rule_hash, hash_of(&snap, ActionKind::NoncurrentDays));
        assert_eq!((m.object_path.as_str(), m.version_id.as_str()), ("k", V1));
        assert_eq!(m.due, 5000 * S + 7 + 3 * DAY);
        assert_eq!(m.identity, EntryIdentity::of(&stamped));
    }

    #[test]
    fn delete_marker_create_routes_nothing_but_a_noncurrent_marker_does() {
        let snap = snapshot();
        let dm = marker(DM, 3000);
        assert!(
            run(&snap, &create("/buckets/b/k.versions", dm.clone()))
                .matches
                .is_empty()
        );
        let stamped = dm.clone().stamped(4000 * S);
        let r = run(&snap, &update("/buckets/b/k.versions", dm, stamped.clone()));
        assert_eq!(r.matches.len(), 1);
        assert_eq!(r.matches[0].kind, ActionKind::NoncurrentDays);
        assert_eq!(r.matches[0].version_id, DM);
        assert_eq!(r.matches[0].identity, EntryIdentity::of(&stamped));
    }

    #[test]
    fn suspended_null_version_current_then_noncurrent() {
        let snap = snapshot();
        let null = file("k", 1000, 5).with(keys::VERSION_ID, "null");
        let r = run(&snap, &create("/buckets/b", null.clone()));
        assert_eq!(r.matches.len(), 1);
        assert_eq!(r.matches[0].kind, ActionKind::ExpirationDays);
        assert_eq!(r.matches[0].version_id, "");
        let stamped = null.clone().stamped(2000 * S);
        let r = run(&snap, &update("/buckets/b", null, stamped.clone()));
        assert_eq!(r.matches.len(), 1);
        let m = &r.matches[0];
        assert_eq!(
            (m.kind, m.object_path.as_str(), m.version_id.as_str()),
            (ActionKind::NoncurrentDays, "k", "null")
        );
        assert_eq!(m.identity, EntryIdentity::of(&stamped));
    }

    #[test]
    fn mpu_init_aborts_on_the_upload_path_filtered_by_destination_key() {
        let snap = snapshot_with(vec![enabled(|r| {
            r.abort_mpu_days = 2;
            r.prefix = "mp/".into();
        })]);
        let id = "0123456789abcdef0123456789abcdef01234567_0123456789abcdef0123456789abcdef";
        let up = dir(id, 1000).with(keys::MPU_KEY, "mp/one.bin");
        let r = run(&snap, &create("/buckets/b/.uploads", up.clone()));
        let path = format!(".uploads/{id}");
        assert_eq!(r.key, path);
        assert_eq!(r.shard, shard_id("b", &path));
        assert_eq!(r.matches.len(), 1);
        let m = &r.matches[0];
        assert_eq!(m.kind, ActionKind::AbortMpu);
        assert_eq!(
            (
                m.key.as_str(),
                m.object_path.as_str(),
                m.version_id.as_str()
            ),
            ("mp/one.bin", path.as_str(), "")
        );
        assert_eq!(m.due, 1000 * S + 2 * DAY);
        assert_eq!(m.identity, EntryIdentity::of(&up));
        // Destination outside the prefix → nothing.
        let other = dir(id, 1000).with(keys::MPU_KEY, "x/one.bin");
        assert!(
            run(&snap, &create("/buckets/b/.uploads", other))
                .matches
                .is_empty()
        );
        // No destination key → not an MPU init.
        assert!(
            run(&snap, &create("/buckets/b/.uploads", dir(id, 1000)))
                .matches
                .is_empty()
        );
    }

    #[test]
    fn mpu_parts_uploads_dir_and_system_paths_are_skipped() {
        let snap = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        let part = file("0001_abc.part", 1000, 5);
        assert!(
            run(&snap, &create("/buckets/b/.uploads/xyz", part.clone()))
                .matches
                .is_empty()
        );
        assert!(
            run(&snap, &create("/buckets/b", dir(".uploads", 1000)))
                .matches
                .is_empty()
        );
        assert!(
            run(&snap, &create("/buckets/b/.system/x", part))
                .matches
                .is_empty()
        );
    }

    #[test]
    fn directories_folder_markers_and_versions_folders_are_skipped() {
        let snap = snapshot();
        let marker_dir = dir("folder", 1000).with(keys::ETAG, "d41d8cd98f00b204e9800998ecf8427e");
        assert!(
            run(&snap, &create("/buckets/b", marker_dir))
                .matches
                .is_empty()
        );
        assert!(
            run(&snap, &create("/buckets/b", dir("docs", 1000)))
                .matches
                .is_empty()
        );
        // Pointer update of the .versions folder.
        let r = run(
            &snap,
            &update("/buckets/b", folder("k", V1), folder("k", V2)),
        );
        assert_eq!(r.key, "k.versions");
        assert!(r.matches.is_empty());
    }

    #[test]
    fn files_in_versions_folders_without_a_version_id_are_skipped() {
        let snap = snapshot();
        assert!(
            run(&snap, &create("/buckets/b/k.versions", file("stray", 1, 1)))
                .matches
                .is_empty()
        );
        // Bucket-root `.versions` folder has no logical key.
        assert!(
            run(&snap, &create("/buckets/b/.versions", version(V1, 1, 1)))
                .matches
                .is_empty()
        );
    }

    #[test]
    fn bucket_level_events_and_deletes_route_nothing() {
        let snap = snapshot();
        let r = run(&snap, &update("/buckets", dir("b", 1), dir("b", 2)));
        assert_eq!((r.bucket.as_str(), r.key.as_str()), ("b", ""));
        assert_eq!(r.shard, shard_id("b", ""));
        assert!(r.matches.is_empty());
        let r = run(&snap, &delete("/buckets/b", file("a", 1, 1)));
        assert_eq!(r.key, "a");
        assert!(r.matches.is_empty());
        let r = run(&snap, &delete("/buckets/b/k.versions", version(V1, 1, 1)));
        assert!(r.matches.is_empty());
    }

    #[test]
    fn unknown_bucket_and_disabled_or_inactive_actions_route_nothing() {
        let snap = snapshot();
        assert!(
            run(&snap, &create("/buckets/other", file("a", 1, 1)))
                .matches
                .is_empty()
        );
        let off = snapshot_with(vec![FlatRule {
            enabled: false,
            expiration_days: 1,
            ..FlatRule::default()
        }]);
        assert!(
            run(&off, &create("/buckets/b", file("a", 1, 1)))
                .matches
                .is_empty()
        );
        let mut inactive = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        inactive.actions_mut().for_each(|a| a.set_active(false));
        assert!(
            run(&inactive, &create("/buckets/b", file("a", 1, 1)))
                .matches
                .is_empty()
        );
        let mut scan_only = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        scan_only
            .actions_mut()
            .for_each(|a| a.set_mode(RuleMode::ScanOnly));
        assert!(
            run(&scan_only, &create("/buckets/b", file("a", 1, 1)))
                .matches
                .is_empty()
        );
    }

    #[test]
    fn noncurrent_days_with_keep_count_is_left_to_the_walker() {
        let snap = snapshot_with(vec![enabled(|r| {
            r.noncurrent_days = 1;
            r.newer_noncurrent_versions = 2;
        })]);
        let stamped = version(V1, 1000, 3).stamped(2000 * S);
        assert!(
            run(
                &snap,
                &update("/buckets/b/k.versions", version(V1, 1000, 3), stamped)
            )
            .matches
            .is_empty()
        );
    }

    #[test]
    fn walker_kinds_are_never_routed() {
        let snap = snapshot_with(vec![enabled(|r| {
            r.expiration_date = Some(time::macros::datetime!(2000-01-01 0:00 UTC));
            r.expired_object_delete_marker = true;
            r.newer_noncurrent_versions = 1;
        })]);
        for ev in [
            create("/buckets/b", file("a", 1, 1)),
            create("/buckets/b/k.versions", marker(DM, 1)),
            create("/buckets/b/k.versions", version(V1, 1, 1).stamped(5)),
        ] {
            assert!(run(&snap, &ev).matches.is_empty());
        }
    }

    #[test]
    fn stale_stamp_on_a_restored_latest_only_yields_a_refusable_noncurrent_match() {
        // After its marker is deleted, V2 is latest again but keeps its
        // stamp; a tag update on it is routed as NoncurrentDays (server:
        // VERSION_IS_LATEST), never as ExpirationDays. Its expiration comes
        // from the deferred match of the pointer move (case B).
        let snap = snapshot();
        let v2 = version(V2, 1000, 3).stamped(2000 * S);
        let tagged = v2.clone().with("X-Amz-Tagging-a", "b");
        let r = run(&snap, &update("/buckets/b/k.versions", v2, tagged));
        let kinds: Vec<ActionKind> = r.matches.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, [ActionKind::NoncurrentDays]);
        assert_eq!(r.matches[0].version_id, V2);
    }

    #[test]
    fn locate_follows_the_filer_layout() {
        let ev = |dir: &str, parent: &str, name: &str| MetaEvent {
            directory: dir.into(),
            new_parent_path: parent.into(),
            new_entry: Some(Box::new(file(name, 1, 1))),
            ..MetaEvent::default()
        };
        let loc = |e: &MetaEvent| locate(ROOT, e);
        assert_eq!(loc(&ev("/buckets", "", "b")), Some(("b".into(), "".into())));
        assert_eq!(
            loc(&ev("/buckets/", "", "b")),
            Some(("b".into(), "".into()))
        );
        assert_eq!(
            loc(&ev("/buckets/b", "", "k")),
            Some(("b".into(), "k".into()))
        );
        assert_eq!(
            loc(&ev("/buckets/b/x/y", "", "k")),
            Some(("b".into(), "x/y/k".into()))
        );
        // new_parent_path wins (rename destination).
        assert_eq!(
            loc(&ev("/buckets/a", "/buckets/b/d", "k")),
            Some(("b".into(), "d/k".into()))
        );
        assert_eq!(loc(&ev("/etc/s3", "", "k")), None);
        assert_eq!(loc(&ev("/bucketsX/b", "", "k")), None);
        assert_eq!(loc(&ev("/buckets//x", "", "k")), None);
        assert_eq!(
            locate("/buckets/", &ev("/buckets/b", "", "k")),
            Some(("b".into(), "k".into()))
        );
        assert_eq!(loc(&ev("/buckets/b", "", "")), None);
    }

    #[test]
    fn from_response_skips_keepalives_and_flattens_batches() {
        let mut resp = SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: 7,
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(file("k", 1, 1))),
                new_parent_path: "/buckets/b".into(),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        let ev = MetaEvent::from_response(&resp).expect("event");
        assert_eq!((ev.ts_ns, ev.directory.as_str()), (7, "/buckets/b"));
        assert!(ev.old_entry.is_none());
        assert_eq!(
            MetaEvent::from_response(&SubscribeMetadataResponse::default()),
            None
        );
        let nameless = SubscribeMetadataResponse {
            event_notification: Some(EventNotification::default()),
            ..SubscribeMetadataResponse::default()
        };
        assert_eq!(MetaEvent::from_response(&nameless), None);
        let mut tail = resp.clone();
        tail.ts_ns = 8;
        resp.events = vec![tail, SubscribeMetadataResponse::default()];
        let all: Vec<i64> = MetaEvent::all_from_response(&resp)
            .iter()
            .map(|e| e.ts_ns)
            .collect();
        assert_eq!(all, [7, 8]);
    }

    #[test]
    fn from_owned_gives_the_same_event_as_from_response() {
        let resp = SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: 9,
            event_notification: Some(EventNotification {
                old_entry: Some(Box::new(file("a", 1, 1))),
                new_entry: Some(Box::new(file("k", 2, 3))),
                new_parent_path: "/buckets/b/d".into(),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        assert_eq!(
            MetaEvent::from_owned(resp.clone()),
            MetaEvent::from_response(&resp)
        );
        let nameless = SubscribeMetadataResponse {
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(Entry::default())),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        assert_eq!(MetaEvent::from_owned(nameless), None);
        assert_eq!(
            MetaEvent::from_owned(SubscribeMetadataResponse::default()),
            None
        );
    }

    // ---- deferred lookups -------------------------------------------------

    const TS: i64 = 7_000 * S + 123;

    fn pointer_event(dir: &str, old: Option<Entry>, new: Entry) -> MetaEvent {
        MetaEvent {
            ts_ns: TS,
            old_entry: old.map(Box::new),
            ..create(dir, new)
        }
    }

    /// `folder` with the cached mtime (seconds) of its latest.
    fn folder_at(logical: &str, latest: &str, mtime_s: i64) -> Entry {
        folder(logical, latest).with(keys::LATEST_VERSION_MTIME, &mtime_s.to_string())
    }

    fn null_latest_folder(logical: &str) -> Entry {
        dir(&format!("{logical}.versions"), 1).with(keys::NULL_VERSION_IS_LATEST, "true")
    }

    fn rule_of(snap: &Snapshot, kind: ActionKind) -> FlatRule {
        snap.actions()
            .find(|a| a.kind() == kind)
            .map(|a| FlatRule::clone(a.rule()))
            .expect("kind in snapshot")
    }

    #[test]
    fn displaced_null_after_null_is_latest_yields_a_deferred_noncurrent_match() {
        let snap = snapshot();
        let ev = pointer_event(
            "/buckets/b/docs",
            Some(null_latest_folder("k")),
            folder_at("k", V2, 7_000),
        );
        let r = run(&snap, &ev);
        assert_eq!(r.key, "docs/k.versions");
        assert_eq!(
            r.matches,
            vec![Match {
                bucket: "b".into(),
                key: "docs/k".into(),
                object_path: "docs/k".into(),
                version_id: "null".into(),
                rule_hash: hash_of(&snap, ActionKind::NoncurrentDays),
                kind: ActionKind::NoncurrentDays,
                due: TS + 3 * DAY,
                identity: EntryIdentity::default(),
                shard: shard_id("b", "docs/k.versions"),
                lookup: Some(DeferredLookup {
                    directory: "/buckets/b/docs".into(),
                    name: "k".into(),
                    expect: Expect::NullVersion,
                }),
            }]
        );
    }

    #[test]
    fn first_versioned_write_yields_a_deferred_null_lookup() {
        // Only a lookup tells whether a bare null sits beside the new folder.
        let snap = snapshot();
        for old in [Some(dir("k.versions", 1)), None] {
            let ev = pointer_event("/buckets/b", old.clone(), folder_at("k", V1, 7_000));
            let r = run(&snap, &ev);
            assert_eq!(r.matches.len(), 1, "old = {old:?}");
            let m = &r.matches[0];
            assert_eq!(
                (m.kind, m.version_id.as_str(), m.due),
                (ActionKind::NoncurrentDays, "null", TS + 3 * DAY)
            );
            let lookup = m.lookup.as_ref().expect("deferred");
            assert_eq!(
                (lookup.directory.as_str(), lookup.name.as_str()),
                ("/buckets/b", "k")
            );
        }
        // A trailing slash on the root does not double it.
        let r = route(
            &snap,
            "/buckets/",
            &pointer_event("/buckets/b/x/y", None, folder_at("k", V1, 7_000)),
        )
        .expect("inside root");
        let lookup = r.matches[0].lookup.as_ref().expect("deferred");
        assert_eq!(lookup.directory, "/buckets/b/x/y");
    }

    #[test]
    fn pointer_moves_without_a_displaced_null_or_restore_route_nothing() {
        let snap = snapshot();
        let cases = [
            // Forward move: a versioned PUT over a version (V2 is newer).
            (Some(folder_at("k", V1, 1)), folder_at("k", V2, 2)),
            // A delete marker becomes latest.
            (
                Some(folder_at("k", V2, 2)),
                folder_at("k", DM, 3).with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true"),
            ),
            // Touch (delete of a noncurrent version): pointer unchanged.
            (Some(folder_at("k", V2, 2)), folder_at("k", V2, 2)),
            // Suspended write: the pointer is cleared, null is latest.
            (Some(folder_at("k", V2, 2)), null_latest_folder("k")),
            // No pointer at all (the folder's creation).
            (None, dir("k.versions", 1)),
            // Suspended delete: `v_null` (a null marker) replaced the bare null.
            (
                Some(dir("k.versions", 1)),
                folder_at("k", "null", 3).with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true"),
            ),
        ];
        for (old, new) in cases {
            let r = run(
                &snap,
                &pointer_event("/buckets/b", old.clone(), new.clone()),
            );
            assert!(r.matches.is_empty(), "{old:?} -> {new:?}: {:?}", r.matches);
        }
    }

    #[test]
    fn restored_latest_yields_a_deferred_expiration_match() {
        let snap = snapshot();
        // The marker DM (newest) is deleted by id: the pointer moves back to V2.
        let old = folder_at("k", DM, 6_000).with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true");
        let ev = pointer_event("/buckets/b/docs", Some(old), folder_at("k", V2, 5_000));
        let r = run(&snap, &ev);
        assert_eq!(
            r.matches,
            vec![Match {
                bucket: "b".into(),
                key: "docs/k".into(),
                object_path: "docs/k".into(),
                version_id: String::new(),
                rule_hash: hash_of(&snap, ActionKind::ExpirationDays),
                kind: ActionKind::ExpirationDays,
                due: 5_000 * S + 10 * DAY,
                identity: EntryIdentity::default(),
                shard: shard_id("b", "docs/k.versions"),
                lookup: Some(DeferredLookup {
                    directory: "/buckets/b/docs/k.versions".into(),
                    name: format!("v_{V2}"),
                    expect: Expect::Version {
                        version_id: V2.into()
                    },
                }),
            }]
        );
        // Deleting the latest *version* V2 by id restores V1 the same way.
        let ev = pointer_event(
            "/buckets/b",
            Some(folder_at("k", V2, 5_000)),
            folder_at("k", V1, 4_000),
        );
        let r = run(&snap, &ev);
        assert_eq!(r.matches.len(), 1);
        assert_eq!(
            r.matches[0].lookup.as_ref().map(|l| &l.expect),
            Some(&Expect::Version {
                version_id: V1.into()
            })
        );
        // Without the cached mtime there is no due time: nothing.
        let ev = pointer_event(
            "/buckets/b",
            Some(folder_at("k", V2, 5_000)),
            folder("k", V1),
        );
        assert!(run(&snap, &ev).matches.is_empty());
        // Back to an older delete marker: ExpiredDeleteMarker is the walker's.
        let ev = pointer_event(
            "/buckets/b",
            Some(folder_at("k", V2, 5_000)),
            folder_at("k", V1, 4_000).with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true"),
        );
        assert!(run(&snap, &ev).matches.is_empty());
    }

    #[test]
    fn deferred_matches_need_a_matching_prefix_and_a_routable_action() {
        let prefixed = snapshot_with(vec![
            enabled(|r| {
                r.noncurrent_days = 3;
                r.prefix = "logs/".into();
            }),
            enabled(|r| {
                r.expiration_days = 10;
                r.prefix = "logs/".into();
            }),
        ]);
        let displaced = pointer_event("/buckets/b/docs", None, folder_at("k", V1, 1));
        let restored = pointer_event(
            "/buckets/b/docs",
            Some(folder_at("k", V2, 2)),
            folder_at("k", V1, 1),
        );
        for ev in [&displaced, &restored] {
            assert!(run(&prefixed, ev).matches.is_empty());
        }
        let logs = pointer_event("/buckets/b/logs", None, folder_at("k", V1, 1));
        assert_eq!(run(&prefixed, &logs).matches.len(), 1);
        // A counted NoncurrentDays is walker-bound, even deferred.
        let counted = snapshot_with(vec![enabled(|r| {
            r.noncurrent_days = 3;
            r.newer_noncurrent_versions = 2;
        })]);
        assert!(run(&counted, &displaced).matches.is_empty());
        // Only NoncurrentDays for case A, only ExpirationDays for case B.
        let exp_only = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        assert!(run(&exp_only, &displaced).matches.is_empty());
        let nc_only = snapshot_with(vec![enabled(|r| r.noncurrent_days = 1)]);
        assert!(run(&nc_only, &restored).matches.is_empty());
        // Size and tag filters need the entry: routed anyway, checked on resolve.
        let filtered = snapshot_with(vec![enabled(|r| {
            r.noncurrent_days = 3;
            r.size_gt = 100;
            r.tags = [("env".to_string(), "dev".to_string())].into();
        })]);
        assert_eq!(run(&filtered, &displaced).matches.len(), 1);
        // Inactive actions route nothing.
        let mut inactive = snapshot();
        inactive.actions_mut().for_each(|a| a.set_active(false));
        assert!(run(&inactive, &displaced).matches.is_empty());
        assert!(run(&inactive, &restored).matches.is_empty());
    }

    #[test]
    fn reserved_and_bucket_root_versions_folders_route_nothing() {
        let snap = snapshot();
        for (dir_path, new) in [
            ("/buckets/b", folder_at("", V1, 1)),
            ("/buckets/b/.uploads", folder_at("k", V1, 1)),
            ("/buckets/b/.system", folder_at("k", V1, 1)),
        ] {
            let r = run(&snap, &pointer_event(dir_path, None, new));
            assert!(r.matches.is_empty(), "{dir_path}");
        }
    }

    fn deferred_null(snap: &Snapshot) -> Match {
        let ev = pointer_event("/buckets/b/docs", None, folder_at("k", V1, 7_000));
        run(snap, &ev).matches.remove(0)
    }

    fn deferred_restore(snap: &Snapshot) -> Match {
        let ev = pointer_event(
            "/buckets/b",
            Some(folder_at("k", DM, 6_000).with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true")),
            folder_at("k", V2, 5_000),
        );
        run(snap, &ev).matches.remove(0)
    }

    #[test]
    fn a_deferred_match_due_later_is_pending_in_a_pass() {
        let snap = snapshot();
        let ev = pointer_event(
            "/buckets/b/docs",
            Some(null_latest_folder("k")),
            folder_at("k", V2, 7_000),
        );
        let plain = run(&snap, &ev);
        let m = plain.matches[0].clone();
        assert!(m.lookup.is_some());
        let r = route_for_pass(&snap, ROOT, &ev, m.due - 1).unwrap();
        assert!(r.matches.is_empty());
        assert_eq!(r.pending, vec![PendingMatch::of(&m)]);
        assert_eq!(r.pending[0].subject, subject_of("docs/k", "null"));
        let r = route_for_pass(&snap, ROOT, &ev, m.due).unwrap();
        assert_eq!(r.matches, plain.matches);
        assert!(r.pending.is_empty());
    }

    #[test]
    fn resolving_a_found_null_version_gives_a_concrete_match() {
        let snap = snapshot();
        let time = snap.time();
        let rule = rule_of(&snap, ActionKind::NoncurrentDays);
        let m = deferred_null(&snap);
        for bare in [
            // Pre-versioning object.
            file("k", 6_000, 5),
            // Suspended-era null.
            file("k", 6_000, 5).with(keys::VERSION_ID, "null"),
            // A null delete marker: noncurrent markers expire too (AWS).
            marker("null", 6_000).with(keys::VERSION_ID, "null"),
        ] {
            let mut bare = bare;
            bare.name = "k".into();
            let got = resolve_deferred(&m, Some(&bare), &time, &rule).expect("resolves");
            assert_eq!(
                got,
                Match {
                    identity: EntryIdentity::of(&bare),
                    lookup: None,
                    ..m.clone()
                }
            );
            assert_ne!(got.identity, EntryIdentity::default());
        }
    }

    #[test]
    fn resolving_a_missing_or_misshapen_null_version_gives_nothing() {
        let snap = snapshot();
        let time = snap.time();
        let rule = rule_of(&snap, ActionKind::NoncurrentDays);
        let m = deferred_null(&snap);
        assert_eq!(resolve_deferred(&m, None, &time, &rule), None);
        // An implicit parent directory is not a null version.
        assert_eq!(resolve_deferred(&m, Some(&dir("k", 1)), &time, &rule), None);
        // Another entry than the one named.
        assert_eq!(
            resolve_deferred(&m, Some(&file("other", 1, 5)), &time, &rule),
            None
        );
        // Written after the pointer moved: a new current null, not the
        // displaced one (a Suspended rewrite).
        let rewritten = file("k", 7_001, 5).with(keys::VERSION_ID, "null");
        assert_eq!(resolve_deferred(&m, Some(&rewritten), &time, &rule), None);
        // Written in the demotion's own second: still the displaced one.
        let same_second = file("k", 7_000, 5);
        assert!(resolve_deferred(&m, Some(&same_second), &time, &rule).is_some());
    }

    #[test]
    fn resolving_checks_the_rules_full_filter() {
        let snap = snapshot_with(vec![
            enabled(|r| {
                r.noncurrent_days = 3;
                r.size_gt = 100;
                r.tags = [("env".to_string(), "dev".to_string())].into();
            }),
            enabled(|r| {
                r.expiration_days = 10;
                r.size_lt = 100;
            }),
        ]);
        let time = snap.time();
        let nc = rule_of(&snap, ActionKind::NoncurrentDays);
        let m = deferred_null(&snap);
        let small = file("k", 1, 50).with("X-Amz-Tagging-env", "dev");
        let untagged = file("k", 1, 500);
        let fits = file("k", 1, 500).with("X-Amz-Tagging-env", "dev");
        assert_eq!(resolve_deferred(&m, Some(&small), &time, &nc), None);
        assert_eq!(resolve_deferred(&m, Some(&untagged), &time, &nc), None);
        let got = resolve_deferred(&m, Some(&fits), &time, &nc).expect("inside filter");
        assert_eq!(got.identity, EntryIdentity::of(&fits));

        let exp = rule_of(&snap, ActionKind::ExpirationDays);
        let m = deferred_restore(&snap);
        let big = version(V2, 5_000, 500).stamped(5_500 * S);
        assert_eq!(resolve_deferred(&m, Some(&big), &time, &exp), None);
        let ok = version(V2, 5_000, 5).stamped(5_500 * S);
        assert!(resolve_deferred(&m, Some(&ok), &time, &exp).is_some());
    }

    #[test]
    fn resolving_a_restored_version_checks_its_id_and_keeps_the_later_due() {
        let snap = snapshot();
        let time = snap.time();
        let rule = rule_of(&snap, ActionKind::ExpirationDays);
        let m = deferred_restore(&snap);
        // The restored version carries its stale stamp; that is expected.
        let v2 = version(V2, 5_000, 3).stamped(5_900 * S);
        let got = resolve_deferred(&m, Some(&v2), &time, &rule).expect("resolves");
        assert_eq!(
            got,
            Match {
                identity: EntryIdentity::of(&v2),
                lookup: None,
                ..m.clone()
            }
        );
        assert_eq!(got.due, 5_000 * S + 10 * DAY);
        // An entry mtime later than the folder's cached one wins.
        let later = version(V2, 5_400, 3);
        let got = resolve_deferred(&m, Some(&later), &time, &rule).expect("resolves");
        assert_eq!(got.due, 5_400 * S + 10 * DAY);
        // ... but never an earlier one.
        let earlier = version(V2, 4_000, 3);
        let got = resolve_deferred(&m, Some(&earlier), &time, &rule).expect("resolves");
        assert_eq!(got.due, m.due);
        // Not found, another version, a marker with that id, a directory.
        let mut other = version(V1, 5_000, 3);
        other.name = format!("v_{V2}");
        let mut as_dir = version(V2, 5_000, 3);
        as_dir.is_directory = true;
        for e in [None, Some(&other), Some(&marker(V2, 5_000)), Some(&as_dir)] {
            assert_eq!(resolve_deferred(&m, e, &time, &rule), None, "{e:?}");
        }
    }

    #[test]
    fn resolving_needs_a_deferred_match_and_its_own_rule() {
        let snap = snapshot();
        let time = snap.time();
        let nc = rule_of(&snap, ActionKind::NoncurrentDays);
        let exp = rule_of(&snap, ActionKind::ExpirationDays);
        let m = deferred_null(&snap);
        let bare = file("k", 1, 5);
        // The ExpirationDays rule is not the match's rule.
        assert_eq!(resolve_deferred(&m, Some(&bare), &time, &exp), None);
        // A concrete match is not resolved again.
        let concrete = Match {
            lookup: None,
            ..m.clone()
        };
        assert_eq!(resolve_deferred(&concrete, Some(&bare), &time, &nc), None);
        // An expectation that does not go with the kind.
        let mixed = Match {
            kind: ActionKind::ExpirationDays,
            ..m.clone()
        };
        assert_eq!(resolve_deferred(&mixed, Some(&bare), &time, &nc), None);
        // A disabled rule never fires.
        let off = FlatRule {
            enabled: false,
            ..nc.clone()
        };
        assert_eq!(resolve_deferred(&m, Some(&bare), &time, &off), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn arb_entry() -> impl Strategy<Value = Entry> {
            (
                "[a-z._/]{0,12}",
                any::<bool>(),
                any::<i64>(),
                any::<i32>(),
                any::<u64>(),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            Just(keys::VERSION_ID.to_string()),
                            Just(keys::NONCURRENT_SINCE_NS.to_string()),
                            Just(keys::DELETE_MARKER.to_string()),
                            Just(keys::MPU_KEY.to_string()),
                            Just("X-Amz-Tagging-env".to_string()),
                            "[A-Za-z-]{0,8}",
                        ],
                        proptest::collection::vec(any::<u8>(), 0..24),
                    ),
                    0..5,
                ),
            )
                .prop_map(|(name, is_dir, mtime, mtime_ns, size, ext)| {
                    let mut e = Entry {
                        name,
                        is_directory: is_dir,
                        attributes: Some(crate::pb::filer_pb::FuseAttributes {
                            mtime,
                            mtime_ns,
                            file_size: size,
                            ..Default::default()
                        }),
                        ..Entry::default()
                    };
                    e.extended = ext.into_iter().collect();
                    e
                })
        }

        proptest! {
            #[test]
            fn route_never_panics(
                dir in prop_oneof![
                    "(/buckets)?(/[a-z.]{0,6}){0,4}/?",
                    "/buckets/b(/(\\.uploads|[a-z]{1,3}\\.versions|[a-z.]{0,4})){0,3}",
                ],
                parent in prop_oneof![Just(String::new()), "(/buckets)?(/[a-z.]{0,6}){0,3}"],
                old in proptest::option::of(arb_entry()),
                new in proptest::option::of(arb_entry()),
                days in 0i64..i64::MAX,
            ) {
                let snap = Snapshot::compile(
                    vec![BucketConfig {
                        name: "b".into(),
                        versioning: Versioning::Enabled,
                        object_lock: false,
                        rules: vec![
                            enabled(|r| { r.expiration_days = days; }),
                            enabled(|r| { r.noncurrent_days = days; r.prefix = ".".into(); }),
                            enabled(|r| { r.abort_mpu_days = days; }),
                        ],
                    }],
                    TimeConfig::default(),
                );
                let ev = MetaEvent { ts_ns: 1, directory: dir, new_parent_path: parent, old_entry: old.map(Box::new), new_entry: new.map(Box::new) };
                if let Some(r) = route(&snap, ROOT, &ev) {
                    prop_assert!((r.shard as usize) < crate::engine::SHARD_COUNT);
                    for m in &r.matches {
                        prop_assert!(m.kind.is_replay_kind());
                        prop_assert!(!m.object_path.is_empty());
                        if let Some(l) = &m.lookup {
                            prop_assert_eq!(&m.identity, &EntryIdentity::default());
                            prop_assert!(l.directory.starts_with("/buckets/b"));
                            prop_assert!(!l.name.is_empty() && !l.name.contains('/'));
                        }
                    }
                }
            }

            #[test]
            fn pointer_moves_defer_only_the_two_cases(
                old in proptest::option::of((
                    proptest::option::of(prop_oneof![Just(V1), Just(V2), Just(DM), Just("null"), Just("")]),
                    any::<bool>(),
                )),
                new_id in proptest::option::of(prop_oneof![Just(V1), Just(V2), Just(DM), Just("null"), Just("a/b")]),
                new_null_latest in any::<bool>(),
                new_marker in any::<bool>(),
                mtime in proptest::option::of(-5i64..10_000),
            ) {
                let mk = |id: Option<&str>, null_latest: bool| {
                    let mut f = dir("k.versions", 1);
                    if let Some(id) = id {
                        f = f.with(keys::LATEST_VERSION_ID, id);
                    }
                    if null_latest {
                        f = f.with(keys::NULL_VERSION_IS_LATEST, "true");
                    }
                    f
                };
                let old_entry = old.map(|(id, nl)| mk(id, nl));
                let mut new = mk(new_id, new_null_latest);
                if new_marker {
                    new = new.with(keys::LATEST_VERSION_IS_DELETE_MARKER, "true");
                }
                if let Some(t) = mtime {
                    new = new.with(keys::LATEST_VERSION_MTIME, &t.to_string());
                }
                let ev = pointer_event("/buckets/b/d", old_entry.clone(), new);
                let r = run(&snapshot(), &ev);
                prop_assert!(r.matches.len() <= 1);
                let old_id = old.and_then(|(id, _)| id).filter(|id| !id.is_empty());
                let null_was_latest = old.is_some_and(|(_, nl)| nl);
                for m in &r.matches {
                    let l = m.lookup.as_ref().expect("folder events only defer");
                    let new_id = new_id.expect("a pointer is needed");
                    prop_assert!(!new_null_latest);
                    match &l.expect {
                        Expect::NullVersion => {
                            prop_assert!(old_id.is_none() || null_was_latest);
                            prop_assert_ne!(new_id, "null");
                            prop_assert_eq!(m.kind, ActionKind::NoncurrentDays);
                            prop_assert_eq!((l.directory.as_str(), l.name.as_str()), ("/buckets/b/d", "k"));
                        }
                        Expect::Version { version_id } => {
                            let old_id = old_id.expect("a restore needs an old pointer");
                            prop_assert!(!null_was_latest && !new_marker);
                            prop_assert_eq!(version_id.as_str(), new_id);
                            prop_assert_eq!(compare_version_ids(new_id, old_id), Ordering::Greater);
                            prop_assert_eq!(m.kind, ActionKind::ExpirationDays);
                            prop_assert!(mtime.is_some_and(|t| t > 0));
                        }
                    }
                }
            }
        }
    }
}
