//! Nothing lost on the real SeaweedFS 4.48 cluster: a gateway answer that says "nothing to do"
//! while the object is still there does not excuse it from its rule; a locked version goes once
//! its lock ends; an abort rule never destroys an upload that was in fact completed, even after
//! `volume.vacuum`.
//!
//! Each test owns its buckets and cursor dir and travels in time with `--now`. Only the lock
//! test waits on the wall clock: the gateway checks retention against its own clock.

use crate::common;

use std::time::Duration;

use aws_sdk_s3::types::{ObjectLockLegalHold, ObjectLockLegalHoldStatus};
use s3_lifecycled::pb::filer_pb::Entry;
use s3_lifecycled::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_server::SeaweedS3LifecycleInternal;
use s3_lifecycled::pb::s3_lifecycle_pb::{
    LifecycleDeleteOutcome, LifecycleDeleteRequest, LifecycleDeleteResponse,
};

use common::*;

/// A gateway whose own filer reads all fail: it answers every delete `NOOP_RESOLVED NOT_FOUND`,
/// as the 4.48 gateway does when its live fetch errors (docs/lifecycle-delete.md#server-lookup-failures).
struct LostAnswers;

#[tonic::async_trait]
impl SeaweedS3LifecycleInternal for LostAnswers {
    async fn lifecycle_delete(
        &self,
        _request: tonic::Request<LifecycleDeleteRequest>,
    ) -> Result<tonic::Response<LifecycleDeleteResponse>, tonic::Status> {
        Ok(tonic::Response::new(LifecycleDeleteResponse {
            outcome: LifecycleDeleteOutcome::NoopResolved as i32,
            reason: "NOT_FOUND".into(),
        }))
    }
}

/// Starts [`LostAnswers`] on a loopback port; returns its address.
async fn lost_answers_gateway() -> String {
    serve_gateway(LostAnswers).await
}

/// Lost-looking answers (docs/lifecycle-delete.md#server-lookup-failures): every delete is
/// answered NOT_FOUND while the objects are there. The pass resends each twice, does not halt, counts them unconfirmed
/// and leaves them unresolved; the next pass, against the real gateway, deletes every one of them.
#[tokio::test]
async fn lost_gateway_answers_do_not_excuse_objects_from_their_rule() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("lost-answers").await.unwrap();
    let ks = keys("lost/", 5);
    for k in &ks {
        put(&s3, &b, k, b"still here", None).await;
    }
    put(&s3, &b, "keep/one", b"no rule", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("lost", "lost/", 1)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let fake = lost_answers_gateway().await;

    let p = run_once_via(c, &scope, plus(t0, 3, 0), &fake, &[]).await;
    let r1 = p.ok();
    // Each sent once and resent twice within the pass (a store still holds it), then left.
    let sends = 1 + i64::from(s3_lifecycled::pass::shard_run::STILL_THERE_RESENDS);
    assert_eq!(r1.total("NOOP_RESOLVED"), 5 * sends, "{}", p.describe());
    assert_eq!(r1.totals("unconfirmed"), 5, "{}", p.describe());
    for k in ["RETRY_LATER", "BLOCKED", "RPC_ERROR"] {
        assert_eq!(r1.total(k), 0, "{k}: no halt\n{}", p.describe());
    }
    assert_eq!(count_objects(&s3, &b).await, 6, "nothing was deleted");

    let p2 = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    let r = p2.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["keep/one"]),
        "the next pass deletes them\n{}",
        p2.describe()
    );
    assert_eq!(r.total("DONE"), 5, "{}", p2.describe());
    assert_eq!(r.totals("unconfirmed"), 0, "{}", p2.describe());
    assert_eq!(r1.totals("unconfirmed"), 5, "{}", p.describe());
}

