//! Records the filer meta-log events of each S3 operation (docs/meta-log.md#per-operation) into
//! `tests/fixtures/events/` (run explicitly: `cargo test --test single_node record_events -- --ignored`), and
//! checks that the committed recordings decode and agree with their text dumps.

use crate::common;

use std::time::Duration;

use anyhow::Context as _;
use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketVersioningStatus, CompletedMultipartUpload, CompletedPart,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, ObjectLockMode, Tag,
    Tagging,
};
use base64::Engine as _;
use common::events::{self, dump, encode_all, fixtures_dir, load_events};
use common::{Cluster, NONCURRENT_SINCE_KEY, now_ns, put, set_versioning};
use md5::Digest as _;
use s3_lifecycled::pb::filer_pb::{Entry, SubscribeMetadataResponse};

/// One S3 scenario: its setup runs before `action_since_ns`, the operation under test after.
struct Scenario {
    name: &'static str,
    description: &'static str,
    bucket: String,
    since_ns: i64,
    action_since_ns: i64,
}

/// Gap between the setup and the action, so that their meta-log timestamps separate cleanly.
const SETTLE: Duration = Duration::from_millis(100);

async fn mark_action() -> i64 {
    tokio::time::sleep(SETTLE).await;
    let t = now_ns();
    tokio::time::sleep(SETTLE).await;
    t
}

fn tagging(pairs: &[(&str, &str)]) -> Tagging {
    let tags = pairs
        .iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(*k)
                .value(*v)
                .build()
                .expect("key and value set")
        })
        .collect();
    Tagging::builder()
        .set_tag_set(Some(tags))
        .build()
        .expect("tag set set")
}

/// Creates, uploads `parts` and completes (or aborts) one multipart upload.
async fn multipart(
    s3: &Client,
    bucket: &str,
    key: &str,
    parts: &[Vec<u8>],
    complete: bool,
) -> anyhow::Result<()> {
    let up = s3
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .send()
        .await?;
    let upload_id = up.upload_id().context("no upload id")?.to_string();
    let mut done = Vec::new();
    for (i, body) in parts.iter().enumerate() {
        let n = i32::try_from(i + 1)?;
        let out = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(&upload_id)
            .part_number(n)
            .body(ByteStream::from(body.clone()))
            .send()
            .await
            .with_context(|| format!("UploadPart {n} of {bucket}/{key}"))?;
        done.push(
            CompletedPart::builder()
                .part_number(n)
                .set_e_tag(out.e_tag().map(str::to_string))
                .build(),
        );
    }
    if complete {
        s3.complete_multipart_upload()
            .bucket(bucket)
            .key(key)
            .upload_id(&upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(done))
                    .build(),
            )
            .send()
            .await
            .with_context(|| format!("CompleteMultipartUpload {bucket}/{key}"))?;
    } else {
        s3.abort_multipart_upload()
            .bucket(bucket)
            .key(key)
            .upload_id(&upload_id)
            .send()
            .await
            .with_context(|| format!("AbortMultipartUpload {bucket}/{key}"))?;
    }
    Ok(())
}

