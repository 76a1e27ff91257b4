//! Clients for the shared cluster: the AWS S3 SDK, raw S3 requests (exact lifecycle XML bytes),
//! the filer gRPC API (lookups, updates, metadata subscription) and the library's own
//! `FilerClient`; and the S3 object helpers tests read effects back with (the source of truth).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, anyhow, bail};
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::complete_multipart_upload::{
    CompleteMultipartUploadError, CompleteMultipartUploadOutput,
};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, VersioningConfiguration,
};
use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use md5::Digest as _;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::pb::filer_pb::{
    Entry, FuseAttributes, LookupDirectoryEntryRequest, SubscribeMetadataRequest,
    SubscribeMetadataResponse, UpdateEntryRequest,
};
use s3_lifecycled::seaweed::filer::FilerClient;
use tonic::transport::Channel;

use super::clock::now_ns;
use super::cluster::Cluster;
use super::http;

/// Extended keys SeaweedFS writes, from the library's one list.
pub use s3_lifecycled::engine::keys::{
    LIFECYCLE_XML as LIFECYCLE_XML_KEY, NONCURRENT_SINCE_NS as NONCURRENT_SINCE_KEY,
};
/// gRPC messages can be large (batched metadata responses); Go clients allow 1 GiB too.
const MAX_DECODE: usize = 1 << 30;
/// Connections [`Cluster::put_objects_bulk`] PUTs over, one request after
/// another on each. Through the (debug-built) SDK, 16 PUTs at a time left the
/// loopback gateway waiting on the client: 20,000 PUTs took 101 s at 16,
/// 41 s at 64 and 38 s at 128, the client using more CPU than the gateway
/// (`tests/e2e_due_index.rs`, shared 2-core box). Plain keep-alive requests
/// cost the client next to nothing.
const BULK_CONNECTIONS: usize = 32;

static BUCKET_SEQ: AtomicU64 = AtomicU64::new(0);

/// Sets a bucket's versioning status (Enabled or Suspended) through S3.
pub async fn set_versioning(s3: &aws_sdk_s3::Client, bucket: &str, status: BucketVersioningStatus) {
    s3.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(VersioningConfiguration::builder().status(status).build())
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutBucketVersioning {bucket}: {e:?}"));
}

/// Turns versioning on.
pub async fn enable_versioning(s3: &aws_sdk_s3::Client, bucket: &str) {
    set_versioning(s3, bucket, BucketVersioningStatus::Enabled).await;
}

