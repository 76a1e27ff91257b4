//! Unit tests of deferred matches: which pointer moves defer what, pending
//! in a pass, resolving a looked-up entry, and the displaced null's folder
//! check.

use super::*;
use crate::engine::event::MetaEvent;
use crate::engine::matches::PendingMatch;
use crate::engine::progress::subject_of;
use crate::engine::route::testkit::*;
use crate::engine::route::{route, route_for_pass};
use crate::engine::versions::testkit::*;
use crate::engine::{Snapshot, shard_id};

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

    proptest! {
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
