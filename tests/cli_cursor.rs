//! `s3-lifecycled cursor show|reset|import-go` against a real cluster, as an
//! operator moving over from the Go worker would use them. One test in its own
//! binary: import decisions depend on every bucket with rules in the cluster.

mod common;

use base64::Engine;
use s3_lifecycled::engine::{BucketConfig, Snapshot, TimeConfig, Versioning, replay_content_hash};
use s3_lifecycled::pass::prepare::GO_WORKER;
use s3_lifecycled::seaweed::filer::FilerClient;
use serde_json::json;
use std::time::Duration;

use common::{
    Scope, Serve, assert_quiet_on_closed_pipe, days_rule, http, lifecycle, list_keys, now_ns, plus,
    put, rfc3339, run_into_closed_pipe, run_once, run_raw, set, write_inline_file,
};

async fn write_go_cursor(c: &FilerClient, shard: u8, ts: i64, rsh: [u8; 32]) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let json = format!(
        "{{\n  \"version\": 1,\n  \"shard_id\": {shard},\n  \"ts_ns\": {ts},\n  \
         \"rule_set_hash\": \"{}\",\n  \"promoted_hash\": \"{}\"\n}}\n",
        b64.encode(rsh),
        b64.encode([0u8; 32])
    );
    let name = format!("shard-{shard:02}.json");
    write_inline_file(c, "/etc/s3/lifecycle/daily-cursors", &name, json.as_bytes()).await;
}

