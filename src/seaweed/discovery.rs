//! Which filers and S3 gateways a pass talks to: the configured lists, or the
//! master's cluster membership (`ListClusterNodes`) when only `cluster.master`
//! is set (docs/grpc.md#discovery). Re-read at the start of every pass.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::pb::master_pb::ListClusterNodesRequest;
use crate::pb::master_pb::seaweed_client::SeaweedClient;
use crate::seaweed::endpoint::{
    AddressError, EndpointError, EndpointOptions, GrpcEndpoint, MAX_MESSAGE_BYTES, ServerAddress,
};
use crate::seaweed::filer::FilerError;
use crate::seaweed::tls::ClientTls;

/// `client_type` of filers in the master's membership.
pub const FILER_TYPE: &str = "filer";
/// `client_type` of S3 gateways in the master's membership.
pub const S3_TYPE: &str = "s3";

/// Deadline of one membership call: it is a small in-memory answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the master (or finding its address) failed. The text names
/// the master and the call; logs, reports and operators read it.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// The master's address is no SeaweedFS server address.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The master's gRPC address cannot be made an endpoint.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// No connection to the master could be opened.
    #[error("master {addr} not reachable: {source}")]
    Unreachable {
        /// The master's gRPC address.
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The master answered a call with an error, or the call did not
    /// complete. `op` is the RPC, `arg` what it was asked about, if shown.
    #[error(
        "master {addr}: {op}{} failed: {:?}: {}",
        in_parens(.arg.as_deref()),
        .status.code(),
        .status.message()
    )]
    Call {
        /// The master's gRPC address.
        addr: String,
        op: &'static str,
        /// Its argument as the message shows it (`ListClusterNodes(filer)`).
        arg: Option<String>,
        #[source]
        status: tonic::Status,
    },
    /// A vacuum outlasted `reclaim.vacuum_timeout`. The master goes on with
    /// it; only the wait for its answer ends.
    #[error(
        "master {addr}: VacuumVolume({id}) not done within reclaim.vacuum_timeout ({timeout}); \
         the master may still be compacting it: raise reclaim.vacuum_timeout, or leave such \
         volumes to the master's own vacuum"
    )]
    VacuumTimeout {
        /// The master's gRPC address.
        addr: String,
        id: u32,
        /// The timeout, as humantime writes it.
        timeout: String,
    },
    /// Asking the filer which masters it knows failed.
    #[error(transparent)]
    Filer(#[from] FilerError),
    /// The filer knows no master, and none is configured.
    #[error("the filer names no master; set `cluster.master`")]
    NoneNamed,
    /// The filer names a master by an address that cannot be used.
    #[error("master {named} (from the filer): {source}")]
    FromFiler {
        /// The address as the filer gave it.
        named: String,
        #[source]
        source: AddressError,
    },
}

impl MasterError {
    /// A failed `op` call to the master at `addr`.
    pub(crate) fn call(
        addr: &str,
        op: &'static str,
        arg: Option<String>,
        status: tonic::Status,
    ) -> MasterError {
        MasterError::Call {
            addr: addr.to_string(),
            op,
            arg,
            status,
        }
    }
}

/// `(arg)`, or nothing without one.
fn in_parens(arg: Option<&str>) -> String {
    arg.map(|a| format!("({a})")).unwrap_or_default()
}

/// Why the filers and gateways of a pass could not be read from the master.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Asking the master (`cluster.master`) failed.
    #[error("configuration key `cluster.master`: {0}")]
    Master(#[source] MasterError),
    /// The master lists a filer by an address that cannot be used.
    #[error("master {master}: filer {source}")]
    BadFiler {
        master: String,
        #[source]
        source: AddressError,
    },
    /// The master lists no filer.
    #[error(
        "master {master} lists no filer; start one with -master={master}, or set `cluster.filer`"
    )]
    NoFiler { master: String },
    /// The master lists no S3 gateway.
    #[error(
        "master {master} lists no S3 gateway (a gateway registers only when its filer knows the \
         master); set `cluster.s3_grpc`"
    )]
    NoGateway { master: String },
}

