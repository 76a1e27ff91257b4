//! Routing throughput: events per second through `engine::route::route` on
//! one core, over a mixed synthetic meta-log stream against a snapshot of
//! ~50 rules across 10 buckets. The baseline in the same run is protobuf
//! decoding of the same events (`decode_baseline`), work the meta-log reader
//! must do for every event anyway: routing cost is reported as a ratio to it.
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use prost::Message;
use s3_lifecycled::engine::event::MetaEvent;
use s3_lifecycled::engine::route::route;
use s3_lifecycled::engine::{BucketConfig, Snapshot, TimeConfig, Versioning, keys};
use s3_lifecycled::lifecycle::FlatRule;
use s3_lifecycled::pb::filer_pb::{
    Entry, EventNotification, FileChunk, FileId, FuseAttributes, SubscribeMetadataResponse,
};

const EVENTS: usize = 100_000;
const BUCKETS: usize = 10;

fn snapshot() -> Snapshot {
    let buckets = (0..BUCKETS)
        .map(|b| {
            let rules = (0..5)
                .map(|r| {
                    let mut rule = FlatRule {
                        id: format!("r{r}"),
                        enabled: true,
                        prefix: format!("p{r}/"),
                        ..FlatRule::default()
                    };
                    match r {
                        0 => rule.expiration_days = 30,
                        1 => rule.noncurrent_days = 7,
                        2 => rule.abort_mpu_days = 3,
                        3 => {
                            rule.expiration_days = 90;
                            rule.tags = [("env".to_string(), "dev".to_string())].into();
                        }
                        _ => {
                            rule.expiration_days = 1;
                            rule.size_gt = 1024;
                        }
                    }
                    rule
                })
                .collect();
            BucketConfig {
                name: format!("bucket{b}"),
                versioning: if b % 2 == 0 {
                    Versioning::Enabled
                } else {
                    Versioning::Unversioned
                },
                object_lock: false,
                rules,
            }
        })
        .collect();
    Snapshot::compile(buckets, TimeConfig::default())
}

fn file(name: String, i: usize) -> Entry {
    let mut e = Entry {
        name,
        chunks: vec![FileChunk {
            fid: Some(FileId {
                volume_id: 7,
                file_key: i as u64,
                cookie: 0x55dc_63ec,
            }),
            ..FileChunk::default()
        }],
        attributes: Some(FuseAttributes {
            file_size: (i % 4096) as u64,
            mtime: 1_796_201_400 + i as i64,
            ..FuseAttributes::default()
        }),
        ..Entry::default()
    };
    e.extended.insert(
        keys::ETAG.into(),
        b"9f5b6d9a034d175868bf593885b7dc4e".to_vec(),
    );
    e.extended
        .insert("Seaweed-X-Amz-Owner".into(), b"admin".to_vec());
    e
}

fn ev(dir: String, old: Option<Entry>, new: Option<Entry>, i: usize) -> MetaEvent {
    MetaEvent {
        ts_ns: 1_796_201_400_000_000_000 + i as i64,
        new_parent_path: if new.is_some() {
            dir.clone()
        } else {
            String::new()
        },
        directory: dir,
        old_entry: old.map(Box::new),
        new_entry: new.map(Box::new),
    }
}

/// Mix: 40% PUT, 15% overwrite, 15% versioned PUT, 10% demotion stamp, 5% MPU
/// init, 5% MPU part, 5% directory, 5% delete.
fn stream() -> Vec<MetaEvent> {
    (0..EVENTS)
        .map(|i| {
            let b = format!("/buckets/bucket{}", i % BUCKETS);
            let p = format!("p{}", i % 6);
            let vid = format!("{:016x}{:016x}", 0x6712_9c57_0000_0000u64 - i as u64, i);
            match i % 20 {
                0..=7 => ev(
                    format!("{b}/{p}/d{}", i % 50),
                    None,
                    Some(file(format!("o{i}"), i)),
                    i,
                ),
                8..=10 => {
                    let old = file(format!("o{}", i / 2), i / 2);
                    ev(
                        format!("{b}/{p}"),
                        Some(old),
                        Some(file(format!("o{}", i / 2), i)),
                        i,
                    )
                }
                11..=13 => {
                    let mut v = file(format!("v_{vid}"), i);
                    v.extended
                        .insert(keys::VERSION_ID.into(), vid.clone().into_bytes());
                    ev(format!("{b}/{p}/k{i}.versions"), None, Some(v), i)
                }
                14 | 15 => {
                    let mut v = file(format!("v_{vid}"), i);
                    v.extended
                        .insert(keys::VERSION_ID.into(), vid.clone().into_bytes());
                    let mut s = v.clone();
                    s.extended.insert(
                        keys::NONCURRENT_SINCE_NS.into(),
                        b"1796201400597511930".to_vec(),
                    );
                    ev(format!("{b}/{p}/k{i}.versions"), Some(v), Some(s), i)
                }
                16 => {
                    let mut d = file(format!("{vid}_{vid}"), i);
                    d.is_directory = true;
                    d.chunks.clear();
                    d.extended
                        .insert(keys::MPU_KEY.into(), format!("{p}/mp{i}.bin").into_bytes());
                    ev(format!("{b}/.uploads"), None, Some(d), i)
                }
                17 => ev(
                    format!("{b}/.uploads/{vid}"),
                    None,
                    Some(file(format!("0001_{i}.part"), i)),
                    i,
                ),
                18 => {
                    let mut d = file(format!("dir{i}"), i);
                    d.is_directory = true;
                    ev(b.clone(), None, Some(d), i)
                }
                _ => ev(format!("{b}/{p}"), Some(file(format!("o{i}"), i)), None, i),
            }
        })
        .collect()
}

fn bench_route(c: &mut Criterion) {
    let snap = snapshot();
    let events = stream();
    let mut g = c.benchmark_group("route");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    g.bench_function("mixed_100k_events_50_rules", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for e in &events {
                if let Some(r) = route(&snap, "/buckets", black_box(e)) {
                    n += r.matches.len();
                }
            }
            black_box(n)
        })
    });
    // Baseline: decode the same events from their wire form, as the reader does.
    let wire: Vec<Vec<u8>> = events
        .iter()
        .map(|e| {
            SubscribeMetadataResponse {
                directory: e.directory.clone(),
                ts_ns: e.ts_ns,
                event_notification: Some(EventNotification {
                    old_entry: e.old_entry.clone(),
                    new_entry: e.new_entry.clone(),
                    new_parent_path: e.new_parent_path.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }
            .encode_to_vec()
        })
        .collect();
    g.bench_function("decode_baseline_100k_events", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for w in &wire {
                let r = SubscribeMetadataResponse::decode(black_box(w.as_slice()))
                    .expect("bench events encode cleanly");
                n += usize::from(MetaEvent::from_response(&r).is_some());
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, bench_route);
criterion_main!(benches);
