//! The parsed `LifecycleConfiguration` model and [`parse`]. The model holds the
//! values Go's `encoding/xml` would decode (repeated elements resolved the same
//! way) plus what validation needs to see: which elements were present and
//! which were repeated.

use std::str::FromStr;

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::xml::{self, Node, ParseError, RuleLocator};

/// A whole lifecycle configuration document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LifecycleConfiguration {
    /// `<Rule>` elements in document order.
    pub rules: Vec<Rule>,
    /// Something other than whitespace, comments or processing instructions
    /// surrounds the root element. SeaweedFS ignores it; AWS rejects it.
    pub content_outside_root: bool,
    /// Children of the root other than `<Rule>` (a `<rule>` typo among them),
    /// by name. SeaweedFS ignores them; AWS rejects the document.
    pub unknown_elements: Vec<String>,
}

/// One `<Rule>`. `Option` fields are `None` when the element is absent; a
/// present but empty element is `Some("")` / `Some(0)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// 1-based position of this `<Rule>` among the document's rules.
    pub position: usize,
    /// `<ID>`, verbatim (last one when repeated).
    pub id: Option<String>,
    /// `<Status>`, verbatim (last one when repeated).
    pub status: Option<String>,
    /// `<Filter>`; several `<Filter>` elements are merged the way Go merges them.
    pub filter: Option<Filter>,
    /// Legacy rule-level `<Prefix>`.
    pub prefix: Option<String>,
    /// `<Expiration>` (last one when repeated).
    pub expiration: Option<Expiration>,
    /// `<NoncurrentVersionExpiration>` (last one when repeated).
    pub noncurrent_version_expiration: Option<NoncurrentVersionExpiration>,
    /// `<AbortIncompleteMultipartUpload>` (last one when repeated).
    pub abort_incomplete_multipart_upload: Option<AbortIncompleteMultipartUpload>,
    /// Every `<Transition>`, in order. Parsed, never enforced.
    pub transitions: Vec<Transition>,
    /// Every `<NoncurrentVersionTransition>`, in order. Parsed, never enforced.
    pub noncurrent_version_transitions: Vec<NoncurrentVersionTransition>,
    /// Paths (relative to the rule, e.g. `Expiration/Days`) of elements that
    /// appeared more than once where the schema allows one. Each path is listed
    /// once.
    pub repeated_elements: Vec<String>,
    /// Paths (relative to the rule, e.g. `Filter/prefix`) of elements no
    /// lifecycle rule has there: typos, other vendors' extensions. SeaweedFS
    /// ignores them, so do we; AWS rejects the document. Each path once.
    pub unknown_elements: Vec<String>,
}

impl Rule {
    /// How messages name this rule.
    pub fn locator(&self) -> RuleLocator {
        RuleLocator {
            id: self.id.clone().filter(|id| !id.is_empty()),
            position: self.position,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    pub prefix: Option<String>,
    /// Every `Filter/Tag`, in order. SeaweedFS decodes them all into one tag,
    /// so the effective tag is the last `Key` and the last `Value` seen.
    pub tags: Vec<Tag>,
    /// `Filter/And`; several are merged (tags appended, scalars replaced).
    pub and: Option<And>,
    pub object_size_greater_than: Option<i64>,
    pub object_size_less_than: Option<i64>,
}

impl Filter {
    /// The single tag SeaweedFS derives from direct `<Tag>` elements, if any:
    /// Go decodes each into the same struct, so a later `<Tag>` without `<Key>`
    /// keeps the earlier key.
    pub fn effective_tag(&self) -> Option<(String, String)> {
        if self.tags.is_empty() {
            return None;
        }
        let key = self.tags.iter().rev().find_map(|t| t.key.clone());
        let value = self.tags.iter().rev().find_map(|t| t.value.clone());
        Some((key.unwrap_or_default(), value.unwrap_or_default()))
    }
}

/// `<Tag>`: `Key` and `Value`, each `None` when absent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tag {
    /// `Key` (last one when repeated).
    pub key: Option<String>,
    /// `Value` (last one when repeated).
    pub value: Option<String>,
}

/// `Filter/And`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct And {
    pub prefix: Option<String>,
    /// Every `And/Tag`, in order.
    pub tags: Vec<Tag>,
    pub object_size_greater_than: Option<i64>,
    pub object_size_less_than: Option<i64>,
}

