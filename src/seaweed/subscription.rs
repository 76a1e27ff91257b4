//! What one meta-log subscription asks for and how its events are judged,
//! shared by the streamed reader ([`crate::seaweed::metalog`]) and the direct
//! log-file reader ([`crate::seaweed::logfile`]): the window, the
//! `SubscribeMetadata` request, batch flattening and the per-event filter
//! (docs/meta-log.md#subscription).

use rand::Rng;

use crate::engine::Nanos;
use crate::pb::filer_pb::{SubscribeMetadataRequest, SubscribeMetadataResponse};

/// What one pass subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeParams {
    /// The filer's buckets root (`GetFilerConfiguration.dir_buckets`, e.g.
    /// `/buckets`). Sent as the `path_prefix` exactly as given; since that
    /// prefix also matches `/buckets2/...`, the reader drops every event whose
    /// path is not inside `<root>/`.
    pub buckets_root: String,
    /// Exclusive lower bound: only events with `ts_ns > since_ns` are delivered.
    pub since_ns: Nanos,
    /// Inclusive upper bound, the pass's "now": the filer ends the stream once
    /// it has sent everything up to here.
    pub until_ns: Nanos,
    /// `client_name` announced to the filer.
    pub client_name: String,
}

/// A window or root the filer cannot serve; the message says which and how
/// to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidWindow(pub String);

/// What the client tells the filer it can handle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Idle heartbeats while nothing new arrives (needed for a receive
    /// timeout: a caught-up stream is not a stalled one).
    pub idle_heartbeat: bool,
    /// References to persisted log files instead of their events
    /// (docs/meta-log.md#direct-log-file-reads).
    pub metadata_chunks: bool,
}

/// A fresh random positive client id: the filer refuses a second stream with an
/// id it already has registered ("duplicated subscription detected").
pub fn random_client_id() -> i32 {
    rand::rng().random_range(1..=i32::MAX)
}

/// How far past a window's `until_ns` the filer is asked to read by default:
/// the reorder margin (docs/meta-log.md#the-filers-bound-is-on-the-log-entry).
pub const DEFAULT_UNTIL_SLACK: Nanos = crate::engine::progress::REORDER_MARGIN;

/// The bound on `LogEntry.ts_ns` asked of the filer for `params`' window:
/// `until_ns + slack`, or an event of the window whose record was bumped past
/// `until_ns` would be lost (docs/meta-log.md#the-filers-bound-is-on-the-log-entry).
/// [`EventFilter`] drops what it brings past `until_ns`.
pub fn log_until(params: &SubscribeParams, slack: Nanos) -> Nanos {
    params.until_ns.saturating_add(slack.max(0))
}

/// The request of docs/meta-log.md#subscription: batching always on, the
/// filer's bound [`log_until`].
pub fn request(
    params: &SubscribeParams,
    client_id: i32,
    caps: Capabilities,
    until_slack: Nanos,
) -> SubscribeMetadataRequest {
    SubscribeMetadataRequest {
        client_name: params.client_name.clone(),
        path_prefix: params.buckets_root.clone(),
        since_ns: params.since_ns,
        until_ns: log_until(params, until_slack),
        client_id,
        client_supports_batching: true,
        client_supports_idle_heartbeat: caps.idle_heartbeat,
        client_supports_metadata_chunks: caps.metadata_chunks,
        ..Default::default()
    }
}

/// One response → its events in order: the top-level event first, then the
/// batch tail (`events`), each with `events` emptied.
pub fn flatten(response: SubscribeMetadataResponse) -> Vec<SubscribeMetadataResponse> {
    let mut out = Vec::with_capacity(1 + response.events.len());
    flatten_into(response, &mut out);
    out
}

/// [`flatten`] into `out`: one vector for the whole response (a vector per
/// batched event was a measurable share of a replay's allocations).
fn flatten_into(mut response: SubscribeMetadataResponse, out: &mut Vec<SubscribeMetadataResponse>) {
    let tail = std::mem::take(&mut response.events);
    out.push(response);
    for item in tail {
        // The filer never nests batches, but flattening keeps the order right
        // if it ever does.
        flatten_into(item, out);
    }
}

