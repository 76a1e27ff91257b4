//! Streaming, memory-bounded recursive listing of one bucket for the walker:
//! plain objects, versioned keys (all versions of a key together, with the
//! bare null version folded in), and in-progress multipart uploads.
//!
//! Order: tree order. A directory's entries come in name order and a
//! subdirectory is descended into at its place, so the items' listing
//! positions (the path of the entry that produced each) strictly increase,
//! and a listing can resume after any position
//! (docs/design-deviations.md#resumable-recovery-walks).
//!
//! Memory: a background task lists one directory page at a time and drops the
//! page before descending into a subdirectory (the parent's listing then goes
//! on after that subdirectory's name with a new page); a `.versions` folder is
//! read whole (bounded by that key's version count). Items reach the consumer
//! through a bounded channel, so a slow consumer stalls the listing instead of
//! growing a buffer.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::engine::versions::{is_null_version, version_id_of};
use crate::engine::{keys, resume};
use crate::pb::filer_pb::Entry;
use crate::seaweed::filer::{DEFAULT_PAGE, FilerClient, FilerError, join_path};

/// What the lister yields: the engine's walker input, so listing and
/// evaluation share one type.
pub type ListedItem = crate::engine::WalkItem;

/// Listing knobs.
#[derive(Debug, Clone)]
pub struct ListOptions {
    pub page: u32,
    /// Items buffered between the listing task and the consumer.
    pub channel_capacity: usize,
    /// List only keys starting with one of these (`None`: the whole
    /// bucket): directories that can hold no such key are not descended into,
    /// other objects and version folders are not yielded. `.uploads` is always
    /// listed (an upload's key is inside its folder's entry).
    pub prefixes: Option<Vec<String>>,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            page: DEFAULT_PAGE,
            channel_capacity: 256,
            prefixes: None,
        }
    }
}

/// Whether a key under the bucket-relative directory `dir` (ending in `/`)
/// can start with one of `prefixes`.
fn dir_may_match(prefixes: &Option<Vec<String>>, dir: &str) -> bool {
    prefixes.as_ref().is_none_or(|ps| {
        ps.iter()
            .any(|p| dir.starts_with(p.as_str()) || p.starts_with(dir))
    })
}

/// Whether `key` starts with one of `prefixes`.
fn key_matches(prefixes: &Option<Vec<String>>, key: &str) -> bool {
    prefixes
        .as_ref()
        .is_none_or(|ps| ps.iter().any(|p| key.starts_with(p.as_str())))
}

/// Counters of one bucket listing, readable while it runs.
#[derive(Debug, Default)]
pub struct ListerStats {
    /// Entries received from the filer (all directories, including
    /// `.versions` folders and `.uploads`).
    pub entries_seen: AtomicU64,
    /// ListEntries page requests made.
    pub pages_listed: AtomicU64,
    pub dirs_listed: AtomicU64,
    /// LookupDirectoryEntry calls made (null-version/sibling checks across
    /// page boundaries).
    pub lookups: AtomicU64,
    /// Entries currently held by the lister (page buffers, version lists),
    /// not counting the channel.
    pub held: AtomicUsize,
    /// The most entries ever held at once: the memory bound under test.
    pub held_high_water: AtomicUsize,
}

impl ListerStats {
    fn hold(&self, n: usize) {
        let now = self.held.fetch_add(n, Ordering::Relaxed) + n;
        self.held_high_water.fetch_max(now, Ordering::Relaxed);
    }

    fn release(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ListerCounts {
        ListerCounts {
            entries_seen: self.entries_seen.load(Ordering::Relaxed),
            pages_listed: self.pages_listed.load(Ordering::Relaxed),
            dirs_listed: self.dirs_listed.load(Ordering::Relaxed),
            lookups: self.lookups.load(Ordering::Relaxed),
            held_high_water: self.held_high_water.load(Ordering::Relaxed),
        }
    }
}

/// Plain copy of [`ListerStats`] (see there for each field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListerCounts {
    pub entries_seen: u64,
    pub pages_listed: u64,
    pub dirs_listed: u64,
    pub lookups: u64,
    pub held_high_water: usize,
}

/// An item with its listing position (bucket-relative path of the entry that
/// produced it).
pub type Positioned = (String, ListedItem);

/// A running bucket listing: a [`Stream`] of items plus live counters. The
/// listing stops when this is dropped.
pub struct BucketListing {
    rx: ReceiverStream<Result<Positioned, FilerError>>,
    stats: Arc<ListerStats>,
}

impl BucketListing {
    /// The counters (shared with the listing task).
    pub fn stats(&self) -> Arc<ListerStats> {
        self.stats.clone()
    }

