//! Direct reads of the filer's persisted meta-log files: the parser of one
//! log file, the fetcher of a `LogFileChunkRef`'s chunks from the volume
//! servers, and [`read_refs`], which turns refs into the events a plain
//! `SubscribeMetadata` would have streamed (docs/meta-log.md#direct-log-file-reads).
//!
//! [`crate::seaweed::metalog::MetaLogReader`] uses [`RefsProtocol`] and
//! [`RefReader`] when `pass.direct_log_reads` is on.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use prost::Message;
use tonic::transport::Channel;

use crate::engine::Nanos;
use crate::engine::identity::head_fid;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{
    FileChunk, LogEntry, LogFileChunkRef, LookupVolumeRequest, SubscribeMetadataResponse,
};
use crate::seaweed::subscription::{
    self, Capabilities, EventFilter, InvalidWindow, SubscribeParams, Verdict,
};

/// The largest record we accept. A length prefix above it is corruption, not
/// a record: the filer flushes its 8 MB memory buffer as one chunk, so no
/// single event comes near it (docs/meta-log.md#direct-log-file-reads).
pub const MAX_RECORD_BYTES: u32 = 64 << 20;

/// How long a volume server may take to accept a connection: one that is
/// not reachable from here (an address only the cluster's own network
/// routes) must hand the read to the filer quickly, not after the kernel's
/// minutes of SYN retries (docs/meta-log.md#when-a-file-cannot-be-read).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long one chunk (at most a flush of the filer's 8 MB buffer) may
/// take to arrive once asked for.
pub const CHUNK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

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
        /// Bytes the record needs.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// A length prefix no real record has.
    #[error(
        "meta-log file {file}: corrupt length {size} at byte {offset} (limit {MAX_RECORD_BYTES}); the file is damaged (fall back to a plain SubscribeMetadata)"
    )]
    CorruptLength {
        /// Which file.
        file: String,
        /// Offset of the length prefix.
        offset: usize,
        /// The length it claims.
        size: u32,
    },
    /// A record's bytes are not a `LogEntry`, or its data not an event.
    #[error("meta-log file {file}: record at byte {offset} is not a valid {what}: {message}")]
    Decode {
        /// Which file.
        file: String,
        /// Offset of the record's length prefix.
        offset: usize,
        /// `LogEntry` or `SubscribeMetadataResponse`.
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// A chunk this reader cannot turn into plain bytes.
    #[error("meta-log file {file}: chunk {fid} {reason}")]
    UnsupportedChunk {
        /// Which file.
        file: String,
        /// The chunk's file id.
        fid: String,
        /// What it needs that we do not do.
        reason: String,
    },
    /// The chunks do not tile the file (a hole or an overlap).
    #[error(
        "meta-log file {file}: chunk {fid} starts at byte {offset}, expected {expected}; the chunk list has a hole or an overlap"
    )]
    ChunkLayout {
        /// Which file.
        file: String,
        /// The chunk's file id.
        fid: String,
        /// Its offset.
        offset: i64,
        /// The end of the chunks before it.
        expected: u64,
    },
    /// `LookupVolume` failed or found no server.
    #[error("meta-log file {file}: volume {volume} of chunk {fid}: {message}")]
    Lookup {
        /// Which file.
        file: String,
        /// The chunk's file id.
        fid: String,
        /// Its volume.
        volume: String,
        /// What went wrong.
        message: String,
    },
    /// No volume server returned the chunk.
    #[error("meta-log file {file}: reading chunk {fid} failed: {message}")]
    Fetch {
        /// Which file.
        file: String,
        /// The chunk's file id.
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
    let mut out = Vec::new();
    while let Some(r) = records.next_record()? {
        out.push(r);
    }
    Ok(out)
}

/// Reads log files' chunks from the volume servers: volume locations through
/// the filer's `LookupVolume` (cached per volume), then a plain HTTP GET of
/// `http://<url>/<fid>` on a kept-alive connection per server.
pub struct LogFileFetcher {
    filer: SeaweedFilerClient<Channel>,
    locations: HashMap<String, Vec<String>>,
    connections: HashMap<String, SendRequest<Empty<Bytes>>>,
    /// Bytes fetched so far.
    pub bytes_fetched: u64,
    /// Chunks fetched so far.
    pub chunks_fetched: u64,
}

