//! The key sizes and curves weed accepts and *ring* does not (docs/tls.md#key-sizes-and-curves):
//! RSA keys of 1024 to 2047 bits (what `openssl genrsa` made by default before OpenSSL 1.1.0)
//! and ECDSA on P-521. Here live the signing keys for such a client key and the signature
//! checks for such a server chain; everything else stays with *ring*.

use std::sync::{Arc, OnceLock};

use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::der::oid::AssociatedOid;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey};
use rsa::signature::hazmat::PrehashVerifier;
use rsa::signature::{SignatureEncoding, Signer as _, Verifier};
use rsa::traits::PublicKeyParts;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::sign::{Signer, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};
use rustls_pki_types::{
    AlgorithmIdentifier, InvalidSignature, PrivateKeyDer, SignatureVerificationAlgorithm,
    SubjectPublicKeyInfoDer, alg_id,
};
use sha2::digest::FixedOutputReset;
use sha2::{Digest, Sha256, Sha384, Sha512};

/// *ring* signs and verifies RSA from 2048 bits up; Go, and so weed, from 1024.
const RING_MIN_RSA_BYTES: usize = 256;
const GO_MIN_RSA_BYTES: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    fn len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Padding {
    Pkcs1,
    Pss,
}

/// A client key *ring* refused but weed takes: `None` when it is neither an RSA key of 1024 to
/// 2047 bits nor a P-521 key, so the caller reports *ring*'s own refusal.
pub(crate) fn signing_key(der: &PrivateKeyDer<'_>) -> Option<Arc<dyn SigningKey>> {
    let rsa = match der {
        PrivateKeyDer::Pkcs1(k) => rsa::PrivateKey::from_pkcs1_der(k.secret_pkcs1_der()).ok(),
        PrivateKeyDer::Pkcs8(k) => rsa::PrivateKey::from_pkcs8_der(k.secret_pkcs8_der()).ok(),
        _ => None,
    };
    if let Some(key) = rsa {
        let size = key.size();
        let spki = key.to_public_key().to_public_key_der().ok()?.into_vec();
        return (GO_MIN_RSA_BYTES..RING_MIN_RSA_BYTES)
            .contains(&size)
            .then(|| Arc::new(SmallRsa { key, spki }) as Arc<dyn SigningKey>);
    }
    let ec = match der {
        PrivateKeyDer::Sec1(k) => p521::SecretKey::from_sec1_der(k.secret_sec1_der()).ok(),
        PrivateKeyDer::Pkcs8(k) => p521::SecretKey::from_pkcs8_der(k.secret_pkcs8_der()).ok(),
        _ => None,
    }?;
    let key = p521::ecdsa::SigningKey::from(&ec);
    let spki = ec.public_key().to_public_key_der().ok()?.into_vec();
    Some(Arc::new(P521 { key, spki }))
}

/// An RSA client key below *ring*'s 2048 bits.
struct SmallRsa {
    key: rsa::PrivateKey,
    spki: Vec<u8>,
}

impl std::fmt::Debug for SmallRsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SmallRsa({} bits)", self.key.size() * 8)
    }
}

/// The schemes an RSA key offers, most preferred first (as *ring*'s RSA key does).
const RSA_SCHEMES: [(SignatureScheme, Padding, Hash); 6] = [
    (SignatureScheme::RSA_PSS_SHA512, Padding::Pss, Hash::Sha512),
    (SignatureScheme::RSA_PSS_SHA384, Padding::Pss, Hash::Sha384),
    (SignatureScheme::RSA_PSS_SHA256, Padding::Pss, Hash::Sha256),
    (
        SignatureScheme::RSA_PKCS1_SHA512,
        Padding::Pkcs1,
        Hash::Sha512,
    ),
    (
        SignatureScheme::RSA_PKCS1_SHA384,
        Padding::Pkcs1,
        Hash::Sha384,
    ),
    (
        SignatureScheme::RSA_PKCS1_SHA256,
        Padding::Pkcs1,
        Hash::Sha256,
    ),
];

