//! The actor tree with fake ports: a cold-start pass walks a bucket, deletes
//! through the dispatcher, halts only the shard whose delete came back
//! RETRY_LATER, and saves every shard's cursor; halt ordering during replay
//! (no new sends, in-flight deletes drain, cursor before the halting event),
//! the same 16 shard actors serving consecutive passes, a crashed shard
//! restarted by its supervisor and resumed by the next pass on the same actor,
//! and the per-shard in-flight window pushing back on the meta-log feed.
//! Timers run on paused tokio time, so delays are virtual and deterministic.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use s3_lifecycled::config::Settings;
use s3_lifecycled::engine::cursor::ShardCursor;
use s3_lifecycled::engine::{CallResult, DeleteOutcome, DeleteRequest};
use s3_lifecycled::engine::{Nanos, WalkItem, keys, shard_id};
use s3_lifecycled::pass::coordinator::{Coordinator, RunPass};
use s3_lifecycled::pass::dispatch::{AttemptResult, DeletePort};
use s3_lifecycled::pass::observe::PassObserver;
use s3_lifecycled::pass::options::{PassOptions, StopSignal};
use s3_lifecycled::pass::ports::{ClusterError, ClusterPort, EventStream, FilerClock};
use s3_lifecycled::pass::report::ShardOutcome;
use s3_lifecycled::pass::runner::PassRunner;
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes};
use s3_lifecycled::seaweed::buckets::{BucketScan, bucket_info};
use s3_lifecycled::status::RunOutcome;

const S: Nanos = 1_000_000_000;
const NOW: Nanos = 1_800_000_000 * S;

struct FakeCluster {
    keys: Vec<String>,
    saved: Mutex<BTreeMap<u8, ShardCursor>>,
}

/// A 5-byte file entry named `name`, modified at `mtime_s` (seconds).
pub(crate) fn file(name: &str, mtime_s: i64) -> Entry {
    Entry {
        name: name.into(),
        attributes: Some(FuseAttributes {
            mtime: mtime_s,
            file_size: 5,
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl ClusterPort for FakeCluster {
    fn buckets_root(&self) -> String {
        "/buckets".into()
    }
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, ClusterError>> {
        scan_of_bucket_b()
    }
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    fn load_cursor(
        &self,
        _shard: u8,
    ) -> BoxFuture<'static, Result<Option<ShardCursor>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    fn save_cursor(
        &self,
        c: ShardCursor,
        _now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        self.saved.lock().unwrap().insert(c.shard_id, c);
        async { Ok(()) }.boxed()
    }
    fn list_bucket(&self, _bucket: &str) -> BoxStream<'static, Result<WalkItem, ClusterError>> {
        let items: Vec<_> = self
            .keys
            .iter()
            .map(|k| {
                Ok(WalkItem::Object {
                    key: k.clone(),
                    entry: file(k, NOW / S - 30 * 86_400),
                })
            })
            .collect();
        futures::stream::iter(items).boxed()
    }
    fn lookup(
        &self,
        _d: &str,
        _n: &str,
    ) -> BoxFuture<'static, Result<Option<Entry>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    fn list_dir(&self, _d: &str) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        async { Ok(vec![]) }.boxed()
    }
    fn subscribe(
        &self,
        _s: Nanos,
        _u: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, ClusterError>> {
        async { Ok(futures::stream::empty().boxed()) }.boxed()
    }
}

struct FakeDelete {
    refuse: String,
    calls: AtomicUsize,
    per_key: Mutex<HashMap<String, usize>>,
}

impl DeletePort<DeleteRequest> for FakeDelete {
    fn call(&self, c: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self
            .per_key
            .lock()
            .unwrap()
            .entry(c.object_path.clone())
            .or_default() += 1;
        let r = if c.object_path == self.refuse {
            Ok(CallResult::answered(DeleteOutcome::RetryLater, "slow down"))
        } else {
            Ok(CallResult::answered(DeleteOutcome::Done, ""))
        };
        async move { r }.boxed()
    }
}

/// A cluster holding `keys` in bucket `b`, and a gateway that refuses
/// `refuse` (none when empty) and answers DONE to the rest.
fn fakes(keys: Vec<String>, refuse: &str) -> (Arc<FakeCluster>, Arc<FakeDelete>) {
    let cluster = Arc::new(FakeCluster {
        keys,
        saved: Mutex::new(BTreeMap::new()),
    });
    let deletes = Arc::new(FakeDelete {
        refuse: refuse.to_string(),
        calls: AtomicUsize::new(0),
        per_key: Mutex::new(HashMap::new()),
    });
    (cluster, deletes)
}

/// `k0`, `k1`… `k{n-1}`.
fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}")).collect()
}

