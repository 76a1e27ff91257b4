//! Shard cursors persisted in the filer (one JSON file per shard), so progress
//! survives the loss of the worker machine and every worker sees the same
//! state; plus a strict reader of the Go worker's cursor files for operators
//! switching over (facts doc §8).
//!
//! Writes replace the whole file in one CreateEntry/UpdateEntry carrying inline
//! content, so a reader sees the old or the new file, never a mix. Two writers
//! are detected with a generation counter kept in the entry's Extended map:
//! creates use `o_excl`, updates pass `expected_extended` with the generation
//! last seen. Observed on 4.48: both are enforced — the filer refuses a
//! mismatching update with gRPC FAILED_PRECONDITION (`extended attribute
//! "s3-lifecycled-generation" changed`) and an exclusive create of an
//! existing file with an "already exists" error (tests/seaweed_cursor.rs).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::engine::progress::ActionProgress;
use crate::engine::{Nanos, SHARD_COUNT};
use crate::pb::filer_pb::{Entry, FuseAttributes};
use crate::seaweed::filer::{FilerClient, FilerError, join_path};

/// Where s3-lifecycled keeps its cursors by default. Deliberately not the Go
/// worker's directory: the formats differ and the two must not fight.
pub const DEFAULT_CURSOR_DIR: &str = "/etc/s3/lifecycle/s3-lifecycled";
/// Where the Go worker keeps its cursors (facts doc §8).
pub const GO_CURSOR_DIR: &str = "/etc/s3/lifecycle/daily-cursors";
/// Extended key of the cursor entry holding the write generation (decimal).
pub const GENERATION_KEY: &str = "s3-lifecycled-generation";
/// The only cursor format version this code reads and writes.
pub const CURSOR_VERSION: u32 = 1;

/// A 32-byte hash, as standard padded base64 in JSON.
pub type Hash32 = [u8; 32];

/// One shard's progress, as stored in `shard-NN.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCursor {
    /// Format version; always [`CURSOR_VERSION`].
    pub version: u32,
    /// The shard this file belongs to (checked against the file name).
    pub shard_id: u8,
    /// When this cursor was last saved (ns).
    #[serde(default)]
    pub updated_ns: Nanos,
    /// Minimum `ts_ns` over the buckets: for dashboards and Go-style tooling.
    pub ts_ns: Nanos,
    /// Go-compatible global ReplayContentHash.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// Go-compatible global PromotedHash.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk of this shard (ns); 0 = never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_walked_ns: Nanos,
    /// Per-bucket progress.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub buckets: BTreeMap<String, BucketCursor>,
}

/// One bucket's progress within a shard.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BucketCursor {
    /// Meta-log position replayed up to (ns).
    pub ts_ns: Nanos,
    /// The bucket's rule-set hash when `ts_ns` was reached.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// The bucket's promoted-rules hash when `ts_ns` was reached.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk of this bucket in this shard (ns); 0 = never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_walked_ns: Nanos,
    /// Why progress on this bucket is halted, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// Per-action replay progress: `"<rulehash hex>/<kind>"` →
    /// `{ts, through, through_now}` (see [`crate::engine::progress`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, ActionProgress>,
}

/// The Go worker's cursor file (facts doc §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoCursor {
    /// Always 1.
    pub version: u32,
    /// Shard number.
    pub shard_id: u8,
    /// Meta-log position (ns).
    pub ts_ns: Nanos,
    /// ReplayContentHash.
    #[serde(with = "b64")]
    pub rule_set_hash: Hash32,
    /// PromotedHash.
    #[serde(with = "b64")]
    pub promoted_hash: Hash32,
    /// Last walk (ns); omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_walked_ns: Nanos,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// serde adapter: `[u8; 32]` ⇄ standard base64 with padding, refusing any
/// other length (a truncated hash must not pass as a valid one).
mod b64 {
    use super::{Hash32, STANDARD};
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(h: &Hash32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(h))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Hash32, D::Error> {
        let s = String::deserialize(d)?;
        let bytes = STANDARD
            .decode(s.as_bytes())
            .map_err(|e| D::Error::custom(format!("hash {s:?} is not standard base64: {e}")))?;
        let len = bytes.len();
        bytes.try_into().map_err(|_| {
            D::Error::custom(format!(
                "hash {s:?} decodes to {len} bytes, expected exactly 32"
            ))
        })
    }
}

