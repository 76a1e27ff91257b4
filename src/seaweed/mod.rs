//! I/O adapters for a SeaweedFS cluster: filer client, meta-log reader, lister,
//! LifecycleDelete client and the cursor store, plus the gRPC endpoint builder
//! every client (the admin CLI's too) connects through. Everything here does
//! network I/O; the decisions it feeds live in [`crate::engine`].

pub mod buckets;
pub mod controls;
pub mod cursor;
pub mod delete;
pub mod discovery;
pub mod endpoint;
pub mod filer;
pub mod gateway_pool;
pub mod lister;
pub mod logfile;
pub mod metalog;
pub mod metalog_error;
pub mod pool;
pub mod resume_dedup;
pub mod retention;
pub mod store_check;
pub mod subscription;
pub mod tls;
pub mod tls_failure;
pub mod tls_legacy;
pub mod tls_verify;
pub mod ttl_scan;
pub mod volume_jwt;
pub mod volumes;
pub mod weed_form;
pub mod x509;
