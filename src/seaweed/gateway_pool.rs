//! Several S3 gateways behind one handle: deletes go round-robin, and one
//! that cannot be reached hands its delete to the next
//! (docs/lifecycle-delete.md#several-gateways).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::engine::DeleteRequest;
use crate::seaweed::delete::{DeleteClient, DeleteError};
use crate::seaweed::endpoint::EndpointOptions;
use crate::seaweed::tls::ClientTls;

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
