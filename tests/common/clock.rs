//! Time for tests: the wall clock (test support may read it; the engine may not), RFC 3339 for
//! `--now`, lifecycle-day arithmetic, and waiting for the wall clock to pass an instant.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One second in ns.
pub const SEC_NS: i64 = 1_000_000_000;
/// One hour in ns.
pub const HOUR_NS: i64 = 3_600 * SEC_NS;
/// One lifecycle day (the default `time.day`) in ns.
pub const DAY_NS: i64 = 86_400 * SEC_NS;

/// Current time in ns since the epoch.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// RFC 3339 (whole seconds, UTC) for `ns` since the epoch, for `--now`.
pub fn rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(SEC_NS);
    let t = time::OffsetDateTime::from_unix_timestamp(secs).expect("timestamp in range");
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("formattable")
}

/// `base` plus `days` days and `hours` hours, in ns. Tests pick offsets well clear of the default
/// next-midnight-UTC due rounding: "not yet due" checks stay below `TTL` days, "due" checks go
/// past `TTL + 1` days (rounding moves a due time forward by less than one day).
pub fn plus(base: i64, days: i64, hours: i64) -> i64 {
    base + days * DAY_NS + hours * HOUR_NS
}

/// The first midnight UTC at or after `ns`: where the default `next_day` rounding puts a due
/// time of `ns` (a time already on a midnight is kept).
pub fn midnight_at_or_after(ns: i64) -> i64 {
    ns.div_euclid(DAY_NS) * DAY_NS
        + if ns.rem_euclid(DAY_NS) == 0 {
            0
        } else {
            DAY_NS
        }
}

/// Waits until the wall clock is past `ns` (polling; panics if that is more than `limit` away,
/// which would be a mistake in the test).
pub async fn wait_until_clock_passes(ns: i64, limit: Duration) {
    let ahead = ns.saturating_sub(now_ns());
    assert!(
        ahead <= i64::try_from(limit.as_nanos()).unwrap_or(i64::MAX),
        "{} is more than {limit:?} away",
        rfc3339(ns)
    );
    while now_ns() <= ns {
        let left = u64::try_from(ns - now_ns()).unwrap_or(0);
        tokio::time::sleep(Duration::from_nanos(left.clamp(1_000_000, 200_000_000))).await;
    }
}
