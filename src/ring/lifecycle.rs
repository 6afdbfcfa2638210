//! A ring's life outside admission: what it holds (snapshots), a fresh
//! fill (restore), and closing it for eviction or reconfiguration
//! (docs/design.md §6, §7).

use super::RingRef;
use super::word::slot;
use crate::flaw::Flaw;
use crate::floor::Floor;
use crate::sync::atomic::Ordering;

impl<'a> RingRef<'a> {
    /// The effective times of the admissions that still count at `now` for
    /// some policy (those with `t + W + linger > now`), oldest first; `None`
    /// if the ring is closed. Exact when no admission races the read (one
    /// that does may or may not be included).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn admissions(&self, now: u64) -> Option<Vec<u64>> {
        let g = self.geometry;
        let (v, ()) = self.frontier(|_| Some(()))?;
        Some(
            self.log_from(v)
                .filter(|&t| t + g.window() + g.linger() > now)
                .collect(),
        )
    }

    /// The effective times of admissions `c - L .. c - 1` of view `v`, oldest
    /// first (they sit at positions `pos(c) + k`; slot `c` is read as the
    /// view read it), skipping slots never written.
    fn log_from(&self, v: super::view::View) -> impl Iterator<Item = u64> + 'a {
        let this = *self;
        let g = self.geometry;
        let first = v.s;
        (0..g.len())
            .map(move |k| match k {
                0 => first,
                k => this.load_slot(g.position_plus(v.pos, k)),
            })
            .map(slot::deadline)
            .filter(|&d| d != 0 && d != slot::deadline(slot::CLOSED))
            .map(move |d| d - g.window())
    }

    /// Whether the ring is closed (an answer that reads no slot, such as
    /// "more than the limit", must not come from a closed ring's
    /// policies). A close freezes `head` at the closed slot, so one look at
    /// the slot `head` names suffices; a ring that is not closed when read
    /// answers before any close.
    pub(crate) fn is_closed(&self) -> bool {
        let hw = self.load_head();
        self.load_slot(self.geometry.position(super::word::head::index(hw))) == slot::CLOSED
    }

    /// **The close for reconfiguration** (docs/design.md §6): freezes the
    /// log and hands it on. At a validated frontier (slot `c` unclaimed),
    /// calls `prepare` with the effective times of the `L` admissions the
    /// ring keeps (oldest first), then CASes slot `c` from the word the view
    /// read to [`slot::CLOSED`]. If that CAS succeeds, no admission landed
    /// between the view and the close (every admission claims slot `c`
    /// first, and a slot's word never repeats: deadlines grow by at least
    /// `W` per lap), so what `prepare` saw is exactly what the ring kept;
    /// otherwise an admission won and the loop reads again (lock-free: each
    /// retry means another caller's admission succeeded). `prepare` runs
    /// before the close, so whatever it publishes (the successor ring) is
    /// visible to anyone who sees the CLOSED word.
    ///
    /// `false` if the ring was already closed (for eviction) before this call
    /// closed it.
    pub(crate) fn close_into(&self, mut prepare: impl FnMut(&[u64])) -> bool {
        loop {
            let Some((v, ())) = self.frontier(|_| Some(())) else {
                return false;
            };
            let kept: Vec<u64> = self.log_from(v).collect();
            // A log read while an admission landed may be torn (a batch
            // committed at `c` after the view, its fill read past it): slot
            // `c` then no longer holds the view's word (the commit precedes
            // every fill, and a fill we read synchronises with it), so read
            // again rather than hand `prepare` a log out of order.
            if self.load_slot(v.pos) != v.s {
                continue;
            }
            prepare(&kept);
            if self.geometry.flaw() == Flaw::OpenMigration {
                return true;
            }
            // Release: `prepare`'s writes (the successor's publication)
            // happen-before whoever reads CLOSED with an Acquire slot load;
            // Relaxed on failure: we retry with a fresh view.
            if self
                .slot(v.pos)
                .compare_exchange(v.s, slot::CLOSED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Writes `times` (non-decreasing, at most `L` of them) as the
    /// admissions of this ring, which must be fresh (all zero) and not yet
    /// shared: admission `i` in slot `i`, `head` (and the frontier guess)
    /// at `times.len()`.
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
        // The frontier is at `head`: the first single finds it there.
        self.store_guess(index);
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
