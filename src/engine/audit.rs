//! The legacy-TTL audit's judgement (docs/ttl-audit.md): given what the
//! cluster holds outside the lifecycle documents — `filer.conf` location
//! TTLs, TTLs stamped on entries, TTL volumes — says for each bucket how it
//! contradicts the bucket's rules and what an operator can do. Pure: the
//! readings come from `seaweed::ttl_scan`; nothing here changes anything.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::{BucketConfig, Nanos};
use crate::lifecycle::FlatRule;

/// SeaweedFS's TTL units in seconds, in the order of their needle TTL codes
/// (1 to 6).
const TTL_UNITS: [(char, u64); 6] = [
    ('m', 60),
    ('h', 3600),
    ('d', 86_400),
    ('w', 7 * 86_400),
    ('M', 30 * 86_400),
    ('y', 365 * 86_400),
];

/// A SeaweedFS TTL string (`3m`, `4h`, `5d`, `6w`, `7M`, `8y`; bare digits
/// are minutes) in seconds. `None` when empty or malformed.
pub fn ttl_seconds(ttl: &str) -> Option<u64> {
    let t = ttl.trim();
    let (count, unit) = match t.char_indices().last()? {
        (_, c) if c.is_ascii_digit() => (t, 'm'),
        (i, c) => (&t[..i], c),
    };
    let count: u64 = count.parse().ok()?;
    let (_, unit) = TTL_UNITS.iter().find(|u| u.0 == unit)?;
    (count > 0).then(|| count.saturating_mul(*unit))
}

/// A volume's TTL as the master reports it (`count << 8 | unit`, SeaweedFS's
/// needle TTL) in seconds; 0 for none.
pub fn volume_ttl_seconds(encoded: u32) -> u64 {
    let count = u64::from((encoded >> 8) & 0xff);
    let unit = (encoded & 0xff)
        .checked_sub(1)
        .and_then(|i| TTL_UNITS.get(i as usize));
    count * unit.map_or(0, |u| u.1)
}

/// The TTL of an erasure-coded TTL volume, which keeps no TTL of its own:
/// the volume server sets its destruction time to the encoding time plus the
/// TTL, and 4.48 stamps the encoding time a few seconds apart from that
/// (observed: 7.4 s for `7d`), so the difference is rounded to the minute,
/// SeaweedFS's finest TTL unit. `None` for a volume without a TTL, or when
/// the encoding time is unknown (weed before it was reported).
pub fn ec_volume_ttl(expire_at_s: u64, encoded_ns: i64) -> Option<u64> {
    let encoded_s = u64::try_from(encoded_ns / 1_000_000_000).ok()?;
    if expire_at_s == 0 || encoded_s == 0 || expire_at_s <= encoded_s {
        return None;
    }
    let ttl = (expire_at_s - encoded_s + 30) / 60 * 60;
    (ttl > 0).then_some(ttl)
}

/// Seconds as the shortest exact TTL string (`90m`, `2d`, `3w`).
pub fn ttl_text(seconds: u64) -> String {
    for (unit, len) in [("w", 7 * 86_400), ("d", 86_400), ("h", 3600), ("m", 60)] {
        if seconds >= len && seconds.is_multiple_of(len) {
            return format!("{}{unit}", seconds / len);
        }
    }
    format!("{seconds}s")
}

/// One `filer.conf` location whose `ttl` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocationTtl {
    /// `locationPrefix`, a filer path (`/buckets/b/` or wider).
    pub prefix: String,
    /// `ttl`, verbatim.
    pub ttl: String,
    /// The location's other settings as `fs.configure` flags, to re-add after
    /// removing it (`fs.configure -delete` drops the whole location).
    pub other_flags: Vec<String>,
}

