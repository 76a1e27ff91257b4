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

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

use common::*;

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

/// A whole-bucket Expiration rule (no AbortIncompleteMultipartUpload) must not touch a pending
/// multipart upload's parts: the upload can still be completed afterwards.
#[tokio::test]
async fn expiration_rule_leaves_pending_multipart_parts_alone() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-mpu-parts").await.unwrap();
    put(&s3, &b, "plain", b"data", None).await;
    let up = start_upload(&s3, &b, "big.bin").await;
    let etag = s3
        .upload_part()
        .bucket(&b)
        .key("big.bin")
        .upload_id(&up)
        .part_number(1)
        .body(ByteStream::from_static(b"part one"))
        .send()
        .await
        .unwrap()
        .e_tag()
        .unwrap()
        .to_string();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("all", "", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "only `plain`:\n{}", p.describe());
    assert_eq!(head_status(&s3, &b, "plain", None).await, 404);
    assert_eq!(list_uploads(&s3, &b).await, set(&[up.as_str()]));
    s3.complete_multipart_upload()
        .bucket(&b)
        .key("big.bin")
        .upload_id(&up)
        .multipart_upload(
            aws_sdk_s3::types::CompletedMultipartUpload::builder()
                .parts(
                    aws_sdk_s3::types::CompletedPart::builder()
                        .part_number(1)
                        .e_tag(etag)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("completing after the pass: {e:?}\n{}", p.describe()));
    assert_eq!(head_status(&s3, &b, "big.bin", None).await, 200);
}
