//! Property tests for the lifecycle XML layer: arbitrary and mutated input
//! never panics, and generated configurations survive a round trip through a
//! small test-only XML writer with identical model and `flatten()` output.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use s3_lifecycled::lifecycle::{
    AbortIncompleteMultipartUpload, And, Expiration, Filter, LifecycleConfiguration,
    NoncurrentVersionExpiration, NoncurrentVersionTransition, Rule, Tag, Transition, parse,
    validate,
};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Parse, and when that works, validate and flatten: none of it may panic.
fn exercise(bytes: &[u8]) {
    if let Ok(cfg) = parse(bytes) {
        let _ = validate(&cfg);
        let flat = cfg.flatten();
        assert_eq!(flat.len(), cfg.rules.len());
        for (i, rule) in flat.iter().enumerate() {
            assert_eq!(rule.position, i + 1);
        }
    }
}

fn seed_documents() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lifecycle");
    let mut docs = Vec::new();
    for sub in ["aws", "invalid"] {
        let mut paths: Vec<_> = fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for p in paths {
            docs.push(fs::read(p).unwrap());
        }
    }
    docs
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        byte: u8,
    },
    Truncate {
        at: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    /// Copy the span between two `<` and insert it at a third.
    Splice {
        from: usize,
        to: usize,
        at: usize,
    },
    /// Duplicate the first element with this name, in place.
    DuplicateElement {
        name: usize,
    },
}

const NAMES: &[&str] = &[
    "Rule",
    "ID",
    "Status",
    "Filter",
    "Prefix",
    "Tag",
    "And",
    "Key",
    "Value",
    "Expiration",
    "Days",
    "Date",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
    "Transition",
    "ObjectSizeGreaterThan",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(from, to, at)| Mutation::Splice { from, to, at }),
        (0..NAMES.len()).prop_map(|name| Mutation::DuplicateElement { name }),
    ]
}

fn apply(doc: &mut Vec<u8>, m: &Mutation) {
    if doc.is_empty() {
        return;
    }
    let n = doc.len();
    match *m {
        Mutation::Flip { at, byte } => doc[at % n] ^= byte | 1,
        Mutation::Truncate { at } => doc.truncate(at % n),
        Mutation::Delete { at, len } => {
            let start = at % n;
            doc.drain(start..(start + len).min(n));
        }
        Mutation::Splice { from, to, at } => {
            let lts: Vec<usize> = (0..n).filter(|&i| doc[i] == b'<').collect();
            if lts.len() < 2 {
                return;
            }
            let (a, b) = (lts[from % lts.len()], lts[to % lts.len()]);
            let (a, b) = (a.min(b), a.max(b));
            let chunk = doc[a..b].to_vec();
            let at = lts[at % lts.len()];
            doc.splice(at..at, chunk);
        }
        Mutation::DuplicateElement { name } => {
            let open = format!("<{}>", NAMES[name]);
            let close = format!("</{}>", NAMES[name]);
            let text = String::from_utf8_lossy(doc).into_owned();
            if let Some(start) = text.find(&open)
                && let Some(rel) = text[start..].find(&close)
            {
                let end = start + rel + close.len();
                let copy = text.as_bytes()[start..end].to_vec();
                if text.len() == doc.len() {
                    doc.splice(end..end, copy);
                }
            }
        }
    }
}

// ------------------------------------------------------------ test writer

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn opt_el(out: &mut String, name: &str, value: Option<String>) {
    if let Some(v) = value {
        let _ = write!(out, "<{name}>{v}</{name}>");
    }
}

fn date_text(d: OffsetDateTime) -> String {
    d.format(&Rfc3339).expect("generated dates are formattable")
}

fn write_tag(out: &mut String, t: &Tag) {
    out.push_str("<Tag>");
    opt_el(out, "Key", t.key.as_deref().map(esc));
    opt_el(out, "Value", t.value.as_deref().map(esc));
    out.push_str("</Tag>");
}

fn write_filter(out: &mut String, f: &Filter) {
    out.push_str("<Filter>");
    opt_el(out, "Prefix", f.prefix.as_deref().map(esc));
    for t in &f.tags {
        write_tag(out, t);
    }
    if let Some(a) = &f.and {
        out.push_str("<And>");
        opt_el(out, "Prefix", a.prefix.as_deref().map(esc));
        for t in &a.tags {
            write_tag(out, t);
        }
        opt_el(
            out,
            "ObjectSizeGreaterThan",
            a.object_size_greater_than.map(|v| v.to_string()),
        );
        opt_el(
            out,
            "ObjectSizeLessThan",
            a.object_size_less_than.map(|v| v.to_string()),
        );
        out.push_str("</And>");
    }
    opt_el(
        out,
        "ObjectSizeGreaterThan",
        f.object_size_greater_than.map(|v| v.to_string()),
    );
    opt_el(
        out,
        "ObjectSizeLessThan",
        f.object_size_less_than.map(|v| v.to_string()),
    );
    out.push_str("</Filter>");
}