/// Runs scenario `name` in a fresh bucket: creates it (with object lock when the name says so),
/// runs the setup and action inside `body`, which returns the action start it marked.
async fn run(
    c: &Cluster,
    name: &'static str,
    description: &'static str,
) -> anyhow::Result<Scenario> {
    let s3 = c.s3_client();
    let bucket = c.unique_bucket(&name.replace('_', "-"));
    let since_ns = now_ns();
    let mut create = s3.create_bucket().bucket(&bucket);
    if name.starts_with("object_lock") {
        create = create.object_lock_enabled_for_bucket(true);
    }
    create
        .send()
        .await
        .with_context(|| format!("CreateBucket {bucket}"))?;
    let b = bucket.as_str();
    let v = |s| set_versioning(&s3, b, s);
    use BucketVersioningStatus::{Enabled, Suspended};
    let action_since_ns = match name {
        "put_new" => {
            let t = mark_action().await;
            put(&s3, b, "docs/a.txt", b"0123456789", None).await;
            t
        }
        "put_overwrite" => {
            put(&s3, b, "docs/a.txt", b"first body", None).await;
            let t = mark_action().await;
            put(&s3, b, "docs/a.txt", b"second, longer body", None).await;
            t
        }
        "put_object_tagging" => {
            put(&s3, b, "a.txt", b"tag me", None).await;
            let t = mark_action().await;
            s3.put_object_tagging()
                .bucket(b)
                .key("a.txt")
                .tagging(tagging(&[("env", "dev"), ("team", "x")]))
                .send()
                .await?;
            t
        }
        "put_with_tagging_header" => {
            let t = mark_action().await;
            s3.put_object()
                .bucket(b)
                .key("a.txt")
                .tagging("env=dev&team=x")
                .body(ByteStream::from_static(b"tagged at put"))
                .send()
                .await?;
            t
        }
        "delete_object_tagging" => {
            s3.put_object()
                .bucket(b)
                .key("a.txt")
                .tagging("env=dev")
                .body(ByteStream::from_static(b"x"))
                .send()
                .await?;
            let t = mark_action().await;
            s3.delete_object_tagging()
                .bucket(b)
                .key("a.txt")
                .send()
                .await?;
            t
        }
        "delete_unversioned" => {
            put(&s3, b, "docs/a.txt", b"to delete", None).await;
            let t = mark_action().await;
            s3.delete_object()
                .bucket(b)
                .key("docs/a.txt")
                .send()
                .await?;
            t
        }
        "folder_marker" => {
            let t = mark_action().await;
            put(&s3, b, "dir/", b"", None).await;
            t
        }
        "copy_object" => {
            put(&s3, b, "src.txt", b"copy source", None).await;
            let t = mark_action().await;
            s3.copy_object()
                .bucket(b)
                .key("dst/copy.txt")
                .copy_source(format!("{b}/src.txt"))
                .send()
                .await?;
            t
        }
        "mpu_complete" => {
            let t = mark_action().await;
            multipart(
                &s3,
                b,
                "mp/two.bin",
                &[vec![b'a'; 5 << 20], b"tail".to_vec()],
                true,
            )
            .await?;
            t
        }
        "mpu_abort" => {
            let t = mark_action().await;
            multipart(&s3, b, "mp/aborted.bin", &[b"part one".to_vec()], false).await?;
            t
        }
        "versioned_put_demotion" => {
            v(Enabled).await;
            let t = mark_action().await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            t
        }
        "versioned_put_three_versions" => {
            v(Enabled).await;
            let t = mark_action().await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            put(&s3, b, "k1", b"v3!!", None).await;
            t
        }
        "versioned_delete_marker" => {
            v(Enabled).await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            let t = mark_action().await;
            s3.delete_object().bucket(b).key("k1").send().await?;
            t
        }
        "versioned_delete_noncurrent_version" => {
            v(Enabled).await;
            let v1 = put(&s3, b, "k1", b"v1", None)
                .await
                .context("no version id")?;
            put(&s3, b, "k1", b"v2!", None).await;
            let t = mark_action().await;
            s3.delete_object()
                .bucket(b)
                .key("k1")
                .version_id(v1)
                .send()
                .await?;
            t
        }
        "versioned_delete_the_delete_marker" => {
            v(Enabled).await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            let dm = s3.delete_object().bucket(b).key("k1").send().await?;
            let marker = dm
                .version_id()
                .context("no delete marker version id")?
                .to_string();
            let t = mark_action().await;
            s3.delete_object()
                .bucket(b)
                .key("k1")
                .version_id(marker)
                .send()
                .await?;
            t
        }
        "versioned_tagging_latest" => {
            v(Enabled).await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            let t = mark_action().await;
            s3.put_object_tagging()
                .bucket(b)
                .key("k1")
                .tagging(tagging(&[("env", "latest")]))
                .send()
                .await?;
            t
        }
        "versioned_tagging_noncurrent" => {
            v(Enabled).await;
            let v1 = put(&s3, b, "k1", b"v1", None)
                .await
                .context("no version id")?;
            put(&s3, b, "k1", b"v2!", None).await;
            let t = mark_action().await;
            s3.put_object_tagging()
                .bucket(b)
                .key("k1")
                .version_id(v1)
                .tagging(tagging(&[("env", "old")]))
                .send()
                .await?;
            t
        }
        "suspended_put_new_key" => {
            v(Enabled).await;
            v(Suspended).await;
            let t = mark_action().await;
            put(&s3, b, "k2", b"null version", None).await;
            t
        }
        "suspended_put_key_with_versions" => {
            v(Enabled).await;
            put(&s3, b, "k1", b"v1", None).await;
            put(&s3, b, "k1", b"v2!", None).await;
            v(Suspended).await;
            let t = mark_action().await;
            put(&s3, b, "k1", b"null on top", None).await;
            t
        }
        "suspended_delete" => {
            v(Enabled).await;
            v(Suspended).await;
            put(&s3, b, "k2", b"null version", None).await;
            let t = mark_action().await;
            s3.delete_object().bucket(b).key("k2").send().await?;
            t
        }
        "preversioning_then_enabled_put" => {
            put(&s3, b, "k1", b"before versioning", None).await;
            v(Enabled).await;
            let t = mark_action().await;
            put(&s3, b, "k1", b"first real version", None).await;
            t
        }
        "suspended_null_then_enabled_put" => {
            v(Enabled).await;
            v(Suspended).await;
            put(&s3, b, "k1", b"null current", None).await;
            v(Enabled).await;
            let t = mark_action().await;
            put(&s3, b, "k1", b"enabled version", None).await;
            t
        }
        "object_lock_governance_put" => {
            let body: &[u8] = b"locked body";
            let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(body));
            let until = DateTime::from_secs(now_ns() / 1_000_000_000 + 3600);
            let t = mark_action().await;
            s3.put_object()
                .bucket(b)
                .key("locked.txt")
                .object_lock_mode(ObjectLockMode::Governance)
                .object_lock_retain_until_date(until)
                .content_md5(md5)
                .body(ByteStream::from_static(body))
                .send()
                .await?;
            t
        }
        "lifecycle_put_and_delete" => {
            let rule = LifecycleRule::builder()
                .id("expire-logs")
                .status(ExpirationStatus::Enabled)
                .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
                .expiration(LifecycleExpiration::builder().days(30).build())
                .build()?;
            let t = mark_action().await;
            s3.put_bucket_lifecycle_configuration()
                .bucket(b)
                .lifecycle_configuration(
                    BucketLifecycleConfiguration::builder()
                        .rules(rule)
                        .build()?,
                )
                .send()
                .await?;
            s3.delete_bucket_lifecycle().bucket(b).send().await?;
            t
        }
        "versioned_mpu_complete" => {
            v(Enabled).await;
            let t = mark_action().await;
            multipart(&s3, b, "mp/v.bin", &[b"only part".to_vec()], true).await?;
            t
        }
        other => anyhow::bail!("unknown scenario {other}"),
    };
    Ok(Scenario {
        name,
        description,
        bucket,
        since_ns,
        action_since_ns,
    })
}

