//! One unit: the straight-line fast path, the lazy-head scan it falls back
//! to, and the judgement and count they share (docs/design.md §4).

use super::count::Count;
use super::geometry::Now;
use super::view::View;
use super::word::{head, slot};
use super::{Outcome, RingRef, report};
use crate::flaw::Flaw;
use crate::sync::after_lost_race;
use crate::sync::atomic::{AtomicU64, Ordering};

impl<'a> RingRef<'a> {
    /// One unit at `now` (judged time): [`check_one_when`](Self::check_one_when)
    /// with the time already read.
    #[inline(always)]
    pub(crate) fn check_one<const R: u8>(&self, now: u64) -> Outcome {
        self.check_one_when::<R, _>(|| Now::at(now), |outcome, _| outcome)
    }

    /// One unit, at the time `when` reads (called once, on every path):
    /// the common case in straight-line code, the rest in
    /// [`check_one_scan`](Self::check_one_scan). Returns what `finish`
    /// makes of the outcome and the time read.
    ///
    /// **Where the time is read** (docs/design.md §4): a ring with a
    /// frontier guess reads `when` first, then the guess and its slots,
    /// the judgement, and for an admission `head`, the count and the commit
    /// CAS; a keyed state's ring (no guess) reads the view at `head` first
    /// and `when` after it. The count's words wait for the judgement:
    /// loaded ahead of it they cost a `check` more than they save
    /// (BENCHMARKS.md, "Where the time goes"). The clock
    /// before the guess takes 0.92-1.00 of the time of the clock after the
    /// slots on both AMD hosts met, and trades admissions for denials on
    /// the Intel one; a keyed ring's read before
    /// its view measures level. The order changes no decision: the ring's
    /// claims hold for any time a caller passes, at any point of its loads.
    ///
    /// A ring that keeps a frontier guess (a [`crate::Limiter`]'s) reads the
    /// slots where the guess puts the frontier ([`at_guess`](Self::at_guess))
    /// and judges them: a denial is then final with no load of `head` at
    /// all (**the head-free denial**). An admission loads `head` and takes
    /// the view if the guess lies at most `B` past it in its lap and slot
    /// `c` still holds its previous lap's word
    /// ([`claimable`](Self::claimable)). A keyed state's ring (no guess)
    /// reads the view at `head` and re-validates `head`
    /// ([`at_head`](Self::at_head)). Then: count, one CAS on slot `c`, and
    /// [`after_single`](Self::after_single) stores the next guess and moves
    /// `head` every `B + 1` admissions or once a lap. Anything else — a
    /// claimed or closed slot, a wrong guess, a moved head, a lost CAS —
    /// goes to the general path, which starts over from a fresh read of
    /// `head`.
    ///
    /// `finish` is applied on the fast path apart from the general path:
    /// the fast path's outcome then stays in registers, where one shared
    /// with the out-of-line scan's would be built in the scan's return
    /// slot in memory and read back.
    #[inline(always)]
    pub(crate) fn check_one_when<const R: u8, T>(
        &self,
        when: impl FnOnce() -> Now,
        finish: impl Fn(Outcome, Now) -> T,
    ) -> T {
        let g = self.geometry;
        // The general path, at the time read.
        let general = |now: Now| finish(self.check_one_scan::<R>(now.judged), now);
        // The clock is read in each arm: no flag saying which arm ran
        // waits across the read.
        match self.frontier {
            _ if g.general_only() => general(when()),
            Some(frontier) => {
                let now = when();
                // Relaxed: a guess; `at_guess` and `claimable` verify what it
                // leads to.
                let guess = frontier.load(Ordering::Relaxed);
                let Some((pos, slot_q, s, p)) = self.at_guess(guess) else {
                    return general(now);
                };
                let fast = match self.judge_one(now.judged, s, p) {
                    Err(denied) => Some(denied),
                    // Acquire (`load_head`), after the slots: see `claimable`.
                    Ok(fits) => self
                        .claimable(self.load_head(), guess, pos, s, p)
                        .and_then(|(v, k)| self.claim_judged::<R>(v, slot_q, k, fits)),
                };
                match fast {
                    Some(outcome) => finish(outcome, now),
                    None => general(now),
                }
            }
            None => {
                // A keyed state's ring: one read after the view, either way
                // (its path is compiled once per map width; a read in each
                // arm measured no faster there).
                let view = self.at_head();
                let now = when();
                match view.and_then(|(v, k)| self.judge_and_claim::<R>(now.judged, v, k)) {
                    Some(outcome) => finish(outcome, now),
                    None => general(now),
                }
            }
        }
    }

