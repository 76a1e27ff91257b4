//! Another enforcer on the cluster, told by the Go worker's cursor files: a
//! file rewritten since this service's last pass over its shard means a Go
//! pass ran in between (docs/go-cursor.md#another-enforcer). Pure.

use std::collections::BTreeMap;

use super::cursor::{GoSeen, ShardCursor, file_name};
use super::shard::SHARD_COUNT;
use crate::pb::filer_pb::Entry;

/// How old a Go cursor may be, at a shard's first look, and still count as
/// a Go worker that runs: it runs daily (`weed admin` detects every 1440
/// minutes), so a file written within two days is likely to be written again.
pub const RECENT_S: i64 = 2 * 86_400;

/// Each shard's Go cursor file in a listing of the Go cursor directory;
/// a shard without one is [`GoSeen::ABSENT`].
pub fn stamps(listing: &[Entry]) -> BTreeMap<u8, GoSeen> {
    (0..SHARD_COUNT as u8)
        .map(|shard| {
            let name = file_name(shard);
            let seen = listing
                .iter()
                .find(|e| e.name == name && !e.is_directory)
                .map_or(GoSeen::ABSENT, |e| GoSeen {
                    // The filer gives every entry it stores a time; 1 keeps
                    // a file that somehow has none apart from no file.
                    mtime_s: e.attributes.as_ref().map_or(1, |a| a.mtime.max(1)),
                    // Read leniently: a file Go would refuse is still a
                    // file some Go pass wrote.
                    ts_ns: serde_json::from_slice::<serde_json::Value>(&e.content)
                        .ok()
                        .and_then(|v| v.get("ts_ns")?.as_i64())
                        .unwrap_or(0),
                });
            (shard, seen)
        })
        .collect()
}

/// What a pass found of the Go worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoActivity {
    /// Shards whose Go cursor changed since this service's last pass over
    /// them.
    pub since_last_pass: Vec<u8>,
    /// Shards this service had not looked at before (first pass, or a
    /// cursor from an earlier build) whose Go cursor is younger than
    /// [`RECENT_S`].
    pub recent: Vec<u8>,
    /// The latest write among those shards' Go cursors (ns; weed stamps
    /// them in whole seconds).
    pub last_write_ns: i64,
}

impl GoActivity {
    pub fn is_empty(&self) -> bool {
        self.since_last_pass.is_empty() && self.recent.is_empty()
    }

    /// Every shard with evidence, in order.
    pub fn shards(&self) -> Vec<u8> {
        let mut all: Vec<u8> = self
            .since_last_pass
            .iter()
            .chain(&self.recent)
            .copied()
            .collect();
        all.sort_unstable();
        all
    }
}

