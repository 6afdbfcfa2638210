//! The eviction floor of a keyed limiter: what eviction forgot, no later
//! admission may overlap.
//!
//! A ring (or counter) remembers its newest admission, and its clamp
//! (`t_eff = max(now, newest)`) keeps a caller holding an old clock reading
//! from admitting "in the past" of it. Evicting a key forgets that memory:
//! a caller whose reading predates the eviction would admit on the key's
//! fresh state at its old time, next to the evicted admissions. The floor
//! keeps the memory for all keys at once, in one word: before a sweep closes
//! an idle state it raises the floor to the time from which that state's
//! admissions no longer count (the newest admission's deadline, `t_eff + W`,
//! for the log; the end of the newest admission's counted span for the
//! counter), and every keyed check judges at `max(now, floor)`.
//!
//! The floor only moves to times at least an idle margin in the past of the
//! sweep's clock, so it clamps only callers whose reading is older than
//! that: for everyone else it is one load of a word that is almost never
//! written (no cache-line bouncing, no write on the admission path).
//!
//! # Ordering
//!
//! The sweeper raises the floor *before* its closing CAS (program order),
//! and an admitter loads it *after* it found the key's old state closed
//! (an Acquire load of the CLOSED word, which the Release closing CAS
//! wrote) or absent (papaya's lookup Acquires the removal, which came after
//! the close), or after it found a fresh state that another thread
//! inserted after one of those. Either way the raise happens-before the
//! load, so by write-read coherence the load returns the raised value or a
//! later one: both accesses may be Relaxed. A raise for a state whose close
//! then fails (it was admitted to meanwhile) is harmless: the value is still
//! an idle margin in the past.

use crate::sync::atomic::{AtomicU64, Ordering};

/// A monotone lower bound on the effective time of every keyed admission.
///
/// Public only to the model checker's hooks (`--cfg slidelog_loom`).
#[derive(Debug, Default)]
#[allow(unreachable_pub)]
pub struct Floor(AtomicU64);

#[allow(unreachable_pub)]
impl Floor {
    /// A floor at 0 (nothing evicted yet).
    pub fn new() -> Self {
        Floor(AtomicU64::new(0))
    }

    /// The floor's value: a request read at `now` is judged at
    /// `max(now, floor)` (the ring's `Shape::now`, the counter's `check`).
    #[inline]
    pub fn get(&self) -> u64 {
        // Relaxed: see the module docs (happens-before comes from the
        // observation of the closed or removed state).
        self.0.load(Ordering::Relaxed)
    }

    /// Raises the floor to `to` (never lowers it).
    #[inline]
    pub(crate) fn raise(&self, to: u64) {
        // Relaxed: ordered before the closing CAS by program order, and
        // published by that CAS's Release (see the module docs).
        self.0.fetch_max(to, Ordering::Relaxed);
    }
}
