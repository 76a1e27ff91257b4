//! Fixture tests: the AWS documentation's example configurations must parse and
//! validate cleanly, and each one-defect document under `invalid/` must be
//! rejected with the expected kind and a message naming its rule and element.

use crate::common;

use std::collections::BTreeMap;
use std::fs;

use s3_lifecycled::lifecycle::{FlatRule, ParseError, Severity, ValidationKind, parse, validate};
use time::macros::datetime;

use common::{lifecycle_fixture_dir, lifecycle_fixture_files};

/// `(file name, bytes)` of every fixture document in `sub`, sorted.
fn xml_files(sub: &str) -> Vec<(String, Vec<u8>)> {
    lifecycle_fixture_files(sub)
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&p).expect("readable fixture"))
        })
        .collect()
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn aws_examples_parse_and_validate_without_errors() {
    let files = xml_files("aws");
    assert!(
        files.len() >= 15,
        "expected the AWS example set, found {}",
        files.len()
    );
    for (name, bytes) in files {
        let cfg = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!cfg.rules.is_empty(), "{name}: no rules");
        let findings = validate(&cfg);
        let errors: Vec<String> = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(ToString::to_string)
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        // Warnings exist exactly for the rules that carry transitions.
        let flat = cfg.flatten();
        let warned: Vec<usize> = findings
            .iter()
            .map(|f| {
                assert_eq!(f.kind, ValidationKind::TransitionNotEnforced, "{name}: {f}");
                f.rule.as_ref().unwrap().position
            })
            .collect();
        for rule in &flat {
            assert_eq!(
                rule.has_transition,
                warned.contains(&rule.position),
                "{name}: rule #{}",
                rule.position
            );
        }
    }
}

fn flat_of(name: &str) -> Vec<FlatRule> {
    let bytes = fs::read(lifecycle_fixture_dir("aws").join(name)).unwrap();
    parse(&bytes).unwrap().flatten()
}

#[test]
fn aws_examples_flatten_to_the_expected_rules() {
    let r = &flat_of("01-prefix-filter-transition-expiration.xml")[0];
    assert_eq!(
        (
            r.id.as_str(),
            r.prefix.as_str(),
            r.expiration_days,
            r.has_transition,
            r.enabled
        ),
        ("Transition and Expiration Rule", "tax/", 3650, true, true)
    );
    let r = &flat_of("02-tag-filter.xml")[0];
    assert_eq!(
        (r.prefix.as_str(), &r.tags),
        ("", &tags(&[("key1", "value1")]))
    );
    let r = &flat_of("03-and-prefix-tags.xml")[0];
    assert_eq!(r.prefix, "key-prefix");
    assert_eq!(r.tags, tags(&[("key1", "value1"), ("key2", "value2")]));
    let r = &flat_of("04-size-filter-and.xml")[0];
    assert_eq!(
        (r.prefix.as_str(), r.size_gt, r.size_lt),
        ("Tax/", 500, 64000)
    );
    let r = &flat_of("05-size-filter-direct.xml")[0];
    assert_eq!((r.size_gt, r.size_lt, r.expiration_days), (500, 0, 730));
    let r = &flat_of("06-empty-filter.xml")[0];
    assert_eq!((r.prefix.as_str(), r.tags.len()), ("", 0));
    let rs = flat_of("07-disabled-rule.xml");
    assert_eq!((rs[0].enabled, rs[1].enabled), (true, false));
    assert_eq!(rs[1].position, 2);
    let r = &flat_of("10-versioned-noncurrent-newer.xml")[0];
    assert_eq!(
        (
            r.noncurrent_days,
            r.newer_noncurrent_versions,
            r.has_transition
        ),
        (365, 5, true)
    );
    let r = &flat_of("11-expired-object-delete-marker.xml")[0];
    assert!(r.expired_object_delete_marker);
    assert_eq!((r.expiration_days, r.noncurrent_days), (0, 30));
    let r = &flat_of("12-abort-incomplete-multipart-upload.xml")[0];
    assert_eq!((r.prefix.as_str(), r.abort_mpu_days), ("SomeKeyPrefix/", 7));
    let r = &flat_of("13-legacy-prefix.xml")[0];
    assert_eq!(r.prefix, "logs/");
    let r = &flat_of("14-expiration-date.xml")[0];
    assert_eq!(r.expiration_date, Some(datetime!(2023-01-01 0:00 UTC)));
    let r = &flat_of("16-boto3-empty-prefix.xml")[0];
    assert_eq!((r.prefix.as_str(), r.expiration_days), ("", 1));
}

