//! Unit tests of routing proper: what each event shape routes to, the pass's
//! pending split, and a property test over arbitrary events.

use super::testkit::*;
use super::*;
use crate::engine::versions::testkit::*;
use crate::engine::{BucketConfig, Versioning};
use crate::lifecycle::FlatRule;

fn delete(dir: &str, e: Entry) -> MetaEvent {
    MetaEvent {
        ts_ns: 1,
        directory: dir.into(),
        new_parent_path: String::new(),
        old_entry: Some(Box::new(e)),
        new_entry: None,
    }
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
    }
}
