//! Operator controls persisted in the filer next to the cursors, so every
//! instance sees them and they survive restarts: one pause file per paused
//! bucket, `<cursor.dir>/paused/<bucket>.json`
//! (docs/filer-layout.md#pause-files), and one approval file per approved
//! bucket, `<cursor.dir>/approved/<bucket>.json`, consumed by the pass that
//! lets its held work through (docs/filer-layout.md#approval-files), and one
//! hold file per bucket the deletion cap held, `<cursor.dir>/held/<bucket>.json`, and one
//! instance file per running `serve`, `<cursor.dir>/instances/<id>.json`. What a pause means for a pass is
//! decided in [`crate::engine::safety`].
//!
//! A pause is one CreateEntry of a small inline file and a resume one
//! DeleteEntry, so a reader sees the bucket paused or not, never half of it.

use futures::TryStreamExt as _;

use crate::engine::Nanos;
use crate::engine::instances::InstanceRecord;
use crate::engine::safety::{
    ApprovalRecord, HoldRecord, PauseRecord, RuleRecord, bucket_of_pause_file, check_bucket_name,
    decode_approval, decode_hold, decode_pause, decode_rule_record, pause_file_name,
};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{DEFAULT_PAGE, FilerClient, FilerError, join_path, json_file_entry};

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
/// The subdirectory of `cursor.dir` holding one file per `serve` process
/// (docs/serve-instances.md).
pub const INSTANCES_SUBDIR: &str = "instances";

/// Why a control file (pause, approval, hold, rules, journal batch) could
/// not be read or written. The text names the file or bucket and, for a file
/// that cannot be used, the fix; operators and the e2e suites read it.
#[derive(Debug, thiserror::Error)]
pub enum ControlsError {
    /// The bucket name is no S3 bucket name (the engine's check says why,
    /// as text).
    #[error("{0}")]
    InvalidBucket(String),
    /// Writing or removing a bucket's control file failed. `op` says what
    /// was done to the bucket: `pausing`, `resuming`, `approving`,
    /// `clearing the approval of`, `recording the hold of`, `releasing the
    /// hold of`, `recording the rules of`.
    #[error("{op} bucket {bucket}: {source}")]
    Bucket {
        /// What was done, worded to precede `bucket <name>`.
        op: &'static str,
        bucket: String,
        #[source]
        source: FilerError,
    },
    /// Listing a directory of control files failed: `what` is the kind of
    /// file (`pause`, `approval`, `hold`, `rules`).
    #[error("listing {what} files in {dir}: {source}")]
    ListFiles {
        what: &'static str,
        dir: String,
        #[source]
        source: FilerError,
    },
    /// A control file's name is not `<bucket>.json`.
    #[error(
        "{what} file {path}: its name is not <bucket>.json. Fix: remove it \
         (`weed shell fs.rm {path}`)"
    )]
    BadFileName { what: &'static str, path: String },
    /// A control file's content cannot be decoded.
    #[error(
        "{what} file {path} is unusable: {problem}. Fix: remove it \
         (`weed shell fs.rm {path}`), then `s3-lifecycled {fix_cmd} {bucket}` again \
         if meant"
    )]
    Unusable {
        what: &'static str,
        path: String,
        /// What is wrong with its content (the decoder's words).
        problem: String,
        /// The command that writes the file again.
        fix_cmd: &'static str,
        /// The bucket the file is about.
        bucket: String,
    },
    /// A journal batch is stored in chunks, which the reader does not fetch
    /// (the service writes batches inline).
    #[error("journal batch {path} is stored in chunks, which this reader does not fetch")]
    ChunkedBatch { path: String },
    /// Listing the journal or one of its day directories, writing a journal
    /// batch, removing a journal day, or writing, listing or removing an
    /// instance file failed.
    #[error("{op} {path}: {source}")]
    File {
        /// What was done: `listing`, `writing journal batch`, `removing
        /// journal day`, `writing`, `removing`.
        op: &'static str,
        path: String,
        #[source]
        source: FilerError,
    },
}

type Result<T, E = ControlsError> = std::result::Result<T, E>;

