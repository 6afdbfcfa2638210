//! [`Geometry`]: the immutable shape of a ring — positions, stamps, the
//! index arithmetic, the clamp — and [`Now`], a request's time.

use super::word::{head, slot};
use crate::flaw::Flaw;

/// The most a lazy `head` lags the frontier (docs/design.md §4: `B < L`).
/// A larger `B` makes the fast path's head CAS rarer (one per `B + 1`
/// admissions, or once a lap when `L <= B + 1`) and the scan after a lost
/// race longer (up to `B` slots, two cache lines at 16). 16 is chosen by
/// measurement beside 4, 8 and 32 (BENCHMARKS.md, "Where the time goes"):
/// against 4, `admit` 4-5% faster on one thread and 15-28% faster on two
/// threads sharing a key, `check` between two threads within noise.
const MAX_LAG: u64 = 16;

/// The smallest ring that keeps an expiry hint: below it the gallop reads
/// at most three slots anyway, and the hint's extra load and store cost
/// more than they save.
const HINT_MIN_LIMIT: u64 = 8;

/// The smallest keyed state that keeps an expiry hint: the hint is one
/// more word in every key's allocation (one per policy with several), so a
/// keyed ring keeps one only where that word is at most 1/64 of the ring
/// (`8 L` bytes; eight policies' at most 1/8) and the gallop it replaces
/// reads six slots or more (`log2 L`), over as many lines.
const KEYED_HINT_MIN_LIMIT: u64 = 64;

/// The immutable shape of a ring: limit, window and the index layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// `L`, the number of slots.
    limit: u64,
    /// `W` in nanoseconds.
    window: u64,
    /// `2^bits - 1`: the position field of an index.
    mask: u64,
    /// `2^bits - L`: added when an index steps past position `L - 1`.
    gap: u64,
    /// `B`: how far `head` may lag the frontier (`min(L - 1, MAX_LAG)`).
    lag: u64,
    /// Larger timestamps saturate here, so `now + W <= MAX_DEADLINE`.
    max_now: u64,
    /// With several policies: how much longer than `W` the longest window
    /// is (an admission counts until `t + W + linger`). 0 with one policy.
    linger: u64,
    flaw: Flaw,
    /// (Model checker only) Take the general path for every single: its
    /// lazy-head races then arise with two threads instead of three, where
    /// loom can afford to look (docs/design.md §5).
    general_only: bool,
}

/// The time of one request, read once, floored and clamped once
/// (docs/design.md §6): the one `now` the ring and the answer use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Now {
    /// The caller's reading, clamped to the encodable range: a denial's
    /// wait counts from it.
    pub(crate) read: u64,
    /// `max(read, floor)`, clamped: the time the ring judges at (a keyed
    /// limiter's eviction floor, see [`crate::floor`]; 0 for one key).
    pub(crate) judged: u64,
}

impl Now {
    /// A time read and judged alike (no floor, within range).
    #[inline(always)]
    pub(crate) const fn at(t: u64) -> Now {
        Now { read: t, judged: t }
    }
}

impl Geometry {
    /// Validated by [`crate::config`]: `1 <= limit <= MAX_LIMIT`,
    /// `1 <= window <= MAX_WINDOW`.
    pub(crate) fn new(limit: u32, window: u64) -> Self {
        debug_assert!((1..=super::word::MAX_LIMIT).contains(&limit));
        // MAX_WINDOW = 2^61 <= MAX_DEADLINE / 2 + 1: `max_now` stays >= 0.
        debug_assert!((1..=1 << 61).contains(&window));
        let bits = u32::BITS - (limit - 1).leading_zeros();
        Geometry {
            limit: u64::from(limit),
            window,
            mask: (1u64 << bits) - 1,
            gap: (1u64 << bits) - u64::from(limit),
            lag: u64::from(limit - 1).min(MAX_LAG),
            max_now: slot::MAX_DEADLINE - window,
            linger: 0,
            flaw: Flaw::None,
            general_only: false,
        }
    }

    /// The geometry of a multi-policy ring whose longest window is `linger`
    /// longer than this one's.
    pub(crate) fn with_linger(mut self, linger: u64) -> Self {
        self.linger = linger;
        self
    }

    /// The same window and protocol variant on a ring of `limit` slots
    /// whose admissions count until `horizon` (at least `W`) after their
    /// time: a carried ring's ([`crate::ring::Shape::successor`]).
    pub(crate) fn resized(&self, limit: u32, horizon: u64) -> Self {
        debug_assert!(horizon >= self.window);
        Geometry {
            flaw: self.flaw,
            general_only: self.general_only,
            ..Geometry::new(limit, self.window)
        }
        .with_linger(horizon - self.window)
    }

    #[cfg_attr(not(slidelog_loom), allow(dead_code))]
    pub(crate) fn with_flaw(mut self, flaw: Flaw) -> Self {
        self.flaw = flaw;
        self
    }

    #[cfg_attr(not(slidelog_loom), allow(dead_code))]
    pub(crate) fn with_general_only(mut self) -> Self {
        self.general_only = true;
        self
    }

    /// Whether singles skip the fast path (only ever under the model
    /// checker).
    #[inline]
    pub(super) fn general_only(&self) -> bool {
        cfg!(slidelog_loom) && self.general_only
    }

    /// The protocol variant: [`Flaw::None`] outside the model checker.
    #[inline]
    pub(crate) fn flaw(&self) -> Flaw {
        self.flaw.active()
    }

