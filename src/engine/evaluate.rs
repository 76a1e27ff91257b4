//! Per-object rule evaluation: the facts an action needs about one object or
//! version ([`ObjectInfo`]), when an action becomes due for it ([`due_at`]) and
//! whether it fires at a given time ([`fires`]) (docs/evaluation.md#due-times).
//!
//! Both functions apply the same gates first: the rule must be enabled, the
//! object must be inside the rule's filter, and the object must have the shape
//! the kind acts on (latest or not, marker or not, MPU init or not). Due times
//! of the age kinds go through [`TimeConfig::due_after`], so rounding is
//! decided in one place.

use std::collections::BTreeMap;

use crate::engine::{ActionKind, Nanos, TimeConfig, filter};
use crate::lifecycle::FlatRule;

/// What evaluation needs to know about one object, version or upload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectInfo {
    /// Entry mtime in ns (`mtime × 10^9 + mtime_ns`); for an MPU init, the
    /// upload directory's mtime (the initiation time).
    pub mod_time: Nanos,
    /// `attributes.file_size`; 0 for an MPU init.
    pub size: i64,
    /// The current version of its key (always true for unversioned objects).
    pub is_latest: bool,
    pub is_delete_marker: bool,
    /// Versions of the key, the null version included; 1 for an unversioned
    /// object.
    pub num_versions: usize,
    /// When this version became noncurrent: the demotion stamp, else the
    /// mtime of the next-newer version; `None` when unknown (then the
    /// version's own mtime is the base).
    pub noncurrent_since: Option<Nanos>,
    /// Rank among noncurrent versions, 0 = newest noncurrent; `None` when
    /// unknown (e.g. from a single meta-log event).
    pub noncurrent_index: Option<usize>,
    pub tags: BTreeMap<String, String>,
    /// An in-progress multipart upload (its key is the destination key).
    pub is_mpu_init: bool,
}

/// The instant `kind` of `rule` becomes due for the object `key` described by
/// `info`, or `None` when it never applies to it (rule disabled, object outside
/// the filter, wrong shape, or the rule lacks the field the kind needs).
///
/// | kind | applies to | due |
/// |---|---|---|
/// | AbortMpu | MPU inits only | round(mod_time + days) |
/// | ExpirationDays | latest, not a marker | round(mod_time + days) |
/// | ExpirationDate | latest, not a marker | the date, unrounded |
/// | NoncurrentDays | not latest (markers too); with `NewerNoncurrentVersions` N > 0 only index ≥ N | round((noncurrent_since or mod_time) + days) |
/// | NewerNoncurrent | not latest, index ≥ N | noncurrent_since or mod_time (informational: no age condition) |
/// | ExpiredDeleteMarker | latest marker, sole version | mod_time (informational: no age condition) |
///
/// An MPU init only ever gets AbortMpu, and AbortMpu nothing else.
pub fn due_at(
    rule: &FlatRule,
    kind: ActionKind,
    key: &str,
    info: &ObjectInfo,
    time: &TimeConfig,
) -> Option<Nanos> {
    if !rule.enabled || !filter::matches(rule, key, info.size, &info.tags) {
        return None;
    }
    if info.is_mpu_init != (kind == ActionKind::AbortMpu) {
        return None;
    }
    let current_object = info.is_latest && !info.is_delete_marker;
    let noncurrent_base = || {
        info.noncurrent_since
            .filter(|t| *t > 0)
            .unwrap_or(info.mod_time)
    };
    let index_at_least = |n: i64| {
        info.noncurrent_index
            .is_some_and(|i| i64::try_from(i).unwrap_or(i64::MAX) >= n)
    };
    match kind {
        ActionKind::AbortMpu => {
            (rule.abort_mpu_days > 0).then(|| time.due_after(info.mod_time, rule.abort_mpu_days))
        }
        ActionKind::ExpirationDays => (current_object && rule.expiration_days > 0)
            .then(|| time.due_after(info.mod_time, rule.expiration_days)),
        ActionKind::ExpirationDate => {
            let date = rule.expiration_date.filter(|_| current_object)?;
            // A date beyond the i64 ns range (year 2262+) is "never".
            Some(i64::try_from(date.unix_timestamp_nanos()).unwrap_or(
                if date.unix_timestamp() < 0 {
                    Nanos::MIN
                } else {
                    Nanos::MAX
                },
            ))
        }
        ActionKind::NoncurrentDays => {
            if info.is_latest || rule.noncurrent_days <= 0 {
                return None;
            }
            // "Keep the N newest noncurrent versions": a version whose rank is
            // unknown might be one of them, so it is never expired here.
            if rule.newer_noncurrent_versions > 0 && !index_at_least(rule.newer_noncurrent_versions)
            {
                return None;
            }
            Some(time.due_after(noncurrent_base(), rule.noncurrent_days))
        }
        ActionKind::NewerNoncurrent => (!info.is_latest
            && rule.noncurrent_days == 0
            && rule.newer_noncurrent_versions > 0
            && index_at_least(rule.newer_noncurrent_versions))
        .then(noncurrent_base),
        ActionKind::ExpiredDeleteMarker => (info.is_latest
            && info.is_delete_marker
            && rule.expired_object_delete_marker
            && info.num_versions == 1)
            .then_some(info.mod_time),
    }
}

