//! Why a TLS connection to a SeaweedFS server failed ([`TlsFailure`],
//! classified from rustls's errors and the alerts the server sends), and what
//! to tell the operator: each message names the settings of the connection's
//! use ([`TlsUse`]: the cluster's gRPC, or weed admin's HTTPS API), so the
//! fix points at the file that configures it (docs/tls.md#how-failures-surface).

use std::io;

use rustls::{AlertDescription, CertificateError};

/// Why a TLS connection to a SeaweedFS server failed, as far as it can be
/// told from the handshake (docs/tls.md#how-failures-surface).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server speaks TLS and we dialled in plaintext.
    Required,
    /// The server refused our client certificate, or we sent none.
    ClientCertificate(String),
    /// The server's certificate is not signed by our CA (or ours by its).
    UnknownCa(String),
    /// A certificate in the chain (ours or the server's) has expired or is
    /// not valid yet.
    Expired(String),
    /// `tls.server_name` is set and the server certificate does not carry it.
    NameMismatch(String),
    /// Any other handshake failure.
    Other(String),
}

impl TlsFailure {
    /// One line naming the cause and the fix, for a gRPC connection.
    pub fn message(&self, addr: &str) -> String {
        self.message_for(addr, TlsUse::Grpc)
    }

    /// One line naming the cause and the fix in the settings of the
    /// connection's use: `tls.*` and `[grpc]` for gRPC, `[https.client]`,
    /// `[https.admin]` and `weed_admin.address` for weed admin's HTTPS API,
    /// `[https.client]` and `[https.volume]` for the volume servers'.
    pub fn message_for(&self, addr: &str, used_for: TlsUse) -> String {
        match (used_for, self) {
            (TlsUse::Grpc, TlsFailure::Required) => format!(
                "{addr} requires TLS: set tls.* or --security-toml, or put SeaweedFS's security.toml where weed looks for it (./, ~/.seaweedfs/, /etc/seaweedfs/) (the server answered a TLS handshake; plaintext is refused)"
            ),
            // A ClientTls always dials TLS, so it never reports this; the
            // enforcer's plaintext probe says it at length (enforcer::check).
            (TlsUse::AdminHttps, TlsFailure::Required) => format!(
                "weed admin at {addr} serves HTTPS: set [https.client] enabled = true and ca in cluster.security_toml"
            ),
            (TlsUse::Grpc, TlsFailure::ClientCertificate(d)) => format!(
                "{addr} refused the client certificate ({d}): it requires one signed by its CA; set tls.cert and tls.key (or [grpc.client] in security.toml)"
            ),
            (TlsUse::AdminHttps, TlsFailure::ClientCertificate(d)) => format!(
                "weed admin at {addr} refused the client certificate ({d}): its [https.admin] ca requires one it signed; set [https.client] cert and key in cluster.security_toml"
            ),
            (TlsUse::Grpc, TlsFailure::UnknownCa(d)) => format!(
                "TLS with {addr}: unknown CA ({d}): the server's certificate is not signed by tls.ca, or ours is not signed by a CA the server trusts; use the cluster's CA ([grpc] ca)"
            ),
            (TlsUse::AdminHttps, TlsFailure::UnknownCa(d)) => format!(
                "HTTPS with weed admin at {addr}: unknown CA ({d}): its certificate ([https.admin] cert) is not signed by [https.client] ca, or ours by a CA it trusts; set [https.client] ca in cluster.security_toml to the CA that issued the admin's certificate"
            ),
            (_, TlsFailure::Expired(d)) => format!(
                "TLS with {addr}: expired certificate ({d}): renew it, or check this host's clock"
            ),
            (TlsUse::Grpc, TlsFailure::NameMismatch(d)) => format!(
                "TLS with {addr}: the server certificate does not name tls.server_name ({d}); unset tls.server_name to check the chain only"
            ),
            (TlsUse::AdminHttps, TlsFailure::NameMismatch(d)) => format!(
                "HTTPS with weed admin at {addr}: its certificate does not name the host of weed_admin.address ({d}); set weed_admin.address to a host name or IP address the certificate carries"
            ),
            (TlsUse::VolumeHttps, TlsFailure::Required) => format!(
                "volume server {addr} serves HTTPS: set [https.client] enabled = true and ca in cluster.security_toml"
            ),
            (TlsUse::VolumeHttps, TlsFailure::ClientCertificate(d)) => format!(
                "volume server {addr} refused the client certificate ({d}): its [https.volume] ca requires one it signed; set [https.client] cert and key in cluster.security_toml"
            ),
            (TlsUse::VolumeHttps, TlsFailure::UnknownCa(d)) => format!(
                "HTTPS with volume server {addr}: unknown CA ({d}): its certificate ([https.volume] cert) is not signed by [https.client] ca, or ours by a CA it trusts; set [https.client] ca in cluster.security_toml to the CA that issued it"
            ),
            (TlsUse::VolumeHttps, TlsFailure::NameMismatch(d)) => format!(
                "HTTPS with volume server {addr}: its certificate ([https.volume] cert) does not name the host of its address ({d})"
            ),
            (_, TlsFailure::Other(d)) => format!("TLS with {addr} failed: {d}"),
        }
    }

