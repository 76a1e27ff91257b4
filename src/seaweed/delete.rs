//! The `LifecycleDelete` client: builds and validates requests (facts doc §9.1),
//! sends them to the S3 server's gRPC port and maps the answer to an outcome
//! (§9.2). Business outcomes are always `Ok`; only transport failures are `Err`.

use tonic::transport::Channel;

use crate::engine::{ActionKind, EntryIdentity, RuleHash};
use crate::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_client::SeaweedS3LifecycleInternalClient;
use crate::pb::s3_lifecycle_pb::{LifecycleDeleteOutcome, LifecycleDeleteRequest};

/// The folder of pending multipart uploads inside a bucket.
pub const UPLOADS_PREFIX: &str = ".uploads/";
/// Metric label for a call that failed in transport (the Go worker's label).
pub const RPC_ERROR_LABEL: &str = "RPC_ERROR";
/// Metric label for a request refused locally before sending.
pub const INVALID_REQUEST_LABEL: &str = "INVALID_REQUEST";

/// One deletion to ask the S3 server for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    /// Bucket name.
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
    /// What to do.
    pub kind: ActionKind,
    /// The entry we decided on; the server deletes only if the live entry
    /// still has this identity. Always sent: without it the server deletes
    /// whatever is there now.
    pub identity: EntryIdentity,
}

impl DeleteRequest {
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
    pub fn validate(&self) -> Result<(), DeleteError> {
        let invalid = |reason: String| {
            Err(DeleteError::Invalid {
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
                if id.is_empty() || id == "." || id == ".." || id.contains('/') {
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

    /// The wire request: identity always set, streaming fields and snapshot id
    /// left unset (the server ignores them on the daily path).
    pub fn to_proto(&self) -> LifecycleDeleteRequest {
        LifecycleDeleteRequest {
            bucket: self.bucket.clone(),
            object_path: self.object_path.clone(),
            version_id: self.version_id.clone(),
            rule_hash: self.rule_hash.0.to_vec(),
            action_kind: self.kind.proto_number(),
            expected_identity: Some(self.identity.to_proto()),
            ..Default::default()
        }
    }
}

/// The server's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Deleted (or delete marker created).
    Done,
    /// Nothing to do: gone already, changed since (STALE_IDENTITY), latest…
    NoopResolved,
    /// Protected by object lock, or the lock check itself failed (the server
    /// reports both the same way, facts doc §13.18).
    SkippedObjectLock,
    /// A transient server-side failure; try again later.
    RetryLater,
    /// The request can never succeed as sent.
    Blocked,
    /// UNSPECIFIED (0) or a number this client does not know.
    Unknown(i32),
}

impl Outcome {
    /// From the proto enum number.
    pub fn from_proto(n: i32) -> Outcome {
        match LifecycleDeleteOutcome::try_from(n) {
            Ok(LifecycleDeleteOutcome::Done) => Outcome::Done,
            Ok(LifecycleDeleteOutcome::NoopResolved) => Outcome::NoopResolved,
            Ok(LifecycleDeleteOutcome::SkippedObjectLock) => Outcome::SkippedObjectLock,
            Ok(LifecycleDeleteOutcome::RetryLater) => Outcome::RetryLater,
            Ok(LifecycleDeleteOutcome::Blocked) => Outcome::Blocked,
            Ok(LifecycleDeleteOutcome::Unspecified) | Err(_) => Outcome::Unknown(n),
        }
    }

    /// The event needs no further work: Done, NoopResolved or SkippedObjectLock.
    pub fn is_resolved(self) -> bool {
        matches!(
            self,
            Outcome::Done | Outcome::NoopResolved | Outcome::SkippedObjectLock
        )
    }

    /// Metric label: the proto enum name (`UNKNOWN` for numbers not in it).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Done => "DONE",
            Outcome::NoopResolved => "NOOP_RESOLVED",
            Outcome::SkippedObjectLock => "SKIPPED_OBJECT_LOCK",
            Outcome::RetryLater => "RETRY_LATER",
            Outcome::Blocked => "BLOCKED",
            Outcome::Unknown(0) => "LIFECYCLE_DELETE_OUTCOME_UNSPECIFIED",
            Outcome::Unknown(_) => "UNKNOWN",
        }
    }
}

/// The server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteOutcome {
    /// Verdict.
    pub outcome: Outcome,
    /// The server's reason string, e.g. `STALE_IDENTITY` (facts doc §9.2).
    pub reason: String,
}

/// Why a call produced no server verdict.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// Refused locally: the server would answer BLOCKED.
    #[error("lifecycle delete {kind} of {bucket}/{object_path} refused before sending: {reason}")]
    Invalid {
        /// Bucket of the request.
        bucket: String,
        /// object_path of the request.
        object_path: String,
        /// Kind of the request.
        kind: ActionKind,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The S3 gRPC address cannot be used.
    #[error(
        "invalid S3 gRPC address {address:?}: {reason}; expected host:port, e.g. 127.0.0.1:18333"
    )]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// Parser message.
        reason: String,
    },
    /// gRPC or connection failure: the server may or may not have acted.
    #[error("lifecycle delete RPC failed ({code:?}, retryable: {retryable}): {message}")]
    Transport {
        /// gRPC status code (Unavailable for connection errors).
        code: tonic::Code,
        /// gRPC status message.
        message: String,
        /// Whether trying again may help.
        retryable: bool,
    },
}

