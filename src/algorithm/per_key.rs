//! [`Algorithm`]: what a [`KeyedLimiter`](crate::KeyedLimiter) keeps per
//! key, the exact log ([`Log`]) or the approximate counter ([`Counter`]).

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::counter::{CounterConfig, CounterMode, CounterRef};
use crate::decision::{Admitted, Denied, PolicyStates};
use crate::error::ConfigError;
use crate::floor::Floor;
use crate::policy::Policy;
use crate::ring::{Growing, RingRef, Shape, StatesOut};
use crate::sync::atomic::AtomicU64;

/// What a [`KeyedLimiter`](crate::KeyedLimiter) keeps per key: the exact
/// log ([`Log`], the default) or the approximate counter ([`Counter`]).
///
/// Sealed: the keyed map relies on each state's close-for-eviction
/// handshake, so only this crate implements it. Choose one with the
/// builder; the type is named mostly in struct fields
/// ([`KeyedCounter`](crate::KeyedCounter) is a shorthand for the counter).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::algorithm::{Algorithm, Counter};
/// use slidelog::{KeyedCounter, KeyedLimiter, ManualClock};
///
/// struct Gateway<A: Algorithm> {
///     per_user: KeyedLimiter<u64, ManualClock, std::collections::hash_map::RandomState, A>,
/// }
///
/// let gateway: Gateway<Counter> = Gateway {
///     per_user: KeyedLimiter::<u64>::builder(1_000_000, Duration::from_secs(60))
///         .sliding_counter(60)
///         .clock(ManualClock::new())
///         .build()?,
/// };
/// assert!(gateway.per_user.check_n(&7, 1_000).is_ok());
/// # let _: &KeyedCounter<u64, ManualClock> = &gateway.per_user;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Algorithm: sealed::Sealed + Send + Sync + fmt::Debug + 'static {}

pub(crate) mod sealed {
    use super::*;

