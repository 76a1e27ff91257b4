//! The certificate checks webpki does not do for us, for the forms weed (Go's
//! crypto/x509) accepts and webpki refuses: X.509 **version 1** certificates
//! (docs/tls.md#v1-certificates), which `openssl x509 -req` without `-extfile`
//! makes, and a **CA certificate as the leaf** (docs/tls.md#ca-as-leaf), which
//! `openssl req -x509` makes and quick set-ups use as every role's certificate
//! and as the CA at once. Such a leaf is verified here instead, as strictly:
//! every signature up to a certificate of the CA file, each certificate inside
//! its validity, every intermediate a CA (basicConstraints `cA`), the leaf's
//! extendedKeyUsage allowing the role, the handshake signed by the leaf's key.
//! The signature algorithms are the crypto provider's own, the ones webpki uses.
//!
//! Only what these checks need is read from the DER: the signed part, the
//! signature and its algorithm, issuer, subject, validity, the public key,
//! basicConstraints and extendedKeyUsage. A certificate that does not parse is
//! refused.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{CertificateError, DigitallySignedStruct, Error, OtherError};
use rustls_pki_types::{CertificateDer, UnixTime};

/// One DER element read off the front of some input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Element<'a> {
    tag: u8,
    contents: &'a [u8],
    /// The element with its tag and length.
    whole: &'a [u8],
    /// What follows it.
    rest: &'a [u8],
}

/// The first DER element of `input`.
fn tlv(input: &[u8]) -> Option<Element<'_>> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    Some(Element {
        tag,
        contents: &rest[..len],
        whole: &input[..header + len],
        rest: &rest[len..],
    })
}

/// The element of `input` with `tag`: `(contents, whole, rest)`.
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8], &[u8])> {
    let e = tlv(input)?;
    (e.tag == tag).then_some((e.contents, e.whole, e.rest))
}

