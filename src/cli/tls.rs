//! TLS at the command line: the exit code of each TLS cause, and turning a
//! failed pass into that cause when a handshake was the reason
//! (docs/tls.md#how-failures-surface).

use crate::cli::{
    EXIT_TLS_CLIENT_CERT, EXIT_TLS_EXPIRED, EXIT_TLS_NAME, EXIT_TLS_OTHER, EXIT_TLS_REQUIRED,
    EXIT_TLS_UNKNOWN_CA,
};
use crate::seaweed::tls::{ClientTls, first_tls_cause};
use crate::seaweed::tls_failure::TlsFailure;

/// The exit code of a TLS failure.
pub fn exit_code(f: &TlsFailure) -> i32 {
    match f {
        TlsFailure::Required => EXIT_TLS_REQUIRED,
        TlsFailure::ClientCertificate(_) => EXIT_TLS_CLIENT_CERT,
        TlsFailure::UnknownCa(_) => EXIT_TLS_UNKNOWN_CA,
        TlsFailure::Expired(_) => EXIT_TLS_EXPIRED,
        TlsFailure::NameMismatch(_) => EXIT_TLS_NAME,
        TlsFailure::Other(_) => EXIT_TLS_OTHER,
    }
}

/// After a failed pass: whether TLS was the cause
/// ([`first_tls_cause`]). Returns the message to print and the exit code.
pub async fn diagnose(tls: Option<&ClientTls>, addrs: &[&str]) -> Option<(String, i32)> {
    let (addr, f) = first_tls_cause(tls, addrs).await?;
    Some((f.message(&addr), exit_code(&f)))
}
