//! The legacy-TTL audit on the real cluster (docs/ttl-audit.md): TTLs set the
//! way operators set them (`weed shell fs.configure -ttl`) are named with
//! their conflict and a fix that works when run; buckets without one are not
//! named; the audit of 100 buckets stays within its listing budget.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// `audit --json` (and its exit code) over the shared cluster.
async fn audit(c: &Cluster, extra: &[&str], env: &[(&str, &str)]) -> (i32, Value, Pass) {
    let filer = c.filer_grpc_addr().to_string();
    let mut args = vec!["audit", "--filer", filer.as_str(), "--json"];
    args.extend_from_slice(extra);
    let p = run_raw(&args, env).await;
    let v: Value = serde_json::from_str(&p.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", p.describe()));
    (p.code, v, p)
}

/// The findings of `bucket`.
fn findings<'a>(v: &'a Value, bucket: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["bucket"] == bucket)
        .collect()
}

fn find<'a>(v: &'a Value, bucket: &str, source: &str) -> Option<&'a Value> {
    findings(v, bucket)
        .into_iter()
        .find(|f| f["source"] == source)
}

fn kinds(f: &Value) -> Vec<String> {
    f["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn location_ttls_on_a_versioned_bucket_and_shorter_than_a_rule_are_named_with_a_working_fix()
{
    let c = common::cluster();
    let s3 = c.s3_client();
    let rule30 = lifecycle(&days_rule("month", "", 30));
    // Versioned, with a 1-day location TTL.
    let versioned = c.new_bucket("e2e-ttl-ver").await.unwrap();
    enable_versioning(&s3, &versioned).await;
    c.put_lifecycle_xml(&versioned, &rule30).await.unwrap();
    // Unversioned, a 7-day TTL under a 30-day rule.
    let short = c.new_bucket("e2e-ttl-short").await.unwrap();
    c.put_lifecycle_xml(&short, &rule30).await.unwrap();
    // No TTL at all.
    let clean = c.new_bucket("e2e-ttl-clean").await.unwrap();
    c.put_lifecycle_xml(&clean, &rule30).await.unwrap();
    c.weed_shell(&format!(
        "fs.configure -locationPrefix /buckets/{versioned}/ -ttl 1d -apply\n\
         fs.configure -locationPrefix /buckets/{short}/ -ttl 7d -apply"
    ))
    .await;
    for body in [&b"v1"[..], b"v2"] {
        put(&s3, &versioned, "k", body, None).await;
    }
    put(&s3, &short, "k", b"x", None).await;
    put(&s3, &clean, "k", b"x", None).await;

    let (code, v, p) = audit(c, &[], &[]).await;
    assert_eq!(code, 4, "a conflict exits 4:\n{}", p.describe());
    let loc = find(&v, &versioned, "location").unwrap_or_else(|| panic!("{}", p.describe()));
    assert_eq!(loc["ttl"], "1d");
    assert!(kinds(loc).contains(&"versioned".to_string()), "{loc}");
    let fix = format!("fs.configure -locationPrefix /buckets/{versioned}/ -delete -apply");
    assert!(loc["fix"].as_str().unwrap().contains(&fix), "{loc}");
    let stamped = find(&v, &versioned, "entries").unwrap_or_else(|| panic!("{}", p.describe()));
    assert_eq!(stamped["ttl_seconds"], 86_400);
    assert_eq!(
        stamped["detail"]
            .as_str()
            .map(|d| d.starts_with("2 entries")),
        Some(true),
        "{stamped}"
    );
    assert!(
        kinds(stamped).contains(&"versioned".to_string()),
        "{stamped}"
    );
    assert!(
        find(&v, &versioned, "volumes").is_some(),
        "TTL volumes: {}",
        p.describe()
    );

    let loc = find(&v, &short, "location").unwrap_or_else(|| panic!("{}", p.describe()));
    assert_eq!(
        loc["conflicts"],
        serde_json::json!([{"kind": "shorter_than_rule", "rule": "month", "days": 30, "objects": 0}]),
        "{loc}"
    );
    assert!(findings(&v, &clean).is_empty(), "{}", p.describe());

    // The fix, run as printed: the location is gone; what was written under
    // it keeps its TTL and is still named, as outlived.
    c.weed_shell(&fix).await;
    let (_, v, p) = audit(c, &["--bucket", &versioned], &[]).await;
    assert!(
        find(&v, &versioned, "location").is_none(),
        "{}",
        p.describe()
    );
    let stamped = find(&v, &versioned, "entries").unwrap_or_else(|| panic!("{}", p.describe()));
    assert!(
        kinds(stamped).contains(&"outlived".to_string()),
        "{stamped}"
    );
    assert_eq!(v["buckets"], 1);

    // Text form and a typo.
    let filer = c.filer_grpc_addr().to_string();
    let t = run_raw(&["audit", "--filer", &filer, "--bucket", &short], &[]).await;
    assert!(
        t.stdout
            .contains("conflict: shorter than rule month (30 days)"),
        "{}",
        t.describe()
    );
    let t = run_raw(
        &["audit", "--filer", &filer, "--bucket", "no-such-bucket-x"],
        &[],
    )
    .await;
    assert_eq!(t.code, 2, "{}", t.describe());
    assert!(t.stderr.contains("no-such-bucket-x"), "{}", t.describe());
}

#[tokio::test]
async fn audit_of_100_buckets_stays_within_its_listing_budget() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let mut names = Vec::new();
    for i in 0..99 {
        let b = c.new_bucket(&format!("e2e-aud{i:02}")).await.unwrap();
        put(&s3, &b, "a/k", b"x", None).await;
        put(&s3, &b, "k", b"x", None).await;
        names.push(b);
    }
    // One bucket larger than the budget.
    let big = c.new_bucket("e2e-aud-big").await.unwrap();
    c.put_objects_bulk(&big, &keys("k", 3000), b"x")
        .await
        .unwrap();
    let env = [
        ("S3_LIFECYCLED__AUDIT__MAX_ENTRIES", "1000"),
        ("S3_LIFECYCLED__AUDIT__MAX_LISTINGS", "50"),
    ];
    let start = Instant::now();
    let (code, v, p) = audit(c, &[], &env).await;
    let took = start.elapsed();
    assert!(code == 0 || code == 4, "{}", p.describe());
    let buckets = v["buckets"].as_u64().unwrap();
    assert!(buckets >= 100, "{}", p.describe());
    let calls = v["calls"].as_u64().unwrap();
    let listed = v["entries_listed"].as_u64().unwrap();
    // Three cluster-wide reads, then per bucket at most max_listings
    // listings and max_entries entries.
    assert!(
        calls <= 3 + buckets * 50,
        "calls {calls} for {buckets} buckets"
    );
    assert!(listed <= buckets * 1000, "{listed}");
    assert!(
        v["sampled"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b == big.as_str()),
        "the big bucket's listing stopped at the budget: {}",
        p.describe()
    );
    for b in &names {
        assert!(findings(&v, b).is_empty(), "{b} has no TTL");
    }
    eprintln!(
        "audit of {buckets} buckets: {calls} filer/master calls, {listed} entries listed, {:.2}s",
        took.as_secs_f64()
    );
}

#[tokio::test]
async fn serve_audits_at_start_into_the_status_page_status_json_and_metrics() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-ttl-serve").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("month", "", 30)))
        .await
        .unwrap();
    c.weed_shell(&format!(
        "fs.configure -locationPrefix /buckets/{b}/ -ttl 2d -apply"
    ))
    .await;
    put(&s3, &b, "k", b"x", None).await;
    // Rule days are lifecycle days: compare with real ones, not the suite's
    // short day.
    let mut serve = Serve::start(&Scope::new(&[&b]), &[("S3_LIFECYCLED__TIME__DAY", "24h")]).await;
    // The audit runs off the start-up path: wait for it.
    let status = eventually(
        Duration::from_secs(30),
        Duration::from_millis(200),
        async || {
            let r = common::http::get_async(serve.http, "/status.json")
                .await
                .map_err(|e| e.to_string())?;
            let v: Value = serde_json::from_str(&r.text()).map_err(|e| e.to_string())?;
            if v["ttl_audit"].is_object() {
                Ok(v)
            } else {
                Err(format!("no audit yet: {}", serve.log_text()))
            }
        },
    )
    .await;
    let f = find(&status["ttl_audit"], &b, "location")
        .unwrap_or_else(|| panic!("{}", status["ttl_audit"]));
    assert!(kinds(f).contains(&"shorter_than_rule".to_string()), "{f}");
    let m = common::http::get_async(serve.http, "/metrics")
        .await
        .unwrap()
        .text();
    let series = format!(
        "s3_lifecycled_ttl_findings{{bucket=\"{b}\",source=\"location\",conflict=\"shorter_than_rule\"}} 1"
    );
    assert!(m.contains(&series), "{series} in\n{m}");
    let page = common::http::get_async(serve.http, "/")
        .await
        .unwrap()
        .text();
    assert!(page.contains("<h2>TTL audit</h2>"), "{page}");
    assert!(page.contains(&format!(
        "fs.configure -locationPrefix /buckets/{b}/ -delete -apply"
    )));

    // `audit.in_service = false`: the same bucket, and a serve that audits nothing, neither at
    // start nor after a pass. (The first one leaves the cursor dir to it.)
    let (code, _) = serve.stop_with("TERM", Duration::from_secs(30)).await;
    assert_eq!(code, 0);
    let off = Serve::start(
        &Scope::new(&[&b]),
        &[
            ("S3_LIFECYCLED__TIME__DAY", "24h"),
            ("S3_LIFECYCLED__AUDIT__IN_SERVICE", "false"),
        ],
    )
    .await;
    let (id, _) = off.trigger(&[]).await;
    off.wait_last(&id, Duration::from_secs(60)).await;
    let status: Value = serde_json::from_str(
        &common::http::get_async(off.http, "/status.json")
            .await
            .unwrap()
            .text(),
    )
    .unwrap();
    assert!(status["ttl_audit"].is_null(), "{}", status["ttl_audit"]);
    let m = common::http::get_async(off.http, "/metrics")
        .await
        .unwrap()
        .text();
    assert!(!m.contains("s3_lifecycled_ttl_findings{"), "{m}");
    assert!(!off.log_text().contains("ttl audit"), "{}", off.log_text());
}

