//! The admin gRPC API over a real socket: a fake [`AdminBackend`] behind the
//! real tonic server on 127.0.0.1:0, called through the generated client, the
//! `grpc.health.v1` client and the `s3-lifecycled` binary (`trigger`,
//! `status`). Also checks that `ops/config/production.toml` loads.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use s3_lifecycled::admin::{
    ADMIN_SERVICE_NAME, AdminBackend, AdminError, AdminHealth, TriggerAccepted, TriggerRequest,
    serve_admin,
};
use s3_lifecycled::engine::DeleteOutcome;
use s3_lifecycled::pb::admin as pb;
use s3_lifecycled::pb::admin::lifecycled_admin_client::LifecycledAdminClient;
use s3_lifecycled::status::{
    BucketSummary, DeleteCounts, PassProgress, PassSummary, RunOutcome, ServiceState, ShardPhase,
    ShardSummary, StatusSnapshot,
};
use serde_json::Value;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use common::{TmpDir, run_raw};

const T0: i64 = 1_767_323_045_000_000_000; // 2026-01-02T03:04:05Z
const SEC: i64 = 1_000_000_000;

/// Models the coordinator: one pass at a time; a trigger during a pass is
/// answered with that pass's id. Shard 15 is "not configured here".
#[derive(Default)]
struct Fake {
    inner: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    running: Option<String>,
    started: u32,
    accepted: Vec<TriggerRequest>,
    calls: u32,
    snapshot: StatusSnapshot,
    last: Option<PassSummary>,
}

impl Fake {
    fn with(snapshot: StatusSnapshot, last: Option<PassSummary>) -> Arc<Fake> {
        let f = Fake::default();
        {
            let mut g = f.inner.lock().unwrap();
            g.snapshot = snapshot;
            g.last = last;
        }
        Arc::new(f)
    }

    fn finish_pass(&self) {
        self.inner.lock().unwrap().running = None;
    }

    fn accepted(&self) -> Vec<TriggerRequest> {
        self.inner.lock().unwrap().accepted.clone()
    }

    fn calls(&self) -> u32 {
        self.inner.lock().unwrap().calls
    }
}

impl AdminBackend for Fake {
    fn trigger(
        &self,
        req: TriggerRequest,
    ) -> BoxFuture<'static, Result<TriggerAccepted, AdminError>> {
        let mut g = self.inner.lock().unwrap();
        g.calls += 1;
        let r = if req.shards.contains(&15) {
            Err(AdminError::FailedPrecondition(
                "shard 15 is not in pass.shards of this instance".into(),
            ))
        } else if let Some(id) = &g.running {
            Ok(TriggerAccepted {
                run_id: id.clone(),
                already_running: true,
            })
        } else {
            g.started += 1;
            let id = format!("run-{}", g.started);
            g.running = Some(id.clone());
            g.accepted.push(req);
            Ok(TriggerAccepted {
                run_id: id,
                already_running: false,
            })
        };
        async move { r }.boxed()
    }

    fn status(&self) -> BoxFuture<'static, Result<StatusSnapshot, AdminError>> {
        let s = self.inner.lock().unwrap().snapshot.clone();
        async move { Ok(s) }.boxed()
    }

    fn last_run(&self) -> BoxFuture<'static, Result<Option<PassSummary>, AdminError>> {
        let s = self.inner.lock().unwrap().last.clone();
        async move { Ok(s) }.boxed()
    }
}

fn counts(outcomes: &[(DeleteOutcome, u64)]) -> DeleteCounts {
    let mut d = DeleteCounts::default();
    for (o, n) in outcomes {
        d.add_n(*o, *n);
    }
    d
}

