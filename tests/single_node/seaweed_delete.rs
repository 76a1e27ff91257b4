//! The LifecycleDelete client against a real SeaweedFS 4.48 S3 gRPC server: exact-identity
//! deletes, stale identities, versioned expiration (delete marker), noncurrent deletes, multipart
//! aborts, local validation and transport errors.

use crate::common;

use s3_lifecycled::engine::{ActionKind, DeleteOutcome, EntryIdentity, RuleHash};
use s3_lifecycled::seaweed::delete::{DeleteClient, DeleteError, DeleteRequest, RPC_ERROR_LABEL};

use common::{Cluster, enable_versioning, exists, put};

const HASH: RuleHash = RuleHash([1, 2, 3, 4, 5, 6, 7, 8]);

/// The identity of the live entry `<dir>/<name>`, from LookupDirectoryEntry.
async fn identity(c: &Cluster, dir: &str, name: &str) -> EntryIdentity {
    let entry = c
        .lookup_entry(dir, name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{dir}/{name} not found"));
    EntryIdentity::of(&entry)
}

async fn client(c: &Cluster) -> DeleteClient {
    DeleteClient::connect(&c.s3_grpc_addr().to_string())
        .await
        .unwrap()
}

fn request(
    bucket: &str,
    path: &str,
    version: &str,
    kind: ActionKind,
    identity: EntryIdentity,
) -> DeleteRequest {
    DeleteRequest {
        bucket: bucket.into(),
        object_path: path.into(),
        version_id: version.into(),
        rule_hash: HASH,
        kind,
        identity,
    }
}

#[tokio::test]
async fn exact_identity_deletes_unversioned_object() {
    let c = common::cluster();
    let bucket = c.new_bucket("del-plain").await.unwrap();
    put(&c.s3_client(), &bucket, "a/x.txt", b"hello", None).await;
    let id = identity(c, &format!("/buckets/{bucket}/a"), "x.txt").await;
    let out = client(c)
        .await
        .delete(&request(
            &bucket,
            "a/x.txt",
            "",
            ActionKind::ExpirationDays,
            id,
        ))
        .await
        .unwrap();
    assert_eq!(out.outcome, DeleteOutcome::Done, "{out:?}");
    assert!(out.outcome.is_resolved());
    assert!(
        !exists(&c.s3_client(), &bucket, "a/x.txt").await,
        "object must be gone"
    );
}

#[tokio::test]
async fn overwritten_object_is_stale_identity_and_survives() {
    let c = common::cluster();
    let bucket = c.new_bucket("del-stale").await.unwrap();
    put(&c.s3_client(), &bucket, "s.txt", b"old", None).await;
    let id = identity(c, &format!("/buckets/{bucket}"), "s.txt").await;
    put(&c.s3_client(), &bucket, "s.txt", b"new body", None).await;
    let out = client(c)
        .await
        .delete(&request(
            &bucket,
            "s.txt",
            "",
            ActionKind::ExpirationDays,
            id,
        ))
        .await
        .unwrap();
    assert_eq!(out.outcome, DeleteOutcome::NoopResolved, "{out:?}");
    assert_eq!(out.reason, "STALE_IDENTITY");
    assert_eq!(out.outcome.label(), "NOOP_RESOLVED");
    let body = c
        .s3_client()
        .get_object()
        .bucket(&bucket)
        .key("s.txt")
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(&body[..], b"new body");
}

#[tokio::test]
async fn versioned_expiration_adds_marker_and_noncurrent_delete_removes_version() {
    let c = common::cluster();
    let bucket = c.new_bucket("del-versioned").await.unwrap();
    enable_versioning(&c.s3_client(), &bucket).await;
    let v1 = put(&c.s3_client(), &bucket, "k", b"one", None)
        .await
        .unwrap();
    let v2 = put(&c.s3_client(), &bucket, "k", b"two", None)
        .await
        .unwrap();
    let vdir = format!("/buckets/{bucket}/k.versions");
    let del = client(c).await;

    // Expiration of the current version: version_id "" → the server creates a delete marker.
    let latest = identity(c, &vdir, &format!("v_{v2}")).await;
    let out = del
        .delete(&request(
            &bucket,
            "k",
            "",
            ActionKind::ExpirationDays,
            latest,
        ))
        .await
        .unwrap();
    assert_eq!(out.outcome, DeleteOutcome::Done, "{out:?}");
    let versions = c
        .s3_client()
        .list_object_versions()
        .bucket(&bucket)
        .prefix("k")
        .send()
        .await
        .unwrap();
    let markers = versions.delete_markers();
    assert_eq!(markers.len(), 1, "{versions:?}");
    assert_eq!(markers[0].key(), Some("k"));
    assert_eq!(markers[0].is_latest(), Some(true));
    assert_eq!(versions.versions().len(), 2, "both versions kept");

    // Noncurrent v1 → deleted.
    let old = identity(c, &vdir, &format!("v_{v1}")).await;
    let out = del
        .delete(&request(&bucket, "k", &v1, ActionKind::NoncurrentDays, old))
        .await
        .unwrap();
    assert_eq!(out.outcome, DeleteOutcome::Done, "{out:?}");
    let versions = c
        .s3_client()
        .list_object_versions()
        .bucket(&bucket)
        .prefix("k")
        .send()
        .await
        .unwrap();
    let ids: Vec<_> = versions
        .versions()
        .iter()
        .filter_map(|v| v.version_id())
        .collect();
    assert_eq!(ids, [v2.as_str()], "only v2 remains besides the marker");
}

#[tokio::test]
async fn abort_mpu_on_uploads_path_and_local_refusal_of_dest_key() {
    let c = common::cluster();
    let bucket = c.new_bucket("del-mpu").await.unwrap();
    let s3 = c.s3_client();
    let upload_id = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key("mp/big.bin")
        .send()
        .await
        .unwrap()
        .upload_id
        .unwrap();
    let id = identity(c, &format!("/buckets/{bucket}/.uploads"), &upload_id).await;
    let del = client(c).await;
    let pending = || async {
        s3.list_multipart_uploads()
            .bucket(&bucket)
            .send()
            .await
            .unwrap()
            .uploads()
            .iter()
            .any(|u| u.upload_id() == Some(upload_id.as_str()))
    };

    // The destination key would come back BLOCKED and halt a shard: refused locally.
    let err = del
        .delete(&request(
            &bucket,
            "mp/big.bin",
            "",
            ActionKind::AbortMpu,
            id.clone(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, DeleteError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains(".uploads/"), "{err}");
    assert!(pending().await, "nothing may have been sent");

    let out = del
        .delete(&DeleteRequest::abort_mpu(&bucket, &upload_id, HASH, id))
        .await
        .unwrap();
    assert_eq!(out.outcome, DeleteOutcome::Done, "{out:?}");
    assert!(!pending().await, "upload must be gone");
}

#[tokio::test]
async fn dead_port_is_a_retryable_transport_error() {
    let port = common::free_port();
    let del = DeleteClient::connect(&format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let err = del
        .delete(&request(
            "b",
            "k",
            "",
            ActionKind::ExpirationDays,
            EntryIdentity::default(),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DeleteError::Transport {
                code: tonic::Code::Unavailable,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_eq!(err.label(), RPC_ERROR_LABEL);
}