    /// The per-key operations the keyed map needs. Every key's state is a slice
    /// of [`words`](Sealed::words) atomic words. `quota` is the
    /// key's own policies when a per-key quota chose them (the log only;
    /// `None`: the limiter's default).
    pub trait Sealed: Sized {
        /// Whether keys may have their own policies (a per-key quota).
        const QUOTAS: bool;
        /// Builds the per-key configuration (`mode` only matters to the
        /// counter, which takes one policy).
        fn configure(policies: &[Policy], mode: CounterMode) -> Result<Self, ConfigError>;
        /// Words of state per key.
        fn words(&self, quota: Option<&Shape>) -> usize;
        /// Admissions allowed per window (the first policy's).
        fn limit(&self) -> u32;
        /// The window in nanoseconds (the first policy's).
        fn window_nanos(&self) -> u64;
        /// The default policies.
        fn policies(&self) -> &[Policy];
        /// A fresh key's state, created at `now`: word `i` starts as
        /// `initial(quota, now)(i)` (the map builds the words where they
        /// live, inside its entry or boxed).
        fn initial(&self, quota: Option<&Shape>, now: u64) -> impl Fn(usize) -> u64;
        /// A fresh key's state, boxed.
        fn init(&self, quota: Option<&Shape>, now: u64) -> Box<[AtomicU64]> {
            let word = self.initial(quota, now);
            (0..self.words(quota))
                .map(|i| AtomicU64::new(word(i)))
                .collect()
        }
        /// `Some(denial)` if `n` units can never fit this key.
        fn exceeds(&self, quota: Option<&Shape>, n: u32) -> Option<Denied>;
        /// Checks `n` units asked for at `now` (`exceeds` said they fit),
        /// judged at `max(now, floor)` (the eviction floor, see
        /// [`crate::floor`]); `retry_after` counts from `now`. `None` if the
        /// state was closed.
        fn check(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            n: u32,
            now: u64,
            floor: u64,
        ) -> Option<Result<Admitted, Denied>>;
        /// `check` of one unit (for [`KeyedLimiter::check`](crate::KeyedLimiter::check)); `None` if
        /// closed.
        #[inline]
        fn check_one(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            now: u64,
            floor: u64,
        ) -> Option<Result<Admitted, Denied>> {
            self.check(state, quota, 1, now, floor)
        }
        /// `check` of one unit without counting `remaining` (for
        /// [`KeyedLimiter::admit`](crate::KeyedLimiter::admit)); `None` if
        /// closed.
        #[inline]
        fn admit(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            now: u64,
            floor: u64,
        ) -> Option<Result<(), Denied>> {
            self.check(state, quota, 1, now, floor)
                .map(|decision| decision.map(|_| ()))
        }
        /// `check` of `n` units without counting `remaining` (for
        /// [`KeyedLimiter::admit_n`](crate::KeyedLimiter::admit_n)); `None`
        /// if closed.
        #[inline]
        fn admit_n(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            n: u32,
            now: u64,
            floor: u64,
        ) -> Option<Result<(), Denied>> {
            self.check(state, quota, n, now, floor)
                .map(|decision| decision.map(|_| ()))
        }
        /// `check` of `n` units and, for an admission, how long after
        /// `now` `remaining` next grows (zero: never by waiting): read in
        /// the same pass where the algorithm can (the log's), otherwise by
        /// [`growth_by_dry_run`](Sealed::growth_by_dry_run). `None` if
        /// closed.
        fn check_n_growing(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            n: u32,
            now: u64,
            floor: u64,
        ) -> Option<Result<(Admitted, Duration), Denied>> {
            let decision = self.check(state, quota, n, now, floor)?;
            Some(decision.map(|admitted| {
                let grows = self.growth_by_dry_run(state, quota, &admitted, now, floor);
                (admitted, grows)
            }))
        }
        /// When `admitted`'s `remaining` grows, by a dry run on the same
        /// state right after it ([`crate::decision::growth_by_dry_run`];
        /// zero if the state was closed meanwhile).
        fn growth_by_dry_run(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            admitted: &Admitted,
            now: u64,
            floor: u64,
        ) -> Duration {
            crate::decision::growth_by_dry_run(admitted, |more| {
                self.exceeds(quota, more)
                    .is_none()
                    .then(|| self.peek(state, quota, more, now, floor))
                    .flatten()
            })
        }
        /// `check` of one unit and, where the algorithm knows them from the
        /// same pass, how many nanoseconds after `now` `remaining` next
        /// grows (`None`: the caller asks `peek`) and, written in `states`
        /// on an admission, each policy's state (see [`Growing`]); `None`
        /// if closed.
        #[inline]
        fn check_growing(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            now: u64,
            floor: u64,
            states: &StatesOut,
        ) -> Option<Growing> {
            let _ = states;
            self.check(state, quota, 1, now, floor)
                .map(|decision| Growing {
                    decision,
                    wait: None,
                })
        }
        /// What `check` would answer, recording nothing; `None` if closed.
        fn peek(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            n: u32,
            now: u64,
            floor: u64,
        ) -> Option<Result<Admitted, Denied>>;
        /// What an absent key answers to `n` units that fit, at `now`
        /// judged no earlier than `floor`.
        fn fresh(&self, quota: Option<&Shape>, n: u32, now: u64, floor: u64) -> Admitted;
        /// Closes the state if it has been idle for `margin`, raising
        /// `floor` first (see the ring's and the counter's `close_if_idle`).
        fn close_if_idle(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            now: u64,
            margin: u64,
            floor: &Floor,
        ) -> Result<(), u64>;
        /// A lower bound on when a key with the default policies admitted
        /// at or after `now` can become idle, before the margin.
        fn earliest_idle(&self, now: u64) -> u64;
        /// With several policies, each one's room and wait until it grows
        /// (see `Shape::policy_states`); `None` otherwise.
        fn policy_states(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            now: u64,
            floor: u64,
        ) -> Option<PolicyStates> {
            let _ = (state, quota, now, floor);
            None
        }
        /// Whether `state` was closed for reconfiguration (an answer that
        /// reads no slot must then come from its successor).
        fn is_closed(&self, state: &[AtomicU64], quota: Option<&Shape>) -> bool;
        /// Closes `state` (of policies `quota`) for reconfiguration to `to`
        /// (`None`: the default) at `now`, handing `publish` the successor's
        /// words before the close (see `RingRef::close_into`), and its own
        /// shape when it carries more admissions than `to`'s ring holds
        /// (`Shape::successor`; `None`: `to`'s). `false` if it was closed
        /// already (for eviction).
        fn close_into(
            &self,
            state: &[AtomicU64],
            quota: Option<&Shape>,
            to: Option<&Shape>,
            now: u64,
            publish: &mut dyn FnMut(Box<[AtomicU64]>, Option<Arc<Shape>>),
        ) -> bool;
    }

