//! gRPC client TLS the way SeaweedFS clusters use it (docs/tls.md): mutual
//! TLS, the server's chain verified against the operator's CA, the host name
//! checked only when `tls.server_name` is set (SeaweedFS certificates are
//! often CN-only and SeaweedFS itself never checks names), and the
//! certificate files re-read when they change so a rotation needs no restart.
//!
//! [`ClientTls`] is plugged into [`crate::seaweed::endpoint::EndpointOptions`];
//! every gRPC client built from those options dials through [`ClientTls`]'s
//! connector. Handshake failures are classified into a [`TlsFailure`] that
//! the CLI turns into a message naming the cause and its own exit code.
//! The same client, loaded for [`TlsUse::AdminHttps`], speaks HTTP/1.1 to
//! `weed admin`'s HTTPS API, and its messages name `[https.client]`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use hyper_util::rt::TokioIo;
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::seaweed::tls_failure::{TlsFailure, TlsUse};
use crate::seaweed::tls_verify::{ChainVerifier, OwnCertificate};

/// Where the TLS material is: the `[tls]` settings or what `--security-toml`
/// resolved to. Paths are re-read at every dial and every
/// [`ClientTls::refresh`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA bundle (PEM, several certificates may be concatenated).
    pub ca: PathBuf,
    /// Client certificate chain (PEM); `None`: present none.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// Host name the server certificate must carry; `None`: chain only.
    pub server_name: Option<String>,
}

/// TLS material that cannot be used. Maps to exit code 2 at start-up.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A file cannot be read.
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        /// The setting naming the file, e.g. `tls.ca`.
        key: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A file does not hold what it should.
    #[error("{key}: {path}: {reason}")]
    Content {
        key: &'static str,
        path: PathBuf,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// Certificate and key rejected together, or another rustls refusal.
    #[error("{0}")]
    Other(String),
}

/// The certificates as last loaded: the rustls configuration and a digest of
/// the files' contents to notice a change.
struct Loaded {
    digest: u64,
    config: Arc<ClientConfig>,
    /// The CA bundle and our certificate chain, to check our own
    /// certificate when a server refuses it.
    roots: Arc<RootCertStore>,
    /// The CA bundle's certificates as read, for chains webpki cannot
    /// verify ([`crate::seaweed::x509`]).
    anchors: Arc<Vec<CertificateDer<'static>>>,
    chain: Vec<CertificateDer<'static>>,
}

struct Inner {
    files: TlsFiles,
    used_for: TlsUse,
    loaded: Mutex<Loaded>,
    /// Bumped when the files change; connections of an older generation are
    /// closed at the next [`ClientTls::refresh`] so the next call redials
    /// with the new certificates.
    generation: AtomicU64,
    /// The generation the last [`ClientTls::refresh`] closed the older
    /// connections for. A dial between a rotation and the next refresh
    /// reloads the files itself; the refresh still sees the rotation by
    /// this, so it says so and closes the old connections.
    refreshed: AtomicU64,
    /// Wakers of live connections, to close them on rotation.
    conns: Mutex<Vec<Weak<ConnState>>>,
}

/// Client TLS shared by every gRPC client of a process. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls(Arc<Inner>);

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("files", &self.0.files)
            .finish()
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, other: &ClientTls) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for ClientTls {}

/// *ring*, with the signature checks widened to what weed accepts
/// ([`crate::seaweed::tls_legacy`]).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        signature_verification_algorithms: crate::seaweed::tls_legacy::algorithms(),
        ..rustls::crypto::ring::default_provider()
    })
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })
}

fn content(key: &'static str, path: &Path, reason: impl Into<String>) -> TlsConfigError {
    let (path, reason) = (path.to_path_buf(), reason.into());
    TlsConfigError::Content { key, path, reason }
}

const NO_PEM: &str = "holds no PEM certificate (-----BEGIN CERTIFICATE-----)";

