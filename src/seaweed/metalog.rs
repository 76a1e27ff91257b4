//! The meta-log reader: one bounded `SubscribeMetadata` stream per pass, flattened
//! into single events, delivered in order through a bounded channel so that a slow
//! consumer slows the gRPC read instead of buffering without limit (docs/meta-log.md#subscription).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rand::Rng;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::engine::Nanos;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{SubscribeMetadataRequest, SubscribeMetadataResponse};
use crate::seaweed::endpoint::MAX_MESSAGE_BYTES;
use crate::seaweed::logfile::{LogFileFetcher, RefReader, RefsProtocol, Step};

/// Default channel capacity between the gRPC reader task and the consumer.
pub const DEFAULT_CAPACITY: usize = 1024;
/// Default receive timeout: the Go reader's 20 minutes.
pub const DEFAULT_RECEIVE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Default `client_name` announced to the filer (visible in its logs).
pub const DEFAULT_CLIENT_NAME: &str = "s3-lifecycled";

/// What one pass subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeParams {
    /// The filer's buckets root (`GetFilerConfiguration.dir_buckets`, e.g.
    /// `/buckets`). Sent as the `path_prefix` exactly as given; since that
    /// prefix also matches `/buckets2/...`, the reader drops every event whose
    /// path is not inside `<root>/`.
    pub buckets_root: String,
    /// Exclusive lower bound: only events with `ts_ns > since_ns` are delivered.
    pub since_ns: Nanos,
    /// Inclusive upper bound, the pass's "now": the filer ends the stream once
    /// it has sent everything up to here.
    pub until_ns: Nanos,
    /// `client_name` announced to the filer.
    pub client_name: String,
}

/// Tuning of the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// How many flattened events may wait between the gRPC read and the
    /// consumer. Must be at least 1.
    pub capacity: usize,
    /// Fail the pass when nothing at all (not even a keepalive) arrives for this
    /// long. `None` waits forever. When set, the reader asks the filer for idle
    /// heartbeats so a caught-up but healthy stream is not mistaken for a stall.
    pub receive_timeout: Option<Duration>,
    /// Ask the filer for references to its persisted log files and read them
    /// straight from the volume servers (`pass.direct_log_reads`,
    /// docs/meta-log.md#direct-log-file-reads); events still in the filer's
    /// memory come streamed as usual.
    pub direct_log_reads: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            capacity: DEFAULT_CAPACITY,
            receive_timeout: Some(DEFAULT_RECEIVE_TIMEOUT),
            direct_log_reads: false,
        }
    }
}

