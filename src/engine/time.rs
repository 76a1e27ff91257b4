//! Time settings for due-time math: the length of a lifecycle "day" and how due
//! times are rounded. The engine never reads the system clock; `now` is passed in.

use std::time::Duration;

/// Nanoseconds since the Unix epoch (the meta-log's `ts_ns` unit).
pub type Nanos = i64;

/// How a computed due time is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DueRounding {
    /// Round up to the next day boundary (multiple of the day length since the
    /// epoch; midnight UTC with 24 h days), as AWS, Ceph and MinIO do.
    #[default]
    NextDay,
    /// No rounding: due = base + n × day, exactly as SeaweedFS's Go worker.
    None,
}

/// The engine's notion of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeConfig {
    /// Length of one lifecycle day. 24 h in production; tests may use seconds,
    /// like Ceph's `rgw_lc_debug_interval`. Must be non-zero.
    pub day: Duration,
    pub rounding: DueRounding,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig {
            day: Duration::from_secs(24 * 3600),
            rounding: DueRounding::NextDay,
        }
    }
}

impl TimeConfig {
    /// `n` lifecycle days as a duration (`n` ≤ 0 gives zero).
    pub fn days(&self, n: i64) -> Duration {
        if n <= 0 {
            return Duration::ZERO;
        }
        // Saturate instead of overflowing: a rule of 10^15 days is "never".
        self.day
            .saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The due time `base + n days`, rounded per [`TimeConfig::rounding`].
    /// Saturates at `Nanos::MAX` ("never") instead of overflowing.
    pub fn due_after(&self, base: Nanos, n_days: i64) -> Nanos {
        let ttl = i64::try_from(self.days(n_days).as_nanos()).unwrap_or(Nanos::MAX);
        self.round(base.saturating_add(ttl))
    }

    /// `day` in ns (at least 1).
    pub fn day_ns(&self) -> Nanos {
        i64::try_from(self.day.as_nanos())
            .unwrap_or(Nanos::MAX)
            .max(1)
    }

    /// Rounds a due time per [`TimeConfig::rounding`]: up to the next multiple of
    /// the day length since the epoch (midnight UTC for 24 h days). A time that
    /// is already on a boundary is kept.
    pub fn round(&self, t: Nanos) -> Nanos {
        match self.rounding {
            DueRounding::None => t,
            DueRounding::NextDay => {
                let day = self.day_ns();
                let rem = t.rem_euclid(day);
                if rem == 0 {
                    t
                } else {
                    t.saturating_add(day - rem)
                }
            }
        }
    }
}

/// `ns` since epoch as RFC 3339 UTC (seconds precision); `—` for 0.
pub fn format_time(ns: i64) -> String {
    if ns == 0 {
        return "—".into();
    }
    rfc3339(ns)
}

/// `ns` as RFC 3339 UTC (seconds), or the number when out of range.
pub fn rfc3339(ns: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(ns.div_euclid(1_000_000_000))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ns} ns"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_NS: i64 = 86_400_000_000_000;

    #[test]
    fn aws_example_rounds_to_next_midnight() {
        // AWS docs: created 2014-01-15 10:30 UTC, 3 days -> 2014-01-19 00:00 UTC.
        let created = 1_389_781_800 * 1_000_000_000; // 2014-01-15T10:30:00Z
        let t = TimeConfig::default();
        assert_eq!(t.due_after(created, 3), 1_390_089_600 * 1_000_000_000);
    }

    #[test]
    fn no_rounding_is_exact_like_go() {
        let t = TimeConfig {
            rounding: DueRounding::None,
            ..TimeConfig::default()
        };
        assert_eq!(t.due_after(5, 2), 5 + 2 * DAY_NS);
    }

    #[test]
    fn boundary_is_kept_and_short_days_round_to_their_own_boundary() {
        let t = TimeConfig {
            day: Duration::from_secs(10),
            rounding: DueRounding::NextDay,
        };
        assert_eq!(t.round(20_000_000_000), 20_000_000_000);
        assert_eq!(t.round(20_000_000_001), 30_000_000_000);
        assert_eq!(t.due_after(1_000_000_000, 1), 20_000_000_000);
    }

    #[test]
    fn huge_day_counts_saturate_instead_of_overflowing() {
        let t = TimeConfig::default();
        assert_eq!(t.due_after(i64::MAX - 5, 1), Nanos::MAX);
        assert_eq!(t.due_after(0, i64::MAX), Nanos::MAX);
        assert_eq!(t.days(-3), Duration::ZERO);
    }
}
