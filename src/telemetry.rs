//! Logs and traces: the tracing-subscriber stack (EnvFilter, text or JSON to
//! stderr, optional OTLP/gRPC span export), its blocking-safe shutdown, and the
//! span and field names every pass uses.
//!
//! # Span tree
//! One pass is one trace:
//!
//! ```text
//! pass {run_id, outcome}
//! └── shard {shard, outcome}                      one per shard this instance runs
//!     ├── replay {shard, outcome}                 the meta-log drain
//!     │   └── delete {bucket, key, rule_hash, kind, outcome}
//!     └── walk {shard, bucket, outcome}           one per bucket walked
//!         └── delete {bucket, key, rule_hash, kind, outcome}
//! ```
//!
//! Build spans with [`pass_span`], [`shard_span`], [`replay_span`],
//! [`walk_span`] and [`delete_span`]: they take the parent explicitly (actors
//! hand work across threads, so the "current span" is rarely the right parent)
//! and declare every field up front. `outcome` starts empty; record it with
//! [`record_outcome`] when the work ends. Field meanings:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `run_id` | string | the pass's id, also on the status page and in cursor records |
//! | `shard` | u8 | shard 0..15 |
//! | `bucket` | string | bucket name |
//! | `key` | string | object key, or `.uploads/<id>` for multipart aborts |
//! | `rule_hash` | string | the 8-byte rule hash as 16 lowercase hex digits |
//! | `kind` | string | [`ActionKind::as_str`](crate::engine::ActionKind::as_str) |
//! | `outcome` | string | delete: response enum name or `RPC_ERROR`; others: [`RunOutcome`](crate::status::RunOutcome) |
//!
//! `delete` spans are DEBUG (there can be millions per pass); the others are
//! INFO. With the default filter `info` only the upper levels are exported;
//! `info,s3_lifecycled=debug` exports deletes too.
//!
//! # Runtime
//! [`init`] must run inside a tokio runtime when OTLP is on: the tonic channel
//! is created lazily (so init never blocks or fails when no collector listens)
//! but its worker task is spawned on the current runtime. The batch processor
//! exports from its own thread, and [`TelemetryGuard::shutdown`] runs the
//! provider's blocking shutdown on a `spawn_blocking` thread under a deadline,
//! because shutting down from a runtime thread can deadlock the export it
//! waits for (opentelemetry-rust #2583, #3176).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing::field::Empty;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::config::TelemetrySettings;

/// Span names. The tree is pass → shard → replay | walk → delete.
pub mod spans {
    /// One daily pass (the trace root).
    pub const PASS: &str = "pass";
    /// One shard's part of a pass.
    pub const SHARD: &str = "shard";
    /// A shard's meta-log replay.
    pub const REPLAY: &str = "replay";
    /// A shard's walk of one bucket.
    pub const WALK: &str = "walk";
    /// One `LifecycleDelete` call (with its transport retries).
    pub const DELETE: &str = "delete";
}

/// Span field names (see the module docs for their meaning and types).
pub mod fields {
    pub const RUN_ID: &str = "run_id";
    /// Shard number 0..15.
    pub const SHARD: &str = "shard";
    pub const BUCKET: &str = "bucket";
    /// Object key (or `.uploads/<id>`).
    pub const KEY: &str = "key";
    /// Rule hash, 16 lowercase hex digits.
    pub const RULE_HASH: &str = "rule_hash";
    /// Action kind label.
    pub const KIND: &str = "kind";
    /// How the span's work ended.
    pub const OUTCOME: &str = "outcome";
}

/// Directives always added (unless the configured filter names the target
/// itself): OpenTelemetry's internal logs at warn show failed exports without
/// per-batch noise; h2/tower/hyper_util at debug would log every frame.
const QUIET_TARGETS: [&str; 4] = ["opentelemetry", "h2", "tower", "hyper_util"];

/// Per-export deadline of the OTLP exporter: a missing collector costs at most
/// this per batch instead of the tonic default.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// Deadline for [`TelemetryGuard::shutdown`] as a whole (flush + exporter
/// shutdown); past it the provider is abandoned and an error returned.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Instrumentation scope name of our tracer.
const TRACER_NAME: &str = "s3-lifecycled";

