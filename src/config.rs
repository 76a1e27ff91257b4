//! Service configuration: TOML files (see `config/default.toml`, which documents
//! every key next to its default) layered under `S3_LIFECYCLED__SECTION__KEY`
//! environment overrides, then validated. Errors name the offending key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::engine::{DueRounding, TimeConfig};
pub use crate::seaweed::tls::TlsFiles;

/// Prefix of environment overrides: `S3_LIFECYCLED__RATE__DELETES_PER_SECOND=50`.
pub const ENV_PREFIX: &str = "S3_LIFECYCLED";

/// A configuration problem. Maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or an override could not be read or does not fit the schema.
    #[error("configuration: {0}")]
    Load(String),
    /// A value is out of range.
    #[error("configuration key `{key}`: {message}")]
    Invalid {
        /// Dotted key, e.g. `rate.burst`.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The TLS material the settings name cannot be used.
    #[error("TLS material from {from}: {error}")]
    Tls {
        /// Where the settings came from: `[tls]` or `cluster.security_toml (FILE)`.
        from: String,
        /// What is wrong with a file, naming it.
        error: crate::seaweed::tls::TlsConfigError,
    },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

/// All settings. Every field has a default, so no file is needed at all.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Where the SeaweedFS cluster is.
    pub cluster: ClusterSettings,
    /// What one pass covers and how it decides.
    pub pass: PassSettings,
    /// Lifecycle time: day length and due-time rounding.
    pub time: TimeSettings,
    /// Delete rate limits.
    pub rate: RateSettings,
    /// Delete dispatch: concurrency and transport retries.
    pub dispatch: DispatchSettings,
    /// Cursor storage in the filer.
    pub cursor: CursorSettings,
    /// The always-on service (`serve`).
    pub service: ServiceSettings,
    /// Logs and traces.
    pub telemetry: TelemetrySettings,
    /// gRPC client TLS towards the cluster (docs/tls.md).
    pub tls: TlsSettings,
    /// Safety rails: deletion caps (ops/runbook.md (h)).
    pub safety: SafetySettings,
    /// The deletion journal in the filer.
    pub journal: JournalSettings,
    /// Reclaimed-space reports and the optional vacuum after a pass
    /// (docs/reclaimed-space.md).
    pub reclaim: ReclaimSettings,
    /// The legacy-TTL audit (docs/ttl-audit.md).
    pub audit: AuditSettings,
    /// `weed admin`: the plugin worker, and the one-enforcer check.
    pub weed_admin: WeedAdminSettings,
}

/// `[journal]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct JournalSettings {
    /// Day directories of the journal older than this are removed after
    /// each pass; 0 = keep forever.
    #[serde(deserialize_with = "de_duration")]
    pub retention: Duration,
}

impl Default for JournalSettings {
    fn default() -> Self {
        JournalSettings {
            retention: Duration::from_secs(30 * 86_400),
        }
    }
}

/// `[reclaim]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ReclaimSettings {
    /// After a pass that deleted, read the touched collections' volume
    /// garbage from the master and report it.
    pub report: bool,
    /// How long to wait, at most, for the master's view of the volumes to
    /// take in the pass's deletes (it trails by one heartbeat); 0 = read at
    /// once.
    #[serde(deserialize_with = "de_duration")]
    pub settle: Duration,
    /// Ask the master to vacuum the touched collections' volumes whose
    /// garbage ratio is at least `vacuum_threshold`, after the pass's
    /// deletes. Off by default: a vacuum rewrites volumes.
    pub vacuum: bool,
    /// Garbage ratio (0..1) from which a volume is vacuumed.
    pub vacuum_threshold: f64,
    /// Most volumes vacuumed after one pass.
    pub max_vacuum_volumes: usize,
    /// The master's own `-garbageThreshold` (0.3 by default): it vacuums
    /// volumes at or above it by itself, every 15 minutes, so those are left
    /// to it. 1 when the master's automatic vacuum is off.
    pub master_garbage_threshold: f64,
    /// Deadline of one volume's vacuum.
    #[serde(deserialize_with = "de_duration")]
    pub vacuum_timeout: Duration,
}

impl Default for ReclaimSettings {
    fn default() -> Self {
        ReclaimSettings {
            report: true,
            settle: Duration::from_secs(10),
            vacuum: false,
            vacuum_threshold: 0.1,
            max_vacuum_volumes: 8,
            master_garbage_threshold: 0.3,
            vacuum_timeout: Duration::from_secs(600),
        }
    }
}

/// `[audit]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSettings {
    /// `serve` audits at start and after each pass, for the status page and
    /// the `s3_lifecycled_ttl_findings` gauge.
    pub in_service: bool,
    /// Entries listed at most per bucket to find the ones carrying a TTL.
    pub max_entries: u64,
    /// Directory listings at most per bucket (each folder costs one).
    pub max_listings: u64,
}

impl AuditSettings {
    /// What one audit may read per bucket.
    pub fn budget(&self) -> crate::seaweed::ttl_scan::Budget {
        crate::seaweed::ttl_scan::Budget {
            max_entries: self.max_entries,
            max_listings: self.max_listings,
        }
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            in_service: true,
            max_entries: 1000,
            max_listings: 50,
        }
    }
}

/// `[safety]`
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SafetySettings {
    /// Deletes sent per bucket in one pass; past it the bucket is held
    /// (its remaining matches stay pending) until `approve`. 0 = no cap.
    pub max_deletes_per_bucket: u64,
    /// Fraction (0..1) of a bucket's entries one pass may delete; needs one
    /// count (listing) of every enforced bucket per pass. 0 = no cap.
    pub max_delete_fraction: f64,
    /// For this long after a bucket's lifecycle document changes, the bucket
    /// is evaluated dry (nothing sent, its matches pending); 0 = off.
    #[serde(deserialize_with = "de_duration")]
    pub rule_change_grace: Duration,
}

impl SafetySettings {
    /// The caps as the pure core takes them.
    pub fn cap_limits(&self) -> crate::engine::safety::CapLimits {
        crate::engine::safety::CapLimits {
            max_deletes: self.max_deletes_per_bucket,
            max_fraction: self.max_delete_fraction,
        }
    }
}

/// `[tls]`: mutual TLS towards the filer and the S3 gateway. Empty `ca` =
/// plaintext (unless `cluster.security_toml` names a file that enables it).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// CA bundle (PEM) the servers' certificates must chain to.
    pub ca: String,
    /// Client certificate (PEM) presented to the servers.
    pub cert: String,
    /// The client certificate's private key (PEM).
    pub key: String,
    /// Host name the server certificates must carry; empty = check the chain
    /// only (SeaweedFS certificates are often CN-only; docs/tls.md).
    pub server_name: String,
}