const SEQUENCE: u8 = 0x30;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const BOOLEAN: u8 = 0x01;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version` of the TBSCertificate.
const VERSION: u8 = 0xa0;
/// `[3] EXPLICIT Extensions`.
const EXTENSIONS: u8 = 0xa3;
/// 2.5.29.19, basicConstraints.
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
/// 2.5.29.37, extendedKeyUsage.
const EXTENDED_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
/// 2.5.29.37.0, anyExtendedKeyUsage.
const ANY_USAGE: &[u8] = &[0x55, 0x1d, 0x25, 0x00];

/// What the leaf of a chain is checked for: the extendedKeyUsage purpose
/// (1.3.6.1.5.5.7.3.1 serverAuth, .2 clientAuth), as Go checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

impl Usage {
    fn oid(self) -> &'static [u8] {
        match self {
            Usage::Server => &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01],
            Usage::Client => &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02],
        }
    }
}

/// The contents of a BIT STRING with no unused bits.
fn bits(contents: &[u8]) -> Option<&[u8]> {
    let (&unused, rest) = contents.split_first()?;
    (unused == 0).then_some(rest)
}

/// A public key: its algorithm identifier's contents and the key bits.
#[derive(Debug, Clone, Copy)]
struct PublicKey<'a> {
    alg: &'a [u8],
    key: &'a [u8],
}

fn public_key(spki: &[u8]) -> Option<PublicKey<'_>> {
    let (contents, _, _) = expect(spki, SEQUENCE)?;
    let (alg, _, rest) = expect(contents, SEQUENCE)?;
    let (key, _, _) = expect(rest, BIT_STRING)?;
    Some(PublicKey {
        alg,
        key: bits(key)?,
    })
}

/// What the checks read of one certificate.
#[derive(Debug, Clone)]
struct Cert<'a> {
    /// 1 for v1, 3 for v3.
    version: u8,
    /// The signed part, whole.
    tbs: &'a [u8],
    /// The signature algorithm identifier's contents.
    sig_alg: &'a [u8],
    signature: &'a [u8],
    issuer: &'a [u8],
    subject: &'a [u8],
    not_before: i64,
    not_after: i64,
    /// The whole SubjectPublicKeyInfo.
    spki: &'a [u8],
    /// basicConstraints `cA` (false when absent, as in every v1 certificate).
    ca: bool,
    /// extendedKeyUsage's list of purposes (the SEQUENCE's contents), when
    /// present.
    usages: Option<&'a [u8]>,
}

impl<'a> Cert<'a> {
    fn parse(der: &'a [u8]) -> Option<Cert<'a>> {
        let (cert, _, _) = expect(der, SEQUENCE)?;
        let (tbs_contents, tbs, rest) = expect(cert, SEQUENCE)?;
        let (sig_alg, _, rest) = expect(rest, SEQUENCE)?;
        let (sig, _, _) = expect(rest, BIT_STRING)?;
        let mut f = tbs_contents;
        let mut version = 1;
        if let Some((v, _, rest)) = expect(f, VERSION) {
            let (n, _, _) = expect(v, 0x02)?;
            version = n.last().copied()?.checked_add(1)?;
            f = rest;
        }
        let (_serial, _, f) = expect(f, 0x02)?;
        let (_sig, _, f) = expect(f, SEQUENCE)?;
        let (_, issuer, f) = expect(f, SEQUENCE)?;
        let (validity, _, f) = expect(f, SEQUENCE)?;
        let (_, subject, f) = expect(f, SEQUENCE)?;
        let (_, spki, mut f) = expect(f, SEQUENCE)?;
        let nb = tlv(validity)?;
        let na = tlv(nb.rest)?;
        let (mut ca, mut usages) = (false, None);
        while let Some(e) = tlv(f) {
            if e.tag == EXTENSIONS {
                if let Some(bc) = extension(e.contents, BASIC_CONSTRAINTS)? {
                    let (bc, _, _) = expect(bc, SEQUENCE)?;
                    ca = matches!(expect(bc, BOOLEAN), Some((b, _, _)) if b.first().is_some_and(|v| *v != 0));
                }
                if let Some(eku) = extension(e.contents, EXTENDED_KEY_USAGE)? {
                    usages = Some(expect(eku, SEQUENCE)?.0);
                }
            }
            f = e.rest;
        }
        Some(Cert {
            version,
            tbs,
            sig_alg,
            signature: bits(sig)?,
            issuer,
            subject,
            not_before: time(nb.tag, nb.contents)?,
            not_after: time(na.tag, na.contents)?,
            spki,
            ca,
            usages,
        })
    }

    /// Whether extendedKeyUsage allows `usage`: absent, naming it, or
    /// anyExtendedKeyUsage.
    fn allows(&self, usage: Usage) -> bool {
        let Some(mut list) = self.usages else {
            return true;
        };
        while let Some((oid, _, rest)) = expect(list, OID) {
            if oid == usage.oid() || oid == ANY_USAGE {
                return true;
            }
            list = rest;
        }
        false
    }

    fn key(&self) -> Option<PublicKey<'a>> {
        public_key(self.spki)
    }

    fn valid_at(&self, now: UnixTime) -> Result<(), Error> {
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if now < self.not_before {
            Err(CertificateError::NotValidYet.into())
        } else if now > self.not_after {
            Err(CertificateError::Expired.into())
        } else {
            Ok(())
        }
    }

    /// Whether `issuer`'s key made this certificate's signature, by one of
    /// `algs` for that signature and key algorithm.
    fn signed_by(&self, issuer: &Cert<'_>, algs: &WebPkiSupportedAlgorithms) -> bool {
        let Some(key) = issuer.key() else {
            return false;
        };
        algs.all
            .iter()
            .filter(|a| {
                a.signature_alg_id().as_ref() == self.sig_alg
                    && a.public_key_alg_id().as_ref() == key.alg
            })
            .any(|a| {
                a.verify_signature(key.key, self.tbs, self.signature)
                    .is_ok()
            })
    }
}

/// The value (the OCTET STRING's contents) of extension `id` in the contents
/// of `[3] Extensions`: `Some(None)` when it is absent, `None` when the list
/// does not parse.
fn extension<'a>(explicit: &'a [u8], id: &[u8]) -> Option<Option<&'a [u8]>> {
    let (mut list, _, _) = expect(explicit, SEQUENCE)?;
    while let Some((ext, _, rest)) = expect(list, SEQUENCE) {
        list = rest;
        let (oid, _, mut e) = expect(ext, OID)?;
        if oid != id {
            continue;
        }
        if let Some((_, _, after)) = expect(e, BOOLEAN) {
            e = after; // critical
        }
        return Some(Some(expect(e, OCTET_STRING)?.0));
    }
    Some(None)
}

/// Seconds since the Unix epoch of a UTCTime (`YYMMDDHHMMSSZ`, years 1950 to
/// 2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn time(tag: u8, s: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(s).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        UTC_TIME if s.len() == 12 => {
            let yy: i32 = s[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &s[2..])
        }
        GENERALIZED_TIME if s.len() == 14 => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    if !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |i: usize| rest[i..i + 2].parse::<u8>().ok();
    let date =
        time::Date::from_calendar_date(year, time::Month::try_from(n(0)?).ok()?, n(2)?).ok()?;
    let t = time::Time::from_hms(n(4)?, n(6)?, n(8)?).ok()?;
    Some(
        time::PrimitiveDateTime::new(date, t)
            .assume_utc()
            .unix_timestamp(),
    )
}

fn bad_encoding() -> Error {
    CertificateError::BadEncoding.into()
}

/// Whether `der` is an X.509 v1 certificate (one webpki will not parse).
pub fn is_v1(der: &[u8]) -> bool {
    Cert::parse(der).is_some_and(|c| c.version == 1)
}

/// Whether webpki refuses `der` as the leaf of a chain where weed accepts it:
/// X.509 v1 (`UnsupportedCertVersion`) or a CA (`CaUsedAsEndEntity`). Such a
/// leaf goes to [`verify_chain`].
pub fn webpki_refuses_as_leaf(der: &[u8]) -> bool {
    Cert::parse(der).is_some_and(|c| c.version == 1 || c.ca)
}

/// Verifies `leaf` (any version), for `usage`, and `intermediates` up to one
/// of `anchors` (the CA file's certificates) at `now`: the errors are
/// rustls's own (`UnknownIssuer`, `BadSignature`, `Expired`, …), so they are
/// classified like webpki's.
pub fn verify_chain(
    leaf: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'_>],
    now: UnixTime,
    algs: &WebPkiSupportedAlgorithms,
    usage: Usage,
) -> Result<(), Error> {
    let leaf = Cert::parse(leaf).ok_or_else(bad_encoding)?;
    leaf.valid_at(now)?;
    if !leaf.allows(usage) {
        return Err(CertificateError::InvalidPurpose.into());
    }
    let anchors: Vec<Cert<'_>> = anchors.iter().filter_map(|a| Cert::parse(a)).collect();
    let intermediates: Vec<Cert<'_>> = intermediates
        .iter()
        .filter_map(|i| Cert::parse(i))
        .collect();
    let mut child = leaf;
    // As deep as any SeaweedFS deployment goes, and a bound on a loop of
    // certificates that name each other.
    for _ in 0..8 {
        let named = |c: &&Cert<'_>| c.subject == child.issuer;
        if anchors
            .iter()
            .filter(named)
            .any(|a| child.signed_by(a, algs))
        {
            return Ok(());
        }
        let Some(next) = intermediates
            .iter()
            .filter(named)
            .find(|i| child.signed_by(i, algs))
        else {
            let any_named = anchors.iter().chain(&intermediates).any(|c| named(&c));
            return Err(if any_named {
                CertificateError::BadSignature
            } else {
                CertificateError::UnknownIssuer
            }
            .into());
        };
        next.valid_at(now)?;
        if !next.ca {
            return Err(CertificateError::Other(OtherError(std::sync::Arc::new(NotACa))).into());
        }
        child = next.clone();
    }
    Err(CertificateError::UnknownIssuer.into())
}

/// An intermediate certificate without basicConstraints `cA:TRUE`.
#[derive(Debug)]
struct NotACa;

impl std::fmt::Display for NotACa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an intermediate certificate of the chain is not a CA (basicConstraints cA)")
    }
}

impl std::error::Error for NotACa {}

/// Verifies a handshake signature made by the key of `cert`: rustls's own
/// check for v3, ours for v1 (rustls parses the certificate with webpki,
/// which refuses v1).
pub fn verify_handshake_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Result<HandshakeSignatureValid, Error> {
    use rustls::SignatureScheme as S;
    match (is_v1(cert), tls13) {
        (false, true) => return rustls::crypto::verify_tls13_signature(message, cert, dss, algs),
        (false, false) => return rustls::crypto::verify_tls12_signature(message, cert, dss, algs),
        (true, _) => {}
    }
    // RFC 8446 §4.2.3: TLS 1.3 signs with PSS, ECDSA or EdDSA only, as
    // rustls enforces for v3.
    let tls13_scheme = matches!(
        dss.scheme,
        S::ECDSA_NISTP256_SHA256
            | S::ECDSA_NISTP384_SHA384
            | S::ECDSA_NISTP521_SHA512
            | S::ED25519
            | S::ED448
            | S::RSA_PSS_SHA256
            | S::RSA_PSS_SHA384
            | S::RSA_PSS_SHA512
    );
    if tls13 && !tls13_scheme {
        return Err(rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
    }
    let key = Cert::parse(cert)
        .and_then(|c| c.key())
        .ok_or_else(bad_encoding)?;
    let candidates = algs
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, a)| *a)
        .ok_or(rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme)?;
    let ok = candidates
        .iter()
        .filter(|a| a.public_key_alg_id().as_ref() == key.alg)
        .any(|a| {
            a.verify_signature(key.key, message, dss.signature())
                .is_ok()
        });
    if ok {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(CertificateError::BadSignature.into())
    }
}

/// The whole SubjectPublicKeyInfo of `cert`, to compare with a private
/// key's public half.
pub fn spki(cert: &[u8]) -> Option<&[u8]> {
    Cert::parse(cert).map(|c| c.spki)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_both_forms_and_refuse_others() {
        assert_eq!(time(UTC_TIME, b"700101000000Z"), Some(0));
        assert_eq!(time(UTC_TIME, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(
            time(GENERALIZED_TIME, b"20500101000000Z"),
            Some(2_524_608_000)
        );
        assert_eq!(time(UTC_TIME, b"700101000000"), None);
        assert_eq!(time(UTC_TIME, b"7001010000+0Z"), None);
        assert_eq!(time(GENERALIZED_TIME, b"700101000000Z"), None);
        assert_eq!(time(UTC_TIME, b"701301000000Z"), None);
    }

    #[test]
    fn lengths_past_the_input_are_refused() {
        assert!(tlv(&[0x30, 0x05, 0x01]).is_none());
        assert!(tlv(&[0x30, 0x82, 0x01]).is_none());
        assert!(tlv(&[0x30, 0x80]).is_none());
        let e = tlv(&[0x30, 0x81, 0x01, 0x07, 0x09]).unwrap();
        assert_eq!(
            (e.tag, e.contents, e.whole, e.rest),
            (
                0x30,
                &[0x07][..],
                &[0x30, 0x81, 0x01, 0x07][..],
                &[0x09][..]
            )
        );
        assert!(Cert::parse(&[]).is_none());
        assert!(!is_v1(b"not a certificate"));
    }
}
