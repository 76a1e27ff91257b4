//! The meta-log file format and its parser: records of a 4-byte length and
//! a `LogEntry` (docs/meta-log.md#log-file-format), read one at a time from
//! fetched bytes. Pure code: no I/O.

use bytes::Bytes;
use prost::Message;

use crate::engine::Nanos;
use crate::pb::filer_pb::{LogEntry, LogFileChunkRef, SubscribeMetadataResponse};

/// The largest record we accept. A length prefix above it is corruption, not
/// a record: the filer flushes its 8 MB memory buffer as one chunk, so no
/// single event comes near it (docs/meta-log.md#direct-log-file-reads).
pub const MAX_RECORD_BYTES: u32 = 64 << 20;

/// One record of a log file: the `LogEntry`'s timestamp and its event.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// `LogEntry.ts_ns`.
    pub ts_ns: Nanos,
    /// Byte offset of the record's length prefix in the file.
    pub offset: usize,
    /// `LogEntry.data`, decoded.
    pub event: SubscribeMetadataResponse,
}

/// Why a direct read failed. Every variant means events may be missing: the
/// caller must not treat the refs as read.
#[derive(Debug, thiserror::Error)]
pub enum LogFileError {
    /// The file ends inside a record.
    #[error(
        "meta-log file {file}: truncated record at byte {offset}: its {what} needs {need} bytes, {have} left; the file was cut short (read it again, or fall back to a plain SubscribeMetadata)"
    )]
    Truncated {
        /// Which file (filer id and start).
        file: String,
        /// Offset of the record's length prefix.
        offset: usize,
        /// `length prefix` or `body`.
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A length prefix no real record has.
    #[error(
        "meta-log file {file}: corrupt length {size} at byte {offset} (limit {MAX_RECORD_BYTES}); the file is damaged (fall back to a plain SubscribeMetadata)"
    )]
    CorruptLength {
        file: String,
        offset: usize,
        size: u32,
    },
    /// A record's bytes are not a `LogEntry`, or its data not an event.
    #[error("meta-log file {file}: record at byte {offset} is not a valid {what}: {message}")]
    Decode {
        file: String,
        /// Offset of the record's length prefix.
        offset: usize,
        /// `LogEntry` or `SubscribeMetadataResponse`.
        what: &'static str,
        message: String,
    },
    /// A chunk this reader cannot turn into plain bytes.
    #[error("meta-log file {file}: chunk {fid} {reason}")]
    UnsupportedChunk {
        file: String,
        fid: String,
        /// What it needs that we do not do.
        reason: String,
    },
    /// The chunks do not tile the file (a hole or an overlap).
    #[error(
        "meta-log file {file}: chunk {fid} starts at byte {offset}, expected {expected}; the chunk list has a hole or an overlap"
    )]
    ChunkLayout {
        file: String,
        fid: String,
        offset: i64,
        /// The end of the chunks before it.
        expected: u64,
    },
    /// `LookupVolume` failed or found no server.
    #[error("meta-log file {file}: volume {volume} of chunk {fid}: {message}")]
    Lookup {
        file: String,
        fid: String,
        volume: String,
        message: String,
    },
    /// No volume server returned the chunk.
    #[error("meta-log file {file}: reading chunk {fid} failed: {message}")]
    Fetch {
        file: String,
        fid: String,
        /// Every location tried and its answer.
        message: String,
    },
}

/// A human name of one ref, for messages: `filer <id> file <file_ts_ns>`.
pub fn ref_name(r: &LogFileChunkRef) -> String {
    format!("filer {} file_ts_ns {}", r.filer_id, r.file_ts_ns)
}

/// One log file read a record at a time: a sequence of records, each a
/// 4-byte big-endian length then that many bytes of `LogEntry`, whose `data`
/// is one marshalled `SubscribeMetadataResponse`
/// (docs/meta-log.md#log-file-format). The fetched bytes stay as they are and
/// each record is decoded when it is taken, so a file being read costs its
/// size, not its decoded events (about three times as much: a minute's file
/// held 100,000 events in 33 MB).
#[derive(Debug, Clone)]
pub struct LogFileRecords {
    file: String,
    bytes: Bytes,
    offset: usize,
    /// Where `bytes` start in the file (a chunk's offset), for messages.
    base: usize,
}

impl LogFileRecords {
    /// The records of `bytes`; `file` names the file in errors.
    pub fn new(file: impl Into<String>, bytes: impl Into<Bytes>) -> LogFileRecords {
        LogFileRecords::at(file, bytes, 0)
    }

    /// The records of one chunk of a file, which starts at byte `base` of
    /// it. A flush writes whole records as one chunk, so a chunk holds whole
    /// records (docs/meta-log.md#log-file-format); offsets in records and
    /// errors are the file's.
    pub fn at(file: impl Into<String>, bytes: impl Into<Bytes>, base: usize) -> LogFileRecords {
        LogFileRecords {
            file: file.into(),
            bytes: bytes.into(),
            offset: 0,
            base,
        }
    }

