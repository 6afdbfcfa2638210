//! What a check answers: [`Admitted`] or [`Denied`]; with several
//! policies each one's state ([`PolicyStates`]), and the policies that
//! decided ([`DecidedBy`], a [`PolicySet`]).

use core::fmt;
use std::time::Duration;

use crate::policy::Policy;

/// A request that was admitted.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(3, Duration::from_secs(1), clock.clone())?;
/// let admitted = limiter.check().unwrap();
/// assert_eq!(admitted.remaining(), 2);
/// assert_eq!(admitted.at(), 0); // the ManualClock starts at 0 ns
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Admitted {
    pub(crate) at: u64,
    pub(crate) remaining: u32,
    /// The policy with the fewest units left (0 for one policy). A `u32`
    /// though it is below `MAX_POLICIES`: with no padding byte beside it, a
    /// `Result<Admitted, Denied>` moves as whole words, not in one- to
    /// four-byte pieces (BENCHMARKS.md, "Where the time goes").
    pub(crate) policy: u32,
}

impl Admitted {
    /// An admission a store outside this crate made, with `remaining` units
    /// left, at time 0, by the first policy: for a
    /// [`Backend`](crate::Backend) of your own.
    ///
    /// ```
    /// let admitted = slidelog::Admitted::new(4);
    /// assert_eq!((admitted.remaining(), admitted.at(), admitted.policy()), (4, 0, 0));
    /// ```
    pub const fn new(remaining: u32) -> Admitted {
        Admitted {
            at: 0,
            remaining,
            policy: 0,
        }
    }

    /// How many more unit requests the window would admit right now, counting
    /// this admission. Exact for sequential use; under concurrency a snapshot
    /// that other threads may already have changed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(5, Duration::from_secs(1), ManualClock::new())?;
    /// assert_eq!(limiter.check_n(2).unwrap().remaining(), 3);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// The index of the policy closest to exhaustion, the one whose
    /// [`remaining`](Self::remaining) this is (in the order the policies were
    /// given to the builder, 0 = the first; the first such policy on a tie).
    /// Always 0 for a limiter of one policy.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::builder(10, Duration::from_secs(1))
    ///     .and(3, Duration::from_secs(60))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let admitted = limiter.check().unwrap();
    /// assert_eq!((admitted.remaining(), admitted.policy()), (2, 1)); // 2 left this minute
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn policy(&self) -> usize {
        self.policy as usize
    }

    /// The effective time of the admission, in the clock's nanoseconds.
    ///
    /// It is the caller's `now`, unless another thread recorded a later
    /// admission before this one committed: then it is that later time (the
    /// clamp of docs/design.md §2), so recorded times never go backwards along the log.
    /// The guarantee — no window of length `W` holds more than `limit`
    /// admissions — holds over these times.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(5, Duration::from_secs(1), ManualClock::new())?;
    /// assert_eq!(limiter.check_at(1_000).unwrap().at(), 1_000);
    /// // A clock that went backwards is clamped to the newest admission.
    /// assert_eq!(limiter.check_at(10).unwrap().at(), 1_000);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn at(&self) -> u64 {
        self.at
    }
}

/// Why a request was denied.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{DenyReason, Limiter, ManualClock};
///
/// let limiter = Limiter::with_clock(2, Duration::from_secs(1), ManualClock::new())?;
/// match limiter.check_n(3) {
///     Err(denied) => assert_eq!(
///         denied.reason(),
///         DenyReason::ExceedsLimit { requested: 3, limit: 2 }
///     ),
///     Ok(_) => unreachable!("3 units can never fit a limit of 2"),
/// }
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DenyReason {
    /// The window is full; [`Denied::retry_after`] says exactly when it will
    /// have room.
    RateLimited,
    /// More units were requested than the limit: the request can never be
    /// admitted, whatever the wait.
    ExceedsLimit {
        /// The units requested.
        requested: u32,
        /// The limiter's limit.
        limit: u32,
    },
    /// A [`KeyedLimiter`](crate::KeyedLimiter) is at its `max_keys` and no key
    /// could be evicted, so a new key was refused (existing keys are
    /// unaffected).
    KeyCapacity,
    /// The limiter could not decide — its store (Redis) failed or timed out
    /// — and its failure policy denies: not rate limiting, so the tower
    /// layer answers `503 Service Unavailable` by default.
    /// [`Denied::retry_after`] is the store's timeout.
    Unavailable,
}

