//! The DeleteDispatcher actor: sends `LifecycleDelete` calls with bounded
//! concurrency under the shared leaky-bucket limiter, retries transport errors
//! per [`RetryPolicy`], and reports every outcome back to the requesting shard
//! by message (awaited `send`, never `do_send`, so an outcome — possibly a halt
//! signal — is never dropped on a full mailbox).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::future::BoxFuture;
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::options::StopSignal;
use super::retry::RetryPolicy;
use crate::engine::delete::CallResult;

/// One transport attempt's failure.
#[derive(Debug, Clone)]
pub struct AttemptError {
    /// Whether retrying can help (unavailable, reset, deadline…).
    pub retryable: bool,
    pub message: String,
}

/// One attempt's result: the server's verdict, or a transport error.
pub type AttemptResult = Result<CallResult, AttemptError>;

/// The delete RPC as the dispatcher needs it. Implemented by the real
/// `LifecycleDelete` client and by test fakes.
pub trait DeletePort<C>: Send + Sync + 'static {
    /// One attempt. `Ok` carries the server's verdict.
    fn call(&self, call: &C) -> BoxFuture<'static, AttemptResult>;
}

/// A delete to send; `C` is the call payload, `T` the shard's ticket.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Dispatch<C: Send + 'static, T: Send + 'static> {
    pub call: C,
    /// Returned untouched in the outcome so the shard can match it up.
    pub ticket: T,
    pub reply_to: Recipient<Outcome<T>>,
    /// The call's `delete` span (its outcome is recorded here); use
    /// `Span::none()` when not tracing.
    pub span: tracing::Span,
}

/// The fate of one [`Dispatch`], by its ticket: the sender kept the call.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Outcome<T: Send + 'static> {
    pub ticket: T,
    pub result: CallResult,
    /// Attempts made (0 for a dry run).
    pub attempts: u32,
    /// Time spent waiting for the rate limiter.
    pub limiter_wait: Duration,
}

/// A last check before each attempt: `Some(reason)` withdraws the call
/// (answered [`CallResult::withdrawn`], never sent). The pass uses it to stop a
/// bucket's deletes once its configuration changed
/// (docs/lifecycle-config.md#changes-during-a-pass); the decision itself is
/// the pure `plan::RuleChanges::still_due`.
pub type Gate<C> = Arc<dyn Fn(&C) -> Option<String> + Send + Sync>;

/// The object a call acts on: calls with the same key are sent one after
/// another, never at once (docs/lifecycle-delete.md#one-object-at-a-time).
pub type CallKey<C> = Arc<dyn Fn(&C) -> String + Send + Sync>;

/// One lock per call key, held from before a call's first attempt until its
/// final answer. An entry lives only while a call holds or waits for it.
#[derive(Default, Clone)]
struct KeyedLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

/// A held key; dropping it lets the next call of the key go.
struct KeyGuard {
    locks: KeyedLocks,
    key: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl KeyedLocks {
    async fn lock(&self, key: String) -> KeyGuard {
        let lock = crate::pass::lock(&self.0)
            .entry(key.clone())
            .or_default()
            .clone();
        let held = Some(lock.clone().lock_owned().await);
        KeyGuard {
            locks: self.clone(),
            key,
            lock,
            held,
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        self.held.take();
        let mut map = crate::pass::lock(&self.locks.0);
        // The map and this guard are the only holders: nobody waits. Clones
        // are taken under the map's lock, so the count cannot grow meanwhile.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.key);
        }
    }
}

/// Sends deletes with bounded concurrency, rate limiting and retries. Each
/// call's task takes a clone (every field is shared or `Copy`).
#[derive(Clone)]
pub struct DeleteDispatcher<C: Send + 'static> {
    port: Arc<dyn DeletePort<C>>,
    limiter: Option<Arc<Limiter>>,
    slots: Arc<Semaphore>,
    policy: RetryPolicy,
    dry_run: bool,
    stop: StopSignal,
    gate: Option<Gate<C>>,
    admit: Option<Gate<C>>,
    record: Option<Record<C>>,
    one_at_a_time: Option<(CallKey<C>, KeyedLocks)>,
}

/// Told every call that was sent, once, with its final result (the
/// deletion journal).
pub type Record<C> = Arc<dyn Fn(&C, &CallResult) + Send + Sync>;

