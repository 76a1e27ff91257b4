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
    /// Bucket.
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
    let mut out = Vec::new();
    for (i, line) in content.split(|&c| c == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push(
            serde_json::from_slice(line)
                .map_err(|e| format!("line {}: not a journal entry ({e})", i + 1))?,
        );
    }
    Ok(out)
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
