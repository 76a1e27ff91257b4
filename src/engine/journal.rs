//! The deletion journal's data, pure: one [`JournalEntry`] per delete the
//! service sent (time, run id, bucket, key, version, rule, action kind,
//! outcome), its JSON-lines encoding, the file and day-directory names of one
//! pass and shard's batch, which day directories a retention drops, and the
//! filter `s3-lifecycled journal` applies. Storing it is
//! `crate::seaweed::controls`'s job (docs/filer-layout.md#journal).

use serde::{Deserialize, Serialize};

use crate::engine::Nanos;

/// One delete the service sent, with its final outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// When the outcome came back, ns since epoch.
    pub ts_ns: Nanos,
    /// The pass.
    pub run_id: String,
    pub bucket: String,
    /// Object key (path within the bucket).
    pub key: String,
    /// Version id; empty for an unversioned object.
    #[serde(default)]
    pub version_id: String,
    /// The rule's ID in the lifecycle document (empty when it has none).
    #[serde(default)]
    pub rule_id: String,
    /// The rule hash (hex), which identifies the rule across ID-less documents.
    pub rule_hash: String,
    /// Action kind (`expiration_days`, …).
    pub kind: String,
    /// Outcome label (`DONE`, `NOOP_RESOLVED`, …).
    pub outcome: String,
    /// The server's reason text, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One line per entry.
pub fn encode_lines(entries: &[JournalEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        if let Ok(line) = serde_json::to_vec(e) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    out
}

/// Parses a batch; an unreadable line is an error naming its number.
pub fn decode_lines(content: &[u8]) -> Result<Vec<JournalEntry>, String> {
    (content.split(|&c| c == b'\n').enumerate())
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
        .map(|(i, line)| {
            serde_json::from_slice(line)
                .map_err(|e| format!("line {}: not a journal entry ({e})", i + 1))
        })
        .collect()
}

/// The day directory of a batch written at `ns` (`YYYY-MM-DD`, UTC).
pub fn day_dir(ns: Nanos) -> String {
    let days = ns.div_euclid(86_400 * 1_000_000_000);
    let date = time::Date::from_julian_day(2_440_588 + days as i32).unwrap_or(time::Date::MIN);
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// The batch file of one pass and shard.
pub fn batch_name(run_id: &str, shard: u8) -> String {
    format!("{run_id}-shard-{shard:02}.jsonl")
}

/// The file of part `part` of one pass and shard's batch: part 0 is
/// [`batch_name`], later parts `<run>-shard-NN.<part>.jsonl`.
pub fn part_name(run_id: &str, shard: u8, part: usize) -> String {
    match part {
        0 => batch_name(run_id, shard),
        _ => format!("{run_id}-shard-{shard:02}.{part}.jsonl"),
    }
}

/// One finished part of a shard's batch, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalPart {
    /// The shard whose deletes it lists.
    pub shard: u8,
    /// Its number within the pass ([`part_name`]).
    pub part: usize,
    /// JSON lines.
    pub bytes: Vec<u8>,
}

/// The journal of a running pass, per shard, handed out in parts of at most
/// `part_bytes` (a single longer line makes a part of its own) as it fills:
/// a pass holds at most one unfinished part per shard, however many
/// deletes it sends (docs/due-index.md#memory).
#[derive(Debug)]
pub struct JournalSpool {
    part_bytes: usize,
    /// Per shard: the next part's number and its lines so far.
    open: std::collections::BTreeMap<u8, (usize, Vec<u8>)>,
}

impl JournalSpool {
    /// A spool cutting parts at `part_bytes`.
    pub fn new(part_bytes: usize) -> JournalSpool {
        JournalSpool {
            part_bytes: part_bytes.max(1),
            open: std::collections::BTreeMap::new(),
        }
    }

    /// Adds one entry to `shard`'s batch; returns the part it completed, if
    /// the entry did not fit in it.
    pub fn push(&mut self, shard: u8, e: &JournalEntry) -> Option<JournalPart> {
        let line = encode_lines(std::slice::from_ref(e));
        let (part, buf) = self.open.entry(shard).or_insert_with(|| (0, Vec::new()));
        let mut done = None;
        if !buf.is_empty() && buf.len() + line.len() > self.part_bytes {
            done = Some(JournalPart {
                shard,
                part: *part,
                bytes: std::mem::take(buf),
            });
            *part += 1;
        }
        buf.extend_from_slice(&line);
        done
    }

    /// The unfinished parts, one per shard with lines, at the end of a pass.
    pub fn finish(self) -> Vec<JournalPart> {
        self.open
            .into_iter()
            .filter(|(_, (_, buf))| !buf.is_empty())
            .map(|(shard, (part, bytes))| JournalPart { shard, part, bytes })
            .collect()
    }
}

/// The day directories a retention drops at `now`: every `YYYY-MM-DD` whose
/// whole day ended more than `retention` ago. 0 keeps everything; other
/// names are never dropped.
pub fn expired_days<'a>(
    days: impl IntoIterator<Item = &'a str>,
    now: Nanos,
    retention: std::time::Duration,
) -> Vec<String> {
    if retention.is_zero() {
        return Vec::new();
    }
    let keep_ns = i64::try_from(retention.as_nanos()).unwrap_or(i64::MAX);
    let cutoff = day_dir(now.saturating_sub(keep_ns));
    days.into_iter()
        .filter(|d| is_day(d) && *d < cutoff.as_str())
        .map(str::to_string)
        .collect()
}

