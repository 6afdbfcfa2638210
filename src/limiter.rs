//! [`Limiter`]: the exact sliding-window log of one key.

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

/// One decision on a generation: `None` if its ring was closed. (Types,
/// not closures, so that `#[inline(always)]` keeps each check one
/// straight-line body on the hot path.)
trait Judge<T> {
    /// `when` reads the request's time; the judge calls it once.
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<T, Denied>>;
}

/// `check`: one unit, counting `remaining`.
struct CheckOne;
/// `admit`: one unit.
struct AdmitOne;
/// `check_n`: `n` units.
struct CheckN(u32);
/// `admit_n`: `n` units.
struct AdmitN(u32);
/// `peek_n`: what `check_n` would answer.
struct PeekN(u32);
/// `check` that also reads when `remaining` next grows and, with several
/// policies, writes each one's state in its cell, and the policies that
/// decided in `decided` (the tower layer).
struct CheckGrowing<'a> {
    states: &'a StatesOut,
    decided: &'a core::cell::Cell<DecidedBy>,
    /// The first generation's shape: a decision on it is said
    /// [`DecidedBy::Base`](DecidedBy::Base) (a pointer
    /// compare, no copy).
    first: &'a Shape,
}
/// `check_n_with_growth`: `n` units, and when `remaining` next grows.
struct CheckNGrowing(u32);

impl Judge<(Admitted, Option<u64>)> for CheckGrowing<'_> {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(Admitted, Option<u64>), Denied>> {
        let Growing { decision, wait } = shape.check_growing_at(ring, when(), self.states)?;
        // This generation answered: its policies decided.
        self.decided.set(if core::ptr::eq(shape, self.first) {
            DecidedBy::Base
        } else {
            DecidedBy::Policies(PolicySet::new(shape.policies()))
        });
        Some(decision.map(|admitted| (admitted, wait)))
    }
}

impl Judge<Admitted> for CheckOne {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        shape.check_when(ring, when)
    }
}

impl Judge<()> for AdmitOne {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(), Denied>> {
        shape.admit_when(ring, when)
    }
}

/// **More than the smallest limit**: `Some(answer)` when `n` units can
/// never fit — the denial, or `None` (judge on the successor) if the ring
/// was closed, since a closed ring's limits never answer; `None` when they
/// may fit.
#[inline(always)]
fn never_fits<T>(shape: &Shape, ring: RingRef<'_>, n: u32) -> Option<Option<Result<T, Denied>>> {
    let denied = shape.exceeds(n)?;
    Some((!ring.is_closed()).then_some(Err(denied)))
}

impl Judge<Admitted> for CheckN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.check_at(ring, now, self.0))
    }
}

impl Judge<()> for AdmitN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(), Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.admit_n_at(ring, now, self.0))
    }
}

impl Judge<(Admitted, u64)> for CheckNGrowing {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(Admitted, u64), Denied>> {
        let now = when();
        never_fits(shape, ring, self.0)
            .unwrap_or_else(|| shape.check_n_growing_at(ring, now, self.0))
    }
}

