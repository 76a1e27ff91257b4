//! Filer checks around a delete, pure: what to look up ([`Check::probes`]) and
//! what the answers mean ([`judge`]). Two checks exist:
//!
//! - **Confirm** an answer that says "nothing to do" but that the gateway also
//!   gives when its own live fetch or lock check fails (`NOOP_RESOLVED`
//!   `NOT_FOUND…`, `SKIPPED_OBJECT_LOCK`; docs/lifecycle-delete.md#server-lookup-failures).
//!   The match is resolved only if the entry is really gone or changed; an
//!   entry still there unchanged stays unresolved and is retried next pass.
//! - **Before an abort**: an `.uploads/<id>` folder can outlive the completion
//!   of its upload, and aborting it would free the published object's chunks
//!   (docs/lifecycle-delete.md#completed-upload-leftovers). The abort is sent
//!   only when neither the destination entry nor a version under
//!   `<key>.versions` carries this upload's completion stamp.
//!
//! Probe paths are bucket-relative; the shell joins them to the buckets root.

use crate::engine::delete::{CallResult, DeleteOutcome, DeleteRequest, UPLOADS_PREFIX};
use crate::engine::keys::{VERSION_FILE_PREFIX, VERSIONS_SUFFIX};
use crate::engine::lock::active_lock;
use crate::engine::reclaim::{Parts, parts_of};
use crate::engine::{ActionKind, EntryIdentity, Nanos};
use crate::pb::filer_pb::Entry;

/// Extended key the gateway stamps on the object (or version) a multipart
/// completion publishes: the upload id.
pub const UPLOAD_ID_KEY: &str = "X-Seaweedfs-Upload-Id";

/// One filer read, bucket-relative (`dir` is `""` for the bucket folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `LookupDirectoryEntry(dir, name)`: zero or one entry.
    Lookup {
        /// Bucket-relative directory.
        dir: String,
        name: String,
    },
    /// Every entry of `dir` (a missing directory lists as empty).
    List {
        /// Bucket-relative directory.
        dir: String,
    },
}

impl Probe {
    /// The probe's full filer directory under `buckets_root` and `bucket`.
    pub fn full_dir(&self, buckets_root: &str, bucket: &str) -> String {
        let dir = match self {
            Probe::Lookup { dir, .. } | Probe::List { dir } => dir,
        };
        let base = format!("{}/{bucket}", buckets_root.trim_end_matches('/'));
        if dir.is_empty() {
            base
        } else {
            format!("{base}/{dir}")
        }
    }
}

/// Why a check is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// Confirm this answer before accepting it as final.
    Confirm(CallResult),
    /// Look for the completion stamp before an abort.
    BeforeAbort,
}

/// A check of one delete: the request, the logical key it is about (an
/// upload's destination key for an abort) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub request: DeleteRequest,
    /// Logical object key (for AbortMpu: the destination key).
    pub key: String,
    pub purpose: Purpose,
}

/// What a check decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The match is settled: the entry is gone or changed since.
    Settled,
    /// Send the delete (an abort with no completion stamp found).
    Send,
    /// The upload was completed: its `.uploads/<id>` is a leftover. Never
    /// abort it; the match is settled and counted.
    CompletedLeftover(String),
    /// The object is under an active lock: unresolved, retried next pass.
    Locked(String),
    /// The answer could not be confirmed (a probe failed): unresolved,
    /// retried next pass, no halt.
    Unconfirmed(String),
    /// The gateway answered the entry gone, or refused it, but a store still
    /// holds it unchanged: the gateway read another store than ours (several
    /// filers, docs/lifecycle-delete.md#server-lookup-failures). The pass
    /// sends the delete again, which the gateways' round-robin may give to
    /// another one; past its resends it is [`Verdict::Unconfirmed`].
    StillThere(String),
}

impl Verdict {
    /// True when the match stays unresolved (the cursor must not pass it).
    pub fn unresolved(&self) -> bool {
        matches!(
            self,
            Verdict::Locked(_) | Verdict::Unconfirmed(_) | Verdict::StillThere(_)
        )
    }
}

