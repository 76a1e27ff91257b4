//! Rule filter predicates (prefix, object size, tags) and reading an entry's
//! object tags from its Extended map (docs/evaluation.md#filter-predicates).

use std::collections::BTreeMap;

use crate::engine::keys;
use crate::lifecycle::FlatRule;
use crate::pb::filer_pb::Entry;

/// True when an object with this key, size and tags is inside the rule's
/// filter. The rule's Status is *not* looked at here (see `evaluate`).
///
/// - prefix: bytewise `starts_with`; an empty prefix matches every key;
/// - size: `size_gt`/`size_lt` are strict bounds, 0 means unset (so
///   "greater than 0" cannot be expressed, as in SeaweedFS);
/// - tags: every rule tag must be present on the object with an identical
///   value; extra object tags are fine.
pub fn matches(rule: &FlatRule, key: &str, size: i64, tags: &BTreeMap<String, String>) -> bool {
    if !key.as_bytes().starts_with(rule.prefix.as_bytes()) {
        return false;
    }
    if rule.size_gt > 0 && size <= rule.size_gt {
        return false;
    }
    if rule.size_lt > 0 && size >= rule.size_lt {
        return false;
    }
    rule.tags
        .iter()
        .all(|(k, v)| tags.get(k).is_some_and(|have| have == v))
}

/// The object tags of a filer entry: every Extended key `X-Amz-Tagging-<k>`
/// gives tag `<k>` with the value's bytes as text. Non-UTF-8 bytes are
/// replaced (lossy) rather than dropped, so such a tag can still never equal
/// a rule's (valid UTF-8) value by accident: the replacement character makes
/// it differ.
pub fn tags_of(entry: &Entry) -> BTreeMap<String, String> {
    entry
        .extended
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(keys::TAG_PREFIX)
                .map(|tag| (tag.to_owned(), String::from_utf8_lossy(v).into_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rule() -> FlatRule {
        FlatRule {
            enabled: true,
            expiration_days: 1,
            ..FlatRule::default()
        }
    }

    #[test]
    fn empty_filter_matches_everything() {
        let r = rule();
        assert!(matches(&r, "", 0, &BTreeMap::new()));
        assert!(matches(&r, "any/key", i64::MAX, &tags(&[("a", "b")])));
    }

    #[test]
    fn prefix_is_bytewise_starts_with() {
        let r = FlatRule {
            prefix: "logs/".into(),
            ..rule()
        };
        assert!(matches(&r, "logs/a", 1, &BTreeMap::new()));
        assert!(matches(&r, "logs/", 1, &BTreeMap::new()));
        assert!(!matches(&r, "logs", 1, &BTreeMap::new()));
        assert!(!matches(&r, "Logs/a", 1, &BTreeMap::new()));
        assert!(!matches(&r, "x/logs/a", 1, &BTreeMap::new()));
        // Multi-byte: a prefix ending inside a UTF-8 sequence still compares bytes.
        let r = FlatRule {
            prefix: "é".into(),
            ..rule()
        };
        assert!(matches(&r, "éa", 1, &BTreeMap::new()));
        assert!(!matches(&r, "e", 1, &BTreeMap::new()));
    }

    #[test]
    fn size_bounds_are_strict_and_zero_is_unset() {
        let r = FlatRule {
            size_gt: 100,
            size_lt: 200,
            ..rule()
        };
        assert!(!matches(&r, "k", 100, &BTreeMap::new()));
        assert!(matches(&r, "k", 101, &BTreeMap::new()));
        assert!(matches(&r, "k", 199, &BTreeMap::new()));
        assert!(!matches(&r, "k", 200, &BTreeMap::new()));
        let only_lt = FlatRule {
            size_lt: 10,
            ..rule()
        };
        assert!(matches(&only_lt, "k", 0, &BTreeMap::new()));
        assert!(!matches(&only_lt, "k", 10, &BTreeMap::new()));
        let only_gt = FlatRule {
            size_gt: 10,
            ..rule()
        };
        assert!(!matches(&only_gt, "k", 0, &BTreeMap::new()));
        assert!(matches(&only_gt, "k", 11, &BTreeMap::new()));
    }

    #[test]
    fn every_rule_tag_must_be_present_with_the_same_value() {
        let r = FlatRule {
            tags: tags(&[("env", "prod"), ("tier", "cold")]),
            ..rule()
        };
        assert!(matches(
            &r,
            "k",
            1,
            &tags(&[("env", "prod"), ("tier", "cold"), ("x", "y")])
        ));
        assert!(!matches(&r, "k", 1, &tags(&[("env", "prod")])));
        assert!(!matches(
            &r,
            "k",
            1,
            &tags(&[("env", "prod"), ("tier", "Cold")])
        ));
        assert!(!matches(&r, "k", 1, &BTreeMap::new()));
    }

    #[test]
    fn all_filter_forms_combine_with_and() {
        let r = FlatRule {
            prefix: "data/".into(),
            tags: tags(&[("env", "prod")]),
            size_gt: 1024,
            ..rule()
        };
        let t = tags(&[("env", "prod")]);
        assert!(matches(&r, "data/x", 2048, &t));
        assert!(!matches(&r, "other/x", 2048, &t));
        assert!(!matches(&r, "data/x", 10, &t));
        assert!(!matches(&r, "data/x", 2048, &BTreeMap::new()));
    }

    #[test]
    fn tags_come_from_tagging_extended_keys_only() {
        let mut e = Entry::default();
        e.extended
            .insert("X-Amz-Tagging-env".into(), b"prod".to_vec());
        e.extended
            .insert("X-Amz-Tagging-".into(), b"empty".to_vec());
        e.extended
            .insert("Seaweed-X-Amz-ETag".into(), b"abc".to_vec());
        e.extended
            .insert("x-amz-tagging-lower".into(), b"no".to_vec());
        assert_eq!(tags_of(&e), tags(&[("env", "prod"), ("", "empty")]));
        assert!(tags_of(&Entry::default()).is_empty());
    }
}