/// Reads the files and builds the rustls configuration; the digest covers
/// every byte read.
fn load(files: &TlsFiles, used_for: TlsUse) -> Result<Loaded, TlsConfigError> {
    let (ca_key, cert_key, key_key) = used_for.keys();
    let mut h = DefaultHasher::new();
    let ca_pem = read(ca_key, &files.ca)?;
    ca_pem.hash(&mut h);
    let mut roots = RootCertStore::empty();
    let mut anchors = Vec::new();
    for c in CertificateDer::pem_slice_iter(&ca_pem) {
        let c = c.map_err(|e| {
            content(
                ca_key,
                &files.ca,
                format!("not a PEM certificate bundle ({e})"),
            )
        })?;
        anchors.push(c.clone());
        roots.add(c).map_err(|e| {
            content(
                ca_key,
                &files.ca,
                format!("not a usable CA certificate ({e})"),
            )
        })?;
    }
    if anchors.is_empty() {
        return Err(content(ca_key, &files.ca, NO_PEM));
    }
    let roots = Arc::new(roots);
    let anchors = Arc::new(anchors);
    let mut own_chain = Vec::new();
    let verifier = Arc::new(ChainVerifier {
        roots: roots.clone(),
        anchors: anchors.clone(),
        // A volume server's HTTPS certificate must name the host it is
        // dialled at, as weed's Go HTTP clients check it; each server has its
        // own, so it is the host of each dial (docs/meta-log.md#https-volume-servers).
        check_name: files.server_name.is_some() || used_for == TlsUse::VolumeHttps,
        provider: provider(),
    });
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError::Other(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => {
            let cert_pem = read(cert_key, cert)?;
            let key_pem = read(key_key, key)?;
            cert_pem.hash(&mut h);
            key_pem.hash(&mut h);
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    content(cert_key, cert, format!("not a PEM certificate chain ({e})"))
                })?;
            if chain.is_empty() {
                return Err(content(cert_key, cert, NO_PEM));
            }
            let pk = PrivateKeyDer::from_pem_slice(&key_pem)
                .map_err(|e| content(key_key, key, format!("holds no PEM private key ({e})")))?;
            own_chain.clone_from(&chain);
            // *ring* first; an RSA key under 2048 bits or a P-521 key, which weed takes and
            // *ring* does not, is signed with by tls_legacy.
            let legacy = crate::seaweed::tls_legacy::signing_key(&pk);
            let signing = match (provider().key_provider.load_private_key(pk), legacy) {
                (Ok(k), _) | (Err(_), Some(k)) => k,
                (Err(e), None) => {
                    return Err(content(
                        key_key,
                        key,
                        format!("not a usable private key ({e})"),
                    ));
                }
            };
            // rustls's own pairing check parses the certificate with webpki,
            // which refuses X.509 v1; compare the public keys instead.
            let cert_spki = crate::seaweed::x509::spki(&chain[0]).ok_or_else(|| {
                content(
                    cert_key,
                    cert,
                    "the first certificate does not parse as X.509",
                )
            })?;
            if let Some(key_spki) = signing.public_key()
                && key_spki.as_ref() != cert_spki
            {
                let (cert, key) = (cert.display(), key.display());
                return Err(TlsConfigError::Other(format!(
                    "{cert_key} {cert} and {key_key} {key} do not go together: \
                     the key is not the certificate's; compare `openssl x509 -noout -pubkey -in {cert}` \
                     with `openssl pkey -pubout -in {key}`"
                )));
            }
            let certified = Arc::new(rustls::sign::CertifiedKey::new(chain, signing));
            builder.with_client_cert_resolver(Arc::new(OwnCertificate(certified)))
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(TlsConfigError::Other(format!(
                "{cert_key} and {key_key} must be set together"
            )));
        }
    };
    // SeaweedFS's gRPC servers negotiate HTTP/2 through ALPN, weed admin's
    // HTTPS API would too if it were offered.
    config.alpn_protocols = used_for.protocols();
    Ok(Loaded {
        digest: h.finish(),
        config: Arc::new(config),
        roots,
        anchors,
        chain: own_chain,
    })
}

impl ClientTls {
    /// Loads and checks the files now, so bad material is a start-up error.
    pub fn load(files: TlsFiles) -> Result<ClientTls, TlsConfigError> {
        ClientTls::load_for(files, TlsUse::Grpc)
    }

