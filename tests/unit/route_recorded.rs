//! Routes the meta-log events recorded from a real SeaweedFS 4.48 cluster
//! (`tests/fixtures/events/`) and checks the matches per scenario: kinds,
//! `object_path`, `version_id`, identity (= `EntryIdentity::of` the recorded
//! entry) and due time. Deferred matches (pointer moves that name a lookup)
//! are resolved against the entries the same recording holds, as the daily
//! pass would resolve them against the filer once they are due.

use crate::common;

use std::collections::BTreeMap;

use s3_lifecycled::engine::deferred::resolve_deferred;
use s3_lifecycled::engine::event::{MetaEvent, locate};
use s3_lifecycled::engine::matches::{DeferredLookup, Expect, Match};
use s3_lifecycled::engine::route::route;
use s3_lifecycled::engine::versions::{ext_str, mtime_ns, noncurrent_since_of};
use s3_lifecycled::engine::{
    ActionKind, BucketConfig, EntryIdentity, Snapshot, TimeConfig, Versioning, keys, shard_id,
};
use s3_lifecycled::lifecycle::FlatRule;
use s3_lifecycled::pb::filer_pb::Entry;

use common::events;

const ROOT: &str = "/buckets";
const EXP_DAYS: i64 = 10;
const NC_DAYS: i64 = 3;
const MPU_DAYS: i64 = 2;

use ActionKind::{AbortMpu as A, ExpirationDays as E, NoncurrentDays as N};

/// How a match came out of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// From the event's own entry (identity set).
    Event,
    /// Deferred: names a lookup (identity empty).
    Lookup,
}

use Via::{Event as V, Lookup as L};

/// Expected matches of each scenario's action events, in order:
/// (kind, object_path, version_id, how).
fn expected(scenario: &str) -> Option<Vec<(ActionKind, &'static str, &'static str, Via)>> {
    Some(match scenario {
        "copy_object" => vec![(E, "dst/copy.txt", "", V)],
        "delete_object_tagging" | "put_object_tagging" | "put_with_tagging_header" => {
            vec![(E, "a.txt", "", V)]
        }
        "delete_unversioned"
        | "folder_marker"
        | "lifecycle_put_and_delete"
        // The pointer moves to `v_null`, which replaced the deleted bare null.
        | "suspended_delete"
        // A touch of the folder: the pointer does not move.
        | "versioned_delete_noncurrent_version" => vec![],
        "mpu_abort" => vec![(
            A,
            ".uploads/01c7c95f3e45f81dcfeee775121b694d947513d3_aedec10c1022441bbe1d4d0328fb9a9f",
            "",
            V,
        )],
        "mpu_complete" => vec![
            (
                A,
                ".uploads/a42f30315b2c7b7615a1b554a201e3a5789828ad_5b29e166aad64958baae062d7f986fcd",
                "",
                V,
            ),
            (E, "mp/two.bin", "", V),
        ],
        // Every first versioned write of a key sets the folder's first
        // pointer: a deferred lookup of a bare null (here: none exists).
        "versioned_mpu_complete" => vec![
            (
                A,
                ".uploads/8fff01779412b84993e0190c463632eb6c770b81_ad4b5d99c915412ab7245073702b625d",
                "",
                V,
            ),
            (E, "mp/v.bin", "", V),
            (N, "mp/v.bin", "null", L),
        ],
        "object_lock_governance_put" => vec![(E, "locked.txt", "", V), (N, "locked.txt", "null", L)],
        "put_new" | "put_overwrite" => vec![(E, "docs/a.txt", "", V)],
        // The displaced bare null version is never stamped or touched: only
        // the pointer's first move shows it (see
        // displaced_bare_null_version_is_found_by_a_deferred_lookup).
        "preversioning_then_enabled_put" | "suspended_null_then_enabled_put" => {
            vec![(E, "k1", "", V), (N, "k1", "null", L)]
        }
        "suspended_put_key_with_versions" => vec![
            (E, "k1", "", V),
            (N, "k1", "671291a7b74b6f44b8ab8519a405b643", V),
        ],
        "suspended_put_new_key" => vec![(E, "k2", "", V)],
        "versioned_delete_marker" => vec![(N, "k1", "671291a85306ade3b9a4974897c562d3", V)],
        // The pointer moves back to v2, which keeps its stale stamp.
        "versioned_delete_the_delete_marker" => vec![(E, "k1", "", L)],
        "versioned_put_demotion" => vec![
            (E, "k1", "", V),
            (N, "k1", "null", L),
            (E, "k1", "", V),
            (N, "k1", "671291a888380a1f5e89993d3d6172c4", V),
        ],
        "versioned_put_three_versions" => vec![
            (E, "k1", "", V),
            (N, "k1", "null", L),
            (E, "k1", "", V),
            (N, "k1", "671291a86d64632c3c7cc88feed60cf7", V),
            (E, "k1", "", V),
            (N, "k1", "671291a86121c902cadccca2470ee15d", V),
        ],
        "versioned_tagging_latest" => vec![(E, "k1", "", V)],
        "versioned_tagging_noncurrent" => vec![(N, "k1", "671291a7f70f6cbb15348c25447e0848", V)],
        _ => return None,
    })
}