impl LogFileFetcher {
    /// A fetcher that looks volumes up through `filer`.
    pub fn new(filer: SeaweedFilerClient<Channel>) -> LogFileFetcher {
        LogFileFetcher {
            filer,
            locations: HashMap::new(),
            connections: HashMap::new(),
            bytes_fetched: 0,
            chunks_fetched: 0,
        }
    }

    /// The bytes of one ref's file: its chunks in offset order, which must
    /// tile the file without holes or overlaps.
    pub async fn read_file(&mut self, r: &LogFileChunkRef) -> Result<Vec<u8>, LogFileError> {
        let file = ref_name(r);
        let mut chunks: Vec<&FileChunk> = r.chunks.iter().collect();
        chunks.sort_by_key(|c| c.offset);
        // Sizes come from the wire: reserve what they claim only up to a bound,
        // so a corrupt ref cannot ask for an absurd allocation up front.
        let claimed: u64 = chunks.iter().map(|c| c.size).sum();
        let mut out = Vec::with_capacity(claimed.min(u64::from(MAX_RECORD_BYTES)) as usize);
        for c in chunks {
            let data = self.read_chunk(&file, c, out.len() as u64).await?;
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// One chunk of `file`, which must start at byte `expected` (the end of
    /// the chunks before it), as plain bytes.
    pub async fn read_chunk(
        &mut self,
        file: &str,
        c: &FileChunk,
        expected: u64,
    ) -> Result<Bytes, LogFileError> {
        let fid = head_fid(c);
        let unsupported = |reason: &str| LogFileError::UnsupportedChunk {
            file: file.to_string(),
            fid: fid.clone(),
            reason: reason.to_string(),
        };
        if !c.cipher_key.is_empty() {
            return Err(unsupported(
                "is encrypted (filer -encryptVolumeData); direct reads cannot decrypt it, use a plain SubscribeMetadata",
            ));
        }
        if c.is_chunk_manifest {
            return Err(unsupported(
                "is a chunk manifest; direct reads do not resolve manifests, use a plain SubscribeMetadata",
            ));
        }
        if u64::try_from(c.offset).ok() != Some(expected) {
            return Err(LogFileError::ChunkLayout {
                file: file.to_string(),
                fid,
                offset: c.offset,
                expected,
            });
        }
        let data = self.fetch(file, &fid).await?;
        if data.len() as u64 != c.size {
            return Err(LogFileError::Fetch {
                file: file.to_string(),
                message: format!(
                    "got {} bytes, the chunk has {} (is_compressed {}); a volume server answered with something else",
                    data.len(),
                    c.size,
                    c.is_compressed
                ),
                fid,
            });
        }
        Ok(data)
    }

    /// One chunk's bytes from the first of its volume's servers that has it.
    async fn fetch(&mut self, file: &str, fid: &str) -> Result<Bytes, LogFileError> {
        let urls = self.locate(file, fid).await?;
        let mut failures = Vec::new();
        for url in urls {
            match self.get(&url, fid).await {
                Ok(b) => {
                    self.bytes_fetched += b.len() as u64;
                    self.chunks_fetched += 1;
                    return Ok(b);
                }
                Err(e) => failures.push(format!("http://{url}/{fid}: {e}")),
            }
        }
        // The volume may have moved: look it up again next time.
        if let Some((volume, _)) = fid.split_once(',') {
            self.locations.remove(volume);
        }
        Err(LogFileError::Fetch {
            file: file.to_string(),
            fid: fid.to_string(),
            message: failures.join("; "),
        })
    }

    /// The servers of `fid`'s volume, through the filer's `LookupVolume`.
    async fn locate(&mut self, file: &str, fid: &str) -> Result<Vec<String>, LogFileError> {
        let volume = fid.split_once(',').map_or(fid, |(v, _)| v).to_string();
        if let Some(urls) = self.locations.get(&volume) {
            return Ok(urls.clone());
        }
        let err = |message: String| LogFileError::Lookup {
            file: file.to_string(),
            fid: fid.to_string(),
            volume: volume.clone(),
            message,
        };
        let resp = self
            .filer
            .lookup_volume(LookupVolumeRequest {
                volume_ids: vec![volume.clone()],
            })
            .await
            .map_err(|s| {
                err(format!(
                    "LookupVolume failed: {:?}: {}",
                    s.code(),
                    s.message()
                ))
            })?
            .into_inner();
        let urls: Vec<String> = resp
            .locations_map
            .get(&volume)
            .map(|l| l.locations.iter().map(|l| l.url.clone()).collect())
            .unwrap_or_default();
        if urls.is_empty() {
            return Err(err(
                "LookupVolume found no server holding it (volume deleted or its servers down)"
                    .into(),
            ));
        }
        self.locations.insert(volume, urls.clone());
        Ok(urls)
    }

    /// `GET http://<url>/<fid>` on the server's kept-alive connection (made
    /// once, again after a failure). No `Accept-Encoding`: a volume server
    /// hands a stored-compressed needle out decompressed to such a request
    /// (docs/meta-log.md#direct-log-file-reads).
    async fn get(&mut self, url: &str, fid: &str) -> Result<Bytes, String> {
        let result = match tokio::time::timeout(CHUNK_TIMEOUT, self.get_once(url, fid)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {CHUNK_TIMEOUT:?}")),
        };
        if result.is_err() {
            self.connections.remove(url);
        }
        result
    }

    async fn get_once(&mut self, url: &str, fid: &str) -> Result<Bytes, String> {
        let send = match self.connections.get_mut(url) {
            Some(s) if !s.is_closed() => s,
            _ => {
                let stream =
                    tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(url))
                        .await
                        .map_err(|_| format!("connect: no answer within {CONNECT_TIMEOUT:?}"))?
                        .map_err(|e| format!("connect: {e}"))?;
                let _ = stream.set_nodelay(true);
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| format!("handshake: {e}"))?;
                // Ends when the connection closes or `send` is dropped.
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                self.connections
                    .entry(url.to_string())
                    .insert_entry(send)
                    .into_mut()
            }
        };
        send.ready().await.map_err(|e| format!("connection: {e}"))?;
        let req = hyper::Request::builder()
            .method("GET")
            .uri(format!("/{fid}"))
            .header(hyper::header::HOST, url)
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("request: {e}"))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("send: {e}"))?;
        let status = resp.status();
        let gzip = resp
            .headers()
            .get(hyper::header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        // Into one buffer of the announced length: collecting the frames and
        // then joining them held every chunk twice at its peak, and the
        // 8 MB copies kept glibc's heap from shrinking between chunks
        // (docs/due-index.md#memory).
        let announced = resp
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = Vec::with_capacity(announced.min(MAX_RECORD_BYTES as usize));
        let mut frames = resp.into_body();
        while let Some(frame) = frames.frame().await {
            let frame = frame.map_err(|e| format!("read body: {e}"))?;
            if let Some(data) = frame.data_ref() {
                body.extend_from_slice(data);
            }
        }
        let body = Bytes::from(body);
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ));
        }
        if gzip {
            return Err("answered gzip-encoded although not asked to".into());
        }
        Ok(body)
    }
}

