//! Shared by the `service_*` tests: spawn the real `s3-lifecycled serve`
//! binary against the loopback cluster on free ports, call the admin CLI,
//! scrape HTTP, stop the process with a signal.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{cluster, http};

pub const BIN: &str = env!("CARGO_BIN_EXE_s3-lifecycled");

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub fn days_xml() -> Vec<u8> {
    b"<LifecycleConfiguration><Rule><ID>d1</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>"
        .to_vec()
}

pub fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:06}")).collect()
}

pub async fn count_objects(bucket: &str) -> usize {
    let s3 = cluster().s3_client();
    let mut n = 0;
    let mut token = None;
    loop {
        let r = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token)
            .send()
            .await
            .unwrap();
        n += r.contents().len();
        token = r.next_continuation_token().map(str::to_string);
        if token.is_none() {
            return n;
        }
    }
}

/// A running `serve` process; killed on drop.
pub struct Serve {
    pub child: Option<Child>,
    pub admin: SocketAddr,
    pub http: SocketAddr,
    pub log: PathBuf,
    _dir: TmpDir,
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TmpDir(pub PathBuf);

impl TmpDir {
    pub fn new(prefix: &str) -> TmpDir {
        let p = std::env::temp_dir().join(format!(
            "{prefix}-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Environment every spawned process gets: the cluster, a 10 s day without
/// due rounding (objects written now are due after 10 s), the cursor dir.
pub fn base_env(bucket: &str, cursor_dir: &str) -> Vec<(String, String)> {
    let c = cluster();
    vec![
        (
            "S3_LIFECYCLED__CLUSTER__FILER".into(),
            c.filer_grpc_addr().to_string(),
        ),
        (
            "S3_LIFECYCLED__CLUSTER__S3_GRPC".into(),
            c.s3_grpc_addr().to_string(),
        ),
        ("S3_LIFECYCLED__PASS__BUCKETS".into(), bucket.into()),
        ("S3_LIFECYCLED__CURSOR__DIR".into(), cursor_dir.into()),
        ("S3_LIFECYCLED__TIME__DAY".into(), "10s".into()),
        ("S3_LIFECYCLED__TIME__DUE_ROUNDING".into(), "none".into()),
        // Passes only on trigger unless a test sets a schedule.
        ("S3_LIFECYCLED__SERVICE__SCHEDULE".into(), "off".into()),
    ]
}

impl Serve {
    /// Spawns `serve` with `base_env` plus `extra` and waits until `/ready`
    /// answers 200.
    pub fn start(bucket: &str, cursor_dir: &str, extra: &[(&str, &str)]) -> Serve {
        let dir = TmpDir::new("serve");
        let log = dir.path().join("serve.log");
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .env_remove("RUST_LOG")
            .env("S3_LIFECYCLED__SERVICE__ADMIN_LISTEN", admin.to_string())
            .env("S3_LIFECYCLED__SERVICE__HTTP_LISTEN", http.to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in base_env(bucket, cursor_dir) {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let mut s = Serve {
            child: Some(child),
            admin,
            http,
            log,
            _dir: dir,
        };
        let t = Instant::now();
        loop {
            if let Ok(r) = http::get(s.http, "/ready", &[])
                && r.status == 200
            {
                return s;
            }
            if let Some(st) = s.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve exited early ({st}): {}", s.log_text());
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "serve not ready after 60 s: {}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs an admin subcommand (`trigger`, `status`) against this service.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .args(["--admin", &self.admin.to_string()])
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    }

    /// `trigger`: returns (run_id, already_running).
    pub fn trigger(&self, extra: &[&str]) -> (String, bool) {
        let mut args = vec!["trigger"];
        args.extend_from_slice(extra);
        let out = self.cli(&args);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "trigger failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix("run_id="))
            .unwrap_or_else(|| panic!("no run_id in {stdout}"))
            .to_string();
        (id, stdout.contains("already_running=true"))
    }

    /// `status --json`.
    pub fn status(&self) -> serde_json::Value {
        let out = self.cli(&["status", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `status --last --json` (`null` when no pass finished yet).
    pub fn last(&self) -> serde_json::Value {
        let out = self.cli(&["status", "--last", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Waits until the last finished pass is `run_id`; returns it.
    pub fn wait_last(&self, run_id: &str, within: Duration) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let last = self.last();
            if last["run_id"] == run_id {
                return last;
            }
            assert!(
                t.elapsed() < within,
                "pass {run_id} did not finish within {within:?}; last={last} log={}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Sends `signal` and waits for the exit; returns (code, time to exit).
    pub fn stop_with(&mut self, signal: &str, within: Duration) -> (i32, Duration) {
        let mut child = self.child.take().unwrap();
        let t = Instant::now();
        let ok = Command::new("kill")
            .args(["-s", signal, &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -s {signal} failed");
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return (st.code().unwrap_or(-1), t.elapsed());
            }
            if t.elapsed() > within {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "serve did not exit within {within:?} of {signal}: {}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `run-once --json` over the same bucket and cursor dir, with `extra`
/// environment on top of `base_env`.
pub fn run_once_with(
    bucket: &str,
    cursor_dir: &str,
    extra: &[(&str, &str)],
) -> (i32, serde_json::Value, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["run-once", "--json"]).env("RUST_LOG", "warn");
    for (k, v) in base_env(bucket, cursor_dir) {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("run-once printed no JSON ({e}); stdout={stdout} stderr={stderr}")
    });
    (out.status.code().unwrap_or(-1), json, stderr)
}
