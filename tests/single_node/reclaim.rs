//! Reclaimed space on the real cluster (docs/reclaimed-space.md): the bytes a
//! pass reports deleted are the bytes the objects, versions and upload parts
//! held; the garbage it reports for a collection is what the volume servers
//! say; the vacuum runs only when asked and gives the space back.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The cluster is minutes old: with `--now` days ahead its probed log would be
/// shorter than the TTLs (docs/retention-probe.md). Say the log reaches back a
/// year.
const LONG_LOG: (&str, &str) = ("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "8760h");
/// The harness reads the master once (`common::bin::command`); these tests
/// are about its figures, so they wait as the default does.
const SETTLE: (&str, &str) = ("S3_LIFECYCLED__RECLAIM__SETTLE", "20s");

/// `len` bytes that do not compress: the volume server stores compressible
/// bodies compressed, and then its garbage is not the objects' size.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One collection as the volume server's `/status` sees it, live.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct OnDisk {
    size: u64,
    garbage: u64,
}

/// Per collection, from the volume server's `/status` (no heartbeat lag).
async fn volume_status(c: &Cluster) -> BTreeMap<String, OnDisk> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], c.ports.volume));
    let r = common::http::get_async(addr, "/status")
        .await
        .expect("GET volume /status");
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Value = serde_json::from_str(&r.text()).expect("volume /status is JSON");
    let mut out: BTreeMap<String, OnDisk> = BTreeMap::new();
    // `null` when the server holds no plain volume (all erasure-coded).
    let volumes = v.get("Volumes").expect("volume /status has Volumes");
    for vol in volumes.as_array().into_iter().flatten() {
        let col = vol["Collection"].as_str().unwrap_or_default().to_string();
        let e = out.entry(col).or_default();
        e.size += vol["Size"].as_u64().unwrap_or(0);
        e.garbage += vol["DeletedByteCount"].as_u64().unwrap_or(0);
    }
    out
}

/// Waits until the volume server's garbage for `collection` stops changing
/// (the filer deletes chunks from a queue, after the entry is gone).
async fn quiet_garbage(c: &Cluster, collection: &str) -> OnDisk {
    let mut last = volume_status(c).await.get(collection).copied();
    let start = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = volume_status(c).await.get(collection).copied();
        if now == last || start.elapsed() > Duration::from_secs(30) {
            return now.unwrap_or_default();
        }
        last = now;
    }
}

/// The report's collection row for `collection`.
fn reported(r: &Report, collection: &str) -> Value {
    r.v["reclaim"]["collections"]
        .as_array()
        .unwrap_or_else(|| panic!("no reclaim.collections:\n{}", r.context()))
        .iter()
        .find(|c| c["collection"] == collection)
        .cloned()
        .unwrap_or_else(|| panic!("no collection {collection}:\n{}", r.context()))
}

/// The `deleted` row of `bucket`/`rule`: (objects, bytes).
fn deleted(r: &Report, bucket: &str, rule: &str) -> (u64, u64) {
    let row = r.v["deleted"]
        .as_array()
        .unwrap_or_else(|| panic!("no deleted rows:\n{}", r.context()))
        .iter()
        .find(|d| d["bucket"] == bucket && d["rule"] == rule)
        .cloned()
        .unwrap_or_else(|| panic!("no deleted row {bucket}/{rule}:\n{}", r.context()));
    (
        row["objects"].as_u64().unwrap(),
        row["bytes"].as_u64().unwrap(),
    )
}

/// `|a - b| <= 5%` of the larger.
fn within_5_percent(a: u64, b: u64) -> bool {
    let (lo, hi) = (a.min(b), a.max(b));
    hi == 0 || (hi - lo) * 20 <= hi
}

