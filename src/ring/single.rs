//! One unit: the straight-line fast path, the lazy-head scan it falls back
//! to, and the judgement and count they share (docs/design.md §4).

use super::count::Count;
use super::view::View;
use super::word::{head, slot};
use super::{Outcome, RingRef, report};
use crate::flaw::Flaw;
use crate::sync::atomic::Ordering;

impl<'a> RingRef<'a> {
    /// One unit at `now` (judged time): the common case in straight-line
    /// code, the rest in [`check_one_scan`](Self::check_one_scan).
    ///
    /// It reads the view where the frontier guess puts the frontier
    /// ([`guessed`](Self::guessed): index `idx`, at most `k <= B` past
    /// `head`; `head` itself without a guess), and takes it if, past `head`,
    /// **slot `idx - 1` holds its own index's word and slot `idx`, read
    /// after it, does not** ([`at_frontier`]), with `head` unmoved. That is
    /// the scan below at the point where it has passed the claimed slots,
    /// checked at the last of them only: claims go in index order, so every
    /// slot from `head` to `idx - 1` is claimed too, and `idx` was the
    /// frontier when slot `idx` was read (`read_view_at`); the scan's
    /// soundness (`k <= B < L`) covers the rest. Judge, count, one CAS on
    /// slot `idx`; then [`after_single`](Self::after_single) stores the next
    /// guess and moves `head` about every `B` admissions. Anything else — a
    /// claimed or closed slot, a wrong guess, a moved head, a lost CAS —
    /// goes to the general path, which starts over from a fresh read of
    /// `head`.
    ///
    /// [`at_frontier`]: Self::at_frontier
    #[inline(always)]
    pub(crate) fn check_one<const R: u8>(&self, now: u64) -> Outcome {
        let g = self.geometry;
        if g.general_only() {
            return self.check_one_scan::<R>(now);
        }
        let hw = self.load_head();
        let (k, idx) = self.guessed(hw);
        let v = self.read_view_at(hw, idx);
        if !self.at_frontier(&v, k) || !self.revalidate(hw) {
            return self.check_one_scan::<R>(now);
        }
        let (d, t_eff) = match self.judge_one(now, v.s, v.p) {
            Ok(fits) => fits,
            Err(denied) => return denied,
        };
        let (count, grows_at) = self.count_one::<R>(v.c, v.p, d);
        if self
            .claim(v.pos, v.s, slot::pack(d, v.stamp, false))
            .is_err()
        {
            return self.check_one_scan::<R>(now);
        }
        self.after_single(hw, k, v.c, v.pos);
        if R >= report::REMAINING {
            self.note_expired(count);
        }
        Outcome::Admitted {
            at: t_eff,
            remaining: count.remaining,
            policy: 0,
            grows_at,
        }
    }

    /// **The frontier guess**: `(k, idx)`, the index `idx` the guess names
    /// if it lies in `head`'s lap at most `B` past `head` (word `hw`), and
    /// `k` its distance; else `(0, head)` — a ring that keeps no guess, a
    /// guess behind `head`, too far ahead or in another lap, a `head`
    /// announcing a batch.
    ///
    /// The guess is the index after a single admitted behind a lazy `head`
    /// ([`after_single`](Self::after_single)), never past the end of a lap
    /// (an admission at position `L - 1` moves `head` instead), so it is
    /// followed only within `head`'s lap: there an index is `head` plus the
    /// distance. A head word announcing a batch carries `PENDING` above the
    /// index, which makes the difference wrap: no guess is followed into a
    /// batch's fill.
    ///
    /// The guess only says where to look. The caller verifies the view it
    /// leads to ([`at_frontier`], `head` re-validated), so no value — stale,
    /// stored out of order by racing admitters, garbage — changes a
    /// decision: a wrong one costs the scan. (Loom:
    /// `control_unverified_guess_is_caught`.)
    ///
    /// [`at_frontier`]: Self::at_frontier
    #[inline(always)]
    fn guessed(&self, hw: u64) -> (u64, u64) {
        let g = self.geometry;
        let Some(hints) = self.hints else {
            return (0, head::index(hw));
        };
        // Relaxed: a guess, verified as above; it orders nothing.
        let guess = hints.frontier.load(Ordering::Relaxed);
        let k = guess.wrapping_sub(hw);
        // In `head`'s lap (so `k` is the distance) and at most `B` past it.
        if k <= g.lag() && g.position(hw) as u64 + k < g.len() {
            (k, guess)
        } else {
            (0, head::index(hw))
        }
    }