    /// The first word and the rest (every state has at least two words).
    #[inline]
    pub(super) fn split(state: &[AtomicU64]) -> (&AtomicU64, &[AtomicU64]) {
        state
            .split_first()
            .expect("a per-key state has at least two words")
    }
}

/// The exact sliding-window log per key: a ring of `limit` slots (the
/// default algorithm of [`KeyedLimiter`](crate::KeyedLimiter)); with
/// several policies, a ring of the largest limit checked against all of
/// them.
///
/// ```
/// use std::time::Duration;
/// use slidelog::algorithm::Log;
/// use slidelog::KeyedLimiter;
/// let limiter: KeyedLimiter<u64> = KeyedLimiter::new(3, Duration::from_secs(1))?;
/// assert_eq!(limiter.algorithm().limit(), 3);
/// # let _: &Log = limiter.algorithm();
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Log {
    shape: Shape,
}

impl Log {
    /// Admissions allowed per window (the first policy's).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(3, Duration::from_secs(1))?;
    /// assert_eq!(limiter.algorithm().limit(), 3);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.shape.limit()
    }

    /// The default policies' shape.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn default_shape(&self) -> &Shape {
        &self.shape
    }

    #[inline]
    fn shape<'a>(&'a self, quota: Option<&'a Shape>) -> &'a Shape {
        quota.unwrap_or(&self.shape)
    }

    /// The key's shape and its ring over `state`.
    #[inline]
    fn ring<'a>(
        &'a self,
        state: &'a [AtomicU64],
        quota: Option<&'a Shape>,
    ) -> (&'a Shape, RingRef<'a>) {
        let shape = self.shape(quota);
        (shape, shape.ring_in(state))
    }
}

