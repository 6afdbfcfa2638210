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
