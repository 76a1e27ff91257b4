//! The de-duplication that makes a meta-log stream resumed on another filer
//! deliver each event once (docs/meta-log.md#several-filers).

use std::collections::{HashSet, VecDeque};

use crate::engine::{MetaEvent, Nanos};

/// What a meta-log stream resumed on another filer must not deliver twice.
/// After a break the stream restarts `margin` before the newest delivered
/// event (events near it may still be on their way from a peer filer,
/// docs/meta-log.md#several-filers); the events delivered in that sliver
/// are remembered and dropped when they come again.
#[derive(Debug)]
pub struct ResumeDedup {
    margin: Nanos,
    newest: Option<Nanos>,
    /// Off where a stream is never resumed (one filer, or filers with their
    /// own stores): then nothing is remembered, a cost every replayed event
    /// paid for nothing (it held down the pass's scan rate).
    remember: bool,
    recent: VecDeque<EventKey>,
    seen: HashSet<EventKey>,
}

/// An event's identity: its timestamp and a 64-bit hash of the paths it
/// touched (directory, old name, new parent, new name). Two different events
/// look alike only with the same nanosecond timestamp *and* a hash collision;
/// keeping the paths themselves cost four string copies per event.
type EventKey = (Nanos, u64);

fn key_of(e: &MetaEvent) -> EventKey {
    use std::hash::{Hash, Hasher};
    fn name(en: &Option<Box<crate::pb::filer_pb::Entry>>) -> Option<&str> {
        en.as_ref().map(|x| x.name.as_str())
    }
    // Fixed keys: the same event hashes the same before and after a resume.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        e.directory.as_str(),
        name(&e.old_entry),
        e.new_parent_path.as_str(),
        name(&e.new_entry),
    )
        .hash(&mut h);
    (e.ts_ns, h.finish())
}

impl ResumeDedup {
    /// Nothing delivered yet; resume `margin` before the newest event.
    pub fn new(margin: Nanos) -> ResumeDedup {
        ResumeDedup {
            margin: margin.max(0),
            newest: None,
            remember: true,
            recent: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    /// For a stream that is never resumed: admits everything, remembers
    /// nothing.
    pub fn never_resumed() -> ResumeDedup {
        ResumeDedup {
            remember: false,
            ..ResumeDedup::new(0)
        }
    }

    /// Where a (re)subscription starts: the pass's `since` before anything
    /// was delivered, else `margin` before the newest delivered event (never
    /// before `since`).
    pub fn since(&self, since: Nanos) -> Nanos {
        match self.newest {
            Some(t) => t.saturating_sub(self.margin).max(since),
            None => since,
        }
    }

    /// Whether `event` is new (deliver it) or was delivered already (drop it).
    pub fn admit(&mut self, event: &MetaEvent) -> bool {
        let newest = self.newest.map_or(event.ts_ns, |n| n.max(event.ts_ns));
        if !self.remember {
            self.newest = Some(newest);
            return true;
        }
        let key = key_of(event);
        if !self.seen.insert(key) {
            return false;
        }
        self.newest = Some(newest);
        self.recent.push_back(key);
        // Forget what a resume can no longer bring back. Events arrive in
        // nearly ts order, so the oldest sit at the front.
        let floor = newest.saturating_sub(self.margin);
        while let Some(&(ts, _)) = self.recent.front() {
            if ts > floor {
                break;
            }
            if let Some(k) = self.recent.pop_front() {
                self.seen.remove(&k);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::Entry;

    fn ev(ts: Nanos, name: &str) -> MetaEvent {
        MetaEvent {
            ts_ns: ts,
            directory: "/buckets/b".into(),
            new_parent_path: "/buckets/b".into(),
            old_entry: None,
            new_entry: Some(Box::new(Entry {
                name: name.into(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn resumed_stream_delivers_each_event_once() {
        let mut d = ResumeDedup::new(10);
        assert_eq!(d.since(5), 5);
        for (ts, n) in [(100, "a"), (105, "b"), (104, "c"), (112, "d")] {
            assert!(d.admit(&ev(ts, n)));
        }
        // Resume 10 before the newest (112), not before the pass's since.
        assert_eq!(d.since(5), 102);
        assert_eq!(d.since(110), 110);
        // The new filer sends 104..112 again, plus one event the old one never did.
        assert!(!d.admit(&ev(104, "c")));
        assert!(!d.admit(&ev(105, "b")));
        assert!(d.admit(&ev(106, "late-from-peer")));
        assert!(!d.admit(&ev(112, "d")));
        assert!(d.admit(&ev(113, "e")));
        // Same ts, different object: a different event.
        assert!(d.admit(&ev(113, "f")));
    }

    #[test]
    fn a_stream_never_resumed_admits_everything_and_remembers_nothing() {
        let mut d = ResumeDedup::never_resumed();
        assert!(d.admit(&ev(100, "a")));
        assert!(d.admit(&ev(100, "a")));
        assert!(d.seen.is_empty() && d.recent.is_empty());
        assert_eq!(d.since(5), 100);
    }

    #[test]
    fn memory_stays_within_the_margin() {
        let mut d = ResumeDedup::new(10);
        for ts in 0..1000 {
            assert!(d.admit(&ev(ts, &ts.to_string())));
        }
        assert!(d.seen.len() <= 11, "{}", d.seen.len());
        assert_eq!(d.seen.len(), d.recent.len());
    }
}