/// `[cluster]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// Filer gRPC addresses, `host:port` (filer HTTP port + 10000 by default):
    /// one string (the form before lists), a comma-separated string or a
    /// TOML array. The first reachable one serves the pass; the others take
    /// over when it fails (docs/meta-log.md#several-filers). Empty: discovered
    /// from `master` when that is set, else [`DEFAULT_FILER`].
    #[serde(deserialize_with = "de_list")]
    pub filer: Vec<String>,
    /// S3 gRPC addresses, where `LifecycleDelete` is served (S3 port +
    /// 10000), in the same forms as `filer`. Deletes are spread across them.
    /// Empty: discovered from `master` when that is set, else
    /// [`DEFAULT_S3_GRPC`].
    #[serde(deserialize_with = "de_list")]
    pub s3_grpc: Vec<String>,
    /// Master gRPC address (`host:port`, or SeaweedFS's `host:httpPort.grpcPort`).
    /// When set, an empty `filer` or `s3_grpc` list is read from the master's
    /// cluster membership at every pass; empty = no discovery.
    pub master: String,
    /// Buckets root in the filer; empty = ask the filer (`GetFilerConfiguration`).
    pub buckets_root: String,
    /// Deadline of each unary filer call (lookups, listing pages, cursor
    /// load/save, bucket scan); not of the meta-log subscription.
    #[serde(deserialize_with = "de_duration")]
    pub filer_call_timeout: Duration,
    /// SeaweedFS `security.toml` to take the gRPC TLS material from
    /// (`[grpc] ca`, `[grpc.client] cert/key`, `WEED_GRPC_*` overrides);
    /// empty = use `[tls]`.
    pub security_toml: String,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            filer: Vec::new(),
            s3_grpc: Vec::new(),
            master: String::new(),
            buckets_root: String::new(),
            filer_call_timeout: Duration::from_secs(30),
            security_toml: String::new(),
        }
    }
}

/// The filer address used when neither `cluster.filer` nor `cluster.master` is set.
pub const DEFAULT_FILER: &str = "127.0.0.1:18888";
/// The S3 gRPC address used when neither `cluster.s3_grpc` nor `cluster.master` is set.
pub const DEFAULT_S3_GRPC: &str = "127.0.0.1:18333";

impl ClusterSettings {
    /// The configured filers: `filer`, else [`DEFAULT_FILER`] without a
    /// master; `None` when they are to be discovered from the master.
    pub fn static_filers(&self) -> Option<Vec<String>> {
        static_or_default(&self.filer, &self.master, DEFAULT_FILER)
    }

    /// The configured S3 gRPC addresses, as [`ClusterSettings::static_filers`].
    pub fn static_s3_grpc(&self) -> Option<Vec<String>> {
        static_or_default(&self.s3_grpc, &self.master, DEFAULT_S3_GRPC)
    }

    /// What discovery is asked for: the static lists, or the master.
    pub fn wanted(&self) -> crate::seaweed::discovery::Wanted {
        crate::seaweed::discovery::Wanted {
            master: self.master.clone(),
            filers: self.static_filers(),
            s3_grpc: self.static_s3_grpc(),
        }
    }

    /// The filers for messages: the list, or where they come from.
    pub fn filer_label(&self) -> String {
        match self.static_filers() {
            Some(list) => list.join(","),
            None => format!("(discovered from master {})", self.master),
        }
    }
}

fn static_or_default(list: &[String], master: &str, default: &str) -> Option<Vec<String>> {
    if !list.is_empty() {
        Some(list.to_vec())
    } else if master.trim().is_empty() {
        Some(vec![default.to_string()])
    } else {
        None
    }
}

/// `[pass]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PassSettings {
    /// Shards this instance runs: `0-15`, `3`, or `0,4,7`.
    pub shards: String,
    /// Minimum time between steady-state walks of a bucket; 0 = every pass.
    #[serde(deserialize_with = "de_duration")]
    pub walker_interval: Duration,
    /// Meta-log retention to assume; 0 = probe the filer's persisted log.
    #[serde(deserialize_with = "de_duration")]
    pub meta_log_retention: Duration,
    /// Extra rewind on recovery for clock skew between S3 gateways and the filer.
    #[serde(deserialize_with = "de_duration")]
    pub clock_skew_margin: Duration,
    /// How far behind the newest processed meta-log event replay progress
    /// stays, for events that arrive out of timestamp order (late appends, a
    /// peer filer's events aggregated late; docs/meta-log.md#several-filers).
    /// Also how far back a broken stream resumes on another filer.
    #[serde(deserialize_with = "de_duration")]
    pub reorder_margin: Duration,
    /// Cap on one pass; 0 = none. A capped pass saves cursors and is "truncated".
    #[serde(deserialize_with = "de_duration")]
    pub max_runtime: Duration,
    /// Share of `max_runtime` the walk phase may use; the rest is left to
    /// replay. A walk cut there resumes next pass
    /// (docs/design-deviations.md#resumable-recovery-walks). In (0, 1].
    pub walk_budget_fraction: f64,
    /// How often a running pass re-reads the buckets' lifecycle
    /// configurations, so an edit or deletion stops that bucket's deletes
    /// within about this long; 0 = never (the pass keeps its start snapshot).
    #[serde(deserialize_with = "de_duration")]
    pub config_refresh: Duration,
    /// Buffered meta-log events between the reader and the shards.
    pub event_buffer: usize,
    /// Read the filer's persisted meta-log files straight from the volume
    /// servers (plain HTTP GET of each chunk) instead of having the filer
    /// decode and stream them; events still in the filer's memory come
    /// streamed as usual (docs/meta-log.md#direct-log-file-reads). Where the
    /// volume servers cannot hand a file out (down, not reachable from here,
    /// read JWTs, HTTPS, encrypted volumes) the filer streams that part
    /// instead (docs/meta-log.md#when-a-file-cannot-be-read). On by default:
    /// a pass that must read everything runs at about twice the filer
    /// stream's rate (docs/baselines.md#allocator).
    pub direct_log_reads: bool,
    /// Most resolved-delete marks (the "do not re-send" tail past each
    /// action's contiguous progress) one pass holds, over every action and
    /// shard together, split evenly over the 16 shards
    /// (docs/due-index.md#memory). Past it a shard stops taking events until
    /// its in-flight deletes answer, then forgets the oldest marks (re-sent
    /// once by a later pass, as no-ops). Never a skipped delete.
    pub tail_budget: usize,
    /// Buckets this instance acts on; empty = every bucket with a lifecycle
    /// configuration. From the environment: a comma-separated list
    /// (`S3_LIFECYCLED__PASS__BUCKETS=a,b`).
    #[serde(deserialize_with = "de_list")]
    pub buckets: Vec<String>,
}

impl PassSettings {
    /// How long the walk phase may run before it is cut and replay starts
    /// (`None`: no cap, without `max_runtime`).
    pub fn walk_budget(&self) -> Option<Duration> {
        (!self.max_runtime.is_zero()).then(|| {
            self.max_runtime
                .mul_f64(self.walk_budget_fraction.clamp(0.0, 1.0))
        })
    }
}

impl Default for PassSettings {
    fn default() -> Self {
        PassSettings {
            shards: "0-15".into(),
            walker_interval: Duration::ZERO,
            meta_log_retention: Duration::ZERO,
            clock_skew_margin: Duration::from_secs(600),
            reorder_margin: Duration::from_secs(5),
            max_runtime: Duration::ZERO,
            walk_budget_fraction: 0.5,
            config_refresh: Duration::from_secs(1),
            event_buffer: 4096,
            direct_log_reads: true,
            tail_budget: 1 << 20,
            buckets: Vec::new(),
        }
    }
}

