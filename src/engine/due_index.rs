//! The due index: which stretches of meta-log a steady pass must re-read
//! (docs/due-index.md). Per action, next to its
//! [`ActionProgress`](super::cursor::ActionProgress), a [`DueIndex`] of spans
//! of event `ts_ns`, each with the earliest due time of its unresolved
//! matches; a pass at `now` reads only the spans due by `now` and the events
//! after `index.through` ([`ranges_for`](super::cursor::ActionProgress::ranges_for)).
//!
//! Invariant (the only thing replay relies on, docs/due-index.md#why-it-is-exact):
//! every unresolved match of an event `e` with `progress.ts < e.ts ≤
//! index.through` has a due time at or after the `due` of some span containing
//! `e.ts`. Merging spans (union, earliest due) or keeping a stale one never
//! breaks it, it only makes a later pass read more. A missing, corrupt or
//! foreign index reads as absent (docs/due-index.md#fallback).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::time::{DueRounding, Nanos, TimeConfig};

/// Most spans kept per action. 24 per lifecycle day covers a 170-day window
/// at full resolution; past it, neighbouring spans are merged (each read then
/// covers more, nothing is missed).
pub const DUE_INDEX_CAP: usize = 4096;

/// Spans per lifecycle day: an hour with real 24 h days.
pub const SPANS_PER_DAY: i64 = 24;

/// One action's due index. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DueIndex {
    /// `time.day` (ns) the due times were computed with.
    pub day_ns: Nanos,
    /// `time.rounding` the due times were computed with.
    pub rounding: DueRounding,
    /// The events in `(progress.ts, through]` are indexed; later ones were
    /// never read for this action.
    pub through: Nanos,
    /// Sorted, non-overlapping `[from, to, due]`: events with `from ≤ ts ≤
    /// to` may hold unresolved matches, none due before `due`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<(Nanos, Nanos, Nanos)>,
}

impl DueIndex {
    /// An empty index over `(ts, through]`.
    pub fn empty(time: &TimeConfig, through: Nanos) -> DueIndex {
        DueIndex {
            day_ns: time.day_ns(),
            rounding: time.rounding,
            through,
            spans: Vec::new(),
        }
    }

    /// Whether this index can be trusted for a pass with `time`: same day
    /// length and rounding, spans sorted, non-overlapping and well formed,
    /// within the cap. Anything else is read as "no index".
    pub fn usable_for(&self, time: &TimeConfig) -> bool {
        self.day_ns == time.day_ns()
            && self.rounding == time.rounding
            && self.spans.len() <= DUE_INDEX_CAP
            && self.spans.iter().all(|s| s.0 <= s.1)
            && self.spans.windows(2).all(|w| w[0].1 < w[1].0)
    }
}

/// The width of one new span: a 24th of the lifecycle day (an hour).
pub fn span_width(time: &TimeConfig) -> Nanos {
    (time.day_ns() / SPANS_PER_DAY).max(1)
}

/// serde `deserialize_with` for an optional index or tally: anything that does
/// not parse as a `T` reads as `None` (the index: fallback to the full-window
/// read; the tally: unknown) instead of failing the whole cursor.
pub fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

/// Merged `ranges` cut at `end`: the parts at or before it; a range that
/// starts at or after it goes (docs/due-index.md#pass-start).
pub fn cut_ranges(ranges: Vec<(Nanos, Nanos)>, end: Nanos) -> Vec<(Nanos, Nanos)> {
    ranges
        .into_iter()
        .filter(|&(since, _)| since < end)
        .map(|(since, until)| (since, until.min(end)))
        .collect()
}

/// Sorts and merges `(since, until]` ranges: overlapping and touching ones
/// (`(a, b]` and `(b, c]`) become one; empty ones go.
pub fn merge_ranges(mut ranges: Vec<(Nanos, Nanos)>) -> Vec<(Nanos, Nanos)> {
    ranges.retain(|r| r.0 < r.1);
    ranges.sort_unstable();
    let mut out: Vec<(Nanos, Nanos)> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
            _ => out.push(r),
        }
    }
    out
}

/// Whether every ts in `[lo, hi]` lies in one of the merged `(since, until]`
/// `ranges` (true when `lo > hi`).
pub fn covered(ranges: &[(Nanos, Nanos)], lo: Nanos, hi: Nanos) -> bool {
    lo > hi || ranges.iter().any(|r| r.0 < lo && hi <= r.1)
}

