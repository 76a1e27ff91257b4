//! A shard's run takes the answers to its follow-up reads: a deferred match's
//! lookup, an abort's stamp check, and a drain that outlived its bound.

use super::*;

impl ShardRun {
    /// `Drain` outlived its bound ([`crate::pass::retry::drain_bound`]) with
    /// work still unanswered: the shard halts with `reason` unless it already
    /// stopped. The unanswered work stays unresolved — replay's cursor stays
    /// before it and every bucket this shard walked counts as not fully
    /// walked — and the window is given up, so a later `Drain` does not wait
    /// for answers that may never come. A late answer still lands (a delete
    /// that did happen is then counted). Returns the halt reason when this
    /// halted the shard.
    pub fn drain_timed_out(&mut self, reason: String) -> Option<String> {
        if self.in_flight == 0 && self.queue.is_empty() {
            return None;
        }
        self.queue.clear();
        self.in_flight = 0;
        for book in self.walks.values_mut() {
            book.unresolved = true;
            book.progress.block();
        }
        if self.stopped() {
            return None;
        }
        self.halted = Some(reason.clone());
        Some(reason)
    }

    /// The filer's answers to a [`Work::Lookup`] (`Err`: a lookup failed).
    /// Either settles the match (no delete needed, or not due yet) or queues
    /// the concrete delete first in line. Returns the halt reason when a
    /// failed lookup halted the shard. An id not waiting is ignored.
    pub fn lookup_done(&mut self, id: SendId, answer: LookupAnswer) -> Option<String> {
        let Some((Work::Lookup(m), ticket)) = self.answered(id) else {
            return None;
        };
        let entry = match answer.entry {
            // A displaced null version is deleted only while its key's
            // folder still points at a non-null version: the server would
            // delete a null that became current again.
            Ok(Some(e)) => match answer.folder {
                Some(Ok(f)) if !null_still_displaced(f.as_ref()) => Ok(None),
                Some(Err(err)) => Err(err),
                Some(Ok(_)) | None => Ok(Some(e)),
            },
            other => other,
        };
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let req = DeleteRequest::of(&m);
                let result = CallResult::transport(format!("deferred lookup failed: {e}"));
                return self.settle(&req, ticket, &result);
            }
        };
        let rule = self
            .plan
            .replay
            .as_ref()
            .and_then(|r| r.bucket(&m.bucket))
            .and_then(|b| b.action(m.rule_hash, m.kind))
            .map(|a| a.rule().clone());
        let resolved = rule.and_then(|r| resolve_deferred(&m, entry.as_ref(), &self.plan.time, &r));
        match resolved {
            // Nothing to delete: the match is resolved.
            None => self.settle_ticket(ticket, true),
            // Not due after all: like a pending match, the cursor stays
            // before the event (reported unresolved, which does not halt).
            Some(c) if c.due > self.plan.now => {
                self.counters.pending += 1;
                self.settle_ticket(ticket, false);
            }
            Some(_) if self.stopped() => {}
            Some(c) => self.queue.push_front((work_for(&c), ticket)),
        }
        None
    }

    /// The filer's answers to a [`Work::Check`]'s probes (same order as
    /// [`Check::probes`]). Settles the match, leaves it unresolved for the
    /// next pass (never a halt), or queues the abort first in line. Returns
    /// the verdict, for the shell's logs and metrics (`Settled` for an id not
    /// waiting for an answer, which changes nothing).
    pub fn check_done(&mut self, id: SendId, answers: &[Result<Vec<Entry>, String>]) -> Verdict {
        let Some((Work::Check(check), ticket)) = self.answered(id) else {
            return Verdict::Settled;
        };
        // Locks are judged at the real time the pass started: the gateway
        // enforces them by its clock, not by a `--now` in the future.
        let mut verdict = judge(&check, answers, self.plan.observed_until);
        if let Verdict::StillThere(why) = &verdict {
            // Sent again at once: the gateways' round-robin may give it to
            // one that reads the store still holding the entry. Past the
            // resends it stays unresolved for the next pass.
            let r = &check.request;
            let key = (
                r.bucket.clone(),
                r.object_path.clone(),
                r.version_id.clone(),
            );
            let stopped = self.stopped();
            let n = self.resent.entry(key).or_default();
            if *n < STILL_THERE_RESENDS && !stopped {
                *n += 1;
                self.queue.push_front((Work::Delete(check.request), ticket));
                return Verdict::Send;
            }
            verdict = Verdict::Unconfirmed(why.clone());
        }
        match &verdict {
            Verdict::Settled => self.settle_ticket(ticket, true),
            Verdict::CompletedLeftover(_) => {
                self.counters.completed_upload_leftovers += 1;
                self.settle_ticket(ticket, true);
            }
            Verdict::Locked(_) => {
                self.counters.locked += 1;
                self.settle_ticket(ticket, false);
            }
            Verdict::Unconfirmed(_) | Verdict::StillThere(_) => {
                self.counters.unconfirmed += 1;
                self.settle_ticket(ticket, false);
            }
            Verdict::Send if self.stopped() => self.settle_ticket(ticket, false),
            Verdict::Send => {
                if let Some(parts) = check.parts(answers) {
                    let r = &check.request;
                    self.abort_parts
                        .insert((r.bucket.clone(), r.object_path.clone()), parts);
                }
                self.queue.push_front((Work::Delete(check.request), ticket));
            }
        }
        verdict
    }
}
