//! Unit tests for parsing, flattening and validation of lifecycle documents.

use std::collections::BTreeMap;

use time::macros::datetime;

use super::*;

const NS: &str = r#"xmlns="http://s3.amazonaws.com/doc/2006-03-01/""#;

/// Wraps rule bodies in a namespaced document.
fn doc(rules: &[&str]) -> String {
    let mut s = format!(r#"<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration {NS}>"#);
    for r in rules {
        s.push_str("<Rule>");
        s.push_str(r);
        s.push_str("</Rule>");
    }
    s.push_str("</LifecycleConfiguration>");
    s
}

fn flat_one(rule: &str) -> FlatRule {
    let cfg = parse(doc(&[rule]).as_bytes()).expect("parses");
    let mut flat = cfg.flatten();
    assert_eq!(flat.len(), 1);
    flat.remove(0)
}

fn kinds(rule_bodies: &[&str]) -> Vec<ValidationKind> {
    let cfg = parse(doc(rule_bodies).as_bytes()).expect("parses");
    validate(&cfg).into_iter().map(|e| e.kind).collect()
}

fn errors_of(rule: &str) -> Vec<ValidationError> {
    let cfg = parse(doc(&[rule]).as_bytes()).expect("parses");
    validate(&cfg)
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const OK: &str = "<Status>Enabled</Status>";

// ---------------------------------------------------------------- reading

#[test]
fn namespace_and_declaration_are_optional() {
    let bare = "<LifecycleConfiguration><Rule><Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule></LifecycleConfiguration>";
    let prefixed = r#"<s3:LifecycleConfiguration xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/"><s3:Rule><s3:Status>Enabled</s3:Status><s3:Expiration><s3:Days>3</s3:Days></s3:Expiration></s3:Rule></s3:LifecycleConfiguration>"#;
    let a = parse(bare.as_bytes()).unwrap().flatten();
    let b = parse(prefixed.as_bytes()).unwrap().flatten();
    assert_eq!(a, b);
    assert_eq!(a[0].expiration_days, 3);
    assert!(a[0].enabled);
}

#[test]
fn utf8_bom_comments_and_doctype_are_ignored() {
    let s = "\u{FEFF}<?xml version=\"1.0\"?><!-- c --><!DOCTYPE x><LifecycleConfiguration><!-- in --><Rule><ID>a<!--x-->b</ID></Rule></LifecycleConfiguration>";
    let cfg = parse(s.as_bytes()).unwrap();
    assert_eq!(cfg.rules[0].id.as_deref(), Some("ab"));
    assert!(!cfg.content_outside_root);
}

#[test]
fn entities_cdata_and_line_ends_decode_like_go() {
    let s = "<LifecycleConfiguration><Rule><Filter><Prefix>a&amp;b&lt;&#x41;&#66;<![CDATA[<c>]]>\r\nd</Prefix></Filter></Rule></LifecycleConfiguration>";
    let f = parse(s.as_bytes()).unwrap().flatten();
    assert_eq!(f[0].prefix, "a&b<AB<c>\nd");
}

#[test]
fn strings_are_verbatim_and_unknown_elements_ignored() {
    let f = flat_one(
        "<ID> spaced </ID><Unknown><Prefix>no</Prefix></Unknown><Filter><Prefix> p/ </Prefix><Bogus/></Filter><Status>Enabled</Status>",
    );
    assert_eq!(f.id, " spaced ");
    assert_eq!(f.prefix, " p/ ");
}

#[test]
fn nested_child_text_is_not_part_of_a_value() {
    // Go reads only the character data directly inside a scalar element.
    let f = flat_one("<Expiration><Days>1<x>9</x>0</Days></Expiration>");
    assert_eq!(f.expiration_days, 10);
}

#[test]
fn malformed_documents_are_parse_errors() {
    for bad in [
        "",
        "   ",
        "<LifecycleConfiguration>",
        "<LifecycleConfiguration><Rule></LifecycleConfiguration>",
        "<LifecycleConfiguration><Rule></Rul></LifecycleConfiguration>",
        "<LifecycleConfiguration a=b></LifecycleConfiguration>",
        r#"<LifecycleConfiguration a="1" a="2"></LifecycleConfiguration>"#,
        "<LifecycleConfiguration>&nbsp;</LifecycleConfiguration>",
        "<LifecycleConfiguration>&#0;</LifecycleConfiguration>",
        "<LifecycleConfiguration>\u{1}</LifecycleConfiguration>",
        "<LifecycleConfiguration><!-- a -- b --></LifecycleConfiguration>",
    ] {
        let err = parse(bad.as_bytes()).expect_err(bad);
        assert!(
            matches!(err, ParseError::Malformed { .. } | ParseError::NoRoot),
            "{bad:?} gave {err:?}"
        );
    }
}

#[test]
fn invalid_utf8_is_reported_with_its_offset() {
    let err = parse(b"<LifecycleConfiguration>\xff</LifecycleConfiguration>").unwrap_err();
    assert_eq!(err, ParseError::NotUtf8 { offset: 24 });
    assert!(err.to_string().contains("UTF-8"));
}

#[test]
fn wrong_root_names_what_was_found() {
    let err = parse(b"<BucketLifecycleConfiguration/>").unwrap_err();
    assert_eq!(
        err.to_string(),
        "root element is <BucketLifecycleConfiguration>; expected <LifecycleConfiguration>"
    );
}

#[test]
fn documents_over_one_mib_are_refused() {
    let mut big = doc(&[OK]).into_bytes();
    big.resize(MAX_DOCUMENT_BYTES + 1, b' ');
    assert_eq!(
        parse(&big).unwrap_err(),
        ParseError::TooLarge {
            size: MAX_DOCUMENT_BYTES + 1
        }
    );
    // Exactly 1 MiB is still read.
    big.truncate(MAX_DOCUMENT_BYTES);
    assert!(parse(&big).is_ok());
}

#[test]
fn deep_nesting_within_the_limit_does_not_overflow() {
    let depth = 100_000;
    let mut s = String::from("<LifecycleConfiguration><Rule>");
    s.push_str(&"<a>".repeat(depth));
    s.push_str(&"</a>".repeat(depth));
    s.push_str("</Rule></LifecycleConfiguration>");
    assert_eq!(parse(s.as_bytes()).unwrap().rules.len(), 1);
}

#[test]
fn content_after_the_root_is_ignored_but_recorded() {
    // Go's decoder stops at the root's end tag, so SeaweedFS accepts these.
    for tail in ["<junk", "trailing", "<Other/>"] {
        let s = format!("{}{tail}", doc(&[OK]));
        let cfg = parse(s.as_bytes()).expect(tail);
        assert!(cfg.content_outside_root, "{tail}");
        assert!(
            validate(&cfg)
                .iter()
                .any(|e| e.kind == ValidationKind::ContentOutsideRoot)
        );
    }
    let clean = format!("{}\n<!-- done -->\n", doc(&[OK]));
    assert!(!parse(clean.as_bytes()).unwrap().content_outside_root);
}

#[test]
fn empty_root_has_no_rules() {
    let cfg = parse(b"<LifecycleConfiguration/>").unwrap();
    assert!(cfg.rules.is_empty());
    assert!(cfg.flatten().is_empty());
}

// ---------------------------------------------------------------- values

#[test]
fn integers_follow_go_rules() {
    assert_eq!(model::parse_go_int(""), Some(0));
    assert_eq!(model::parse_go_int(" 7\n"), Some(7));
    assert_eq!(model::parse_go_int("+7"), Some(7));
    assert_eq!(model::parse_go_int("-7"), Some(-7));
    assert_eq!(model::parse_go_int("   "), None);
    assert_eq!(model::parse_go_int("1_000"), None);
    assert_eq!(model::parse_go_int("3.5"), None);
    assert_eq!(model::parse_go_int("9223372036854775808"), None);
}

#[test]
fn booleans_accept_exactly_go_parsebool_spellings() {
    for t in ["1", "t", "T", "TRUE", "true", "True", " true "] {
        assert_eq!(model::parse_go_bool(t), Some(true), "{t}");
    }
    for f in ["", "0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(model::parse_go_bool(f), Some(false), "{f}");
    }
    for bad in ["yes", "tRUE", "2", " "] {
        assert_eq!(model::parse_go_bool(bad), None, "{bad}");
    }
}

#[test]
fn dates_accept_rfc3339_and_bare_iso_dates() {
    assert_eq!(
        model::parse_date("2024-06-01T00:00:00Z"),
        Some(datetime!(2024-06-01 0:00 UTC))
    );
    assert_eq!(
        model::parse_date("2024-06-01T02:00:00.5+02:00"),
        Some(datetime!(2024-06-01 2:00:00.5 +2))
    );
    assert_eq!(
        model::parse_date("2024-06-01"),
        Some(datetime!(2024-06-01 0:00 UTC))
    );
    for bad in [
        "",
        "2024-06-01T00:00:00",
        "June 1",
        "2024-13-01",
        "2024-06-01T25:00:00Z",
    ] {
        assert_eq!(model::parse_date(bad), None, "{bad}");
    }
}

#[test]
fn bad_value_errors_name_rule_element_and_what_is_allowed() {
    let err = parse(doc(&["<ID>logs</ID><Expiration><Days>ten</Days></Expiration>"]).as_bytes())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"rule "logs" (#1): Expiration/Days: "ten" is not valid; expected a whole number such as 30 (an empty element means 0)"#
    );
    // Without an ID the rule is named by position; the ID may come after.
    let err = parse(
        doc(&[
            OK,
            "<Expiration><ExpiredObjectDeleteMarker>yes</ExpiredObjectDeleteMarker></Expiration>",
        ])
        .as_bytes(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("rule #2: Expiration/ExpiredObjectDeleteMarker: \"yes\"")
    );
    let err = parse(doc(&["<Expiration><Date>soon</Date></Expiration><ID>x</ID>"]).as_bytes())
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with(r#"rule "x" (#1): Expiration/Date"#)
    );
    assert!(err.to_string().contains("2024-06-01T00:00:00Z"));
}

#[test]
fn bad_values_anywhere_in_the_schema_fail_like_go() {
    for (body, element) in [
        (
            "<Filter><ObjectSizeGreaterThan>x</ObjectSizeGreaterThan></Filter>",
            "Filter/ObjectSizeGreaterThan",
        ),
        (
            "<Filter><And><ObjectSizeLessThan>1e3</ObjectSizeLessThan></And></Filter>",
            "Filter/And/ObjectSizeLessThan",
        ),
        (
            "<NoncurrentVersionExpiration><NoncurrentDays>-</NoncurrentDays></NoncurrentVersionExpiration>",
            "NoncurrentVersionExpiration/NoncurrentDays",
        ),
        (
            "<NoncurrentVersionExpiration><NewerNoncurrentVersions>a</NewerNoncurrentVersions></NoncurrentVersionExpiration>",
            "NoncurrentVersionExpiration/NewerNoncurrentVersions",
        ),
        (
            "<AbortIncompleteMultipartUpload><DaysAfterInitiation> </DaysAfterInitiation></AbortIncompleteMultipartUpload>",
            "AbortIncompleteMultipartUpload/DaysAfterInitiation",
        ),
        ("<Transition><Date>x</Date></Transition>", "Transition/Date"),
        ("<Transition><Days>x</Days></Transition>", "Transition/Days"),
        (
            "<NoncurrentVersionTransition><NoncurrentDays>x</NoncurrentDays></NoncurrentVersionTransition>",
            "NoncurrentVersionTransition/NoncurrentDays",
        ),
        // The first occurrence is bad even though a later one is fine.
        (
            "<Expiration><Days>x</Days><Days>1</Days></Expiration>",
            "Expiration/Days",
        ),
    ] {
        match parse(doc(&[body]).as_bytes()) {
            Err(ParseError::BadValue {
                element: e, rule, ..
            }) => {
                assert_eq!(e, element);
                assert_eq!(rule.position, 1);
            }
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn every_element_of_the_schema_is_modelled() {
    let cfg = parse(
        doc(&[
            "<ID>all</ID><Status>Disabled</Status>\
             <Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag>\
             <ObjectSizeGreaterThan>1</ObjectSizeGreaterThan><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter>\
             <Expiration><Days>3</Days><Date>2024-01-01</Date><ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker></Expiration>\
             <NoncurrentVersionExpiration><NoncurrentDays>4</NoncurrentDays><NewerNoncurrentVersions>5</NewerNoncurrentVersions></NoncurrentVersionExpiration>\
             <AbortIncompleteMultipartUpload><DaysAfterInitiation>6</DaysAfterInitiation></AbortIncompleteMultipartUpload>\
             <Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>\
             <Transition><Date>2025-01-01T00:00:00Z</Date><StorageClass>DEEP_ARCHIVE</StorageClass></Transition>\
             <NoncurrentVersionTransition><NoncurrentDays>7</NoncurrentDays><StorageClass>STANDARD_IA</StorageClass></NoncurrentVersionTransition>",
            "<Prefix>legacy/</Prefix><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>",
        ])
        .as_bytes(),
    )
    .unwrap();
    let r = &cfg.rules[0];
    assert_eq!(r.position, 1);
    assert_eq!(r.id.as_deref(), Some("all"));
    assert_eq!(r.status.as_deref(), Some("Disabled"));
    let and = r.filter.as_ref().unwrap().and.as_ref().unwrap();
    assert_eq!(and.prefix.as_deref(), Some("p/"));
    assert_eq!(
        and.tags,
        vec![Tag {
            key: Some("k".into()),
            value: Some("v".into())
        }]
    );
    assert_eq!(
        (and.object_size_greater_than, and.object_size_less_than),
        (Some(1), Some(9))
    );
    let exp = r.expiration.as_ref().unwrap();
    assert_eq!(exp.days, Some(3));
    assert_eq!(exp.date, Some(datetime!(2024-01-01 0:00 UTC)));
    assert_eq!(exp.expired_object_delete_marker, Some(false));
    let nve = r.noncurrent_version_expiration.as_ref().unwrap();
    assert_eq!(
        (nve.noncurrent_days, nve.newer_noncurrent_versions),
        (Some(4), Some(5))
    );
    assert_eq!(
        r.abort_incomplete_multipart_upload
            .as_ref()
            .unwrap()
            .days_after_initiation,
        Some(6)
    );
    assert_eq!(r.transitions.len(), 2);
    assert_eq!(r.transitions[0].days, Some(30));
    assert_eq!(
        r.transitions[1].storage_class.as_deref(),
        Some("DEEP_ARCHIVE")
    );
    assert_eq!(r.noncurrent_version_transitions[0].noncurrent_days, Some(7));
    assert!(r.repeated_elements.is_empty());
    let legacy = &cfg.rules[1];
    assert_eq!(legacy.position, 2);
    assert_eq!(legacy.prefix.as_deref(), Some("legacy/"));
    assert!(legacy.filter.is_none());
}

#[test]
fn presence_is_kept_for_empty_elements() {
    let cfg = parse(
        doc(&[
            "<Filter><Prefix/></Filter><Expiration><Days></Days></Expiration>",
            "<Filter/>",
        ])
        .as_bytes(),
    )
    .unwrap();
    let f = cfg.rules[0].filter.as_ref().unwrap();
    assert_eq!(f.prefix.as_deref(), Some(""));
    assert_eq!(cfg.rules[0].expiration.as_ref().unwrap().days, Some(0));
    assert_eq!(cfg.rules[1].filter, Some(Filter::default()));
    assert_eq!(cfg.rules[1].prefix, None);
}

// ---------------------------------------------------------------- flattening

#[test]
fn no_filter_matches_everything() {
    let f = flat_one("<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>");
    assert_eq!(f.prefix, "");
    assert!(f.tags.is_empty());
    assert_eq!((f.size_gt, f.size_lt), (0, 0));
    assert_eq!(f.position, 1);
}

#[test]
fn filter_prefix_form() {
    let f = flat_one("<Filter><Prefix>logs/</Prefix></Filter>");
    assert_eq!(f.prefix, "logs/");
}

#[test]
fn filter_tag_form_drops_filter_prefix() {
    let f =
        flat_one("<Filter><Prefix>logs/</Prefix><Tag><Key>a</Key><Value>1</Value></Tag></Filter>");
    assert_eq!(f.prefix, "");
    assert_eq!(f.tags, tags(&[("a", "1")]));
}

#[test]
fn empty_tag_and_prefix_without_and_drops_the_prefix() {
    // docs/lifecycle-config.md#canonical-form: <Filter><Tag/><Prefix/></Filter> is
    // a tag with empty key and value; the prefix (even a later one) is dropped.
    let f = flat_one("<Filter><Tag/><Prefix>x/</Prefix></Filter>");
    assert_eq!(f.prefix, "");
    assert_eq!(f.tags, tags(&[("", "")]));
    let f = flat_one("<Filter><Tag/><Prefix/></Filter>");
    assert_eq!(f.tags, tags(&[("", "")]));
}

#[test]
fn several_tags_without_and_merge_into_the_last() {
    let f = flat_one(
        "<Filter><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>2</Value></Tag></Filter>",
    );
    assert_eq!(f.tags, tags(&[("b", "2")]));
    // Go decodes both into one struct: a later Tag without Value keeps the
    // earlier value.
    let f =
        flat_one("<Filter><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key></Tag></Filter>");
    assert_eq!(f.tags, tags(&[("b", "1")]));
}

#[test]
fn and_wins_and_filter_level_sizes_are_ignored() {
    let f = flat_one(
        "<Filter><Prefix>outer/</Prefix><ObjectSizeGreaterThan>5</ObjectSizeGreaterThan>\
         <And><Prefix>inner/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value>w</Value></Tag>\
         <ObjectSizeLessThan>100</ObjectSizeLessThan></And><ObjectSizeLessThan>7</ObjectSizeLessThan></Filter>",
    );
    assert_eq!(f.prefix, "inner/");
    assert_eq!(f.tags, tags(&[("k", "v"), ("j", "w")]));
    assert_eq!((f.size_gt, f.size_lt), (0, 100));
}

#[test]
fn and_duplicate_tag_keys_last_wins() {
    let f = flat_one(
        "<Filter><And><Tag><Key>k</Key><Value>1</Value></Tag><Tag><Key>k</Key><Value>2</Value></Tag></And></Filter>",
    );
    assert_eq!(f.tags, tags(&[("k", "2")]));
}

#[test]
fn sizes_directly_in_filter() {
    let f = flat_one(
        "<Filter><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>20</ObjectSizeLessThan></Filter>",
    );
    assert_eq!((f.size_gt, f.size_lt), (10, 20));
    let f = flat_one(
        "<Filter><Tag><Key>a</Key><Value>b</Value></Tag><ObjectSizeGreaterThan>3</ObjectSizeGreaterThan></Filter>",
    );
    assert_eq!((f.size_gt, f.tags.len()), (3, 1));
}

#[test]
fn empty_filter_prefix_falls_back_to_legacy_prefix() {
    let f = flat_one("<Filter><Prefix/></Filter><Prefix>x</Prefix>");
    assert_eq!(f.prefix, "x");
    let f = flat_one("<Filter><And><Prefix></Prefix></And></Filter><Prefix>y</Prefix>");
    assert_eq!(f.prefix, "y");
    let f = flat_one("<Prefix>legacy/</Prefix>");
    assert_eq!(f.prefix, "legacy/");
    // A non-empty filter prefix wins over the legacy one.
    let f = flat_one("<Filter><Prefix>f/</Prefix></Filter><Prefix>x</Prefix>");
    assert_eq!(f.prefix, "f/");
}

#[test]
fn repeated_filters_merge_like_go() {
    let f = flat_one(
        "<Filter><Prefix>a/</Prefix></Filter><Filter><ObjectSizeGreaterThan>4</ObjectSizeGreaterThan></Filter>",
    );
    assert_eq!((f.prefix.as_str(), f.size_gt), ("a/", 4));
    let f = flat_one(
        "<Filter><And><Tag><Key>a</Key><Value>1</Value></Tag></And></Filter>\
         <Filter><And><Prefix>p</Prefix><Tag><Key>b</Key><Value>2</Value></Tag></And></Filter>",
    );
    assert_eq!(f.prefix, "p");
    assert_eq!(f.tags, tags(&[("a", "1"), ("b", "2")]));
}

#[test]
fn repeated_scalar_elements_last_wins() {
    let f = flat_one(
        "<ID>one</ID><ID>two</ID><Status>Disabled</Status><Status>Enabled</Status>\
         <Expiration><Days>5</Days></Expiration><Expiration><Date>2024-06-01T00:00:00Z</Date></Expiration>",
    );
    assert_eq!(f.id, "two");
    assert!(f.enabled);
    // The whole Expiration element is replaced, Days included.
    assert_eq!(f.expiration_days, 0);
    assert_eq!(f.expiration_date, Some(datetime!(2024-06-01 0:00 UTC)));
}

#[test]
fn status_must_be_exactly_enabled() {
    for s in ["enabled", "ENABLED", " Enabled", "Enabled ", "Disabled", ""] {
        let f = flat_one(&format!("<Status>{s}</Status>"));
        assert!(!f.enabled, "{s:?}");
    }
    assert!(!flat_one("<Expiration><Days>1</Days></Expiration>").enabled);
    assert!(flat_one(OK).enabled);
}

#[test]
fn negative_numbers_are_carried_verbatim_for_hash_fidelity() {
    // Go copies and hashes the decoded value; consumers treat <= 0 as unset.
    let f = flat_one(
        "<Filter><ObjectSizeGreaterThan>-1</ObjectSizeGreaterThan></Filter><Expiration><Days>-2</Days></Expiration>\
         <NoncurrentVersionExpiration><NoncurrentDays>-3</NoncurrentDays><NewerNoncurrentVersions>-4</NewerNoncurrentVersions></NoncurrentVersionExpiration>\
         <AbortIncompleteMultipartUpload><DaysAfterInitiation>-5</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
    );
    assert_eq!(
        (
            f.size_gt,
            f.expiration_days,
            f.noncurrent_days,
            f.newer_noncurrent_versions,
            f.abort_mpu_days
        ),
        (-1, -2, -3, -4, -5)
    );
}

#[test]
fn date_carried_only_when_set_and_not_go_zero() {
    assert_eq!(
        flat_one("<Expiration><Days>1</Days></Expiration>").expiration_date,
        None
    );
    let d =
        flat_one("<Expiration><Date>2024-06-01T02:00:00+02:00</Date></Expiration>").expiration_date;
    assert_eq!(d, Some(datetime!(2024-06-01 0:00 UTC)));
    assert_eq!(
        flat_one("<Expiration><Date>0001-01-01T00:00:00Z</Date></Expiration>").expiration_date,
        None
    );
    // Go's IsZero compares the instant, not the written offset.
    assert_eq!(
        flat_one("<Expiration><Date>0001-01-01T01:00:00+01:00</Date></Expiration>").expiration_date,
        None
    );
    assert!(
        flat_one("<Expiration><Date>0001-01-01T00:00:01Z</Date></Expiration>")
            .expiration_date
            .is_some()
    );
}

#[test]
fn actions_copied_only_from_present_elements() {
    let f = flat_one(
        "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>\
         <NoncurrentVersionExpiration><NoncurrentDays>30</NoncurrentDays><NewerNoncurrentVersions>3</NewerNoncurrentVersions></NoncurrentVersionExpiration>\
         <AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
    );
    assert!(f.expired_object_delete_marker);
    assert_eq!(
        (
            f.noncurrent_days,
            f.newer_noncurrent_versions,
            f.abort_mpu_days
        ),
        (30, 3, 7)
    );
    assert_eq!(f.expiration_days, 0);
    assert!(!f.has_transition);
}

#[test]
fn either_transition_sets_has_transition() {
    assert!(flat_one("<Transition><Days>1</Days></Transition>").has_transition);
    assert!(flat_one("<NoncurrentVersionTransition/>").has_transition);
}

#[test]
fn positions_count_rules_only() {
    let cfg = parse(
        "<LifecycleConfiguration><Other/><Rule><ID>a</ID></Rule><Other/><Rule><ID>b</ID></Rule></LifecycleConfiguration>"
            .as_bytes(),
    )
    .unwrap();
    let f = cfg.flatten();
    assert_eq!((f[0].position, f[1].position), (1, 2));
    assert_eq!(f[1].id, "b");
}

#[test]
fn rule_hash_vector_rule_shapes_flatten_to_the_hashed_fields() {
    // bkt2's And rule from docs/rule-hash.md#test-vectors (rule hash 504eafc6ec51ff69).
    let f = flat_one(
        "<Filter><And><Prefix>tmp/</Prefix><Tag><Key>env</Key><Value>dev</Value></Tag>\
         <ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter><Expiration><Days>7</Days></Expiration>",
    );
    let want = FlatRule {
        position: 1,
        prefix: "tmp/".into(),
        tags: tags(&[("env", "dev")]),
        size_gt: 100,
        expiration_days: 7,
        ..FlatRule::default()
    };
    assert_eq!(f, want);
}

// ---------------------------------------------------------------- validation

const EXP: &str = "<Expiration><Days>1</Days></Expiration>";

fn rule(parts: &[&str]) -> String {
    parts.concat()
}

#[test]
fn a_plain_valid_rule_has_no_findings() {
    assert!(
        kinds(&[&rule(&[
            "<ID>a</ID>",
            OK,
            "<Filter><Prefix>p/</Prefix></Filter>",
            EXP
        ])])
        .is_empty()
    );
}

#[test]
fn display_names_rule_element_and_value() {
    let errs = errors_of(&rule(&[
        "<ID>logs</ID>",
        OK,
        "<Expiration><Days>0</Days></Expiration>",
    ]));
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].to_string(),
        r#"rule "logs" (#1): Expiration/Days: must be a positive integer, got 0"#
    );
    assert_eq!(errs[0].path, "Rule[1]/Expiration/Days");
    assert_eq!(errs[0].element(), "Expiration/Days");
    assert_eq!(errs[0].severity, Severity::Error);
    assert_eq!(errs[0].kind, ValidationKind::NonPositiveDays);
}

#[test]
fn document_level_checks() {
    assert_eq!(kinds(&[]), vec![ValidationKind::NoRules]);
    let body = rule(&[OK, EXP]);
    let many: Vec<&str> = vec![body.as_str(); MAX_RULES + 1];
    assert_eq!(kinds(&many), vec![ValidationKind::TooManyRules]);
    let max: Vec<&str> = vec![body.as_str(); MAX_RULES];
    assert!(kinds(&max).is_empty());
}

#[test]
fn id_length_and_uniqueness() {
    let long = format!("<ID>{}</ID>", "é".repeat(MAX_ID_CHARS + 1));
    assert_eq!(
        kinds(&[&rule(&[&long, OK, EXP])]),
        vec![ValidationKind::IdTooLong]
    );
    let ok = format!("<ID>{}</ID>", "é".repeat(MAX_ID_CHARS));
    assert!(kinds(&[&rule(&[&ok, OK, EXP])]).is_empty());
    let a = rule(&["<ID>a</ID>", OK, EXP]);
    let cfg = parse(doc(&[&a, &a]).as_bytes()).unwrap();
    let errs = validate(&cfg);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].kind, ValidationKind::DuplicateId);
    assert_eq!(errs[0].rule.as_ref().unwrap().position, 2);
    assert!(errs[0].to_string().contains("rule #1"));
    // Rules without IDs are not duplicates of each other.
    let anon = rule(&[OK, EXP]);
    assert!(kinds(&[&anon, &anon]).is_empty());
}

#[test]
fn status_values() {
    assert_eq!(
        kinds(&[&rule(&["<Status>enabled</Status>", EXP])]),
        vec![ValidationKind::InvalidStatus]
    );
    assert_eq!(kinds(&[EXP]), vec![ValidationKind::InvalidStatus]);
    assert!(kinds(&[&rule(&["<Status>Disabled</Status>", EXP])]).is_empty());
    let msg = errors_of(&rule(&["<Status>enabled</Status>", EXP]))[0].to_string();
    assert!(
        msg.contains("\"enabled\"") && msg.contains("Enabled or Disabled"),
        "{msg}"
    );
}

#[test]
fn filter_and_legacy_prefix_together() {
    assert_eq!(
        kinds(&[&rule(&[OK, "<Filter/><Prefix>x</Prefix>", EXP])]),
        vec![ValidationKind::FilterWithLegacyPrefix]
    );
    assert!(kinds(&[&rule(&[OK, "<Prefix>x</Prefix>", EXP])]).is_empty());
}

#[test]
fn filter_must_hold_one_form() {
    for f in [
        "<Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>",
        "<Filter><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value>v</Value></Tag></Filter>",
        "<Filter><Prefix>a</Prefix><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan></Filter>",
        "<Filter><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan><ObjectSizeLessThan>9</ObjectSizeLessThan></Filter>",
        "<Filter><And><Prefix>a</Prefix></And><Prefix>b</Prefix></Filter>",
        "<Filter><And><Prefix>a</Prefix></And><ObjectSizeLessThan>9</ObjectSizeLessThan></Filter>",
    ] {
        assert_eq!(
            kinds(&[&rule(&[OK, f, EXP])]),
            vec![ValidationKind::FilterMultipleConditions],
            "{f}"
        );
    }
    for f in [
        "<Filter/>",
        "<Filter><Prefix/></Filter>",
        "<Filter><Tag><Key>k</Key><Value></Value></Tag></Filter>",
        "<Filter><ObjectSizeLessThan>9</ObjectSizeLessThan></Filter>",
        "<Filter><And><Prefix>a</Prefix><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter>",
    ] {
        assert!(kinds(&[&rule(&[OK, f, EXP])]).is_empty(), "{f}");
    }
}

#[test]
fn and_checks() {
    assert_eq!(
        kinds(&[&rule(&[OK, "<Filter><And/></Filter>", EXP])]),
        vec![ValidationKind::EmptyAnd]
    );
    assert_eq!(
        kinds(&[&rule(&[
            OK,
            "<Filter><And><Tag><Key>k</Key><Value>1</Value></Tag><Tag><Key>k</Key><Value>2</Value></Tag></And></Filter>",
            EXP
        ])]),
        vec![ValidationKind::DuplicateTagKey]
    );
    assert_eq!(
        kinds(&[&rule(&[
            OK,
            "<Filter><And><Tag><Value>1</Value></Tag></And></Filter>",
            EXP
        ])]),
        vec![ValidationKind::IncompleteTag]
    );
    let msg = errors_of(&rule(&[OK, "<Filter><Tag/></Filter>", EXP]))[0].to_string();
    assert_eq!(
        msg,
        "rule #1: Filter/Tag: has no <Key> or <Value>; a tag needs both <Key> and <Value>"
    );
}

#[test]
fn size_checks() {
    let case = |f: &str| kinds(&[&rule(&[OK, f, EXP])]);
    assert_eq!(
        case("<Filter><ObjectSizeGreaterThan>-1</ObjectSizeGreaterThan></Filter>"),
        vec![ValidationKind::InvalidObjectSize]
    );
    assert_eq!(
        case("<Filter><ObjectSizeLessThan>0</ObjectSizeLessThan></Filter>"),
        vec![ValidationKind::InvalidObjectSize]
    );
    assert_eq!(
        case(
            "<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter>"
        ),
        vec![ValidationKind::InconsistentObjectSize]
    );
    assert!(case("<Filter><And><ObjectSizeGreaterThan>0</ObjectSizeGreaterThan><ObjectSizeLessThan>1</ObjectSizeLessThan></And></Filter>").is_empty());
}

#[test]
fn day_counts_must_be_positive() {
    for (body, element) in [
        ("<Expiration><Days>0</Days></Expiration>", "Expiration/Days"),
        (
            "<Expiration><Days>-1</Days></Expiration>",
            "Expiration/Days",
        ),
        (
            "<NoncurrentVersionExpiration><NoncurrentDays>0</NoncurrentDays></NoncurrentVersionExpiration>",
            "NoncurrentVersionExpiration/NoncurrentDays",
        ),
        (
            "<AbortIncompleteMultipartUpload><DaysAfterInitiation/></AbortIncompleteMultipartUpload>",
            "AbortIncompleteMultipartUpload/DaysAfterInitiation",
        ),
    ] {
        let errs = errors_of(&rule(&[OK, body]));
        assert_eq!(errs.len(), 1, "{body}: {errs:?}");
        assert_eq!(errs[0].kind, ValidationKind::NonPositiveDays);
        assert_eq!(errs[0].element(), element);
    }
}

#[test]
fn newer_noncurrent_versions_checks() {
    let nve = |inner: &str| {
        kinds(&[&rule(&[
            OK,
            "<NoncurrentVersionExpiration>",
            inner,
            "</NoncurrentVersionExpiration>",
        ])])
    };
    assert!(nve("<NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>100</NewerNoncurrentVersions>").is_empty());
    assert_eq!(
        nve(
            "<NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>101</NewerNoncurrentVersions>"
        ),
        vec![ValidationKind::NewerNoncurrentVersionsOutOfRange]
    );
    assert_eq!(
        nve(
            "<NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>0</NewerNoncurrentVersions>"
        ),
        vec![ValidationKind::NewerNoncurrentVersionsOutOfRange]
    );
    assert_eq!(
        nve("<NewerNoncurrentVersions>3</NewerNoncurrentVersions>"),
        vec![ValidationKind::NewerNoncurrentVersionsWithoutDays]
    );
    assert_eq!(
        nve(""),
        vec![ValidationKind::EmptyAction, ValidationKind::NoAction]
    );
}

#[test]
fn expiration_checks() {
    let exp = |inner: &str| kinds(&[&rule(&[OK, "<Expiration>", inner, "</Expiration>"])]);
    assert!(exp("<Date>2024-06-01T00:00:00Z</Date>").is_empty());
    assert!(exp("<Date>2024-06-01</Date>").is_empty());
    assert!(exp("<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>").is_empty());
    assert!(
        exp("<Days>1</Days><ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker>")
            .is_empty()
    );
    assert_eq!(
        exp("<Date>2024-06-01T12:00:00Z</Date>"),
        vec![ValidationKind::DateNotMidnightUtc]
    );
    assert_eq!(
        exp("<Date>2024-06-01T00:00:00+02:00</Date>"),
        vec![ValidationKind::DateNotMidnightUtc]
    );
    assert_eq!(
        exp("<Days>1</Days><Date>2024-06-01T00:00:00Z</Date>"),
        vec![ValidationKind::ConflictingExpiration]
    );
    assert_eq!(
        exp("<Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>"),
        vec![ValidationKind::ConflictingExpiration]
    );
    assert_eq!(
        exp(""),
        vec![ValidationKind::EmptyAction, ValidationKind::NoAction]
    );
    let msg = errors_of(&rule(&[
        OK,
        "<Expiration><Date>2024-06-01T12:00:00Z</Date></Expiration>",
    ]))[0]
        .to_string();
    assert!(msg.contains("got 2024-06-01T12:00:00Z"), "{msg}");
}

#[test]
fn rules_need_an_enforced_action() {
    assert_eq!(kinds(&[OK]), vec![ValidationKind::NoAction]);
    let errs = errors_of(&rule(&[
        OK,
        "<Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>",
    ]));
    let k: Vec<_> = errs.iter().map(|e| (e.severity, e.kind)).collect();
    assert_eq!(
        k,
        vec![
            (Severity::Warning, ValidationKind::TransitionNotEnforced),
            (Severity::Error, ValidationKind::NoAction)
        ]
    );
    assert_eq!(
        errs[1].to_string(),
        "rule #1: has no enforced action (transitions are not enforced); add <Expiration>, <NoncurrentVersionExpiration> or <AbortIncompleteMultipartUpload>"
    );
    assert_eq!(
        kinds(&[&rule(&[OK, "<AbortIncompleteMultipartUpload/>"])]),
        vec![ValidationKind::EmptyAction, ValidationKind::NoAction]
    );
}

#[test]
fn transitions_are_warnings() {
    let errs = errors_of(&rule(&[
        OK,
        EXP,
        "<Transition><Days>30</Days></Transition><Transition><Days>60</Days></Transition><NoncurrentVersionTransition><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionTransition>",
    ]));
    assert_eq!(errs.len(), 3);
    assert!(errs.iter().all(
        |e| e.severity == Severity::Warning && e.kind == ValidationKind::TransitionNotEnforced
    ));
    assert_eq!(errs[1].path, "Rule[1]/Transition[2]");
    assert_eq!(
        errs[2].to_string(),
        "warning: rule #1: NoncurrentVersionTransition: parsed but not enforced by s3-lifecycled (storage-class transitions are not supported)"
    );
}

#[test]
fn abort_mpu_with_tag_or_size_filter() {
    let abort = "<AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload>";
    for f in [
        "<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>",
        "<Filter><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan></Filter>",
        "<Filter><And><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter>",
    ] {
        assert_eq!(
            kinds(&[&rule(&[OK, f, abort])]),
            vec![ValidationKind::AbortWithTagOrSizeFilter],
            "{f}"
        );
    }
    assert!(kinds(&[&rule(&[OK, "<Filter><Prefix>up/</Prefix></Filter>", abort])]).is_empty());
}

#[test]
fn repeated_elements_are_errors() {
    let errs = errors_of(&rule(&[
        OK,
        OK,
        "<Expiration><Days>1</Days><Days>2</Days></Expiration>",
        "<Filter><And><Tag><Key>a</Key><Key>b</Key><Value>v</Value></Tag></And></Filter>",
    ]));
    let paths: Vec<_> = errs
        .iter()
        .filter(|e| e.kind == ValidationKind::RepeatedElement)
        .map(|e| e.element().to_string())
        .collect();
    assert_eq!(
        paths,
        vec!["Status", "Filter/And/Tag/Key", "Expiration/Days"]
    );
}

/// `rules check` called a document valid whose `<Filter>` held a `<prefix>` typo: SeaweedFS
/// ignores the element, so the rule matched every key, and nothing said so. Every element no
/// lifecycle document has where it stands is an error now, with the name meant when only
/// the case differs; what the rule does is unchanged (docs/lifecycle-config.md#unknown-elements).
#[test]
fn unknown_elements_were_accepted_without_a_word() {
    let errs = errors_of(&rule(&[
        OK,
        "<Filter><prefix>logs/</prefix><And><Tag><Key>k</Key><Value>v</Value><value>w</value></Tag></And></Filter>",
        "<Expiration><Days>1</Days><ExpiredObjectAllVersions>true</ExpiredObjectAllVersions></Expiration>",
        "<DelMarkerExpiration><Days>3</Days></DelMarkerExpiration>",
    ]));
    let unknown: Vec<(String, bool)> = errs
        .iter()
        .filter(|e| e.kind == ValidationKind::UnknownElement)
        .map(|e| (e.element().to_string(), e.message.contains("did you mean")))
        .collect();
    assert_eq!(
        unknown,
        vec![
            ("DelMarkerExpiration".to_string(), false),
            ("Filter/prefix".to_string(), true),
            ("Filter/And/Tag/value".to_string(), true),
            ("Expiration/ExpiredObjectAllVersions".to_string(), false),
        ]
    );
    let filter = errs
        .iter()
        .find(|e| e.element() == "Filter/prefix")
        .unwrap();
    assert!(
        filter.message.contains("did you mean <Prefix>?"),
        "{}",
        filter.message
    );
    assert!(
        filter.message.contains("matches more objects"),
        "{}",
        filter.message
    );
    // Enforced as SeaweedFS enforces it: no prefix.
    let cfg = parse(doc(&[&rule(&[OK, "<Filter><prefix>logs/</prefix></Filter>"])]).as_bytes());
    assert_eq!(cfg.unwrap().flatten()[0].prefix, "");

    // At the root: a `<rule>` is no rule.
    let cfg = parse(
        b"<LifecycleConfiguration><rule><Status>Enabled</Status></rule></LifecycleConfiguration>",
    )
    .unwrap();
    let root: Vec<String> = validate(&cfg)
        .iter()
        .filter(|e| e.kind == ValidationKind::UnknownElement)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(root.len(), 1, "{root:?}");
    assert!(
        root[0].contains("LifecycleConfiguration/rule") && root[0].contains("<Rule>"),
        "{root:?}"
    );
}
