//! P1: in every interleaving, no window of length W holds more than L
//! admissions (asserted on the `at()` times actually recorded).

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Call, assert_no_over_admission, limiter};
use loom::thread;
use slidelog::loom_hooks::Flaw;
use slidelog::{Limiter, ManualClock};

/// Threads with their own timestamps that straddle the window edge.
fn straddle(flaw: Flaw) {
    loom::model(move || {
        let (limit, window) = (1, 10);
        let limiter = limiter(limit, window, flaw);
        let spawn = |times: &'static [u64]| {
            let l = Arc::clone(&limiter);
            thread::spawn(move || {
                times
                    .iter()
                    .map(|&now| Call::untimed(now, 1, l.check_at(now)))
                    .collect::<Vec<_>>()
            })
        };
        let a = spawn(&[0, 10]);
        let b = spawn(&[9]);
        let mut calls = a.join().unwrap();
        calls.extend(b.join().unwrap());
        assert_no_over_admission(&calls, limit, window);
    });
}

#[test]
fn straddling_timestamps() {
    straddle(Flaw::None);
}

/// One thread advances a shared ManualClock while two others check on it.
#[test]
fn clock_advanced_while_checking() {
    loom::model(|| {
        let (limit, window) = (2, 10);
        let clock = ManualClock::new();
        let limiter = Arc::new(
            Limiter::with_clock(limit, Duration::from_nanos(window), clock.clone()).unwrap(),
        );
        let ticker = thread::spawn(move || {
            clock.advance(Duration::from_nanos(6));
            clock.advance(Duration::from_nanos(6));
        });
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let l = Arc::clone(&limiter);
                thread::spawn(move || {
                    (0..2)
                        .map(|_| {
                            let result = l.check();
                            Call::untimed(0, 1, result)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        ticker.join().unwrap();
        let calls: Vec<Call> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        assert_no_over_admission(&calls, limit, window);
    });
}

/// Negative control: committing with a load then a store instead of a CAS
/// lets two threads take the same slot; the straddling model catches it.
#[test]
#[should_panic(expected = "over-admission")]
fn control_load_then_store_is_caught() {
    straddle(Flaw::LoadThenStore);
}
