//! The meta-log retention probe against a real SeaweedFS 4.48 filer: it agrees with the log files
//! listed independently, and moves forward when the oldest file is deleted.

mod common;

use std::time::Duration;

use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::pb::filer_pb::{DeleteEntryRequest, Entry, ListEntriesRequest};
use s3_lifecycled::seaweed::retention::{
    META_LOG_ROOT, earliest_available, earliest_available_under,
};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tonic::transport::Channel;

use common::now_ns;

/// Every entry of `dir`, in one big listing (test side: independent of the probe's paging).
async fn list_all(client: &mut SeaweedFilerClient<Channel>, dir: &str) -> Vec<Entry> {
    let mut stream = match client
        .list_entries(ListEntriesRequest {
            directory: dir.into(),
            limit: 1_000_000,
            ..Default::default()
        })
        .await
    {
        Ok(s) => s.into_inner(),
        Err(s) if s.message().contains("no entry is found") => return Vec::new(),
        Err(s) => panic!("list {dir}: {s}"),
    };
    let mut out = Vec::new();
    while let Some(r) = stream.message().await.unwrap() {
        out.extend(r.entry);
    }
    out
}

/// All log files as (full path, minute start ns), oldest first, parsed from
/// `YYYY-MM-DD/HH-MM.<id>` with the `time` crate's RFC 3339 parser.
async fn log_files(client: &mut SeaweedFilerClient<Channel>) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for day in list_all(client, META_LOG_ROOT).await {
        let dir = format!("{META_LOG_ROOT}/{}", day.name);
        for f in list_all(client, &dir).await {
            let hm = &f.name[..5];
            let stamp = format!("{}T{}:00Z", day.name, hm.replace('-', ":"));
            let ts = OffsetDateTime::parse(&stamp, &Rfc3339)
                .unwrap_or_else(|e| panic!("{stamp}: {e}"))
                .unix_timestamp_nanos() as i64;
            out.push((format!("{dir}/{}", f.name), ts));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn probe_agrees_with_log_listing_and_follows_deletion() {
    let c = common::cluster();
    let mut filer = c.filer_client().await.unwrap();
    let bucket = c.new_bucket("retention").await.unwrap();
    let s3 = c.s3_client();

    // The filer writes one log file per minute with traffic: keep writing until two exist.
    let mut files = log_files(&mut filer).await;
    let mut i = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    while files.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no second meta-log file appeared: {files:?}"
        );
        s3.put_object()
            .bucket(&bucket)
            .key(format!("tick/{i:04}"))
            .body(Vec::new().into())
            .send()
            .await
            .unwrap();
        i += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
        files = log_files(&mut filer).await;
    }

    let probe = earliest_available(&mut filer).await.unwrap().unwrap();
    assert_eq!(
        (probe.file.clone(), probe.ts_ns),
        files[0],
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
    assert_eq!((after.file.clone(), after.ts_ns), remaining[0]);
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
