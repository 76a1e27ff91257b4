//! The cluster as the pass sees it: one trait for filer reads/writes and the
//! meta-log ([`ClusterPort`]), the delete RPC ([`DeletePort`]), and the real
//! adapters over [`crate::seaweed`]. Actor and pass tests substitute fakes.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use tonic::transport::Channel;

use crate::engine::DeleteRequest;
use crate::engine::cursor::ShardCursor;
use crate::engine::merge::{LogMerge, applied_for_peer};
use crate::engine::safety::{ApprovalRecord, HoldRecord, PauseRecord, RuleRecord};
use crate::engine::{CallResult, DeleteOutcome, MetaEvent, Nanos, WalkItem};
use crate::pass::dispatch::{AttemptError, AttemptResult, DeletePort};
use crate::pb::filer_pb::{Entry, SubscribeMetadataResponse};
use crate::seaweed::buckets::{BucketScan, list_bucket_configs};
use crate::seaweed::controls::ControlStore;
use crate::seaweed::delete::DeleteError;
use crate::seaweed::lister::{ListOptions, list_bucket_after};
use crate::seaweed::metalog::{DEFAULT_CLIENT_NAME, MetaLogReader, ReaderOptions, SubscribeParams};
use crate::seaweed::pool::{FilerPool, GatewayPool, ResumeDedup, StoreCheck};
use crate::seaweed::retention;
use crate::seaweed::tls::ClientTls;

/// A stream of meta-log events for one pass: `Err` then end when it broke;
/// a plain end means the filer ended the stream normally.
pub type EventStream = BoxStream<'static, Result<MetaEvent, String>>;

