//! The pass end to end against the loopback cluster, through the `run-once`
//! binary: walker (Expiration Date), cold-start recovery and steady replay
//! (Expiration Days with a 10 s day) and dry run. Throughput figures live in
//! `benches/live.rs`.

use crate::common;

use common::*;

/// `run-once` over `scope` with the 10 s day of the tests here (and `--now` when given).
async fn run(scope: &Scope, now: Option<i64>, extra: &[&str]) -> Report {
    let p = run_once(cluster(), scope, now, extra, &SHORT_DAY).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    p.json()
}

#[tokio::test(flavor = "multi_thread")]
async fn past_date_rule_deletes_everything_and_second_pass_finds_nothing() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("pass-date").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("past", "", PAST_DATE)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("o/", 40), b"x").await.unwrap();
    let scope = Scope::new(&[&b]);

    let dry = run(&scope, None, &["--dry-run"]).await;
    assert_eq!(
        dry.v["totals"]["deletes"]["DRY_RUN"],
        40,
        "{}",
        dry.context()
    );
    assert_eq!(count_objects(&s3, &b).await, 40, "dry run deleted nothing");

    let r = run(&scope, None, &[]).await;
    assert_eq!(r.v["outcome"], "completed", "{}", r.context());
    assert_eq!(r.v["totals"]["deletes"]["DONE"], 40, "{}", r.context());
    assert_eq!(r.shards().len(), 16);
    assert_eq!(count_objects(&s3, &b).await, 0);

    let again = run(&scope, None, &[]).await;
    assert_eq!(again.v["totals"]["matches"], 0, "{}", again.context());
    assert!(
        again
            .shards()
            .iter()
            .all(|s| s["recovery"].as_array().unwrap().is_empty()),
        "second pass must not recover: {}",
        again.context()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn days_rule_cold_start_walks_then_replay_deletes_later_objects_once() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("pass-days").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("old/", 10), b"x")
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    // Not due yet at the real now (1 day = 10 s): a cold start records, deletes nothing.
    let r0 = run(&scope, None, &["--shards", "0-15"]).await;
    assert_eq!(r0.v["totals"]["deletes"]["DONE"], 0, "{}", r0.context());
    let recovered: usize = r0
        .shards()
        .iter()
        .map(|s| s["recovery"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        recovered,
        16,
        "every shard cold-starts the bucket: {}",
        r0.context()
    );

    c.put_objects_bulk(&b, &keys("new/", 10), b"x")
        .await
        .unwrap();
    // 60 s later everything is due; replay finds all 20 through the meta-log.
    let later = now_ns() + 60 * SEC_NS;
    let r1 = run(&scope, Some(later), &[]).await;
    assert_eq!(r1.v["totals"]["deletes"]["DONE"], 20, "{}", r1.context());
    assert_eq!(count_objects(&s3, &b).await, 0);
    // Nothing is re-sent by a later pass.
    let r2 = run(&scope, Some(later), &[]).await;
    let sent: u64 = r2.v["totals"]["deletes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sent, 0, "{}", r2.context());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_flags_exit_2_naming_the_flag() {
    let out = run_raw(&["run-once", "--shards", "3-99"], &[]).await;
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(out.stderr.contains("--shards"), "{}", out.describe());
    let out = run_raw(&["run-once", "--now", "yesterday"], &[]).await;
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(out.stderr.contains("--now"), "{}", out.describe());
}

/// Scan rate: the replay fan-out sent one actor message per event and awaited each,
/// which held a pass that must read everything below the Go worker's rate. Events
/// now reach their shard in batches (docs/meta-log.md#replay-batches): far fewer
/// messages than events, and still every event processed in order, every due match
/// deleted once, nothing re-sent.
#[tokio::test(flavor = "multi_thread")]
async fn replay_fan_out_sends_batches_not_one_message_per_event() {
    const N: usize = 3_000;
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("pass-batched").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    // Cold start of the empty bucket: from here on, replay serves it.
    let r0 = run(&scope, None, &[]).await;
    assert_eq!(r0.v["outcome"], "completed", "{}", r0.context());
    c.put_objects_bulk(&b, &keys("o/", N), b"x").await.unwrap();

    // 60 s later (1 day = 10 s) every object is due; replay finds them all.
    let later = now_ns() + 60 * SEC_NS;
    let r1 = run(&scope, Some(later), &[]).await;
    assert_eq!(r1.v["outcome"], "completed", "{}", r1.context());
    assert_eq!(r1.v["totals"]["deletes"]["DONE"], N, "{}", r1.context());
    let read = r1.v["replay"]["events_read"].as_u64().unwrap();
    let scanned = r1.v["totals"]["events_scanned"].as_u64().unwrap();
    let batches = r1.v["replay"]["batches"]
        .as_u64()
        .unwrap_or_else(|| panic!("replay.batches missing: {}", r1.context()));
    assert!(
        scanned >= N as u64 && read >= scanned,
        "every event of the bucket reached its shard: read {read}, scanned {scanned}\n{}",
        r1.context()
    );
    assert!(
        batches > 0 && batches * 10 <= scanned,
        "{scanned} events went to the shards in {batches} messages; one per event is the bug\n{}",
        r1.context()
    );
    assert_eq!(count_objects(&s3, &b).await, 0);

    // Nothing is re-sent by a later pass over the same window.
    let r2 = run(&scope, Some(later), &[]).await;
    let sent: u64 = r2.v["totals"]["deletes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sent, 0, "{}", r2.context());
}
