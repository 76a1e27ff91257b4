//! One enforcer at a time: before deleting, ask `weed admin` whether a worker
//! that is not s3-lifecycled (the Go `weed worker`, `weed mini`) also serves
//! `s3_lifecycle`. Two enforcers keep different cursors and delete by
//! different rules, the failure operators fear most when migrating
//! (docs/plugin-worker.md#one-enforcer).

use serde_json::Value;

use crate::config::Settings;
use crate::plugin::admin_http;
use crate::plugin::job::{JOB_TYPE, VERSION_PREFIX};
use crate::seaweed::endpoint::ServerAddress;
use crate::seaweed::tls::ClientTls;
use crate::seaweed::tls_failure::TlsUse;

/// A worker at the admin that serves `s3_lifecycle` and is not ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignWorker {
    pub id: String,
    /// Its `worker_version` (Go's is the `weed` version string).
    pub version: String,
    /// Its address as it reported it (Go: the host name).
    pub address: String,
}

fn field<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names.iter().find_map(|n| v.get(*n))
}

fn text(v: &Value, names: &[&str]) -> String {
    field(v, names)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The workers in `/api/plugin/workers`'s answer that offer `s3_lifecycle`
/// (detect or execute) and are neither s3-lifecycled nor `self_id`. The
/// admin lists only fresh workers (seen within 2 minutes), so every one
/// listed may take a job.
pub fn foreign_enforcers(workers: &Value, self_id: Option<&str>) -> Vec<ForeignWorker> {
    let Some(list) = workers.as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|w| {
            let id = text(w, &["WorkerID", "worker_id"]);
            let version = text(w, &["WorkerVersion", "worker_version"]);
            let caps = field(w, &["Capabilities", "capabilities"])?;
            let cap = caps.get(JOB_TYPE)?;
            let flag = |names: &[&str]| field(cap, names).and_then(Value::as_bool) == Some(true);
            let serves = flag(&["can_execute", "CanExecute"]) || flag(&["can_detect", "CanDetect"]);
            let ours = version.starts_with(VERSION_PREFIX) || self_id == Some(id.as_str());
            (serves && !ours).then(|| ForeignWorker {
                id,
                version,
                address: text(w, &["Address", "address"]),
            })
        })
        .collect()
}

/// Why deleting is refused while `others` serve `s3_lifecycle`, and how to
/// fix it. `worker`: the check of one of our plugin workers, which needs the
/// job type enabled itself, so disabling it is no fix there.
pub fn refusal(admin: &str, others: &[ForeignWorker], worker: bool) -> String {
    let names: Vec<String> = others
        .iter()
        .map(|w| format!("{} (version {}, address {})", w.id, w.version, w.address))
        .collect();
    let other_fix = if worker {
        "`weed mini`'s own worker cannot drop it: beside `weed mini`, run `s3-lifecycled serve` \
         instead of workers and disable job type s3_lifecycle at its admin"
    } else {
        "or disable job type s3_lifecycle at the admin (UI, or PUT \
         /api/plugin/job-types/s3_lifecycle/config with admin_runtime.enabled false; the only \
         way on `weed mini`, whose worker always offers it)"
    };
    format!(
        "refusing to delete: weed admin {admin} has another s3_lifecycle worker: {}. Two \
         enforcers keep different cursors and delete by different rules. Take s3_lifecycle off \
         it: restart it with an explicit job list without it, e.g. `weed worker -admin={admin} \
         -jobType=vacuum,volume_balance,erasure_coding` (a plain `weed worker` serves every job \
         type); {other_fix}. For a migration, weed_admin.allow_other_enforcers = true overrides \
         this check",
        names.join(", ")
    )
}

/// The client TLS of the check's calls when the admin's HTTP API is HTTPS:
/// `[https.client]` in `cluster.security_toml`
/// (docs/plugin-worker.md#admin-https), loaded and checked now, with the
/// admin's host (from `weed_admin.address`) as the name its certificate must
/// carry, as SeaweedFS's Go clients check it. `None`: plain HTTP. `Err`
/// names the key and the file.
pub fn admin_https(s: &Settings) -> Result<Option<ClientTls>, String> {
    let Some(mut files) = s
        .admin_https_files(std::env::vars())
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let admin = ServerAddress::parse(&s.weed_admin.address)
        .map_err(|e| format!("weed_admin.address {e}"))?
        .http();
    files.server_name = crate::seaweed::tls::host_port(&admin).map(|(host, _)| host);
    // The error names the [https.client] key and the file it read.
    ClientTls::load_for(files, TlsUse::AdminHttps)
        .map(Some)
        .map_err(|e| {
            format!(
                "cluster.security_toml {}: {e}",
                s.cluster.security_toml.trim()
            )
        })
}

