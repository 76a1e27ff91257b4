//! `s3-lifecycled run-once`: one daily pass over the selected shards, then exit.
//! Flags override the configuration; the report goes to stdout as `key=value`
//! lines (one per shard, one for the pass) or one JSON document (`--json`).
//! Exit codes: 0 completed, 3 a shard halted, 1 runtime error, 2 configuration.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::run_error;
use crate::cli::{EXIT_ERROR, EXIT_HALTED, EXIT_OK, EXIT_USAGE};
use crate::config::{Settings, parse_shards};
use crate::engine::Nanos;
use crate::pass::observe::PassObserver;
use crate::pass::options::PassOptions;
use crate::pass::report::PassResult;
use crate::pass::report::{Counters, ShardOutcome};
use crate::pass::runner::PassRunner;
use crate::status::RunOutcome;

/// `run-once` flags.
#[derive(Debug, Clone, Args)]
pub struct RunOnceArgs {
    /// TOML configuration file (optional; defaults apply without one).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Filer gRPC address (overrides `cluster.filer`).
    #[arg(long)]
    pub filer: Option<String>,
    /// S3 gateway gRPC address (overrides `cluster.s3_grpc`).
    #[arg(long = "s3-grpc")]
    pub s3_grpc: Option<String>,
    /// SeaweedFS security.toml to take the gRPC TLS material from
    /// (overrides `cluster.security_toml`; `WEED_GRPC_*` variables apply).
    #[arg(long = "security-toml")]
    pub security_toml: Option<PathBuf>,
    /// Shards to run: `0-15` or `a,b,c` (overrides `pass.shards`).
    #[arg(long)]
    pub shards: Option<String>,
    /// Buckets to act on, comma-separated (overrides `pass.buckets`).
    #[arg(long)]
    pub buckets: Option<String>,
    /// Evaluate the pass as of this RFC 3339 time instead of the wall clock.
    #[arg(long)]
    pub now: Option<String>,
    /// Decide and report everything; delete nothing, save no cursor.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Print one JSON document instead of key=value lines.
    #[arg(long)]
    pub json: bool,
}

/// A usage or configuration problem: message names the key or flag.
fn usage(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    EXIT_USAGE
}

/// A comma-separated flag value as a list (`--filer a:1,b:2`).
pub fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Loads settings (file, environment, flags) and validates them.
pub fn settings(args: &RunOnceArgs) -> Result<Settings, String> {
    let mut s =
        Settings::load(args.config.as_deref(), std::env::vars()).map_err(|e| e.to_string())?;
    if let Some(f) = &args.filer {
        s.cluster.filer = split_list(f);
    }
    if let Some(g) = &args.s3_grpc {
        s.cluster.s3_grpc = split_list(g);
    }
    if let Some(p) = &args.security_toml {
        s.cluster.security_toml = p.display().to_string();
    }
    if let Some(sh) = &args.shards {
        parse_shards(sh).map_err(|m| format!("flag --shards: {m}"))?;
        s.pass.shards = sh.clone();
    }
    if let Some(b) = &args.buckets {
        s.pass.buckets = b
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect();
    }
    // RUST_LOG, when set, wins over `telemetry.log_filter` (debugging one run).
    if let Ok(f) = std::env::var("RUST_LOG")
        && !f.trim().is_empty()
    {
        s.telemetry.log_filter = f;
    }
    s.validate().map_err(|e| e.to_string())?;
    Ok(s)
}

/// Parses `--now`.
pub fn parse_now(s: &str) -> Result<Nanos, String> {
    crate::admin::parse_rfc3339_ns(s).map_err(|e| {
        format!("flag --now: `{s}` is not an RFC 3339 time such as 2026-01-31T00:00:00Z ({e})")
    })
}

fn rfc3339(ns: Nanos) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ns.to_string())
}

/// Runs the subcommand and returns the exit code.
pub fn run(args: RunOnceArgs) -> i32 {
    let s = match settings(&args) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let now = match &args.now {
        Some(n) => match parse_now(n) {
            Ok(v) => v,
            Err(e) => return usage(e),
        },
        None => crate::clock::wall_ns(),
    };
    let shards = match parse_shards(&s.pass.shards) {
        Ok(v) => v,
        Err(e) => return usage(format!("configuration key `pass.shards`: {e}")),
    };
    // A preview or a test may look ahead; one loud line so nobody runs it against
    // production data by accident (`serve` refuses such a trigger outright).
    if let Some(ahead) = crate::service::far_future(now, crate::clock::wall_ns()) {
        eprintln!(
            "WARNING: --now {} is {} in the future: this pass {} everything the rules would delete by then",
            rfc3339(now),
            humantime::format_duration(std::time::Duration::from_secs(ahead.as_secs())),
            if args.dry_run {
                "reports (dry run)"
            } else {
                "DELETES"
            },
        );
    }
    let Some(sys) = super::actix_system() else {
        return EXIT_ERROR;
    };
    let json = args.json;
    let dry_run = args.dry_run;
    sys.block_on(async move {
        let guard = match crate::telemetry::init(&s.telemetry, "s3-lifecycled") {
            Ok(g) => g,
            Err(e) => return usage(e),
        };
        let code = pass(s, now, shards, dry_run, json).await;
        if let Err(e) = guard.shutdown().await {
            eprintln!("warning: {e}");
        }
        code
    })
}

