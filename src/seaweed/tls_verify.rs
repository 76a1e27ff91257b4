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
        use crate::seaweed::x509;
        if x509::webpki_refuses_as_leaf(end_entity) {
            // webpki refuses v1 and a CA as the leaf; weed accepts both
            // (docs/tls.md#v1-certificates, docs/tls.md#ca-as-leaf).
            let algs = &self.provider.signature_verification_algorithms;
            x509::verify_chain(
                end_entity,
                intermediates,
                &self.anchors,
                now,
                algs,
                x509::Usage::Server,
            )?;
        } else {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                &self.roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        if self.check_name {
            // A v1 certificate has no subjectAltName to check a name against.
            if x509::is_v1(end_entity) {
                return Err(CertificateError::NotValidForName.into());
            }
            verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;

    /// Runs `script` (openssl recipes) in a fresh folder and returns it.
    fn certs(script: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tls-verify-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(&dir)
            .output()
            .expect("sh and openssl on PATH");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    }

    fn der(dir: &std::path::Path, name: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(dir.join(name)).unwrap()
    }

    fn verifier(ca: CertificateDer<'static>, check_name: bool) -> ChainVerifier {
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        ChainVerifier {
            roots: Arc::new(roots),
            anchors: Arc::new(vec![ca]),
            check_name,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        }
    }

    fn verify(
        v: &ChainVerifier,
        leaf: &CertificateDer<'_>,
        name: &str,
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_string()).unwrap();
        v.verify_server_cert(leaf, &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    /// `openssl req -x509` makes a CA (basicConstraints `CA:TRUE`), and quick set-ups use it as
    /// every server's certificate and as the CA file, or issue CAs with `req -x509 -CA`; weed
    /// takes them as leaves and webpki refused them (`CaUsedAsEndEntity`). They are checked as
    /// strictly as any other leaf: by the CA file, by the purpose, and by the name when asked.
    #[test]
    fn ca_certificates_as_leaves_were_refused_although_weed_accepts_them() {
        let dir = certs(
            "set -e
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ca
            openssl req -x509 -newkey rsa:2048 -nodes -keyout o.key -out other.crt -days 2 -subj /CN=ca
            issue() { openssl req -x509 -CA ca.crt -CAkey ca.key -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
              -nodes -keyout $1.key -out $1.crt -days 2 -subj /CN=$1 $2 $3; }
            issue issued
            issue named -addext subjectAltName=DNS:filer.example
            issue client_only -addext extendedKeyUsage=clientAuth
            issue any -addext extendedKeyUsage=anyExtendedKeyUsage",
        );
        let ca = der(&dir, "ca.crt");
        let v = verifier(ca.clone(), false);
        assert_eq!(
            verify(&v, &ca, "127.0.0.1"),
            Ok(()),
            "the CA's own certificate"
        );
        assert_eq!(verify(&v, &der(&dir, "issued.crt"), "x"), Ok(()));
        assert_eq!(verify(&v, &der(&dir, "any.crt"), "x"), Ok(()));
        assert_eq!(
            verify(&v, &der(&dir, "client_only.crt"), "x"),
            Err(CertificateError::InvalidPurpose.into()),
            "a certificate for clients only is no server's"
        );
        assert_eq!(
            verify(&v, &der(&dir, "other.crt"), "x"),
            Err(CertificateError::BadSignature.into()),
            "a CA the CA file does not hold, with the same name (classified as an unknown CA)"
        );
        let named = verifier(ca, true);
        let leaf = der(&dir, "named.crt");
        assert_eq!(verify(&named, &leaf, "filer.example"), Ok(()));
        assert!(matches!(
            verify(&named, &leaf, "s3.example"),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForNameContext { .. }
            ))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
