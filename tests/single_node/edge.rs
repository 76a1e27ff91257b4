//! Acceptance edge cases of `s3-lifecycled run-once` against a real SeaweedFS 4.48 cluster:
//! Suspended versioning, displaced null versions, restored versions, overwrites and tag edits
//! after a PUT, several buckets and shard subsets, halts on an unreachable S3 gRPC port, rate
//! limiting, partition flips, due rounding, unusual keys and multipart uploads under a
//! whole-bucket expiration rule.
//!
//! Same isolation rules as `single_node/lifecycle.rs`: own buckets (`--buckets`), own cursor dir,
//! `--json`, `--now` moving forward only within one cursor dir. Tests that need a real gap
//! between two writes use a 10 s lifecycle day (`S3_LIFECYCLED__TIME__DAY=10s`) and sleep a
//! few seconds between the writes; nothing asserts an upper bound on time.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, Tag, Tagging};

use common::*;

/// Deletes one key (or one version of it).
async fn delete(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, version: Option<&str>) {
    s3.delete_object()
        .bucket(bucket)
        .key(key)
        .set_version_id(version.map(str::to_string))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DELETE {bucket}/{key} {version:?}: {e:?}"));
}

/// Last-Modified of the current version, in ns (whole seconds, as S3 stores them).
async fn mtime_ns(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> i64 {
    let h = s3
        .head_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("HEAD {bucket}/{key}: {e:?}"));
    h.last_modified().expect("Last-Modified").secs() * SEC_NS
}

/// The shard a walker or a bare-key replay event sends `key` to.
fn shard_of(bucket: &str, key: &str) -> u8 {
    s3_lifecycled::engine::shard_id(bucket, key)
}

/// SuspendedVersioningExpiration (docs/lifecycle-delete.md#versioned-expiration): Enabled PUT v1,
/// Suspended PUT (null), Days rule; after due the latest is a delete marker, v1 is still readable
/// and the null version is gone.
#[tokio::test]
async fn suspended_versioning_expiration_replaces_null_with_marker() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-susp").await.unwrap();
    enable_versioning(&s3, &b).await;
    let v1 = put(&s3, &b, "s/k", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "s/k", b"null body", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("s", "s/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &b, "s/k", None).await, 200);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "s/k", None).await,
        404,
        "latest should be a delete marker:\n{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "s/k", Some(&v1)).await, 200);
    let vs = list_versions(&s3, &b, "s/").await;
    assert!(
        vs.iter().any(|v| v.marker && v.is_latest),
        "latest is a marker: {vs:?}\n{}",
        p.describe()
    );
    assert!(
        !vs.iter().any(|v| !v.marker && v.version_id == "null"),
        "the null version should be deleted: {vs:?}\n{}",
        p.describe()
    );
    assert!(vs.iter().any(|v| v.version_id == v1 && !v.is_latest));
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// A pre-versioning object displaced by the first versioned PUT expires under NoncurrentDays
/// (deferred case A); a displaced null that a Suspended write made current again is kept.
#[tokio::test]
async fn displaced_null_expires_but_rewritten_null_is_kept() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-null").await.unwrap();
    put(&s3, &b, "n/gone", b"pre", None).await;
    put(&s3, &b, "n/back", b"pre", None).await;
    enable_versioning(&s3, &b).await;
    let cur = put(&s3, &b, "n/gone", b"v1", None).await.unwrap();
    put(&s3, &b, "n/back", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "n/back", b"null again", None).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let before = list_versions(&s3, &b, "n/gone").await;
    assert_eq!(before.len(), 2, "{before:?}");

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_versions(&s3, &b, "n/gone").await, before);

    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    p.ok();
    assert_eq!(
        list_versions(&s3, &b, "n/gone").await,
        vec![Ver {
            key: "n/gone".into(),
            version_id: cur,
            is_latest: true,
            marker: false
        }],
        "the displaced null version should be gone:\n{}",
        p.describe()
    );
    let back = list_versions(&s3, &b, "n/back").await;
    assert!(
        back.iter()
            .any(|v| v.version_id == "null" && v.is_latest && !v.marker),
        "the rewritten null is current and must stay: {back:?}\n{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &b, "n/back", None).await, 200);
}

/// Removing the latest (a delete marker, or a newer version) by id restores an older version;
/// it must still expire under Expiration Days (deferred case B).
#[tokio::test]
async fn restored_version_still_expires() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-restore").await.unwrap();
    enable_versioning(&s3, &b).await;
    let a1 = put(&s3, &b, "r/a", b"a1", None).await.unwrap();
    delete(&s3, &b, "r/a", None).await;
    let marker = list_versions(&s3, &b, "r/a")
        .await
        .into_iter()
        .find(|v| v.marker)
        .expect("a delete marker")
        .version_id;
    delete(&s3, &b, "r/a", Some(&marker)).await;
    let b1 = put(&s3, &b, "r/b", b"b1", None).await.unwrap();
    let b2 = put(&s3, &b, "r/b", b"b2", None).await.unwrap();
    delete(&s3, &b, "r/b", Some(&b2)).await;
    assert_eq!(head_status(&s3, &b, "r/a", None).await, 200);
    assert_eq!(head_status(&s3, &b, "r/b", None).await, 200);
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("r", "r/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    for (key, vid) in [("r/a", &a1), ("r/b", &b1)] {
        assert_eq!(
            head_status(&s3, &b, key, None).await,
            404,
            "{key} should be expired (marker on top):\n{}",
            p.describe()
        );
        assert_eq!(head_status(&s3, &b, key, Some(vid)).await, 200);
    }
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// An object overwritten after its first PUT is not deleted on the first PUT's due time (that
/// match fails the identity CAS); it goes when the rewrite is due.
#[tokio::test]
async fn overwrite_is_not_deleted_on_the_first_puts_due_time() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-overwrite").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("o", "o/", 1)))
        .await
        .unwrap();
    put(&s3, &b, "o/k", b"first", None).await;
    let first = mtime_ns(&s3, &b, "o/k").await;
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(first + SEC_NS), &[], &SHORT_DAY).await;
    p.ok().assert_no_deletes();

    tokio::time::sleep(Duration::from_secs(5)).await;
    put(&s3, &b, "o/k", b"second", None).await;
    let second = mtime_ns(&s3, &b, "o/k").await;
    assert!(second >= first + 4 * SEC_NS, "{first} {second}");

    // The first PUT is due (first + 10 s), the rewrite is not (second + 10 s).
    let p = run_once(c, &scope, Some(first + 11 * SEC_NS), &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "o/k", None).await,
        200,
        "the rewrite is not due yet:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 0, "{}", p.describe());

    let p = run_once(c, &scope, Some(second + 12 * SEC_NS), &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "o/k", None).await,
        404,
        "the rewrite is due:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// A tag added after the PUT makes a tag-filtered rule match; a tag removed makes it not match.