/// Every scenario: name (file stem) and what it does (setup → action).
const SCENARIOS: &[(&str, &str)] = &[
    (
        "put_new",
        "action: PUT docs/a.txt (unversioned, new key, implicit parent dir)",
    ),
    (
        "put_overwrite",
        "setup: PUT docs/a.txt; action: PUT docs/a.txt again with another body",
    ),
    (
        "put_object_tagging",
        "setup: PUT a.txt; action: PutObjectTagging env=dev, team=x",
    ),
    (
        "put_with_tagging_header",
        "action: PUT a.txt with x-amz-tagging: env=dev&team=x",
    ),
    (
        "delete_object_tagging",
        "setup: PUT a.txt with tag env=dev; action: DeleteObjectTagging",
    ),
    (
        "delete_unversioned",
        "setup: PUT docs/a.txt; action: DELETE docs/a.txt",
    ),
    ("folder_marker", "action: PUT dir/ (empty body)"),
    (
        "copy_object",
        "setup: PUT src.txt; action: CopyObject to dst/copy.txt",
    ),
    (
        "mpu_complete",
        "action: CreateMultipartUpload mp/two.bin, UploadPart 5 MiB + 4 B, Complete",
    ),
    (
        "mpu_abort",
        "action: CreateMultipartUpload mp/aborted.bin, UploadPart, Abort",
    ),
    (
        "versioned_put_demotion",
        "setup: versioning Enabled; action: PUT k1 v1, PUT k1 v2",
    ),
    (
        "versioned_put_three_versions",
        "setup: versioning Enabled; action: PUT k1 v1, v2, v3",
    ),
    (
        "versioned_delete_marker",
        "setup: Enabled, PUT k1 v1, v2; action: DELETE k1 (no version id)",
    ),
    (
        "versioned_delete_noncurrent_version",
        "setup: Enabled, PUT k1 v1, v2; action: DELETE k1?versionId=v1",
    ),
    (
        "versioned_delete_the_delete_marker",
        "setup: Enabled, v1, v2, DELETE k1 (marker); action: DELETE k1?versionId=<marker>",
    ),
    (
        "versioned_tagging_latest",
        "setup: Enabled, v1, v2; action: PutObjectTagging k1 (latest)",
    ),
    (
        "versioned_tagging_noncurrent",
        "setup: Enabled, v1, v2; action: PutObjectTagging k1?versionId=v1",
    ),
    (
        "suspended_put_new_key",
        "setup: Enabled then Suspended; action: PUT k2",
    ),
    (
        "suspended_put_key_with_versions",
        "setup: Enabled, PUT k1 v1, v2, Suspended; action: PUT k1 (null version over .versions)",
    ),
    (
        "suspended_delete",
        "setup: Enabled, Suspended, PUT k2 (null); action: DELETE k2",
    ),
    (
        "preversioning_then_enabled_put",
        "setup: unversioned PUT k1, then versioning Enabled; action: PUT k1",
    ),
    (
        "suspended_null_then_enabled_put",
        "setup: Enabled, Suspended, PUT k1 (null current), Enabled; action: PUT k1",
    ),
    (
        "object_lock_governance_put",
        "object-lock bucket; action: PUT locked.txt with GOVERNANCE retention (+1 h) and Content-MD5",
    ),
    (
        "lifecycle_put_and_delete",
        "action: PutBucketLifecycleConfiguration (SDK; Days=30, prefix logs/), then DeleteBucketLifecycle",
    ),
    (
        "versioned_mpu_complete",
        "setup: Enabled; action: CreateMultipartUpload mp/v.bin, one part, Complete",
    ),
];