/// The report's row for `collection` says what the volume server's `/status`
/// says once its deletion queue is quiet, and the garbage grew by the `freed`
/// bytes the pass deleted from it (needles carry a header and padding: a
/// little more than the bytes deleted, never less).
async fn matches_the_volume_server(
    c: &Cluster,
    p: &Pass,
    before: &BTreeMap<String, OnDisk>,
    collection: &str,
    freed: u64,
) {
    let r = p.json();
    let live = quiet_garbage(c, collection).await;
    let was = before.get(collection).copied().unwrap_or_default();
    let row = reported(&r, collection);
    let garbage = row["garbage_bytes"].as_u64().unwrap();
    assert!(
        within_5_percent(garbage, live.garbage),
        "{collection}: reported garbage {garbage}, volume server {live:?}\n{}",
        p.describe()
    );
    let grew = live.garbage - was.garbage;
    assert!(
        grew >= freed && within_5_percent(grew, freed),
        "{collection}: deleted {freed}, garbage grew {grew}"
    );
    let size = row["size_bytes"].as_u64().unwrap();
    assert!(
        within_5_percent(size, live.size),
        "{collection}: reported size {size}, volume server {live:?}"
    );
}

/// `old/` expires after 3 days, uploads are aborted after 1.
fn old_and_upload_rules() -> Vec<u8> {
    lifecycle(&format!(
        "{}{}",
        days_rule("old", "old/", 3),
        abort_upload_rule("mpu", "", 1)
    ))
}

#[tokio::test]
async fn deleted_bytes_count_objects_versions_and_parts_and_garbage_matches_the_volume_servers() {
    let c = common::cluster();
    let s3 = c.s3_client();
    // Unversioned: expired objects and an aborted upload's parts.
    let plain = c.new_bucket("e2e-reclaim-plain").await.unwrap();
    let mut object_bytes = 0u64;
    for i in 0..12u64 {
        let len = 20_000 + 7_919 * i as usize;
        object_bytes += len as u64;
        put(&s3, &plain, &format!("old/k{i:02}"), &noise(i, len), None).await;
    }
    put(&s3, &plain, "keep/k", &noise(99, 50_000), None).await;
    let upload = start_upload(&s3, &plain, "big/obj").await;
    let mut part_bytes = 0u64;
    for (n, len) in [(1, 60_000usize), (2, 45_000)] {
        part_bytes += len as u64;
        upload_part(
            &s3,
            &plain,
            "big/obj",
            &upload,
            n,
            &noise(1000 + n as u64, len),
        )
        .await;
    }
    c.put_lifecycle_xml(&plain, &old_and_upload_rules())
        .await
        .unwrap();
    // Versioned: noncurrent versions free their bytes; the current stays.
    let versioned = c.new_bucket("e2e-reclaim-ver").await.unwrap();
    enable_versioning(&s3, &versioned).await;
    let mut noncurrent_bytes = 0u64;
    for k in 0..3u64 {
        for v in 0..3u64 {
            let len = 30_000 + 1_000 * (3 * k + v) as usize;
            if v < 2 {
                noncurrent_bytes += len as u64;
            }
            let key = format!("nc/k{k}");
            put(&s3, &versioned, &key, &noise(500 + 3 * k + v, len), None).await;
        }
    }
    c.put_lifecycle_xml(
        &versioned,
        &lifecycle(
            "<Rule><ID>nc</ID><Status>Enabled</Status><Filter><Prefix>nc/</Prefix></Filter>\
             <NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays>\
             </NoncurrentVersionExpiration></Rule>",
        ),
    )
    .await
    .unwrap();
    let before = volume_status(c).await;
    let scope = Scope::new(&[&plain, &versioned]);
    let p = run_once(
        c,
        &scope,
        Some(plus(now_ns(), 5, 0)),
        &[],
        &[LONG_LOG, SETTLE],
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 12 + 1 + 6, "{}", p.describe());
    assert_eq!(r.v["reclaim"]["settled"], true, "{}", p.describe());
    assert_eq!(deleted(&r, &plain, "old"), (12, object_bytes));
    assert_eq!(
        deleted(&r, &plain, "mpu"),
        (1, part_bytes),
        "the parts' bytes"
    );
    assert_eq!(deleted(&r, &versioned, "nc"), (6, noncurrent_bytes));
    assert_eq!(
        r.v["deleted_bytes"].as_u64(),
        Some(object_bytes + part_bytes + noncurrent_bytes)
    );
    assert!(list_uploads(&s3, &plain).await.is_empty());
    assert!(exists(&s3, &plain, "keep/k").await);
    // The garbage the pass read from the master is the volume servers'.
    for (bucket, freed) in [
        (&plain, object_bytes + part_bytes),
        (&versioned, noncurrent_bytes),
    ] {
        matches_the_volume_server(c, &p, &before, bucket, freed).await;
    }
    assert!(
        r.v["reclaim"]["vacuum"].is_null(),
        "vacuum off by default: {}",
        p.describe()
    );
}

