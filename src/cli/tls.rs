//! TLS at the command line: the exit code of each TLS cause, and turning a
//! failed pass into that cause when a handshake was the reason
//! (docs/tls.md#how-failures-surface).

use crate::cli::{
    EXIT_TLS_CLIENT_CERT, EXIT_TLS_EXPIRED, EXIT_TLS_NAME, EXIT_TLS_OTHER, EXIT_TLS_REQUIRED,
    EXIT_TLS_UNKNOWN_CA,
};
use crate::seaweed::tls::{ClientTls, speaks_tls};
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

/// After a failed pass: whether TLS was the cause. With TLS configured, the
/// last handshake failure; without, whether one of `addrs` answers TLS
/// (plaintext against a TLS port only shows as "connection closed").
/// Returns the message to print and the exit code.
pub async fn diagnose(tls: Option<&ClientTls>, addrs: &[&str]) -> Option<(String, i32)> {
    match tls {
        Some(t) => {
            for a in addrs {
                if let Some(f) = t.diagnose(a).await {
                    return Some((f.message(a), exit_code(&f)));
                }
            }
            None
        }
        None => {
            for a in addrs {
                if speaks_tls(a).await {
                    let f = TlsFailure::Required;
                    return Some((f.message(a), exit_code(&f)));
                }
            }
            None
        }
    }
}
