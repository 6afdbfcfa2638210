//! [`Backend`]: what the layer asks — an in-process limiter of this crate,
//! or the Redis limiter — and the [`Verdict`] it answers.

use core::future::Future;
use core::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::algorithm::{Algorithm, RateLimit as SingleKey};
use crate::clock::Clock;
use crate::counter::SlidingCounter;
use crate::decision::{Admitted, DecidedBy, Denied, PolicySet, PolicyStates};
use crate::keyed::{KeyedLimiter, Layered};
use crate::limiter::Limiter;
use crate::policy::Policy;

/// What a backend answers for one request.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::Backend;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = KeyedLimiter::<u64>::new(2, Duration::from_secs(60))?;
/// let verdict = Backend::check(&limiter, 7).await;
/// assert_eq!(verdict.decision.unwrap().remaining(), 1);
/// // The admission just made is the oldest in the window: the quota grows
/// // back when it leaves, 60 s from now.
/// assert_eq!(verdict.wait, Duration::from_secs(60));
/// # Ok::<(), slidelog::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The decision.
    pub decision: Result<Admitted, Denied>,
    /// For an admission: how long until `remaining` next grows, i.e. until
    /// the oldest admission still in the window leaves it (the IETF `t`);
    /// zero only for an empty window. (While `remaining > 0` a request fits
    /// now; at `remaining == 0` this is also the wait for the next one.)
    pub wait: Duration,
    /// Whether the backend could not decide and its failure policy
    /// answered (Redis down: fail open admits, fail closed denies with
    /// [`DenyReason::Unavailable`](crate::DenyReason::Unavailable)). The
    /// layer then sends no `RateLimit` fields: nothing was counted.
    pub degraded: bool,
    /// With several policies, each one's room and wait in the order given:
    /// the IETF `RateLimit` field lists one item per policy from these
    /// (`None`: one item, for the policy the decision names).
    pub per_policy: Option<PolicyStates>,
    /// The policies that made the decision, which its `RateLimit-Policy`
    /// field names ([`DecidedBy::Unsaid`], the default: the layer names the
    /// backend's policies read around the decision that fit it), exactly,
    /// while the backend is reconfigured (see the module's
    /// "Reconfiguration").
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Policy, Quota};
    /// use slidelog::tower::{Backend, DecidedBy, PolicySet};
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(10, Duration::from_secs(60), ManualClock::new())?;
    /// // The policies it was built with.
    /// assert_eq!(Backend::check_now(&limiter, &7).unwrap().decided_by, DecidedBy::Base);
    /// limiter.reconfigure(Quota::new(100, Duration::from_secs(60))?)?;
    /// let moved = PolicySet::new(&[Policy::new(100, Duration::from_secs(60))]);
    /// assert_eq!(Backend::check_now(&limiter, &7).unwrap().decided_by, DecidedBy::Policies(moved));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub decided_by: DecidedBy,
}

impl Verdict {
    /// A verdict of `decision`, `wait` until an admission's `remaining`
    /// grows, and nothing else said: not degraded, one `RateLimit` item,
    /// [`DecidedBy::Unsaid`]. A backend of its own says more by naming the
    /// fields before it (`Verdict { decided_by, ..Verdict::new(decision, wait) }`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Policy};
    /// use slidelog::tower::{DecidedBy, PolicySet, Verdict};
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// let decision = limiter.check();
    /// let verdict = Verdict {
    ///     decided_by: DecidedBy::Policies(PolicySet::new(&limiter.policies())),
    ///     ..Verdict::new(decision, Duration::from_secs(1))
    /// };
    /// assert!(!verdict.degraded);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(decision: Result<Admitted, Denied>, wait: Duration) -> Verdict {
        Verdict {
            decision,
            wait,
            degraded: false,
            per_policy: None,
            decided_by: DecidedBy::Unsaid,
        }
    }

    /// A verdict to be written in place ([`keyed_verdict`]): each field is
    /// overwritten, or, for `per_policy`, left `None` by one policy. Each
    /// policy's state is written in the verdict's own field, not carried
    /// through the limiter's return values: a field written in place is not
    /// copied on the way (BENCHMARKS.md, "Over HTTP").
    fn placeholder() -> Verdict {
        Verdict {
            decision: Ok(Admitted {
                at: 0,
                remaining: 0,
                policy: 0,
            }),
            wait: Duration::ZERO,
            degraded: false,
            per_policy: None,
            decided_by: DecidedBy::Base,
        }
    }
}
/// A limiter the layer can ask: the in-process [`KeyedLimiter`] (exact log
/// or counter per key), a single-key [`Limiter`] or [`SlidingCounter`] (one
/// limit for all keys), any `dyn` [`RateLimit`](crate::RateLimit), or
/// (feature `redis`) the
/// Redis limiter.
///
/// ```
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::Backend;
/// let limiter = KeyedLimiter::<String>::new(5, Duration::from_secs(10))?;
/// assert_eq!(Backend::<String>::policy(&limiter), (5, Duration::from_secs(10)));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Backend<K>: Send + Sync + 'static {
    /// The future of one check.
    type Future: Future<Output = Verdict> + Send + 'static;
    /// Checks one request for `key`.
    fn check(&self, key: K) -> Self::Future;
    /// `(quota, window)` of the first policy.
    fn policy(&self) -> (u32, Duration);
    /// Every policy, for the `RateLimit-Policy` header (by default the one
    /// of [`policy`](Self::policy)).
    fn policies(&self) -> Vec<Policy> {
        let (limit, window) = self.policy();
        vec![Policy::new(limit, window)]
    }
    /// The policies of `key` when they differ from
    /// [`policies`](Self::policies) (a per-key quota), for its headers;
    /// `None` (the default) when every key has the backend's policies.
    fn key_policies(&self, key: &K) -> Option<Vec<Policy>> {
        let _ = key;
        None
    }
    /// The policies a verdict's [`DecidedBy::Base`] stands for, read once
    /// when a layer is built: for this crate's limiters, those they were
    /// built with. By default [`policies`](Self::policies) (a backend that
    /// is reconfigured and says `Base` must answer this).
    fn base_policies(&self) -> Vec<Policy> {
        self.policies()
    }
    /// A number that changes when [`policies`](Self::policies) change at run
    /// time (a reconfiguration): the layer re-reads them when it does. 0 by
    /// default (never changes).
    fn generation(&self) -> u64 {
        0
    }
    /// The verdict for `key` at once, for a backend that decides in
    /// process (every backend of this crate but Redis): the layer then calls
    /// the inner service straight away, without the clone of it that a call
    /// after an await needs. `None` (the default): the layer awaits
    /// [`check`](Self::check).
    fn check_now(&self, key: &K) -> Option<Verdict> {
        let _ = key;
        None
    }
}

