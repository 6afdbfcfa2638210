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

use common::{evict_while_admitting, stale_reader_across_eviction};
use loom::thread;
use slidelog::loom_hooks::{Flaw, Floor};
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

/// No two admissions (limit 1) within one window of 10 ns.
fn one_per_window(times: &[u64]) -> bool {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[1] - w[0] >= 10)
}

/// The eviction floor: a caller holding a reading from 5 (before the eviction at 25)
/// never admits next to the evicted admission at 0: the floor moves it to
/// 10, where the evicted one has left the window.
#[test]
fn stale_reader_meets_the_floor() {
    stale_reader_across_eviction(|| rings(Flaw::None), 5, one_per_window);
}

/// Negative control: closing without raising the floor lets the stale
/// reading admit at 5 on the fresh ring.
#[test]
#[should_panic(expected = "over-admission across the eviction")]
fn control_no_floor_is_caught() {
    stale_reader_across_eviction(|| rings(Flaw::NoFloor), 5, one_per_window);
}

/// A ring that is still in use is never closed.
fn busy_ring(flaw: Flaw) {
    loom::model(move || {
        let limiter = Arc::new(
            Limiter::with_flaw(2, Duration::from_nanos(10), ManualClock::new(), flaw).unwrap(),
        );
        let floor = Arc::new(Floor::new());
        let (l, f) = (Arc::clone(&limiter), Arc::clone(&floor));
        let admitter = thread::spawn(move || l.try_check_n_at(1, 25, &f));
        let closed = limiter.close_if_idle(25, 10, &floor);
        let result = admitter.join().unwrap();
        match result {
            // Admitted before the close: the ring was busy and must stay open.
            Some(Ok(_)) => assert!(!closed, "closed a ring holding a live admission"),
            Some(Err(_)) => panic!("an empty ring denied"),
            None => assert!(closed),
        }
    });
}

#[test]
fn busy_ring_is_not_closed() {
    busy_ring(Flaw::None);
}

/// Negative control: a close that reports success without the CLOSED word
/// leaves an admission in a ring the map is about to drop.
#[test]
#[should_panic(expected = "closed a ring holding a live admission")]
fn control_busy_ring_fake_close_is_caught() {
    busy_ring(Flaw::FakeClose);
}
