//! Reads the TTLs that live outside the lifecycle documents, for the audit
//! (docs/ttl-audit.md): `filer.conf`'s locations, a bounded listing of each
//! bucket for entries carrying `TtlSec`, and the master's TTL volumes. Only
//! reads; the judgement is `engine::audit`'s.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::Value;

use crate::engine::Nanos;
use crate::engine::audit::{
    AuditReport, BucketTtls, EntrySample, LocationTtl, StampedGroup, TtlVolume, audit_bucket,
    key_verdict, location_scope, volume_ttl_seconds,
};
use crate::engine::keys::{UPLOADS_DIR, VERSIONS_SUFFIX};
use crate::engine::names::{self, UnknownBucket};
use crate::lifecycle::FlatRule;
use crate::seaweed::buckets::list_bucket_configs;
use crate::seaweed::filer::{FilerClient, FilerError, join_path};
use crate::seaweed::tls::ClientTls;

/// Where SeaweedFS keeps the filer's path-specific configuration.
pub const FILER_CONF_DIR: &str = "/etc/seaweedfs";
/// Its file name (`fs.configure` writes it).
pub const FILER_CONF_NAME: &str = "filer.conf";

/// Why the TTL audit, or one of its readings, failed. A failed reading
/// becomes text in the report (the audit goes on); the text is the message
/// the audit always printed.
#[derive(Debug, thiserror::Error)]
pub enum TtlScanError {
    /// A filer call failed (the filer's error names the call and path).
    #[error(transparent)]
    Filer(#[from] FilerError),
    /// Reading `filer.conf` failed.
    #[error("reading {path}: {source}")]
    ReadConf {
        path: String,
        #[source]
        source: FilerError,
    },
    /// `filer.conf` is stored in chunks, which the audit does not fetch.
    #[error(
        "{path} is stored in chunks, not inline as fs.configure writes it; read it with \
         `weed shell fs.configure` and check its ttl fields by hand"
    )]
    ChunkedConf { path: String },
    /// `filer.conf` is not JSON.
    #[error("{path}: not JSON: {source}")]
    ConfNotJson {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// Listing a folder of a bucket failed.
    #[error("listing {dir}: {source}")]
    List {
        dir: String,
        #[source]
        source: FilerError,
    },
    /// Listing the buckets failed.
    #[error("listing the buckets under {root}: {source}")]
    ListBuckets {
        root: String,
        #[source]
        source: FilerError,
    },
    /// `--bucket` names a bucket the cluster does not have.
    #[error("flag --bucket: {0}")]
    UnknownBucket(#[source] UnknownBucket),
}

/// What one audit may read per bucket.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Entries listed at most.
    pub max_entries: u64,
    /// Folder listings (filer calls) at most.
    pub max_listings: u64,
}

/// The `filer.conf` locations that set a TTL. The file is JSON that
/// `fs.configure` writes inline into the entry; absent, it is empty.
pub async fn filer_conf_ttls(client: &FilerClient) -> Result<Vec<LocationTtl>, TtlScanError> {
    let path = join_path(FILER_CONF_DIR, FILER_CONF_NAME);
    let Some(entry) = client
        .lookup(FILER_CONF_DIR, FILER_CONF_NAME)
        .await
        .map_err(|source| TtlScanError::ReadConf {
            path: path.clone(),
            source,
        })?
    else {
        return Ok(Vec::new());
    };
    if entry.content.is_empty() && !entry.chunks.is_empty() {
        return Err(TtlScanError::ChunkedConf { path });
    }
    parse_filer_conf(&entry.content).map_err(|source| TtlScanError::ConfNotJson { path, source })
}

/// The TTL locations of a `filer.conf` document (protobuf JSON; camelCase or
/// snake_case field names). Fails only when it is not JSON.
pub fn parse_filer_conf(bytes: &[u8]) -> Result<Vec<LocationTtl>, serde_json::Error> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let doc: Value = serde_json::from_slice(bytes)?;
    let field =
        |l: &Value, camel: &str, snake: &str| l.get(camel).or_else(|| l.get(snake)).cloned();
    let text = |l: &Value, camel: &str, snake: &str| {
        field(l, camel, snake)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for l in doc["locations"].as_array().into_iter().flatten() {
        let ttl = text(l, "ttl", "ttl");
        if ttl.trim().is_empty() {
            continue;
        }
        let mut other_flags = Vec::new();
        for (camel, snake, flag) in [
            ("collection", "collection", "collection"),
            ("replication", "replication", "replication"),
            ("diskType", "disk_type", "disk"),
            ("dataCenter", "data_center", "dataCenter"),
            ("rack", "rack", "rack"),
            ("dataNode", "data_node", "dataNode"),
        ] {
            let v = text(l, camel, snake);
            if !v.is_empty() {
                other_flags.push(format!("-{flag}={v}"));
            }
        }
        for (camel, snake, flag) in [
            ("fsync", "fsync", "fsync"),
            ("readOnly", "read_only", "readOnly"),
            ("worm", "worm", "worm"),
        ] {
            if field(l, camel, snake).and_then(|v| v.as_bool()) == Some(true) {
                other_flags.push(format!("-{flag}"));
            }
        }
        let growth = field(l, "volumeGrowthCount", "volume_growth_count")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if growth > 0 {
            other_flags.push(format!("-volumeGrowthCount={growth}"));
        }
        out.push(LocationTtl {
            prefix: text(l, "locationPrefix", "location_prefix"),
            ttl,
            other_flags,
        });
    }
    Ok(out)
}