/// A minimal serializer for the model, so generated configurations can be
/// parsed back. Pretty-printing is optional to exercise whitespace handling
/// between elements.
fn write_config(cfg: &LifecycleConfiguration, pretty: bool) -> String {
    let nl = if pretty { "\n  " } else { "" };
    let mut out = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#,
    );
    for r in &cfg.rules {
        out.push_str(nl);
        out.push_str("<Rule>");
        opt_el(&mut out, "ID", r.id.as_deref().map(esc));
        opt_el(&mut out, "Status", r.status.as_deref().map(esc));
        if let Some(f) = &r.filter {
            out.push_str(nl);
            write_filter(&mut out, f);
        }
        opt_el(&mut out, "Prefix", r.prefix.as_deref().map(esc));
        if let Some(e) = &r.expiration {
            out.push_str(nl);
            out.push_str("<Expiration>");
            opt_el(&mut out, "Days", e.days.map(|v| v.to_string()));
            opt_el(&mut out, "Date", e.date.map(date_text));
            opt_el(
                &mut out,
                "ExpiredObjectDeleteMarker",
                e.expired_object_delete_marker.map(|v| v.to_string()),
            );
            out.push_str("</Expiration>");
        }
        if let Some(n) = &r.noncurrent_version_expiration {
            out.push_str("<NoncurrentVersionExpiration>");
            opt_el(
                &mut out,
                "NoncurrentDays",
                n.noncurrent_days.map(|v| v.to_string()),
            );
            opt_el(
                &mut out,
                "NewerNoncurrentVersions",
                n.newer_noncurrent_versions.map(|v| v.to_string()),
            );
            out.push_str("</NoncurrentVersionExpiration>");
        }
        if let Some(a) = &r.abort_incomplete_multipart_upload {
            out.push_str("<AbortIncompleteMultipartUpload>");
            opt_el(
                &mut out,
                "DaysAfterInitiation",
                a.days_after_initiation.map(|v| v.to_string()),
            );
            out.push_str("</AbortIncompleteMultipartUpload>");
        }
        for t in &r.transitions {
            out.push_str("<Transition>");
            opt_el(&mut out, "Days", t.days.map(|v| v.to_string()));
            opt_el(&mut out, "Date", t.date.map(date_text));
            opt_el(
                &mut out,
                "StorageClass",
                t.storage_class.as_deref().map(esc),
            );
            out.push_str("</Transition>");
        }
        for t in &r.noncurrent_version_transitions {
            out.push_str("<NoncurrentVersionTransition>");
            opt_el(
                &mut out,
                "NoncurrentDays",
                t.noncurrent_days.map(|v| v.to_string()),
            );
            opt_el(
                &mut out,
                "StorageClass",
                t.storage_class.as_deref().map(esc),
            );
            out.push_str("</NoncurrentVersionTransition>");
        }
        out.push_str("</Rule>");
    }
    out.push_str("</LifecycleConfiguration>");
    out
}

// ------------------------------------------------------------ generators

/// Strings as clients send them: XML-special characters, spaces, non-ASCII.
/// `\r` is left out because XML normalises it to `\n` on reading.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9/._-]{1,12}",
        "[ a-zA-Z0-9&<>\"'/é日\t\n-]{0,16}",
    ]
}

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..400, -5i64..0, any::<i64>()]
}

fn date() -> impl Strategy<Value = OffsetDateTime> {
    // Years 1..=9999, any second, some with sub-second precision, assorted offsets.
    (
        -62_135_596_800i64..253_402_300_799,
        prop_oneof![Just(0u32), 0u32..1_000_000_000],
        prop_oneof![Just(0i32), -50_400i32..50_400],
    )
        .prop_map(|(secs, nanos, off)| {
            let offset = UtcOffset::from_whole_seconds(off / 60 * 60).unwrap();
            let t = OffsetDateTime::from_unix_timestamp(secs).unwrap()
                + time::Duration::nanoseconds(i64::from(nanos));
            t.to_offset(offset)
        })
        .prop_filter("formattable as RFC 3339", |d| {
            (1..=9999).contains(&d.year()) && d.format(&Rfc3339).is_ok()
        })
}

