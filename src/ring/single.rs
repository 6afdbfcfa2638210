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
    /// (BENCHMARKS.md, "Where the time goes", session 19). The clock
    /// before the guess takes 0.92-1.00 of the time of the clock after the
    /// slots on both AMD hosts met, and trades admissions for denials on
    /// the Intel one (sessions 19, 33 and 37); a keyed ring's read before
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
        let adjacent = (p ^ s) & slot::STAMP == u64::from(pos != 0);
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
mod tests {
    //! The frontier guess changes no answer: a ring whose guess is
    //! overwritten before every call — with garbage, with indices just
    //! behind or ahead of the frontier, with the frontier itself — answers
    //! every call exactly as the same ring left alone. (That ring is held to
    //! the reference model by `tests/model.rs`.)

    use proptest::prelude::*;

    use super::super::RingRef;
    use super::super::word::head;
    use super::super::{Hints, Shape};
    use crate::policy::Policy;
    use crate::sync::atomic::{AtomicU64, Ordering};

    /// A ring of `limit` slots with its own `head` and guesses.
    struct Ring {
        shape: Shape,
        head: AtomicU64,
        hints: Hints,
        slots: Vec<AtomicU64>,
    }

    impl Ring {
        fn new(limit: u32, window: u64) -> Ring {
            Ring::with_policies(&[(limit, window)])
        }

        /// A ring for several policies `(limit, window)`.
        fn with_policies(policies: &[(u32, u64)]) -> Ring {
            let policies: Vec<_> = policies
                .iter()
                .map(|&(limit, window)| Policy::new(limit, std::time::Duration::from_nanos(window)))
                .collect();
            let shape = Shape::new(&policies).unwrap();
            let slots = (0..shape.geometry.limit())
                .map(|_| AtomicU64::new(0))
                .collect();
            Ring {
                shape,
                head: AtomicU64::new(0),
                hints: Hints::default(),
                slots,
            }
        }

        /// A view with its hints (a limiter's) or without (a keyed
        /// state's).
        fn view(&self, hinted: bool) -> RingRef<'_> {
            let ring = self.shape.ring_hinted(&self.head, &self.hints, &self.slots);
            if hinted {
                return ring;
            }
            RingRef {
                frontier: None,
                expiry: None,
                policy_expiry: &[],
                ..ring
            }
        }

        /// The frontier guess.
        fn guess(&self) -> u64 {
            self.hints.frontier.load(Ordering::Relaxed)
        }

        /// `head`'s index.
        fn head_index(&self) -> u64 {
            head::index(self.head.load(Ordering::Relaxed))
        }

        /// Overwrites the guess with the index `behind` before `head`'s.
        fn leave_guess_behind(&self, behind: u64) {
            let stale = self.head_index().wrapping_sub(behind);
            self.hints.frontier.store(stale, Ordering::Relaxed);
        }

