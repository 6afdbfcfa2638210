//! [`SlidingCounter`]: the approximate sliding-window counter, for limits too
//! large for an exact log.

use core::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, QuantaClock};
use crate::config;
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The largest limit of a [`SlidingCounter`]: counts are 24-bit fields.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{SlidingCounter, MAX_COUNTER_LIMIT};
/// assert!(SlidingCounter::new(MAX_COUNTER_LIMIT, Duration::from_secs(1), 10).is_ok());
/// assert!(SlidingCounter::new(MAX_COUNTER_LIMIT + 1, Duration::from_secs(1), 10).is_err());
/// ```
pub const MAX_COUNTER_LIMIT: u32 = (1 << COUNT_BITS) - 1;

/// The most sub-window slots of a [`SlidingCounter`].
///
/// ```
/// use std::time::Duration;
/// use slidelog::{SlidingCounter, MAX_SLOTS};
/// assert!(SlidingCounter::new(10, Duration::from_secs(3600), MAX_SLOTS).is_ok());
/// ```
pub const MAX_SLOTS: u32 = 1 << 16;

/// Word codec: `epoch << 24 | count`. The epoch is the sub-window number
/// `t / width`, kept modulo 2^40 (compared with wrapping arithmetic).
const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const EPOCH_MASK: u64 = (1 << 40) - 1;

#[inline]
const fn pack(epoch: u64, count: u64) -> u64 {
    ((epoch & EPOCH_MASK) << COUNT_BITS) | (count & COUNT_MASK)
}

#[inline]
const fn epoch_of(word: u64) -> u64 {
    word >> COUNT_BITS
}

#[inline]
const fn count_of(word: u64) -> u64 {
    word & COUNT_MASK
}

/// `a` is a later epoch than `b` (modulo 2^40).
#[inline]
const fn later(a: u64, b: u64) -> bool {
    let d = a.wrapping_sub(b) & EPOCH_MASK;
    d != 0 && d < (1 << 39)
}

/// Division by a constant without a `div` instruction (tens of cycles on
/// the hot path): a multiply by the precomputed reciprocal, then at most two
/// corrections.
#[derive(Clone, Copy, Debug)]
struct Divider {
    d: u64,
    magic: u64,
}

impl Divider {
    fn new(d: u64) -> Self {
        debug_assert!(d >= 1);
        Divider {
            d,
            magic: u64::MAX / d,
        }
    }

    /// `x / d` for `x < 2^63`.
    #[inline]
    fn div(self, x: u64) -> u64 {
        // `magic <= 2^64 / d`, so `q <= x / d`, short by at most 2.
        let mut q = ((u128::from(x) * u128::from(self.magic)) >> 64) as u64;
        while (q + 1).saturating_mul(self.d) <= x {
            q += 1;
        }
        q
    }

    /// `x % d` for `x < 2^63`.
    #[inline]
    fn rem(self, x: u64) -> u64 {
        x - self.div(x) * self.d
    }
}

/// How the counter estimates the requests in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterMode {
    /// `N` sub-window counters of width `W / N`; the estimate is the sum of
    /// the last `N` (the current one included).
    Slots(u32),
    /// Two fixed windows of width `W`: the previous window's count scaled by
    /// how much of it still overlaps `(t - W, t]`, plus the current count.
    TwoWindow,
}