/// `[time]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TimeSettings {
    /// Length of a lifecycle day. Shorten only on test clusters.
    #[serde(deserialize_with = "de_duration")]
    pub day: Duration,
    /// `next_day` (AWS, Ceph, MinIO) or `none` (SeaweedFS Go worker parity).
    pub due_rounding: DueRounding,
}

impl Default for TimeSettings {
    fn default() -> Self {
        TimeSettings {
            day: Duration::from_secs(86_400),
            due_rounding: DueRounding::NextDay,
        }
    }
}

impl TimeSettings {
    /// The engine's time configuration.
    pub fn time_config(&self) -> TimeConfig {
        TimeConfig {
            day: self.day,
            rounding: self.due_rounding,
        }
    }
}

/// `[rate]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RateSettings {
    /// Deletes per second for this instance; 0 = unlimited.
    pub deletes_per_second: f64,
    /// Burst; 0 = twice the rate.
    pub burst: u32,
    /// Cluster-wide deletes per second, divided by `workers`; overrides
    /// `deletes_per_second` when non-zero.
    pub cluster_deletes_per_second: f64,
    /// Number of s3-lifecycled instances sharing the cluster budget.
    pub workers: u32,
}

impl Default for RateSettings {
    fn default() -> Self {
        RateSettings {
            deletes_per_second: 0.0,
            burst: 0,
            cluster_deletes_per_second: 0.0,
            workers: 1,
        }
    }
}

impl RateSettings {
    /// This instance's rate (deletes/s) and burst, or `None` for unlimited.
    pub fn effective(&self) -> Option<(f64, u32)> {
        let rate = if self.cluster_deletes_per_second > 0.0 {
            self.cluster_deletes_per_second / f64::from(self.workers.max(1))
        } else {
            self.deletes_per_second
        };
        if rate <= 0.0 {
            return None;
        }
        let burst = if self.burst > 0 {
            self.burst
        } else {
            // Twice the rate, at least one token so a slow rate still moves.
            ((rate * 2.0).floor() as u32).max(1)
        };
        Some((rate, burst))
    }
}

/// `[dispatch]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchSettings {
    /// Deletes in flight per shard.
    pub max_in_flight_per_shard: usize,
    /// Deletes in flight across all shards.
    pub max_in_flight: usize,
    /// Attempts for a delete that fails in transport (server outcomes are never retried).
    pub retry_attempts: u32,
    /// First retry backoff; doubles, with jitter, up to `retry_max_backoff`.
    #[serde(deserialize_with = "de_duration")]
    pub retry_initial_backoff: Duration,
    /// Backoff cap.
    #[serde(deserialize_with = "de_duration")]
    pub retry_max_backoff: Duration,
    /// Deadline of one `LifecycleDelete` attempt; an attempt past it is a
    /// retryable transport error.
    #[serde(deserialize_with = "de_duration")]
    pub call_timeout: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            max_in_flight_per_shard: 32,
            max_in_flight: 128,
            retry_attempts: 3,
            retry_initial_backoff: Duration::from_millis(200),
            retry_max_backoff: Duration::from_secs(5),
            call_timeout: Duration::from_secs(60),
        }
    }
}

/// `[cursor]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CursorSettings {
    /// Filer directory holding `shard-NN.json`. Never the Go worker's directory.
    pub dir: String,
}

impl Default for CursorSettings {
    fn default() -> Self {
        CursorSettings {
            dir: "/etc/s3/lifecycle/s3-lifecycled".into(),
        }
    }
}

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
        }
    }
}

/// `[telemetry]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// `text` or `json`.
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
    fn validate_weed_admin(&self) -> Result<(), ConfigError> {
        let w = &self.weed_admin;
        if !w.address.trim().is_empty() {
            crate::seaweed::endpoint::ServerAddress::parse(&w.address)
                .map_err(|m| invalid("weed_admin.address", m.to_string()))?;
        }
        if w.execution_slots == 0 {
            return Err(invalid("weed_admin.execution_slots", "must be at least 1"));
        }
        if w.heartbeat_interval.is_zero() || w.heartbeat_interval > Duration::from_secs(60) {
            return Err(invalid(
                "weed_admin.heartbeat_interval",
                "must be between 1s and 60s (the admin forgets a worker silent for 2 minutes)",
            ));
        }
        let ml = w.metrics_listen.trim();
        if !ml.is_empty() && ml.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "weed_admin.metrics_listen",
                format!("`{ml}` is not an IP:port address such as 127.0.0.1:9712 (empty: off)"),
            ));
        }
        if w.state_dir.trim().is_empty() {
            return Err(invalid(
                "weed_admin.state_dir",
                "must name a directory, e.g. /var/lib/s3-lifecycled",
            ));
        }
        Ok(())
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