    /// **At the frontier**: whether view `v`, read by `read_view_at` at most
    /// `k <= B` past a `head` the caller re-validates, has slot `c`
    /// unclaimed (not CLOSED) and, past `head` (`k > 0`), slot `c - 1`
    /// holding its own index's word: then `c` was the first unclaimed index
    /// when slot `c` was read. (At `head` itself slot `c - 1` is committed.)
    #[inline(always)]
    fn at_frontier(&self, v: &View, k: u64) -> bool {
        let g = self.geometry;
        v.s != slot::CLOSED
            && !self.taken(v.s, v.c)
            && (k == 0
                || g.flaw() == Flaw::UnverifiedGuess
                || slot::claimed_by(v.p, g.stamp_before(v.c)))
    }

    /// After the fast path committed a single at index `c` (position `pos`),
    /// at most `k` past `head` (word `hw`): store the guess `c + 1` (a ring
    /// that keeps one) — or move `head` to `c + 1` when the lag reaches `B`,
    /// when the next index starts a lap (a guess never crosses one: see
    /// [`guessed`]), or at once for a ring without a guess (a keyed
    /// state's: its next single then finds the frontier at `head`). A head
    /// CAS that loses changes nothing (whoever moved head moved it past `c`,
    /// or announced a batch there that our claim defeats and the next reader
    /// helps along: see `advance_head`).
    ///
    /// [`guessed`]: Self::guessed
    #[inline(always)]
    fn after_single(&self, hw: u64, k: u64, c: u64, pos: usize) {
        let g = self.geometry;
        match self.hints {
            Some(hints) if k + 1 < g.lag() && pos as u64 + 1 < g.len() => {
                // Relaxed: a guess (see `guessed`); racing admitters may
                // store in either order. `c + 1` is in `c`'s lap.
                hints.frontier.store(c + 1, Ordering::Relaxed);
            }
            _ => self.advance_head(hw, head::index(hw), c, 1),
        }
    }

    /// The single-unit general path, with a lazy head: `head` may lag the
    /// frontier (the first unclaimed index) by up to `B = min(L - 1, 4)`
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
                    // Scan on from the word that beat us (usually the
                    // admission that took `idx`), re-validating head again.
                    s = beaten;
                    continue;
                }
                if k + 1 >= g.lag() || (R >= report::REMAINING && count.remaining == 0) {
                    // The lag reached B, or the window is now full (so the
                    // denials that follow find the frontier at `head`, with
                    // no scan): move head to the new frontier. No frontier
                    // guess is stored here: this path runs when admitters
                    // race, where a store to `head`'s line on every admission
                    // costs more than the scans it would save (two threads
                    // on one key: about 1.7x slower with it).
                    self.advance_head(hw, c, idx, 1);
                }
                if R >= report::REMAINING {
                    self.note_expired(count);
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
    /// [`report::DECISION`], `admit`'s) and, for [`report::GROWTH`], when it
    /// next grows (`growth_after`).
    #[inline(always)]
    fn count_one<const R: u8>(&self, index: u64, p: u64, d: u64) -> (Count, Option<u64>) {
        if R == report::DECISION {
            return (Count::kept(0), None);
        }
        let count = self.remaining_after(index, 1, p, d - self.geometry.window());
        let grows_at = (R == report::GROWTH).then(|| self.growth_after(index, count.remaining, d));
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

    use super::super::word::head;
    use super::super::{Hints, Shape};
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
            Ring {
                shape: Shape::single(limit, std::time::Duration::from_nanos(window)).unwrap(),
                head: AtomicU64::new(0),
                hints: Hints::default(),
                slots: (0..limit).map(|_| AtomicU64::new(0)).collect(),
            }
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
            (0..8u64).prop_map(Scramble::AheadOfHead),
            (0..4u64).prop_map(Scramble::AheadOfFrontier),
            (1..12u64).prop_map(Scramble::BehindHead),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The growth time read with the count equals what the tower layer
        /// computed before it (and still does with several policies): the
        /// wait of a dry run of `remaining + 1` units right after.
        #[cfg(feature = "tower")]
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
                let (decision, wait) = growing.shape.check_growing_at(ring, now).unwrap();
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

        /// The expiry hint is a guess too: overwritten before every call
        /// with garbage or any position, it changes no count (rings of 8
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
                let n = n.min(limit);
                let admit = admit && n == 1;
                prop_assert_eq!(
                    scrambled.call(t, n, admit),
                    clean.call(t, n, admit),
                    "at {} ns, {} unit(s), admit: {}, hint {}", t, n, admit, hint
                );
            }
        }

        #[test]
        fn no_guess_changes_an_answer(
            limit in 1u32..12,
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
                let n = n.min(limit);
                let admit = admit && n == 1;
                prop_assert_eq!(
                    scrambled.call(t, n, admit),
                    clean.call(t, n, admit),
                    "at {} ns, {} unit(s), admit: {}, guess {:?}", t, n, admit, how
                );
            }
        }
    }
}