/// One filer's refs, the file being read and its next record.
struct FilerQueue {
    refs: VecDeque<LogFileChunkRef>,
    /// The file being read: its name, its chunks not fetched yet (in offset
    /// order) and where the next one must start.
    name: String,
    chunks: VecDeque<FileChunk>,
    next_offset: u64,
    /// The records of the chunk being read.
    file: Option<LogFileRecords>,
    head: Option<LogRecord>,
}

impl FilerQueue {
    fn new() -> FilerQueue {
        FilerQueue {
            refs: VecDeque::new(),
            name: String::new(),
            chunks: VecDeque::new(),
            next_offset: 0,
            file: None,
            head: None,
        }
    }
}

/// Reads refs in log order: each filer's files in the order given, the
/// filers merged by `LogEntry.ts_ns` (the filer merges its peers the same
/// way). A record is kept when its `LogEntry.ts_ns` is in the entry window
/// (the filer's own window check, docs/meta-log.md#entry-and-event-timestamps)
/// and [`EventFilter`] delivers its event (inside `<root>/`, event `ts_ns` in
/// `(since_ns, until_ns]`), so the result is what
/// [`crate::seaweed::metalog::MetaLogReader`] yields for the same window.
pub struct RefReader {
    filers: Vec<FilerQueue>,
    filter: EventFilter,
    /// Exclusive lower, inclusive upper bound on `LogEntry.ts_ns`.
    entry_since: Nanos,
    entry_until: Nanos,
    /// Log files read so far.
    pub files_read: u64,
    /// Files not fetched because they start after the window.
    pub files_skipped: u64,
    /// Records decoded so far (delivered or not).
    pub records: u64,
    /// Every record with `LogEntry.ts_ns` up to here has been handled by a
    /// batch already returned (delivered or filtered out); starts at the
    /// window's lower bound. After an error, the rest of the window is
    /// `(through, entry_until]`.
    pub through: Nanos,
    /// An error met after a batch's first event, returned by the next call.
    failed: Option<LogFileError>,
}