/// What an invalid fixture must produce.
enum Expect {
    /// Validation errors with exactly these kinds (in order); the first names
    /// this rule (Display form) and element.
    Invalid(
        &'static [ValidationKind],
        Option<&'static str>,
        &'static str,
    ),
    /// A parse error whose message contains these fragments.
    Unreadable(&'static [&'static str]),
}

fn expectations() -> BTreeMap<&'static str, Expect> {
    use Expect::*;
    use ValidationKind as K;
    BTreeMap::from([
        (
            "abort-days-zero.xml",
            Invalid(
                &[K::NonPositiveDays],
                Some(r#"rule "mpu" (#1)"#),
                "AbortIncompleteMultipartUpload/DaysAfterInitiation",
            ),
        ),
        (
            "abort-with-tag-filter.xml",
            Invalid(
                &[K::AbortWithTagOrSizeFilter],
                Some(r#"rule "mpu" (#1)"#),
                "AbortIncompleteMultipartUpload",
            ),
        ),
        (
            "and-duplicate-tag-key.xml",
            Invalid(
                &[K::DuplicateTagKey],
                Some(r#"rule "dupkey" (#1)"#),
                "Filter/And/Tag",
            ),
        ),
        (
            "content-after-root.xml",
            Invalid(&[K::ContentOutsideRoot], None, "LifecycleConfiguration"),
        ),
        (
            "date-not-midnight.xml",
            Invalid(
                &[K::DateNotMidnightUtc],
                Some(r#"rule "date" (#1)"#),
                "Expiration/Date",
            ),
        ),
        (
            "days-and-date.xml",
            Invalid(
                &[K::ConflictingExpiration],
                Some(r#"rule "both" (#1)"#),
                "Expiration",
            ),
        ),
        (
            "days-zero.xml",
            Invalid(
                &[K::NonPositiveDays],
                Some(r#"rule "expire-logs" (#1)"#),
                "Expiration/Days",
            ),
        ),
        (
            "delete-marker-with-days.xml",
            Invalid(
                &[K::ConflictingExpiration],
                Some(r#"rule "dm" (#1)"#),
                "Expiration/ExpiredObjectDeleteMarker",
            ),
        ),
        (
            "duplicate-id.xml",
            Invalid(&[K::DuplicateId], Some(r#"rule "same" (#2)"#), "ID"),
        ),
        (
            "empty-and.xml",
            Invalid(&[K::EmptyAnd], Some(r#"rule "and" (#1)"#), "Filter/And"),
        ),
        (
            "empty-expiration.xml",
            Invalid(
                &[K::EmptyAction, K::NoAction],
                Some(r#"rule "empty" (#1)"#),
                "Expiration",
            ),
        ),
        (
            "filter-prefix-and-tag.xml",
            Invalid(
                &[K::FilterMultipleConditions],
                Some(r#"rule "both" (#1)"#),
                "Filter",
            ),
        ),
        (
            "filter-two-sizes.xml",
            Invalid(
                &[K::FilterMultipleConditions],
                Some(r#"rule "sizes" (#1)"#),
                "Filter",
            ),
        ),
        (
            "filter-two-tags.xml",
            Invalid(
                &[K::FilterMultipleConditions],
                Some(r#"rule "tags" (#1)"#),
                "Filter",
            ),
        ),
        (
            "filter-with-legacy-prefix.xml",
            Invalid(
                &[K::FilterWithLegacyPrefix],
                Some(r#"rule "legacy" (#1)"#),
                "Prefix",
            ),
        ),
        (
            "id-too-long.xml",
            Invalid(&[K::IdTooLong], Some("(#1)"), "ID"),
        ),
        (
            "newer-noncurrent-out-of-range.xml",
            Invalid(
                &[K::NewerNoncurrentVersionsOutOfRange],
                Some(r#"rule "keep" (#1)"#),
                "NoncurrentVersionExpiration/NewerNoncurrentVersions",
            ),
        ),
        (
            "newer-noncurrent-without-days.xml",
            Invalid(
                &[K::NewerNoncurrentVersionsWithoutDays],
                Some(r#"rule "keep" (#1)"#),
                "NoncurrentVersionExpiration/NewerNoncurrentVersions",
            ),
        ),
        (
            "no-action.xml",
            Invalid(&[K::NoAction], Some(r#"rule "idle" (#1)"#), ""),
        ),
        (
            "no-rules.xml",
            Invalid(&[K::NoRules], None, "LifecycleConfiguration"),
        ),
        (
            "noncurrent-days-negative.xml",
            Invalid(
                &[K::NonPositiveDays],
                Some("rule #1"),
                "NoncurrentVersionExpiration/NoncurrentDays",
            ),
        ),
        (
            "repeated-expiration.xml",
            Invalid(
                &[K::RepeatedElement],
                Some(r#"rule "twice" (#1)"#),
                "Expiration",
            ),
        ),
        (
            "size-inverted.xml",
            Invalid(
                &[K::InconsistentObjectSize],
                Some(r#"rule "inv" (#1)"#),
                "Filter/And/ObjectSizeLessThan",
            ),
        ),
        (
            "size-negative.xml",
            Invalid(
                &[K::InvalidObjectSize],
                Some(r#"rule "neg" (#1)"#),
                "Filter/ObjectSizeGreaterThan",
            ),
        ),
        (
            "status-lowercase.xml",
            Invalid(&[K::InvalidStatus], Some(r#"rule "lower" (#1)"#), "Status"),
        ),
        (
            "status-missing.xml",
            Invalid(
                &[K::InvalidStatus],
                Some(r#"rule "nostatus" (#1)"#),
                "Status",
            ),
        ),
        (
            "tag-missing-value.xml",
            Invalid(
                &[K::IncompleteTag],
                Some(r#"rule "tagval" (#1)"#),
                "Filter/Tag",
            ),
        ),
        (
            "transition-only.xml",
            Invalid(&[K::NoAction], Some(r#"rule "glacier" (#1)"#), ""),
        ),
        (
            "parse-bad-bool.xml",
            Unreadable(&[
                r#"rule "dm" (#1)"#,
                "Expiration/ExpiredObjectDeleteMarker",
                "\"yes\"",
                "true or false",
            ]),
        ),
        (
            "parse-bad-date.xml",
            Unreadable(&["rule #1", "Expiration/Date", "01/06/2024", "RFC 3339"]),
        ),
        (
            "parse-days-not-a-number.xml",
            Unreadable(&[
                r#"rule "logs" (#1)"#,
                "Expiration/Days",
                "\"thirty\"",
                "whole number",
            ]),
        ),
        (
            "parse-unclosed.xml",
            Unreadable(&[
                "not well-formed",
                "ends before <LifecycleConfiguration> is closed",
            ]),
        ),
        (
            "parse-wrong-root.xml",
            Unreadable(&[
                "<BucketLifecycleConfiguration>",
                "expected <LifecycleConfiguration>",
            ]),
        ),
    ])
}

#[test]
fn invalid_fixtures_are_rejected_with_the_expected_kind() {
    let expected = expectations();
    let files = xml_files("invalid");
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let listed: Vec<&str> = expected.keys().copied().collect();
    assert_eq!(
        names, listed,
        "every fixture needs an expectation and vice versa"
    );

    for (name, bytes) in &files {
        match &expected[name.as_str()] {
            Expect::Unreadable(fragments) => {
                let err: ParseError = parse(bytes).expect_err(name);
                let msg = err.to_string();
                for fragment in *fragments {
                    assert!(msg.contains(fragment), "{name}: {msg:?} lacks {fragment:?}");
                }
            }
            Expect::Invalid(kinds, rule, element) => {
                let cfg = parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                let errors: Vec<_> = validate(&cfg)
                    .into_iter()
                    .filter(|f| f.severity == Severity::Error)
                    .collect();
                let got: Vec<ValidationKind> = errors.iter().map(|e| e.kind).collect();
                assert_eq!(&got, kinds, "{name}: {errors:#?}");
                let first = &errors[0];
                let msg = first.to_string();
                assert_eq!(first.element(), *element, "{name}");
                match rule {
                    Some(rule) => {
                        assert!(
                            msg.starts_with("rule ") && msg.contains(rule),
                            "{name}: {msg:?} does not name {rule}"
                        );
                        let pos = first.rule.as_ref().unwrap().position;
                        assert!(first.path.starts_with(&format!("Rule[{pos}]")), "{name}");
                    }
                    None => assert!(first.rule.is_none(), "{name}"),
                }
                if !element.is_empty() {
                    assert!(msg.contains(&format!("{element}: ")), "{name}: {msg:?}");
                }
                // The part after the element says what is allowed or how to fix it.
                assert!(
                    msg.len() > rule.map_or(0, str::len) + element.len() + 20,
                    "{name}: {msg:?}"
                );
            }
        }
    }
}