/// `run-once` over `bucket` at +5 days with `reclaim.vacuum` on at
/// `threshold`, and the `extra` settings.
async fn pass_with_vacuum(
    c: &Cluster,
    bucket: &str,
    threshold: &str,
    extra: &[(&str, &str)],
) -> Pass {
    let mut env = vec![
        LONG_LOG,
        SETTLE,
        ("S3_LIFECYCLED__RECLAIM__VACUUM", "true"),
        ("S3_LIFECYCLED__RECLAIM__VACUUM_THRESHOLD", threshold),
    ];
    env.extend_from_slice(extra);
    run_once(
        c,
        &Scope::new(&[bucket]),
        Some(plus(now_ns(), 5, 0)),
        &[],
        &env,
    )
    .await
}

/// Puts `n` incompressible objects under `prefix`; answers their total size.
async fn fill(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str, n: u64, seed: u64) -> u64 {
    let mut total = 0;
    for i in 0..n {
        let len = 40_000 + 500 * i as usize;
        total += len as u64;
        put(
            s3,
            bucket,
            &format!("{prefix}{i:02}"),
            &noise(seed + i, len),
            None,
        )
        .await;
    }
    total
}

#[tokio::test]
async fn vacuum_gives_the_space_back_only_when_asked() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let rule = lifecycle(&days_rule("old", "old/", 3));
    // Off (the default): the garbage stays on disk.
    let off = c.new_bucket("e2e-vacuum-off").await.unwrap();
    fill(&s3, &off, "old/", 6, 10).await;
    fill(&s3, &off, "keep/", 6, 20).await;
    c.put_lifecycle_xml(&off, &rule).await.unwrap();
    let p = run_once(
        c,
        &Scope::new(&[&off]),
        Some(plus(now_ns(), 5, 0)),
        &[],
        &[LONG_LOG, SETTLE],
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 6, "{}", p.describe());
    assert!(r.v["reclaim"]["vacuum"].is_null(), "{}", p.describe());
    let left = quiet_garbage(c, &off).await;
    assert!(left.garbage > 0, "nothing vacuumed by us: {left:?}");

    // On, above a 0.1 ratio: the pass vacuums the collection's volumes and
    // its disk use drops. The master of the test cluster vacuums every 15
    // min at 0.3; a threshold of 1 keeps every volume ours to vacuum.
    let on = c.new_bucket("e2e-vacuum-on").await.unwrap();
    fill(&s3, &on, "old/", 6, 30).await;
    fill(&s3, &on, "keep/", 6, 40).await;
    c.put_lifecycle_xml(&on, &rule).await.unwrap();
    let p = pass_with_vacuum(
        c,
        &on,
        "0.1",
        &[("S3_LIFECYCLED__RECLAIM__MASTER_GARBAGE_THRESHOLD", "1")],
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 6, "{}", p.describe());
    let v = &r.v["reclaim"]["vacuum"];
    assert!(
        v["vacuumed"].as_array().is_some_and(|a| !a.is_empty()),
        "{}",
        p.describe()
    );
    assert!(
        v["failed"].as_array().is_none_or(|a| a.is_empty()),
        "{}",
        p.describe()
    );
    let (before, after) = (
        v["size_before"].as_u64().unwrap(),
        v["size_after"].as_u64().unwrap(),
    );
    assert!(
        after < before,
        "reported size {before} -> {after}\n{}",
        p.describe()
    );
    // Without a vacuum the garbage is at least the deleted bytes (needle
    // headers add to it): below them, the vacuum gave space back.
    let freed = r.v["deleted_bytes"].as_u64().unwrap();
    let live = volume_status(c).await[on.as_str()];
    assert!(
        live.garbage < freed,
        "garbage after the vacuum {live:?}, deleted {freed}\n{}",
        p.describe()
    );
    assert!(live.size < before, "disk use {before} -> {}", live.size);
    // The vacuumed objects' neighbours are intact.
    for i in 0..6 {
        assert!(exists(&s3, &on, &format!("keep/{i:02}")).await);
    }
}