impl<C: Send + Sync + 'static> DeleteDispatcher<C> {
    /// A dispatcher allowing `max_in_flight` concurrent calls.
    pub fn new(
        port: Arc<dyn DeletePort<C>>,
        limiter: Option<Arc<Limiter>>,
        max_in_flight: usize,
        policy: RetryPolicy,
        dry_run: bool,
    ) -> Self {
        DeleteDispatcher {
            port,
            limiter,
            slots: Arc::new(Semaphore::new(max_in_flight.max(1))),
            policy,
            dry_run,
            stop: StopSignal::default(),
            gate: None,
            admit: None,
            record: None,
            one_at_a_time: None,
        }
    }

    /// Sends calls with the same `key` one after another: two shards' same
    /// delete, sent at once, can stack a second delete marker on a versioned
    /// key (docs/lifecycle-delete.md#one-object-at-a-time).
    pub fn one_at_a_time(mut self, key: CallKey<C>) -> Self {
        self.one_at_a_time = Some((key, KeyedLocks::default()));
        self
    }

    /// Calls `record` once per call that was sent (not dry runs, not
    /// withdrawn or held calls), with its final result.
    pub fn with_record(mut self, record: Record<C>) -> Self {
        self.record = Some(record);
        self
    }

    /// Asks `admit` exactly once per call, when it got its slot and the gate
    /// let it through: `Some(reason)` holds it (answered withdrawn with that
    /// reason, never sent). The pass's deletion cap
    /// (`engine::safety::CapBook`) counts admissions, so it must see each
    /// call once.
    pub fn with_admit(mut self, admit: Gate<C>) -> Self {
        self.admit = Some(admit);
        self
    }

    /// Withdraws every call not yet on the wire once `stop` fires (shutdown,
    /// `pass.max_runtime`), wherever it waits; only calls already sent drain
    /// (docs/lifecycle-delete.md#stopping).
    pub fn with_stop(mut self, stop: StopSignal) -> Self {
        self.stop = stop;
        self
    }

    /// Checks `gate` after the call got its slot and again after each rate
    /// limiter wait, so a withdrawal takes effect for calls already queued.
    pub fn with_gate(mut self, gate: Gate<C>) -> Self {
        self.gate = Some(gate);
        self
    }
}

impl<C: Send + Sync + 'static> Actor for DeleteDispatcher<C> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Shards may queue many deletes at once; each waits on the semaphore in
        // its own task, so the mailbox only holds hand-offs.
        ctx.set_mailbox_capacity(1024);
    }
}

impl<C: Clone + Send + Sync + 'static, T: Send + 'static> Handler<Dispatch<C, T>>
    for DeleteDispatcher<C>
{
    type Result = ();

    fn handle(&mut self, msg: Dispatch<C, T>, _ctx: &mut Self::Context) {
        let d = self.clone();
        // A Send future on the runtime's pool: I/O never blocks the arbiter.
        tokio::spawn(async move {
            let (call, span) = (msg.call, msg.span);
            // Taken before a slot, so a waiting call holds none.
            let _key = match &d.one_at_a_time {
                Some((key, locks)) => Some(locks.lock(key(&call)).await),
                None => None,
            };
            let withdrawn = |call: &C| {
                d.stop
                    .current()
                    .map(stopped)
                    .or_else(|| d.gate.as_ref().and_then(|g| g(call)))
            };
            // The gate first: `admit` is asked only for a call it lets through.
            let held =
                |call: &C| withdrawn(call).or_else(|| d.admit.as_ref().and_then(|a| a(call)));
            let (result, attempts, limiter_wait) = match d.slots.clone().acquire_owned().await {
                Ok(_permit) if let Some(reason) = held(&call) => {
                    (CallResult::withdrawn(reason), 0, Duration::ZERO)
                }
                Ok(_permit) if d.dry_run => (CallResult::dry_run(), 0, Duration::ZERO),
                Ok(_permit) => {
                    let attempts = Attempts {
                        port: &*d.port,
                        limiter: d.limiter.as_deref(),
                        policy: d.policy,
                        stop: &d.stop,
                        withdrawn: &withdrawn,
                    };
                    attempts.run(&call).instrument(span.clone()).await
                }
                // The semaphore is never closed; report instead of dropping.
                Err(e) => (
                    CallResult::transport(format!("dispatcher closed: {e}")),
                    0,
                    Duration::ZERO,
                ),
            };
            if attempts > 0
                && let Some(r) = &d.record
            {
                r(&call, &result);
            }
            crate::telemetry::record_outcome(&span, result.outcome.label());
            drop(span);
            let outcome = Outcome {
                ticket: msg.ticket,
                result,
                attempts,
                limiter_wait,
            };
            if let Err(e) = msg.reply_to.send(outcome).await {
                tracing::error!(error = %e, "shard gone; delete outcome could not be delivered");
            }
        });
    }
}

