//! `s3-lifecycled worker` and a `weed admin` whose worker gRPC port is mutual TLS
//! (docs/plugin-worker.md#tls): the admin's `security.toml` has `[grpc.admin]`, the worker's has
//! `[grpc.worker]`, as SeaweedFS's own `weed worker` reads them. A worker with the client
//! certificate connects, is listed by the admin and runs a job against the mTLS cluster of
//! `tests/common/tls.rs`; one without it stops at once with a message naming `[grpc.worker]`. A
//! second admin serves its HTTP API over HTTPS (`[https.admin]`): the one-enforcer check reads it
//! with `[https.client]` (docs/plugin-worker.md#admin-https).
//!
//! One mTLS cluster and one admin for the binary; the tests run one at a time (the admin's
//! job-type config and worker set are global).

use crate::common;

use std::sync::OnceLock;
use std::time::Duration;

use common::admin::{LifecycleWorker, WeedAdmin};
use common::tls::{TlsCluster, put_lifecycle_plain, tls_cluster};
use common::*;
use serde_json::json;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static ADMIN: OnceLock<WeedAdmin> = OnceLock::new();

/// The cluster's `security.toml` plus a section.
fn security_with(t: &TlsCluster, extra: &str) -> String {
    let base = std::fs::read_to_string(&t.security_toml).unwrap();
    format!("{base}\n{extra}")
}

/// The admin: the cluster's file (it dials the master with `[grpc.admin]` as its client
/// certificate) plus `[grpc.admin]`, which makes its worker port mutual TLS.
fn admin() -> &'static WeedAdmin {
    ADMIN.get_or_init(|| {
        let t = tls_cluster();
        let toml = security_with(
            t,
            &format!(
                "[grpc.admin]\ncert = \"{}\"\nkey = \"{}\"\n",
                t.cert("server.crt"),
                t.cert("server.key")
            ),
        );
        WeedAdmin::start_with_security(&t.cluster, Some(&toml))
    })
}

/// A worker `security.toml` in `dir` with `extra` appended to the cluster's.
fn worker_toml(t: &TlsCluster, dir: &std::path::Path, extra: &str) -> String {
    let path = dir.join("worker-security.toml");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, security_with(t, extra)).unwrap();
    path.display().to_string()
}

/// Waits for the worker process to exit; its exit code.
async fn exit_code(w: &mut LifecycleWorker) -> i32 {
    match tokio::time::timeout(Duration::from_secs(60), w.child.wait()).await {
        Ok(status) => status.unwrap().code().unwrap_or(-1),
        Err(_) => panic!(
            "worker {} still running after 60 s:\n{}",
            w.id,
            w.log_text()
        ),
    }
}