    /// The items with their listing positions, in strictly increasing tree
    /// order ([`crate::engine::resume::pos_cmp`]).
    pub fn positioned(self) -> ReceiverStream<Result<Positioned, FilerError>> {
        self.rx
    }
}

impl Stream for BucketListing {
    type Item = Result<ListedItem, FilerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx
            .poll_next_unpin(cx)
            .map(|o| o.map(|r| r.map(|(_, item)| item)))
    }
}

/// Lists bucket `bucket` under `root` with default options. Must be called
/// inside a tokio runtime (the listing runs in a spawned task). An error ends
/// the stream after it is yielded.
pub fn list_bucket(client: &FilerClient, root: &str, bucket: &str) -> BucketListing {
    list_bucket_with(client, root, bucket, ListOptions::default())
}

/// [`list_bucket`] with explicit options.
pub fn list_bucket_with(
    client: &FilerClient,
    root: &str,
    bucket: &str,
    opts: ListOptions,
) -> BucketListing {
    list_bucket_after(client, root, bucket, opts, None)
}

/// [`list_bucket_with`] resumed: only items whose listing position lies after
/// `after` ([`crate::engine::resume::is_after`]); `None` lists everything.
/// Each ancestor directory of `after` is listed from its component on
/// (docs/design-deviations.md#resumable-recovery-walks).
pub fn list_bucket_after(
    client: &FilerClient,
    root: &str,
    bucket: &str,
    opts: ListOptions,
    after: Option<&str>,
) -> BucketListing {
    let (tx, rx) = mpsc::channel(opts.channel_capacity.max(1));
    let stats = Arc::new(ListerStats::default());
    let walker = Walker {
        client: client.clone(),
        bucket_dir: join_path(root, bucket),
        prefixes: opts.prefixes,
        page: opts.page.max(1),
        stats: stats.clone(),
        tx,
        resume: after.map(resume::start_points).unwrap_or_default(),
    };
    tokio::spawn(async move {
        if let Err(e) = walker.run().await {
            // The consumer may be gone already; nothing else to tell.
            let _ = walker.tx.send(Err(e)).await;
        }
    });
    BucketListing {
        rx: ReceiverStream::new(rx),
        stats,
    }
}

/// Why the walk stopped early.
enum Stop {
    /// The consumer dropped the stream.
    Closed,
    Filer(FilerError),
}

impl From<FilerError> for Stop {
    fn from(e: FilerError) -> Self {
        Stop::Filer(e)
    }
}

/// One directory being walked.
struct Frame {
    /// Full filer path.
    dir: String,
    /// Bucket-relative prefix of entries in `dir` ("" at the bucket root,
    /// else ending in `/`).
    rel: String,
    /// Last name handled; the next page starts after it.
    after: String,
    /// A resumed directory's start points: the first names where its listing
    /// starts (inclusive), the rest go to the subdirectory of that name.
    resume: Vec<String>,
    exhausted: bool,
    /// Pages fetched so far.
    pages: u64,
}

impl Frame {
    fn new(dir: String, rel: String, resume: Vec<String>) -> Frame {
        Frame {
            dir,
            rel,
            after: String::new(),
            resume,
            exhausted: false,
            pages: 0,
        }
    }
}

struct Walker {
    client: FilerClient,
    bucket_dir: String,
    prefixes: Option<Vec<String>>,
    page: u32,
    stats: Arc<ListerStats>,
    tx: mpsc::Sender<Result<Positioned, FilerError>>,
    /// Start points of a resumed listing ([`resume::start_points`]).
    resume: Vec<String>,
}

impl Walker {
    async fn run(&self) -> Result<(), FilerError> {
        match self.walk().await {
            Err(Stop::Filer(e)) => Err(e),
            Ok(()) | Err(Stop::Closed) => Ok(()),
        }
    }

    async fn emit(&self, pos: String, item: ListedItem) -> Result<(), Stop> {
        self.tx
            .send(Ok((pos, item)))
            .await
            .map_err(|_| Stop::Closed)
    }

