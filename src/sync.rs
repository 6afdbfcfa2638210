//! The one place that names the atomics (docs/design.md §10).
//!
//! Under `--cfg slidelog_loom` every atomic, `Arc` and spin hint comes from
//! [`loom`](https://docs.rs/loom), so the model checker sees every access the
//! ring makes; otherwise they come from `core`/`std`. No other file may name
//! `core::sync::atomic`, `std::sync::atomic`, `core::hint` or `loom` (`.ci/run`
//! greps for it).

#[cfg(slidelog_loom)]
pub(crate) mod atomic {
    // The keyed limiter (which uses the bool and usize) is not compiled for
    // the model checker.
    #[allow(unused_imports)]
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
}

#[cfg(not(slidelog_loom))]
pub(crate) mod atomic {
    pub(crate) use core::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
}

#[cfg(slidelog_loom)]
pub(crate) use loom::sync::{Arc, Mutex};

#[cfg(not(slidelog_loom))]
pub(crate) use std::sync::{Arc, Mutex};

/// How many spin-loop hints an admission that lost its slot's CAS to a
/// racing admitter waits before it looks again, the first time in a loop
/// ([`after_lost_race`]).
#[cfg(not(slidelog_loom))]
const LOST_RACE_SPINS: u32 = 32;

/// The most times [`LOST_RACE_SPINS`] doubles for further losses in one loop.
#[cfg(not(slidelog_loom))]
const LOST_RACE_DOUBLINGS: u32 = 2;

/// **The pause after a lost race** (docs/design.md §4, "A lost race
/// pauses"): an admission whose CAS on slot `c` lost to a racing admitter
/// spins for a moment before it reads the ring again — `LOST_RACE_SPINS`
/// hints the first time in a retry loop (about a microsecond on the AMD EPYC VM
/// measured, where one hint took 25-35 ns), doubling for each further loss
/// in the same retry loop up to four times that. A delay only:
/// the retry starts over from fresh reads, so no decision depends on it,
/// and someone won the CAS, so the ring still makes progress. Without it
/// the loser's retry lands on the lines the winner is writing next, and
/// two threads on one key hand the slots' lines back and forth on every
/// attempt (BENCHMARKS.md, "Two threads"). `losses`:
/// how many races this retry loop lost before this one.
#[cfg(not(slidelog_loom))]
#[cold]
#[inline(never)]
pub(crate) fn after_lost_race(losses: u32) {
    for _ in 0..LOST_RACE_SPINS << losses.min(LOST_RACE_DOUBLINGS) {
        core::hint::spin_loop();
    }
}

/// Loom has no time: a pause explores no interleaving a retry at once
/// does not.
#[cfg(slidelog_loom)]
pub(crate) fn after_lost_race(_losses: u32) {}

/// Exponential backoff for the one place that waits (a weighted request
/// behind another weighted request's two-step announcement).
#[cfg(not(slidelog_loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Loom has no notion of spinning: every wait must yield to the scheduler.
#[cfg(slidelog_loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff;

#[cfg(slidelog_loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }
    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
    }
}