impl RefReader {
    /// A reader of `refs` for the window and root of `params`.
    pub fn new(
        refs: Vec<LogFileChunkRef>,
        params: &SubscribeParams,
    ) -> Result<RefReader, InvalidWindow> {
        let entry_until = subscription::log_until(params, subscription::DEFAULT_UNTIL_SLACK);
        RefReader::with_entry_window(refs, params, params.since_ns, entry_until)
    }

    /// [`RefReader::new`] with a narrower window on `LogEntry.ts_ns`
    /// (`(entry_since, entry_until]`): the part of the pass's window a
    /// subscription's refs cover, up to its marker (docs/meta-log.md#direct-log-file-reads).
    pub fn with_entry_window(
        refs: Vec<LogFileChunkRef>,
        params: &SubscribeParams,
        entry_since: Nanos,
        entry_until: Nanos,
    ) -> Result<RefReader, InvalidWindow> {
        let filter = EventFilter::new(params)?;
        let mut filers: Vec<(String, FilerQueue)> = Vec::new();
        for r in refs {
            if r.chunks.is_empty() {
                continue;
            }
            let at = match filers.iter().position(|(id, _)| *id == r.filer_id) {
                Some(i) => i,
                None => {
                    filers.push((r.filer_id.clone(), FilerQueue::new()));
                    filers.len() - 1
                }
            };
            filers[at].1.refs.push_back(r);
        }
        Ok(RefReader {
            filers: filers.into_iter().map(|(_, q)| q).collect(),
            filter,
            entry_since,
            entry_until,
            files_read: 0,
            files_skipped: 0,
            records: 0,
            through: entry_since,
            failed: None,
        })
    }

