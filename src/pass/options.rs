//! What a pass is asked to do ([`PassOptions`]) and how it is asked to stop
//! early ([`StopSignal`]): the one request `run-once`, `serve` and `worker`
//! all build.

use tokio::sync::watch;

use crate::config::Settings;
use crate::engine::Nanos;

/// What a pass is asked to do.
#[derive(Debug, Clone)]
pub struct PassOptions {
    /// The pass's `now` (ns).
    pub now: Nanos,
    pub shards: Vec<u8>,
    /// Decide and report, delete nothing, save nothing.
    pub dry_run: bool,
    /// Settings (pass.buckets, rates, windows, time…).
    pub settings: Settings,
    /// The pass id (logs, the `pass` span, status page, admin API).
    pub run_id: String,
    /// Stops the pass early (shutdown): dispatching stops, in-flight deletes
    /// drain, cursors are saved and the pass is reported `truncated`.
    pub stop: StopSignal,
}

/// A stop request for a running pass (`serve` sets it on SIGTERM/SIGINT).
/// The default never fires.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Option<watch::Receiver<Option<String>>>);

/// A signal fired by whoever holds the sender (the pass's own stop flag).
impl From<watch::Receiver<Option<String>>> for StopSignal {
    fn from(rx: watch::Receiver<Option<String>>) -> StopSignal {
        StopSignal(Some(rx))
    }
}

impl StopSignal {
    /// A signal and the sender that fires it with a reason.
    pub fn new() -> (watch::Sender<Option<String>>, StopSignal) {
        let (tx, rx) = watch::channel(None);
        (tx, StopSignal(Some(rx)))
    }

    /// The reason, when the stop was already requested.
    pub fn current(&self) -> Option<String> {
        self.0.as_ref().and_then(|rx| rx.borrow().clone())
    }

    /// Resolves with the reason once the stop is requested; never when the
    /// sender is gone without firing.
    pub async fn fired(&self) -> String {
        if let Some(rx) = &self.0 {
            let mut rx = rx.clone();
            if let Ok(v) = rx.wait_for(Option::is_some).await {
                return v.clone().unwrap_or_default();
            }
        }
        std::future::pending().await
    }
}
