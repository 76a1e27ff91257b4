//! Reclaimed-space accounting, pure (docs/reclaimed-space.md): how many bytes
//! one resolved delete removed from the bucket, and the per-bucket, per-rule
//! totals a pass reports; which volumes the deleted data lived in, and so
//! which collections to report and vacuum. Whether the volumes gave the space
//! back is the volume servers' business (their garbage, read by
//! `crate::seaweed::volumes`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::action::ActionKind;
use super::compile::Versioning;
use super::identity::head_fid;
use crate::pb::filer_pb::Entry;

/// What deletes removed: entries and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freed {
    /// Entries deleted (objects, versions, delete markers, uploads).
    pub objects: u64,
    /// Their bytes, as listed (an upload: the sum of its parts).
    pub bytes: u64,
}

impl Freed {
    /// One more deleted entry of `bytes`.
    pub fn add(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Adds `other` in.
    pub fn merge(&mut self, other: Freed) {
        self.objects += other.objects;
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// Per (bucket, rule) what a pass deleted; the rule is its ID, or its hash
/// (hex) when it has none.
pub type FreedByRule = BTreeMap<(String, String), Freed>;

/// Adds every entry of `other` into `into`.
pub fn merge_all(into: &mut FreedByRule, other: &FreedByRule) {
    for (k, v) in other {
        into.entry(k.clone()).or_default().merge(*v);
    }
}

/// The bytes a DONE delete of `kind` removed from a bucket with
/// `versioning`: `size` is the deleted entry's listed size, `parts` the sum
/// of an upload's parts (read before the abort).
///
/// An expiration on a bucket that has ever been versioned (Enabled or
/// Suspended) puts a delete marker on top: the data stays as a noncurrent
/// version and is counted when a noncurrent rule deletes it, not now. A
/// Suspended bucket whose latest was the null version does lose it, and
/// that is not counted (the request does not say which the latest was): the
/// report errs low, never high.
pub fn freed_bytes(kind: ActionKind, versioning: Versioning, size: i64, parts: u64) -> u64 {
    match kind {
        ActionKind::AbortMpu => parts,
        ActionKind::ExpirationDays | ActionKind::ExpirationDate
            if versioning != Versioning::Unversioned =>
        {
            0
        }
        // The identity carries Go's wrapping uint64 → int64; a negative size
        // is a corrupt entry, not petabytes.
        _ => u64::try_from(size).unwrap_or(0),
    }
}

/// Per bucket, the volumes that held the data of its DONE deletes, each
/// with the bytes deleted from it (docs/reclaimed-space.md#which-collections):
/// an entry's bytes go to its head chunk's volume, an upload part's to its
/// first chunk's, and the other chunks' volumes are listed with 0. A bucket
/// is listed as soon as anything of it was deleted, with no volume when
/// none of its deletes named one (a delete marker, content kept inline in
/// the filer entry).
pub type PlacedByBucket = BTreeMap<String, BTreeMap<u32, u64>>;

/// Adds `bytes` deleted from volume `id` into `volumes`.
pub fn place(volumes: &mut BTreeMap<u32, u64>, id: u32, bytes: u64) {
    let b = volumes.entry(id).or_default();
    *b = b.saturating_add(bytes);
}

/// Adds every bucket, volume and byte of `other` into `into`.
pub fn merge_placed(into: &mut PlacedByBucket, other: &PlacedByBucket) {
    for (bucket, ids) in other {
        let mine = into.entry(bucket.clone()).or_default();
        for (id, bytes) in ids {
            place(mine, *id, *bytes);
        }
    }
}

/// The volume of a file id in its `<volume>,<key><cookie>` form (the
/// identity's head fid); `None` when empty or malformed. Volume ids start at
/// 1: a 0 is an unset structured fid.
pub fn fid_volume(fid: &str) -> Option<u32> {
    let (volume, rest) = fid.split_once(',')?;
    let id: u32 = volume.parse().ok()?;
    (id != 0 && !rest.is_empty()).then_some(id)
}

/// What an upload's parts hold, from the listing of its `.uploads/<id>`
/// folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts {
    /// The parts' listed sizes, summed.
    pub bytes: u64,
    /// The volumes their chunks are in, with the bytes of the parts whose
    /// first chunk is there ([`PlacedByBucket`]).
    pub volumes: BTreeMap<u32, u64>,
}

/// The parts among `entries` (directories are not parts).
pub fn parts_of(entries: &[Entry]) -> Parts {
    let mut out = Parts::default();
    for e in entries.iter().filter(|e| !e.is_directory) {
        let size = e.attributes.as_ref().map_or(0, |a| a.file_size);
        out.bytes = out.bytes.saturating_add(size);
        let mut bytes = size;
        for id in e.chunks.iter().filter_map(|c| fid_volume(&head_fid(c))) {
            place(&mut out.volumes, id, std::mem::take(&mut bytes));
        }
    }
    out
}

/// The collections a pass's deletes touched: the collection the master lists
/// for each volume in `placed`. A bucket falls back to its own name (the
/// collection the S3 gateway gives a bucket without a location rule) for a
/// volume the master does not list (gone) and when none of its deletes named
/// a volume.
///
/// The volumes, not `filer.conf`, because they say where the data went when
/// it was written: a location rule added or changed since does not move it,
/// and on 4.48 the entry itself does not record its collection
/// (docs/reclaimed-space.md#which-collections).
pub fn touched_collections(placed: &PlacedByBucket, volumes: &[VolumeUsage]) -> BTreeSet<String> {
    let collection: BTreeMap<u32, &str> = volumes
        .iter()
        .map(|v| (v.id, v.collection.as_str()))
        .collect();
    let mut out = BTreeSet::new();
    for (bucket, ids) in placed {
        let mut unknown = ids.is_empty();
        for id in ids.keys() {
            match collection.get(id) {
                Some(c) => {
                    out.insert((*c).to_string());
                }
                None => unknown = true,
            }
        }
        if unknown {
            out.insert(bucket.clone());
        }
    }
    out
}

/// One replica of one volume, as the master lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeUsage {
    pub id: u32,
    /// Its collection (a bucket's is the bucket name unless a `filer.conf`
    /// location names another).
    pub collection: String,
    /// The volume server holding this replica (`host:port`).
    pub server: String,
    /// Bytes on disk (the `.dat` file).
    pub size: u64,
    /// Bytes of deleted needles still in it.
    pub garbage: u64,
    /// Read-only (marked, or tiered to remote storage): the master's own
    /// loop skips it, while an explicit `VacuumVolume` compacts it when its
    /// deletes went through (docs/reclaimed-space.md#read-only).
    pub read_only: bool,
    /// Its `.dat` is on remote storage (`volume.tier.upload`): compacting it
    /// would read it all back, so it is never vacuumed.
    pub remote: bool,
    /// The volume's TTL (SeaweedFS's packed form; 0: none).
    pub ttl: u32,
    /// Erasure-coded: `size` is this server's shards, `garbage` is unknown
    /// (0) and no vacuum compacts it (docs/reclaimed-space.md#erasure-coded).
    pub erasure_coded: bool,
    /// An erasure-coded TTL volume's TTL in seconds and when the volume
    /// server destroys it (unix seconds); `ttl` is 0 for those
    /// (docs/ttl-audit.md#erasure-coded).
    pub ec_ttl: Option<(u64, u64)>,
}

impl VolumeUsage {
    /// Garbage over size (0 for an empty volume).
    pub fn ratio(&self) -> f64 {
        ratio(self.garbage, self.size)
    }
}

/// `part / whole`, 0 when `whole` is 0.
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// What one collection's volumes hold, summed over every replica.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionGarbage {
    pub collection: String,
    /// Distinct volumes.
    pub volumes: u32,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// Bytes of deleted data still on disk: what a vacuum gives back.
    pub garbage_bytes: u64,
    /// The erasure-coded volumes the pass deleted data from: the master
    /// counts no garbage for them, and only `ec.decode` gives their space
    /// back (docs/reclaimed-space.md#erasure-coded). `volumes`, `size_bytes`
    /// and `garbage_bytes` are the other volumes'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ec_volumes: Vec<u32>,
    /// The bytes the pass deleted from `ec_volumes`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub ec_deleted_bytes: u64,
    /// The read-only volumes the pass deleted data from: never vacuumed,
    /// and one marked read-only without deletes refuses even the filer's
    /// chunk deletes (docs/reclaimed-space.md#read-only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_volumes: Vec<u32>,
    /// The bytes the pass deleted from `read_only_volumes`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub read_only_deleted_bytes: u64,
}

