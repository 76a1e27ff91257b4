//! The meta-log of filers with their own stores, on a two-filer cluster of its own
//! (`multi_cluster`): a pass reads each filer's own log and merges them
//! (docs/meta-log.md#several-filers). Once a filer serving it dies, the stream fails loudly
//! naming it, and a new subscription is refused; after a filer was killed and restarted, a
//! pass still sees and deletes what was written through either filer, where one filer's
//! aggregated log was seen holding only its own half.
//!
//! Its own binary, not in `two_filers/multi.rs`: both tests kill filer 1 and need its peer's state
//! settled, and they run one at a time (`SERIAL`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use s3_lifecycled::pb::filer_pb::SubscribeMetadataRequest;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;

use crate::SERIAL;

/// A hang guard, not a speed assertion.
const GUARD: Duration = Duration::from_secs(300);
/// `pass.reorder_margin`'s default.
const REORDER_MARGIN: Duration = Duration::from_secs(5);

/// Filers with their own stores (as here) hold their peers' events only while they follow
/// them live: once filer 1 is dead, filer 2 serves only its own log, and a stream resumed there
/// would silently miss every event written through filer 1 (observed: 9,691 of 24,000 missing,
/// docs/meta-log.md#several-filers). So a stream broken by filer 1's death fails loudly instead
/// of resuming, having delivered each event at most once, and a new subscription while filer 1
/// is down is refused naming it. Drives the adapter itself, with a one-event buffer and more
/// events than HTTP/2 sends ahead, so the kill lands while most of the window is unsent.
#[tokio::test(flavor = "multi_thread")]
async fn metalog_stream_on_separate_stores_fails_loudly_when_its_filer_dies() {
    use futures::StreamExt;
    use s3_lifecycled::pass::cluster::SeaweedCluster;
    use s3_lifecycled::pass::ports::ClusterPort;
    // Each filer's own log is a stream of its own (docs/meta-log.md#several-filers), and
    // hyper's 2 MB stream window holds ~14,000 bare events: with 1 KB of Extended each, about
    // 2,000 fit, so most of filer 1's stream is unsent when it dies. Written straight through
    // the filers (no volume server), which is fast.
    const HALF: usize = 10_000;
    const PAD: usize = 1024;
    const READ_BEFORE_KILL: usize = 200;
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let bucket = c.new_bucket("multi-resume").await.unwrap();
    let since = now_ns();
    let write_all = |addr: std::net::SocketAddr, dir: &'static str, bucket: String| async move {
        let fc = s3_lifecycled::seaweed::filer::FilerClient::connect(&addr.to_string())
            .await
            .unwrap();
        futures::stream::iter(0..HALF)
            .map(|i| {
                let fc = fc.clone();
                let b = bucket.clone();
                async move {
                    let entry = s3_lifecycled::pb::filer_pb::Entry {
                        name: format!("{i:06}"),
                        attributes: Some(s3_lifecycled::pb::filer_pb::FuseAttributes {
                            mtime: 1_700_000_000,
                            file_mode: 0o644,
                            ..Default::default()
                        }),
                        extended: [("x-pad".to_string(), vec![b'p'; PAD])].into(),
                        ..Default::default()
                    };
                    fc.create_entry(&format!("/buckets/{b}/{dir}"), entry, false)
                        .await
                        .unwrap();
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
    };
    tokio::join!(
        write_all(c.filer_grpc_addr(), "one", bucket.clone()),
        write_all(c.filer2_grpc_addr(), "two", bucket.clone())
    );
    // Each filer's own log holds its half as soon as CreateEntry answers; the pass reads
    // those, not the aggregated logs that can lag after a restart (docs/meta-log.md#several-filers).
    let until = now_ns();
    let filers = [
        c.filer_grpc_addr().to_string(),
        c.filer2_grpc_addr().to_string(),
    ];
    let cluster = SeaweedCluster::connect_many(
        &filers,
        "/buckets",
        "/etc/s3/lifecycle/e2e-multi-resume",
        1,
        Duration::from_secs(30),
        None,
    )
    .await
    .unwrap()
    .with_resume_margin(REORDER_MARGIN);
    // Figure: a whole read of the window through the merged stream (what a pass reads, here
    // with a one-event buffer). Printed, not asserted.
    let timed = std::time::Instant::now();
    let merged = cluster
        .subscribe(since, until)
        .await
        .unwrap()
        .filter(|r| futures::future::ready(r.is_ok()))
        .count()
        .await;
    println!(
        "multi: separate-stores read of {} writes: merged own logs {merged} events in {:?}",
        2 * HALF,
        timed.elapsed()
    );
    let mut events = cluster.subscribe(since, until).await.unwrap();
    let prefix = format!("/buckets/{bucket}");
    let mut seen: BTreeMap<(i64, String, String), usize> = BTreeMap::new();
    let mut read = 0usize;
    let mut failure = None;
    while let Some(item) = tokio::time::timeout(GUARD, events.next())
        .await
        .expect("the stream ends within the guard")
    {
        let ev = match item {
            Ok(ev) => ev,
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        };
        read += 1;
        let name = ev
            .new_entry
            .as_ref()
            .map(|e| e.name.clone())
            .unwrap_or_default();
        if ev.directory.starts_with(&prefix) {
            *seen
                .entry((ev.ts_ns, ev.directory.clone(), name))
                .or_default() += 1;
        }
        if read == READ_BEFORE_KILL {
            tokio::task::spawn_blocking(|| multi_cluster().kill(Role::Filer))
                .await
                .unwrap();
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "events delivered twice: {twice:?}");
    let failure = failure.unwrap_or_else(|| {
        panic!(
            "the stream ended cleanly after {read} of {} events although its filer died",
            2 * HALF
        )
    });
    assert!(
        failure.contains("not resumed") && failure.contains(&filers[0]),
        "the error says why it did not resume and names the filer: {failure}"
    );
    // A new subscription while filer 1 is down is refused, naming it.
    let refused = match cluster.subscribe(since, until).await {
        Ok(_) => panic!("a subscription without filer 1 was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        refused.contains(&filers[0]) && refused.contains("unreachable"),
        "{refused}"
    );
    println!(
        "multi: separate-stores stream bucket={bucket} events_read={read} of {} killed_after={READ_BEFORE_KILL} \
         duplicates=0 stream_error=yes resubscribe_refused=yes",
        2 * HALF
    );
    tokio::task::spawn_blocking(|| multi_cluster().start_role(Role::Filer))
        .await
        .unwrap();
}

/// The gap this pins: with their own stores, a filer's aggregated log (`SubscribeMetadata`)
/// lacks its peers' events once it has flushed its own log past them (seen: 10,000 of 20,000
/// still missing after 300 s; docs/meta-log.md#aggregation-gap), and a pass reading it missed
/// their due deletions silently. Here filer 1 is SIGKILLed and restarted, objects are written
/// through each filer (filer `CreateEntry` copies of a PUT's entry, so each write is in that
/// filer's own log), and each filer is made to flush (padding outside the buckets root). The
/// pass's stream (either filer listed first) must hold every write, and `run-once` must delete every
/// due object written through either filer and keep the others. A first pass after the restart
/// saves the cursors, so the second pass replays the meta-log instead of walking the bucket (a
/// walk would hide the gap). Prints how many of the writes each filer's aggregated log held
/// (what the single stream read before: about half). `MULTI_GAP_PROBE_WAIT_S=N` waits N s more
/// before reading, by hand.
#[tokio::test(flavor = "multi_thread")]
async fn separate_stores_pass_after_filer_restart_deletes_what_either_filer_took() {
    use s3_lifecycled::pb::filer_pb::Entry;
    use s3_lifecycled::seaweed::filer::FilerClient;
    const PER_FILER: usize = 300;
    let _serial = SERIAL.lock().await;
    let c = multi_cluster();
    let bucket = c.new_bucket("multi-gap").await.unwrap();
    c.bucket_on_both_filers(&bucket, false).await;
    // With a 10 s day (SHORT_DAY) `due/` is due 10 s after its write; `keep/` has no rule.
    let rules = days_rule("due", "due/", 1);
    // Before any object: a PUT through a filer that lacks the bucket yet creates the bucket
    // directory as a bare parent, and that entry, replicated, replaced the bucket entry and its
    // lifecycle document on both filers (docs/test-cluster.md#multi-cluster).
    c.put_rules(&bucket, &lifecycle(&rules)).await;
    // The template: a real PUT's entry.
    let s3 = c.s3_client();
    put(&s3, &bucket, "template", b"x", None).await;
    let dir = format!("/buckets/{bucket}");
    both_filers_hold(c, &dir, &["template".to_string()]).await;
    let template: Entry = c
        .lookup_entry(&dir, "template")
        .await
        .unwrap()
        .expect("the template object's entry");
    let scope = Scope::new(&[&bucket]);
    let filers = format!("{},{}", c.filer_grpc_addr(), c.filer2_grpc_addr());
    let gateways = format!("{},{}", c.s3_grpc_addr(), c.s3_2_grpc_addr());
    let pass_on = |filers: String, now: i64| {
        let args: Vec<String> = vec![
            "run-once".into(),
            "--json".into(),
            "--filer".into(),
            filers,
            "--s3-grpc".into(),
            gateways.clone(),
            "--buckets".into(),
            bucket.clone(),
            "--now".into(),
            rfc3339(now),
        ];
        let dir = scope.cursor_dir.clone();
        async move {
            let mut env = vec![("S3_LIFECYCLED__CURSOR__DIR", dir.as_str())];
            env.extend_from_slice(&SHORT_DAY);
            run_raw(&args, &env).await
        }
    };
    let pass = |now: i64| pass_on(filers.clone(), now);
    // Filer 1's log must reach back past the kill: a SIGKILL loses the unflushed tail, and a
    // log whose first file starts after the restart is retention loss to pass 2, which then
    // walks (docs/retention-probe.md#crash-gap). Earlier tests in this binary flush it; a run
    // of this test alone must too.
    pad_log(c.filer_grpc_addr(), &format!("{bucket}-before-kill")).await;
    eventually(GUARD, Duration::from_millis(200), async || {
        let mut raw = SeaweedFilerClient::connect(format!("http://{}", c.filer_grpc_addr()))
            .await
            .map_err(|e| e.to_string())?;
        match s3_lifecycled::seaweed::retention::earliest_available(&mut raw).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("filer 1 has persisted no meta-log file yet".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    tokio::task::spawn_blocking(|| {
        let c = multi_cluster();
        c.kill(Role::Filer);
        c.start_role(Role::Filer);
    })
    .await
    .unwrap();
    let restarted = std::time::Instant::now();
    both_filers_hold(c, &dir, &["template".to_string()]).await;
    // Pass 1 discovers buckets on the restarted filer 1: without the rules it read nothing.
    c.bucket_on_both_filers(&bucket, true).await;
    // Pass 1 (cold start: a walk) saves the cursors; the template matches no rule. Its replay
    // resumes a rule TTL (10 s) before its `now`: past the restart, so the restarted filer's
    // first log file (its unflushed log died with it) does not look like retention loss
    // (docs/retention-probe.md) and pass 2 replays instead of walking.
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(restarted.elapsed())).await;
    let first = pass(now_ns()).await;
    assert_eq!(first.code, 0, "{}", first.describe());

    let since = now_ns();
    let write = |addr: std::net::SocketAddr, tag: &'static str| {
        let template = template.clone();
        let dir = format!("/buckets/{bucket}");
        async move {
            let fc = FilerClient::connect(&addr.to_string()).await.unwrap();
            let now_s = now_ns() / SEC_NS;
            let mut names = Vec::new();
            for i in 0..PER_FILER {
                // Two in three due, the rest kept.
                let top = if i % 3 == 2 { "keep" } else { "due" };
                let name = format!("{tag}-{i:04}");
                let mut e = template.clone();
                e.name = name.clone();
                if let Some(a) = e.attributes.as_mut() {
                    a.mtime = now_s;
                    a.crtime = now_s;
                }
                fc.create_entry(&format!("{dir}/{top}"), e, false)
                    .await
                    .unwrap_or_else(|e| panic!("CreateEntry on filer {addr}: {e}"));
                names.push(format!("{top}/{name}"));
            }
            names
        }
    };
    let (one, two) = tokio::join!(
        write(c.filer_grpc_addr(), "one"),
        write(c.filer2_grpc_addr(), "two")
    );
    let until = now_ns();
    // Lookups and gateways on either filer see every write before the pass (the stores catch
    // up); the meta-logs are what this test is about.
    let written: Vec<String> = one.iter().chain(&two).cloned().collect();
    both_filers_hold(c, &dir, &written).await;
    // Make each filer flush its own log past the writes: its in-memory buffer holds 8 MB, so
    // 9 MB of padding events (outside the buckets root: no pass sees them) seal it. After such
    // a flush a filer's aggregated log was seen lacking its peer's writes
    // (docs/meta-log.md#aggregation-gap).
    let started = std::time::Instant::now();
    tokio::join!(
        pad_log(c.filer_grpc_addr(), &bucket),
        pad_log(c.filer2_grpc_addr(), &bucket)
    );
    let padded_in = started.elapsed();
    if let Some(secs) = std::env::var("MULTI_GAP_PROBE_WAIT_S")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        // By hand: how the aggregated logs look once the filers have flushed their own.
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    let (due, keep): (BTreeSet<String>, BTreeSet<String>) = {
        let all: Vec<String> = one.into_iter().chain(two).collect();
        let (d, k): (Vec<_>, Vec<_>) = all.into_iter().partition(|k| k.starts_with("due/"));
        (d.into_iter().collect(), k.into_iter().collect())
    };
    // What main's single stream would have read: each filer's aggregated log of the writes.
    let prefix = format!("/buckets/{bucket}/");
    let mut aggregated = Vec::new();
    for addr in [c.filer_grpc_addr(), c.filer2_grpc_addr()] {
        let n = files_in_log(addr, &prefix, since, until, false).await;
        aggregated.push(format!(
            "{addr}={}",
            n.map_or_else(|e| e, |n| n.to_string())
        ));
    }

    println!(
        "multi: separate-stores gap: aggregated logs of the writes hold {aggregated:?} \
         (padding written in {padded_in:?})"
    );
    // The pass's stream holds every write, whichever filer is listed first (the single
    // stream read the first one's aggregated log, and which filer lacks its peer's half varies
    // from run to run).
    for first_filer2 in [false, true] {
        let mut filers = [
            c.filer_grpc_addr().to_string(),
            c.filer2_grpc_addr().to_string(),
        ];
        if first_filer2 {
            filers.reverse();
        }
        let (files, read, twice, took) = stream_files(&filers, &dir, since, until).await;
        // Duplicates would be harmless (docs/meta-log.md#duplicates), but are counted.
        println!(
            "multi: separate-stores gap: the pass's merged stream ({} first) read {read} events \
             in {took:?}, delivered twice: {twice:?}",
            filers[0]
        );
        assert_eq!(
            files,
            due.len() + keep.len(),
            "the pass's meta-log stream ({} first) holds every write through either filer \
             (aggregated logs held {aggregated:?})",
            filers[0]
        );
    }
    // A pass told of one filer only would read that filer's aggregated log, which lacks its
    // peer's writes for good once flushed: it is refused, naming the filer it does not read
    // (the master lists both), and deletes nothing (docs/meta-log.md#unread-filers).
    for (listed, unread) in [
        (c.filer_grpc_addr(), c.filer2_grpc_addr()),
        (c.filer2_grpc_addr(), c.filer_grpc_addr()),
    ] {
        let started = std::time::Instant::now();
        let p = pass_on(listed.to_string(), now_ns() + 60 * SEC_NS).await;
        assert_eq!(p.code, 1, "a pass reading only {listed}:\n{}", p.describe());
        assert!(
            p.stderr
                .contains(&format!("lists filer {unread} (a store of its own)")),
            "the refusal names {unread}:\n{}",
            p.describe()
        );
        println!(
            "multi: a pass reading only {listed} was refused in {:?}",
            started.elapsed()
        );
    }
    let (due_left, _) = remaining_of(&s3, &bucket, &due, &keep).await;
    assert_eq!(due_left, due.len(), "a refused pass deletes nothing");
    // Pass 2, a minute later (six 10 s days): replay only. A gateway on a filer still catching up on its peer
    // may answer NOT_FOUND for an entry it lacks yet; such answers are unconfirmed and retried
    // by the next pass (docs/lifecycle-delete.md#outcomes), so up to three passes.
    let now = now_ns() + 60 * SEC_NS;
    let mut reports = Vec::new();
    let mut last = String::new();
    for i in 0..3 {
        let p = pass(now + i * 60 * SEC_NS).await;
        assert_eq!(p.code, 0, "{}", p.describe());
        let r = p.json();
        let recovery = r.recovery_reasons(&bucket);
        // The replay must find the writes: a walk of the bucket would hide the gap.
        assert!(
            recovery.is_empty(),
            "pass {} walked: {recovery:?}\n{}",
            i + 2,
            p.describe()
        );
        reports.push(format!(
            "pass {}: DONE={} NOOP_RESOLVED={} events={}",
            i + 2,
            r.total("DONE"),
            r.total("NOOP_RESOLVED"),
            r.totals("events_scanned"),
        ));
        last = p.describe();
        let (due_left, _) = remaining_of(&s3, &bucket, &due, &keep).await;
        if due_left == 0 {
            break;
        }
    }
    let s3_2 = s3_client_at(&c.s3_2_endpoint());
    for (name, client) in [("gateway 1", &s3), ("gateway 2", &s3_2)] {
        let (due_left, keep_left) = remaining_of(client, &bucket, &due, &keep).await;
        assert_eq!(
            (due_left, keep_left),
            (0, keep.len()),
            "listed through {name}: every due object written through either filer is deleted \
             and every other kept (aggregated logs held {aggregated:?}; {reports:#?})\n\
             the last pass: {last}"
        );
    }
    println!(
        "multi: separate-stores gap bucket={bucket} written={} due={} aggregated_log_files={aggregated:?} \
         passes={reports:?}",
        due.len() + keep.len(),
        due.len()
    );
}

/// Reads `(since, until]` through the pass's stream over `filers`: (distinct files under
/// `dir`, events read, files delivered twice, time taken).
async fn stream_files(
    filers: &[String],
    dir: &str,
    since: i64,
    until: i64,
) -> (usize, usize, Vec<String>, Duration) {
    use futures::StreamExt;
    use s3_lifecycled::pass::cluster::SeaweedCluster;
    use s3_lifecycled::pass::ports::ClusterPort;
    let cluster = SeaweedCluster::connect_many(
        filers,
        "/buckets",
        "/etc/s3/lifecycle/e2e-multi-gap-stream",
        64,
        Duration::from_secs(30),
        None,
    )
    .await
    .unwrap()
    .with_resume_margin(REORDER_MARGIN);
    let started = std::time::Instant::now();
    let mut events = cluster.subscribe(since, until).await.unwrap();
    let mut files = BTreeSet::new();
    let mut twice = Vec::new();
    let mut read = 0usize;
    while let Some(ev) = tokio::time::timeout(GUARD, events.next())
        .await
        .expect("the stream ends within the guard")
    {
        let ev = ev.unwrap_or_else(|e| panic!("the pass's stream failed: {e}"));
        read += 1;
        if let Some(e) = ev.new_entry.as_ref().filter(|e| !e.is_directory)
            && ev.directory.starts_with(&format!("{dir}/"))
            && !files.insert((ev.directory.clone(), e.name.clone()))
        {
            twice.push(format!("{}/{}", ev.directory, e.name));
        }
    }
    (files.len(), read, twice, started.elapsed())
}

/// [`common::metalog::pad_log`] through filer `addr`, under
/// `/lifecycle-test-padding/<bucket>/<its port>`.
async fn pad_log(addr: std::net::SocketAddr, bucket: &str) {
    let fc = s3_lifecycled::seaweed::filer::FilerClient::connect(&addr.to_string())
        .await
        .unwrap();
    common::metalog::pad_log(&fc, &format!("{bucket}/{}", addr.port())).await;
}

/// Waits until `paths` (relative to `dir`) can be looked up through both filers.
async fn both_filers_hold(c: &SplitCluster, dir: &str, paths: &[String]) {
    use s3_lifecycled::seaweed::filer::FilerClient;
    eventually(GUARD, Duration::from_millis(500), async || {
        for addr in [c.filer_grpc_addr(), c.filer2_grpc_addr()] {
            let fc = FilerClient::connect(&addr.to_string())
                .await
                .map_err(|e| e.to_string())?;
            for p in paths {
                let (sub, name) = p.rsplit_once('/').map_or(("", p.as_str()), |(d, n)| (d, n));
                let d = if sub.is_empty() {
                    dir.to_string()
                } else {
                    format!("{dir}/{sub}")
                };
                if fc
                    .lookup(&d, name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none()
                {
                    return Err(format!("filer {addr} lacks {d}/{name}"));
                }
            }
        }
        Ok(())
    })
    .await;
}

/// How many distinct files under `prefix` a bounded read of `addr`'s meta-log over
/// `(since, until]` holds: its aggregated log, or with `local` its own.
async fn files_in_log(
    addr: std::net::SocketAddr,
    prefix: &str,
    since: i64,
    until: i64,
    local: bool,
) -> Result<usize, String> {
    let mut client = SeaweedFilerClient::connect(format!("http://{addr}"))
        .await
        .map_err(|e| e.to_string())?
        .max_decoding_message_size(64 << 20);
    let req = SubscribeMetadataRequest {
        client_name: "s3-lifecycled-tests".into(),
        path_prefix: prefix.to_string(),
        since_ns: since,
        until_ns: until,
        client_id: rand::random_range(1..i32::MAX),
        client_supports_batching: true,
        ..Default::default()
    };
    let call = if local {
        client.subscribe_local_metadata(req).await
    } else {
        client.subscribe_metadata(req).await
    };
    let mut stream = call.map_err(|e| e.to_string())?.into_inner();
    let mut files = BTreeSet::new();
    while let Some(resp) = stream.message().await.map_err(|e| e.to_string())? {
        let batch = resp.events.clone();
        for ev in std::iter::once(resp).chain(batch) {
            let Some(n) = ev.event_notification.as_ref() else {
                continue;
            };
            if let Some(e) = n.new_entry.as_ref().filter(|e| !e.is_directory) {
                files.insert((ev.directory.clone(), e.name.clone()));
            }
        }
    }
    Ok(files.len())
}
