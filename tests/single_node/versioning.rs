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

/// NoncurrentDays 5 over `n/`, keeping the newest noncurrent version of each key.
const KEEP_NEWEST_NONCURRENT: &str = "<Rule><ID>newer</ID><Status>Enabled</Status>\
     <Filter><Prefix>n/</Prefix></Filter><NoncurrentVersionExpiration>\
     <NoncurrentDays>5</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions>\
     </NoncurrentVersionExpiration></Rule>";

/// Expiration Days on a versioning-enabled bucket puts a delete marker over the current version
/// (HEAD 404) and keeps the version itself. Two passes so that the due one is a steady-state
/// replay (Go's router never does; docs/design-deviations.md#versioned-current-versions).
#[tokio::test]
async fn versioned_expiration_days_adds_delete_marker() {
    let mut s = Scenario::new("e2e-vers-days").versioned().build().await;
    let vid = s
        .put("cur/a", b"version one")
        .await
        .expect("versioned PUT returns a version id");
    s.put("keep/b", b"kept").await;
    s.put_rules(&days_rule("cur", "cur/", 30)).await;

    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.head("cur/a", None).await, 200);

    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    assert_eq!(
        s.head("cur/a", None).await,
        404,
        "current version should be hidden by a delete marker:\n{}",
        p.describe()
    );
    assert_eq!(s.head("cur/a", Some(&vid)).await, 200);
    let vs = s.versions("cur/").await;
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
    assert_eq!(s.head("keep/b", None).await, 200);
}

/// NoncurrentDays: v1 and v2 of a key become noncurrent when v3 lands; after the TTL both are
/// gone and v3 stays current.
#[tokio::test]
async fn noncurrent_days_expires_old_versions() {
    let mut s = Scenario::new("e2e-noncurrent").versioned().build().await;
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3"] {
        ids.push(s.put("nc/k", body).await.unwrap());
    }
    let other = s.put("other/k", b"o1").await.unwrap();
    s.put("other/k", b"o2").await.unwrap();
    s.put_rules(&noncurrent_rule("nc", "nc/", 5)).await;

    let p = s.pass_at(3, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.versions("nc/").await.len(), 3, "{}", p.describe());

    let p = s.pass_at(7, 0).await;
    let r = p.ok();
    let vs = s.versions("nc/").await;
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
    let ov = s.versions("other/").await;
    assert_eq!(ov.len(), 2, "{ov:?}");
    assert!(ov.iter().any(|v| v.version_id == other && !v.is_latest));
}

