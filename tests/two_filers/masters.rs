//! Several masters in one raft group (`common::ha::ha_cluster()`), given as
//! weed's `-master` takes them (docs/grpc.md#several-masters).

use crate::SERIAL;
use crate::common;

use common::ha::{HaCluster, ha_cluster};
use common::*;

/// [`Cluster::bucket_due_in_a_day`], and a cursor dir of its own.
async fn due_bucket(c: &HaCluster, name: &str) -> (String, String) {
    let b = c.bucket_due_in_a_day(name).await;
    (b.clone(), format!("/etc/s3/lifecycle/e2e-masters-{b}"))
}

/// `cluster.master = "a,b,c"` (an HA cluster's three masters, as weed's `-master` takes them)
/// was refused as "not one master gRPC address", and one follower given alone listed no filer
/// (followers answer membership from their own, empty, view). Now the pass goes through the
/// leader the first answering master names, also once that leader is killed and another one is
/// elected.
#[tokio::test(flavor = "multi_thread")]
async fn several_masters_were_refused_and_a_follower_listed_no_filer() {
    let _serial = SERIAL.lock().await;
    let c = tokio::task::spawn_blocking(ha_cluster).await.unwrap();
    let s3 = c.s3_client();
    let later = rfc3339(now_ns() + 3 * DAY_NS);
    let (first, first_dir) = due_bucket(c, "e2e-masters-a").await;
    let (second, second_dir) = due_bucket(c, "e2e-masters-b").await;
    let leader = c.leader_seen_by(0).expect("a leader");
    // The followers first, the leader last.
    let mut order: Vec<String> = (0..3).map(|i| c.master_arg(i)).collect();
    order.sort_by_key(|m| *m == leader);
    let masters = order.join(",");
    let pass = async |bucket: &str, dir: &str| {
        let args = ["run-once", "--buckets", bucket, "--now", &later, "--json"];
        let env = [
            ("S3_LIFECYCLED__CLUSTER__MASTER", masters.as_str()),
            ("S3_LIFECYCLED__CURSOR__DIR", dir),
        ];
        run_raw(&args, &env).await
    };

    let p = pass(&first, &first_dir).await;
    assert_eq!(p.code, 0, "masters {masters}:\n{}", p.describe());
    assert_eq!(p.json().total("DONE"), 2, "{}", p.describe());
    assert_eq!(count_objects(&s3, &first).await, 0, "{}", p.describe());

    // The leader dies; the others elect a new one. The same list still works, the dead one
    // included, once the filer and the gateway have registered with the new leader (a few
    // seconds): until then a pass fails naming the masters, having deleted nothing.
    let killed = tokio::task::spawn_blocking(|| ha_cluster().kill_leader())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let p = loop {
        let p = pass(&second, &second_dir).await;
        let waiting = p.code == 1 && p.stderr.contains("lists no");
        if !waiting || started.elapsed() > std::time::Duration::from_secs(60) {
            break p;
        }
        assert_eq!(count_objects(&s3, &second).await, 2, "{}", p.describe());
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    assert_eq!(
        p.code,
        0,
        "masters {masters}, {} killed:\n{}",
        c.master_arg(killed),
        p.describe()
    );
    assert_eq!(p.json().total("DONE"), 2, "{}", p.describe());
    assert_eq!(count_objects(&s3, &second).await, 0, "{}", p.describe());
}