    /// Up to `max` (at least 1) more delivered events in log order; empty at
    /// the end.
    pub async fn next_batch(
        &mut self,
        fetcher: &mut LogFileFetcher,
        max: usize,
    ) -> Result<Vec<SubscribeMetadataResponse>, LogFileError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut out = Vec::new();
        let mut through = self.through;
        while out.len() < max.max(1) {
            // Every filer with files left gets records loaded before picking.
            for i in 0..self.filers.len() {
                if let Err(e) = self.fill(i, fetcher).await {
                    // What was taken so far goes out first (and `through`
                    // with it); the error comes with the next call.
                    if out.is_empty() {
                        return Err(e);
                    }
                    self.failed = Some(e);
                    self.through = through;
                    return Ok(out);
                }
            }
            let next = self
                .filers
                .iter()
                .enumerate()
                .filter_map(|(i, q)| q.head.as_ref().map(|r| (r.ts_ns, i)))
                .min();
            let Some((ts, i)) = next else {
                break;
            };
            let Some(record) = self.filers[i].head.take() else {
                break;
            };
            self.records += 1;
            if ts <= self.entry_since || ts > self.entry_until {
                continue;
            }
            through = through.max(ts);
            let mut event = record.event;
            let tail = std::mem::take(&mut event.events);
            for e in std::iter::once(event).chain(tail) {
                if self.filter.classify(&e) == Verdict::Deliver {
                    out.push(e);
                }
            }
        }
        self.through = through;
        Ok(out)
    }

    /// Gives filer `i` its next record: from the chunk being read, its
    /// file's next chunk, or its next file that has one. One chunk (at most
    /// a flush of the filer's 8 MB buffer) is held at a time, not the file.
    async fn fill(&mut self, i: usize, fetcher: &mut LogFileFetcher) -> Result<(), LogFileError> {
        let q = &mut self.filers[i];
        while q.head.is_none() {
            if let Some(file) = q.file.as_mut() {
                match file.next_record()? {
                    Some(r) => q.head = Some(r),
                    None => q.file = None,
                }
                continue;
            }
            if let Some(c) = q.chunks.pop_front() {
                let bytes = fetcher.read_chunk(&q.name, &c, q.next_offset).await?;
                let base = usize::try_from(q.next_offset).unwrap_or(usize::MAX);
                q.next_offset = q.next_offset.saturating_add(c.size);
                q.file = Some(LogFileRecords::at(q.name.clone(), bytes, base));
                continue;
            }
            let Some(r) = q.refs.pop_front() else {
                return Ok(());
            };
            // A file is named after the minute its first record was written
            // in, and a filer's files come in order: from the first file
            // starting past the window on, none holds anything in it
            // (docs/meta-log.md#direct-log-file-reads).
            if r.file_ts_ns > self.entry_until {
                self.files_skipped += 1 + q.refs.len() as u64;
                q.refs.clear();
                return Ok(());
            }
            self.files_read += 1;
            q.name = ref_name(&r);
            let mut chunks = r.chunks;
            chunks.sort_by_key(|c| c.offset);
            q.chunks = chunks.into();
            q.next_offset = 0;
        }
        Ok(())
    }
}

/// Every event of `refs` that a plain subscription with `params` would
/// deliver, in log order (see [`RefReader`]).
pub async fn read_refs(
    fetcher: &mut LogFileFetcher,
    refs: Vec<LogFileChunkRef>,
    params: &SubscribeParams,
) -> Result<Vec<SubscribeMetadataResponse>, DirectReadError> {
    let mut reader = RefReader::new(refs, params)?;
    let mut out = Vec::new();
    loop {
        let batch = reader.next_batch(fetcher, 4096).await?;
        if batch.is_empty() {
            return Ok(out);
        }
        out.extend(batch);
    }
}

/// Why a direct read failed. Every variant means events may be missing.
#[derive(Debug, thiserror::Error)]
pub enum DirectReadError {
    /// The window or root is invalid.
    #[error(transparent)]
    Params(#[from] InvalidWindow),
    /// A file could not be read or parsed.
    #[error(transparent)]
    File(#[from] LogFileError),
    /// The `SubscribeMetadata` call or its stream failed.
    #[error("meta-log subscription with log-file refs failed: {code:?}: {message}")]
    Stream {
        /// gRPC status code.
        code: tonic::Code,
        /// gRPC status message.
        message: String,
    },
}

/// What [`read_window_direct`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectSummary {
    /// Responses on the stream.
    pub responses: u64,
    /// Refs received.
    pub refs: u64,
    /// Log files fetched and parsed.
    pub files_read: u64,
    /// Records decoded from them.
    pub records: u64,
    /// Events handed to the caller: from files, then from the stream.
    pub from_files: u64,
    /// See `from_files`.
    pub from_stream: u64,
    /// Bytes fetched from volume servers.
    pub bytes_fetched: u64,
    /// Every marker's `ts_ns` (the end of the refs before it), in order.
    pub markers: Vec<Nanos>,
}

/// What to do with one response of a subscription with refs ([`RefsProtocol::step`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A response of refs: keep them until the marker after them.
    Hold,
    /// A response with no refs pending: filter it as the plain reader does.
    Pass,
    /// The held refs end here: read their records with `LogEntry.ts_ns` in
    /// `(entry_since, entry_until]`, then handle the response (if any) as
    /// [`Step::Pass`].
    Read {
        /// The refs held since the last read.
        refs: Vec<LogFileChunkRef>,
        /// The marker's `ts_ns` (the filer's bound when the stream ended
        /// instead).
        marker: Nanos,
        /// Exclusive lower bound: what earlier refs covered, or `since_ns`.
        entry_since: Nanos,
        /// Inclusive upper bound: the marker, at most the filer's bound
        /// (`until_ns` plus the slack, [`subscription::log_until`]).
        entry_until: Nanos,
    },
}

