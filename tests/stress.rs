//! Real-thread stress: no window ever holds more than `limit` admissions,
//! and threads racing at one instant admit exactly `limit`.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::max_in_window;
use slidelog::{Clock, Limiter, ManualClock};

/// Scales with the build: a debug build under CI is slow (crossbeam's idiom).
const OPS: usize = if cfg!(debug_assertions) {
    20_000
} else {
    200_000
};

/// Runs `threads` workers, each doing `ops` calls of `work`, and gathers every
/// admitted `at()` (one entry per unit).
fn collect<F>(threads: usize, work: F) -> Vec<u64>
where
    F: Fn(usize) -> Vec<u64> + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let work = Arc::clone(&work);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                work(i)
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

#[test]
fn manual_clock_advanced_by_one_thread() {
    for &(threads, limit) in &[(2usize, 1u32), (4, 3), (8, 16)] {
        let window = 1_000u64;
        let clock = ManualClock::new();
        let limiter = Arc::new(
            Limiter::with_clock(limit, Duration::from_nanos(window), clock.clone()).unwrap(),
        );
        let l = Arc::clone(&limiter);
        let mut ats = collect(threads, move |i| {
            let mut ats = Vec::new();
            for k in 0..OPS {
                if i == 0 && k % 7 == 0 {
                    l.clock().advance(Duration::from_nanos(37));
                }
                let n = if k % 11 == 0 { limit.min(2) } else { 1 };
                if let Ok(a) = l.check_n(n) {
                    ats.extend(std::iter::repeat_n(a.at(), n as usize));
                }
            }
            ats
        });
        assert!(!ats.is_empty());
        let max = max_in_window(&mut ats, window);
        assert!(
            max <= limit as usize,
            "{threads} threads, limit {limit}: {max} admissions in one window"
        );
    }
}

#[test]
fn real_clock_never_over_admits() {
    let window = 200_000u64; // 200 µs: many windows per run
    let limit = 8;
    let limiter = Arc::new(Limiter::new(limit, Duration::from_nanos(window)).unwrap());
    let l = Arc::clone(&limiter);
    let mut ats = collect(4, move |i| {
        let mut ats = Vec::new();
        for k in 0..OPS {
            let n = if (k + i) % 13 == 0 { 3 } else { 1 };
            if let Ok(a) = l.check_n(n) {
                ats.extend(std::iter::repeat_n(a.at(), n as usize));
            }
        }
        ats
    });
    assert!(ats.len() > limit as usize);
    assert!(max_in_window(&mut ats, window) <= limit as usize);
}

#[test]
fn racing_at_one_instant_admits_exactly_limit() {
    for round in 0..200u64 {
        let limit = 1 + (round % 7) as u32;
        let threads = 2 + (round % 7) as usize;
        let clock = ManualClock::starting_at(round);
        let limiter = Arc::new(Limiter::with_clock(limit, Duration::from_secs(1), clock).unwrap());
        // Pre-fill and expire the ring so that the race happens after a wrap.
        if round % 2 == 1 {
            for _ in 0..limit {
                limiter.check().unwrap();
            }
            limiter.clock().advance(Duration::from_secs(1));
        }
        let l = Arc::clone(&limiter);
        let per_thread = limit as usize; // total offered: threads * limit > limit
        let ats = collect(threads, move |_| {
            (0..per_thread)
                .filter_map(|_| l.check().ok().map(|a| a.at()))
                .collect()
        });
        assert_eq!(ats.len(), limit as usize, "round {round}");
        let now = limiter.clock().now();
        assert!(ats.iter().all(|&t| t == now));
    }
}

#[test]
fn weighted_racing_singles_is_all_or_nothing() {
    let limit = 10;
    for _ in 0..100 {
        let limiter = Arc::new(
            Limiter::with_clock(limit, Duration::from_secs(1), ManualClock::new()).unwrap(),
        );
        let l = Arc::clone(&limiter);
        let units = collect(4, move |i| {
            let n = if i % 2 == 0 { 3 } else { 1 };
            let mut taken = Vec::new();
            for _ in 0..10 {
                if l.check_n(n).is_ok() {
                    taken.extend(std::iter::repeat_n(0, n as usize));
                }
            }
            taken
        });
        // Every unit was admitted whole; the ring is exactly full or short
        // only by less than the smallest weight that could still fit.
        assert!(units.len() <= limit as usize);
        assert_eq!(
            limiter.check_n(0).unwrap().remaining(),
            limit - units.len() as u32
        );
        assert_eq!(
            units.len(),
            limit as usize,
            "singles could always fill the rest"
        );
    }
}

/// P3 for weighted requests: a pair racing singles at one instant, with
/// room for everything (a pair plus `limit - 2` singles), is never denied.
/// With L >= 4 the head is lazy and the pair can meet a torn view (slot c
/// unclaimed, slot c + 1 claimed): trusting it denies about once in 2,000
/// rounds at L = 4. Two persistent threads meet at a spin barrier before
/// each round, on a fresh limiter.
#[test]
fn weighted_racing_singles_with_room_is_never_denied() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let rounds = if cfg!(debug_assertions) {
        20_000
    } else {
        60_000
    };
    for limit in [4u32, 8] {
        let limiters: Arc<Vec<Limiter<ManualClock>>> = Arc::new(
            (0..rounds)
                .map(|_| {
                    Limiter::with_clock(limit, Duration::from_secs(1), ManualClock::new()).unwrap()
                })
                .collect(),
        );
        let arrived = Arc::new(AtomicUsize::new(0));
        let meet = |arrived: &AtomicUsize, round: usize| {
            arrived.fetch_add(1, Ordering::AcqRel);
            while arrived.load(Ordering::Acquire) < 2 * (round + 1) {
                std::hint::spin_loop();
            }
        };
        let (ls, a) = (Arc::clone(&limiters), Arc::clone(&arrived));
        let singles = thread::spawn(move || {
            let mut denied = 0;
            for (round, l) in ls.iter().enumerate() {
                meet(&a, round);
                denied += (0..limit - 2).filter(|_| l.check_at(0).is_err()).count();
            }
            denied
        });
        let mut wrong = 0;
        for (round, l) in limiters.iter().enumerate() {
            meet(&arrived, round);
            if l.check_n_at(2, 0).is_err() {
                wrong += 1;
            }
        }
        assert_eq!(singles.join().unwrap(), 0, "a single was denied");
        assert_eq!(
            wrong, 0,
            "L = {limit}: {wrong} pairs denied with room for them"
        );
        for l in limiters.iter() {
            assert_eq!(l.peek_n_at(0, 0).unwrap().remaining(), 0, "lost units");
        }
    }
}
