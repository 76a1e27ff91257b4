//! End-to-end retention loss: the filer's oldest persisted meta-log files are deleted while a
//! cursor still needs them; the next `run-once` reports `retention_loss` and still deletes the
//! due objects (recovery walk). Its own test binary, hence its own cluster: deleting log files
//! would starve the replay of every other test sharing a cluster.

mod common;
mod e2e_support;

use std::time::{Duration, Instant};

use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::pb::filer_pb::{DeleteEntryRequest, ListEntriesRequest};
use s3_lifecycled::seaweed::retention::META_LOG_ROOT;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tonic::transport::Channel;

use e2e_support::*;

/// Names in `dir` (empty when it does not exist).
async fn names(client: &mut SeaweedFilerClient<Channel>, dir: &str) -> Vec<String> {
    let mut stream = match client
        .list_entries(ListEntriesRequest {
            directory: dir.into(),
            limit: 100_000,
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
        out.extend(r.entry.map(|e| e.name));
    }
    out
}

/// Persisted log files as (dir, name, minute start ns), oldest first.
async fn log_files(client: &mut SeaweedFilerClient<Channel>) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for day in names(client, META_LOG_ROOT).await {
        let dir = format!("{META_LOG_ROOT}/{day}");
        for f in names(client, &dir).await {
            let stamp = format!("{day}T{}:00Z", f[..5].replace('-', ":"));
            let ts = OffsetDateTime::parse(&stamp, &Rfc3339)
                .unwrap_or_else(|e| panic!("{stamp}: {e}"))
                .unix_timestamp_nanos() as i64;
            out.push((dir.clone(), f, ts));
        }
    }
    out.sort_by_key(|f| f.2);
    out
}

/// Writes small objects into `bucket` every 2 s until a log file starting after `after_ns`
/// exists (the filer flushes about once a minute with traffic).
async fn tick_until_file_after(c: &common::Cluster, bucket: &str, after_ns: i64) {
    let s3 = c.s3_client();
    let mut filer = c.filer_client().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut i = 0;
    loop {
        let files = log_files(&mut filer).await;
        if files.iter().any(|f| f.2 > after_ns) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no meta-log file after {after_ns} appeared: {files:?}"
        );
        put(&s3, bucket, &format!("tick/{i:05}"), b"", None).await;
        i += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[tokio::test]
async fn deleted_meta_log_reports_retention_loss_and_still_deletes() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let ticks = c.new_bucket("e2e-ticks").await.unwrap();
    let b = c.new_bucket("e2e-retention").await.unwrap();
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>x</ID><Status>Enabled</Status><Filter><Prefix>x/</Prefix></Filter>\
             <Expiration><Days>1</Days></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    for k in ["x/1", "x/2", "x/3", "keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let t0 = now();
    let scope = Scope::new(&[&b]);
    // Not due: the cursor waits at the PUT events.
    let p = run_once(c, &scope, Some(t0 + HOUR_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(t0 + 2 * HOUR_NS), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&b).is_empty(), "{}", p.describe());

    // Lose every log file that starts at or before the PUTs' minute.
    tick_until_file_after(c, &ticks, t0).await;
    let mut filer = c.filer_client().await.unwrap();
    let files = log_files(&mut filer).await;
    let mut deleted = 0;
    for (dir, name, ts) in &files {
        if *ts <= t0 {
            let resp = filer
                .delete_entry(DeleteEntryRequest {
                    directory: dir.clone(),
                    name: name.clone(),
                    is_delete_data: true,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            assert!(resp.error.is_empty(), "{}", resp.error);
            deleted += 1;
        }
    }
    assert!(deleted > 0, "no log file to delete: {files:?}");

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).contains("retention_loss"),
        "{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, set(&["keep"]), "{}", p.describe());
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());

    let p = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&b).is_empty(), "{}", p.describe());
}