/// Why a pass's stream failed. Every variant means the pass is incomplete: the
/// consumer must not advance a cursor past the last event it handled.
#[derive(Debug, thiserror::Error)]
pub enum MetaLogError {
    /// The parameters can never produce a valid subscription.
    #[error("meta-log subscription: {0}")]
    InvalidParams(String),
    /// The `SubscribeMetadata` call itself failed (filer unreachable, refused…).
    #[error("meta-log subscribe failed: {code:?}: {message}")]
    Subscribe {
        /// gRPC status code.
        code: tonic::Code,
        /// gRPC status message.
        message: String,
    },
    /// The stream broke after it started (including a server-side Cancelled).
    #[error(
        "meta-log stream broke after {events_delivered} events (last ts {last_ts_ns}): {code:?}: {message}"
    )]
    Stream {
        /// gRPC status code.
        code: tonic::Code,
        /// gRPC status message.
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

impl MetaLogError {
    fn from_stream_status(status: &tonic::Status, stats: &ReaderStats) -> Self {
        MetaLogError::Stream {
            code: status.code(),
            message: status.message().to_string(),
            events_delivered: stats.events_delivered.load(Ordering::Relaxed),
            last_ts_ns: stats.last_ts_ns.load(Ordering::Relaxed),
        }
    }
}

/// Live counters of one reader, shared with the reader task (for metrics).
#[derive(Debug, Default)]
pub struct ReaderStats {
    /// gRPC responses received (a batch counts once).
    pub responses: AtomicU64,
    /// Events handed to the consumer's channel.
    pub events_delivered: AtomicU64,
    /// Keepalives, idle heartbeats and flush reports skipped.
    pub keepalives_skipped: AtomicU64,
    /// Events whose path is outside `<root>/` (e.g. `/buckets2/...`).
    pub outside_root_skipped: AtomicU64,
    /// Events with `ts_ns <= since_ns` (the server should not send them).
    pub before_since_skipped: AtomicU64,
    /// Events with `ts_ns > until_ns` (the server should not send them).
    pub after_until_skipped: AtomicU64,
    /// Events whose ts_ns was lower than the one before (docs/meta-log.md#ordering).
    pub out_of_order: AtomicU64,
    /// ts_ns of the last delivered event (0 if none yet).
    pub last_ts_ns: AtomicI64,
    /// Most events ever waiting in the channel at once; never exceeds the capacity.
    pub buffered_high_water: AtomicUsize,
}

impl ReaderStats {
    /// A point-in-time copy of the counters.
    pub fn snapshot(&self) -> ReaderSummary {
        ReaderSummary {
            responses: self.responses.load(Ordering::Relaxed),
            events_delivered: self.events_delivered.load(Ordering::Relaxed),
            keepalives_skipped: self.keepalives_skipped.load(Ordering::Relaxed),
            outside_root_skipped: self.outside_root_skipped.load(Ordering::Relaxed),
            before_since_skipped: self.before_since_skipped.load(Ordering::Relaxed),
            after_until_skipped: self.after_until_skipped.load(Ordering::Relaxed),
            out_of_order: self.out_of_order.load(Ordering::Relaxed),
            last_ts_ns: self.last_ts_ns.load(Ordering::Relaxed),
            buffered_high_water: self.buffered_high_water.load(Ordering::Relaxed),
        }
    }
}

/// Counters of a pass; see [`ReaderStats`] for the meaning of each field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReaderSummary {
    /// gRPC responses received.
    pub responses: u64,
    /// Events delivered.
    pub events_delivered: u64,
    /// Keepalives skipped.
    pub keepalives_skipped: u64,
    /// Events outside the buckets root skipped.
    pub outside_root_skipped: u64,
    /// Events at or before since_ns skipped.
    pub before_since_skipped: u64,
    /// Events after until_ns skipped.
    pub after_until_skipped: u64,
    /// Out-of-order events seen (still delivered).
    pub out_of_order: u64,
    /// ts_ns of the last delivered event (0 if none).
    pub last_ts_ns: Nanos,
    /// Channel high-water mark.
    pub buffered_high_water: usize,
}

/// What travels through the channel. The explicit `End` lets the consumer tell
/// a complete pass from a reader task that vanished.
///
/// Events travel as the batch one gRPC response carried (flattened and
/// filtered): one channel message, and at most one cross-thread wake-up, per
/// response instead of per event. Per-event sends were a third of a replay's
/// CPU (issue 9's scan rate, docs/meta-log.md#batching).
enum Msg {
    Events(Vec<SubscribeMetadataResponse>),
    End,
    Failed(MetaLogError),
}

/// A running meta-log pass. Yields events in filer order; `None` after a clean
/// end of stream, an `Err` item (then `None`) when the pass broke. Dropping it
/// cancels the subscription.
pub struct MetaLogReader {
    rx: mpsc::Receiver<Msg>,
    /// The batch being handed out, and how many permits of `room` it holds.
    current: std::vec::IntoIter<SubscribeMetadataResponse>,
    held: usize,
    /// Events the reader task may have read ahead, in events (`capacity`):
    /// a batch takes its size in permits before it is sent, and gives them
    /// back once the consumer has taken its last event.
    room: Arc<Semaphore>,
    stats: Arc<ReaderStats>,
    task: JoinHandle<()>,
    /// Set once the pass has ended (cleanly or not); later polls return `None`.
    finished: bool,
    /// Whether the pass ended with the server's normal end of stream.
    clean_end: bool,
}

impl std::fmt::Debug for MetaLogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaLogReader")
            .field("stats", &self.stats.snapshot())
            .field("finished", &self.finished)
            .field("clean_end", &self.clean_end)
            .finish()
    }
}

impl MetaLogReader {
    /// Opens one `SubscribeMetadata` stream on `channel` (a filer gRPC channel)
    /// and starts reading it. Fails when the call itself is refused; later
    /// failures arrive as `Err` items.
    pub async fn open(
        channel: Channel,
        params: SubscribeParams,
        options: ReaderOptions,
    ) -> Result<MetaLogReader, MetaLogError> {
        MetaLogReader::open_on(channel, params, options, Log::Aggregated).await
    }

