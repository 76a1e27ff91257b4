//! A SeaweedFS cluster as four processes (`weed master`, `weed volume`, `weed filer`, `weed s3`)
//! so fault tests can stop and restart the S3 gateway or the filer on their own while a pass runs
//! (docs/test-cluster.md#split-cluster). One per test binary, started lazily; it derefs to a
//! [`Cluster`], so every helper that takes a `&Cluster` (S3 client, bulk PUTs, `run_once`, …)
//! works against it unchanged.
//!
//! [`multi_cluster`] is the same with a second filer (its own store) and a second gateway:
//! one master, one volume server, two filers, two S3 gateways (docs/test-cluster.md#multi-cluster).

use std::ops::Deref;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::cluster::{
    Cluster, MASTER_TOML, POLL, Ports, READY_LIMIT, START_ATTEMPTS, failed_checks, find_weed,
    log_tail, pick_ports, spawn_weed, unique_suffix, unix_sockets,
};

/// How long a SIGTERM gets before SIGKILL. The filer's graceful stop waits up to 15 s for open
/// metadata subscriptions (docs/test-cluster.md#stopping), so a little more than that.
const TERM_GRACE: Duration = Duration::from_secs(20);

/// One of the four processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `weed master`.
    Master,
    /// `weed volume`.
    Volume,
    /// `weed filer` (leveldb2 store in its own dir: metadata and meta-log survive a restart).
    Filer,
    /// `weed s3` (LifecycleDelete is on its gRPC port).
    S3,
    /// The second `weed filer` of a [`multi_cluster`] (its own leveldb2 store).
    Filer2,
    /// The second `weed s3` of a [`multi_cluster`].
    S32,
}

impl Role {
    const ALL: [Role; 4] = [Role::Master, Role::Volume, Role::Filer, Role::S3];
    /// The roles of a [`multi_cluster`], in start order: filers before gateways.
    const MULTI: [Role; 6] = [
        Role::Master,
        Role::Volume,
        Role::Filer,
        Role::Filer2,
        Role::S3,
        Role::S32,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The `weed` subcommand that runs it.
    fn subcommand(self) -> &'static str {
        match self {
            Role::Filer2 => "filer",
            Role::S32 => "s3",
            other => other.name(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Volume => "volume",
            Role::Filer => "filer",
            Role::S3 => "s3",
            Role::Filer2 => "filer2",
            Role::S32 => "s3-2",
        }
    }
}

/// A running split cluster on 127.0.0.1 whose filer and gateway can be restarted on the same ports.
#[derive(Debug)]
pub struct SplitCluster {
    /// The addresses, data dir and binary; what the shared helpers take.
    cluster: Cluster,
    /// The live process of each role (`None` while stopped), indexed by [`Role`].
    procs: Mutex<[Option<Child>; 6]>,
    /// A [`multi_cluster`]'s second filer and gateway: their HTTP and gRPC ports in the
    /// `filer`, `filer_grpc`, `s3` and `s3_grpc` fields (the others unused).
    second: Option<Ports>,
}

impl Deref for SplitCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

static SPLIT: OnceLock<Result<SplitCluster, String>> = OnceLock::new();
static MULTI: OnceLock<Result<SplitCluster, String>> = OnceLock::new();

/// The multi cluster shared by every test in this binary (one master, one volume server, two
/// filers with their own stores, two gateways each given both filers), started on first use.
pub fn multi_cluster() -> &'static SplitCluster {
    match MULTI.get_or_init(|| start_with_retries_as(true)) {
        Ok(c) => c,
        Err(e) => panic!("multi SeaweedFS test cluster unavailable: {e}"),
    }
}

/// The split cluster shared by every test in this binary, started on first use. Panics (failing
/// the caller and every later one with the same message) when it cannot start.
pub fn split_cluster() -> &'static SplitCluster {
    match SPLIT.get_or_init(start_with_retries) {
        Ok(c) => c,
        Err(e) => panic!("split SeaweedFS test cluster unavailable: {e}"),
    }
}

fn start_with_retries() -> Result<SplitCluster, String> {
    start_with_retries_as(false)
}

