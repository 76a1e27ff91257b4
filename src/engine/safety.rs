//! Safety rails, pure: which buckets a pass leaves alone because an operator
//! paused them ([`PauseRecord`], [`Selection`]), the strict JSON of a pause
//! file, and the check of a bucket name used as a file name. Storing the
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

    /// The file content (pretty JSON and a newline, for `weed shell fs.cat`).
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
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

/// Parses a pause file found under the name of `bucket`. The error says what
/// is wrong (the caller adds the path and the fix).
pub fn decode_pause(content: &[u8], bucket: &str) -> Result<PauseRecord, String> {
    let r: PauseRecord =
        serde_json::from_slice(content).map_err(|e| format!("not a pause record ({e})"))?;
    if r.version != PAUSE_VERSION {
        return Err(format!(
            "version {} is not {PAUSE_VERSION}, the only one this build reads",
            r.version
        ));
    }
    if r.bucket != bucket {
        return Err(format!(
            "it names bucket {:?}, but its file name is for {bucket:?}",
            r.bucket
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

#[cfg(test)]
mod tests {
    use super::*;

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
