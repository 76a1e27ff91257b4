//! What an `s3_lifecycle` job means, decided without any I/O: the capability
//! and descriptor we announce, how a detection splits the 16 shards into
//! proposals, and how an execute request becomes the settings of one pass
//! (addresses from the cluster context, the admin's rate share, the Go
//! config keys). docs/plugin-worker.md explains every field we rely on.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::{Settings, parse_shards};
use crate::engine::shard::{SHARD_COUNT, shards_label};
use crate::pb::plugin::{
    AdminRuntimeDefaults, ConfigField, ConfigFieldType, ConfigForm, ConfigSection, ConfigValue,
    ConfigWidget, ExecuteJobRequest, JobPriority, JobProposal, JobTypeCapability,
    JobTypeDescriptor, RunDetectionRequest, config_value::Kind,
};
use crate::seaweed::endpoint::ServerAddress;

/// The job type, as the admin and the Go worker name it.
pub const JOB_TYPE: &str = "s3_lifecycle";
/// Our job parameter naming the shards a job covers (`0-7`, `3,5`).
pub const PARAM_SHARDS: &str = "shards";
/// The job parameter the Go executor needs: the filer's `host:grpcPort`.
pub const PARAM_FILER: &str = "filer_grpc_address";
/// Cluster-context metadata key of this executor's share of the cluster rate.
pub const META_RATE: &str = "s3_lifecycle.deletes_per_second";
/// Cluster-context metadata key of this executor's share of the cluster burst.
pub const META_BURST: &str = "s3_lifecycle.deletes_burst";
/// Admin config keys, Go's names: the admin's rate allocator reads the first
/// two by name (docs/plugin-worker.md#rate-share), so they must not change.
pub const KEY_RATE: &str = "cluster_deletes_per_second";
/// See [`KEY_RATE`].
pub const KEY_BURST: &str = "cluster_deletes_burst";
/// Days of meta-log the filer keeps; 0 = probe the filer.
pub const KEY_RETENTION_DAYS: &str = "meta_log_retention_days";
/// Minimum minutes between steady walks; 0 = every pass.
pub const KEY_WALKER_MINUTES: &str = "walker_interval_minutes";
/// `worker_version` prefix that tells our workers from any other
/// `s3_lifecycle` worker (docs/plugin-worker.md#one-enforcer).
pub const VERSION_PREFIX: &str = "s3-lifecycled ";

/// The `worker_version` we announce.
pub fn worker_version() -> String {
    format!("{VERSION_PREFIX}{}", env!("CARGO_PKG_VERSION"))
}

/// Our capability for `s3_lifecycle`: detect and execute, `slots` executions.
pub fn capability(slots: u32) -> JobTypeCapability {
    let slots = i32::try_from(slots.max(1)).unwrap_or(i32::MAX);
    JobTypeCapability {
        job_type: JOB_TYPE.into(),
        can_detect: true,
        can_execute: true,
        max_detection_concurrency: 1,
        max_execution_concurrency: slots,
        display_name: "S3 Lifecycle (s3-lifecycled)".into(),
        description: "Expires objects, noncurrent versions, delete markers and stale multipart \
                      uploads by replaying the filer meta-log (s3-lifecycled)"
            .into(),
        // Go's weight for this type; it only sorts job types in the admin's lists.
        weight: 20,
    }
}

fn int_field(name: &str, label: &str, description: &str) -> ConfigField {
    ConfigField {
        name: name.into(),
        label: label.into(),
        description: description.into(),
        field_type: ConfigFieldType::Int64.into(),
        widget: ConfigWidget::Number.into(),
        min_value: Some(int(0)),
        ..ConfigField::default()
    }
}

/// A `ConfigValue` holding `v`.
pub fn int(v: i64) -> ConfigValue {
    ConfigValue {
        kind: Some(Kind::Int64Value(v)),
    }
}

/// A `ConfigValue` holding `s`.
pub fn string(s: impl Into<String>) -> ConfigValue {
    ConfigValue {
        kind: Some(Kind::StringValue(s.into())),
    }
}

