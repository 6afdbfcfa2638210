//! [`SlidingCounter`]: one counter state with its clock, its constructors,
//! its limit and its accessors.

use core::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::CounterMode;
use super::config::CounterConfig;
use super::state::CounterRef;
use crate::clock::{Clock, QuantaClock};
use crate::config;
use crate::error::ConfigError;
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(slidelog_loom)]
use crate::{
    decision::{Admitted, Denied},
    flaw::Flaw,
    floor::Floor,
};

/// An approximate sliding-window rate limiter in O(slots) memory, with the
/// same `check`/`check_n`/[`Admitted`](crate::Admitted)/[`Denied`](crate::Denied)
/// interface as [`Limiter`](crate::Limiter).
///
/// A log costs 8 bytes per admission in the window; at a million requests
/// per window that is 8 MB per key. The counter costs `8 (N + 3)` bytes
/// whatever the limit (up to
/// [`MAX_COUNTER_LIMIT`](crate::MAX_COUNTER_LIMIT)), in exchange for
/// accuracy:
///
/// * **[`CounterMode::Slots`]** (`N` slots of width `W / N`; when `N` does
///   not divide `W`, slot `k` spans `[ceil(k W / N), ceil((k + 1) W / N))`,
///   so any `N` consecutive slots span exactly `W`): it admits a
///   request iff the admissions counted in the current slot and the `N - 1`
///   before it, plus the request, are at most `limit`. So any `N`
///   consecutive slots hold at most `limit` admissions. It never denies a
///   request that the exact log (on the same history) would admit; it may
///   admit more, because entries leave whole slots at a time: any window
///   `(t - W, t]` holds at most `limit` plus what the one slot it only
///   partly covers holds, and one slot can hold the whole limit. **Worst
///   case: `2 × limit` in one window, for every `N`** (slots at least 2 ns
///   wide): `limit` in the last nanosecond of a slot, then `limit` more
///   the moment that slot leaves the counted span, `W - width + 1` ns
///   later. Decisions differ from the exact rule only for requests within
///   one slot width of an expiry (property-tested).
/// * **[`CounterMode::TwoWindow`]** (the estimate large CDNs use): previous
///   window's count × (the fraction of it still inside `(t - W, t]`,
///   rounded up) + the current window's count. It assumes the previous
///   window's requests were evenly spread, so it errs both ways. **Worst
///   case: `limit + floor(limit (W - 2) / W)` in one window, i.e. `2 ×
///   limit - 1` once the window is at least `2 × limit` ns**: `limit` in
///   the last nanosecond of a window, then 2 ns before the next one ends
///   the previous count weighs 1, and `limit - 1` more are admitted.
///
/// In both modes `retry_after` is exactly the wait until the estimate,
/// with nothing more admitted, leaves room for the request (a retry then
/// is admitted, a nanosecond earlier is not), and an admission's growth
/// ([`check_n_with_growth`](Self::check_n_with_growth), the `RateLimit`
/// field's `t`) is the wait until `remaining` next grows: both compared
/// with a brute-force model of the estimate in `tests/counter.rs`, where
/// crafted patterns reach both worst cases and threads flooding one
/// counter stay within them.
///
/// The worst cases are what a crafted pattern reaches; on ordinary
/// traffic the excess is small.
/// Measured against the exact rule on its own history, with Poisson traffic
/// at 1.5x the limit (L = 100; `tests/counter.rs`, 200,000 requests):
///
/// | mode | decisions that differ | admitted vs exact log | fullest window (limit 100) |
/// |---|---|---|---|
/// | `Slots(1)` (fixed window) | 33.3% (all over) | +1.9% | 155 |
/// | `Slots(7)` (uneven: 7 does not divide W) | 31.3% (all over) | +1.6% | 114 |
/// | `Slots(10)` | 29.9% (all over) | +1.5% | 112 |
/// | `Slots(60)` | 15.9% (all over) | +0.6% | 105 |
/// | `TwoWindow` | 29.9% (8% over, 21% under) | +0.2% | 109 |
///
/// (At 1.5x load every decision sits at the edge of a full window, which is
/// the worst case for the error rate; under the limit both always agree.
/// The fullest windows are Poisson's, far from the crafted worst cases
/// above: 200 at limit 100 for every `Slots(N)`, 199 for `TwoWindow`.)
///
/// Lock-free: one atomic word holds the newest slot's epoch and count, and
/// an admission is one compare-and-swap on it (plus, once per slot, the
/// archiving of the previous one); denials only load.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ManualClock, SlidingCounter};
///
/// let clock = ManualClock::new();
/// let counter = SlidingCounter::with_clock(2, Duration::from_secs(1), 10, clock.clone())?;
/// assert!(counter.check().is_ok());
/// assert!(counter.check().is_ok());
/// let denied = counter.check().unwrap_err();
/// assert_eq!(denied.retry_after(), Duration::from_secs(1));
/// clock.advance(denied.retry_after());
/// assert!(counter.check().is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct SlidingCounter<C: Clock = QuantaClock> {
    /// `epoch << count_bits | count` of the current slot (every admission
    /// CASes it) and its absolute sub-window (see `CounterRef::absolute`),
    /// on one padded line.
    head: CachePadded<[AtomicU64; 2]>,
    /// The slots mode's summary (see `CounterRef::summary`).
    summary: AtomicU64,
    /// Past slots, `epoch << count_bits | count`, at `epoch mod N`.
    archive: Box<[AtomicU64]>,
    /// The limit now (`config`'s until [`reconfigure`](Self::reconfigure)d).
    limit: AtomicU32,
    /// How many reconfigurations completed (see
    /// [`generation`](Self::generation)).
    generation: AtomicU64,
    config: CounterConfig,
    pub(super) clock: C,
}

