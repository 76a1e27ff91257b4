//! The cluster as the pass sees it: one trait for filer reads and writes and
//! the meta-log ([`ClusterPort`]); the delete RPC is [`DeletePort`](crate::pass::dispatch::DeletePort). The real
//! adapters are in `crate::pass::cluster`; actor and pass tests substitute
//! fakes.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};

use crate::engine::cursor::ShardCursor;
use crate::engine::reclaim::VolumeUsage;
use crate::engine::safety::{ApprovalRecord, HoldRecord, PauseRecord, RuleRecord};
use crate::engine::{MetaEvent, Nanos, WalkItem};
pub use crate::pass::cluster_error::ClusterError;
use crate::pb::filer_pb::Entry;
use crate::seaweed::buckets::BucketScan;

/// A stream of meta-log events for one pass: `Err` then end when it broke;
/// a plain end means the filer ended the stream normally.
pub type EventStream = BoxStream<'static, Result<MetaEvent, ClusterError>>;

/// Filer-side I/O of a pass. Errors say what failed ([`ClusterError`]).
pub trait ClusterPort: Send + Sync + 'static {
    /// The buckets root (e.g. `/buckets`).
    fn buckets_root(&self) -> String;
    /// Every bucket's lifecycle configuration (and per-bucket parse errors).
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, ClusterError>>;
    /// The meta-log horizon (`None`: nothing persisted yet).
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>>;
    /// Loads a shard's cursor (`None`: no file, cold start).
    fn load_cursor(
        &self,
        shard: u8,
    ) -> BoxFuture<'static, Result<Option<ShardCursor>, ClusterError>>;
    /// Saves a shard's cursor.
    fn save_cursor(
        &self,
        cursor: ShardCursor,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>>;
    /// Lists a bucket for the walker.
    fn list_bucket(&self, bucket: &str) -> BoxStream<'static, Result<WalkItem, ClusterError>>;
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
    ) -> BoxStream<'static, Result<(String, WalkItem), ClusterError>> {
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
    fn lookup(
        &self,
        dir: &str,
        name: &str,
    ) -> BoxFuture<'static, Result<Option<Entry>, ClusterError>>;
    /// Every entry of directory `dir` (a missing directory lists as empty),
    /// for the checks around a delete ([`crate::engine::check`]).
    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>>;
    /// Re-reads which servers to use, at the start of every pass (discovery
    /// from the master), and refuses a pass that would not read every filer
    /// it must (docs/meta-log.md#unread-filers); nothing to do by default.
    fn refresh(&self) -> BoxFuture<'static, Result<(), ClusterError>> {
        async { Ok(()) }.boxed()
    }
    /// Opens the pass's one meta-log subscription over `(since, until]`.
    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, ClusterError>>;
    /// The clock of the one filer the replay reads, taken before it reads:
    /// every event stamped a reorder margin before it was in the log by then
    /// (docs/due-index.md#filer-clock). `None` when it cannot vouch for that
    /// (several filers, each its own clock and peers' events arriving late),
    /// and in fakes.
    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// Every volume replica the master knows, for reclaimed-space reports
    /// (docs/reclaimed-space.md); `None` where there is no master to ask
    /// (fakes).
    fn volumes(&self) -> BoxFuture<'static, Result<Option<Vec<VolumeUsage>>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// Asks the master to vacuum volume `id` if its garbage ratio is at least
    /// `threshold`; answers when done.
    fn vacuum(
        &self,
        id: u32,
        threshold: f64,
        timeout: std::time::Duration,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = (threshold, timeout);
        async move { Err(ClusterError::NoMaster { volume: id }) }.boxed()
    }
    /// The legacy-TTL audit of every bucket (docs/ttl-audit.md); `None`
    /// where there is no cluster to read (fakes).
    fn ttl_audit(
        &self,
        run: crate::seaweed::ttl_scan::AuditRun,
    ) -> BoxFuture<'static, Result<Option<crate::engine::audit::AuditReport>, ClusterError>> {
        let _ = run;
        async { Ok(None) }.boxed()
    }
    /// The `weed admin` connected to the master, if one is (it runs vacuum
    /// jobs itself; docs/reclaimed-space.md#vacuum).
    fn weed_admin(&self) -> BoxFuture<'static, Result<Option<String>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// The paused buckets (`s3-lifecycled pause`), read at every pass start
    /// (docs/filer-layout.md#pause-files). Fakes without pauses keep the
    /// default: none.
    fn paused(&self) -> BoxFuture<'static, Result<Vec<PauseRecord>, ClusterError>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Pauses a bucket; answers the record written.
    fn pause(
        &self,
        bucket: &str,
        now: Nanos,
        reason: &str,
    ) -> BoxFuture<'static, Result<PauseRecord, ClusterError>> {
        let _ = (now, reason);
        let e = ClusterError::NotKept {
            action: "pause",
            bucket: bucket.to_string(),
            kept: "pauses",
        };
        async move { Err(e) }.boxed()
    }
    /// Resumes a bucket; `Ok(false)` when it was not paused.
    fn resume(&self, bucket: &str) -> BoxFuture<'static, Result<bool, ClusterError>> {
        let e = ClusterError::NotKept {
            action: "resume",
            bucket: bucket.to_string(),
            kept: "pauses",
        };
        async move { Err(e) }.boxed()
    }
    /// The approved buckets (`s3-lifecycled approve`), read at pass start
    /// when a safety rail is on (docs/filer-layout.md#approval-files).
    fn approvals(&self) -> BoxFuture<'static, Result<Vec<ApprovalRecord>, ClusterError>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Approves a bucket's held work for the next pass.
    fn approve(
        &self,
        bucket: &str,
        now: Nanos,
    ) -> BoxFuture<'static, Result<ApprovalRecord, ClusterError>> {
        let _ = now;
        let e = ClusterError::NotKept {
            action: "approve",
            bucket: bucket.to_string(),
            kept: "approvals",
        };
        async move { Err(e) }.boxed()
    }
    /// Removes a used approval.
    fn clear_approval(&self, bucket: &str) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = bucket;
        async { Ok(()) }.boxed()
    }
    /// The buckets the deletion cap holds (docs/filer-layout.md#approval-files).
    fn holds(&self) -> BoxFuture<'static, Result<Vec<HoldRecord>, ClusterError>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Records a hold.
    fn hold(&self, record: HoldRecord) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = record;
        async { Ok(()) }.boxed()
    }
    /// Removes a hold.
    fn release(&self, bucket: &str) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = bucket;
        async { Ok(()) }.boxed()
    }
    /// What was last seen of each bucket's lifecycle document
    /// (`safety.rule_change_grace`; docs/filer-layout.md#approval-files).
    fn rule_records(&self) -> BoxFuture<'static, Result<Vec<RuleRecord>, ClusterError>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Records what was seen of a bucket's lifecycle document.
    fn put_rule_record(
        &self,
        record: RuleRecord,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
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
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = (day, name, content, now);
        async { Ok(()) }.boxed()
    }
    /// The journal's day directories.
    fn journal_days(&self) -> BoxFuture<'static, Result<Vec<String>, ClusterError>> {
        async { Ok(Vec::new()) }.boxed()
    }
    /// Removes a journal day directory.
    fn drop_journal_day(&self, day: &str) -> BoxFuture<'static, Result<(), ClusterError>> {
        let _ = day;
        async { Ok(()) }.boxed()
    }
    /// The number of entries (objects, versions, markers, uploads) the
    /// walker lists in `bucket`: the size a deletion fraction is taken of.
    fn count_bucket(&self, bucket: &str) -> BoxFuture<'static, Result<u64, ClusterError>> {
        let items = self.list_bucket(bucket);
        async move { items.try_fold(0u64, |n, _| async move { Ok(n + 1) }).await }.boxed()
    }
}
