//! The admin gRPC API (`lifecycled_admin.v1.LifecycledAdmin`: `TriggerRun`,
//! `GetStatus`, `GetLastRun`) and the standard `grpc.health.v1.Health`
//! service, served by `s3-lifecycled serve` on `service.admin_listen`.
//!
//! The service is a thin tonic layer over [`AdminBackend`], which the pass
//! coordinator implements: it validates requests (shard numbers, the RFC 3339
//! `now`), maps [`AdminError`] to gRPC status codes, and converts the status
//! types the pass already publishes for the status page
//! ([`crate::status::StatusSnapshot`], [`crate::status::PassSummary`]) into
//! protobuf (see [`convert`]).
//!
//! The API can start passes: with `service.admin_token_file` set, every
//! admin call needs its bearer token ([`auth`]); `serve` refuses a bind beyond
//! loopback without one. gRPC health stays open for probes.

pub mod auth;
pub mod convert;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use crate::engine::SHARD_COUNT;
use crate::pb::admin as pb;
use crate::pb::admin::lifecycled_admin_server::{LifecycledAdmin, LifecycledAdminServer};
use crate::status::{PassSummary, StatusSnapshot};

/// A request to start a pass now, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TriggerRequest {
    /// Shards to run, sorted and de-duplicated, each `< 16`; empty = the
    /// instance's configured shards (`pass.shards`).
    pub shards: Vec<u8>,
    /// Evaluate as of this time, ns since epoch; `None` = the wall clock.
    pub now_ns: Option<i64>,
    /// Decide and report, delete nothing, save no cursor.
    pub dry_run: bool,
}

/// The answer to a trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerAccepted {
    /// The id of the pass started, or of the pass already running.
    pub run_id: String,
    /// A pass was already running; nothing new was started (the request's
    /// shards, `now` and `dry_run` were not applied).
    pub already_running: bool,
}

/// The answer to a pause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    /// When the bucket was paused (a second pause keeps the first's time).
    pub paused_ns: i64,
    /// It was paused already.
    pub was_paused: bool,
    /// The reason kept: the request's, else the earlier pause's.
    pub reason: String,
}

/// The answer to an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    pub approved_ns: i64,
    /// The deletion cap holds the bucket now (false: the approval waits for
    /// the next pass that would cap it).
    pub held: bool,
}

/// Why the backend refused or failed a request. Each variant is one gRPC code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// The request is malformed (`INVALID_ARGUMENT`); the message names the field.
    #[error("{0}")]
    InvalidArgument(String),
    /// Valid, but not possible in the current state (`FAILED_PRECONDITION`),
    /// e.g. a shard this instance is not configured to run.
    #[error("{0}")]
    FailedPrecondition(String),
    /// What the request names does not exist (`NOT_FOUND`), e.g. a bucket;
    /// the message names what does.
    #[error("{0}")]
    NotFound(String),
    /// Try again later (`UNAVAILABLE`): starting up or shutting down.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected failure (`INTERNAL`).
    #[error("{0}")]
    Internal(String),
}

impl From<AdminError> for Status {
    fn from(e: AdminError) -> Status {
        match e {
            AdminError::InvalidArgument(m) => Status::invalid_argument(m),
            AdminError::FailedPrecondition(m) => Status::failed_precondition(m),
            AdminError::NotFound(m) => Status::not_found(m),
            AdminError::Unavailable(m) => Status::unavailable(m),
            AdminError::Internal(m) => Status::internal(m),
        }
    }
}