fn bucket_of(scenario: &str) -> String {
    let path = events::fixtures_dir().join(format!("{scenario}.txt"));
    let text = std::fs::read_to_string(&path).expect("scenario dump");
    text.lines()
        .find_map(|l| l.strip_prefix("# bucket: "))
        .map(|b| b.trim().to_string())
        .unwrap_or_else(|| panic!("{} has no `# bucket:` line", path.display()))
}

fn snapshot(bucket: &str) -> Snapshot {
    let rule = FlatRule {
        enabled: true,
        expiration_days: EXP_DAYS,
        noncurrent_days: NC_DAYS,
        abort_mpu_days: MPU_DAYS,
        ..FlatRule::default()
    };
    Snapshot::compile(
        vec![BucketConfig {
            name: bucket.into(),
            versioning: Versioning::Enabled,
            object_lock: false,
            rules: vec![rule],
        }],
        TimeConfig::default(),
    )
}

/// Routes every action event of `scenario`, checking the per-match
/// invariants (identity, due, shard, lookup path), and returns the matches.
fn route_scenario(scenario: &str) -> Vec<Match> {
    let bucket = bucket_of(scenario);
    let snap = snapshot(&bucket);
    let time = snap.time();
    let mut out = Vec::new();
    for resp in events::load_action_events(scenario) {
        for ev in MetaEvent::all_from_response(&resp) {
            let Some(r) = route(&snap, ROOT, &ev) else {
                continue;
            };
            assert_eq!(r.bucket, bucket, "{scenario}");
            assert_eq!(r.shard, shard_id(&r.bucket, &r.key), "{scenario}");
            for m in &r.matches {
                let entry = ev.new_entry.as_ref().expect("matches come from writes");
                assert_eq!(m.shard, r.shard, "{scenario}");
                assert_eq!(m.bucket, bucket);
                let due = match &m.lookup {
                    None => {
                        assert_eq!(m.identity, EntryIdentity::of(entry), "{scenario}: {m:?}");
                        concrete_due(&time, m.kind, entry)
                    }
                    Some(lookup) => {
                        assert!(entry.is_directory, "{scenario}: deferred from a file");
                        assert_eq!(r.key, format!("{}.versions", m.key), "{scenario}");
                        assert_eq!(m.identity, EntryIdentity::default(), "{scenario}");
                        check_lookup_path(&bucket, m, lookup);
                        match m.kind {
                            // The pointer event is the demotion.
                            ActionKind::NoncurrentDays => time.due_after(ev.ts_ns, NC_DAYS),
                            // The folder caches the restored latest's mtime.
                            ActionKind::ExpirationDays => {
                                let secs: i64 = ext_str(entry, keys::LATEST_VERSION_MTIME)
                                    .and_then(|s| s.parse().ok())
                                    .expect("pointer carries the latest's mtime");
                                time.due_after(secs * 1_000_000_000, EXP_DAYS)
                            }
                            other => panic!("{scenario}: deferred {other}"),
                        }
                    }
                };
                assert_eq!(m.due, due, "{scenario}: {m:?}");
                // Default rounding: due times land on midnight UTC.
                assert_eq!(m.due % 86_400_000_000_000, 0);
                out.push(m.clone());
            }
        }
    }
    out
}

