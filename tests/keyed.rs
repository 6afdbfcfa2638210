//! KeyedLimiter against a map of reference models, eviction included, and
//! real-thread stress on few and many keys.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::{KeyedDriver, KeyedModel, ModelDecision, Step, keyed_ops, max_in_window, observed};
use proptest::prelude::*;
use slidelog::{DenyReason, KeyedLimiter, ManualClock};

fn keyed(limit: u32, window: u64, clock: &ManualClock) -> KeyedLimiter<u64, ManualClock> {
    KeyedLimiter::<u64, ManualClock>::with_clock(limit, Duration::from_nanos(window), clock.clone())
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Identical decisions to one reference log per key, while idle keys are
    /// evicted both by explicit sweeps and by the automatic sweep that a
    /// small `max_keys` forces. Limits on both sides of 11: states inside
    /// the map's entries and boxed (`keyed/state.rs`).
    #[test]
    fn keyed_equals_models(
        (limit, window, ops, max_keys) in (prop_oneof![3 => 1..5u32, 1 => 10..14u32], 1..50u64, 1..8usize)
            .prop_flat_map(|(l, w, m)| (Just(l), Just(w), keyed_ops(l, w), Just(m)))
    ) {
        keyed_against_models(limit, window, ops, max_keys, false)?;
    }

    /// The same through a [`slidelog::PinnedKeys`]: one pin held across
    /// the calls and the sweeps (refreshed, and now and then dropped for
    /// a new one), answering exactly as the limiter does.
    #[test]
    fn pinned_equals_models(
        (limit, window, ops, max_keys) in (prop_oneof![3 => 1..5u32, 1 => 10..14u32], 1..50u64, 1..8usize)
            .prop_flat_map(|(l, w, m)| (Just(l), Just(w), keyed_ops(l, w), Just(m)))
    ) {
        keyed_against_models(limit, window, ops, max_keys, true)?;
    }
}

/// `ops` on a keyed limiter of `limit` per `window` ns holding at most
/// `max_keys`, each decision compared with one reference log per key;
/// through a pin when `pinned`.
fn keyed_against_models(
    limit: u32,
    window: u64,
    ops: Vec<common::KeyedOp>,
    max_keys: usize,
    pinned: bool,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::<u64>::builder(limit, Duration::from_nanos(window))
        .clock(clock.clone())
        .max_keys(max_keys)
        .build()
        .unwrap();
    let mut model = KeyedModel::new(limit, window);
    let mut driver = KeyedDriver::new(&clock, max_keys, 2 * window);
    let mut pin = pinned.then(|| limiter.pin());
    for (i, op) in ops.into_iter().enumerate() {
        if let Some(held) = pin.as_mut() {
            match i % 8 {
                3 => held.refresh(),
                // A new pin taken while the old one is held, then the
                // old one dropped.
                7 => pin = Some(limiter.pin()),
                _ => {}
            }
        }
        let Step::Check { key, now, n } = driver.step(&op, || {
            limiter.retain_recent();
        }) else {
            continue;
        };
        if n == 1 && (key ^ now) & 1 == 1 {
            // Half the single checks go through `admit`: the same
            // decision and wait, without the count.
            let got = match &pin {
                Some(held) => held.admit(&key),
                None => limiter.admit(&key),
            };
            if driver.refused(&got, now)? {
                continue;
            }
            match model.decide(&key, now, 1) {
                ModelDecision::Admitted { .. } => {
                    prop_assert!(got.is_ok(), "admit of key {} at {}: {:?}", key, now, got);
                    driver.admitted(key, now);
                }
                ModelDecision::Denied { retry_after } => prop_assert_eq!(
                    got.map_err(|d| d.retry_after_nanos()),
                    Err(retry_after),
                    "admit of key {} at {}",
                    key,
                    now
                ),
                other => prop_assert!(false, "unexpected model answer {:?}", other),
            }
        } else {
            let got = match &pin {
                Some(held) => held.check_n(&key, n),
                None => limiter.check_n(&key, n),
            };
            if driver.refused(&got, now)? {
                continue;
            }
            prop_assert_eq!(
                observed(got),
                model.decide(&key, now, n),
                "key {} at {}",
                key,
                now
            );
            if got.is_ok() && n > 0 {
                driver.admitted(key, now);
            }
        }
        prop_assert!(limiter.len() <= max_keys);
    }
    Ok(())
}