impl CollectionGarbage {
    /// Garbage over size.
    pub fn ratio(&self) -> f64 {
        ratio(self.garbage_bytes, self.size_bytes)
    }
}

/// Per collection in `wanted` (sorted), its volumes' sizes and garbage,
/// erasure-coded ones left out. A wanted collection without volumes is
/// listed with zeros.
pub fn by_collection<'a>(
    volumes: &[VolumeUsage],
    wanted: impl IntoIterator<Item = &'a str>,
) -> Vec<CollectionGarbage> {
    let mut out: BTreeMap<&str, (BTreeSet<u32>, u64, u64)> = wanted
        .into_iter()
        .map(|c| (c, Default::default()))
        .collect();
    for v in volumes.iter().filter(|v| !v.erasure_coded) {
        if let Some(e) = out.get_mut(v.collection.as_str()) {
            e.0.insert(v.id);
            e.1 = e.1.saturating_add(v.size);
            e.2 = e.2.saturating_add(v.garbage);
        }
    }
    out.into_iter()
        .map(|(c, (ids, size, garbage))| CollectionGarbage {
            collection: c.to_string(),
            volumes: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            size_bytes: size,
            garbage_bytes: garbage,
            ..CollectionGarbage::default()
        })
        .collect()
}

/// [`by_collection`] of the `touched` collections, each with the volumes
/// that `placed` deleted data from where no vacuum will give it back,
/// erasure-coded and read-only ones, and those bytes.
pub fn collections_report(
    volumes: &[VolumeUsage],
    touched: &BTreeSet<String>,
    placed: &PlacedByBucket,
) -> Vec<CollectionGarbage> {
    let mut out = by_collection(volumes, touched.iter().map(String::as_str));
    // Per volume: its collection, and whether it is erasure-coded (else
    // read-only: one read-only replica keeps the vacuum off it).
    let mut held: BTreeMap<u32, (&str, bool)> = BTreeMap::new();
    for v in volumes.iter().filter(|v| v.erasure_coded || v.read_only) {
        let e = held.entry(v.id).or_insert((v.collection.as_str(), false));
        e.1 |= v.erasure_coded;
    }
    for (id, bytes) in placed.values().flatten() {
        let Some(&(collection, ec)) = held.get(id) else {
            continue;
        };
        let Some(row) = out.iter_mut().find(|r| r.collection == collection) else {
            continue;
        };
        let (ids, total) = if ec {
            (&mut row.ec_volumes, &mut row.ec_deleted_bytes)
        } else {
            (&mut row.read_only_volumes, &mut row.read_only_deleted_bytes)
        };
        if !ids.contains(id) {
            ids.push(*id);
            ids.sort_unstable();
        }
        *total = total.saturating_add(*bytes);
    }
    out
}

