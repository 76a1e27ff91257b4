//! How a pass runs: `[pass]`, `[time]`, `[rate]`, `[dispatch]`, `[cursor]`,
//! and the shard and schedule parsers.

use std::time::Duration;

use serde::Deserialize;

use super::values::{de_due_rounding, de_duration, de_list};
use super::{ConfigError, invalid, require};
use crate::engine::{DueRounding, TimeConfig};

/// `[pass]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PassSettings {
    /// Shards this instance runs: `0-15`, `3`, or `0,4,7`.
    pub shards: String,
    /// Minimum time between steady-state walks of a bucket; 0 = every pass.
    #[serde(deserialize_with = "de_duration")]
    pub walker_interval: Duration,
    /// Meta-log retention to assume; 0 = probe the filer's persisted log.
    #[serde(deserialize_with = "de_duration")]
    pub meta_log_retention: Duration,
    /// Extra rewind on recovery for clock skew between S3 gateways and the filer.
    #[serde(deserialize_with = "de_duration")]
    pub clock_skew_margin: Duration,
    /// How far behind the newest processed meta-log event replay progress
    /// stays, for events that arrive out of timestamp order (late appends, a
    /// peer filer's events aggregated late; docs/meta-log.md#several-filers).
    /// Also how far back a broken stream resumes on another filer.
    #[serde(deserialize_with = "de_duration")]
    pub reorder_margin: Duration,
    /// Cap on one pass; 0 = none. A capped pass saves cursors and is "truncated".
    #[serde(deserialize_with = "de_duration")]
    pub max_runtime: Duration,
    /// Share of `max_runtime` the walk phase may use; the rest is left to
    /// replay. A walk cut there resumes next pass
    /// (docs/design-deviations.md#resumable-recovery-walks). In (0, 1].
    pub walk_budget_fraction: f64,
    /// How often a running pass re-reads the buckets' lifecycle
    /// configurations, so an edit or deletion stops that bucket's deletes
    /// within about this long; 0 = never (the pass keeps its start snapshot).
    #[serde(deserialize_with = "de_duration")]
    pub config_refresh: Duration,
    /// Buffered meta-log events between the reader and the shards.
    pub event_buffer: usize,
    /// Read the filer's persisted meta-log files straight from the volume
    /// servers (plain HTTP GET of each chunk) instead of having the filer
    /// decode and stream them; events still in the filer's memory come
    /// streamed as usual (docs/meta-log.md#direct-log-file-reads). Where the
    /// volume servers cannot hand a file out (down, not reachable from here,
    /// read JWTs, HTTPS, encrypted volumes) the filer streams that part
    /// instead (docs/meta-log.md#when-a-file-cannot-be-read). On by default:
    /// a pass that must read everything runs at about twice the filer
    /// stream's rate (docs/baselines.md#allocator).
    pub direct_log_reads: bool,
    /// Most resolved-delete marks (the "do not re-send" tail past each
    /// action's contiguous progress) one pass holds, over every action and
    /// shard together, split evenly over the 16 shards
    /// (docs/due-index.md#memory). Past it a shard stops taking events until
    /// its in-flight deletes answer, then forgets the oldest marks (re-sent
    /// once by a later pass, as no-ops). Never a skipped delete.
    pub tail_budget: usize,
    /// Buckets this instance acts on; empty = every bucket with a lifecycle
    /// configuration. From the environment: a comma-separated list
    /// (`S3_LIFECYCLED__PASS__BUCKETS=a,b`).
    #[serde(deserialize_with = "de_list")]
    pub buckets: Vec<String>,
}

impl PassSettings {
    /// How long the walk phase may run before it is cut and replay starts
    /// (`None`: no cap, without `max_runtime`).
    pub fn walk_budget(&self) -> Option<Duration> {
        (!self.max_runtime.is_zero()).then(|| {
            self.max_runtime
                .mul_f64(self.walk_budget_fraction.clamp(0.0, 1.0))
        })
    }
}

impl PassSettings {
    /// Each `pass.*` key within its range.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let margin = self.reorder_margin;
        require(
            !margin.is_zero() && margin <= Duration::from_secs(3600),
            "pass.reorder_margin",
            format!(
                "must be between 1ms and 1h, e.g. 5s (got {margin:?}): 0 would skip events the \
                 filer delivers out of order"
            ),
        )?;
        let shards = crate::engine::shard::SHARD_COUNT;
        require(
            self.tail_budget >= shards,
            "pass.tail_budget",
            format!(
                "must be at least {shards} (one mark per shard), e.g. 1048576 (got {}): it bounds \
                 the resolved-delete marks a pass holds in memory",
                self.tail_budget
            ),
        )?;
        parse_shards(&self.shards).map_err(|m| invalid("pass.shards", m))?;
        let refresh = self.config_refresh;
        require(
            refresh.is_zero() || refresh >= Duration::from_millis(100),
            "pass.config_refresh",
            "must be 0 (never re-read) or at least 100ms (each re-read lists the buckets \
             directory), e.g. 1s",
        )?;
        let f = self.walk_budget_fraction;
        require(
            f > 0.0 && f <= 1.0,
            "pass.walk_budget_fraction",
            format!(
                "{f} is not in (0, 1]: it is the share of pass.max_runtime the walk may use \
                 before replay, e.g. 0.5"
            ),
        )?;
        require(
            self.event_buffer != 0,
            "pass.event_buffer",
            "must be at least 1",
        )?;
        Ok(())
    }
}

