//! The persisted cursor's data, pure: one shard's progress ([`ShardCursor`],
//! per bucket [`BucketCursor`], per action [`ActionProgress`]), the Go
//! worker's cursor ([`GoCursor`]), and their strict JSON encoding. Storing
//! them in the filer is `crate::seaweed::cursor`'s job.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::due_index::{DueIndex, merge_ranges};
use super::pending::PendingTally;
use super::time::{Nanos, TimeConfig};

/// The cursor format version this code writes. Version 2 added the per-action
/// due index (docs/due-index.md#format).
pub const CURSOR_VERSION: u32 = 2;

/// The oldest version this code still reads: a version-1 cursor is a version-2
/// one without due indexes, so its first pass reads each action's whole
/// window from its `ts` (no recovery walk) and writes the indexes.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// A 32-byte hash, as standard padded base64 in JSON.
pub type Hash32 = [u8; 32];

/// One shard's progress, as stored in `shard-NN.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardCursor {
    /// Format version: [`CURSOR_VERSION`] when written by this build.
    pub version: u32,
    /// The shard this file belongs to (checked against the file name).
    pub shard_id: u8,
    /// When this cursor was last saved (ns).
    #[serde(default)]
    pub updated_ns: Nanos,
    /// Minimum `ts_ns` over the buckets: for dashboards and Go-style tooling.
    pub ts_ns: Nanos,
    /// Go-compatible global ReplayContentHash.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// Go-compatible global PromotedHash.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk of this shard (ns); 0 = never.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub last_walked_ns: Nanos,
    /// Per-bucket progress.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub buckets: BTreeMap<String, BucketCursor>,
    /// When the master registered each filer, as the last pass that could
    /// ask saw it: a new time is a restart since, and a filer killed
    /// loses the meta-log events it had not flushed
    /// (docs/meta-log.md#filer-restart).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filers: FilerRegistrations,
    /// The Go worker's cursor file of the same shard as the last pass saw
    /// it: a change since is a Go pass since, another enforcer
    /// (docs/go-cursor.md#another-enforcer). `None`: never looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_cursor: Option<GoSeen>,
}

/// The Go worker's cursor file of one shard, as a pass saw it: enough to
/// tell that the Go worker wrote it again. Every Go pass rewrites its
/// shards' files, stamping them with the writer's clock
/// (docs/go-cursor.md#location).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GoSeen {
    /// The file's mtime (s); 0 when there was no file.
    pub mtime_s: i64,
    /// Its `ts_ns`; 0 when there was no file or it did not parse.
    pub ts_ns: Nanos,
}

impl GoSeen {
    /// No file.
    pub const ABSENT: GoSeen = GoSeen {
        mtime_s: 0,
        ts_ns: 0,
    };
}

/// How many filer registrations a cursor keeps ([`ShardCursor::note_filers`]).
pub const MAX_FILERS_KEPT: usize = 64;

/// The filers registered with the master: raw address → registration time
/// (ns, the master's clock).
pub type FilerRegistrations = BTreeMap<String, Nanos>;

/// The filers of `now` that registered anew since `seen` was read: a new
/// registration time (the process restarted) or an address `seen` lacks (a
/// filer back after `seen` was read without it, or a new one). Nothing
/// when `seen` is empty: no earlier reading to compare with.
pub fn registered_anew(seen: &FilerRegistrations, now: &FilerRegistrations) -> Vec<String> {
    if seen.is_empty() {
        return Vec::new();
    }
    now.iter()
        .filter(|&(addr, t)| seen.get(addr) != Some(t))
        .map(|(addr, _)| addr.clone())
        .collect()
}

