//! s3-lifecycled: enforces S3 bucket lifecycle rules on SeaweedFS clusters.
//!
//! # Layout
//! - [`lifecycle`]: PURE. The S3 `LifecycleConfiguration` XML model: parsing,
//!   strict AWS validation, and flattening into SeaweedFS's canonical rule form.
//! - [`engine`]: PURE. Compilation of rules into the six action kinds, rule and
//!   rule-set hashes, the snapshot and its replay/walk/recovery views, due-time
//!   math, the shard function, entry identity (the delete CAS witness), walker
//!   evaluation, meta-log event routing, the cursor's data and the delete
//!   request with its one outcome type. No I/O, no actix, no system clock:
//!   `now` is always an argument.
//! - [`status`]: PURE. The status model every reporter shares
//!   (`StatusSnapshot`, `ShardPhase`, `DeleteCounts`, `RunOutcome`,
//!   `MatchDecision`).
//! - [`pass`]: the daily pass. PURE: `plan` (the `PassPlan`, recovery
//!   triggers), `retry`, `shard_plan` (what a shard recovers or walks),
//!   `shard_run` (the per-shard state machine), `migrate` (Go cursor import),
//!   `report` (what a pass did). Started only through `runner` (`PassRunner`).
//!   Actors and adapters: `coordinator`, `actors` (16 long-lived supervised
//!   ShardActors with a process-wide restart budget, each with Walker and
//!   Replay children), `dispatch`, `ports`, `cluster`, `observe`.
//! - [`clock`]: the wall clock, for display and bookkeeping only.
//! - [`pb`]: generated protobuf/gRPC code for the SeaweedFS filer, the S3
//!   lifecycle service and our admin API.
//! - [`seaweed`]: I/O adapters that talk to a SeaweedFS cluster (the one gRPC
//!   endpoint builder, filer client, meta-log reader, lister, LifecycleDelete
//!   client, cursor store).
//! - [`admin`]: the admin gRPC API (trigger, status, last run) and health.
//! - [`cli`]: the `s3-lifecycled` command-line surface.
//! - [`telemetry`]: logging and OTLP tracing setup, span and field names.
//! - [`metrics`]: the Prometheus metrics, one method per emitted event.
//! - [`service`]: `serve`'s daily schedule, one pass at a time, the admin
//!   backend and the shutdown sequence.
//! - [`http`]: `/metrics`, `/health`, `/ready`, the HTML status page and
//!   `/status.json`.
//!
//! The pure modules import no actor, adapter, runtime, metrics or front-end
//! code (`tests/unit/architecture.rs` checks it). The actor tree (Coordinator → 16
//! ShardActors → Replay/Walker, plus the DeleteDispatcher pool) and the
//! SeaweedFS behaviour the code relies on are described in ARCHITECTURE.md and
//! docs/.

pub mod admin;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod http;
pub mod lifecycle;
pub mod metrics;
pub mod pass;
pub mod pb;
pub mod plugin;
pub mod seaweed;
pub mod service;
pub mod status;
pub mod telemetry;