/// An S3 SDK client for the gateway at `endpoint` (`http://HOST:PORT`), configured as
/// [`Cluster::s3_client`].
pub fn s3_client_at(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::new()
        .behavior_version(BehaviorVersion::latest())
        .credentials_provider(Credentials::new("any", "any", None, None, "static"))
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

impl Cluster {
    /// An S3 SDK client for this cluster: any credentials (auth is off), us-east-1, path style,
    /// plain-HTTP connector without TLS stacks.
    pub fn s3_client(&self) -> aws_sdk_s3::Client {
        s3_client_at(&self.s3_endpoint())
    }

    /// A valid, never-before-used S3 bucket name starting with (a sanitised) `prefix`. Does not
    /// create the bucket.
    pub fn unique_bucket(&self, prefix: &str) -> String {
        let mut clean: String = prefix
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .take(30)
            .collect();
        clean = clean.trim_matches('-').to_string();
        if clean.is_empty() {
            clean.push('b');
        }
        let seq = BUCKET_SEQ.fetch_add(1, Ordering::Relaxed);
        let salt: u16 = rand::random();
        // <=30 + 1 + <=10 + 1 + 4 chars, lower-case alnum and '-', starts and ends alnum.
        format!("{clean}-{seq}-{salt:04x}")
    }

    /// Creates a fresh bucket named after `prefix` and returns its name.
    pub async fn new_bucket(&self, prefix: &str) -> anyhow::Result<String> {
        let bucket = self.unique_bucket(prefix);
        self.s3_client()
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .with_context(|| format!("CreateBucket {bucket}"))?;
        Ok(bucket)
    }

    /// Stores `xml` as the bucket's lifecycle configuration **byte for byte** (SDKs re-serialise
    /// it), with an unsigned raw `PUT /<bucket>?lifecycle=` (auth is off), then verifies over filer
    /// gRPC that the bucket entry holds exactly these bytes.
    pub async fn put_lifecycle_xml(&self, bucket: &str, xml: &[u8]) -> anyhow::Result<()> {
        let md5 = content_md5(xml);
        let addr = self.s3_addr();
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
        .context("joining the raw lifecycle PUT")?
        .with_context(|| format!("raw PUT /{bucket}?lifecycle="))?;
        if resp.status / 100 != 2 {
            bail!(
                "PUT /{bucket}?lifecycle= returned {}: {}",
                resp.status,
                resp.text()
            );
        }
        let entry = self
            .lookup_entry(Self::BUCKETS_ROOT, bucket)
            .await?
            .ok_or_else(|| {
                anyhow!("bucket entry /buckets/{bucket} not found after lifecycle PUT")
            })?;
        match entry.extended.get(LIFECYCLE_XML_KEY) {
            Some(stored) if stored.as_slice() == xml => Ok(()),
            Some(stored) => bail!(
                "bucket {bucket}: stored lifecycle XML differs from what was sent:\n{}",
                String::from_utf8_lossy(stored)
            ),
            None => bail!("bucket {bucket}: no {LIFECYCLE_XML_KEY} after lifecycle PUT"),
        }
    }

    /// A connected gRPC channel to the filer.
    pub async fn filer_channel(&self) -> anyhow::Result<Channel> {
        Channel::from_shared(self.filer_grpc_url())?
            .connect()
            .await
            .with_context(|| format!("connecting to filer gRPC {}", self.filer_grpc_url()))
    }

    /// A connected filer gRPC client allowing 1 GiB messages.
    pub async fn filer_client(&self) -> anyhow::Result<SeaweedFilerClient<Channel>> {
        let channel = self.filer_channel().await?;
        Ok(SeaweedFilerClient::new(channel)
            .max_decoding_message_size(MAX_DECODE)
            .max_encoding_message_size(MAX_DECODE))
    }

    /// The library's own filer client, connected to this cluster.
    pub async fn filer(&self) -> FilerClient {
        FilerClient::connect(&self.filer_grpc_addr().to_string())
            .await
            .unwrap_or_else(|e| panic!("connecting FilerClient to {}: {e}", self.filer_grpc_addr()))
    }

    /// LookupDirectoryEntry; `Ok(None)` when the filer reports the entry missing.
    pub async fn lookup_entry(&self, dir: &str, name: &str) -> anyhow::Result<Option<Entry>> {
        let mut client = self.filer_client().await?;
        let req = LookupDirectoryEntryRequest {
            directory: dir.to_string(),
            name: name.to_string(),
        };
        match client.lookup_directory_entry(req).await {
            Ok(resp) => Ok(resp.into_inner().entry),
            // Not-found arrives as an error status carrying this text (docs/grpc.md#not-found).
            Err(status) if status.message().contains("no entry is found") => Ok(None),
            Err(status) => Err(anyhow!("LookupDirectoryEntry {dir}/{name}: {status}")),
        }
    }

    /// Makes an entry look `age` old, as Go's tests do (docs/test-cluster.md#backdating):
    /// `mtime` and `crtime` = now − age (whole seconds, `mtime_ns` 0), and an existing
    /// Noncurrent-Since-Ns moved to the same instant. Emits one UPDATE event. Returns the new entry.
    ///
    /// For the latest version of a `.versions` key, also backdate the `.versions` dir's
    /// `Seaweed-X-Amz-Latest-Version-Mtime` ([`Cluster::set_extended`]): Go reads the age from there.
    pub async fn backdate(
        &self,
        dir: &str,
        name: &str,
        age: std::time::Duration,
    ) -> anyhow::Result<Entry> {
        let mut entry = self
            .lookup_entry(dir, name)
            .await?
            .ok_or_else(|| anyhow!("cannot backdate {dir}/{name}: no such entry"))?;
        let then_s = now_ns() / 1_000_000_000 - i64::try_from(age.as_secs())?;
        let attrs = entry.attributes.get_or_insert_with(Default::default);
        attrs.mtime = then_s;
        attrs.mtime_ns = 0;
        attrs.crtime = then_s;
        if let Some(v) = entry.extended.get_mut(NONCURRENT_SINCE_KEY) {
            *v = (then_s * 1_000_000_000).to_string().into_bytes();
        }
        self.update_entry(dir, entry.clone()).await?;
        Ok(entry)
    }

    /// Sets (or with `None` removes) one Extended key of an entry through UpdateEntry.
    pub async fn set_extended(
        &self,
        dir: &str,
        name: &str,
        key: &str,
        value: Option<&[u8]>,
    ) -> anyhow::Result<()> {
        let mut entry = self
            .lookup_entry(dir, name)
            .await?
            .ok_or_else(|| anyhow!("cannot set {key} on {dir}/{name}: no such entry"))?;
        match value {
            Some(v) => entry.extended.insert(key.to_string(), v.to_vec()),
            None => entry.extended.remove(key),
        };
        self.update_entry(dir, entry).await
    }

    /// UpdateEntry of `entry` in `dir`. Our proto subset omits only
    /// `RemoteEntry.remote_content_encoding` of what an Entry can hold (see the conformance test).
    pub async fn update_entry(&self, dir: &str, entry: Entry) -> anyhow::Result<()> {
        let name = entry.name.clone();
        let req = UpdateEntryRequest {
            directory: dir.to_string(),
            entry: Some(entry),
            ..Default::default()
        };
        self.filer_client()
            .await?
            .update_entry(req)
            .await
            .map_err(|s| anyhow!("UpdateEntry {dir}/{name}: {s}"))?;
        Ok(())
    }

    /// A fresh bucket named after `prefix` with an `Expiration/Days` 1 rule (`d1`, whole
    /// bucket) and two objects `o/0`, `o/1`: due at any `--now` three days on.
    pub async fn bucket_due_in_a_day(&self, prefix: &str) -> String {
        let b = self.new_bucket(prefix).await.unwrap();
        let rule = super::rules::lifecycle(&super::rules::days_rule("d1", "", 1));
        self.put_lifecycle_xml(&b, &rule).await.unwrap();
        let keys = keys("o/", 2);
        self.put_objects_bulk(&b, &keys, b"xyz").await.unwrap();
        b
    }

    /// PUTs every key with the same body: plain unsigned HTTP/1.1 PUTs (the
    /// test gateway runs without auth) over [`BULK_CONNECTIONS`] keep-alive
    /// connections, far cheaper for a debug-built client than the SDK.
    pub async fn put_objects_bulk(
        &self,
        bucket: &str,
        keys: &[String],
        body: &[u8],
    ) -> anyhow::Result<()> {
        // Content-MD5 as the SDK sends a checksum: object lock wants one.
        let put = BulkPut {
            addr: self.s3_addr(),
            bucket,
            body,
            md5: content_md5(body),
        };
        let next = std::sync::atomic::AtomicUsize::new(0);
        let connections = (0..BULK_CONNECTIONS.min(keys.len())).map(|_| async {
            let mut conn = None;
            while let Some(key) = keys.get(next.fetch_add(1, Ordering::Relaxed)) {
                put.send(&mut conn, key)
                    .await
                    .with_context(|| format!("PutObject {bucket}/{key}"))?;
            }
            anyhow::Ok(())
        });
        futures::future::try_join_all(connections).await?;
        Ok(())
    }

    /// Replays the meta-log under `path_prefix` for `(since_ns, until_ns]` and returns every event,
    /// flattening batches. Keepalives (no event_notification, or no entry name) are dropped.
    pub async fn subscribe_events(
        &self,
        path_prefix: &str,
        since_ns: i64,
        until_ns: i64,
    ) -> anyhow::Result<Vec<SubscribeMetadataResponse>> {
        let mut client = self.filer_client().await?;
        let req = SubscribeMetadataRequest {
            client_name: "s3-lifecycled-tests".to_string(),
            path_prefix: path_prefix.to_string(),
            since_ns,
            until_ns,
            // A fresh positive id per stream, or the filer rejects a duplicate registration.
            client_id: rand::random_range(1..i32::MAX),
            client_supports_batching: true,
            ..Default::default()
        };
        let mut stream = client
            .subscribe_metadata(req)
            .await
            .context("SubscribeMetadata")?
            .into_inner();
        let mut out = Vec::new();
        while let Some(mut resp) = stream.message().await.context("SubscribeMetadata stream")? {
            let batch = std::mem::take(&mut resp.events);
            for ev in std::iter::once(resp).chain(batch) {
                if is_real_event(&ev) {
                    out.push(ev);
                }
            }
        }
        Ok(out)
    }
}

/// True for a response that describes an entry change (not a keepalive or flush report).
pub fn is_real_event(ev: &SubscribeMetadataResponse) -> bool {
    ev.event_notification.as_ref().is_some_and(|n| {
        let name = |e: &Option<Box<Entry>>| e.as_ref().is_some_and(|e| !e.name.is_empty());
        name(&n.old_entry) || name(&n.new_entry)
    })
}

/// Writes `content` as an inline file `<dir>/<name>` (created, or replaced when it exists), the
/// way an operator or the Go worker would: mode 0644, a fixed mtime.
pub async fn write_inline_file(fc: &FilerClient, dir: &str, name: &str, content: &[u8]) {
    let entry = Entry {
        name: name.into(),
        content: content.to_vec(),
        attributes: Some(FuseAttributes {
            file_size: content.len() as u64,
            mtime: 1_700_000_000,
            crtime: 1_700_000_000,
            file_mode: 0o644,
            ..Default::default()
        }),
        ..Default::default()
    };
    match fc.lookup(dir, name).await.unwrap() {
        None => fc.create_entry(dir, entry, false).await.unwrap(),
        Some(_) => fc
            .update_entry(dir, entry, Default::default())
            .await
            .unwrap(),
    }
}

/// `n` keys `<prefix>000000`, `<prefix>000001`, ….
pub fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:06}")).collect()
}

