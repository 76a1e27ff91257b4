//! Compilation of bucket lifecycle configurations into an immutable
//! [`Snapshot`] of [`CompiledAction`]s: one action per (rule, action kind),
//! with its rule hash, mode and active flag (docs/rule-hash.md#action-kinds).
//!
//! A snapshot is cheap to clone into views (`engine::views`): rules are shared
//! through `Arc`, and an action is a few words plus two `Arc` bumps.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{ActionKind, RuleHash, RuleMode, TimeConfig, rule_hash};
use crate::lifecycle::FlatRule;

/// A bucket's versioning state, from the bucket entry's
/// `Seaweed-X-Amz-Versioning` Extended value (docs/filer-layout.md#bucket-entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Versioning {
    /// Versioning was never enabled (value absent or unrecognised).
    #[default]
    Unversioned,
    Enabled,
    /// `Suspended`: still "versioned" for routing; bare-key writes become the
    /// `null` version.
    Suspended,
}

impl Versioning {
    /// Parses the `Seaweed-X-Amz-Versioning` value the way Go's
    /// `IsBucketVersioned` does: trimmed, case-insensitive. Anything else
    /// (including absence) is [`Versioning::Unversioned`].
    pub fn from_extended(value: Option<&[u8]>) -> Versioning {
        let text = String::from_utf8_lossy(value.unwrap_or_default());
        let text = text.trim();
        if text.eq_ignore_ascii_case("enabled") {
            Versioning::Enabled
        } else if text.eq_ignore_ascii_case("suspended") {
            Versioning::Suspended
        } else {
            Versioning::Unversioned
        }
    }
}

/// One bucket's lifecycle input to [`Snapshot::compile`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BucketConfig {
    /// Bucket name (the directory name under the buckets root).
    pub name: String,
    pub versioning: Versioning,
    /// Object lock is enabled on the bucket. The S3 server treats such buckets
    /// as versioned even without a versioning value (docs/filer-layout.md#bucket-entry).
    pub object_lock: bool,
    /// The bucket's flattened rules, in document order.
    pub rules: Vec<FlatRule>,
}

impl BucketConfig {
    /// True when objects in this bucket are stored as versions: versioning
    /// Enabled or Suspended, or object lock on.
    pub fn versioned(&self) -> bool {
        versioned(self.versioning, self.object_lock)
    }
}

fn versioned(versioning: Versioning, object_lock: bool) -> bool {
    object_lock || matches!(versioning, Versioning::Enabled | Versioning::Suspended)
}

/// The action kinds one rule compiles to, in SeaweedFS emission order
/// (docs/rule-hash.md#action-kinds). The rule's Status does not matter here; it decides the mode.
///
/// `NewerNoncurrentVersions` alongside `NoncurrentDays` does not produce its
/// own action: the count stays on the rule and the evaluator applies it to the
/// `NoncurrentDays` action.
pub fn rule_action_kinds(rule: &FlatRule) -> Vec<ActionKind> {
    let has = |kind: &ActionKind| match kind {
        ActionKind::ExpirationDays => rule.expiration_days > 0,
        ActionKind::ExpirationDate => rule.expiration_date.is_some(),
        ActionKind::ExpiredDeleteMarker => rule.expired_object_delete_marker,
        ActionKind::NoncurrentDays => rule.noncurrent_days > 0,
        ActionKind::NewerNoncurrent => {
            rule.noncurrent_days <= 0 && rule.newer_noncurrent_versions > 0
        }
        ActionKind::AbortMpu => rule.abort_mpu_days > 0,
    };
    ActionKind::EMISSION_ORDER.into_iter().filter(has).collect()
}

/// Identity of a compiled action, as SeaweedFS's `ActionKey`. Its derived
/// order (bucket, rule hash bytes, kind) is the snapshot's sort order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActionKey {
    pub bucket: Arc<str>,
    /// Hash of the rule the action came from.
    pub rule_hash: RuleHash,
    pub kind: ActionKind,
}

/// One (bucket, rule, kind) action. The identity fields are read-only so a
/// snapshot's sort order and lookups stay valid; only the per-view `mode` and
/// `active` flags can be changed.
#[derive(Clone, PartialEq, Eq)]
pub struct CompiledAction {
    bucket: Arc<str>,
    rule: Arc<FlatRule>,
    rule_hash: RuleHash,
    kind: ActionKind,
    mode: RuleMode,
    active: bool,
    /// Kept so `ttl()` is always derived from the current rule and kind
    /// rather than cached at compile time.
    time: TimeConfig,
}

