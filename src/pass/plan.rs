//! What a pass decides before any shard runs: the [`PassPlan`] (one `now`,
//! the views and hashes), per-bucket recovery decisions
//! (docs/design-deviations.md#recovery-triggers) and the cursor rewind after a
//! recovery walk. Pure: `now` and every cluster fact are inputs.
//!
//! Unlike the Go worker, hashes and progress are kept per bucket (and progress
//! per action), so an edit in one bucket recovers that bucket only
//! (docs/design-deviations.md#per-bucket-hashes), and retention loss is
//! detected from the filer's persisted log instead of being declared by the
//! operator (docs/design-deviations.md#retention-from-the-filer).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::engine::cursor::{FilerRegistrations, GoSeen, Hash32};
use crate::engine::{ActionKey, ActionKind, DueRounding, Nanos, RuleHash, Snapshot, TimeConfig};

/// Why a bucket needs a recovery walk on this shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryReason {
    /// No persisted progress for this bucket on this shard.
    ColdStart,
    /// The bucket's replay-relevant rules changed (rule-set hash mismatch).
    RuleEdit,
    /// A replay rule moved between the replay and walk partitions.
    PartitionFlip,
    /// The meta-log no longer reaches back to this bucket's replay progress.
    RetentionLoss,
    /// A pass that deleted in this bucket saw a filer with a store of its
    /// own fail: deletes that filer acknowledged may be lost
    /// (docs/meta-log.md#filer-crash), so the bucket is walked again.
    FilerLost,
}

impl RecoveryReason {
    /// Short label for logs, metrics and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryReason::ColdStart => "cold_start",
            RecoveryReason::RuleEdit => "rule_edit",
            RecoveryReason::PartitionFlip => "partition_flip",
            RecoveryReason::RetentionLoss => "retention_loss",
            RecoveryReason::FilerLost => "filer_lost",
        }
    }
}

impl std::fmt::Display for RecoveryReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was persisted for one bucket on one shard, as far as the decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Persisted {
    /// The bucket's replay content hash when progress was saved.
    pub rule_set_hash: [u8; 32],
    /// The bucket's promoted hash when progress was saved.
    pub promoted_hash: [u8; 32],
    /// The oldest replay progress (`ActionProgress::ts`) over the bucket's
    /// replay actions; `None` when the bucket had no replay actions.
    pub oldest_replay_ts: Option<Nanos>,
}

/// Decides whether a bucket needs a recovery walk on a shard, in the design's
/// order of triggers (docs/design-deviations.md#recovery-triggers). `has_replay` says whether the bucket has replay actions in
/// this pass; `earliest_available` is the meta-log horizon from the probe
/// (`None`: nothing persisted yet, so nothing was lost).
pub fn recovery_reason(
    persisted: Option<&Persisted>,
    rule_set_hash: &[u8; 32],
    promoted_hash: &[u8; 32],
    has_replay: bool,
    earliest_available: Option<Nanos>,
) -> Option<RecoveryReason> {
    let Some(p) = persisted else {
        return Some(RecoveryReason::ColdStart);
    };
    if &p.rule_set_hash != rule_set_hash {
        return Some(RecoveryReason::RuleEdit);
    }
    if &p.promoted_hash != promoted_hash {
        return Some(RecoveryReason::PartitionFlip);
    }
    // Gated on replay: a pure walker bucket persists no replay progress.
    if has_replay
        && let (Some(ts), Some(earliest)) = (p.oldest_replay_ts, earliest_available)
        // Events after `ts` are needed; the log holds everything from `earliest`.
        && ts < earliest.saturating_sub(1)
    {
        return Some(RecoveryReason::RetentionLoss);
    }
    None
}