impl Settings {
    /// Loads the optional TOML file, then the `S3_LIFECYCLED__*` variables of
    /// `env` (pass `std::env::vars()` in production; tests pass a map), then
    /// validates.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let mut b = config::Config::builder();
        if let Some(path) = file {
            if !path.exists() {
                return Err(ConfigError::Load(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            b = b.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        let vars: HashMap<String, String> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(&format!("{ENV_PREFIX}__")))
            .collect();
        b = b.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(Some(vars)),
        );
        let cfg = b.build().map_err(|e| ConfigError::Load(e.to_string()))?;
        let s: Settings = cfg
            .try_deserialize()
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Range checks that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_weed_admin()?;
        for (key, list, example) in [
            ("cluster.filer", &self.cluster.filer, "127.0.0.1:18888"),
            ("cluster.s3_grpc", &self.cluster.s3_grpc, "127.0.0.1:18333"),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for addr in list {
                if addr.contains(char::is_whitespace) {
                    return Err(invalid(
                        key,
                        format!(
                            "`{addr}` is not a gRPC address; give HOST:PORT items, e.g. \
                             [\"{example}\"] or \"{example},10.0.0.2:{}\"",
                            example.rsplit(':').next().unwrap_or_default()
                        ),
                    ));
                }
                if !seen.insert(addr.as_str()) {
                    return Err(invalid(
                        key,
                        format!("lists `{addr}` twice; give each server once"),
                    ));
                }
            }
        }
        if self.cluster.master.contains(char::is_whitespace) || self.cluster.master.contains(',') {
            return Err(invalid(
                "cluster.master",
                format!(
                    "`{}` is not one master gRPC address; give HOST:PORT, e.g. 127.0.0.1:19333",
                    self.cluster.master
                ),
            ));
        }
        if self.pass.reorder_margin.is_zero()
            || self.pass.reorder_margin > Duration::from_secs(3600)
        {
            return Err(invalid(
                "pass.reorder_margin",
                format!(
                    "must be between 1ms and 1h, e.g. 5s (got {:?}): 0 would skip events the \
                     filer delivers out of order",
                    self.pass.reorder_margin
                ),
            ));
        }
        if self.pass.tail_budget < crate::engine::shard::SHARD_COUNT {
            return Err(invalid(
                "pass.tail_budget",
                format!(
                    "must be at least {} (one mark per shard), e.g. 1048576 (got {}): it bounds \
                     the resolved-delete marks a pass holds in memory",
                    crate::engine::shard::SHARD_COUNT,
                    self.pass.tail_budget
                ),
            ));
        }
        parse_shards(&self.pass.shards).map_err(|m| invalid("pass.shards", m))?;
        if self.time.day.is_zero() {
            return Err(invalid(
                "time.day",
                "must be a positive duration such as 24h or 10s",
            ));
        }
        for (key, v) in [
            ("rate.deletes_per_second", self.rate.deletes_per_second),
            (
                "rate.cluster_deletes_per_second",
                self.rate.cluster_deletes_per_second,
            ),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(invalid(
                    key,
                    format!("must be 0 (unlimited) or a positive number, got {v}"),
                ));
            }
        }
        let f = self.safety.max_delete_fraction;
        if !f.is_finite() || !(0.0..=1.0).contains(&f) {
            return Err(invalid(
                "safety.max_delete_fraction",
                format!(
                    "must be 0 (off) or a fraction of a bucket such as 0.1 (at most 1), got {f}"
                ),
            ));
        }
        for (key, v) in [
            ("reclaim.vacuum_threshold", self.reclaim.vacuum_threshold),
            (
                "reclaim.master_garbage_threshold",
                self.reclaim.master_garbage_threshold,
            ),
        ] {
            if !v.is_finite() || !(0.0..=1.0).contains(&v) {
                return Err(invalid(
                    key,
                    format!("must be a garbage ratio from 0 to 1 such as 0.3, got {v}"),
                ));
            }
        }
        if self.reclaim.vacuum && self.reclaim.max_vacuum_volumes == 0 {
            return Err(invalid(
                "reclaim.max_vacuum_volumes",
                "must be at least 1 when reclaim.vacuum is on (or turn reclaim.vacuum off)",
            ));
        }
        if self.audit.max_entries == 0 || self.audit.max_listings == 0 {
            return Err(invalid(
                "audit.max_entries",
                "audit.max_entries and audit.max_listings must be at least 1 (turn the service's \
                 audit off with audit.in_service = false)",
            ));
        }
        if self.rate.workers == 0 {
            return Err(invalid("rate.workers", "must be at least 1"));
        }
        if self.dispatch.max_in_flight == 0 || self.dispatch.max_in_flight_per_shard == 0 {
            return Err(invalid(
                "dispatch.max_in_flight",
                "max_in_flight and max_in_flight_per_shard must be at least 1",
            ));
        }
        if self.dispatch.retry_attempts == 0 {
            return Err(invalid(
                "dispatch.retry_attempts",
                "must be at least 1 (1 = no retry)",
            ));
        }
        for (key, d, example) in [
            ("dispatch.call_timeout", self.dispatch.call_timeout, "60s"),
            (
                "cluster.filer_call_timeout",
                self.cluster.filer_call_timeout,
                "30s",
            ),
        ] {
            if d.is_zero() {
                return Err(invalid(
                    key,
                    format!(
                        "must be a positive duration such as {example}: without a deadline one \
                         unanswered call hangs the pass"
                    ),
                ));
            }
        }
        if !self.pass.config_refresh.is_zero()
            && self.pass.config_refresh < Duration::from_millis(100)
        {
            return Err(invalid(
                "pass.config_refresh",
                "must be 0 (never re-read) or at least 100ms (each re-read lists the buckets \
                 directory), e.g. 1s",
            ));
        }
        let f = self.pass.walk_budget_fraction;
        if !(f > 0.0 && f <= 1.0) {
            return Err(invalid(
                "pass.walk_budget_fraction",
                format!(
                    "{f} is not in (0, 1]: it is the share of pass.max_runtime the walk may use \
                     before replay, e.g. 0.5"
                ),
            ));
        }
        if self.pass.event_buffer == 0 {
            return Err(invalid("pass.event_buffer", "must be at least 1"));
        }
        if !self.cursor.dir.starts_with('/') {
            return Err(invalid(
                "cursor.dir",
                "must be an absolute filer path such as /etc/s3/lifecycle/s3-lifecycled",
            ));
        }
        // Compared after normalising: the filer resolves `//`, `.` and `..`, so any spelling
        // of the Go directory would still overwrite the Go worker's cursors.
        if normalize_filer_path(&self.cursor.dir) == "/etc/s3/lifecycle/daily-cursors" {
            return Err(invalid(
                "cursor.dir",
                "is the Go worker's cursor directory; s3-lifecycled must not write there (it only reads it when migrating)",
            ));
        }
        if !schedule_off(&self.service.schedule) {
            parse_schedule(&self.service.schedule).map_err(|m| invalid("service.schedule", m))?;
        }
        if !matches!(self.telemetry.log_format.as_str(), "text" | "json") {
            return Err(invalid("telemetry.log_format", "must be `text` or `json`"));
        }
        self.validate_tls()?;
        Ok(())
    }

    fn validate_tls(&self) -> Result<(), ConfigError> {
        let t = &self.tls;
        let set = |v: &str| !v.trim().is_empty();
        if set(&self.cluster.security_toml) && (set(&t.ca) || set(&t.cert) || set(&t.key)) {
            return Err(invalid(
                "cluster.security_toml",
                "is set together with tls.ca/tls.cert/tls.key; use one source of TLS material \
                 (tls.server_name may go with either)",
            ));
        }
        if set(&t.cert) != set(&t.key) {
            return Err(invalid(
                "tls.cert",
                "tls.cert and tls.key must be set together (the client certificate and its key)",
            ));
        }
        if set(&t.cert) && !set(&t.ca) {
            return Err(invalid(
                "tls.ca",
                "must be set when tls.cert is: the CA bundle the servers' certificates chain to \
                 (SeaweedFS's [grpc] ca)",
            ));
        }
        if set(&t.server_name) && !set(&t.ca) && !set(&self.cluster.security_toml) {
            return Err(invalid(
                "tls.server_name",
                "only applies with TLS: set tls.ca (and tls.cert/tls.key) or cluster.security_toml",
            ));
        }
        Ok(())
    }

    /// The client TLS of gRPC connections, loaded and checked now, so that a
    /// bad file is a configuration error at start-up rather than a failed
    /// pass. `None`: plaintext.
    pub fn client_tls(&self) -> Result<Option<crate::seaweed::tls::ClientTls>, ConfigError> {
        let Some(files) = self.tls_files(std::env::vars())? else {
            return Ok(None);
        };
        let from = match self.cluster.security_toml.trim() {
            "" => "[tls]".to_string(),
            f => format!("cluster.security_toml ({f})"),
        };
        crate::seaweed::tls::ClientTls::load(files)
            .map(Some)
            .map_err(|error| ConfigError::Tls { from, error })
    }

