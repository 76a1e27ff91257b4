//! The pending tally behind the forecast (docs/forecast.md#the-pending-tally):
//! per action, what replay saw matched but not yet resolved, counted by the
//! lifecycle day it is due, kept per due-index span next to the index in the
//! action's progress, and kept up the way the index is
//! (docs/forecast.md#upkeep). A missing, foreign (other `time.*`) or corrupt
//! tally reads as `None` ("unknown"); a pass never depends on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::due_index::{self, DueIndex};
use super::time::{DueRounding, Nanos, TimeConfig};

/// Format version of [`PendingTally`]; another version reads as unknown.
pub const TALLY_VERSION: u32 = 1;

/// Most due-day bins kept per span. Past it the latest bins are folded into
/// one (counted on its later day): the size stays bounded, the totals exact.
pub const BINS_PER_SPAN: usize = 32;

/// One due-day bin: `(due by, count, bytes, earliest due)`. `due by` is the
/// lifecycle-day boundary at or after every due time counted in it.
pub type Bin = (Nanos, u64, u64, Nanos);

/// One action's pending tally, persisted in its progress (`pending`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTally {
    /// [`TALLY_VERSION`].
    pub v: u32,
    /// `time.day` (ns) the bins were computed with.
    pub day_ns: Nanos,
    /// `time.rounding` the due times were computed with.
    pub rounding: DueRounding,
    /// The rule's ID (for display; the progress key holds the hash).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule_id: String,
    /// False when some kept index span was never counted (an index written
    /// before the tally existed): the counts are then a lower bound.
    pub complete: bool,
    /// Due-index span start → bins, sorted by `due by`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spans: BTreeMap<Nanos, Vec<Bin>>,
}

impl PendingTally {
    /// Whether the tally was counted with `time`'s day and rounding.
    pub fn usable_for(&self, time: &TimeConfig) -> bool {
        self.v == TALLY_VERSION
            && self.day_ns == time.day_ns()
            && self.rounding == time.rounding
            && self.spans.values().all(|b| b.len() <= BINS_PER_SPAN)
    }

    /// Every bin of every span.
    pub fn bins(&self) -> impl Iterator<Item = &Bin> {
        self.spans.values().flatten()
    }
}

/// The lifecycle-day boundary at or after `due`.
pub fn due_by(due: Nanos, time: &TimeConfig) -> Nanos {
    let d = time.day_ns();
    if due.rem_euclid(d) == 0 {
        due
    } else {
        due.div_euclid(d).saturating_add(1).saturating_mul(d)
    }
}

/// What a pass counted: width-aligned span start → due by → (count, bytes,
/// earliest due).
pub type Observed = BTreeMap<Nanos, BTreeMap<Nanos, (u64, u64, Nanos)>>;

/// Counts an unresolved match of the event at `ev_ts`, due at `due`, of
/// `bytes` bytes.
pub fn observe(obs: &mut Observed, time: &TimeConfig, ev_ts: Nanos, due: Nanos, bytes: u64) {
    let width = due_index::span_width(time);
    let from = ev_ts.div_euclid(width).saturating_mul(width);
    add_bin(
        obs.entry(from).or_default(),
        due_by(due, time),
        (1, bytes, due),
    );
}

/// Adds `(count, bytes, earliest due)` into the bin due by `by`.
fn add_bin(bins: &mut BTreeMap<Nanos, (u64, u64, Nanos)>, by: Nanos, add: (u64, u64, Nanos)) {
    let e = bins.entry(by).or_insert((0, 0, add.2));
    e.0 += add.0;
    e.1 = e.1.saturating_add(add.1);
    e.2 = e.2.min(add.2);
}

/// What a pass read of one action, as given to [`due_index::rebuild`].
#[derive(Debug, Clone, Copy)]
pub struct PassRead<'a> {
    /// The action's `ts` at the start of the pass.
    pub start_ts: Nanos,
    /// The merged ranges the action needed.
    pub own: &'a [(Nanos, Nanos)],
    /// Every event of `own` up to it was decided (`None`: none reliably).
    pub limit: Option<Nanos>,
}

