//! TLS at the command line: loading the client TLS material from the settings
//! at start-up (a bad file is exit 2), and turning a failed pass into the
//! TLS cause and exit code when a handshake was the reason
//! (docs/tls.md#how-failures-surface).

use crate::cli::{
    EXIT_TLS_CLIENT_CERT, EXIT_TLS_EXPIRED, EXIT_TLS_NAME, EXIT_TLS_OTHER, EXIT_TLS_REQUIRED,
    EXIT_TLS_UNKNOWN_CA,
};
use crate::config::Settings;
use crate::seaweed::tls::{ClientTls, TlsFailure, speaks_tls};

/// The client TLS for `s`, loaded and checked now. `Err` is a configuration
/// message (exit 2) naming the key and the file.
pub fn load(s: &Settings) -> Result<Option<ClientTls>, String> {
    let Some(files) = s.tls_files(std::env::vars()).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let source = if s.cluster.security_toml.trim().is_empty() {
        "[tls]".to_string()
    } else {
        format!("cluster.security_toml ({})", s.cluster.security_toml.trim())
    };
    ClientTls::load(files)
        .map(Some)
        .map_err(|e| format!("TLS material from {source}: {e}"))
}

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
