//! Direct reads of the filer's persisted meta-log files on a real 4.48 cluster
//! (docs/meta-log.md#direct-log-file-reads): what the filer sends when the
//! client supports metadata chunks, and that reading the refs with
//! `seaweed::logfile` yields what a plain `SubscribeMetadata` streams.

mod common;

use std::time::Duration;

use futures::StreamExt;
use s3_lifecycled::pb::filer_pb::{
    Entry, FuseAttributes, SubscribeMetadataRequest, SubscribeMetadataResponse,
};
use s3_lifecycled::seaweed::filer::FilerClient;

use common::*;

fn describe(r: &SubscribeMetadataResponse) -> String {
    let n = r.event_notification.as_ref();
    let name = n
        .and_then(|n| n.new_entry.as_ref().or(n.old_entry.as_ref()))
        .map(|e| e.name.clone());
    format!(
        "dir={:?} ts={} notif={} name={:?} events={} refs={} flushed={}",
        r.directory,
        r.ts_ns,
        n.is_some(),
        name,
        r.events.len(),
        r.log_file_refs.len(),
        r.flushed_ts_ns
    )
}

/// Pads the filer's log outside the buckets root until it flushes: its memory buffer holds 8 MB.
async fn pad_log(c: &Cluster, tag: &str) {
    let fc = FilerClient::connect(&c.filer_grpc_addr().to_string())
        .await
        .unwrap();
    let dir = format!("/lifecycle-test-padding/{tag}");
    futures::stream::iter(0..2_300)
        .map(|i| {
            let (fc, dir) = (fc.clone(), dir.clone());
            async move {
                let entry = Entry {
                    name: format!("{i:05}"),
                    attributes: Some(FuseAttributes {
                        mtime: 1_700_000_000,
                        file_mode: 0o644,
                        ..Default::default()
                    }),
                    extended: [("x-pad".to_string(), vec![b'p'; 4096])].into(),
                    ..Default::default()
                };
                fc.create_entry(&dir, entry, false).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
}

#[tokio::test]
async fn probe_log_refs() {
    let c = cluster();
    let s3 = c.s3_client();
    let bucket = c.new_bucket("refs").await.unwrap();
    let since = now_ns();
    futures::stream::iter(0..2_000)
        .map(|i| {
            let (s3, bucket) = (s3.clone(), bucket.clone());
            async move { put(&s3, &bucket, &format!("k/{i:05}"), b"x", None).await }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    pad_log(c, &bucket).await;
    tokio::time::sleep(Duration::from_secs(
        std::env::var("PROBE_WAIT_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2),
    ))
    .await;
    let until = now_ns();
    let mut filer = c.filer_client().await.unwrap();
    let files = common::metalog::log_files(&mut filer).await;
    println!("log files: {files:?}");
    let mut stream = filer
        .subscribe_metadata(SubscribeMetadataRequest {
            client_name: "probe".into(),
            path_prefix: "/buckets".into(),
            since_ns: since,
            until_ns: until,
            client_id: rand::random_range(1..i32::MAX),
            client_supports_batching: true,
            client_supports_metadata_chunks: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut n = 0;
    while let Some(r) = stream.message().await.unwrap() {
        if n < 20 || !r.log_file_refs.is_empty() || r.events.is_empty() && n % 200 == 0 {
            println!("#{n}: {}", describe(&r));
        }
        for f in &r.log_file_refs {
            println!(
                "  ref filer_id={:?} file_ts_ns={} chunks={:?}",
                f.filer_id, f.file_ts_ns, f.chunks
            );
        }
        n += 1;
    }
    println!("responses: {n}; since {since} until {until}");
}
