//! What a check answers: [`Admitted`] or [`Denied`].

use core::fmt;
use std::time::Duration;

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
    /// four-byte pieces (BENCHMARKS.md, "Where the time goes", session 21).
    pub(crate) policy: u32,
}

impl Admitted {
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
