//! Shared integration-test support, the one set every test binary uses (`mod common;`):
//!
//! - [`cluster`]: one real SeaweedFS cluster per test binary (`cluster()`), started on first use;
//! - [`split`]: the same as four processes whose filer and S3 gateway can be restarted
//!   (`split_cluster()`), for fault tests; it derefs to a [`Cluster`] so every helper works on it;
//! - [`s3`]: S3 and filer clients for it, and the object helpers tests read effects back with;
//! - [`bin`]: the binary under test: `run-once` over an isolated [`Scope`], its `--json` report,
//!   raw invocations;
//! - [`serve`]: a running `s3-lifecycled serve` and its admin CLI;
//! - [`clock`]: the wall clock, `--now` values, lifecycle-day arithmetic;
//! - [`scenario`]: the usual setup as one builder: bucket, versioning, objects, rules, passes;
//! - [`rules`]: lifecycle documents; [`events`] and [`metalog`]: the meta-log;
//! - [`gateway`]: stand-in S3 gateways for `LifecycleDelete`, and `run-once` through one;
//! - [`wait`]: polling with a deadline; [`http`]: a minimal HTTP client; [`otlp`]: a trace
//!   receiver.
//!
//! - [`admin`]: a real `weed admin` and plugin workers connected to it.
//!
//! Not every test binary uses every helper.
#![allow(dead_code, unused_imports)]

pub mod admin;
pub mod bin;
pub mod clock;
pub mod cluster;
pub mod events;
pub mod gateway;
pub mod ha;
pub mod http;
pub mod metalog;
pub mod mini;
pub mod otlp;
pub mod rules;
pub mod s3;
pub mod scenario;
pub mod serve;
pub mod split;
pub mod tls;
pub mod wait;

pub use bin::*;
pub use clock::*;
pub use cluster::{Cluster, FILER_CONF, cluster, encrypted_volume_cluster, weed_defaults_cluster};
pub use gateway::*;
pub use rules::*;
pub use s3::*;
pub use scenario::Scenario;
pub use serve::*;
pub use split::{Role, SplitCluster, multi_cluster, split_cluster};
pub use wait::*;