/// Lost-looking answers on a versioned bucket: the latest version lives under `<key>.versions`, a
/// noncurrent one is named by its id. Both NOT_FOUND answers are unconfirmed; the next pass
/// expires the key (delete marker) and deletes the noncurrent version.
#[tokio::test]
async fn lost_gateway_answers_do_not_excuse_versions_from_their_rule() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("lost-versions").await.unwrap();
    enable_versioning(&s3, &b).await;
    let old = put(&s3, &b, "lost/k", b"old", None).await.unwrap();
    put(&s3, &b, "lost/k", b"new", None).await.unwrap();
    let rules = lifecycle(
        "<Rule><ID>lv</ID><Status>Enabled</Status><Filter><Prefix>lost/</Prefix></Filter>\
         <Expiration><Days>1</Days></Expiration>\
         <NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let fake = lost_answers_gateway().await;

    let p = run_once_via(c, &scope, plus(t0, 3, 0), &fake, &[]).await;
    let r1 = p.ok();
    assert_eq!(head_status(&s3, &b, "lost/k", None).await, 200);
    assert_eq!(head_status(&s3, &b, "lost/k", Some(&old)).await, 200);

    let p2 = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    p2.ok();
    assert_eq!(
        head_status(&s3, &b, "lost/k", Some(&old)).await,
        404,
        "noncurrent version deleted by the next pass\n{}",
        p2.describe()
    );
    assert_eq!(
        head_status(&s3, &b, "lost/k", None).await,
        404,
        "key expired (delete marker) by the next pass\n{}",
        p2.describe()
    );
    assert_eq!(r1.totals("unconfirmed"), 2, "{}", p.describe());
}

/// Object lock (docs/lifecycle-delete.md#object-lock): a noncurrent version under GOVERNANCE
/// retention is kept while retained and deleted at the first pass after its retain-until date; a
/// version under legal hold is kept until the hold is removed, then deleted. Neither halts a
/// shard.
#[tokio::test]
async fn locked_versions_expire_once_their_lock_ends() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = new_lock_bucket(c, "lock-ends").await;
    // The gateway checks retention against its own clock: a date a few seconds ahead.
    let until_s = now_ns() / 1_000_000_000 + 8;
    let retained = put_locked(
        &s3,
        &b,
        "v/retained",
        b"retained",
        Lock::Governance(until_s),
    )
    .await;
    let held = put_locked(&s3, &b, "v/held", b"held", Lock::LegalHold).await;
    for k in ["v/retained", "v/held"] {
        put(&s3, &b, k, b"current", None).await;
    }
    c.put_lifecycle_xml(&b, &lifecycle(&noncurrent_rule("nc", "v/", 1)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "v/retained", Some(&retained)).await,
        200
    );
    assert_eq!(head_status(&s3, &b, "v/held", Some(&held)).await, 200);
    assert!(r.total("SKIPPED_OBJECT_LOCK") >= 2, "{}", p.describe());
    for k in ["RETRY_LATER", "BLOCKED", "RPC_ERROR"] {
        assert_eq!(r.total(k), 0, "{k}: a lock never halts\n{}", p.describe());
    }
    let (first, first_locked) = (p.describe(), r.totals("locked"));

    wait_until_clock_passes((until_s + 1) * 1_000_000_000, Duration::from_secs(30)).await;
    let p = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "v/retained", Some(&retained)).await,
        404,
        "retention ended: deleted\n{}",
        p.describe()
    );
    assert_eq!(
        head_status(&s3, &b, "v/held", Some(&held)).await,
        200,
        "still held\n{}",
        p.describe()
    );
    assert_eq!(r.totals("locked"), 1, "{}", p.describe());
    assert_eq!(first_locked, 2, "{first}");

    s3.put_object_legal_hold()
        .bucket(&b)
        .key("v/held")
        .version_id(&held)
        .legal_hold(
            ObjectLockLegalHold::builder()
                .status(ObjectLockLegalHoldStatus::Off)
                .build(),
        )
        .content_md5(content_md5(b"<LegalHold><Status>OFF</Status></LegalHold>"))
        .send()
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 3, 2)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "v/held", Some(&held)).await,
        404,
        "hold removed: deleted\n{}",
        p.describe()
    );
    assert_eq!(r.totals("locked"), 0, "{}", p.describe());
    for k in ["v/retained", "v/held"] {
        assert_eq!(
            head_status(&s3, &b, k, None).await,
            200,
            "current {k} stays"
        );
    }
}