/// Compares each shard's Go cursor `seen` now with what its cursor recorded
/// (`None`: no cursor yet), and records `seen` in every cursor given.
/// `clock_s` is the time now (s), for the first look's [`RECENT_S`].
pub fn note<'a>(
    cursors: impl IntoIterator<Item = (u8, Option<&'a mut ShardCursor>)>,
    seen: &BTreeMap<u8, GoSeen>,
    clock_s: i64,
) -> GoActivity {
    let mut out = GoActivity::default();
    for (shard, cursor) in cursors {
        let now = seen.get(&shard).copied().unwrap_or(GoSeen::ABSENT);
        let recorded = cursor.as_ref().and_then(|c| c.go_cursor);
        let evidence = match recorded {
            // A file that disappeared (an operator cleaned up) is no pass.
            Some(before) => {
                (before != now && now != GoSeen::ABSENT).then_some(&mut out.since_last_pass)
            }
            None => (now != GoSeen::ABSENT && clock_s - now.mtime_s < RECENT_S)
                .then_some(&mut out.recent),
        };
        if let Some(list) = evidence {
            list.push(shard);
            out.last_write_ns = out
                .last_write_ns
                .max(now.mtime_s.saturating_mul(1_000_000_000));
        }
        if let Some(c) = cursor {
            c.go_cursor = Some(now);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::FuseAttributes;

    fn go_file(shard: u8, mtime: i64, ts: i64) -> Entry {
        Entry {
            name: file_name(shard),
            attributes: Some(FuseAttributes {
                mtime,
                ..Default::default()
            }),
            content: format!(
                "{{\n  \"version\": 1,\n  \"shard_id\": {shard},\n  \"ts_ns\": {ts}\n}}\n"
            )
            .into_bytes(),
            ..Default::default()
        }
    }

    const DAY: i64 = 86_400;

    #[test]
    fn a_go_pass_after_ours_went_unnoticed() {
        let t0 = 1_800_000_000;
        let mut a = ShardCursor {
            shard_id: 0,
            ..Default::default()
        };
        let mut b = ShardCursor {
            shard_id: 1,
            ..Default::default()
        };
        // First look, long after the Go worker last ran (migrated weeks ago):
        // nothing to say, but the files are recorded.
        let old = stamps(&[go_file(0, t0, 5), go_file(1, t0, 7)]);
        let first = note([(0, Some(&mut a)), (1, Some(&mut b))], &old, t0 + 30 * DAY);
        assert!(first.is_empty(), "{first:?}");
        assert_eq!(
            a.go_cursor,
            Some(GoSeen {
                mtime_s: t0,
                ts_ns: 5
            })
        );
        // Nothing rewritten: nothing to say, however recent the files are.
        assert!(note([(0, Some(&mut a))], &old, t0 + 60).is_empty());
        // Shard 1's file rewritten since (a Go pass over it), shard 0's not.
        let later = stamps(&[go_file(0, t0, 5), go_file(1, t0 + 3 * DAY, 9)]);
        let seen = note([(0, Some(&mut a)), (1, Some(&mut b))], &later, t0 + 3 * DAY);
        assert_eq!(seen.since_last_pass, [1]);
        assert_eq!(seen.last_write_ns, (t0 + 3 * DAY) * 1_000_000_000);
        // Recorded: the same files say nothing at the next pass.
        assert!(note([(1, Some(&mut b))], &later, t0 + 4 * DAY).is_empty());
        // A file removed is no Go pass; one written again after that is.
        assert!(note([(1, Some(&mut b))], &stamps(&[]), t0 + 5 * DAY).is_empty());
        assert_eq!(b.go_cursor, Some(GoSeen::ABSENT));
        let back = stamps(&[go_file(1, t0 + 6 * DAY, 9)]);
        assert_eq!(
            note([(1, Some(&mut b))], &back, t0 + 6 * DAY).since_last_pass,
            [1]
        );
    }

    #[test]
    fn a_go_worker_running_before_our_first_pass_went_unnoticed() {
        let t0 = 1_800_000_000;
        let seen = stamps(&[go_file(3, t0, 1), go_file(4, t0 - 3 * DAY, 1)]);
        // No cursor of ours yet (cold start), or one written before cursors
        // recorded the Go files: a Go cursor younger than two days counts.
        let mut pre = ShardCursor {
            shard_id: 4,
            ..Default::default()
        };
        let got = note([(3, None), (4, Some(&mut pre)), (5, None)], &seen, t0 + 300);
        assert_eq!(
            got.recent,
            [3],
            "shard 4's file is three days old, 5 has none"
        );
        assert!(got.since_last_pass.is_empty());
        assert_eq!(got.shards(), [3]);
        assert_eq!(
            pre.go_cursor,
            Some(GoSeen {
                mtime_s: t0 - 3 * DAY,
                ts_ns: 1
            })
        );
    }

    #[test]
    fn stamps_read_go_files_leniently_and_only_theirs() {
        let mut odd = go_file(2, 10, 0);
        odd.content = b"not json".to_vec();
        let mut dir = go_file(6, 10, 0);
        dir.is_directory = true;
        let s = stamps(&[
            go_file(0, 10, 42),
            odd,
            dir,
            Entry {
                name: "notes.txt".into(),
                ..Default::default()
            },
        ]);
        assert_eq!(s.len(), SHARD_COUNT);
        assert_eq!(
            s[&0],
            GoSeen {
                mtime_s: 10,
                ts_ns: 42
            }
        );
        assert_eq!(
            s[&2],
            GoSeen {
                mtime_s: 10,
                ts_ns: 0
            }
        );
        assert_eq!(s[&6], GoSeen::ABSENT);
        assert_eq!(s[&1], GoSeen::ABSENT);
    }
}