    /// The gRPC client TLS material: from `[tls]`, or from the
    /// `security.toml` named by `cluster.security_toml` with SeaweedFS's
    /// `WEED_GRPC_CA` / `WEED_GRPC_CLIENT_CERT` / `WEED_GRPC_CLIENT_KEY`
    /// overrides taken from `env` (they win over the file, as in `weed`;
    /// docs/tls.md#how-seaweedfs-enables-it). `None`: plaintext, which is also
    /// what `weed` does when the file has no `[grpc] ca`.
    pub fn tls_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let server_name = Some(self.tls.server_name.trim().to_string()).filter(|s| !s.is_empty());
        let path = |s: &str| Some(PathBuf::from(s.trim())).filter(|p| !p.as_os_str().is_empty());
        let st = self.cluster.security_toml.trim();
        if st.is_empty() {
            let Some(ca) = path(&self.tls.ca) else {
                return Ok(None);
            };
            return Ok(Some(TlsFiles {
                ca,
                cert: path(&self.tls.cert),
                key: path(&self.tls.key),
                server_name,
            }));
        }
        let toml = SecurityToml::read(st, env)?;
        let ca = toml.get("grpc.ca");
        let cert = toml.get("grpc.client.cert");
        let key = toml.get("grpc.client.key");
        let Some(ca) = path(&ca) else {
            if !cert.trim().is_empty() {
                return Err(invalid(
                    "cluster.security_toml",
                    format!("{st} sets [grpc.client] cert but no [grpc] ca (nor WEED_GRPC_CA)"),
                ));
            }
            return Ok(None);
        };
        if cert.trim().is_empty() != key.trim().is_empty() {
            return Err(invalid(
                "cluster.security_toml",
                format!(
                    "{st}: [grpc.client] cert and key must be set together \
                     (or WEED_GRPC_CLIENT_CERT and WEED_GRPC_CLIENT_KEY)"
                ),
            ));
        }
        Ok(Some(TlsFiles {
            ca,
            cert: path(&cert),
            key: path(&key),
            server_name,
        }))
    }
}

impl Settings {
    /// The client TLS of the worker's stream to `weed admin`, as SeaweedFS's own
    /// `weed worker` has it (docs/plugin-worker.md#tls): from the `security.toml`
    /// named by `cluster.security_toml`, `[grpc] ca` with the `[grpc.worker]`
    /// client certificate (`client_cert`/`client_key` preferred, else
    /// `cert`/`key`; `WEED_GRPC_WORKER_*` variables of `env` win). `None`:
    /// plaintext, what `weed worker` does without `[grpc.worker]`. A file that
    /// sets `[grpc.admin]` (the admin serves mutual TLS) without a
    /// `[grpc.worker]` certificate is an error naming that section: the admin
    /// would refuse every handshake.
    pub fn admin_tls_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let Some(toml) = self.security_toml(env)? else {
            return Ok(None);
        };
        let st = toml.path.as_str();
        let get = |key: &str| toml.get(key);
        let (mut cert, mut key) = (
            get("grpc.worker.client_cert"),
            get("grpc.worker.client_key"),
        );
        if cert.is_empty() || key.is_empty() {
            (cert, key) = (get("grpc.worker.cert"), get("grpc.worker.key"));
        }
        let ca = get("grpc.ca");
        if !cert.is_empty() && !key.is_empty() && !ca.is_empty() {
            return Ok(Some(TlsFiles {
                ca: PathBuf::from(ca),
                cert: Some(PathBuf::from(cert)),
                key: Some(PathBuf::from(key)),
                server_name: Some(self.tls.server_name.trim().to_string())
                    .filter(|s| !s.is_empty()),
            }));
        }
        if !get("grpc.admin.cert").is_empty() && !get("grpc.admin.key").is_empty() {
            return Err(invalid(
                "cluster.security_toml",
                format!(
                    "{st} has [grpc.admin] (weed admin serves mutual TLS to its workers) but no \
                     worker client certificate: set [grpc.worker] cert and key (and [grpc] ca), \
                     as for `weed worker`"
                ),
            ));
        }
        Ok(None)
    }
}

impl Settings {
    /// The client TLS of calls to `weed admin`'s HTTP API when that API is
    /// HTTPS (`[https.admin]` on the admin; docs/plugin-worker.md#admin-https),
    /// as SeaweedFS's own HTTP clients have it: from the `security.toml` named
    /// by `cluster.security_toml`, `[https.client]` with `enabled = true`,
    /// `ca` (the admin's certificate must chain to it) and, for an admin with
    /// `[https.admin] ca`, `cert` and `key`; `WEED_HTTPS_CLIENT_*` variables
    /// of `env` win. `None`: plain HTTP. The server name is left for the
    /// caller to set to the admin's host (checked, as Go's clients check it).
    pub fn admin_https_files(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let Some(toml) = self.security_toml(env)? else {
            return Ok(None);
        };
        let st = toml.path.as_str();
        let (get, on) = (|key: &str| toml.get(key), |key: &str| toml.on(key));
        if !on("https.client.enabled") {
            return Ok(None);
        }
        if on("https.client.insecure_skip_verify") {
            return Err(invalid(
                "cluster.security_toml",
                format!(
                    "{st}: [https.client] insecure_skip_verify = true: s3-lifecycled always \
                     verifies weed admin's HTTPS certificate; set [https.client] ca to the CA \
                     that issued the admin's [https.admin] certificate and drop \
                     insecure_skip_verify"
                ),
            ));
        }
        let ca = get("https.client.ca");
        if ca.is_empty() {
            return Err(invalid(
                "cluster.security_toml",
                format!(
                    "{st}: [https.client] enabled = true needs ca (the CA that issued weed \
                     admin's [https.admin] certificate; or WEED_HTTPS_CLIENT_CA)"
                ),
            ));
        }
        let (cert, key) = (get("https.client.cert"), get("https.client.key"));
        if cert.is_empty() != key.is_empty() {
            return Err(invalid(
                "cluster.security_toml",
                format!(
                    "{st}: [https.client] cert and key must be set together \
                     (or WEED_HTTPS_CLIENT_CERT and WEED_HTTPS_CLIENT_KEY)"
                ),
            ));
        }
        let path = |p: String| Some(PathBuf::from(p)).filter(|p| !p.as_os_str().is_empty());
        Ok(Some(TlsFiles {
            ca: PathBuf::from(ca),
            cert: path(cert),
            key: path(key),
            server_name: None,
        }))
    }
}

