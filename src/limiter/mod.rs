//! [`Limiter`]: the exact sliding-window log of one key.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Limiter`], its generations, constructors, [`LimiterBuilder`], what it tells about itself |
//! | `judge.rs` | `Judge`: what one call asks of a generation's shape |
//! | `decide.rs` | the one decision path through the generations; the growth reads |
//! | `calls.rs` | the `check`, `admit` and `peek` families |
//! | `reconfigure.rs` | `reconfigure`: a new generation, the log carried over |
//! | `snapshot.rs` | snapshot and restore (feature `serde`) |
//! | `hooks.rs` | the loom models' hooks (`--cfg slidelog_loom`) |
//! | `tests.rs` | unit tests: `peek_at` against `peek` |

use core::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, QuantaClock};
use crate::decision::{Admitted, DecidedBy, Denied, PolicySet};
use crate::error::ConfigError;
use crate::link::Link;
use crate::policy::Policy;
use crate::quota::Quota;
use crate::ring::{Growing, StatesOut};
use crate::ring::{Hints, Now, RingRef, Shape};
use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod calls;
mod decide;
#[cfg(slidelog_loom)]
mod hooks;
mod judge;
mod reconfigure;
#[cfg(feature = "serde")]
mod snapshot;
#[cfg(all(test, not(slidelog_loom)))]
mod tests;

#[cfg(slidelog_loom)]
pub use hooks::Swept;
use judge::Judge;

/// `head` and the ring's guesses ([`Hints`]), on one padded line: a
/// single reads them with `head` and writes them next to the word it just
/// read. `repr(C)`: `head` first, then the hints in their order (the
/// padding is 128 bytes; the first five policies' hints share `head`'s
/// 64-byte line).
#[derive(Default)]
#[repr(C)]
struct Head {
    head: AtomicU64,
    hints: Hints,
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
    /// The generation built with the limiter, inline: a limiter never
    /// reconfigured checks with no indirection.
    first: Generation,
    /// The current generation once reconfigured (empty: `first`).
    current: Link<Generation>,
    /// How many reconfigurations completed (0: `current` was never set, and
    /// `limit()` and the like answer without loading it).
    generation: AtomicU64,
    /// Where [`generation`](Self::generation) continues from after a
    /// restore (which empties `current` and sets the count above to 0).
    restored: u64,
    /// One reconfiguration at a time: the close of a generation has one
    /// writer of its `next`.
    reconfiguring: Mutex<()>,
    clock: C,
}

/// One configuration of a [`Limiter`]: its policies and the ring that
/// serves them. A reconfiguration closes a generation's ring and hands its
/// log to the next (docs/design.md §6, "Reconfiguration").
struct Generation {
    /// `head` is written by every admission and read by every check: its own
    /// cache line, so it does not falsely share with the limiter's fields.
    head: CachePadded<Head>,
    slots: Box<[AtomicU64]>,
    shape: Shape,
    /// The generation that replaced this one, linked before this one's ring
    /// was closed (see `RingRef::close_into`), and unlinked again once
    /// `current` points past it (so old generations do not stay chained).
    next: Link<Generation>,
}

impl Generation {
    fn new(shape: Shape) -> Self {
        Generation {
            head: CachePadded::new(Head::default()),
            slots: (0..shape.geometry.limit())
                .map(|_| AtomicU64::new(0))
                .collect(),
            shape,
            next: Link::empty(),
        }
    }

    /// A generation of `shape`'s policies taking over `kept` (effective
    /// times, oldest first, kept `horizon` after their time) at `now`:
    /// every admission still inside `horizon` or the new longest window,
    /// and at least the newest `L` ([`Shape::successor`]).
    fn with_log(shape: &Shape, kept: &[u64], now: u64, horizon: u64) -> Self {
        let (shape, keep) = shape.successor(kept, now, horizon);
        let generation = Generation::new(shape);
        generation.ring().fill_fresh(&kept[kept.len() - keep..]);
        generation
    }

    #[inline(always)]
    fn ring(&self) -> RingRef<'_> {
        self.shape
            .ring_hinted(&self.head.head, &self.head.hints, &self.slots)
    }

    fn memory_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.slots) + self.shape.heap_bytes()
    }
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
    /// same as [`Limiter::new`]. Several cost more per call: each policy's
    /// slot is read and judged, [`check`](Limiter::check) counts each
    /// one's `remaining` ([`admit`](Limiter::admit) counts none), and
    /// `head` moves with every admission (three policies, BENCHMARKS.md:
    /// `admit` about twice a clock read, `check` four to five times).
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
            first: Generation::new(shape),
            current: Link::empty(),
            generation: AtomicU64::new(0),
            restored: 0,
            reconfiguring: Mutex::new(()),
            clock,
        }
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
        self.with_current(|g| g.shape.limit())
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
        self.with_current(|g| g.shape.window())
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

    /// How many times [`reconfigure`](Self::reconfigure) changed this
    /// limiter: a cache of [`policies`](Self::policies) (such as the tower
    /// layer's `RateLimit-Policy`) is current while this is unchanged.
    ///
    /// A [`restore`](Self::restore) continues past both this limiter's
    /// generation and the one the snapshot recorded (one more than the
    /// larger), so no number names two configurations of this limiter, nor
    /// one of the limiter the snapshot was taken from.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Quota};
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.generation(), 0);
    /// limiter.reconfigure(Quota::new(20, Duration::from_secs(1))?)?;
    /// assert_eq!(limiter.generation(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn generation(&self) -> u64 {
        // Relaxed: see `reconfigure`.
        self.restored
            .saturating_add(self.generation.load(Ordering::Relaxed))
    }

    /// Every policy this limiter checks now, in the order given (one for
    /// [`Limiter::new`]; the latest [`reconfigure`](Self::reconfigure)'s
    /// once reconfigured).
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
    pub fn policies(&self) -> Vec<Policy> {
        self.with_current(|g| g.shape.policies().to_vec())
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
        core::mem::size_of::<Self>() + self.with_current(Generation::memory_bytes)
    }
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