#[test]
fn borrowed_keys_and_first_touch() {
    let limiter = KeyedLimiter::<String>::new(2, Duration::from_secs(60)).unwrap();
    assert!(limiter.is_empty());
    assert!(limiter.check_n("a", 0).is_ok());
    assert!(limiter.is_empty(), "n = 0 records nothing, creates nothing");
    assert!(limiter.check("a").is_ok());
    assert!(limiter.check(&"a".to_string()).is_ok());
    assert!(limiter.check("a").is_err());
    assert_eq!(limiter.len(), 1);
    assert!(matches!(
        limiter.check_n("b", 3).unwrap_err().reason(),
        DenyReason::ExceedsLimit {
            requested: 3,
            limit: 2
        }
    ));
    assert_eq!(limiter.len(), 1, "an impossible request creates no key");
}

#[test]
fn cap_denies_new_keys_and_never_evicts_busy_ones() {
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
        .clock(clock.clone())
        .max_keys(3)
        .build()
        .unwrap();
    for k in 0..3 {
        limiter.check(&k).unwrap();
    }
    let refused = limiter.check(&99).unwrap_err();
    assert_eq!(refused.reason(), DenyReason::KeyCapacity);
    assert!(!refused.is_rate_limited());
    assert_eq!(limiter.len(), 3);
    // The busy keys kept their admissions.
    for k in 0..3 {
        assert!(limiter.check(&k).unwrap_err().is_rate_limited());
    }
    // Once idle (window + margin), they make room for new keys.
    clock.advance(Duration::from_secs(2));
    assert!(limiter.check(&99).is_ok());
    assert!(limiter.len() <= 3);
}

#[test]
fn eviction_does_not_change_decisions() {
    let clock = ManualClock::new();
    let limiter = keyed(2, 100, &clock);
    limiter.check(&1).unwrap();
    clock.advance(Duration::from_nanos(150));
    assert_eq!(
        limiter.retain_recent(),
        0,
        "not idle yet: expired 50 ns ago, margin 100"
    );
    clock.advance(Duration::from_nanos(50));
    assert_eq!(limiter.retain_recent(), 1);
    assert!(limiter.is_empty());
    assert_eq!(limiter.check(&1).unwrap().remaining(), 1);
}

/// Many threads on few keys, with one thread sweeping and a small cap:
/// no window of any key holds more than `limit` admissions.
#[test]
fn stress_few_keys_with_eviction_racing() {
    stress_few_keys(false);
}

/// The same with threads 1 and 3 making their calls through pins, one per
/// 64 calls (thread 1 sweeping under its pin).
#[test]
fn stress_pinned_calls_with_eviction_racing() {
    stress_few_keys(true);
}