impl CompiledAction {
    pub fn bucket(&self) -> &Arc<str> {
        &self.bucket
    }

    /// The rule the action came from (shared with every view).
    pub fn rule(&self) -> &Arc<FlatRule> {
        &self.rule
    }

    /// The rule's 8-byte hash, sent in `LifecycleDelete`.
    pub fn rule_hash(&self) -> RuleHash {
        self.rule_hash
    }

    pub fn kind(&self) -> ActionKind {
        self.kind
    }

    /// How the action is dispatched (see [`RuleMode`]).
    pub fn mode(&self) -> RuleMode {
        self.mode
    }

    /// Whether routing and the walker consider this action. Views set it;
    /// in a compiled base snapshot it is true for every non-Disabled action.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Sets the mode (used by views; also lets tests simulate legacy state).
    pub fn set_mode(&mut self, mode: RuleMode) {
        self.mode = mode;
    }

    /// Sets the active flag (used by views; also lets tests simulate state).
    pub fn set_active(&mut self, active: bool) {
        self.active = active;
    }

    pub fn key(&self) -> ActionKey {
        ActionKey {
            bucket: self.bucket.clone(),
            rule_hash: self.rule_hash,
            kind: self.kind,
        }
    }

    /// Effective TTL (Go's `effectiveTTL`): the rule's day count for this
    /// kind as a duration for the replay kinds (ExpirationDays,
    /// NoncurrentDays, AbortMpu); zero for walker kinds. This is what the
    /// replay/walk partition compares to the meta-log retention window.
    pub fn ttl(&self) -> Duration {
        let days = match self.kind {
            ActionKind::ExpirationDays => self.rule.expiration_days,
            ActionKind::NoncurrentDays => self.rule.noncurrent_days,
            ActionKind::AbortMpu => self.rule.abort_mpu_days,
            ActionKind::ExpirationDate
            | ActionKind::NewerNoncurrent
            | ActionKind::ExpiredDeleteMarker => 0,
        };
        self.time.days(days)
    }
}

impl fmt::Debug for CompiledAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The full rule is noise in assertion output; its id and hash name it.
        f.debug_struct("CompiledAction")
            .field("bucket", &self.bucket)
            .field("rule_id", &self.rule.id)
            .field("rule_hash", &self.rule_hash)
            .field("kind", &self.kind)
            .field("mode", &self.mode)
            .field("active", &self.active)
            .finish()
    }
}

/// One bucket inside a [`Snapshot`]: its versioning and its actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketView {
    name: Arc<str>,
    versioning: Versioning,
    object_lock: bool,
    /// In rule order, then emission order within a rule.
    actions: Vec<CompiledAction>,
    /// Indexes into `actions` sorted by (rule hash, kind), for lookups and
    /// for the snapshot-wide sorted iteration.
    by_key: Vec<usize>,
}

impl BucketView {
    fn new(
        name: Arc<str>,
        versioning: Versioning,
        object_lock: bool,
        actions: Vec<CompiledAction>,
    ) -> Self {
        let mut by_key: Vec<usize> = (0..actions.len()).collect();
        by_key.sort_by_key(|&i| (actions[i].rule_hash, actions[i].kind));
        BucketView {
            name,
            versioning,
            object_lock,
            actions,
            by_key,
        }
    }

    /// A view of this bucket holding `actions` (already filtered/cloned).
    pub(crate) fn with_actions(&self, actions: Vec<CompiledAction>) -> Self {
        BucketView::new(
            self.name.clone(),
            self.versioning,
            self.object_lock,
            actions,
        )
    }

    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub fn versioning(&self) -> Versioning {
        self.versioning
    }

    pub fn object_lock(&self) -> bool {
        self.object_lock
    }

    /// Versioned for routing: Enabled, Suspended, or object lock on.
    pub fn versioned(&self) -> bool {
        versioned(self.versioning, self.object_lock)
    }

    /// Actions in rule order, then emission order within a rule.
    pub fn actions(&self) -> &[CompiledAction] {
        &self.actions
    }

    /// Actions sorted by (rule hash, kind).
    pub fn actions_sorted(&self) -> impl Iterator<Item = &CompiledAction> {
        self.by_key.iter().map(|&i| &self.actions[i])
    }