/// Whether `kind` of `rule` fires for the object at `now`: [`due_at`] applies
/// and, for the age kinds, `now ≥ due`. NewerNoncurrent and
/// ExpiredDeleteMarker have no age condition: they fire as soon as they apply.
pub fn fires(
    rule: &FlatRule,
    kind: ActionKind,
    key: &str,
    info: &ObjectInfo,
    now: Nanos,
    time: &TimeConfig,
) -> bool {
    due_at(rule, kind, key, info, time).is_some_and(|due| {
        matches!(
            kind,
            ActionKind::NewerNoncurrent | ActionKind::ExpiredDeleteMarker
        ) || now >= due
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::macros::datetime;

    use super::*;
    use crate::engine::DueRounding;

    const S: i64 = 1_000_000_000;
    const DAY: i64 = 86_400 * S;
    /// 2026-01-01T10:30:00Z.
    const T0: Nanos = 1_767_263_400 * S;
    /// 2026-01-02T00:00:00Z.
    const MIDNIGHT_AFTER_T0: Nanos = 1_767_312_000 * S;

    fn exact() -> TimeConfig {
        TimeConfig {
            day: Duration::from_secs(86_400),
            rounding: DueRounding::None,
        }
    }

    fn rounded() -> TimeConfig {
        TimeConfig::default()
    }

    fn current(mod_time: Nanos) -> ObjectInfo {
        ObjectInfo {
            mod_time,
            size: 10,
            is_latest: true,
            num_versions: 1,
            ..ObjectInfo::default()
        }
    }

    fn noncurrent(mod_time: Nanos, since: Option<Nanos>, index: Option<usize>) -> ObjectInfo {
        ObjectInfo {
            mod_time,
            size: 10,
            is_latest: false,
            num_versions: 3,
            noncurrent_since: since,
            noncurrent_index: index,
            ..ObjectInfo::default()
        }
    }

    fn marker(mod_time: Nanos, num_versions: usize) -> ObjectInfo {
        ObjectInfo {
            mod_time,
            size: 0,
            is_latest: true,
            is_delete_marker: true,
            num_versions,
            ..ObjectInfo::default()
        }
    }

    fn mpu(mod_time: Nanos) -> ObjectInfo {
        ObjectInfo {
            mod_time,
            is_mpu_init: true,
            ..ObjectInfo::default()
        }
    }

    fn rule() -> FlatRule {
        FlatRule {
            enabled: true,
            ..FlatRule::default()
        }
    }

    /// Asserts the boundary: fires at `due`, not one ns before.
    fn assert_boundary(
        r: &FlatRule,
        kind: ActionKind,
        info: &ObjectInfo,
        t: &TimeConfig,
        due: Nanos,
    ) {
        assert_eq!(due_at(r, kind, "k", info, t), Some(due), "{kind}");
        assert!(fires(r, kind, "k", info, due, t), "{kind} at due");
        assert!(!fires(r, kind, "k", info, due - 1, t), "{kind} at due-1");
    }

    #[test]
    fn expiration_days_due_is_mtime_plus_days_exact_or_rounded() {
        let r = FlatRule {
            expiration_days: 3,
            ..rule()
        };
        let k = ActionKind::ExpirationDays;
        assert_boundary(&r, k, &current(T0), &exact(), T0 + 3 * DAY);
        assert_boundary(&r, k, &current(T0), &rounded(), MIDNIGHT_AFTER_T0 + 3 * DAY);
        // Not for noncurrent versions or markers.
        assert_eq!(
            due_at(&r, k, "k", &noncurrent(T0, None, Some(0)), &exact()),
            None
        );
        assert_eq!(due_at(&r, k, "k", &marker(T0, 1), &exact()), None);
        assert_eq!(due_at(&r, k, "k", &mpu(T0), &exact()), None);
        // Unset days → never.
        assert_eq!(due_at(&rule(), k, "k", &current(T0), &exact()), None);
    }

    /// [`fires`] for key `k`, without rounding.
    fn fires_k(r: &FlatRule, kind: ActionKind, info: &ObjectInfo, now: Nanos) -> bool {
        fires(r, kind, "k", info, now, &exact())
    }

    #[test]
    fn expiration_date_is_not_rounded() {
        let r = FlatRule {
            expiration_date: Some(datetime!(2026-03-01 12:00 UTC)),
            ..rule()
        };
        let date = 1_772_366_400 * S;
        let k = ActionKind::ExpirationDate;
        assert_boundary(&r, k, &current(T0), &rounded(), date);
        assert_boundary(&r, k, &current(T0), &exact(), date);
        // Objects written after the date are due immediately.
        assert!(fires_k(&r, k, &current(date + DAY), date + DAY));
        assert_eq!(due_at(&r, k, "k", &marker(T0, 1), &exact()), None);
        assert_eq!(
            due_at(&r, k, "k", &noncurrent(T0, None, None), &exact()),
            None
        );
    }

    #[test]
    fn noncurrent_days_counts_from_the_stamp_else_mtime() {
        let r = FlatRule {
            noncurrent_days: 2,
            ..rule()
        };
        let k = ActionKind::NoncurrentDays;
        let since = T0 + 5 * DAY;
        assert_boundary(
            &r,
            k,
            &noncurrent(T0, Some(since), None),
            &exact(),
            since + 2 * DAY,
        );
        assert_boundary(&r, k, &noncurrent(T0, None, None), &exact(), T0 + 2 * DAY);
        // A zero or negative stamp is "no stamp".
        assert_boundary(
            &r,
            k,
            &noncurrent(T0, Some(0), None),
            &exact(),
            T0 + 2 * DAY,
        );
        assert_boundary(
            &r,
            k,
            &noncurrent(T0, None, None),
            &rounded(),
            MIDNIGHT_AFTER_T0 + 2 * DAY,
        );
        // A noncurrent delete marker is just a noncurrent version.
        let mut m = noncurrent(T0, None, Some(0));
        m.is_delete_marker = true;
        assert_eq!(due_at(&r, k, "k", &m, &exact()), Some(T0 + 2 * DAY));
        assert_eq!(due_at(&r, k, "k", &current(T0), &exact()), None);
    }

    #[test]
    fn noncurrent_days_with_keep_count_needs_a_known_rank_at_or_beyond_it() {
        let r = FlatRule {
            noncurrent_days: 1,
            newer_noncurrent_versions: 2,
            ..rule()
        };
        let k = ActionKind::NoncurrentDays;
        let late = T0 + 10 * DAY;
        assert!(!fires_k(&r, k, &noncurrent(T0, None, None), late));
        assert!(!fires_k(&r, k, &noncurrent(T0, None, Some(1)), late));
        assert!(fires_k(&r, k, &noncurrent(T0, None, Some(2)), late));
        // Rank alone is not enough: the age still applies.
        assert!(!fires_k(
            &r,
            k,
            &noncurrent(T0, None, Some(5)),
            T0 + DAY - 1
        ));
    }

    #[test]
    fn newer_noncurrent_keeps_the_n_newest_with_no_age_condition() {
        let r = FlatRule {
            newer_noncurrent_versions: 2,
            ..rule()
        };
        let k = ActionKind::NewerNoncurrent;
        // Fires at any time, even "before" the object's own mtime.
        assert!(fires_k(&r, k, &noncurrent(T0, None, Some(2)), 0));
        assert!(fires_k(&r, k, &noncurrent(T0, None, Some(7)), 0));
        assert!(!fires_k(&r, k, &noncurrent(T0, None, Some(1)), T0 * 2));
        assert!(!fires_k(&r, k, &noncurrent(T0, None, None), T0 * 2));
        assert!(!fires_k(&r, k, &current(T0), T0 * 2));
        // With NoncurrentDays the count belongs to that kind, not this one.
        let both = FlatRule {
            noncurrent_days: 1,
            ..r.clone()
        };
        assert_eq!(
            due_at(&both, k, "k", &noncurrent(T0, None, Some(5)), &exact()),
            None
        );
    }

    #[test]
    fn expired_delete_marker_only_for_a_sole_surviving_latest_marker() {
        let r = FlatRule {
            expired_object_delete_marker: true,
            ..rule()
        };
        let k = ActionKind::ExpiredDeleteMarker;
        assert!(fires_k(&r, k, &marker(T0, 1), 0));
        assert_eq!(due_at(&r, k, "k", &marker(T0, 1), &rounded()), Some(T0));
        // A null version (or any other version) is a sibling.
        assert!(!fires_k(&r, k, &marker(T0, 2), T0));
        let mut nc = marker(T0, 1);
        nc.is_latest = false;
        assert!(!fires_k(&r, k, &nc, T0));
        assert!(!fires_k(&r, k, &current(T0), T0));
        // Flag unset → never.
        assert!(!fires_k(&rule(), k, &marker(T0, 1), T0));
    }

    #[test]
    fn abort_mpu_only_for_uploads_and_nothing_else_for_them() {
        let r = FlatRule {
            abort_mpu_days: 7,
            expiration_days: 1,
            noncurrent_days: 1,
            expired_object_delete_marker: true,
            ..rule()
        };
        assert_boundary(&r, ActionKind::AbortMpu, &mpu(T0), &exact(), T0 + 7 * DAY);
        assert_boundary(
            &r,
            ActionKind::AbortMpu,
            &mpu(T0),
            &rounded(),
            MIDNIGHT_AFTER_T0 + 7 * DAY,
        );
        let late = T0 + 100 * DAY;
        for kind in ActionKind::EMISSION_ORDER {
            if kind != ActionKind::AbortMpu {
                assert!(!fires_k(&r, kind, &mpu(T0), late), "{kind}");
            }
        }
        assert!(!fires_k(&r, ActionKind::AbortMpu, &current(T0), late));
    }

    #[test]
    fn abort_mpu_with_a_size_lower_bound_or_tags_never_matches() {
        let sized = FlatRule {
            abort_mpu_days: 1,
            size_gt: 1,
            ..rule()
        };
        assert!(!fires_k(
            &sized,
            ActionKind::AbortMpu,
            &mpu(T0),
            T0 + 9 * DAY
        ));
        let tagged = FlatRule {
            abort_mpu_days: 1,
            tags: [("a".to_string(), "b".to_string())].into(),
            ..rule()
        };
        assert!(!fires_k(
            &tagged,
            ActionKind::AbortMpu,
            &mpu(T0),
            T0 + 9 * DAY
        ));
    }

    #[test]
    fn disabled_rule_never_fires() {
        let r = FlatRule {
            enabled: false,
            expiration_days: 1,
            expiration_date: Some(datetime!(2000-01-01 0:00 UTC)),
            noncurrent_days: 1,
            newer_noncurrent_versions: 1,
            expired_object_delete_marker: true,
            abort_mpu_days: 1,
            ..FlatRule::default()
        };
        let infos = [
            current(0),
            noncurrent(0, None, Some(9)),
            marker(0, 1),
            mpu(0),
        ];
        for kind in ActionKind::EMISSION_ORDER {
            for info in &infos {
                assert!(!fires_k(&r, kind, info, Nanos::MAX), "{kind}");
                assert_eq!(due_at(&r, kind, "k", info, &exact()), None);
            }
        }
    }

    #[test]
    fn filter_gate_uses_key_size_and_tags() {
        let r = FlatRule {
            prefix: "logs/".into(),
            size_lt: 100,
            tags: [("env".to_string(), "dev".to_string())].into(),
            expiration_days: 1,
            ..rule()
        };
        let k = ActionKind::ExpirationDays;
        let mut info = current(T0);
        info.tags = [("env".to_string(), "dev".to_string())].into();
        let late = T0 + 5 * DAY;
        assert!(fires(&r, k, "logs/a", &info, late, &exact()));
        assert!(!fires(&r, k, "data/a", &info, late, &exact()));
        let mut big = info.clone();
        big.size = 100;
        assert!(!fires(&r, k, "logs/a", &big, late, &exact()));
        let mut untagged = info.clone();
        untagged.tags.clear();
        assert!(!fires(&r, k, "logs/a", &untagged, late, &exact()));
    }

    #[test]
    fn huge_day_counts_are_never_due_instead_of_overflowing() {
        let r = FlatRule {
            expiration_days: i64::MAX,
            ..rule()
        };
        assert_eq!(
            due_at(&r, ActionKind::ExpirationDays, "k", &current(T0), &exact()),
            Some(Nanos::MAX)
        );
        assert!(!fires_k(
            &r,
            ActionKind::ExpirationDays,
            &current(T0),
            Nanos::MAX - 1
        ));
    }
}
