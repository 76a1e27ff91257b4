//! Safety rails on the real cluster, through the real binary: pausing a
//! bucket (`pause`/`resume`, kept in the filer next to the cursors) leaves it
//! untouched by passes — also across a service restart — while other
//! buckets go on, and its pending deletes go out after `resume`.

use crate::common;

use std::time::Duration;

use common::*;

/// `s3_lifecycled_bucket_paused{bucket="<b>"} 1` is in the service's metrics.
async fn paused_metric(serve: &Serve, bucket: &str) -> bool {
    let m = String::from_utf8(http::get_async(serve.http, "/metrics").await.unwrap().body).unwrap();
    m.contains(&format!(
        "s3_lifecycled_bucket_paused{{bucket=\"{bucket}\"}} 1"
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_bucket_is_untouched_and_resumes_after_resume_also_across_a_restart() {
    const N: usize = 12;
    let c = cluster();
    let s3 = c.s3_client();
    let held = c.new_bucket("pause-held").await.unwrap();
    let other = c.new_bucket("pause-other").await.unwrap();
    for b in [&held, &other] {
        c.put_lifecycle_xml(b, &lifecycle(&days_rule("d1", "", 1)))
            .await
            .unwrap();
        c.put_objects_bulk(b, &keys("o/", N), b"x").await.unwrap();
    }
    let scope = Scope::new(&[&held, &other]);
    let mut serve = Serve::start(&scope, &[]).await;

    // A name that cannot be a bucket is refused before anything is sent.
    let bad = serve.cli(&["pause", "../etc"]).await;
    assert_eq!(bad.code, 2, "{}", bad.describe());
    assert!(
        bad.stderr.contains("not a valid S3 bucket name"),
        "{}",
        bad.describe()
    );

    // Pausing again replaces the first pause's reason and keeps its time.
    let first = serve.cli(&["pause", &held, "--reason", "first"]).await;
    assert_eq!(first.code, 0, "{}", first.describe());
    assert!(
        first.stdout.contains(&format!("bucket {held} paused at")),
        "{}",
        first.stdout
    );
    let out = serve
        .cli(&["pause", &held, "--reason", "typo in rule d1"])
        .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout
            .contains(&format!("bucket {held} was already paused since")),
        "{}",
        out.stdout
    );
    // Approving a bucket nothing holds succeeded with the words of a release; it says that
    // nothing is held and that the approval waits for the next pass that would cap it.
    let pre = serve.cli(&["approve", &other]).await;
    assert_eq!(pre.code, 0, "{}", pre.describe());
    assert!(
        pre.stdout.contains("no deletion-cap hold on it now"),
        "{}",
        pre.stdout
    );
    // A second pause without --reason wiped the note an operator left; it is kept.
    let again = serve.cli(&["pause", &held]).await;
    assert_eq!(again.code, 0, "{}", again.describe());
    assert!(
        again.stdout.contains("was already paused since")
            && again.stdout.contains("(typo in rule d1)"),
        "{}",
        again.stdout
    );
    // The README's "Before you set a rule" shows these outputs (--nocapture).
    println!(
        "$ s3-lifecycled pause {held} --reason \"typo in rule d1\"\n{}",
        out.stdout
    );
    println!(
        "$ s3-lifecycled status\n{}",
        serve.cli(&["status"]).await.stdout
    );
    // Kept in the filer next to the cursors.
    let file = c
        .lookup_entry(
            &format!("{}/paused", scope.cursor_dir),
            &format!("{held}.json"),
        )
        .await
        .unwrap()
        .expect("pause file written");
    let rec: serde_json::Value = serde_json::from_slice(&file.content).unwrap();
    assert_eq!(rec["bucket"], held.as_str(), "{rec}");
    assert_eq!(rec["reason"], "typo in rule d1", "{rec}");
    // Shown by status, the status page and the metrics.
    let st = serve.status().await;
    assert_eq!(st["paused"][0]["bucket"], held.as_str(), "{st}");
    let page = String::from_utf8(http::get_async(serve.http, "/").await.unwrap().body).unwrap();
    assert!(
        page.contains("Paused buckets") && page.contains(&held),
        "{page}"
    );
    assert!(paused_metric(&serve, &held).await);

    // Everything is due a minute from now (10 s day): only the other bucket goes.
    let later = now_ns() + 60 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(later)]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &other).await, 0, "{}", serve.log_text());
    assert_eq!(count_objects(&s3, &held).await, N, "{}", serve.log_text());
    assert!(
        serve.log_text().contains(&format!("paused=\"{held}\"")),
        "{}",
        serve.log_text()
    );

    // A restart reads the pause back from the filer before any pass.
    let (code, _) = serve.stop_with("TERM", Duration::from_secs(30)).await;
    assert_eq!(code, 0);
    let serve = Serve::start(&scope, &[]).await;
    let st = serve.status().await;
    assert_eq!(st["paused"][0]["bucket"], held.as_str(), "{st}");
    assert_eq!(st["paused"][0]["reason"], "typo in rule d1", "{st}");
    assert!(paused_metric(&serve, &held).await);
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 5 * SEC_NS)])
        .await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &held).await, N, "{}", serve.log_text());

    // Resume: the pending deletes go out on the next pass.
    let out = serve.cli(&["resume", &held]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(out.stdout.contains("resumed"), "{}", out.stdout);
    let st = serve.status().await;
    assert_eq!(st["paused"], serde_json::json!([]), "{st}");
    assert!(!paused_metric(&serve, &held).await);
    assert!(
        c.lookup_entry(
            &format!("{}/paused", scope.cursor_dir),
            &format!("{held}.json")
        )
        .await
        .unwrap()
        .is_none()
    );
    let again = serve.cli(&["resume", &held]).await;
    assert!(
        again.stdout.contains("was not paused"),
        "{}",
        again.describe()
    );
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 10 * SEC_NS)])
        .await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(
        count_objects(&s3, &held).await,
        0,
        "{last}\n{}",
        serve.log_text()
    );
}