#[actix::test]
async fn one_retry_later_halts_only_its_shard_and_every_cursor_is_saved() {
    let keys: Vec<String> = (0..200).map(|i| format!("k{i:03}")).collect();
    let refuse = keys[17].clone();
    let bad_shard = shard_id("b", &refuse);
    let (cluster, deletes) = fakes(keys.clone(), &refuse);
    let mut settings = Settings::default();
    settings.dispatch.max_in_flight_per_shard = 3;
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        deletes.clone(),
        PassObserver::default(),
    ));
    let result = coord
        .send(RunPass(PassOptions {
            now: NOW,
            shards: (0..16).collect(),
            dry_run: false,
            settings,
            run_id: "test".into(),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.shards.len(), 16);
    assert_eq!(result.outcome(), RunOutcome::Halted);
    for s in &result.shards {
        if s.report.shard == bad_shard {
            assert_eq!(s.report.outcome, ShardOutcome::Halted);
            let why = s.report.halt_reason.clone().unwrap();
            // A walker delete: the walk of its bucket stops, the shard reports it.
            assert!(
                why.starts_with("walk of bucket b did not finish")
                    && why.contains(&format!("RETRY_LATER b/{refuse}")),
                "{why}"
            );
        } else {
            assert_eq!(s.report.outcome, ShardOutcome::Completed, "{:?}", s.report);
        }
    }
    let per_key = deletes.per_key.lock().unwrap();
    assert!(per_key.values().all(|&n| n == 1), "each delete sent once");
    let other_keys = keys
        .iter()
        .filter(|k| shard_id("b", k) != bad_shard)
        .count();
    assert!(
        per_key.len() >= other_keys,
        "every other shard's deletes went out"
    );
    let saved = cluster.saved.lock().unwrap();
    assert_eq!(saved.len(), 16, "halted shards save too");
    let kept = saved[&bad_shard].buckets.get("b");
    assert!(
        kept.is_none_or(|b| b.is_walk_placeholder() && b.walk_resume.is_none()),
        "the halted shard's failed recovery keeps no replay state, at most its backlog: {kept:?}"
    );
    let good = (0..16u8).find(|s| *s != bad_shard).unwrap();
    assert!(saved[&good].buckets.contains_key("b"));
}

#[actix::test]
async fn dry_run_sends_and_saves_nothing() {
    let (cluster, deletes) = fakes(numbered(20), "");
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        deletes.clone(),
        PassObserver::default(),
    ));
    let result = coord
        .send(RunPass(PassOptions {
            now: NOW,
            shards: vec![0, 1, 2, 3],
            dry_run: true,
            settings: Settings::default(),
            run_id: "test".into(),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.outcome(), RunOutcome::Completed);
    assert_eq!(deletes.calls.load(Ordering::SeqCst), 0);
    assert!(cluster.saved.lock().unwrap().is_empty());
    // Nothing saved, nothing handed to serve's forecast refresh as saved
    // (docs/forecast.md#refresh): it reads the filer's copies instead.
    assert!(result.saved_cursors().is_empty());
    let dry: u64 = result
        .shards
        .iter()
        .map(|s| s.report.counters.deletes.get(DeleteOutcome::DryRun))
        .sum();
    let expected = (0..20)
        .filter(|i| shard_id("b", &format!("k{i}")) < 4)
        .count() as u64;
    assert_eq!(dry, expected);
}

/// A stop (SIGTERM, `pass.max_runtime`) at a low delete rate: every delete
/// already queued in the shards' windows waited its turn at the limiter and
/// was sent after the stop, so a shutdown took seconds, sent deletes the
/// operator had asked not to, and could overrun its deadline. The queued
/// deletes are withdrawn now (docs/lifecycle-delete.md#stopping).
#[actix::test]
async fn a_stop_at_a_low_rate_sent_every_queued_delete_first() {
    let (cluster, deletes) = fakes(numbered(50), "");
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        deletes.clone(),
        PassObserver::default(),
    ));
    let mut settings = Settings::default();
    // 50 due deletes at 4/s would take over 12 s.
    settings.rate.deletes_per_second = 4.0;
    settings.rate.burst = 1;
    let (stop_tx, stop) = StopSignal::new();
    let pass = coord.send(RunPass(PassOptions {
        now: NOW,
        shards: (0..16).collect(),
        dry_run: false,
        settings,
        run_id: "low-rate-stop".into(),
        stop,
    }));
    let sent_at_stop = async {
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let n = deletes.calls.load(Ordering::SeqCst);
        stop_tx.send(Some("shutdown (SIGTERM)".into())).unwrap();
        n
    };
    let (result, at_stop) = tokio::join!(pass, sent_at_stop);
    let result = result.unwrap().unwrap();
    let sent = deletes.calls.load(Ordering::SeqCst);
    assert_eq!(result.outcome(), RunOutcome::Truncated);
    assert!(
        (1..=4).contains(&at_stop),
        "4/s with a burst of 1 sends 3 in 600 ms, sent {at_stop}"
    );
    assert!(
        sent <= at_stop + 1,
        "{sent} deletes sent, {at_stop} before the stop: the queued ones went out after it"
    );
    let totals = result.totals();
    assert_eq!(totals.deletes.get(DeleteOutcome::Done), sent as u64);
    assert_eq!(
        totals.deletes.withdrawn + sent as u64,
        50,
        "every due delete not sent is withdrawn, for the next pass: {:?}",
        totals.deletes
    );
    // Nothing withdrawn is lost: every shard saved a cursor that stays before it.
    assert_eq!(cluster.saved.lock().unwrap().len(), 16);
}