impl SigningKey for SmallRsa {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        // TLS's PSS salt is as long as the hash: a 1024-bit key has no room for SHA-512's
        // (RFC 8017 9.1.1: the encoding needs 2 * hash + 2 bytes), so that scheme is skipped.
        let fits = |p: Padding, h: Hash| p == Padding::Pkcs1 || 2 * h.len() + 2 <= self.key.size();
        RSA_SCHEMES
            .iter()
            .find(|(s, p, h)| offered.contains(s) && fits(*p, *h))
            .map(|&(scheme, padding, hash)| {
                let key = self.key.clone();
                Box::new(RsaSigner {
                    key,
                    scheme,
                    padding,
                    hash,
                }) as Box<dyn Signer>
            })
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        Some(SubjectPublicKeyInfoDer::from(self.spki.as_slice()))
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::RSA
    }
}

struct RsaSigner {
    key: rsa::PrivateKey,
    scheme: SignatureScheme,
    padding: Padding,
    hash: Hash,
}

impl std::fmt::Debug for RsaSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RsaSigner({:?})", self.scheme)
    }
}

impl Signer for RsaSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        let (p, k, m) = (self.padding, self.key.clone(), message);
        match self.hash {
            Hash::Sha256 => rsa_sign::<Sha256>(p, k, m),
            Hash::Sha384 => rsa_sign::<Sha384>(p, k, m),
            Hash::Sha512 => rsa_sign::<Sha512>(p, k, m),
        }
    }

    fn scheme(&self) -> SignatureScheme {
        self.scheme
    }
}

/// `message` signed with `padding` and hash `D` by `key`.
fn rsa_sign<D: Digest + AssociatedOid + FixedOutputReset>(
    padding: Padding,
    key: rsa::PrivateKey,
    message: &[u8],
) -> Result<Vec<u8>, rustls::Error> {
    use rsa::{pkcs1v15, pss};
    match padding {
        Padding::Pss => sign_as(pss::SigningKey::<D>::new(key), message),
        Padding::Pkcs1 => sign_as(pkcs1v15::SigningKey::<D>::new(key), message),
    }
}

/// `signature` of `message` with `padding` and hash `D` checked by `key`.
fn rsa_check<D: Digest + AssociatedOid + FixedOutputReset>(
    padding: Padding,
    key: rsa::PublicKey,
    message: &[u8],
    signature: &[u8],
) -> Result<(), InvalidSignature> {
    use rsa::{pkcs1v15, pss};
    match padding {
        Padding::Pss => {
            check_as::<pss::Signature>(pss::VerifyingKey::<D>::new(key), message, signature)
        }
        Padding::Pkcs1 => check_as::<pkcs1v15::Signature>(
            pkcs1v15::VerifyingKey::<D>::new(key),
            message,
            signature,
        ),
    }
}

/// `message` signed by `key`, in the bytes TLS carries.
fn sign_as<S: SignatureEncoding>(
    key: impl rsa::signature::Signer<S>,
    message: &[u8],
) -> Result<Vec<u8>, rustls::Error> {
    let signed = key.try_sign(message);
    signed
        .map(|s| s.to_vec())
        .map_err(|e| rustls::Error::General(format!("RSA signing failed: {e}")))
}

/// `signature` of `message` checked by `key`.
fn check_as<S>(
    key: impl Verifier<S>,
    message: &[u8],
    signature: &[u8],
) -> Result<(), InvalidSignature>
where
    for<'a> S: TryFrom<&'a [u8]>,
{
    let sig = S::try_from(signature).map_err(|_| InvalidSignature)?;
    key.verify(message, &sig).map_err(|_| InvalidSignature)
}

/// A P-521 client key.
struct P521 {
    key: p521::ecdsa::SigningKey,
    spki: Vec<u8>,
}

impl std::fmt::Debug for P521 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("P521")
    }
}

impl SigningKey for P521 {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        let scheme = SignatureScheme::ECDSA_NISTP521_SHA512;
        offered
            .contains(&scheme)
            .then(|| Box::new(P521Signer(self.key.clone())) as Box<dyn Signer>)
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        Some(SubjectPublicKeyInfoDer::from(self.spki.as_slice()))
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::ECDSA
    }
}

struct P521Signer(p521::ecdsa::SigningKey);

impl std::fmt::Debug for P521Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("P521Signer")
    }
}

impl Signer for P521Signer {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        // TLS carries ECDSA signatures DER-encoded; P-521's scheme hashes with SHA-512.
        let sig: p521::ecdsa::Signature = self
            .0
            .try_sign(message)
            .map_err(|e| rustls::Error::General(format!("P-521 signing failed: {e}")))?;
        Ok(sig.to_der().to_vec())
    }

    fn scheme(&self) -> SignatureScheme {
        SignatureScheme::ECDSA_NISTP521_SHA512
    }
}

