//! Linearizability: every interleaving's decisions, `at()` times and
//! absolute retry times equal those of some sequential order of the same
//! calls fed to the reference model at their effective times.

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;

use common::{Call, Tickets, assert_linearizable, assert_no_over_admission, limiter};
use loom::thread;
use slidelog::loom_hooks::Flaw;

fn run(limit: u32, window: u64, threads: &'static [&'static [u64]], flaw: Flaw) {
    loom::model(move || {
        let limiter = limiter(limit, window, flaw);
        let tickets = Tickets::new();
        let handles: Vec<_> = threads
            .iter()
            .map(|&times| {
                let l = Arc::clone(&limiter);
                let tickets = tickets.clone();
                thread::spawn(move || {
                    times
                        .iter()
                        .map(|&now| tickets.call(now, 1, || l.check_at(now)))
                        .collect::<Vec<Call>>()
                })
            })
            .collect();
        let results: Vec<Vec<Call>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let all: Vec<Call> = results.iter().flatten().copied().collect();
        assert_no_over_admission(&all, limit, window);
        assert_linearizable(&results, limit, window, &[]);
    });
}

/// Three threads, one slot, times around the window edge.
#[test]
fn three_threads_one_slot() {
    run(1, 10, &[&[0], &[10], &[9]], Flaw::None);
}

/// One thread's timestamp is stale: read long before it reached the ring.
#[test]
fn stale_timestamp() {
    run(2, 10, &[&[20], &[5], &[14]], Flaw::None);
}

/// A reader that can sleep across a whole lap between loading head and its
/// slot (L = 2, the other thread admits three times).
#[test]
fn reader_across_a_lap() {
    run(2, 10, &[&[0, 10, 20], &[25]], Flaw::None);
}

/// The lazy head: with L = 3 head may lag the frontier by B = 2; one
/// thread fills the ring (forcing a head move) while another scans it.
#[test]
fn lazy_head_scan() {
    run(3, 10, &[&[0, 0, 0], &[5, 12]], Flaw::None);
}

/// The frontier guess: with L = 3 a single leaves `head` behind and stores
/// "the frontier is one past head"; the other thread may read that guess
/// before it sees the claim the guess follows (nothing orders the two for
/// it), and must then not follow it.
#[test]
fn guess_seen_before_its_claim() {
    run(3, 10, &[&[5], &[0, 6]], Flaw::None);
}

/// Negative control: following the guess without checking that the slot
/// before it is claimed, the reader that sees the guess but not the claim
/// judges by the wrong previous admission (its effective time goes back
/// past the claim's).
#[test]
#[should_panic(expected = "no sequential order")]
fn control_unverified_guess_is_caught() {
    run(3, 10, &[&[5], &[0, 6]], Flaw::UnverifiedGuess);
}

/// The head-free denial: a reader judges the slots at the guess with no
/// `head` read, while the other thread fills the ring twice over (L = 2,
/// times at which only one admission is ever alive at a check at 10): a
/// denial must come from a frontier's slots, never from a slot `c - 1` read
/// one lap behind a slot `c` admitted after it.
#[test]
fn denial_without_head() {
    run(2, 10, &[&[0, 0, 10], &[10]], Flaw::None);
}

/// Negative control: reading slot `c - 1` then slot `c` once (no second
/// read of slot `c` before it, no `head` around them), the reader that
/// loads slot `c - 1` before the other thread's first admission and slot `c`
/// after its third sees stamps one lap apart and denies spuriously.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_deny_without_reread_is_caught() {
    run(2, 10, &[&[0, 0, 10], &[10]], Flaw::DenyWithoutReread);
}

/// Negative control: without the seqlock re-validation, the sleeping reader
/// judges by the slot of a later lap and denies spuriously.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_no_revalidate_is_caught() {
    run(2, 10, &[&[0, 10, 20], &[25]], Flaw::NoRevalidate);
}

/// Negative control: without the clamp, a stale timestamp is recorded "in
/// the past" of an admission that committed before it.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_no_clamp_is_caught() {
    run(2, 10, &[&[20], &[5], &[14]], Flaw::NoClamp);
}

/// The expiry hint (rings of 8 slots and more keep one): at
/// L = 8 with six admissions at 0 and one at 8 (W = 10), a peek at 12 sees
/// the six expired; an admission at 9 racing it must still count them live
/// (remaining 0). Linearizable with the hint, which the count verifies
/// before trusting; the control that trusts it unverified (and lets the
/// peek record one from its later time) is caught.
/// (`common::hint_race`, one policy of 8 per 10 ns.)
const HINT_RING: &[(u32, u64)] = &[(8, 10)];

#[test]
fn a_peek_never_moves_the_expiry_hint() {
    common::hint_race(HINT_RING, Flaw::None);
}

#[test]
#[should_panic(expected = "no sequential order")]
fn control_unverified_hint_is_caught() {
    common::hint_race(HINT_RING, Flaw::TrustHint);
}

/// Two admitters racing on a hinted ring (L = 8): each reads and writes
/// the hint; their counts stay exact in every interleaving, across the
/// moment (10) the six admissions at 0 expire.
#[test]
fn admitters_racing_on_the_expiry_hint() {
    common::hint_admitters(HINT_RING, Flaw::None);
}

/// Negative control: counting from the three words at and before the hint
/// without checking that the first live admission lies among them. At 10
/// the six admissions at 0 expire while the hint still says six or seven
/// are alive; the unbracketed count answers six or seven.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_unbracketed_hint_is_caught() {
    common::hint_admitters(HINT_RING, Flaw::UnbracketedHint);
}