/// A request that was denied. A denial records nothing.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(1, Duration::from_secs(1), clock.clone())?;
/// limiter.check().unwrap();
/// clock.advance(Duration::from_millis(300));
/// let denied = limiter.check().unwrap_err();
/// assert_eq!(denied.retry_after(), Duration::from_millis(700));
/// clock.advance(denied.retry_after());
/// assert!(limiter.check().is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Denied {
    pub(crate) retry_after: u64,
    pub(crate) reason: DenyReason,
    /// The policy that decides the wait (0 for one policy); a `u32` as
    /// [`Admitted`]'s.
    pub(crate) policy: u32,
}

impl Denied {
    /// A denial a store outside this crate made: over the limit
    /// ([`DenyReason::RateLimited`]), admissible after `retry_after`, by the
    /// first policy: for a [`Backend`](crate::Backend) of your own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Denied, DenyReason};
    /// let denied = Denied::new(Duration::from_millis(250));
    /// assert_eq!(denied.retry_after(), Duration::from_millis(250));
    /// assert_eq!(denied.reason(), DenyReason::RateLimited);
    /// ```
    pub fn new(retry_after: Duration) -> Denied {
        Denied::rate_limited(u64::try_from(retry_after.as_nanos()).unwrap_or(u64::MAX))
    }

    pub(crate) fn rate_limited(retry_after: u64) -> Self {
        Denied {
            retry_after,
            reason: DenyReason::RateLimited,
            policy: 0,
        }
    }

    pub(crate) fn exceeds_limit(requested: u32, limit: u32) -> Self {
        Denied {
            retry_after: u64::MAX,
            reason: DenyReason::ExceedsLimit { requested, limit },
            policy: 0,
        }
    }

    /// The store could not decide (see [`DenyReason::Unavailable`]).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn unavailable(retry_after: u64) -> Self {
        Denied {
            retry_after,
            reason: DenyReason::Unavailable,
            policy: 0,
        }
    }

    pub(crate) fn with_policy(mut self, policy: u8) -> Self {
        self.policy = u32::from(policy);
        self
    }

    /// The index of the policy that decides the wait, in the order the
    /// policies were given to the builder (0 = the first): of the policies
    /// the request violates, the one whose wait is the longest (the first
    /// such on a tie), so [`retry_after`](Self::retry_after) is its wait. For
    /// [`DenyReason::ExceedsLimit`], the policy with the smallest limit. Always
    /// 0 for a limiter of one policy (and for
    /// [`DenyReason::KeyCapacity`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::builder(2, Duration::from_secs(1))      // policy 0
    ///     .and(3, Duration::from_secs(60))                            // policy 1
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.check_n_at(2, 0).unwrap();
    /// let denied = limiter.check_at(0).unwrap_err();
    /// assert_eq!((denied.policy(), denied.retry_after()), (0, Duration::from_secs(1)));
    /// limiter.check_at(1_000_000_000).unwrap(); // the second: 3 this minute
    /// let denied = limiter.check_at(1_000_000_000).unwrap_err();
    /// assert_eq!((denied.policy(), denied.retry_after()), (1, Duration::from_secs(59)));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn policy(&self) -> usize {
        self.policy as usize
    }

    /// How long to wait until the same request would be admitted, if nothing
    /// else is admitted meanwhile. Exact: at `now + retry_after` it is
    /// admitted, a nanosecond earlier it is not.
    ///
    /// For [`DenyReason::ExceedsLimit`] it is `Duration::from_nanos(u64::MAX)`
    /// (never); for [`DenyReason::KeyCapacity`] it is the time until the
    /// keyed limiter may next find an idle key, a hint rather than a promise.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(2), ManualClock::new())?;
    /// limiter.check_at(0).unwrap();
    /// assert_eq!(limiter.check_at(500).unwrap_err().retry_after(), Duration::from_nanos(2_000_000_000 - 500));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// limiter.check_at(0).unwrap();
    /// assert_eq!(limiter.check_at(3).unwrap_err().retry_after_nanos(), 7);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn retry_after_nanos(&self) -> u64 {
        self.retry_after
    }

    /// Why the request was denied.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{DenyReason, Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// limiter.check().unwrap();
    /// assert_eq!(limiter.check().unwrap_err().reason(), DenyReason::RateLimited);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn reason(&self) -> DenyReason {
        self.reason
    }

    /// `true` when waiting [`retry_after`](Self::retry_after) will admit the
    /// request (the window is full), `false` when the request can never be
    /// admitted or was refused for another reason.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// assert!(!limiter.check_n(2).unwrap_err().is_rate_limited());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn is_rate_limited(&self) -> bool {
        self.reason == DenyReason::RateLimited
    }
}

