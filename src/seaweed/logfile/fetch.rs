//! The volume-server fetcher of log files' chunks: volume lookups through
//! the filer, cached per volume, and HTTP/1 GETs on a kept-alive connection
//! per server, over HTTPS and with a read token where the cluster asks for
//! them ([`VolumeAccess`]).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tonic::transport::Channel;

use crate::engine::identity::head_fid;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{FileChunk, LogFileChunkRef, LookupVolumeRequest};
use crate::seaweed::tls::{ClientTls, HandshakeError, host_port};
use crate::seaweed::tls_failure::TlsFailure;
use crate::seaweed::volume_jwt::VolumeReadKey;

use super::format::{LogFileError, MAX_RECORD_BYTES, ref_name};

/// How long a volume server may take to accept a connection: one that is
/// not reachable from here (an address only the cluster's own network
/// routes) must hand the read to the filer quickly, not after the kernel's
/// minutes of SYN retries (docs/meta-log.md#when-a-file-cannot-be-read).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long one chunk (at most a flush of the filer's 8 MB buffer) may
/// take to arrive once asked for.
pub const CHUNK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How the volume servers of a cluster are read, as weed's own HTTP clients
/// read them (docs/meta-log.md#read-tokens, #https-volume-servers).
#[derive(Clone, Default)]
pub struct VolumeAccess {
    /// `[jwt.signing.read]`: each GET carries a token signed with it.
    pub read_key: Option<VolumeReadKey>,
    /// `[https.client]` of a cluster whose volume servers serve HTTPS.
    pub https: Option<ClientTls>,
}

impl std::fmt::Debug for VolumeAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeAccess")
            .field("read_key", &self.read_key)
            .field("https", &self.https.is_some())
            .finish()
    }
}

/// Reads log files' chunks from the volume servers: volume locations through
/// the filer's `LookupVolume` (cached per volume), then a GET of
/// `<url>/<fid>` on a kept-alive connection per server, as [`VolumeAccess`]
/// says.
pub struct LogFileFetcher {
    filer: SeaweedFilerClient<Channel>,
    access: VolumeAccess,
    locations: HashMap<String, Vec<String>>,
    connections: HashMap<String, SendRequest<Empty<Bytes>>>,
    /// Servers that answered a TLS handshake as plain HTTP servers do, and
    /// then a plain GET: read over plain HTTP from then on.
    plain: HashSet<String>,
    /// Bytes fetched so far.
    pub bytes_fetched: u64,
}

impl LogFileFetcher {
    /// A fetcher that looks volumes up through `filer`.
    pub fn new(filer: SeaweedFilerClient<Channel>) -> LogFileFetcher {
        LogFileFetcher {
            filer,
            access: VolumeAccess::default(),
            locations: HashMap::new(),
            connections: HashMap::new(),
            plain: HashSet::new(),
            bytes_fetched: 0,
        }
    }

    /// Reads as `access` says: without the token a volume server of a cluster
    /// that signs reads answers 401 to every read, and one that serves HTTPS
    /// refuses plain HTTP.
    pub fn with_access(mut self, access: VolumeAccess) -> LogFileFetcher {
        self.access = access;
        self
    }

