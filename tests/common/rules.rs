//! Lifecycle configuration documents: XML built for a test, and the fixture documents under
//! `tests/fixtures/lifecycle/`.

use std::path::{Path, PathBuf};

/// An Expiration Date long past, so a Date rule is due on every pass.
pub const PAST_DATE: &str = "2020-01-01T00:00:00Z";

/// The lifecycle document wrapper around `rules` (each a `<Rule>…</Rule>`).
pub fn lifecycle(rules: &str) -> Vec<u8> {
    format!(
        "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{rules}</LifecycleConfiguration>"
    )
    .into_bytes()
}

/// An enabled Expiration Days rule over `prefix`.
pub fn days_rule(id: &str, prefix: &str, days: u32) -> String {
    format!(
        "<Rule><ID>{id}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}</Prefix></Filter>\
         <Expiration><Days>{days}</Days></Expiration></Rule>"
    )
}

/// An enabled Expiration Date rule over `prefix` ([`PAST_DATE`] for one that is always due).
pub fn date_rule(id: &str, prefix: &str, date: &str) -> String {
    format!(
        "<Rule><ID>{id}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}</Prefix></Filter>\
         <Expiration><Date>{date}</Date></Expiration></Rule>"
    )
}

/// An enabled NoncurrentVersionExpiration rule over `prefix`: noncurrent versions go `days`
/// days after they became noncurrent.
pub fn noncurrent_rule(id: &str, prefix: &str, days: u32) -> String {
    format!(
        "<Rule><ID>{id}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}</Prefix></Filter>\
         <NoncurrentVersionExpiration><NoncurrentDays>{days}</NoncurrentDays></NoncurrentVersionExpiration></Rule>"
    )
}

/// An enabled ExpiredObjectDeleteMarker rule over `prefix`: lone delete markers go.
pub fn delete_marker_rule(id: &str, prefix: &str) -> String {
    format!(
        "<Rule><ID>{id}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}</Prefix></Filter>\
         <Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>"
    )
}

/// An enabled AbortIncompleteMultipartUpload rule over `prefix`: uploads are aborted `days`
/// days after they were started.
pub fn abort_upload_rule(id: &str, prefix: &str, days: u32) -> String {
    format!(
        "<Rule><ID>{id}</ID><Status>Enabled</Status><Filter><Prefix>{prefix}</Prefix></Filter>\
         <AbortIncompleteMultipartUpload><DaysAfterInitiation>{days}</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
    )
}

/// `tests/fixtures/lifecycle/<sub>`.
pub fn lifecycle_fixture_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lifecycle")
        .join(sub)
}

/// The `.xml` documents in `tests/fixtures/lifecycle/<sub>`, sorted; panics when there are none.
pub fn lifecycle_fixture_files(sub: &str) -> Vec<PathBuf> {
    let root = lifecycle_fixture_dir(sub);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("fixture directory {}: {e}", root.display()))
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {}", root.display());
    v
}