/// A set of string keys, for compact expectations.
pub fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// PUTs one object, optionally with a URL-encoded tag set (`k=v&k2=v2`); returns its version id.
pub async fn put(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &[u8],
    tagging: Option<&str>,
) -> Option<String> {
    let mut req = s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()));
    if let Some(t) = tagging {
        req = req.tagging(t);
    }
    let out = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT {bucket}/{key}: {e:?}"));
    out.version_id().map(str::to_string)
}

/// Deletes one key (or one version of it).
pub async fn delete(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, version: Option<&str>) {
    s3.delete_object()
        .bucket(bucket)
        .key(key)
        .set_version_id(version.map(str::to_string))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DELETE {bucket}/{key} {version:?}: {e:?}"));
}

/// The hex MD5 of `body`: an S3 ETag of a single-part object, unquoted.
pub fn hex_md5(body: &[u8]) -> String {
    md5::Md5::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `Content-MD5` header value of `body` (base64 of its MD5).
pub fn content_md5(body: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(body))
}

/// How [`put_locked`] locks the version it writes.
#[derive(Debug, Clone, Copy)]
pub enum Lock {
    /// GOVERNANCE retention until this Unix second.
    Governance(i64),
    /// A legal hold (ON).
    LegalHold,
}

/// Creates a bucket with object lock enabled (and so versioning); returns its name.
pub async fn new_lock_bucket(c: &Cluster, prefix: &str) -> String {
    let b = c.unique_bucket(prefix);
    c.s3_client()
        .create_bucket()
        .bucket(&b)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating object-lock bucket {b}: {e:?}"));
    b
}