fn start_with_retries_as(multi: bool) -> Result<SplitCluster, String> {
    let weed = find_weed()?;
    let mut errors = Vec::new();
    for attempt in 1..=START_ATTEMPTS {
        let ports = pick_ports()?;
        let second = if multi {
            // A second free block that does not overlap the first (neither is bound yet).
            let mut second = pick_ports()?;
            while second.master.abs_diff(ports.master) < 8 {
                second = pick_ports()?;
            }
            Some(second)
        } else {
            None
        };
        match SplitCluster::start(&weed, ports, second) {
            Ok(c) => return Ok(c),
            Err(e) => errors.push(format!("attempt {attempt} (ports {}..): {e}", ports.master)),
        }
    }
    Err(errors.join("\n\n"))
}

impl SplitCluster {
    fn start(weed: &Path, ports: Ports, second: Option<Ports>) -> Result<SplitCluster, String> {
        let data_dir = std::env::temp_dir().join(format!("s3lc-weed-split-{}", unique_suffix()));
        for sub in ["master", "volume", "filer", "filer2"] {
            std::fs::create_dir_all(data_dir.join(sub))
                .map_err(|e| format!("creating {}/{sub}: {e}", data_dir.display()))?;
        }
        // Read from the working directory by `weed master` (docs/test-cluster.md#volumes).
        std::fs::write(data_dir.join("master.toml"), MASTER_TOML)
            .map_err(|e| format!("writing master.toml: {e}"))?;
        let split = SplitCluster {
            cluster: Cluster {
                ports,
                pid: 0,
                log_file: data_dir.join("master.log"),
                data_dir,
                weed_bin: weed.to_path_buf(),
            },
            procs: Mutex::new([None, None, None, None, None, None]),
            second,
        };
        spawn_watchdog(&split.cluster, second)
            .map_err(|e| format!("spawning the watchdog: {e}"))?;
        let mut result = Ok(());
        for &role in split.roles() {
            if role == Role::Filer2 {
                // A fresh filer copies its store from the earliest filer the master knows, and
                // exits when that peer refuses the connection: filer 1 registers with the master
                // before its gRPC port listens (docs/test-cluster.md#multi-cluster).
                result = split.wait_accepting(Role::Filer, split.ports.filer_grpc);
                if result.is_err() {
                    break;
                }
            }
            result = split.spawn(role);
            if result.is_err() {
                break;
            }
        }
        let result = result.and_then(|()| split.wait_ready());
        match result {
            Ok(()) => {
                let mut split = split;
                let pid = split.procs.get_mut().expect("not poisoned")[0]
                    .as_ref()
                    .map_or(0, Child::id);
                split.cluster.pid = pid;
                Ok(split)
            }
            Err(e) => {
                for &role in split.roles() {
                    if let Some(mut child) = split.lock()[role.index()].take() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
                Err(e)
            }
        }
    }

    /// The roles this cluster runs.
    fn roles(&self) -> &'static [Role] {
        if self.second.is_some() {
            &Role::MULTI
        } else {
            &Role::ALL
        }
    }

    /// The second filer's gRPC address (a [`multi_cluster`] only).
    pub fn filer2_grpc_addr(&self) -> std::net::SocketAddr {
        super::cluster::loopback(self.second_ports().filer_grpc)
    }

    /// The second gateway's gRPC address (a [`multi_cluster`] only).
    pub fn s3_2_grpc_addr(&self) -> std::net::SocketAddr {
        super::cluster::loopback(self.second_ports().s3_grpc)
    }

    /// The second gateway's S3 endpoint URL (a [`multi_cluster`] only).
    pub fn s3_2_endpoint(&self) -> String {
        format!(
            "http://{}",
            super::cluster::loopback(self.second_ports().s3)
        )
    }

