//! Merging the meta-logs of several filers with their own stores into one
//! stream in `ts_ns` order, and telling a filer's own events from changes it
//! applied for a peer (docs/meta-log.md#several-filers).
//!
//! Pure: the adapter (`pass::ports`) feeds each filer's events, keepalive
//! positions and ends in, and takes merged events out.

use crate::engine::Nanos;

/// Where one input stream stands.
#[derive(Debug)]
enum Slot<T> {
    /// Nothing buffered; the stream is known to have nothing at or before
    /// `after` that it has not handed over yet (its last event or keepalive;
    /// `Nanos::MIN` before either).
    Waiting { after: Nanos },
    /// Its next event, not yet released.
    Ready { ts: Nanos, item: T },
    /// Ended normally: nothing more will come.
    Ended,
}

/// A k-way merge of per-filer event streams by `ts_ns`.
///
/// Each stream holds at most one event (its head). The merge releases the
/// oldest head once every other stream either has a head or is known to be
/// past that head's time (a keepalive or its previous event says so), or has
/// ended: the merged order is the order of the heads, so the merged position
/// never runs ahead of the slowest stream. Events a filer appended slightly
/// out of `ts_ns` order stay in its own order (docs/meta-log.md#ordering):
/// the merge never reorders within a stream and never drops anything.
#[derive(Debug)]
pub struct LogMerge<T> {
    slots: Vec<Slot<T>>,
}

impl<T> LogMerge<T> {
    /// `streams` inputs, none heard from yet.
    pub fn new(streams: usize) -> LogMerge<T> {
        LogMerge {
            slots: (0..streams)
                .map(|_| Slot::Waiting { after: Nanos::MIN })
                .collect(),
        }
    }

    /// The streams whose next item the merge needs before it can release
    /// anything more (none once every stream has a head or has ended).
    pub fn wanted(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Slot::Waiting { .. }))
            .map(|(i, _)| i)
    }

    /// Stream `i`'s next event. Only a stream in [`LogMerge::wanted`] may
    /// offer one; offering to a stream with a head is a caller bug and
    /// returns the item back.
    pub fn offer(&mut self, i: usize, ts: Nanos, item: T) -> Result<(), T> {
        match self.slots.get(i) {
            Some(Slot::Waiting { .. }) => {
                self.slots[i] = Slot::Ready { ts, item };
                Ok(())
            }
            _ => Err(item),
        }
    }

    /// Stream `i` reported a position (a keepalive): it has handed over
    /// everything up to `ts`.
    pub fn advance(&mut self, i: usize, ts: Nanos) {
        if let Some(Slot::Waiting { after }) = self.slots.get_mut(i) {
            *after = (*after).max(ts);
        }
    }

    pub fn end(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            *s = Slot::Ended;
        }
    }

    /// True once every stream ended and every event was released.
    pub fn done(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Ended))
    }

    /// The next event in merged order, with the stream it came from, or
    /// `None` while a stream that might still send an older one is silent.
    pub fn pop(&mut self) -> Option<(usize, T)> {
        let (i, ts) = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Ready { ts, .. } => Some((i, *ts)),
                _ => None,
            })
            // The lowest ts; on a tie the lower stream index, so the order
            // is deterministic.
            .min_by_key(|&(i, ts)| (ts, i))?;
        if self
            .slots
            .iter()
            .any(|s| matches!(s, Slot::Waiting { after } if *after < ts))
        {
            return None;
        }
        match std::mem::replace(&mut self.slots[i], Slot::Waiting { after: ts }) {
            Slot::Ready { item, .. } => Some((i, item)),
            // Unreachable: `i` was chosen among the ready slots.
            other => {
                self.slots[i] = other;
                None
            }
        }
    }
}

