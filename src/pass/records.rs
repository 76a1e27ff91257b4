//! What a pass writes back besides the cursors: its deletion journal, in
//! parts small enough to stay inline filer entries (docs/filer-layout.md#journal),
//! and the holds the deletion cap decided.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::engine::journal::{self, JournalEntry, JournalPart, JournalSpool};
use crate::engine::safety::{CapBook, Held, HoldRecord};
use crate::engine::{CallResult, DeleteRequest, RuleHash, shard_id};
use crate::pass::dispatch::Record;
use crate::pass::lock;
use crate::pass::plan::PassPlan;
use crate::pass::ports::{ClusterPort, on_controls};

/// Largest journal batch file; a shard's batch beyond it is split into
/// numbered parts so every file stays a small inline filer entry.
pub(crate) const JOURNAL_PART_BYTES: usize = 1 << 20;

/// Stores one part of a shard's journal batch. A failed write is logged,
/// never fails the pass: the deletes happened, and metrics and logs still
/// record them.
fn write_journal_part(
    port: &dyn ClusterPort,
    run_id: &str,
    part: JournalPart,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let now = crate::clock::wall_ns();
    let name = journal::part_name(run_id, part.shard, part.part);
    let shard = part.shard;
    let controls = port.controls();
    async move {
        let Some(c) = controls else { return };
        let day = journal::day_dir(now);
        if let Err(e) = c.write_journal(&day, &name, part.bytes, now).await {
            tracing::error!(shard, error = %e, "writing the deletion journal failed");
        }
    }
}

/// The deletion journal of a running pass (docs/filer-layout.md#journal):
/// every delete sent, with its final outcome, per shard, written in parts of
/// at most [`JOURNAL_PART_BYTES`] as they fill (a pass holds one unfinished
/// part per shard, docs/due-index.md#memory) and the rest after the drain.
/// A dry run sends nothing and writes no journal.
pub(crate) struct PassJournal {
    /// The spool, and the writes of the parts it filled.
    spool: Arc<Mutex<(JournalSpool, Vec<JoinHandle<()>>)>>,
    port: Arc<dyn ClusterPort>,
    run_id: String,
}

impl PassJournal {
    pub(crate) fn new(port: Arc<dyn ClusterPort>, run_id: &str) -> PassJournal {
        PassJournal {
            spool: Arc::new(Mutex::new((
                JournalSpool::new(JOURNAL_PART_BYTES),
                Vec::new(),
            ))),
            port,
            run_id: run_id.to_string(),
        }
    }

    /// The dispatcher's hook that records each delete's final outcome, under
    /// the id of its rule in `plan`.
    pub(crate) fn recorder(&self, plan: &PassPlan) -> Record<DeleteRequest> {
        let rule_ids: BTreeMap<(String, RuleHash), String> = plan
            .recovery
            .actions()
            .map(|a| ((a.bucket().to_string(), a.rule_hash()), a.rule().id.clone()))
            .collect();
        let (spool, port, run_id) = (self.spool.clone(), self.port.clone(), self.run_id.clone());
        Arc::new(move |req: &DeleteRequest, result: &CallResult| {
            let e = JournalEntry {
                ts_ns: crate::clock::wall_ns(),
                run_id: run_id.clone(),
                bucket: req.bucket.clone(),
                key: req.object_path.clone(),
                version_id: req.version_id.clone(),
                rule_id: rule_ids
                    .get(&(req.bucket.clone(), req.rule_hash))
                    .cloned()
                    .unwrap_or_default(),
                rule_hash: req.rule_hash.to_hex(),
                kind: req.kind.as_str().to_string(),
                outcome: result.outcome.label().to_string(),
                reason: result.reason.clone(),
            };
            let (spool, writes) = &mut *lock(&spool);
            if let Some(part) = spool.push(shard_id(&req.bucket, &req.object_path), &e) {
                writes.push(tokio::spawn(write_journal_part(&*port, &run_id, part)));
            }
        })
    }

    /// After every delete was answered: waits for the parts written during
    /// the pass, writes each shard's last part, then drops the day
    /// directories past `journal.retention`; nothing in a dry run.
    pub(crate) async fn finish(self, dry_run: bool, retention: Duration) {
        let empty = (JournalSpool::new(JOURNAL_PART_BYTES), Vec::new());
        let (spool, written) = std::mem::replace(&mut *lock(&self.spool), empty);
        if dry_run {
            return;
        }
        let rest = spool.finish();
        for w in written {
            let _ = w.await;
        }
        for part in rest {
            write_journal_part(&*self.port, &self.run_id, part).await;
        }
        let now = crate::clock::wall_ns();
        if retention.is_zero() {
            return;
        }
        let Some(c) = self.port.controls() else {
            return;
        };
        match c.journal_days().await {
            Ok(days) => {
                for d in journal::expired_days(days.iter().map(String::as_str), now, retention) {
                    if let Err(e) = c.drop_journal_day(&d).await {
                        tracing::warn!(day = d, error = %e, "removing an expired journal day failed");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing the journal for retention failed"),
        }
    }
}

/// After the pass: the buckets the cap held, each with the size of the
/// bucket (counted now when it was not counted at the start: what is left
/// plus what the pass sent). Unless a dry run (which changes nothing): newly
/// held buckets get a hold file, so later passes send nothing for them until
/// `approve`; used approvals and holds that no longer apply are removed
/// (docs/filer-layout.md#approval-files).
pub(crate) async fn settle_caps(
    port: &dyn ClusterPort,
    caps: &Mutex<CapBook>,
    limits: crate::engine::safety::CapLimits,
    approved: &[String],
    released: &[String],
    dry_run: bool,
) -> Vec<Held> {
    let mut held = lock(caps).held();
    let now = crate::clock::wall_ns();
    for h in &mut held {
        if h.entries.is_none() {
            let sent = if dry_run { 0 } else { h.cap };
            match port.count_bucket(&h.bucket).await {
                Ok(n) => h.entries = Some(n.saturating_add(sent)),
                Err(e) => {
                    tracing::warn!(bucket = h.bucket, error = %e, "counting a held bucket failed")
                }
            }
        }
        tracing::warn!(
            bucket = h.bucket,
            reason = h.reason(),
            "bucket held by the deletion cap"
        );
        if !dry_run
            && h.since_ns.is_none()
            && h.grace.is_none()
            && let record = HoldRecord::new(h, limits, now)
            && let Err(e) = on_controls(port, |c| async move { c.hold(&record).await }).await
        {
            // Not recorded: the next pass caps the bucket again, afresh.
            tracing::warn!(bucket = h.bucket, error = %e, "recording a hold failed");
        }
    }
    if !dry_run {
        for b in approved.iter().chain(released) {
            if let Err(e) = on_controls(port, |c| async move { c.release(b).await }).await {
                tracing::warn!(bucket = b, error = %e, "removing a hold failed");
            }
        }
        for b in approved {
            if let Err(e) = on_controls(port, |c| async move { c.clear_approval(b).await }).await {
                tracing::warn!(bucket = b, error = %e, "removing a used approval failed");
            }
        }
    }
    held
}
