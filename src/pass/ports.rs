//! The cluster as the pass sees it: one trait for filer reads/writes and the
//! meta-log ([`ClusterPort`]), the delete RPC ([`DeletePort`]), and the real
//! adapters over [`crate::seaweed`]. Actor and pass tests substitute fakes.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use tonic::transport::Channel;

use crate::engine::DeleteRequest;
use crate::engine::cursor::ShardCursor;
use crate::engine::safety::{ApprovalRecord, HoldRecord, PauseRecord, RuleRecord};
use crate::engine::{CallResult, DeleteOutcome, MetaEvent, Nanos, WalkItem};
use crate::pass::dispatch::{AttemptError, AttemptResult, DeletePort};
use crate::pb::filer_pb::Entry;
use crate::seaweed::buckets::{BucketScan, list_bucket_configs};
use crate::seaweed::controls::ControlStore;
use crate::seaweed::cursor::CursorStore;
use crate::seaweed::delete::{DeleteClient, DeleteError};
use crate::seaweed::filer::FilerClient;
use crate::seaweed::lister::list_bucket;
use crate::seaweed::metalog::{DEFAULT_CLIENT_NAME, MetaLogReader, ReaderOptions, SubscribeParams};
use crate::seaweed::retention;

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
    /// Looks up one entry (`None`: not found), for deferred matches.
    fn lookup(&self, dir: &str, name: &str) -> BoxFuture<'static, Result<Option<Entry>, String>>;
    /// Every entry of directory `dir` (a missing directory lists as empty),
    /// for the checks around a delete ([`crate::engine::check`]).
    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, String>>;
    /// Opens the pass's one meta-log subscription over `(since, until]`.
    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, String>>;
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

/// The real cluster: a filer channel shared by every filer call.
pub struct SeaweedCluster {
    filer: FilerClient,
    channel: Channel,
    root: String,
    cursors: Arc<CursorStore>,
    controls: ControlStore,
    event_buffer: usize,
}

/// A lazily connecting channel with the filer client's keepalive settings.
/// Build it on the main runtime (its buffer task lives there).
pub fn channel(addr: &str) -> Result<Channel, String> {
    use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
    let endpoint = GrpcEndpoint::new(addr, &EndpointOptions::seaweed()).map_err(|e| {
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
    /// cursor load/save, bucket scan) gets `filer_call_timeout`.
    pub async fn connect(
        addr: &str,
        buckets_root: &str,
        cursor_dir: &str,
        event_buffer: usize,
        filer_call_timeout: std::time::Duration,
    ) -> Result<SeaweedCluster, String> {
        let channel = channel(addr)?;
        let filer =
            FilerClient::from_channel(channel.clone(), addr).with_call_timeout(filer_call_timeout);
        let root = if buckets_root.is_empty() {
            filer
                .buckets_root()
                .await
                .map_err(|e| format!("filer {addr}: {e}"))?
        } else {
            buckets_root.trim_end_matches('/').to_string()
        };
        let cursors = Arc::new(CursorStore::new(filer.clone(), cursor_dir));
        let controls = ControlStore::new(filer.clone(), cursor_dir);
        Ok(SeaweedCluster {
            filer,
            channel,
            root,
            cursors,
            controls,
            event_buffer,
        })
    }
}

impl ClusterPort for SeaweedCluster {
    fn buckets_root(&self) -> String {
        self.root.clone()
    }

    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, String>> {
        let filer = self.filer.clone();
        let root = self.root.clone();
        async move {
            list_bucket_configs(&filer, &root)
                .await
                .map_err(|e| format!("listing buckets under {root}: {e}"))
        }
        .boxed()
    }

    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>> {
        let mut raw = self.filer.raw();
        async move {
            retention::earliest_available(&mut raw)
                .await
                .map(|e| e.map(|e| e.ts_ns))
                .map_err(|e| format!("meta-log retention probe: {e}"))
        }
        .boxed()
    }

    fn load_cursor(&self, shard: u8) -> BoxFuture<'static, Result<Option<ShardCursor>, String>> {
        let store = self.cursors.clone();
        async move { store.load(shard).await.map_err(|e| e.to_string()) }.boxed()
    }

    fn save_cursor(
        &self,
        cursor: ShardCursor,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), String>> {
        let store = self.cursors.clone();
        async move { store.save(&cursor, now).await.map_err(|e| e.to_string()) }.boxed()
    }

    fn list_bucket(&self, bucket: &str) -> BoxStream<'static, Result<WalkItem, String>> {
        let b = bucket.to_string();
        list_bucket(&self.filer, &self.root, bucket)
            .map(move |r| r.map_err(|e| format!("listing bucket {b}: {e}")))
            .boxed()
    }

    fn lookup(&self, dir: &str, name: &str) -> BoxFuture<'static, Result<Option<Entry>, String>> {
        let filer = self.filer.clone();
        let (dir, name) = (dir.to_string(), name.to_string());
        async move {
            filer
                .lookup(&dir, &name)
                .await
                .map_err(|e| format!("lookup {dir}/{name}: {e}"))
        }
        .boxed()
    }

    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, String>> {
        let filer = self.filer.clone();
        let dir = dir.to_string();
        async move {
            filer
                .list_all(&dir, crate::seaweed::filer::DEFAULT_PAGE)
                .map(|r| r.map_err(|e| format!("listing {dir}: {e}")))
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect()
        }
        .boxed()
    }

    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, String>> {
        let channel = self.channel.clone();
        let params = SubscribeParams {
            buckets_root: self.root.clone(),
            since_ns: since,
            until_ns: until,
            client_name: DEFAULT_CLIENT_NAME.to_string(),
        };
        let options = ReaderOptions {
            capacity: self.event_buffer.max(1),
            ..ReaderOptions::default()
        };
        async move {
            let reader = MetaLogReader::open(channel, params, options)
                .await
                .map_err(|e| e.to_string())?;
            let events = reader
                .map(|r| match r {
                    Ok(resp) => Ok(MetaEvent::all_from_response(&resp)),
                    Err(e) => Err(e.to_string()),
                })
                .flat_map(|r| match r {
                    Ok(evs) => futures::stream::iter(evs.into_iter().map(Ok).collect::<Vec<_>>()),
                    Err(e) => futures::stream::iter(vec![Err(e)]),
                });
            Ok(events.boxed())
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

/// `LifecycleDelete` over the S3 gateway's gRPC port.
pub struct SeaweedDelete {
    client: DeleteClient,
}

impl SeaweedDelete {
    /// A client for `addr` (connects lazily; build on the main runtime).
    pub async fn connect(addr: &str) -> Result<SeaweedDelete, String> {
        DeleteClient::connect(addr)
            .await
            .map(|client| SeaweedDelete { client })
            .map_err(|e| e.to_string())
    }
}

impl DeletePort<DeleteRequest> for SeaweedDelete {
    fn call(&self, call: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        let client = self.client.clone();
        let req = call.clone();
        async move {
            match client.delete(&req).await {
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
