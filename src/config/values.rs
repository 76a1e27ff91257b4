//! Value forms shared by every section: durations, lists, filer paths.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::engine::DueRounding;

/// The longest duration accepted: the hand-written parser this replaced took
/// at most `u32::MAX` of a unit, so `4294967295d`. Kept as a ceiling so a
/// slipped digit (`99999999999d`) is still an error rather than a schedule
/// that never fires.
pub(super) const MAX_DURATION: Duration = Duration::from_secs(u32::MAX as u64 * 86_400);

/// Parses durations such as `24h`, `10s`, `1h30m`, `2d`, `250ms` or `0`:
/// numbers with units `ms`, `s`, `m` (minutes), `h` and `d`, summed, with
/// surrounding whitespace ignored. Parsing is `humantime`'s, so its longer
/// spellings (`90sec`, `5min`, `1h 30m`, `1week`, …) work too; mind that its
/// `M` is months. A bare number other than `0` is refused: without a unit it
/// is ambiguous (a TOML integer, by contrast, is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const HINT: &str = "use e.g. 24h, 10s, 1h30m, 250ms or 0";
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration ({e}); {HINT}"))?;
    if d > MAX_DURATION {
        return Err(format!(
            "`{s}` is too long a duration (at most 4294967295d); {HINT}"
        ));
    }
    Ok(d)
}

/// A list of names: a TOML array, or one comma-separated string (how an
/// environment override arrives). Empty items are dropped.
pub(super) fn de_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        Text(String),
        Int(i64),
        Float(f64),
        Bool(bool),
    }
    impl Item {
        fn text(self) -> String {
            match self {
                Item::Text(s) => s,
                Item::Int(n) => n.to_string(),
                Item::Float(f) => f.to_string(),
                Item::Bool(b) => b.to_string(),
            }
        }
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(Item),
        Many(Vec<Item>),
    }
    let items: Vec<String> = match Raw::deserialize(d)? {
        Raw::One(i) => i.text().split(',').map(str::to_string).collect(),
        Raw::Many(v) => v.into_iter().map(Item::text).collect(),
    };
    Ok(items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Secs(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        Raw::Secs(n) => Ok(Duration::from_secs(n)),
    }
}

/// `time.due_rounding`, with an error that lists the two values (serde's own
/// names the Rust enum and its "variant constructor", not the choices).
pub(super) fn de_due_rounding<'de, D: Deserializer<'de>>(d: D) -> Result<DueRounding, D::Error> {
    match String::deserialize(d)?.trim() {
        "next_day" => Ok(DueRounding::NextDay),
        "none" => Ok(DueRounding::None),
        other => Err(serde::de::Error::custom(format!(
            "`{other}` is not a due rounding; use next_day (round a due time up to the next \
             day boundary, as AWS) or none (exactly n days after, as the Go worker)"
        ))),
    }
}

/// `path` with empty and `.` segments dropped and `..` applied, as the filer resolves it
/// (`//a/./b/../c/` → `/a/c`).
pub(super) fn normalize_filer_path(path: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    format!("/{}", segs.join("/"))
}
