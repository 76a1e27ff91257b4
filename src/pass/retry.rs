//! Transport retry policy for deletes: a bounded number of attempts with
//! exponential, jittered backoff. Server outcomes (RETRY_LATER, BLOCKED) are
//! never retried in-pass: the server already said "not now", and retrying would
//! hide a stuck shard from the operator.

use std::time::Duration;

/// Attempts and backoff for transport failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, including the first (at least 1).
    pub attempts: u32,
    /// Backoff before the second attempt; doubles each time.
    pub initial: Duration,
    /// Backoff cap.
    pub max: Duration,
    /// Deadline of one attempt (`dispatch.call_timeout`); past it the
    /// attempt is a retryable transport error.
    pub call_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
            call_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Backoff after failed attempt number `attempt` (1-based), jittered into
    /// `[d/2, d)` by `unit` ∈ [0, 1) so concurrent retries do not synchronise.
    pub fn backoff(&self, attempt: u32, unit: f64) -> Duration {
        let d = self.capped(attempt);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 0.999_999)
        } else {
            0.0
        };
        d / 2 + d.mul_f64(unit / 2.0)
    }

    /// The backoff after failed attempt number `attempt` before jitter.
    fn capped(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        self.initial.saturating_mul(1u32 << exp).min(self.max)
    }

    /// Whether another attempt may follow failed attempt number `attempt`.
    pub fn should_retry(&self, attempt: u32) -> bool {
        attempt < self.attempts.max(1)
    }

    /// The longest one delete can take once it holds a dispatch slot: every
    /// attempt runs to its deadline and every backoff is at its cap (jitter
    /// keeps each below `d`, so `d` bounds it).
    pub fn worst_call(&self) -> Duration {
        let attempts = self.attempts.max(1);
        // Past 31 doublings every backoff is at the cap: add those at once.
        let backoffs = (1..attempts.min(32))
            .map(|a| self.capped(a))
            .fold(Duration::ZERO, Duration::saturating_add)
            .saturating_add(self.capped(32).saturating_mul(attempts.saturating_sub(32)));
        self.call_timeout
            .saturating_mul(attempts)
            .saturating_add(backoffs)
    }
}

/// How long `Drain` may wait for a shard's outstanding work before the shard
/// halts with [`DRAIN_TIMEOUT`]: the worst call or two lookups, whichever is
/// longer, times the rounds the in-flight cap needs, plus the limiter's time
/// for the outstanding deletes and 1 s of slack (docs/lifecycle-delete.md#deadlines).
pub fn drain_bound(
    policy: &RetryPolicy,
    lookup_timeout: Duration,
    outstanding: usize,
    max_in_flight: usize,
    rate: Option<f64>,
) -> Duration {
    let per_call = policy.worst_call().max(lookup_timeout.saturating_mul(2));
    let waves = outstanding.max(1).div_ceil(max_in_flight.max(1));
    let waves = u32::try_from(waves).unwrap_or(u32::MAX);
    let tokens = match rate {
        Some(r) if r.is_finite() && r > 0.0 => {
            Duration::try_from_secs_f64(outstanding as f64 / r).unwrap_or(Duration::MAX)
        }
        _ => Duration::ZERO,
    };
    per_call
        .saturating_mul(waves)
        .saturating_add(tokens)
        .saturating_add(Duration::from_secs(1))
}

/// The halt reason of a shard whose outstanding work outlived [`drain_bound`].
pub const DRAIN_TIMEOUT: &str = "DRAIN_TIMEOUT";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_200ms_capped_at_5s_with_jitter_in_half_open_range() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.0), Duration::from_millis(100));
        assert!(p.backoff(1, 0.999) < Duration::from_millis(200));
        assert_eq!(p.backoff(2, 0.0), Duration::from_millis(200));
        assert_eq!(p.backoff(10, 0.0), Duration::from_millis(2500));
        assert!(p.backoff(40, 0.99) < Duration::from_secs(5));
        assert_eq!(p.backoff(1, f64::NAN), Duration::from_millis(100));
    }

    #[test]
    fn drain_bound_covers_every_attempt_backoff_wave_and_token() {
        let p = RetryPolicy {
            attempts: 2,
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
            call_timeout: Duration::from_secs(2),
        };
        // 2 attempts × 2 s + one backoff ≤ 200 ms.
        assert_eq!(p.worst_call(), Duration::from_millis(4200));
        let lookups = Duration::from_secs(1);
        assert_eq!(
            drain_bound(&p, lookups, 1, 128, None),
            Duration::from_millis(5200)
        );
        // 256 outstanding over 128 slots: two waves.
        assert_eq!(
            drain_bound(&p, lookups, 256, 128, None),
            Duration::from_millis(9400)
        );
        // Slow lookups dominate a fast delete deadline.
        assert_eq!(
            drain_bound(&p, Duration::from_secs(30), 1, 128, None),
            Duration::from_secs(61)
        );
        // 100 deletes at 10/s need 10 s of tokens.
        assert_eq!(
            drain_bound(&p, lookups, 100, 128, Some(10.0)),
            Duration::from_millis(15200)
        );
        // Defaults: 3 × 60 s + 200 ms + 400 ms.
        assert_eq!(
            RetryPolicy::default().worst_call(),
            Duration::from_millis(180_600)
        );
        // Nothing overflows.
        let huge = RetryPolicy {
            attempts: u32::MAX,
            call_timeout: Duration::MAX,
            ..p
        };
        assert_eq!(
            drain_bound(&huge, Duration::MAX, usize::MAX, 1, Some(1e-300)),
            Duration::MAX
        );
    }

    #[test]
    fn three_attempts_total() {
        let p = RetryPolicy::default();
        assert!(p.should_retry(1));
        assert!(p.should_retry(2));
        assert!(!p.should_retry(3));
        let once = RetryPolicy { attempts: 0, ..p };
        assert!(!once.should_retry(1));
    }
}
