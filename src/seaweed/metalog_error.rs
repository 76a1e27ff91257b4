//! Why a meta-log stream failed: every way a pass's read can end short
//! (docs/meta-log.md#subscription).

use std::time::Duration;

use crate::engine::Nanos;
use crate::seaweed::subscription::InvalidWindow;

/// Why a pass's stream failed. Every variant means the pass is incomplete: the
/// consumer must not advance a cursor past the last event it handled.
#[derive(Debug, thiserror::Error)]
pub enum MetaLogError {
    /// The parameters can never produce a valid subscription.
    #[error("meta-log subscription: {0}")]
    InvalidParams(String),
    /// The `SubscribeMetadata` call itself failed (filer unreachable, refused…).
    #[error("meta-log subscribe failed: {code:?}: {message}")]
    Subscribe { code: tonic::Code, message: String },
    /// The stream broke after it started (including a server-side Cancelled).
    #[error(
        "meta-log stream broke after {events_delivered} events (last ts {last_ts_ns}): {code:?}: {message}"
    )]
    Stream {
        code: tonic::Code,
        message: String,
        /// Events delivered before the break.
        events_delivered: u64,
        /// ts_ns of the last delivered event (0 if none).
        last_ts_ns: Nanos,
    },
    /// Nothing arrived from the filer for the configured receive timeout.
    #[error(
        "meta-log receive timeout: nothing (not even a keepalive) arrived for {0:?}; the filer may be stuck or the network partitioned"
    )]
    ReceiveTimeout(Duration),
    /// The filer sent log-file references, which this reader never asks for and
    /// cannot read; skipping them would silently lose events.
    #[error(
        "meta-log response at ts {0} carries log_file_refs, which this reader does not request and cannot read"
    )]
    UnexpectedLogFileRefs(Nanos),
    /// A log file the filer referred to could not be read from the volume
    /// servers or parsed (direct reads): its events may be missing.
    #[error("meta-log direct read failed: {0}")]
    LogFile(String),
    /// The reader task ended without reporting an end or an error (it panicked
    /// or was aborted).
    #[error("meta-log reader task ended without a result")]
    ReaderVanished,
}

impl From<InvalidWindow> for MetaLogError {
    fn from(e: InvalidWindow) -> Self {
        MetaLogError::InvalidParams(e.0)
    }
}