    /// Like [`MetaLogReader::open`], but reads only this filer's own log
    /// (`SubscribeLocalMetadata`: the events written through it, not its
    /// peers'), for filers with their own stores whose logs are merged
    /// (docs/meta-log.md#several-filers). Besides its events it yields the
    /// stream's position: every keepalive and every skipped event comes
    /// through as a response with no `event_notification` and that `ts_ns`
    /// (only when it moves forward), so a merge knows how far this filer got
    /// without waiting for its next event.
    pub async fn open_local(
        channel: Channel,
        params: SubscribeParams,
        options: ReaderOptions,
    ) -> Result<MetaLogReader, MetaLogError> {
        MetaLogReader::open_on(channel, params, options, Log::Local).await
    }

    async fn open_on(
        channel: Channel,
        params: SubscribeParams,
        options: ReaderOptions,
        log: Log,
    ) -> Result<MetaLogReader, MetaLogError> {
        let filter = EventFilter::new(&params)?;
        if options.capacity == 0 {
            return Err(MetaLogError::InvalidParams(
                "reader capacity is 0; use at least 1".into(),
            ));
        }
        let request = build_request(&params, &options, random_client_id());
        let mut client =
            SeaweedFilerClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES);
        let call = async {
            match log {
                Log::Aggregated => client.subscribe_metadata(request).await,
                Log::Local => client.subscribe_local_metadata(request).await,
            }
        };
        let response = match options.receive_timeout {
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(r) => r,
                Err(_) => return Err(MetaLogError::ReceiveTimeout(limit)),
            },
            None => call.await,
        };
        let stream = response.map_err(|s| MetaLogError::Subscribe {
            code: s.code(),
            message: s.message().to_string(),
        })?;
        let stream = stream.into_inner();

        // Every message holds at least one permit (End/Failed come once),
        // so `capacity` messages always fit.
        let (tx, rx) = mpsc::channel(options.capacity.saturating_add(1));
        let room = Arc::new(Semaphore::new(options.capacity));
        let stats = Arc::new(ReaderStats::default());
        let direct = options.direct_log_reads.then(|| Direct {
            fetcher: LogFileFetcher::new(SeaweedFilerClient::new(channel.clone())),
            protocol: RefsProtocol::new(&params),
            params: params.clone(),
        });
        let task = tokio::spawn(pump(
            stream,
            Feed {
                tx,
                room: Arc::clone(&room),
                capacity: options.capacity,
                stats: Arc::clone(&stats),
            },
            filter,
            options.receive_timeout,
            log == Log::Local,
            direct,
        ));
        Ok(MetaLogReader {
            rx,
            current: Vec::new().into_iter(),
            held: 0,
            room,
            stats,
            task,
            finished: false,
            clean_end: false,
        })
    }

    /// The next event, `None` at the end of the pass.
    pub async fn recv(&mut self) -> Option<Result<SubscribeMetadataResponse, MetaLogError>> {
        std::future::poll_fn(|cx| self.poll_item(cx)).await
    }

    /// The live counters (share them with a metrics exporter).
    pub fn stats(&self) -> Arc<ReaderStats> {
        Arc::clone(&self.stats)
    }

    /// A copy of the counters now.
    pub fn summary(&self) -> ReaderSummary {
        self.stats.snapshot()
    }

    /// True once the server ended the stream normally and every event was
    /// received: the pass covered everything up to `until_ns`.
    pub fn completed(&self) -> bool {
        self.clean_end
    }

    fn poll_item(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<SubscribeMetadataResponse, MetaLogError>>> {
        loop {
            if let Some(e) = self.current.next() {
                if self.current.len() == 0 {
                    self.release();
                }
                return Poll::Ready(Some(Ok(e)));
            }
            match self.poll_batch(cx) {
                Poll::Ready(Some(Ok(batch))) => {
                    self.held = batch.len();
                    self.current = batch.into_iter();
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Gives back the permits of the batch just handed out.
    fn release(&mut self) {
        self.room.add_permits(std::mem::take(&mut self.held));
    }

    /// The next batch of events (those one response carried, in order),
    /// `None` at the end of the pass: for consumers that take events in
    /// batches. Not to be mixed with single-event reads of a batch in
    /// progress (its rest comes first).
    pub async fn recv_batch(
        &mut self,
    ) -> Option<Result<Vec<SubscribeMetadataResponse>, MetaLogError>> {
        let rest: Vec<_> = self.current.by_ref().collect();
        if !rest.is_empty() {
            self.release();
            return Some(Ok(rest));
        }
        std::future::poll_fn(|cx| {
            self.poll_batch(cx).map(|b| {
                b.map(|r| {
                    // Handed over whole: the consumer owns it now.
                    r.inspect(|batch| self.room.add_permits(batch.len()))
                })
            })
        })
        .await
    }

    fn poll_batch(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Vec<SubscribeMetadataResponse>, MetaLogError>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Msg::Events(batch))) => Poll::Ready(Some(Ok(batch))),
            Poll::Ready(Some(Msg::End)) => {
                self.finished = true;
                self.clean_end = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Msg::Failed(err))) => {
                self.finished = true;
                Poll::Ready(Some(Err(err)))
            }
            // The task dropped its sender without saying how the pass ended:
            // never report that as a clean (and therefore short) pass.
            Poll::Ready(None) => {
                self.finished = true;
                Poll::Ready(Some(Err(MetaLogError::ReaderVanished)))
            }
        }
    }
}