/// The servers one pass uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    /// Filer gRPC addresses, in preference order.
    pub filers: Vec<String>,
    /// S3 gRPC addresses (`LifecycleDelete`).
    pub s3_grpc: Vec<String>,
}

/// The masters of `configured` (`cluster.master`): one, or several
/// separated by commas, as weed's `-master` takes them.
pub fn masters(configured: &str) -> Vec<String> {
    configured
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .collect()
}

/// A client of the leading master of `master` (one address or several,
/// [`masters`]): the first that answers, or the leader it names
/// (docs/grpc.md#several-masters). Returns its gRPC address and the client,
/// with the bounded connect deadline of discovery and calls bounded by
/// `call_timeout` (discovery's [`CALL_TIMEOUT`]; a vacuum takes as long as
/// rewriting a volume). None answering: the first one's error.
pub(crate) async fn connect_master_for(
    master: &str,
    tls: Option<&ClientTls>,
    call_timeout: Duration,
) -> Result<(String, SeaweedClient<tonic::transport::Channel>), MasterError> {
    let mut first_error = None;
    for m in masters(master) {
        match connect_one(&m, tls, call_timeout).await {
            Ok((grpc, client)) => return Ok(to_leader(grpc, client, tls, call_timeout).await),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or(MasterError::NoneNamed))
}

/// The leader `client` (of the master at `grpc`) names, connected; that
/// master itself when it names none, itself, or one we cannot reach (it then
/// answers what it can, as a single master does). Followers answer
/// membership from their own, empty, view and refuse the volume calls.
async fn to_leader(
    grpc: String,
    mut client: SeaweedClient<tonic::transport::Channel>,
    tls: Option<&ClientTls>,
    call_timeout: Duration,
) -> (String, SeaweedClient<tonic::transport::Channel>) {
    let named = client
        .get_master_configuration(crate::pb::master_pb::GetMasterConfigurationRequest {})
        .await
        .map(|r| r.into_inner().leader)
        .unwrap_or_default();
    let Ok(leader) = ServerAddress::parse(&named).map(|a| a.grpc()) else {
        return (grpc, client);
    };
    if leader == grpc {
        return (grpc, client);
    }
    match connect_one(&leader, tls, call_timeout).await {
        Ok(lead) => lead,
        Err(_) => (grpc, client),
    }
}

/// A client of the one master at `master` (a gRPC address).
async fn connect_one(
    master: &str,
    tls: Option<&ClientTls>,
    call_timeout: Duration,
) -> Result<(String, SeaweedClient<tonic::transport::Channel>), MasterError> {
    let grpc = ServerAddress::grpc_as_given(master)?;
    let endpoint = GrpcEndpoint::new(
        &grpc,
        &EndpointOptions::seaweed()
            .connect_timeout(CALL_TIMEOUT)
            .call_timeout(call_timeout)
            .tls(tls.cloned()),
    )?;
    let channel = endpoint
        .connect()
        .await
        .map_err(|source| MasterError::Unreachable {
            addr: grpc.clone(),
            source,
        })?;
    let client = SeaweedClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES);
    Ok((grpc, client))
}

/// The master's gRPC address: `configured` (`cluster.master`) when set,
/// else the first master `filer` reports.
pub async fn master_of(
    filer: &crate::seaweed::filer::FilerClient,
    configured: &str,
) -> Result<String, MasterError> {
    if !configured.trim().is_empty() {
        return Ok(configured.trim().to_string());
    }
    let masters = filer.configuration().await?.masters;
    reported_master(masters.first().ok_or(MasterError::NoneNamed)?)
}

/// The gRPC address of a master as a filer names it (`host:port`, gRPC on
/// port + 10000, or `host:port.grpcPort`); `cluster.master` is one already.
pub fn reported_master(named: &str) -> Result<String, MasterError> {
    ServerAddress::parse(named)
        .map(|a| a.grpc())
        .map_err(|source| MasterError::FromFiler {
            named: named.to_string(),
            source,
        })
}

