//! `s3-lifecycled run-once`: one daily pass over the selected shards, then exit.
//! Flags override the configuration; the report goes to stdout as `key=value`
//! lines (one per shard, one for the pass) or one JSON document (`--json`).
//! Exit codes: 0 completed, 3 a shard halted, 1 runtime error, 2 configuration.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::{EXIT_ERROR, EXIT_HALTED, EXIT_OK, Fail};
use crate::cli::{exit, load_settings, run_error, usage, with_telemetry};
use crate::config::{Settings, parse_shards};
use crate::engine::{DeleteOutcome, Nanos};
use crate::pass::cluster::SeaweedCluster;
use crate::pass::observe::{PassObserver, log_pass_finished};
use crate::pass::options::PassOptions;
use crate::pass::ports::ClusterPort as _;
use crate::pass::report::{Counters, PassResult, ShardReport, ShardResult};
use crate::pass::runner::{PassRunner, RunError, connect_cluster};
use crate::status::RunOutcome;

/// The cluster flags of `run-once`, which `serve` takes as they are.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
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
}

#[derive(Debug, Clone, Args)]
pub struct RunOnceArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
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

/// A comma-separated flag value as a list (`--filer a:1,b:2`).
pub fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Loads settings (file, environment, flags) and validates them; a usage
/// error otherwise.
pub fn settings(args: &ClusterArgs) -> Result<Settings, Fail> {
    let mut s = load_settings(args.config.as_deref(), args.filer.as_deref())?;
    if let Some(g) = &args.s3_grpc {
        s.cluster.s3_grpc = split_list(g);
    }
    if let Some(p) = &args.security_toml {
        s.cluster.security_toml = p.display().to_string();
        s.cluster.security_toml_found = false;
    }
    if let Some(sh) = &args.shards {
        parse_shards(sh).map_err(|m| usage(format!("flag --shards: {m}")))?;
        s.pass.shards = sh.clone();
    }
    if let Some(b) = &args.buckets {
        s.pass.buckets = split_list(b);
    }
    // RUST_LOG, when set, wins over `telemetry.log_filter` (debugging one run).
    if let Ok(f) = std::env::var("RUST_LOG")
        && !f.trim().is_empty()
    {
        s.telemetry.log_filter = f;
    }
    s.validate().map_err(usage)?;
    Ok(s)
}

/// `pass.shards` of `s`, parsed; a usage error naming the key otherwise.
pub fn shards(s: &Settings) -> Result<Vec<u8>, Fail> {
    parse_shards(&s.pass.shards).map_err(|e| usage(format!("configuration key `pass.shards`: {e}")))
}

pub fn parse_now(s: &str) -> Result<Nanos, Fail> {
    crate::admin::parse_rfc3339_ns(s).map_err(|e| {
        usage(format!(
            "flag --now: `{s}` is not an RFC 3339 time such as 2026-01-31T00:00:00Z ({e})"
        ))
    })
}

fn rfc3339(ns: Nanos) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ns.to_string())
}

pub fn run(args: RunOnceArgs) -> Result<i32, Fail> {
    let s = settings(&args.cluster)?;
    let now = match &args.now {
        Some(n) => parse_now(n)?,
        None => crate::clock::wall_ns(),
    };
    let shards = shards(&s)?;
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
    with_telemetry(s, false, async |s| exit(pass(s, now, shards, &args).await))
}

