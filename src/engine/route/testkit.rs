//! Routing fixtures shared by the unit tests of `route` and `deferred`: a
//! compiled versioned bucket, meta-log events around hand-built entries, and
//! [`run`] (route one event inside the buckets root).

use crate::engine::event::MetaEvent;
use crate::engine::route::{Routed, route};
use crate::engine::{ActionKind, BucketConfig, RuleHash, Snapshot, TimeConfig, Versioning};
use crate::lifecycle::FlatRule;
use crate::pb::filer_pb::Entry;

pub(crate) const S: i64 = 1_000_000_000;
pub(crate) const DAY: i64 = 86_400 * S;
pub(crate) const ROOT: &str = "/buckets";
pub(crate) const V1: &str = "67129c57f463efb319b449220aef50bb";
pub(crate) const V2: &str = "67129c57c458226179466ab670c6e266";
pub(crate) const DM: &str = "67129c575817aaaaaaaaaaaaaaaaaaaa";

fn exact() -> TimeConfig {
    TimeConfig {
        rounding: crate::engine::DueRounding::None,
        ..TimeConfig::default()
    }
}

pub(crate) fn enabled(f: impl FnOnce(&mut FlatRule)) -> FlatRule {
    let mut r = FlatRule {
        enabled: true,
        ..FlatRule::default()
    };
    f(&mut r);
    r
}

/// Bucket `b` (versioned) with Days 10, NoncurrentDays 3, AbortMpu 2, and
/// the walker kinds, which the router must ignore.
pub(crate) fn snapshot() -> Snapshot {
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

pub(crate) fn snapshot_with(rules: Vec<FlatRule>) -> Snapshot {
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

pub(crate) fn hash_of(snap: &Snapshot, kind: ActionKind) -> RuleHash {
    snap.actions()
        .find(|a| a.kind() == kind)
        .map(|a| a.rule_hash())
        .expect("kind in snapshot")
}

pub(crate) fn create(dir: &str, e: Entry) -> MetaEvent {
    MetaEvent {
        ts_ns: 1,
        directory: dir.into(),
        new_parent_path: dir.into(),
        old_entry: None,
        new_entry: Some(Box::new(e)),
    }
}

pub(crate) fn update(dir: &str, old: Entry, new: Entry) -> MetaEvent {
    MetaEvent {
        old_entry: Some(Box::new(old)),
        ..create(dir, new)
    }
}

pub(crate) fn run(snap: &Snapshot, ev: &MetaEvent) -> Routed {
    route(snap, ROOT, ev).expect("inside buckets root")
}
