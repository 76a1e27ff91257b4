//! The 8-byte rule hash, byte-identical to SeaweedFS's (facts doc §2.2). It
//! travels in every `LifecycleDelete` request and names rules in metrics.

use std::fmt;

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
