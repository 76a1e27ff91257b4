//! `s3-lifecycled rules preview`, pure: tallies what a lifecycle document
//! would delete in a bucket, from the walker's own matches
//! ([`crate::engine::walk::evaluate`]) of one listing: due at `at`, per rule,
//! and per day for the following days, with a sample of keys.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::walk::WalkItem;
use crate::engine::{ActionKind, Match, Nanos, keys};

/// Counts by what would go, and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Current versions (objects).
    pub objects: u64,
    /// Noncurrent versions.
    pub versions: u64,
    pub delete_markers: u64,
    /// Multipart uploads aborted.
    pub uploads: u64,
    /// Bytes of all of them (an upload's bytes are those of its parts, as
    /// the caller listed them; see [`Preview::add_sized`]).
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, kind: ActionKind, bytes: u64) {
        match kind {
            ActionKind::ExpirationDays | ActionKind::ExpirationDate => self.objects += 1,
            ActionKind::NoncurrentDays | ActionKind::NewerNoncurrent => self.versions += 1,
            ActionKind::ExpiredDeleteMarker => self.delete_markers += 1,
            ActionKind::AbortMpu => self.uploads += 1,
        }
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// Keys shown as a sample.
pub const SAMPLE: usize = 10;

/// What a document would delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Preview {
    /// Due at `--at` (overdue included).
    pub at: Tally,
    /// Due at `--at`, per rule (ID, or `#<position>`).
    pub per_rule: BTreeMap<String, Tally>,
    /// Newly due on each following day (day 1 = (at, at + 1 day]).
    pub per_day: Vec<Tally>,
    /// Up to [`SAMPLE`] keys due at `--at`.
    pub sample: Vec<String>,
}

impl Preview {
    /// An empty preview over `days` following days.
    pub fn new(days: usize) -> Preview {
        Preview {
            per_day: vec![Tally::default(); days],
            ..Preview::default()
        }
    }

    /// Adds one match of `item` (found with the horizon `at + days`):
    /// counted at `at` when due by then, else on its day.
    pub fn add(&mut self, m: &Match, item: &WalkItem, rule: &str, at: Nanos, day_ns: i64) {
        self.add_sized(m, size_of(item, m), rule, at, day_ns);
    }

    /// [`Preview::add`] with the bytes the match frees given by the caller:
    /// an upload's parts are files inside its directory, which one listing
    /// of the bucket does not read (docs/filer-layout.md#multipart-uploads).
    pub fn add_sized(&mut self, m: &Match, bytes: u64, rule: &str, at: Nanos, day_ns: i64) {
        if m.due <= at {
            self.at.add(m.kind, bytes);
            self.per_rule
                .entry(rule.to_string())
                .or_default()
                .add(m.kind, bytes);
            if self.sample.len() < SAMPLE {
                let v = if m.version_id.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", m.version_id)
                };
                self.sample.push(format!("{}{v}", m.key));
            }
            return;
        }
        let day = usize::try_from((m.due - at - 1) / day_ns.max(1)).unwrap_or(usize::MAX);
        if let Some(t) = self.per_day.get_mut(day) {
            t.add(m.kind, bytes);
        }
    }
}

/// The size of the version a match is for (0 for an upload: see
/// [`Preview::add_sized`]).
pub fn size_of(item: &WalkItem, m: &Match) -> u64 {
    let size = |e: &crate::pb::filer_pb::Entry| e.attributes.as_ref().map_or(0, |a| a.file_size);
    match item {
        WalkItem::Object { entry, .. } => size(entry),
        WalkItem::Versions {
            versions,
            null_version,
            ..
        } => versions
            .iter()
            .find(|e| {
                e.extended
                    .get(keys::VERSION_ID)
                    .is_some_and(|v| v.as_slice() == m.version_id.as_bytes())
            })
            .or(null_version.as_ref().filter(|_| m.version_id == "null"))
            .map_or(0, size),
        WalkItem::Upload { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_by_kind_rule_and_day() {
        let mut t = Tally::default();
        t.add(ActionKind::ExpirationDays, 5);
        t.add(ActionKind::NoncurrentDays, 7);
        t.add(ActionKind::AbortMpu, 0);
        t.add(ActionKind::ExpiredDeleteMarker, 0);
        assert_eq!(
            t,
            Tally {
                objects: 1,
                versions: 1,
                delete_markers: 1,
                uploads: 1,
                bytes: 12
            }
        );
        assert_eq!(Preview::new(3).per_day.len(), 3);
    }

    #[test]
    fn upload_bytes_given_by_the_caller_are_counted_on_their_day() {
        let day = 100;
        let m = Match {
            bucket: "b".into(),
            key: "dest".into(),
            object_path: ".uploads/u1".into(),
            version_id: String::new(),
            rule_hash: crate::engine::RuleHash::default(),
            kind: ActionKind::AbortMpu,
            due: 250,
            identity: crate::engine::identity::EntryIdentity::default(),
            shard: 0,
            lookup: None,
        };
        let mut p = Preview::new(3);
        p.add_sized(&m, 4096, "mpu", 100, day);
        assert_eq!(p.at, Tally::default());
        assert_eq!(p.per_day[1].uploads, 1);
        assert_eq!(p.per_day[1].bytes, 4096);
        p.add_sized(&m, 10, "mpu", 300, day);
        assert_eq!(p.at.bytes, 10);
        assert_eq!(p.per_rule["mpu"].uploads, 1);
    }
}
