//! Several `serve` processes on one cursor dir (docs/serve-instances.md): the
//! instance file each keeps fresh under `<cursor.dir>/instances/`, and the pure
//! decisions read from those files: whether this instance runs passes or stands
//! by, and which live instance a `run-once` would collide with.

use serde::{Deserialize, Serialize};

use super::Nanos;

/// Format version of [`InstanceRecord`]; a file of another version is ignored
/// with a warning by the caller, never taken for a live holder.
pub const INSTANCE_VERSION: u32 = 1;

/// One `serve` process, as its instance file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// [`INSTANCE_VERSION`].
    pub version: u32,
    /// `<host>-<pid>-<started_ns>`; the file is `<id>.json`.
    pub id: String,
    pub host: String,
    pub pid: u32,
    /// The shards it runs (`pass.shards`).
    pub shards: Vec<u8>,
    pub started_ns: Nanos,
    /// When it last rewrote the file, by its own clock.
    pub renewed_ns: Nanos,
    /// It runs passes (false: it stands by).
    pub active: bool,
    /// Its admin API (`service.admin_listen`), named in messages so an
    /// operator can reach it.
    #[serde(default)]
    pub admin: String,
}

impl InstanceRecord {
    /// This process's record, standing by until [`decide`] says otherwise.
    pub fn new(host: &str, pid: u32, shards: &[u8], now: Nanos, admin: &str) -> InstanceRecord {
        InstanceRecord {
            version: INSTANCE_VERSION,
            id: format!("{host}-{pid}-{now}"),
            host: host.to_string(),
            pid,
            shards: shards.to_vec(),
            started_ns: now,
            renewed_ns: now,
            active: false,
            admin: admin.to_string(),
        }
    }

    /// The file content: pretty JSON and a newline.
    pub fn to_json(&self) -> Vec<u8> {
        super::safety::record_json(self)
    }

    /// Parses an instance file; the error says what is wrong with it.
    pub fn decode(content: &[u8]) -> Result<InstanceRecord, String> {
        let r: InstanceRecord = serde_json::from_slice(content).map_err(|e| e.to_string())?;
        if r.version != INSTANCE_VERSION {
            return Err(format!(
                "version {} (this build reads {INSTANCE_VERSION})",
                r.version
            ));
        }
        Ok(r)
    }

    /// The shards both run, in order.
    pub fn shared(&self, shards: &[u8]) -> Vec<u8> {
        self.shards
            .iter()
            .copied()
            .filter(|s| shards.contains(s))
            .collect()
    }

    /// One line naming it and what it runs of `shards`, for an operator.
    pub fn describe(&self, shards: &[u8]) -> String {
        let admin = if self.admin.is_empty() {
            String::new()
        } else {
            format!(", admin API {}", self.admin)
        };
        format!(
            "serve {} (host {}, pid {}{admin}) runs shards {}",
            self.id,
            self.host,
            self.pid,
            super::shard::shards_label(&self.shared(shards))
        )
    }

    /// Whether `self` goes first when two became active at once: the one
    /// started earlier, then the smaller id.
    fn precedes(&self, other: &InstanceRecord) -> bool {
        (self.started_ns, &self.id) < (other.started_ns, &other.id)
    }
}

/// Whether `r` is alive at `now`: renewed within `ttl_ns` by the wall clock,
/// and not a process of this host that no longer exists (`gone(host, pid)`:
/// a restart after a crash need not wait out the ttl).
pub fn is_live(
    r: &InstanceRecord,
    now: Nanos,
    ttl_ns: i64,
    gone: impl Fn(&str, u32) -> bool,
) -> bool {
    r.renewed_ns.saturating_add(ttl_ns) >= now && !gone(&r.host, r.pid)
}

/// What this instance does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Run passes.
    Active,
    /// Stand by: `holder` runs passes on some of our shards
    /// ([`InstanceRecord::shared`] says which).
    Standby { holder: InstanceRecord },
}

/// Whether `own` runs passes, given the other instance files (any may be
/// stale or `own`'s own). A live active instance sharing a shard keeps `own`
/// standing by, unless `own` is active too and goes first (two that became
/// active at once: the later yields, so exactly one stays).
pub fn decide(
    own: &InstanceRecord,
    others: &[InstanceRecord],
    now: Nanos,
    ttl_ns: i64,
    gone: impl Fn(&str, u32) -> bool,
) -> Role {
    others
        .iter()
        .filter(|o| o.id != own.id && o.active && is_live(o, now, ttl_ns, &gone))
        .filter(|o| !own.active || o.precedes(own))
        .find(|o| !o.shared(&own.shards).is_empty())
        .map(|o| Role::Standby { holder: o.clone() })
        .unwrap_or(Role::Active)
}

