//! The `LifecycleDelete` client: turns a checked [`DeleteRequest`] into the
//! wire request (docs/lifecycle-delete.md#request-fields), sends it to the S3
//! server's gRPC port and maps the answer to a [`CallResult`]
//! (docs/lifecycle-delete.md#outcomes). Business outcomes are always `Ok`;
//! only transport failures are `Err`.

use tonic::transport::Channel;

use crate::engine::delete::{CallResult, DeleteOutcome};
pub use crate::engine::delete::{DeleteRequest, InvalidRequest, UPLOADS_PREFIX};
use crate::pb::s3_lifecycle_pb;
use crate::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_client::SeaweedS3LifecycleInternalClient;
use crate::pb::s3_lifecycle_pb::{LifecycleDeleteOutcome, LifecycleDeleteRequest};
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint, MAX_MESSAGE_BYTES};
/// Metric label for a call that failed in transport (the Go worker's label).
pub const RPC_ERROR_LABEL: &str = "RPC_ERROR";
/// Metric label for a request refused locally before sending.
pub const INVALID_REQUEST_LABEL: &str = "INVALID_REQUEST";

/// The wire request: identity always set, streaming fields and snapshot id
/// left unset (the server ignores them on the daily path).
pub fn to_proto(r: &DeleteRequest) -> LifecycleDeleteRequest {
    LifecycleDeleteRequest {
        bucket: r.bucket.clone(),
        object_path: r.object_path.clone(),
        version_id: r.version_id.clone(),
        rule_hash: r.rule_hash.0.to_vec(),
        action_kind: r.kind.proto_number(),
        expected_identity: Some(s3_lifecycle_pb::EntryIdentity {
            mtime_ns: r.identity.mtime_ns,
            size: r.identity.size,
            head_fid: r.identity.head_fid.clone(),
            extended_hash: r.identity.extended_hash.clone(),
        }),
        ..Default::default()
    }
}

/// The server's verdict from the proto enum number. UNSPECIFIED and numbers
/// this client does not know become [`DeleteOutcome::Unspecified`] with the
/// number in the reason, so the halt reason shows what the server said.
pub fn outcome_from_proto(n: i32, reason: String) -> CallResult {
    let outcome = match LifecycleDeleteOutcome::try_from(n) {
        Ok(LifecycleDeleteOutcome::Done) => DeleteOutcome::Done,
        Ok(LifecycleDeleteOutcome::NoopResolved) => DeleteOutcome::NoopResolved,
        Ok(LifecycleDeleteOutcome::SkippedObjectLock) => DeleteOutcome::SkippedObjectLock,
        Ok(LifecycleDeleteOutcome::RetryLater) => DeleteOutcome::RetryLater,
        Ok(LifecycleDeleteOutcome::Blocked) => DeleteOutcome::Blocked,
        Ok(LifecycleDeleteOutcome::Unspecified) => DeleteOutcome::Unspecified,
        Err(_) => {
            return CallResult::answered(
                DeleteOutcome::Unspecified,
                format!("unknown outcome number {n}: {reason}"),
            );
        }
    };
    CallResult::answered(outcome, reason)
}

/// Why a call produced no server verdict.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// Refused locally: the server would answer BLOCKED.
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The S3 gRPC address cannot be used.
    #[error(
        "invalid S3 gRPC address {address:?}: {reason}; expected host:port, e.g. 127.0.0.1:18333"
    )]
    InvalidAddress { address: String, reason: String },
    /// gRPC or connection failure: the server may or may not have acted.
    #[error("lifecycle delete RPC failed ({code:?}, retryable: {retryable}): {message}")]
    Transport {
        /// Unavailable for connection errors.
        code: tonic::Code,
        message: String,
        retryable: bool,
    },
}

impl DeleteError {
    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, DeleteError::Transport { retryable, .. } if *retryable)
    }

    /// Metric label: `RPC_ERROR` for transport failures (as the Go worker),
    /// `INVALID_REQUEST` for local refusals.
    pub fn label(&self) -> &'static str {
        match self {
            DeleteError::Transport { .. } => RPC_ERROR_LABEL,
            DeleteError::Invalid(_) | DeleteError::InvalidAddress { .. } => INVALID_REQUEST_LABEL,
        }
    }

    fn from_status(s: &tonic::Status) -> DeleteError {
        // What gRPC says of a wrong port names no fix; the halt reason should.
        let hint = if s.code() == tonic::Code::Unimplemented
            && s.message().contains("unknown service")
        {
            "; cluster.s3_grpc is not an S3 gateway's gRPC port (by default its S3 port + 10000, \
             `weed s3 -port.grpc`), or the gateway has no LifecycleDelete (SeaweedFS before 4.48)"
        } else if s.message().contains("h2 protocol error") {
            "; cluster.s3_grpc does not speak gRPC (an HTTP port?): it must be an S3 gateway's \
             gRPC port (by default its S3 port + 10000)"
        } else {
            ""
        };
        DeleteError::Transport {
            code: s.code(),
            message: format!("{}{hint}", s.message()),
            retryable: is_retryable_code(s.code()),
        }
    }
}

