//! A filer with a store of its own that dies mid-pass can lose deletes it
//! acknowledged: on its own store, and on its peers' when they had not
//! received them yet (docs/meta-log.md#filer-crash). The actor tree with fake
//! ports: the fake cluster keeps listing every object however often it is
//! "deleted" (the deletes were lost), and says a filer failed during the
//! first pass, either before the cursors are saved or only while they are.

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
use s3_lifecycled::engine::{Nanos, WalkItem, shard_id};
use s3_lifecycled::pass::coordinator::{Coordinator, RunPass};
use s3_lifecycled::pass::dispatch::{AttemptResult, DeletePort};
use s3_lifecycled::pass::observe::PassObserver;
use s3_lifecycled::pass::options::PassOptions;
use s3_lifecycled::pass::ports::{ClusterError, ClusterPort, EventStream};
use s3_lifecycled::pass::report::PassResult;
use s3_lifecycled::pb::filer_pb::Entry;
use s3_lifecycled::seaweed::buckets::BucketScan;
use s3_lifecycled::status::RunOutcome;

const S: Nanos = 1_000_000_000;
const NOW: Nanos = 1_800_000_000 * S;
const DAY: Nanos = 86_400 * S;

/// One bucket `b` with a 1-day rule and `keys` 30 days old that no delete
/// ever removes; cursors kept across passes.
struct LostDeletes {
    keys: Vec<String>,
    saved: Mutex<BTreeMap<u8, ShardCursor>>,
    /// Cursor saves, in order: `(shard, marked)`.
    saves: Mutex<Vec<(u8, bool)>>,
    /// `filers_failed_since` answers "filer-1" from this call on (counted
    /// from 1; `usize::MAX`: never).
    lost_from_call: AtomicUsize,
    calls: AtomicUsize,
}

impl LostDeletes {
    fn new(n: usize) -> LostDeletes {
        LostDeletes {
            keys: (0..n).map(|i| format!("due/{i:03}")).collect(),
            saved: Mutex::new(BTreeMap::new()),
            saves: Mutex::new(Vec::new()),
            lost_from_call: AtomicUsize::new(usize::MAX),
            calls: AtomicUsize::new(0),
        }
    }
}

impl ClusterPort for LostDeletes {
    fn buckets_root(&self) -> String {
        "/buckets".into()
    }
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, ClusterError>> {
        crate::pass_actors::scan_of_bucket_b()
    }
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, ClusterError>> {
        async { Ok(None) }.boxed()
    }
    fn load_cursor(
        &self,
        shard: u8,
    ) -> BoxFuture<'static, Result<Option<ShardCursor>, ClusterError>> {
        let c = self.saved.lock().unwrap().get(&shard).cloned();
        async move { Ok(c) }.boxed()
    }
    fn save_cursor(
        &self,
        c: ShardCursor,
        _now: Nanos,
    ) -> BoxFuture<'static, Result<(), ClusterError>> {
        let marked = c.buckets.values().any(|b| b.rewalk.is_some());
        self.saves.lock().unwrap().push((c.shard_id, marked));
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
                    entry: crate::pass_actors::file(
                        k.rsplit('/').next().unwrap(),
                        (NOW - 30 * DAY) / S,
                    ),
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
    fn filers_failed_since(&self, _since: std::time::Instant) -> Vec<String> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if call >= self.lost_from_call.load(Ordering::SeqCst) {
            vec!["filer-1".into()]
        } else {
            Vec::new()
        }
    }
}

/// Every delete answered DONE; counted per key.
#[derive(Default)]
struct Acknowledged {
    per_key: Mutex<HashMap<String, usize>>,
}

impl DeletePort<DeleteRequest> for Acknowledged {
    fn call(&self, c: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        *self
            .per_key
            .lock()
            .unwrap()
            .entry(c.object_path.clone())
            .or_default() += 1;
        async { Ok(CallResult::answered(DeleteOutcome::Done, "")) }.boxed()
    }
}

async fn pass(coord: &actix::Addr<Coordinator>, now: Nanos) -> PassResult {
    coord
        .send(RunPass(PassOptions {
            now,
            shards: (0..16).collect(),
            dry_run: false,
            settings: Settings::default(),
            run_id: format!("p{now}"),
            stop: Default::default(),
        }))
        .await
        .unwrap()
        .unwrap()
}

