//! The pass itself through `run-once` on the shared cluster: shard subsets,
//! `--buckets` and the environment, dry runs, the rate cap, halts on an
//! unreachable or refusing gateway and what the next pass does, cold-start and
//! partition-flip recovery, deleted buckets, configuration and connection
//! errors, a malformed bucket document, the Go cursor dir guard.
//!
//! Each test owns its buckets (`--buckets`) and its cursor dir, travels in time
//! with `--now` (never backwards within one cursor dir) and checks effects
//! through the S3 API and counters through the `--json` report. Due times
//! default to next-midnight-UTC rounding, so "not yet" runs stay below the TTL
//! and "due" runs go past TTL + 1 day. Tests that need a real gap between two
//! writes use a 10 s lifecycle day and sleep a few seconds between the writes.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use super::support::*;
use common::*;

/// Retries against an S3 gRPC address nothing answers at, without the default backoffs.
const FAST_RETRY: [(&str, &str); 2] = [
    ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "10ms"),
    ("S3_LIFECYCLED__DISPATCH__RETRY_MAX_BACKOFF", "20ms"),
];

/// `--dry-run` reports the deletes it would make, deletes nothing and writes no cursor (the
/// next real pass at the same `--now` is still a cold start, and then deletes).
#[tokio::test]
async fn dry_run_deletes_nothing_and_writes_no_cursor() {
    let s = Scenario::new("e2e-dry")
        .objects(&["d/1", "d/2", "d/3", "k/1"], b"data")
        .rules(&days_rule("d", "d/", 30))
        .build()
        .await;
    let all = s.keys().await;

    let p = s.pass_with(32, 0, &["--dry-run"], &[]).await;
    let r = p.ok();
    assert_eq!(r.v["dry_run"], true, "{}", p.describe());
    assert_eq!(s.keys().await, all, "{}", p.describe());
    assert_eq!(r.total("DRY_RUN"), 3, "{}", p.describe());
    assert_eq!(r.total("DONE"), 0, "{}", p.describe());
    let cursor_dir = &s.scope.cursor_dir;
    for shard in 0..16 {
        let name = format!("shard-{shard:02}.json");
        let cursor = s.c.lookup_entry(cursor_dir, &name).await.unwrap();
        assert!(cursor.is_none(), "dry run wrote {cursor_dir}/{name}");
    }

    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&s.bucket).contains("cold_start"),
        "a dry run must leave no cursor behind:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
    assert_eq!(r.total("DRY_RUN"), 0, "{}", p.describe());
    assert_eq!(s.keys().await, set(&["k/1"]));
    // The absence check above means something only if a real pass does write cursors there.
    let mut written = 0;
    for shard in 0..16 {
        let name = format!("shard-{shard:02}.json");
        written += usize::from(s.c.lookup_entry(cursor_dir, &name).await.unwrap().is_some());
    }
    assert!(
        written > 0,
        "a real pass wrote no cursor under {cursor_dir}"
    );
}

/// Configuration and usage errors exit 2 and name the key or flag; nothing is deleted.
#[tokio::test]
async fn config_errors_exit_2_naming_the_key() {
    let s = Scenario::new("e2e-cfg")
        .objects(&["old/1"], b"data")
        .rules(&date_rule("date", "old/", PAST_DATE))
        .build()
        .await;

    let p = run_once(
        s.c,
        &s.scope,
        None,
        &[],
        &[("S3_LIFECYCLED__PASS__SHARDS", "99")],
    )
    .await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("pass.shards") || p.stderr.contains("S3_LIFECYCLED__PASS__SHARDS"),
        "stderr should name the key:\n{}",
        p.describe()
    );

    let p = run_once(s.c, &s.scope, None, &["--shards", "99"], &[]).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("--shards"), "{}", p.describe());

    let p = run_once(s.c, &s.scope, None, &["--now", "yesterday-ish"], &[]).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("--now"), "{}", p.describe());

    assert_eq!(
        s.keys().await,
        set(&["old/1"]),
        "a rejected configuration must not run a pass"
    );
}

