//! The 8-byte rule hash, byte-identical to SeaweedFS's (docs/rule-hash.md#rule-hash). It
//! travels in every `LifecycleDelete` request and names rules in metrics.
//!
//! Also home of the small tagged-varint stream writer shared with the cursor
//! hashes (`engine::hashes`), since both must encode exactly as Go's
//! `encoding/binary` does.

use std::fmt;

use sha2::{Digest, Sha256};
use time::{OffsetDateTime, UtcOffset};

use crate::lifecycle::FlatRule;

/// First 8 bytes of SHA-256 over a rule's canonical stream.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RuleHash(pub [u8; 8]);

impl RuleHash {
    /// Lowercase hex, as used in logs, metrics and `rules check`.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for RuleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RuleHash({})", self.to_hex())
    }
}

impl fmt::Display for RuleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Computes a rule's 8-byte hash exactly as SeaweedFS 4.48 does
/// (docs/rule-hash.md#rule-hash): SHA-256 over a tagged stream of the rule's
/// filter and action fields, truncated to 8 bytes.
///
/// `id` and `enabled` are deliberately not hashed (Go does the same): renaming
/// a rule keeps its hash. Any change to a hashed field changes the hash, which
/// renames the rule in `LifecycleDelete` requests and cursor hashes.
pub fn rule_hash(rule: &FlatRule) -> RuleHash {
    let mut w = HashStream::new();
    w.field(0x01, rule.prefix.as_bytes());
    w.uvarint_tagged(0x02, rule.tags.len() as u64);
    // BTreeMap<String, _> iterates in bytewise key order, which is the order
    // Go sorts the tag keys into.
    for (k, v) in &rule.tags {
        w.field(0x03, k.as_bytes());
        w.field(0x04, v.as_bytes());
    }
    w.int(0x05, rule.size_gt);
    w.int(0x06, rule.size_lt);
    w.int(0x10, rule.expiration_days);
    let date = rule
        .expiration_date
        .map(format_rfc3339_nano_utc)
        .unwrap_or_default();
    w.field(0x11, date.as_bytes());
    // One raw byte, no length prefix.
    w.raw(&[0x12, u8::from(rule.expired_object_delete_marker)]);
    w.int(0x13, rule.noncurrent_days);
    w.int(0x14, rule.newer_noncurrent_versions);
    w.int(0x15, rule.abort_mpu_days);
    let sum = w.finish();
    let mut out = [0u8; 8];
    out.copy_from_slice(&sum[..8]);
    RuleHash(out)
}