/// An approximate sliding-window rate limiter in O(slots) memory, with the
/// same `check`/`check_n`/[`Admitted`]/[`Denied`] interface as
/// [`Limiter`](crate::Limiter).
///
/// A log costs 8 bytes per admission in the window; at a million requests
/// per window that is 8 MB per key. The counter costs `8 (N + 1)` bytes
/// whatever the limit (up to [`MAX_COUNTER_LIMIT`]), in exchange for
/// accuracy:
///
/// * **[`CounterMode::Slots`]** (`N` slots of width `W / N`): it admits a
///   request iff the admissions counted in the current slot and the `N - 1`
///   before it, plus the request, are at most `limit`. So any `N`
///   consecutive slots hold at most `limit` admissions. It never denies a
///   request that the exact log (on the same history) would admit; it may
///   admit more, because entries leave whole slots at a time: any window
///   `(t - W, t]` holds at most `limit` plus what the one slot it only
///   partly covers holds. Decisions differ from the exact rule only for
///   requests within one slot width of an expiry (property-tested).
///   `retry_after` is the time until the oldest non-empty slot leaves the
///   window (when the count next drops; it may take longer to fit `n`).
/// * **[`CounterMode::TwoWindow`]** (the estimate large CDNs use): previous
///   window's count × (the fraction of it still inside `(t - W, t]`) + the
///   current window's count. It assumes the previous window's requests were
///   evenly spread, so it errs both ways; `retry_after` is when the estimate
///   next drops.
///
/// Measured against the exact rule on its own history, with Poisson traffic
/// at 1.5x the limit (L = 100; `tests/counter.rs`, 200,000 requests):
///
/// | mode | decisions that differ | admitted vs exact log | fullest window (limit 100) |
/// |---|---|---|---|
/// | `Slots(1)` (fixed window) | 33.3% (all over) | +1.9% | 155 |
/// | `Slots(10)` | 29.9% (all over) | +1.5% | 112 |
/// | `Slots(60)` | 15.9% (all over) | +0.6% | 105 |
/// | `TwoWindow` | 29.9% (8% over, 21% under) | +0.2% | 109 |
///
/// (At 1.5x load every decision sits at the edge of a full window, which is
/// the worst case for the error rate; under the limit both always agree.)
///
/// Lock-free: one atomic word holds the current slot's epoch and count, and
/// an admission is one compare-and-swap on it; denials only load.
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
    /// `epoch << 24 | count` of the current slot: every admission CASes it.
    head: CachePadded<AtomicU64>,
    /// Past slots, `epoch << 24 | count`, at `epoch mod N`.
    archive: Box<[AtomicU64]>,
    limit: u32,
    window: u64,
    width: u64,
    by_width: Divider,
    by_slots: Divider,
    mode: CounterMode,
    clock: C,
}

impl SlidingCounter<QuantaClock> {
    /// A counter with `slots` sub-windows on the default clock.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] if `limit` is 0 or above [`MAX_COUNTER_LIMIT`], the
    /// window is zero or too long, `slots` is 0, above [`MAX_SLOTS`] or
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