/// The descriptor the admin stores for the job type when it first sees it:
/// Go's four admin keys (same names, so a Go worker and ours read one
/// config) and runtime defaults that keep the daily schedule on. The first
/// descriptor stored wins for every worker of the type, so a careless one
/// (e.g. `enabled: false`) would silently stop scheduled passes.
pub fn descriptor() -> JobTypeDescriptor {
    let fields = vec![
        int_field(
            KEY_RATE,
            "Cluster deletes per second",
            "Cluster-wide cap on lifecycle deletes per second, split by the admin across the \
             executing workers; 0 = unlimited.",
        ),
        int_field(
            KEY_BURST,
            "Cluster delete burst",
            "Cluster-wide burst, split the same way; 0 = twice the rate.",
        ),
        int_field(
            KEY_RETENTION_DAYS,
            "Meta-log retention (days)",
            "How far back the filer meta-log can be replayed; rules with a longer TTL are served \
             by walks. 0 = probe the filer.",
        ),
        int_field(
            KEY_WALKER_MINUTES,
            "Walker interval (minutes)",
            "Minimum time between steady walks of a bucket; 0 = every pass.",
        ),
    ];
    let defaults: HashMap<String, ConfigValue> =
        fields.iter().map(|f| (f.name.clone(), int(0))).collect();
    JobTypeDescriptor {
        job_type: JOB_TYPE.into(),
        display_name: "S3 Lifecycle".into(),
        description: "Enforces S3 bucket lifecycle rules (s3-lifecycled)".into(),
        icon: "fas fa-recycle".into(),
        descriptor_version: 1,
        admin_config_form: Some(ConfigForm {
            form_id: "s3-lifecycle-admin".into(),
            title: "S3 Lifecycle".into(),
            description: "Cluster-wide lifecycle settings".into(),
            sections: vec![ConfigSection {
                section_id: "scope".into(),
                title: "Scope".into(),
                description: String::new(),
                fields,
            }],
            default_values: defaults,
        }),
        worker_config_form: None,
        admin_runtime_defaults: Some(AdminRuntimeDefaults {
            enabled: true,
            detection_interval_minutes: 24 * 60,
            detection_timeout_seconds: 60,
            max_jobs_per_detection: 1,
            global_execution_concurrency: 1,
            per_worker_execution_concurrency: 1,
            retry_limit: 0,
            retry_backoff_seconds: 0,
            // Go's "no limit": a pass ends by itself (bounded by
            // `pass.max_runtime`), or by the admin's cancel.
            job_type_max_runtime_seconds: i32::MAX,
            execution_timeout_seconds: i32::MAX,
        }),
        worker_default_values: HashMap::new(),
    }
}