    /// Classifies a rustls error: our verifier's verdict on the server's
    /// chain, or an alert by which the server refused ours.
    pub fn from_rustls(e: &rustls::Error) -> TlsFailure {
        use rustls::Error as E;
        let d = e.to_string();
        match e {
            E::InvalidCertificate(c) => match c {
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => TlsFailure::Expired(d),
                CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                    TlsFailure::UnknownCa(d)
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => TlsFailure::NameMismatch(d),
                _ => TlsFailure::Other(d),
            },
            E::AlertReceived(a) => match a {
                AlertDescription::CertificateRequired
                | AlertDescription::BadCertificate
                | AlertDescription::HandshakeFailure => TlsFailure::ClientCertificate(d),
                AlertDescription::UnknownCA => TlsFailure::UnknownCa(d),
                AlertDescription::CertificateExpired => TlsFailure::Expired(d),
                _ => TlsFailure::Other(d),
            },
            E::NoCertificatesPresented => TlsFailure::ClientCertificate(d),
            _ => TlsFailure::Other(d),
        }
    }

    /// Finds a rustls error in an I/O error (tokio-rustls wraps them).
    pub fn from_io(e: &io::Error) -> Option<TlsFailure> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(TlsFailure::from_rustls)
    }
}

/// What a [`ClientTls`](crate::seaweed::tls::ClientTls)'s connections are for: it decides the protocol
/// offered through ALPN and which settings the messages name, so an operator
/// is told to fix the file that configures this connection, not another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsUse {
    /// SeaweedFS's gRPC servers: HTTP/2; the material comes from `tls.*` or
    /// `[grpc]` / `[grpc.client]` of `cluster.security_toml`.
    Grpc,
    /// `weed admin`'s HTTPS API: HTTP/1.1, as a Go `net/http` server would
    /// pick HTTP/2 if it were offered (docs/plugin-worker.md#admin-https);
    /// the material comes from `[https.client]` of `cluster.security_toml`.
    AdminHttps,
    /// The volume servers' HTTPS port (`[https.volume]` on them), which the
    /// direct log-file reads fetch from (docs/meta-log.md#https-volume-servers):
    /// HTTP/1.1, material from `[https.client]`, as weed's own HTTP clients.
    VolumeHttps,
}

impl TlsUse {
    pub(crate) fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            TlsUse::Grpc => vec![b"h2".to_vec()],
            TlsUse::AdminHttps | TlsUse::VolumeHttps => vec![b"http/1.1".to_vec()],
        }
    }

    /// The settings naming the CA bundle, our certificate and its key.
    pub(crate) fn keys(self) -> (&'static str, &'static str, &'static str) {
        match self {
            TlsUse::Grpc => ("tls.ca", "tls.cert", "tls.key"),
            TlsUse::AdminHttps | TlsUse::VolumeHttps => (
                "[https.client] ca",
                "[https.client] cert",
                "[https.client] key",
            ),
        }
    }
}