    /// The action with this rule hash and kind, if any.
    pub fn action(&self, rule_hash: RuleHash, kind: ActionKind) -> Option<&CompiledAction> {
        self.by_key
            .binary_search_by(|&i| {
                (self.actions[i].rule_hash, self.actions[i].kind).cmp(&(rule_hash, kind))
            })
            .ok()
            .map(|pos| &self.actions[self.by_key[pos]])
    }
}

/// An immutable set of compiled actions over all lifecycle buckets, or a view
/// of one (replay, walk, recovery; see `engine::views`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    time: TimeConfig,
    /// Sorted by name, names unique.
    buckets: Vec<BucketView>,
}

impl Snapshot {
    /// Compiles bucket configurations into a snapshot.
    ///
    /// Per rule, actions are emitted in SeaweedFS order
    /// ([`rule_action_kinds`]). Mode: a rule that is not enabled →
    /// [`RuleMode::Disabled`]; `ExpirationDate` → [`RuleMode::ScanAtDate`];
    /// otherwise [`RuleMode::EventDriven`]. Every non-Disabled action is active.
    ///
    /// Deviation from Go (docs/design-deviations.md#disabled-rules): a Disabled
    /// action never fires and is in no view and no hash, so enabling a rule
    /// triggers the recovery walk that catches objects already past its TTL.
    ///
    /// Actions are identified by (bucket, rule hash, kind), like Go's action
    /// map. When two rules of one bucket compile to the same identity (same
    /// content, different IDs) only one action is kept — the first enabled
    /// one in document order — so an object is never deleted twice for one
    /// rule; Go keeps one per identity too. Identical rules in different
    /// buckets stay distinct.
    ///
    /// Bucket names are expected to be unique (the filer cannot hold two
    /// buckets with one name); if a name repeats, the later config replaces
    /// the earlier one.
    pub fn compile(buckets: Vec<BucketConfig>, time: TimeConfig) -> Snapshot {
        let by_name: HashMap<String, BucketConfig> =
            buckets.into_iter().map(|b| (b.name.clone(), b)).collect();
        let mut views: Vec<BucketView> = by_name
            .into_values()
            .map(|b| compile_bucket(b, time))
            .collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Snapshot {
            time,
            buckets: views,
        }
    }

    /// A snapshot made of already-built bucket views (used by views).
    pub(crate) fn from_parts(time: TimeConfig, buckets: Vec<BucketView>) -> Snapshot {
        Snapshot { time, buckets }
    }

    /// The time settings the snapshot was compiled with (TTLs depend on them).
    pub fn time(&self) -> TimeConfig {
        self.time
    }

    /// Buckets sorted by name. A compiled base snapshot holds every input
    /// bucket, even one without actions; views hold only buckets with at
    /// least one action in the view.
    pub fn buckets(&self) -> &[BucketView] {
        &self.buckets
    }

    pub fn bucket(&self, name: &str) -> Option<&BucketView> {
        self.buckets
            .binary_search_by(|b| (*b.name).cmp(name))
            .ok()
            .map(|i| &self.buckets[i])
    }

    /// Every action, sorted by (bucket, rule hash bytes, kind).
    pub fn actions(&self) -> impl Iterator<Item = &CompiledAction> {
        self.buckets.iter().flat_map(BucketView::actions_sorted)
    }

    pub fn action(
        &self,
        bucket: &str,
        rule_hash: RuleHash,
        kind: ActionKind,
    ) -> Option<&CompiledAction> {
        self.bucket(bucket)?.action(rule_hash, kind)
    }

    pub fn len(&self) -> usize {
        self.buckets.iter().map(|b| b.actions.len()).sum()
    }

    /// True when the snapshot holds no action at all.
    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(|b| b.actions.is_empty())
    }
}

#[cfg(test)]
impl Snapshot {
    /// Mutable access to every action's mode and active flag (identity fields
    /// stay read-only), for tests of view behaviour.
    pub fn actions_mut(&mut self) -> impl Iterator<Item = &mut CompiledAction> {
        self.buckets.iter_mut().flat_map(|b| b.actions.iter_mut())
    }
}