    /// [`ClientTls::load`] for connections `used_for` weed admin's HTTPS API
    /// or gRPC: the ALPN protocol and the settings its messages name.
    pub fn load_for(files: TlsFiles, used_for: TlsUse) -> Result<ClientTls, TlsConfigError> {
        let loaded = load(&files, used_for)?;
        Ok(ClientTls(Arc::new(Inner {
            files,
            used_for,
            loaded: Mutex::new(loaded),
            generation: AtomicU64::new(0),
            refreshed: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
        })))
    }

    /// Re-reads the files; when their contents changed, builds the new
    /// configuration and bumps the generation. A file that does not load (a
    /// rotation half written) keeps the previous one, with a warning.
    fn reload(&self) {
        match load(&self.0.files, self.0.used_for) {
            Ok(new) => {
                let mut cur = self.0.loaded.lock().unwrap_or_else(|p| p.into_inner());
                if cur.digest != new.digest {
                    *cur = new;
                    self.0.generation.fetch_add(1, Ordering::SeqCst);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS files changed but do not load; keeping the previous certificates");
            }
        }
    }

    /// Called before every pass: when the certificate files changed, loads
    /// them and closes the connections made with the old ones, so the pass
    /// dials with the new (rotation without restart, docs/tls.md#rotation).
    /// Waits up to 2 s for those connections to close.
    pub async fn refresh(&self) -> bool {
        self.reload();
        let current = self.0.generation.load(Ordering::SeqCst);
        if self.0.refreshed.swap(current, Ordering::SeqCst) == current {
            return false;
        }
        tracing::info!(files = ?self.0.files, "TLS certificates changed: reconnecting with the new ones");
        let old = |conns: &mut Vec<Weak<ConnState>>| {
            conns.retain(|w| w.strong_count() > 0);
            conns
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|c| c.generation < current)
                .collect::<Vec<_>>()
        };
        let stale = old(&mut self.0.conns.lock().unwrap_or_else(|p| p.into_inner()));
        for c in &stale {
            c.waker.wake();
        }
        drop(stale);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline {
            if old(&mut self.0.conns.lock().unwrap_or_else(|p| p.into_inner())).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Works out why `addr` refuses us, deterministically: a TLS 1.3 server
    /// reports a refused client certificate only after the handshake, so a
    /// failed call may show nothing but "connection closed"
    /// (docs/tls.md#how-failures-surface). Dials once, reads the server's
    /// first bytes (an alert, or its HTTP/2 settings when all is well), and
    /// checks our own certificate locally, because SeaweedFS answers an
    /// expired client certificate and one from a foreign CA with the same
    /// `BadCertificate` alert. `None`: the handshake succeeds.
    pub async fn diagnose(&self, addr: &str) -> Option<TlsFailure> {
        let (host, port) = host_port(addr)?;
        let own = self.check_own_certificate();
        let attempt = async {
            let mut io = match self.dial(&host, port).await {
                Ok(io) => io,
                // Anything but a handshake failure (nothing listening) is
                // not a TLS matter.
                Err(e) => return HandshakeError::find(&e).map(|h| h.failure.clone()),
            };
            let mut byte = [0u8; 1];
            match tokio::io::AsyncReadExt::read(&mut *io.stream, &mut byte).await {
                Ok(n) if n > 0 => None,
                Ok(_) => Some(TlsFailure::Other(
                    "the server closed the connection right after the handshake".into(),
                )),
                Err(e) => Some(
                    TlsFailure::from_io(&e).unwrap_or_else(|| TlsFailure::Other(e.to_string())),
                ),
            }
        };
        let found = tokio::time::timeout(Duration::from_secs(5), attempt)
            .await
            .unwrap_or(None)?;
        // The server refused our certificate: our own check says why.
        if let TlsFailure::ClientCertificate(_) = found
            && let Some(own) = own
        {
            return Some(own);
        }
        Some(found)
    }

    /// Our client certificate checked against our own CA bundle and the
    /// clock: expired, or not issued by that CA. `None` when it is fine or
    /// there is none.
    fn check_own_certificate(&self) -> Option<TlsFailure> {
        let (roots, anchors, chain) = {
            let cur = self.0.loaded.lock().unwrap_or_else(|p| p.into_inner());
            (cur.roots.clone(), cur.anchors.clone(), cur.chain.clone())
        };
        let (leaf, intermediates) = chain.split_first()?;
        let path = self
            .0
            .files
            .cert
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let verdict = if crate::seaweed::x509::webpki_refuses_as_leaf(leaf) {
            crate::seaweed::x509::verify_chain(
                leaf,
                intermediates,
                &anchors,
                UnixTime::now(),
                &provider().signature_verification_algorithms,
                crate::seaweed::x509::Usage::Client,
            )
        } else {
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .ok()?
                .verify_client_cert(leaf, intermediates, UnixTime::now())
                .map(|_| ())
        };
        match verdict {
            Ok(()) => None,
            Err(e) => match TlsFailure::from_rustls(&e) {
                TlsFailure::Expired(d) => Some(TlsFailure::Expired(format!(
                    "our client certificate {path}: {d}"
                ))),
                TlsFailure::UnknownCa(d) => Some(TlsFailure::UnknownCa(format!(
                    "our client certificate {path} is not issued by {}: {d}",
                    self.0.used_for.keys().0
                ))),
                _ => None,
            },
        }
    }

    /// The configuration to dial with: the files are re-read (they are
    /// small) so a connection made after a rotation uses the new ones.
    fn config(&self) -> (Arc<ClientConfig>, u64) {
        self.reload();
        let cur = self.0.loaded.lock().unwrap_or_else(|p| p.into_inner());
        (cur.config.clone(), self.0.generation.load(Ordering::SeqCst))
    }

    /// Opens a TCP connection to `host:port` and runs the TLS handshake.
    pub(crate) async fn dial(&self, host: &str, port: u16) -> io::Result<TlsIo> {
        let tcp = TcpStream::connect((host, port)).await?;
        tcp.set_nodelay(true)?;
        let (config, generation) = self.config();
        let name = self.0.files.server_name.as_deref().unwrap_or(host);
        let server_name =
            ServerName::try_from(name.trim_matches(['[', ']']).to_string()).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{name:?} is not a TLS server name: {e}"),
                )
            })?;
        let stream = match TlsConnector::from(config).connect(server_name, tcp).await {
            Ok(s) => s,
            Err(e) => {
                return Err(match TlsFailure::from_io(&e) {
                    Some(failure) => {
                        let message =
                            failure.message_for(&format!("{host}:{port}"), self.0.used_for);
                        io::Error::new(e.kind(), HandshakeError { failure, message })
                    }
                    None => e,
                });
            }
        };
        let state = Arc::new(ConnState {
            generation,
            waker: AtomicWaker::new(),
        });
        self.0
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&state));
        Ok(TlsIo {
            stream: Box::new(stream),
            tls: self.clone(),
            state,
        })
    }

    /// The tower connector tonic dials through (`Endpoint::connect_with_connector`).
    pub(crate) fn connector(
        &self,
    ) -> impl tower::Service<
        tonic::transport::Uri,
        Response = TokioIo<TlsIo>,
        Error = io::Error,
        Future = futures::future::BoxFuture<'static, io::Result<TokioIo<TlsIo>>>,
    > + Clone
    + Send
    + 'static {
        let tls = self.clone();
        tower::service_fn(move |uri: tonic::transport::Uri| {
            let tls = tls.clone();
            futures::FutureExt::boxed(async move {
                let host = uri.host().unwrap_or_default().to_string();
                let port = uri.port_u16().unwrap_or(443);
                tls.dial(&host, port).await.map(TokioIo::new)
            })
        })
    }
}