/// Four threads on six keys of at most four live, the clock moving and
/// sweeps racing the calls: no key admits more than its limit in any
/// window. With `pinned`, threads 1 and 3 call through pins.
fn stress_few_keys(pinned: bool) {
    let (limit, window) = (3u32, 1_000u64);
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<u64>::builder(limit, Duration::from_nanos(window))
            .clock(clock.clone())
            .max_keys(4)
            .build()
            .unwrap(),
    );
    let ops = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    let seen = Arc::new(Mutex::new(HashMap::<u64, Vec<u64>>::new()));
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            let (limiter, seen, barrier) = (
                Arc::clone(&limiter),
                Arc::clone(&seen),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                let mut mine: HashMap<u64, Vec<u64>> = HashMap::new();
                let pins = pinned && i % 2 == 1;
                barrier.wait();
                let mut pin = pins.then(|| limiter.pin());
                for k in 0..ops {
                    if pins && k % 64 == 0 {
                        pin = Some(limiter.pin());
                    }
                    if i == 0 && k % 5 == 0 {
                        limiter.clock().advance(Duration::from_nanos(97));
                    }
                    if i == 1 && k % 1_000 == 0 {
                        limiter.retain_recent();
                    }
                    let key = (k as u64 * 7 + i) % 6;
                    let got = match &pin {
                        Some(held) => held.check(&key),
                        None => limiter.check(&key),
                    };
                    if let Ok(a) = got {
                        mine.entry(key).or_default().push(a.at());
                    }
                }
                let mut seen = seen.lock().unwrap();
                for (k, v) in mine {
                    seen.entry(k).or_default().extend(v);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let seen = Arc::try_unwrap(seen).unwrap().into_inner().unwrap();
    assert!(!seen.is_empty());
    for (key, mut times) in seen {
        let max = max_in_window(&mut times, window);
        assert!(
            max <= limit as usize,
            "key {key}: {max} admissions in one window"
        );
    }
    assert!(limiter.len() <= 4);
}

/// Many threads on many keys with the real clock; concurrent first requests
/// for one key share one ring (exactly `limit` admitted per key).
#[test]
fn stress_first_touch_shares_one_ring() {
    let limit = 2u32;
    let limiter = Arc::new(KeyedLimiter::<u64>::new(limit, Duration::from_secs(3600)).unwrap());
    let keys = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                (0..keys).filter(|k| limiter.check(k).is_ok()).count()
            })
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(admitted, keys as usize * limit as usize);
    assert_eq!(limiter.len(), keys as usize);
}

/// Bounded memory: the default `max_keys` stays within the 256 MiB budget
/// at every limit (a floor of 1,024 keys would allow 8 GiB at L = 2^20).
#[test]
fn default_key_cap_is_bounded_by_memory_at_any_limit() {
    for limit in [1, 10, 1_000, 32_768, 100_000, slidelog::MAX_LIMIT] {
        let limiter = KeyedLimiter::<u64>::new(limit, Duration::from_secs(1)).unwrap();
        let bound = limiter.max_keys() * limiter.bytes_per_key();
        assert!(
            bound <= 256 << 20,
            "L = {limit}: {} keys x {} bytes = {bound}",
            limiter.max_keys(),
            limiter.bytes_per_key()
        );
        assert!(limiter.max_keys() >= 1);
    }
}

/// Valid extremes never panic (debug builds check overflow): the
/// longest window, readings at `u64::MAX` that run automatic sweeps, and a
/// clock advanced by `Duration::MAX` before an explicit sweep.
#[test]
fn extreme_windows_and_times_never_panic() {
    let longest = slidelog::MAX_WINDOW;
    let one = slidelog::Limiter::new(1, longest).unwrap();
    assert!(one.check_at(0).is_ok());
    assert!(one.check_at(u64::MAX).unwrap_err().is_rate_limited());
    let keyed = KeyedLimiter::<u64>::new(1, longest).unwrap();
    assert!(keyed.check_at(&1, 0).is_ok());
    assert!(keyed.check_at(&1, 1).is_err());
    for algorithm in 0..2 {
        let clock = ManualClock::new();
        let builder = KeyedLimiter::<u64>::builder(2, Duration::from_secs(1))
            .clock(clock.clone())
            .max_keys(100);
        let check = |limiter: &dyn Fn(u64, u64) -> bool| {
            // New keys at the end of time: automatic sweeps and the cap's.
            for key in 0..300 {
                let _ = limiter(key, u64::MAX);
            }
        };
        if algorithm == 0 {
            let l = builder.build().unwrap();
            check(&|k, t| l.check_at(&k, t).is_ok());
            clock.advance(Duration::MAX);
            l.retain_recent();
            assert!(l.check(&1_000).is_ok());
        } else {
            let l = builder.sliding_counter(4).build().unwrap();
            check(&|k, t| l.check_at(&k, t).is_ok());
            clock.advance(Duration::MAX);
            l.retain_recent();
            assert!(l.check(&1_000).is_ok());
        }
    }
}

