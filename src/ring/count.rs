//! `remaining`: the count of live admissions behind a new one, and the
//! verified expiry hint that makes it O(1) loads amortised (docs/design.md
//! §4).

use super::RingRef;
use super::word::slot;
use crate::flaw::Flaw;
use crate::sync::atomic::{AtomicU64, Ordering};

/// How far the hinted count scans before it gallops instead.
const HINT_SCAN: u64 = 8;

impl<'a> RingRef<'a> {
    /// `L` minus the admissions in the window `(t_eff - W, t_eff]` after
    /// admitting `n` units at index `c`. Loads only, no retry.
    ///
    /// Exact at the linearization point when called before the commit CAS
    /// on slot `c` succeeds: the slots read hold admissions `c + n - L ..
    /// c - 1`, all committed (their claims happen-before our Acquire load of
    /// slot `c - 1`), and only admissions `>= c + n` overwrite them, which
    /// claim in index order after ours. If our CAS fails, the count is
    /// thrown away with the attempt.
    ///
    /// The candidates' deadlines never decrease along the index (the
    /// clamp), so "alive at `t_eff`" reads false ... false, true ... true,
    /// and the count is the index of the first alive candidate.
    ///
    /// **The expiry hint** (a ring that keeps one: a [`crate::Limiter`]'s, a
    /// keyed state's of 64 slots or more)
    /// makes that search O(1) loads amortised whatever the number of live
    /// admissions: it holds **how many candidates were alive** when the last
    /// committed admission counted. Under steady traffic one admission
    /// expires for each one made, so that number stays put or moves by one
    /// (on a real clock the gaps between calls jitter: one count in five
    /// moves), and the next count reads it from three words at and before
    /// where the hint says ([`Hinted::bracketed`]), with no branch on
    /// whether it held or grew by one. The hint is only a guess: the count
    /// **verifies** it, by finding an expired candidate below the first
    /// live one (then, by the order above, so have all older ones) and a
    /// live one at or above it, and otherwise searches
    /// ([`remaining_hinted`](Self::remaining_hinted)).
    /// So no value of the hint, however stale, torn between racing
    /// admitters or from another lap, can change a count; it only costs
    /// loads. (Loom: `control_unverified_hint_is_caught`,
    /// `control_unbracketed_hint_is_caught`.)
    #[inline(always)]
    pub(super) fn remaining_after(&self, c: u64, n: u64, prev: u64, t_eff: u64) -> Count {
        let g = self.geometry;
        let free = g.len() - n;
        // Fast path: the previous admission expired, so all older ones did.
        if free == 0 || slot::deadline(prev) <= t_eff {
            return Count::kept(free as u32);
        }
        // Candidates: admissions c + n - L .. c - 1 (`free` of them), oldest
        // first, candidate `k` at position `pos(c) + n + k`, so the newest `m`
        // start at position `pos(c) - m`; candidate `free - 1` (the previous
        // admission) is alive here.
        let at = g.position(c);
        let Some(hint) = self.expiry_hint() else {
            return self.remaining_gallop(g.position_plus(at, n), free, t_eff);
        };
        let hinted = self.hinted(hint, at, free);
        match hinted.bracketed(free, t_eff, g.flaw()) {
            Some(live) => Count::found(free, live, hinted.live),
            // Fewer alive than the hint says, or two or more more: search.
            None => self.remaining_hinted(hinted, at, n, free, t_eff),
        }
    }

    /// One policy's count among several ([`remaining_multi`]): `L_i -
    /// n` minus the admissions alive after `n` units at position `at`,
    /// among the `free = L_i - n` candidates (the newest at `at - 1`, the
    /// oldest `skip = n + L - L_i` places after `at`) whose deadline is
    /// after `t` (the policy's threshold: see `remaining_multi`). The same
    /// count as [`remaining_after`](Self::remaining_after)'s — no
    /// candidate alive, or the verified expiry hint `hint` and its search
    /// — or, for a ring that keeps no hints (a keyed state's below 64
    /// slots), the gallop.
    /// Loads only, exact before the commit CAS by the same argument.
    ///
    /// [`remaining_multi`]: Self::remaining_multi
    #[inline(always)]
    pub(super) fn remaining_policy(
        &self,
        hint: Option<&AtomicU64>,
        at: usize,
        skip: u64,
        free: u64,
        t: u64,
    ) -> Count {
        let g = self.geometry;
        // The newest candidate expired, so did all older ones.
        if free == 0 || !self.live_at(g.position_before(at), t) {
            return Count::kept(free as u32);
        }
        let Some(hint) = hint else {
            let base = g.position_plus(at, skip);
            return Count::kept(first_alive(free, |k| self.alive(base, k, t)) as u32);
        };
        let hinted = self.hinted(hint, at, free);
        match hinted.bracketed(free, t, g.flaw()) {
            Some(live) => Count::found(free, live, hinted.live),
            None => self.remaining_hinted(hinted, at, skip, free, t),
        }
    }

