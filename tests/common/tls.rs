//! The mTLS cluster of `tests/tls/tls.rs`: certificates made with the `openssl` CLI at start
//! the ways operators' recipes make them, a `security.toml` in weed's working directory that turns
//! gRPC mutual TLS on for every role (docs/tls.md), and one `weed server` shared by the binary's
//! tests. The volume server has a v3 CN-only certificate (no subjectAltName, as SeaweedFS
//! operators often make them), the master a v3 CN-only ECDSA P-521 one issued by an intermediate
//! with a 1024-bit RSA key (forms *ring* alone refuses), the filer an X.509 v1 one (`openssl
//! x509 -req` without `-extfile`), the S3 gateway an ECDSA P-256 v1 one with a SEC1 key, issued
//! by another intermediate; the CA file (`ca.crt`) holds both intermediates and the root.
//!
//! Besides the good client certificate there are: a second valid one (rotation), one from a
//! foreign CA, one expired in 2020 (`openssl ca -startdate/-enddate`), the foreign CA itself, and
//! `admin.crt`, which names 127.0.0.1 (subjectAltName), for `weed admin`'s HTTPS API.
//!
//! A second cluster, started only by the test that needs it (`tls12_cluster`), is pinned to TLS
//! 1.2 with ECDSA P-521 certificates throughout. A third (`one_certificate_cluster`) is the quick
//! set-up: one `openssl req -x509` certificate, a CA, as every role's and as the CA file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::cluster::{Cluster, start_weed_defaults_using, start_with_retries_using};
use super::http;