/// 1 MiB of a pattern that no two offsets share cheaply (so a wrong chunk cannot pass).
fn body() -> Vec<u8> {
    (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Completes a one-part upload of `data` to `key`, after copying its `.uploads/<id>` folder
/// and parts; then restores that copy through the filer, so the folder is the leftover a
/// completion that failed to clean up would leave. Returns the upload id and the version id
/// the completion returned (if any).
async fn complete_and_leave_leftover(
    c: &Cluster,
    s3: &aws_sdk_s3::Client,
    b: &str,
    key: &str,
    data: &[u8],
) -> (String, Option<String>) {
    let id = start_upload(s3, b, key).await;
    let etag = upload_part(s3, b, key, &id, 1, data).await;
    let uploads = format!("{}/{b}/.uploads", c.buckets_root());
    let filer = c.filer().await;
    let folder: Entry = filer
        .lookup(&uploads, &id)
        .await
        .unwrap()
        .expect("upload folder");
    let parts = filer
        .list_page(&format!("{uploads}/{id}"), "", 1000)
        .await
        .unwrap();
    assert!(!parts.is_empty(), "the upload has its part entries");
    let version = complete_upload(s3, b, key, &id, &etag)
        .await
        .unwrap()
        .version_id()
        .map(str::to_string);
    assert!(
        filer.lookup(&uploads, &id).await.unwrap().is_none(),
        "completion removed the upload folder"
    );
    filer.create_entry(&uploads, folder, false).await.unwrap();
    for p in parts {
        filer
            .create_entry(&format!("{uploads}/{id}"), p, false)
            .await
            .unwrap();
    }
    (id, version)
}

/// `weed shell volume.vacuum` with a threshold low enough to compact any freed byte.
async fn vacuum(c: &Cluster) {
    c.weed_shell("lock\nvolume.vacuum -garbageThreshold=0.0000001\nunlock")
        .await;
}

async fn get_body(s3: &aws_sdk_s3::Client, b: &str, key: &str, version: Option<&str>) -> Vec<u8> {
    let mut req = s3.get_object().bucket(b).key(key);
    if let Some(v) = version {
        req = req.version_id(v);
    }
    let out = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {b}/{key} {version:?}: {e:?}"));
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

/// Runs a pass past an abort rule over a completed upload's leftover and checks that it was
/// not aborted (counted as a leftover) and that the object reads back after vacuum.
async fn abort_rule_spares_leftover(versioned: bool) {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c
        .new_bucket(if versioned { "leftover-v" } else { "leftover" })
        .await
        .unwrap();
    if versioned {
        enable_versioning(&s3, &b).await;
    }
    let data = body();
    let (id, version) = complete_and_leave_leftover(c, &s3, &b, "up/obj.bin", &data).await;
    if versioned {
        // The completed version becomes noncurrent: it is only under obj.bin.versions.
        put(&s3, &b, "up/obj.bin", b"newer", None).await;
    }
    assert_eq!(
        list_uploads(&s3, &b).await,
        set(&[id.as_str()]),
        "leftover listed"
    );
    c.put_lifecycle_xml(&b, &lifecycle(&abort_upload_rule("mpu", "up/", 1)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    // The filer frees a deleted entry's chunks in the background: give a wrong abort time
    // to reach the volume before vacuum, or the check below could not see it (observed: a
    // vacuum right after a data delete still read the object back; 5 s later it failed).
    tokio::time::sleep(Duration::from_secs(5)).await;
    vacuum(c).await;
    let v = if versioned { version.as_deref() } else { None };
    assert!(
        !versioned || v.is_some(),
        "a versioned completion returns a version id"
    );
    let got = get_body(&s3, &b, "up/obj.bin", v).await;
    assert!(
        got == data,
        "object reads back byte for byte after volume.vacuum ({} bytes read)\n{}",
        got.len(),
        p.describe()
    );
    assert_eq!(r.total("DONE"), 0, "no abort sent\n{}", p.describe());
    assert_eq!(list_uploads(&s3, &b).await, set(&[id.as_str()]));
    assert_eq!(
        r.totals("completed_upload_leftovers"),
        1,
        "{}",
        p.describe()
    );
    assert_eq!(r.totals("unconfirmed"), 0, "{}", p.describe());
}

/// Completed-upload leftovers (docs/lifecycle-delete.md#completed-upload-leftovers),
/// unversioned bucket: the destination entry carries the upload's stamp.
#[tokio::test]
async fn abort_rule_never_destroys_a_completed_uploads_leftover() {
    abort_rule_spares_leftover(false).await;
}

/// Completed-upload leftovers, versioned bucket: the stamp is on a (noncurrent) version under
/// `<key>.versions`.
#[tokio::test]
async fn abort_rule_never_destroys_a_completed_uploads_leftover_in_a_versioned_bucket() {
    abort_rule_spares_leftover(true).await;
}