/// Lists `bucket_dir` breadth first within `budget`, gathering the entries
/// that carry a TTL and judging each key against `rules`. `calls` counts
/// the listings.
pub async fn sample_entries(
    client: &FilerClient,
    bucket_dir: &str,
    rules: &[FlatRule],
    day: Duration,
    budget: Budget,
    calls: &mut u64,
) -> Result<EntrySample, TtlScanError> {
    let mut sample = EntrySample::default();
    // (folder, key prefix of its children, the logical key when it is a `.versions` folder)
    let mut queue: VecDeque<(String, String, Option<String>)> =
        VecDeque::from([(bucket_dir.to_string(), String::new(), None)]);
    let mut listings = 0u64;
    let mut cut = false;
    'dirs: while let Some((dir, prefix, versions_of)) = queue.pop_front() {
        let mut after = String::new();
        loop {
            if listings >= budget.max_listings || sample.listed >= budget.max_entries {
                cut = true;
                queue.push_front((dir, prefix, versions_of));
                break 'dirs;
            }
            let limit = (budget.max_entries - sample.listed).min(1000) as u32;
            let page = client
                .list_page(&dir, &after, limit)
                .await
                .map_err(|source| TtlScanError::List {
                    dir: dir.clone(),
                    source,
                })?;
            listings += 1;
            *calls += 1;
            let full = page.len() as u32 == limit;
            for e in &page {
                sample.listed += 1;
                let path = join_path(&dir, &e.name);
                if e.is_directory {
                    if prefix.is_empty() && e.name == UPLOADS_DIR {
                        continue;
                    }
                    match e.name.strip_suffix(VERSIONS_SUFFIX) {
                        Some(key) => {
                            queue.push_back((path, prefix.clone(), Some(format!("{prefix}{key}"))))
                        }
                        None => queue.push_back((path, format!("{prefix}{}/", e.name), None)),
                    }
                    continue;
                }
                let Some(a) = e.attributes.as_ref().filter(|a| a.ttl_sec > 0) else {
                    continue;
                };
                let ttl = a.ttl_sec as u64;
                let key = versions_of
                    .clone()
                    .unwrap_or_else(|| format!("{prefix}{}", e.name));
                let expiry: Nanos =
                    (a.crtime.saturating_add(ttl as i64)).saturating_mul(1_000_000_000);
                let g = sample.stamped.entry(ttl).or_insert_with(|| StampedGroup {
                    first_expiry_ns: Nanos::MAX,
                    ..StampedGroup::default()
                });
                g.count += 1;
                g.versions += u64::from(versions_of.is_some());
                if expiry < g.first_expiry_ns {
                    g.first_expiry_ns = expiry;
                    g.example_key = key.clone();
                }
                match key_verdict(rules, &key, ttl, day) {
                    Ok(()) => {}
                    Err(None) => g.no_rule += 1,
                    Err(Some(rule)) => *g.shorter_than.entry(rule).or_default() += 1,
                }
            }
            if !full {
                break;
            }
            after = page.last().map(|e| e.name.clone()).unwrap_or_default();
        }
    }
    sample.complete = !cut && queue.is_empty();
    Ok(sample)
}

/// What one audit covers and may read, and its clock.
#[derive(Debug, Clone)]
pub struct AuditRun {
    /// Only this bucket (`--bucket`); `None` for all.
    pub only: Option<String>,
    pub budget: Budget,
    /// The lifecycle day (`time.day`), to compare rule days with TTLs.
    pub day: Duration,
    pub now: Nanos,
}

/// The master to read TTL volumes from, and its client TLS.
pub struct Master {
    /// gRPC address.
    pub addr: String,
    pub tls: Option<ClientTls>,
}