    /// The search of [`remaining_after`](Self::remaining_after) on a ring
    /// that keeps no expiry hint. Out of line: the admission path calls it,
    /// while a denial (or an admission into an empty window) keeps the
    /// inlined check small.
    #[inline(never)]
    fn remaining_gallop(self, base: usize, free: u64, t_eff: u64) -> Count {
        Count::kept(first_alive(free, |k| self.alive(base, k, t_eff)) as u32)
    }

    /// The expiry hint, if this ring keeps one and is large enough to use it.
    #[inline(always)]
    fn expiry_hint(&self) -> Option<&'a AtomicU64> {
        let g = self.geometry;
        self.expiry.filter(|_| g.hinted())
    }

    /// Whether candidate `k` (at position `base + k`) is alive at `t_eff`.
    #[inline(always)]
    fn alive(&self, base: usize, k: u64, t_eff: u64) -> bool {
        self.live_at(self.geometry.position_plus(base, k), t_eff)
    }

    /// Whether the candidate at position `pos` is alive at `t_eff`.
    #[inline(always)]
    pub(super) fn live_at(&self, pos: usize, t_eff: u64) -> bool {
        slot::alive_at(self.word(pos), t_eff)
    }

    /// A candidate's word, at position `pos`.
    #[inline(always)]
    fn word(&self, pos: usize) -> u64 {
        self.load_candidate(self.slot(pos))
    }

    /// A candidate's word, from its slot.
    #[inline(always)]
    fn load_candidate(&self, slot: &AtomicU64) -> u64 {
        // Relaxed: an estimate that publishes nothing (the candidates' words
        // are final for our index: see `remaining_after`).
        slot.load(Ordering::Relaxed)
    }

    /// The search of [`remaining_after`](Self::remaining_after) (and of
    /// [`remaining_policy`](Self::remaining_policy), whose candidate 0
    /// lies `n` places after `at`, as a single ring's does with `n` units) from the
    /// expiry hint, when the live count moved other than
    /// [`Hinted::bracketed`] takes (or the flaws ask for it): from the
    /// candidate the hint names (the oldest of as many live ones as the
    /// last count found) and the one before it, one more before it or up
    /// to three after it, then [`remaining_far`](Self::remaining_far). The
    /// [`Count`] it returns carries the live count it found.
    ///
    /// Why a count and not a position: where the first live admission
    /// lies moves with every expiry, so a position hint is found one or two
    /// candidates off by most counts and stored by every other one (the
    /// live count measures 0.93-0.95 of that search's time, BENCHMARKS.md).
    #[inline(always)]
    fn remaining_hinted(&self, hinted: Hinted, at: usize, n: u64, free: u64, t_eff: u64) -> Count {
        let g = self.geometry;
        let live = |pos: usize| self.live_at(pos, t_eff);
        let alive = |word: u64| slot::alive_at(word, t_eff);
        let Hinted {
            live: guessed,
            before,
            mut named,
            ..
        } = hinted;
        // `m` candidates alive from position `pos` on (candidate `free - m`).
        let mut m = guessed;
        let mut pos = g.position_minus(at, m);
        let ahead = g.flaw() != Flaw::TrustHint && m < free && alive(before);
        if ahead {
            // More alive than last time: one more, usually.
            if m + 1 == free || !live(g.position_minus(pos, 2)) {
                return Count::found(free, m + 1, guessed);
            }
        } else {
            // The candidate before `pos` expired, so did all older ones:
            // scan forward (candidate `free - 1` is alive).
            for _ in 0..4 {
                if m == 1 || alive(named) {
                    return Count::found(free, m, guessed);
                }
                m -= 1;
                pos = g.position_after(pos);
                named = self.word(pos);
            }
            m += 4;
        }
        let k = self.remaining_far(g.position_plus(at, n), free, free - m, ahead, t_eff);
        Count::found(free, free - k, guessed)
    }

    /// The [`Hinted`] words for an admission at position `at` with `free`
    /// candidates: the hint's live count `m` (clamped to `1..=free`;
    /// candidate `free - 1` is alive, so at least one is) and the words at
    /// positions `at - m - 2 ..= at - m` (candidates `free - m - 2 ..=
    /// free - m`; when `m` is within two of `free` a position holds no
    /// candidate, and [`Hinted::bracketed`] does not read its word).
    #[inline(always)]
    fn hinted(&self, hint: &AtomicU64, at: usize, free: u64) -> Hinted {
        let g = self.geometry;
        // Relaxed: the hint is a guess, verified by the search; it orders
        // nothing.
        let live = hint.load(Ordering::Relaxed).clamp(1, free);
        let pos = g.position_minus(at, live);
        // The three positions side by side, unless they wrap past 0: one
        // bounds check for the three words, and no wrap arithmetic for the
        // two before `pos`. Each branch loads its own words: choosing the
        // three slots first and loading them after the choice costs 5-18
        // more instructions a count (`ring_calls`, time passed in).
        if let Some([older, before, named]) = pos
            .checked_sub(2)
            .and_then(|first| self.slots.get(first..=pos))
            .and_then(|words| <&[AtomicU64; 3]>::try_from(words).ok())
        {
            return Hinted {
                live,
                older: self.load_candidate(older),
                before: self.load_candidate(before),
                named: self.load_candidate(named),
            };
        }
        let before = g.position_before(pos);
        Hinted {
            live,
            older: self.word(g.position_before(before)),
            before: self.word(before),
            named: self.word(pos),
        }
    }

    /// The hinted search's rare cases: two or more candidates alive before
    /// the hinted one (`ahead`: candidate `k - 1` is), or four or more
    /// expired from it on.
    ///
    /// Takes the view by value, as every out-of-line path does: a `&self`
    /// call gives the caller's [`RingRef`] an address, so the inlined hot
    /// path keeps its fields on the stack and reloads them (about 20 more
    /// instructions per `check`, time passed in).
    #[cold]
    #[inline(never)]
    fn remaining_far(self, base: usize, free: u64, k: u64, ahead: bool, t_eff: u64) -> u64 {
        let alive = |k: u64| self.alive(base, k, t_eff);
        if ahead {
            // Search the candidates before the hinted one (k - 1 is alive).
            return first_alive(k, alive);
        }
        // Candidates k .. k + 3 expired: scan on, then gallop.
        let mut k = k + 4;
        for _ in 0..HINT_SCAN {
            if k + 1 >= free || alive(k) {
                return k.min(free - 1);
            }
            k += 1;
        }
        k + first_alive(free - k, |j| alive(k + j))
    }

    /// **When a count's `remaining` next grows**: the deadline of the
    /// oldest admission alive after the new one at position `at` (deadline
    /// `d`) — candidate `remaining` of the `free` counted from `skip` places
    /// after `at` (the first alive one), or the new admission itself when
    /// every candidate has expired. For a single admission `c` on one
    /// policy, `skip = 1` and `free = L - 1`; for policy `i` of several,
    /// those of [`remaining_policy`](Self::remaining_policy). Read before
    /// the commit CAS, like the count and by the same argument (the
    /// candidate's word is final for our index).
    #[inline(always)]
    pub(super) fn growth_after(
        &self,
        at: usize,
        skip: u64,
        free: u64,
        remaining: u32,
        d: u64,
    ) -> u64 {
        let remaining = u64::from(remaining);
        if remaining >= free {
            return d;
        }
        slot::deadline(self.word(self.geometry.position_plus(at, skip + remaining)))
    }

    /// After the admission that made `count` committed: store the live
    /// count it found in the expiry hint, if a hinted count ran ([`Count`]:
    /// whether or not it moved) — only if it moved by two or more when
    /// `racing` (an admission the scan path made, where
    /// admitters race: there the live count moves by one from call to call
    /// as the threads' admissions interleave, a store to `head`'s line
    /// costs the other thread a miss, and a hint one off costs at most a
    /// short search).
    /// Only after the commit CAS succeeded: a peek's or a failed attempt's
    /// effective time may be later than the next admission's, so its hint
    /// would count fewer live candidates than that admission finds
    /// (harmless, being verified, but a wasted search).
    #[inline(always)]
    pub(super) fn note_expired(&self, count: Count, racing: bool) {
        if count.hint != Count::KEEP
            && !(racing && count.hint.abs_diff(count.hinted) <= 1)
            // A hinted count ran, so the ring keeps a hint (`expiry_hint`).
            && let Some(hint) = self.expiry
        {
            // Relaxed: see `remaining_hinted`; racing admitters may store in
            // either order, any value is safe.
            hint.store(u64::from(count.hint), Ordering::Relaxed);
        }
    }
}

