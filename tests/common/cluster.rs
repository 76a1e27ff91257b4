//! One real `weed server` (master + volume + filer + S3) per test binary: found, started
//! lazily on free loopback ports, checked for readiness, and stopped by a watchdog when the test
//! process exits (statics are never dropped, so nothing else would stop it).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::http;

/// Lowest and highest port we use: above the well-known range, below the kernel's ephemeral range
/// (32768+), so outgoing connections never occupy them (docs/test-cluster.md#ports).
const PORT_MIN: u16 = 10000;
const PORT_MAX: u16 = 32700;
/// How many ports one cluster needs (master, volume, filer, S3; HTTP and gRPC each).
const PORT_COUNT: u16 = 8;
pub(super) const READY_LIMIT: Duration = Duration::from_secs(90);
pub(super) const POLL: Duration = Duration::from_millis(500);
/// Start attempts: a retry only happens when weed exits early, e.g. a port was taken between our
/// check and its bind by another engineer's cluster.
pub(super) const START_ATTEMPTS: usize = 3;
/// Written into the data dir, which is weed's working directory (see `start`).
pub(super) const MASTER_TOML: &str = "[master.volume_growth]\ncopy_1 = 2\n";

/// The eight ports of one cluster.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// Master HTTP (`/dir/status`).
    pub master: u16,
    /// Master gRPC.
    pub master_grpc: u16,
    /// Volume server HTTP.
    pub volume: u16,
    /// Volume server gRPC.
    pub volume_grpc: u16,
    /// Filer HTTP.
    pub filer: u16,
    /// Filer gRPC (`filer_pb.SeaweedFiler`).
    pub filer_grpc: u16,
    /// S3 API (HTTP).
    pub s3: u16,
    /// S3 gRPC (`s3_lifecycle_pb.SeaweedS3LifecycleInternal`).
    pub s3_grpc: u16,
}

impl Ports {
    fn from_base(b: u16) -> Self {
        Ports {
            master: b,
            master_grpc: b + 1,
            volume: b + 2,
            volume_grpc: b + 3,
            filer: b + 4,
            filer_grpc: b + 5,
            s3: b + 6,
            s3_grpc: b + 7,
        }
    }

    /// weed's own layout, what `weed server` does without `-*.port.grpc` flags: each gRPC port is
    /// its HTTP port + 10000 (HTTP on `b`..`b + 3`).
    fn weed_defaults(b: u16) -> Self {
        Ports {
            master: b,
            master_grpc: b + 10_000,
            volume: b + 1,
            volume_grpc: b + 10_001,
            filer: b + 2,
            filer_grpc: b + 10_002,
            s3: b + 3,
            s3_grpc: b + 10_003,
        }
    }

    fn all(&self) -> [u16; 8] {
        [
            self.master,
            self.master_grpc,
            self.volume,
            self.volume_grpc,
            self.filer,
            self.filer_grpc,
            self.s3,
            self.s3_grpc,
        ]
    }
}

/// A running single-process SeaweedFS cluster on 127.0.0.1, shared by all tests of one binary.
///
/// Never assume it is empty: every test must use its own bucket ([`Cluster::unique_bucket`]).
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Ports in use.
    pub ports: Ports,
    /// Pid of the `weed` process itself (not a wrapper); for a split cluster, its first master's
    /// (see [`super::split`]).
    pub pid: u32,
    /// Fresh data directory (`-dir`); removed by the watchdog after the cluster stops.
    pub data_dir: PathBuf,
    /// The combined stdout+stderr of `weed`, inside `data_dir` (a split cluster's master log).
    pub log_file: PathBuf,
    /// The `weed` binary used.
    pub weed_bin: PathBuf,
}

