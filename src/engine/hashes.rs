//! Cursor hashes over a [`Snapshot`] (docs/rule-hash.md#replay-content-hash,
//! docs/rule-hash.md#promoted-hash): `ReplayContentHash` (the cursor's
//! `rule_set_hash`) and `PromotedHash`, each also per bucket.
//!
//! The global forms are byte-identical to Go, so cursors written by the Go
//! worker stay valid. The per-bucket forms go beyond Go: with per-bucket
//! hashes an edit in one bucket forces a recovery walk of that bucket only,
//! not of every lifecycle bucket on every shard (docs/design-deviations.md#per-bucket-hashes).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::rule_hash::HashStream;
use crate::engine::views::replay_eligible;
use crate::engine::{CompiledAction, RuleMode, Snapshot};

/// The hash of an empty item set (Go's zero `[32]byte`).
pub const EMPTY_HASH: [u8; 32] = [0; 32];

/// Content hash over every non-Disabled replay-kind action (ExpirationDays,
/// NoncurrentDays, AbortMpu) of every bucket: bucket, rule hash, kind and
/// effective TTL in nanoseconds. Partition-independent (no retention window),
/// stable under any reordering of rules or buckets. [`EMPTY_HASH`] when the
/// snapshot has no such action.
///
/// Because the rule hash covers every action field of its rule, editing a
/// walker-only field of a rule that also has a replay kind (say
/// `NewerNoncurrentVersions` next to `Expiration/Days`) changes this hash, as
/// in Go. Editing, adding or removing rules that have only walker kinds does
/// not.
pub fn replay_content_hash(snapshot: &Snapshot) -> [u8; 32] {
    global_hash(snapshot, in_replay_set, true)
}

/// [`replay_content_hash`] per bucket: one entry for every bucket of the
/// snapshot, [`EMPTY_HASH`] for a bucket without replay-kind actions.
pub fn replay_content_hash_by_bucket(snapshot: &Snapshot) -> BTreeMap<String, [u8; 32]> {
    hash_by_bucket(snapshot, in_replay_set, true)
}

/// Hash of the replay-kind actions that `rules_for_shard` with the same
/// `retention_window` puts in the walk view (TTL zero or beyond the window):
/// bucket, rule hash and kind, no TTL. A change means a rule moved between
/// replay and walk in either direction. [`EMPTY_HASH`] when none did.
pub fn promoted_hash(snapshot: &Snapshot, retention_window: Duration) -> [u8; 32] {
    global_hash(snapshot, |a| in_promoted_set(a, retention_window), false)
}

/// [`promoted_hash`] per bucket: one entry for every bucket of the snapshot.
pub fn promoted_hash_by_bucket(
    snapshot: &Snapshot,
    retention_window: Duration,
) -> BTreeMap<String, [u8; 32]> {
    hash_by_bucket(snapshot, |a| in_promoted_set(a, retention_window), false)
}

/// [`hash_items`] of the snapshot's actions that `keep`, in Go's item order.
fn global_hash(snapshot: &Snapshot, keep: impl Fn(&CompiledAction) -> bool, ttl: bool) -> [u8; 32] {
    let mut items: Vec<&CompiledAction> = snapshot.actions().filter(|a| keep(a)).collect();
    // Go's item order: rule hash bytes, then kind, then bucket bytes. (Not the
    // snapshot's bucket-first order; a different order gives different bytes.)
    items.sort_by_key(|a| (a.rule_hash(), a.kind(), a.bucket().clone()));
    hash_items(&items, ttl)
}

/// [`global_hash`] per bucket: one entry for every bucket of the snapshot.
fn hash_by_bucket(
    snapshot: &Snapshot,
    keep: impl Fn(&CompiledAction) -> bool,
    ttl: bool,
) -> BTreeMap<String, [u8; 32]> {
    snapshot
        .buckets()
        .iter()
        .map(|b| {
            // Within one bucket the (rule hash, kind) order is the global
            // item order restricted to that bucket.
            let items: Vec<&CompiledAction> = b.actions_sorted().filter(|a| keep(a)).collect();
            (b.name().to_string(), hash_items(&items, ttl))
        })
        .collect()
}

// Go's `MaxEffectiveTTL`, per snapshot and per bucket: the longest effective
// TTL among active replay-kind actions (zero when there is none). Nothing
// outside the tests needs it, so only they build it.
#[cfg(test)]
pub(crate) fn max_effective_ttl(snapshot: &Snapshot) -> Duration {
    max_ttl(snapshot.actions())
}