impl ShardCursor {
    /// The minimum bucket `ts_ns`, or `None` without buckets. Callers store
    /// it in [`ShardCursor::ts_ns`] before saving.
    pub fn min_bucket_ts(&self) -> Option<Nanos> {
        self.buckets.values().map(|b| b.ts_ns).min()
    }

    /// The file content: two-space indented JSON and a trailing newline, like
    /// Go's encoder, so operators can diff it with Go-written files.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain structs into a Vec cannot fail.
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// The name of shard `shard`'s file: `shard-NN.json`.
pub fn file_name(shard: u8) -> String {
    format!("shard-{shard:02}.json")
}

/// Cursor store errors. Every variant names the filer path.
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    /// A filer call failed (transport or server).
    #[error("cursor store: {0}")]
    Filer(#[from] FilerError),
    /// The file exists but cannot be used. Never treated as a cold start:
    /// silently starting over could re-delete or skip a whole retention window.
    #[error(
        "cursor file {path} is unusable: {problem}. Fix: restore a good copy, or delete the file \
         (`s3-lifecycled cursor reset --shards {shard} --yes` or `weed shell fs.rm {path}`) to force a \
         cold start of shard {shard}"
    )]
    Corrupt {
        /// Filer path.
        path: String,
        /// Shard number.
        shard: u8,
        /// What is wrong.
        problem: String,
    },
    /// Another writer changed the file since this store last read or wrote it.
    #[error(
        "cursor file {path} was changed by another writer ({detail}); is a second s3-lifecycled \
         running against this filer? Stop it, then restart this one"
    )]
    ConcurrentWriter {
        /// Filer path.
        path: String,
        /// What was observed.
        detail: String,
    },
    /// Shard number out of range.
    #[error("shard {0} does not exist (shards are 0..{SHARD_COUNT})")]
    BadShard(u8),
}

/// Generation state the store remembers per shard, to detect a second writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// The last load found no file.
    Absent,
    /// The last load or save saw this generation.
    Generation(u64),
}

/// Cursor files in the filer: `<dir>/shard-NN.json`.
#[derive(Debug)]
pub struct CursorStore {
    client: FilerClient,
    dir: String,
    /// Generation observed per shard by the last load/save through this store.
    known: Mutex<HashMap<u8, Known>>,
}

