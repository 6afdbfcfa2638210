//! The calls: the `check`, `admit` and `peek` families.

use super::*;
use judge::{AdmitN, AdmitOne, CheckN, CheckNGrowing, CheckOne, PeekN};

impl<C: Clock> Limiter<C> {
    /// Checks one request now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    ///
    /// let limiter = Limiter::new(1, Duration::from_secs(60))?;
    /// match limiter.check() {
    ///     Ok(admitted) => assert_eq!(admitted.remaining(), 0),
    ///     Err(denied) => panic!("first request denied: {denied}"),
    /// }
    /// assert!(limiter.check().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check(&self) -> Result<Admitted, Denied> {
        self.decide(
            #[inline(always)]
            || self.clock.now(),
            CheckOne,
        )
    }

    /// Checks one request at `now` (nanoseconds on this limiter's clock), for
    /// callers that already hold a timestamp (replay, batching).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(1, Duration::from_nanos(100), ManualClock::new())?;
    /// assert!(limiter.check_at(0).is_ok());
    /// assert_eq!(limiter.check_at(99).unwrap_err().retry_after_nanos(), 1);
    /// assert!(limiter.check_at(100).is_ok()); // (t - W, t]: the entry at 0 expired
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.decide(|| now, CheckOne)
    }

    /// Admits one request now or denies it, like [`check`](Self::check) but
    /// without counting [`remaining`](Admitted::remaining): for callers that
    /// only need the decision (and, when denied, the wait), the shortest
    /// path there is — one clock read, a few loads and one compare-and-swap
    /// (`check` also searches the ring for the first live admission, a few
    /// more loads when the window holds live admissions).
    ///
    /// The decision is exactly `check`'s: the same admissions are recorded.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    ///
    /// let limiter = Limiter::new(2, Duration::from_secs(60))?;
    /// assert!(limiter.admit().is_ok());
    /// assert!(limiter.admit().is_ok());
    /// let denied = limiter.admit().unwrap_err();
    /// assert!(denied.retry_after() <= Duration::from_secs(60));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit(&self) -> Result<(), Denied> {
        self.decide(
            #[inline(always)]
            || self.clock.now(),
            AdmitOne,
        )
    }

    /// [`admit`](Self::admit) at `now` (nanoseconds on this limiter's clock).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(1, Duration::from_nanos(100), ManualClock::new())?;
    /// assert!(limiter.admit_at(0).is_ok());
    /// assert_eq!(limiter.admit_at(99).unwrap_err().retry_after_nanos(), 1);
    /// assert!(limiter.admit_at(100).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_at(&self, now: u64) -> Result<(), Denied> {
        self.decide(|| now, AdmitOne)
    }

    /// Checks a request of `n` units now: all `n` are admitted or none.
    ///
    /// `n == 0` is always admitted and records nothing (its `remaining` is
    /// the room left). `n > limit` can never be admitted: it is denied with
    /// [`DenyReason::ExceedsLimit`](crate::DenyReason::ExceedsLimit).
    ///
    /// Cost: an admission writes one slot per unit (a CAS each, beside the
    /// announcement in `head` and its move), so it grows with `n`; a denial
    /// only loads. For units counted in the hundreds or more per request
    /// (bytes, tokens), the [`SlidingCounter`](crate::SlidingCounter) adds
    /// `n` in one step.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{DenyReason, Limiter};
    ///
    /// let limiter = Limiter::new(5, Duration::from_secs(1))?;
    /// assert_eq!(limiter.check_n(3).unwrap().remaining(), 2);
    /// assert!(limiter.check_n(3).is_err()); // only 2 left: nothing taken
    /// assert_eq!(limiter.check_n(2).unwrap().remaining(), 0);
    /// assert!(matches!(
    ///     limiter.check_n(6).unwrap_err().reason(),
    ///     DenyReason::ExceedsLimit { requested: 6, limit: 5 }
    /// ));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.check_n_at(n, self.clock.now())
    }

    /// [`check_n`](Self::check_n) at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(4, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.check_n_at(4, 0).is_ok());
    /// assert_eq!(limiter.check_n_at(1, 5).unwrap_err().retry_after_nanos(), 5);
    /// assert!(limiter.check_n_at(4, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        self.decide(|| now, CheckN(n))
    }

    /// [`check_n`](Self::check_n), and for an admission **how long until
    /// `remaining` next grows**, read in the same pass as the count: when
    /// the oldest admission in the window leaves it (with several
    /// policies, the latest such time among the policies with the fewest
    /// units left, since each must grow before one unit more fits). It is
    /// the IETF `RateLimit` field's `t` and Envoy's `duration_until_reset`,
    /// which a dry run of `remaining + 1` units would otherwise have to
    /// find in a second pass. Zero when `remaining` never grows by waiting:
    /// `n == 0` with nothing in a window that has the fewest units left.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(3, Duration::from_nanos(100), ManualClock::new())?;
    /// // Ours is the oldest admission: room grows when it leaves, at 110.
    /// let (admitted, grows) = limiter.check_n_with_growth_at(2, 10).unwrap();
    /// assert_eq!((admitted.remaining(), grows), (1, Duration::from_nanos(100)));
    /// // The first two still leave at 110.
    /// let (admitted, grows) = limiter.check_n_with_growth_at(1, 40).unwrap();
    /// assert_eq!((admitted.remaining(), grows), (0, Duration::from_nanos(70)));
    /// assert!(limiter.check_n_with_growth_at(1, 50).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth(&self, n: u32) -> Result<(Admitted, Duration), Denied> {
        self.check_n_with_growth_at(n, self.clock.now())
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::builder(2, Duration::from_nanos(100))
    ///     .and(2, Duration::from_nanos(20))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.check_n_at(1, 0).unwrap();
    /// // Both policies are out of room: the 20 ns one grows at 20, the
    /// // 100 ns one at 100, and only then does one unit more fit.
    /// let (admitted, grows) = limiter.check_n_with_growth_at(1, 10).unwrap();
    /// assert_eq!(admitted.remaining(), 0);
    /// assert_eq!(grows, Duration::from_nanos(90));
    /// assert!(limiter.check_n_at(1, 99).is_err());
    /// assert!(limiter.check_n_at(1, 100).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        self.decide(|| now, CheckNGrowing(n))
            .map(|(admitted, wait)| (admitted, Duration::from_nanos(wait)))
    }

    /// Admits a request of `n` units now, all or none, like
    /// [`check_n`](Self::check_n) but without counting
    /// [`remaining`](Admitted::remaining) (as [`admit`](Self::admit) is to
    /// [`check`](Self::check)): the same decision, recorded the same way,
    /// without the count (about a fifth of a weighted admission's
    /// instructions).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{DenyReason, Limiter};
    ///
    /// let limiter = Limiter::new(5, Duration::from_secs(1))?;
    /// assert!(limiter.admit_n(3).is_ok());
    /// assert!(limiter.admit_n(3).is_err()); // only 2 left: nothing taken
    /// assert!(limiter.admit_n(2).is_ok());
    /// assert!(matches!(
    ///     limiter.admit_n(6).unwrap_err().reason(),
    ///     DenyReason::ExceedsLimit { requested: 6, limit: 5 }
    /// ));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n(&self, n: u32) -> Result<(), Denied> {
        self.admit_n_at(n, self.clock.now())
    }

    /// [`admit_n`](Self::admit_n) at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(4, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.admit_n_at(4, 0).is_ok());
    /// assert_eq!(limiter.admit_n_at(1, 5).unwrap_err().retry_after_nanos(), 5);
    /// assert!(limiter.admit_n_at(4, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n_at(&self, n: u32, now: u64) -> Result<(), Denied> {
        self.decide(|| now, AdmitN(n))
    }

    /// What [`check_n_at`](Self::check_n_at) would answer, recording
    /// nothing: for dry runs, stacked limits and rate-limit headers.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let limiter = Limiter::with_clock(2, Duration::from_nanos(10), ManualClock::new())?;
    /// assert_eq!(limiter.peek_n_at(1, 0).unwrap().remaining(), 1);
    /// limiter.check_n_at(2, 0).unwrap();
    /// assert_eq!(limiter.peek_n_at(1, 4).unwrap_err().retry_after_nanos(), 6);
    /// assert_eq!(limiter.peek_n_at(0, 4).unwrap().remaining(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        self.peek_inner(n, now)
    }

    /// What [`check`](Self::check) would answer now, recording nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// assert_eq!(limiter.peek().unwrap().remaining(), 0);
    /// assert!(limiter.check().is_ok()); // the peek took nothing
    /// assert!(limiter.peek().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek(&self) -> Result<Admitted, Denied> {
        self.peek_inner(1, self.clock.now())
    }

    /// What [`check_at`](Self::check_at) would answer at `now` (the
    /// clock's nanoseconds), recording nothing: [`peek`](Self::peek) with
    /// the time passed in.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// limiter.check_at(0).unwrap();
    /// assert_eq!(limiter.peek_at(4).unwrap_err().retry_after_nanos(), 6);
    /// assert_eq!(limiter.peek_at(10).unwrap().remaining(), 0); // the peek took nothing
    /// assert!(limiter.check_at(10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.peek_inner(1, now)
    }

    /// What [`check_n`](Self::check_n) would answer now, recording nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new())?;
    /// assert!(limiter.peek_n(3).is_ok());
    /// assert!(limiter.peek_n(4).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.peek_inner(n, self.clock.now())
    }

    pub(super) fn peek_inner(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        self.decide(|| now, PeekN(n))
    }
}