/// The live active instances running any of `shards`: a `run-once` on them
/// would race their passes for the same cursors.
pub fn holders<'a>(
    shards: &[u8],
    others: &'a [InstanceRecord],
    now: Nanos,
    ttl_ns: i64,
    gone: impl Fn(&str, u32) -> bool,
) -> Vec<&'a InstanceRecord> {
    others
        .iter()
        .filter(|o| o.active && is_live(o, now, ttl_ns, &gone) && !o.shared(shards).is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: i64 = 90_000_000_000;
    const ALL: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

    fn rec(host: &str, pid: u32, shards: &[u8], started: Nanos, active: bool) -> InstanceRecord {
        let mut r = InstanceRecord::new(host, pid, shards, started, "127.0.0.1:9710");
        r.active = active;
        r
    }

    fn alive(_: &str, _: u32) -> bool {
        false
    }

    #[test]
    fn a_second_serve_on_the_same_cursor_dir_stands_by() {
        let first = rec("a", 1, &ALL, 100, true);
        let second = rec("b", 2, &ALL, 200, false);
        let others = [first.clone(), second.clone()];
        assert_eq!(decide(&first, &others, 300, TTL, alive), Role::Active);
        match decide(&second, &others, 300, TTL, alive) {
            Role::Standby { holder } => {
                assert_eq!(holder.id, first.id);
                assert_eq!(holder.shared(&second.shards), ALL);
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn disjoint_shards_both_run() {
        let low = rec("a", 1, &ALL[..8], 100, true);
        let high = rec("b", 2, &ALL[8..], 200, false);
        let others = [low.clone(), high.clone()];
        assert_eq!(decide(&high, &others, 300, TTL, alive), Role::Active);
        let mut overlap = rec("c", 3, &[7, 8], 300, false);
        overlap.active = false;
        match decide(&overlap, &others, 400, TTL, alive) {
            Role::Standby { holder } => assert_eq!(holder.shared(&overlap.shards), [7]),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn two_that_became_active_at_once_keep_exactly_one() {
        let a = rec("a", 1, &ALL, 100, true);
        let b = rec("b", 2, &ALL, 100, true);
        let both = [a.clone(), b.clone()];
        let roles = [
            decide(&a, &both, 200, TTL, alive),
            decide(&b, &both, 200, TTL, alive),
        ];
        assert_eq!(
            roles.iter().filter(|r| **r == Role::Active).count(),
            1,
            "{roles:?}"
        );
    }

    #[test]
    fn a_stale_or_dead_holder_is_taken_over() {
        let holder = rec("a", 1, &ALL, 100, true);
        let me = rec("a", 2, &ALL, 200, false);
        let others = [holder.clone()];
        // Not renewed within the ttl.
        assert_eq!(
            decide(&me, &others, 100 + TTL + 1, TTL, alive),
            Role::Active
        );
        // Renewed, but its process is gone from this host.
        let gone = |host: &str, pid: u32| host == "a" && pid == 1;
        assert_eq!(decide(&me, &others, 300, TTL, gone), Role::Active);
        // A standby holds nothing.
        let standby = rec("b", 3, &ALL, 50, false);
        assert_eq!(decide(&me, &[standby], 300, TTL, alive), Role::Active);
    }

    #[test]
    fn run_once_collides_only_with_live_active_instances_on_its_shards() {
        let others = [
            rec("a", 1, &ALL[..8], 100, true),
            rec("b", 2, &ALL[8..], 100, false),
            rec("c", 3, &ALL[8..], 100 - 2 * TTL, true),
        ];
        let h = holders(&ALL[..8], &others, 200, TTL, alive);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].host, "a");
        assert!(holders(&ALL[8..], &others, 200, TTL, alive).is_empty());
    }

    #[test]
    fn instance_files_round_trip_and_other_versions_are_refused() {
        let r = rec("a", 1, &ALL, 100, true);
        assert_eq!(InstanceRecord::decode(&r.to_json()).unwrap(), r);
        let newer = String::from_utf8(r.to_json())
            .unwrap()
            .replace("\"version\": 1", "\"version\": 2");
        assert!(
            InstanceRecord::decode(newer.as_bytes())
                .unwrap_err()
                .contains("version 2")
        );
    }
}