/// Entries carrying one TTL in a bucket's bounded listing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StampedGroup {
    /// Entries with this TTL.
    pub count: u64,
    /// Of them, noncurrent versions (files under a `.versions` folder that
    /// are not the latest).
    pub versions: u64,
    /// The earliest time one of them vanishes (creation + TTL).
    pub first_expiry_ns: Nanos,
    /// The object key of that one.
    pub example_key: String,
    /// Keys no enabled expiring rule governs, and keys whose governing rule
    /// is longer than the TTL.
    pub no_rule: u64,
    /// See [`no_rule`](Self::no_rule): the rule (id or position) and count.
    pub shorter_than: BTreeMap<String, u64>,
}

/// What a bucket's bounded listing found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntrySample {
    /// Entries read.
    pub listed: u64,
    /// The listing reached the end of the bucket within the budget.
    pub complete: bool,
    /// Per TTL in seconds.
    pub stamped: BTreeMap<u64, StampedGroup>,
}

/// A bucket's TTL readings, for [`audit_bucket`].
#[derive(Debug, Clone, Default)]
pub struct BucketTtls {
    /// The bucket and its rules.
    pub bucket: BucketConfig,
    /// The locations with a TTL that cover all or part of the bucket.
    pub locations: Vec<LocationTtl>,
    /// The bounded listing; `None` when not sampled.
    pub entries: Option<EntrySample>,
    /// TTL volumes of the bucket's collection.
    pub volumes: Vec<TtlVolume>,
}

/// One TTL volume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TtlVolume {
    pub id: u32,
    pub ttl_seconds: u64,
    /// Erasure-coded: when the volume server destroys it whole (unix
    /// seconds), its TTL counted from the encoding (docs/ttl-audit.md#erasure-coded).
    pub destroyed_at_s: Option<u64>,
}

/// Where a TTL comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A `filer.conf` location (`fs.configure -ttl`).
    Location,
    /// `TtlSec` on the entries themselves.
    Entries,
    /// Volumes created with a TTL.
    Volumes,
}

/// How a TTL contradicts the bucket's lifecycle document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conflict {
    /// The bucket keeps versions: the TTL expires every version written under
    /// it, noncurrent ones included, whatever the noncurrent rules say.
    Versioned,
    /// A rule keeps objects longer than the TTL: they vanish early.
    ShorterThanRule {
        /// The rule's id (or `#position`).
        rule: String,
        /// Its `Expiration/Days`.
        days: i64,
        /// Sampled entries it concerns (0 for a location or volume).
        objects: u64,
    },
    /// A rule with a tag or size filter: the TTL ignores the filter.
    IgnoresFilter {
        /// The rule's id (or `#position`).
        rule: String,
    },
    /// No enabled rule expires (all of) what the TTL covers.
    NoRule {
        /// Sampled entries it concerns (0 for a location or volume).
        objects: u64,
    },
    /// Entries carry a TTL no location gives today: the TTL (or the rule it
    /// mirrored) was changed or removed after they were written.
    Outlived,
}

impl Conflict {
    /// The `kind` tag, as in JSON and the metric's `conflict` label.
    pub fn kind(&self) -> &'static str {
        match self {
            Conflict::Versioned => "versioned",
            Conflict::ShorterThanRule { .. } => "shorter_than_rule",
            Conflict::IgnoresFilter { .. } => "ignores_filter",
            Conflict::NoRule { .. } => "no_rule",
            Conflict::Outlived => "outlived",
        }
    }
}

/// One line per conflict, for the text form and the status page.
impl std::fmt::Display for Conflict {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |objects: u64| match objects {
            0 => String::new(),
            n => format!(" ({n} objects)"),
        };
        let line = match self {
            Conflict::Versioned => "versioned bucket: the TTL also destroys noncurrent versions, \
                                whatever the noncurrent rules keep"
                .to_string(),
            Conflict::ShorterThanRule {
                rule,
                days,
                objects,
            } => format!(
                "shorter than rule {rule} ({days} days): objects vanish early{}",
                n(*objects)
            ),
            Conflict::IgnoresFilter { rule } => format!(
                "rule {rule} filters by tag or size: the TTL expires the objects it leaves alone too"
            ),
            Conflict::NoRule { objects } => {
                format!("no lifecycle rule expires what it covers{}", n(*objects))
            }
            Conflict::Outlived => "no filer.conf location gives this TTL today: it was removed or \
                               changed (or the rule it mirrored was), and these objects still \
                               carry it"
                .to_string(),
        };
        out.write_str(&line)
    }
}

