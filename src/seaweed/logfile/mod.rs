//! Direct reads of the filer's persisted meta-log files: the parser of one
//! log file, the fetcher of a `LogFileChunkRef`'s chunks from the volume
//! servers, and [`read_refs`], which turns refs into the events a plain
//! `SubscribeMetadata` would have streamed (docs/meta-log.md#direct-log-file-reads).
//!
//! [`crate::seaweed::metalog::MetaLogReader`] uses [`RefsProtocol`] and
//! [`RefReader`] when `pass.direct_log_reads` is on.
//!
//! One concept a room, each depending only on the ones before it: `format`
//! (the file format and its parser, pure), `fetch` (chunks from the volume
//! servers), `refs` (refs merged into events, and the subscription that
//! sends them).

mod fetch;
mod format;
mod refs;

pub use fetch::{CHUNK_TIMEOUT, CONNECT_TIMEOUT, LogFileFetcher, VolumeAccess};
/// The meta-log event the format tests build, for the subscription tests.
#[cfg(test)]
pub(crate) use format::tests::event;
pub use format::{
    LogFileError, LogFileRecords, LogRecord, MAX_RECORD_BYTES, parse_log_file, ref_name,
};
pub use refs::{
    DirectReadError, DirectSummary, RefReader, RefsProtocol, Step, read_refs, read_window_direct,
};
