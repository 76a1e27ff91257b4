//! Clients for the shared cluster: the AWS S3 SDK, raw S3 requests (exact lifecycle XML bytes),
//! and the filer gRPC API (lookups, metadata subscription).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use md5::Digest as _;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::pb::filer_pb::{
    Entry, LookupDirectoryEntryRequest, SubscribeMetadataRequest, SubscribeMetadataResponse,
    UpdateEntryRequest,
};
use tonic::transport::Channel;

use super::cluster::Cluster;
use super::http;

/// Extended keys SeaweedFS writes, from the library's one list.
pub use s3_lifecycled::engine::keys::{
    LIFECYCLE_XML as LIFECYCLE_XML_KEY, NONCURRENT_SINCE_NS as NONCURRENT_SINCE_KEY,
};
/// gRPC messages can be large (batched metadata responses); Go clients allow 1 GiB too.
const MAX_DECODE: usize = 1 << 30;
/// Concurrent PUTs in [`Cluster::put_objects_bulk`].
const BULK_IN_FLIGHT: usize = 16;

static BUCKET_SEQ: AtomicU64 = AtomicU64::new(0);

/// Current time in ns since the epoch (test support may read the clock; the engine may not).
/// Sets a bucket's versioning status (Enabled or Suspended) through S3.
pub async fn set_versioning(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    status: aws_sdk_s3::types::BucketVersioningStatus,
) {
    s3.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(status)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutBucketVersioning {bucket}: {e:?}"));
}

pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

impl Cluster {
    /// An S3 SDK client for this cluster: any credentials (auth is off), us-east-1, path style,
    /// plain-HTTP connector without TLS stacks.
    pub fn s3_client(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .credentials_provider(Credentials::new("any", "any", None, None, "static"))
            .region(Region::new("us-east-1"))
            .endpoint_url(self.s3_endpoint())
            .force_path_style(true)
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .build();
        aws_sdk_s3::Client::from_conf(config)
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
        let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(xml));
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

    /// A connected filer gRPC client allowing 1 GiB messages.
    pub async fn filer_client(&self) -> anyhow::Result<SeaweedFilerClient<Channel>> {
        let channel = Channel::from_shared(self.filer_grpc_url())?
            .connect()
            .await
            .with_context(|| format!("connecting to filer gRPC {}", self.filer_grpc_url()))?;
        Ok(SeaweedFilerClient::new(channel)
            .max_decoding_message_size(MAX_DECODE)
            .max_encoding_message_size(MAX_DECODE))
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

    /// PUTs every key with the same body, 16 requests in flight.
    pub async fn put_objects_bulk(
        &self,
        bucket: &str,
        keys: &[String],
        body: &[u8],
    ) -> anyhow::Result<()> {
        let client = self.s3_client();
        futures::stream::iter(keys.iter().cloned())
            .map(|key| {
                let client = client.clone();
                let body = body.to_vec();
                async move {
                    client
                        .put_object()
                        .bucket(bucket)
                        .key(&key)
                        .body(body.into())
                        .send()
                        .await
                        .with_context(|| format!("PutObject {bucket}/{key}"))
                }
            })
            .buffer_unordered(BULK_IN_FLIGHT)
            .try_for_each(|_| async { Ok(()) })
            .await
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
        let name = |e: &Option<Entry>| e.as_ref().is_some_and(|e| !e.name.is_empty());
        name(&n.old_entry) || name(&n.new_entry)
    })
}