/// Makes the certificates in the current directory. `leaf` makes X.509 v3 certificates with no
/// subjectAltName (CN only), `v1` the plain recipe's version 1.
const GEN: &str = r#"set -e
printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n' > leaf.ext
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=test-ca"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca2.key -out ca2.crt -days 3650 -subj "/CN=other-ca"
leaf() { # name CN ca
  openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "/CN=$2"
  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -out $1.crt -days 365 -extfile leaf.ext
}
leaf server seaweedfs-node ca
# weed admin's HTTPS certificate names its address, as Go's HTTPS clients require.
printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/CN=weed-admin"
openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 365 -extfile san.ext
leaf client lifecycled ca
leaf client2 lifecycled-rotated ca
leaf foreign lifecycled ca2
mkdir -p caroot; : > caroot/index.txt; echo 1000 > caroot/serial
cat > ca.cnf <<EOC
[ca]
default_ca = d
[d]
dir = ./caroot
database = ./caroot/index.txt
serial = ./caroot/serial
new_certs_dir = ./caroot
certificate = ./ca.crt
private_key = ./ca.key
default_md = sha256
policy = p
x509_extensions = leaf
[p]
commonName = supplied
[leaf]
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
EOC
openssl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj "/CN=lifecycled-expired"
openssl ca -batch -config ca.cnf -in expired.csr -out expired.crt -notext -startdate 20200101000000Z -enddate 20200102000000Z
# The forms operators' recipes make (docs/tls.md#v1-certificates). The common recipe, no
# -extfile: X.509 v1, key in PKCS#8 (openssl 3's default).
v1() { # name CN ca
  openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "/CN=$2"
  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -out $1.crt -days 365
}
v1 filer seaweedfs-filer ca
v1 cv1 lifecycled-v1 ca
# v1 with a PKCS#1 key ("BEGIN RSA PRIVATE KEY"), as `openssl genrsa -traditional` and openssl 1.x write it.
openssl genrsa -traditional -out cv1rsa1.key 2048
openssl req -new -key cv1rsa1.key -subj "/CN=lifecycled-pkcs1" -out cv1rsa1.csr
openssl x509 -req -in cv1rsa1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cv1rsa1.crt -days 365
# v3 with a subjectAltName.
openssl req -newkey rsa:2048 -nodes -keyout csan.key -out csan.csr -subj "/CN=lifecycled-san"
openssl x509 -req -in csan.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out csan.crt -days 365 -extfile san.ext
# ECDSA P-256: v1 with a SEC1 key ("BEGIN EC PRIVATE KEY"), and v3 with a PKCS#8 one.
ec() { # name CN ca extfile-args
  openssl ecparam -name prime256v1 -genkey -noout -out $1.key
  openssl req -new -key $1.key -subj "/CN=$2" -out $1.csr
  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -out $1.crt -days 365 $4
}
ec cec lifecycled-ec ca
ec cec8 lifecycled-ec8 ca "-extfile leaf.ext"
openssl pkcs8 -topk8 -nocrypt -in cec8.key -out cec8.p8 && mv cec8.p8 cec8.key
# An intermediate CA; the S3 gateway's certificate (ECDSA, v1) is issued by it and the gateway
# sends only its leaf, so a client must find the intermediate in its CA file. Our client
# certificate `cint` is issued by it too, its file holding the leaf and the intermediate.
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' > int.ext
openssl req -newkey rsa:2048 -nodes -keyout int.key -out int.csr -subj "/CN=test-intermediate"
openssl x509 -req -in int.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out int.crt -days 3650 -extfile int.ext
ec s3 seaweedfs-s3 int
v1 cint lifecycled-int int
cat int.crt >> cint.crt
# Key sizes and curves weed accepts and ring does not (docs/tls.md#key-sizes-and-curves): an
# RSA key of 1024 bits (PKCS#1, as old recipes' `openssl genrsa 1024` make it) and ECDSA P-521;
# and two forms ring does take: P-384 with the EC PARAMETERS block `ecparam -genkey` writes
# without -noout, and Ed25519.
openssl genrsa -traditional -out c1024.key 1024
openssl req -new -key c1024.key -subj "/CN=lifecycled-rsa1024" -out c1024.csr
openssl x509 -req -in c1024.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out c1024.crt -days 365
p521() { # name CN ca extfile-args
  openssl ecparam -name secp521r1 -genkey -noout -out $1.key
  openssl req -new -key $1.key -subj "/CN=$2" -out $1.csr
  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -out $1.crt -days 365 $4
}
p521 c521 lifecycled-p521 ca
openssl ecparam -name secp384r1 -genkey -out c384.key
openssl req -new -key c384.key -subj "/CN=lifecycled-p384" -out c384.csr
openssl x509 -req -in c384.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out c384.crt -days 365
openssl genpkey -algorithm ed25519 -out ced.key
openssl req -new -key ced.key -subj "/CN=lifecycled-ed25519" -out ced.csr
openssl x509 -req -in ced.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out ced.crt -days 365
# The master's certificate is P-521, issued by an intermediate with a 1024-bit RSA key.
openssl genrsa -traditional -out int1024.key 1024
openssl req -new -key int1024.key -subj "/CN=test-intermediate-rsa1024" -out int1024.csr
openssl x509 -req -in int1024.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out int1024.crt -days 3650 -extfile int.ext
p521 master seaweedfs-master int1024 "-extfile leaf.ext"
# From here on the CA file is a bundle: the intermediates, then the root (root.crt alone).
cp ca.crt root.crt
cat int.crt int1024.crt root.crt > ca.crt
"#;

/// The mTLS cluster and where its certificates are.
pub struct TlsCluster {
    /// The cluster (its gRPC ports require mTLS; S3 and filer HTTP stay plain).
    pub cluster: Cluster,
    /// The certificates (`ca.crt`, `client.crt`/`.key`, `client2`, `foreign`, `expired`,
    /// `ca2.crt`, and the client matrix: `cv1`, `cv1rsa1`, `csan`, `cec`, `cec8`, `cint`, `c1024`,
    /// `c521`, `c384`, `ced`).
    pub certs: PathBuf,
    /// The cluster's `security.toml` (as an operator has it).
    pub security_toml: PathBuf,
}

impl TlsCluster {
    /// A certificate file by name, e.g. `cert("client.crt")`.
    pub fn cert(&self, name: &str) -> String {
        self.certs.join(name).display().to_string()
    }
}

