//! The read token a volume server asks for when its cluster sets
//! `[jwt.signing.read] key` in `security.toml`: an HS256 JWT over the one file
//! id read, signed with that key (docs/meta-log.md#read-tokens). The filer signs
//! the same tokens for its own chunk reads; the direct log-file reads sign
//! theirs here, or every read would be refused and streamed by the filer.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;

/// `[jwt.signing.read]` of the cluster's `security.toml`. Debug never shows
/// the key.
#[derive(Clone)]
pub struct VolumeReadKey {
    key: hmac::Key,
    /// `expires_after_seconds`: each token's lifetime; zero means tokens
    /// without `exp`, as weed signs them then.
    lifetime: Duration,
}

/// weed's default `jwt.signing.read.expires_after_seconds`.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);

impl std::fmt::Debug for VolumeReadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeReadKey")
            .field("key", &"<redacted>")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

impl VolumeReadKey {
    /// The key as `security.toml` writes it (its bytes, not decoded).
    pub fn new(secret: &str, lifetime: Duration) -> VolumeReadKey {
        VolumeReadKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()),
            lifetime,
        }
    }

    /// The `Authorization` header's value for a GET of `fid` (`VOLUME,NEEDLE`
    /// as the chunk names it), valid from now for the key's lifetime.
    pub fn bearer(&self, fid: &str) -> String {
        let now = Duration::from_nanos(crate::clock::wall_ns().max(0).unsigned_abs());
        format!("Bearer {}", self.token(fid, now))
    }

    /// The token for `fid` issued at `now` (since the epoch). The volume
    /// server compares `fid` with the path's `VOLUME,NEEDLE` (a `_N` suffix
    /// cut), so it must be the chunk's file id as is.
    fn token(&self, fid: &str, now: Duration) -> String {
        let header = r#"{"alg":"HS256","typ":"JWT"}"#;
        // Written out rather than through a map, so the bytes signed do not
        // hang on serde_json's key order.
        let fid = serde_json::Value::from(fid);
        let claims = if self.lifetime.is_zero() {
            format!(r#"{{"fid":{fid}}}"#)
        } else {
            let exp = (now + self.lifetime).as_secs();
            format!(r#"{{"exp":{exp},"fid":{fid}}}"#)
        };
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let tag = hmac::sign(&self.key, signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token for a known key, claims and time, checked field by field and
    /// against an HMAC computed apart (Python's `hmac`, `hashlib.sha256`).
    #[test]
    fn read_tokens_are_hs256_over_the_file_id() {
        let k = VolumeReadKey::new("readsecret", DEFAULT_LIFETIME);
        let t = k.token("3,01637037d6", Duration::from_secs(1_800_000_000));
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(parts.len(), 3, "{t}");
        let json = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        assert_eq!(
            json(parts[0]),
            serde_json::json!({"alg": "HS256", "typ": "JWT"})
        );
        assert_eq!(
            json(parts[1]),
            serde_json::json!({"fid": "3,01637037d6", "exp": 1_800_000_060u64})
        );
        assert_eq!(
            t,
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
             eyJleHAiOjE4MDAwMDAwNjAsImZpZCI6IjMsMDE2MzcwMzdkNiJ9.\
             cGhb_Hl7o-RvAA4WMEKCEghDWPovs2P0Ov_Uru_5OqM"
        );
        let none = VolumeReadKey::new("readsecret", Duration::ZERO);
        let t = none.token("3,01637037d6", Duration::from_secs(1));
        let claims = t.split('.').nth(1).unwrap();
        assert_eq!(json(claims), serde_json::json!({"fid": "3,01637037d6"}));
        assert!(!format!("{k:?}").contains("readsecret"));
        assert!(k.bearer("1,ab").starts_with("Bearer eyJ"));
    }
}