impl SlidingCounter<QuantaClock> {
    /// A counter with `slots` sub-windows on the default clock.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] if `limit` is 0 or above
    /// [`MAX_COUNTER_LIMIT`](crate::MAX_COUNTER_LIMIT), the window is zero
    /// or too long, `slots` is 0, above [`MAX_SLOTS`](crate::MAX_SLOTS) or
    /// more than the window has nanoseconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ConfigError, SlidingCounter};
    /// let counter = SlidingCounter::new(1_000_000, Duration::from_secs(60), 60)?;
    /// assert!(counter.check().is_ok());
    /// assert_eq!(SlidingCounter::new(10, Duration::from_secs(1), 0).unwrap_err(), ConfigError::ZeroSlots);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(limit: u32, window: Duration, slots: u32) -> Result<Self, ConfigError> {
        SlidingCounter::with_clock(limit, window, slots, QuantaClock::new())
    }

    /// A two-window (weighted) counter on the default clock.
    ///
    /// # Errors
    ///
    /// As for [`new`](Self::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::SlidingCounter;
    /// let counter = SlidingCounter::two_window(100, Duration::from_secs(1))?;
    /// assert!(counter.check().is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn two_window(limit: u32, window: Duration) -> Result<Self, ConfigError> {
        SlidingCounter::two_window_with_clock(limit, window, QuantaClock::new())
    }
}

