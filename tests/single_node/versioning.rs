//! Versioned and suspended buckets through `run-once` on the shared cluster:
//! delete markers added and removed, noncurrent versions by age and count,
//! displaced and rewritten null versions, restored versions, object lock, and
//! each version expired once across shard subsets.
//!
//! Each test owns its buckets (`--buckets`) and its cursor dir, travels in time
//! with `--now` (never backwards within one cursor dir) and checks effects
//! through the S3 API and counters through the `--json` report. Due times
//! default to next-midnight-UTC rounding, so "not yet" runs stay below the TTL
//! and "due" runs go past TTL + 1 day. Tests that need a real gap between two
//! writes use a 10 s lifecycle day and sleep a few seconds between the writes.

use crate::common;

use aws_sdk_s3::types::BucketVersioningStatus;

use common::*;

/// Expiration Days on a versioning-enabled bucket puts a delete marker over the current version
/// (HEAD 404) and keeps the version itself. Two passes so that the due one is a steady-state
/// replay (Go's router never does; docs/design-deviations.md#versioned-current-versions).
#[tokio::test]
async fn versioned_expiration_days_adds_delete_marker() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-vers-days").await.unwrap();
    enable_versioning(&s3, &b).await;
    let vid = put(&s3, &b, "cur/a", b"version one", None)
        .await
        .expect("versioned PUT returns a version id");
    put(&s3, &b, "keep/b", b"kept", None).await;
    let rules = lifecycle(
        "<Rule><ID>cur</ID><Status>Enabled</Status><Filter><Prefix>cur/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &b, "cur/a", None).await, 200);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "cur/a", None).await,
        404,
        "current version should be hidden by a delete marker:\n{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "cur/a", Some(&vid)).await, 200);
    let vs = list_versions(&s3, &b, "cur/").await;
    assert_eq!(vs.len(), 2, "{vs:?}\n{}", p.describe());
    assert!(
        vs.iter().any(|v| v.marker && v.is_latest),
        "latest is a delete marker: {vs:?}"
    );
    assert!(
        vs.iter()
            .any(|v| !v.marker && !v.is_latest && v.version_id == vid),
        "the old version is still listed, noncurrent: {vs:?}"
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert_eq!(head_status(&s3, &b, "keep/b", None).await, 200);
}

/// NoncurrentDays: v1 and v2 of a key become noncurrent when v3 lands; after the TTL both are
/// gone and v3 stays current.
#[tokio::test]
async fn noncurrent_days_expires_old_versions() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-noncurrent").await.unwrap();
    enable_versioning(&s3, &b).await;
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3"] {
        ids.push(put(&s3, &b, "nc/k", body, None).await.unwrap());
    }
    let other = put(&s3, &b, "other/k", b"o1", None).await.unwrap();
    put(&s3, &b, "other/k", b"o2", None).await.unwrap();
    let rules = lifecycle(
        "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>nc/</Prefix></Filter>\
         <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_versions(&s3, &b, "nc/").await.len(),
        3,
        "{}",
        p.describe()
    );

    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    let r = p.ok();
    let vs = list_versions(&s3, &b, "nc/").await;
    assert_eq!(
        vs,
        vec![Ver {
            key: "nc/k".into(),
            version_id: ids[2].clone(),
            is_latest: true,
            marker: false
        }],
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    // Outside the prefix, the noncurrent version stays.
    let ov = list_versions(&s3, &b, "other/").await;
    assert_eq!(ov.len(), 2, "{ov:?}");
    assert!(ov.iter().any(|v| v.version_id == other && !v.is_latest));
}

