//! KeyedLimiter with the counter per key (`KeyedCounter`): decisions equal
//! one `SlidingCounter` per key, eviction and the key cap included; real
//! threads keep each key's guarantee.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{CounterModel, KeyedDriver, Step, keyed_ops};
use proptest::prelude::*;
use slidelog::{CounterMode, DenyReason, KeyedCounter, KeyedLimiter, ManualClock, SlidingCounter};

/// Slot counts on both sides of 9: a keyed counter's state (`N + 3` words)
/// inside its map entry or boxed (`keyed/state.rs`).
fn mode() -> impl Strategy<Value = CounterMode> {
    prop_oneof![
        3 => (1..6u32).prop_map(CounterMode::Slots),
        1 => (8..12u32).prop_map(CounterMode::Slots),
        1 => Just(CounterMode::TwoWindow),
    ]
}

fn reference(
    limit: u32,
    window: u64,
    mode: CounterMode,
    clock: &ManualClock,
) -> SlidingCounter<ManualClock> {
    let w = Duration::from_nanos(window);
    match mode {
        CounterMode::Slots(n) => SlidingCounter::with_clock(limit, w, n, clock.clone()),
        _ => SlidingCounter::two_window_with_clock(limit, w, clock.clone()),
    }
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Identical decisions (`at`, `remaining`, `retry_after`, reason) to the
    /// plainly written counter model, one per key, and to a never-evicted
    /// `SlidingCounter` per key, while idle keys are evicted by explicit
    /// sweeps and by the automatic sweeps a small `max_keys` forces; half
    /// the checks and a third of the peeks made through a
    /// [`slidelog::PinnedKeys`].
    #[test]
    fn keyed_counter_equals_one_counter_per_key(
        (limit, window, mode, ops, max_keys) in (1..5u32, 6..60u64, mode(), 1..8usize)
            .prop_map(|(l, w, m, k)| match m {
                // A sub-window is at least 1 ns.
                CounterMode::Slots(n) => (l, w.max(u64::from(n)), m, k),
                _ => (l, w, m, k),
            })
            .prop_flat_map(|(l, w, m, k)| (Just(l), Just(w), Just(m), keyed_ops(l, w), Just(k)))
    ) {
        let clock = ManualClock::new();
        let limiter = KeyedLimiter::<u64>::builder(limit, Duration::from_nanos(window))
            .counter_mode(mode)
            .clock(clock.clone())
            .max_keys(max_keys)
            .build()
            .unwrap();
        let mut references: HashMap<u64, SlidingCounter<ManualClock>> = HashMap::new();
        let mut models: HashMap<u64, CounterModel> = HashMap::new();
        // A key may count admissions for its span plus the margin: at most
        // four windows.
        let mut driver = KeyedDriver::new(&clock, max_keys, 4 * window);
        let mut pin = limiter.pin();
        for (i, op) in ops.iter().enumerate() {
            let Step::Check { key, now, n } = driver.step(op, || {
                limiter.retain_recent();
            }) else {
                continue;
            };
            let peeked = if i % 3 == 0 {
                pin.peek_n_at(&key, n, now)
            } else {
                limiter.peek_n_at(&key, n, now)
            };
            // Every other check also asks when `remaining` grows; of both
            // kinds, every other one goes through a pin (one held since
            // earlier calls: a pin's guard nests with the calls' own).
            let (got, grows) = if i % 4 == 0 {
                (limiter.check_n(&key, n), None)
            } else if i % 2 == 0 {
                let got = pin.check_n(&key, n);
                pin = limiter.pin();
                (got, None)
            } else {
                let growing = if i % 4 == 1 {
                    pin.check_n_with_growth(&key, n)
                } else {
                    limiter.check_n_with_growth(&key, n)
                };
                match growing {
                    Ok((admitted, grows)) => (Ok(admitted), Some(grows)),
                    Err(denied) => (Err(denied), None),
                }
            };
            if driver.refused(&got, now)? {
                continue;
            }
            let reference = references
                .entry(key)
                .or_insert_with(|| reference(limit, window, mode, &clock));
            let expect = reference.check_n_at(n, now);
            prop_assert_eq!(got, expect, "key {} at {}", key, now);
            // The counter's growth: the dry run of one unit more than is
            // left, right after the check.
            if let (Some(grows), Ok(admitted)) = (grows, expect) {
                let more = reference.peek_n_at(admitted.remaining() + 1, now);
                let want = more.err().filter(|d| d.is_rate_limited()).map_or(0, |d| d.retry_after_nanos());
                prop_assert_eq!(grows, Duration::from_nanos(want), "growth, key {} at {}", key, now);
            }
            if n <= limit {
                let model = models
                    .entry(key)
                    .or_insert_with(|| CounterModel::new(limit, window, mode))
                    .decide(now, n);
                let got = got.map(|a| (a.at(), a.remaining())).map_err(|d| d.retry_after_nanos());
                prop_assert_eq!(got, model, "model, key {} at {}", key, now);
            }
            prop_assert_eq!(peeked, expect, "peek, key {} at {}", key, now);
            if got.is_ok() && n > 0 {
                driver.admitted(key, now);
            }
            prop_assert!(limiter.len() <= max_keys);
        }
    }
}