/// The index after a pass.
///
/// - `old`: the usable index the pass started from (`None`: it read the whole
///   window from `start_ts`);
/// - `start_ts`: the action's `ts` at the start of the pass;
/// - `own`: the merged ranges the action needed ([`ranges_for`](super::cursor::ActionProgress::ranges_for));
/// - `limit`: every event of `own` up to it was decided in this pass (`None`:
///   none reliably, e.g. a halt before the first event);
/// - `observed`: `[from, to] → earliest due` of the matches this pass left
///   unresolved (pending, failed, in flight), by span of [`span_width`].
///
/// A span of `old` that the pass read entirely (up to `limit`) is replaced by
/// what was observed in it; any other is kept as it was. The index then covers
/// up to `limit` when the pass read everything between `old.through` and it.
///
/// Also returns the start of the first span kept from `old`: the action's `ts`
/// must stay before it, since the pass did not see those matches (the ones it
/// observed already hold `ts` back as pending or unresolved).
pub fn rebuild(
    old: Option<&DueIndex>,
    time: &TimeConfig,
    start_ts: Nanos,
    own: &[(Nanos, Nanos)],
    limit: Option<Nanos>,
    observed: &BTreeMap<Nanos, (Nanos, Nanos)>,
) -> (DueIndex, Option<Nanos>) {
    let old_through = old.map_or(start_ts, |o| o.through.max(start_ts));
    let through = match limit {
        Some(l) if l > old_through && covered(own, old_through + 1, l) => l,
        _ => old_through,
    };
    // Only a span's events inside the new index's domain matter: later ones
    // are re-read as the next pass's tail. The span is replaced when all of
    // those were read (the hour that holds the pass's last event is usually
    // read only up to `limit`).
    let mut spans: Vec<(Nanos, Nanos, Nanos)> = old
        .into_iter()
        .flat_map(|o| o.spans.iter().copied())
        .filter(|&(from, to, _)| {
            to > start_ts && !span_read(from, to, start_ts, through, own, limit)
        })
        .collect();
    let carried_from = spans.iter().map(|s| s.0).min();
    spans.extend(observed.iter().map(|(&from, &(to, due))| (from, to, due)));
    let spans = normalize(spans);
    (
        DueIndex {
            spans,
            ..DueIndex::empty(time, through)
        },
        carried_from,
    )
}

/// Whether a pass read all of the old index span `[from, to]`: every event
/// of it inside the new index's domain (up to `through`) lies in `own` and
/// up to `limit`. [`rebuild`] replaces exactly those spans.
pub fn span_read(
    from: Nanos,
    to: Nanos,
    start_ts: Nanos,
    through: Nanos,
    own: &[(Nanos, Nanos)],
    limit: Option<Nanos>,
) -> bool {
    let hi = to.min(through);
    limit.is_some_and(|l| hi <= l && covered(own, from.max(start_ts + 1), hi))
}

/// Sorts spans, merges overlapping ones (union, earliest due) and, past
/// [`DUE_INDEX_CAP`], merges neighbours pairwise until it fits.
pub fn normalize(mut spans: Vec<(Nanos, Nanos, Nanos)>) -> Vec<(Nanos, Nanos, Nanos)> {
    spans.sort_unstable();
    let mut out: Vec<(Nanos, Nanos, Nanos)> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => {
                last.1 = last.1.max(s.1);
                last.2 = last.2.min(s.2);
            }
            _ => out.push(s),
        }
    }
    while out.len() > DUE_INDEX_CAP {
        out = out
            .chunks(2)
            .map(|c| match c {
                [a, b] => (a.0, a.1.max(b.1), a.2.min(b.2)),
                [a] => *a,
                _ => unreachable!("chunks(2) yields one or two"),
            })
            .collect();
    }
    out
}