/// PUTs one locked version (the gateway wants Content-MD5 on lock writes); returns its
/// version id.
pub async fn put_locked(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &[u8],
    lock: Lock,
) -> String {
    use aws_sdk_s3::primitives::DateTime;
    use aws_sdk_s3::types::{ObjectLockLegalHoldStatus, ObjectLockMode};
    let mut req = s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_md5(content_md5(body))
        .body(ByteStream::from(body.to_vec()));
    req = match lock {
        Lock::Governance(until_s) => req
            .object_lock_mode(ObjectLockMode::Governance)
            .object_lock_retain_until_date(DateTime::from_secs(until_s)),
        Lock::LegalHold => req.object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On),
    };
    let out = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("locked PUT {bucket}/{key}: {e:?}"));
    out.version_id()
        .unwrap_or_else(|| panic!("locked PUT {bucket}/{key}: no version id"))
        .to_string()
}

/// Current object keys (ListObjectsV2, all pages).
pub async fn list_keys(s3: &aws_sdk_s3::Client, bucket: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut token: Option<String> = None;
    loop {
        let resp = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("ListObjectsV2 {bucket}: {e:?}"));
        out.extend(
            resp.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
        match resp.next_continuation_token() {
            Some(t) if resp.is_truncated() == Some(true) => token = Some(t.to_string()),
            _ => break,
        }
    }
    out
}

