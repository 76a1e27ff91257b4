//! Crash safety of `run-once` against the real cluster: a pass killed with
//! SIGKILL in the middle of its deletes loses nothing; the next run deletes
//! exactly what is left, touches nothing that is not due, and leaves cursor
//! files that parse. (An unreachable `--s3-grpc` is covered by
//! `tests/single_node/passes.rs::unreachable_s3_grpc_halts_then_next_pass_deletes`.)

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use s3_lifecycled::seaweed::cursor::CursorStore;

const DUE: usize = 2_000;
const KEEP: usize = 50;
/// Slow enough that the pass takes ~5 s, so it can be killed mid-way.
const RATE: &str = "400";
/// Deletes that must have happened before the kill (the pass is mid-way).
const KILL_AFTER: usize = 300;
/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_pass_loses_nothing_on_the_next_run() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-crash-kill").await.unwrap();
    let due = keys("due/", DUE);
    let keep = keys("keep/", KEEP);
    c.put_objects_bulk(&b, &due, b"x").await.unwrap();
    c.put_objects_bulk(&b, &keep, b"x").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&date_rule("past", "due/", PAST_DATE)))
        .await
        .unwrap();
    let keep_set: BTreeSet<String> = keep.iter().cloned().collect();
    assert_eq!(list_keys(&s3, &b).await.len(), DUE + KEEP);
    let scope = Scope::new(&[&b]);

    // First run, killed with SIGKILL once some deletes went through.
    let mut cmd = run_once_command(
        c,
        &scope,
        None,
        &[],
        &[("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", RATE)],
    );
    let mut child = cmd.spawn().unwrap();
    eventually(GUARD, Duration::from_millis(100), async || {
        let gone = DUE + KEEP - list_keys(&s3, &b).await.len();
        if gone >= KILL_AFTER {
            return Ok(());
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "run-once ended ({status}) before {KILL_AFTER} deletes ({gone} gone): cannot \
                 kill it mid-pass"
            );
        }
        Err(format!("{gone} of {DUE} deleted"))
    })
    .await;
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
    let store = CursorStore::new(c.filer().await, &scope.cursor_dir);
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
