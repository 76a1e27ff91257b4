//! Safety rails, pure: which buckets a pass leaves alone because an operator
//! paused them ([`PauseRecord`], [`Selection`]), the strict JSON of a pause
//! or approval file, the check of a bucket name used as a file name, and the
//! per-bucket deletion cap of one pass ([`CapBook`]). Storing the
//! records in the filer is `crate::seaweed::controls`'s job
//! (docs/filer-layout.md#pause-files).
//!
//! A paused bucket is treated like a bucket outside `pass.buckets`: it is not
//! listed, not replayed, nothing of it is sent, and its cursor state is kept
//! as it was. Its matches therefore stay pending — never resolved — and the
//! first pass after `resume` picks them up from the saved progress (or
//! recovers by a walk when the meta-log no longer reaches back that far).

use serde::{Deserialize, Serialize};

use crate::engine::Nanos;
use crate::engine::shard::SHARD_COUNT;
use crate::engine::time::rfc3339;

/// The pause file format version this code reads and writes.
pub const PAUSE_VERSION: u32 = 1;

/// One paused bucket, as stored in its pause file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRecord {
    /// Format version; always [`PAUSE_VERSION`].
    pub version: u32,
    /// The bucket (checked against the file name).
    pub bucket: String,
    /// When it was paused, ns since epoch.
    pub paused_ns: Nanos,
    /// Free text from the operator (`pause --reason`); may be empty.
    #[serde(default)]
    pub reason: String,
}

impl PauseRecord {
    /// A record for `bucket` paused at `now`.
    pub fn new(bucket: &str, now: Nanos, reason: &str) -> PauseRecord {
        PauseRecord {
            version: PAUSE_VERSION,
            bucket: bucket.to_string(),
            paused_ns: now,
            reason: reason.to_string(),
        }
    }
}

/// An approval (`s3-lifecycled approve`): the next pass lets the bucket's
/// held work through once, uncapped (and outside a rule-change grace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRecord {
    /// Format version; always [`PAUSE_VERSION`].
    pub version: u32,
    /// The bucket (checked against the file name).
    pub bucket: String,
    /// When it was approved, ns since epoch.
    pub approved_ns: Nanos,
}

impl ApprovalRecord {
    /// A record for `bucket` approved at `now`.
    pub fn new(bucket: &str, now: Nanos) -> ApprovalRecord {
        ApprovalRecord {
            version: PAUSE_VERSION,
            bucket: bucket.to_string(),
            approved_ns: now,
        }
    }
}

/// Each control file's `to_json` and its `decode_*`, which parses the file
/// found under the name of `bucket` ([`decode_record`]).
macro_rules! control_files {
    ($($record:ident $decode:ident $what:literal;)*) => {$(
        impl $record {
            /// The file content: pretty JSON and a newline.
            pub fn to_json(&self) -> Vec<u8> {
                record_json(self)
            }
        }

        #[doc = concat!("Parses a ", $what, " file found under the name of `bucket`. The error")]
        /// says what is wrong (the caller adds the path and the fix).
        pub fn $decode(content: &[u8], bucket: &str) -> Result<$record, String> {
            decode_record(content, bucket, $what, |r: &$record| (r.version, r.bucket.as_str()))
        }
    )*};
}

control_files! {
    PauseRecord decode_pause "pause";
    ApprovalRecord decode_approval "approval";
    RuleRecord decode_rule_record "rules";
    HoldRecord decode_hold "hold";
}

/// The pause file name of `bucket` (`<bucket>.json`).
pub fn pause_file_name(bucket: &str) -> String {
    format!("{bucket}.json")
}

/// The bucket a pause file name stands for, `None` for any other name.
pub fn bucket_of_pause_file(name: &str) -> Option<&str> {
    name.strip_suffix(".json")
        .filter(|b| check_bucket_name(b).is_ok())
}