/// The volumes (ids) of `collections` to vacuum after a pass: local, plain
/// ones (read-only included) whose garbage ratio (worst replica) is at
/// least `threshold`, worst
/// first, at most `max`. The rest that qualify are returned second, to be
/// reported as left for the next pass.
pub fn vacuum_plan(
    volumes: &[VolumeUsage],
    collections: &BTreeSet<String>,
    threshold: f64,
    max: usize,
) -> (Vec<u32>, Vec<u32>) {
    let mut worst: BTreeMap<u32, f64> = BTreeMap::new();
    let mut never = BTreeSet::new();
    for v in volumes
        .iter()
        .filter(|v| collections.contains(&v.collection))
    {
        let r = worst.entry(v.id).or_insert(0.0);
        *r = r.max(v.ratio());
        if v.erasure_coded || v.remote {
            never.insert(v.id);
        }
    }
    let mut due: Vec<(u32, f64)> = worst
        .into_iter()
        .filter(|(id, r)| *r >= threshold && *r > 0.0 && !never.contains(id))
        .collect();
    due.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut ids: Vec<u32> = due.into_iter().map(|(id, _)| id).collect();
    let rest = ids.split_off(ids.len().min(max));
    (ids, rest)
}

/// What a pass learned about the space its deletes free, and what its
/// vacuum did (docs/reclaimed-space.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimReport {
    /// The touched collections (where the deleted data lived,
    /// [`touched_collections`]), after the vacuum if one ran.
    pub collections: Vec<CollectionGarbage>,
    /// False when the master's figures did not hold still for a heartbeat
    /// within `reclaim.settle`: they may not include the pass's last deletes
    /// yet.
    pub settled: bool,
    /// Why the volumes could not be read, if they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The vacuum, when `reclaim.vacuum` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vacuum: Option<VacuumReport>,
}

