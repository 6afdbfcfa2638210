//! [`Limiter`]: the exact sliding-window log of one key.

use core::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, QuantaClock};
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::policy::Policy;
use crate::ring::{Now, RingRef, Shape};
use crate::sync::atomic::AtomicU64;

/// `head` and the expiry hint, on one padded line: the hint is read only
/// when the window holds live admissions, and written after such an
/// admission, next to the word the admitter just read.
#[derive(Default)]
struct Head {
    head: AtomicU64,
    hint: AtomicU64,
}

/// An exact sliding-window-log rate limiter for one key: at most `limit`
/// admissions in any window `(t - W, t]` — or, built with
/// [`Limiter::builder`], several such policies at once, all or nothing.
///
/// Admission is decided by one compare-and-swap on one slot of a fixed ring
/// of `limit` 8-byte slots (the largest limit, with several policies); a
/// denial only loads. No lock, no allocation and no division on any check. Share it
/// between threads with `Arc` (it is `Send + Sync`).
///
/// # Examples
///
/// "10 per second and 100 per minute", exactly: one ring of 100 slots
/// answers both, and a request either counts against both or against
/// neither.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder(10, Duration::from_secs(1))
///     .and(100, Duration::from_secs(60))
///     .clock(clock.clone())
///     .build()?;
/// for _ in 0..10 {
///     limiter.check().unwrap();
/// }
/// let denied = limiter.check().unwrap_err();
/// assert_eq!((denied.policy(), denied.retry_after()), (0, Duration::from_secs(1)));
/// for _ in 0..9 {
///     clock.advance(Duration::from_secs(1));
///     limiter.check_n(10).unwrap();
/// }
/// clock.advance(Duration::from_secs(1));
/// let denied = limiter.check().unwrap_err(); // 100 this minute
/// assert_eq!((denied.policy(), denied.retry_after()), (1, Duration::from_secs(50)));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
///
/// One policy:
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(2, Duration::from_secs(1), clock.clone())?;
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_ok());
/// let denied = limiter.check().unwrap_err();
/// assert_eq!(denied.retry_after(), Duration::from_secs(1));
///
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(limiter.check().unwrap().remaining(), 1);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct Limiter<C: Clock = QuantaClock> {
    /// `head` is written by every admission and read by every check: its own
    /// cache line, so it does not falsely share with the limiter's fields.
    head: CachePadded<Head>,
    slots: Box<[AtomicU64]>,
    shape: Shape,
    clock: C,
}

impl Limiter<QuantaClock> {
    /// A limiter admitting at most `limit` requests per `window`, on the
    /// default [`QuantaClock`].
    ///
    /// # Errors
    ///
    /// [`ConfigError`] if `limit` is 0 or above [`MAX_LIMIT`](crate::MAX_LIMIT),
    /// or `window` is zero or above [`MAX_WINDOW`](crate::MAX_WINDOW).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    ///
    /// let limiter = Limiter::new(100, Duration::from_secs(1))?;
    /// assert!(limiter.check().is_ok());
    /// assert!(Limiter::new(0, Duration::from_secs(1)).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(limit: u32, window: Duration) -> Result<Self, ConfigError> {
        Limiter::with_clock(limit, window, QuantaClock::new())
    }

    /// `limit` requests per second: [`new`](Self::new)`(limit, 1 s)`.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): a zero or too large limit.
    ///
    /// ```
    /// let limiter = slidelog::Limiter::per_second(10)?;
    /// assert_eq!(limiter.window(), std::time::Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn per_second(limit: u32) -> Result<Self, ConfigError> {
        Limiter::new(limit, Duration::from_secs(1))
    }

    /// `limit` requests per minute: [`new`](Self::new)`(limit, 60 s)`.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): a zero or too large limit.
    ///
    /// ```
    /// let limiter = slidelog::Limiter::per_minute(100)?;
    /// assert_eq!(limiter.window(), std::time::Duration::from_secs(60));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn per_minute(limit: u32) -> Result<Self, ConfigError> {
        Limiter::new(limit, Duration::from_secs(60))
    }

    /// `limit` requests per hour: [`new`](Self::new)`(limit, 3600 s)`.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): a zero or too large limit.
    ///
    /// ```
    /// let limiter = slidelog::Limiter::per_hour(1_000)?;
    /// assert_eq!(limiter.window(), std::time::Duration::from_secs(3600));
    /// assert!(slidelog::Limiter::per_hour(0).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn per_hour(limit: u32) -> Result<Self, ConfigError> {
        Limiter::new(limit, Duration::from_secs(3600))
    }
}