impl Source {
    /// The JSON name (`location`, `entries`, `volumes`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Location => "location",
            Source::Entries => "entries",
            Source::Volumes => "volumes",
        }
    }
}

/// One TTL the audit found, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub bucket: String,
    /// Where the TTL lives.
    pub source: Source,
    /// The TTL, as SeaweedFS writes it.
    pub ttl: String,
    pub ttl_seconds: u64,
    /// The key prefix it covers (empty: the whole bucket).
    pub key_prefix: String,
    /// What was found, in one sentence.
    pub detail: String,
    /// How it contradicts the rules; empty when it does not today.
    pub conflicts: Vec<Conflict>,
    /// What to run or do.
    pub fix: String,
    /// What no fix can save; empty when nothing is lost.
    pub unsavable: String,
}

/// The whole audit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    pub at_ns: Nanos,
    pub buckets: u64,
    /// Every finding, by bucket then source.
    pub findings: Vec<Finding>,
    /// Buckets or readings that failed, each naming what and why.
    pub errors: Vec<String>,
    /// Filer and master calls made.
    pub calls: u64,
    /// Entries listed over all buckets.
    pub entries_listed: u64,
    /// Buckets whose listing stopped at the budget (`audit.max_entries`).
    pub sampled: Vec<String>,
}

impl AuditReport {
    /// Findings that contradict a rule (the others are harmless today).
    pub fn conflicting(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.conflicts.is_empty())
    }
}

/// The key prefix within `bucket` that a location prefix covers: `Some("")`
/// for the whole bucket (or wider), `Some(p)` for part of it, `None` when
/// it is about another path.
pub fn location_scope(location: &str, buckets_root: &str, bucket: &str) -> Option<String> {
    let root = format!("{}/{bucket}/", buckets_root.trim_end_matches('/'));
    if root.starts_with(location) {
        Some(String::new())
    } else {
        location.strip_prefix(&root).map(str::to_string)
    }
}

/// The rule's ID, or `#<position>` when it has none.
pub(crate) fn rule_name(r: &FlatRule) -> String {
    if r.id.is_empty() {
        format!("#{}", r.position)
    } else {
        r.id.clone()
    }
}

fn expiring(r: &FlatRule) -> bool {
    r.enabled && (r.expiration_days > 0 || r.expiration_date.is_some())
}

fn filtered(r: &FlatRule) -> bool {
    !r.tags.is_empty() || r.size_gt > 0 || r.size_lt > 0
}

/// The conflicts of a TTL of `ttl` covering `scope` (a key prefix) in `b`,
/// with lifecycle days of `day`.
fn scope_conflicts(b: &BucketConfig, scope: &str, ttl: u64, day: Duration) -> Vec<Conflict> {
    let mut out = Vec::new();
    if b.versioned() {
        out.push(Conflict::Versioned);
    }
    let overlapping: Vec<&FlatRule> = b
        .rules
        .iter()
        .filter(|r| expiring(r) && (r.prefix.starts_with(scope) || scope.starts_with(&r.prefix)))
        .collect();
    let covers_all = overlapping
        .iter()
        .any(|r| scope.starts_with(&r.prefix) && !filtered(r));
    if !covers_all {
        out.push(Conflict::NoRule { objects: 0 });
    }
    for r in overlapping {
        if r.expiration_days > 0 && ttl < rule_seconds(r, day) {
            out.push(Conflict::ShorterThanRule {
                rule: rule_name(r),
                days: r.expiration_days,
                objects: 0,
            });
        }
        if filtered(r) {
            out.push(Conflict::IgnoresFilter { rule: rule_name(r) });
        }
    }
    out
}