/// A TLS failure inside the `io::Error` of the connection it broke, so the
/// cause travels with the error instead of beside it. The message is the
/// error's text: what tonic and hyper print when they keep only that.
#[derive(Debug)]
pub struct HandshakeError {
    pub failure: TlsFailure,
    message: String,
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HandshakeError {}

impl HandshakeError {
    /// An alert the server sends after the handshake (TLS 1.3 refuses a
    /// client certificate on the first read): typed the same way.
    pub(crate) fn late(e: io::Error) -> io::Error {
        tracing::debug!(error = %e, kind = ?e.kind(), "TLS read or write failed");
        match TlsFailure::from_io(&e) {
            Some(failure) => {
                let message = e.to_string();
                io::Error::new(e.kind(), HandshakeError { failure, message })
            }
            None => e,
        }
    }

    /// The TLS failure an error carries anywhere down its source chain
    /// (`io::Error` hides its payload from `source()`, so each is opened).
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a HandshakeError> {
        let mut next = Some(e);
        while let Some(e) = next {
            let inner = e
                .downcast_ref::<io::Error>()
                .and_then(io::Error::get_ref)
                .map(|i| i as &(dyn std::error::Error + 'static));
            if let Some(h) = [Some(e), inner]
                .into_iter()
                .flatten()
                .find_map(|e| e.downcast_ref::<HandshakeError>())
            {
                return Some(h);
            }
            next = e.source();
        }
        None
    }
}

struct ConnState {
    generation: u64,
    waker: AtomicWaker,
}

/// One TLS connection. Records a handshake failure the server reports late
/// (TLS 1.3 sends a refused client certificate's alert after the client has
/// finished, so it arrives on the first read), and ends itself when the
/// certificates were rotated so tonic redials.
pub struct TlsIo {
    stream: Box<tokio_rustls::client::TlsStream<TcpStream>>,
    tls: ClientTls,
    state: Arc<ConnState>,
}

impl TlsIo {
    fn rotated(&self) -> bool {
        self.tls.0.generation.load(Ordering::SeqCst) > self.state.generation
    }
}

fn rotated_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "TLS certificates rotated; closing this connection to redial with the new ones",
    )
}

impl AsyncRead for TlsIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.state.waker.register(cx.waker());
        if self.rotated() {
            return Poll::Ready(Err(rotated_error()));
        }
        Pin::new(&mut *self.stream)
            .poll_read(cx, buf)
            .map_err(HandshakeError::late)
    }
}