/// A steady population of keys that each come back after more
/// than the window plus the idle margin is not evicted and re-created over
/// and over (automatic sweeps run only under memory pressure), while a
/// small cap still evicts idle keys to make room.
#[test]
fn a_steady_key_population_does_not_churn() {
    let clock = ManualClock::new();
    let limiter = keyed(10, 1_000, &clock);
    // Time moves on while the keys cycle: each comes back 10 µs later,
    // long after the window plus the idle margin (2 µs).
    for _ in 0..20 {
        for key in 0..10_000u64 {
            assert!(limiter.check(&key).is_ok());
            clock.advance(Duration::from_nanos(1));
        }
    }
    assert_eq!(limiter.evicted(), 0, "a steady population churned");
    assert_eq!(limiter.len(), 10_000);
    // At half a small cap, new keys sweep the idle ones away.
    let capped = KeyedLimiter::<u64>::builder(10, Duration::from_nanos(1_000))
        .clock(clock.clone())
        .max_keys(1_000)
        .build()
        .unwrap();
    for key in 0..5_000u64 {
        assert!(capped.check(&key).is_ok(), "key {key}");
        clock.advance(Duration::from_nanos(10));
    }
    assert!(capped.evicted() >= 4_000, "evicted {}", capped.evicted());
    assert!(capped.len() <= 1_000);
}

/// A zero byte budget is a configuration error, not a limiter that refuses
/// every key.
#[test]
fn zero_byte_budget_is_a_config_error() {
    let err = KeyedLimiter::<String>::builder(1, Duration::from_secs(1))
        .max_bytes(0)
        .build()
        .unwrap_err();
    assert_eq!(err, slidelog::ConfigError::ZeroMaxBytes);
    assert!(err.to_string().contains("max_bytes"));
}

/// A byte budget smaller than one key (`max_bytes(64)` meant as 64 MiB) is
/// a configuration error too, naming what one key takes; a budget of
/// exactly one key holds one key. With per-key quotas the bar is the least
/// any key can take: a quota whose log fits the entry inline.
#[test]
fn a_budget_below_one_key_is_a_config_error() {
    let builder = || KeyedLimiter::<String>::builder(10, Duration::from_secs(60));
    let per_key = builder().build().unwrap().bytes_per_key();
    let err = builder().max_bytes(per_key - 1).build().unwrap_err();
    assert_eq!(
        err,
        slidelog::ConfigError::MaxBytesBelowOneKey {
            max_bytes: per_key - 1,
            per_key
        }
    );
    assert!(err.to_string().contains(&per_key.to_string()), "{err}");
    let one = builder().max_bytes(per_key).build().unwrap();
    assert!(one.check("").is_ok());
    let refused = one.check("b").unwrap_err();
    assert_eq!(refused.reason(), slidelog::DenyReason::KeyCapacity);
    assert!(refused.to_string().contains("memory budget"), "{refused}");

    // A boxed default log (L = 1,000) with a per-key quota of 2: a budget
    // below the default's key, above the small one's, holds small keys.
    let small = slidelog::Quota::new(2, Duration::from_secs(60)).unwrap();
    let boxed = || {
        let small = small.clone();
        KeyedLimiter::<String>::builder(1_000, Duration::from_secs(60))
            .quota(move |key: &String| key.starts_with("small").then(|| small.clone()))
    };
    let big_key = boxed().build().unwrap().bytes_per_key();
    let limiter = boxed().max_bytes(big_key - 1).build().unwrap();
    assert!(limiter.check("small").is_ok());
    assert_eq!(
        limiter.check("other").unwrap_err().reason(),
        slidelog::DenyReason::KeyCapacity
    );
    assert!(matches!(
        boxed().max_bytes(1).build().unwrap_err(),
        slidelog::ConfigError::MaxBytesBelowOneKey { max_bytes: 1, .. }
    ));
}

