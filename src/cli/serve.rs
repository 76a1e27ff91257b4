//! `s3-lifecycled serve`: the always-on service. Binds the HTTP endpoints
//! (`service.http_listen`) and the admin gRPC API (`service.admin_listen`),
//! connects to the cluster, becomes ready after the first successful bucket
//! scan, then runs a pass at every scheduled start and on every admin
//! trigger until SIGTERM or SIGINT.
//!
//! Shutdown: refuse new passes, ask the running pass to stop dispatching,
//! let in-flight deletes drain and the cursors be saved, then exit 0. If that
//! takes longer than `service.shutdown_deadline`, log the shards and the
//! in-flight deletes abandoned and exit 1.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::admin::auth::{AdminToken, require_auth_beyond_loopback};
use crate::admin::{self, AdminHealth};
use crate::cli::run_once::{ClusterArgs, settings, shards};
use crate::cli::{EXIT_ERROR, EXIT_OK, Fail, exit, failed, usage, with_telemetry};
use crate::config::Settings;
use crate::engine::instances::Role;
use crate::http::{self, HttpState, Readiness};
use crate::metrics::Metrics;
use crate::pass::cluster::SeaweedCluster;
use crate::pass::gateways::SeaweedDelete;
use crate::pass::observe::{PassObserver, StatusBoard};
use crate::pass::ports::ClusterPort;
use crate::pass::runner::{PassRunner, RunError, connect_cluster};
use crate::seaweed::tls::ClientTls;
use crate::service::instance::Instance;
use crate::service::{Backend, Service};

/// How long to wait between attempts to reach the cluster at start.
const CONNECT_RETRY: Duration = Duration::from_secs(2);

pub fn run(args: ClusterArgs) -> Result<i32, Fail> {
    let s = settings(&args)?;
    let shards = shards(&s)?;
    let tls = s.client_tls().map_err(usage)?;
    crate::plugin::enforcer::check_config(&s).map_err(usage)?;
    let token = admin_token(&s).map_err(usage)?;
    with_telemetry(s, true, async |s| exit(serve(s, shards, tls, token).await))
}

/// The admin token, and the rule that a bind beyond loopback needs one
/// (docs/admin-auth.md). `Err` is a configuration message (exit 2).
fn admin_token(s: &Settings) -> Result<Option<AdminToken>, String> {
    let path = s.service.admin_token_file.trim();
    let token = (!path.is_empty())
        .then(|| AdminToken::from_file(std::path::Path::new(path)))
        .transpose()?;
    for (key, addr) in [
        ("service.admin_listen", &s.service.admin_listen),
        ("service.http_listen", &s.service.http_listen),
    ] {
        require_auth_beyond_loopback(key, addr, token.as_ref())?;
    }
    Ok(token)
}

async fn serve(
    s: Settings,
    shards: Vec<u8>,
    tls: Option<ClientTls>,
    token: Option<AdminToken>,
) -> Result<i32, Fail> {
    // Handlers first: a signal during start-up must not kill the process
    // with the default action.
    let signals = Signals::install()?;
    let metrics = Metrics::new();
    metrics.init_shards(&shards);
    let readiness = Readiness::default();
    let (mut http_state, tx) = HttpState::new(metrics.clone(), readiness.clone());
    http_state.admin_token = token.clone();
    let board = Arc::new(StatusBoard::new(tx));
    let (shut_tx, shut_rx) = watch::channel(false);
    let wait_shut = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };

    let http_listener = bind_http(&s.service.http_listen).await.map_err(usage)?;
    let admin_listener = admin::bind(&s.service.admin_listen).await.map_err(usage)?;
    if let Ok(a) = http_listener.local_addr() {
        tracing::info!(addr = %a, "HTTP listening: status page at http://{a}/");
    }
    let http_task = tokio::spawn(http::serve(
        http_listener,
        http::router(http_state),
        wait_shut(shut_rx.clone()),
    ));

    let Some((cluster, deletes)) = connect_retrying(&s, tls.as_ref(), &readiness, &signals).await?
    else {
        let _ = shut_tx.send(true);
        let _ = http_task.await;
        return Ok(EXIT_OK);
    };
    let cluster: Arc<dyn ClusterPort> = Arc::new(cluster);
    let obs = PassObserver {
        metrics: metrics.clone(),
        board: Some(board.clone()),
    };
    let runner = PassRunner::start(cluster.clone(), Arc::new(deletes), obs.clone());
    let service = Service::new(runner, board.clone(), s.clone(), shards.clone());
    if let Some(tls) = tls.clone() {
        // Rotation without restart: certificates re-read before every pass
        // (docs/tls.md#rotation).
        service.set_before_pass(Arc::new(move || {
            let tls = tls.clone();
            Box::pin(async move {
                tls.refresh().await;
            })
        }));
    }

    let health = AdminHealth::new().await;
    let admin_task = tokio::spawn(admin::serve_admin(
        admin_listener,
        Arc::new(Backend(service.clone())),
        health.clone(),
        token,
        wait_shut(shut_rx.clone()),
    ));

    let ttl = s.service.instance_ttl;
    let Some(joined) = join_retrying(&s, &*cluster, &shards, &readiness, &signals).await else {
        let _ = shut_tx.send(true);
        let _ = admin_task.await;
        let _ = http_task.await;
        return Ok(EXIT_OK);
    };
    service.attach_controls(cluster.clone(), obs).await;
    let role = joined.as_ref().map_or(Role::Active, |(_, r)| r.clone());
    let why = standby_reason(&role, &shards, &s.cursor.dir);
    apply_role(&service, &readiness, &metrics, why);
    service.set_ready();
    health.set_serving().await;
    tracing::info!("ready");
    let instance = joined.map(|(i, _)| Arc::new(i));
    let renewer = instance.clone().map(|i| {
        let (service, readiness) = (service.clone(), readiness.clone());
        let (metrics, dir) = (metrics.clone(), s.cursor.dir.clone());
        tokio::spawn(renew_instance(i, ttl, shards, dir, move |why| {
            apply_role(&service, &readiness, &metrics, why)
        }))
    });
    let scheduler = tokio::spawn(service.clone().schedule_loop(shut_rx.clone()));
    let stale = tokio::spawn(crate::service::stale_watch(
        cluster.clone(),
        board.clone(),
        metrics.clone(),
        s.clone(),
        shut_rx.clone(),
    ));

    let signal = signals.wait().await;
    tracing::info!(
        signal,
        "shutting down: stop dispatching, drain, save cursors"
    );
    // The renewals stop here, so /ready stays "shutting down".
    if let Some(r) = renewer {
        r.abort();
    }
    readiness.set_not_ready("shutting down");
    health.set_not_serving().await;
    let code = stop_pass(&service, &board, signal, s.service.shutdown_deadline).await;
    let _ = shut_tx.send(true);
    scheduler.abort();
    stale.abort();
    // After the cursors are saved: the next serve may take over at once.
    if let Some(i) = instance {
        i.leave().await;
    }
    let servers = async {
        let _ = admin_task.await;
        let _ = http_task.await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), servers).await;
    Ok(code)
}