/// A telemetry setup problem. Maps to exit code 2 (configuration) except
/// [`TelemetryError::Shutdown`].
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `telemetry.log_filter` is not a valid filter.
    #[error(
        "configuration key `telemetry.log_filter`: `{filter}` is not a valid tracing filter ({message}); use e.g. `info` or `info,s3_lifecycled=debug`"
    )]
    Filter { filter: String, message: String },
    /// `telemetry.log_format` is neither `text` nor `json`.
    #[error("configuration key `telemetry.log_format`: `{0}` must be `text` or `json`")]
    Format(String),
    /// `telemetry.otlp_endpoint` cannot be used.
    #[error("configuration key `telemetry.otlp_endpoint`: {0}")]
    Endpoint(String),
    /// OTLP export was requested outside a tokio runtime.
    #[error(
        "telemetry init with an OTLP endpoint must run inside a tokio runtime (the gRPC exporter needs a reactor)"
    )]
    NoRuntime,
    /// A global subscriber was already installed.
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadyInstalled(String),
    /// The provider could not be shut down in time.
    #[error("telemetry shutdown: {0}")]
    Shutdown(String),
}

/// Owns the OTLP tracer provider (if any). Call [`TelemetryGuard::shutdown`]
/// before the runtime goes away so buffered spans are exported. Dropping it
/// without shutdown loses buffered spans but does not block: the installed
/// subscriber's tracer still holds the provider.
#[derive(Debug)]
#[must_use = "call shutdown() so buffered spans are exported"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Flushes buffered spans and shuts the exporter down, off the runtime
    /// threads (`spawn_blocking`) and within [`SHUTDOWN_TIMEOUT`]. Export
    /// failures (e.g. no collector) are logged, not returned: telemetry must
    /// never fail the service. Errors only when the shutdown itself cannot
    /// finish in time or its thread panics.
    pub async fn shutdown(self) -> Result<(), TelemetryError> {
        let Some(provider) = self.provider else {
            return Ok(());
        };
        let task = tokio::task::spawn_blocking(move || {
            // Leave the exporter its own per-batch deadline inside ours.
            provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT - Duration::from_secs(1))
        });
        match tokio::time::timeout(SHUTDOWN_TIMEOUT, task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "trace export did not finish cleanly at shutdown");
                Ok(())
            }
            Ok(Err(join)) => Err(TelemetryError::Shutdown(format!(
                "shutdown thread failed: {join}"
            ))),
            // The blocking thread is left to finish on its own; dropping the
            // runtime will not wait for it beyond its own timeout.
            Err(_) => Err(TelemetryError::Shutdown(format!(
                "tracer provider did not shut down within {SHUTDOWN_TIMEOUT:?}"
            ))),
        }
    }
}

/// Telemetry installed for the current thread only (see [`init_scoped`]).
#[must_use = "dropping this uninstalls the subscriber"]
pub struct ScopedTelemetry {
    guard: TelemetryGuard,
    default: DefaultGuard,
}

impl std::fmt::Debug for ScopedTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedTelemetry")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl ScopedTelemetry {
    /// Shuts the provider down (as [`TelemetryGuard::shutdown`]), then
    /// uninstalls the thread's subscriber.
    pub async fn shutdown(self) -> Result<(), TelemetryError> {
        let ScopedTelemetry { guard, default } = self;
        let r = guard.shutdown().await;
        drop(default);
        r
    }
}

/// Installs the global subscriber: EnvFilter from `log_filter` (plus the
/// quiet targets), text or JSON logs on stderr, and OTLP/gRPC span export
/// when `otlp_endpoint` is set. Call once, early, inside the tokio runtime.
pub fn init(
    settings: &TelemetrySettings,
    service_name: &str,
) -> Result<TelemetryGuard, TelemetryError> {
    let (subscriber, provider) = build(settings, service_name)?;
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| TelemetryError::AlreadyInstalled(e.to_string()))?;
    Ok(TelemetryGuard { provider })
}