/// *ring*'s signature checks with the RSA ones widened to 1024-bit keys and P-521 added, for
/// the server's chain and its handshake signature.
pub(crate) fn algorithms() -> WebPkiSupportedAlgorithms {
    static ALGS: OnceLock<WebPkiSupportedAlgorithms> = OnceLock::new();
    *ALGS.get_or_init(|| {
        let ring = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        let widen = |a: &'static dyn SignatureVerificationAlgorithm| match rsa_kind(a) {
            Some((padding, hash)) => leak(SmallRsaCheck {
                ring: a,
                padding,
                hash,
            }),
            None => a,
        };
        let p521 = [Hash::Sha256, Hash::Sha384, Hash::Sha512].map(|hash| leak(P521Check { hash }));
        let all: Vec<_> = ring.all.iter().map(|a| widen(*a)).chain(p521).collect();
        let mut mapping: Vec<_> = ring
            .mapping
            .iter()
            .map(|(scheme, algs)| {
                let mut algs: Vec<_> = algs.iter().map(|a| widen(*a)).collect();
                // In TLS 1.2 an ECDSA scheme names the hash, not the curve.
                match *scheme {
                    SignatureScheme::ECDSA_NISTP256_SHA256 => algs.push(p521[0]),
                    SignatureScheme::ECDSA_NISTP384_SHA384 => algs.push(p521[1]),
                    _ => {}
                }
                (*scheme, &*Vec::leak(algs))
            })
            .collect();
        // TLS 1.3 ties this scheme to P-521 with SHA-512.
        let p521_sha512: &'static [&'static dyn SignatureVerificationAlgorithm] =
            Vec::leak(vec![p521[2]]);
        mapping.push((SignatureScheme::ECDSA_NISTP521_SHA512, p521_sha512));
        WebPkiSupportedAlgorithms {
            all: Vec::leak(all),
            mapping: Vec::leak(mapping),
        }
    })
}

fn leak<T: SignatureVerificationAlgorithm + 'static>(
    a: T,
) -> &'static dyn SignatureVerificationAlgorithm {
    Box::leak(Box::new(a))
}

/// The padding and hash of one of *ring*'s RSA checks; `None` for every other kind.
fn rsa_kind(a: &dyn SignatureVerificationAlgorithm) -> Option<(Padding, Hash)> {
    if a.public_key_alg_id() != alg_id::RSA_ENCRYPTION {
        return None;
    }
    let sig = a.signature_alg_id();
    let pss = [
        (alg_id::RSA_PSS_SHA256, Hash::Sha256),
        (alg_id::RSA_PSS_SHA384, Hash::Sha384),
        (alg_id::RSA_PSS_SHA512, Hash::Sha512),
    ];
    if let Some((_, h)) = pss.iter().find(|(id, _)| *id == sig) {
        return Some((Padding::Pss, *h));
    }
    // sha{256,384,512}WithRSAEncryption (1.2.840.113549.1.1.{11,12,13}), with or without the
    // NULL parameters.
    const OID: [u8; 8] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    let bytes = sig.as_ref();
    let at = bytes.windows(OID.len()).position(|w| w == OID)?;
    match bytes.get(at + OID.len())? {
        0x0b => Some((Padding::Pkcs1, Hash::Sha256)),
        0x0c => Some((Padding::Pkcs1, Hash::Sha384)),
        0x0d => Some((Padding::Pkcs1, Hash::Sha512)),
        _ => None,
    }
}

/// One of *ring*'s RSA checks, with keys of 1024 to 2047 bits checked here instead.
#[derive(Debug)]
struct SmallRsaCheck {
    ring: &'static dyn SignatureVerificationAlgorithm,
    padding: Padding,
    hash: Hash,
}

impl SignatureVerificationAlgorithm for SmallRsaCheck {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        // Anything but a small key, including one `rsa` cannot read, is
        // *ring*'s, exactly as before.
        let small = rsa::PublicKey::from_pkcs1_der(public_key)
            .ok()
            .filter(|k| (GO_MIN_RSA_BYTES..RING_MIN_RSA_BYTES).contains(&k.size()));
        let Some(key) = small else {
            return self.ring.verify_signature(public_key, message, signature);
        };
        let (p, k, m, sig) = (self.padding, key, message, signature);
        match self.hash {
            Hash::Sha256 => rsa_check::<Sha256>(p, k, m, sig),
            Hash::Sha384 => rsa_check::<Sha384>(p, k, m, sig),
            Hash::Sha512 => rsa_check::<Sha512>(p, k, m, sig),
        }
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        self.ring.public_key_alg_id()
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.ring.signature_alg_id()
    }
}