/// The reason a call withdrawn by a stop is answered with.
fn stopped(why: String) -> String {
    format!("not sent: the pass was stopped first ({why})")
}

/// What one call's attempts need.
struct Attempts<'a, C> {
    port: &'a dyn DeletePort<C>,
    limiter: Option<&'a Limiter>,
    policy: RetryPolicy,
    stop: &'a StopSignal,
    withdrawn: &'a (dyn Fn(&C) -> Option<String> + Sync),
}

impl<C: Send + Sync + 'static> Attempts<'_, C> {
    /// Attempts `call` until the server answers, a transport error is not
    /// worth retrying or the attempts run out. A stop ends a wait for the
    /// limiter or a retry at once (the call is withdrawn), never a call
    /// already on the wire.
    async fn run(&self, call: &C) -> (CallResult, u32, Duration) {
        let mut waited = Duration::ZERO;
        let mut attempt = 0;
        loop {
            attempt += 1;
            if let Some(l) = self.limiter {
                let t = Instant::now();
                let turn = l.acquire();
                tokio::select! {
                    () = turn => waited += t.elapsed(),
                    why = self.stop.fired() => {
                        return (CallResult::withdrawn(stopped(why)), attempt - 1, waited + t.elapsed());
                    }
                }
            }
            // The limiter wait can be long: check again right before sending.
            if let Some(reason) = (self.withdrawn)(call) {
                return (CallResult::withdrawn(reason), attempt - 1, waited);
            }
            // Our own deadline, not tonic's: it names the setting in the reason
            // (docs/grpc.md#deadlines).
            let policy = self.policy;
            let answer = match tokio::time::timeout(policy.call_timeout, self.port.call(call)).await
            {
                Ok(r) => r,
                Err(_) => Err(AttemptError {
                    retryable: true,
                    message: format!(
                        "DEADLINE: no answer within {} (dispatch.call_timeout)",
                        humantime::format_duration(policy.call_timeout)
                    ),
                }),
            };
            match answer {
                Ok(verdict) => return (verdict, attempt, waited),
                Err(e) if e.retryable && policy.should_retry(attempt) => {
                    let pause = tokio::time::sleep(policy.backoff(attempt, rand::random::<f64>()));
                    tokio::select! {
                        () = pause => {}
                        why = self.stop.fired() => {
                            let why = format!("{}; the last attempt failed: {}", stopped(why), e.message);
                            return (CallResult::withdrawn(why), attempt, waited);
                        }
                    }
                }
                Err(e) => return (CallResult::transport(e.message), attempt, waited),
            }
        }
    }
}

/// The shared rate cap: a leaky bucket that hands out send times (the
/// "virtual scheduling" form of GCRA): a wait dropped half-way (a stop) only
/// leaves its time unused, and calls go in the order they asked
/// (docs/lifecycle-delete.md#stopping).
pub struct Limiter {
    /// `1/rate`.
    interval: Duration,
    /// How far ahead of the schedule a call may go: `(burst - 1) * interval`.
    slack: Duration,
    /// When the next call is due if none went early (GCRA's theoretical
    /// arrival time).
    next: Mutex<tokio::time::Instant>,
}

