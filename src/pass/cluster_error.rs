//! Why a call across the cluster boundary of a pass failed ([`ClusterError`]):
//! what failed is data (which filer, which call, which store), and the text
//! of each error is the message the pass always printed, since logs, halt
//! reasons and tests read it.

use crate::seaweed::controls::ControlsError;
use crate::seaweed::cursor::CursorError;
use crate::seaweed::delete::DeleteError;
use crate::seaweed::discovery::{DiscoveryError, MasterError};
use crate::seaweed::filer::FilerError;
use crate::seaweed::metalog_error::MetaLogError;
use crate::seaweed::pool::{AddressError, EveryFilerFailed, failures};
use crate::seaweed::retention::RetentionError;
use crate::seaweed::store_check::StoreCheckError;
use crate::seaweed::ttl_scan::TtlScanError;

/// Why a [`ClusterPort`](crate::pass::ports::ClusterPort) call (or the
/// adapter building one) failed. Callers that keep a reason as text (halt
/// reasons, reports, logs) take `to_string()` where they store it.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A filer list or gRPC address cannot be used: a setting is wrong.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The S3 gateways' addresses cannot be used.
    #[error(transparent)]
    Gateway(#[from] DeleteError),
    /// A filer call failed, in transport or by the filer's answer (the
    /// error names the call and the path).
    #[error(transparent)]
    Filer(#[from] FilerError),
    /// Listing the buckets' lifecycle configurations failed.
    #[error("listing buckets under {root}: {source}")]
    ListBuckets { root: String, source: FilerError },
    /// Listing a bucket for the walker failed.
    #[error("listing bucket {bucket}: {source}")]
    ListBucket { bucket: String, source: FilerError },
    /// Listing a directory (the checks around a delete) failed.
    #[error("listing {dir}: {source}")]
    ListDir { dir: String, source: FilerError },
    /// Looking up one entry failed (not-found is an answer, not this).
    #[error("lookup {dir}/{name}: {source}")]
    Lookup {
        dir: String,
        name: String,
        source: FilerError,
    },
    /// Reading the filer's clock failed.
    #[error("filer clock: {0}")]
    FilerClock(#[source] FilerError),
    /// Probing how far back the meta-log reaches failed.
    #[error("meta-log retention probe: {0}")]
    Retention(#[from] RetentionError),
    /// Loading or saving a cursor failed; a second writer shows as
    /// [`CursorError::ConcurrentWriter`].
    #[error(transparent)]
    Cursor(#[from] CursorError),
    /// Opening or reading the meta-log failed.
    #[error(transparent)]
    MetaLog(#[from] MetaLogError),
    /// Whether the filers share a store could not be told, they mix shared
    /// and separate stores (`FilerPool::store_check`), or the master lists a
    /// filer with a store of its own that the pass does not read
    /// (`FilerPool::check_unread_filers`).
    #[error(transparent)]
    StoreCheck(#[from] StoreCheckError),
    /// A control file (pause, approval, hold, rules, journal) could not be
    /// read or written. Boxed: its context and filer error inline would make
    /// every `ClusterError` larger than clippy's `result_large_err` allows.
    #[error(transparent)]
    Controls(Box<ControlsError>),
    /// Reading the cluster's members from the master failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A call to the master (its address, volumes, vacuum, weed admin)
    /// failed.
    #[error(transparent)]
    Master(#[from] MasterError),
    /// The legacy-TTL audit failed.
    #[error(transparent)]
    TtlAudit(#[from] TtlScanError),
    /// One filer of several failed (the others were tried, or are not
    /// asked).
    #[error("filer {addr}: {source}")]
    OnFiler {
        addr: String,
        source: Box<ClusterError>,
    },
    /// Every filer failed a call that fails over: each one's address and
    /// error.
    #[error("every filer failed: {}", failures(.0))]
    EveryFilerFailed(Vec<(String, ClusterError)>),
    /// No filer could open the meta-log subscription: each one's address
    /// and error.
    #[error("meta-log: no filer could serve the subscription: {}", failures(.0))]
    NoFilerServes(Vec<(String, ClusterError)>),
    /// A filer of a pass on separate stores left the pool between the
    /// store check and the subscription.
    #[error("filer {addr}: left the pool")]
    LeftPool { addr: String },
    /// On separate stores, some filers' own logs could not be opened; a
    /// pass needs every one.
    #[error(
        "meta-log: {}; the filers have their own stores, so a pass needs every filer's own \
         log: bring it back, or remove it from `cluster.filer` once its writes are no longer \
         needed (docs/meta-log.md#several-filers)",
        joined(.0)
    )]
    OwnLogsUnopened(Vec<ClusterError>),
    /// On separate stores, one filer's own log broke mid-pass; it is not
    /// resumed elsewhere since no other log holds its events.
    #[error(
        "meta-log stream on filer {addr} broke: {source}; not resumed on another filer: \
         the filers have their own stores, so the others lack the events written \
         through {addr} (docs/meta-log.md#several-filers)"
    )]
    OwnLogBroke {
        addr: String,
        /// How its stream broke.
        source: MetaLogError,
    },
    /// The merge of the filers' own logs got an event from a filer whose
    /// previous one was still pending (a bug).
    #[error(
        "meta-log merge: filer {addr} sent an event while its last one \
         was still pending (a bug; the pass stops here)"
    )]
    MergeOutOfOrder { addr: String },
    /// The meta-log stream broke and could not be resumed on another filer.
    #[error("{broke}; then {resume}")]
    ResumeFailed {
        /// How the stream broke.
        broke: MetaLogError,
        /// Why no filer took it over.
        resume: Box<ClusterError>,
    },
    /// No master is at hand to vacuum a volume (test doubles).
    #[error("volume {volume}: no master to vacuum it")]
    NoMaster { volume: u32 },
    /// This port keeps no control files of the kind (test doubles).
    #[error("cannot {action} bucket {bucket}: this cluster port keeps no {kept}")]
    NotKept {
        /// What was asked: `pause`, `resume`, `approve`.
        action: &'static str,
        bucket: String,
        /// What the port would have to keep: `pauses`, `approvals`.
        kept: &'static str,
    },
}

impl ClusterError {
    /// This error as filer `addr`'s ([`ClusterError::OnFiler`]).
    pub fn on_filer(self, addr: String) -> ClusterError {
        ClusterError::OnFiler {
            addr,
            source: Box::new(self),
        }
    }
}

impl From<ControlsError> for ClusterError {
    fn from(e: ControlsError) -> Self {
        ClusterError::Controls(Box::new(e))
    }
}

impl From<EveryFilerFailed<ClusterError>> for ClusterError {
    fn from(e: EveryFilerFailed<ClusterError>) -> Self {
        ClusterError::EveryFilerFailed(e.0)
    }
}

fn joined(errors: &[ClusterError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose text is `text`: what is composed here is only its
    /// message.
    fn leaf(text: &str) -> ClusterError {
        ControlsError::InvalidBucket(text.into()).into()
    }

    fn filer_failure(addr: &str) -> ClusterError {
        ClusterError::OnFiler {
            addr: addr.into(),
            source: Box::new(leaf("down")),
        }
    }

    /// The texts are the messages the pass printed before its errors were
    /// typed: logs, halt reasons and the e2e suites match on them.
    #[test]
    fn messages_keep_their_old_wording() {
        let every = ClusterError::from(EveryFilerFailed(vec![
            ("a:1".to_string(), leaf("down")),
            ("b:1".to_string(), leaf("gone")),
        ]));
        assert_eq!(
            every.to_string(),
            "every filer failed: filer a:1: down; filer b:1: gone"
        );
        assert_eq!(filer_failure("a:1").to_string(), "filer a:1: down");
        let none = ClusterError::NoFilerServes(vec![(
            "a:1".into(),
            ClusterError::MetaLog(MetaLogError::ReaderVanished),
        )]);
        assert_eq!(
            none.to_string(),
            "meta-log: no filer could serve the subscription: filer a:1: meta-log reader task \
             ended without a result"
        );
        let unopened = ClusterError::OwnLogsUnopened(vec![
            filer_failure("a:1"),
            ClusterError::LeftPool { addr: "b:1".into() },
        ]);
        assert_eq!(
            unopened.to_string(),
            "meta-log: filer a:1: down; filer b:1: left the pool; the filers have their own \
             stores, so a pass needs every filer's own log: bring it back, or remove it from \
             `cluster.filer` once its writes are no longer needed \
             (docs/meta-log.md#several-filers)"
        );
        let broke = ClusterError::OwnLogBroke {
            addr: "a:1".into(),
            source: MetaLogError::ReaderVanished,
        };
        assert_eq!(
            broke.to_string(),
            "meta-log stream on filer a:1 broke: meta-log reader task ended without a result; \
             not resumed on another filer: the filers have their own stores, so the others lack \
             the events written through a:1 (docs/meta-log.md#several-filers)"
        );
        let resumed = ClusterError::ResumeFailed {
            broke: MetaLogError::ReaderVanished,
            resume: Box::new(filer_failure("b:1")),
        };
        assert_eq!(
            resumed.to_string(),
            "meta-log reader task ended without a result; then filer b:1: down"
        );
        assert_eq!(
            ClusterError::MergeOutOfOrder { addr: "a:1".into() }.to_string(),
            "meta-log merge: filer a:1 sent an event while its last one was still pending (a \
             bug; the pass stops here)"
        );
        assert_eq!(
            ClusterError::NoMaster { volume: 7 }.to_string(),
            "volume 7: no master to vacuum it"
        );
        assert_eq!(
            ClusterError::NotKept {
                action: "approve",
                bucket: "b".into(),
                kept: "approvals",
            }
            .to_string(),
            "cannot approve bucket b: this cluster port keeps no approvals"
        );
        assert_eq!(
            ClusterError::from(AddressError::Invalid {
                addr: "x".into(),
                reason: "bad".into(),
            })
            .to_string(),
            "invalid address \"x\": bad; expected host:port"
        );
    }
}
