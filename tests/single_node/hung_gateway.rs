//! Hung calls on the real cluster (docs/lifecycle-delete.md#deadlines): a TCP listener that
//! accepts connections and never answers stands in for the S3 gateway's gRPC address. With
//! `dispatch.call_timeout = 2s` and `dispatch.retry_attempts = 2`, a due delete halts its shard
//! within the deadline instead of wedging the pass, the cursor does not move past it, and `serve`
//! keeps running its schedule; a SIGTERM while a call hangs ends `serve` at
//! `service.shutdown_deadline`.

use crate::common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::*;

/// Accepts every connection and holds it open without reading or writing a byte.
fn hung_gateway() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    addr
}

/// Deadline settings of these tests: 2 s per attempt, 2 attempts.
const DEADLINES: [(&str, &str); 4] = [
    ("S3_LIFECYCLED__DISPATCH__CALL_TIMEOUT", "2s"),
    ("S3_LIFECYCLED__DISPATCH__RETRY_ATTEMPTS", "2"),
    ("S3_LIFECYCLED__TIME__DAY", "10s"),
    ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
];

async fn due_bucket(prefix: &str) -> (String, Scope) {
    let c = cluster();
    let b = c.new_bucket(prefix).await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("d1", "", 1)))
        .await
        .unwrap();
    put(&c.s3_client(), &b, "k", b"x", None).await;
    let scope = Scope::new(&[&b]);
    (b, scope)
}

#[tokio::test(flavor = "multi_thread")]
async fn hung_s3_gateway_halts_the_shard_within_the_deadline() {
    let c = cluster();
    let s3 = c.s3_client();
    let (b, scope) = due_bucket("hung-ro").await;
    let hung = hung_gateway().to_string();
    let now = now_ns() + 60 * SEC_NS;

    let t = Instant::now();
    let p = run_once_via(c, &scope, now, &hung, &DEADLINES).await;
    let took = t.elapsed();
    eprintln!("hung gateway: run-once exit {} after {took:?}", p.code);
    assert_eq!(p.code, 3, "a halted shard:\n{}", p.describe());
    // 2 attempts × 2 s + one backoff ≤ 200 ms, plus process start, bucket scan and listing.
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "halted after {took:?}, expected about 4.2 s:\n{}",
        p.describe()
    );
    let r = p.json();
    assert_eq!(r.v["outcome"], "halted", "{}", p.describe());
    let halted = r.halted_shards();
    assert_eq!(halted.len(), 1, "{}", p.describe());
    let reason = halted[0]["halt_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("RPC_ERROR") && reason.contains("dispatch.call_timeout"),
        "{reason}"
    );
    assert_eq!(r.total("RPC_ERROR"), 1, "{}", p.describe());
    assert!(exists(&s3, &b, "k").await, "nothing deleted");

    // The cursor did not move past the unanswered delete: the next pass against the real
    // gateway deletes the object.
    let p = run_once(c, &scope, Some(now + SEC_NS), &[], &DEADLINES).await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&s3, &b, "k").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_its_next_scheduled_pass_after_a_hung_gateway() {
    let (b, scope) = due_bucket("hung-serve").await;
    let hung = hung_gateway().to_string();
    let mut env: Vec<(&str, &str)> = DEADLINES.to_vec();
    env.extend([
        ("S3_LIFECYCLED__CLUSTER__S3_GRPC", hung.as_str()),
        // With the 10 s day: a scheduled pass at every multiple of 10 s.
        ("S3_LIFECYCLED__SERVICE__SCHEDULE", "00:00"),
    ]);
    let serve = Serve::start(&scope, &env).await;
    // A pass now, a minute ahead: its delete goes to the hung gateway.
    // Scheduled passes run every 10 s: the trigger must start a pass of its own.
    let id = serve
        .trigger_new(&["--now", &rfc3339(now_ns() + 60 * SEC_NS)])
        .await;
    let first = serve.wait_last(&id, Duration::from_secs(30)).await;
    assert_eq!(first["outcome"], "halted", "{first}");
    let finished = first["finish_ns"].as_i64().unwrap();

    // The service is not wedged: a scheduled pass starts after it and finishes.
    let next = eventually(
        Duration::from_secs(40),
        Duration::from_millis(250),
        async || {
            let last = serve.last().await;
            let started = last["start_ns"].as_i64().unwrap_or(0);
            if last["run_id"] != id.as_str() && started > finished {
                Ok(last)
            } else {
                Err(format!(
                    "no later pass yet; last={last}\n{}",
                    serve.log_text()
                ))
            }
        },
    )
    .await;
    assert!(
        next["outcome"] == "halted" || next["outcome"] == "completed",
        "{next}"
    );
    assert!(exists(&cluster().s3_client(), &b, "k").await);
}

/// SIGTERM while a delete hangs longer than `service.shutdown_deadline`: `serve` gives up at the
/// deadline instead of waiting the call out, exits 1, and says which shard it abandoned with how
/// many deletes in flight. That shard's cursor is not saved, so nothing is lost: the next pass,
/// against the real gateway, deletes the object. (This exit had no test of its own.)
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_past_the_shutdown_deadline_exits_1_naming_the_unfinished_shard() {
    let (b, scope) = due_bucket("hung-term").await;
    let hung = hung_gateway().to_string();
    let env = [
        ("S3_LIFECYCLED__CLUSTER__S3_GRPC", hung.as_str()),
        // The hung call outlasts the deadline by far.
        ("S3_LIFECYCLED__DISPATCH__CALL_TIMEOUT", "120s"),
        ("S3_LIFECYCLED__SERVICE__SHUTDOWN_DEADLINE", "2s"),
        ("S3_LIFECYCLED__SERVICE__SCHEDULE", "off"),
        ("S3_LIFECYCLED__TIME__DAY", "10s"),
        ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
    ];
    let mut serve = Serve::start(&scope, &env).await;
    let now = now_ns() + 60 * SEC_NS;
    let (id, _) = serve.trigger(&["--now", &rfc3339(now)]).await;
    // Until the delete is on the wire to the hung gateway.
    let shard = eventually(
        Duration::from_secs(30),
        Duration::from_millis(100),
        async || {
            let st = serve.status().await;
            let shards = st["current_pass"]["shards"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            shards
                .iter()
                .find(|s| s["in_flight"].as_u64().unwrap_or(0) >= 1)
                .and_then(|s| s["shard"].as_u64())
                .ok_or_else(|| format!("pass {id}: no delete in flight yet: {st}"))
        },
    )
    .await;
    let (code, took) = serve.stop_with("TERM", Duration::from_secs(30)).await;
    let log = serve.log_text();
    assert_eq!(code, 1, "past the deadline:\n{log}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "exit took {took:?} (deadline 2 s, hung call 120 s):\n{log}"
    );
    let said = log
        .lines()
        .find(|l| l.contains("abandoning unfinished shards"))
        .unwrap_or_else(|| panic!("no line names the abandoned shards:\n{log}"));
    assert!(
        said.contains(&format!("{shard:02}")) && said.contains("in_flight_deletes=1"),
        "the line must name shard {shard:02} and its one delete in flight: {said}"
    );
    assert!(exists(&cluster().s3_client(), &b, "k").await);

    let p = run_once(cluster(), &scope, Some(now + SEC_NS), &[], &DEADLINES).await;
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&cluster().s3_client(), &b, "k").await);
}