/// The bucket card of `bucket` in a `status --last --json` document.
fn bucket_card(last: &serde_json::Value, bucket: &str) -> serde_json::Value {
    last["buckets"]
        .as_array()
        .and_then(|bs| bs.iter().find(|b| b["bucket"] == bucket).cloned())
        .unwrap_or_else(|| panic!("no card for {bucket} in {last}"))
}

/// `safety.max_delete_fraction` had no end-to-end test: the cap is that fraction of the bucket's
/// entries, counted at the pass's start. 20 objects all due at 0.25 stop at exactly 5; a bucket
/// whose rule matches 2 of its 20 objects (10%) is under it; `approve` lets the rest through.
#[tokio::test(flavor = "multi_thread")]
async fn delete_fraction_holds_a_bucket_at_that_share_of_its_objects_until_approve() {
    const N: usize = 20;
    let c = cluster();
    let s3 = c.s3_client();
    let big = c.new_bucket("frac-big").await.unwrap();
    let few = c.new_bucket("frac-few").await.unwrap();
    c.put_lifecycle_xml(&big, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&big, &keys("o/", N), b"x")
        .await
        .unwrap();
    c.put_lifecycle_xml(&few, &lifecycle(&days_rule("tmp", "tmp/", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&few, &keys("o/", N - 2), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&few, &keys("tmp/", 2), b"x")
        .await
        .unwrap();
    let scope = Scope::new(&[&big, &few]);
    let serve = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__SAFETY__MAX_DELETE_FRACTION", "0.25")],
    )
    .await;
    let later = now_ns() + 60 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(later)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &big).await, N - 5, "{last}");
    let reason = bucket_card(&last, &big)["held_reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.starts_with("safety cap: would delete 20 of 20 (100.0%); stopped at 5."),
        "{reason}"
    );
    assert_eq!(count_objects(&s3, &few).await, N - 2, "{last}");
    assert_eq!(
        bucket_card(&last, &few)["held_reason"],
        serde_json::Value::Null,
        "{last}"
    );

    let out = serve.cli(&["approve", &big]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 5 * SEC_NS)])
        .await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &big).await, 0, "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_cap_holds_a_bucket_at_exactly_the_cap_until_approve() {
    const N: usize = 10;
    const CAP: usize = 4;
    let c = cluster();
    let s3 = c.s3_client();
    let big = c.new_bucket("cap-big").await.unwrap();
    let small = c.new_bucket("cap-small").await.unwrap();
    for (b, n) in [(&big, N), (&small, 3)] {
        c.put_lifecycle_xml(b, &lifecycle(&days_rule("d1", "", 1)))
            .await
            .unwrap();
        c.put_objects_bulk(b, &keys("o/", n), b"x").await.unwrap();
    }
    let scope = Scope::new(&[&big, &small]);
    let serve = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__SAFETY__MAX_DELETES_PER_BUCKET", "4")],
    )
    .await;
    let held_dir = format!("{}/held", scope.cursor_dir);
    let approved_dir = format!("{}/approved", scope.cursor_dir);
    let file = format!("{big}.json");

    // Everything is due a minute from now: the big bucket stops at exactly
    // the cap, the small one (under it) is unaffected.
    let later = now_ns() + 60 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(later)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &big).await, N - CAP, "{last}");
    assert_eq!(count_objects(&s3, &small).await, 0, "{last}");
    let card = bucket_card(&last, &big);
    let reason = card["held_reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.starts_with("safety cap: would delete 10 of 10 (100.0%); stopped at 4."),
        "{card}"
    );
    assert_eq!(
        bucket_card(&last, &small)["held_reason"],
        serde_json::Value::Null
    );
    let log = serve.log_text();
    assert!(
        log.contains(&format!("held=\"{big}: safety cap: would delete 10 of 10")),
        "{log}"
    );
    let metrics =
        String::from_utf8(http::get_async(serve.http, "/metrics").await.unwrap().body).unwrap();
    assert!(
        metrics.contains(&format!("s3_lifecycled_bucket_held{{bucket=\"{big}\"}} 6")),
        "{metrics}"
    );
    let page = String::from_utf8(http::get_async(serve.http, "/").await.unwrap().body).unwrap();
    assert!(
        page.contains("safety cap: would delete 10 of 10 (100.0%)"),
        "{page}"
    );
    let text = serve.cli(&["status", "--last"]).await;
    println!("$ s3-lifecycled status --last\n{}", text.stdout);
    assert!(
        text.stdout
            .contains("held=\"safety cap: would delete 10 of 10"),
        "{}",
        text.describe()
    );
    assert!(c.lookup_entry(&held_dir, &file).await.unwrap().is_some());

    // The hold sticks: the next pass sends nothing for the bucket.
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 5 * SEC_NS)])
        .await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &big).await, N - CAP, "{last}");
    let card = bucket_card(&last, &big);
    assert!(
        card["held_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("held by an earlier pass"),
        "{card}"
    );

    // approve: the next pass lets the rest through, once.
    let out = serve.cli(&["approve", &big]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout.contains("does not cap it (once)"),
        "{}",
        out.stdout
    );
    println!("$ s3-lifecycled approve {big}\n{}", out.stdout);
    assert!(
        c.lookup_entry(&approved_dir, &file)
            .await
            .unwrap()
            .is_some()
    );
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 10 * SEC_NS)])
        .await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(
        count_objects(&s3, &big).await,
        0,
        "{last}\n{}",
        serve.log_text()
    );
    assert_eq!(
        bucket_card(&last, &big)["held_reason"],
        serde_json::Value::Null,
        "{last}"
    );
    assert!(c.lookup_entry(&held_dir, &file).await.unwrap().is_none());
    assert!(
        c.lookup_entry(&approved_dir, &file)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rule_change_grace_defers_deletes_after_an_edit_and_releases_them_after_it_or_on_approve() {
    const N: usize = 6;
    let c = cluster();
    let s3 = c.s3_client();
    let waits = c.new_bucket("grace-waits").await.unwrap();
    let approved = c.new_bucket("grace-approved").await.unwrap();
    for b in [&waits, &approved] {
        // First a rule that matches nothing: the service records the document.
        c.put_lifecycle_xml(b, &lifecycle(&days_rule("d1", "none/", 1)))
            .await
            .unwrap();
        c.put_objects_bulk(b, &keys("o/", N), b"x").await.unwrap();
    }
    let scope = Scope::new(&[&waits, &approved]);
    let serve = Serve::start(
        &scope,
        &[
            ("S3_LIFECYCLED__SAFETY__RULE_CHANGE_GRACE", "1h"),
            ("S3_LIFECYCLED__SERVICE__ALLOW_FUTURE_NOW", "true"),
        ],
    )
    .await;
    let t0 = now_ns();
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 60 * SEC_NS)]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert!(
        c.lookup_entry(
            &format!("{}/rules", scope.cursor_dir),
            &format!("{waits}.json")
        )
        .await
        .unwrap()
        .is_some()
    );

    // The edit: every object matches. The next pass is dry for both buckets.
    for b in [&waits, &approved] {
        c.put_lifecycle_xml(b, &lifecycle(&days_rule("d1", "", 1)))
            .await
            .unwrap();
    }
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 70 * SEC_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    for b in [&waits, &approved] {
        assert_eq!(count_objects(&s3, b).await, N, "{last}");
        let card = bucket_card(&last, b);
        let reason = card["held_reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("rule change grace: the lifecycle document changed at ")
                && reason.contains("the new rules would delete 6 of 6;"),
            "{card}"
        );
    }
    let page = String::from_utf8(http::get_async(serve.http, "/").await.unwrap().body).unwrap();
    assert!(page.contains("the new rules would delete 6 of 6"), "{page}");
    println!(
        "$ s3-lifecycled status --last\n{}",
        serve.cli(&["status", "--last"]).await.stdout
    );

    // approve ends one bucket's grace; the other waits.
    let out = serve.cli(&["approve", &approved]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 80 * SEC_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &approved).await, 0, "{last}");
    assert_eq!(count_objects(&s3, &waits).await, N, "{last}");

    // After the grace (1 h after the edit was seen), the deletes go out.
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 2 * HOUR_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(
        count_objects(&s3, &waits).await,
        0,
        "{last}\n{}",
        serve.log_text()
    );
    assert_eq!(
        bucket_card(&last, &waits)["held_reason"],
        serde_json::Value::Null
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn journal_lists_exactly_the_deletes_a_pass_made() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("journal").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "old/", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("old/", 8), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("keep/", 3), b"x")
        .await
        .unwrap();
    let scope = Scope::new(&[&b]);
    let serve = Serve::start(&scope, &[]).await;
    let before = list_keys(&s3, &b).await;
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(now_ns() + 60 * SEC_NS)])
        .await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    let after = list_keys(&s3, &b).await;
    let deleted: std::collections::BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(deleted.len(), 8, "{before:?} → {after:?}");

    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_raw(&["journal", "--bucket", &b, "--json"], &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let entries: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).unwrap();
    let journaled: std::collections::BTreeSet<String> = entries
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(journaled, deleted, "{}", out.stdout);
    assert_eq!(entries.len(), 8, "each delete once: {}", out.stdout);
    for e in &entries {
        assert_eq!(
            (&e["outcome"], &e["rule_id"], &e["kind"], &e["run_id"]),
            (
                &serde_json::json!("DONE"),
                &serde_json::json!("d1"),
                &serde_json::json!("expiration_days"),
                &serde_json::json!(id)
            ),
            "{e}"
        );
    }
    // Filters, and the text form.
    let out = run_raw(
        &["journal", "--bucket", &b, "--key-prefix", "old/00000"],
        &env,
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    println!(
        "$ s3-lifecycled journal --bucket {b} --key-prefix old/00000\n{}",
        out.stdout
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l.contains(" DONE ") && l.contains(" rule=d1 ")),
        "{}",
        out.stdout
    );
    let future = rfc3339(now_ns() + 3 * DAY_NS);
    let out = run_raw(&["journal", "--since", &future], &env).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, ""),
        "{}",
        out.describe()
    );
    let bad = run_raw(&["journal", "--since", "yesterday"], &env).await;
    assert_eq!(bad.code, 2, "{}", bad.describe());
}

