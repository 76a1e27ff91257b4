//! A running `s3-lifecycled serve` against the shared cluster on free loopback ports: its admin
//! CLI (`trigger`, `status`), its HTTP side, stopping it with a signal; and temporary dirs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::bin::{BIN, Pass, SHORT_DAY, Scope, command, run_raw};
use super::cluster::{Cluster, cluster};
use super::http;
use super::wait::eventually;

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TmpDir(pub PathBuf);

impl TmpDir {
    /// Creates `<tmp>/<prefix>-<pid>-<random>`.
    pub fn new(prefix: &str) -> TmpDir {
        let p = std::env::temp_dir().join(format!(
            "{prefix}-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Environment of a service under test: the cluster, `scope`'s buckets and cursor dir, a 10 s
/// day without due rounding ([`SHORT_DAY`]), and passes only on trigger (no schedule) unless the
/// test sets one.
pub fn serve_env(scope: &Scope) -> Vec<(String, String)> {
    serve_env_on(cluster(), scope)
}

/// [`serve_env`] against cluster `c` instead of the shared one.
pub fn serve_env_on(c: &Cluster, scope: &Scope) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        (
            "S3_LIFECYCLED__CLUSTER__FILER".into(),
            c.filer_grpc_addr().to_string(),
        ),
        (
            "S3_LIFECYCLED__CLUSTER__S3_GRPC".into(),
            c.s3_grpc_addr().to_string(),
        ),
        (
            "S3_LIFECYCLED__PASS__BUCKETS".into(),
            scope.buckets.join(","),
        ),
        (
            "S3_LIFECYCLED__CURSOR__DIR".into(),
            scope.cursor_dir.clone(),
        ),
        ("S3_LIFECYCLED__SERVICE__SCHEDULE".into(), "off".into()),
    ];
    env.extend(
        SHORT_DAY
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    env
}

/// A running `serve` process; killed when dropped (the command is `kill_on_drop`).
pub struct Serve {
    child: Option<tokio::process::Child>,
    /// Admin gRPC address.
    pub admin: SocketAddr,
    /// HTTP address (`/ready`, `/metrics`, the status page).
    pub http: SocketAddr,
    /// Its stderr (the log).
    pub log: PathBuf,
    _dir: TmpDir,
}

impl Serve {
    /// Spawns `serve` with [`serve_env`] plus `extra` and waits until `/ready` answers 200.
    pub async fn start(scope: &Scope, extra: &[(&str, &str)]) -> Serve {
        Serve::start_on(cluster(), scope, extra).await
    }

    /// [`Serve::start`] against cluster `c` instead of the shared one.
    pub async fn start_on(c: &Cluster, scope: &Scope, extra: &[(&str, &str)]) -> Serve {
        let mut s = Serve::spawn_on(c, scope, extra);
        s.wait_ready(200, "").await;
        s
    }

    /// Spawns `serve` like [`Serve::start`] without waiting for it.
    pub fn spawn(scope: &Scope, extra: &[(&str, &str)]) -> Serve {
        Serve::spawn_on(cluster(), scope, extra)
    }

    fn spawn_on(c: &Cluster, scope: &Scope, extra: &[(&str, &str)]) -> Serve {
        let dir = TmpDir::new("serve");
        let log = dir.path().join("serve.log");
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut env: Vec<(String, String)> = vec![
            (
                "S3_LIFECYCLED__SERVICE__ADMIN_LISTEN".into(),
                admin.to_string(),
            ),
            (
                "S3_LIFECYCLED__SERVICE__HTTP_LISTEN".into(),
                http.to_string(),
            ),
        ];
        env.extend(serve_env_on(c, scope));
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut cmd = command(&["serve"], &env);
        cmd.stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {BIN} serve: {e}"));
        Serve {
            child: Some(child),
            admin,
            http,
            log,
            _dir: dir,
        }
    }

    /// Waits until `/ready` answers `status` (200: ready; 503: up but not ready) with a body
    /// that contains `says`; returns the body.
    pub async fn wait_ready(&mut self, status: u16, says: &str) -> String {
        let ready = async || {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve exited early ({st}): {}", self.log_text());
            }
            match http::get_async(self.http, "/ready").await {
                Ok(r) if r.status == status && String::from_utf8_lossy(&r.body).contains(says) => {
                    Ok(String::from_utf8_lossy(&r.body).into_owned())
                }
                other => Err(format!(
                    "/ready: {:?}, want {status} saying {says:?}; log: {}",
                    other.map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned())),
                    self.log_text()
                )),
            }
        };
        eventually(Duration::from_secs(60), Duration::from_millis(100), ready).await
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs an admin subcommand (`trigger`, `status`) against this service.
    pub async fn cli(&self, args: &[&str]) -> Pass {
        let admin = self.admin.to_string();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--admin", admin.as_str()]);
        run_raw(&all, &[]).await
    }

    /// `trigger` with `extra` flags: returns (run_id, already_running).
    pub async fn trigger(&self, extra: &[&str]) -> (String, bool) {
        let mut args = vec!["trigger"];
        args.extend_from_slice(extra);
        let out = self.cli(&args).await;
        assert_eq!(out.code, 0, "trigger failed:\n{}", out.describe());
        let id = out
            .stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix("run_id="))
            .unwrap_or_else(|| panic!("no run_id in {}", out.stdout))
            .to_string();
        (id, out.stdout.contains("already_running=true"))
    }