impl CursorStore {
    /// A store under `dir` (use [`DEFAULT_CURSOR_DIR`]).
    pub fn new(client: FilerClient, dir: &str) -> CursorStore {
        let dir = dir.trim_end_matches('/');
        CursorStore {
            client,
            dir: if dir.is_empty() {
                "/".into()
            } else {
                dir.into()
            },
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Full filer path of shard `shard`'s file.
    pub fn path(&self, shard: u8) -> String {
        join_path(&self.dir, &file_name(shard))
    }

    fn remember(&self, shard: u8, k: Known) {
        if let Ok(mut m) = self.known.lock() {
            m.insert(shard, k);
        }
    }

    fn recalled(&self, shard: u8) -> Option<Known> {
        self.known.lock().ok().and_then(|m| m.get(&shard).copied())
    }

    /// Loads shard `shard`. A missing file is `Ok(None)` (cold start); a file
    /// that exists but is not a valid cursor for this shard is an error.
    pub async fn load(&self, shard: u8) -> Result<Option<ShardCursor>, CursorError> {
        check_shard(shard)?;
        let path = self.path(shard);
        let Some(entry) = self.client.lookup(&self.dir, &file_name(shard)).await? else {
            self.remember(shard, Known::Absent);
            return Ok(None);
        };
        let generation = generation_of(&entry).map_err(|problem| CursorError::Corrupt {
            path: path.clone(),
            shard,
            problem,
        })?;
        let cursor =
            decode_cursor(&entry.content, shard).map_err(|problem| CursorError::Corrupt {
                path: path.clone(),
                shard,
                problem,
            })?;
        self.remember(shard, Known::Generation(generation));
        Ok(Some(cursor))
    }

    /// Writes `cursor` (whole file, one filer call) stamped with `now_ns`.
    /// Fails with [`CursorError::ConcurrentWriter`] when the file changed
    /// since this store last loaded or saved it. Without an earlier load, the
    /// current file's generation is taken as the baseline.
    pub async fn save(&self, cursor: &ShardCursor, now_ns: Nanos) -> Result<(), CursorError> {
        let shard = cursor.shard_id;
        check_shard(shard)?;
        let path = self.path(shard);
        let name = file_name(shard);
        let known = match self.recalled(shard) {
            Some(k) => k,
            None => match self.client.lookup(&self.dir, &name).await? {
                None => Known::Absent,
                Some(e) => Known::Generation(generation_of(&e).map_err(|problem| {
                    CursorError::Corrupt {
                        path: path.clone(),
                        shard,
                        problem,
                    }
                })?),
            },
        };
        let mut stamped = cursor.clone();
        stamped.updated_ns = now_ns;
        let content = stamped.to_json();
        let next = match known {
            Known::Absent => 1,
            Known::Generation(g) => g + 1,
        };
        let entry = cursor_entry(&name, content, now_ns, next);
        match known {
            Known::Absent => match self.client.create_entry(&self.dir, entry, true).await {
                Ok(()) => {}
                Err(FilerError::AlreadyExists { .. }) => {
                    return Err(CursorError::ConcurrentWriter {
                        path,
                        detail: "the file appeared after this store found it absent".into(),
                    });
                }
                Err(e) => return Err(e.into()),
            },
            Known::Generation(g) => {
                let expected = HashMap::from([(GENERATION_KEY.to_string(), generation_bytes(g))]);
                match self.client.update_entry(&self.dir, entry, expected).await {
                    Ok(()) => {}
                    Err(FilerError::PreconditionFailed { message, .. }) => {
                        return Err(CursorError::ConcurrentWriter {
                            path,
                            detail: format!("expected generation {g}: {message}"),
                        });
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.remember(shard, Known::Generation(next));
        Ok(())
    }

    /// Deletes shard `shard`'s file (runbook: force a cold start).
    pub async fn reset(&self, shard: u8) -> Result<(), CursorError> {
        check_shard(shard)?;
        self.client
            .delete_entry(&self.dir, &file_name(shard), false)
            .await?;
        self.remember(shard, Known::Absent);
        Ok(())
    }

    /// Reads the Go worker's cursor for `shard` from [`GO_CURSOR_DIR`], as
    /// strictly as Go does. Missing → `Ok(None)`.
    pub async fn load_go(&self, shard: u8) -> Result<Option<GoCursor>, CursorError> {
        load_go_from(&self.client, GO_CURSOR_DIR, shard).await
    }
}

/// [`CursorStore::load_go`] from an explicit directory.
pub async fn load_go_from(
    client: &FilerClient,
    dir: &str,
    shard: u8,
) -> Result<Option<GoCursor>, CursorError> {
    check_shard(shard)?;
    let name = file_name(shard);
    let Some(entry) = client.lookup(dir, &name).await? else {
        return Ok(None);
    };
    decode_go_cursor(&entry.content, shard)
        .map(Some)
        .map_err(|problem| CursorError::Corrupt {
            path: join_path(dir, &name),
            shard,
            problem,
        })
}

fn check_shard(shard: u8) -> Result<(), CursorError> {
    if (shard as usize) < SHARD_COUNT {
        Ok(())
    } else {
        Err(CursorError::BadShard(shard))
    }
}

fn generation_bytes(g: u64) -> Vec<u8> {
    g.to_string().into_bytes()
}

/// The entry's write generation; absent = 0 (written by hand or another tool).
fn generation_of(e: &Entry) -> Result<u64, String> {
    match e.extended.get(GENERATION_KEY) {
        None => Ok(0),
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                format!(
                    "Extended {GENERATION_KEY} = {:?} is not a decimal generation",
                    String::from_utf8_lossy(v)
                )
            }),
    }
}

/// The filer entry for a cursor file. Attributes mirror Go's SaveInsideFiler
/// (mode 0644, size, MD5) so filer tools show the file sensibly.
fn cursor_entry(name: &str, content: Vec<u8>, now_ns: Nanos, generation: u64) -> Entry {
    let secs = now_ns.div_euclid(1_000_000_000);
    let nanos = now_ns.rem_euclid(1_000_000_000) as i32;
    let md5 = Md5::digest(&content).to_vec();
    Entry {
        name: name.to_string(),
        is_directory: false,
        attributes: Some(FuseAttributes {
            file_size: content.len() as u64,
            mtime: secs,
            mtime_ns: nanos,
            crtime: secs,
            crtime_ns: nanos,
            file_mode: 0o644,
            md5,
            mime: "application/json".into(),
            ..Default::default()
        }),
        extended: HashMap::from([(GENERATION_KEY.to_string(), generation_bytes(generation))]),
        content,
        ..Default::default()
    }
}

/// Parses and checks a cursor file's content for `shard`. The error string
/// says what is wrong (the caller adds the path and the fix).
pub fn decode_cursor(content: &[u8], shard: u8) -> Result<ShardCursor, String> {
    if content.iter().all(u8::is_ascii_whitespace) {
        return Err("the file is empty".into());
    }
    let version = peek_version(content)?;
    if version != u64::from(CURSOR_VERSION) {
        return Err(format!(
            "format version {version} is not supported (this build reads version {CURSOR_VERSION})"
        ));
    }
    let c: ShardCursor =
        serde_json::from_slice(content).map_err(|e| format!("invalid cursor JSON: {e}"))?;
    if c.shard_id != shard {
        return Err(format!(
            "it holds shard_id {} but is the file of shard {shard}",
            c.shard_id
        ));
    }
    Ok(c)
}

/// Parses and checks a Go cursor file's content, as strictly as Go does.
pub fn decode_go_cursor(content: &[u8], shard: u8) -> Result<GoCursor, String> {
    if content.iter().all(u8::is_ascii_whitespace) {
        return Err("the file is empty".into());
    }
    let version = peek_version(content)?;
    if version != 1 {
        return Err(format!("Go cursor version {version} is not 1"));
    }
    let c: GoCursor =
        serde_json::from_slice(content).map_err(|e| format!("invalid Go cursor JSON: {e}"))?;
    if c.shard_id != shard {
        return Err(format!(
            "it holds shard_id {} but is the file of shard {shard}",
            c.shard_id
        ));
    }
    Ok(c)
}

/// Reads only `version`, so a future format gets a "version not supported"
/// message rather than a confusing field error.
fn peek_version(content: &[u8]) -> Result<u64, String> {
    #[derive(Deserialize)]
    struct V {
        version: Option<u64>,
    }
    let v: V = serde_json::from_slice(content).map_err(|e| format!("invalid JSON: {e}"))?;
    v.version
        .ok_or_else(|| "the \"version\" field is missing".into())
}

/// Decodes a standard-base64 hash, for tools and tests.
pub fn decode_hash(s: &str) -> Option<Hash32> {
    STANDARD.decode(s).ok()?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ShardCursor {
        let mut buckets = BTreeMap::new();
        buckets.insert(
            "b1".to_string(),
            BucketCursor {
                ts_ns: 5,
                rule_set_hash: [1; 32],
                promoted_hash: [0; 32],
                ..Default::default()
            },
        );
        ShardCursor {
            version: 1,
            shard_id: 3,
            updated_ns: 9,
            ts_ns: 5,
            rule_set_hash: [0xff; 32],
            promoted_hash: [0; 32],
            last_walked_ns: 0,
            buckets,
        }
    }

    #[test]
    fn json_uses_padded_standard_base64_and_omits_defaults() {
        let json = String::from_utf8(sample().to_json()).unwrap();
        // 32 × 0xff → standard alphabet ('/', not URL-safe '_'), one '=' of padding.
        let ff = "//////////////////////////////////////////8=";
        assert_eq!(ff.len(), 44);
        assert!(
            json.contains(&format!("\"rule_set_hash\": \"{ff}\"")),
            "{json}"
        );
        assert!(
            json.contains(&format!("\"promoted_hash\": \"{}=\"", "A".repeat(43))),
            "{json}"
        );
        assert!(!json.contains("last_walked_ns"), "{json}");
        assert!(!json.contains("halted"), "{json}");
        assert!(!json.contains("\"rules\""), "{json}");
        assert!(json.ends_with("}\n"));
        assert!(
            json.starts_with("{\n  \"version\": 1,\n  \"shard_id\": 3,"),
            "{json}"
        );
        assert_eq!(decode_cursor(json.as_bytes(), 3).unwrap(), sample());
    }

    #[test]
    fn optional_fields_round_trip_when_set() {
        let mut c = sample();
        c.last_walked_ns = 77;
        let b = c.buckets.get_mut("b1").unwrap();
        b.halted = Some("RETRY_LATER on k".into());
        b.rules.insert(
            "0011223344556677/expiration_days".into(),
            ActionProgress::at(42),
        );
        let json = c.to_json();
        assert_eq!(decode_cursor(&json, 3).unwrap(), c);
    }

    #[test]
    fn older_file_without_new_fields_still_reads() {
        let h = STANDARD.encode([2u8; 32]);
        let json = format!(
            r#"{{"version":1,"shard_id":0,"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}",
               "buckets":{{"b":{{"ts_ns":1,"rule_set_hash":"{h}","promoted_hash":"{h}"}}}}}}"#
        );
        let c = decode_cursor(json.as_bytes(), 0).unwrap();
        assert_eq!(c.updated_ns, 0);
        assert_eq!(c.buckets["b"].halted, None);
        assert!(c.buckets["b"].rules.is_empty());
    }

    #[test]
    fn strict_decoding_errors_say_what_is_wrong() {
        let good = sample().to_json();
        assert!(decode_cursor(b"", 3).unwrap_err().contains("empty"));
        assert!(
            decode_cursor(b"{not json", 3)
                .unwrap_err()
                .contains("invalid JSON")
        );
        assert!(decode_cursor(&good, 4).unwrap_err().contains("shard_id 3"));
        let v2 = String::from_utf8(good.clone())
            .unwrap()
            .replace("\"version\": 1", "\"version\": 2");
        assert!(
            decode_cursor(v2.as_bytes(), 3)
                .unwrap_err()
                .contains("version 2")
        );
        let short = String::from_utf8(good).unwrap().replace(
            "//////////////////////////////////////////8=",
            &STANDARD.encode([1u8; 31]),
        );
        let err = decode_cursor(short.as_bytes(), 3).unwrap_err();
        assert!(err.contains("31 bytes"), "{err}");
    }

    #[test]
    fn go_cursor_format_matches_facts_doc() {
        let go = GoCursor {
            version: 1,
            shard_id: 3,
            ts_ns: 1_700_000_000_000_000_123,
            rule_set_hash: [0; 32],
            promoted_hash: [0; 32],
            last_walked_ns: 0,
        };
        let mut json = serde_json::to_string_pretty(&go).unwrap();
        json.push('\n');
        let zero = format!("{}=", "A".repeat(43));
        assert_eq!(
            json,
            format!(
                "{{\n  \"version\": 1,\n  \"shard_id\": 3,\n  \"ts_ns\": 1700000000000000123,\n  \
                 \"rule_set_hash\": \"{zero}\",\n  \"promoted_hash\": \"{zero}\"\n}}\n"
            )
        );
        assert_eq!(decode_go_cursor(json.as_bytes(), 3).unwrap(), go);
        assert!(decode_go_cursor(json.as_bytes(), 2).is_err());
    }

    #[test]
    fn cursor_entry_attributes() {
        let e = cursor_entry("shard-01.json", b"{}\n".to_vec(), 1_500_000_000_250, 4);
        let a = e.attributes.unwrap();
        assert_eq!(
            (a.mtime, a.mtime_ns, a.file_mode, a.file_size),
            (1500, 250, 0o644, 3)
        );
        assert_eq!(hex::encode(a.md5), "8a80554c91d9fca8acb82f023de02f11");
        assert_eq!(e.extended[GENERATION_KEY], b"4");
    }
}
