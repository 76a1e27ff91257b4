//! Cursor store against a real filer: round trip, strictness (corrupt files are
//! errors naming their path, never cold starts), Go cursor files, and
//! detection of a second writer.

use crate::common;

use std::collections::BTreeMap;

use s3_lifecycled::engine::cursor::{BucketCursor, GoCursor, GoSeen, ShardCursor};
use s3_lifecycled::pb::filer_pb::{Entry, FuseAttributes};
use s3_lifecycled::seaweed::cursor::{CursorError, CursorStore, GENERATION_KEY, load_go_from};
use s3_lifecycled::seaweed::filer::{FilerClient, FilerError};

use common::write_inline_file;

/// A cursor directory nobody else uses.
fn unique_dir(tag: &str) -> String {
    let salt: u32 = rand::random();
    format!("/etc/s3/lifecycle/test-{tag}-{salt:08x}")
}

fn cursor(shard: u8, ts: i64) -> ShardCursor {
    let mut buckets = BTreeMap::new();
    buckets.insert(
        "alpha".to_string(),
        BucketCursor {
            ts_ns: ts,
            rule_set_hash: [7; 32],
            promoted_hash: [8; 32],
            last_walked_ns: ts - 1,
            halted: Some("RETRY_LATER: k".into()),
            completed_ns: ts - 2,
            rules: [(
                "00112233aabbccdd/expiration_days".to_string(),
                s3_lifecycled::engine::cursor::ActionProgress::at(ts),
            )]
            .into_iter()
            .collect(),
            walk_resume: None,
            backlog: Default::default(),
            rewalk: None,
        },
    );
    ShardCursor {
        version: 1,
        shard_id: shard,
        updated_ns: 0,
        ts_ns: ts,
        rule_set_hash: [1; 32],
        promoted_hash: [2; 32],
        last_walked_ns: 0,
        buckets,
        filers: [(
            "127.0.0.1:8888.18888".to_string(),
            1_700_000_000_000_000_000,
        )]
        .into(),
        go_cursor: Some(GoSeen {
            mtime_s: 1_700_000_000,
            ts_ns: 1_699_999_999_000_000_000,
        }),
    }
}

#[tokio::test]
async fn missing_cursor_is_cold_start_and_round_trip_works() {
    let c = common::cluster().filer().await;
    let store = CursorStore::new(c.clone(), &unique_dir("rt"));
    assert_eq!(store.load(4).await.unwrap(), None);

    let first = cursor(4, 1_700_000_000_000_000_123);
    store.save(&first, 1_800_000_000_123_456_789).await.unwrap();
    let loaded = store.load(4).await.unwrap().expect("saved cursor is there");
    assert_eq!(loaded.updated_ns, 1_800_000_000_123_456_789);
    assert_eq!(
        ShardCursor {
            updated_ns: 0,
            ..loaded
        },
        first
    );

    // A second save updates in place (UpdateEntry path) and bumps the generation.
    let second = cursor(4, 1_700_000_000_000_000_999);
    store
        .save(&second, 1_800_000_001_000_000_000)
        .await
        .unwrap();
    let loaded = store.load(4).await.unwrap().unwrap();
    assert_eq!(loaded.ts_ns, 1_700_000_000_000_000_999);
    let entry = c
        .lookup(store.dir(), "shard-04.json")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.extended[GENERATION_KEY], b"2");
    let attrs = entry.attributes.unwrap();
    assert_eq!(attrs.file_size as usize, entry.content.len());
    assert_eq!(attrs.file_mode & 0o777, 0o644);
    assert_eq!(attrs.mtime, 1_800_000_001);

    // A fresh store (another process) reads the same state.
    let other = CursorStore::new(common::cluster().filer().await, store.dir());
    assert_eq!(other.load(4).await.unwrap().unwrap(), loaded);

    assert!(store.reset(4).await.unwrap(), "the file was there");
    assert_eq!(store.load(4).await.unwrap(), None);
    // Resetting a missing file is fine (runbook step may be repeated).
    assert!(!store.reset(4).await.unwrap(), "no file left to delete");
}

/// `cursor reset --yes` of a shard without a cursor file said "reset: deleted …": the filer
/// deletes a missing entry without complaint. It says the shard is already cold instead.
#[tokio::test]
async fn cursor_reset_of_a_shard_without_a_file_does_not_claim_a_deletion() {
    let dir = unique_dir("reset");
    let store = CursorStore::new(common::cluster().filer().await, &dir);
    store
        .save(&cursor(2, 1_000), 1_800_000_000_000_000_000)
        .await
        .unwrap();
    let filer = common::cluster().filer_grpc_addr().to_string();
    let env = [("S3_LIFECYCLED__CURSOR__DIR", dir.as_str())];
    let args = [
        "cursor",
        "reset",
        "--filer",
        filer.as_str(),
        "--shards",
        "2-3",
        "--yes",
    ];
    let out = common::run_raw(&args, &env).await;
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout
            .contains(&format!("shard=02 reset: deleted {dir}/shard-02.json")),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains(&format!(
            "shard=03 no cursor file {dir}/shard-03.json: already cold"
        )),
        "{}",
        out.describe()
    );
    assert_eq!(
        out.stdout.matches("deleted ").count(),
        1,
        "{}",
        out.describe()
    );
}

fn expect_corrupt(err: CursorError, path: &str, what: &str) {
    let msg = err.to_string();
    assert!(matches!(err, CursorError::Corrupt { .. }), "{err:?}");
    assert!(msg.contains(path), "message must name {path}: {msg}");
    assert!(msg.contains(what), "message must say {what:?}: {msg}");
    assert!(msg.contains("delete"), "message must say how to fix: {msg}");
}

