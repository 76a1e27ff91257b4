//! Tests that need no cluster: the architecture rules, the pure pass and engine
//! with fakes, lifecycle documents (fixtures and fuzz), recorded events, the
//! admin API over a fake backend, the HTTP endpoints and the OTLP exporter.
//! One module per feature; see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod admin_api;
mod architecture;
mod cli_rules_check;
mod filer_crash;
mod http_endpoints;
mod lifecycle_fixtures;
mod lifecycle_fuzz;
mod pass_actors;
mod pass_shard_run;
mod route_recorded;
mod telemetry_otlp;
