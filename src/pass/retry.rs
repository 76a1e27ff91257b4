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
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// Backoff after failed attempt number `attempt` (1-based), jittered into
    /// `[d/2, d)` by `unit` ∈ [0, 1) so concurrent retries do not synchronise.
    pub fn backoff(&self, attempt: u32, unit: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let d = self.initial.saturating_mul(1u32 << exp).min(self.max);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 0.999_999)
        } else {
            0.0
        };
        d / 2 + d.mul_f64(unit / 2.0)
    }

    /// Whether another attempt may follow failed attempt number `attempt`.
    pub fn should_retry(&self, attempt: u32) -> bool {
        attempt < self.attempts.max(1)
    }
}

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
    fn three_attempts_total() {
        let p = RetryPolicy::default();
        assert!(p.should_retry(1));
        assert!(p.should_retry(2));
        assert!(!p.should_retry(3));
        let once = RetryPolicy { attempts: 0, ..p };
        assert!(!once.should_retry(1));
    }
}