/// An unreachable filer is a runtime error (exit 1) whose message names the address.
#[tokio::test]
async fn unreachable_filer_exits_1_naming_the_address() {
    let c = common::cluster();
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "run-once",
        "--filer",
        &addr,
        "--s3-grpc",
        &c.s3_grpc_addr().to_string(),
        "--buckets",
        "e2e-no-such-bucket",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = run_raw(
        &args,
        &[(
            "S3_LIFECYCLED__CURSOR__DIR",
            "/etc/s3/lifecycle/e2e-unreachable",
        )],
    )
    .await;
    assert_eq!(p.code, 1, "{}", p.describe());
    assert!(
        p.stderr.contains(&addr),
        "stderr should name {addr}:\n{}",
        p.describe()
    );
}

/// A bucket whose stored lifecycle document is malformed (written straight into the bucket
/// entry; S3 would refuse it at PUT) is reported and skipped; the other bucket's expirations
/// still happen in the same pass.
#[tokio::test]
async fn malformed_bucket_document_does_not_stop_other_buckets() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let bad = c.new_bucket("e2e-bad-doc").await.unwrap();
    let good = c.new_bucket("e2e-good-doc").await.unwrap();
    put(&s3, &bad, "old/1", b"data", None).await;
    for k in ["old/1", "old/2", "keep/1"] {
        put(&s3, &good, k, b"data", None).await;
    }
    c.set_extended(
        "/buckets",
        &bad,
        common::s3::LIFECYCLE_XML_KEY,
        Some(b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Expiration><Days>1</Days>"),
    )
    .await
    .unwrap();
    c.put_lifecycle_xml(&good, &lifecycle(&date_rule("date", "old/", PAST_DATE)))
        .await
        .unwrap();
    let scope = Scope::new(&[&bad, &good]);

    let p = run_once(c, &scope, Some(plus(now_ns(), 0, 1)), &[], &[]).await;
    let r = p.ok();
    p.assert_left(&s3, &good, &["keep/1"]).await;
    p.assert_left(&s3, &bad, &["old/1"]).await;
    assert!(
        p.stderr.contains(&format!("warning: bucket {bad}: ")),
        "stderr should warn about {bad}:\n{}",
        p.describe()
    );
    assert!(
        r.bucket_errors()
            .iter()
            .any(|(name, reason)| name == &bad && !reason.is_empty()),
        "bucket_errors should name {bad}:\n{}",
        p.describe()
    );
    assert!(
        !r.bucket_errors().iter().any(|(name, _)| name == &good),
        "{}",
        p.describe()
    );
}

/// Several buckets in one pass, and two shard subsets (0-7, then 8-15) that together delete
/// every due object exactly once, each subset only its own shards' objects.
#[tokio::test]
async fn shard_subsets_cover_every_bucket_exactly_once() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b1 = c.new_bucket("e2e-shards-a").await.unwrap();
    let b2 = c.new_bucket("e2e-shards-b").await.unwrap();
    let keys: Vec<String> = (0..24).map(|i| format!("d/obj-{i:02}")).collect();
    for b in [&b1, &b2] {
        c.put_objects_bulk(b, &keys, b"data").await.unwrap();
        put(&s3, b, "keep/x", b"data", None).await;
        c.put_lifecycle_xml(b, &lifecycle(&date_rule("d", "d/", PAST_DATE)))
            .await
            .unwrap();
    }
    let scope = Scope::new(&[&b1, &b2]);
    let at = plus(now_ns(), 0, 1);

    let p = run_once(c, &scope, Some(at), &["--shards", "0-7"], &[]).await;
    let r = p.ok();
    assert_eq!(r.shards().len(), 8, "{}", p.describe());
    let mut expected_first = 0;
    for b in [&b1, &b2] {
        let want: BTreeSet<String> = keys
            .iter()
            .filter(|k| shard_of(b, k) >= 8)
            .cloned()
            .chain(["keep/x".to_string()])
            .collect();
        expected_first += keys.len() + 1 - want.len();
        assert_eq!(list_keys(&s3, b).await, want, "{b}:\n{}", p.describe());
    }
    assert_eq!(r.total("DONE"), expected_first as i64, "{}", p.describe());

    let p = run_once(c, &scope, Some(at), &["--shards", "8-15"], &[]).await;
    let r = p.ok();
    for b in [&b1, &b2] {
        assert_eq!(
            list_keys(&s3, b).await,
            set(&["keep/x"]),
            "{}",
            p.describe()
        );
    }
    assert_eq!(
        r.total("DONE"),
        (2 * keys.len() - expected_first) as i64,
        "{}",
        p.describe()
    );

    let p = run_once(c, &scope, Some(at), &[], &[]).await;
    p.ok().assert_no_deletes();
}

