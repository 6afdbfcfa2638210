//! The tower layer while its backend is reconfigured: every response's
//! `RateLimit` field describes the decision by the policies its
//! `RateLimit-Policy` field names, never by another configuration's.

#![cfg(feature = "tower")]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response};
use slidelog::tower::{Backend, GlobalKey, HeaderKey, KeyExtractor, RateLimitLayer, Verdict};
use slidelog::{KeyedLimiter, Limiter, ManualClock, Policy, Quota, SlidingCounter};
use tower::{Layer, Service};

/// The two configurations a reconfiguring thread alternates between: few
/// requests in a short window, and many in a long one. Described by one
/// and decided by the other, a response shows more remaining than its
/// policy's quota.
fn quotas() -> [Quota; 2] {
    [
        Quota::new(6, Duration::from_secs(2)).unwrap(),
        Quota::new(43, Duration::from_secs(2)).unwrap(),
    ]
}

/// `(name, first number, second number)` of each item of a structured
/// field such as `"default";q=6;w=2, "1m";q=100;w=60`.
fn items(value: &str) -> Vec<(String, u64, u64)> {
    value
        .split(", ")
        .map(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap().trim_matches('"').to_string();
            let mut number = || {
                let part = parts.next().unwrap();
                part.split_once('=').unwrap().1.parse().unwrap()
            };
            let (a, b) = (number(), number());
            (name, a, b)
        })
        .collect()
}

/// Whether a response's `RateLimit` items fit the policies its
/// `RateLimit-Policy` names: each item names one of them, and its `r` is
/// at most that policy's `q`.
fn consistent<T>(response: &Response<T>) -> bool {
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap());
    let (Some(policy), Some(state)) = (header("ratelimit-policy"), header("ratelimit")) else {
        // No fields: nothing described, nothing inconsistent.
        return true;
    };
    let quotas: HashMap<String, u64> = items(policy).into_iter().map(|(n, q, _)| (n, q)).collect();
    items(state)
        .iter()
        .all(|(name, r, _)| quotas.get(name).is_some_and(|&q| *r <= q))
}

