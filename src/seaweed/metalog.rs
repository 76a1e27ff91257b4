//! The meta-log reader: one bounded `SubscribeMetadata` stream per pass, flattened
//! into single events, delivered in order through a bounded channel so that a slow
//! consumer slows the gRPC read instead of buffering without limit (docs/meta-log.md#subscription).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::engine::Nanos;
use crate::pb::filer_pb::SubscribeMetadataResponse;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::seaweed::endpoint::MAX_MESSAGE_BYTES;
use crate::seaweed::logfile::{LogFileFetcher, RefReader, RefsProtocol, Step, VolumeAccess};
pub use crate::seaweed::metalog_error::MetaLogError;
use crate::seaweed::subscription::{self, Capabilities, random_client_id};
pub use crate::seaweed::subscription::{
    EventFilter, InvalidWindow, SubscribeParams, Verdict, flatten,
};

/// Default channel capacity between the gRPC reader task and the consumer.
pub const DEFAULT_CAPACITY: usize = 1024;
/// Default receive timeout: the Go reader's 20 minutes.
pub const DEFAULT_RECEIVE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Default `client_name` announced to the filer (visible in its logs).
pub const DEFAULT_CLIENT_NAME: &str = "s3-lifecycled";

/// Tuning of the reader.
#[derive(Debug, Clone)]
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
    /// memory come streamed as usual. Aggregated log only: a filer's own log
    /// ([`MetaLogReader::open_local`]) is always streamed. `Some`: on, with
    /// how the volume servers are read (a read token, HTTPS;
    /// docs/meta-log.md#read-tokens, #https-volume-servers).
    pub direct_log_reads: Option<VolumeAccess>,
    /// How far past `until_ns` the filer is asked to read, so an event of the
    /// window whose log record was stamped past the bound is not lost
    /// ([`subscription::log_until`]); what it brings past `until_ns` is dropped.
    pub until_slack: Duration,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            capacity: DEFAULT_CAPACITY,
            receive_timeout: Some(DEFAULT_RECEIVE_TIMEOUT),
            direct_log_reads: None,
            until_slack: Duration::from_nanos(subscription::DEFAULT_UNTIL_SLACK.unsigned_abs()),
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
    pub responses: u64,
    pub events_delivered: u64,
    pub keepalives_skipped: u64,
    pub outside_root_skipped: u64,
    pub before_since_skipped: u64,
    pub after_until_skipped: u64,
    pub out_of_order: u64,
    pub last_ts_ns: Nanos,
    pub buffered_high_water: usize,
}

