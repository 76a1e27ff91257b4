//! OTLP trace export end to end: no collector (init, span and shutdown still
//! finish and succeed), and an in-process OTLP/gRPC receiver that must get the
//! pass → shard → replay → delete tree with its documented fields.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::otlp::{Collector, attr};
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use s3_lifecycled::config::TelemetrySettings;
use s3_lifecycled::engine::ActionKind;
use s3_lifecycled::telemetry::{self, fields, spans};

/// Generous bound: a hang (the bug this guards against) never finishes.
const NO_HANG: Duration = Duration::from_secs(30);

fn settings(endpoint: String) -> TelemetrySettings {
    TelemetrySettings {
        log_format: "text".into(),
        log_filter: "info,s3_lifecycled=debug".into(),
        otlp_endpoint: endpoint,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_collector_init_span_and_shutdown_complete_ok() {
    // A port where nothing listens.
    let port = common::free_port();
    let tel = telemetry::init_scoped(&settings(format!("http://127.0.0.1:{port}")), "t").unwrap();
    {
        let pass = telemetry::pass_span("no-collector");
        let _e = pass.enter();
        tracing::info!("inside a pass");
    }
    let r = tokio::time::timeout(NO_HANG, tel.shutdown())
        .await
        .expect("shutdown hung with no collector");
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_gets_the_span_tree_with_fields() {
    let collector = Collector::start().await;

    let tel =
        telemetry::init_scoped(&settings(collector.endpoint()), "s3-lifecycled-test").unwrap();
    {
        let pass = telemetry::pass_span("run-42");
        let shard = telemetry::shard_span(&pass, 5);
        let replay = telemetry::replay_span(&shard, 5);
        let del = telemetry::delete_span(
            &replay,
            "photos",
            "2024/a.jpg",
            &[0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3],
            ActionKind::NoncurrentDays,
        );
        telemetry::record_outcome(&del, "DONE");
        telemetry::record_outcome(&replay, "completed");
        telemetry::record_outcome(&shard, "completed");
        telemetry::record_outcome(&pass, "completed");
        // Spans are exported when they close: children first.
        drop(del);
        drop(replay);
        drop(shard);
        drop(pass);
    }
    tokio::time::timeout(NO_HANG, tel.shutdown())
        .await
        .expect("shutdown hung")
        .expect("shutdown failed");
    let receiver = collector.receiver.clone();
    collector.stop().await;

    let got = receiver.spans.lock().unwrap().clone();
    let by_name: HashMap<&str, &OtlpSpan> = got.iter().map(|s| (s.name.as_str(), s)).collect();
    assert_eq!(
        got.len(),
        4,
        "{:?}",
        got.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let pass = by_name[spans::PASS];
    let shard = by_name[spans::SHARD];
    let replay = by_name[spans::REPLAY];
    let del = by_name[spans::DELETE];

    // One trace, linked parent → child.
    for s in [shard, replay, del] {
        assert_eq!(
            s.trace_id, pass.trace_id,
            "{} not in the pass's trace",
            s.name
        );
    }
    assert!(pass.parent_span_id.is_empty(), "pass must be a root");
    assert_eq!(shard.parent_span_id, pass.span_id);
    assert_eq!(replay.parent_span_id, shard.span_id);
    assert_eq!(del.parent_span_id, replay.span_id);

    assert_eq!(attr(pass, fields::RUN_ID).as_deref(), Some("run-42"));
    assert_eq!(attr(pass, fields::OUTCOME).as_deref(), Some("completed"));
    assert_eq!(attr(shard, fields::SHARD).as_deref(), Some("5"));
    assert_eq!(attr(replay, fields::SHARD).as_deref(), Some("5"));
    assert_eq!(attr(del, fields::BUCKET).as_deref(), Some("photos"));
    assert_eq!(attr(del, fields::KEY).as_deref(), Some("2024/a.jpg"));
    assert_eq!(
        attr(del, fields::RULE_HASH).as_deref(),
        Some("deadbeef00010203")
    );
    assert_eq!(attr(del, fields::KIND).as_deref(), Some("noncurrent_days"));
    assert_eq!(attr(del, fields::OUTCOME).as_deref(), Some("DONE"));

    let names = receiver.service_names.lock().unwrap().clone();
    assert!(
        names.iter().all(|n| n == "s3-lifecycled-test") && !names.is_empty(),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_spans_are_not_exported_at_info() {
    // The default filter (`info`) keeps the per-object spans out of traces;
    // the receiver must see the pass but no delete.
    let collector = Collector::start().await;
    let mut s = settings(collector.endpoint());
    s.log_filter = "info".into();
    let tel = telemetry::init_scoped(&s, "t").unwrap();
    {
        let pass = telemetry::pass_span("run-info");
        let _del = telemetry::delete_span(&pass, "b", "k", &[0; 8], ActionKind::AbortMpu);
    }
    tokio::time::timeout(NO_HANG, tel.shutdown())
        .await
        .expect("shutdown hung")
        .expect("shutdown failed");
    let receiver = collector.receiver.clone();
    collector.stop().await;
    let names: Vec<String> = receiver
        .spans
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(names, vec![spans::PASS.to_string()]);
}
