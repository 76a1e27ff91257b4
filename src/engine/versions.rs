//! Versioned-key helpers (pure): reading version facts off filer entries,
//! version-id ordering, null-version detection, and expansion of a key's
//! `.versions` folder into one [`VersionedObject`] per version
//! (docs/filer-layout.md#versioned-keys, docs/evaluation.md#walker).
//!
//! Which version is current is decided from the folder's pointer
//! (`Seaweed-X-Amz-Latest-Version-Id`, or `Seaweed-X-Amz-Null-Version-Is-Latest`),
//! never from a `Noncurrent-Since-Ns` stamp: deleting a delete marker restores
//! the previous version as latest but leaves its stale stamp in place
//! (docs/filer-layout.md#noncurrent-stamp).

use std::cmp::{Ordering, Reverse};

pub use crate::engine::identity::{mtime_ns, size_of};
use crate::engine::{EntryIdentity, Nanos, evaluate::ObjectInfo, filter, keys};
use crate::pb::filer_pb::Entry;

/// An Extended value as text, if present and valid UTF-8.
pub fn ext_str<'a>(entry: &'a Entry, key: &str) -> Option<&'a str> {
    entry
        .extended
        .get(key)
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// Go's zero `time.Time` in Unix seconds (0001-01-01T00:00:00Z): the mtime a
/// SeaweedFS 4.48 filer stores for an entry created without attributes
/// (docs/filer-layout.md#entries-without-attributes).
pub const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Whether the entry carries a real mtime. Absent attributes, an mtime of 0
/// and Go's zero time all mean "never stamped": such an entry would look
/// epoch-old and due under every age rule, so replay and the walker skip it
/// (and count it) rather than delete it
/// (docs/filer-layout.md#entries-without-attributes).
pub fn mtime_known(entry: &Entry) -> bool {
    entry
        .attributes
        .as_ref()
        .is_some_and(|a| !(a.mtime == 0 && a.mtime_ns == 0) && a.mtime != GO_ZERO_TIME_UNIX)
}

/// The entry's `Seaweed-X-Amz-Version-Id`, empty when absent.
pub fn version_id_of(entry: &Entry) -> &str {
    ext_str(entry, keys::VERSION_ID).unwrap_or("")
}

/// `Seaweed-X-Amz-Delete-Marker` is exactly `true`.
pub fn is_delete_marker(entry: &Entry) -> bool {
    ext_str(entry, keys::DELETE_MARKER) == Some("true")
}

/// The demotion stamp `Seaweed-X-Amz-Noncurrent-Since-Ns`; missing, empty,
/// unparsable or ≤ 0 is "no stamp".
pub fn noncurrent_since_of(entry: &Entry) -> Option<Nanos> {
    ext_str(entry, keys::NONCURRENT_SINCE_NS)
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|t| *t > 0)
}

/// Whether a bare entry `B/<bucket>/<key>` counts as the key's null version
/// (docs/filer-layout.md#null-version): a regular file, or a directory that is an S3 "directory
/// key object" (non-empty mime, chunks, inline content or remote data). A
/// plain directory (an implicit parent) does not count.
pub fn is_null_version(entry: &Entry) -> bool {
    !entry.is_directory
        || entry
            .attributes
            .as_ref()
            .is_some_and(|a| !a.mime.is_empty())
        || !entry.chunks.is_empty()
        || !entry.content.is_empty()
        || entry.remote_entry.is_some()
}

/// The bare entry was written as an explicit null version (Suspended-bucket
/// write: Extended version id `null`), as opposed to a pre-versioning object.
pub fn is_explicit_null(entry: &Entry) -> bool {
    version_id_of(entry) == keys::NULL_VERSION
}