#[tokio::test]
async fn tag_edits_after_put_change_what_matches() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-tag-edit").await.unwrap();
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>t</ID><Status>Enabled</Status>\
             <Filter><And><Prefix>t/</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag></And></Filter>\
             <Expiration><Days>1</Days></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    put(&s3, &b, "t/added", b"x", None).await;
    put(&s3, &b, "t/removed", b"x", Some("env=tmp")).await;
    put(&s3, &b, "t/kept", b"x", Some("env=tmp")).await;
    let t0 = mtime_ns(&s3, &b, "t/added").await;
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(t0 + SEC_NS), &[], &SHORT_DAY).await;
    p.ok().assert_no_deletes();

    s3.put_object_tagging()
        .bucket(&b)
        .key("t/added")
        .tagging(
            Tagging::builder()
                .tag_set(Tag::builder().key("env").value("tmp").build().unwrap())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    s3.delete_object_tagging()
        .bucket(&b)
        .key("t/removed")
        .send()
        .await
        .unwrap();

    let p = run_once(c, &scope, Some(t0 + 15 * SEC_NS), &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["t/removed"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
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
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-halt").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("h", "h/", 30)))
        .await
        .unwrap();
    put(&s3, &b, "h/k", b"data", None).await;
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    let closed = common::free_port();
    let bad = format!("127.0.0.1:{closed}");
    let args: Vec<String> = [
        "run-once",
        "--filer",
        &c.filer_grpc_addr().to_string(),
        "--s3-grpc",
        &bad,
        "--buckets",
        &b,
        "--json",
        "--now",
        &rfc3339(plus(t0, 32, 0)),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = run_raw(
        &args,
        &[
            ("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str()),
            ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "10ms"),
            ("S3_LIFECYCLED__DISPATCH__RETRY_MAX_BACKOFF", "20ms"),
        ],
    )
    .await;
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
    assert_eq!(head_status(&s3, &b, "h/k", None).await, 200);

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "h/k", None).await,
        404,
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// `rate.deletes_per_second` = 20 with burst 1 over 100 due objects cannot finish in under
/// ~5 s (lower bound only: a behaviour, not a speed goal).
#[tokio::test]
async fn rate_limit_spreads_deletes() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-rate").await.unwrap();
    let keys: Vec<String> = (0..100).map(|i| format!("r/{i:03}")).collect();
    c.put_objects_bulk(&b, &keys, b"x").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("r", "r/", PAST_DATE)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let started = std::time::Instant::now();
    let p = run_once(
        c,
        &scope,
        Some(plus(now_ns(), 0, 1)),
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
    assert!(list_keys(&s3, &b).await.is_empty());
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
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-flip").await.unwrap();
    for k in ["p/1", "p/2", "q/keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("p", "p/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let long = [("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h")];
    let short = [("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "24h")];

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &long).await;
    p.ok().assert_no_deletes();

    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &short).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).contains("partition_flip"),
        "{}",
        p.describe()
    );
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["q/keep"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());

    let p = run_once(c, &scope, Some(plus(t0, 33, 0)), &[], &short).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&b).is_empty(), "{}", p.describe());
}