impl AsyncWrite for TlsIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.rotated() {
            return Poll::Ready(Err(rotated_error()));
        }
        Pin::new(&mut *self.stream)
            .poll_write(cx, buf)
            .map_err(HandshakeError::late)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.stream).poll_shutdown(cx)
    }
}

/// `host:port` or `http://host:port/` split into host (brackets of an IPv6
/// literal removed) and port.
pub(crate) fn host_port(addr: &str) -> Option<(String, u16)> {
    let hostport = addr
        .split_once("://")
        .map_or(addr, |(_, rest)| rest)
        .trim_end_matches('/');
    let (host, port) = hostport.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    Some((host.trim_matches(['[', ']']).to_string(), port))
}

/// Whether TLS is why a call to `addr` failed: with TLS configured, the
/// handshake's failure ([`ClientTls::diagnose`]); without, whether `addr`
/// answers TLS, which a plaintext client only sees as "connection closed"
/// (docs/tls.md#how-failures-surface). `None`: TLS is not the cause.
pub async fn tls_cause(tls: Option<&ClientTls>, addr: &str) -> Option<TlsFailure> {
    match tls {
        Some(t) => t.diagnose(addr).await,
        None => speaks_tls(addr).await.then_some(TlsFailure::Required),
    }
}

/// The first of `addrs` whose failure TLS explains, with that cause.
pub async fn first_tls_cause(
    tls: Option<&ClientTls>,
    addrs: &[&str],
) -> Option<(String, TlsFailure)> {
    for a in addrs {
        if let Some(f) = tls_cause(tls, a).await {
            return Some((a.to_string(), f));
        }
    }
    None
}