/// What the reader does with one flattened event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the consumer.
    Deliver,
    /// A keepalive, idle heartbeat or flush report: carries no entry.
    Keepalive,
    /// Its path is not inside `<root>/`.
    OutsideRoot,
    /// `ts_ns <= since_ns`.
    BeforeSince,
    /// `ts_ns > until_ns`.
    AfterUntil,
}

/// The per-event checks, separate from the I/O so they can be unit-tested.
#[derive(Debug, Clone)]
pub struct EventFilter {
    /// `<root>/`: every delivered path starts with it.
    root_slash: String,
    since_ns: Nanos,
    until_ns: Nanos,
    /// ts of the last entry-carrying event seen (any window), for the order check.
    last_seen_ts: Option<Nanos>,
    out_of_order_flag: bool,
    /// The largest `previous − ts` of an out-of-order event so far.
    largest_step_back: Nanos,
}

impl EventFilter {
    /// Validates the parameters and builds the filter.
    pub fn new(params: &SubscribeParams) -> Result<EventFilter, InvalidWindow> {
        let root = params.buckets_root.trim_end_matches('/');
        if !params.buckets_root.starts_with('/') {
            return Err(InvalidWindow(format!(
                "buckets root {:?} is not an absolute filer path; use e.g. \"/buckets\"",
                params.buckets_root
            )));
        }
        if params.until_ns <= params.since_ns {
            return Err(InvalidWindow(format!(
                "until_ns {} is not after since_ns {}; the pass window is empty",
                params.until_ns, params.since_ns
            )));
        }
        Ok(EventFilter {
            root_slash: format!("{root}/"),
            since_ns: params.since_ns,
            until_ns: params.until_ns,
            last_seen_ts: None,
            out_of_order_flag: false,
            largest_step_back: 0,
        })
    }

    /// Classifies one flattened event and runs the order check.
    pub fn classify(&mut self, event: &SubscribeMetadataResponse) -> Verdict {
        let Some(n) = &event.event_notification else {
            return Verdict::Keepalive;
        };
        let name = match (&n.old_entry, &n.new_entry) {
            (Some(e), _) | (None, Some(e)) => e.name.as_str(),
            (None, None) => return Verdict::Keepalive,
        };
        if name.is_empty() {
            // The Go reader drops these too: no entry name, nothing to route.
            return Verdict::Keepalive;
        }
        self.check_order(event.ts_ns);
        if event.ts_ns <= self.since_ns {
            return Verdict::BeforeSince;
        }
        if event.ts_ns > self.until_ns {
            return Verdict::AfterUntil;
        }
        let inside = self.inside(&event.directory, name)
            || n.new_entry.as_ref().is_some_and(|ne| {
                // A rename into the root counts by its destination, as the
                // filer's own path match does.
                let parent = if n.new_parent_path.is_empty() {
                    &event.directory
                } else {
                    &n.new_parent_path
                };
                self.inside(parent, &ne.name)
            });
        if inside {
            Verdict::Deliver
        } else {
            Verdict::OutsideRoot
        }
    }

    /// True (once) if the last classified event went backwards in time.
    pub fn take_out_of_order(&mut self) -> bool {
        std::mem::take(&mut self.out_of_order_flag)
    }

    fn check_order(&mut self, ts: Nanos) {
        if let Some(prev) = self.last_seen_ts
            && ts < prev
        {
            // Cross-filer order is assumed, not guaranteed (docs/meta-log.md#ordering).
            // Deliver anyway: dropping it could lose a deletion. Concurrent
            // writers make small steps back routine (thousands in a busy
            // window), so each is a debug line and the pass ends with one
            // summary (`report_out_of_order`).
            tracing::debug!(
                previous_ts_ns = prev,
                ts_ns = ts,
                "meta-log event out of ts order"
            );
            self.largest_step_back = self.largest_step_back.max(prev - ts);
            self.out_of_order_flag = true;
            return;
        }
        self.last_seen_ts = Some(ts);
    }

