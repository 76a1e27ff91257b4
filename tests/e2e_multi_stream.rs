//! A meta-log stream on filers with their own stores, on a cluster of its own: once the filer
//! serving it dies, the stream fails loudly instead of resuming on the other filer (which
//! lacks the dead one's events), and a new subscription is refused naming it.
//!
//! Its own binary (its own two-filer cluster), not in `e2e_multi.rs`: there, earlier tests
//! restart filer 1, and after such a restart filer 2's aggregated log was seen to lack filer
//! 1's new events for good (10,000 of 20,000 still missing after 300 s;
//! docs/meta-log.md#several-filers), which this test's complete window needs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use s3_lifecycled::pb::filer_pb::SubscribeMetadataRequest;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;

/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);
/// `pass.reorder_margin`'s default.
const REORDER_MARGIN: Duration = Duration::from_secs(5);

/// Filers with their own stores (as here) hold their peers' events only while they follow
/// them live: once filer 1 is dead, filer 2 serves only its own log, and a stream resumed there
/// would silently miss every event written through filer 1 (observed: 9,691 of 24,000 missing,
/// docs/meta-log.md#several-filers). So a stream broken by filer 1's death fails loudly instead
/// of resuming, having delivered each event at most once, and a new subscription while filer 1
/// is down is refused naming it. Drives the adapter itself, with a one-event buffer and more
/// events than HTTP/2 sends ahead, so the kill lands while most of the window is unsent.
#[tokio::test(flavor = "multi_thread")]
async fn metalog_stream_on_separate_stores_fails_loudly_when_its_filer_dies() {
    use futures::StreamExt;
    use s3_lifecycled::pass::ports::{ClusterPort, SeaweedCluster};
    // hyper's 2 MB stream window holds ~14,000 such events; written straight through the
    // filers (no volume server), which is fast.
    const HALF: usize = 10_000;
    const READ_BEFORE_KILL: usize = 200;
    let c = multi_cluster();
    let bucket = c.new_bucket("multi-resume").await.unwrap();
    let since = now_ns();
    let write_all = |addr: std::net::SocketAddr, dir: &'static str, bucket: String| async move {
        let fc = s3_lifecycled::seaweed::filer::FilerClient::connect(&addr.to_string())
            .await
            .unwrap();
        futures::stream::iter(0..HALF)
            .map(|i| {
                let fc = fc.clone();
                let b = bucket.clone();
                async move {
                    let entry = s3_lifecycled::pb::filer_pb::Entry {
                        name: format!("{i:06}"),
                        attributes: Some(s3_lifecycled::pb::filer_pb::FuseAttributes {
                            mtime: 1_700_000_000,
                            file_mode: 0o644,
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    fc.create_entry(&format!("/buckets/{b}/{dir}"), entry, false)
                        .await
                        .unwrap();
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
    };
    tokio::join!(
        write_all(c.filer_grpc_addr(), "one", bucket.clone()),
        write_all(c.filer2_grpc_addr(), "two", bucket.clone())
    );
    // Both filers hold all of them before the read: a filer restarted by an earlier test
    // re-links to its peer with a delay, and until then its aggregated log lacks the peer's
    // events (docs/meta-log.md#several-filers); the stream must start complete on filer 1.
    let prefix = format!("/buckets/{bucket}/");
    eventually(GUARD, Duration::from_millis(500), async || {
        let until = now_ns();
        for addr in [c.filer_grpc_addr(), c.filer2_grpc_addr()] {
            let n = files_in_log(addr, &prefix, since, until).await?;
            if n < 2 * HALF {
                return Err(format!("filer {addr}: {n} of {} events", 2 * HALF));
            }
        }
        Ok(())
    })
    .await;
    let until = now_ns();
    let filers = [
        c.filer_grpc_addr().to_string(),
        c.filer2_grpc_addr().to_string(),
    ];
    let cluster = SeaweedCluster::connect_many(
        &filers,
        "/buckets",
        "/etc/s3/lifecycle/e2e-multi-resume",
        1,
        Duration::from_secs(30),
        None,
    )
    .await
    .unwrap()
    .with_resume_margin(REORDER_MARGIN);
    let mut events = cluster.subscribe(since, until).await.unwrap();
    let prefix = format!("/buckets/{bucket}");
    let mut seen: BTreeMap<(i64, String, String), usize> = BTreeMap::new();
    let mut read = 0usize;
    let mut failure = None;
    while let Some(item) = tokio::time::timeout(GUARD, events.next())
        .await
        .expect("the stream ends within the guard")
    {
        let ev = match item {
            Ok(ev) => ev,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        read += 1;
        let name = ev
            .new_entry
            .as_ref()
            .map(|e| e.name.clone())
            .unwrap_or_default();
        if ev.directory.starts_with(&prefix) {
            *seen
                .entry((ev.ts_ns, ev.directory.clone(), name))
                .or_default() += 1;
        }
        if read == READ_BEFORE_KILL {
            tokio::task::spawn_blocking(|| multi_cluster().kill(Role::Filer))
                .await
                .unwrap();
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "events delivered twice: {twice:?}");
    let failure = failure.unwrap_or_else(|| {
        panic!(
            "the stream ended cleanly after {read} of {} events although its filer died",
            2 * HALF
        )
    });
    assert!(
        failure.contains("not resumed") && failure.contains(&filers[0]),
        "the error says why it did not resume and names the filer: {failure}"
    );
    // A new subscription while filer 1 is down is refused, naming it.
    let refused = match cluster.subscribe(since, until).await {
        Ok(_) => panic!("a subscription without filer 1 was accepted"),
        Err(e) => e,
    };
    assert!(
        refused.contains(&filers[0]) && refused.contains("unreachable"),
        "{refused}"
    );
    println!(
        "multi: separate-stores stream bucket={bucket} events_read={read} of {} killed_after={READ_BEFORE_KILL} \
         duplicates=0 stream_error=yes resubscribe_refused=yes",
        2 * HALF
    );
    tokio::task::spawn_blocking(|| multi_cluster().start_role(Role::Filer))
        .await
        .unwrap();
}

/// How many distinct files under `prefix` a bounded read of `addr`'s (aggregated) meta-log
/// over `(since, until]` holds.
async fn files_in_log(
    addr: std::net::SocketAddr,
    prefix: &str,
    since: i64,
    until: i64,
) -> Result<usize, String> {
    let mut client = SeaweedFilerClient::connect(format!("http://{addr}"))
        .await
        .map_err(|e| e.to_string())?
        .max_decoding_message_size(64 << 20);
    let req = SubscribeMetadataRequest {
        client_name: "s3-lifecycled-tests".into(),
        path_prefix: prefix.to_string(),
        since_ns: since,
        until_ns: until,
        client_id: rand::random_range(1..i32::MAX),
        client_supports_batching: true,
        ..Default::default()
    };
    let mut stream = client
        .subscribe_metadata(req)
        .await
        .map_err(|e| e.to_string())?
        .into_inner();
    let mut files = BTreeSet::new();
    while let Some(resp) = stream.message().await.map_err(|e| e.to_string())? {
        let batch = resp.events.clone();
        for ev in std::iter::once(resp).chain(batch) {
            let Some(n) = ev.event_notification.as_ref() else {
                continue;
            };
            if let Some(e) = n.new_entry.as_ref().filter(|e| !e.is_directory) {
                files.insert((ev.directory.clone(), e.name.clone()));
            }
        }
    }
    Ok(files.len())
}