impl And {
    /// True when the `<And>` holds no condition at all.
    pub fn is_empty(&self) -> bool {
        self.prefix.is_none()
            && self.tags.is_empty()
            && self.object_size_greater_than.is_none()
            && self.object_size_less_than.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expiration {
    pub days: Option<i64>,
    /// `Date`, with the offset it was written in.
    pub date: Option<OffsetDateTime>,
    pub expired_object_delete_marker: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoncurrentVersionExpiration {
    pub noncurrent_days: Option<i64>,
    pub newer_noncurrent_versions: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AbortIncompleteMultipartUpload {
    pub days_after_initiation: Option<i64>,
}

/// `<Transition>`: parsed so it can be reported, never enforced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transition {
    pub days: Option<i64>,
    pub date: Option<OffsetDateTime>,
    /// `StorageClass`, verbatim.
    pub storage_class: Option<String>,
}

/// `<NoncurrentVersionTransition>`: parsed so it can be reported, never enforced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoncurrentVersionTransition {
    pub noncurrent_days: Option<i64>,
    /// `StorageClass`, verbatim.
    pub storage_class: Option<String>,
}

/// Parses a lifecycle configuration exactly as a client sent it to
/// PutBucketLifecycleConfiguration. Fails only when the document cannot be
/// read (see [`ParseError`]); AWS-rule violations are left to
/// [`super::validate()`].
pub fn parse(input: &[u8]) -> Result<LifecycleConfiguration, ParseError> {
    let doc = xml::read_document(input)?;
    let rules = doc
        .root
        .children_named("Rule")
        .enumerate()
        .map(|(i, node)| read_rule(node, i + 1))
        .collect::<Result<Vec<_>, _>>()?;
    let mut unknown_elements = Vec::new();
    note_unknown(&mut unknown_elements, &doc.root, "", ROOT_CHILDREN);
    Ok(LifecycleConfiguration {
        rules,
        content_outside_root: doc.content_outside_root,
        unknown_elements,
    })
}

const EXPECT_INT: &str = "a whole number such as 30 (an empty element means 0)";
const EXPECT_BOOL: &str =
    "true or false (Go also accepts 1, t, T, TRUE, True, 0, f, F, FALSE, False)";
const EXPECT_DATE: &str =
    "an RFC 3339 timestamp such as 2024-06-01T00:00:00Z or a date such as 2024-06-01";

/// Per-rule reading state: who the rule is (for error messages) and which
/// elements repeated.
struct RuleReader {
    locator: RuleLocator,
    repeated: Vec<String>,
    unknown: Vec<String>,
}

/// The elements the document's root may hold.
pub const ROOT_CHILDREN: &[&str] = &["Rule"];
/// The elements a rule may hold, per parent path (docs/lifecycle-config.md#unknown-elements).
const RULE_CHILDREN: &[&str] = &[
    "ID",
    "Status",
    "Filter",
    "Prefix",
    "Expiration",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
    "Transition",
    "NoncurrentVersionTransition",
];
const FILTER_CHILDREN: &[&str] = &[
    "Prefix",
    "Tag",
    "And",
    "ObjectSizeGreaterThan",
    "ObjectSizeLessThan",
];
const AND_CHILDREN: &[&str] = &[
    "Prefix",
    "Tag",
    "ObjectSizeGreaterThan",
    "ObjectSizeLessThan",
];
const TAG_CHILDREN: &[&str] = &["Key", "Value"];
const EXPIRATION_CHILDREN: &[&str] = &["Days", "Date", "ExpiredObjectDeleteMarker"];
const NONCURRENT_CHILDREN: &[&str] = &["NoncurrentDays", "NewerNoncurrentVersions"];
const ABORT_CHILDREN: &[&str] = &["DaysAfterInitiation"];
const TRANSITION_CHILDREN: &[&str] = &["Days", "Date", "StorageClass"];
const NONCURRENT_TRANSITION_CHILDREN: &[&str] =
    &["NoncurrentDays", "NewerNoncurrentVersions", "StorageClass"];

/// The elements a rule may hold at `path`, relative to the rule (`""`: the
/// rule's own children), as listed above; empty for a path that is not one.
pub fn known_children(path: &str) -> &'static [&'static str] {
    match path {
        "" => RULE_CHILDREN,
        "Filter" => FILTER_CHILDREN,
        "Filter/And" => AND_CHILDREN,
        "Filter/Tag" | "Filter/And/Tag" => TAG_CHILDREN,
        "Expiration" => EXPIRATION_CHILDREN,
        "NoncurrentVersionExpiration" => NONCURRENT_CHILDREN,
        "AbortIncompleteMultipartUpload" => ABORT_CHILDREN,
        "Transition" => TRANSITION_CHILDREN,
        "NoncurrentVersionTransition" => NONCURRENT_TRANSITION_CHILDREN,
        _ => &[],
    }
}

/// Adds to `out` (once each) the paths of `parent`'s children not in `known`.
fn note_unknown(out: &mut Vec<String>, parent: &Node, path: &str, known: &[&str]) {
    for child in &parent.children {
        let full = join(path, &child.name);
        if !known.contains(&child.name.as_str()) && !out.contains(&full) {
            out.push(full);
        }
    }
}

impl RuleReader {
    /// Notes `parent`'s unknown children and, with `repeats`, its repeated
    /// ones: every known child may appear once but `Tag` and the transitions.
    fn note(&mut self, parent: &Node, path: &str, repeats: bool) {
        let known = known_children(path);
        note_unknown(&mut self.unknown, parent, path, known);
        let once = known
            .iter()
            .filter(|n| **n != "Tag" && !n.ends_with("Transition"));
        for name in once.filter(|_| repeats) {
            if parent.children_named(name).nth(1).is_some() {
                let full = join(path, name);
                if !self.repeated.contains(&full) {
                    self.repeated.push(full);
                }
            }
        }
    }