/// The vacuum after a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VacuumReport {
    /// Why nothing was vacuumed, when nothing was on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Volumes vacuumed.
    #[serde(default)]
    pub vacuumed: Vec<u32>,
    /// Volumes over the threshold past `reclaim.max_vacuum_volumes`, left
    /// for the next pass.
    #[serde(default)]
    pub deferred: Vec<u32>,
    /// Volumes at or above the master's own threshold, left to it.
    #[serde(default)]
    pub left_to_master: Vec<u32>,
    /// Vacuums that failed, with why.
    #[serde(default)]
    pub failed: Vec<String>,
    /// Disk bytes of the touched collections before and after.
    pub size_before: u64,
    /// See `size_before`.
    pub size_after: u64,
}

impl VacuumReport {
    /// The disk bytes the vacuum gave back.
    pub fn reclaimed(&self) -> u64 {
        self.size_before.saturating_sub(self.size_after)
    }
}

/// The sum over every bucket and rule.
pub fn total(freed: &FreedByRule) -> Freed {
    freed.values().fold(Freed::default(), |mut t, f| {
        t.merge(*f);
        t
    })
}

/// The bytes of every row.
pub fn rows_total(rows: &[FreedRow]) -> u64 {
    rows.iter().fold(0u64, |a, r| a.saturating_add(r.bytes))
}

/// `[{bucket, rule, objects, bytes}]`, the JSON and admin shape.
pub fn rows(freed: &FreedByRule) -> Vec<FreedRow> {
    freed
        .iter()
        .map(|((bucket, rule), f)| FreedRow {
            bucket: bucket.clone(),
            rule: rule.clone(),
            objects: f.objects,
            bytes: f.bytes,
        })
        .collect()
}

/// One bucket and rule's deletes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreedRow {
    pub bucket: String,
    /// Rule ID (or hash).
    pub rule: String,
    /// Entries deleted.
    pub objects: u64,
    pub bytes: u64,
}

