//! Resumable recovery walks on the real SeaweedFS 4.48 cluster: a recovery walk too long for
//! `pass.max_runtime` resumes where it stopped at the next pass instead of starting over, and the
//! walk's budget (`pass.walk_budget_fraction`) leaves replay its share, so a steady bucket is
//! still replayed in the pass that cut the walk
//! (docs/design-deviations.md#resumable-recovery-walks).

use crate::common;

use std::collections::BTreeSet;

use common::*;

/// Due objects of the walked bucket: at 30 deletes/s longer than `max_runtime` (before the fix,
/// the walk was cut and the steady bucket got no replay); with a 4 s walk budget, several
/// passes.
const N_WALK: usize = 300;
/// Objects of the walked bucket under a 30-day rule: never due in this test.
const N_KEEP: usize = 20;
/// Objects of the walked bucket under a 3-day rule, listed before the cut: not due in the pass
/// that cuts the walk, due in the later ones. The walk's first segment did not delete them and
/// later segments do not list them again, so the finished walk's replay must not vouch for them
/// (docs/design-deviations.md#resumable-recovery-walks).
const N_LATE: usize = 10;
/// Incomplete uploads of the walked bucket (abort after 1 day).
const N_UPLOADS: usize = 4;
/// Objects of the steady bucket, expired by replay.
const N_STEADY: usize = 48;

/// Slow deletes (a low rate, one in flight per shard) so the walk, not the bucket size, is long:
/// its 300 deletes take 10 s at this rate, its budget is 4 s. The budget leaves room for the
/// listing when other tests load the shared cluster: a 1.8 s budget was spent there before the
/// first delete.
const SLOW: [(&str, &str); 5] = [
    ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "30"),
    ("S3_LIFECYCLED__RATE__BURST", "1"),
    ("S3_LIFECYCLED__DISPATCH__MAX_IN_FLIGHT_PER_SHARD", "1"),
    ("S3_LIFECYCLED__PASS__MAX_RUNTIME", "8s"),
    ("S3_LIFECYCLED__PASS__WALK_BUDGET_FRACTION", "0.5"),
];

