//! The wall clock, in one place. Only display and bookkeeping read it (status
//! times, cursor `updated_ns`, a pass's default `now` and its
//! `observed_until`, the expiry of a volume read token); the lifecycle
//! decisions take `now` as an argument.

use crate::engine::Nanos;

/// Wall clock in ns since the Unix epoch (0 if the clock is before 1970,
/// saturating in 2262).
pub fn wall_ns() -> Nanos {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