/// ECDSA on P-521 with one hash (`openssl x509 -req` signs with SHA-256 whatever the curve).
#[derive(Debug)]
struct P521Check {
    hash: Hash,
}

impl SignatureVerificationAlgorithm for P521Check {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        let key =
            p521::ecdsa::VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
        let sig = p521::ecdsa::Signature::from_der(signature).map_err(|_| InvalidSignature)?;
        let ok = match self.hash {
            Hash::Sha256 => key.verify_prehash(&Sha256::digest(message), &sig),
            Hash::Sha384 => key.verify_prehash(&Sha384::digest(message), &sig),
            Hash::Sha512 => key.verify_prehash(&Sha512::digest(message), &sig),
        };
        ok.map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_P521
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        match self.hash {
            Hash::Sha256 => alg_id::ECDSA_SHA256,
            Hash::Sha384 => alg_id::ECDSA_SHA384,
            Hash::Sha512 => alg_id::ECDSA_SHA512,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;

    /// `openssl genrsa -traditional 1024` (a test key, nothing else).
    const RSA_1024: &str = "\
-----BEGIN RSA PRIVATE KEY-----\n\
MIICXQIBAAKBgQDVaJHP4ojjMD9xuRTP1Pvd84zWBupJ2AxcUvyZdvwwTpn/vitU\n\
lF7ovFLJGdf8oNA8TyTvEH95dQ8XuI0cG5ODo/yhfPHyC/1YRHKbL81cDyiEsyXC\n\
SdJVYuQzOT8Z9x+yVecIsrdpif0zUOhNbJrt4wW7Mgd8TjYy+1OMpHmWAwIDAQAB\n\
AoGAJwey80RJKNPgJppk9gXL8rHiZhppqwu6ZwA+dorOYL9fZuiO4C8qlIIs2d7C\n\
I8/9haor5RUtWzdPhVUZabSZa7pUlqFKcWPQ+AD+DegcE5rCS9yiN0+2cgrmXTVT\n\
D77YDteqdKPQwxFg/x8/oYvAE7WnFvcCwvKrqmsRoG4DeOECQQD6es0eQG6MACuj\n\
ayAXyludXgaKGw3d1gAT142e3y3Pbezyj1m1B6YVbq07gvg2K95pMuLdJCPRfnaY\n\
MtpmQd3ZAkEA2hydGOoZNzwvXRvWYB4XEP9c0lNd4TR3y4RAM2EjbqaWBXd1RnIP\n\
30LctRjElnf0/1acvWvTZQonzbRVz+z9OwJBANtsJjIBGZZVM+U1m+ibYYRK8Qmc\n\
x5n0tR6srqhlNBlJX8/hGiHG8IxH50OB6PRzm6Omayx0U1hbI4MS0VXRD4kCQESq\n\
LWrih/2znNWbJeosjuZy/i3YwP1dHzma8Ps74YO8Pg6KhQkgb47B5em9WmZkbWTV\n\
R5L6lxqAD/fahglnenECQQDaVKqfzAMf20Lk+rKPyq0CoL0i9lephb2cOOqDaEyS\n\
ZpmbMXKJ3Ui/7B/eZAWIhqOwcdjosi+IZUZVwD6zwHri\n\
-----END RSA PRIVATE KEY-----\n\
";
    /// `openssl ecparam -name secp521r1 -genkey -noout` (a test key, nothing else).
    const P521_SEC1: &str = "\
-----BEGIN EC PRIVATE KEY-----\n\
MIHcAgEBBEIBPp2TR01RUUg6AzaI6kgdsVmBocVYmSuwXAICllhBbwu36az6NH91\n\
On9yMlRHkr0pJrdubgwJwHAgzMk4i6W0smugBwYFK4EEACOhgYkDgYYABABn0u/E\n\
NxTWepqHkIbYceZ68sSR2L0u29KylFhb1cULN3FJHbwPffjRDvc9r+pY7mspeWBi\n\
1LdE0VY1J2yYcUoLHQCr6OFNnYr4/KtVA/CtOdaXvz5XmzQFoXJTcZoUJ7n/XCZq\n\
g9hSyjc9sfdzDOOKUKUcmVQoMsbvx2jsIA7TQW0XxQ==\n\
-----END EC PRIVATE KEY-----\n\
";

    /// Signs with every scheme the key offers and checks the signature the way a server
    /// certificate's handshake signature is checked: what one half makes, the other accepts.
    fn round_trip(pem: &str, offered: &[SignatureScheme]) -> Vec<SignatureScheme> {
        let der = PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert!(
            rustls::crypto::ring::default_provider()
                .key_provider
                .load_private_key(der.clone_key())
                .is_err(),
            "ring alone takes this key: the test proves nothing"
        );
        let key = signing_key(&der).expect("a key weed takes");
        let spki = key.public_key().unwrap();
        let algs = algorithms();
        let mut used = Vec::new();
        for s in offered {
            let Some(signer) = key.choose_scheme(&[*s]) else {
                continue;
            };
            let sig = signer.sign(b"handshake").unwrap();
            let check = algs.mapping.iter().find(|(m, _)| m == s).unwrap().1[0];
            let public = spki_key_bits(spki.as_ref());
            check.verify_signature(public, b"handshake", &sig).unwrap();
            assert!(check.verify_signature(public, b"tampered", &sig).is_err());
            used.push(*s);
        }
        used
    }

    /// The subjectPublicKey bits of a SubjectPublicKeyInfo (what webpki hands a check).
    fn spki_key_bits(spki: &[u8]) -> &[u8] {
        let info = rsa::pkcs8::spki::SubjectPublicKeyInfoRef::try_from(spki).unwrap();
        info.subject_public_key.raw_bytes()
    }

    #[test]
    fn rsa_1024_client_key_was_refused_although_weed_accepts_it() {
        let all = RSA_SCHEMES.map(|(s, _, _)| s);
        let used = round_trip(RSA_1024, &all);
        // No room for SHA-512's salt in PSS with a 1024-bit key; everything else works.
        assert!(!used.contains(&SignatureScheme::RSA_PSS_SHA512));
        assert_eq!(used.len(), 5, "{used:?}");
    }

    #[test]
    fn p521_client_key_was_refused_although_weed_accepts_it() {
        let used = round_trip(P521_SEC1, &[SignatureScheme::ECDSA_NISTP521_SHA512]);
        assert_eq!(used, [SignatureScheme::ECDSA_NISTP521_SHA512]);
    }

    #[test]
    fn every_ring_rsa_check_is_widened_and_nothing_else_changes() {
        let ring = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        let ours = algorithms();
        let rsa = ring.all.iter().filter(|a| rsa_kind(**a).is_some()).count();
        // PSS and PKCS#1 at three hashes, PKCS#1 also without NULL parameters.
        assert_eq!(rsa, 9);
        assert_eq!(ours.all.len(), ring.all.len() + 3);
        assert!(
            ours.supported_schemes()
                .contains(&SignatureScheme::ECDSA_NISTP521_SHA512)
        );
        assert_eq!(
            ring.supported_schemes().len() + 1,
            ours.supported_schemes().len()
        );
    }

    /// `openssl genrsa 2048` (PKCS#8; a test key, nothing else).
    const RSA_2048: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCMNShKWsnK4qyz\n\
yVEkZRHD6xwIA3Z1BLrAsEmbOZTtPJb+C4zeL2j/MlI15uwwOOAGEOH3UGcxhM+Y\n\
XvXw0VE+sx4fjHqLXlrHYyyQbEQ0W4r+RDvhSAZSxaxt7H48OjoFkndICsnTJt1E\n\
/L6Ot0LZmE8LFgbMFcAyQ4G3GMiNLJFgdZ1TVw7dXByQSfo2nW8X0ZaqTh0JuOSg\n\
hkaPXb3AymTK6wJmhUrPrAl9ugvzqNIrTaK4zmC3GSMh3XNmQE2qVE+AJYbFp6MG\n\
XIg7ieaQopnBurynyV8CF7H3LBGQyPRCwkav7yvzjRjlUxwg6j+XTbzbw9+j5cuh\n\
IyxsJ8jPAgMBAAECggEAP6QLT0DJcr2UHaFGIwp7V14bIaoMtU35xOff6UToTAzi\n\
DptIjDuh4aBCP7Q7RiIy0Z4NK3iD9q6tmiCUawRf5+FezXwyzZr9Ap8KBd4W0Vsy\n\
CnsHYRkTwbN3MogTvpvBZXEXkoxPEviDnEJK7rXRcrpXOpV7bVx8GnSY5vapZaaG\n\
qBShbkemhjCSCWH1b7e8n/yBsceJc+5Nr1CwvJBtM4O972BCZrxlEBE1wq3P8oDz\n\
0sUAgEdRmuTozw9wopDW/1L0nfED3uBFhJ7MseT0uoJpcUuCju3mpKesq6M2Aq0f\n\
4TKL+dIdy+TD2CkJNwb2KZejUsD3SjH6n6xtBRP8fQKBgQDBp7JDz7t4LUqn9T4V\n\
bDksQyAtrhh9n/jzVpn7VZX7QzFunlwq+eDqgE6/F9rStYZobLoIWfyuZSPSf/hS\n\
cHOeldT9rx4c77OgGGcTkwBWKu4k5pxKuX3pSv27lb9r0hjygKWLb4o1PdY/AXQY\n\
/oVffI/kFoib5omqXS3B/IGnowKBgQC5WIfsJgPblj7q9PNwDC1LB7uQN2b4cKQK\n\
qW5OFKQGvB5u4/H112yXUGhdCOCgEOP2Z1zqVBSnm8LcpxulA/yCiQP4KIJ9iiKZ\n\
g55y3d7LY93KVdDncFQGt7SUU/3oPQB1FwakrOqmIkrsl1HQcQlLp5BRlVnQkCN5\n\
ttYqpD0c5QKBgFGiitBxQpsPpLgW9vv66kMRbQA0sthKVpzl9fVwh9Aq7CywjzQC\n\
sGDKg+eke7d1lFpy8x1QKeeudSJoldrS0rqYePgUGUKjfXpQrysePfcVE9z0ZhBO\n\
D5kH5txr7QzbvW6E8sRL2dxF3AolZ7adnMW68cF6Ck6GKaRqsT5kXpe3AoGADJRV\n\
pVFvMZgg7RFy9EffSxhbQo6ADpyWhaK6OdJsz4g1CJGv+l+En0B11NqlZDfBQRgC\n\
1mSegkGwGAm/dpOur61c95rIQHz/nCuytVkZpfRBOVpZs1uMWGhfeTG6Kej5/vhx\n\
GvwhcOUi8KvUgbEqUFgvE1pvnhgqUDh4kKxU+YECgYEAqTLTag/WssAq1RS8auZP\n\
IQAao93/JoKXgymAzzAAfUTsgjuQrlaUw6Uc7YVsZV98J+G/GEEbf2W1ZYwkqriW\n\
Rc9GtEYRHnDAyTEz88DEP1fEcnxxOOlfjHHY6ybhJWyWhEJDebwr13mTCmAsqMFe\n\
q8bE4X1Com5FjQStXHEzUkM=\n\
-----END PRIVATE KEY-----\n\
";

    #[test]
    fn a_2048_bit_key_is_still_signed_and_checked_by_ring() {
        let der = PrivateKeyDer::from_pem_slice(RSA_2048.as_bytes()).unwrap();
        assert!(signing_key(&der).is_none(), "ring's key");
        let key = rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(der)
            .unwrap();
        let spki = key.public_key().unwrap();
        for s in [
            SignatureScheme::RSA_PSS_SHA256,
            SignatureScheme::RSA_PKCS1_SHA256,
        ] {
            let sig = key.choose_scheme(&[s]).unwrap().sign(b"handshake").unwrap();
            let check = algorithms()
                .mapping
                .iter()
                .find(|(m, _)| *m == s)
                .unwrap()
                .1[0];
            let public = spki_key_bits(spki.as_ref());
            check.verify_signature(public, b"handshake", &sig).unwrap();
            assert!(check.verify_signature(public, b"tampered", &sig).is_err());
        }
    }

    #[test]
    fn other_key_kinds_are_left_to_ring() {
        let ed = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKq7nS1mTqBLpM0lwYcZpNPU3CZ4NBE3YQYQY0Gzb7wR\n-----END PRIVATE KEY-----\n";
        let der = PrivateKeyDer::from_pem_slice(ed.as_bytes()).unwrap();
        assert!(signing_key(&der).is_none(), "Ed25519 is ring's");
    }
}
