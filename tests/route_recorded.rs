//! Routes the meta-log events recorded from a real SeaweedFS 4.48 cluster
//! (`tests/fixtures/events/`) and checks the matches per scenario: kinds,
//! `object_path`, `version_id`, identity (= `EntryIdentity::of` the recorded
//! entry) and due time.

#[path = "common/events.rs"]
#[allow(dead_code)]
mod events;

use s3_lifecycled::engine::route::{MetaEvent, route};
use s3_lifecycled::engine::versions::{mtime_ns, noncurrent_since_of};
use s3_lifecycled::engine::{
    ActionKind, BucketConfig, EntryIdentity, Snapshot, TimeConfig, Versioning, shard_id,
};
use s3_lifecycled::lifecycle::FlatRule;

const ROOT: &str = "/buckets";
const EXP_DAYS: i64 = 10;
const NC_DAYS: i64 = 3;
const MPU_DAYS: i64 = 2;

use ActionKind::{AbortMpu as A, ExpirationDays as E, NoncurrentDays as N};

/// Expected matches of each scenario's action events, in order:
/// (kind, object_path, version_id).
fn expected(scenario: &str) -> Option<Vec<(ActionKind, &'static str, &'static str)>> {
    Some(match scenario {
        "copy_object" => vec![(E, "dst/copy.txt", "")],
        "delete_object_tagging" | "put_object_tagging" | "put_with_tagging_header" => {
            vec![(E, "a.txt", "")]
        }
        "delete_unversioned"
        | "folder_marker"
        | "lifecycle_put_and_delete"
        | "suspended_delete"
        | "versioned_delete_noncurrent_version"
        | "versioned_delete_the_delete_marker" => vec![],
        "mpu_abort" => vec![(
            A,
            ".uploads/01c7c95f3e45f81dcfeee775121b694d947513d3_aedec10c1022441bbe1d4d0328fb9a9f",
            "",
        )],
        "mpu_complete" => vec![
            (
                A,
                ".uploads/a42f30315b2c7b7615a1b554a201e3a5789828ad_5b29e166aad64958baae062d7f986fcd",
                "",
            ),
            (E, "mp/two.bin", ""),
        ],
        "versioned_mpu_complete" => vec![
            (
                A,
                ".uploads/8fff01779412b84993e0190c463632eb6c770b81_ad4b5d99c915412ab7245073702b625d",
                "",
            ),
            (E, "mp/v.bin", ""),
        ],
        "object_lock_governance_put" => vec![(E, "locked.txt", "")],
        "put_new" | "put_overwrite" => vec![(E, "docs/a.txt", "")],
        // The displaced bare null version is never stamped: no Noncurrent
        // match for `null` (see displaced_bare_null_version_gets_no_replay_match).
        "preversioning_then_enabled_put" | "suspended_null_then_enabled_put" => {
            vec![(E, "k1", "")]
        }
        "suspended_put_key_with_versions" => {
            vec![(E, "k1", ""), (N, "k1", "671291a7b74b6f44b8ab8519a405b643")]
        }
        "suspended_put_new_key" => vec![(E, "k2", "")],
        "versioned_delete_marker" => vec![(N, "k1", "671291a85306ade3b9a4974897c562d3")],
        "versioned_put_demotion" => vec![
            (E, "k1", ""),
            (E, "k1", ""),
            (N, "k1", "671291a888380a1f5e89993d3d6172c4"),
        ],
        "versioned_put_three_versions" => vec![
            (E, "k1", ""),
            (E, "k1", ""),
            (N, "k1", "671291a86d64632c3c7cc88feed60cf7"),
            (E, "k1", ""),
            (N, "k1", "671291a86121c902cadccca2470ee15d"),
        ],
        "versioned_tagging_latest" => vec![(E, "k1", "")],
        "versioned_tagging_noncurrent" => vec![(N, "k1", "671291a7f70f6cbb15348c25447e0848")],
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

/// Routes every action event of `scenario`, checking the per-match invariants
/// (identity, due, shard), and returns (kind, object_path, version_id) per match.
fn route_scenario(scenario: &str) -> Vec<(ActionKind, String, String)> {
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
                assert_eq!(m.identity, EntryIdentity::of(entry), "{scenario}: {m:?}");
                assert_eq!(m.shard, r.shard, "{scenario}");
                assert_eq!(m.bucket, bucket);
                let due = match m.kind {
                    ActionKind::ExpirationDays => time.due_after(mtime_ns(entry), EXP_DAYS),
                    ActionKind::NoncurrentDays => time.due_after(
                        noncurrent_since_of(entry).expect("noncurrent matches come from stamps"),
                        NC_DAYS,
                    ),
                    ActionKind::AbortMpu => time.due_after(mtime_ns(entry), MPU_DAYS),
                    other => panic!("{scenario}: walker kind {other} routed"),
                };
                assert_eq!(m.due, due, "{scenario}: {m:?}");
                // Default rounding: due times land on midnight UTC.
                assert_eq!(m.due % 86_400_000_000_000, 0);
                out.push((m.kind, m.object_path.clone(), m.version_id.clone()));
            }
        }
    }
    out
}

#[test]
fn every_recorded_scenario_routes_as_expected() {
    let scenarios = events::scenarios();
    assert!(scenarios.len() >= 20, "recordings missing: {scenarios:?}");
    for scenario in &scenarios {
        let want = expected(scenario)
            .unwrap_or_else(|| panic!("new recording {scenario}: add its expected matches"));
        let got = route_scenario(scenario);
        let want: Vec<(ActionKind, String, String)> = want
            .into_iter()
            .map(|(k, p, v)| (k, p.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want, "scenario {scenario}");
    }
}

#[test]
fn displaced_bare_null_version_gets_no_replay_match() {
    // A versioned PUT over a bare null version (pre-versioning object or
    // Suspended write) leaves the null untouched: no stamp event, so replay
    // cannot route NoncurrentDays for it. The walker (recovery view, which
    // evaluates every kind) is what expires it. If SeaweedFS starts stamping
    // null versions this test fails and the router can cover it.
    for scenario in [
        "preversioning_then_enabled_put",
        "suspended_null_then_enabled_put",
    ] {
        let got = route_scenario(scenario);
        assert!(
            got.iter().all(|(_, _, v)| v != "null"),
            "{scenario}: {got:?}"
        );
        let touched_bare = events::load_action_events(scenario)
            .iter()
            .flat_map(MetaEvent::all_from_response)
            .any(|ev| {
                s3_lifecycled::engine::route::locate(ROOT, &ev).is_some_and(|(_, key)| key == "k1")
            });
        assert!(!touched_bare, "{scenario}: the bare k1 got an event");
    }
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