    /// Waits until bucket discovery on each filer finds `bucket`, with lifecycle rules when
    /// `rules` (a multi cluster only). Filers with their own stores apply each other's changes
    /// seconds apart; an object PUT through a filer that lacks the bucket yet makes the bucket
    /// directory a bare parent there, and that entry, replicated, replaced the bucket entry and
    /// its lifecycle document on both (docs/test-cluster.md#multi-cluster). Call it after
    /// creating a bucket and after putting its rules, before writing objects.
    pub async fn bucket_on_both_filers(&self, bucket: &str, rules: bool) {
        use s3_lifecycled::seaweed::buckets::list_bucket_configs;
        use s3_lifecycled::seaweed::filer::FilerClient;
        super::wait::eventually(
            Duration::from_secs(120),
            Duration::from_millis(200),
            async || {
                for addr in [self.filer_grpc_addr(), self.filer2_grpc_addr()] {
                    let fc = FilerClient::connect(&addr.to_string())
                        .await
                        .map_err(|e| e.to_string())?;
                    let root = fc.buckets_root().await.map_err(|e| e.to_string())?;
                    let scan = list_bucket_configs(&fc, &root)
                        .await
                        .map_err(|e| e.to_string())?;
                    let found = scan.buckets.iter().find(|b| b.name == bucket);
                    match found {
                        None => return Err(format!("filer {addr} lacks bucket {bucket}")),
                        Some(b) if rules && !b.has_rules() => {
                            return Err(format!("filer {addr} lacks {bucket}'s lifecycle rules"));
                        }
                        Some(_) => {}
                    }
                }
                Ok(())
            },
        )
        .await;
    }

    /// Puts `bucket`'s lifecycle document through gateway 1 and waits until both filers hold
    /// rules for it. The PUT's own check looks the bucket up on filer 1, which may not have
    /// applied a change made through filer 2 yet (a gateway fails over while filer 1
    /// restarts), so the PUT is repeated until that check passes; a repeated PUT of the same
    /// document changes nothing.
    pub async fn put_rules(&self, bucket: &str, xml: &[u8]) {
        super::wait::eventually(
            Duration::from_secs(120),
            Duration::from_millis(500),
            async || {
                self.put_lifecycle_xml(bucket, xml)
                    .await
                    .map_err(|e| format!("{e:#}"))
            },
        )
        .await;
        self.bucket_on_both_filers(bucket, true).await;
    }

    fn second_ports(&self) -> Ports {
        self.second
            .expect("only a multi cluster has a second filer and gateway")
    }

    /// `host:httpPort.grpcPort` of the second filer.
    fn filer2_weed_arg(&self) -> String {
        let p = self.second_ports();
        format!("127.0.0.1:{}.{}", p.filer, p.filer_grpc)
    }

    fn lock(&self) -> MutexGuard<'_, [Option<Child>; 6]> {
        // A test that panicked while holding the lock left the children as they were.
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The log file of `role` (stdout and stderr, appended across restarts).
    pub fn log_path(&self, role: Role) -> PathBuf {
        self.data_dir.join(format!("{}.log", role.name()))
    }

    /// The last `lines` lines of `role`'s log, for failure messages.
    pub fn role_log_tail(&self, role: Role, lines: usize) -> String {
        log_tail(&self.log_path(role), lines)
    }

    /// The pid of `role`'s running process, or `None` while it is stopped.
    pub fn pid(&self, role: Role) -> Option<u32> {
        self.lock()[role.index()].as_ref().map(Child::id)
    }

    fn args(&self, role: Role) -> Vec<String> {
        let p = self.ports;
        let d = &self.data_dir;
        let mut args = vec!["-v=0".to_string(), role.subcommand().to_string()];
        let more: Vec<String> = match role {
            Role::Master => vec![
                format!("-mdir={}", d.join("master").display()),
                "-ip=127.0.0.1".into(),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", p.master),
                format!("-port.grpc={}", p.master_grpc),
                "-telemetry=false".into(),
                "-volumeSizeLimitMB=64".into(),
            ],
            Role::Volume => vec![
                format!("-dir={}", d.join("volume").display()),
                "-max=300".into(),
                format!("-mserver={}", self.master_weed_arg()),
                "-ip=127.0.0.1".into(),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", p.volume),
                format!("-port.grpc={}", p.volume_grpc),
                "-preStopSeconds=0".into(),
            ],
            Role::Filer => vec![
                format!("-master={}", self.master_weed_arg()),
                // No filer.toml: the embedded leveldb2 store in this dir, which a restart reopens.
                format!("-defaultStoreDir={}", d.join("filer").display()),
                format!("-localSocket={}", d.join("filer.sock").display()),
                "-ip=127.0.0.1".into(),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", p.filer),
                format!("-port.grpc={}", p.filer_grpc),
            ],
            Role::Filer2 => vec![
                format!("-master={}", self.master_weed_arg()),
                format!("-defaultStoreDir={}", d.join("filer2").display()),
                format!("-localSocket={}", d.join("filer2.sock").display()),
                "-ip=127.0.0.1".into(),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", self.second_ports().filer),
                format!("-port.grpc={}", self.second_ports().filer_grpc),
            ],
            Role::S32 => vec![
                // Its own filer first, then the other (the gateway fails over between them).
                format!(
                    "-filer={},{}",
                    self.filer2_weed_arg(),
                    self.filer_weed_arg()
                ),
                format!("-localSocket={}", d.join("s3-2.sock").display()),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", self.second_ports().s3),
                format!("-port.grpc={}", self.second_ports().s3_grpc),
                "-port.iceberg=0".into(),
                "-port.lance=0".into(),
            ],
            Role::S3 => vec![
                if self.second.is_some() {
                    format!(
                        "-filer={},{}",
                        self.filer_weed_arg(),
                        self.filer2_weed_arg()
                    )
                } else {
                    format!("-filer={}", self.filer_weed_arg())
                },
                // Also puts the data dir on the command line, which the watchdog looks for.
                format!("-localSocket={}", d.join("s3.sock").display()),
                "-ip.bind=127.0.0.1".into(),
                format!("-port={}", p.s3),
                format!("-port.grpc={}", p.s3_grpc),
                "-port.iceberg=0".into(),
                "-port.lance=0".into(),
            ],
        };
        args.extend(more);
        args
    }

