//! The real cluster behind the [`ClusterPort`]: [`SeaweedCluster`] (filer
//! pool, gateways, discovery, cursors, controls, listings, the meta-log).
//! Deletes go through `pass::gateways`; `pass::runner::connect_cluster`
//! builds both from the settings.

use std::future::Future;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};

use crate::engine::cursor::{FilerRegistrations, ShardCursor};
use crate::engine::reclaim::VolumeUsage;
use crate::engine::{MetaEvent, Nanos, WalkItem};
use crate::pb::filer_pb::Entry;
use crate::seaweed::buckets::{BucketScan, list_bucket_configs};
use crate::seaweed::controls::ControlStore;
use crate::seaweed::discovery::MasterError;
use crate::seaweed::gateway_pool::GatewayPool;
use crate::seaweed::lister::{ListOptions, list_bucket_after};
use crate::seaweed::logfile::VolumeAccess;
use crate::seaweed::metalog::{DEFAULT_CLIENT_NAME, ReaderOptions, SubscribeParams};
use crate::seaweed::pool::{FilerNode, FilerPool};
use crate::seaweed::resume_dedup::ResumeDedup;
use crate::seaweed::retention;
use crate::seaweed::store_check::StoreCheck;
use crate::seaweed::tls::ClientTls;
use crate::seaweed::volumes;

use crate::pass::cluster_error::ClusterError;
use crate::pass::log_streams::{follow, open_merged, open_on_any};
use crate::pass::ports::{ClusterPort, EventStream, FilerClock};

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
    /// Read persisted log files from the volume servers, this way
    /// (`pass.direct_log_reads`, docs/meta-log.md#direct-log-file-reads).
    direct_log_reads: Option<VolumeAccess>,
    /// How far back a broken meta-log stream resumes on another filer, and
    /// how far past a range's end the filer is asked to read
    /// (`pass.reorder_margin`).
    resume_margin: Nanos,
    /// Discovery from the master, re-read by [`ClusterPort::refresh`].
    discovery: Option<Discovery>,
    /// `cluster.master` (empty: the filer's first master) and the client
    /// TLS towards it, for the volume reports and vacuum.
    master: String,
    master_tls: Option<ClientTls>,
}

/// What [`SeaweedCluster::refresh`] re-reads from the master.
#[derive(Clone)]
struct Discovery {
    settings: crate::config::ClusterSettings,
    gateways: GatewayPool,
    tls: Option<ClientTls>,
}

impl SeaweedCluster {
    /// Connects to the filers at `addrs` (the first one that answers is
    /// preferred; fails only when none answers), asks for the buckets root
    /// unless `buckets_root` is set, and keeps cursors under `cursor_dir`.
    /// Every unary filer call (lookups, listing pages, cursor load/save,
    /// bucket scan) gets `filer_call_timeout`. `tls`: client TLS for the
    /// filers' gRPC ports (`None`: plaintext).
    pub async fn connect_many(
        addrs: &[String],
        buckets_root: &str,
        cursor_dir: &str,
        event_buffer: usize,
        filer_call_timeout: std::time::Duration,
        tls: Option<ClientTls>,
    ) -> Result<SeaweedCluster, ClusterError> {
        let pool = FilerPool::new(addrs, filer_call_timeout, cursor_dir, tls)?;
        let root = if buckets_root.is_empty() {
            pool.call(|n| {
                async move { n.filer.buckets_root().await.map_err(ClusterError::from) }.boxed()
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
            direct_log_reads: None,
            resume_margin: crate::engine::progress::REORDER_MARGIN,
            discovery: None,
            master: String::new(),
            master_tls: None,
        })
    }

    /// The master to read volumes from and vacuum through: `master` (empty:
    /// the one the filer names), with client `tls`.
    pub fn with_master(mut self, master: &str, tls: Option<ClientTls>) -> Self {
        self.master = master.trim().to_string();
        self.master_tls = tls;
        self
    }

    /// `call` on the master's gRPC address (`cluster.master`, else the first
    /// master the filer reports) with its client TLS.
    fn on_master<T: Send + 'static, F>(
        &self,
        call: impl FnOnce(String, Option<ClientTls>) -> F + Send + 'static,
    ) -> BoxFuture<'static, Result<T, ClusterError>>
    where
        F: Future<Output = Result<T, MasterError>> + Send,
    {
        let master = self.on_filer(self.master.clone(), |n, configured| async move {
            Ok(crate::seaweed::discovery::master_of(&n.filer, &configured).await?)
        });
        let tls = self.master_tls.clone();
        async move { Ok(call(master.await?, tls).await?) }.boxed()
    }