/// `journal` against a cursor dir that holds no journal (forgotten `--config`, a typo in
/// `cursor.dir`) printed nothing and exited 0, which runbook (o) reads as "s3-lifecycled did
/// not delete it". stdout stays empty, and stderr says which journal was read and that it is
/// missing; a bucket name S3 cannot have is a usage error, as for `explain`.
#[tokio::test(flavor = "multi_thread")]
async fn journal_of_a_cursor_dir_without_a_journal_says_so_instead_of_printing_nothing() {
    let c = cluster();
    let b = c.new_bucket("journal-none").await.unwrap();
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    for json in [false, true] {
        let mut args = vec!["journal", "--bucket", b.as_str()];
        if json {
            args.push("--json");
        }
        let out = run_raw(&args, &env).await;
        assert_eq!(out.code, 0, "{}", out.describe());
        let expected = if json { "[]" } else { "" };
        assert_eq!(out.stdout.trim(), expected, "{}", out.describe());
        assert!(
            out.stderr.contains(&format!(
                "no deletion journal in {}/journal",
                scope.cursor_dir
            )) && out.stderr.contains("--config"),
            "{}",
            out.describe()
        );
    }
    let bad = run_raw(&["journal", "--bucket", "Bad_Name"], &env).await;
    assert_eq!(bad.code, 2, "{}", bad.describe());
    assert!(bad.stderr.contains("Bad_Name"), "{}", bad.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_gives_the_due_time_and_rule_of_a_match_and_the_reason_of_each_non_match() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("explain").await.unwrap();
    let rules = format!(
        "{}<Rule><ID>tmp-tag</ID><Status>Enabled</Status><Filter><Tag><Key>class</Key><Value>tmp</Value></Tag></Filter>\
         <Expiration><Days>1</Days></Expiration></Rule>\
         <Rule><ID>big</ID><Status>Enabled</Status><Filter><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></Filter>\
         <Expiration><Days>1</Days></Expiration></Rule>",
        days_rule("logs", "logs/", 3)
    );
    c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
    put(&s3, &b, "logs/a.txt", b"hello", Some("class=keep")).await;
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_raw(&["explain", &b, "logs/a.txt"], &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    println!("$ s3-lifecycled explain {b} logs/a.txt\n{}", out.stdout);
    // The due time: mtime + 3 days of 10 s, no rounding (SHORT_DAY).
    let entry = c
        .lookup_entry(&format!("/buckets/{b}/logs"), "a.txt")
        .await
        .unwrap()
        .unwrap();
    let a = entry.attributes.unwrap();
    let due = a.mtime * SEC_NS + i64::from(a.mtime_ns) + 30 * SEC_NS;
    let t = &out.stdout;
    assert!(t.contains("rule logs: matches\n"), "{t}");
    assert!(
        t.contains(&format!(
            "  expiration_days: due {} (mtime + 3 days)",
            rfc3339(due)
        )),
        "{t}"
    );
    assert!(
        t.contains("rule tmp-tag: does not match: tag: object's tag \"class\" is \"keep\", rule wants \"tmp\""),
        "{t}"
    );
    assert!(
        t.contains(
            "rule big: does not match: size: 5 bytes is not greater than ObjectSizeGreaterThan 100"
        ),
        "{t}"
    );
    put(&s3, &b, "img/b.png", b"x", None).await;
    let out = run_raw(&["explain", &b, "img/b.png"], &env).await;
    assert!(
        out.stdout.contains(
            "rule logs: does not match: prefix: key \"img/b.png\" does not start with \"logs/\""
        ),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout
            .contains("rule tmp-tag: does not match: tag: object has no tag \"class\""),
        "{}",
        out.stdout
    );
    let missing = run_raw(&["explain", &b, "nope"], &env).await;
    assert_eq!(missing.code, 1, "{}", missing.describe());
    assert!(
        missing.stderr.contains("not found"),
        "{}",
        missing.describe()
    );
}

/// `rules preview --bucket` and `explain` of a bucket the cluster does not have (a typo) exited
/// 1, the code of an unreachable cluster, with no hint; like `forecast --bucket` and `audit
/// --bucket` they are invalid input (exit 2) naming the likeliest bucket meant.
#[tokio::test(flavor = "multi_thread")]
async fn preview_and_explain_of_a_mistyped_bucket_exit_2_naming_the_one_meant() {
    let c = cluster();
    let b = c.new_bucket("typo-target").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    let typo = b[..b.len() - 1].to_string();
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let dir = TmpDir::new("typo");
    let doc = dir.path().join("lifecycle.xml");
    std::fs::write(&doc, lifecycle(&days_rule("d1", "", 1))).unwrap();
    let doc = doc.to_string_lossy().to_string();
    for args in [
        vec!["rules", "preview", doc.as_str(), "--bucket", typo.as_str()],
        vec!["explain", typo.as_str(), "some/key"],
    ] {
        let out = run_raw(&args, &env).await;
        assert_eq!(out.code, 2, "{}", out.describe());
        assert!(
            out.stderr
                .contains(&format!("bucket `{typo}` does not exist"))
                && out.stderr.contains(&format!("did you mean `{b}`?")),
            "{}",
            out.describe()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_preview_counts_per_rule_and_day_and_writes_nothing() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("preview").await.unwrap();
    c.put_objects_bulk(&b, &keys("old/", 4), b"hello")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("new/", 2), b"abc")
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("keep/", 3), b"z")
        .await
        .unwrap();
    // An upload in progress with two parts (9 + 14 bytes): an abort frees
    // its parts, which one listing of the bucket does not see.
    let upload = start_upload(&s3, &b, "tmp/big.bin").await;
    for (n, body) in [(1, &b"part one!"[..]), (2, &b"and part two!!"[..])] {
        s3.upload_part()
            .bucket(&b)
            .key("tmp/big.bin")
            .upload_id(&upload)
            .part_number(n)
            .body(aws_sdk_s3::primitives::ByteStream::from(body.to_vec()))
            .send()
            .await
            .unwrap();
    }
    let t0 = now_ns();
    let dir = TmpDir::new("preview");
    let doc = dir.path().join("lifecycle.xml");
    std::fs::write(
        &doc,
        lifecycle(&format!(
            "{}{}<Rule><ID>mpu</ID><Status>Enabled</Status><Filter><Prefix>tmp/</Prefix></Filter>\
             <AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>\
             </AbortIncompleteMultipartUpload></Rule>",
            days_rule("old", "old/", 1),
            days_rule("new", "new/", 3)
        )),
    )
    .unwrap();
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let keys_before = list_keys(&s3, &b).await;
    let bucket_before = c.lookup_entry("/buckets", &b).await.unwrap();
    // 10 s days: "old/" is due 10 s after its write, "new/" 30 s after.
    let at = rfc3339(t0 + 15 * SEC_NS);
    let doc_s = doc.to_string_lossy().to_string();
    let args = [
        "rules",
        "preview",
        doc_s.as_str(),
        "--bucket",
        b.as_str(),
        "--at",
        at.as_str(),
        "--days",
        "5",
    ];
    let text = run_raw(&args, &env).await;
    assert_eq!(text.code, 0, "{}", text.describe());
    println!(
        "$ s3-lifecycled rules preview lifecycle.xml --bucket {b} --at {at} --days 5\n{}",
        text.stdout
    );
    let mut jargs = args.to_vec();
    jargs.push("--json");
    let out = run_raw(&jargs, &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["at"]["objects"], 4, "{j}");
    assert_eq!(j["at"]["uploads"], 1, "{j}");
    // 4 objects of 5 bytes, and the upload's parts (regression: uploads
    // were counted as 0 bytes).
    assert_eq!(j["at"]["bytes"], 20 + 9 + 14, "{j}");
    assert_eq!(j["per_rule"]["mpu"]["uploads"], 1, "{j}");
    assert_eq!(j["per_rule"]["mpu"]["bytes"], 23, "{j}");
    assert_eq!(j["per_rule"]["old"]["objects"], 4, "{j}");
    assert_eq!(j["per_rule"].get("new"), None, "{j}");
    assert_eq!(j["per_day"][0]["objects"], 0, "{j}");
    assert_eq!(j["per_day"][1]["objects"], 2, "{j}");
    assert_eq!(j["per_day"][1]["bytes"], 6, "{j}");
    let later: u64 = (2..5)
        .map(|d| j["per_day"][d]["objects"].as_u64().unwrap())
        .sum();
    assert_eq!(later, 0, "{j}");
    assert_eq!(j["sample"].as_array().unwrap().len(), 5, "{j}");
    // Read-only: the bucket, its entry (no lifecycle document) and the
    // service's state directory are as they were.
    assert_eq!(list_keys(&s3, &b).await, keys_before);
    assert_eq!(list_uploads(&s3, &b).await.len(), 1);
    assert_eq!(c.lookup_entry("/buckets", &b).await.unwrap(), bucket_before);
    let (parent, name) = scope.cursor_dir.rsplit_once('/').unwrap();
    assert!(c.lookup_entry(parent, name).await.unwrap().is_none());
    // An invalid document is refused with exit 2.
    std::fs::write(
        &doc,
        b"<LifecycleConfiguration><Rule></Rule></LifecycleConfiguration>",
    )
    .unwrap();
    let bad = run_raw(&args, &env).await;
    assert_eq!(bad.code, 2, "{}", bad.describe());
}

/// Regression: `explain` looked up only the bare `<key>` entry, which a key
/// written in a versioned bucket does not have (its versions live in
/// `<key>.versions/`), so it answered "not found" for every versioned
/// object. With `--version-id` it now also shows what the walker would do
/// to that version: a noncurrent version's due time under a
/// NoncurrentVersionExpiration rule, the current one's expiration.
#[tokio::test(flavor = "multi_thread")]
async fn explain_finds_versioned_keys_and_gives_a_versions_noncurrent_due_time() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("explainv").await.unwrap();
    enable_versioning(&s3, &b).await;
    let rules = format!(
        "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
         <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration></Rule>{}",
        days_rule("cur", "", 5)
    );
    c.put_lifecycle_xml(&b, &lifecycle(&rules)).await.unwrap();
    let v1 = put(&s3, &b, "k", b"first", None).await.expect("v1 id");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let v2 = put(&s3, &b, "k", b"second!", None).await.expect("v2 id");
    let v2_modified = s3
        .head_object()
        .bucket(&b)
        .key("k")
        .version_id(&v2)
        .send()
        .await
        .unwrap()
        .last_modified
        .unwrap()
        .secs()
        * SEC_NS;
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

    // No --version-id: the current version (the bug: "not found").
    let cur = run_raw(&["explain", &b, "k"], &env).await;
    assert_eq!(cur.code, 0, "{}", cur.describe());
    println!("$ s3-lifecycled explain {b} k\n{}", cur.stdout);
    assert!(
        cur.stdout
            .contains("object {b}/k: 7 bytes".replace("{b}", &b).as_str()),
        "{}",
        cur.stdout
    );
    assert!(
        cur.stdout
            .contains(&format!("version {v2}: current version, 7 bytes")),
        "{}",
        cur.stdout
    );
    assert!(
        cur.stdout.contains("  rule cur: expiration_days: due "),
        "{}",
        cur.stdout
    );
    assert!(
        !cur.stdout.contains("rule nc: noncurrent"),
        "{}",
        cur.stdout
    );

    // The noncurrent version: due 2 (10 s) days after it became noncurrent,
    // i.e. after v2 was written (S3 shows whole seconds: allow 2 s).
    let old = run_raw(&["explain", &b, "k", "--version-id", &v1], &env).await;
    assert_eq!(old.code, 0, "{}", old.describe());
    println!(
        "$ s3-lifecycled explain {b} k --version-id {v1}\n{}",
        old.stdout
    );
    assert!(
        old.stdout
            .contains(&format!("version {v1}: noncurrent since ")),
        "{}",
        old.stdout
    );
    let due_line = old
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  rule nc: noncurrent_days: due "))
        .unwrap_or_else(|| panic!("no noncurrent due line:\n{}", old.stdout));
    let due = s3_lifecycled::admin::parse_rfc3339_ns(due_line.trim()).unwrap();
    let want = v2_modified + 20 * SEC_NS;
    assert!(
        (want..want + 2 * SEC_NS).contains(&due),
        "due {due_line} vs v2 written at {} + 20 s",
        rfc3339(v2_modified)
    );
    assert!(
        !old.stdout.contains("rule cur: expiration_days"),
        "{}",
        old.stdout
    );

    // A version the key does not have: exit 1, with the versions it has.
    let none = run_raw(&["explain", &b, "k", "--version-id", "nope"], &env).await;
    assert_eq!(none.code, 1, "{}", none.describe());
    assert!(
        none.stderr.contains("version nope of"),
        "{}",
        none.describe()
    );
    assert!(
        none.stderr.contains(&v1) && none.stderr.contains(&v2),
        "{}",
        none.describe()
    );
}

/// Regression: the deletion cap counted per process, so two passes over
/// disjoint shard sets (two `weed admin` jobs, or `run-once --shards`) each
/// sent the whole cap for the same bucket: twice the setting together. Each
/// now sends its shards' share (shards 0-7 of a cap of 10: 5), so together
/// they never pass the cap; the pass that reaches its share holds the bucket,
/// and a later pass over the other shards sends nothing until `approve`.
#[tokio::test(flavor = "multi_thread")]
async fn passes_over_disjoint_shard_sets_stop_at_the_cap_together() {
    const N: usize = 60;
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("cap-split").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("o/", N), b"x").await.unwrap();
    let scope = Scope::new(&[&b]);
    let env = [("S3_LIFECYCLED__SAFETY__MAX_DELETES_PER_BUCKET", "10")];
    // Three (real) days on: past the 1-day rule and its rounding to midnight.
    let later = Some(plus(now_ns(), 3, 0));
    let first = run_once(c, &scope, later, &["--shards", "0-7"], &env).await;
    let r = first.ok();
    assert_eq!(r.total("DONE"), 5, "{}", first.describe());
    assert!(
        first.stdout.contains("safety cap: would delete"),
        "{}",
        first.describe()
    );
    let second = run_once(c, &scope, later, &["--shards", "8-15"], &env).await;
    assert_eq!(second.ok().total("DONE"), 0, "{}", second.describe());
    assert!(
        second.stdout.contains("held by an earlier pass"),
        "{}",
        second.describe()
    );
    assert_eq!(count_objects(&s3, &b).await, N - 5);
}

