//! `s3-lifecycled rules check FILE`: what an operator runs before
//! `put-bucket-lifecycle-configuration`. Validates as strictly as AWS and prints
//! the compiled view — per rule its filter, per action its kind, rule hash, TTL
//! or date, and whether replay or the walker serves it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use time::format_description::well_known::Rfc3339;

use crate::engine::{
    ActionKind, BucketConfig, CompiledAction, RuleMode, Snapshot, TimeConfig, Versioning,
};
use crate::lifecycle::{self, FlatRule, Severity};

use super::{EXIT_OK, EXIT_USAGE, Fail, failed, usage};

/// The report printed on success.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Always true when printed (invalid documents print errors instead).
    pub valid: bool,
    /// Warnings, e.g. transitions that are parsed but not enforced.
    pub warnings: Vec<String>,
    /// One entry per rule, in document order.
    pub rules: Vec<RuleReport>,
}

#[derive(Debug, Serialize)]
pub struct RuleReport {
    /// `<ID>` (empty when absent).
    pub id: String,
    /// 1-based position in the document.
    pub position: usize,
    /// `Enabled` or `Disabled`.
    pub status: &'static str,
    /// The effective filter, as SeaweedFS flattens it.
    pub filter: FilterReport,
    /// Compiled actions, in SeaweedFS's emission order.
    pub actions: Vec<ActionReport>,
}