/// Where an action's replay resumes after a successful recovery walk at `now`:
/// `now − ttl`, less a day with next-day rounding and the clock-skew margin
/// (why: docs/design-deviations.md#rewind-point).
pub fn rewind_point(now: Nanos, ttl: Duration, time: &TimeConfig, skew_margin: Duration) -> Nanos {
    let mut back = ttl.saturating_add(skew_margin);
    if time.rounding == DueRounding::NextDay {
        back = back.saturating_add(time.day);
    }
    let back = i64::try_from(back.as_nanos()).unwrap_or(Nanos::MAX);
    now.saturating_sub(back).max(0)
}

/// The retention window the engine partitions with: how far back the meta-log
/// reaches from `now`. An operator-set retention wins; with neither, the log is
/// treated as unbounded (stock filers never delete it).
pub fn retention_window(
    now: Nanos,
    earliest_available: Option<Nanos>,
    configured: Duration,
) -> Duration {
    if !configured.is_zero() {
        return configured;
    }
    match earliest_available {
        // Zero when the horizon is ahead of `now` (clock skew); saturates
        // instead of overflowing on absurd inputs.
        Some(e) => Duration::from_nanos(u64::try_from(now.saturating_sub(e)).unwrap_or(0)),
        None => Duration::MAX,
    }
}

/// How far a bucket's replay progress can trail `now − ttl` when a pass
/// starts, in steady state: a lifecycle day, one more with `next_day`
/// rounding, the clock-skew and reorder margins (why each:
/// docs/retention-probe.md#replay-lag).
pub fn replay_lag(time: &TimeConfig, skew_margin: Duration) -> Duration {
    let mut lag = time
        .day
        .saturating_add(skew_margin)
        .saturating_add(Duration::from_nanos(
            u64::try_from(crate::engine::progress::REORDER_MARGIN).unwrap_or(0),
        ));
    if time.rounding == DueRounding::NextDay {
        lag = lag.saturating_add(time.day);
    }
    lag
}

/// The window the replay/walk partition compares TTLs with: a probed
/// `window` as it is; with a configured retention, less [`replay_lag`], so a
/// rule with `ttl + lag > configured` is walked instead of finding its
/// pending events trimmed at every pass (docs/retention-probe.md#replay-lag).
pub fn partition_window(
    window: Duration,
    configured: Duration,
    time: &TimeConfig,
    skew_margin: Duration,
) -> Duration {
    if configured.is_zero() {
        window
    } else {
        window.saturating_sub(replay_lag(time, skew_margin))
    }
}

/// The enabled actions of each bucket with any, as `(rule hash, kind)`: what
/// a match's rule must still be for its delete to go out.
pub type LiveActions = BTreeMap<String, BTreeSet<(RuleHash, ActionKind)>>;

/// The enabled actions of every bucket of `snap` (Disabled rules are in no
/// view and never fire, so they are not live).
pub fn live_actions(snap: &Snapshot) -> LiveActions {
    snap.recovery_view()
        .buckets()
        .iter()
        .map(|b| {
            let set = b
                .actions()
                .iter()
                .map(|a| (a.key().rule_hash, a.kind()))
                .collect();
            (b.name().to_string(), set)
        })
        .collect()
}

/// Buckets whose lifecycle configuration changed since the pass's snapshot,
/// with their enabled actions now (empty: configuration deleted, or no longer
/// usable). Built by re-reading the configurations during a pass; a delete is
/// sent only while [`RuleChanges::still_due`] says so
/// (docs/lifecycle-config.md#changes-during-a-pass).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleChanges(BTreeMap<String, BTreeSet<(RuleHash, ActionKind)>>);

impl RuleChanges {
    /// Compares the pass's actions (`planned`) with a fresh reading
    /// (`current`). `unusable` are buckets whose configuration can no longer
    /// be parsed: nothing in them is due any more, as if it was deleted.
    pub fn between(
        planned: &LiveActions,
        current: &LiveActions,
        unusable: &BTreeSet<String>,
    ) -> RuleChanges {
        let mut out = BTreeMap::new();
        for (bucket, was) in planned {
            let now = if unusable.contains(bucket) {
                BTreeSet::new()
            } else {
                current.get(bucket).cloned().unwrap_or_default()
            };
            if &now != was {
                out.insert(bucket.clone(), now);
            }
        }
        RuleChanges(out)
    }