    /// `trigger` that starts a pass of its own: while another (a scheduled one) runs, the
    /// trigger would answer that one's id, so this waits for it to end and asks again.
    pub async fn trigger_new(&self, extra: &[&str]) -> String {
        for _ in 0..10 {
            let (id, already_running) = self.trigger(extra).await;
            if !already_running {
                return id;
            }
            self.wait_last(&id, Duration::from_secs(60)).await;
        }
        panic!(
            "every trigger found a pass already running\n{}",
            self.log_text()
        );
    }

    /// `status --json`.
    pub async fn status(&self) -> Value {
        self.cli_json(&["status", "--json"]).await
    }

    /// `status --last --json` (`null` when no pass finished yet).
    pub async fn last(&self) -> Value {
        self.cli_json(&["status", "--last", "--json"]).await
    }

    async fn cli_json(&self, args: &[&str]) -> Value {
        let out = self.cli(args).await;
        assert_eq!(out.code, 0, "{}", out.describe());
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.describe()))
    }

    /// Waits until the last finished pass is `run_id`; returns it.
    pub async fn wait_last(&self, run_id: &str, within: Duration) -> Value {
        eventually(within, Duration::from_millis(200), async || {
            let last = self.last().await;
            if last["run_id"] == run_id {
                Ok(last)
            } else {
                Err(format!(
                    "pass {run_id} not finished; last={last} log={}",
                    self.log_text()
                ))
            }
        })
        .await
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .and_then(tokio::process::Child::id)
            .expect("serve still running")
    }

    /// Sends `signal` and waits for the exit; returns (code, time to exit).
    pub async fn stop_with(&mut self, signal: &str, within: Duration) -> (i32, Duration) {
        let mut child = self.child.take().unwrap();
        let pid = child.id().expect("serve still running").to_string();
        let t = Instant::now();
        let ok = tokio::process::Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .await
            .unwrap()
            .success();
        assert!(ok, "kill -s {signal} {pid} failed");
        match tokio::time::timeout(within, child.wait()).await {
            Ok(st) => (st.unwrap().code().unwrap_or(-1), t.elapsed()),
            Err(_) => {
                let _ = child.kill().await;
                panic!(
                    "serve did not exit within {within:?} of {signal}: {}",
                    self.log_text()
                );
            }
        }
    }
}
