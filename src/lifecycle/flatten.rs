//! Flattening a parsed configuration into [`FlatRule`]s with SeaweedFS's
//! `LifecycleToCanonical` semantics (docs/lifecycle-config.md#canonical-form).
//! Rule hashes are computed over the result, so every quirk here is deliberate:
//! changing one changes hashes and breaks compatibility with Go-written cursors.

use std::collections::BTreeMap;

use time::OffsetDateTime;
use time::macros::datetime;

use super::FlatRule;
use super::model::{Filter, LifecycleConfiguration, Rule};

/// Go's zero `time.Time` (0001-01-01T00:00:00Z). SeaweedFS treats a date equal
/// to it as "no date", whatever offset it was written in.
const GO_ZERO_TIME: OffsetDateTime = datetime!(0001-01-01 00:00:00 UTC);

impl LifecycleConfiguration {
    /// Every rule flattened the way SeaweedFS enforces it, in document order.
    /// Disabled rules are included (with `enabled == false`): SeaweedFS compiles
    /// them too, and they count in rule-set hashes.
    pub fn flatten(&self) -> Vec<FlatRule> {
        self.rules.iter().map(flatten_rule).collect()
    }
}

/// One rule. Numbers are copied verbatim, negatives included: Go hashes the
/// value it decoded, so clamping a negative to 0 would change the rule hash.
/// Consumers treat any value `<= 0` as unset (docs/rule-hash.md#action-kinds).
pub(crate) fn flatten_rule(rule: &Rule) -> FlatRule {
    let mut out = FlatRule {
        id: rule.id.clone().unwrap_or_default(),
        position: rule.position,
        enabled: rule.status.as_deref() == Some("Enabled"),
        ..FlatRule::default()
    };

    if let Some(filter) = &rule.filter {
        flatten_filter(filter, &mut out);
    }
    // The legacy rule-level prefix applies whenever the filter yields an empty
    // prefix, even next to a present-but-empty <Filter><Prefix/>.
    if out.prefix.is_empty()
        && let Some(legacy) = &rule.prefix
    {
        out.prefix.clone_from(legacy);
    }

    if let Some(exp) = &rule.expiration {
        out.expiration_days = exp.days.unwrap_or(0);
        out.expiration_date = exp.date.filter(|d| *d != GO_ZERO_TIME);
        out.expired_object_delete_marker = exp.expired_object_delete_marker.unwrap_or(false);
    }
    if let Some(nve) = &rule.noncurrent_version_expiration {
        out.noncurrent_days = nve.noncurrent_days.unwrap_or(0);
        out.newer_noncurrent_versions = nve.newer_noncurrent_versions.unwrap_or(0);
    }
    if let Some(abort) = &rule.abort_incomplete_multipart_upload {
        out.abort_mpu_days = abort.days_after_initiation.unwrap_or(0);
    }
    out.has_transition =
        !rule.transitions.is_empty() || !rule.noncurrent_version_transitions.is_empty();
    out
}

fn flatten_filter(filter: &Filter, out: &mut FlatRule) {
    if let Some(and) = &filter.and {
        // <And> wins outright; Filter-level sizes, Prefix and Tag are ignored.
        out.prefix = and.prefix.clone().unwrap_or_default();
        out.tags = and
            .tags
            .iter()
            .map(|t| {
                (
                    t.key.clone().unwrap_or_default(),
                    t.value.clone().unwrap_or_default(),
                )
            })
            .collect::<BTreeMap<_, _>>(); // duplicate keys: the last pair wins
        out.size_gt = and.object_size_greater_than.unwrap_or(0);
        out.size_lt = and.object_size_less_than.unwrap_or(0);
        return;
    }
    if let Some((key, value)) = filter.effective_tag() {
        // A direct <Tag> drops Filter/Prefix entirely.
        out.tags = BTreeMap::from([(key, value)]);
    } else if let Some(prefix) = &filter.prefix {
        out.prefix.clone_from(prefix);
    }
    out.size_gt = filter.object_size_greater_than.unwrap_or(0);
    out.size_lt = filter.object_size_less_than.unwrap_or(0);
}
