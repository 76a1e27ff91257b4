//! Walker evaluation (pure): what the bucket lister hands over
//! ([`WalkItem`]) and which [`Match`]es an item yields at `now`
//! (docs/evaluation.md#walker). The listing itself is I/O and lives in `seaweed`.
//!
//! Differences from Go's walker, on purpose: every match carries the evaluated
//! entry's identity, and ExpirationDays/Date target the logical key with an
//! empty version id even on versioned buckets, so the server's CAS refuses
//! whatever changed since listing (docs/design-deviations.md#walker-identity);
//! directories and everything under `.uploads/` other than the upload
//! directories are never objects (docs/design-deviations.md#parts-are-not-objects).

use crate::engine::delete::valid_upload_id;
use crate::engine::evaluate::{ObjectInfo, due_at, fires};
use crate::engine::matches::Match;
use crate::engine::versions::{expand_versions, mtime_known, mtime_ns, size_of};
use crate::engine::{
    ActionKind, CompiledAction, EntryIdentity, Nanos, RuleMode, Snapshot, filter, keys, shard_id,
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
// Items are built and consumed one at a time by the lister, so the size
// difference between variants costs nothing; boxing would cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum WalkItem {
    /// A file in the bucket; `key` is its bucket-relative path.
    Object { key: String, entry: Entry },
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

    /// The item's listing position when it was not emitted out of a
    /// versioned key's folder: the object's key, `<key>.versions`, or
    /// `.uploads/<id>` (docs/design-deviations.md#resumable-recovery-walks).
    /// The lister reports the position it emitted an item at itself; this is
    /// for listings that do not (test doubles).
    pub fn position(&self) -> String {
        match self {
            WalkItem::Object { key, .. } => key.clone(),
            WalkItem::Versions { logical_key, .. } => {
                format!("{logical_key}{}", keys::VERSIONS_SUFFIX)
            }
            WalkItem::Upload { upload_id, .. } => format!("{}/{upload_id}", keys::UPLOADS_DIR),
        }
    }

    /// The walker shard of this item, `shard_id(bucket, match_key)`.
    pub fn shard(&self, bucket: &str) -> Option<u8> {
        self.match_key().map(|k| shard_id(bucket, k))
    }
    /// Every replay shard whose meta-log events can route a match of this
    /// item: the physical paths its events carry (the bare key, the
    /// `.versions` folder with its deferred lookups, each version file, or
    /// `.uploads/<id>`). A superset is harmless; a missing shard would let
    /// that shard vouch for a match no walk covered
    /// (docs/design-deviations.md#walk-coverage).
    pub fn replay_owners(&self, bucket: &str) -> std::collections::BTreeSet<u8> {
        match self {
            WalkItem::Object { key, .. } => [shard_id(bucket, key)].into(),
            WalkItem::Upload { .. } => [shard_id(bucket, &self.position())].into(),
            WalkItem::Versions {
                logical_key,
                versions,
                ..
            } => {
                let folder = self.position();
                let files = versions.iter().map(|v| format!("{folder}/{}", v.name));
                let mut out: std::collections::BTreeSet<u8> =
                    files.map(|path| shard_id(bucket, &path)).collect();
                out.extend([shard_id(bucket, logical_key), shard_id(bucket, &folder)]);
                out
            }
        }
    }
}

/// An upload directory's destination key (Extended `key`), if set.
pub(crate) fn upload_dest(entry: &Entry) -> Option<&str> {
    entry
        .extended
        .get(keys::MPU_KEY)
        .and_then(|v| std::str::from_utf8(v).ok())
        .filter(|d| !d.is_empty())
}

