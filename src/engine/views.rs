//! Replay, walk and recovery views of a [`Snapshot`]
//! (docs/design-deviations.md#views-and-partition). A view is an independent
//! snapshot of cloned actions whose `active` and `mode` are set for its
//! consumer; rules are shared with the base through `Arc`.

use std::time::Duration;

use crate::engine::{ActionKind, BucketView, CompiledAction, RuleMode, Snapshot};

/// A replay kind whose TTL is known (non-zero) and fits the retention window:
/// its triggering events are still in the meta-log, so replay can serve it.
/// A zero window (no retention information) sends every replay kind to walk.
/// Shared with `engine::hashes::promoted_hash` so walk membership and the
/// promoted hash can never disagree.
///
/// A NoncurrentDays action whose rule also sets NewerNoncurrentVersions is
/// never replay-eligible: whether it fires depends on how many newer
/// noncurrent versions exist *now*, which one event cannot tell
/// (docs/design-deviations.md#newer-noncurrent-walks).
pub(crate) fn replay_eligible(action: &CompiledAction, retention_window: Duration) -> bool {
    let ttl = action.ttl();
    action.kind().is_replay_kind()
        && !(action.kind() == ActionKind::NoncurrentDays
            && action.rule().newer_noncurrent_versions > 0)
        && !ttl.is_zero()
        && ttl <= retention_window
}

impl Snapshot {
    /// Splits the snapshot into `(replay, walk)` views for one daily run.
    ///
    /// - replay: replay-kind actions with `0 < ttl ≤ retention_window`, cloned
    ///   active with mode forced to [`RuleMode::EventDriven`] — the router only
    ///   emits for EventDriven actions, and forcing it lets a rule whose TTL
    ///   fits again be served by replay.
    /// - walk: everything else that is not Disabled, cloned active. Walker
    ///   kinds keep their mode (ScanAtDate stays ScanAtDate); a replay kind
    ///   that lands here (TTL beyond the retention window) becomes
    ///   [`RuleMode::ScanOnly`] so logs and `rules check` show why it walks
    ///   (docs/design-deviations.md#views-and-partition).
    ///
    /// Disabled actions are in neither view. An empty view is `None`. Buckets
    /// with no action in a view are left out of it.
    ///
    /// `shard` is accepted for API symmetry with Go and ignored: every shard
    /// sees every rule, and the shard filter is applied per entry by the
    /// meta-log subscription and the walker.
    pub fn rules_for_shard(
        &self,
        shard: u8,
        retention_window: Duration,
    ) -> (Option<Snapshot>, Option<Snapshot>) {
        let _ = shard;
        let replay = |a: &CompiledAction| replay_eligible(a, retention_window);
        let views = (
            self.view_of(|a| replay(a).then_some(RuleMode::EventDriven)),
            self.view_of(|a| match a.mode() {
                _ if replay(a) => None,
                _ if a.kind().is_replay_kind() => Some(RuleMode::ScanOnly),
                mode => Some(mode),
            }),
        );
        let view =
            |b: Vec<BucketView>| (!b.is_empty()).then(|| Snapshot::from_parts(self.time(), b));
        (view(views.0), view(views.1))
    }

    /// The view for the recovery walk: every non-Disabled action, active, mode
    /// preserved, regardless of the base's active flags. Recovery must reach
    /// every rule's already-due objects, including those of replay rules whose
    /// events are older than the replay window. Partition-independent, so it
    /// takes no retention window. Empty when the base has no enabled action.
    pub fn recovery_view(&self) -> Snapshot {
        Snapshot::from_parts(self.time(), self.view_of(|a| Some(a.mode())))
    }