/// At start-up (`serve`, `worker`): whether the check's `[https.client]`
/// loads, so a bad one is a configuration error now rather than a failed pass
/// or job later. Nothing to check when the check does not run.
pub fn check_config(s: &Settings) -> Result<(), String> {
    if s.weed_admin.address.trim().is_empty() || s.weed_admin.allow_other_enforcers {
        return Ok(());
    }
    admin_https(s).map(|_| ())
}

/// [`check`] of the admin `s` names (`weed_admin.address`), over HTTPS when
/// `s` enables `[https.client]` ([`admin_https`]).
pub async fn check_settings(s: &Settings, self_id: Option<&str>) -> Result<(), String> {
    let tls = admin_https(s)?;
    check(&s.weed_admin.address, tls.as_ref(), self_id).await
}

/// Asks the admin at `admin` (`host:http[.grpc]`), over HTTPS with `tls`,
/// and returns the refusal when a foreign worker serves `s3_lifecycle`. An
/// admin that cannot be asked is an error too: the operator named it so
/// that this check runs.
pub async fn check(
    admin: &str,
    tls: Option<&ClientTls>,
    self_id: Option<&str>,
) -> Result<(), String> {
    let http = ServerAddress::parse(admin)
        .map_err(|e| format!("weed_admin.address {e}"))?
        .http();
    let workers = match admin_http::get(tls, &http, "/api/plugin/workers").await {
        Ok(w) => w,
        // An admin with `[https.admin]` serves its HTTP API over TLS only
        // (docs/plugin-worker.md#admin-https); plaintext just sees the
        // connection close, so say why and what to set.
        Err(e) if tls.is_none() && crate::seaweed::tls::speaks_tls(&http).await => {
            return Err(format!(
                "cannot check weed admin for other s3_lifecycle workers: its HTTP API at {http} \
                 serves HTTPS ([https.admin] in its security.toml) and cluster.security_toml \
                 does not enable [https.client] ({e}). Set [https.client] enabled = true and \
                 ca (the CA of the admin's certificate) in the security.toml that \
                 cluster.security_toml names, plus cert and key when the admin sets \
                 [https.admin] ca; or set weed_admin.allow_other_enforcers = true after \
                 checking GET /api/plugin/workers by hand"
            ));
        }
        Err(e) => {
            let fix = if tls.is_some() {
                "fix weed_admin.address or [https.client] in cluster.security_toml"
            } else {
                "fix weed_admin.address"
            };
            return Err(format!(
                "cannot check weed admin for other s3_lifecycle workers ({e}); {fix}, or set \
                 weed_admin.allow_other_enforcers = true"
            ));
        }
    };
    let others = foreign_enforcers(&workers, self_id);
    if others.is_empty() {
        return Ok(());
    }
    // `weed mini`'s own worker always offers s3_lifecycle and cannot be
    // restarted with another job list; with the job type disabled the admin
    // schedules none (docs/plugin-worker.md#one-enforcer).
    let config = format!("/api/plugin/job-types/{JOB_TYPE}/config");
    if let Ok(c) = admin_http::get(tls, &http, &config).await
        && job_type_disabled(&c)
    {
        tracing::warn!(
            admin,
            workers = ?others.iter().map(|w| &w.id).collect::<Vec<_>>(),
            "{DISABLED_AT_ADMIN}: they get no scheduled s3_lifecycle job, but a \"Run now\" at \
             the admin would start a Go pass"
        );
        return Ok(());
    }
    Err(refusal(admin, &others, self_id.is_some()))
}

/// The start of the warning when foreign workers serve a disabled job type.
pub const DISABLED_AT_ADMIN: &str =
    "other s3_lifecycle workers are registered at weed admin, but the job type is disabled there";

/// Whether the admin's job type configuration (`GET
/// /api/plugin/job-types/s3_lifecycle/config`) has its scheduling turned
/// off. Anything else, a missing field included, counts as on.
fn job_type_disabled(config: &Value) -> bool {
    config
        .get("admin_runtime")
        .and_then(|r| r.get("enabled"))
        .and_then(Value::as_bool)
        == Some(false)
}

