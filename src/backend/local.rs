//! The in-process stores as backends: the keyed limiter, a single-key
//! [`Limiter`] or [`SlidingCounter`], any `dyn` [`RateLimit`](crate::RateLimit).
//! Each decides at once ([`Backend::check_now`]), its verdict written in
//! place where the limiter can write it.

use core::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::verdict::grown;
use super::{Backend, Request, Verdict};
use crate::algorithm::{Algorithm, RateLimit as SingleKey};
use crate::clock::Clock;
use crate::counter::SlidingCounter;
use crate::decision::{DecidedBy, PolicySet};
use crate::keyed::{KeyedLimiter, Layered};
use crate::limiter::Limiter;
use crate::policy::Policy;

impl<K, C, S, A> Backend<K> for KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + crate::KeySize + Clone + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
    A: Algorithm,
{
    type Future = core::future::Ready<Verdict>;

    fn judge(&self, key: K, request: Request) -> Self::Future {
        core::future::ready(keyed_judged(self, &key, request))
    }

    fn judge_now(&self, key: &K, request: Request) -> Option<Verdict> {
        Some(keyed_judged(self, key, request))
    }

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

/// A keyed limiter's verdict on `request`: [`keyed_verdict`] for one unit
/// recorded, else the decision on its units and, recorded, the wait from
/// the same pass.
fn keyed_judged<K, C, S, A>(
    limiter: &KeyedLimiter<K, C, S, A>,
    key: &K,
    request: Request,
) -> Verdict
where
    K: Hash + Eq + crate::KeySize + Clone + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
    A: Algorithm,
{
    match request {
        Request {
            units: 1,
            record: true,
        } => keyed_verdict(limiter, key),
        Request {
            units,
            record: true,
        } => grown(limiter.check_n_with_growth(key, units)),
        Request { units, .. } => Verdict::new(limiter.peek_n(key, units), Duration::ZERO),
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

/// A single-key limiter as a backend: one limit shared by every key (the
/// tower layer's `GlobalKey`, or a cap on a whole service whatever the key).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Backend, SlidingCounter};
///
/// let counter = SlidingCounter::new(10_000, Duration::from_secs(1), 10)?;
/// assert_eq!(Backend::<()>::policy(&counter), (10_000, Duration::from_secs(1)));
/// let verdict = Backend::<&str>::check_now(&counter, &"any key").unwrap();
/// assert!(verdict.decision.is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for SlidingCounter<C> {
    type Future = core::future::Ready<Verdict>;

    fn judge(&self, _: K, request: Request) -> Self::Future {
        core::future::ready(one_or(self, request, counter_verdict))
    }

    fn judge_now(&self, _: &K, request: Request) -> Option<Verdict> {
        Some(one_or(self, request, counter_verdict))
    }

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
/// use std::time::Duration;
/// use slidelog::{Backend, Limiter};
///
/// let limiter = Limiter::new(100, Duration::from_secs(1))?;
/// assert_eq!(Backend::<()>::policy(&limiter), (100, Duration::from_secs(1)));
/// Backend::<&str>::check_now(&limiter, &"a").unwrap();
/// let verdict = Backend::<&str>::check_now(&limiter, &"b").unwrap();
/// assert_eq!(verdict.decision.unwrap().remaining(), 98, "one limit for both keys");
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for Limiter<C> {
    type Future = core::future::Ready<Verdict>;

    fn judge(&self, _: K, request: Request) -> Self::Future {
        core::future::ready(one_or(self, request, limiter_verdict))
    }

    fn judge_now(&self, _: &K, request: Request) -> Option<Verdict> {
        Some(one_or(self, request, limiter_verdict))
    }

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

/// Any [`RateLimit`](crate::RateLimit) behind a trait object, e.g. an
/// algorithm chosen at run time.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::{Backend, Limiter, RateLimit, SlidingCounter};
///
/// let exact = true;
/// let limiter: Arc<dyn RateLimit> = if exact {
///     Arc::new(Limiter::new(100, Duration::from_secs(1))?)
/// } else {
///     Arc::new(SlidingCounter::new(100, Duration::from_secs(1), 10)?)
/// };
/// let verdict = Backend::<()>::check_now(&*limiter, &()).unwrap();
/// assert_eq!(verdict.decision.unwrap().remaining(), 99);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K> Backend<K> for dyn SingleKey {
    type Future = core::future::Ready<Verdict>;

    fn judge(&self, _: K, request: Request) -> Self::Future {
        core::future::ready(single_key_judged(self, request))
    }

    fn judge_now(&self, _: &K, request: Request) -> Option<Verdict> {
        Some(single_key_judged(self, request))
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

/// Any single-key limiter's verdict on `request`: recorded, `t` from
/// [`check_n_with_growth_at`](SingleKey::check_n_with_growth_at) (one pass
/// for the exact log, a dry run after the counter's check); a dry run, the
/// decision of [`peek_n_at`](SingleKey::peek_n_at).
fn single_key_judged<R: SingleKey + ?Sized>(limiter: &R, request: Request) -> Verdict {
    let now = limiter.now();
    if request.record {
        grown(limiter.check_n_with_growth_at(request.units, now))
    } else {
        Verdict::new(limiter.peek_n_at(request.units, now), Duration::ZERO)
    }
}

/// A single-key limiter's verdict on `request`: by `one` (its own verdict,
/// which names the policies that decided) for one unit recorded, else
/// [`single_key_judged`].
fn one_or<R: SingleKey>(limiter: &R, request: Request, one: fn(&R) -> Verdict) -> Verdict {
    if request == Request::one() {
        one(limiter)
    } else {
        single_key_judged(limiter, request)
    }
}