/// Codes where the server did not reach a verdict for a reason that may pass:
/// connection refused/reset (tonic reports those as Unavailable or Unknown),
/// a connection that closed under a call (Cancelled, "operation was
/// canceled": the gateway died mid-call; docs/lifecycle-delete.md#transport-retries),
/// overload, timeouts and internal errors. A retry is safe: the server
/// compares the entry's identity, so a delete that did go through answers
/// NOOP_RESOLVED. InvalidArgument, Unimplemented (wrong port or a server
/// without the service), permission errors and the like will not change by
/// retrying.
fn is_retryable_code(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unavailable
            | tonic::Code::Cancelled
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
    /// the server (docs/lifecycle-delete.md#latency); callers bound a pass as
    /// a whole.
    pub async fn connect(s3_grpc_addr: &str) -> Result<DeleteClient, DeleteError> {
        DeleteClient::connect_lazy_with(s3_grpc_addr, &EndpointOptions::seaweed())
    }

    /// [`DeleteClient::connect`] without the `async` (nothing is dialled
    /// there either) and with explicit endpoint options (client TLS). Must
    /// be called inside a tokio runtime.
    pub fn connect_lazy_with(
        s3_grpc_addr: &str,
        options: &EndpointOptions,
    ) -> Result<DeleteClient, DeleteError> {
        let endpoint =
            GrpcEndpoint::new(s3_grpc_addr, options).map_err(|e| DeleteError::InvalidAddress {
                address: s3_grpc_addr.to_string(),
                reason: e.reason().to_string(),
            })?;
        Ok(DeleteClient {
            inner: SeaweedS3LifecycleInternalClient::new(endpoint.connect_lazy())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
        })
    }

    /// Validates and sends one request. Every server answer is `Ok`.
    pub async fn delete(&self, request: &DeleteRequest) -> Result<CallResult, DeleteError> {
        request.validate()?;
        let mut client = self.inner.clone();
        let resp = client
            .lifecycle_delete(to_proto(request))
            .await
            .map_err(|s| DeleteError::from_status(&s))?
            .into_inner();
        Ok(outcome_from_proto(resp.outcome, resp.reason))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_wrong_s3_grpc_port_halted_without_naming_the_setting() {
        let e = super::DeleteError::from_status(&tonic::Status::unimplemented(
            "unknown service s3_lifecycle_pb.SeaweedS3LifecycleInternal",
        ));
        let t = e.to_string();
        assert!(
            t.contains("cluster.s3_grpc is not an S3 gateway's gRPC port") && !e.is_retryable(),
            "{t}"
        );
        let plain = super::DeleteError::from_status(&tonic::Status::unavailable("refused"));
        assert!(!plain.to_string().contains("cluster.s3_grpc"), "{plain}");
    }

    use super::*;
    use crate::engine::delete::tests::{identity, req};
    use crate::engine::{ActionKind, EntryIdentity, RuleHash};

    #[test]
    fn proto_carries_identity_hash_and_kind() {
        let p = to_proto(&req(ActionKind::NoncurrentDays, "k", "v1"));
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
        assert!(to_proto(&r).expected_identity.is_some());
    }

    #[test]
    fn abort_mpu_goes_out_as_kind_5() {
        let r = DeleteRequest::abort_mpu("b", "abc_123", RuleHash::default(), identity());
        assert_eq!(to_proto(&r).action_kind, 5);
    }

    #[test]
    fn local_refusals_are_invalid_request_and_not_retried() {
        let e = DeleteError::from(
            req(ActionKind::AbortMpu, "dest/key.bin", "")
                .validate()
                .unwrap_err(),
        );
        assert_eq!(e.label(), INVALID_REQUEST_LABEL);
        assert!(!e.is_retryable());
        let msg = e.to_string();
        assert!(msg.contains(".uploads/<upload id>"), "{msg}");
        assert!(msg.contains("dest/key.bin"), "{msg}");
    }

    #[test]
    fn outcomes_map_and_label_like_the_proto() {
        for n in 0..=5 {
            let got = outcome_from_proto(n, "r".into());
            let name = LifecycleDeleteOutcome::try_from(n).unwrap().as_str_name();
            assert_eq!(got.outcome.label(), name);
            assert_eq!(got.reason, "r");
        }
        let unknown = outcome_from_proto(99, "r".into());
        assert_eq!(unknown.outcome, DeleteOutcome::Unspecified);
        assert!(!unknown.is_resolved());
        assert!(unknown.reason.contains("99"), "{}", unknown.reason);
    }

    #[test]
    fn transport_errors_classify_retryable() {
        for code in [
            tonic::Code::Unavailable,
            tonic::Code::Cancelled,
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