/// Like [`init`] but installs the subscriber as the current thread's default
/// until the returned value is dropped (or shut down), so tests can run
/// several configurations in one binary. Spans created on other threads are
/// not seen: create them on the calling thread (e.g. in the body of a
/// `#[tokio::test]`).
pub fn init_scoped(
    settings: &TelemetrySettings,
    service_name: &str,
) -> Result<ScopedTelemetry, TelemetryError> {
    let (subscriber, provider) = build(settings, service_name)?;
    let default = tracing::subscriber::set_default(subscriber);
    Ok(ScopedTelemetry {
        guard: TelemetryGuard { provider },
        default,
    })
}

type Subscriber = Box<dyn tracing::Subscriber + Send + Sync + 'static>;

fn build(
    settings: &TelemetrySettings,
    service_name: &str,
) -> Result<(Subscriber, Option<SdkTracerProvider>), TelemetryError> {
    let filter = env_filter(&settings.log_filter)?;
    let fmt = match settings.log_format.as_str() {
        // Colour codes only on a terminal: in journald, files and pipes they
        // are noise around every field.
        "text" => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        "json" => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed(),
        other => return Err(TelemetryError::Format(other.to_string())),
    };
    let provider = match settings.otlp_endpoint.trim() {
        "" => None,
        endpoint => Some(otlp_provider(endpoint, service_name)?),
    };
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(TRACER_NAME))
            .boxed()
    });
    let subscriber = tracing_subscriber::registry()
        .with(otel)
        .with(fmt)
        .with(filter);
    Ok((Box::new(subscriber), provider))
}

/// The configured filter plus `target=warn` for each quiet target the
/// configuration does not mention itself (so an operator can still turn
/// e.g. `opentelemetry=debug` on).
fn env_filter(configured: &str) -> Result<EnvFilter, TelemetryError> {
    let base = Some(configured.trim())
        .filter(|c| !c.is_empty())
        .unwrap_or("info");
    let mentioned = |target: &str| {
        base.split(',').any(|d| {
            let d = d.trim();
            d.strip_prefix(target)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['=', ':', '[']))
        })
    };
    let mut directives = base.to_string();
    for t in QUIET_TARGETS.iter().filter(|t| !mentioned(t)) {
        directives.push_str(&format!(",{t}=warn"));
    }
    EnvFilter::builder()
        .parse(&directives)
        .map_err(|e| TelemetryError::Filter {
            filter: configured.to_string(),
            message: e.to_string(),
        })
}

fn otlp_provider(endpoint: &str, service_name: &str) -> Result<SdkTracerProvider, TelemetryError> {
    // The OTLP exporter has no TLS (tonic is built without its TLS features; our
    // rustls connector serves the SeaweedFS clients only, docs/tls.md#where-it-lives); an https endpoint
    // would fail on every export, silently from the operator's view.
    if !endpoint.starts_with("http://") {
        return Err(TelemetryError::Endpoint(format!(
            "`{endpoint}` must be a plain-text gRPC URL such as http://127.0.0.1:4317 (TLS is not supported; run a local collector)"
        )));
    }
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(TelemetryError::NoRuntime);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| TelemetryError::Endpoint(format!("`{endpoint}`: {e}")))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_string())
                .build(),
        )
        .build())
}

/// The root span of a pass.
pub fn pass_span(run_id: &str) -> Span {
    tracing::info_span!(parent: None, "pass", run_id = %run_id, outcome = Empty)
}

/// One shard's part of the pass `parent`.
pub fn shard_span(parent: &Span, shard: u8) -> Span {
    tracing::info_span!(parent: parent, "shard", shard, outcome = Empty)
}

/// A shard's meta-log replay, under its shard span.
pub fn replay_span(parent: &Span, shard: u8) -> Span {
    tracing::info_span!(parent: parent, "replay", shard, outcome = Empty)
}

/// A shard's walk of `bucket`, under its shard span.
pub fn walk_span(parent: &Span, shard: u8, bucket: &str) -> Span {
    tracing::info_span!(parent: parent, "walk", shard, bucket = %bucket, outcome = Empty)
}

