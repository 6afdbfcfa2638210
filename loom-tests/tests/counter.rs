//! The sliding-window counter's concurrent claims: racing admissions and a
//! racing sub-window advance never over-admit and never spuriously deny (the
//! counts are archived, and the new slot's summary written, before head
//! moves), and closing an idle counter
//! while others admit on it never loses or duplicates an admission (the
//! keyed counter's eviction handshake, P5).

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{evict_while_admitting, stale_reader_across_eviction};
use loom::thread;
use slidelog::loom_hooks::{Flaw, Floor};
use slidelog::{ManualClock, SlidingCounter};

fn counter(limit: u32, window: u64, slots: u32, flaw: Flaw) -> Arc<SlidingCounter<ManualClock>> {
    Arc::new(
        SlidingCounter::with_flaw(
            limit,
            Duration::from_nanos(window),
            slots,
            ManualClock::new(),
            flaw,
        )
        .unwrap(),
    )
}

/// Limit 2 over two slots of 10 ns: two checks in slot 0 race one in slot 1
/// (which archives slot 0 and moves head). Both slots are in every
/// window that matters here, so exactly 2 of the 3 are admitted, whatever
/// the interleaving: a lost count would admit 3, a lost slot 1 would deny.
fn admissions_across_an_advance(flaw: Flaw) {
    loom::model(move || {
        let c = counter(2, 20, 2, flaw);
        let spawn = |now: u64| {
            let c = Arc::clone(&c);
            thread::spawn(move || c.check_at(now).is_ok())
        };
        let a = spawn(5);
        let b = spawn(15);
        let here = c.check_at(5).is_ok();
        let admitted = [a.join().unwrap(), b.join().unwrap(), here];
        let count = admitted.iter().filter(|&&x| x).count();
        assert!(count <= 2, "over-admitted: {admitted:?}");
        assert_eq!(count, 2, "spurious denial: {admitted:?}");
        // Nothing more fits while both slots are in the window.
        assert!(c.check_at(19).is_err(), "a lost count: admits at 19");
    });
}

#[test]
fn racing_admissions_and_advance() {
    admissions_across_an_advance(Flaw::None);
}

/// Negative control: committing with a load then a store loses a racing
/// admission's count.
#[test]
#[should_panic(expected = "over-admitted")]
fn control_load_then_store_is_caught() {
    admissions_across_an_advance(Flaw::LoadThenStore);
}

/// Limit 3 over two slots of 10 ns, two units admitted at 5: at 15 (the
/// next slot) one unit races two. The single unit moves head to the new
/// slot and fits (2 + 1); the pair never fits (2 + 2, or 3 + 2), in every
/// interleaving: a reader that sees head in the new slot must also see the
/// old slot's count.
fn advance_keeps_the_count(flaw: Flaw) {
    loom::model(move || {
        let c = counter(3, 20, 2, flaw);
        c.check_n_at(2, 5).unwrap();
        let spawn = |n: u32| {
            let c = Arc::clone(&c);
            thread::spawn(move || c.check_n_at(n, 15).is_ok())
        };
        let (single, pair) = (spawn(1), spawn(2));
        let (single, pair) = (single.join().unwrap(), pair.join().unwrap());
        assert!(!pair, "over-admitted: a count hidden by the advance");
        assert!(single, "spurious denial of the single unit");
    });
}

#[test]
fn advance_never_hides_a_count() {
    advance_keeps_the_count(Flaw::None);
}

/// Negative control: moving head before archiving the old count (and
/// before writing the new slot's summary).
#[test]
#[should_panic(expected = "over-admitted")]
fn control_archive_late_is_caught() {
    advance_keeps_the_count(Flaw::ArchiveLate);
}

/// Negative control: a summary that leaves out the slot head is leaving
/// (readers in the new slot count two words, and miss it).
#[test]
#[should_panic(expected = "over-admitted")]
fn control_summary_without_head_is_caught() {
    advance_keeps_the_count(Flaw::SummaryWithoutHead);
}

/// Limit 3 over two slots of 10 ns, one unit at 5: two checks at 15 (both
/// moving head to the next slot) race one at 5. Exactly two of the three
/// fit, and afterwards the window is full: a mover that computed the new
/// slot's summary from a stale head word must not replace the true one.
fn stale_summary(flaw: Flaw) {
    loom::model(move || {
        let c = counter(3, 20, 2, flaw);
        c.check_at(5).unwrap();
        let spawn = |now: u64| {
            let c = Arc::clone(&c);
            thread::spawn(move || c.check_at(now).is_ok())
        };
        let threads = [spawn(15), spawn(15), spawn(5)];
        let admitted: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let count = admitted.iter().filter(|&&x| x).count();
        assert!(count <= 2, "over-admitted: {admitted:?}");
        assert_eq!(count, 2, "spurious denial: {admitted:?}");
        assert!(
            c.check_at(19).is_err(),
            "over-admitted: a count lost from the summary"
        );
    });
}

