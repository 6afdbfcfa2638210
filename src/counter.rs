//! [`SlidingCounter`]: the approximate sliding-window counter, for limits too
//! large for an exact log.

use core::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, QuantaClock};
use crate::config;
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::flaw::Flaw;
use crate::floor::Floor;
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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

/// Word codec: `epoch << count_bits | count`, with `count_bits` just wide
/// enough for `limit + 1` (so a count never reaches the all-ones field and
/// [`CLOSED`] is never a live word), and the epoch (the sub-window number
/// `t / width`) in the remaining 39 to 62 bits, compared with wrapping
/// arithmetic. Small limits leave room for long epochs: at L = 100 the epoch
/// has 57 bits. Counts are at most 24 bits ([`MAX_COUNTER_LIMIT`]).
const COUNT_BITS: u32 = 24;

/// A closed counter (a keyed counter being evicted): every check on it fails
/// and looks the key up again.
pub(crate) const CLOSED: u64 = u64::MAX;

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
/// per window that is 8 MB per key. The counter costs `8 (N + 3)` bytes
/// whatever the limit (up to [`MAX_COUNTER_LIMIT`]), in exchange for
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
    config: CounterConfig,
    clock: C,
}

/// A counter's configuration, shared by every key of a keyed counter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CounterConfig {
    limit: u32,
    window: u64,
    /// `W / N` rounded down: the width of every slot when `N` divides `W`
    /// (`exact`); otherwise slots are `width` or `width + 1` ns wide.
    width: u64,
    /// Slot boundaries fall on multiples of `width`. Otherwise slot `k`
    /// starts at `ceil(k W / N)`, so that `N` consecutive slots always span
    /// exactly `W` (with rounded-up widths they spanned more, and the
    /// counter denied what the exact log admits).
    exact: bool,
    /// `N` (1 in the two-window mode, whose slot is the window).
    per_window: u64,
    by_width: Divider,
    by_window: Divider,
    by_slots: Divider,
    mode: CounterMode,
    /// Archived sub-windows: `N`, or 1 for the two-window mode.
    cells: usize,
    count_bits: u32,
    epoch_mask: u64,
    flaw: Flaw,
}

impl CounterConfig {
    pub(crate) fn new(
        limit: u32,
        window: Duration,
        mode: CounterMode,
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
        let (width, cells) = match mode {
            CounterMode::Slots(0) => return Err(ConfigError::ZeroSlots),
            CounterMode::Slots(n) => {
                let max = MAX_SLOTS.min(u32::try_from(window_ns).unwrap_or(u32::MAX));
                if n > max {
                    return Err(ConfigError::TooManySlots { slots: n, max });
                }
                (window_ns / u64::from(n), n as usize)
            }
            CounterMode::TwoWindow => (window_ns, 1),
        };
        // Just wide enough for `limit + 1`: the all-ones count (and so
        // `CLOSED`) never occurs in a live word.
        let count_bits = u32::BITS - (limit + 1).leading_zeros();
        Ok(CounterConfig {
            limit,
            window: window_ns,
            width,
            exact: window_ns % width == 0 && window_ns / width == cells as u64,
            per_window: cells as u64,
            by_width: Divider::new(width),
            by_window: Divider::new(window_ns),
            by_slots: Divider::new(cells as u64),
            mode,
            cells,
            count_bits,
            epoch_mask: u64::MAX >> count_bits,
            flaw: Flaw::None,
        })
    }

