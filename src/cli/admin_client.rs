//! `s3-lifecycled trigger` and `s3-lifecycled status`: clients of a running
//! service's admin gRPC API (see [`crate::admin`]).
//!
//! The address is `--admin`, else `service.admin_listen` from `--config` and
//! the `S3_LIFECYCLED__*` environment (the same resolution `serve` uses, so
//! both ends agree without flags). Exit codes: 0 ok; 1 the service could not
//! be reached or failed (the message names the address); 2 usage or
//! configuration error, including a request the server rejected as invalid.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::admin::auth::{AdminToken, SendToken};
use crate::admin::convert::{self, cursor_lag_ns};

use super::{EXIT_OK, Fail, failed, print_json_or, usage};
use crate::config::{Settings, parse_shards};
use crate::engine::DeleteOutcome;
use crate::pb::admin as pb;
use crate::pb::admin::lifecycled_admin_client::LifecycledAdminClient;
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
use crate::status::{
    DeleteCounts, PassSummary, ServiceState, StatusSnapshot, format_age, format_time, outcome_label,
};

/// How long to wait for the TCP connection: a local service answers at once,
/// so a long wait only delays the "is it running?" message.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Per-call deadline. Every call only reads in-memory state or enqueues a
/// pass, so this is generous.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the admin API is.
#[derive(Debug, Clone, Args)]
pub struct AdminAddress {
    /// Admin API address, HOST:PORT. Default: `service.admin_listen` of the
    /// configuration.
    #[arg(long, value_name = "HOST:PORT")]
    pub admin: Option<String>,
    /// Configuration file to read `service.admin_listen` (and
    /// `service.admin_token_file`) from.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// File holding the service's bearer token. Default:
    /// `service.admin_token_file` of the configuration.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TriggerArgs {
    #[command(flatten)]
    pub address: AdminAddress,
    /// Shards to run: `0-15`, `3` or `0,4,7`. Default: the service's `pass.shards`.
    #[arg(long, value_name = "SHARDS")]
    pub shards: Option<String>,
    /// Evaluate the pass as of this RFC 3339 time instead of the wall clock.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Decide and report everything, delete nothing, save no cursor.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub address: AdminAddress,
    /// Show the last finished pass (per shard and per bucket) instead of the
    /// current state.
    #[arg(long)]
    pub last: bool,
    /// One JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub address: AdminAddress,
    /// The bucket to leave alone from the next pass on.
    pub bucket: String,
    /// A note kept with the pause and shown on the status page.
    #[arg(long, default_value = "")]
    pub reason: String,
    /// Pause a bucket the cluster does not have yet (without it, such a name
    /// is refused as a typo, exit 2).
    #[arg(long)]
    pub create_if_missing: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub address: AdminAddress,
    /// The paused bucket.
    pub bucket: String,
}

#[derive(Debug, Clone, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub address: AdminAddress,
    /// The held bucket whose work the next pass may do, uncapped, once.
    pub bucket: String,
}

pub fn approve(args: &ApproveArgs) -> Result<i32, Fail> {
    let req = pb::ApproveBucketRequest {
        bucket: checked_bucket(&args.bucket)?,
    };
    let resp = call(&args.address, "ApproveBucket", async |c| {
        c.approve_bucket(req).await
    })?;
    let effect = if resp.held {
        "the next pass does not cap it (once)"
    } else {
        "no deletion-cap hold on it now; the next pass that would cap it or defer it in a \
         rule-change grace does not (once)"
    };
    let at = format_time(resp.approved_ns);
    println!("bucket {} approved at {at}: {effect}", args.bucket);
    Ok(EXIT_OK)
}

/// `bucket`, owned, if it is a valid bucket name.
fn checked_bucket(bucket: &str) -> Result<String, Fail> {
    crate::engine::safety::check_bucket_name(bucket).map_err(usage)?;
    Ok(bucket.to_string())
}

/// `forecast --admin`: the forecast through the running service's admin API
/// (`GetForecast`).
pub fn fetch_forecast(
    address: &AdminAddress,
    bucket: Option<&str>,
    days: u32,
    now_ns: Option<i64>,
) -> Result<crate::engine::forecast::Forecast, Fail> {
    let req = pb::GetForecastRequest {
        bucket: bucket.map(checked_bucket).transpose()?.unwrap_or_default(),
        days,
        now_ns: now_ns.unwrap_or(0),
    };
    let resp = call(address, "GetForecast", async |c| c.get_forecast(req).await)?;
    Ok(crate::admin::convert::forecast_from_pb(&resp))
}