#[test]
fn a_stale_summary_never_wins() {
    stale_summary(Flaw::None);
}

/// Negative control: storing the summary instead of keeping the largest.
#[test]
#[should_panic(expected = "over-admitted")]
fn control_summary_store_is_caught() {
    stale_summary(Flaw::SummaryStore);
}

/// The keyed counter's eviction (the handshake of `eviction.rs`): the old
/// counter (limit 1, one slot of 10 ns) holds one admission at 0.
fn counters(flaw: Flaw) -> [SlidingCounter<ManualClock>; 2] {
    let make = || {
        SlidingCounter::with_flaw(1, Duration::from_nanos(10), 1, ManualClock::new(), flaw).unwrap()
    };
    let old = make();
    old.check_at(0).unwrap();
    [old, make()]
}

#[test]
fn counter_close_races_admission() {
    evict_while_admitting(|| counters(Flaw::None));
}

/// Negative control: reporting "closed" without closing lets an admission
/// land in the state being discarded.
#[test]
#[should_panic(expected = "lost admission")]
fn control_counter_fake_close_is_caught() {
    evict_while_admitting(|| counters(Flaw::FakeClose));
}

/// A busy counter is not closed under an admission: either the admission
/// lands first (and the close sees it and refuses) or the close does (and
/// the admission sees the closed state and fails, to look the key up again).
#[test]
fn busy_counter_is_not_closed() {
    loom::model(|| {
        let c = counter(2, 10, 2, Flaw::None);
        c.check_at(0).unwrap();
        let floor = Arc::new(Floor::new());
        let admitter = {
            let (c, f) = (Arc::clone(&c), Arc::clone(&floor));
            thread::spawn(move || c.try_check_n_at(1, 19, &f).is_some_and(|r| r.is_ok()))
        };
        // Slot [0, 5) leaves the window at 10: idle at 20 with margin 0,
        // unless the admission at 19 (slot [15, 20), until 25) landed.
        let closed = c.close_if_idle(20, 0, &floor);
        let admitted = admitter.join().unwrap();
        assert_ne!(admitted, closed, "admitted {admitted}, closed {closed}");
    });
}

/// No two admissions (limit 1) in one slot of 10 ns (N = 1).
fn one_per_slot(times: &[u64]) -> bool {
    let mut slots: Vec<u64> = times.iter().map(|t| t / 10).collect();
    slots.sort_unstable();
    slots.windows(2).all(|w| w[0] != w[1])
}

/// The eviction floor, for the keyed counter: a reading from 5, held across the
/// eviction at 25, never counts in the evicted admission's slot [0, 10).
#[test]
fn counter_stale_reader_meets_the_floor() {
    stale_reader_across_eviction(|| counters(Flaw::None), 5, one_per_slot);
}

/// Negative control: no floor, and the stale reading lands in slot 0.
#[test]
#[should_panic(expected = "over-admission across the eviction")]
fn control_counter_no_floor_is_caught() {
    stale_reader_across_eviction(|| counters(Flaw::NoFloor), 5, one_per_slot);
}

/// Stale summary writes: limit 2 over two slots of 10 ns. One thread moves head from
/// slot 0 to slot 1 (at 15) and may stall after loading head, while the
/// other admits at 15, 25 and 35, moving head two sub-windows on. The
/// stalled mover's late summary and archive writes (for slots 1 and 0) must
/// not replace the newer words in those cells: every two consecutive slots
/// hold at most 2 of the effective times, including a final check at 38.
fn stalled_mover(flaw: Flaw) {
    loom::model(move || {
        let c = counter(2, 20, 2, flaw);
        let spawn = |times: &'static [u64]| {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                times
                    .iter()
                    .filter_map(|&t| c.check_at(t).ok().map(|a| a.at()))
                    .collect::<Vec<u64>>()
            })
        };
        let stalled = spawn(&[15]);
        let mover = spawn(&[15, 25, 35]);
        let mut times = stalled.join().unwrap();
        times.extend(mover.join().unwrap());
        times.extend(c.check_at(38).ok().map(|a| a.at()));
        for first in 0..5u64 {
            let held = times
                .iter()
                .filter(|&&t| t / 10 == first || t / 10 == first + 1);
            assert!(
                held.count() <= 2,
                "over-admitted: slots {first} and {} hold {times:?}",
                first + 1
            );
        }
    });
}

#[test]
fn a_stalled_mover_never_overwrites_later_words() {
    stalled_mover(Flaw::None);
}

/// Negative control: merging over a later sub-window's word (the first
/// pass of the old merge loop).
#[test]
#[should_panic(expected = "over-admitted")]
fn control_merge_over_later_is_caught() {
    stalled_mover(Flaw::MergeOverLater);
}