/// The registered nodes of `client_type`, as the master lists them (raw
/// addresses, sorted and de-duplicated).
/// `tls`: the cluster's client TLS (a `security.toml` cluster secures the
/// master's gRPC port like the others; docs/tls.md).
pub async fn list_nodes(
    master: &str,
    client_type: &str,
    tls: Option<&ClientTls>,
) -> Result<Vec<String>, MasterError> {
    let nodes = cluster_nodes(master, client_type, "", tls).await?;
    Ok(nodes.into_keys().collect())
}

/// When the master registered each filer of `filer_group` (raw address →
/// `created_at_ns`, the master's clock). A filer process registers when it
/// starts, so a new time for an address is a restart; one it had not lost
/// the connection of keeps its time (docs/meta-log.md#filer-restart).
///
/// Asks `configured` (`cluster.master`) and then each master the filer
/// `reported`, until one lists a filer: filers keep their connection to the
/// leading master only, and another master answers from its own, empty,
/// membership. Every master listing none: an empty map. None answering: the
/// first error.
pub async fn filer_registrations(
    configured: &str,
    reported: &[String],
    filer_group: &str,
    tls: Option<&ClientTls>,
) -> Result<BTreeMap<String, i64>, MasterError> {
    let mut candidates = Vec::new();
    if !configured.trim().is_empty() {
        candidates.push(Ok(configured.trim().to_string()));
    }
    candidates.extend(reported.iter().map(|named| reported_master(named)));
    let mut first_error = None;
    let mut listed_none = false;
    for master in candidates {
        let answer = match master {
            Ok(m) => cluster_nodes(&m, FILER_TYPE, filer_group, tls).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(nodes) if !nodes.is_empty() => return Ok(nodes),
            Ok(_) => listed_none = true,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if listed_none {
        return Ok(BTreeMap::new());
    }
    Err(first_error.unwrap_or(MasterError::NoneNamed))
}

/// The registered nodes of `client_type` in `filer_group` (filers of another
/// group are another file system that shares the masters and volumes): raw
/// address → registration time.
pub(crate) async fn cluster_nodes(
    master: &str,
    client_type: &str,
    filer_group: &str,
    tls: Option<&ClientTls>,
) -> Result<BTreeMap<String, i64>, MasterError> {
    let (grpc, mut client) = connect_master_for(master, tls, CALL_TIMEOUT).await?;
    let resp = client
        .list_cluster_nodes(ListClusterNodesRequest {
            client_type: client_type.to_string(),
            filer_group: filer_group.to_string(),
            ..Default::default()
        })
        .await
        .map_err(|s| {
            MasterError::call(&grpc, "ListClusterNodes", Some(client_type.to_string()), s)
        })?;
    let nodes = resp.into_inner().cluster_nodes.into_iter();
    Ok(nodes
        .filter(|n| !n.address.is_empty())
        .map(|n| (n.address, n.created_at_ns))
        .collect())
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
) -> Result<Option<String>, MasterError> {
    let (grpc, mut client) = connect_master_for(master, tls, CALL_TIMEOUT).await?;
    let resp = client
        .get_admin_lock_status(crate::pb::master_pb::GetAdminLockStatusRequest {
            lock_name: ADMIN_PRESENCE_LOCK.to_string(),
        })
        .await
        .map_err(|s| {
            MasterError::call(
                &grpc,
                "GetAdminLockStatus",
                Some(ADMIN_PRESENCE_LOCK.to_string()),
                s,
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
pub async fn resolve(cluster: &Wanted, tls: Option<&ClientTls>) -> Result<Members, DiscoveryError> {
    let filers = match cluster.filers.clone() {
        Some(list) => list,
        None => {
            let raw = list_nodes(&cluster.master, FILER_TYPE, tls)
                .await
                .map_err(DiscoveryError::Master)?;
            let list = raw
                .iter()
                .map(|a| ServerAddress::parse(a).map(|a| a.grpc()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|source| DiscoveryError::BadFiler {
                    master: cluster.master.clone(),
                    source,
                })?;
            if list.is_empty() {
                return Err(DiscoveryError::NoFiler {
                    master: cluster.master.clone(),
                });
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
                .map_err(DiscoveryError::Master)?;
            if list.is_empty() {
                return Err(DiscoveryError::NoGateway {
                    master: cluster.master.clone(),
                });
            }
            list
        }
    };
    Ok(Members { filers, s3_grpc })
}

#[cfg(test)]
pub(crate) mod tests {
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

    /// The texts are the messages these calls printed before their errors
    /// were typed.
    #[test]
    fn messages_keep_their_old_wording() {
        let status = || tonic::Status::new(tonic::Code::Unavailable, "gone");
        assert_eq!(
            MasterError::call("m:19333", "VolumeList", None, status()).to_string(),
            "master m:19333: VolumeList failed: Unavailable: gone"
        );
        assert_eq!(
            MasterError::call("m:19333", "VacuumVolume", Some("7".into()), status()).to_string(),
            "master m:19333: VacuumVolume(7) failed: Unavailable: gone"
        );
        assert_eq!(
            DiscoveryError::NoFiler {
                master: "m:1".into()
            }
            .to_string(),
            "master m:1 lists no filer; start one with -master=m:1, or set `cluster.filer`"
        );
        assert_eq!(
            DiscoveryError::NoGateway {
                master: "m:1".into()
            }
            .to_string(),
            "master m:1 lists no S3 gateway (a gateway registers only when its filer knows the \
             master); set `cluster.s3_grpc`"
        );
        assert_eq!(
            DiscoveryError::Master(MasterError::NoneNamed).to_string(),
            "configuration key `cluster.master`: the filer names no master; set `cluster.master`"
        );
    }

    /// A master that lists the filers it was given (none for a master the
    /// filers do not keep their connection to), whose `VacuumVolume`
    /// answers after the time given, else at once, and which names the
    /// leader given (`GetMasterConfiguration`; empty: none).
    pub(crate) struct FakeMaster(pub BTreeMap<String, i64>, pub Option<Duration>, pub String);

    #[tonic::async_trait]
    impl crate::pb::master_pb::seaweed_server::Seaweed for FakeMaster {
        async fn list_cluster_nodes(
            &self,
            _: tonic::Request<ListClusterNodesRequest>,
        ) -> Result<tonic::Response<crate::pb::master_pb::ListClusterNodesResponse>, tonic::Status>
        {
            use crate::pb::master_pb::list_cluster_nodes_response::ClusterNode;
            let nodes = self.0.iter().map(|(a, t)| ClusterNode {
                address: a.clone(),
                created_at_ns: *t,
                ..Default::default()
            });
            Ok(tonic::Response::new(
                crate::pb::master_pb::ListClusterNodesResponse {
                    cluster_nodes: nodes.collect(),
                },
            ))
        }
        async fn get_admin_lock_status(
            &self,
            _: tonic::Request<crate::pb::master_pb::GetAdminLockStatusRequest>,
        ) -> Result<tonic::Response<crate::pb::master_pb::GetAdminLockStatusResponse>, tonic::Status>
        {
            Err(tonic::Status::unimplemented("fake"))
        }
        async fn volume_list(
            &self,
            _: tonic::Request<crate::pb::master_pb::VolumeListRequest>,
        ) -> Result<tonic::Response<crate::pb::master_pb::VolumeListResponse>, tonic::Status>
        {
            Err(tonic::Status::unimplemented("fake"))
        }
        async fn vacuum_volume(
            &self,
            _: tonic::Request<crate::pb::master_pb::VacuumVolumeRequest>,
        ) -> Result<tonic::Response<crate::pb::master_pb::VacuumVolumeResponse>, tonic::Status>
        {
            tokio::time::sleep(self.1.unwrap_or_default()).await;
            Ok(tonic::Response::new(Default::default()))
        }
        async fn get_master_configuration(
            &self,
            _: tonic::Request<crate::pb::master_pb::GetMasterConfigurationRequest>,
        ) -> Result<
            tonic::Response<crate::pb::master_pb::GetMasterConfigurationResponse>,
            tonic::Status,
        > {
            Ok(tonic::Response::new(
                crate::pb::master_pb::GetMasterConfigurationResponse {
                    leader: self.2.clone(),
                },
            ))
        }
    }

    /// Serves `m` on loopback; the address as a filer names a master
    /// (`host:httpPort.grpcPort`).
    pub(crate) async fn serve_master(m: FakeMaster) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(crate::pb::master_pb::seaweed_server::SeaweedServer::new(m))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        format!("127.0.0.1:9333.{port}")
    }

    /// `cluster.master = "a:9333,b:9333"` (weed's `-master` form, as an HA
    /// cluster has it) was refused, and a follower given alone listed no
    /// filer: the masters are tried in order, past one that does not answer,
    /// and the leader the first answering one names is asked.
    #[tokio::test]
    async fn several_masters_were_refused_and_a_follower_listed_no_filer() {
        let filers = BTreeMap::from([("127.0.0.1:8888.18888".to_string(), 7)]);
        let lead = serve_master(FakeMaster(filers, None, String::new())).await;
        let follower = serve_master(FakeMaster(BTreeMap::new(), None, lead.clone())).await;
        let list = format!("127.0.0.1:1, {follower}");
        let nodes = list_nodes(&list, FILER_TYPE, None).await.unwrap();
        assert_eq!(nodes, ["127.0.0.1:8888.18888"]);
        // A leader that cannot be reached leaves the follower's own answer.
        let astray = serve_master(FakeMaster(BTreeMap::new(), None, "127.0.0.1:9.1".into())).await;
        assert!(
            list_nodes(&astray, FILER_TYPE, None)
                .await
                .unwrap()
                .is_empty()
        );
        // None answering: the first one's error, naming it.
        let e = list_nodes("127.0.0.1:1,127.0.0.1:2", FILER_TYPE, None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    }

    /// With several masters, the filer named a follower first: it answers
    /// from its own membership, which lists no filer (filers keep their
    /// connection to the leader), so a filer's restart went unseen.
    #[tokio::test]
    async fn a_follower_master_listed_no_filer_and_hid_a_restart() {
        let leader = BTreeMap::from([("127.0.0.1:8888.18888".to_string(), 42)]);
        let follower = serve_master(FakeMaster(BTreeMap::new(), None, String::new())).await;
        let lead = serve_master(FakeMaster(leader.clone(), None, String::new())).await;
        let dead = "127.0.0.1:1.1".to_string();
        let named = [dead.clone(), follower.clone(), lead];
        assert_eq!(
            filer_registrations("", &named, "", None).await.unwrap(),
            leader
        );
        // `cluster.master` is asked first, then the filer's masters.
        let configured = named[2].rsplit_once('.').unwrap().1;
        let configured = format!("127.0.0.1:{configured}");
        let only_follower = [follower.clone()];
        assert_eq!(
            filer_registrations(&configured, &only_follower, "", None)
                .await
                .unwrap(),
            leader
        );
        // Only followers: nothing to compare, not an error.
        assert!(
            filer_registrations("", &only_follower, "", None)
                .await
                .unwrap()
                .is_empty()
        );
        // Nothing answers: the first error.
        let e = filer_registrations("", &[dead], "", None)
            .await
            .unwrap_err();
        assert!(matches!(e, MasterError::Unreachable { .. }), "{e:?}");
        assert!(matches!(
            filer_registrations("", &[], "", None).await.unwrap_err(),
            MasterError::NoneNamed
        ));
    }

    #[tokio::test]
    async fn unreachable_master_names_the_key() {
        let c = ClusterSettings {
            master: "127.0.0.1:1".into(),
            ..ClusterSettings::default()
        };
        let e = resolve(&c.wanted(), None).await.unwrap_err();
        assert!(
            matches!(e, DiscoveryError::Master(MasterError::Unreachable { .. })),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "configuration key `cluster.master`: master 127.0.0.1:1 not reachable: "
            ),
            "{text}"
        );
    }
}