async fn pass(s: Settings, now: Nanos, shards: Vec<u8>, args: &RunOnceArgs) -> Result<i32, Fail> {
    let dry_run = args.dry_run;
    if !dry_run {
        crate::plugin::enforcer::one_enforcer(&s)
            .await
            .map_err(usage)?;
    }
    let tls = s.client_tls().map_err(usage)?;
    let result = async {
        let (cluster, deletes) = connect_cluster(&s, tls.clone()).await?;
        if !dry_run {
            refuse_live_serve(&cluster, &shards, &s).await?;
        }
        let (cluster, deletes) = (Arc::new(cluster), Arc::new(deletes));
        let runner = PassRunner::start(cluster, deletes, PassObserver::default());
        let run_id = crate::pass::new_run_id();
        let opts = PassOptions {
            now,
            shards,
            dry_run,
            settings: s.clone(),
            run_id: run_id.clone(),
            stop: Default::default(),
        };
        let result = runner.run(opts).await?;
        Ok::<_, RunError>(report(&result, &run_id, dry_run, args.json))
    };
    let (code, error) = match result.await {
        Ok(EXIT_OK) => return Ok(EXIT_OK),
        Ok(code) => (code, None),
        Err(e) => (run_error(&e), Some(e)),
    };
    // A handshake refused somewhere surfaces as a transport error deep in the
    // pass; name the TLS cause and exit with its code instead
    // (docs/tls.md#how-failures-surface).
    let addrs: Vec<&str> = s
        .cluster
        .filer
        .iter()
        .chain(&s.cluster.s3_grpc)
        .map(String::as_str)
        .collect();
    match crate::cli::tls::diagnose(tls.as_ref(), &addrs, error.as_ref()).await {
        Some((msg, tls_code)) => Err((tls_code, msg)),
        None => Ok(code),
    }
}

/// A `run-once` on shards a live `serve` runs would race its passes for the
/// same cursors (docs/serve-instances.md#run-once): refused (exit 2), naming it.
async fn refuse_live_serve(
    cluster: &SeaweedCluster,
    shards: &[u8],
    s: &Settings,
) -> Result<(), RunError> {
    let Some(store) = cluster.controls() else {
        return Ok(());
    };
    let ttl = s.service.instance_ttl;
    let holders = crate::service::instance::live_holders(&store, shards, ttl)
        .await
        .map_err(|e| RunError::Unreachable {
            message: e.to_string(),
            source: Box::new(e),
        })?;
    let Some(h) = holders.first() else {
        return Ok(());
    };
    Err(RunError::Config(format!(
        "{} of cursor dir {}: a run-once would race its passes for the same cursors. Trigger a \
         pass there (`s3-lifecycled trigger --admin {}`), preview with --dry-run, or stop that \
         serve first",
        h.describe(shards),
        s.cursor.dir,
        h.admin
    )))
}

/// The counters as `key=value`s from `matches` on, the same on each shard's
/// line and the pass's (where `events` and what replay read come first).
fn counters_kv(c: &Counters) -> String {
    let deletes: Vec<String> = c
        .deletes
        .reported()
        .map(|(o, n)| {
            // The summary line's names predate the labels for three of them.
            let key = match o {
                DeleteOutcome::NoopResolved => "noop".into(),
                DeleteOutcome::SkippedObjectLock => "lock".into(),
                DeleteOutcome::Unspecified => "unspecified".into(),
                _ => o.label().to_ascii_lowercase(),
            };
            format!("{key}={n}")
        })
        .collect();
    format!(
        "matches={} pending={} skipped_no_mtime={} unconfirmed={} locked={} completed_upload_leftovers={} {}",
        c.matches,
        c.pending,
        c.skipped_no_mtime,
        c.unconfirmed,
        c.locked,
        c.completed_upload_leftovers,
        deletes.join(" ")
    )
}

/// The counters' JSON keys, the same in each shard's object and in
/// `totals`, with `more` keys added.
fn counters_json(c: &Counters, more: Value) -> Value {
    let mut v = json!({
        "events_scanned": c.events_scanned,
        "matches": c.matches,
        "pending": c.pending,
        "skipped_no_mtime": c.skipped_no_mtime,
        "unconfirmed": c.unconfirmed,
        "locked": c.locked,
        "completed_upload_leftovers": c.completed_upload_leftovers,
        "deletes": c.deletes.by_label(),
    });
    if let (Value::Object(o), Value::Object(m)) = (&mut v, more) {
        o.extend(m);
    }
    v
}

