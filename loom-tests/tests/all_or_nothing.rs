//! P4: `check_n` takes n slots or none, also against concurrent `check`.

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Call, admitted_units, assert_linearizable, assert_no_over_admission, limiter};
use loom::thread;
use slidelog::loom_hooks::Flaw;
use slidelog::{Limiter, ManualClock};

/// A weighted request racing singles: the units the limiter holds afterwards
/// are exactly the units it reported admitted, and the results are
/// linearizable.
fn weighted_vs_single(
    limit: u32,
    weighted: &'static [u32],
    singles: usize,
    prefill: u32,
    flaw: Flaw,
) {
    loom::model(move || {
        let window = 10;
        let limiter = limiter(limit, window, flaw);
        for _ in 0..prefill {
            limiter.check_at(0).unwrap();
        }
        let now = if prefill > 0 { 5 } else { 0 };
        let l = Arc::clone(&limiter);
        let w = thread::spawn(move || {
            weighted
                .iter()
                .map(|&n| Call {
                    now,
                    n,
                    result: l.check_n_at(n, now),
                })
                .collect::<Vec<_>>()
        });
        let l = Arc::clone(&limiter);
        let s = thread::spawn(move || {
            (0..singles)
                .map(|_| Call {
                    now,
                    n: 1,
                    result: l.check_at(now),
                })
                .collect::<Vec<_>>()
        });
        let threads = vec![w.join().unwrap(), s.join().unwrap()];
        let all: Vec<Call> = threads.iter().flatten().copied().collect();
        let held = limit - limiter.check_n_at(0, now).unwrap().remaining();
        assert_eq!(
            held,
            admitted_units(&all) + prefill,
            "partial admission: the ring holds {held} units, the callers were told {}",
            admitted_units(&all) + prefill
        );
        assert_no_over_admission(&all, limit, window);
        let prefix: Vec<u64> = std::iter::repeat_n(0, prefill as usize).collect();
        assert_linearizable(&threads, limit, window, &prefix);
    });
}

#[test]
fn pair_vs_single_in_three_slots() {
    weighted_vs_single(3, &[2], 2, 0, Flaw::None);
}

#[test]
fn pair_vs_single_across_the_wrap() {
    // Slots 0 and 1 hold live admissions: the pair must wrap to slot 0.
    weighted_vs_single(3, &[2], 1, 1, Flaw::None);
}

#[test]
fn two_weighted_calls_vs_single() {
    weighted_vs_single(3, &[2, 1], 1, 0, Flaw::None);
}

#[test]
fn full_ring_weighted_vs_single() {
    weighted_vs_single(2, &[2], 1, 0, Flaw::None);
}

/// Negative control: taking a weighted request's units one at a time lets a
/// single sneak in between, leaving a partial admission behind.
#[test]
#[should_panic(expected = "partial admission")]
fn control_piecewise_is_caught() {
    weighted_vs_single(2, &[2], 1, 0, Flaw::Piecewise);
}

/// Two weighted requests racing: one announcement at a time, both exact.
#[test]
fn weighted_vs_weighted() {
    loom::model(|| {
        let (limit, window) = (3, 10);
        let limiter = Arc::new(
            Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap(),
        );
        let handles: Vec<_> = [2u32, 2]
            .into_iter()
            .map(|n| {
                let l = Arc::clone(&limiter);
                thread::spawn(move || {
                    vec![Call {
                        now: 0,
                        n,
                        result: l.check_n_at(n, 0),
                    }]
                })
            })
            .collect();
        let threads: Vec<Vec<Call>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let all: Vec<Call> = threads.iter().flatten().copied().collect();
        assert_eq!(admitted_units(&all), 2, "exactly one pair fits in 3 slots");
        assert_eq!(limiter.check_n_at(0, 0).unwrap().remaining(), 1);
        assert_linearizable(&threads, limit, window, &[]);
    });
}