fn snapshot() -> StatusSnapshot {
    StatusSnapshot {
        standby_reason: None,
        service_state: ServiceState::Running,
        next_pass_ns: Some(T0 + 86_400 * SEC),
        stale_buckets: Vec::new(),
        stale_after_ns: 0,
        forecast: None,
        ttl_audit: None,
        go_worker: None,
        current_pass: Some(PassProgress {
            run_id: "run-live".into(),
            started_ns: T0 - 30 * SEC,
            shards_running: 1,
            shards_done: 1,
            shards: vec![
                ShardSummary {
                    shard: 2,
                    phase: ShardPhase::Replaying,
                    events_scanned: 1200,
                    matches: 40,
                    in_flight: 3,
                    restarts: 1,
                    deletes: counts(&[
                        (DeleteOutcome::Done, 30),
                        (DeleteOutcome::NoopResolved, 2),
                        (DeleteOutcome::DryRun, 1),
                    ]),
                    ..Default::default()
                },
                ShardSummary {
                    shard: 11,
                    phase: ShardPhase::Halted,
                    events_scanned: 5,
                    matches: 1,
                    halt_reason: Some("BLOCKED logs/a.txt: legal hold".into()),
                    deletes: counts(&[(DeleteOutcome::Blocked, 1)]),
                    ..Default::default()
                },
            ],
        }),
        last_pass: None,
        paused: Vec::new(),
    }
}

fn last_pass() -> PassSummary {
    PassSummary {
        run_id: "run-prev".into(),
        started_ns: T0,
        finished_ns: T0 + 600 * SEC,
        outcome: Some(RunOutcome::Halted),
        shards: vec![
            ShardSummary {
                shard: 0,
                started_ns: T0 + SEC,
                finished_ns: T0 + 500 * SEC,
                outcome: Some(RunOutcome::Completed),
                events_scanned: 77,
                matches: 9,
                cursor_ts_ns: T0 + 440 * SEC,
                last_walked_ns: T0 + 20 * SEC,
                restarts: 2,
                deletes: counts(&[
                    (DeleteOutcome::Done, 7),
                    (DeleteOutcome::SkippedObjectLock, 2),
                ]),
                ..Default::default()
            },
            ShardSummary {
                shard: 9,
                started_ns: T0 + SEC,
                finished_ns: T0 + 600 * SEC,
                outcome: Some(RunOutcome::Halted),
                events_scanned: 3,
                halt_reason: Some("RETRY_LATER logs/b.bin: volume read-only".into()),
                deletes: counts(&[(DeleteOutcome::RetryLater, 1), (DeleteOutcome::RpcError, 4)]),
                ..Default::default()
            },
        ],
        buckets: vec![
            BucketSummary {
                bucket: "logs".into(),
                started_ns: T0 + 2 * SEC,
                finished_ns: T0 + 590 * SEC,
                outcome: Some(RunOutcome::Halted),
                events_scanned: 80,
                deletes: counts(&[(DeleteOutcome::Done, 7), (DeleteOutcome::RetryLater, 1)]),
                last_walked_ns: T0 + 20 * SEC,
                config_error: None,
                halt_reason: Some("RETRY_LATER logs/b.bin: volume read-only".into()),
                cursor_ts_ns: T0 + 90 * SEC,
                held_reason: None,
                deleted: vec![s3_lifecycled::engine::reclaim::FreedRow {
                    bucket: "logs".into(),
                    rule: "d1".into(),
                    objects: 7,
                    bytes: 7_000,
                }],
            },
            BucketSummary {
                bucket: "broken".into(),
                outcome: Some(RunOutcome::Failed),
                config_error: Some("Rule r1: Days must be positive".into()),
                ..Default::default()
            },
        ],
        space: Some(s3_lifecycled::engine::reclaim::ReclaimReport {
            collections: vec![s3_lifecycled::engine::reclaim::CollectionGarbage {
                collection: "logs".into(),
                volumes: 7,
                size_bytes: 70_000,
                garbage_bytes: 7_080,
                ..Default::default()
            }],
            settled: true,
            error: None,
            vacuum: Some(s3_lifecycled::engine::reclaim::VacuumReport {
                skipped: None,
                vacuumed: vec![3],
                deferred: vec![],
                left_to_master: vec![5],
                failed: vec![],
                size_before: 70_000,
                size_after: 62_920,
            }),
        }),
    }
}