/// Adds a `filer.conf` location sending what is written under `prefix` to
/// `collection`, the way an operator must on 4.48: `weed shell fs.configure`
/// refuses `-collection` for any prefix under `/buckets/` ("one s3 bucket
/// goes to one collection"), yet the filer applies such a location to S3
/// writes. So: read the file from the filer, add the location, and put it
/// back, holding [`common::FILER_CONF`] between the two. Then waits until a
/// write under `prefix` lands in `collection` (the filer reloads the file
/// from its own metadata events).
async fn add_location(c: &Cluster, s3: &aws_sdk_s3::Client, bucket: &str, collection: &str) {
    const PATH: &str = "/etc/seaweedfs/filer.conf";
    let edit = common::FILER_CONF.lock().await;
    let addr = c.filer_http_addr();
    let r = tokio::task::spawn_blocking(move || common::http::get(addr, PATH, &[]))
        .await
        .unwrap()
        .expect("GET filer.conf");
    let mut conf: Value = match r.status {
        404 => serde_json::json!({}),
        200 => serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {}", r.text())),
        s => panic!("GET filer.conf: {s} {}", r.text()),
    };
    conf["version"] = 1.into();
    let prefix = format!("/buckets/{bucket}/");
    let location = serde_json::json!({"locationPrefix": prefix, "collection": collection});
    match conf["locations"].as_array_mut() {
        Some(l) => l.push(location),
        None => conf["locations"] = Value::Array(vec![location]),
    }
    let body = serde_json::to_vec_pretty(&conf).unwrap();
    let r =
        tokio::task::spawn_blocking(move || common::http::request(addr, "PUT", PATH, &[], &body))
            .await
            .unwrap()
            .expect("PUT filer.conf");
    assert!(
        r.status / 100 == 2,
        "PUT filer.conf: {} {}",
        r.status,
        r.text()
    );
    drop(edit);
    let start = Instant::now();
    for i in 0.. {
        put(
            s3,
            bucket,
            &format!("probe/{i:03}"),
            &noise(7_000 + i, 1_000),
            None,
        )
        .await;
        if volume_status(c)
            .await
            .get(collection)
            .is_some_and(|d| d.size > 0)
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "writes to {bucket} never reached {collection}: {:?}",
            volume_status(c).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A `filer.conf` location sends a bucket's data to another collection: the
/// report and the vacuum must look there, and at the bucket's own collection
/// only for what was written before the location
/// (docs/reclaimed-space.md#which-collections).
#[tokio::test]
async fn location_rule_collection_was_summed_under_the_bucket_name() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let bucket = c.new_bucket("e2e-reclaim-loc").await.unwrap();
    // Written before the location: in the bucket's own collection, for good.
    let own_bytes = fill(&s3, &bucket, "old/a", 3, 60).await;
    let elsewhere = format!("{bucket}-elsewhere");
    add_location(c, &s3, &bucket, &elsewhere).await;
    let moved_bytes = fill(&s3, &bucket, "old/b", 4, 70).await;
    let upload = start_upload(&s3, &bucket, "big/obj").await;
    let part_bytes = 60_000u64;
    upload_part(
        &s3,
        &bucket,
        "big/obj",
        &upload,
        1,
        &noise(80, part_bytes as usize),
    )
    .await;
    c.put_lifecycle_xml(&bucket, &old_and_upload_rules())
        .await
        .unwrap();
    let before = volume_status(c).await;
    let there = before.get(&elsewhere).copied().unwrap_or_default();
    assert!(
        there.size >= moved_bytes + part_bytes,
        "the objects and the part are in {elsewhere}: {before:?}"
    );

    let p = run_once(
        c,
        &Scope::new(&[&bucket]),
        Some(plus(now_ns(), 5, 0)),
        &[],
        &[LONG_LOG, SETTLE],
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 3 + 4 + 1, "{}", p.describe());
    assert_eq!(r.v["reclaim"]["settled"], true, "{}", p.describe());
    assert_eq!(deleted(&r, &bucket, "old"), (7, own_bytes + moved_bytes));
    assert_eq!(deleted(&r, &bucket, "mpu"), (1, part_bytes));
    let named: Vec<&str> = r.v["reclaim"]["collections"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", p.describe()))
        .iter()
        .filter_map(|c| c["collection"].as_str())
        .collect();
    let mut want = vec![bucket.as_str(), elsewhere.as_str()];
    want.sort();
    assert_eq!(named, want, "{}", p.describe());
    for (collection, freed) in [(&elsewhere, moved_bytes + part_bytes), (&bucket, own_bytes)] {
        matches_the_volume_server(c, &p, &before, collection, freed).await;
    }
    assert!(list_uploads(&s3, &bucket).await.is_empty());
}

/// The master lists an erasure-coded volume's shards with no garbage, and
/// the report summed only plain volumes: a pass that deleted from one showed
/// its collection with 0 garbage, and nothing said that no vacuum would give
/// the space back (docs/reclaimed-space.md#erasure-coded).
#[tokio::test]
async fn deletes_from_erasure_coded_volumes_were_reported_as_zero_garbage() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-reclaim-ec").await.unwrap();
    let old = fill(&s3, &b, "old/", 6, 50).await;
    let kept = fill(&s3, &b, "keep/", 6, 60).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("old", "old/", 3)))
        .await
        .unwrap();
    c.erasure_code(&b).await;
    assert!(
        !volume_status(c).await.contains_key(b.as_str()),
        "no plain volume left"
    );
    let p = pass_with_vacuum(
        c,
        &b,
        "0",
        &[("S3_LIFECYCLED__RECLAIM__MASTER_GARBAGE_THRESHOLD", "1")],
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 6, "{}", p.describe());
    assert_eq!(deleted(&r, &b, "old"), (6, old));
    let row = reported(&r, &b);
    assert_eq!(row["ec_deleted_bytes"].as_u64(), Some(old), "{row}");
    let ids: Vec<u64> = row["ec_volumes"]
        .as_array()
        .unwrap_or_else(|| panic!("no ec_volumes: {row}\n{}", p.describe()))
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(!ids.is_empty(), "{row}");
    assert_eq!(
        (row["volumes"].as_u64(), row["garbage_bytes"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        r.v["reclaim"]["vacuum"]["vacuumed"],
        serde_json::json!([]),
        "shards are not vacuumed: {}",
        p.describe()
    );
    // And that way back works: decoding drops the deleted needles.
    for id in &ids {
        c.weed_shell(&format!(
            "lock\nec.decode -collection={b} -volumeId={id}\nunlock"
        ))
        .await;
    }
    let live = volume_status(c)
        .await
        .get(b.as_str())
        .copied()
        .unwrap_or_default();
    assert_eq!(live.garbage, 0, "{live:?}");
    assert!(
        live.size >= kept && within_5_percent(live.size, kept),
        "decoded: {live:?}, kept {kept} bytes"
    );
    for i in 0..6 {
        assert!(exists(&s3, &b, &format!("keep/{i:02}")).await);
        assert!(!exists(&s3, &b, &format!("old/{i:02}")).await);
    }
}

/// Marks every volume of `collection` with `flag` (`-readonly`,
/// `-readonlyCanDelete`, `-writable`) the way an operator does (`weed shell
/// volume.mark`), and waits until the master lists them so.
async fn mark(c: &Cluster, collection: &str, flag: &str) -> Vec<u32> {
    let read_only = flag != "-writable";
    let ids: Vec<u32> = {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], c.ports.volume));
        let r = common::http::get_async(addr, "/status")
            .await
            .expect("GET /status");
        let v: Value = serde_json::from_str(&r.text()).expect("JSON");
        v["Volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["Collection"] == collection)
            .filter_map(|v| v["Id"].as_u64().map(|id| id as u32))
            .collect()
    };
    assert!(!ids.is_empty(), "no volume of {collection}");
    let node = format!("127.0.0.1:{}.{}", c.ports.volume, c.ports.volume_grpc);
    let script: String = ids
        .iter()
        .map(|id| format!("volume.mark -node={node} -volumeId={id} {flag}\n"))
        .collect();
    c.weed_shell(&format!("lock\n{script}unlock")).await;
    let start = Instant::now();
    loop {
        let list = c.weed_shell("volume.list").await;
        let shown = ids.iter().all(|id| {
            list.lines()
                .find(|l| l.contains(&format!("volume Id:{id},")))
                .is_some_and(|l| l.contains(&format!("ReadOnly:{read_only}")))
        });
        if shown {
            return ids;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{list}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The volume ids in a JSON array (none when it is absent).
fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_u64().map(|id| id as u32))
        .collect()
}