/// Filer-side I/O of a pass. Errors are messages naming what failed.
pub trait ClusterPort: Send + Sync + 'static {
    /// The buckets root (e.g. `/buckets`).
    fn buckets_root(&self) -> String;
    /// Every bucket's lifecycle configuration (and per-bucket parse errors).
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, String>>;
    /// The meta-log horizon (`None`: nothing persisted yet).
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>>;
    /// Loads a shard's cursor (`None`: no file, cold start).
    fn load_cursor(&self, shard: u8) -> BoxFuture<'static, Result<Option<ShardCursor>, String>>;
    /// Saves a shard's cursor.
    fn save_cursor(
        &self,
        cursor: ShardCursor,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>>;
    /// Lists a bucket for the walker.
    fn list_bucket(&self, bucket: &str) -> BoxStream<'static, Result<WalkItem, String>>;
    /// Lists a bucket for the walker with each item's listing position, only
    /// the items after `after` (docs/design-deviations.md#resumable-recovery-walks)
    /// and only keys under one of `prefixes` (`None`: all; see
    /// [`crate::pass::plan::walk_prefixes`]; fakes may list everything, the
    /// walk evaluates each item's filter anyway).
    /// The default derives positions from [`WalkItem::position`] and filters
    /// [`ClusterPort::list_bucket`] (test doubles); the real adapter resumes
    /// the filer listing itself.
    fn list_bucket_after(
        &self,
        bucket: &str,
        after: Option<String>,
        prefixes: Option<Vec<String>>,
    ) -> BoxStream<'static, Result<(String, WalkItem), String>> {
        let _ = prefixes;
        self.list_bucket(bucket)
            .filter_map(move |r| {
                let out = match r {
                    Ok(item) => {
                        let pos = item.position();
                        crate::engine::resume::is_after(&pos, after.as_deref())
                            .then_some(Ok((pos, item)))
                    }
                    Err(e) => Some(Err(e)),
                };
                futures::future::ready(out)
            })
            .boxed()
    }
    /// Looks up one entry (`None`: not found), for deferred matches.
    fn lookup(&self, dir: &str, name: &str) -> BoxFuture<'static, Result<Option<Entry>, String>>;
    /// Every entry of directory `dir` (a missing directory lists as empty),
    /// for the checks around a delete ([`crate::engine::check`]).
    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, String>>;
    /// Re-reads which servers to use, at the start of every pass (discovery
    /// from the master); nothing to do by default.
    fn refresh(&self) -> BoxFuture<'static, Result<(), String>> {
        async { Ok(()) }.boxed()
    }
    /// Opens the pass's one meta-log subscription over `(since, until]`.
    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, String>>;
    /// The clock of the one filer the replay reads, taken before it reads:
    /// every event stamped a reorder margin before it was in the log by then
    /// (docs/due-index.md#filer-clock). `None` when it cannot vouch for that
    /// (several filers, each its own clock and peers' events arriving late),
    /// and in fakes.
    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>> {
        async { Ok(None) }.boxed()
    }
    /// The paused buckets (`s3-lifecycled pause`), read at every pass start
    /// (docs/filer-layout.md#pause-files). Fakes without pauses keep the
    /// default: none.
    fn paused(&self) -> BoxFuture<'static, Result<Vec<PauseRecord>, String>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Pauses a bucket; answers the record written.
    fn pause(
        &self,
        bucket: &str,
        now: Nanos,
        reason: &str,
    ) -> BoxFuture<'static, Result<PauseRecord, String>> {
        let _ = (now, reason);
        let msg = format!("cannot pause bucket {bucket}: this cluster port keeps no pauses");
        async move { Err(msg) }.boxed()
    }
    /// Resumes a bucket; `Ok(false)` when it was not paused.
    fn resume(&self, bucket: &str) -> BoxFuture<'static, Result<bool, String>> {
        let msg = format!("cannot resume bucket {bucket}: this cluster port keeps no pauses");
        async move { Err(msg) }.boxed()
    }
    /// The approved buckets (`s3-lifecycled approve`), read at pass start
    /// when a safety rail is on (docs/filer-layout.md#approval-files).
    fn approvals(&self) -> BoxFuture<'static, Result<Vec<ApprovalRecord>, String>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Approves a bucket's held work for the next pass.
    fn approve(
        &self,
        bucket: &str,
        now: Nanos,
    ) -> BoxFuture<'static, Result<ApprovalRecord, String>> {
        let _ = now;
        let msg = format!("cannot approve bucket {bucket}: this cluster port keeps no approvals");
        async move { Err(msg) }.boxed()
    }
    /// Removes a used approval.
    fn clear_approval(&self, bucket: &str) -> BoxFuture<'static, Result<(), String>> {
        let _ = bucket;
        async { Ok(()) }.boxed()
    }
    /// The buckets the deletion cap holds (docs/filer-layout.md#approval-files).
    fn holds(&self) -> BoxFuture<'static, Result<Vec<HoldRecord>, String>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Records a hold.
    fn hold(&self, record: HoldRecord) -> BoxFuture<'static, Result<(), String>> {
        let _ = record;
        async { Ok(()) }.boxed()
    }
    /// Removes a hold.
    fn release(&self, bucket: &str) -> BoxFuture<'static, Result<(), String>> {
        let _ = bucket;
        async { Ok(()) }.boxed()
    }
    /// What was last seen of each bucket's lifecycle document
    /// (`safety.rule_change_grace`; docs/filer-layout.md#approval-files).
    fn rule_records(&self) -> BoxFuture<'static, Result<Vec<RuleRecord>, String>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Records what was seen of a bucket's lifecycle document.
    fn put_rule_record(
        &self,
        record: RuleRecord,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let _ = (record, now);
        async { Ok(()) }.boxed()
    }
    /// Writes one journal batch (docs/filer-layout.md#journal).
    fn write_journal(
        &self,
        day: &str,
        name: &str,
        content: Vec<u8>,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let _ = (day, name, content, now);
        async { Ok(()) }.boxed()
    }
    /// The journal's day directories.
    fn journal_days(&self) -> BoxFuture<'static, Result<Vec<String>, String>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Removes a journal day directory.
    fn drop_journal_day(&self, day: &str) -> BoxFuture<'static, Result<(), String>> {
        let _ = day;
        async { Ok(()) }.boxed()
    }
    /// The number of entries (objects, versions, markers, uploads) the
    /// walker lists in `bucket`: the size a deletion fraction is taken of.
    fn count_bucket(&self, bucket: &str) -> BoxFuture<'static, Result<u64, String>> {
        let items = self.list_bucket(bucket);
        async move { items.try_fold(0u64, |n, _| async move { Ok(n + 1) }).await }.boxed()
    }
}

/// The real cluster: one or more filers ([`FilerPool`]); every filer call and
/// the meta-log stream go to the preferred one and fail over to the next
/// (docs/meta-log.md#several-filers).
pub struct SeaweedCluster {
    pool: FilerPool,
    root: String,
    /// Pause, hold, approval and journal files, beside the cursors
    /// (through the first filer; docs/filer-layout.md).
    controls: ControlStore,
    event_buffer: usize,
    /// Read persisted log files from the volume servers
    /// (`pass.direct_log_reads`, docs/meta-log.md#direct-log-file-reads).
    direct_log_reads: bool,
    /// How far back a broken meta-log stream resumes on another filer, and
    /// how far past a range's end the filer is asked to read
    /// (`pass.reorder_margin`).
    resume_margin: Nanos,
    /// Discovery from the master, re-read by [`ClusterPort::refresh`].
    discovery: Option<Discovery>,
}

/// What [`SeaweedCluster::refresh`] re-reads from the master.
struct Discovery {
    settings: crate::config::ClusterSettings,
    gateways: GatewayPool,
    /// Client TLS towards the master.
    tls: Option<ClientTls>,
}

/// A lazily connecting channel with the filer client's keepalive settings.
/// Build it on the main runtime (its buffer task lives there).
pub fn channel(addr: &str) -> Result<Channel, String> {
    channel_tls(addr, None)
}

