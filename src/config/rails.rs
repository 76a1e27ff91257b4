//! The safety rails and the after-pass work's settings: `[safety]`,
//! `[journal]`, `[reclaim]` and `[audit]`.

use std::time::Duration;

use serde::Deserialize;

use super::values::de_duration;

/// `[journal]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct JournalSettings {
    /// Day directories of the journal older than this are removed after
    /// each pass; 0 = keep forever.
    #[serde(deserialize_with = "de_duration")]
    pub retention: Duration,
}

impl Default for JournalSettings {
    fn default() -> Self {
        JournalSettings {
            retention: Duration::from_secs(30 * 86_400),
        }
    }
}

/// `[reclaim]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ReclaimSettings {
    /// After a pass that deleted, read the touched collections' volume
    /// garbage from the master and report it.
    pub report: bool,
    /// How long to wait, at most, for the master's view of the volumes to
    /// take in the pass's deletes and hold still (it trails by a heartbeat
    /// or two); 0 = read at once.
    #[serde(deserialize_with = "de_duration")]
    pub settle: Duration,
    /// Ask the master to vacuum the touched collections' volumes whose
    /// garbage ratio is at least `vacuum_threshold`, after the pass's
    /// deletes. Off by default: a vacuum rewrites volumes.
    pub vacuum: bool,
    /// Garbage ratio (0..1) from which a volume is vacuumed.
    pub vacuum_threshold: f64,
    /// Most volumes vacuumed after one pass.
    pub max_vacuum_volumes: usize,
    /// The master's own `-garbageThreshold` (0.3 by default): it vacuums
    /// volumes at or above it by itself, every 15 minutes, so those are left
    /// to it. 1 when the master's automatic vacuum is off.
    pub master_garbage_threshold: f64,
    /// Deadline of one volume's vacuum.
    #[serde(deserialize_with = "de_duration")]
    pub vacuum_timeout: Duration,
}

impl Default for ReclaimSettings {
    fn default() -> Self {
        ReclaimSettings {
            report: true,
            settle: Duration::from_secs(20),
            vacuum: false,
            vacuum_threshold: 0.1,
            max_vacuum_volumes: 8,
            master_garbage_threshold: 0.3,
            vacuum_timeout: Duration::from_secs(600),
        }
    }
}

/// `[audit]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSettings {
    /// `serve` audits at start and after each pass, for the status page and
    /// the `s3_lifecycled_ttl_findings` gauge.
    pub in_service: bool,
    /// Entries listed at most per bucket to find the ones carrying a TTL.
    pub max_entries: u64,
    /// Directory listings at most per bucket (each folder costs one).
    pub max_listings: u64,
}

impl AuditSettings {
    /// What one audit may read per bucket.
    pub fn budget(&self) -> crate::seaweed::ttl_scan::Budget {
        crate::seaweed::ttl_scan::Budget {
            max_entries: self.max_entries,
            max_listings: self.max_listings,
        }
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            in_service: true,
            max_entries: 1000,
            max_listings: 50,
        }
    }
}

/// `[safety]`
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SafetySettings {
    /// Deletes sent per bucket in one pass; past it the bucket is held
    /// (its remaining matches stay pending) until `approve`. 0 = no cap.
    pub max_deletes_per_bucket: u64,
    /// Fraction (0..1) of a bucket's entries one pass may delete; needs one
    /// count (listing) of every enforced bucket per pass. 0 = no cap.
    pub max_delete_fraction: f64,
    /// For this long after a bucket's lifecycle document changes, the bucket
    /// is evaluated dry (nothing sent, its matches pending); 0 = off.
    #[serde(deserialize_with = "de_duration")]
    pub rule_change_grace: Duration,
}

impl SafetySettings {
    /// The caps as the pure core takes them.
    pub fn cap_limits(&self) -> crate::engine::safety::CapLimits {
        crate::engine::safety::CapLimits {
            max_deletes: self.max_deletes_per_bucket,
            max_fraction: self.max_delete_fraction,
        }
    }
}
