//! The meta-log stream of a pass on a real cluster (docs/meta-log.md#several-filers):
//! on one store, one filer's aggregated log, resumed on another filer when a
//! stream breaks (duplicates around the resume point dropped); on separate
//! stores, every filer's own log, merged in `ts_ns` order.

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};

use crate::engine::merge::{LogMerge, applied_for_peer};
use crate::engine::{MetaEvent, Nanos};
use crate::pb::filer_pb::SubscribeMetadataResponse;
use crate::seaweed::metalog::{MetaLogReader, ReaderOptions, SubscribeParams};
use crate::seaweed::metalog_error::MetaLogError;
use crate::seaweed::pool::FilerPool;
use crate::seaweed::resume_dedup::ResumeDedup;

use crate::pass::cluster_error::ClusterError;
use crate::pass::ports::EventStream;

/// Opens the subscription on the preferred filer or, failing that, the next,
/// from where `dedup` says the stream stands.
pub(crate) async fn open_on_any(
    pool: &FilerPool,
    params: &SubscribeParams,
    options: &ReaderOptions,
    dedup: &ResumeDedup,
) -> Result<(String, MetaLogReader), ClusterError> {
    let mut errors = Vec::new();
    let order = pool.ordered();
    let single = order.len() == 1;
    for node in order {
        let p = SubscribeParams {
            since_ns: dedup.since(params.since_ns),
            ..params.clone()
        };
        match MetaLogReader::open(node.channel.clone(), p, options.clone()).await {
            Ok(r) => {
                pool.prefer(&node.addr);
                return Ok((node.addr, r));
            }
            Err(e) if single => return Err(e.into()),
            Err(e) => errors.push((node.addr, e.into())),
        }
    }
    Err(ClusterError::NoFilerServes(errors))
}

/// Opens `SubscribeLocalMetadata` on every filer of `filers` (their own
/// stores) and merges the streams by `ts_ns` in a task
/// (docs/meta-log.md#several-filers). A filer that refuses fails the call,
/// naming it: its events are in no other log.
pub(crate) async fn open_merged(
    pool: &FilerPool,
    params: &SubscribeParams,
    options: &ReaderOptions,
    filers: Vec<(String, i32)>,
) -> Result<EventStream, ClusterError> {
    let nodes = pool.ordered();
    let opened = futures::future::join_all(filers.iter().map(|(addr, sig)| {
        let node = nodes.iter().find(|n| &n.addr == addr).cloned();
        let (addr, sig, params, options) = (addr.clone(), *sig, params.clone(), options.clone());
        async move {
            let node = node.ok_or_else(|| ClusterError::LeftPool { addr: addr.clone() })?;
            MetaLogReader::open_local(node.channel.clone(), params, options)
                .await
                .map(|reader| LocalLog {
                    addr: addr.clone(),
                    signature: sig,
                    items: reader.boxed(),
                })
                .map_err(|e| ClusterError::from(e).on_filer(addr.clone()))
        }
    }))
    .await;
    let mut errors = Vec::new();
    let logs: Vec<LocalLog> = opened
        .into_iter()
        .filter_map(|r| r.map_err(|e| errors.push(e)).ok())
        .collect();
    if !errors.is_empty() {
        return Err(ClusterError::OwnLogsUnopened(errors));
    }
    tracing::debug!(
        filers = logs.len(),
        "meta-log: merging each filer's own log"
    );
    let (tx, rx) = tokio::sync::mpsc::channel(options.capacity);
    tokio::spawn(merge_logs(logs, tx));
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx).boxed())
}

/// One filer's own log in a merged pass: its flattened responses (events,
/// and position marks without an entry), `Err` then end when it broke.
pub(crate) struct LocalLog {
    addr: String,
    signature: i32,
    items: BoxStream<'static, Result<SubscribeMetadataResponse, MetaLogError>>,
}