/// `dir`, `name` of a bucket-relative key.
fn split_key(key: &str) -> (String, String) {
    let (d, n) = key.rsplit_once('/').unwrap_or(("", key));
    (d.to_string(), n.to_string())
}

/// True for an answer the gateway also gives when its own filer read failed:
/// its live fetch maps every error to `NOT_FOUND`, and every lock-check error
/// to `SKIPPED_OBJECT_LOCK` (docs/lifecycle-delete.md#server-lookup-failures).
/// An abort's `NOT_FOUND` comes from a successful existence check, so it is
/// final.
pub fn needs_confirmation(request: &DeleteRequest, result: &CallResult) -> bool {
    if request.kind == ActionKind::AbortMpu {
        return false;
    }
    match result.outcome {
        DeleteOutcome::SkippedObjectLock => true,
        DeleteOutcome::NoopResolved => {
            let r = result.reason.trim_start();
            r.starts_with("NOT_FOUND") || r.starts_with("BUCKET_NOT_FOUND")
        }
        _ => false,
    }
}

impl Check {
    /// The confirmation of `result` for `request` about logical `key`, when
    /// the answer needs one ([`needs_confirmation`]).
    pub fn confirm(key: &str, request: &DeleteRequest, result: &CallResult) -> Option<Check> {
        needs_confirmation(request, result).then(|| Check {
            request: request.clone(),
            key: key.to_string(),
            purpose: Purpose::Confirm(result.clone()),
        })
    }

    /// The stamp check before aborting `request` (an AbortMpu) whose
    /// destination is `key`.
    pub fn before_abort(key: &str, request: &DeleteRequest) -> Check {
        Check {
            request: request.clone(),
            key: key.to_string(),
            purpose: Purpose::BeforeAbort,
        }
    }

    /// The upload id of an abort request (`.uploads/<id>`).
    pub fn upload_id(&self) -> &str {
        self.request
            .object_path
            .strip_prefix(UPLOADS_PREFIX)
            .unwrap_or("")
    }

    /// The bytes of an abort's upload parts and the volumes they are in,
    /// from the answers to [`probes`](Self::probes) (`None`: not an abort,
    /// or the listing failed).
    pub fn parts(&self, answers: &[Result<Vec<Entry>, String>]) -> Option<Parts> {
        if !matches!(self.purpose, Purpose::BeforeAbort) {
            return None;
        }
        let parts = answers.get(STAMP_PROBES)?.as_ref().ok()?;
        Some(parts_of(parts))
    }

    /// The filer reads the check needs, in the order [`judge`] expects.
    pub fn probes(&self) -> Vec<Probe> {
        let (dir, name) = split_key(&self.key);
        let versions = format!("{}{VERSIONS_SUFFIX}", self.key);
        match &self.purpose {
            Purpose::BeforeAbort => vec![
                Probe::Lookup { dir, name },
                Probe::List { dir: versions },
                // The parts, for the bytes the abort frees
                // (docs/reclaimed-space.md); never part of the verdict.
                Probe::List {
                    dir: self.request.object_path.clone(),
                },
            ],
            Purpose::Confirm(_) => {
                let v = self.request.version_id.as_str();
                if v.is_empty() {
                    // The latest: the bare entry, or on a versioned bucket a
                    // file under `<key>.versions` (the identity tells which).
                    vec![Probe::Lookup { dir, name }, Probe::List { dir: versions }]
                } else if v == "null" {
                    // The null version is the bare entry, except a delete
                    // marker made while versioning was Suspended: that one
                    // is `<key>.versions/v_null`, and 4.48's gateway answers
                    // NOT_FOUND for it (docs/lifecycle-delete.md#null-markers).
                    vec![
                        Probe::Lookup { dir, name },
                        Probe::Lookup {
                            dir: versions,
                            name: format!("{VERSION_FILE_PREFIX}null"),
                        },
                    ]
                } else {
                    let name = format!("{VERSION_FILE_PREFIX}{v}");
                    vec![Probe::Lookup {
                        dir: versions,
                        name,
                    }]
                }
            }
        }
    }
}

