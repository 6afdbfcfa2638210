//! The approximate sliding-window counter: its guarantees, and how often and
//! by how much it disagrees with the exact log on random traffic.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::Model;
use proptest::prelude::*;
use slidelog::{ConfigError, CounterMode, Limiter, ManualClock, RateLimit, SlidingCounter};

fn counter(limit: u32, window: u64, mode: CounterMode) -> SlidingCounter<ManualClock> {
    let w = Duration::from_nanos(window);
    match mode {
        CounterMode::Slots(n) => SlidingCounter::with_clock(limit, w, n, ManualClock::new()),
        _ => SlidingCounter::two_window_with_clock(limit, w, ManualClock::new()),
    }
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Slots mode: (1) any N consecutive slots hold at most `limit`
    /// admissions; (2) against the exact rule applied to the counter's own
    /// admissions, a decision differs only when an admission expires within
    /// one slot width of the request.
    #[test]
    fn slots_guarantee(
        limit in 1..8u32,
        slots in 1..8u32,
        width in 1..20u64,
        steps in prop::collection::vec((0..30u64, 1..3u32), 1..300),
    ) {
        let window = width * u64::from(slots);
        let c = counter(limit, window, CounterMode::Slots(slots));
        let mut admitted: Vec<u64> = Vec::new();
        let mut t = 0;
        for (dt, n) in steps {
            t += dt;
            let n = n.min(limit);
            let got = c.check_n_at(n, t).is_ok();
            let live = admitted.iter().filter(|&&a| a + window > t).count() as u32;
            let exact = live + n <= limit;
            if got != exact {
                let near = admitted.iter().any(|&a| a + window + width > t && a + window <= t + width);
                prop_assert!(near, "differs at t={} with no expiry within one slot width", t);
            }
            if got {
                admitted.extend(std::iter::repeat_n(t, n as usize));
            }
        }
        // (1): per aligned span of N slots.
        let last_slot = t / width;
        for start in 0..=last_slot {
            let (lo, hi) = (start * width, (start + u64::from(slots)) * width);
            let in_span = admitted.iter().filter(|&&a| a >= lo && a < hi).count();
            prop_assert!(in_span <= limit as usize, "{} admissions in slots {}..{}", in_span, start, start + u64::from(slots));
        }
    }

    /// `check_n_with_growth_at` decides as `check_n_at` does on a twin,
    /// and its growth is the twin's dry run of one unit more than is left
    /// right after: denied exactly that long (0 when it fits or can never
    /// fit). Both modes, through the inherent method and `RateLimit`.
    #[test]
    fn growth_is_the_dry_run_of_one_more(
        limit in 1..8u32,
        mode in prop_oneof![(1..8u32).prop_map(CounterMode::Slots), Just(CounterMode::TwoWindow)],
        width in 1..20u64,
        steps in prop::collection::vec((0..30u64, 0..4u32, any::<bool>()), 1..200),
    ) {
        let window = width * 8;
        let (c, twin) = (counter(limit, window, mode), counter(limit, window, mode));
        let mut t = 0;
        for (dt, n, dynamic) in steps {
            t += dt;
            let got = if dynamic {
                RateLimit::check_n_with_growth_at(&c, n, t)
            } else {
                c.check_n_with_growth_at(n, t)
            };
            let want = twin.check_n_at(n, t);
            prop_assert_eq!(got.map(|(a, _)| a), want, "t={} n={}", t, n);
            if let (Ok((_, grows)), Ok(admitted)) = (got, want) {
                let more = twin.peek_n_at(admitted.remaining() + 1, t);
                let want = match more {
                    Err(denied) if denied.is_rate_limited() => denied.retry_after(),
                    _ => Duration::ZERO,
                };
                prop_assert_eq!(grows, want, "growth, t={} n={}", t, n);
            }
        }
    }

    /// Slots mode with any window, also when N does not divide it (issue
    /// #14): slot k spans [ceil(k W / N), ceil((k + 1) W / N)), so N
    /// consecutive slots span exactly W. The counter never denies what the
    /// exact rule (on the counter's own admissions) admits, and any N
    /// consecutive slots hold at most `limit`.
    #[test]
    fn never_denies_what_the_log_admits_for_any_window(
        limit in 1..6u32,
        (window, slots) in (1..200u64).prop_flat_map(|w| (Just(w), 1..=(w.min(9) as u32))),
        steps in prop::collection::vec((0..40u64, 1..3u32), 1..200),
    ) {
        let c = counter(limit, window, CounterMode::Slots(slots));
        let slot_of = |t: u64| t * u64::from(slots) / window;
        let mut admitted: Vec<u64> = Vec::new();
        let mut t = 0;
        for (dt, n) in steps {
            t += dt;
            let n = n.min(limit);
            let got = c.check_n_at(n, t);
            let live = admitted.iter().filter(|&&a| a + window > t).count() as u32;
            if live + n <= limit {
                prop_assert!(got.is_ok(), "W={} N={}: denied at {} what the log admits ({} live): {:?}", window, slots, t, live, got);
            }
            if got.is_ok() {
                admitted.extend(std::iter::repeat_n(t, n as usize));
            }
        }
        for first in 0..=slot_of(t) {
            let span = admitted.iter().filter(|&&a| (first..first + u64::from(slots)).contains(&slot_of(a))).count();
            prop_assert!(span <= limit as usize, "{} admissions in slots {}..+{}", span, first, slots);
        }
    }

    /// Both modes: never more than `limit` admissions at one instant, and
    /// `retry_after` never sends a caller back before anything changed.
    #[test]
    fn both_modes_respect_the_limit_at_an_instant(
        limit in 1..10u32,
        two in any::<bool>(),
        attempts in 1..40u32,
    ) {
        let mode = if two { CounterMode::TwoWindow } else { CounterMode::Slots(4) };
        let c = counter(limit, 1_000, mode);
        let admitted = (0..attempts).filter(|_| c.check_at(500).is_ok()).count();
        prop_assert_eq!(admitted, (limit as usize).min(attempts as usize));
        if let Err(d) = c.check_at(500) {
            prop_assert!(d.retry_after_nanos() > 0);
        }
    }
}

