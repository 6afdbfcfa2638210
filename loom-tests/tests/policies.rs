//! P7 and P6: several policies on one ring, a short and a long window
//! racing admissions. Every interleaving is linearizable against the
//! multi-policy log (decisions, times, remaining counts, retry times and the
//! policy reported), and no window of any policy over-admits. The negative
//! controls — judging by the ring's own policy only, trusting a torn view,
//! trusting the policies' expiry hints unverified or unbracketed — must be
//! caught.

#![cfg(slidelog_loom)]

mod common;

use std::sync::Arc;

use common::{
    Call, Tickets, assert_linearizable_policies, assert_no_over_admission_policies, explore,
    multi_limiter,
};
use loom::thread;
use slidelog::loom_hooks::Flaw;

/// Each thread: a list of `(now, n)` checks.
type Script = &'static [(u64, u32)];

fn run(policies: &'static [(u32, u64)], threads: &'static [Script], flaw: Flaw) {
    // The commit path helps a lagging head; three pre-emptions reach a
    // reader stalled between its slot loads while a batch commits and fills.
    explore(2, move || {
        let limiter = multi_limiter(policies, flaw);
        let tickets = Tickets::new();
        let handles: Vec<_> = threads
            .iter()
            .map(|&script| {
                let l = Arc::clone(&limiter);
                let tickets = tickets.clone();
                thread::spawn(move || {
                    script
                        .iter()
                        .map(|&(now, n)| tickets.call(now, n, || l.check_n_at(n, now)))
                        .collect::<Vec<Call>>()
                })
            })
            .collect();
        let results: Vec<Vec<Call>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let all: Vec<Call> = results.iter().flatten().copied().collect();
        assert_no_over_admission_policies(&all, policies);
        assert_linearizable_policies(&results, policies, &[]);
    });
}

/// 1 per 10 ns and 2 per 100 ns (the ring: 2 slots, deadlines for the long
/// window): two threads race across the short window's edge.
#[test]
fn short_and_long_windows_race() {
    run(
        &[(1, 10), (2, 100)],
        &[&[(0, 1), (10, 1)], &[(5, 1)]],
        Flaw::None,
    );
}

/// The same policies given the other way round: only indices change.
#[test]
fn policies_in_the_other_order() {
    run(
        &[(2, 100), (1, 10)],
        &[&[(0, 1), (10, 1)], &[(5, 1)]],
        Flaw::None,
    );
}

/// A pair against a single at L = 3 with a 2-per-100 policy.
#[test]
fn a_pair_and_a_single() {
    run(
        &[(3, 10), (2, 100)],
        &[&[(0, 2)], &[(0, 1), (10, 1)]],
        Flaw::None,
    );
}

/// Negative control: judging by the ring's own policy (2 per 100) only
/// admits twice within the short window.
#[test]
#[should_panic(expected = "over-admission")]
fn control_one_policy_is_caught() {
    run(
        &[(1, 10), (2, 100)],
        &[&[(0, 1), (10, 1)], &[(5, 1)]],
        Flaw::OnePolicy,
    );
}

/// A pair and a single at L = 4 with a 3-per-100 policy: the single's word
/// for that policy is one slot past its frontier, exactly where the pair's
/// fill writes while head still carries the pair's announcement. Both fit
/// in either order.
#[test]
fn a_single_reads_where_a_pair_fills() {
    run(&[(4, 10), (3, 100)], &[&[(0, 2)], &[(0, 1)]], Flaw::None);
}

/// Negative control: trusting that slot without its stamp check reads the
/// pair's own word as an old admission and denies the single spuriously.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_torn_view_is_caught() {
    run(
        &[(4, 10), (3, 100)],
        &[&[(0, 2)], &[(0, 1)]],
        Flaw::TornWeighted,
    );
}

/// Per-policy expiry hints (on a `Limiter`, a policy of 8 or more keeps
/// one): 8 per 10 ns and 9 per 20 ns (the ring: 9 slots, deadlines for the
/// long window), after six admissions at 0 and one at 8. A peek at 12 sees
/// the six expired for the short policy; an admission at 9 racing it must
/// still count them alive (remaining 0, policy 0). Linearizable with the
/// hints, which each policy's count verifies before trusting; the control
/// that trusts them unverified (and lets the peek store its later counts)
/// is caught.
const HINT_POLICIES: &[(u32, u64)] = &[(8, 10), (9, 20)];

#[test]
fn a_peek_never_moves_the_policy_hints() {
    common::hint_race(HINT_POLICIES, Flaw::None);
}

#[test]
#[should_panic(expected = "no sequential order")]
fn control_unverified_policy_hint_is_caught() {
    common::hint_race(HINT_POLICIES, Flaw::TrustHint);
}

/// Two admitters racing on the policies' hints: each reads and writes
/// them; every count stays exact in every interleaving, across the moment
/// (10) the six admissions at 0 leave the short window but not the long one.
#[test]
fn admitters_racing_on_the_policy_hints() {
    common::hint_admitters(HINT_POLICIES, Flaw::None);
}

/// Negative control: counting from the three words at and before each
/// hint without checking that the first live admission lies among them.
#[test]
#[should_panic(expected = "no sequential order")]
fn control_unbracketed_policy_hint_is_caught() {
    common::hint_admitters(HINT_POLICIES, Flaw::UnbracketedHint);
}