#[derive(Debug, Serialize)]
pub struct FilterReport {
    /// Key prefix ("" = every key).
    pub prefix: String,
    pub tags: BTreeMap<String, String>,
    /// Strict lower size bound, if any.
    pub object_size_greater_than: Option<i64>,
    /// Strict upper size bound, if any.
    pub object_size_less_than: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct ActionReport {
    /// Action kind (metrics label form).
    pub kind: ActionKind,
    /// The 8-byte rule hash in lowercase hex, as sent in `LifecycleDelete`.
    pub rule_hash: String,
    /// TTL in days, for day-based kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days: Option<i64>,
    /// Expiration date (RFC 3339), for `expiration_date`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Versions to keep, for `newer_noncurrent` and counted `noncurrent_days`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newer_noncurrent_versions: Option<i64>,
    /// `replay` (meta-log), `walker` (bucket listing), or `disabled`.
    pub path: &'static str,
}

#[derive(Debug)]
pub enum Checked {
    /// Valid: the report to print.
    Valid(Report),
    /// Unreadable or invalid: every error, one per line.
    Invalid(Vec<String>),
}

pub fn check(bytes: &[u8]) -> Checked {
    let config = match lifecycle::parse(bytes) {
        Ok(c) => c,
        Err(e) => return Checked::Invalid(vec![e.to_string()]),
    };
    let (errors, warnings): (Vec<_>, Vec<_>) = lifecycle::validate(&config)
        .into_iter()
        .partition(|f| f.severity == Severity::Error);
    let strings = |v: Vec<_>| v.iter().map(ToString::to_string).collect();
    if !errors.is_empty() {
        return Checked::Invalid(strings(errors));
    }
    let flat = config.flatten();
    let snap = Snapshot::compile(
        vec![BucketConfig {
            name: "check".into(),
            versioning: Versioning::Enabled,
            object_lock: false,
            rules: flat.clone(),
        }],
        TimeConfig::default(),
    );
    // Unbounded retention: the same partition decision a pass makes on a
    // stock filer, which never deletes its meta-log.
    let (replay, _) = snap.rules_for_shard(0, Duration::MAX);
    let in_replay = |a: &CompiledAction| {
        replay
            .as_ref()
            .and_then(|r| r.action(a.bucket(), a.rule_hash(), a.kind()))
            .is_some()
    };
    Checked::Valid(Report {
        valid: true,
        warnings: strings(warnings),
        rules: flat
            .iter()
            .map(|r| rule_report(r, &snap, &in_replay))
            .collect(),
    })
}

fn rule_report(
    r: &FlatRule,
    snap: &Snapshot,
    in_replay: &dyn Fn(&CompiledAction) -> bool,
) -> RuleReport {
    let hash = crate::engine::rule_hash(r);
    let keep = r.newer_noncurrent_versions;
    let actions = crate::engine::rule_action_kinds(r)
        .into_iter()
        .map(|kind| {
            let enabled = |a: &&CompiledAction| a.mode() != RuleMode::Disabled;
            let path = match snap.action("check", hash, kind).filter(enabled) {
                Some(a) if in_replay(a) => "replay",
                Some(_) => "walker",
                None => "disabled",
            };
            let (days, date, keep) = match kind {
                ActionKind::ExpirationDays => (Some(r.expiration_days), None, None),
                ActionKind::ExpirationDate => (
                    None,
                    r.expiration_date.and_then(|d| d.format(&Rfc3339).ok()),
                    None,
                ),
                ActionKind::NoncurrentDays => {
                    (Some(r.noncurrent_days), None, (keep > 0).then_some(keep))
                }
                ActionKind::NewerNoncurrent => (None, None, Some(keep)),
                ActionKind::AbortMpu => (Some(r.abort_mpu_days), None, None),
                ActionKind::ExpiredDeleteMarker => (None, None, None),
            };
            ActionReport {
                kind,
                rule_hash: hash.to_hex(),
                days,
                date,
                newer_noncurrent_versions: keep,
                path,
            }
        })
        .collect();
    RuleReport {
        id: r.id.clone(),
        position: r.position,
        status: if r.enabled { "Enabled" } else { "Disabled" },
        filter: FilterReport {
            prefix: r.prefix.clone(),
            tags: r.tags.clone(),
            object_size_greater_than: (r.size_gt > 0).then_some(r.size_gt),
            object_size_less_than: (r.size_lt > 0).then_some(r.size_lt),
        },
        actions,
    }
}

/// Runs the subcommand: reads `file` (`-` = stdin), prints, returns the exit code.
pub fn run(file: &Path) -> Result<i32, Fail> {
    let bytes = if file.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::stdin()
            .read_to_end(&mut b)
            .map_err(|e| failed(format!("reading standard input: {e}")))?;
        b
    } else {
        std::fs::read(file).map_err(|e| usage(format!("reading {}: {e}", file.display())))?
    };
    match check(&bytes) {
        Checked::Valid(report) => {
            for w in &report.warnings {
                eprintln!("{w}");
            }
            let j = serde_json::to_string_pretty(&report)
                .map_err(|e| failed(format!("encoding report: {e}")))?;
            println!("{j}");
            Ok(EXIT_OK)
        }
        Checked::Invalid(errors) => {
            for e in errors {
                println!("error: {e}");
            }
            Ok(EXIT_USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(xml: &str) -> Report {
        match check(xml.as_bytes()) {
            Checked::Valid(r) => r,
            Checked::Invalid(e) => panic!("unexpectedly invalid: {e:?}"),
        }
    }

    #[test]
    fn compiled_view_has_hash_ttl_and_path() {
        let r = valid(
            r#"<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
                 <Rule><ID>logs</ID><Status>Enabled</Status><Filter><Prefix>logs/</Prefix></Filter>
                   <Expiration><Days>30</Days></Expiration></Rule>
                 <Rule><ID>d</ID><Status>Enabled</Status><Filter><Prefix>d/</Prefix></Filter>
                   <Expiration><Date>2024-06-01T00:00:00Z</Date></Expiration></Rule>
               </LifecycleConfiguration>"#,
        );
        assert_eq!(r.rules.len(), 2);
        let a = &r.rules[0].actions[0];
        assert_eq!(a.kind, ActionKind::ExpirationDays);
        assert_eq!(a.rule_hash, "0c8cc7219c442e3e");
        assert_eq!(a.days, Some(30));
        assert_eq!(a.path, "replay");
        let d = &r.rules[1].actions[0];
        assert_eq!(d.rule_hash, "f0a4f18ff8dde947");
        assert_eq!(d.date.as_deref(), Some("2024-06-01T00:00:00Z"));
        assert_eq!(d.path, "walker");
    }

    #[test]
    fn disabled_rule_is_reported_disabled() {
        let r = valid(
            "<LifecycleConfiguration><Rule><ID>x</ID><Status>Disabled</Status><Filter/>\
             <Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
        );
        assert_eq!(r.rules[0].status, "Disabled");
        assert_eq!(r.rules[0].actions[0].path, "disabled");
    }

    #[test]
    fn invalid_document_lists_every_error() {
        let Checked::Invalid(errs) = check(
            b"<LifecycleConfiguration><Rule><ID>a</ID><Status>On</Status><Filter/>\
              <Expiration><Days>0</Days></Expiration></Rule></LifecycleConfiguration>",
        ) else {
            panic!("expected invalid")
        };
        assert!(errs.len() >= 2, "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("Status")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("Days")), "{errs:?}");
    }

    #[test]
    fn unreadable_document_is_one_error() {
        let Checked::Invalid(errs) = check(b"<nope") else {
            panic!("expected invalid")
        };
        assert_eq!(errs.len(), 1);
    }
}