pub(super) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `filer.conf` is one file the whole cluster shares, and every edit of it
/// (`fs.configure -apply`, or a GET and a PUT through the filer) reads it,
/// changes it and writes it back: tests that run at once would drop each
/// other's locations. Every edit holds this.
pub static FILER_CONF: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Cluster {
    /// Filer root under which S3 buckets live.
    pub const BUCKETS_ROOT: &'static str = "/buckets";

    /// Filer gRPC address, `127.0.0.1:<port>`.
    pub fn filer_grpc_addr(&self) -> SocketAddr {
        loopback(self.ports.filer_grpc)
    }
    /// Filer gRPC endpoint URL for tonic, `http://127.0.0.1:<port>`.
    pub fn filer_grpc_url(&self) -> String {
        format!("http://{}", self.filer_grpc_addr())
    }
    /// S3 gRPC address (LifecycleDelete).
    pub fn s3_grpc_addr(&self) -> SocketAddr {
        loopback(self.ports.s3_grpc)
    }
    /// S3 gRPC endpoint URL for tonic.
    pub fn s3_grpc_url(&self) -> String {
        format!("http://{}", self.s3_grpc_addr())
    }
    /// S3 API address.
    pub fn s3_addr(&self) -> SocketAddr {
        loopback(self.ports.s3)
    }
    /// S3 endpoint URL for SDK clients, `http://127.0.0.1:<port>`.
    pub fn s3_endpoint(&self) -> String {
        format!("http://{}", self.s3_addr())
    }
    /// Filer HTTP address.
    pub fn filer_http_addr(&self) -> SocketAddr {
        loopback(self.ports.filer)
    }
    /// Master HTTP address.
    pub fn master_http_addr(&self) -> SocketAddr {
        loopback(self.ports.master)
    }
    /// Master gRPC address.
    pub fn master_grpc_addr(&self) -> SocketAddr {
        loopback(self.ports.master_grpc)
    }
    /// Master address in the `host:httpPort.grpcPort` form (docs/test-cluster.md#address-forms).
    pub fn master_weed_arg(&self) -> String {
        format!("127.0.0.1:{}.{}", self.ports.master, self.ports.master_grpc)
    }
    /// Filer address in the `host:httpPort.grpcPort` form (docs/test-cluster.md#address-forms).
    pub fn filer_weed_arg(&self) -> String {
        format!("127.0.0.1:{}.{}", self.ports.filer, self.ports.filer_grpc)
    }
    /// Filer root under which S3 buckets live (`/buckets`).
    pub fn buckets_root(&self) -> &'static str {
        Self::BUCKETS_ROOT
    }
    /// Erasure-codes the collection `bucket` the way an operator does (`weed
    /// shell ec.encode`; the admin's erasure-coding task does the same to
    /// full, quiet volumes): its plain volumes are gone afterwards.
    pub async fn erasure_code(&self, bucket: &str) {
        // `ec.encode` picks volumes by the master's view, which trails the
        // writes by a heartbeat: until then they look empty, "too small".
        let start = Instant::now();
        loop {
            let out = self
                .weed_shell(&format!(
                    "lock\nec.encode -collection={bucket} -force -fullPercent=0 -quietFor=1s\nunlock"
                ))
                .await;
            if out.contains("Successfully completed EC encoding") {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "ec.encode {bucket}:\n{out}"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Runs `script` (commands, one per line) in `weed shell` against this
    /// cluster, as an operator would; answers its output and panics when it
    /// fails or prints an error. A script with `fs.configure` holds
    /// [`FILER_CONF`] while it runs.
    pub async fn weed_shell(&self, script: &str) -> String {
        let _edit = match script.contains("fs.configure") {
            true => Some(FILER_CONF.lock().await),
            false => None,
        };
        use tokio::io::AsyncWriteExt as _;
        let mut child = tokio::process::Command::new(&self.weed_bin)
            .arg("shell")
            .arg(format!("-master={}", self.master_weed_arg()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawning weed shell");
        let mut stdin = child.stdin.take().expect("weed shell stdin");
        stdin
            .write_all(format!("{script}\nexit\n").as_bytes())
            .await
            .expect("writing to weed shell");
        drop(stdin);
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            child.wait_with_output(),
        )
        .await
        .expect("weed shell within 120 s")
        .expect("weed shell output");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "weed shell failed: {text}");
        assert!(
            !text.to_lowercase().contains("error"),
            "weed shell {script}: {text}"
        );
        text
    }

    /// The last `lines` lines of the weed log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_file, lines)
    }
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster shared by every test in this binary, started on first use.
///
/// Panics (failing the calling test, and every later caller with the same message) if `weed`
/// cannot be found or the cluster does not become ready.
pub fn cluster() -> &'static Cluster {
    match CLUSTER.get_or_init(start_with_retries) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS test cluster unavailable: {e}"),
    }
}