/// Parses `0-15`, `7` or `0,4,7` into a sorted, de-duplicated shard list.
pub fn parse_shards(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let parse = |x: &str| -> Result<u8, String> {
            x.parse::<u8>()
                .ok()
                .filter(|v| usize::from(*v) < crate::engine::SHARD_COUNT)
                .ok_or_else(|| {
                    format!("`{x}` is not a shard number 0..15 (use e.g. 0-15 or 1,3,5)")
                })
        };
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi {
            return Err(format!("range `{part}` is backwards (use low-high)"));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err("no shards given (use e.g. 0-15 or 1,3,5)".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `service.schedule = "off"`: no scheduled passes, only admin triggers
/// (passes driven from outside, or test clusters).
pub fn schedule_off(s: &str) -> bool {
    s.trim().eq_ignore_ascii_case("off")
}

/// Parses `HH:MM` (UTC) into seconds after midnight.
pub fn parse_schedule(s: &str) -> Result<u32, String> {
    let err = || format!("`{s}` is not a UTC time of day in HH:MM form, e.g. 00:30");
    let (h, m) = s.trim().split_once(':').ok_or_else(err)?;
    let h: u32 = h.parse().map_err(|_| err())?;
    let m: u32 = m.parse().map_err(|_| err())?;
    if h > 23 || m > 59 {
        return Err(err());
    }
    Ok(h * 3600 + m * 60)
}

/// The longest duration accepted: the hand-written parser this replaced took
/// at most `u32::MAX` of a unit, so `4294967295d`. Kept as a ceiling so a
/// slipped digit (`99999999999d`) is still an error rather than a schedule
/// that never fires.
const MAX_DURATION: Duration = Duration::from_secs(u32::MAX as u64 * 86_400);

/// Parses durations such as `24h`, `10s`, `1h30m`, `2d`, `250ms` or `0`:
/// numbers with units `ms`, `s`, `m` (minutes), `h` and `d`, summed, with
/// surrounding whitespace ignored. Parsing is `humantime`'s, so its longer
/// spellings (`90sec`, `5min`, `1h 30m`, `1week`, …) work too; mind that its
/// `M` is months. A bare number other than `0` is refused: without a unit it
/// is ambiguous (a TOML integer, by contrast, is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const HINT: &str = "use e.g. 24h, 10s, 1h30m, 250ms or 0";
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration ({e}); {HINT}"))?;
    if d > MAX_DURATION {
        return Err(format!(
            "`{s}` is too long a duration (at most 4294967295d); {HINT}"
        ));
    }
    Ok(d)
}

/// A list of names: a TOML array, or one comma-separated string (how an
/// environment override arrives). Empty items are dropped.
fn de_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        Text(String),
        Int(i64),
        Float(f64),
        Bool(bool),
    }
    impl Item {
        fn text(self) -> String {
            match self {
                Item::Text(s) => s,
                Item::Int(n) => n.to_string(),
                Item::Float(f) => f.to_string(),
                Item::Bool(b) => b.to_string(),
            }
        }
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(Item),
        Many(Vec<Item>),
    }
    let items: Vec<String> = match Raw::deserialize(d)? {
        Raw::One(i) => i.text().split(',').map(str::to_string).collect(),
        Raw::Many(v) => v.into_iter().map(Item::text).collect(),
    };
    Ok(items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Secs(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        Raw::Secs(n) => Ok(Duration::from_secs(n)),
    }
}

/// `path` with empty and `.` segments dropped and `..` applied, as the filer resolves it
/// (`//a/./b/../c/` → `/a/c`).
fn normalize_filer_path(path: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    format!("/{}", segs.join("/"))
}

impl Settings {
    /// The file `cluster.security_toml` names, read; `None` when it names none.
    fn security_toml(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<SecurityToml>, ConfigError> {
        let st = self.cluster.security_toml.trim();
        if st.is_empty() {
            return Ok(None);
        }
        SecurityToml::read(st, env).map(Some)
    }
}

/// SeaweedFS's `security.toml` (`cluster.security_toml`), read as `weed`
/// reads it: a `WEED_<KEY>` variable (dots as underscores, upper case, e.g.
/// `WEED_GRPC_CLIENT_CERT` for `grpc.client.cert`) wins over the file.
struct SecurityToml {
    /// The file, for messages.
    path: String,
    cfg: config::Config,
    env: HashMap<String, String>,
}

impl SecurityToml {
    /// The file at `st`, parsed; an error naming the setting when it is
    /// missing or not TOML.
    fn read(
        st: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<SecurityToml, ConfigError> {
        let file = Path::new(st);
        if !file.is_file() {
            return Err(invalid(
                "cluster.security_toml",
                format!("{st} does not exist or is not a file (SeaweedFS's security.toml)"),
            ));
        }
        let cfg = config::Config::builder()
            .add_source(config::File::from(file).format(config::FileFormat::Toml))
            .build()
            .map_err(|e| invalid("cluster.security_toml", format!("{st}: {e}")))?;
        Ok(SecurityToml {
            path: st.to_string(),
            cfg,
            env: env.into_iter().collect(),
        })
    }

    /// `key` (e.g. `grpc.ca`), trimmed; empty when unset. A boolean reads as
    /// `true` or `false`.
    fn get(&self, key: &str) -> String {
        let var = format!("WEED_{}", key.replace('.', "_").to_uppercase());
        self.env
            .get(&var)
            .cloned()
            .or_else(|| {
                self.cfg
                    .get_string(key)
                    .ok()
                    .or_else(|| self.cfg.get_bool(key).ok().map(|b| b.to_string()))
            })
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Whether `key` is `true` (or `1`).
    fn on(&self, key: &str) -> bool {
        matches!(self.get(key).to_ascii_lowercase().as_str(), "true" | "1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_file_gives_defaults() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.time.day, Duration::from_secs(86_400));
    }

    #[test]
    fn tls_settings_resolve_and_half_set_ones_name_the_key() {
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__TLS__CA", "/c/ca.crt"),
                ("S3_LIFECYCLED__TLS__CERT", "/c/client.crt"),
                ("S3_LIFECYCLED__TLS__KEY", "/c/client.key"),
            ]),
        )
        .unwrap();
        let f = s.tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/c/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/c/client.crt")));
        assert_eq!(f.server_name, None);
        assert_eq!(Settings::default().tls_files(env(&[])).unwrap(), None);
        for (pairs, key) in [
            (vec![("S3_LIFECYCLED__TLS__CERT", "/c/x.crt")], "tls.cert"),
            (
                vec![
                    ("S3_LIFECYCLED__TLS__CERT", "/c/x.crt"),
                    ("S3_LIFECYCLED__TLS__KEY", "/c/x.key"),
                ],
                "tls.ca",
            ),
            (
                vec![("S3_LIFECYCLED__TLS__SERVER_NAME", "filer")],
                "tls.server_name",
            ),
            (
                vec![
                    ("S3_LIFECYCLED__TLS__CA", "/c/ca.crt"),
                    (
                        "S3_LIFECYCLED__CLUSTER__SECURITY_TOML",
                        "/etc/seaweedfs/security.toml",
                    ),
                ],
                "cluster.security_toml",
            ),
        ] {
            let e = Settings::load(None, env(&pairs)).unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    #[test]
    fn security_toml_gives_grpc_ca_and_client_cert_and_weed_variables_win() {
        let dir = std::env::temp_dir().join(format!("cfg-sec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.filer]\ncert = \"/s/filer.crt\"\nkey = \"/s/filer.key\"\n\
             [grpc.client]\ncert = \"/s/client.crt\"\nkey = \"/s/client.key\"\n",
        )
        .unwrap();
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        let f = s.tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/client.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/client.key")));
        let f = s
            .tls_files(env(&[
                ("WEED_GRPC_CA", "/e/ca.crt"),
                ("WEED_GRPC_CLIENT_CERT", "/e/c.crt"),
                ("WEED_GRPC_CLIENT_KEY", "/e/c.key"),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(f.ca, PathBuf::from("/e/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/e/c.crt")));
        // A security.toml without [grpc] ca: weed runs plaintext, and so do we.
        std::fs::write(&file, "[jwt.signing]\nkey = \"\"\n").unwrap();
        assert_eq!(s.tls_files(env(&[])).unwrap(), None);
        s.cluster.security_toml = dir.join("missing.toml").display().to_string();
        let e = s.tls_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("cluster.security_toml") && e.contains("missing.toml"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_tls_comes_from_grpc_worker_and_grpc_admin_without_it_names_grpc_worker() {
        let dir = std::env::temp_dir().join(format!("cfg-admin-sec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        s.cluster.security_toml = file.display().to_string();
        // The cluster's [grpc.client] is not the worker's certificate: no [grpc.worker], no
        // [grpc.admin] is plaintext to the admin, as `weed worker` dials.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.client]\ncert = \"/s/c.crt\"\nkey = \"/s/c.key\"\n",
        )
        .unwrap();
        assert_eq!(s.admin_tls_files(env(&[])).unwrap(), None);
        // [grpc.admin] alone: the admin requires a client certificate we do not have.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.admin]\ncert = \"/s/a.crt\"\nkey = \"/s/a.key\"\n",
        )
        .unwrap();
        let e = s.admin_tls_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("[grpc.worker]") && e.contains("cluster.security_toml"),
            "{e}"
        );
        // [grpc.worker] cert/key, client_cert/client_key preferred, WEED_ variables win.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[grpc.admin]\ncert = \"/s/a.crt\"\nkey = \"/s/a.key\"\n\
             [grpc.worker]\ncert = \"/s/w.crt\"\nkey = \"/s/w.key\"\n",
        )
        .unwrap();
        let f = s.admin_tls_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/ca.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/w.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/w.key")));
        let f = s
            .admin_tls_files(env(&[
                ("WEED_GRPC_WORKER_CLIENT_CERT", "/e/wc.crt"),
                ("WEED_GRPC_WORKER_CLIENT_KEY", "/e/wc.key"),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(f.cert, Some(PathBuf::from("/e/wc.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/e/wc.key")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_https_comes_from_https_client_and_refuses_skipping_verification() {
        let dir = std::env::temp_dir().join(format!("cfg-admin-https-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("security.toml");
        let mut s = Settings::default();
        assert_eq!(
            s.admin_https_files(env(&[])).unwrap(),
            None,
            "no file: HTTP"
        );
        s.cluster.security_toml = file.display().to_string();
        // The scaffold's [https.client] is off: plain HTTP.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[https.client]\nenabled = false\nca = \"/s/h.crt\"\n",
        )
        .unwrap();
        assert_eq!(s.admin_https_files(env(&[])).unwrap(), None);
        // On: ca, cert and key of [https.client], not [grpc]'s.
        std::fs::write(
            &file,
            "[grpc]\nca = \"/s/ca.crt\"\n[https.client]\nenabled = true\nca = \"/s/h.crt\"\n\
             cert = \"/s/hc.crt\"\nkey = \"/s/hc.key\"\n",
        )
        .unwrap();
        let f = s.admin_https_files(env(&[])).unwrap().unwrap();
        assert_eq!(f.ca, PathBuf::from("/s/h.crt"));
        assert_eq!(f.cert, Some(PathBuf::from("/s/hc.crt")));
        assert_eq!(f.key, Some(PathBuf::from("/s/hc.key")));
        // WEED_HTTPS_CLIENT_* win, as in SeaweedFS.
        let f = s
            .admin_https_files(env(&[("WEED_HTTPS_CLIENT_CA", "/e/h.crt")]))
            .unwrap()
            .unwrap();
        assert_eq!(f.ca, PathBuf::from("/e/h.crt"));
        assert_eq!(
            s.admin_https_files(env(&[("WEED_HTTPS_CLIENT_ENABLED", "false")]))
                .unwrap(),
            None
        );
        // On without ca, half a client certificate, skipping verification: errors naming them.
        std::fs::write(&file, "[https.client]\nenabled = true\n").unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(
            e.contains("[https.client]") && e.contains("ca") && e.contains("cluster.security_toml"),
            "{e}"
        );
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\nca = \"/s/h.crt\"\ncert = \"/s/hc.crt\"\n",
        )
        .unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(e.contains("cert and key must be set together"), "{e}");
        std::fs::write(
            &file,
            "[https.client]\nenabled = true\ninsecure_skip_verify = true\n",
        )
        .unwrap();
        let e = s.admin_https_files(env(&[])).unwrap_err().to_string();
        assert!(e.contains("insecure_skip_verify"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shipped_default_toml_equals_built_in_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
        let s = Settings::load(Some(&path), env(&[])).unwrap();
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn env_overrides_nested_keys_with_underscores() {
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__RATE__DELETES_PER_SECOND", "50"),
                ("S3_LIFECYCLED__TIME__DAY", "10s"),
                ("S3_LIFECYCLED__TIME__DUE_ROUNDING", "none"),
                ("OTHER__RATE__BURST", "9"),
            ]),
        )
        .unwrap();
        assert_eq!(s.rate.deletes_per_second, 50.0);
        assert_eq!(s.time.day, Duration::from_secs(10));
        assert_eq!(s.time.due_rounding, DueRounding::None);
        assert_eq!(s.rate.burst, 0);
    }

    #[test]
    fn go_cursor_dir_guard_sees_through_path_spelling() {
        for dir in [
            "/etc/s3/lifecycle//daily-cursors",
            "//etc/s3/lifecycle/daily-cursors/",
            "/etc/s3/./lifecycle/daily-cursors/.",
            "/etc/s3/lifecycle/x/../daily-cursors",
        ] {
            let e = Settings::load(None, env(&[("S3_LIFECYCLED__CURSOR__DIR", dir)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains("cursor.dir"), "{dir}: {e}");
        }
        assert!(
            Settings::load(
                None,
                env(&[(
                    "S3_LIFECYCLED__CURSOR__DIR",
                    "/etc/s3/lifecycle/daily-cursors-2"
                )])
            )
            .is_ok()
        );
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.toml");
        std::fs::write(&f, "[rate]\ndeletes_per_secnd = 5\n").unwrap();
        let e = Settings::load(Some(&f), env(&[])).unwrap_err().to_string();
        assert!(e.contains("deletes_per_secnd"), "{e}");
    }

    #[test]
    fn filer_and_s3_grpc_accept_a_string_a_comma_list_or_an_array() {
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("multi.toml");
        std::fs::write(
            &f,
            "[cluster]\nfiler = \"a:18888\"\ns3_grpc = [\"g1:18333\", \"g2:18333\"]\n",
        )
        .unwrap();
        let s = Settings::load(Some(&f), env(&[])).unwrap();
        assert_eq!(s.cluster.filer, ["a:18888"]);
        assert_eq!(s.cluster.s3_grpc, ["g1:18333", "g2:18333"]);
        let s =
            Settings::load(None, env(&[("S3_LIFECYCLED__CLUSTER__FILER", "a:1, b:2")])).unwrap();
        assert_eq!(s.cluster.filer, ["a:1", "b:2"]);
        // Nothing set: the loopback defaults, no discovery.
        let d = Settings::default();
        assert_eq!(d.cluster.static_filers().unwrap(), [DEFAULT_FILER]);
        assert_eq!(d.cluster.static_s3_grpc().unwrap(), [DEFAULT_S3_GRPC]);
        // A master and no lists: both discovered; an explicit list still wins.
        let s = Settings::load(
            None,
            env(&[
                ("S3_LIFECYCLED__CLUSTER__MASTER", "m:19333"),
                ("S3_LIFECYCLED__CLUSTER__S3_GRPC", "g:1"),
            ]),
        )
        .unwrap();
        assert_eq!(s.cluster.static_filers(), None);
        assert_eq!(s.cluster.static_s3_grpc().unwrap(), ["g:1"]);
    }

    #[test]
    fn bad_cluster_lists_and_margins_name_the_key() {
        for (k, v, key) in [
            ("S3_LIFECYCLED__CLUSTER__FILER", "a:1,a:1", "cluster.filer"),
            ("S3_LIFECYCLED__CLUSTER__S3_GRPC", "g 1", "cluster.s3_grpc"),
            (
                "S3_LIFECYCLED__CLUSTER__MASTER",
                "m:1,m:2",
                "cluster.master",
            ),
            (
                "S3_LIFECYCLED__PASS__REORDER_MARGIN",
                "0",
                "pass.reorder_margin",
            ),
            (
                "S3_LIFECYCLED__PASS__REORDER_MARGIN",
                "2h",
                "pass.reorder_margin",
            ),
        ] {
            let e = Settings::load(None, env(&[(k, v)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{v}: {e}");
        }
        let s =
            Settings::load(None, env(&[("S3_LIFECYCLED__PASS__REORDER_MARGIN", "2s")])).unwrap();
        assert_eq!(s.pass.reorder_margin, Duration::from_secs(2));
    }

    #[test]
    fn tail_budget_below_one_mark_per_shard_is_rejected_naming_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__TAIL_BUDGET", "15")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pass.tail_budget") && e.contains("at least 16"),
            "{e}"
        );
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__TAIL_BUDGET", "16")])).unwrap();
        assert_eq!(s.pass.tail_budget, 16);
        assert_eq!(
            Settings::load(None, env(&[])).unwrap().pass.tail_budget,
            1 << 20
        );
    }

    #[test]
    fn invalid_values_name_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__SHARDS", "3-20")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("pass.shards") && e.contains("20"), "{e}");
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__TIME__DAY", "soon")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
        let e = Settings::load(
            None,
            env(&[(
                "S3_LIFECYCLED__CURSOR__DIR",
                "/etc/s3/lifecycle/daily-cursors",
            )]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cursor.dir"), "{e}");
        let e = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__PASS__CONFIG_REFRESH", "10ms")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("pass.config_refresh") && e.contains("100ms"),
            "{e}"
        );
        for bad in ["0", "1.5", "-0.1", "NaN"] {
            let e = Settings::load(
                None,
                env(&[("S3_LIFECYCLED__PASS__WALK_BUDGET_FRACTION", bad)]),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("pass.walk_budget_fraction") && e.contains("(0, 1]"),
                "{bad}: {e}"
            );
        }
        let s = Settings::load(
            None,
            env(&[("S3_LIFECYCLED__PASS__WALK_BUDGET_FRACTION", "0.25")]),
        )
        .unwrap();
        assert_eq!(s.pass.walk_budget_fraction, 0.25);
        for ok in ["0", "100ms", "5s"] {
            Settings::load(None, env(&[("S3_LIFECYCLED__PASS__CONFIG_REFRESH", ok)]))
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn pass_buckets_from_env_list_and_toml_array() {
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__BUCKETS", "a, b,,c")])).unwrap();
        assert_eq!(s.pass.buckets, vec!["a", "b", "c"]);
        let s = Settings::load(None, env(&[("S3_LIFECYCLED__PASS__BUCKETS", "solo")])).unwrap();
        assert_eq!(s.pass.buckets, vec!["solo"]);
        let s = Settings::load(None, env(&[])).unwrap();
        assert!(s.pass.buckets.is_empty());
        let dir = std::env::temp_dir().join(format!("s3lc-cfg-b-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("b.toml");
        std::fs::write(&f, "[pass]\nbuckets = [\"x\", \"y\"]\n").unwrap();
        let s = Settings::load(Some(&f), env(&[])).unwrap();
        assert_eq!(s.pass.buckets, vec!["x", "y"]);
    }

    #[test]
    fn call_timeouts_must_be_positive() {
        for key in ["DISPATCH__CALL_TIMEOUT", "CLUSTER__FILER_CALL_TIMEOUT"] {
            let var = format!("S3_LIFECYCLED__{key}");
            let e = Settings::load(None, env(&[(var.as_str(), "0")]))
                .unwrap_err()
                .to_string();
            let dotted = key.to_lowercase().replace("__", ".");
            assert!(e.contains(&dotted) && e.contains("deadline"), "{e}");
            let s = Settings::load(None, env(&[(var.as_str(), "2s")])).unwrap();
            assert!(
                s.dispatch.call_timeout == Duration::from_secs(2)
                    || s.cluster.filer_call_timeout == Duration::from_secs(2)
            );
        }
    }

    #[test]
    fn shard_lists() {
        assert_eq!(parse_shards("0-15").unwrap().len(), 16);
        assert_eq!(parse_shards("3, 1,3,2-4").unwrap(), vec![1, 2, 3, 4]);
        assert!(parse_shards("").is_err());
        assert!(parse_shards("5-2").is_err());
        assert!(parse_shards("16").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "h", "10", "10x", "-1s", "99999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn duration_forms_of_the_old_parser_still_parse() {
        let secs = Duration::from_secs;
        for (s, want) in [
            ("90s", secs(90)),
            ("5m", secs(300)),
            ("2d", secs(172_800)),
            ("24h", secs(86_400)),
            ("1d2h3m4s5ms", secs(93_784) + Duration::from_millis(5)),
            // Units in any order, repeated, summed.
            ("30m1h", secs(5400)),
            ("1m1m", secs(120)),
            ("0s", Duration::ZERO),
            ("007s", secs(7)),
            // Whitespace around the value (an env override, a TOML string).
            (" 0 ", Duration::ZERO),
            ("\t10s\n", secs(10)),
            // The old ceiling: u32::MAX of the largest unit.
            ("4294967295d", MAX_DURATION),
            ("4294967295ms", Duration::from_millis(4_294_967_295)),
        ] {
            assert_eq!(parse_duration(s), Ok(want), "{s:?}");
        }
    }

    #[test]
    fn duration_errors_quote_the_value_and_show_the_forms() {
        for bad in ["soon", "10", "99999999999d"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
            assert!(e.contains("24h") && e.contains("1h30m"), "{e}");
        }
        assert!(parse_duration("4294967295d1s").is_err());
    }

    #[test]
    fn duration_errors_name_the_key() {
        let e = Settings::load(None, env(&[("S3_LIFECYCLED__TIME__DAY", "10x")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("time.day") && e.contains("`10x`"), "{e}");
    }

    #[test]
    fn effective_rate() {
        let mut r = RateSettings::default();
        assert_eq!(r.effective(), None);
        r.deletes_per_second = 10.0;
        assert_eq!(r.effective(), Some((10.0, 20)));
        r.cluster_deletes_per_second = 100.0;
        r.workers = 4;
        r.burst = 7;
        assert_eq!(r.effective(), Some((25.0, 7)));
        r.burst = 0;
        r.cluster_deletes_per_second = 0.2;
        r.workers = 1;
        assert_eq!(r.effective(), Some((0.2, 1)));
    }

    #[test]
    fn schedule() {
        assert_eq!(parse_schedule("00:30").unwrap(), 1800);
        assert!(parse_schedule("24:00").is_err());
        assert!(parse_schedule("noon").is_err());
        assert!(schedule_off("off") && schedule_off(" OFF ") && !schedule_off("00:30"));
    }
}