    /// Reads the filers' persisted log files straight from the volume
    /// servers (`pass.direct_log_reads`) as `access` says; `None`: off.
    pub fn with_direct_log_reads(mut self, access: Option<VolumeAccess>) -> SeaweedCluster {
        self.direct_log_reads = access;
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

    /// `call` with `args` on the preferred filer, failing over to the next
    /// ([`FilerPool::call`]).
    fn on_filer<A, T, F>(
        &self,
        args: A,
        call: impl Fn(FilerNode, A) -> F + Send + Sync + 'static,
    ) -> BoxFuture<'static, Result<T, ClusterError>>
    where
        A: Clone + Send + Sync + 'static,
        T: Send + 'static,
        F: Future<Output = Result<T, ClusterError>> + Send + 'static,
    {
        let pool = self.pool.clone();
        async move { pool.call(move |n| call(n, args.clone()).boxed()).await }.boxed()
    }

    /// `read` on every filer at once, the entries of all put together; one
    /// that fails fails the whole read, naming it (its failure is noted in
    /// the pool): a store not read cannot say an entry is gone.
    fn on_every_store(
        &self,
        read: impl Fn(FilerNode) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>>,
    ) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        let pool = self.pool.clone();
        let reads: Vec<_> = pool
            .ordered()
            .into_iter()
            .map(|n| {
                let addr = n.addr.clone();
                read(n).map(move |r| (addr, r))
            })
            .collect();
        async move {
            let mut all = Vec::new();
            for (addr, r) in futures::future::join_all(reads).await {
                match r {
                    Ok(entries) => all.extend(entries),
                    Err(e) => {
                        pool.note_failure(&addr, &e.to_string());
                        return Err(e.on_filer(addr));
                    }
                }
            }
            Ok(all)
        }
        .boxed()
    }
}

impl ClusterPort for SeaweedCluster {
    fn buckets_root(&self) -> String {
        self.root.clone()
    }