impl Stream for MetaLogReader {
    type Item = Result<SubscribeMetadataResponse, MetaLogError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_item(cx)
    }
}

impl Drop for MetaLogReader {
    fn drop(&mut self) {
        // Dropping the task drops the gRPC stream, which cancels the call.
        self.task.abort();
    }
}

/// Which of a filer's logs a reader subscribes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Log {
    /// `SubscribeMetadata`: its own log plus the peers' events it follows.
    Aggregated,
    /// `SubscribeLocalMetadata`: its own events only, with positions.
    Local,
}

/// A fresh random positive client id: the filer refuses a second stream with an
/// id it already has registered ("duplicated subscription detected").
fn random_client_id() -> i32 {
    rand::rng().random_range(1..=i32::MAX)
}

/// The request of docs/meta-log.md#subscription.
fn build_request(
    params: &SubscribeParams,
    options: &ReaderOptions,
    client_id: i32,
) -> SubscribeMetadataRequest {
    SubscribeMetadataRequest {
        client_name: params.client_name.clone(),
        path_prefix: params.buckets_root.clone(),
        since_ns: params.since_ns,
        until_ns: params.until_ns,
        client_id,
        client_supports_batching: true,
        client_supports_idle_heartbeat: options.receive_timeout.is_some(),
        client_supports_metadata_chunks: options.direct_log_reads,
        ..Default::default()
    }
}

/// The reader task's end of the channel.
struct Feed {
    tx: mpsc::Sender<Msg>,
    room: Arc<Semaphore>,
    capacity: usize,
    stats: Arc<ReaderStats>,
}

impl Feed {
    /// Sends `events` in batches of at most `capacity`, each once the
    /// consumer has room for it. `false` when the consumer is gone.
    async fn events(&self, mut events: Vec<SubscribeMetadataResponse>) -> bool {
        while !events.is_empty() {
            let most = self.capacity.min(u32::MAX as usize);
            let rest = if events.len() > most {
                events.split_off(most)
            } else {
                Vec::new()
            };
            let n = events.len();
            let Ok(permits) = self.room.acquire_many(n as u32).await else {
                return false;
            };
            // Given back by the consumer (MetaLogReader::release).
            permits.forget();
            let buffered = self.capacity.saturating_sub(self.room.available_permits());
            self.stats
                .buffered_high_water
                .fetch_max(buffered, Ordering::Relaxed);
            if self.tx.send(Msg::Events(events)).await.is_err() {
                return false; // the consumer is gone; stop reading
            }
            events = rest;
        }
        true
    }

    async fn send(&self, msg: Msg) {
        let _ = self.tx.send(msg).await;
    }
}

/// The reader task's state for direct log-file reads.
struct Direct {
    fetcher: LogFileFetcher,
    protocol: RefsProtocol,
    params: SubscribeParams,
}