/// The one-enforcer check of `run-once` and `serve`: with `weed_admin.address`
/// set, refuses to delete while a worker that is not s3-lifecycled serves
/// `s3_lifecycle` there (docs/plugin-worker.md#one-enforcer), unless
/// `weed_admin.allow_other_enforcers` is on.
///
/// Without `weed_admin.address`, the master is asked whether an admin is
/// connected; it knows no admin's address, so the check cannot run, and a
/// connected admin is reported as a warning naming the setting
/// (docs/plugin-worker.md#admin-discovery).
pub async fn one_enforcer(s: &Settings) -> Result<(), String> {
    let admin = s.weed_admin.address.trim();
    if s.weed_admin.allow_other_enforcers {
        return Ok(());
    }
    if admin.is_empty() {
        warn_unconfigured_admin(s).await;
        return Ok(());
    }
    check_settings(s, None).await
}

/// The text of the warning for an admin the master reports but
/// `weed_admin.address` does not name.
pub const UNCONFIGURED_ADMIN: &str = "weed_admin.address is not set";

async fn warn_unconfigured_admin(s: &Settings) {
    let master = s.cluster.master.trim();
    if master.is_empty() {
        return;
    }
    let Ok(tls) = s.client_tls() else {
        return;
    };
    match crate::seaweed::discovery::admin_presence(master, tls.as_ref()).await {
        Ok(Some(holder)) => tracing::warn!(
            master,
            holder,
            "the master reports a weed admin connected, but {UNCONFIGURED_ADMIN}: the \
             one-enforcer check cannot ask it whether another worker (e.g. a Go `weed worker`) \
             serves s3_lifecycle, and the master does not publish the admin's address. Set \
             weed_admin.address to that admin's host:httpPort[.grpcPort]"
        ),
        Ok(None) => {}
        Err(e) => {
            tracing::debug!(error = %e, "cannot ask the master whether a weed admin is connected")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_go_worker_serving_s3_lifecycle_is_foreign_and_ours_are_not() {
        let workers = json!([
            {"WorkerID": "w-host-1a2b", "WorkerVersion": "8000GB 4.48 pypi", "Address": "host",
             "Capabilities": {"s3_lifecycle": {"job_type": "s3_lifecycle", "can_detect": true, "can_execute": true},
                              "vacuum": {"job_type": "vacuum", "can_execute": true}}},
            {"WorkerID": "s3lc-a", "WorkerVersion": "s3-lifecycled 0.1.0",
             "Capabilities": {"s3_lifecycle": {"can_execute": true}}},
            {"WorkerID": "w-vacuum", "WorkerVersion": "8000GB 4.48 pypi",
             "Capabilities": {"vacuum": {"can_execute": true}}},
            {"WorkerID": "me", "WorkerVersion": "?",
             "Capabilities": {"s3_lifecycle": {"can_execute": true}}}
        ]);
        let f = foreign_enforcers(&workers, Some("me"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "w-host-1a2b");
        let msg = refusal("127.0.0.1:23646", &f, false);
        assert!(
            msg.contains("w-host-1a2b") && msg.contains("-jobType="),
            "{msg}"
        );
        assert!(msg.contains("allow_other_enforcers"), "{msg}");
        assert!(msg.contains("admin_runtime.enabled false"), "{msg}");
        // Our own worker needs the job type on: the fix it is given is `serve`.
        let msg = refusal("127.0.0.1:23646", &f, true);
        assert!(
            !msg.contains("admin_runtime.enabled") && msg.contains("s3-lifecycled serve"),
            "{msg}"
        );
        assert!(foreign_enforcers(&json!([]), None).is_empty());
    }

    #[test]
    fn a_disabled_job_type_still_refused_weed_minis_worker() {
        // As `weed mini`'s admin answers, before and after disabling the job type.
        let on = json!({"job_type": "s3_lifecycle", "admin_runtime": {"enabled": true, "detection_interval_minutes": 1440}});
        let off = json!({"job_type": "s3_lifecycle", "admin_runtime": {"detection_interval_minutes": 1440, "enabled": false}});
        assert!(!job_type_disabled(&on));
        assert!(job_type_disabled(&off));
        assert!(
            !job_type_disabled(&json!({"job_type": "s3_lifecycle"})),
            "unknown counts as on"
        );
        assert!(!job_type_disabled(
            &json!({"admin_runtime": {"enabled": "false"}})
        ));
        assert!(foreign_enforcers(&json!({"error": "x"}), None).is_empty());
    }
}
