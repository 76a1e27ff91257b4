//! The forecast on the real cluster (docs/forecast.md): what `forecast` says
//! after a pass is, day by day, exactly what later passes delete on a
//! simulated timeline (`--now`); the lag gauges show a paused bucket's
//! overdue matches and go back to zero after `resume` and a pass; `serve`
//! refreshes them from the cursors a pass saved, reading none back.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The cluster is minutes old: with `--now` days ahead its probed log would be
/// shorter than the TTLs, and the rules walked instead of replayed
/// (docs/retention-probe.md). Say the log reaches back a year.
const LONG_LOG: &[(&str, &str)] = &[("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h")];

/// Current objects with their sizes (ListObjectsV2, all pages).
async fn sizes(s3: &aws_sdk_s3::Client, bucket: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let resp = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("ListObjectsV2 {bucket}: {e:?}"));
        for o in resp.contents() {
            let size = u64::try_from(o.size().unwrap_or_default()).unwrap_or_default();
            out.insert(o.key().unwrap_or_default().to_string(), size);
        }
        match resp.next_continuation_token() {
            Some(t) if resp.is_truncated() == Some(true) => token = Some(t.to_string()),
            _ => break,
        }
    }
    out
}

/// `forecast --json` for `bucket` at `now` over `days`, read through the filer.
async fn forecast(c: &Cluster, scope: &Scope, bucket: &str, now: i64, days: u32) -> Value {
    let filer = c.filer_grpc_addr().to_string();
    let days = days.to_string();
    let now = rfc3339(now);
    let args = [
        "forecast", "--filer", &filer, "--bucket", bucket, "--days", &days, "--now", &now, "--json",
    ];
    let out = run_raw(
        &args,
        &[("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.describe()))
}

/// Per rule ID: (objects, bytes) the forecast puts on day `day` (1-based).
fn forecast_day(f: &Value, day: usize) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for r in f["rules"].as_array().expect("rules array") {
        let d = &r["days"][day - 1];
        let n = d["objects"].as_u64().expect("objects");
        if n > 0 {
            let e = out
                .entry(r["rule_id"].as_str().unwrap_or_default().to_string())
                .or_insert((0, 0));
            e.0 += n;
            e.1 += d["bytes"].as_u64().expect("bytes");
        }
    }
    out
}

#[tokio::test]
async fn forecast_after_a_pass_matches_what_later_passes_delete_day_by_day() {
    let c = cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-forecast").await.unwrap();
    // Four rules, due 1, 2, 2 and 4 days after the write: days with
    // different counts, and two rules on the same day.
    let rules = lifecycle(
        &[("p1", 1), ("p2", 2), ("q2", 2), ("p4", 4)]
            .iter()
            .map(|(id, days)| days_rule(id, &format!("{id}/"), *days))
            .collect::<String>(),
    );
    c.put_lifecycle_xml(&b, &rules).await.unwrap();
    let seed: &[(&str, usize, usize)] =
        &[("p1", 2, 10), ("p2", 3, 20), ("q2", 1, 7), ("p4", 4, 40)];
    for (prefix, n, base) in seed {
        for i in 0..*n {
            let body = vec![b'x'; base + i];
            put(&s3, &b, &format!("{prefix}/o{i}"), &body, None).await;
        }
    }
    let t0 = now_ns();
    // Past the reorder margin, so the first pass counts every write.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let scope = Scope::new(&[&b]);
    let n0 = t0 + HOUR_NS;
    let p = run_once(c, &scope, Some(n0), &[], LONG_LOG).await;
    p.ok().assert_no_deletes();

    const DAYS: u32 = 6;
    let f = forecast(c, &scope, &b, n0, DAYS).await;
    // The README's "Before you set a rule" shows the text form (--nocapture).
    let filer = c.filer_grpc_addr().to_string();
    let text = run_raw(
        &[
            "forecast",
            "--filer",
            &filer,
            "--bucket",
            &b,
            "--days",
            "6",
            "--now",
            &rfc3339(n0),
        ],
        &[("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())],
    )
    .await;
    assert_eq!(text.code, 0, "{}", text.describe());
    println!(
        "$ s3-lifecycled forecast --bucket {b} --days 6 --now {}\n{}",
        rfc3339(n0),
        text.stdout
    );
    let total: u64 = f["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["days"].as_array().unwrap().iter())
        .map(|d| d["objects"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 10, "every seeded object is forecast:\n{f:#}");
    for r in f["rules"].as_array().unwrap() {
        assert_eq!(r["known"], true, "{f:#}");
        assert_eq!(r["overdue"]["objects"], 0, "{f:#}");
    }
    let busy = (1..=DAYS as usize)
        .filter(|d| !forecast_day(&f, *d).is_empty())
        .count();
    assert!(busy >= 3, "the seed spreads over 3 days or more:\n{f:#}");

    // One pass per simulated day: it deletes exactly the day's forecast.
    let mut before = sizes(&s3, &b).await;
    for day in 1..=DAYS as usize {
        let now = n0 + day as i64 * DAY_NS;
        let p = run_once(c, &scope, Some(now), &[], LONG_LOG).await;
        p.ok();
        let after = sizes(&s3, &b).await;
        let mut deleted: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (k, size) in before.iter().filter(|(k, _)| !after.contains_key(*k)) {
            let rule = k.split('/').next().unwrap_or_default().to_string();
            let e = deleted.entry(rule).or_default();
            e.0 += 1;
            e.1 += size;
        }
        assert_eq!(
            deleted,
            forecast_day(&f, day),
            "day {day}: deleted (left) vs forecast (right)\n{}\n{f:#}",
            p.describe()
        );
        before = after;
    }
    assert!(before.is_empty(), "{before:?}");
    // Nothing is left to forecast.
    let f = forecast(c, &scope, &b, n0 + i64::from(DAYS) * DAY_NS, DAYS).await;
    for r in f["rules"].as_array().unwrap() {
        assert_eq!(r["overdue"]["objects"], 0, "{f:#}");
        assert!(
            r["days"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["objects"] == 0),
            "{f:#}"
        );
    }
}

/// The status page as headless Chromium renders it (DOM after load).
fn chromium_dom(url: &str) -> String {
    http::chromium_dom(url)
}

/// The value of attribute `name` in the tag text `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = &tag[start..];
    Some(&rest[..rest.find('"')?])
}

/// The bars of `bucket`'s forecast chart in the rendered page: `data-day` →
/// `data-count`, after checking that each bar's tooltip says the same count.
fn chart_bars(dom: &str, bucket: &str) -> BTreeMap<String, u64> {
    let card_start = dom
        .find(&format!(
            "<div class=\"card forecast\" data-bucket=\"{bucket}\""
        ))
        .unwrap_or_else(|| panic!("no forecast card for {bucket}:\n{dom}"));
    let card = &dom[card_start..];
    let svg =
        &card[card.find("<svg").expect("an inline SVG")..card.find("</svg>").expect("svg end")];
    let mut out = BTreeMap::new();
    for rect in svg.split("<rect").skip(1) {
        let tag = &rect[..rect.find('>').unwrap()];
        let day = attr(tag, "data-day").expect("data-day").to_string();
        let n: u64 = attr(tag, "data-count")
            .expect("data-count")
            .parse()
            .unwrap();
        assert!(
            rect.contains(&format!(": {n} objects")),
            "the bar's <title> names its count: {rect}"
        );
        out.insert(day, n);
    }
    assert!(out.len() > 1, "an overdue bar and day bars: {svg}");
    out
}

/// `<name>{bucket="<b>",rule="<r>"}` in the service's metrics, if present.
async fn gauge(serve: &Serve, name: &str, bucket: &str, rule: &str) -> Option<f64> {
    let m = String::from_utf8(http::get_async(serve.http, "/metrics").await.unwrap().body).unwrap();
    let prefix = format!("{name}{{bucket=\"{bucket}\",rule=\"{rule}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

/// A fresh bucket with rule `d3` (Expiration Days 3: with the service's 10 s
/// test days, due 30 s after the write) and `n` objects under `o/`.
async fn pending_bucket(name: &str, n: usize) -> String {
    let c = cluster();
    let b = c.new_bucket(name).await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d3", "", 3)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("o/", n), b"xyz")
        .await
        .unwrap();
    b
}

#[tokio::test(flavor = "multi_thread")]
async fn lag_metrics_show_a_paused_buckets_overdue_matches_and_clear_after_resume() {
    const N: usize = 5;
    let s3 = cluster().s3_client();
    let b = pending_bucket("e2e-forecast-lag", N).await;
    let scope = Scope::new(&[&b]);
    let serve = Serve::start(&scope, &[]).await;

    // A pass before anything is due: the matches are pending.
    let (id, _) = serve.trigger(&[]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &b).await, N, "{}", serve.log_text());
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_pending", &b, "d3").await,
        Some(N as f64),
        "{}",
        serve.log_text()
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &b, "d3").await,
        Some(0.0)
    );
    // The status page's chart, as headless Chromium renders it: no overdue
    // bar, the N objects on the day bars.
    let bars = chart_bars(&chromium_dom(&format!("http://{}/", serve.http)), &b);
    assert_eq!(bars["overdue"], 0, "{bars:?}");
    assert_eq!(
        bars.iter()
            .filter(|(d, _)| *d != "overdue")
            .map(|(_, n)| n)
            .sum::<u64>(),
        N as u64,
        "{bars:?}"
    );

    // Paused, two minutes later: everything is overdue, nothing deleted.
    let out = serve.cli(&["pause", &b, "--reason", "forecast test"]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let later = now_ns() + 120 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(later)]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &b).await, N);
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &b, "d3").await,
        Some(N as f64),
        "{}",
        serve.log_text()
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_pending", &b, "d3").await,
        Some(0.0)
    );
    let age = gauge(&serve, "s3_lifecycled_oldest_overdue_age_seconds", &b, "d3")
        .await
        .expect("age gauge");
    assert!((60.0..=180.0).contains(&age), "age {age}");
    // The admin API answers the same (`forecast --admin`).
    let out = serve
        .cli(&[
            "forecast",
            "--bucket",
            &b,
            "--json",
            "--now",
            &rfc3339(later),
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let f: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(f["rules"][0]["rule_id"], "d3", "{f:#}");
    assert_eq!(f["rules"][0]["overdue"]["objects"], N, "{f:#}");
    assert_eq!(f["rules"][0]["overdue"]["bytes"], 3 * N, "{f:#}");
    // The chart now shows them on the overdue bar.
    let bars = chart_bars(&chromium_dom(&format!("http://{}/", serve.http)), &b);
    assert_eq!(bars["overdue"], N as u64, "{bars:?}");
    assert!(
        bars.iter().all(|(d, n)| d == "overdue" || *n == 0),
        "{bars:?}"
    );
    // /status.json carries the same forecast.
    let st = serve.status().await;
    let page = String::from_utf8(
        http::get_async(serve.http, "/status.json")
            .await
            .unwrap()
            .body,
    )
    .unwrap();
    let json: Value = serde_json::from_str(&page).unwrap();
    let rules = json["forecast"]["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        rules
            .iter()
            .any(|r| r["bucket"] == b.as_str() && r["overdue"]["objects"] == N),
        "{json:#}\n{st}"
    );

    // Resume and pass: deleted, the gauges go to zero.
    let out = serve.cli(&["resume", &b]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 5 * SEC_NS)])
        .await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", serve.log_text());
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &b, "d3").await,
        Some(0.0),
        "{}",
        serve.log_text()
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_oldest_overdue_age_seconds", &b, "d3").await,
        Some(0.0)
    );
}