/// An integer setting read the lenient way the admin's own readers do: an
/// int64 or a double (truncated), or a decimal string; anything else is `None`.
pub fn int_value(v: Option<&ConfigValue>) -> Option<i64> {
    match v?.kind.as_ref()? {
        Kind::Int64Value(i) => Some(*i),
        Kind::DoubleValue(d) if d.is_finite() => Some(*d as i64),
        Kind::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn string_value(v: Option<&ConfigValue>) -> Option<String> {
    match v?.kind.as_ref()? {
        Kind::StringValue(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Kind::StringList(l) if !l.values.is_empty() => Some(l.values.join(",")),
        Kind::Int64List(l) if !l.values.is_empty() => Some(
            l.values
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        Kind::Int64Value(i) => Some(i.to_string()),
        _ => None,
    }
}

/// `shards` as one set each of `n` contiguous, near-equal ranges (1 ≤ n ≤ 16).
pub fn shard_sets(n: usize) -> Vec<Vec<u8>> {
    let all: Vec<u8> = (0..SHARD_COUNT as u8).collect();
    let n = n.clamp(1, all.len());
    let (base, extra) = (all.len() / n, all.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        out.push(all[at..at + len].to_vec());
        at += len;
    }
    out
}

/// How many jobs a detection may propose: the request's `max_results` (the
/// scheduler sends `max_jobs_per_detection`), else the stored runtime's
/// `max_jobs_per_detection` (a manual run sends no limit), else one; never
/// more than the 16 shards.
pub fn jobs_wanted(req: &RunDetectionRequest) -> usize {
    let runtime = req.admin_runtime.as_ref().map(|r| r.max_jobs_per_detection);
    let n = [Some(req.max_results), runtime]
        .into_iter()
        .flatten()
        .find(|n| *n > 0)
        .unwrap_or(1);
    usize::try_from(n).unwrap_or(1).clamp(1, SHARD_COUNT)
}

/// `Err` naming the job type unless it is empty or ours.
fn check_job_type(job_type: &str) -> Result<(), String> {
    if job_type.is_empty() || job_type == JOB_TYPE {
        return Ok(());
    }
    Err(format!(
        "job type `{job_type}` is not served here (only {JOB_TYPE})"
    ))
}

/// A cluster context's filer (`host:httpPort`) as the gRPC address to dial.
fn context_filer(filer: &str) -> Result<String, String> {
    ServerAddress::parse(filer)
        .map(|a| a.grpc())
        .map_err(|e| format!("cluster context filer {e}"))
}

/// What a detection answers: one proposal per shard set, or a reason to
/// propose nothing (reported as a skipped detection, as Go does).
pub fn detect(req: &RunDetectionRequest, now_ns: i64) -> Result<Vec<JobProposal>, String> {
    check_job_type(&req.job_type)?;
    let ctx = req.cluster_context.clone().unwrap_or_default();
    let Some(filer) = ctx.filer_addresses.first() else {
        return Ok(Vec::new());
    };
    // The Go executor dials this as is: host:grpcPort.
    let filer_grpc = context_filer(filer)?;
    let sets = shard_sets(jobs_wanted(req));
    let total = sets.len();
    Ok(sets
        .into_iter()
        .enumerate()
        .map(|(i, set)| {
            let label = shards_label(&set);
            JobProposal {
                proposal_id: format!("s3-lifecycled-{now_ns}-{i}"),
                // One key per shard set: the admin then never runs two passes
                // over the same shards at once, while other sets proceed.
                dedupe_key: format!("{JOB_TYPE}:shards={label}"),
                job_type: JOB_TYPE.into(),
                priority: JobPriority::Normal.into(),
                summary: format!("lifecycle pass over shards {label} ({}/{total})", i + 1),
                detail: format!(
                    "daily meta-log replay of shards {label} through filer {filer_grpc}"
                ),
                parameters: [
                    (PARAM_SHARDS.to_string(), string(label.clone())),
                    (PARAM_FILER.to_string(), string(filer_grpc.clone())),
                ]
                .into_iter()
                .collect(),
                labels: [("shards".to_string(), label)].into_iter().collect(),
                not_before: None,
                expires_at: None,
            }
        })
        .collect())
}

/// One execution's pass, as decided from the request and the worker's own
/// settings.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    /// The pass's settings (addresses, rate, windows).
    pub settings: Settings,
    pub shards: Vec<u8>,
    /// Where the rate came from, for the progress text.
    pub rate_source: &'static str,
}

/// Builds the pass of `req` on top of `base` (the worker's configuration).
///
/// - shards: our `shards` parameter; absent (a Go detector's job) = all 16;
/// - filers: the job's `filer_grpc_address` first, then the cluster
///   context's filers (fail-over), else `cluster.filer`;
/// - S3 gateways: every one of the context's `s3_grpc_addresses` (deletes
///   are spread across them), else `cluster.s3_grpc`;
/// - rate: the admin's share in the context metadata when present (the admin
///   already divided the cluster rate among executors), else the worker's
///   own `[rate]`;
/// - `meta_log_retention_days` and `walker_interval_minutes` when non-zero.
pub fn plan(req: &ExecuteJobRequest, base: &Settings) -> Result<JobPlan, String> {
    let job = req.job.clone().unwrap_or_default();
    check_job_type(&job.job_type)?;
    let ctx = req.cluster_context.clone().unwrap_or_default();
    let mut s = base.clone();
    let shards = match string_value(job.parameters.get(PARAM_SHARDS)) {
        Some(v) => parse_shards(&v).map_err(|e| format!("job parameter `shards`: {e}"))?,
        None => (0..SHARD_COUNT as u8).collect(),
    };
    s.pass.shards = shards_label(&shards);
    // The context's filers, as gRPC addresses: the fail-over list.
    let mut filers = ctx
        .filer_addresses
        .iter()
        .filter(|f| !f.trim().is_empty())
        .map(|f| context_filer(f))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(f) = string_value(job.parameters.get(PARAM_FILER)) {
        // Already host:grpcPort (the Go executor dials it as is): converting it
        // again would add 10000 to a gRPC port. It goes first; the context's
        // other filers stay as fail-over (docs/meta-log.md#several-filers).
        ServerAddress::grpc_as_given(&f)
            .map_err(|e| format!("job parameter {PARAM_FILER}: {e}"))?;
        filers.retain(|x| x != &f);
        filers.insert(0, f);
    }
    if !filers.is_empty() {
        s.cluster.filer = filers;
    }
    let gateways: Vec<String> = ctx
        .s3_grpc_addresses
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    if !gateways.is_empty() {
        // Deletes are spread across every gateway the admin knows.
        s.cluster.s3_grpc = gateways;
    }
    let mut rate_source = "worker config";
    if let Some(rate) = ctx
        .metadata
        .get(META_RATE)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r > 0.0)
    {
        s.rate.deletes_per_second = rate;
        s.rate.cluster_deletes_per_second = 0.0;
        s.rate.burst = ctx
            .metadata
            .get(META_BURST)
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|b| *b > 0)
            .unwrap_or(0);
        // The admin shares the cluster rate per worker; a worker running
        // several jobs at once splits its share again. A burst of 0 keeps
        // meaning "twice the rate".
        let slots = base.weed_admin.execution_slots.max(1);
        if slots > 1 {
            s.rate.deletes_per_second /= f64::from(slots);
            if s.rate.burst > 0 {
                s.rate.burst = (s.rate.burst / slots).max(1);
            }
        }
        rate_source = "admin share";
    }
    let days = int_value(req.admin_config_values.get(KEY_RETENTION_DAYS)).unwrap_or(0);
    if days > 0 {
        s.pass.meta_log_retention = Duration::from_secs(u64::try_from(days).unwrap_or(0) * 86_400);
    }
    let minutes = int_value(req.admin_config_values.get(KEY_WALKER_MINUTES)).unwrap_or(0);
    if minutes > 0 {
        s.pass.walker_interval = Duration::from_secs(u64::try_from(minutes).unwrap_or(0) * 60);
    }
    s.validate().map_err(|e| e.to_string())?;
    Ok(JobPlan {
        settings: s,
        shards,
        rate_source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::plugin::{AdminRuntimeConfig, ClusterContext, JobSpec};

    #[test]
    fn shard_sets_cover_every_shard_once() {
        for n in 1..=20 {
            let sets = shard_sets(n);
            assert_eq!(sets.len(), n.min(16));
            let all: Vec<u8> = sets.concat();
            assert_eq!(all, (0..16).collect::<Vec<u8>>());
            let (min, max) = (
                sets.iter().map(Vec::len).min().unwrap(),
                sets.iter().map(Vec::len).max().unwrap(),
            );
            assert!(max - min <= 1, "n={n}: uneven sets {sets:?}");
        }
        assert_eq!(shards_label(&[0, 1, 2, 3]), "0-3");
        assert_eq!(shards_label(&[1, 4, 5]), "1,4-5");
    }

    fn detection(max_results: i32, max_jobs: i32) -> RunDetectionRequest {
        RunDetectionRequest {
            request_id: "detect-1".into(),
            job_type: JOB_TYPE.into(),
            admin_runtime: Some(AdminRuntimeConfig {
                max_jobs_per_detection: max_jobs,
                ..Default::default()
            }),
            cluster_context: Some(ClusterContext {
                filer_addresses: vec!["127.0.0.1:8888.18888".into()],
                s3_grpc_addresses: vec!["127.0.0.1:18333".into()],
                ..Default::default()
            }),
            max_results,
            ..Default::default()
        }
    }

    #[test]
    fn detection_splits_shards_as_the_admin_allows() {
        let p = detect(&detection(2, 1), 7).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].dedupe_key, "s3_lifecycle:shards=0-7");
        assert_eq!(p[1].dedupe_key, "s3_lifecycle:shards=8-15");
        assert_eq!(
            string_value(p[0].parameters.get(PARAM_FILER)).unwrap(),
            "127.0.0.1:18888"
        );
        // A manual run sends no limit: the stored runtime decides.
        assert_eq!(detect(&detection(0, 4), 7).unwrap().len(), 4);
        assert_eq!(detect(&detection(0, 0), 7).unwrap().len(), 1);
        let mut none = detection(2, 2);
        none.cluster_context
            .as_mut()
            .unwrap()
            .filer_addresses
            .clear();
        assert!(detect(&none, 7).unwrap().is_empty());
        let mut other = detection(1, 1);
        other.job_type = "vacuum".into();
        assert!(detect(&other, 7).is_err());
    }

    fn execution(params: &[(&str, ConfigValue)], meta: &[(&str, &str)]) -> ExecuteJobRequest {
        ExecuteJobRequest {
            request_id: "exec-1".into(),
            job: Some(JobSpec {
                job_id: "j".into(),
                job_type: JOB_TYPE.into(),
                parameters: params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                ..Default::default()
            }),
            cluster_context: Some(ClusterContext {
                filer_addresses: vec!["10.0.0.1:8888.18888".into()],
                s3_grpc_addresses: vec!["10.0.0.2:18333".into()],
                metadata: meta
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
            admin_config_values: [
                (KEY_RETENTION_DAYS.to_string(), int(7)),
                (
                    KEY_WALKER_MINUTES.to_string(),
                    ConfigValue {
                        kind: Some(Kind::DoubleValue(90.0)),
                    },
                ),
            ]
            .into_iter()
            .collect(),
            attempt: 1,
            ..Default::default()
        }
    }

    #[test]
    fn a_go_detectors_job_runs_all_shards_on_its_filer_grpc_address_unconverted() {
        let p = plan(
            &execution(&[(PARAM_FILER, string("10.0.0.9:18888"))], &[]),
            &Settings::default(),
        )
        .unwrap();
        assert_eq!(p.shards, (0..16).collect::<Vec<u8>>());
        // Dialled as given: it is already host:grpcPort.
        assert_eq!(
            p.settings.cluster.filer,
            ["10.0.0.9:18888", "10.0.0.1:18888"]
        );
        assert_eq!(p.settings.cluster.s3_grpc, ["10.0.0.2:18333"]);
        assert_eq!(
            p.settings.pass.meta_log_retention,
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            p.settings.pass.walker_interval,
            Duration::from_secs(90 * 60)
        );
        assert_eq!(p.rate_source, "worker config");
    }

    #[test]
    fn our_job_takes_its_shards_and_the_admins_rate_share() {
        let p = plan(
            &execution(
                &[(PARAM_SHARDS, string("8-15"))],
                &[(META_RATE, "2.5"), (META_BURST, "1")],
            ),
            &Settings::default(),
        )
        .unwrap();
        assert_eq!(p.shards, (8..16).collect::<Vec<u8>>());
        assert_eq!(p.settings.cluster.filer, ["10.0.0.1:18888"]);
        assert_eq!(p.settings.rate.effective(), Some((2.5, 1)));
        assert_eq!(p.rate_source, "admin share");
        // Two slots on this worker: each job gets half the worker's share.
        let mut two = Settings::default();
        two.weed_admin.execution_slots = 2;
        let p2 = plan(
            &execution(&[], &[(META_RATE, "10"), (META_BURST, "8")]),
            &two,
        )
        .unwrap();
        assert_eq!(p2.settings.rate.effective(), Some((5.0, 4)));
        let p3 = plan(&execution(&[], &[(META_RATE, "10")]), &two).unwrap();
        assert_eq!(p3.settings.rate.effective(), Some((5.0, 10)));
        let bad = plan(
            &execution(&[(PARAM_SHARDS, string("0-99"))], &[]),
            &Settings::default(),
        );
        assert!(bad.unwrap_err().contains("job parameter `shards`"));
    }
}