/// Typos were accepted silently: `pause`/`approve` of a bucket the cluster does not have exited 0
/// and reported success, `forecast --bucket missing` said "nothing pending", and a misspelt
/// `--buckets` name gave no word. Each is now refused naming the buckets that exist and the
/// likeliest one meant; pausing a bucket before it exists takes `--create-if-missing`.
#[tokio::test(flavor = "multi_thread")]
async fn typos_in_bucket_names_were_accepted_silently() {
    let c = cluster();
    let s3 = c.s3_client();
    let real = c.new_bucket("typo-photos").await.unwrap();
    c.put_lifecycle_xml(&real, &lifecycle(&date_rule("due", "", PAST_DATE)))
        .await
        .unwrap();
    put(&s3, &real, "a", b"x", None).await;
    // One letter dropped, as fingers do.
    let typo = real[1..].to_string();
    let scope = Scope::new(&[&real]);
    let mut serve = Serve::start(&scope, &[]).await;

    for args in [vec!["pause", typo.as_str()], vec!["approve", typo.as_str()]] {
        let out = serve.cli(&args).await;
        assert_eq!(out.code, 2, "{}", out.describe());
        assert!(
            out.stderr
                .contains(&format!("bucket `{typo}` does not exist"))
                && out.stderr.contains(&real),
            "names the typo and a bucket that exists:\n{}",
            out.describe()
        );
    }
    let out = serve.cli(&["pause", "no-such-bucket-yet"]).await;
    assert!(
        out.stderr.contains("--create-if-missing"),
        "{}",
        out.describe()
    );
    let out = serve
        .cli(&["pause", "no-such-bucket-yet", "--create-if-missing"])
        .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let out = serve.cli(&["resume", "no-such-bucket-yet"]).await;
    assert_eq!(out.code, 0, "{}", out.describe());

    // forecast, through the service and straight from the filer.
    let out = serve.cli(&["forecast", "--bucket", &typo]).await;
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(out.stderr.contains("does not exist"), "{}", out.describe());
    let filer = c.filer_grpc_addr().to_string();
    let env = [("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    let out = run_raw(&["forecast", "--filer", &filer, "--bucket", &typo], &env).await;
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(
        out.stderr.contains("flag --bucket: bucket"),
        "{}",
        out.describe()
    );

    // A run-once on the shards of a live serve is refused (docs/serve-instances.md#run-once).
    let (code, _) = serve.stop_with("TERM", Duration::from_secs(40)).await;
    assert_eq!(code, 0, "{}", serve.log_text());
    // A misspelt --buckets name: the other bucket is done, the typo named in a warning and in
    // the report (a bucket deleted since it was listed is named the same way and does not fail
    // the pass: edge.rs's deleted_bucket_between_passes_does_not_fail_the_pass).
    let p = run_once(c, &Scope::new(&[&real, &typo]), None, &[], &[]).await;
    assert!(
        p.stderr.contains(&format!(
            "warning: bucket {typo}: named by pass.buckets or --buckets, but bucket `{typo}` \
             does not exist (did you mean `{real}`?)"
        )),
        "{}",
        p.describe()
    );
    let r = p.ok();
    assert_eq!(
        r.v["unknown_buckets"],
        serde_json::json!([typo]),
        "{}",
        p.describe()
    );
    assert!(
        !exists(&s3, &real, "a").await,
        "the real bucket was done:\n{}",
        p.describe()
    );
}

/// The grace was skipped under `--now`: with a 24 h grace, the first pass that saw an edit
/// deleted everything when it ran 2.1 days ahead, because the grace clock starts at the earlier
/// of `now` and the wall clock. The first pass that sees a change is now always dry; the next one
/// at that `now` deletes.
#[tokio::test(flavor = "multi_thread")]
async fn grace_was_skipped_by_a_first_pass_with_now_past_its_end() {
    const N: usize = 4;
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("grace-ahead").await.unwrap();
    let other = c.new_bucket("grace-ahead-base").await.unwrap();
    for bucket in [&b, &other] {
        c.put_lifecycle_xml(bucket, &lifecycle(&days_rule("d30", "keep/", 30)))
            .await
            .unwrap();
    }
    c.put_objects_bulk(&b, &keys("o/", N), b"x").await.unwrap();
    let scope = Scope::new(&[&b, &other]);
    let grace = [("S3_LIFECYCLED__SAFETY__RULE_CHANGE_GRACE", "24h")];
    let t0 = now_ns();
    // Baseline: the documents are recorded.
    run_once(c, &scope, Some(t0 + 60 * SEC_NS), &[], &grace)
        .await
        .ok();
    // The edit makes every object due a day after its write.
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    let ahead = t0 + 2 * 86_400 * SEC_NS + 8_640 * SEC_NS;
    let p = run_once(c, &scope, Some(ahead), &[], &grace).await;
    p.ok().assert_no_deletes();
    assert_eq!(count_objects(&s3, &b).await, N, "{}", p.describe());
    assert!(
        p.stdout.contains("rule change grace") || p.stderr.contains("rule change grace"),
        "{}",
        p.describe()
    );
    let p = run_once(c, &scope, Some(ahead), &[], &grace).await;
    assert_eq!(p.ok().total("DONE"), N as i64, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
}

/// "Why is my object gone?": `explain` on a key the service deleted said only "not found". It
/// now cites the journal: the rule, the pass and when.
#[tokio::test(flavor = "multi_thread")]
async fn explain_on_a_deleted_key_said_only_not_found() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("explain-gone").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("old-tmp", "tmp/", PAST_DATE)))
        .await
        .unwrap();
    put(&s3, &b, "tmp/a", b"x", None).await;
    let scope = Scope::new(&[&b]);
    let p = run_once(c, &scope, None, &[], &[]).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    let run_id = r.v["run_id"].as_str().unwrap_or_default().to_string();
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_raw(&["explain", &b, "tmp/a"], &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let t = &out.stdout;
    assert!(
        t.contains("does not exist: s3-lifecycled deleted it"),
        "{t}"
    );
    assert!(t.contains("rule old-tmp (expiration_date)"), "{t}");
    assert!(
        !run_id.is_empty() && t.contains(&format!("pass {run_id}")),
        "{run_id}: {t}"
    );
    // Never ours: still an error, saying the journal has nothing.
    let out = run_raw(&["explain", &b, "tmp/never"], &env).await;
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(
        out.stderr.contains("holds no delete of it"),
        "{}",
        out.describe()
    );
}

/// Regression: `explain` on a folder marker (`PUT dir/`, which S3 lists as the object `dir/`)
/// said "not found" and exited 1. The marker is a directory entry in the filer and lifecycle
/// never expires directories (docs/filer-layout.md#objects-and-directories); explain now says
/// so. An implicit parent directory (no ETag) is still not an object.
#[tokio::test(flavor = "multi_thread")]
async fn explain_on_a_folder_marker_said_not_found() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("explain-folder").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("all", "", 1)))
        .await
        .unwrap();
    put(&s3, &b, "photos/", b"", None).await;
    put(&s3, &b, "implicit/a.txt", b"x", None).await;
    let scope = Scope::new(&[&b]);
    let env = serve_env(&scope);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_raw(&["explain", &b, "photos/"], &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout.contains("a folder marker")
            && out.stdout.contains("lifecycle never expires directories"),
        "{}",
        out.describe()
    );
    let out = run_raw(&["explain", &b, "implicit/"], &env).await;
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(out.stderr.contains("not found"), "{}", out.describe());
}