/// The event part of a `.txt` file; the consistency test regenerates it from the `.bin`.
fn render(events: &[SubscribeMetadataResponse], action_since_ns: i64) -> String {
    let mut out = String::new();
    let mut marked = false;
    for ev in events {
        if !marked && ev.ts_ns >= action_since_ns {
            out.push_str("# ---- action ----\n");
            marked = true;
        }
        out.push_str(&dump(ev));
    }
    out
}

#[tokio::test]
#[ignore = "records fixtures on a live cluster; run with --ignored to refresh tests/fixtures/events"]
async fn record_meta_log_events_per_s3_operation() {
    let c = common::cluster();
    let start = now_ns();
    let mut recorded = Vec::new();
    for (name, description) in SCENARIOS {
        recorded.push(
            run(c, name, description)
                .await
                .unwrap_or_else(|e| panic!("scenario {name}: {e:?}")),
        );
    }
    // Let asynchronous stamps (if any) land before the bounded subscription.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let until = now_ns();
    let all = c
        .subscribe_events("/buckets/", start - 1, until)
        .await
        .unwrap();
    let version = weed_version(c);
    let dir = fixtures_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for s in &recorded {
        let events: Vec<_> = all
            .iter()
            .filter(|e| e.ts_ns > s.since_ns && events::in_bucket(e, &s.bucket))
            .cloned()
            .collect();
        let action = events
            .iter()
            .filter(|e| e.ts_ns >= s.action_since_ns)
            .count();
        assert!(action > 0, "scenario {} recorded no action events", s.name);
        let bin = encode_all(&events);
        assert_eq!(events::decode_all(&bin).unwrap(), events);
        std::fs::write(dir.join(format!("{}.bin", s.name)), bin).unwrap();
        let header = format!(
            "# scenario: {}\n# {}\n# weed: {version}\n# bucket: {}\n# since_ns: {}\n# action_since_ns: {}\n# until_ns: {until}\n# events: {} (action: {action})\n",
            s.name,
            s.description,
            s.bucket,
            s.since_ns,
            s.action_since_ns,
            events.len(),
        );
        std::fs::write(
            dir.join(format!("{}.txt", s.name)),
            header + &render(&events, s.action_since_ns),
        )
        .unwrap();
    }
}