/// Whether an event in filer `own`'s local log is a change that filer
/// applied on behalf of another filer of the pool, so that the other filer's
/// own log holds it too and the merge must drop this copy.
///
/// A filer appends its signature to an event's `signatures` after the
/// signatures the change arrived with, so a change that passed through
/// another filer carries that filer's signature before `own`
/// (docs/meta-log.md#several-filers). An event whose earlier signatures
/// belong to no filer of the pool (e.g. `filer.sync` from another cluster)
/// exists only here and is kept.
pub fn applied_for_peer(signatures: &[i32], own: i32, pool: &[i32]) -> bool {
    signatures
        .iter()
        .take_while(|s| **s != own)
        .any(|s| pool.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drains everything `m` can release now.
    fn drain(m: &mut LogMerge<&'static str>) -> Vec<(usize, &'static str)> {
        std::iter::from_fn(|| m.pop()).collect()
    }

    #[test]
    fn merged_order_is_ts_order_across_streams() {
        let mut m = LogMerge::new(2);
        assert_eq!(m.wanted().collect::<Vec<_>>(), [0, 1]);
        m.offer(0, 10, "a10").unwrap();
        // Stream 1 has not answered: nothing can go yet.
        assert!(m.pop().is_none());
        m.offer(1, 5, "b5").unwrap();
        assert_eq!(drain(&mut m), [(1, "b5")]);
        // Stream 1 must speak again before a10 can go.
        assert_eq!(m.wanted().collect::<Vec<_>>(), [1]);
        m.offer(1, 12, "b12").unwrap();
        assert_eq!(drain(&mut m), [(0, "a10")]);
        m.end(0);
        assert_eq!(drain(&mut m), [(1, "b12")]);
        assert!(!m.done());
        m.end(1);
        assert!(m.done());
    }

    #[test]
    fn a_keepalive_releases_older_heads_of_other_streams() {
        let mut m = LogMerge::new(3);
        m.offer(0, 100, "a100").unwrap();
        m.advance(1, 99);
        m.advance(2, 150);
        assert!(m.pop().is_none(), "stream 1 is only known up to 99");
        m.advance(1, 100);
        assert_eq!(drain(&mut m), [(0, "a100")]);
        // A keepalive never moves a position back.
        m.advance(2, 10);
        m.offer(0, 140, "a140").unwrap();
        m.advance(1, 200);
        assert_eq!(drain(&mut m), [(0, "a140")]);
    }

    #[test]
    fn one_stream_ending_early_lets_the_others_run() {
        let mut m = LogMerge::new(2);
        m.end(1);
        for (ts, name) in [(1, "a1"), (2, "a2"), (3, "a3")] {
            assert_eq!(m.wanted().collect::<Vec<_>>(), [0]);
            m.offer(0, ts, name).unwrap();
            assert_eq!(drain(&mut m), [(0, name)]);
        }
        m.end(0);
        assert!(m.done());
    }

    #[test]
    fn a_stream_out_of_order_keeps_its_own_order_and_loses_nothing() {
        // Stream 0 appended 20 before 19 (docs/meta-log.md#ordering).
        let mut m = LogMerge::new(2);
        let mut out = Vec::new();
        let a = [(20, "a20"), (19, "a19"), (30, "a30")];
        let b = [(18, "b18"), (25, "b25")];
        let (mut ai, mut bi) = (0, 0);
        while !m.done() {
            for i in m.wanted().collect::<Vec<_>>() {
                let (src, idx) = if i == 0 {
                    (&a[..], &mut ai)
                } else {
                    (&b[..], &mut bi)
                };
                match src.get(*idx) {
                    Some(&(ts, n)) => {
                        m.offer(i, ts, n).unwrap();
                        *idx += 1;
                    }
                    None => m.end(i),
                }
            }
            out.extend(drain(&mut m).into_iter().map(|(_, n)| n));
        }
        assert_eq!(out, ["b18", "a20", "a19", "b25", "a30"]);
    }

    #[test]
    fn ties_go_to_the_lower_stream_and_offers_to_a_full_slot_are_refused() {
        let mut m = LogMerge::new(2);
        m.offer(1, 7, "b7").unwrap();
        m.offer(0, 7, "a7").unwrap();
        assert_eq!(m.offer(0, 8, "again"), Err("again"));
        assert_eq!(m.offer(5, 8, "nowhere"), Err("nowhere"));
        assert_eq!(m.pop(), Some((0, "a7")));
        m.end(0);
        assert_eq!(m.pop(), Some((1, "b7")));
        assert!(m.pop().is_none());
    }

    #[test]
    fn changes_applied_for_a_peer_are_recognised() {
        let pool = [11, 22];
        // Written through filer 22 itself (S3 or a filer call).
        assert!(!applied_for_peer(&[22], 22, &pool));
        assert!(!applied_for_peer(&[], 22, &pool));
        // Arrived from filer 11, then stamped by 22.
        assert!(applied_for_peer(&[11, 22], 22, &pool));
        // From a filer outside the pool (another cluster's filer.sync): only here.
        assert!(!applied_for_peer(&[99, 22], 22, &pool));
        // A peer's signature after our own is a later hop, not the origin.
        assert!(!applied_for_peer(&[22, 11], 22, &pool));
    }
}
