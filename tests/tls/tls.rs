//! `s3-lifecycled` against a SeaweedFS 4.48 cluster whose gRPC is mutual TLS (docs/tls.md): one
//! shared cluster with a `security.toml`, a CA and certificates made at test time, the server
//! certificate CN-only. A pass completes through `[tls]` and through `--security-toml` (with
//! SeaweedFS's `WEED_GRPC_*` overrides); plaintext, no client certificate, the wrong CA, an
//! expired certificate and a server name the certificate does not carry each fail with their own
//! message and exit code, touching nothing; a client certificate rotated between two passes of
//! `serve` is used by the next pass without a restart.

use crate::common;

use std::time::Duration;

use common::tls::{
    TlsCluster, one_certificate_cluster, put_lifecycle_plain, tls_cluster, tls12_cluster,
};
use common::*;

/// A fresh bucket with one object under an always-due Expiration Date rule.
async fn due_bucket(t: &TlsCluster, prefix: &str) -> (String, aws_sdk_s3::Client) {
    let c = &t.cluster;
    let s3 = c.s3_client();
    let b = c.new_bucket(prefix).await.unwrap();
    put(&s3, &b, "tmp/a", b"x", None).await;
    put_lifecycle_plain(c, &b, &lifecycle(&date_rule("due", "tmp/", PAST_DATE))).await;
    (b, s3)
}

fn tls_env<'a>(
    t: &'a TlsCluster,
    ca: &'a str,
    cert: &'a str,
    key: &'a str,
) -> Vec<(&'static str, String)> {
    let mut env = vec![("S3_LIFECYCLED__TLS__CA", t.cert(ca))];
    if !cert.is_empty() {
        env.push(("S3_LIFECYCLED__TLS__CERT", t.cert(cert)));
        env.push(("S3_LIFECYCLED__TLS__KEY", t.cert(key)));
    }
    env
}

async fn run(
    t: &TlsCluster,
    scope: &Scope,
    extra: &[&str],
    env: &[(&'static str, String)],
) -> Pass {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_once(&t.cluster, scope, None, extra, &env).await
}

/// A failed pass: the exit code, the message, and the object still there.
async fn assert_refused(p: &Pass, code: i32, needle: &str, s3: &aws_sdk_s3::Client, b: &str) {
    assert_eq!(p.code, code, "exit code:\n{}", p.describe());
    assert!(
        p.stderr.contains(needle),
        "stderr must say {needle:?}:\n{}",
        p.describe()
    );
    assert!(
        exists(s3, b, "tmp/a").await,
        "nothing may be deleted:\n{}",
        p.describe()
    );
}

#[tokio::test]
async fn pass_completes_through_tls_settings_with_a_cn_only_server_certificate() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-settings").await;
    let p = run(
        t,
        &Scope::new(&[&b]),
        &[],
        &tls_env(t, "ca.crt", "client.crt", "client.key"),
    )
    .await;
    let r = p.ok();
    assert_eq!(r.total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());
    // The master's filer registrations are read through the same TLS
    // (docs/meta-log.md#filer-restart).
    assert!(
        !p.stderr
            .contains("cannot ask the master when the filers registered"),
        "{}",
        p.describe()
    );
}

#[tokio::test]
async fn pass_completes_through_security_toml_and_weed_grpc_overrides() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-security-toml").await;
    let st = t.security_toml.display().to_string();
    let p = run(t, &Scope::new(&[&b]), &["--security-toml", &st], &[]).await;
    p.ok();
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());

    // A security.toml whose [grpc.client] names the foreign certificate, overridden by
    // WEED_GRPC_CLIENT_CERT/KEY as weed itself would: the variables win.
    let (b2, s3) = due_bucket(t, "tls-weed-env").await;
    let dir = TmpDir::new("tls-sec");
    let alt = dir.path().join("security.toml");
    std::fs::write(
        &alt,
        format!(
            "[grpc]\nca = \"{}\"\n[grpc.client]\ncert = \"{}\"\nkey = \"{}\"\n",
            t.cert("ca.crt"),
            t.cert("foreign.crt"),
            t.cert("foreign.key")
        ),
    )
    .unwrap();
    let alt = alt.display().to_string();
    let foreign = run(t, &Scope::new(&[&b2]), &["--security-toml", &alt], &[]).await;
    assert_refused(&foreign, 12, "unknown CA", &s3, &b2).await;
    let env = vec![
        ("WEED_GRPC_CLIENT_CERT", t.cert("client.crt")),
        ("WEED_GRPC_CLIENT_KEY", t.cert("client.key")),
    ];
    let p = run(t, &Scope::new(&[&b2]), &["--security-toml", &alt], &env).await;
    p.ok();
    assert!(!exists(&s3, &b2, "tmp/a").await, "{}", p.describe());
}