/// The client's side of a subscription with refs, without I/O: refs are
/// held until the first response without refs (the marker, whose `ts_ns`
/// is where they end), then read from where the previous refs ended
/// (docs/meta-log.md#what-the-filer-sends).
#[derive(Debug, Clone)]
pub struct RefsProtocol {
    pending: Vec<LogFileChunkRef>,
    checkpoint: Nanos,
    /// The filer's bound on `LogEntry.ts_ns` ([`subscription::log_until`]).
    log_until: Nanos,
}

impl RefsProtocol {
    /// The protocol of one subscription with `params`' window, the filer
    /// asked to read `until_slack` past it ([`subscription::log_until`]).
    pub fn new(params: &SubscribeParams, until_slack: Nanos) -> RefsProtocol {
        RefsProtocol {
            pending: Vec::new(),
            checkpoint: params.since_ns,
            log_until: subscription::log_until(params, until_slack),
        }
    }

    /// The next response, `None` at the end of the stream.
    pub fn step(&mut self, message: Option<&SubscribeMetadataResponse>) -> Step {
        if let Some(r) = message
            && !r.log_file_refs.is_empty()
        {
            self.pending.extend(r.log_file_refs.iter().cloned());
            return Step::Hold;
        }
        if self.pending.is_empty() {
            return Step::Pass;
        }
        // Refs with no marker after them reach the window's end at most.
        let marker = message.map_or(self.log_until, |r| r.ts_ns);
        let entry_until = marker.min(self.log_until);
        let entry_since = self.checkpoint;
        self.checkpoint = self.checkpoint.max(entry_until);
        Step::Read {
            refs: std::mem::take(&mut self.pending),
            marker,
            entry_since,
            entry_until,
        }
    }
}