    /// **At the guess**: `(q, s, p)`, the words `s` of slot `q =
    /// pos(guess)` and `p` of the slot before it, if they are a frontier's — read as slot `q`,
    /// slot `q - 1`, slot `q` again, the two reads of slot `q` equal, neither
    /// word CLOSED, and the stamps **adjacent**: `p` written by the
    /// admission `L - 1` after the one that wrote `s` (the next lap's stamp
    /// unless `q = 0`, where both are in one lap). Then, at the load of slot
    /// `q - 1`, `s` was the word of admission `F - L` and `p` that of `F - 1`
    /// for the frontier `F` — or a weighted admission was half filled, whose
    /// view [`judge_one`](Self::judge_one) never denies. So a denial judged
    /// on `(s, p)` is exact, with no `head` read.
    ///
    /// Why (docs/design.md §4, "The head-free denial"): every slot's words
    /// only grow (an admission overwrites a word that expired at its
    /// effective time, so its deadline is at least `W` later), so equal reads
    /// of slot `q` are one write, held through the load of slot `q - 1`; and
    /// slots are written in index order (each writer has seen the slot
    /// before written). Say `s` is admission `j`'s word and `p` admission
    /// `i`'s; adjacency leaves `i = j + L - 1 + 2mL`. With `m > 0`, `j + L`
    /// was written before `i`, so before our load of `p`, yet slot `q`
    /// still held `j` after it; with `m < 0`, `i + L < j` was unwritten at
    /// our load of `p`, yet `j` was written before it. So `i = j + L - 1`:
    /// admissions `j .. j + L - 1` are written and `j + L` is not, so `F =
    /// j + L` — unless `j + L` belongs to a batch whose fill had not reached
    /// slot `q`; then `p` holds the batch's deadline and `j` had expired at
    /// its effective time, and the judgement admits (and goes on to
    /// `claimable`, which needs `head`).
    ///
    /// With `L == 1` slot `q - 1` is slot `q`, and equal reads of it bracket
    /// the one in between: words only grow, so `p == s` whenever `s ==
    /// again`. Returned with the words: slot `q` itself, for the commit CAS
    /// (its position checked once, here).
    #[inline(always)]
    fn at_guess(&self, guess: u64) -> Option<(usize, &'a AtomicU64, u64, u64)> {
        let g = self.geometry;
        let pos = g.position(guess);
        // `None`: garbage past the ring.
        let slot_q = self.slots.get(pos)?;
        let slot_before = match pos.checked_sub(1) {
            Some(before) => &self.slots[before],
            None => self.slots.last()?,
        };
        // Acquire, as `load_slot`.
        let s = slot_q.load(Ordering::Acquire);
        let p = slot_before.load(Ordering::Acquire);
        let again = slot_q.load(Ordering::Acquire);
        let s = match g.flaw() {
            // The broken variant: judge the last read of slot `q` only (the
            // order slot `q - 1` then slot `q`, with no `head` around it).
            Flaw::DenyWithoutReread => again,
            _ if s != again => return None,
            _ => s,
        };
        let adjacent = slot::stamps_differ(p, s) == u64::from(pos != 0);
        let verified = adjacent || g.flaw() == Flaw::UnverifiedGuess;
        (s != slot::CLOSED && p != slot::CLOSED && verified).then_some((pos, slot_q, s, p))
    }