/// [`channel`], dialling with client TLS when `tls` is set (docs/tls.md).
pub fn channel_tls(addr: &str, tls: Option<ClientTls>) -> Result<Channel, String> {
    use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
    let endpoint = GrpcEndpoint::new(addr, &EndpointOptions::seaweed().tls(tls)).map_err(|e| {
        format!(
            "invalid address {addr:?}: {}; expected host:port",
            e.reason()
        )
    })?;
    Ok(endpoint.connect_lazy())
}

impl SeaweedCluster {
    /// Connects to the filer at `addr` (fails when it does not answer), asks
    /// for the buckets root unless `buckets_root` is set, and keeps cursors
    /// under `cursor_dir`. Every unary filer call (lookups, listing pages,
    /// cursor load/save, bucket scan) gets `filer_call_timeout`. `tls`:
    /// client TLS for the filer's gRPC port (`None`: plaintext).
    pub async fn connect(
        addr: &str,
        buckets_root: &str,
        cursor_dir: &str,
        event_buffer: usize,
        filer_call_timeout: std::time::Duration,
        tls: Option<ClientTls>,
    ) -> Result<SeaweedCluster, String> {
        SeaweedCluster::connect_many(
            &[addr.to_string()],
            buckets_root,
            cursor_dir,
            event_buffer,
            filer_call_timeout,
            tls,
        )
        .await
    }

    /// [`SeaweedCluster::connect`] over several filers: the first one that
    /// answers is preferred; fails only when none answers.
    pub async fn connect_many(
        addrs: &[String],
        buckets_root: &str,
        cursor_dir: &str,
        event_buffer: usize,
        filer_call_timeout: std::time::Duration,
        tls: Option<ClientTls>,
    ) -> Result<SeaweedCluster, String> {
        let pool = FilerPool::new(addrs, filer_call_timeout, cursor_dir, tls)?;
        let root = if buckets_root.is_empty() {
            pool.call(|n| {
                async move { n.filer.buckets_root().await.map_err(|e| e.to_string()) }.boxed()
            })
            .await?
        } else {
            buckets_root.trim_end_matches('/').to_string()
        };
        let controls = ControlStore::new(pool.primary().filer.clone(), cursor_dir);
        Ok(SeaweedCluster {
            pool,
            root,
            controls,
            event_buffer,
            direct_log_reads: false,
            resume_margin: crate::engine::progress::REORDER_MARGIN,
            discovery: None,
        })
    }

    /// Reads the filers' persisted log files straight from the volume
    /// servers (`pass.direct_log_reads`).
    pub fn with_direct_log_reads(mut self, on: bool) -> SeaweedCluster {
        self.direct_log_reads = on;
        self
    }

    /// Sets how far back a broken meta-log stream resumes on the next filer
    /// (`pass.reorder_margin`).
    pub fn with_resume_margin(mut self, margin: std::time::Duration) -> SeaweedCluster {
        self.resume_margin = i64::try_from(margin.as_nanos()).unwrap_or(i64::MAX);
        self
    }

    /// Re-reads the filer and gateway lists from `settings` (the master's
    /// membership when only `cluster.master` is set) at every pass start.
    pub fn with_discovery(
        mut self,
        settings: crate::config::ClusterSettings,
        gateways: GatewayPool,
        tls: Option<ClientTls>,
    ) -> SeaweedCluster {
        self.discovery = Some(Discovery {
            settings,
            gateways,
            tls,
        });
        self
    }

    /// The filer calls currently go to first.
    pub fn primary_filer(&self) -> String {
        self.pool.primary().addr
    }
}

impl ClusterPort for SeaweedCluster {
    fn buckets_root(&self) -> String {
        self.root.clone()
    }