/// Formats a timestamp as Go's `t.UTC().Format(time.RFC3339Nano)`:
/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, fraction without trailing zeros and
/// omitted entirely when zero.
fn format_rfc3339_nano_utc(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let year = t.year();
    // Go pads the year to four digits and puts the sign in front.
    let year = if year < 0 {
        format!("-{:04}", year.unsigned_abs())
    } else {
        format!("{year:04}")
    };
    let mut s = format!(
        "{year}-{:02}-{:02}T{:02}:{:02}:{:02}",
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let nanos = t.nanosecond();
    if nanos != 0 {
        s.push_str(format!(".{nanos:09}").trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// A SHA-256 stream written as one-byte tags followed by Go `encoding/binary`
/// varints: `PutUvarint` (LEB128) for lengths and counts, `PutVarint` (zigzag
/// then LEB128) for signed integers. Shared by the rule hash and the cursor
/// hashes so both agree with Go byte for byte.
pub(crate) struct HashStream {
    hasher: Sha256,
}

impl HashStream {
    pub(crate) fn new() -> Self {
        HashStream {
            hasher: Sha256::new(),
        }
    }

    /// Bytes written verbatim.
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// `tag | uvarint(len) | bytes`.
    pub(crate) fn field(&mut self, tag: u8, bytes: &[u8]) {
        self.uvarint_tagged(tag, bytes.len() as u64);
        self.raw(bytes);
    }

    /// `tag | uvarint(v)`.
    pub(crate) fn uvarint_tagged(&mut self, tag: u8, v: u64) {
        self.raw(&[tag]);
        let mut buf = [0u8; 10];
        let n = put_uvarint(&mut buf, v);
        self.raw(&buf[..n]);
    }

    /// `tag | zigzag varint(v)`.
    pub(crate) fn int(&mut self, tag: u8, v: i64) {
        self.uvarint_tagged(tag, zigzag(v));
    }

    pub(crate) fn finish(self) -> [u8; 32] {
        self.hasher.finalize().into()
    }
}

/// Go's zigzag mapping for `PutVarint`: small magnitudes of either sign get
/// short encodings.
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// LEB128 into `buf` (10 bytes always suffice for a u64); returns the length.
pub(crate) fn put_uvarint(buf: &mut [u8; 10], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        buf[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    buf[i] = v as u8;
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use time::macros::datetime;

    fn rule(prefix: &str) -> FlatRule {
        FlatRule {
            prefix: prefix.to_string(),
            enabled: true,
            ..FlatRule::default()
        }
    }

    fn hex_of(r: &FlatRule) -> String {
        rule_hash(r).to_hex()
    }

    // Transcription vectors (docs/rule-hash.md#test-vectors). `logs/` + 30 days
    // is also inside the Go-verified bkt1 hash, so it pins Go 4.48.
    #[test]
    fn rule_hash_vector_prefix_and_days() {
        let mut r = rule("logs/");
        r.expiration_days = 30;
        assert_eq!(hex_of(&r), "0c8cc7219c442e3e");
        let mut r = rule("");
        r.expiration_days = 1;
        assert_eq!(hex_of(&r), "908967e18331cc64");
    }

    #[test]
    fn rule_hash_vector_tags_and_sizes() {
        let mut r = rule("data/");
        r.tags = BTreeMap::from([
            ("tier".to_string(), "cold".to_string()),
            ("env".to_string(), "prod".to_string()),
        ]);
        r.size_gt = 1024;
        r.size_lt = 10_485_760;
        r.expiration_days = 90;
        assert_eq!(hex_of(&r), "21b3284b493a3fa1");
    }

    #[test]
    fn rule_hash_vector_date_marker_noncurrent_mpu() {
        let mut r = rule("d/");
        r.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        assert_eq!(hex_of(&r), "f0a4f18ff8dde947");
        let mut r = rule("m/");
        r.noncurrent_days = 1;
        assert_eq!(hex_of(&r), "ca9b759ba7d902cc");
        let mut r = rule("m/");
        r.expired_object_delete_marker = true;
        assert_eq!(hex_of(&r), "c516f76b516d91fd");
        let mut r = rule("uploads/");
        r.abort_mpu_days = 7;
        assert_eq!(hex_of(&r), "236cd2e6c3b6a446");
    }

    #[test]
    fn go_verified_rule_hashes_of_bkt2() {
        let mut r = rule("");
        r.noncurrent_days = 3;
        assert_eq!(hex_of(&r), "0697401fd9e3c6ee");
        let mut r = rule("tmp/");
        r.tags = BTreeMap::from([("env".to_string(), "dev".to_string())]);
        r.size_gt = 100;
        r.expiration_days = 7;
        assert_eq!(hex_of(&r), "504eafc6ec51ff69");
        let mut r = rule("up/");
        r.abort_mpu_days = 2;
        assert_eq!(hex_of(&r), "bbcf7f49606eda5b");
    }

    #[test]
    fn id_status_and_position_are_not_hashed() {
        let mut a = rule("logs/");
        a.expiration_days = 30;
        let mut b = a.clone();
        b.id = "renamed".into();
        b.enabled = false;
        b.position = 7;
        assert_eq!(rule_hash(&a), rule_hash(&b));
    }

    #[test]
    fn every_hashed_field_changes_the_hash() {
        let mut base = rule("p/");
        base.expiration_days = 5;
        let h = rule_hash(&base);
        let edits: Vec<fn(&mut FlatRule)> = vec![
            |r| r.prefix.push('x'),
            |r| {
                r.tags.insert("k".into(), "v".into());
            },
            |r| r.size_gt = 1,
            |r| r.size_lt = 1,
            |r| r.expiration_days = 6,
            |r| r.expiration_date = Some(datetime!(2030-01-01 00:00:00 UTC)),
            |r| r.expired_object_delete_marker = true,
            |r| r.noncurrent_days = 1,
            |r| r.newer_noncurrent_versions = 1,
            |r| r.abort_mpu_days = 1,
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut r = base.clone();
            edit(&mut r);
            assert_ne!(rule_hash(&r), h, "edit #{i} did not change the hash");
        }
    }

    #[test]
    fn tag_key_and_value_boundaries_are_length_prefixed() {
        // Without length prefixes {"ab":"c"} and {"a":"bc"} would collide.
        let mut a = rule("");
        a.tags.insert("ab".into(), "c".into());
        let mut b = rule("");
        b.tags.insert("a".into(), "bc".into());
        assert_ne!(rule_hash(&a), rule_hash(&b));
    }

    #[test]
    fn date_formats_like_go_rfc3339nano_in_utc() {
        assert_eq!(
            format_rfc3339_nano_utc(datetime!(2024-06-01 00:00:00 UTC)),
            "2024-06-01T00:00:00Z"
        );
        assert_eq!(
            format_rfc3339_nano_utc(datetime!(2024-06-01 02:00:00.120 +02:00)),
            "2024-06-01T00:00:00.12Z"
        );
        assert_eq!(
            format_rfc3339_nano_utc(datetime!(0999-01-02 03:04:05.000000001 UTC)),
            "0999-01-02T03:04:05.000000001Z"
        );
    }

    #[test]
    fn same_instant_in_other_offset_hashes_the_same() {
        let mut a = rule("d/");
        a.expiration_date = Some(datetime!(2024-06-01 00:00:00 UTC));
        let mut b = rule("d/");
        b.expiration_date = Some(datetime!(2024-06-01 05:30:00 +05:30));
        assert_eq!(rule_hash(&a), rule_hash(&b));
    }

    #[test]
    fn zigzag_varint_of_30_days_in_ns_matches_appendix_a() {
        let ns = 30i64 * 86_400 * 1_000_000_000;
        let mut buf = [0u8; 10];
        let n = put_uvarint(&mut buf, zigzag(ns));
        assert_eq!(hex::encode(&buf[..n]), "808090f4a0da9a09");
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        let n = put_uvarint(&mut buf, u64::MAX);
        assert_eq!(n, 10);
    }
}