/// A bucket with `tmp/a` (always due) and `keep/a`, a worker `id` with `cert` (`cert.crt`,
/// `cert.key` of `tests/common/tls.rs`) as its `[grpc.worker]` certificate and `extra` env, one
/// run through the admin: it must succeed and delete `tmp/a` only. Returns the worker (still
/// running) and its state directory.
async fn one_job(id: &str, cert: &str, extra: &[(&str, &str)]) -> (LifecycleWorker, TmpDir) {
    let t = tls_cluster();
    let a = admin();
    let c = &t.cluster;
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-admin-tls").await.unwrap();
    put(&s3, &b, "tmp/a", b"x", None).await;
    put(&s3, &b, "keep/a", b"x", None).await;
    put_lifecycle_plain(c, &b, &lifecycle(&date_rule("due", "tmp/", PAST_DATE))).await;
    let dir = TmpDir::new(&format!("s3lc-worker-{id}"));
    let toml = worker_toml(
        t,
        dir.path(),
        &format!(
            "[grpc.worker]\ncert = \"{}\"\nkey = \"{}\"\n",
            t.cert(&format!("{cert}.crt")),
            t.cert(&format!("{cert}.key"))
        ),
    );
    let cursor = format!("/etc/s3/lifecycle/e2e-{b}");
    let mut env = vec![
        ("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", toml.as_str()),
        ("S3_LIFECYCLED__PASS__BUCKETS", b.as_str()),
        ("S3_LIFECYCLED__CURSOR__DIR", cursor.as_str()),
    ];
    env.extend_from_slice(extra);
    let w = LifecycleWorker::start(a, id, dir.path(), &env);
    a.wait_workers(&[id]).await;
    a.configure(
        &[("cluster_deletes_per_second", 0)],
        &[
            ("enabled", json!(false)),
            ("max_jobs_per_detection", json!(1)),
            ("global_execution_concurrency", json!(1)),
            ("per_worker_execution_concurrency", json!(1)),
            ("retry_limit", json!(0)),
        ],
    )
    .await;
    let run = a.run(120).await;
    assert_eq!(
        run["success_count"],
        1,
        "{run}\nworker log:\n{}\nadmin log:\n{}",
        w.log_text(),
        a.log_tail()
    );
    assert!(!exists(&s3, &b, "tmp/a").await, "the due object is deleted");
    assert!(exists(&s3, &b, "keep/a").await, "nothing else is");
    (w, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_with_grpc_worker_certificate_connects_over_mtls_and_runs_a_job() {
    let _serial = SERIAL.lock().await;
    let _w = one_job("s3lc-tls-a", "client", &[]).await;
}

/// The admin column of the certificate matrix (docs/tls.md#v1-certificates): the worker's
/// `[grpc.worker]` certificate in the forms operators' openssl recipes make, each connecting to
/// the mTLS admin and running a job. weed 4.48 accepts all of them; v1 ones were refused by
/// our loader before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_certificates_in_the_forms_weed_accepts_reach_the_admin() {
    let _serial = SERIAL.lock().await;
    for (cert, what) in [
        ("cv1", "v1 RSA (openssl x509 -req, no -extfile), PKCS#8 key"),
        ("cv1rsa1", "v1 RSA, PKCS#1 key"),
        ("cec", "v1 ECDSA P-256, SEC1 key"),
        ("cint", "v1 issued by an intermediate, chain in the file"),
    ] {
        eprintln!("[grpc.worker] certificate: {what}");
        let (w, _dir) = one_job(&format!("s3lc-tls-{cert}"), cert, &[]).await;
        drop(w);
    }
}

/// GET `path` on `port`: (status, body).
async fn http_get(port: u16, path: &'static str) -> (u16, String) {
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    tokio::task::spawn_blocking(move || {
        let r = common::http::request(addr, "GET", path, &[], b"").unwrap();
        (r.status, r.text())
    })
    .await
    .unwrap()
}

/// The value of the series whose line starts with `prefix` (name and labels).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_serves_metrics_of_its_jobs_on_metrics_listen() {
    let _serial = SERIAL.lock().await;
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let (w, _dir) = one_job(
        "s3lc-tls-metrics",
        "client",
        &[("S3_LIFECYCLED__WEED_ADMIN__METRICS_LISTEN", listen.as_str())],
    )
    .await;
    let (status, body) = http_get(port, "/health").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, m) = http_get(port, "/metrics").await;
    assert_eq!(status, 200, "{m}");
    let log = w.log_text();
    // Jobs by result: the one job succeeded; the stream is up; nothing runs now.
    assert_eq!(
        sample(&m, "s3_lifecycled_worker_jobs_total{result=\"succeeded\"}"),
        Some(1.0),
        "{m}\n{log}"
    );
    assert_eq!(
        sample(&m, "s3_lifecycled_worker_admin_connected"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "s3_lifecycled_worker_executions_running"),
        Some(0.0),
        "{m}"
    );
    // The pass metrics of `serve`: the delete by outcome, events read, the pass and its
    // durations.
    let deletes: f64 = m
        .lines()
        .filter(|l| {
            l.starts_with("SeaweedFS_s3_lifecycle_dispatch_total{")
                && l.contains("outcome=\"DONE\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(deletes, 1.0, "one delete done:\n{m}");
    assert!(
        m.lines()
            .any(|l| l.starts_with("SeaweedFS_s3_lifecycle_daily_run_events_scanned_total{")),
        "events read:\n{m}"
    );
    assert_eq!(
        sample(&m, "s3_lifecycled_pass_total{outcome=\"completed\"}"),
        Some(1.0),
        "{m}"
    );
    assert!(
        m.contains("SeaweedFS_s3_lifecycle_daily_run_duration_seconds_count{"),
        "pass durations:\n{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_without_a_client_certificate_is_refused_naming_grpc_worker() {
    let _serial = SERIAL.lock().await;
    let t = tls_cluster();
    let a = admin();
    let dir = TmpDir::new("s3lc-worker-admin-notls");
    // The cluster's file has [grpc] ca and [grpc.client] but no [grpc.worker]: `weed worker`
    // dials the admin in plaintext with it, and so do we; the admin refuses the handshake.
    let toml = worker_toml(t, dir.path(), "");
    let env = [("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", toml.as_str())];
    let mut w = LifecycleWorker::start(a, "s3lc-tls-nocert", dir.path(), &env);
    let code = exit_code(&mut w).await;
    let log = w.log_text();
    assert_eq!(code, 10, "exit code (TLS required):\n{log}");
    assert!(
        log.contains("[grpc.worker]") && log.contains("requires mutual TLS"),
        "the message names the setting:\n{log}"
    );
    assert!(
        !a.lifecycle_workers().await.contains(&w.id),
        "the admin never lists it"
    );

    // A worker file that says the admin is TLS ([grpc.admin]) but has no [grpc.worker]: a
    // configuration error before dialling.
    let dir2 = TmpDir::new("s3lc-worker-admin-nocert2");
    let toml2 = worker_toml(
        t,
        dir2.path(),
        &format!(
            "[grpc.admin]\ncert = \"{}\"\nkey = \"{}\"\n",
            t.cert("server.crt"),
            t.cert("server.key")
        ),
    );
    let env2 = [("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", toml2.as_str())];
    let mut w2 = LifecycleWorker::start(a, "s3lc-tls-nocert2", dir2.path(), &env2);
    let code = exit_code(&mut w2).await;
    let log = w2.log_text();
    assert_eq!(code, 2, "configuration error:\n{log}");
    assert!(
        log.contains("[grpc.worker] cert and key") && log.contains("cluster.security_toml"),
        "{log}"
    );
}

/// The HTTPS admin of the one-enforcer tests: `[https.admin]` with `admin.crt` (it names
/// 127.0.0.1) makes its HTTP API HTTPS only (weed/command/admin.go in 4.48), `[grpc.admin]` its
/// worker port mutual TLS.
fn https_admin(t: &TlsCluster) -> WeedAdmin {
    let toml = security_with(
        t,
        &format!(
            "[grpc.admin]\ncert = \"{}\"\nkey = \"{}\"\n[https.admin]\ncert = \"{}\"\nkey = \"{}\"\n",
            t.cert("server.crt"),
            t.cert("server.key"),
            t.cert("admin.crt"),
            t.cert("admin.key")
        ),
    );
    WeedAdmin::start_with_security(&t.cluster, Some(&toml))
}

/// A `run-once` security.toml in `dir`: the cluster's (gRPC mTLS) plus `https_client`.
fn run_once_toml(t: &TlsCluster, dir: &std::path::Path, https_client: &str) -> String {
    worker_toml(t, dir, https_client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_serving_https_is_checked_over_https_with_https_client() {
    let _serial = SERIAL.lock().await;
    let t = tls_cluster();
    let https = https_admin(t);
    let c = &t.cluster;
    let s3 = c.s3_client();
    let b = c.new_bucket("e2e-admin-https").await.unwrap();
    put(&s3, &b, "tmp/a", b"x", None).await;
    put_lifecycle_plain(c, &b, &lifecycle(&date_rule("due", "tmp/", PAST_DATE))).await;
    let scope = Scope::new(&[&b]);
    let addr = https.worker_arg();
    let dir = TmpDir::new("s3lc-admin-https");
    let run = |toml: String| {
        let (scope, addr) = (&scope, addr.clone());
        async move {
            let env = [
                ("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", toml.as_str()),
                ("S3_LIFECYCLED__WEED_ADMIN__ADDRESS", addr.as_str()),
            ];
            run_once(c, scope, None, &[], &env).await
        }
    };

    // Without [https.client] the check cannot ask, and says what to set.
    let plain = run_once_toml(t, &dir.path().join("plain"), "");
    let p = run(plain).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("serves HTTPS")
            && p.stderr.contains("[https.admin]")
            && p.stderr.contains("[https.client] enabled = true"),
        "{}",
        p.describe()
    );
    assert!(exists(&s3, &b, "tmp/a").await, "nothing deleted");

    // [https.client] with a CA that did not issue the admin's certificate: refused, named.
    let foreign = run_once_toml(
        t,
        &dir.path().join("foreign"),
        &format!(
            "[https.client]\nenabled = true\nca = \"{}\"\n",
            t.cert("ca2.crt")
        ),
    );
    let p = run(foreign).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    // In the words of the HTTPS settings, not the gRPC ones it once borrowed.
    assert!(
        p.stderr.contains("https://")
            && p.stderr.contains("unknown CA")
            && p.stderr.contains("set [https.client] ca")
            && !p.stderr.contains("[grpc] ca"),
        "{}",
        p.describe()
    );
    assert!(exists(&s3, &b, "tmp/a").await, "nothing deleted");

    // [https.client] insecure_skip_verify is refused before anything is asked.
    let skip = run_once_toml(
        t,
        &dir.path().join("skip"),
        "[https.client]\nenabled = true\ninsecure_skip_verify = true\n",
    );
    let p = run(skip.clone()).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(
        p.stderr.contains("insecure_skip_verify"),
        "{}",
        p.describe()
    );
    // `serve` and `worker` refuse it at start, not at their first pass or job.
    for cmd in ["serve", "worker"] {
        let env = [
            ("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", skip.as_str()),
            ("S3_LIFECYCLED__WEED_ADMIN__ADDRESS", addr.as_str()),
        ];
        let p = run_raw(&[cmd], &env).await;
        assert_eq!(p.code, 2, "{cmd}: {}", p.describe());
        assert!(
            p.stderr.contains("insecure_skip_verify"),
            "{cmd}: {}",
            p.describe()
        );
    }

    // With the CA: the check asks over HTTPS, finds no other enforcer, the pass deletes.
    let good = run_once_toml(
        t,
        &dir.path().join("good"),
        &format!(
            "[https.client]\nenabled = true\nca = \"{}\"\n",
            t.cert("ca.crt")
        ),
    );
    let p = run(good.clone()).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert!(!exists(&s3, &b, "tmp/a").await, "the due object is deleted");
    put(&s3, &b, "tmp/b", b"x", None).await;

    // A Go `weed worker` serving s3_lifecycle at that admin (over its mTLS worker port): the
    // check reads it from the HTTPS API and refuses to delete.
    let go_dir = TmpDir::new("s3lc-admin-https-go");
    std::fs::write(
        go_dir.path().join("security.toml"),
        security_with(
            t,
            &format!(
                "[grpc.worker]\ncert = \"{}\"\nkey = \"{}\"\n",
                t.cert("client.crt"),
                t.cert("client.key")
            ),
        ),
    )
    .unwrap();
    let _go = tokio::process::Command::new(&c.weed_bin)
        .args([
            "worker".to_string(),
            format!("-admin={addr}"),
            "-jobType=s3_lifecycle".to_string(),
            format!("-workingDir={}", go_dir.path().display()),
        ])
        .current_dir(go_dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning weed worker");
    let tls = s3_lifecycled::seaweed::tls::ClientTls::load_for(
        s3_lifecycled::seaweed::tls::TlsFiles {
            ca: t.cert("ca.crt").into(),
            cert: None,
            key: None,
            server_name: Some("127.0.0.1".into()),
        },
        s3_lifecycled::seaweed::tls_failure::TlsUse::AdminHttps,
    )
    .unwrap();
    let http = https.http_addr();
    eventually(
        Duration::from_secs(60),
        Duration::from_millis(200),
        async || {
            let w =
                s3_lifecycled::plugin::admin_http::get(Some(&tls), &http, "/api/plugin/workers")
                    .await?;
            if s3_lifecycled::plugin::enforcer::foreign_enforcers(&w, None).is_empty() {
                Err(format!("the HTTPS admin lists no Go worker yet: {w}"))
            } else {
                Ok(())
            }
        },
    )
    .await;
    let p = run(good).await;
    assert_eq!(p.code, 2, "{}", p.describe());
    assert!(p.stderr.contains("refusing to delete"), "{}", p.describe());
    assert!(
        exists(&s3, &b, "tmp/b").await,
        "nothing deleted while it serves"
    );
}
