//! What routing and the walker produce: a lifecycle delete to perform
//! ([`Match`]), a replay match a pass keeps pending ([`PendingMatch`]), and
//! the filer lookup a deferred match waits on ([`DeferredLookup`], [`Expect`]).

use crate::engine::progress::subject_of;
use crate::engine::{ActionKind, EntryIdentity, Nanos, RuleHash, keys};

/// One lifecycle delete to perform (when `due` has passed), from replay or the
/// walker. Maps 1:1 onto a `LifecycleDelete` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub bucket: String,
    /// The logical object key the rule was evaluated on (for an MPU, the
    /// destination key).
    pub key: String,
    /// `LifecycleDelete.object_path`: the logical key, or `.uploads/<id>` for
    /// AbortMpu (sending the destination key there is BLOCKED by the server).
    pub object_path: String,
    /// `LifecycleDelete.version_id`: `""` for ExpirationDays/Date and
    /// AbortMpu; the version id (may be `null`) for the noncurrent and
    /// delete-marker kinds.
    pub version_id: String,
    /// Rule the match came from.
    pub rule_hash: RuleHash,
    pub kind: ActionKind,
    /// When the action becomes (or became) due; for a deferred match, when
    /// to do its lookup (the resolved match may come out later).
    pub due: Nanos,
    /// CAS witness: identity of the entry that was evaluated; empty for a
    /// deferred match, which must never be sent as is.
    pub identity: EntryIdentity,
    /// Shard that owns the match: the event's physical path for replay, the
    /// logical key (MPU: destination key) for the walker (docs/rule-hash.md#shard-function).
    pub shard: u8,
    /// `Some` for a *deferred* match: the event alone could not show which
    /// entry to act on, so the caller must look it up (once the match is
    /// due) and turn it into a concrete match with [`resolve_deferred`](crate::engine::deferred::resolve_deferred)
    /// before sending anything. Such a match has an empty `identity`. `None`
    /// for every concrete match (all walker matches, all other replay ones).
    pub lookup: Option<DeferredLookup>,
}

/// The filer entry a deferred [`Match`] depends on: `LookupDirectoryEntry`
/// of `directory` + `name`, then [`resolve_deferred`](crate::engine::deferred::resolve_deferred).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredLookup {
    /// Full filer directory path of the entry, e.g. `/buckets/b/docs`.
    pub directory: String,
    /// Entry name inside `directory`, e.g. `a.txt` or `v_<id>`.
    pub name: String,
    /// What the entry must be for the match to stand.
    pub expect: Expect,
}

impl DeferredLookup {
    /// For [`Expect::NullVersion`]: the `<key>.versions` folder (directory,
    /// name) whose pointer must still name a non-null version when the match
    /// is dispatched; see [`null_still_displaced`](crate::engine::deferred::null_still_displaced). `None` for other lookups.
    pub fn folder(&self) -> Option<(String, String)> {
        match self.expect {
            Expect::NullVersion => Some((
                self.directory.clone(),
                format!("{}{}", self.name, keys::VERSIONS_SUFFIX),
            )),
            Expect::Version { .. } => None,
        }
    }
}

/// The shape a looked-up entry must have (see [`resolve_deferred`](crate::engine::deferred::resolve_deferred)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The bare `<key>` entry, counting as the key's null version
    /// (docs/filer-layout.md#null-version), displaced by a versioned write.
    NullVersion,
    /// The version file with this id, not a delete marker.
    Version {
        /// Expected `Seaweed-X-Amz-Version-Id`.
        version_id: String,
    },
}

/// A replay match due after the pass's `now`: all the shard's tracker
/// needs to keep it pending and to tally it (its action, due time, subject
/// and size). It is never sent, so it carries no strings and no identity
/// ([`route_for_pass`](crate::engine::route::route_for_pass)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMatch {
    /// Rule the match came from.
    pub rule_hash: RuleHash,
    pub kind: ActionKind,
    /// When it becomes due (after the pass's `now`).
    pub due: Nanos,
    /// [`subject_of`] its object path and version id.
    pub subject: u64,
    /// The entry's size in bytes (0 for a deferred match), for the forecast.
    pub bytes: u64,
}

impl PendingMatch {
    /// The pending form of a match built in full.
    pub fn of(m: &Match) -> PendingMatch {
        PendingMatch {
            rule_hash: m.rule_hash,
            kind: m.kind,
            due: m.due,
            subject: subject_of(&m.object_path, &m.version_id),
            bytes: u64::try_from(m.identity.size).unwrap_or(0),
        }
    }
}
