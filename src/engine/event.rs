//! One filer meta-log event ([`MetaEvent`]) as replay sees it, and where it
//! sits in the buckets tree ([`locate`]; docs/meta-log.md#event-paths).

use crate::engine::Nanos;
use crate::pb::filer_pb::{Entry, SubscribeMetadataResponse};

/// One meta-log event (one element of a `SubscribeMetadataResponse`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaEvent {
    /// Filer timestamp of the event.
    pub ts_ns: Nanos,
    /// Parent directory of the old entry (of the new one for a create).
    pub directory: String,
    /// Parent directory of the new entry; set whenever `new_entry` is.
    pub new_parent_path: String,
    /// Entry before the change; absent for a create.
    pub old_entry: Option<Box<Entry>>,
    /// Entry after the change; absent for a delete.
    pub new_entry: Option<Box<Entry>>,
}

impl MetaEvent {
    /// The event in one response, ignoring its batched tail (`events`). `None`
    /// for keepalives and progress ticks: no event notification, or no entry
    /// with a name.
    pub fn from_response(resp: &SubscribeMetadataResponse) -> Option<MetaEvent> {
        // Tests and tools only: the replay takes its responses apart
        // (`from_owned`) rather than pay for this copy.
        MetaEvent::from_owned(resp.clone())
    }

    /// [`MetaEvent::from_response`] taking the response apart instead of
    /// copying its entries: the replay's path, where a copy of every entry
    /// (name, chunks, extended attributes) cost a good share of the scan rate.
    /// The batched tail (`events`) is dropped: callers flatten
    /// first.
    pub fn from_owned(resp: SubscribeMetadataResponse) -> Option<MetaEvent> {
        let n = resp.event_notification?;
        let named = n
            .new_entry
            .as_ref()
            .or(n.old_entry.as_ref())
            .is_some_and(|e| !e.name.is_empty());
        named.then_some(MetaEvent {
            ts_ns: resp.ts_ns,
            directory: resp.directory,
            new_parent_path: n.new_parent_path,
            old_entry: n.old_entry,
            new_entry: n.new_entry,
        })
    }

    /// Every event a response carries, in order: the response itself, then
    /// its batched tail (`client_supports_batching`).
    pub fn all_from_response(resp: &SubscribeMetadataResponse) -> Vec<MetaEvent> {
        std::iter::once(resp)
            .chain(resp.events.iter())
            .filter_map(MetaEvent::from_response)
            .collect()
    }

    /// The entry name: the new entry's, else the old one's.
    fn name(&self) -> Option<&str> {
        self.new_entry
            .as_ref()
            .or(self.old_entry.as_ref())
            .map(|e| e.name.as_str())
    }
}

/// Bucket and physical key of an event (docs/meta-log.md#event-paths): the
/// directory is `new_parent_path` if set, else `directory`; an event directly
/// in the buckets root is bucket-level (key `""`). `None` outside the buckets
/// root or when the bucket name is empty.
pub fn locate(buckets_root: &str, ev: &MetaEvent) -> Option<(String, String)> {
    let name = ev.name().filter(|n| !n.is_empty())?;
    let dir = if ev.new_parent_path.is_empty() {
        ev.directory.as_str()
    } else {
        ev.new_parent_path.as_str()
    };
    let bare = buckets_root.trim_end_matches('/');
    if dir.trim_end_matches('/') == bare && dir.len() <= bare.len() + 1 {
        return Some((name.to_owned(), String::new()));
    }
    let rest = dir.strip_prefix(bare)?.strip_prefix('/')?;
    let (bucket, parent) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return None;
    }
    let key = if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    };
    Some((bucket.to_owned(), key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::versions::testkit::*;
    use crate::pb::filer_pb::EventNotification;

    const ROOT: &str = "/buckets";

    #[test]
    fn locate_follows_the_filer_layout() {
        let ev = |dir: &str, parent: &str, name: &str| MetaEvent {
            directory: dir.into(),
            new_parent_path: parent.into(),
            new_entry: Some(Box::new(file(name, 1, 1))),
            ..MetaEvent::default()
        };
        let loc = |e: &MetaEvent| locate(ROOT, e);
        assert_eq!(loc(&ev("/buckets", "", "b")), Some(("b".into(), "".into())));
        assert_eq!(
            loc(&ev("/buckets/", "", "b")),
            Some(("b".into(), "".into()))
        );
        assert_eq!(
            loc(&ev("/buckets/b", "", "k")),
            Some(("b".into(), "k".into()))
        );
        assert_eq!(
            loc(&ev("/buckets/b/x/y", "", "k")),
            Some(("b".into(), "x/y/k".into()))
        );
        // new_parent_path wins (rename destination).
        assert_eq!(
            loc(&ev("/buckets/a", "/buckets/b/d", "k")),
            Some(("b".into(), "d/k".into()))
        );
        assert_eq!(loc(&ev("/etc/s3", "", "k")), None);
        assert_eq!(loc(&ev("/bucketsX/b", "", "k")), None);
        assert_eq!(loc(&ev("/buckets//x", "", "k")), None);
        assert_eq!(
            locate("/buckets/", &ev("/buckets/b", "", "k")),
            Some(("b".into(), "k".into()))
        );
        assert_eq!(loc(&ev("/buckets/b", "", "")), None);
    }

    #[test]
    fn from_response_skips_keepalives_and_flattens_batches() {
        let mut resp = SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: 7,
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(file("k", 1, 1))),
                new_parent_path: "/buckets/b".into(),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        let ev = MetaEvent::from_response(&resp).expect("event");
        assert_eq!((ev.ts_ns, ev.directory.as_str()), (7, "/buckets/b"));
        assert!(ev.old_entry.is_none());
        assert_eq!(
            MetaEvent::from_response(&SubscribeMetadataResponse::default()),
            None
        );
        let nameless = SubscribeMetadataResponse {
            event_notification: Some(EventNotification::default()),
            ..SubscribeMetadataResponse::default()
        };
        assert_eq!(MetaEvent::from_response(&nameless), None);
        let mut tail = resp.clone();
        tail.ts_ns = 8;
        resp.events = vec![tail, SubscribeMetadataResponse::default()];
        let all: Vec<i64> = MetaEvent::all_from_response(&resp)
            .iter()
            .map(|e| e.ts_ns)
            .collect();
        assert_eq!(all, [7, 8]);
    }

    #[test]
    fn from_owned_keeps_both_entries_and_the_new_parent() {
        let resp = SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: 9,
            event_notification: Some(EventNotification {
                old_entry: Some(Box::new(file("a", 1, 1))),
                new_entry: Some(Box::new(file("k", 2, 3))),
                new_parent_path: "/buckets/b/d".into(),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        let ev = MetaEvent::from_owned(resp).expect("event");
        assert_eq!(
            (ev.ts_ns, ev.directory.as_str(), ev.new_parent_path.as_str()),
            (9, "/buckets/b", "/buckets/b/d")
        );
        assert_eq!(ev.old_entry.map(|e| e.name), Some("a".to_string()));
        assert_eq!(ev.new_entry.map(|e| e.name), Some("k".to_string()));
        let nameless = SubscribeMetadataResponse {
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(Entry::default())),
                ..EventNotification::default()
            }),
            ..SubscribeMetadataResponse::default()
        };
        assert_eq!(MetaEvent::from_owned(nameless), None);
        assert_eq!(
            MetaEvent::from_owned(SubscribeMetadataResponse::default()),
            None
        );
    }
}
