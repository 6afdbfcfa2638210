//! The lock-free ring: the exact sliding-window log of one key.
//!
//! A key's log never needs more than its last `L` admissions: a request is
//! admissible iff the `L`-th most recent admission has expired. So each key
//! owns `L` slots of 8 bytes plus one `head` word, and the slot that the next
//! admission overwrites is the oldest one (docs/design.md §2).
//!
//! # Words
//!
//! A **slot** holds the *deadline* of the admission that last wrote it
//! (`t_eff + W`, so "expired at `now`" is `deadline <= now` and `t - W` never
//! underflows), a one-bit *stamp* (the lap parity of the admission index that
//! wrote it) and a `BATCH` bit marking the first slot of a weighted
//! admission. The all-zero word is "written in lap -1 at deadline 0": a fresh
//! ring reads as a ring whose admissions all expired long ago.
//!
//! **`head`** holds the index of the next admission, laid out in mixed radix
//! as `lap << bits | position` so that `index mod L`, the lap parity and
//! "next" are masks and adds (no division on any path), and, in its top bits,
//! the size of a weighted admission that has announced itself at that index
//! (`PENDING`).
//!
//! # Protocol (docs/design.md §4)
//!
//! Admission `c` is the compare-and-swap of slot `c mod L` from the value
//! written by admission `c - L` to its own deadline: that CAS is the
//! linearization point. Deadlines in one slot grow by at least `W` per write,
//! so the CAS cannot succeed on a recycled value (no ABA). `head` is advanced
//! afterwards, by the admitter or by any reader that finds the slot already
//! claimed (the stamp tells a claimed slot from a stale one), and readers
//! re-validate `head` after reading the slots, seqlock-style, so a reader that
//! slept across a lap never judges by the wrong slot. A denial only loads.

use crate::decision::{Admitted, Denied};
use crate::floor::Floor;
use crate::sync::Backoff;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The codec of a slot word (docs/design.md §3).
pub(crate) mod slot {
    /// Lap-parity stamp of the admission that wrote the slot. Admission
    /// index `c` writes `!(lap(c) & 1)`, so the all-zero initial word reads as
    /// written in lap -1.
    pub(crate) const STAMP: u64 = 1;
    /// Set on the first slot of a weighted admission; its size is in the
    /// `PENDING` field of `head` until the batch is filled.
    pub(crate) const BATCH: u64 = 1 << 1;
    /// The deadline sits above the two flag bits.
    pub(crate) const DEADLINE_SHIFT: u32 = 2;
    /// A ring that was closed for eviction: every admission CAS fails on it.
    /// (Its deadline field would be `2^62 - 1`, which no admission writes.)
    pub(crate) const CLOSED: u64 = u64::MAX;
    /// The largest deadline an admission writes.
    pub(crate) const MAX_DEADLINE: u64 = (1 << 62) - 2;

    /// The deadline (`t_eff + W`) of the admission that wrote `word`.
    #[inline]
    pub(crate) const fn deadline(word: u64) -> u64 {
        word >> DEADLINE_SHIFT
    }

    /// Packs a committed slot word. `stamp` is 0 or [`STAMP`].
    #[inline]
    pub(crate) const fn pack(deadline: u64, stamp: u64, batch: bool) -> u64 {
        debug_assert!(deadline <= MAX_DEADLINE);
        debug_assert!(stamp <= STAMP);
        (deadline << DEADLINE_SHIFT) | if batch { BATCH } else { 0 } | stamp
    }
}

/// The codec of the `head` word.
pub(crate) mod head {
    /// Bits of the admission index (`lap << bits | position`). The lap wraps
    /// within them; the parity still alternates because the lap field is at
    /// least 23 bits wide (an even number of laps per wrap).
    pub(crate) const INDEX_BITS: u32 = 43;
    /// Mask of the admission index.
    pub(crate) const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
    /// The size `n >= 2` of a weighted admission announced at this index, or 0.
    pub(crate) const PENDING_SHIFT: u32 = INDEX_BITS;

    /// The admission index in a head word.
    #[inline]
    pub(crate) const fn index(word: u64) -> u64 {
        word & INDEX_MASK
    }

    /// The announced weight in a head word (0: none).
    #[inline]
    pub(crate) const fn pending(word: u64) -> u64 {
        word >> PENDING_SHIFT
    }

    /// A head word announcing a weighted admission of `n` units at `index`.
    #[inline]
    pub(crate) const fn with_pending(index: u64, n: u64) -> u64 {
        debug_assert!(index <= INDEX_MASK);
        (n << PENDING_SHIFT) | index
    }
}

/// The most a lazy `head` lags the frontier (docs/design.md §4: `B < L`).
const MAX_LAG: u64 = 4;

/// The largest limit: positions take at most 20 bits, so the lap keeps at
/// least 23 bits and the `PENDING` field (21 bits) can hold any weight.
pub(crate) const MAX_LIMIT: u32 = 1 << 20;

