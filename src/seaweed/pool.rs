//! Several filers behind one handle: which filer a call goes to, and where it
//! goes when that filer does not answer (docs/meta-log.md#several-filers).
//! Whether a stream may move between them is [`super::store_check`]'s.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tonic::transport::Channel;

use crate::seaweed::cursor::CursorStore;
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
use crate::seaweed::filer::FilerClient;
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
    /// Store signature of each filer seen so far, by address
    /// ([`super::store_check`]).
    pub(super) signatures: Arc<std::sync::Mutex<std::collections::HashMap<String, i32>>>,
    nodes: Arc<RwLock<Arc<Vec<FilerNode>>>>,
    preferred: Arc<AtomicUsize>,
    pub(super) call_timeout: Duration,
    /// The cursor store all nodes share (its write-generation memory).
    cursors: Arc<CursorStore>,
    /// Client TLS for every filer (docs/tls.md); `None` = plaintext.
    pub(super) tls: Option<ClientTls>,
    /// When each filer last failed a call as unavailable (down, or not yet
    /// listening after a restart): a pass asks which ones failed while it
    /// ran ([`FilerPool::failed_since`], docs/meta-log.md#filer-crash).
    unavailable: Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>>,
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
            unavailable: Default::default(),
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

    pub(super) fn nodes(&self) -> Arc<Vec<FilerNode>> {
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

    /// Notes that `addr` failed a call because it was unavailable, when
    /// `error` says so (a refused or reset connection: a filer that is down).
    pub fn note_failure(&self, addr: &str, error: &str) {
        if is_unavailable(error) {
            self.unavailable
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(addr.to_string(), Instant::now());
        }
    }

    /// The filers that failed a call as unavailable at or after `since`,
    /// in list order.
    pub fn failed_since(&self, since: Instant) -> Vec<String> {
        let seen = self.unavailable.lock().unwrap_or_else(|p| p.into_inner());
        self.nodes()
            .iter()
            .filter(|n| seen.get(&n.addr).is_some_and(|t| *t >= since))
            .map(|n| n.addr.clone())
            .collect()
    }

    /// Whether the filers may keep stores of their own: more than one filer,
    /// and not every one's store signature is known to be the same. Unknown
    /// counts as "may": the callers then do the safe, dearer thing.
    pub fn stores_may_differ(&self) -> bool {
        let nodes = self.nodes();
        if nodes.len() < 2 {
            return false;
        }
        let known = self.signatures.lock().unwrap_or_else(|p| p.into_inner());
        let sigs: Vec<Option<&i32>> = nodes.iter().map(|n| known.get(&n.addr)).collect();
        !sigs.iter().all(|s| s.is_some() && *s == sigs[0])
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
                    Err(e) => {
                        self.note_failure(&addr, &e.to_string());
                        if single {
                            return Err(e);
                        }
                        errors.push((addr, e));
                    }
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

/// How long [`FilerPool::call`] keeps retrying a round in which every filer
/// was unavailable, before it fails.
pub const FAILOVER_SETTLE: Duration = Duration::from_secs(10);

/// Whether a filer error is gRPC `Unavailable` (connection refused, reset,
/// or a filer that could not reach its peer), as the filer client words it.
fn is_unavailable(error: &str) -> bool {
    error.contains("The service is currently unavailable") || error.contains("Unavailable")
}

#[cfg(test)]
mod tests {
    use super::*;

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