/// Finds `weed`: `$WEED_BIN`, else `<crate>/.tools/seaweedfs/bin/weed`, else `weed` on `PATH`.
pub fn find_weed() -> Result<PathBuf, String> {
    const HOW: &str = "install SeaweedFS 4.48 with `ops/install-seaweedfs.sh` (it installs into \
                       .tools/seaweedfs/bin/weed, found automatically) or set WEED_BIN";
    if let Some(p) = std::env::var_os("WEED_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("WEED_BIN={} is not a file; {HOW}", p.display()))
        };
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/seaweedfs/bin/weed");
    if local.is_file() {
        return Ok(local);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("weed");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(format!(
        "no `weed` binary found (WEED_BIN unset, {} missing, none on PATH); {HOW}",
        local.display()
    ))
}

enum StartError {
    /// weed exited during startup: likely a port race, worth another base.
    Exited(String),
    /// Anything else: give up.
    Fatal(String),
}

fn start_with_retries() -> Result<Cluster, String> {
    start_with_retries_using(&|_| Ok(()))
}

static WEED_DEFAULTS: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// A second single-process cluster whose gRPC ports are weed's defaults (HTTP port + 10000, no
/// `-*.port.grpc` flag given), as `weed server` starts on a host: for the tests of addresses
/// written as weed reads them. Started on first use, only by the tests that need it.
pub fn weed_defaults_cluster() -> &'static Cluster {
    let start = || start_on(&pick_weed_default_ports, &|_| Ok(()), &[]);
    match WEED_DEFAULTS.get_or_init(start) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS cluster with weed's default ports unavailable: {e}"),
    }
}

static ENCRYPTED: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// A cluster whose filer encrypts what it writes to the volume servers (`weed server
/// -filer.encryptVolumeData`, docs/meta-log.md#encrypted-volumes), its own meta-log files
/// included; plain gRPC and HTTP. Started on first use, only by the test of reads from it.
pub fn encrypted_volume_cluster() -> &'static Cluster {
    let start = || start_on(&pick_ports, &|_| Ok(()), &["-filer.encryptVolumeData"]);
    match ENCRYPTED.get_or_init(start) {
        Ok(c) => c,
        Err(e) => panic!("SeaweedFS encrypted-volume test cluster unavailable: {e}"),
    }
}

/// Starts a single-process cluster like [`cluster`], after `setup` has prepared its data dir
/// (weed's working directory, where it looks for `security.toml` first): for a binary that needs
/// a differently configured cluster of its own, such as the mTLS one.
pub fn start_with_retries_using(
    setup: &dyn Fn(&Path) -> std::io::Result<()>,
) -> Result<Cluster, String> {
    start_on(&pick_ports, setup, &[])
}

/// [`start_with_retries_using`] with weed's own gRPC ports ([`weed_defaults_cluster`]'s layout).
pub fn start_weed_defaults_using(
    setup: &dyn Fn(&Path) -> std::io::Result<()>,
) -> Result<Cluster, String> {
    start_on(&pick_weed_default_ports, setup, &[])
}