/// Audits the buckets under `root` that `run` covers. A failed reading is
/// an error in the report, never the end of the audit: the other readings
/// still count.
pub async fn audit(
    client: &FilerClient,
    master: Option<&Master>,
    root: &str,
    run: &AuditRun,
) -> Result<AuditReport, TtlScanError> {
    let (only, budget, day, now) = (run.only.as_deref(), run.budget, run.day, run.now);
    let mut report = AuditReport {
        at_ns: now,
        ..AuditReport::default()
    };
    let scan =
        list_bucket_configs(client, root)
            .await
            .map_err(|source| TtlScanError::ListBuckets {
                root: root.to_string(),
                source,
            })?;
    report.calls += 1;
    if let Some(b) = only {
        names::check_exists(b, scan.names()).map_err(TtlScanError::UnknownBucket)?;
    }
    let locations = filer_conf_ttls(client).await.unwrap_or_else(|e| {
        report.errors.push(e.to_string());
        Vec::new()
    });
    report.calls += 1;
    let mut ttl_volumes: BTreeMap<String, Vec<TtlVolume>> = BTreeMap::new();
    if let Some(m) = master {
        report.calls += 1;
        match crate::seaweed::volumes::list_volumes(&m.addr, m.tls.as_ref()).await {
            Ok(vs) => {
                for v in vs {
                    let (ttl_seconds, destroyed_at_s) = match v.ec_ttl {
                        Some((ttl, at)) => (ttl, Some(at)),
                        None => (volume_ttl_seconds(v.ttl), None),
                    };
                    if ttl_seconds == 0 {
                        continue;
                    }
                    let list = ttl_volumes.entry(v.collection).or_default();
                    if !list.iter().any(|t| t.id == v.id) {
                        list.push(TtlVolume {
                            id: v.id,
                            ttl_seconds,
                            destroyed_at_s,
                        });
                    }
                }
            }
            Err(e) => report.errors.push(format!("TTL volumes not audited: {e}")),
        }
    }
    for e in &scan.errors {
        if only.is_none_or(|b| b == e.bucket) {
            report
                .errors
                .push(format!("bucket {}: not audited: {}", e.bucket, e.reason));
        }
    }
    for info in scan
        .buckets
        .iter()
        .filter(|b| only.is_none_or(|o| o == b.name))
    {
        report.buckets += 1;
        let dir = join_path(root, &info.name);
        let entries =
            match sample_entries(client, &dir, &info.rules, day, budget, &mut report.calls).await {
                Ok(s) => {
                    report.entries_listed += s.listed;
                    if !s.complete {
                        report.sampled.push(info.name.clone());
                    }
                    Some(s)
                }
                Err(e) => {
                    report
                        .errors
                        .push(format!("bucket {}: entries not audited: {e}", info.name));
                    None
                }
            };
        let ttls = BucketTtls {
            bucket: info.to_config(),
            locations: locations
                .iter()
                .filter(|l| location_scope(&l.prefix, root, &info.name).is_some())
                .cloned()
                .collect(),
            entries,
            volumes: ttl_volumes.get(&info.name).cloned().unwrap_or_default(),
        };
        report.findings.extend(audit_bucket(&ttls, root, day, now));
    }
    Ok(report)
}

/// [`audit`] with the master found from `master` (`cluster.master`, else
/// the filer's first) and the buckets root `root` (empty: the filer's). No
/// master known is an error in the report: the TTL volumes go unaudited.
pub async fn audit_cluster(
    client: &FilerClient,
    master: &str,
    tls: Option<ClientTls>,
    root: &str,
    run: &AuditRun,
) -> Result<AuditReport, TtlScanError> {
    let root = match root.trim() {
        "" => client.buckets_root().await?,
        _ => root.to_string(),
    };
    let (master, missing) = match crate::seaweed::discovery::master_of(client, master).await {
        Ok(addr) => (Some(Master { addr, tls }), None),
        Err(e) => (None, Some(format!("TTL volumes not audited: {e}"))),
    };
    let mut r = audit(client, master.as_ref(), &root, run).await?;
    r.errors.extend(missing);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filer_conf_as_fs_configure_writes_it() {
        let doc = br#"{
          "version": 1,
          "locations": [
            {"locationPrefix": "/buckets/a/", "collection": "", "replication": "", "ttl": "1d",
             "diskType": "", "fsync": false, "volumeGrowthCount": 0, "readOnly": false},
            {"locationPrefix": "/buckets/b/", "collection": "bc", "replication": "001",
             "ttl": "", "fsync": true},
            {"locationPrefix": "/buckets/c/", "replication": "001", "ttl": "2w",
             "fsync": true, "volumeGrowthCount": 3}
          ]
        }"#;
        let l = parse_filer_conf(doc).unwrap();
        assert_eq!(l.len(), 2, "only locations with a ttl: {l:?}");
        assert_eq!(l[0].prefix, "/buckets/a/");
        assert!(l[0].other_flags.is_empty());
        assert_eq!(
            l[1].other_flags,
            vec!["-replication=001", "-fsync", "-volumeGrowthCount=3"]
        );
        assert_eq!(parse_filer_conf(b"").unwrap(), vec![]);
        assert!(parse_filer_conf(b"{").is_err());
    }

    /// The texts are the messages the audit printed before its errors were
    /// typed.
    #[test]
    fn messages_keep_their_old_wording() {
        let source = parse_filer_conf(b"{").unwrap_err();
        let e = TtlScanError::ConfNotJson {
            path: "/etc/seaweedfs/filer.conf".into(),
            source,
        };
        assert!(
            e.to_string()
                .starts_with("/etc/seaweedfs/filer.conf: not JSON: EOF while parsing"),
            "{e}"
        );
        let e = TtlScanError::ChunkedConf {
            path: "/etc/seaweedfs/filer.conf".into(),
        };
        assert_eq!(
            e.to_string(),
            "/etc/seaweedfs/filer.conf is stored in chunks, not inline as fs.configure writes \
             it; read it with `weed shell fs.configure` and check its ttl fields by hand"
        );
    }
}