/// Every control file's content, and a cursor's: pretty JSON (two-space
/// indent, like Go's encoder) and a newline (readable with `weed shell
/// fs.cat`). Serialising plain structs into a Vec cannot fail.
pub(crate) fn record_json<T: Serialize>(record: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(record).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Parses a control file (`what`: pause, approval, hold, rules) found under
/// the name of `bucket`, strictly: only [`PAUSE_VERSION`], and only the
/// bucket its file name is for. The error says what is wrong (the caller
/// adds the path and the fix).
fn decode_record<T: serde::de::DeserializeOwned>(
    content: &[u8],
    bucket: &str,
    what: &str,
    header: impl Fn(&T) -> (u32, &str),
) -> Result<T, String> {
    let r: T = serde_json::from_slice(content).map_err(|e| format!("not a {what} record ({e})"))?;
    let (version, named) = header(&r);
    if version != PAUSE_VERSION {
        return Err(format!(
            "version {version} is not {PAUSE_VERSION}, the only one this build reads"
        ));
    }
    if named != bucket {
        return Err(format!(
            "it names bucket {named:?}, but its file name is for {bucket:?}"
        ));
    }
    Ok(r)
}

/// Checks that `name` can be an S3 bucket name, and so a file name of its own
/// in the filer: 3 to 63 characters of `a-z 0-9 . -`, starting and ending
/// with a letter or digit. The error names the bucket and the rule.
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let ok_len = (3..=63).contains(&name.len());
    let ok_chars = name
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-');
    let ends = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok_len && ok_chars && ends(name.bytes().next()) && ends(name.bytes().last()) {
        Ok(())
    } else {
        Err(format!(
            "bucket {name:?} is not a valid S3 bucket name: use 3 to 63 characters of \
             lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
        ))
    }
}

/// What a pass does with a bucket that exists and has a usable configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Evaluated and enforced.
    Run,
    /// Not in `pass.buckets`: left alone, cursor state kept.
    NotSelected,
    /// Paused by an operator: left alone, cursor state kept, shown as paused.
    Paused,
}

impl Selection {
    /// The fate of `bucket` given `pass.buckets` (`filter`, empty = all) and
    /// the paused buckets. A pause wins over the selection only for buckets
    /// this instance would otherwise run, so the pause is reported where it
    /// matters.
    pub fn of<'a>(
        bucket: &str,
        filter: impl IntoIterator<Item = &'a str>,
        paused: impl IntoIterator<Item = &'a str>,
    ) -> Selection {
        let mut filter = filter.into_iter().peekable();
        let selected = filter.peek().is_none() || filter.any(|b| b == bucket);
        if !selected {
            Selection::NotSelected
        } else if paused.into_iter().any(|b| b == bucket) {
            Selection::Paused
        } else {
            Selection::Run
        }
    }

    /// Whether the pass leaves the bucket's cursor state as it was.
    pub fn keeps_state(self) -> bool {
        self != Selection::Run
    }
}

/// The deletion cap settings (`safety.max_deletes_per_bucket`,
/// `safety.max_delete_fraction`); 0 turns each off.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CapLimits {
    /// Deletes sent per bucket and pass; 0 = no limit.
    pub max_deletes: u64,
    /// Fraction of the bucket's entries (objects, versions, markers,
    /// uploads) per pass, 0..=1; 0 = no limit.
    pub max_fraction: f64,
}

impl CapLimits {
    /// Whether any cap is set.
    pub fn enabled(&self) -> bool {
        self.max_deletes > 0 || self.max_fraction > 0.0
    }

    /// The cap of a bucket holding `entries` (when counted): the smaller of
    /// the two settings; `None` = unlimited. A fraction of a bucket whose
    /// size is unknown does not limit (the count failed; the absolute cap
    /// still does). The fraction is rounded down, so a cap never allows more
    /// than the fraction.
    pub fn cap_for(&self, entries: Option<u64>) -> Option<u64> {
        let abs = (self.max_deletes > 0).then_some(self.max_deletes);
        // f64 holds every count below 2^53 exactly; beyond that the
        // rounding is far below one delete per bucket that size.
        let frac = entries
            .filter(|_| self.max_fraction > 0.0)
            .map(|n| (n as f64 * self.max_fraction).floor() as u64);
        abs.into_iter().chain(frac).min()
    }
}

