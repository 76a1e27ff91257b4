//! `s3-lifecycled worker --admin HOST:PORT[.GRPC]`: the plugin worker of
//! `weed admin` (the worker itself lives in `crate::plugin::worker`, its
//! stream session in `crate::plugin::session`).
//! Exit codes: 0 after SIGTERM/SIGINT, 2 configuration.

use std::path::PathBuf;

use clap::Args;

use crate::cli::run_once::{ClusterArgs, settings};
use crate::cli::serve::Signals;
use crate::cli::{EXIT_OK, Fail, exit, usage, with_telemetry};
use crate::config::Settings;
use crate::plugin::worker::WorkerError;

#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The `weed admin` address: `host:httpPort` (gRPC = HTTP + 10000) or
    /// `host:httpPort.grpcPort` (overrides `weed_admin.address`).
    #[arg(long)]
    pub admin: Option<String>,
    /// TOML configuration file (optional; defaults apply without one).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Worker id at the admin (overrides `weed_admin.worker_id`).
    #[arg(long)]
    pub id: Option<String>,
    /// State directory: worker id and executions in progress (overrides
    /// `weed_admin.state_dir`).
    #[arg(long = "state-dir")]
    pub state_dir: Option<PathBuf>,
}

pub fn run(args: WorkerArgs) -> Result<i32, Fail> {
    let mut s = settings(&ClusterArgs {
        config: args.config,
        ..Default::default()
    })?;
    if let Some(a) = args.admin {
        s.weed_admin.address = a;
    }
    if let Some(i) = args.id {
        s.weed_admin.worker_id = i;
    }
    if let Some(d) = args.state_dir {
        s.weed_admin.state_dir = d.display().to_string();
    }
    if s.weed_admin.address.trim().is_empty() {
        return Err(usage(
            "no weed admin to connect to: give --admin HOST:PORT[.GRPC] or set weed_admin.address",
        ));
    }
    s.validate().map_err(usage)?;
    crate::plugin::enforcer::check_config(&s).map_err(usage)?;
    with_telemetry(s, true, async |s| exit(work(s).await))
}

async fn work(s: Settings) -> Result<i32, Fail> {
    let signals = Signals::install()?;
    crate::plugin::worker::run(s, signals.receiver())
        .await
        .map_err(|e| match &e {
            WorkerError::Config(_) => usage(e),
            WorkerError::Tls { failure, .. } => (super::tls::exit_code(failure), e.to_string()),
        })?;
    Ok(EXIT_OK)
}