fn tag() -> impl Strategy<Value = Tag> {
    (proptest::option::of(text()), proptest::option::of(text()))
        .prop_map(|(key, value)| Tag { key, value })
}

fn and() -> impl Strategy<Value = And> {
    (
        proptest::option::of(text()),
        proptest::collection::vec(tag(), 0..4),
        proptest::option::of(int()),
        proptest::option::of(int()),
    )
        .prop_map(|(prefix, tags, gt, lt)| And {
            prefix,
            tags,
            object_size_greater_than: gt,
            object_size_less_than: lt,
        })
}

fn filter() -> impl Strategy<Value = Filter> {
    (
        proptest::option::of(text()),
        proptest::collection::vec(tag(), 0..3),
        proptest::option::of(and()),
        proptest::option::of(int()),
        proptest::option::of(int()),
    )
        .prop_map(|(prefix, tags, and, gt, lt)| Filter {
            prefix,
            tags,
            and,
            object_size_greater_than: gt,
            object_size_less_than: lt,
        })
}

fn status() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just("Enabled".to_string()),
        Just("Disabled".to_string()),
        Just("enabled".to_string()),
        text(),
    ])
}

fn rule() -> impl Strategy<Value = Rule> {
    let head = (
        proptest::option::of(text()),
        status(),
        proptest::option::of(filter()),
        proptest::option::of(text()),
    );
    let actions = (
        proptest::option::of(
            (
                proptest::option::of(int()),
                proptest::option::of(date()),
                proptest::option::of(any::<bool>()),
            )
                .prop_map(|(days, date, dm)| Expiration {
                    days,
                    date,
                    expired_object_delete_marker: dm,
                }),
        ),
        proptest::option::of(
            (proptest::option::of(int()), proptest::option::of(int())).prop_map(|(d, n)| {
                NoncurrentVersionExpiration {
                    noncurrent_days: d,
                    newer_noncurrent_versions: n,
                }
            }),
        ),
        proptest::option::of(proptest::option::of(int()).prop_map(|d| {
            AbortIncompleteMultipartUpload {
                days_after_initiation: d,
            }
        })),
        proptest::collection::vec(
            (
                proptest::option::of(int()),
                proptest::option::of(date()),
                proptest::option::of(text()),
            )
                .prop_map(|(days, date, storage_class)| Transition {
                    days,
                    date,
                    storage_class,
                }),
            0..2,
        ),
        proptest::collection::vec(
            (proptest::option::of(int()), proptest::option::of(text())).prop_map(
                |(noncurrent_days, storage_class)| NoncurrentVersionTransition {
                    noncurrent_days,
                    storage_class,
                },
            ),
            0..2,
        ),
    );
    (head, actions).prop_map(
        |((id, status, filter, prefix), (exp, nve, abort, tr, ntr))| Rule {
            position: 0,
            id,
            status,
            filter,
            prefix,
            expiration: exp,
            noncurrent_version_expiration: nve,
            abort_incomplete_multipart_upload: abort,
            transitions: tr,
            noncurrent_version_transitions: ntr,
            repeated_elements: Vec::new(),
            unknown_elements: Vec::new(),
        },
    )
}

fn config() -> impl Strategy<Value = LifecycleConfiguration> {
    proptest::collection::vec(rule(), 0..5).prop_map(|mut rules| {
        for (i, r) in rules.iter_mut().enumerate() {
            r.position = i + 1;
        }
        LifecycleConfiguration {
            rules,
            content_outside_root: false,
            unknown_elements: Vec::new(),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&bytes);
    }

    #[test]
    fn arbitrary_xmlish_text_never_panics(s in "(<[/!?]?[A-Za-z]{0,8}[ =\"a-z]{0,6}/?>|&[a-z#0-9]{0,5};?|[a-z0-9 ]{0,4}){0,40}") {
        exercise(format!("<LifecycleConfiguration><Rule>{s}").as_bytes());
        exercise(format!("<LifecycleConfiguration>{s}</LifecycleConfiguration>").as_bytes());
    }

    #[test]
    fn mutated_valid_documents_never_panic(
        seed in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seed_documents();
        let mut doc = seeds[seed % seeds.len()].clone();
        for m in &mutations {
            apply(&mut doc, m);
            exercise(&doc);
        }
    }

    #[test]
    fn generated_configs_round_trip(cfg in config(), pretty in any::<bool>()) {
        let xml = write_config(&cfg, pretty);
        let parsed = parse(xml.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{xml}")))?;
        prop_assert_eq!(parsed.flatten(), cfg.flatten(), "{}", xml);
        prop_assert_eq!(&parsed, &cfg, "{}", xml);
    }
}