impl<K, C, S, A> Backend<K> for KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + crate::KeySize + Clone + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
    A: Algorithm,
{
    type Future = core::future::Ready<Verdict>;

    fn check(&self, key: K) -> Self::Future {
        core::future::ready(keyed_verdict(self, &key))
    }

    fn check_now(&self, key: &K) -> Option<Verdict> {
        Some(keyed_verdict(self, key))
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        KeyedLimiter::policies(self)
    }

    fn base_policies(&self) -> Vec<Policy> {
        self.built_policies().to_vec()
    }

    fn key_policies(&self, key: &K) -> Option<Vec<Policy>> {
        self.has_quotas()
            .then(|| self.policies_for(key).to_vec())
            .filter(|p| *p != KeyedLimiter::policies(self))
    }

    fn generation(&self) -> u64 {
        self.config_generation()
    }
}

/// A keyed limiter's verdict: one lookup for the decision, the wait (see
/// `verdict`) and, with several policies, each one's state.
fn keyed_verdict<K, C, S, A>(limiter: &KeyedLimiter<K, C, S, A>, key: &K) -> Verdict
where
    K: Hash + Eq + crate::KeySize + Clone + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
    A: Algorithm,
{
    let clock = limiter.clock();
    let mut verdict = Verdict::placeholder();
    let states = core::cell::Cell::from_mut(&mut verdict.per_policy);
    let decided = core::cell::Cell::from_mut(&mut verdict.decided_by);
    match limiter.check_then_peek(
        key,
        #[inline(always)]
        || clock.now(),
        states,
        decided,
    ) {
        Ok(Layered::Admitted(admitted, wait)) => {
            verdict.decision = Ok(admitted);
            verdict.wait = wait;
        }
        Ok(Layered::Denied(denied)) => verdict.decision = Err(denied),
        // No state to describe (a key the budget refused).
        Err(denied) => {
            verdict.decision = Err(denied);
            verdict.decided_by = DecidedBy::Unsaid;
        }
    }
    verdict
}

/// A verdict from a decision and, for an admission, how long until its
/// `remaining` grows (see [`Verdict::wait`]).
fn grown(decision: Result<(Admitted, Duration), Denied>) -> Verdict {
    let (decision, wait) = match decision {
        Ok((admitted, wait)) => (Ok(admitted), wait),
        Err(denied) => (Err(denied), Duration::ZERO),
    };
    Verdict::new(decision, wait)
}