fn rule_seconds(r: &FlatRule, day: Duration) -> u64 {
    u64::try_from(r.expiration_days)
        .unwrap_or(0)
        .saturating_mul(day.as_secs().max(1))
}

/// How one sampled key with a TTL of `ttl` stands against the rules:
/// `Ok(())` when a rule deletes it first, else the conflict to count.
pub fn key_verdict(
    rules: &[FlatRule],
    key: &str,
    ttl: u64,
    day: Duration,
) -> Result<(), Option<String>> {
    let governing = rules
        .iter()
        .filter(|r| expiring(r) && key.starts_with(&r.prefix) && !filtered(r))
        // 0 for a rule without `Expiration/Days`.
        .min_by_key(|r| rule_seconds(r, day));
    match governing {
        None => Err(None),
        Some(r) if r.expiration_days > 0 && ttl < rule_seconds(r, day) => Err(Some(rule_name(r))),
        Some(_) => Ok(()),
    }
}

fn weed_shell(command: &str) -> String {
    format!("echo '{command}' | weed shell")
}

/// The findings of one bucket, at `now`, with lifecycle days of `day`,
/// under `buckets_root`.
pub fn audit_bucket(t: &BucketTtls, buckets_root: &str, day: Duration, now: Nanos) -> Vec<Finding> {
    let mut out = location_findings(t, buckets_root, day);
    out.extend(entry_findings(t, buckets_root, now));
    out.extend(volume_findings(t, day));
    out
}

/// The fix for objects that carry a TTL of their own: upload them again.
fn reupload_fix(bucket: &str, what: &str) -> String {
    format!(
        "a TTL written with an object stays with it, and an S3 copy onto itself keeps it: to \
         keep {what}, download it and upload it again once no location TTL covers it (`aws s3 \
         cp s3://{bucket}/KEY ./KEY && aws s3 cp ./KEY s3://{bucket}/KEY`); noncurrent versions \
         cannot be uploaded back as noncurrent"
    )
}

/// One finding per `filer.conf` location with a TTL over the bucket.
fn location_findings(t: &BucketTtls, buckets_root: &str, day: Duration) -> Vec<Finding> {
    let b = &t.bucket;
    let mut out = Vec::new();
    for loc in &t.locations {
        let (prefix, ttl) = (&loc.prefix, &loc.ttl);
        let scope = location_scope(prefix, buckets_root, &b.name);
        let (Some(secs), Some(scope)) = (ttl_seconds(ttl), scope) else {
            continue;
        };
        let mut fix = weed_shell(&format!(
            "fs.configure -locationPrefix {prefix} -delete -apply"
        ));
        if !loc.other_flags.is_empty() {
            let flags = loc.other_flags.join(" ");
            let keep = weed_shell(&format!(
                "fs.configure -locationPrefix {prefix} {flags} -apply"
            ));
            fix.push_str(&format!(", then keep its other settings: {keep}"));
        }
        let wide = if scope.is_empty() && !prefix.ends_with(&format!("/{}/", b.name)) {
            " (a location over several buckets: removing it changes them all)"
        } else {
            ""
        };
        out.push(Finding {
            bucket: b.name.clone(),
            source: Source::Location,
            ttl: ttl.clone(),
            ttl_seconds: secs,
            key_prefix: scope.clone(),
            detail: format!(
                "filer.conf location {prefix} gives every write under it a TTL of {ttl}{wide}"
            ),
            conflicts: scope_conflicts(b, &scope, secs, day),
            fix,
            unsavable: format!(
                "objects already written under {prefix} keep their TTL of {ttl}: removing the \
                 location only spares later writes"
            ),
        });
    }
    out
}

