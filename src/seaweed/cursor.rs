//! Shard cursors persisted in the filer (one JSON file per shard), so progress
//! survives the loss of the worker machine and every worker sees the same
//! state; plus a strict reader of the Go worker's cursor files for operators
//! switching over (docs/go-cursor.md#strictness).
//!
//! Writes replace the whole file in one CreateEntry/UpdateEntry, never a mix
//! of old and new; a second writer is detected by a generation counter in the
//! entry's Extended map, which 4.48 enforces (docs/go-cursor.md#our-cursors).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use md5::{Digest, Md5};

use crate::engine::cursor::{GoCursor, ShardCursor, decode_cursor, decode_go_cursor, file_name};
use crate::engine::{Nanos, SHARD_COUNT};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{FilerClient, FilerError, join_path, json_file_entry};

/// Where s3-lifecycled keeps its cursors by default. Deliberately not the Go
/// worker's directory: the formats differ and the two must not fight.
pub const DEFAULT_CURSOR_DIR: &str = "/etc/s3/lifecycle/s3-lifecycled";
/// Where the Go worker keeps its cursors (docs/go-cursor.md#location).
pub const GO_CURSOR_DIR: &str = "/etc/s3/lifecycle/daily-cursors";
/// Extended key of the cursor entry holding the write generation (decimal).
pub const GENERATION_KEY: &str = "s3-lifecycled-generation";
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
        path: String,
        shard: u8,
        problem: String,
    },
    /// Another writer changed the file since this store last read or wrote it.
    #[error(
        "cursor file {path} was changed by another writer ({detail}); is a second s3-lifecycled \
         running against this filer? Stop it, then restart this one"
    )]
    ConcurrentWriter {
        path: String,
        /// What was observed.
        detail: String,
    },
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
    known: Arc<Mutex<HashMap<u8, Known>>>,
}

impl CursorStore {
    /// A store under `dir` (use [`DEFAULT_CURSOR_DIR`]).
    pub fn new(client: FilerClient, dir: &str) -> CursorStore {
        let dir = match dir.trim_end_matches('/') {
            "" => "/",
            d => d,
        };
        CursorStore {
            client,
            dir: dir.into(),
            known: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The same store reached through another filer (failover,
    /// docs/meta-log.md#several-filers): it shares what this one has seen, so
    /// a save after a load on another filer is not taken for a second writer.
    pub fn through(&self, client: FilerClient) -> CursorStore {
        CursorStore {
            client,
            dir: self.dir.clone(),
            known: Arc::clone(&self.known),
        }
    }

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
        let Some(entry) = self.client.lookup(&self.dir, &file_name(shard)).await? else {
            self.remember(shard, Known::Absent);
            return Ok(None);
        };
        let corrupt = corrupt(self.path(shard), shard);
        let generation = generation_of(&entry).map_err(corrupt.clone())?;
        let cursor = decode_cursor(&entry.content, shard).map_err(corrupt)?;
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
                Some(e) => {
                    Known::Generation(generation_of(&e).map_err(corrupt(path.clone(), shard))?)
                }
            },
        };
        let mut stamped = cursor.clone();
        stamped.updated_ns = now_ns;
        let next = match known {
            Known::Absent => 1,
            Known::Generation(g) => g + 1,
        };
        let entry = cursor_entry(&name, stamped.to_json(), now_ns, next);
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

    /// Deletes shard `shard`'s file (runbook: force a cold start). Whether
    /// there was one: the filer deletes a missing entry without complaint,
    /// and `cursor reset` must not report a deletion that did not happen.
    pub async fn reset(&self, shard: u8) -> Result<bool, CursorError> {
        check_shard(shard)?;
        let name = file_name(shard);
        let existed = self.client.lookup(&self.dir, &name).await?.is_some();
        if existed {
            self.client.delete_entry(&self.dir, &name, false).await?;
        }
        self.remember(shard, Known::Absent);
        Ok(existed)
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
        .map_err(corrupt(join_path(dir, &name), shard))
}

/// Makes the decoder's `problem` a [`CursorError::Corrupt`] of `path`.
fn corrupt(path: String, shard: u8) -> impl Fn(String) -> CursorError + Clone {
    move |problem| CursorError::Corrupt {
        path: path.clone(),
        shard,
        problem,
    }
}

fn check_shard(shard: u8) -> Result<(), CursorError> {
    ((shard as usize) < SHARD_COUNT)
        .then_some(())
        .ok_or(CursorError::BadShard(shard))
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
    let mut entry = json_file_entry(name, content, now_ns);
    if let Some(a) = entry.attributes.as_mut() {
        a.md5 = Md5::digest(&entry.content).to_vec();
    }
    entry.extended = HashMap::from([(GENERATION_KEY.to_string(), generation_bytes(generation))]);
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

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
