//! Unit tests of the counter: the codec, the state's words, the public calls.

use std::time::Duration;

use super::config::{CounterConfig, Divider};
use super::state::CounterRef;
use super::{CLOSED, CounterMode, MAX_COUNTER_LIMIT, SlidingCounter};
use crate::floor::Floor;
use crate::sync::atomic::{AtomicU64, Ordering};

/// A counter state of `limit` per `window` ns in `slots` slots, fresh at
/// 0, as a keyed counter holds one per key.
fn state(limit: u32, window: u64, slots: u32) -> (CounterConfig, Vec<AtomicU64>) {
    let cfg = CounterConfig::new(
        limit,
        Duration::from_nanos(window),
        CounterMode::Slots(slots),
    )
    .unwrap();
    let words = (0..cfg.words())
        .map(|i| {
            AtomicU64::new(match i {
                0 | 2 => cfg.initial_head(0),
                1 => cfg.absolute(0),
                _ => cfg.initial_cell(0),
            })
        })
        .collect();
    (cfg, words)
}

/// `[head, absolute, summary, archive...]`, as a keyed counter lays
/// them out.
fn view<'a>(cfg: &'a CounterConfig, words: &'a [AtomicU64]) -> CounterRef<'a> {
    CounterRef {
        config: cfg,
        limit: cfg.limit,
        head: &words[0],
        absolute: &words[1],
        summary: Some(&words[2]),
        archive: &words[3..],
    }
}

#[test]
fn divider_is_exact() {
    for d in [1u64, 2, 3, 7, 10, 1000, 999_999_937, 1 << 40, (1 << 61) + 1] {
        let div = Divider::new(d);
        for x in [
            0u64,
            1,
            d - 1,
            d,
            d + 1,
            12_345_678_901,
            (1 << 62) - 1,
            (1 << 63) - 1,
        ] {
            assert_eq!(div.div(x), x / d, "{x} / {d}");
            assert_eq!(div.rem(x), x % d, "{x} % {d}");
        }
    }
}

#[test]
fn epochs_compare_across_the_wrap() {
    let cfg = CounterConfig::new(100, Duration::from_secs(1), CounterMode::Slots(10)).unwrap();
    // 101 needs 7 bits; the epoch has the other 57.
    assert_eq!(cfg.count_bits, 7);
    assert_eq!(cfg.epoch_mask, (1 << 57) - 1);
    assert!(cfg.later(1, 0));
    assert!(cfg.later(0, cfg.epoch_mask));
    assert!(!cfg.later(5, 5));
    assert!(!cfg.later(0, 1));
    assert_eq!(cfg.epoch_of(cfg.pack(cfg.epoch_mask + 3, 7)), 2);
    assert_eq!(cfg.count_of(cfg.pack(9, 100)), 100);
    // The largest limit still leaves a 39-bit epoch, and never packs to
    // the closed word.
    let big = CounterConfig::new(
        MAX_COUNTER_LIMIT,
        Duration::from_secs(1),
        CounterMode::TwoWindow,
    )
    .unwrap();
    assert_eq!(big.count_bits, 25);
    assert_ne!(
        big.pack(big.epoch_mask, u64::from(MAX_COUNTER_LIMIT)),
        CLOSED
    );
}

/// Across the wrap of the epoch field (at 2^62 ns for 1 ns slots and a
/// 2-bit count; 2^62 is not a multiple of 3 slots), consecutive slots
/// still use consecutive archive cells: any 3 consecutive slots hold at
/// most `limit`, and admissions go on.
#[test]
fn slots_hold_across_the_epoch_wrap() {
    let wrap = 1u64 << 62;
    let clock = crate::ManualClock::starting_at(wrap - 20);
    let counter = SlidingCounter::with_clock(3, Duration::from_nanos(3), 3, clock).unwrap();
    let mut admitted = Vec::new();
    for t in (wrap - 20)..(wrap + 20) {
        for _ in 0..2 {
            if counter.check_at(t).is_ok() {
                admitted.push(t);
            }
        }
    }
    for start in (wrap - 20)..(wrap + 18) {
        let span = admitted
            .iter()
            .filter(|&&a| a >= start && a < start + 3)
            .count();
        assert!(span <= 3, "{span} admissions in slots {start}..+3");
    }
    // 40 slots of 1 ns, 3 per 3 slots: about 40 admissions, both sides.
    assert!(
        admitted.iter().filter(|&&a| a >= wrap).count() >= 12,
        "{admitted:?}"
    );
    assert!(
        admitted.iter().filter(|&&a| a < wrap).count() >= 12,
        "{admitted:?}"
    );
}

/// A counter created long after the clock's origin starts in the current
/// sub-window (not at epoch 0, which a wrapped comparison could take for
/// the future).
#[test]
fn a_counter_starts_in_its_current_sub_window() {
    let start = (1u64 << 62) + 12_345;
    let clock = crate::ManualClock::starting_at(start);
    let counter = SlidingCounter::with_clock(2, Duration::from_nanos(10), 10, clock).unwrap();
    assert_eq!(counter.check().unwrap().at(), start);
    assert_eq!(counter.check().unwrap().remaining(), 0);
    assert_eq!(counter.check().unwrap_err().retry_after_nanos(), 10);
}

