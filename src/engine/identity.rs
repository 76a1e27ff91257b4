//! Entry identity: the compare-and-swap witness sent with every `LifecycleDelete`
//! so the server refuses to delete an entry that changed after we decided
//! (docs/entry-identity.md#fields). It must be bit-identical to what the server computes.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::pb::filer_pb::{Entry, FileChunk};

/// What the server compares before deleting.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EntryIdentity {
    /// `mtime × 10^9 + mtime_ns`; 0 when the entry has no attributes.
    pub mtime_ns: i64,
    /// `attributes.file_size`.
    pub size: i64,
    /// File id of the first chunk, Go-formatted; empty when there are no chunks.
    pub head_fid: String,
    /// [`hash_extended`] of the entry's Extended map; empty for an empty map.
    pub extended_hash: Vec<u8>,
}

impl EntryIdentity {
    /// The identity of a filer entry, as the server computes it.
    pub fn of(entry: &Entry) -> EntryIdentity {
        EntryIdentity {
            mtime_ns: mtime_ns(entry),
            size: size_of(entry),
            head_fid: entry.chunks.first().map(head_fid).unwrap_or_default(),
            extended_hash: hash_extended(&entry.extended),
        }
    }
}

/// The entry's mtime in ns (`mtime × 10^9 + mtime_ns`), 0 without attributes;
/// the identity's `mtime_ns`.
pub fn mtime_ns(entry: &Entry) -> i64 {
    entry.attributes.as_ref().map_or(0, |a| {
        a.mtime
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(a.mtime_ns))
    })
}

/// `attributes.file_size` as the server reads it: uint64 → int64 the Go way (wrapping).
pub fn size_of(entry: &Entry) -> i64 {
    entry.attributes.as_ref().map_or(0, |a| a.file_size as i64)
}

/// Go's `FileChunk.GetFileIdString()`: the `file_id` string when present, else
/// `<volume>,<hex>` where hex covers the 8-byte big-endian key with its leading
/// zero *bytes* dropped, followed by the 4-byte cookie (always 8 hex digits).
/// Meta-log events usually carry only the structured `fid`; a plain
/// `"{vol},{key:x}{cookie:08x}"` differs whenever the key has an odd number of
/// hex digits, and the CAS would then never match (docs/entry-identity.md#head-fid).
pub fn head_fid(chunk: &FileChunk) -> String {
    if !chunk.file_id.is_empty() {
        return chunk.file_id.clone();
    }
    let Some(fid) = &chunk.fid else {
        return String::new();
    };
    let key = fid.file_key.to_be_bytes();
    let skip = key.iter().take_while(|b| **b == 0).count();
    let mut out = format!("{},", fid.volume_id);
    out.push_str(&hex::encode(&key[skip..]));
    out.push_str(&hex::encode(fid.cookie.to_be_bytes()));
    out
}

/// SHA-256 over the Extended map in bytewise key order, each entry contributing
/// `len(key) ":" key len(value) ":" value` with decimal byte lengths. An empty
/// map hashes to empty bytes (the server treats empty and absent alike).
pub fn hash_extended(extended: &HashMap<String, Vec<u8>>) -> Vec<u8> {
    if extended.is_empty() {
        return Vec::new();
    }
    let mut keys: Vec<&String> = extended.keys().collect();
    keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut h = Sha256::new();
    for k in keys {
        let v = &extended[k];
        h.update(k.len().to_string().as_bytes());
        h.update(b":");
        h.update(k.as_bytes());
        h.update(v.len().to_string().as_bytes());
        h.update(b":");
        h.update(v);
    }
    h.finalize().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::{FileId, FuseAttributes};

    fn ext(pairs: &[(&str, &str)]) -> HashMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn hash_extended_vectors_from_docs() {
        assert_eq!(
            hex::encode(hash_extended(&ext(&[("a", "1")]))),
            "4e05abd6911b81cca42657fbc9599aa8c54ec2edbae550401d8479871cb5ca0f"
        );
        assert_eq!(
            hex::encode(hash_extended(&ext(&[("c", "3"), ("a", "1"), ("b", "2")]))),
            "cbdea3a9553ee63d074b9b98e08a549a872edad292adcd1cbee05352d9dde0cf"
        );
        assert!(hash_extended(&HashMap::new()).is_empty());
    }

    fn chunk(volume_id: u32, file_key: u64, cookie: u32) -> FileChunk {
        FileChunk {
            fid: Some(FileId {
                volume_id,
                file_key,
                cookie,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn head_fid_keeps_leading_zero_nibble_of_odd_length_keys() {
        // Seen live (docs/entry-identity.md#test-vectors): volume 7, key 1, cookie 0x55dc63ec.
        assert_eq!(head_fid(&chunk(7, 1, 0x55dc_63ec)), "7,0155dc63ec");
        assert_eq!(head_fid(&chunk(3, 0x1234, 0x0000_0001)), "3,123400000001");
        assert_eq!(head_fid(&chunk(3, 0, 0xdead_beef)), "3,deadbeef");
    }

    #[test]
    fn file_id_string_wins_over_structured_fid() {
        let mut c = chunk(7, 1, 2);
        c.file_id = "9,abc".into();
        assert_eq!(head_fid(&c), "9,abc");
    }

    #[test]
    fn identity_of_entry() {
        let e = Entry {
            name: "a.txt".into(),
            chunks: vec![chunk(7, 1, 0x55dc_63ec), chunk(8, 2, 3)],
            attributes: Some(FuseAttributes {
                file_size: 10,
                mtime: 1_796_201_400,
                mtime_ns: 5,
                ..Default::default()
            }),
            extended: ext(&[("a", "1")]),
            ..Default::default()
        };
        let id = EntryIdentity::of(&e);
        assert_eq!(id.mtime_ns, 1_796_201_400_000_000_005);
        assert_eq!(id.size, 10);
        assert_eq!(id.head_fid, "7,0155dc63ec");
        assert_eq!(
            hex::encode(&id.extended_hash),
            "4e05abd6911b81cca42657fbc9599aa8c54ec2edbae550401d8479871cb5ca0f"
        );
        let none = EntryIdentity::of(&Entry::default());
        assert_eq!(none, EntryIdentity::default());
    }
}
