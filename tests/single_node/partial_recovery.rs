//! Partial recovery on the real SeaweedFS 4.48 cluster: when only some shards recover, the
//! versions and uploads whose *physical* path hashes to a recovering shard but whose logical key
//! (or upload destination) hashes to another one are still deleted once due
//! (docs/design-deviations.md#walk-coverage).

use crate::common;

use aws_sdk_s3::primitives::ByteStream;
use s3_lifecycled::engine::shard_id;

use common::*;

fn cursor_args(c: &common::Cluster, v: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    a.extend(["--filer".to_string(), c.filer_grpc_addr().to_string()]);
    a
}

/// A versioned bucket under one rule (NoncurrentDays 2, AbortIncompleteMultipartUpload 2 days)
/// with 24 keys of three versions each (48 noncurrent versions) and 24 incomplete uploads,
/// spread over many shards. Returns the bucket and the uploads as (destination, id).
async fn populate(
    c: &common::Cluster,
    s3: &aws_sdk_s3::Client,
    prefix: &str,
) -> (String, Vec<(String, String)>) {
    let b = c.new_bucket(prefix).await.unwrap();
    enable_versioning(s3, &b).await;
    for k in &keys("pr/", 24) {
        for body in [&b"v1"[..], b"v2", b"v3"] {
            put(s3, &b, k, body, None).await;
        }
    }
    let mut uploads = Vec::new();
    for i in 0..24 {
        let key = format!("pr/up-{i:02}");
        let id = start_upload(s3, &b, &key).await;
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
    (b, uploads)
}

async fn noncurrent(s3: &aws_sdk_s3::Client, b: &str) -> Vec<Ver> {
    list_versions(s3, b, "pr/")
        .await
        .into_iter()
        .filter(|v| !v.is_latest)
        .collect()
}

/// Per shard, how many noncurrent versions and uploads have their physical path on it but
/// their logical key / destination on another shard.
fn misplaced(b: &str, versions: &[Ver], uploads: &[(String, String)]) -> [usize; 16] {
    let mut out = [0usize; 16];
    for v in versions {
        let phys = shard_id(b, &format!("{}.versions/v_{}", v.key, v.version_id));
        if phys != shard_id(b, &v.key) {
            out[usize::from(phys)] += 1;
        }
    }
    for (key, id) in uploads {
        let phys = shard_id(b, &format!(".uploads/{id}"));
        if phys != shard_id(b, key) {
            out[usize::from(phys)] += 1;
        }
    }
    out
}

/// Fails the test unless every noncurrent version and every upload is gone and the 24 latest
/// versions stay.
async fn assert_all_due_gone(s3: &aws_sdk_s3::Client, b: &str, what: &str, p: &Pass) {
    let left = noncurrent(s3, b).await;
    let left_uploads = list_uploads(s3, b).await;
    assert!(
        left.is_empty() && left_uploads.is_empty(),
        "{what}: {} noncurrent versions and {} uploads left (DONE {}): {left:?}\n{}",
        left.len(),
        left_uploads.len(),
        p.ok().total("DONE"),
        p.describe()
    );
    assert_eq!(
        list_versions(s3, b, "pr/").await.len(),
        24,
        "{what}: latest versions stay"
    );
}

/// A versioned bucket with noncurrent versions and incomplete uploads spread over many shards;
/// a cold first pass while nothing is due; then one shard's cursor is reset. That shard is
/// chosen so that due noncurrent versions and uploads have their physical path on it but their
/// logical key / destination on another shard. A pass after everything is due must delete
/// every noncurrent version and abort every upload. Before the fix, 5 of 48 versions and 1 of
/// 24 uploads stayed for good.
#[tokio::test]
async fn resetting_one_shard_still_deletes_every_due_version_and_upload() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let (b, uploads) = populate(c, &s3, "partial-rec").await;
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    // Cold start of every shard while nothing is due.
    let p = run_once(c, &scope, Some(t0), &[], &[]).await;
    p.ok().assert_no_deletes();
    let versions = noncurrent(&s3, &b).await;
    assert_eq!(versions.len(), 48, "{}", p.describe());
    assert_eq!(list_uploads(&s3, &b).await.len(), 24);

    // The shard that replays the most items it does not walk.
    let per_shard = misplaced(&b, &versions, &uploads);
    let (n, count) = per_shard
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(n, c)| (n, *c))
        .unwrap();
    assert!(
        count > 0,
        "no item replays on a shard other than its walk shard: {per_shard:?}"
    );

    let env = [("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    let shard = n.to_string();
    let reset = run_raw(
        &cursor_args(c, &["cursor", "reset", "--shards", &shard, "--yes"]),
        &env,
    )
    .await;
    assert_eq!(reset.code, 0, "{}", reset.describe());

    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    assert!(
        p.ok().recovery_reasons(&b).contains("cold_start"),
        "{}",
        p.describe()
    );
    assert_all_due_gone(
        &s3,
        &b,
        &format!("shard {n} reset ({count} misplaced items)"),
        &p,
    )
    .await;
}

/// Two instances with disjoint `pass.shards` (`--shards`): both cold-start while nothing is
/// due; then one shard's cursor is reset and only its instance runs once everything is due.
/// Its walk must cover the items that shard replays although their walk owner lives on the
/// other instance, which is not recovering.
#[tokio::test]
async fn disjoint_instances_each_delete_the_versions_and_uploads_they_replay() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let (b, uploads) = populate(c, &s3, "partial-disjoint").await;
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let per_shard = misplaced(&b, &noncurrent(&s3, &b).await, &uploads);
    let (n, count) = per_shard
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(n, c)| (n, *c))
        .unwrap();
    assert!(count > 0, "{per_shard:?}");
    let mine = n.to_string();
    let others: Vec<String> = (0..16).filter(|s| *s != n).map(|s| s.to_string()).collect();
    let others = others.join(",");
    for shards in [&others, &mine] {
        let p = run_once(c, &scope, Some(t0), &["--shards", shards], &[]).await;
        p.ok().assert_no_deletes();
    }
    let env = [("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    let reset = run_raw(
        &cursor_args(c, &["cursor", "reset", "--shards", &mine, "--yes"]),
        &env,
    )
    .await;
    assert_eq!(reset.code, 0, "{}", reset.describe());

    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &["--shards", &mine], &[]).await;
    p.ok();
    let ids = list_uploads(&s3, &b).await;
    let uploads_left: Vec<(String, String)> = uploads
        .iter()
        .filter(|(_, id)| ids.contains(id))
        .cloned()
        .collect();
    assert_eq!(
        misplaced(&b, &noncurrent(&s3, &b).await, &uploads_left)[n],
        0,
        "shard {n}'s instance left some of its {count} misplaced items\n{}",
        p.describe()
    );
    let p = run_once(c, &scope, Some(plus(t0, 5, 1)), &["--shards", &others], &[]).await;
    assert_all_due_gone(&s3, &b, &format!("both instances (shard {n} alone)"), &p).await;
}

/// The common case stays cheap: a cold start of all 16 shards after everything is due sends
/// each delete once (no walk covers an item twice, no duplicate comes back NOT_FOUND).
#[tokio::test]
async fn cold_start_of_every_shard_sends_each_delete_once() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let (b, _) = populate(c, &s3, "partial-cold").await;
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        r.total("DONE"),
        72,
        "48 versions + 24 uploads\n{}",
        p.describe()
    );
    assert_eq!(r.total("NOOP_RESOLVED"), 0, "{}", p.describe());
    assert_all_due_gone(&s3, &b, "cold start", &p).await;
}
