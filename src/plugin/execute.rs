//! One job's execution: a pass through its own Coordinator and ShardActors,
//! progress per phase and shard while it runs, and the completion built from
//! its result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::pass::observe::{PassObserver, StatusBoard};
use crate::pass::options::{PassOptions, StopSignal};
use crate::pass::report::PassResult;
use crate::pass::runner::PassRunner;
use crate::pb::plugin::{
    ExecuteJobRequest, JobProgressUpdate, JobResult, JobState, worker_to_admin_message::Body as Out,
};
use crate::plugin::http::JobResult as Ended;
use crate::plugin::job::{self, JOB_TYPE};
use crate::plugin::shared::{Running, Shared, completed, timestamp};
use crate::status::{RunOutcome, StatusSnapshot};

/// At most one progress update per execution this often (phase changes
/// and finished shards wait for the next tick, not for a new pass).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// How the error of a stopped (canceled, shut down) execution begins.
const STOPPED: &str = "pass stopped";

fn progress(request_id: &str, job_id: &str, percent: f64, stage: &str, message: String) -> Out {
    Out::JobProgressUpdate(JobProgressUpdate {
        request_id: request_id.into(),
        job_id: job_id.into(),
        job_type: JOB_TYPE.into(),
        // The admin copies the state verbatim; only running keeps the job active.
        state: JobState::Running.into(),
        progress_percent: percent,
        stage: stage.into(),
        message,
        metrics: Default::default(),
        activities: Vec::new(),
        updated_at: Some(timestamp(crate::clock::wall_ns())),
    })
}

pub(super) fn start_execution(shared: &Shared, r: ExecuteJobRequest) {
    let job_id = r.job.as_ref().map(|j| j.job_id.clone()).unwrap_or_default();
    let (stop_tx, stop) = StopSignal::new();
    shared.lock().insert(
        r.request_id.clone(),
        Running {
            job_id: job_id.clone(),
            stop: stop_tx,
            stage: "starting".into(),
            percent: 0.0,
        },
    );
    shared.persist();
    shared.stats.set_running(shared.lock().len());
    let _ = shared.changed.send(());
    let shared = shared.clone();
    // On the actix System's thread: the pass starts its own Coordinator.
    actix::spawn(async move {
        let request_id = r.request_id.clone();
        let out = execute(&shared, r, &job_id, stop).await;
        shared.lock().remove(&request_id);
        shared.persist();
        shared.stats.set_running(shared.lock().len());
        if let Out::JobCompleted(c) = &out {
            shared.stats.job(if c.success {
                Ended::Succeeded
            } else if c.error_message.starts_with(STOPPED) {
                Ended::Canceled
            } else {
                Ended::Failed
            });
        }
        let _ = shared.outbox.send(out);
        let _ = shared.changed.send(());
    });
}