/// The retention trap (docs/retention-probe.md#replay-lag): `pass.meta_log_retention` equal to the
/// rule's TTL (what the Go worker's `meta_log_retention_days` translates to). Replay progress
/// trails `now − TTL` by about a day plus rounding and the skew margin, so with that retention
/// every pass used to find its progress trimmed and ran a `retention_loss` recovery walk. Now the
/// rule is walked steadily: after the first pass (cold start) no pass recovers, and due objects
/// still go. A 2 s lifecycle day, TTL 3 days = 6 s, retention 6 s.
#[tokio::test]
async fn retention_equal_to_ttl_recovers_only_on_the_first_pass() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-ret-ttl").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("x", "x/", 3)))
        .await
        .unwrap();
    for k in ["x/1", "x/2", "keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let env = [
        ("S3_LIFECYCLED__TIME__DAY", "2s"),
        ("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "6s"),
    ];

    let p = run_once(c, &scope, Some(t0 + SEC_NS), &[], &env).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(
        r.recovery_reasons(&b).contains("cold_start"),
        "{}",
        p.describe()
    );
    let mut deleted = 0;
    // Passes 2 s (one lifecycle day) apart, then well past the due time; x/3 is written after
    // the objects above were deleted and must be deleted by a later steady pass.
    for (i, at) in [3, 5, 7, 20, 22, 40, 42].into_iter().enumerate() {
        if at == 22 {
            put(&s3, &b, "x/3", b"data", None).await;
        }
        let p = run_once(c, &scope, Some(t0 + at * SEC_NS), &[], &env).await;
        let r = p.ok();
        assert!(
            r.recovery_reasons(&b).is_empty(),
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
    assert_eq!(list_keys(&s3, &b).await, set(&["keep"]));
    assert_eq!(deleted, 3);
}

/// Due rounding: `none` deletes a 1-day object just after mtime + 1 day; the default `next_day`
/// waits for the next midnight UTC after that. Never skipped near midnight: an object written
/// in the last minute before midnight UTC (mtime + 1 day too close to the rounded due time to
/// tell the roundings apart) is written again, into fresh buckets, once that midnight has passed.
#[tokio::test]
async fn due_rounding_none_versus_next_day() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let mut attempts = 0;
    let (exact, rounded, m_exact, m_round, midnight) = loop {
        attempts += 1;
        assert!(attempts <= 2, "the second write is past midnight UTC");
        let exact = c.new_bucket("e2e-round-none").await.unwrap();
        let rounded = c.new_bucket("e2e-round-day").await.unwrap();
        for b in [&exact, &rounded] {
            put(&s3, b, "x/k", b"data", None).await;
            c.put_lifecycle_xml(b, &lifecycle(&days_rule("x", "x/", 1)))
                .await
                .unwrap();
        }
        let m_exact = mtime_ns(&s3, &exact, "x/k").await;
        let m_round = mtime_ns(&s3, &rounded, "x/k").await;
        // The rounded due time: the first midnight UTC at or after mtime + 1 day.
        let midnight = midnight_at_or_after(m_round + DAY_NS);
        if midnight - (m_round + DAY_NS) >= 60 * SEC_NS {
            break (exact, rounded, m_exact, m_round, midnight);
        }
        // Written less than a minute before midnight UTC (or exactly on it): wait a second past
        // that midnight (at most a minute) and write again; the next rounded due time is a day
        // away from mtime + 1 day.
        wait_until_clock_passes(midnight - DAY_NS + SEC_NS, Duration::from_secs(120)).await;
    };
    let due_exact = m_exact + DAY_NS;
    let none = [("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none")];
    let s_exact = Scope::new(&[&exact]);
    let s_round = Scope::new(&[&rounded]);

    let p = run_once(c, &s_exact, Some(due_exact - 5 * SEC_NS), &[], &none).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &exact, "x/k", None).await, 200);
    let p = run_once(c, &s_exact, Some(due_exact + 5 * SEC_NS), &[], &none).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert_eq!(head_status(&s3, &exact, "x/k", None).await, 404);

    let p = run_once(c, &s_round, Some(m_round + DAY_NS + 5 * SEC_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &rounded, "x/k", None).await, 200);
    let p = run_once(c, &s_round, Some(midnight - 5 * SEC_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(head_status(&s3, &rounded, "x/k", None).await, 200);
    let p = run_once(c, &s_round, Some(midnight + 5 * SEC_NS), &[], &[]).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert_eq!(head_status(&s3, &rounded, "x/k", None).await, 404);
}

/// Keys with spaces, unicode, URL-special characters and a long multi-segment key expire like
/// any other; a folder marker does not break the pass.
#[tokio::test]
async fn unusual_keys_expire() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-keys").await.unwrap();
    let long = format!("u/{}/{}/end", "a".repeat(200), "b".repeat(200));
    let keys = [
        "u/with space.txt".to_string(),
        "u/ünïcödé/日本語 ファイル".to_string(),
        "u/special +&=?%#;:@$,.bin".to_string(),
        long,
    ];
    for k in &keys {
        put(&s3, &b, k, b"data", None).await;
    }
    put(&s3, &b, "u/folder/", b"", None).await;
    put(&s3, &b, "keep", b"data", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("u", "u/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    let left = list_keys(&s3, &b).await;
    for k in &keys {
        assert!(
            !left.contains(k),
            "{k} should be gone: {left:?}\n{}",
            p.describe()
        );
    }
    assert!(left.contains("keep"), "{left:?}");
    assert!(r.total("DONE") >= 4, "{}", p.describe());
}

/// A whole-bucket Expiration rule (no AbortIncompleteMultipartUpload) must not touch a pending
/// multipart upload's parts: the upload can still be completed afterwards.
#[tokio::test]
async fn expiration_rule_leaves_pending_multipart_parts_alone() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-mpu-parts").await.unwrap();
    put(&s3, &b, "plain", b"data", None).await;
    let up = start_upload(&s3, &b, "big.bin").await;
    let etag = s3
        .upload_part()
        .bucket(&b)
        .key("big.bin")
        .upload_id(&up)
        .part_number(1)
        .body(ByteStream::from_static(b"part one"))
        .send()
        .await
        .unwrap()
        .e_tag()
        .unwrap()
        .to_string();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("all", "", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "only `plain`:\n{}", p.describe());
    assert_eq!(head_status(&s3, &b, "plain", None).await, 404);
    assert_eq!(list_uploads(&s3, &b).await, set(&[up.as_str()]));
    s3.complete_multipart_upload()
        .bucket(&b)
        .key("big.bin")
        .upload_id(&up)
        .multipart_upload(
            aws_sdk_s3::types::CompletedMultipartUpload::builder()
                .parts(
                    aws_sdk_s3::types::CompletedPart::builder()
                        .part_number(1)
                        .e_tag(etag)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("completing after the pass: {e:?}\n{}", p.describe()));
    assert_eq!(head_status(&s3, &b, "big.bin", None).await, 200);
}

/// A lifecycle rule on an empty bucket: the pass completes and deletes nothing.
#[tokio::test]
async fn empty_bucket_pass_is_a_no_op() {
    let c = common::cluster();
    let b = c.new_bucket("e2e-empty").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("e", "", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let t0 = now_ns();
    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 6, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert!(list_keys(&c.s3_client(), &b).await.is_empty());
}

/// Lengthening a rule's TTL (10 → 30 days) must not let the old TTL delete anything: at +12 d
/// nothing goes, at +32 d everything under the rule does.
#[tokio::test]
async fn lengthened_ttl_does_not_delete_under_the_old_ttl() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-ttl-up").await.unwrap();
    for k in ["x/1", "x/2"] {
        put(&s3, &b, k, b"data", None).await;
    }
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("x", "x/", 10)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    // Written after the first pass: only the replay knows them.
    put(&s3, &b, "x/3", b"data", None).await;

    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("x", "x/", 30)))
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 12, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["x/1", "x/2", "x/3"]),
        "{}",
        p.describe()
    );
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    assert_eq!(p.ok().total("DONE"), 3, "{}", p.describe());
    assert!(list_keys(&s3, &b).await.is_empty());
}

