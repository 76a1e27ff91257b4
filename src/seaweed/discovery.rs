//! Which filers and S3 gateways a pass talks to: the configured lists, or the
//! master's cluster membership (`ListClusterNodes`) when only `cluster.master`
//! is set (docs/grpc.md#discovery). Re-read at the start of every pass.

use std::time::Duration;

use crate::config::ClusterSettings;
use crate::pb::master_pb::ListClusterNodesRequest;
use crate::pb::master_pb::seaweed_client::SeaweedClient;
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint, MAX_MESSAGE_BYTES};
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

/// The gRPC address of a server address as SeaweedFS writes it
/// (`host:httpPort.grpcPort`, or `host:httpPort` with the gRPC port at
/// +10000), as `weed`'s own clients convert it (docs/grpc.md#discovery).
pub fn grpc_of_server_address(addr: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!(
            "`{addr}` is not a SeaweedFS server address ({why}); expected HOST:PORT or HOST:HTTPPORT.GRPCPORT"
        )
    };
    let (host, ports) = addr.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port: u16 = match ports.rsplit_once('.') {
        Some((_, grpc)) => grpc.parse().map_err(|_| bad("gRPC port is not a number"))?,
        None => {
            let http: u16 = ports.parse().map_err(|_| bad("port is not a number"))?;
            http.checked_add(10_000)
                .ok_or_else(|| bad("HTTP port + 10000 is past 65535"))?
        }
    };
    Ok(format!("{host}:{port}"))
}

/// The master's gRPC address from `cluster.master`: `HOST:GRPCPORT` as
/// given, or the gRPC half of `HOST:HTTPPORT.GRPCPORT`.
pub fn master_grpc_address(master: &str) -> Result<String, String> {
    let (_, ports) = master
        .rsplit_once(':')
        .ok_or_else(|| format!("`{master}` has no port; expected HOST:GRPCPORT"))?;
    if ports.contains('.') {
        grpc_of_server_address(master)
    } else {
        Ok(master.to_string())
    }
}

/// A client of the master at `master` (its gRPC address, and the client),
/// with the bounded connect and call deadlines of discovery.
async fn connect_master(
    master: &str,
    tls: Option<&ClientTls>,
) -> Result<(String, SeaweedClient<tonic::transport::Channel>), String> {
    let grpc = master_grpc_address(master)?;
    let endpoint = GrpcEndpoint::new(
        &grpc,
        &EndpointOptions::seaweed()
            .connect_timeout(CALL_TIMEOUT)
            .call_timeout(CALL_TIMEOUT)
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

/// The registered nodes of `client_type`, as the master lists them (raw
/// addresses, sorted and de-duplicated).
/// `tls`: the cluster's client TLS (a `security.toml` cluster secures the
/// master's gRPC port like the others; docs/tls.md).
pub async fn list_nodes(
    master: &str,
    client_type: &str,
    tls: Option<&ClientTls>,
) -> Result<Vec<String>, String> {
    let (grpc, mut client) = connect_master(master, tls).await?;
    let resp = client
        .list_cluster_nodes(ListClusterNodesRequest {
            client_type: client_type.to_string(),
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

/// The filers and gateways for the next pass: the configured lists, or the
/// master's membership for each list left empty while `cluster.master` is
/// set. An empty discovered list is an error naming the setting that fixes it.
pub async fn resolve(
    cluster: &ClusterSettings,
    tls: Option<&ClientTls>,
) -> Result<Members, String> {
    let filers = match cluster.static_filers() {
        Some(list) => list,
        None => {
            let raw = list_nodes(&cluster.master, FILER_TYPE, tls)
                .await
                .map_err(|e| format!("configuration key `cluster.master`: {e}"))?;
            let list = raw
                .iter()
                .map(|a| grpc_of_server_address(a))
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
    let s3_grpc = match cluster.static_s3_grpc() {
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

    #[test]
    fn server_addresses_convert_like_weed() {
        assert_eq!(
            grpc_of_server_address("10.0.0.1:8888.18889").unwrap(),
            "10.0.0.1:18889"
        );
        assert_eq!(grpc_of_server_address("filer:8888").unwrap(), "filer:18888");
        assert_eq!(
            grpc_of_server_address("[::1]:8888.9999").unwrap(),
            "[::1]:9999"
        );
        for bad in ["filer", ":8888", "h:x", "h:60000", "h:1.x"] {
            let e = grpc_of_server_address(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("HOST:PORT"), "{e}");
        }
    }

    #[test]
    fn master_address_is_grpc_as_given_or_the_grpc_half() {
        assert_eq!(master_grpc_address("m:19333").unwrap(), "m:19333");
        assert_eq!(master_grpc_address("m:9333.19333").unwrap(), "m:19333");
        assert!(
            master_grpc_address("m")
                .unwrap_err()
                .contains("HOST:GRPCPORT")
        );
    }

    #[tokio::test]
    async fn static_lists_need_no_master() {
        let c = ClusterSettings {
            filer: vec!["a:1".into(), "b:2".into()],
            ..ClusterSettings::default()
        };
        let m = resolve(&c, None).await.unwrap();
        assert_eq!(m.filers, ["a:1", "b:2"]);
        assert_eq!(m.s3_grpc, [crate::config::DEFAULT_S3_GRPC]);
    }

    #[tokio::test]
    async fn unreachable_master_names_the_key() {
        let c = ClusterSettings {
            master: "127.0.0.1:1".into(),
            ..ClusterSettings::default()
        };
        let e = resolve(&c, None).await.unwrap_err();
        assert!(
            e.contains("cluster.master") && e.contains("127.0.0.1:1"),
            "{e}"
        );
    }
}