struct Server {
    addr: String,
    health: AdminHealth,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(backend: Arc<Fake>) -> Server {
        let listener = s3_lifecycled::admin::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let health = AdminHealth::new().await;
        let (tx, rx) = oneshot::channel::<()>();
        let h = health.clone();
        let task = tokio::spawn(async move {
            serve_admin(listener, backend, h, None, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Server {
            addr,
            health,
            stop: Some(tx),
            task,
        }
    }

    async fn client(&self) -> LifecycledAdminClient<Channel> {
        LifecycledAdminClient::connect(format!("http://{}", self.addr))
            .await
            .unwrap()
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap();
    }
}

fn trigger_req(shards: &[u32], now: Option<&str>, dry_run: bool) -> pb::TriggerRunRequest {
    pb::TriggerRunRequest {
        shards: shards.to_vec(),
        now: now.map(str::to_string),
        dry_run,
    }
}

fn map(d: &DeleteCounts) -> HashMap<String, u64> {
    let mut m: HashMap<String, u64> = [
        ("DONE", d.done),
        ("NOOP_RESOLVED", d.noop_resolved),
        ("SKIPPED_OBJECT_LOCK", d.skipped_object_lock),
        ("RETRY_LATER", d.retry_later),
        ("BLOCKED", d.blocked),
        ("RPC_ERROR", d.rpc_error),
        ("DRY_RUN", d.dry_run),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if d.other > 0 {
        m.insert("LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED".into(), d.other);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_passes_shards_now_and_dry_run_to_the_backend() {
    let fake = Fake::with(StatusSnapshot::default(), None);
    let srv = Server::start(fake.clone()).await;
    let mut c = srv.client().await;

    let r = c
        .trigger_run(trigger_req(&[], None, false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.run_id.as_str(), r.already_running), ("run-1", false));
    fake.finish_pass();

    let r = c
        .trigger_run(trigger_req(&[7, 3, 7], Some("2026-01-02T03:04:05Z"), true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.run_id.as_str(), r.already_running), ("run-2", false));

    assert_eq!(
        fake.accepted(),
        vec![
            TriggerRequest::default(),
            TriggerRequest {
                shards: vec![3, 7],
                now_ns: Some(T0),
                dry_run: true,
            },
        ]
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_while_running_answers_with_the_running_pass() {
    let fake = Fake::with(StatusSnapshot::default(), None);
    let srv = Server::start(fake.clone()).await;
    let mut c = srv.client().await;
    let first = c
        .trigger_run(trigger_req(&[1], None, false))
        .await
        .unwrap()
        .into_inner();
    let second = c
        .trigger_run(trigger_req(&[2], None, true))
        .await
        .unwrap()
        .into_inner();
    assert!(!first.already_running);
    assert!(second.already_running);
    assert_eq!(second.run_id, first.run_id);
    // The second request's shards/dry_run were not applied: only one pass started.
    assert_eq!(fake.accepted().len(), 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_now_and_shard_16_are_invalid_argument_naming_the_field() {
    let fake = Fake::with(StatusSnapshot::default(), None);
    let srv = Server::start(fake.clone()).await;
    let mut c = srv.client().await;

    let e = c
        .trigger_run(trigger_req(&[], Some("2026-13-40 noon"), false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().starts_with("now:"), "{}", e.message());
    assert!(e.message().contains("2026-13-40 noon"), "{}", e.message());

    let e = c
        .trigger_run(trigger_req(&[0, 16], None, false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().starts_with("shards:"), "{}", e.message());
    assert!(e.message().contains("16"), "{}", e.message());

    // Rejected before the backend saw them.
    assert_eq!(fake.calls(), 0);

    // A backend refusal keeps its code and message.
    let e = c
        .trigger_run(trigger_req(&[15], None, false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(e.message().contains("pass.shards"), "{}", e.message());
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_round_trips_field_by_field() {
    let snap = snapshot();
    let srv = Server::start(Fake::with(snap.clone(), None)).await;
    let mut c = srv.client().await;
    let s = c
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.state(), pb::ServiceState::Running);
    assert_eq!(s.next_pass_ns, snap.next_pass_ns);
    let want = snap.current_pass.unwrap();
    let got = s.current_pass.unwrap();
    assert_eq!(got.run_id, want.run_id);
    assert_eq!(got.start_ns, want.started_ns);
    assert_eq!(
        (got.shards_running, got.shards_done),
        (want.shards_running, want.shards_done)
    );
    assert_eq!(got.shards.len(), want.shards.len());
    for (g, w) in got.shards.iter().zip(&want.shards) {
        assert_eq!(g.shard, u32::from(w.shard));
        assert_eq!(g.events_scanned, w.events_scanned);
        assert_eq!(g.matches, w.matches);
        assert_eq!(g.in_flight, w.in_flight);
        assert_eq!(g.halt_reason, w.halt_reason);
        assert_eq!(g.restarts, w.restarts);
        assert_eq!(g.deletes, map(&w.deletes));
    }
    assert_eq!(got.shards[0].phase(), pb::ShardPhase::Replaying);
    assert_eq!(got.shards[1].phase(), pb::ShardPhase::Halted);
    assert_eq!(got.shards[0].deletes["DRY_RUN"], 1);

    // An idle service with no pass: no current pass, no next time.
    srv.stop().await;
    let srv = Server::start(Fake::with(
        StatusSnapshot {
            service_state: ServiceState::Idle,
            ..Default::default()
        },
        None,
    ))
    .await;
    let s = srv
        .client()
        .await
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.state(), pb::ServiceState::Idle);
    assert!(s.current_pass.is_none() && s.next_pass_ns.is_none());
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_run_round_trips_field_by_field() {
    let want = last_pass();
    let srv = Server::start(Fake::with(StatusSnapshot::default(), Some(want.clone()))).await;
    let mut c = srv.client().await;
    let got = c
        .get_last_run(pb::GetLastRunRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.run_id, want.run_id);
    assert_eq!(
        (got.start_ns, got.finish_ns),
        (want.started_ns, want.finished_ns)
    );
    assert_eq!(got.outcome(), pb::RunOutcome::Halted);
    assert_eq!(got.shards.len(), 2);
    for (g, w) in got.shards.iter().zip(&want.shards) {
        assert_eq!(g.shard, u32::from(w.shard));
        assert_eq!((g.start_ns, g.finish_ns), (w.started_ns, w.finished_ns));
        assert_eq!(g.events_scanned, w.events_scanned);
        assert_eq!(g.matches, w.matches);
        assert_eq!(g.deletes, map(&w.deletes));
        assert_eq!(g.halt_reason, w.halt_reason);
        assert_eq!(g.cursor_ts_ns, w.cursor_ts_ns);
        assert_eq!(g.last_walk_ns, w.last_walked_ns);
        assert_eq!(g.restarts, w.restarts);
    }
    assert_eq!(got.shards[0].outcome(), pb::RunOutcome::Completed);
    assert_eq!(got.shards[1].outcome(), pb::RunOutcome::Halted);
    // Lag = shard finish - cursor; a cold shard has none.
    assert_eq!(got.shards[0].cursor_lag_ns, 60 * SEC);
    assert_eq!(got.shards[1].cursor_lag_ns, 0);

    assert_eq!(got.buckets.len(), 2);
    for (g, w) in got.buckets.iter().zip(&want.buckets) {
        assert_eq!(g.bucket, w.bucket);
        assert_eq!((g.start_ns, g.finish_ns), (w.started_ns, w.finished_ns));
        assert_eq!(g.events_scanned, w.events_scanned);
        assert_eq!(g.deletes, map(&w.deletes));
        assert_eq!(g.halt_reason, w.halt_reason);
        assert_eq!(g.cursor_ts_ns, w.cursor_ts_ns);
        assert_eq!(g.last_walk_ns, w.last_walked_ns);
        assert_eq!(g.config_error, w.config_error);
    }
    assert_eq!(got.buckets[0].outcome(), pb::RunOutcome::Halted);
    assert_eq!(got.buckets[0].cursor_lag_ns, 500 * SEC);
    assert_eq!(got.buckets[1].outcome(), pb::RunOutcome::Failed);
    // Reclaimed space: per bucket and rule, and the collections and vacuum.
    assert_eq!(
        s3_lifecycled::admin::convert::last_run_from_pb(&got).deleted(),
        want.buckets[0].deleted
    );
    assert_eq!(
        got.space
            .as_ref()
            .map(s3_lifecycled::admin::convert::space_from_pb),
        want.space
    );
    srv.stop().await;

    let srv = Server::start(Fake::with(StatusSnapshot::default(), None)).await;
    let e = srv
        .client()
        .await
        .get_last_run(pb::GetLastRunRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_not_serving_until_ready_then_serving() {
    let srv = Server::start(Fake::with(StatusSnapshot::default(), None)).await;
    let channel = Channel::from_shared(format!("http://{}", srv.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut h = HealthClient::new(channel);
    for name in ["", ADMIN_SERVICE_NAME] {
        let r = h
            .check(HealthCheckRequest {
                service: name.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::NotServing, "{name:?}");
    }
    srv.health.set_serving().await;
    for name in ["", ADMIN_SERVICE_NAME] {
        let r = h
            .check(HealthCheckRequest {
                service: name.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{name:?}");
    }
    srv.stop().await;
}

// ---- the CLI binary against the server ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_trigger_prints_run_id_and_already_running() {
    let fake = Fake::with(StatusSnapshot::default(), None);
    let srv = Server::start(fake.clone()).await;

    let out = run_raw(
        &[
            "trigger",
            "--admin",
            &srv.addr,
            "--shards",
            "4,1-2",
            "--now",
            "2026-01-02T03:04:05Z",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "run_id=run-1 already_running=false");
    assert_eq!(
        fake.accepted(),
        vec![TriggerRequest {
            shards: vec![1, 2, 4],
            now_ns: Some(T0),
            dry_run: true
        }]
    );

    // The address from the config file's service.admin_listen.
    let dir = TmpDir::new("s3lc-admin");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!("[service]\nadmin_listen = \"{}\"\n", srv.addr),
    )
    .unwrap();
    let out = run_raw(&["trigger", "--config", cfg.to_str().unwrap()], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("run_id=run-1 already_running=true"),
        "{}",
        out.stdout
    );

    // A server-side refusal: exit 1 naming the address.
    fake.finish_pass();
    let out = run_raw(&["trigger", "--admin", &srv.addr, "--shards", "15"], &[]).await;
    assert_eq!(out.code, 1);
    let err = out.stderr;
    assert!(
        err.contains(&srv.addr) && err.contains("pass.shards"),
        "{err}"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_status_last_json_matches_the_last_run() {
    let want = last_pass();
    let srv = Server::start(Fake::with(snapshot(), Some(want.clone()))).await;

    let out = run_raw(&["status", "--admin", &srv.addr, "--last", "--json"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["run_id"], "run-prev");
    assert_eq!(j["outcome"], "halted");
    assert_eq!(j["start_ns"], want.started_ns);
    assert_eq!(j["finish_ns"], want.finished_ns);
    let s9 = &j["shards"][1];
    assert_eq!(s9["shard"], 9);
    assert_eq!(s9["outcome"], "halted");
    assert_eq!(
        s9["halt_reason"],
        "RETRY_LATER logs/b.bin: volume read-only"
    );
    assert_eq!(s9["deletes"]["RETRY_LATER"], 1);
    assert_eq!(s9["deletes"]["RPC_ERROR"], 4);
    assert_eq!(s9["deletes"]["DONE"], 0);
    assert_eq!(j["shards"][0]["cursor_lag_ns"], 60 * SEC);
    assert_eq!(j["shards"][0]["last_walk_ns"], T0 + 20 * SEC);
    assert_eq!(j["shards"][0]["deletes"]["SKIPPED_OBJECT_LOCK"], 2);
    assert_eq!(j["buckets"][0]["bucket"], "logs");
    assert_eq!(j["buckets"][0]["cursor_lag_ns"], 500 * SEC);
    assert_eq!(
        j["buckets"][1]["config_error"],
        "Rule r1: Days must be positive"
    );
    assert_eq!(j["buckets"][1]["halt_reason"], Value::Null);

    // Text: a row per shard, a line per bucket.
    let out = run_raw(&["status", "--admin", &srv.addr, "--last"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let t = out.stdout;
    assert!(t.starts_with("last pass: run-prev outcome=halted"), "{t}");
    assert!(t.lines().any(|l| l.starts_with("   09 halted")), "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("bucket=logs outcome=halted")
                && l.contains(" retry_later=1 ")
                && l.contains(" cursor_lag=8m20s ")),
        "{t}"
    );

    // Without --last: state and the running pass.
    let out = run_raw(&["status", "--admin", &srv.addr, "--json"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(j["state"], "running");
    assert_eq!(j["current_pass"]["run_id"], "run-live");
    assert_eq!(j["current_pass"]["shards"][0]["in_flight"], 3);
    assert_eq!(j["current_pass"]["shards"][1]["phase"], "halted");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_status_last_before_any_pass_is_null() {
    let srv = Server::start(Fake::with(StatusSnapshot::default(), None)).await;
    let out = run_raw(&["status", "--admin", &srv.addr, "--last", "--json"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "null");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_exit_codes_for_unreachable_service_and_usage_errors() {
    // A port nothing listens on.
    let addr = format!("127.0.0.1:{}", common::free_port());
    let out = run_raw(&["status", "--admin", &addr], &[]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains(&addr), "{}", out.stderr);

    let out = run_raw(&["trigger", "--admin", &addr, "--shards", "0-16"], &[]).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--shards"), "{}", out.stderr);
    let out = run_raw(&["trigger", "--admin", &addr, "--now", "tomorrow"], &[]).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--now"), "{}", out.stderr);
    let out = run_raw(&["status", "--bogus"], &[]).await;
    assert_eq!(out.code, 2);
    let out = run_raw(
        &["status", "--config", "/nonexistent/s3-lifecycled.toml"],
        &[],
    )
    .await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
}

#[test]
fn production_config_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ops/config/production.toml");
    let s = s3_lifecycled::config::Settings::load(Some(&path), Vec::new()).unwrap();
    // Production-minded values, not the defaults.
    assert_eq!(s.service.admin_listen, "127.0.0.1:9710");
    assert!(
        s.rate.effective().is_some(),
        "production caps the delete rate"
    );
    assert_eq!(s.telemetry.log_format, "json");
    assert_eq!(s.time.day, std::time::Duration::from_secs(86_400));
    // systemd's stop timeout must exceed the shutdown deadline.
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("ops/systemd/s3-lifecycled.service"),
    )
    .unwrap();
    let stop = unit
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .expect("TimeoutStopSec in the unit");
    let stop = s3_lifecycled::config::parse_duration(stop.trim()).unwrap();
    assert!(
        stop > s.service.shutdown_deadline,
        "TimeoutStopSec {stop:?} must exceed service.shutdown_deadline {:?}",
        s.service.shutdown_deadline
    );
}
