//! End-to-end tests of `s3-lifecycled run-once` against a real SeaweedFS 4.48 cluster: every
//! lifecycle action kind, filters, versioning, object lock, rules added late, idempotence,
//! dry runs, configuration and connection errors, and a malformed bucket document.
//!
//! Each test owns its buckets (`--buckets`) and its cursor dir, travels in time with `--now`
//! (never backwards within one cursor dir) instead of rewriting mtimes, checks effects through
//! the S3 API and counters through the `--json` report. Due times default to next-midnight-UTC
//! rounding, so "not yet" runs stay below the TTL and "due" runs go past TTL + 1 day.

use crate::common;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

use common::*;

/// Expiration Days with an And filter (prefix + tag + size) and a plain prefix rule: nothing
/// before due, exactly the matching objects after, through the steady-state replay (the first
/// pass is a cold start that finds nothing due and rewinds; the later passes replay the PUTs).
#[tokio::test]
async fn expiration_days_honours_prefix_tag_and_size_filters() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-days-filters").await.unwrap();
    let big = vec![b'x'; 200];
    let small = vec![b'x'; 50];
    put(&s3, &b, "logs/match-1", &big, Some("env=tmp")).await;
    put(&s3, &b, "logs/match-2", &big, Some("env=tmp&team=a")).await;
    put(&s3, &b, "logs/too-small", &small, Some("env=tmp")).await;
    put(&s3, &b, "logs/untagged", &big, None).await;
    put(&s3, &b, "logs/wrong-tag", &big, Some("env=prod")).await;
    put(&s3, &b, "other/tagged", &big, Some("env=tmp")).await;
    put(&s3, &b, "plain/a", &small, None).await;
    put(&s3, &b, "plain/b", &big, Some("env=prod")).await;
    put(&s3, &b, "plainx/c", &small, None).await;
    let rules = lifecycle(
        "<Rule><ID>tagged-logs</ID><Status>Enabled</Status>\
           <Filter><And><Prefix>logs/</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag>\
           <ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter>\
           <Expiration><Days>30</Days></Expiration></Rule>\
         <Rule><ID>plain</ID><Status>Enabled</Status><Filter><Prefix>plain/</Prefix></Filter>\
           <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let all = list_keys(&s3, &b).await;
    assert_eq!(all.len(), 9);
    let scope = Scope::new(&[&b]);

    // Not yet due (cold start: recovery walk finds nothing).
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_delete_keys_present();
    r.assert_no_deletes();
    assert_eq!(r.v["dry_run"], false, "{}", p.describe());
    assert_eq!(
        r.v["now_ns"].as_i64(),
        Some(plus(t0, 10, 0) / 1_000_000_000 * 1_000_000_000),
        "now_ns must be the --now instant:\n{}",
        p.describe()
    );
    assert_eq!(
        r.shards().len(),
        16,
        "default shards 0-15:\n{}",
        p.describe()
    );
    assert!(
        r.recovery_reasons(&b).contains("cold_start"),
        "first pass over a fresh cursor dir is a cold start:\n{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, all);

    // Still one day short of the TTL (rounding only ever moves due times later).
    let p = run_once(c, &scope, Some(plus(t0, 29, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(&s3, &b).await, all, "{}", p.describe());

    // Past due: exactly the matching objects go.
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&[
            "logs/too-small",
            "logs/untagged",
            "logs/wrong-tag",
            "other/tagged",
            "plainx/c"
        ]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 4, "{}", p.describe());
    for k in [
        "SKIPPED_OBJECT_LOCK",
        "RETRY_LATER",
        "BLOCKED",
        "RPC_ERROR",
        "DRY_RUN",
    ] {
        assert_eq!(r.total(k), 0, "{k}:\n{}", p.describe());
    }
    let left = list_keys(&s3, &b).await;

    // The same instant again (idempotence on the replay path): nothing more goes.
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(&s3, &b).await, left, "{}", p.describe());
}

/// A second pass at the same `--now` finds nothing more to delete and still exits 0.
#[tokio::test]
async fn second_run_with_same_now_is_idempotent() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-idem").await.unwrap();
    for k in ["tmp/1", "tmp/2", "tmp/3", "keep/1"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rules = lifecycle(
        "<Rule><ID>tmp</ID><Status>Enabled</Status><Filter><Prefix>tmp/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let at = plus(t0, 40, 0);

    let p = run_once(c, &scope, Some(at), &[], &[]).await;
    assert_eq!(p.ok().total("DONE"), 3, "{}", p.describe());
    assert_eq!(list_keys(&s3, &b).await, set(&["keep/1"]));

    let p = run_once(c, &scope, Some(at), &[], &[]).await;
    let r = p.ok();
    r.assert_delete_keys_present();
    r.assert_no_deletes();
    assert!(
        r.recovery_reasons(&b).is_empty(),
        "same rules, same cursor dir: no recovery expected:\n{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, set(&["keep/1"]));
}

/// Expiration Date in the past: due on the first pass; objects outside the prefix stay.
#[tokio::test]
async fn expiration_date_in_the_past_deletes_on_first_run() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-date").await.unwrap();
    for k in ["old/1", "old/2", "old/deep/3", "keep/1", "oldx"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rules = lifecycle(
        "<Rule><ID>date</ID><Status>Enabled</Status><Filter><Prefix>old/</Prefix></Filter>\
         <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(now_ns(), 0, 1)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["keep/1", "oldx"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
}

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

/// AbortIncompleteMultipartUpload: a stale upload with one part is aborted; a completed upload's
/// object and an upload outside the prefix are untouched.
#[tokio::test]
async fn abort_incomplete_multipart_upload() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-mpu").await.unwrap();
    let start = |key: &'static str| {
        let s3 = s3.clone();
        let b = b.clone();
        async move {
            let id = start_upload(&s3, &b, key).await;
            let etag = s3
                .upload_part()
                .bucket(&b)
                .key(key)
                .upload_id(&id)
                .part_number(1)
                .body(ByteStream::from_static(b"one small part"))
                .send()
                .await
                .unwrap()
                .e_tag()
                .unwrap()
                .to_string();
            (id, etag)
        }
    };
    let (stale, _) = start("up/pending.bin").await;
    let (outside, _) = start("other/pending.bin").await;
    let (done_id, done_etag) = start("up/done.bin").await;
    s3.complete_multipart_upload()
        .bucket(&b)
        .key("up/done.bin")
        .upload_id(&done_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(
                    CompletedPart::builder()
                        .part_number(1)
                        .e_tag(done_etag)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let rules = lifecycle(
        "<Rule><ID>mpu</ID><Status>Enabled</Status><Filter><Prefix>up/</Prefix></Filter>\
         <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    assert_eq!(
        list_uploads(&s3, &b).await,
        set(&[stale.as_str(), outside.as_str()])
    );

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_uploads(&s3, &b).await,
        set(&[stale.as_str(), outside.as_str()])
    );

    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_uploads(&s3, &b).await,
        set(&[outside.as_str()]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert_eq!(head_status(&s3, &b, "up/done.bin", None).await, 200);
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

/// A rule added after its objects are already older than its TTL still catches them: a pass
/// with no rule at +40 d, then a 30-day rule, then a pass at +41 d deletes them via the
/// recovery walk.
#[tokio::test]
async fn rule_added_later_catches_already_old_objects() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-late-rule").await.unwrap();
    for k in ["pre/1", "pre/2", "pre/3", "pre/4", "pre/5", "other/keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let all = list_keys(&s3, &b).await;

    let p = run_once(c, &scope, Some(plus(t0, 40, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(&s3, &b).await, all, "{}", p.describe());

    let rules = lifecycle(
        "<Rule><ID>pre</ID><Status>Enabled</Status><Filter><Prefix>pre/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 41, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["other/keep"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 5, "{}", p.describe());
    let reasons = r.recovery_reasons(&b);
    assert!(
        reasons.contains("cold_start") || reasons.contains("rule_edit"),
        "recovery reasons for {b}: {reasons:?}\n{}",
        p.describe()
    );
}

/// Editing the rules (a new rule for `b/` next to the existing `a/` one) is a `rule_edit`
/// recovery: objects the new rule covers, already past its TTL and written before the cursor,
/// are found by the recovery walk; the old rule's objects go too.
#[tokio::test]
async fn rule_edit_recovery_catches_objects_before_the_cursor() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-rule-edit").await.unwrap();
    // b/ first, so that its PUT events lie before the a/ event the cursor waits at.
    for k in ["b/1", "b/2", "a/1", "a/2", "c/keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rule = |prefix: &str| {
        format!(
            "<Rule><ID>{prefix}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}/</Prefix></Filter>\
             <Expiration><Days>30</Days></Expiration></Rule>"
        )
    };
    c.put_lifecycle_xml(&b, &lifecycle(&rule("a")))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    c.put_lifecycle_xml(&b, &lifecycle(&format!("{}{}", rule("a"), rule("b"))))
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 41, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        r.recovery_reasons(&b),
        set(&["rule_edit"]),
        "{}",
        p.describe()
    );
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["c/keep"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 4, "{}", p.describe());
}

/// After DeleteBucketLifecycle the bucket's objects are left alone, even past the old TTL.
#[tokio::test]
async fn deleted_lifecycle_stops_expirations() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-lc-deleted").await.unwrap();
    for k in ["x/1", "x/2"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rules = lifecycle(
        "<Rule><ID>x</ID><Status>Enabled</Status><Filter><Prefix>x/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    s3.delete_bucket_lifecycle()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 41, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["x/1", "x/2"]),
        "{}",
        p.describe()
    );
}

/// A rule whose Status is not exactly `Enabled` never fires.
#[tokio::test]
async fn disabled_rule_never_fires() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-disabled").await.unwrap();
    put(&s3, &b, "x/1", b"data", None).await;
    let rules = lifecycle(
        "<Rule><ID>off</ID><Status>Disabled</Status><Filter><Prefix>x/</Prefix></Filter>\
         <Expiration><Days>1</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(now_ns(), 41, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(&s3, &b).await, set(&["x/1"]), "{}", p.describe());
}

/// `--dry-run` reports the deletes it would make, deletes nothing and writes no cursor (the
/// next real pass at the same `--now` is still a cold start, and then deletes).
#[tokio::test]
async fn dry_run_deletes_nothing_and_writes_no_cursor() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-dry").await.unwrap();
    for k in ["d/1", "d/2", "d/3", "k/1"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rules = lifecycle(
        "<Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix>d/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let all = list_keys(&s3, &b).await;
    let at = plus(t0, 32, 0);

    let p = run_once(c, &scope, Some(at), &["--dry-run"], &[]).await;
    let r = p.ok();
    assert_eq!(r.v["dry_run"], true, "{}", p.describe());
    assert_eq!(list_keys(&s3, &b).await, all, "{}", p.describe());
    assert_eq!(r.total("DRY_RUN"), 3, "{}", p.describe());
    assert_eq!(r.total("DONE"), 0, "{}", p.describe());
    for shard in 0..16 {
        let name = format!("shard-{shard:02}.json");
        let cursor = c.lookup_entry(&scope.cursor_dir, &name).await.unwrap();
        assert!(
            cursor.is_none(),
            "dry run wrote {}/{name}",
            scope.cursor_dir
        );
    }

    let p = run_once(c, &scope, Some(at), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).contains("cold_start"),
        "a dry run must leave no cursor behind:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
    assert_eq!(r.total("DRY_RUN"), 0, "{}", p.describe());
    assert_eq!(list_keys(&s3, &b).await, set(&["k/1"]));
    // The absence check above means something only if a real pass does write cursors there.
    let mut written = 0;
    for shard in 0..16 {
        let name = format!("shard-{shard:02}.json");
        written += usize::from(
            c.lookup_entry(&scope.cursor_dir, &name)
                .await
                .unwrap()
                .is_some(),
        );
    }
    assert!(
        written > 0,
        "a real pass wrote no cursor under {}",
        scope.cursor_dir
    );
}

/// Configuration and usage errors exit 2 and name the key or flag; nothing is deleted.
#[tokio::test]
async fn config_errors_exit_2_naming_the_key() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-cfg").await.unwrap();
    put(&s3, &b, "old/1", b"data", None).await;
    let rules = lifecycle(
        "<Rule><ID>date</ID><Status>Enabled</Status><Filter><Prefix>old/</Prefix></Filter>\
         <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let scope = Scope::new(&[&b]);

    let p = run_once(
        c,
        &scope,
        None,
        &[],
        &[("S3_LIFECYCLED__PASS__SHARDS", "99")],
    )
    .await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("pass.shards") || p.stderr.contains("S3_LIFECYCLED__PASS__SHARDS"),
        "stderr should name the key:\n{}",
        p.describe()
    );

    let p = run_once(c, &scope, None, &["--shards", "99"], &[]).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("--shards"), "{}", p.describe());

    let p = run_once(c, &scope, None, &["--now", "yesterday-ish"], &[]).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("--now"), "{}", p.describe());

    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["old/1"]),
        "a rejected configuration must not run a pass"
    );
}

/// An unreachable filer is a runtime error (exit 1) whose message names the address.
#[tokio::test]
async fn unreachable_filer_exits_1_naming_the_address() {
    let c = common::cluster();
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "run-once",
        "--filer",
        &addr,
        "--s3-grpc",
        &c.s3_grpc_addr().to_string(),
        "--buckets",
        "e2e-no-such-bucket",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = run_raw(
        &args,
        &[(
            "S3_LIFECYCLED__CURSOR__DIR",
            "/etc/s3/lifecycle/e2e-unreachable",
        )],
    )
    .await;
    assert_eq!(p.code, 1, "{}", p.describe());
    assert!(
        p.stderr.contains(&addr),
        "stderr should name {addr}:\n{}",
        p.describe()
    );
}

/// A bucket whose stored lifecycle document is malformed (written straight into the bucket
/// entry; S3 would refuse it at PUT) is reported and skipped; the other bucket's expirations
/// still happen in the same pass.
#[tokio::test]
async fn malformed_bucket_document_does_not_stop_other_buckets() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let bad = c.new_bucket("e2e-bad-doc").await.unwrap();
    let good = c.new_bucket("e2e-good-doc").await.unwrap();
    put(&s3, &bad, "old/1", b"data", None).await;
    for k in ["old/1", "old/2", "keep/1"] {
        put(&s3, &good, k, b"data", None).await;
    }
    c.set_extended(
        "/buckets",
        &bad,
        common::s3::LIFECYCLE_XML_KEY,
        Some(b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Expiration><Days>1</Days>"),
    )
    .await
    .unwrap();
    let rules = lifecycle(
        "<Rule><ID>date</ID><Status>Enabled</Status><Filter><Prefix>old/</Prefix></Filter>\
         <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&good, &rules).await.unwrap();
    let scope = Scope::new(&[&bad, &good]);

    let p = run_once(c, &scope, Some(plus(now_ns(), 0, 1)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &good).await,
        set(&["keep/1"]),
        "{}",
        p.describe()
    );
    assert_eq!(
        list_keys(&s3, &bad).await,
        set(&["old/1"]),
        "{}",
        p.describe()
    );
    assert!(
        p.stderr.contains(&format!("warning: bucket {bad}: ")),
        "stderr should warn about {bad}:\n{}",
        p.describe()
    );
    assert!(
        r.bucket_errors()
            .iter()
            .any(|(name, reason)| name == &bad && !reason.is_empty()),
        "bucket_errors should name {bad}:\n{}",
        p.describe()
    );
    assert!(
        !r.bucket_errors().iter().any(|(name, _)| name == &good),
        "{}",
        p.describe()
    );
}
