//! Names of the filer Extended keys and reserved paths that SeaweedFS's S3
//! gateway writes (docs/filer-layout.md#extended-keys). One place, so a typo
//! cannot make one module disagree with another.

/// Bucket entry: the raw PutBucketLifecycleConfiguration body.
pub const LIFECYCLE_XML: &str = "s3-bucket-lifecycle-configuration-xml";
/// Bucket entry: `Enabled` | `Suspended`; absent = never versioned.
pub const VERSIONING: &str = "Seaweed-X-Amz-Versioning";
/// Bucket entry: object lock enabled (value `Enabled`).
pub const OBJECT_LOCK_ENABLED: &str = "Seaweed-X-Amz-Object-Lock-Enabled";

/// Version file (and explicit null version): its version id.
pub const VERSION_ID: &str = "Seaweed-X-Amz-Version-Id";
/// Version file: `true` on a delete marker.
pub const DELETE_MARKER: &str = "Seaweed-X-Amz-Delete-Marker";
/// Version file: decimal ns when the version became noncurrent.
pub const NONCURRENT_SINCE_NS: &str = "Seaweed-X-Amz-Noncurrent-Since-Ns";

/// `.versions` folder: id of the latest version.
pub const LATEST_VERSION_ID: &str = "Seaweed-X-Amz-Latest-Version-Id";
/// `.versions` folder: file name (`v_<id>`) of the latest version.
pub const LATEST_VERSION_FILE_NAME: &str = "Seaweed-X-Amz-Latest-Version-File-Name";
/// `.versions` folder: cached mtime (decimal **seconds**) of the latest version.
pub const LATEST_VERSION_MTIME: &str = "Seaweed-X-Amz-Latest-Version-Mtime";
/// `.versions` folder: `true` when the latest version is a delete marker.
pub const LATEST_VERSION_IS_DELETE_MARKER: &str = "Seaweed-X-Amz-Latest-Version-Is-Delete-Marker";
/// `.versions` folder: `true` when the bare null version is the latest.
pub const NULL_VERSION_IS_LATEST: &str = "Seaweed-X-Amz-Null-Version-Is-Latest";

/// Object tags are Extended entries `X-Amz-Tagging-<key>` → value.
pub const TAG_PREFIX: &str = "X-Amz-Tagging-";
/// Object ETag; present on folder-marker directory objects.
pub const ETAG: &str = "Seaweed-X-Amz-ETag";
/// MPU upload directory: the destination object key.
pub const MPU_KEY: &str = "key";

/// Suffix of a versioned key's folder.
pub const VERSIONS_SUFFIX: &str = ".versions";
/// Prefix of a version file's name inside the `.versions` folder.
pub const VERSION_FILE_PREFIX: &str = "v_";
/// Folder of in-progress multipart uploads inside a bucket.
pub const UPLOADS_DIR: &str = ".uploads";
/// The null version id.
pub const NULL_VERSION: &str = "null";