#[actix::test]
async fn a_stopped_pass_is_truncated_sends_nothing_and_saves_every_cursor() {
    let (cluster, deletes) = fakes(numbered(50), "");
    let obs = PassObserver::default();
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        deletes.clone(),
        obs.clone(),
    ));
    // Fired before the pass starts: the walk stops at its first item.
    let (stop_tx, stop) = StopSignal::new();
    stop_tx.send(Some("shutdown (SIGTERM)".into())).unwrap();
    let result = coord
        .send(RunPass(PassOptions {
            now: NOW,
            shards: (0..16).collect(),
            dry_run: false,
            settings: Settings::default(),
            run_id: "stopped".into(),
            stop,
        }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.outcome(), RunOutcome::Truncated);
    assert_eq!(result.truncated.as_deref(), Some("shutdown (SIGTERM)"));
    assert_eq!(deletes.calls.load(Ordering::SeqCst), 0);
    {
        let saved = cluster.saved.lock().unwrap();
        assert_eq!(saved.len(), 16, "every shard saves its cursor");
        let handed = result.saved_cursors();
        assert_eq!(handed.len(), 16, "the result carries every saved cursor");
        for (shard, c) in &handed {
            assert_eq!(c.updated_ns, NOW, "stamped as the store stamps it");
            let mut stored = saved[shard].clone();
            stored.updated_ns = NOW;
            assert_eq!(
                *c, stored,
                "shard {shard}: the result's copy is the saved one"
            );
        }
        assert!(
            saved.values().all(|c| !c.buckets.contains_key("b")),
            "an unfinished recovery keeps no bucket state, so the next pass recovers again"
        );
    }
    let text = obs.metrics.encode();
    assert!(
        text.contains("s3_lifecycled_pass_total{outcome=\"truncated\"} 1"),
        "{text}"
    );

    // The same coordinator runs the next pass (it lives for the process):
    // nothing stops it, every key is deleted once.
    let result = coord
        .send(RunPass(PassOptions {
            now: NOW,
            shards: (0..16).collect(),
            dry_run: false,
            settings: Settings::default(),
            run_id: "next".into(),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.outcome(), RunOutcome::Completed);
    let per_key = deletes.per_key.lock().unwrap();
    assert_eq!(per_key.len(), 50);
    assert!(per_key.values().all(|&n| n == 1));
    let text = obs.metrics.encode();
    assert!(
        text.contains("SeaweedFS_s3_lifecycle_dispatch_total{bucket=\"b\",kind=\"expiration_days\",outcome=\"DONE\"} 50"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// Replay-driven scenarios: a fake meta-log of object creations in bucket `b`
// (rule: Expiration Days 1), a fake server that remembers what it deleted.
// ---------------------------------------------------------------------------

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use s3_lifecycled::engine::matches::{DeferredLookup, Expect};
use s3_lifecycled::engine::route::route;
use s3_lifecycled::engine::{MetaEvent, Snapshot};
use s3_lifecycled::pass::actors::{
    BeginPass, Drain, Finish, GetShardInfo, RESTART_BUDGET, ReplayBatch, ShardActor, ShardInfo,
    ShardTelemetry, StartReplay, restart_backoff,
};
use s3_lifecycled::pass::coordinator::GetShards;
use s3_lifecycled::pass::dispatch::DeleteDispatcher;
use s3_lifecycled::pass::plan::PassPlan;
use s3_lifecycled::pass::report::PassResult;
use s3_lifecycled::pass::retry::RetryPolicy;
use s3_lifecycled::pass::shard_run::ReplayItem;
use tokio::sync::Semaphore;

/// One meta-log event as the coordinator sends it: a batch of one, every
/// match due.
fn one_event(ts: Nanos, matches: Vec<s3_lifecycled::engine::Match>) -> ReplayBatch {
    ReplayBatch {
        events: vec![ReplayItem {
            ts,
            matches,
            bucket: String::new(),
            pending: Vec::new(),
            skipped_no_mtime: false,
        }],
    }
}

const DAY: Nanos = 86_400 * S;
/// The replayed events start an hour after the cold-start pass's `now`, so
/// that pass sees none of them, and are 10 s apart (wider than the 5 s reorder
/// margin, so cursor positions between events are unambiguous).
const T0: Nanos = NOW + 3_600 * S;
const GAP: Nanos = 10 * S;
/// A `now` at which every replayed object is due (Days 1 + rounding).
const LATER: Nanos = NOW + 10 * DAY;

/// A bucket scan of bucket `b` alone, with [`lifecycle_bucket`]'s rule: what the fakes' and
/// `filer_crash`'s clusters answer.
pub(crate) fn scan_of_bucket_b() -> BoxFuture<'static, Result<BucketScan, ClusterError>> {
    let info = bucket_info(&lifecycle_bucket()).unwrap();
    async move {
        Ok(BucketScan {
            buckets: vec![info],
            errors: vec![],
        })
    }
    .boxed()
}

/// Bucket `b`'s entry with one rule: expire everything after 1 day.
fn lifecycle_bucket() -> Entry {
    let xml = b"<LifecycleConfiguration><Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>";
    let mut e = Entry {
        name: "b".into(),
        is_directory: true,
        ..Default::default()
    };
    e.extended.insert(keys::LIFECYCLE_XML.into(), xml.to_vec());
    e
}

/// `n` keys of bucket `b` that all belong to `shard`.
fn keys_of_shard(shard: u8, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("obj{i:05}"))
        .filter(|k| shard_id("b", k) == shard)
        .take(n)
        .collect()
}

fn ts_of(i: usize) -> Nanos {
    T0 + GAP * i as i64
}

/// A PUT of `key` at `ts`, as the filer logs it.
fn create_event(i: usize, key: &str) -> MetaEvent {
    MetaEvent {
        ts_ns: ts_of(i),
        directory: "/buckets/b".into(),
        new_parent_path: "/buckets/b".into(),
        old_entry: None,
        new_entry: Some(Box::new(file(key, ts_of(i) / S))),
    }
}

type Store = Arc<Mutex<BTreeMap<u8, ShardCursor>>>;

/// A cluster whose meta-log holds `events`; cursors persist in `store`.
struct LogCluster {
    events: Vec<MetaEvent>,
    store: Store,
    /// Events the pass pulled from the subscription so far.
    pulled: Arc<AtomicUsize>,
    /// A lookup of this entry name panics (a bug in an adapter).
    boom: Option<String>,
    /// Cursor loads so far.
    loads: Arc<AtomicUsize>,
    /// The filer's clock a pass start reads (`None`: no clock, no bound).
    clock: Mutex<Option<Nanos>>,
}

impl LogCluster {
    fn new(keys: &[String], store: Store) -> Arc<LogCluster> {
        Arc::new(LogCluster {
            events: keys
                .iter()
                .enumerate()
                .map(|(i, k)| create_event(i, k))
                .collect(),
            store,
            pulled: Arc::new(AtomicUsize::new(0)),
            boom: None,
            loads: Arc::new(AtomicUsize::new(0)),
            clock: Mutex::new(None),
        })
    }
}

impl ClusterPort for LogCluster {
    fn buckets_root(&self) -> String {
        "/buckets".into()
    }
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, ClusterError>> {
        scan_of_bucket_b()
    }
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    fn load_cursor(
        &self,
        shard: u8,
    ) -> BoxFuture<'static, Result<Option<ShardCursor>, ClusterError>> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        let c = self.store.lock().unwrap().get(&shard).cloned();
        async move { Ok(c) }.boxed()
    }
    fn save_cursor(
        &self,
        c: ShardCursor,
        _now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        self.store.lock().unwrap().insert(c.shard_id, c);
        async { Ok(()) }.boxed()
    }
    fn list_bucket(&self, _bucket: &str) -> BoxStream<'static, Result<WalkItem, ClusterError>> {
        futures::stream::empty().boxed()
    }
    fn lookup(
        &self,
        _d: &str,
        name: &str,
    ) -> BoxFuture<'static, Result<Option<Entry>, ClusterError>> {
        if self.boom.as_deref() == Some(name) {
            panic!("fake filer lookup exploded on {name}");
        }
        async { Ok(None) }.boxed()
    }
    fn list_dir(&self, _d: &str) -> BoxFuture<'static, Result<Vec<Entry>, ClusterError>> {
        async { Ok(vec![]) }.boxed()
    }
    fn filer_clock(&self) -> BoxFuture<'static, Result<Option<FilerClock>, ClusterError>> {
        let clock = self
            .clock
            .lock()
            .unwrap()
            .map(|ns| FilerClock { ns, vouches: true });
        async move { Ok(clock) }.boxed()
    }
    fn subscribe(
        &self,
        since: Nanos,
        until: Nanos,
    ) -> BoxFuture<'static, Result<EventStream, ClusterError>> {
        let evs: Vec<_> = self
            .events
            .iter()
            .filter(|e| e.ts_ns > since && e.ts_ns <= until)
            .cloned()
            .map(Ok)
            .collect();
        let pulled = self.pulled.clone();
        let stream = futures::stream::iter(evs).inspect(move |_| {
            pulled.fetch_add(1, Ordering::SeqCst);
        });
        async move { Ok(stream.boxed() as EventStream) }.boxed()
    }
}