/// NoncurrentDays + NewerNoncurrentVersions=1: of v1..v4, only the newest noncurrent (v3) is
/// kept next to the current v4.
#[tokio::test]
async fn newer_noncurrent_versions_keeps_the_newest_noncurrent() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-newer-nc").await.unwrap();
    enable_versioning(&s3, &b).await;
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        ids.push(put(&s3, &b, "n/k", body, None).await.unwrap());
    }
    let rules = lifecycle(
        "<Rule><ID>newer</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
         <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays>\
         <NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_versions(&s3, &b, "n/").await.len(),
        4,
        "{}",
        p.describe()
    );

    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    let r = p.ok();
    let vs = list_versions(&s3, &b, "n/").await;
    let kept: Vec<(&str, bool)> = vs
        .iter()
        .map(|v| (v.version_id.as_str(), v.is_latest))
        .collect();
    let mut want = vec![(ids[3].as_str(), true), (ids[2].as_str(), false)];
    want.sort();
    let mut got = kept.clone();
    got.sort();
    assert_eq!(got, want, "versions left: {vs:?}\n{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// ExpiredObjectDeleteMarker with NoncurrentDays: PUT then DELETE leaves v1 under a marker; a
/// pass after the TTL removes v1, and the next pass removes the now-lone marker.
#[tokio::test]
async fn expired_delete_marker_removed_after_noncurrent_version() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-marker").await.unwrap();
    enable_versioning(&s3, &b).await;
    let v1 = put(&s3, &b, "m/k", b"v1", None).await.unwrap();
    s3.delete_object()
        .bucket(&b)
        .key("m/k")
        .send()
        .await
        .unwrap();
    // A marker with a surviving sibling outside the rule's prefix stays untouched throughout.
    put(&s3, &b, "x/k", b"x1", None).await;
    s3.delete_object()
        .bucket(&b)
        .key("x/k")
        .send()
        .await
        .unwrap();
    let rules = lifecycle(
        "<Rule><ID>m</ID><Status>Enabled</Status><Filter><Prefix>m/</Prefix></Filter>\
         <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>\
         <NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let before = list_versions(&s3, &b, "m/").await;
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.iter().any(|v| v.marker && v.is_latest));

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok();
    let vs = list_versions(&s3, &b, "m/").await;
    assert!(
        !vs.iter().any(|v| v.version_id == v1),
        "noncurrent v1 should be gone: {vs:?}\n{}",
        p.describe()
    );

    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    p.ok();
    let vs = list_versions(&s3, &b, "m/").await;
    assert!(
        vs.is_empty(),
        "the lone delete marker should be gone: {vs:?}\n{}",
        p.describe()
    );
    assert_eq!(list_versions(&s3, &b, "x/").await.len(), 2);
}

