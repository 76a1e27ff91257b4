//! Operator controls persisted in the filer next to the cursors, so every
//! instance sees them and they survive restarts: one pause file per paused
//! bucket, `<cursor.dir>/paused/<bucket>.json`
//! (docs/filer-layout.md#pause-files), and one approval file per approved
//! bucket, `<cursor.dir>/approved/<bucket>.json`, consumed by the pass that
//! lets its held work through (docs/filer-layout.md#approval-files), and one
//! hold file per bucket the deletion cap held, `<cursor.dir>/held/<bucket>.json`. What a pause means for a pass is
//! decided in [`crate::engine::safety`].
//!
//! A pause is one CreateEntry of a small inline file and a resume one
//! DeleteEntry, so a reader sees the bucket paused or not, never half of it.

use futures::TryStreamExt as _;

use crate::engine::Nanos;
use crate::engine::safety::{
    ApprovalRecord, HoldRecord, PauseRecord, RuleRecord, bucket_of_pause_file, check_bucket_name,
    decode_approval, decode_hold, decode_pause, decode_rule_record, pause_file_name,
};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{DEFAULT_PAGE, FilerClient, join_path};

/// The subdirectory of `cursor.dir` holding the pause files.
pub const PAUSED_SUBDIR: &str = "paused";
/// The subdirectory of `cursor.dir` holding the approval files.
pub const APPROVED_SUBDIR: &str = "approved";
/// The subdirectory of `cursor.dir` holding the hold files.
pub const HELD_SUBDIR: &str = "held";
/// The subdirectory of `cursor.dir` holding the deletion journal.
pub const JOURNAL_SUBDIR: &str = "journal";
/// The subdirectory of `cursor.dir` holding the rules files (grace).
pub const RULES_SUBDIR: &str = "rules";

/// Pause files under `<cursor.dir>/paused`.
#[derive(Debug, Clone)]
pub struct ControlStore {
    client: FilerClient,
    paused_dir: String,
    approved_dir: String,
    held_dir: String,
    rules_dir: String,
    journal_dir: String,
}

impl ControlStore {
    /// The store of the cursors kept under `cursor_dir`.
    pub fn new(client: FilerClient, cursor_dir: &str) -> ControlStore {
        let dir = cursor_dir.trim_end_matches('/');
        let dir = if dir.is_empty() { "/" } else { dir };
        ControlStore {
            client,
            paused_dir: join_path(dir, PAUSED_SUBDIR),
            approved_dir: join_path(dir, APPROVED_SUBDIR),
            held_dir: join_path(dir, HELD_SUBDIR),
            rules_dir: join_path(dir, RULES_SUBDIR),
            journal_dir: join_path(dir, JOURNAL_SUBDIR),
        }
    }

    /// The directory of the pause files.
    pub fn paused_dir(&self) -> &str {
        &self.paused_dir
    }

    /// Every paused bucket, by name. A pause file that cannot be read is an
    /// error naming it and the fix: guessing "not paused" could delete what
    /// an operator meant to stop.
    pub async fn paused(&self) -> Result<Vec<PauseRecord>, String> {
        self.read_dir(&self.paused_dir, "pause", decode_pause, "resume")
            .await
    }

    /// Every approved bucket, by name.
    pub async fn approvals(&self) -> Result<Vec<ApprovalRecord>, String> {
        self.read_dir(&self.approved_dir, "approval", decode_approval, "approve")
            .await
    }

    /// Every bucket the deletion cap holds, by name.
    pub async fn holds(&self) -> Result<Vec<HoldRecord>, String> {
        self.read_dir(&self.held_dir, "hold", decode_hold, "approve")
            .await
    }

    /// Records a hold.
    pub async fn hold(&self, record: &HoldRecord) -> Result<(), String> {
        check_bucket_name(&record.bucket)?;
        let entry = pause_entry(
            &pause_file_name(&record.bucket),
            record.to_json(),
            record.held_ns,
        );
        self.client
            .create_entry(&self.held_dir, entry, false)
            .await
            .map_err(|e| format!("recording the hold of bucket {}: {e}", record.bucket))
    }

    /// What was last seen of each bucket's lifecycle document.
    pub async fn rule_records(&self) -> Result<Vec<RuleRecord>, String> {
        self.read_dir(&self.rules_dir, "rules", decode_rule_record, "approve")
            .await
    }

    /// Records what was seen of a bucket's lifecycle document.
    pub async fn put_rule_record(&self, record: &RuleRecord, now: Nanos) -> Result<(), String> {
        check_bucket_name(&record.bucket)?;
        let entry = pause_entry(&pause_file_name(&record.bucket), record.to_json(), now);
        self.client
            .create_entry(&self.rules_dir, entry, false)
            .await
            .map_err(|e| format!("recording the rules of bucket {}: {e}", record.bucket))
    }

    /// Writes one journal batch, `journal/<day>/<name>` (one file per pass
    /// and shard, written once).
    pub async fn write_journal(
        &self,
        day: &str,
        name: &str,
        content: Vec<u8>,
        now: Nanos,
    ) -> Result<(), String> {
        let dir = join_path(&self.journal_dir, day);
        let entry = pause_entry(name, content, now);
        self.client
            .create_entry(&dir, entry, false)
            .await
            .map_err(|e| format!("writing journal batch {dir}/{name}: {e}"))
    }

