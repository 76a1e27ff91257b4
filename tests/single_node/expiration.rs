//! Expiration of current objects through `run-once` on the shared cluster: Days
//! and Date rules, prefix, tag and size filters, rules added, edited, disabled
//! or deleted, overlapping rules, due rounding, overwrites and tag edits after
//! a PUT, unusual keys, entries without attributes, idempotent reruns.
//!
//! Each test owns its buckets (`--buckets`) and its cursor dir, travels in time
//! with `--now` (never backwards within one cursor dir) and checks effects
//! through the S3 API and counters through the `--json` report. Due times
//! default to next-midnight-UTC rounding, so "not yet" runs stay below the TTL
//! and "due" runs go past TTL + 1 day. Tests that need a real gap between two
//! writes use a 10 s lifecycle day and sleep a few seconds between the writes.

use crate::common;

use aws_sdk_s3::types::{Tag, Tagging};
use std::time::Duration;

use super::support::*;
use common::*;

/// Expiration Days with an And filter (prefix + tag + size) and a plain prefix rule: nothing
/// before due, exactly the matching objects after, through the steady-state replay (the first
/// pass is a cold start that finds nothing due and rewinds; the later passes replay the PUTs).
#[tokio::test]
async fn expiration_days_honours_prefix_tag_and_size_filters() {
    let big = vec![b'x'; 200];
    let small = vec![b'x'; 50];
    let s = Scenario::new("e2e-days-filters")
        .tagged("logs/match-1", &big, "env=tmp")
        .tagged("logs/match-2", &big, "env=tmp&team=a")
        .tagged("logs/too-small", &small, "env=tmp")
        .objects(&["logs/untagged"], &big)
        .tagged("logs/wrong-tag", &big, "env=prod")
        .tagged("other/tagged", &big, "env=tmp")
        .objects(&["plain/a"], &small)
        .tagged("plain/b", &big, "env=prod")
        .objects(&["plainx/c"], &small)
        .rules(
            "<Rule><ID>tagged-logs</ID><Status>Enabled</Status>\
               <Filter><And><Prefix>logs/</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag>\
               <ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter>\
               <Expiration><Days>30</Days></Expiration></Rule>\
             <Rule><ID>plain</ID><Status>Enabled</Status><Filter><Prefix>plain/</Prefix></Filter>\
               <Expiration><Days>30</Days></Expiration></Rule>",
        )
        .build()
        .await;
    let (c, s3, b, t0, scope) = (s.c, &s.s3, &s.bucket, s.t0, &s.scope);
    let all = list_keys(s3, b).await;
    assert_eq!(all.len(), 9);

    // Not yet due (cold start: recovery walk finds nothing).
    let p = run_once(c, scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    let r = p.ok();
    r.assert_delete_keys_present();
    r.assert_no_deletes();
    assert_eq!(r.v["dry_run"], false, "{}", p.describe());
    assert_eq!(
        r.v["now_ns"].as_i64(),
        Some(plus(t0, 10, 0) / 1_000_000_000 * 1_000_000_000),
        "now_ns must be the --now instant:\n{}",
        p.describe()
    );
    assert_eq!(
        r.shards().len(),
        16,
        "default shards 0-15:\n{}",
        p.describe()
    );
    assert!(
        r.recovery_reasons(b).contains("cold_start"),
        "first pass over a fresh cursor dir is a cold start:\n{}",
        p.describe()
    );
    assert_eq!(list_keys(s3, b).await, all);

    // Still one day short of the TTL (rounding only ever moves due times later).
    let p = run_once(c, scope, Some(plus(t0, 29, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(s3, b).await, all, "{}", p.describe());

    // Past due: exactly the matching objects go.
    let p = run_once(c, scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        list_keys(s3, b).await,
        set(&[
            "logs/too-small",
            "logs/untagged",
            "logs/wrong-tag",
            "other/tagged",
            "plainx/c"
        ]),
        "{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), 4, "{}", p.describe());
    for k in [
        "SKIPPED_OBJECT_LOCK",
        "RETRY_LATER",
        "BLOCKED",
        "RPC_ERROR",
        "DRY_RUN",
    ] {
        assert_eq!(r.total(k), 0, "{k}:\n{}", p.describe());
    }
    let left = list_keys(s3, b).await;

    // The same instant again (idempotence on the replay path): nothing more goes.
    let p = run_once(c, scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(s3, b).await, left, "{}", p.describe());
}

/// A second pass at the same `--now` finds nothing more to delete and still exits 0.
#[tokio::test]
async fn second_run_with_same_now_is_idempotent() {
    let s = Scenario::new("e2e-idem")
        .objects(&["tmp/1", "tmp/2", "tmp/3", "keep/1"], b"data")
        .rules(&days_rule("tmp", "tmp/", 30))
        .build()
        .await;

    let p = s.pass_at(40, 0).await;
    assert_eq!(p.ok().total("DONE"), 3, "{}", p.describe());
    assert_eq!(s.keys().await, set(&["keep/1"]));

    let p = s.pass_at(40, 0).await;
    let r = p.ok();
    r.assert_delete_keys_present();
    r.assert_no_deletes();
    assert!(
        r.recovery_reasons(&s.bucket).is_empty(),
        "same rules, same cursor dir: no recovery expected:\n{}",
        p.describe()
    );
    assert_eq!(s.keys().await, set(&["keep/1"]));
}

/// Expiration Date in the past: due on the first pass; objects outside the prefix stay.
#[tokio::test]
async fn expiration_date_in_the_past_deletes_on_first_run() {
    let s = Scenario::new("e2e-date")
        .objects(&["old/1", "old/2", "old/deep/3", "keep/1", "oldx"], b"data")
        .rules(
            "<Rule><ID>date</ID><Status>Enabled</Status><Filter><Prefix>old/</Prefix></Filter>\
             <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
        )
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    let r = p.ok();
    assert_eq!(s.keys().await, set(&["keep/1", "oldx"]), "{}", p.describe());
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
}

/// A rule added after its objects are already older than its TTL still catches them: a pass
/// with no rule at +40 d, then a 30-day rule, then a pass at +41 d deletes them via the
/// recovery walk.
#[tokio::test]
async fn rule_added_later_catches_already_old_objects() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-late-rule").await.unwrap();
    for k in ["pre/1", "pre/2", "pre/3", "pre/4", "pre/5", "other/keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    let all = list_keys(&s3, &b).await;

    let p = run_once(c, &scope, Some(plus(t0, 40, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();
    assert_eq!(list_keys(&s3, &b).await, all, "{}", p.describe());

    let rules = lifecycle(
        "<Rule><ID>pre</ID><Status>Enabled</Status><Filter><Prefix>pre/</Prefix></Filter>\
         <Expiration><Days>30</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 41, 0)), &[], &[]).await;
    let r = p.ok();
    p.assert_left(&s3, &b, &["other/keep"]).await;
    assert_eq!(r.total("DONE"), 5, "{}", p.describe());
    let reasons = r.recovery_reasons(&b);
    assert!(
        reasons.contains("cold_start") || reasons.contains("rule_edit"),
        "recovery reasons for {b}: {reasons:?}\n{}",
        p.describe()
    );
}

/// Editing the rules (a new rule for `b/` next to the existing `a/` one) is a `rule_edit`
/// recovery: objects the new rule covers, already past its TTL and written before the cursor,
/// are found by the recovery walk; the old rule's objects go too.
#[tokio::test]
async fn rule_edit_recovery_catches_objects_before_the_cursor() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-rule-edit").await.unwrap();
    // b/ first, so that its PUT events lie before the a/ event the cursor waits at.
    for k in ["b/1", "b/2", "a/1", "a/2", "c/keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let rule = |prefix: &str| {
        format!(
            "<Rule><ID>{prefix}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}/</Prefix></Filter>\
             <Expiration><Days>30</Days></Expiration></Rule>"
        )
    };
    c.put_lifecycle_xml(&b, &lifecycle(&rule("a")))
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 10, 0)), &[], &[]).await;
    p.ok().assert_no_deletes();

    c.put_lifecycle_xml(&b, &lifecycle(&format!("{}{}", rule("a"), rule("b"))))
        .await
        .unwrap();
    let p = run_once(c, &scope, Some(plus(t0, 41, 0)), &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        r.recovery_reasons(&b),
        set(&["rule_edit"]),
        "{}",
        p.describe()
    );
    p.assert_left(&s3, &b, &["c/keep"]).await;
    assert_eq!(r.total("DONE"), 4, "{}", p.describe());
}

/// After DeleteBucketLifecycle the bucket's objects are left alone, even past the old TTL.
#[tokio::test]
async fn deleted_lifecycle_stops_expirations() {
    let s = Scenario::new("e2e-lc-deleted")
        .objects(&["x/1", "x/2"], b"data")
        .rules(&days_rule("x", "x/", 30))
        .build()
        .await;
    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();

    s.s3.delete_bucket_lifecycle()
        .bucket(&s.bucket)
        .send()
        .await
        .unwrap();
    let p = s.pass_at(41, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.keys().await, set(&["x/1", "x/2"]), "{}", p.describe());
}

/// A rule whose Status is not exactly `Enabled` never fires.
#[tokio::test]
async fn disabled_rule_never_fires() {
    let s = Scenario::new("e2e-disabled")
        .objects(&["x/1"], b"data")
        .rules(
            "<Rule><ID>off</ID><Status>Disabled</Status><Filter><Prefix>x/</Prefix></Filter>\
             <Expiration><Days>1</Days></Expiration></Rule>",
        )
        .build()
        .await;
    let p = s.pass_at(41, 0).await;
    p.ok().assert_no_deletes();
    assert_eq!(s.keys().await, set(&["x/1"]), "{}", p.describe());
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
    p.assert_left(&s3, &b, &["t/removed"]).await;
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
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
    let long = format!("u/{}/{}/end", "a".repeat(200), "b".repeat(200));
    let keys = [
        "u/with space.txt",
        "u/ünïcödé/日本語 ファイル",
        "u/special +&=?%#;:@$,.bin",
        &long,
    ];
    let s = Scenario::new("e2e-keys")
        .objects(&keys, b"data")
        .objects(&["u/folder/"], b"")
        .objects(&["keep"], b"data")
        .rules(&days_rule("u", "u/", 30))
        .build()
        .await;
    let p = s.pass_at(10, 0).await;
    p.ok().assert_no_deletes();
    let p = s.pass_at(32, 0).await;
    let r = p.ok();
    let left = s.keys().await;
    for k in keys {
        assert!(
            !left.contains(k),
            "{k} should be gone: {left:?}\n{}",
            p.describe()
        );
    }
    assert!(left.contains("keep"), "{left:?}");
    assert!(r.total("DONE") >= 4, "{}", p.describe());
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
    p.assert_left(&s3, &b, &["data/1"]).await;
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
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
    p.assert_left(&s3, &b, &["d/1", "d/2"]).await;
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
    let p = run_once(c, &scope, Some(date_ns - HOUR_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(date_ns + HOUR_NS), &[], &[]).await;
    let r = p.ok();
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
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
    p.assert_left(&s3, &b, &["x/1", "x/2", "x/3"]).await;
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
    p.assert_left(&s3, &b, &["off/1", "off/2", "gone/1", "gone/2"])
        .await;
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// A lifecycle rule on an empty bucket: the pass completes and deletes nothing.
#[tokio::test]
async fn empty_bucket_pass_is_a_no_op() {
    let s = Scenario::new("e2e-empty")
        .rules(&days_rule("e", "", 1))
        .build()
        .await;
    let p = s.pass_at(5, 0).await;
    p.ok().assert_no_deletes();
    let p = s.pass_at(6, 0).await;
    p.ok().assert_no_deletes();
    assert!(s.keys().await.is_empty());
}

/// A `<prefix>` typo (names are case-sensitive) is stored by the gateway and ignored by
/// SeaweedFS's parser, so the rule's filter is empty and the rule applies to every key. We
/// enforce it the same way, but nothing said so: `rules check` called the document valid
/// and a pass gave no word (docs/lifecycle-config.md#unknown-elements).
#[tokio::test]
async fn a_lowercase_prefix_typo_widened_the_rule_to_the_whole_bucket_without_a_word() {
    let s = Scenario::new("e2e-typo")
        .objects(&["logs/1", "data/1"], b"data")
        .rules(
            "<Rule><ID>logs</ID><Status>Enabled</Status><Filter><prefix>logs/</prefix></Filter>\
             <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
        )
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    let r = p.ok();
    assert!(
        p.stderr.contains(&s.bucket)
            && p.stderr.contains("Filter/prefix")
            && p.stderr.contains("did you mean <Prefix>?"),
        "the pass names the bucket, the element and the fix:\n{}",
        p.describe()
    );
    // Enforced as SeaweedFS enforces it: the filter is empty.
    assert_eq!(s.keys().await, set(&[]), "{}", p.describe());
    assert_eq!(r.total("DONE"), 2, "{}", p.describe());
}

/// `<Status>enabled</Status>` disables the rule in SeaweedFS (only exactly `Enabled` counts),
/// and a pass left its objects with no word either: it warns now, naming the bucket and why
/// (docs/lifecycle-config.md#put-validation).
#[tokio::test]
async fn a_lowercase_status_disabled_the_rule_without_a_word() {
    let s = Scenario::new("e2e-status")
        .objects(&["logs/1"], b"data")
        .rules(
            "<Rule><ID>logs</ID><Status>enabled</Status><Filter><Prefix>logs/</Prefix></Filter>\
             <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
        )
        .build()
        .await;
    let p = s.pass_at(0, 1).await;
    p.ok().assert_no_deletes();
    assert!(
        p.stderr.contains(&s.bucket)
            && p.stderr.contains("AWS would refuse")
            && p.stderr
                .contains("SeaweedFS treats anything but Enabled as disabled"),
        "{}",
        p.describe()
    );
    assert_eq!(s.keys().await, set(&["logs/1"]));
}
