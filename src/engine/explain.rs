//! `s3-lifecycled explain`, pure: for one object, which rules of its bucket
//! match and why the others do not (disabled, prefix, tag, size), and the due
//! time of each current-version action of the matching ones, computed the way
//! the walker computes them (`engine::time`); and for one version of a
//! versioned key, which actions apply to it and when, from the walker's own
//! evaluation of the key's versions (`engine::walk`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::audit::rule_name;
use crate::engine::versions::expand_versions;
use crate::engine::walk::{self, WalkItem};
use crate::engine::{ActionKind, Nanos, Snapshot, TimeConfig, keys};
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
                    None => {
                        reasons.push(format!("tag: object has no tag {k:?} (rule wants {v:?})"))
                    }
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
            let mut due = |applies: bool, kind: &str, due_ns: Option<Nanos>, note: String| {
                if matches && applies {
                    actions.push(ActionDue {
                        kind: kind.into(),
                        due_ns,
                        note,
                    });
                }
            };
            due(
                r.expiration_days > 0,
                "expiration_days",
                Some(time.due_after(mtime, r.expiration_days)),
                format!("mtime + {} days", r.expiration_days),
            );
            if let Some(d) = r.expiration_date {
                let ns = i64::try_from(d.unix_timestamp_nanos()).unwrap_or(Nanos::MAX);
                due(true, "expiration_date", Some(ns), "the rule's Date".into());
            }
            due(
                r.noncurrent_days > 0,
                "noncurrent_days",
                None,
                format!(
                    "applies to noncurrent versions only: {} days after each becomes noncurrent",
                    r.noncurrent_days
                ),
            );
            let mpu = "applies to multipart uploads only".into();
            due(r.abort_mpu_days > 0, "abort_mpu", None, mpu);
            due(
                r.expired_object_delete_marker,
                "expired_delete_marker",
                None,
                "applies to a delete marker that is the only version left".into(),
            );
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

/// What `explain --version-id` says about one version of a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionVerdict {
    /// The version id (`null` for the null version).
    pub version_id: String,
    /// The key's current version.
    pub is_latest: bool,
    pub is_delete_marker: bool,
    /// When it became noncurrent (its stamp, else the next-newer version's
    /// mtime); `None` for the latest.
    pub noncurrent_since: Option<Nanos>,
    /// Its mtime, ns.
    pub mod_time: Nanos,
    pub size: i64,
    /// Versions of the key (this one included).
    pub num_versions: usize,
    /// Every action that applies to this version by the horizon given,
    /// with its rule and due time, earliest first.
    pub actions: Vec<VersionAction>,
}

/// One action that applies to a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionAction {
    /// The rule's ID, or `#<position>` when it has none.
    pub rule: String,
    pub kind: String,
    /// When it is (or was) due.
    pub due_ns: Nanos,
}

/// Explains `view`'s rules for version `version_id` of the listed `item`
/// (a versioned key, or a plain object, whose only version is `null`):
/// every action that fires for it by `horizon`, exactly as the walker
/// would send it. An expiration of the current version applies to the key,
/// so it is shown for the latest version only. `None` when the item has no
/// such version.
pub fn explain_version(
    view: &Snapshot,
    bucket: &str,
    item: &WalkItem,
    version_id: &str,
    horizon: Nanos,
) -> Option<VersionVerdict> {
    let mut verdict = match item {
        WalkItem::Versions {
            logical_key,
            folder,
            versions,
            null_version,
        } => expand_versions(logical_key, folder, versions, null_version.as_ref())
            .into_iter()
            .find(|v| v.version_id == version_id)
            .map(|v| VersionVerdict {
                version_id: v.version_id,
                is_latest: v.info.is_latest,
                is_delete_marker: v.info.is_delete_marker,
                noncurrent_since: v.info.noncurrent_since,
                mod_time: v.info.mod_time,
                size: v.info.size,
                num_versions: v.info.num_versions,
                actions: Vec::new(),
            })?,
        WalkItem::Object { entry, .. } if version_id == keys::NULL_VERSION => {
            let a = entry.attributes.clone().unwrap_or_default();
            VersionVerdict {
                version_id: version_id.to_string(),
                is_latest: true,
                is_delete_marker: false,
                noncurrent_since: None,
                mod_time: a.mtime * 1_000_000_000 + i64::from(a.mtime_ns),
                size: i64::try_from(a.file_size).unwrap_or(i64::MAX),
                num_versions: 1,
                actions: Vec::new(),
            }
        }
        _ => return None,
    };
    for m in walk::evaluate(view, bucket, item, horizon) {
        let mine = match m.kind {
            ActionKind::ExpirationDays | ActionKind::ExpirationDate => verdict.is_latest,
            _ => m.version_id == version_id,
        };
        if !mine {
            continue;
        }
        let rule = (view.action(bucket, m.rule_hash, m.kind))
            .map(|a| rule_name(a.rule()))
            .unwrap_or_default();
        verdict.actions.push(VersionAction {
            rule,
            kind: m.kind.to_string(),
            due_ns: m.due,
        });
    }
    verdict.actions.sort_by_key(|a| a.due_ns);
    Some(verdict)
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

    #[test]
    fn version_explained_with_the_walkers_due_times() {
        use crate::engine::versions::testkit::*;
        use crate::engine::{BucketConfig, Versioning};
        const S: i64 = 1_000_000_000;
        const DAY: i64 = 86_400 * S;
        const V1: &str = "67129c57f463efb319b449220aef50bb";
        const V2: &str = "67129c57c458226179466ab670c6e266";
        let mut nc = rule("old", "");
        nc.expiration_days = 0;
        nc.noncurrent_days = 3;
        let view = Snapshot::compile(
            vec![BucketConfig {
                name: "b".into(),
                versioning: Versioning::Enabled,
                object_lock: false,
                rules: vec![nc, rule("cur", "")],
            }],
            TimeConfig {
                rounding: DueRounding::None,
                ..TimeConfig::default()
            },
        );
        let item = WalkItem::Versions {
            logical_key: "k".into(),
            folder: folder("k", V2),
            versions: vec![version(V1, 100, 1).stamped(500 * S), version(V2, 200, 2)],
            null_version: None,
        };
        let horizon = 1_000 * DAY;
        let old = explain_version(&view, "b", &item, V1, horizon).expect("V1 listed");
        assert!(!old.is_latest && !old.is_delete_marker);
        assert_eq!(old.noncurrent_since, Some(500 * S));
        assert_eq!(old.num_versions, 2);
        // Only the noncurrent rule: the expiration applies to the latest.
        assert_eq!(
            old.actions,
            [VersionAction {
                rule: "old".into(),
                kind: ActionKind::NoncurrentDays.to_string(),
                due_ns: 500 * S + 3 * DAY,
            }]
        );
        let cur = explain_version(&view, "b", &item, V2, horizon).expect("V2 listed");
        assert!(cur.is_latest);
        assert_eq!(cur.actions.len(), 1);
        assert_eq!(cur.actions[0].rule, "cur");
        assert_eq!(cur.actions[0].due_ns, 200 * S + 2 * DAY);
        assert!(explain_version(&view, "b", &item, "nope", horizon).is_none());
    }
}
