//! The shard function: which of the 16 shards owns an object path.

use sha2::{Digest, Sha256};

/// Number of shards. Fixed by SeaweedFS's cursor layout; changing it would
/// reassign every object and invalidate every cursor.
pub const SHARD_COUNT: usize = 16;

/// `SHA-256(bucket + "/" + key)[0] >> 4`, identical to SeaweedFS's `ShardID`.
///
/// Which `key` to pass matters (docs/rule-hash.md#shard-function): meta-log events shard by
/// their *physical* path (`k.versions/v_<id>`, `.uploads/<id>`), the walker by
/// the logical key. Keeping both rules keeps Go-written cursors meaningful.
pub fn shard_id(bucket: &str, key: &str) -> u8 {
    let mut h = Sha256::new();
    h.update(bucket.as_bytes());
    h.update(b"/");
    h.update(key.as_bytes());
    h.finalize()[0] >> 4
}

/// `[0,1,2,3]` → `0-3`; `[1,4]` → `1,4` (the `pass.shards` syntax).
pub fn shards_label(shards: &[u8]) -> String {
    let parts: Vec<String> = shards
        .chunk_by(|a, b| *b == a + 1)
        .map(|run| match run {
            [one] => one.to_string(),
            [first, .., last] => format!("{first}-{last}"),
            [] => String::new(),
        })
        .collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_function_vectors() {
        assert_eq!(shard_id("bucket", "key"), 0);
        assert_eq!(shard_id("my-bucket", "path/to/object.txt"), 7);
        assert_eq!(shard_id("b1", ""), 10);
        assert_eq!(shard_id("a", "b"), 12);
        assert_eq!(shard_id("logs", "2024/01/01/x.log"), 3);
    }

    #[test]
    fn live_cluster_vector() {
        // Seen live (docs/rule-hash.md#test-vectors): hot/000000 in bucket bhot was on shard 11.
        assert_eq!(shard_id("bhot", "hot/000000"), 11);
    }

    #[test]
    fn always_in_range() {
        for i in 0..2000 {
            assert!((shard_id("b", &format!("k{i}")) as usize) < SHARD_COUNT);
        }
    }
}