/// Feeds the merge of every filer's own log to `tx`, in `ts_ns` order
/// ([`LogMerge`]); each filer's keepalives move its position. Changes a filer
/// applied for a peer are dropped (the peer's own log has them). A stream
/// that breaks ends the pass with an error naming its filer; it is not
/// resumed elsewhere, since no other filer's log holds its events.
async fn merge_logs(
    mut logs: Vec<LocalLog>,
    tx: tokio::sync::mpsc::Sender<Result<MetaEvent, ClusterError>>,
) {
    let pool: Vec<i32> = logs.iter().map(|l| l.signature).collect();
    let mut merge: LogMerge<MetaEvent> = LogMerge::new(logs.len());
    let mut applied_for_peers = 0u64;
    // Each stream's last event: a filer's own log can hand over the event at
    // the seam between its persisted files and its memory buffer twice in a
    // row (docs/meta-log.md#duplicates); the repeat is dropped here.
    let mut last: Vec<Option<(Nanos, u64)>> = vec![None; logs.len()];
    let mut repeats = 0u64;
    loop {
        while let Some((_, ev)) = merge.pop() {
            if tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
        if merge.done() {
            tracing::debug!(applied_for_peers, repeats, "meta-log: merged logs ended");
            return;
        }
        let (first, more) = {
            let mut w = merge.wanted();
            (w.next(), w.next().is_some())
        };
        let (i, item) = if let (Some(only), false) = (first, more) {
            // The usual case once every stream has a head: the one just
            // released must speak again. No select (and no allocation).
            (only, logs[only].items.next().await)
        } else {
            let wanted: Vec<usize> = merge.wanted().collect();
            let waits = logs
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| wanted.contains(i))
                .map(|(i, l)| async move { (i, l.items.next().await) }.boxed());
            // `next` is cancel-safe: the losers lose nothing.
            futures::future::select_all(waits).await.0
        };
        let log = &logs[i];
        match item {
            None => merge.end(i),
            Some(Err(source)) => {
                let _ = tx
                    .send(Err(ClusterError::OwnLogBroke {
                        addr: log.addr.clone(),
                        source,
                    }))
                    .await;
                return;
            }
            Some(Ok(resp)) => {
                let ts = resp.ts_ns;
                let applied = resp
                    .event_notification
                    .as_ref()
                    .is_some_and(|n| applied_for_peer(&n.signatures, log.signature, &pool));
                // Taken apart, not copied (docs/meta-log.md#replay-batches).
                match MetaEvent::from_owned(resp) {
                    None => merge.advance(i, ts),
                    Some(_) if applied => {
                        applied_for_peers += 1;
                        merge.advance(i, ts);
                    }
                    Some(ev) => {
                        let key = (ev.ts_ns, identity_hash(&ev));
                        if last[i] == Some(key) {
                            repeats += 1;
                            merge.advance(i, ev.ts_ns);
                            continue;
                        }
                        last[i] = Some(key);
                        if merge.offer(i, ev.ts_ns, ev).is_err() {
                            let _ = tx
                                .send(Err(ClusterError::MergeOutOfOrder {
                                    addr: log.addr.clone(),
                                }))
                                .await;
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// A hash of an event's identity (directory, old name, new parent, new
/// name), computed without copying them: with the same `ts_ns`, equal
/// hashes mean the same event (one in 2^64 otherwise).
fn identity_hash(e: &MetaEvent) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    e.directory.hash(&mut h);
    e.old_entry.as_ref().map(|x| x.name.as_str()).hash(&mut h);
    e.new_parent_path.hash(&mut h);
    e.new_entry.as_ref().map(|x| x.name.as_str()).hash(&mut h);
    h.finish()
}

/// Feeds one pass's events to `tx` from `pool` (filers sharing one store);
/// when the stream breaks, resumes it on the next filer `pass.reorder_margin`
/// before the newest delivered event and drops what was delivered already
/// (docs/meta-log.md#several-filers). Gives up, with an error item, when no
/// filer serves it or after more breaks than twice the filers (a stream that
/// keeps breaking is not a failover).
pub(crate) async fn follow(
    (pool, params, options): (FilerPool, SubscribeParams, ReaderOptions),
    mut dedup: ResumeDedup,
    mut node: String,
    mut reader: MetaLogReader,
    tx: tokio::sync::mpsc::Sender<Result<Vec<MetaEvent>, ClusterError>>,
) {
    let mut breaks = 0usize;
    loop {
        match reader.recv_batch().await {
            // The reader hands out flattened responses (one event each):
            // taken apart, not copied.
            Some(Ok(batch)) => {
                let events: Vec<MetaEvent> = batch
                    .into_iter()
                    .filter_map(MetaEvent::from_owned)
                    .filter(|ev| dedup.admit(ev))
                    .collect();
                if !events.is_empty() && tx.send(Ok(events)).await.is_err() {
                    return;
                }
            }
            None => return,
            Some(Err(e)) => {
                let filers = pool.ordered().len();
                breaks += 1;
                if filers == 1 || breaks > 2 * filers {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
                tracing::warn!(filer = %node, error = %e, resume_from = dedup.since(params.since_ns),
                    "meta-log stream broke; resuming on the next filer");
                pool.demote(&node);
                match open_on_any(&pool, &params, &options, &dedup).await {
                    Ok((n, r)) => {
                        node = n;
                        reader = r;
                    }
                    Err(e2) => {
                        let _ = tx
                            .send(Err(ClusterError::ResumeFailed {
                                broke: e,
                                resume: Box::new(e2),
                            }))
                            .await;
                        return;
                    }
                }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::filer_pb::{Entry, EventNotification};

    fn ev(
        ts: Nanos,
        name: &str,
        signatures: &[i32],
    ) -> Result<SubscribeMetadataResponse, MetaLogError> {
        Ok(SubscribeMetadataResponse {
            directory: "/buckets/b".into(),
            ts_ns: ts,
            event_notification: Some(EventNotification {
                new_entry: Some(Box::new(Entry {
                    name: name.into(),
                    ..Default::default()
                })),
                signatures: signatures.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// A position mark, as `MetaLogReader::open_local` forwards keepalives.
    fn mark(ts: Nanos) -> Result<SubscribeMetadataResponse, MetaLogError> {
        Ok(SubscribeMetadataResponse {
            ts_ns: ts,
            ..Default::default()
        })
    }

    fn log(
        addr: &str,
        signature: i32,
        items: Vec<Result<SubscribeMetadataResponse, MetaLogError>>,
    ) -> LocalLog {
        LocalLog {
            addr: addr.into(),
            signature,
            items: futures::stream::iter(items).boxed(),
        }
    }

    /// Everything the merged stream delivers: event names, or `!error`.
    async fn run(logs: Vec<LocalLog>) -> Vec<String> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(merge_logs(logs, tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
            .map(|r| match r {
                Ok(e) => e.new_entry.map(|e| e.name).unwrap_or_default(),
                Err(e) => format!("!{e}"),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn merged_filer_logs_come_in_ts_order_without_peer_applied_copies_or_repeats() {
        let a = log(
            "filer-a:18888",
            1,
            vec![
                ev(10, "a10", &[1]),
                // The seam between persisted files and memory repeats an event.
                ev(10, "a10", &[1]),
                // b20 as filer A applied it for filer B: B's own log has it.
                ev(21, "b20-copy", &[2, 1]),
                ev(30, "a30", &[1]),
                // From outside the pool (another cluster's filer.sync): only here.
                ev(35, "sync35", &[99, 1]),
            ],
        );
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(20, "b20", &[2]), mark(25), ev(40, "b40", &[2])],
        );
        assert_eq!(
            run(vec![a, b]).await,
            ["a10", "b20", "a30", "sync35", "b40"]
        );
    }

    #[tokio::test]
    async fn one_filer_log_ending_early_lets_the_other_finish() {
        let a = log("filer-a:18888", 1, vec![]);
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(1, "b1", &[2]), ev(2, "b2", &[2]), ev(3, "b3", &[2])],
        );
        assert_eq!(run(vec![a, b]).await, ["b1", "b2", "b3"]);
    }

    #[tokio::test]
    async fn a_broken_filer_log_fails_the_merged_pass_naming_the_filer() {
        let a = log(
            "filer-a:18888",
            1,
            vec![
                ev(10, "a10", &[1]),
                Err(MetaLogError::Stream {
                    code: tonic::Code::Unavailable,
                    message: "transport error".into(),
                    events_delivered: 1,
                    last_ts_ns: 10,
                }),
            ],
        );
        let b = log(
            "filer-b:18888",
            2,
            vec![ev(5, "b5", &[2]), ev(50, "b50", &[2])],
        );
        let got = run(vec![a, b]).await;
        assert_eq!(got[..2], ["b5", "a10"], "{got:?}");
        assert_eq!(got.len(), 3, "nothing after the error: {got:?}");
        assert!(
            got[2].starts_with('!')
                && got[2].contains("filer-a:18888")
                && got[2].contains("transport error")
                && got[2].contains("not resumed"),
            "{got:?}"
        );
    }
}
