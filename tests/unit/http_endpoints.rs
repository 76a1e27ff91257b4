//! The HTTP endpoints over a real socket: /health, /ready in both states,
//! /metrics after recorded events, /status.json and the HTML status page with
//! escaped bucket names. Uses the tests' minimal HTTP/1.1 client.

use crate::common;

use std::time::Duration;

use s3_lifecycled::engine::{ActionKind, DeleteOutcome};
use s3_lifecycled::http::{self, HttpState, Readiness};
use s3_lifecycled::metrics::Metrics;
use s3_lifecycled::status::{
    BucketSummary, DeleteCounts, PassSummary, RunOutcome, ServiceState, ShardSummary,
    StatusSnapshot,
};
use tokio::net::TcpListener;

use common::http::get_async;

fn snapshot() -> StatusSnapshot {
    let mut deletes = DeleteCounts::default();
    deletes.record(DeleteOutcome::Done);
    deletes.record(DeleteOutcome::NoopResolved);
    deletes.record(DeleteOutcome::NoopResolved);
    StatusSnapshot {
        standby_reason: None,
        stale_buckets: Vec::new(),
        stale_after_ns: 0,
        forecast: None,
        ttl_audit: None,
        go_worker: None,
        service_state: ServiceState::Idle,
        next_pass_ns: None,
        current_pass: None,
        last_pass: Some(PassSummary {
            run_id: "run-7".into(),
            started_ns: 1_700_000_000_000_000_000,
            finished_ns: 1_700_000_060_000_000_000,
            outcome: Some(RunOutcome::Completed),
            shards: vec![
                ShardSummary {
                    shard: 0,
                    cursor_ts_ns: 1_700_000_000_000_000_000,
                    events_scanned: 11,
                    deletes: deletes.clone(),
                    ..Default::default()
                },
                ShardSummary {
                    shard: 9,
                    halt_reason: Some("BLOCKED: <bad & path>".into()),
                    restarts: 3,
                    ..Default::default()
                },
            ],
            buckets: vec![
                BucketSummary {
                    bucket: "plain-bucket".into(),
                    started_ns: 1_700_000_000_000_000_000,
                    finished_ns: 1_700_000_060_000_000_000,
                    outcome: Some(RunOutcome::Completed),
                    events_scanned: 11,
                    deletes,
                    last_walked_ns: 1_700_000_030_000_000_000,
                    config_error: None,
                    ..Default::default()
                },
                BucketSummary {
                    bucket: "evil<img src=x onerror=alert(1)>&\"".into(),
                    outcome: Some(RunOutcome::Failed),
                    config_error: Some("Rule <ID> invalid".into()),
                    ..Default::default()
                },
            ],
            space: None,
        }),
        paused: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_over_a_real_socket() {
    let metrics = Metrics::new();
    let readiness = Readiness::default();
    let (state, publisher) = HttpState::new(metrics.clone(), readiness.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::serve(listener, http::router(state), async {
        let _ = stop_rx.await;
    }));

    // /health: alive regardless of readiness.
    let r = get_async(addr, "/health").await.unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));

    // /ready: starts not ready with a reason, then flips.
    let r = get_async(addr, "/ready").await.unwrap();
    assert_eq!(r.status, 503);
    assert!(r.text().contains("starting"), "{}", r.text());
    readiness.set_not_ready("filer 127.0.0.1:18888 unreachable");
    let r = get_async(addr, "/ready").await.unwrap();
    assert_eq!(r.status, 503);
    assert!(
        r.text().contains("filer 127.0.0.1:18888 unreachable"),
        "{}",
        r.text()
    );
    readiness.set_ready();
    let r = get_async(addr, "/ready").await.unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "ready\n"));

    // /metrics after some events.
    metrics.dispatch("photos", ActionKind::ExpirationDays, DeleteOutcome::Done);
    metrics.shard_halted(9, true);
    metrics.events_scanned(0, 11);
    let r = get_async(addr, "/metrics").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let body = r.text();
    let lines: Vec<&str> = body.lines().collect();
    for want in [
        r#"SeaweedFS_s3_lifecycle_dispatch_total{bucket="photos",kind="expiration_days",outcome="DONE"} 1"#,
        r#"s3_lifecycled_shard_halted{shard="9"} 1"#,
        r#"SeaweedFS_s3_lifecycle_daily_run_events_scanned_total{shard="0"} 11"#,
    ] {
        assert!(lines.contains(&want), "missing {want} in\n{body}");
    }

    // /status.json before and after a publish.
    let r = get_async(addr, "/status.json").await.unwrap();
    assert_eq!(r.status, 200);
    let s: StatusSnapshot = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(s, StatusSnapshot::default());
    publisher.send_replace(snapshot());
    let r = get_async(addr, "/status.json").await.unwrap();
    assert_eq!(r.header("content-type"), Some("application/json"));
    let s: StatusSnapshot = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(s, snapshot());

    // `?bucket=NAME`: only that bucket in the per-bucket lists.
    let r = get_async(addr, "/status.json?bucket=plain-bucket")
        .await
        .unwrap();
    let one: StatusSnapshot = serde_json::from_str(&r.text()).unwrap();
    let names: Vec<&str> = one
        .last_pass
        .as_ref()
        .unwrap()
        .buckets
        .iter()
        .map(|b| b.bucket.as_str())
        .collect();
    assert_eq!(names, ["plain-bucket"]);
    assert_eq!(one.service_state, s.service_state, "the rest as it was");

    // / renders the published snapshot, escaped.
    let r = get_async(addr, "/").await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    let page = r.text();
    assert!(
        page.contains("<strong id=\"state\">idle</strong>"),
        "{page}"
    );
    assert!(page.contains("<code>run-7</code>"), "{page}");
    assert_eq!(
        page.matches("<div class=\"card bucket\">").count(),
        2,
        "{page}"
    );
    assert!(page.contains("<h3>plain-bucket</h3>"), "{page}");
    assert!(
        page.contains("<h3>evil&lt;img src=x onerror=alert(1)&gt;&amp;&quot;</h3>"),
        "{page}"
    );
    assert!(!page.contains("<img"), "{page}");
    assert!(page.contains("Rule &lt;ID&gt; invalid"), "{page}");
    assert!(page.contains("BLOCKED: &lt;bad &amp; path&gt;"), "{page}");
    // `?bucket=NAME`, percent-encoded as a browser sends it: that bucket only.
    let r = get_async(
        addr,
        "/?bucket=evil%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E%26%22",
    )
    .await
    .unwrap();
    let one = r.text();
    assert_eq!(
        one.matches("<div class=\"card bucket\">").count(),
        1,
        "{one}"
    );
    assert!(!one.contains("<h3>plain-bucket</h3>"), "{one}");
    assert!(page.contains("<table class=\"shards\">"), "{page}");
    assert!(page.contains("<tr><td>0</td>"), "{page}");
    assert!(page.contains("<tr><td>9</td><td>cold</td>"), "{page}");

    // Unknown path.
    assert_eq!(get_async(addr, "/nope").await.unwrap().status, 404);

    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("server did not stop after the shutdown signal")
        .unwrap()
        .unwrap();
}