pub fn pause(args: &PauseArgs) -> Result<i32, Fail> {
    let req = pb::PauseBucketRequest {
        bucket: checked_bucket(&args.bucket)?,
        reason: args.reason.clone(),
        create_if_missing: args.create_if_missing,
    };
    let resp = call(&args.address, "PauseBucket", async |c| {
        c.pause_bucket(req).await
    })?;
    let since = if resp.was_paused {
        "was already paused since"
    } else {
        "paused at"
    };
    let reason = if resp.reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", resp.reason)
    };
    println!(
        "bucket {} {since} {}{reason}: passes leave it alone from the next one on (a running pass \
         finishes as it started); its matches stay pending until `s3-lifecycled resume {}`",
        args.bucket,
        format_time(resp.paused_ns),
        args.bucket
    );
    Ok(EXIT_OK)
}

pub fn resume(args: &ResumeArgs) -> Result<i32, Fail> {
    let req = pb::ResumeBucketRequest {
        bucket: checked_bucket(&args.bucket)?,
    };
    let resp = call(&args.address, "ResumeBucket", async |c| {
        c.resume_bucket(req).await
    })?;
    if resp.was_paused {
        println!(
            "bucket {} resumed: the next pass sends its pending deletes",
            args.bucket
        );
    } else {
        println!("bucket {} was not paused; nothing changed", args.bucket);
    }
    Ok(EXIT_OK)
}

/// The admin address and the token to send: flags first, else the
/// configuration (file and environment), as `serve` resolves them.
fn resolve_address(a: &AdminAddress) -> Result<(String, Option<AdminToken>), Fail> {
    let from_file = |p: &std::path::Path| {
        AdminToken::from_file(p).map_err(|e| {
            usage(e.replace(
                "configuration key `service.admin_token_file`",
                "--admin-token-file / service.admin_token_file",
            ))
        })
    };
    let flag_token = a.admin_token_file.as_deref().map(from_file).transpose()?;
    let load = || Settings::load(a.config.as_deref(), std::env::vars());
    let (addr, s) = match a.admin.as_deref().map(str::trim) {
        Some("") => {
            return Err(usage(
                "--admin: empty address (use HOST:PORT, e.g. 127.0.0.1:9710)",
            ));
        }
        // Without a token flag the configuration may still name one.
        Some(addr) => (
            addr.to_string(),
            flag_token.is_none().then(load).and_then(Result::ok),
        ),
        None => {
            let s = load().map_err(|e| usage(format!("{e} (or pass --admin HOST:PORT)")))?;
            (s.service.admin_listen.clone(), Some(s))
        }
    };
    let token = match (flag_token, s) {
        (Some(t), _) => Some(t),
        (None, Some(s)) if !s.service.admin_token_file.trim().is_empty() => Some(from_file(
            std::path::Path::new(s.service.admin_token_file.trim()),
        )?),
        _ => None,
    };
    Ok((addr, token))
}

/// Resolves the address, connects, makes one call and maps a refusal to its
/// exit code: the round trip of every subcommand.
fn call<T>(
    address: &AdminAddress,
    name: &str,
    f: impl AsyncFnOnce(&mut AdminClient) -> Result<tonic::Response<T>, tonic::Status>,
) -> Result<T, Fail> {
    let (addr, token) = resolve_address(address)?;
    super::one_shot_runtime()?.block_on(async {
        let mut client = connect(&addr, token).await?;
        f(&mut client)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|st| server_error(&addr, name, &st))
    })
}

/// The admin client: every call carries the bearer token when there is one.
type AdminClient = LifecycledAdminClient<InterceptedService<Channel, SendToken>>;

async fn connect(addr: &str, token: Option<AdminToken>) -> Result<AdminClient, Fail> {
    let options = EndpointOptions::new()
        .connect_timeout(CONNECT_TIMEOUT)
        .call_timeout(CALL_TIMEOUT);
    let endpoint = GrpcEndpoint::new(addr, &options).map_err(|e| {
        usage(format!(
            "admin address `{addr}` is not HOST:PORT (e.g. 127.0.0.1:9710): {}",
            e.reason()
        ))
    })?;
    let channel = endpoint.connect().await.map_err(|e| {
        failed(format!(
            "cannot reach the admin API at {addr}: {} (is `s3-lifecycled serve` running there? see --admin and service.admin_listen)",
            error_chain(&e)
        ))
    })?;
    Ok(LifecycledAdminClient::with_interceptor(
        channel,
        SendToken(token),
    ))
}

