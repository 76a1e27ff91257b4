//! Whether a pass's meta-log stream may move between the filers of a pool,
//! and whether the pool reads every filer whose log holds events
//! (docs/meta-log.md#several-filers, docs/meta-log.md#unread-filers).

use std::collections::HashSet;
use std::time::Instant;

use crate::seaweed::discovery;
use crate::seaweed::endpoint::ServerAddress;
use crate::seaweed::filer::{FilerClient, FilerError};
use crate::seaweed::pool::{AddressError, FilerPool, lazy_channel};

/// Whether a meta-log stream may move between the filers of a pool
/// (docs/meta-log.md#several-filers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCheck {
    /// One filer, or filers that share one store: each one's log holds every
    /// filer's events, so a stream can resume on any of them.
    Shared,
    /// Every filer answers and each has a store of its own: a filer serves
    /// its peers' events only while it follows them, so a pass reads every
    /// filer's own log and merges them, and a broken stream must not resume
    /// elsewhere (the pass fails instead). Each filer's address and store
    /// signature, in pool order.
    Separate(Vec<(String, i32)>),
}

/// Why a pass cannot read every event of the pool's filers
/// (docs/meta-log.md#several-filers, docs/meta-log.md#unread-filers): the
/// text names the filers and the fix.
#[derive(Debug, thiserror::Error)]
pub enum StoreCheckError {
    /// Filers did not answer, and the filers are not known to share a store.
    #[error(
        "meta-log: filer {} unreachable, and the filers do not share a store (or its store \
         is not known yet): the events written through it are only in its own meta-log, so \
         a pass on the others would miss them; bring it back, or remove it from \
         `cluster.filer` once its writes are no longer needed \
         (docs/meta-log.md#several-filers)",
        addr_errors(.down)
    )]
    Unreachable {
        /// Each filer that did not answer, and its error.
        down: Vec<(String, FilerError)>,
    },
    /// Some filers share a store and others do not.
    #[error(
        "meta-log: the filers mix shared and separate stores (filers by store: {}); a pass \
         cannot read every event of such a cluster completely; give every filer the same store \
         or each its own (docs/meta-log.md#several-filers)",
        store_groups(.by_store)
    )]
    MixedStores {
        /// The filers' addresses, grouped by store.
        by_store: Vec<Vec<String>>,
    },
    /// The master lists filers the pass does not read, whose events may be in
    /// no log it reads.
    #[error(
        "meta-log: master {master} lists filer {} that this pass does not read (it reads {}): \
         the events written through it are only in its own meta-log, and the others' \
         aggregated logs can lack them for good after a restart, so the pass would miss due \
         deletions; add it to `cluster.filer`, or set only `cluster.master` so every filer is \
         read (docs/meta-log.md#unread-filers)",
        joined(.unread, ", "),
        .reads.join(", ")
    )]
    UnreadFilers {
        /// The master that lists them.
        master: String,
        /// Each such filer and why its events may be missed.
        unread: Vec<UnreadFiler>,
        /// The filers the pass reads.
        reads: Vec<String>,
    },
}

/// A filer the master lists, the pool lacks, and whose store is not known
/// to be one the pass reads.
#[derive(Debug, thiserror::Error)]
pub enum UnreadFiler {
    /// Its address is no gRPC endpoint.
    #[error("{addr} ({source})")]
    BadAddress {
        addr: String,
        /// Why it cannot be dialled.
        #[source]
        source: AddressError,
    },
    /// It has a store of its own.
    #[error("{addr} (a store of its own)")]
    OwnStore { addr: String },
    /// It did not tell its store.
    #[error("{addr} (its store is unknown: {source})")]
    UnknownStore {
        addr: String,
        #[source]
        source: FilerError,
    },
}

fn joined<T: std::fmt::Display>(items: &[T], sep: &str) -> String {
    joined_by(items, sep, ToString::to_string)
}

fn joined_by<T>(items: &[T], sep: &str, show: impl Fn(&T) -> String) -> String {
    items.iter().map(show).collect::<Vec<_>>().join(sep)
}