fn start_on(
    pick: &dyn Fn() -> Result<Ports, String>,
    setup: &dyn Fn(&Path) -> std::io::Result<()>,
    flags: &[&str],
) -> Result<Cluster, String> {
    let weed = find_weed()?;
    let mut errors = Vec::new();
    for attempt in 1..=START_ATTEMPTS {
        let ports = pick()?;
        match start(&weed, ports, setup, flags) {
            Ok(c) => return Ok(c),
            Err(StartError::Exited(e)) => {
                errors.push(format!("attempt {attempt} (ports {}..): {e}", ports.master))
            }
            Err(StartError::Fatal(e)) => {
                errors.push(format!("attempt {attempt} (ports {}..): {e}", ports.master));
                break;
            }
        }
    }
    Err(errors.join("\n\n"))
}

fn port_is_free(port: u16) -> bool {
    // Binding is the real test; the connect catches a listener on another address of the port.
    TcpListener::bind(loopback(port)).is_ok()
        && TcpStream::connect_timeout(&loopback(port), Duration::from_millis(100)).is_err()
}

/// A random base so concurrent test binaries and other people's clusters rarely collide.
pub(super) fn pick_ports() -> Result<Ports, String> {
    for _ in 0..200 {
        let base = rand::random_range(PORT_MIN..=PORT_MAX - PORT_COUNT + 1);
        if (base..base + PORT_COUNT).all(port_is_free) {
            return Ok(Ports::from_base(base));
        }
    }
    Err(format!(
        "no {PORT_COUNT} consecutive free ports found in [{PORT_MIN}, {PORT_MAX}] after 200 tries"
    ))
}

/// [`Ports::weed_defaults`] on a random base, every port free.
fn pick_weed_default_ports() -> Result<Ports, String> {
    for _ in 0..200 {
        let base = rand::random_range(PORT_MIN..=PORT_MAX - 10_004);
        let ports = Ports::weed_defaults(base);
        if ports.all().into_iter().all(port_is_free) {
            return Ok(ports);
        }
    }
    Err(format!(
        "no free ports in weed's layout (HTTP + 10000) found in [{PORT_MIN}, {PORT_MAX}] after 200 \
         tries"
    ))
}

pub(super) fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos}", std::process::id())
}

/// Starts `weed <args>` in `dir`, both output streams appended to `log`, in its own process
/// group, without the caller's AWS credentials. Shared by the single-process cluster and the
/// split one (`split.rs`).
pub(super) fn spawn_weed(
    weed: &Path,
    args: &[String],
    dir: &Path,
    log: &std::fs::File,
) -> std::io::Result<Child> {
    Command::new(weed)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        // Inherited AWS credentials would switch S3 auth on (docs/test-cluster.md#s3-auth).
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        // Own process group: a Ctrl-C on the test run must not reach weed before our cleanup.
        .process_group(0)
        .spawn()
}