/// Runs one execution and answers its completion.
async fn execute(shared: &Shared, r: ExecuteJobRequest, job_id: &str, stop: StopSignal) -> Out {
    let req_id = r.request_id.clone();
    let fail = |e: String| {
        tracing::warn!(request_id = req_id, job_id, error = %e, "execution failed");
        completed(&req_id, job_id, false, &e, None)
    };
    if let Some(ctx) = &r.cluster_context {
        tracing::info!(
            request_id = req_id,
            job_id,
            filers = ?ctx.filer_addresses,
            s3 = ?ctx.s3_grpc_addresses,
            masters = ?ctx.master_grpc_addresses,
            "execution requested"
        );
    }
    let plan = match job::plan(&r, &shared.base) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let wa = &shared.base.weed_admin;
    if !wa.allow_other_enforcers
        && let Err(e) =
            crate::plugin::enforcer::check_settings(&shared.base, Some(&shared.id)).await
    {
        return fail(e);
    }
    let s = plan.settings.clone();
    let rate = match s.rate.effective() {
        Some((r, b)) => format!("rate={r}/s burst={b} ({})", plan.rate_source),
        None => "rate=unlimited".into(),
    };
    let _ = shared.outbox.send(progress(
        &req_id,
        job_id,
        0.0,
        "starting",
        format!(
            "s3-lifecycled pass over shards {} filer={} s3={} {rate}",
            s.pass.shards,
            s.cluster.filer.join(","),
            s.cluster.s3_grpc.join(",")
        ),
    ));
    let tls = match s.client_tls() {
        Ok(t) => t,
        Err(e) => return fail(e.to_string()),
    };
    let (snap_tx, snap_rx) = watch::channel(StatusSnapshot::default());
    let board = Arc::new(StatusBoard::new(snap_tx));
    let obs = PassObserver {
        metrics: shared.metrics.clone(),
        board: Some(board.clone()),
    };
    let runner = match PassRunner::connect(&s, tls, obs).await {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    let run_id = crate::pass::new_run_id();
    board.pass_started(&run_id, &plan.shards);
    let opts = PassOptions {
        now: crate::clock::wall_ns(),
        shards: plan.shards.clone(),
        dry_run: false,
        settings: s,
        run_id: run_id.clone(),
        stop: stop.clone(),
    };
    let reporter = actix::spawn(report_progress(
        shared.clone(),
        req_id.clone(),
        job_id.to_string(),
        snap_rx,
    ));
    let result = runner.run(opts).await.map_err(|e| e.to_string());
    reporter.abort();
    board.pass_finished(&run_id, &result);
    match result {
        Err(e) => fail(e),
        Ok(result) => finish(&req_id, job_id, &run_id, &result, stop.current()),
    }
}

/// Progress per phase and per shard: one update when the shard phases or
/// the finished count change, at most every [`PROGRESS_EVERY`].
async fn report_progress(
    shared: Shared,
    req_id: String,
    job_id: String,
    mut snaps: watch::Receiver<StatusSnapshot>,
) {
    let mut last = String::new();
    loop {
        if snaps.changed().await.is_err() {
            return;
        }
        let Some(p) = snaps.borrow_and_update().current_pass.clone() else {
            continue;
        };
        let total = p.shards.len().max(1);
        let done = p.shards.iter().filter(|s| s.outcome.is_some()).count();
        let phases: Vec<String> = p
            .shards
            .iter()
            .map(|s| format!("{:02}:{}", s.shard, s.phase.as_str()))
            .collect();
        let key = phases.join(" ");
        if key != last {
            last = key.clone();
            let percent = 100.0 * done as f64 / total as f64;
            let deletes: u64 = p.shards.iter().map(|s| s.deletes.total()).sum();
            let events: u64 = p.shards.iter().map(|s| s.events_scanned).sum();
            let stage = dominant_phase(&p.shards);
            if let Some(r) = shared.lock().get_mut(&req_id) {
                r.stage = stage.clone();
                r.percent = percent;
            }
            let _ = shared.outbox.send(progress(
                &req_id,
                &job_id,
                percent,
                &stage,
                format!("{done}/{total} shards done, events={events} deletes={deletes}; {key}"),
            ));
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

fn dominant_phase(shards: &[crate::status::ShardSummary]) -> String {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for s in shards.iter().filter(|s| s.outcome.is_none()) {
        *counts.entry(s.phase.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(p, _)| p.to_string())
        .unwrap_or_else(|| "finishing".into())
}

/// The completion of a finished pass: summary, output values, and success
/// unless a shard halted, the pass failed, or it was stopped (cancel,
/// shutdown). A pass cut by `pass.max_runtime` is a success: it saved its
/// cursors and the next one goes on from there.
fn finish(
    req_id: &str,
    job_id: &str,
    run_id: &str,
    r: &PassResult,
    stopped: Option<String>,
) -> Out {
    let totals = r.totals();
    let halted: Vec<String> = r
        .halted()
        .map(|s| {
            format!(
                "{:02} ({})",
                s.shard,
                s.halt_reason.as_deref().unwrap_or("halted")
            )
        })
        .collect();
    let shards: Vec<u8> = r.shards.iter().map(|s| s.report.shard).collect();
    let outcome = r.outcome();
    let d = &totals.deletes;
    let summary = format!(
        "s3-lifecycled pass {run_id} over shards {}: {outcome}; deleted={} events={} matches={} pending={} halted_shards={} in {:.1}s",
        crate::engine::shard::shards_label(&shards),
        d.done,
        totals.events_scanned,
        totals.matches,
        totals.pending,
        halted.len(),
        r.duration.as_secs_f64()
    );
    let mut out: std::collections::HashMap<String, crate::pb::plugin::ConfigValue> = d
        .by_label()
        .into_iter()
        .map(|(k, v)| (format!("deletes_{k}"), job::int(v as i64)))
        .collect();
    for (k, v) in [
        ("deleted", d.done),
        ("events_scanned", totals.events_scanned),
        ("matches", totals.matches),
        ("pending", totals.pending),
        ("unconfirmed", totals.unconfirmed),
        ("locked", totals.locked),
        ("halted_shards", halted.len() as u64),
        (
            "duration_ms",
            u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
        ),
    ] {
        out.insert(k.into(), job::int(i64::try_from(v).unwrap_or(i64::MAX)));
    }
    out.insert("run_id".into(), job::string(run_id));
    out.insert("outcome".into(), job::string(outcome.as_str()));
    out.insert(
        "shards".into(),
        job::string(crate::engine::shard::shards_label(&shards)),
    );
    if !halted.is_empty() {
        out.insert("halted".into(), job::string(halted.join("; ")));
    }
    // Another enforcer (docs/go-cursor.md#another-enforcer), in the job detail.
    if !r.go_worker.is_empty() {
        out.insert(
            "go_worker_shards".into(),
            job::string(crate::engine::shard::shards_label(&r.go_worker.shards())),
        );
    }
    let result = Some(JobResult {
        output_values: out,
        summary: summary.clone(),
    });
    let error = if let Some(e) = &r.error {
        Some(format!("pass failed: {e}"))
    } else if let Some(why) = stopped {
        Some(format!(
            "{STOPPED} ({why}); cursors saved where the shards stopped"
        ))
    } else if outcome == RunOutcome::Halted {
        Some(format!(
            "{} shard(s) halted: {}; the next pass retries from their cursors",
            halted.len(),
            halted.join("; ")
        ))
    } else {
        None
    };
    tracing::info!(request_id = req_id, job_id, summary, "execution finished");
    match error {
        None => completed(req_id, job_id, true, "", result),
        Some(e) => completed(req_id, job_id, false, &e, result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::go_activity::GoActivity;

    #[test]
    fn a_go_worker_still_running_was_missing_from_the_job_detail() {
        let outputs = |r: &PassResult| match finish("req", "job", "run", r, None) {
            Out::JobCompleted(c) => c.result.expect("a result").output_values,
            other => panic!("not a completion: {other:?}"),
        };
        let mut r = PassResult::default();
        assert!(!outputs(&r).contains_key("go_worker_shards"));
        r.go_worker = GoActivity {
            since_last_pass: vec![0, 1, 2, 5],
            recent: Vec::new(),
            last_write_ns: 1_800_000_000_000_000_000,
        };
        assert_eq!(outputs(&r)["go_worker_shards"], job::string("0-2,5"));
    }
}