fn args(c: &common::Cluster, v: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    a.extend(["--filer".to_string(), c.filer_grpc_addr().to_string()]);
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn go_cursors_import_then_show_and_reset() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("cur").await.unwrap();
    let xml = lifecycle(&days_rule("a", "a/", 30));
    c.put_lifecycle_xml(&b, &xml).await.unwrap();
    for k in ["a/old1", "a/old2"] {
        put(&s3, &b, k, b"x", None).await;
    }
    // The Go worker's position: after the old objects, before the new ones.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let go_ts = now_ns();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    for k in ["a/new1", "a/new2"] {
        put(&s3, &b, k, b"x", None).await;
    }
    // Go's hash for exactly this cluster's rules (only this bucket has any).
    let rules = s3_lifecycled::lifecycle::parse(&xml).unwrap().flatten();
    let snap = Snapshot::compile(
        vec![BucketConfig {
            name: b.clone(),
            versioning: Versioning::Unversioned,
            object_lock: false,
            rules,
        }],
        TimeConfig::default(),
    );
    let fc = c.filer().await;
    for shard in 0..16u8 {
        write_go_cursor(&fc, shard, go_ts, replay_content_hash(&snap)).await;
    }
    let scope = Scope::new(&[&b]);
    let env = [("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];

    let imp = run_raw(&args(c, &["cursor", "import-go"]), &env).await;
    assert_eq!(imp.code, 0, "{}", imp.describe());
    assert_eq!(
        imp.stdout.matches(" imported at ts_ns=").count(),
        16,
        "{}",
        imp.describe()
    );

    let show = run_raw(&args(c, &["cursor", "show", "--shards", "3"]), &env).await;
    assert_eq!(show.code, 0, "{}", show.describe());
    assert!(
        show.stdout.contains(&format!("\"{b}\"")),
        "{}",
        show.describe()
    );
    assert!(
        show.stdout.contains(&go_ts.to_string()),
        "{}",
        show.describe()
    );

    // `cursor show | head` panicked with exit 101 when head closed the pipe.
    let (status, err) = run_into_closed_pipe(&args(c, &["cursor", "show"]), &env).await;
    assert_quiet_on_closed_pipe("cursor show", status, &err);

    let again = run_raw(&args(c, &["cursor", "import-go", "--shards", "3"]), &env).await;
    assert!(
        again.stdout.contains("exists"),
        "never overwrites: {}",
        again.describe()
    );

    // Resumed from Go's position: no recovery walk, replay sees only the
    // writes after it. (The old objects stay because the seeded Go cursor
    // claims it already dealt with them — that is what proves the import.)
    let p = run_once(c, &scope, Some(plus(now_ns(), 31, 0)), &[], &[])
        .await
        .ok();
    assert!(p.recovery_reasons(&b).is_empty(), "{}", p.context());
    assert_eq!(
        list_keys(&s3, &b).await,
        set(&["a/old1", "a/old2"]),
        "{}",
        p.context()
    );
    // The import recorded the Go worker's files: nothing says it ran since.
    assert_eq!(
        p.v["go_worker"],
        json!({"since_last_pass": [], "recent": [], "last_write": null}),
        "{}",
        p.context()
    );

    // The operator forgot to stop the Go worker, and it ran again (here by
    // hand, as `weed shell` runs it): the next pass names it, every shard.
    // weed stamps the files' mtime in whole seconds: a Go pass in the same second as the
    // last look, that moves no `ts_ns`, cannot be told (docs/go-cursor.md#another-enforcer).
    let next_second = || tokio::time::sleep(Duration::from_millis(1100));
    next_second().await;
    let addr = c.s3_grpc_addr();
    c.weed_shell(&format!(
        "s3.lifecycle.run-shard -shards 0-15 -s3 {addr} -events 0 -runtime 60s"
    ))
    .await;
    let run = run_once(c, &scope, Some(plus(now_ns(), 31, 1)), &[], &[]).await;
    let p = run.ok();
    let all: Vec<u8> = (0..16).collect();
    assert_eq!(
        p.v["go_worker"]["since_last_pass"],
        json!(all),
        "{}",
        p.context()
    );
    assert!(run.stderr.contains(GO_WORKER), "{}", p.context());
    assert!(
        run.stderr.contains("s3_lifecycle/config"),
        "the fix is named: {}",
        p.context()
    );
    // Noted in the cursors: the pass after has nothing new to say.
    let run = run_once(c, &scope, Some(plus(now_ns(), 31, 2)), &[], &[]).await;
    let p = run.ok();
    assert_eq!(
        p.v["go_worker"]["since_last_pass"],
        json!([]),
        "{}",
        p.context()
    );
    assert!(!run.stderr.contains(GO_WORKER), "{}", p.context());

    // `serve` shows the same on its status page, in /status.json and /metrics, as of its last
    // pass: a pass that finds no Go pass since clears them.
    next_second().await;
    c.weed_shell(&format!(
        "s3.lifecycle.run-shard -shards 0-15 -s3 {addr} -events 0 -runtime 60s"
    ))
    .await;
    {
        let serve = Serve::start(
            &scope,
            &[("S3_LIFECYCLED__SERVICE__ALLOW_FUTURE_NOW", "true")],
        )
        .await;
        let srv = &serve;
        let seen = async |now: i64| {
            let (id, _) = srv.trigger(&["--now", &rfc3339(now)]).await;
            srv.wait_last(&id, Duration::from_secs(60)).await;
            let status = http::get_async(srv.http, "/status.json")
                .await
                .unwrap()
                .text();
            let status: serde_json::Value = serde_json::from_str(&status).unwrap();
            let page = http::get_async(srv.http, "/").await.unwrap().text();
            let metrics = http::get_async(srv.http, "/metrics").await.unwrap().text();
            let gauge = metrics
                .lines()
                .find_map(|l| l.strip_prefix("s3_lifecycled_go_worker_shards "))
                .map(str::to_string);
            (
                status["go_worker"].clone(),
                page.contains("Another lifecycle worker"),
                gauge,
            )
        };
        let (status, on_page, gauge) = seen(plus(now_ns(), 31, 3)).await;
        assert_eq!(status["shards"], json!(all), "{}", srv.log_text());
        // And `status`, through the admin API.
        assert_eq!(srv.status().await["go_worker"]["shards"], json!(all));
        assert!(on_page && gauge.as_deref() == Some("16"), "{gauge:?}");
        let (status, on_page, gauge) = seen(plus(now_ns(), 31, 4)).await;
        assert!(status.is_null(), "{status}");
        assert!(srv.status().await.get("go_worker").is_none());
        assert!(!on_page && gauge.as_deref() == Some("0"), "{gauge:?}");
    }

    let dry = run_raw(&args(c, &["cursor", "reset"]), &env).await;
    assert_eq!(dry.code, 0);
    assert_eq!(
        dry.stdout.matches("would delete").count(),
        16,
        "{}",
        dry.describe()
    );
    let show = run_raw(&args(c, &["cursor", "show", "--shards", "3"]), &env).await;
    assert!(
        !show.stdout.contains("cold"),
        "reset without --yes deletes nothing"
    );

    let reset = run_raw(&args(c, &["cursor", "reset", "--yes"]), &env).await;
    assert_eq!(reset.code, 0, "{}", reset.describe());
    let show = run_raw(&args(c, &["cursor", "show", "--shards", "3"]), &env).await;
    assert!(show.stdout.contains("cold"), "{}", show.describe());

    // A reset shard cold-starts: the recovery walk catches the old objects.
    let p = run_once(c, &scope, Some(plus(now_ns(), 32, 0)), &[], &[])
        .await
        .ok();
    assert!(
        p.recovery_reasons(&b).contains("cold_start"),
        "{}",
        p.context()
    );
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.context());
    // Cursors without a record of the Go files (as after an upgrade, or here a reset): files
    // the Go worker wrote seconds ago may mean it still runs.
    assert_eq!(p.v["go_worker"]["recent"], json!(all), "{}", p.context());
}
