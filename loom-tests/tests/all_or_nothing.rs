//! P4: `check_n` takes n slots or none, also against concurrent `check`.

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;

use common::{
    Call, Tickets, admitted_units, assert_linearizable, assert_no_over_admission, explore,
    explore_exactly, limiter, limiter_general,
};

/// Pre-emptions the lazy head's races need (see `common::explore`): limits
/// of 4 and more lag head by B >= 3.
fn bound(limit: u32) -> usize {
    if limit >= 4 { 3 } else { 0 }
}
use loom::thread;
use slidelog::loom_hooks::Flaw;

/// Which path singles take.
#[derive(Clone, Copy)]
enum Singles {
    /// As shipped: the fast path, then the general one when it must.
    Fast,
    /// Always the general path (the lazy-head scan): its races arise with
    /// two threads (see `common::limiter_general`).
    General,
}

/// A weighted request racing singles (`singles[i]` of them on thread `i`):
/// the units the limiter holds afterwards are exactly the units it reported
/// admitted, and the results are linearizable.
fn weighted_vs_single(
    limit: u32,
    weighted: &'static [u32],
    singles: &'static [usize],
    prefill: u32,
    path: Singles,
    flaw: Flaw,
) {
    let model = move || {
        let window = 10;
        let limiter = match path {
            Singles::Fast => limiter(limit, window, flaw),
            Singles::General => limiter_general(limit, window, flaw),
        };
        for _ in 0..prefill {
            limiter.check_at(0).unwrap();
        }
        let now = if prefill > 0 { 5 } else { 0 };
        let tickets = Tickets::new();
        let (l, t) = (Arc::clone(&limiter), tickets.clone());
        let w = thread::spawn(move || {
            weighted
                .iter()
                .map(|&n| t.call(now, n, || l.check_n_at(n, now)))
                .collect::<Vec<_>>()
        });
        let single_threads: Vec<_> = singles
            .iter()
            .map(|&count| {
                let (l, t) = (Arc::clone(&limiter), tickets.clone());
                thread::spawn(move || {
                    (0..count)
                        .map(|_| t.call(now, 1, || l.check_at(now)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut threads = vec![w.join().unwrap()];
        threads.extend(single_threads.into_iter().map(|s| s.join().unwrap()));
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
    };
    if singles.len() > 1 {
        // Three threads: two pre-emptions suffice for the race they are
        // here for (see `pair_vs_two_single_threads_on_the_fast_path`), and
        // three would take far longer than CI allows, whatever
        // LOOM_MAX_PREEMPTIONS says.
        explore_exactly(2, model);
    } else {
        explore(bound(limit), model);
    }
}

#[test]
fn pair_vs_single_in_three_slots() {
    weighted_vs_single(3, &[2], &[2], 0, Singles::Fast, Flaw::None);
}

#[test]
fn pair_vs_single_across_the_wrap() {
    // Slots 0 and 1 hold live admissions: the pair must wrap to slot 0.
    weighted_vs_single(3, &[2], &[1], 1, Singles::Fast, Flaw::None);
}

#[test]
fn two_weighted_calls_vs_single() {
    weighted_vs_single(3, &[2, 1], &[1], 0, Singles::Fast, Flaw::None);
}

#[test]
fn full_ring_weighted_vs_single() {
    weighted_vs_single(2, &[2], &[1], 0, Singles::Fast, Flaw::None);
}

/// The lazy head and the pairs: with L >= 4 the head is lazy (it lags by up to B = L - 1), so
/// singles claim slots behind it; a pair that read slot c before their
/// claims and slot c + 1 after them must not deny. Everything fits here
/// (2 + 2 <= 4), so any denial fails the linearizability check.
#[test]
fn pair_vs_singles_behind_a_lazy_head() {
    weighted_vs_single(4, &[2], &[2], 0, Singles::General, Flaw::None);
}

/// The fast path (as shipped) in the same race: a single moves head right
/// after its claim, so the torn view needs a second single thread: A claims
/// slot c and is pre-empted before its head CAS, B finds c claimed and
/// claims c + 1 behind the unmoved head (the general path's lazy scan).
#[test]
fn pair_vs_singles_on_the_fast_path() {
    weighted_vs_single(4, &[2], &[2], 0, Singles::Fast, Flaw::None);
}

/// The race above with two single threads, on the fast path.
#[test]
fn pair_vs_two_single_threads_on_the_fast_path() {
    weighted_vs_single(4, &[2], &[1, 1], 0, Singles::Fast, Flaw::None);
}

/// The same at L = 5 with a live admission already in the ring.
#[test]
fn pair_vs_singles_behind_a_lazy_head_prefilled() {
    weighted_vs_single(5, &[2], &[2], 1, Singles::General, Flaw::None);
}

/// A triple at L = 6 (B = 5) against three singles: it reads slot c + 2,
/// which the singles claim behind the lazy head.
#[test]
fn triple_vs_singles_behind_a_lazy_head() {
    weighted_vs_single(6, &[3], &[3], 0, Singles::General, Flaw::None);
}

/// Negative control: trusting the torn view (slot c read unclaimed, slot
/// c + 1 read claimed, head unchanged) denies spuriously.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_torn_weighted_view_is_caught() {
    weighted_vs_single(4, &[2], &[2], 0, Singles::General, Flaw::TornWeighted);
}

/// Negative control: taking a weighted request's units one at a time lets a
/// single sneak in between, leaving a partial admission behind.
#[test]
#[should_panic(expected = "partial admission")]
fn control_piecewise_is_caught() {
    weighted_vs_single(2, &[2], &[1], 0, Singles::Fast, Flaw::Piecewise);
}

/// Weighted requests racing each other: one announcement at a time, each
/// exact; `units` of them fit.
fn weighted_race(limit: u32, sizes: &'static [u32], units: u32, flaw: Flaw) {
    explore(bound(limit), move || {
        let window = 10;
        let limiter = limiter(limit, window, flaw);
        let tickets = Tickets::new();
        let handles: Vec<_> = sizes
            .iter()
            .map(|&n| {
                let (l, t) = (Arc::clone(&limiter), tickets.clone());
                thread::spawn(move || vec![t.call(0, n, || l.check_n_at(n, 0))])
            })
            .collect();
        let threads: Vec<Vec<Call>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let all: Vec<Call> = threads.iter().flatten().copied().collect();
        assert_eq!(admitted_units(&all), units, "units admitted: {all:?}");
        assert_eq!(limiter.check_n_at(0, 0).unwrap().remaining(), limit - units);
        assert_linearizable(&threads, limit, window, &[]);
    });
}

/// Two pairs in three slots: exactly one fits.
#[test]
fn weighted_vs_weighted() {
    weighted_race(3, &[2, 2], 2, Flaw::None);
}

/// Two pairs in four slots (a lazy head): both fit.
#[test]
fn weighted_vs_weighted_behind_a_lazy_head() {
    weighted_race(4, &[2, 2], 4, Flaw::None);
}

/// A peek of two units racing two singles at L = 5: everything fits, so the
/// peek never denies (it reads the same frontier view as `check_n`).
fn peek_vs_singles(path: Singles, flaw: Flaw) {
    explore(bound(5), move || {
        let limiter = match path {
            Singles::Fast => limiter(5, 10, flaw),
            Singles::General => limiter_general(5, 10, flaw),
        };
        let l = Arc::clone(&limiter);
        let singles = thread::spawn(move || (0..2).all(|_| l.check_at(0).is_ok()));
        let l = Arc::clone(&limiter);
        let peek = thread::spawn(move || l.peek_n_at(2, 0));
        assert!(singles.join().unwrap(), "a single was denied");
        let peeked = peek.join().unwrap();
        assert!(peeked.is_ok(), "spurious denial by a peek: {peeked:?}");
        let left = peeked.unwrap().remaining();
        assert!((1..=3).contains(&left), "peek saw {left} left");
    });
}

#[test]
fn peek_vs_singles_behind_a_lazy_head() {
    peek_vs_singles(Singles::General, Flaw::None);
}

#[test]
fn peek_vs_singles_on_the_fast_path() {
    peek_vs_singles(Singles::Fast, Flaw::None);
}

/// Negative control: the torn view makes the peek deny.
#[test]
#[should_panic(expected = "spurious denial by a peek")]
fn control_torn_peek_is_caught() {
    peek_vs_singles(Singles::General, Flaw::TornWeighted);
}

/// Negative control for the triple: the torn view at L = 6 denies it.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_torn_triple_is_caught() {
    weighted_vs_single(6, &[3], &[3], 0, Singles::General, Flaw::TornWeighted);
}

/// Negative control for two pairs at L = 4: a pair that read slot c before
/// the other pair's commit and its fill of slot c + 1 after it denies.
#[test]
#[should_panic(expected = "units admitted")]
fn control_torn_pairs_are_caught() {
    weighted_race(4, &[2, 2], 4, Flaw::TornWeighted);
}
