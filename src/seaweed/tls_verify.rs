//! The rustls hooks of our client TLS: the server verifier that checks the
//! chain against the CA and a name only when asked (docs/tls.md#what-a-client-needs),
//! with X.509 v1 chains handed to [`crate::seaweed::x509`], and the resolver
//! that offers our own certificate.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// Our client certificate, offered whatever the server asks (SeaweedFS's
/// servers name no acceptable CAs). rustls's built-in resolver would check
/// the key pair by parsing the certificate with webpki, which refuses X.509
/// v1; [`load`] checks the pair itself.
#[derive(Debug)]
pub(crate) struct OwnCertificate(pub(crate) Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for OwnCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        // Offered only when the key can sign with a scheme the server takes,
        // as rustls's own resolver does.
        self.0.key.choose_scheme(sigschemes).map(|_| self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Verifies the server's chain against the CA; checks the name only when
/// the operator set `tls.server_name` (docs/tls.md#what-a-client-needs).
#[derive(Debug)]
pub(crate) struct ChainVerifier {
    pub(crate) roots: Arc<RootCertStore>,
    pub(crate) anchors: Arc<Vec<CertificateDer<'static>>>,
    pub(crate) check_name: bool,
    pub(crate) provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if crate::seaweed::x509::is_v1(end_entity) {
            // webpki refuses v1; weed accepts it (docs/tls.md#v1-certificates).
            crate::seaweed::x509::verify_chain(
                end_entity,
                intermediates,
                &self.anchors,
                now,
                &self.provider.signature_verification_algorithms,
            )?;
            // A v1 certificate has no subjectAltName to check a name against.
            if self.check_name {
                return Err(CertificateError::NotValidForName.into());
            }
            return Ok(ServerCertVerified::assertion());
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.check_name {
            verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        crate::seaweed::x509::verify_handshake_signature(message, cert, dss, algs, false)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        crate::seaweed::x509::verify_handshake_signature(message, cert, dss, algs, true)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