/// Sends requests through `layer` from three threads while a fourth
/// reconfigures `backend` back and forth and a fifth moves the clock (so
/// admissions leave the window and `remaining` comes back); returns the
/// responses whose fields do not fit each other, and how many there were.
fn race<B, K, X>(
    backend: Arc<B>,
    layer: RateLimitLayer<B, X, K>,
    clock: ManualClock,
    reconfigure: impl Fn(&B, &Quota) + Send + Sync + 'static,
) -> (usize, usize)
where
    B: Backend<K> + ?Sized + Send + Sync + 'static,
    K: Clone + Send + Sync + 'static,
    X: KeyExtractor<axum::body::Body, Key = K>,
{
    let svc = layer.layer(tower::service_fn(|_: Request<axum::body::Body>| async {
        Ok::<_, Infallible>(Response::new(axum::body::Body::empty()))
    }));
    const REQUESTS: usize = 40_000;
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(5));
    let changer = {
        let (done, barrier, backend) = (
            Arc::clone(&done),
            Arc::clone(&barrier),
            Arc::clone(&backend),
        );
        std::thread::spawn(move || {
            barrier.wait();
            let quotas = quotas();
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                reconfigure(&backend, &quotas[i % 2]);
                i += 1;
            }
        })
    };
    let mover = {
        let (done, barrier) = (Arc::clone(&done), Arc::clone(&barrier));
        std::thread::spawn(move || {
            barrier.wait();
            while !done.load(Ordering::Relaxed) {
                clock.advance(Duration::from_millis(50));
                std::thread::yield_now();
            }
        })
    };
    let senders: Vec<_> = (0..3)
        .map(|_| {
            let (mut svc, barrier) = (svc.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let mut cx = Context::from_waker(Waker::noop());
                let mut wrong = 0;
                for _ in 0..REQUESTS {
                    let request = Request::get("/")
                        .header("x-api-key", "tenant")
                        .body(axum::body::Body::empty())
                        .unwrap();
                    assert!(svc.poll_ready(&mut cx).is_ready());
                    let mut answer = std::pin::pin!(svc.call(request));
                    let response = loop {
                        if let Poll::Ready(response) = answer.as_mut().poll(&mut cx) {
                            break response.unwrap();
                        }
                    };
                    if !consistent(&response) {
                        wrong += 1;
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong = senders.into_iter().map(|s| s.join().unwrap()).sum();
    done.store(true, Ordering::Relaxed);
    changer.join().unwrap();
    mover.join().unwrap();
    (wrong, 3 * REQUESTS)
}

#[test]
fn a_keyed_limiters_responses_describe_the_policies_that_decided_them() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<String, ManualClock>::with_clock(6, Duration::from_secs(2), clock.clone())
            .unwrap(),
    );
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"));
    let (wrong, of) = race(limiter, layer, clock, |l, q| {
        l.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses described another configuration"
    );
}

#[test]
fn a_single_limiters_responses_describe_the_policies_that_decided_them() {
    let clock = ManualClock::new();
    let limiter = Arc::new(Limiter::with_clock(6, Duration::from_secs(2), clock.clone()).unwrap());
    let layer = RateLimitLayer::<_, _, ()>::new(Arc::clone(&limiter), GlobalKey);
    let (wrong, of) = race(limiter, layer, clock, |l, q| {
        l.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses described another configuration"
    );
}

#[test]
fn a_counters_responses_describe_the_limit_that_decided_them() {
    let clock = ManualClock::new();
    let counter = Arc::new(
        SlidingCounter::with_clock(43, Duration::from_secs(2), 10, clock.clone()).unwrap(),
    );
    let layer = RateLimitLayer::<_, _, ()>::new(Arc::clone(&counter), GlobalKey);
    let (wrong, of) = race(counter, layer, clock, |c, q| {
        c.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses described another configuration"
    );
}

/// A future that is pending once (waking itself), then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A backend that decides after an await, as a remote store does: the
/// limiter's verdict, one poll after the layer asked.
struct Awaited(Arc<Limiter<ManualClock>>);

impl Backend<()> for Awaited {
    type Future = Pin<Box<dyn Future<Output = Verdict> + Send>>;
    fn judge(&self, key: (), request: slidelog::Request) -> Self::Future {
        let limiter = Arc::clone(&self.0);
        Box::pin(async move {
            YieldOnce(false).await;
            Backend::<()>::judge_now(&*limiter, &key, request).expect("decided in process")
        })
    }
    fn policy(&self) -> (u32, Duration) {
        Backend::<()>::policy(&*self.0)
    }
    fn policies(&self) -> Vec<Policy> {
        Backend::<()>::policies(&*self.0)
    }
    fn generation(&self) -> u64 {
        Backend::<()>::generation(&*self.0)
    }
}

#[test]
fn an_awaited_backends_responses_describe_the_policies_that_decided_them() {
    let clock = ManualClock::new();
    let limiter = Arc::new(Limiter::with_clock(6, Duration::from_secs(2), clock.clone()).unwrap());
    let backend = Arc::new(Awaited(limiter));
    let layer = RateLimitLayer::<_, _, ()>::new(Arc::clone(&backend), GlobalKey);
    let (wrong, of) = race(backend, layer, clock, |b, q| {
        b.0.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses described another configuration"
    );
}

/// The limit a response's `RateLimit-Policy` names, and the `r` its
/// `RateLimit` says (one policy); `None` without the fields.
fn quota_and_remaining<T>(response: &Response<T>) -> Option<(u64, u64)> {
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap());
    let (policy, state) = (header("ratelimit-policy")?, header("ratelimit")?);
    let (q, r) = (items(policy)[0].1, items(state)[0].1);
    Some((q, r))
}

/// **Described by the configuration that decided**: one sender, the clock
/// still within a round of [`PER_ROUND`] requests (moved past every window
/// between rounds), so the sender knows how many of the key's admissions
/// are in the window (`used`: every one it was told of this round). An
/// admission described by policies `q` with `r` remaining says `q - r` are
/// used; a denial (`r = 0`) says at least `q` are. Both limits fit every
/// admission of the smaller one: described by the larger while the smaller
/// decided (a key the walk has not moved yet), a response says 90 more were
/// used than were. Returns the responses that say otherwise, and how many
/// were sent.
fn race_exact<B, X>(
    backend: Arc<B>,
    layer: RateLimitLayer<B, X, String>,
    clock: ManualClock,
    reconfigure: impl Fn(&B, &Quota) + Send + Sync + 'static,
) -> (usize, usize)
where
    B: Backend<String> + ?Sized + Send + Sync + 'static,
    X: KeyExtractor<axum::body::Body, Key = String>,
{
    let mut svc = layer.layer(tower::service_fn(|_: Request<axum::body::Body>| async {
        Ok::<_, Infallible>(Response::new(axum::body::Body::empty()))
    }));
    const REQUESTS: usize = 30_000;
    let quotas = exact_quotas();
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(2));
    let changer = {
        let (done, barrier, backend) = (
            Arc::clone(&done),
            Arc::clone(&barrier),
            Arc::clone(&backend),
        );
        std::thread::spawn(move || {
            barrier.wait();
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                reconfigure(&backend, &quotas[i % 2]);
                i += 1;
            }
            i
        })
    };
    barrier.wait();
    let mut cx = Context::from_waker(Waker::noop());
    let (mut wrong, mut used) = (0, 0);
    for i in 0..REQUESTS {
        if i % PER_ROUND == 0 {
            // Every admission leaves every window: none is used.
            clock.advance(Duration::from_secs(2 * 3_600));
            used = 0;
        }
        let request = Request::get("/")
            .header("x-api-key", "hot")
            .body(axum::body::Body::empty())
            .unwrap();
        assert!(svc.poll_ready(&mut cx).is_ready());
        let mut answer = std::pin::pin!(svc.call(request));
        let response = loop {
            if let Poll::Ready(response) = answer.as_mut().poll(&mut cx) {
                break response.unwrap();
            }
        };
        let admitted = response.status().is_success();
        used += u64::from(admitted);
        if let Some((q, r)) = quota_and_remaining(&response) {
            let right = if admitted {
                q.checked_sub(r) == Some(used)
            } else {
                r == 0 && q <= used
            };
            wrong += usize::from(!right);
        }
    }
    done.store(true, Ordering::Relaxed);
    let changes = changer.join().unwrap();
    assert!(changes > 1, "the configuration changed while requests ran");
    (wrong, REQUESTS)
}

/// Requests per round of [`race_exact`]: past the smaller limit, fewer
/// than the larger.
const PER_ROUND: usize = 12;

/// The two configurations [`race_exact`] alternates between: one limit ten
/// times the other, in the same long window.
fn exact_quotas() -> [Quota; 2] {
    [
        Quota::new(10, Duration::from_secs(3_600)).unwrap(),
        Quota::new(100, Duration::from_secs(3_600)).unwrap(),
    ]
}

#[test]
fn a_keyed_limiters_responses_name_the_limit_that_decided_them() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<String, ManualClock>::with_clock(
            10,
            Duration::from_secs(3_600),
            clock.clone(),
        )
        .unwrap(),
    );
    // Keys the walks move, so that each takes a while: the checked key is
    // often one not moved yet.
    for key in 0..2_000 {
        limiter.check(&format!("idle-{key}")).unwrap();
    }
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"));
    let (wrong, of) = race_exact(limiter, layer, clock, |l, q| {
        l.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses named a limit that did not decide them"
    );
}

#[test]
fn a_single_limiters_responses_name_the_limit_that_decided_them() {
    let clock = ManualClock::new();
    let limiter =
        Arc::new(Limiter::with_clock(10, Duration::from_secs(3_600), clock.clone()).unwrap());
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"));
    let (wrong, of) = race_exact(limiter, layer, clock, |l, q| {
        l.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses named a limit that did not decide them"
    );
}

#[test]
fn a_counters_responses_name_the_limit_that_decided_them() {
    let clock = ManualClock::new();
    let counter = Arc::new(
        SlidingCounter::with_clock(100, Duration::from_secs(3_600), 10, clock.clone()).unwrap(),
    );
    let layer = RateLimitLayer::new(Arc::clone(&counter), HeaderKey::new("x-api-key"));
    let (wrong, of) = race_exact(counter, layer, clock, |c, q| {
        c.reconfigure(q.clone()).unwrap()
    });
    assert_eq!(
        wrong, 0,
        "{wrong} of {of} responses named a limit that did not decide them"
    );
}