/// One finding per TTL that the bucket's sampled entries carry.
fn entry_findings(t: &BucketTtls, buckets_root: &str, now: Nanos) -> Vec<Finding> {
    let b = &t.bucket;
    let mut out = Vec::new();
    if let Some(sample) = &t.entries {
        for (&secs, g) in &sample.stamped {
            let mut conflicts = Vec::new();
            if b.versioned() && g.versions > 0 {
                conflicts.push(Conflict::Versioned);
            }
            if g.no_rule > 0 {
                conflicts.push(Conflict::NoRule { objects: g.no_rule });
            }
            for (rule, &objects) in &g.shorter_than {
                let days = b
                    .rules
                    .iter()
                    .find(|r| &rule_name(r) == rule)
                    .map_or(0, |r| r.expiration_days);
                conflicts.push(Conflict::ShorterThanRule {
                    rule: rule.clone(),
                    days,
                    objects,
                });
            }
            let given_now = t.locations.iter().any(|l| {
                ttl_seconds(&l.ttl) == Some(secs)
                    && location_scope(&l.prefix, buckets_root, &b.name)
                        .is_some_and(|s| g.example_key.starts_with(&s))
            });
            if !given_now {
                conflicts.push(Conflict::Outlived);
            }
            let of = if sample.complete {
                String::new()
            } else {
                format!(" (in the first {} entries listed)", sample.listed)
            };
            let when = if g.first_expiry_ns <= now {
                "already due".to_string()
            } else {
                format!(
                    "the first at {}",
                    crate::engine::time::format_time(g.first_expiry_ns)
                )
            };
            out.push(Finding {
                bucket: b.name.clone(),
                source: Source::Entries,
                ttl: ttl_text(secs),
                ttl_seconds: secs,
                key_prefix: String::new(),
                detail: format!(
                    "{} entries{of} carry a TTL of {} (e.g. {}), {} of them versions; the filer \
                     drops each one that long after it was written, {when}",
                    g.count,
                    ttl_text(secs),
                    g.example_key,
                    g.versions
                ),
                unsavable: if conflicts.is_empty() {
                    String::new()
                } else {
                    format!(
                        "these {} objects vanish at their TTL whatever the rules say",
                        g.count
                    )
                },
                conflicts,
                fix: reupload_fix(&b.name, "one"),
            });
        }
    }
    out
}