/// `run-once` for `b` with working directory `cwd` and `HOME` = `home`, no TLS settings.
async fn run_in(
    t: &TlsCluster,
    b: &str,
    cwd: &std::path::Path,
    home: &std::path::Path,
    env: &[(&str, &str)],
) -> common::bin::Pass {
    let scope = Scope::new(&[b]);
    let mut cmd = common::bin::run_once_command(&t.cluster, &scope, None, &[], env);
    cmd.current_dir(cwd).env("HOME", home);
    let args = vec!["run-once".to_string(), "--buckets".into(), b.to_string()];
    common::bin::finish(cmd, args, None).await
}

/// `weed shell` on a cluster host finds `security.toml` in its working directory or in
/// `~/.seaweedfs` without a flag (or takes `WEED_GRPC_*` variables alone), as the Go worker
/// does inside weed; `run-once` there dialled in plaintext and was refused (exit 10) until
/// given `--security-toml`.
#[tokio::test]
async fn a_security_toml_where_weed_looks_was_ignored() {
    let t = tls_cluster();
    let toml = std::fs::read_to_string(&t.security_toml).unwrap();
    let (bare, no_home) = (
        TmpDir::new("tls-found-bare"),
        TmpDir::new("tls-found-nohome"),
    );

    let (b, s3) = due_bucket(t, "tls-found-cwd").await;
    let cwd = TmpDir::new("tls-found-cwd");
    std::fs::write(cwd.path().join("security.toml"), &toml).unwrap();
    let p = run_in(t, &b, cwd.path(), no_home.path(), &[]).await;
    p.ok();
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());
    assert!(
        p.stderr.contains("found where weed looks"),
        "the log names where the TLS material came from:\n{}",
        p.describe()
    );

    let (b, s3) = due_bucket(t, "tls-found-home").await;
    let home = TmpDir::new("tls-found-home");
    std::fs::create_dir_all(home.path().join(".seaweedfs")).unwrap();
    std::fs::write(home.path().join(".seaweedfs/security.toml"), &toml).unwrap();
    let p = run_in(t, &b, bare.path(), home.path(), &[]).await;
    p.ok();
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());

    // No file at all: weed's own WEED_GRPC_* variables, which weed reads without one.
    let (b, s3) = due_bucket(t, "tls-found-vars").await;
    let (ca, crt, key) = (t.cert("ca.crt"), t.cert("client.crt"), t.cert("client.key"));
    let vars = [
        ("WEED_GRPC_CA", ca.as_str()),
        ("WEED_GRPC_CLIENT_CERT", crt.as_str()),
        ("WEED_GRPC_CLIENT_KEY", key.as_str()),
    ];
    let p = run_in(t, &b, bare.path(), no_home.path(), &vars).await;
    p.ok();
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());

    // "none": the file is not read, and plaintext is refused as before.
    let (b, s3) = due_bucket(t, "tls-found-none").await;
    let none = [("S3_LIFECYCLED__CLUSTER__SECURITY_TOML", "none")];
    let p = run_in(t, &b, cwd.path(), no_home.path(), &none).await;
    assert_refused(&p, 10, "requires TLS", &s3, &b).await;
}

#[tokio::test]
async fn plaintext_against_the_tls_cluster_says_it_requires_tls() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-plaintext").await;
    let p = run(t, &Scope::new(&[&b]), &[], &[]).await;
    assert_refused(
        &p,
        10,
        "requires TLS: set tls.* or --security-toml",
        &s3,
        &b,
    )
    .await;
}

#[tokio::test]
async fn no_client_certificate_is_named_as_such() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-no-cert").await;
    let p = run(t, &Scope::new(&[&b]), &[], &tls_env(t, "ca.crt", "", "")).await;
    assert_refused(&p, 11, "refused the client certificate", &s3, &b).await;
    assert!(
        p.stderr.contains("set tls.cert and tls.key"),
        "{}",
        p.describe()
    );
}

#[tokio::test]
async fn wrong_ca_is_an_unknown_ca() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-wrong-ca").await;
    let p = run(
        t,
        &Scope::new(&[&b]),
        &[],
        &tls_env(t, "ca2.crt", "client.crt", "client.key"),
    )
    .await;
    assert_refused(&p, 12, "unknown CA", &s3, &b).await;
}

