//! Which filers and S3 gateways a pass talks to: the configured lists, or the
//! master's cluster membership (`ListClusterNodes`) when only `cluster.master`
//! is set (docs/grpc.md#discovery). Re-read at the start of every pass.

use std::time::Duration;

use crate::pb::master_pb::ListClusterNodesRequest;
use crate::pb::master_pb::seaweed_client::SeaweedClient;
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint, MAX_MESSAGE_BYTES, ServerAddress};
use crate::seaweed::tls::ClientTls;

/// `client_type` of filers in the master's membership.
pub const FILER_TYPE: &str = "filer";
/// `client_type` of S3 gateways in the master's membership.
pub const S3_TYPE: &str = "s3";

/// Deadline of one membership call: it is a small in-memory answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The servers one pass uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    /// Filer gRPC addresses, in preference order.
    pub filers: Vec<String>,
    /// S3 gRPC addresses (`LifecycleDelete`).
    pub s3_grpc: Vec<String>,
}

/// A client of the master at `master` (its gRPC address, and the client),
/// with the bounded connect and call deadlines of discovery.
async fn connect_master(
    master: &str,
    tls: Option<&ClientTls>,
) -> Result<(String, SeaweedClient<tonic::transport::Channel>), String> {
    connect_master_for(master, tls, CALL_TIMEOUT).await
}

/// [`connect_master`] with calls bounded by `call_timeout` (a vacuum takes
/// as long as rewriting a volume).
pub(crate) async fn connect_master_for(
    master: &str,
    tls: Option<&ClientTls>,
    call_timeout: Duration,
) -> Result<(String, SeaweedClient<tonic::transport::Channel>), String> {
    let grpc = ServerAddress::grpc_as_given(master).map_err(|e| e.to_string())?;
    let endpoint = GrpcEndpoint::new(
        &grpc,
        &EndpointOptions::seaweed()
            .connect_timeout(CALL_TIMEOUT)
            .call_timeout(call_timeout)
            .tls(tls.cloned()),
    )
    .map_err(|e| e.to_string())?;
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("master {grpc} not reachable: {e}"))?;
    let client = SeaweedClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES);
    Ok((grpc, client))
}

/// The master's gRPC address: `configured` (`cluster.master`) when set,
/// else the first master `filer` reports.
pub async fn master_of(
    filer: &crate::seaweed::filer::FilerClient,
    configured: &str,
) -> Result<String, String> {
    if !configured.trim().is_empty() {
        return Ok(configured.trim().to_string());
    }
    let masters = filer.masters().await.map_err(|e| e.to_string())?;
    let first = masters
        .first()
        .ok_or("the filer names no master; set `cluster.master`")?;
    ServerAddress::parse(first)
        .map(|a| a.grpc())
        .map_err(|e| format!("master {first} (from the filer): {e}"))
}

/// The registered nodes of `client_type`, as the master lists them (raw
/// addresses, sorted and de-duplicated).
/// `tls`: the cluster's client TLS (a `security.toml` cluster secures the
/// master's gRPC port like the others; docs/tls.md).
pub async fn list_nodes(
    master: &str,
    client_type: &str,
    tls: Option<&ClientTls>,
) -> Result<Vec<String>, String> {
    list_group_nodes(master, client_type, "", tls).await
}

