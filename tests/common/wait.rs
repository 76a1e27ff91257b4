//! Waiting for something asynchronous (a process, a scheduled pass, a filer flush): poll with a
//! deadline instead of sleeping a fixed time.

use std::time::{Duration, Instant};

/// Calls `check` every `every` until it returns `Ok`, and returns that value. Panics after
/// `within` with the last `Err` (which should describe the state seen, for the failure message).
/// `within` is a hang guard, never a speed assertion.
pub async fn eventually<T>(
    within: Duration,
    every: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let started = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(why) if started.elapsed() >= within => {
                panic!("not within {within:?}: {why}")
            }
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

/// How many of `due` and of `keep` are still in `bucket` (listed through `s3`).
pub async fn remaining_of(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    due: &std::collections::BTreeSet<String>,
    keep: &std::collections::BTreeSet<String>,
) -> (usize, usize) {
    let left = super::list_keys(s3, bucket).await;
    (
        left.intersection(due).count(),
        left.intersection(keep).count(),
    )
}

/// Waits until `n` of the `due` keys are gone from `bucket` while `child` (a pass to be
/// interrupted) runs; panics if the child ends first, since the interruption would then not
/// be mid-pass. `guard` is a hang guard.
pub async fn wait_for_deletes_of(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    due: &std::collections::BTreeSet<String>,
    child: &mut tokio::process::Child,
    n: usize,
    guard: Duration,
) {
    let total = due.len();
    eventually(guard, Duration::from_millis(100), async || {
        let (due_left, _) = remaining_of(s3, bucket, due, &Default::default()).await;
        let gone = total - due_left;
        if gone >= n {
            return Ok(());
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run-once ended ({status}) before {n} deletes ({gone} gone): not mid-pass");
        }
        Err(format!("{gone} of {total} deleted"))
    })
    .await;
}