/// A new bucket of 6 `old/` and 2 `keep/` objects, its volumes marked
/// with `flag`, then a pass at +5 days with the vacuum on expires `old/`.
/// Checks what every such pass must say (the bytes deleted, the read-only
/// volumes they were in); answers the bucket, the marked volumes and the
/// pass.
async fn expire_on_marked(
    c: &Cluster,
    name: &str,
    seed: u64,
    flag: &str,
) -> (String, Vec<u32>, Pass) {
    let s3 = c.s3_client();
    let b = c.new_bucket(name).await.unwrap();
    let old = fill(&s3, &b, "old/", 6, seed).await;
    fill(&s3, &b, "keep/", 2, seed + 10).await;
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("old", "old/", 3)))
        .await
        .unwrap();
    let marked = mark(c, &b, flag).await;
    let p = pass_with_vacuum(c, &b, "0.1", &[]).await;
    let r = p.ok();
    assert_eq!(deleted(&r, &b, "old"), (6, old), "{}", p.describe());
    let row = reported(&r, &b);
    assert_eq!(row["read_only_deleted_bytes"].as_u64(), Some(old), "{row}");
    let listed = ids(&row["read_only_volumes"]);
    assert!(
        !listed.is_empty() && listed.iter().all(|id| marked.contains(id)),
        "{listed:?} of {marked:?}"
    );
    (b, marked, p)
}