    /// `L`.
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// `L` as an index distance.
    #[inline]
    pub(super) fn len(&self) -> u64 {
        self.limit
    }

    /// `W` in nanoseconds.
    #[inline]
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// How long after its ring deadline (`t + W`) an admission still counts
    /// for some policy.
    #[inline]
    pub(crate) fn linger(&self) -> u64 {
        self.linger
    }

    /// How long after its time an admission counts for some policy (or,
    /// on a carried ring, is kept for a later reconfiguration): `W +
    /// linger`.
    #[inline]
    pub(crate) fn horizon(&self) -> u64 {
        self.window + self.linger
    }

    /// `B`, the most a lazy `head` lags the frontier.
    #[inline]
    pub(super) fn lag(&self) -> u64 {
        self.lag
    }

    /// Whether a ring of this size uses an expiry hint.
    #[inline]
    pub(super) fn hinted(&self) -> bool {
        self.hinted_limit(self.limit)
    }

    /// Whether a count over `limit` candidates uses an expiry hint (a
    /// policy's of several, [`crate::ring::RingRef::remaining_multi`]): as
    /// a ring of `limit` slots would.
    #[inline]
    pub(super) fn hinted_limit(&self, limit: u64) -> bool {
        limit >= HINT_MIN_LIMIT
    }

    /// Whether a keyed state's ring of this size keeps an expiry hint word
    /// ([`KEYED_HINT_MIN_LIMIT`]).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline]
    pub(super) fn keyed_hint(&self) -> bool {
        self.limit >= KEYED_HINT_MIN_LIMIT
    }

    /// `index mod L`, a mask.
    #[inline]
    pub(super) fn position(&self, index: u64) -> usize {
        (index & self.mask) as usize
    }

    /// The stamp that admission `index` writes: the inverted parity of its lap.
    #[inline]
    pub(super) fn stamp(&self, index: u64) -> u64 {
        // The lap's lowest bit is the one just above the position field
        // (`mask + 1`): a test, no shift by a variable count.
        u64::from(index & (self.mask + 1) == 0) * slot::STAMP
    }

    /// Whether `word`, read from the slot of `index`, was written by
    /// admission `index` itself ([`slot::claimed_by`]).
    #[inline]
    pub(super) fn claimed(&self, word: u64, index: u64) -> bool {
        slot::claimed_by(word, self.stamp(index))
    }

    /// `index + n` for `n <= L`, in mixed radix: `{ lap: lap + 1, position:
    /// position + n - L }` when the position passes `L - 1`.
    #[inline]
    pub(super) fn advance(&self, index: u64, n: u64) -> u64 {
        self.advance_at(index, self.position(index), n)
    }

    /// [`advance`](Self::advance) from `index` at position `pos` (its
    /// position, already at hand).
    #[inline]
    pub(super) fn advance_at(&self, index: u64, pos: usize, n: u64) -> u64 {
        debug_assert!(n <= self.limit);
        debug_assert_eq!(pos, self.position(index));
        if pos as u64 + n >= self.limit {
            (index + n + self.gap) & head::INDEX_MASK
        } else {
            index + n
        }
    }

    /// The position `k < L` places after `pos`.
    #[inline]
    pub(super) fn position_plus(&self, pos: usize, k: u64) -> usize {
        let p = pos as u64 + k;
        (if p >= self.limit { p - self.limit } else { p }) as usize
    }

    /// The position `m <= L` places before `pos`.
    #[inline]
    pub(super) fn position_minus(&self, pos: usize, m: u64) -> usize {
        let p = pos as u64;
        (if p >= m { p - m } else { p + self.limit - m }) as usize
    }

    /// The position after `pos`.
    #[inline]
    pub(super) fn position_after(&self, pos: usize) -> usize {
        self.position_plus(pos, 1)
    }

    /// The position before `pos`.
    #[inline]
    pub(super) fn position_before(&self, pos: usize) -> usize {
        self.position_minus(pos, 1)
    }

    /// **The clamp** (docs/design.md §2): the deadline `t_eff + W` of an
    /// admission at `now` (judged) whose previous admission wrote `prev`:
    /// `t_eff = max(now, t_eff of the previous admission)`, so effective
    /// times never decrease along the log.
    #[inline(always)]
    pub(super) fn deadline_for(&self, now: u64, prev: u64) -> u64 {
        debug_assert!(now <= self.max_now, "`now` is judged (clamped) time");
        if self.flaw() == Flaw::NoClamp {
            now + self.window
        } else {
            (now + self.window).max(slot::deadline(prev))
        }
    }

    /// Timestamps past the encodable range saturate (146 years after the
    /// clock's origin).
    #[inline]
    pub(crate) fn clamp(&self, t: u64) -> u64 {
        t.min(self.max_now)
    }

    /// A request read at `read` and judged no earlier than `floor`.
    ///
    /// The read's clamp is a branch, not a select: a reading past
    /// `max_now` takes a cold call. Every path that reads the time waits
    /// for its judged value, and a predicted branch takes the clamp off
    /// that chain where a conditional move sits on it.
    #[inline(always)]
    pub(crate) fn now(&self, read: u64, floor: u64) -> Now {
        let read = if read > self.max_now {
            saturated(self.max_now)
        } else {
            read
        };
        Now {
            read,
            judged: read.max(self.clamp(floor)),
        }
    }
}

/// A reading past the encodable range, saturated (see [`Geometry::now`]).
#[cold]
#[inline(never)]
fn saturated(max_now: u64) -> u64 {
    max_now
}
