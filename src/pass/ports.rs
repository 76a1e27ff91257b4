//! The cluster as the pass sees it: one trait for filer reads and writes and
//! the meta-log ([`ClusterPort`]); the delete RPC is [`DeletePort`](crate::pass::dispatch::DeletePort). The real
//! adapters are in `crate::pass::cluster`; actor and pass tests substitute
//! fakes.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};

use crate::engine::cursor::{FilerRegistrations, ShardCursor};
use crate::engine::reclaim::VolumeUsage;
use crate::engine::{MetaEvent, Nanos, WalkItem};
pub use crate::pass::cluster_error::ClusterError;
use crate::pb::filer_pb::Entry;
use crate::seaweed::buckets::BucketScan;
use crate::seaweed::controls::{ControlStore, ControlsError};

/// A stream of meta-log events for one pass: `Err` then end when it broke;
/// a plain end means the filer ended the stream normally.
pub type EventStream = BoxStream<'static, Result<MetaEvent, ClusterError>>;

/// A filer's clock (`Ping`): what it stamps the events it logs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilerClock {
    /// The filer's time, ns since the epoch.
    pub ns: Nanos,
    /// It is the one filer the replay reads, so every event it stamped a
    /// reorder margin before `ns` was in its log by then
    /// (docs/due-index.md#filer-clock). Not with several filers: each has
    /// its own clock, and a peer's events arrive late.
    pub vouches: bool,
}

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
        _prefixes: Option<Vec<String>>,
    ) -> BoxStream<'static, Result<(String, WalkItem), ClusterError>> {
        let items = self
            .list_bucket(bucket)
            .map_ok(|item| (item.position(), item));
        let keep = move |(pos, _): &(String, WalkItem)| {
            futures::future::ready(crate::engine::resume::is_after(pos, after.as_deref()))
        };
        items.try_filter(keep).boxed()
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
    /// The first reachable filer's clock, read at the pass start. `None` in
    /// fakes: no bound on what the replay reads.
    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<FilerClock>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// [`ClusterPort::lookup`] on every filer's store when the filers keep
    /// stores of their own: the entries found (at most one per store). A
    /// confirming lookup settles an answer only when no store still holds
    /// the entry (docs/meta-log.md#filer-crash). One store: `lookup`.
    fn lookup_on_every_store(
        &self,
        dir: &str,
        name: &str,
    ) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        self.lookup(dir, name)
            .map(|r| r.map(|e| e.into_iter().collect()))
            .boxed()
    }
    /// [`ClusterPort::list_dir`] on every filer's store, concatenated (see
    /// [`ClusterPort::lookup_on_every_store`]).
    fn list_dir_on_every_store(
        &self,
        dir: &str,
    ) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        self.list_dir(dir)
    }
    /// The filers with a store of their own that failed a call as
    /// unavailable (down, or restarting) at or after `since`. Such a filer
    /// may have lost deletes it acknowledged before it died, and its peers
    /// may never receive them (docs/meta-log.md#filer-crash), so the pass
    /// cannot vouch for the deletes it made. Empty with one filer or a
    /// shared store, and in fakes.
    fn filers_failed_since(&self, _since: std::time::Instant) -> Vec<String> {
        Vec::new()
    }
    /// When the master registered each filer of our filer group
    /// (docs/meta-log.md#filer-restart); `None` where there is no master to
    /// ask (fakes).
    fn filer_registrations(
        &self,
    ) -> BoxFuture<'static, Result<Option<FilerRegistrations>, ClusterError>> {
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
        _threshold: f64,
        _timeout: std::time::Duration,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        async move { Err(ClusterError::NoMaster { volume: id }) }.boxed()
    }
    /// The legacy-TTL audit of every bucket (docs/ttl-audit.md); `None`
    /// where there is no cluster to read (fakes).
    fn ttl_audit(
        &self,
        _run: crate::seaweed::ttl_scan::AuditRun,
    ) -> BoxFuture<'static, Result<Option<crate::engine::audit::AuditReport>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// The `weed admin` connected to the master, if one is (it runs vacuum
    /// jobs itself; docs/reclaimed-space.md#vacuum).
    fn weed_admin(&self) -> BoxFuture<'static, Result<Option<String>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    /// The operator controls kept next to the cursors: pauses, approvals,
    /// holds, rules records, the journal (docs/filer-layout.md). `None`
    /// where the port keeps none (test doubles): a pass then reads none and
    /// writes none ([`on_controls`]), and a command that must write one is
    /// refused ([`controls_for`]).
    fn controls(&self) -> Option<ControlStore> {
        None
    }
    /// The number of entries (objects, versions, markers, uploads) the
    /// walker lists in `bucket`: the size a deletion fraction is taken of.
    fn count_bucket(&self, bucket: &str) -> BoxFuture<'static, Result<u64, ClusterError>> {
        let items = self.list_bucket(bucket);
        items
            .try_fold(0u64, |n, _| async move { Ok(n + 1) })
            .boxed()
    }
}

/// `op` on the port's operator controls, its error as [`ClusterError`];
/// where the port keeps none, what an empty store answers: nothing read,
/// nothing written.
pub async fn on_controls<T: Default, F>(
    port: &dyn ClusterPort,
    op: impl FnOnce(ControlStore) -> F,
) -> Result<T, ClusterError>
where
    F: std::future::Future<Output = Result<T, ControlsError>>,
{
    match port.controls() {
        Some(c) => Ok(op(c).await?),
        None => Ok(T::default()),
    }
}

/// The port's operator controls for a command that writes one (`action`:
/// `pause`, `resume`, `approve`, keeping `kept`); an error where the port
/// keeps none.
pub fn controls_for(
    port: &dyn ClusterPort,
    action: &'static str,
    bucket: &str,
    kept: &'static str,
) -> Result<ControlStore, ClusterError> {
    port.controls().ok_or_else(|| ClusterError::NotKept {
        action,
        bucket: bucket.to_string(),
        kept,
    })
}