impl Judge<Admitted> for PeekN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.peek_at(ring, now, self.0))
    }
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

    /// **The answer** of the current generation: `op` judges on the
    /// generation `first`, at the time `read` returns (read once, when the
    /// ring asks for it: docs/design.md §4, "Where the time is read"), until
    /// a reconfiguration closes it; then at that same reading on the
    /// generations that followed (out of line: only a reconfigured limiter
    /// pays for the pin and the pointer).
    ///
    /// The out-of-line path answers through `moved`, a place of its own,
    /// not as its return value: a returned `Result` is written through a
    /// pointer into the caller's result, which would then live in memory
    /// on the inlined path too, where every `check` would store its answer
    /// and copy it (14 instructions a `check`, time passed in:
    /// BENCHMARKS.md, "Where the time goes", session 32).
    #[inline(always)]
    fn decide<T, J: Judge<T>>(&self, read: impl FnOnce() -> u64, op: J) -> Result<T, Denied> {
        let first = &self.first;
        let shape = &first.shape;
        let mut reading = 0;
        let answer = op.judge(
            shape,
            first.ring(),
            #[inline(always)]
            || {
                reading = read();
                shape.now(reading, 0)
            },
        );
        match answer {
            Some(answer) => answer,
            None => {
                let mut moved = None;
                self.decide_moved(reading, &op, &mut moved);
                moved.expect("decide_moved returns only once it has answered")
            }
        }
    }

    /// [`decide`](Self::decide) on the generations after `first`, at the
    /// reading `read`: writes the answer into `out` (see `decide`).
    #[cold]
    #[inline(never)]
    fn decide_moved<T, J: Judge<T>>(&self, read: u64, op: &J, out: &mut Option<Result<T, Denied>>) {
        let mut held = self.current.get();
        loop {
            let generation = held.as_deref().unwrap_or(&self.first);
            let shape = &generation.shape;
            if let Some(answer) = op.judge(shape, generation.ring(), || shape.now(read, 0)) {
                *out = Some(answer);
                return;
            }
            held = self.after(generation);
        }
    }

    /// **The successor** of a generation whose ring we saw closed: its
    /// `next`, or — once a later reconfiguration unlinked that — `current`.
    ///
    /// We read CLOSED with an Acquire slot load, which synchronises with
    /// the close's Release CAS; `next` was linked before that CAS, so it is
    /// visible unless unlinked since, and it is unlinked only after
    /// `current` moved past this generation, which the SeqCst load of
    /// `current` then sees (both links are SeqCst).
    fn after(&self, closed: &Generation) -> crate::link::Held<Generation> {
        let next = closed.next.get();
        if next.is_some() {
            return next;
        }
        let current = self.current.get();
        assert!(
            current
                .as_deref()
                .is_some_and(|g| !core::ptr::eq(g, closed)),
            "a Limiter's ring is closed only by a reconfiguration, which links its successor first"
        );
        current
    }

    /// Applies `f` to the current generation (no load while it is `first`).
    #[inline]
    fn with_current<T>(&self, f: impl FnOnce(&Generation) -> T) -> T {
        // Relaxed: a hint to skip the load; `current` is empty until set.
        if self.generation.load(Ordering::Relaxed) == 0 {
            return f(&self.first);
        }
        let held = self.current.get();
        f(held.as_deref().unwrap_or(&self.first))
    }

    /// One request at `now`, as [`check_at`](Self::check_at), and — if
    /// admitted — how many nanoseconds after `now` its `remaining` next
    /// grows (`None`: ask a dry run) and (with several policies, written in
    /// `states`) each one's state, read with the count (the tower layer's
    /// `RateLimit` field; see [`Growing`]); the policies of the generation
    /// that answered are written in `decided`.
    #[allow(dead_code)] // read by the tower layer only
    pub(crate) fn check_growing_at(
        &self,
        now: u64,
        states: &StatesOut,
        decided: &core::cell::Cell<DecidedBy>,
    ) -> Result<(Admitted, Option<u64>), Denied> {
        let first = &self.first.shape;
        self.decide(
            || now,
            CheckGrowing {
                states,
                decided,
                first,
            },
        )
    }

    /// The policies the limiter was built with (its first generation's).
    #[allow(dead_code)] // read by the tower layer only
    pub(crate) fn built_policies(&self) -> &[Policy] {
        self.first.shape.policies()
    }

    /// With several policies, each one's room and wait at `now` (for the
    /// tower layer's `RateLimit` field); `None` with one policy.
    #[allow(dead_code)] // read by the tower layer only
    pub(crate) fn policy_states_at(&self, now: u64) -> Option<crate::decision::PolicyStates> {
        self.with_current(|g| g.shape.policy_states(g.ring(), g.shape.now(now, 0)))
    }

    /// Changes the policies of this limiter while other threads check it,
    /// keeping what it has admitted.
    ///
    /// The log carries over: the new configuration judges every admission
    /// of the old ring still inside a window of the old or the new policies
    /// (at the clock's reading, or at the newest admission's time if
    /// earlier) and at least the newest `L`, the new largest limit; then
    /// everything after. A ring cut below what it holds keeps the surplus
    /// (never more slots than the old ring), judged on the several
    /// policies' path, until a later reconfiguration finds it outside every
    /// window in force. So no sequence of changes lets a
    /// window hold more than the largest limit in force in it: 10 a minute,
    /// all used, cut to 5 and restored to 10 within the minute admits
    /// nothing more in it.
    ///
    /// Every check that starts after this returns is judged entirely by the
    /// new policies — `remaining`, `retry_after` and [`Denied::policy`]
    /// included — and a racing check by exactly one of the two
    /// configurations, never a mix. So a smaller limit, a shorter window or
    /// an added policy takes effect at once over the history: a client that
    /// used 80 of 100 and is cut to 50 waits until its window holds fewer
    /// than 50. A larger limit or a longer window can count only what the
    /// old configuration kept: admissions it had already let go (pushed out
    /// of its ring, or outside every window in force) are not recalled. See
    /// the crate guide, "Changing limits at run time".
    ///
    /// Checks never wait for it: a check that meets the closed ring finds
    /// its successor linked and moves on (lock-free). Reconfigurations are
    /// serialised with each other; each copies the log once per attempt,
    /// `O(L_old + L_new)`, and retries only when an admission landed
    /// meanwhile. The replaced ring is freed once no check can still hold
    /// it.
    ///
    /// # Errors
    ///
    /// None today for a [`Quota`], which is validated when made; the
    /// `Result` keeps one signature across the limiters.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(100, Duration::from_secs(60), clock.clone())?;
    /// limiter.check_n(80).unwrap();
    /// // An incident: every client is cut to 50 a minute, at once.
    /// limiter.reconfigure(Quota::new(50, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.limit(), 50);
    /// assert!(limiter.check().is_err()); // 80 in the window, the limit is 50
    /// // Restored a second later: the 80 still count against the 100.
    /// clock.advance(Duration::from_secs(1));
    /// limiter.reconfigure(Quota::new(100, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.check().unwrap().remaining(), 19);
    /// clock.advance(Duration::from_secs(59));
    /// assert_eq!(limiter.check().unwrap().remaining(), 98);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, quota: Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = self.current.get();
        let old = held.as_deref().unwrap_or(&self.first);
        let shape = Self::successor_shape(&old.shape, &quota);
        // What is still live is judged at this reading, or at the newest
        // admission if earlier (`Shape::successor`).
        let now = old.shape.now(self.clock.now(), 0).judged;
        let horizon = old.shape.geometry.horizon();
        let closed = old.ring().close_into(|kept| {
            // Linked before the close (SeqCst, so also before the Release
            // CAS): whoever sees the ring closed finds it. An earlier
            // attempt's successor is dropped here unread: readers look at
            // `next` only after seeing the ring closed, and a close that
            // failed wrote nothing.
            old.next.set(Some(Arc::new(Generation::with_log(
                &shape, kept, now, horizon,
            ))));
        });
        if !closed {
            // Closed by an eviction (the model checker's hook): an idle ring
            // keeps nothing that counts; link an empty successor.
            old.next.set(Some(Arc::new(Generation::new(shape))));
        }
        let next = old.next.get().clone();
        self.current.set(next);
        // Relaxed: a count for `generation`, and a hint for `with_current`
        // (which falls back to `first` while `current` is empty); the new
        // policies themselves are published by `current`.
        self.generation.fetch_add(1, Ordering::Relaxed);
        // `current` points past `old` now: unlink its successor so that the
        // generations before do not stay chained (see `after`).
        old.next.set(None);
        Ok(())
    }

    /// The shape a reconfiguration builds: the quota's (under the model
    /// checker, carrying the old ring's flaw, or the old shape itself for the
    /// `OldPolicies` control).
    fn successor_shape(old: &Shape, quota: &Quota) -> Shape {
        #[cfg(slidelog_loom)]
        {
            let flaw = old.geometry.flaw();
            if flaw == crate::flaw::Flaw::OldPolicies {
                return old.clone();
            }
            (*quota.shape).clone().with_flaw(flaw)
        }
        #[cfg(not(slidelog_loom))]
        {
            let _ = old;
            (*quota.shape).clone()
        }
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
        self.decide(|| now, PeekN(n))
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
            policies: self.policies(),
            generation: self.generation(),
            admissions: self
                .admissions(anchor.clock_nanos)
                .into_iter()
                .map(|t| anchor.to_unix(t))
                .collect(),
        }
    }

    /// The current generation's live admissions at `now`, following a
    /// reconfiguration that closes it meanwhile.
    fn admissions(&self, now: u64) -> Vec<u64> {
        let mut held = self.current.get();
        loop {
            let generation = held.as_deref().unwrap_or(&self.first);
            if let Some(times) = generation.ring().admissions(now) {
                return times;
            }
            held = self.after(generation);
        }
    }

    /// Adds a snapshot's admissions to this limiter's, judged from now on
    /// as if the limiter that took it had never stopped (anchored to the
    /// system's wall clock now). Admissions no policy counts any more are
    /// dropped; live ones past the largest limit (a snapshot of a larger
    /// ring, or of one that carries admissions past a cut) are carried, up
    /// to the snapshot's own count, as a cut carries them (see
    /// [`reconfigure`](Self::reconfigure)). Needs `&mut`: restore before
    /// sharing the limiter.
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
        let existing = self.admissions(now);
        let already = existing.len();
        let shape = self.with_current(|g| g.shape.clone());
        let g = shape.geometry;
        // Every live admission, up to the larger of this ring and the
        // snapshot's log (a carried ring's surplus included): a ring larger
        // than `L` carries the surplus as a reconfiguration's successor does.
        let cap = (g.limit() as usize).max(snapshot.admissions.len());
        let (times, expired) = crate::snapshot::live_times(
            existing,
            snapshot.admissions.iter().map(|&u| anchor.to_clock(u)),
            now,
            &g.resized(
                cap.min(crate::config::MAX_LIMIT as usize) as u32,
                g.horizon(),
            ),
        );
        // A fresh ring, then the merged log: `&mut self` means no check
        // runs meanwhile, and no reader holds a generation. The count
        // restarts (`current` is empty again); the generation continues
        // past this limiter's and the snapshot's.
        self.restored = self.generation().max(snapshot.generation).saturating_add(1);
        self.first = Generation::with_log(&shape.ordinary(), &times, now, g.horizon());
        self.current.set(None);
        self.generation = AtomicU64::new(0);
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
        let shape = Shape::single(limit, window)?
            .with_flaw(flaw)
            .with_general_only();
        Ok(Limiter::from_shape(shape, clock))
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
        self.with_current(|g| {
            let now = g.shape.now(now, floor.get());
            g.shape.check_at(g.ring(), now, n)
        })
    }

    /// Closes the current generation's ring for eviction if idle.
    pub fn close_if_idle(&self, now: u64, margin: u64, floor: &crate::floor::Floor) -> bool {
        self.with_current(|g| g.ring().close_if_idle(now, margin, floor).is_ok())
    }

    /// A keyed sweep's step on this limiter's current generation: close it
    /// if idle, then tell an eviction from a ring a reconfiguration closed
    /// (which a keyed sweep leaves to its mover).
    pub fn sweep_step(&self, now: u64, margin: u64, floor: &crate::floor::Floor) -> Swept {
        let held = self.current.get();
        let generation = held.as_deref().unwrap_or(&self.first);
        if generation.ring().close_if_idle(now, margin, floor).is_err() {
            return Swept::Busy;
        }
        let moving = generation.next.get().is_some()
            || self
                .current
                .get()
                .as_deref()
                .is_some_and(|current| !core::ptr::eq(current, generation));
        if moving && generation.shape.geometry.flaw() != crate::flaw::Flaw::EvictMoving {
            Swept::Moving
        } else {
            Swept::Evicted
        }
    }
}

/// What a keyed sweep did with a ring (model checker only).
#[cfg(slidelog_loom)]
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swept {
    /// Still in use: left open.
    Busy,
    /// Closed by a reconfiguration: left to its mover.
    Moving,
    /// Closed and forgotten.
    Evicted,
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