    fn refresh(&self) -> BoxFuture<'static, Result<(), ClusterError>> {
        let Some(d) = &self.discovery else {
            // Filers named in the settings: the master may list one more
            // whose writes no log of theirs holds (docs/meta-log.md#unread-filers).
            // With discovery the pool is the master's list already.
            let (pool, master) = (self.pool.clone(), self.master.clone());
            return async move {
                pool.check_unread_filers(&master)
                    .await
                    .map_err(ClusterError::StoreCheck)
            }
            .boxed();
        };
        let (d, pool) = (d.clone(), self.pool.clone());
        async move {
            let members = crate::seaweed::discovery::resolve(&d.settings.wanted(), d.tls.as_ref())
                .await
                .map_err(ClusterError::Discovery)?;
            pool.set_addrs(&members.filers)?;
            d.gateways.set_addrs(&members.s3_grpc)?;
            tracing::info!(filers = ?members.filers, s3_grpc = ?members.s3_grpc, "cluster members from the master");
            Ok(())
        }
        .boxed()
    }

    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, ClusterError>> {
        self.on_filer(self.root.clone(), |n, root| async move {
            let scan = list_bucket_configs(&n.filer, &root).await;
            scan.map_err(|source| ClusterError::ListBuckets { root, source })
        })
    }

    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>> {
        self.on_filer((), |n, ()| async move {
            let earliest = retention::earliest_available(&mut n.filer.raw()).await?;
            Ok(earliest.map(|e| e.ts_ns))
        })
    }

    fn load_cursor(
        &self,
        shard: u8,
    ) -> BoxFuture<'static, Result<Option<ShardCursor>, ClusterError>> {
        self.on_filer(
            shard,
            |n, shard| async move { Ok(n.cursors.load(shard).await?) },
        )
    }

    fn save_cursor(
        &self,
        cursor: ShardCursor,
        now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        self.on_filer(cursor, move |n, c| async move {
            Ok(n.cursors.save(&c, now).await?)
        })
    }

    fn list_bucket(&self, bucket: &str) -> BoxStream<'static, Result<WalkItem, ClusterError>> {
        self.list_bucket_after(bucket, None, None)
            .map(|r| r.map(|(_, item)| item))
            .boxed()
    }

    fn list_bucket_after(
        &self,
        bucket: &str,
        after: Option<String>,
        prefixes: Option<Vec<String>>,
    ) -> BoxStream<'static, Result<(String, WalkItem), ClusterError>> {
        let pool = self.pool.clone();
        let root = self.root.clone();
        let b = bucket.to_string();
        // One listing: `node`'s, its failures noted in the pool.
        let listing = move |node: &FilerNode| {
            let (bb, pool, addr) = (b.clone(), pool.clone(), node.addr.clone());
            let opts = ListOptions {
                prefixes: prefixes.clone(),
                ..ListOptions::default()
            };
            list_bucket_after(&node.filer, &root, &b, opts, after.as_deref())
                .positioned()
                .map(move |r| {
                    r.map_err(|source| {
                        pool.note_failure(&addr, &source.to_string());
                        ClusterError::ListBucket {
                            bucket: bb.clone(),
                            source,
                        }
                    })
                })
                .boxed()
        };
        if self.pool.stores_may_differ() {
            // A store of its own per filer: after a filer crash an entry
            // can be left on one store only, whichever gateway shows it, so
            // the walk lists every store (docs/meta-log.md#filer-crash).
            let listings = self
                .pool
                .ordered()
                .iter()
                .map(|n| {
                    let addr = n.addr.clone();
                    listing(n)
                        .map(move |r| r.map_err(|e| e.on_filer(addr.clone())))
                        .boxed()
                })
                .collect();
            return merge_listings(listings);
        }
        let pool = self.pool.clone();
        // Fails over only before the first item: a listing broken halfway
        // fails the walk as it always did, rather than listing twice.
        futures::stream::once(async move {
            let mut errors = Vec::new();
            for node in pool.ordered() {
                let mut items = listing(&node);
                match items.next().await {
                    Some(Err(e)) => errors.push((node.addr.clone(), e)),
                    first => {
                        pool.prefer(&node.addr);
                        return futures::stream::iter(first).chain(items).boxed();
                    }
                }
            }
            let e = if errors.len() == 1 {
                let (addr, e) = errors.remove(0);
                e.on_filer(addr)
            } else {
                ClusterError::EveryFilerFailed(errors)
            };
            futures::stream::iter([Err(e)]).boxed()
        })
        .flatten()
        .boxed()
    }

    fn lookup(
        &self,
        dir: &str,
        name: &str,
    ) -> BoxFuture<'static, Result<Option<Entry>, ClusterError>> {
        let args = (dir.to_string(), name.to_string());
        self.on_filer(args, |n, (dir, name)| async move {
            let entry = n.filer.lookup(&dir, &name).await;
            entry.map_err(|source| ClusterError::Lookup { dir, name, source })
        })
    }

    fn list_dir(&self, dir: &str) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        self.on_filer(dir.to_string(), list_dir_on)
    }

    fn volumes(&self) -> BoxFuture<'static, Result<Option<Vec<VolumeUsage>>, ClusterError>> {
        self.on_master(
            |m, tls| async move { volumes::list_volumes(&m, tls.as_ref()).await.map(Some) },
        )
    }

    fn ttl_audit(
        &self,
        run: crate::seaweed::ttl_scan::AuditRun,
    ) -> BoxFuture<'static, Result<Option<crate::engine::audit::AuditReport>, ClusterError>> {
        let args = (
            self.master.clone(),
            self.master_tls.clone(),
            self.root.clone(),
            run,
        );
        self.on_filer(args, |n, (master, tls, root, run)| async move {
            let audit =
                crate::seaweed::ttl_scan::audit_cluster(&n.filer, &master, tls, &root, &run);
            Ok(Some(audit.await?))
        })
    }

    fn vacuum(
        &self,
        id: u32,
        threshold: f64,
        timeout: std::time::Duration,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        self.on_master(move |m, tls| async move {
            volumes::vacuum_volume(&m, tls.as_ref(), id, threshold, timeout).await
        })
    }

    fn filer_registrations(
        &self,
    ) -> BoxFuture<'static, Result<Option<FilerRegistrations>, ClusterError>> {
        use crate::seaweed::discovery::filer_registrations;
        // Only the filer's configuration goes through the pool: a master
        // that fails is no filer failure (the pool would note one, and move
        // its calls to the next filer).
        let config = self.on_filer(
            (),
            |n, ()| async move { Ok(n.filer.store_and_masters().await?) },
        );
        let (configured, tls) = (self.master.clone(), self.master_tls.clone());
        async move {
            let (_, masters, group) = config.await?;
            let regs = filer_registrations(&configured, &masters, &group, tls.as_ref());
            Ok(Some(regs.await?))
        }
        .boxed()
    }

    fn weed_admin(&self) -> BoxFuture<'static, Result<Option<String>, ClusterError>> {
        self.on_master(|m, tls| async move {
            crate::seaweed::discovery::admin_presence(&m, tls.as_ref()).await
        })
    }

    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<FilerClock>, ClusterError>> {
        let vouches = self.pool.ordered().len() == 1;
        self.on_filer((), move |n, ()| async move {
            let ns = n.filer.clock().await.map_err(ClusterError::FilerClock)?;
            Ok(Some(FilerClock { ns, vouches }))
        })
    }

    fn lookup_on_every_store(
        &self,
        dir: &str,
        name: &str,
    ) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        if !self.pool.stores_may_differ() {
            let found = self.lookup(dir, name);
            return found.map(|r| r.map(|e| e.into_iter().collect())).boxed();
        }
        let (dir, name) = (dir.to_string(), name.to_string());
        self.on_every_store(move |n| {
            let (dir, name) = (dir.clone(), name.clone());
            async move {
                let entry = n.filer.lookup(&dir, &name).await;
                entry
                    .map(|e| e.into_iter().collect())
                    .map_err(|source| ClusterError::Lookup { dir, name, source })
            }
            .boxed()
        })
    }

    fn list_dir_on_every_store(
        &self,
        dir: &str,
    ) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        if !self.pool.stores_may_differ() {
            return self.list_dir(dir);
        }
        let dir = dir.to_string();
        self.on_every_store(move |n| list_dir_on(n, dir.clone()).boxed())
    }

    fn filers_failed_since(&self, since: std::time::Instant) -> Vec<String> {
        if !self.pool.stores_may_differ() {
            return Vec::new();
        }
        self.pool.failed_since(since)
    }

    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, ClusterError>> {
        let params = SubscribeParams {
            buckets_root: self.root.clone(),
            since_ns: since,
            until_ns: until,
            client_name: DEFAULT_CLIENT_NAME.to_string(),
        };
        let options = ReaderOptions {
            capacity: self.event_buffer.max(1),
            direct_log_reads: self.direct_log_reads.clone(),
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
            let stores = pool.store_check().await.map_err(ClusterError::StoreCheck)?;
            if let StoreCheck::Separate(filers) = stores {
                return open_merged(&pool, &params, &options, filers).await;
            }
            // One store (or one filer): the stream may resume on any filer.
            // The first open fails the call itself when no filer serves it.
            // One filer: a break fails the pass, nothing to remember.
            let dedup = if pool.ordered().len() > 1 {
                ResumeDedup::new(margin)
            } else {
                ResumeDedup::never_resumed()
            };
            let (node, reader) = open_on_any(&pool, &params, &options, &dedup).await?;
            // Batches (one per filer response) between the tasks; single
            // events to the caller, taken from a batch without a wake-up each.
            // Two batches in flight: the read-ahead in events is the reader's
            // (`capacity`); a response can carry thousands of events, so a
            // channel of `capacity` batches could hold millions.
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let source = (pool, params, options);
            tokio::spawn(follow(source, dedup, node, reader, tx));
            Ok(tokio_stream::wrappers::ReceiverStream::new(rx)
                .flat_map(|batch: Result<Vec<MetaEvent>, ClusterError>| match batch {
                    Ok(events) => futures::stream::iter(events.into_iter().map(Ok)).left_stream(),
                    Err(e) => futures::stream::iter([Err(e)]).right_stream(),
                })
                .boxed())
        }
        .boxed()
    }

    fn controls(&self) -> Option<ControlStore> {
        Some(self.controls.clone())
    }
}

