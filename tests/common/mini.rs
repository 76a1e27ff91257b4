//! `weed mini` as a beginner starts it: master, volume server, filer, S3 gateway, `weed admin`
//! and a Go plugin worker in one process, on ports of our choosing. Its worker serves
//! `s3_lifecycle` and its admin schedules it: for the tests of a Go worker beside us
//! (docs/go-cursor.md#another-enforcer). One per test binary, started on first use by the
//! tests that need it. It derefs to a [`Cluster`].

use std::ops::Deref;
use std::sync::OnceLock;
use std::time::Instant;

use super::admin::WeedAdmin;
use super::cluster::{
    Cluster, POLL, READY_LIMIT, failed_checks, find_weed, pick_ports, spawn_watchdog_for,
    spawn_weed, unique_suffix, unix_sockets,
};
use super::serve::free_port;

pub struct Mini {
    cluster: Cluster,
    /// The admin inside it.
    pub admin: WeedAdmin,
}

impl Deref for Mini {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

static MINI: OnceLock<Result<Mini, String>> = OnceLock::new();

/// The `weed mini` of this binary, started on first use.
pub fn mini() -> &'static Mini {
    match MINI.get_or_init(start) {
        Ok(m) => m,
        Err(e) => panic!("weed mini unavailable: {e}"),
    }
}

fn start() -> Result<Mini, String> {
    let weed = find_weed()?;
    let p = pick_ports()?;
    let (admin_http, admin_grpc) = (free_port(), free_port());
    let data_dir = std::env::temp_dir().join(format!("s3lc-weed-mini-{}", unique_suffix()));
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("creating the data dir: {e}"))?;
    let log_file = data_dir.join("weed.log");
    let log = std::fs::File::create(&log_file).map_err(|e| format!("weed.log: {e}"))?;
    // Its defaults otherwise (volume size and count from the disk, the admin's job types).
    let args = vec![
        "mini".to_string(),
        format!("-dir={}", data_dir.display()),
        "-ip=127.0.0.1".to_string(),
        "-ip.bind=127.0.0.1".to_string(),
        format!("-master.port={}", p.master),
        format!("-master.port.grpc={}", p.master_grpc),
        format!("-volume.port={}", p.volume),
        format!("-volume.port.grpc={}", p.volume_grpc),
        format!("-filer.port={}", p.filer),
        format!("-filer.port.grpc={}", p.filer_grpc),
        format!("-s3.port={}", p.s3),
        format!("-s3.port.grpc={}", p.s3_grpc),
        "-s3.port.iceberg=0".to_string(),
        "-s3.port.lance=0".to_string(),
        "-webdav=false".to_string(),
        format!("-admin.port={admin_http}"),
        format!("-admin.port.grpc={admin_grpc}"),
        format!("-admin.dataDir={}", data_dir.join("admin").display()),
    ];
    let child = spawn_weed(&weed, &args, &data_dir, &log).map_err(|e| format!("spawning: {e}"))?;
    spawn_watchdog_for(child.id(), &data_dir, &unix_sockets(p)).map_err(|e| format!("{e}"))?;
    let cluster = Cluster {
        ports: p,
        pid: child.id(),
        data_dir: data_dir.clone(),
        log_file: log_file.clone(),
        weed_bin: weed,
    };
    let admin = WeedAdmin::inside(child.id(), admin_http, admin_grpc, data_dir, log_file);
    // The Child handle is dropped without killing; the watchdog owns the shutdown.
    drop(child);
    let started = Instant::now();
    loop {
        let mut failed = failed_checks(&cluster);
        if std::net::TcpStream::connect(("127.0.0.1", admin_http)).is_err() {
            failed.push(format!("admin :{admin_http} not accepting"));
        }
        if failed.is_empty() {
            return Ok(Mini { cluster, admin });
        }
        if started.elapsed() > READY_LIMIT {
            return Err(format!(
                "not ready after {READY_LIMIT:?}: {}; log tail:\n{}",
                failed.join("; "),
                cluster.log_tail(40)
            ));
        }
        std::thread::sleep(POLL);
    }
}