#[tokio::test]
async fn expired_client_certificate_is_named_as_expired() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-expired").await;
    let p = run(
        t,
        &Scope::new(&[&b]),
        &[],
        &tls_env(t, "ca.crt", "expired.crt", "expired.key"),
    )
    .await;
    assert_refused(&p, 13, "expired certificate", &s3, &b).await;
    assert!(
        p.stderr.contains("expired.crt"),
        "names the file:\n{}",
        p.describe()
    );
}

#[tokio::test]
async fn server_name_not_in_the_certificate_is_a_name_mismatch() {
    let t = tls_cluster();
    let (b, s3) = due_bucket(t, "tls-server-name").await;
    let mut env = tls_env(t, "ca.crt", "client.crt", "client.key");
    env.push(("S3_LIFECYCLED__TLS__SERVER_NAME", "filer.example".into()));
    let p = run(t, &Scope::new(&[&b]), &[], &env).await;
    assert_refused(&p, 14, "does not name tls.server_name", &s3, &b).await;
}

/// `serve` keeps its connections between passes; a certificate replaced on disk must be picked
/// up by the next pass: valid → expired (the next pass fails, nothing deleted) → a new valid one
/// (the pass after completes), all without a restart.
#[tokio::test]
async fn rotated_client_certificate_is_used_by_the_next_pass() {
    let t = tls_cluster();
    let c = &t.cluster;
    let (b, s3) = due_bucket(t, "tls-rotation").await;
    let dir = TmpDir::new("tls-rot");
    let (cert, key) = (dir.path().join("client.crt"), dir.path().join("client.key"));
    let install = |name: &str| {
        std::fs::copy(t.certs.join(format!("{name}.crt")), &cert).unwrap();
        std::fs::copy(t.certs.join(format!("{name}.key")), &key).unwrap();
    };
    install("client");
    let (ca, cert_s, key_s) = (
        t.cert("ca.crt"),
        cert.display().to_string(),
        key.display().to_string(),
    );
    let scope = Scope::new(&[&b]);
    let svc = Serve::start_on(
        c,
        &scope,
        &[
            ("S3_LIFECYCLED__TLS__CA", &ca),
            ("S3_LIFECYCLED__TLS__CERT", &cert_s),
            ("S3_LIFECYCLED__TLS__KEY", &key_s),
        ],
    )
    .await;
    let within = Duration::from_secs(60);
    let (id, _) = svc.trigger(&[]).await;
    let last = svc.wait_last(&id, within).await;
    assert_eq!(last["outcome"], "completed", "{last}");
    assert!(
        !exists(&s3, &b, "tmp/a").await,
        "first pass deletes: {}",
        svc.log_text()
    );

    install("expired");
    put(&s3, &b, "tmp/b", b"x", None).await;
    let (id, _) = svc.trigger(&[]).await;
    let last = svc.wait_last(&id, within).await;
    assert_ne!(
        last["outcome"], "completed",
        "the expired certificate must be in use: {last}"
    );
    assert!(
        exists(&s3, &b, "tmp/b").await,
        "nothing deleted with a refused certificate"
    );
    assert!(
        svc.log_text().contains("TLS certificates changed"),
        "{}",
        svc.log_text()
    );

    install("client2");
    let (id, _) = svc.trigger(&[]).await;
    let last = svc.wait_last(&id, within).await;
    assert_eq!(last["outcome"], "completed", "{last}\n{}", svc.log_text());
    assert!(
        !exists(&s3, &b, "tmp/b").await,
        "the rotated certificate works: {}",
        svc.log_text()
    );
}

/// Discovery on a TLS cluster: with only `cluster.master` set, the master's gRPC port is asked
/// over the same client TLS as the filer and the gateway (a plaintext ask used to fail there).
#[tokio::test]
async fn pass_with_only_the_master_discovers_members_over_tls() {
    pass_through_the_master(tls_cluster(), "tls-master", "client").await;
}

/// A pass with only `cluster.master` set and client certificate `<cert>.crt`/`.key` deletes
/// a due object found through the master's membership.
async fn pass_through_the_master(t: &TlsCluster, prefix: &str, cert: &str) -> Pass {
    let master = t.cluster.master_grpc_addr().to_string();
    pass_through(t, prefix, cert, &master).await
}