/// Connects to the cluster, retrying every [`CONNECT_RETRY`] while it cannot
/// be reached (not ready meanwhile, the cause on `/ready`). `None`: a signal
/// came first. A configuration error ends it at once.
async fn connect_retrying(
    s: &Settings,
    tls: Option<&ClientTls>,
    readiness: &Readiness,
    signals: &Signals,
) -> Result<Option<(SeaweedCluster, SeaweedDelete)>, Fail> {
    loop {
        match connect_cluster(s, tls.cloned()).await {
            Ok(c) => return Ok(Some(c)),
            Err(RunError::Config(e)) => return Err(usage(e)),
            Err(e) => {
                // Name a TLS cause (plaintext against a TLS port, a refused
                // certificate) rather than a bare transport error.
                let addrs: Vec<&str> = s.cluster.filer.iter().map(String::as_str).collect();
                let e = match crate::cli::tls::diagnose(tls, &addrs, Some(&e)).await {
                    Some((msg, _)) => msg,
                    None => e.to_string(),
                };
                readiness.set_not_ready(e.clone());
                tracing::warn!(filer = %s.cluster.filer_label(), error = %e, "cluster not reachable; retrying");
                if signals.sleep_or_signal(CONNECT_RETRY).await {
                    return Ok(None);
                }
            }
        }
    }
}

/// Ready once the cluster answers a bucket scan and this process's instance
/// file is written (docs/serve-instances.md); retried every
/// [`CONNECT_RETRY`]. `None`: a signal came first; `Some(None)`: a cluster
/// without a control store (no instance file).
async fn join_retrying(
    s: &Settings,
    cluster: &dyn ClusterPort,
    shards: &[u8],
    readiness: &Readiness,
    signals: &Signals,
) -> Option<Option<(Instance, Role)>> {
    loop {
        let step = async {
            let scan = cluster.buckets().await;
            scan.map_err(|e| format!("bucket scan failed: {e}"))?;
            let Some(store) = cluster.controls() else {
                return Ok(None);
            };
            let (admin, ttl) = (&s.service.admin_listen, s.service.instance_ttl);
            let joined = Instance::join(store, shards, admin, ttl).await;
            joined.map(Some).map_err(|e| format!("instance file: {e}"))
        };
        match step.await {
            Ok(j) => return Some(j),
            Err(e) => {
                readiness.set_not_ready(e.clone());
                tracing::warn!(error = %e, "not ready; retrying");
                if signals.sleep_or_signal(CONNECT_RETRY).await {
                    return None;
                }
            }
        }
    }
}