/// An S3 gRPC port that refuses connections: the shard with a due delete halts (exit 3, reason
/// printed), nothing is deleted, and the next pass against the right port deletes it.
#[tokio::test]
async fn unreachable_s3_grpc_halts_then_next_pass_deletes() {
    let s = Scenario::new("e2e-halt")
        .rules(&days_rule("h", "h/", 30))
        .objects(&["h/k"], b"data")
        .build()
        .await;
    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();

    let closed = common::free_port();
    let bad = format!("127.0.0.1:{closed}");
    let p = run_once_via(s.c, &s.scope, plus(s.t0, 32, 0), &bad, &FAST_RETRY).await;
    assert_eq!(p.code, 3, "{}", p.describe());
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    let halted = r.halted_shards();
    assert_eq!(halted.len(), 1, "{}", p.describe());
    let reason = halted[0]["halt_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("h/k"),
        "reason {reason:?}:\n{}",
        p.describe()
    );
    assert!(r.total("RPC_ERROR") >= 1, "{}", p.describe());
    assert_eq!(s.head("h/k", None).await, 200);

    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    assert_eq!(s.head("h/k", None).await, 404, "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// `rate.deletes_per_second` = 20 with burst 1 over 100 due objects cannot finish in under
/// ~5 s (lower bound only: a behaviour, not a speed goal).
#[tokio::test]
async fn rate_limit_spreads_deletes() {
    let s = Scenario::new("e2e-rate")
        .bulk((0..100).map(|i| format!("r/{i:03}")).collect(), b"x")
        .rules(&date_rule("r", "r/", PAST_DATE))
        .build()
        .await;
    let started = std::time::Instant::now();
    let p = s
        .pass_with(
            0,
            1,
            &[],
            &[
                ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "20"),
                ("S3_LIFECYCLED__RATE__BURST", "1"),
            ],
        )
        .await;
    let took = started.elapsed();
    let r = p.ok();
    assert_eq!(r.total("DONE"), 100, "{}", p.describe());
    assert!(s.keys().await.is_empty());
    assert!(
        took >= Duration::from_secs(4),
        "100 deletes at 20/s took {took:?}:\n{}",
        p.describe()
    );
    assert!(
        r.v["duration_ms"].as_i64().unwrap_or(0) >= 4000,
        "{}",
        p.describe()
    );
}

/// A declared meta-log retention shorter than the rule's TTL moves the rule to the walker
/// (`partition_flip`), and its objects still expire.
#[tokio::test]
async fn partition_flip_to_walker_still_expires() {
    let s = Scenario::new("e2e-flip")
        .objects(&["p/1", "p/2", "q/keep"], b"data")
        .rules(&days_rule("p", "p/", 30))
        .build()
        .await;
    let long = [("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h")];
    let short = [("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "24h")];

    let p = s.pass_with(10, 0, &[], &long).await;
    p.ok().assert_no_deletes();

    let p = s.pass_with(32, 0, &[], &short).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&s.bucket).contains("partition_flip"),
        "{}",
        p.describe()
    );
    p.assert_left(&s.s3, &s.bucket, &["q/keep"]).await;
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());

    let p = s.pass_with(33, 0, &[], &short).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&s.bucket).is_empty(), "{}", p.describe());
}