/// One bucket's account in a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Account {
    cap: Option<u64>,
    entries: Option<u64>,
    sent: u64,
    held: u64,
    /// Held by an earlier pass (ns): nothing is sent until `approve`.
    since: Option<Nanos>,
    approved: bool,
    /// In a rule-change grace: (document changed, grace ends).
    grace: Option<(Nanos, Nanos)>,
}

/// A bucket the cap held in a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub bucket: String,
    /// Deletes the pass found due: those sent plus those held.
    pub would_delete: u64,
    /// The bucket's entries, when counted.
    pub entries: Option<u64>,
    /// The cap it stopped at.
    pub cap: u64,
    /// When an earlier pass held it (it then sends nothing until
    /// `approve`); `None` when this pass is the first to hold it.
    pub since_ns: Option<Nanos>,
    /// In a rule-change grace: (document changed, grace ends), ns.
    pub grace: Option<(Nanos, Nanos)>,
}

impl Held {
    /// `safety cap: would delete X of Y (Z%)…`, the reason every report
    /// shows, with how it goes on.
    pub fn reason(&self) -> String {
        if let Some((changed, until)) = self.grace {
            return format!(
                "rule change grace: the lifecycle document changed at {}; the new rules would \
                 delete {} of {}; deletions start at {} or on `s3-lifecycled approve {}`",
                rfc3339(changed),
                self.would_delete,
                self.entries
                    .map_or_else(|| "? (bucket not counted)".to_string(), |y| y.to_string()),
                rfc3339(until),
                self.bucket
            );
        }
        let of = match self.entries {
            Some(y) if y > 0 => {
                format!("{y} ({:.1}%)", self.would_delete as f64 * 100.0 / y as f64)
            }
            Some(y) => format!("{y}"),
            None => "? (bucket not counted)".into(),
        };
        let how = match self.since_ns {
            None => format!("stopped at {}", self.cap),
            Some(_) => "held by an earlier pass".into(),
        };
        format!(
            "safety cap: would delete {} of {of}; {how}. Fix: `s3-lifecycled approve {}` \
             lets it through on the next pass",
            self.would_delete, self.bucket
        )
    }
}

/// What the service last saw of a bucket's lifecycle document, as stored in
/// its rules file (`safety.rule_change_grace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleRecord {
    /// Format version; always [`PAUSE_VERSION`].
    pub version: u32,
    /// The bucket (checked against the file name).
    pub bucket: String,
    /// SHA-256 (hex) of the stored lifecycle document.
    pub doc_sha256: String,
    /// When this document was first seen, ns since epoch.
    pub changed_ns: Nanos,
    /// An `approve` ended the grace early.
    #[serde(default)]
    pub released: bool,
}

/// The rule-change grace of one bucket in one pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraceDecision {
    /// The record to write (changed document, or a grace ended by approve).
    pub write: Option<RuleRecord>,
    /// In grace: (changed, ends), both ns. The pass sends nothing for it.
    pub in_grace: Option<(Nanos, Nanos)>,
}

