//! Shared integration-test support: one real SeaweedFS cluster per test binary (`cluster()`),
//! S3/filer clients for it, and the recorded meta-log events under `tests/fixtures/events/`.
//!
//! Use from a test file with `mod common;`. Not every test binary uses every helper.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod events;
pub mod http;
pub mod s3;

pub use cluster::{Cluster, cluster};
pub use s3::{now_ns, set_versioning};