#[tokio::test]
async fn corrupt_cursor_files_are_errors_naming_the_path() {
    let c = common::cluster().filer().await;
    let dir = unique_dir("corrupt");
    let store = CursorStore::new(c.clone(), &dir);
    let path = store.path(2);

    write_inline_file(&c, &dir, "shard-02.json", b"\x00junk{{").await;
    expect_corrupt(store.load(2).await.unwrap_err(), &path, "invalid JSON");

    write_inline_file(&c, &dir, "shard-02.json", b"").await;
    expect_corrupt(store.load(2).await.unwrap_err(), &path, "empty");

    // Wrong shard: shard 3's content in shard 2's file.
    write_inline_file(&c, &dir, "shard-02.json", &cursor(3, 5).to_json()).await;
    expect_corrupt(store.load(2).await.unwrap_err(), &path, "shard_id 3");

    let good = String::from_utf8(cursor(2, 5).to_json()).unwrap();
    let v9 = good.replace("\"version\": 1", "\"version\": 9");
    write_inline_file(&c, &dir, "shard-02.json", v9.as_bytes()).await;
    expect_corrupt(store.load(2).await.unwrap_err(), &path, "version 9");

    // A 31-byte hash (base64 of 31 bytes) must not pass.
    let short = good.replace(
        "\"rule_set_hash\": \"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\"",
        "\"rule_set_hash\": \"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ==\"",
    );
    assert_ne!(short, good, "the replacement must hit");
    write_inline_file(&c, &dir, "shard-02.json", short.as_bytes()).await;
    expect_corrupt(store.load(2).await.unwrap_err(), &path, "31 bytes");

    // Out-of-range shards are refused before any I/O.
    assert!(matches!(
        store.load(16).await.unwrap_err(),
        CursorError::BadShard(16)
    ));
}

#[tokio::test]
async fn go_cursor_files_are_read_strictly() {
    let c = common::cluster().filer().await;
    let dir = unique_dir("go");
    // The Go encoder's output (docs/go-cursor.md#format): two-space indent, trailing
    // newline, last_walked_ns present because non-zero.
    let zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let ones = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    let go_json = format!(
        "{{\n  \"version\": 1,\n  \"shard_id\": 3,\n  \"ts_ns\": 1700000000000000123,\n  \
         \"rule_set_hash\": \"{ones}\",\n  \"promoted_hash\": \"{zero}\",\n  \
         \"last_walked_ns\": 1700000000000000000\n}}\n"
    );
    write_inline_file(&c, &dir, "shard-03.json", go_json.as_bytes()).await;
    let go = load_go_from(&c, &dir, 3).await.unwrap().unwrap();
    assert_eq!(
        go,
        GoCursor {
            version: 1,
            shard_id: 3,
            ts_ns: 1_700_000_000_000_000_123,
            rule_set_hash: [1; 32],
            promoted_hash: [0; 32],
            last_walked_ns: 1_700_000_000_000_000_000,
        }
    );

    assert_eq!(load_go_from(&c, &dir, 4).await.unwrap(), None);
    // Wrong shard in the Go file is an error too.
    write_inline_file(&c, &dir, "shard-05.json", go_json.as_bytes()).await;
    let err = load_go_from(&c, &dir, 5).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!("{dir}/shard-05.json")),
        "{err}"
    );
}

#[tokio::test]
async fn second_writer_is_detected() {
    let dir = unique_dir("race");
    let a = CursorStore::new(common::cluster().filer().await, &dir);
    let b = CursorStore::new(common::cluster().filer().await, &dir);

    // Both see "absent"; A creates first, B's exclusive create must fail.
    assert_eq!(a.load(6).await.unwrap(), None);
    assert_eq!(b.load(6).await.unwrap(), None);
    a.save(&cursor(6, 10), 1_800_000_000_000_000_000)
        .await
        .unwrap();
    let err = b
        .save(&cursor(6, 20), 1_800_000_000_000_000_001)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CursorError::ConcurrentWriter { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("shard-06.json"), "{err}");

    // Both load generation 1; A saves (→2); B's update expecting 1 must fail.
    assert!(b.load(6).await.unwrap().is_some());
    a.save(&cursor(6, 30), 1_800_000_000_000_000_002)
        .await
        .unwrap();
    let err = b
        .save(&cursor(6, 40), 1_800_000_000_000_000_003)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CursorError::ConcurrentWriter { .. }),
        "{err:?}"
    );
    // A's data survived.
    assert_eq!(a.load(6).await.unwrap().unwrap().ts_ns, 30);
}

#[tokio::test]
async fn filer_client_basics() {
    let c = common::cluster().filer().await;
    assert_eq!(c.buckets_root().await.unwrap(), "/buckets");
    // http:// form is accepted too.
    let c2 = FilerClient::connect(&common::cluster().filer_grpc_url())
        .await
        .unwrap();
    assert_eq!(c2.lookup("/", "no-such-entry-xyz").await.unwrap(), None);
    assert!(
        c2.list_page("/no/such/dir", "", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // An exclusive create of an existing entry is AlreadyExists.
    let dir = unique_dir("excl");
    write_inline_file(&c, &dir, "f", b"x").await;
    let err = c
        .create_entry(
            &dir,
            Entry {
                name: "f".into(),
                attributes: Some(FuseAttributes::default()),
                ..Default::default()
            },
            true,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, FilerError::AlreadyExists { .. }), "{err:?}");
}
