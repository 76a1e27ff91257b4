//! Helpers the feature modules of this binary share: reading an object's
//! mtime, the shard a key lands on.

use crate::common;

use common::*;

/// Last-Modified of the current version, in ns (whole seconds, as S3 stores them).
pub(crate) async fn mtime_ns(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> i64 {
    let h = s3
        .head_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("HEAD {bucket}/{key}: {e:?}"));
    h.last_modified().expect("Last-Modified").secs() * SEC_NS
}

/// The shard a walker or a bare-key replay event sends `key` to.
pub(crate) fn shard_of(bucket: &str, key: &str) -> u8 {
    s3_lifecycled::engine::shard_id(bucket, key)
}