impl Limiter<QuantaClock> {
    /// A builder whose first policy is `limit` per `window`: add more with
    /// [`and`](LimiterBuilder::and), a clock with
    /// [`clock`](LimiterBuilder::clock), then [`build`](LimiterBuilder::build).
    ///
    /// Every policy is checked on every request, all or nothing, exactly:
    /// admitted iff each policy's window `(t - W_i, t]` would hold at most
    /// `L_i` admissions with this one. One ring of the largest limit holds
    /// them all; one compare-and-swap commits. A single policy costs the
    /// same as [`Limiter::new`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    ///
    /// let limiter = Limiter::builder(10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60))
    ///     .and(1_000, Duration::from_secs(3600))
    ///     .build()?;
    /// assert_eq!(limiter.check().unwrap().remaining(), 9);
    /// assert!(limiter.check_n(11).is_err()); // more than the smallest limit: never
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn builder(limit: u32, window: Duration) -> LimiterBuilder<QuantaClock> {
        LimiterBuilder {
            policies: vec![Policy::new(limit, window)],
            clock: QuantaClock::new(),
        }
    }
}

/// Builds a [`Limiter`] of one or more policies (see [`Limiter::builder`]).
///
/// Policies may be given in any order; [`Denied::policy`] and
/// [`Admitted::policy`] name them by that order (0 = the builder's first).
/// Duplicate or dominated policies (one that another makes redundant, like
/// 100/min beside 10/min) are allowed: they never decide a denial alone,
/// and cost one slot read each.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until built"]
pub struct LimiterBuilder<C> {
    policies: Vec<Policy>,
    clock: C,
}

impl<C: Clock> LimiterBuilder<C> {
    /// Also at most `limit` per `window`.
    pub fn and(mut self, limit: u32, window: Duration) -> Self {
        self.policies.push(Policy::new(limit, window));
        self
    }

    /// The clock (default [`QuantaClock`]), e.g. a shared
    /// [`ManualClock`](crate::ManualClock) for tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> LimiterBuilder<C2> {
        LimiterBuilder {
            policies: self.policies,
            clock,
        }
    }

    /// Builds the limiter.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero or too large limit or window in any
    /// policy, or more than [`MAX_POLICIES`](crate::MAX_POLICIES) policies.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ConfigError, Limiter};
    /// let err = Limiter::builder(10, Duration::from_secs(1)).and(0, Duration::from_secs(60)).build();
    /// assert_eq!(err.unwrap_err(), ConfigError::ZeroLimit);
    /// ```
    pub fn build(self) -> Result<Limiter<C>, ConfigError> {
        Ok(Limiter::from_shape(Shape::new(&self.policies)?, self.clock))
    }
}