    /// The protocol variant: always [`Flaw::None`] outside the model
    /// checker.
    #[inline]
    fn flaw(&self) -> Flaw {
        self.flaw.active()
    }

    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// The largest limit the count field holds: counts stay below the
    /// all-ones value (which marks `CLOSED`).
    pub(crate) fn max_limit(&self) -> u32 {
        ((1u64 << self.count_bits) - 2).min(u64::from(MAX_COUNTER_LIMIT)) as u32
    }

    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline]
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn mode(&self) -> CounterMode {
        self.mode
    }

    /// Words of state: head, head's absolute sub-window, the summary
    /// (slots mode), the archive.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn words(&self) -> usize {
        self.cells + 2 + usize::from(self.summarised())
    }

    /// Whether the state keeps a summary word: the slots mode, whose
    /// estimate otherwise reads all N slots (the two-window mode reads one).
    #[inline]
    pub(crate) fn summarised(&self) -> bool {
        matches!(self.mode, CounterMode::Slots(_))
    }

    /// How many sub-windows an admission counts in: `N`, or 2 (its own
    /// window and, weighted, the next).
    fn span(&self) -> u64 {
        match self.mode {
            CounterMode::Slots(n) => u64::from(n),
            CounterMode::TwoWindow => 2,
        }
    }

    #[inline]
    fn pack(&self, epoch: u64, count: u64) -> u64 {
        ((epoch & self.epoch_mask) << self.count_bits) | count
    }

    #[inline]
    fn epoch_of(&self, word: u64) -> u64 {
        word >> self.count_bits
    }

    #[inline]
    fn count_of(&self, word: u64) -> u64 {
        word & ((1 << self.count_bits) - 1)
    }

    /// `a` is a later epoch than `b` (modulo the epoch field).
    #[inline]
    fn later(&self, a: u64, b: u64) -> bool {
        let d = a.wrapping_sub(b) & self.epoch_mask;
        d != 0 && d <= self.epoch_mask >> 1
    }

    /// The absolute sub-window number of `t`: `floor(t N / W)`.
    #[inline]
    pub(crate) fn absolute(&self, t: u64) -> u64 {
        let t = t.min(u64::MAX >> 1);
        if self.exact {
            return self.by_width.div(t);
        }
        // t = q W + r: floor(t N / W) = q N + floor(r N / W), with r N in
        // u128 (r < W <= 2^61, N <= 2^16). q N <= t (as N <= W): no overflow.
        let q = self.by_window.div(t);
        let r = t - q * self.window;
        let part = u128::from(r) * u128::from(self.per_window) / u128::from(self.window);
        q * self.per_window + part as u64
    }

    /// When sub-window `k` begins: `ceil(k W / N)` (`k x width` when `N`
    /// divides `W`), saturating.
    #[inline]
    pub(crate) fn start(&self, k: u64) -> u64 {
        if self.exact {
            return k.saturating_mul(self.width);
        }
        if k >= 1 << 62 {
            return u64::MAX;
        }
        // k = q N + rk: ceil(k W / N) = q W + ceil(rk W / N).
        let q = self.by_slots.div(k);
        let rk = k - q * self.per_window;
        let part = (u128::from(rk) * u128::from(self.window)).div_ceil(u128::from(self.per_window));
        q.saturating_mul(self.window).saturating_add(part as u64)
    }

    /// A fresh state's head word at `now`: the current sub-window, empty.
    pub(crate) fn initial_head(&self, now: u64) -> u64 {
        self.pack(self.absolute(now), 0)
    }

    /// A fresh state's archive cell: empty, in a sub-window `N` before the
    /// current one. (An all-zero cell would hold epoch 0, which compares as
    /// *later* than every epoch in the upper half of the field just below
    /// its wrap; `merge` never replaces a later sub-window's word.)
    pub(crate) fn initial_cell(&self, now: u64) -> u64 {
        self.pack(self.absolute(now).wrapping_sub(self.per_window), 0)
    }

    /// The absolute sub-window whose epoch field is `epoch`: the latest one
    /// at or before `bound`, an absolute number at or after it (see
    /// `CounterRef::absolute`).
    #[inline]
    fn unwrap_epoch(&self, epoch: u64, bound: u64) -> u64 {
        let back = bound.wrapping_sub(epoch) & self.epoch_mask;
        bound
            .checked_sub(back)
            .unwrap_or_else(|| bound + (epoch.wrapping_sub(bound) & self.epoch_mask))
    }

    /// The sub-window a request at `now` counts in, given head word `hw`
    /// whose absolute sub-window is `head`: `(epoch field, absolute number,
    /// effective time)`. A stale timestamp (before head's sub-window) counts
    /// in head's sub-window, at its start (the clamp of docs/design.md §2).
    /// Absolute numbers, never wrapped epochs, decide which is later: a
    /// counter idle for any time reads as idle.
    #[inline]
    fn locate(&self, hw: u64, head: u64, now: u64) -> (u64, u64, u64) {
        let absolute = self.absolute(now);
        if absolute >= head {
            (absolute & self.epoch_mask, absolute, now)
        } else {
            (self.epoch_of(hw), head, now.max(self.start(head)))
        }
    }

    /// What a fresh state answers to `n <= limit` units at `now`.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn fresh(&self, n: u32, now: u64) -> Admitted {
        Admitted {
            at: now,
            remaining: self.limit - n,
            policy: 0,
        }
    }

    /// A lower bound on when a key admitted at or after `now` can become
    /// idle (before any margin).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn earliest_idle(&self, now: u64) -> u64 {
        now.saturating_add((self.span() - 1).saturating_mul(self.width))
    }
}

/// A borrowed counter state: its head word and its archive, wherever they
/// live (a padded header for [`SlidingCounter`], one allocation per key for
/// a keyed counter).
#[derive(Clone, Copy)]
pub(crate) struct CounterRef<'a> {
    pub(crate) config: &'a CounterConfig,
    /// The limit this call judges by, read once: the configuration's, or a
    /// reconfigured [`SlidingCounter`]'s current one (within the count
    /// field's width, see [`CounterConfig::max_limit`]).
    pub(crate) limit: u32,
    pub(crate) head: &'a AtomicU64,
    /// The absolute sub-window of the newest head word, or of a move to it
    /// under way: raised (`fetch_max`) **before** every head CAS that moves
    /// head to a new sub-window. So a reader that loads head and then this
    /// word sees a value at or after head's absolute sub-window (the raise
    /// happens-before the head CAS it acquired), normally equal to it, and
    /// unwraps head's epoch field to the latest absolute number at or before
    /// it. The epoch field alone wraps (2^39 sub-windows at the largest
    /// limit: 9 minutes of 1 ns slots), so an idle counter would otherwise
    /// read as one from the future. (While a move across more than the epoch
    /// range is under way, a reader may place head too late: it then counts
    /// head's old admissions as recent, a conservative answer.)
    pub(crate) absolute: &'a AtomicU64,
    /// Slots mode: `epoch << count_bits | sum`, the sum of the archived
    /// counts that are still in the window while head is in sub-window
    /// `epoch` (the N - 1 before it). Written, largest sum kept, before head
    /// moves to `epoch`, so a check in head's sub-window reads three words
    /// (head, its absolute number, the summary) instead of N. A summary for
    /// another sub-window is ignored.
    pub(crate) summary: Option<&'a AtomicU64>,
    pub(crate) archive: &'a [AtomicU64],
}

