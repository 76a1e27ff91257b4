//! `s3-lifecycled audit`: the TTLs outside the lifecycle documents
//! (`filer.conf` locations, entries' `TtlSec`, TTL volumes) and how each
//! contradicts the bucket's rules, with the fix (docs/ttl-audit.md). It
//! only reads.

use std::fmt::Write;

use clap::Args;

use super::{EXIT_AUDIT_CONFLICT, EXIT_OK, Fail, failed, print_json_or, usage};
use crate::config::Settings;
use crate::engine::audit::AuditReport;
use crate::seaweed::filer::FilerClient;
use crate::seaweed::ttl_scan;

#[derive(Debug, Clone, Args)]
#[command(mut_arg("config", |a| a.help("Configuration file (`cluster.*`, `audit.*`, `time.day`)")))]
pub struct AuditArgs {
    #[command(flatten)]
    pub source: crate::cli::FilerSource,
    /// Only this bucket.
    #[arg(long)]
    pub bucket: Option<String>,
    /// One JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the audit over `client` with the settings of `s` (an unknown
/// `--bucket` is a usage error).
pub async fn audit_with(
    s: &Settings,
    client: &FilerClient,
    only: Option<&str>,
    now: i64,
) -> Result<AuditReport, Fail> {
    let tls = s.client_tls().map_err(failed)?;
    let master = crate::seaweed::weed_form::settle_masters(&s.cluster.master, tls.as_ref()).await;
    ttl_scan::audit_cluster(
        client,
        &master,
        tls,
        &s.cluster.buckets_root,
        &ttl_scan::AuditRun {
            only: only.map(str::to_string),
            budget: s.audit.budget(),
            day: s.time.day,
            now,
        },
    )
    .await
    .map_err(|e| {
        let e = e.to_string();
        if e.starts_with("flag --bucket") {
            usage(e)
        } else {
            failed(e)
        }
    })
}

pub fn run(args: &AuditArgs) -> Result<i32, Fail> {
    let r = args.source.block_on(async |s| {
        let client = crate::cli::first_filer(s).await?;
        audit_with(s, &client, args.bucket.as_deref(), crate::clock::wall_ns()).await
    })?;
    print_json_or(args.json, &r, text);
    Ok(match r.conflicting().next() {
        Some(_) => EXIT_AUDIT_CONFLICT,
        None => EXIT_OK,
    })
}

pub fn text(r: &AuditReport) -> String {
    let mut out = format!(
        "audit buckets={} findings={} conflicting={} entries_listed={} calls={}\n",
        r.buckets,
        r.findings.len(),
        r.conflicting().count(),
        r.entries_listed,
        r.calls
    );
    for f in &r.findings {
        let scope = if f.key_prefix.is_empty() {
            String::new()
        } else {
            format!(" prefix={}", f.key_prefix)
        };
        let _ = writeln!(
            out,
            "bucket={} source={} ttl={}{scope}",
            f.bucket,
            f.source.as_str(),
            f.ttl
        );
        let _ = writeln!(out, "  {}", f.detail);
        if f.conflicts.is_empty() {
            let _ = writeln!(
                out,
                "  no conflict today: a rule deletes first (if the rule is lengthened or removed, \
                 the TTL still applies)"
            );
        }
        for c in &f.conflicts {
            let _ = writeln!(out, "  conflict: {}", c);
        }
        let _ = writeln!(out, "  fix: {}", f.fix);
        if !f.unsavable.is_empty() {
            let _ = writeln!(out, "  cannot be saved: {}", f.unsavable);
        }
    }
    if !r.sampled.is_empty() {
        let _ = writeln!(
            out,
            "note: listing stopped at audit.max_entries / audit.max_listings in: {}",
            r.sampled.join(", ")
        );
    }
    for e in &r.errors {
        let _ = writeln!(out, "error: {e}");
    }
    if r.findings.is_empty() {
        out.push_str("no TTL outside the lifecycle documents\n");
    }
    out
}
