//! P1 and P5 with stale readings: a caller holding an old clock reading never over-admits, also
//! across eviction (the eviction floor), and sweeps are judged by the
//! limiter's own clock, never by one caller's outlying reading.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::max_in_window;
use slidelog::algorithm::Algorithm;
use slidelog::{Clock, DenyReason, KeyedCounter, KeyedLimiter, ManualClock};

/// The reproducer: admitted at 0, evicted at 250, then a reading
/// taken at 50 (before the eviction) reaches the re-created ring.
#[test]
fn stale_reading_after_eviction_is_clamped_to_the_floor() {
    let clock = ManualClock::new();
    let lim =
        KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(100), clock.clone())
            .unwrap();
    assert_eq!(lim.check_at(&7, 0).unwrap().at(), 0);
    clock.set(250);
    assert_eq!(lim.retain_recent(), 1, "idle: 100 + margin 100 <= 250");
    // The peek says what the check does.
    assert_eq!(lim.peek_n_at(&7, 1, 50).unwrap().at(), 100);
    let late = lim.check_at(&7, 50).unwrap();
    assert!(
        late.at() >= 100,
        "admitted at {} next to the evicted admission at 0 (window 100, limit 1)",
        late.at()
    );
    // A reading at the present is not affected.
    assert_eq!(lim.check_at(&8, 250).unwrap().at(), 250);
    // Denials count retry_after from the caller's own reading.
    let denied = lim.check_at(&7, 60).unwrap_err();
    assert_eq!(denied.retry_after_nanos(), late.at() + 100 - 60);
}

/// The same for the counter: four admissions at 0, evicted, four more at a
/// stale 10 would put eight in one slot.
#[test]
fn counter_stale_reading_after_eviction_is_clamped_to_the_floor() {
    let clock = ManualClock::new();
    let lim = KeyedCounter::<u64, ManualClock>::counter_with_clock(
        4,
        Duration::from_nanos(100),
        4,
        clock.clone(),
    )
    .unwrap();
    let mut times: Vec<u64> = (0..4).map(|_| lim.check_at(&7, 0).unwrap().at()).collect();
    clock.set(1_000);
    assert_eq!(lim.retain_recent(), 1);
    for _ in 0..4 {
        if let Ok(a) = lim.check_at(&7, 10) {
            times.push(a.at());
        }
    }
    // Any 4 consecutive slots of 25 ns hold at most 4.
    let slots: Vec<u64> = times.iter().map(|t| t / 25).collect();
    for first in 0..=slots.iter().copied().max().unwrap() {
        let held = slots
            .iter()
            .filter(|&&s| (first..first + 4).contains(&s))
            .count();
        assert!(
            held <= 4,
            "{held} admissions in slots {first}..+4: {times:?}"
        );
    }
}

/// A reading from the future triggers sweeps, but they judge by the
/// limiter's clock: key 0's live history survives.
#[test]
fn future_reading_does_not_evict_live_keys() {
    let clock = ManualClock::new();
    let lim =
        KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_secs(10), clock.clone())
            .unwrap();
    lim.check_at(&0, 0).unwrap();
    let far = Duration::from_secs(1_000).as_nanos() as u64;
    // Enough new keys to run automatic sweeps.
    for k in 1..500 {
        lim.check_at(&k, far).unwrap();
    }
    clock.set(Duration::from_secs(1).as_nanos() as u64);
    let again = lim.check(&0);
    assert!(
        again.is_err(),
        "key 0 admitted again at 1 s, 1 per 10 s: {again:?}"
    );
    assert_eq!(
        again.unwrap_err().retry_after(),
        Duration::from_secs(9),
        "exact wait from the present"
    );
}

