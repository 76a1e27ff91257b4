//! `s3-lifecycled serve` against the loopback cluster, through the real
//! binary: trigger and status over the admin gRPC API (via the CLI), a
//! second trigger during a pass, `/metrics` after a pass, the status page in
//! headless Chromium, and the span tree of real passes through an in-process
//! OTLP receiver.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::otlp::{Collector, attr};
use common::*;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;

/// `--now` a minute ahead: with the 10 s day, everything written now is due.
fn later() -> String {
    rfc3339(now_ns() + 60 * SEC_NS)
}

/// A bucket with the 1-day expiration rule and `n` objects, and its scope.
async fn bucket_with(prefix: &str, n: usize) -> (String, Scope) {
    let c = cluster();
    let b = c.new_bucket(prefix).await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    c.put_objects_bulk(&b, &keys("o/", n), b"x").await.unwrap();
    let scope = Scope::new(&[&b]);
    (b, scope)
}

#[tokio::test(flavor = "multi_thread")]
async fn trigger_status_second_trigger_and_metrics_after_a_pass() {
    let (b, scope) = bucket_with("svc-api", 40).await;
    // 10 deletes/s: the pass takes ~4 s, long enough to trigger twice and
    // read the running pass's status.
    let serve = Serve::start(
        &scope,
        &[
            ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "10"),
            ("S3_LIFECYCLED__RATE__BURST", "1"),
        ],
    )
    .await;
    assert_eq!(serve.last().await, serde_json::Value::Null, "no pass yet");
    assert_eq!(serve.status().await["state"], "idle");

    let now = later();
    let (id, already) = serve.trigger(&["--now", &now]).await;
    assert!(!already, "first trigger starts a pass");
    let (id2, already2) = serve.trigger(&[]).await;
    assert_eq!(
        id2, id,
        "a trigger during a pass answers with the running pass's id"
    );
    assert!(already2, "second trigger reports already_running");

    let st = serve.status().await;
    assert_eq!(st["state"], "running", "{st}");
    assert_eq!(st["current_pass"]["run_id"], id.as_str(), "{st}");
    assert_eq!(st["current_pass"]["shards"].as_array().unwrap().len(), 16);

    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(last["outcome"], "completed", "{last}");
    assert_eq!(last["shards"].as_array().unwrap().len(), 16);
    let done: u64 = last["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["deletes"]["DONE"].as_u64().unwrap())
        .sum();
    assert_eq!(done, 40, "{last}");
    let buckets = last["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 1, "{last}");
    assert_eq!(buckets[0]["bucket"], b.as_str());
    assert_eq!(buckets[0]["outcome"], "completed");
    assert_eq!(buckets[0]["deletes"]["DONE"], 40, "{last}");
    assert!(buckets[0]["last_walk_ns"].as_i64().unwrap() > 0, "{last}");
    assert_eq!(count_objects(&cluster().s3_client(), &b).await, 0);
    assert_eq!(serve.status().await["state"], "idle");

    let metrics = http::get_async(serve.http, "/metrics")
        .await
        .unwrap()
        .text();
    let line = format!(
        "SeaweedFS_s3_lifecycle_dispatch_total{{bucket=\"{b}\",kind=\"expiration_days\",outcome=\"DONE\"}} 40"
    );
    assert!(
        metrics.lines().any(|l| l == line),
        "missing `{line}` in:\n{metrics}"
    );
    assert!(
        metrics.contains("s3_lifecycled_pass_total{outcome=\"completed\"} 1"),
        "{metrics}"
    );
    // The bucket's first pass: every shard walked it from the start.
    assert!(
        metrics.contains("s3_lifecycled_recoveries_total{reason=\"cold_start\"} 16"),
        "{metrics}"
    );
    // 40 deletes waited on the limiter.
    assert!(
        metrics.contains("SeaweedFS_s3_lifecycle_dispatch_limiter_wait_seconds_count 40"),
        "{metrics}"
    );
    // Cursor gauges are set after the saves.
    let cursor_lines = metrics
        .lines()
        .filter(|l| l.starts_with("SeaweedFS_s3_lifecycle_cursor_min_ts_ns{"))
        .count();
    assert_eq!(cursor_lines, 16, "{metrics}");
}

/// The status page as headless Chromium renders it (DOM after load), non-breaking spaces as
/// plain ones.
fn chromium_dom(url: &str) -> String {
    http::chromium_dom(url)
        .replace("&nbsp;", " ")
        .replace('\u{a0}', " ")
}

/// The text between `start` and the next `end` after it.
fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
    let i = s
        .find(start)
        .unwrap_or_else(|| panic!("`{start}` not on the page:\n{s}"));
    let rest = &s[i + start.len()..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

#[tokio::test(flavor = "multi_thread")]
async fn status_page_in_chromium_shows_the_last_run() {
    let (b, scope) = bucket_with("svc-page", 7).await;
    let serve = Serve::start(&scope, &[]).await;
    let (id, _) = serve.trigger(&["--now", &later()]).await;
    serve.wait_last(&id, Duration::from_secs(60)).await;

    let dom = chromium_dom(&format!("http://{}/", serve.http));
    assert!(dom.contains("<strong id=\"state\">idle</strong>"), "{dom}");
    let last = between(&dom, "<h2>Last pass", "</p>");
    assert!(last.contains(&id), "last pass id on the page: {last}");
    assert!(last.contains("completed"), "{last}");

    // The bucket's "Last run" card: outcome and DONE count.
    let card = between(&dom, &format!("<h3>{b}</h3>"), "</div>");
    assert!(
        card.contains("<dt>outcome</dt><dd class=\"completed\">completed</dd>"),
        "{card}"
    );
    assert!(card.contains("<dt>  DONE</dt><dd>7</dd>"), "{card}");
    assert!(card.contains("<dt>deletes issued</dt><dd>7</dd>"), "{card}");

    // The shard table of the last pass: 16 rows, DONE summing to 7.
    let table = between(&dom, "<h3>Shards</h3>", "</table>");
    let body = between(table, "<tbody>", "</tbody>");
    let rows: Vec<&str> = body.split("<tr>").skip(1).collect();
    assert_eq!(rows.len(), 16, "{table}");
    let done: u64 = rows
        .iter()
        .map(|r| {
            let cells: Vec<&str> = r
                .split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    &c[..c.find("</td>").unwrap()]
                })
                .collect();
            // shard, cursor lag, last walk, halt reason, restarts, events, DONE…
            cells[6].parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(done, 7, "{table}");
}

#[tokio::test(flavor = "multi_thread")]
async fn span_tree_of_real_passes_reaches_an_otlp_receiver() {
    let collector = Collector::start().await;
    let (b, scope) = bucket_with("svc-trace", 3).await;
    let endpoint = collector.endpoint();
    let mut serve = Serve::start(
        &scope,
        &[
            ("S3_LIFECYCLED__TELEMETRY__OTLP_ENDPOINT", endpoint.as_str()),
            (
                "S3_LIFECYCLED__TELEMETRY__LOG_FILTER",
                "info,s3_lifecycled=debug",
            ),
        ],
    )
    .await;
    // Pass 1: cold cursor, the recovery walk deletes the 3 objects (due at
    // the trigger's `now`, a minute ahead with the 10 s day).
    let (walk_id, _) = serve.trigger(&["--now", &later()]).await;
    let last = serve.wait_last(&walk_id, Duration::from_secs(60)).await;
    assert_eq!(last["buckets"][0]["deletes"]["DONE"], 3, "{last}");
    // Pass 2: new objects, written after pass 1, are found by the meta-log
    // replay (a walk run at a future `now` vouches only for what existed
    // when it ran).
    let c = cluster();
    c.put_objects_bulk(&b, &keys("n/", 2), b"y").await.unwrap();
    let (replay_id, _) = serve.trigger(&["--now", &later()]).await;
    let last = serve.wait_last(&replay_id, Duration::from_secs(60)).await;
    assert_eq!(last["buckets"][0]["deletes"]["DONE"], 2, "{last}");
    // The batch processor exports on its own schedule (every few seconds).
    // Regression: long-lived shard actors held each pass's span open, so a
    // pass's trace left the process only at the next pass or at shutdown.
    let has_pass = |id: &str| {
        collector
            .spans()
            .iter()
            .any(|s| s.name == "pass" && attr(s, "run_id").as_deref() == Some(id))
    };
    eventually(
        Duration::from_secs(30),
        Duration::from_millis(500),
        async || {
            if has_pass(&walk_id) && has_pass(&replay_id) {
                Ok(())
            } else {
                Err("pass traces must be exported while the service keeps running".to_string())
            }
        },
    )
    .await;
    // SIGTERM flushes the exporter on the way out.
    let (code, _) = serve.stop_with("TERM", Duration::from_secs(40)).await;
    assert_eq!(code, 0, "{}", serve.log_text());
    let spans = collector.spans();
    collector.stop().await;

    let by_id: HashMap<Vec<u8>, &OtlpSpan> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let parent = |s: &OtlpSpan| by_id.get(&s.parent_span_id).copied();
    let pass_of = |id: &str| {
        spans
            .iter()
            .find(|s| s.name == "pass" && attr(s, "run_id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no pass span for {id}; got {} spans", spans.len()))
    };
    for (id, via, keys) in [(&walk_id, "walk", 3usize), (&replay_id, "replay", 2)] {
        let pass = pass_of(id);
        assert_eq!(attr(pass, "outcome").as_deref(), Some("completed"));
        let shards: Vec<&OtlpSpan> = spans
            .iter()
            .filter(|s| {
                s.name == "shard" && parent(s).map(|p| p.span_id == pass.span_id) == Some(true)
            })
            .collect();
        assert_eq!(shards.len(), 16, "pass {id}: shard spans under the pass");
        let deletes: Vec<&OtlpSpan> = spans
            .iter()
            .filter(|d| {
                d.name == "delete"
                    && d.trace_id == pass.trace_id
                    && parent(d).is_some_and(|p| {
                        p.name == via
                            && parent(p).is_some_and(|sh| {
                                sh.name == "shard"
                                    && parent(sh).map(|x| x.span_id == pass.span_id) == Some(true)
                            })
                    })
            })
            .collect();
        assert_eq!(
            deletes.len(),
            keys,
            "pass {id}: delete spans under {via} under shard under pass; names: {:?}",
            spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
        );
        for d in deletes {
            assert_eq!(attr(d, "bucket").as_deref(), Some(b.as_str()));
            assert!(attr(d, "key").is_some_and(|k| k.starts_with("o/") || k.starts_with("n/")));
            let rh = attr(d, "rule_hash").unwrap();
            assert!(
                rh.len() == 16 && rh.chars().all(|c| c.is_ascii_hexdigit()),
                "{rh}"
            );
            assert_eq!(attr(d, "kind").as_deref(), Some("expiration_days"));
            assert_eq!(attr(d, "outcome").as_deref(), Some("DONE"));
            let p = parent(d).unwrap();
            if via == "walk" {
                assert_eq!(attr(p, "bucket").as_deref(), Some(b.as_str()));
            }
        }
    }
}

/// `TriggerRun(now = far future)` from anyone who reaches the admin port would delete
/// everything any rule will ever delete. `serve` refuses it (FAILED_PRECONDITION, naming the
/// setting) unless it is a dry run or `service.allow_future_now` is on.
#[tokio::test(flavor = "multi_thread")]
async fn trigger_with_now_far_in_the_future_deletes_nothing_unless_opted_in() {
    let (b, scope) = bucket_with("svc-future", 5).await;
    let s3 = cluster().s3_client();
    let far = rfc3339(now_ns() + 365 * DAY_NS);

    let serve = Serve::start(&scope, &[]).await;
    let out = serve.cli(&["trigger", "--now", &far]).await;
    assert_eq!(out.code, 1, "refused:\n{}", out.describe());
    assert!(
        out.stderr.contains("service.allow_future_now") && out.stderr.contains("--dry-run"),
        "the refusal names the setting and the dry run:\n{}",
        out.describe()
    );
    assert!(
        out.stderr.to_lowercase().contains("precondition")
            || out.stderr.contains("FailedPrecondition"),
        "FAILED_PRECONDITION:\n{}",
        out.describe()
    );
    assert_eq!(serve.last().await, serde_json::Value::Null, "no pass ran");
    assert_eq!(count_objects(&s3, &b).await, 5, "nothing deleted");

    // A dry run at the same `now` is a preview: allowed, deletes nothing.
    let (id, _) = serve.trigger(&["--now", &far, "--dry-run"]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(last["outcome"], "completed", "{last}");
    assert_eq!(last["buckets"][0]["deletes"]["DRY_RUN"], 5, "{last}");
    assert_eq!(count_objects(&s3, &b).await, 5, "a dry run deletes nothing");
    drop(serve);

    // A test cluster that opted in: the pass runs at that `now` and deletes.
    let serve = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__SERVICE__ALLOW_FUTURE_NOW", "true")],
    )
    .await;
    let (id, _) = serve.trigger(&["--now", &far]).await;
    let last = serve.wait_last(&id, Duration::from_secs(60)).await;
    assert_eq!(last["outcome"], "completed", "{last}");
    assert_eq!(
        count_objects(&s3, &b).await,
        0,
        "opted in: the pass deleted"
    );
}

/// `run-once --now` far ahead (a preview or a test) says so in one loud line on stderr, and
/// only one.
#[tokio::test(flavor = "multi_thread")]
async fn run_once_with_now_in_the_future_warns_once_on_stderr() {
    let (_b, scope) = bucket_with("svc-future-ro", 1).await;
    let c = cluster();
    let p = run_once(c, &scope, Some(now_ns() + 40 * DAY_NS), &["--dry-run"], &[]).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    let warnings: Vec<&str> = p.stderr.lines().filter(|l| l.contains("WARNING")).collect();
    assert_eq!(warnings.len(), 1, "{}", p.describe());
    assert!(
        warnings[0].starts_with("WARNING: --now") && warnings[0].contains("in the future"),
        "{}",
        p.describe()
    );
    // A `now` within the tolerance: no warning.
    let p = run_once(c, &scope, Some(now_ns() + 60 * SEC_NS), &["--dry-run"], &[]).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert!(!p.stderr.contains("WARNING"), "{}", p.describe());
}

/// A token file in `dir`.
fn token_file(dir: &TmpDir, token: &str) -> String {
    let p = dir.path().join("admin.token");
    std::fs::write(&p, format!("{token}\n")).unwrap();
    p.display().to_string()
}

/// With `service.admin_token_file` set, the admin API refuses a call without the token and one
/// with a wrong token (each with its own message, exit 2), accepts the right one; the status page
/// and `/status.json` need it too, while `/metrics`, `/health` and `/ready` stay open.
#[tokio::test(flavor = "multi_thread")]
async fn admin_api_refuses_a_missing_and_a_wrong_token() {
    let (_b, scope) = bucket_with("svc-auth", 1).await;
    let dir = TmpDir::new("admin-token");
    let good = token_file(&dir, "0123456789abcdef-good-token");
    let wrong_dir = TmpDir::new("admin-token-wrong");
    let wrong = token_file(&wrong_dir, "0123456789abcdef-bad-token");
    let serve = Serve::start(
        &scope,
        &[("S3_LIFECYCLED__SERVICE__ADMIN_TOKEN_FILE", &good)],
    )
    .await;

    let missing = serve.cli(&["status", "--json"]).await;
    assert_eq!(missing.code, 2, "{}", missing.describe());
    assert!(
        missing.stderr.contains("Unauthenticated"),
        "{}",
        missing.describe()
    );
    assert!(
        missing.stderr.contains("missing bearer token"),
        "{}",
        missing.describe()
    );

    let bad = serve
        .cli(&["status", "--json", "--admin-token-file", &wrong])
        .await;
    assert_eq!(bad.code, 2, "{}", bad.describe());
    assert!(
        bad.stderr.contains("wrong bearer token"),
        "{}",
        bad.describe()
    );
    let bad_trigger = serve.cli(&["trigger", "--admin-token-file", &wrong]).await;
    assert_eq!(bad_trigger.code, 2, "{}", bad_trigger.describe());
    assert!(
        serve.log_text().matches("pass starting").count() == 0,
        "a refused trigger must not start a pass: {}",
        serve.log_text()
    );

    let ok = serve
        .cli(&["status", "--json", "--admin-token-file", &good])
        .await;
    assert_eq!(ok.code, 0, "{}", ok.describe());

    let bearer = format!("Bearer {}", "0123456789abcdef-good-token");
    for path in ["/", "/status.json"] {
        let r = common::http::get(serve.http, path, &[]).unwrap();
        assert_eq!(r.status, 401, "{path} without a token: {}", r.text());
        assert!(r.text().contains("missing bearer token"), "{}", r.text());
        let r = common::http::get(
            serve.http,
            path,
            &[("Authorization", "Bearer 0123456789abcdef-bad-token")],
        )
        .unwrap();
        assert_eq!(r.status, 401, "{path} with a wrong token");
        let r = common::http::get(serve.http, path, &[("Authorization", &bearer)]).unwrap();
        assert_eq!(r.status, 200, "{path} with the token");
    }
    for path in ["/metrics", "/health", "/ready"] {
        let r = common::http::get(serve.http, path, &[]).unwrap();
        assert_eq!(r.status, 200, "{path} stays open");
    }
}

/// Binding the admin API or the HTTP side beyond loopback without `service.admin_token_file`
/// is a configuration error (exit 2) naming the key, before anything listens or dials.
#[tokio::test]
async fn non_loopback_bind_without_auth_exits_2() {
    for (key, other) in [
        (
            "S3_LIFECYCLED__SERVICE__ADMIN_LISTEN",
            "S3_LIFECYCLED__SERVICE__HTTP_LISTEN",
        ),
        (
            "S3_LIFECYCLED__SERVICE__HTTP_LISTEN",
            "S3_LIFECYCLED__SERVICE__ADMIN_LISTEN",
        ),
    ] {
        let open = format!("0.0.0.0:{}", free_port());
        let local = format!("127.0.0.1:{}", free_port());
        let p = run_raw(
            &[
                "serve",
                "--filer",
                "127.0.0.1:1",
                "--s3-grpc",
                "127.0.0.1:1",
            ],
            &[(key, open.as_str()), (other, local.as_str())],
        )
        .await;
        assert_eq!(p.code, 2, "{}", p.describe());
        let name = key
            .trim_start_matches("S3_LIFECYCLED__")
            .to_lowercase()
            .replace("__", ".");
        assert!(p.stderr.contains(&name), "names {name}:\n{}", p.describe());
        assert!(
            p.stderr.contains("service.admin_token_file"),
            "{}",
            p.describe()
        );
    }
    // A token file that cannot be read is exit 2 as well, naming the file.
    let p = run_raw(
        &[
            "serve",
            "--filer",
            "127.0.0.1:1",
            "--s3-grpc",
            "127.0.0.1:1",
        ],
        &[(
            "S3_LIFECYCLED__SERVICE__ADMIN_TOKEN_FILE",
            "/nonexistent/admin.token",
        )],
    )
    .await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("/nonexistent/admin.token"),
        "{}",
        p.describe()
    );
}
