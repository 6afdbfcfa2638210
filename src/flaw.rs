//! Deliberately broken variants of the protocols, for the model checker.
//!
//! Each variant breaks one step that docs/design.md §4 (the ring) or §8 (the
//! counter) argues is needed, and each must be caught by a loom model in
//! `loom-tests/` (a proof that cannot fail proves nothing). Outside
//! `--cfg slidelog_loom`, [`Flaw::active`] is always [`Flaw::None`], so the
//! shipped code compiles every broken branch away.

/// A deliberately broken protocol step (model checker only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(not(slidelog_loom), allow(dead_code))]
#[allow(unreachable_pub)]
pub enum Flaw {
    /// The protocol as designed.
    #[default]
    None,

    // --- Both the ring and the counter ---
    /// Commit with a load then a store instead of a CAS (the ring's single
    /// admission; the counter's head).
    LoadThenStore,
    /// (Keyed eviction) Report a state closed for eviction without closing it.
    FakeClose,
    /// (Keyed eviction) Close an idle state without raising the eviction
    /// floor first: a stale reading admits over the evicted history.
    NoFloor,

    /// (Reconfiguration) Publish the successor ring without closing the
    /// old one: an admission landing in the old ring after its log was
    /// copied is lost to the new configuration.
    OpenMigration,
    /// (Reconfiguration) Keep only the newest `L_new` admissions across a
    /// cut: an admission still in the window is dropped, and counts no more
    /// once the limit is restored.
    NoCarry,
    /// (Reconfiguration) Build the successor with the old policies: checks
    /// after the change are judged by the configuration it replaced.
    OldPolicies,
    /// (Reconfiguration) A sweep takes a ring closed by a reconfiguration
    /// for an idle one and forgets it (a keyed sweep must leave it to its
    /// mover).
    EvictMoving,
    /// (Keyed reconfiguration) Walk the map without waiting for the inserts
    /// that may have chosen the old policies: a key they publish after the
    /// walk keeps them after the change returned.
    NoGrace,
    /// (Keyed reconfiguration) Announce an insert without the fence and the
    /// epoch's re-read: a change that bumped the epoch meanwhile may miss
    /// it, and it may choose the old policies.
    UnconfirmedEntry,

    // --- The ring (docs/design.md §4) ---
    /// Skip the seqlock re-validation of `head`.
    NoRevalidate,
    /// Ignore the stamp: judge a claimed slot as if it were the old one
    /// (no helping).
    NoHelp,
    /// Do not clamp `t_eff` to the previous admission.
    NoClamp,
    /// Take a weighted request's units one single admission at a time.
    Piecewise,
    /// (Weighted requests) Trust a view in which a slot past `head`'s was
    /// claimed behind a lazy head; with several policies, trust a slot past
    /// the frontier that a batch's fill already wrote.
    TornWeighted,
    /// (Several policies) Judge a request by the ring's own policy (the
    /// largest limit) only, ignoring the others.
    OnePolicy,
    /// (Expiry hint) Trust the hint without verifying it, and let a peek
    /// record one from its own, possibly later, effective time: the count
    /// then skips live admissions.
    TrustHint,
    /// (Expiry hint) Count from the three words at and before the hint
    /// without checking that the first live candidate lies among them: a
    /// hint that is too high, or two or more too low, then yields the
    /// hint's count (or one more) instead of the true one.
    UnbracketedHint,

    /// (Frontier guess) Take the slots at the guess without checking that
    /// their stamps are adjacent (the slot before written by the admission
    /// `L - 1` after the one in the guessed slot): a stale guess then judges
    /// by a slot that is not the previous admission's.
    UnverifiedGuess,
    /// (Head-free denial) Read the slot before the guessed one, then the
    /// guessed slot, and judge those two words with no second read of the
    /// guessed slot: admissions landing between the two loads make a slot
    /// `c - 1` one lap behind look adjacent to a fresh slot `c`, and the
    /// denial is spurious.
    DenyWithoutReread,

    // --- The counter (docs/design.md §8) ---
    /// Merge into a cell that already holds a later sub-window.
    MergeOverLater,
    /// Move head to the new sub-window before archiving the old one's
    /// count and writing the new one's summary.
    ArchiveLate,
    /// Leave the count of the sub-window head leaves out of the new one's
    /// summary.
    SummaryWithoutHead,
    /// Store the summary instead of keeping the largest: a thread with a
    /// stale head word overwrites the true one.
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