/// One bucket's progress within a shard.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BucketCursor {
    /// Meta-log position replayed up to (ns).
    pub ts_ns: Nanos,
    /// The bucket's rule-set hash when `ts_ns` was reached.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// The bucket's promoted-rules hash when `ts_ns` was reached.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk of this bucket in this shard (ns); 0 = never.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub last_walked_ns: Nanos,
    /// Why progress on this bucket is halted, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// Wall time (ns) at the start of the last pass in which this shard
    /// finished the bucket without a halt; 0 = never. Buckets whose oldest
    /// stamp over the 16 shards is too old are reported as not enforced
    /// ([`crate::status::stale_buckets`]).
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub completed_ns: Nanos,
    /// Per-action replay progress: `"<rulehash hex>/<kind>"` →
    /// `{ts, through, through_now}` (see [`crate::engine::progress`]).
    #[serde(default, skip_serializing_if = "ActionMap::is_empty")]
    pub rules: ActionMap,
    /// Where an unfinished recovery walk of this bucket resumes; the rest of
    /// this cursor is the state kept until the walk's last segment finishes
    /// (docs/design-deviations.md#resumable-recovery-walks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_resume: Option<WalkResume>,
    /// What the last pass's walk of this bucket found due and left
    /// unresolved, for the forecast (docs/forecast.md#walk-backlog).
    #[serde(default, skip_serializing_if = "WalkBacklog::is_empty")]
    pub backlog: WalkBacklog,
    /// Why this bucket is walked again from the start before its progress
    /// vouches for anything: a pass that deleted in it saw a filer with a
    /// store of its own fail, and such a filer can lose deletes it had
    /// acknowledged, on its own store and on its peers'
    /// (docs/meta-log.md#filer-crash). Cleared by a recovery that finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewalk: Option<String>,
}

/// Due walker matches that a pass left unresolved in one bucket on one
/// shard: held by the deletion cap or a rule-change grace, refused, or never
/// sent once the bucket's walk stopped. Replay counts its own unresolved
/// matches in each action's tally; a walk has no tally, so without this a
/// held recovery walk showed nothing overdue (docs/forecast.md#walk-backlog).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WalkBacklog {
    /// The walk was a recovery: the bucket's `rules` are the state kept from
    /// before it and describe rules that may be gone, so the forecast shows
    /// this backlog in their place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovering: bool,
    /// The listing reached its end, so every due match was counted (false:
    /// a lower bound).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub complete: bool,
    /// Per action, `"<rulehash hex>/<kind>"` → what stayed unresolved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actions: BTreeMap<String, BacklogCount>,
}

impl WalkBacklog {
    /// Nothing to say: not recovering and nothing left.
    pub fn is_empty(&self) -> bool {
        !self.recovering && self.actions.is_empty()
    }
}

/// Unresolved due matches of one action ([`WalkBacklog`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BacklogCount {
    /// The rule's ID (for display).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule_id: String,
    /// Matches.
    pub objects: u64,
    /// Their size in bytes, as listed.
    pub bytes: u64,
    /// The earliest due time among them.
    pub oldest_due_ns: Nanos,
}