fn start(
    weed: &Path,
    ports: Ports,
    setup: &dyn Fn(&Path) -> std::io::Result<()>,
    flags: &[&str],
) -> Result<Cluster, StartError> {
    let fatal = |what: &str, e: std::io::Error| StartError::Fatal(format!("{what}: {e}"));
    let data_dir = std::env::temp_dir().join(format!("s3lc-weed-{}", unique_suffix()));
    std::fs::create_dir_all(&data_dir)
        .map_err(|e| fatal(&format!("creating data dir {}", data_dir.display()), e))?;
    // weed reads master.toml from its working directory first. Each bucket is its own collection
    // and by default grows 7 volumes on first write, so 300 slots would hold only ~40 buckets;
    // growing 2 at a time fits ~150 buckets per test binary and makes first PUTs faster.
    std::fs::write(data_dir.join("master.toml"), MASTER_TOML)
        .map_err(|e| fatal("writing master.toml", e))?;
    setup(&data_dir).map_err(|e| fatal("preparing the data dir", e))?;
    let log_file = data_dir.join("weed.log");
    let log = std::fs::File::create(&log_file).map_err(|e| fatal("creating weed.log", e))?;
    let p = ports;
    // A gRPC port that is its HTTP port + 10000 is weed's default: left to weed, as on a host.
    let grpc_flag = |flag: &str, http: u16, grpc: u16| {
        (grpc != http.wrapping_add(10_000)).then(|| format!("-{flag}.port.grpc={grpc}"))
    };
    let mut args = vec![
        "-v=0".to_string(),
        "server".to_string(),
        format!("-dir={}", data_dir.display()),
        "-ip=127.0.0.1".to_string(),
        "-ip.bind=127.0.0.1".to_string(),
        format!("-master.port={}", p.master),
        "-master.telemetry=false".to_string(),
        // Small volumes and many slots: each bucket is a collection that grows its own volumes.
        "-master.volumeSizeLimitMB=64".to_string(),
        format!("-volume.port={}", p.volume),
        "-volume.max=1000".to_string(),
        "-volume.preStopSeconds=0".to_string(),
        "-filer".to_string(),
        format!("-filer.port={}", p.filer),
        "-s3".to_string(),
        format!("-s3.port={}", p.s3),
        "-s3.port.iceberg=0".to_string(),
        "-s3.port.lance=0".to_string(),
    ];
    args.extend(
        [
            grpc_flag("master", p.master, p.master_grpc),
            grpc_flag("volume", p.volume, p.volume_grpc),
            grpc_flag("filer", p.filer, p.filer_grpc),
            grpc_flag("s3", p.s3, p.s3_grpc),
        ]
        .into_iter()
        .flatten(),
    );
    args.extend(flags.iter().map(|f| f.to_string()));
    let mut child = spawn_weed(weed, &args, &data_dir, &log)
        .map_err(|e| fatal(&format!("spawning {}", weed.display()), e))?;
    let pid = child.id();
    let cluster = Cluster {
        ports,
        pid,
        data_dir,
        log_file,
        weed_bin: weed.to_path_buf(),
    };
    if let Err(e) = spawn_watchdog(&cluster) {
        kill_child(&mut child);
        return Err(fatal("spawning the cleanup watchdog", e));
    }
    match wait_ready(&cluster, &mut child) {
        Ok(()) => {
            // The Child handle is dropped without killing; the watchdog owns the shutdown.
            Ok(cluster)
        }
        Err(e) => {
            kill_child(&mut child);
            Err(e)
        }
    }
}

fn kill_child(child: &mut Child) {
    // Our own Child handle: this signals exactly the pid we spawned, and reaps it.
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `sh` in its own process group that waits for this test process to exit, then stops weed
/// (SIGTERM, a few seconds, SIGKILL) and removes the data dir. Before each signal it checks that the
/// pid still runs a command line containing our data dir, so a recycled pid is never signalled.
fn spawn_watchdog(c: &Cluster) -> std::io::Result<()> {
    spawn_watchdog_for(c.pid, &c.data_dir, &unix_sockets(c.ports))
}

/// [`spawn_watchdog`] for any weed process `pid` whose command line names `data` (a directory
/// named `s3lc-weed-*`, removed afterwards), and its leftover Unix sockets `socks`.
pub(super) fn spawn_watchdog_for(pid: u32, data: &Path, socks: &[String]) -> std::io::Result<()> {
    const SCRIPT: &str = r#"
is_ours() { [ -r "/proc/$WPID/cmdline" ] && tr '\0' '\n' < "/proc/$WPID/cmdline" | grep -qF -- "$DATA"; }
while kill -0 "$TPID" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$TPID/status" 2>/dev/null; do sleep 1; done
if is_ours; then
  kill -TERM "$WPID" 2>/dev/null
  i=0
  while [ $i -lt 10 ] && is_ours; do sleep 0.5; i=$((i+1)); done
  if is_ours; then kill -KILL "$WPID" 2>/dev/null; sleep 0.5; fi
fi
case "$DATA" in */s3lc-weed-*) rm -rf -- "$DATA" ;; esac
if ! is_ours; then for s in $SOCKS; do [ -S "$s" ] && rm -f -- "$s"; done; fi
"#;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .env("TPID", std::process::id().to_string())
        .env("WPID", pid.to_string())
        .env("DATA", data)
        .env("SOCKS", socks.join(" "))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(|_| ())
}

