//! The actor tree with fake ports: a cold-start pass walks a bucket, deletes
//! through the dispatcher, halts only the shard whose delete came back
//! RETRY_LATER, and saves every shard's cursor.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use s3_lifecycled::config::Settings;
use s3_lifecycled::engine::{Nanos, WalkItem, keys, shard_id};
use s3_lifecycled::pass::coordinator::{Coordinator, PassOptions, RunPass, StopSignal};
use s3_lifecycled::pass::dispatch::{AttemptResult, DeletePort};
use s3_lifecycled::pass::observe::PassObserver;
use s3_lifecycled::pass::ports::{ClusterPort, EventStream};
use s3_lifecycled::pass::shard_run::ShardOutcome;
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes};
use s3_lifecycled::seaweed::buckets::{BucketScan, bucket_info};
use s3_lifecycled::seaweed::cursor::ShardCursor;
use s3_lifecycled::seaweed::delete::DeleteRequest;

const S: Nanos = 1_000_000_000;
const NOW: Nanos = 1_800_000_000 * S;

struct FakeCluster {
    keys: Vec<String>,
    saved: Mutex<BTreeMap<u8, ShardCursor>>,
}

fn file(name: &str, mtime_s: i64) -> Entry {
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
    fn buckets(&self) -> BoxFuture<'static, Result<BucketScan, String>> {
        let xml = b"<LifecycleConfiguration><Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>";
        let mut e = Entry {
            name: "b".into(),
            is_directory: true,
            ..Default::default()
        };
        e.extended.insert(keys::LIFECYCLE_XML.into(), xml.to_vec());
        let info = bucket_info(&e).unwrap();
        async move {
            Ok(BucketScan {
                buckets: vec![info],
                errors: vec![],
            })
        }
        .boxed()
    }
    fn earliest_available(&self) -> BoxFuture<'static, Result<Option<Nanos>, String>> {
        async { Ok(None) }.boxed()
    }
    fn load_cursor(&self, _shard: u8) -> BoxFuture<'static, Result<Option<ShardCursor>, String>> {
        async { Ok(None) }.boxed()
    }
    fn save_cursor(&self, c: ShardCursor, _now: Nanos) -> BoxFuture<'static, Result<(), String>> {
        self.saved.lock().unwrap().insert(c.shard_id, c);
        async { Ok(()) }.boxed()
    }
    fn list_bucket(&self, _bucket: &str) -> BoxStream<'static, Result<WalkItem, String>> {
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
    fn lookup(&self, _d: &str, _n: &str) -> BoxFuture<'static, Result<Option<Entry>, String>> {
        async { Ok(None) }.boxed()
    }
    fn subscribe(&self, _s: Nanos, _u: Nanos) -> BoxFuture<'static, Result<EventStream, String>> {
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
            Ok(("RETRY_LATER", "slow down".to_string(), false))
        } else {
            Ok(("DONE", String::new(), true))
        };
        async move { r }.boxed()
    }
}

#[actix::test]
async fn one_retry_later_halts_only_its_shard_and_every_cursor_is_saved() {
    let keys: Vec<String> = (0..200).map(|i| format!("k{i:03}")).collect();
    let refuse = keys[17].clone();
    let bad_shard = shard_id("b", &refuse);
    let cluster = Arc::new(FakeCluster {
        keys: keys.clone(),
        saved: Mutex::new(BTreeMap::new()),
    });
    let deletes = Arc::new(FakeDelete {
        refuse: refuse.clone(),
        calls: AtomicUsize::new(0),
        per_key: Mutex::new(HashMap::new()),
    });
    let mut settings = Settings::default();
    settings.dispatch.max_in_flight_per_shard = 3;
    let coord = actix::Actor::start(Coordinator::new(cluster.clone(), deletes.clone()));
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
    assert_eq!(result.outcome(), "halted");
    for s in &result.shards {
        if s.report.shard == bad_shard {
            assert_eq!(s.report.outcome, ShardOutcome::Halted);
            let why = s.report.halt_reason.clone().unwrap();
            assert!(why.starts_with(&format!("RETRY_LATER b/{refuse}")), "{why}");
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
    assert!(
        !saved[&bad_shard].buckets.contains_key("b"),
        "the halted shard's failed recovery keeps no bucket state"
    );
    let good = (0..16u8).find(|s| *s != bad_shard).unwrap();
    assert!(saved[&good].buckets.contains_key("b"));
}

#[actix::test]
async fn dry_run_sends_and_saves_nothing() {
    let cluster = Arc::new(FakeCluster {
        keys: (0..20).map(|i| format!("k{i}")).collect(),
        saved: Mutex::new(BTreeMap::new()),
    });
    let deletes = Arc::new(FakeDelete {
        refuse: String::new(),
        calls: AtomicUsize::new(0),
        per_key: Mutex::new(HashMap::new()),
    });
    let coord = actix::Actor::start(Coordinator::new(cluster.clone(), deletes.clone()));
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
    assert_eq!(result.outcome(), "completed");
    assert_eq!(deletes.calls.load(Ordering::SeqCst), 0);
    assert!(cluster.saved.lock().unwrap().is_empty());
    let dry: u64 = result
        .shards
        .iter()
        .map(|s| {
            s.report
                .counters
                .deletes
                .get("DRY_RUN")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    let expected = (0..20)
        .filter(|i| shard_id("b", &format!("k{i}")) < 4)
        .count() as u64;
    assert_eq!(dry, expected);
}

#[actix::test]
async fn a_stopped_pass_is_truncated_sends_nothing_and_saves_every_cursor() {
    let cluster = Arc::new(FakeCluster {
        keys: (0..50).map(|i| format!("k{i}")).collect(),
        saved: Mutex::new(BTreeMap::new()),
    });
    let deletes = Arc::new(FakeDelete {
        refuse: String::new(),
        calls: AtomicUsize::new(0),
        per_key: Mutex::new(HashMap::new()),
    });
    let obs = PassObserver::default();
    let coord = actix::Actor::start(Coordinator::with_observer(
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
    assert_eq!(result.outcome(), "truncated");
    assert_eq!(result.truncated.as_deref(), Some("shutdown (SIGTERM)"));
    assert_eq!(deletes.calls.load(Ordering::SeqCst), 0);
    {
        let saved = cluster.saved.lock().unwrap();
        assert_eq!(saved.len(), 16, "every shard saves its cursor");
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
    assert_eq!(result.outcome(), "completed");
    let per_key = deletes.per_key.lock().unwrap();
    assert_eq!(per_key.len(), 50);
    assert!(per_key.values().all(|&n| n == 1));
    let text = obs.metrics.encode();
    assert!(
        text.contains("SeaweedFS_s3_lifecycle_dispatch_total{bucket=\"b\",kind=\"expiration_days\",outcome=\"DONE\"} 50"),
        "{text}"
    );
}