impl BacklogCount {
    /// Counts one more match, due at `due`, of `bytes` bytes.
    pub fn add(&mut self, due: Nanos, bytes: u64) {
        self.oldest_due_ns = if self.objects == 0 {
            due
        } else {
            self.oldest_due_ns.min(due)
        };
        self.objects += 1;
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// A bucket's per-action progress, `"<rulehash hex>/<kind>"` → progress,
/// sorted by key and stored as a map in JSON. A sorted `Vec`, not a
/// `BTreeMap`: a bucket has a handful of actions, and every shard keeps a
/// cursor of every bucket, where a B-tree's first leaf took 2 KB whatever it
/// held (docs/due-index.md#per-bucket).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ActionMap(Vec<(String, ActionProgress)>);

impl ActionMap {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&ActionProgress> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key`'s progress, as `BTreeMap::insert`.
    pub fn insert(&mut self, key: String, progress: ActionProgress) {
        match self.find(&key) {
            Ok(i) => self.0[i].1 = progress,
            Err(i) => self.0.insert(i, (key, progress)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ActionProgress)> {
        self.0.iter().map(|(k, p)| (k, p))
    }

    pub fn values(&self) -> impl Iterator<Item = &ActionProgress> {
        self.0.iter().map(|(_, p)| p)
    }
}

impl FromIterator<(String, ActionProgress)> for ActionMap {
    /// As `BTreeMap`'s: sorted, and of equal keys the last one kept.
    fn from_iter<I: IntoIterator<Item = (String, ActionProgress)>>(iter: I) -> Self {
        let mut v: Vec<_> = iter.into_iter().collect();
        v.reverse();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v.shrink_to_fit();
        ActionMap(v)
    }
}

impl std::ops::Index<&str> for ActionMap {
    type Output = ActionProgress;

    fn index(&self, key: &str) -> &ActionProgress {
        self.get(key).expect("no progress under that key")
    }
}

impl Serialize for ActionMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for ActionMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(BTreeMap::<String, ActionProgress>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

/// Persisted replay progress of one compiled action. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionProgress {
    /// Every event at or before this is finished for the action.
    pub ts: Nanos,
    /// Every match due at or before `through_now` of events at or before this
    /// has resolved.
    pub through: Nanos,
    /// The pass time that `through` was established at.
    pub through_now: Nanos,
    /// Events after `ts` whose match for this action resolved but that
    /// `through` does not cover, as sorted `(ts_ns, subject)` pairs (see
    /// [`subject_of`](super::progress::subject_of)): mostly the last seconds inside the reorder margin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<(Nanos, u64)>,
    /// Where the unresolved matches after `ts` are and when they become due,
    /// so a steady pass reads only what is due (docs/due-index.md). `None`
    /// (cursors written before it, or a corrupt one): read from `ts`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::due_index::lenient"
    )]
    pub due: Option<DueIndex>,
    /// What is pending or unresolved in the indexed spans, by due day
    /// (docs/forecast.md). `None` (older cursors, a corrupt one): unknown.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::due_index::lenient"
    )]
    pub pending: Option<PendingTally>,
}

impl ActionProgress {
    /// Progress that says "nothing after `ts` was looked at".
    pub fn at(ts: Nanos) -> ActionProgress {
        ActionProgress {
            ts,
            through: ts,
            through_now: Nanos::MIN,
            tail: Vec::new(),
            due: None,
            pending: None,
        }
    }

    /// Whether a match due at `due`, from an event at `ev_ts` about
    /// `subject`, still needs a decision in this pass (false: it resolved in
    /// an earlier pass).
    pub fn needs(&self, ev_ts: Nanos, subject: u64, due: Nanos) -> bool {
        if ev_ts <= self.ts || self.tail.binary_search(&(ev_ts, subject)).is_ok() {
            return false;
        }
        !(ev_ts <= self.through && due <= self.through_now)
    }

    /// The usable due index for a pass with `time`, if any.
    pub fn usable(&self, time: &TimeConfig) -> Option<&DueIndex> {
        self.due.as_ref().filter(|i| i.usable_for(time))
    }

    /// The meta-log ranges `(since, until]` this action needs in a pass at
    /// `now`, sorted and merged. Without a usable index: `(ts, now]`. With
    /// one: every span due by `now`, and `(index.through, now]`.
    pub fn ranges_for(&self, now: Nanos, time: &TimeConfig) -> Vec<(Nanos, Nanos)> {
        let Some(idx) = self.usable(time) else {
            return merge_ranges(vec![(self.ts, now)]);
        };
        let mut out: Vec<(Nanos, Nanos)> = idx
            .spans
            .iter()
            .filter(|s| s.2 <= now)
            .map(|s| (s.0.saturating_sub(1).max(self.ts), s.1.min(now)))
            .collect();
        out.push((idx.through.max(self.ts), now));
        merge_ranges(out)
    }
}

/// An unfinished recovery walk of one bucket on one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkResume {
    /// Listing position (bucket-relative path) up to which every item's walker
    /// deletes on this shard resolved; the next segment lists after it.
    pub after: String,
    /// `now` of the walk's first segment: the replay after the last segment
    /// vouches only for matches due by it.
    pub first_now: Nanos,
    /// `observed_until` of the walk's first segment.
    pub first_observed_until: Nanos,
    /// The bucket's rule-set hash the walk evaluated; another drops the resume.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// The bucket's promoted hash the walk evaluated.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
}

impl BucketCursor {
    /// A cursor that holds only the resume point of a cold-start bucket's
    /// unfinished recovery walk, or what it left unresolved, or both: no
    /// replay progress, no hashes. It still plans as a cold start.
    pub fn walk_placeholder(resume: Option<WalkResume>, backlog: WalkBacklog) -> BucketCursor {
        BucketCursor {
            walk_resume: resume,
            backlog,
            ..BucketCursor::default()
        }
    }

    /// Marks the bucket to be walked again from the start (`why`: the
    /// first reason is kept). Where an unfinished walk would resume is
    /// dropped: the items behind it may be among the lost deletes.
    pub fn mark_rewalk(&mut self, why: &str) {
        self.rewalk.get_or_insert_with(|| why.to_string());
        self.walk_resume = None;
    }

    /// Whether this is a [`BucketCursor::walk_placeholder`].
    pub fn is_walk_placeholder(&self) -> bool {
        (self.walk_resume.is_some() || !self.backlog.is_empty())
            && self.rules.is_empty()
            && self.ts_ns == 0
            && self.rule_set_hash == [0; 32]
            && self.promoted_hash == [0; 32]
    }
}

/// The Go worker's cursor file (docs/go-cursor.md#format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoCursor {
    /// Always 1.
    pub version: u32,
    pub shard_id: u8,
    /// Meta-log position (ns).
    pub ts_ns: Nanos,
    /// ReplayContentHash.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// PromotedHash.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk (ns); omitted when 0.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub last_walked_ns: Nanos,
}

/// serde adapter: `[u8; 32]` ⇄ standard base64 with padding, refusing any
/// other length (a truncated hash must not pass as a valid one).
mod b64 {
    use super::{Hash32, STANDARD};
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(h: &Hash32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(h))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Hash32, D::Error> {
        let s = String::deserialize(d)?;
        let bytes = STANDARD
            .decode(s.as_bytes())
            .map_err(|e| D::Error::custom(format!("hash {s:?} is not standard base64: {e}")))?;
        let len = bytes.len();
        bytes.try_into().map_err(|_| {
            D::Error::custom(format!(
                "hash {s:?} decodes to {len} bytes, expected exactly 32"
            ))
        })
    }
}

impl ShardCursor {
    /// The latest pass time (`through_now`) any action's progress was saved
    /// at; 0 for a cursor with none.
    pub fn latest_pass_now(&self) -> Nanos {
        let progress = self.buckets.values().flat_map(|b| b.rules.values());
        progress.map(|p| p.through_now).max().unwrap_or(0)
    }

    /// Marks each of `buckets` to be walked again from the start
    /// ([`BucketCursor::mark_rewalk`]); a bucket without a cursor yet gets
    /// one that holds only the mark (docs/meta-log.md#filer-crash).
    pub fn mark_rewalk<'a>(&mut self, buckets: impl IntoIterator<Item = &'a str>, why: &str) {
        for b in buckets {
            self.buckets
                .entry(b.to_string())
                .or_default()
                .mark_rewalk(why);
        }
    }

    /// Compares the filers registered `now` with those this cursor last
    /// saw: when one registered anew since ([`registered_anew`]), every
    /// bucket it holds state for is marked to be walked again, since events
    /// of its objects may be among those the restarted filer never flushed
    /// (docs/meta-log.md#filer-restart). A bucket this pass leaves alone
    /// (paused, not in `pass.buckets`) keeps the mark until a pass takes it.
    /// Then remembers `now`, keeping the filers missing from it (one down
    /// now may come back restarted). Returns the filers that registered
    /// anew.
    pub fn note_filers(&mut self, now: &FilerRegistrations) -> Vec<String> {
        let anew = registered_anew(&self.filers, now);
        if !anew.is_empty() {
            let why = format!(
                "filer {} registered with the master anew since this shard's last pass \
                 (a restart): events it had not flushed to its meta-log may be lost",
                anew.join(", ")
            );
            for b in self.buckets.values_mut() {
                b.mark_rewalk(&why);
            }
        }
        self.filers
            .extend(now.iter().map(|(addr, t)| (addr.clone(), *t)));
        // Filers that come back under new addresses (a rescheduled pod)
        // would pile up: past the bound, the absent ones registered longest
        // ago go first. One of those back after all counts as new.
        while self.filers.len() > MAX_FILERS_KEPT {
            let oldest_absent = self
                .filers
                .iter()
                .filter(|(addr, _)| !now.contains_key(*addr))
                .min_by_key(|(_, t)| **t)
                .map(|(addr, _)| addr.clone());
            match oldest_absent {
                Some(addr) => self.filers.remove(&addr),
                None => break,
            };
        }
        anew
    }

    /// The file content: two-space indented JSON and a trailing newline, like
    /// Go's encoder, so operators can diff it with Go-written files.
    pub fn to_json(&self) -> Vec<u8> {
        super::safety::record_json(self)
    }
}

/// The name of shard `shard`'s file: `shard-NN.json`.
pub fn file_name(shard: u8) -> String {
    format!("shard-{shard:02}.json")
}

/// Parses and checks a cursor file's content for `shard`. The error string
/// says what is wrong (the caller adds the path and the fix).
pub fn decode_cursor(content: &[u8], shard: u8) -> Result<ShardCursor, String> {
    let version = peek_version(content)?;
    if version < u64::from(OLDEST_READABLE_VERSION) || version > u64::from(CURSOR_VERSION) {
        return Err(format!(
            "format version {version} is not supported (this build reads versions {OLDEST_READABLE_VERSION} to {CURSOR_VERSION}); a newer build wrote it, or the file is damaged"
        ));
    }
    decode_shard(content, shard, "cursor", |c: &ShardCursor| c.shard_id)
}

/// Parses and checks a Go cursor file's content, as strictly as Go does.
pub fn decode_go_cursor(content: &[u8], shard: u8) -> Result<GoCursor, String> {
    let version = peek_version(content)?;
    if version != 1 {
        return Err(format!("Go cursor version {version} is not 1"));
    }
    decode_shard(content, shard, "Go cursor", |c: &GoCursor| c.shard_id)
}

/// Parses a `what` file and checks it is the one of `shard`.
fn decode_shard<T: serde::de::DeserializeOwned>(
    content: &[u8],
    shard: u8,
    what: &str,
    shard_of: impl Fn(&T) -> u8,
) -> Result<T, String> {
    let c: T = serde_json::from_slice(content).map_err(|e| format!("invalid {what} JSON: {e}"))?;
    match shard_of(&c) {
        id if id == shard => Ok(c),
        id => Err(format!(
            "it holds shard_id {id} but is the file of shard {shard}"
        )),
    }
}

/// Reads only `version`, so a future format gets a "version not supported"
/// message rather than a confusing field error; an empty file says so.
fn peek_version(content: &[u8]) -> Result<u64, String> {
    if content.iter().all(u8::is_ascii_whitespace) {
        return Err("the file is empty".into());
    }
    #[derive(Deserialize)]
    struct V {
        version: Option<u64>,
    }
    let v: V = serde_json::from_slice(content).map_err(|e| format!("invalid JSON: {e}"))?;
    v.version
        .ok_or_else(|| "the \"version\" field is missing".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DueRounding;
    use base64::Engine as _;

    fn day2400() -> TimeConfig {
        TimeConfig {
            day: std::time::Duration::from_nanos(2400),
            rounding: DueRounding::None,
        }
    }

    fn with(ts: Nanos, idx: DueIndex) -> ActionProgress {
        let mut p = ActionProgress::at(ts);
        p.due = Some(idx);
        p
    }

    #[test]
    fn without_an_index_the_whole_window_is_read() {
        let p = ActionProgress::at(10);
        assert_eq!(p.ranges_for(500, &day2400()), vec![(10, 500)]);
    }

    #[test]
    fn spans_due_by_now_and_the_new_tail_are_read_and_merged() {
        let idx = DueIndex {
            spans: vec![
                (100, 199, 450),
                (200, 299, 9_000),
                (300, 399, 480),
                (400, 499, 100),
            ],
            ..DueIndex::empty(&day2400(), 600)
        };
        let p = with(50, idx);
        // (99,199] and (399,499] are due; (299,399] is due too and touches the
        // next one; (200,299] is not due.
        assert_eq!(
            p.ranges_for(700, &day2400()),
            vec![(99, 199), (299, 499), (600, 700)]
        );
        // At 460 only the first and last span are due.
        assert_eq!(p.ranges_for(460, &day2400()), vec![(99, 199), (399, 460)]);
    }

    #[test]
    fn an_index_of_another_day_length_or_rounding_is_not_used() {
        let mut idx = DueIndex::empty(&day2400(), 600);
        idx.day_ns = 1;
        assert_eq!(
            with(50, idx.clone()).ranges_for(700, &day2400()),
            vec![(50, 700)]
        );
        idx.day_ns = day2400().day_ns();
        idx.rounding = DueRounding::NextDay;
        assert_eq!(with(50, idx).ranges_for(700, &day2400()), vec![(50, 700)]);
    }

    fn sample() -> ShardCursor {
        let mut buckets = BTreeMap::new();
        buckets.insert(
            "b1".to_string(),
            BucketCursor {
                ts_ns: 5,
                rule_set_hash: [1; 32],
                promoted_hash: [0; 32],
                ..Default::default()
            },
        );
        ShardCursor {
            version: 1,
            shard_id: 3,
            updated_ns: 9,
            ts_ns: 5,
            rule_set_hash: [0xff; 32],
            promoted_hash: [0; 32],
            last_walked_ns: 0,
            buckets,
            filers: Default::default(),
            go_cursor: None,
        }
    }

    #[test]
    fn json_uses_padded_standard_base64_and_omits_defaults() {
        let json = String::from_utf8(sample().to_json()).unwrap();
        // 32 × 0xff → standard alphabet ('/', not URL-safe '_'), one '=' of padding.
        let ff = "//////////////////////////////////////////8=";
        assert_eq!(ff.len(), 44);
        assert!(
            json.contains(&format!("\"rule_set_hash\": \"{ff}\"")),
            "{json}"
        );
        assert!(
            json.contains(&format!("\"promoted_hash\": \"{}=\"", "A".repeat(43))),
            "{json}"
        );
        assert!(!json.contains("last_walked_ns"), "{json}");
        assert!(!json.contains("halted"), "{json}");
        assert!(!json.contains("\"rules\""), "{json}");
        assert!(!json.contains("walk_resume"), "{json}");
        assert!(json.ends_with("}\n"));
        assert!(
            json.starts_with("{\n  \"version\": 1,\n  \"shard_id\": 3,"),
            "{json}"
        );
        assert_eq!(decode_cursor(json.as_bytes(), 3).unwrap(), sample());
    }

    #[test]
    fn optional_fields_round_trip_when_set() {
        let mut c = sample();
        c.last_walked_ns = 77;
        let b = c.buckets.get_mut("b1").unwrap();
        b.halted = Some("RETRY_LATER on k".into());
        b.rules.insert(
            "0011223344556677/expiration_days".into(),
            ActionProgress::at(42),
        );
        b.walk_resume = Some(WalkResume {
            after: "a/b.versions".into(),
            first_now: 10,
            first_observed_until: 9,
            rule_set_hash: [3; 32],
            promoted_hash: [4; 32],
        });
        let json = c.to_json();
        assert_eq!(decode_cursor(&json, 3).unwrap(), c);
    }

    #[test]
    fn older_file_without_new_fields_still_reads() {
        let h = STANDARD.encode([2u8; 32]);
        let json = format!(
            r#"{{"version":1,"shard_id":0,"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}",
               "buckets":{{"b":{{"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}"}}}}}}"#
        );
        let c = decode_cursor(json.as_bytes(), 0).unwrap();
        assert_eq!(c.updated_ns, 0);
        assert_eq!(c.buckets["b"].halted, None);
        assert!(c.buckets["b"].rules.is_empty());
    }

    #[test]
    fn strict_decoding_errors_say_what_is_wrong() {
        let good = sample().to_json();
        assert!(decode_cursor(b"", 3).unwrap_err().contains("empty"));
        assert!(
            decode_cursor(b"{not json", 3)
                .unwrap_err()
                .contains("invalid JSON")
        );
        assert!(decode_cursor(&good, 4).unwrap_err().contains("shard_id 3"));
        let v3 = String::from_utf8(good.clone())
            .unwrap()
            .replace("\"version\": 1", "\"version\": 3");
        assert!(
            decode_cursor(v3.as_bytes(), 3)
                .unwrap_err()
                .contains("version 3")
        );
        let short = String::from_utf8(good).unwrap().replace(
            "//////////////////////////////////////////8=",
            &STANDARD.encode([1u8; 31]),
        );
        let err = decode_cursor(short.as_bytes(), 3).unwrap_err();
        assert!(err.contains("31 bytes"), "{err}");
    }

    #[test]
    fn version_1_cursor_reads_without_due_index_and_a_corrupt_index_is_dropped() {
        let h = STANDARD.encode([2u8; 32]);
        let json = format!(
            r#"{{"version":1,"shard_id":0,"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}",
               "buckets":{{"b":{{"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}",
               "rules":{{"r/expiration_days":{{"ts":1,"through":1,"through_now":5}}}}}}}}}}"#
        );
        let c = decode_cursor(json.as_bytes(), 0).unwrap();
        assert_eq!(c.version, 1);
        assert!(c.buckets["b"].rules["r/expiration_days"].due.is_none());
        let bad = json.replace("\"version\":1", "\"version\":2").replace(
            "\"through_now\":5",
            "\"through_now\":5,\"due\":{\"spans\":\"garbage\"}",
        );
        let c = decode_cursor(bad.as_bytes(), 0).unwrap();
        assert!(c.buckets["b"].rules["r/expiration_days"].due.is_none());
    }

    #[test]
    fn go_cursor_format_matches_docs() {
        let go = GoCursor {
            version: 1,
            shard_id: 3,
            ts_ns: 1_700_000_000_000_000_123,
            rule_set_hash: [0; 32],
            promoted_hash: [0; 32],
            last_walked_ns: 0,
        };
        let mut json = serde_json::to_string_pretty(&go).unwrap();
        json.push('\n');
        let zero = format!("{}=", "A".repeat(43));
        assert_eq!(
            json,
            format!(
                "{{\n  \"version\": 1,\n  \"shard_id\": 3,\n  \"ts_ns\": 1700000000000000123,\n  \
                 \"rule_set_hash\": \"{zero}\",\n  \"promoted_hash\": \"{zero}\"\n}}\n"
            )
        );
        assert_eq!(decode_go_cursor(json.as_bytes(), 3).unwrap(), go);
        assert!(decode_go_cursor(json.as_bytes(), 2).is_err());
    }

    fn regs(pairs: &[(&str, Nanos)]) -> FilerRegistrations {
        pairs.iter().map(|(a, t)| (a.to_string(), *t)).collect()
    }

    /// A filer SIGKILLed between two passes and started again on its store
    /// lost the events it had not flushed to its meta-log; replay from the
    /// cursor never saw the objects they created, and nothing walked them
    /// (docs/meta-log.md#filer-restart).
    #[test]
    fn a_filer_restarted_between_passes_left_its_unflushed_objects_for_good() {
        let mut c = sample();
        c.buckets.insert("other".into(), BucketCursor::default());
        c.filers = regs(&[("f1:8888", 100), ("f2:8888", 200)]);
        // f1 restarted.
        let now = regs(&[("f1:8888", 150), ("f2:8888", 200)]);
        let anew = c.note_filers(&now);
        assert_eq!(anew, ["f1:8888"]);
        // Every bucket, "other" too: one a pass leaves alone (paused, not
        // selected) keeps the mark for the pass that takes it.
        assert!(c.buckets.len() >= 2);
        assert!(c.buckets.values().all(|b| b.rewalk.is_some()));
        assert!(
            c.buckets
                .values()
                .flat_map(|b| &b.rewalk)
                .all(|why| why.contains("f1:8888"))
        );
        assert_eq!(c.filers, now);
        // The same registrations at the next pass: nothing new.
        let mut again = c.clone();
        assert!(again.note_filers(&now).is_empty());
        assert_eq!(again, c);
    }

    #[test]
    fn filers_registered_anew_are_restarts_and_returns_never_a_first_reading() {
        let seen = regs(&[("a", 1), ("b", 2)]);
        assert!(
            registered_anew(&FilerRegistrations::new(), &seen).is_empty(),
            "no earlier reading"
        );
        assert!(registered_anew(&seen, &seen).is_empty());
        // b is down now: nothing to say yet, and it stays remembered.
        assert!(registered_anew(&seen, &regs(&[("a", 1)])).is_empty());
        let mut c = ShardCursor {
            filers: seen.clone(),
            ..Default::default()
        };
        c.note_filers(&regs(&[("a", 1)]));
        assert_eq!(c.filers, seen, "a filer down now is kept");
        // b back with a new registration, c new: both may have lost events.
        assert_eq!(
            registered_anew(&seen, &regs(&[("a", 1), ("b", 3), ("c", 9)])),
            ["b", "c"]
        );
    }

    #[test]
    fn filers_gone_for_good_do_not_pile_up_in_the_cursor() {
        let mut c = ShardCursor::default();
        // A filer rescheduled under a new address every day for a year.
        for day in 0..365 {
            let now = regs(&[("stable:8888", 1), (&format!("pod-{day}:8888"), 10 + day)]);
            c.note_filers(&now);
        }
        assert_eq!(c.filers.len(), MAX_FILERS_KEPT);
        assert!(
            c.filers.contains_key("stable:8888"),
            "a filer up now is kept"
        );
        assert!(c.filers.contains_key("pod-364:8888"));
        assert!(
            !c.filers.contains_key("pod-0:8888"),
            "the oldest absent ones went"
        );
    }

    #[test]
    fn a_cursor_without_filers_reads_and_writes_as_before() {
        let c = sample();
        let json = String::from_utf8(c.to_json()).unwrap();
        assert!(!json.contains("filers"), "{json}");
        let mut with = c.clone();
        with.filers = regs(&[("127.0.0.1:8888.18888", 7)]);
        let back: ShardCursor = serde_json::from_slice(&with.to_json()).unwrap();
        assert_eq!(back, with);
    }

    /// A bucket's per-action progress was a `BTreeMap`: 2 KB of B-tree leaf
    /// per bucket and shard whatever it held (docs/due-index.md#per-bucket).
    /// The sorted `Vec` in its place reads and writes the same JSON, keeps
    /// its keys in order, and like the map keeps the last of equal keys.
    #[test]
    fn per_bucket_progress_took_a_b_tree_leaf_of_2_kb_per_shard() {
        let entries = [("b/x", 3), ("a/y", 1), ("b/x", 5), ("c/z", 2)];
        let as_map: BTreeMap<String, ActionProgress> = entries
            .iter()
            .map(|(k, t)| (k.to_string(), ActionProgress::at(*t)))
            .collect();
        let mut ours: ActionMap = entries
            .iter()
            .map(|(k, t)| (k.to_string(), ActionProgress::at(*t)))
            .collect();
        let json = serde_json::to_string(&ours).unwrap();
        assert_eq!(json, serde_json::to_string(&as_map).unwrap());
        assert_eq!(serde_json::from_str::<ActionMap>(&json).unwrap(), ours);
        assert_eq!(ours.len(), 3);
        assert_eq!(ours["b/x"].ts, 5, "the last of equal keys");
        let keys: Vec<&String> = ours.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a/y", "b/x", "c/z"]);
        ours.insert("b/w".into(), ActionProgress::at(9));
        ours.insert("c/z".into(), ActionProgress::at(7));
        assert_eq!(
            ours.values().map(|p| p.ts).collect::<Vec<_>>(),
            [1, 9, 5, 7]
        );
        assert!(ours.contains_key("b/w") && ours.get("b/v").is_none());
    }
}