/// The Unix sockets weed creates in the temp dir for `p`'s ports. A killed weed leaves them behind
/// (docs/test-cluster.md#unix-sockets); watchdogs remove these, ours only.
pub(super) fn unix_sockets(p: Ports) -> Vec<String> {
    let tmp = std::env::temp_dir();
    [
        format!("seaweedfs-master-grpc-{}.sock", p.master_grpc),
        format!("seaweedfs-volume-grpc-{}.sock", p.volume_grpc),
        format!("seaweedfs-filer-grpc-{}.sock", p.filer_grpc),
        format!("seaweedfs-s3-grpc-{}.sock", p.s3_grpc),
        format!("seaweedfs-s3-{}.sock", p.s3),
        format!("seaweedfs-filer-{}.sock", p.filer),
    ]
    .iter()
    .map(|n| tmp.join(n).display().to_string())
    .collect()
}

/// Readiness per docs/test-cluster.md#readiness; all checks must pass in the same round.
fn wait_ready(c: &Cluster, child: &mut Child) -> Result<(), StartError> {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(StartError::Exited(format!(
                "weed exited during startup ({status}); log tail of {}:\n{}",
                c.log_file.display(),
                c.log_tail(40)
            )));
        }
        let failed = failed_checks(c);
        if failed.is_empty() {
            return Ok(());
        }
        if started.elapsed() > READY_LIMIT {
            return Err(StartError::Fatal(format!(
                "weed not ready after {READY_LIMIT:?}; failing checks: {}; log tail of {}:\n{}",
                failed.join("; "),
                c.log_file.display(),
                c.log_tail(40)
            )));
        }
        std::thread::sleep(POLL);
    }
}

pub(super) fn failed_checks(c: &Cluster) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, port) in [
        ("master gRPC", c.ports.master_grpc),
        ("filer gRPC", c.ports.filer_grpc),
        ("S3 gRPC", c.ports.s3_grpc),
    ] {
        if TcpStream::connect_timeout(&loopback(port), Duration::from_secs(1)).is_err() {
            failed.push(format!("{name} :{port} not accepting"));
        }
    }
    // A volume server with free slots must have registered, or the first PUT fails.
    match http::get(c.master_http_addr(), "/dir/status", &[]) {
        Ok(r) if r.status / 100 == 2 && has_free_slots(&r.text()) => {}
        Ok(r) => failed.push(format!(
            "master /dir/status: {} without \"Max\":[1-9]",
            r.status
        )),
        Err(e) => failed.push(format!("master /dir/status: {e}")),
    }
    match http::get(c.s3_addr(), "/", &[]) {
        Ok(r) if matches!(r.status / 100, 2 | 3) || r.status == 403 => {}
        Ok(r) => failed.push(format!("S3 GET /: {}", r.status)),
        Err(e) => failed.push(format!("S3 GET /: {e}")),
    }
    match http::get(c.filer_http_addr(), "/", &[("Accept", "application/json")]) {
        Ok(r) if r.status / 100 == 2 => {}
        Ok(r) => failed.push(format!("filer GET /: {}", r.status)),
        Err(e) => failed.push(format!("filer GET /: {e}")),
    }
    failed
}

fn has_free_slots(body: &str) -> bool {
    body.match_indices("\"Max\":").any(|(i, m)| {
        body[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|ch| ('1'..='9').contains(&ch))
    })
}

pub(super) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
