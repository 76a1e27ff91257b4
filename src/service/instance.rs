//! This `serve`'s instance file under `<cursor.dir>/instances/` and the calls
//! that keep it fresh: join (stand by while another live `serve` runs any of
//! our shards), renew (take over once it is gone), leave (a clean shutdown
//! removes the file, so a restart need not wait). The decisions are
//! [`crate::engine::instances`]; docs/serve-instances.md says why.

use std::sync::Mutex;
use std::time::Duration;

use crate::clock::wall_ns;
use crate::engine::instances::{self, InstanceRecord, Role};
use crate::seaweed::controls::{ControlStore, ControlsError};

/// This host's name, as instance files record it: `/etc/hostname`, else
/// `$HOSTNAME`, else `localhost`.
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether `pid` on `host` is known to be gone: only a process of this host
/// can be checked (`/proc`), anything else is taken as alive until its file
/// goes stale. A zombie (killed, not yet reaped by its parent) is gone.
pub fn process_gone(host: &str, pid: u32) -> bool {
    if !cfg!(target_os = "linux") || host != host_name() || pid == std::process::id() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S …`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| matches!(state, 'Z' | 'X')),
    }
}

/// This process's instance file.
pub struct Instance {
    store: ControlStore,
    own: Mutex<InstanceRecord>,
    ttl_ns: i64,
}

impl Instance {
    /// Writes this process's file, standing by, then decides: it becomes
    /// active when no live active `serve` runs any of `shards`.
    pub async fn join(
        store: ControlStore,
        shards: &[u8],
        admin: &str,
        ttl: Duration,
    ) -> Result<(Instance, Role), ControlsError> {
        let own = InstanceRecord::new(&host_name(), std::process::id(), shards, wall_ns(), admin);
        let me = Instance {
            store,
            own: Mutex::new(own),
            ttl_ns: i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX),
        };
        let role = me.renew().await?;
        Ok((me, role))
    }

    fn own(&self) -> InstanceRecord {
        self.own.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_own(&self, r: InstanceRecord) {
        *self.own.lock().unwrap_or_else(|p| p.into_inner()) = r;
    }

    /// Rewrites the file with a fresh time and decides again. Standing by, a
    /// free way becomes active only after writing `active` and reading every
    /// file again: of two that did so at once, the later one yields.
    pub async fn renew(&self) -> Result<Role, ControlsError> {
        let mut own = self.own();
        own.renewed_ns = wall_ns();
        self.store.put_instance(&own).await?;
        let mut role = self.decide(&own).await?;
        if !own.active && role == Role::Active {
            own.active = true;
            self.store.put_instance(&own).await?;
            role = self.decide(&own).await?;
        }
        if own.active && role != Role::Active {
            own.active = false;
            self.store.put_instance(&own).await?;
        }
        self.set_own(own);
        Ok(role)
    }

    async fn decide(&self, own: &InstanceRecord) -> Result<Role, ControlsError> {
        let (others, bad) = self.store.instances().await?;
        for b in bad {
            tracing::warn!(
                file = b,
                "instance file ignored; remove it if no serve writes it"
            );
        }
        Ok(instances::decide(
            own,
            &others,
            wall_ns(),
            self.ttl_ns,
            process_gone,
        ))
    }

    /// Removes the file (the next `serve` takes over at once).
    pub async fn leave(&self) {
        let id = self.own().id;
        if let Err(e) = self.store.remove_instance(&id).await {
            tracing::warn!(error = %e, "instance file not removed; the next serve waits for it to go stale");
        }
    }
}

/// The live `serve` processes running any of `shards` on `store`'s cursor
/// dir, named for a `run-once` that would race them.
pub async fn live_holders(
    store: &ControlStore,
    shards: &[u8],
    ttl: Duration,
) -> Result<Vec<InstanceRecord>, ControlsError> {
    let (others, _) = store.instances().await?;
    let ttl_ns = i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX);
    Ok(
        instances::holders(shards, &others, wall_ns(), ttl_ns, process_gone)
            .into_iter()
            .cloned()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_killed_unreaped_serve_was_taken_for_alive() {
        let host = host_name();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(!process_gone(&host, child.id()), "a running process");
        child.kill().unwrap();
        // Killed but not reaped yet: a zombie, whose /proc entry is still there.
        let zombie = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
                .is_ok_and(|s| s.contains(") Z"))
        });
        assert!(zombie, "the killed child never showed as a zombie");
        assert!(process_gone(&host, child.id()), "a zombie is gone");
        child.wait().unwrap();
        assert!(process_gone(&host, child.id()), "a reaped process is gone");
        assert!(
            !process_gone("another-host", child.id()),
            "another host's: unknown"
        );
        assert!(!process_gone(&host, std::process::id()), "this process");
    }
}