impl Direct {
    /// Reads `refs`' records with `LogEntry.ts_ns` in `(entry_since,
    /// entry_until]` and feeds their events, a batch of at most the reader's
    /// capacity at a time, so only one file and one batch are held. The
    /// newest event ts delivered; `Err(None)` when the consumer is gone.
    async fn read(
        &mut self,
        feed: &Feed,
        refs: Vec<crate::pb::filer_pb::LogFileChunkRef>,
        entry_since: Nanos,
        entry_until: Nanos,
    ) -> Result<Option<Nanos>, Option<MetaLogError>> {
        let mut reader = RefReader::with_entry_window(refs, &self.params, entry_since, entry_until)
            .map_err(Some)?;
        let mut last = None;
        loop {
            let batch = reader
                .next_batch(&mut self.fetcher, feed.capacity)
                .await
                .map_err(|e| Some(MetaLogError::LogFile(e.to_string())))?;
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            let ts = batch.iter().map(|e| e.ts_ns).max();
            if !feed.events(batch).await {
                return Err(None);
            }
            feed.stats.events_delivered.fetch_add(n, Ordering::Relaxed);
            if let Some(ts) = ts {
                feed.stats.last_ts_ns.store(ts, Ordering::Relaxed);
                last = last.max(Some(ts));
            }
        }
        tracing::info!(
            files = reader.files_read,
            skipped = reader.files_skipped,
            records = reader.records,
            bytes = self.fetcher.bytes_fetched,
            "meta-log files read from the volume servers"
        );
        Ok(last)
    }
}