fn concrete_due(time: &TimeConfig, kind: ActionKind, entry: &Entry) -> i64 {
    match kind {
        ActionKind::ExpirationDays => time.due_after(mtime_ns(entry), EXP_DAYS),
        ActionKind::NoncurrentDays => time.due_after(
            noncurrent_since_of(entry).expect("noncurrent matches come from stamps"),
            NC_DAYS,
        ),
        ActionKind::AbortMpu => time.due_after(mtime_ns(entry), MPU_DAYS),
        other => panic!("walker kind {other} routed"),
    }
}

/// A deferred lookup names the bare key (null) or the version file (restore)
/// under `/buckets/<bucket>`.
fn check_lookup_path(bucket: &str, m: &Match, lookup: &DeferredLookup) {
    let path = format!("{}/{}", lookup.directory, lookup.name);
    match &lookup.expect {
        Expect::NullVersion => {
            assert_eq!(m.version_id, "null");
            assert_eq!(path, format!("{ROOT}/{bucket}/{}", m.key));
        }
        Expect::Version { version_id } => {
            assert_eq!(m.version_id, "");
            assert_eq!(
                path,
                format!("{ROOT}/{bucket}/{}.versions/v_{version_id}", m.key)
            );
        }
    }
}

/// The filer tree a recording leaves behind: full path → last entry state.
/// Only what the recording shows: entries written before it are unknown.
fn final_entries(scenario: &str) -> BTreeMap<String, Entry> {
    let mut tree = BTreeMap::new();
    for resp in events::load_events(scenario) {
        for ev in MetaEvent::all_from_response(&resp) {
            if let Some(old) = &ev.old_entry {
                tree.remove(&format!("{}/{}", ev.directory, old.name));
            }
            if let Some(new) = &ev.new_entry {
                tree.insert(
                    format!("{}/{}", ev.new_parent_path, new.name),
                    Entry::clone(new),
                );
            }
        }
    }
    tree
}

/// Resolves the deferred matches of `scenario` against its final tree, as
/// the daily pass does once they are due. Returns (deferred, resolved) pairs.
fn resolve_scenario(scenario: &str) -> Vec<(Match, Option<Match>)> {
    let snap = snapshot(&bucket_of(scenario));
    let tree = final_entries(scenario);
    route_scenario(scenario)
        .into_iter()
        .filter(|m| m.lookup.is_some())
        .map(|m| {
            let lookup = m.lookup.as_ref().expect("filtered");
            let entry = tree.get(&format!("{}/{}", lookup.directory, lookup.name));
            let rule = snap
                .action(&m.bucket, m.rule_hash, m.kind)
                .expect("the match's action")
                .rule();
            let resolved = resolve_deferred(&m, entry, &snap.time(), rule);
            (m, resolved)
        })
        .collect()
}

#[test]
fn every_recorded_scenario_routes_as_expected() {
    let scenarios = events::scenarios();
    assert!(scenarios.len() >= 20, "recordings missing: {scenarios:?}");
    for scenario in &scenarios {
        let want = expected(scenario)
            .unwrap_or_else(|| panic!("new recording {scenario}: add its expected matches"));
        let got: Vec<(ActionKind, String, String, Via)> = route_scenario(scenario)
            .into_iter()
            .map(|m| {
                let via = if m.lookup.is_some() { L } else { V };
                (m.kind, m.object_path, m.version_id, via)
            })
            .collect();
        let want: Vec<(ActionKind, String, String, Via)> = want
            .into_iter()
            .map(|(k, p, v, via)| (k, p.to_string(), v.to_string(), via))
            .collect();
        assert_eq!(got, want, "scenario {scenario}");
    }
}