impl RingRef<'_> {
    /// After an admission with several policies committed: store in each
    /// policy's expiry hint the live count its count found (`noted`, by
    /// [`Count::noted`]; [`Count::KEEP`] for none), as
    /// [`note_expired`](Self::note_expired) does for one policy, and only
    /// then, for the same reason.
    #[inline(always)]
    pub(super) fn note_policies(&self, noted: &[u32]) {
        for (hint, &live) in self.policy_expiry.iter().zip(noted) {
            if live != Count::KEEP {
                // Relaxed: see `remaining_hinted`; racing admitters may
                // store in either order, any value is safe.
                hint.store(u64::from(live), Ordering::Relaxed);
            }
        }
    }
}

/// What [`RingRef::remaining_after`] counted: `remaining`, and the live
/// count the expiry hint takes once the admission that counted commits
/// ([`RingRef::note_expired`]; one policy's of several:
/// [`Count::noted`] and [`RingRef::note_policies`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Count {
    pub(super) remaining: u32,
    /// How many candidates the hinted count found alive, to store in the
    /// hint ([`RingRef::note_expired`]); [`KEEP`](Count::KEEP) when no
    /// hinted count ran.
    hint: u32,
    /// The live count the hint said.
    hinted: u32,
}

impl Count {
    /// No hint to record (live counts are below `2^20`).
    pub(super) const KEEP: u32 = u32::MAX;