impl<C: Clock> SlidingCounter<C> {
    /// A counter with `slots` sub-windows on the given clock.
    ///
    /// # Errors
    ///
    /// As for [`new`](SlidingCounter::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(5, Duration::from_secs(1), 4, ManualClock::new())?;
    /// assert_eq!(counter.check_n(2).unwrap().remaining(), 3);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn with_clock(
        limit: u32,
        window: Duration,
        slots: u32,
        clock: C,
    ) -> Result<Self, ConfigError> {
        SlidingCounter::build(limit, window, CounterMode::Slots(slots), clock)
    }

    /// A two-window counter on the given clock.
    ///
    /// # Errors
    ///
    /// As for [`new`](SlidingCounter::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let clock = ManualClock::new();
    /// let counter = SlidingCounter::two_window_with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// assert!(counter.check_n(10).is_ok());
    /// clock.advance(Duration::from_millis(1500)); // half of the last window still counts: 5
    /// assert_eq!(counter.check_n(5).unwrap().remaining(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn two_window_with_clock(
        limit: u32,
        window: Duration,
        clock: C,
    ) -> Result<Self, ConfigError> {
        SlidingCounter::build(limit, window, CounterMode::TwoWindow, clock)
    }

    /// A counter in the given mode on the given clock.
    ///
    /// # Errors
    ///
    /// As for [`new`](SlidingCounter::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{CounterMode, ManualClock, SlidingCounter};
    /// let mode = CounterMode::TwoWindow;
    /// let counter = SlidingCounter::with_mode(10, Duration::from_secs(1), mode, ManualClock::new())?;
    /// assert_eq!(counter.mode(), mode);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn with_mode(
        limit: u32,
        window: Duration,
        mode: CounterMode,
        clock: C,
    ) -> Result<Self, ConfigError> {
        SlidingCounter::build(limit, window, mode, clock)
    }

    fn build(
        limit: u32,
        window: Duration,
        mode: CounterMode,
        clock: C,
    ) -> Result<Self, ConfigError> {
        let config = CounterConfig::new(limit, window, mode)?;
        // Head starts in the current sub-window, so epochs compare correctly
        // however long the clock has run.
        let now = clock.now();
        let head = config.initial_head(now);
        Ok(SlidingCounter {
            head: CachePadded::new([AtomicU64::new(head), AtomicU64::new(config.absolute(now))]),
            // Nothing archived yet: the summary of head's sub-window is 0.
            summary: AtomicU64::new(head),
            archive: (0..config.cells)
                .map(|_| AtomicU64::new(config.initial_cell(now)))
                .collect(),
            limit: AtomicU32::new(limit),
            generation: AtomicU64::new(0),
            config,
            clock,
        })
    }

    #[inline]
    pub(super) fn state(&self, limit: u32) -> CounterRef<'_> {
        CounterRef {
            config: &self.config,
            limit,
            head: &self.head[0],
            absolute: &self.head[1],
            summary: self.config.summarised().then_some(&self.summary),
            archive: &self.archive,
        }
    }
}