#[test]
fn displaced_bare_null_version_is_found_by_a_deferred_lookup() {
    // A versioned PUT over a bare null version (pre-versioning object or
    // Suspended write) leaves the null untouched: no stamp, no event. Only
    // the pointer's first move shows it, so the router defers a lookup of
    // the bare key; resolved against the bare entry the setup wrote, it
    // becomes a NoncurrentDays match carrying that entry's identity. If
    // SeaweedFS starts stamping null versions the `touched_bare` check fails
    // and the stamp event can replace the lookup.
    for scenario in [
        "preversioning_then_enabled_put",
        "suspended_null_then_enabled_put",
    ] {
        let touched_bare = events::load_action_events(scenario)
            .iter()
            .flat_map(MetaEvent::all_from_response)
            .any(|ev| locate(ROOT, &ev).is_some_and(|(_, key)| key == "k1"));
        assert!(!touched_bare, "{scenario}: the bare k1 got an event");

        let bucket = bucket_of(scenario);
        let bare = final_entries(scenario)
            .remove(&format!("{ROOT}/{bucket}/k1"))
            .expect("setup wrote the bare k1");
        let resolved = resolve_scenario(scenario);
        assert_eq!(resolved.len(), 1, "{scenario}: {resolved:?}");
        let (deferred, got) = &resolved[0];
        assert_eq!(
            got.as_ref(),
            Some(&Match {
                identity: EntryIdentity::of(&bare),
                lookup: None,
                ..deferred.clone()
            }),
            "{scenario}"
        );
        // Sent as: NoncurrentDays on k1, version null.
        let got = got.as_ref().expect("checked");
        assert_eq!(
            (got.kind, got.object_path.as_str(), got.version_id.as_str()),
            (N, "k1", "null")
        );
    }
}

#[test]
fn first_versioned_write_without_a_bare_null_resolves_to_nothing() {
    // The cost of case A: every key's first versioned write defers a lookup,
    // which finds no bare entry when the key never had a null version.
    for scenario in [
        "versioned_put_demotion",
        "versioned_put_three_versions",
        "versioned_mpu_complete",
        "object_lock_governance_put",
    ] {
        let resolved = resolve_scenario(scenario);
        assert_eq!(resolved.len(), 1, "{scenario}");
        assert_eq!(
            resolved[0].0.lookup.as_ref().map(|l| &l.expect),
            Some(&Expect::NullVersion)
        );
        assert_eq!(resolved[0].1, None, "{scenario}");
    }
}

#[test]
fn restored_latest_after_deleting_its_marker_expires_via_a_deferred_lookup() {
    // Deleting the delete marker by id moves the pointer back to v2, which
    // keeps its stale Noncurrent-Since-Ns stamp; its original CREATE match
    // fails the CAS. The deferred lookup finds the stamped v2 and expires the
    // logical key, but only while v2 is still the latest (its identity).
    let scenario = "versioned_delete_the_delete_marker";
    let bucket = bucket_of(scenario);
    let tree = final_entries(scenario);
    let resolved = resolve_scenario(scenario);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    let (deferred, got) = &resolved[0];
    let lookup = deferred.lookup.as_ref().expect("deferred");
    let Expect::Version { version_id } = &lookup.expect else {
        panic!("expected a version lookup: {lookup:?}");
    };
    let v2 = tree
        .get(&format!("{ROOT}/{bucket}/k1.versions/v_{version_id}"))
        .expect("v2 is still there");
    assert!(
        noncurrent_since_of(v2).is_some(),
        "v2 should keep its stale stamp"
    );
    let time = snapshot(&bucket).time();
    assert_eq!(
        got.as_ref(),
        Some(&Match {
            identity: EntryIdentity::of(v2),
            lookup: None,
            due: deferred.due.max(time.due_after(mtime_ns(v2), EXP_DAYS)),
            ..deferred.clone()
        })
    );
    // The lookup names what the folder's pointer says is latest at the end.
    let folder = tree
        .get(&format!("{ROOT}/{bucket}/k1.versions"))
        .expect("folder");
    assert_eq!(
        ext_str(folder, keys::LATEST_VERSION_ID),
        Some(version_id.as_str())
    );
}

#[test]
fn setup_events_never_panic_and_only_yield_replay_kinds() {
    for scenario in events::scenarios() {
        let snap = snapshot(&bucket_of(&scenario));
        for resp in events::load_events(&scenario) {
            for ev in MetaEvent::all_from_response(&resp) {
                if let Some(r) = route(&snap, ROOT, &ev) {
                    assert!(r.matches.iter().all(|m| m.kind.is_replay_kind()));
                }
            }
        }
    }
}
