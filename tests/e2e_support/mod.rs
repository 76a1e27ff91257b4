//! End-to-end support: running `s3-lifecycled run-once` against the shared cluster with an
//! isolated cursor dir and bucket selection, parsing its `--json` report, time travel with
//! `--now`, and reading the effects back through the S3 API (the source of truth).
//!
//! Use from a test file with `mod common; mod e2e_support;` (this module uses `crate::common`).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::BucketVersioningStatus;
use serde_json::Value;

use crate::common::{self, Cluster};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_s3-lifecycled");
/// Keys every `deletes` object must carry (contract: always present, 0 when none).
pub const DELETE_KEYS: [&str; 7] = [
    "DONE",
    "NOOP_RESOLVED",
    "SKIPPED_OBJECT_LOCK",
    "RETRY_LATER",
    "BLOCKED",
    "RPC_ERROR",
    "DRY_RUN",
];
/// A hang guard, not a speed assertion: a pass over a handful of test buckets that has not ended
/// after this long is stuck, and the test should say so instead of blocking the whole suite.
const HANG_GUARD: Duration = Duration::from_secs(600);
/// One lifecycle day (the default `time.day`).
pub const DAY_NS: i64 = 86_400 * 1_000_000_000;
/// One hour in ns.
pub const HOUR_NS: i64 = 3_600 * 1_000_000_000;

/// RFC 3339 (whole seconds, UTC) for `ns` since the epoch, for `--now`.
pub fn rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let t = time::OffsetDateTime::from_unix_timestamp(secs).expect("timestamp in range");
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("formattable")
}

/// `base` plus `days` days and `hours` hours, in ns. Tests pick offsets well clear of the default
/// next-midnight-UTC due rounding: "not yet due" checks stay below `TTL` days, "due" checks go
/// past `TTL + 1` days (rounding moves a due time forward by less than one day).
pub fn plus(base: i64, days: i64, hours: i64) -> i64 {
    base + days * DAY_NS + hours * HOUR_NS
}

/// What one `run-once` invocation produced.
#[derive(Debug)]
pub struct Pass {
    /// Process exit code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The arguments, for failure messages.
    pub args: Vec<String>,
}

impl Pass {
    /// Everything about this invocation, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "run-once {:?}\nexit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args, self.code, self.stdout, self.stderr
        )
    }

    /// The `--json` report; panics with the whole output when stdout is not one JSON document.
    #[track_caller]
    pub fn json(&self) -> Report {
        let v: Value = serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}",
                self.describe()
            )
        });
        Report {
            v,
            context: self.describe(),
        }
    }

    /// Asserts exit 0 and outcome `completed` (every shard completed), and returns the report.
    #[track_caller]
    pub fn ok(&self) -> Report {
        assert_eq!(self.code, 0, "expected exit 0:\n{}", self.describe());
        let r = self.json();
        assert_eq!(
            r.v["outcome"],
            "completed",
            "pass outcome:\n{}",
            self.describe()
        );
        for s in r.shards() {
            assert_eq!(
                s["outcome"],
                "completed",
                "shard {} outcome:\n{}",
                s["shard"],
                self.describe()
            );
        }
        r
    }
}

/// A parsed `--json` report plus the invocation's output for messages.
#[derive(Debug)]
pub struct Report {
    /// The document.
    pub v: Value,
    context: String,
}

impl Report {
    /// The run's invocation and output, for assertion messages.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// `totals.deletes.<key>`; panics when missing or not an integer (every key must be present).
    pub fn total(&self, key: &str) -> i64 {
        deletes_value(&self.v["totals"]["deletes"], key, &self.context)
    }

    /// `totals.<key>` (e.g. `matches`, `events_scanned`).
    pub fn totals(&self, key: &str) -> i64 {
        self.v["totals"][key]
            .as_i64()
            .unwrap_or_else(|| panic!("totals.{key} missing or not an integer:\n{}", self.context))
    }

    /// The `shards` array.
    pub fn shards(&self) -> Vec<Value> {
        self.v["shards"]
            .as_array()
            .unwrap_or_else(|| panic!("report has no `shards` array:\n{}", self.context))
            .clone()
    }

    /// Every recovery reason any shard reported for `bucket`.
    pub fn recovery_reasons(&self, bucket: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in self.shards() {
            for r in s["recovery"].as_array().into_iter().flatten() {
                if r["bucket"] == bucket {
                    out.insert(r["reason"].as_str().unwrap_or("<non-string>").to_string());
                }
            }
        }
        out
    }