/// Prints the report; returns the exit code.
pub fn report(r: &PassResult, run_id: &str, dry_run: bool, json_out: bool) -> i32 {
    for line in render(r, run_id, dry_run, json_out) {
        println!("{line}");
    }
    match r.outcome() {
        RunOutcome::Failed | RunOutcome::Unknown => EXIT_ERROR,
        RunOutcome::Halted => EXIT_HALTED,
        RunOutcome::Completed | RunOutcome::Truncated => EXIT_OK,
    }
}

/// The report's stdout lines; warnings go to stderr and the log.
fn render(r: &PassResult, run_id: &str, dry_run: bool, json_out: bool) -> Vec<String> {
    for e in &r.bucket_errors {
        eprintln!("warning: bucket {}: {}", e.bucket, e.reason);
    }
    if let Some(e) = &r.error {
        eprintln!("error: {e}");
    }
    if let Some(t) = &r.truncated {
        eprintln!("pass truncated: {t}; cursors saved where the shards stopped");
    }
    let mut out = Vec::new();
    for s in &r.shards {
        log_shard(&s.report);
        if !json_out {
            out.push(shard_line(s));
        }
    }
    log_pass_finished(run_id, r);
    if json_out {
        out.push(json_report(r, run_id, dry_run).to_string());
    } else {
        out.push(summary_line(r, run_id));
        let rows = crate::engine::reclaim::rows(&r.freed());
        out.extend(crate::engine::reclaim::lines(&rows, r.reclaim.as_ref()));
    }
    out
}

/// A shard's end in the log, and its halt on stderr.
fn log_shard(rep: &ShardReport) {
    let c = &rep.counters;
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
}

/// `shard=NN outcome=… duration=…s`: one shard's line of the text report.
fn shard_line(s: &ShardResult) -> String {
    let rep = &s.report;
    let c = &rep.counters;
    let recovery: Vec<String> = rep
        .recovery
        .iter()
        .map(|(b, why)| format!("{b}:{why}"))
        .collect();
    format!(
        "shard={:02} outcome={} buckets={} rules={} events={} {} walker={} recovery={} halt={} duration={:.3}s",
        rep.shard,
        rep.outcome.as_str(),
        rep.buckets,
        rep.rules,
        c.events_scanned,
        counters_kv(c),
        if rep.walker_ran { "yes" } else { "no" },
        recovery.join(","),
        rep.halt_reason.as_deref().unwrap_or("").replace(' ', "_"),
        s.duration.as_secs_f64()
    )
}

/// The `--json` report (README "run-once --json").
fn json_report(r: &PassResult, run_id: &str, dry_run: bool) -> Value {
    let totals = r.totals();
    let outcome = r.outcome();
    let freed = r.freed();
    json!({
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
        "totals": counters_json(&totals, Value::Null),
        "deleted": crate::engine::reclaim::rows(&freed),
        "deleted_bytes": crate::engine::reclaim::total(&freed).bytes,
        "reclaim": r.reclaim,
        "go_worker": {
            "since_last_pass": r.go_worker.since_last_pass,
            "recent": r.go_worker.recent,
            "last_write": (!r.go_worker.is_empty()).then(|| rfc3339(r.go_worker.last_write_ns)),
        },
        "shards": r.shards.iter().map(|s| (&s.report, s.duration)).map(|(rep, d)| counters_json(&rep.counters, json!({
            "shard": rep.shard,
            "outcome": rep.outcome.as_str(),
            "buckets": rep.buckets,
            "rules": rep.rules,
            "walker_ran": rep.walker_ran,
            "recovery": rep.recovery.iter().map(|(b, why)| json!({"bucket": b, "reason": why.as_str()})).collect::<Vec<_>>(),
            "halt_reason": rep.halt_reason,
            "duration_ms": d.as_millis() as u64,
        }))).collect::<Vec<_>>(),
        "replay": {
            "events_read": r.replay.events_read,
            "batches": r.replay.batches,
            "ranges": r.replay.ranges.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
            "read_ns": r.replay.span_ns(),
        },
    })
}

