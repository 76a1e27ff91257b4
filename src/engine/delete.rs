//! What a delete is and how it can end, as the pure core sees it: the
//! [`DeleteRequest`] built from a match (checked against everything the
//! server would refuse), the one [`DeleteOutcome`] enum that the dispatcher,
//! the shard state machine, metrics, the status page and the CLI all share,
//! and [`CallResult`], one delete's fate. The wire form lives in
//! `crate::seaweed::delete`, which converts at the edge.

use std::fmt;

use crate::engine::{ActionKind, EntryIdentity, Match, RuleHash};

/// The folder of pending multipart uploads inside a bucket.
pub const UPLOADS_PREFIX: &str = ".uploads/";

/// An upload id the server accepts in `.uploads/<id>` (docs/lifecycle-delete.md#abort-mpu):
/// anything else would be BLOCKED and halt the shard.
pub(crate) fn valid_upload_id(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains('/')
}

/// One deletion to ask the S3 server for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    pub bucket: String,
    /// Bucket-relative path, no leading slash: the object key, or
    /// `.uploads/<upload id>` for [`ActionKind::AbortMpu`] (never the
    /// destination key, which the server answers with BLOCKED).
    pub object_path: String,
    /// Version to delete: required for the noncurrent and delete-marker kinds
    /// (`null` names the null version); empty for the expiration kinds (the
    /// server then acts on the latest) and for AbortMpu.
    pub version_id: String,
    /// The rule that decided (the server only uses it as a metrics label).
    pub rule_hash: RuleHash,
    pub kind: ActionKind,
    /// The entry we decided on; the server deletes only if the live entry
    /// still has this identity. Always sent: without it the server deletes
    /// whatever is there now.
    pub identity: EntryIdentity,
}

/// A request the server would answer with BLOCKED, refused before sending.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lifecycle delete {kind} of {bucket}/{object_path} refused before sending: {reason}")]
pub struct InvalidRequest {
    pub bucket: String,
    pub object_path: String,
    pub kind: ActionKind,
    /// What is wrong and how to fix it.
    pub reason: String,
}

impl DeleteRequest {
    /// The request that carries out `m`.
    pub fn of(m: &Match) -> DeleteRequest {
        DeleteRequest {
            bucket: m.bucket.clone(),
            object_path: m.object_path.clone(),
            version_id: m.version_id.clone(),
            rule_hash: m.rule_hash,
            kind: m.kind,
            identity: m.identity.clone(),
        }
    }

    /// Abort of the multipart upload `upload_id` (the `.uploads/<id>` path is
    /// built here so callers cannot pass the destination key by mistake).
    pub fn abort_mpu(
        bucket: impl Into<String>,
        upload_id: &str,
        rule_hash: RuleHash,
        identity: EntryIdentity,
    ) -> DeleteRequest {
        DeleteRequest {
            bucket: bucket.into(),
            object_path: format!("{UPLOADS_PREFIX}{upload_id}"),
            version_id: String::new(),
            rule_hash,
            kind: ActionKind::AbortMpu,
            identity,
        }
    }

    /// Checks everything the server would answer with BLOCKED, so such a
    /// request is never sent (a BLOCKED answer halts a shard).
    pub fn validate(&self) -> Result<(), InvalidRequest> {
        let invalid = |reason: String| {
            Err(InvalidRequest {
                bucket: self.bucket.clone(),
                object_path: self.object_path.clone(),
                kind: self.kind,
                reason,
            })
        };
        if self.bucket.is_empty() {
            return invalid("empty bucket name".into());
        }
        if self.bucket.contains('/') {
            return invalid("bucket name contains '/'".into());
        }
        if self.object_path.is_empty() {
            return invalid("empty object_path".into());
        }
        if self.object_path.starts_with('/') {
            return invalid("object_path must be bucket-relative (no leading '/')".into());
        }
        match self.kind {
            ActionKind::AbortMpu => {
                let Some(id) = self.object_path.strip_prefix(UPLOADS_PREFIX) else {
                    return invalid(format!(
                        "abort_mpu needs object_path \"{UPLOADS_PREFIX}<upload id>\", not the destination key"
                    ));
                };
                if !valid_upload_id(id) {
                    return invalid(format!(
                        "abort_mpu upload id {id:?} is malformed (empty, '.', '..' or contains '/')"
                    ));
                }
            }
            ActionKind::NoncurrentDays
            | ActionKind::NewerNoncurrent
            | ActionKind::ExpiredDeleteMarker => {
                if self.version_id.is_empty() {
                    return invalid(format!(
                        "{} needs a version_id (use \"null\" for the null version)",
                        self.kind
                    ));
                }
            }
            ActionKind::ExpirationDays | ActionKind::ExpirationDate => {}
        }
        Ok(())
    }
}