/// [`pass_through_the_master`] with `cluster.master` = `master`.
async fn pass_through(t: &TlsCluster, prefix: &str, cert: &str, master: &str) -> Pass {
    let (b, s3) = due_bucket(t, prefix).await;
    let scope = Scope::new(&[&b]);
    let (crt, key) = (format!("{cert}.crt"), format!("{cert}.key"));
    let mut env = tls_env(t, "ca.crt", &crt, &key);
    env.push(("S3_LIFECYCLED__CLUSTER__MASTER", master.to_string()));
    env.push(("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.clone()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let p = run_raw(&["run-once", "--buckets", b.as_str(), "--json"], &env).await;
    assert_eq!(
        p.code,
        0,
        "discovery through the master with {cert}:\n{}",
        p.describe()
    );
    assert_eq!(p.ok().total("DONE"), 1, "{}", p.describe());
    assert!(!exists(&s3, &b, "tmp/a").await, "{}", p.describe());
    p
}

/// The master's HTTP port as `cluster.master` (`weed shell -master=HOST:9333`, as an operator
/// copies it) on an mTLS cluster with weed's own gRPC ports: the probe reaches the gRPC port
/// (HTTP + 10000) over the same client TLS, and the warning says what to write. Before, the pass
/// failed: the HTTP port answers no TLS, let alone gRPC (docs/grpc.md#weed-form).
#[tokio::test]
async fn a_weed_style_master_address_under_mtls_reached_no_grpc_port() {
    let t = tls12_cluster();
    let master_http = t.cluster.master_http_addr().to_string();
    let p = pass_through(t, "tls12-weed-form", "client", &master_http).await;
    let grpc = t.cluster.master_grpc_addr().to_string();
    assert!(
        p.stderr.contains("`cluster.master`") && p.stderr.contains(&grpc),
        "the warning names the setting and {grpc}:\n{}",
        p.describe()
    );
}

/// The quick set-up, one `openssl req -x509` certificate as the CA file and as every role's
/// certificate, and leaves issued by `openssl req -x509 -CA`: openssl makes all of them CAs
/// (basicConstraints `CA:TRUE`). weed (Go's crypto/x509) takes a CA as a leaf and its servers
/// reach one another with them; every pass failed with "invalid peer certificate:
/// CaUsedAsEndEntity" (webpki's rule). A pass that finds the cluster through the master (whose
/// certificate is the CA's own) and deletes through the gateway (an issued CA) completes, with the
/// CA's own pair and with an issued one as our client certificate.
#[tokio::test]
async fn ca_certificates_as_leaves_were_refused_although_weed_accepts_them() {
    let t = one_certificate_cluster();
    // Our client certificate: the CA's own pair, then an issued CA.
    for cert in ["ca", "creq"] {
        pass_through_the_master(t, "tls-ca-leaf", cert).await;
    }
}

/// The TLS version `openssl s_client -<flag>` (`tls1_2`, `tls1_3`) gets from `addr` with our
/// client certificate: `Some("TLSv1.2")`, or `None` when the server refuses that version.
fn negotiated(t: &TlsCluster, addr: std::net::SocketAddr, flag: &str) -> Option<String> {
    let out = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-brief",
            &format!("-{flag}"),
            "-connect",
            &addr.to_string(),
        ])
        .args(["-CAfile", &t.cert("ca.crt"), "-cert", &t.cert("client.crt")])
        .args(["-key", &t.cert("client.key")])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl s_client runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("Protocol version: "))
        .map(|v| v.trim().to_string())
}

/// weed pinned to TLS 1.2 (`[tls] max_version = "TLS 1.2"` in `security.toml`) with ECDSA P-521
/// certificates, v1 by the plain recipe, on every server and for us. docs/tls.md said this was
/// out of reach (TLS 1.2 would need P-521 among our key-exchange groups, and *ring* has none);
/// observed on 4.48, weed sends its P-521 certificate whatever groups we offer, and a pass
/// that finds the cluster through the master (P-521 there too) deletes its due object. The
/// master, filer and gateway refuse TLS 1.3, so the pass ran on TLS 1.2.
#[tokio::test]
async fn p521_certificates_under_weeds_tls_1_2_complete_a_pass() {
    let t = tls12_cluster();
    let c = &t.cluster;
    for (role, addr) in [
        ("master", c.master_grpc_addr()),
        ("filer", c.filer_grpc_addr()),
        ("S3 gateway", c.s3_grpc_addr()),
    ] {
        assert_eq!(
            negotiated(t, addr, "tls1_3"),
            None,
            "the {role} must refuse TLS 1.3"
        );
        assert_eq!(
            negotiated(t, addr, "tls1_2").as_deref(),
            Some("TLSv1.2"),
            "the {role} must speak TLS 1.2"
        );
    }
    pass_through_the_master(t, "tls12-p521", "client").await;
}