/// Object lock: the free object expires (delete marker), the GOVERNANCE-retained one stays
/// readable, and the pass completes (SKIPPED_OBJECT_LOCK counted, no halt).
#[tokio::test]
async fn object_lock_skips_retained_version_without_halting() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = new_lock_bucket(c, "e2e-lock").await;
    let until = now_ns() / 1_000_000_000 + 400 * 86_400;
    let locked = put_locked(&s3, &b, "l/locked", b"locked body", Lock::Governance(until)).await;
    let free = put(&s3, &b, "l/free", b"free body", None).await.unwrap();
    let rules = lifecycle(
        "<Rule><ID>l</ID><Status>Enabled</Status><Filter><Prefix>l/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "l/free", None).await,
        404,
        "{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "l/free", Some(&free)).await, 200);
    assert_eq!(
        head_status(&s3, &b, "l/locked", None).await,
        200,
        "{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "l/locked", Some(&locked)).await, 200);
    assert!(r.total("SKIPPED_OBJECT_LOCK") >= 1, "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    for k in ["RETRY_LATER", "BLOCKED", "RPC_ERROR"] {
        assert_eq!(r.total(k), 0, "{k}:\n{}", p.describe());
    }
}

/// SuspendedVersioningExpiration (docs/lifecycle-delete.md#versioned-expiration): Enabled PUT v1,
/// Suspended PUT (null), Days rule; after due the latest is a delete marker, v1 is still readable
/// and the null version is gone.
#[tokio::test]
async fn suspended_versioning_expiration_replaces_null_with_marker() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-susp").await.unwrap();
    enable_versioning(&s3, &b).await;
    let v1 = put(&s3, &b, "s/k", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "s/k", b"null body", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("s", "s/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &b, "s/k", None).await, 200);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "s/k", None).await,
        404,
        "latest should be a delete marker:\n{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "s/k", Some(&v1)).await, 200);
    let vs = list_versions(&s3, &b, "s/").await;
    assert!(
        vs.iter().any(|v| v.marker && v.is_latest),
        "latest is a marker: {vs:?}\n{}",
        p.describe()
    );
    assert!(
        !vs.iter().any(|v| !v.marker && v.version_id == "null"),
        "the null version should be deleted: {vs:?}\n{}",
        p.describe()
    );
    assert!(vs.iter().any(|v| v.version_id == v1 && !v.is_latest));
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// A pre-versioning object displaced by the first versioned PUT expires under NoncurrentDays
/// (deferred case A); a displaced null that a Suspended write made current again is kept.
#[tokio::test]
async fn displaced_null_expires_but_rewritten_null_is_kept() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-null").await.unwrap();
    put(&s3, &b, "n/gone", b"pre", None).await;
    put(&s3, &b, "n/back", b"pre", None).await;
    enable_versioning(&s3, &b).await;
    let cur = put(&s3, &b, "n/gone", b"v1", None).await.unwrap();
    put(&s3, &b, "n/back", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "n/back", b"null again", None).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let before = list_versions(&s3, &b, "n/gone").await;
    assert_eq!(before.len(), 2, "{before:?}");

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_versions(&s3, &b, "n/gone").await, before);

    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    p.ok();
    assert_eq!(
        list_versions(&s3, &b, "n/gone").await,
        vec![Ver {
            key: "n/gone".into(),
            version_id: cur,
            is_latest: true,
            marker: false
        }],
        "the displaced null version should be gone:\n{}",
        p.describe()
    );
    let back = list_versions(&s3, &b, "n/back").await;
    assert!(
        back.iter()
            .any(|v| v.version_id == "null" && v.is_latest && !v.marker),
        "the rewritten null is current and must stay: {back:?}\n{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "n/back", None).await, 200);
}

/// Removing the latest (a delete marker, or a newer version) by id restores an older version;
/// it must still expire under Expiration Days (deferred case B).
#[tokio::test]
async fn restored_version_still_expires() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-restore").await.unwrap();
    enable_versioning(&s3, &b).await;
    let a1 = put(&s3, &b, "r/a", b"a1", None).await.unwrap();
    delete(&s3, &b, "r/a", None).await;
    let marker = list_versions(&s3, &b, "r/a")
        .await
        .into_iter()
        .find(|v| v.marker)
        .expect("a delete marker")
        .version_id;
    delete(&s3, &b, "r/a", Some(&marker)).await;
    let b1 = put(&s3, &b, "r/b", b"b1", None).await.unwrap();
    let b2 = put(&s3, &b, "r/b", b"b2", None).await.unwrap();
    delete(&s3, &b, "r/b", Some(&b2)).await;
    assert_eq!(head_status(&s3, &b, "r/a", None).await, 200);
    assert_eq!(head_status(&s3, &b, "r/b", None).await, 200);
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("r", "r/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    for (key, vid) in [("r/a", &a1), ("r/b", &b1)] {
        assert_eq!(
            head_status(&s3, &b, key, None).await,
            404,
            "{key} should be expired (marker on top):\n{}",
            p.describe()
        );
        assert_eq!(head_status(&s3, &b, key, Some(vid)).await, 200);
    }
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// ExpiredObjectDeleteMarker alone: a lone marker (DELETE of a key that never existed, or whose
/// only version was deleted by id) is removed; a marker over a live version stays.
#[tokio::test]
async fn lone_delete_markers_are_removed_others_stay() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-lone-dm").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>dm</ID><Status>Enabled</Status><Filter><Prefix>m/</Prefix></Filter>\
             <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    delete(&s3, &b, "m/never", None).await;
    let v = put(&s3, &b, "m/byid", b"x", None).await.unwrap();
    delete(&s3, &b, "m/byid", None).await;
    delete(&s3, &b, "m/byid", Some(&v)).await;
    let kept = put(&s3, &b, "m/kept", b"x", None).await.unwrap();
    delete(&s3, &b, "m/kept", None).await;

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        list_versions(&s3, &b, "m/never").await.is_empty(),
        "{}",
        p.describe()
    );
    assert!(
        list_versions(&s3, &b, "m/byid").await.is_empty(),
        "{}",
        p.describe()
    );
    let k = list_versions(&s3, &b, "m/kept").await;
    assert_eq!(k.len(), 2, "{k:?}\n{}", p.describe());
    assert!(k.iter().any(|x| x.version_id == kept));
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Versioned buckets under two shard subsets run separately: replay events shard by physical
/// path, the walker by logical key; together the subsets expire every current version once.
#[tokio::test]
async fn versioned_shard_subsets_expire_each_version_once() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-vshards").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("v", "v/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    for shards in ["0-7", "8-15"] {
        let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &["--shards", shards], &[]).await;
        p.ok().assert_no_deletes();
    }
    let keys: Vec<String> = (0..20).map(|i| format!("v/k{i:02}")).collect();
    c.put_objects_bulk(&b, &keys, b"data").await.unwrap();
    // A second version here would be the harness's, not the pass's.
    for k in &keys {
        let versions = list_versions(&s3, &b, k).await;
        assert_eq!(versions.len(), 1, "{k} after one PUT: {versions:?}");
    }
    let mut done = 0;
    let mut passes = Vec::new();
    for shards in ["0-7", "8-15"] {
        let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &["--shards", shards], &[]).await;
        done += p.ok().total("DONE");
        passes.push(p.describe());
    }
    for k in &keys {
        assert_eq!(head_status(&s3, &b, k, None).await, 404, "{k}");
        let versions = list_versions(&s3, &b, k).await;
        assert_eq!(
            versions.len(),
            2,
            "{k}: one version, one marker: {versions:?}\n{}",
            passes.join("\n")
        );
    }
    assert_eq!(done, 20);
}