/// The tally after a pass, next to the rebuilt index `new`.
///
/// `old`/`old_index`: what the pass started from (only used when both are
/// usable for `time`); `read`: what the pass read; `observed`: the
/// unresolved matches the pass saw.
pub fn rebuild(
    old: Option<&PendingTally>,
    old_index: Option<&DueIndex>,
    new: &DueIndex,
    time: &TimeConfig,
    read: PassRead<'_>,
    observed: &Observed,
) -> PendingTally {
    let PassRead {
        start_ts,
        own,
        limit,
    } = read;
    let old = old.filter(|t| t.usable_for(time));
    let mut complete = true;
    let mut raw: Vec<(Nanos, Bin)> = Vec::new();
    if let Some(oi) = old_index {
        for &(from, to, _) in &oi.spans {
            if to <= start_ts || due_index::span_read(from, to, start_ts, new.through, own, limit) {
                continue;
            }
            // Kept unread: its counts stand until a pass re-reads it.
            match old.and_then(|t| t.spans.get(&from)) {
                Some(bins) => raw.extend(bins.iter().map(|b| (from, *b))),
                None => complete = false,
            }
        }
    }
    for (&from, bins) in observed {
        raw.extend(
            bins.iter()
                .map(|(&by, &(n, bytes, first))| (from, (by, n, bytes, first))),
        );
    }
    // Re-key by the new index's spans (normalizing may have merged several).
    let mut spans: BTreeMap<Nanos, BTreeMap<Nanos, (u64, u64, Nanos)>> = BTreeMap::new();
    for (key, (by, n, bytes, first)) in raw {
        let i = new.spans.partition_point(|s| s.0 <= key);
        let span = if i > 0 && key <= new.spans[i - 1].1 {
            new.spans[i - 1].0
        } else {
            key
        };
        add_bin(spans.entry(span).or_default(), by, (n, bytes, first));
    }
    let spans = spans
        .into_iter()
        .map(|(k, bins)| {
            let mut v: Vec<Bin> = bins
                .into_iter()
                .map(|(by, (n, b, f))| (by, n, b, f))
                .collect();
            while v.len() > BINS_PER_SPAN {
                let last = v.pop().expect("len > cap > 0");
                let prev = v.last_mut().expect("len ≥ cap > 0");
                *prev = (
                    last.0,
                    prev.1 + last.1,
                    prev.2.saturating_add(last.2),
                    prev.3.min(last.3),
                );
            }
            (k, v)
        })
        .collect();
    PendingTally {
        v: TALLY_VERSION,
        day_ns: time.day_ns(),
        rounding: time.rounding,
        rule_id: old.map(|t| t.rule_id.clone()).unwrap_or_default(),
        complete,
        spans,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::due_index::tests::time;

    /// The tally of a first pass (no earlier tally or index) that read from
    /// `start_ts` to the end of the meta-log.
    pub(crate) fn first_tally(index: &DueIndex, start_ts: Nanos, obs: &Observed) -> PendingTally {
        rebuild(
            None,
            None,
            index,
            &time(),
            PassRead {
                start_ts,
                own: &[],
                limit: None,
            },
            obs,
        )
    }

    fn idx(through: Nanos, spans: Vec<(Nanos, Nanos, Nanos)>) -> DueIndex {
        DueIndex {
            spans,
            ..DueIndex::empty(&time(), through)
        }
    }

    #[test]
    fn due_by_rounds_up_to_the_day_boundary() {
        let t = time();
        assert_eq!(due_by(2400, &t), 2400);
        assert_eq!(due_by(2401, &t), 4800);
        assert_eq!(due_by(1, &t), 2400);
    }

    /// A second pass that read the first span and the new tail.
    const SECOND_READ: PassRead<'static> = PassRead {
        start_ts: 50,
        own: &[(99, 199), (600, 700)],
        limit: Some(695),
    };

    #[test]
    fn a_span_re_read_is_replaced_and_an_unread_one_kept() {
        let t = time();
        // Two spans of 100 ns (width = 2400/24).
        let old_index = idx(600, vec![(100, 199, 4000), (200, 299, 9000)]);
        let mut obs = Observed::new();
        observe(&mut obs, &t, 150, 4000, 10);
        observe(&mut obs, &t, 250, 9000, 20);
        let first = first_tally(&old_index, 50, &obs);
        assert_eq!(first.bins().map(|b| b.1).sum::<u64>(), 2);
        assert!(first.complete);
        // Next pass reads the first span only: one of its two matches
        // resolved, a new one appeared; the second span is kept as counted.
        let mut obs = Observed::new();
        observe(&mut obs, &t, 160, 4100, 7);
        let new_index = idx(695, vec![(100, 199, 4100), (200, 299, 9000)]);
        let second = rebuild(
            Some(&first),
            Some(&old_index),
            &new_index,
            &t,
            SECOND_READ,
            &obs,
        );
        assert_eq!(second.spans[&100], vec![(4800, 1, 7, 4100)]);
        assert_eq!(second.spans[&200], vec![(9600, 1, 20, 9000)]);
        assert!(second.complete);
    }

    #[test]
    fn resolution_removes_and_a_missing_old_tally_is_incomplete() {
        let t = time();
        let old_index = idx(600, vec![(100, 199, 4000), (200, 299, 9000)]);
        // The first span was read and everything in it resolved; the second
        // was kept but never counted (index older than the tally).
        let new_index = idx(695, vec![(200, 299, 9000)]);
        let out = rebuild(
            None,
            Some(&old_index),
            &new_index,
            &t,
            SECOND_READ,
            &Observed::new(),
        );
        assert!(out.spans.is_empty());
        assert!(!out.complete);
    }

    #[test]
    fn bins_per_span_are_bounded_and_totals_kept() {
        let t = time();
        let mut obs = Observed::new();
        for i in 0..(BINS_PER_SPAN as i64 + 10) {
            observe(&mut obs, &t, 150, 3000 + i * 2400, 1);
        }
        let new_index = idx(600, vec![(100, 199, 3000)]);
        let out = first_tally(&new_index, 50, &obs);
        assert_eq!(out.spans[&100].len(), BINS_PER_SPAN);
        assert_eq!(
            out.bins().map(|b| b.1).sum::<u64>(),
            BINS_PER_SPAN as u64 + 10
        );
    }

    #[test]
    fn merged_index_spans_rekey_the_tally() {
        let t = time();
        let mut obs = Observed::new();
        observe(&mut obs, &t, 150, 3000, 1);
        observe(&mut obs, &t, 250, 5000, 2);
        let new_index = idx(600, vec![(100, 299, 3000)]);
        let out = first_tally(&new_index, 50, &obs);
        assert_eq!(out.spans.keys().copied().collect::<Vec<_>>(), vec![100]);
    }

    #[test]
    fn corrupt_or_foreign_tallies_read_as_unknown() {
        #[derive(Deserialize)]
        struct W {
            #[serde(default, deserialize_with = "due_index::lenient")]
            pending: Option<PendingTally>,
        }
        let w: W = serde_json::from_str(r#"{"pending": {"v": "x"}}"#).unwrap();
        assert!(w.pending.is_none());
        let mut tally = first_tally(&idx(0, vec![]), 0, &Observed::new());
        assert!(tally.usable_for(&time()));
        tally.v = 99;
        assert!(!tally.usable_for(&time()));
    }
}
