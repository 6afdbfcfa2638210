//! P3: threads that all use one instant, L slots: exactly L are admitted in
//! every interleaving, also after the ring has wrapped.

#![cfg(slidelog_loom)]

mod common;

use common::limiter;

use std::sync::Arc;

use loom::thread;
use slidelog::loom_hooks::Flaw;

fn race(limit: u32, threads: usize, prefill: bool, flaw: Flaw) {
    race_with(limit, threads, prefill, flaw, false);
}

/// `race`, with every other thread calling `admit` (the decision without the
/// count of `remaining`) instead of `check`.
fn race_with(limit: u32, threads: usize, prefill: bool, flaw: Flaw, admit: bool) {
    loom::model(move || {
        let window = 10;
        let limiter = limiter(limit, window, flaw);
        // Fill the ring and let it expire: the race then runs on lap 1.
        let now = if prefill {
            for _ in 0..limit {
                limiter.check_at(0).unwrap();
            }
            window
        } else {
            0
        };
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let l = Arc::clone(&limiter);
                if admit && i % 2 == 0 {
                    thread::spawn(move || l.admit_at(now).is_ok())
                } else {
                    thread::spawn(move || l.check_at(now).is_ok())
                }
            })
            .collect();
        let admitted = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert_eq!(
            admitted,
            (limit as usize).min(threads),
            "spurious denial: {admitted} of {threads} admitted with limit {limit}"
        );
    });
}

#[test]
fn one_slot_two_threads() {
    race(1, 2, false, Flaw::None);
}

#[test]
fn two_slots_three_threads() {
    race(2, 3, false, Flaw::None);
}

#[test]
fn two_slots_three_threads_after_wrap() {
    race(2, 3, true, Flaw::None);
}

/// Three slots: the lazy head lags, readers scan past claimed slots.
#[test]
fn three_slots_three_threads() {
    race(3, 3, false, Flaw::None);
}

#[test]
fn three_slots_three_threads_after_wrap() {
    race(3, 3, true, Flaw::None);
}

/// `admit` racing `check`: the same exact count (neither over- nor
/// under-admits), before and after the ring wraps.
#[test]
fn admit_and_check_three_slots_three_threads() {
    race_with(3, 3, false, Flaw::None, true);
}

#[test]
fn admit_and_check_two_slots_three_threads_after_wrap() {
    race_with(2, 3, true, Flaw::None, true);
}

/// Negative control: without the stamp and helping, a reader that sees a
/// freshly claimed slot before head moves denies spuriously.
#[test]
#[should_panic(expected = "spurious denial")]
fn control_no_help_is_caught() {
    race(2, 2, false, Flaw::NoHelp);
}