/// A single-key limiter as a backend: one limit shared by every key (use it
/// with [`GlobalKey`](super::GlobalKey), or to cap a whole service whatever the extractor).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::SlidingCounter;
/// use slidelog::tower::{Backend, GlobalKey, RateLimitLayer};
///
/// let counter = Arc::new(SlidingCounter::new(10_000, Duration::from_secs(1), 10)?);
/// assert_eq!(Backend::<()>::policy(&*counter), (10_000, Duration::from_secs(1)));
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(counter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for SlidingCounter<C> {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        core::future::ready(counter_verdict(self))
    }

    fn check_now(&self, _: &K) -> Option<Verdict> {
        Some(counter_verdict(self))
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn base_policies(&self) -> Vec<Policy> {
        vec![Policy::new(self.built_limit(), self.window())]
    }

    fn generation(&self) -> u64 {
        SlidingCounter::generation(self)
    }
}

/// A single-key exact log as a backend: one limit shared by every key.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::Limiter;
/// use slidelog::tower::{Backend, GlobalKey, RateLimitLayer};
///
/// let limiter = Arc::new(Limiter::new(100, Duration::from_secs(1))?);
/// assert_eq!(Backend::<()>::policy(&*limiter), (100, Duration::from_secs(1)));
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(limiter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for Limiter<C> {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        core::future::ready(limiter_verdict(self))
    }

    fn check_now(&self, _: &K) -> Option<Verdict> {
        Some(limiter_verdict(self))
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        Limiter::policies(self)
    }

    fn base_policies(&self) -> Vec<Policy> {
        self.built_policies().to_vec()
    }

    fn generation(&self) -> u64 {
        Limiter::generation(self)
    }
}

/// The exact log on Redis, shared across processes (feature `redis`):
/// each request is one script call, which also tells every policy's room
/// for the `RateLimit` field. A key too long to store is refused as over
/// the limit; a failed call is answered by the limiter's
/// [`FailurePolicy`](crate::redis::FailurePolicy), `Error` denying.
#[cfg(feature = "redis")]
impl Backend<String> for crate::redis::RedisLimiter {
    type Future = core::pin::Pin<Box<dyn Future<Output = Verdict> + Send>>;

    fn check(&self, key: String) -> Self::Future {
        let limiter = self.clone();
        Box::pin(async move {
            let judged = limiter.judge_one(&key).await;
            Verdict {
                degraded: judged.degraded,
                per_policy: judged.per_policy,
                decided_by: judged.decided_by,
                ..Verdict::new(judged.decision, judged.grows)
            }
        })
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        crate::redis::RedisLimiter::policies(self)
    }

    fn generation(&self) -> u64 {
        crate::redis::RedisLimiter::generation(self)
    }
}

/// Any [`RateLimit`](crate::RateLimit) behind a trait object, e.g. an algorithm chosen at
/// run time.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::{Limiter, RateLimit, SlidingCounter};
/// use slidelog::tower::{GlobalKey, RateLimitLayer};
///
/// let exact = true;
/// let limiter: Arc<dyn RateLimit> = if exact {
///     Arc::new(Limiter::new(100, Duration::from_secs(1))?)
/// } else {
///     Arc::new(SlidingCounter::new(100, Duration::from_secs(1), 10)?)
/// };
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(limiter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K> Backend<K> for dyn SingleKey {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        core::future::ready(single_key_verdict(self))
    }

    fn check_now(&self, _: &K) -> Option<Verdict> {
        Some(single_key_verdict(self))
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        SingleKey::policies(self)
    }

    fn generation(&self) -> u64 {
        SingleKey::generation(self)
    }
}

/// A single-key [`Limiter`]'s verdict, with each policy's state (written
/// in place, as [`keyed_verdict`]'s).
fn limiter_verdict<C: Clock>(limiter: &Limiter<C>) -> Verdict {
    let now = limiter.clock().now();
    let mut verdict = Verdict::placeholder();
    let states = core::cell::Cell::from_mut(&mut verdict.per_policy);
    let decided = core::cell::Cell::from_mut(&mut verdict.decided_by);
    match limiter.check_growing_at(now, states, decided) {
        Ok((admitted, wait)) => {
            verdict.decision = Ok(admitted);
            verdict.wait = match wait {
                // `t` read with the count: no dry run.
                Some(nanos) => Duration::from_nanos(nanos),
                None => crate::decision::growth_by_dry_run(&admitted, |n| {
                    Some(limiter.peek_n_at(n, now))
                }),
            };
        }
        Err(denied) => {
            states.set(limiter.policy_states_at(now));
            verdict.decision = Err(denied);
        }
    }
    verdict
}

/// A [`SlidingCounter`]'s verdict, named by the limit it judged by (read
/// once per check).
fn counter_verdict<C: Clock>(counter: &SlidingCounter<C>) -> Verdict {
    let (decision, limit) = counter.check_growth_judged(1, counter.clock().now());
    let mut verdict = grown(decision);
    verdict.decided_by = if limit == counter.built_limit() {
        DecidedBy::Base
    } else {
        DecidedBy::Policies(PolicySet::new(&[Policy::new(limit, counter.window())]))
    };
    verdict
}

/// Any single-key limiter's verdict: `t` from
/// [`check_n_with_growth_at`](SingleKey::check_n_with_growth_at) (one pass
/// for the exact log, a dry run after the counter's check).
pub(super) fn single_key_verdict<R: SingleKey + ?Sized>(limiter: &R) -> Verdict {
    grown(limiter.check_n_with_growth_at(1, limiter.now()))
}
