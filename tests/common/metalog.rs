//! The filer's persisted meta-log files (`/topics/.system/log/YYYY-MM-DD/HH-MM.<id>`), listed
//! independently of the library's probe, and writing traffic until the filer has flushed some.

use std::time::Duration;

use futures::StreamExt;
use s3_lifecycled::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes, ListEntriesRequest};
use s3_lifecycled::seaweed::filer::FilerClient;
use s3_lifecycled::seaweed::retention::META_LOG_ROOT;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tonic::transport::Channel;

use super::cluster::Cluster;
use super::s3::put;
use super::wait::eventually;

/// One persisted log file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogFile {
    /// Start of the minute the file covers, ns since the epoch.
    pub ts_ns: i64,
    /// Its day directory, `/topics/.system/log/YYYY-MM-DD`.
    pub dir: String,
    /// Its name, `HH-MM.<id>`.
    pub name: String,
}

impl LogFile {
    /// Full path.
    pub fn path(&self) -> String {
        format!("{}/{}", self.dir, self.name)
    }
}

/// Every entry of `dir` in one big listing (empty when it does not exist).
pub async fn list_all(client: &mut SeaweedFilerClient<Channel>, dir: &str) -> Vec<Entry> {
    let mut stream = match client
        .list_entries(ListEntriesRequest {
            directory: dir.into(),
            limit: 1_000_000,
            ..Default::default()
        })
        .await
    {
        Ok(s) => s.into_inner(),
        Err(s) if s.message().contains("no entry is found") => return Vec::new(),
        Err(s) => panic!("list {dir}: {s}"),
    };
    let mut out = Vec::new();
    while let Some(r) = stream.message().await.unwrap() {
        out.extend(r.entry);
    }
    out
}

/// All persisted log files, oldest first, the minute parsed from `YYYY-MM-DD/HH-MM.<id>` with
/// the `time` crate's RFC 3339 parser.
pub async fn log_files(client: &mut SeaweedFilerClient<Channel>) -> Vec<LogFile> {
    let mut out = Vec::new();
    for day in list_all(client, META_LOG_ROOT).await {
        let dir = format!("{META_LOG_ROOT}/{}", day.name);
        for f in list_all(client, &dir).await {
            let stamp = format!("{}T{}:00Z", day.name, f.name[..5].replace('-', ":"));
            let ts = OffsetDateTime::parse(&stamp, &Rfc3339)
                .unwrap_or_else(|e| panic!("{stamp}: {e}"))
                .unix_timestamp_nanos();
            out.push(LogFile {
                ts_ns: i64::try_from(ts).expect("ns fit i64"),
                dir: dir.clone(),
                name: f.name,
            });
        }
    }
    out.sort();
    out
}

/// How many chunks the persisted log files hold: each flush of the filer's buffer adds one,
/// to a new file or to its minute's file.
pub async fn log_chunks(client: &mut SeaweedFilerClient<Channel>) -> usize {
    let mut n = 0;
    for day in list_all(client, META_LOG_ROOT).await {
        let dir = format!("{META_LOG_ROOT}/{}", day.name);
        n += list_all(client, &dir)
            .await
            .iter()
            .map(|f| f.chunks.len())
            .sum::<usize>();
    }
    n
}

/// Writes a small object into `bucket` every 2 s until the persisted log files satisfy `done`
/// (the filer flushes about once a minute with traffic); returns them. Gives up after 4 minutes.
pub async fn write_until_log_files(
    c: &Cluster,
    bucket: &str,
    done: impl Fn(&[LogFile]) -> bool,
) -> Vec<LogFile> {
    let s3 = c.s3_client();
    let mut filer = c.filer_client().await.unwrap();
    let mut i = 0;
    eventually(
        Duration::from_secs(240),
        Duration::from_secs(2),
        async || {
            let files = log_files(&mut filer).await;
            if done(&files) {
                return Ok(files);
            }
            put(&s3, bucket, &format!("tick/{i:05}"), b"", None).await;
            i += 1;
            Err(format!("log files so far: {files:?}"))
        },
    )
    .await
}

/// `n` entries `<dir>/<i>` through `fc`, each with `pad` bytes of Extended.
pub async fn create_entries(fc: &FilerClient, dir: &str, n: usize, pad: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let fc = fc.clone();
            async move {
                let entry = Entry {
                    name: format!("{i:07}"),
                    attributes: Some(FuseAttributes {
                        mtime: 1_700_000_000,
                        file_mode: 0o644,
                        ..Default::default()
                    }),
                    extended: [("x-pad".to_string(), vec![b'p'; pad])].into(),
                    ..Default::default()
                };
                fc.create_entry(dir, entry, false)
                    .await
                    .unwrap_or_else(|e| panic!("create {dir}/{i}: {e}"));
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
}

/// Fills the filer's 8 MB memory buffer with 9 MB of events outside the buckets root (2,300
/// entries with 4 KB of Extended each under `/lifecycle-test-padding/<tag>`; no pass sees them),
/// so it flushes what came before to a log file at once instead of within a minute. The flush
/// itself is asynchronous.
pub async fn pad_log(fc: &FilerClient, tag: &str) {
    create_entries(fc, &format!("/lifecycle-test-padding/{tag}"), 2_300, 4096).await;
}
