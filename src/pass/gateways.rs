//! The delete adapter: `LifecycleDelete` over the S3 gateways' gRPC ports,
//! as the dispatcher's [`DeletePort`] (transport errors retried, local
//! refusals answered BLOCKED).

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::engine::{CallResult, DeleteOutcome, DeleteRequest};
use crate::pass::cluster_error::ClusterError;
use crate::pass::dispatch::{AttemptError, AttemptResult, DeletePort};
use crate::seaweed::delete::DeleteError;
use crate::seaweed::gateway_pool::GatewayPool;
use crate::seaweed::tls::ClientTls;

/// `LifecycleDelete` over the S3 gateways' gRPC ports, spread across them
/// ([`GatewayPool`], docs/lifecycle-delete.md#several-gateways).
pub struct SeaweedDelete {
    gateways: GatewayPool,
}

impl SeaweedDelete {
    /// Clients for every address in `addrs` (lazily; build on the main
    /// runtime), with client TLS when `tls` is set.
    pub fn connect_many(
        addrs: &[String],
        tls: Option<ClientTls>,
    ) -> Result<SeaweedDelete, ClusterError> {
        let gateways = GatewayPool::new(addrs, tls)?;
        Ok(SeaweedDelete { gateways })
    }

    /// The gateway set, shared with [`crate::pass::cluster::SeaweedCluster::with_discovery`].
    pub fn gateways(&self) -> GatewayPool {
        self.gateways.clone()
    }
}

impl DeletePort<DeleteRequest> for SeaweedDelete {
    fn call(&self, call: &DeleteRequest) -> BoxFuture<'static, AttemptResult> {
        let (gateways, req) = (self.gateways.clone(), call.clone());
        async move {
            match gateways.delete(&req).await {
                Ok(verdict) => Ok(verdict),
                Err(e @ DeleteError::Transport { .. }) => Err(AttemptError {
                    retryable: e.is_retryable(),
                    message: e.to_string(),
                }),
                // Refused locally: the server would answer BLOCKED, so it halts
                // the shard like BLOCKED does instead of being retried.
                Err(e) => Ok(CallResult::answered(DeleteOutcome::Blocked, e.to_string())),
            }
        }
        .boxed()
    }
}
