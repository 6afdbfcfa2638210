//! `CounterConfig`: a counter's validated configuration, its word codec and
//! its sub-window arithmetic (shared by every key of a keyed counter).

use std::time::Duration;

use super::{CounterMode, MAX_COUNTER_LIMIT, MAX_SLOTS};
use crate::config;
use crate::decision::Admitted;
use crate::error::ConfigError;
use crate::flaw::Flaw;

/// Division by a constant without a `div` instruction (tens of cycles on
/// the hot path): a multiply by the precomputed reciprocal, then at most two
/// corrections.
#[derive(Clone, Copy, Debug)]
pub(super) struct Divider {
    d: u64,
    magic: u64,
}

impl Divider {
    pub(super) fn new(d: u64) -> Self {
        debug_assert!(d >= 1);
        Divider {
            d,
            magic: u64::MAX / d,
        }
    }

    /// `x / d` for `x < 2^63`.
    #[inline]
    pub(super) fn div(self, x: u64) -> u64 {
        // `magic <= 2^64 / d`, so `q <= x / d`, short by at most 2.
        let mut q = ((u128::from(x) * u128::from(self.magic)) >> 64) as u64;
        while (q + 1).saturating_mul(self.d) <= x {
            q += 1;
        }
        q
    }

    /// `x % d` for `x < 2^63`.
    #[inline]
    pub(super) fn rem(self, x: u64) -> u64 {
        x - self.div(x) * self.d
    }
}

/// A counter's configuration, shared by every key of a keyed counter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CounterConfig {
    pub(super) limit: u32,
    pub(super) window: u64,
    /// `W / N` rounded down: the width of every slot when `N` divides `W`
    /// (`exact`); otherwise slots are `width` or `width + 1` ns wide.
    pub(super) width: u64,
    /// Slot boundaries fall on multiples of `width`. Otherwise slot `k`
    /// starts at `ceil(k W / N)`, so that `N` consecutive slots always span
    /// exactly `W` (rounded-up widths would span more, and the counter
    /// would deny what the exact log admits).
    pub(super) exact: bool,
    /// `N` (1 in the two-window mode, whose slot is the window).
    pub(super) per_window: u64,
    pub(super) by_width: Divider,
    pub(super) by_window: Divider,
    pub(super) by_slots: Divider,
    pub(super) mode: CounterMode,
    /// Archived sub-windows: `N`, or 1 for the two-window mode.
    pub(super) cells: usize,
    pub(super) count_bits: u32,
    pub(super) epoch_mask: u64,
    pub(super) flaw: Flaw,
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
    pub(super) fn flaw(&self) -> Flaw {
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
    pub(super) fn span(&self) -> u64 {
        match self.mode {
            CounterMode::Slots(n) => u64::from(n),
            CounterMode::TwoWindow => 2,
        }
    }

    #[inline]
    pub(super) fn pack(&self, epoch: u64, count: u64) -> u64 {
        ((epoch & self.epoch_mask) << self.count_bits) | count
    }

    #[inline]
    pub(super) fn epoch_of(&self, word: u64) -> u64 {
        word >> self.count_bits
    }

    #[inline]
    pub(super) fn count_of(&self, word: u64) -> u64 {
        word & ((1 << self.count_bits) - 1)
    }

    /// `a` is a later epoch than `b` (modulo the epoch field).
    #[inline]
    pub(super) fn later(&self, a: u64, b: u64) -> bool {
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
    pub(super) fn unwrap_epoch(&self, epoch: u64, bound: u64) -> u64 {
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
    pub(super) fn locate(&self, hw: u64, head: u64, now: u64) -> (u64, u64, u64) {
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
