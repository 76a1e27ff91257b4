//! The S3 `LifecycleConfiguration` document: parsing (`xml`), strict AWS
//! validation (`validate`) and flattening into SeaweedFS's canonical rule form
//! (`FlatRule`), which is what the engine compiles and hashes. PURE: no I/O.

mod flatten;
pub mod model;
pub mod validate;
pub mod xml;

#[cfg(test)]
mod tests;

pub use model::{
    AbortIncompleteMultipartUpload, And, Expiration, Filter, LifecycleConfiguration,
    NoncurrentVersionExpiration, NoncurrentVersionTransition, Rule, Tag, Transition, parse,
};
pub use validate::{MAX_ID_CHARS, MAX_RULES, Severity, ValidationError, ValidationKind, validate};
pub use xml::{MAX_DOCUMENT_BYTES, ParseError, RuleLocator};

use std::collections::BTreeMap;

/// A bucket skipped because its lifecycle configuration cannot be used, and
/// why; the other buckets go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketError {
    /// Bucket name.
    pub bucket: String,
    /// What is wrong, including how to fix it.
    pub reason: String,
}

impl std::fmt::Display for BucketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bucket {}: {}", self.bucket, self.reason)
    }
}

use time::OffsetDateTime;

/// One lifecycle rule flattened the way SeaweedFS's `LifecycleToCanonical` does
/// (docs/lifecycle-config.md#canonical-form). This is the contract between the
/// XML layer and the engine: the rule hash (docs/rule-hash.md#rule-hash) covers
/// exactly these fields; deriving one differently changes hashes and forces recovery walks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlatRule {
    /// `<ID>`, verbatim; empty when absent. Not hashed.
    pub id: String,
    /// 1-based position of the rule in its document, for error messages.
    pub position: usize,
    /// True only when `<Status>` is exactly `Enabled`. Not hashed.
    pub enabled: bool,
    /// Key prefix; empty matches every key.
    pub prefix: String,
    /// Tag filter: every pair must be present on the object with this value.
    pub tags: BTreeMap<String, String>,
    /// `ObjectSizeGreaterThan` (strict); 0 = unset.
    pub size_gt: i64,
    /// `ObjectSizeLessThan` (strict); 0 = unset.
    pub size_lt: i64,
    /// `Expiration/Days`; 0 = unset.
    pub expiration_days: i64,
    /// `Expiration/Date`; `None` = unset.
    pub expiration_date: Option<OffsetDateTime>,
    /// `Expiration/ExpiredObjectDeleteMarker`.
    pub expired_object_delete_marker: bool,
    /// `NoncurrentVersionExpiration/NoncurrentDays`; 0 = unset.
    pub noncurrent_days: i64,
    /// `NoncurrentVersionExpiration/NewerNoncurrentVersions`; 0 = unset.
    pub newer_noncurrent_versions: i64,
    /// `AbortIncompleteMultipartUpload/DaysAfterInitiation`; 0 = unset.
    pub abort_mpu_days: i64,
    /// The rule carries `Transition`/`NoncurrentVersionTransition`, which this
    /// service parses but does not enforce.
    pub has_transition: bool,
}