/// Every entry of `dir` on filer `n`'s store.
async fn list_dir_on(n: FilerNode, dir: String) -> Result<Vec<Entry>, ClusterError> {
    let entries = n.filer.list_dir(&dir).await;
    entries.map_err(|source| ClusterError::ListDir { dir, source })
}

/// A walk item and its listing position, or why the listing broke.
type Listed = Result<(String, WalkItem), ClusterError>;

/// One listing of a bucket out of the same bucket listed on several stores
/// (docs/meta-log.md#filer-crash): items in listing order
/// ([`crate::engine::resume::pos_cmp`]); an item two stores hold alike is
/// given once (the first store's), one they hold differently once from each,
/// in store order (each evaluated on its own; the identity sent with each
/// delete keeps the other store's version safe). A store whose listing fails
/// fails the whole listing, so the walk vouches for nothing it did not see.
fn merge_listings(listings: Vec<BoxStream<'static, Listed>>) -> BoxStream<'static, Listed> {
    use crate::engine::resume::pos_cmp;
    let n = listings.len();
    let heads: Vec<Option<(String, WalkItem)>> = vec![None; n];
    let state = (listings, heads, vec![false; n], false);
    futures::stream::unfold(
        state,
        |(mut listings, mut heads, mut ended, broke)| async move {
            if broke {
                return None;
            }
            for i in 0..listings.len() {
                if heads[i].is_none() && !ended[i] {
                    match listings[i].next().await {
                        Some(Ok(item)) => heads[i] = Some(item),
                        Some(Err(e)) => return Some((Err(e), (listings, heads, ended, true))),
                        None => ended[i] = true,
                    }
                }
            }
            // `min_by` keeps the first of equals: the earlier store's item.
            let first = (0..heads.len())
                .filter_map(|i| heads[i].as_ref().map(|h| (i, h)))
                .min_by(|(_, a), (_, b)| pos_cmp(&a.0, &b.0))
                .map(|(i, _)| i)?;
            let item = heads[first].take()?;
            for h in &mut heads {
                if h.as_ref() == Some(&item) {
                    *h = None;
                }
            }
            Some((Ok(item), (listings, heads, ended, false)))
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pass::cluster_error::ClusterError;

    fn obj(key: &str, mtime: i64) -> (String, WalkItem) {
        let entry = Entry {
            name: key.rsplit('/').next().unwrap_or(key).into(),
            attributes: Some(crate::pb::filer_pb::FuseAttributes {
                mtime,
                ..Default::default()
            }),
            ..Default::default()
        };
        (
            key.to_string(),
            WalkItem::Object {
                key: key.to_string(),
                entry,
            },
        )
    }

    fn listing(items: Vec<Listed>) -> BoxStream<'static, Listed> {
        futures::stream::iter(items).boxed()
    }

    #[tokio::test]
    async fn listings_of_several_stores_merge_in_listing_order_each_entry_once() {
        // Store 1 lost a delete of `a/2` (it came back there); store 2 never
        // got the deletes of `a/3` and `b`. `a/1` differs between them.
        let one = vec![Ok(obj("a/1", 1)), Ok(obj("a/2", 1)), Ok(obj("c", 1))];
        let two = vec![
            Ok(obj("a/1", 2)),
            Ok(obj("a/3", 1)),
            Ok(obj("a.b", 1)),
            Ok(obj("b", 1)),
            Ok(obj("c", 1)),
        ];
        let merged: Vec<(String, WalkItem)> = merge_listings(vec![listing(one), listing(two)])
            .map(Result::unwrap)
            .collect()
            .await;
        let got: Vec<(&str, i64)> = merged
            .iter()
            .map(|(p, i)| match i {
                WalkItem::Object { entry, .. } => {
                    (p.as_str(), entry.attributes.as_ref().unwrap().mtime)
                }
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a/1", 1),
                ("a/1", 2),
                ("a/2", 1),
                ("a/3", 1),
                ("a.b", 1),
                ("b", 1),
                ("c", 1)
            ]
        );
    }

    #[tokio::test]
    async fn a_store_whose_listing_breaks_breaks_the_merged_listing() {
        let down = ClusterError::LeftPool { addr: "f2".into() };
        let one = vec![Ok(obj("a", 1)), Ok(obj("b", 1)), Ok(obj("c", 1))];
        let two = vec![Ok(obj("a", 1)), Err(down)];
        let merged: Vec<Listed> = merge_listings(vec![listing(one), listing(two)])
            .collect()
            .await;
        assert_eq!(merged.len(), 2, "{merged:?}");
        assert!(merged[0].is_ok());
        assert!(
            merged[1]
                .as_ref()
                .is_err_and(|e| e.to_string().contains("f2"))
        );
    }
}