/// Whether `bucket`, whose stored document hashes to `doc_sha256`, is in its
/// rule-change grace at `now` (the pass's time), and what to record.
///
/// - A document different from the recorded one changed at `seen` (the
///   pass's `now`, but never past the real clock): the grace runs from then.
/// - A bucket without a record is a new configuration when other buckets
///   have records (grace from `seen`), and the baseline when none has (the
///   first pass after the setting was turned on must not hold every bucket).
/// - `approved` ends a running grace (recorded as `released`).
/// - The pass that first sees a change is in grace even when its `now` is
///   past the grace's end (a `--now` ahead): only a later pass deletes.
// Each argument is one independent fact of the decision; a struct would only
// rename them.
#[allow(clippy::too_many_arguments)]
pub fn grace_decision(
    bucket: &str,
    prev: Option<&RuleRecord>,
    any_records: bool,
    doc_sha256: &str,
    seen: Nanos,
    now: Nanos,
    grace: std::time::Duration,
    approved: bool,
) -> GraceDecision {
    let grace_ns = i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX);
    let fresh = |changed_ns: Nanos, released: bool| RuleRecord {
        version: PAUSE_VERSION,
        bucket: bucket.to_string(),
        doc_sha256: doc_sha256.to_string(),
        changed_ns,
        released,
    };
    let mut record = match prev {
        Some(r) if r.doc_sha256 == doc_sha256 => r.clone(),
        Some(_) => fresh(seen, false),
        None if any_records => fresh(seen, false),
        // Baseline: recorded as changed long ago, already released.
        None => fresh(seen, true),
    };
    let mut write = (prev != Some(&record)).then(|| record.clone());
    let until = record.changed_ns.saturating_add(grace_ns);
    // The pass that first sees a change is dry whatever its `now`: a `--now`
    // past the grace's end must not skip the grace it is starting.
    let first_sight = write.is_some() && !record.released;
    let in_grace = if grace_ns == 0 || record.released || (now >= until && !first_sight) {
        None
    } else if approved {
        record.released = true;
        write = Some(record);
        None
    } else {
        Some((record.changed_ns, until))
    };
    GraceDecision { write, in_grace }
}

/// A bucket the cap held, as stored in its hold file: later passes send
/// nothing for it until `approve`, or until the caps are raised above the
/// ones it was held under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldRecord {
    /// Format version; always [`PAUSE_VERSION`].
    pub version: u32,
    /// The bucket (checked against the file name).
    pub bucket: String,
    /// When it was held, ns since epoch.
    pub held_ns: Nanos,
    /// `safety.max_deletes_per_bucket` when it was held.
    pub max_deletes: u64,
    /// `safety.max_delete_fraction` when it was held.
    pub max_fraction: f64,
    /// The reason reported then.
    pub reason: String,
}

impl HoldRecord {
    /// The record of `held` at `now` under `limits`.
    pub fn new(held: &Held, limits: CapLimits, now: Nanos) -> HoldRecord {
        HoldRecord {
            version: PAUSE_VERSION,
            bucket: held.bucket.clone(),
            held_ns: now,
            max_deletes: limits.max_deletes,
            max_fraction: limits.max_fraction,
            reason: held.reason(),
        }
    }

    /// Whether the hold still applies under `now`'s caps: it does unless a
    /// cap was turned off or raised ("raising the setting works too").
    pub fn applies(&self, now: CapLimits) -> bool {
        // Off stays off; on stays on and no higher.
        fn kept<T: PartialOrd + Default>(old: T, new: T) -> bool {
            let off = T::default();
            if old == off {
                new == off
            } else {
                new > off && new <= old
            }
        }
        now.enabled()
            && kept(self.max_deletes, now.max_deletes)
            && kept(self.max_fraction, now.max_fraction)
    }
}

/// The deletion cap of one pass: which deletes may be sent, per bucket, and
/// which buckets it held. Admission happens once per delete, when the
/// dispatcher is about to send it, so a bucket stops at exactly its cap
/// across all shards of the instance. A held delete is not sent and stays
/// unresolved (pending for the next pass), never a halt.
#[derive(Debug, Clone, Default)]
pub struct CapBook {
    limits: CapLimits,
    accounts: std::collections::BTreeMap<String, Account>,
    /// The pass's shards when it runs on some of the 16 only.
    shards: Option<Vec<u8>>,
}

/// The part of a cap of `total` deletes that a pass over `shards` (distinct)
/// may send: the cap spread evenly over the 16 shards, shard `i` getting
/// `⌊(i+1)·total/16⌋ − ⌊i·total/16⌋` (so shards 0-7 of a cap of 10 get 5).
/// The shares of all 16 shards add up to exactly `total`, so passes over
/// disjoint shard sets never send more than it together.
pub fn shard_share(total: u64, shards: &[u8]) -> u64 {
    let n = SHARD_COUNT as u128;
    // At most `total`: i ≤ 16 keeps the quotient within u64.
    let upto = |i: u128| (i * u128::from(total) / n) as u64;
    shards
        .iter()
        .map(|&s| u128::from(s))
        .filter(|&s| s < n)
        .map(|s| upto(s + 1) - upto(s))
        .sum()
}