/// The reclaimed-space lines of a pass summary, the same for `run-once`,
/// `status --last` and the log: one per bucket and rule that deleted, one
/// per touched collection, and the vacuum's.
pub fn lines(freed: &[FreedRow], report: Option<&ReclaimReport>) -> Vec<String> {
    let mut out: Vec<String> = freed
        .iter()
        .map(|f| {
            format!(
                "deleted bucket={} rule={} objects={} bytes={}",
                f.bucket, f.rule, f.objects, f.bytes
            )
        })
        .collect();
    let Some(r) = report else {
        return out;
    };
    let ids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if let Some(e) = &r.error {
        out.push(format!("volumes unknown: {e}"));
    }
    for c in &r.collections {
        out.push(format!(
            "collection={} volumes={} size_bytes={} garbage_bytes={} garbage_ratio={:.3}{}",
            c.collection,
            c.volumes,
            c.size_bytes,
            c.garbage_bytes,
            c.ratio(),
            if r.settled {
                ""
            } else {
                " (the master may not count the last deletes yet)"
            }
        ));
        if !c.ec_volumes.is_empty() {
            out.push(format!(
                "erasure_coded collection={} volumes=[{}] deleted_bytes={}: no vacuum compacts \
                 erasure-coded volumes and the master counts no garbage for them; the space \
                 comes back when `ec.decode -collection={} -volumeId=ID` (weed shell, after \
                 `lock`) rebuilds each as a plain volume, which needs free space for it \
                 (`ec.encode` erasure-codes it again)",
                c.collection,
                ids(&c.ec_volumes),
                c.ec_deleted_bytes,
                c.collection
            ));
        }
        if !c.read_only_volumes.is_empty() {
            out.push(format!(
                "read_only collection={} volumes=[{}] deleted_bytes={}: a volume marked \
                 read-only without deletes (`volume.mark -readonly`) refuses the filer's deletes \
                 of the expired chunks (the filer retries them) and shows no garbage until it is \
                 marked `-writable` or `-readonlyCanDelete`; the master's own vacuum skips \
                 read-only volumes, `reclaim.vacuum` compacts them once their garbage shows, \
                 except volumes tiered to remote storage",
                c.collection,
                ids(&c.read_only_volumes),
                c.read_only_deleted_bytes
            ));
        }
    }
    if let Some(v) = &r.vacuum {
        let mut line = format!(
            "vacuum vacuumed=[{}] reclaimed_bytes={} deferred=[{}] left_to_master=[{}]",
            ids(&v.vacuumed),
            v.reclaimed(),
            ids(&v.deferred),
            ids(&v.left_to_master)
        );
        if let Some(why) = &v.skipped {
            line.push_str(&format!(" skipped=\"{why}\""));
        }
        for f in &v.failed {
            line.push_str(&format!(" failed=\"{f}\""));
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol(id: u32, c: &str, size: u64, garbage: u64) -> VolumeUsage {
        VolumeUsage {
            id,
            collection: c.into(),
            size,
            garbage,
            ..VolumeUsage::default()
        }
    }

    #[test]
    fn collections_sum_every_replica_and_list_the_empty_ones() {
        let v = [
            vol(1, "a", 100, 10),
            vol(1, "a", 100, 10),
            vol(2, "a", 50, 0),
            vol(3, "b", 10, 10),
        ];
        let c = by_collection(&v, ["a", "none"]);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].volumes, c[0].size_bytes, c[0].garbage_bytes),
            (2, 250, 20)
        );
        assert_eq!((c[1].collection.as_str(), c[1].volumes), ("none", 0));
        assert!((c[0].ratio() - 0.08).abs() < 1e-9);
    }

    #[test]
    fn vacuum_takes_the_worst_local_volumes_over_the_threshold_up_to_the_bound() {
        let mut remote = vol(5, "a", 100, 90);
        (remote.read_only, remote.remote) = (true, true);
        let v = [
            vol(1, "a", 100, 5),
            vol(2, "a", 100, 50),
            vol(3, "a", 100, 20),
            vol(4, "b", 100, 90),
            remote,
            vol(6, "a", 0, 0),
        ];
        let only_a = BTreeSet::from(["a".to_string()]);
        assert_eq!(vacuum_plan(&v, &only_a, 0.1, 1), (vec![2], vec![3]));
        assert_eq!(vacuum_plan(&v, &only_a, 0.1, 8), (vec![2, 3], vec![]));
        assert_eq!(vacuum_plan(&v, &only_a, 0.0, 8).0, vec![2, 3, 1]);
    }

    /// `volume.mark -readonlyCanDelete` is how an operator lets a volume
    /// of expiring data drain to be vacuumed, and an explicit
    /// `VacuumVolume` compacts it (observed on 4.48); the plan skipped every
    /// read-only volume, so its garbage stayed (docs/reclaimed-space.md#read-only).
    #[test]
    fn read_only_can_delete_volumes_were_never_vacuumed() {
        let mut drained = vol(7, "a", 100, 95);
        drained.read_only = true;
        let mut refused = vol(8, "a", 100, 0);
        refused.read_only = true;
        let v = [drained.clone(), drained, refused, vol(9, "a", 100, 30)];
        let only_a = BTreeSet::from(["a".to_string()]);
        assert_eq!(vacuum_plan(&v, &only_a, 0.1, 8), (vec![7, 9], vec![]));
    }

    #[test]
    fn the_head_fid_names_its_volume() {
        assert_eq!(fid_volume("7,01637037d6"), Some(7));
        assert_eq!(fid_volume("4294967295,ab"), Some(u32::MAX));
        for bad in ["", "7", "7,", ",01", "x,01", "0,01", "-1,01"] {
            assert_eq!(fid_volume(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_uploads_parts_give_their_bytes_and_the_volumes_of_every_chunk() {
        use crate::pb::filer_pb::{FileChunk, FileId, FuseAttributes};
        let chunk = |volume_id| FileChunk {
            fid: Some(FileId {
                volume_id,
                file_key: 1,
                cookie: 2,
            }),
            ..FileChunk::default()
        };
        let part = |size, chunks| Entry {
            name: "0001.part".into(),
            attributes: Some(FuseAttributes {
                file_size: size,
                ..FuseAttributes::default()
            }),
            chunks,
            ..Entry::default()
        };
        let dir = Entry {
            is_directory: true,
            chunks: vec![chunk(99)],
            ..Entry::default()
        };
        let named = FileChunk {
            file_id: "12,0a0b".into(),
            ..FileChunk::default()
        };
        let p = parts_of(&[
            part(5, vec![chunk(3), chunk(4)]),
            part(6, vec![named]),
            part(0, vec![]),
            dir,
        ]);
        assert_eq!(p.bytes, 11);
        // A part's bytes go to its first chunk's volume.
        assert_eq!(p.volumes, BTreeMap::from([(3, 5), (4, 0), (12, 6)]));
        assert_eq!(parts_of(&[]), Parts::default());
    }

    /// A bucket whose data a `filer.conf` location sent to another collection
    /// is reported under that collection, not under its name; data written
    /// before the rule stays in the bucket's own collection and is reported
    /// there too.
    #[test]
    fn touched_collections_are_the_volumes_collections_not_the_bucket_names() {
        let v = [
            vol(1, "plain", 10, 0),
            vol(2, "elsewhere", 10, 0),
            vol(2, "elsewhere", 10, 0),
            vol(3, "ruled", 10, 0),
            vol(4, "", 10, 0),
        ];
        let placed = |p: &[(&str, &[u32])]| -> PlacedByBucket {
            p.iter()
                .map(|(b, ids)| (b.to_string(), ids.iter().map(|id| (*id, 1)).collect()))
                .collect()
        };
        let names = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>();
        assert_eq!(
            names(touched_collections(&placed(&[("ruled", &[2])]), &v)),
            ["elsewhere"]
        );
        assert_eq!(
            names(touched_collections(
                &placed(&[("ruled", &[2, 3]), ("plain", &[1])]),
                &v
            )),
            ["elsewhere", "plain", "ruled"]
        );
        // Nothing named a volume (delete markers only), or the master does
        // not list it: the bucket's own name.
        assert_eq!(
            names(touched_collections(&placed(&[("ruled", &[])]), &v)),
            ["ruled"]
        );
        assert_eq!(
            names(touched_collections(&placed(&[("x", &[2, 77])]), &v)),
            ["elsewhere", "x"]
        );
        // The default collection is a collection too.
        assert_eq!(
            names(touched_collections(&placed(&[("d", &[4])]), &v)),
            [""]
        );
        assert!(touched_collections(&PlacedByBucket::new(), &v).is_empty());
        let mut a = placed(&[("b", &[1])]);
        merge_placed(&mut a, &placed(&[("b", &[1, 2]), ("c", &[])]));
        let mut want = placed(&[("b", &[1, 2]), ("c", &[])]);
        want.get_mut("b").unwrap().insert(1, 2);
        assert_eq!(a, want, "the bytes of a volume add up");
    }

    /// 4.48's master lists an erasure-coded volume's shards with no garbage,
    /// and the report summed only plain volumes: deletes from EC volumes
    /// showed as a collection with 0 garbage and nothing said the space
    /// would not come back (docs/reclaimed-space.md#erasure-coded).
    #[test]
    fn deletes_from_erasure_coded_volumes_were_reported_as_zero_garbage() {
        let ec = |id, c: &str, server: &str| VolumeUsage {
            id,
            collection: c.into(),
            server: server.into(),
            size: 1 << 20,
            read_only: true,
            erasure_coded: true,
            ..VolumeUsage::default()
        };
        let v = [
            vol(1, "mixed", 100, 40),
            ec(2, "mixed", "a:1"),
            ec(2, "mixed", "b:1"),
            ec(3, "mixed", "a:1"),
            ec(4, "cold", "a:1"),
            ec(5, "mixed", "a:1"),
        ];
        let placed = PlacedByBucket::from([
            ("mixed".into(), BTreeMap::from([(1, 10), (2, 300), (3, 0)])),
            ("cold".into(), BTreeMap::from([(4, 7)])),
            ("other".into(), BTreeMap::from([(2, 5)])),
        ]);
        let touched = touched_collections(&placed, &v);
        assert_eq!(
            touched.iter().map(String::as_str).collect::<Vec<_>>(),
            ["cold", "mixed"],
            "an EC volume names its collection"
        );
        let rows = collections_report(&v, &touched, &placed);
        assert_eq!(
            rows[1],
            CollectionGarbage {
                collection: "mixed".into(),
                volumes: 1,
                size_bytes: 100,
                garbage_bytes: 40,
                ec_volumes: vec![2, 3],
                ec_deleted_bytes: 305,
                ..CollectionGarbage::default()
            },
            "shards leave the plain figures alone; volume 5 was not deleted from"
        );
        assert_eq!(
            (
                rows[0].volumes,
                &rows[0].ec_volumes,
                rows[0].ec_deleted_bytes
            ),
            (0, &vec![4], 7)
        );
        let (now, later) = vacuum_plan(&v, &touched, 0.0, 8);
        assert_eq!((now, later), (vec![1], vec![]), "no vacuum of shards");
        let report = ReclaimReport {
            collections: rows,
            settled: true,
            ..ReclaimReport::default()
        };
        let text = lines(&[], Some(&report));
        assert_eq!(text.len(), 4, "{text:#?}");
        assert!(
            text[3].starts_with("erasure_coded collection=mixed volumes=[2,3] deleted_bytes=305: ")
                && text[3].contains("`ec.decode -collection=mixed -volumeId=ID`"),
            "{}",
            text[3]
        );
        let json = serde_json::to_value(&report.collections[1]).unwrap();
        assert_eq!(json["ec_volumes"], serde_json::json!([2, 3]));
        let plain = serde_json::to_value(&by_collection(&v, ["mixed"])[0]).unwrap();
        assert!(plain.get("ec_volumes").is_none(), "{plain}");
    }

    /// A read-only volume (`volume.mark -readonly`) refuses the filer's
    /// chunk deletes, so its garbage stays 0 and the vacuum passes it by;
    /// the report said only that no volume was at the threshold
    /// (docs/reclaimed-space.md#read-only).
    #[test]
    fn deletes_from_read_only_volumes_were_reported_as_nothing_to_vacuum() {
        let mut remote = vol(4, "c", 100, 50);
        (remote.read_only, remote.remote) = (true, true);
        let mut ro = vol(2, "c", 100, 0);
        ro.read_only = true;
        let v = [
            vol(1, "c", 100, 60),
            ro.clone(),
            vol(2, "c", 100, 0),
            vol(3, "c", 100, 0),
            remote,
        ];
        let placed = PlacedByBucket::from([(
            "c".into(),
            BTreeMap::from([(1, 60), (2, 90), (3, 0), (4, 50)]),
        )]);
        let touched = touched_collections(&placed, &v);
        let rows = collections_report(&v, &touched, &placed);
        assert_eq!(
            (&rows[0].read_only_volumes, rows[0].read_only_deleted_bytes),
            (&vec![2, 4], 140),
            "one read-only replica is enough; a remote volume is read-only too"
        );
        assert!(rows[0].ec_volumes.is_empty());
        assert_eq!(
            vacuum_plan(&v, &touched, 0.0, 8).0,
            vec![1],
            "no garbage, no vacuum"
        );
        let report = ReclaimReport {
            collections: rows,
            settled: true,
            ..ReclaimReport::default()
        };
        let text = lines(&[], Some(&report));
        assert!(
            text[1].starts_with("read_only collection=c volumes=[2,4] deleted_bytes=140: ")
                && text[1].contains("`-writable` or `-readonlyCanDelete`"),
            "{text:#?}"
        );
    }

    #[test]
    fn an_expiration_on_a_versioned_bucket_frees_nothing_until_the_version_goes() {
        let e = ActionKind::ExpirationDays;
        assert_eq!(freed_bytes(e, Versioning::Unversioned, 10, 0), 10);
        assert_eq!(freed_bytes(e, Versioning::Enabled, 10, 0), 0);
        assert_eq!(freed_bytes(e, Versioning::Suspended, 10, 0), 0);
        let n = ActionKind::NoncurrentDays;
        assert_eq!(freed_bytes(n, Versioning::Enabled, 10, 0), 10);
        assert_eq!(
            freed_bytes(ActionKind::AbortMpu, Versioning::Enabled, 0, 77),
            77
        );
        assert_eq!(freed_bytes(n, Versioning::Enabled, -1, 0), 0);
    }

    #[test]
    fn totals_merge_per_bucket_and_rule() {
        let mut a = FreedByRule::new();
        a.entry(("b".into(), "r".into())).or_default().add(5);
        let mut b = FreedByRule::new();
        b.entry(("b".into(), "r".into())).or_default().add(7);
        b.entry(("c".into(), "r".into())).or_default().add(1);
        merge_all(&mut a, &b);
        assert_eq!(
            a[&("b".to_string(), "r".to_string())],
            Freed {
                objects: 2,
                bytes: 12
            }
        );
        assert_eq!(a.len(), 2);
    }
}
