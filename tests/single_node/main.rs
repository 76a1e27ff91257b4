//! Every end-to-end test that can share one single-node `weed server`
//! (`common::cluster()`, started on first use): each test keeps to its own
//! buckets and cursor dir (`common::Scope`), so they run side by side.
//! One module per feature; see tests/README.md. Tests that would spoil a
//! shared cluster (deleting log files, counting every bucket's events) have
//! binaries of their own.

#[path = "../common/mod.rs"]
mod common;

mod addresses;
mod cluster_smoke;
mod config_change;
mod crash;
mod expiration;
mod forecast;
mod hung_gateway;
mod log_refs;
mod multipart;
mod nothing_lost;
mod partial_recovery;
mod pass_live;
mod passes;
mod proto_conformance;
mod reclaim;
mod record_events;
mod resumable_walk;
mod safety;
mod seaweed_cursor;
mod seaweed_delete;
mod seaweed_filer;
mod seaweed_lister;
mod seaweed_metalog;
mod service_api;
mod service_lifecycle;
mod support;
mod ttl_audit;
mod versioning;
mod walk_failure;