impl CapBook {
    /// A book for one pass. `entries` are the bucket counts known at pass
    /// start; `approved` buckets are not capped in this pass.
    pub fn new<'a>(
        limits: CapLimits,
        entries: impl IntoIterator<Item = (&'a str, u64)>,
        approved: impl IntoIterator<Item = &'a str>,
    ) -> CapBook {
        let mut accounts = std::collections::BTreeMap::<String, Account>::new();
        for (b, n) in entries {
            let a = accounts.entry(b.to_string()).or_default();
            (a.cap, a.entries) = (limits.cap_for(Some(n)), Some(n));
        }
        for b in approved {
            let a = accounts.entry(b.to_string()).or_default();
            (a.cap, a.approved) = (Some(u64::MAX), true);
        }
        CapBook {
            limits,
            accounts,
            shards: None,
        }
    }

    /// Limits the book to a pass over `shards` only (a `weed admin` job or
    /// `run-once --shards`): each bucket's cap becomes the share of those
    /// shards ([`shard_share`]), so passes over disjoint shard sets, in one
    /// process or several, together never send more than the cap
    /// (docs/design-deviations.md#safety-cap). Call before the holds and
    /// graces are carried over; a pass over all 16 shards is unchanged.
    pub fn for_shards(mut self, shards: &[u8]) -> CapBook {
        let set: Vec<u8> = shards
            .iter()
            .copied()
            .filter(|&s| usize::from(s) < SHARD_COUNT)
            .collect::<std::collections::BTreeSet<u8>>()
            .into_iter()
            .collect();
        if set.len() == SHARD_COUNT {
            return self;
        }
        for a in self.accounts.values_mut().filter(|a| !a.approved) {
            a.cap = a.cap.map(|c| shard_share(c, &set));
        }
        self.shards = Some(set);
        self
    }

    /// A bucket's cap in this pass, `entries` known or not.
    fn cap_of(&self, entries: Option<u64>) -> Option<u64> {
        let cap = self.limits.cap_for(entries);
        match &self.shards {
            Some(set) => cap.map(|c| shard_share(c, set)),
            None => cap,
        }
    }

    /// `bucket`'s account, opened with this pass's cap on first use.
    fn account(&mut self, bucket: &str) -> &mut Account {
        let cap = self.cap_of(None);
        self.accounts
            .entry(bucket.to_string())
            .or_insert_with(|| Account {
                cap,
                ..Account::default()
            })
    }

    /// Carries the holds of earlier passes over: a held bucket sends nothing
    /// in this pass unless approved. Answers the holds that no longer apply
    /// (approved, or the caps were raised or turned off), to be removed.
    pub fn carry_holds(&mut self, holds: &[HoldRecord]) -> Vec<String> {
        let mut released = Vec::new();
        for h in holds {
            let limits = self.limits;
            let a = self.account(&h.bucket);
            if a.approved || !h.applies(limits) {
                released.push(h.bucket.clone());
            } else {
                (a.cap, a.since) = (Some(0), Some(h.held_ns));
            }
        }
        released
    }

    /// Puts `bucket` in its rule-change grace (changed, ends): it is
    /// evaluated dry, every due delete held and counted, nothing sent.
    pub fn grace(&mut self, bucket: &str, changed: Nanos, until: Nanos) {
        let a = self.account(bucket);
        (a.cap, a.grace) = (Some(0), Some((changed, until)));
    }

    /// Whether one more delete of `bucket` may be sent: `None` yes (and it
    /// is counted), `Some(reason)` no (held, counted as held).
    pub fn admit(&mut self, bucket: &str) -> Option<String> {
        if !self.limits.enabled() && !self.accounts.contains_key(bucket) {
            return None;
        }
        let a = self.account(bucket);
        match a.cap {
            Some(cap) if a.sent >= cap => {
                a.held += 1;
                Some(format!(
                    "safety cap: bucket {bucket} reached its cap of {cap} deletes in this pass"
                ))
            }
            _ => {
                a.sent += 1;
                None
            }
        }
    }

