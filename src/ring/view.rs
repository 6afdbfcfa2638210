//! The seqlock view of a ring and the bookkeeping every path shares:
//! reading a consistent view at the frontier, helping a half-done admission
//! along, moving `head`, filling a batch, and the one commit of a single.

use super::RingRef;
use super::word::{head, slot};
use crate::flaw::Flaw;
use crate::sync::atomic::{AtomicU64, Ordering};

/// A consistent view of the ring at index `c`: `head` did not move while
/// the slots were read (the seqlock), or — the fast path's view at the
/// frontier guess — the slots' stamps, read before `head`, fix the frontier
/// (`RingRef::claimable`).
#[derive(Clone, Copy)]
pub(super) struct View {
    /// The head word.
    pub(super) hw: u64,
    /// The index read: `index(hw)`, or for a single that followed the
    /// frontier guess, up to `B` past it (`RingRef::claimable`).
    pub(super) c: u64,
    /// Position of `c`.
    pub(super) pos: usize,
    /// The stamp admission `c` writes.
    pub(super) stamp: u64,
    /// Slot `c`: admission `c - L`'s word, or already claimed for `c`.
    pub(super) s: u64,
    /// Slot `c - 1`: the newest committed admission.
    pub(super) p: u64,
}

impl<'a> RingRef<'a> {
    /// Loads `head` to start a view.
    ///
    /// **Orderings of a view** (argued once; every view load points here).
    /// `head` is loaded with Acquire, pairing with the Release head CASes
    /// (advance, help, announce, fill): every slot write that let `head`
    /// reach the value read is visible to the slot loads that follow. Slot
    /// loads are Acquire: they pair with the Release slot CASes (a reader
    /// that sees an admission's word sees everything its admitter saw), and
    /// they keep the closing re-read of `head` ([`revalidate`]) below them.
    ///
    /// [`revalidate`]: Self::revalidate
    #[inline(always)]
    pub(super) fn load_head(&self) -> u64 {
        // Acquire: see above.
        self.head.load(Ordering::Acquire)
    }

    /// Loads the slot at `pos` (Acquire: see [`load_head`](Self::load_head)).
    #[inline(always)]
    pub(super) fn load_slot(&self, pos: usize) -> u64 {
        self.slot(pos).load(Ordering::Acquire)
    }

    /// **The seqlock's closing read**: whether `head` still holds `hw` after
    /// the slots of a view were read, so that no slot read belongs to a
    /// later lap than `hw`'s (a reader that slept across a lap never judges
    /// by the wrong slot).
    ///
    /// Relaxed suffices: the slot loads before it are Acquire, so this load
    /// cannot move above them; and if one of them saw a write made after
    /// `head` passed `hw`, that head write happens-before this read, which
    /// then cannot return `hw` (write-read coherence).
    #[inline(always)]
    pub(super) fn revalidate(&self, hw: u64) -> bool {
        self.geometry.flaw() == Flaw::NoRevalidate || self.head.load(Ordering::Relaxed) == hw
    }

    /// Reads the view at `head` (word `hw`, index `c`): slot `c - 1`, then
    /// slot `c`, not yet re-validated (the caller calls
    /// [`revalidate`](Self::revalidate) after whatever else it reads). At
    /// `head` slot `c - 1` is committed and stays so until `c` is claimed.
    ///
    /// With `L == 1` slot `c - 1` is slot `c`: the first load is discarded
    /// (two loads could see two different words, e.g. unclaimed then
    /// CLOSED, under one head). The position before is taken from the
    /// slice's length `L`, and chosen with conditional moves, not branches.
    #[inline(always)]
    pub(super) fn read_view(&self, hw: u64) -> View {
        let g = self.geometry;
        let c = head::index(hw);
        let pos = g.position(c);
        debug_assert_eq!(self.slots.len(), g.limit() as usize);
        let before = pos.checked_sub(1).unwrap_or(self.slots.len() - 1);
        let p = self.load_slot(before);
        let s = self.load_slot(pos);
        View {
            hw,
            c,
            pos,
            stamp: g.stamp(c),
            s,
            p: if before == pos { s } else { p },
        }
    }

    /// Whether slot `index` read `word` already **claimed** for `index`
    /// ([`slot::claimed_by`]): an admission to pass (the lazy-head scan) or
    /// to help along (`head` still at it) before judging.
    #[inline(always)]
    pub(super) fn taken(&self, word: u64, index: u64) -> bool {
        let g = self.geometry;
        g.flaw() != Flaw::NoHelp && g.claimed(word, index)
    }

    /// **Past the frontier**: whether `word`, read from the slot of `index`
    /// (0 < `index - c` < L) in a view whose slot `c` read unclaimed, shows
    /// the view torn. Such a slot must hold its previous lap's word: one
    /// already holding its own index's word was claimed or filled after we
    /// read slot `c` (singles claim slots `c, c + 1, ...` behind a lazy
    /// head, and a batch fills `c + 1, ...` under its announcement, so the
    /// re-validation of `head` cannot see either), and CLOSED stands only at
    /// the frontier. Retrying reads slot `c` claimed, and the caller helps.
    #[inline(always)]
    pub(super) fn torn_past_frontier(&self, word: u64, index: u64) -> bool {
        let g = self.geometry;
        g.flaw() != Flaw::TornWeighted && (word == slot::CLOSED || g.claimed(word, index))
    }

