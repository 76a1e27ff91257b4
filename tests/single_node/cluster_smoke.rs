//! Smoke test of the shared SeaweedFS fixture: the cluster starts, S3 and filer gRPC work, and a
//! raw lifecycle XML is stored byte for byte.

use crate::common;

use aws_sdk_s3::primitives::ByteStream;

#[tokio::test]
async fn cluster_serves_s3_and_filer_grpc() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let bucket = c.new_bucket("smoke").await.unwrap();

    s3.put_object()
        .bucket(&bucket)
        .key("docs/a.txt")
        .body(ByteStream::from_static(b"hello smoke"))
        .send()
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("docs/a.txt")
        .send()
        .await
        .unwrap();
    let body = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(&body[..], b"hello smoke");

    let entry = c
        .lookup_entry(&format!("/buckets/{bucket}/docs"), "a.txt")
        .await
        .unwrap()
        .expect("object entry exists in the filer");
    assert_eq!(entry.attributes.unwrap().file_size, 11);
    assert!(!entry.is_directory);
    assert!(
        entry.extended.contains_key("Seaweed-X-Amz-ETag"),
        "{:?}",
        entry.extended.keys()
    );

    let missing = c
        .lookup_entry(&format!("/buckets/{bucket}"), "no-such-key")
        .await
        .unwrap();
    assert!(missing.is_none());
}

#[tokio::test]
async fn raw_lifecycle_xml_round_trips_byte_for_byte() {
    let c = common::cluster();
    let bucket = c.new_bucket("smoke-lc").await.unwrap();
    // Things an SDK would normalise away: indentation, `<Prefix />`, an unknown element. (A bare
    // `<Date>2030-01-01</Date>` is rejected with MalformedXML by 4.48, so the date has a time.)
    let xml = b"<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n  <Rule>\n    <ID>r1</ID>\n    <Filter><Prefix /></Filter>\n    <Status>Enabled</Status>\n    <Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration>\n    <UnknownToSdk>kept</UnknownToSdk>\n  </Rule>\n</LifecycleConfiguration>\n";
    c.put_lifecycle_xml(&bucket, xml).await.unwrap();
    let entry = c.lookup_entry("/buckets", &bucket).await.unwrap().unwrap();
    assert_eq!(
        entry
            .extended
            .get(common::s3::LIFECYCLE_XML_KEY)
            .map(Vec::as_slice),
        Some(&xml[..])
    );
}

#[tokio::test]
async fn bulk_puts_land_and_buckets_are_unique() {
    let c = common::cluster();
    assert_ne!(c.unique_bucket("x"), c.unique_bucket("x"));
    let bucket = c.new_bucket("smoke-bulk").await.unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("bulk/{i:03}")).collect();
    c.put_objects_bulk(&bucket, &keys, b"x").await.unwrap();
    let listed = c
        .s3_client()
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("bulk/")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.key_count(), Some(40));
}

#[tokio::test]
async fn backdate_moves_mtime_and_is_seen_in_the_meta_log() {
    let c = common::cluster();
    let bucket = c.new_bucket("smoke-backdate").await.unwrap();
    c.put_objects_bulk(&bucket, &["old.txt".to_string()], b"aged")
        .await
        .unwrap();
    let since = common::now_ns();
    let dir = format!("/buckets/{bucket}");
    let age = std::time::Duration::from_secs(40 * 86_400);
    c.backdate(&dir, "old.txt", age).await.unwrap();

    let entry = c.lookup_entry(&dir, "old.txt").await.unwrap().unwrap();
    let attrs = entry.attributes.unwrap();
    let expected = common::now_ns() / 1_000_000_000 - 40 * 86_400;
    assert!(
        (attrs.mtime - expected).abs() <= 2,
        "mtime {} vs {expected}",
        attrs.mtime
    );
    assert_eq!(attrs.mtime_ns, 0);

    let events = c
        .subscribe_events(&format!("{dir}/"), since, common::now_ns())
        .await
        .unwrap();
    let update = events
        .iter()
        .find(|e| common::events::kind(e) == "UPDATE")
        .expect("backdating emits an UPDATE");
    let new = update
        .event_notification
        .as_ref()
        .unwrap()
        .new_entry
        .as_ref()
        .unwrap();
    assert_eq!(new.attributes.as_ref().unwrap().mtime, attrs.mtime);
}
