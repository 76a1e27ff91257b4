//! Strict validation of a parsed configuration against AWS S3's rules, which
//! are stricter than SeaweedFS's (it checks almost nothing at PUT). Findings
//! are for operators and `rules check`; enforcement follows
//! [`super::LifecycleConfiguration::flatten`] regardless.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use time::format_description::well_known::Rfc3339;
use time::{Time, UtcOffset};

use super::model::{
    AbortIncompleteMultipartUpload, Expiration, Filter, LifecycleConfiguration,
    NoncurrentVersionExpiration, ROOT_CHILDREN, Rule, Tag, known_children,
};
use super::xml::RuleLocator;

/// Most rules AWS allows in one configuration.
pub const MAX_RULES: usize = 1000;
/// Longest rule ID AWS allows, in characters.
pub const MAX_ID_CHARS: usize = 255;
/// Allowed range of `NewerNoncurrentVersions`.
pub const NEWER_NONCURRENT_RANGE: std::ops::RangeInclusive<i64> = 1..=100;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// AWS would reject the document.
    Error,
    /// Accepted, but not everything in it takes effect.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// Machine-readable kind of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValidationKind {
    /// The document has no `<Rule>`.
    NoRules,
    /// More than [`MAX_RULES`] rules.
    TooManyRules,
    /// Text or markup before or after the root element.
    ContentOutsideRoot,
    /// An element that may appear once appears several times.
    RepeatedElement,
    /// An element no lifecycle document has there: a typo (`<prefix>`), or
    /// another vendor's extension. Ignored, as SeaweedFS ignores it.
    UnknownElement,
    /// `<ID>` longer than [`MAX_ID_CHARS`].
    IdTooLong,
    /// Two rules share an `<ID>`.
    DuplicateId,
    /// `<Status>` missing or not exactly `Enabled`/`Disabled`.
    InvalidStatus,
    /// Both `<Filter>` and the legacy rule-level `<Prefix>`.
    FilterWithLegacyPrefix,
    /// A `<Filter>` holding more than one condition outside `<And>`.
    FilterMultipleConditions,
    /// An `<And>` with no condition.
    EmptyAnd,
    /// A `<Tag>` without `<Key>` or `<Value>`.
    IncompleteTag,
    /// Two tags in one `<And>` share a key.
    DuplicateTagKey,
    /// A size bound that is negative (or a zero upper bound).
    InvalidObjectSize,
    /// `ObjectSizeLessThan` not greater than `ObjectSizeGreaterThan`.
    InconsistentObjectSize,
    /// `Days`, `NoncurrentDays` or `DaysAfterInitiation` not positive.
    NonPositiveDays,
    /// `NewerNoncurrentVersions` outside [`NEWER_NONCURRENT_RANGE`].
    NewerNoncurrentVersionsOutOfRange,
    /// `NewerNoncurrentVersions` without `NoncurrentDays`.
    NewerNoncurrentVersionsWithoutDays,
    /// `Expiration/Date` not at midnight UTC.
    DateNotMidnightUtc,
    /// Conflicting `Expiration` children (`Days`+`Date`, or a true
    /// `ExpiredObjectDeleteMarker` with either).
    ConflictingExpiration,
    /// An action element present with nothing in it.
    EmptyAction,
    /// A rule with no enforced action.
    NoAction,
    /// `AbortIncompleteMultipartUpload` in a rule filtering by tag or size.
    AbortWithTagOrSizeFilter,
    /// `Transition`/`NoncurrentVersionTransition`: parsed, not enforced.
    TransitionNotEnforced,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub severity: Severity,
    /// The rule concerned; `None` for document-level findings.
    pub rule: Option<RuleLocator>,
    /// Full element path, e.g. `Rule[2]/Expiration/Days`.
    pub path: String,
    pub kind: ValidationKind,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl ValidationError {
    /// The element path relative to the rule (`Expiration/Days`), or the full
    /// path for document-level findings.
    pub fn element(&self) -> &str {
        if self.rule.is_none() {
            return &self.path;
        }
        match self.path.split_once("]/") {
            Some((_, rest)) => rest,
            None => "",
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        match &self.rule {
            Some(rule) if self.element().is_empty() => write!(f, "{rule}: {}", self.message),
            Some(rule) => write!(f, "{rule}: {}: {}", self.element(), self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Collects findings for one rule.
struct Findings<'a> {
    rule: Option<&'a Rule>,
    out: &'a mut Vec<ValidationError>,
}

impl Findings<'_> {
    fn push(
        &mut self,
        severity: Severity,
        kind: ValidationKind,
        element: &str,
        message: impl Into<String>,
    ) {
        let path = match self.rule {
            Some(rule) if element.is_empty() => format!("Rule[{}]", rule.position),
            Some(rule) => format!("Rule[{}]/{element}", rule.position),
            None => element.to_string(),
        };
        self.out.push(ValidationError {
            severity,
            rule: self.rule.map(Rule::locator),
            path,
            kind,
            message: message.into(),
        });
    }

    fn error(&mut self, kind: ValidationKind, element: &str, message: impl Into<String>) {
        self.push(Severity::Error, kind, element, message);
    }
}

/// Checks `config` against AWS S3's lifecycle rules. An empty result means
/// AWS would accept it; warnings alone mean it is valid but partly ignored.
pub fn validate(config: &LifecycleConfiguration) -> Vec<ValidationError> {
    let mut out = Vec::new();
    let mut doc = Findings {
        rule: None,
        out: &mut out,
    };
    if config.content_outside_root {
        doc.error(
            ValidationKind::ContentOutsideRoot,
            "LifecycleConfiguration",
            "text or markup outside the <LifecycleConfiguration> element; SeaweedFS ignores it, AWS rejects the document; remove it",
        );
    }
    for element in &config.unknown_elements {
        doc.error(
            ValidationKind::UnknownElement,
            &format!("LifecycleConfiguration/{element}"),
            unknown_element_message(ROOT_CHILDREN, element, "whatever it holds is no rule"),
        );
    }
    if config.rules.is_empty() {
        doc.error(
            ValidationKind::NoRules,
            "LifecycleConfiguration",
            "holds no <Rule>; at least one rule is required (delete the configuration instead)",
        );
    }
    if config.rules.len() > MAX_RULES {
        doc.error(
            ValidationKind::TooManyRules,
            "LifecycleConfiguration",
            format!(
                "holds {} rules; at most {MAX_RULES} are allowed",
                config.rules.len()
            ),
        );
    }

    let mut first_with_id: HashMap<&str, usize> = HashMap::new();
    for rule in &config.rules {
        let mut f = Findings {
            rule: Some(rule),
            out: &mut out,
        };
        if let Some(id) = rule.id.as_deref().filter(|id| !id.is_empty()) {
            let chars = id.chars().count();
            if chars > MAX_ID_CHARS {
                f.error(
                    ValidationKind::IdTooLong,
                    "ID",
                    format!("is {chars} characters long; at most {MAX_ID_CHARS} are allowed"),
                );
            }
            if let Some(first) = first_with_id.get(id) {
                f.error(
                    ValidationKind::DuplicateId,
                    "ID",
                    format!("{id:?} is already used by rule #{first}; rule IDs must be unique"),
                );
            } else {
                first_with_id.insert(id, rule.position);
            }
        }
        check_rule(rule, &mut f);
    }
    out
}

fn check_rule(rule: &Rule, f: &mut Findings<'_>) {
    for element in &rule.unknown_elements {
        let (parent, name) = element.rsplit_once('/').unwrap_or(("", element));
        let effect = if parent.starts_with("Filter") {
            "the rule's filter does not hold it, so the rule matches more objects than written"
        } else {
            "nothing in it takes effect"
        };
        let message = unknown_element_message(known_children(parent), name, effect);
        f.error(ValidationKind::UnknownElement, element, message);
    }
    for element in &rule.repeated_elements {
        // Go decodes repeated <Filter>/<And> into the same struct (merging);
        // every other repeated element replaces the earlier one.
        let seaweed = if element == "Filter" || element == "Filter/And" {
            "SeaweedFS merges their contents"
        } else {
            "SeaweedFS keeps the last one"
        };
        f.error(
            ValidationKind::RepeatedElement,
            element,
            format!("appears more than once; at most one is allowed ({seaweed})"),
        );
    }
    match rule.status.as_deref() {
        Some("Enabled" | "Disabled") => {}
        Some(other) => f.error(
            ValidationKind::InvalidStatus,
            "Status",
            format!(
                "must be exactly Enabled or Disabled, got {other:?}; SeaweedFS treats anything but Enabled as disabled"
            ),
        ),
        None => f.error(
            ValidationKind::InvalidStatus,
            "Status",
            "is missing; add <Status>Enabled</Status> or <Status>Disabled</Status> (the rule is treated as disabled)",
        ),
    }
    if let Some(filter) = &rule.filter {
        if rule.prefix.is_some() {
            f.error(
                ValidationKind::FilterWithLegacyPrefix,
                "Prefix",
                "the legacy rule-level <Prefix> cannot be combined with <Filter>; move the prefix into <Filter><Prefix>",
            );
        }
        check_filter(filter, f);
    }
    check_actions(rule, f);
}

fn check_filter(filter: &Filter, f: &mut Findings<'_>) {
    let mut direct = Vec::new();
    if filter.prefix.is_some() {
        direct.push("Prefix".to_string());
    }
    match filter.tags.len() {
        0 => {}
        1 => direct.push("Tag".to_string()),
        n => direct.push(format!("{n} Tag elements")),
    }
    if filter.object_size_greater_than.is_some() {
        direct.push("ObjectSizeGreaterThan".to_string());
    }
    if filter.object_size_less_than.is_some() {
        direct.push("ObjectSizeLessThan".to_string());
    }
    let several_tags = filter.tags.len() > 1;
    if filter.and.is_some() && !direct.is_empty() {
        f.error(
            ValidationKind::FilterMultipleConditions,
            "Filter",
            format!(
                "holds <And> and also {} directly; a Filter holds exactly one of Prefix, Tag, And or a size bound (SeaweedFS uses only <And>); move every condition into <And>",
                direct.join(", ")
            ),
        );
    } else if direct.len() > 1 || several_tags {
        f.error(
            ValidationKind::FilterMultipleConditions,
            "Filter",
            format!(
                "holds {} directly; a Filter holds exactly one of Prefix, Tag, And or a size bound; combine several conditions with <And>",
                direct.join(", ")
            ),
        );
    }
    for tag in &filter.tags {
        check_tag(tag, "Filter/Tag", f);
    }
    check_sizes(
        filter.object_size_greater_than,
        filter.object_size_less_than,
        "Filter",
        f,
    );

    if let Some(and) = &filter.and {
        if and.is_empty() {
            f.error(
                ValidationKind::EmptyAnd,
                "Filter/And",
                "holds no condition; put a Prefix, Tags or size bounds in it, or remove it",
            );
        }
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for tag in &and.tags {
            check_tag(tag, "Filter/And/Tag", f);
            if let Some(key) = tag.key.as_deref()
                && seen.insert(key, ()).is_some()
            {
                f.error(
                    ValidationKind::DuplicateTagKey,
                    "Filter/And/Tag",
                    format!(
                        "tag key {key:?} appears more than once; keys must be unique (SeaweedFS keeps the last value)"
                    ),
                );
            }
        }
        check_sizes(
            and.object_size_greater_than,
            and.object_size_less_than,
            "Filter/And",
            f,
        );
    }
}

fn check_tag(tag: &Tag, element: &str, f: &mut Findings<'_>) {
    let missing: Vec<&str> = [("Key", tag.key.is_none()), ("Value", tag.value.is_none())]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect();
    if !missing.is_empty() {
        f.error(
            ValidationKind::IncompleteTag,
            element,
            format!(
                "has no <{}>; a tag needs both <Key> and <Value>",
                missing.join("> or <")
            ),
        );
    }
}

fn check_sizes(gt: Option<i64>, lt: Option<i64>, parent: &str, f: &mut Findings<'_>) {
    if let Some(v) = gt
        && v < 0
    {
        f.error(
            ValidationKind::InvalidObjectSize,
            &format!("{parent}/ObjectSizeGreaterThan"),
            format!("must be a non-negative number of bytes, got {v}"),
        );
    }
    if let Some(v) = lt
        && v <= 0
    {
        f.error(
            ValidationKind::InvalidObjectSize,
            &format!("{parent}/ObjectSizeLessThan"),
            format!(
                "must be a positive number of bytes, got {v} (SeaweedFS treats it as no upper bound)"
            ),
        );
    }
    if let (Some(gt), Some(lt)) = (gt, lt)
        && gt >= 0
        && lt > 0
        && lt <= gt
    {
        f.error(
            ValidationKind::InconsistentObjectSize,
            &format!("{parent}/ObjectSizeLessThan"),
            format!(
                "must be greater than ObjectSizeGreaterThan ({gt}), got {lt}; no object could match"
            ),
        );
    }
}

fn check_days(value: Option<i64>, element: &str, f: &mut Findings<'_>) {
    if let Some(v) = value
        && v <= 0
    {
        f.error(
            ValidationKind::NonPositiveDays,
            element,
            format!("must be a positive integer, got {v}"),
        );
    }
}

fn check_actions(rule: &Rule, f: &mut Findings<'_>) {
    let mut has_action = false;
    if let Some(exp) = &rule.expiration {
        has_action |= check_expiration(exp, f);
    }
    if let Some(nve) = &rule.noncurrent_version_expiration {
        has_action |= check_noncurrent_expiration(nve, f);
    }
    if let Some(abort) = &rule.abort_incomplete_multipart_upload {
        has_action |= check_abort(rule, abort, f);
    }
    for (name, n) in [
        ("Transition", rule.transitions.len()),
        (
            "NoncurrentVersionTransition",
            rule.noncurrent_version_transitions.len(),
        ),
    ] {
        for i in 0..n {
            f.push(
                Severity::Warning,
                ValidationKind::TransitionNotEnforced,
                &indexed(name, i, n),
                "parsed but not enforced by s3-lifecycled (storage-class transitions are not supported)",
            );
        }
    }

    if !has_action {
        let why = if rule.transitions.is_empty() && rule.noncurrent_version_transitions.is_empty() {
            "has no action"
        } else {
            "has no enforced action (transitions are not enforced)"
        };
        f.error(
            ValidationKind::NoAction,
            "",
            format!(
                "{why}; add <Expiration>, <NoncurrentVersionExpiration> or <AbortIncompleteMultipartUpload>"
            ),
        );
    }
}

/// `<Expiration>`; whether it holds an action.
fn check_expiration(exp: &Expiration, f: &mut Findings<'_>) -> bool {
    check_days(exp.days, "Expiration/Days", f);
    if let Some(date) = exp.date {
        let utc = date.to_offset(UtcOffset::UTC);
        if date.offset() != UtcOffset::UTC || utc.time() != Time::MIDNIGHT {
            f.error(
                ValidationKind::DateNotMidnightUtc,
                "Expiration/Date",
                format!(
                    "must be midnight UTC such as 2024-06-01T00:00:00Z, got {}; SeaweedFS uses the exact instant",
                    date.format(&Rfc3339).unwrap_or_else(|_| date.to_string())
                ),
            );
        }
    }
    if exp.days.is_some() && exp.date.is_some() {
        f.error(
            ValidationKind::ConflictingExpiration,
            "Expiration",
            "holds both <Days> and <Date>; use one of them",
        );
    }
    if exp.expired_object_delete_marker == Some(true) && (exp.days.is_some() || exp.date.is_some())
    {
        f.error(
            ValidationKind::ConflictingExpiration,
            "Expiration/ExpiredObjectDeleteMarker",
            "cannot be true together with <Days> or <Date>; put it in a separate rule",
        );
    }
    if exp.days.is_none() && exp.date.is_none() && exp.expired_object_delete_marker.is_none() {
        f.error(
            ValidationKind::EmptyAction,
            "Expiration",
            "is empty; it needs <Days>, <Date> or <ExpiredObjectDeleteMarker>",
        );
        return false;
    }
    true
}

/// `<NoncurrentVersionExpiration>`; whether it holds an action.
fn check_noncurrent_expiration(nve: &NoncurrentVersionExpiration, f: &mut Findings<'_>) -> bool {
    let path = "NoncurrentVersionExpiration";
    check_days(nve.noncurrent_days, &format!("{path}/NoncurrentDays"), f);
    if let Some(n) = nve.newer_noncurrent_versions {
        if !NEWER_NONCURRENT_RANGE.contains(&n) {
            f.error(
                ValidationKind::NewerNoncurrentVersionsOutOfRange,
                &format!("{path}/NewerNoncurrentVersions"),
                format!(
                    "must be between {} and {}, got {n}",
                    NEWER_NONCURRENT_RANGE.start(),
                    NEWER_NONCURRENT_RANGE.end()
                ),
            );
        }
        if nve.noncurrent_days.is_none() {
            f.error(
                ValidationKind::NewerNoncurrentVersionsWithoutDays,
                &format!("{path}/NewerNoncurrentVersions"),
                "requires <NoncurrentDays> in the same element; add it",
            );
        }
    }
    if nve.noncurrent_days.is_none() && nve.newer_noncurrent_versions.is_none() {
        f.error(
            ValidationKind::EmptyAction,
            path,
            "is empty; it needs <NoncurrentDays>",
        );
        return false;
    }
    true
}

/// `<AbortIncompleteMultipartUpload>` of `rule`; whether it holds an action.
fn check_abort(rule: &Rule, abort: &AbortIncompleteMultipartUpload, f: &mut Findings<'_>) -> bool {
    let path = "AbortIncompleteMultipartUpload";
    check_days(
        abort.days_after_initiation,
        &format!("{path}/DaysAfterInitiation"),
        f,
    );
    if abort.days_after_initiation.is_none() {
        f.error(
            ValidationKind::EmptyAction,
            path,
            "is empty; it needs <DaysAfterInitiation>",
        );
    }
    if let Some(filter) = &rule.filter
        && filters_by_tag_or_size(filter)
    {
        f.error(
            ValidationKind::AbortWithTagOrSizeFilter,
            path,
            "cannot be used in a rule that filters by tag or object size (uploads have neither, so it would never match); use a prefix-only rule",
        );
    }
    abort.days_after_initiation.is_some()
}

/// What an unknown element `name` does (`effect`), with the element meant
/// when its name differs from one of `known` (its siblings) only in case.
fn unknown_element_message(known: &[&str], name: &str, effect: &str) -> String {
    let meant = known.iter().find(|k| k.eq_ignore_ascii_case(name));
    let hint = meant.map_or(String::new(), |k| {
        format!("; did you mean <{k}>? (names are case-sensitive)")
    });
    format!(
        "is not an element of a lifecycle configuration here: SeaweedFS ignores it and so \
         does s3-lifecycled ({effect}); AWS refuses the document as MalformedXML{hint}"
    )
}

fn filters_by_tag_or_size(filter: &Filter) -> bool {
    let direct = !filter.tags.is_empty()
        || filter.object_size_greater_than.is_some()
        || filter.object_size_less_than.is_some();
    let and = filter.and.as_ref().is_some_and(|a| {
        !a.tags.is_empty()
            || a.object_size_greater_than.is_some()
            || a.object_size_less_than.is_some()
    });
    direct || and
}

/// `Transition` when there is one, `Transition[2]` (1-based) when several.
fn indexed(name: &str, i: usize, count: usize) -> String {
    if count == 1 {
        name.to_string()
    } else {
        format!("{name}[{}]", i + 1)
    }
}