    fn bad(&self, path: &str, value: &str, expected: &'static str) -> ParseError {
        ParseError::BadValue {
            rule: self.locator.clone(),
            element: path.to_string(),
            value: value.to_string(),
            expected,
        }
    }

    /// Every occurrence is parsed (Go fails on any bad one); the last wins.
    fn last<T>(
        &self,
        (parent, path, name): (&Node, &str, &str),
        parse: fn(&str) -> Option<T>,
        expected: &'static str,
    ) -> Result<Option<T>, ParseError> {
        let mut out = None;
        for node in parent.children_named(name) {
            let bad = || self.bad(&join(path, name), &node.text, expected);
            out = Some(parse(&node.text).ok_or_else(bad)?);
        }
        Ok(out)
    }

    fn int(&self, parent: &Node, path: &str, name: &str) -> Result<Option<i64>, ParseError> {
        self.last((parent, path, name), parse_go_int, EXPECT_INT)
    }

    fn bool(&self, parent: &Node, path: &str, name: &str) -> Result<Option<bool>, ParseError> {
        self.last((parent, path, name), parse_go_bool, EXPECT_BOOL)
    }

    fn date(
        &self,
        parent: &Node,
        path: &str,
        name: &str,
    ) -> Result<Option<OffsetDateTime>, ParseError> {
        self.last((parent, path, name), parse_date, EXPECT_DATE)
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

/// Strings are taken verbatim (no trim), last occurrence wins.
fn last_text(parent: &Node, name: &str) -> Option<String> {
    parent.children_named(name).last().map(|n| n.text.clone())
}

fn read_rule(node: &Node, position: usize) -> Result<Rule, ParseError> {
    let id = last_text(node, "ID");
    let mut r = RuleReader {
        locator: RuleLocator {
            id: id.clone().filter(|id| !id.is_empty()),
            position,
        },
        repeated: Vec::new(),
        unknown: Vec::new(),
    };
    r.note(node, "", true);

    let mut filter: Option<Filter> = None;
    for f in node.children_named("Filter") {
        let merged = filter.get_or_insert_with(Filter::default);
        read_filter_into(&mut r, f, merged)?;
    }

    let mut expiration = None;
    for e in node.children_named("Expiration") {
        r.note(e, "Expiration", true);
        expiration = Some(Expiration {
            days: r.int(e, "Expiration", "Days")?,
            date: r.date(e, "Expiration", "Date")?,
            expired_object_delete_marker: r.bool(e, "Expiration", "ExpiredObjectDeleteMarker")?,
        });
    }

    let mut noncurrent = None;
    for e in node.children_named("NoncurrentVersionExpiration") {
        let path = "NoncurrentVersionExpiration";
        r.note(e, path, true);
        noncurrent = Some(NoncurrentVersionExpiration {
            noncurrent_days: r.int(e, path, "NoncurrentDays")?,
            newer_noncurrent_versions: r.int(e, path, "NewerNoncurrentVersions")?,
        });
    }

    let mut abort = None;
    for e in node.children_named("AbortIncompleteMultipartUpload") {
        let path = "AbortIncompleteMultipartUpload";
        r.note(e, path, true);
        abort = Some(AbortIncompleteMultipartUpload {
            days_after_initiation: r.int(e, path, "DaysAfterInitiation")?,
        });
    }

    let transitions = (node.children_named("Transition"))
        .map(|e| {
            r.note(e, "Transition", false);
            Ok(Transition {
                days: r.int(e, "Transition", "Days")?,
                date: r.date(e, "Transition", "Date")?,
                storage_class: last_text(e, "StorageClass"),
            })
        })
        .collect::<Result<_, ParseError>>()?;
    let noncurrent_transitions = (node.children_named("NoncurrentVersionTransition"))
        .map(|e| {
            r.note(e, "NoncurrentVersionTransition", false);
            Ok(NoncurrentVersionTransition {
                noncurrent_days: r.int(e, "NoncurrentVersionTransition", "NoncurrentDays")?,
                storage_class: last_text(e, "StorageClass"),
            })
        })
        .collect::<Result<_, ParseError>>()?;

    Ok(Rule {
        position,
        id,
        status: last_text(node, "Status"),
        filter,
        prefix: last_text(node, "Prefix"),
        expiration,
        noncurrent_version_expiration: noncurrent,
        abort_incomplete_multipart_upload: abort,
        transitions,
        noncurrent_version_transitions: noncurrent_transitions,
        repeated_elements: r.repeated,
        unknown_elements: r.unknown,
    })
}

fn read_tag(r: &mut RuleReader, node: &Node, path: &str) -> Tag {
    r.note(node, path, true);
    Tag {
        key: last_text(node, "Key"),
        value: last_text(node, "Value"),
    }
}

/// Go decodes every `<Filter>` of a rule into the same struct, child by child
/// in document order, so later children replace earlier scalars and `<Tag>` /
/// `<And>` merge. Walking the children in order reproduces that.
fn read_filter_into(r: &mut RuleReader, node: &Node, f: &mut Filter) -> Result<(), ParseError> {
    r.note(node, "Filter", true);
    for child in &node.children {
        match child.name.as_str() {
            "Prefix" => f.prefix = Some(child.text.clone()),
            "Tag" => {
                let tag = read_tag(r, child, "Filter/Tag");
                f.tags.push(tag);
            }
            "And" => {
                let and = f.and.get_or_insert_with(And::default);
                read_and_into(r, child, and)?;
            }
            "ObjectSizeGreaterThan" | "ObjectSizeLessThan" => {
                let v = parse_go_int(&child.text)
                    .ok_or_else(|| r.bad(&join("Filter", &child.name), &child.text, EXPECT_INT))?;
                if child.name == "ObjectSizeGreaterThan" {
                    f.object_size_greater_than = Some(v);
                } else {
                    f.object_size_less_than = Some(v);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn read_and_into(r: &mut RuleReader, node: &Node, and: &mut And) -> Result<(), ParseError> {
    let path = "Filter/And";
    r.note(node, path, true);
    and.prefix = last_text(node, "Prefix").or(and.prefix.take());
    for t in node.children_named("Tag") {
        let tag = read_tag(r, t, "Filter/And/Tag");
        and.tags.push(tag);
    }
    let (gt, lt) = ("ObjectSizeGreaterThan", "ObjectSizeLessThan");
    and.object_size_greater_than = r.int(node, path, gt)?.or(and.object_size_greater_than);
    and.object_size_less_than = r.int(node, path, lt)?.or(and.object_size_less_than);
    Ok(())
}

/// Go `encoding/xml` integer rule: an empty element is 0; otherwise the text
/// is trimmed and parsed as a signed decimal (`+` allowed). Whitespace-only
/// text is an error in Go too (it trims to "").
pub(crate) fn parse_go_int(text: &str) -> Option<i64> {
    if text.is_empty() {
        return Some(0);
    }
    i64::from_str(text.trim()).ok()
}

/// Go `encoding/xml` bool rule: empty is false; otherwise trimmed text must be
/// one of `strconv.ParseBool`'s spellings.
pub(crate) fn parse_go_bool(text: &str) -> Option<bool> {
    if text.is_empty() {
        return Some(false);
    }
    match text.trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// RFC 3339 (offsets and fractional seconds allowed) or a bare ISO 8601 date,
/// which means midnight UTC. Surrounding whitespace is ignored.
pub(crate) fn parse_date(text: &str) -> Option<OffsetDateTime> {
    let text = text.trim();
    if let Ok(t) = OffsetDateTime::parse(text, &Rfc3339) {
        return Some(t);
    }
    let day = Date::parse(text, format_description!("[year]-[month]-[day]")).ok()?;
    Some(day.midnight().assume_utc())
}