    fn build(
        limit: u32,
        window: Duration,
        mode: CounterMode,
        clock: C,
    ) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        if limit > MAX_COUNTER_LIMIT {
            return Err(ConfigError::LimitTooLarge {
                limit,
                max: MAX_COUNTER_LIMIT,
            });
        }
        let window_ns = config::window_nanos(window)?;
        let (width, archived) = match mode {
            CounterMode::Slots(0) => return Err(ConfigError::ZeroSlots),
            CounterMode::Slots(n) => {
                let max = MAX_SLOTS.min(u32::try_from(window_ns).unwrap_or(u32::MAX));
                if n > max {
                    return Err(ConfigError::TooManySlots { slots: n, max });
                }
                (window_ns.div_ceil(u64::from(n)), n as usize)
            }
            CounterMode::TwoWindow => (window_ns, 1),
        };
        Ok(SlidingCounter {
            head: CachePadded::new(AtomicU64::new(0)),
            archive: (0..archived).map(|_| AtomicU64::new(0)).collect(),
            limit,
            window: window_ns,
            width,
            by_width: Divider::new(width),
            by_slots: Divider::new(archived as u64),
            mode,
            clock,
        })
    }

    /// Checks one request now.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_secs(60), 6)?;
    /// assert!(counter.check().is_ok());
    /// assert!(counter.check().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn check(&self) -> Result<Admitted, Denied> {
        self.check_n_at(1, self.clock.now())
    }

    /// Checks `n` units now, all or nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(3, Duration::from_secs(60), 6)?;
    /// assert!(counter.check_n(2).is_ok());
    /// assert!(counter.check_n(2).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.check_n_at(n, self.clock.now())
    }

    /// Checks one request at `now` (clock nanoseconds).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.check_at(5).is_ok());
    /// // The admission counts in slot [0, 10): it leaves the window at 100.
    /// assert_eq!(counter.check_at(50).unwrap_err().retry_after_nanos(), 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.check_n_at(1, now)
    }

    /// Checks `n` units at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{DenyReason, ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.check_n_at(4, 0).is_ok());
    /// assert!(matches!(counter.check_n_at(5, 0).unwrap_err().reason(), DenyReason::ExceedsLimit { .. }));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        if n > self.limit {
            return Err(Denied::exceeds_limit(n, self.limit));
        }
        let limit = u64::from(self.limit);
        let n64 = u64::from(n);
        loop {
            // Acquire pairs with the Release head CASes: the archive written
            // before head moved to this epoch is visible below.
            let hw = self.head.load(Ordering::Acquire);
            let head_epoch = epoch_of(hw);
            // The one division of a check: the sub-window of `now`.
            let mut absolute = self.by_width.div(now.min(u64::MAX >> 1));
            let mut epoch = absolute & EPOCH_MASK;
            let mut at = now;
            if epoch != head_epoch && !later(epoch, head_epoch) {
                // A stale timestamp: count it in the newest slot (the clamp).
                epoch = head_epoch;
                at = at.max(self.slot_start(now, head_epoch));
                absolute = self.by_width.div(at.min(u64::MAX >> 1));
            }
            if epoch != head_epoch {
                self.advance(hw, epoch);
                continue;
            }
            let current = count_of(hw);
            let (used, retry_at) = self.estimate(current, epoch, absolute, at);
            if used + n64 > limit {
                return Err(Denied::rate_limited(
                    retry_at
                        .unwrap_or(at + self.width)
                        .saturating_sub(now)
                        .max(1),
                ));
            }
            if n == 0 {
                return Ok(Admitted {
                    at,
                    remaining: (limit - used) as u32,
                });
            }
            // The linearization point: nobody changed the current slot
            // since we read it. Release pairs with the Acquire load above.
            if self
                .head
                .compare_exchange(
                    hw,
                    pack(epoch, current + n64),
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Ok(Admitted {
                    at,
                    remaining: (limit - used - n64) as u32,
                });
            }
        }
    }

    /// The start time of sub-window `epoch`, a later one than `now`'s.
    fn slot_start(&self, now: u64, epoch: u64) -> u64 {
        let current = self.by_width.div(now.min(u64::MAX >> 1));
        let ahead = epoch.wrapping_sub(current & EPOCH_MASK) & EPOCH_MASK;
        current.saturating_add(ahead).saturating_mul(self.width)
    }

    /// Archives head's slot, then moves head to `epoch` (a later one).
    #[cold]
    fn advance(&self, hw: u64, epoch: u64) {
        let (old_epoch, count) = (epoch_of(hw), count_of(hw));
        let cell = &self.archive[self.by_slots.rem(old_epoch) as usize];
        // Archive first, so that whoever sees head at `epoch` sees the old
        // slot's count. Several threads may race: the count only grows for
        // one epoch, so keep the largest.
        let mut seen = cell.load(Ordering::Acquire);
        while epoch_of(seen) != old_epoch || count_of(seen) < count {
            // Release: the archived count happens-before the head CAS below,
            // which readers Acquire.
            match cell.compare_exchange(seen, hw, Ordering::Release, Ordering::Acquire) {
                Ok(_) => break,
                Err(now_there) => {
                    if epoch_of(now_there) != old_epoch && later(epoch_of(now_there), old_epoch) {
                        break; // a later lap already reused this cell
                    }
                    seen = now_there;
                }
            }
        }
        // Release: see above. Failure: someone admitted or advanced; retry.
        let _ =
            self.head
                .compare_exchange(hw, pack(epoch, 0), Ordering::Release, Ordering::Relaxed);
    }

    /// Admissions counted against a request at `at` in sub-window `epoch`,
    /// and when that count next drops (the oldest non-empty slot leaves).
    #[inline]
    fn estimate(&self, current: u64, epoch: u64, base: u64, at: u64) -> (u64, Option<u64>) {
        match self.mode {
            CounterMode::Slots(slots) => {
                let slots = u64::from(slots);
                let mut used = current;
                let mut oldest = (current > 0).then_some(0u64);
                // Walk the archive backwards from the current slot's cell.
                let mut cell = self.by_slots.rem(epoch) as usize;
                for back in 1..slots {
                    let e = epoch.wrapping_sub(back) & EPOCH_MASK;
                    cell = if cell == 0 {
                        slots as usize - 1
                    } else {
                        cell - 1
                    };
                    // Acquire: pairs with `advance`'s Release.
                    let word = self.archive[cell].load(Ordering::Acquire);
                    if epoch_of(word) == e && count_of(word) > 0 {
                        used += count_of(word);
                        oldest = Some(back);
                    }
                }
                // The oldest non-empty slot leaves the window at the end of
                // slot `epoch - back + slots - 1`.
                let retry_at = oldest.map(|back| (base - back.min(base) + slots) * self.width);
                (used, retry_at)
            }
            CounterMode::TwoWindow => {
                let prev_epoch = epoch.wrapping_sub(1) & EPOCH_MASK;
                // Acquire: pairs with `advance`'s Release.
                let word = self.archive[0].load(Ordering::Acquire);
                let previous = if epoch_of(word) == prev_epoch {
                    count_of(word)
                } else {
                    0
                };
                let start = base * self.width;
                let elapsed = at.saturating_sub(start);
                let left = self.window - elapsed.min(self.window);
                let weighted = (u128::from(previous) * u128::from(left))
                    .div_ceil(u128::from(self.window)) as u64;
                // The estimate next drops when the weighted part decays by
                // one, or when the window turns over.
                let retry_at = if previous > 0 {
                    let step = self.window.div_ceil(previous);
                    Some(at + step.min(start + self.width - at))
                } else {
                    Some(start + self.width)
                };
                (current + weighted, retry_at)
            }
        }
    }

    /// The limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(slidelog::SlidingCounter::new(9, Duration::from_secs(1), 3)?.limit(), 9);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The window.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(slidelog::SlidingCounter::new(9, Duration::from_secs(1), 3)?.window(), Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
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
        self.mode
    }

    /// Bytes this counter occupies: `8 (N + 1)` plus the padded header.
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

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    #[test]
    fn divider_is_exact() {
        for d in [1u64, 2, 3, 7, 10, 1000, 999_999_937, 1 << 40, (1 << 61) + 1] {
            let div = Divider::new(d);
            for x in [
                0u64,
                1,
                d - 1,
                d,
                d + 1,
                12_345_678_901,
                (1 << 62) - 1,
                (1 << 63) - 1,
            ] {
                assert_eq!(div.div(x), x / d, "{x} / {d}");
                assert_eq!(div.rem(x), x % d, "{x} % {d}");
            }
        }
    }

    #[test]
    fn epochs_compare_across_the_wrap() {
        assert!(later(1, 0));
        assert!(later(0, EPOCH_MASK));
        assert!(!later(5, 5));
        assert!(!later(0, 1));
        assert_eq!(epoch_of(pack(EPOCH_MASK + 3, 7)), 2);
        assert_eq!(count_of(pack(9, COUNT_MASK)), COUNT_MASK);
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for SlidingCounter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlidingCounter")
            .field("limit", &self.limit)
            .field("window", &self.window())
            .field("mode", &self.mode)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