    /// The buckets of a view: each non-Disabled action `mode_in` gives a mode,
    /// cloned active with that mode; buckets left without one are left out.
    fn view_of(&self, mode_in: impl Fn(&CompiledAction) -> Option<RuleMode>) -> Vec<BucketView> {
        (self.buckets().iter())
            .filter_map(|bucket| {
                let actions: Vec<CompiledAction> = bucket
                    .actions()
                    .iter()
                    .filter(|a| a.mode() != RuleMode::Disabled)
                    .filter_map(|a| mode_in(a).map(|mode| clone_for_view(a, mode)))
                    .collect();
                (!actions.is_empty()).then(|| bucket.with_actions(actions))
            })
            .collect()
    }
}

/// An independent copy of `action` (its rule is shared) that is active and
/// carries `mode`.
fn clone_for_view(action: &CompiledAction, mode: RuleMode) -> CompiledAction {
    let mut clone = action.clone();
    clone.set_mode(mode);
    clone.set_active(true);
    clone
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::compile::tests::{arb_buckets, bucket, rule};
    use crate::engine::hashes::{EMPTY_HASH, max_effective_ttl, promoted_hash};
    use crate::engine::{ActionKey, ActionKind, TimeConfig};
    use proptest::prelude::*;
    use time::macros::datetime;

    const DAY: Duration = Duration::from_secs(86_400);

    fn days(n: u32) -> Duration {
        DAY * n
    }

    fn keys(view: &Option<Snapshot>) -> Vec<(String, String, ActionKind)> {
        view.iter()
            .flat_map(|s| s.actions())
            .map(|a| (a.bucket().to_string(), a.rule().id.clone(), a.kind()))
            .collect()
    }

    /// One bucket with every kind across several rules, plus a disabled rule.
    fn mixed() -> Snapshot {
        let mut days30 = rule("days30", "logs/");
        days30.expiration_days = 30;
        let mut date = rule("date", "d/");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let mut marker = rule("marker", "m/");
        marker.expired_object_delete_marker = true;
        let mut nc = rule("nc", "n/");
        nc.noncurrent_days = 3;
        let mut keep = rule("keep", "k/");
        keep.newer_noncurrent_versions = 2;
        let mut mpu = rule("mpu", "up/");
        mpu.abort_mpu_days = 7;
        let mut off = rule("off", "off/");
        off.expiration_days = 1;
        off.enabled = false;
        Snapshot::compile(
            vec![bucket("b", vec![days30, date, marker, nc, keep, mpu, off])],
            TimeConfig::default(),
        )
    }

    #[test]
    fn replay_gets_fitting_replay_kinds_forced_event_driven_and_walk_the_rest() {
        let snap = mixed();
        let (replay, walk) = snap.rules_for_shard(0, days(100));
        let mut r = keys(&replay);
        r.sort();
        assert_eq!(
            r,
            vec![
                ("b".into(), "days30".into(), ActionKind::ExpirationDays),
                ("b".into(), "mpu".into(), ActionKind::AbortMpu),
                ("b".into(), "nc".into(), ActionKind::NoncurrentDays),
            ]
        );
        let mut w = keys(&walk);
        w.sort();
        assert_eq!(
            w,
            vec![
                ("b".into(), "date".into(), ActionKind::ExpirationDate),
                ("b".into(), "keep".into(), ActionKind::NewerNoncurrent),
                ("b".into(), "marker".into(), ActionKind::ExpiredDeleteMarker),
            ]
        );
        for a in replay.as_ref().unwrap().actions() {
            assert_eq!(a.mode(), RuleMode::EventDriven);
            assert!(a.is_active());
        }
        let walk = walk.unwrap();
        let date = walk
            .actions()
            .find(|a| a.kind() == ActionKind::ExpirationDate)
            .unwrap();
        assert_eq!(date.mode(), RuleMode::ScanAtDate);
        assert!(walk.actions().all(|a| a.is_active()));
    }

    #[test]
    fn replay_forces_event_driven_even_from_scan_only_and_inactive_base() {
        let mut snap = mixed();
        for a in snap.actions_mut() {
            if a.kind() == ActionKind::ExpirationDays && a.mode() != RuleMode::Disabled {
                a.set_mode(RuleMode::ScanOnly);
                a.set_active(false);
            }
        }
        let (replay, _) = snap.rules_for_shard(3, days(100));
        let replay = replay.unwrap();
        let a = replay
            .actions()
            .find(|a| a.kind() == ActionKind::ExpirationDays)
            .unwrap();
        assert_eq!(a.mode(), RuleMode::EventDriven);
        assert!(a.is_active());
    }

    #[test]
    fn expiration_days_and_newer_noncurrent_of_one_rule_are_split() {
        let mut r = rule("split", "");
        r.expiration_days = 5;
        r.newer_noncurrent_versions = 1;
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], TimeConfig::default());
        let (replay, walk) = snap.rules_for_shard(0, days(10));
        assert_eq!(
            keys(&replay),
            vec![("b".into(), "split".into(), ActionKind::ExpirationDays)]
        );
        assert_eq!(
            keys(&walk),
            vec![("b".into(), "split".into(), ActionKind::NewerNoncurrent)]
        );
        // Both views share the one rule definition with the base.
        let base_rule = snap.actions().next().unwrap().rule().clone();
        assert!(Arc::ptr_eq(
            replay.unwrap().actions().next().unwrap().rule(),
            &base_rule
        ));
        assert!(Arc::ptr_eq(
            walk.unwrap().actions().next().unwrap().rule(),
            &base_rule
        ));
    }

    #[test]
    fn noncurrent_days_with_a_version_count_is_walker_bound() {
        // Whether it fires depends on the current number of newer noncurrent
        // versions, which one meta-log event cannot tell.
        let mut counted = rule("counted", "n/");
        counted.noncurrent_days = 3;
        counted.newer_noncurrent_versions = 2;
        let mut plain = rule("plain", "p/");
        plain.noncurrent_days = 3;
        let snap = Snapshot::compile(
            vec![bucket("b", vec![counted, plain])],
            TimeConfig::default(),
        );
        let (replay, walk) = snap.rules_for_shard(0, days(10));
        assert_eq!(
            keys(&replay),
            vec![("b".into(), "plain".into(), ActionKind::NoncurrentDays)]
        );
        assert_eq!(
            keys(&walk),
            vec![("b".into(), "counted".into(), ActionKind::NoncurrentDays)]
        );
    }

    #[test]
    fn ttl_beyond_window_goes_to_walk_as_scan_only_and_boundary_stays_replay() {
        let snap = mixed();
        // 30-day rule: window 29 days → walk; exactly 30 days → replay.
        let (replay, walk) = snap.rules_for_shard(0, days(29));
        assert!(!keys(&replay).iter().any(|k| k.1 == "days30"));
        let walk = walk.unwrap();
        let promoted = walk
            .actions()
            .find(|a| a.kind() == ActionKind::ExpirationDays)
            .unwrap();
        assert_eq!(promoted.mode(), RuleMode::ScanOnly);
        assert!(promoted.is_active());
        let (replay, walk) = snap.rules_for_shard(0, days(30));
        assert!(keys(&replay).iter().any(|k| k.1 == "days30"));
        assert!(!keys(&walk).iter().any(|k| k.1 == "days30"));
    }

    #[test]
    fn zero_window_sends_every_action_to_walk() {
        let snap = mixed();
        let (replay, walk) = snap.rules_for_shard(0, Duration::ZERO);
        assert!(replay.is_none());
        // 6 enabled actions; the disabled one is nowhere.
        assert_eq!(walk.unwrap().len(), 6);
    }

    #[test]
    fn disabled_actions_are_in_no_view() {
        let snap = mixed();
        let (replay, walk) = snap.rules_for_shard(0, days(100));
        let recovery = snap.recovery_view();
        for view in [replay.as_ref(), walk.as_ref(), Some(&recovery)]
            .into_iter()
            .flatten()
        {
            assert!(view.actions().all(|a| a.rule().id != "off"));
            assert!(view.actions().all(|a| a.mode() != RuleMode::Disabled));
        }
        // Only a disabled rule → both views none, recovery empty.
        let mut off = rule("off", "");
        off.expiration_days = 1;
        off.enabled = false;
        let snap = Snapshot::compile(vec![bucket("b", vec![off])], TimeConfig::default());
        assert_eq!(snap.rules_for_shard(0, days(100)), (None, None));
        assert!(snap.recovery_view().is_empty());
    }

    #[test]
    fn walker_only_bucket_has_no_replay_view() {
        let mut date = rule("date", "");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let snap = Snapshot::compile(vec![bucket("b", vec![date])], TimeConfig::default());
        let (replay, walk) = snap.rules_for_shard(0, days(365));
        assert!(replay.is_none());
        assert_eq!(walk.unwrap().len(), 1);
    }

    #[test]
    fn views_drop_buckets_without_actions_but_keep_bucket_metadata() {
        let mut exp = rule("exp", "");
        exp.expiration_days = 1;
        let mut date = rule("date", "");
        date.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let mut versioned = bucket("v", vec![exp]);
        versioned.versioning = crate::engine::Versioning::Suspended;
        let snap = Snapshot::compile(
            vec![versioned, bucket("w", vec![date])],
            TimeConfig::default(),
        );
        let (replay, walk) = snap.rules_for_shard(0, days(2));
        let replay = replay.unwrap();
        let walk = walk.unwrap();
        assert!(replay.bucket("w").is_none());
        assert!(walk.bucket("v").is_none());
        let v = replay.bucket("v").unwrap();
        assert!(v.versioned());
        assert_eq!(v.versioning(), crate::engine::Versioning::Suspended);
        assert_eq!(replay.time(), snap.time());
    }

    #[test]
    fn clones_are_independent_of_the_base_and_of_each_other() {
        let snap = mixed();
        let before = snap.clone();
        let (replay, _) = snap.rules_for_shard(0, days(100));
        let mut replay = replay.unwrap();
        let mut recovery = snap.recovery_view();
        for a in replay.actions_mut() {
            a.set_active(false);
            a.set_mode(RuleMode::ScanOnly);
        }
        assert_eq!(snap, before);
        assert!(recovery.actions().all(|a| a.is_active()));
        for a in recovery.actions_mut() {
            a.set_active(false);
        }
        assert_eq!(snap, before);
        let (replay2, _) = snap.rules_for_shard(0, days(100));
        assert!(replay2.unwrap().actions().all(|a| a.is_active()));
    }

    #[test]
    fn recovery_view_activates_everything_and_keeps_modes() {
        let mut snap = mixed();
        for a in snap.actions_mut() {
            a.set_active(false);
        }
        let recovery = snap.recovery_view();
        assert_eq!(recovery.len(), 6);
        assert!(recovery.actions().all(|a| a.is_active()));
        let modes: Vec<(ActionKind, RuleMode)> =
            recovery.actions().map(|a| (a.kind(), a.mode())).collect();
        assert!(modes.contains(&(ActionKind::ExpirationDate, RuleMode::ScanAtDate)));
        assert!(modes.contains(&(ActionKind::ExpirationDays, RuleMode::EventDriven)));
        // Membership equals replay ∪ walk for any window.
        for window in [Duration::ZERO, days(5), days(100)] {
            let (replay, walk) = snap.rules_for_shard(0, window);
            let mut union: Vec<ActionKey> = replay
                .iter()
                .chain(walk.iter())
                .flat_map(|s| s.actions().map(CompiledAction::key))
                .collect();
            union.sort();
            let rec: Vec<ActionKey> = recovery.actions().map(CompiledAction::key).collect();
            assert_eq!(union, rec, "window {window:?}");
        }
    }

    #[test]
    fn view_lookup_finds_only_its_own_partition() {
        let snap = mixed();
        let (replay, walk) = snap.rules_for_shard(0, days(100));
        let (replay, walk) = (replay.unwrap(), walk.unwrap());
        let exp = snap
            .actions()
            .find(|a| a.rule().id == "days30")
            .unwrap()
            .key();
        assert!(
            replay
                .action(&exp.bucket, exp.rule_hash, exp.kind)
                .is_some()
        );
        assert!(walk.action(&exp.bucket, exp.rule_hash, exp.kind).is_none());
    }

    #[test]
    fn short_days_partition_on_the_configured_day_length() {
        let mut r = rule("r", "");
        r.expiration_days = 3;
        let time = TimeConfig {
            day: Duration::from_secs(10),
            ..TimeConfig::default()
        };
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], time);
        let (replay, walk) = snap.rules_for_shard(0, Duration::from_secs(30));
        assert!(replay.is_some() && walk.is_none());
        let (replay, walk) = snap.rules_for_shard(0, Duration::from_secs(29));
        assert!(replay.is_none() && walk.is_some());
    }

    #[test]
    fn huge_day_counts_walk_instead_of_overflowing() {
        let mut r = rule("forever", "");
        r.expiration_days = i64::MAX;
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], TimeConfig::default());
        let (replay, walk) = snap.rules_for_shard(0, days(365 * 100));
        assert!(replay.is_none());
        assert_eq!(
            walk.unwrap().actions().next().unwrap().mode(),
            RuleMode::ScanOnly
        );
        // Hashing a saturated TTL must not panic either.
        assert_ne!(crate::engine::replay_content_hash(&snap), EMPTY_HASH);
    }

    proptest! {
        /// For any rules and window: replay and walk are disjoint, together
        /// are exactly the recovery view, replay holds only fitting replay
        /// kinds (EventDriven), and the promoted hash is the walk's.
        #[test]
        fn views_partition_the_enabled_actions(
            buckets in arb_buckets(),
            window_days in 0u32..5,
        ) {
            let snap = Snapshot::compile(buckets, TimeConfig::default());
            let window = days(window_days);
            let (replay, walk) = snap.rules_for_shard(0, window);
            let replay_keys: Vec<ActionKey> =
                replay.iter().flat_map(|s| s.actions().map(CompiledAction::key)).collect();
            let walk_keys: Vec<ActionKey> =
                walk.iter().flat_map(|s| s.actions().map(CompiledAction::key)).collect();
            let mut union: Vec<ActionKey> =
                replay_keys.iter().chain(walk_keys.iter()).cloned().collect();
            union.sort();
            union.dedup();
            prop_assert_eq!(union.len(), replay_keys.len() + walk_keys.len());
            let recovery: Vec<ActionKey> =
                snap.recovery_view().actions().map(CompiledAction::key).collect();
            prop_assert_eq!(&union, &recovery);
            let enabled: Vec<ActionKey> = snap
                .actions()
                .filter(|a| a.mode() != RuleMode::Disabled)
                .map(CompiledAction::key)
                .collect();
            prop_assert_eq!(&recovery, &enabled);
            if let Some(replay) = &replay {
                for a in replay.actions() {
                    prop_assert!(a.kind().is_replay_kind());
                    prop_assert!(a.kind() != ActionKind::NoncurrentDays || a.rule().newer_noncurrent_versions <= 0);
                    prop_assert!(!a.ttl().is_zero() && a.ttl() <= window);
                    prop_assert_eq!(a.mode(), RuleMode::EventDriven);
                    prop_assert!(a.is_active());
                }
                prop_assert!(max_effective_ttl(replay) <= window);
            }
            if let Some(walk) = &walk {
                for a in walk.actions() {
                    prop_assert!(a.is_active());
                    let expected = if a.kind().is_replay_kind() {
                        RuleMode::ScanOnly
                    } else {
                        snap.action(a.bucket(), a.rule_hash(), a.kind()).unwrap().mode()
                    };
                    prop_assert_eq!(a.mode(), expected);
                }
            }
            let via_walk = walk.as_ref().map_or(EMPTY_HASH, |w| promoted_hash(w, window));
            prop_assert_eq!(promoted_hash(&snap, window), via_walk);
        }
    }
}