impl<C: Clock> Limiter<C> {
    /// A limiter on the given clock, e.g. a shared [`ManualClock`](crate::ManualClock).
    ///
    /// # Errors
    ///
    /// As for [`Limiter::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(100, Duration::from_secs(1), clock.clone())?;
    /// clock.advance(Duration::from_millis(5));
    /// assert_eq!(limiter.check().unwrap().at(), 5_000_000);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn with_clock(limit: u32, window: Duration, clock: C) -> Result<Self, ConfigError> {
        Ok(Limiter::from_shape(Shape::single(limit, window)?, clock))
    }

    pub(crate) fn from_shape(shape: Shape, clock: C) -> Self {
        Limiter {
            head: CachePadded::new(Head::default()),
            slots: (0..shape.geometry.limit())
                .map(|_| AtomicU64::new(0))
                .collect(),
            shape,
            clock,
        }
    }

    #[inline]
    fn ring(&self) -> RingRef<'_> {
        self.shape
            .ring_hinted(&self.head.head, &self.head.hint, &self.slots)
    }

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
        self.check_at(self.clock.now())
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
        let now = self.now(now);
        answered(self.shape.check_at(self.ring(), now, 1))
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
        self.admit_at(self.clock.now())
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
        let now = self.now(now);
        answered(self.shape.admit_at(self.ring(), now))
    }

    /// Checks a request of `n` units now: all `n` are admitted or none.
    ///
    /// `n == 0` is always admitted and records nothing (its `remaining` is
    /// the room left). `n > limit` can never be admitted: it is denied with
    /// [`DenyReason::ExceedsLimit`](crate::DenyReason::ExceedsLimit).
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
        if let Some(denied) = self.shape.exceeds(n) {
            return Err(denied);
        }
        let now = self.now(now);
        answered(self.shape.check_at(self.ring(), now, n))
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

    fn peek_inner(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        if let Some(denied) = self.shape.exceeds(n) {
            return Err(denied);
        }
        let now = self.now(now);
        answered(self.shape.peek_at(self.ring(), now, n))
    }

    /// A reading of this limiter's clock as the ring judges it (one key:
    /// no eviction floor).
    #[inline(always)]
    fn now(&self, read: u64) -> Now {
        self.shape.now(read, 0)
    }

    /// The limit: admissions allowed in any window (the first policy's,
    /// with several: see [`policies`](Self::policies)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::Limiter::new(7, Duration::from_secs(1))?;
    /// assert_eq!(limiter.limit(), 7);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn limit(&self) -> u32 {
        self.shape.limit()
    }

    /// The window (the first policy's, with several).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::Limiter::new(7, Duration::from_secs(1))?;
    /// assert_eq!(limiter.window(), Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn window(&self) -> Duration {
        self.shape.window()
    }

    /// The limiter's clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Clock, Limiter, ManualClock};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// limiter.clock().advance(Duration::from_nanos(9));
    /// assert_eq!(limiter.clock().now(), 9);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Every policy this limiter checks, in the order given (one for
    /// [`Limiter::new`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Policy};
    /// let limiter = Limiter::builder(10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60))
    ///     .build()?;
    /// assert_eq!(
    ///     limiter.policies(),
    ///     [Policy::new(10, Duration::from_secs(1)), Policy::new(100, Duration::from_secs(60))]
    /// );
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn policies(&self) -> &[Policy] {
        self.shape.policies()
    }

    /// Heap and inline bytes this limiter occupies: the ring's `8 * limit`
    /// bytes of slots (the largest limit's) plus the padded header.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::Limiter::new(100, Duration::from_secs(1))?;
    /// assert!(limiter.memory_bytes() >= 800);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + core::mem::size_of_val(&*self.slots)
            + self.shape.heap_bytes()
    }
}

