//! Refs turned into events: [`RefReader`] merges the filers' log files in
//! log order and filters them as the plain reader does, [`RefsProtocol`] is
//! the client's side of a subscription with refs, and [`read_window_direct`]
//! reads one pass's window that way.

use std::collections::VecDeque;

use tonic::transport::Channel;

use crate::engine::Nanos;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{FileChunk, LogFileChunkRef, SubscribeMetadataResponse};
use crate::seaweed::subscription::{
    self, Capabilities, EventFilter, InvalidWindow, SubscribeParams, Verdict,
};

use super::fetch::LogFileFetcher;
use super::format::{LogFileError, LogFileRecords, LogRecord, ref_name};

/// One filer's refs, the file being read and its next record.
#[derive(Default)]
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
            let at = filers.iter().position(|(id, _)| *id == r.filer_id);
            let at = at.unwrap_or_else(|| {
                filers.push((r.filer_id.clone(), FilerQueue::default()));
                filers.len() - 1
            });
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
    Stream { code: tonic::Code, message: String },
}

/// What [`read_window_direct`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectSummary {
    pub responses: u64,
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
        let Some(mut r) = message else {
            break;
        };
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
    use crate::pb::filer_pb::EventNotification;
    use crate::seaweed::logfile::fetch::tests::lazy_fetcher;
    use crate::seaweed::logfile::format::tests::{event, record_at};

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
            r.filers.push(FilerQueue {
                file: Some(LogFileRecords::new("t", bytes)),
                ..FilerQueue::default()
            });
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
}