async fn pass(s: Settings, now: Nanos, shards: Vec<u8>, dry_run: bool, json: bool) -> i32 {
    if !dry_run && let Err(e) = crate::plugin::enforcer::one_enforcer(&s).await {
        return usage(e);
    }
    let tls = match s.client_tls() {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let addrs: Vec<String> = s
        .cluster
        .filer
        .iter()
        .chain(&s.cluster.s3_grpc)
        .cloned()
        .collect();
    let code = pass_with(s, now, shards, dry_run, json, tls.clone()).await;
    if code == EXIT_OK {
        return code;
    }
    // A handshake refused somewhere surfaces as a transport error deep in the
    // pass; name the TLS cause and exit with its code instead
    // (docs/tls.md#how-failures-surface).
    let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    match crate::cli::tls::diagnose(tls.as_ref(), &addrs).await {
        Some((msg, tls_code)) => {
            eprintln!("error: {msg}");
            tls_code
        }
        None => code,
    }
}

async fn pass_with(
    s: Settings,
    now: Nanos,
    shards: Vec<u8>,
    dry_run: bool,
    json: bool,
    tls: Option<crate::seaweed::tls::ClientTls>,
) -> i32 {
    let runner = match PassRunner::connect(&s, tls, PassObserver::default()).await {
        Ok(r) => r,
        Err(e) => return run_error(e),
    };
    let run_id = crate::pass::new_run_id();
    let opts = PassOptions {
        now,
        shards,
        dry_run,
        settings: s,
        run_id: run_id.clone(),
        stop: Default::default(),
    };
    match runner.run(opts).await {
        Ok(result) => report(&result, &run_id, dry_run, json),
        Err(e) => run_error(e),
    }
}

fn deletes_kv(c: &Counters) -> String {
    let d = &c.deletes;
    format!(
        "done={} noop={} lock={} retry_later={} blocked={} rpc_error={} dry_run={}{}{}",
        d.done,
        d.noop_resolved,
        d.skipped_object_lock,
        d.retry_later,
        d.blocked,
        d.rpc_error,
        d.dry_run,
        if d.other > 0 {
            format!(" unspecified={}", d.other)
        } else {
            String::new()
        },
        if d.withdrawn > 0 {
            format!(" withdrawn={}", d.withdrawn)
        } else {
            String::new()
        }
    )
}

/// Prints the report; returns the exit code.
pub fn report(r: &PassResult, run_id: &str, dry_run: bool, json_out: bool) -> i32 {
    let mut totals = Counters::default();
    for s in &r.shards {
        totals.add(&s.report.counters);
    }
    for e in &r.bucket_errors {
        eprintln!("warning: bucket {}: {}", e.bucket, e.reason);
    }
    if let Some(e) = &r.error {
        eprintln!("error: {e}");
    }
    if let Some(t) = &r.truncated {
        eprintln!("pass truncated: {t}; cursors saved where the shards stopped");
    }
    let halted = r
        .shards
        .iter()
        .filter(|s| s.report.outcome == ShardOutcome::Halted)
        .count();
    let rules = r.shards.iter().map(|s| s.report.rules).max().unwrap_or(0);
    let outcome = r.outcome();
    for s in &r.shards {
        let rep = &s.report;
        let c = &rep.counters;
        let recovery: Vec<String> = rep
            .recovery
            .iter()
            .map(|(b, why)| format!("{b}:{why}"))
            .collect();
        tracing::info!(
            shard = rep.shard,
            outcome = rep.outcome.as_str(),
            events = c.events_scanned,
            matches = c.matches,
            pending = c.pending,
            unconfirmed = c.unconfirmed,
            locked = c.locked,
            completed_upload_leftovers = c.completed_upload_leftovers,
            halt = rep.halt_reason.as_deref().unwrap_or(""),
            "shard pass finished"
        );
        if let Some(h) = &rep.halt_reason {
            eprintln!("shard {:02} {}: {h}", rep.shard, rep.outcome.as_str());
        }
        if !json_out {
            println!(
                "shard={:02} outcome={} buckets={} rules={} events={} matches={} pending={} skipped_no_mtime={} unconfirmed={} locked={} completed_upload_leftovers={} {} walker={} recovery={} halt={} duration={:.3}s",
                rep.shard,
                rep.outcome.as_str(),
                rep.buckets,
                rep.rules,
                c.events_scanned,
                c.matches,
                c.pending,
                c.skipped_no_mtime,
                c.unconfirmed,
                c.locked,
                c.completed_upload_leftovers,
                deletes_kv(c),
                if rep.walker_ran { "yes" } else { "no" },
                recovery.join(","),
                rep.halt_reason.as_deref().unwrap_or("").replace(' ', "_"),
                s.duration.as_secs_f64()
            );
        }
    }
    tracing::info!(
        run_id,
        outcome = outcome.as_str(),
        shards = r.shards.len(),
        halted,
        events = totals.events_scanned,
        events_read = r.replay.events_read,
        ranges_read = r.replay.ranges.len(),
        matches = totals.matches,
        paused = r.paused_list(),
        held = r.held_list(),
        duration_s = r.duration.as_secs_f64(),
        "pass finished"
    );
    let freed = r.freed();
    if json_out {
        let shards: Vec<_> = r
            .shards
            .iter()
            .map(|s| {
                let rep = &s.report;
                json!({
                    "shard": rep.shard,
                    "outcome": rep.outcome.as_str(),
                    "buckets": rep.buckets,
                    "rules": rep.rules,
                    "events_scanned": rep.counters.events_scanned,
                    "matches": rep.counters.matches,
                    "pending": rep.counters.pending,
                    "skipped_no_mtime": rep.counters.skipped_no_mtime,
                    "unconfirmed": rep.counters.unconfirmed,
                    "locked": rep.counters.locked,
                    "completed_upload_leftovers": rep.counters.completed_upload_leftovers,
                    "deletes": rep.counters.deletes.by_label(),
                    "walker_ran": rep.walker_ran,
                    "recovery": rep.recovery.iter().map(|(b, why)| json!({"bucket": b, "reason": why.as_str()})).collect::<Vec<_>>(),
                    "halt_reason": rep.halt_reason,
                    "duration_ms": s.duration.as_millis() as u64,
                })
            })
            .collect();
        let doc = json!({
            "run_id": run_id,
            "now": rfc3339(r.now),
            "now_ns": r.now,
            "dry_run": dry_run,
            "outcome": outcome,
            "truncated": r.truncated,
            "duration_ms": r.duration.as_millis() as u64,
            "buckets": r.buckets,
            "bucket_errors": r.bucket_errors.iter().map(|e| json!({"bucket": e.bucket, "reason": e.reason})).collect::<Vec<_>>(),
            "unknown_buckets": r.unknown_buckets,
            "held": r.held.iter().map(|h| json!({"bucket": h.bucket, "would_delete": h.would_delete, "entries": h.entries, "cap": h.cap, "reason": h.reason()})).collect::<Vec<_>>(),
            "approved": r.approved,
            "paused": r.paused.iter().map(|p| json!({"bucket": p.bucket, "paused_ns": p.paused_ns, "reason": p.reason})).collect::<Vec<_>>(),
            "totals": {
                "events_scanned": totals.events_scanned,
                "matches": totals.matches,
                "pending": totals.pending,
                "skipped_no_mtime": totals.skipped_no_mtime,
                "unconfirmed": totals.unconfirmed,
                "locked": totals.locked,
                "completed_upload_leftovers": totals.completed_upload_leftovers,
                "deletes": totals.deletes.by_label(),
            },
            "deleted": crate::engine::reclaim::rows(&freed),
            "deleted_bytes": crate::engine::reclaim::total(&freed).bytes,
            "reclaim": r.reclaim,
            "shards": shards,
            "replay": {
                "events_read": r.replay.events_read,
                "batches": r.replay.batches,
                "ranges": r.replay.ranges.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
                "read_ns": r.replay.span_ns(),
            },
        });
        println!("{doc}");
    } else {
        println!(
            "pass run_id={run_id} now={} outcome={outcome} shards={} halted={halted} buckets={} rules={rules} events={} events_read={} ranges_read={} read_span={:.3}s matches={} pending={} skipped_no_mtime={} unconfirmed={} locked={} completed_upload_leftovers={} {} deleted_bytes={} duration={:.3}s",
            rfc3339(r.now),
            r.shards.len(),
            r.buckets.len(),
            totals.events_scanned,
            r.replay.events_read,
            r.replay.ranges.len(),
            r.replay.span_ns() as f64 / 1e9,
            totals.matches,
            totals.pending,
            totals.skipped_no_mtime,
            totals.unconfirmed,
            totals.locked,
            totals.completed_upload_leftovers,
            deletes_kv(&totals),
            crate::engine::reclaim::total(&freed).bytes,
            r.duration.as_secs_f64()
        );
        let rows = crate::engine::reclaim::rows(&freed);
        for line in crate::engine::reclaim::lines(&rows, r.reclaim.as_ref()) {
            println!("{line}");
        }
    }
    match outcome {
        RunOutcome::Failed => EXIT_ERROR,
        RunOutcome::Halted => EXIT_HALTED,
        RunOutcome::Completed | RunOutcome::Truncated => EXIT_OK,
    }
}
