//! A ring's life outside admission: what it holds (snapshots), a fresh
//! fill (restore), and closing it for eviction (docs/design.md §6, §7).

use super::RingRef;
use super::word::slot;
use crate::flaw::Flaw;
use crate::floor::Floor;
use crate::sync::atomic::Ordering;

impl<'a> RingRef<'a> {
    /// The effective times of the admissions that still count at `now` for
    /// some policy (those with `t + W + linger > now`), oldest first; empty
    /// if the ring is closed. Exact when no admission races the read (one
    /// that does may or may not be included).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn admissions(&self, now: u64) -> Vec<u64> {
        let g = self.geometry;
        let Some((v, ())) = self.frontier(|_| Some(())) else {
            return Vec::new();
        };
        // Admissions c - L .. c - 1 sit at positions pos(c) + k, oldest first.
        (0..g.len())
            .map(|k| slot::deadline(self.load_slot(g.position_plus(v.pos, k))))
            .filter(|&d| d != 0 && d != slot::deadline(slot::CLOSED) && d + g.linger() > now)
            .map(|d| d - g.window())
            .collect()
    }

    /// Writes `times` (non-decreasing, at most `L` of them) as the
    /// admissions of this ring, which must be fresh (all zero) and not yet
    /// shared: admission `i` in slot `i`, `head` at `times.len()`.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn fill_fresh(&self, times: &[u64]) {
        let g = self.geometry;
        debug_assert!(times.len() as u64 <= g.len());
        debug_assert!(times.windows(2).all(|w| w[0] <= w[1]));
        let mut index = 0;
        for &t in times {
            let word = slot::pack(g.clamp(t) + g.window(), g.stamp(index), false);
            // Relaxed: the ring is not shared yet; whoever receives it does
            // so through a synchronising handoff (the map's insertion, or
            // `&mut` access to the limiter).
            self.slot(g.position(index)).store(word, Ordering::Relaxed);
            index = g.advance(index, 1);
        }
        self.head.store(index, Ordering::Relaxed);
    }

    /// Closes the ring for eviction if its newest admission expired at least
    /// `margin` nanoseconds before `now`: raises `floor` to that admission's
    /// deadline (so no later keyed admission can overlap what is forgotten,
    /// see [`crate::floor`]), then CASes the slot at the frontier (still
    /// holding its previous-lap word) to [`slot::CLOSED`], which makes every
    /// concurrent or later admission on this ring fail. `Ok` if the ring is
    /// closed; otherwise `Err` with the earliest time it could be closed.
    pub(crate) fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> Result<(), u64> {
        let g = self.geometry;
        loop {
            let Some((v, ())) = self.frontier(|_| Some(())) else {
                return Ok(()); // already closed
            };
            // Deadlines grow along the log: the newest admission is c - 1.
            // With several policies it counts until the longest window has
            // passed over it (`linger` more); an empty ring (deadline 0) has
            // nothing that counts.
            let newest = match slot::deadline(v.p) {
                0 => 0,
                d => d + g.linger(),
            };
            let idle_at = newest.saturating_add(margin);
            if idle_at > now {
                return Err(idle_at);
            }
            if g.flaw() == Flaw::FakeClose {
                return Ok(());
            }
            // Before the close: whoever sees the ring closed sees the floor.
            if g.flaw() != Flaw::NoFloor {
                floor.raise(newest);
            }
            // Release: orders the CLOSED word after our snapshot and the
            // floor's raise, like any commit; Relaxed on failure (we retry
            // with fresh loads).
            if self
                .slot(v.pos)
                .compare_exchange(v.s, slot::CLOSED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
        }
    }
}