/// How many current objects `bucket` holds (ListObjectsV2, all pages).
pub async fn count_objects(s3: &aws_sdk_s3::Client, bucket: &str) -> usize {
    list_keys(s3, bucket).await.len()
}

/// One row of ListObjectVersions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ver {
    /// Object key.
    pub key: String,
    /// Version id.
    pub version_id: String,
    /// Whether this is the latest version of its key.
    pub is_latest: bool,
    /// Whether this is a delete marker.
    pub marker: bool,
}

/// Every version and delete marker under `prefix` (one page; tests keep keys few).
pub async fn list_versions(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Vec<Ver> {
    let resp = s3
        .list_object_versions()
        .bucket(bucket)
        .prefix(prefix)
        .send()
        .await
        .unwrap_or_else(|e| panic!("ListObjectVersions {bucket}/{prefix}: {e:?}"));
    let mut out: Vec<Ver> = resp
        .versions()
        .iter()
        .map(|v| Ver {
            key: v.key().unwrap_or_default().to_string(),
            version_id: v.version_id().unwrap_or_default().to_string(),
            is_latest: v.is_latest().unwrap_or(false),
            marker: false,
        })
        .chain(resp.delete_markers().iter().map(|m| Ver {
            key: m.key().unwrap_or_default().to_string(),
            version_id: m.version_id().unwrap_or_default().to_string(),
            is_latest: m.is_latest().unwrap_or(false),
            marker: true,
        }))
        .collect();
    out.sort();
    out
}

/// HTTP status of HeadObject (200, or the error status such as 404).
pub async fn head_status(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    version: Option<&str>,
) -> u16 {
    match s3
        .head_object()
        .bucket(bucket)
        .key(key)
        .set_version_id(version.map(str::to_string))
        .send()
        .await
    {
        Ok(_) => 200,
        Err(e) => match e.raw_response() {
            Some(r) => r.status().as_u16(),
            None => panic!("HeadObject {bucket}/{key}: no HTTP response: {e:?}"),
        },
    }
}

/// Whether the current version of `key` exists: HeadObject 200 (true) or 404 (false); any
/// other answer fails the test.
pub async fn exists(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> bool {
    match head_status(s3, bucket, key, None).await {
        200 => true,
        404 => false,
        other => panic!("HeadObject {bucket}/{key}: unexpected status {other}"),
    }
}

/// Starts a multipart upload of `key`; answers its upload id.
pub async fn start_upload(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> String {
    s3.create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateMultipartUpload {bucket}/{key}: {e:?}"))
        .upload_id()
        .unwrap_or_else(|| panic!("CreateMultipartUpload {bucket}/{key}: no upload id"))
        .to_string()
}

/// Uploads part `n` of the multipart upload `upload_id` of `key`; answers its ETag.
pub async fn upload_part(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    n: i32,
    body: &[u8],
) -> String {
    s3.upload_part()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .part_number(n)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("UploadPart {n} of {bucket}/{key}: {e:?}"))
        .e_tag()
        .unwrap_or_else(|| panic!("UploadPart {n} of {bucket}/{key}: no ETag"))
        .to_string()
}

/// Completes the multipart upload `upload_id` of `key` from its one part (part 1, `etag`).
pub async fn complete_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    etag: &str,
) -> Result<CompleteMultipartUploadOutput, SdkError<CompleteMultipartUploadError>> {
    s3.complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
                .build(),
        )
        .send()
        .await
}

