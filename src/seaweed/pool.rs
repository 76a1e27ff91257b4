//! Several filers and several S3 gateways behind one handle each: which
//! server a call goes to, and where it goes when that server does not answer
//! (docs/meta-log.md#several-filers, docs/lifecycle-delete.md#several-gateways).
//! Also the de-duplication that makes a meta-log stream resumed on another
//! filer deliver each event once.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tonic::transport::Channel;

use crate::engine::{DeleteRequest, MetaEvent, Nanos};
use crate::seaweed::cursor::CursorStore;
use crate::seaweed::delete::{DeleteClient, DeleteError};
use crate::seaweed::discovery::{self, MasterError};
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint, ServerAddress};
use crate::seaweed::filer::{FilerClient, FilerError};
use crate::seaweed::tls::ClientTls;

/// One filer: its channel, client and the cursor store reached through it.
#[derive(Debug, Clone)]
pub struct FilerNode {
    /// The gRPC address, for messages.
    pub addr: String,
    /// Lazily connecting channel (the meta-log subscription uses it).
    pub channel: Channel,
    /// Unary calls, under `cluster.filer_call_timeout`.
    pub filer: FilerClient,
    /// The shared cursor store, through this filer.
    pub cursors: Arc<CursorStore>,
}

/// The filers of a pass in preference order. The first one that answers
/// serves every call until it fails; then the next one does. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FilerPool {
    /// Store signature of each filer seen so far, by address.
    signatures: Arc<std::sync::Mutex<std::collections::HashMap<String, i32>>>,
    nodes: Arc<RwLock<Arc<Vec<FilerNode>>>>,
    preferred: Arc<AtomicUsize>,
    call_timeout: Duration,
    /// The cursor store all nodes share (its write-generation memory).
    cursors: Arc<CursorStore>,
    /// Client TLS for every filer (docs/tls.md); `None` = plaintext.
    tls: Option<ClientTls>,
}

/// Why a filer list cannot be used: a setting, not the cluster, is wrong
/// (`pass::runner::connect_cluster` makes that a configuration error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The list is empty.
    #[error("no filer address given; set `cluster.filer` or `cluster.master`")]
    Missing,
    /// An address is no gRPC endpoint.
    #[error("invalid address {addr:?}: {reason}; expected host:port")]
    Invalid {
        /// The address as given.
        addr: String,
        /// Why the endpoint parser rejected it.
        reason: String,
    },
}

/// A lazily connecting channel to `addr`, with client TLS when `tls` is set.
pub fn lazy_channel(addr: &str, tls: Option<ClientTls>) -> Result<Channel, AddressError> {
    GrpcEndpoint::new(addr, &EndpointOptions::seaweed().tls(tls))
        .map(|e| e.connect_lazy())
        .map_err(|e| AddressError::Invalid {
            addr: addr.to_string(),
            reason: e.reason().to_string(),
        })
}

impl FilerPool {
    /// Lazy channels to `addrs` (at least one); nothing is dialled yet. Build
    /// on the main runtime (the channels' buffer tasks live there).
    pub fn new(
        addrs: &[String],
        call_timeout: Duration,
        cursor_dir: &str,
        tls: Option<ClientTls>,
    ) -> Result<FilerPool, AddressError> {
        let first = addrs.first().ok_or(AddressError::Missing)?;
        let channel = lazy_channel(first, tls.clone())?;
        let client = FilerClient::from_channel(channel, first).with_call_timeout(call_timeout);
        let pool = FilerPool {
            signatures: Default::default(),
            nodes: Arc::new(RwLock::new(Arc::new(Vec::new()))),
            preferred: Arc::new(AtomicUsize::new(0)),
            call_timeout,
            cursors: Arc::new(CursorStore::new(client, cursor_dir)),
            tls,
        };
        pool.set_addrs(addrs)?;
        Ok(pool)
    }

