//! Crash safety of `run-once` against the real cluster: a pass killed with
//! SIGKILL in the middle of its deletes loses nothing; the next run deletes
//! exactly what is left, touches nothing that is not due, and leaves cursor
//! files that parse. (An unreachable `--s3-grpc` is covered by
//! `tests/e2e_edge.rs::unreachable_s3_grpc_halts_then_next_pass_deletes`.)

mod common;
mod e2e_support;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use e2e_support::*;
use s3_lifecycled::seaweed::cursor::CursorStore;
use s3_lifecycled::seaweed::filer::FilerClient;

const DUE: usize = 2_000;
const KEEP: usize = 50;
/// Slow enough that the pass takes ~5 s, so it can be killed mid-way.
const RATE: &str = "400";
/// Deletes that must have happened before the kill (the pass is mid-way).
const KILL_AFTER: usize = 300;
/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_pass_loses_nothing_on_the_next_run() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-crash-kill").await.unwrap();
    let due = keys("due/", DUE);
    let keep = keys("keep/", KEEP);
    c.put_objects_bulk(&b, &due, b"x").await.unwrap();
    c.put_objects_bulk(&b, &keep, b"x").await.unwrap();
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>past</ID><Status>Enabled</Status><Filter><Prefix>due/</Prefix></Filter>\
             <Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let keep_set: BTreeSet<String> = keep.iter().cloned().collect();
    assert_eq!(list_keys(&s3, &b).await.len(), DUE + KEEP);
    let scope = Scope::new(&[&b]);

    // First run, killed with SIGKILL once some deletes went through.
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args([
        "run-once",
        "--filer",
        &c.filer_grpc_addr().to_string(),
        "--s3-grpc",
        &c.s3_grpc_addr().to_string(),
        "--buckets",
        &b,
        "--json",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("S3_LIFECYCLED__") {
            cmd.env_remove(k);
        }
    }
    cmd.env("S3_LIFECYCLED__CURSOR__DIR", &scope.cursor_dir)
        .env("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", RATE);
    let mut child = cmd.spawn().unwrap();
    let started = std::time::Instant::now();
    loop {
        let left = list_keys(&s3, &b).await;
        let gone = DUE + KEEP - left.len();
        if gone >= KILL_AFTER {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "run-once ended ({status}) before {KILL_AFTER} deletes ({gone} gone): cannot \
                 kill it mid-pass"
            );
        }
        assert!(started.elapsed() < GUARD, "no deletes after {GUARD:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.start_kill().unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "killed by a signal, not finished: stdout={}",
        String::from_utf8_lossy(&out.stdout)
    );
    let after_kill = list_keys(&s3, &b).await;
    assert!(
        keep_set.is_subset(&after_kill),
        "the killed pass deleted something not due"
    );
    let gone_before = DUE + KEEP - after_kill.len();
    assert!(
        (KILL_AFTER..DUE).contains(&gone_before),
        "killed mid-pass: {gone_before} of {DUE} gone"
    );

    // Second run: everything left is due and deleted, nothing else.
    let p = run_once(c, &scope, None, &[], &[]).await;
    let r = p.ok();
    assert_eq!(
        r.total("DONE") as usize + gone_before,
        DUE,
        "DONE + already gone = total:\n{}",
        p.describe()
    );
    assert_eq!(r.total("NOOP_RESOLVED"), 0, "{}", p.describe());
    assert_eq!(list_keys(&s3, &b).await, keep_set);

    // The cursor files of both runs parse (the killed one wrote none or whole ones).
    let filer = FilerClient::connect(&c.filer_grpc_addr().to_string())
        .await
        .unwrap();
    let store = CursorStore::new(filer, &scope.cursor_dir);
    for shard in 0..16u8 {
        let cursor = store
            .load(shard)
            .await
            .unwrap_or_else(|e| panic!("shard {shard}'s cursor does not parse: {e}"))
            .unwrap_or_else(|| panic!("shard {shard} has no cursor after a completed pass"));
        assert_eq!(cursor.shard_id, shard);
        assert!(cursor.buckets.contains_key(&b), "{cursor:?}");
    }

    // And a third run finds nothing left to do.
    let p = run_once(c, &scope, None, &[], &[]).await;
    let r = p.ok();
    assert_eq!(r.totals("matches"), 0, "{}", p.describe());
}