/// `<addr>: <error>` for each filer, joined by `; `.
fn addr_errors(down: &[(String, FilerError)]) -> String {
    joined_by(down, "; ", |(addr, e)| format!("{addr}: {e}"))
}

/// `[a, b] [c]`: each store's filers.
fn store_groups(by_store: &[Vec<String>]) -> String {
    joined_by(by_store, " ", |a| format!("[{}]", a.join(", ")))
}

impl FilerPool {
    /// Asks every filer for its store signature (remembering them across
    /// passes). A filer that does not answer and whose store is unknown or
    /// its own is an error: events written through it are only in its log, and
    /// a stream on the others would silently miss them.
    pub async fn store_check(&self) -> Result<StoreCheck, StoreCheckError> {
        let nodes = self.nodes();
        if nodes.len() == 1 {
            return Ok(StoreCheck::Shared);
        }
        let answers = futures::future::join_all(nodes.iter().map(|n| {
            let filer = n.filer.clone();
            async move { filer.configuration().await.map(|c| c.signature) }
        }))
        .await;
        let mut known = self.signatures.lock().unwrap_or_else(|p| p.into_inner());
        let mut down = Vec::new();
        for (n, answer) in nodes.iter().zip(answers) {
            match answer {
                Ok(sig) => {
                    known.insert(n.addr.clone(), sig);
                }
                Err(e) => down.push((n.addr.clone(), e)),
            }
        }
        let sigs: Vec<Option<i32>> = nodes.iter().map(|n| known.get(&n.addr).copied()).collect();
        let shared = sigs.iter().all(|s| s.is_some() && *s == sigs[0]);
        match (shared, down.is_empty()) {
            (true, _) => Ok(StoreCheck::Shared),
            (false, true) => {
                let filers: Vec<(String, i32)> = nodes
                    .iter()
                    .zip(&sigs)
                    .filter_map(|(n, s)| s.map(|s| (n.addr.clone(), s)))
                    .collect();
                separate_or_mixed(filers)
            }
            (false, false) => Err(StoreCheckError::Unreachable { down }),
        }
    }

    /// Refuses a pass that does not read every filer it must: the master
    /// lists every filer of the pool's filer group, and one missing from the
    /// pool whose store is its own holds events in no log this pass reads. A
    /// peer's aggregated log is no substitute: it can lack them for good
    /// after a restart (docs/meta-log.md#unread-filers). The master asked is
    /// `configured` (`cluster.master`) when set, else those the filer names.
    /// When neither the filers nor a master answer, the check is skipped
    /// with a warning: the pass then fails or reads what it can reach, as
    /// before the check. Once per pass, at its start.
    pub async fn check_unread_filers(&self, configured: &str) -> Result<(), StoreCheckError> {
        let started = Instant::now();
        let nodes = self.ordered();
        let mut reported = None;
        for n in &nodes {
            if let Ok(r) = n.filer.store_and_masters().await {
                reported = Some(r);
                break;
            }
        }
        let Some((own_sig, reported_masters, group)) = reported else {
            return Ok(());
        };
        let masters = if configured.trim().is_empty() {
            reported_masters
        } else {
            vec![configured.trim().to_string()]
        };
        let mut listed = None;
        let mut errors = Vec::new();
        for named in &masters {
            // `cluster.master` is a gRPC address; the filer names a master
            // by its HTTP address (`host:port` or `host:port.grpcPort`).
            let m = if configured.trim().is_empty() {
                match discovery::reported_master(named) {
                    Ok(m) => m,
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                }
            } else {
                named.clone()
            };
            let call =
                discovery::cluster_nodes(&m, discovery::FILER_TYPE, &group, self.tls.as_ref());
            match call.await {
                Ok(l) => {
                    listed = Some((m.clone(), l));
                    break;
                }
                Err(e) => errors.push(e),
            }
        }
        let Some((master, listed)) = listed else {
            if !masters.is_empty() {
                tracing::warn!(
                    errors = joined(&errors, "; "),
                    "could not ask the master which filers the cluster has; reading the \
                     configured ones"
                );
            }
            return Ok(());
        };
        let ours: HashSet<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
        let mut stores: HashSet<i32> = self
            .signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .copied()
            .collect();
        stores.insert(own_sig);
        let mut unread = Vec::new();
        for raw in listed.into_keys() {
            let Ok(addr) = ServerAddress::parse(&raw).map(|a| a.grpc()) else {
                continue;
            };
            if ours.contains(addr.as_str()) {
                continue;
            }
            let client = match lazy_channel(&addr, self.tls.clone()) {
                Ok(ch) => FilerClient::from_channel(ch, &addr).with_call_timeout(self.call_timeout),
                Err(source) => {
                    unread.push(UnreadFiler::BadAddress { addr, source });
                    continue;
                }
            };
            match client.configuration().await.map(|c| c.signature) {
                // A filer of the pool under another name, or a store-mate
                // of one: its persisted events are in a store the pass
                // reads.
                Ok(sig) if stores.contains(&sig) => {}
                Ok(_) => unread.push(UnreadFiler::OwnStore { addr }),
                Err(source) => unread.push(UnreadFiler::UnknownStore { addr, source }),
            }
        }
        tracing::debug!(
            master,
            unread = unread.len(),
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "checked the cluster's filers against the pass's"
        );
        let reads = nodes.iter().map(|n| n.addr.clone()).collect();
        match unread.is_empty() {
            true => Ok(()),
            false => Err(StoreCheckError::UnreadFilers {
                master,
                unread,
                reads,
            }),
        }
    }
}

