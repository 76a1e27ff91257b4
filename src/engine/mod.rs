//! The pure lifecycle engine: action kinds, rule hashes, compilation into a
//! snapshot and its views, cursor hashes, due-time math, shards, entry identity,
//! walker evaluation and meta-log routing. No I/O, no actix, no system clock:
//! every function that needs "now" takes it as an argument.
//!
//! Timestamps are `i64` nanoseconds since the Unix epoch ([`Nanos`]), the unit
//! of the filer's meta-log `ts_ns`; durations (TTLs, retention windows) are
//! [`std::time::Duration`].

pub mod action;
pub mod evaluate;
pub mod filter;
pub mod identity;
pub mod keys;
pub mod rule_hash;
pub mod shard;
pub mod time;
pub mod versions;

pub use action::{ActionKind, RuleMode};
pub use evaluate::ObjectInfo;
pub use identity::EntryIdentity;
pub use rule_hash::RuleHash;
pub use shard::{SHARD_COUNT, shard_id};
pub use time::{DueRounding, Nanos, TimeConfig};
