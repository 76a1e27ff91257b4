//! The six lifecycle action kinds (numbered as the SeaweedFS proto enum) and the
//! rule modes mirrored from SeaweedFS's `LifecycleState.RuleMode`.

use serde::Serialize;

/// What a compiled action does. The discriminant is the `s3_lifecycle_pb.ActionKind`
/// enum number (docs/rule-hash.md#action-kinds); it travels in every `LifecycleDelete` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Current version older than `Expiration/Days`.
    ExpirationDays = 1,
    /// Current version on or after `Expiration/Date`.
    ExpirationDate = 2,
    /// Noncurrent version older than `NoncurrentDays` since it became noncurrent.
    NoncurrentDays = 3,
    /// Noncurrent version beyond the `NewerNoncurrentVersions` newest (count only).
    NewerNoncurrent = 4,
    /// Incomplete multipart upload older than `DaysAfterInitiation`.
    AbortMpu = 5,
    /// Delete marker that is the sole surviving version of its key.
    ExpiredDeleteMarker = 6,
}

impl ActionKind {
    /// Every kind, in the order SeaweedFS emits them for one rule (docs/rule-hash.md#action-kinds).
    pub const EMISSION_ORDER: [ActionKind; 6] = [
        ActionKind::ExpirationDays,
        ActionKind::ExpirationDate,
        ActionKind::ExpiredDeleteMarker,
        ActionKind::NoncurrentDays,
        ActionKind::NewerNoncurrent,
        ActionKind::AbortMpu,
    ];

    pub fn proto_number(self) -> i32 {
        self as i32
    }

    /// The metrics label, identical to the Go worker's `String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::ExpirationDays => "expiration_days",
            ActionKind::ExpirationDate => "expiration_date",
            ActionKind::NoncurrentDays => "noncurrent_days",
            ActionKind::NewerNoncurrent => "newer_noncurrent",
            ActionKind::AbortMpu => "abort_mpu",
            ActionKind::ExpiredDeleteMarker => "expired_delete_marker",
        }
    }

    /// Replay kinds have an event-time-monotonic due time and are served by
    /// meta-log replay; the others need current bucket state and are walker kinds.
    pub fn is_replay_kind(self) -> bool {
        matches!(
            self,
            ActionKind::ExpirationDays | ActionKind::NoncurrentDays | ActionKind::AbortMpu
        )
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rule mode, numbered as SeaweedFS's `RuleMode` (docs/rule-hash.md#rule-modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleMode {
    /// Served by meta-log replay.
    EventDriven = 1,
    /// `Expiration/Date`: served by the walker once the date passes.
    ScanAtDate = 2,
    /// A replay kind whose TTL exceeds the meta-log retention: served by the walker.
    ScanOnly = 3,
    /// The rule's Status is not `Enabled`: never fires.
    Disabled = 4,
}

impl RuleMode {
    /// The Go string form.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleMode::EventDriven => "event_driven",
            RuleMode::ScanAtDate => "scan_at_date",
            RuleMode::ScanOnly => "scan_only",
            RuleMode::Disabled => "disabled",
        }
    }
}
