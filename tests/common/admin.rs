//! A real `weed admin` on loopback next to the shared cluster (explicit `-port.grpc`), its HTTP
//! API, and `s3-lifecycled worker` / Go `weed worker` processes connected to it
//! (docs/plugin-worker.md). Each admin has its own data directory; a watchdog stops it when the
//! test process exits, like the cluster.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::{Cluster, spawn_watchdog_for, spawn_weed, unique_suffix};
use super::serve::free_port;
use s3_lifecycled::plugin::admin_http;

/// A running `weed admin`.
pub struct WeedAdmin {
    /// HTTP port (UI and `/api/plugin/*`).
    pub http: u16,
    /// Worker gRPC port.
    pub grpc: u16,
    /// Its data directory (config, job history).
    pub data_dir: PathBuf,
    /// Its log.
    pub log_file: PathBuf,
    pid: u32,
    /// Its process; `None` for the admin inside `weed mini` (the cluster's own process).
    _child: Option<Child>,
}

impl WeedAdmin {
    /// Starts an admin for `c`'s master and waits until its plugin API answers.
    pub fn start(c: &Cluster) -> WeedAdmin {
        WeedAdmin::start_with_security(c, None)
    }

    /// [`WeedAdmin::start`] with `security` as the admin's `security.toml` (in its working
    /// directory, where weed looks first): `[grpc.admin]` there makes the worker port mutual TLS.
    pub fn start_with_security(c: &Cluster, security: Option<&str>) -> WeedAdmin {
        let data_dir = std::env::temp_dir().join(format!("s3lc-weed-admin-{}", unique_suffix()));
        std::fs::create_dir_all(&data_dir).unwrap();
        if let Some(toml) = security {
            std::fs::write(data_dir.join("security.toml"), toml).unwrap();
        }
        let log_file = data_dir.join("admin.log");
        let log = std::fs::File::create(&log_file).unwrap();
        let (http, grpc) = (free_port(), free_port());
        let args = vec![
            "admin".to_string(),
            format!("-port={http}"),
            format!("-port.grpc={grpc}"),
            format!("-master={}", c.master_weed_arg()),
            format!("-dataDir={}", data_dir.display()),
            "-ip=127.0.0.1".to_string(),
            "-iceberg.port=0".to_string(),
            "-lance.port=0".to_string(),
        ];
        let child = spawn_weed(&c.weed_bin, &args, &data_dir, &log)
            .unwrap_or_else(|e| panic!("spawning weed admin: {e}"));
        let pid = child.id();
        spawn_watchdog_for(pid, &data_dir, &[]).expect("admin watchdog");
        let admin = WeedAdmin {
            http,
            grpc,
            data_dir,
            log_file,
            pid,
            _child: Some(child),
        };
        // Both ports accept connections once the admin is up (no runtime here: callers may be
        // inside one).
        let started = Instant::now();
        while [http, grpc]
            .iter()
            .any(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_err())
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "weed admin not up after 60 s; log:\n{}",
                admin.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        admin
    }

    /// The admin that process `pid` runs on `http`/`grpc` (`weed mini`'s), logging to
    /// `log_file`.
    pub fn inside(pid: u32, http: u16, grpc: u16, data_dir: PathBuf, log_file: PathBuf) -> Self {
        WeedAdmin {
            http,
            grpc,
            data_dir,
            log_file,
            pid,
            _child: None,
        }
    }