    /// The one log line about out-of-order events at the end of a stream:
    /// how many, and the largest step back, which the reorder margin must
    /// cover (docs/meta-log.md#ordering).
    pub fn report_out_of_order(&self, count: u64) {
        if count == 0 {
            return;
        }
        tracing::info!(
            events = count,
            largest_step_back_ms = self.largest_step_back as f64 / 1e6,
            "meta-log events out of ts order (delivered; the reorder margin covers small steps)"
        );
    }

    /// Whether `directory + "/" + name` (without doubling the slash of the
    /// root directory) starts with `<root>/`, checked piece by piece: one
    /// path string per event was a few percent of a replay's CPU.
    fn inside(&self, directory: &str, name: &str) -> bool {
        let sep = if directory.ends_with('/') { "" } else { "/" };
        let mut want = self.root_slash.as_bytes();
        for piece in [directory, sep, name] {
            let piece = piece.as_bytes();
            let n = want.len().min(piece.len());
            if piece[..n] != want[..n] {
                return false;
            }
            want = &want[n..];
            if want.is_empty() {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::{Entry, EventNotification};
    use crate::seaweed::logfile::event;

    fn params() -> SubscribeParams {
        SubscribeParams {
            buckets_root: "/buckets".into(),
            since_ns: 100,
            until_ns: 200,
            client_name: "t".into(),
        }
    }

    #[test]
    fn subscribe_request_matches_docs() {
        let caps = Capabilities {
            idle_heartbeat: true,
            metadata_chunks: false,
        };
        let r = request(&params(), 42, caps, 0);
        assert_eq!(r.path_prefix, "/buckets");
        assert_eq!(r.since_ns, 100);
        assert_eq!(r.until_ns, 200);
        assert_eq!(r.client_id, 42);
        assert!(r.client_supports_batching);
        assert!(r.client_supports_idle_heartbeat);
        assert!(!r.client_supports_metadata_chunks);
        assert_eq!(r.signature, 0);
        assert!(r.path_prefixes.is_empty() && r.directories.is_empty());
        let chunks = Capabilities {
            idle_heartbeat: false,
            metadata_chunks: true,
        };
        let r = request(&params(), 1, chunks, 0);
        assert!(!r.client_supports_idle_heartbeat);
        assert!(r.client_supports_metadata_chunks);
    }

    #[test]
    fn client_ids_are_positive() {
        for _ in 0..1000 {
            assert!(random_client_id() > 0);
        }
    }

    #[test]
    fn flatten_puts_top_level_first_then_batch_tail() {
        let mut top = event(1, "/buckets/b", "a");
        top.events = vec![event(2, "/buckets/b", "b"), event(3, "/buckets/c", "c")];
        let flat = flatten(top);
        let names: Vec<_> = flat
            .iter()
            .map(|e| {
                e.event_notification
                    .as_ref()
                    .and_then(|n| n.new_entry.as_ref())
                    .map(|x| x.name.clone())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(flat.iter().all(|e| e.events.is_empty()));
        assert_eq!(flat[2].directory, "/buckets/c");
    }

    #[test]
    fn keepalives_are_recognised() {
        let mut f = EventFilter::new(&params()).unwrap();
        let heartbeat = SubscribeMetadataResponse {
            ts_ns: 150,
            ..Default::default()
        };
        assert_eq!(f.classify(&heartbeat), Verdict::Keepalive);
        let empty = SubscribeMetadataResponse {
            ts_ns: 150,
            event_notification: Some(EventNotification::default()),
            ..Default::default()
        };
        assert_eq!(f.classify(&empty), Verdict::Keepalive);
        let flush = SubscribeMetadataResponse {
            flushed_ts_ns: 150,
            ..Default::default()
        };
        assert_eq!(f.classify(&flush), Verdict::Keepalive);
    }

    #[test]
    fn window_bounds_are_exclusive_since_inclusive_until() {
        let mut f = EventFilter::new(&params()).unwrap();
        assert_eq!(
            f.classify(&event(100, "/buckets/b", "k")),
            Verdict::BeforeSince
        );
        assert_eq!(f.classify(&event(101, "/buckets/b", "k")), Verdict::Deliver);
        assert_eq!(f.classify(&event(200, "/buckets/b", "k")), Verdict::Deliver);
        assert_eq!(
            f.classify(&event(201, "/buckets/b", "k")),
            Verdict::AfterUntil
        );
    }

    #[test]
    fn events_outside_root_slash_are_dropped() {
        let mut f = EventFilter::new(&params()).unwrap();
        // The bucket entry itself lives in directory /buckets.
        assert_eq!(f.classify(&event(110, "/buckets", "b1")), Verdict::Deliver);
        // /buckets2 matches the path_prefix but is another tree.
        assert_eq!(
            f.classify(&event(111, "/buckets2", "x")),
            Verdict::OutsideRoot
        );
        assert_eq!(
            f.classify(&event(112, "/", "buckets")),
            Verdict::OutsideRoot
        );
        // A trailing slash on the configured root changes nothing.
        let mut p = params();
        p.buckets_root = "/buckets/".into();
        let mut f = EventFilter::new(&p).unwrap();
        assert_eq!(f.classify(&event(110, "/buckets", "b1")), Verdict::Deliver);
        assert_eq!(
            f.classify(&event(111, "/buckets2", "x")),
            Verdict::OutsideRoot
        );
    }

    #[test]
    fn inside_checks_the_joined_path_without_building_it() {
        for root in ["/buckets", "/buckets/", "/"] {
            let mut p = params();
            p.buckets_root = root.into();
            let f = EventFilter::new(&p).unwrap();
            for dir in [
                "",
                "/",
                "/buckets",
                "/buckets/",
                "/buckets2",
                "/buck",
                "/buckets/b",
            ] {
                for name in ["", "b1", "buckets", "ets", "ets/x", "/"] {
                    let joined = if dir.ends_with('/') {
                        format!("{dir}{name}")
                    } else {
                        format!("{dir}/{name}")
                    };
                    assert_eq!(
                        f.inside(dir, name),
                        joined.starts_with(&f.root_slash),
                        "root {root:?}, {dir:?} + {name:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rename_into_root_is_delivered() {
        let mut f = EventFilter::new(&params()).unwrap();
        let mut e = event(150, "/tmp", "x");
        if let Some(n) = e.event_notification.as_mut() {
            n.old_entry = Some(Box::new(Entry {
                name: "x".into(),
                ..Default::default()
            }));
            n.new_parent_path = "/buckets/b".into();
        }
        assert_eq!(f.classify(&e), Verdict::Deliver);
    }

    #[test]
    fn out_of_order_is_flagged_but_delivered() {
        let mut f = EventFilter::new(&params()).unwrap();
        assert_eq!(f.classify(&event(150, "/buckets/b", "k")), Verdict::Deliver);
        assert!(!f.take_out_of_order());
        assert_eq!(f.classify(&event(140, "/buckets/b", "k")), Verdict::Deliver);
        assert!(f.take_out_of_order());
        assert!(!f.take_out_of_order());
        // Equal timestamps are allowed.
        assert_eq!(f.classify(&event(150, "/buckets/b", "k")), Verdict::Deliver);
        assert!(!f.take_out_of_order());
    }

    #[test]
    fn invalid_params_are_rejected_with_a_reason() {
        let mut p = params();
        p.buckets_root = "buckets".into();
        let err = EventFilter::new(&p).unwrap_err().to_string();
        assert!(err.contains("absolute"), "{err}");
        let mut p = params();
        p.until_ns = p.since_ns;
        let err = EventFilter::new(&p).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