    /// **Claimable**: the words `at_guess` read (`s`, `p` at position `pos
    /// = pos(guess)`), as a view at index `c = guess` for an admission, if
    /// `head` (word `hw`, loaded after the slots) announces no batch and
    /// lies at most `B` behind `c` in `c`'s lap (the distance `k` then wraps
    /// for neither), and `s` is not claimed for `c`.
    ///
    /// Why `head` read once, after the slots, suffices (docs/design.md §4):
    /// the slot reads fixed `F = j + L` with `s` admission `j`'s word, unless
    /// a batch was half filled. Our CAS on slot `c` succeeds only if slot
    /// `c` still holds `s`; `head` at `h <= c` means admissions before `h >=
    /// c - B > c - L` were written before we loaded it, so a successful CAS
    /// finds `j = c - L` (an older `j` was overwritten by then; `s`'s stamp
    /// rules out `j = c`, and `j = c + L` would have been admitted under a
    /// `head` of at least `c + L - B > c`); and a batch that covered `c` at
    /// the slot reads would still announce itself in `head`, or `head`
    /// would be past it. So `c` was the frontier at the load of slot `c -
    /// 1` and still is at the CAS: `s` and `p` are the view the judgement
    /// needs. (Acquire, `load_head`: the slot writes before this `head` are
    /// visible to our CAS; the Acquire slot loads before it keep it below
    /// them.)
    #[inline(always)]
    fn claimable(&self, hw: u64, guess: u64, pos: usize, s: u64, p: u64) -> Option<(View, u64)> {
        let g = self.geometry;
        let k = guess.wrapping_sub(hw);
        // In `c`'s lap: with `k <= B < L <= 2^bits`, a `head` in an earlier
        // lap leaves `pos = position(head) + k - 2^bits` below `head`'s
        // position, and one in the same lap `pos = position(head) + k` at
        // or above it (indices are `lap << bits | position`).
        let fits = k <= g.lag() && g.position(hw) <= pos;
        (fits && !self.taken(s, guess)).then(|| {
            let view = View {
                hw,
                c: guess,
                pos,
                stamp: g.stamp(guess),
                s,
                p,
            };
            (view, k)
        })
    }

    /// **At head** (a ring without a guess): the view at `head`, if slot
    /// `c` is unclaimed (not CLOSED) and `head` is unmoved after the slots
    /// (the seqlock re-validation). At `head` slot `c - 1` is committed.
    #[inline(always)]
    fn at_head(&self) -> Option<(View, u64)> {
        let hw = self.load_head();
        let v = self.read_view(hw);
        let open = v.s != slot::CLOSED && !self.taken(v.s, v.c);
        (open && self.revalidate(hw)).then_some((v, 0))
    }

    /// Judges a single on view `v` (`k` past `head`), then claims it
    /// ([`claim_judged`](Self::claim_judged)); `None` if another admission
    /// took the slot first.
    #[inline(always)]
    fn judge_and_claim<const R: u8>(&self, now: u64, v: View, k: u64) -> Option<Outcome> {
        match self.judge_one(now, v.s, v.p) {
            Ok(fits) => self.claim_judged::<R>(v, self.slot(v.pos), k, fits),
            Err(denied) => Some(denied),
        }
    }

    /// A single that fits (deadline `d`, effective time `t_eff`) on view
    /// `v`, `k` past `head`: count, claim slot `c` (`slot_c`), then the
    /// next guess and `head` ([`after_single`](Self::after_single)) and the
    /// expiry hint. `None` if another admission took slot `c` first (the
    /// general path then starts over).
    #[inline(always)]
    fn claim_judged<const R: u8>(
        &self,
        v: View,
        slot_c: &AtomicU64,
        k: u64,
        (d, t_eff): (u64, u64),
    ) -> Option<Outcome> {
        let (count, grows_at) = self.count_one::<R>(v.c, v.p, d);
        if self
            .claim_in(slot_c, v.s, slot::pack(d, v.stamp, false))
            .is_err()
        {
            // Another admission took slot `c`: pause, then the general path.
            after_lost_race(0);
            return None;
        }
        self.after_single(v.hw, k, v.c, v.pos);
        if R >= report::REMAINING {
            self.note_expired(count, false);
        }
        Some(Outcome::Admitted {
            at: t_eff,
            remaining: count.remaining,
            policy: 0,
            grows_at,
        })
    }