/// The error and its sources, `a: b: c`: tonic's top-level transport error
/// alone says only "transport error".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    for inner in std::iter::successors(e.source(), |e| e.source()) {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
    }
    s
}

fn server_error(addr: &str, call: &str, st: &tonic::Status) -> Fail {
    let message = format!(
        "admin API at {addr}: {call}: {:?}: {}",
        st.code(),
        st.message()
    );
    // A refused token is the caller's configuration, like an invalid request;
    // a bucket that does not exist is a typo in it.
    match st.code() {
        tonic::Code::InvalidArgument | tonic::Code::Unauthenticated | tonic::Code::NotFound => {
            usage(message)
        }
        _ => failed(message),
    }
}

pub fn trigger(args: &TriggerArgs) -> Result<i32, Fail> {
    // Check what can be checked locally first, so a typo is exit 2 even when
    // the service is down.
    let shards = match &args.shards {
        None => Vec::new(),
        Some(s) => parse_shards(s)
            .map_err(|m| usage(format!("--shards: {m}")))?
            .into_iter()
            .map(u32::from)
            .collect(),
    };
    if let Some(now) = &args.now {
        super::parse_time("--now", now)?;
    }
    let req = pb::TriggerRunRequest {
        shards,
        now: args.now.clone(),
        dry_run: args.dry_run,
    };
    let resp = call(&args.address, "TriggerRun", async |c| {
        c.trigger_run(req).await
    })?;
    let note = if resp.already_running {
        " (a pass was running; nothing new started)"
    } else {
        ""
    };
    let running = resp.already_running;
    println!("run_id={} already_running={running}{note}", resp.run_id);
    Ok(EXIT_OK)
}

pub fn status(args: &StatusArgs) -> Result<i32, Fail> {
    if !args.last {
        let st = call(&args.address, "GetStatus", async |c| {
            c.get_status(pb::GetStatusRequest {}).await
        })?;
        let st = convert::status_from_pb(&st);
        print_json_or(args.json, &status_json(&st), |_| {
            status_text(&st, crate::clock::wall_ns())
        });
        return Ok(EXIT_OK);
    }
    let last = call(&args.address, "GetLastRun", async |c| {
        match c.get_last_run(pb::GetLastRunRequest {}).await {
            Err(st) if st.code() == tonic::Code::NotFound => Ok(tonic::Response::new(None)),
            r => r.map(|r| r.map(Some)),
        }
    })?;
    match last.map(|r| convert::last_run_from_pb(&r)) {
        None if args.json => println!("null"),
        None => println!("No pass has finished since the service started."),
        Some(p) => print_json_or(args.json, &last_run_json(&p), |_| last_run_text(&p)),
    }
    Ok(EXIT_OK)
}

/// The order deletes are shown in: every [`DeleteOutcome::REPORTED`] one.
fn delete_counts(d: &DeleteCounts) -> impl Iterator<Item = (DeleteOutcome, u64)> + '_ {
    DeleteOutcome::REPORTED.into_iter().map(|o| (o, d.get(o)))
}

/// The service state as `/status.json` serializes it (`shutting_down`).
fn state_name(s: ServiceState) -> String {
    json!(s).as_str().unwrap_or("unknown").to_string()
}

/// `status --json`: the state and the running pass under the admin API's
/// field names (`start_ns`, not `/status.json`'s `started_ns`), enums as
/// lowercase names.
fn status_json(s: &StatusSnapshot) -> Value {
    let mut v = json!({
        "state": state_name(s.service_state),
        "next_pass_ns": s.next_pass_ns,
        "paused": s.paused,
        "current_pass": s.current_pass.as_ref().map(|p| json!({
            "run_id": p.run_id,
            "start_ns": p.started_ns,
            "shards_running": p.shards_running,
            "shards_done": p.shards_done,
            "shards": p.shards.iter().map(|r| json!({
                "shard": r.shard,
                "phase": r.phase.as_str(),
                "events_scanned": r.events_scanned,
                "matches": r.matches,
                "deletes": r.deletes.by_label(),
                "in_flight": r.in_flight,
                "halt_reason": r.halt_reason,
                "restarts": r.restarts,
            })).collect::<Vec<_>>(),
        })),
    });
    // Only while standing by: the keys of a running service stay as they were.
    if let Some(why) = &s.standby_reason {
        v["standby_reason"] = json!(why);
    }
    if let Some(g) = &s.go_worker {
        v["go_worker"] = json!(g);
    }
    v
}

