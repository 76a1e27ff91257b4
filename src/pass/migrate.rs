//! Moving over from the Go worker: turning its per-shard cursor into ours when
//! it provably covers the current rules, so the first pass resumes from Go's
//! position instead of recovery-walking every bucket. Pure: the caller loads
//! both sides and saves the result. What makes an import safe, and why each
//! refusal exists (same rules, no promotions, unversioned buckets only):
//! docs/go-cursor.md#import.

use std::collections::BTreeMap;

use crate::engine::EMPTY_HASH;
use crate::engine::cursor::{ActionMap, ActionProgress};
use crate::engine::cursor::{BucketCursor, CURSOR_VERSION, GoCursor, ShardCursor};
use crate::pass::plan::PassPlan;
use crate::pass::shard_plan::progress_key;

/// The outcome of importing one shard's Go cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// Our cursor for the shard (only the buckets that could be imported).
    pub cursor: ShardCursor,
    /// Buckets left out, which the first pass will cold-start.
    pub cold: Vec<String>,
}

/// Converts `go` for the rules in `plan`, or says why it cannot be used.
pub fn import_go(go: &GoCursor, plan: &PassPlan) -> Result<Imported, String> {
    if go.rule_set_hash != plan.global_rule_set_hash {
        return Err(format!(
            "shard {}: the Go cursor was written for other replay rules (rule_set_hash differs; \
             Disabled rules or a different day length also cause this); the first pass will \
             cold-start instead",
            go.shard_id
        ));
    }
    if go.promoted_hash != EMPTY_HASH || plan.global_promoted_hash != EMPTY_HASH {
        return Err(format!(
            "shard {}: retention-promoted rules on either side; the first pass will cold-start \
             instead",
            go.shard_id
        ));
    }
    let mut buckets = BTreeMap::new();
    let mut cold = Vec::new();
    for name in plan.buckets() {
        let view = plan.recovery.bucket(name);
        if view.is_none_or(|b| b.versioned()) {
            cold.push(name.to_string());
            continue;
        }
        let rules: ActionMap = plan
            .replay
            .as_ref()
            .and_then(|r| r.bucket(name))
            .map(|b| {
                b.actions()
                    .iter()
                    .map(|a| (progress_key(&a.key()), ActionProgress::at(go.ts_ns)))
                    .collect()
            })
            .unwrap_or_default();
        if !rules.is_empty() && go.ts_ns <= 0 {
            // Go's empty-replay sentinel says nothing about replay progress.
            cold.push(name.to_string());
            continue;
        }
        buckets.insert(
            name.to_string(),
            BucketCursor {
                ts_ns: if rules.is_empty() { 0 } else { go.ts_ns },
                rule_set_hash: plan.rule_set_hash_of(name),
                promoted_hash: plan.promoted_hash_of(name),
                last_walked_ns: go.last_walked_ns,
                halted: None,
                // Our own first pass stamps it; until then the bucket reads as
                // not yet enforced by s3-lifecycled.
                completed_ns: 0,
                rules,
                walk_resume: None,
                backlog: Default::default(),
                rewalk: None,
            },
        );
    }
    let ts_ns = buckets
        .values()
        .filter(|b| !b.rules.is_empty())
        .map(|b| b.ts_ns)
        .min()
        .unwrap_or(0);
    let cursor = ShardCursor {
        version: CURSOR_VERSION,
        shard_id: go.shard_id,
        updated_ns: 0,
        ts_ns,
        rule_set_hash: plan.global_rule_set_hash,
        promoted_hash: plan.global_promoted_hash,
        last_walked_ns: go.last_walked_ns,
        buckets,
        filers: plan.filers.clone().unwrap_or_default(),
        // The caller records the Go file it imported.
        go_cursor: None,
    };
    Ok(Imported { cursor, cold })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::config::PassSettings;
    use crate::engine::{BucketConfig, Snapshot, TimeConfig, Versioning};
    use crate::lifecycle::FlatRule;

    fn rule(prefix: &str, days: i64) -> FlatRule {
        FlatRule {
            id: prefix.into(),
            position: 1,
            enabled: true,
            prefix: prefix.into(),
            expiration_days: days,
            ..Default::default()
        }
    }

    fn plan(buckets: Vec<BucketConfig>) -> PassPlan {
        let snap = Snapshot::compile(buckets, TimeConfig::default());
        PassPlan::build(
            &snap,
            1_000,
            1_000,
            None,
            &PassSettings::default(),
            BTreeSet::new(),
        )
    }

    fn bucket(name: &str, versioning: Versioning, rules: Vec<FlatRule>) -> BucketConfig {
        BucketConfig {
            name: name.into(),
            versioning,
            object_lock: false,
            rules,
        }
    }

    fn go(p: &PassPlan, ts: i64) -> GoCursor {
        GoCursor {
            version: 1,
            shard_id: 3,
            ts_ns: ts,
            rule_set_hash: p.global_rule_set_hash,
            promoted_hash: EMPTY_HASH,
            last_walked_ns: 7,
        }
    }

    #[test]
    fn unversioned_buckets_resume_at_go_position_versioned_start_cold() {
        let p = plan(vec![
            bucket("logs", Versioning::Unversioned, vec![rule("l/", 30)]),
            bucket("vers", Versioning::Enabled, vec![rule("v/", 30)]),
        ]);
        let got = import_go(&go(&p, 500), &p).unwrap();
        assert_eq!(got.cold, vec!["vers".to_string()]);
        let b = &got.cursor.buckets["logs"];
        assert_eq!(b.ts_ns, 500);
        assert_eq!(b.rule_set_hash, p.rule_set_hash["logs"]);
        assert_eq!(b.rules.len(), 1);
        assert!(b.rules.values().all(|a| *a == ActionProgress::at(500)));
        assert_eq!(got.cursor.ts_ns, 500);
        assert_eq!(got.cursor.shard_id, 3);
        assert!(!got.cursor.buckets.contains_key("vers"));
    }

    #[test]
    fn other_rules_or_promotions_are_refused() {
        let p = plan(vec![bucket(
            "logs",
            Versioning::Unversioned,
            vec![rule("l/", 30)],
        )]);
        let mut g = go(&p, 500);
        g.rule_set_hash = [9; 32];
        assert!(import_go(&g, &p).unwrap_err().contains("rule_set_hash"));
        let mut g = go(&p, 500);
        g.promoted_hash = [1; 32];
        assert!(import_go(&g, &p).unwrap_err().contains("promoted"));
    }

    #[test]
    fn go_empty_replay_sentinel_is_not_replay_progress() {
        let p = plan(vec![bucket(
            "logs",
            Versioning::Unversioned,
            vec![rule("l/", 30)],
        )]);
        let got = import_go(&go(&p, 0), &p).unwrap();
        assert_eq!(got.cold, vec!["logs".to_string()]);
        assert!(got.cursor.buckets.is_empty());
    }
}