impl DeleteError {
    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            DeleteError::Transport {
                retryable: true,
                ..
            }
        )
    }

    /// Metric label: `RPC_ERROR` for transport failures (as the Go worker),
    /// `INVALID_REQUEST` for local refusals.
    pub fn label(&self) -> &'static str {
        match self {
            DeleteError::Transport { .. } => RPC_ERROR_LABEL,
            DeleteError::Invalid { .. } | DeleteError::InvalidAddress { .. } => {
                INVALID_REQUEST_LABEL
            }
        }
    }

    fn from_status(s: &tonic::Status) -> DeleteError {
        DeleteError::Transport {
            code: s.code(),
            message: s.message().to_string(),
            retryable: is_retryable_code(s.code()),
        }
    }
}

/// Codes where the server did not reach a verdict for a reason that may pass:
/// connection refused/reset (tonic reports those as Unavailable or Unknown),
/// overload, timeouts and internal errors. Cancelled (our own shutdown),
/// InvalidArgument, Unimplemented (wrong port or a server without the
/// service), permission errors and the like will not change by retrying.
fn is_retryable_code(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unknown
            | tonic::Code::Internal
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted
    )
}

/// Client for `SeaweedS3LifecycleInternal.LifecycleDelete`. Cheap to clone;
/// clones share one HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct DeleteClient {
    inner: SeaweedS3LifecycleInternalClient<Channel>,
}

impl DeleteClient {
    /// A client for the S3 server's gRPC address (`host:port`, or a URL with
    /// `http://`). Connects lazily and reconnects on demand, so an unreachable
    /// server shows up as a retryable [`DeleteError::Transport`] per call.
    /// There is no per-RPC deadline: versioned deletes can take over 12 s on
    /// the server (facts doc §13.18); callers bound a pass as a whole.
    pub async fn connect(s3_grpc_addr: &str) -> Result<DeleteClient, DeleteError> {
        use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
        let endpoint =
            GrpcEndpoint::new(s3_grpc_addr, &EndpointOptions::seaweed()).map_err(|e| {
                DeleteError::InvalidAddress {
                    address: s3_grpc_addr.to_string(),
                    reason: e.reason().to_string(),
                }
            })?;
        Ok(DeleteClient::from_channel(endpoint.connect_lazy()))
    }

    /// A client on an existing channel.
    pub fn from_channel(channel: Channel) -> DeleteClient {
        DeleteClient {
            inner: SeaweedS3LifecycleInternalClient::new(channel)
                .max_decoding_message_size(crate::seaweed::endpoint::MAX_MESSAGE_BYTES),
        }
    }

