//! Three `weed master`s in one raft group, with a volume server, a filer and an S3 gateway
//! that are given all three (`-master=a,b,c`), as an HA cluster runs them: for the tests of
//! several masters (docs/grpc.md#several-masters). One per test binary, started on first use by
//! the tests that need it. It derefs to a [`Cluster`] whose master is the first of the three.

use std::ops::Deref;
use std::process::Child;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::cluster::{
    Cluster, MASTER_TOML, POLL, READY_LIMIT, failed_checks, find_weed, loopback, pick_ports,
    spawn_watchdog_for, spawn_weed, unique_suffix,
};
use super::http;

/// The cluster and its three masters' `(http, grpc)` ports.
#[derive(Debug)]
pub struct HaCluster {
    cluster: Cluster,
    /// `(http, grpc)` of each master.
    pub masters: [(u16, u16); 3],
    /// Each master's process (`None` once killed).
    procs: Mutex<[Option<Child>; 3]>,
}

impl Deref for HaCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

static HA: OnceLock<Result<HaCluster, String>> = OnceLock::new();

/// The three-master cluster of this binary, started on first use.
pub fn ha_cluster() -> &'static HaCluster {
    match HA.get_or_init(start) {
        Ok(c) => c,
        Err(e) => panic!("three-master SeaweedFS cluster unavailable: {e}"),
    }
}

impl HaCluster {
    /// `HOST:HTTPPORT.GRPCPORT` of master `i`, as weed writes a server.
    pub fn master_arg(&self, i: usize) -> String {
        let (h, g) = self.masters[i];
        format!("127.0.0.1:{h}.{g}")
    }

    /// The leader as master `i` names it (`/cluster/status`), if it names one.
    pub fn leader_seen_by(&self, i: usize) -> Option<String> {
        let r = http::get(loopback(self.masters[i].0), "/cluster/status", &[]).ok()?;
        let v: serde_json::Value = serde_json::from_str(&r.text()).ok()?;
        v["Leader"]
            .as_str()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
    }

    /// Kills the leading master (SIGKILL) and waits until another is elected; returns the
    /// index of the one killed.
    pub fn kill_leader(&self) -> usize {
        let leader = self.leader_seen_by(0).expect("a leader");
        let i = (0..3)
            .find(|&i| self.master_arg(i) == leader)
            .expect("the leader is ours");
        if let Some(mut child) = self.procs.lock().unwrap()[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let started = Instant::now();
        loop {
            let others = (0..3).filter(|&j| j != i);
            if let Some(l) = others.filter_map(|j| self.leader_seen_by(j)).next()
                && l != leader
            {
                return i;
            }
            assert!(
                started.elapsed() < READY_LIMIT,
                "no new leader after killing {leader}"
            );
            std::thread::sleep(POLL);
        }
    }
}

fn start() -> Result<HaCluster, String> {
    let weed = find_weed()?;
    // One block for master 1, the volume server, the filer and the gateway; masters 2 and 3
    // take the first four ports of a second block.
    let ports = pick_ports()?;
    let mut more = pick_ports()?;
    while more.master.abs_diff(ports.master) < 8 {
        more = pick_ports()?;
    }
    let masters = [
        (ports.master, ports.master_grpc),
        (more.master, more.master_grpc),
        (more.volume, more.volume_grpc),
    ];
    let peers = masters
        .iter()
        .map(|(h, g)| format!("127.0.0.1:{h}.{g}"))
        .collect::<Vec<_>>()
        .join(",");
    let data_dir = std::env::temp_dir().join(format!("s3lc-weed-{}", unique_suffix()));
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let log_file = data_dir.join("weed.log");
    let mut procs: Vec<Child> = Vec::new();
    let mut spawn = |name: &str, args: Vec<String>| -> Result<(), String> {
        let dir = data_dir.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| io("creating a data dir", e))?;
        std::fs::write(dir.join("master.toml"), MASTER_TOML).map_err(|e| io("master.toml", e))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_file)
            .map_err(|e| io("weed.log", e))?;
        let child = spawn_weed(&weed, &args, &dir, &log).map_err(|e| io("spawning weed", e))?;
        spawn_watchdog_for(child.id(), &data_dir, &[]).map_err(|e| io("watchdog", e))?;
        procs.push(child);
        Ok(())
    };
    let ip = [
        "-ip=127.0.0.1".to_string(),
        "-ip.bind=127.0.0.1".to_string(),
    ];
    for (i, (h, g)) in masters.iter().enumerate() {
        let dir = data_dir.join(format!("master{}", i + 1));
        // Absolute paths: the watchdog finds our processes by the data dir in their command line.
        let mut args = vec!["master".to_string(), format!("-mdir={}", dir.display())];
        args.extend(ip.clone());
        args.extend([
            format!("-port={h}"),
            format!("-port.grpc={g}"),
            format!("-peers={peers}"),
            "-volumeSizeLimitMB=64".to_string(),
            "-telemetry=false".to_string(),
        ]);
        spawn(&format!("master{}", i + 1), args)?;
    }
    let p = ports;
    let mut volume = vec![
        "volume".to_string(),
        format!("-dir={}", data_dir.join("volume").display()),
    ];
    volume.extend(ip.clone());
    volume.extend([
        format!("-port={}", p.volume),
        format!("-port.grpc={}", p.volume_grpc),
        format!("-master={peers}"),
        "-max=1000".to_string(),
        "-preStopSeconds=0".to_string(),
    ]);
    spawn("volume", volume)?;
    let mut filer = vec![
        "filer".to_string(),
        format!("-defaultStoreDir={}", data_dir.join("filer").display()),
    ];
    filer.extend(ip.clone());
    filer.extend([
        format!("-port={}", p.filer),
        format!("-port.grpc={}", p.filer_grpc),
        format!("-master={peers}"),
    ]);
    spawn("filer", filer)?;
    spawn(
        "s3",
        vec![
            "s3".to_string(),
            "-ip.bind=127.0.0.1".to_string(),
            format!("-port={}", p.s3),
            format!("-port.grpc={}", p.s3_grpc),
            "-port.iceberg=0".to_string(),
            "-port.lance=0".to_string(),
            format!(
                "-localSocket={}",
                data_dir.join("s3").join("s3.sock").display()
            ),
            format!("-filer=127.0.0.1:{}.{}", p.filer, p.filer_grpc),
        ],
    )?;
    let [m1, m2, m3, ..] =
        <[Child; 6]>::try_from(procs).map_err(|_| "six processes".to_string())?;
    let c = HaCluster {
        cluster: Cluster {
            ports,
            pid: m1.id(),
            data_dir,
            log_file,
            weed_bin: weed,
        },
        masters,
        procs: Mutex::new([Some(m1), Some(m2), Some(m3)]),
    };
    // Ready once a leader is elected and the usual checks pass through it.
    let started = Instant::now();
    loop {
        let leader = c.leader_seen_by(0);
        let failed = match leader.as_deref().and_then(|l| l.rsplit_once(':')) {
            Some((_, ports)) => {
                let http_port = ports.split('.').next().and_then(|p| p.parse().ok());
                let mut at_leader = c.cluster.clone();
                at_leader.ports.master = http_port.unwrap_or(c.ports.master);
                failed_checks(&at_leader)
            }
            None => vec!["no leader elected".to_string()],
        };
        if failed.is_empty() {
            return Ok(c);
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "not ready after 120 s: {}\n{}",
                failed.join("; "),
                c.log_tail(40)
            ));
        }
        std::thread::sleep(POLL);
    }
}
