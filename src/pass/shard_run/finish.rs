//! The end of a shard's run: its report, and the cursor it saves, built from
//! what the walk and the replay resolved.

use super::*;

impl ShardRun {
    /// Ends the pass. `stream_end` is the ts of the last event the stream
    /// delivered when it ended normally, else `None`. Returns the report and,
    /// unless the shard failed, the cursor to save.
    pub fn finish(mut self, stream_end: Option<Nanos>) -> (ShardReport, Option<ShardCursor>) {
        let plan = self.plan.clone();
        let end = if self.stopped() { None } else { stream_end };
        let had_tracker = self.tracker.is_some();
        // Walker work a stop left queued never went out.
        for (_, t) in std::mem::take(&mut self.queue) {
            if let DeleteTicket::Walk { bucket, owed, .. } = t {
                self.walks.entry(bucket).or_default().owe(owed);
            }
        }
        // By bucket, so each bucket's cursor takes its own actions without
        // a scan of every bucket's.
        let mut progress: HashMap<Arc<str>, Vec<(ActionKey, ActionProgress)>> = HashMap::new();
        for (k, p) in self
            .tracker
            .take()
            .map(|t| t.finish(end))
            .unwrap_or_default()
        {
            progress.entry(k.bucket.clone()).or_default().push((k, p));
        }
        let report = self.report();
        if self.failed.is_some() {
            return (report, None);
        }
        let old = self.persisted.take();
        let mut buckets: BTreeMap<String, BucketCursor> = old
            .iter()
            .flat_map(|o| &o.buckets)
            .filter(|(name, _)| plan.keep.contains(*name))
            .map(|(name, b)| (name.clone(), b.clone()))
            .collect();
        for bucket in plan.buckets() {
            let prev = old.as_ref().and_then(|o| o.buckets.get(bucket));
            let recovering = self.shard_plan.recover.contains_key(bucket);
            let next = if self.failed_recovery.contains(bucket) || (recovering && !had_tracker) {
                self.unfinished_recovery(bucket, recovering, prev)
            } else {
                let actions = progress.get(bucket).map_or(&[][..], Vec::as_slice);
                self.bucket_cursor(bucket, prev, actions)
            };
            if let Some(b) = next {
                buckets.insert(bucket.to_string(), b);
            }
        }
        (report, Some(self.shard_cursor(old.as_deref(), buckets)))
    }

    /// The shard's report: its outcome, counters and why it stopped.
    fn report(&self) -> ShardReport {
        let plan = &self.plan;
        let outcome = if self.failed.is_some() {
            ShardOutcome::Failed
        } else if self.halted.is_some() || !self.walk_failures.is_empty() {
            ShardOutcome::Halted
        } else {
            ShardOutcome::Completed
        };
        let rules: BTreeSet<(String, String)> = plan
            .recovery
            .actions()
            .map(|a| (a.bucket().to_string(), a.rule_hash().to_hex()))
            .collect();
        ShardReport {
            shard: self.shard,
            outcome,
            buckets: plan.recovery.buckets().len(),
            rules: rules.len(),
            counters: self.counters.clone(),
            walker_ran: !self.walks.is_empty(),
            recovery: self.shard_plan.recover.clone().into_iter().collect(),
            halt_reason: self
                .halted
                .clone()
                .or_else(|| self.failed.clone())
                .or_else(|| {
                    self.walk_failures.iter().next().map(|(b, why)| {
                        format!("walk of bucket {b} did not finish (replay went on): {why}")
                    })
                }),
            walk_failures: self.walk_failures.clone().into_iter().collect(),
        }
    }