fn weed_version(c: &Cluster) -> String {
    std::process::Command::new(&c.weed_bin)
        .arg("version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// The committed `.bin` files decode, and each `.txt` dump was generated from exactly its `.bin`.
#[test]
fn recordings_decode_and_match_their_text_dumps() {
    let names = events::scenarios();
    let expected: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
    for n in &expected {
        assert!(
            names.iter().any(|have| have == n),
            "missing recording {n}; run record_events --ignored"
        );
    }
    for name in names {
        let evs = load_events(&name);
        assert!(!evs.is_empty(), "{name}: empty recording");
        assert!(
            evs.windows(2).all(|w| w[0].ts_ns < w[1].ts_ns),
            "{name}: ts_ns not strictly increasing"
        );
        let txt = std::fs::read_to_string(fixtures_dir().join(format!("{name}.txt"))).unwrap();
        let since = events::action_since_ns(&name);
        assert!(
            txt.ends_with(&render(&evs, since)),
            "{name}.txt does not match {name}.bin"
        );
        assert!(
            !events::load_action_events(&name).is_empty(),
            "{name}: no action events"
        );
    }
}

// ---- Facts the recordings show (and tests/fixtures/events/README.md states) ----

fn entries(ev: &SubscribeMetadataResponse) -> (Option<&Entry>, Option<&Entry>) {
    let n = ev
        .event_notification
        .as_ref()
        .expect("recorded events have a notification");
    (n.old_entry.as_deref(), n.new_entry.as_deref())
}

/// Action events that add Noncurrent-Since-Ns to an entry (old lacks it or differs, new has it).
fn stamps(scenario: &str) -> Vec<(String, String)> {
    events::load_action_events(scenario)
        .iter()
        .filter_map(|ev| {
            let (old, new) = entries(ev);
            let new = new?;
            let stamped = new.extended.get(NONCURRENT_SINCE_KEY)?;
            let before = old.and_then(|o| o.extended.get(NONCURRENT_SINCE_KEY));
            (before != Some(stamped)).then(|| (ev.directory.clone(), new.name.clone()))
        })
        .collect()
}

#[test]
fn overwrite_is_one_update_not_delete_and_create() {
    let evs = events::load_action_events("put_overwrite");
    let kinds: Vec<_> = evs.iter().map(events::kind).collect();
    assert_eq!(kinds, ["UPDATE"]);
    let (old, new) = entries(&evs[0]);
    assert_ne!(old.unwrap().chunks, new.unwrap().chunks);
}

#[test]
fn put_object_tagging_changes_extended_but_not_mtime() {
    let evs = events::load_action_events("put_object_tagging");
    assert_eq!(evs.len(), 1);
    let (old, new) = entries(&evs[0]);
    let (old, new) = (old.unwrap(), new.unwrap());
    assert_eq!(
        old.attributes.as_ref().unwrap().mtime,
        new.attributes.as_ref().unwrap().mtime
    );
    assert!(new.extended.contains_key("X-Amz-Tagging-env"));
    assert!(!old.extended.contains_key("X-Amz-Tagging-env"));
}

#[test]
fn each_demotion_stamps_only_the_version_it_demotes() {
    let s = stamps("versioned_put_three_versions");
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(
        s.iter()
            .all(|(dir, name)| dir.ends_with("/k1.versions") && name.starts_with("v_"))
    );
    assert_ne!(s[0].1, s[1].1, "v1 is not re-stamped when v2 is demoted");
}

#[test]
fn preversioning_null_object_is_not_stamped_when_a_version_supersedes_it() {
    assert!(stamps("preversioning_then_enabled_put").is_empty());
    // The bare `k1` file is not touched at all by the Enabled PUT.
    let touched_bare = events::load_action_events("preversioning_then_enabled_put")
        .iter()
        .any(|ev| {
            let (old, new) = entries(ev);
            [old, new].iter().flatten().any(|e| e.name == "k1")
        });
    assert!(!touched_bare);
}

#[test]
fn suspended_null_current_is_not_stamped_when_an_enabled_put_supersedes_it() {
    assert!(stamps("suspended_null_then_enabled_put").is_empty());
}

#[test]
fn suspended_put_stamps_the_previous_latest_version() {
    let s = stamps("suspended_put_key_with_versions");
    assert_eq!(s.len(), 1, "{s:?}");
    assert!(s[0].0.ends_with("/k1.versions"));
    let pointer = events::load_action_events("suspended_put_key_with_versions")
        .into_iter()
        .filter_map(|ev| entries(&ev).1.cloned())
        .find(|e| e.name == "k1.versions")
        .unwrap();
    let keys: Vec<_> = pointer.extended.keys().map(String::as_str).collect();
    assert_eq!(keys, ["Seaweed-X-Amz-Null-Version-Is-Latest"]);
}

#[test]
fn deleting_the_delete_marker_leaves_a_stale_stamp_on_the_restored_latest() {
    let all = load_events("versioned_delete_the_delete_marker");
    let action = events::load_action_events("versioned_delete_the_delete_marker");
    let pointer = action
        .iter()
        .filter_map(|ev| entries(ev).1)
        .find(|e| e.name == "k1.versions")
        .expect("the .versions pointer moves back");
    let restored =
        String::from_utf8(pointer.extended["Seaweed-X-Amz-Latest-Version-File-Name"].clone())
            .unwrap();
    assert!(
        !pointer
            .extended
            .contains_key("Seaweed-X-Amz-Latest-Version-Is-Delete-Marker")
    );
    // No action event touches the restored version, and its last state still carries the stamp.
    assert!(
        !action
            .iter()
            .any(|ev| entries(ev).1.is_some_and(|e| e.name == restored))
    );
    let last = all
        .iter()
        .rev()
        .filter_map(|ev| entries(ev).1)
        .find(|e| e.name == restored)
        .unwrap();
    assert!(last.extended.contains_key(NONCURRENT_SINCE_KEY));
}

#[test]
fn new_entry_chunks_carry_only_the_structured_fid() {
    for name in events::scenarios() {
        for ev in load_events(&name) {
            if let Some(new) = entries(&ev).1 {
                for c in &new.chunks {
                    assert!(c.file_id.is_empty() && c.fid.is_some(), "{name}: {c:?}");
                }
            }
        }
    }
}
