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

    /// Slots mode with any window, also when N does not divide it: slot k
    /// spans [ceil(k W / N), ceil((k + 1) W / N)), so N consecutive slots
    /// span exactly W. The counter never denies what the
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

/// The counter's estimate, brute force, from every admission's time and
/// weight: `Slots(N)` sums the admissions of the N slots up to `t`'s (slots
/// of `width` ns); `TwoWindow` weights the previous window's count by the
/// part of it still inside `(t - W, t]` (rounded up) and adds the current
/// window's.
fn model_estimate(
    mode: CounterMode,
    width: u64,
    counts: &std::collections::BTreeMap<u64, u64>,
    t: u64,
) -> u64 {
    let count = |k: u64| counts.get(&k).copied().unwrap_or(0);
    match mode {
        CounterMode::Slots(n) => {
            let slot = t / width;
            (slot.saturating_sub(u64::from(n) - 1)..=slot)
                .map(count)
                .sum()
        }
        _ => {
            let (b, e) = (t / width, t % width);
            let previous = b.checked_sub(1).map_or(0, count);
            count(b) + (previous * (width - e)).div_ceil(width)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Both modes, compared with a brute-force model of the estimate: every
    /// decision and `remaining` is the model's; a denial's `retry_after` is
    /// the earliest time the estimate admits the same request (a peek there
    /// is admitted, one nanosecond before it denied); an admission's growth
    /// `t` is the earliest time `remaining` grows.
    #[test]
    fn retry_and_growth_are_the_estimates_next_change(
        limit in 1..8u32,
        mode in prop_oneof![(1..6u32).prop_map(CounterMode::Slots), Just(CounterMode::TwoWindow)],
        width in 1..12u64,
        steps in prop::collection::vec((0..25u64, 1..4u32), 1..150),
    ) {
        let (window, slot) = match mode {
            CounterMode::Slots(n) => (width * u64::from(n), width),
            _ => (width * 4, width * 4),
        };
        let c = counter(limit, window, mode);
        let mut counts = std::collections::BTreeMap::new();
        let est = |counts: &std::collections::BTreeMap<u64, u64>, t| model_estimate(mode, slot, counts, t);
        let mut t = 0;
        for (dt, n) in steps {
            t += dt;
            let n = n.min(limit);
            let before = est(&counts, t);
            let fits = before + u64::from(n) <= u64::from(limit);
            // The first time after `t` at which `ok` holds, by trying each.
            let first = |counts: &std::collections::BTreeMap<u64, u64>, ok: &dyn Fn(u64) -> bool| {
                (t + 1..=t + 3 * window + 2).find(|&u| ok(est(counts, u)))
            };
            match c.check_n_with_growth_at(n, t) {
                Ok((admitted, grows)) => {
                    prop_assert!(fits, "t={} n={}: admitted at estimate {}", t, n, before);
                    *counts.entry(admitted.at() / slot).or_insert(0) += u64::from(n);
                    let after = est(&counts, t);
                    let remaining = u64::from(limit).saturating_sub(after);
                    prop_assert_eq!(u64::from(admitted.remaining()), remaining, "t={} n={}", t, n);
                    let grows_at = first(&counts, &|e| u64::from(limit).saturating_sub(e) > remaining)
                        .expect("the estimate empties");
                    prop_assert_eq!(grows.as_nanos() as u64, grows_at - t, "growth at t={} n={} (remaining {})", t, n, remaining);
                }
                Err(denied) => {
                    prop_assert!(!fits, "t={} n={}: denied at estimate {}", t, n, before);
                    let at = t + denied.retry_after_nanos();
                    let want = first(&counts, &|e| e + u64::from(n) <= u64::from(limit)).expect("the estimate empties");
                    prop_assert_eq!(at, want, "retry at t={} n={} (estimate {})", t, n, before);
                    prop_assert!(c.peek_n_at(n, at).is_ok(), "a retry at {} is denied", at);
                    prop_assert!(c.peek_n_at(n, at - 1).is_err(), "admitted at {} before the retry time", at - 1);
                }
            }
        }
    }
}

/// The most admissions in one real window `(t - W, t]`, from the sorted
/// admission times.
fn fullest_window(sorted: &[u64], window: u64) -> usize {
    let mut first = 0;
    let mut most = 0;
    for (i, &t) in sorted.iter().enumerate() {
        while sorted[first] + window <= t {
            first += 1;
        }
        most = most.max(i + 1 - first);
    }
    most
}

/// The slots mode's worst case, `2 L` in one real window, for every `N`:
/// `L` in the last nanosecond of slot 0, then `L` more at `W`, when slot 0
/// has left the counted span (slots 1 to N - 1 are empty) while its last
/// nanosecond is still inside `(0, W]`.
#[test]
fn slots_worst_case_is_twice_the_limit() {
    let (limit, window) = (100u32, 1_000_000u64);
    for slots in [1u32, 2, 10, 60, 1000] {
        let c = counter(limit, window, CounterMode::Slots(slots));
        let width = window / u64::from(slots);
        let mut ats = Vec::new();
        for t in [width - 1, window] {
            while let Ok(admitted) = c.check_at(t) {
                ats.push(admitted.at());
            }
        }
        assert_eq!(ats.len(), 2 * limit as usize, "N = {slots}");
        assert_eq!(
            fullest_window(&ats, window),
            2 * limit as usize,
            "N = {slots}"
        );
    }
}

/// The two-window mode's worst case, `L + floor(L (W - 2) / W)` (`2 L - 1`
/// once `W >= 2 L` ns): `L` in the last nanosecond of a window, then, two
/// nanoseconds before the next window ends, the previous count weighs
/// `ceil(2 L / W) = 1`, and `L - 1` more are admitted.
#[test]
fn two_window_worst_case_is_twice_the_limit_less_one() {
    for (limit, window) in [(100u32, 1_000_000u64), (1, 2), (3, 6), (7, 10), (100, 150)] {
        let c = counter(limit, window, CounterMode::TwoWindow);
        let mut ats = Vec::new();
        for t in [window - 1, 2 * window - 2] {
            while let Ok(admitted) = c.check_at(t) {
                ats.push(admitted.at());
            }
        }
        let l = u64::from(limit);
        let worst = (l + l * (window - 2) / window) as usize;
        assert_eq!(
            fullest_window(&ats, window),
            worst,
            "L = {limit}, W = {window}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No sequence exceeds the documented worst case in any real window:
    /// `2 L` for the slots mode, `L + floor(L (W - 2) / W)` for the
    /// two-window mode (`L` for a 1 ns window).
    #[test]
    fn no_window_exceeds_the_worst_case(
        limit in 1..8u32,
        mode in prop_oneof![(1..6u32).prop_map(CounterMode::Slots), Just(CounterMode::TwoWindow)],
        width in 1..12u64,
        steps in prop::collection::vec((0..25u64, 1..4u32), 1..300),
    ) {
        let window = match mode {
            CounterMode::Slots(n) => width * u64::from(n),
            _ => width * 4,
        };
        let c = counter(limit, window, mode);
        let mut ats = Vec::new();
        let mut t = 0;
        for (dt, n) in steps {
            t += dt;
            let n = n.min(limit);
            if let Ok(admitted) = c.check_n_at(n, t) {
                ats.extend(std::iter::repeat_n(admitted.at(), n as usize));
            }
        }
        let l = u64::from(limit);
        let worst = match mode {
            CounterMode::Slots(_) => 2 * l,
            _ => l + l * window.saturating_sub(2) / window,
        };
        prop_assert!(fullest_window(&ats, window) as u64 <= worst);
    }
}

/// Threads flooding one counter (the clock moved by one of them) never
/// exceed the documented worst case in any real window: `2 L` for slots,
/// `2 L - 1` for two windows (`W >= 2 L`), whatever the interleaving.
#[test]
fn concurrent_floods_stay_within_the_worst_case() {
    let (limit, window) = (300u32, 30_000u64);
    for mode in [
        CounterMode::Slots(1),
        CounterMode::Slots(10),
        CounterMode::TwoWindow,
    ] {
        let c = Arc::new(counter(limit, window, mode));
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (c, barrier) = (Arc::clone(&c), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    let mut ats = Vec::new();
                    for k in 0..50_000u64 {
                        if i == 0 && k % 8 == 0 {
                            c.clock().advance(Duration::from_nanos(29));
                        }
                        if let Ok(a) = c.check() {
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
        let worst = match mode {
            CounterMode::TwoWindow => 2 * limit as usize - 1,
            _ => 2 * limit as usize,
        };
        let fullest = fullest_window(&ats, window);
        assert!(
            fullest <= worst,
            "{mode:?}: {fullest} admissions in one window"
        );
    }
}