/// Reads the gRPC stream and feeds the channel. Each batch waits for room, so
/// the next gRPC message is only read once the consumer has caught up; HTTP/2
/// flow control then throttles the filer.
async fn pump(
    mut stream: tonic::Streaming<SubscribeMetadataResponse>,
    feed: Feed,
    mut filter: EventFilter,
    receive_timeout: Option<Duration>,
    positions: bool,
    mut direct: Option<Direct>,
) {
    let stats = Arc::clone(&feed.stats);
    // The newest position forwarded (only with `positions`).
    let mut position = Nanos::MIN;
    loop {
        let next = match receive_timeout {
            Some(limit) => match tokio::time::timeout(limit, stream.message()).await {
                Ok(r) => r,
                Err(_) => {
                    feed.send(Msg::Failed(MetaLogError::ReceiveTimeout(limit)))
                        .await;
                    return;
                }
            },
            None => stream.message().await,
        };
        // Direct reads: refs are held until the marker after them (or the
        // end), then their files are read and delivered before anything
        // streamed after them (docs/meta-log.md#what-the-filer-sends).
        if let Some(d) = direct.as_mut() {
            let message = match &next {
                Ok(m) => m.as_ref(),
                Err(_) => None,
            };
            if next.is_ok() {
                match d.protocol.step(message) {
                    Step::Hold => {
                        stats.responses.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Step::Pass => {}
                    Step::Read {
                        refs,
                        entry_since,
                        entry_until,
                        ..
                    } => {
                        match d.read(&feed, refs, entry_since, entry_until).await {
                            Ok(Some(ts)) => position = position.max(ts),
                            Ok(None) => {}
                            Err(Some(e)) => {
                                feed.send(Msg::Failed(e)).await;
                                return;
                            }
                            // The consumer is gone.
                            Err(None) => return,
                        }
                    }
                }
            }
        }
        let response = match next {
            Ok(Some(r)) => r,
            Ok(None) => {
                let s = stats.snapshot();
                tracing::debug!(
                    events = s.events_delivered,
                    keepalives = s.keepalives_skipped,
                    last_ts_ns = s.last_ts_ns,
                    "meta-log pass ended"
                );
                filter.report_out_of_order(s.out_of_order);
                feed.send(Msg::End).await;
                return;
            }
            Err(status) => {
                let err = MetaLogError::from_stream_status(&status, &stats);
                feed.send(Msg::Failed(err)).await;
                return;
            }
        };
        stats.responses.fetch_add(1, Ordering::Relaxed);
        if direct.is_none() && !response.log_file_refs.is_empty() {
            feed.send(Msg::Failed(MetaLogError::UnexpectedLogFileRefs(
                response.ts_ns,
            )))
            .await;
            return;
        }
        // Events and (with `positions`) position marks, in stream order.
        let mut deliver = Vec::new();
        let (mut delivered, mut last_ts) = (0u64, None);
        for event in flatten(response) {
            let verdict = filter.classify(&event);
            if positions && verdict != Verdict::Deliver && event.ts_ns > position {
                position = event.ts_ns;
                deliver.push(SubscribeMetadataResponse {
                    ts_ns: position,
                    ..Default::default()
                });
            }
            match verdict {
                Verdict::Deliver => {
                    position = position.max(event.ts_ns);
                    last_ts = Some(event.ts_ns);
                    delivered += 1;
                    deliver.push(event);
                }
                Verdict::Keepalive => {
                    stats.keepalives_skipped.fetch_add(1, Ordering::Relaxed);
                }
                Verdict::OutsideRoot => {
                    stats.outside_root_skipped.fetch_add(1, Ordering::Relaxed);
                }
                Verdict::BeforeSince => {
                    stats.before_since_skipped.fetch_add(1, Ordering::Relaxed);
                }
                Verdict::AfterUntil => {
                    stats.after_until_skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
            if filter.take_out_of_order() {
                stats.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !feed.events(deliver).await {
            return;
        }
        stats
            .events_delivered
            .fetch_add(delivered, Ordering::Relaxed);
        if let Some(ts) = last_ts {
            stats.last_ts_ns.store(ts, Ordering::Relaxed);
        }
    }
}

/// One response → its events in order: the top-level event first, then the
/// batch tail (`events`), each with `events` emptied.
pub fn flatten(response: SubscribeMetadataResponse) -> Vec<SubscribeMetadataResponse> {
    let mut out = Vec::with_capacity(1 + response.events.len());
    flatten_into(response, &mut out);
    out
}

/// [`flatten`] into `out`: one vector for the whole response (a vector per
/// batched event was a measurable share of a replay's allocations).
fn flatten_into(mut response: SubscribeMetadataResponse, out: &mut Vec<SubscribeMetadataResponse>) {
    let tail = std::mem::take(&mut response.events);
    out.push(response);
    for item in tail {
        // The filer never nests batches, but flattening keeps the order right
        // if it ever does.
        flatten_into(item, out);
    }
}

/// What the reader does with one flattened event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the consumer.
    Deliver,
    /// A keepalive, idle heartbeat or flush report: carries no entry.
    Keepalive,
    /// Its path is not inside `<root>/`.
    OutsideRoot,
    /// `ts_ns <= since_ns`.
    BeforeSince,
    /// `ts_ns > until_ns`.
    AfterUntil,
}

/// The per-event checks, separate from the I/O so they can be unit-tested.
#[derive(Debug, Clone)]
pub struct EventFilter {
    /// `<root>/`: every delivered path starts with it.
    root_slash: String,
    since_ns: Nanos,
    until_ns: Nanos,
    /// ts of the last entry-carrying event seen (any window), for the order check.
    last_seen_ts: Option<Nanos>,
    out_of_order_flag: bool,
    /// The largest `previous − ts` of an out-of-order event so far.
    largest_step_back: Nanos,
}

impl EventFilter {
    /// Validates the parameters and builds the filter.
    pub fn new(params: &SubscribeParams) -> Result<EventFilter, MetaLogError> {
        let root = params.buckets_root.trim_end_matches('/');
        if !params.buckets_root.starts_with('/') {
            return Err(MetaLogError::InvalidParams(format!(
                "buckets root {:?} is not an absolute filer path; use e.g. \"/buckets\"",
                params.buckets_root
            )));
        }
        if params.until_ns <= params.since_ns {
            return Err(MetaLogError::InvalidParams(format!(
                "until_ns {} is not after since_ns {}; the pass window is empty",
                params.until_ns, params.since_ns
            )));
        }
        Ok(EventFilter {
            root_slash: format!("{root}/"),
            since_ns: params.since_ns,
            until_ns: params.until_ns,
            last_seen_ts: None,
            out_of_order_flag: false,
            largest_step_back: 0,
        })
    }

    /// Classifies one flattened event and runs the order check.
    pub fn classify(&mut self, event: &SubscribeMetadataResponse) -> Verdict {
        let Some(n) = &event.event_notification else {
            return Verdict::Keepalive;
        };
        let name = match (&n.old_entry, &n.new_entry) {
            (Some(e), _) | (None, Some(e)) => e.name.as_str(),
            (None, None) => return Verdict::Keepalive,
        };
        if name.is_empty() {
            // The Go reader drops these too: no entry name, nothing to route.
            return Verdict::Keepalive;
        }
        self.check_order(event.ts_ns);
        if event.ts_ns <= self.since_ns {
            return Verdict::BeforeSince;
        }
        if event.ts_ns > self.until_ns {
            return Verdict::AfterUntil;
        }
        let inside = self.inside(&event.directory, name)
            || n.new_entry.as_ref().is_some_and(|ne| {
                // A rename into the root counts by its destination, as the
                // filer's own path match does.
                let parent = if n.new_parent_path.is_empty() {
                    &event.directory
                } else {
                    &n.new_parent_path
                };
                self.inside(parent, &ne.name)
            });
        if inside {
            Verdict::Deliver
        } else {
            Verdict::OutsideRoot
        }
    }

    /// True (once) if the last classified event went backwards in time.
    fn take_out_of_order(&mut self) -> bool {
        std::mem::take(&mut self.out_of_order_flag)
    }

    fn check_order(&mut self, ts: Nanos) {
        if let Some(prev) = self.last_seen_ts
            && ts < prev
        {
            // Cross-filer order is assumed, not guaranteed (docs/meta-log.md#ordering).
            // Deliver anyway: dropping it could lose a deletion. Concurrent
            // writers make small steps back routine (thousands in a busy
            // window), so each is a debug line and the pass ends with one
            // summary (`report_out_of_order`).
            tracing::debug!(
                previous_ts_ns = prev,
                ts_ns = ts,
                "meta-log event out of ts order"
            );
            self.largest_step_back = self.largest_step_back.max(prev - ts);
            self.out_of_order_flag = true;
            return;
        }
        self.last_seen_ts = Some(ts);
    }

    /// The one log line about out-of-order events at the end of a stream:
    /// how many, and the largest step back, which the reorder margin must
    /// cover (docs/meta-log.md#ordering).
    fn report_out_of_order(&self, count: u64) {
        if count == 0 {
            return;
        }
        tracing::info!(
            events = count,
            largest_step_back_ms = self.largest_step_back as f64 / 1e6,
            "meta-log events out of ts order (delivered; the reorder margin covers small steps)"
        );
    }

    /// Whether `directory + "/" + name` (without doubling the slash of the
    /// root directory) starts with `<root>/`, checked piece by piece: one
    /// path string per event was a few percent of a replay's CPU.
    fn inside(&self, directory: &str, name: &str) -> bool {
        let sep = if directory.ends_with('/') { "" } else { "/" };
        let mut want = self.root_slash.as_bytes();
        for piece in [directory, sep, name] {
            let piece = piece.as_bytes();
            let n = want.len().min(piece.len());
            if piece[..n] != want[..n] {
                return false;
            }
            want = &want[n..];
            if want.is_empty() {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::{Entry, EventNotification};

    fn params() -> SubscribeParams {
        SubscribeParams {
            buckets_root: "/buckets".into(),
            since_ns: 100,
            until_ns: 200,
            client_name: "t".into(),
        }
    }

    fn ev(dir: &str, name: &str, ts: Nanos) -> SubscribeMetadataResponse {
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

    #[test]
    fn subscribe_request_matches_docs() {
        let opts = ReaderOptions::default();
        let r = build_request(&params(), &opts, 42);
        assert_eq!(r.path_prefix, "/buckets");
        assert_eq!(r.since_ns, 100);
        assert_eq!(r.until_ns, 200);
        assert_eq!(r.client_id, 42);
        assert!(r.client_supports_batching);
        assert!(r.client_supports_idle_heartbeat);
        assert!(!r.client_supports_metadata_chunks);
        assert_eq!(r.signature, 0);
        assert!(r.path_prefixes.is_empty() && r.directories.is_empty());
        let no_timeout = ReaderOptions {
            receive_timeout: None,
            ..opts
        };
        assert!(!build_request(&params(), &no_timeout, 1).client_supports_idle_heartbeat);
    }

    #[test]
    fn client_ids_are_positive() {
        for _ in 0..1000 {
            assert!(random_client_id() > 0);
        }
    }

    #[test]
    fn flatten_puts_top_level_first_then_batch_tail() {
        let mut top = ev("/buckets/b", "a", 1);
        top.events = vec![ev("/buckets/b", "b", 2), ev("/buckets/c", "c", 3)];
        let flat = flatten(top);
        let names: Vec<_> = flat
            .iter()
            .map(|e| {
                e.event_notification
                    .as_ref()
                    .and_then(|n| n.new_entry.as_ref())
                    .map(|x| x.name.clone())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(flat.iter().all(|e| e.events.is_empty()));
        assert_eq!(flat[2].directory, "/buckets/c");
    }

    #[test]
    fn keepalives_are_recognised() {
        let mut f = EventFilter::new(&params()).unwrap();
        let heartbeat = SubscribeMetadataResponse {
            ts_ns: 150,
            ..Default::default()
        };
        assert_eq!(f.classify(&heartbeat), Verdict::Keepalive);
        let empty = SubscribeMetadataResponse {
            ts_ns: 150,
            event_notification: Some(EventNotification::default()),
            ..Default::default()
        };
        assert_eq!(f.classify(&empty), Verdict::Keepalive);
        let flush = SubscribeMetadataResponse {
            flushed_ts_ns: 150,
            ..Default::default()
        };
        assert_eq!(f.classify(&flush), Verdict::Keepalive);
    }

    #[test]
    fn window_bounds_are_exclusive_since_inclusive_until() {
        let mut f = EventFilter::new(&params()).unwrap();
        assert_eq!(
            f.classify(&ev("/buckets/b", "k", 100)),
            Verdict::BeforeSince
        );
        assert_eq!(f.classify(&ev("/buckets/b", "k", 101)), Verdict::Deliver);
        assert_eq!(f.classify(&ev("/buckets/b", "k", 200)), Verdict::Deliver);
        assert_eq!(f.classify(&ev("/buckets/b", "k", 201)), Verdict::AfterUntil);
    }

    #[test]
    fn events_outside_root_slash_are_dropped() {
        let mut f = EventFilter::new(&params()).unwrap();
        // The bucket entry itself lives in directory /buckets.
        assert_eq!(f.classify(&ev("/buckets", "b1", 110)), Verdict::Deliver);
        // /buckets2 matches the path_prefix but is another tree.
        assert_eq!(f.classify(&ev("/buckets2", "x", 111)), Verdict::OutsideRoot);
        assert_eq!(f.classify(&ev("/", "buckets", 112)), Verdict::OutsideRoot);
        // A trailing slash on the configured root changes nothing.
        let mut p = params();
        p.buckets_root = "/buckets/".into();
        let mut f = EventFilter::new(&p).unwrap();
        assert_eq!(f.classify(&ev("/buckets", "b1", 110)), Verdict::Deliver);
        assert_eq!(f.classify(&ev("/buckets2", "x", 111)), Verdict::OutsideRoot);
    }

    #[test]
    fn inside_checks_the_joined_path_without_building_it() {
        for root in ["/buckets", "/buckets/", "/"] {
            let mut p = params();
            p.buckets_root = root.into();
            let f = EventFilter::new(&p).unwrap();
            for dir in [
                "",
                "/",
                "/buckets",
                "/buckets/",
                "/buckets2",
                "/buck",
                "/buckets/b",
            ] {
                for name in ["", "b1", "buckets", "ets", "ets/x", "/"] {
                    let joined = if dir.ends_with('/') {
                        format!("{dir}{name}")
                    } else {
                        format!("{dir}/{name}")
                    };
                    assert_eq!(
                        f.inside(dir, name),
                        joined.starts_with(&f.root_slash),
                        "root {root:?}, {dir:?} + {name:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rename_into_root_is_delivered() {
        let mut f = EventFilter::new(&params()).unwrap();
        let mut e = ev("/tmp", "x", 150);
        if let Some(n) = e.event_notification.as_mut() {
            n.old_entry = Some(Box::new(Entry {
                name: "x".into(),
                ..Default::default()
            }));
            n.new_parent_path = "/buckets/b".into();
        }
        assert_eq!(f.classify(&e), Verdict::Deliver);
    }

    #[test]
    fn out_of_order_is_flagged_but_delivered() {
        let mut f = EventFilter::new(&params()).unwrap();
        assert_eq!(f.classify(&ev("/buckets/b", "k", 150)), Verdict::Deliver);
        assert!(!f.take_out_of_order());
        assert_eq!(f.classify(&ev("/buckets/b", "k", 140)), Verdict::Deliver);
        assert!(f.take_out_of_order());
        assert!(!f.take_out_of_order());
        // Equal timestamps are allowed.
        assert_eq!(f.classify(&ev("/buckets/b", "k", 150)), Verdict::Deliver);
        assert!(!f.take_out_of_order());
    }

    #[test]
    fn invalid_params_are_rejected_with_a_reason() {
        let mut p = params();
        p.buckets_root = "buckets".into();
        let err = EventFilter::new(&p).unwrap_err().to_string();
        assert!(err.contains("absolute"), "{err}");
        let mut p = params();
        p.until_ns = p.since_ns;
        let err = EventFilter::new(&p).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
