//! Criterion benches for the pure engine: snapshot compilation, view
//! partitioning and cursor hashes over a 1,000-rule snapshot (and, to come,
//! meta-log routing throughput).
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use s3_lifecycled::engine::{
    BucketConfig, Snapshot, TimeConfig, Versioning, promoted_hash, promoted_hash_by_bucket,
    replay_content_hash, replay_content_hash_by_bucket,
};
use s3_lifecycled::lifecycle::FlatRule;
use time::OffsetDateTime;

const BUCKETS: usize = 10;
const RULES: usize = 1_000;
const DAY: Duration = Duration::from_secs(86_400);

/// 1,000 rules over 10 buckets, cycling through every action kind and filter
/// shape (prefix only, tags, size bounds), with some rules disabled and a
/// spread of day counts so a 30-day window splits replay from walk.
fn fixture() -> Vec<BucketConfig> {
    let versionings = [
        Versioning::Unversioned,
        Versioning::Enabled,
        Versioning::Suspended,
    ];
    let mut buckets: Vec<BucketConfig> = (0..BUCKETS)
        .map(|i| BucketConfig {
            name: format!("bucket-{i:02}"),
            versioning: versionings[i % versionings.len()],
            object_lock: i % 7 == 3,
            rules: Vec::new(),
        })
        .collect();
    for n in 0..RULES {
        let days = (n % 90) as i64 + 1;
        let mut rule = FlatRule {
            id: format!("rule-{n}"),
            position: n / BUCKETS + 1,
            enabled: n % 11 != 0,
            prefix: format!("data/{}/{n}/", n % 17),
            ..FlatRule::default()
        };
        match n % 6 {
            0 => rule.expiration_days = days,
            1 => rule.noncurrent_days = days,
            2 => rule.abort_mpu_days = days,
            3 => {
                rule.expiration_date =
                    OffsetDateTime::from_unix_timestamp(1_717_200_000 + n as i64 * 86_400).ok()
            }
            4 => rule.expired_object_delete_marker = true,
            _ => {
                rule.noncurrent_days = days;
                rule.newer_noncurrent_versions = 3;
                rule.expiration_days = days + 5;
            }
        }
        match n % 4 {
            0 => {}
            1 => {
                rule.tags = BTreeMap::from([
                    ("env".to_string(), format!("e{}", n % 3)),
                    ("team".to_string(), format!("t{}", n % 5)),
                ])
            }
            2 => {
                rule.size_gt = 1024;
                rule.size_lt = 10 << 20;
            }
            _ => {
                rule.tags = BTreeMap::from([("tier".to_string(), "cold".to_string())]);
                rule.size_gt = 128;
            }
        }
        buckets[n % BUCKETS].rules.push(rule);
    }
    buckets
}

fn compile(c: &mut Criterion) {
    let input = fixture();
    let time = TimeConfig::default();
    c.bench_function("compile_1000_rules_10_buckets", |b| {
        b.iter_batched(
            || input.clone(),
            |input| Snapshot::compile(input, time),
            BatchSize::SmallInput,
        )
    });
}

fn views_and_hashes(c: &mut Criterion) {
    let snap = Snapshot::compile(fixture(), TimeConfig::default());
    let window = DAY * 30;
    c.bench_function("rules_for_shard_1000_rules", |b| {
        b.iter(|| black_box(&snap).rules_for_shard(0, black_box(window)))
    });
    c.bench_function("recovery_view_1000_rules", |b| {
        b.iter(|| black_box(&snap).recovery_view())
    });
    c.bench_function("replay_content_hash_1000_rules", |b| {
        b.iter(|| replay_content_hash(black_box(&snap)))
    });
    c.bench_function("promoted_hash_1000_rules", |b| {
        b.iter(|| promoted_hash(black_box(&snap), black_box(window)))
    });
    c.bench_function("replay_content_hash_by_bucket_1000_rules", |b| {
        b.iter(|| replay_content_hash_by_bucket(black_box(&snap)))
    });
    c.bench_function("promoted_hash_by_bucket_1000_rules", |b| {
        b.iter(|| promoted_hash_by_bucket(black_box(&snap), black_box(window)))
    });
}

// Routing throughput lives in benches/route.rs.

criterion_group!(benches, compile, views_and_hashes);
criterion_main!(benches);
