//! The due index on the real cluster (docs/due-index.md): a steady pass with
//! nothing due reads only the new events, not the whole TTL window, and the
//! matches whose due time is far earlier than their event's window position
//! (entries backdated through the filer, a tag added to an old object) are
//! deleted at the next pass; everything goes once the TTL has passed.
//!
//! The tests of this binary run one at a time (`SERIAL`): each asserts how many
//! meta-log events a pass read, which counts every bucket's events.

mod common;

use std::time::Duration;

use aws_sdk_s3::types::{Tag, Tagging};
use common::*;

/// One test at a time: another test's writes would land in the read ranges.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Objects in the big bucket: tens of thousands under a long rule.
const OBJECTS: usize = 20_000;

/// The cluster is minutes old: with `--now` days ahead its probed log would be
/// shorter than the TTLs, and the rules walked instead of replayed
/// (docs/retention-probe.md). Say the log reaches back a year.
const LONG_LOG: &[(&str, &str)] = &[("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h")];

/// The replay's `events_read` of a pass report.
fn events_read(r: &Report) -> i64 {
    r.v["replay"]["events_read"]
        .as_i64()
        .unwrap_or_else(|| panic!("replay.events_read missing:\n{}", r.context()))
}

/// Prints what a pass read and how long it took (`--nocapture` shows the
/// figures quoted in docs/due-index.md).
fn figure(what: &str, r: &Report) {
    println!(
        "figure {what}: events_read={} ranges={} duration_ms={}",
        events_read(r),
        r.v["replay"]["ranges"].as_array().map_or(0, Vec::len),
        r.v["duration_ms"]
    );
}

/// Lets the reorder margin (5 s before the newest event a pass reads) pass,
/// then writes one event outside the test's buckets, so the next pass's tail
/// starts after the test's own writes (docs/due-index.md#reading).
async fn settle(c: &Cluster) {
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let m = c.new_bucket("e2e-due-marker").await.unwrap();
    put(&c.s3_client(), &m, "marker", b"m", None).await;
}