/// The retention trap (docs/retention-probe.md#replay-lag): `pass.meta_log_retention` equal to the
/// rule's TTL (what the Go worker's `meta_log_retention_days` translates to). Replay progress
/// trails `now − TTL` by about a day plus rounding and the skew margin, so with that retention
/// every pass used to find its progress trimmed and ran a `retention_loss` recovery walk. Now the
/// rule is walked steadily: after the first pass (cold start) no pass recovers, and due objects
/// still go. A 2 s lifecycle day, TTL 3 days = 6 s, retention 6 s.
#[tokio::test]
async fn retention_equal_to_ttl_recovers_only_on_the_first_pass() {
    let s = Scenario::new("e2e-ret-ttl")
        .rules(&days_rule("x", "x/", 3))
        .objects(&["x/1", "x/2", "keep"], b"data")
        .build()
        .await;
    let (c, scope, b, t0) = (s.c, &s.scope, &s.bucket, s.t0);
    let env = [
        ("S3_LIFECYCLED__TIME__DAY", "2s"),
        ("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "6s"),
    ];

    let p = run_once(c, scope, Some(t0 + SEC_NS), &[], &env).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(
        r.recovery_reasons(b).contains("cold_start"),
        "{}",
        p.describe()
    );
    let mut deleted = 0;
    // Passes 2 s (one lifecycle day) apart, then well past the due time; x/3 is written after
    // the objects above were deleted and must be deleted by a later steady pass.
    for (i, at) in [3, 5, 7, 20, 22, 40, 42].into_iter().enumerate() {
        if at == 22 {
            s.put("x/3", b"data").await;
        }
        let p = run_once(c, scope, Some(t0 + at * SEC_NS), &[], &env).await;
        let r = p.ok();
        assert!(
            r.recovery_reasons(b).is_empty(),
            "pass {} at t0+{at}s recovered:\n{}",
            i + 2,
            p.describe()
        );
        deleted += r.total("DONE");
        match at {
            20 => assert_eq!(deleted, 2, "{}", p.describe()),
            40 => assert_eq!(deleted, 3, "{}", p.describe()),
            _ => {}
        }
    }
    assert_eq!(s.keys().await, set(&["keep"]));
    assert_eq!(deleted, 3);
}

/// Steady state: objects, versions and uploads written after the first pass expire through the
/// replay at the next pass (unversioned, Enabled current version, noncurrent version, MPU).
#[tokio::test]
async fn writes_after_the_first_pass_expire_by_replay() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let plain = c.new_bucket("e2e-steady-p").await.unwrap();
    let vers = c.new_bucket("e2e-steady-v").await.unwrap();
    enable_versioning(&s3, &vers).await;
    c.put_lifecycle_xml(
        &plain,
        &lifecycle(&format!(
            "{}{}",
            days_rule("e", "e/", 30),
            abort_upload_rule("up", "up/", 2)
        )),
    )
    .await
    .unwrap();
    c.put_lifecycle_xml(
        &vers,
        &lifecycle(&format!(
            "{}{}",
            days_rule("e", "e/", 30),
            noncurrent_rule("nc", "nc/", 3)
        )),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&plain, &vers]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();

    put(&s3, &plain, "e/a", b"data", None).await;
    put(&s3, &plain, "keep", b"data", None).await;
    start_upload(&s3, &plain, "up/x.bin").await;
    let cur = put(&s3, &vers, "e/v", b"v1", None).await.unwrap();
    let nc1 = put(&s3, &vers, "nc/k", b"1", None).await.unwrap();
    let nc2 = put(&s3, &vers, "nc/k", b"2", None).await.unwrap();

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&plain).is_empty(), "{}", p.describe());
    assert!(r.recovery_reasons(&vers).is_empty(), "{}", p.describe());

    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        list_uploads(&s3, &plain).await.is_empty(),
        "{}",
        p.describe()
    );
    assert_eq!(
        list_versions(&s3, &vers, "nc/").await,
        vec![Ver {
            key: "nc/k".into(),
            version_id: nc2,
            is_latest: true,
            marker: false
        }],
        "{nc1} should be gone:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    p.assert_left(&s3, &plain, &["keep"]).await;
    assert_eq!(
        head_status(&s3, &vers, "e/v", None).await,
        404,
        "{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &vers, "e/v", Some(&cur)).await, 200);
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// A due object found by the cold-start walk while the S3 gRPC port is closed: the pass halts
/// (exit 3) and the next pass, against the right port, still deletes it.
#[tokio::test]
async fn halted_cold_start_walk_is_redone() {
    let s = Scenario::new("e2e-halt-walk")
        .objects(&["w/k"], b"data")
        .rules(&date_rule("w", "w/", PAST_DATE))
        .build()
        .await;
    let closed = common::free_port();
    let bad = format!("127.0.0.1:{closed}");
    let p = run_once_via(s.c, &s.scope, plus(s.t0, 0, 1), &bad, &FAST_RETRY).await;
    assert_eq!(p.code, 3, "{}", p.describe());
    assert_eq!(s.head("w/k", None).await, 200);
    let p = s.pass_at(0, 1).await;
    let r = p.ok();
    assert_eq!(s.head("w/k", None).await, 404, "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Without `--now` the pass uses the wall clock (10 s days, no rounding): an object older than
/// one short day is deleted, a fresh one is not.
#[tokio::test]
async fn wall_clock_pass_without_now() {
    let s = Scenario::new("e2e-wall")
        .rules(&days_rule("w", "w/", 1))
        .objects(&["w/old"], b"data")
        .build()
        .await;
    let m_old = mtime_ns(&s.s3, &s.bucket, "w/old").await;
    let p = run_once(s.c, &s.scope, None, &[], &SHORT_DAY).await;
    p.ok().assert_no_deletes();
    // This test is about the wall clock, so it waits for it (no `--now`): until w/old is one short
    // day (10 s) old, with a second to spare.
    wait_until_clock_passes(m_old + 11 * SEC_NS, Duration::from_secs(15)).await;
    s.put("w/new", b"data").await;
    let p = run_once(s.c, &s.scope, None, &[], &SHORT_DAY).await;
    let r = p.ok();
    p.assert_left(&s.s3, &s.bucket, &["w/new"]).await;
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// A delete the server answers RETRY_LATER (a lone delete marker whose `.versions` folder lost
/// its latest pointer: `PENDING_LATEST_POINTER`) halts the shard with the reason; once the
/// pointer is back, the next pass removes the marker.
#[tokio::test]
async fn retry_later_halts_then_next_pass_resolves() {
    let s = Scenario::new("e2e-retry-later")
        .versioned()
        .rules(&delete_marker_rule("dm", "m/"))
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    s.delete("m/k", None).await;
    let c = s.c;
    let dir = format!("{}/{}/m", c.buckets_root(), s.bucket);
    let folder = c.lookup_entry(&dir, "k.versions").await.unwrap().unwrap();
    let key = s3_lifecycled::engine::keys::LATEST_VERSION_ID;
    let pointer = folder.extended.get(key).cloned().expect("a latest pointer");
    c.set_extended(&dir, "k.versions", key, None).await.unwrap();

    let p = s.pass_at(1, 0).await;
    assert_eq!(p.code, 3, "{}", p.describe());
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    assert_eq!(r.total("RETRY_LATER"), 1, "{}", p.describe());
    assert!(
        p.stdout.contains("PENDING_LATEST_POINTER"),
        "{}",
        p.describe()
    );
    assert_eq!(s.versions("m/k").await.len(), 1);

    c.set_extended(&dir, "k.versions", key, Some(&pointer))
        .await
        .unwrap();
    let p = s.pass_at(1, 1).await;
    let r = p.ok();
    assert!(s.versions("m/k").await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// `S3_LIFECYCLED__PASS__BUCKETS` selects buckets like `--buckets`: the other bucket, due as
/// well, is left alone.
#[tokio::test]
async fn buckets_from_the_environment_limit_the_pass() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let chosen = c.new_bucket("e2e-env-on").await.unwrap();
    let other = c.new_bucket("e2e-env-off").await.unwrap();
    for b in [&chosen, &other] {
        put(&s3, b, "d/1", b"x", None).await;
        c.put_lifecycle_xml(b, &lifecycle(&date_rule("d", "d/", PAST_DATE)))
            .await
            .unwrap();
    }
    let cursor_dir = format!("/etc/s3/lifecycle/e2e-{chosen}");
    let args: Vec<String> = [
        "run-once",
        "--filer",
        &c.filer_grpc_addr().to_string(),
        "--s3-grpc",
        &c.s3_grpc_addr().to_string(),
        "--json",
        "--now",
        &rfc3339(plus(now_ns(), 0, 1)),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = run_raw(
        &args,
        &[
            ("S3_LIFECYCLED__CURSOR__DIR", cursor_dir.as_str()),
            ("S3_LIFECYCLED__PASS__BUCKETS", chosen.as_str()),
        ],
    )
    .await;
    let r = p.ok();
    assert_eq!(
        r.v["buckets"],
        serde_json::json!([chosen]),
        "{}",
        p.describe()
    );
    assert!(list_keys(&s3, &chosen).await.is_empty(), "{}", p.describe());
    p.assert_left(&s3, &other, &["d/1"]).await;
}

/// A bucket deleted between passes (still named in `--buckets`, state in the cursors) does not
/// fail the next pass, and the other bucket's expirations go on.
#[tokio::test]
async fn deleted_bucket_between_passes_does_not_fail_the_pass() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let doomed = c.new_bucket("e2e-doomed").await.unwrap();
    let live = c.new_bucket("e2e-live").await.unwrap();
    for b in [&doomed, &live] {
        put(&s3, b, "x/1", b"x", None).await;
        c.put_lifecycle_xml(b, &lifecycle(&days_rule("x", "x/", 30)))
            .await
            .unwrap();
    }
    let t0 = now_ns();
    let scope = Scope::new(&[&doomed, &live]);
    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    delete(&s3, &doomed, "x/1", None).await;
    s3.delete_bucket().bucket(&doomed).send().await.unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &live).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());

    // Lifecycle removed then put back: a fresh start that still finds what is due.
    put(&s3, &live, "x/2", b"x", None).await;
    s3.delete_bucket_lifecycle()
        .bucket(&live)
        .send()
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 33, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    c.put_lifecycle_xml(&live, &lifecycle(&days_rule("x", "x/", 30)))
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 70, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &live).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Regression (Go cursor dir guard bypassed by spelling): `cursor.dir` written as
/// `/etc/s3/lifecycle//daily-cursors` or `/etc/s3/lifecycle/./daily-cursors` is the Go worker's
/// cursor directory all the same (the filer collapses the path); it must be refused (exit 2,
/// naming the key) before any pass runs, so Go's cursors are never overwritten.
#[tokio::test]
async fn go_cursor_dir_guard_sees_through_path_spelling() {
    let s = Scenario::new("e2e-go-dir")
        .objects(&["old/1"], b"x")
        .rules(&date_rule("d", "old/", PAST_DATE))
        .build()
        .await;
    for dir in [
        "/etc/s3/lifecycle/daily-cursors/",
        "/etc/s3/lifecycle//daily-cursors",
        "//etc/s3/lifecycle/daily-cursors",
        "/etc/s3/lifecycle/./daily-cursors",
        "/etc/s3/./lifecycle/daily-cursors/.",
    ] {
        let scope = Scope {
            buckets: vec![s.bucket.clone()],
            cursor_dir: dir.to_string(),
        };
        let p = run_once(s.c, &scope, Some(plus(now_ns(), 0, 1)), &[], &[]).await;
        assert_eq!(p.code, 2, "{dir}:\n{}", p.describe());
        assert!(p.stderr.contains("cursor.dir"), "{dir}:\n{}", p.describe());
    }
    assert_eq!(s.keys().await, set(&["old/1"]));
}

/// Regression: a recovery walk run with `--now` in the future claimed every
/// event up to that future time as handled, so objects written afterwards (in
/// real time, before that future) were skipped by every later pass and never
/// expired. The walk can only vouch for what existed when it ran.
#[tokio::test]
async fn future_now_recovery_does_not_skip_objects_written_later() {
    let s = Scenario::new("e2e-future-now")
        .rules(&days_rule("d", "d/", 30))
        .objects(&["d/old"], b"x")
        .build()
        .await;
    // Cold start far in the future: the recovery walk expires d/old.
    let p = s.pass_at(40, 0).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&s.bucket).contains("cold_start"),
        "{}",
        p.describe()
    );
    assert!(s.keys().await.is_empty(), "{}", p.describe());
    // Written after that pass, in real time: its event is older than the
    // pass's `now`, but the walk never saw it.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    s.put("d/new", b"x").await;
    let p = s.pass_at(75, 0).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&s.bucket).is_empty(),
        "steady pass: {}",
        p.describe()
    );
    assert!(
        s.keys().await.is_empty(),
        "d/new must expire through replay: {}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// A `run-once --now` earlier than the time an earlier pass saved the cursors at (a mistyped
/// date) ran without a word. It now warns, naming both times; the pass itself runs as before,
/// deleting nothing the later pass left.
#[tokio::test]
async fn run_once_at_a_now_before_the_last_pass_gave_no_warning() {
    let s = Scenario::new("e2e-earlier")
        .objects(&["d/1", "k/1"], b"data")
        .rules(&days_rule("d", "d/", 3))
        .build()
        .await;
    let later = s.pass_with(5, 0, &[], &[]).await;
    assert_eq!(later.ok().total("DONE"), 1, "{}", later.describe());
    assert!(
        !later.stderr.contains("Was --now meant to be later?"),
        "{}",
        later.describe()
    );
    let earlier = s.pass_with(1, 0, &[], &[]).await;
    let r = earlier.ok();
    assert_eq!(r.total("DONE"), 0, "{}", earlier.describe());
    assert!(
        earlier.stderr.contains("Was --now meant to be later?"),
        "{}",
        earlier.describe()
    );
    assert_eq!(s.keys().await, BTreeSet::from(["k/1".to_string()]));
}