#[cfg(test)]
pub(crate) fn max_effective_ttl_by_bucket(snapshot: &Snapshot) -> BTreeMap<String, Duration> {
    snapshot
        .buckets()
        .iter()
        .map(|b| (b.name().to_string(), max_ttl(b.actions().iter())))
        .collect()
}

#[cfg(test)]
fn max_ttl<'a>(actions: impl Iterator<Item = &'a CompiledAction>) -> Duration {
    actions
        .filter(|a| a.is_active() && a.kind().is_replay_kind())
        .map(CompiledAction::ttl)
        .max()
        .unwrap_or(Duration::ZERO)
}

fn in_replay_set(action: &CompiledAction) -> bool {
    action.mode() != RuleMode::Disabled && action.kind().is_replay_kind()
}

fn in_promoted_set(action: &CompiledAction, retention_window: Duration) -> bool {
    in_replay_set(action) && !replay_eligible(action, retention_window)
}

/// Per item: `0x01 uvarint(len) bucket | 0x02 uvarint(8) rule_hash |
/// 0x03 zigzag(kind)` and, when `with_ttl`, `| 0x04 zigzag(ttl ns)`.
fn hash_items(items: &[&CompiledAction], with_ttl: bool) -> [u8; 32] {
    if items.is_empty() {
        return EMPTY_HASH;
    }
    let mut w = HashStream::new();
    for a in items {
        w.field(0x01, a.bucket().as_bytes());
        w.field(0x02, &a.rule_hash().0);
        w.int(0x03, i64::from(a.kind().proto_number()));
        if with_ttl {
            // Go's time.Duration is i64 ns; saturate rather than wrap for
            // absurd day counts (TimeConfig::days already saturates).
            w.int(0x04, i64::try_from(a.ttl().as_nanos()).unwrap_or(i64::MAX));
        }
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compile::tests::{arb_buckets, bucket, rule};
    use crate::engine::{ActionKind, BucketConfig, TimeConfig};
    use crate::lifecycle::FlatRule;
    use proptest::prelude::*;
    use time::macros::datetime;

    const DAY: Duration = Duration::from_secs(86_400);

    fn compile(buckets: Vec<BucketConfig>) -> Snapshot {
        Snapshot::compile(buckets, TimeConfig::default())
    }

    fn hex32(h: [u8; 32]) -> String {
        hex::encode(h)
    }

    fn days_rule(id: &str, prefix: &str, days: i64) -> FlatRule {
        let mut r = rule(id, prefix);
        r.expiration_days = days;
        r
    }

    fn bkt2_rules() -> Vec<FlatRule> {
        let mut nc = rule("nc", "");
        nc.noncurrent_days = 3;
        let mut tmp = days_rule("tmp", "tmp/", 7);
        tmp.tags.insert("env".into(), "dev".into());
        tmp.size_gt = 100;
        let mut up = rule("up", "up/");
        up.abort_mpu_days = 2;
        vec![nc, tmp, up]
    }

    #[test]
    fn go_verified_replay_content_hash_bkt1() {
        let snap = compile(vec![bucket("bkt1", vec![days_rule("r", "logs/", 30)])]);
        assert_eq!(
            hex32(replay_content_hash(&snap)),
            "a1562cfd2a07d756ab4c02711735ee18f6862e78447919219b564c5393ee8a82"
        );
    }

    #[test]
    fn go_verified_replay_content_hash_bkt2_three_rules() {
        let snap = compile(vec![bucket("bkt2", bkt2_rules())]);
        assert_eq!(
            hex32(replay_content_hash(&snap)),
            "d89336322d26a26bee28bab5ca6505fea0037b9b335d83f9adca637b86ccccd7"
        );
    }

    #[test]
    fn rule_hash_vector_python_vectors_for_b1() {
        let snap = compile(vec![bucket("b1", vec![days_rule("r", "logs/", 30)])]);
        assert_eq!(
            hex32(replay_content_hash(&snap)),
            "a0bd82eb568eedfd3961ab503835d06a07c4f0b3d46ec1d5498b3e59a4e54c01"
        );
        assert_eq!(
            hex32(promoted_hash(&snap, DAY * 29)),
            "d1ed41d09550d0ddaa979e167915e816f28cefdb138f28bba8a0fc36f6756766"
        );
    }

    /// Go sorts items by rule hash before bucket; the verified vectors are
    /// single-bucket, so pin the cross-bucket order against hand-built bytes.
    #[test]
    fn items_are_ordered_by_rule_hash_before_bucket() {
        use sha2::{Digest, Sha256};
        // Rule hashes: "logs/"+30 d = 0c8c..., ""+1 d = 9089... .
        let snap = compile(vec![
            bucket("a", vec![days_rule("y", "", 1)]),
            bucket("z", vec![days_rule("x", "logs/", 30)]),
        ]);
        let mut bytes = Vec::new();
        for (bucket, hash, ttl) in [
            ("z", "0c8cc7219c442e3e", "808090f4a0da9a09"), // 30 d in ns, zigzag
            ("a", "908967e18331cc64", "8080f89492a527"),   // 1 d in ns, zigzag
        ] {
            bytes.extend([0x01, 0x01]);
            bytes.extend(bucket.as_bytes());
            bytes.extend([0x02, 0x08]);
            bytes.extend(hex::decode(hash).unwrap());
            bytes.extend([0x03, 0x02, 0x04]); // kind 1 zigzag = 2, then TTL tag
            bytes.extend(hex::decode(ttl).unwrap());
        }
        let expected: [u8; 32] = Sha256::digest(&bytes).into();
        assert_eq!(replay_content_hash(&snap), expected);
    }

    #[test]
    fn empty_for_walker_only_rules_and_empty_snapshots() {
        let mut date = rule("date", "");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let mut marker = rule("marker", "");
        marker.expired_object_delete_marker = true;
        let mut keep = rule("keep", "");
        keep.newer_noncurrent_versions = 1;
        let snap = compile(vec![bucket("b", vec![date, marker, keep])]);
        assert_eq!(replay_content_hash(&snap), EMPTY_HASH);
        assert_eq!(promoted_hash(&snap, Duration::ZERO), EMPTY_HASH);
        assert_eq!(max_effective_ttl(&snap), Duration::ZERO);
        let empty = compile(vec![]);
        assert_eq!(replay_content_hash(&empty), EMPTY_HASH);
        assert!(replay_content_hash_by_bucket(&empty).is_empty());
    }

    #[test]
    fn replay_hash_is_partition_independent() {
        let snap = compile(vec![bucket("bkt2", bkt2_rules())]);
        let h = replay_content_hash(&snap);
        // Simulate every replay action promoted to scan-only and inactive:
        // only the dispatch path changed, not the content.
        let mut promoted = snap.clone();
        for a in promoted.actions_mut() {
            a.set_mode(RuleMode::ScanOnly);
            a.set_active(false);
        }
        assert_eq!(replay_content_hash(&promoted), h);
        assert_eq!(replay_content_hash(&snap.recovery_view()), h);
    }

    /// Every replay-relevant edit must change the hash (so recovery runs).
    #[test]
    fn replay_hash_changes_on_replay_relevant_edits() {
        let base_rules = bkt2_rules();
        let base = replay_content_hash(&compile(vec![bucket("b", base_rules.clone())]));
        type Edit = fn(&mut Vec<FlatRule>);
        let edits: Vec<(&str, Edit)> = vec![
            ("prefix", |r| r[1].prefix = "tmp2/".into()),
            ("tag value", |r| {
                r[1].tags.insert("env".into(), "prod".into());
            }),
            ("tag added", |r| {
                r[0].tags.insert("a".into(), "b".into());
            }),
            ("size_gt", |r| r[1].size_gt = 101),
            ("size_lt", |r| r[2].size_lt = 5),
            ("expiration days", |r| r[1].expiration_days = 8),
            ("noncurrent days", |r| r[0].noncurrent_days = 4),
            ("mpu days", |r| r[2].abort_mpu_days = 3),
            ("kind added", |r| r[2].expiration_days = 9),
            ("kind removed", |r| r[2].abort_mpu_days = 0),
            ("rule added", |r| r.push(days_rule("new", "new/", 1))),
            ("rule removed", |r| {
                r.remove(0);
            }),
            ("rule disabled", |r| r[1].enabled = false),
        ];
        for (what, edit) in edits {
            let mut rules = base_rules.clone();
            edit(&mut rules);
            let h = replay_content_hash(&compile(vec![bucket("b", rules)]));
            assert_ne!(h, base, "{what} did not change the replay hash");
        }
    }

    #[test]
    fn enabling_a_rule_changes_the_hash_unlike_go() {
        let mut off = days_rule("r", "logs/", 30);
        off.enabled = false;
        let disabled = compile(vec![bucket("b", vec![off.clone()])]);
        assert_eq!(replay_content_hash(&disabled), EMPTY_HASH);
        off.enabled = true;
        let enabled = compile(vec![bucket("b", vec![off])]);
        assert_ne!(replay_content_hash(&enabled), EMPTY_HASH);
    }

    #[test]
    fn day_length_changes_the_hash_because_ttl_is_in_ns() {
        let rules = vec![days_rule("r", "logs/", 30)];
        let day24 = compile(vec![bucket("b", rules.clone())]);
        let day10s = Snapshot::compile(
            vec![bucket("b", rules)],
            TimeConfig {
                day: Duration::from_secs(10),
                ..TimeConfig::default()
            },
        );
        assert_ne!(replay_content_hash(&day24), replay_content_hash(&day10s));
        // PromotedHash carries no TTL: same items, same hash.
        assert_eq!(
            promoted_hash(&day24, Duration::ZERO),
            promoted_hash(&day10s, Duration::ZERO)
        );
    }

    #[test]
    fn replay_hash_ignores_walker_only_edits_and_renames() {
        let mut rules = bkt2_rules();
        let base = replay_content_hash(&compile(vec![bucket("b", rules.clone())]));
        let promoted = promoted_hash(&compile(vec![bucket("b", rules.clone())]), DAY * 5);
        // Rename every rule.
        for r in &mut rules {
            r.id.push_str("-renamed");
        }
        // Add walker-only rules, then edit them.
        let mut date = rule("date", "d/");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let mut marker = rule("marker", "m/");
        marker.expired_object_delete_marker = true;
        let mut keep = rule("keep", "k/");
        keep.newer_noncurrent_versions = 2;
        rules.extend([date, marker, keep]);
        let check = |rules: &Vec<FlatRule>, what: &str| {
            let snap = compile(vec![bucket("b", rules.clone())]);
            assert_eq!(replay_content_hash(&snap), base, "{what}");
            assert_eq!(promoted_hash(&snap, DAY * 5), promoted, "{what}");
        };
        check(&rules, "walker-only rules added");
        rules[3].expiration_date = Some(datetime!(2025-01-01 00:00:00 UTC));
        rules[4].prefix = "markers/".into();
        rules[5].newer_noncurrent_versions = 7;
        check(&rules, "walker-only rules edited");
        rules[3].enabled = false;
        check(&rules, "walker-only rule disabled");
        rules.truncate(3);
        check(&rules, "walker-only rules removed");
    }

    #[test]
    fn walker_field_on_a_replay_rule_changes_its_rule_hash_and_so_the_hash() {
        // Go-compatible consequence of hashing the rule hash: pinned so a
        // change of this behaviour is deliberate.
        let r = days_rule("r", "logs/", 30);
        let mut with_keep = r.clone();
        with_keep.newer_noncurrent_versions = 1;
        assert_ne!(
            replay_content_hash(&compile(vec![bucket("b", vec![r])])),
            replay_content_hash(&compile(vec![bucket("b", vec![with_keep])]))
        );
    }

    #[test]
    fn promoted_hash_flips_in_both_directions_and_matches_walk_membership() {
        let snap = compile(vec![bucket("bkt2", bkt2_rules())]);
        // TTLs: noncurrent 3 d, expiration 7 d, mpu 2 d.
        let windows = [0u32, 1, 2, 3, 6, 7, 8, 100];
        let hashes: Vec<[u8; 32]> = windows
            .iter()
            .map(|&d| promoted_hash(&snap, DAY * d))
            .collect();
        // Everything promoted at 0 and 1 day; nothing from 7 days on.
        assert_eq!(hashes[0], hashes[1]);
        assert_ne!(hashes[0], EMPTY_HASH);
        assert_eq!(hashes[5], EMPTY_HASH);
        assert_eq!(hashes[7], EMPTY_HASH);
        // Each TTL boundary flips the hash, going down and coming back up.
        assert_ne!(hashes[1], hashes[2]);
        assert_ne!(hashes[2], hashes[3]);
        assert_ne!(hashes[4], hashes[5]);
        assert_eq!(promoted_hash(&snap, DAY * 2), hashes[2]);
        for &d in &windows {
            let window = DAY * d;
            let (replay, walk) = snap.rules_for_shard(0, window);
            let via_walk = walk.map_or(EMPTY_HASH, |w| promoted_hash(&w, window));
            assert_eq!(promoted_hash(&snap, window), via_walk, "window {d} d");
            let via_replay = replay.map_or(EMPTY_HASH, |r| promoted_hash(&r, window));
            assert_eq!(via_replay, EMPTY_HASH, "window {d} d");
        }
    }

    #[test]
    fn max_effective_ttl_takes_active_replay_actions_only() {
        let mut long_marker = rule("marker", "");
        long_marker.expired_object_delete_marker = true;
        let mut off = days_rule("off", "", 400);
        off.enabled = false;
        let mut rules = bkt2_rules();
        rules.extend([long_marker, off]);
        let mut snap = compile(vec![bucket("b", rules), bucket("c", vec![])]);
        assert_eq!(max_effective_ttl(&snap), DAY * 7);
        let (replay, walk) = snap.rules_for_shard(0, DAY * 5);
        assert_eq!(max_effective_ttl(&replay.unwrap()), DAY * 3);
        assert_eq!(max_effective_ttl(&walk.unwrap()), DAY * 7);
        for a in snap.actions_mut() {
            if a.kind() == ActionKind::ExpirationDays {
                a.set_active(false);
            }
        }
        assert_eq!(max_effective_ttl(&snap), DAY * 3);
        let by_bucket = max_effective_ttl_by_bucket(&snap);
        assert_eq!(by_bucket.get("b"), Some(&(DAY * 3)));
        assert_eq!(by_bucket.get("c"), Some(&Duration::ZERO));
    }

    #[test]
    fn per_bucket_hashes_isolate_edits_to_their_bucket() {
        let a = bucket("a", vec![days_rule("r", "logs/", 30)]);
        let b = bucket("b", bkt2_rules());
        let before = compile(vec![a.clone(), b.clone()]);
        let mut a2 = a.clone();
        a2.rules[0].expiration_days = 31;
        let after = compile(vec![a2, b.clone()]);
        let (h1, h2) = (
            replay_content_hash_by_bucket(&before),
            replay_content_hash_by_bucket(&after),
        );
        assert_ne!(h1["a"], h2["a"]);
        assert_eq!(h1["b"], h2["b"]);
        assert_ne!(replay_content_hash(&before), replay_content_hash(&after));
        // A window flipping only bucket a's 30/31-day rule leaves b alone.
        let (p1, p2) = (
            promoted_hash_by_bucket(&after, DAY * 30),
            promoted_hash_by_bucket(&after, DAY * 31),
        );
        assert_ne!(p1["a"], p2["a"]);
        assert_eq!(p1["b"], p2["b"]);
        // One bucket's hash alone equals the global hash of a snapshot
        // holding only that bucket.
        let only_b = compile(vec![b]);
        assert_eq!(h1["b"], replay_content_hash(&only_b));
        assert_eq!(
            promoted_hash_by_bucket(&before, DAY)["b"],
            promoted_hash(&only_b, DAY)
        );
    }

    #[test]
    fn identical_rules_in_two_buckets_hash_per_bucket() {
        let r = days_rule("r", "logs/", 30);
        let one = compile(vec![bucket("b1", vec![r.clone()])]);
        let two = compile(vec![bucket("b1", vec![r.clone()]), bucket("b2", vec![r])]);
        assert_ne!(replay_content_hash(&one), replay_content_hash(&two));
        let by = replay_content_hash_by_bucket(&two);
        assert_ne!(by["b1"], by["b2"]);
        assert_eq!(by["b1"], replay_content_hash(&one));
    }

    #[test]
    fn buckets_without_replay_actions_report_empty_hash() {
        let mut date = rule("date", "");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let snap = compile(vec![bucket("w", vec![date]), bucket("none", vec![])]);
        let by = replay_content_hash_by_bucket(&snap);
        assert_eq!(by.len(), 2);
        assert!(by.values().all(|h| *h == EMPTY_HASH));
        assert!(
            promoted_hash_by_bucket(&snap, DAY)
                .values()
                .all(|h| *h == EMPTY_HASH)
        );
    }

    // ---- property: hashes do not depend on rule or bucket order ----

    fn all_hashes(snap: &Snapshot) -> impl PartialEq + std::fmt::Debug {
        (
            replay_content_hash(snap),
            replay_content_hash_by_bucket(snap),
            [0u32, 1, 2, 3].map(|d| {
                (
                    promoted_hash(snap, DAY * d),
                    promoted_hash_by_bucket(snap, DAY * d),
                )
            }),
            max_effective_ttl(snap),
            max_effective_ttl_by_bucket(snap),
        )
    }

    proptest! {
        #[test]
        fn hashes_are_invariant_under_rule_and_bucket_permutation(
            (buckets, shuffled) in arb_buckets().prop_flat_map(|buckets| {
                let shuffled = buckets
                    .iter()
                    .map(|b| {
                        let b = b.clone();
                        Just(b.rules.clone()).prop_shuffle().prop_map(move |rules| {
                            BucketConfig { rules, ..b.clone() }
                        })
                    })
                    .collect::<Vec<_>>()
                    .prop_shuffle();
                (Just(buckets), shuffled)
            })
        ) {
            let a = compile(buckets);
            let b = compile(shuffled);
            prop_assert_eq!(all_hashes(&a), all_hashes(&b));
        }
    }
}
