//! The volumes behind reclaimed space (docs/reclaimed-space.md): every
//! volume replica's size and garbage from the master's `VolumeList`, and the
//! master's `VacuumVolume`, which compacts one volume on its servers and
//! answers when done. The master's view trails the volume servers by up to
//! one heartbeat (about 5 s on 4.48, observed).

use std::time::Duration;

use crate::engine::reclaim::VolumeUsage;
use crate::pb::master_pb::{VacuumVolumeRequest, VolumeListRequest};
use crate::seaweed::discovery::{MasterError, connect_master_for};
use crate::seaweed::tls::ClientTls;

/// Deadline of one `VolumeList`: the whole topology in one answer.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Every volume replica the master knows, on every server and disk.
pub async fn list_volumes(
    master: &str,
    tls: Option<&ClientTls>,
) -> Result<Vec<VolumeUsage>, MasterError> {
    let (grpc, mut client) = connect_master_for(master, tls, LIST_TIMEOUT).await?;
    let topo = client
        .volume_list(VolumeListRequest {})
        .await
        .map_err(|s| MasterError::call(&grpc, "VolumeList", None, s))?
        .into_inner()
        .topology_info
        .unwrap_or_default();
    let mut out = Vec::new();
    for dc in &topo.data_center_infos {
        for rack in &dc.rack_infos {
            for node in &rack.data_node_infos {
                let server = if node.address.is_empty() {
                    node.id.clone()
                } else {
                    node.address.clone()
                };
                for disk in node.disk_infos.values() {
                    out.extend(disk.volume_infos.iter().map(|v| VolumeUsage {
                        id: v.id,
                        collection: v.collection.clone(),
                        server: server.clone(),
                        size: v.size,
                        garbage: v.deleted_byte_count,
                        read_only: v.read_only,
                        ttl: v.ttl,
                    }));
                }
            }
        }
    }
    Ok(out)
}

/// Asks the master to vacuum volume `id` if its garbage ratio is at least
/// `threshold`; returns when the master is done (bounded by `timeout`).
pub async fn vacuum_volume(
    master: &str,
    tls: Option<&ClientTls>,
    id: u32,
    threshold: f64,
    timeout: Duration,
) -> Result<(), MasterError> {
    let (grpc, mut client) = connect_master_for(master, tls, timeout).await?;
    client
        .vacuum_volume(VacuumVolumeRequest {
            garbage_threshold: threshold as f32,
            volume_id: id,
            collection: String::new(),
        })
        .await
        .map_err(|s| MasterError::call(&grpc, "VacuumVolume", Some(id.to_string()), s))?;
    Ok(())
}