/// What travels through the channel. The explicit `End` lets the consumer tell
/// a complete pass from a reader task that vanished.
///
/// Events travel as the batch one gRPC response carried (flattened and
/// filtered): one channel message, and at most one cross-thread wake-up, per
/// response instead of per event. Per-event sends were a third of a replay's
/// CPU (docs/meta-log.md#batching).
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
        MetaLogReader::open_on(channel, params, options, false).await
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
        MetaLogReader::open_on(channel, params, options, true).await
    }

    /// `local`: `SubscribeLocalMetadata` (the filer's own events only, with
    /// positions), else `SubscribeMetadata` (its own log plus the peers'
    /// events it follows).
    async fn open_on(
        channel: Channel,
        params: SubscribeParams,
        options: ReaderOptions,
        local: bool,
    ) -> Result<MetaLogReader, MetaLogError> {
        let filter = EventFilter::new(&params)?;
        if options.capacity == 0 {
            return Err(MetaLogError::InvalidParams(
                "reader capacity is 0; use at least 1".into(),
            ));
        }
        // Only the aggregated log: a filer's own log (`SubscribeLocalMetadata`,
        // read per filer when the filers have their own stores) asked for
        // refs lost events still in the filer's memory: a pass over a window
        // with no persisted file read 1 to 3 of its 5 events, varying from run
        // to run (docs/meta-log.md#direct-log-file-reads, "Two filers").
        let direct_reads = options.direct_log_reads.clone().filter(|_| !local);
        let caps = Capabilities {
            idle_heartbeat: options.receive_timeout.is_some(),
            metadata_chunks: direct_reads.is_some(),
        };
        let slack = i64::try_from(options.until_slack.as_nanos()).unwrap_or(i64::MAX);
        let request = subscription::request(&params, random_client_id(), caps, slack);
        let mut client =
            SeaweedFilerClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES);
        let call = async {
            if local {
                client.subscribe_local_metadata(request).await
            } else {
                client.subscribe_metadata(request).await
            }
        };
        let stream = within(options.receive_timeout, call)
            .await?
            .map_err(|s| MetaLogError::Subscribe {
                code: s.code(),
                message: s.message().to_string(),
            })?
            .into_inner();

        // Every message holds at least one permit (End/Failed come once),
        // so `capacity` messages always fit.
        let (tx, rx) = mpsc::channel(options.capacity.saturating_add(1));
        let room = Arc::new(Semaphore::new(options.capacity));
        let stats = Arc::new(ReaderStats::default());
        let direct = direct_reads.map(|access| Direct {
            fetcher: LogFileFetcher::new(SeaweedFilerClient::new(channel.clone()))
                .with_access(access),
            protocol: RefsProtocol::new(&params, slack),
            params: params.clone(),
            channel: channel.clone(),
            receive_timeout: options.receive_timeout,
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
            local,
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
            match std::task::ready!(self.poll_batch(cx)) {
                Some(Ok(batch)) => {
                    self.held = batch.len();
                    self.current = batch.into_iter();
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
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
        let msg = std::task::ready!(self.rx.poll_recv(cx));
        self.finished = !matches!(msg, Some(Msg::Events(_)));
        Poll::Ready(match msg {
            Some(Msg::Events(batch)) => Some(Ok(batch)),
            Some(Msg::End) => {
                self.clean_end = true;
                None
            }
            Some(Msg::Failed(err)) => Some(Err(err)),
            // The task dropped its sender without saying how the pass ended:
            // never report that as a clean (and therefore short) pass.
            None => Some(Err(MetaLogError::ReaderVanished)),
        })
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

/// The reader task's end of the channel.
struct Feed {
    tx: mpsc::Sender<Msg>,
    room: Arc<Semaphore>,
    capacity: usize,
    stats: Arc<ReaderStats>,
}

impl Feed {
    /// Sends `events` in batches of at most `capacity`, each once the
    /// consumer has room for it, then counts `delivered` events up to
    /// `last_ts`. `false` when the consumer is gone.
    async fn events(
        &self,
        mut events: Vec<SubscribeMetadataResponse>,
        delivered: u64,
        last_ts: Option<Nanos>,
    ) -> bool {
        while !events.is_empty() {
            let most = self.capacity.min(u32::MAX as usize);
            let rest = events.split_off(events.len().min(most));
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
        let stats = &self.stats;
        stats
            .events_delivered
            .fetch_add(delivered, Ordering::Relaxed);
        if let Some(ts) = last_ts {
            stats.last_ts_ns.store(ts, Ordering::Relaxed);
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
    /// For the fallback: the same filer's aggregated log, streamed (direct
    /// reads are only ever used on that log).
    channel: Channel,
    receive_timeout: Option<Duration>,
}

impl Direct {
    /// Reads `refs`' records with `LogEntry.ts_ns` in `(entry_since,
    /// entry_until]` and feeds their events in batches of [`direct_batch`],
    /// so only one chunk per filer and a few batches are held. When a
    /// file cannot be fetched or parsed (a volume server down, read JWTs,
    /// HTTPS or encrypted volumes), the rest of that part comes streamed by
    /// the filer instead ([`Direct::fall_back`]). The newest event ts
    /// delivered; `Err(None)` when the consumer is gone.
    async fn read(
        &mut self,
        feed: &Feed,
        refs: Vec<crate::pb::filer_pb::LogFileChunkRef>,
        entry_since: Nanos,
        entry_until: Nanos,
    ) -> Result<Option<Nanos>, Option<MetaLogError>> {
        let mut reader = RefReader::with_entry_window(refs, &self.params, entry_since, entry_until)
            .map_err(|e| Some(e.into()))?;
        let mut last = None;
        loop {
            let batch = match reader
                .next_batch(&mut self.fetcher, direct_batch(feed.capacity))
                .await
            {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        from_entry_ts = reader.through,
                        to_entry_ts = entry_until,
                        "meta-log file not readable from the volume servers; the filer streams this part instead (pass.direct_log_reads)"
                    );
                    let streamed = self.fall_back(feed, reader.through, entry_until).await?;
                    return Ok(last.max(streamed));
                }
            };
            if batch.is_empty() {
                break;
            }
            last = last.max(deliver(feed, batch).await?);
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

    /// The part of the window whose files could not be read, streamed by the
    /// filer: a plain subscription on its aggregated log bounded by
    /// `LogEntry.ts_ns` in `(entry_since, entry_until]`, exactly the records
    /// those files hold past what was delivered, filtered by the window's own
    /// [`EventFilter`]. Its failure fails the stream, as a broken stream does.
    async fn fall_back(
        &self,
        feed: &Feed,
        entry_since: Nanos,
        entry_until: Nanos,
    ) -> Result<Option<Nanos>, Option<MetaLogError>> {
        if entry_since >= entry_until {
            return Ok(None);
        }
        let part = SubscribeParams {
            since_ns: entry_since,
            until_ns: entry_until,
            ..self.params.clone()
        };
        let caps = Capabilities {
            idle_heartbeat: self.receive_timeout.is_some(),
            metadata_chunks: false,
        };
        // The bound is already on `LogEntry.ts_ns`: no slack.
        let request = subscription::request(&part, random_client_id(), caps, 0);
        let failed = |s: tonic::Status| {
            Some(MetaLogError::LogFile(format!(
                "streaming the unreadable files' part ({entry_since}, {entry_until}] instead failed: {:?}: {}",
                s.code(),
                s.message()
            )))
        };
        let mut client = SeaweedFilerClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let mut stream = client
            .subscribe_metadata(request)
            .await
            .map_err(failed)?
            .into_inner();
        let mut filter = EventFilter::new(&self.params).map_err(|e| Some(e.into()))?;
        let mut last = None;
        loop {
            let next = within(self.receive_timeout, stream.message()).await;
            let Some(response) = next.map_err(Some)?.map_err(failed)? else {
                return Ok(last);
            };
            let batch: Vec<_> = flatten(response)
                .into_iter()
                .filter(|e| filter.classify(e) == Verdict::Deliver)
                .collect();
            last = last.max(deliver(feed, batch).await?);
        }
    }
}

/// `call`, failing with [`MetaLogError::ReceiveTimeout`] when `limit` is set
/// and passes first.
async fn within<T>(
    limit: Option<Duration>,
    call: impl Future<Output = T>,
) -> Result<T, MetaLogError> {
    match limit {
        Some(l) => tokio::time::timeout(l, call)
            .await
            .map_err(|_| MetaLogError::ReceiveTimeout(l)),
        None => Ok(call.await),
    }
}

/// Events per batch of a direct read. A batch waits until the consumer has
/// room for all of it: a batch of the whole `capacity` waited for the
/// consumer to drain everything, so decoding and routing took turns instead
/// of overlapping. A sixteenth keeps both busy, about as the filer's own
/// responses (tens of events each) do.
fn direct_batch(capacity: usize) -> usize {
    (capacity / 16).clamp(1, 256)
}

/// The error of a stream that broke after `stats` events.
fn stream_error(status: &tonic::Status, stats: &ReaderStats) -> MetaLogError {
    MetaLogError::Stream {
        code: status.code(),
        message: status.message().to_string(),
        events_delivered: stats.events_delivered.load(Ordering::Relaxed),
        last_ts_ns: stats.last_ts_ns.load(Ordering::Relaxed),
    }
}

/// Feeds `batch` and counts it; its newest event ts. `Err(None)` when the
/// consumer is gone.
async fn deliver(
    feed: &Feed,
    batch: Vec<SubscribeMetadataResponse>,
) -> Result<Option<Nanos>, Option<MetaLogError>> {
    let (n, ts) = (batch.len() as u64, batch.iter().map(|e| e.ts_ns).max());
    feed.events(batch, n, ts).await.then_some(ts).ok_or(None)
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
        let next = match within(receive_timeout, stream.message()).await {
            Ok(r) => r,
            Err(e) => return feed.send(Msg::Failed(e)).await,
        };
        // Direct reads: refs are held until the marker after them (or the
        // end), then their files are read and delivered before anything
        // streamed after them (docs/meta-log.md#what-the-filer-sends).
        if let (Some(d), Ok(message)) = (direct.as_mut(), &next) {
            match d.protocol.step(message.as_ref()) {
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
                } => match d.read(&feed, refs, entry_since, entry_until).await {
                    Ok(ts) => position = position.max(ts.unwrap_or(Nanos::MIN)),
                    Err(Some(e)) => return feed.send(Msg::Failed(e)).await,
                    // The consumer is gone.
                    Err(None) => return,
                },
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
            Err(status) => return feed.send(Msg::Failed(stream_error(&status, &stats))).await,
        };
        stats.responses.fetch_add(1, Ordering::Relaxed);
        if direct.is_none() && !response.log_file_refs.is_empty() {
            let err = MetaLogError::UnexpectedLogFileRefs(response.ts_ns);
            return feed.send(Msg::Failed(err)).await;
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
            let skipped = match verdict {
                Verdict::Deliver => None,
                Verdict::Keepalive => Some(&stats.keepalives_skipped),
                Verdict::OutsideRoot => Some(&stats.outside_root_skipped),
                Verdict::BeforeSince => Some(&stats.before_since_skipped),
                Verdict::AfterUntil => Some(&stats.after_until_skipped),
            };
            if let Some(counter) = skipped {
                counter.fetch_add(1, Ordering::Relaxed);
            } else {
                position = position.max(event.ts_ns);
                last_ts = Some(event.ts_ns);
                delivered += 1;
                deliver.push(event);
            }
            if filter.take_out_of_order() {
                stats.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !feed.events(deliver, delivered, last_ts).await {
            return;
        }
    }
}