    fn spawn(&self, role: Role) -> Result<(), String> {
        let log_path = self.log_path(role);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("opening {}: {e}", log_path.display()))?;
        let child = spawn_weed(&self.weed_bin, &self.args(role), &self.data_dir, &log)
            .map_err(|e| format!("spawning {} {}: {e}", self.weed_bin.display(), role.name()))?;
        self.lock()[role.index()] = Some(child);
        Ok(())
    }

    /// Waits until every readiness check passes (docs/test-cluster.md#readiness) with every role
    /// running; an exited process ends the wait with its log tail.
    fn wait_ready(&self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            for &role in self.roles() {
                let mut procs = self.lock();
                let Some(child) = procs[role.index()].as_mut() else {
                    return Err(format!("{} is stopped", role.name()));
                };
                if let Ok(Some(status)) = child.try_wait() {
                    procs[role.index()] = None;
                    drop(procs);
                    return Err(format!(
                        "weed {} exited during startup ({status}); log tail:\n{}",
                        role.name(),
                        self.role_log_tail(role, 40)
                    ));
                }
            }
            let mut failed = failed_checks(self);
            if let Some(p) = self.second {
                failed.extend(second_failed_checks(p));
            }
            if failed.is_empty() {
                return Ok(());
            }
            if started.elapsed() > READY_LIMIT {
                return Err(format!(
                    "split cluster not ready after {READY_LIMIT:?}; failing checks: {}",
                    failed.join("; ")
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until `port` accepts connections while `role` (which serves it) keeps running.
    fn wait_accepting(&self, role: Role, port: u16) -> Result<(), String> {
        let started = Instant::now();
        let addr = super::cluster::loopback(port);
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.lock()[role.index()].as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "weed {} exited during startup ({status}); log tail:\n{}",
                    role.name(),
                    self.role_log_tail(role, 40)
                ));
            }
            if started.elapsed() > READY_LIMIT {
                return Err(format!(
                    "weed {} not accepting on :{port} after {READY_LIMIT:?}",
                    role.name()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops `role`: SIGTERM, then SIGKILL after a grace period; returns how long it took.
    /// Signals only the child we spawned and have not yet reaped, so never a recycled pid.
    pub fn stop(&self, role: Role) -> Duration {
        let started = Instant::now();
        let Some(mut child) = self.lock()[role.index()].take() else {
            return Duration::ZERO;
        };
        if let Ok(None) = child.try_wait() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            while started.elapsed() < TERM_GRACE {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // SIGKILL when still running; reaps either way.
        let _ = child.kill();
        let _ = child.wait();
        started.elapsed()
    }

    /// Kills `role` with SIGKILL at once (a crash, not a shutdown); returns how long it took.
    pub fn kill(&self, role: Role) -> Duration {
        let started = Instant::now();
        if let Some(mut child) = self.lock()[role.index()].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        started.elapsed()
    }

    /// Starts a stopped `role` again on the same ports and data dir, and waits until the whole
    /// cluster is ready; returns how long that took. Panics with the log tail when it is not.
    pub fn start_role(&self, role: Role) -> Duration {
        let started = Instant::now();
        assert!(
            self.pid(role).is_none(),
            "{} is already running",
            role.name()
        );
        self.spawn(role)
            .and_then(|()| self.wait_ready())
            .unwrap_or_else(|e| {
                panic!(
                    "restarting {}: {e}\nlog tail:\n{}",
                    role.name(),
                    self.role_log_tail(role, 40)
                )
            });
        started.elapsed()
    }

    /// [`SplitCluster::stop`] then [`SplitCluster::start_role`]; returns (stop, start) durations.
    pub fn restart(&self, role: Role) -> (Duration, Duration) {
        (self.stop(role), self.start_role(role))
    }
}

/// Readiness of a multi cluster's second filer and gateway: their gRPC ports accept, the filer
/// serves HTTP and the gateway answers S3 (docs/test-cluster.md#readiness).
fn second_failed_checks(p: Ports) -> Vec<String> {
    use super::cluster::loopback;
    use super::http;
    let mut failed = Vec::new();
    for (name, port) in [("filer2 gRPC", p.filer_grpc), ("S3-2 gRPC", p.s3_grpc)] {
        if std::net::TcpStream::connect_timeout(&loopback(port), Duration::from_secs(1)).is_err() {
            failed.push(format!("{name} :{port} not accepting"));
        }
    }
    match http::get(loopback(p.s3), "/", &[]) {
        Ok(r) if matches!(r.status / 100, 2 | 3) || r.status == 403 => {}
        Ok(r) => failed.push(format!("S3-2 GET /: {}", r.status)),
        Err(e) => failed.push(format!("S3-2 GET /: {e}")),
    }
    match http::get(loopback(p.filer), "/", &[("Accept", "application/json")]) {
        Ok(r) if r.status / 100 == 2 => {}
        Ok(r) => failed.push(format!("filer2 GET /: {}", r.status)),
        Err(e) => failed.push(format!("filer2 GET /: {e}")),
    }
    failed
}

/// Starts `sh` in its own process group that waits for this test process to exit, then stops every
/// process whose command line names our data dir (restarts change pids, the dir stays): SIGTERM,
/// a few seconds, SIGKILL; then removes the data dir and our Unix sockets.
fn spawn_watchdog(c: &Cluster, second: Option<Ports>) -> std::io::Result<()> {
    let mut socks = unix_sockets(c.ports);
    if let Some(p) = second {
        // Only the second filer's and gateway's: the block's other ports are not ours.
        let tmp = std::env::temp_dir();
        socks.extend(
            [
                format!("seaweedfs-filer-grpc-{}.sock", p.filer_grpc),
                format!("seaweedfs-s3-grpc-{}.sock", p.s3_grpc),
                format!("seaweedfs-s3-{}.sock", p.s3),
                format!("seaweedfs-filer-{}.sock", p.filer),
            ]
            .iter()
            .map(|n| tmp.join(n).display().to_string()),
        );
    }
    const SCRIPT: &str = r#"
ours() { for f in /proc/[0-9]*/cmdline; do
  p=${f#/proc/}; p=${p%/cmdline}
  [ "$p" = "$$" ] && continue
  tr '\0' '\n' < "$f" 2>/dev/null | grep -qF -- "$DATA" && echo "$p"
done; }
while kill -0 "$TPID" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$TPID/status" 2>/dev/null; do sleep 1; done
pids=$(ours)
if [ -n "$pids" ]; then
  kill -TERM $pids 2>/dev/null
  i=0
  while [ $i -lt 10 ] && [ -n "$(ours)" ]; do sleep 0.5; i=$((i+1)); done
  pids=$(ours)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null && sleep 0.5
fi
case "$DATA" in */s3lc-weed-split-*) rm -rf -- "$DATA" ;; esac
if [ -z "$(ours)" ]; then for s in $SOCKS; do [ -S "$s" ] && rm -f -- "$s"; done; fi
"#;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .env("TPID", std::process::id().to_string())
        .env("DATA", &c.data_dir)
        .env("SOCKS", socks.join(" "))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(|_| ())
}