    /// Replaces the filer list (discovery at a pass start) unless it is the
    /// same; the preferred filer stays preferred when it is still listed.
    pub fn set_addrs(&self, addrs: &[String]) -> Result<(), AddressError> {
        if addrs.is_empty() {
            return Err(AddressError::Missing);
        }
        let current = self.nodes();
        if current
            .iter()
            .map(|n| n.addr.as_str())
            .eq(addrs.iter().map(String::as_str))
        {
            return Ok(());
        }
        let preferred = current
            .get(self.preferred.load(Ordering::Relaxed))
            .map(|n| n.addr.clone());
        let mut nodes = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let node = match current.iter().find(|n| &n.addr == addr) {
                Some(n) => n.clone(),
                None => {
                    let channel = lazy_channel(addr, self.tls.clone())?;
                    let filer = FilerClient::from_channel(channel.clone(), addr)
                        .with_call_timeout(self.call_timeout);
                    FilerNode {
                        addr: addr.clone(),
                        channel,
                        cursors: Arc::new(self.cursors.through(filer.clone())),
                        filer,
                    }
                }
            };
            nodes.push(node);
        }
        let idx = preferred
            .and_then(|p| nodes.iter().position(|n| n.addr == p))
            .unwrap_or(0);
        *self.nodes.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(nodes);
        self.preferred.store(idx, Ordering::Relaxed);
        Ok(())
    }

    fn nodes(&self) -> Arc<Vec<FilerNode>> {
        Arc::clone(&self.nodes.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The filers, preferred one first, then the rest in list order after it.
    pub fn ordered(&self) -> Vec<FilerNode> {
        let nodes = self.nodes();
        let start = self.preferred.load(Ordering::Relaxed) % nodes.len().max(1);
        nodes[start..]
            .iter()
            .chain(nodes[..start].iter())
            .cloned()
            .collect()
    }

    /// The preferred filer (the one calls go to first).
    pub fn primary(&self) -> FilerNode {
        self.ordered()
            .into_iter()
            .next()
            .expect("a pool always has a filer")
    }

    /// Makes `addr` the preferred filer (it just answered).
    pub fn prefer(&self, addr: &str) {
        if let Some(i) = self.nodes().iter().position(|n| n.addr == addr) {
            self.preferred.store(i, Ordering::Relaxed);
        }
    }

    /// Moves preference past `addr` (it just failed) when it is preferred.
    pub fn demote(&self, addr: &str) {
        let nodes = self.nodes();
        if let Some(i) = nodes.iter().position(|n| n.addr == addr) {
            let _ = self.preferred.compare_exchange(
                i,
                (i + 1) % nodes.len(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Runs `call` on the preferred filer, then on each other one until one
    /// succeeds. Every call this is used for is a read or an idempotent write,
    /// so repeating it elsewhere is safe. With several filers, a round in
    /// which every filer was unavailable is tried again for up to
    /// [`FAILOVER_SETTLE`]: for a few seconds after a peer dies, the
    /// survivors still fail some writes by dialling it
    /// (docs/meta-log.md#several-filers). All failing: one error naming each
    /// filer and its error ([`EveryFilerFailed`]); with one filer, its error
    /// as it is.
    pub async fn call<T, E>(
        &self,
        call: impl Fn(FilerNode) -> BoxFuture<'static, Result<T, E>>,
    ) -> Result<T, E>
    where
        E: std::fmt::Display + From<EveryFilerFailed<E>>,
    {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(250);
        loop {
            let order = self.ordered();
            let single = order.len() == 1;
            let mut errors: Vec<(String, E)> = Vec::new();
            for node in order {
                let addr = node.addr.clone();
                match call(node).await {
                    Ok(v) => {
                        if !errors.is_empty() {
                            tracing::warn!(filer = %addr, failed = %failures(&errors), "filer failover");
                        }
                        self.prefer(&addr);
                        return Ok(v);
                    }
                    Err(e) if single => return Err(e),
                    Err(e) => errors.push((addr, e)),
                }
            }
            let all_unavailable = errors.iter().all(|(_, e)| is_unavailable(&e.to_string()));
            if !all_unavailable || started.elapsed() + backoff > FAILOVER_SETTLE {
                return Err(EveryFilerFailed(errors).into());
            }
            tracing::warn!(errors = %failures(&errors), retry_in = ?backoff, "every filer unavailable; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

/// Every filer failed one [`FilerPool::call`]: each one's address and
/// error, in the order they were tried.
#[derive(Debug)]
pub struct EveryFilerFailed<E>(pub Vec<(String, E)>);

impl<E: std::fmt::Display> std::fmt::Display for EveryFilerFailed<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "every filer failed: {}", failures(&self.0))
    }
}

/// Callers that keep their errors as text get the message.
impl From<EveryFilerFailed<String>> for String {
    fn from(e: EveryFilerFailed<String>) -> String {
        e.to_string()
    }
}

/// `filer <addr>: <error>` for each failure, joined by `; `.
pub fn failures<E: std::fmt::Display>(errors: &[(String, E)]) -> String {
    errors
        .iter()
        .map(|(addr, e)| format!("filer {addr}: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether a meta-log stream may move between the filers of a pool
/// (docs/meta-log.md#several-filers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCheck {
    /// One filer, or filers that share one store: each one's log holds every
    /// filer's events, so a stream can resume on any of them.
    Shared,
    /// Every filer answers and each has a store of its own: a filer serves
    /// its peers' events only while it follows them, so a pass reads every
    /// filer's own log and merges them, and a broken stream must not resume
    /// elsewhere (the pass fails instead). Each filer's address and store
    /// signature, in pool order.
    Separate(Vec<(String, i32)>),
}

/// Why a pass cannot read every event of the pool's filers
/// (docs/meta-log.md#several-filers, docs/meta-log.md#unread-filers): the
/// text names the filers and the fix.
#[derive(Debug, thiserror::Error)]
pub enum StoreCheckError {
    /// Filers did not answer, and the filers are not known to share a store.
    #[error(
        "meta-log: filer {} unreachable, and the filers do not share a store (or its store \
         is not known yet): the events written through it are only in its own meta-log, so \
         a pass on the others would miss them; bring it back, or remove it from \
         `cluster.filer` once its writes are no longer needed \
         (docs/meta-log.md#several-filers)",
        addr_errors(.down)
    )]
    Unreachable {
        /// Each filer that did not answer, and its error.
        down: Vec<(String, FilerError)>,
    },
    /// Some filers share a store and others do not.
    #[error(
        "meta-log: the filers mix shared and separate stores (filers by store: {}); a pass \
         cannot read every event of such a cluster completely; give every filer the same store \
         or each its own (docs/meta-log.md#several-filers)",
        store_groups(.by_store)
    )]
    MixedStores {
        /// The filers' addresses, grouped by store.
        by_store: Vec<Vec<String>>,
    },
    /// The master lists filers the pass does not read, whose events may be in
    /// no log it reads.
    #[error(
        "meta-log: master {master} lists filer {} that this pass does not read (it reads {}): \
         the events written through it are only in its own meta-log, and the others' \
         aggregated logs can lack them for good after a restart, so the pass would miss due \
         deletions; add it to `cluster.filer`, or set only `cluster.master` so every filer is \
         read (docs/meta-log.md#unread-filers)",
        joined(.unread, ", "),
        .reads.join(", ")
    )]
    UnreadFilers {
        /// The master that lists them.
        master: String,
        /// Each such filer and why its events may be missed.
        unread: Vec<UnreadFiler>,
        /// The filers the pass reads.
        reads: Vec<String>,
    },
}

/// A filer the master lists, the pool lacks, and whose store is not known
/// to be one the pass reads.
#[derive(Debug, thiserror::Error)]
pub enum UnreadFiler {
    /// Its address is no gRPC endpoint.
    #[error("{addr} ({source})")]
    BadAddress {
        /// Its gRPC address.
        addr: String,
        /// Why it cannot be dialled.
        #[source]
        source: AddressError,
    },
    /// It has a store of its own.
    #[error("{addr} (a store of its own)")]
    OwnStore {
        /// Its gRPC address.
        addr: String,
    },
    /// It did not tell its store.
    #[error("{addr} (its store is unknown: {source})")]
    UnknownStore {
        /// Its gRPC address.
        addr: String,
        /// Its error.
        #[source]
        source: FilerError,
    },
}

/// Items joined by `sep`.
fn joined<T: std::fmt::Display>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// `<addr>: <error>` for each filer, joined by `; `.
fn addr_errors(down: &[(String, FilerError)]) -> String {
    down.iter()
        .map(|(addr, e)| format!("{addr}: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `[a, b] [c]`: each store's filers.
fn store_groups(by_store: &[Vec<String>]) -> String {
    by_store
        .iter()
        .map(|a| format!("[{}]", a.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl FilerPool {
    /// Asks every filer for its store signature (remembering them across
    /// passes). A filer that does not answer and whose store is unknown or
    /// its own is an error: events written through it are only in its log, and
    /// a stream on the others would silently miss them.
    pub async fn store_check(&self) -> Result<StoreCheck, StoreCheckError> {
        let nodes = self.nodes();
        if nodes.len() == 1 {
            return Ok(StoreCheck::Shared);
        }
        let answers = futures::future::join_all(nodes.iter().map(|n| {
            let filer = n.filer.clone();
            async move { filer.store_signature().await }
        }))
        .await;
        let mut known = self.signatures.lock().unwrap_or_else(|p| p.into_inner());
        let mut down = Vec::new();
        for (n, answer) in nodes.iter().zip(answers) {
            match answer {
                Ok(sig) => {
                    known.insert(n.addr.clone(), sig);
                }
                Err(e) => down.push((n.addr.clone(), e)),
            }
        }
        let sigs: Vec<Option<i32>> = nodes.iter().map(|n| known.get(&n.addr).copied()).collect();
        let shared = sigs.iter().all(|s| s.is_some() && *s == sigs[0]);
        match (shared, down.is_empty()) {
            (true, _) => Ok(StoreCheck::Shared),
            (false, true) => {
                let filers: Vec<(String, i32)> = nodes
                    .iter()
                    .zip(&sigs)
                    .filter_map(|(n, s)| s.map(|s| (n.addr.clone(), s)))
                    .collect();
                separate_or_mixed(filers)
            }
            (false, false) => Err(StoreCheckError::Unreachable { down }),
        }
    }
}

impl FilerPool {
    /// Refuses a pass that does not read every filer it must: the master
    /// lists every filer of the pool's filer group, and one missing from the
    /// pool whose store is its own holds events in no log this pass reads. A
    /// peer's aggregated log is no substitute: it can lack them for good
    /// after a restart (docs/meta-log.md#unread-filers). The master asked is
    /// `configured` (`cluster.master`) when set, else those the filer names.
    /// When neither the filers nor a master answer, the check is skipped
    /// with a warning: the pass then fails or reads what it can reach, as
    /// before the check. Once per pass, at its start.
    pub async fn check_unread_filers(&self, configured: &str) -> Result<(), StoreCheckError> {
        let started = Instant::now();
        let nodes = self.ordered();
        let mut reported = None;
        for n in &nodes {
            if let Ok(r) = n.filer.store_and_masters().await {
                reported = Some(r);
                break;
            }
        }
        let Some((own_sig, reported_masters, group)) = reported else {
            return Ok(());
        };
        let masters = if configured.trim().is_empty() {
            reported_masters
        } else {
            vec![configured.trim().to_string()]
        };
        let mut listed = None;
        let mut errors = Vec::new();
        for named in &masters {
            // `cluster.master` is a gRPC address; the filer names a master
            // by its HTTP address (`host:port` or `host:port.grpcPort`).
            let m = if configured.trim().is_empty() {
                match ServerAddress::parse(named) {
                    Ok(a) => a.grpc(),
                    Err(source) => {
                        errors.push(MasterError::FromFiler {
                            named: named.clone(),
                            source,
                        });
                        continue;
                    }
                }
            } else {
                named.clone()
            };
            let call =
                discovery::list_group_nodes(&m, discovery::FILER_TYPE, &group, self.tls.as_ref());
            match call.await {
                Ok(l) => {
                    listed = Some((m.clone(), l));
                    break;
                }
                Err(e) => errors.push(e),
            }
        }
        let Some((master, listed)) = listed else {
            if !masters.is_empty() {
                tracing::warn!(
                    errors = joined(&errors, "; "),
                    "could not ask the master which filers the cluster has; reading the \
                     configured ones"
                );
            }
            return Ok(());
        };
        let ours: HashSet<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
        let mut stores: HashSet<i32> = self
            .signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .copied()
            .collect();
        stores.insert(own_sig);
        let mut unread = Vec::new();
        for raw in listed {
            let Ok(addr) = ServerAddress::parse(&raw).map(|a| a.grpc()) else {
                continue;
            };
            if ours.contains(addr.as_str()) {
                continue;
            }
            let client = match lazy_channel(&addr, self.tls.clone()) {
                Ok(ch) => FilerClient::from_channel(ch, &addr).with_call_timeout(self.call_timeout),
                Err(source) => {
                    unread.push(UnreadFiler::BadAddress { addr, source });
                    continue;
                }
            };
            match client.store_signature().await {
                // A filer of the pool under another name, or a store-mate
                // of one: its persisted events are in a store the pass
                // reads.
                Ok(sig) if stores.contains(&sig) => {}
                Ok(_) => unread.push(UnreadFiler::OwnStore { addr }),
                Err(source) => unread.push(UnreadFiler::UnknownStore { addr, source }),
            }
        }
        tracing::debug!(
            master,
            unread = unread.len(),
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "checked the cluster's filers against the pass's"
        );
        if unread.is_empty() {
            return Ok(());
        }
        Err(StoreCheckError::UnreadFilers {
            master,
            unread,
            reads: nodes.iter().map(|n| n.addr.clone()).collect(),
        })
    }
}

/// Filers with different store signatures: [`StoreCheck::Separate`] when
/// no two share one. Some sharing a store and others not is refused: a
/// filer's own log on a shared store holds its store-mates' persisted events
/// but not their unflushed ones, so neither one log per filer nor one per
/// store is complete (docs/meta-log.md#several-filers).
fn separate_or_mixed(filers: Vec<(String, i32)>) -> Result<StoreCheck, StoreCheckError> {
    let mut by_store: std::collections::BTreeMap<i32, Vec<&str>> = Default::default();
    for (addr, sig) in &filers {
        by_store.entry(*sig).or_default().push(addr);
    }
    if by_store.values().all(|a| a.len() == 1) {
        return Ok(StoreCheck::Separate(filers));
    }
    Err(StoreCheckError::MixedStores {
        by_store: by_store
            .into_values()
            .map(|a| a.into_iter().map(str::to_string).collect())
            .collect(),
    })
}

/// How long [`FilerPool::call`] keeps retrying a round in which every filer
/// was unavailable, before it fails.
pub const FAILOVER_SETTLE: Duration = Duration::from_secs(10);

/// Whether a filer error is gRPC `Unavailable` (connection refused, reset,
/// or a filer that could not reach its peer), as the filer client words it.
fn is_unavailable(error: &str) -> bool {
    error.contains("The service is currently unavailable") || error.contains("Unavailable")
}

/// How long a gateway that refused a connection is passed over.
pub const GATEWAY_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Gateway {
    addr: String,
    client: DeleteClient,
    /// Milliseconds since the pool's epoch until which it is passed over.
    down_until_ms: AtomicU64,
}

/// The S3 gateways of a pass. Deletes go round-robin; a gateway that cannot
/// be reached hands the delete to the next one and is passed over for
/// [`GATEWAY_BACKOFF`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GatewayPool {
    gateways: Arc<RwLock<Arc<Vec<Arc<Gateway>>>>>,
    next: Arc<AtomicUsize>,
    epoch: Instant,
    /// Client TLS for every gateway; `None` = plaintext.
    tls: Option<ClientTls>,
}

impl GatewayPool {
    /// Lazy clients for `addrs` (at least one). Build on the main runtime.
    pub fn new(addrs: &[String], tls: Option<ClientTls>) -> Result<GatewayPool, DeleteError> {
        let pool = GatewayPool {
            gateways: Arc::new(RwLock::new(Arc::new(Vec::new()))),
            next: Arc::new(AtomicUsize::new(0)),
            epoch: Instant::now(),
            tls,
        };
        pool.set_addrs(addrs)?;
        Ok(pool)
    }

    /// Replaces the gateway list (discovery at a pass start) unless it is the same.
    pub fn set_addrs(&self, addrs: &[String]) -> Result<(), DeleteError> {
        if addrs.is_empty() {
            return Err(DeleteError::InvalidAddress {
                address: String::new(),
                reason: "no S3 gRPC address given; set `cluster.s3_grpc` or `cluster.master`"
                    .into(),
            });
        }
        let current = self.list();
        if current
            .iter()
            .map(|g| g.addr.as_str())
            .eq(addrs.iter().map(String::as_str))
        {
            return Ok(());
        }
        let mut list = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let g = match current.iter().find(|g| &g.addr == addr) {
                Some(g) => Arc::clone(g),
                None => Arc::new(Gateway {
                    addr: addr.clone(),
                    client: DeleteClient::connect_lazy_with(
                        addr,
                        &EndpointOptions::seaweed().tls(self.tls.clone()),
                    )?,
                    down_until_ms: AtomicU64::new(0),
                }),
            };
            list.push(g);
        }
        *self.gateways.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(list);
        Ok(())
    }

    fn list(&self) -> Arc<Vec<Arc<Gateway>>> {
        Arc::clone(&self.gateways.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The gateway addresses, in list order.
    pub fn addrs(&self) -> Vec<String> {
        self.list().iter().map(|g| g.addr.clone()).collect()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Sends `request` to the next gateway in turn; when it cannot be reached
    /// (`Unavailable`: the request never got there), to the next one, until
    /// each was tried once. Gateways that failed recently go last. Other
    /// errors are returned as they are (the dispatcher's retry decides).
    pub async fn delete(
        &self,
        request: &DeleteRequest,
    ) -> Result<crate::engine::CallResult, DeleteError> {
        let list = self.list();
        let n = list.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let now = self.now_ms();
        let (up, down): (Vec<_>, Vec<_>) = (0..n)
            .map(|i| &list[(start + i) % n])
            .partition(|g| g.down_until_ms.load(Ordering::Relaxed) <= now);
        let mut last = None;
        for g in up.into_iter().chain(down) {
            match g.client.delete(request).await {
                Err(
                    e @ DeleteError::Transport {
                        code: tonic::Code::Unavailable,
                        ..
                    },
                ) if n > 1 => {
                    let until = self.now_ms() + GATEWAY_BACKOFF.as_millis() as u64;
                    g.down_until_ms.store(until, Ordering::Relaxed);
                    tracing::warn!(gateway = %g.addr, error = %e, "S3 gateway unreachable; trying the next");
                    last = Some(e);
                }
                other => return other,
            }
        }
        Err(last.expect("n > 1 gateways were tried"))
    }
}

/// What a meta-log stream resumed on another filer must not deliver twice.
/// After a break the stream restarts `margin` before the newest delivered
/// event (events near it may still be on their way from a peer filer,
/// docs/meta-log.md#several-filers); the events delivered in that sliver
/// are remembered and dropped when they come again.
#[derive(Debug)]
pub struct ResumeDedup {
    margin: Nanos,
    newest: Option<Nanos>,
    /// Off where a stream is never resumed (one filer, or filers with their
    /// own stores): then nothing is remembered, a cost every replayed event
    /// paid for nothing (it held down the pass's scan rate).
    remember: bool,
    recent: VecDeque<EventKey>,
    seen: HashSet<EventKey>,
}

/// An event's identity: its timestamp and a 64-bit hash of the paths it
/// touched (directory, old name, new parent, new name). Two different events
/// look alike only with the same nanosecond timestamp *and* a hash collision;
/// keeping the paths themselves cost four string copies per event.
type EventKey = (Nanos, u64);

fn key_of(e: &MetaEvent) -> EventKey {
    use std::hash::{Hash, Hasher};
    fn name(en: &Option<Box<crate::pb::filer_pb::Entry>>) -> Option<&str> {
        en.as_ref().map(|x| x.name.as_str())
    }
    // Fixed keys: the same event hashes the same before and after a resume.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        e.directory.as_str(),
        name(&e.old_entry),
        e.new_parent_path.as_str(),
        name(&e.new_entry),
    )
        .hash(&mut h);
    (e.ts_ns, h.finish())
}

impl ResumeDedup {
    /// Nothing delivered yet; resume `margin` before the newest event.
    pub fn new(margin: Nanos) -> ResumeDedup {
        ResumeDedup {
            margin: margin.max(0),
            newest: None,
            remember: true,
            recent: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    /// For a stream that is never resumed: admits everything, remembers
    /// nothing.
    pub fn never_resumed() -> ResumeDedup {
        ResumeDedup {
            remember: false,
            ..ResumeDedup::new(0)
        }
    }

    /// Where a (re)subscription starts: the pass's `since` before anything
    /// was delivered, else `margin` before the newest delivered event (never
    /// before `since`).
    pub fn since(&self, since: Nanos) -> Nanos {
        match self.newest {
            Some(t) => t.saturating_sub(self.margin).max(since),
            None => since,
        }
    }

    /// Whether `event` is new (deliver it) or was delivered already (drop it).
    pub fn admit(&mut self, event: &MetaEvent) -> bool {
        let newest = self.newest.map_or(event.ts_ns, |n| n.max(event.ts_ns));
        if !self.remember {
            self.newest = Some(newest);
            return true;
        }
        let key = key_of(event);
        if !self.seen.insert(key) {
            return false;
        }
        self.newest = Some(newest);
        self.recent.push_back(key);
        // Forget what a resume can no longer bring back. Events arrive in
        // nearly ts order, so the oldest sit at the front.
        let floor = newest.saturating_sub(self.margin);
        while let Some(&(ts, _)) = self.recent.front() {
            if ts > floor {
                break;
            }
            if let Some(k) = self.recent.pop_front() {
                self.seen.remove(&k);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::Entry;

    fn ev(ts: Nanos, name: &str) -> MetaEvent {
        MetaEvent {
            ts_ns: ts,
            directory: "/buckets/b".into(),
            new_parent_path: "/buckets/b".into(),
            old_entry: None,
            new_entry: Some(Box::new(Entry {
                name: name.into(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn resumed_stream_delivers_each_event_once() {
        let mut d = ResumeDedup::new(10);
        assert_eq!(d.since(5), 5);
        for (ts, n) in [(100, "a"), (105, "b"), (104, "c"), (112, "d")] {
            assert!(d.admit(&ev(ts, n)));
        }
        // Resume 10 before the newest (112), not before the pass's since.
        assert_eq!(d.since(5), 102);
        assert_eq!(d.since(110), 110);
        // The new filer sends 104..112 again, plus one event the old one never did.
        assert!(!d.admit(&ev(104, "c")));
        assert!(!d.admit(&ev(105, "b")));
        assert!(d.admit(&ev(106, "late-from-peer")));
        assert!(!d.admit(&ev(112, "d")));
        assert!(d.admit(&ev(113, "e")));
        // Same ts, different object: a different event.
        assert!(d.admit(&ev(113, "f")));
    }

    #[test]
    fn a_stream_never_resumed_admits_everything_and_remembers_nothing() {
        let mut d = ResumeDedup::never_resumed();
        assert!(d.admit(&ev(100, "a")));
        assert!(d.admit(&ev(100, "a")));
        assert!(d.seen.is_empty() && d.recent.is_empty());
        assert_eq!(d.since(5), 100);
    }

    #[test]
    fn memory_stays_within_the_margin() {
        let mut d = ResumeDedup::new(10);
        for ts in 0..1000 {
            assert!(d.admit(&ev(ts, &ts.to_string())));
        }
        assert!(d.seen.len() <= 11, "{}", d.seen.len());
        assert_eq!(d.seen.len(), d.recent.len());
    }

    #[test]
    fn separate_stores_each_or_none_and_a_mix_is_refused() {
        let f = |a: &str, s: i32| (a.to_string(), s);
        let own = vec![f("a:1", 1), f("b:1", 2), f("c:1", 3)];
        assert_eq!(
            separate_or_mixed(own.clone()).unwrap(),
            StoreCheck::Separate(own)
        );
        let e = separate_or_mixed(vec![f("a:1", 1), f("b:1", 1), f("c:1", 3)]).unwrap_err();
        assert!(matches!(e, StoreCheckError::MixedStores { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "meta-log: the filers mix shared and separate stores (filers by store: [a:1, b:1] \
             [c:1]); a pass cannot read every event of such a cluster completely; give every \
             filer the same store or each its own (docs/meta-log.md#several-filers)"
        );
    }

    #[test]
    fn unread_filers_are_named_with_why() {
        let e = StoreCheckError::UnreadFilers {
            master: "m:1".into(),
            unread: vec![
                UnreadFiler::OwnStore { addr: "c:1".into() },
                UnreadFiler::BadAddress {
                    addr: "d".into(),
                    source: AddressError::Invalid {
                        addr: "d".into(),
                        reason: "no port".into(),
                    },
                },
            ],
            reads: vec!["a:1".into(), "b:1".into()],
        };
        assert_eq!(
            e.to_string(),
            "meta-log: master m:1 lists filer c:1 (a store of its own), d (invalid address \
             \"d\": no port; expected host:port) that this pass does not read (it reads a:1, \
             b:1): the events written through it are only in its own meta-log, and the others' \
             aggregated logs can lack them for good after a restart, so the pass would miss due \
             deletions; add it to `cluster.filer`, or set only `cluster.master` so every filer \
             is read (docs/meta-log.md#unread-filers)"
        );
    }

    #[tokio::test]
    async fn a_round_of_unavailable_filers_is_retried_until_one_answers() {
        let addrs: Vec<String> = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
        let pool = FilerPool::new(&addrs, Duration::from_secs(1), "/c", None).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let got = pool
            .call(|n| {
                let calls = Arc::clone(&calls);
                Box::pin(async move {
                    // The first round: both unavailable (a survivor dialling its dead peer).
                    if calls.fetch_add(1, Ordering::Relaxed) < 2 {
                        Err(
                            "transport error: code: 'The service is currently unavailable'"
                                .to_string(),
                        )
                    } else {
                        Ok(n.addr)
                    }
                })
            })
            .await
            .unwrap();
        assert_eq!(got, "127.0.0.1:1");
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn pool_prefers_the_filer_that_answered() {
        let addrs: Vec<String> = vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()];
        let pool = FilerPool::new(&addrs, Duration::from_secs(1), "/c", None).unwrap();
        assert_eq!(pool.primary().addr, "127.0.0.1:1");
        let got = pool
            .call(|n| {
                Box::pin(async move {
                    if n.addr.ends_with(":1") {
                        Err("down".to_string())
                    } else {
                        Ok(n.addr)
                    }
                })
            })
            .await
            .unwrap();
        assert_eq!(got, "127.0.0.1:2");
        assert_eq!(pool.primary().addr, "127.0.0.1:2");
        let e = pool
            .call(|_| Box::pin(async { Err::<(), _>("down".to_string()) }))
            .await
            .unwrap_err();
        assert!(
            e.contains("every filer failed") && e.contains("127.0.0.1:1"),
            "{e}"
        );
        // A refreshed list keeps the preferred filer.
        pool.set_addrs(&["127.0.0.1:3".into(), "127.0.0.1:2".into()])
            .unwrap();
        assert_eq!(pool.primary().addr, "127.0.0.1:2");
        pool.demote("127.0.0.1:2");
        assert_eq!(pool.primary().addr, "127.0.0.1:3");
        assert!(FilerPool::new(&[], Duration::from_secs(1), "/c", None).is_err());
    }
}
