//! Bucket discovery and the filer client against a real cluster: versioning
//! states, object lock, buckets without a config, a malformed document in one
//! bucket (reported with its name, others unaffected), dot-directories skipped,
//! and the paged listing primitive.

use crate::common;

use aws_sdk_s3::types::BucketVersioningStatus;
use futures::TryStreamExt;
use s3_lifecycled::engine::keys;
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes};
use s3_lifecycled::seaweed::buckets::{Versioning, list_bucket_configs};

const XML: &[u8] = b"<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
<Rule><ID>r1</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status>\
<Expiration><Days>7</Days></Expiration></Rule>\
<Rule><ID>r2</ID><Filter><Prefix></Prefix></Filter><Status>Enabled</Status>\
<NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>\
</LifecycleConfiguration>";

#[tokio::test]
async fn bucket_discovery_reads_every_setting_and_isolates_bad_documents() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let filer = common::cluster().filer().await;

    let versioned = c.new_bucket("disc-versioned").await.unwrap();
    common::set_versioning(
        &common::cluster().s3_client(),
        &versioned,
        BucketVersioningStatus::Enabled,
    )
    .await;
    c.put_lifecycle_xml(&versioned, XML).await.unwrap();

    let suspended = c.new_bucket("disc-suspended").await.unwrap();
    common::set_versioning(
        &common::cluster().s3_client(),
        &suspended,
        BucketVersioningStatus::Enabled,
    )
    .await;
    common::set_versioning(
        &common::cluster().s3_client(),
        &suspended,
        BucketVersioningStatus::Suspended,
    )
    .await;

    let locked = c.unique_bucket("disc-lock");
    s3.create_bucket()
        .bucket(&locked)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();

    let plain = c.new_bucket("disc-plain").await.unwrap();

    // SeaweedFS validates XML at PUT time, so a broken document can only come
    // from elsewhere (an older server, a hand edit): write it into the filer.
    let broken = c.new_bucket("disc-broken").await.unwrap();
    let mut entry = filer.lookup("/buckets", &broken).await.unwrap().unwrap();
    entry.extended.insert(
        keys::LIFECYCLE_XML.to_string(),
        b"<LifecycleConfiguration><Rule>".to_vec(),
    );
    filer
        .update_entry("/buckets", entry, Default::default())
        .await
        .unwrap();

    // A dot-directory under the root is never a bucket, even with a config.
    let dot = format!(".hidden-{}", c.unique_bucket("dot"));
    filer
        .create_entry(
            "/buckets",
            Entry {
                name: dot.clone(),
                is_directory: true,
                attributes: Some(FuseAttributes {
                    file_mode: 0o755 | 0x8000_0000,
                    mtime: 1_700_000_000,
                    ..Default::default()
                }),
                extended: [(keys::LIFECYCLE_XML.to_string(), XML.to_vec())].into(),
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap();

    let root = filer.buckets_root().await.unwrap();
    let scan = list_bucket_configs(&filer, &root).await.unwrap();
    let find = |name: &str| scan.buckets.iter().find(|b| b.name == name);

    assert!(
        scan.buckets.iter().all(|b| !b.name.starts_with('.')),
        "dot-dirs must be skipped: {:?}",
        scan.buckets.iter().map(|b| &b.name).collect::<Vec<_>>()
    );

    let v = find(&versioned).expect("versioned bucket listed");
    assert_eq!(v.versioning, Versioning::Enabled);
    assert!(!v.object_lock);
    assert_eq!(v.lifecycle_xml.as_deref(), Some(XML));
    assert_eq!(v.rules.len(), 2);
    assert_eq!(
        (v.rules[0].id.as_str(), v.rules[0].prefix.as_str()),
        ("r1", "logs/")
    );
    assert_eq!(v.rules[0].expiration_days, 7);
    assert_eq!(v.rules[1].noncurrent_days, 3);
    assert_eq!(v.validation_errors().count(), 0, "{:?}", v.diagnostics);

    let s = find(&suspended).expect("suspended bucket listed");
    assert_eq!(s.versioning, Versioning::Suspended);
    assert!(!s.has_rules());

    let l = find(&locked).expect("object-lock bucket listed");
    assert!(l.object_lock);
    // SeaweedFS turns versioning on with object lock (docs/test-cluster.md#object-lock-buckets).
    assert_eq!(l.versioning, Versioning::Enabled);

    let p = find(&plain).expect("plain bucket listed");
    assert_eq!(p.versioning, Versioning::Unversioned);
    assert_eq!(p.lifecycle_xml, None);
    assert!(p.rules.is_empty());

    assert!(
        find(&broken).is_none(),
        "a bucket with a broken document is skipped"
    );
    let errs: Vec<_> = scan.errors.iter().filter(|e| e.bucket == broken).collect();
    assert_eq!(errs.len(), 1, "{:?}", scan.errors);
    assert!(errs[0].to_string().contains(&broken), "{}", errs[0]);
    assert!(errs[0].reason.contains("cannot be parsed"), "{}", errs[0]);
}

#[tokio::test]
async fn list_all_pages_through_a_directory_in_name_order() {
    let c = common::cluster();
    let bucket = c.new_bucket("listall").await.unwrap();
    let keys: Vec<String> = (0..25).map(|i| format!("d/k{i:02}")).collect();
    c.put_objects_bulk(&bucket, &keys, b"").await.unwrap();
    let filer = common::cluster().filer().await;
    let dir = format!("/buckets/{bucket}/d");

    // Page sizes that divide the count exactly, leave a remainder, or exceed it.
    for page in [1, 5, 7, 10_000] {
        let names: Vec<String> = filer
            .list_all(&dir, page)
            .map_ok(|e| e.name)
            .try_collect()
            .await
            .unwrap();
        let want: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
        assert_eq!(names, want, "page {page}");
    }
    let page = filer.list_page(&dir, "k10", 3).await.unwrap();
    let names: Vec<_> = page.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["k11", "k12", "k13"]);

    let missing: Vec<_> = filer
        .list_all(&format!("/buckets/{bucket}/nope"), 10)
        .try_collect()
        .await
        .unwrap();
    assert!(missing.is_empty());
}