#[cfg(feature = "serde")]
impl<C: Clock> Limiter<C> {
    /// The live admissions, anchored to the system's wall clock now (see
    /// [`crate::snapshot`]). Exact when no check races it; a racing
    /// admission may or may not be included.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// limiter.check_n(3).unwrap();
    /// assert_eq!(limiter.snapshot().admissions.len(), 3);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> crate::snapshot::Snapshot {
        self.snapshot_at(crate::snapshot::Anchor::now(&self.clock))
    }

    /// The live admissions at `anchor.clock_nanos`, as Unix times through
    /// `anchor`.
    pub fn snapshot_at(&self, anchor: crate::snapshot::Anchor) -> crate::snapshot::Snapshot {
        crate::snapshot::Snapshot {
            version: crate::snapshot::SNAPSHOT_VERSION,
            taken_at_unix_nanos: anchor.unix_nanos,
            policies: self.policies().to_vec(),
            admissions: self
                .ring()
                .admissions(anchor.clock_nanos)
                .into_iter()
                .map(|t| anchor.to_unix(t))
                .collect(),
        }
    }

    /// Adds a snapshot's admissions to this limiter's, judged from now on
    /// as if the limiter that took it had never stopped (anchored to the
    /// system's wall clock now). Admissions no policy counts any more are
    /// dropped. Needs `&mut`: restore before sharing the limiter.
    ///
    /// # Errors
    ///
    /// [`RestoreError::Version`](crate::snapshot::RestoreError::Version)
    /// for a snapshot of another format version.
    pub fn restore(
        &mut self,
        snapshot: &crate::snapshot::Snapshot,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        let anchor = crate::snapshot::Anchor::now(&self.clock);
        self.restore_at(snapshot, anchor)
    }

    /// [`restore`](Self::restore) with an explicit anchor: `anchor.clock_nanos`
    /// on this limiter's clock is `anchor.unix_nanos`.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore).
    pub fn restore_at(
        &mut self,
        snapshot: &crate::snapshot::Snapshot,
        anchor: crate::snapshot::Anchor,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        crate::snapshot::check_version(snapshot.version)?;
        let now = anchor.clock_nanos;
        let existing = self.ring().admissions(now);
        let already = existing.len();
        let g = self.shape.geometry;
        let (times, expired) = crate::snapshot::live_times(
            existing,
            snapshot.admissions.iter().map(|&u| anchor.to_clock(u)),
            now,
            &g,
        );
        // A fresh ring, then the merged log: `&mut self` means no check
        // runs meanwhile.
        self.head = CachePadded::new(Head::default());
        self.slots = (0..g.limit()).map(|_| AtomicU64::new(0)).collect();
        self.ring().fill_fresh(&times);
        Ok(crate::snapshot::Restored {
            admissions: times.len().saturating_sub(already),
            expired,
            ..Default::default()
        })
    }
}

/// Hooks for the model checker (`--cfg slidelog_loom`): broken variants and
/// the eviction handshake, driven through the shipped ring.
#[cfg(slidelog_loom)]
#[doc(hidden)]
impl<C: Clock> Limiter<C> {
    pub fn with_flaw(
        limit: u32,
        window: Duration,
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        Ok(Limiter::from_shape(
            Shape::single(limit, window)?.with_flaw(flaw),
            clock,
        ))
    }

    /// Every single takes the general path (the lazy-head scan), never the
    /// fast path: its races then need two threads instead of three.
    pub fn with_flaw_general(
        limit: u32,
        window: Duration,
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        let mut limiter = Limiter::with_flaw(limit, window, clock, flaw)?;
        limiter.shape = limiter.shape.with_general_only();
        Ok(limiter)
    }

    /// Several policies, `(limit, window in ns)`, with a flaw.
    pub fn with_flaw_policies(
        policies: &[(u32, u64)],
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        let policies: Vec<Policy> = policies
            .iter()
            .map(|&(limit, window)| Policy::new(limit, Duration::from_nanos(window)))
            .collect();
        Ok(Limiter::from_shape(
            Shape::new(&policies)?.with_flaw(flaw),
            clock,
        ))
    }

    /// `None` if the ring was closed for eviction. Judged no earlier than
    /// the floor, as a keyed limiter does.
    pub fn try_check_n_at(
        &self,
        n: u32,
        now: u64,
        floor: &crate::floor::Floor,
    ) -> Option<Result<Admitted, Denied>> {
        let now = self.shape.now(now, floor.get());
        self.shape.check_at(self.ring(), now, n)
    }

    pub fn close_if_idle(&self, now: u64, margin: u64, floor: &crate::floor::Floor) -> bool {
        self.ring().close_if_idle(now, margin, floor).is_ok()
    }
}

/// A `Limiter`'s answer: its ring is never closed (only a keyed limiter's
/// sweep closes rings).
#[inline(always)]
fn answered<T>(answer: Option<Result<T, Denied>>) -> Result<T, Denied> {
    answer.expect("a Limiter's ring is never closed")
}

impl<C: Clock + fmt::Debug> fmt::Debug for Limiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("limit", &self.limit())
            .field("window", &self.window())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