/// How often each mode disagrees with the exact log on random traffic
/// offered at about 1.5x the limit (printed; the figures are in the docs),
/// and a sanity bound: more slots never disagree much more than fewer.
#[test]
fn disagreement_with_the_exact_log() {
    let (limit, window) = (100u32, 1_000_000u64);
    let requests = 200_000;
    // A deterministic pseudo-random stream: exponential gaps, mean W / 150.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut times = Vec::with_capacity(requests);
    let mut t = 0u64;
    for _ in 0..requests {
        t += (-(1.0 - next()).ln() * window as f64 / 150.0) as u64;
        times.push(t);
    }
    let mut model = Model::new(limit, window);
    let exact: Vec<bool> = times
        .iter()
        .map(|&t| matches!(model.decide(t, 1), common::ModelDecision::Admitted { .. }))
        .collect();
    let exact_limiter =
        Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
    assert!(
        times
            .iter()
            .zip(&exact)
            .all(|(&t, &e)| exact_limiter.check_at(t).is_ok() == e)
    );

    let exact_total = exact.iter().filter(|&&e| e).count();
    let mut rates = Vec::new();
    for mode in [
        CounterMode::Slots(1),
        CounterMode::Slots(4),
        CounterMode::Slots(10),
        CounterMode::Slots(60),
        CounterMode::TwoWindow,
        // 7 does not divide W: slots of W / 7 rounded either way.
        CounterMode::Slots(7),
    ] {
        let c = counter(limit, window, mode);
        // Judge each decision by the exact rule on the counter's own history
        // (the per-decision error), and record how full its windows got.
        let mut own: std::collections::VecDeque<u64> = Default::default();
        let (mut more, mut fewer, mut admitted, mut worst) = (0, 0, 0, 0);
        for &t in &times {
            while own.front().is_some_and(|&a| a + window <= t) {
                own.pop_front();
            }
            let exact_says = own.len() < limit as usize;
            let got = c.check_at(t).is_ok();
            match (got, exact_says) {
                (true, false) => more += 1,
                (false, true) => fewer += 1,
                _ => {}
            }
            if got {
                own.push_back(t);
                admitted += 1;
                worst = worst.max(own.len());
            }
        }
        let rate = (more + fewer) as f64 / requests as f64;
        println!(
            "{mode:?}: {:.2}% of decisions differ from the exact rule ({more} over, {fewer} under); \
             admitted {admitted} vs {exact_total} for the log; fullest window {worst} (limit {limit})",
            rate * 100.0
        );
        rates.push(rate);
        if mode != CounterMode::TwoWindow {
            assert_eq!(
                fewer, 0,
                "{mode:?} denied what the exact log admits {fewer} times"
            );
        }
    }
    // One slot is a fixed window: far worse than 60 slots.
    assert!(
        rates[3] < rates[0],
        "60 slots ({}) should beat 1 slot ({})",
        rates[3],
        rates[0]
    );
}

