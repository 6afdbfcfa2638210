//! [`Backend`]: one keyed store's decisions, under the tower layer and
//! `slidelog serve` alike — the keyed limiter, the single-key limiters, the
//! Redis limiter — and the [`Verdict`] it answers. The trait names no
//! runtime: a check's future is any [`Future`], ready at once for the
//! in-process stores.

// Where each part lives:
//
// | file | what |
// |---|---|
// | `mod.rs` | this map; the trait |
// | `request.rs` | `Request`: what a backend is asked for one key |
// | `verdict.rs` | `Verdict`: what a backend answers for one request |
// | `local.rs` | the in-process stores' impls: `KeyedLimiter`, `Limiter`, `SlidingCounter`, `dyn RateLimit` |
// | `tests.rs` | every in-process store judges a request's units alike |
//
// The Redis limiter's impl lives with it (`redis/judged.rs`).

mod local;
mod request;
#[cfg(test)]
mod tests;
mod verdict;

use core::future::Future;
use std::time::Duration;

use crate::policy::Policy;

pub use request::Request;
pub use verdict::Verdict;

/// A keyed store's decisions, whoever asks (the tower layer, `slidelog
/// serve`): the in-process [`KeyedLimiter`](crate::KeyedLimiter) (exact log
/// or counter per key), a single-key [`Limiter`](crate::Limiter) or
/// [`SlidingCounter`](crate::SlidingCounter) (one limit for all keys), any
/// `dyn` [`RateLimit`](crate::RateLimit), or (feature `redis`) the Redis
/// limiter.
///
/// ```
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::Backend;
/// let limiter = KeyedLimiter::<String>::new(5, Duration::from_secs(10))?;
/// assert_eq!(Backend::<String>::policy(&limiter), (5, Duration::from_secs(10)));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
///
/// # A backend of your own
///
/// Implement [`judge`](Self::judge) and [`policy`](Self::policy) (and the
/// others where yours differ), over the crate's stores or a store of your
/// own (its decisions made with [`Admitted::new`](crate::Admitted::new) and
/// [`Denied::new`](crate::Denied::new)): here paid keys on one limiter, the
/// rest on another. A verdict passed on from an inner
/// store says [`DecidedBy::Base`](crate::DecidedBy::Base) for *its* base
/// policies; the layer reads `Base` as this backend's
/// [`base_policies`](Self::base_policies), so name the inner store's
/// (or say [`DecidedBy::Unsaid`](crate::DecidedBy::Unsaid)).
///
/// ```
/// use std::future::Ready;
/// use std::time::Duration;
/// use slidelog::{Backend, DecidedBy, KeyedLimiter, Policy, PolicySet, Request, Verdict};
///
/// struct Tiered {
///     paid: KeyedLimiter<String>,
///     free: KeyedLimiter<String>,
/// }
///
/// impl Tiered {
///     fn tier(&self, key: &str) -> &KeyedLimiter<String> {
///         if key.starts_with("paid:") { &self.paid } else { &self.free }
///     }
/// }
///
/// impl Backend<String> for Tiered {
///     type Future = Ready<Verdict>;
///     fn judge(&self, key: String, request: Request) -> Ready<Verdict> {
///         std::future::ready(self.judge_now(&key, request).expect("in process"))
///     }
///     fn judge_now(&self, key: &String, request: Request) -> Option<Verdict> {
///         let tier = self.tier(key);
///         let verdict = tier.judge_now(key, request)?;
///         let decided_by = match verdict.decided_by {
///             DecidedBy::Base => DecidedBy::Policies(PolicySet::new(&tier.policies())),
///             other => other,
///         };
///         Some(Verdict { decided_by, ..verdict })
///     }
///     fn policy(&self) -> (u32, Duration) {
///         Backend::<String>::policy(&self.free)
///     }
///     fn key_policies(&self, key: &String) -> Option<Vec<Policy>> {
///         Some(self.tier(key).policies())
///     }
/// }
///
/// let minute = Duration::from_secs(60);
/// let tiered = Tiered {
///     paid: KeyedLimiter::new(5, minute)?,
///     free: KeyedLimiter::new(2, minute)?,
/// };
/// let verdict = tiered.judge_now(&"paid:ada".to_string(), Request::one()).unwrap();
/// assert_eq!(verdict.decision.unwrap().remaining(), 4);
/// assert_eq!(verdict.decided_by, DecidedBy::Policies(PolicySet::new(&[Policy::new(5, minute)])));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Backend<K>: Send + Sync + 'static {
    /// The future of one judgement.
    type Future: Future<Output = Verdict> + Send + 'static;
    /// Judges `request` for `key`: its units, all or nothing, recorded
    /// unless it is a dry run ([`Request::dry`], whose verdict's
    /// [`wait`](Verdict::wait) is zero).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Backend, Limiter, Request};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(10, Duration::from_secs(60))?;
    /// let verdict = Backend::<()>::judge(&limiter, (), Request::units(4)).await;
    /// assert_eq!(verdict.decision.unwrap().remaining(), 6);
    /// let over = Backend::<()>::judge(&limiter, (), Request::units(7).dry()).await;
    /// assert!(over.decision.is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    fn judge(&self, key: K, request: Request) -> Self::Future;
    /// Checks one request for `key`: [`judge`](Self::judge) of
    /// [`Request::one`].
    fn check(&self, key: K) -> Self::Future {
        self.judge(key, Request::one())
    }
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
    /// The policies a verdict's [`DecidedBy::Base`](crate::DecidedBy::Base)
    /// stands for, read once when a layer is built: for this crate's
    /// limiters, those they were built with. By default [`policies`](Self::policies) (a backend that
    /// is reconfigured and says `Base` must answer this).
    fn base_policies(&self) -> Vec<Policy> {
        self.policies()
    }
    /// A number that changes when [`policies`](Self::policies) change at run
    /// time (a reconfiguration): a caller that keeps them (the tower layer)
    /// re-reads them when it does. 0 by default (never changes).
    fn generation(&self) -> u64 {
        0
    }
    /// The verdict for `key` at once, for a backend that decides in
    /// process (every backend of this crate but Redis): the tower layer then
    /// calls the inner service straight away, without the clone of it that
    /// a call after an await needs. `None` (the default): the caller awaits
    /// [`check`](Self::check). By default
    /// [`judge_now`](Self::judge_now) of [`Request::one`].
    fn check_now(&self, key: &K) -> Option<Verdict> {
        self.judge_now(key, Request::one())
    }
    /// [`judge`](Self::judge)'s verdict at once, for a backend that
    /// decides in process; `None` (the default): the caller awaits
    /// [`judge`](Self::judge).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Backend, KeyedLimiter, Request};
    /// let limiter = KeyedLimiter::<u64>::new(10, Duration::from_secs(60))?;
    /// let verdict = Backend::judge_now(&limiter, &7, Request::units(3)).unwrap();
    /// assert_eq!(verdict.decision.unwrap().remaining(), 7);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn judge_now(&self, key: &K, request: Request) -> Option<Verdict> {
        let _ = (key, request);
        None
    }
}
