//! `s3-lifecycled serve` over time, through the real binary against the
//! loopback cluster: the daily schedule with a shortened day (passes start by
//! themselves), and graceful shutdown with deletes in flight (exit 0 within
//! the deadline, cursors saved and consistent: later passes delete the rest
//! and nothing is deleted twice), plus `pass.max_runtime` in `run-once`.

mod common;
mod service_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster;
use service_support::{Serve, count_objects, days_xml, keys, run_once_with};

#[tokio::test(flavor = "multi_thread")]
async fn daily_schedule_with_a_short_day_starts_passes_by_itself() {
    let c = cluster();
    let b = c.new_bucket("svc-sched").await.unwrap();
    c.put_lifecycle_xml(&b, &days_xml()).await.unwrap();
    c.put_objects_bulk(&b, &keys("o/", 10), b"x").await.unwrap();
    let dir = format!("/etc/s3/lifecycle/test-{b}");
    // A 4 s day: the 00:00 schedule fires at every multiple of 4 s since
    // the epoch; objects are due 4 s after they are written.
    let serve = Serve::start(
        &b,
        &dir,
        &[
            ("S3_LIFECYCLED__TIME__DAY", "4s"),
            ("S3_LIFECYCLED__SERVICE__SCHEDULE", "00:00"),
        ],
    );
    let st = serve.status();
    let next = st["next_pass_ns"].as_i64().expect("next pass announced");
    assert!(next > common::now_ns() - 1_000_000_000, "{st}");

    let t = Instant::now();
    let mut ids = BTreeSet::new();
    loop {
        let last = serve.last();
        if let Some(id) = last["run_id"].as_str() {
            ids.insert(id.to_string());
        }
        if ids.len() >= 3 && count_objects(&b).await == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "scheduled passes: {ids:?}, objects left {}; log: {}",
            count_objects(&b).await,
            serve.log_text()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!serve.log_text().contains("ERROR"), "{}", serve.log_text());
}

fn done(json: &serde_json::Value) -> u64 {
    json["totals"]["deletes"]["DONE"].as_u64().unwrap()
}

/// `deletes_done=N` of the service's "pass finished" log line.
fn logged_done(log: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.contains("pass finished"))
        .unwrap_or_else(|| panic!("no `pass finished` line in: {log}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("deletes_done="))
        .unwrap_or_else(|| panic!("no deletes_done in {line}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_pass_drains_saves_cursors_and_nothing_is_lost_or_repeated() {
    const N: usize = 300;
    let c = cluster();
    let b = c.new_bucket("svc-stop").await.unwrap();
    c.put_lifecycle_xml(&b, &days_xml()).await.unwrap();
    c.put_objects_bulk(&b, &keys("o/", N), b"x").await.unwrap();
    let dir = format!("/etc/s3/lifecycle/test-{b}");
    // A 2 s day: everything is due 2 s after it was written.
    let env = [
        ("S3_LIFECYCLED__TIME__DAY", "2s"),
        ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "25"),
        ("S3_LIFECYCLED__RATE__BURST", "1"),
        ("S3_LIFECYCLED__DISPATCH__MAX_IN_FLIGHT_PER_SHARD", "2"),
        ("S3_LIFECYCLED__SERVICE__SHUTDOWN_DEADLINE", "20s"),
    ];
    let mut serve = Serve::start(&b, &dir, &env);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (id, _) = serve.trigger(&[]);
    // Wait until deletes are flowing.
    let t = Instant::now();
    loop {
        let st = serve.status();
        let shards = st["current_pass"]["shards"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let sent: u64 = shards
            .iter()
            .map(|s| {
                s["deletes"]["DONE"].as_u64().unwrap_or(0) + s["in_flight"].as_u64().unwrap_or(0)
            })
            .sum();
        if sent >= 20 {
            break;
        }
        assert!(
            st["current_pass"]["run_id"] == id.as_str() && t.elapsed() < Duration::from_secs(30),
            "pass {id} not deleting: {st}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, took) = serve.stop_with("TERM", Duration::from_secs(40));
    let log = serve.log_text();
    assert_eq!(code, 0, "{log}");
    assert!(
        took < Duration::from_secs(20),
        "exit took {took:?} (deadline 20 s)"
    );
    assert!(log.contains("pass drained and cursors saved"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("pass finished") && l.contains("outcome=\"truncated\"")),
        "pass reported truncated: {log}"
    );
    let by_serve = logged_done(&log);
    assert!(
        by_serve >= 20 && (by_serve as usize) < N,
        "serve deleted {by_serve}"
    );
    assert_eq!(
        count_objects(&b).await,
        N - by_serve as usize,
        "drained deletes are all accounted for"
    );

    // Every shard's cursor was saved and parses.
    for shard in 0..16u8 {
        let e = c
            .lookup_entry(&dir, &format!("shard-{shard:02}.json"))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("shard {shard}: no cursor saved"));
        let v: serde_json::Value = serde_json::from_slice(&e.content)
            .unwrap_or_else(|err| panic!("shard {shard}: cursor is not JSON ({err})"));
        assert_eq!(v["shard_id"], shard, "{v}");
    }

    // run-once capped by pass.max_runtime: truncated, not failed, exit 0.
    let (code, capped, stderr) = run_once_with(
        &b,
        &dir,
        &[
            ("S3_LIFECYCLED__TIME__DAY", "2s"),
            ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "25"),
            ("S3_LIFECYCLED__RATE__BURST", "1"),
            ("S3_LIFECYCLED__DISPATCH__MAX_IN_FLIGHT_PER_SHARD", "2"),
            ("S3_LIFECYCLED__PASS__MAX_RUNTIME", "2s"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(capped["outcome"], "truncated", "{capped}");
    assert!(
        capped["truncated"]
            .as_str()
            .unwrap()
            .contains("max_runtime"),
        "{capped}"
    );
    let by_capped = done(&capped);
    assert!(by_capped > 0, "{capped}");

    // An uncapped run-once deletes the rest; no object is deleted twice.
    let (code, rest, stderr) = run_once_with(&b, &dir, &[("S3_LIFECYCLED__TIME__DAY", "2s")]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(rest["outcome"], "completed", "{rest}");
    assert_eq!(
        by_serve + by_capped + done(&rest),
        N as u64,
        "DONE over the three passes must be the object count: serve {by_serve}, capped {by_capped}, rest {rest}"
    );
    assert_eq!(count_objects(&b).await, 0);
}
