//! P5: closing an idle ring while others admit on it never loses or
//! duplicates an admission.
//!
//! The keyed map is modelled by a generation word choosing between the old
//! ring and its replacement (`common::evict_while_admitting`, shared with
//! the counter's model).

#![cfg(slidelog_loom)]

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::evict_while_admitting;
use loom::thread;
use slidelog::loom_hooks::Flaw;
use slidelog::{Limiter, ManualClock};

/// The old ring (limit 1, window 10) holds one admission at 0.
fn rings(flaw: Flaw) -> [Limiter<ManualClock>; 2] {
    let make =
        || Limiter::with_flaw(1, Duration::from_nanos(10), ManualClock::new(), flaw).unwrap();
    let old = make();
    old.check_at(0).unwrap();
    [old, make()]
}

#[test]
fn close_races_admission() {
    evict_while_admitting(|| rings(Flaw::None));
}

/// Negative control: reporting "closed" without the CLOSED word lets an
/// admission land in the ring that is being discarded.
#[test]
#[should_panic(expected = "lost admission")]
fn control_fake_close_is_caught() {
    evict_while_admitting(|| rings(Flaw::FakeClose));
}

/// A ring that is still in use is never closed.
#[test]
fn busy_ring_is_not_closed() {
    loom::model(|| {
        let limiter =
            Arc::new(Limiter::with_clock(2, Duration::from_nanos(10), ManualClock::new()).unwrap());
        let l = Arc::clone(&limiter);
        let admitter = thread::spawn(move || l.try_check_n_at(1, 25));
        let closed = limiter.close_if_idle(25, 10);
        let result = admitter.join().unwrap();
        match result {
            // Admitted before the close: the ring was busy and must stay open.
            Some(Ok(_)) => assert!(!closed, "closed a ring holding a live admission"),
            Some(Err(_)) => panic!("an empty ring denied"),
            None => assert!(closed),
        }
    });
}
