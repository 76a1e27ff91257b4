//! The `s3-lifecycled` command-line surface: argument parsing and subcommands.
//!
//! Exit codes: 0 success; 1 runtime error; 2 usage, configuration or invalid
//! input (e.g. `rules check` on an invalid document); 3 a pass in which some
//! shard halted; 10–15 the cluster's gRPC TLS refused us, one code per cause
//! (docs/tls.md#how-failures-surface). A one-shot command whose stdout is
//! closed (`cursor show | head`) ends silently with 141, as Unix tools do.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::config::Settings;
use crate::seaweed::filer::FilerClient;

pub mod admin_client;
pub mod audit_cmd;
pub mod cursor_cmd;
pub mod explain_cmd;
pub mod forecast_cmd;
pub mod journal_cmd;
pub mod rules_check;
pub mod rules_preview;
pub mod run_once;
pub mod serve;
pub mod tls;

pub mod worker;

/// Exit code of a one-shot command whose stdout was closed under it: what a
/// shell reports for a tool that SIGPIPE stopped (128 + 13).
pub const EXIT_CLOSED_STDOUT: i32 = 141;

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
/// Exit code: usage or configuration error, or invalid input.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the pass completed but at least one shard halted.
pub const EXIT_HALTED: i32 = 3;
/// Exit code: `audit` found a TTL that contradicts a lifecycle rule.
pub const EXIT_AUDIT_CONFLICT: i32 = 4;
/// Exit code: the server speaks TLS and no TLS was configured.
pub const EXIT_TLS_REQUIRED: i32 = 10;
/// Exit code: the server refused our client certificate, or we sent none.
pub const EXIT_TLS_CLIENT_CERT: i32 = 11;
/// Exit code: a certificate is not signed by a trusted CA (unknown CA).
pub const EXIT_TLS_UNKNOWN_CA: i32 = 12;
/// Exit code: a certificate (ours or the server's) has expired.
pub const EXIT_TLS_EXPIRED: i32 = 13;
/// Exit code: the server certificate does not carry `tls.server_name`.
pub const EXIT_TLS_NAME: i32 = 14;
/// Exit code: another TLS handshake failure.
pub const EXIT_TLS_OTHER: i32 = 15;

/// Prints why a pass did not run and returns its exit code: a setting that
/// cannot work is a usage error, anything else an error. The one place a
/// [`RunError`](crate::pass::runner::RunError) becomes an exit code.
pub fn run_error(e: &crate::pass::runner::RunError) -> i32 {
    use crate::pass::runner::RunError;
    eprintln!("error: {e}");
    match e {
        RunError::Config(_) => EXIT_USAGE,
        RunError::Unreachable { .. } | RunError::Failed(_) | RunError::Stopped(_) => EXIT_ERROR,
    }
}

/// Why a command failed: the exit code and the message [`exit`] prints as
/// `error: …`. Every command returns its exit code or this.
pub(crate) type Fail = (i32, String);

/// A usage, configuration or input error (exit 2).
pub(crate) fn usage(m: impl std::fmt::Display) -> Fail {
    (EXIT_USAGE, m.to_string())
}

/// A runtime error (exit 1).
pub(crate) fn failed(m: impl std::fmt::Display) -> Fail {
    (EXIT_ERROR, m.to_string())
}

/// The exit code of a command's result, after printing its failure.
pub(crate) fn exit(r: Result<i32, Fail>) -> i32 {
    r.unwrap_or_else(|(code, m)| {
        eprintln!("error: {m}");
        code
    })
}

/// The exit codes, as `--help` lists them.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0      success
  1      runtime error (the cluster could not be reached, a pass failed)
  2      usage, configuration or invalid input (the message names it)
  3      a pass in which some shard halted (cursors kept before the halt)
  4      `audit` found a TTL outside the lifecycle documents that contradicts a rule
  10-15  the cluster's gRPC TLS refused us: 10 plaintext to a TLS port, 11 client
         certificate refused, 12 unknown CA, 13 expired, 14 name mismatch, 15 other
  141    a one-shot command's stdout was closed under it (`| head`): it stopped
         quietly, as a tool that SIGPIPE stops";

