//! The volumes behind reclaimed space (docs/reclaimed-space.md): every
//! volume replica's size and garbage, and every server's erasure-coded
//! shards, from the master's `VolumeList`, and the
//! master's `VacuumVolume`, which compacts one volume on its servers and
//! answers when done. The master's view trails the volume servers by up to
//! one heartbeat (about 5 s on 4.48, observed).

use std::time::Duration;

use crate::engine::audit::ec_volume_ttl;
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
                        erasure_coded: false,
                        ec_ttl: None,
                        remote: !v.remote_storage_name.is_empty(),
                    }));
                    // Erasure-coded shards: 4.48 reports no garbage for them, and no
                    // vacuum compacts them (docs/reclaimed-space.md#erasure-coded).
                    out.extend(disk.ec_shard_infos.iter().map(|v| {
                        VolumeUsage {
                            id: v.id,
                            collection: v.collection.clone(),
                            server: server.clone(),
                            size: v
                                .shard_sizes
                                .iter()
                                .map(|s| u64::try_from(*s).unwrap_or(0))
                                .sum(),
                            garbage: 0,
                            read_only: true,
                            ttl: 0,
                            erasure_coded: true,
                            remote: false,
                            ec_ttl: ec_volume_ttl(v.expire_at_sec, v.encode_ts_ns)
                                .map(|ttl| (ttl, v.expire_at_sec)),
                        }
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
    // The channel's own deadline is later, so the wait ends here, with the
    // error that names the setting.
    let channel_deadline = timeout + Duration::from_secs(5);
    let (grpc, mut client) = connect_master_for(master, tls, channel_deadline).await?;
    let call = client.vacuum_volume(VacuumVolumeRequest {
        garbage_threshold: threshold as f32,
        volume_id: id,
        collection: String::new(),
    });
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer
            .map(drop)
            .map_err(|s| MasterError::call(&grpc, "VacuumVolume", Some(id.to_string()), s)),
        Err(_) => Err(MasterError::VacuumTimeout {
            addr: grpc,
            id,
            timeout: humantime::format_duration(timeout).to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seaweed::discovery::tests::{FakeMaster, serve_master};

    /// `reclaim.vacuum_timeout` bounds a vacuum the master takes too long
    /// with (a large volume compacting): the call fails at the deadline,
    /// naming the call and the volume, rather than holding the pass's end.
    #[tokio::test]
    async fn a_vacuum_past_reclaim_vacuum_timeout_fails_naming_the_volume() {
        let slow = Some(Duration::from_secs(60));
        let master = serve_master(FakeMaster(Default::default(), slow, String::new())).await;
        let started = std::time::Instant::now();
        let e = vacuum_volume(&master, None, 7, 0.1, Duration::from_millis(300))
            .await
            .expect_err("a vacuum past its timeout fails");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert!(took >= Duration::from_millis(300), "took {took:?}");
        let text = e.to_string();
        assert!(
            text.contains("VacuumVolume(7) not done within reclaim.vacuum_timeout (300ms)"),
            "{text}"
        );
        // Within its timeout it succeeds.
        let quick = serve_master(FakeMaster(Default::default(), None, String::new())).await;
        vacuum_volume(&quick, None, 7, 0.1, Duration::from_secs(5))
            .await
            .expect("a vacuum the master answers succeeds");
    }
}