/// Each `(name, what)`: `<name>.crt`/`.key` as our client certificate completes a pass through
/// the filer and the gateway, deleting its bucket's due object.
async fn each_client_form_completes_a_pass(t: &TlsCluster, cases: &[(&str, &str)]) {
    for (name, what) in cases {
        let (b, s3) = due_bucket(t, "tls-form").await;
        let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
        let env = tls_env(t, "ca.crt", &crt, &key);
        let p = run(t, &Scope::new(&[&b]), &[], &env).await;
        assert_eq!(p.code, 0, "{what}:\n{}", p.describe());
        assert_eq!(p.ok().total("DONE"), 1, "{what}:\n{}", p.describe());
        assert!(!exists(&s3, &b, "tmp/a").await, "{what}:\n{}", p.describe());
    }
}

/// The certificate forms operators' recipes make, each as our client certificate in a pass that
/// reads the filer (an X.509 v1 RSA certificate) and deletes through the S3 gateway (ECDSA P-256
/// v1, issued by an intermediate that only the CA file holds). v1 certificates were refused with
/// "tls.cert and tls.key do not go together: … UnsupportedCertVersion" although weed accepts them.
#[tokio::test]
async fn v1_certificates_were_refused_although_weed_accepts_them() {
    let t = tls_cluster();
    let cases = [
        ("client", "v3 CN-only, PKCS#8 RSA key"),
        ("cv1", "v1 RSA (openssl x509 -req, no -extfile), PKCS#8 key"),
        ("cv1rsa1", "v1 RSA, PKCS#1 key"),
        ("csan", "v3 with subjectAltName"),
        ("cec", "v1 ECDSA P-256, SEC1 key"),
        ("cec8", "v3 ECDSA P-256, PKCS#8 key"),
        ("cint", "v1 issued by an intermediate, chain in the file"),
    ];
    each_client_form_completes_a_pass(t, &cases).await;
    // A key that is not the certificate's is refused at start-up, naming both files and the
    // openssl commands that show the two public keys.
    let (b, s3) = due_bucket(t, "tls-mismatch").await;
    let p = run(
        t,
        &Scope::new(&[&b]),
        &[],
        &tls_env(t, "ca.crt", "cv1.crt", "cec.key"),
    )
    .await;
    assert_refused(
        &p,
        2,
        "do not go together: the key is not the certificate's",
        &s3,
        &b,
    )
    .await;
    assert!(
        p.stderr.contains("openssl pkey -pubout"),
        "{}",
        p.describe()
    );
    // Only the root in the CA file: the gateway's chain cannot be completed.
    let (b, s3) = due_bucket(t, "tls-no-intermediate").await;
    let p = run(
        t,
        &Scope::new(&[&b]),
        &[],
        &tls_env(t, "root.crt", "cv1.crt", "cv1.key"),
    )
    .await;
    assert_refused(&p, 12, "unknown CA", &s3, &b).await;
}

/// Key sizes and curves weed accepts and *ring* alone does not (docs/tls.md#key-sizes-and-curves):
/// a 1024-bit RSA client key and a P-521 one were refused at start-up with "not a usable private
/// key", and a master whose P-521 certificate is issued by a 1024-bit RSA intermediate failed its
/// chain check. Each client form below completes a pass through the filer and the gateway (P-384
/// with its EC PARAMETERS block and Ed25519 already worked, and stay covered), and a pass that
/// finds the cluster through that master with the 1024-bit key completes too.
#[tokio::test]
async fn rsa_1024_and_p521_certificates_were_refused_although_weed_accepts_them() {
    let t = tls_cluster();
    let cases = [
        ("c1024", "RSA 1024, PKCS#1 key"),
        ("c521", "ECDSA P-521 v1, SEC1 key"),
        (
            "c384",
            "ECDSA P-384 v1, SEC1 key after an EC PARAMETERS block",
        ),
        ("ced", "Ed25519 v1, PKCS#8 key"),
    ];
    each_client_form_completes_a_pass(t, &cases).await;
    // The master's own certificate is P-521, under a 1024-bit RSA intermediate.
    pass_through_the_master(t, "tls-p521-master", "c1024").await;
}
