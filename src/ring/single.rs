//! One unit: the straight-line fast path, the lazy-head scan it falls back
//! to, and the judgement and count they share (docs/design.md §4).

use super::word::slot;
use super::{Outcome, RingRef};

impl<'a> RingRef<'a> {
    /// One unit at `now` (judged time): the common case in straight-line
    /// code, the rest in [`check_one_scan`](Self::check_one_scan).
    ///
    /// When `head` is at the frontier (slot `c` unclaimed) and does not move
    /// while slots `c` and `c - 1` are read, this is exactly the scan below
    /// with no claimed slot to pass (`k == 0`): judge, count, one CAS on
    /// slot `c`. The admitter then moves `head` to `c + 1` at once (the scan
    /// would wait for a lag of `B`), so that on one thread the next check
    /// finds the frontier at `head` again and takes this path; a head CAS
    /// that loses to another thread changes nothing (whoever moved head
    /// moved it past `c`, or announced a batch there that our claim defeats
    /// and the next reader helps along: see `advance_head`). Anything else —
    /// a claimed or closed slot, a moved head, a lost CAS — goes to the
    /// general path, which starts over from a fresh read of `head`.
    #[inline(always)]
    pub(crate) fn check_one<const COUNT: bool>(&self, now: u64) -> Outcome {
        let g = self.geometry;
        if g.general_only() {
            return self.check_one_scan::<COUNT>(now);
        }
        let hw = self.load_head();
        let v = self.read_view(hw);
        if v.s == slot::CLOSED || self.taken(v.s, v.c) || !self.revalidate(hw) {
            return self.check_one_scan::<COUNT>(now);
        }
        let (d, t_eff) = match self.judge_one(now, v.s, v.p) {
            Ok(fits) => fits,
            Err(denied) => return denied,
        };
        let remaining = self.count_one::<COUNT>(v.c, v.p, t_eff);
        if self
            .claim(v.pos, v.s, slot::pack(d, v.stamp, false))
            .is_err()
        {
            return self.check_one_scan::<COUNT>(now);
        }
        self.advance_head(hw, v.c, v.c, 1);
        if COUNT && slot::deadline(v.p) > t_eff {
            // The count searched: keep where it stopped as the hint.
            self.note_expired(v.c, 1, remaining);
        }
        Outcome::Admitted {
            at: t_eff,
            remaining,
            policy: 0,
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
    fn check_one_scan<const COUNT: bool>(&self, now: u64) -> Outcome {
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
                let remaining = self.count_one::<COUNT>(idx, p, t_eff);
                if let Err(beaten) = self.claim(pos, s, slot::pack(d, g.stamp(idx), false)) {
                    // Scan on from the word that beat us (usually the
                    // admission that took `idx`), re-validating head again.
                    s = beaten;
                    continue;
                }
                if k + 1 >= g.lag() || (COUNT && remaining == 0) {
                    // The lag reached B, or the window is now full (so the
                    // denials that follow find the frontier at `head`, with
                    // no scan): move head to the new frontier.
                    self.advance_head(hw, c, idx, 1);
                }
                if COUNT && slot::deadline(p) > t_eff {
                    // The slow count ran: keep its result as the hint.
                    self.note_expired(idx, 1, remaining);
                }
                return Outcome::Admitted {
                    at: t_eff,
                    remaining,
                    policy: 0,
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
        let t_eff = d - g.window();
        let oldest = slot::deadline(s);
        if oldest > t_eff {
            // The L-th most recent admission is still in the window.
            return Err(Outcome::Denied {
                available_at: oldest,
                policy: 0,
            });
        }
        Ok((d, t_eff))
    }

    /// `remaining` for a single at `index` (previous slot `p`), counted
    /// before its CAS (see `remaining_after`); 0 for a caller that does not
    /// ask (`admit`).
    #[inline(always)]
    fn count_one<const COUNT: bool>(&self, index: u64, p: u64, t_eff: u64) -> u32 {
        if COUNT {
            self.remaining_after(index, 1, p, t_eff)
        } else {
            0
        }
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