/// Enforces S3 bucket lifecycle rules on SeaweedFS clusters.
#[derive(Debug, Parser)]
#[command(name = "s3-lifecycled", version, about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Lifecycle documents.
    Rules {
        #[command(subcommand)]
        command: RulesCommand,
    },
    /// Run one daily pass over the selected shards and exit (0 completed,
    /// 3 a shard halted, 1 runtime error, 2 configuration error).
    RunOnce(run_once::RunOnceArgs),
    /// Run as a service: a pass every day at `service.schedule` and on
    /// `trigger`, admin gRPC API, /metrics and the status page, until
    /// SIGTERM/SIGINT (drains in-flight deletes and saves cursors first).
    Serve(run_once::ClusterArgs),
    /// Run as an `s3_lifecycle` plugin worker of `weed admin`: the admin
    /// schedules passes (one job per shard set), splits the cluster delete
    /// rate and records each job, until SIGTERM/SIGINT.
    Worker(worker::WorkerArgs),
    /// Ask a running service (admin API) to start a pass now; prints the run id.
    Trigger(admin_client::TriggerArgs),
    /// Show a running service's state and current pass, or `--last` pass.
    Status(admin_client::StatusArgs),
    /// Pause a bucket (admin API): from the next pass on every instance
    /// leaves it alone, its matches pending, until `resume`. Kept in the filer.
    Pause(admin_client::PauseArgs),
    /// End a bucket's pause (admin API): the next pass sends its pending deletes.
    Resume(admin_client::ResumeArgs),
    /// Let a bucket held by the deletion cap through on the next pass, once
    /// (admin API; kept in the filer until that pass used it).
    Approve(admin_client::ApproveArgs),
    /// What the service deleted, when and under which rule (the deletion
    /// journal in the filer): `--bucket`, `--key-prefix`, `--since`, `--json`.
    Journal(journal_cmd::JournalArgs),
    /// Which rules match an object and why the others do not, its due time
    /// per action, and the last delete of it in the journal (reads the filer).
    Explain(explain_cmd::ExplainArgs),
    /// What becomes due per bucket and rule on each of the next `--days`,
    /// and what is overdue now, from the pending tallies the passes keep in
    /// the cursors (reads the filer; never lists a bucket).
    Forecast(forecast_cmd::ForecastArgs),
    /// TTLs outside the lifecycle documents (filer.conf locations, entries'
    /// TtlSec, TTL volumes) that contradict the rules, with the fix; only
    /// reads (exit 4 when one contradicts a rule).
    Audit(audit_cmd::AuditArgs),
    /// Inspect, reset or migrate (from the Go worker) the per-shard cursors.
    Cursor {
        #[command(subcommand)]
        command: cursor_cmd::CursorCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate a LifecycleConfiguration document as strictly as AWS and print
    /// its compiled view as JSON (exit 0), or every error, one per line (exit 2).
    Check {
        /// The XML file; `-` reads standard input.
        file: PathBuf,
    },
    /// Evaluate a document that is not installed against a bucket's current
    /// contents: what it would delete at `--at` (default now), per rule, and
    /// per day for the next `--days`. Read-only.
    Preview(rules_preview::PreviewArgs),
}