/// A volume marked read-only refuses the filer's chunk deletes, so the
/// pass's deletes left no garbage and the vacuum passed it by; the report
/// said only that no volume was at the threshold. And a volume marked
/// read-only with deletes allowed was never vacuumed, by us or by the
/// master (docs/reclaimed-space.md#read-only).
#[tokio::test]
async fn deletes_from_read_only_volumes_were_reported_as_nothing_to_vacuum() {
    let c = common::cluster();
    let (b, _, p) = expire_on_marked(c, "e2e-reclaim-ro", 70, "-readonly").await;
    let r = p.ok();
    let row = reported(&r, &b);
    assert_eq!(row["garbage_bytes"].as_u64(), Some(0), "refused: {row}");
    assert!(
        ids(&r.v["reclaim"]["vacuum"]["vacuumed"]).is_empty(),
        "{}",
        p.describe()
    );
    // Writable again, so the filer's retries go through.
    mark(c, &b, "-writable").await;

    // Read-only with deletes allowed, as `volume.mark` offers for volumes
    // of expiring data: the garbage shows, and the vacuum compacts them,
    // which the master's own loop (at its default threshold, 0.3) does not.
    let (drained, marked, p) =
        expire_on_marked(c, "e2e-reclaim-rocd", 90, "-readonlyCanDelete").await;
    let r = p.ok();
    let v = &r.v["reclaim"]["vacuum"];
    let vacuumed = ids(&v["vacuumed"]);
    assert!(
        !vacuumed.is_empty() && vacuumed.iter().all(|id| marked.contains(id)),
        "read-only volumes with garbage vacuumed: {}",
        p.describe()
    );
    let freed = r.v["deleted_bytes"].as_u64().unwrap();
    let live = volume_status(c).await[drained.as_str()];
    assert!(
        live.garbage < freed && live.size < v["size_before"].as_u64().unwrap(),
        "{live:?}\n{}",
        p.describe()
    );
    let s3 = c.s3_client();
    for i in 0..2 {
        assert!(exists(&s3, &drained, &format!("keep/{i:02}")).await);
    }
    mark(c, &drained, "-writable").await;
}
