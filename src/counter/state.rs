//! `CounterRef`: one counter state, wherever its words live, and the
//! protocol on it: admission by one CAS on head, archiving, the summary, the
//! estimate, when a denied request next fits, and closing for eviction.

use super::config::CounterConfig;
use super::{CLOSED, CounterMode};
use crate::decision::{Admitted, Denied};
use crate::flaw::Flaw;
use crate::floor::Floor;
use crate::sync::atomic::{AtomicU64, Ordering};

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