/// Matches of one item against `view`'s actions for `bucket` at `now`: every
/// active, non-Disabled action that [`fires`] for the item (or one of its
/// versions).
pub fn evaluate(view: &Snapshot, bucket: &str, item: &WalkItem, now: Nanos) -> Vec<Match> {
    let time = &view.time();
    let live: Vec<&CompiledAction> = view
        .bucket(bucket)
        .map(|b| b.actions())
        .unwrap_or_default()
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
            lookup: None,
        });
    };
    match item {
        WalkItem::Object { key, entry } => {
            if entry.is_directory || under_reserved(key) || !mtime_known(entry) {
                return Vec::new();
            }
            let info = ObjectInfo {
                mod_time: mtime_ns(entry),
                size: size_of(entry),
                is_latest: true,
                num_versions: 1,
                tags: filter::tags_of(entry),
                ..ObjectInfo::default()
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
                // docs/filer-layout.md#entries-without-attributes
                if !v.mtime_known {
                    continue;
                }
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
            if !entry.is_directory || !valid_upload_id(upload_id) || !mtime_known(entry) {
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

/// How many of the item's entries the walker skips for want of a real mtime
/// ([`mtime_known`]; docs/filer-layout.md#entries-without-attributes): the
/// object or upload itself, or each such version (the null version included).
pub fn no_mtime_entries(item: &WalkItem) -> u64 {
    let unknown = |e: &Entry| u64::from(!mtime_known(e));
    match item {
        WalkItem::Object { key, entry } => {
            u64::from(!entry.is_directory && !under_reserved(key) && !mtime_known(entry))
        }
        WalkItem::Versions {
            logical_key,
            versions,
            null_version,
            ..
        } => {
            if logical_key.is_empty() || under_reserved(logical_key) {
                0
            } else {
                versions
                    .iter()
                    .filter(|v| !crate::engine::versions::version_id_of(v).is_empty())
                    .chain(null_version.iter())
                    .map(unknown)
                    .sum()
            }
        }
        WalkItem::Upload { upload_id, entry } => {
            u64::from(entry.is_directory && valid_upload_id(upload_id) && !mtime_known(entry))
        }
    }
}

/// Keys under `.uploads/` (MPU parts) or `.system/`, first path segments
/// SeaweedFS's S3 gateway reserves inside a bucket, are not user objects.
pub(crate) fn under_reserved(key: &str) -> bool {
    let top = key.split('/').next().unwrap_or("");
    top == keys::UPLOADS_DIR || top == ".system"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::route::testkit::{DAY, DM, S, V1, V2, enabled, hash_of, snapshot_with};
    use crate::engine::versions::testkit::*;
    use crate::lifecycle::FlatRule;

    const V3: &str = "67129c57a000000000000000000000aa";

    fn summary(ms: &[Match]) -> Vec<(ActionKind, &str, &str)> {
        ms.iter()
            .map(|m| (m.kind, m.object_path.as_str(), m.version_id.as_str()))
            .collect()
    }

    fn versions(folder_entry: Entry, files: Vec<Entry>, null: Option<Entry>) -> WalkItem {
        WalkItem::Versions {
            logical_key: "k".into(),
            folder: folder_entry,
            versions: files,
            null_version: null,
        }
    }

    #[test]
    fn expiration_days_on_an_object_by_age() {
        let s = snapshot_with(vec![enabled(|r| r.expiration_days = 2)]);
        let e = file("a", 1000, 5);
        let item = WalkItem::Object {
            key: "d/a".into(),
            entry: e.clone(),
        };
        assert!(evaluate(&s, "b", &item, 1000 * S + 2 * DAY - 1).is_empty());
        let ms = evaluate(&s, "b", &item, 1000 * S + 2 * DAY);
        assert_eq!(
            ms,
            vec![Match {
                bucket: "b".into(),
                key: "d/a".into(),
                object_path: "d/a".into(),
                version_id: String::new(),
                rule_hash: hash_of(&s, ActionKind::ExpirationDays),
                kind: ActionKind::ExpirationDays,
                due: 1000 * S + 2 * DAY,
                identity: EntryIdentity::of(&e),
                shard: shard_id("b", "d/a"),
                lookup: None,
            }]
        );
        assert_eq!(item.shard("b"), Some(shard_id("b", "d/a")));
    }

    #[test]
    fn expiration_date_fires_once_the_date_passes() {
        let s = snapshot_with(vec![enabled(|r| {
            r.expiration_date = Some(time::macros::datetime!(2026-01-01 0:00 UTC));
        })]);
        let date = 1_767_225_600 * S;
        let item = WalkItem::Object {
            key: "a".into(),
            entry: file("a", 1000, 5),
        };
        assert!(evaluate(&s, "b", &item, date - 1).is_empty());
        assert_eq!(
            summary(&evaluate(&s, "b", &item, date)),
            [(ActionKind::ExpirationDate, "a", "")]
        );
    }

    #[test]
    fn directories_and_mpu_parts_are_not_objects() {
        let s = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        let late = 10_000 * DAY;
        let folder_marker = WalkItem::Object {
            key: "dir".into(),
            entry: dir("dir", 1).with(keys::ETAG, "d41d8cd98f00b204e9800998ecf8427e"),
        };
        assert!(evaluate(&s, "b", &folder_marker, late).is_empty());
        let part = WalkItem::Object {
            key: ".uploads/id/0001.part".into(),
            entry: file("0001.part", 1, 1),
        };
        assert!(evaluate(&s, "b", &part, late).is_empty());
    }

    #[test]
    fn versioned_latest_expires_via_logical_key_and_empty_version_id() {
        let s = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        let files = vec![version(V1, 100, 1).stamped(200 * S), version(V2, 200, 2)];
        let item = versions(folder("k", V2), files.clone(), None);
        let ms = evaluate(&s, "b", &item, 200 * S + DAY);
        assert_eq!(summary(&ms), [(ActionKind::ExpirationDays, "k", "")]);
        assert_eq!(ms[0].identity, EntryIdentity::of(&files[1]));
        assert_eq!(ms[0].shard, shard_id("b", "k"));
    }

    #[test]
    fn noncurrent_days_by_age_since_demotion() {
        let s = snapshot_with(vec![enabled(|r| r.noncurrent_days = 3)]);
        let files = vec![version(V1, 100, 1).stamped(500 * S), version(V2, 200, 2)];
        let item = versions(folder("k", V2), files.clone(), None);
        assert!(evaluate(&s, "b", &item, 500 * S + 3 * DAY - 1).is_empty());
        let ms = evaluate(&s, "b", &item, 500 * S + 3 * DAY);
        assert_eq!(summary(&ms), [(ActionKind::NoncurrentDays, "k", V1)]);
        assert_eq!(ms[0].identity, EntryIdentity::of(&files[0]));
        assert_eq!(ms[0].due, 500 * S + 3 * DAY);
    }

    #[test]
    fn newer_noncurrent_keeps_the_n_newest_noncurrent_versions() {
        let s = snapshot_with(vec![enabled(|r| r.newer_noncurrent_versions = 1)]);
        // Newest first: V3 (latest), V2, V1, DM-less; keep 1 → V1 goes.
        let files = vec![
            version(V1, 100, 1),
            version(V2, 200, 2),
            version(V3, 300, 3),
        ];
        let item = versions(folder("k", V3), files, None);
        let ms = evaluate(&s, "b", &item, 0);
        assert_eq!(summary(&ms), [(ActionKind::NewerNoncurrent, "k", V1)]);
        // The old bare null is the oldest noncurrent too.
        let item = versions(
            folder("k", V3),
            vec![
                version(V1, 100, 1),
                version(V2, 200, 2),
                version(V3, 300, 3),
            ],
            Some(file("k", 50, 9)),
        );
        let ms = evaluate(&s, "b", &item, 0);
        assert_eq!(
            summary(&ms),
            [
                (ActionKind::NewerNoncurrent, "k", V1),
                (ActionKind::NewerNoncurrent, "k", "null")
            ]
        );
    }

    #[test]
    fn noncurrent_days_with_keep_count_spares_the_newest() {
        let s = snapshot_with(vec![enabled(|r| {
            r.noncurrent_days = 1;
            r.newer_noncurrent_versions = 1;
        })]);
        let files = vec![
            version(V1, 100, 1),
            version(V2, 200, 2),
            version(V3, 300, 3),
        ];
        let ms = evaluate(&s, "b", &versions(folder("k", V3), files, None), 10 * DAY);
        assert_eq!(summary(&ms), [(ActionKind::NoncurrentDays, "k", V1)]);
    }

    #[test]
    fn expired_delete_marker_only_when_the_marker_is_the_sole_survivor() {
        let s = snapshot_with(vec![enabled(|r| r.expired_object_delete_marker = true)]);
        let dm = marker(DM, 300);
        let alone = versions(folder("k", DM), vec![dm.clone()], None);
        let ms = evaluate(&s, "b", &alone, 0);
        assert_eq!(summary(&ms), [(ActionKind::ExpiredDeleteMarker, "k", DM)]);
        assert_eq!(ms[0].identity, EntryIdentity::of(&dm));
        // A null sibling keeps the marker.
        let with_null = versions(folder("k", DM), vec![dm.clone()], Some(file("k", 50, 1)));
        assert!(evaluate(&s, "b", &with_null, 0).is_empty());
        // So does any other version.
        let with_version = versions(folder("k", DM), vec![dm, version(V1, 100, 1)], None);
        assert!(evaluate(&s, "b", &with_version, 0).is_empty());
    }

    /// The three spellings of "no mtime" (docs/filer-layout.md#entries-without-attributes).
    fn without_mtime(mut e: Entry) -> [Entry; 3] {
        let mut zero = e.clone();
        let a = zero.attributes.as_mut().unwrap();
        a.mtime = 0;
        a.mtime_ns = 0;
        let mut go_zero = e.clone();
        go_zero.attributes.as_mut().unwrap().mtime = crate::engine::versions::GO_ZERO_TIME_UNIX;
        e.attributes = None;
        [e, zero, go_zero]
    }

    #[test]
    fn entries_without_mtime_are_skipped_and_counted_never_matched() {
        let s = snapshot_with(vec![enabled(|r| {
            r.expiration_days = 1;
            r.noncurrent_days = 1;
            r.abort_mpu_days = 1;
        })]);
        let late = i64::MAX;
        for e in without_mtime(file("a", 1000, 5)) {
            let item = WalkItem::Object {
                key: "a".into(),
                entry: e,
            };
            assert!(evaluate(&s, "b", &item, late).is_empty(), "{item:?}");
            assert_eq!(no_mtime_entries(&item), 1);
        }
        for e in without_mtime(dir("u1", 1000).with(keys::MPU_KEY, "x")) {
            let item = WalkItem::Upload {
                upload_id: "u1".into(),
                entry: e,
            };
            assert!(evaluate(&s, "b", &item, late).is_empty(), "{item:?}");
            assert_eq!(no_mtime_entries(&item), 1);
        }
        // A version without mtime is skipped; its dated sibling still expires.
        for e in without_mtime(version(V2, 1000, 1).stamped(2000 * S)) {
            let item = versions(folder("k", V1), vec![version(V1, 3000, 1), e], None);
            let ms = evaluate(&s, "b", &item, late);
            assert_eq!(summary(&ms), [(ActionKind::ExpirationDays, "k", "")]);
            assert_eq!(no_mtime_entries(&item), 1);
        }
        // Dated entries count nothing.
        let item = WalkItem::Object {
            key: "a".into(),
            entry: file("a", 1000, 5),
        };
        assert_eq!(no_mtime_entries(&item), 0);
        assert_eq!(evaluate(&s, "b", &item, late).len(), 1);
    }

    #[test]
    fn abort_mpu_targets_the_upload_path_and_filters_on_the_destination() {
        let s = snapshot_with(vec![enabled(|r| {
            r.abort_mpu_days = 1;
            r.prefix = "mp/".into();
        })]);
        let up = dir("u1", 1000).with(keys::MPU_KEY, "mp/x");
        let item = WalkItem::Upload {
            upload_id: "u1".into(),
            entry: up.clone(),
        };
        assert_eq!(item.shard("b"), Some(shard_id("b", "mp/x")));
        assert!(evaluate(&s, "b", &item, 1000 * S + DAY - 1).is_empty());
        let ms = evaluate(&s, "b", &item, 1000 * S + DAY);
        assert_eq!(summary(&ms), [(ActionKind::AbortMpu, ".uploads/u1", "")]);
        assert_eq!(ms[0].key, "mp/x");
        assert_eq!(ms[0].shard, shard_id("b", "mp/x"));
        let elsewhere = WalkItem::Upload {
            upload_id: "u1".into(),
            entry: dir("u1", 1000).with(keys::MPU_KEY, "other/x"),
        };
        assert!(evaluate(&s, "b", &elsewhere, i64::MAX).is_empty());
        for bad in ["", ".", "..", "a/b"] {
            let item = WalkItem::Upload {
                upload_id: bad.into(),
                entry: up.clone(),
            };
            assert!(evaluate(&s, "b", &item, i64::MAX).is_empty(), "{bad:?}");
        }
        let keyless = WalkItem::Upload {
            upload_id: "u1".into(),
            entry: dir("u1", 1000),
        };
        assert_eq!(keyless.shard("b"), None);
        assert!(evaluate(&s, "b", &keyless, i64::MAX).is_empty());
    }

    #[test]
    fn disabled_and_inactive_actions_do_not_fire_but_scan_only_does() {
        let late = 10_000 * DAY;
        let item = WalkItem::Object {
            key: "a".into(),
            entry: file("a", 1, 1),
        };
        let off = snapshot_with(vec![FlatRule {
            expiration_days: 1,
            ..FlatRule::default()
        }]);
        assert!(evaluate(&off, "b", &item, late).is_empty());
        let mut inactive = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        inactive.actions_mut().for_each(|a| a.set_active(false));
        assert!(evaluate(&inactive, "b", &item, late).is_empty());
        let mut scan_only = snapshot_with(vec![enabled(|r| r.expiration_days = 1)]);
        scan_only
            .actions_mut()
            .for_each(|a| a.set_mode(RuleMode::ScanOnly));
        assert_eq!(evaluate(&scan_only, "b", &item, late).len(), 1);
        assert!(evaluate(&scan_only, "other", &item, late).is_empty());
    }

    #[test]
    fn one_item_can_match_several_rules_and_versions() {
        let s = snapshot_with(vec![
            enabled(|r| r.expiration_days = 1),
            enabled(|r| r.noncurrent_days = 1),
        ]);
        let files = vec![
            version(V1, 100, 1),
            version(V2, 200, 2),
            version(V3, 300, 3),
        ];
        let ms = evaluate(&s, "b", &versions(folder("k", V3), files, None), 10 * DAY);
        assert_eq!(
            summary(&ms),
            [
                (ActionKind::ExpirationDays, "k", ""),
                (ActionKind::NoncurrentDays, "k", V2),
                (ActionKind::NoncurrentDays, "k", V1),
            ]
        );
    }
}
