//! The worker's state directory: the id it comes back under after a restart
//! and the executions in progress (`in-flight.json`), so a restarted worker
//! reports the ones its predecessor lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Executions in progress, persisted as `in-flight.json` in the state
/// directory: request id → job id.
#[derive(Debug, Clone)]
pub struct StateDir(PathBuf);

impl StateDir {
    /// The directory (created when missing).
    pub fn open(dir: &Path) -> Result<StateDir, String> {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "weed_admin.state_dir {}: cannot create it ({e}); point it at a writable directory",
                dir.display()
            )
        })?;
        Ok(StateDir(dir.to_path_buf()))
    }

    /// This worker's id: the configured one, else the one kept here, else a
    /// new one (kept here for the next start: a restarted worker must come
    /// back under the same id to report its lost jobs).
    pub fn worker_id(&self, configured: &str) -> Result<String, String> {
        if !configured.trim().is_empty() {
            return Ok(configured.trim().to_string());
        }
        let path = self.0.join("worker-id");
        if let Ok(id) = std::fs::read_to_string(&path)
            && !id.trim().is_empty()
        {
            return Ok(id.trim().to_string());
        }
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".into());
        let id = format!("s3lc-{host}-{:08x}", rand::random::<u32>());
        std::fs::write(&path, &id)
            .map_err(|e| format!("cannot keep the worker id in {}: {e}", path.display()))?;
        Ok(id)
    }

    fn in_flight_path(&self) -> PathBuf {
        self.0.join("in-flight.json")
    }

    /// The executions recorded as in progress.
    pub fn in_flight(&self) -> BTreeMap<String, String> {
        std::fs::read(self.in_flight_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Records `jobs` as the executions in progress (write, then rename, so
    /// a crash mid-write leaves the previous record).
    pub fn save_in_flight(&self, jobs: &BTreeMap<String, String>) {
        let tmp = self.0.join("in-flight.json.tmp");
        let body = serde_json::to_vec(jobs).unwrap_or_default();
        if let Err(e) =
            std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, self.in_flight_path()))
        {
            tracing::warn!(error = %e, dir = %self.0.display(), "cannot record executions in progress");
        }
    }
}