/// After a pass, `serve` refreshes the forecast and the lag gauges from the
/// cursors the pass has just saved and reads none back from the filer
/// (docs/forecast.md#refresh); only the start-up refresh, before any pass,
/// reads the 16. The gauges still show the pass's pending matches.
#[tokio::test(flavor = "multi_thread")]
async fn forecast_refresh_after_a_pass_reads_no_cursor_from_the_filer() {
    const N: usize = 3;
    let b = pending_bucket("e2e-forecast-refresh", N).await;
    let scope = Scope::new(&[&b]);
    let serve = Serve::start(
        &scope,
        &[(
            "S3_LIFECYCLED__TELEMETRY__LOG_FILTER",
            "info,s3_lifecycled::service=debug",
        )],
    )
    .await;
    let (id, _) = serve.trigger(&[]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    let log = serve.log_text();
    let refreshes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("forecast refreshed"))
        .collect();
    assert_eq!(refreshes.len(), 2, "start-up and the pass:\n{log}");
    assert!(
        refreshes[0].contains("cursors_from_pass=0") && refreshes[0].contains("cursors_read=16"),
        "start-up reads every cursor:\n{log}"
    );
    assert!(
        refreshes[1].contains("cursors_from_pass=16") && refreshes[1].contains("cursors_read=0"),
        "after the pass, no cursor is read back:\n{log}"
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_pending", &b, "d3").await,
        Some(N as f64),
        "{log}"
    );
}