impl sealed::Sealed for Log {
    const QUOTAS: bool = true;
    fn configure(policies: &[Policy], _: CounterMode) -> Result<Self, ConfigError> {
        Ok(Log {
            shape: Shape::new(policies)?,
        })
    }
    fn words(&self, quota: Option<&Shape>) -> usize {
        self.shape(quota).words()
    }
    #[inline]
    fn limit(&self) -> u32 {
        self.shape.limit()
    }
    #[inline]
    fn window_nanos(&self) -> u64 {
        self.shape.window().as_nanos() as u64
    }
    fn policies(&self) -> &[Policy] {
        self.shape.policies()
    }
    fn initial(&self, _: Option<&Shape>, _: u64) -> impl Fn(usize) -> u64 {
        |_| 0
    }
    #[inline]
    fn exceeds(&self, quota: Option<&Shape>, n: u32) -> Option<Denied> {
        self.shape(quota).exceeds(n)
    }
    #[inline(always)]
    fn check(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<Admitted, Denied>> {
        let (shape, ring) = self.ring(state, quota);
        shape.check_at(ring, shape.now(now, floor), n)
    }
    /// The one-unit path alone, as [`crate::Limiter::check`] takes it:
    /// `check` of `n = 1` joins the single's outcome with the weighted
    /// path's and moves it through memory once more, which costs a keyed
    /// denial most where the keys' states miss the L2 (BENCHMARKS.md,
    /// "Where the time goes").
    #[inline(always)]
    fn check_one(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        now: u64,
        floor: u64,
    ) -> Option<Result<Admitted, Denied>> {
        let (shape, ring) = self.ring(state, quota);
        let now = shape.now(now, floor);
        shape.check_when(ring, || now)
    }
    #[inline(always)]
    fn admit(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        now: u64,
        floor: u64,
    ) -> Option<Result<(), Denied>> {
        let (shape, ring) = self.ring(state, quota);
        shape.admit_at(ring, shape.now(now, floor))
    }
    #[inline]
    fn admit_n(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<(), Denied>> {
        let (shape, ring) = self.ring(state, quota);
        shape.admit_n_at(ring, shape.now(now, floor), n)
    }
    #[inline]
    fn check_n_growing(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<(Admitted, Duration), Denied>> {
        let (shape, ring) = self.ring(state, quota);
        let decision = shape.check_n_growing_at(ring, shape.now(now, floor), n)?;
        Some(decision.map(|(admitted, wait)| (admitted, Duration::from_nanos(wait))))
    }
    #[inline]
    fn check_growing(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        now: u64,
        floor: u64,
        states: &StatesOut,
    ) -> Option<Growing> {
        let (shape, ring) = self.ring(state, quota);
        shape.check_growing_at(ring, shape.now(now, floor), states)
    }
    fn peek(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<Admitted, Denied>> {
        let (shape, ring) = self.ring(state, quota);
        shape.peek_at(ring, shape.now(now, floor), n)
    }
    fn fresh(&self, quota: Option<&Shape>, n: u32, now: u64, floor: u64) -> Admitted {
        let shape = self.shape(quota);
        shape.fresh(n, shape.now(now, floor))
    }
    fn close_if_idle(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        now: u64,
        margin: u64,
        floor: &Floor,
    ) -> Result<(), u64> {
        self.ring(state, quota).1.close_if_idle(now, margin, floor)
    }
    fn earliest_idle(&self, now: u64) -> u64 {
        // An admission at `t >= now` stops counting at `t + W_longest`.
        self.shape.earliest_idle(now)
    }
    fn is_closed(&self, state: &[AtomicU64], quota: Option<&Shape>) -> bool {
        self.ring(state, quota).1.is_closed()
    }
    fn policy_states(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        now: u64,
        floor: u64,
    ) -> Option<PolicyStates> {
        let (shape, ring) = self.ring(state, quota);
        shape.policy_states(ring, shape.now(now, floor))
    }
    fn close_into(
        &self,
        state: &[AtomicU64],
        quota: Option<&Shape>,
        to: Option<&Shape>,
        now: u64,
        publish: &mut dyn FnMut(Box<[AtomicU64]>, Option<Arc<Shape>>),
    ) -> bool {
        let to = self.shape(to);
        let (from, ring) = self.ring(state, quota);
        let now = from.now(now, 0).judged;
        let horizon = from.geometry.horizon();
        ring.close_into(|kept| {
            let (shape, keep) = to.successor(kept, now, horizon);
            let words = self.init(Some(&shape), 0);
            shape.ring_in(&words).fill_fresh(&kept[kept.len() - keep..]);
            // Only a carrying ring needs a shape of its own.
            let own = (shape.geometry.limit() != to.geometry.limit()).then(|| Arc::new(shape));
            publish(words, own);
        })
    }
}

impl Algorithm for Log {}

/// The approximate sliding-window counter per key (see
/// [`SlidingCounter`](crate::SlidingCounter) for its guarantee and measured
/// error): `8 (N + 3)` bytes per key whatever the limit (head, its absolute sub-window, a summary,
/// N slots; 24 bytes in the two-window mode).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{CounterMode, KeyedLimiter};
/// let limiter = KeyedLimiter::<u64>::builder(1_000_000, Duration::from_secs(60))
///     .sliding_counter(60)
///     .build()?;
/// assert_eq!(limiter.algorithm().mode(), CounterMode::Slots(60));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Counter {
    config: CounterConfig,
    policy: Policy,
}

impl Counter {
    /// The estimation mode.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{CounterMode, KeyedLimiter};
    /// let limiter = KeyedLimiter::<u64>::builder(10, Duration::from_secs(1)).two_window().build()?;
    /// assert_eq!(limiter.algorithm().mode(), CounterMode::TwoWindow);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn mode(&self) -> CounterMode {
        self.config.mode()
    }

    /// `[head, head's absolute sub-window, summary (slots mode),
    /// archive...]`.
    #[inline]
    fn state<'a>(&'a self, state: &'a [AtomicU64]) -> CounterRef<'a> {
        let (head, rest) = sealed::split(state);
        let (absolute, rest) = sealed::split(rest);
        let (summary, archive) = if self.config.summarised() {
            let (summary, archive) = sealed::split(rest);
            (Some(summary), archive)
        } else {
            (None, rest)
        };
        CounterRef {
            config: &self.config,
            limit: self.config.limit(),
            head,
            absolute,
            summary,
            archive,
        }
    }
}

impl sealed::Sealed for Counter {
    const QUOTAS: bool = false;
    fn configure(policies: &[Policy], mode: CounterMode) -> Result<Self, ConfigError> {
        let [policy] = policies else {
            return Err(ConfigError::CounterPolicies);
        };
        Ok(Counter {
            config: CounterConfig::new(policy.limit, policy.window, mode)?,
            policy: *policy,
        })
    }
    fn words(&self, _: Option<&Shape>) -> usize {
        self.config.words()
    }
    #[inline]
    fn limit(&self) -> u32 {
        self.config.limit()
    }
    #[inline]
    fn window_nanos(&self) -> u64 {
        self.config.window()
    }
    fn policies(&self) -> &[Policy] {
        core::slice::from_ref(&self.policy)
    }
    fn initial(&self, _: Option<&Shape>, now: u64) -> impl Fn(usize) -> u64 {
        // Head and the summary start in the current sub-window, empty.
        let cfg = &self.config;
        let (head, cell) = (cfg.initial_head(now), cfg.initial_cell(now));
        let (absolute, summaries) = (cfg.absolute(now), 2 + usize::from(cfg.summarised()));
        move |i| match i {
            1 => absolute,
            i if i < summaries => head,
            _ => cell,
        }
    }
    #[inline]
    fn exceeds(&self, _: Option<&Shape>, n: u32) -> Option<Denied> {
        let limit = self.config.limit();
        (n > limit).then(|| Denied::exceeds_limit(n, limit))
    }
    #[inline]
    fn check(
        &self,
        state: &[AtomicU64],
        _: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<Admitted, Denied>> {
        self.state(state).check(n, now, floor)
    }
    fn peek(
        &self,
        state: &[AtomicU64],
        _: Option<&Shape>,
        n: u32,
        now: u64,
        floor: u64,
    ) -> Option<Result<Admitted, Denied>> {
        self.state(state).peek(n, now, floor)
    }
    fn fresh(&self, _: Option<&Shape>, n: u32, now: u64, floor: u64) -> Admitted {
        self.config.fresh(n, now.max(floor))
    }
    fn close_if_idle(
        &self,
        state: &[AtomicU64],
        _: Option<&Shape>,
        now: u64,
        margin: u64,
        floor: &Floor,
    ) -> Result<(), u64> {
        self.state(state).close_if_idle(now, margin, floor)
    }
    fn earliest_idle(&self, now: u64) -> u64 {
        self.config.earliest_idle(now)
    }
    fn is_closed(&self, _: &[AtomicU64], _: Option<&Shape>) -> bool {
        // Never reconfigured (see `close_into`).
        false
    }
    fn close_into(
        &self,
        _: &[AtomicU64],
        _: Option<&Shape>,
        _: Option<&Shape>,
        _: u64,
        _: &mut dyn FnMut(Box<[AtomicU64]>, Option<Arc<Shape>>),
    ) -> bool {
        // Keyed counters have no run-time reconfiguration: their
        // `reconfigure` is not offered, so nothing changes and nothing moves.
        unreachable!("a keyed counter is never reconfigured")
    }
}

impl Algorithm for Counter {}