/// Deliberately broken variants of the protocol, compiled only for the model
/// checker: each must be caught by a loom model (a proof that cannot fail
/// proves nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(not(slidelog_loom), allow(dead_code))]
#[allow(unreachable_pub)]
pub enum Flaw {
    /// The protocol as designed.
    #[default]
    None,
    /// Commit a single admission with a load then a store instead of a CAS.
    LoadThenStore,
    /// Skip the seqlock re-validation of `head`.
    NoRevalidate,
    /// Ignore the stamp: judge a claimed slot as if it were the old one
    /// (no helping).
    NoHelp,
    /// Do not clamp `t_eff` to the previous admission.
    NoClamp,
    /// Take a weighted request's units one single admission at a time.
    Piecewise,
    /// Report a ring closed for eviction without closing it.
    FakeClose,
    /// (Weighted requests) Trust a view in which a slot past `head`'s was
    /// claimed behind a lazy head (the spurious denial of issue #14); with
    /// several policies, trust a slot past the frontier that a batch's fill
    /// already wrote.
    TornWeighted,
    /// (Several policies) Judge a request by the ring's own policy (the
    /// largest limit) only, ignoring the others.
    OnePolicy,
    /// (Keyed eviction) Close an idle state without raising the eviction
    /// floor first: a stale reading admits over the evicted history.
    NoFloor,
    /// (Expiry hint) Ignore the hint: count with the gallop alone (a
    /// control that the hint changes no count).
    NoHint,
    /// (Expiry hint) Trust the hint without verifying it, and let a peek
    /// record one from its own, possibly later, effective time: the count
    /// then skips live admissions.
    TrustHint,
    /// (Counter) Merge into a cell that already holds a later sub-window.
    MergeOverLater,
    /// (Counter) Move head to the new sub-window before archiving the old
    /// one's count and writing the new one's summary.
    ArchiveLate,
    /// (Counter) Leave the count of the sub-window head leaves out of the
    /// new one's summary.
    SummaryWithoutHead,
    /// (Counter) Store the summary instead of keeping the largest: a thread
    /// with a stale head word overwrites the true one.
    SummaryStore,
}

impl Flaw {
    /// This variant under the model checker; [`Flaw::None`] otherwise, so
    /// that the shipped code compiles every broken branch away.
    #[inline]
    pub(crate) fn active(self) -> Flaw {
        if cfg!(slidelog_loom) {
            self
        } else {
            Flaw::None
        }
    }
}

/// The immutable shape of a ring: limit, window and the index layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// `L`, the number of slots.
    limit: u64,
    /// `W` in nanoseconds.
    window: u64,
    /// Width of the position field of an index.
    bits: u32,
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
    /// (Model checker only) Take the general path for every single, as the
    /// protocol did before the fast path: its lazy-head races then arise
    /// with two threads instead of three, where loom can afford to look.
    general_only: bool,
}

/// What the ring answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Admitted at effective time `at` with `remaining` units left under
    /// `policy` (the policy closest to exhaustion; 0 with one policy).
    Admitted { at: u64, remaining: u32, policy: u8 },
    /// Denied: the request is admissible from `available_at` (nanoseconds);
    /// `policy` is the violated policy that waits longest (0 with one).
    Denied { available_at: u64, policy: u8 },
    /// The ring was closed for eviction; look the key up again.
    Closed,
}

/// A consistent view of the ring: `head` did not move while the slots were read.
#[derive(Clone, Copy)]
struct Snapshot {
    /// The head word.
    hw: u64,
    /// `index(hw)`.
    c: u64,
    /// Position of `c`.
    pos: usize,
    /// The stamp admission `c` writes.
    stamp: u64,
    /// Slot `c`: admission `c - L`'s word, or already claimed for `c`.
    s: u64,
    /// Slot `c - 1`: the newest committed admission.
    p: u64,
}

impl Geometry {
    /// Validated by [`crate::config`]: `1 <= limit <= MAX_LIMIT`,
    /// `1 <= window <= MAX_WINDOW`.
    pub(crate) fn new(limit: u32, window: u64) -> Self {
        debug_assert!((1..=MAX_LIMIT).contains(&limit));
        // MAX_WINDOW = 2^61 <= MAX_DEADLINE / 2 + 1: `max_now` stays >= 0.
        debug_assert!((1..=1 << 61).contains(&window));
        let bits = u32::BITS - (limit - 1).leading_zeros();
        Geometry {
            limit: u64::from(limit),
            window,
            bits,
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

    /// How long after its ring deadline (`t + W`) an admission still counts
    /// for some policy.
    #[inline]
    pub(crate) fn linger(&self) -> u64 {
        self.linger
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
    fn general_only(&self) -> bool {
        cfg!(slidelog_loom) && self.general_only
    }

    #[inline]
    fn flaw(&self) -> Flaw {
        self.flaw.active()
    }

    /// `L`.
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// `W` in nanoseconds.
    #[inline]
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// `index mod L`, a mask.
    #[inline]
    fn position(&self, index: u64) -> usize {
        (index & self.mask) as usize
    }

    /// The stamp that admission `index` writes: the inverted parity of its lap.
    #[inline]
    fn stamp(&self, index: u64) -> u64 {
        ((index >> self.bits) & 1) ^ slot::STAMP
    }

    /// `index + n` for `n <= L`, in mixed radix: `{ lap: lap + 1, position:
    /// position + n - L }` when the position passes `L - 1`.
    #[inline]
    fn advance(&self, index: u64, n: u64) -> u64 {
        debug_assert!(n <= self.limit);
        if self.position(index) as u64 + n >= self.limit {
            (index + n + self.gap) & head::INDEX_MASK
        } else {
            index + n
        }
    }

    /// Whether a ring of this size uses an expiry hint: below
    /// `HINT_MIN_LIMIT` slots the gallop reads at most three slots anyway,
    /// and the hint's extra load and store cost more than they save.
    #[inline]
    fn hinted(&self) -> bool {
        self.limit >= HINT_MIN_LIMIT && self.flaw() != Flaw::NoHint
    }

    /// The position `k < L` places after `pos`.
    #[inline]
    fn position_plus(&self, pos: usize, k: u64) -> usize {
        let p = pos as u64 + k;
        (if p >= self.limit { p - self.limit } else { p }) as usize
    }

    /// The position before `pos`.
    #[inline]
    fn position_before(&self, pos: usize) -> usize {
        if pos == 0 {
            self.limit as usize - 1
        } else {
            pos - 1
        }
    }

    /// The caller's answer to `outcome`, for a request made at `now`
    /// (`retry_after` counts from `now`); `None` if the ring was closed.
    #[inline]
    pub(crate) fn decision(&self, outcome: Outcome, now: u64) -> Option<Result<Admitted, Denied>> {
        match outcome {
            Outcome::Admitted {
                at,
                remaining,
                policy,
            } => Some(Ok(Admitted {
                at,
                remaining,
                policy,
            })),
            Outcome::Denied {
                available_at,
                policy,
            } => Some(Err(Denied::rate_limited(
                available_at.saturating_sub(self.clamp_now(now)),
            )
            .with_policy(policy))),
            Outcome::Closed => None,
        }
    }

    /// Timestamps past the encodable range saturate (146 years after the
    /// clock's origin).
    #[inline]
    pub(crate) fn clamp_now(&self, now: u64) -> u64 {
        now.min(self.max_now)
    }
}

/// A borrowed ring: its `head` word and its `L` slots, wherever they live
/// (a padded header for [`crate::Limiter`], one inline allocation per key for
/// [`crate::KeyedLimiter`]).
#[derive(Clone, Copy)]
pub(crate) struct RingRef<'a> {
    pub(crate) geometry: &'a Geometry,
    pub(crate) head: &'a AtomicU64,
    pub(crate) slots: &'a [AtomicU64],
    /// The expiry hint (see `remaining_after`), if the ring keeps one.
    pub(crate) hint: Option<&'a AtomicU64>,
}

impl core::fmt::Debug for RingRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("limit", &self.geometry.limit)
            .field("window_nanos", &self.geometry.window)
            .finish_non_exhaustive()
    }
}