    /// A count that moves no hint: no search ran, or the ring keeps none.
    #[inline(always)]
    pub(super) const fn kept(remaining: u32) -> Count {
        Count {
            remaining,
            hint: Count::KEEP,
            hinted: Count::KEEP,
        }
    }

    /// The live count to store in the expiry hint once the admission
    /// that counted commits, or [`KEEP`](Count::KEEP) (no hinted count
    /// ran).
    #[inline(always)]
    pub(super) const fn noted(&self) -> u32 {
        self.hint
    }

    /// The hinted count found `live` of `free` candidates alive, having
    /// guessed `hinted`. Recorded even when `live == hinted`: a single's
    /// fast path then stores the hint on every counted admission, with no
    /// branch on whether it moved (that branch goes the other way in one
    /// count of five on a real clock, BENCHMARKS.md, "Where the time goes");
    /// the store lands on `head`'s line, which the fast path's
    /// frontier guess writes anyway.
    #[inline(always)]
    fn found(free: u64, live: u64, hinted: u64) -> Count {
        Count {
            remaining: (free - live) as u32,
            hint: live as u32,
            hinted: hinted as u32,
        }
    }
}

/// Where the hinted count starts ([`RingRef::remaining_after`]): the
/// expiry hint's live count `m`, the words of the candidate it names (the
/// oldest of the `m` newest) and of the two before it.
#[derive(Clone, Copy, Debug)]
struct Hinted {
    live: u64,
    /// Candidate `free - m - 2`.
    older: u64,
    /// Candidate `free - m - 1`.
    before: u64,
    /// Candidate `free - m`.
    named: u64,
}

impl Hinted {
    /// **The bracketed count**: the live count at `t_eff`, if the hint
    /// says it or one fewer (the first live candidate `b` is `k = free - m`
    /// or `k - 1`), else `None` (search).
    ///
    /// Read liveness as a sequence over all indices: false below candidate
    /// 0 (nothing older counts), then as the candidates' deadlines say —
    /// false ... false, true ... true (the clamp). If index `k - 2` is dead
    /// and `k` alive, `b` is `k - 1` or `k`, and `k - 1` says which: `free -
    /// b = m + [k - 1 alive]`. Both ends are tested, so a hint of any value
    /// yields the exact count or `None`; a hint that held or was one short
    /// — half the moves a real clock's jitter makes, and every move of a
    /// coarse clock's growing window — yields the count with no branch on
    /// which. (`control_unbracketed_hint_is_caught` skips the two tests.)
    ///
    /// Why three words and not four (one after the named candidate too,
    /// taking a move of one either way): measured on a real clock it saved
    /// no more, and on a coarse clock the fourth load cost 4-10%
    /// (BENCHMARKS.md, "Where the time goes").
    #[inline(always)]
    fn bracketed(&self, free: u64, t_eff: u64, flaw: Flaw) -> Option<u64> {
        let alive = |word: u64| slot::alive_at(word, t_eff);
        let m = self.live;
        let k = free - m;
        let below = k >= 2 && alive(self.older);
        let named = alive(self.named);
        let inside = match flaw {
            Flaw::UnbracketedHint => true,
            Flaw::TrustHint => false,
            _ => !below & named,
        };
        let before = k >= 1 && alive(self.before);
        inside.then(|| m + u64::from(before))
    }
}

/// Among candidates `0..free` whose liveness is false ... false, true ...
/// true, with candidate `free - 1` alive, the index of the first alive one
/// (so the number of expired ones). Gallops back from the newest (a sparse
/// key's live entries are the newest few, next to `head`, on lines already
/// hot), then bisects.
#[inline]
fn first_alive(free: u64, alive: impl Fn(u64) -> bool) -> u64 {
    // A full window: the oldest candidate sits right after the new slot,
    // usually on the same cache line.
    if alive(0) {
        return 0;
    }
    let mut hi = free - 1; // alive
    let mut step = 1;
    let mut lo = loop {
        let probe = hi.saturating_sub(step);
        if probe == 0 {
            break 0; // known expired
        }
        if !alive(probe) {
            break probe;
        }
        hi = probe;
        step *= 2;
    };
    // Candidate `lo` expired, candidate `hi` alive.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if alive(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}
