//! Meta-log events: the recordings (`tests/fixtures/events/<scenario>.bin`, written by
//! `tests/single_node/record_events.rs`) and their loader, the human-readable dump used for the `.txt`
//! files, and what tests ask of any event (its kind, its entry, its bucket).

use std::fmt::Write as _;
use std::path::PathBuf;

use prost::Message;
use s3_lifecycled::pb::filer_pb::{Entry, FileId, SubscribeMetadataResponse};

/// Directory holding the recordings.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events")
}

/// Every recorded event of `scenario` (setup and action), in meta-log order.
///
/// Panics with the file name if the recording is missing or corrupt (test support only).
pub fn load_events(scenario: &str) -> Vec<SubscribeMetadataResponse> {
    let path = fixtures_dir().join(format!("{scenario}.bin"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; record it with `cargo test --test single_node record_events -- --ignored`",
            path.display()
        )
    });
    decode_all(&bytes).unwrap_or_else(|e| panic!("corrupt recording {}: {e}", path.display()))
}

/// Only the events of `scenario` caused by the operation under test (ts >= the `action_since_ns`
/// line in the `.txt`); setup events such as CreateBucket are dropped.
pub fn load_action_events(scenario: &str) -> Vec<SubscribeMetadataResponse> {
    let since = action_since_ns(scenario);
    load_events(scenario)
        .into_iter()
        .filter(|e| e.ts_ns >= since)
        .collect()
}

/// The `action_since_ns` recorded in `<scenario>.txt`.
pub fn action_since_ns(scenario: &str) -> i64 {
    let path = fixtures_dir().join(format!("{scenario}.txt"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("# action_since_ns: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{} has no `# action_since_ns: N` line", path.display()))
}

/// Names of every recorded scenario (from the `.bin` files), sorted.
pub fn scenarios() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(fixtures_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_suffix(".bin")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Decodes a sequence of length-delimited `SubscribeMetadataResponse`s.
pub fn decode_all(mut bytes: &[u8]) -> Result<Vec<SubscribeMetadataResponse>, prost::DecodeError> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(SubscribeMetadataResponse::decode_length_delimited(
            &mut bytes,
        )?);
    }
    Ok(out)
}

/// Encodes events the way the `.bin` files store them.
pub fn encode_all(events: &[SubscribeMetadataResponse]) -> Vec<u8> {
    let mut out = Vec::new();
    for ev in events {
        // Writing into a Vec cannot run out of space.
        ev.encode_length_delimited(&mut out)
            .expect("encode into Vec");
    }
    out
}

/// CREATE, UPDATE, DELETE or RENAME, from which entries are present and whether name/parent changed.
pub fn kind(ev: &SubscribeMetadataResponse) -> &'static str {
    let Some(n) = &ev.event_notification else {
        return "NONE";
    };
    match (&n.old_entry, &n.new_entry) {
        (None, Some(_)) => "CREATE",
        (Some(_), None) => "DELETE",
        (Some(o), Some(nw)) => {
            let same_parent = n.new_parent_path.is_empty() || n.new_parent_path == ev.directory;
            if o.name == nw.name && same_parent {
                "UPDATE"
            } else {
                "RENAME"
            }
        }
        (None, None) => "NONE",
    }
}

/// The name of the entry an event is about (the new entry's, else the old one's).
pub fn entry_name(ev: &SubscribeMetadataResponse) -> String {
    let n = ev
        .event_notification
        .as_ref()
        .expect("event has a notification");
    n.new_entry
        .as_ref()
        .or(n.old_entry.as_ref())
        .map(|e| e.name.clone())
        .expect("event names an entry")
}

/// Whether `ev` belongs to `bucket`: anything under `/buckets/<bucket>`, or the bucket entry
/// itself in `/buckets` (creation, versioning, lifecycle).
pub fn in_bucket(ev: &SubscribeMetadataResponse, bucket: &str) -> bool {
    let root = format!("/buckets/{bucket}");
    if ev.directory == root || ev.directory.starts_with(&format!("{root}/")) {
        return true;
    }
    ev.directory == "/buckets"
        && ev.event_notification.as_ref().is_some_and(|n| {
            [&n.old_entry, &n.new_entry]
                .iter()
                .any(|e| e.as_ref().is_some_and(|e| e.name == bucket))
        })
}

/// The Go `FileChunk.GetFileIdString()` form of a structured fid: volume, then the hex of the 8
/// key bytes minus leading zero bytes, then the 4 cookie bytes (docs/entry-identity.md#head-fid).
pub fn fid_string(fid: &FileId) -> String {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&fid.file_key.to_be_bytes());
    b[8..].copy_from_slice(&fid.cookie.to_be_bytes());
    let skip = b[..8].iter().take_while(|&&x| x == 0).count();
    format!("{},{}", fid.volume_id, hex::encode(&b[skip..]))
}

fn entry_line(out: &mut String, label: &str, e: &Entry) {
    let a = e.attributes.clone().unwrap_or_default();
    let _ = write!(
        out,
        "  {label}: {} [{}size={} mtime={}.{:09} crtime={} mode={:o} mime={:?}]",
        e.name,
        if e.is_directory { "DIR " } else { "" },
        a.file_size,
        a.mtime,
        a.mtime_ns,
        a.crtime,
        a.file_mode,
        a.mime
    );
    let chunks: Vec<String> = e
        .chunks
        .iter()
        .map(|c| {
            let fid = c.fid.as_ref().map(fid_string).unwrap_or_default();
            format!(
                "{}(file_id={:?} off={} size={})",
                fid, c.file_id, c.offset, c.size
            )
        })
        .collect();
    let _ = writeln!(out, " chunks=[{}]", chunks.join(", "));
    let mut keys: Vec<_> = e.extended.iter().collect();
    keys.sort();
    for (k, v) in keys {
        let _ = writeln!(out, "      E {k}: {}", String::from_utf8_lossy(v));
    }
}

/// Human-readable dump of one event (the format of the `.txt` files).
pub fn dump(ev: &SubscribeMetadataResponse) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {} dir={}", ev.ts_ns, kind(ev), ev.directory);
    if let Some(n) = &ev.event_notification {
        let _ = writeln!(
            out,
            "  delete_chunks={} new_parent_path={:?} signatures={:?}",
            n.delete_chunks, n.new_parent_path, n.signatures
        );
        if let Some(o) = &n.old_entry {
            entry_line(&mut out, "old", o);
        }
        if let Some(nw) = &n.new_entry {
            entry_line(&mut out, "new", nw);
        }
    }
    out
}
