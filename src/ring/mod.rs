//! The lock-free ring: the exact sliding-window log of one key.
//!
//! A key's log never needs more than its last `L` admissions: a request is
//! admissible iff the `L`-th most recent admission has expired. So each key
//! owns `L` slots of 8 bytes plus one `head` word, and the slot that the next
//! admission overwrites is the oldest one (docs/design.md §2). Admission `c`
//! is the compare-and-swap of slot `c mod L` from the word admission `c - L`
//! wrote to its own: that CAS is the linearization point. A denial only
//! loads.
//!
//! # Where each part of docs/design.md §4 lives
//!
//! | file | what | invariants named there |
//! |---|---|---|
//! | `word.rs` | slot and `head` codecs (§3), `MAX_LIMIT` | `slot::claimed_by` |
//! | `geometry.rs` | positions, stamps, `advance`, the clamp, [`Now`] | `Geometry::deadline_for` |
//! | `shape.rs` | validated policies → geometry; the single/multi dispatch; `Outcome` → `Admitted`/`Denied` | `Shape::decide` |
//! | `view.rs` | the seqlock view at the frontier, helping, moving `head`, a batch's fill, the single commit | `revalidate`, `taken`, `torn_past_frontier`, `claim` |
//! | `single.rs` | the single-unit fast path: its frontier guess and the head-free denial; the lazy-head scan | the scan's soundness, `at_guess`, `claimable` |
//! | `batch.rs` | weighted requests (announce, commit, fill), `peek` | |
//! | `count.rs` | `remaining`, the verified expiry hint | the count at the linearization point |
//! | `rule.rs` | `Rule`: one policy in nanoseconds, as `multi.rs` checks it | |
//! | `multi.rs` | several policies on one ring | the chain argument per policy |
//! | `lifecycle.rs` | closing for eviction, admissions for snapshots, a fresh fill | the floor before the close |
//!
//! Every method of [`RingRef`] that takes a `now` takes the *judged* time
//! ([`Now::judged`]: read, floored and clamped once, by [`Shape::now`]).

mod batch;
mod count;
mod geometry;
mod lifecycle;
mod multi;
mod rule;
mod shape;
mod single;
mod view;
mod word;

pub(crate) use geometry::{Geometry, Now};
pub(crate) use shape::Shape;
pub(crate) use shape::{Growing, StatesOut};

use crate::policy::MAX_POLICIES;
use crate::sync::atomic::AtomicU64;

/// What the ring answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Admitted at effective time `at` with `remaining` units left under
    /// `policy` (the policy closest to exhaustion; 0 with one policy), and —
    /// where the caller asked for it ([`report::GROWTH`]) — `grows_at`, when
    /// `remaining` next grows.
    Admitted {
        at: u64,
        remaining: u32,
        policy: u8,
        grows_at: Option<u64>,
    },
    /// Denied: the request is admissible from `available_at` (nanoseconds);
    /// `policy` is the violated policy that waits longest (0 with one).
    Denied { available_at: u64, policy: u8 },
    /// The ring was closed for eviction; look the key up again.
    Closed,
}

/// A borrowed ring: its `head` word and its `L` slots, wherever they live
/// (a padded header for [`crate::Limiter`], one inline allocation per key for
/// [`crate::KeyedLimiter`]).
#[derive(Clone, Copy)]
pub(crate) struct RingRef<'a> {
    pub(crate) geometry: &'a Geometry,
    pub(crate) head: &'a AtomicU64,
    pub(crate) slots: &'a [AtomicU64],
    /// The frontier guess ([`Hints`]), if the ring keeps one (a
    /// [`crate::Limiter`]'s does; a keyed state's does not).
    pub(crate) frontier: Option<&'a AtomicU64>,
    /// The expiry hint ([`Hints`]), if the ring keeps one (a
    /// [`crate::Limiter`]'s does; a keyed state's from 64 slots on, see
    /// [`Shape::ring_in`]).
    pub(crate) expiry: Option<&'a AtomicU64>,
    /// With several policies, each one's expiry hint ([`Hints`]) in the
    /// order given, if the ring keeps them (a [`crate::Limiter`]'s does; a
    /// keyed state's from 64 slots on); empty if not.
    pub(crate) policy_expiry: &'a [AtomicU64],
}

/// Two words a ring may keep beside `head` (a [`crate::Limiter`] both, on
/// `head`'s line; a keyed state of 64 slots or more the expiry hint, or
/// each policy's, in its allocation), each only a **guess** that the path reading it verifies, so
/// that no value either holds — stale, from another lap, stored out of
/// order by racing threads, garbage, or a fresh state's zero — can change a
/// decision or a count, only what it costs:
/// - `expiry`: how many candidates the last count found alive (`count.rs`,
///   `remaining_after`);
/// - `frontier`: the index after the last single the fast path admitted,
///   so that a single finds the frontier there without scanning, and a
///   denial without loading `head` (`single.rs`, `at_guess`);
/// - `policies`: with several policies, `expiry` for each one, in the order
///   given (`multi.rs`, `remaining_multi`). Up to five share `head`'s line
///   with the two above; a limiter's padded `head` holds them all in the
///   128 bytes it already takes.
///
/// `repr(C)`: in this order, behind `head` (a limiter's `Head` is `repr(C)`
/// too), so that `head`, `expiry`, `frontier` and the first five policies'
/// hints share one line.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct Hints {
    pub(crate) expiry: AtomicU64,
    pub(crate) frontier: AtomicU64,
    pub(crate) policies: [AtomicU64; MAX_POLICIES],
}

impl core::fmt::Debug for RingRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("limit", &self.geometry.limit())
            .field("window_nanos", &self.geometry.window())
            .finish_non_exhaustive()
    }
}

impl Outcome {
    /// An admission that reports no growth time.
    #[inline(always)]
    pub(crate) const fn admitted(at: u64, remaining: u32, policy: u8) -> Outcome {
        Outcome::Admitted {
            at,
            remaining,
            policy,
            grows_at: None,
        }
    }
}

/// What a single's admission reports beyond the decision: the const
/// parameter of `RingRef::check_one`, so that each caller's path compiles
/// on its own.
pub(crate) mod report {
    /// The decision only (`admit`).
    pub(crate) const DECISION: u8 = 0;
    /// And `remaining` (`check`).
    pub(crate) const REMAINING: u8 = 1;
    /// And when `remaining` next grows (the IETF `t`: the tower layer's,
    /// `check_n_with_growth`'s): one more slot load, read with the count.
    pub(crate) const GROWTH: u8 = 2;
}

impl<'a> RingRef<'a> {
    #[inline(always)]
    fn slot(&self, pos: usize) -> &'a AtomicU64 {
        debug_assert!(pos < self.slots.len());
        &self.slots[pos]
    }

    /// Checks `n` units at `now` (judged time): admits them all or none,
    /// reporting `R` (see [`report`]).
    ///
    /// `n` must be in `0..=L` (the caller handles `n > L`). `n == 0` admits
    /// and records nothing.
    #[inline]
    pub(crate) fn check<const R: u8>(&self, now: u64, n: u32) -> Outcome {
        if n == 1 {
            self.check_one::<R>(now)
        } else {
            self.check_many::<R>(now, n)
        }
    }
}
