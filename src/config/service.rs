//! The always-on service and its outputs: `[service]`, `[telemetry]`,
//! `[weed_admin]`.

use std::time::Duration;

use serde::Deserialize;

use super::values::de_duration;
use super::{ConfigError, Settings, invalid, require};

/// `[service]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceSettings {
    /// Daily start time, `HH:MM` UTC, or `off` (admin triggers only).
    pub schedule: String,
    /// Admin gRPC listen address (loopback by default).
    pub admin_listen: String,
    /// HTTP listen address for /metrics, /health, /ready and the status page.
    pub http_listen: String,
    /// On SIGTERM/SIGINT: time to drain in-flight deletes and save cursors.
    #[serde(deserialize_with = "de_duration")]
    pub shutdown_deadline: Duration,
    /// Accept a `TriggerRun` whose `now` is more than
    /// [`FUTURE_NOW_TOLERANCE`] past the wall clock (and not a dry run).
    /// Meant for test clusters only: such a pass deletes everything the rules
    /// would delete by that date.
    pub allow_future_now: bool,
    /// File holding the bearer token the admin API and the status page
    /// require (and the CLI sends); required when either listens beyond
    /// loopback. Empty = no token.
    pub admin_token_file: String,
    /// How long another `serve` on the same cursor dir takes this one's
    /// instance file for alive after its last renewal (renewed every third
    /// of it); a standby takes over after that (docs/serve-instances.md).
    #[serde(deserialize_with = "de_duration")]
    pub instance_ttl: Duration,
}

/// How far past the wall clock a trigger's `now` may be before `serve` refuses
/// it (unless `dry_run` or `service.allow_future_now`): room for clock skew
/// between the CLI's host and the service, nothing more.
pub const FUTURE_NOW_TOLERANCE: Duration = Duration::from_secs(300);

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings {
            schedule: "00:30".into(),
            admin_listen: "127.0.0.1:9710".into(),
            http_listen: "127.0.0.1:9711".into(),
            shutdown_deadline: Duration::from_secs(30),
            allow_future_now: false,
            admin_token_file: String::new(),
            instance_ttl: Duration::from_secs(90),
        }
    }
}

/// `[telemetry]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    pub log_format: String,
    /// tracing-subscriber filter, e.g. `info,s3_lifecycled=debug`.
    pub log_filter: String,
    /// OTLP/gRPC trace endpoint, e.g. `http://127.0.0.1:4317`; empty = off.
    pub otlp_endpoint: String,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            log_format: "text".into(),
            log_filter: "info".into(),
            otlp_endpoint: String::new(),
        }
    }
}

impl Settings {
    pub(super) fn validate_weed_admin(&self) -> Result<(), ConfigError> {
        let w = &self.weed_admin;
        if !w.address.trim().is_empty() {
            crate::seaweed::endpoint::ServerAddress::parse(&w.address)
                .map_err(|m| invalid("weed_admin.address", m.to_string()))?;
        }
        require(
            w.execution_slots != 0,
            "weed_admin.execution_slots",
            "must be at least 1",
        )?;
        let beat = w.heartbeat_interval;
        require(
            !beat.is_zero() && beat <= Duration::from_secs(60),
            "weed_admin.heartbeat_interval",
            "must be between 1s and 60s (the admin forgets a worker silent for 2 minutes)",
        )?;
        let ml = w.metrics_listen.trim();
        require(
            ml.is_empty() || ml.parse::<std::net::SocketAddr>().is_ok(),
            "weed_admin.metrics_listen",
            format!("`{ml}` is not an IP:port address such as 127.0.0.1:9712 (empty: off)"),
        )?;
        require(
            !w.state_dir.trim().is_empty(),
            "weed_admin.state_dir",
            "must name a directory, e.g. /var/lib/s3-lifecycled",
        )
    }
}

/// `[weed_admin]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WeedAdminSettings {
    /// The `weed admin` address, `host:httpPort` or `host:httpPort.grpcPort`
    /// (gRPC = HTTP + 10000 unless given). `worker` connects to it; `serve`
    /// and `run-once` ask it, before deleting, whether another `s3_lifecycle`
    /// worker is serving the cluster. Empty = no admin.
    pub address: String,
    /// This worker's id at the admin; empty = generated once and kept in
    /// `state_dir` (one id per process: the admin drops both streams when
    /// two share one).
    pub worker_id: String,
    /// Where `worker` keeps its id and the executions in progress (reported
    /// as failed after a restart).
    pub state_dir: String,
    /// Executions this worker runs at once.
    pub execution_slots: u32,
    /// Heartbeat period (the admin forgets a worker silent for 2 minutes).
    #[serde(deserialize_with = "de_duration")]
    pub heartbeat_interval: Duration,
    /// Delete even when another (non-s3-lifecycled) worker serves
    /// `s3_lifecycle` at the admin. For migrations only: two enforcers with
    /// different cursors delete by different rules.
    pub allow_other_enforcers: bool,
    /// Where `worker` serves `/metrics` and `/health` (`IP:port`); empty = no
    /// HTTP endpoint, as `weed worker` without `-metricsPort`.
    #[serde(default)]
    pub metrics_listen: String,
}

impl Default for WeedAdminSettings {
    fn default() -> Self {
        WeedAdminSettings {
            address: String::new(),
            worker_id: String::new(),
            state_dir: "s3-lifecycled-worker".into(),
            execution_slots: 1,
            heartbeat_interval: Duration::from_secs(15),
            allow_other_enforcers: false,
            metrics_listen: String::new(),
        }
    }
}