/// How many of an abort's probes decide its verdict (the completion stamp on
/// the destination key); the one after them lists the parts.
const STAMP_PROBES: usize = 2;

/// Decides a check from the answers to its [`Check::probes`] (same order;
/// each the entries found, or why the read failed), at `now`.
pub fn judge(check: &Check, answers: &[Result<Vec<Entry>, String>], now: Nanos) -> Verdict {
    let subject = format!("{}/{}", check.request.bucket, check.request.object_path);
    if answers.len() != check.probes().len() {
        return Verdict::Unconfirmed(format!(
            "{subject}: {} filer answers for {} probes",
            answers.len(),
            check.probes().len()
        ));
    }
    // The abort's parts listing only counts bytes: a failure there must
    // not keep a stale upload alive.
    let answers = match &check.purpose {
        Purpose::BeforeAbort => &answers[..STAMP_PROBES],
        Purpose::Confirm(_) => answers,
    };
    if let Some(e) = answers.iter().find_map(|a| a.as_ref().err()) {
        let what = match &check.purpose {
            Purpose::BeforeAbort => "abort not sent, completion stamp unknown",
            Purpose::Confirm(_) => "answer not confirmed",
        };
        return Verdict::Unconfirmed(format!("{subject}: {what}: filer read failed: {e}"));
    }
    let entries = answers
        .iter()
        .flat_map(|a| a.as_ref().ok().into_iter().flatten());
    match &check.purpose {
        Purpose::BeforeAbort => {
            let id = check.upload_id();
            let stamped = entries.into_iter().find(|e| {
                !id.is_empty()
                    && e.extended
                        .get(UPLOAD_ID_KEY)
                        .is_some_and(|v| v.as_slice() == id.as_bytes())
            });
            match stamped {
                Some(e) => Verdict::CompletedLeftover(format!(
                    "{subject}: upload {id} was completed into {}/{} ({}); its leftover folder is not aborted",
                    check.request.bucket, check.key, e.name
                )),
                None => Verdict::Send,
            }
        }
        Purpose::Confirm(result) => {
            match entries
                .into_iter()
                .find(|e| EntryIdentity::of(e) == check.request.identity)
            {
                None => Verdict::Settled,
                Some(e) => match active_lock(e, now) {
                    Some(lock) => Verdict::Locked(format!("{subject}: {lock}")),
                    None => Verdict::StillThere(format!(
                        "{subject}: answered {} {} but the entry is still there, unchanged",
                        result.outcome.label(),
                        result.reason
                    )),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RuleHash;
    use crate::pb::filer_pb::FuseAttributes;

    fn entry(name: &str, mtime: i64) -> Entry {
        Entry {
            name: name.into(),
            attributes: Some(FuseAttributes {
                mtime,
                file_size: 3,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn delete(kind: ActionKind, path: &str, version: &str, e: &Entry) -> DeleteRequest {
        DeleteRequest {
            bucket: "b".into(),
            object_path: path.into(),
            version_id: version.into(),
            rule_hash: RuleHash::default(),
            kind,
            identity: EntryIdentity::of(e),
        }
    }

    #[test]
    fn only_answers_a_failed_gateway_read_can_produce_are_confirmed() {
        let e = entry("k", 1);
        let exp = delete(ActionKind::ExpirationDays, "d/k", "", &e);
        let ok = |o, r: &str| CallResult::answered(o, r);
        assert!(needs_confirmation(
            &exp,
            &ok(DeleteOutcome::NoopResolved, "NOT_FOUND")
        ));
        assert!(needs_confirmation(
            &exp,
            &ok(DeleteOutcome::SkippedObjectLock, "object under legal hold")
        ));
        assert!(!needs_confirmation(
            &exp,
            &ok(DeleteOutcome::NoopResolved, "STALE_IDENTITY")
        ));
        assert!(!needs_confirmation(&exp, &ok(DeleteOutcome::Done, "")));
        let abort = DeleteRequest::abort_mpu("b", "u1", RuleHash::default(), EntryIdentity::of(&e));
        assert!(!needs_confirmation(
            &abort,
            &ok(DeleteOutcome::NoopResolved, "NOT_FOUND")
        ));
    }

    #[test]
    fn probes_name_the_bare_entry_or_the_version_file() {
        let e = entry("k", 1);
        let r = CallResult::answered(DeleteOutcome::NoopResolved, "NOT_FOUND");
        let c = Check::confirm(
            "d/k",
            &delete(ActionKind::ExpirationDays, "d/k", "", &e),
            &r,
        );
        assert_eq!(
            c.unwrap().probes(),
            [
                Probe::Lookup {
                    dir: "d".into(),
                    name: "k".into()
                },
                Probe::List {
                    dir: "d/k.versions".into()
                }
            ]
        );
        let c = Check::confirm("k", &delete(ActionKind::NoncurrentDays, "k", "abc", &e), &r);
        let p = c.unwrap().probes();
        assert_eq!(
            p,
            [Probe::Lookup {
                dir: "k.versions".into(),
                name: "v_abc".into()
            }]
        );
        assert_eq!(p[0].full_dir("/buckets/", "b"), "/buckets/b/k.versions");
        let a = Check::before_abort(
            "k",
            &DeleteRequest::abort_mpu("b", "u1", RuleHash::default(), EntryIdentity::of(&e)),
        );
        assert_eq!(a.upload_id(), "u1");
        assert_eq!(
            a.probes()[1].full_dir("/buckets", "b"),
            "/buckets/b/k.versions"
        );
    }

    /// A delete marker made while versioning was Suspended lives at
    /// `<key>.versions/v_null`; the gateway cannot fetch it and answers
    /// NOT_FOUND, and the check looked only at the bare `<key>`, so the
    /// marker stayed while every pass journaled it as resolved.
    #[test]
    fn a_suspended_null_marker_answered_not_found_was_taken_as_gone() {
        let mut marker = entry("v_null", 7);
        marker
            .extended
            .insert(crate::engine::keys::DELETE_MARKER.into(), b"true".to_vec());
        let req = delete(ActionKind::ExpiredDeleteMarker, "k", "null", &marker);
        let r = CallResult::answered(DeleteOutcome::NoopResolved, "NOT_FOUND");
        let c = Check::confirm("k", &req, &r).unwrap();
        assert_eq!(
            c.probes()[1],
            Probe::Lookup {
                dir: "k.versions".into(),
                name: "v_null".into()
            }
        );
        let v = judge(&c, &[Ok(vec![]), Ok(vec![marker.clone()])], 100);
        assert!(
            matches!(&v, Verdict::StillThere(s) if s.contains("still there")),
            "{v:?}"
        );
        assert_eq!(judge(&c, &[Ok(vec![]), Ok(vec![])], 100), Verdict::Settled);
    }

    #[test]
    fn a_not_found_answer_for_an_entry_still_there_stays_unresolved() {
        let e = entry("k", 7);
        let req = delete(ActionKind::ExpirationDays, "k", "", &e);
        let r = CallResult::answered(DeleteOutcome::NoopResolved, "NOT_FOUND");
        let c = Check::confirm("k", &req, &r).unwrap();
        let v = judge(&c, &[Ok(vec![e.clone()]), Ok(vec![])], 100);
        assert!(v.unresolved(), "{v:?}");
        assert!(matches!(&v, Verdict::StillThere(s) if s.contains("still there")));
        // The latest version of a versioned key lives under k.versions.
        let mut version = e.clone();
        version.name = "v_1".into();
        assert!(judge(&c, &[Ok(vec![]), Ok(vec![version])], 100).unresolved());
        // Gone, or changed since: settled.
        assert_eq!(judge(&c, &[Ok(vec![]), Ok(vec![])], 100), Verdict::Settled);
        assert_eq!(
            judge(&c, &[Ok(vec![entry("k", 8)]), Ok(vec![])], 100),
            Verdict::Settled
        );
        // The check itself failed: not confirmed.
        assert!(judge(&c, &[Ok(vec![]), Err("unavailable".into())], 100).unresolved());
        assert!(judge(&c, &[], 100).unresolved());
    }

    #[test]
    fn a_locked_entry_is_locked_until_its_date() {
        let mut e = entry("v_1", 7);
        e.extended.insert(
            crate::engine::lock::RETAIN_UNTIL_KEY.into(),
            b"1000".to_vec(),
        );
        let req = delete(ActionKind::NoncurrentDays, "k", "1", &e);
        let r = CallResult::answered(DeleteOutcome::SkippedObjectLock, "locked");
        let c = Check::confirm("k", &req, &r).unwrap();
        let before = judge(&c, &[Ok(vec![e.clone()])], 999_000_000_000);
        assert!(matches!(before, Verdict::Locked(_)), "{before:?}");
        // Past the date the gateway's refusal was its lock check failing:
        // still unresolved, the delete is tried again next pass.
        let after = judge(&c, &[Ok(vec![e])], 1_001_000_000_000);
        assert!(matches!(after, Verdict::StillThere(_)), "{after:?}");
    }

    #[test]
    fn an_abort_waits_for_the_stamp_check() {
        let e = entry("k", 7);
        let req = DeleteRequest::abort_mpu("b", "u1", RuleHash::default(), EntryIdentity::of(&e));
        let c = Check::before_abort("d/k", &req);
        let parts = || Ok(vec![entry("0001.part", 5), entry("0002.part", 6)]);
        assert_eq!(
            judge(&c, &[Ok(vec![]), Ok(vec![]), parts()], 0),
            Verdict::Send
        );
        let mut stamped = entry("k", 7);
        stamped
            .extended
            .insert(UPLOAD_ID_KEY.into(), b"u1".to_vec());
        let v = judge(&c, &[Ok(vec![stamped.clone()]), Ok(vec![]), parts()], 0);
        assert!(matches!(v, Verdict::CompletedLeftover(_)), "{v:?}");
        let v = judge(
            &c,
            &[Ok(vec![]), Ok(vec![entry("v_x", 1), stamped]), parts()],
            0,
        );
        assert!(matches!(v, Verdict::CompletedLeftover(_)), "{v:?}");
        let mut other = entry("k", 7);
        other.extended.insert(UPLOAD_ID_KEY.into(), b"u2".to_vec());
        assert_eq!(
            judge(&c, &[Ok(vec![other]), Ok(vec![]), parts()], 0),
            Verdict::Send
        );
        let v = judge(&c, &[Ok(vec![]), Err("down".into()), parts()], 0);
        assert!(v.unresolved(), "{v:?}");
    }

    /// The parts listing counts the bytes an abort frees
    /// (docs/reclaimed-space.md); when it fails the abort still goes out.
    #[test]
    fn an_aborts_parts_are_counted_and_their_listing_never_blocks_it() {
        let e = entry("k", 7);
        let req = DeleteRequest::abort_mpu("b", "u1", RuleHash::default(), EntryIdentity::of(&e));
        let c = Check::before_abort("d/k", &req);
        let parts = vec![entry("0001.part", 5), entry("0002.part", 6)];
        assert_eq!(
            c.probes()[2],
            Probe::List {
                dir: ".uploads/u1".into()
            }
        );
        let answers = [Ok(vec![]), Ok(vec![]), Ok(parts)];
        assert_eq!(
            c.parts(&answers).map(|p| p.bytes),
            Some(6),
            "two parts of 3 bytes"
        );
        let failed = [Ok(vec![]), Ok(vec![]), Err("down".to_string())];
        assert_eq!(judge(&c, &failed, 0), Verdict::Send);
        assert_eq!(c.parts(&failed), None);
    }
}