impl<C: Clock> SlidingCounter<C> {
    /// The limit the counter was built with (the backend reads it; loom
    /// builds leave the backend out).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn built_limit(&self) -> u32 {
        self.config.limit()
    }
    /// The limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(slidelog::SlidingCounter::new(9, Duration::from_secs(1), 3)?.limit(), 9);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.current_limit()
    }

    /// The limit a check judges by now.
    #[inline]
    pub(super) fn current_limit(&self) -> u32 {
        // Relaxed: the limit is one word, judged alone (no other data is
        // published with it): a check racing `reconfigure` judges by the old
        // or the new limit, and one that starts after it returned (so after
        // it, in happens-before) reads the new one.
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes the limit while other threads check, keeping the counts:
    /// every check that starts after this returns judges the counted
    /// window by the new limit (a smaller one applies at once over what was
    /// admitted, as [`Limiter::reconfigure`](crate::Limiter::reconfigure)
    /// does; the counter stays approximate as documented above).
    ///
    /// # Errors
    ///
    /// The window and the slots stay: [`ConfigError::CounterPolicies`] for a
    /// quota of more than one policy, [`ConfigError::CounterWindow`] for
    /// another window, and [`ConfigError::LimitTooLarge`] above
    /// [`max_limit`](Self::max_limit) (the count field is sized when the
    /// counter is built: build with the largest limit you will need).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ManualClock, Quota, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(100, Duration::from_secs(1), 10, ManualClock::new())?;
    /// counter.check_n_at(80, 0).unwrap();
    /// counter.reconfigure(Quota::new(50, Duration::from_secs(1))?)?;
    /// assert!(counter.check_at(1).is_err()); // 80 counted, the limit is 50
    /// assert!(counter.reconfigure(Quota::new(10, Duration::from_secs(2))?).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, quota: crate::Quota) -> Result<(), ConfigError> {
        let [policy] = quota.policies() else {
            return Err(ConfigError::CounterPolicies);
        };
        let window = config::window_nanos(policy.window)?;
        if window != self.config.window {
            return Err(ConfigError::CounterWindow {
                window: policy.window,
                counter: Duration::from_nanos(self.config.window),
            });
        }
        let max = self.max_limit();
        if policy.limit > max {
            return Err(ConfigError::LimitTooLarge {
                limit: policy.limit,
                max,
            });
        }
        // Relaxed: see `current_limit`.
        self.limit.store(policy.limit, Ordering::Relaxed);
        // Relaxed: a count, moved after the limit it counts (as
        // `Limiter::reconfigure` moves its own after the policies); it
        // publishes nothing, as every check reads the limit itself.
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// How many times [`reconfigure`](Self::reconfigure) changed this
    /// counter (0 as built; a refused reconfiguration does not count), as
    /// [`Limiter::generation`](crate::Limiter::generation) counts: a cache
    /// of the policies (such as the tower layer's `RateLimit-Policy`) is
    /// current while this is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Quota, SlidingCounter};
    /// let counter = SlidingCounter::new(10, Duration::from_secs(1), 10)?;
    /// assert_eq!(counter.generation(), 0);
    /// counter.reconfigure(Quota::new(12, Duration::from_secs(1))?)?;
    /// counter.reconfigure(Quota::new(10, Duration::from_secs(1))?)?;
    /// assert_eq!(counter.generation(), 2); // back to 10, still a change
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn generation(&self) -> u64 {
        // Relaxed: see `reconfigure`.
        self.generation.load(Ordering::Relaxed)
    }

    /// The largest limit [`reconfigure`](Self::reconfigure) accepts: what
    /// the count field sized for the limit the counter was built with
    /// holds (at least that limit; `2^k - 2` for the `k` bits that limit
    /// needs).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(100, Duration::from_secs(1), 10)?;
    /// assert_eq!(counter.max_limit(), 126);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn max_limit(&self) -> u32 {
        self.config.max_limit()
    }

    /// The window.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(slidelog::SlidingCounter::new(9, Duration::from_secs(1), 3)?.window(), Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.config.window)
    }

    /// The width of one sub-window: `window / N` (the whole window in the
    /// two-window mode). When `N` does not divide the window this is rounded
    /// down, and slots are this wide or 1 ns wider: slot `k` starts at
    /// `ceil(k W / N)`, so `N` consecutive slots span exactly the window.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(9, Duration::from_secs(1), 4)?;
    /// assert_eq!(counter.slot_width(), Duration::from_millis(250));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn slot_width(&self) -> Duration {
        Duration::from_nanos(self.config.width)
    }

    /// The estimation mode.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{CounterMode, SlidingCounter};
    /// assert_eq!(SlidingCounter::new(9, Duration::from_secs(1), 3)?.mode(), CounterMode::Slots(3));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn mode(&self) -> CounterMode {
        self.config.mode
    }

    /// Bytes this counter occupies: `8 N` plus the padded header.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1_000_000, Duration::from_secs(60), 60)?;
    /// assert!(counter.memory_bytes() < 1024);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>() + core::mem::size_of_val(&*self.archive)
    }

    /// The counter's clock.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{Clock, ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_secs(1), 2, ManualClock::new())?;
    /// assert_eq!(counter.clock().now(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// Hooks for the model checker (`--cfg slidelog_loom`): the eviction
/// handshake of a keyed counter, driven through the shipped state.
#[cfg(slidelog_loom)]
#[doc(hidden)]
impl<C: Clock> SlidingCounter<C> {
    pub fn with_flaw(
        limit: u32,
        window: Duration,
        slots: u32,
        clock: C,
        flaw: Flaw,
    ) -> Result<Self, ConfigError> {
        let mut counter = SlidingCounter::build(limit, window, CounterMode::Slots(slots), clock)?;
        counter.config.flaw = flaw;
        Ok(counter)
    }

    /// `None` if the state was closed for eviction. Judged no earlier than
    /// the floor, as a keyed counter does.
    pub fn try_check_n_at(
        &self,
        n: u32,
        now: u64,
        floor: &Floor,
    ) -> Option<Result<Admitted, Denied>> {
        self.state(self.current_limit()).check(n, now, floor.get())
    }

    pub fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> bool {
        self.state(self.current_limit())
            .close_if_idle(now, margin, floor)
            .is_ok()
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for SlidingCounter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlidingCounter")
            .field("limit", &self.current_limit())
            .field("window", &self.window())
            .field("mode", &self.config.mode)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