    /// After the fast path committed a single at index `c` (position `pos`),
    /// `k` past `head` (word `hw`): store the guess `c + 1` (a ring that
    /// keeps one), and move `head` to `c + 1` when `c + 1` would lie more
    /// than `B` past it (`claimable` follows a guess at most `B` past
    /// `head`, and the scan's bound is the frontier at most `B + 1` ahead:
    /// `c = head + B` is the last single either allows), when the next
    /// index starts a lap (a guess is followed only within
    /// `head`'s lap: see [`claimable`](Self::claimable)), or at once for a
    /// ring without a guess (a keyed state's: its next single then finds
    /// the frontier at `head`). The guess is stored every time, so that the
    /// next denial finds the frontier with no `head` read. A head CAS that
    /// loses changes nothing (whoever moved head moved it past `c`, or
    /// announced a batch there that our claim defeats and the next reader
    /// helps along: see `advance_head`).
    #[inline(always)]
    fn after_single(&self, hw: u64, k: u64, c: u64, pos: usize) {
        let g = self.geometry;
        let next = g.advance_at(c, pos, 1);
        let lazy = self.store_guess(next) && k < g.lag() && pos as u64 + 1 < g.len();
        if !lazy {
            self.move_head(hw, head::index(hw), next);
        }
    }

    /// Stores `next` as the frontier guess, if this ring keeps one (and
    /// says whether it does). Relaxed: a guess, which every path that reads
    /// it verifies ([`at_guess`](Self::at_guess), [`claimable`](Self::claimable));
    /// racing admitters may store in either order.
    #[inline(always)]
    pub(super) fn store_guess(&self, next: u64) -> bool {
        self.frontier
            .inspect(|frontier| frontier.store(next, Ordering::Relaxed))
            .is_some()
    }