    /// A validated view with `head` at the frontier (slot `c` unclaimed,
    /// half-done admissions helped along), and what `more` read in it.
    /// `None` if the ring is closed.
    ///
    /// Each attempt loads `head` (word `hw`), reads slot `c - 1` and slot
    /// `c` ([`read_view`](Self::read_view)), then whatever `more` reads (the
    /// slots a weighted request or a policy needs; `None` for a torn view),
    /// then re-validates `head` ([`revalidate`](Self::revalidate)); a torn
    /// view starts again.
    #[inline(always)]
    pub(super) fn frontier<T>(
        &self,
        mut more: impl FnMut(&View) -> Option<T>,
    ) -> Option<(View, T)> {
        loop {
            let hw = self.load_head();
            // `more` is called here, not handed on as `&mut` (whose
            // `FnOnce` shim stays out of line, with the view in memory).
            let view = self.read_view(hw);
            let Some(extra) = more(&view) else {
                continue;
            };
            if !self.revalidate(hw) {
                continue;
            }
            if view.s == slot::CLOSED {
                return None;
            }
            if self.taken(view.s, view.c) {
                self.help(view.hw, view.c, view.pos, view.s);
                continue;
            }
            return Some((view, extra));
        }
    }

    /// **The commit of a single unit**: CAS of slot `pos` from `expected`
    /// (the previous lap's word) to `word`. `Err` holds the word that beat
    /// us.
    ///
    /// Release pairs with the Acquire slot loads of readers: the head value
    /// we validated, and every slot we read, happen-before anyone who sees
    /// this word. Acquire on failure, as any slot load: a caller may scan on
    /// from the word that beat us.
    #[inline(always)]
    pub(super) fn claim(&self, pos: usize, expected: u64, word: u64) -> Result<(), u64> {
        self.claim_in(self.slot(pos), expected, word)
    }

    /// [`claim`](Self::claim) on a slot already at hand (the fast path's,
    /// whose position was checked once, when the guess led to it).
    #[inline(always)]
    pub(super) fn claim_in(&self, slot: &AtomicU64, expected: u64, word: u64) -> Result<(), u64> {
        if self.geometry.flaw() == Flaw::LoadThenStore {
            // Acquire, as `load_slot`.
            let current = slot.load(Ordering::Acquire);
            if current != expected {
                return Err(current);
            }
            slot.store(word, Ordering::Release);
            return Ok(());
        }
        slot.compare_exchange(expected, word, Ordering::Release, Ordering::Acquire)
            .map(|_| ())
    }

    /// Slot `c` is claimed but `head` still says `c`: finish that admission's
    /// bookkeeping (fill a batch, advance head) so that nobody waits for it.
    /// (By value and out of line: the hot loop keeps its view in registers.)
    #[cold]
    #[inline(never)]
    pub(super) fn help(&self, hw: u64, c: u64, pos: usize, s: u64) {
        if slot::is_batch(s) {
            let n = head::pending(hw);
            debug_assert!(
                n >= 2,
                "a BATCH word is committed only under an announcement"
            );
            self.fill(hw, c, pos, n, slot::deadline(s));
        } else {
            self.advance_head(hw, c, c, 1);
        }
    }

    /// Moves `head` (word `hw`, index `c`) to `idx + n`, the index after an
    /// admission that is committed; also over an announcement made at `c`
    /// after we read `hw` (it lost slot `c`). Failing otherwise is fine:
    /// someone moved head on.
    #[inline]
    pub(super) fn advance_head(&self, hw: u64, c: u64, idx: u64, n: u64) {
        self.move_head(hw, c, self.geometry.advance(idx, n));
    }

    /// [`advance_head`](Self::advance_head) to index `next`, already
    /// computed.
    #[inline]
    pub(super) fn move_head(&self, mut hw: u64, c: u64, next: u64) {
        loop {
            // Release pairs with the Acquire head loads of readers: the
            // slots up to `idx` (committed by us, or seen by us with Acquire
            // loads) are visible to whoever sees the new head.
            match self
                .head
                .compare_exchange(hw, next, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                // The head now carries an announcement at `c`: retry over it.
                Err(current) if head::index(current) == c && current != hw => hw = current,
                Err(_) => return,
            }
        }
    }

    /// Writes deadline `d` into slots `c + 1 .. c + n` of the batch committed
    /// at `c`, then moves `head` from `announced` to `c + n`. Idempotent: any
    /// number of helpers may run it, however late.
    pub(super) fn fill(&self, announced: u64, c: u64, pos: usize, n: u64, d: u64) {
        let g = self.geometry;
        for k in 1..n {
            let at = g.position_plus(pos, k);
            let word = slot::pack(d, g.stamp(g.advance(c, k)), false);
            let mut current = self.load_slot(at);
            // The slot holds either admission (c + k - L), whose deadline is
            // <= d - W (it was expired at the batch's t_eff), or our fill
            // (deadline d), or — for a helper that arrives a lap late — a
            // later admission, whose deadline is >= d + W. Only the first
            // is ours to overwrite; deadlines never repeat, so no ABA.
            while current != slot::CLOSED && slot::deadline(current) < d {
                // Release/Acquire as for a single commit (`claim`): whoever
                // advances head has seen this write.
                match self.slot(at).compare_exchange(
                    current,
                    word,
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(now_there) => current = now_there,
                }
            }
        }
        let next = head::index(g.advance(c, n));
        // Release: the fills above (ours, or seen with Acquire) happen-before
        // any reader that sees `c + n`. Failure: another helper finished.
        let _ = self
            .head
            .compare_exchange(announced, next, Ordering::Release, Ordering::Relaxed);
    }
}