    /// The next record, `None` at the end of the file. After an error the
    /// same error comes again: the rest of the file cannot be trusted.
    pub fn next_record(&mut self) -> Result<Option<LogRecord>, LogFileError> {
        let (file, bytes, local) = (&self.file, &self.bytes, self.offset);
        if local >= bytes.len() {
            return Ok(None);
        }
        let rest = &bytes[local..];
        let offset = self.base + local;
        let Some(prefix) = rest.first_chunk::<4>() else {
            return Err(LogFileError::Truncated {
                file: file.clone(),
                offset,
                what: "length prefix",
                need: 4,
                have: rest.len(),
            });
        };
        let size = u32::from_be_bytes(*prefix);
        if size > MAX_RECORD_BYTES {
            return Err(LogFileError::CorruptLength {
                file: file.clone(),
                offset,
                size,
            });
        }
        let body = &rest[4..];
        let Some(body) = body.get(..size as usize) else {
            return Err(LogFileError::Truncated {
                file: file.clone(),
                offset,
                what: "body",
                need: size as usize,
                have: body.len(),
            });
        };
        let decode = |what: &'static str, e: prost::DecodeError| LogFileError::Decode {
            file: file.clone(),
            offset,
            what,
            message: e.to_string(),
        };
        // A slice of the chunk: `data` shares its bytes instead of copying them.
        let at = local + 4;
        let entry = LogEntry::decode(bytes.slice(at..at + body.len()))
            .map_err(|e| decode("LogEntry", e))?;
        let event = SubscribeMetadataResponse::decode(entry.data)
            .map_err(|e| decode("SubscribeMetadataResponse", e))?;
        self.offset = local + 4 + size as usize;
        Ok(Some(LogRecord {
            ts_ns: entry.ts_ns,
            offset,
            event,
        }))
    }
}

/// Every record of one log file ([`LogFileRecords`]); `file` names the file
/// in errors. An empty file has no records.
pub fn parse_log_file(file: &str, bytes: &[u8]) -> Result<Vec<LogRecord>, LogFileError> {
    let mut records = LogFileRecords::new(file, Bytes::copy_from_slice(bytes));
    std::iter::from_fn(|| records.next_record().transpose()).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pb::filer_pb::{Entry, EventNotification};

    pub(crate) fn event(ts: Nanos, dir: &str, name: &str) -> SubscribeMetadataResponse {
        SubscribeMetadataResponse {
            directory: dir.into(),
            ts_ns: ts,
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(Entry {
                    name: name.into(),
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn record(ts: Nanos, dir: &str, name: &str) -> Vec<u8> {
        record_at(ts, ts, dir, name)
    }

    /// One record whose `LogEntry.ts_ns` is `ts` and whose event's is `ev`.
    pub(crate) fn record_at(ts: Nanos, ev: Nanos, dir: &str, name: &str) -> Vec<u8> {
        let body = LogEntry {
            ts_ns: ts,
            data: event(ev, dir, name).encode_to_vec().into(),
            ..Default::default()
        }
        .encode_to_vec();
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    fn file() -> Vec<u8> {
        [
            record(10, "/buckets/b", "k1"),
            record(20, "/buckets/b/d", "k2"),
            record(30, "/other", "x"),
        ]
        .concat()
    }

    #[test]
    fn parses_every_record_in_order_with_offsets() {
        let bytes = file();
        let recs = parse_log_file("f", &bytes).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.ts_ns).collect::<Vec<_>>(),
            [10, 20, 30]
        );
        assert_eq!(recs[0].offset, 0);
        assert_eq!(recs[1].offset, record(10, "/buckets/b", "k1").len());
        assert_eq!(recs[1].event, event(20, "/buckets/b/d", "k2"));
    }

    #[test]
    fn empty_file_has_no_records() {
        assert_eq!(parse_log_file("f", &[]).unwrap(), Vec::new());
    }

    #[test]
    fn truncated_body_names_file_and_offset() {
        let bytes = file();
        let cut = &bytes[..bytes.len() - 3];
        let second_end =
            record(10, "/buckets/b", "k1").len() + record(20, "/buckets/b/d", "k2").len();
        let err = parse_log_file("filer x file_ts_ns 7", cut).unwrap_err();
        assert!(
            matches!(err, LogFileError::Truncated { offset, what: "body", .. } if offset == second_end),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("filer x file_ts_ns 7") && msg.contains(&format!("byte {second_end}")),
            "{msg}"
        );
    }

    #[test]
    fn truncated_length_prefix_is_an_error() {
        let mut bytes = file();
        bytes.extend([0, 0]);
        let err = parse_log_file("f", &bytes).unwrap_err();
        assert!(
            matches!(err, LogFileError::Truncated { what: "length prefix", need: 4, have: 2, offset, .. } if offset == file().len()),
            "{err:?}"
        );
    }

    #[test]
    fn corrupt_length_is_an_error_not_an_allocation() {
        let mut bytes = record(10, "/buckets/b", "k1");
        bytes.extend(u32::MAX.to_be_bytes());
        bytes.extend([1, 2, 3]);
        let err = parse_log_file("f", &bytes).unwrap_err();
        assert!(
            matches!(err, LogFileError::CorruptLength { size: u32::MAX, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("corrupt length"), "{err}");
    }

    #[test]
    fn garbage_body_is_a_decode_error() {
        // A length that fits but a body that is not protobuf (field 0 is invalid).
        let bytes = [0u8, 0, 0, 2, 0x00, 0x00];
        let err = parse_log_file("f", &bytes).unwrap_err();
        assert!(
            matches!(
                err,
                LogFileError::Decode {
                    offset: 0,
                    what: "LogEntry",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
