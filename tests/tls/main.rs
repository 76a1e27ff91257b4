//! The gRPC mutual-TLS cluster (`common::tls::tls_cluster()`, certificates
//! made with `openssl` at start): our clients against the filer and gateway,
//! and the plugin worker against a `weed admin` with `[grpc.admin]` TLS.

#[path = "../common/mod.rs"]
mod common;

mod admin_tls;
mod tls;
