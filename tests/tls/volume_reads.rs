//! Reads from volume servers whose data weed lets an operator guard: with read tokens
//! (`[jwt.signing.read]`, the mTLS cluster's [`common::tls::JWT_KEYS`]), over HTTPS
//! (`[https.volume]`, [`common::tls::https_volume_cluster`]) and encrypted by the filer
//! (`-filer.encryptVolumeData`, [`common::encrypted_volume_cluster`]). A pass's direct
//! log-file reads get through each as weed's own filer does (docs/meta-log.md#read-tokens,
//! docs/meta-log.md#https-volume-servers, docs/meta-log.md#encrypted-volumes).

use crate::common;

use common::metalog::{log_chunks, pad_log};
use common::tls::{https_volume_cluster, put_lifecycle_plain, tls_cluster};
use common::*;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
use s3_lifecycled::seaweed::filer::FilerClient;
use s3_lifecycled::seaweed::tls::{ClientTls, TlsFiles};
use std::path::Path;
use std::time::Duration;

/// Held while a test pads a cluster's log until the filer flushes it.
static PADDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Before, every log file a pass asked the filer for came back `HTTP 401 … wrong jwt` from
/// the volume server, and the filer streamed it instead, with a warning on every pass.
#[tokio::test]
async fn direct_log_reads_were_refused_by_volume_servers_that_sign_reads() {
    let t = tls_cluster();
    let tls = grpc_client(t);
    pass_reads_the_log_files_directly(&t.cluster, "jwt-reads", Some(&t.security_toml), Some(tls))
        .await;
}

/// `[https.client] enabled = true` set for weed admin's HTTPS API (docs/plugin-worker.md#admin-https)
/// beside the cluster's plain-HTTP volume servers: each volume server answers the TLS
/// handshake as a plain HTTP server does, is read over plain HTTP, and nothing is refused.
#[tokio::test]
async fn an_https_client_section_for_weed_admin_leaves_plain_volume_servers_readable() {
    let t = tls_cluster();
    let dir = TmpDir::new("https-admin-only");
    let toml = dir.path().join("security.toml");
    let cluster_toml = std::fs::read_to_string(&t.security_toml).unwrap();
    std::fs::write(
        &toml,
        format!(
            "{cluster_toml}\n[https.client]\nenabled = true\nca = \"{}\"\n",
            t.cert("ca.crt")
        ),
    )
    .unwrap();
    let p = pass_reads_the_log_files_directly(
        &t.cluster,
        "https-admin-only",
        Some(&toml),
        Some(grpc_client(t)),
    )
    .await;
    assert!(
        p.stderr
            .contains("serves plain HTTP: read that way from now on"),
        "{}",
        p.describe()
    );
}

/// The mTLS cluster's gRPC client TLS, for the test's own filer calls.
fn grpc_client(t: &common::tls::TlsCluster) -> ClientTls {
    ClientTls::load(TlsFiles {
        ca: t.cert("ca.crt").into(),
        cert: Some(t.cert("client.crt").into()),
        key: Some(t.cert("client.key").into()),
        server_name: None,
    })
    .unwrap()
}

/// Before, every read spoke plain HTTP to the volume servers' HTTPS port (`client sent an
/// HTTP request to an HTTPS server`), and the filer streamed every file instead, with a
/// warning on every pass.
#[tokio::test]
async fn direct_log_reads_spoke_plain_http_to_volume_servers_that_serve_https() {
    let t = https_volume_cluster();
    pass_reads_the_log_files_directly(&t.cluster, "https-reads", Some(&t.security_toml), None)
        .await;
}

/// Before, every chunk of the filer's log files came encrypted (AES-256-GCM under the chunk's
/// `cipher_key`), the fetcher refused it, and the filer streamed every file instead, with a
/// warning on every pass.
#[tokio::test]
async fn direct_log_reads_refused_the_chunks_of_a_filer_that_encrypts_volume_data() {
    let c = encrypted_volume_cluster();
    pass_reads_the_log_files_directly(c, "encrypted-reads", None, None).await;
}

/// A bucket of 50 due objects whose events are in a persisted log file; a cold-start pass
/// two days on, given the cluster's `security.toml`, reads that file from the volume
/// servers, none refused, and deletes all 50. `grpc_tls`: the filer's gRPC client TLS.
/// Returns the pass.
async fn pass_reads_the_log_files_directly(
    c: &Cluster,
    prefix: &str,
    security_toml: Option<&Path>,
    grpc_tls: Option<ClientTls>,
) -> Pass {
    let s3 = c.s3_client();
    let b = c.new_bucket(prefix).await.unwrap();
    put_lifecycle_plain(c, &b, &lifecycle(&days_rule("all", "", 1))).await;
    let keys: Vec<String> = (0..50).map(|i| format!("k/{i:03}")).collect();
    for k in &keys {
        put(&s3, &b, k, b"x", None).await;
    }

    // The events above into a persisted log file.
    let addr = c.filer_grpc_addr().to_string();
    let options = EndpointOptions::seaweed().tls(grpc_tls);
    let channel = GrpcEndpoint::new(&addr, &options)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut filer = SeaweedFilerClient::new(channel.clone());
    // One padding at a time: two at once on one filer can fill its buffer once between
    // them and leave the rest of each in memory. A flush within the minute of an earlier
    // one adds a chunk to that minute's file, so chunks are counted, not files.
    let _one = PADDING.lock().await;
    let before = log_chunks(&mut filer).await;
    pad_log(&FilerClient::from_channel(channel, &addr), &b).await;
    eventually(
        Duration::from_secs(30),
        Duration::from_millis(200),
        async || {
            let n = log_chunks(&mut filer).await;
            if n > before {
                Ok(())
            } else {
                Err(format!("{n} log file chunks, {before} before padding"))
            }
        },
    )
    .await;
    drop(_one);

    // A cold start replays the log (ten years of it are taken as kept).
    let st = security_toml.map_or("none".to_string(), |p| p.display().to_string());
    let env = [
        ("S3_LIFECYCLED__PASS__META_LOG_RETENTION", "87600h"),
        ("RUST_LOG", "info"),
    ];
    let now = now_ns() + 2 * 86_400 * 1_000_000_000;
    let p = run_once(
        c,
        &Scope::new(&[&b]),
        Some(now),
        &["--security-toml", &st],
        &env,
    )
    .await;
    let r = p.ok();
    assert!(
        p.stderr
            .contains("meta-log files read from the volume servers"),
        "no log file was read directly:\n{}",
        p.describe()
    );
    assert!(
        !p.stderr.contains("not readable from the volume servers"),
        "a volume server refused a log file:\n{}",
        p.describe()
    );
    assert_eq!(r.total("DONE"), keys.len() as i64, "{}", p.describe());
    assert!(list_keys(&s3, &b).await.is_empty(), "{}", p.describe());
    p
}