    async fn walk(&self) -> Result<(), Stop> {
        let mut stack = vec![Frame::new(
            self.bucket_dir.clone(),
            String::new(),
            self.resume.clone(),
        )];
        while let Some(top) = stack.last_mut() {
            if top.exhausted {
                stack.pop();
                continue;
            }
            if top.pages == 0 {
                self.stats.dirs_listed.fetch_add(1, Ordering::Relaxed);
            }
            // A resumed directory's first page starts at its start point
            // itself; every later page after the last name handled.
            let resume_head = top.resume.first().filter(|_| top.pages == 0).cloned();
            let (start, inclusive) = match &resume_head {
                Some(head) => (head, true),
                None => (&top.after, false),
            };
            let page = self
                .client
                .list_page_from(&top.dir, start, inclusive, self.page)
                .await?;
            self.stats.pages_listed.fetch_add(1, Ordering::Relaxed);
            self.stats
                .entries_seen
                .fetch_add(page.len() as u64, Ordering::Relaxed);
            let n = page.len();
            self.stats.hold(n);
            top.pages += 1;
            let more = n >= self.page as usize;
            // Earlier siblings exist unless this is the very first page of an
            // unresumed directory.
            let first_page = top.pages == 1 && resume_head.is_none();
            let child_resume: Vec<String> = top.resume.iter().skip(1).cloned().collect();
            let (head, resume) = (resume_head.as_deref(), &child_resume);
            let end = self
                .process_page(&top.dir, &top.rel, &page, first_page, more, head, resume)
                .await;
            self.stats.release(n);
            let descend = end?;
            if let Some(e) = descend.map_or(page.last(), |i| page.get(i)) {
                top.after.clone_from(&e.name);
            }
            match descend {
                None => top.exhausted = !more,
                Some(i) => {
                    // The rest of the page is listed again after the
                    // subdirectory: memory stays one page per listing.
                    top.exhausted = !more && i + 1 == n;
                    let name = &top.after;
                    let resume = if resume_head.as_ref() == Some(name) {
                        child_resume
                    } else {
                        Vec::new()
                    };
                    let (dir, rel) = (join_path(&top.dir, name), format!("{}{name}/", top.rel));
                    stack.push(Frame::new(dir, rel, resume));
                }
            }
        }
        Ok(())
    }

