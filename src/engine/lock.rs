//! Object lock as a filer entry records it: retention (mode and retain-until
//! date) and legal hold, read from the version's extended attributes. Pure:
//! `now` is an argument. The pass uses it to tell a version the gateway
//! refused because it is really locked from one it refused because its own
//! lock check failed (docs/lifecycle-delete.md#object-lock): neither is
//! resolved for good, a lock only ends later
//! (docs/lifecycle-delete.md#server-lookup-failures).

use crate::engine::Nanos;
use crate::pb::filer_pb::Entry;

/// Extended key of the retention mode (`GOVERNANCE` or `COMPLIANCE`).
pub const LOCK_MODE_KEY: &str = "Seaweed-X-Amz-Object-Lock-Mode";
/// Extended key of the retain-until date, decimal Unix **seconds**.
pub const RETAIN_UNTIL_KEY: &str = "Seaweed-X-Amz-Retention-Until-Date";
/// Extended key of the legal hold status (`ON` or `OFF`).
pub const LEGAL_HOLD_KEY: &str = "Seaweed-X-Amz-Legal-Hold";

const NS_PER_S: i64 = 1_000_000_000;

/// What protects an entry at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock {
    /// A legal hold is ON: it lasts until someone removes it.
    LegalHold,
    /// Retention (`mode`) until `until` (ns); deletable from `until + 1 s`.
    Retention {
        /// `GOVERNANCE` or `COMPLIANCE` (the gateway never bypasses either).
        mode: String,
        /// The retain-until instant, ns since the epoch.
        until: Nanos,
    },
}

impl Lock {
    /// The earliest instant the lock no longer protects the entry (`None`:
    /// a legal hold, which has no end date).
    pub fn ends(&self) -> Option<Nanos> {
        match self {
            Lock::LegalHold => None,
            Lock::Retention { until, .. } => Some(until.saturating_add(NS_PER_S)),
        }
    }
}

impl std::fmt::Display for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lock::LegalHold => f.write_str("legal hold ON"),
            Lock::Retention { mode, until } => {
                write!(f, "{mode} retention until {}s", until / NS_PER_S)
            }
        }
    }
}

/// The retain-until instant recorded on `entry` (ns), if any and readable.
pub fn retain_until(entry: &Entry) -> Option<Nanos> {
    let raw = entry.extended.get(RETAIN_UNTIL_KEY)?;
    let secs: i64 = std::str::from_utf8(raw).ok()?.trim().parse().ok()?;
    Some(secs.saturating_mul(NS_PER_S))
}

/// The lock that protects `entry` at `now`, if any: a legal hold first (it
/// outlasts any retention), then retention whose date is still ahead.
pub fn active_lock(entry: &Entry, now: Nanos) -> Option<Lock> {
    let hold = entry
        .extended
        .get(LEGAL_HOLD_KEY)
        .is_some_and(|v| v.as_slice() == b"ON");
    if hold {
        return Some(Lock::LegalHold);
    }
    let until = retain_until(entry).filter(|&until| until > now)?;
    let mode = entry
        .extended
        .get(LOCK_MODE_KEY)
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .unwrap_or_default();
    Some(Lock::Retention { mode, until })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(attrs: &[(&str, &str)]) -> Entry {
        let mut e = Entry::default();
        for (k, v) in attrs {
            e.extended.insert((*k).into(), v.as_bytes().to_vec());
        }
        e
    }

    #[test]
    fn retention_protects_until_its_date_then_not() {
        let e = entry(&[(LOCK_MODE_KEY, "GOVERNANCE"), (RETAIN_UNTIL_KEY, "1000")]);
        let now = 999 * NS_PER_S;
        let lock = active_lock(&e, now).unwrap();
        assert_eq!(
            lock,
            Lock::Retention {
                mode: "GOVERNANCE".into(),
                until: 1000 * NS_PER_S
            }
        );
        assert_eq!(lock.ends(), Some(1001 * NS_PER_S));
        assert_eq!(active_lock(&e, 1000 * NS_PER_S), None);
        assert_eq!(active_lock(&e, 2000 * NS_PER_S), None);
    }

    #[test]
    fn legal_hold_on_protects_off_does_not() {
        let on = entry(&[(LEGAL_HOLD_KEY, "ON"), (RETAIN_UNTIL_KEY, "1")]);
        assert_eq!(active_lock(&on, i64::MAX), Some(Lock::LegalHold));
        assert_eq!(Lock::LegalHold.ends(), None);
        let off = entry(&[(LEGAL_HOLD_KEY, "OFF")]);
        assert_eq!(active_lock(&off, 0), None);
    }

    #[test]
    fn unreadable_or_missing_dates_are_no_retention() {
        assert_eq!(active_lock(&entry(&[]), 0), None);
        let bad = entry(&[(RETAIN_UNTIL_KEY, "tomorrow")]);
        assert_eq!(retain_until(&bad), None);
        assert_eq!(active_lock(&bad, 0), None);
    }
}