    /// The buckets held in this pass, by name.
    pub fn held(&self) -> Vec<Held> {
        self.accounts
            .iter()
            .filter(|(_, a)| a.held > 0 || a.since.is_some() || a.grace.is_some())
            .map(|(b, a)| Held {
                bucket: b.clone(),
                would_delete: a.sent + a.held,
                entries: a.entries,
                cap: a.cap.unwrap_or(0),
                since_ns: a.since,
                grace: a.grace,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap_limits(max_deletes: u64, max_fraction: f64) -> CapLimits {
        CapLimits {
            max_deletes,
            max_fraction,
        }
    }

    /// How many of `n` deletes in `bucket` the book lets through.
    fn admitted(book: &mut CapBook, bucket: &str, n: usize) -> usize {
        (0..n).filter(|_| book.admit(bucket).is_none()).count()
    }

    #[test]
    fn cap_is_the_smaller_setting_and_rounds_down() {
        let both = cap_limits(100, 0.25);
        assert_eq!(both.cap_for(Some(1000)), Some(100));
        assert_eq!(both.cap_for(Some(10)), Some(2));
        assert_eq!(both.cap_for(None), Some(100));
        let frac = cap_limits(0, 0.5);
        assert_eq!(frac.cap_for(Some(7)), Some(3));
        assert_eq!(frac.cap_for(None), None);
        assert!(!CapLimits::default().enabled());
        assert_eq!(CapLimits::default().cap_for(Some(5)), None);
    }

    #[test]
    fn shard_shares_of_a_cap_add_up_to_exactly_the_cap() {
        let all: Vec<u8> = (0..16).collect();
        for total in [0, 1, 5, 15, 16, 17, 100, 100_000] {
            assert_eq!(shard_share(total, &all), total);
            // A split of the 16 shards into disjoint sets.
            let (a, b): (Vec<u8>, Vec<u8>) = all.iter().partition(|&&s| s % 3 == 0);
            assert_eq!(shard_share(total, &a) + shard_share(total, &b), total);
        }
        assert_eq!(shard_share(10, &[0, 1]), 1);
        assert_eq!(shard_share(10, &[14, 15]), 2);
        assert_eq!(shard_share(10, &(0..8).collect::<Vec<u8>>()), 5);
        assert_eq!(shard_share(u64::MAX, &all), u64::MAX);
    }

    /// Regression: the cap counted per process, so two `weed admin` jobs on
    /// disjoint shard sets (or two `run-once --shards` passes) could each
    /// send the whole cap for one bucket, twice the setting together.
    #[test]
    fn passes_over_disjoint_shard_sets_send_at_most_the_cap_together() {
        let limits = cap_limits(10, 0.0);
        let first: Vec<u8> = (0..8).collect();
        let second: Vec<u8> = (8..16).collect();
        let sent = |shards: &[u8]| {
            let mut book = CapBook::new(limits, [("big", 1000)], []).for_shards(shards);
            admitted(&mut book, "big", 100)
        };
        assert_eq!(sent(&first) + sent(&second), 10);
        // Uncounted buckets are split too; a pass over all shards is unchanged.
        let mut book = CapBook::new(limits, [], []).for_shards(&first);
        assert_eq!(admitted(&mut book, "other", 100), 5);
        let all: Vec<u8> = (0..16).collect();
        assert_eq!(sent(&all), 10);
        // Approved buckets stay unlimited.
        let mut book = CapBook::new(limits, [("big", 1000)], ["big"]).for_shards(&first);
        assert_eq!(admitted(&mut book, "big", 100), 100);
    }

    #[test]
    fn a_bucket_stops_at_exactly_its_cap_and_others_go_on() {
        let limits = cap_limits(3, 0.0);
        let mut book = CapBook::new(limits, [("big", 10)], []);
        let sent = admitted(&mut book, "big", 8);
        assert_eq!(sent, 3);
        assert_eq!(admitted(&mut book, "small", 3), 3);
        let held = book.held();
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(
            held[0],
            Held {
                bucket: "big".into(),
                would_delete: 8,
                entries: Some(10),
                cap: 3,
                since_ns: None,
                grace: None,
            }
        );
        assert!(
            held[0]
                .reason()
                .starts_with("safety cap: would delete 8 of 10 (80.0%); stopped at 3."),
            "{}",
            held[0].reason()
        );
        // The next pass: the hold carries over, nothing is sent until approve.
        let rec = HoldRecord::new(&held[0], limits, 77);
        let mut next = CapBook::new(limits, [("big", 7)], []);
        assert!(next.carry_holds(std::slice::from_ref(&rec)).is_empty());
        assert!(next.admit("big").is_some());
        let h = next.held();
        assert_eq!((h[0].would_delete, h[0].since_ns), (1, Some(77)));
        assert!(
            h[0].reason().contains("held by an earlier pass"),
            "{}",
            h[0].reason()
        );
        // Approved, or the cap raised: the hold is released.
        let mut ok = CapBook::new(limits, [], ["big"]);
        assert_eq!(ok.carry_holds(std::slice::from_ref(&rec)), ["big"]);
        assert!(ok.admit("big").is_none());
        let raised = cap_limits(4, 0.0);
        let mut more = CapBook::new(raised, [], []);
        assert_eq!(more.carry_holds(std::slice::from_ref(&rec)), ["big"]);
        assert!(rec.applies(limits));
        assert!(!rec.applies(CapLimits::default()));
        let stricter = cap_limits(2, 0.0);
        assert!(rec.applies(stricter));
        let back = decode_hold(&rec.to_json(), "big").unwrap();
        assert_eq!(back, rec);
        // Approved: no cap in this pass.
        let mut book = CapBook::new(limits, [("big", 10)], ["big"]);
        assert!((0..8).all(|_| book.admit("big").is_none()));
        assert!(book.held().is_empty());
        // Off: nothing is counted.
        let mut off = CapBook::new(CapLimits::default(), [], []);
        assert!(off.admit("big").is_none());
        assert!(off.held().is_empty());
    }

    #[test]
    fn grace_runs_from_a_document_change_and_ends_by_time_or_approve() {
        let g = std::time::Duration::from_secs(100);
        const S: i64 = 1_000_000_000;
        let d = |prev, any, hash, now, approved| {
            grace_decision("b", prev, any, hash, now, now, g, approved)
        };
        // First pass with the setting on: baseline, no grace.
        let base = d(None, false, "h1", 10 * S, false);
        assert_eq!(base.in_grace, None);
        let rec = base.write.expect("baseline recorded");
        assert!(rec.released);
        // Same document later: nothing to write, no grace.
        assert_eq!(
            d(Some(&rec), true, "h1", 20 * S, false),
            GraceDecision::default()
        );
        // Edited: grace from the pass that saw it, for 100 s.
        let edit = d(Some(&rec), true, "h2", 30 * S, false);
        assert_eq!(edit.in_grace, Some((30 * S, 130 * S)));
        let rec2 = edit.write.unwrap();
        assert_eq!((rec2.changed_ns, rec2.released), (30 * S, false));
        assert_eq!(
            d(Some(&rec2), true, "h2", 129 * S, false).in_grace,
            Some((30 * S, 130 * S))
        );
        assert_eq!(
            d(Some(&rec2), true, "h2", 130 * S, false),
            GraceDecision::default()
        );
        // First seen by a pass whose `now` is past the grace's end (a
        // `--now` ahead; `seen` is capped by the real clock): still dry.
        let ahead = grace_decision("b", Some(&rec), true, "h2", 30 * S, 500 * S, g, false);
        assert_eq!(ahead.in_grace, Some((30 * S, 130 * S)));
        let rec3 = ahead.write.unwrap();
        // The next pass at that `now` deletes.
        assert_eq!(
            grace_decision("b", Some(&rec3), true, "h2", 30 * S, 500 * S, g, false).in_grace,
            None
        );
        // Approved during the grace: released and recorded.
        let ok = d(Some(&rec2), true, "h2", 60 * S, true);
        assert_eq!(ok.in_grace, None);
        assert!(ok.write.unwrap().released);
        // A new bucket when others have records: a change.
        assert_eq!(
            d(None, true, "h9", 5 * S, false).in_grace,
            Some((5 * S, 105 * S))
        );
        // Grace 0: never.
        let none = grace_decision(
            "b",
            Some(&rec),
            true,
            "h3",
            1,
            1,
            std::time::Duration::ZERO,
            false,
        );
        assert_eq!(none.in_grace, None);
        // The CapBook holds every delete of a bucket in grace, caps off.
        let mut book = CapBook::new(CapLimits::default(), [("b", 4)], []);
        book.grace("b", 30 * S, 130 * S);
        assert!(book.admit("b").is_some() && book.admit("other").is_none());
        let h = book.held();
        assert_eq!(h.len(), 1);
        assert!(h[0].reason().starts_with("rule change grace: the lifecycle document changed at 1970-01-01T00:00:30Z; the new rules would delete 1 of 4;"), "{}", h[0].reason());
    }

    #[test]
    fn fraction_cap_uses_the_counted_entries() {
        let limits = cap_limits(0, 0.5);
        let mut book = CapBook::new(limits, [("b", 4)], []);
        let sent = admitted(&mut book, "b", 4);
        assert_eq!(sent, 2);
        assert!(
            book.held()[0]
                .reason()
                .contains("would delete 4 of 4 (100.0%)")
        );
        // A bucket never counted is not limited by the fraction.
        assert!((0..4).all(|_| book.admit("uncounted").is_none()));
    }

    #[test]
    fn pause_wins_only_inside_the_selection() {
        assert_eq!(Selection::of("a", [], []), Selection::Run);
        assert_eq!(Selection::of("a", [], ["a"]), Selection::Paused);
        assert_eq!(Selection::of("a", ["a", "b"], ["a"]), Selection::Paused);
        assert_eq!(Selection::of("a", ["b"], ["a"]), Selection::NotSelected);
        assert_eq!(Selection::of("b", ["b"], ["a"]), Selection::Run);
        assert!(Selection::Paused.keeps_state());
        assert!(Selection::NotSelected.keeps_state());
        assert!(!Selection::Run.keeps_state());
    }

    #[test]
    fn pause_record_round_trips_and_is_strict() {
        let r = PauseRecord::new("logs", 1_700_000_000_000_000_000, "typo in rule 2");
        let back = decode_pause(&r.to_json(), "logs").unwrap();
        assert_eq!(back, r);
        let e = decode_pause(&r.to_json(), "other").unwrap_err();
        assert!(e.contains("\"logs\"") && e.contains("\"other\""), "{e}");
        let e = decode_pause(
            b"{\"version\":2,\"bucket\":\"logs\",\"paused_ns\":1}",
            "logs",
        )
        .unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        assert!(decode_pause(b"paused", "logs").is_err());
        assert!(
            decode_pause(
                b"{\"version\":1,\"bucket\":\"logs\",\"paused_ns\":1,\"extra\":1}",
                "logs"
            )
            .is_err()
        );
    }

    #[test]
    fn approval_record_round_trips() {
        let r = ApprovalRecord::new("logs", 5);
        assert_eq!(decode_approval(&r.to_json(), "logs").unwrap(), r);
        assert!(decode_approval(&r.to_json(), "other").is_err());
    }

    #[test]
    fn bucket_names_are_checked_before_they_become_file_names() {
        for ok in ["abc", "my-bucket.2026", "a1b"] {
            assert_eq!(check_bucket_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "ab",
            "../x",
            "a/b",
            "Caps",
            "-ab",
            "ab-",
            &"a".repeat(64),
        ] {
            let e = check_bucket_name(bad).unwrap_err();
            assert!(e.contains("not a valid S3 bucket name"), "{bad}: {e}");
        }
        assert_eq!(bucket_of_pause_file("logs.json"), Some("logs"));
        assert_eq!(bucket_of_pause_file("shard-01"), None);
        assert_eq!(bucket_of_pause_file("x.json"), None);
    }
}