/// A future reading at the cap neither evicts live keys nor leaves a
/// `next_idle` far ahead that blocks later sweeps.
#[test]
fn future_reading_does_not_block_the_caps_sweeps() {
    let clock = ManualClock::new();
    let secs = |s: u64| Duration::from_secs(s).as_nanos() as u64;
    let lim = KeyedLimiter::<u64>::builder(1, Duration::from_secs(10))
        .clock(clock.clone())
        .max_keys(2)
        .build()
        .unwrap();
    lim.check_at(&1, 0).unwrap();
    lim.check_at(&2, 0).unwrap();
    // At the present (0) keys 1 and 2 are live: a reading from 1,000 s may
    // not evict them.
    let refused = lim.check_at(&3, secs(1_000)).unwrap_err();
    assert_eq!(refused.reason(), DenyReason::KeyCapacity);
    assert!(lim.check_at(&1, 0).unwrap_err().is_rate_limited());
    clock.set(secs(25)); // keys 1 and 2 idle (10 s window + 10 s margin)
    lim.check(&4).unwrap();
    clock.set(secs(100)); // key 4 idle too
    let five = lim.check(&5);
    assert!(
        five.is_ok(),
        "refused although key 4 has long been idle: {five:?}"
    );
}

/// Three threads take a reading, sleep past the window plus the idle margin
/// while a fourth advances the clock and sweeps, then check with it: no
/// key's effective times put more than `limit` in one window. For the log
/// and the counter.
fn stale_readers_across_sweeps<A: Algorithm>(
    lim: KeyedLimiter<u64, ManualClock, std::collections::hash_map::RandomState, A>,
    clock: ManualClock,
    check: fn(&mut Vec<u64>) -> usize,
) {
    let limit = lim.limit() as usize;
    let lim = Arc::new(lim);
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(HashMap::<u64, Vec<u64>>::new()));
    let barrier = Arc::new(Barrier::new(4));
    let rounds = if cfg!(debug_assertions) { 2_000 } else { 4_000 };
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (lim, clock, seen, barrier) = (
                Arc::clone(&lim),
                clock.clone(),
                Arc::clone(&seen),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                barrier.wait();
                for round in 0..rounds {
                    let key = round % 3;
                    let reading = clock.now();
                    if (round + i) % 2 == 0 {
                        // Descheduled while holding the reading.
                        thread::sleep(Duration::from_micros(50));
                    }
                    if let Ok(a) = lim.check_at(&key, reading) {
                        seen.lock().unwrap().entry(key).or_default().push(a.at());
                    }
                }
            })
        })
        .collect();
    let sweeper = {
        let (lim, clock, done, barrier) = (
            Arc::clone(&lim),
            clock.clone(),
            Arc::clone(&done),
            Arc::clone(&barrier),
        );
        thread::spawn(move || {
            barrier.wait();
            while !done.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(10));
                lim.retain_recent();
                thread::yield_now();
            }
        })
    };
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    sweeper.join().unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.values().map(Vec::len).sum::<usize>() > 0);
    for (key, times) in seen.iter() {
        let mut times = times.clone();
        let fullest = check(&mut times);
        assert!(
            fullest <= limit,
            "key {key}: {fullest} admissions in one window (limit {limit})"
        );
    }
}

#[test]
fn stale_readers_across_sweeps_never_over_admit() {
    let clock = ManualClock::new();
    // W = 20 µs, margin = W: a 50 µs sleep outlives both.
    let lim = KeyedLimiter::<u64>::builder(3, Duration::from_micros(20))
        .clock(clock.clone())
        .build()
        .unwrap();
    stale_readers_across_sweeps(lim, clock, |t| max_in_window(t, 20_000));
}

#[test]
fn counter_stale_readers_across_sweeps_never_over_admit() {
    let clock = ManualClock::new();
    // 4 slots of 5 µs: no 4 consecutive slots hold more than 3.
    let lim = KeyedLimiter::<u64>::builder(3, Duration::from_micros(20))
        .sliding_counter(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    stale_readers_across_sweeps(lim, clock, |times| {
        let slots: Vec<u64> = times.iter().map(|t| t / 5_000).collect();
        (0..=slots.iter().copied().max().unwrap_or(0))
            .map(|first| {
                slots
                    .iter()
                    .filter(|&&s| (first..first + 4).contains(&s))
                    .count()
            })
            .max()
            .unwrap_or(0)
    });
}
