//! The forecast (docs/forecast.md): per bucket, rule and kind, what is overdue
//! now and what becomes due on each of the next days, summed from the pending
//! tallies ([`super::pending`]) in every shard's cursor. It never lists a
//! bucket: the counts are what replay saw when it read each event.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cursor::ShardCursor;
use super::time::{Nanos, TimeConfig};

/// Objects and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// Matches.
    pub objects: u64,
    /// Their size in bytes (at the time their event was read).
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, n: u64, bytes: u64) {
        self.objects += n;
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// One day of a forecast: what becomes due in `(due_by − day, due_by]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    /// 1 = the first day after `now`.
    pub day: u32,
    /// End of the day (ns): everything counted is due by then.
    pub due_by_ns: Nanos,
    /// What becomes due that day.
    #[serde(flatten)]
    pub count: Count,
}

/// The forecast of one bucket's rule and action kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleForecast {
    pub bucket: String,
    /// Rule ID (empty when the rule has none).
    pub rule_id: String,
    /// Rule hash (hex), as in the cursor.
    pub rule_hash: String,
    /// Action kind (`expiration`, `noncurrent_days`, …).
    pub kind: String,
    /// False when some shard has no usable tally for the action (a cursor
    /// written before forecasts, or another `time.*`): the counts below are
    /// then a lower bound.
    pub known: bool,
    /// Due at or before `now` and not done yet: paused, held by a cap or
    /// grace, halted, dry, or waiting for the next pass.
    pub overdue: Count,
    /// The earliest due time among the overdue matches.
    pub oldest_overdue_ns: Option<Nanos>,
    /// Per day from `now`, `days` entries (zeros included).
    pub days: Vec<DayCount>,
    /// Due after the last day shown.
    pub later: Count,
}

impl RuleForecast {
    /// Counts `n` overdue matches of `bytes`, the earliest due at `first`.
    fn overdue_by(&mut self, n: u64, bytes: u64, first: Nanos) {
        if n == 0 {
            return;
        }
        self.overdue.add(n, bytes);
        self.oldest_overdue_ns = Some(self.oldest_overdue_ns.map_or(first, |o| o.min(first)));
    }

    /// Matches not due yet (every day shown plus later).
    pub fn pending(&self) -> u64 {
        self.days.iter().map(|d| d.count.objects).sum::<u64>() + self.later.objects
    }

    /// Age (s) of the oldest overdue match at `now`, 0 without one.
    pub fn oldest_overdue_age_secs(&self, now: Nanos) -> f64 {
        self.oldest_overdue_ns
            .map_or(0.0, |t| now.saturating_sub(t).max(0) as f64 / 1e9)
    }
}

/// Most days a forecast shows.
pub const MAX_DAYS: u32 = 3660;

/// A forecast asked for a number of days outside 1 to [`MAX_DAYS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} is out of range; give 1 to {MAX_DAYS} days")]
pub struct DaysOutOfRange(pub u32);

/// Checks how many days a forecast is asked to show.
pub fn check_days(days: u32) -> Result<u32, DaysOutOfRange> {
    (1..=MAX_DAYS)
        .contains(&days)
        .then_some(days)
        .ok_or(DaysOutOfRange(days))
}

/// What the forecast says about its own precision (docs/forecast.md#imprecision).
pub const CAVEAT: &str = "counts are of matches seen by replay when their event was read; an object \
     overwritten or deleted since is still counted until the pass that re-reads it. Rules a \
     walk enforces (walker-only kinds, and rules whose days reach back past the meta-log the \
     filer keeps) are not counted: only what a walk left undeleted shows, as overdue";

/// A whole forecast: `forecast --json`, the admin API, `/status.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    /// As of (ns).
    pub now_ns: Nanos,
    /// `time.day` in seconds (the width of a day).
    pub day_seconds: f64,
    pub days: u32,
    /// Shards without a cursor (cold): their buckets' counts are missing.
    #[serde(default)]
    pub cold_shards: Vec<u8>,
    /// The known imprecision, stated.
    #[serde(default)]
    pub caveat: String,
    /// Per bucket, rule and action kind.
    #[serde(default)]
    pub rules: Vec<RuleForecast>,
}

// `day_seconds` is finite and never NaN (a validated `time.day`).
impl Eq for Forecast {}

impl Forecast {
    /// The forecast from every shard's cursor (`None`: cold shard).
    pub fn of(
        cursors: &[Option<ShardCursor>],
        time: &TimeConfig,
        now: Nanos,
        days: u32,
        bucket: Option<&str>,
    ) -> Forecast {
        let cold_shards = (0u8..)
            .zip(cursors)
            .filter(|(_, c)| c.is_none())
            .map(|(i, _)| i)
            .collect();
        let loaded: Vec<ShardCursor> = cursors.iter().flatten().cloned().collect();
        Forecast {
            now_ns: now,
            day_seconds: time.day.as_secs_f64(),
            days,
            cold_shards,
            caveat: CAVEAT.to_string(),
            rules: forecast(&loaded, time, now, days, bucket),
        }
    }
}

/// Splits a progress key `"<rulehash hex>/<kind>"`.
fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or((key, ""))
}

