//! The service's HTTP endpoints (axum, HTTP/1.1): `/metrics` (Prometheus
//! text), `/health` (liveness), `/ready` (readiness), `/` (HTML status page)
//! and `/status.json` (the same snapshot as JSON). With an admin token set,
//! `/` and `/status.json` (they show object keys) need it as a bearer token;
//! the probes and `/metrics` stay open (docs/admin-auth.md).
//!
//! The pass publishes a [`StatusSnapshot`] through a `tokio::sync::watch`
//! channel and flips [`Readiness`]; handlers only read, so a slow scrape
//! never holds anything the pass needs.

pub mod status_page;

use std::future::Future;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::auth::AdminToken;

use crate::metrics::{self, Metrics};
use crate::status::StatusSnapshot;

/// Readiness flag shared between the service (writer) and `/ready`
/// (reader). Starts not ready with reason "starting".
#[derive(Debug, Clone)]
pub struct Readiness(Arc<RwLock<Option<String>>>);

impl Default for Readiness {
    fn default() -> Self {
        Readiness(Arc::new(RwLock::new(Some("starting".into()))))
    }
}

impl Readiness {
    pub fn set_ready(&self) {
        self.set(None);
    }

    /// Marks the service not ready, with a reason shown by `/ready`.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        self.set(Some(reason.into()));
    }

    /// `Ok(())` when ready, else the reason.
    pub fn check(&self) -> Result<(), String> {
        // A poisoned lock only means a writer panicked mid-assignment of an
        // Option; the value is still a valid Option, so read through it.
        let g = self.0.read().unwrap_or_else(|p| p.into_inner());
        match &*g {
            None => Ok(()),
            Some(r) => Err(r.clone()),
        }
    }

    fn set(&self, v: Option<String>) {
        let mut g = self.0.write().unwrap_or_else(|p| p.into_inner());
        *g = v;
    }
}

/// What the handlers read.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// Encoded on every `/metrics` scrape.
    pub metrics: Metrics,
    /// Drives `/ready`.
    pub readiness: Readiness,
    /// Latest snapshot published by the pass (`watch::Sender::send_replace`).
    pub status: watch::Receiver<StatusSnapshot>,
    /// Required on the status page and `/status.json` when set.
    pub admin_token: Option<AdminToken>,
}

impl HttpState {
    /// State plus the sender the service publishes snapshots with.
    pub fn new(
        metrics: Metrics,
        readiness: Readiness,
    ) -> (HttpState, watch::Sender<StatusSnapshot>) {
        let (tx, rx) = watch::channel(StatusSnapshot::default());
        (
            HttpState {
                metrics,
                readiness,
                status: rx,
                admin_token: None,
            },
            tx,
        )
    }
}

/// The router with every endpoint.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/status.json", get(status_json))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/metrics", get(metrics_text))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` resolves, then finishes
/// in-flight requests and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Refuses the request (401) without the admin token, when one is set.
async fn require_token(State(s): State<HttpState>, req: Request, next: Next) -> Response {
    if let Some(t) = &s.admin_token {
        let h = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if let Err(f) = t.check(h) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                format!("{}\n", f.message()),
            )
                .into_response();
        }
    }
    next.run(req).await
}

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(s): State<HttpState>) -> Response {
    match s.readiness.check() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response(),
    }
}

async fn metrics_text(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        s.metrics.encode(),
    )
        .into_response()
}

/// `?bucket=NAME` of `uri`, decoded: the one bucket `/` and `/status.json`
/// are asked about (docs/forecast.md#status-page).
fn bucket_param(uri: &axum::http::Uri) -> Option<String> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "bucket")
        .map(|(_, v)| v.into_owned())
}

async fn status_json(State(s): State<HttpState>, uri: axum::http::Uri) -> Response {
    let mut snapshot = s.status.borrow().clone();
    if let Some(b) = bucket_param(&uri) {
        snapshot.only_bucket(&b);
    }
    match serde_json::to_string_pretty(&snapshot) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("status snapshot could not be serialized: {e}\n"),
        )
            .into_response(),
    }
}

async fn index(State(s): State<HttpState>, uri: axum::http::Uri) -> Html<String> {
    // `?bucket=NAME`: that bucket's cards.
    let bucket = bucket_param(&uri);
    // Clone out of the watch so the borrow (a read lock) is not held while
    // rendering.
    let snapshot = s.status.borrow().clone();
    Html(status_page::render(
        &snapshot,
        crate::clock::wall_ns(),
        bucket.as_deref(),
    ))
}
