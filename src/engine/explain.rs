//! `s3-lifecycled explain`, pure: for one object, which rules of its bucket
//! match and why the others do not (disabled, prefix, tag, size), and the due
//! time of each current-version action of the matching ones, computed the way
//! the walker computes them (`engine::time`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::{Nanos, TimeConfig};
use crate::lifecycle::FlatRule;

/// One rule's verdict for the object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleVerdict {
    /// The rule's ID (empty when it has none).
    pub rule_id: String,
    /// 1-based position in the document.
    pub position: usize,
    /// Whether the rule's filter matches the object (and it is enabled).
    pub matches: bool,
    /// Why it does not match; empty when it does.
    pub reasons: Vec<String>,
    /// Per action of a matching rule: (kind, due ns or `None` = never for
    /// this object, note).
    pub actions: Vec<ActionDue>,
}

/// A matching rule's action and when it is due for this object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionDue {
    /// Action kind.
    pub kind: String,
    /// Due time, ns since epoch; `None` when it does not apply to this object.
    pub due_ns: Option<Nanos>,
    /// Why it does not apply, or how the due time was found.
    pub note: String,
}

/// Explains `rules` for the current version of `key` (`size` bytes, `tags`,
/// written at `mtime`).
pub fn explain(
    rules: &[FlatRule],
    key: &str,
    size: i64,
    tags: &BTreeMap<String, String>,
    mtime: Nanos,
    time: &TimeConfig,
) -> Vec<RuleVerdict> {
    rules
        .iter()
        .map(|r| {
            let mut reasons = Vec::new();
            if !r.enabled {
                reasons.push("rule is disabled (Status is not Enabled)".to_string());
            }
            if !key.starts_with(r.prefix.as_str()) {
                reasons.push(format!(
                    "prefix: key {key:?} does not start with {:?}",
                    r.prefix
                ));
            }
            for (k, v) in &r.tags {
                match tags.get(k) {
                    None => reasons.push(format!("tag: object has no tag {k:?} (rule wants {v:?})")),
                    Some(have) if have != v => reasons.push(format!(
                        "tag: object's tag {k:?} is {have:?}, rule wants {v:?}"
                    )),
                    Some(_) => {}
                }
            }
            if r.size_gt > 0 && size <= r.size_gt {
                reasons.push(format!(
                    "size: {size} bytes is not greater than ObjectSizeGreaterThan {}",
                    r.size_gt
                ));
            }
            if r.size_lt > 0 && size >= r.size_lt {
                reasons.push(format!(
                    "size: {size} bytes is not less than ObjectSizeLessThan {}",
                    r.size_lt
                ));
            }
            let matches = reasons.is_empty();
            let mut actions = Vec::new();
            if matches {
                if r.expiration_days > 0 {
                    actions.push(ActionDue {
                        kind: "expiration_days".into(),
                        due_ns: Some(time.due_after(mtime, r.expiration_days)),
                        note: format!("mtime + {} days", r.expiration_days),
                    });
                }
                if let Some(d) = r.expiration_date {
                    let ns = i64::try_from(d.unix_timestamp_nanos()).unwrap_or(Nanos::MAX);
                    actions.push(ActionDue {
                        kind: "expiration_date".into(),
                        due_ns: Some(ns),
                        note: "the rule's Date".into(),
                    });
                }
                if r.noncurrent_days > 0 {
                    actions.push(ActionDue {
                        kind: "noncurrent_days".into(),
                        due_ns: None,
                        note: format!(
                            "applies to noncurrent versions only: {} days after each becomes noncurrent",
                            r.noncurrent_days
                        ),
                    });
                }
                if r.abort_mpu_days > 0 {
                    actions.push(ActionDue {
                        kind: "abort_mpu".into(),
                        due_ns: None,
                        note: "applies to multipart uploads only".into(),
                    });
                }
                if r.expired_object_delete_marker {
                    actions.push(ActionDue {
                        kind: "expired_delete_marker".into(),
                        due_ns: None,
                        note: "applies to a delete marker that is the only version left".into(),
                    });
                }
            }
            RuleVerdict {
                rule_id: r.id.clone(),
                position: r.position,
                matches,
                reasons,
                actions,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DueRounding;

    fn rule(id: &str, prefix: &str) -> FlatRule {
        FlatRule {
            id: id.into(),
            position: 1,
            enabled: true,
            prefix: prefix.into(),
            expiration_days: 2,
            ..FlatRule::default()
        }
    }

    #[test]
    fn matching_rule_has_its_due_time_and_others_their_reasons() {
        let time = TimeConfig {
            day: std::time::Duration::from_secs(10),
            rounding: DueRounding::None,
        };
        let mut tagged = rule("tagged", "");
        tagged.tags.insert("class".into(), "tmp".into());
        let mut big = rule("big", "");
        big.size_gt = 100;
        let mut off = rule("off", "logs/");
        off.enabled = false;
        let rules = [rule("logs", "logs/"), rule("img", "img/"), tagged, big, off];
        let tags = BTreeMap::from([("class".to_string(), "keep".to_string())]);
        let v = explain(&rules, "logs/a", 50, &tags, 1_000, &time);
        assert!(v[0].matches && v[0].reasons.is_empty());
        assert_eq!(v[0].actions[0].due_ns, Some(1_000 + 20_000_000_000));
        assert!(v[1].reasons[0].starts_with("prefix:"), "{:?}", v[1]);
        assert!(
            v[2].reasons[0].contains("tag \"class\" is \"keep\""),
            "{:?}",
            v[2]
        );
        assert!(
            v[3].reasons[0].starts_with("size: 50 bytes is not greater"),
            "{:?}",
            v[3]
        );
        assert!(v[4].reasons[0].contains("disabled"), "{:?}", v[4]);
        assert!(v[4].actions.is_empty());
    }
}