/// Disabling a rule or removing it (another rule staying) after a pass stops its expirations,
/// including for objects written after that pass (matches the replay would have had pending).
#[tokio::test]
async fn disabled_or_removed_rule_stops_pending_expirations() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-rule-off").await.unwrap();
    let rule = |id: &str, status: &str| {
        format!(
            "<Rule><ID>{id}</ID><Status>{status}</Status><Filter><Prefix>{id}/</Prefix></Filter>\
             <Expiration><Days>10</Days></Expiration></Rule>"
        )
    };
    for k in ["off/1", "gone/1", "on/1"] {
        put(&s3, &b, k, b"data", None).await;
    }
    c.put_lifecycle_xml(
        &b,
        &lifecycle(&format!(
            "{}{}{}",
            rule("off", "Enabled"),
            rule("gone", "Enabled"),
            rule("on", "Enabled")
        )),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    for k in ["off/2", "gone/2", "on/2"] {
        put(&s3, &b, k, b"data", None).await;
    }
    c.put_lifecycle_xml(
        &b,
        &lifecycle(&format!(
            "{}{}",
            rule("off", "Disabled"),
            rule("on", "Enabled")
        )),
    )
    .await
    .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 12, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["off/1", "off/2", "gone/1", "gone/2"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
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
            "{}<Rule><ID>up</ID><Status>Enabled</Status><Filter><Prefix>up/</Prefix></Filter>\
             <AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>",
            days_rule("e", "e/", 30)
        )),
    )
    .await
    .unwrap();
    c.put_lifecycle_xml(
        &vers,
        &lifecycle(&format!(
            "{}<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>nc/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
            days_rule("e", "e/", 30)
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
    s3.create_multipart_upload()
        .bucket(&plain)
        .key("up/x.bin")
        .send()
        .await
        .unwrap()
        .upload_id()
        .unwrap();
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
    assert_eq!(
        list_keys(&s3, &plain).await,
        set(&["keep"]),
        "{}",
        p.describe()
    );
    assert_eq!(
        head_status(&s3, &vers, "e/v", None).await,
        404,
        "{}",
        p.describe()
    );
    assert_eq!(head_status(&s3, &vers, "e/v", Some(&cur)).await, 200);
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Expiration Date in the future: nothing before the date, the objects after it; a Days rule
/// in the same bucket is not held back by the pending date.
#[tokio::test]
async fn future_expiration_date_waits_without_blocking_other_rules() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-future-date").await.unwrap();
    let t0 = now_ns();
    let date_ns = (t0 / DAY_NS + 10) * DAY_NS;
    let date = rfc3339(date_ns);
    c.put_lifecycle_xml(
        &b,
        &lifecycle(&format!(
            "<Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix>d/</Prefix></Filter>\
             <Expiration><Date>{date}</Date></Expiration></Rule>{}",
            days_rule("n", "n/", 2)
        )),
    )
    .await
    .unwrap();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    put(&s3, &b, "d/1", b"data", None).await;
    put(&s3, &b, "n/1", b"data", None).await;
    put(&s3, &b, "d/2", b"data", None).await;
    put(&s3, &b, "n/2", b"data", None).await;

    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["d/1", "d/2"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    let p = run_once(c, &scope, Some(date_ns - HOUR_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(date_ns + HOUR_NS), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// ExpiredObjectDeleteMarker alone: a lone marker (DELETE of a key that never existed, or whose
/// only version was deleted by id) is removed; a marker over a live version stays.
#[tokio::test]
async fn lone_delete_markers_are_removed_others_stay() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-lone-dm").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>dm</ID><Status>Enabled</Status><Filter><Prefix>m/</Prefix></Filter>\
             <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    delete(&s3, &b, "m/never", None).await;
    let v = put(&s3, &b, "m/byid", b"x", None).await.unwrap();
    delete(&s3, &b, "m/byid", None).await;
    delete(&s3, &b, "m/byid", Some(&v)).await;
    let kept = put(&s3, &b, "m/kept", b"x", None).await.unwrap();
    delete(&s3, &b, "m/kept", None).await;

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        list_versions(&s3, &b, "m/never").await.is_empty(),
        "{}",
        p.describe()
    );
    assert!(
        list_versions(&s3, &b, "m/byid").await.is_empty(),
        "{}",
        p.describe()
    );
    let k = list_versions(&s3, &b, "m/kept").await;
    assert_eq!(k.len(), 2, "{k:?}\n{}", p.describe());
    assert!(k.iter().any(|x| x.version_id == kept));
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// A due object found by the cold-start walk while the S3 gRPC port is closed: the pass halts
/// (exit 3) and the next pass, against the right port, still deletes it.
#[tokio::test]
async fn halted_cold_start_walk_is_redone() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-halt-walk").await.unwrap();
    put(&s3, &b, "w/k", b"data", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("w", "w/", PAST_DATE)))
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let at = plus(now_ns(), 0, 1);
    let closed = common::free_port();
    let args: Vec<String> = [
        "run-once",
        "--filer",
        &c.filer_grpc_addr().to_string(),
        "--s3-grpc",
        &format!("127.0.0.1:{closed}"),
        "--buckets",
        &b,
        "--json",
        "--now",
        &rfc3339(at),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let p = run_raw(
        &args,
        &[
            ("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str()),
            ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "10ms"),
            ("S3_LIFECYCLED__DISPATCH__RETRY_MAX_BACKOFF", "20ms"),
        ],
    )
    .await;
    assert_eq!(p.code, 3, "{}", p.describe());
    assert_eq!(head_status(&s3, &b, "w/k", None).await, 200);
    let p = run_once(c, &scope, Some(at), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        head_status(&s3, &b, "w/k", None).await,
        404,
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Versioned buckets under two shard subsets run separately: replay events shard by physical
/// path, the walker by logical key; together the subsets expire every current version once.
#[tokio::test]
async fn versioned_shard_subsets_expire_each_version_once() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-vshards").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("v", "v/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    for shards in ["0-7", "8-15"] {
        let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &["--shards", shards], &[]).await;
        p.ok().assert_no_deletes();
    }
    let keys: Vec<String> = (0..20).map(|i| format!("v/k{i:02}")).collect();
    c.put_objects_bulk(&b, &keys, b"data").await.unwrap();
    // A second version here would be the harness's, not the pass's.
    for k in &keys {
        let versions = list_versions(&s3, &b, k).await;
        assert_eq!(versions.len(), 1, "{k} after one PUT: {versions:?}");
    }
    let mut done = 0;
    let mut passes = Vec::new();
    for shards in ["0-7", "8-15"] {
        let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &["--shards", shards], &[]).await;
        done += p.ok().total("DONE");
        passes.push(p.describe());
    }
    for k in &keys {
        assert_eq!(head_status(&s3, &b, k, None).await, 404, "{k}");
        let versions = list_versions(&s3, &b, k).await;
        assert_eq!(
            versions.len(),
            2,
            "{k}: one version, one marker: {versions:?}\n{}",
            passes.join("\n")
        );
    }
    assert_eq!(done, 20);
}

/// Without `--now` the pass uses the wall clock (10 s days, no rounding): an object older than
/// one short day is deleted, a fresh one is not.
#[tokio::test]
async fn wall_clock_pass_without_now() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-wall").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("w", "w/", 1)))
        .await
        .unwrap();
    put(&s3, &b, "w/old", b"data", None).await;
    let m_old = mtime_ns(&s3, &b, "w/old").await;
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, None, &[], &SHORT_DAY).await;
    p.ok().assert_no_deletes();
    // This test is about the wall clock, so it waits for it (no `--now`): until w/old is one short
    // day (10 s) old, with a second to spare.
    wait_until_clock_passes(m_old + 11 * SEC_NS, Duration::from_secs(15)).await;
    put(&s3, &b, "w/new", b"data", None).await;
    let p = run_once(c, &scope, None, &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["w/new"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Two rules over the same object (`""` 30 days and `logs/` 10 days): the shorter one deletes
/// it at +12 d; the longer one's later match is a no-op, and other objects go at +32 d.
#[tokio::test]
async fn overlapping_rules_shorter_ttl_wins() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-overlap").await.unwrap();
    c.put_lifecycle_xml(
        &b,
        &lifecycle(&format!(
            "{}{}",
            days_rule("all", "", 30),
            days_rule("logs", "logs/", 10)
        )),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    for k in ["logs/1", "data/1", "logs/2"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let p = run_once(c, &scope, Some(plus(t0, 12, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["data/1"]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Suspended-versioning writes after the first pass (steady replay): the null version is
/// replaced by a delete marker, the older Enabled version stays.
#[tokio::test]
async fn suspended_write_after_first_pass_expires() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-susp-steady").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("s", "s/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let v1 = put(&s3, &b, "s/k", b"v1", None).await.unwrap();
    set_versioning(&s3, &b, BucketVersioningStatus::Suspended).await;
    put(&s3, &b, "s/k", b"null", None).await;
    put(&s3, &b, "s/only-null", b"null", None).await;
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    for k in ["s/k", "s/only-null"] {
        assert_eq!(
            head_status(&s3, &b, k, None).await,
            404,
            "{k}\n{}",
            p.describe()
        );
        let vs = list_versions(&s3, &b, k).await;
        assert!(
            !vs.iter().any(|v| v.version_id == "null" && !v.marker),
            "{k}: {vs:?}\n{}",
            p.describe()
        );
    }
    assert_eq!(head_status(&s3, &b, "s/k", Some(&v1)).await, 200);
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// A delete the server answers RETRY_LATER (a lone delete marker whose `.versions` folder lost
/// its latest pointer: `PENDING_LATEST_POINTER`) halts the shard with the reason; once the
/// pointer is back, the next pass removes the marker.
#[tokio::test]
async fn retry_later_halts_then_next_pass_resolves() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-retry-later").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>dm</ID><Status>Enabled</Status><Filter><Prefix>m/</Prefix></Filter>\
             <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    delete(&s3, &b, "m/k", None).await;
    let dir = format!("{}/{b}/m", c.buckets_root());
    let folder = c.lookup_entry(&dir, "k.versions").await.unwrap().unwrap();
    let key = s3_lifecycled::engine::keys::LATEST_VERSION_ID;
    let pointer = folder.extended.get(key).cloned().expect("a latest pointer");
    c.set_extended(&dir, "k.versions", key, None).await.unwrap();

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], &[]).await;
    assert_eq!(p.code, 3, "{}", p.describe());
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    assert_eq!(r.total("RETRY_LATER"), 1, "{}", p.describe());
    assert!(
        p.stdout.contains("PENDING_LATEST_POINTER"),
        "{}",
        p.describe()
    );
    assert_eq!(list_versions(&s3, &b, "m/k").await.len(), 1);

    c.set_extended(&dir, "k.versions", key, Some(&pointer))
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 1, 1)), &[], &[]).await;
    let r = p.ok();
    assert!(
        list_versions(&s3, &b, "m/k").await.is_empty(),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// Expiration Days never stacks a second delete marker on a key whose latest is already a
/// marker (walk and replay alike).
#[tokio::test]
async fn expiration_does_not_stack_delete_markers() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-no-stack").await.unwrap();
    enable_versioning(&s3, &b).await;
    put(&s3, &b, "e/old", b"x", None).await;
    delete(&s3, &b, "e/old", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("e", "e/", 30)))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    put(&s3, &b, "e/new", b"x", None).await;
    delete(&s3, &b, "e/new", None).await;
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    for k in ["e/old", "e/new"] {
        assert_eq!(
            list_versions(&s3, &b, k).await.len(),
            2,
            "{k}\n{}",
            p.describe()
        );
    }
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
    assert_eq!(
        list_keys(&s3, &other).await,
        set(&["d/1"]),
        "{}",
        p.describe()
    );
}

/// NoncurrentDays with NewerNoncurrentVersions on versions written after the first pass (the
/// router cannot rank versions; the steady walk must): keep the newest noncurrent, expire older.
#[tokio::test]
async fn newer_noncurrent_versions_in_steady_state() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-newer-steady").await.unwrap();
    enable_versioning(&s3, &b).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>newer</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays>\
             <NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let mut ids = Vec::new();
    for body in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        ids.push(put(&s3, &b, "n/k", body, None).await.unwrap());
    }
    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    let r = p.ok();
    let mut got: Vec<(String, bool)> = list_versions(&s3, &b, "n/")
        .await
        .into_iter()
        .map(|v| (v.version_id, v.is_latest))
        .collect();
    got.sort();
    let mut want = vec![(ids[3].clone(), true), (ids[2].clone(), false)];
    want.sort();
    assert_eq!(got, want, "{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// Deferred case A variants: a pre-versioning null displaced by a delete marker expires; a null
/// that is current again because the version above it was deleted by id is kept; a tag filter
/// applies to the displaced null itself.
#[tokio::test]
async fn displaced_null_variants_marker_restore_and_tags() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-null-var").await.unwrap();
    put(&s3, &b, "n/marked", b"pre", None).await;
    put(&s3, &b, "n/restored", b"pre", None).await;
    put(&s3, &b, "n/tagged", b"pre", Some("env=tmp")).await;
    put(&s3, &b, "n/untagged", b"pre", None).await;
    put(&s3, &b, "n/other-tag", b"pre", Some("env=prod")).await;
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>n/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>\
             <Rule><ID>tag</ID><Status>Enabled</Status>\
             <Filter><And><Prefix>n/t</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag></And></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &[]).await;
    p.ok().assert_no_deletes();

    enable_versioning(&s3, &b).await;
    delete(&s3, &b, "n/marked", None).await;
    let v = put(&s3, &b, "n/restored", b"v1", None).await.unwrap();
    delete(&s3, &b, "n/restored", Some(&v)).await;
    for k in ["n/tagged", "n/untagged", "n/other-tag"] {
        put(&s3, &b, k, b"v1", None).await.unwrap();
    }
    assert_eq!(head_status(&s3, &b, "n/restored", None).await, 200);

    // +4 d: only the 2-day tag rule is due, and only for the tagged null.
    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &[]).await;
    let r = p.ok();
    let nulls = |vs: Vec<Ver>| vs.iter().any(|v| v.version_id == "null" && !v.marker);
    assert!(
        !nulls(list_versions(&s3, &b, "n/tagged").await),
        "{}",
        p.describe()
    );
    assert!(
        nulls(list_versions(&s3, &b, "n/untagged").await),
        "{}",
        p.describe()
    );
    assert!(
        nulls(list_versions(&s3, &b, "n/other-tag").await),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());

    // +7 d: the 5-day rule: every displaced null goes; the restored (current) null stays.
    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], &[]).await;
    p.ok();
    for k in ["n/marked", "n/untagged", "n/other-tag"] {
        assert!(
            !nulls(list_versions(&s3, &b, k).await),
            "{k}\n{}",
            p.describe()
        );
    }
    let m = list_versions(&s3, &b, "n/marked").await;
    assert!(m.len() == 1 && m[0].marker, "{m:?}");
    assert_eq!(
        head_status(&s3, &b, "n/restored", None).await,
        200,
        "a null that is current again must not be deleted:\n{}",
        p.describe()
    );
    assert!(nulls(list_versions(&s3, &b, "n/restored").await));
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
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-go-dir").await.unwrap();
    put(&s3, &b, "old/1", b"x", None).await;
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("d", "old/", PAST_DATE)))
        .await
        .unwrap();
    for dir in [
        "/etc/s3/lifecycle/daily-cursors/",
        "/etc/s3/lifecycle//daily-cursors",
        "//etc/s3/lifecycle/daily-cursors",
        "/etc/s3/lifecycle/./daily-cursors",
        "/etc/s3/./lifecycle/daily-cursors/.",
    ] {
        let scope = Scope {
            buckets: vec![b.clone()],
            cursor_dir: dir.to_string(),
        };
        let p = run_once(c, &scope, Some(plus(now_ns(), 0, 1)), &[], &[]).await;
        assert_eq!(p.code, 2, "{dir}:\n{}", p.describe());
        assert!(p.stderr.contains("cursor.dir"), "{dir}:\n{}", p.describe());
    }
    assert_eq!(list_keys(&s3, &b).await, set(&["old/1"]));
}