/// What the admin API needs from the service; the pass coordinator implements
/// it. Futures are `'static` so an implementation can hand them to an actor
/// mailbox (`Addr::send`) without borrowing `self`.
pub trait AdminBackend: Send + Sync + 'static {
    /// Starts a pass unless one is running; then answers with the running
    /// pass's id and `already_running = true`.
    fn trigger(
        &self,
        req: TriggerRequest,
    ) -> BoxFuture<'static, Result<TriggerAccepted, AdminError>>;
    /// The current snapshot (the same one `/status.json` serves).
    fn status(&self) -> BoxFuture<'static, Result<StatusSnapshot, AdminError>>;
    /// The last finished pass, if any finished since the process started.
    fn last_run(&self) -> BoxFuture<'static, Result<Option<PassSummary>, AdminError>>;
    /// Pauses `bucket` (already checked to be a bucket name). A bucket the
    /// cluster does not have is `NotFound` unless `create_if_missing`.
    /// Backends without pauses keep the default refusal.
    fn pause(
        &self,
        _bucket: String,
        _reason: String,
        _create_if_missing: bool,
    ) -> BoxFuture<'static, Result<Paused, AdminError>> {
        async { Err(AdminError::FailedPrecondition(NO_PAUSES.into())) }.boxed()
    }
    /// Resumes `bucket`; `Ok(false)` when it was not paused.
    fn resume(&self, _bucket: String) -> BoxFuture<'static, Result<bool, AdminError>> {
        async { Err(AdminError::FailedPrecondition(NO_PAUSES.into())) }.boxed()
    }
    /// Approves `bucket`'s held work for the next pass.
    fn approve(&self, _bucket: String) -> BoxFuture<'static, Result<Approved, AdminError>> {
        let e = AdminError::FailedPrecondition("this server keeps no approvals".into());
        async { Err(e) }.boxed()
    }
    /// The forecast as of `now` for `days` days (docs/forecast.md), only
    /// `bucket` when given. Backends without cursors keep the refusal.
    fn forecast(
        &self,
        _bucket: Option<String>,
        _days: u32,
        _now: i64,
    ) -> BoxFuture<'static, Result<crate::engine::forecast::Forecast, AdminError>> {
        let e = AdminError::FailedPrecondition("this server keeps no cursors".into());
        async { Err(e) }.boxed()
    }
}

const NO_PAUSES: &str = "this server keeps no bucket pauses";

/// Checks the `bucket` field of a pause or resume request.
pub fn validate_bucket(bucket: &str) -> Result<String, AdminError> {
    crate::engine::safety::check_bucket_name(bucket)
        .map(|()| bucket.to_string())
        .map_err(|e| AdminError::InvalidArgument(format!("bucket: {e}")))
}

/// Validates a `TriggerRunRequest`: every shard `< 16` and `now`, when given,
/// an RFC 3339 time. Errors name the field and the value.
pub fn validate_trigger(req: &pb::TriggerRunRequest) -> Result<TriggerRequest, AdminError> {
    let mut shards = req.shards.iter()
        .map(|&s| {
            u8::try_from(s).ok().filter(|v| usize::from(*v) < SHARD_COUNT).ok_or_else(|| {
                AdminError::InvalidArgument(format!(
                    "shards: {s} is not a shard number 0..{} (leave shards empty for the configured ones)",
                    SHARD_COUNT - 1
                ))
            })
        })
        .collect::<Result<Vec<u8>, _>>()?;
    shards.sort_unstable();
    shards.dedup();
    let now_ns = req
        .now
        .as_deref()
        .map(|text| {
            parse_rfc3339_ns(text).map_err(|e| {
                AdminError::InvalidArgument(format!(
                    "now: `{text}` is not an RFC 3339 time such as 2026-01-02T03:04:05Z ({e})"
                ))
            })
        })
        .transpose()?;
    Ok(TriggerRequest {
        shards,
        now_ns,
        dry_run: req.dry_run,
    })
}

/// Parses an RFC 3339 time into ns since epoch (shared with the CLI, which
/// checks `--now` before it connects).
pub fn parse_rfc3339_ns(text: &str) -> Result<i64, String> {
    let t =
        time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339)
            .map_err(|e| e.to_string())?;
    i64::try_from(t.unix_timestamp_nanos())
        .map_err(|_| "outside the range of i64 nanoseconds (years 1677..2262)".to_string())
}

/// The `LifecycledAdmin` gRPC service over a backend.
#[derive(Clone)]
pub struct AdminService {
    backend: Arc<dyn AdminBackend>,
}