/// `retry_after` as a [`Duration`] (not raw nanoseconds).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
/// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
/// limiter.check_at(0).unwrap();
/// let denied = limiter.check_at(250_000_000).unwrap_err();
/// assert_eq!(
///     format!("{denied:?}"),
///     "Denied { retry_after: 750ms, reason: RateLimited }"
/// );
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl fmt::Debug for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Denied")
            .field("retry_after", &self.retry_after())
            .field("reason", &self.reason)
            .finish()
    }
}

/// A sentence a log line can carry.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
/// let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new())?;
/// let admitted = limiter.check_at(5).unwrap();
/// assert_eq!(admitted.to_string(), "admitted at 5 ns, 2 more fit in the window");
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl fmt::Display for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admitted at {} ns, {} more fit in the window",
            self.at, self.remaining
        )
    }
}

/// A sentence a log line can carry.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
/// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
/// limiter.check_at(0).unwrap();
/// let denied = limiter.check_at(0).unwrap_err();
/// assert_eq!(denied.to_string(), "rate limited: retry after 1s");
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            DenyReason::RateLimited => {
                write!(f, "rate limited: retry after {:?}", self.retry_after())
            }
            DenyReason::ExceedsLimit { requested, limit } => write!(
                f,
                "{requested} units can never be admitted by a limit of {limit}"
            ),
            DenyReason::KeyCapacity => write!(
                f,
                "no room for a new key (the key cap or memory budget is full): retry after {:?}",
                self.retry_after()
            ),
            DenyReason::Unavailable => write!(
                f,
                "the limiter's store could not decide: retry after {:?}",
                self.retry_after()
            ),
        }
    }
}

impl std::error::Error for Denied {}

/// How long after an admission its `remaining` grows, found by a dry run of
/// `remaining + 1` units (`peek` answers it; `None`: it could not run): that
/// many are denied exactly until then. Zero when the dry run fits, is
/// refused for good (more than the smallest limit: the room is whole, and
/// waiting grows nothing) or did not run. For the limiters that cannot
/// read it with their count (the counter; the exact log reads it in the
/// same pass).
pub(crate) fn growth_by_dry_run(
    admitted: &Admitted,
    peek: impl FnOnce(u32) -> Option<Result<Admitted, Denied>>,
) -> Duration {
    admitted
        .remaining()
        .checked_add(1)
        .and_then(peek)
        .and_then(Result::err)
        .filter(Denied::is_rate_limited)
        .map_or(Duration::ZERO, |denied| denied.retry_after())
}

/// Which policies decided a backend's [`Verdict`](crate::Verdict): what
/// the tower layer's response names in its `RateLimit-Policy` field,
/// exactly, while the backend is reconfigured. A limiter of this crate writes it as it decides: the
/// generation, or the key's state, that answered.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{DecidedBy, Policy, PolicySet};
/// // Unsaid unless a backend says otherwise.
/// assert_eq!(DecidedBy::default(), DecidedBy::Unsaid);
/// let policies = [Policy::new(100, Duration::from_secs(60))];
/// let said = DecidedBy::Policies(PolicySet::new(&policies));
/// assert!(matches!(said, DecidedBy::Policies(set) if set.matches(&policies)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecidedBy {
    /// Not said: the layer names the backend's policies it reads before or
    /// after the decision, the first that fit it (the named policy is one
    /// of them, `remaining` within its limit), or none. Exact while the
    /// backend is not reconfigured; across a reconfiguration a verdict
    /// that fits both configurations may be named by the one that did not
    /// decide it.
    #[default]
    Unsaid,
    /// The backend's [`base_policies`](crate::Backend::base_policies): for this
    /// crate's limiters, those they were built with (said without copying
    /// them, as every decision of a limiter never reconfigured is).
    Base,
    /// These policies.
    Policies(PolicySet),
}

