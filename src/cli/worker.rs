//! `s3-lifecycled worker --admin HOST:PORT[.GRPC]`: the plugin worker of
//! `weed admin` (the worker itself lives in `crate::plugin::worker`, its
//! stream session in `crate::plugin::session`).
//! Exit codes: 0 after SIGTERM/SIGINT, 2 configuration.

use std::path::PathBuf;

use clap::Args;

use crate::cli::run_once::{RunOnceArgs, settings};
use crate::cli::serve::Signals;
use crate::cli::{EXIT_ERROR, EXIT_OK, EXIT_USAGE};
use crate::plugin::worker::WorkerError;

/// `worker` flags.
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

fn usage(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    EXIT_USAGE
}

/// Runs the subcommand and returns the exit code.
pub fn run(args: WorkerArgs) -> i32 {
    let mut s = match settings(&RunOnceArgs {
        config: args.config,
        filer: None,
        s3_grpc: None,
        shards: None,
        buckets: None,
        now: None,
        dry_run: false,
        json: false,
        security_toml: None,
    }) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
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
        return usage(
            "no weed admin to connect to: give --admin HOST:PORT[.GRPC] or set weed_admin.address",
        );
    }
    if let Err(e) = s.validate() {
        return usage(e);
    }
    if let Err(e) = crate::plugin::enforcer::check_config(&s) {
        return usage(e);
    }
    let Some(sys) = super::actix_system() else {
        return EXIT_ERROR;
    };
    let code = sys.block_on(async move {
        let signals = match Signals::install() {
            Ok(sig) => sig,
            Err(e) => {
                eprintln!("error: cannot install signal handlers: {e}");
                return EXIT_ERROR;
            }
        };
        let guard = match crate::telemetry::init(&s.telemetry, "s3-lifecycled") {
            Ok(g) => g,
            Err(e) => return usage(e),
        };
        let code = match crate::plugin::worker::run(s, signals.receiver()).await {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("error: {e}");
                match &e {
                    WorkerError::Config(_) => EXIT_USAGE,
                    WorkerError::Tls { failure, .. } => super::tls::exit_code(failure),
                }
            }
        };
        if let Err(e) = guard.shutdown().await {
            eprintln!("warning: {e}");
        }
        code
    });
    std::process::exit(code)
}