/// One pass's window read the direct way: `SubscribeMetadata` with
/// `client_supports_metadata_chunks`, the refs it sends read from the volume
/// servers up to the marker that follows them, the events it streams after
/// that filtered as [`crate::seaweed::metalog::MetaLogReader`] filters them.
/// Hands every event to `on_event` in log order.
pub async fn read_window_direct(
    mut filer: SeaweedFilerClient<Channel>,
    fetcher: &mut LogFileFetcher,
    params: &SubscribeParams,
    mut on_event: impl FnMut(SubscribeMetadataResponse),
) -> Result<DirectSummary, DirectReadError> {
    let mut filter = EventFilter::new(params)?;
    let caps = Capabilities {
        idle_heartbeat: false,
        metadata_chunks: true,
    };
    let slack = subscription::DEFAULT_UNTIL_SLACK;
    let request = subscription::request(params, subscription::random_client_id(), caps, slack);
    let status = |s: tonic::Status| DirectReadError::Stream {
        code: s.code(),
        message: s.message().to_string(),
    };
    let mut stream = filer
        .subscribe_metadata(request)
        .await
        .map_err(status)?
        .into_inner();
    let mut summary = DirectSummary::default();
    let mut protocol = RefsProtocol::new(params, slack);
    loop {
        let message = stream.message().await.map_err(status)?;
        if let Some(r) = &message {
            summary.responses += 1;
            summary.refs += r.log_file_refs.len() as u64;
        }
        match protocol.step(message.as_ref()) {
            Step::Hold => continue,
            Step::Pass => {}
            Step::Read {
                refs,
                marker,
                entry_since,
                entry_until,
            } => {
                summary.markers.push(marker);
                let mut reader =
                    RefReader::with_entry_window(refs, params, entry_since, entry_until)?;
                loop {
                    let batch = reader.next_batch(fetcher, 4096).await?;
                    if batch.is_empty() {
                        break;
                    }
                    summary.from_files += batch.len() as u64;
                    batch.into_iter().for_each(&mut on_event);
                }
                summary.files_read += reader.files_read;
                summary.records += reader.records;
            }
        }
        let Some(r) = message else {
            break;
        };
        let mut r = r;
        let tail = std::mem::take(&mut r.events);
        for e in std::iter::once(r).chain(tail) {
            if filter.classify(&e) == Verdict::Deliver {
                summary.from_stream += 1;
                on_event(e);
            }
        }
    }
    summary.bytes_fetched = fetcher.bytes_fetched;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::{Entry, EventNotification};

    fn event(ts: Nanos, dir: &str, name: &str) -> SubscribeMetadataResponse {
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
    fn record_at(ts: Nanos, ev: Nanos, dir: &str, name: &str) -> Vec<u8> {
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

    fn lazy_fetcher() -> LogFileFetcher {
        // Nothing listens there: a test that reaches the network fails.
        let channel = Channel::from_static("http://127.0.0.1:1").connect_lazy();
        LogFileFetcher::new(SeaweedFilerClient::new(channel))
    }

    fn params(since: Nanos, until: Nanos) -> SubscribeParams {
        SubscribeParams {
            buckets_root: "/buckets".into(),
            since_ns: since,
            until_ns: until,
            client_name: "t".into(),
        }
    }

    /// A reader whose filers each hold one fetched file of records
    /// (`(entry ts, event ts, dir, name)`), with the entry window of a
    /// subscription asked for 5 ns past `until_ns`.
    fn loaded(p: &SubscribeParams, filers: &[&[(Nanos, Nanos, &str, &str)]]) -> RefReader {
        let mut r =
            RefReader::with_entry_window(Vec::new(), p, p.since_ns, p.until_ns + 5).unwrap();
        for recs in filers {
            let bytes: Vec<u8> = recs
                .iter()
                .flat_map(|&(ts, ev, dir, name)| record_at(ts, ev, dir, name))
                .collect();
            let mut q = FilerQueue::new();
            q.file = Some(LogFileRecords::new("t", bytes));
            r.filers.push(q);
        }
        r
    }

    async fn names(r: &mut RefReader) -> Vec<String> {
        let mut f = lazy_fetcher();
        let mut out = Vec::new();
        loop {
            let b = r.next_batch(&mut f, 2).await.unwrap();
            if b.is_empty() {
                return out;
            }
            out.extend(
                b.into_iter()
                    .map(|e| e.event_notification.unwrap().new_entry.unwrap().name),
            );
        }
    }

    #[tokio::test]
    async fn filers_merge_by_entry_ts() {
        let p = params(0, 100);
        let mut r = loaded(
            &p,
            &[
                &[(10, 10, "/buckets/b", "a1"), (30, 30, "/buckets/b", "a3")],
                &[(20, 20, "/buckets/b", "b2"), (40, 40, "/buckets/b", "b4")],
            ],
        );
        assert_eq!(names(&mut r).await, ["a1", "b2", "a3", "b4"]);
        assert_eq!(r.records, 4);
    }

    #[tokio::test]
    async fn window_is_on_entry_ts_then_the_readers_filter() {
        let p = params(100, 200);
        let mut r = loaded(
            &p,
            &[&[
                // entry ts at since: excluded, as the filer excludes it
                (100, 100, "/buckets/b", "at-since"),
                // entry ts in window, event ts before since: the plain reader drops it
                (101, 99, "/buckets/b", "event-before-since"),
                (150, 149, "/buckets/b", "in"),
                // outside <root>/
                (160, 160, "/buckets2/x", "outside"),
                (170, 170, "/other", "other"),
                (200, 200, "/buckets/b", "at-until"),
                // entry ts past until although the event ts is not (stamped
                // late): inside the slack, so it is read, and in the window
                (201, 199, "/buckets/b", "entry-after-until"),
                // past until by event ts: the reader drops it
                (203, 203, "/buckets/b", "after-until"),
                // past the entry window: the filer would not send it
                (206, 198, "/buckets/b", "entry-past-the-slack"),
            ]],
        );
        assert_eq!(names(&mut r).await, ["in", "at-until", "entry-after-until"]);
    }

    #[tokio::test]
    async fn files_starting_after_the_window_are_not_fetched() {
        let p = params(0, 100);
        let late = |ts| LogFileChunkRef {
            chunks: vec![FileChunk {
                file_id: "1,01".into(),
                size: 10,
                ..Default::default()
            }],
            file_ts_ns: ts,
            filer_id: "f".into(),
        };
        let mut r = RefReader::with_entry_window(vec![late(101), late(160)], &p, 0, 100).unwrap();
        // Fetching would fail (nothing listens): the skip happens first.
        assert!(names(&mut r).await.is_empty());
        assert_eq!((r.files_read, r.files_skipped), (0, 2));
    }

    #[tokio::test]
    async fn unreadable_chunks_are_refused_naming_file_and_chunk() {
        let mut f = lazy_fetcher();
        let chunk = |offset, size, cipher: &[u8]| FileChunk {
            file_id: format!("3,0{offset}"),
            offset,
            size,
            cipher_key: cipher.to_vec(),
            ..Default::default()
        };
        let r = |chunks| LogFileChunkRef {
            chunks,
            file_ts_ns: 7,
            filer_id: "abc".into(),
        };
        let err = f.read_file(&r(vec![chunk(0, 4, b"k")])).await.unwrap_err();
        assert!(
            matches!(&err, LogFileError::UnsupportedChunk { file, fid, .. } if file == "filer abc file_ts_ns 7" && fid == "3,00"),
            "{err:?}"
        );
        let err = f.read_file(&r(vec![chunk(4, 4, b"")])).await.unwrap_err();
        assert!(
            matches!(
                err,
                LogFileError::ChunkLayout {
                    offset: 4,
                    expected: 0,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    fn refs_response(ts: &[Nanos]) -> SubscribeMetadataResponse {
        SubscribeMetadataResponse {
            log_file_refs: ts
                .iter()
                .map(|&t| LogFileChunkRef {
                    file_ts_ns: t,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn marker(ts: Nanos) -> SubscribeMetadataResponse {
        SubscribeMetadataResponse {
            ts_ns: ts,
            event_notification: Some(EventNotification::default()),
            ..Default::default()
        }
    }

    fn window(step: Step) -> (Vec<Nanos>, Nanos, Nanos, Nanos) {
        match step {
            Step::Read {
                refs,
                marker,
                entry_since,
                entry_until,
            } => (
                refs.iter().map(|r| r.file_ts_ns).collect(),
                marker,
                entry_since,
                entry_until,
            ),
            other => panic!("expected a read, got {other:?}"),
        }
    }

    #[test]
    fn refs_are_held_until_the_marker_then_read_up_to_it() {
        let mut p = RefsProtocol::new(&params(100, 1_000), 0);
        assert_eq!(p.step(Some(&refs_response(&[60]))), Step::Hold);
        assert_eq!(p.step(Some(&refs_response(&[120]))), Step::Hold);
        assert_eq!(
            window(p.step(Some(&marker(500)))),
            (vec![60, 120], 500, 100, 500)
        );
        // Memory events after the marker pass through.
        assert_eq!(p.step(Some(&event(600, "/buckets/b", "k"))), Step::Pass);
        // A later round of refs starts where the first ended.
        assert_eq!(p.step(Some(&refs_response(&[180]))), Step::Hold);
        assert_eq!(
            window(p.step(Some(&marker(700)))),
            (vec![180], 700, 500, 700)
        );
        assert_eq!(p.step(None), Step::Pass);
    }

    #[test]
    fn a_marker_past_until_is_clamped_and_a_missing_one_is_until() {
        let mut p = RefsProtocol::new(&params(100, 400), 0);
        p.step(Some(&refs_response(&[60])));
        assert_eq!(
            window(p.step(Some(&marker(900)))),
            (vec![60], 900, 100, 400)
        );
        let mut p = RefsProtocol::new(&params(100, 400), 0);
        p.step(Some(&refs_response(&[60])));
        assert_eq!(window(p.step(None)), (vec![60], 400, 100, 400));
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