impl CounterRef<'_> {
    /// The absolute sub-window of head word `hw`, loaded just before.
    #[inline]
    fn head_absolute(&self, hw: u64) -> u64 {
        // Acquire: pairs with the Release raise (see `absolute`), though
        // the head load's Acquire already orders the raise before us.
        let bound = self.absolute.load(Ordering::Acquire);
        self.config.unwrap_epoch(self.config.epoch_of(hw), bound)
    }

    /// Checks `n <= limit` units asked for at `asked`, judged at
    /// `max(asked, floor)` (a keyed counter's eviction floor; 0 otherwise);
    /// `None` if the state was closed for eviction. `retry_after` counts
    /// from `asked`.
    pub(crate) fn check(&self, n: u32, asked: u64, floor: u64) -> Option<Result<Admitted, Denied>> {
        let cfg = self.config;
        let now = asked.max(floor);
        let limit = u64::from(self.limit);
        let n64 = u64::from(n);
        loop {
            // Acquire pairs with the Release head CASes: the archive written
            // before head moved to this epoch is visible below.
            let hw = self.head.load(Ordering::Acquire);
            if hw == CLOSED {
                return None;
            }
            let head = self.head_absolute(hw);
            let (epoch, absolute, at) = cfg.locate(hw, head, now);
            // The estimate reads head's sub-window as one of the past ones
            // when `now` is in a later one, so a denial (or `n == 0`) never
            // writes: head stays at the newest admission's sub-window, which
            // is also what eviction judges idleness by.
            let used = self.estimate(hw, head, epoch, absolute, at);
            if n == 0 {
                // Defined as for the log: admitted, records nothing. (The
                // two-window estimate can exceed the limit, e.g. for a stale
                // timestamp that counts the previous window in full.)
                return Some(Ok(Admitted {
                    at,
                    remaining: limit.saturating_sub(used) as u32,
                    policy: 0,
                }));
            }
            if used + n64 > limit {
                let retry_at = self.next_fit(hw, epoch, absolute, at, n64, limit);
                return Some(Err(Denied::rate_limited(
                    retry_at.saturating_sub(asked).max(1),
                )));
            }
            // In a new sub-window, head's count is archived first (whoever
            // then sees head in the new one sees the old count too), and the
            // same CAS below moves head and admits: the estimate above read
            // head's count as a past slot, exactly what the archive now holds.
            let new_slot = absolute != head;
            let late = cfg.flaw() == Flaw::ArchiveLate;
            if new_slot && !late {
                // `used` counted exactly the N - 1 slots before `epoch`
                // (head's among them): the summary for `epoch`.
                self.summarise(epoch, used, hw);
                self.archive(hw, head);
            }
            if new_slot {
                // Before the head CAS (see `absolute`). Release: with the
                // head CAS's Release, whoever acquires the new head sees it.
                self.absolute.fetch_max(absolute, Ordering::Release);
            }
            let current = if new_slot { 0 } else { cfg.count_of(hw) };
            let word = cfg.pack(epoch, current + n64);
            let admitted = Admitted {
                at,
                remaining: (limit - used - n64) as u32,
                policy: 0,
            };
            if cfg.flaw() == Flaw::LoadThenStore {
                // Broken on purpose (loom's negative control): a racing
                // admission between our load and this store is lost.
                self.head.store(word, Ordering::Release);
                return Some(Ok(admitted));
            }
            // The linearization point: nobody changed head since we read
            // it, so no admission and no move to another sub-window came in
            // between. Release pairs with the Acquire load above.
            if self
                .head
                .compare_exchange(hw, word, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                if new_slot && late {
                    // Broken on purpose (loom's negative control): between
                    // the CAS and this, readers miss the old count.
                    self.summarise(epoch, used, hw);
                    self.archive(hw, head);
                }
                return Some(Ok(admitted));
            }
        }
    }

    /// What [`check`](Self::check) would answer, recording nothing.
    pub(crate) fn peek(&self, n: u32, asked: u64, floor: u64) -> Option<Result<Admitted, Denied>> {
        let cfg = self.config;
        let now = asked.max(floor);
        // Acquire: as in `check`.
        let hw = self.head.load(Ordering::Acquire);
        if hw == CLOSED {
            return None;
        }
        let head = self.head_absolute(hw);
        let (epoch, absolute, at) = cfg.locate(hw, head, now);
        let used = self.estimate(hw, head, epoch, absolute, at);
        let (limit, n) = (u64::from(self.limit), u64::from(n));
        Some(if n > 0 && used + n > limit {
            let retry_at = self.next_fit(hw, epoch, absolute, at, n, limit);
            Err(Denied::rate_limited(retry_at.saturating_sub(asked).max(1)))
        } else {
            Ok(Admitted {
                at,
                remaining: limit.saturating_sub(used + n) as u32,
                policy: 0,
            })
        })
    }

    /// Archives the count of head word `hw`'s sub-window (absolute number
    /// `old_absolute`), before head moves to a later one.
    #[cold]
    fn archive(&self, hw: u64, old_absolute: u64) {
        let cfg = self.config;
        let (old_epoch, count) = (cfg.epoch_of(hw), cfg.count_of(hw));
        // Cells are indexed by the absolute number, so that consecutive
        // sub-windows use consecutive cells even where the epoch field wraps.
        let cell = &self.archive[cfg.by_slots.rem(old_absolute) as usize];
        self.merge(cell, old_epoch, count);
    }

    /// Writes the summary for sub-window `epoch`: `sum` archived counts in
    /// its window (computed from head word `hw`).
    fn summarise(&self, epoch: u64, sum: u64, hw: u64) {
        let Some(summary) = self.summary else { return };
        let cfg = self.config;
        let sum = if cfg.flaw() == Flaw::SummaryWithoutHead {
            // Broken on purpose (loom's negative control): leaves out the
            // count of the sub-window head is leaving.
            sum - cfg.count_of(hw).min(sum)
        } else {
            sum
        };
        if cfg.flaw() == Flaw::SummaryStore {
            // Broken on purpose (loom's negative control).
            summary.store(cfg.pack(epoch, sum), Ordering::Release);
            return;
        }
        self.merge(summary, epoch, sum);
    }

    /// Stores `epoch << count_bits | count` in `cell` unless it already holds
    /// `epoch` with at least `count`, or a later epoch. Several threads may
    /// race to write one sub-window's word, and a thread with a stale head
    /// word may come late with a smaller count: within a sub-window counts
    /// only grow, so the largest is the true one.
    ///
    /// A word that already holds a *later* sub-window is never replaced, on
    /// the first look as after a failed CAS: a mover that stalled after
    /// loading head, while others moved head two or more sub-windows on,
    /// would otherwise write an old sub-window's summary over the current
    /// one, or a stale count over a live archive cell.
    fn merge(&self, cell: &AtomicU64, epoch: u64, count: u64) {
        let cfg = self.config;
        let word = cfg.pack(epoch, count);
        let mut seen = cell.load(Ordering::Acquire);
        loop {
            let there = cfg.epoch_of(seen);
            if there == epoch {
                if cfg.count_of(seen) >= count {
                    return;
                }
            } else if cfg.later(there, epoch) && cfg.flaw() != Flaw::MergeOverLater {
                return; // a later sub-window already reused the word
            }
            // Release: the word happens-before our head CAS, which readers
            // Acquire. Acquire on failure: we judge the word that beat us.
            match cell.compare_exchange(seen, word, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return,
                Err(now_there) => seen = now_there,
            }
        }
    }

    /// **When a denied request next fits**: the earliest time, at or after
    /// `at` (in sub-window `epoch`, absolute `base`, given head word `hw`),
    /// at which the estimate (with nothing more admitted) leaves room for
    /// `n` units under `limit`. The estimate only falls as time passes, so
    /// a retry then is admitted and one nanosecond earlier is not (in the
    /// absence of other admissions). Off the hot path: denials only.
    ///
    /// Slots: the oldest slots leave one by one (slot `k` when slot
    /// `k + N` begins), until the counts that left cover the excess.
    /// Two windows: within the window, the previous count's weight
    /// `ceil(P (W - e) / W)` falls to the room `R` left by the current
    /// count once `P (W - e) <= R W`, i.e. at offset `e = W - floor(R W /
    /// P)`; if the current count alone leaves no room, the same with the
    /// current count as the next window's previous one.
    #[cold]
    #[inline(never)]
    fn next_fit(&self, hw: u64, epoch: u64, base: u64, at: u64, n: u64, limit: u64) -> u64 {
        let cfg = self.config;
        let count = |back: u64| self.count_back(hw, epoch, base, back);
        let fit = match cfg.mode {
            CounterMode::Slots(slots) => {
                let slots = u64::from(slots);
                let used: u64 = (0..slots).map(count).sum();
                // More than fits (at least one unit: a racing admission may
                // have moved the count between the two reads).
                let excess = (used + n).saturating_sub(limit).max(1);
                let mut left = 0;
                let mut fit = cfg.start(base.saturating_add(slots));
                for back in (0..slots).rev() {
                    left += count(back);
                    if left >= excess {
                        // Slot `base - back` leaves when `base - back + N`
                        // begins.
                        fit = cfg.start((base + slots).saturating_sub(back));
                        break;
                    }
                }
                fit
            }
            CounterMode::TwoWindow => {
                let (current, previous) = (count(0), count(1));
                let start = cfg.start(base);
                let window = u128::from(cfg.window);
                // The offset into a window at which a previous count `p`
                // weighs at most `room`.
                let offset = |p: u64, room: u64| -> u64 {
                    if p == 0 {
                        return 0;
                    }
                    let keep = (u128::from(room) * window / u128::from(p)).min(window);
                    (window - keep) as u64
                };
                if current + n <= limit {
                    start.saturating_add(offset(previous, limit - current - n))
                } else {
                    // The next window: the current count is its previous
                    // one (`n <= limit`, so it fits by that window's end).
                    start
                        .saturating_add(cfg.window)
                        .saturating_add(offset(current, limit.saturating_sub(n)))
                }
            }
        };
        // Later than `at` (the estimate at `at` did not fit).
        fit.max(at.saturating_add(1))
    }

    /// The count of sub-window `base - back` as a request in sub-window
    /// `epoch` (absolute `base`) reads it, for `back` below the span:
    /// head's from `hw`, the others from the archive.
    fn count_back(&self, hw: u64, epoch: u64, base: u64, back: u64) -> u64 {
        let cfg = self.config;
        let e = epoch.wrapping_sub(back) & cfg.epoch_mask;
        if e == cfg.epoch_of(hw) {
            return cfg.count_of(hw);
        }
        // Cells by absolute number (see `archive`), counted back from
        // `base`'s without going below 0.
        let back_cells = (back % cfg.per_window) as usize;
        let cell = (cfg.by_slots.rem(base) as usize + cfg.cells - back_cells) % cfg.cells;
        // Acquire: pairs with `merge`'s Release.
        let word = self.archive[cell].load(Ordering::Acquire);
        if cfg.epoch_of(word) == e {
            cfg.count_of(word)
        } else {
            0
        }
    }

    /// Admissions counted against a request at `at` in sub-window `epoch`
    /// (absolute number `base`), given head word `hw` (at `epoch` or, for a
    /// peek, earlier).
    ///
    /// In head's own sub-window the summary gives the count in two loads.
    #[inline]
    fn estimate(&self, hw: u64, head: u64, epoch: u64, base: u64, at: u64) -> u64 {
        let cfg = self.config;
        if base >= head.saturating_add(cfg.span()) {
            // Head's sub-window, the newest with admissions, has left the
            // window of `base` (by absolute numbers: however long the
            // counter was idle), and every archived one with it.
            return 0;
        }
        let (head_epoch, head_count) = (cfg.epoch_of(hw), cfg.count_of(hw));
        if let Some(summary) = self.summary
            && epoch == head_epoch
        {
            // Acquire: pairs with `merge`'s Release (before head moved
            // to this sub-window, which our head load acquired).
            let word = summary.load(Ordering::Acquire);
            if cfg.epoch_of(word) == epoch {
                return head_count + cfg.count_of(word);
            }
        }
        self.scan(hw, epoch, base, at)
    }

    /// [`estimate`](Self::estimate) by reading every slot in the window.
    fn scan(&self, hw: u64, epoch: u64, base: u64, at: u64) -> u64 {
        let cfg = self.config;
        let (head_epoch, head_count) = (cfg.epoch_of(hw), cfg.count_of(hw));
        // The count of sub-window `e` (archive cell `cell`).
        let count = |e: u64, cell: usize| {
            if e == head_epoch {
                return head_count;
            }
            // Acquire: pairs with `merge`'s Release.
            let word = self.archive[cell].load(Ordering::Acquire);
            if cfg.epoch_of(word) == e {
                cfg.count_of(word)
            } else {
                0
            }
        };
        match cfg.mode {
            CounterMode::Slots(slots) => {
                let mut used = 0;
                // Walk the archive backwards from the current slot's cell.
                let mut cell = cfg.by_slots.rem(base) as usize;
                for back in 0..u64::from(slots) {
                    if back > 0 {
                        cell = if cell == 0 { cfg.cells - 1 } else { cell - 1 };
                    }
                    used += count(epoch.wrapping_sub(back) & cfg.epoch_mask, cell);
                }
                used
            }
            CounterMode::TwoWindow => {
                let previous = count(epoch.wrapping_sub(1) & cfg.epoch_mask, 0);
                let current = if head_epoch == epoch { head_count } else { 0 };
                let elapsed = at.saturating_sub(cfg.start(base));
                let left = cfg.window - elapsed.min(cfg.window);
                let weighted = (u128::from(previous) * u128::from(left))
                    .div_ceil(u128::from(cfg.window)) as u64;
                current + weighted
            }
        }
    }

    /// Closes the state for eviction if every admission it holds left the
    /// window at least `margin` nanoseconds before `now`: raises `floor` to
    /// the end of the newest admission's counted span (so that no later
    /// keyed admission counts in a sub-window the evicted state counted in,
    /// see [`crate::floor`]), then CASes head to [`CLOSED`], which makes
    /// every concurrent or later admission on it fail (they all CAS head).
    /// `Ok` if closed; otherwise `Err` with the earliest time it could be
    /// closed.
    pub(crate) fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> Result<(), u64> {
        let cfg = self.config;
        loop {
            // Acquire: as in `check`.
            let hw = self.head.load(Ordering::Acquire);
            if hw == CLOSED {
                return Ok(());
            }
            // Archived sub-windows are older than head's: all of them have
            // left once head's has.
            let counted_until = cfg.start(self.head_absolute(hw).saturating_add(cfg.span()));
            let idle_at = counted_until.saturating_add(margin);
            if idle_at > now {
                return Err(idle_at);
            }
            if cfg.flaw() == Flaw::FakeClose {
                return Ok(());
            }
            // Before the close: whoever sees the state closed sees the floor.
            if cfg.flaw() != Flaw::NoFloor {
                floor.raise(counted_until);
            }
            // Release/Relaxed: as for the head CAS in `check` (the Release
            // also publishes the floor's raise); on failure head changed (an
            // admission, perhaps in a new sub-window) and we look again.
            if self
                .head
                .compare_exchange(hw, CLOSED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
        }
    }
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
            config,
            clock,
        })
    }

    #[inline]
    fn state(&self, limit: u32) -> CounterRef<'_> {
        CounterRef {
            config: &self.config,
            limit,
            head: &self.head[0],
            absolute: &self.head[1],
            summary: self.config.summarised().then_some(&self.summary),
            archive: &self.archive,
        }
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
    #[must_use = "a denied request must not go ahead: use the result"]
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
    #[must_use = "a denied request must not go ahead: use the result"]
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
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.check_n_at(1, now)
    }

    /// Admits one request now or denies it: [`check`](Self::check)'s
    /// decision, for callers that do not read `remaining` (the same API as
    /// [`Limiter::admit`](crate::Limiter::admit); the counter's count costs
    /// nothing extra, so this is `check` without its result).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_secs(60), 6)?;
    /// assert!(counter.admit().is_ok());
    /// assert!(counter.admit().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit(&self) -> Result<(), Denied> {
        self.admit_at(self.clock.now())
    }

    /// [`admit`](Self::admit) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.admit_at(5).is_ok());
    /// assert_eq!(counter.admit_at(50).unwrap_err().retry_after_nanos(), 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_at(&self, now: u64) -> Result<(), Denied> {
        self.check_n_at(1, now).map(|_| ())
    }

    /// Admits `n` units now, all or none: [`check_n`](Self::check_n)'s
    /// decision (the same API as [`Limiter::admit_n`](crate::Limiter::admit_n);
    /// here `check_n` without its result).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(5, Duration::from_secs(60), 6)?;
    /// assert!(counter.admit_n(4).is_ok());
    /// assert!(counter.admit_n(2).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n(&self, n: u32) -> Result<(), Denied> {
        self.admit_n_at(n, self.clock.now())
    }

    /// [`admit_n`](Self::admit_n) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.admit_n_at(4, 5).is_ok());
    /// assert!(counter.admit_n_at(1, 50).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n_at(&self, n: u32, now: u64) -> Result<(), Denied> {
        self.check_n_at(n, now).map(|_| ())
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
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let limit = self.current_limit();
        if n > limit {
            return Err(Denied::exceeds_limit(n, limit));
        }
        self.state(limit)
            .check(n, now, 0)
            .expect("a SlidingCounter is never closed")
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// `remaining` next grows (the IETF `RateLimit` field's `t`; see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)),
    /// found by a dry run of `remaining + 1` units right after the check.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::SlidingCounter;
    /// let counter = SlidingCounter::new(10, Duration::from_secs(1), 10)?;
    /// let (admitted, grows) = counter.check_n_with_growth(10).unwrap();
    /// assert_eq!(admitted.remaining(), 0);
    /// assert!(grows > Duration::ZERO && grows <= Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth(&self, n: u32) -> Result<(Admitted, Duration), Denied> {
        self.check_n_with_growth_at(n, self.clock.now())
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(2, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// let (admitted, grows) = counter.check_n_with_growth_at(2, 30)?;
    /// assert_eq!((admitted.remaining(), grows), (0, counter.peek_n_at(1, 30).unwrap_err().retry_after()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        self.check_growth_judged(n, now).0
    }

    /// [`check_n_with_growth_at`](Self::check_n_with_growth_at), and the
    /// limit it judged by (the tower layer names it).
    pub(crate) fn check_growth_judged(
        &self,
        n: u32,
        now: u64,
    ) -> (Result<(Admitted, Duration), Denied>, u32) {
        // One limit for the check and its dry run: a reconfiguration
        // between the two would give the admission another limit's `t`.
        let limit = self.current_limit();
        if n > limit {
            return (Err(Denied::exceeds_limit(n, limit)), limit);
        }
        let state = self.state(limit);
        let admitted = match state
            .check(n, now, 0)
            .expect("a SlidingCounter is never closed")
        {
            Ok(admitted) => admitted,
            Err(denied) => return (Err(denied), limit),
        };
        let grows = crate::decision::growth_by_dry_run(&admitted, |more| {
            (more <= limit).then(|| state.peek(more, now, 0)).flatten()
        });
        (Ok((admitted, grows)), limit)
    }

    /// The limit the counter was built with.
    #[cfg(feature = "tower")]
    pub(crate) fn built_limit(&self) -> u32 {
        self.config.limit()
    }

    /// What [`check_n_at`](Self::check_n_at) would answer, recording
    /// nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(2, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert_eq!(counter.peek_n_at(2, 0).unwrap().remaining(), 0);
    /// counter.check_n_at(2, 0).unwrap();
    /// assert_eq!(counter.peek_n_at(1, 30).unwrap_err().retry_after_nanos(), 70);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        self.peek_inner(n, now)
    }

    /// What [`check`](Self::check) would answer now, recording nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_secs(1), 10, ManualClock::new())?;
    /// assert!(counter.peek().is_ok());
    /// counter.check().unwrap();
    /// assert!(counter.peek().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek(&self) -> Result<Admitted, Denied> {
        self.peek_inner(1, self.clock.now())
    }

    /// What [`check_n`](Self::check_n) would answer now, recording nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_secs(1), 10, ManualClock::new())?;
    /// assert_eq!(counter.peek_n(3).unwrap().remaining(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.peek_inner(n, self.clock.now())
    }

    fn peek_inner(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let limit = self.current_limit();
        if n > limit {
            return Err(Denied::exceeds_limit(n, limit));
        }
        self.state(limit)
            .peek(n, now, 0)
            .expect("a SlidingCounter is never closed")
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
    fn current_limit(&self) -> u32 {
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
        Ok(())
    }

    /// Changes with every [`reconfigure`](Self::reconfigure) to a new limit
    /// (it is the limit): a cache of the policies is current while this is
    /// unchanged.
    pub fn generation(&self) -> u64 {
        u64::from(self.current_limit())
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

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    /// A counter state of `limit` per `window` ns in `slots` slots, fresh at
    /// 0, as a keyed counter holds one per key.
    fn state(limit: u32, window: u64, slots: u32) -> (CounterConfig, Vec<AtomicU64>) {
        let cfg = CounterConfig::new(
            limit,
            Duration::from_nanos(window),
            CounterMode::Slots(slots),
        )
        .unwrap();
        let words = (0..cfg.words())
            .map(|i| {
                AtomicU64::new(match i {
                    0 | 2 => cfg.initial_head(0),
                    1 => cfg.absolute(0),
                    _ => cfg.initial_cell(0),
                })
            })
            .collect();
        (cfg, words)
    }

    /// `[head, absolute, summary, archive...]`, as a keyed counter lays
    /// them out.
    fn view<'a>(cfg: &'a CounterConfig, words: &'a [AtomicU64]) -> CounterRef<'a> {
        CounterRef {
            config: cfg,
            limit: cfg.limit,
            head: &words[0],
            absolute: &words[1],
            summary: Some(&words[2]),
            archive: &words[3..],
        }
    }

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
        let cfg = CounterConfig::new(100, Duration::from_secs(1), CounterMode::Slots(10)).unwrap();
        // 101 needs 7 bits; the epoch has the other 57.
        assert_eq!(cfg.count_bits, 7);
        assert_eq!(cfg.epoch_mask, (1 << 57) - 1);
        assert!(cfg.later(1, 0));
        assert!(cfg.later(0, cfg.epoch_mask));
        assert!(!cfg.later(5, 5));
        assert!(!cfg.later(0, 1));
        assert_eq!(cfg.epoch_of(cfg.pack(cfg.epoch_mask + 3, 7)), 2);
        assert_eq!(cfg.count_of(cfg.pack(9, 100)), 100);
        // The largest limit still leaves a 39-bit epoch, and never packs to
        // the closed word.
        let big = CounterConfig::new(
            MAX_COUNTER_LIMIT,
            Duration::from_secs(1),
            CounterMode::TwoWindow,
        )
        .unwrap();
        assert_eq!(big.count_bits, 25);
        assert_ne!(
            big.pack(big.epoch_mask, u64::from(MAX_COUNTER_LIMIT)),
            CLOSED
        );
    }

    /// Across the wrap of the epoch field (at 2^62 ns for 1 ns slots and a
    /// 2-bit count; 2^62 is not a multiple of 3 slots), consecutive slots
    /// still use consecutive archive cells: any 3 consecutive slots hold at
    /// most `limit`, and admissions go on.
    #[test]
    fn slots_hold_across_the_epoch_wrap() {
        let wrap = 1u64 << 62;
        let clock = crate::ManualClock::starting_at(wrap - 20);
        let counter = SlidingCounter::with_clock(3, Duration::from_nanos(3), 3, clock).unwrap();
        let mut admitted = Vec::new();
        for t in (wrap - 20)..(wrap + 20) {
            for _ in 0..2 {
                if counter.check_at(t).is_ok() {
                    admitted.push(t);
                }
            }
        }
        for start in (wrap - 20)..(wrap + 18) {
            let span = admitted
                .iter()
                .filter(|&&a| a >= start && a < start + 3)
                .count();
            assert!(span <= 3, "{span} admissions in slots {start}..+3");
        }
        // 40 slots of 1 ns, 3 per 3 slots: about 40 admissions, both sides.
        assert!(
            admitted.iter().filter(|&&a| a >= wrap).count() >= 12,
            "{admitted:?}"
        );
        assert!(
            admitted.iter().filter(|&&a| a < wrap).count() >= 12,
            "{admitted:?}"
        );
    }

    /// A counter created long after the clock's origin starts in the current
    /// sub-window (not at epoch 0, which a wrapped comparison could take for
    /// the future).
    #[test]
    fn a_counter_starts_in_its_current_sub_window() {
        let start = (1u64 << 62) + 12_345;
        let clock = crate::ManualClock::starting_at(start);
        let counter = SlidingCounter::with_clock(2, Duration::from_nanos(10), 10, clock).unwrap();
        assert_eq!(counter.check().unwrap().at(), start);
        assert_eq!(counter.check().unwrap().remaining(), 0);
        assert_eq!(counter.check().unwrap_err().retry_after_nanos(), 10);
    }

    /// A denial (and `n == 0`) only loads, even in a later sub-window: head
    /// stays at the newest admission, which eviction judges idleness by.
    #[test]
    fn denials_and_dry_checks_never_write() {
        let (cfg, words) = state(1, 100, 10);
        let state = view(&cfg, &words);
        state.check(1, 5, 0).unwrap().unwrap();
        let snapshot = |words: &[AtomicU64]| -> Vec<u64> {
            words.iter().map(|w| w.load(Ordering::Relaxed)).collect()
        };
        let before = snapshot(&words);
        assert_eq!(
            state
                .check(1, 55, 0)
                .unwrap()
                .unwrap_err()
                .retry_after_nanos(),
            45
        );
        assert_eq!(state.check(0, 77, 0).unwrap().unwrap().remaining(), 0);
        assert_eq!(
            state
                .peek(1, 99, 0)
                .unwrap()
                .unwrap_err()
                .retry_after_nanos(),
            1
        );
        assert_eq!(snapshot(&words), before, "nothing written");
        // The next admission moves head, archives the old slot (cell 0) and
        // writes the new slot's summary (1 archived admission in its window).
        assert!(state.check(0, 100, 0).unwrap().is_ok());
        assert_eq!(snapshot(&words), before, "n = 0 writes nothing either");
        assert!(state.check(1, 100, 0).unwrap().is_ok());
        assert_ne!(words[0].load(Ordering::Relaxed), before[0]);
        assert_eq!(words[3].load(Ordering::Relaxed), before[0]);
        assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(10, 0));
    }

    /// The summary holds the archived counts in head's window, so checks in
    /// head's slot read two words; `retry_after` still names the oldest slot.
    #[test]
    fn the_summary_counts_the_window_behind_head() {
        let (cfg, words) = state(3, 100, 10);
        let state = view(&cfg, &words);
        for t in [5, 15, 25] {
            assert!(state.check(1, t, 0).unwrap().is_ok());
        }
        // Head in slot 2 with 1; slots 0 and 1 summarised.
        assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(2, 2));
        let denied = state.check(1, 26, 0).unwrap().unwrap_err();
        assert_eq!(denied.retry_after_nanos(), 74, "slot [0, 10) leaves at 100");
        assert_eq!(state.check(0, 29, 0).unwrap().unwrap().remaining(), 0);
        // A stale summary (another sub-window's) is ignored: same answers.
        words[2].store(cfg.pack(7, 0), Ordering::Relaxed);
        assert_eq!(state.check(1, 26, 0).unwrap().unwrap_err(), denied);
        assert_eq!(state.check(0, 29, 0).unwrap().unwrap().remaining(), 0);
        // At 100 slot 0 has left: admitted into slot 10, whose window holds
        // slots 1 and 2.
        assert_eq!(state.check(1, 100, 0).unwrap().unwrap().remaining(), 0);
        assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(10, 2));
    }

    #[test]
    fn close_waits_for_every_slot_to_leave() {
        let (cfg, words) = state(5, 100, 10);
        let state = view(&cfg, &words);
        state.check(1, 35, 0).unwrap().unwrap(); // slot [30, 40) leaves at 130
        assert_eq!(state.close_if_idle(129, 0, &Floor::new()), Err(130));
        assert_eq!(state.close_if_idle(140, 20, &Floor::new()), Err(150));
        assert_eq!(state.close_if_idle(150, 20, &Floor::new()), Ok(()));
        assert!(state.check(1, 150, 0).is_none());
        assert!(state.peek(1, 150, 0).is_none());
        assert_eq!(state.close_if_idle(150, 20, &Floor::new()), Ok(()));
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