/// Records an unresolved match of the event at `ev_ts`, due at `due`, into
/// `observed` (span start → (span end, earliest due)).
pub fn observe(
    observed: &mut BTreeMap<Nanos, (Nanos, Nanos)>,
    width: Nanos,
    ev_ts: Nanos,
    due: Nanos,
) {
    let from = ev_ts.div_euclid(width).saturating_mul(width);
    let to = from.saturating_add(width - 1);
    let e = observed.entry(from).or_insert((to, due));
    e.1 = e.1.min(due);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    /// A 2400 ns day without rounding: the clock of the due-index, tally and
    /// forecast tests.
    pub(crate) fn time() -> TimeConfig {
        TimeConfig {
            day: Duration::from_nanos(2400),
            rounding: DueRounding::None,
        }
    }

    #[test]
    fn overlapping_or_unsorted_spans_are_corrupt() {
        let mut idx = DueIndex::empty(&time(), 600);
        idx.spans = vec![(100, 200, 5), (150, 300, 5)];
        assert!(!idx.usable_for(&time()));
        idx.spans = vec![(300, 200, 5)];
        assert!(!idx.usable_for(&time()));
    }

    #[test]
    fn corrupt_json_reads_as_no_index() {
        #[derive(Deserialize)]
        struct W {
            #[serde(default, deserialize_with = "lenient")]
            due: Option<DueIndex>,
        }
        let w: W = serde_json::from_str(r#"{"due": {"day_ns": "x"}}"#).unwrap();
        assert!(w.due.is_none());
        let w: W = serde_json::from_str(r#"{"due": null}"#).unwrap();
        assert!(w.due.is_none());
        let w: W = serde_json::from_str(
            r#"{"due": {"day_ns": 2400, "rounding": "none", "through": 9, "spans": [[1,2,3]]}}"#,
        )
        .unwrap();
        assert_eq!(w.due.unwrap().spans, vec![(1, 2, 3)]);
    }

    #[test]
    fn cut_ranges_keeps_what_lies_at_or_before_the_end() {
        let ranges = vec![(0, 10), (20, 30), (40, 50)];
        assert_eq!(cut_ranges(ranges.clone(), 25), vec![(0, 10), (20, 25)]);
        assert_eq!(cut_ranges(ranges.clone(), 20), vec![(0, 10)]);
        assert_eq!(cut_ranges(ranges.clone(), 60), ranges);
    }

    #[test]
    fn merge_ranges_joins_touching_and_drops_empty() {
        assert_eq!(
            merge_ranges(vec![(5, 9), (0, 5), (20, 20), (12, 15), (14, 30)]),
            vec![(0, 9), (12, 30)]
        );
    }

    #[test]
    fn rebuild_replaces_read_spans_and_keeps_unread_ones() {
        let t = time();
        let old = DueIndex {
            spans: vec![(100, 199, 450), (200, 299, 9_000)],
            ..DueIndex::empty(&t, 600)
        };
        let own = vec![(99, 199), (600, 700)];
        let mut observed = BTreeMap::new();
        observe(&mut observed, span_width(&t), 150, 5_000);
        observe(&mut observed, span_width(&t), 650, 800);
        let new = rebuild(Some(&old), &t, 50, &own, Some(695), &observed).0;
        assert_eq!(new.through, 695);
        assert_eq!(
            new.spans,
            vec![(100, 199, 5_000), (200, 299, 9_000), (600, 699, 800)]
        );
    }

    #[test]
    fn a_pass_stopped_early_keeps_old_spans_and_coverage() {
        let t = time();
        let old = DueIndex {
            spans: vec![(100, 199, 450), (300, 399, 460)],
            ..DueIndex::empty(&t, 600)
        };
        let own = vec![(99, 199), (299, 399), (600, 700)];
        // Stopped at 250: the first span was read, the second was not.
        let new = rebuild(Some(&old), &t, 50, &own, Some(250), &BTreeMap::new()).0;
        assert_eq!(new.through, 600);
        assert_eq!(new.spans, vec![(300, 399, 460)]);
        // Nothing processed at all: everything kept.
        let new = rebuild(Some(&old), &t, 50, &own, None, &BTreeMap::new()).0;
        assert_eq!(new, old);
    }

    #[test]
    fn the_span_holding_the_last_event_read_is_replaced_up_to_the_limit() {
        // Regression (tests/e2e_due_index.rs): the hour that holds the pass's
        // last event ends after `limit`; it was kept with its old due time
        // and re-read in full at every later pass.
        let t = time();
        let old = DueIndex {
            spans: vec![(100, 199, 450)],
            ..DueIndex::empty(&t, 120)
        };
        let own = vec![(99, 700)];
        let new = rebuild(Some(&old), &t, 50, &own, Some(150), &BTreeMap::new()).0;
        assert_eq!((new.through, new.spans.clone()), (150, vec![]));
        // Stopped before `old.through`: its unread part keeps the span.
        let old = DueIndex {
            spans: vec![(100, 199, 450)],
            ..DueIndex::empty(&t, 180)
        };
        let new = rebuild(Some(&old), &t, 50, &own, Some(150), &BTreeMap::new()).0;
        assert_eq!((new.through, new.spans), (180, vec![(100, 199, 450)]));
    }

    #[test]
    fn spans_at_or_before_ts_are_dropped() {
        let t = time();
        let old = DueIndex {
            spans: vec![(10, 40, 9_000), (100, 199, 9_000)],
            ..DueIndex::empty(&t, 600)
        };
        let new = rebuild(
            Some(&old),
            &t,
            50,
            &[(600, 700)],
            Some(695),
            &BTreeMap::new(),
        );
        assert_eq!(new.0.spans, vec![(100, 199, 9_000)]);
        // The kept span holds `ts` back.
        assert_eq!(new.1, Some(100));
    }

    #[test]
    fn normalize_caps_by_merging_neighbours() {
        let spans: Vec<_> = (0..(DUE_INDEX_CAP as i64 + 10))
            .map(|i| (i * 10, i * 10 + 5, 1_000 - i))
            .collect();
        let out = normalize(spans.clone());
        assert!(out.len() <= DUE_INDEX_CAP);
        // Every old span is inside a new one with an earlier or equal due.
        for s in spans {
            assert!(out.iter().any(|n| n.0 <= s.0 && s.1 <= n.1 && n.2 <= s.2));
        }
    }
}