        /// `n` units at `t` (`n == 1` through `admit` when `admit`): the
        /// answer as `(admitted, at, remaining, retry)`.
        fn call(&self, t: u64, n: u32, admit: bool) -> (bool, u64, u32, u64) {
            let ring = self.shape.ring_hinted(&self.head, &self.hints, &self.slots);
            let now = self.shape.now(t, 0);
            if admit {
                return match self.shape.admit_at(ring, now).unwrap() {
                    Ok(()) => (true, 0, 0, 0),
                    Err(denied) => (false, 0, 0, denied.retry_after_nanos()),
                };
            }
            match self.shape.check_at(ring, now, n).unwrap() {
                Ok(admitted) => (true, admitted.at(), admitted.remaining(), 0),
                Err(denied) => (false, 0, 0, denied.retry_after_nanos()),
            }
        }
    }

    /// `log` (admissions' effective times) after `decision`.
    fn log_after<'l>(
        log: &'l mut Vec<u64>,
        decision: &Result<crate::decision::Admitted, crate::decision::Denied>,
    ) -> &'l [u64] {
        if let Ok(admitted) = decision {
            log.push(admitted.at());
        }
        log
    }

    /// `n` units at `t` (at most the limit; through `admit` when asked and
    /// `n == 1`) answer alike on both rings; `scramble` says what was
    /// overwritten.
    fn same_answer(
        clean: &Ring,
        scrambled: &Ring,
        t: u64,
        n: u32,
        admit: bool,
        scramble: &dyn core::fmt::Debug,
    ) -> Result<(), TestCaseError> {
        let n = n.min(clean.shape.limit());
        let admit = admit && n == 1;
        prop_assert_eq!(
            scrambled.call(t, n, admit),
            clean.call(t, n, admit),
            "at {} ns, {} unit(s), admit: {}, overwritten: {:?}",
            t,
            n,
            admit,
            scramble
        );
        Ok(())
    }

    /// What to write into the guess before a call.
    #[derive(Clone, Copy, Debug)]
    enum Scramble {
        Keep,
        Garbage(u64),
        /// `head + j`: past the frontier, at it, or behind it.
        AheadOfHead(u64),
        /// The frontier itself plus `j` (found from the clean ring's slots).
        AheadOfFrontier(u64),
        BehindHead(u64),
    }

    fn scramble() -> impl Strategy<Value = Scramble> {
        prop_oneof![
            Just(Scramble::Keep),
            any::<u64>().prop_map(Scramble::Garbage),
            // Up to 24 past `head`: past `B` (16) on rings of 18 slots and more.
            (0..24u64).prop_map(Scramble::AheadOfHead),
            (0..4u64).prop_map(Scramble::AheadOfFrontier),
            (1..12u64).prop_map(Scramble::BehindHead),
        ]
    }

    /// A guess left behind `head` (as racing admitters leave it)
    /// is caught up within `B + 1` admissions: the scan stores it when it
    /// moves `head`, and the fast path then keeps it, as on a ring whose
    /// guess was never disturbed. (Without that store the guess stays where
    /// it was and every single takes the scan.)
    #[test]
    fn a_guess_left_behind_catches_up() {
        for limit in [2u32, 3, 10, 17, 40] {
            let lag = u64::from((limit - 1).min(16));
            for warm in 0..3 * u64::from(limit) {
                for behind in 1..=lag + 2 {
                    // W = 1 ns, one call per ns: every single fits.
                    let (clean, scrambled) = (Ring::new(limit, 1), Ring::new(limit, 1));
                    let mut t = 0;
                    for _ in 0..warm {
                        t += 1;
                        assert!(clean.call(t, 1, true).0 && scrambled.call(t, 1, true).0);
                    }
                    scrambled.leave_guess_behind(behind);
                    for _ in 0..=lag {
                        t += 1;
                        assert!(clean.call(t, 1, true).0 && scrambled.call(t, 1, true).0);
                    }
                    assert_eq!(
                        scrambled.guess(),
                        clean.guess(),
                        "L = {limit}, {warm} admissions, then the guess {behind} behind head \
                         and {} more",
                        lag + 1
                    );
                }
            }
        }
    }

    /// The admission that fills the window leaves the guess at the
    /// frontier, even from the scan and through `admit` (which counts
    /// nothing): the denials that follow take the head-free path.
    #[test]
    fn a_full_window_places_the_guess() {
        for limit in [2u32, 3, 10, 17, 40] {
            let lag = u64::from((limit - 1).min(16));
            for warm in 0..u64::from(limit) {
                for behind in 1..=lag + 2 {
                    let ring = Ring::new(limit, 1_000);
                    for _ in 0..warm {
                        assert!(ring.call(1, 1, true).0);
                    }
                    ring.leave_guess_behind(behind);
                    let mut admitted = warm;
                    while ring.call(1, 1, true).0 {
                        admitted += 1;
                    }
                    assert_eq!(admitted, u64::from(limit));
                    assert_eq!(
                        ring.guess(),
                        ring.head_index(),
                        "L = {limit}, {warm} admissions, then the guess {behind} behind head"
                    );
                }
            }
        }
    }

    /// A ring handed a log (a restored snapshot, a reconfiguration's new
    /// generation) starts with the guess at its frontier.
    #[test]
    fn a_handed_log_places_the_guess() {
        for limit in [1u32, 2, 3, 10, 17, 40] {
            for kept in 0..=u64::from(limit) {
                let ring = Ring::new(limit, 1_000);
                let times: Vec<u64> = (0..kept).collect();
                ring.shape
                    .ring_hinted(&ring.head, &ring.hints, &ring.slots)
                    .fill_fresh(&times);
                assert_eq!(ring.guess(), ring.head_index(), "L = {limit}, {kept} kept");
            }
        }
    }

    /// A weighted admission moves the guess past its batch, where it
    /// leaves `head`: the singles after it take the fast path at once.
    #[test]
    fn a_batch_moves_the_guess() {
        for limit in [2u32, 3, 10, 17, 40] {
            for warm in 0..3 * u64::from(limit) {
                for n in 2..=limit {
                    let ring = Ring::new(limit, 1);
                    for t in 1..=warm {
                        assert!(ring.call(t, 1, true).0);
                    }
                    assert!(ring.call(warm + 1, n, false).0);
                    assert_eq!(
                        ring.guess(),
                        ring.head_index(),
                        "L = {limit}, {warm} singles, then {n} units"
                    );
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The growth time read with the count equals what the tower layer
        /// computed before it (and still does with several policies): the
        /// wait of a dry run of `remaining + 1` units right after.
            #[test]
        fn growth_equals_the_dry_run(
            limit in 1u32..12,
            window in 1u64..40,
            calls in prop::collection::vec((0u64..6, 1u32..4, any::<bool>()), 1..80),
        ) {
            let (growing, peeking) = (Ring::new(limit, window), Ring::new(limit, window));
            let mut t = 0;
            for (dt, n, grow) in calls {
                t += dt;
                if !grow {
                    // Other traffic: weighted calls that move the log on.
                    let n = n.min(limit);
                    prop_assert_eq!(growing.call(t, n, false), peeking.call(t, n, false));
                    continue;
                }
                let ring = growing.shape.ring_hinted(&growing.head, &growing.hints, &growing.slots);
                let now = growing.shape.now(t, 0);
                let states = crate::ring::StatesOut::new(None);
                let one = growing.shape.check_growing_at(ring, now, &states).unwrap();
                // One policy: no states written.
                prop_assert_eq!(states.get(), None);
                let (decision, wait) = (one.decision, one.wait);
                let ring = peeking.shape.ring_hinted(&peeking.head, &peeking.hints, &peeking.slots);
                let expected = peeking.shape.check_at(ring, now, 1).unwrap();
                prop_assert_eq!(&decision, &expected);
                let Ok(admitted) = expected else {
                    prop_assert_eq!(wait, None);
                    continue;
                };
                let more = admitted.remaining() + 1;
                let dry = peeking.shape.peek_at(ring, now, more).unwrap();
                let dry_wait = dry.err().map(|denied| denied.retry_after_nanos());
                prop_assert!(dry_wait.is_some(), "{} units fit right after {} remained", more, more - 1);
                prop_assert_eq!(wait, dry_wait, "at {} ns, remaining {}", t, admitted.remaining());
            }
        }

        /// With several policies, the one pass the tower layer makes
        /// answers as the three it made before: the decision as `check`'s,
        /// the wait as a dry run of `remaining + 1` units right after, and
        /// each policy's state as `policy_states` reads it after the
        /// admission — on a ring with hints (a limiter's) and without (a
        /// keyed state's). And `policy_states`, after an admission or a
        /// denial, says what each policy's window holds (by brute force
        /// from every admission's time).
            #[test]
        fn several_policies_grow_as_the_dry_run_and_the_states_say(
            policies in prop::collection::vec((1u32..12, 1u64..40), 2..4),
            hinted in any::<bool>(),
            calls in prop::collection::vec((0u64..6, 1u32..4, any::<bool>()), 1..80),
        ) {
            let (growing, peeking) = (Ring::with_policies(&policies), Ring::with_policies(&policies));
            let smallest = policies.iter().map(|&(limit, _)| limit).min().unwrap();
            // Every admission's effective time, oldest first: each policy's
            // state by brute force from it.
            let mut log: Vec<u64> = Vec::new();
            let expected_states = |log: &[u64], t: u64| {
                let t_eff = log.last().map_or(t, |&last| last.max(t));
                let raw: Vec<(u32, u64)> = policies
                    .iter()
                    .map(|&(limit, window)| {
                        let last = &log[log.len().saturating_sub(limit as usize)..];
                        let live: Vec<u64> = last.iter().copied().filter(|&at| at + window > t_eff).collect();
                        (limit - live.len() as u32, live.first().map_or(0, |&at| at + window))
                    })
                    .collect();
                crate::decision::PolicyStates::growing(&raw, t)
            };
            let mut t = 0;
            for (dt, n, grow) in calls {
                t += dt;
                if !grow {
                    // Other traffic: weighted calls that move the log on.
                    let n = n.min(smallest);
                    let answer = growing.call(t, n, false);
                    prop_assert_eq!(answer, peeking.call(t, n, false));
                    if answer.0 {
                        log.extend((0..n).map(|_| answer.1));
                    }
                    continue;
                }
                let now = growing.shape.now(t, 0);
                let one_states = crate::ring::StatesOut::new(None);
                let one = growing.shape.check_growing_at(growing.view(hinted), now, &one_states).unwrap();
                let ring = peeking.view(hinted);
                let expected = peeking.shape.check_at(ring, now, 1).unwrap();
                prop_assert_eq!(&one.decision, &expected);
                let states = peeking.shape.policy_states(ring, now);
                prop_assert_eq!(states, Some(expected_states(log_after(&mut log, &expected), t)), "at {} ns", t);
                let Ok(admitted) = expected else {
                    prop_assert_eq!((one.wait, one_states.get()), (None, None));
                    continue;
                };
                let more = admitted.remaining() + 1;
                let dry = peeking.shape.peek_at(ring, now, more).unwrap();
                let dry_wait = dry.err().map(|denied| denied.retry_after_nanos());
                prop_assert!(dry_wait.is_some(), "{} units fit right after {} remained", more, more - 1);
                prop_assert_eq!(one.wait, dry_wait, "at {} ns, remaining {}", t, admitted.remaining());
                prop_assert_eq!(one_states.get(), states, "at {} ns", t);
            }
        }

        /// The expiry hint is a guess too: overwritten before every call
        /// with garbage or any live count, it changes no count (rings of 8
        /// slots and more keep one; windows long enough to hold many live
        /// admissions).
        #[test]
        fn no_expiry_hint_changes_a_count(
            limit in 8u32..40,
            window in 1u64..200,
            calls in prop::collection::vec(
                (0u64..8, 0u32..4, any::<bool>(), prop::option::of(any::<u64>()), 0u64..48),
                1..120,
            ),
        ) {
            let (clean, scrambled) = (Ring::new(limit, window), Ring::new(limit, window));
            let mut t = 0;
            for (dt, n, admit, garbage, position) in calls {
                t += dt;
                let hint = garbage.unwrap_or(position);
                scrambled.hints.expiry.store(hint, Ordering::Relaxed);
                same_answer(&clean, &scrambled, t, n, admit, &hint)?;
            }
        }

        #[test]
        fn no_guess_changes_an_answer(
            limit in prop_oneof![1u32..12, 17u32..40],
            window in 1u64..40,
            calls in prop::collection::vec((0u64..6, 0u32..4, any::<bool>(), scramble()), 1..80),
        ) {
            let (clean, scrambled) = (Ring::new(limit, window), Ring::new(limit, window));
            let mut t = 0;
            for (dt, n, admit, how) in calls {
                t += dt;
                let hw = scrambled.head.load(Ordering::Relaxed);
                let frontier = clean.hints.frontier.load(Ordering::Relaxed);
                let word = match how {
                    Scramble::Keep => None,
                    Scramble::Garbage(word) => Some(word),
                    Scramble::AheadOfHead(j) => Some(head::index(hw) + j),
                    Scramble::AheadOfFrontier(j) => Some(frontier.max(head::index(hw)) + j),
                    Scramble::BehindHead(j) => Some(head::index(hw).wrapping_sub(j)),
                };
                if let Some(word) = word {
                    scrambled.hints.frontier.store(word, Ordering::Relaxed);
                }
                same_answer(&clean, &scrambled, t, n, admit, &how)?;
            }
        }
    }
}