/// A LifecycleDelete server: each call takes `delay` (virtual), then waits
/// for a gate permit if gated; DONE the first time an object is deleted,
/// NOOP_RESOLVED after that. `refuse` answers RETRY_LATER after `delay / 2`.
#[derive(Clone)]
struct Server {
    delay: Duration,
    refuse: Option<String>,
    gate: Option<Arc<Semaphore>>,
    calls: Arc<Mutex<Vec<String>>>,
    finished: Arc<AtomicUsize>,
    deleted: Arc<Mutex<HashMap<String, usize>>>,
    active: Arc<Mutex<HashMap<u8, usize>>>,
    peak: Arc<Mutex<HashMap<u8, usize>>>,
}

impl Server {
    fn new(delay: Duration) -> Server {
        Server {
            delay,
            refuse: None,
            gate: None,
            calls: Arc::default(),
            finished: Arc::default(),
            deleted: Arc::default(),
            active: Arc::default(),
            peak: Arc::default(),
        }
    }
    /// Same server state (what is deleted), fresh call log, no refusals.
    fn next_pass(&self) -> Server {
        Server {
            deleted: self.deleted.clone(),
            ..Server::new(self.delay)
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn active(&self, shard: u8) -> usize {
        self.active
            .lock()
            .unwrap()
            .get(&shard)
            .copied()
            .unwrap_or(0)
    }
    fn peak(&self, shard: u8) -> usize {
        self.peak.lock().unwrap().get(&shard).copied().unwrap_or(0)
    }
}

impl DeletePort<DeleteRequest> for Server {
    fn call(&self, c: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        let key = c.object_path.clone();
        self.calls.lock().unwrap().push(key.clone());
        let me = self.clone();
        let shard = shard_id(&c.bucket, &key);
        async move {
            if me.refuse.as_deref() == Some(key.as_str()) {
                tokio::time::sleep(me.delay / 2).await;
                return Ok(CallResult::answered(DeleteOutcome::RetryLater, "slow down"));
            }
            {
                let mut a = me.active.lock().unwrap();
                let n = a.entry(shard).or_default();
                *n += 1;
                let mut p = me.peak.lock().unwrap();
                let pk = p.entry(shard).or_default();
                *pk = (*pk).max(*n);
            }
            tokio::time::sleep(me.delay).await;
            if let Some(g) = &me.gate {
                g.acquire().await.unwrap().forget();
            }
            *me.active.lock().unwrap().entry(shard).or_default() -= 1;
            me.finished.fetch_add(1, Ordering::SeqCst);
            let mut d = me.deleted.lock().unwrap();
            let n = d.entry(key).or_default();
            *n += 1;
            if *n == 1 {
                Ok(CallResult::answered(DeleteOutcome::Done, ""))
            } else {
                Ok(CallResult::answered(
                    DeleteOutcome::NoopResolved,
                    "not found",
                ))
            }
        }
        .boxed()
    }
}

async fn pass(
    cluster: Arc<LogCluster>,
    server: &Server,
    now: Nanos,
    shards: Vec<u8>,
    window: usize,
) -> PassResult {
    let mut settings = Settings::default();
    settings.dispatch.max_in_flight_per_shard = window;
    let coord = actix::Actor::start(Coordinator::new(
        cluster,
        Arc::new(server.clone()),
        PassObserver::default(),
    ));
    coord
        .send(RunPass(PassOptions {
            now,
            shards,
            dry_run: false,
            settings,
            run_id: "test".into(),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap()
}

fn deletes(r: &PassResult, outcome: DeleteOutcome) -> u64 {
    r.shards
        .iter()
        .map(|s| s.report.counters.deletes.get(outcome))
        .sum()
}

/// The cold start: an empty listing, and none of the events is in its window,
/// so every later pass replays all of them from the saved cursor.
async fn cold_start(keys: &[String], store: &Store, shards: Vec<u8>) {
    let server = Server::new(Duration::from_millis(1));
    let r = pass(
        LogCluster::new(keys, store.clone()),
        &server,
        NOW,
        shards.clone(),
        4,
    )
    .await;
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);
    assert!(server.calls().is_empty());
    assert_eq!(store.lock().unwrap().len(), shards.len());
}

fn bucket_progress(store: &Store, shard: u8) -> s3_lifecycled::engine::cursor::BucketCursor {
    store.lock().unwrap()[&shard].buckets["b"].clone()
}

#[actix::test]
async fn halt_stops_new_sends_drains_in_flight_and_keeps_the_cursor_before_the_halting_event() {
    tokio::time::pause();
    let shard = 5;
    let window = 4;
    let keys = keys_of_shard(shard, 40);
    let store = Store::default();
    cold_start(&keys, &store, vec![shard]).await;

    let halting = 20;
    let mut server = Server::new(Duration::from_millis(100));
    server.refuse = Some(keys[halting].clone());
    let r = pass(
        LogCluster::new(&keys, store.clone()),
        &server,
        LATER,
        vec![shard],
        window,
    )
    .await;
    assert_eq!(r.outcome(), RunOutcome::Halted);
    let why = r.shards[0].report.halt_reason.clone().unwrap();
    assert!(
        why.starts_with(&format!("RETRY_LATER b/{}", keys[halting])),
        "{why}"
    );

    let calls = server.calls();
    let n = calls.len();
    let unique: BTreeSet<&String> = calls.iter().collect();
    assert_eq!(unique.len(), n, "each delete sent once: {calls:?}");
    assert_eq!(
        unique,
        keys[..n].iter().collect::<BTreeSet<_>>(),
        "deletes go out in event order"
    );
    assert!(
        n <= halting + window,
        "no new send after the halting outcome: {n} calls, window {window}"
    );
    assert!(
        n > halting + 1,
        "deletes sent after the halting one were in flight at the halt: {n} calls"
    );
    // In flight at the halt, they still drained and were counted.
    assert_eq!(server.finished.load(Ordering::SeqCst), n - 1);
    assert_eq!(deletes(&r, DeleteOutcome::Done), (n - 1) as u64);
    assert_eq!(deletes(&r, DeleteOutcome::RetryLater), 1);

    let b = bucket_progress(&store, shard);
    assert_eq!(b.rules.len(), 1);
    let p = b.rules.values().next().unwrap();
    assert!(
        p.ts < ts_of(halting) && p.ts >= ts_of(halting - 1),
        "cursor stops right before the halting event: ts {} vs halting {}",
        p.ts,
        ts_of(halting)
    );
    assert!(
        b.halted.as_deref().is_some_and(|h| h == why),
        "{:?}",
        b.halted
    );

    // The next pass resumes there: the refused delete and the never-sent ones
    // go out exactly once; nothing that resolved — before the halting event,
    // or draining after it (remembered in the action's tail) — is sent again.
    let server3 = server.next_pass();
    let r3 = pass(
        LogCluster::new(&keys, store.clone()),
        &server3,
        LATER + 3_600 * S,
        vec![shard],
        window,
    )
    .await;
    assert_eq!(r3.outcome(), RunOutcome::Completed, "{:?}", r3.shards);
    let calls3 = server3.calls();
    let again: BTreeSet<String> = calls3.iter().cloned().collect();
    assert_eq!(again.len(), calls3.len(), "each delete sent once");
    let expected: BTreeSet<String> = std::iter::once(keys[halting].clone())
        .chain(keys[n..].iter().cloned())
        .collect();
    assert_eq!(again, expected, "resolved deletes are not re-sent");
    assert_eq!(deletes(&r3, DeleteOutcome::NoopResolved), 0);
    assert_eq!(deletes(&r3, DeleteOutcome::Done), expected.len() as u64);
    let deleted = server3.deleted.lock().unwrap();
    assert!(
        keys.iter().all(|k| deleted.get(k) == Some(&1)),
        "every object reached the server exactly once"
    );
    assert!(bucket_progress(&store, shard).halted.is_none());
}

#[actix::test]
async fn in_flight_window_caps_each_shard_and_backpressure_stops_the_feed() {
    tokio::time::pause();
    let (a, b) = (2u8, 9u8);
    let window = 3;
    // Events reach a shard in batches of up to 512 (docs/meta-log.md#replay-batches):
    // one batch in flight per shard and one filling, so the feed stops within
    // two batches per shard once the windows are full. The log is longer than that.
    const BATCH: usize = 512;
    let per_shard = 1_600;
    // Interleaved in the log, so the feed alternates between the two shards.
    let keys: Vec<String> = keys_of_shard(a, per_shard)
        .into_iter()
        .zip(keys_of_shard(b, per_shard))
        .flat_map(|(x, y)| [x, y])
        .collect();
    let total = keys.len();
    let store = Store::default();
    cold_start(&keys, &store, vec![a, b]).await;

    let gate = Arc::new(Semaphore::new(0));
    let mut server = Server::new(Duration::from_millis(10));
    server.gate = Some(gate.clone());
    let cluster = LogCluster::new(&keys, store.clone());
    let pulled = cluster.pulled.clone();
    let run = {
        let server = server.clone();
        tokio::task::spawn_local(
            async move { pass(cluster, &server, LATER, vec![a, b], window).await },
        )
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Every slot of both windows is taken and nothing answers: the feed
    // stops within two batches per shard, well before the end of the log.
    assert_eq!((server.active(a), server.active(b)), (window, window));
    let stalled = pulled.load(Ordering::SeqCst);
    assert!(
        stalled <= 2 * 2 * BATCH + 2 && stalled < total,
        "the meta-log feed went on while both windows were full: {stalled} of {total} events pulled"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        stalled,
        "no progress without outcomes"
    );

    // Freeing two slots lets at most a batch per shard more in.
    gate.add_permits(2);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = pulled.load(Ordering::SeqCst);
    assert!(after <= stalled + 2 * BATCH, "{stalled} -> {after}");

    gate.add_permits(100_000);
    let r = run.await.unwrap();
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);
    assert_eq!(deletes(&r, DeleteOutcome::Done), total as u64);
    assert_eq!(pulled.load(Ordering::SeqCst), total);
    assert!(server.peak(a) <= window && server.peak(b) <= window);
    assert_eq!((server.peak(a), server.peak(b)), (window, window));
}

async fn run_on(coord: &actix::Addr<Coordinator>, now: Nanos, shards: Vec<u8>) -> PassResult {
    coord
        .send(RunPass(PassOptions {
            now,
            shards,
            dry_run: false,
            settings: Settings::default(),
            run_id: "test".into(),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap()
}

async fn shard_infos(shards: &BTreeMap<u8, actix::Addr<ShardActor>>) -> BTreeMap<u8, ShardInfo> {
    let mut out = BTreeMap::new();
    for (&s, a) in shards {
        out.insert(s, a.send(GetShardInfo).await.unwrap());
    }
    out
}

#[actix::test]
async fn the_same_sixteen_shard_actors_serve_consecutive_passes() {
    tokio::time::pause();
    let keys = keys_of_shard(3, 6)
        .into_iter()
        .chain(keys_of_shard(11, 6))
        .collect::<Vec<_>>();
    let store = Store::default();
    let server = Server::new(Duration::from_millis(1));
    let coord = actix::Actor::start(Coordinator::new(
        LogCluster::new(&keys, store.clone()),
        Arc::new(server.clone()),
        PassObserver::default(),
    ));
    let all: Vec<u8> = (0..16).collect();

    let before = coord.send(GetShards).await.unwrap();
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), all);
    let first = shard_infos(&before).await;
    assert!(first.values().all(|i| i.passes == 0 && i.restarts == 0));
    let ids: BTreeSet<u64> = first.values().map(|i| i.actor_id).collect();
    assert_eq!(ids.len(), 16, "one actor per shard");

    // Pass 1: cold start, nothing due. Pass 2: every replayed object is due
    // and is deleted from the cursors pass 1 saved.
    let r1 = run_on(&coord, NOW, all.clone()).await;
    assert_eq!(r1.outcome(), RunOutcome::Completed, "{:?}", r1.shards);
    assert!(server.calls().is_empty());
    let r2 = run_on(&coord, LATER, all.clone()).await;
    assert_eq!(r2.outcome(), RunOutcome::Completed, "{:?}", r2.shards);
    assert_eq!(deletes(&r2, DeleteOutcome::Done), 12);

    let after = coord.send(GetShards).await.unwrap();
    assert_eq!(before, after, "same addresses for both passes");
    let second = shard_infos(&after).await;
    for (s, i) in &second {
        assert_eq!(i.actor_id, first[s].actor_id, "shard {s}: same actor");
        assert_eq!(i.passes, 2, "shard {s}: served both passes");
    }
    // A pass over a subset leaves the other shards untouched.
    let r3 = run_on(&coord, LATER + 3_600 * S, vec![3]).await;
    assert_eq!(r3.outcome(), RunOutcome::Completed, "{:?}", r3.shards);
    let third = shard_infos(&after).await;
    assert_eq!(third[&3].passes, 3);
    assert_eq!(third[&11].passes, 2);
}

/// A pass read the meta-log on past its own start, into what it wrote itself meanwhile
/// (docs/due-index.md#pass-start). With the filer's clock at the start in the middle of the
/// log, the pass reads up to it and no further; the next pass takes the rest, once each.
#[actix::test]
async fn a_pass_read_the_log_past_its_own_start() {
    tokio::time::pause();
    let shard = 5;
    let keys = keys_of_shard(shard, 10);
    let store = Store::default();
    let server = Server::new(Duration::from_millis(1));
    let cluster = LogCluster::new(&keys, store.clone());
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        Arc::new(server.clone()),
        PassObserver::default(),
    ));
    let r = run_on(&coord, NOW, vec![shard]).await;
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);

    // The log's clock stood at the fifth event when this pass started.
    *cluster.clock.lock().unwrap() = Some(ts_of(4));
    let r = run_on(&coord, LATER, vec![shard]).await;
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);
    assert_eq!(r.replay.events_read, 5, "up to the clock and no further");
    assert_eq!(deletes(&r, DeleteOutcome::Done), 5);

    *cluster.clock.lock().unwrap() = None;
    let r = run_on(&coord, LATER + 3_600 * S, vec![shard]).await;
    // The rest, and the clock's event again: progress stays the reorder margin (5 s) behind
    // the last event read. Its delete is not sent twice.
    assert_eq!(r.replay.events_read, 6);
    assert_eq!(deletes(&r, DeleteOutcome::Done), 5);
    let calls = server.calls();
    let once: BTreeSet<&String> = calls.iter().collect();
    assert_eq!(
        (calls.len(), once.len()),
        (10, 10),
        "each key once: {calls:?}"
    );
}

#[actix::test]
async fn crashed_shard_is_restarted_sits_out_and_the_next_pass_resumes_from_the_cursor() {
    tokio::time::pause();
    let shard = 7;
    let keys = keys_of_shard(shard, 20);
    let store = Store::default();
    cold_start(&keys, &store, vec![shard]).await;
    let persisted = store.lock().unwrap().get(&shard).cloned();
    assert!(persisted.is_some());
    let before = persisted.clone();

    // The process's coordinator, over a filer adapter that panics on one
    // lookup. Pass 1 is driven by hand on its shard actor, as the
    // coordinator's driver would.
    let settings = Settings::default();
    let info = bucket_info(&lifecycle_bucket()).unwrap();
    let snap = Snapshot::compile(vec![info.to_config()], settings.time.time_config());
    let plan = Arc::new(PassPlan::build(
        &snap,
        LATER,
        LATER,
        None,
        &settings.pass,
        Default::default(),
    ));
    let view = plan.replay.clone().unwrap();
    let cluster = Arc::new(LogCluster {
        boom: Some("boom".into()),
        ..Arc::try_unwrap(LogCluster::new(&keys, store.clone()))
            .ok()
            .unwrap()
    });
    let server = Server::new(Duration::from_millis(100));
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        Arc::new(server.clone()),
        PassObserver::default(),
    ));
    let dispatcher = actix::Actor::start(DeleteDispatcher::new(
        Arc::new(server.clone()) as Arc<dyn DeletePort<DeleteRequest>>,
        None,
        128,
        RetryPolicy::default(),
        false,
    ));
    let actor = coord.send(GetShards).await.unwrap()[&shard].clone();
    let id = actor.send(GetShardInfo).await.unwrap().actor_id;
    actor
        .send(BeginPass {
            plan: plan.clone(),
            persisted: persisted.map(Arc::new),
            window: 4,
            dispatcher: dispatcher.recipient(),
            tele: ShardTelemetry::default(),
        })
        .await
        .unwrap();
    let since = actor.send(StartReplay).await.unwrap();
    assert!(since.is_some_and(|s| s < ts_of(0)));
    let routed = |i: usize| route(&view, "/buckets", &create_event(i, &keys[i])).unwrap();
    for i in 0..10 {
        actor
            .send(one_event(ts_of(i), routed(i).matches))
            .await
            .unwrap();
    }
    actor.send(Drain).await.unwrap();
    assert_eq!(server.calls().len(), 10);

    // Event 10 needs a lookup, and the adapter panics on it.
    let mut m = routed(10).matches;
    assert_eq!(m.len(), 1);
    m[0].lookup = Some(DeferredLookup {
        directory: "/buckets/b".into(),
        name: "boom".into(),
        expect: Expect::Version {
            version_id: "v1".into(),
        },
    });
    let crash_at = tokio::time::Instant::now();
    actor.send(one_event(ts_of(10), m)).await.unwrap();
    // Later events reach the restarted shard, which sends nothing more.
    for i in 11..20 {
        actor
            .send(one_event(ts_of(i), routed(i).matches))
            .await
            .unwrap();
    }
    tokio::time::sleep(restart_backoff(1) * 2).await;
    actor.send(Drain).await.unwrap();
    let (report, cursor) = actor
        .send(Finish {
            stream_end: Some(ts_of(19)),
            events_not_routed: 0,
        })
        .await
        .expect("the supervisor restarted the shard: it still answers");
    assert!(crash_at.elapsed() >= restart_backoff(1));
    assert_eq!(report.outcome, ShardOutcome::Failed);
    let why = report.halt_reason.unwrap();
    assert!(
        why.contains("restarted (1 of 3)") && why.contains("exploded on boom"),
        "{why}"
    );
    assert!(cursor.is_none(), "a restarted shard saves no cursor");
    assert_eq!(server.calls().len(), 10, "nothing sent after the crash");
    assert_eq!(
        store.lock().unwrap().get(&shard),
        before.as_ref(),
        "the persisted cursor is untouched"
    );
    let info = actor.send(GetShardInfo).await.unwrap();
    assert_eq!((info.actor_id, info.passes, info.restarts), (id, 1, 1));

    // The next pass, through the same coordinator, reaches the same actor
    // and starts from the persisted (pre-crash) cursor: the ten objects the
    // crashed pass did not reach are deleted, the ten it did are re-sent once
    // and come back NOOP_RESOLVED; no object is deleted twice.
    let r = run_on(&coord, LATER + 3_600 * S, vec![shard]).await;
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);
    assert_eq!(deletes(&r, DeleteOutcome::Done), 10);
    assert_eq!(deletes(&r, DeleteOutcome::NoopResolved), 10);
    assert_eq!(coord.send(GetShards).await.unwrap()[&shard], actor);
    let info = actor.send(GetShardInfo).await.unwrap();
    assert_eq!((info.actor_id, info.passes, info.restarts), (id, 2, 1));
    let sent: HashSet<String> = server.calls()[10..].iter().cloned().collect();
    assert_eq!(sent.len(), 20, "each once");
    assert_eq!(server.calls().len(), 30);
    // The server saw the first ten twice (DONE, then NOOP), the rest once.
    let deleted = server.deleted.lock().unwrap();
    assert!(
        keys[..10].iter().all(|k| deleted.get(k) == Some(&2)),
        "{deleted:?}"
    );
    assert!(
        keys[10..].iter().all(|k| deleted.get(k) == Some(&1)),
        "{deleted:?}"
    );
    assert!(
        bucket_progress(&store, shard)
            .rules
            .values()
            .all(|p| p.ts >= ts_of(19) - 5 * S)
    );
}