/// Suspended-versioning writes after the first pass (steady replay): the null version is
/// replaced by a delete marker, the older Enabled version stays.
#[tokio::test]
async fn suspended_write_after_first_pass_expires() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-susp-steady").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("s", "s/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let v1 = put(&s3, &b, "s/k", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "s/k", b"null", None).await;
    put(&s3, &b, "s/only-null", b"null", None).await;
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    for k in ["s/k", "s/only-null"] {
        assert_eq!(
            head_status(&s3, &b, k, None).await,
            404,
            "{k}\n{}",
            p.describe()
        );
        let vs = list_versions(&s3, &b, k).await;
        assert!(
            !vs.iter().any(|v| v.version_id == "null" && !v.marker),
            "{k}: {vs:?}\n{}",
            p.describe()
        );
    }
    assert_eq!(head_status(&s3, &b, "s/k", Some(&v1)).await, 200);
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Expiration Days never stacks a second delete marker on a key whose latest is already a
/// marker (walk and replay alike).
#[tokio::test]
async fn expiration_does_not_stack_delete_markers() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-no-stack").await.unwrap();
    enable_versioning(&s3, &b).await;
    put(&s3, &b, "e/old", b"x", None).await;
    delete(&s3, &b, "e/old", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("e", "e/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    put(&s3, &b, "e/new", b"x", None).await;
    delete(&s3, &b, "e/new", None).await;
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    for k in ["e/old", "e/new"] {
        assert_eq!(
            list_versions(&s3, &b, k).await.len(),
            2,
            "{k}\n{}",
            p.describe()
        );
    }
}

/// NoncurrentDays with NewerNoncurrentVersions on versions written after the first pass (the
/// router cannot rank versions; the steady walk must): keep the newest noncurrent, expire older.
#[tokio::test]
async fn newer_noncurrent_versions_in_steady_state() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-newer-steady").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>newer</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays>\
             <NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        ids.push(put(&s3, &b, "n/k", body, None).await.unwrap());
    }
    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    let r = p.ok();
    let mut got: Vec<(String, bool)> = list_versions(&s3, &b, "n/")
        .await
        .into_iter()
        .map(|v| (v.version_id, v.is_latest))
        .collect();
    got.sort();
    let mut want = vec![(ids[3].clone(), true), (ids[2].clone(), false)];
    want.sort();
    assert_eq!(got, want, "{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Deferred case A variants: a pre-versioning null displaced by a delete marker expires; a null
/// that is current again because the version above it was deleted by id is kept; a tag filter
/// applies to the displaced null itself.
#[tokio::test]
async fn displaced_null_variants_marker_restore_and_tags() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-null-var").await.unwrap();
    put(&s3, &b, "n/marked", b"pre", None).await;
    put(&s3, &b, "n/restored", b"pre", None).await;
    put(&s3, &b, "n/tagged", b"pre", Some("env=tmp")).await;
    put(&s3, &b, "n/untagged", b"pre", None).await;
    put(&s3, &b, "n/other-tag", b"pre", Some("env=prod")).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>\
             <Rule><ID>tag</ID><Status>Enabled</Status>\
             <Filter><And><Prefix>n/t</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag></And></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();

    enable_versioning(&s3, &b).await;
    delete(&s3, &b, "n/marked", None).await;
    let v = put(&s3, &b, "n/restored", b"v1", None).await.unwrap();
    delete(&s3, &b, "n/restored", Some(&v)).await;
    for k in ["n/tagged", "n/untagged", "n/other-tag"] {
        put(&s3, &b, k, b"v1", None).await.unwrap();
    }
    assert_eq!(head_status(&s3, &b, "n/restored", None).await, 200);

    // +4 d: only the 2-day tag rule is due, and only for the tagged null.
    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    let nulls = |vs: Vec<Ver>| vs.iter().any(|v| v.version_id == "null" && !v.marker);
    assert!(
        !nulls(list_versions(&s3, &b, "n/tagged").await),
        "{}",
        p.describe()
    );
    assert!(
        nulls(list_versions(&s3, &b, "n/untagged").await),
        "{}",
        p.describe()
    );
    assert!(
        nulls(list_versions(&s3, &b, "n/other-tag").await),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());

    // +7 d: the 5-day rule: every displaced null goes; the restored (current) null stays.
    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    p.ok();
    for k in ["n/marked", "n/untagged", "n/other-tag"] {
        assert!(
            !nulls(list_versions(&s3, &b, k).await),
            "{k}\n{}",
            p.describe()
        );
    }
    let m = list_versions(&s3, &b, "n/marked").await;
    assert!(m.len() == 1 && m[0].marker, "{m:?}");
    assert_eq!(
        head_status(&s3, &b, "n/restored", None).await,
        200,
        "a null that is current again must not be deleted:\n{}",
        p.describe()
    );
    assert!(nulls(list_versions(&s3, &b, "n/restored").await));
}
