//! TLS at the command line: the exit code of each TLS cause, and turning a
//! failed pass into that cause when a handshake was the reason
//! (docs/tls.md#how-failures-surface).

use crate::cli::{
    EXIT_TLS_CLIENT_CERT, EXIT_TLS_EXPIRED, EXIT_TLS_NAME, EXIT_TLS_OTHER, EXIT_TLS_REQUIRED,
    EXIT_TLS_UNKNOWN_CA,
};
use crate::seaweed::tls::{ClientTls, HandshakeError, first_tls_cause};
use crate::seaweed::tls_failure::TlsFailure;

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

/// After a failed pass: whether TLS was the cause. The failure's own error
/// says so when our side of the handshake refused (the server's
/// certificate, its name); a refusal by the server (our certificate) or a
/// TLS port dialled in plaintext reaches us as a closed connection, so
/// those are probed ([`first_tls_cause`]). Returns the message to print and
/// the exit code.
pub async fn diagnose(
    tls: Option<&ClientTls>,
    addrs: &[&str],
    error: Option<&(impl std::error::Error + 'static)>,
) -> Option<(String, i32)> {
    let carried = error.and_then(|e| HandshakeError::find(e));
    if let Some(h) = carried.filter(|h| !matches!(h.failure, TlsFailure::ClientCertificate(_))) {
        return Some((h.to_string(), exit_code(&h.failure)));
    }
    let (addr, f) = first_tls_cause(tls, addrs).await?;
    Some((f.message(&addr), exit_code(&f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What our side of the handshake refused is named from the error the
    /// pass failed with, without dialling again: the address here answers
    /// nothing, so a probe would find no cause.
    #[tokio::test]
    async fn tls_cause_was_found_only_by_dialling_again() {
        let alert = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let carried = HandshakeError::late(alert);
        let (msg, code) = diagnose(None, &["127.0.0.1:1"], Some(&carried))
            .await
            .expect("the carried cause");
        assert_eq!(code, EXIT_TLS_UNKNOWN_CA);
        assert!(msg.contains("UnknownIssuer"), "{msg}");
        // A refused client certificate is probed instead: our own
        // certificate's check says whether it expired or has a foreign CA.
        let refused = HandshakeError::late(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate),
        ));
        assert_eq!(diagnose(None, &["127.0.0.1:1"], Some(&refused)).await, None);
    }
}
