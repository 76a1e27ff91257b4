//! Bucket discovery: lists the buckets root in the filer and reads each
//! bucket's versioning state, object-lock flag and lifecycle configuration
//! (docs/filer-layout.md#bucket-entry). A bucket whose lifecycle document cannot be parsed
//! is reported and skipped; the others carry on.

use futures::StreamExt;

use crate::engine::keys;
use crate::lifecycle::{self, BucketError, FlatRule, Severity, ValidationError};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{DEFAULT_PAGE, FilerClient, FilerError};

pub use crate::engine::Versioning;

/// One bucket and its lifecycle-relevant settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketInfo {
    /// Bucket name (directory name under the buckets root).
    pub name: String,
    pub versioning: Versioning,
    /// `Seaweed-X-Amz-Object-Lock-Enabled` is set. The S3 server treats such
    /// buckets as versioned even without a versioning value (docs/filer-layout.md#bucket-entry).
    pub object_lock: bool,
    /// The raw lifecycle document, verbatim; `None` when absent or empty.
    pub lifecycle_xml: Option<Vec<u8>>,
    /// The document flattened the way SeaweedFS does, in document order;
    /// empty without a document.
    pub rules: Vec<FlatRule>,
    /// Strict AWS validation findings. SeaweedFS accepted the document and
    /// enforces it anyway, so these are reported, never fatal.
    pub diagnostics: Vec<ValidationError>,
}

impl BucketInfo {
    /// The engine's compile input for this bucket.
    pub fn to_config(&self) -> crate::engine::BucketConfig {
        crate::engine::BucketConfig {
            name: self.name.clone(),
            versioning: self.versioning,
            object_lock: self.object_lock,
            rules: self.rules.clone(),
        }
    }

    /// True when the bucket carries a lifecycle document with at least one rule.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Validation findings that AWS would reject the document for.
    pub fn validation_errors(&self) -> impl Iterator<Item = &ValidationError> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
    }
}

/// The result of one discovery pass.
#[derive(Debug, Clone, Default)]
pub struct BucketScan {
    /// Every bucket that could be read, in listing (name) order, with or
    /// without a lifecycle document.
    pub buckets: Vec<BucketInfo>,
    /// Buckets skipped because their lifecycle document cannot be parsed.
    pub errors: Vec<BucketError>,
}

impl BucketScan {
    /// Every bucket found, with whether it has a lifecycle configuration (a
    /// broken one counts), for [`crate::engine::names::check_exists`].
    pub fn names(&self) -> Vec<(&str, bool)> {
        self.buckets
            .iter()
            .map(|b| (b.name.as_str(), b.lifecycle_xml.is_some()))
            .chain(self.errors.iter().map(|e| (e.bucket.as_str(), true)))
            .collect()
    }
}

/// Lists `root` (the buckets root, see [`FilerClient::buckets_root`]) and
/// reads every bucket's settings. Dot-names (`.system`, …) and plain files are
/// not buckets. A listing failure is an error; a bad document only skips its
/// bucket.
pub async fn list_bucket_configs(
    client: &FilerClient,
    root: &str,
) -> Result<BucketScan, FilerError> {
    let mut scan = BucketScan::default();
    let mut listing = Box::pin(client.list_all(root, DEFAULT_PAGE));
    while let Some(entry) = listing.next().await {
        let entry = entry?;
        if !entry.is_directory || entry.name.starts_with('.') {
            continue;
        }
        match bucket_info(&entry) {
            Ok(info) => scan.buckets.push(info),
            Err(e) => scan.errors.push(e),
        }
    }
    Ok(scan)
}

/// Reads one bucket directory entry.
pub fn bucket_info(entry: &Entry) -> Result<BucketInfo, BucketError> {
    let ext = |k: &str| entry.extended.get(k).map(Vec::as_slice);
    let versioning = Versioning::from_extended(ext(keys::VERSIONING));
    let object_lock = ext(keys::OBJECT_LOCK_ENABLED).is_some_and(|v| {
        let v = String::from_utf8_lossy(v).trim().to_ascii_lowercase();
        v == "enabled" || v == "true"
    });
    let lifecycle_xml = ext(keys::LIFECYCLE_XML)
        .filter(|v| !v.iter().all(u8::is_ascii_whitespace))
        .map(<[u8]>::to_vec);
    let (rules, diagnostics) = match &lifecycle_xml {
        None => (Vec::new(), Vec::new()),
        Some(xml) => {
            let doc = lifecycle::parse(xml).map_err(|e| BucketError {
                bucket: entry.name.clone(),
                reason: format!(
                    "lifecycle configuration (filer Extended {}) cannot be parsed: {e}; the \
                     bucket's rules are not enforced until it is fixed with \
                     PutBucketLifecycleConfiguration (or removed with DeleteBucketLifecycle)",
                    keys::LIFECYCLE_XML
                ),
            })?;
            (doc.flatten(), lifecycle::validate(&doc))
        }
    };
    Ok(BucketInfo {
        name: entry.name.clone(),
        versioning,
        object_lock,
        lifecycle_xml,
        rules,
        diagnostics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn bucket(name: &str, ext: &[(&str, &[u8])]) -> Entry {
        Entry {
            name: name.into(),
            is_directory: true,
            extended: ext
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect::<HashMap<_, _>>(),
            ..Default::default()
        }
    }

    #[test]
    fn bucket_with_rules_and_lock() {
        let xml = b"<LifecycleConfiguration><Rule><ID>r</ID><Status>Enabled</Status>\
                    <Filter><Prefix>logs/</Prefix></Filter><Expiration><Days>3</Days></Expiration>\
                    </Rule></LifecycleConfiguration>";
        let e = bucket(
            "b",
            &[
                (keys::LIFECYCLE_XML, xml),
                (keys::VERSIONING, b"Enabled"),
                (keys::OBJECT_LOCK_ENABLED, b"Enabled"),
            ],
        );
        let info = bucket_info(&e).unwrap();
        assert_eq!(info.versioning, Versioning::Enabled);
        assert!(info.object_lock);
        assert_eq!(info.rules.len(), 1);
        assert_eq!(info.rules[0].prefix, "logs/");
        assert_eq!(info.rules[0].expiration_days, 3);
        assert!(info.has_rules());
    }

    #[test]
    fn empty_document_is_no_config() {
        let info = bucket_info(&bucket("b", &[(keys::LIFECYCLE_XML, b"  ")])).unwrap();
        assert_eq!(info.lifecycle_xml, None);
        assert!(!info.has_rules());
    }

    #[test]
    fn unparsable_document_names_the_bucket() {
        let err = bucket_info(&bucket("bad", &[(keys::LIFECYCLE_XML, b"<Lifecycle")])).unwrap_err();
        assert_eq!(err.bucket, "bad");
        assert!(err.reason.contains("cannot be parsed"), "{err}");
    }
}
