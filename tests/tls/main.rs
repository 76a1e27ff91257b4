//! The gRPC mutual-TLS cluster (`common::tls::tls_cluster()`, certificates
//! made with `openssl` at start, volume servers that ask for read tokens), one
//! whose volume servers serve HTTPS and one whose filer encrypts volume data:
//! our clients against the filer,
//! gateway and volume servers, and the plugin worker against a `weed admin`
//! with `[grpc.admin]` TLS.

#[path = "../common/mod.rs"]
mod common;

mod admin_tls;
mod tls;
mod volume_reads;