/// Filers with different store signatures: [`StoreCheck::Separate`] when
/// no two share one. Some sharing a store and others not is refused: a
/// filer's own log on a shared store holds its store-mates' persisted events
/// but not their unflushed ones, so neither one log per filer nor one per
/// store is complete (docs/meta-log.md#several-filers).
fn separate_or_mixed(filers: Vec<(String, i32)>) -> Result<StoreCheck, StoreCheckError> {
    let mut by_store: std::collections::BTreeMap<i32, Vec<&str>> = Default::default();
    for (addr, sig) in &filers {
        by_store.entry(*sig).or_default().push(addr);
    }
    if by_store.values().all(|a| a.len() == 1) {
        return Ok(StoreCheck::Separate(filers));
    }
    Err(StoreCheckError::MixedStores {
        by_store: by_store
            .into_values()
            .map(|a| a.into_iter().map(str::to_string).collect())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separate_stores_each_or_none_and_a_mix_is_refused() {
        let f = |a: &str, s: i32| (a.to_string(), s);
        let own = vec![f("a:1", 1), f("b:1", 2), f("c:1", 3)];
        assert_eq!(
            separate_or_mixed(own.clone()).unwrap(),
            StoreCheck::Separate(own)
        );
        let e = separate_or_mixed(vec![f("a:1", 1), f("b:1", 1), f("c:1", 3)]).unwrap_err();
        assert!(matches!(e, StoreCheckError::MixedStores { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "meta-log: the filers mix shared and separate stores (filers by store: [a:1, b:1] \
             [c:1]); a pass cannot read every event of such a cluster completely; give every \
             filer the same store or each its own (docs/meta-log.md#several-filers)"
        );
    }

    #[test]
    fn unread_filers_are_named_with_why() {
        let e = StoreCheckError::UnreadFilers {
            master: "m:1".into(),
            unread: vec![
                UnreadFiler::OwnStore { addr: "c:1".into() },
                UnreadFiler::BadAddress {
                    addr: "d".into(),
                    source: AddressError::Invalid {
                        addr: "d".into(),
                        reason: "no port".into(),
                    },
                },
            ],
            reads: vec!["a:1".into(), "b:1".into()],
        };
        assert_eq!(
            e.to_string(),
            "meta-log: master m:1 lists filer c:1 (a store of its own), d (invalid address \
             \"d\": no port; expected host:port) that this pass does not read (it reads a:1, \
             b:1): the events written through it are only in its own meta-log, and the others' \
             aggregated logs can lack them for good after a restart, so the pass would miss due \
             deletions; add it to `cluster.filer`, or set only `cluster.master` so every filer \
             is read (docs/meta-log.md#unread-filers)"
        );
    }
}