impl<'a> RingRef<'a> {
    #[inline]
    fn slot(&self, pos: usize) -> &'a AtomicU64 {
        debug_assert!(pos < self.slots.len());
        &self.slots[pos]
    }

    /// Slot `c - 1`, the newest committed admission. With `L == 1` it is
    /// slot `c` itself, already read as `s`: reading it twice could see two
    /// different words (e.g. `s` unclaimed and then CLOSED) under one head.
    #[inline(always)]
    fn load_previous(&self, pos: usize, s: u64) -> u64 {
        let before = self.geometry.position_before(pos);
        if before == pos {
            s
        } else {
            // Acquire: see `snapshot`.
            self.slot(before).load(Ordering::Acquire)
        }
    }

    /// Whether the snapshot's slot `c` was already claimed for admission `c`.
    #[inline]
    fn claimed(&self, snap: &Snapshot) -> bool {
        self.geometry.flaw() != Flaw::NoHelp && (snap.s & slot::STAMP) == snap.stamp
    }

    /// Checks `n` units at time `now`: admits them all or none.
    ///
    /// `n` must be in `0..=L` (the caller handles `n > L`). `n == 0` admits
    /// and records nothing.
    #[inline]
    pub(crate) fn check(&self, now: u64, n: u32) -> Outcome {
        if n == 1 {
            self.check_one::<true>(now)
        } else {
            self.check_many(now, n)
        }
    }

    /// One unit at `now`: the common case in straight-line code, the rest
    /// in [`check_one_scan`](Self::check_one_scan).
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
        let now = g.clamp_now(now);
        // Acquire: see `snapshot`.
        let hw = self.head.load(Ordering::Acquire);
        let c = head::index(hw);
        let pos = g.position(c);
        // Acquire on both slot loads: see `snapshot`.
        let s = self.slot(pos).load(Ordering::Acquire);
        let p = self.load_previous(pos, s);
        if s == slot::CLOSED
            || (g.flaw() != Flaw::NoHelp && (s & slot::STAMP) == g.stamp(c))
            // The seqlock's closing read (Relaxed: see `snapshot`).
            || (g.flaw() != Flaw::NoRevalidate && self.head.load(Ordering::Relaxed) != hw)
        {
            return self.check_one_scan::<COUNT>(now);
        }
        let (d, t_eff) = match self.judge_one(now, s, p) {
            Ok(fits) => fits,
            Err(denied) => return denied,
        };
        let word = slot::pack(d, g.stamp(c), false);
        let remaining = self.count_one::<COUNT>(c, p, t_eff);
        if g.flaw() == Flaw::LoadThenStore {
            if self.slot(pos).load(Ordering::Acquire) != s {
                return self.check_one_scan::<COUNT>(now);
            }
            self.slot(pos).store(word, Ordering::Release);
        } else if self
            .slot(pos)
            // Release/Acquire: as in `check_one_scan`.
            .compare_exchange(s, word, Ordering::Release, Ordering::Acquire)
            .is_err()
        {
            return self.check_one_scan::<COUNT>(now);
        }
        self.advance_head(hw, c, c, 1);
        if COUNT && slot::deadline(p) > t_eff {
            // The count searched: keep where it stopped as the hint.
            self.note_expired(c, 1, remaining);
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
        let now = g.clamp_now(now);
        'fresh: loop {
            // Acquire: see `snapshot`.
            let hw = self.head.load(Ordering::Acquire);
            let c = head::index(hw);
            let mut idx = c;
            let mut pos = g.position(c);
            // Acquire on every slot load: see `snapshot`.
            let mut s = self.slot(pos).load(Ordering::Acquire);
            let mut p = self.load_previous(pos, s);
            let mut k = 0u64;
            loop {
                let mut stuck = false;
                while s != slot::CLOSED
                    && g.flaw() != Flaw::NoHelp
                    && (s & slot::STAMP) == g.stamp(idx)
                {
                    if s & slot::BATCH != 0 || k == g.lag {
                        // A batch to fill first, or the frontier is B + 1
                        // ahead: move head along, then look again.
                        stuck = true;
                        break;
                    }
                    k += 1;
                    p = s;
                    idx = g.advance(idx, 1);
                    pos = g.position(idx);
                    s = self.slot(pos).load(Ordering::Acquire);
                }
                // The seqlock's closing read (Relaxed: see `snapshot`).
                if g.flaw() != Flaw::NoRevalidate && self.head.load(Ordering::Relaxed) != hw {
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
                let word = slot::pack(d, g.stamp(idx), false);
                let remaining = self.count_one::<COUNT>(idx, p, t_eff);
                if g.flaw() == Flaw::LoadThenStore {
                    if self.slot(pos).load(Ordering::Acquire) != s {
                        continue 'fresh;
                    }
                    self.slot(pos).store(word, Ordering::Release);
                } else {
                    // Release pairs with the Acquire slot loads of readers:
                    // the head value we read happens-before anyone who sees
                    // this word. Acquire on failure, as for any slot load:
                    // we scan on from the word that beat us (usually the
                    // admission that took `idx`), re-validating head again.
                    if let Err(beaten) = self.slot(pos).compare_exchange(
                        s,
                        word,
                        Ordering::Release,
                        Ordering::Acquire,
                    ) {
                        s = beaten;
                        continue;
                    }
                }
                if k + 1 >= g.lag || (COUNT && remaining == 0) {
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
    /// and whose previous slot holds `p`, at `now` (clamped): `Ok((d,
    /// t_eff))` — its deadline and effective time — if it fits, else the
    /// denial. The clamp: `t_eff = max(now, t_eff of the previous
    /// admission)`.
    #[inline(always)]
    fn judge_one(&self, now: u64, s: u64, p: u64) -> Result<(u64, u64), Outcome> {
        let g = self.geometry;
        let d = if g.flaw() == Flaw::NoClamp {
            now + g.window
        } else {
            (now + g.window).max(slot::deadline(p))
        };
        let t_eff = d - g.window;
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
    /// before its CAS, so that it is the count at the linearization point:
    /// the slots it reads hold admissions older than `index`, which only
    /// admissions after it can overwrite (see `remaining_after`). Not
    /// counted (0) for a caller that does not ask (`admit`).
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
        if s & slot::BATCH != 0 {
            // A batch is announced with head exactly at its index, so it
            // can only be at `c`.
            debug_assert_eq!(idx, c);
            self.help(hw, c, self.geometry.position(c), s);
        } else {
            self.advance_head(hw, c, idx, 1);
        }
    }

    /// The weighted path (`n != 1`).
    #[cold]
    #[inline(never)]
    fn check_many(&self, now: u64, n: u32) -> Outcome {
        let g = self.geometry;
        if g.flaw() == Flaw::Piecewise {
            return self.check_piecewise(now, n);
        }
        let now = g.clamp_now(now);
        let n64 = u64::from(n);
        let backoff = Backoff::new();
        loop {
            let Some((snap, last, d)) = self.frontier(now, n64) else {
                return Outcome::Closed;
            };
            let t_eff = d - g.window;
            if n == 0 {
                return Outcome::Admitted {
                    at: t_eff,
                    remaining: self.remaining_after(snap.c, 0, snap.p, t_eff),
                    policy: 0,
                };
            }
            // Deadlines grow along the index, so the newest of the `n` words
            // this request would overwrite (admission c + n - 1 - L) decides.
            let oldest = slot::deadline(last);
            if oldest > t_eff {
                return Outcome::Denied {
                    available_at: oldest,
                    policy: 0,
                };
            }
            // Counted before the commit, at the linearization point (see
            // `remaining_after`).
            let remaining = self.remaining_after(snap.c, n64, snap.p, t_eff);
            if self.commit_batch(&snap, n64, d, &backoff) {
                if slot::deadline(snap.p) > t_eff && remaining < g.limit as u32 - n {
                    self.note_expired(snap.c, n64, remaining);
                }
                return Outcome::Admitted {
                    at: t_eff,
                    remaining,
                    policy: 0,
                };
            }
        }
    }

    /// What `check(now, n)` would answer now, recording nothing. Loads
    /// only (unless it finds a lagging head to help along).
    pub(crate) fn peek(&self, now: u64, n: u32) -> Outcome {
        let g = self.geometry;
        let now = g.clamp_now(now);
        let n64 = u64::from(n);
        let Some((snap, last, d)) = self.frontier(now, n64) else {
            return Outcome::Closed;
        };
        let t_eff = d - g.window;
        if n > 0 && slot::deadline(last) > t_eff {
            return Outcome::Denied {
                available_at: slot::deadline(last),
                policy: 0,
            };
        }
        let remaining = self.remaining_after(snap.c, n64, snap.p, t_eff);
        if g.flaw() == Flaw::TrustHint && slot::deadline(snap.p) > t_eff {
            // The broken variant: a peek's effective time may be later than
            // the next admission's.
            self.note_expired(snap.c, n64, remaining);
        }
        Outcome::Admitted {
            at: t_eff,
            remaining,
            policy: 0,
        }
    }

    /// A validated view with `head` at the frontier (slot `c` unclaimed,
    /// lagging heads helped along), the word of admission `c + n - 1 - L`
    /// (the newest a request of `n` units would overwrite), and the deadline
    /// `d = t_eff + W` a request at `now` gets (the clamp). `None` if the
    /// ring is closed.
    fn frontier(&self, now: u64, n: u64) -> Option<(Snapshot, u64, u64)> {
        loop {
            // Acquire: see `snapshot`.
            let hw = self.head.load(Ordering::Acquire);
            let Some((snap, last)) = self.snapshot(hw, n) else {
                continue;
            };
            if snap.s == slot::CLOSED {
                return None;
            }
            if self.claimed(&snap) {
                self.help(snap.hw, snap.c, snap.pos, snap.s);
                continue;
            }
            let d = (now + self.geometry.window).max(slot::deadline(snap.p));
            return Some((snap, last, d));
        }
    }

    /// Reads slot `c` (of head word `hw`), slot `c - 1` and the slot of
    /// admission `c + n - 1` (the newest word a request of `n` units would
    /// overwrite), then re-reads `head`: `None` if it moved meanwhile (a torn
    /// view; the caller retries).
    ///
    /// The caller loaded `hw` with Acquire, pairing with the Release head
    /// CASes (advance, help, announce): every slot write that let head reach
    /// `hw` is visible here. Acquire on the slot loads keeps the re-read of
    /// head below them (a later load cannot move before an Acquire load), and
    /// pairs with the Release slot CASes: if a load saw a write made after
    /// head passed `hw`, that head write happens-before the re-read, which
    /// then cannot return `hw` (coherence). So the re-read may be Relaxed.
    fn snapshot(&self, hw: u64, n: u64) -> Option<(Snapshot, u64)> {
        let g = self.geometry;
        let c = head::index(hw);
        let pos = g.position(c);
        let s = self.slot(pos).load(Ordering::Acquire);
        let p = self.load_previous(pos, s);
        let last = if n <= 1 {
            s
        } else {
            let word = self
                .slot(g.position_plus(pos, n - 1))
                .load(Ordering::Acquire);
            // With a lazy head, singles claim slots c, c + 1, ... (and a
            // batch committed at c fills c + 1, ...) without moving head, so
            // the re-validation below cannot see them: a slot past c that
            // already holds its own index's word, while slot c read
            // unclaimed, means slot c was claimed after we read it (claims
            // go in index order). The view is torn; retry (the next read of
            // slot c sees the claim, and the caller helps head along). If
            // slot c read claimed, the caller helps anyway.
            let claimed =
                |w: u64, index: u64| w != slot::CLOSED && (w & slot::STAMP) == g.stamp(index);
            if g.flaw() != Flaw::TornWeighted
                && !claimed(s, c)
                && claimed(word, g.advance(c, n - 1))
            {
                return None;
            }
            word
        };
        if g.flaw() != Flaw::NoRevalidate && self.head.load(Ordering::Relaxed) != hw {
            return None;
        }
        Some((
            Snapshot {
                hw,
                c,
                pos,
                stamp: g.stamp(c),
                s,
                p,
            },
            last,
        ))
    }

    /// Commits a batch of `n >= 2` units with deadline `d` at the frontier
    /// of `snap` (slot `c` read unclaimed under head word `hw`): announce,
    /// commit on slot `c`, fill. `false`: retry with a fresh view (another
    /// announcement stands, head moved, or a single took slot `c`).
    fn commit_batch(&self, snap: &Snapshot, n: u64, d: u64, backoff: &Backoff) -> bool {
        if head::pending(snap.hw) != 0 {
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
        let announced = head::with_pending(snap.c, n);
        if self
            .head
            .compare_exchange(snap.hw, announced, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // Commit on slot c (the linearization point). Head equals our
        // announcement until slot c is claimed, so no other weighted
        // request can commit here; a single may win slot c instead, and
        // then we retry.
        let word = slot::pack(d, snap.stamp, true);
        if self
            .slot(snap.pos)
            .compare_exchange(snap.s, word, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.fill(announced, snap.c, snap.pos, n, d);
        true
    }

    /// The broken weighted path of [`Flaw::Piecewise`]: one unit at a time.
    fn check_piecewise(&self, now: u64, n: u32) -> Outcome {
        // The first unit's time and the last one's count: right whenever no
        // other thread slips in between (the flaw shows as a partial
        // admission, not as a wrong count).
        let mut admitted = None;
        for _ in 0..n {
            match self.check_one::<true>(now) {
                Outcome::Admitted { at, remaining, .. } => {
                    let at = admitted.map_or(at, |(first, _)| first);
                    admitted = Some((at, remaining));
                }
                other => return other,
            }
        }
        let (at, remaining) = admitted.unwrap_or((now, 0));
        Outcome::Admitted {
            at,
            remaining,
            policy: 0,
        }
    }

    /// Slot `c` is claimed but `head` still says `c`: finish that admission's
    /// bookkeeping (fill a batch, advance head) so that nobody waits for it.
    /// (By value and out of line: the hot loop keeps its snapshot in
    /// registers.)
    #[cold]
    #[inline(never)]
    fn help(&self, hw: u64, c: u64, pos: usize, s: u64) {
        if s & slot::BATCH != 0 {
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
    fn advance_head(&self, mut hw: u64, c: u64, idx: u64, n: u64) {
        let next = self.geometry.advance(idx, n);
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
    fn fill(&self, announced: u64, c: u64, pos: usize, n: u64, d: u64) {
        let g = self.geometry;
        for k in 1..n {
            let at = g.position_plus(pos, k);
            let stamp = g.stamp(g.advance(c, k));
            let word = slot::pack(d, stamp, false);
            let mut current = self.slot(at).load(Ordering::Acquire);
            // The slot holds either admission (c + k - L), whose deadline is
            // <= d - W (it was expired at the batch's t_eff), or our fill
            // (deadline d), or — for a helper that arrives a lap late — a
            // later admission, whose deadline is >= d + W. Only the first
            // is ours to overwrite; deadlines never repeat, so no ABA.
            while current != slot::CLOSED && slot::deadline(current) < d {
                // Release/Acquire as for a single commit: whoever advances
                // head has seen this write.
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
    /// **The expiry hint** (a ring that keeps one: [`crate::Limiter`]'s)
    /// makes that search O(1) loads amortised whatever the number of live
    /// admissions: it holds the *position* of the first live admission the
    /// last committed admission found. Effective times never decrease, so
    /// it is usually where the next search ends, a load or two later. The
    /// hint is only a guess: the search **verifies** it, by checking that the
    /// candidate before it has expired (then, by the order above, so have
    /// all older ones) and otherwise searching the candidates before it.
    /// So no value of the hint, however stale, torn between racing
    /// admitters or from another lap, can change a count; it only costs
    /// loads. (Loom: `control_unverified_hint_is_caught`.)
    #[inline(always)]
    fn remaining_after(&self, c: u64, n: u64, prev: u64, t_eff: u64) -> u32 {
        let g = self.geometry;
        let free = g.limit - n;
        // Fast path: the previous admission expired, so all older ones did.
        if free == 0 || slot::deadline(prev) <= t_eff {
            return free as u32;
        }
        // Candidates: admissions c + n - L .. c - 1 (`free` of them), oldest
        // first, at positions `base + k`; candidate `free - 1` (the previous
        // admission) is alive here.
        let base = g.position(g.advance(c, n));
        match self.hint.filter(|_| g.hinted()) {
            Some(hint) => self.remaining_hinted(hint, base, free, t_eff),
            None => first_alive(free, |k| self.alive(base, k, t_eff)) as u32,
        }
    }

    /// Whether candidate `k` (at position `base + k`) is alive at `t_eff`.
    #[inline(always)]
    fn alive(&self, base: usize, k: u64, t_eff: u64) -> bool {
        // Relaxed: an estimate that publishes nothing (the candidates' words
        // are final for our index: see `remaining_after`).
        let word = self
            .slot(self.geometry.position_plus(base, k))
            .load(Ordering::Relaxed);
        slot::deadline(word) > t_eff
    }

    /// The search of [`remaining_after`](Self::remaining_after) from the
    /// expiry hint: usually the candidate before the hinted one (expired)
    /// and the next four (the first alive among them), loaded together and
    /// compared without a branch on each, so the search costs a few loads
    /// on one or two cache lines and one predictable branch.
    #[inline(always)]
    fn remaining_hinted(&self, hint: &AtomicU64, base: usize, free: u64, t_eff: u64) -> u32 {
        let g = self.geometry;
        let alive = |k: u64| self.alive(base, k, t_eff);
        // Relaxed: the hint is a guess, verified below; it orders nothing.
        let guess = hint.load(Ordering::Relaxed) as usize;
        // The candidate at the hinted position; one of our own `n` slots
        // (or garbage) means "all alive" (the window was full).
        let mut k = g.position_plus(guess.min(g.limit as usize - 1), g.limit - base as u64) as u64;
        if k >= free {
            k = 0;
        }
        // Candidate `free - 1` is alive: reading it in place of any later
        // one keeps the order false ... true.
        let ahead = g.flaw() != Flaw::TrustHint && k > 0 && alive(k - 1);
        if !ahead {
            // Candidate k - 1 expired, so did all older ones: scan forward
            // (candidate `free - 1` is alive).
            for _ in 0..4 {
                if k + 1 >= free || alive(k) {
                    return k as u32;
                }
                k += 1;
            }
            k -= 4;
        }
        self.remaining_far(base, free, k, ahead, t_eff)
    }

    /// The hinted search's rare cases: the hint is ahead of the first alive
    /// candidate (stale from another lap), or far behind it.
    #[cold]
    #[inline(never)]
    fn remaining_far(&self, base: usize, free: u64, k: u64, ahead: bool, t_eff: u64) -> u32 {
        let alive = |k: u64| self.alive(base, k, t_eff);
        if ahead {
            // Search the candidates before the hinted one (k - 1 is alive).
            return first_alive(k, alive) as u32;
        }
        // Candidates k .. k + 3 expired: scan on, then gallop.
        let mut k = k + 4;
        for _ in 0..HINT_SCAN {
            if k + 1 >= free || alive(k) {
                return k.min(free - 1) as u32;
            }
            k += 1;
        }
        (k + first_alive(free - k, |j| alive(k + j))) as u32
    }

    /// After admission `c` of `n` units committed with `remaining` left (and
    /// some candidate alive): the first live candidate is at position
    /// `pos(c + n) + remaining`; record it as the expiry hint when the hint
    /// lags it by two or more (each store writes `head`'s line, which every
    /// check reads; the search starts up to three candidates behind at no
    /// extra cost). Only after the commit CAS succeeded: a peek's or a
    /// failed attempt's effective time may be later than the next
    /// admission's, so its hint would point past that admission's first
    /// live candidate (harmless, being verified, but a wasted search).
    #[inline(always)]
    fn note_expired(&self, c: u64, n: u64, remaining: u32) {
        let g = self.geometry;
        if let Some(hint) = self.hint.filter(|_| g.hinted()) {
            let first_alive = g.position_plus(g.position(g.advance(c, n)), u64::from(remaining));
            // Relaxed: see `remaining_hinted`; racing admitters may store in
            // either order, any value is safe.
            let old = hint.load(Ordering::Relaxed) as usize;
            let lag = g.position_plus(first_alive, g.limit - old.min(g.limit as usize - 1) as u64);
            if lag >= 2 {
                hint.store(first_alive as u64, Ordering::Relaxed);
            }
        }
    }

    /// Judges `n` units at `now` against every policy (see
    /// [`check_multi`](Self::check_multi)) on a view with `head` at the
    /// frontier.
    fn judge_multi(&self, now: u64, n: u64, policies: &[Rule]) -> Judged {
        let g = self.geometry;
        let mut words = [0u64; MAX_POLICIES];
        loop {
            // Acquire: see `snapshot`.
            let hw = self.head.load(Ordering::Acquire);
            let Some(snap) = self.snapshot_multi(hw, n, policies, &mut words) else {
                continue;
            };
            if snap.s == slot::CLOSED {
                return Judged::Closed;
            }
            if self.claimed(&snap) {
                self.help(snap.hw, snap.c, snap.pos, snap.s);
                continue;
            }
            let d = (now + g.window).max(slot::deadline(snap.p));
            let t_eff = d - g.window;
            if n == 0 {
                let (remaining, policy) = self.remaining_multi(&snap, 0, t_eff, policies);
                return Judged::Fits {
                    snap,
                    d,
                    remaining,
                    policy,
                };
            }
            // Admission `c + n - 1 - L_i` decides policy `i`: it must have
            // left that policy's window. Its slot lies `n - 1 + L - L_i`
            // places after `c` (fewer than L: n <= L_i).
            let mut torn = false;
            let mut latest: Option<(u64, u8)> = None;
            for (i, (rule, &w)) in policies.iter().zip(&words).enumerate() {
                let k = n - 1 + g.limit - rule.limit;
                // Slot `c` (k == 0) was read unclaimed. Any other must still
                // hold the word of admission `c + k - L`, not that of
                // `c + k` (written by a batch committed at `c` after our
                // read of slot `c`: head does not move until it is filled,
                // so the re-validation cannot see it) nor CLOSED (a ring is
                // closed only at its frontier).
                if g.flaw() != Flaw::TornWeighted
                    && k > 0
                    && (w == slot::CLOSED || (w & slot::STAMP) == g.stamp(g.advance(snap.c, k)))
                {
                    torn = true;
                    break;
                }
                if g.flaw() == Flaw::OnePolicy && rule.limit != g.limit {
                    continue;
                }
                let deadline = slot::deadline(w);
                // Deadline 0: never written (the fresh ring's "lap -1").
                // Otherwise the admission counts for policy `i` until
                // `t + W_i = deadline - W + W_i`.
                if deadline != 0 && deadline + rule.window > d {
                    let available_at = deadline + rule.window - g.window;
                    if latest.is_none_or(|(at, _)| available_at > at) {
                        latest = Some((available_at, i as u8));
                    }
                }
            }
            if torn {
                continue;
            }
            if let Some((available_at, policy)) = latest {
                return Judged::Denied {
                    available_at,
                    policy,
                };
            }
            let (remaining, policy) = self.remaining_multi(&snap, n, t_eff, policies);
            return Judged::Fits {
                snap,
                d,
                remaining,
                policy,
            };
        }
    }

    /// [`snapshot`](Self::snapshot) for several policies: slot `c`, slot
    /// `c - 1` and, into `words`, the slot of admission `c + n - 1 - L_i` for
    /// every policy `i`, all between the load of `hw` and its re-read.
    fn snapshot_multi(
        &self,
        hw: u64,
        n: u64,
        policies: &[Rule],
        words: &mut [u64; MAX_POLICIES],
    ) -> Option<Snapshot> {
        let g = self.geometry;
        let c = head::index(hw);
        let pos = g.position(c);
        // Acquire on every slot load: see `snapshot`.
        let s = self.slot(pos).load(Ordering::Acquire);
        let p = self.load_previous(pos, s);
        if n > 0 {
            for (rule, word) in policies.iter().zip(words.iter_mut()) {
                let k = n - 1 + g.limit - rule.limit;
                *word = if k == 0 {
                    s
                } else {
                    self.slot(g.position_plus(pos, k)).load(Ordering::Acquire)
                };
            }
        }
        // The seqlock's closing read (Relaxed: see `snapshot`).
        if g.flaw() != Flaw::NoRevalidate && self.head.load(Ordering::Relaxed) != hw {
            return None;
        }
        Some(Snapshot {
            hw,
            c,
            pos,
            stamp: g.stamp(c),
            s,
            p,
        })
    }

    /// The fewest units left over the policies after admitting `n` at `c`
    /// at `t_eff`, and the (first) policy with that few. Exact before the
    /// commit CAS, as [`remaining_after`](Self::remaining_after).
    fn remaining_multi(&self, snap: &Snapshot, n: u64, t_eff: u64, policies: &[Rule]) -> (u32, u8) {
        let g = self.geometry;
        let horizon = t_eff + g.window;
        let mut best = (u32::MAX, 0u8);
        for (i, rule) in policies.iter().enumerate() {
            // Candidates: admissions c + n - L_i .. c - 1, oldest first, at
            // `n + L - L_i + k` places after c (fewer than L).
            let free = rule.limit - n;
            let base = n + g.limit - rule.limit;
            let alive = |k: u64| {
                // Relaxed: these slots were published to us by the Acquire
                // loads of the snapshot (see `remaining_after`).
                let deadline = slot::deadline(
                    self.slot(g.position_plus(snap.pos, base + k))
                        .load(Ordering::Relaxed),
                );
                deadline != 0 && deadline + rule.window > horizon
            };
            let remaining = if free == 0 || !alive(free - 1) {
                free
            } else {
                first_alive(free, alive)
            } as u32;
            if remaining < best.0 {
                best = (remaining, i as u8);
            }
        }
        best
    }

    /// Checks `n` units at `now` against several policies at once, all or
    /// nothing: admitted iff for every policy `(L_i, W_i)` admission
    /// `c + n - 1 - L_i` has left its window, i.e. (deadlines growing along
    /// the log) the window `(t_eff - W_i, t_eff]` holds at most `L_i - n`
    /// admissions — the single-policy chain argument (docs/design.md §2) once
    /// per policy. The ring has `L = max L_i` slots and stores deadlines
    /// `t + W` for the window `W` of a policy with that limit, which is
    /// among `policies` (so slot deadlines still grow by at least `W` per
    /// lap: no ABA, and the batch fill's reasoning holds unchanged).
    ///
    /// The commit is the protocol of `check_many` with an eager head:
    /// claims happen only at a validated `head` whose slot is unclaimed (a
    /// claimed one is helped first), so head lags at most the admission
    /// being committed. `n` must be at most every `L_i`.
    pub(crate) fn check_multi(&self, now: u64, n: u32, policies: &[Rule]) -> Outcome {
        let g = self.geometry;
        let now = g.clamp_now(now);
        let n64 = u64::from(n);
        let backoff = Backoff::new();
        loop {
            let (snap, d, remaining, policy) = match self.judge_multi(now, n64, policies) {
                Judged::Closed => return Outcome::Closed,
                Judged::Denied {
                    available_at,
                    policy,
                } => {
                    return Outcome::Denied {
                        available_at,
                        policy,
                    };
                }
                Judged::Fits {
                    snap,
                    d,
                    remaining,
                    policy,
                } => (snap, d, remaining, policy),
            };
            let admitted = Outcome::Admitted {
                at: d - g.window,
                remaining,
                policy,
            };
            if n == 0 {
                return admitted;
            }
            if n == 1 {
                // Release/Relaxed as for a single commit in `check_one`.
                let word = slot::pack(d, snap.stamp, false);
                if self
                    .slot(snap.pos)
                    .compare_exchange(snap.s, word, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    self.advance_head(snap.hw, snap.c, snap.c, 1);
                    return admitted;
                }
                continue;
            }
            if self.commit_batch(&snap, n64, d, &backoff) {
                return admitted;
            }
        }
    }

    /// What `check_multi(now, n)` would answer now, recording nothing.
    pub(crate) fn peek_multi(&self, now: u64, n: u32, policies: &[Rule]) -> Outcome {
        let g = self.geometry;
        match self.judge_multi(g.clamp_now(now), u64::from(n), policies) {
            Judged::Closed => Outcome::Closed,
            Judged::Denied {
                available_at,
                policy,
            } => Outcome::Denied {
                available_at,
                policy,
            },
            Judged::Fits {
                d,
                remaining,
                policy,
                ..
            } => Outcome::Admitted {
                at: d - g.window,
                remaining,
                policy,
            },
        }
    }

    /// The effective times of the admissions that still count at `now` for
    /// some policy (those with `t + W + linger > now`), oldest first; empty
    /// if the ring is closed. Exact when no admission races the read (one
    /// that does may or may not be included).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn admissions(&self, now: u64) -> Vec<u64> {
        let g = self.geometry;
        let Some((snap, _, _)) = self.frontier(g.clamp_now(now), 1) else {
            return Vec::new();
        };
        // Admissions c - L .. c - 1 sit at positions pos(c) + k, oldest first.
        (0..g.limit)
            .map(|k| {
                // Acquire: as any slot load (see `snapshot`).
                slot::deadline(
                    self.slot(g.position_plus(snap.pos, k))
                        .load(Ordering::Acquire),
                )
            })
            .filter(|&d| d != 0 && d != slot::deadline(slot::CLOSED) && d + g.linger > now)
            .map(|d| d - g.window)
            .collect()
    }

    /// Writes `times` (non-decreasing, at most `L` of them) as the
    /// admissions of this ring, which must be fresh (all zero) and not yet
    /// shared: admission `i` in slot `i`, `head` at `times.len()`.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn fill_fresh(&self, times: &[u64]) {
        let g = self.geometry;
        debug_assert!(times.len() as u64 <= g.limit);
        debug_assert!(times.windows(2).all(|w| w[0] <= w[1]));
        let mut index = 0;
        for &t in times {
            let word = slot::pack(g.clamp_now(t) + g.window, g.stamp(index), false);
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
            let Some((snap, _, _)) = self.frontier(g.clamp_now(now), 1) else {
                return Ok(()); // already closed
            };
            // Deadlines grow along the log: the newest admission is c - 1.
            // With several policies it counts until the longest window has
            // passed over it (`linger` more); an empty ring (deadline 0) has
            // nothing that counts.
            let newest = match slot::deadline(snap.p) {
                0 => 0,
                d => d + g.linger,
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
                .slot(snap.pos)
                .compare_exchange(snap.s, slot::CLOSED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
        }
    }
}

/// One policy of a multi-policy ring, in nanoseconds: at most `limit`
/// admissions in any window of `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Rule {
    pub(crate) limit: u64,
    pub(crate) window: u64,
}

/// How far the hinted count scans before it gallops instead.
const HINT_SCAN: u64 = 8;

/// The smallest ring that keeps an expiry hint.
const HINT_MIN_LIMIT: u64 = 8;

/// The most policies one ring serves.
pub(crate) const MAX_POLICIES: usize = 8;

/// What [`RingRef::judge_multi`] found.
enum Judged {
    Closed,
    Denied {
        available_at: u64,
        policy: u8,
    },
    Fits {
        snap: Snapshot,
        d: u64,
        remaining: u32,
        policy: u8,
    },
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