impl Default for PassSettings {
    fn default() -> Self {
        PassSettings {
            shards: "0-15".into(),
            walker_interval: Duration::ZERO,
            meta_log_retention: Duration::ZERO,
            clock_skew_margin: Duration::from_secs(600),
            reorder_margin: Duration::from_secs(5),
            max_runtime: Duration::ZERO,
            walk_budget_fraction: 0.5,
            config_refresh: Duration::from_secs(1),
            event_buffer: 4096,
            direct_log_reads: true,
            tail_budget: 1 << 20,
            buckets: Vec::new(),
        }
    }
}

/// `[time]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TimeSettings {
    /// Length of a lifecycle day. Shorten only on test clusters.
    #[serde(deserialize_with = "de_duration")]
    pub day: Duration,
    /// `next_day` (AWS, Ceph, MinIO) or `none` (SeaweedFS Go worker parity).
    #[serde(deserialize_with = "de_due_rounding")]
    pub due_rounding: DueRounding,
}

impl Default for TimeSettings {
    fn default() -> Self {
        TimeSettings {
            day: Duration::from_secs(86_400),
            due_rounding: DueRounding::NextDay,
        }
    }
}

impl TimeSettings {
    /// The engine's time configuration.
    pub fn time_config(&self) -> TimeConfig {
        TimeConfig {
            day: self.day,
            rounding: self.due_rounding,
        }
    }
}

/// `[rate]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RateSettings {
    /// Deletes per second for this instance; 0 = unlimited.
    pub deletes_per_second: f64,
    /// Burst; 0 = twice the rate.
    pub burst: u32,
    /// Cluster-wide deletes per second, divided by `workers`; overrides
    /// `deletes_per_second` when non-zero.
    pub cluster_deletes_per_second: f64,
    /// Number of s3-lifecycled instances sharing the cluster budget.
    pub workers: u32,
}

impl Default for RateSettings {
    fn default() -> Self {
        RateSettings {
            deletes_per_second: 0.0,
            burst: 0,
            cluster_deletes_per_second: 0.0,
            workers: 1,
        }
    }
}

impl RateSettings {
    /// This instance's rate (deletes/s) and burst, or `None` for unlimited.
    pub fn effective(&self) -> Option<(f64, u32)> {
        let rate = if self.cluster_deletes_per_second > 0.0 {
            self.cluster_deletes_per_second / f64::from(self.workers.max(1))
        } else {
            self.deletes_per_second
        };
        if rate <= 0.0 {
            return None;
        }
        let burst = if self.burst > 0 {
            self.burst
        } else {
            // Twice the rate, at least one token so a slow rate still moves.
            ((rate * 2.0).floor() as u32).max(1)
        };
        Some((rate, burst))
    }
}

/// `[dispatch]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchSettings {
    /// Deletes in flight per shard.
    pub max_in_flight_per_shard: usize,
    /// Deletes in flight across all shards.
    pub max_in_flight: usize,
    /// Attempts for a delete that fails in transport (server outcomes are never retried).
    pub retry_attempts: u32,
    /// First retry backoff; doubles, with jitter, up to `retry_max_backoff`.
    #[serde(deserialize_with = "de_duration")]
    pub retry_initial_backoff: Duration,
    #[serde(deserialize_with = "de_duration")]
    pub retry_max_backoff: Duration,
    /// Deadline of one `LifecycleDelete` attempt; an attempt past it is a
    /// retryable transport error.
    #[serde(deserialize_with = "de_duration")]
    pub call_timeout: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            max_in_flight_per_shard: 32,
            max_in_flight: 128,
            retry_attempts: 3,
            retry_initial_backoff: Duration::from_millis(200),
            retry_max_backoff: Duration::from_secs(5),
            call_timeout: Duration::from_secs(60),
        }
    }
}

/// `[cursor]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CursorSettings {
    /// Filer directory holding `shard-NN.json`. Never the Go worker's directory.
    pub dir: String,
}

impl Default for CursorSettings {
    fn default() -> Self {
        CursorSettings {
            dir: "/etc/s3/lifecycle/s3-lifecycled".into(),
        }
    }
}

/// Parses `0-15`, `7` or `0,4,7` into a sorted, de-duplicated shard list.
pub fn parse_shards(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let parse = |x: &str| -> Result<u8, String> {
            x.parse::<u8>()
                .ok()
                .filter(|v| usize::from(*v) < crate::engine::SHARD_COUNT)
                .ok_or_else(|| {
                    format!("`{x}` is not a shard number 0..15 (use e.g. 0-15 or 1,3,5)")
                })
        };
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi {
            return Err(format!("range `{part}` is backwards (use low-high)"));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err("no shards given (use e.g. 0-15 or 1,3,5)".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `service.schedule = "off"`: no scheduled passes, only admin triggers
/// (passes driven from outside, or test clusters).
pub fn schedule_off(s: &str) -> bool {
    s.trim().eq_ignore_ascii_case("off")
}

/// Parses `HH:MM` (UTC) into seconds after midnight.
pub fn parse_schedule(s: &str) -> Result<u32, String> {
    let err = || format!("`{s}` is not a UTC time of day in HH:MM form, e.g. 00:30");
    let (h, m) = s.trim().split_once(':').ok_or_else(err)?;
    let h: u32 = h.parse().map_err(|_| err())?;
    let m: u32 = m.parse().map_err(|_| err())?;
    if h > 23 || m > 59 {
        return Err(err());
    }
    Ok(h * 3600 + m * 60)
}