/// Runs `f` on the actix System, on a multi-thread tokio runtime (actors on
/// the System arbiter, gRPC and HTTP on the worker pool), with the telemetry
/// of `s` installed before and flushed after; its exit code. `exit_now` ends
/// the process with it while the runtime is still up (a service: work may
/// still be queued past the shutdown deadline; exit rather than wait for it).
pub(crate) fn with_telemetry(
    s: Settings,
    exit_now: bool,
    f: impl AsyncFnOnce(Settings) -> i32,
) -> Result<i32, Fail> {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    // Probe the builder once outside actix so a failure is an error, not a panic.
    runtime().map_err(|e| failed(format!("cannot start the async runtime: {e}")))?;
    let system = actix::System::with_tokio_rt(move || {
        runtime().unwrap_or_else(|e| panic!("tokio runtime failed after a successful probe: {e}"))
    });
    let code = system.block_on(async move {
        let guard = crate::telemetry::init(&s.telemetry, "s3-lifecycled").map_err(usage)?;
        if s.cluster.security_toml_found {
            tracing::info!(
                file = s.cluster.security_toml,
                "gRPC TLS from the security.toml found where weed looks (cluster.security_toml \
                 unset; set it to name another file, or to \"none\")"
            );
        }
        let code = f(s).await;
        if let Err(e) = guard.shutdown().await {
            eprintln!("warning: {e}");
        }
        Ok(code)
    });
    if exit_now {
        std::process::exit(exit(code));
    }
    code
}

/// A current-thread runtime for a one-shot command.
pub(crate) fn one_shot_runtime() -> Result<tokio::runtime::Runtime, Fail> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the async runtime: {e}")))
}

/// `--config` and `--filer` of the commands that read the filer directly.
/// Each command names the keys it reads in the help of its `--config`
/// (`#[command(mut_arg("config", …))]`), so only the flags are shared here.
#[derive(Debug, Clone, clap::Args)]
pub struct FilerSource {
    /// Configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Filer gRPC address (overrides `cluster.filer`).
    #[arg(long, value_name = "HOST:PORT")]
    pub filer: Option<String>,
}

impl FilerSource {
    /// Runs `f` on a [`one_shot_runtime`] with the settings of these flags
    /// ([`load_settings`]; one that does not load is a usage error).
    pub(crate) fn block_on<T>(
        &self,
        f: impl AsyncFnOnce(&Settings) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let s = load_settings(self.config.as_deref(), self.filer.as_deref())?;
        one_shot_runtime()?.block_on(f(&s))
    }
}

/// Settings from `config` (and the environment), with `--filer` (a list)
/// over `cluster.filer`.
pub(crate) fn load_settings(config: Option<&Path>, filer: Option<&str>) -> Result<Settings, Fail> {
    let mut s = Settings::load(config, std::env::vars()).map_err(usage)?;
    s.find_security_toml(std::env::vars(), std::env::current_dir().ok().as_deref());
    if let Some(f) = filer {
        s.cluster.filer = run_once::split_list(f);
    }
    Ok(s)
}

/// The first filer of `s` that answers (configured, or discovered from the
/// master), over client TLS `tls`: for the commands that read the filer
/// directly (`cursor`, `journal`, `explain`, `rules preview`). Several
/// filers serve the same namespace (docs/meta-log.md#several-filers).
pub(crate) async fn first_filer_with(
    s: &Settings,
    tls: Option<crate::seaweed::tls::ClientTls>,
) -> Result<FilerClient, Fail> {
    let c = crate::pass::runner::settled_cluster(&s.cluster, tls.as_ref()).await;
    let members = crate::seaweed::discovery::resolve(&c.wanted(), tls.as_ref())
        .await
        .map_err(failed)?;
    let options = crate::seaweed::endpoint::EndpointOptions::seaweed().tls(tls);
    let mut errors = Vec::new();
    for addr in &members.filers {
        match FilerClient::connect_with(addr, &options).await {
            Ok(c) => return Ok(c),
            Err(e) => errors.push(format!("filer {addr}: {e}")),
        }
    }
    Err(failed(errors.join("; ")))
}

/// [`first_filer_with`] the client TLS `s` configures.
pub(crate) async fn first_filer(s: &Settings) -> Result<FilerClient, Fail> {
    first_filer_with(s, s.client_tls().map_err(failed)?).await
}