/// NoncurrentDays + NewerNoncurrentVersions=1: of v1..v4, only the newest noncurrent (v3) is
/// kept next to the current v4.
#[tokio::test]
async fn newer_noncurrent_versions_keeps_the_newest_noncurrent() {
    let mut s = Scenario::new("e2e-newer-nc").versioned().build().await;
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        ids.push(s.put("n/k", body).await.unwrap());
    }
    s.put_rules(KEEP_NEWEST_NONCURRENT).await;

    let p = s.pass_at(3, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.versions("n/").await.len(), 4, "{}", p.describe());

    let p = s.pass_at(7, 0).await;
    let r = p.ok();
    let vs = s.versions("n/").await;
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
    let mut s = Scenario::new("e2e-marker").versioned().build().await;
    let v1 = s.put("m/k", b"v1").await.unwrap();
    s.delete("m/k", None).await;
    // A marker with a surviving sibling outside the rule's prefix stays untouched throughout.
    s.put("x/k", b"x1").await;
    s.delete("x/k", None).await;
    s.put_rules(
        "<Rule><ID>m</ID><Status>Enabled</Status><Filter><Prefix>m/</Prefix></Filter>\
         <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>\
         <NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
    )
    .await;
    let before = s.versions("m/").await;
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.iter().any(|v| v.marker && v.is_latest));

    let p = s.pass_at(3, 0).await;
    p.ok();
    let vs = s.versions("m/").await;
    assert!(
        !vs.iter().any(|v| v.version_id == v1),
        "noncurrent v1 should be gone: {vs:?}\n{}",
        p.describe()
    );

    let p = s.pass_at(4, 0).await;
    p.ok();
    let vs = s.versions("m/").await;
    assert!(
        vs.is_empty(),
        "the lone delete marker should be gone: {vs:?}\n{}",
        p.describe()
    );
    assert_eq!(s.versions("x/").await.len(), 2);
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
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("l", "l/", 30)))
        .await
        .unwrap();
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
    let mut s = Scenario::new("e2e-susp").versioned().build().await;
    let v1 = s.put("s/k", b"v1").await.unwrap();
    set_versioning(&s.s3, &s.bucket, BucketVersioningStatus::Suspended).await;
    s.put("s/k", b"null body").await;
    s.put_rules(&days_rule("s", "s/", 30)).await;

    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.head("s/k", None).await, 200);

    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    assert_eq!(
        s.head("s/k", None).await,
        404,
        "latest should be a delete marker:\n{}",
        p.describe()
    );
    assert_eq!(s.head("s/k", Some(&v1)).await, 200);
    let vs = s.versions("s/").await;
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
    let mut s = Scenario::new("e2e-null").build().await;
    s.put("n/gone", b"pre").await;
    s.put("n/back", b"pre").await;
    enable_versioning(&s.s3, &s.bucket).await;
    let cur = s.put("n/gone", b"v1").await.unwrap();
    s.put("n/back", b"v1").await.unwrap();
    set_versioning(&s.s3, &s.bucket, BucketVersioningStatus::Suspended).await;
    s.put("n/back", b"null again").await;
    s.put_rules(&noncurrent_rule("nc", "n/", 5)).await;
    let before = s.versions("n/gone").await;
    assert_eq!(before.len(), 2, "{before:?}");

    let p = s.pass_at(3, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.versions("n/gone").await, before);

    let p = s.pass_at(7, 0).await;
    p.ok();
    assert_eq!(
        s.versions("n/gone").await,
        vec![Ver {
            key: "n/gone".into(),
            version_id: cur,
            is_latest: true,
            marker: false
        }],
        "the displaced null version should be gone:\n{}",
        p.describe()
    );
    let back = s.versions("n/back").await;
    assert!(
        back.iter()
            .any(|v| v.version_id == "null" && v.is_latest && !v.marker),
        "the rewritten null is current and must stay: {back:?}\n{}",
        p.describe()
    );
    assert_eq!(s.head("n/back", None).await, 200);
}