fn compile_bucket(config: BucketConfig, time: TimeConfig) -> BucketView {
    let name: Arc<str> = Arc::from(config.name.as_str());
    let mut actions: Vec<CompiledAction> = Vec::new();
    let mut seen: HashMap<(RuleHash, ActionKind), usize> = HashMap::new();
    for rule in config.rules {
        let hash = rule_hash(&rule);
        let kinds = rule_action_kinds(&rule);
        let enabled = rule.enabled;
        let rule = Arc::new(rule);
        for kind in kinds {
            let mode = if !enabled {
                RuleMode::Disabled
            } else if kind == ActionKind::ExpirationDate {
                RuleMode::ScanAtDate
            } else {
                RuleMode::EventDriven
            };
            let action = CompiledAction {
                bucket: name.clone(),
                rule: rule.clone(),
                rule_hash: hash,
                kind,
                mode,
                active: mode != RuleMode::Disabled,
                time,
            };
            match seen.get(&(hash, kind)) {
                None => {
                    seen.insert((hash, kind), actions.len());
                    actions.push(action);
                }
                // An enabled duplicate takes over a disabled one's slot, so
                // the outcome does not depend on which of the two came first.
                Some(&i) if actions[i].mode == RuleMode::Disabled && enabled => {
                    actions[i] = action;
                }
                Some(_) => {}
            }
        }
    }
    BucketView::new(name, config.versioning, config.object_lock, actions)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use time::macros::datetime;

    /// An enabled rule with a prefix; tests set the action fields.
    pub(crate) fn rule(id: &str, prefix: &str) -> FlatRule {
        FlatRule {
            id: id.to_string(),
            prefix: prefix.to_string(),
            enabled: true,
            ..FlatRule::default()
        }
    }

    pub(crate) fn bucket(name: &str, rules: Vec<FlatRule>) -> BucketConfig {
        BucketConfig {
            name: name.to_string(),
            rules,
            ..BucketConfig::default()
        }
    }

    pub(crate) fn arb_rule() -> impl Strategy<Value = FlatRule> {
        (
            prop::sample::select(vec!["", "a/", "b/", "logs/"]),
            0i64..4,
            0i64..4,
            0i64..3,
            0i64..3,
            any::<bool>(),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["x", "y"])),
            0i64..3,
            any::<bool>(),
        )
            .prop_map(
                |(prefix, exp, nc, keep, mpu, marker, enabled, tag, gt, date)| {
                    let mut r = rule("id", prefix);
                    r.expiration_days = exp;
                    r.noncurrent_days = nc;
                    r.newer_noncurrent_versions = keep;
                    r.abort_mpu_days = mpu;
                    r.expired_object_delete_marker = marker;
                    r.enabled = enabled;
                    r.size_gt = gt * 100;
                    if date {
                        r.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
                    }
                    if let Some(t) = tag {
                        r.tags.insert("env".into(), t.into());
                    }
                    r
                },
            )
    }

    /// 1–4 buckets with unique names and 0–5 random rules each: small value
    /// ranges so duplicates, disabled twins and window boundaries occur often.
    pub(crate) fn arb_buckets() -> impl Strategy<Value = Vec<BucketConfig>> {
        prop::collection::vec(prop::collection::vec(arb_rule(), 0..6), 1..5).prop_map(|rule_sets| {
            rule_sets
                .into_iter()
                .enumerate()
                .map(|(i, rules)| {
                    let rules = rules
                        .into_iter()
                        .enumerate()
                        .map(|(j, mut r)| {
                            r.id = format!("r{j}");
                            r
                        })
                        .collect();
                    bucket(&format!("bucket-{i}"), rules)
                })
                .collect()
        })
    }

    fn kinds(b: &BucketView) -> Vec<ActionKind> {
        b.actions().iter().map(|a| a.kind()).collect()
    }

    #[test]
    fn one_rule_with_every_action_emits_them_in_seaweedfs_order() {
        let mut r = rule("all", "x/");
        r.expiration_days = 3;
        r.expiration_date = Some(datetime!(2030-01-01 00:00:00 UTC));
        r.expired_object_delete_marker = true;
        r.noncurrent_days = 4;
        r.newer_noncurrent_versions = 2;
        r.abort_mpu_days = 5;
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], TimeConfig::default());
        let b = snap.bucket("b").unwrap();
        assert_eq!(
            kinds(b),
            vec![
                ActionKind::ExpirationDays,
                ActionKind::ExpirationDate,
                ActionKind::ExpiredDeleteMarker,
                ActionKind::NoncurrentDays,
                ActionKind::AbortMpu,
            ]
        );
        // The count stays on the rule for the evaluator.
        let nc = b
            .action(b.actions()[0].rule_hash(), ActionKind::NoncurrentDays)
            .unwrap();
        assert_eq!(nc.rule().newer_noncurrent_versions, 2);
    }

    #[test]
    fn newer_noncurrent_alone_emits_its_own_kind_and_negatives_emit_nothing() {
        let mut r = rule("keep", "");
        r.newer_noncurrent_versions = 3;
        let mut neg = rule("neg", "n/");
        neg.expiration_days = -1;
        neg.noncurrent_days = -2;
        neg.abort_mpu_days = -3;
        let snap = Snapshot::compile(vec![bucket("b", vec![r, neg])], TimeConfig::default());
        assert_eq!(
            kinds(snap.bucket("b").unwrap()),
            vec![ActionKind::NewerNoncurrent]
        );
    }

    #[test]
    fn modes_follow_status_and_kind() {
        let mut on = rule("on", "a/");
        on.expiration_days = 1;
        on.expiration_date = Some(datetime!(2030-01-01 00:00:00 UTC));
        let mut off = rule("off", "b/");
        off.expiration_days = 1;
        off.enabled = false;
        let snap = Snapshot::compile(vec![bucket("b", vec![on, off])], TimeConfig::default());
        let modes: Vec<(ActionKind, RuleMode, bool)> = snap
            .bucket("b")
            .unwrap()
            .actions()
            .iter()
            .map(|a| (a.kind(), a.mode(), a.is_active()))
            .collect();
        assert_eq!(
            modes,
            vec![
                (ActionKind::ExpirationDays, RuleMode::EventDriven, true),
                (ActionKind::ExpirationDate, RuleMode::ScanAtDate, true),
                (ActionKind::ExpirationDays, RuleMode::Disabled, false),
            ]
        );
    }

    #[test]
    fn disabled_wins_over_scan_at_date() {
        let mut r = rule("date-off", "");
        r.expiration_date = Some(datetime!(2030-01-01 00:00:00 UTC));
        r.enabled = false;
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], TimeConfig::default());
        let a = snap.actions().next().unwrap();
        assert_eq!((a.mode(), a.is_active()), (RuleMode::Disabled, false));
    }

    #[test]
    fn rules_are_shared_between_sibling_actions_not_copied() {
        let mut r = rule("r", "");
        r.expiration_days = 1;
        r.abort_mpu_days = 2;
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], TimeConfig::default());
        let acts = snap.bucket("b").unwrap().actions();
        assert!(Arc::ptr_eq(acts[0].rule(), acts[1].rule()));
        assert!(Arc::ptr_eq(acts[0].bucket(), acts[1].bucket()));
    }

    #[test]
    fn identical_rules_in_two_buckets_do_not_collide() {
        let mut r = rule("same", "logs/");
        r.expiration_days = 30;
        let snap = Snapshot::compile(
            vec![bucket("b2", vec![r.clone()]), bucket("b1", vec![r.clone()])],
            TimeConfig::default(),
        );
        assert_eq!(snap.len(), 2);
        let h = rule_hash(&r);
        let a1 = snap.action("b1", h, ActionKind::ExpirationDays).unwrap();
        let a2 = snap.action("b2", h, ActionKind::ExpirationDays).unwrap();
        assert_eq!(&**a1.bucket(), "b1");
        assert_eq!(&**a2.bucket(), "b2");
        // Sorted iteration is by bucket first.
        let order: Vec<&str> = snap.actions().map(|a| &**a.bucket()).collect();
        assert_eq!(order, vec!["b1", "b2"]);
    }

    #[test]
    fn duplicate_rule_in_one_bucket_keeps_one_enabled_action_in_either_order() {
        let mut off = rule("off", "logs/");
        off.expiration_days = 30;
        off.enabled = false;
        let mut on = off.clone();
        on.id = "on".into();
        on.enabled = true;
        for rules in [vec![off.clone(), on.clone()], vec![on.clone(), off.clone()]] {
            let snap = Snapshot::compile(vec![bucket("b", rules)], TimeConfig::default());
            let b = snap.bucket("b").unwrap();
            assert_eq!(b.actions().len(), 1);
            assert_eq!(b.actions()[0].rule().id, "on");
            assert_eq!(b.actions()[0].mode(), RuleMode::EventDriven);
        }
    }

    #[test]
    fn sorted_iteration_is_bucket_then_rule_hash_then_kind() {
        let mut rules = Vec::new();
        for (i, p) in ["a/", "b/", "c/", "d/", "e/"].iter().enumerate() {
            let mut r = rule(&format!("r{i}"), p);
            r.expiration_days = 1;
            r.abort_mpu_days = 2;
            rules.push(r);
        }
        let snap = Snapshot::compile(
            vec![bucket("z", rules.clone()), bucket("a", rules)],
            TimeConfig::default(),
        );
        let keys: Vec<ActionKey> = snap.actions().map(CompiledAction::key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(keys.len(), 20);
        for k in &keys {
            assert_eq!(
                snap.action(&k.bucket, k.rule_hash, k.kind).unwrap().key(),
                *k
            );
        }
        assert!(
            snap.action("a", RuleHash([0; 8]), ActionKind::AbortMpu)
                .is_none()
        );
        assert!(
            snap.action("nope", keys[0].rule_hash, keys[0].kind)
                .is_none()
        );
    }

    #[test]
    fn ttl_uses_the_field_of_the_kind_and_the_configured_day() {
        let mut r = rule("r", "");
        r.expiration_days = 2;
        r.noncurrent_days = 3;
        r.abort_mpu_days = 4;
        r.expired_object_delete_marker = true;
        let time = TimeConfig {
            day: Duration::from_secs(10),
            ..TimeConfig::default()
        };
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], time);
        let ttls: Vec<(ActionKind, Duration)> = snap
            .bucket("b")
            .unwrap()
            .actions()
            .iter()
            .map(|a| (a.kind(), a.ttl()))
            .collect();
        assert_eq!(
            ttls,
            vec![
                (ActionKind::ExpirationDays, Duration::from_secs(20)),
                (ActionKind::ExpiredDeleteMarker, Duration::ZERO),
                (ActionKind::NoncurrentDays, Duration::from_secs(30)),
                (ActionKind::AbortMpu, Duration::from_secs(40)),
            ]
        );
        assert_eq!(snap.time(), time);
    }

    #[test]
    fn versioned_covers_enabled_suspended_and_object_lock() {
        let mut b = bucket("b", vec![]);
        assert!(!b.versioned());
        b.versioning = Versioning::Suspended;
        assert!(b.versioned());
        b.versioning = Versioning::Enabled;
        assert!(b.versioned());
        b.versioning = Versioning::Unversioned;
        b.object_lock = true;
        assert!(b.versioned());
        let snap = Snapshot::compile(vec![b], TimeConfig::default());
        let view = snap.bucket("b").unwrap();
        assert!(view.versioned() && view.object_lock());
        assert_eq!(view.versioning(), Versioning::Unversioned);
    }

    #[test]
    fn versioning_parses_like_go_is_bucket_versioned() {
        assert_eq!(Versioning::from_extended(None), Versioning::Unversioned);
        assert_eq!(
            Versioning::from_extended(Some(b" Enabled\n")),
            Versioning::Enabled
        );
        assert_eq!(
            Versioning::from_extended(Some(b"SUSPENDED")),
            Versioning::Suspended
        );
        assert_eq!(
            Versioning::from_extended(Some(b"")),
            Versioning::Unversioned
        );
        assert_eq!(
            Versioning::from_extended(Some(b"\xff\xfe")),
            Versioning::Unversioned
        );
    }

    #[test]
    fn buckets_without_actions_are_kept_but_snapshot_is_empty() {
        let mut t = rule("transition-only", "");
        t.has_transition = true;
        let snap = Snapshot::compile(
            vec![bucket("b", vec![t]), bucket("a", vec![])],
            TimeConfig::default(),
        );
        assert!(snap.is_empty());
        assert_eq!(snap.len(), 0);
        let names: Vec<&str> = snap.buckets().iter().map(|b| &**b.name()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert!(Snapshot::compile(vec![], TimeConfig::default()).is_empty());
    }

    #[test]
    fn repeated_bucket_name_keeps_the_later_config() {
        let mut r1 = rule("first", "one/");
        r1.expiration_days = 1;
        let mut r2 = rule("second", "two/");
        r2.expiration_days = 2;
        let snap = Snapshot::compile(
            vec![bucket("b", vec![r1]), bucket("b", vec![r2])],
            TimeConfig::default(),
        );
        assert_eq!(snap.buckets().len(), 1);
        assert_eq!(snap.bucket("b").unwrap().actions()[0].rule().id, "second");
    }

    #[test]
    fn zero_day_length_gives_zero_ttl_instead_of_panicking() {
        let mut r = rule("r", "");
        r.expiration_days = 5;
        let time = TimeConfig {
            day: Duration::ZERO,
            ..TimeConfig::default()
        };
        let snap = Snapshot::compile(vec![bucket("b", vec![r])], time);
        assert_eq!(snap.actions().next().unwrap().ttl(), Duration::ZERO);
    }
}
