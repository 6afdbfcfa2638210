//! The two packed words of a ring and their codecs (docs/design.md §3): no
//! code outside this file shifts or masks a slot or `head` word.

/// The codec of a slot word: `deadline << 2 | BATCH | STAMP`.
pub(crate) mod slot {
    /// Lap-parity stamp of the admission that wrote the slot. Admission
    /// index `c` writes `!(lap(c) & 1)`, so the all-zero initial word reads as
    /// written in lap -1.
    pub(crate) const STAMP: u64 = 1;
    /// Set on the first slot of a weighted admission; its size is in the
    /// `PENDING` field of `head` until the batch is filled.
    pub(crate) const BATCH: u64 = 1 << 1;
    /// The deadline sits above the two flag bits.
    const DEADLINE_SHIFT: u32 = 2;
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

    /// Whether `word`'s deadline is after `t` (its admission is alive at
    /// `t`), compared as a word: `deadline(word) > t` iff `word >= (t + 1)
    /// << 2`, so with the bound computed once a scan of words shifts none.
    /// Needs `t < 2^62` so the bound does not overflow: every effective
    /// time is a deadline (at most `2^62 - 1`, `CLOSED`'s) minus `W >= 1`.
    #[inline]
    pub(crate) const fn alive_at(word: u64, t: u64) -> bool {
        debug_assert!(t >> (u64::BITS - DEADLINE_SHIFT) == 0);
        word > (t << DEADLINE_SHIFT | ((1 << DEADLINE_SHIFT) - 1))
    }

    /// Whether `word` is the first slot of a weighted admission.
    #[inline]
    pub(crate) const fn is_batch(word: u64) -> bool {
        word & BATCH != 0
    }

    /// **Claimed**: whether `word` was written by the admission whose stamp
    /// is `stamp` (this lap's), rather than being the previous lap's word.
    /// [`CLOSED`] is never claimed: a closed ring has no admission to pass
    /// or help, and every caller tests for it on its own.
    ///
    /// Sound only for a slot within `L` indices of a validated `head`: there
    /// a slot holds its previous lap's word or its own (docs/design.md §4),
    /// and the lap parity tells the two apart.
    #[inline]
    pub(crate) const fn claimed_by(word: u64, stamp: u64) -> bool {
        word != CLOSED && (word & STAMP) == stamp
    }

    /// Whether the stamps of `a` and `b` differ, as a bit: [`STAMP`] if
    /// they do, 0 if they are alike. Two slots written in one lap, at
    /// positions `q - 1` and `q`, carry alike stamps unless `q` is 0, where
    /// the lap (and so the stamp) turns.
    #[inline(always)]
    pub(crate) const fn stamps_differ(a: u64, b: u64) -> u64 {
        (a ^ b) & STAMP
    }

    /// Packs a committed slot word. `stamp` is 0 or [`STAMP`].
    #[inline]
    pub(crate) const fn pack(deadline: u64, stamp: u64, batch: bool) -> u64 {
        debug_assert!(deadline <= MAX_DEADLINE);
        debug_assert!(stamp <= STAMP);
        (deadline << DEADLINE_SHIFT) | if batch { BATCH } else { 0 } | stamp
    }
}

/// The codec of the `head` word: `PENDING n << 43 | lap << bits | position`.
pub(crate) mod head {
    /// Bits of the admission index (`lap << bits | position`). The lap wraps
    /// within them; the parity still alternates because the lap field is at
    /// least 23 bits wide (an even number of laps per wrap).
    const INDEX_BITS: u32 = 43;
    /// Mask of the admission index.
    pub(crate) const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
    /// The size `n >= 2` of a weighted admission announced at this index, or 0.
    const PENDING_SHIFT: u32 = INDEX_BITS;

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

/// The largest limit ([`MAX_LIMIT`](crate::MAX_LIMIT), 2^20): positions
/// take at most 20 bits, so the lap keeps at least 23 bits and the
/// `PENDING` field (21 bits) can hold any weight.
pub(crate) const MAX_LIMIT: u32 = crate::config::MAX_LIMIT;
const _: () = assert!(MAX_LIMIT == 1 << 20, "the codecs' field widths assume 2^20");

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trips_at_the_edges() {
        for deadline in [0, 1, slot::MAX_DEADLINE] {
            for stamp in [0, slot::STAMP] {
                for batch in [false, true] {
                    let word = slot::pack(deadline, stamp, batch);
                    assert_eq!(slot::deadline(word), deadline);
                    assert_eq!(slot::is_batch(word), batch);
                    assert!(slot::claimed_by(word, stamp));
                    assert!(!slot::claimed_by(word, stamp ^ slot::STAMP));
                    for other in [0, slot::STAMP] {
                        let beside = slot::pack(slot::MAX_DEADLINE - deadline, other, !batch);
                        assert_eq!(slot::stamps_differ(word, beside), stamp ^ other);
                    }
                    assert_ne!(word, slot::CLOSED);
                    for t in [0, 1, 2, deadline.saturating_sub(1), deadline, deadline + 1] {
                        if t <= slot::MAX_DEADLINE {
                            assert_eq!(slot::alive_at(word, t), deadline > t, "{deadline} at {t}");
                        }
                    }
                }
            }
        }
        // CLOSED is claimed by no stamp.
        assert!(!slot::claimed_by(slot::CLOSED, 0));
        assert!(!slot::claimed_by(slot::CLOSED, slot::STAMP));
        // The fresh word reads as lap -1: claimed by stamp 0, not by lap 0's.
        assert!(!slot::claimed_by(0, slot::STAMP));
    }

    #[test]
    fn head_round_trips_at_the_edges() {
        for index in [0, 1, head::INDEX_MASK] {
            assert_eq!(head::index(index), index);
            assert_eq!(head::pending(index), 0);
            for n in [2, u64::from(MAX_LIMIT)] {
                let word = head::with_pending(index, n);
                assert_eq!((head::index(word), head::pending(word)), (index, n));
            }
        }
    }
}