/// `forecast --json --bucket <b>` through the service's admin API, at `now`.
async fn forecast_admin(serve: &Serve, bucket: &str, now: i64) -> Value {
    let now = rfc3339(now);
    let out = serve
        .cli(&["forecast", "--bucket", bucket, "--now", &now, "--json"])
        .await;
    assert_eq!(out.code, 0, "{}", out.describe());
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.describe()))
}

/// Per rule ID: (overdue objects, pending objects) in a forecast.
fn overdue_and_pending(f: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for r in f["rules"].as_array().into_iter().flatten() {
        let id = r["rule_id"].as_str().unwrap_or_default().to_string();
        let pending: u64 = r["days"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d["objects"].as_u64().unwrap_or(0))
            .sum::<u64>()
            + r["later"]["objects"].as_u64().unwrap_or(0);
        let e = out.entry(id).or_insert((0, 0));
        e.0 += r["overdue"]["objects"].as_u64().unwrap_or(0);
        e.1 += pending;
    }
    out
}

/// Regression: the deletion cap and the rule-change grace hold a recovery
/// walk's deletes, and the walk left no count behind. The forecast and the
/// lag gauges showed nothing overdue for a bucket whose whole backlog was
/// held (and, after an edit, the old rule's matches still pending), so
/// `S3LifecycleOverdue` stayed silent. They now show the held backlog, and it
/// is exactly what `approve` and the end of the grace then delete.
#[tokio::test(flavor = "multi_thread")]
async fn forecast_missed_the_backlog_held_by_the_cap_and_the_grace() {
    const N: usize = 10;
    const CAP: usize = 4;
    let c = cluster();
    let s3 = c.s3_client();

    // The cap: a new bucket whose every object is due.
    let capped = c.new_bucket("fc-capped").await.unwrap();
    c.put_lifecycle_xml(&capped, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&capped, &keys("o/", N), b"xyz")
        .await
        .unwrap();
    let scope = Scope::new(&[&capped]);
    let serve = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__SAFETY__MAX_DELETES_PER_BUCKET", "4")],
    )
    .await;
    let later = now_ns() + 60 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(later)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &capped).await, N - CAP, "{last}");
    let held = (N - CAP) as u64;
    let f = forecast_admin(&serve, &capped, later).await;
    println!("$ s3-lifecycled forecast --bucket {capped} --json   # capped\n{f:#}");
    assert_eq!(
        overdue_and_pending(&f).get("d1"),
        Some(&(held, 0)),
        "the held backlog is overdue:\n{f:#}"
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &capped, "d1").await,
        Some(held as f64),
        "{}",
        serve.log_text()
    );
    // A later pass that keeps holding it keeps showing it.
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 5 * SEC_NS)])
        .await;
    serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &capped, "d1").await,
        Some(held as f64)
    );
    // approve deletes exactly what was shown: the N − CAP left.
    let out = serve.cli(&["approve", &capped]).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    let (id, _) = serve
        .trigger(&["--now", &rfc3339(later + 10 * SEC_NS)])
        .await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &capped).await, 0, "{last}");
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &capped, "d1").await,
        Some(0.0)
    );
    drop(serve);

    // The grace: an edit from a 30-day rule to a 1-day rule.
    const M: usize = 6;
    let graced = c.new_bucket("fc-grace").await.unwrap();
    c.put_lifecycle_xml(&graced, &lifecycle(&days_rule("d30", "", 30)))
        .await
        .unwrap();
    c.put_objects_bulk(&graced, &keys("o/", M), b"xyz")
        .await
        .unwrap();
    let scope = Scope::new(&[&graced]);
    let serve = Serve::start(
        &scope,
        &[
            ("S3_LIFECYCLED__SAFETY__RULE_CHANGE_GRACE", "1h"),
            ("S3_LIFECYCLED__SERVICE__ALLOW_FUTURE_NOW", "true"),
            // The forecast counts what replay reads. On a shared cluster minutes old, its
            // persisted log files start after `now` − the 30-day TTL, so the probe would walk
            // the rule instead (docs/retention-probe.md) and the forecast hold nothing.
            ("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h"),
        ],
    )
    .await;
    let t0 = now_ns();
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 60 * SEC_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    let f = forecast_admin(&serve, &graced, t0 + 60 * SEC_NS).await;
    assert_eq!(
        overdue_and_pending(&f).get("d30"),
        Some(&(0, M as u64)),
        "{f:#}\n{last}\n{}",
        serve.log_text()
    );
    c.put_lifecycle_xml(&graced, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 70 * SEC_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &graced).await, M, "{last}");
    let f = forecast_admin(&serve, &graced, t0 + 70 * SEC_NS).await;
    println!("$ s3-lifecycled forecast --bucket {graced} --json   # in grace\n{f:#}");
    let rows = overdue_and_pending(&f);
    assert_eq!(
        rows.get("d1"),
        Some(&(M as u64, 0)),
        "the new rule's held matches are overdue:\n{f:#}"
    );
    assert!(
        !rows.contains_key("d30"),
        "the old rule is gone and shows nothing:\n{f:#}"
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &graced, "d1").await,
        Some(M as f64)
    );
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_pending", &graced, "d30").await,
        None
    );
    // After the grace the shown backlog is what goes.
    let (id, _) = serve.trigger(&["--now", &rfc3339(t0 + 2 * HOUR_NS)]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(count_objects(&s3, &graced).await, 0, "{last}");
    assert_eq!(
        gauge(&serve, "s3_lifecycled_matches_overdue", &graced, "d1").await,
        Some(0.0)
    );
}