/// Pause files under `<cursor.dir>/paused`.
#[derive(Debug, Clone)]
pub struct ControlStore {
    client: FilerClient,
    paused_dir: String,
    approved_dir: String,
    held_dir: String,
    rules_dir: String,
    journal_dir: String,
    instances_dir: String,
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
            instances_dir: join_path(dir, INSTANCES_SUBDIR),
        }
    }

    /// Every paused bucket, by name. A pause file that cannot be read is an
    /// error naming it and the fix: guessing "not paused" could delete what
    /// an operator meant to stop.
    pub async fn paused(&self) -> Result<Vec<PauseRecord>> {
        self.read_dir(&self.paused_dir, "pause", decode_pause, "resume")
            .await
    }

    /// Every approved bucket, by name.
    pub async fn approvals(&self) -> Result<Vec<ApprovalRecord>> {
        self.read_dir(&self.approved_dir, "approval", decode_approval, "approve")
            .await
    }

    /// Every bucket the deletion cap holds, by name.
    pub async fn holds(&self) -> Result<Vec<HoldRecord>> {
        self.read_dir(&self.held_dir, "hold", decode_hold, "approve")
            .await
    }

    pub async fn hold(&self, record: &HoldRecord) -> Result<()> {
        let (bucket, json) = (&record.bucket, record.to_json());
        self.put(
            &self.held_dir,
            bucket,
            json,
            record.held_ns,
            "recording the hold of",
        )
        .await
    }

    /// What was last seen of each bucket's lifecycle document.
    pub async fn rule_records(&self) -> Result<Vec<RuleRecord>> {
        self.read_dir(&self.rules_dir, "rules", decode_rule_record, "approve")
            .await
    }

    /// Records what was seen of a bucket's lifecycle document.
    pub async fn put_rule_record(&self, record: &RuleRecord, now: Nanos) -> Result<()> {
        let (bucket, json) = (&record.bucket, record.to_json());
        self.put(&self.rules_dir, bucket, json, now, "recording the rules of")
            .await
    }

    /// Writes one journal batch, `journal/<day>/<name>` (one file per pass
    /// and shard, written once).
    pub async fn write_journal(
        &self,
        day: &str,
        name: &str,
        content: Vec<u8>,
        now: Nanos,
    ) -> Result<()> {
        let dir = join_path(&self.journal_dir, day);
        // Not `join_path`: the message always put the slash there.
        let err = file_error("writing journal batch", format!("{dir}/{name}"));
        let entry = json_file_entry(name, content, now);
        self.client
            .create_entry(&dir, entry, false)
            .await
            .map_err(err)
    }

    /// The journal's day directories, oldest first.
    pub async fn journal_days(&self) -> Result<Vec<String>> {
        let dir = &self.journal_dir;
        let entries = self.list(dir, file_error("listing", dir.clone())).await?;
        Ok(entries
            .into_iter()
            .filter(|e| e.is_directory)
            .map(|e| e.name)
            .collect())
    }

    /// Removes a day directory and its batches.
    pub async fn drop_journal_day(&self, day: &str) -> Result<()> {
        let err = file_error(
            "removing journal day",
            format!("{}/{day}", self.journal_dir),
        );
        self.client
            .delete_entry(&self.journal_dir, day, true)
            .await
            .map_err(err)
    }

    /// Every batch of a day directory: (path, content).
    pub async fn journal_batches(&self, day: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let dir = join_path(&self.journal_dir, day);
        let entries = self.list(&dir, file_error("listing", dir.clone())).await?;
        entries
            .into_iter()
            .filter(|e| !e.is_directory)
            .map(|e| {
                let path = join_path(&dir, &e.name);
                // Small batches are inline; a large one is stored in chunks.
                if e.content.is_empty() && !e.chunks.is_empty() {
                    return Err(ControlsError::ChunkedBatch { path });
                }
                Ok((path, e.content))
            })
            .collect()
    }

    /// Every entry of `dir`; `err` words a failure.
    async fn list(
        &self,
        dir: &str,
        err: impl FnOnce(FilerError) -> ControlsError,
    ) -> Result<Vec<Entry>> {
        let listing = self.client.list_all(dir, DEFAULT_PAGE);
        listing.try_collect().await.map_err(err)
    }

    /// Writes this process's instance file (replacing its earlier one).
    pub async fn put_instance(&self, r: &InstanceRecord) -> Result<()> {
        let (dir, name) = (&self.instances_dir, format!("{}.json", r.id));
        let entry = json_file_entry(&name, r.to_json(), r.renewed_ns);
        self.client
            .create_entry(dir, entry, false)
            .await
            .map_err(file_error("writing", join_path(dir, &name)))
    }

    /// Every instance file that decodes, and the problems of those that do
    /// not (path and what is wrong): a stray file must not stop a service.
    pub async fn instances(&self) -> Result<(Vec<InstanceRecord>, Vec<String>)> {
        let dir = &self.instances_dir;
        let entries = self.list(dir, file_error("listing", dir.clone())).await?;
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        for e in entries.iter().filter(|e| !e.is_directory) {
            match InstanceRecord::decode(&e.content) {
                Ok(r) => ok.push(r),
                Err(problem) => bad.push(format!("{}: {problem}", join_path(dir, &e.name))),
            }
        }
        Ok((ok, bad))
    }

    /// Removes this process's instance file (a clean shutdown).
    pub async fn remove_instance(&self, id: &str) -> Result<()> {
        let (dir, name) = (&self.instances_dir, format!("{id}.json"));
        self.client
            .delete_entry(dir, &name, false)
            .await
            .map_err(file_error("removing", join_path(dir, &name)))
    }

    /// Removes a hold.
    pub async fn release(&self, bucket: &str) -> Result<()> {
        self.remove(&self.held_dir, bucket, "releasing the hold of")
            .await
    }

    async fn read_dir<R>(
        &self,
        dir: &str,
        what: &'static str,
        decode: fn(&[u8], &str) -> Result<R, String>,
        fix_cmd: &'static str,
    ) -> Result<Vec<R>> {
        let err = |source| ControlsError::ListFiles {
            what,
            dir: dir.to_string(),
            source,
        };
        let entries = self.list(dir, err).await?;
        entries
            .iter()
            .filter(|e| !e.is_directory)
            .map(|e| {
                let path = join_path(dir, &e.name);
                let Some(bucket) = bucket_of_pause_file(&e.name) else {
                    return Err(ControlsError::BadFileName { what, path });
                };
                decode(&e.content, bucket).map_err(|problem| ControlsError::Unusable {
                    what,
                    path,
                    problem,
                    fix_cmd,
                    bucket: bucket.to_string(),
                })
            })
            .collect()
    }

    /// Writes `bucket`'s control file in `dir` (replacing an earlier one);
    /// `op` words a failure.
    async fn put(
        &self,
        dir: &str,
        bucket: &str,
        content: Vec<u8>,
        now: Nanos,
        op: &'static str,
    ) -> Result<()> {
        check_bucket_name(bucket).map_err(ControlsError::InvalidBucket)?;
        let entry = json_file_entry(&pause_file_name(bucket), content, now);
        self.client
            .create_entry(dir, entry, false)
            .await
            .map_err(bucket_error(op, bucket))
    }

    /// Removes `bucket`'s control file from `dir`; `op` words a failure.
    async fn remove(&self, dir: &str, bucket: &str, op: &'static str) -> Result<()> {
        check_bucket_name(bucket).map_err(ControlsError::InvalidBucket)?;
        self.client
            .delete_entry(dir, &pause_file_name(bucket), false)
            .await
            .map_err(bucket_error(op, bucket))
    }

    /// Approves `bucket`'s held work for the next pass.
    pub async fn approve(&self, bucket: &str, now: Nanos) -> Result<ApprovalRecord> {
        let record = ApprovalRecord::new(bucket, now);
        self.put(
            &self.approved_dir,
            bucket,
            record.to_json(),
            now,
            "approving",
        )
        .await?;
        Ok(record)
    }

    /// Removes `bucket`'s approval (the pass that used it is over).
    pub async fn clear_approval(&self, bucket: &str) -> Result<()> {
        self.remove(&self.approved_dir, bucket, "clearing the approval of")
            .await
    }

    /// Pauses `bucket`. Pausing a paused bucket keeps the first pause's
    /// time, and its reason unless `reason` is given: a second `pause`
    /// without `--reason` used to wipe the note an operator left. Answers
    /// the record written and whether it was paused already.
    pub async fn pause(
        &self,
        bucket: &str,
        now: Nanos,
        reason: &str,
    ) -> Result<(PauseRecord, bool)> {
        check_bucket_name(bucket).map_err(ControlsError::InvalidBucket)?;
        let name = pause_file_name(bucket);
        let earlier = self
            .client
            .lookup(&self.paused_dir, &name)
            .await
            .map_err(bucket_error("pausing", bucket))?
            .and_then(|e| decode_pause(&e.content, bucket).ok());
        let mut record = PauseRecord::new(bucket, now, reason);
        if let Some(e) = &earlier {
            record.paused_ns = e.paused_ns;
            if reason.is_empty() {
                record.reason.clone_from(&e.reason);
            }
        }
        self.put(&self.paused_dir, bucket, record.to_json(), now, "pausing")
            .await?;
        Ok((record, earlier.is_some()))
    }

    /// Resumes `bucket`; `Ok(false)` when it was not paused.
    pub async fn resume(&self, bucket: &str) -> Result<bool> {
        check_bucket_name(bucket).map_err(ControlsError::InvalidBucket)?;
        let was = self
            .client
            .lookup(&self.paused_dir, &pause_file_name(bucket))
            .await
            .map_err(bucket_error("resuming", bucket))?
            .is_some();
        self.remove(&self.paused_dir, bucket, "resuming").await?;
        Ok(was)
    }
}

