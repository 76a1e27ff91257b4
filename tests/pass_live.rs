//! The pass end to end against the loopback cluster, through the `run-once`
//! binary: walker (Expiration Date), cold-start recovery and steady replay
//! (Expiration Days with a 10 s day) and dry run. Throughput figures live in
//! `benches/live.rs`.

mod common;

use std::process::Command;

use common::{cluster, now_ns};

fn rfc3339(ns: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn date_xml() -> Vec<u8> {
    b"<LifecycleConfiguration><Rule><ID>past</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
<Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>"
        .to_vec()
}

fn days_xml() -> Vec<u8> {
    b"<LifecycleConfiguration><Rule><ID>d1</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>"
        .to_vec()
}

struct Run {
    code: i32,
    json: serde_json::Value,
    stderr: String,
}

fn run_once(bucket: &str, cursor_dir: &str, extra: &[&str]) -> Run {
    let c = cluster();
    let out = Command::new(env!("CARGO_BIN_EXE_s3-lifecycled"))
        .arg("run-once")
        .args(["--filer", &c.filer_grpc_addr().to_string()])
        .args(["--s3-grpc", &c.s3_grpc_addr().to_string()])
        .args(["--buckets", bucket, "--json"])
        .args(extra)
        .env("S3_LIFECYCLED__CURSOR__DIR", cursor_dir)
        .env("S3_LIFECYCLED__TIME__DAY", "10s")
        .env("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("run-once printed no JSON ({e}); stdout={stdout} stderr={stderr}")
    });
    Run {
        code: out.status.code().unwrap_or(-1),
        json,
        stderr,
    }
}

async fn count_objects(bucket: &str) -> usize {
    let s3 = cluster().s3_client();
    let mut n = 0;
    let mut token = None;
    loop {
        let r = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token)
            .send()
            .await
            .unwrap();
        n += r.contents().len();
        token = r.next_continuation_token().map(str::to_string);
        if token.is_none() {
            return n;
        }
    }
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:06}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn past_date_rule_deletes_everything_and_second_pass_finds_nothing() {
    let c = cluster();
    let b = c.new_bucket("pass-date").await.unwrap();
    c.put_lifecycle_xml(&b, &date_xml()).await.unwrap();
    c.put_objects_bulk(&b, &keys("o/", 40), b"x").await.unwrap();
    let dir = format!("/etc/s3/lifecycle/test-{b}");

    let dry = run_once(&b, &dir, &["--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(dry.json["totals"]["deletes"]["DRY_RUN"], 40);
    assert_eq!(count_objects(&b).await, 40, "dry run deleted nothing");

    let r = run_once(&b, &dir, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["outcome"], "completed");
    assert_eq!(r.json["totals"]["deletes"]["DONE"], 40, "{}", r.json);
    assert_eq!(r.json["shards"].as_array().unwrap().len(), 16);
    assert_eq!(count_objects(&b).await, 0);

    let again = run_once(&b, &dir, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.json["totals"]["matches"], 0, "{}", again.json);
    assert!(
        again.json["shards"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["recovery"].as_array().unwrap().is_empty()),
        "second pass must not recover: {}",
        again.json
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn days_rule_cold_start_walks_then_replay_deletes_later_objects_once() {
    let c = cluster();
    let b = c.new_bucket("pass-days").await.unwrap();
    c.put_lifecycle_xml(&b, &days_xml()).await.unwrap();
    c.put_objects_bulk(&b, &keys("old/", 10), b"x")
        .await
        .unwrap();
    let dir = format!("/etc/s3/lifecycle/test-{b}");
    // Not due yet at the real now (1 day = 10 s): a cold start records, deletes nothing.
    let r0 = run_once(&b, &dir, &["--shards", "0-15"]);
    assert_eq!(r0.code, 0, "{}", r0.stderr);
    assert_eq!(r0.json["totals"]["deletes"]["DONE"], 0, "{}", r0.json);
    let recovered: usize = r0.json["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["recovery"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        recovered, 16,
        "every shard cold-starts the bucket: {}",
        r0.json
    );

    c.put_objects_bulk(&b, &keys("new/", 10), b"x")
        .await
        .unwrap();
    // 60 s later everything is due; replay finds all 20 through the meta-log.
    let later = rfc3339(now_ns() + 60_000_000_000);
    let r1 = run_once(&b, &dir, &["--now", &later]);
    assert_eq!(r1.code, 0, "{}", r1.stderr);
    assert_eq!(r1.json["totals"]["deletes"]["DONE"], 20, "{}", r1.json);
    assert_eq!(count_objects(&b).await, 0);
    // Nothing is re-sent by a later pass.
    let r2 = run_once(&b, &dir, &["--now", &later]);
    assert_eq!(r2.code, 0, "{}", r2.stderr);
    let sent: u64 = r2.json["totals"]["deletes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sent, 0, "{}", r2.json);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_flags_exit_2_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_s3-lifecycled"))
        .args(["run-once", "--shards", "3-99"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shards"));
    let out = Command::new(env!("CARGO_BIN_EXE_s3-lifecycled"))
        .args(["run-once", "--now", "yesterday"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));
}