/// Up to [`MAX_POLICIES`](crate::MAX_POLICIES) policies, inline and
/// compact (a [`DecidedBy`]'s: each window in nanoseconds, so that a
/// verdict stays small to copy; a window of more than `u64::MAX`
/// nanoseconds, 584 years, is kept as that).
///
/// ```
/// use std::time::Duration;
/// use slidelog::Policy;
/// use slidelog::PolicySet;
/// let policies = [Policy::new(10, Duration::from_secs(1)), Policy::new(100, Duration::from_secs(60))];
/// let set = PolicySet::new(&policies);
/// assert_eq!(set.len(), 2);
/// assert_eq!(set.get(1), Some(Policy::new(100, Duration::from_secs(60))));
/// assert!(set.matches(&policies));
/// assert!(!set.matches(&policies[..1]));
/// assert_eq!(set.iter().collect::<Vec<_>>(), policies);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicySet {
    len: u8,
    limits: [u32; crate::MAX_POLICIES],
    windows: [u64; crate::MAX_POLICIES],
}

/// A window in nanoseconds, as a [`PolicySet`] keeps it.
fn window_nanos(window: Duration) -> u64 {
    u64::try_from(window.as_nanos()).unwrap_or(u64::MAX)
}

impl PolicySet {
    /// The first `MAX_POLICIES` of `policies`.
    #[inline]
    pub fn new(policies: &[Policy]) -> PolicySet {
        let mut set = PolicySet {
            len: 0,
            limits: [0; crate::MAX_POLICIES],
            windows: [0; crate::MAX_POLICIES],
        };
        for (i, policy) in policies.iter().take(crate::MAX_POLICIES).enumerate() {
            set.limits[i] = policy.limit;
            set.windows[i] = window_nanos(policy.window);
            set.len = i as u8 + 1;
        }
        set
    }

    /// How many policies.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Policy `i`.
    pub fn get(&self, i: usize) -> Option<Policy> {
        (i < self.len()).then(|| Policy::new(self.limits[i], Duration::from_nanos(self.windows[i])))
    }

    /// The policies, in order.
    pub fn iter(&self) -> impl Iterator<Item = Policy> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Whether these are exactly `policies` (in order).
    #[inline]
    pub fn matches(&self, policies: &[Policy]) -> bool {
        policies.len() == self.len()
            && policies.iter().enumerate().all(|(i, policy)| {
                policy.limit == self.limits[i] && window_nanos(policy.window) == self.windows[i]
            })
    }

    /// The policies into `out`, and how many.
    #[allow(dead_code)] // read by the tower layer only
    pub(crate) fn write_into(&self, out: &mut [Policy; crate::MAX_POLICIES]) -> usize {
        for (slot, policy) in out.iter_mut().zip(self.iter()) {
            *slot = policy;
        }
        self.len()
    }
}

/// Each policy's `remaining` and the wait until it next grows, for the
/// `RateLimit` field's items (up to [`MAX_POLICIES`](crate::MAX_POLICIES),
/// inline).
///
/// ```
/// use std::time::Duration;
/// use slidelog::PolicyStates;
/// let states = PolicyStates::new(&[(0, Duration::from_secs(1)), (57, Duration::from_secs(40))]);
/// assert_eq!(states.as_slice()[1], (57, Duration::from_secs(40)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyStates {
    len: u8,
    items: [(u32, Duration); crate::MAX_POLICIES],
}

impl PolicyStates {
    /// The first `MAX_POLICIES` of `states`: `(remaining, wait)` per policy.
    pub fn new(states: &[(u32, Duration)]) -> PolicyStates {
        let mut items = [(0, Duration::ZERO); crate::MAX_POLICIES];
        let len = states.len().min(items.len());
        items[..len].copy_from_slice(&states[..len]);
        PolicyStates {
            len: len as u8,
            items,
        }
    }

    /// From each policy's `(remaining, grows_at)` (nanoseconds, the
    /// limiter's time): the waits count from `read`, the caller's reading.
    pub(crate) fn growing(raw: &[(u32, u64)], read: u64) -> PolicyStates {
        let mut items = [(0, Duration::ZERO); crate::MAX_POLICIES];
        let len = raw.len().min(items.len());
        for (item, &(remaining, at)) in items.iter_mut().zip(&raw[..len]) {
            *item = (remaining, Duration::from_nanos(at.saturating_sub(read)));
        }
        PolicyStates {
            len: len as u8,
            items,
        }
    }

    /// `(remaining, wait)` per policy.
    pub fn as_slice(&self) -> &[(u32, Duration)] {
        &self.items[..usize::from(self.len)]
    }
}