/// How one delete ended: the server's verdict, a transport failure after
/// every attempt, or a dry run. The labels are the `LifecycleDelete` enum
/// names plus the Go worker's `RPC_ERROR` and our `DRY_RUN`; they are the
/// metric label values and the keys of every per-outcome count we report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeleteOutcome {
    /// Deleted (or delete marker created).
    Done,
    /// Nothing to do: gone already, changed since (STALE_IDENTITY), latest…
    NoopResolved,
    /// Protected by object lock, or the lock check itself failed (the server
    /// reports both the same way).
    SkippedObjectLock,
    /// A transient server-side failure; try again later. Halts the shard.
    RetryLater,
    /// The request can never succeed as sent. Halts the shard.
    Blocked,
    /// UNSPECIFIED (0), or an outcome number this client does not know (the
    /// number is in the reason). Halts the shard like RETRY_LATER: nothing
    /// says the server acted.
    Unspecified,
    /// No verdict: transport failure after every attempt. Halts the shard.
    RpcError,
    /// `--dry-run`: decided, not sent.
    DryRun,
    /// Not sent: the bucket's lifecycle configuration changed during the
    /// pass and the match's rule is no longer in it
    /// (docs/lifecycle-config.md#changes-during-a-pass), the deletion cap
    /// held it, or the pass was stopped first (docs/lifecycle-delete.md#stopping).
    /// Unresolved but never halting: the next pass sees it again.
    Withdrawn,
}

impl DeleteOutcome {
    /// Every outcome, in display order: the [`REPORTED`](DeleteOutcome::REPORTED)
    /// ones first.
    pub const ALL: [DeleteOutcome; 9] = [
        DeleteOutcome::Done,
        DeleteOutcome::NoopResolved,
        DeleteOutcome::SkippedObjectLock,
        DeleteOutcome::RetryLater,
        DeleteOutcome::Blocked,
        DeleteOutcome::RpcError,
        DeleteOutcome::DryRun,
        DeleteOutcome::Unspecified,
        DeleteOutcome::Withdrawn,
    ];

    /// The outcomes every report lists, zeros included; `Unspecified` is
    /// listed only when it happened (it means a server newer or broken).
    pub const REPORTED: [DeleteOutcome; 7] = *DeleteOutcome::ALL.first_chunk().unwrap();

    /// The label: the proto enum name, `RPC_ERROR` or `DRY_RUN`.
    pub const fn label(self) -> &'static str {
        match self {
            DeleteOutcome::Done => "DONE",
            DeleteOutcome::NoopResolved => "NOOP_RESOLVED",
            DeleteOutcome::SkippedObjectLock => "SKIPPED_OBJECT_LOCK",
            DeleteOutcome::RetryLater => "RETRY_LATER",
            DeleteOutcome::Blocked => "BLOCKED",
            DeleteOutcome::Unspecified => "LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED",
            DeleteOutcome::RpcError => "RPC_ERROR",
            DeleteOutcome::DryRun => "DRY_RUN",
            DeleteOutcome::Withdrawn => "WITHDRAWN",
        }
    }

    /// The outcome with this [`label`](DeleteOutcome::label), for readers of
    /// our own reports (the admin API carries labels on the wire).
    pub fn from_label(label: &str) -> Option<DeleteOutcome> {
        DeleteOutcome::ALL.into_iter().find(|o| o.label() == label)
    }

    /// True when the match is settled and the cursor may pass it: DONE,
    /// NOOP_RESOLVED, SKIPPED_OBJECT_LOCK, or a dry run.
    pub fn is_resolved(self) -> bool {
        matches!(
            self,
            DeleteOutcome::Done
                | DeleteOutcome::NoopResolved
                | DeleteOutcome::SkippedObjectLock
                | DeleteOutcome::DryRun
        )
    }
}

impl fmt::Display for DeleteOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The fate of one delete as the shard sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    pub outcome: DeleteOutcome,
    /// The server's reason text, or the last transport error; empty for a
    /// dry run.
    pub reason: String,
}

impl CallResult {
    /// A server verdict (or a local refusal reported as BLOCKED).
    pub fn answered(outcome: DeleteOutcome, reason: impl Into<String>) -> CallResult {
        CallResult {
            outcome,
            reason: reason.into(),
        }
    }

    /// A transport failure after every attempt.
    pub fn transport(message: impl Into<String>) -> CallResult {
        CallResult::answered(DeleteOutcome::RpcError, message)
    }

    /// `--dry-run`: nothing was sent.
    pub fn dry_run() -> CallResult {
        CallResult::answered(DeleteOutcome::DryRun, "")
    }