    fn refresh(&self) -> BoxFuture<'static, Result<(), String>> {
        let Some(d) = &self.discovery else {
            return async { Ok(()) }.boxed();
        };
        let settings = d.settings.clone();
        let gateways = d.gateways.clone();
        let tls = d.tls.clone();
        let pool = self.pool.clone();
        async move {
            let members = crate::seaweed::discovery::resolve(&settings.wanted(), tls.as_ref()).await?;
            pool.set_addrs(&members.filers)?;
            gateways
                .set_addrs(&members.s3_grpc)
                .map_err(|e| e.to_string())?;
            tracing::info!(filers = ?members.filers, s3_grpc = ?members.s3_grpc, "cluster members from the master");
            Ok(())
        }
        .boxed()
    }

    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, String>> {
        let pool = self.pool.clone();
        let root = self.root.clone();
        async move {
            pool.call(|n| {
                let root = root.clone();
                async move {
                    list_bucket_configs(&n.filer, &root)
                        .await
                        .map_err(|e| format!("listing buckets under {root}: {e}"))
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>> {
        let pool = self.pool.clone();
        async move {
            pool.call(|n| {
                async move {
                    let mut raw = n.filer.raw();
                    retention::earliest_available(&mut raw)
                        .await
                        .map(|e| e.map(|e| e.ts_ns))
                        .map_err(|e| format!("meta-log retention probe: {e}"))
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn load_cursor(&self, shard: u8) -> BoxFuture<'static, Result<Option<ShardCursor>, String>> {
        let pool = self.pool.clone();
        async move {
            pool.call(|n| {
                async move { n.cursors.load(shard).await.map_err(|e| e.to_string()) }.boxed()
            })
            .await
        }
        .boxed()
    }

    fn save_cursor(
        &self,
        cursor: ShardCursor,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let pool = self.pool.clone();
        async move {
            pool.call(|n| {
                let cursor = cursor.clone();
                async move {
                    n.cursors
                        .save(&cursor, now)
                        .await
                        .map_err(|e| e.to_string())
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn list_bucket(&self, bucket: &str) -> BoxStream<'static, Result<WalkItem, String>> {
        self.list_bucket_after(bucket, None, None)
            .map(|r| r.map(|(_, item)| item))
            .boxed()
    }

    fn list_bucket_after(
        &self,
        bucket: &str,
        after: Option<String>,
        prefixes: Option<Vec<String>>,
    ) -> BoxStream<'static, Result<(String, WalkItem), String>> {
        let pool = self.pool.clone();
        let root = self.root.clone();
        let b = bucket.to_string();
        // Fails over only before the first item: a listing broken halfway
        // fails the walk as it always did, rather than listing twice.
        futures::stream::once(async move {
            let mut errors = Vec::new();
            for node in pool.ordered() {
                let bb = b.clone();
                let opts = ListOptions {
                    prefixes: prefixes.clone(),
                    ..ListOptions::default()
                };
                let mut items = list_bucket_after(&node.filer, &root, &b, opts, after.as_deref())
                    .positioned()
                    .map(move |r| r.map_err(|e| format!("listing bucket {bb}: {e}")))
                    .boxed();
                match items.next().await {
                    Some(Err(e)) => errors.push(format!("filer {}: {e}", node.addr)),
                    first => {
                        pool.prefer(&node.addr);
                        return futures::stream::iter(first).chain(items).boxed();
                    }
                }
            }
            let msg = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("every filer failed: {}", errors.join("; "))
            };
            futures::stream::iter([Err(msg)]).boxed()
        })
        .flatten()
        .boxed()
    }

    fn lookup(&self, dir: &str, name: &str) -> BoxFuture<'static, Result<Option<Entry>, String>> {
        let pool = self.pool.clone();
        let (dir, name) = (dir.to_string(), name.to_string());
        async move {
            pool.call(|n| {
                let (dir, name) = (dir.clone(), name.clone());
                async move {
                    n.filer
                        .lookup(&dir, &name)
                        .await
                        .map_err(|e| format!("lookup {dir}/{name}: {e}"))
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, String>> {
        let pool = self.pool.clone();
        let dir = dir.to_string();
        async move {
            pool.call(|n| {
                let dir = dir.clone();
                async move {
                    n.filer
                        .list_all(&dir, crate::seaweed::filer::DEFAULT_PAGE)
                        .map(|r| r.map_err(|e| format!("listing {dir}: {e}")))
                        .collect::<Vec<_>>()
                        .await
                        .into_iter()
                        .collect()
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>> {
        let pool = self.pool.clone();
        async move {
            if pool.ordered().len() != 1 {
                return Ok(None);
            }
            pool.call(|n| {
                async move {
                    n.filer
                        .clock()
                        .await
                        .map(Some)
                        .map_err(|e| format!("filer clock: {e}"))
                }
                .boxed()
            })
            .await
        }
        .boxed()
    }

    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, String>> {
        let params = SubscribeParams {
            buckets_root: self.root.clone(),
            since_ns: since,
            until_ns: until,
            client_name: DEFAULT_CLIENT_NAME.to_string(),
        };
        let options = ReaderOptions {
            capacity: self.event_buffer.max(1),
            direct_log_reads: self.direct_log_reads,
            // An out-of-order event's log record can be stamped past its
            // range's end by as much as the margin covers.
            until_slack: std::time::Duration::from_nanos(self.resume_margin.unsigned_abs()),
            ..ReaderOptions::default()
        };
        let pool = self.pool.clone();
        let margin = self.resume_margin;
        async move {
            // Several filers on their own stores: a filer's aggregated log
            // can lack its peers' events for good (after a restart), so each
            // filer's own log is read and the logs merged; all must answer,
            // and a broken stream cannot move (docs/meta-log.md#several-filers).
            if let StoreCheck::Separate(filers) = pool.store_check().await? {
                return open_merged(&pool, &params, options, filers, options.capacity).await;
            }
            // One store (or one filer): the stream may resume on any filer.
            // The first open fails the call itself when no filer serves it.
            // One filer: a break fails the pass, nothing to remember.
            let dedup = if pool.ordered().len() > 1 {
                ResumeDedup::new(margin)
            } else {
                ResumeDedup::never_resumed()
            };
            let (node, reader) = open_on_any(&pool, &params, options, &dedup).await?;
            // Batches (one per filer response) between the tasks; single
            // events to the caller, taken from a batch without a wake-up each.
            // Two batches in flight: the read-ahead in events is the reader's
            // (`capacity`); a response can carry thousands of events, so a
            // channel of `capacity` batches could hold millions.
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let source = StreamSource {
                pool,
                params,
                options,
            };
            tokio::spawn(follow(source, dedup, node, reader, tx));
            Ok(tokio_stream::wrappers::ReceiverStream::new(rx)
                .flat_map(|batch: Result<Vec<MetaEvent>, String>| match batch {
                    Ok(events) => futures::stream::iter(events.into_iter().map(Ok)).left_stream(),
                    Err(e) => futures::stream::iter([Err(e)]).right_stream(),
                })
                .boxed())
        }
        .boxed()
    }

    fn paused(&self) -> BoxFuture<'static, Result<Vec<PauseRecord>, String>> {
        let store = self.controls.clone();
        async move { store.paused().await }.boxed()
    }

    fn pause(
        &self,
        bucket: &str,
        now: Nanos,
        reason: &str,
    ) -> BoxFuture<'static, Result<PauseRecord, String>> {
        let store = self.controls.clone();
        let (bucket, reason) = (bucket.to_string(), reason.to_string());
        async move { store.pause(&bucket, now, &reason).await }.boxed()
    }

    fn resume(&self, bucket: &str) -> BoxFuture<'static, Result<bool, String>> {
        let store = self.controls.clone();
        let bucket = bucket.to_string();
        async move { store.resume(&bucket).await }.boxed()
    }

    fn approvals(&self) -> BoxFuture<'static, Result<Vec<ApprovalRecord>, String>> {
        let store = self.controls.clone();
        async move { store.approvals().await }.boxed()
    }

    fn approve(
        &self,
        bucket: &str,
        now: Nanos,
    ) -> BoxFuture<'static, Result<ApprovalRecord, String>> {
        let store = self.controls.clone();
        let bucket = bucket.to_string();
        async move { store.approve(&bucket, now).await }.boxed()
    }

    fn clear_approval(&self, bucket: &str) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        let bucket = bucket.to_string();
        async move { store.clear_approval(&bucket).await }.boxed()
    }

    fn holds(&self) -> BoxFuture<'static, Result<Vec<HoldRecord>, String>> {
        let store = self.controls.clone();
        async move { store.holds().await }.boxed()
    }

    fn hold(&self, record: HoldRecord) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        async move { store.hold(&record).await }.boxed()
    }

    fn release(&self, bucket: &str) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        let bucket = bucket.to_string();
        async move { store.release(&bucket).await }.boxed()
    }

    fn rule_records(&self) -> BoxFuture<'static, Result<Vec<RuleRecord>, String>> {
        let store = self.controls.clone();
        async move { store.rule_records().await }.boxed()
    }

    fn write_journal(
        &self,
        day: &str,
        name: &str,
        content: Vec<u8>,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        let (day, name) = (day.to_string(), name.to_string());
        async move { store.write_journal(&day, &name, content, now).await }.boxed()
    }

    fn journal_days(&self) -> BoxFuture<'static, Result<Vec<String>, String>> {
        let store = self.controls.clone();
        async move { store.journal_days().await }.boxed()
    }

    fn drop_journal_day(&self, day: &str) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        let day = day.to_string();
        async move { store.drop_journal_day(&day).await }.boxed()
    }

    fn put_rule_record(
        &self,
        record: RuleRecord,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let store = self.controls.clone();
        async move { store.put_rule_record(&record, now).await }.boxed()
    }
}

/// Why [`connect_cluster`] failed.
#[derive(Debug)]
pub enum ConnectError {
    /// A setting cannot work (exit 2): a malformed address.
    Config(String),
    /// No filer answered, or discovery failed (exit 1; `serve` retries).
    Unreachable(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Config(m) | ConnectError::Unreachable(m) => f.write_str(m),
        }
    }
}

/// The cluster and delete adapters for `s`: the configured filers and
/// gateways, or the master's membership (`cluster.master`), which every pass
/// then re-reads (docs/grpc.md#discovery). Build on the main runtime.
pub async fn connect_cluster(
    s: &crate::config::Settings,
    tls: Option<ClientTls>,
) -> Result<(SeaweedCluster, SeaweedDelete), ConnectError> {
    let members = crate::seaweed::discovery::resolve(&s.cluster.wanted(), tls.as_ref())
        .await
        .map_err(ConnectError::Unreachable)?;
    let deletes = SeaweedDelete::connect_many(&members.s3_grpc, tls.clone())
        .map_err(|e| ConnectError::Config(format!("configuration key `cluster.s3_grpc`: {e}")))?;
    let cluster = SeaweedCluster::connect_many(
        &members.filers,
        &s.cluster.buckets_root,
        &s.cursor.dir,
        s.pass.event_buffer,
        s.cluster.filer_call_timeout,
        tls.clone(),
    )
    .await
    .map_err(|e| {
        if e.starts_with("invalid address") {
            ConnectError::Config(format!("configuration key `cluster.filer`: {e}"))
        } else {
            ConnectError::Unreachable(format!("filer {}: {e}", members.filers.join(",")))
        }
    })?
    .with_resume_margin(s.pass.reorder_margin)
    .with_direct_log_reads(s.pass.direct_log_reads);
    let cluster = if s.cluster.master.trim().is_empty() {
        cluster
    } else {
        cluster.with_discovery(s.cluster.clone(), deletes.gateways(), tls)
    };
    Ok((cluster, deletes))
}

/// Opens the subscription on the preferred filer or, failing that, the next,
/// from where `dedup` says the stream stands.
async fn open_on_any(
    pool: &FilerPool,
    params: &SubscribeParams,
    options: ReaderOptions,
    dedup: &ResumeDedup,
) -> Result<(String, MetaLogReader), String> {
    let mut errors = Vec::new();
    let order = pool.ordered();
    let single = order.len() == 1;
    for node in order {
        let p = SubscribeParams {
            since_ns: dedup.since(params.since_ns),
            ..params.clone()
        };
        match MetaLogReader::open(node.channel.clone(), p, options).await {
            Ok(r) => {
                pool.prefer(&node.addr);
                return Ok((node.addr, r));
            }
            Err(e) if single => return Err(e.to_string()),
            Err(e) => errors.push(format!("filer {}: {e}", node.addr)),
        }
    }
    Err(format!(
        "meta-log: no filer could serve the subscription: {}",
        errors.join("; ")
    ))
}

/// Opens `SubscribeLocalMetadata` on every filer of `filers` (their own
/// stores) and merges the streams by `ts_ns` in a task
/// (docs/meta-log.md#several-filers). A filer that refuses fails the call,
/// naming it: its events are in no other log.
async fn open_merged(
    pool: &FilerPool,
    params: &SubscribeParams,
    options: ReaderOptions,
    filers: Vec<(String, i32)>,
    capacity: usize,
) -> Result<EventStream, String> {
    let nodes = pool.ordered();
    let opened = futures::future::join_all(filers.iter().map(|(addr, sig)| {
        let node = nodes.iter().find(|n| &n.addr == addr).cloned();
        let (addr, sig, params) = (addr.clone(), *sig, params.clone());
        async move {
            let node = node.ok_or_else(|| format!("filer {addr}: left the pool"))?;
            MetaLogReader::open_local(node.channel.clone(), params, options)
                .await
                .map(|reader| LocalLog {
                    addr: addr.clone(),
                    signature: sig,
                    items: reader.map_err(|e| e.to_string()).boxed(),
                })
                .map_err(|e| format!("filer {addr}: {e}"))
        }
    }))
    .await;
    let mut logs = Vec::with_capacity(opened.len());
    let mut errors = Vec::new();
    for r in opened {
        match r {
            Ok(l) => logs.push(l),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(format!(
            "meta-log: {}; the filers have their own stores, so a pass needs every filer's own \
             log: bring it back, or remove it from `cluster.filer` once its writes are no longer \
             needed (docs/meta-log.md#several-filers)",
            errors.join("; ")
        ));
    }
    tracing::debug!(
        filers = logs.len(),
        "meta-log: merging each filer's own log"
    );
    let (tx, rx) = tokio::sync::mpsc::channel(capacity);
    tokio::spawn(merge_logs(logs, tx));
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx).boxed())
}

/// One filer's own log in a merged pass: its flattened responses (events,
/// and position marks without an entry), `Err` then end when it broke.
struct LocalLog {
    addr: String,
    signature: i32,
    items: BoxStream<'static, Result<SubscribeMetadataResponse, String>>,
}

/// Feeds the merge of every filer's own log to `tx`, in `ts_ns` order
/// ([`LogMerge`]); each filer's keepalives move its position. Changes a filer
/// applied for a peer are dropped (the peer's own log has them). A stream
/// that breaks ends the pass with an error naming its filer; it is not
/// resumed elsewhere, since no other filer's log holds its events.
async fn merge_logs(
    mut logs: Vec<LocalLog>,
    tx: tokio::sync::mpsc::Sender<Result<MetaEvent, String>>,
) {
    let pool: Vec<i32> = logs.iter().map(|l| l.signature).collect();
    let mut merge: LogMerge<MetaEvent> = LogMerge::new(logs.len());
    let mut applied_for_peers = 0u64;
    // Each stream's last event: a filer's own log can hand over the event at
    // the seam between its persisted files and its memory buffer twice in a
    // row (docs/meta-log.md#duplicates); the repeat is dropped here.
    let mut last: Vec<Option<(Nanos, u64)>> = vec![None; logs.len()];
    let mut repeats = 0u64;
    loop {
        while let Some((_, ev)) = merge.pop() {
            if tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
        if merge.done() {
            tracing::debug!(applied_for_peers, repeats, "meta-log: merged logs ended");
            return;
        }
        let (first, more) = {
            let mut w = merge.wanted();
            (w.next(), w.next().is_some())
        };
        let (i, item) = if let (Some(only), false) = (first, more) {
            // The usual case once every stream has a head: the one just
            // released must speak again. No select (and no allocation).
            (only, logs[only].items.next().await)
        } else {
            let wanted: Vec<usize> = merge.wanted().collect();
            let waits = logs
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| wanted.contains(i))
                .map(|(i, l)| async move { (i, l.items.next().await) }.boxed());
            // `next` is cancel-safe: the losers lose nothing.
            futures::future::select_all(waits).await.0
        };
        let log = &logs[i];
        match item {
            None => merge.end(i),
            Some(Err(e)) => {
                let _ = tx
                    .send(Err(format!(
                        "meta-log stream on filer {} broke: {e}; not resumed on another filer: \
                         the filers have their own stores, so the others lack the events written \
                         through {} (docs/meta-log.md#several-filers)",
                        log.addr, log.addr
                    )))
                    .await;
                return;
            }
            Some(Ok(resp)) => {
                let ts = resp.ts_ns;
                let applied = resp
                    .event_notification
                    .as_ref()
                    .is_some_and(|n| applied_for_peer(&n.signatures, log.signature, &pool));
                // Taken apart, not copied (docs/meta-log.md#replay-batches).
                match MetaEvent::from_owned(resp) {
                    None => merge.advance(i, ts),
                    Some(_) if applied => {
                        applied_for_peers += 1;
                        merge.advance(i, ts);
                    }
                    Some(ev) => {
                        let key = (ev.ts_ns, identity_hash(&ev));
                        if last[i] == Some(key) {
                            repeats += 1;
                            merge.advance(i, ev.ts_ns);
                            continue;
                        }
                        last[i] = Some(key);
                        if merge.offer(i, ev.ts_ns, ev).is_err() {
                            let _ = tx
                                .send(Err(format!(
                                    "meta-log merge: filer {} sent an event while its last one \
                                     was still pending (a bug; the pass stops here)",
                                    log.addr
                                )))
                                .await;
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// A hash of an event's identity (directory, old name, new parent, new
/// name), computed without copying them: with the same `ts_ns`, equal
/// hashes mean the same event (one in 2^64 otherwise).
fn identity_hash(e: &MetaEvent) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    e.directory.hash(&mut h);
    e.old_entry.as_ref().map(|x| x.name.as_str()).hash(&mut h);
    e.new_parent_path.hash(&mut h);
    e.new_entry.as_ref().map(|x| x.name.as_str()).hash(&mut h);
    h.finish()
}

/// Where a pass's stream comes from (filers sharing one store).
struct StreamSource {
    pool: FilerPool,
    params: SubscribeParams,
    options: ReaderOptions,
}

/// Feeds one pass's events to `tx`; when the stream breaks, resumes it on the
/// next filer `pass.reorder_margin` before the newest delivered event and
/// drops what was delivered already (docs/meta-log.md#several-filers). Gives
/// up, with an error item, when no filer serves it or after more breaks than
/// twice the filers (a stream that keeps breaking is not a failover).
async fn follow(
    source: StreamSource,
    mut dedup: ResumeDedup,
    mut node: String,
    mut reader: MetaLogReader,
    tx: tokio::sync::mpsc::Sender<Result<Vec<MetaEvent>, String>>,
) {
    let StreamSource {
        pool,
        params,
        options,
    } = source;
    let mut breaks = 0usize;
    loop {
        match reader.recv_batch().await {
            // The reader hands out flattened responses (one event each):
            // taken apart, not copied.
            Some(Ok(batch)) => {
                let events: Vec<MetaEvent> = batch
                    .into_iter()
                    .filter_map(MetaEvent::from_owned)
                    .filter(|ev| dedup.admit(ev))
                    .collect();
                if !events.is_empty() && tx.send(Ok(events)).await.is_err() {
                    return;
                }
            }
            None => return,
            Some(Err(e)) => {
                let filers = pool.ordered().len();
                breaks += 1;
                if filers == 1 || breaks > 2 * filers {
                    let _ = tx.send(Err(e.to_string())).await;
                    return;
                }
                tracing::warn!(filer = %node, error = %e, resume_from = dedup.since(params.since_ns),
                    "meta-log stream broke; resuming on the next filer");
                pool.demote(&node);
                match open_on_any(&pool, &params, options, &dedup).await {
                    Ok((n, r)) => {
                        node = n;
                        reader = r;
                    }
                    Err(e2) => {
                        let _ = tx.send(Err(format!("{e}; then {e2}"))).await;
                        return;
                    }
                }
            }
        }
    }
}

/// `LifecycleDelete` over the S3 gateways' gRPC ports, spread across them
/// ([`GatewayPool`], docs/lifecycle-delete.md#several-gateways).
pub struct SeaweedDelete {
    gateways: GatewayPool,
}

impl SeaweedDelete {
    /// A client for `addr` (connects lazily; build on the main runtime),
    /// with client TLS when `tls` is set.
    pub async fn connect(addr: &str, tls: Option<ClientTls>) -> Result<SeaweedDelete, String> {
        SeaweedDelete::connect_many(&[addr.to_string()], tls)
    }

    /// Clients for every address in `addrs` (lazily; build on the main runtime).
    pub fn connect_many(addrs: &[String], tls: Option<ClientTls>) -> Result<SeaweedDelete, String> {
        GatewayPool::new(addrs, tls)
            .map(|gateways| SeaweedDelete { gateways })
            .map_err(|e| e.to_string())
    }

    /// The gateway set, shared with [`SeaweedCluster::with_discovery`].
    pub fn gateways(&self) -> GatewayPool {
        self.gateways.clone()
    }
}

impl DeletePort<DeleteRequest> for SeaweedDelete {
    fn call(&self, call: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        let gateways = self.gateways.clone();
        let req = call.clone();
        async move {
            match gateways.delete(&req).await {
                Ok(verdict) => Ok(verdict),
                Err(e @ DeleteError::Transport { .. }) => Err(AttemptError {
                    retryable: e.is_retryable(),
                    message: e.to_string(),
                }),
                // Refused locally: the server would answer BLOCKED, so it halts
                // the shard like BLOCKED does instead of being retried.
                Err(e) => Ok(CallResult::answered(DeleteOutcome::Blocked, e.to_string())),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::EventNotification;

    fn ev(ts: Nanos, name: &str, signatures: &[i32]) -> Result<SubscribeMetadataResponse, String> {
        Ok(SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: ts,
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(Entry {
                    name: name.into(),
                    ..Default::default()
                })),
                signatures: signatures.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// A position mark, as `MetaLogReader::open_local` forwards keepalives.
    fn mark(ts: Nanos) -> Result<SubscribeMetadataResponse, String> {
        Ok(SubscribeMetadataResponse {
            ts_ns: ts,
            ..Default::default()
        })
    }

    fn log(
        addr: &str,
        signature: i32,
        items: Vec<Result<SubscribeMetadataResponse, String>>,
    ) -> LocalLog {
        LocalLog {
            addr: addr.into(),
            signature,
            items: futures::stream::iter(items).boxed(),
        }
    }

    /// Everything the merged stream delivers: event names, or `!error`.
    async fn run(logs: Vec<LocalLog>) -> Vec<String> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(merge_logs(logs, tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
            .map(|r| match r {
                Ok(e) => e.new_entry.map(|e| e.name).unwrap_or_default(),
                Err(e) => format!("!{e}"),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn merged_filer_logs_come_in_ts_order_without_peer_applied_copies_or_repeats() {
        let a = log(
            "filer-a:18888",
            1,
            vec![
                ev(10, "a10", &[1]),
                // The seam between persisted files and memory repeats an event.
                ev(10, "a10", &[1]),
                // b20 as filer A applied it for filer B: B's own log has it.
                ev(21, "b20-copy", &[2, 1]),
                ev(30, "a30", &[1]),
                // From outside the pool (another cluster's filer.sync): only here.
                ev(35, "sync35", &[99, 1]),
            ],
        );
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(20, "b20", &[2]), mark(25), ev(40, "b40", &[2])],
        );
        assert_eq!(
            run(vec![a, b]).await,
            ["a10", "b20", "a30", "sync35", "b40"]
        );
    }

    #[tokio::test]
    async fn one_filer_log_ending_early_lets_the_other_finish() {
        let a = log("filer-a:18888", 1, vec![]);
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(1, "b1", &[2]), ev(2, "b2", &[2]), ev(3, "b3", &[2])],
        );
        assert_eq!(run(vec![a, b]).await, ["b1", "b2", "b3"]);
    }

    #[tokio::test]
    async fn a_broken_filer_log_fails_the_merged_pass_naming_the_filer() {
        let a = log(
            "filer-a:18888",
            1,
            vec![ev(10, "a10", &[1]), Err("transport error".into())],
        );
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(5, "b5", &[2]), ev(50, "b50", &[2])],
        );
        let got = run(vec![a, b]).await;
        assert_eq!(got[..2], ["b5", "a10"], "{got:?}");
        assert_eq!(got.len(), 3, "nothing after the error: {got:?}");
        assert!(
            got[2].starts_with('!')
                && got[2].contains("filer-a:18888")
                && got[2].contains("transport error")
                && got[2].contains("not resumed"),
            "{got:?}"
        );
    }
}
