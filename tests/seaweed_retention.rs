//! The meta-log retention probe against a real SeaweedFS 4.48 filer: it agrees with the log files
//! listed independently, and moves forward when the oldest file is deleted.

mod common;

use std::time::Duration;

use s3_lifecycled::pb::filer_pb::DeleteEntryRequest;
use s3_lifecycled::seaweed::retention::{earliest_available, earliest_available_under};

use common::metalog::{log_files, write_until_log_files};
use common::now_ns;

#[tokio::test]
async fn probe_agrees_with_log_listing_and_follows_deletion() {
    let c = common::cluster();
    let mut filer = c.filer_client().await.unwrap();
    let bucket = c.new_bucket("retention").await.unwrap();

    // The filer writes one log file per minute with traffic: keep writing until two exist.
    let files = write_until_log_files(c, &bucket, |files| files.len() >= 2).await;

    let probe = earliest_available(&mut filer).await.unwrap().unwrap();
    assert_eq!(
        (probe.file.clone(), probe.ts_ns),
        (files[0].path(), files[0].ts_ns),
        "listing: {files:?}"
    );
    let now = now_ns();
    assert!(probe.ts_ns <= now);
    assert_eq!(
        s3_lifecycled::pass::plan::retention_window(now, Some(probe.ts_ns), Duration::ZERO),
        Duration::from_nanos((now - probe.ts_ns) as u64)
    );

    // Delete the oldest file: the probe now reports the next one.
    let (dir, name) = probe.file.rsplit_once('/').unwrap();
    let resp = filer
        .delete_entry(DeleteEntryRequest {
            directory: dir.into(),
            name: name.into(),
            is_delete_data: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(resp.error.is_empty(), "{}", resp.error);
    let after = earliest_available(&mut filer).await.unwrap().unwrap();
    let remaining = log_files(&mut filer).await;
    assert_eq!(
        (after.file.clone(), after.ts_ns),
        (remaining[0].path(), remaining[0].ts_ns)
    );
    assert_eq!(remaining[0], files[1]);
    assert!(after.ts_ns > probe.ts_ns, "{after:?} vs {probe:?}");
}

#[tokio::test]
async fn nothing_persisted_is_none() {
    let c = common::cluster();
    let mut filer = c.filer_client().await.unwrap();
    let got = earliest_available_under(&mut filer, "/topics/.system/no-such-log")
        .await
        .unwrap();
    assert_eq!(got, None);
}
