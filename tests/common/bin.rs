//! The `s3-lifecycled` binary under test: `run-once` against the shared cluster with an isolated
//! scope (its own buckets and cursor dir), its `--json` report, and raw invocations (any
//! subcommand, optionally with stdin). Every invocation starts from a clean environment: no
//! inherited `S3_LIFECYCLED__*` or `RUST_LOG`, only what the test passes.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::clock::rfc3339;
use super::cluster::Cluster;

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
/// A 10 s lifecycle day without due rounding: an object is due exactly 10 s per rule day after
/// it was written, for tests that need real gaps between writes or the wall clock.
pub const SHORT_DAY: [(&str, &str); 2] = [
    ("S3_LIFECYCLED__TIME__DAY", "10s"),
    ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
];
/// A hang guard, not a speed assertion: an invocation over a handful of test buckets that has
/// not ended after this long is stuck, and the test should say so instead of blocking the suite.
const HANG_GUARD: Duration = Duration::from_secs(600);

/// What one invocation of the binary produced.
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
    /// Asserts that after this pass `bucket` holds exactly `keys` (current objects).
    pub async fn assert_left(&self, s3: &aws_sdk_s3::Client, bucket: &str, keys: &[&str]) {
        assert_eq!(
            super::s3::list_keys(s3, bucket).await,
            super::s3::set(keys),
            "{}",
            self.describe()
        );
    }

    /// Everything about this invocation, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "s3-lifecycled {:?}\nexit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
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

    /// The shards whose outcome is `halted`.
    pub fn halted_shards(&self) -> Vec<Value> {
        self.shards()
            .into_iter()
            .filter(|s| s["outcome"] == "halted")
            .collect()
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

/// The `run-once --json` arguments for `scope` at `now` against the shared cluster, then `extra`.
pub fn run_once_args(c: &Cluster, scope: &Scope, now: Option<i64>, extra: &[&str]) -> Vec<String> {
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
    args
}

/// The `run-once` command for `scope` (cursor dir and `env` set), not yet spawned: for a test
/// that must signal the process itself.
pub fn run_once_command(
    c: &Cluster,
    scope: &Scope,
    now: Option<i64>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> tokio::process::Command {
    let mut all_env = vec![("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    all_env.extend_from_slice(env);
    command(&run_once_args(c, scope, now, extra), &all_env)
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
    let cmd = run_once_command(c, scope, now, extra, env);
    finish(cmd, run_once_args(c, scope, now, extra), None).await
}

/// Runs the binary with exactly `args` and `env`.
pub async fn run_raw(args: &[impl AsRef<str>], env: &[(&str, &str)]) -> Pass {
    finish(command(args, env), strings(args), None).await
}

/// Runs the binary with `args`, writing `stdin` to its standard input.
pub async fn run_with_stdin(args: &[impl AsRef<str>], stdin: &[u8]) -> Pass {
    finish(command(args, &[]), strings(args), Some(stdin)).await
}

/// How the binary ended with `args` when its stdout is a pipe whose reader is
/// already gone (`| head` after the first lines): its status and stderr. The
/// reader is closed before the process starts, so its first write fails
/// every time, however little it prints.
pub async fn run_into_closed_pipe(
    args: &[impl AsRef<str>],
    env: &[(&str, &str)],
) -> (std::process::ExitStatus, String) {
    let (read, write) = std::io::pipe().expect("pipe");
    drop(read);
    let mut cmd = command(args, env);
    cmd.stdout(Stdio::from(write));
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the binary ended within 120 s")
        .expect("the binary started");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts the binary stopped the way a Unix tool does on a closed pipe:
/// exit 141 (or 0 when it had nothing to write), without a word about the
/// pipe, and never a panic (exit 101 with a backtrace). Its own warnings on
/// stderr stay.
pub fn assert_quiet_on_closed_pipe(what: &str, status: std::process::ExitStatus, stderr: &str) {
    assert!(
        matches!(status.code(), Some(141 | 0)),
        "{what} into a closed pipe ended with {status:?}, not quietly: {stderr}"
    );
    for noise in ["panicked", "Broken pipe", "failed printing"] {
        assert!(!stderr.contains(noise), "{what}: {stderr}");
    }
}

/// The binary with `args` and `env` on a clean environment, output captured, killed on drop.
pub fn command(args: &[impl AsRef<str>], env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Inherited overrides would silently change what a test exercises.
    for (k, _) in std::env::vars() {
        if k.starts_with("S3_LIFECYCLED__") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    // The reclaim step waits up to 20 s for the master's figures to hold still
    // after a pass that deleted; only the reclaim tests read them, and they
    // set their own `RECLAIM__SETTLE`. Everywhere else one read is enough.
    cmd.env("S3_LIFECYCLED__RECLAIM__SETTLE", "0s");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn strings(args: &[impl AsRef<str>]) -> Vec<String> {
    args.iter().map(|a| a.as_ref().to_string()).collect()
}

/// Runs `cmd` (made with [`command`] or [`run_once_command`]) to its end; `args` for messages.
pub async fn finish(
    mut cmd: tokio::process::Command,
    args: Vec<String>,
    stdin: Option<&[u8]>,
) -> Pass {
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {BIN}: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(input)
            .await
            .unwrap_or_else(|e| panic!("writing stdin of {args:?}: {e}"));
        // Dropping the pipe closes it: the process sees end of input.
    }
    let out = match tokio::time::timeout(HANG_GUARD, child.wait_with_output()).await {
        Ok(r) => r.unwrap_or_else(|e| panic!("waiting for {BIN}: {e}")),
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => panic!("{args:?} did not finish within {HANG_GUARD:?} (hung?)"),
    };
    let p = Pass {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        args,
    };
    if std::env::var_os("E2E_DEBUG").is_some() {
        eprintln!("{}", p.describe());
    }
    p
}