/// A failure to do `op` to `bucket`'s control file.
fn bucket_error(op: &'static str, bucket: &str) -> impl FnOnce(FilerError) -> ControlsError {
    let bucket = bucket.to_string();
    move |source| ControlsError::Bucket { op, bucket, source }
}

/// A failure to do `op` to the file or directory `path`.
fn file_error(op: &'static str, path: String) -> impl FnOnce(FilerError) -> ControlsError {
    move |source| ControlsError::File { op, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filer_error() -> FilerError {
        FilerError::AlreadyExists { path: "/p".into() }
    }

    /// The texts are the messages these calls printed before their errors
    /// were typed: operators and the e2e suites read them.
    #[test]
    fn messages_keep_their_old_wording() {
        let e = ControlsError::Bucket {
            op: "clearing the approval of",
            bucket: "b1".into(),
            source: filer_error(),
        };
        assert_eq!(
            e.to_string(),
            "clearing the approval of bucket b1: filer CreateEntry /p: the entry already exists"
        );
        let e = ControlsError::BadFileName {
            what: "pause",
            path: "/c/paused/x".into(),
        };
        assert_eq!(
            e.to_string(),
            "pause file /c/paused/x: its name is not <bucket>.json. Fix: remove it \
             (`weed shell fs.rm /c/paused/x`)"
        );
        let e = ControlsError::Unusable {
            what: "hold",
            path: "/c/held/b1.json".into(),
            problem: "not JSON".into(),
            fix_cmd: "approve",
            bucket: "b1".into(),
        };
        assert_eq!(
            e.to_string(),
            "hold file /c/held/b1.json is unusable: not JSON. Fix: remove it \
             (`weed shell fs.rm /c/held/b1.json`), then `s3-lifecycled approve b1` again if meant"
        );
        let e = ControlsError::File {
            op: "writing journal batch",
            path: "/c/journal/2024-01-02/n.jsonl".into(),
            source: filer_error(),
        };
        assert!(
            e.to_string()
                .starts_with("writing journal batch /c/journal/2024-01-02/n.jsonl: filer "),
            "{e}"
        );
        let e = ControlsError::File {
            op: "removing journal day",
            path: "/c/journal/2024-01-02".into(),
            source: filer_error(),
        };
        assert!(
            e.to_string()
                .starts_with("removing journal day /c/journal/2024-01-02: filer "),
            "{e}"
        );
    }
}
