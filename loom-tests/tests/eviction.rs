//! P5: closing an idle ring while others admit on it never loses or
//! duplicates an admission.
//!
//! The keyed map is modelled by a generation word choosing between the old
//! ring and its replacement (papaya itself is not loom-aware; it is covered by
//! real-thread stress tests): the evictor closes the old ring, then publishes
//! the new one; an admitter that finds the old ring closed publishes it
//! itself (first one wins) and looks again.

#![cfg(slidelog_loom)]

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::limiter;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use slidelog::loom_hooks::Flaw;
use slidelog::{Limiter, ManualClock};

fn evict_while_admitting(flaw: Flaw) {
    loom::model(move || {
        let (limit, window, margin) = (1, 10, 10);
        let rings = Arc::new([limiter(limit, window, flaw), limiter(limit, window, flaw)]);
        // The old ring holds one admission at t = 0: idle from t = 20.
        rings[0].check_at(0).unwrap();
        let current = Arc::new(AtomicUsize::new(0));

        let admit = |now: u64| {
            let rings = Arc::clone(&rings);
            let current = Arc::clone(&current);
            thread::spawn(move || {
                loop {
                    // Acquire pairs with the evictor's Release publication.
                    let g = current.load(Ordering::Acquire);
                    match rings[g].try_check_n_at(1, now) {
                        Some(result) => return result.is_ok(),
                        // Closed: replace the ring in the "map" (as the
                        // keyed limiter does: remove it, insert a fresh one;
                        // whoever comes first wins) and look again.
                        None => {
                            let _ =
                                current.compare_exchange(g, 1, Ordering::AcqRel, Ordering::Acquire);
                        }
                    }
                }
            })
        };
        let evictor = {
            let rings = Arc::clone(&rings);
            let current = Arc::clone(&current);
            thread::spawn(move || {
                if rings[0].close_if_idle(25, margin) {
                    // Release pairs with the admitters' Acquire loads.
                    let _ = current.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
                }
            })
        };
        let a = admit(25);
        let b = admit(25);
        evictor.join().unwrap();
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(
            admitted.iter().filter(|&&x| x).count(),
            1,
            "duplicated or lost: {admitted:?}"
        );
        // The admission at 25 must be visible to the key's current ring.
        let g = current.load(Ordering::Acquire);
        assert!(
            rings[g].try_check_n_at(1, 26).is_some_and(|r| r.is_err()),
            "lost admission: the current ring admits again at 26"
        );
    });
}

#[test]
fn close_races_admission() {
    evict_while_admitting(Flaw::None);
}

/// Negative control: reporting "closed" without the CLOSED word lets an
/// admission land in the ring that is being discarded.
#[test]
#[should_panic(expected = "lost admission")]
fn control_fake_close_is_caught() {
    evict_while_admitting(Flaw::FakeClose);
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