    /// Not sent because the match's rule left its bucket's configuration
    /// during the pass.
    pub fn withdrawn(reason: impl Into<String>) -> CallResult {
        CallResult::answered(DeleteOutcome::Withdrawn, reason)
    }

    /// True when the delete is settled (see [`DeleteOutcome::is_resolved`]).
    pub fn is_resolved(&self) -> bool {
        self.outcome.is_resolved()
    }
}

/// `<OUTCOME> <bucket>/<object_path> [version]: <reason>`, the halt reason
/// recorded in the report and in the cursor.
pub fn halt_reason(req: &DeleteRequest, result: &CallResult) -> String {
    let version = if req.version_id.is_empty() {
        String::new()
    } else {
        format!(" {}", req.version_id)
    };
    format!(
        "{} {}/{}{}: {}",
        result.outcome.label(),
        req.bucket,
        req.object_path,
        version,
        result.reason
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The identity the delete tests here and in `crate::seaweed::delete` send.
    pub(crate) fn identity() -> EntryIdentity {
        EntryIdentity {
            mtime_ns: 5,
            size: 10,
            head_fid: "7,0155dc63ec".into(),
            extended_hash: vec![1, 2, 3],
        }
    }

    /// A request for bucket `b` with [`identity`].
    pub(crate) fn req(kind: ActionKind, path: &str, version: &str) -> DeleteRequest {
        DeleteRequest {
            bucket: "b".into(),
            object_path: path.into(),
            version_id: version.into(),
            rule_hash: RuleHash([1, 2, 3, 4, 5, 6, 7, 8]),
            kind,
            identity: identity(),
        }
    }

    #[test]
    fn abort_mpu_helper_builds_uploads_path() {
        let r = DeleteRequest::abort_mpu("b", "abc_123", RuleHash::default(), identity());
        assert_eq!(r.object_path, ".uploads/abc_123");
        assert_eq!(r.kind, ActionKind::AbortMpu);
        assert!(r.validate().is_ok());
    }

    #[test]
    fn validation_refuses_what_the_server_blocks() {
        let bad = [
            req(ActionKind::ExpirationDays, "", ""),
            req(ActionKind::ExpirationDays, "/k", ""),
            req(ActionKind::AbortMpu, "dest/key", ""),
            req(ActionKind::AbortMpu, ".uploads/", ""),
            req(ActionKind::AbortMpu, ".uploads/..", ""),
            req(ActionKind::AbortMpu, ".uploads/a/b", ""),
            req(ActionKind::NoncurrentDays, "k", ""),
            req(ActionKind::NewerNoncurrent, "k", ""),
            req(ActionKind::ExpiredDeleteMarker, "k", ""),
        ];
        for r in bad {
            let e = r.validate().unwrap_err();
            assert!(e.to_string().contains("refused before sending"), "{e}");
        }
        let mut slash = req(ActionKind::ExpirationDays, "k", "");
        slash.bucket = "a/b".into();
        assert!(slash.validate().is_err());
        assert!(
            req(ActionKind::NoncurrentDays, "k", "null")
                .validate()
                .is_ok()
        );
        assert!(req(ActionKind::ExpirationDate, "k", "").validate().is_ok());
    }

    #[test]
    fn labels_round_trip_and_are_distinct() {
        for o in DeleteOutcome::ALL {
            assert_eq!(DeleteOutcome::from_label(o.label()), Some(o));
        }
        let labels: std::collections::BTreeSet<_> =
            DeleteOutcome::ALL.iter().map(|o| o.label()).collect();
        assert_eq!(labels.len(), DeleteOutcome::ALL.len());
        assert_eq!(DeleteOutcome::from_label("nope"), None);
    }

    #[test]
    fn only_verdicts_that_settle_the_match_are_resolved() {
        let resolved: Vec<_> = DeleteOutcome::ALL
            .into_iter()
            .filter(|o| o.is_resolved())
            .collect();
        assert_eq!(
            resolved,
            [
                DeleteOutcome::Done,
                DeleteOutcome::NoopResolved,
                DeleteOutcome::SkippedObjectLock,
                DeleteOutcome::DryRun
            ]
        );
    }

    #[test]
    fn halt_reason_names_outcome_object_version_and_why() {
        let r = req(ActionKind::NoncurrentDays, "k", "v1");
        let got = halt_reason(&r, &CallResult::answered(DeleteOutcome::RetryLater, "busy"));
        assert_eq!(got, "RETRY_LATER b/k v1: busy");
        let r = req(ActionKind::ExpirationDays, "k", "");
        assert_eq!(
            halt_reason(&r, &CallResult::transport("refused")),
            "RPC_ERROR b/k: refused"
        );
    }
}