/// A version id is "new format" when its first 16 characters are a hex u64
/// above `0x4000000000000000` (an inverted timestamp, `i64::MAX − ns`).
fn parse_format(id: &str) -> Option<(bool, i64)> {
    if id.len() < 16 || id == keys::NULL_VERSION {
        return None;
    }
    let head = id.get(..16)?;
    let v = u64::from_str_radix(head, 16).ok()?;
    if v > 0x4000_0000_0000_0000 {
        // v ≤ u64::MAX; i64::MAX − v may be negative for v > i64::MAX.
        Some((
            true,
            (i64::MAX as i128 - v as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        ))
    } else {
        // Below the threshold, so it fits an i64.
        Some((false, v as i64))
    }
}

/// Tie-breaking part of the sort key: new-format ids newest-first is
/// lexicographically ascending, old-format ids is descending.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Tie<'a> {
    New(&'a str),
    Old(Reverse<&'a str>),
}

/// Total sort key for "newest first": null last, then by embedded timestamp
/// (descending), then by format and the format's own lexical order.
fn version_key(id: &str) -> (bool, Reverse<i64>, Tie<'_>) {
    if id == keys::NULL_VERSION {
        return (true, Reverse(0), Tie::Old(Reverse(id)));
    }
    match parse_format(id) {
        Some((true, ts)) => (false, Reverse(ts), Tie::New(id)),
        Some((false, ts)) => (false, Reverse(ts), Tie::Old(Reverse(id))),
        // Unparsable ids are "old format" with timestamp 0, as in SeaweedFS.
        None => (false, Reverse(0), Tie::Old(Reverse(id))),
    }
}

/// Orders version ids newest first (`Less` = `a` is newer), like SeaweedFS's
/// `compareVersionIds`: `null` after everything; two new-format ids
/// lexicographically ascending; two old-format ids descending; mixed formats
/// by their embedded timestamps.
///
/// Deviation: where SeaweedFS answers "equal" for two *different* ids of
/// mixed format with the same timestamp, this puts the new-format id first,
/// so the order is total and safe to sort with.
pub fn compare_version_ids(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    version_key(a).cmp(&version_key(b))
}

/// One version of a key, as produced by [`expand_versions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedObject {
    /// Version id; `null` for the null version.
    pub version_id: String,
    /// Evaluation facts (logical key's version).
    pub info: ObjectInfo,
    /// CAS witness of this version's entry.
    pub identity: EntryIdentity,
    /// This is the bare null-version entry, not a file in `.versions`.
    pub is_bare_null: bool,
    /// The entry has a real mtime ([`mtime_known`]); the walker skips the
    /// version otherwise.
    pub mtime_known: bool,
}

/// Expands `<logical_key>.versions` into its versions, newest first (mtime
/// ns descending, ties by [`compare_version_ids`]).
///
/// - Versions are the `version_files` with a non-empty version id, plus the
///   bare `null_version` if given (the caller decides with
///   [`is_null_version`]).
/// - Latest: the null version when the folder says
///   `Null-Version-Is-Latest: true`; else the version named by the folder's
///   `Latest-Version-Id`; when that is missing or names no listed version,
///   an explicit null version if any, else the newest.
/// - Every version gets `num_versions` = sibling count (null included);
///   non-latest versions get `noncurrent_index` (0 = newest noncurrent) and
///   `noncurrent_since` = their stamp, else the mtime of the next-newer
///   sibling (none for the newest).
///
/// Returns an empty vector when there are no versions at all. The logical
/// key is not used for evaluation here; it is in the signature so callers
/// cannot mix up folders and keys.
pub fn expand_versions(
    logical_key: &str,
    folder: &Entry,
    version_files: &[Entry],
    null_version: Option<&Entry>,
) -> Vec<VersionedObject> {
    let _ = logical_key;
    // (entry, id, is_bare_null)
    let mut siblings: Vec<(&Entry, &str, bool)> = version_files
        .iter()
        .filter_map(|e| {
            let id = version_id_of(e);
            (!id.is_empty()).then_some((e, id, false))
        })
        .collect();
    if let Some(n) = null_version {
        siblings.push((n, keys::NULL_VERSION, true));
    }
    if siblings.is_empty() {
        return Vec::new();
    }
    siblings.sort_by(|a, b| {
        mtime_ns(b.0)
            .cmp(&mtime_ns(a.0))
            .then_with(|| compare_version_ids(a.1, b.1))
    });

    let null_pos = siblings.iter().position(|s| s.2);
    let pointer_pos = if ext_str(folder, keys::NULL_VERSION_IS_LATEST) == Some("true") {
        null_pos
    } else {
        ext_str(folder, keys::LATEST_VERSION_ID)
            .filter(|id| !id.is_empty())
            .and_then(|id| siblings.iter().position(|s| s.1 == id))
    };
    let explicit_null_pos = null_pos.filter(|&i| is_explicit_null(siblings[i].0));
    let latest = pointer_pos.or(explicit_null_pos).unwrap_or(0);

    let count = siblings.len();
    siblings
        .iter()
        .enumerate()
        .map(|(i, &(entry, id, bare))| {
            let is_latest = i == latest;
            let noncurrent_since = if is_latest {
                None
            } else {
                noncurrent_since_of(entry)
                    .or_else(|| i.checked_sub(1).map(|p| mtime_ns(siblings[p].0)))
            };
            let noncurrent_index = match i.cmp(&latest) {
                Ordering::Equal => None,
                Ordering::Less => Some(i),
                Ordering::Greater => Some(i - 1),
            };
            VersionedObject {
                version_id: id.to_owned(),
                info: ObjectInfo {
                    mod_time: mtime_ns(entry),
                    size: size_of(entry),
                    is_latest,
                    is_delete_marker: is_delete_marker(entry),
                    num_versions: count,
                    noncurrent_since,
                    noncurrent_index,
                    tags: filter::tags_of(entry),
                    is_mpu_init: false,
                },
                identity: EntryIdentity::of(entry),
                is_bare_null: bare,
                mtime_known: mtime_known(entry),
            }
        })
        .collect()
}

/// Hand-built filer entries shaped like the ones SeaweedFS 4.48 writes
/// (docs/meta-log.md#per-operation), shared by the engine's unit tests.
#[cfg(test)]
pub(crate) mod testkit {
    use crate::engine::keys;
    use crate::pb::filer_pb::{Entry, FileChunk, FileId, FuseAttributes};

    /// A file entry: `mtime` whole seconds (as S3 writes them), one chunk.
    pub fn file(name: &str, mtime_s: i64, size: u64) -> Entry {
        Entry {
            name: name.into(),
            chunks: vec![FileChunk {
                fid: Some(FileId {
                    volume_id: 7,
                    file_key: mtime_s as u64 & 0xffff,
                    cookie: 0x55dc_63ec,
                }),
                size,
                ..FileChunk::default()
            }],
            attributes: Some(FuseAttributes {
                file_size: size,
                mtime: mtime_s,
                file_mode: 0o660,
                ..FuseAttributes::default()
            }),
            ..Entry::default()
        }
        .with(keys::ETAG, "9f5b6d9a034d175868bf593885b7dc4e")
    }

    /// A directory entry.
    pub fn dir(name: &str, mtime_s: i64) -> Entry {
        Entry {
            name: name.into(),
            is_directory: true,
            attributes: Some(FuseAttributes {
                mtime: mtime_s,
                file_mode: 0x8000_0000 | 0o777,
                ..FuseAttributes::default()
            }),
            ..Entry::default()
        }
    }

    /// A version file `v_<id>`.
    pub fn version(id: &str, mtime_s: i64, size: u64) -> Entry {
        file(&format!("v_{id}"), mtime_s, size).with(keys::VERSION_ID, id)
    }

    /// A delete marker `v_<id>`: size 0, no chunks.
    pub fn marker(id: &str, mtime_s: i64) -> Entry {
        let mut e = Entry {
            name: format!("v_{id}"),
            attributes: Some(FuseAttributes {
                mtime: mtime_s,
                file_mode: 0o770,
                ..FuseAttributes::default()
            }),
            ..Entry::default()
        };
        e = e.with(keys::VERSION_ID, id);
        e.with(keys::DELETE_MARKER, "true")
    }

    /// A `.versions` folder pointing at `latest`.
    pub fn folder(logical: &str, latest: &str) -> Entry {
        dir(&format!("{logical}.versions"), 1)
            .with(keys::LATEST_VERSION_ID, latest)
            .with(keys::LATEST_VERSION_FILE_NAME, &format!("v_{latest}"))
    }

    /// Builder-style Extended edits.
    pub trait With {
        /// Sets an Extended key.
        fn with(self, key: &str, value: &str) -> Self;
        /// Sets the demotion stamp.
        fn stamped(self, ns: i64) -> Self;
    }

    impl With for Entry {
        fn with(mut self, key: &str, value: &str) -> Self {
            self.extended.insert(key.into(), value.as_bytes().to_vec());
            self
        }
        fn stamped(self, ns: i64) -> Self {
            self.with(keys::NONCURRENT_SINCE_NS, &ns.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    const S: i64 = 1_000_000_000;
    // New-format ids: inverted timestamps, newer sorts first.
    const V1: &str = "67129c57f463efb319b449220aef50bb";
    const V2: &str = "67129c57c458226179466ab670c6e266";
    const DM: &str = "67129c575817aaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn version_ids_order_newest_first() {
        assert_eq!(compare_version_ids(V2, V1), Ordering::Less);
        assert_eq!(compare_version_ids(DM, V2), Ordering::Less);
        assert_eq!(compare_version_ids(V1, V1), Ordering::Equal);
        // null sorts after everything, including unparsable ids.
        assert_eq!(compare_version_ids("null", V1), Ordering::Greater);
        assert_eq!(compare_version_ids("x", "null"), Ordering::Less);
        // Old format: raw timestamps, larger is newer.
        let old_a = "17a0000000000000aaaaaaaaaaaaaaaa";
        let old_b = "17b0000000000000aaaaaaaaaaaaaaaa";
        assert_eq!(compare_version_ids(old_b, old_a), Ordering::Less);
        // Mixed: by embedded timestamp. 0x17b… ns ≈ 1.7e18 (2023); V1 is
        // i64::MAX − 0x67129c57f463efb3 ≈ 1.79e18 (2026): V1 is newer.
        assert_eq!(compare_version_ids(V1, old_b), Ordering::Less);
        assert_eq!(compare_version_ids(old_b, V1), Ordering::Greater);
    }

    #[test]
    fn version_id_order_is_total_even_for_garbage() {
        // Sorting with a non-total order may panic; this must not.
        let mut ids = vec![
            "null",
            "",
            "zz",
            "é",
            "ffffffffffffffffff",
            "0000000000000000",
            V1,
            V2,
            "7fffffffffffffff0",
            "+7fffffffffffffff",
            DM,
            "null",
        ];
        ids.sort_by(|a, b| compare_version_ids(a, b));
        assert_eq!(ids.last(), Some(&"null"));
        for w in ids.windows(2) {
            assert_ne!(compare_version_ids(w[0], w[1]), Ordering::Greater);
        }
    }

    #[test]
    fn entry_facts() {
        let e = version(V1, 100, 3).stamped(5);
        assert_eq!(version_id_of(&e), V1);
        assert_eq!(noncurrent_since_of(&e), Some(5));
        assert_eq!(
            noncurrent_since_of(&e.clone().with(keys::NONCURRENT_SINCE_NS, "0")),
            None
        );
        assert_eq!(
            noncurrent_since_of(&e.clone().with(keys::NONCURRENT_SINCE_NS, "x")),
            None
        );
        assert_eq!(mtime_ns(&e), 100 * S);
        assert!(!is_delete_marker(&e));
        assert!(is_delete_marker(&marker(DM, 1)));
        assert!(!is_delete_marker(
            &marker(DM, 1).with(keys::DELETE_MARKER, "True")
        ));
    }

    #[test]
    fn null_version_detection() {
        assert!(is_null_version(&file("k", 1, 1)));
        assert!(!is_null_version(&dir("k", 1)));
        let mut dir_object = dir("k", 1);
        dir_object.attributes.as_mut().unwrap().mime = "httpd/unix-directory".into();
        assert!(is_null_version(&dir_object));
        let mut with_content = dir("k", 1);
        with_content.content = b"x".to_vec();
        assert!(is_null_version(&with_content));
        assert!(is_explicit_null(
            &file("k", 1, 1).with(keys::VERSION_ID, "null")
        ));
        assert!(!is_explicit_null(&file("k", 1, 1)));
    }

    #[test]
    fn expansion_follows_the_pointer_and_ranks_noncurrent_versions() {
        let files = vec![
            version(V1, 100, 1).stamped(200 * S + 5),
            version(V2, 200, 2).stamped(300 * S + 7),
            marker(DM, 300),
        ];
        let out = expand_versions("k", &folder("k", DM), &files, None);
        let ids: Vec<&str> = out.iter().map(|v| v.version_id.as_str()).collect();
        assert_eq!(ids, [DM, V2, V1]);
        assert!(out[0].info.is_latest && out[0].info.is_delete_marker);
        assert_eq!(out[0].info.noncurrent_index, None);
        assert_eq!(out[1].info.noncurrent_index, Some(0));
        assert_eq!(out[2].info.noncurrent_index, Some(1));
        assert_eq!(out[1].info.noncurrent_since, Some(300 * S + 7));
        assert!(out.iter().all(|v| v.info.num_versions == 3));
        assert_eq!(out[2].identity, EntryIdentity::of(&files[0]));
        assert_eq!(out[1].info.size, 2);
    }

    #[test]
    fn stale_stamp_on_restored_latest_does_not_make_it_noncurrent() {
        // The marker was deleted: the pointer is back on V2, which keeps its
        // stamp from when the marker demoted it (docs/filer-layout.md#noncurrent-stamp).
        let files = vec![
            version(V1, 100, 1).stamped(200 * S),
            version(V2, 200, 2).stamped(300 * S),
        ];
        let out = expand_versions("k", &folder("k", V2), &files, None);
        assert_eq!(out[0].version_id, V2);
        assert!(out[0].info.is_latest);
        assert_eq!(out[0].info.noncurrent_since, None);
        assert!(!out[1].info.is_latest);
    }

    #[test]
    fn noncurrent_since_falls_back_to_the_next_newer_siblings_mtime() {
        let files = vec![version(V1, 100, 1), version(V2, 200, 2)];
        let out = expand_versions("k", &folder("k", V2), &files, None);
        assert_eq!(out[1].version_id, V1);
        assert_eq!(out[1].info.noncurrent_since, Some(200 * S));
    }

    #[test]
    fn null_version_is_a_sibling_and_can_be_latest() {
        let null = file("k", 300, 9).with(keys::VERSION_ID, "null");
        let files = vec![version(V1, 100, 1).stamped(300 * S)];
        let f = dir("k.versions", 1).with(keys::NULL_VERSION_IS_LATEST, "true");
        let out = expand_versions("k", &f, &files, Some(&null));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].version_id, "null");
        assert!(out[0].info.is_latest && out[0].is_bare_null);
        assert_eq!(out[0].identity, EntryIdentity::of(&null));
        assert_eq!(out[1].info.noncurrent_index, Some(0));
        assert!(out.iter().all(|v| v.info.num_versions == 2));
    }

    #[test]
    fn older_null_version_below_a_newer_version_is_noncurrent() {
        // Pre-versioning object, then versioning enabled and a new PUT.
        let null = file("k", 50, 9);
        let files = vec![version(V1, 100, 1)];
        let out = expand_versions("k", &folder("k", V1), &files, Some(&null));
        assert_eq!(out[0].version_id, V1);
        assert_eq!(out[1].version_id, "null");
        assert!(!out[1].info.is_latest);
        assert_eq!(out[1].info.noncurrent_since, Some(100 * S));
    }

    #[test]
    fn missing_or_stale_pointer_falls_back_to_explicit_null_else_newest() {
        let files = vec![version(V1, 100, 1), version(V2, 200, 2)];
        let stale = folder("k", "ffffffffffffffffffffffffffffffff");
        let out = expand_versions("k", &stale, &files, None);
        assert!(out[0].info.is_latest);
        assert_eq!(out[0].version_id, V2);
        let explicit = file("k", 10, 1).with(keys::VERSION_ID, "null");
        let out = expand_versions("k", &dir("k.versions", 1), &files, Some(&explicit));
        let latest: Vec<&str> = out
            .iter()
            .filter(|v| v.info.is_latest)
            .map(|v| v.version_id.as_str())
            .collect();
        assert_eq!(latest, ["null"]);
        // A pre-versioning (implicit) null does not win the fallback.
        let implicit = file("k", 10, 1);
        let out = expand_versions("k", &dir("k.versions", 1), &files, Some(&implicit));
        assert_eq!(out[0].version_id, V2);
        assert!(out[0].info.is_latest);
        // Null-Version-Is-Latest without a null version: fall back too.
        let f = dir("k.versions", 1).with(keys::NULL_VERSION_IS_LATEST, "true");
        let out = expand_versions("k", &f, &files, None);
        assert!(out[0].info.is_latest);
    }

    #[test]
    fn files_without_a_version_id_are_not_versions() {
        let files = vec![file("stray", 100, 1), version(V1, 100, 1)];
        let out = expand_versions("k", &folder("k", V1), &files, None);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].info.num_versions, 1);
        assert!(expand_versions("k", &folder("k", V1), &[file("x", 1, 1)], None).is_empty());
    }

    #[test]
    fn equal_mtimes_tie_break_by_version_id() {
        let files = vec![version(V1, 100, 1), version(V2, 100, 2)];
        let out = expand_versions("k", &folder("k", V2), &files, None);
        assert_eq!(out[0].version_id, V2);
    }
}