/// One `LifecycleDelete`, under the replay or walk span that decided it.
/// `rule_hash` is the 8-byte rule hash (rendered as hex).
pub fn delete_span(
    parent: &Span,
    bucket: &str,
    key: &str,
    rule_hash: &[u8],
    kind: crate::engine::ActionKind,
) -> Span {
    tracing::debug_span!(
        parent: parent,
        "delete",
        bucket = %bucket,
        key = %key,
        rule_hash = %hex::encode(rule_hash),
        kind = kind.as_str(),
        outcome = Empty,
    )
}

/// Records how the span's work ended (`outcome` field).
pub fn record_outcome(span: &Span, outcome: &str) {
    span.record(fields::OUTCOME, outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(filter: &str, format: &str, endpoint: &str) -> TelemetrySettings {
        TelemetrySettings {
            log_format: format.into(),
            log_filter: filter.into(),
            otlp_endpoint: endpoint.into(),
        }
    }

    #[test]
    fn span_helpers_use_the_documented_names() {
        // The helpers spell names as literals (tracing needs them at compile
        // time); this pins them to the public constants.
        let _g = tracing::subscriber::set_default(tracing_subscriber::registry());
        let pass = pass_span("r1");
        let shard = shard_span(&pass, 3);
        let replay = replay_span(&shard, 3);
        let walk = walk_span(&shard, 3, "b");
        let del = delete_span(
            &replay,
            "b",
            "k",
            &[1; 8],
            crate::engine::ActionKind::AbortMpu,
        );
        for (span, name) in [
            (&pass, spans::PASS),
            (&shard, spans::SHARD),
            (&replay, spans::REPLAY),
            (&walk, spans::WALK),
            (&del, spans::DELETE),
        ] {
            let meta = span.metadata().expect("span enabled");
            assert_eq!(meta.name(), name);
            assert!(meta.fields().field(fields::OUTCOME).is_some());
        }
        let f = del.metadata().unwrap().fields();
        for name in [fields::BUCKET, fields::KEY, fields::RULE_HASH, fields::KIND] {
            assert!(f.field(name).is_some(), "{name}");
        }
        assert!(
            pass.metadata()
                .unwrap()
                .fields()
                .field(fields::RUN_ID)
                .is_some()
        );
        assert!(
            walk.metadata()
                .unwrap()
                .fields()
                .field(fields::SHARD)
                .is_some()
        );
    }

    #[test]
    fn filter_adds_quiet_targets_unless_configured() {
        let f = env_filter("info").unwrap().to_string();
        for t in QUIET_TARGETS {
            assert!(f.contains(&format!("{t}=warn")), "{f}");
        }
        let f = env_filter("debug,opentelemetry=debug").unwrap().to_string();
        assert!(
            f.contains("opentelemetry=debug") && !f.contains("opentelemetry=warn"),
            "{f}"
        );
        assert!(f.contains("h2=warn"), "{f}");
        // `h2` must not be taken as mentioned by an unrelated `h2c` target.
        let f = env_filter("h2c=debug").unwrap().to_string();
        assert!(f.contains("h2=warn"), "{f}");
    }

    #[test]
    fn bad_filter_names_the_key() {
        let e = env_filter("info,foo=loud").unwrap_err().to_string();
        assert!(e.contains("telemetry.log_filter"), "{e}");
    }

    #[test]
    fn bad_format_and_endpoint_are_errors_naming_the_key() {
        let e = build(&settings("info", "yaml", ""), "t")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("telemetry.log_format"), "{e}");
        let e = build(&settings("info", "text", "https://collector:4317"), "t")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("telemetry.otlp_endpoint"), "{e}");
    }

    #[test]
    fn otlp_outside_a_runtime_is_an_error_not_a_panic() {
        let e = build(&settings("info", "text", "http://127.0.0.1:4317"), "t")
            .err()
            .unwrap();
        assert!(matches!(e, TelemetryError::NoRuntime), "{e}");
    }

    #[test]
    fn text_and_json_without_otlp_need_no_runtime() {
        for format in ["text", "json"] {
            let (_, provider) = build(&settings("info", format, ""), "t").unwrap();
            assert!(provider.is_none());
        }
    }
}