/// [`list_nodes`] of one filer group: filers of another group are another
/// file system that shares the masters and volumes.
pub async fn list_group_nodes(
    master: &str,
    client_type: &str,
    filer_group: &str,
    tls: Option<&ClientTls>,
) -> Result<Vec<String>, String> {
    let (grpc, mut client) = connect_master(master, tls).await?;
    let resp = client
        .list_cluster_nodes(ListClusterNodesRequest {
            client_type: client_type.to_string(),
            filer_group: filer_group.to_string(),
            ..Default::default()
        })
        .await
        .map_err(|s| {
            format!(
                "master {grpc}: ListClusterNodes({client_type}) failed: {:?}: {}",
                s.code(),
                s.message()
            )
        })?;
    let mut out: Vec<String> = resp
        .into_inner()
        .cluster_nodes
        .into_iter()
        .map(|n| n.address)
        .filter(|a| !a.is_empty())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The admin-lock name `weed admin` holds on the master while it runs
/// (docs/plugin-worker.md#admin-discovery).
pub const ADMIN_PRESENCE_LOCK: &str = "admin-server";

/// Whether the master at `master` reports a `weed admin` connected: the
/// holder's message of the [`ADMIN_PRESENCE_LOCK`], or `None`. The master
/// knows no admin's address (an admin is no cluster node: `ListClusterNodes`
/// never lists one), only that one holds this lock.
pub async fn admin_presence(
    master: &str,
    tls: Option<&ClientTls>,
) -> Result<Option<String>, String> {
    let (grpc, mut client) = connect_master(master, tls).await?;
    let resp = client
        .get_admin_lock_status(crate::pb::master_pb::GetAdminLockStatusRequest {
            lock_name: ADMIN_PRESENCE_LOCK.to_string(),
        })
        .await
        .map_err(|s| {
            format!(
                "master {grpc}: GetAdminLockStatus({ADMIN_PRESENCE_LOCK}) failed: {:?}: {}",
                s.code(),
                s.message()
            )
        })?
        .into_inner();
    Ok(resp
        .is_locked
        .then(|| format!("{} ({})", resp.client_name.trim(), resp.message.trim())))
}

/// What the settings ask of discovery: each list as configured, or `None`
/// where it is to be read from the master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// `cluster.master`.
    pub master: String,
    /// The configured filers (`None`: ask the master).
    pub filers: Option<Vec<String>>,
    /// The configured S3 gRPC addresses (`None`: ask the master).
    pub s3_grpc: Option<Vec<String>>,
}

/// The filers and gateways for the next pass: the configured lists, or the
/// master's membership for each list left empty while `cluster.master` is
/// set. An empty discovered list is an error naming the setting that fixes it.
pub async fn resolve(cluster: &Wanted, tls: Option<&ClientTls>) -> Result<Members, String> {
    let filers = match cluster.filers.clone() {
        Some(list) => list,
        None => {
            let raw = list_nodes(&cluster.master, FILER_TYPE, tls)
                .await
                .map_err(|e| format!("configuration key `cluster.master`: {e}"))?;
            let list = raw
                .iter()
                .map(|a| ServerAddress::parse(a).map(|a| a.grpc()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("master {}: filer {e}", cluster.master))?;
            if list.is_empty() {
                return Err(format!(
                    "master {} lists no filer; start one with -master={}, or set `cluster.filer`",
                    cluster.master, cluster.master
                ));
            }
            list
        }
    };
    let s3_grpc = match cluster.s3_grpc.clone() {
        Some(list) => list,
        None => {
            // Gateways register their gRPC address itself (`host:grpcPort`), and
            // only when they learned the masters from their filer.
            let list = list_nodes(&cluster.master, S3_TYPE, tls)
                .await
                .map_err(|e| format!("configuration key `cluster.master`: {e}"))?;
            if list.is_empty() {
                return Err(format!(
                    "master {} lists no S3 gateway (a gateway registers only when its filer \
                     knows the master); set `cluster.s3_grpc`",
                    cluster.master
                ));
            }
            list
        }
    };
    Ok(Members { filers, s3_grpc })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterSettings;

    #[tokio::test]
    async fn static_lists_need_no_master() {
        let c = ClusterSettings {
            filer: vec!["a:1".into(), "b:2".into()],
            ..ClusterSettings::default()
        };
        let m = resolve(&c.wanted(), None).await.unwrap();
        assert_eq!(m.filers, ["a:1", "b:2"]);
        assert_eq!(m.s3_grpc, [crate::config::DEFAULT_S3_GRPC]);
    }

    #[tokio::test]
    async fn unreachable_master_names_the_key() {
        let c = ClusterSettings {
            master: "127.0.0.1:1".into(),
            ..ClusterSettings::default()
        };
        let e = resolve(&c.wanted(), None).await.unwrap_err();
        assert!(
            e.contains("cluster.master") && e.contains("127.0.0.1:1"),
            "{e}"
        );
    }
}