#[actix::test]
async fn restart_budget_is_process_wide_and_renewed_for_the_pass_after_it_ran_out() {
    tokio::time::pause();
    let shard = 7;
    let keys = keys_of_shard(shard, 2);
    let store = Store::default();
    cold_start(&keys, &store, vec![shard]).await;
    let settings = Settings::default();
    let info = bucket_info(&lifecycle_bucket()).unwrap();
    let snap = Snapshot::compile(vec![info.to_config()], settings.time.time_config());
    let plan = Arc::new(PassPlan::build(
        &snap,
        LATER,
        LATER,
        None,
        &settings.pass,
        Default::default(),
    ));
    let view = plan.replay.clone().unwrap();
    let cluster = Arc::new(LogCluster {
        boom: Some("boom".into()),
        ..Arc::try_unwrap(LogCluster::new(&keys, store.clone()))
            .ok()
            .unwrap()
    });
    let server = Server::new(Duration::from_millis(1));
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        Arc::new(server.clone()),
        PassObserver::default(),
    ));
    let actor = coord.send(GetShards).await.unwrap()[&shard].clone();
    // Four passes, each crashing once on the panicking lookup: three
    // restarts (one budget for the whole process), then the shard is left
    // failed without a restart.
    for n in 1..=4u32 {
        let dispatcher = actix::Actor::start(DeleteDispatcher::new(
            Arc::new(server.clone()) as Arc<dyn DeletePort<DeleteRequest>>,
            None,
            16,
            RetryPolicy::default(),
            false,
        ));
        let persisted = store.lock().unwrap().get(&shard).cloned();
        actor
            .send(BeginPass {
                plan: plan.clone(),
                persisted: persisted.map(Arc::new),
                window: 4,
                dispatcher: dispatcher.recipient(),
                tele: ShardTelemetry::default(),
            })
            .await
            .unwrap();
        actor.send(StartReplay).await.unwrap();
        let mut m = route(&view, "/buckets", &create_event(0, &keys[0]))
            .unwrap()
            .matches;
        m[0].lookup = Some(DeferredLookup {
            directory: "/buckets/b".into(),
            name: "boom".into(),
            expect: Expect::Version {
                version_id: "v1".into(),
            },
        });
        actor.send(one_event(ts_of(0), m)).await.unwrap();
        tokio::time::sleep(restart_backoff(n) * 2).await;
        actor.send(Drain).await.unwrap();
        let (report, cursor) = actor
            .send(Finish {
                stream_end: Some(ts_of(0)),
                events_not_routed: 0,
            })
            .await
            .unwrap();
        assert_eq!(report.outcome, ShardOutcome::Failed);
        assert!(cursor.is_none());
        let why = report.halt_reason.unwrap();
        let restarts = actor.send(GetShardInfo).await.unwrap().restarts;
        if n <= RESTART_BUDGET {
            assert!(why.contains(&format!("restarted ({n} of 3)")), "{why}");
            assert_eq!(restarts, n);
        } else {
            assert!(
                why.contains("shard crashed") && !why.contains("restarted"),
                "{why}"
            );
            assert_eq!(restarts, RESTART_BUDGET);
        }
    }
    // The next pass gives the shard a fresh budget and it serves the pass.
    let r = run_on(&coord, LATER + 3_600 * S, vec![shard]).await;
    assert_eq!(r.outcome(), RunOutcome::Completed, "{:?}", r.shards);
    assert_eq!(deletes(&r, DeleteOutcome::Done), 2);
    let info = actor.send(GetShardInfo).await.unwrap();
    assert_eq!((info.passes, info.restarts), (5, 0));
}

