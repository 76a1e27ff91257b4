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
    /// Rounding of due times.
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
