//! Multipart uploads through `run-once` on the shared cluster: stale uploads
//! aborted, and an expiration rule never touching an upload's pending parts.
//!
//! Each test owns its buckets (`--buckets`) and its cursor dir, travels in time
//! with `--now` (never backwards within one cursor dir) and checks effects
//! through the S3 API and counters through the `--json` report. Due times
//! default to next-midnight-UTC rounding, so "not yet" runs stay below the TTL
//! and "due" runs go past TTL + 1 day. Tests that need a real gap between two
//! writes use a 10 s lifecycle day and sleep a few seconds between the writes.

use crate::common;

use common::*;

/// AbortIncompleteMultipartUpload: a stale upload with one part is aborted; a completed upload's
/// object and an upload outside the prefix are untouched.
#[tokio::test]
async fn abort_incomplete_multipart_upload() {
    let mut s = Scenario::new("e2e-mpu").build().await;
    let start = |key: &'static str| {
        let (s3, b) = (s.s3.clone(), s.bucket.clone());
        async move {
            let id = start_upload(&s3, &b, key).await;
            let etag = upload_part(&s3, &b, key, &id, 1, b"one small part").await;
            (id, etag)
        }
    };
    let (stale, _) = start("up/pending.bin").await;
    let (outside, _) = start("other/pending.bin").await;
    let (done_id, done_etag) = start("up/done.bin").await;
    complete_upload(&s.s3, &s.bucket, "up/done.bin", &done_id, &done_etag)
        .await
        .unwrap();
    s.put_rules(&abort_upload_rule("mpu", "up/", 2)).await;
    assert_eq!(
        list_uploads(&s.s3, &s.bucket).await,
        set(&[stale.as_str(), outside.as_str()])
    );

    let p = s.pass_at(1, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_uploads(&s.s3, &s.bucket).await,
        set(&[stale.as_str(), outside.as_str()])
    );

    let p = s.pass_at(4, 0).await;
    let r = p.ok();
    assert_eq!(
        list_uploads(&s.s3, &s.bucket).await,
        set(&[outside.as_str()]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert_eq!(s.head("up/done.bin", None).await, 200);
}

/// A whole-bucket Expiration rule (no AbortIncompleteMultipartUpload) must not touch a pending
/// multipart upload's parts: the upload can still be completed afterwards.
#[tokio::test]
async fn expiration_rule_leaves_pending_multipart_parts_alone() {
    let mut s = Scenario::new("e2e-mpu-parts").build().await;
    s.put("plain", b"data").await;
    let up = start_upload(&s.s3, &s.bucket, "big.bin").await;
    let etag = upload_part(&s.s3, &s.bucket, "big.bin", &up, 1, b"part one").await;
    s.put_rules(&days_rule("all", "", 30)).await;
    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();
    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "only `plain`:\n{}", p.describe());
    assert_eq!(s.head("plain", None).await, 404);
    assert_eq!(list_uploads(&s.s3, &s.bucket).await, set(&[up.as_str()]));
    complete_upload(&s.s3, &s.bucket, "big.bin", &up, &etag)
        .await
        .unwrap_or_else(|e| panic!("completing after the pass: {e:?}\n{}", p.describe()));
    assert_eq!(s.head("big.bin", None).await, 200);
}
