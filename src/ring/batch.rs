//! Weighted requests (`n != 1`): the frontier view with the slot that
//! decides them, announce/commit/fill, and `peek` (docs/design.md §4).

use super::count::Count;
use super::view::View;
use super::word::{head, slot};
use super::{Outcome, RingRef, report};
use crate::flaw::Flaw;
use crate::sync::Backoff;
use crate::sync::atomic::Ordering::Relaxed;

impl<'a> RingRef<'a> {
    /// The validated frontier view and the word of admission `c + n - 1 - L`
    /// (in slot `c + n - 1`): deadlines grow along the index, so it is the
    /// newest of the words a request of `n` units would overwrite, and it
    /// decides the request. `None` if the ring is closed.
    #[inline]
    fn frontier_for(&self, n: u64) -> Option<(View, u64)> {
        let g = self.geometry;
        self.frontier(|v| {
            if n <= 1 {
                return Some(v.s);
            }
            let index = g.advance(v.c, n - 1);
            let last = self.load_slot(g.position(index));
            // Slot `c` read unclaimed: slot `c + n - 1` must hold its
            // previous lap's word (if slot `c` read claimed, the caller
            // helps and reads again anyway).
            if !g.claimed(v.s, v.c) && self.torn_past_frontier(last, index) {
                return None;
            }
            Some(last)
        })
    }

    /// The weighted path (`n != 1`), counting `remaining` unless `R` is
    /// [`report::DECISION`] (`admit_n`: the outcome carries 0 for it), and
    /// under [`report::GROWTH`] when it next grows ([`growth_after`]: for
    /// no units, only if an admission is alive — an empty window's room
    /// never grows).
    ///
    /// [`growth_after`]: Self::growth_after
    #[cold]
    #[inline(never)]
    pub(super) fn check_many<const R: u8>(&self, now: u64, n: u32) -> Outcome {
        let g = self.geometry;
        if g.flaw() == Flaw::Piecewise {
            return self.check_piecewise(now, n);
        }
        let n64 = u64::from(n);
        let backoff = Backoff::new();
        loop {
            let Some((v, last)) = self.frontier_for(n64) else {
                return Outcome::Closed;
            };
            let d = g.deadline_for(now, v.p);
            let t_eff = d - g.window();
            if n == 0 {
                if R == report::DECISION {
                    return Outcome::admitted(t_eff, 0, 0);
                }
                let remaining = self.remaining_after(v.c, 0, v.p, t_eff).remaining;
                let free = g.len();
                let grows_at = (R == report::GROWTH && u64::from(remaining) < free)
                    .then(|| self.growth_after(v.pos, 0, free, remaining, d));
                return Outcome::Admitted {
                    at: t_eff,
                    remaining,
                    policy: 0,
                    grows_at,
                };
            }
            let oldest = slot::deadline(last);
            if oldest > t_eff {
                return Outcome::Denied {
                    available_at: oldest,
                    policy: 0,
                };
            }
            // Counted before the commit, at the linearization point (see
            // `remaining_after`).
            let count = if R == report::DECISION {
                Count::kept(0)
            } else {
                self.remaining_after(v.c, n64, v.p, t_eff)
            };
            // Read with the count, by the same argument.
            let grows_at = (R == report::GROWTH)
                .then(|| self.growth_after(v.pos, n64, g.len() - n64, count.remaining, d));
            if self.commit_batch(&v, n64, d, &backoff) {
                // The frontier is now `n` past `c`: the singles that follow
                // find the guess there (docs/design.md §4).
                self.store_guess(g.advance(v.c, n64));
                self.note_expired(count, false);
                return Outcome::Admitted {
                    at: t_eff,
                    remaining: count.remaining,
                    policy: 0,
                    grows_at,
                };
            }
        }
    }

    /// What `check(now, n)` would answer now, recording nothing. Loads
    /// only (unless it finds a lagging head to help along).
    pub(crate) fn peek(&self, now: u64, n: u32) -> Outcome {
        let g = self.geometry;
        let n64 = u64::from(n);
        let Some((v, last)) = self.frontier_for(n64) else {
            return Outcome::Closed;
        };
        let d = g.deadline_for(now, v.p);
        let t_eff = d - g.window();
        if n > 0 && slot::deadline(last) > t_eff {
            return Outcome::Denied {
                available_at: slot::deadline(last),
                policy: 0,
            };
        }
        let count = self.remaining_after(v.c, n64, v.p, t_eff);
        if g.flaw() == Flaw::TrustHint {
            // The broken variant: a peek's effective time may be later than
            // the next admission's.
            self.note_expired(count, false);
        }
        Outcome::admitted(t_eff, count.remaining, 0)
    }

    /// Commits a batch of `n >= 2` units with deadline `d` at the frontier
    /// of `v` (slot `c` read unclaimed under head word `hw`): announce,
    /// commit on slot `c`, fill. `false`: retry with a fresh view (another
    /// announcement stands, head moved, or a single took slot `c`).
    pub(super) fn commit_batch(&self, v: &View, n: u64, d: u64, backoff: &Backoff) -> bool {
        if head::pending(v.hw) != 0 {
            // Another weighted request announced itself at `c` and has
            // not committed yet (slot c is unclaimed). Only one
            // announcement may stand at a time; singles go past it, we
            // wait for it to commit or to lose slot c to a single.
            backoff.snooze();
            return false;
        }
        // Announce: head carries our size until the batch is filled.
        // Relaxed: the Release slot CAS below publishes it to everyone
        // who sees our BATCH word; failing means head moved (retry).
        let announced = head::with_pending(v.c, n);
        if self
            .head
            .compare_exchange(v.hw, announced, Relaxed, Relaxed)
            .is_err()
        {
            return false;
        }
        // Commit on slot c (the linearization point). Head equals our
        // announcement until slot c is claimed, so no other weighted
        // request can commit here; a single may win slot c instead, and
        // then we retry.
        if self
            .claim(v.pos, v.s, slot::pack(d, v.stamp, true))
            .is_err()
        {
            return false;
        }
        self.fill(announced, v.c, v.pos, n, d);
        true
    }

    /// The broken weighted path of [`Flaw::Piecewise`]: one unit at a time.
    fn check_piecewise(&self, now: u64, n: u32) -> Outcome {
        // The first unit's time and the last one's count: right whenever no
        // other thread slips in between (the flaw shows as a partial
        // admission, not as a wrong count).
        let mut admitted = None;
        for _ in 0..n {
            match self.check_one::<{ super::report::REMAINING }>(now) {
                Outcome::Admitted { at, remaining, .. } => {
                    let at = admitted.map_or(at, |(first, _)| first);
                    admitted = Some((at, remaining));
                }
                other => return other,
            }
        }
        let (at, remaining) = admitted.unwrap_or((now, 0));
        Outcome::admitted(at, remaining, 0)
    }
}
