//! Which buckets one shard recovers or walks this pass, and which of a walk's
//! matches a shard other than the walk owner acts on: decided once, before the
//! shard's run starts, from the pass plan and the shard's persisted cursor.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::cursor::{ShardCursor, WalkResume};
use crate::engine::{ActionKey, ActionKind, Match, RuleHash};
use crate::pass::plan::{self, PassPlan, Persisted, RecoveryReason};

/// The cursor key of an action's progress: `"<rulehash hex>/<kind>"`.
pub fn progress_key(key: &ActionKey) -> String {
    action_key(key.rule_hash, key.kind)
}

/// [`progress_key`] from its parts.
pub fn action_key(rule_hash: RuleHash, kind: ActionKind) -> String {
    format!("{}/{}", rule_hash.to_hex(), kind.as_str())
}

/// What one shard does with each bucket this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardPlan {
    /// Buckets this shard recovers, and why.
    pub recover: BTreeMap<String, RecoveryReason>,
    /// Buckets this shard walks in steady state (walk view, walk due).
    pub steady_walk: BTreeSet<String>,
    /// Recovering buckets whose walk resumes where an earlier pass stopped
    /// (docs/design-deviations.md#resumable-recovery-walks).
    pub resume: BTreeMap<String, WalkResume>,
}

/// Which view a walker item of a bucket is evaluated against on a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkRole {
    /// The shard recovers the bucket: every enabled action.
    Recovery,
    /// A steady-state walk: the walk view.
    Steady,
}

impl ShardPlan {
    /// The role of `bucket` in this shard's walk, `None` when not walked.
    pub fn walk_role(&self, bucket: &str) -> Option<WalkRole> {
        if self.recover.contains_key(bucket) {
            Some(WalkRole::Recovery)
        } else if self.steady_walk.contains(bucket) {
            Some(WalkRole::Steady)
        } else {
            None
        }
    }

    /// Where this shard's recovery walk of `bucket` resumes: items at or
    /// before this listing position were walked by earlier segments.
    pub fn resume_from(&self, bucket: &str) -> Option<&str> {
        self.resume.get(bucket).map(|r| r.after.as_str())
    }
}

/// Whether an unfinished walk's resume point still holds in this pass: the
/// bucket's hashes are those the earlier segments evaluated, and the meta-log
/// still reaches back to where the finished walk's replay will start (the
/// first segment's rewind point). Otherwise the walk starts over.
pub fn resume_usable(plan: &PassPlan, bucket: &str, r: &WalkResume) -> bool {
    let rsh = plan.rule_set_hash_of(bucket);
    let promoted = plan.promoted_hash_of(bucket);
    if r.rule_set_hash != rsh || r.promoted_hash != promoted || r.first_now > plan.now {
        return false;
    }
    let Some(earliest) = plan.earliest else {
        return true;
    };
    plan.replay_actions(bucket).iter().all(|(_, ttl)| {
        plan::rewind_point(r.first_now, *ttl, &plan.time, plan.skew_margin)
            .min(r.first_observed_until)
            >= earliest.saturating_sub(1)
    })
}

/// The shards, besides the walk owner `walk_owner`, that must evaluate an
/// item in this pass's walk (docs/design-deviations.md#walk-coverage). A
/// recovering shard's replay vouches for every due match of the events it
/// owns up to `observed_until`; that is only true for an item whose walk
/// owner recovers the bucket on this instance in this pass. Otherwise each
/// recovering shard among the item's `replay_owners` walks the item itself.
/// When the walk owner recovers too (every cold start of all shards), nobody
/// else walks the item, so no delete is sent twice.
pub fn coverage_walkers(
    walk_owner: u8,
    replay_owners: &BTreeSet<u8>,
    recovering: &BTreeSet<u8>,
) -> Vec<u8> {
    if recovering.contains(&walk_owner) {
        return Vec::new();
    }
    replay_owners
        .iter()
        .copied()
        .filter(|s| *s != walk_owner && recovering.contains(s))
        .collect()
}

/// The walk matches a coverage walker ([`coverage_walkers`]) acts on: only
/// those of the bucket's replay actions, the ones its replay would vouch for.
/// Walker-only kinds stay with their walk owner.
pub fn replay_matches(plan: &PassPlan, bucket: &str, matches: Vec<Match>) -> Vec<Match> {
    let actions: BTreeSet<(crate::engine::RuleHash, ActionKind)> = plan
        .replay_actions(bucket)
        .into_iter()
        .map(|(k, _)| (k.rule_hash, k.kind))
        .collect();
    matches
        .into_iter()
        .filter(|m| actions.contains(&(m.rule_hash, m.kind)))
        .collect()
}

/// Decides, for one shard, which buckets recover and which get a steady walk
/// (design steps 4 and 5, docs/design-deviations.md#the-design-in-short).
pub fn plan_shard(plan: &PassPlan, persisted: Option<&ShardCursor>) -> ShardPlan {
    let mut out = ShardPlan::default();
    for bucket in plan.buckets() {
        let pb = persisted.and_then(|c| c.buckets.get(bucket));
        let actions = plan.replay_actions(bucket);
        let reason = match pb {
            None => Some(RecoveryReason::ColdStart),
            // Deletes made here by a pass that saw a filer fail may be lost:
            // walk again, from the start (docs/meta-log.md#filer-crash).
            Some(b) if b.rewalk.is_some() => Some(RecoveryReason::FilerLost),
            // Only an unfinished cold-start walk's resume point.
            Some(b) if b.is_walk_placeholder() => Some(RecoveryReason::ColdStart),
            Some(b) => {
                let keys: Vec<String> = actions.iter().map(|(k, _)| progress_key(k)).collect();
                let oldest = keys
                    .iter()
                    .filter_map(|k| b.rules.get(k).map(|p| p.ts))
                    .min();
                let p = Persisted {
                    rule_set_hash: b.rule_set_hash,
                    promoted_hash: b.promoted_hash,
                    oldest_replay_ts: oldest,
                };
                let (rsh, promoted) =
                    (plan.rule_set_hash_of(bucket), plan.promoted_hash_of(bucket));
                let has_replay = plan.has_replay(bucket);
                // Progress missing for a current replay action: nothing says
                // which of its events were handled.
                let missing = keys.iter().any(|k| !b.rules.contains_key(k));
                plan::recovery_reason(Some(&p), &rsh, &promoted, has_replay, plan.earliest)
                    .or(missing.then_some(RecoveryReason::ColdStart))
            }
        };
        match reason {
            Some(r) => {
                out.recover.insert(bucket.to_string(), r);
                if let Some(resume) = pb.and_then(|b| b.walk_resume.as_ref())
                    && resume_usable(plan, bucket, resume)
                {
                    out.resume.insert(bucket.to_string(), resume.clone());
                }
            }
            None if plan.has_walk(bucket) => {
                let last = pb.map_or(0, |b| b.last_walked_ns);
                let interval = i64::try_from(plan.walker_interval.as_nanos()).unwrap_or(i64::MAX);
                if interval == 0 || plan.now.saturating_sub(last) >= interval {
                    out.steady_walk.insert(bucket.to_string());
                }
            }
            None => {}
        }
    }
    out
}