    /// Whether a match of `(rule_hash, kind)` in `bucket`, due under the
    /// pass's snapshot, may still be deleted. A bucket whose configuration did
    /// not change: yes. Otherwise only when the very same rule is still
    /// enabled: the rule hash covers the whole rule (filter, TTL, date), so
    /// the same hash means the same due time. A match whose rule changed is
    /// not due in this pass, even when the new rule would make it due (a
    /// lowered TTL): the rule edit recovers the bucket at the next pass,
    /// which deletes it then. Never early, at worst one pass late.
    pub fn still_due(&self, bucket: &str, rule_hash: RuleHash, kind: ActionKind) -> bool {
        self.0
            .get(bucket)
            .is_none_or(|live| live.contains(&(rule_hash, kind)))
    }

    pub fn buckets(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// The key prefixes a walk of `bucket` must list: the union of the prefixes
/// of its actions in the views the walk evaluates against (`recovery`: every
/// enabled action; otherwise the walk view's). `None` lists the whole bucket:
/// some action has no prefix, or the bucket has no action at all there.
/// Prefixes inside another one are dropped.
pub fn walk_prefixes(plan: &PassPlan, bucket: &str, recovery: bool) -> Option<Vec<String>> {
    let view = if recovery {
        Some(&plan.recovery)
    } else {
        plan.walk.as_ref()
    };
    let actions = view?.bucket(bucket)?.actions();
    let prefixes: Option<Vec<String>> = actions
        .iter()
        .map(|a| Some(a.rule().prefix.clone()).filter(|p| !p.is_empty()))
        .collect();
    Some(minimal_prefixes(prefixes.filter(|p| !p.is_empty())?))
}

/// Sorted prefixes with every one that extends another removed (`logs/` covers
/// `logs/a`).
pub fn minimal_prefixes(mut prefixes: Vec<String>) -> Vec<String> {
    prefixes.sort();
    prefixes.dedup();
    let mut out: Vec<String> = Vec::new();
    for p in prefixes {
        // Sorted: a covering prefix sorts right before what it covers.
        if out.last().is_some_and(|last| p.starts_with(last.as_str())) {
            continue;
        }
        out.push(p);
    }
    out
}

/// Everything one pass decided before any shard ran; shared by all shards.
#[derive(Debug)]
pub struct PassPlan {
    /// The pass's single `now`.
    pub now: Nanos,
    /// The newest meta-log time a recovery walk vouches for: `now`, never past
    /// the real clock at pass start, no reorder margin (why:
    /// docs/design-deviations.md#observed-until). Listings start after the
    /// plan is built, so an entry whose event the filer stamped before this
    /// time existed when it was listed (assuming the filer's clock is not
    /// behind ours by more than that gap; NTP keeps it far smaller).
    pub observed_until: Nanos,
    /// The newest meta-log time the replay reads: the log's clock when the
    /// pass started (the filer's), never past `now`; `now` when the port has
    /// no clock (fakes). The log is read as it stood then: what the pass
    /// itself writes is the next pass's (docs/due-index.md#pass-start).
    pub read_until: Nanos,
    /// The filer's clock at the pass start when it vouches for its log
    /// ([`crate::pass::ports::FilerClock::vouches`]): a read that runs to its
    /// end has processed the log up to it (docs/due-index.md#filer-clock).
    pub filer_clock: Option<Nanos>,
    /// Day length and due rounding.
    pub time: TimeConfig,
    /// `pass.clock_skew_margin`.
    pub skew_margin: Duration,
    /// `pass.reorder_margin`: how far behind the newest processed event
    /// replay progress stays (docs/meta-log.md#several-filers).
    pub reorder_margin: Duration,
    /// `pass.walker_interval` (0 = walk every pass).
    pub walker_interval: Duration,
    /// `pass.tail_budget`: resolved marks the whole pass may hold; each
    /// shard gets an equal share (docs/due-index.md#memory).
    pub tail_budget: usize,
    /// The meta-log horizon (probe), `None` when nothing is persisted.
    pub earliest: Option<Nanos>,
    /// Replay view (actions served from the meta-log).
    pub replay: Option<Snapshot>,
    /// Walk view (actions served by listing).
    pub walk: Option<Snapshot>,
    /// Recovery view: every enabled action.
    pub recovery: Snapshot,
    pub rule_set_hash: BTreeMap<String, Hash32>,
    pub promoted_hash: BTreeMap<String, Hash32>,
    /// Go-compatible global hashes for the cursor's top-level fields.
    pub global_rule_set_hash: Hash32,
    /// See [`PassPlan::global_rule_set_hash`].
    pub global_promoted_hash: Hash32,
    /// Buckets that exist but are not part of this pass (config failed to
    /// parse, or not selected by `pass.buckets`): their cursor state is kept.
    pub keep: BTreeSet<String>,
    /// The enabled actions of each bucket in this pass, to compare re-read
    /// configurations with.
    pub live: LiveActions,
    /// When the master registered each filer, read at the pass start;
    /// `None` when it could not be asked (docs/meta-log.md#filer-restart).
    pub filers: Option<FilerRegistrations>,
    /// Each shard's Go cursor file as read at the pass start, recorded by
    /// a shard without a cursor yet; `None` when it could not be read
    /// (docs/go-cursor.md#another-enforcer).
    pub go_cursors: Option<BTreeMap<u8, GoSeen>>,
}

fn hash_of(hashes: &BTreeMap<String, Hash32>, bucket: &str) -> Hash32 {
    *hashes.get(bucket).unwrap_or(&crate::engine::EMPTY_HASH)
}

impl PassPlan {
    /// The plan for `snap` at `now`: views, per-bucket and global hashes.
    /// `earliest` is the meta-log horizon from the probe; a non-zero
    /// `pass.meta_log_retention` replaces it with `now − retention`. `wall` is
    /// the real clock at pass start (see [`PassPlan::observed_until`]).
    pub fn build(
        snap: &Snapshot,
        now: Nanos,
        wall: Nanos,
        earliest: Option<Nanos>,
        pass: &crate::config::PassSettings,
        keep: BTreeSet<String>,
    ) -> PassPlan {
        use crate::engine::{
            promoted_hash, promoted_hash_by_bucket, replay_content_hash,
            replay_content_hash_by_bucket,
        };
        let window = partition_window(
            retention_window(now, earliest, pass.meta_log_retention),
            pass.meta_log_retention,
            &snap.time(),
            // replay_lag counts the default reorder margin; a larger
            // configured one trails by the difference more.
            pass.clock_skew_margin
                .saturating_add(pass.reorder_margin.saturating_sub(Duration::from_nanos(
                    u64::try_from(crate::engine::progress::REORDER_MARGIN).unwrap_or(0),
                ))),
        );
        let (replay, walk) = snap.rules_for_shard(0, window);
        let earliest = if pass.meta_log_retention.is_zero() {
            earliest
        } else {
            // A configured retention: the horizon is now − retention.
            let back = i64::try_from(pass.meta_log_retention.as_nanos()).unwrap_or(i64::MAX);
            Some(now.saturating_sub(back))
        };
        PassPlan {
            now,
            observed_until: now.min(wall),
            read_until: now,
            filer_clock: None,
            time: snap.time(),
            skew_margin: pass.clock_skew_margin,
            reorder_margin: pass.reorder_margin,
            walker_interval: pass.walker_interval,
            tail_budget: pass.tail_budget,
            earliest,
            rule_set_hash: replay_content_hash_by_bucket(snap),
            promoted_hash: promoted_hash_by_bucket(snap, window),
            global_rule_set_hash: replay_content_hash(snap),
            global_promoted_hash: promoted_hash(snap, window),
            replay,
            walk,
            recovery: snap.recovery_view(),
            keep,
            live: live_actions(snap),
            filers: None,
            go_cursors: None,
        }
    }

    /// Buckets with at least one enabled action (the recovery view's buckets).
    pub fn buckets(&self) -> impl Iterator<Item = &str> {
        self.recovery.buckets().iter().map(|b| &**b.name())
    }

    /// `bucket`'s replay content hash ([`EMPTY_HASH`](crate::engine::EMPTY_HASH)
    /// when the plan has none for it).
    pub fn rule_set_hash_of(&self, bucket: &str) -> Hash32 {
        hash_of(&self.rule_set_hash, bucket)
    }

    /// `bucket`'s promoted hash ([`EMPTY_HASH`](crate::engine::EMPTY_HASH)
    /// when the plan has none for it).
    pub fn promoted_hash_of(&self, bucket: &str) -> Hash32 {
        hash_of(&self.promoted_hash, bucket)
    }

    pub fn has_replay(&self, bucket: &str) -> bool {
        self.replay.iter().any(|r| r.bucket(bucket).is_some())
    }

    pub fn has_walk(&self, bucket: &str) -> bool {
        self.walk.iter().any(|w| w.bucket(bucket).is_some())
    }

    /// The bucket's replay actions, `(key, ttl)`.
    pub fn replay_actions(&self, bucket: &str) -> Vec<(ActionKey, Duration)> {
        self.replay
            .as_ref()
            .and_then(|r| r.bucket(bucket))
            .map(|b| b.actions().iter().map(|a| (a.key(), a.ttl())).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_prefixes_drop_covered_ones() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            minimal_prefixes(v(&["logs/a", "logs/", "tmp/", "logs/b/c", "tmp/"])),
            v(&["logs/", "tmp/"])
        );
        assert_eq!(minimal_prefixes(v(&["a", "ab", "b"])), v(&["a", "b"]));
    }

    const H1: [u8; 32] = [1; 32];
    const H2: [u8; 32] = [2; 32];
    const Z: [u8; 32] = [0; 32];

    fn p(rsh: [u8; 32], promoted: [u8; 32], ts: Option<Nanos>) -> Persisted {
        Persisted {
            rule_set_hash: rsh,
            promoted_hash: promoted,
            oldest_replay_ts: ts,
        }
    }

    #[test]
    fn triggers_in_design_order() {
        assert_eq!(
            recovery_reason(None, &H1, &Z, true, None),
            Some(RecoveryReason::ColdStart)
        );
        assert_eq!(
            recovery_reason(Some(&p(H2, Z, Some(5))), &H1, &Z, true, None),
            Some(RecoveryReason::RuleEdit)
        );
        assert_eq!(
            recovery_reason(Some(&p(H1, H2, Some(5))), &H1, &Z, true, None),
            Some(RecoveryReason::PartitionFlip)
        );
        assert_eq!(
            recovery_reason(Some(&p(H1, Z, Some(5))), &H1, &Z, true, Some(100)),
            Some(RecoveryReason::RetentionLoss)
        );
        assert_eq!(
            recovery_reason(Some(&p(H1, Z, Some(99))), &H1, &Z, true, Some(100)),
            None
        );
        assert_eq!(
            recovery_reason(Some(&p(H1, Z, Some(500))), &H1, &Z, true, Some(100)),
            None
        );
    }

    #[test]
    fn pure_walker_bucket_never_recovers_for_retention_loss() {
        // Regression: the design gates retention loss on replay != nil so the
        // sentinel progress of walker-only buckets does not re-fire every run
        // (docs/design-deviations.md#recovery-triggers).
        for _ in 0..5 {
            assert_eq!(
                recovery_reason(Some(&p(Z, Z, None)), &Z, &Z, false, Some(100)),
                None
            );
            assert_eq!(
                recovery_reason(Some(&p(Z, Z, Some(0))), &Z, &Z, false, Some(100)),
                None
            );
        }
    }

    #[test]
    fn rewind_covers_rounding_and_skew() {
        let day = 86_400_000_000_000i64;
        let t = TimeConfig::default();
        let now = 100 * day;
        let r = rewind_point(
            now,
            Duration::from_secs(30 * 86_400),
            &t,
            Duration::from_secs(600),
        );
        assert_eq!(r, now - 30 * day - day - 600_000_000_000);
        let exact = TimeConfig {
            rounding: DueRounding::None,
            ..t
        };
        assert_eq!(
            rewind_point(now, Duration::from_secs(86_400), &exact, Duration::ZERO),
            now - day
        );
        assert_eq!(
            rewind_point(5, Duration::from_secs(86_400), &exact, Duration::ZERO),
            0
        );
    }

    const DAY: Duration = Duration::from_secs(86_400);

    fn ns(d: Duration) -> Nanos {
        i64::try_from(d.as_nanos()).unwrap()
    }

    #[test]
    fn replay_lag_adds_cadence_rounding_skew_and_reorder() {
        let skew = Duration::from_secs(600);
        let reorder = Duration::from_secs(5);
        let t = TimeConfig::default();
        assert_eq!(replay_lag(&t, skew), DAY + DAY + skew + reorder);
        let exact = TimeConfig {
            rounding: DueRounding::None,
            ..t
        };
        assert_eq!(replay_lag(&exact, skew), DAY + skew + reorder);
    }

    #[test]
    fn probed_window_is_not_narrowed() {
        let t = TimeConfig::default();
        let w = Duration::from_secs(40 * 86_400);
        assert_eq!(
            partition_window(w, Duration::ZERO, &t, Duration::from_secs(600)),
            w
        );
        assert_eq!(
            partition_window(Duration::MAX, Duration::ZERO, &t, Duration::ZERO),
            Duration::MAX
        );
    }

    /// The retention trap (docs/retention-probe.md#replay-lag):
    /// `meta_log_retention` equal to a rule's TTL. Replaying that rule would
    /// find its pending events trimmed at every pass, so the partition sends it
    /// to the walker; a retention that covers TTL + lag keeps it on replay and a
    /// daily steady pass after a recovery never reports retention loss.
    #[test]
    fn retention_equal_to_ttl_walks_instead_of_recovering_every_pass() {
        let skew = Duration::from_secs(600);
        for rounding in [DueRounding::NextDay, DueRounding::None] {
            let t = TimeConfig { day: DAY, rounding };
            let ttl = 30 * DAY;
            // Retention = TTL: the rule does not fit the partition window.
            assert!(partition_window(ttl, ttl, &t, skew) < ttl);
            // Retention = TTL + lag: it fits exactly.
            let enough = ttl + replay_lag(&t, skew);
            assert_eq!(partition_window(enough, enough, &t, skew), ttl);

            // With that retention, a recovery at now0 rewinds to a point the
            // next daily pass still holds: no retention loss.
            let now0 = 1_000 * ns(DAY);
            let rewound = rewind_point(now0, ttl, &t, skew);
            let now1 = now0 + ns(DAY);
            let earliest1 = now1 - ns(enough);
            assert!(rewound >= earliest1, "{rounding:?}");
            assert_eq!(
                recovery_reason(
                    Some(&p(H1, Z, Some(rewound))),
                    &H1,
                    &Z,
                    true,
                    Some(earliest1)
                ),
                None
            );
            // Steady state: the oldest match still pending at now1 was written
            // after now1 − ttl − (rounding day), and progress sits up to the
            // reorder margin before it; the pass after still holds it.
            let rounding_day = if rounding == DueRounding::NextDay {
                ns(DAY)
            } else {
                0
            };
            let pending = now1 - ns(ttl) - rounding_day - crate::engine::progress::REORDER_MARGIN;
            let now2 = now1 + ns(DAY);
            assert!(pending >= now2 - ns(enough), "{rounding:?}");
            // ... while with retention = TTL the same progress is lost: this
            // is why such a rule must be walked, not replayed.
            assert_eq!(
                recovery_reason(
                    Some(&p(H1, Z, Some(pending))),
                    &H1,
                    &Z,
                    true,
                    Some(now2 - ns(ttl))
                ),
                Some(RecoveryReason::RetentionLoss)
            );
        }
    }

    fn snap(days: Option<i64>, enabled: bool) -> Snapshot {
        use crate::engine::{BucketConfig, Versioning};
        use crate::lifecycle::FlatRule;
        let mut configs = vec![BucketConfig {
            name: "other".into(),
            versioning: Versioning::Unversioned,
            object_lock: false,
            rules: vec![FlatRule {
                id: "o".into(),
                enabled: true,
                expiration_days: 7,
                ..FlatRule::default()
            }],
        }];
        if let Some(d) = days {
            configs.push(BucketConfig {
                name: "b".into(),
                versioning: Versioning::Unversioned,
                object_lock: false,
                rules: vec![FlatRule {
                    id: "x".into(),
                    enabled,
                    expiration_days: d,
                    ..FlatRule::default()
                }],
            });
        }
        Snapshot::compile(configs, TimeConfig::default())
    }

    /// Which deletes a configuration change mid-pass withdraws
    /// (docs/lifecycle-config.md#changes-during-a-pass).
    #[test]
    fn rule_changes_withdraw_only_rules_that_left_their_bucket() {
        let planned = live_actions(&snap(Some(1), true));
        let (hash, kind) = *planned["b"].iter().next().unwrap();
        let (other_hash, other_kind) = *planned["other"].iter().next().unwrap();
        let none = BTreeSet::new();

        // Unchanged: nothing withdrawn.
        let same = RuleChanges::between(&planned, &live_actions(&snap(Some(1), true)), &none);
        assert_eq!(same, RuleChanges::default());
        assert!(same.still_due("b", hash, kind));

        // Configuration deleted: nothing in the bucket is due; other buckets untouched.
        let deleted = RuleChanges::between(&planned, &live_actions(&snap(None, true)), &none);
        assert_eq!(deleted.buckets().collect::<Vec<_>>(), ["b"]);
        assert!(!deleted.still_due("b", hash, kind));
        assert!(deleted.still_due("other", other_hash, other_kind));

        // TTL raised: a new rule hash, the old rule's matches are not due.
        let raised = RuleChanges::between(&planned, &live_actions(&snap(Some(30), true)), &none);
        assert!(!raised.still_due("b", hash, kind));

        // Rule disabled: not live.
        let disabled = RuleChanges::between(&planned, &live_actions(&snap(Some(1), false)), &none);
        assert!(!disabled.still_due("b", hash, kind));

        // A configuration that no longer parses: nothing due.
        let broken = RuleChanges::between(
            &planned,
            &live_actions(&snap(Some(1), true)),
            &["b".to_string()].into_iter().collect(),
        );
        assert!(!broken.still_due("b", hash, kind));

        // Buckets not in the pass are not this pass's business.
        assert!(deleted.still_due("new-bucket", hash, kind));
    }

    #[test]
    fn retention_window_sources() {
        assert_eq!(
            retention_window(100, Some(40), Duration::ZERO),
            Duration::from_nanos(60)
        );
        assert_eq!(retention_window(100, None, Duration::ZERO), Duration::MAX);
        assert_eq!(
            retention_window(100, Some(40), Duration::from_secs(7)),
            Duration::from_secs(7)
        );
        assert_eq!(
            retention_window(100, Some(400), Duration::ZERO),
            Duration::ZERO
        );
    }
}