    /// `host:http`.
    pub fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http)
    }

    /// The address workers are given: `host:http.grpc`.
    pub fn worker_arg(&self) -> String {
        format!("127.0.0.1:{}.{}", self.http, self.grpc)
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// An API call; panics on transport errors, returns (status, JSON).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        admin_http::call(
            None,
            &self.http_addr(),
            method,
            path,
            body.as_ref(),
            Duration::from_secs(900),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\nadmin log:\n{}", self.log_tail()))
    }

    /// `GET path`, 2xx required.
    pub async fn get(&self, path: &str) -> Value {
        let (status, v) = self.call("GET", path, None).await;
        assert!(
            (200..300).contains(&status),
            "GET {path}: HTTP {status}: {v}"
        );
        v
    }

    /// Worker ids registered for `s3_lifecycle`.
    pub async fn lifecycle_workers(&self) -> Vec<String> {
        let v = self.get("/api/plugin/workers").await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter(|w| w["Capabilities"].get("s3_lifecycle").is_some())
                    .filter_map(|w| w["WorkerID"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until some worker (a Go one: `whose` names it in the failure) serves
    /// `s3_lifecycle`.
    pub async fn wait_any_lifecycle_worker(&self, whose: &str) {
        let started = Instant::now();
        while self.lifecycle_workers().await.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{whose} never offered s3_lifecycle; admin log:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until exactly `ids` (in any order) serve `s3_lifecycle`.
    pub async fn wait_workers(&self, ids: &[&str]) {
        let want: std::collections::BTreeSet<String> = ids.iter().map(|s| s.to_string()).collect();
        let started = Instant::now();
        loop {
            let have: std::collections::BTreeSet<String> =
                self.lifecycle_workers().await.into_iter().collect();
            if have == want {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "workers {have:?}, want {want:?}; admin log:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Edits the stored `s3_lifecycle` config: `admin` values (ints) and `runtime` fields.
    pub async fn configure(&self, admin: &[(&str, i64)], runtime: &[(&str, Value)]) {
        let path = "/api/plugin/job-types/s3_lifecycle/config";
        let mut cfg = self.get(path).await;
        for (k, v) in admin {
            cfg["admin_config_values"][*k] = json!({"int64_value": v.to_string()});
        }
        for (k, v) in runtime {
            cfg["admin_runtime"][*k] = v.clone();
        }
        let (status, v) = self.call("PUT", path, Some(cfg)).await;
        assert!(
            (200..300).contains(&status),
            "PUT config: HTTP {status}: {v}"
        );
    }

    /// `POST /api/plugin/job-types/s3_lifecycle/run`: detect and run; the run's counts.
    pub async fn run(&self, timeout_s: u64) -> Value {
        let (status, v) = self
            .call(
                "POST",
                "/api/plugin/job-types/s3_lifecycle/run",
                Some(json!({"timeout_seconds": timeout_s})),
            )
            .await;
        assert_eq!(status, 200, "run: {v}\nadmin log:\n{}", self.log_tail());
        v
    }

    /// The tracked `s3_lifecycle` jobs.
    pub async fn jobs(&self) -> Vec<Value> {
        let v = self.get("/api/plugin/jobs").await;
        let all = v
            .as_array()
            .cloned()
            .or_else(|| v["jobs"].as_array().cloned())
            .unwrap_or_default();
        all.into_iter()
            .filter(|j| j["job_type"] == "s3_lifecycle")
            .collect()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// A running `s3-lifecycled worker`, killed on drop.
pub struct LifecycleWorker {
    /// Its id at the admin.
    pub id: String,
    /// The process.
    pub child: tokio::process::Child,
    /// Its stderr log file.
    pub log: PathBuf,
}

impl LifecycleWorker {
    /// Starts `worker --admin <admin> --id <id> --state-dir <state>` with `env`.
    pub fn start(
        admin: &WeedAdmin,
        id: &str,
        state: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Self {
        let log = state.join(format!("{id}.log"));
        std::fs::create_dir_all(state).unwrap();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let args = [
            "worker".to_string(),
            "--admin".into(),
            admin.worker_arg(),
            "--id".into(),
            id.into(),
            "--state-dir".into(),
            state.display().to_string(),
        ];
        let mut cmd = super::bin::command(&args, env);
        cmd.stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file));
        let child = cmd.spawn().expect("spawning s3-lifecycled worker");
        LifecycleWorker {
            id: id.to_string(),
            child,
            log,
        }
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