/// Room asked for up front is at most what the budget holds: a capacity
/// beyond any memory, with the key cap lifted, builds a limiter (instead
/// of aborting on the allocation) whose keys work as ever.
#[test]
fn capacity_is_bounded_by_the_budget() {
    let limiter = KeyedLimiter::<u64>::builder(2, Duration::from_secs(1))
        .max_keys(usize::MAX)
        .max_bytes(1 << 20)
        .capacity(usize::MAX)
        .build()
        .unwrap();
    for key in 0..100u64 {
        assert_eq!(limiter.check(&key).unwrap().remaining(), 1);
    }
    assert_eq!(limiter.len(), 100);
}

/// `remove` forgets a key (its next request starts with the whole quota)
/// and gives its memory back to the budget; `reset` is the same; removing
/// an absent key changes nothing. Log and counter per key.
#[test]
fn remove_forgets_a_key_and_frees_its_budget() {
    let log = KeyedLimiter::<String>::new(2, Duration::from_secs(60)).unwrap();
    let counter = KeyedLimiter::<String>::builder(2, Duration::from_secs(60))
        .sliding_counter(4)
        .build()
        .unwrap();
    assert!(log.check("a").is_ok() && log.check("a").is_ok());
    assert!(log.check("a").is_err());
    assert!(log.check("b").is_ok());
    let two = log.memory_bytes();
    assert!(log.remove("a"));
    assert_eq!((log.len(), log.memory_bytes()), (1, two / 2));
    assert_eq!(log.check("a").unwrap().remaining(), 1, "a fresh quota");
    log.reset("a");
    log.reset("a");
    assert!(!log.remove("a"));
    assert_eq!(log.len(), 1);
    assert!(log.remove("b"));
    assert_eq!((log.len(), log.memory_bytes()), (0, 0));

    assert!(counter.check_n("t", 2).is_ok());
    assert!(counter.check("t").is_err());
    assert!(counter.remove("t"));
    assert_eq!(counter.memory_bytes(), 0);
    assert!(counter.check_n("t", 2).is_ok());
}

/// A pin held across everything else a keyed limiter does — a
/// reconfiguration, a per-key quota, a reset, a removal, an eviction —
/// answers as a twin limiter asked without a pin does after each.
#[test]
fn a_pin_held_across_reconfiguration_and_removal() {
    let clocks = [ManualClock::new(), ManualClock::new()];
    let [ours, twin] = [keyed(4, 1_000, &clocks[0]), keyed(4, 1_000, &clocks[1])];
    let pinned = ours.pin();
    // Each step on both limiters, then every key's check (and a peek)
    // compared: through the pin on ours, plainly on the twin.
    let step = |what: &str, on: &dyn Fn(&KeyedLimiter<u64, ManualClock>)| {
        on(&ours);
        on(&twin);
        for key in 0..4u64 {
            assert_eq!(pinned.peek(&key), twin.peek(&key), "{what}: peek {key}");
            assert_eq!(pinned.check(&key), twin.check(&key), "{what}: check {key}");
        }
    };
    step("start", &|_| {});
    step("more", &|_| {});
    step("a cut to two", &|l| {
        l.reconfigure(slidelog::Quota::new(2, Duration::from_nanos(1_000)).unwrap())
            .unwrap()
    });
    step("key 1 raised to ten", &|l| {
        l.set_quota(
            1,
            slidelog::Quota::new(10, Duration::from_nanos(1_000)).unwrap(),
        )
        .unwrap()
    });
    step("key 0 reset", &|l| l.reset(&0));
    step("key 2 removed", &|l| assert!(l.remove(&2)));
    step("an hour on, idle keys evicted", &|l| {
        l.clock().advance(Duration::from_secs(3_600));
        assert!(l.retain_recent() > 0);
    });
    assert_eq!(ours.len(), twin.len());
}