#[test]
fn constructors_and_errors() {
    let limiter = KeyedCounter::<String>::counter(1_000_000, Duration::from_secs(60), 60).unwrap();
    assert_eq!(limiter.algorithm().mode(), CounterMode::Slots(60));
    assert_eq!(limiter.limit(), 1_000_000);
    assert_eq!(limiter.window(), Duration::from_secs(60));
    // 62 words whatever the limit; the log would need 1,000,001.
    assert!(limiter.bytes_per_key() < 600, "{}", limiter.bytes_per_key());
    assert!(limiter.check_n("a", 1_000_000).is_ok());
    assert!(limiter.check("a").unwrap_err().is_rate_limited());
    assert!(matches!(
        limiter.check_n("b", 1_000_001).unwrap_err().reason(),
        DenyReason::ExceedsLimit {
            requested: 1_000_001,
            limit: 1_000_000
        }
    ));
    assert_eq!(limiter.len(), 1, "an impossible request creates no key");

    let err =
        |b: slidelog::KeyedBuilder<u64, _, _, slidelog::algorithm::Counter>| b.build().unwrap_err();
    let w = Duration::from_secs(1);
    use slidelog::ConfigError::*;
    assert_eq!(
        err(KeyedLimiter::<u64>::builder(10, w).sliding_counter(0)),
        ZeroSlots
    );
    assert_eq!(
        err(KeyedLimiter::<u64>::builder(0, w).two_window()),
        ZeroLimit
    );
    assert_eq!(
        err(KeyedLimiter::<u64>::builder(10, Duration::ZERO).sliding_counter(3)),
        ZeroWindow
    );
    assert!(matches!(
        err(KeyedLimiter::<u64>::builder(slidelog::MAX_COUNTER_LIMIT + 1, w).sliding_counter(3)),
        LimitTooLarge { .. }
    ));
    assert!(matches!(
        err(KeyedLimiter::<u64>::builder(10, Duration::from_nanos(5)).sliding_counter(6)),
        TooManySlots { slots: 6, max: 5 }
    ));
    assert_eq!(
        err(KeyedLimiter::<u64>::builder(10, w)
            .sliding_counter(2)
            .max_keys(0)),
        ZeroMaxKeys
    );
    // The counter allows limits beyond the log's MAX_LIMIT.
    assert!(
        KeyedLimiter::<u64>::builder(slidelog::MAX_LIMIT + 1, w)
            .sliding_counter(10)
            .build()
            .is_ok()
    );
}