    /// Emits the page's items in order until a subdirectory to descend into:
    /// its index, `None` when every entry was handled. `more` = later pages
    /// may exist. The entry named `resume_head` lies at
    /// or before the resume point: its own item is not emitted again, and
    /// `child_resume` says where inside it the listing resumes.
    #[allow(clippy::too_many_arguments)]
    async fn process_page(
        &self,
        dir: &str,
        rel: &str,
        page: &[Entry],
        first_page: bool,
        more: bool,
        resume_head: Option<&str>,
        child_resume: &[String],
    ) -> Result<Option<usize>, Stop> {
        let index: HashMap<&str, usize> = page
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.as_str(), i))
            .collect();
        let first_name = page.first().map(|e| e.name.clone()).unwrap_or_default();
        let last_name = page.last().map(|e| e.name.clone()).unwrap_or_default();
        for (i, e) in page.iter().enumerate() {
            let name = e.name.as_str();
            let done = resume_head == Some(name);
            if e.is_directory {
                if rel.is_empty() && name == keys::UPLOADS_DIR {
                    let skip = if done { child_resume.first() } else { None };
                    self.uploads(&join_path(dir, name), skip.map(String::as_str))
                        .await?;
                    continue;
                }
                if !dir_may_match(&self.prefixes, &format!("{rel}{name}/")) {
                    // No key below can match a walk rule. A `.versions`
                    // folder's own key `<rel><logical>` is a prefix of
                    // `<rel><name>/`, so it cannot match either.
                    continue;
                }
                if let Some(logical) = name.strip_suffix(keys::VERSIONS_SUFFIX)
                    && !logical.is_empty()
                {
                    // The bare sibling sorts before the folder: in this page,
                    // or (unless this is the first page) in an earlier one.
                    let bare = match index.get(logical) {
                        Some(&i) => Some(page[i].clone()),
                        None if !first_page && logical < first_name.as_str() => {
                            self.lookup(dir, logical).await?
                        }
                        None => None,
                    };
                    if self.versions(dir, rel, logical, e, bare, done).await? {
                        return Ok(Some(i));
                    }
                    continue;
                }
                return Ok(Some(i));
            }
            // A file. If `<name>.versions` is a directory, the folder's
            // handler owns this entry (null version, or plain object when the
            // folder has no versions).
            let folder_name = format!("{name}{}", keys::VERSIONS_SUFFIX);
            let has_folder = match index.get(folder_name.as_str()) {
                Some(&i) => page[i].is_directory,
                None if more && folder_name.as_str() > last_name.as_str() => self
                    .lookup(dir, &folder_name)
                    .await?
                    .is_some_and(|f| f.is_directory),
                None => false,
            };
            let key = format!("{rel}{name}");
            // Without attributes there is no mtime, nothing to age; Go's
            // walker skips these too.
            if has_folder || done || e.attributes.is_none() || !key_matches(&self.prefixes, &key) {
                continue;
            }
            let entry = e.clone();
            self.emit(key.clone(), ListedItem::Object { key, entry })
                .await?;
        }
        Ok(None)
    }

    async fn lookup(&self, dir: &str, name: &str) -> Result<Option<Entry>, Stop> {
        self.stats.lookups.fetch_add(1, Ordering::Relaxed);
        Ok(self.client.lookup(dir, name).await?)
    }

    /// Handles `<logical>.versions`. Returns true when the folder holds no
    /// versions and must be walked as an ordinary directory.
    async fn versions(
        &self,
        dir: &str,
        rel: &str,
        logical: &str,
        folder: &Entry,
        bare: Option<Entry>,
        done: bool,
    ) -> Result<bool, Stop> {
        self.stats.dirs_listed.fetch_add(1, Ordering::Relaxed);
        let mut versions = Vec::new();
        let mut listing = Box::pin(
            self.client
                .list_all(&join_path(dir, &folder.name), self.page),
        );
        while let Some(e) = listing.next().await {
            let e = match e {
                Ok(e) => e,
                Err(e) => {
                    self.stats.release(versions.len());
                    return Err(e.into());
                }
            };
            self.stats.entries_seen.fetch_add(1, Ordering::Relaxed);
            if !e.is_directory && !version_id_of(&e).is_empty() {
                self.stats.hold(1);
                versions.push(e);
            }
        }
        let held = versions.len();
        let logical_key = format!("{rel}{logical}");
        // Both items below are emitted at the folder's place.
        let pos = format!("{rel}{}", folder.name);
        let empty = versions.is_empty();
        let item = if done {
            // At or before the resume point: not emitted again; an empty
            // folder is still descended into.
            None
        } else if empty {
            // Not a versioned key after all: the bare entry is a plain object
            // and the folder an ordinary directory.
            bare.filter(|b| !b.is_directory && b.attributes.is_some())
                .map(|entry| ListedItem::Object {
                    key: logical_key,
                    entry,
                })
        } else {
            // The server's rule for what counts as the null version
            // (docs/filer-layout.md#null-version): a file, or a directory-key object.
            Some(ListedItem::Versions {
                logical_key,
                folder: folder.clone(),
                versions,
                null_version: bare.filter(is_null_version),
            })
        };
        let out = match item {
            Some(item) => self.emit(pos, item).await,
            None => Ok(()),
        };
        self.stats.release(held);
        out.map(|()| empty)
    }

    /// Emits every `.uploads/<id>` directory that names a destination key,
    /// those after `skip_through` only (a resumed listing).
    /// Parts, and upload dirs without `key`, are not objects.
    async fn uploads(&self, uploads_dir: &str, skip_through: Option<&str>) -> Result<(), Stop> {
        self.stats.dirs_listed.fetch_add(1, Ordering::Relaxed);
        let mut listing = Box::pin(self.client.list_all(uploads_dir, self.page));
        while let Some(e) = listing.next().await {
            let e = e?;
            self.stats.entries_seen.fetch_add(1, Ordering::Relaxed);
            let has_key = e.extended.get(keys::MPU_KEY).is_some_and(|v| !v.is_empty());
            let behind = skip_through.is_some_and(|s| e.name.as_str() <= s);
            if e.is_directory && has_key && !behind {
                self.emit(
                    format!("{}/{}", keys::UPLOADS_DIR, e.name),
                    ListedItem::Upload {
                        upload_id: e.name.clone(),
                        entry: e,
                    },
                )
                .await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_checks_descend_only_where_a_key_can_match() {
        let ps = Some(vec!["logs/a".to_string(), "tmp/".to_string()]);
        assert!(dir_may_match(&ps, "logs/"));
        assert!(dir_may_match(&ps, "logs/a/"));
        assert!(dir_may_match(&ps, "logs/ab/"));
        assert!(dir_may_match(&ps, "tmp/x/"));
        assert!(!dir_may_match(&ps, "logs/b/"));
        assert!(!dir_may_match(&ps, "data/"));
        assert!(!dir_may_match(&ps, "tm/"));
        assert!(dir_may_match(&None, "anything/"));
        assert!(key_matches(&ps, "logs/abc"));
        assert!(!key_matches(&ps, "logs/b1"));
        assert!(key_matches(&None, "x"));
    }

    #[test]
    fn stats_track_high_water() {
        let s = ListerStats::default();
        s.hold(5);
        s.hold(3);
        s.release(8);
        s.hold(2);
        assert_eq!(s.snapshot().held_high_water, 8);
        assert_eq!(s.held.load(Ordering::Relaxed), 2);
    }
}