    /// The bytes of one ref's file: its chunks in offset order, which must
    /// tile the file without holes or overlaps.
    pub async fn read_file(&mut self, r: &LogFileChunkRef) -> Result<Vec<u8>, LogFileError> {
        let file = ref_name(r);
        let mut chunks: Vec<&FileChunk> = r.chunks.iter().collect();
        chunks.sort_by_key(|c| c.offset);
        // Sizes come from the wire: reserve what they claim only up to a bound,
        // so a corrupt ref cannot ask for an absurd allocation up front.
        let claimed: u64 = chunks.iter().map(|c| c.size).sum();
        let mut out = Vec::with_capacity(claimed.min(u64::from(MAX_RECORD_BYTES)) as usize);
        for c in chunks {
            let data = self.read_chunk(&file, c, out.len() as u64).await?;
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// One chunk of `file`, which must start at byte `expected` (the end of
    /// the chunks before it), as plain bytes.
    pub async fn read_chunk(
        &mut self,
        file: &str,
        c: &FileChunk,
        expected: u64,
    ) -> Result<Bytes, LogFileError> {
        let fid = head_fid(c);
        let unsupported = |reason: &str| LogFileError::UnsupportedChunk {
            file: file.to_string(),
            fid: fid.clone(),
            reason: reason.to_string(),
        };
        let encrypted = !c.cipher_key.is_empty();
        if encrypted && c.is_compressed {
            return Err(unsupported(
                "is compressed, then encrypted (filer -encryptVolumeData); direct reads do not gunzip, use a plain SubscribeMetadata",
            ));
        }
        if c.is_chunk_manifest {
            return Err(unsupported(
                "is a chunk manifest; direct reads do not resolve manifests, use a plain SubscribeMetadata",
            ));
        }
        if u64::try_from(c.offset).ok() != Some(expected) {
            return Err(LogFileError::ChunkLayout {
                file: file.to_string(),
                fid,
                offset: c.offset,
                expected,
            });
        }
        let mut data = self.fetch(file, &fid).await?;
        if encrypted {
            data = decrypt(data, &c.cipher_key).map_err(|why| LogFileError::Fetch {
                file: file.to_string(),
                fid: fid.clone(),
                message: format!("cannot decrypt the chunk with its cipher key: {why}"),
            })?;
        }
        if data.len() as u64 != c.size {
            return Err(LogFileError::Fetch {
                file: file.to_string(),
                message: format!(
                    "got {} bytes, the chunk has {} (is_compressed {}); a volume server answered with something else",
                    data.len(),
                    c.size,
                    c.is_compressed
                ),
                fid,
            });
        }
        Ok(data)
    }

    /// One chunk's bytes from the first of its volume's servers that has it.
    async fn fetch(&mut self, file: &str, fid: &str) -> Result<Bytes, LogFileError> {
        let urls = self.locate(file, fid).await?;
        let mut failures = Vec::new();
        for url in urls {
            match self.get(&url, fid).await {
                Ok(b) => {
                    self.bytes_fetched += b.len() as u64;
                    return Ok(b);
                }
                Err(e) => failures.push(format!("{}://{url}/{fid}: {e}", self.scheme(&url))),
            }
        }
        // The volume may have moved: look it up again next time.
        if let Some((volume, _)) = fid.split_once(',') {
            self.locations.remove(volume);
        }
        Err(LogFileError::Fetch {
            file: file.to_string(),
            fid: fid.to_string(),
            message: failures.join("; "),
        })
    }

    /// The servers of `fid`'s volume, through the filer's `LookupVolume`.
    async fn locate(&mut self, file: &str, fid: &str) -> Result<Vec<String>, LogFileError> {
        let volume = fid.split_once(',').map_or(fid, |(v, _)| v).to_string();
        if let Some(urls) = self.locations.get(&volume) {
            return Ok(urls.clone());
        }
        let err = |message: String| LogFileError::Lookup {
            file: file.to_string(),
            fid: fid.to_string(),
            volume: volume.clone(),
            message,
        };
        let resp = self
            .filer
            .lookup_volume(LookupVolumeRequest {
                volume_ids: vec![volume.clone()],
            })
            .await
            .map_err(|s| {
                err(format!(
                    "LookupVolume failed: {:?}: {}",
                    s.code(),
                    s.message()
                ))
            })?
            .into_inner();
        let urls: Vec<String> = resp
            .locations_map
            .get(&volume)
            .map(|l| l.locations.iter().map(|l| l.url.clone()).collect())
            .unwrap_or_default();
        if urls.is_empty() {
            return Err(err(
                "LookupVolume found no server holding it (volume deleted or its servers down)"
                    .into(),
            ));
        }
        self.locations.insert(volume, urls.clone());
        Ok(urls)
    }

    /// The client TLS to read from server `url` with: `[https.client]`,
    /// unless that server turned out to serve plain HTTP.
    fn tls_for(&self, url: &str) -> Option<ClientTls> {
        self.access
            .https
            .clone()
            .filter(|_| !self.plain.contains(url))
    }

    /// `http` or `https`, for messages.
    fn scheme(&self, url: &str) -> &'static str {
        match self.tls_for(url) {
            Some(_) => "https",
            None => "http",
        }
    }

    /// `GET <url>/<fid>` on the server's kept-alive connection (made
    /// once, again after a failure). No `Accept-Encoding`: a volume server
    /// hands a stored-compressed needle out decompressed to such a request
    /// (docs/meta-log.md#direct-log-file-reads).
    ///
    /// With `[https.client]`, a server that answers the TLS handshake as a
    /// plain HTTP server does is asked again over plain HTTP, and read that
    /// way from then on: `[https.client]` may be set for weed admin's HTTPS
    /// beside plain-HTTP volume servers (docs/meta-log.md#https-volume-servers).
    async fn get(&mut self, url: &str, fid: &str) -> Result<Bytes, String> {
        match self.get_timed(url, fid, self.tls_for(url)).await {
            Err(Failed::NotTls(e)) => match self.get_timed(url, fid, None).await {
                Ok(b) => {
                    tracing::info!(
                        server = url,
                        "volume server answered TLS as a plain HTTP server does, and serves plain \
                         HTTP: read that way from now on ([https.client] is for other servers)"
                    );
                    self.plain.insert(url.to_string());
                    Ok(b)
                }
                Err(e2) => Err(format!("{e}; over plain HTTP: {}", e2.message())),
            },
            r => r.map_err(Failed::message),
        }
    }

    /// One GET within [`CHUNK_TIMEOUT`], through `tls` or plain; a failed
    /// server's connection is dropped.
    async fn get_timed(
        &mut self,
        url: &str,
        fid: &str,
        tls: Option<ClientTls>,
    ) -> Result<Bytes, Failed> {
        let result = tokio::time::timeout(CHUNK_TIMEOUT, self.get_once(url, fid, tls))
            .await
            .unwrap_or_else(|_| Err(Failed::Other(format!("no answer within {CHUNK_TIMEOUT:?}"))));
        if result.is_err() {
            self.connections.remove(url);
        }
        result
    }

    async fn get_once(
        &mut self,
        url: &str,
        fid: &str,
        tls: Option<ClientTls>,
    ) -> Result<Bytes, Failed> {
        let send = match self.connections.get_mut(url) {
            Some(s) if !s.is_closed() => s,
            _ => {
                let send = tokio::time::timeout(CONNECT_TIMEOUT, connect(url, tls.as_ref()))
                    .await
                    .map_err(|_| {
                        Failed::Other(format!("connect: no answer within {CONNECT_TIMEOUT:?}"))
                    })??;
                self.connections
                    .entry(url.to_string())
                    .insert_entry(send)
                    .into_mut()
            }
        };
        Ok(read_answer(send, url, fid, self.access.read_key.as_ref()).await?)
    }
}

/// Why a GET failed: [`Failed::NotTls`] when a TLS handshake got an answer
/// that is not TLS (a plain HTTP server's).
enum Failed {
    NotTls(String),
    Other(String),
}

impl Failed {
    fn message(self) -> String {
        match self {
            Failed::NotTls(m) | Failed::Other(m) => m,
        }
    }
}

impl From<String> for Failed {
    fn from(m: String) -> Failed {
        Failed::Other(m)
    }
}

/// Sends `GET /<fid>` on `send` and reads the whole answer.
async fn read_answer(
    send: &mut SendRequest<Empty<Bytes>>,
    url: &str,
    fid: &str,
    read_key: Option<&VolumeReadKey>,
) -> Result<Bytes, String> {
    send.ready().await.map_err(|e| format!("connection: {e}"))?;
    let mut req = hyper::Request::builder()
        .method("GET")
        .uri(format!("/{fid}"))
        .header(hyper::header::HOST, url);
    if let Some(key) = read_key {
        req = req.header(hyper::header::AUTHORIZATION, key.bearer(fid));
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status();
    let gzip = resp
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    // Into one buffer of the announced length: collecting the frames and
    // then joining them held every chunk twice at its peak, and the
    // 8 MB copies kept glibc's heap from shrinking between chunks
    // (docs/due-index.md#memory).
    let announced = resp
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = Vec::with_capacity(announced.min(MAX_RECORD_BYTES as usize));
    let mut frames = resp.into_body();
    while let Some(frame) = frames.frame().await {
        let frame = frame.map_err(|e| format!("read body: {e}"))?;
        if let Some(data) = frame.data_ref() {
            body.extend_from_slice(data);
        }
    }
    let body = Bytes::from(body);
    if !status.is_success() {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    if gzip {
        return Err("answered gzip-encoded although not asked to".into());
    }
    Ok(body)
}

/// A chunk the filer stored encrypted (`-encryptVolumeData`,
/// docs/meta-log.md#encrypted-volumes): AES-256-GCM under the chunk's own
/// 32-byte `cipher_key`, the 12-byte nonce before the ciphertext and the
/// 16-byte tag after it, as SeaweedFS's `util.Encrypt` writes it.
/// Opened in place: the fetched buffer is the fetcher's own, and a chunk can
/// be 8 MB (a copy would hold it twice, docs/due-index.md#memory).
fn decrypt(stored: Bytes, cipher_key: &[u8]) -> Result<Bytes, String> {
    use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
    let key = UnboundKey::new(&AES_256_GCM, cipher_key)
        .map_err(|_| format!("a cipher key of {} bytes, not 32", cipher_key.len()))?;
    if stored.len() < NONCE_LEN + AES_256_GCM.tag_len() {
        return Err(format!(
            "{} bytes are too few to be encrypted",
            stored.len()
        ));
    }
    // Without a copy: the fetcher's buffer is unique, made from a Vec.
    let mut buf = Vec::from(stored);
    let (nonce, sealed) = buf.split_at_mut(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| "bad nonce".to_string())?;
    let plain = LessSafeKey::new(key)
        .open_in_place(nonce, Aad::empty(), sealed)
        .map_err(|_| "the authentication tag does not match".to_string())?
        .len();
    Ok(Bytes::from(buf).slice(NONCE_LEN..NONCE_LEN + plain))
}

/// A kept-alive HTTP/1 connection to `url` (`host:port`), through `tls` when
/// set. A handshake that fails without a verdict on certificates is
/// [`Failed::NotTls`]: most often the answer of a plain HTTP server, which
/// the caller's plain retry confirms or not.
async fn connect(url: &str, tls: Option<&ClientTls>) -> Result<SendRequest<Empty<Bytes>>, Failed> {
    async fn over<IO>(io: IO) -> Result<SendRequest<Empty<Bytes>>, Failed>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| Failed::Other(format!("handshake: {e}")))?;
        // Ends when the connection closes or `send` is dropped.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
    }
    match tls {
        None => {
            let stream = tokio::net::TcpStream::connect(url)
                .await
                .map_err(|e| Failed::Other(format!("connect: {e}")))?;
            let _ = stream.set_nodelay(true);
            over(stream).await
        }
        Some(tls) => {
            let (host, port) =
                host_port(url).ok_or_else(|| Failed::Other(format!("{url:?} is not host:port")))?;
            // A refused handshake says why, naming [https.client] and
            // [https.volume] (docs/tls.md#how-failures-surface).
            let io = tls.dial(&host, port).await.map_err(|e| {
                // A verdict on certificates means the server speaks TLS.
                let not_tls = e
                    .get_ref()
                    .and_then(|i| i.downcast_ref::<HandshakeError>())
                    .is_some_and(|h| matches!(h.failure, TlsFailure::Other(_)));
                let message = format!("TLS connect: {e}");
                if not_tls {
                    Failed::NotTls(message)
                } else {
                    Failed::Other(message)
                }
            })?;
            over(io).await
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn lazy_fetcher() -> LogFileFetcher {
        // Nothing listens there: a test that reaches the network fails.
        let channel = Channel::from_static("http://127.0.0.1:1").connect_lazy();
        LogFileFetcher::new(SeaweedFilerClient::new(channel))
    }

    /// A chunk sealed apart (Python's `cryptography` AESGCM, key 0..31, nonce 100..111), in
    /// SeaweedFS's layout: nonce, ciphertext, tag.
    #[test]
    fn encrypted_chunks_open_with_their_cipher_key() {
        let stored = hex::decode(
            "6465666768696a6b6c6d6e6f3b7ebf111c8c32be520d38c8a800099230a63565b39284891ab7c0149e893ed0fe2f",
        )
        .unwrap();
        let key: Vec<u8> = (0..32).collect();
        assert_eq!(
            &decrypt(stored.clone().into(), &key).unwrap()[..],
            b"seaweed log record"
        );
        let mut tampered = stored.clone();
        tampered[20] ^= 1;
        assert!(decrypt(tampered.into(), &key).unwrap_err().contains("tag"));
        assert!(
            decrypt(stored.clone().into(), &key[..16])
                .unwrap_err()
                .contains("16 bytes")
        );
        assert!(
            decrypt(stored[..20].to_vec().into(), &key)
                .unwrap_err()
                .contains("too few")
        );
    }

    #[tokio::test]
    async fn unreadable_chunks_are_refused_naming_file_and_chunk() {
        let mut f = lazy_fetcher();
        // A compressed chunk with a cipher key: gzip under encryption, which
        // only the filer reads.
        let chunk = |offset, size, cipher: &[u8]| FileChunk {
            file_id: format!("3,0{offset}"),
            offset,
            size,
            cipher_key: cipher.to_vec(),
            is_compressed: true,
            ..Default::default()
        };
        let r = |chunks| LogFileChunkRef {
            chunks,
            file_ts_ns: 7,
            filer_id: "abc".into(),
        };
        let err = f.read_file(&r(vec![chunk(0, 4, b"k")])).await.unwrap_err();
        assert!(
            matches!(&err, LogFileError::UnsupportedChunk { file, fid, .. } if file == "filer abc file_ts_ns 7" && fid == "3,00"),
            "{err:?}"
        );
        let err = f.read_file(&r(vec![chunk(4, 4, b"")])).await.unwrap_err();
        assert!(
            matches!(
                err,
                LogFileError::ChunkLayout {
                    offset: 4,
                    expected: 0,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