/// The `walk_resume` points saved for `bucket`, per shard.
async fn resume_points(c: &Cluster, scope: &Scope, bucket: &str) -> Vec<(u8, String)> {
    let mut out = Vec::new();
    for shard in 0..16u8 {
        let Some(e) = c
            .lookup_entry(&scope.cursor_dir, &format!("shard-{shard:02}.json"))
            .await
            .unwrap()
        else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&e.content).unwrap();
        if let Some(after) = v["buckets"][bucket]["walk_resume"]["after"].as_str() {
            out.push((shard, after.to_string()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn cut_recovery_walk_resumes_and_steady_replay_still_runs() {
    let c = cluster();
    let s3 = c.s3_client();
    let t0 = now_ns();
    let walked = c.new_bucket("resume-walk").await.unwrap();
    let steady = c.new_bucket("resume-steady").await.unwrap();
    c.put_objects_bulk(&walked, &keys("w/", N_WALK), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&walked, &keys("keep/", N_KEEP), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&walked, &keys("a-late/", N_LATE), b"x")
        .await
        .unwrap();
    for i in 0..N_UPLOADS {
        s3.create_multipart_upload()
            .bucket(&walked)
            .key(format!("w/up-{i}"))
            .send()
            .await
            .unwrap();
    }
    c.put_objects_bulk(&steady, &keys("r/", N_STEADY), b"x")
        .await
        .unwrap();
    c.put_lifecycle_xml(&steady, &lifecycle(&days_rule("days", "r/", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&walked, &steady]);

    // Pass 1: `steady` starts (nothing due yet); its objects are left to replay.
    let p = run_once(c, &scope, Some(t0), &[], &[]).await;
    p.ok().assert_no_deletes();

    // `walked` gets its rules now: the next pass cold-starts it with a recovery walk.
    let rules = format!(
        "{}{}{}<Rule><ID>abort</ID><Status>Enabled</Status><Filter><Prefix>w/</Prefix></Filter>\
         <AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>\
         </AbortIncompleteMultipartUpload></Rule>",
        days_rule("w", "w/", 1),
        days_rule("keep", "keep/", 30),
        days_rule("late", "a-late/", 3)
    );
    c.put_lifecycle_xml(&walked, &lifecycle(&rules))
        .await
        .unwrap();

    // Pass 2: the walk is cut by its budget; the steady bucket is still replayed.
    let p = run_once(c, &scope, Some(plus(t0, 3, 0)), &[], &SLOW).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert!(
        list_keys(&s3, &steady).await.is_empty(),
        "the steady bucket's replay ran although the walk was cut\n{}",
        p.describe()
    );
    let r = p.json();
    assert_eq!(r.v["outcome"], "truncated", "{}", p.describe());
    let why = r.v["truncated"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("walk budget"), "{why}\n{}", p.describe());
    let mut done = r.total("DONE");
    let mut noop = r.total("NOOP_RESOLVED");
    let left = list_keys(&s3, &walked).await;
    let walked_left = left.iter().filter(|k| k.starts_with("w/")).count();
    assert!(
        walked_left > 0 && walked_left < N_WALK,
        "the walk was cut part-way: {walked_left} of {N_WALK} left\n{}",
        p.describe()
    );
    let late: BTreeSet<String> = keys("a-late/", N_LATE).into_iter().collect();
    assert!(
        late.is_subset(&left),
        "nothing early: the 3-day objects stay\n{}",
        p.describe()
    );
    let points = resume_points(c, &scope, &walked).await;
    assert!(
        !points.is_empty(),
        "the cut walk saved where it resumes\n{}",
        p.describe()
    );

    // Later passes resume (never start over) until the walk finishes.
    let mut passes = 1;
    let mut resumed = 0;
    let finished = loop {
        passes += 1;
        assert!(passes <= 10, "the walk did not finish in 10 passes");
        // Two days later: the 3-day objects behind the resume point are due now.
        let p = run_once(c, &scope, Some(plus(t0, 5, passes)), &[], &SLOW).await;
        assert_eq!(p.code, 0, "{}", p.describe());
        let r = p.json();
        done += r.total("DONE");
        noop += r.total("NOOP_RESOLVED");
        if p.stderr.contains("recovery walk resumes") {
            resumed += 1;
        }
        if r.v["outcome"] == "completed" {
            break p;
        }
        assert_eq!(r.v["outcome"], "truncated", "{}", p.describe());
    };
    assert!(
        resumed >= 1,
        "no pass resumed the walk\n{}",
        finished.describe()
    );
    assert!(
        resume_points(c, &scope, &walked).await.is_empty(),
        "a finished walk leaves no resume point"
    );
    let left = list_keys(&s3, &walked).await;
    let keep: BTreeSet<String> = keys("keep/", N_KEEP).into_iter().collect();
    assert_eq!(
        left, keep,
        "every due object gone (the 3-day ones by the finished walk's replay), none early"
    );
    assert!(list_uploads(&s3, &walked).await.is_empty());
    assert_eq!(
        done,
        (N_STEADY + N_WALK + N_LATE + N_UPLOADS) as i64,
        "each due object and upload deleted exactly once over {passes} passes"
    );
    assert_eq!(noop, 0, "nothing sent twice");

    // The bucket no longer recovers.
    let p = run_once(c, &scope, Some(plus(t0, 5, passes + 1)), &[], &[]).await;
    let r = p.ok();
    assert!(r.recovery_reasons(&walked).is_empty(), "{}", p.describe());
    r.assert_no_deletes();
    eprintln!("walk of {N_WALK} due objects finished after {passes} passes ({resumed} resumed)");
}