/// Upload ids of the incomplete multipart uploads.
pub async fn list_uploads(s3: &aws_sdk_s3::Client, bucket: &str) -> BTreeSet<String> {
    let resp = s3
        .list_multipart_uploads()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("ListMultipartUploads {bucket}: {e:?}"));
    resp.uploads()
        .iter()
        .filter_map(|u| u.upload_id().map(str::to_string))
        .collect()
}

/// One keep-alive connection of [`Cluster::put_objects_bulk`].
type BulkConn = tokio::io::BufStream<tokio::net::TcpStream>;

/// The requests of one [`Cluster::put_objects_bulk`]: unsigned `PUT
/// /{bucket}/{key}`s (the test gateway runs without auth) of one body.
struct BulkPut<'a> {
    addr: std::net::SocketAddr,
    bucket: &'a str,
    body: &'a [u8],
    md5: String,
}

impl BulkPut<'_> {
    /// PUTs `key` over `conn`, opened when `None` and dropped when the
    /// gateway closes it. A reused connection that fails is replaced once:
    /// the gateway may have closed it while idle. But it may also have
    /// stored the object before the failure, and a second PUT would then add
    /// a second version in a versioned bucket: so the retry happens only
    /// when the key does not hold this body yet.
    async fn send(&self, conn: &mut Option<BulkConn>, key: &str) -> anyhow::Result<()> {
        let reused = conn.is_some();
        match self.send_once(conn, key).await {
            Err(_) if reused => {
                *conn = None;
                if self.already_stored(key).await {
                    return Ok(());
                }
                self.send_once(conn, key).await
            }
            r => r,
        }
    }

    /// The key's current object carries this body's ETag.
    async fn already_stored(&self, key: &str) -> bool {
        let (addr, path) = (self.addr, self.path(key));
        let want = format!("\"{}\"", hex_md5(self.body));
        tokio::task::spawn_blocking(move || super::http::request(addr, "HEAD", &path, &[], &[]))
            .await
            .ok()
            .and_then(Result::ok)
            .is_some_and(|r| r.status == 200 && r.header("etag") == Some(want.as_str()))
    }

    /// The URL path of `key` in the bucket, percent-encoded.
    fn path(&self, key: &str) -> String {
        format!("/{}/{key}", self.bucket)
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    async fn send_once(&self, conn: &mut Option<BulkConn>, key: &str) -> anyhow::Result<()> {
        let BulkPut {
            addr, body, md5, ..
        } = self;
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let s = match conn {
            Some(s) => s,
            None => conn.insert(tokio::io::BufStream::new(
                tokio::net::TcpStream::connect(addr).await?,
            )),
        };
        let path = self.path(key);
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nContent-MD5: {md5}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).await?;
        s.write_all(body).await?;
        s.flush().await?;
        let mut line = String::new();
        if s.read_line(&mut line).await? == 0 {
            bail!("the gateway closed the connection before answering");
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| anyhow!("not an HTTP status line: {line:?}"))?;
        let (mut length, mut chunked, mut close) = (0usize, false, false);
        loop {
            line.clear();
            s.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
                match k.as_str() {
                    "content-length" => length = v.parse()?,
                    "transfer-encoding" => chunked = v.contains("chunked"),
                    "connection" => close = v == "close",
                    _ => {}
                }
            }
        }
        let mut answer = Vec::new();
        if chunked {
            loop {
                line.clear();
                s.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)?;
                let mut chunk = vec![0; size + 2];
                s.read_exact(&mut chunk).await?;
                if size == 0 {
                    break;
                }
                answer.extend_from_slice(&chunk[..size]);
            }
        } else {
            answer.resize(length, 0);
            s.read_exact(&mut answer).await?;
        }
        if close {
            *conn = None;
        }
        if status / 100 != 2 {
            bail!("{status}: {}", String::from_utf8_lossy(&answer));
        }
        Ok(())
    }
}