fn sent(d: &Acknowledged) -> BTreeMap<usize, usize> {
    let mut by_count = BTreeMap::new();
    for n in d.per_key.lock().unwrap().values() {
        *by_count.entry(*n).or_default() += 1;
    }
    by_count
}

fn recovering(r: &PassResult, reason: &str) -> usize {
    r.shards
        .iter()
        .filter(|s| {
            s.report
                .recovery
                .iter()
                .any(|(_, why)| why.as_str() == reason)
        })
        .count()
}

/// The failure `lost_from_call` says, in the first of three passes: the
/// second walks the bucket again and sends every delete a second time; the
/// third, with no filer lost, walks nothing.
async fn crash_then_two_passes(lost_from_call: usize) -> (Arc<LostDeletes>, Vec<PassResult>) {
    let cluster = Arc::new(LostDeletes::new(64));
    cluster
        .lost_from_call
        .store(lost_from_call, Ordering::SeqCst);
    let deletes = Arc::new(Acknowledged::default());
    let coord = actix::Actor::start(Coordinator::new(
        cluster.clone(),
        deletes.clone(),
        PassObserver::default(),
    ));
    let first = pass(&coord, NOW).await;
    assert_eq!(first.outcome(), RunOutcome::Completed);
    assert_eq!(sent(&deletes), BTreeMap::from([(1, 64)]));
    // The shards that deleted in `b` (all of them, or nearly).
    let deleted: std::collections::BTreeSet<u8> =
        cluster.keys.iter().map(|k| shard_id("b", k)).collect();
    for (shard, c) in cluster.saved.lock().unwrap().iter() {
        let mark = c.buckets.get("b").and_then(|b| b.rewalk.as_deref());
        assert_eq!(
            mark.is_some_and(|why| why.contains("filer-1")),
            deleted.contains(shard),
            "shard {shard}: {mark:?}"
        );
    }
    // The filer is back; none fails any more.
    cluster.lost_from_call.store(usize::MAX, Ordering::SeqCst);
    let second = pass(&coord, NOW + DAY).await;
    assert_eq!(second.outcome(), RunOutcome::Completed);
    assert_eq!(
        recovering(&second, "filer_lost"),
        deleted.len(),
        "{:?}",
        second.shards
    );
    assert_eq!(
        sent(&deletes),
        BTreeMap::from([(2, 64)]),
        "the lost deletes are sent again"
    );
    assert!(
        cluster
            .saved
            .lock()
            .unwrap()
            .values()
            .all(|c| c.buckets.get("b").is_none_or(|b| b.rewalk.is_none())),
        "a finished recovery clears the mark"
    );
    let third = pass(&coord, NOW + 2 * DAY).await;
    assert_eq!(recovering(&third, "filer_lost"), 0);
    assert!(third.shards.iter().all(|s| !s.report.walker_ran));
    (cluster, vec![first, second, third])
}

/// Before: a pass that deleted through a filer which then died saved its
/// walk as done, and the objects whose deletes the filer lost stayed due for
/// good (`two_filers/multi.rs`, 1 run in 8: 337 due objects left).
#[actix::test]
async fn acknowledged_deletes_left_due_objects_after_a_filer_crash() {
    let (cluster, _) = crash_then_two_passes(1).await;
    let saves = cluster.saves.lock().unwrap();
    assert_eq!(
        saves.len(),
        16 * 3,
        "no second save when the loss was known first"
    );
}

/// The filer fails only while the cursors are saved (the saves fail over):
/// the cursors just saved are saved again, marked.
#[actix::test]
async fn a_filer_lost_while_the_cursors_were_saved_left_due_objects_after_a_filer_crash() {
    let (cluster, _) = crash_then_two_passes(2).await;
    let saves = cluster.saves.lock().unwrap();
    let marked_shards = cluster
        .keys
        .iter()
        .map(|k| shard_id("b", k))
        .collect::<std::collections::BTreeSet<u8>>()
        .len();
    let first: Vec<&(u8, bool)> = saves.iter().take(16 + marked_shards).collect();
    assert_eq!(first.iter().filter(|(_, m)| !m).count(), 16);
    assert_eq!(first.iter().filter(|(_, m)| *m).count(), marked_shards);
}