/// The forecast entry of `bucket`'s action `key`, made empty (known, zero
/// counts, `days` days of width `d` from `now`) on first use.
fn entry<'a>(
    out: &'a mut BTreeMap<(String, String, String), RuleForecast>,
    b: &str,
    key: &str,
    now: Nanos,
    d: Nanos,
    days: u32,
) -> &'a mut RuleForecast {
    let (hash, kind) = split_key(key);
    out.entry((b.to_string(), hash.to_string(), kind.to_string()))
        .or_insert_with(|| RuleForecast {
            bucket: b.to_string(),
            rule_hash: hash.to_string(),
            kind: kind.to_string(),
            known: true,
            days: (1..=days)
                .map(|i| DayCount {
                    day: i,
                    due_by_ns: now.saturating_add(d.saturating_mul(i64::from(i))),
                    count: Count::default(),
                })
                .collect(),
            ..RuleForecast::default()
        })
}

/// The forecast at `now` for `days` days of `time.day`, from every shard's
/// cursor, per bucket, rule and kind (sorted); only `bucket` when given.
pub fn forecast(
    cursors: &[ShardCursor],
    time: &TimeConfig,
    now: Nanos,
    days: u32,
    bucket: Option<&str>,
) -> Vec<RuleForecast> {
    let d = time.day_ns();
    let mut out: BTreeMap<(String, String, String), RuleForecast> = BTreeMap::new();
    for c in cursors {
        for (b, bc) in &c.buckets {
            if bucket.is_some_and(|want| want != b) {
                continue;
            }
            // A recovering bucket's `rules` are the state kept from before
            // the change; what its walk left is the truth
            // (docs/forecast.md#walk-backlog).
            let rules = (!bc.backlog.recovering).then_some(&bc.rules);
            for (key, p) in rules.iter().flat_map(|r| r.iter()) {
                let f = entry(&mut out, b, key, now, d, days);
                let Some(t) = p.pending.as_ref().filter(|t| t.usable_for(time)) else {
                    f.known = false;
                    continue;
                };
                f.known &= t.complete;
                if f.rule_id.is_empty() {
                    f.rule_id = t.rule_id.clone();
                }
                for &(by, n, bytes, first) in t.bins() {
                    if first <= now {
                        f.overdue_by(n, bytes, first);
                        continue;
                    }
                    // Day i holds what is due in (now + (i−1)·day, now + i·day].
                    let i = (by - now).saturating_add(d - 1) / d;
                    match usize::try_from(i - 1).ok().and_then(|i| f.days.get_mut(i)) {
                        Some(day) => day.count.add(n, bytes),
                        None => f.later.add(n, bytes),
                    }
                }
            }
            for (key, held) in &bc.backlog.actions {
                let f = entry(&mut out, b, key, now, d, days);
                // A recovery walk counts only what is due: the days after
                // `now` are unknown until it finishes.
                f.known &= !bc.backlog.recovering && bc.backlog.complete;
                if f.rule_id.is_empty() {
                    f.rule_id = held.rule_id.clone();
                }
                f.overdue_by(held.objects, held.bytes, held.oldest_due_ns);
            }
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::due_index::DueIndex;
    use crate::engine::due_index::tests::time;
    use crate::engine::pending::Observed;
    use crate::engine::pending::tests::first_tally;

    #[test]
    fn days_out_of_range_name_the_range() {
        assert_eq!(
            check_days(0).unwrap_err().to_string(),
            "0 is out of range; give 1 to 3660 days"
        );
        assert!(check_days(MAX_DAYS + 1).is_err());
        assert_eq!(check_days(30), Ok(30));
        assert_eq!(check_days(MAX_DAYS), Ok(MAX_DAYS));
    }

    #[test]
    fn forecast_splits_overdue_days_and_later() {
        use crate::engine::cursor::ActionProgress;
        use crate::engine::cursor::BucketCursor;
        let t = time();
        let mut tally = first_tally(&DueIndex::empty(&t, 0), 0, &Observed::new());
        tally.rule_id = "r1".into();
        tally.spans.insert(
            100,
            vec![
                (2400, 2, 20, 2000),
                (4800, 1, 5, 4800),
                (9600, 3, 9, 9000),
                (99_999_600, 1, 1, 99_999_000),
            ],
        );
        let mut p = ActionProgress::at(0);
        p.pending = Some(tally);
        let mut bc = BucketCursor::default();
        bc.rules.insert("abcd/expiration".into(), p);
        let mut unknown = ActionProgress::at(0);
        unknown.pending = None;
        bc.rules.insert("ef01/noncurrent_days".into(), unknown);
        let cursor = ShardCursor {
            version: 2,
            buckets: [("b".to_string(), bc)].into(),
            ..Default::default()
        };
        let f = forecast(&[cursor], &t, 2400, 3, None);
        assert_eq!(f.len(), 2);
        let r = &f[0];
        assert_eq!(
            (r.rule_id.as_str(), r.kind.as_str(), r.known),
            ("r1", "expiration", true)
        );
        assert_eq!(
            r.overdue,
            Count {
                objects: 2,
                bytes: 20
            }
        );
        assert_eq!(r.oldest_overdue_ns, Some(2000));
        let per_day: Vec<u64> = r.days.iter().map(|d| d.count.objects).collect();
        assert_eq!(per_day, vec![1, 0, 3]);
        assert_eq!(r.later.objects, 1);
        assert_eq!(r.pending(), 5);
        assert!(!f[1].known);
    }
}