#[tokio::test]
async fn steady_pass_reads_only_new_events_and_backdated_entries_go_at_the_next_pass() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-steady").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("all", "", 30)))
        .await
        .unwrap();
    let seeding = std::time::Instant::now();
    c.put_objects_bulk(&b, &keys("obj/", OBJECTS), b"x")
        .await
        .unwrap();
    println!(
        "figure seeding: {OBJECTS} PUTs in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    let t0 = now_ns();
    settle(c).await;
    let scope = Scope::new(&[&b]);

    // Cold start: the recovery replay reads the whole window and writes the index.
    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    figure("cold start (whole window)", &r);
    assert!(
        events_read(&r) >= OBJECTS as i64,
        "the cold start reads the window:\n{}",
        p.describe()
    );

    // Steady, nothing due: only the events since the last pass.
    let p = run_once(c, &scope, Some(plus(t0, 2, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    figure("steady, nothing due", &r);
    assert!(
        events_read(&r) <= (OBJECTS / 20) as i64,
        "a steady pass with nothing due must read at most 5% of the window's {OBJECTS} events:\n{}",
        p.describe()
    );

    // Three entries backdated 40 days through the filer: due now, deleted at
    // the next pass although their PUT events are only days old.
    let dir = format!("{}/{b}/obj", c.buckets_root());
    let old = ["obj/000007", "obj/001234", "obj/009999"];
    for k in old {
        let name = k.trim_start_matches("obj/");
        c.backdate(&dir, name, Duration::from_secs(40 * 86_400))
            .await
            .unwrap();
    }
    settle(c).await;
    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
    assert!(
        events_read(&r) <= (OBJECTS / 20) as i64,
        "the backdating pass reads the new events only:\n{}",
        p.describe()
    );
    for k in old {
        assert!(
            !exists(&s3, &b, k).await,
            "{k} must be gone:\n{}",
            p.describe()
        );
    }
    assert_eq!(count_objects(&s3, &b).await, OBJECTS - 3);

    // Still before the TTL: nothing more, still few events.
    let p = run_once(c, &scope, Some(plus(t0, 29, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(events_read(&r) <= (OBJECTS / 20) as i64, "{}", p.describe());

    // Past the TTL: the due spans are read and everything goes.
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    figure("past the TTL (everything due)", &r);
    assert_eq!(r.total("DONE"), (OBJECTS - 3) as i64, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
}

/// A tag added to an old object makes it match a tag-filtered rule; with
/// its mtime 40 days back it is due at once and goes at the next pass. A
/// second rule with another TTL in the same bucket keeps its own index: its
/// objects go only when its own TTL has passed.
#[tokio::test]
async fn tag_update_on_old_object_and_two_ttls_are_due_at_the_first_pass_after_due() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-tags").await.unwrap();
    let rules = lifecycle(
        "<Rule><ID>tagged</ID><Status>Enabled</Status>\
           <Filter><And><Prefix>t/</Prefix><Tag><Key>env</Key><Value>tmp</Value></Tag></And></Filter>\
           <Expiration><Days>30</Days></Expiration></Rule>\
         <Rule><ID>short</ID><Status>Enabled</Status><Filter><Prefix>s/</Prefix></Filter>\
           <Expiration><Days>5</Days></Expiration></Rule>\
         <Rule><ID>long</ID><Status>Enabled</Status><Filter><Prefix>l/</Prefix></Filter>\
           <Expiration><Days>60</Days></Expiration></Rule>",
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    for k in ["t/old", "t/young"] {
        put(&s3, &b, k, b"x", None).await;
    }
    c.put_objects_bulk(&b, &keys("s/", 200), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("l/", 200), b"x")
        .await
        .unwrap();
    let dir = format!("{}/{b}/t", c.buckets_root());
    c.backdate(&dir, "old", Duration::from_secs(40 * 86_400))
        .await
        .unwrap();
    let t0 = now_ns();
    settle(c).await;
    let scope = Scope::new(&[&b]);

    let p = run_once(c, &scope, Some(plus(t0, 1, 0)), &[], LONG_LOG).await;
    p.ok().assert_no_deletes();

    // Both objects get the tag: the old one is due at once (mtime kept,
    // docs/filer-layout.md), the young one in 30 days.
    for k in ["t/old", "t/young"] {
        s3.put_object_tagging()
            .bucket(&b)
            .key(k)
            .tagging(
                Tagging::builder()
                    .tag_set(Tag::builder().key("env").value("tmp").build().unwrap())
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    }
    settle(c).await;
    let p = run_once(c, &scope, Some(plus(t0, 2, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&s3, &b, "t/old").await, "{}", p.describe());
    assert!(exists(&s3, &b, "t/young").await);
    assert!(events_read(&r) <= 40, "{}", p.describe());

    // Past the short TTL only: the s/ objects go, l/ and t/young stay, and
    // the pass reads the due span (these 400 objects' writes), not more.
    let p = run_once(c, &scope, Some(plus(t0, 7, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 200, "{}", p.describe());
    assert_eq!(
        list_keys(&s3, &b)
            .await
            .iter()
            .filter(|k| k.starts_with("s/"))
            .count(),
        0
    );
    assert_eq!(
        list_keys(&s3, &b)
            .await
            .iter()
            .filter(|k| k.starts_with("l/"))
            .count(),
        200
    );

    // Nothing due in between: the short rule's span is gone from its index;
    // the pass reads the previous pass's 200 delete events and little else.
    settle(c).await;
    let p = run_once(c, &scope, Some(plus(t0, 20, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(events_read(&r) <= 240, "{}", p.describe());
    // And with nothing written since, next to nothing.
    let p = run_once(c, &scope, Some(plus(t0, 21, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(events_read(&r) <= 40, "{}", p.describe());

    // Past 30 days: t/young goes (its tag event); past 60: the l/ objects.
    let p = run_once(c, &scope, Some(plus(t0, 32, 0)), &[], LONG_LOG).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&s3, &b, "t/young").await);
    let p = run_once(c, &scope, Some(plus(t0, 62, 0)), &[], LONG_LOG).await;
    assert_eq!(p.ok().total("DONE"), 200, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
}

/// A rule edit to fewer Days on a bucket whose spans were indexed under the
/// old rule: the edited rule is a new action (new rule hash) that builds its
/// own index, so the next passes delete exactly what the new rule makes due,
/// at its new due time, and nothing early; the other rule's objects stay.
#[tokio::test]
async fn rule_edit_to_shorter_days_deletes_what_the_new_rule_makes_due_none_early() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-edit").await.unwrap();
    let keep_rule = days_rule("keep", "keep/", 60);
    c.put_lifecycle_xml(&b, &lifecycle(&(days_rule("obj", "obj/", 30) + &keep_rule)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("obj/", 1_000), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("keep/", 100), b"x")
        .await
        .unwrap();
    let t0 = now_ns();
    settle(c).await;
    let scope = Scope::new(&[&b]);

    // Cold start and a steady pass: the 30-day rule's spans are indexed.
    run_once(c, &scope, Some(plus(t0, 1, 0)), &[], LONG_LOG)
        .await
        .ok()
        .assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 2, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(events_read(&r) <= 55, "indexed: {}", p.describe());

    // Days 30 → 10 on obj/: due at t0 + 10 d (+ rounding, ≤ 11 d).
    c.put_lifecycle_xml(&b, &lifecycle(&(days_rule("obj", "obj/", 10) + &keep_rule)))
        .await
        .unwrap();
    for day in [3, 9] {
        let p = run_once(c, &scope, Some(plus(t0, day, 0)), &[], LONG_LOG).await;
        let r = p.ok();
        r.assert_no_deletes();
        assert_eq!(
            count_objects(&s3, &b).await,
            1_100,
            "none early at +{day} d"
        );
    }
    // Past the new due time, still 19 days before the old one: every obj/
    // object goes although the old index said "due at +30 d".
    let p = run_once(c, &scope, Some(plus(t0, 12, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    figure("after the rule edit, past the new TTL", &r);
    assert_eq!(r.total("DONE"), 1_000, "{}", p.describe());
    let left = list_keys(&s3, &b).await;
    assert_eq!(left.len(), 100, "{}", p.describe());
    assert!(left.iter().all(|k| k.starts_with("keep/")), "{left:?}");
}

/// A port nothing listens on: a LifecycleDelete sent there fails at once.
fn refused_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    drop(l);
    a
}

/// A shard halted on failing deletes keeps its due-index entries: the pass
/// after recovery (the gateway back) deletes everything due, and a steady
/// pass afterwards reads only a small part of the window again.
#[tokio::test]
async fn halted_shard_keeps_its_index_entries_and_recovers_everything_due() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-halt").await.unwrap();
    const SHORT: usize = 100;
    const LONG: usize = 4_000;
    let rules = days_rule("short", "s/", 5) + &days_rule("long", "l/", 30);
    c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
    c.put_objects_bulk(&b, &keys("s/", SHORT), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("l/", LONG), b"x")
        .await
        .unwrap();
    let t0 = now_ns();
    settle(c).await;
    let scope = Scope::new(&[&b]);
    let window = (SHORT + LONG) as i64;

    run_once(c, &scope, Some(plus(t0, 1, 0)), &[], LONG_LOG)
        .await
        .ok()
        .assert_no_deletes();

    // The s/ objects are due at +7 d; every delete fails (nothing listens at
    // the gateway address), so each shard with a due delete halts.
    let mut args = run_once_args(c, &scope, Some(plus(t0, 7, 0)), &[]);
    let i = args.iter().position(|a| a == "--s3-grpc").unwrap();
    args[i + 1] = refused_addr();
    let mut env = vec![("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    env.extend(LONG_LOG);
    env.extend([
        ("S3_LIFECYCLED__DISPATCH__RETRY_ATTEMPTS", "2"),
        ("S3_LIFECYCLED__DISPATCH__RETRY_INITIAL_BACKOFF", "20ms"),
        ("S3_LIFECYCLED__DISPATCH__CALL_TIMEOUT", "2s"),
    ]);
    let p = run_raw(&args, &env).await;
    assert_eq!(p.code, 3, "halted shards:\n{}", p.describe());
    let r = p.json();
    let halted = r.halted_shards().len();
    assert!(halted >= 1, "{}", p.describe());
    assert_eq!(r.total("DONE"), 0, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, SHORT + LONG);

    // The gateway back: the halted shards' spans are still indexed, so the
    // next pass reads them and deletes every due object, and no l/ one.
    let p = run_once(c, &scope, Some(plus(t0, 7, 1)), &[], LONG_LOG).await;
    let r = p.ok();
    figure("after the halt, gateway back", &r);
    assert_eq!(r.total("DONE"), SHORT as i64, "{}", p.describe());
    let left = list_keys(&s3, &b).await;
    assert_eq!(left.len(), LONG, "{}", p.describe());
    assert!(left.iter().all(|k| k.starts_with("l/")));

    // Steady again: the new events (the recovery's deletes) and the due
    // spans (none), not the window.
    settle(c).await;
    let p = run_once(c, &scope, Some(plus(t0, 9, 0)), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    figure("steady after the halt", &r);
    assert!(
        events_read(&r) * 20 <= window,
        "a steady pass after the halt must read at most 5% of the window's {window} events:\n{}",
        p.describe()
    );
}

/// `pass.tail_budget` at its minimum (one resolved mark per shard) on a pass
/// deleting 1,000 objects under two rules: the shards stop taking events
/// while over budget and forget marks, yet every due object goes, nothing
/// that is not due does, and the next pass sends at most re-sends of
/// forgotten marks (no-ops), never a new delete (docs/due-index.md#memory).
#[tokio::test]
async fn tiny_tail_budget_deletes_everything_due_and_never_skips() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-budget").await.unwrap();
    let rules = days_rule("a", "a/", 1) + &days_rule("b", "b/", 2) + &days_rule("k", "k/", 30);
    c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
    for p in ["a/", "b/"] {
        c.put_objects_bulk(&b, &keys(p, 500), b"x").await.unwrap();
    }
    c.put_objects_bulk(&b, &keys("k/", 50), b"x").await.unwrap();
    let t0 = now_ns();
    settle(c).await;
    let scope = Scope::new(&[&b]);
    let mut env = LONG_LOG.to_vec();
    env.push(("S3_LIFECYCLED__PASS__TAIL_BUDGET", "16"));

    // Replay (not a recovery walk) must send the deletes: index first.
    run_once(c, &scope, Some(plus(t0, 0, 1)), &[], &env)
        .await
        .ok()
        .assert_no_deletes();
    let p = run_once(c, &scope, Some(plus(t0, 4, 0)), &[], &env).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1_000, "{}", p.describe());
    let left = list_keys(&s3, &b).await;
    assert_eq!(left.len(), 50, "{}", p.describe());
    assert!(left.iter().all(|k| k.starts_with("k/")), "{left:?}");

    let p = run_once(c, &scope, Some(plus(t0, 5, 0)), &[], &env).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 0, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 50);
}

/// A pass whose `--now` is ahead of the filer's clock (a preview, a test, a fast host clock) read
/// the whole window at every pass: the index stopped a reorder margin before the last event read,
/// and with the log quiet that never moved, so every object written in the last 5 s was re-read
/// for ever. The index now moves up to the filer's own clock from before the read. Objects
/// written after such a pass, stamped with the filer's clock, are still deleted when due.
#[tokio::test]
async fn future_now_passes_reread_the_whole_window_while_the_log_was_quiet() {
    let _g = SERIAL.lock().await;
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-due-future").await.unwrap();
    let rules = lifecycle(&format!(
        "{}{}",
        days_rule("long", "obj/", 30),
        days_rule("late", "late/", 1)
    ));
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    c.put_objects_bulk(&b, &keys("obj/", OBJECTS), b"x")
        .await
        .unwrap();
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    // The reorder margin's 5 s pass on the filer's clock with nothing written: the last PUTs
    // stay the newest events in the log (no marker written, unlike `settle`).
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let p = run_once(c, &scope, Some(t0 + 60_000_000_000), &[], LONG_LOG).await;
    let r = p.ok();
    r.assert_no_deletes();
    figure("now +1 min (builds the index)", &r);
    for (what, ahead) in [
        ("now +1 h", 3_600_000_000_000),
        ("now +3 d", 3 * 86_400_000_000_000),
    ] {
        let p = run_once(c, &scope, Some(t0 + ahead), &[], LONG_LOG).await;
        let r = p.ok();
        r.assert_no_deletes();
        figure(what, &r);
        assert!(
            events_read(&r) <= (OBJECTS / 20) as i64,
            "{what}: a pass ahead of the filer's clock must read at most 5% of the window's \
             {OBJECTS} events:\n{}",
            p.describe()
        );
    }
    // Written after the passes, stamped with the filer's (earlier) clock: due a day later.
    for k in ["late/a", "late/b", "late/c"] {
        put(&s3, &b, k, b"x", None).await;
    }
    let p = run_once(c, &scope, Some(t0 + 4 * 86_400_000_000_000), &[], LONG_LOG).await;
    let r = p.ok();
    figure("now +4 d (the late objects due)", &r);
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());
    assert!(events_read(&r) <= (OBJECTS / 20) as i64, "{}", p.describe());
    for k in ["late/a", "late/b", "late/c"] {
        assert!(!exists(&s3, &b, k).await, "{k}:\n{}", p.describe());
    }
    assert_eq!(count_objects(&s3, &b).await, OBJECTS);
}