/// Regression: a recovery walk run with `--now` in the future claimed every
/// event up to that future time as handled, so objects written afterwards (in
/// real time, before that future) were skipped by every later pass and never
/// expired. The walk can only vouch for what existed when it ran.
#[tokio::test]
async fn future_now_recovery_does_not_skip_objects_written_later() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-future-now").await.unwrap();
    let rules = lifecycle(
        "<Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix>d/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    put(&s3, &b, "d/old", b"x", None).await;
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    // Cold start far in the future: the recovery walk expires d/old.
    let p = run_once(c, &scope, Some(plus(t0, 40, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).contains("cold_start"),
        "{}",
        p.describe()
    );
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    // Written after that pass, in real time: its event is older than the
    // pass's `now`, but the walk never saw it.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    put(&s3, &b, "d/new", b"x", None).await;
    let p = run_once(c, &scope, Some(plus(t0, 75, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).is_empty(),
        "steady pass: {}",
        p.describe()
    );
    assert!(
        list_keys(&s3, &b).await.is_empty(),
        "d/new must expire through replay: {}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
}

/// An entry created through the filer without attributes reads as epoch-old (SeaweedFS 4.48 stores
/// Go's zero time, docs/filer-layout.md#entries-without-attributes) and would be due under every
/// age rule. Neither the walk (first, cold pass) nor replay (its create event, second pass, 40
/// days ahead) deletes it; both count it in `skipped_no_mtime`, while a dated object beside it
/// expires.
#[tokio::test]
async fn entry_without_attributes_is_never_deleted_as_epoch_old() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-noattr").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("n", "", 1)))
        .await
        .unwrap();
    let fc = c.filer().await;
    let dir = format!("{}/{b}/na", c.buckets_root());
    let bare = |name: &str| s3_lifecycled::pb::filer_pb::Entry {
        name: name.into(),
        content: b"no attributes".to_vec(),
        attributes: None,
        ..Default::default()
    };
    fc.create_entry(&dir, bare("walked"), false).await.unwrap();
    let stored = fc.lookup(&dir, "walked").await.unwrap().expect("created");
    // What 4.48 stores for it: absent attributes, 0, or Go's zero time — all "no mtime".
    eprintln!("stored attributes: {:?}", stored.attributes);
    let mtime = stored.attributes.as_ref().map_or(0, |a| a.mtime);
    assert!(
        mtime == 0 || mtime == -62_135_596_800,
        "stored attributes: {:?}",
        stored.attributes
    );
    put(&s3, &b, "dated", b"x", None).await;
    let scope = Scope::new(&[&b]);
    let t0 = now_ns();

    // Pass 1 (cold: a recovery walk) a minute ahead, with the 10 s day: the dated object is due.
    let p = run_once(c, &scope, Some(t0 + 60 * SEC_NS), &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    // No delete was even sent for it (before the fix one went out; the 4.48 gateway happened
    // to answer NOOP_RESOLVED).
    assert_eq!(r.totals("matches"), 1, "{}", p.describe());
    assert_eq!(r.total("NOOP_RESOLVED"), 0, "{}", p.describe());
    // Counted where it was met: by the walk, and again by replay if its create event lies in
    // the replayed range.
    assert!(
        r.v["totals"]["skipped_no_mtime"].as_u64().unwrap_or(0) >= 1,
        "{}",
        p.describe()
    );
    assert!(
        fc.lookup(&dir, "walked").await.unwrap().is_some(),
        "walk kept it"
    );
    assert!(!exists(&s3, &b, "dated").await);

    // Pass 2, 40 days ahead: replay meets the create event of a second such entry.
    fc.create_entry(&dir, bare("replayed"), false)
        .await
        .unwrap();
    put(&s3, &b, "dated2", b"x", None).await;
    let p = run_once(c, &scope, Some(t0 + 40 * DAY_NS), &[], &SHORT_DAY).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "dated2 expires:\n{}", p.describe());
    assert_eq!(r.total("NOOP_RESOLVED"), 0, "{}", p.describe());
    assert!(
        r.v["totals"]["skipped_no_mtime"].as_u64().unwrap_or(0) >= 1,
        "{}",
        p.describe()
    );
    for name in ["walked", "replayed"] {
        assert!(
            fc.lookup(&dir, name).await.unwrap().is_some(),
            "{name} was deleted:\n{}",
            p.describe()
        );
    }
    assert!(!exists(&s3, &b, "dated2").await);
}