#[tonic::async_trait]
impl LifecycledAdmin for AdminService {
    async fn trigger_run(
        &self,
        request: Request<pb::TriggerRunRequest>,
    ) -> Result<Response<pb::TriggerRunResponse>, Status> {
        let req = validate_trigger(request.get_ref())?;
        let accepted = self.backend.trigger(req).await?;
        Ok(Response::new(pb::TriggerRunResponse {
            run_id: accepted.run_id,
            already_running: accepted.already_running,
        }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let s = self.backend.status().await?;
        Ok(Response::new(convert::status_response(&s)))
    }

    async fn get_last_run(
        &self,
        _request: Request<pb::GetLastRunRequest>,
    ) -> Result<Response<pb::GetLastRunResponse>, Status> {
        match self.backend.last_run().await? {
            Some(p) => Ok(Response::new(convert::last_run_response(&p))),
            None => Err(Status::not_found(
                "no pass has finished since the service started",
            )),
        }
    }

    async fn pause_bucket(
        &self,
        request: Request<pb::PauseBucketRequest>,
    ) -> Result<Response<pb::PauseBucketResponse>, Status> {
        let r = request.into_inner();
        let bucket = validate_bucket(&r.bucket)?;
        let p = self
            .backend
            .pause(bucket, r.reason, r.create_if_missing)
            .await?;
        Ok(Response::new(pb::PauseBucketResponse {
            paused_ns: p.paused_ns,
            was_paused: p.was_paused,
            reason: p.reason,
        }))
    }

    async fn resume_bucket(
        &self,
        request: Request<pb::ResumeBucketRequest>,
    ) -> Result<Response<pb::ResumeBucketResponse>, Status> {
        let bucket = validate_bucket(&request.get_ref().bucket)?;
        let was_paused = self.backend.resume(bucket).await?;
        Ok(Response::new(pb::ResumeBucketResponse { was_paused }))
    }

    async fn approve_bucket(
        &self,
        request: Request<pb::ApproveBucketRequest>,
    ) -> Result<Response<pb::ApproveBucketResponse>, Status> {
        let bucket = validate_bucket(&request.get_ref().bucket)?;
        let a = self.backend.approve(bucket).await?;
        Ok(Response::new(pb::ApproveBucketResponse {
            approved_ns: a.approved_ns,
            held: a.held,
        }))
    }

    async fn get_forecast(
        &self,
        request: Request<pb::GetForecastRequest>,
    ) -> Result<Response<pb::GetForecastResponse>, Status> {
        let r = request.into_inner();
        let bucket = if r.bucket.is_empty() {
            None
        } else {
            Some(validate_bucket(&r.bucket)?)
        };
        let days = match r.days {
            0 => 30,
            d => crate::engine::forecast::check_days(d)
                .map_err(|e| AdminError::InvalidArgument(format!("days: {e}")))?,
        };
        let now = if r.now_ns == 0 {
            crate::clock::wall_ns()
        } else {
            r.now_ns
        };
        let f = self.backend.forecast(bucket, days, now).await?;
        Ok(Response::new(convert::forecast_to_pb(&f)))
    }
}

/// The full gRPC name of the admin service (`lifecycled_admin.v1.LifecycledAdmin`),
/// as health checks name it.
pub const ADMIN_SERVICE_NAME: &str = <LifecycledAdminServer<AdminService> as NamedService>::NAME;

/// The `grpc.health.v1` status of this server. Cheap to clone; the service
/// holds one clone and flips it when it is ready (cursors read, first
/// snapshot published) and when it starts shutting down.
///
/// Two names are reported, both the same: `""` (the whole server, what
/// `grpc_health_probe` asks by default) and [`ADMIN_SERVICE_NAME`].
#[derive(Clone, Debug)]
pub struct AdminHealth {
    reporter: HealthReporter,
}

impl AdminHealth {
    /// A new status, NOT_SERVING until [`AdminHealth::set_serving`].
    pub async fn new() -> AdminHealth {
        let h = AdminHealth {
            reporter: HealthReporter::new(),
        };
        h.set(ServingStatus::NotServing).await;
        h
    }

    pub async fn set_serving(&self) {
        self.set(ServingStatus::Serving).await;
    }

    pub async fn set_not_serving(&self) {
        self.set(ServingStatus::NotServing).await;
    }

    async fn set(&self, status: ServingStatus) {
        self.reporter.set_service_status("", status).await;
        self.reporter
            .set_service_status(ADMIN_SERVICE_NAME, status)
            .await;
    }

    fn service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }
}

/// The admin server could not bind or failed while serving.
#[derive(Debug, thiserror::Error)]
pub enum AdminServeError {
    /// `service.admin_listen` is not a `host:port` socket address.
    #[error(
        "service.admin_listen: `{addr}` is not an IP:port address such as 127.0.0.1:9710 ({message})"
    )]
    Address { addr: String, message: String },
    /// Binding failed (port in use, permission).
    #[error("admin API: cannot listen on {addr} (service.admin_listen): {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The transport failed while serving.
    #[error("admin API on {addr}: {source}")]
    Serve {
        /// The local address, or `unknown`.
        addr: String,
        source: tonic::transport::Error,
    },
}