/// `pass run_id=… duration=…s`: the text report's summary line.
fn summary_line(r: &PassResult, run_id: &str) -> String {
    let totals = r.totals();
    let outcome = r.outcome();
    let freed = r.freed();
    format!(
        "pass run_id={run_id} now={} outcome={outcome} shards={} halted={} buckets={} rules={} events={} events_read={} ranges_read={} read_span={:.3}s {} deleted_bytes={} duration={:.3}s",
        rfc3339(r.now),
        r.shards.len(),
        r.halted().count(),
        r.buckets.len(),
        r.shards.iter().map(|s| s.report.rules).max().unwrap_or(0),
        totals.events_scanned,
        r.replay.events_read,
        r.replay.ranges.len(),
        r.replay.span_ns() as f64 / 1e9,
        counters_kv(&totals),
        crate::engine::reclaim::total(&freed).bytes,
        r.duration.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::go_activity::GoActivity;
    use crate::engine::reclaim::{Freed, ReclaimReport};
    use crate::engine::safety::{Held, PauseRecord};
    use crate::lifecycle::BucketError;
    use crate::pass::plan::RecoveryReason;
    use crate::pass::report::{ReplayRead, ShardOutcome, ShardReport, ShardResult};

    const T0: i64 = 1_767_323_045_000_000_000; // 2026-01-02T03:04:05Z

    /// A pass with one shard of each outcome and every list non-empty.
    fn populated() -> PassResult {
        let shard = |n: u8, outcome: ShardOutcome, k: u64| {
            let mut c = Counters {
                events_scanned: 10 * k,
                matches: 5 * k,
                pending: k,
                skipped_no_mtime: 2 * k,
                unconfirmed: 3 * k,
                locked: 4 * k,
                completed_upload_leftovers: 6 * k,
                ..Default::default()
            };
            for (i, o) in DeleteOutcome::ALL.into_iter().enumerate() {
                c.deletes.add_n(o, k * (i as u64 % 3));
            }
            c.freed.insert(
                (format!("b{n}"), "r1".into()),
                Freed {
                    objects: k,
                    bytes: 100 * k,
                },
            );
            ShardResult {
                report: ShardReport {
                    shard: n,
                    outcome,
                    buckets: 2,
                    rules: n as usize,
                    counters: c,
                    walker_ran: n == 1,
                    recovery: vec![("b1".into(), RecoveryReason::ColdStart)],
                    halt_reason: (outcome != ShardOutcome::Completed)
                        .then(|| format!("RETRY_LATER b{n}/k: busy")),
                    walk_failures: Vec::new(),
                },
                duration: Duration::from_millis(1500 + u64::from(n)),
                cursor: None,
                saved: false,
            }
        };
        PassResult {
            now: T0,
            buckets: vec!["b1".into(), "b2".into()],
            bucket_errors: vec![BucketError {
                bucket: "bad".into(),
                reason: "Rule r1: Days must be positive".into(),
            }],
            unknown_buckets: vec!["gone".into()],
            paused: vec![PauseRecord {
                version: 1,
                bucket: "p".into(),
                paused_ns: T0 - 1,
                reason: "typo".into(),
            }],
            held: vec![Held {
                bucket: "b2".into(),
                would_delete: 9,
                entries: Some(10),
                cap: 4,
                since_ns: None,
                grace: None,
            }],
            approved: vec!["b1".into()],
            shards: vec![
                shard(1, ShardOutcome::Completed, 1),
                shard(2, ShardOutcome::Halted, 2),
                shard(3, ShardOutcome::Failed, 3),
            ],
            error: None,
            truncated: Some("pass.max_runtime".into()),
            duration: Duration::from_millis(2345),
            replay: ReplayRead {
                ranges: vec![(T0 - 5_000_000_000, T0 - 2_000_000_000), (T0 - 1_000, T0)],
                events_read: 77,
                batches: 3,
            },
            reclaim: Some(ReclaimReport {
                settled: false,
                error: Some("master down".into()),
                ..Default::default()
            }),
            go_worker: GoActivity {
                since_last_pass: vec![2],
                recent: vec![],
                last_write_ns: T0,
            },
        }
    }

    /// The summary lines, exactly, and the `--json` keys scripts read.
    #[test]
    fn report_lines_and_json_keys_are_stable() {
        let r = populated();
        let d = |k: u64| {
            format!(
                "done=0 noop={k} lock={} retry_later=0 blocked={k} rpc_error={} dry_run=0 unspecified={k} withdrawn={}",
                2 * k,
                2 * k,
                2 * k
            )
        };
        let shard = |n: u64, outcome: &str, walker: &str, halt: &str| {
            format!(
                "shard=0{n} outcome={outcome} buckets=2 rules={n} events={} matches={} pending={n} skipped_no_mtime={} \
                 unconfirmed={} locked={} completed_upload_leftovers={} {} walker={walker} recovery=b1:cold_start \
                 halt={halt} duration=1.50{n}s",
                10 * n,
                5 * n,
                2 * n,
                3 * n,
                4 * n,
                6 * n,
                d(n)
            )
        };
        let want = [
            shard(1, "completed", "yes", ""),
            shard(2, "halted", "no", "RETRY_LATER_b2/k:_busy"),
            shard(3, "failed", "no", "RETRY_LATER_b3/k:_busy"),
            format!(
                "pass run_id=run-1 now=2026-01-02T03:04:05Z outcome=failed shards=3 halted=1 buckets=2 rules=3 \
                 events=60 events_read=77 ranges_read=2 read_span=3.000s matches=30 pending=6 skipped_no_mtime=12 \
                 unconfirmed=18 locked=24 completed_upload_leftovers=36 {} deleted_bytes=600 duration=2.345s",
                d(6)
            ),
            "deleted bucket=b1 rule=r1 objects=1 bytes=100".into(),
            "deleted bucket=b2 rule=r1 objects=2 bytes=200".into(),
            "deleted bucket=b3 rule=r1 objects=3 bytes=300".into(),
            "volumes unknown: master down".into(),
        ];
        assert_eq!(render(&r, "run-1", true, false), want);

        let j: serde_json::Value =
            serde_json::from_str(&render(&r, "run-1", true, true)[0]).unwrap();
        let keys = |v: &serde_json::Value| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        assert_eq!(
            keys(&j),
            "approved bucket_errors buckets deleted deleted_bytes dry_run duration_ms go_worker held now now_ns \
             outcome paused reclaim replay run_id shards totals truncated unknown_buckets"
        );
        let counters = "completed_upload_leftovers deletes events_scanned locked matches pending skipped_no_mtime unconfirmed";
        assert_eq!(keys(&j["totals"]), counters);
        assert_eq!(
            keys(&j["shards"][1]),
            "buckets completed_upload_leftovers deletes duration_ms events_scanned halt_reason locked matches \
             outcome pending recovery rules shard skipped_no_mtime unconfirmed walker_ran"
        );
        assert_eq!(keys(&j["replay"]), "batches events_read ranges read_ns");
        assert_eq!(keys(&j["go_worker"]), "last_write recent since_last_pass");
        assert_eq!(j["go_worker"]["last_write"], "2026-01-02T03:04:05Z");
        assert_eq!(
            keys(&j["held"][0]),
            "bucket cap entries reason would_delete"
        );
        assert_eq!(j["shards"][1]["halt_reason"], "RETRY_LATER b2/k: busy");
        assert_eq!(j["shards"][0]["recovery"][0]["reason"], "cold_start");
        assert_eq!(j["totals"]["deletes"]["WITHDRAWN"], 12);
        assert_eq!(
            (j["deleted_bytes"].as_u64(), j["now_ns"].as_i64()),
            (Some(600), Some(T0))
        );
    }
}