/// The `security.toml` weed reads: `[grpc] ca`, each role's certificate (`<name>.crt`/`.key`
/// for master, volume, filer, S3, in that order), weed's own client certificate, then `extra`.
fn security_toml(certs: &Path, roles: [&str; 4], extra: &str) -> String {
    let p = |n: &str| certs.join(n).display().to_string();
    let pair = |n: &str| {
        format!(
            "cert = \"{}\"\nkey = \"{}\"\n",
            p(&format!("{n}.crt")),
            p(&format!("{n}.key"))
        )
    };
    let [master, server, filer, s3] = roles.map(pair);
    format!(
        "[grpc]\nca = \"{}\"\n\n[grpc.master]\n{master}\n[grpc.volume]\n{server}\n[grpc.filer]\n{filer}\n\
         [grpc.s3]\n{s3}\n[grpc.client]\ncert = \"{}\"\nkey = \"{}\"\n{extra}",
        p("ca.crt"),
        p("client.crt"),
        p("client.key"),
    )
}

/// Runs `script` in `<data_dir>/certs` and writes the `security.toml` that `toml` makes of
/// that folder where weed reads it first, its working directory (docs/tls.md).
fn setup(data_dir: &Path, script: &str, toml: impl Fn(&Path) -> String) -> std::io::Result<()> {
    let certs = data_dir.join("certs");
    std::fs::create_dir_all(&certs)?;
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&certs)
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "making certificates with openssl failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::write(data_dir.join("security.toml"), toml(&certs))
}

/// Starts a cluster whose certificates `script` makes and whose `security.toml` `toml` writes,
/// with weed's own gRPC ports (HTTP + 10000) when `weed_ports`.
fn start(
    script: &'static str,
    toml: fn(&Path) -> String,
    weed_ports: bool,
) -> Result<TlsCluster, String> {
    let prepare = |dir: &Path| setup(dir, script, toml);
    let cluster = if weed_ports {
        start_weed_defaults_using(&prepare)?
    } else {
        start_with_retries_using(&prepare)?
    };
    let certs = cluster.data_dir.join("certs");
    let security_toml = cluster.data_dir.join("security.toml");
    Ok(TlsCluster {
        cluster,
        certs,
        security_toml,
    })
}

/// The certificates of [`tls12_cluster`]: every server's and ours ECDSA P-521, by the plain
/// recipe (X.509 v1: `openssl x509 -req` without `-extfile`).
const GEN12: &str = r#"set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=test-ca-12"
p521() { # name CN
  openssl ecparam -name secp521r1 -genkey -noout -out $1.key
  openssl req -new -key $1.key -subj "/CN=$2" -out $1.csr
  openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $1.crt -days 365
}
p521 server seaweedfs-node
p521 client lifecycled
"#;

/// The certificates of [`one_certificate_cluster`] (docs/tls.md#ca-as-leaf): `ca.crt` is one
/// self-signed `openssl req -x509` certificate, which openssl 3 (and 1.1) makes a CA
/// (basicConstraints `CA:TRUE`), and it is the master's, the volume server's, the filer's and weed's
/// own client certificate too (`client` is a copy). The S3 gateway's and our second client
/// certificate (`creq`) are made by `openssl req -x509 -CA` (openssl 3's one-step issue), which
/// makes them CAs too.
const GEN_ONE: &str = r#"set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=seaweedfs"
cp ca.crt client.crt && cp ca.key client.key
openssl req -x509 -CA ca.crt -CAkey ca.key -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout s3.key -out s3.crt -days 365 -subj "/CN=seaweedfs-s3"
openssl req -x509 -CA ca.crt -CAkey ca.key -newkey rsa:2048 -nodes \
  -keyout creq.key -out creq.crt -days 365 -subj "/CN=lifecycled"
"#;

/// The certificates of [`https_volume_cluster`]: a CA, and the volume server's HTTPS
/// certificate with the address it is reached at in its subjectAltName, which Go's HTTPS
/// clients (the filer's, the gateway's) check.
const GEN_HTTPS: &str = r#"set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=test-https-ca"
openssl req -newkey rsa:2048 -nodes -keyout volume.key -out volume.csr -subj "/CN=127.0.0.1"
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > san.ext
openssl x509 -req -in volume.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out volume.crt -days 365 -extfile san.ext
"#;