/// One finding per TTL of the bucket's collection's volumes.
fn volume_findings(t: &BucketTtls, day: Duration) -> Vec<Finding> {
    let b = &t.bucket;
    let mut out = Vec::new();
    let mut by_ttl: BTreeMap<u64, Vec<&TtlVolume>> = BTreeMap::new();
    for v in &t.volumes {
        by_ttl.entry(v.ttl_seconds).or_default().push(v);
    }
    for (secs, mut vols) in by_ttl {
        vols.sort_by_key(|v| v.id);
        let list = |v: &[&TtlVolume]| {
            v.iter()
                .map(|v| v.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut detail = format!(
            "collection {} has {} TTL volume(s) of {} ({}): the volume server drops such a \
             volume whole once the TTL has passed since its last write",
            b.name,
            vols.len(),
            ttl_text(secs),
            list(&vols)
        );
        let coded: Vec<&TtlVolume> = vols
            .iter()
            .copied()
            .filter(|v| v.destroyed_at_s.is_some())
            .collect();
        if let Some(first) = coded.iter().filter_map(|v| v.destroyed_at_s).min() {
            let at = i64::try_from(first)
                .unwrap_or(i64::MAX)
                .saturating_mul(1_000_000_000);
            detail.push_str(&format!(
                "; erasure-coded ones ({}) go whole once the TTL has passed since their \
                 encoding, the first after {}",
                list(&coded),
                super::time::rfc3339(at)
            ));
        }
        out.push(Finding {
            bucket: b.name.clone(),
            source: Source::Volumes,
            ttl: ttl_text(secs),
            ttl_seconds: secs,
            key_prefix: String::new(),
            detail,
            conflicts: scope_conflicts(b, "", secs, day),
            fix: format!(
                "remove the location TTL first, so new writes go to volumes without one; then {}",
                reupload_fix(&b.name, "an object they hold")
            ),
            unsavable: "what the TTL volumes hold goes with them".into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Versioning;

    const DAY: Duration = Duration::from_secs(86_400);

    fn rule(id: &str, prefix: &str, days: i64) -> FlatRule {
        FlatRule {
            id: id.into(),
            position: 1,
            enabled: true,
            prefix: prefix.into(),
            expiration_days: days,
            ..FlatRule::default()
        }
    }

    fn bucket(versioning: Versioning, rules: Vec<FlatRule>) -> BucketConfig {
        BucketConfig {
            name: "b".into(),
            versioning,
            object_lock: false,
            rules,
        }
    }

    fn location(prefix: &str, ttl: &str) -> LocationTtl {
        LocationTtl {
            prefix: prefix.into(),
            ttl: ttl.into(),
            other_flags: vec![],
        }
    }

    #[test]
    fn ttl_strings_read_like_seaweedfs() {
        assert_eq!(ttl_seconds("1d"), Some(86_400));
        assert_eq!(ttl_seconds("3w"), Some(3 * 7 * 86_400));
        assert_eq!(ttl_seconds("2M"), Some(60 * 86_400));
        assert_eq!(ttl_seconds("1y"), Some(365 * 86_400));
        assert_eq!(ttl_seconds("15"), Some(15 * 60), "bare digits are minutes");
        assert_eq!(ttl_seconds(""), None);
        assert_eq!(ttl_seconds("d"), None);
        assert_eq!(ttl_seconds("5x"), None);
        assert_eq!(volume_ttl_seconds(1 << 8 | 3), 86_400);
        assert_eq!(volume_ttl_seconds(0), 0);
        assert_eq!(ttl_text(86_400), "1d");
        assert_eq!(ttl_text(14 * 86_400), "2w");
        assert_eq!(ttl_text(90 * 60), "90m");
    }

    #[test]
    fn location_scope_covers_the_bucket_part_of_it_or_nothing() {
        assert_eq!(
            location_scope("/buckets/b/", "/buckets", "b"),
            Some("".into())
        );
        assert_eq!(
            location_scope("/buckets/", "/buckets", "b"),
            Some("".into())
        );
        assert_eq!(
            location_scope("/buckets/b/logs/", "/buckets", "b"),
            Some("logs/".into())
        );
        assert_eq!(location_scope("/buckets/bb/", "/buckets", "b"), None);
        assert_eq!(location_scope("/other/", "/buckets", "b"), None);
    }

    #[test]
    fn a_location_ttl_on_a_versioned_bucket_destroys_versions() {
        let t = BucketTtls {
            bucket: bucket(Versioning::Enabled, vec![rule("r", "", 1)]),
            locations: vec![location("/buckets/b/", "1d")],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 0);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].conflicts, vec![Conflict::Versioned]);
        assert!(
            f[0].fix
                .contains("fs.configure -locationPrefix /buckets/b/ -delete -apply"),
            "{}",
            f[0].fix
        );
    }

    #[test]
    fn a_ttl_shorter_than_the_rule_or_without_one_is_named() {
        let t = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![rule("long", "", 30)]),
            locations: vec![
                location("/buckets/b/", "1d"),
                location("/buckets/b/x/", "60d"),
            ],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 0);
        assert_eq!(
            f[0].conflicts,
            vec![Conflict::ShorterThanRule {
                rule: "long".into(),
                days: 30,
                objects: 0
            }]
        );
        assert!(
            f[1].conflicts.is_empty(),
            "a longer TTL harms nothing today"
        );
        let none = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![]),
            locations: vec![location("/buckets/", "7d")],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&none, "/buckets", DAY, 0);
        assert_eq!(f[0].conflicts, vec![Conflict::NoRule { objects: 0 }]);
        assert!(f[0].detail.contains("several buckets"), "{}", f[0].detail);
    }

    #[test]
    fn a_filtered_rule_does_not_cover_what_the_ttl_deletes() {
        let mut r = rule("tagged", "", 1);
        r.tags.insert("t".into(), "v".into());
        let t = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![r]),
            locations: vec![location("/buckets/b/", "2d")],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 0);
        assert_eq!(
            f[0].conflicts,
            vec![
                Conflict::NoRule { objects: 0 },
                Conflict::IgnoresFilter {
                    rule: "tagged".into()
                }
            ]
        );
    }

    #[test]
    fn stamped_entries_without_a_location_now_outlived_their_configuration() {
        let mut g = StampedGroup {
            count: 3,
            first_expiry_ns: 5,
            example_key: "k".into(),
            ..StampedGroup::default()
        };
        g.shorter_than.insert("r".into(), 3);
        let t = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![rule("r", "", 30)]),
            entries: Some(EntrySample {
                listed: 10,
                complete: true,
                stamped: [(86_400, g)].into(),
            }),
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 10);
        assert_eq!(f[0].source, Source::Entries);
        assert_eq!(
            f[0].conflicts,
            vec![
                Conflict::ShorterThanRule {
                    rule: "r".into(),
                    days: 30,
                    objects: 3
                },
                Conflict::Outlived
            ]
        );
        assert!(f[0].unsavable.contains("3 objects"));
        assert!(f[0].detail.contains("already due"), "{}", f[0].detail);
    }

    #[test]
    fn key_verdict_uses_the_shortest_unfiltered_rule() {
        let rules = vec![rule("a", "logs/", 30), rule("b", "logs/tmp/", 1)];
        assert_eq!(key_verdict(&rules, "logs/tmp/x", 86_400, DAY), Ok(()));
        assert_eq!(
            key_verdict(&rules, "logs/x", 86_400, DAY),
            Err(Some("a".into()))
        );
        assert_eq!(key_verdict(&rules, "other", 86_400, DAY), Err(None));
    }

    #[test]
    fn ttl_volumes_are_grouped_by_ttl() {
        let t = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![rule("r", "", 1)]),
            volumes: vec![
                TtlVolume {
                    id: 3,
                    ttl_seconds: 86_400,
                    destroyed_at_s: None,
                },
                TtlVolume {
                    id: 4,
                    ttl_seconds: 86_400,
                    destroyed_at_s: None,
                },
            ],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 0);
        assert_eq!(f.len(), 1);
        assert!(f[0].detail.contains("3, 4"), "{}", f[0].detail);
        assert!(!f[0].detail.contains("erasure"), "{}", f[0].detail);
        assert!(f[0].conflicts.is_empty(), "TTL equal to the rule");
    }

    /// An erasure-coded TTL volume keeps no TTL (the master reports 0) but
    /// a destruction time: the audit left it out, and nothing said those
    /// objects go whole at that time (docs/ttl-audit.md#erasure-coded).
    #[test]
    fn erasure_coded_ttl_volumes_went_unaudited() {
        // Observed on 4.48 for a `7d` volume.
        let (expire, encoded) = (1_797_283_509, 1_796_678_716_429_936_804);
        assert_eq!(ec_volume_ttl(expire, encoded), Some(7 * 86_400));
        assert_eq!(ec_volume_ttl(0, encoded), None, "no TTL");
        assert_eq!(ec_volume_ttl(expire, 0), None, "encoding time unknown");
        assert_eq!(ec_volume_ttl(100, 200_000_000_000), None);
        let t = BucketTtls {
            bucket: bucket(Versioning::Unversioned, vec![rule("r", "", 30)]),
            volumes: vec![
                TtlVolume {
                    id: 5,
                    ttl_seconds: 7 * 86_400,
                    destroyed_at_s: Some(expire),
                },
                TtlVolume {
                    id: 6,
                    ttl_seconds: 7 * 86_400,
                    destroyed_at_s: None,
                },
            ],
            ..BucketTtls::default()
        };
        let f = audit_bucket(&t, "/buckets", DAY, 0);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].ttl, "1w");
        assert!(
            f[0].detail.contains("(5, 6)")
                && f[0].detail.contains("erasure-coded ones (5)")
                && f[0].detail.contains("the first after 2026-12-14T21:25:09Z"),
            "{}",
            f[0].detail
        );
        assert_eq!(f[0].conflicts[0].kind(), "shorter_than_rule");
    }
}