/// A denial (and `n == 0`) only loads, even in a later sub-window: head
/// stays at the newest admission, which eviction judges idleness by.
#[test]
fn denials_and_dry_checks_never_write() {
    let (cfg, words) = state(1, 100, 10);
    let state = view(&cfg, &words);
    state.check(1, 5, 0).unwrap().unwrap();
    let snapshot = |words: &[AtomicU64]| -> Vec<u64> {
        words.iter().map(|w| w.load(Ordering::Relaxed)).collect()
    };
    let before = snapshot(&words);
    assert_eq!(
        state
            .check(1, 55, 0)
            .unwrap()
            .unwrap_err()
            .retry_after_nanos(),
        45
    );
    assert_eq!(state.check(0, 77, 0).unwrap().unwrap().remaining(), 0);
    assert_eq!(
        state
            .peek(1, 99, 0)
            .unwrap()
            .unwrap_err()
            .retry_after_nanos(),
        1
    );
    assert_eq!(snapshot(&words), before, "nothing written");
    // The next admission moves head, archives the old slot (cell 0) and
    // writes the new slot's summary (1 archived admission in its window).
    assert!(state.check(0, 100, 0).unwrap().is_ok());
    assert_eq!(snapshot(&words), before, "n = 0 writes nothing either");
    assert!(state.check(1, 100, 0).unwrap().is_ok());
    assert_ne!(words[0].load(Ordering::Relaxed), before[0]);
    assert_eq!(words[3].load(Ordering::Relaxed), before[0]);
    assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(10, 0));
}

/// The summary holds the archived counts in head's window, so checks in
/// head's slot read two words; `retry_after` still names the oldest slot.
#[test]
fn the_summary_counts_the_window_behind_head() {
    let (cfg, words) = state(3, 100, 10);
    let state = view(&cfg, &words);
    for t in [5, 15, 25] {
        assert!(state.check(1, t, 0).unwrap().is_ok());
    }
    // Head in slot 2 with 1; slots 0 and 1 summarised.
    assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(2, 2));
    let denied = state.check(1, 26, 0).unwrap().unwrap_err();
    assert_eq!(denied.retry_after_nanos(), 74, "slot [0, 10) leaves at 100");
    assert_eq!(state.check(0, 29, 0).unwrap().unwrap().remaining(), 0);
    // A stale summary (another sub-window's) is ignored: same answers.
    words[2].store(cfg.pack(7, 0), Ordering::Relaxed);
    assert_eq!(state.check(1, 26, 0).unwrap().unwrap_err(), denied);
    assert_eq!(state.check(0, 29, 0).unwrap().unwrap().remaining(), 0);
    // At 100 slot 0 has left: admitted into slot 10, whose window holds
    // slots 1 and 2.
    assert_eq!(state.check(1, 100, 0).unwrap().unwrap().remaining(), 0);
    assert_eq!(words[2].load(Ordering::Relaxed), cfg.pack(10, 2));
}

#[test]
fn close_waits_for_every_slot_to_leave() {
    let (cfg, words) = state(5, 100, 10);
    let state = view(&cfg, &words);
    state.check(1, 35, 0).unwrap().unwrap(); // slot [30, 40) leaves at 130
    assert_eq!(state.close_if_idle(129, 0, &Floor::new()), Err(130));
    assert_eq!(state.close_if_idle(140, 20, &Floor::new()), Err(150));
    assert_eq!(state.close_if_idle(150, 20, &Floor::new()), Ok(()));
    assert!(state.check(1, 150, 0).is_none());
    assert!(state.peek(1, 150, 0).is_none());
    assert_eq!(state.close_if_idle(150, 20, &Floor::new()), Ok(()));
}

/// `generation` counts reconfigurations, as `Limiter::generation` does: 0
/// as built, one more per `reconfigure` (also one back to an earlier limit,
/// which a generation that was the limit would miss), none for a refused
/// one.
#[test]
fn generation_counts_reconfigurations() {
    let second = Duration::from_secs(1);
    let quota = |limit| crate::Quota::new(limit, second).unwrap();
    let counter = SlidingCounter::with_clock(10, second, 10, crate::ManualClock::new()).unwrap();
    let limiter = crate::Limiter::with_clock(10, second, crate::ManualClock::new()).unwrap();
    assert_eq!(counter.generation(), 0);
    assert_eq!(counter.generation(), limiter.generation());
    for limit in [12, 10, 10] {
        counter.reconfigure(quota(limit)).unwrap();
        limiter.reconfigure(quota(limit)).unwrap();
        assert_eq!(counter.generation(), limiter.generation(), "to {limit}");
    }
    assert_eq!(counter.generation(), 3);
    // Another window, or a limit past the count field: refused, uncounted.
    assert!(
        counter
            .reconfigure(crate::Quota::new(10, second * 2).unwrap())
            .is_err()
    );
    assert!(counter.reconfigure(quota(counter.max_limit() + 1)).is_err());
    assert_eq!(counter.generation(), 3);
}

/// `peek_at(t)` answers what `peek` answers with the clock at `t`, and
/// what `check_at(t)` then decides, recording nothing.
#[test]
fn peek_at_is_peek_at_a_given_time() {
    let clock = crate::ManualClock::new();
    let counter =
        SlidingCounter::with_clock(3, Duration::from_nanos(100), 10, clock.clone()).unwrap();
    let two =
        SlidingCounter::two_window_with_clock(3, Duration::from_nanos(100), clock.clone()).unwrap();
    for t in [0u64, 5, 15, 15, 15, 40, 99, 100, 105, 130, 210, 999] {
        clock.set(t);
        for counter in [&counter, &two] {
            let peeked = counter.peek_at(t);
            assert_eq!(peeked, counter.peek(), "at {t}");
            assert_eq!(peeked, counter.peek_n_at(1, t), "at {t}");
            assert_eq!(counter.peek_at(t), peeked, "a peek records nothing");
            assert_eq!(
                counter.check_at(t).map(|a| a.remaining()),
                peeked.map(|a| a.remaining()),
                "at {t}"
            );
        }
    }
}