#[test]
fn idle_counters_are_evicted_and_busy_ones_kept() {
    let clock = ManualClock::new();
    // 10 slots of 10 ns; margin raised to the window (100 ns).
    let limiter = KeyedCounter::<u64, ManualClock>::counter_with_clock(
        2,
        Duration::from_nanos(100),
        10,
        clock.clone(),
    )
    .unwrap();
    clock.set(35);
    limiter.check(&1).unwrap(); // slot [30, 40): counts until 130
    limiter.check(&2).unwrap();
    clock.set(229);
    assert_eq!(
        limiter.retain_recent(),
        0,
        "idle only from 130 + margin 100"
    );
    limiter.check(&2).unwrap(); // key 2 is busy again
    clock.set(230);
    assert_eq!(limiter.retain_recent(), 1);
    assert_eq!(limiter.len(), 1);
    // The evicted key behaves as absent: a full fresh budget.
    assert_eq!(limiter.check_n(&1, 2).unwrap().remaining(), 0);
    // The busy one kept its count.
    assert_eq!(limiter.check(&2).unwrap().remaining(), 0);
}

#[test]
fn key_cap_holds_for_counters() {
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
        .two_window()
        .clock(clock.clone())
        .max_keys(2)
        .build()
        .unwrap();
    limiter.check(&1).unwrap();
    limiter.check(&2).unwrap();
    let refused = limiter.check(&3).unwrap_err();
    assert_eq!(refused.reason(), DenyReason::KeyCapacity);
    assert!(refused.retry_after() > Duration::ZERO);
    // Two windows (the weighted tail) plus the margin later, room again.
    clock.advance(Duration::from_secs(3));
    assert!(limiter.check(&3).is_ok());
    assert!(limiter.len() <= 2);
}

/// Threads hammering a few keys at one instant: each key admits exactly
/// `limit` (no over-admission, no spurious denial), keys are independent.
#[test]
fn threads_at_one_instant_admit_exactly_the_limit_per_key() {
    let (threads, keys, limit) = (4, 8u64, 500u32);
    let limiter = Arc::new(
        KeyedLimiter::<u64>::builder(limit, Duration::from_secs(1))
            .sliding_counter(10)
            .clock(ManualClock::starting_at(1 << 40))
            .build()
            .unwrap(),
    );
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut admitted = vec![0u32; keys as usize];
                for i in 0..(limit as u64 * keys) {
                    let key = i % keys;
                    if limiter.check(&key).is_ok() {
                        admitted[key as usize] += 1;
                    }
                }
                admitted
            })
        })
        .collect();
    let counts: Vec<Vec<u32>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for key in 0..keys as usize {
        let total: u32 = counts.iter().map(|c| c[key]).sum();
        assert_eq!(total, limit, "key {key}");
    }
}

/// Threads on a clock that one of them advances: per key, any N consecutive
/// slots (by the `at` each admission reports) hold at most `limit`.
#[test]
fn threads_with_a_moving_clock_keep_every_slot_span() {
    let (threads, keys, limit, slots, width) = (3, 4u64, 20u32, 5u32, 1_000u64);
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<u64>::builder(limit, Duration::from_nanos(width * u64::from(slots)))
            .sliding_counter(slots)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let ticker = {
        let clock = clock.clone();
        thread::spawn(move || {
            for _ in 0..20_000 {
                clock.advance(Duration::from_nanos(7));
                thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = (0..threads)
        .map(|w| {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                let mut got = Vec::new();
                for i in 0..60_000u64 {
                    let key = (i + w) % keys;
                    if let Ok(a) = limiter.check(&key) {
                        got.push((key, a.at()));
                    }
                }
                got
            })
        })
        .collect();
    let admitted: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    ticker.join().unwrap();
    assert!(!admitted.is_empty());
    for key in 0..keys {
        let mut per_slot: HashMap<u64, u32> = HashMap::new();
        for &(_, at) in admitted.iter().filter(|(k, _)| *k == key) {
            *per_slot.entry(at / width).or_default() += 1;
        }
        let last = per_slot.keys().copied().max().unwrap_or(0);
        for start in 0..=last {
            let span: u32 = (start..start + u64::from(slots))
                .filter_map(|s| per_slot.get(&s))
                .sum();
            assert!(
                span <= limit,
                "key {key}: {span} admissions in slots {start}..+{slots}"
            );
        }
    }
}
