//! The pure lifecycle engine: action kinds, rule hashes, compilation into a
//! snapshot and its views, cursor hashes, due-time math, shards, entry identity,
//! walker evaluation and meta-log routing. No I/O, no actix, no system clock:
//! every function that needs "now" takes it as an argument.
//!
//! Timestamps are `i64` nanoseconds since the Unix epoch ([`Nanos`]), the unit
//! of the filer's meta-log `ts_ns`; durations (TTLs, retention windows) are
//! [`std::time::Duration`].

pub mod action;
pub mod audit;
pub mod check;
pub mod compile;
pub mod cursor;
pub mod deferred;
pub mod delete;
pub mod due_index;
pub mod evaluate;
pub mod event;
pub mod explain;
pub mod filter;
pub mod forecast;
pub mod go_activity;
pub mod hashes;
pub mod identity;
pub mod instances;
pub mod journal;
pub mod keys;
pub mod lock;
pub mod matches;
pub mod merge;
pub mod names;
pub mod pending;
pub mod preview;
pub mod progress;
pub mod reclaim;
pub mod resume;
pub mod route;
pub mod rule_hash;
pub mod safety;
pub mod shard;
pub mod time;
pub mod versions;
pub mod views;
pub mod walk;

pub use action::{ActionKind, RuleMode};
pub use compile::{
    ActionKey, BucketConfig, BucketView, CompiledAction, Snapshot, Versioning, rule_action_kinds,
};
pub use deferred::{null_still_displaced, resolve_deferred};
pub use delete::{CallResult, DeleteOutcome, DeleteRequest};
pub use evaluate::ObjectInfo;
pub use event::MetaEvent;
pub use hashes::{
    EMPTY_HASH, promoted_hash, promoted_hash_by_bucket, replay_content_hash,
    replay_content_hash_by_bucket,
};
pub use identity::EntryIdentity;
pub use matches::{DeferredLookup, Expect, Match, PendingMatch};
pub use route::Routed;
pub use rule_hash::{RuleHash, rule_hash};
pub use shard::{SHARD_COUNT, shard_id};
pub use time::{DueRounding, Nanos, TimeConfig};
pub use walk::WalkItem;

/// serde's `skip_serializing_if` for a number field omitted when 0.
pub(crate) fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
