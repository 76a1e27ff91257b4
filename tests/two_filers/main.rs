//! The two-filer cluster (`common::multi_cluster()`): one master, one volume
//! server, two filers with stores of their own, two gateways. Its tests kill
//! and restart filers, so they run one at a time ([`SERIAL`]). `masters.rs`
//! runs on a cluster of its own with three masters in one raft group
//! (`common::ha::ha_cluster()`), one of which it kills.

#[path = "../common/mod.rs"]
mod common;

mod masters;
mod multi;
mod multi_stream;

/// One test at a time across both modules: each kills or restarts a filer.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
