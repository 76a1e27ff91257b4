//! I/O adapters for a SeaweedFS cluster: filer client, meta-log reader, lister,
//! LifecycleDelete client and the cursor store. Everything here does network I/O;
//! the decisions it feeds live in [`crate::engine`].

pub mod buckets;
pub mod cursor;
pub mod delete;
pub mod filer;
pub mod lister;
pub mod metalog;
pub mod retention;
