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
