//! Resumable recovery walks, pure: listing positions, their tree order, where a
//! resumed listing starts in each ancestor directory, and the per-bucket
//! bookkeeping that moves a shard's resume point only over items whose walker
//! deletes all resolved (docs/design-deviations.md#resumable-recovery-walks).

use std::cmp::Ordering;
use std::collections::VecDeque;

/// Compares two listing positions (bucket-relative paths) in the lister's
/// tree order: component by component, a directory before its contents and
/// its contents before its next sibling (`a` < `a/z` < `a.b`).
pub fn pos_cmp(a: &str, b: &str) -> Ordering {
    a.split('/').cmp(b.split('/'))
}

/// Whether position `pos` lies beyond the resume point `from` (`None`: the
/// walk starts from the beginning, every position lies beyond it).
pub fn is_after(pos: &str, from: Option<&str>) -> bool {
    from.is_none_or(|f| pos_cmp(pos, f) == Ordering::Greater)
}

/// The later of two resume points (`None` = nothing done yet).
pub fn later<'a>(a: Option<&'a str>, b: Option<&'a str>) -> Option<&'a str> {
    // Equal positions are equal strings: which one wins does not matter.
    a.into_iter().chain(b).max_by(|x, y| pos_cmp(x, y))
}

/// The earliest of several walkers' resume points: where one shared listing
/// must start. Any walker starting from the beginning (`None`) makes it `None`.
pub fn listing_start<'a>(froms: impl IntoIterator<Item = Option<&'a str>>) -> Option<&'a str> {
    froms
        .into_iter()
        .try_fold(None, |out: Option<&'a str>, f| {
            let f = f?;
            Some(Some(
                out.filter(|o| pos_cmp(o, f) != Ordering::Greater)
                    .unwrap_or(f),
            ))
        })
        .flatten()
}

/// Per ancestor directory, where a listing resumed after `from` starts: the
/// components of `from`. The directory at depth `i` is listed from component
/// `i` inclusive; the entry named by the last component is not emitted again
/// (its item lies at `from`), while a directory there is descended into from
/// the start.
pub fn start_points(from: &str) -> Vec<String> {
    from.split('/').map(str::to_string).collect()
}

/// One shard's walker progress in one bucket during a pass: the listed items
/// that still have walker deletes outstanding, in listing order, and the last
/// position all of whose deletes (and every earlier one's) resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkProgress {
    next_seq: u64,
    /// `(seq, position, deletes not yet resolved)`, in listing order.
    open: VecDeque<(u64, String, usize)>,
    /// Last position everything up to which resolved on this shard.
    done: Option<String>,
    /// An item did not resolve (or was never sent): nothing moves past it.
    blocked: bool,
}

impl WalkProgress {
    /// Records an item at `pos` with `deletes` walker deletes queued; answers
    /// the sequence number its deletes carry (`None` once blocked: nothing is
    /// tracked any more).
    pub fn item(&mut self, pos: &str, deletes: usize) -> Option<u64> {
        if self.blocked {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.open.push_back((seq, pos.to_string(), deletes));
        self.advance();
        Some(seq)
    }

    /// One delete of item `seq` resolved.
    pub fn resolved(&mut self, seq: u64) {
        if let Some(e) = self.open.iter_mut().find(|e| e.0 == seq) {
            e.2 = e.2.saturating_sub(1);
        }
        self.advance();
    }

    /// An item's delete did not resolve, or items were dropped unsent: the
    /// resume point stays where it is for the rest of the pass.
    pub fn block(&mut self) {
        self.blocked = true;
    }

    fn advance(&mut self) {
        if self.blocked {
            return;
        }
        while let Some((_, _, 0)) = self.open.front() {
            if let Some((_, pos, _)) = self.open.pop_front() {
                self.done = Some(pos);
            }
        }
    }

    /// The resume point after this pass: the last position with everything
    /// resolved, or, when nothing of this shard is outstanding, `reached`
    /// (the listing's last delivered position).
    pub fn resume_point(&self, reached: Option<&str>) -> Option<String> {
        if !self.blocked && self.open.is_empty() {
            return later(self.done.as_deref(), reached).map(str::to_string);
        }
        self.done.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_order_puts_a_directory_before_its_siblings_with_longer_names() {
        let mut v = vec!["a.b", "a/z", "a", "a/b/c", "b", "a-", ".uploads/x", "a/b"];
        v.sort_by(|x, y| pos_cmp(x, y));
        assert_eq!(
            v,
            vec![".uploads/x", "a", "a/b", "a/b/c", "a/z", "a-", "a.b", "b"]
        );
        assert!(is_after("a/c", Some("a/b/zzz")));
        assert!(!is_after("a/b/zzz", Some("a/b/zzz")));
        assert!(!is_after("a", Some("a/b")));
        assert!(is_after("a", None));
    }

    #[test]
    fn listing_starts_at_the_earliest_walker() {
        assert_eq!(listing_start([Some("b"), Some("a/x")]), Some("a/x"));
        assert_eq!(listing_start([Some("b"), None]), None);
        assert_eq!(listing_start(std::iter::empty()), None);
        assert_eq!(start_points("d/e/f.versions"), vec!["d", "e", "f.versions"]);
    }

    #[test]
    fn progress_moves_only_over_contiguously_resolved_items() {
        let mut p = WalkProgress::default();
        let a = p.item("a", 2).unwrap();
        let b = p.item("b", 1).unwrap();
        p.resolved(b);
        assert_eq!(p.resume_point(Some("c")), None, "a is still open");
        p.resolved(a);
        assert_eq!(p.resume_point(None), None, "a has a second delete");
        p.resolved(a);
        assert_eq!(p.resume_point(None), Some("b".into()));
        let c = p.item("c", 1).unwrap();
        assert_eq!(p.resume_point(Some("d")), Some("b".into()), "c is open");
        p.resolved(c);
        assert_eq!(p.resume_point(Some("q")), Some("q".into()), "nothing open");
        // An item without deletes for this shard is done at once.
        p.item("r", 0);
        assert_eq!(p.resume_point(None), Some("r".into()));
    }

    #[test]
    fn a_block_freezes_the_resume_point_before_the_failed_item() {
        let mut p = WalkProgress::default();
        let a = p.item("a", 1).unwrap();
        let b = p.item("b", 1).unwrap();
        let c = p.item("c", 1).unwrap();
        p.resolved(a);
        p.resolved(c);
        p.block(); // b failed
        assert_eq!(p.item("d", 0), None);
        p.resolved(b);
        assert_eq!(p.resume_point(Some("z")), Some("a".into()));
    }
}