    /// The single-unit general path, with a lazy head: `head` may lag the
    /// frontier (the first unclaimed index) by up to `B = min(L - 1, 16)`
    /// admissions. A reader scans forward from `head` over slots already
    /// claimed for their index to find the frontier, and `head` is moved only
    /// every `B` admissions, so an admission is usually one CAS on one slot.
    ///
    /// Why the scan is sound: admission `j` is committed only by a reader
    /// that validated some head `h >= j - B`, so the frontier is never more
    /// than `B + 1` ahead of `head`, and with `B < L` the scanned slots
    /// (`head ..= head + B`) hold either their previous lap's word or their
    /// own: the stamp tells which. Claims happen in index order (a reader
    /// only claims `j` after seeing `j - 1` claimed), so the first unclaimed
    /// slot is the frontier. A slot of a later lap would need a head beyond
    /// ours, which the seqlock re-validation catches.
    #[inline(never)]
    fn check_one_scan<const R: u8>(self, now: u64) -> Outcome {
        let g = self.geometry;
        let mut losses = 0;
        'fresh: loop {
            let hw = self.load_head();
            let v = self.read_view(hw);
            let (c, mut idx, mut pos, mut s, mut p) = (v.c, v.c, v.pos, v.s, v.p);
            let mut k = 0u64;
            loop {
                let mut stuck = false;
                while self.taken(s, idx) {
                    if slot::is_batch(s) || k == g.lag() {
                        // A batch to fill first, or the frontier is B + 1
                        // ahead: move head along, then look again.
                        stuck = true;
                        break;
                    }
                    k += 1;
                    p = s;
                    idx = g.advance(idx, 1);
                    pos = g.position(idx);
                    s = self.load_slot(pos);
                }
                if !self.revalidate(hw) {
                    continue 'fresh;
                }
                if stuck {
                    self.unstick(hw, c, idx, s);
                    continue 'fresh;
                }
                if s == slot::CLOSED {
                    return Outcome::Closed;
                }
                let (d, t_eff) = match self.judge_one(now, s, p) {
                    Ok(fits) => fits,
                    Err(denied) => return denied,
                };
                let (count, grows_at) = self.count_one::<R>(idx, p, d);
                if let Err(beaten) = self.claim(pos, s, slot::pack(d, g.stamp(idx), false)) {
                    // Pause, then scan on from the word that beat us
                    // (usually the admission that took `idx`),
                    // re-validating head again.
                    after_lost_race(losses);
                    losses = losses.saturating_add(1);
                    s = beaten;
                    continue;
                }
                // Full now: counted, or (`admit`, which counts nothing) the
                // admission `L - 1` before ours, in the next slot, still in
                // the window. (Read once the slot is ours, Relaxed, only to
                // place `head` and the guess: no answer depends on it, and a
                // newer word there costs one early move.)
                let full = match R {
                    report::DECISION => self.live_at(g.position(g.advance(idx, 1)), t_eff),
                    _ => count.remaining == 0,
                };
                if k + 1 >= g.lag() || full {
                    // The lag reached B, or the window is now full: move
                    // head to the new frontier, and the guess with it. Only
                    // then: this path runs when admitters race, where a
                    // store to `head`'s line costs more than the scans it
                    // would save (two threads on one key: about 1.7x slower
                    // with a head move on every admission, 5-10% with one
                    // every `B`). The guess shares that line, so its store
                    // costs no transfer of its own, and it must be made: a
                    // guess left behind by racing admitters fails
                    // `at_guess` on every call, and only the fast path's
                    // admissions store another, so without this one a ring
                    // would stay on this path until its window filled (one
                    // thread after two had raced: 1.35-1.61x governor's time
                    // against 1.00-1.03, docs/design.md §4). When full, it
                    // also sends the denials that follow down the head-free
                    // path.
                    let next = g.advance(idx, 1);
                    self.move_head(hw, c, next);
                    self.store_guess(next);
                }
                if R >= report::REMAINING {
                    self.note_expired(count, true);
                }
                return Outcome::Admitted {
                    at: t_eff,
                    remaining: count.remaining,
                    policy: 0,
                    grows_at,
                };
            }
        }
    }

    /// Judges a single whose slot holds `s` (admission `index - L`'s word)
    /// and whose previous slot holds `p`, at `now`: `Ok((d, t_eff))` — its
    /// deadline (the clamp: [`deadline_for`]) and effective time — if it
    /// fits, else the denial.
    ///
    /// [`deadline_for`]: super::Geometry::deadline_for
    #[inline(always)]
    fn judge_one(&self, now: u64, s: u64, p: u64) -> Result<(u64, u64), Outcome> {
        let g = self.geometry;
        let d = g.deadline_for(now, p);
        let oldest = slot::deadline(s);
        // `oldest > t_eff` with `t_eff = d - W`, compared without the
        // subtraction (no overflow: both deadlines are at most
        // `MAX_DEADLINE`, and `W <= 2^61`).
        if oldest + g.window() > d {
            // The L-th most recent admission is still in the window.
            return Err(Outcome::Denied {
                available_at: oldest,
                policy: 0,
            });
        }
        Ok((d, d - g.window()))
    }

    /// What a single at `index` (previous slot `p`, deadline `d`) reports,
    /// counted before its CAS (see `remaining_after`): `remaining` (0 for
    /// [`report::DECISION`], `admit`'s)
    /// and, for [`report::GROWTH`], when it next grows (`growth_after`).
    #[inline(always)]
    fn count_one<const R: u8>(&self, index: u64, p: u64, d: u64) -> (Count, Option<u64>) {
        if R == report::DECISION {
            return (Count::kept(0), None);
        }
        let count = self.remaining_after(index, 1, p, d - self.geometry.window());
        let grows_at = (R == report::GROWTH).then(|| {
            let g = self.geometry;
            self.growth_after(g.position(index), 1, g.len() - 1, count.remaining, d)
        });
        (count, grows_at)
    }

    /// The scan from `head` (word `hw`, index `c`) stopped at `idx` on the
    /// claimed word `s`: fill a batch committed at `c`, or move head past
    /// `idx` (every slot from `c` to `idx` is claimed).
    #[cold]
    #[inline(never)]
    fn unstick(&self, hw: u64, c: u64, idx: u64, s: u64) {
        if slot::is_batch(s) {
            // A batch is announced with head exactly at its index, so it
            // can only be at `c`.
            debug_assert_eq!(idx, c);
            self.help(hw, c, self.geometry.position(c), s);
        } else {
            self.advance_head(hw, c, idx, 1);
        }
    }
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests;