/// Renews this process's instance file every third of `ttl` and hands
/// `apply` the standby reason each renewal decides (`None`: run the shards).
async fn renew_instance(
    i: Arc<Instance>,
    ttl: Duration,
    shards: Vec<u8>,
    dir: String,
    apply: impl Fn(Option<String>),
) {
    let mut last_ok = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(ttl / 3).await;
        match i.renew().await {
            Ok(role) => {
                last_ok = tokio::time::Instant::now();
                apply(standby_reason(&role, &shards, &dir));
            }
            // Past half the ttl without a renewal, another serve may take
            // this one for gone: stop starting passes first.
            Err(e) if last_ok.elapsed() > ttl / 2 => {
                apply(Some(format!("the instance file cannot be renewed ({e})")));
            }
            Err(e) => tracing::warn!(error = %e, "instance file not renewed; retrying"),
        }
    }
}

/// Stops the running pass, if any, and waits up to `deadline` for it to
/// drain and save its cursors; the exit code: [`EXIT_ERROR`] past the
/// deadline, naming the unfinished shards.
async fn stop_pass(
    service: &Service,
    board: &StatusBoard,
    signal: &str,
    deadline: Duration,
) -> i32 {
    let Some(mut done) = service.begin_shutdown(&format!("shutdown ({signal})")) else {
        return EXIT_OK;
    };
    if tokio::time::timeout(deadline, done.wait_for(|v| *v))
        .await
        .is_ok()
    {
        tracing::info!("pass drained and cursors saved");
        return EXIT_OK;
    }
    let left = board.unfinished();
    let in_flight: u64 = left.iter().map(|(_, n)| n).sum();
    let shards: Vec<String> = left.iter().map(|(s, _)| format!("{s:02}")).collect();
    tracing::error!(
        deadline_s = deadline.as_secs_f64(),
        shards = shards.join(","),
        in_flight_deletes = in_flight,
        "shutdown deadline passed: abandoning unfinished shards (their cursors are not saved; the next pass resumes from the last saved ones)"
    );
    EXIT_ERROR
}

/// Why this process stands by, as the instance files decided (`None`: it
/// runs its shards).
fn standby_reason(role: &Role, shards: &[u8], dir: &str) -> Option<String> {
    match role {
        Role::Active => None,
        Role::Standby { holder } => {
            Some(format!("{} of cursor dir {dir}", holder.describe(shards)))
        }
    }
}

/// Runs passes (`why` = `None`) or stands by: a standby is not ready
/// (`/ready` says why) and refuses triggers.
fn apply_role(
    service: &Arc<Service>,
    readiness: &Readiness,
    metrics: &Metrics,
    why: Option<String>,
) {
    metrics.instance_active(why.is_none());
    match &why {
        None => readiness.set_ready(),
        Some(w) => readiness.set_not_ready(format!("standby: {w}")),
    }
    service.set_standby(why);
}

async fn bind_http(addr: &str) -> Result<tokio::net::TcpListener, String> {
    let sa: std::net::SocketAddr = addr.trim().parse().map_err(|e| {
        format!("configuration key `service.http_listen`: `{addr}` is not an IP:port address such as 127.0.0.1:9711 ({e})")
    })?;
    tokio::net::TcpListener::bind(sa)
        .await
        .map_err(|e| format!("HTTP: cannot listen on {sa} (service.http_listen): {e}"))
}

/// SIGTERM/SIGINT, seen through a watch channel fed by one task.
pub(crate) struct Signals(watch::Receiver<Option<&'static str>>);

impl Signals {
    /// The signal's name once one came (for loops that select on it).
    pub(crate) fn receiver(&self) -> watch::Receiver<Option<&'static str>> {
        self.0.clone()
    }

    pub(crate) fn install() -> Result<Signals, Fail> {
        let (tx, rx) = watch::channel(None);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let refused =
                |e: std::io::Error| failed(format!("cannot install signal handlers: {e}"));
            let mut term = signal(SignalKind::terminate()).map_err(refused)?;
            let mut int = signal(SignalKind::interrupt()).map_err(refused)?;
            // Unhandled, SIGHUP (a log-rotation script, a closed terminal)
            // killed the process on the spot, mid-pass, without draining or
            // saving cursors. Nothing is reloaded: the README says to restart.
            let mut hup = signal(SignalKind::hangup()).map_err(refused)?;
            tokio::spawn(async move {
                let name = loop {
                    tokio::select! {
                        _ = term.recv() => break "SIGTERM",
                        _ = int.recv() => break "SIGINT",
                        _ = hup.recv() => tracing::warn!(
                            "SIGHUP ignored: the configuration is read once at start (TLS \
                             files before every pass); restart to apply a change (SIGTERM \
                             drains and saves the cursors)"
                        ),
                    }
                };
                let _ = tx.send(Some(name));
                std::future::pending::<()>().await;
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = tx.send(Some("SIGINT"));
            std::future::pending::<()>().await;
        });
        Ok(Signals(rx))
    }

    /// Resolves with the signal's name.
    async fn wait(&self) -> &'static str {
        let mut rx = self.0.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.unwrap_or("SIGTERM"),
            Err(_) => std::future::pending().await,
        }
    }

    /// Sleeps `d`; true when a signal came first.
    async fn sleep_or_signal(&self, d: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(d) => false,
            _ = self.wait() => true,
        }
    }
}