/// Binds `service.admin_listen`. The API is unauthenticated and can start
/// passes, so a non-loopback address is allowed (containers need it) but
/// logged as a warning.
pub async fn bind(admin_listen: &str) -> Result<TcpListener, AdminServeError> {
    let addr: SocketAddr = admin_listen
        .trim()
        .parse()
        .map_err(|e: std::net::AddrParseError| AdminServeError::Address {
            addr: admin_listen.to_string(),
            message: e.to_string(),
        })?;
    TcpListener::bind(addr)
        .await
        .map_err(|source| AdminServeError::Bind { addr, source })
}

/// Serves the admin API and the health service on `listener` until
/// `shutdown` resolves; health turns NOT_SERVING as soon as it does, then
/// in-flight calls finish. Health starts as whatever `health` says: the
/// caller sets SERVING when the service is ready. With `token` set, admin
/// calls without it are refused (`UNAUTHENTICATED`; health stays open).
pub async fn serve_admin(
    listener: TcpListener,
    backend: Arc<dyn AdminBackend>,
    health: AdminHealth,
    token: Option<auth::AdminToken>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), AdminServeError> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "unknown".to_string(), |a| a.to_string());
    tracing::info!(%addr, "admin API listening");
    let health_service = health.service();
    let on_shutdown = async move {
        shutdown.await;
        health.set_not_serving().await;
    };
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(LifecycledAdminServer::with_interceptor(
            AdminService { backend },
            move |req: Request<()>| match &token {
                Some(t) => t.check_request(req),
                None => Ok(req),
            },
        ))
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), on_shutdown)
        .await
        .map_err(|source| AdminServeError::Serve { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(shards: &[u32], now: Option<&str>) -> pb::TriggerRunRequest {
        pb::TriggerRunRequest {
            shards: shards.to_vec(),
            now: now.map(str::to_string),
            dry_run: true,
        }
    }

    #[test]
    fn trigger_validation_sorts_shards_and_parses_now() {
        let r = validate_trigger(&req(&[9, 3, 9, 0], Some("2026-01-02T03:04:05Z"))).unwrap();
        assert_eq!(r.shards, vec![0, 3, 9]);
        assert_eq!(r.now_ns, Some(1_767_323_045_000_000_000));
        assert!(r.dry_run);
        let r = validate_trigger(&req(&[], None)).unwrap();
        assert_eq!((r.shards.len(), r.now_ns), (0, None));
    }

    #[test]
    fn trigger_validation_names_the_field() {
        for bad in [16u32, 256, u32::MAX] {
            let e = validate_trigger(&req(&[1, bad], None)).unwrap_err();
            assert!(
                matches!(&e, AdminError::InvalidArgument(m) if m.starts_with("shards:") && m.contains(&bad.to_string())),
                "{e:?}"
            );
        }
        let e = validate_trigger(&req(&[], Some("yesterday"))).unwrap_err();
        assert!(
            matches!(&e, AdminError::InvalidArgument(m) if m.starts_with("now:") && m.contains("yesterday")),
            "{e:?}"
        );
    }

    #[test]
    fn admin_errors_map_to_grpc_codes() {
        let cases = [
            (
                AdminError::InvalidArgument("x".into()),
                tonic::Code::InvalidArgument,
            ),
            (
                AdminError::FailedPrecondition("x".into()),
                tonic::Code::FailedPrecondition,
            ),
            (
                AdminError::Unavailable("x".into()),
                tonic::Code::Unavailable,
            ),
            (AdminError::Internal("x".into()), tonic::Code::Internal),
        ];
        for (e, code) in cases {
            let s = Status::from(e);
            assert_eq!((s.code(), s.message()), (code, "x"));
        }
    }

    #[test]
    fn admin_service_name_is_the_proto_name() {
        assert_eq!(ADMIN_SERVICE_NAME, "lifecycled_admin.v1.LifecycledAdmin");
    }

    #[tokio::test]
    async fn bad_listen_address_names_the_key() {
        let e = bind("localhost").await.unwrap_err().to_string();
        assert!(
            e.contains("service.admin_listen") && e.contains("localhost"),
            "{e}"
        );
    }
}