    /// A bucket whose recovery did not finish keeps its old state so the next
    /// pass recovers again, with where its walk resumes
    /// (docs/design-deviations.md#resumable-recovery-walks).
    fn unfinished_recovery(
        &self,
        bucket: &str,
        recovering: bool,
        prev: Option<&BucketCursor>,
    ) -> Option<BucketCursor> {
        let resume = recovering.then(|| self.next_resume(bucket)).flatten();
        let backlog = self.backlog(bucket, recovering);
        match prev {
            Some(p) => {
                let mut kept = p.clone();
                if recovering {
                    kept.walk_resume = resume;
                }
                kept.backlog = backlog;
                Some(kept)
            }
            None if resume.is_some() || !backlog.actions.is_empty() => {
                Some(BucketCursor::walk_placeholder(resume, backlog))
            }
            None => None,
        }
    }

    /// A bucket's cursor after a pass that recovered or replayed it.
    fn bucket_cursor(
        &self,
        bucket: &str,
        prev: Option<&BucketCursor>,
        actions: &[(ActionKey, ActionProgress)],
    ) -> Option<BucketCursor> {
        let plan = &self.plan;
        let replay_bucket = plan.replay.as_ref().and_then(|r| r.bucket(bucket));
        let rules: ActionMap = actions
            .iter()
            .map(|(k, p)| {
                let mut p = p.clone();
                // The forecast names rules by ID (docs/forecast.md).
                if let Some(t) = p.pending.as_mut() {
                    t.rule_id = replay_bucket
                        .and_then(|b| b.action(k.rule_hash, k.kind))
                        .map(|a| a.rule().id.clone())
                        .unwrap_or_default();
                }
                (progress_key(k), p)
            })
            .collect();
        if rules.is_empty() && plan.has_replay(bucket) {
            // Halted before replay was set up: nothing new is known.
            return prev.cloned();
        }
        let halted = self
            .halted
            .clone()
            .or_else(|| self.walk_failures.get(bucket).cloned());
        let last_walked_ns = if self.walk_succeeded(bucket) {
            plan.now
        } else {
            prev.map_or(0, |p| p.last_walked_ns)
        };
        Some(BucketCursor {
            ts_ns: rules.values().map(|p| p.ts).min().unwrap_or(plan.now),
            rule_set_hash: plan.rule_set_hash_of(bucket),
            promoted_hash: plan.promoted_hash_of(bucket),
            last_walked_ns,
            completed_ns: if halted.is_none() {
                plan.observed_until
            } else {
                prev.map_or(0, |p| p.completed_ns)
            },
            halted,
            rules,
            walk_resume: None,
            backlog: self.backlog(bucket, false),
            // A finished recovery walked every store
            // (docs/meta-log.md#filer-crash).
            rewalk: None,
        })
    }

    /// The shard's cursor around its buckets' cursors.
    fn shard_cursor(
        &self,
        old: Option<&ShardCursor>,
        buckets: BTreeMap<String, BucketCursor>,
    ) -> ShardCursor {
        let plan = &self.plan;
        let ts_ns = buckets
            .values()
            .filter(|b| !b.rules.is_empty())
            .map(|b| b.ts_ns)
            .min()
            .unwrap_or_else(|| old.map_or(0, |o| o.ts_ns));
        let last_walked_ns = buckets
            .values()
            .map(|b| b.last_walked_ns)
            .max()
            .unwrap_or(0);
        ShardCursor {
            version: CURSOR_VERSION,
            shard_id: self.shard,
            updated_ns: 0,
            ts_ns,
            rule_set_hash: plan.global_rule_set_hash,
            promoted_hash: plan.global_promoted_hash,
            last_walked_ns,
            buckets,
            // Both noted at the pass start (`ShardCursor::note_filers`,
            // `go_activity::note`); a shard without a cursor remembers what
            // this pass read.
            go_cursor: match old {
                Some(o) => o.go_cursor,
                None => plan
                    .go_cursors
                    .as_ref()
                    .and_then(|m| m.get(&self.shard).copied()),
            },
            filers: match old {
                Some(o) => o.filers.clone(),
                None => plan.filers.clone().unwrap_or_default(),
            },
        }
    }
}