    /// The journal's day directories, oldest first.
    pub async fn journal_days(&self) -> Result<Vec<String>, String> {
        let entries: Vec<Entry> = self
            .client
            .list_all(&self.journal_dir, DEFAULT_PAGE)
            .try_collect()
            .await
            .map_err(|e| format!("listing {}: {e}", self.journal_dir))?;
        Ok(entries
            .into_iter()
            .filter(|e| e.is_directory)
            .map(|e| e.name)
            .collect())
    }

    /// Removes a day directory and its batches.
    pub async fn drop_journal_day(&self, day: &str) -> Result<(), String> {
        self.client
            .delete_entry(&self.journal_dir, day, true)
            .await
            .map_err(|e| format!("removing journal day {}/{day}: {e}", self.journal_dir))
    }

    /// Every batch of a day directory: (path, content).
    pub async fn journal_batches(&self, day: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
        let dir = join_path(&self.journal_dir, day);
        let entries: Vec<Entry> = self
            .client
            .list_all(&dir, DEFAULT_PAGE)
            .try_collect()
            .await
            .map_err(|e| format!("listing {dir}: {e}"))?;
        let mut out = Vec::new();
        for e in entries.into_iter().filter(|e| !e.is_directory) {
            let path = join_path(&dir, &e.name);
            // Small batches are inline; a large one is stored in chunks.
            let content = if e.content.is_empty() && !e.chunks.is_empty() {
                return Err(format!(
                    "journal batch {path} is stored in chunks, which this reader does not fetch"
                ));
            } else {
                e.content
            };
            out.push((path, content));
        }
        Ok(out)
    }

    /// Removes a hold.
    pub async fn release(&self, bucket: &str) -> Result<(), String> {
        check_bucket_name(bucket)?;
        self.client
            .delete_entry(&self.held_dir, &pause_file_name(bucket), false)
            .await
            .map_err(|e| format!("releasing the hold of bucket {bucket}: {e}"))
    }

    async fn read_dir<R>(
        &self,
        dir: &str,
        what: &str,
        decode: fn(&[u8], &str) -> Result<R, String>,
        fix_cmd: &str,
    ) -> Result<Vec<R>, String> {
        let entries: Vec<Entry> = self
            .client
            .list_all(dir, DEFAULT_PAGE)
            .try_collect()
            .await
            .map_err(|e| format!("listing {what} files in {dir}: {e}"))?;
        let mut out = Vec::new();
        for e in entries {
            if e.is_directory {
                continue;
            }
            let path = join_path(dir, &e.name);
            let Some(bucket) = bucket_of_pause_file(&e.name) else {
                return Err(format!(
                    "{what} file {path}: its name is not <bucket>.json. Fix: remove it \
                     (`weed shell fs.rm {path}`)"
                ));
            };
            let r = decode(&e.content, bucket).map_err(|problem| {
                format!(
                    "{what} file {path} is unusable: {problem}. Fix: remove it \
                     (`weed shell fs.rm {path}`), then `s3-lifecycled {fix_cmd} {bucket}` again \
                     if meant"
                )
            })?;
            out.push(r);
        }
        Ok(out)
    }

    /// Approves `bucket`'s held work for the next pass.
    pub async fn approve(&self, bucket: &str, now: Nanos) -> Result<ApprovalRecord, String> {
        check_bucket_name(bucket)?;
        let record = ApprovalRecord::new(bucket, now);
        let entry = pause_entry(&pause_file_name(bucket), record.to_json(), now);
        self.client
            .create_entry(&self.approved_dir, entry, false)
            .await
            .map_err(|e| format!("approving bucket {bucket}: {e}"))?;
        Ok(record)
    }

    /// Removes `bucket`'s approval (the pass that used it is over).
    pub async fn clear_approval(&self, bucket: &str) -> Result<(), String> {
        check_bucket_name(bucket)?;
        self.client
            .delete_entry(&self.approved_dir, &pause_file_name(bucket), false)
            .await
            .map_err(|e| format!("clearing the approval of bucket {bucket}: {e}"))
    }

    /// Pauses `bucket` (replacing an earlier pause of it). Answers the record
    /// written.
    pub async fn pause(
        &self,
        bucket: &str,
        now: Nanos,
        reason: &str,
    ) -> Result<PauseRecord, String> {
        check_bucket_name(bucket)?;
        let record = PauseRecord::new(bucket, now, reason);
        let entry = pause_entry(&pause_file_name(bucket), record.to_json(), now);
        self.client
            .create_entry(&self.paused_dir, entry, false)
            .await
            .map_err(|e| format!("pausing bucket {bucket}: {e}"))?;
        Ok(record)
    }

    /// Resumes `bucket`; `Ok(false)` when it was not paused.
    pub async fn resume(&self, bucket: &str) -> Result<bool, String> {
        check_bucket_name(bucket)?;
        let name = pause_file_name(bucket);
        let was = self
            .client
            .lookup(&self.paused_dir, &name)
            .await
            .map_err(|e| format!("resuming bucket {bucket}: {e}"))?
            .is_some();
        self.client
            .delete_entry(&self.paused_dir, &name, false)
            .await
            .map_err(|e| format!("resuming bucket {bucket}: {e}"))?;
        Ok(was)
    }
}

/// A small inline file (mode 0644), as the cursor files are written.
fn pause_entry(name: &str, content: Vec<u8>, now: Nanos) -> Entry {
    crate::seaweed::filer::json_file_entry(name, content, now)
}