#[test]
fn config_errors() {
    let w = Duration::from_secs(1);
    assert_eq!(
        SlidingCounter::new(0, w, 4).unwrap_err(),
        ConfigError::ZeroLimit
    );
    assert_eq!(
        SlidingCounter::new(1, w, 0).unwrap_err(),
        ConfigError::ZeroSlots
    );
    assert_eq!(
        SlidingCounter::new(1, Duration::ZERO, 4).unwrap_err(),
        ConfigError::ZeroWindow
    );
    assert!(matches!(
        SlidingCounter::new(1, Duration::from_nanos(3), 4).unwrap_err(),
        ConfigError::TooManySlots { slots: 4, max: 3 }
    ));
    assert!(matches!(
        SlidingCounter::new(u32::MAX, w, 4).unwrap_err(),
        ConfigError::LimitTooLarge { .. }
    ));
}

/// With N not dividing W, N consecutive slots still span exactly W: slots
/// rounded up to a common width would span more than W, and the counter
/// would deny at W what the exact log admits.
#[test]
fn uneven_slots_admit_when_the_log_does() {
    let c = SlidingCounter::with_clock(1, Duration::from_secs(1), 7, ManualClock::new()).unwrap();
    assert!(c.check_at(0).is_ok());
    assert!(c.check_at(999_999_999).is_err());
    assert!(c.check_at(1_000_000_000).is_ok(), "denied at W");
    let c = counter(1, 10, CounterMode::Slots(3));
    assert!(c.check_at(0).is_ok());
    assert_eq!(c.check_at(5).unwrap_err().retry_after_nanos(), 5);
    assert!(c.check_at(10).is_ok(), "denied at W");
}

#[test]
fn stale_timestamps_are_clamped_not_lost() {
    let c = counter(2, 100, CounterMode::Slots(10));
    assert!(c.check_at(500).is_ok());
    // A thread whose clock read 50 ns ago: counted in the newest slot.
    let a = c.check_at(450).unwrap();
    assert!(a.at() >= 500);
    assert!(c.check_at(501).is_err());
}

/// Threads on one counter never put more than `limit` in one N-slot span.
#[test]
fn concurrent_admissions_respect_the_limit() {
    let (limit, slots, width) = (50u32, 5u32, 1_000u64);
    let clock = ManualClock::new();
    let c = Arc::new(
        SlidingCounter::with_clock(
            limit,
            Duration::from_nanos(width * u64::from(slots)),
            slots,
            clock.clone(),
        )
        .unwrap(),
    );
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (c, barrier) = (Arc::clone(&c), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut ats = Vec::new();
                for k in 0..20_000u64 {
                    if i == 0 && k % 10 == 0 {
                        c.clock().advance(Duration::from_nanos(37));
                    }
                    if let Ok(a) = RateLimit::check(&*c) {
                        ats.push(a.at());
                    }
                }
                ats
            })
        })
        .collect();
    let mut ats: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    ats.sort_unstable();
    assert!(!ats.is_empty());
    let last = ats.last().unwrap() / width;
    for start in 0..=last {
        let (lo, hi) = (start * width, (start + u64::from(slots)) * width);
        let n = ats.iter().filter(|&&a| a >= lo && a < hi).count();
        assert!(n <= limit as usize, "{n} admissions in slots {start}..");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any timestamps (the whole `u64` range, backwards, huge jumps), any
    /// weights, any valid configuration: no panic (tests run with overflow
    /// checks), `remaining` and `n` never exceed the limit, a denial's
    /// `retry_after` is positive, and peek agrees with the check after it.
    #[test]
    fn extreme_inputs_never_panic(
        limit in prop_oneof![Just(1u32), 1..20u32, Just(slidelog::MAX_COUNTER_LIMIT)],
        window in prop_oneof![Just(1u64), 1..1_000u64, Just(slidelog::MAX_WINDOW.as_nanos() as u64)],
        slots in 1..70_000u32,
        two in any::<bool>(),
        keyed in any::<bool>(),
        steps in prop::collection::vec(
            (prop_oneof![any::<u64>(), 0..100u64, (u64::MAX - 100)..=u64::MAX], any::<u32>()),
            1..60,
        ),
    ) {
        let w = Duration::from_nanos(window);
        let mode = if two { CounterMode::TwoWindow } else { CounterMode::Slots(slots) };
        let built = SlidingCounter::with_mode(limit, w, mode, ManualClock::new());
        let valid = !matches!(mode, CounterMode::Slots(n) if u64::from(n) > window || n > slidelog::MAX_SLOTS);
        prop_assert_eq!(built.is_ok(), valid, "{:?}", built.as_ref().err());
        let Ok(counter) = built else { return Ok(()) };
        let per_key = slidelog::KeyedLimiter::<u8>::builder(limit, w)
            .counter_mode(mode)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        for (now, n) in steps {
            let n = if n % 3 == 0 { n } else { n % (limit + 2) };
            let (peeked, got) = if keyed {
                (per_key.peek_n_at(&1, n, now), per_key.check_n_at(&1, n, now))
            } else {
                (counter.peek_n_at(n, now), counter.check_n_at(n, now))
            };
            match got {
                Ok(a) => {
                    prop_assert!(n <= limit && a.remaining() <= limit - n);
                    prop_assert!(peeked.is_ok());
                }
                Err(d) => {
                    prop_assert!(d.retry_after_nanos() > 0);
                    prop_assert!(n > 0);
                }
            }
        }
    }
}