/// `serve`'s forecast refresh after a pass (docs/forecast.md#refresh) takes
/// the cursors the pass saved instead of reading the 16 back: the pass's
/// own loads are the only ones, and the forecast published (status page,
/// lag gauges) is the one of the cursors in the store, with pending matches.
#[actix::test]
async fn forecast_refresh_after_a_pass_reads_no_cursor_and_matches_the_saved_ones() {
    use s3_lifecycled::admin::TriggerRequest;
    use s3_lifecycled::engine::forecast::Forecast;
    use s3_lifecycled::pass::observe::StatusBoard;
    use s3_lifecycled::service::{Cause, FORECAST_DAYS, Service};
    use s3_lifecycled::status::StatusSnapshot;

    let keys: Vec<String> = (0..40).map(|i| format!("obj{i:03}")).collect();
    let store: Store = Arc::default();
    let cluster = LogCluster::new(&keys, store.clone());
    let loads = cluster.loads.clone();
    let server = Server::new(Duration::from_millis(1));
    let (tx, _rx) = tokio::sync::watch::channel(StatusSnapshot::default());
    let board = Arc::new(StatusBoard::new(tx));
    let obs = PassObserver {
        board: Some(board.clone()),
        ..Default::default()
    };
    let runner = PassRunner::start(cluster.clone(), Arc::new(server.clone()), obs.clone());
    let mut settings = Settings::default();
    // The passes' `now`s are fixed dates past the wall clock.
    settings.service.allow_future_now = true;
    let time = settings.time.time_config();
    let service = Service::new(runner, board.clone(), settings, (0..16).collect());
    // Start-up: no pass result yet, the 16 cursors are read.
    service.attach_controls(cluster.clone(), obs.clone()).await;
    assert_eq!(
        loads.load(Ordering::SeqCst),
        16,
        "start-up reads every cursor"
    );
    service.set_ready();

    // The cold start at NOW (before every event), then a pass after the
    // events and before they are due: their matches are pending.
    let mid = ts_of(keys.len()) + 60 * S;
    for now in [NOW, mid] {
        let before = loads.load(Ordering::SeqCst);
        let run = service
            .start(
                TriggerRequest {
                    now_ns: Some(now),
                    ..Default::default()
                },
                Cause::Trigger,
            )
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while board
            .snapshot()
            .last_pass
            .as_ref()
            .is_none_or(|p| p.run_id != run.run_id)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the pass never finished"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            loads.load(Ordering::SeqCst) - before,
            16,
            "the pass loads each cursor once; its forecast refresh loads none"
        );
    }
    assert!(server.calls().is_empty(), "nothing is due yet");

    let saved: Vec<Option<ShardCursor>> = (0..16u8)
        .map(|s| store.lock().unwrap().get(&s).cloned())
        .collect();
    let want = Forecast::of(&saved, &time, mid, FORECAST_DAYS, None);
    let pending: u64 = want.rules.iter().map(|r| r.pending()).sum();
    assert_eq!(pending, keys.len() as u64, "{want:?}");
    assert_eq!(board.snapshot().forecast, Some(want));
    let text = obs.metrics.encode();
    assert!(
        text.contains(r#"s3_lifecycled_matches_pending{bucket="b",rule="d"} 40"#),
        "{text}"
    );
}
