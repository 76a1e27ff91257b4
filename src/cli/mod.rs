//! The `s3-lifecycled` command-line surface: argument parsing and subcommands.
//!
//! Exit codes: 0 success; 1 runtime error; 2 usage, configuration or invalid
//! input (e.g. `rules check` on an invalid document); 3 a pass in which some
//! shard halted.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub mod admin_client;
pub mod cursor_cmd;
pub mod rules_check;
pub mod run_once;
pub mod serve;
pub mod worker;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: runtime error.
pub const EXIT_ERROR: i32 = 1;
/// Exit code: usage or configuration error, or invalid input.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the pass completed but at least one shard halted.
pub const EXIT_HALTED: i32 = 3;

/// Enforces S3 bucket lifecycle rules on SeaweedFS clusters.
#[derive(Debug, Parser)]
#[command(name = "s3-lifecycled", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Lifecycle documents.
    Rules {
        /// What to do with rules.
        #[command(subcommand)]
        command: RulesCommand,
    },
    /// Run one daily pass over the selected shards and exit (0 completed,
    /// 3 a shard halted, 1 runtime error, 2 configuration error).
    RunOnce(run_once::RunOnceArgs),
    /// Run as a service: a pass every day at `service.schedule` and on
    /// `trigger`, admin gRPC API, /metrics and the status page, until
    /// SIGTERM/SIGINT (drains in-flight deletes and saves cursors first).
    Serve(serve::ServeArgs),
    /// Run as an `s3_lifecycle` plugin worker of `weed admin`: the admin
    /// schedules passes (one job per shard set), splits the cluster delete
    /// rate and records each job, until SIGTERM/SIGINT.
    Worker(worker::WorkerArgs),
    /// Ask a running service (admin API) to start a pass now; prints the run id.
    Trigger(admin_client::TriggerArgs),
    /// Show a running service's state and current pass, or `--last` pass.
    Status(admin_client::StatusArgs),
    /// Inspect, reset or migrate (from the Go worker) the per-shard cursors.
    Cursor {
        /// What to do with cursors.
        #[command(subcommand)]
        command: cursor_cmd::CursorCommand,
    },
}

/// `rules` subcommands.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate a LifecycleConfiguration document as strictly as AWS and print
    /// its compiled view as JSON (exit 0), or every error, one per line (exit 2).
    Check {
        /// The XML file; `-` reads standard input.
        file: PathBuf,
    },
}

/// The actix System on a multi-thread tokio runtime (actors on the System
/// arbiter, gRPC and HTTP on the worker pool). `None` after printing why the
/// runtime could not start.
pub(crate) fn actix_system() -> Option<actix::SystemRunner> {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    // Probe the builder once outside actix so a failure is an error, not a panic.
    if let Err(e) = runtime() {
        eprintln!("error: cannot start the async runtime: {e}");
        return None;
    }
    Some(actix::System::with_tokio_rt(move || {
        runtime().unwrap_or_else(|e| panic!("tokio runtime failed after a successful probe: {e}"))
    }))
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout with exit 0, errors with exit 2.
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match cli.command {
        Command::Rules {
            command: RulesCommand::Check { file },
        } => rules_check::run(&file),
        Command::RunOnce(args) => run_once::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Trigger(args) => admin_client::run_trigger(&args),
        Command::Status(args) => admin_client::run_status(&args),
        Command::Cursor { command } => cursor_cmd::run(command),
    }
}