static TLS: OnceLock<Result<TlsCluster, String>> = OnceLock::new();
static HTTPS: OnceLock<Result<TlsCluster, String>> = OnceLock::new();
static TLS12: OnceLock<Result<TlsCluster, String>> = OnceLock::new();
static ONE: OnceLock<Result<TlsCluster, String>> = OnceLock::new();

/// The signing keys of [`tls_cluster`]'s `security.toml`, as weed's scaffold has them: its
/// volume servers refuse a write or a read without a token signed by them
/// (docs/meta-log.md#read-tokens).
pub const JWT_KEYS: &str = "\n[jwt.signing]\nkey = \"lifecycle-test-write\"\n\
    [jwt.signing.read]\nkey = \"lifecycle-test-read\"\nexpires_after_seconds = 30\n";

/// The binary's one mTLS cluster, started on first use. Its volume servers also ask for
/// read and write tokens ([`JWT_KEYS`]).
pub fn tls_cluster() -> &'static TlsCluster {
    let toml = |certs: &Path| security_toml(certs, ["master", "server", "filer", "s3"], JWT_KEYS);
    match TLS.get_or_init(|| start(GEN, toml, false)) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS mTLS test cluster unavailable: {e}"),
    }
}

/// A second mTLS cluster, started on first use, as an operator pins it to TLS 1.2 (`[tls]
/// max_version` in `security.toml`, which every weed server applies), with ECDSA P-521
/// certificates throughout (docs/tls.md#key-sizes-and-curves), and weed's own gRPC ports (each
/// HTTP port + 10000, no `-*.port.grpc` flag). Its certificates: `ca.crt`, `server`, `client`.
pub fn tls12_cluster() -> &'static TlsCluster {
    let toml = |certs: &Path| {
        let roles = ["server"; 4];
        security_toml(certs, roles, "\n[tls]\nmax_version = \"TLS 1.2\"\n")
    };
    match TLS12.get_or_init(|| start(GEN12, toml, true)) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS TLS 1.2 test cluster unavailable: {e}"),
    }
}

/// A third mTLS cluster, started on first use, set up the quick way: one self-signed certificate
/// ([`GEN_ONE`]) as the CA file and as the master's, volume server's and filer's certificate,
/// the S3 gateway's issued by it with `openssl req -x509 -CA`. Every one of them is a CA.
pub fn one_certificate_cluster() -> &'static TlsCluster {
    let toml = |certs: &Path| security_toml(certs, ["ca", "ca", "ca", "s3"], "");
    match ONE.get_or_init(|| start(GEN_ONE, toml, false)) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS one-certificate mTLS test cluster unavailable: {e}"),
    }
}

/// A cluster whose volume servers serve HTTPS (`[https.volume]`) and whose servers reach
/// them with `[https.client]` (docs/meta-log.md#https-volume-servers); gRPC is plaintext.
/// Started on first use, only by the test of reads from such volume servers.
pub fn https_volume_cluster() -> &'static TlsCluster {
    let toml = |certs: &Path| {
        let p = |n: &str| certs.join(n).display().to_string();
        format!(
            "[https.client]\nenabled = true\nca = \"{}\"\n\n[https.volume]\ncert = \"{}\"\nkey = \"{}\"\n",
            p("ca.crt"),
            p("volume.crt"),
            p("volume.key")
        )
    };
    match HTTPS.get_or_init(|| start(GEN_HTTPS, toml, false)) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS HTTPS-volume test cluster unavailable: {e}"),
    }
}

/// Stores a lifecycle document with a raw S3 PUT (the S3 HTTP port is plain; the filer gRPC
/// check of `put_lifecycle_xml` would need TLS).
pub async fn put_lifecycle_plain(c: &Cluster, bucket: &str, xml: &[u8]) {
    let md5 = super::s3::content_md5(xml);
    let addr = c.s3_addr();
    let path = format!("/{bucket}?lifecycle=");
    let body = xml.to_vec();
    let resp = tokio::task::spawn_blocking(move || {
        http::request(
            addr,
            "PUT",
            &path,
            &[
                ("Content-MD5", md5.as_str()),
                ("Content-Type", "application/xml"),
            ],
            &body,
        )
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("PUT /{bucket}?lifecycle=: {e}"));
    assert_eq!(resp.status / 100, 2, "PUT lifecycle: {}", resp.text());
}