fn is_day(d: &str) -> bool {
    d.len() == 10
        && d.bytes().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// What `s3-lifecycled journal` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalFilter {
    /// Only this bucket.
    pub bucket: Option<String>,
    /// Only keys starting with this.
    pub key_prefix: Option<String>,
    /// Only entries at or after this time (ns).
    pub since_ns: Option<Nanos>,
}

impl JournalFilter {
    /// Whether `e` is shown.
    pub fn matches(&self, e: &JournalEntry) -> bool {
        self.bucket.as_ref().is_none_or(|b| *b == e.bucket)
            && self
                .key_prefix
                .as_ref()
                .is_none_or(|p| e.key.starts_with(p.as_str()))
            && self.since_ns.is_none_or(|t| e.ts_ns >= t)
    }

    /// Whether a day directory can hold matching entries.
    pub fn day_may_match(&self, day: &str) -> bool {
        self.since_ns.is_none_or(|t| day >= day_dir(t).as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400 * 1_000_000_000;

    #[test]
    fn spool_hands_out_bounded_parts_and_keeps_every_entry() {
        // Regression: the journal was buffered whole for the pass; a pass
        // deleting millions held every entry until its end.
        let mut s = JournalSpool::new(1_000);
        let mut parts = Vec::new();
        let mut sent = Vec::new();
        for i in 0..200 {
            let e = entry("b", &format!("k{i:04}"), i);
            sent.push(e.clone());
            parts.extend(s.push((i % 3) as u8, &e));
        }
        assert!(parts.len() > 3, "parts are cut during the pass");
        parts.extend(s.finish());
        let mut got = Vec::new();
        for p in &parts {
            assert!(
                p.bytes.len() <= 1_000,
                "part {} of shard {} too big",
                p.part,
                p.shard
            );
            got.extend(decode_lines(&p.bytes).unwrap());
        }
        got.sort_by_key(|e| e.ts_ns);
        assert_eq!(got, sent);
        // Part numbers per shard are 0, 1, 2, … without gaps.
        for shard in 0..3u8 {
            let mut n: Vec<usize> = parts
                .iter()
                .filter(|p| p.shard == shard)
                .map(|p| p.part)
                .collect();
            n.sort_unstable();
            assert_eq!(n, (0..n.len()).collect::<Vec<_>>());
        }
        assert_eq!(part_name("r", 3, 0), "r-shard-03.jsonl");
        assert_eq!(part_name("r", 3, 2), "r-shard-03.2.jsonl");
    }

    fn entry(bucket: &str, key: &str, ts: Nanos) -> JournalEntry {
        JournalEntry {
            ts_ns: ts,
            run_id: "r1".into(),
            bucket: bucket.into(),
            key: key.into(),
            version_id: String::new(),
            rule_id: "d1".into(),
            rule_hash: "00".into(),
            kind: "expiration_days".into(),
            outcome: "DONE".into(),
            reason: String::new(),
        }
    }

    #[test]
    fn lines_round_trip_and_errors_name_the_line() {
        let es = vec![entry("b", "k1", 1), entry("b", "k2", 2)];
        assert_eq!(decode_lines(&encode_lines(&es)).unwrap(), es);
        let mut bad = encode_lines(&es);
        bad.extend_from_slice(b"oops\n");
        assert!(decode_lines(&bad).unwrap_err().starts_with("line 3:"));
    }

    #[test]
    fn days_and_retention() {
        // 2026-01-02T00:00:00Z
        let t = 1_767_312_000 * 1_000_000_000;
        assert_eq!(day_dir(t), "2026-01-02");
        assert_eq!(day_dir(t - 1), "2026-01-01");
        assert_eq!(batch_name("abc", 3), "abc-shard-03.jsonl");
        let days = [
            "2025-12-30",
            "2025-12-31",
            "2026-01-01",
            "2026-01-02",
            "notes",
        ];
        let r = std::time::Duration::from_secs(86_400);
        assert_eq!(
            expired_days(days, t + DAY / 2, r),
            ["2025-12-30", "2025-12-31"]
        );
        assert!(expired_days(days, t, std::time::Duration::ZERO).is_empty());
    }

    #[test]
    fn filter() {
        let f = JournalFilter {
            bucket: Some("b".into()),
            key_prefix: Some("logs/".into()),
            since_ns: Some(10),
        };
        assert!(f.matches(&entry("b", "logs/a", 10)));
        assert!(!f.matches(&entry("c", "logs/a", 10)));
        assert!(!f.matches(&entry("b", "img/a", 10)));
        assert!(!f.matches(&entry("b", "logs/a", 9)));
        assert!(JournalFilter::default().matches(&entry("x", "y", 0)));
        let since = JournalFilter {
            since_ns: Some(1_767_312_000 * 1_000_000_000),
            ..JournalFilter::default()
        };
        assert!(since.day_may_match("2026-01-02") && !since.day_may_match("2026-01-01"));
    }
}
