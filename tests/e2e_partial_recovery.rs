//! Partial recovery (issue 11 item 1) on the real SeaweedFS 4.48 cluster: when only some shards
//! recover, the versions and uploads whose *physical* path hashes to a recovering shard but
//! whose logical key (or upload destination) hashes to another one are still deleted once due
//! (docs/design-deviations.md#walk-coverage).

mod common;

use aws_sdk_s3::primitives::ByteStream;
use s3_lifecycled::engine::shard_id;

use common::*;

fn cursor_args(c: &common::Cluster, v: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    a.extend(["--filer".to_string(), c.filer_grpc_addr().to_string()]);
    a
}

/// A versioned bucket with noncurrent versions and incomplete uploads spread over many shards;
/// a cold first pass while nothing is due; then one shard's cursor is reset. That shard is
/// chosen so that due noncurrent versions and uploads have their physical path on it but their
/// logical key / destination on another shard. A pass after everything is due must delete
/// every noncurrent version and abort every upload.
#[tokio::test]
async fn resetting_one_shard_still_deletes_every_due_version_and_upload() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("partial-rec").await.unwrap();
    enable_versioning(&s3, &b).await;
    let ks = keys("pr/", 24);
    for k in &ks {
        for body in [&b"v1"[..], b"v2", b"v3"] {
            put(&s3, &b, k, body, None).await;
        }
    }
    let mut uploads = Vec::new();
    for i in 0..24 {
        let key = format!("pr/up-{i:02}");
        let id = s3
            .create_multipart_upload()
            .bucket(&b)
            .key(&key)
            .send()
            .await
            .unwrap()
            .upload_id()
            .unwrap()
            .to_string();
        s3.upload_part()
            .bucket(&b)
            .key(&key)
            .upload_id(&id)
            .part_number(1)
            .body(ByteStream::from_static(b"part"))
            .send()
            .await
            .unwrap();
        uploads.push((key, id));
    }
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>pr/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration>\
             <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    // Cold start of every shard while nothing is due.
    let p = run_once(c, &scope, Some(t0), &[], &[]).await;
    p.ok().assert_no_deletes();
    let noncurrent: Vec<Ver> = list_versions(&s3, &b, "pr/")
        .await
        .into_iter()
        .filter(|v| !v.is_latest)
        .collect();
    assert_eq!(noncurrent.len(), 48, "{}", p.describe());
    assert_eq!(list_uploads(&s3, &b).await.len(), 24);

    // The shard that replays the most items it does not walk.
    let mut misplaced = [0usize; 16];
    for v in &noncurrent {
        let phys = shard_id(&b, &format!("{}.versions/v_{}", v.key, v.version_id));
        if phys != shard_id(&b, &v.key) {
            misplaced[usize::from(phys)] += 1;
        }
    }
    for (key, id) in &uploads {
        let phys = shard_id(&b, &format!(".uploads/{id}"));
        if phys != shard_id(&b, key) {
            misplaced[usize::from(phys)] += 1;
        }
    }
    let (n, count) = misplaced
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(n, c)| (n, *c))
        .unwrap();
    assert!(count > 0, "no item replays on a shard other than its walk shard: {misplaced:?}");

    let env = [("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    let shard = n.to_string();
    let reset = run_raw(
        &cursor_args(c, &["cursor", "reset", "--shards", &shard, "--yes"]),
        &env,
    )
    .await;
    assert_eq!(reset.code, 0, "{}", reset.describe());

    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    let r = p.ok();
    let left: Vec<Ver> = list_versions(&s3, &b, "pr/")
        .await
        .into_iter()
        .filter(|v| !v.is_latest)
        .collect();
    let left_uploads = list_uploads(&s3, &b).await;
    assert!(
        left.is_empty() && left_uploads.is_empty(),
        "shard {n} reset ({count} misplaced items): {} noncurrent versions and {} uploads left \
         (DONE {}): {left:?}\n{}",
        left.len(),
        left_uploads.len(),
        r.total("DONE"),
        p.describe()
    );
    // The latest versions stay.
    assert_eq!(list_versions(&s3, &b, "pr/").await.len(), 24);
}