/// An idle counter admits whatever the idle time: the epoch field wraps
/// (2^39 sub-windows at the largest limit: about 9 minutes of 1 ns slots,
/// 6.4 days of 1 µs ones), but which sub-window is later is decided by
/// absolute numbers. Checked at the extreme geometry, full at 0, after idle
/// times on both sides of half the epoch range, of the whole range and of
/// several ranges; single and keyed counters, both modes.
#[test]
fn an_idle_counter_admits_whatever_the_idle_time() {
    use slidelog::{KeyedLimiter, MAX_COUNTER_LIMIT};
    let half = 1u64 << 38;
    let idle_times = [
        half - 1000,
        half + 1000,
        (1 << 39) - 5,
        1 << 39,
        (1 << 39) + 70_000,
        (1 << 40) + 123,
        3 * (1 << 39) + 1,
    ];
    let window = Duration::from_nanos(65_536);
    for &idle in &idle_times {
        for mode in [CounterMode::Slots(65_536), CounterMode::TwoWindow] {
            let single = match mode {
                CounterMode::Slots(n) => {
                    SlidingCounter::with_clock(MAX_COUNTER_LIMIT, window, n, ManualClock::new())
                }
                _ => SlidingCounter::two_window_with_clock(
                    MAX_COUNTER_LIMIT,
                    window,
                    ManualClock::new(),
                ),
            }
            .unwrap();
            assert!(single.check_n_at(MAX_COUNTER_LIMIT, 0).is_ok());
            assert!(single.check_at(1).is_err(), "full at 0");
            let admitted = single.check_n_at(MAX_COUNTER_LIMIT, idle);
            assert!(admitted.is_ok(), "{mode:?}, idle {idle} ns: {admitted:?}");
            assert!(single.check_at(idle).is_err(), "and full again");

            let keyed = KeyedLimiter::<u8>::builder(MAX_COUNTER_LIMIT, window)
                .clock(ManualClock::new())
                .counter_mode(mode)
                .build()
                .unwrap();
            assert!(keyed.check_n_at(&1, MAX_COUNTER_LIMIT, 0).is_ok());
            let admitted = keyed.check_n_at(&1, MAX_COUNTER_LIMIT, idle);
            assert!(
                admitted.is_ok(),
                "keyed {mode:?}, idle {idle} ns: {admitted:?}"
            );
        }
    }
    // 1 µs slots, 3.2 days idle.
    let micro = SlidingCounter::with_clock(
        MAX_COUNTER_LIMIT,
        Duration::from_millis(65),
        65_000,
        ManualClock::new(),
    )
    .unwrap();
    assert!(micro.check_n_at(MAX_COUNTER_LIMIT, 0).is_ok());
    let days = 3 * 86_400_000_000_000 + 5 * 3_600_000_000_000;
    assert!(micro.check_at(days).is_ok());
}