/// `bucket` as the filer of `client` holds it under the buckets root
/// (`cluster.buckets_root`, else the filer's): the root and its rules.
pub(crate) async fn bucket_info(
    s: &Settings,
    client: &FilerClient,
    bucket: &str,
) -> Result<(String, crate::seaweed::buckets::BucketInfo), Fail> {
    let root = if s.cluster.buckets_root.is_empty() {
        client.buckets_root().await.map_err(failed)?
    } else {
        s.cluster.buckets_root.trim_end_matches('/').to_string()
    };
    let entry = client.lookup(&root, bucket).await.map_err(failed)?;
    let Some(entry) = entry.filter(|e| e.is_directory) else {
        // A typo is invalid input (exit 2), worded as `forecast --bucket`
        // words it: the buckets there are and the likeliest one meant.
        let scan = crate::seaweed::buckets::list_bucket_configs(client, &root)
            .await
            .map_err(failed)?;
        crate::engine::names::check_exists(bucket, scan.names()).map_err(usage)?;
        return Err(failed(format!(
            "bucket {bucket} does not exist under {root}"
        )));
    };
    let info = crate::seaweed::buckets::bucket_info(&entry)
        .map_err(|e| failed(format!("bucket {bucket}: {}", e.reason)))?;
    Ok((root, info))
}

/// `flag`'s RFC 3339 time in ns; a usage error naming the flag otherwise.
pub(crate) fn parse_time(flag: &str, t: &str) -> Result<i64, Fail> {
    crate::admin::parse_rfc3339_ns(t).map_err(|e| {
        usage(format!(
            "{flag}: `{t}` is not an RFC 3339 time such as 2026-01-02T03:04:05Z ({e})"
        ))
    })
}

/// A rule as the text output names it: its ID, else `#<position>`.
pub(crate) fn rule_label(id: &str, position: usize) -> String {
    if id.is_empty() {
        format!("#{position}")
    } else {
        id.to_string()
    }
}

/// `rule=<id>`, or `rule_hash=<hash>` for a rule without an ID.
pub(crate) fn rule_kv(id: &str, hash: &str) -> String {
    if id.is_empty() {
        format!("rule_hash={hash}")
    } else {
        format!("rule={id}")
    }
}

/// Prints `v` as pretty JSON when `json`, else `text(v)` as it is.
pub(crate) fn print_json_or<T: Serialize>(json: bool, v: &T, text: impl FnOnce(&T) -> String) {
    if json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        print!("{}", text(v));
    }
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
    if !matches!(cli.command, Command::Serve(_) | Command::Worker(_)) {
        die_quietly_on_closed_stdout();
    }
    exit(match cli.command {
        Command::Rules { command } => match command {
            RulesCommand::Check { file } => rules_check::run(&file),
            RulesCommand::Preview(args) => rules_preview::run(&args),
        },
        Command::RunOnce(args) => run_once::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Trigger(args) => admin_client::trigger(&args),
        Command::Status(args) => admin_client::status(&args),
        Command::Pause(args) => admin_client::pause(&args),
        Command::Resume(args) => admin_client::resume(&args),
        Command::Approve(args) => admin_client::approve(&args),
        Command::Journal(args) => journal_cmd::run(&args),
        Command::Forecast(args) => forecast_cmd::run(&args),
        Command::Audit(args) => audit_cmd::run(&args),
        Command::Explain(args) => explain_cmd::run(&args),
        Command::Cursor { command } => cursor_cmd::run(command),
    })
}

/// Makes a one-shot command stop quietly when its stdout is closed (`cursor
/// show | head`), as `cat` does. Rust ignores SIGPIPE, so such a write fails
/// with EPIPE and `println!` panics on it (exit 101 and a backtrace); this
/// hook turns exactly that panic into [`EXIT_CLOSED_STDOUT`], with nothing
/// printed. Every other panic keeps the default report. `serve` and `worker`
/// do not install it: they log to stderr, and a panic there is a bug to see.
fn die_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload_as_str().unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(EXIT_CLOSED_STDOUT);
        }
        default(info)
    }));
}