/// Whether the server at `addr` (`host:port`, optionally `http://`) answers
/// a TLS handshake. A plaintext gRPC client against a TLS port only sees
/// "connection closed" (docs/tls.md#observed); this probe turns that into
/// "requires TLS". `false` when the peer is unreachable or speaks something
/// else.
pub async fn speaks_tls(addr: &str) -> bool {
    let Some((host, port)) = host_port(addr) else {
        return false;
    };
    let probe = async {
        let tcp = TcpStream::connect((host.as_str(), port)).await.ok()?;
        // No CA at all: whatever certificate the peer sends is refused, and
        // sending one is the answer (no verifier that accepts anything).
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = ServerName::try_from(host.clone()).ok()?;
        Some(
            match TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
            {
                Ok(_) => true,
                // The peer sent TLS records (an alert, a certificate): it is TLS.
                Err(e) => matches!(
                    e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
                    Some(
                        rustls::Error::AlertReceived(_)
                            | rustls::Error::InvalidCertificate(_)
                            | rustls::Error::PeerIncompatible(_)
                            | rustls::Error::NoCertificatesPresented
                    )
                ),
            },
        )
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), probe).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{AlertDescription, CertificateError};

    #[test]
    fn failures_are_classified_by_cause() {
        use rustls::Error as E;
        assert!(matches!(
            TlsFailure::from_rustls(&E::InvalidCertificate(CertificateError::UnknownIssuer)),
            TlsFailure::UnknownCa(_)
        ));
        assert!(matches!(
            TlsFailure::from_rustls(&E::InvalidCertificate(CertificateError::Expired)),
            TlsFailure::Expired(_)
        ));
        assert!(matches!(
            TlsFailure::from_rustls(&E::AlertReceived(AlertDescription::CertificateRequired)),
            TlsFailure::ClientCertificate(_)
        ));
        assert!(matches!(
            TlsFailure::from_rustls(&E::AlertReceived(AlertDescription::BadCertificate)),
            TlsFailure::ClientCertificate(_)
        ));
        assert!(matches!(
            TlsFailure::from_rustls(&E::AlertReceived(AlertDescription::CertificateExpired)),
            TlsFailure::Expired(_)
        ));
        assert!(matches!(
            TlsFailure::from_rustls(&E::InvalidCertificate(CertificateError::NotValidForName)),
            TlsFailure::NameMismatch(_)
        ));
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            E::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert!(matches!(
            TlsFailure::from_io(&io),
            Some(TlsFailure::UnknownCa(_))
        ));
        assert_eq!(TlsFailure::from_io(&io::Error::other("x")), None);
    }

    #[test]
    fn required_message_names_the_fix() {
        let m = TlsFailure::Required.message("127.0.0.1:18888");
        assert!(
            m.contains("requires TLS: set tls.* or --security-toml"),
            "{m}"
        );
        assert!(m.contains("127.0.0.1:18888"), "{m}");
    }

    /// A self-signed CA made the way an operator's tooling makes one.
    fn openssl_ca(dir: &Path, name: &str) -> std::path::PathBuf {
        let (key, crt) = (
            dir.join(format!("{name}.key")),
            dir.join(format!("{name}.crt")),
        );
        let ok = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .output()
            .expect("openssl on PATH")
            .status
            .success();
        assert!(ok, "openssl req -x509 failed");
        crt
    }

    /// A connection dialed between a rotation and the next pass's refresh
    /// reloaded the files itself: the refresh then saw nothing new, said
    /// nothing, and left the connections made with the old certificates open.
    #[tokio::test]
    async fn a_rotation_a_dial_reloaded_first_went_unsaid_and_kept_old_connections() {
        let dir = std::env::temp_dir().join(format!("tls-rot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.crt");
        std::fs::copy(openssl_ca(&dir, "one"), &ca).unwrap();
        let tls = ClientTls::load(TlsFiles {
            ca: ca.clone(),
            ..TlsFiles::default()
        })
        .unwrap();
        assert!(!tls.refresh().await, "nothing changed yet");
        std::fs::copy(openssl_ca(&dir, "two"), &ca).unwrap();
        // What a dial does before its handshake.
        let (_, generation) = tls.config();
        assert_eq!(generation, 1);
        assert!(tls.refresh().await, "the refresh still sees the rotation");
        assert!(!tls.refresh().await, "and only once");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A rotation caught half-written (the new certificate on disk, the old
    /// key not yet replaced, as a tool that writes one file after the other
    /// leaves them): the refresh keeps the previous pair, which still works,
    /// instead of dialling with a pair that does not go together; once the
    /// key follows, the next refresh takes the new pair.
    #[tokio::test]
    async fn a_rotation_caught_half_written_keeps_the_previous_pair() {
        let dir = std::env::temp_dir().join(format!("tls-half-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, cert, key) = (
            dir.join("ca.crt"),
            dir.join("client.crt"),
            dir.join("client.key"),
        );
        std::fs::copy(openssl_ca(&dir, "one"), &cert).unwrap();
        std::fs::copy(dir.join("one.key"), &key).unwrap();
        std::fs::copy(&cert, &ca).unwrap();
        let tls = ClientTls::load(TlsFiles {
            ca: ca.clone(),
            cert: Some(cert.clone()),
            key: Some(key.clone()),
            server_name: None,
        })
        .unwrap();
        std::fs::copy(openssl_ca(&dir, "two"), &cert).unwrap();
        assert!(
            !tls.refresh().await,
            "a certificate without its key is no rotation"
        );
        let (_, generation) = tls.config();
        assert_eq!(generation, 0, "the previous pair stays in use");
        std::fs::copy(dir.join("two.key"), &key).unwrap();
        assert!(tls.refresh().await, "the whole new pair is a rotation");
        assert_eq!(tls.config().1, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_or_bad_files_name_the_key_and_path() {
        let dir = std::env::temp_dir().join(format!("tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = TlsFiles {
            ca: dir.join("nope.crt"),
            ..TlsFiles::default()
        };
        let e = ClientTls::load(missing).unwrap_err().to_string();
        assert!(e.contains("tls.ca") && e.contains("nope.crt"), "{e}");
        let junk = dir.join("junk.crt");
        std::fs::write(&junk, "not pem").unwrap();
        let e = ClientTls::load(TlsFiles {
            ca: junk.clone(),
            ..TlsFiles::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tls.ca") && e.contains("no PEM certificate"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_https_failures_named_the_grpc_settings() {
        // The HTTPS check's material comes from [https.client]; its messages
        // once told the operator to fix tls.ca and [grpc] ca instead. The
        // volume servers' HTTPS takes the same material.
        for (f, used_for) in [
            TlsFailure::UnknownCa("x".into()),
            TlsFailure::ClientCertificate("x".into()),
            TlsFailure::NameMismatch("x".into()),
            TlsFailure::Required,
        ]
        .into_iter()
        .flat_map(|f| [(f.clone(), TlsUse::AdminHttps), (f, TlsUse::VolumeHttps)])
        {
            let m = f.message_for("127.0.0.1:23646", used_for);
            assert!(
                m.contains("[https.client]")
                    || m.contains("weed_admin.address")
                    || m.contains("[https.volume]"),
                "{m}"
            );
            assert_eq!(
                m.contains("weed admin"),
                used_for == TlsUse::AdminHttps,
                "{m}"
            );
            assert!(!m.contains("tls.") && !m.contains("[grpc"), "{m}");
            assert!(m.contains("127.0.0.1:23646"), "{m}");
        }
        let dir = std::env::temp_dir().join(format!("tls-https-{}", std::process::id()));
        let e = ClientTls::load_for(
            TlsFiles {
                ca: dir.join("nope.crt"),
                ..TlsFiles::default()
            },
            TlsUse::AdminHttps,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("[https.client] ca: ") && e.contains("nope.crt"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_not_tls() {
        assert!(!speaks_tls("127.0.0.1:1").await);
        assert!(!speaks_tls("no-port").await);
    }

    /// The cause is found in the error itself, however deep tonic and hyper
    /// wrap the connection's `io::Error`, and a plain I/O failure has none.
    #[test]
    fn handshake_cause_travels_inside_the_error() {
        #[derive(Debug)]
        struct Wrapper(io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let alert = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(AlertDescription::BadCertificate),
        );
        let late = HandshakeError::late(alert);
        assert!(late.to_string().contains("BadCertificate"), "{late}");
        let wrapped = Wrapper(late);
        assert!(matches!(
            HandshakeError::find(&wrapped).map(|h| &h.failure),
            Some(TlsFailure::ClientCertificate(_))
        ));
        let reset = HandshakeError::late(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(HandshakeError::find(&Wrapper(reset)).is_none());
    }
}