    /// Buckets named in `bucket_errors`.
    pub fn bucket_errors(&self) -> Vec<(String, String)> {
        self.v["bucket_errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["bucket"].as_str().unwrap_or_default().to_string(),
                    e["reason"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// Asserts that every `deletes` object (totals and per shard) has all seven keys.
    pub fn assert_delete_keys_present(&self) {
        for k in DELETE_KEYS {
            deletes_value(&self.v["totals"]["deletes"], k, &self.context);
        }
        for s in self.shards() {
            for k in DELETE_KEYS {
                deletes_value(&s["deletes"], k, &self.context);
            }
        }
    }

    /// Asserts that the pass deleted nothing and hit nothing unresolved: every `deletes` counter
    /// is 0 except `NOOP_RESOLVED` (a re-sent delete of something already gone).
    pub fn assert_no_deletes(&self) {
        for k in DELETE_KEYS.iter().filter(|k| **k != "NOOP_RESOLVED") {
            assert_eq!(
                self.total(k),
                0,
                "totals.deletes.{k} should be 0:\n{}",
                self.context
            );
        }
    }
}

fn deletes_value(deletes: &Value, key: &str, context: &str) -> i64 {
    deletes[key]
        .as_i64()
        .unwrap_or_else(|| panic!("deletes.{key} missing or not an integer:\n{context}"))
}

/// One test's isolation: its buckets and its own cursor dir.
#[derive(Debug, Clone)]
pub struct Scope {
    /// `--buckets`.
    pub buckets: Vec<String>,
    /// `S3_LIFECYCLED__CURSOR__DIR`.
    pub cursor_dir: String,
}

impl Scope {
    /// A scope over `buckets` with a cursor dir named after the first one (bucket names are unique).
    pub fn new(buckets: &[&str]) -> Scope {
        let first = buckets.first().copied().unwrap_or("none");
        Scope {
            buckets: buckets.iter().map(|b| b.to_string()).collect(),
            cursor_dir: format!("/etc/s3/lifecycle/e2e-{first}"),
        }
    }
}

/// Runs `run-once --json` for `scope` at `now` against the shared cluster, with `extra` flags
/// and `env` overrides.
pub async fn run_once(
    c: &Cluster,
    scope: &Scope,
    now: Option<i64>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Pass {
    let mut args: Vec<String> = vec![
        "run-once".into(),
        "--filer".into(),
        c.filer_grpc_addr().to_string(),
        "--s3-grpc".into(),
        c.s3_grpc_addr().to_string(),
        "--buckets".into(),
        scope.buckets.join(","),
        "--json".into(),
    ];
    if let Some(n) = now {
        args.push("--now".into());
        args.push(rfc3339(n));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut all_env = vec![("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    all_env.extend_from_slice(env);
    run_raw(&args, &all_env).await
}

/// Runs the binary with exactly `args` and `env` (plus a clean `S3_LIFECYCLED__*` environment).
pub async fn run_raw(args: &[String], env: &[(&str, &str)]) -> Pass {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Inherited overrides would silently change what a test exercises.
    for (k, _) in std::env::vars() {
        if k.starts_with("S3_LIFECYCLED__") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {BIN}: {e}"));
    let out = match tokio::time::timeout(HANG_GUARD, child.wait_with_output()).await {
        Ok(r) => r.unwrap_or_else(|e| panic!("waiting for {BIN}: {e}")),
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => panic!("run-once {args:?} did not finish within {HANG_GUARD:?} (hung?)"),
    };
    let p = Pass {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        args: args.to_vec(),
    };
    if std::env::var_os("E2E_DEBUG").is_some() {
        eprintln!("{}", p.describe());
    }
    p
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

/// Turns versioning on.
pub async fn enable_versioning(s3: &aws_sdk_s3::Client, bucket: &str) {
    common::set_versioning(s3, bucket, BucketVersioningStatus::Enabled).await;
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

/// A set of string keys, for compact expectations.
pub fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// The lifecycle document wrapper around `rules` (each a `<Rule>…</Rule>`).
pub fn lifecycle(rules: &str) -> Vec<u8> {
    format!(
        "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{rules}</LifecycleConfiguration>"
    )
    .into_bytes()
}

/// Current time in ns (test support may read the clock).
pub fn now() -> i64 {
    common::now_ns()
}
