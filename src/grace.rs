//! The grace period of a keyed limiter's reconfiguration: a change of
//! policies waits for the inserts that may have chosen the old ones, then
//! walks the map (docs/design.md §6, "Keys inserted during a change").
//!
//! An insert of a new key chooses the key's policies, then publishes the
//! key's state in the map. A change publishes the new policies, then walks
//! the map moving every key to them. An insert that chose the old policies
//! but published its key after the walk passed would keep them after the
//! change returned. So an insert announces itself, in a counter chosen by
//! the parity of the epoch it starts under, *before* it chooses; and leaves
//! once its key is published. A change publishes its policies, bumps the
//! epoch, and waits until the old parity's counter is zero before it walks:
//! the walk then sees every key whose insert may have chosen the old
//! policies. Inserts that start under the new epoch choose the new ones.
//! Checks never wait: only the changing thread does, for inserts in flight
//! (a lookup, a quota function's call, an insertion).
//!
//! # Ordering
//!
//! [`Grace::enter`] guesses the epoch `e`, increments `inserting[e & 1]`,
//! issues a SeqCst fence, and reads the epoch again (Acquire); on another
//! value it leaves and starts over. [`Grace::advance`] bumps the epoch
//! (a SeqCst read-modify-write, so a Release), issues a SeqCst fence, and
//! reads `inserting[e & 1]` (Acquire) until zero. Of the two fences one
//! comes first in their total order:
//!
//! - the insert's: then the change's loads after its fence see the
//!   increment (written before that fence) or a later value, so the change
//!   waits for the insert's leave. The leave is a Release decrement and the
//!   change's zero an Acquire load of it or of a later read-modify-write
//!   (in the leave's release sequence): the insertion happens-before the
//!   walk, which therefore sees the key.
//! - the change's: then the insert's re-read sees the bumped epoch (or a
//!   later one) and starts over. Its Acquire reading of the bump
//!   synchronises with it, so the new policies (published before the bump)
//!   happen-before the insert's choice: it chooses them.
//!
//! An insert that confirmed `e` is in the first case for the change from
//! `e`. Changes are serialised (a lock), so the counter a change waits on
//! only holds inserts of its old epoch or ones about to start over.

use crossbeam_utils::CachePadded;

#[cfg(slidelog_loom)]
use crate::flaw::Flaw;
use crate::sync::Backoff;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

/// The epoch of a keyed limiter's policies and its inserts in flight.
///
/// Public only to the model checker's hooks (`--cfg slidelog_loom`).
#[derive(Debug)]
#[allow(unreachable_pub)]
pub struct Grace {
    /// Bumped by every change of policies (the keyed limiter's
    /// `generation`).
    epoch: AtomicU64,
    /// Inserts in flight, by the parity of the epoch they started under.
    /// Written by every insert: a line each, away from `epoch` (read by
    /// every insert).
    inserting: [CachePadded<AtomicUsize>; 2],
    #[cfg(slidelog_loom)]
    flaw: Flaw,
}

/// An insert in flight ([`Grace::enter`]); leaves when dropped.
#[derive(Debug)]
#[allow(unreachable_pub)]
#[must_use = "the insert leaves when this is dropped"]
pub struct Entered<'a> {
    grace: &'a Grace,
    parity: usize,
}

impl Default for Grace {
    fn default() -> Self {
        Self::new()
    }
}

#[allow(unreachable_pub)]
impl Grace {
    /// Epoch 0, no insert in flight.
    pub fn new() -> Self {
        Grace {
            epoch: AtomicU64::new(0),
            inserting: [
                CachePadded::new(AtomicUsize::new(0)),
                CachePadded::new(AtomicUsize::new(0)),
            ],
            #[cfg(slidelog_loom)]
            flaw: Flaw::None,
        }
    }

    /// The epoch: how many changes so far (plus where a restore continued
    /// from).
    pub fn epoch(&self) -> u64 {
        // Relaxed: a count for caches of the policies, which are loaded
        // after it (see `KeyedLimiter::generation`).
        self.epoch.load(Ordering::Relaxed)
    }

    /// Continues the epoch past `past` (a restore: no insert or change
    /// runs, `&mut` in the caller).
    #[cfg(feature = "serde")]
    pub(crate) fn continue_past(&self, past: u64) {
        let next = self.epoch().max(past).saturating_add(1);
        // Relaxed: nothing runs concurrently (see above).
        self.epoch.store(next, Ordering::Relaxed);
    }

    /// Announces an insert: call before choosing the new key's policies,
    /// and drop the result once the key is published (see the module
    /// docs).
    #[inline]
    pub fn enter(&self) -> Entered<'_> {
        loop {
            // Relaxed: a guess, confirmed below.
            let epoch = self.epoch.load(Ordering::Relaxed);
            let parity = (epoch & 1) as usize;
            // Relaxed: ordered by the fence (see the module docs).
            self.inserting[parity].fetch_add(1, Ordering::Relaxed);
            let entered = Entered {
                grace: self,
                parity,
            };
            #[cfg(slidelog_loom)]
            if self.flaw == Flaw::UnconfirmedEntry {
                return entered;
            }
            fence(Ordering::SeqCst);
            // Acquire: pairs with the bump in `advance`, so that an insert
            // that sees it also sees the policies published before it.
            if self.epoch.load(Ordering::Acquire) == epoch {
                return entered;
            }
            // A change began meanwhile: leave and start over under its
            // epoch.
            drop(entered);
        }
    }

    /// Publishes a change (its new policies published before this call)
    /// and waits until every insert that may have chosen the old ones has
    /// left: a walk over the map after this sees their keys. Changes must
    /// not overlap (the caller holds a lock).
    pub fn advance(&self) {
        let old = self.epoch.fetch_add(1, Ordering::SeqCst);
        #[cfg(slidelog_loom)]
        if self.flaw == Flaw::NoGrace {
            return;
        }
        fence(Ordering::SeqCst);
        let waiting = &self.inserting[(old & 1) as usize];
        let backoff = Backoff::new();
        // Acquire: pairs with the leaves' Release decrements (see the
        // module docs).
        while waiting.load(Ordering::Acquire) != 0 {
            backoff.snooze();
        }
    }
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: the insertion before it happens-before the walk of the
        // change that waited for it.
        self.grace.inserting[self.parity].fetch_sub(1, Ordering::Release);
    }
}

/// Hooks for the model checker: a grace period with a broken step.
#[cfg(slidelog_loom)]
#[doc(hidden)]
#[allow(unreachable_pub)]
impl Grace {
    /// A grace period with the broken step `flaw`.
    pub fn with_flaw(flaw: Flaw) -> Self {
        Grace {
            flaw,
            ..Grace::new()
        }
    }
}
