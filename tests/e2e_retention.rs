//! End-to-end retention loss: the filer's oldest persisted meta-log files are deleted while a
//! cursor still needs them; the next `run-once` reports `retention_loss` and still deletes the
//! due objects (recovery walk). Its own test binary, hence its own cluster: deleting log files
//! would starve the replay of every other test sharing a cluster.

mod common;

use s3_lifecycled::pb::filer_pb::DeleteEntryRequest;

use common::metalog::{log_files, write_until_log_files};
use common::*;

#[tokio::test]
async fn deleted_meta_log_reports_retention_loss_and_still_deletes() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let ticks = c.new_bucket("e2e-ticks").await.unwrap();
    let b = c.new_bucket("e2e-retention").await.unwrap();
    c.put_lifecycle_xml(
        &b,
        &lifecycle(
            "<Rule><ID>x</ID><Status>Enabled</Status><Filter><Prefix>x/</Prefix></Filter>\
             <Expiration><Days>1</Days></Expiration></Rule>",
        ),
    )
    .await
    .unwrap();
    for k in ["x/1", "x/2", "x/3", "keep"] {
        put(&s3, &b, k, b"data", None).await;
    }
    let t0 = now_ns();
    let scope = Scope::new(&[&b]);
    // Not due: the cursor waits at the PUT events.
    let p = run_once(c, &scope, Some(t0 + HOUR_NS), &[], &[]).await;
    p.ok().assert_no_deletes();
    let p = run_once(c, &scope, Some(t0 + 2 * HOUR_NS), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&b).is_empty(), "{}", p.describe());

    // Lose every log file that starts at or before the PUTs' minute.
    write_until_log_files(c, &ticks, |files| files.iter().any(|f| f.ts_ns > t0)).await;
    let mut filer = c.filer_client().await.unwrap();
    let files = log_files(&mut filer).await;
    let mut deleted = 0;
    for f in &files {
        if f.ts_ns <= t0 {
            let resp = filer
                .delete_entry(DeleteEntryRequest {
                    directory: f.dir.clone(),
                    name: f.name.clone(),
                    is_delete_data: true,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            assert!(resp.error.is_empty(), "{}", resp.error);
            deleted += 1;
        }
    }
    assert!(deleted > 0, "no log file to delete: {files:?}");

    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&b).contains("retention_loss"),
        "{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &b).await, set(&["keep"]), "{}", p.describe());
    assert_eq!(r.total("DONE"), 3, "{}", p.describe());

    let p = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    let r = p.ok();
    r.assert_no_deletes();
    assert!(r.recovery_reasons(&b).is_empty(), "{}", p.describe());
}