/// `status --last --json`: the last pass under the admin API's field names,
/// with each row's cursor lag.
fn last_run_json(p: &PassSummary) -> Value {
    let lag = |finished_ns, cursor_ts_ns| cursor_lag_ns(finished_ns, p.finished_ns, cursor_ts_ns);
    json!({
        "run_id": p.run_id,
        "start_ns": p.started_ns,
        "finish_ns": p.finished_ns,
        "outcome": outcome_label(p.outcome),
        "shards": p.shards.iter().map(|s| json!({
            "shard": s.shard,
            "start_ns": s.started_ns,
            "finish_ns": s.finished_ns,
            "outcome": outcome_label(s.outcome),
            "events_scanned": s.events_scanned,
            "matches": s.matches,
            "deletes": s.deletes.by_label(),
            "halt_reason": s.halt_reason,
            "cursor_ts_ns": s.cursor_ts_ns,
            "cursor_lag_ns": lag(s.finished_ns, s.cursor_ts_ns),
            "last_walk_ns": s.last_walked_ns,
            "restarts": s.restarts,
            "unconfirmed": s.unconfirmed,
            "locked": s.locked,
            "completed_upload_leftovers": s.completed_upload_leftovers,
        })).collect::<Vec<_>>(),
        "buckets": p.buckets.iter().map(|b| json!({
            "bucket": b.bucket,
            "start_ns": b.started_ns,
            "finish_ns": b.finished_ns,
            "outcome": outcome_label(b.outcome),
            "events_scanned": b.events_scanned,
            "deletes": b.deletes.by_label(),
            "halt_reason": b.halt_reason,
            "cursor_ts_ns": b.cursor_ts_ns,
            "cursor_lag_ns": lag(b.finished_ns, b.cursor_ts_ns),
            "last_walk_ns": b.last_walked_ns,
            "config_error": b.config_error,
            "held_reason": b.held_reason,
            "deleted": b.deleted.iter().map(|d| json!({"rule": d.rule, "objects": d.objects, "bytes": d.bytes})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "deleted_bytes": crate::engine::reclaim::rows_total(&p.deleted()),
        "space": p.space,
    })
}

/// A duration in ns as `1d2h`, `3h4m`, `5m6s`, `7s`: no spaces, so
/// `key=value` lines stay splittable on whitespace.
fn format_span(ns: i64) -> String {
    // format_age measures now - then; a span is the age of "then = 1 ns"
    // seen at "now = ns + 1".
    format_age(ns.saturating_add(1), 1).replace(' ', "")
}

fn delete_cells(d: &DeleteCounts) -> String {
    delete_counts(d)
        .map(|(_, n)| format!("{n:>8}"))
        .collect::<Vec<_>>()
        .join(" ")
}

const DELETE_HEADER: &str = "    DONE     NOOP     LOCK    RETRY  BLOCKED  RPC_ERR  DRY_RUN";

fn status_text(s: &StatusSnapshot, now: i64) -> String {
    let mut out = format!("state: {}\n", state_name(s.service_state));
    if let Some(why) = &s.standby_reason {
        out.push_str(&format!("standing by: {why}\n"));
    }
    if let Some(next) = s.next_pass_ns {
        out.push_str(&format!("next pass: {}\n", format_time(next)));
    }
    if let Some(g) = &s.go_worker {
        out.push_str(&format!(
            "Go s3_lifecycle worker: ran on shards {} since this service's last pass over them \
             (its cursor files last written {}, {} ago): two enforcers; see \
             docs/go-cursor.md#another-enforcer\n",
            crate::engine::shard::shards_label(&g.shards),
            format_time(g.last_write_ns),
            crate::status::format_age(now, g.last_write_ns)
        ));
    }
    for p in &s.paused {
        out.push_str(&format!(
            "paused: {} since {}{}\n",
            p.bucket,
            format_time(p.paused_ns),
            if p.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", p.reason)
            }
        ));
    }
    match &s.current_pass {
        None => out.push_str("current pass: none\n"),
        Some(p) => {
            out.push_str(&format!(
                "current pass: {} started {} ({} ago), shards running {}, done {}\n",
                p.run_id,
                format_time(p.started_ns),
                format_age(now, p.started_ns),
                p.shards_running,
                p.shards_done
            ));
            out.push_str(&format!(
                "shard phase         events  matches in_flight {DELETE_HEADER}  halt_reason\n"
            ));
            for r in &p.shards {
                out.push_str(&format!(
                    "{:>5} {:<10} {:>9} {:>8} {:>9} {}  {}\n",
                    format!("{:02}", r.shard),
                    r.phase.as_str(),
                    r.events_scanned,
                    r.matches,
                    r.in_flight,
                    delete_cells(&r.deletes),
                    r.halt_reason.as_deref().unwrap_or("-")
                ));
            }
        }
    }
    out
}

/// A row's cursor lag for the text: `cold` without a cursor.
fn lag_text(p: &PassSummary, finished_ns: i64, cursor_ts_ns: i64) -> String {
    if cursor_ts_ns == 0 {
        "cold".into()
    } else {
        format_span(cursor_lag_ns(finished_ns, p.finished_ns, cursor_ts_ns))
    }
}

fn last_run_text(p: &PassSummary) -> String {
    let mut out = format!(
        "last pass: {} outcome={} start={} finish={}\n",
        p.run_id,
        outcome_label(p.outcome),
        format_time(p.started_ns),
        format_time(p.finished_ns)
    );
    out.push_str(&format!(
        "shard outcome      events  matches {DELETE_HEADER}  cursor_lag  last_walk             halt_reason\n"
    ));
    for s in &p.shards {
        out.push_str(&format!(
            "{:>5} {:<9} {:>9} {:>8} {}  {:>10}  {:<20}  {}\n",
            format!("{:02}", s.shard),
            outcome_label(s.outcome),
            s.events_scanned,
            s.matches,
            delete_cells(&s.deletes),
            lag_text(p, s.finished_ns, s.cursor_ts_ns),
            format_time(s.last_walked_ns),
            s.halt_reason.as_deref().unwrap_or("-")
        ));
    }
    // Rare, and each one needs a look: listed only when they happened.
    for s in &p.shards {
        if s.unconfirmed + s.locked + s.completed_upload_leftovers > 0 {
            out.push_str(&format!(
                "shard {:02}: unconfirmed={} locked={} completed_upload_leftovers={} (retried next pass; leftovers are never aborted)\n",
                s.shard, s.unconfirmed, s.locked, s.completed_upload_leftovers
            ));
        }
    }
    for b in &p.buckets {
        let deletes: Vec<String> = delete_counts(&b.deletes)
            .map(|(o, n)| format!("{}={n}", o.label().to_ascii_lowercase()))
            .collect();
        out.push_str(&format!(
            "bucket={} outcome={} start={} finish={} events={} {} cursor_lag={} last_walk={}",
            b.bucket,
            outcome_label(b.outcome),
            format_time(b.started_ns),
            format_time(b.finished_ns),
            b.events_scanned,
            deletes.join(" "),
            lag_text(p, b.finished_ns, b.cursor_ts_ns),
            format_time(b.last_walked_ns),
        ));
        // Free text goes last and quoted, so `key=value` parsing of the rest holds.
        if let Some(h) = &b.halt_reason {
            out.push_str(&format!(" halt={h:?}"));
        }
        if let Some(h) = &b.held_reason {
            out.push_str(&format!(" held={h:?}"));
        }
        if let Some(e) = &b.config_error {
            out.push_str(&format!(" config_error={e:?}"));
        }
        out.push('\n');
    }
    out.extend(
        crate::engine::reclaim::lines(&p.deleted(), p.space.as_ref())
            .into_iter()
            .map(|l| l + "\n"),
    );
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::pb::admin as pb;

    const T0: i64 = 1_767_323_045_000_000_000; // 2026-01-02T03:04:05Z

    fn deletes(done: u64, retry: u64) -> HashMap<String, u64> {
        let mut m: HashMap<String, u64> = DeleteOutcome::REPORTED
            .iter()
            .map(|o| (o.label().to_string(), 0))
            .collect();
        m.insert("DONE".into(), done);
        m.insert("RETRY_LATER".into(), retry);
        m
    }

    #[test]
    fn last_run_text_has_shard_rows_and_bucket_lines() {
        let r = pb::GetLastRunResponse {
            run_id: "r1".into(),
            start_ns: T0,
            finish_ns: T0 + 60_000_000_000,
            outcome: pb::RunOutcome::Halted as i32,
            shards: vec![pb::ShardRun {
                shard: 3,
                outcome: pb::RunOutcome::Halted as i32,
                events_scanned: 42,
                deletes: deletes(5, 1),
                halt_reason: Some("RETRY_LATER b/k: busy".into()),
                // Unfinished: lagging 1h2m behind the pass's finish.
                cursor_ts_ns: T0 + 60_000_000_000 - 3_720_000_000_000,
                ..Default::default()
            }],
            buckets: vec![pb::BucketRun {
                bucket: "logs".into(),
                outcome: pb::RunOutcome::Completed as i32,
                events_scanned: 42,
                deletes: deletes(5, 0),
                config_error: Some("bad \"rule\"".into()),
                ..Default::default()
            }],
            space: None,
        };
        let t = last_run_text(&convert::last_run_from_pb(&r));
        assert!(t.starts_with("last pass: r1 outcome=halted start=2026-01-02T03:04:05Z finish=2026-01-02T03:05:05Z\n"), "{t}");
        let row = t.lines().nth(2).unwrap();
        assert!(
            row.starts_with("   03 halted           42        0 "),
            "{row}"
        );
        assert!(
            row.contains("1h2m") && row.ends_with("RETRY_LATER b/k: busy"),
            "{row}"
        );
        let bucket = t.lines().nth(3).unwrap();
        assert!(
            bucket.starts_with(
                "bucket=logs outcome=completed start=— finish=— events=42 done=5 noop_resolved=0"
            ),
            "{bucket}"
        );
        assert!(bucket.contains("cursor_lag=cold"), "{bucket}");
        assert!(
            bucket.ends_with(r#"config_error="bad \"rule\"""#),
            "{bucket}"
        );
    }

    #[test]
    fn status_text_shows_state_and_progress() {
        let s = pb::GetStatusResponse {
            state: pb::ServiceState::Running as i32,
            next_pass_ns: Some(T0),
            current_pass: Some(pb::PassProgress {
                run_id: "r2".into(),
                start_ns: T0 - 65_000_000_000,
                shards_running: 1,
                shards_done: 0,
                shards: vec![pb::ShardProgress {
                    shard: 12,
                    phase: pb::ShardPhase::Replaying as i32,
                    events_scanned: 7,
                    matches: 2,
                    in_flight: 1,
                    deletes: deletes(1, 0),
                    ..Default::default()
                }],
            }),
            paused: vec![pb::PausedBucket {
                bucket: "logs".into(),
                paused_ns: T0,
                reason: "typo".into(),
            }],
            standby_reason: None,
            go_worker: Some(pb::GoWorkerSeen {
                shards: vec![0, 1, 2, 7],
                last_write_ns: T0 - 3_600_000_000_000,
            }),
        };
        let s = convert::status_from_pb(&s);
        let t = status_text(&s, T0);
        // A Go worker still running said nothing in `status`.
        assert!(
            t.contains("Go s3_lifecycle worker: ran on shards 0-2,7 since")
                && t.contains("(its cursor files last written 2026-01-02T02:04:05Z, 1h 0m ago)"),
            "{t}"
        );
        assert!(
            t.contains("paused: logs since 2026-01-02T03:04:05Z (typo)\n"),
            "{t}"
        );
        assert!(
            t.starts_with("state: running\nnext pass: 2026-01-02T03:04:05Z\n"),
            "{t}"
        );
        assert!(
            t.contains("current pass: r2 started 2026-01-02T03:03:00Z (1m 5s ago)"),
            "{t}"
        );
        assert!(
            t.contains("   12 replaying          7        2         1 "),
            "{t}"
        );
        let j = status_json(&s);
        assert_eq!(j["state"], "running");
        assert_eq!(j["current_pass"]["shards"][0]["phase"], "replaying");
        assert_eq!(j["current_pass"]["shards"][0]["halt_reason"], Value::Null);
        assert_eq!(j["paused"][0]["bucket"], "logs");
    }

    #[test]
    fn a_newer_services_state_phase_and_outcome_read_as_starting_waiting_and_running() {
        let s = pb::GetStatusResponse {
            state: 99,
            current_pass: Some(pb::PassProgress {
                shards: vec![pb::ShardProgress {
                    shard: 3,
                    phase: 42,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = convert::status_from_pb(&s);
        let t = status_text(&s, T0);
        assert!(t.starts_with("state: unknown\n"), "{t}");
        assert!(t.contains("   03 unknown "), "{t}");
        let j = status_json(&s);
        assert_eq!(j["state"], "unknown");
        assert_eq!(j["current_pass"]["shards"][0]["phase"], "unknown");
        // A finished pass with an outcome from a newer build is not "running".
        let r = pb::GetLastRunResponse {
            run_id: "r9".into(),
            outcome: 9,
            ..Default::default()
        };
        let t = last_run_text(&convert::last_run_from_pb(&r));
        assert!(t.starts_with("last pass: r9 outcome=unknown "), "{t}");
    }

    /// A populated status and last run, as the service's own conversion
    /// puts them on the wire.
    fn populated() -> (pb::GetStatusResponse, pb::GetLastRunResponse) {
        use crate::engine::reclaim::{CollectionGarbage, FreedRow, ReclaimReport, VacuumReport};
        use crate::status::*;
        let mut d = DeleteCounts::default();
        for (i, o) in DeleteOutcome::ALL.into_iter().enumerate() {
            d.add_n(o, i as u64 + 1);
        }
        let shard = |n: u8, outcome: Option<RunOutcome>, finished_ns: i64| ShardSummary {
            shard: n,
            phase: ShardPhase::Draining,
            started_ns: T0 + 1,
            finished_ns,
            outcome,
            matches: 5,
            in_flight: 2,
            cursor_ts_ns: T0 - 7_000,
            last_walked_ns: T0 - 9_000,
            halt_reason: (n == 3).then(|| "RETRY_LATER b/k: busy".into()),
            restarts: 4,
            events_scanned: 42,
            deletes: if n == 3 {
                d.clone()
            } else {
                DeleteCounts::default()
            },
            unconfirmed: 6,
            locked: 7,
            completed_upload_leftovers: 8,
        };
        let snap = StatusSnapshot {
            service_state: ServiceState::ShuttingDown,
            next_pass_ns: Some(T0 + 5),
            current_pass: Some(PassProgress {
                run_id: "r2".into(),
                started_ns: T0 - 10,
                shards_running: 1,
                shards_done: 1,
                shards: vec![
                    shard(3, None, 0),
                    shard(12, Some(RunOutcome::Completed), T0),
                ],
            }),
            paused: vec![PausedBucket {
                bucket: "logs".into(),
                paused_ns: T0,
                reason: "typo".into(),
            }],
            ..Default::default()
        };
        let bucket = |name: &str, deleted: Vec<FreedRow>| BucketSummary {
            bucket: name.into(),
            started_ns: T0 + 2,
            finished_ns: if deleted.is_empty() { 0 } else { T0 + 50 },
            outcome: Some(RunOutcome::Truncated),
            events_scanned: 9,
            deletes: d.clone(),
            last_walked_ns: T0 - 3,
            config_error: Some("bad".into()),
            halt_reason: Some("halt".into()),
            cursor_ts_ns: T0 - 1_000,
            held_reason: Some("cap".into()),
            deleted,
        };
        let row = |rule: &str, bytes| FreedRow {
            bucket: "a".into(),
            rule: rule.into(),
            objects: 2,
            bytes,
        };
        let last = PassSummary {
            run_id: "r1".into(),
            started_ns: T0,
            finished_ns: T0 + 100,
            outcome: Some(RunOutcome::Halted),
            shards: vec![
                shard(3, Some(RunOutcome::Halted), 0),
                shard(4, Some(RunOutcome::Failed), T0 + 60),
            ],
            buckets: vec![
                bucket("a", vec![row("r1", 100), row("r2", 23)]),
                bucket("b", Vec::new()),
            ],
            space: Some(ReclaimReport {
                collections: vec![CollectionGarbage {
                    collection: "a".into(),
                    volumes: 2,
                    size_bytes: 1000,
                    garbage_bytes: 123,
                    ec_volumes: vec![5],
                    ec_deleted_bytes: 77,
                    read_only_volumes: vec![6],
                    read_only_deleted_bytes: 88,
                }],
                settled: true,
                error: Some("slow".into()),
                vacuum: Some(VacuumReport {
                    skipped: None,
                    vacuumed: vec![1],
                    deferred: vec![2],
                    left_to_master: vec![3],
                    failed: vec!["4: no".into()],
                    size_before: 1000,
                    size_after: 877,
                }),
            }),
        };
        (
            crate::admin::convert::status_response(&snap),
            crate::admin::convert::last_run_response(&last),
        )
    }

    /// The keys and values `status --json` and `status --last --json`
    /// print for [`populated`]: a script reading them must keep working.
    #[test]
    fn status_json_keys_are_stable() {
        let (s, l) = populated();
        let all = json!({"BLOCKED": 5, "DONE": 1, "DRY_RUN": 7, "LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED": 8,
            "NOOP_RESOLVED": 2, "RETRY_LATER": 4, "RPC_ERROR": 6, "SKIPPED_OBJECT_LOCK": 3, "WITHDRAWN": 9});
        let zero = json!({"BLOCKED": 0, "DONE": 0, "DRY_RUN": 0, "NOOP_RESOLVED": 0, "RETRY_LATER": 0,
            "RPC_ERROR": 0, "SKIPPED_OBJECT_LOCK": 0});
        let want = json!({"state": "shutting_down", "next_pass_ns": T0 + 5,
            "paused": [{"bucket": "logs", "paused_ns": T0, "reason": "typo"}],
            "current_pass": {"run_id": "r2", "start_ns": T0 - 10, "shards_running": 1, "shards_done": 1, "shards": [
                {"shard": 3, "phase": "draining", "events_scanned": 42, "matches": 5, "deletes": all,
                 "in_flight": 2, "halt_reason": "RETRY_LATER b/k: busy", "restarts": 4},
                {"shard": 12, "phase": "draining", "events_scanned": 42, "matches": 5, "deletes": zero,
                 "in_flight": 2, "halt_reason": null, "restarts": 4}]}});
        assert_eq!(convert::status_response(&convert::status_from_pb(&s)), s);
        assert_eq!(status_json(&convert::status_from_pb(&s)), want);
        let bucket = |name: &str, finish_ns: i64, lag: i64, deleted: Value| {
            json!({"bucket": name,
            "start_ns": T0 + 2, "finish_ns": finish_ns, "outcome": "truncated", "events_scanned": 9,
            "deletes": all, "halt_reason": "halt", "cursor_ts_ns": T0 - 1_000, "cursor_lag_ns": lag,
            "last_walk_ns": T0 - 3, "config_error": "bad", "held_reason": "cap", "deleted": deleted})
        };
        let shard = |n: u32,
                     outcome: &str,
                     finish_ns: i64,
                     lag: i64,
                     deletes: &Value,
                     halt: Value| {
            json!({
            "shard": n, "start_ns": T0 + 1, "finish_ns": finish_ns, "outcome": outcome, "events_scanned": 42,
            "matches": 5, "deletes": deletes, "halt_reason": halt, "cursor_ts_ns": T0 - 7_000,
            "cursor_lag_ns": lag, "last_walk_ns": T0 - 9_000, "restarts": 4, "unconfirmed": 6, "locked": 7,
            "completed_upload_leftovers": 8})
        };
        let want = json!({"run_id": "r1", "start_ns": T0, "finish_ns": T0 + 100, "outcome": "halted",
            "shards": [shard(3, "halted", 0, 7_100, &all, json!("RETRY_LATER b/k: busy")),
                shard(4, "failed", T0 + 60, 7_060, &zero, Value::Null)],
            "buckets": [bucket("a", T0 + 50, 1_050, json!([{"rule": "r1", "objects": 2, "bytes": 100},
                    {"rule": "r2", "objects": 2, "bytes": 23}])),
                bucket("b", 0, 1_100, json!([]))],
            "deleted_bytes": 123,
            "space": {"collections": [{"collection": "a", "volumes": 2, "size_bytes": 1000, "garbage_bytes": 123,
                    "ec_volumes": [5], "ec_deleted_bytes": 77, "read_only_volumes": [6],
                    "read_only_deleted_bytes": 88}],
                "settled": true, "error": "slow", "vacuum": {"vacuumed": [1], "deferred": [2], "left_to_master": [3],
                "failed": ["4: no"], "size_before": 1000, "size_after": 877}}});
        let p = convert::last_run_from_pb(&l);
        assert_eq!(
            convert::last_run_response(&p),
            l,
            "the wire, read back, is what was sent"
        );
        assert_eq!(last_run_json(&p), want);
    }

    #[test]
    fn spans() {
        assert_eq!(format_span(7_000_000_000), "7s");
        assert_eq!(format_span(0), "0s");
        assert_eq!(format_span(26 * 3_600_000_000_000), "1d2h");
        assert_eq!(format_span(500 * 1_000_000_000), "8m20s");
    }
}