impl Limiter {
    /// `rate` calls per second (a rate that is not a positive number means
    /// 1/s), `burst` at once after an idle spell (at least 1).
    pub fn new(rate: f64, burst: u32) -> Limiter {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1.0
        };
        let interval = Duration::from_secs_f64(1.0 / rate);
        Limiter {
            interval,
            slack: interval.saturating_mul(burst.max(1) - 1),
            next: Mutex::new(tokio::time::Instant::now()),
        }
    }

    /// Resolves at this call's turn.
    pub async fn acquire(&self) {
        let at = self.reserve(tokio::time::Instant::now());
        tokio::time::sleep_until(at).await;
    }

    /// Reserves the first free time at or after `now` and returns it.
    fn reserve(&self, now: tokio::time::Instant) -> tokio::time::Instant {
        let mut next = crate::pass::lock(&self.next);
        let at = (*next).checked_sub(self.slack).unwrap_or(now).max(now);
        *next = (*next).max(now) + self.interval;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::delete::DeleteOutcome;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Scripted port: pops one scripted result per attempt; records concurrency.
    struct Script {
        results: Mutex<Vec<AttemptResult>>,
        calls: AtomicUsize,
        active: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    impl DeletePort<u32> for Script {
        fn call(&self, _c: &u32) -> BoxFuture<'static, AttemptResult> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let r = self.results.lock().unwrap().pop().unwrap_or(Ok(done()));
            let (active, peak) = (self.active.clone(), self.peak.clone());
            Box::pin(async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                active.fetch_sub(1, Ordering::SeqCst);
                r
            })
        }
    }

    fn script(results: Vec<AttemptResult>) -> Arc<Script> {
        Arc::new(Script {
            results: Mutex::new(results.into_iter().rev().collect()),
            calls: AtomicUsize::new(0),
            active: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
        })
    }

    struct Collector {
        got: Arc<Mutex<Vec<(u64, CallResult, u32)>>>,
    }
    impl Actor for Collector {
        type Context = Context<Self>;
    }
    impl Handler<Outcome<u64>> for Collector {
        type Result = ();
        fn handle(&mut self, m: Outcome<u64>, _: &mut Context<Self>) {
            self.got
                .lock()
                .unwrap()
                .push((m.ticket, m.result, m.attempts));
        }
    }

    fn done() -> CallResult {
        CallResult::answered(DeleteOutcome::Done, "")
    }

    fn transport(retryable: bool) -> AttemptResult {
        Err(AttemptError {
            retryable,
            message: "connection reset".into(),
        })
    }

    type Answers = Arc<Mutex<Vec<(u64, CallResult, u32)>>>;

    /// Hands `n` calls (tickets `0..n`) to `d`; their answers collect in the
    /// returned list as they come.
    async fn send_calls(d: &Addr<DeleteDispatcher<u32>>, n: u64) -> Answers {
        let got = Arc::new(Mutex::new(Vec::new()));
        let col = Collector { got: got.clone() }.start();
        for t in 0..n {
            d.send(Dispatch {
                call: 7u32,
                ticket: t,
                reply_to: col.clone().recipient(),
                span: tracing::Span::none(),
            })
            .await
            .unwrap();
        }
        got
    }

    /// The answers once there are `n`, or after `tries` waits of 5 ms.
    async fn answers(got: &Answers, n: usize, tries: usize) -> Vec<(u64, CallResult, u32)> {
        for _ in 0..tries {
            if got.lock().unwrap().len() == n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        got.lock().unwrap().clone()
    }

    async fn run(
        port: Arc<Script>,
        n: u64,
        max_in_flight: usize,
        dry_run: bool,
    ) -> Vec<(u64, CallResult, u32)> {
        let policy = RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
            call_timeout: Duration::from_secs(5),
        };
        let d = DeleteDispatcher::new(port, None, max_in_flight, policy, dry_run).start();
        let got = send_calls(&d, n).await;
        let mut v = answers(&got, n as usize, 500).await;
        v.sort_by_key(|x| x.0);
        v
    }

    #[actix::test]
    async fn transport_errors_are_retried_then_succeed() {
        let port = script(vec![transport(true), transport(true), Ok(done())]);
        let out = run(port.clone(), 1, 4, false).await;
        assert_eq!(out.len(), 1);
        assert!(out[0].1.is_resolved());
        assert_eq!(out[0].2, 3);
    }

    #[actix::test]
    async fn three_transport_failures_are_reported_unresolved() {
        let port = script(vec![
            transport(true),
            transport(true),
            transport(true),
            Ok(done()),
        ]);
        let out = run(port.clone(), 1, 4, false).await;
        assert_eq!(out[0].1.outcome, DeleteOutcome::RpcError);
        assert!(!out[0].1.is_resolved());
        assert_eq!(port.calls.load(Ordering::SeqCst), 3);
    }

    #[actix::test]
    async fn server_outcomes_and_non_retryable_errors_are_not_retried() {
        let port = script(vec![
            Ok(CallResult::answered(DeleteOutcome::RetryLater, "busy")),
            transport(false),
        ]);
        let out = run(port.clone(), 2, 1, false).await;
        assert_eq!(out[0].1.outcome, DeleteOutcome::RetryLater);
        assert_eq!(out[1].1.outcome, DeleteOutcome::RpcError);
        assert_eq!(port.calls.load(Ordering::SeqCst), 2);
    }

    #[actix::test]
    async fn every_outcome_is_reported_and_concurrency_is_bounded() {
        let port = script(vec![]);
        let out = run(port.clone(), 50, 4, false).await;
        assert_eq!(out.len(), 50);
        let peak = port.peak.load(Ordering::SeqCst);
        assert!((1..=4).contains(&peak), "peak {peak}");
    }

    /// Sends `calls` through a dispatcher of 4 slots that sends calls of
    /// the same value one at a time; answers every outcome.
    async fn run_keyed(port: Arc<Script>, calls: &[u32]) -> Vec<(u64, CallResult, u32)> {
        let got = Arc::new(Mutex::new(Vec::new()));
        let col = Collector { got: got.clone() }.start();
        let policy = RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
            call_timeout: Duration::from_secs(5),
        };
        let d = DeleteDispatcher::new(port, None, 4, policy, false)
            .one_at_a_time(Arc::new(|c: &u32| c.to_string()))
            .start();
        for (t, c) in calls.iter().enumerate() {
            d.send(Dispatch {
                call: *c,
                ticket: t as u64,
                reply_to: col.clone().recipient(),
                span: tracing::Span::none(),
            })
            .await
            .unwrap();
        }
        for _ in 0..500 {
            if got.lock().unwrap().len() == calls.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        got.lock().unwrap().clone()
    }

    /// Two shards' identical deletes, sent at once, let the gateway stack a
    /// second delete marker on one versioned key
    /// (tests/single_node/versioning.rs::versioned_shard_subsets_expire_each_version_once).
    #[actix::test]
    async fn same_object_deletes_sent_at_once_stacked_two_delete_markers() {
        let port = script(vec![]);
        let out = run_keyed(port.clone(), &[7; 12]).await;
        assert_eq!(out.len(), 12);
        assert_eq!(port.calls.load(Ordering::SeqCst), 12);
        assert_eq!(port.peak.load(Ordering::SeqCst), 1, "same key sent at once");
        // Other keys still go side by side, within the slots.
        let port = script(vec![]);
        let out = run_keyed(port.clone(), &[1, 2, 3, 4, 5, 6, 7, 8]).await;
        assert_eq!(out.len(), 8);
        let peak = port.peak.load(Ordering::SeqCst);
        assert!((2..=4).contains(&peak), "peak {peak}");
    }

    /// A gateway that accepts and never answers.
    struct Hang(AtomicUsize);
    impl DeletePort<u32> for Hang {
        fn call(&self, _c: &u32) -> BoxFuture<'static, AttemptResult> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(futures::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_a_retried_transport_error() {
        let port = Hang(AtomicUsize::new(0));
        let policy = RetryPolicy {
            attempts: 2,
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
            call_timeout: Duration::from_secs(2),
        };
        let t = tokio::time::Instant::now();
        let stop = StopSignal::default();
        let attempts = Attempts {
            port: &port,
            limiter: None,
            policy,
            stop: &stop,
            withdrawn: &|_: &u32| None,
        };
        let (r, attempts, _) = attempts.run(&7).await;
        assert_eq!(r.outcome, DeleteOutcome::RpcError);
        assert!(r.reason.contains("dispatch.call_timeout"), "{r:?}");
        assert_eq!((attempts, port.0.load(Ordering::SeqCst)), (2, 2));
        let el = t.elapsed();
        assert!(
            el >= Duration::from_millis(4100) && el <= policy.worst_call(),
            "{el:?}"
        );
    }

    #[actix::test]
    async fn dry_run_sends_nothing() {
        let port = script(vec![]);
        let out = run(port.clone(), 3, 4, true).await;
        assert!(out.iter().all(|o| o.1 == CallResult::dry_run()));
        assert_eq!(port.calls.load(Ordering::SeqCst), 0);
    }

    /// Once the gate withdraws (docs/lifecycle-config.md#changes-during-a-pass),
    /// calls already handed to the dispatcher (waiting for a slot or for the
    /// rate limiter) are answered WITHDRAWN instead of being sent.
    #[actix::test]
    async fn gate_withdraws_calls_already_queued() {
        use std::sync::atomic::AtomicBool;
        let port = script(vec![]);
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        let gate: Gate<u32> = Arc::new(move |_c: &u32| {
            flag.load(Ordering::SeqCst)
                .then(|| "configuration changed".to_string())
        });
        let policy = RetryPolicy {
            attempts: 1,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
            call_timeout: Duration::from_secs(5),
        };
        // 20/s: 20 calls would take a second.
        let d = DeleteDispatcher::new(
            port.clone(),
            Some(Arc::new(Limiter::new(20.0, 1))),
            8,
            policy,
            false,
        )
        .with_gate(gate)
        .start();
        let got = send_calls(&d, 20).await;
        tokio::time::sleep(Duration::from_millis(120)).await;
        closed.store(true, Ordering::SeqCst);
        let v = answers(&got, 20, 400).await;
        assert_eq!(v.len(), 20, "every call answered");
        let sent = port.calls.load(Ordering::SeqCst);
        let withdrawn = v
            .iter()
            .filter(|o| o.1.outcome == DeleteOutcome::Withdrawn)
            .count();
        assert!((1..=5).contains(&sent), "sent {sent}");
        assert_eq!(sent + withdrawn, 20);
        assert!(
            v.iter()
                .all(|o| o.1.outcome != DeleteOutcome::Withdrawn || o.2 == 0)
        );
    }

    /// A stop at 5 deletes/s: the calls waiting for their turn at the
    /// limiter are answered WITHDRAWN at once, not when their turn comes
    /// (the 20th's is 4 s away), and none is sent after the stop.
    #[actix::test]
    async fn a_stop_withdraws_calls_waiting_at_the_limiter_without_their_turn() {
        let port = script(vec![]);
        let (tx, stop) = StopSignal::new();
        let policy = RetryPolicy {
            attempts: 1,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
            call_timeout: Duration::from_secs(5),
        };
        let limiter = Some(Arc::new(Limiter::new(5.0, 1)));
        let d = DeleteDispatcher::new(port.clone(), limiter, 32, policy, false)
            .with_stop(stop)
            .start();
        let got = send_calls(&d, 20).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = port.calls.load(Ordering::SeqCst);
        tx.send(Some("shutdown (SIGTERM)".into())).unwrap();
        // 40 waits of 5 ms: well before the second call's turn.
        let v = answers(&got, 20, 40).await;
        assert_eq!(v.len(), 20, "every call answered before its turn");
        assert_eq!(sent, 1, "the burst of 1 went at once");
        assert_eq!(
            port.calls.load(Ordering::SeqCst),
            sent,
            "sent after the stop"
        );
        let withdrawn: Vec<_> = v
            .iter()
            .filter(|o| o.1.outcome == DeleteOutcome::Withdrawn)
            .collect();
        assert_eq!(withdrawn.len(), 19);
        assert!(
            withdrawn
                .iter()
                .all(|o| o.2 == 0 && o.1.reason.contains("shutdown (SIGTERM)")),
            "{withdrawn:?}"
        );
    }

    /// A call in its retry backoff when the stop comes is not sent again.
    #[tokio::test(start_paused = true)]
    async fn a_stop_during_a_retry_backoff_sends_no_more_attempts() {
        let port = script(vec![transport(true), Ok(done())]);
        let (tx, stop) = StopSignal::new();
        let policy = RetryPolicy {
            attempts: 3,
            initial: Duration::from_secs(10),
            max: Duration::from_secs(10),
            call_timeout: Duration::from_secs(5),
        };
        let attempts = Attempts {
            port: &*port,
            limiter: None,
            policy,
            stop: &stop,
            withdrawn: &|_: &u32| None,
        };
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tx.send(Some("pass.max_runtime (1s) reached".into()))
                .unwrap();
        };
        let ((r, n, _), ()) = tokio::join!(attempts.run(&7), stopper);
        assert_eq!(r.outcome, DeleteOutcome::Withdrawn);
        assert!(r.reason.contains("connection reset"), "{r:?}");
        assert_eq!((n, port.calls.load(Ordering::SeqCst)), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn limiter_lets_a_burst_through_after_an_idle_spell() {
        let l = Limiter::new(10.0, 4);
        let t = tokio::time::Instant::now();
        for _ in 0..4 {
            l.acquire().await;
        }
        assert_eq!(t.elapsed(), Duration::ZERO, "the burst waits for nothing");
        l.acquire().await;
        assert_eq!(t.elapsed(), Duration::from_millis(100));
        // Idle for a second: the burst is back, and no more than it.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = tokio::time::Instant::now();
        for _ in 0..5 {
            l.acquire().await;
        }
        assert_eq!(t.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn limiter_paces_to_the_rate() {
        let l = Limiter::new(10.0, 1);
        let t = tokio::time::Instant::now();
        for _ in 0..11 {
            l.acquire().await;
        }
        let el = t.elapsed();
        assert!(
            el >= Duration::from_millis(990) && el <= Duration::from_millis(1100),
            "{el:?}"
        );
    }
}