/// An erasure-coded TTL volume keeps no TTL in the master's listing, only
/// its destruction time: the audit left it out (docs/ttl-audit.md#erasure-coded).
#[tokio::test]
async fn erasure_coded_ttl_volumes_went_unaudited() {
    let c = common::cluster();
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-ttl-ec").await.unwrap();
    c.put_lifecycle_xml(&b, &lifecycle(&days_rule("month", "", 30)))
        .await
        .unwrap();
    c.weed_shell(&format!(
        "fs.configure -locationPrefix /buckets/{b}/ -ttl 7d -apply"
    ))
    .await;
    for i in 0..3 {
        put(&s3, &b, &format!("k{i}"), b"x", None).await;
    }
    c.erasure_code(&b).await;
    let (code, v, p) = audit(c, &["--bucket", &b], &[]).await;
    assert_eq!(code, 4, "{}", p.describe());
    let vol = find(&v, &b, "volumes").unwrap_or_else(|| panic!("{}", p.describe()));
    assert_eq!(vol["ttl"], "1w", "{vol}");
    assert!(
        vol["detail"]
            .as_str()
            .is_some_and(|d| d.contains("erasure-coded ones (")),
        "{vol}"
    );
    assert_eq!(
        vol["conflicts"],
        serde_json::json!([{"kind": "shorter_than_rule", "rule": "month", "days": 30, "objects": 0}]),
        "{vol}"
    );
    c.weed_shell(&format!(
        "fs.configure -locationPrefix /buckets/{b}/ -delete -apply"
    ))
    .await;
}