    /// Validates and sends one request. Every server answer is `Ok`.
    pub async fn delete(&self, request: &DeleteRequest) -> Result<DeleteOutcome, DeleteError> {
        request.validate()?;
        let mut client = self.inner.clone();
        match client.lifecycle_delete(request.to_proto()).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                Ok(DeleteOutcome {
                    outcome: Outcome::from_proto(resp.outcome),
                    reason: resp.reason,
                })
            }
            Err(status) => Err(DeleteError::from_status(&status)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> EntryIdentity {
        EntryIdentity {
            mtime_ns: 5,
            size: 10,
            head_fid: "7,0155dc63ec".into(),
            extended_hash: vec![1, 2, 3],
        }
    }

    fn req(kind: ActionKind, path: &str, version: &str) -> DeleteRequest {
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
    fn proto_carries_identity_hash_and_kind() {
        let p = req(ActionKind::NoncurrentDays, "k", "v1").to_proto();
        assert_eq!(p.bucket, "b");
        assert_eq!(p.object_path, "k");
        assert_eq!(p.version_id, "v1");
        assert_eq!(p.rule_hash, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(p.action_kind, 3);
        let id = p.expected_identity.unwrap();
        assert_eq!(id.mtime_ns, 5);
        assert_eq!(id.size, 10);
        assert_eq!(id.head_fid, "7,0155dc63ec");
        assert_eq!(id.extended_hash, vec![1, 2, 3]);
        assert!(p.stream_shard.is_empty());
        assert_eq!(p.engine_snapshot_id, 0);
        assert_eq!(p.stream_position_ts_ns, 0);
    }

    #[test]
    fn default_identity_is_still_sent() {
        // An all-zero identity is a real CAS (a zero-size, chunkless entry),
        // not "no CAS": the field must be present on the wire.
        let mut r = req(ActionKind::ExpirationDays, "k", "");
        r.identity = EntryIdentity::default();
        assert!(r.to_proto().expected_identity.is_some());
    }

    #[test]
    fn abort_mpu_helper_builds_uploads_path() {
        let r = DeleteRequest::abort_mpu("b", "abc_123", RuleHash::default(), identity());
        assert_eq!(r.object_path, ".uploads/abc_123");
        assert_eq!(r.to_proto().action_kind, 5);
        assert!(r.validate().is_ok());
    }

    #[test]
    fn validation_refuses_what_the_server_blocks() {
        let bad = [
            req(ActionKind::ExpirationDays, "", ""),
            {
                let mut r = req(ActionKind::ExpirationDays, "k", "");
                r.bucket.clear();
                r
            },
            req(ActionKind::ExpirationDays, "/k", ""),
            req(ActionKind::AbortMpu, "dest/key.bin", ""),
            req(ActionKind::AbortMpu, ".uploads/", ""),
            req(ActionKind::AbortMpu, ".uploads/..", ""),
            req(ActionKind::AbortMpu, ".uploads/a/b", ""),
            req(ActionKind::NoncurrentDays, "k", ""),
            req(ActionKind::NewerNoncurrent, "k", ""),
            req(ActionKind::ExpiredDeleteMarker, "k", ""),
        ];
        for r in bad {
            let e = r.validate().expect_err(&format!("{r:?}"));
            assert_eq!(e.label(), INVALID_REQUEST_LABEL);
            assert!(!e.is_retryable());
        }
        let good = [
            req(ActionKind::ExpirationDays, "k", ""),
            req(ActionKind::ExpirationDate, "a/b/", "v"),
            req(ActionKind::NoncurrentDays, "k", "null"),
            req(ActionKind::ExpiredDeleteMarker, "k", "v"),
            req(ActionKind::AbortMpu, ".uploads/x_y", ""),
        ];
        for r in good {
            r.validate().unwrap();
        }
    }

    #[test]
    fn abort_mpu_with_dest_key_names_the_fix() {
        let e = req(ActionKind::AbortMpu, "dest/key.bin", "")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains(".uploads/<upload id>"), "{e}");
        assert!(e.contains("dest/key.bin"), "{e}");
    }

    #[test]
    fn outcomes_map_and_label_like_the_proto() {
        assert_eq!(Outcome::from_proto(1), Outcome::Done);
        assert_eq!(Outcome::from_proto(2), Outcome::NoopResolved);
        assert_eq!(Outcome::from_proto(3), Outcome::SkippedObjectLock);
        assert_eq!(Outcome::from_proto(4), Outcome::RetryLater);
        assert_eq!(Outcome::from_proto(5), Outcome::Blocked);
        assert_eq!(Outcome::from_proto(0), Outcome::Unknown(0));
        assert_eq!(Outcome::from_proto(99), Outcome::Unknown(99));
        for n in 1..=5 {
            let o = Outcome::from_proto(n);
            let name = LifecycleDeleteOutcome::try_from(n).unwrap().as_str_name();
            assert_eq!(o.label(), name);
        }
        assert_eq!(
            Outcome::Unknown(0).label(),
            LifecycleDeleteOutcome::Unspecified.as_str_name()
        );
        let resolved: Vec<_> = (0..7)
            .map(Outcome::from_proto)
            .filter(|o| o.is_resolved())
            .collect();
        assert_eq!(
            resolved,
            [
                Outcome::Done,
                Outcome::NoopResolved,
                Outcome::SkippedObjectLock
            ]
        );
    }

    #[test]
    fn transport_errors_classify_retryable() {
        for code in [
            tonic::Code::Unavailable,
            tonic::Code::DeadlineExceeded,
            tonic::Code::Unknown,
            tonic::Code::Internal,
            tonic::Code::ResourceExhausted,
            tonic::Code::Aborted,
        ] {
            let e = DeleteError::from_status(&tonic::Status::new(code, "x"));
            assert!(e.is_retryable(), "{code:?}");
            assert_eq!(e.label(), RPC_ERROR_LABEL);
        }
        for code in [
            tonic::Code::Cancelled,
            tonic::Code::InvalidArgument,
            tonic::Code::Unimplemented,
            tonic::Code::PermissionDenied,
            tonic::Code::Unauthenticated,
        ] {
            let e = DeleteError::from_status(&tonic::Status::new(code, "x"));
            assert!(!e.is_retryable(), "{code:?}");
        }
    }

    #[tokio::test]
    async fn bad_address_is_a_clear_error() {
        let e = DeleteClient::connect("not a host:port").await.unwrap_err();
        assert!(e.to_string().contains("invalid S3 gRPC address"), "{e}");
    }
}
