//! Generated protobuf and gRPC code (see `build.rs` and `proto/`).

#![allow(clippy::all, missing_docs)]

/// SeaweedFS filer protocol (our subset of `filer.proto`).
pub mod filer_pb {
    tonic::include_proto!("filer_pb");
}

/// SeaweedFS S3 lifecycle-internal protocol (`LifecycleDelete`).
pub mod s3_lifecycle_pb {
    tonic::include_proto!("s3_lifecycle_pb");
}

/// SeaweedFS master protocol (our subset of `master.proto`: cluster membership).
pub mod master_pb {
    tonic::include_proto!("master_pb");
}

/// The admin API of s3-lifecycled itself.
pub mod admin {
    tonic::include_proto!("lifecycled_admin.v1");
}

/// The `weed admin` plugin-worker protocol (our subset of `plugin.proto`).
pub mod plugin {
    tonic::include_proto!("plugin");
}

/// The encoded `FileDescriptorSet` of every file in `proto/`, as compiled by build.rs.
/// The proto conformance test compares it with what a live SeaweedFS serves.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));