/// Removing the latest (a delete marker, or a newer version) by id restores an older version;
/// it must still expire under Expiration Days (deferred case B).
#[tokio::test]
async fn restored_version_still_expires() {
    let mut s = Scenario::new("e2e-restore").versioned().build().await;
    let a1 = s.put("r/a", b"a1").await.unwrap();
    s.delete("r/a", None).await;
    let marker = s
        .versions("r/a")
        .await
        .into_iter()
        .find(|v| v.marker)
        .expect("a delete marker")
        .version_id;
    s.delete("r/a", Some(&marker)).await;
    let b1 = s.put("r/b", b"b1").await.unwrap();
    let b2 = s.put("r/b", b"b2").await.unwrap();
    s.delete("r/b", Some(&b2)).await;
    assert_eq!(s.head("r/a", None).await, 200);
    assert_eq!(s.head("r/b", None).await, 200);
    s.put_rules(&days_rule("r", "r/", 30)).await;

    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();

    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    for (key, vid) in [("r/a", &a1), ("r/b", &b1)] {
        assert_eq!(
            s.head(key, None).await,
            404,
            "{key} should be expired (marker on top):\n{}",
            p.describe()
        );
        assert_eq!(s.head(key, Some(vid)).await, 200);
    }
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// ExpiredObjectDeleteMarker alone: a lone marker (DELETE of a key that never existed, or whose
/// only version was deleted by id) is removed; a marker over a live version stays.
#[tokio::test]
async fn lone_delete_markers_are_removed_others_stay() {
    let s = Scenario::new("e2e-lone-dm")
        .versioned()
        .rules(&delete_marker_rule("dm", "m/"))
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    s.delete("m/never", None).await;
    let v = s.put("m/byid", b"x").await.unwrap();
    s.delete("m/byid", None).await;
    s.delete("m/byid", Some(&v)).await;
    let kept = s.put("m/kept", b"x").await.unwrap();
    s.delete("m/kept", None).await;

    let p = s.pass_at(1, 0).await;
    let r = p.ok();
    assert!(s.versions("m/never").await.is_empty(), "{}", p.describe());
    assert!(s.versions("m/byid").await.is_empty(), "{}", p.describe());
    let k = s.versions("m/kept").await;
    assert_eq!(k.len(), 2, "{k:?}\n{}", p.describe());
    assert!(k.iter().any(|x| x.version_id == kept));
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// A DELETE while versioning is Suspended leaves a null delete marker, stored as
/// `<key>.versions/v_null`. The 4.48 gateway cannot fetch that version and
/// answers its `LifecycleDelete` NOT_FOUND; the pass confirmed the answer by
/// the bare entry alone and journaled the marker resolved every pass while it
/// stayed (docs/lifecycle-delete.md#null-markers). Whatever the gateway does,
/// the marker is either gone (DONE) or reported unresolved: never both there
/// and settled.
#[tokio::test]
async fn a_suspended_null_marker_was_journaled_resolved_while_it_stayed() {
    let s = Scenario::new("e2e-null-dm")
        .versioned()
        .rules(&delete_marker_rule("dm", "m/"))
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    set_versioning(&s.s3, &s.bucket, BucketVersioningStatus::Suspended).await;
    s.delete("m/lone", None).await;
    let before = s.versions("m/lone").await;
    assert!(
        before.len() == 1 && before[0].marker && before[0].version_id == "null",
        "one null delete marker: {before:?}"
    );

    let p = s.pass_at(1, 0).await;
    let r = p.ok();
    let left = s.versions("m/lone").await;
    if left.is_empty() {
        assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    } else {
        assert_eq!(r.total("DONE"), 0, "{}", p.describe());
        assert_eq!(r.totals("unconfirmed"), 1, "{}", p.describe());
        assert!(
            p.stderr.contains("still there, unchanged"),
            "{}",
            p.describe()
        );
    }
}

/// Versioned buckets under two shard subsets run separately: replay events shard by physical
/// path, the walker by logical key; together the subsets expire every current version once.
#[tokio::test]
async fn versioned_shard_subsets_expire_each_version_once() {
    let s = Scenario::new("e2e-vshards")
        .versioned()
        .rules(&days_rule("v", "v/", 30))
        .build()
        .await;
    for shards in ["0-7", "8-15"] {
        let p = s.pass_with(0, 1, &["--shards", shards], &[]).await;
        p.ok().assert_no_deletes();
    }
    let keys: Vec<String> = (0..20).map(|i| format!("v/k{i:02}")).collect();
    s.c.put_objects_bulk(&s.bucket, &keys, b"data")
        .await
        .unwrap();
    // A second version here would be the harness's, not the pass's.
    for k in &keys {
        let versions = s.versions(k).await;
        assert_eq!(versions.len(), 1, "{k} after one PUT: {versions:?}");
    }
    let mut done = 0;
    let mut passes = Vec::new();
    for shards in ["0-7", "8-15"] {
        let p = s.pass_with(32, 0, &["--shards", shards], &[]).await;
        done += p.ok().total("DONE");
        passes.push(p.describe());
    }
    for k in &keys {
        assert_eq!(s.head(k, None).await, 404, "{k}");
        let versions = s.versions(k).await;
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
    let s = Scenario::new("e2e-susp-steady")
        .versioned()
        .rules(&days_rule("s", "s/", 30))
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    let v1 = s.put("s/k", b"v1").await.unwrap();
    set_versioning(&s.s3, &s.bucket, BucketVersioningStatus::Suspended).await;
    s.put("s/k", b"null").await;
    s.put("s/only-null", b"null").await;
    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    for k in ["s/k", "s/only-null"] {
        assert_eq!(s.head(k, None).await, 404, "{k}\n{}", p.describe());
        let vs = s.versions(k).await;
        assert!(
            !vs.iter().any(|v| v.version_id == "null" && !v.marker),
            "{k}: {vs:?}\n{}",
            p.describe()
        );
    }
    assert_eq!(s.head("s/k", Some(&v1)).await, 200);
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Expiration Days never stacks a second delete marker on a key whose latest is already a
/// marker (walk and replay alike).
#[tokio::test]
async fn expiration_does_not_stack_delete_markers() {
    let mut s = Scenario::new("e2e-no-stack").versioned().build().await;
    s.put("e/old", b"x").await;
    s.delete("e/old", None).await;
    s.put_rules(&days_rule("e", "e/", 30)).await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    s.put("e/new", b"x").await;
    s.delete("e/new", None).await;
    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    r.assert_no_deletes();
    for k in ["e/old", "e/new"] {
        assert_eq!(s.versions(k).await.len(), 2, "{k}\n{}", p.describe());
    }
}

/// NoncurrentDays with NewerNoncurrentVersions on versions written after the first pass (the
/// router cannot rank versions; the steady walk must): keep the newest noncurrent, expire older.
#[tokio::test]
async fn newer_noncurrent_versions_in_steady_state() {
    let s = Scenario::new("e2e-newer-steady")
        .versioned()
        .rules(KEEP_NEWEST_NONCURRENT)
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        ids.push(s.put("n/k", body).await.unwrap());
    }
    let p = s.pass_at(3, 0).await;
    p.ok().assert_no_deletes();
    let p = s.pass_at(7, 0).await;
    let r = p.ok();
    let mut got: Vec<(String, bool)> = s
        .versions("n/")
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
    let s = Scenario::new("e2e-null-var")
        .objects(&["n/marked", "n/restored"], b"pre")
        .tagged("n/tagged", b"pre", "env=tmp")
        .objects(&["n/untagged"], b"pre")
        .tagged("n/other-tag", b"pre", "env=prod")
        .rules(&format!(
            "{}<Rule><ID>tag</ID><Status>Enabled</Status>\
             <Filter><And><Prefix>n/t</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag></And></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
            noncurrent_rule("nc", "n/", 5)
        ))
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();

    enable_versioning(&s.s3, &s.bucket).await;
    s.delete("n/marked", None).await;
    let v = s.put("n/restored", b"v1").await.unwrap();
    s.delete("n/restored", Some(&v)).await;
    for k in ["n/tagged", "n/untagged", "n/other-tag"] {
        s.put(k, b"v1").await.unwrap();
    }
    assert_eq!(s.head("n/restored", None).await, 200);

    // +4 d: only the 2-day tag rule is due, and only for the tagged null.
    let p = s.pass_at(4, 0).await;
    let r = p.ok();
    let nulls = |vs: Vec<Ver>| vs.iter().any(|v| v.version_id == "null" && !v.marker);
    assert!(!nulls(s.versions("n/tagged").await), "{}", p.describe());
    assert!(nulls(s.versions("n/untagged").await), "{}", p.describe());
    assert!(nulls(s.versions("n/other-tag").await), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());

    // +7 d: the 5-day rule: every displaced null goes; the restored (current) null stays.
    let p = s.pass_at(7, 0).await;
    p.ok();
    for k in ["n/marked", "n/untagged", "n/other-tag"] {
        assert!(!nulls(s.versions(k).await), "{k}\n{}", p.describe());
    }
    let m = s.versions("n/marked").await;
    assert!(m.len() == 1 && m[0].marker, "{m:?}");
    assert_eq!(
        s.head("n/restored", None).await,
        200,
        "a null that is current again must not be deleted:\n{}",
        p.describe()
    );
    assert!(nulls(s.versions("n/restored").await));
}

/// A pass at `--now` ahead of the clock read the meta-log on past its own start, into the
/// delete marker its own expiration had just written. The version that marker made noncurrent
/// looked noncurrent since the marker's real time, days before the pass's `now`, so the same
/// pass expired it too: in one pass, where a pass at that time would leave it a day
/// (docs/due-index.md#pass-start). Whether it happened hung on how soon the stream ended.
#[tokio::test]
async fn a_pass_read_its_own_delete_marker_and_expired_the_version_it_demoted() {
    let mut s = Scenario::new("e2e-own-marker").versioned().build().await;
    let vid = s.put("k/a", b"v1").await.unwrap();
    let rules = format!(
        "{}{}",
        days_rule("exp", "k/", 1),
        noncurrent_rule("nc", "k/", 1)
    );
    s.put_rules(&rules).await;

    // The walk of this first pass expires k/a: a marker over it, written now.
    let p = s.pass_at(3, 0).await;
    p.ok();
    let vs = s.versions("k/").await;
    assert!(
        vs.iter().any(|v| v.marker && v.is_latest),
        "the expiration put a marker: {vs:?}\n{}",
        p.describe()
    );
    assert!(
        vs.iter().any(|v| v.version_id == vid && !v.is_latest),
        "the version the pass's own marker demoted stays for a later pass: {vs:?}\n{}",
        p.describe()
    );

    // The next pass reads the marker as a new event: noncurrent since then, due a day on.
    let p = s.pass_at(4, 0).await;
    p.ok();
    let vs = s.versions("k/").await;
    assert!(
        !vs.iter().any(|v| v.version_id == vid),
        "noncurrent for a day past the marker: expired: {vs:?}\n{}",
        p.describe()
    );
}
