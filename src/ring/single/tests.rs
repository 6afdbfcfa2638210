//! The frontier guess changes no answer: a ring whose guess is
//! overwritten before every call — with garbage, with indices just
//! behind or ahead of the frontier, with the frontier itself — answers
//! every call exactly as the same ring left alone. (That ring is held to
//! the reference model by `tests/model.rs`.)

use proptest::prelude::*;

use super::super::RingRef;
use super::super::word::head;
use super::super::{Hints, Shape};
use crate::policy::Policy;
use crate::sync::atomic::{AtomicU64, Ordering};

/// A ring of `limit` slots with its own `head` and guesses.
struct Ring {
    shape: Shape,
    head: AtomicU64,
    hints: Hints,
    slots: Vec<AtomicU64>,
}

impl Ring {
    fn new(limit: u32, window: u64) -> Ring {
        Ring::with_policies(&[(limit, window)])
    }

    /// A ring for several policies `(limit, window)`.
    fn with_policies(policies: &[(u32, u64)]) -> Ring {
        let policies: Vec<_> = policies
            .iter()
            .map(|&(limit, window)| Policy::new(limit, std::time::Duration::from_nanos(window)))
            .collect();
        let shape = Shape::new(&policies).unwrap();
        let slots = (0..shape.geometry.limit())
            .map(|_| AtomicU64::new(0))
            .collect();
        Ring {
            shape,
            head: AtomicU64::new(0),
            hints: Hints::default(),
            slots,
        }
    }

    /// A view with its hints (a limiter's) or without (a keyed
    /// state's).
    fn view(&self, hinted: bool) -> RingRef<'_> {
        let ring = self.shape.ring_hinted(&self.head, &self.hints, &self.slots);
        if hinted {
            return ring;
        }
        RingRef {
            frontier: None,
            expiry: None,
            policy_expiry: &[],
            ..ring
        }
    }

    /// The frontier guess.
    fn guess(&self) -> u64 {
        self.hints.frontier.load(Ordering::Relaxed)
    }

    /// `head`'s index.
    fn head_index(&self) -> u64 {
        head::index(self.head.load(Ordering::Relaxed))
    }

    /// Overwrites the guess with the index `behind` before `head`'s.
    fn leave_guess_behind(&self, behind: u64) {
        let stale = self.head_index().wrapping_sub(behind);
        self.hints.frontier.store(stale, Ordering::Relaxed);
    }

    /// `n` units at `t` (`n == 1` through `admit` when `admit`): the
    /// answer as `(admitted, at, remaining, retry)`.
    fn call(&self, t: u64, n: u32, admit: bool) -> (bool, u64, u32, u64) {
        let ring = self.shape.ring_hinted(&self.head, &self.hints, &self.slots);
        let now = self.shape.now(t, 0);
        if admit {
            return match self.shape.admit_at(ring, now).unwrap() {
                Ok(()) => (true, 0, 0, 0),
                Err(denied) => (false, 0, 0, denied.retry_after_nanos()),
            };
        }
        match self.shape.check_at(ring, now, n).unwrap() {
            Ok(admitted) => (true, admitted.at(), admitted.remaining(), 0),
            Err(denied) => (false, 0, 0, denied.retry_after_nanos()),
        }
    }
}

/// `log` (admissions' effective times) after `decision`.
fn log_after<'l>(
    log: &'l mut Vec<u64>,
    decision: &Result<crate::decision::Admitted, crate::decision::Denied>,
) -> &'l [u64] {
    if let Ok(admitted) = decision {
        log.push(admitted.at());
    }
    log
}

/// `n` units at `t` (at most the limit; through `admit` when asked and
/// `n == 1`) answer alike on both rings; `scramble` says what was
/// overwritten.
fn same_answer(
    clean: &Ring,
    scrambled: &Ring,
    t: u64,
    n: u32,
    admit: bool,
    scramble: &dyn core::fmt::Debug,
) -> Result<(), TestCaseError> {
    let n = n.min(clean.shape.limit());
    let admit = admit && n == 1;
    prop_assert_eq!(
        scrambled.call(t, n, admit),
        clean.call(t, n, admit),
        "at {} ns, {} unit(s), admit: {}, overwritten: {:?}",
        t,
        n,
        admit,
        scramble
    );
    Ok(())
}

/// What to write into the guess before a call.
#[derive(Clone, Copy, Debug)]
enum Scramble {
    Keep,
    Garbage(u64),
    /// `head + j`: past the frontier, at it, or behind it.
    AheadOfHead(u64),
    /// The frontier itself plus `j` (found from the clean ring's slots).
    AheadOfFrontier(u64),
    BehindHead(u64),
}

fn scramble() -> impl Strategy<Value = Scramble> {
    prop_oneof![
        Just(Scramble::Keep),
        any::<u64>().prop_map(Scramble::Garbage),
        // Up to 24 past `head`: past `B` (16) on rings of 18 slots and more.
        (0..24u64).prop_map(Scramble::AheadOfHead),
        (0..4u64).prop_map(Scramble::AheadOfFrontier),
        (1..12u64).prop_map(Scramble::BehindHead),
    ]
}

/// A guess left behind `head` (as racing admitters leave it)
/// is caught up within `B + 1` admissions: the scan stores it when it
/// moves `head`, and the fast path then keeps it, as on a ring whose
/// guess was never disturbed. (Without that store the guess stays where
/// it was and every single takes the scan.)
#[test]
fn a_guess_left_behind_catches_up() {
    for limit in [2u32, 3, 10, 17, 40] {
        let lag = u64::from((limit - 1).min(16));
        for warm in 0..3 * u64::from(limit) {
            for behind in 1..=lag + 2 {
                // W = 1 ns, one call per ns: every single fits.
                let (clean, scrambled) = (Ring::new(limit, 1), Ring::new(limit, 1));
                let mut t = 0;
                for _ in 0..warm {
                    t += 1;
                    assert!(clean.call(t, 1, true).0 && scrambled.call(t, 1, true).0);
                }
                scrambled.leave_guess_behind(behind);
                for _ in 0..=lag {
                    t += 1;
                    assert!(clean.call(t, 1, true).0 && scrambled.call(t, 1, true).0);
                }
                assert_eq!(
                    scrambled.guess(),
                    clean.guess(),
                    "L = {limit}, {warm} admissions, then the guess {behind} behind head \
                     and {} more",
                    lag + 1
                );
            }
        }
    }
}

/// The admission that fills the window leaves the guess at the
/// frontier, even from the scan and through `admit` (which counts
/// nothing): the denials that follow take the head-free path.
#[test]
fn a_full_window_places_the_guess() {
    for limit in [2u32, 3, 10, 17, 40] {
        let lag = u64::from((limit - 1).min(16));
        for warm in 0..u64::from(limit) {
            for behind in 1..=lag + 2 {
                let ring = Ring::new(limit, 1_000);
                for _ in 0..warm {
                    assert!(ring.call(1, 1, true).0);
                }
                ring.leave_guess_behind(behind);
                let mut admitted = warm;
                while ring.call(1, 1, true).0 {
                    admitted += 1;
                }
                assert_eq!(admitted, u64::from(limit));
                assert_eq!(
                    ring.guess(),
                    ring.head_index(),
                    "L = {limit}, {warm} admissions, then the guess {behind} behind head"
                );
            }
        }
    }
}

/// A ring handed a log (a restored snapshot, a reconfiguration's new
/// generation) starts with the guess at its frontier.
#[test]
fn a_handed_log_places_the_guess() {
    for limit in [1u32, 2, 3, 10, 17, 40] {
        for kept in 0..=u64::from(limit) {
            let ring = Ring::new(limit, 1_000);
            let times: Vec<u64> = (0..kept).collect();
            ring.shape
                .ring_hinted(&ring.head, &ring.hints, &ring.slots)
                .fill_fresh(&times);
            assert_eq!(ring.guess(), ring.head_index(), "L = {limit}, {kept} kept");
        }
    }
}

/// A weighted admission moves the guess past its batch, where it
/// leaves `head`: the singles after it take the fast path at once.
#[test]
fn a_batch_moves_the_guess() {
    for limit in [2u32, 3, 10, 17, 40] {
        for warm in 0..3 * u64::from(limit) {
            for n in 2..=limit {
                let ring = Ring::new(limit, 1);
                for t in 1..=warm {
                    assert!(ring.call(t, 1, true).0);
                }
                assert!(ring.call(warm + 1, n, false).0);
                assert_eq!(
                    ring.guess(),
                    ring.head_index(),
                    "L = {limit}, {warm} singles, then {n} units"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The growth time read with the count equals what the tower layer
    /// computed before it (and still does with several policies): the
    /// wait of a dry run of `remaining + 1` units right after.
        #[test]
    fn growth_equals_the_dry_run(
        limit in 1u32..12,
        window in 1u64..40,
        calls in prop::collection::vec((0u64..6, 1u32..4, any::<bool>()), 1..80),
    ) {
        let (growing, peeking) = (Ring::new(limit, window), Ring::new(limit, window));
        let mut t = 0;
        for (dt, n, grow) in calls {
            t += dt;
            if !grow {
                // Other traffic: weighted calls that move the log on.
                let n = n.min(limit);
                prop_assert_eq!(growing.call(t, n, false), peeking.call(t, n, false));
                continue;
            }
            let ring = growing.shape.ring_hinted(&growing.head, &growing.hints, &growing.slots);
            let now = growing.shape.now(t, 0);
            let states = crate::ring::StatesOut::new(None);
            let one = growing.shape.check_growing_at(ring, now, &states).unwrap();
            // One policy: no states written.
            prop_assert_eq!(states.get(), None);
            let (decision, wait) = (one.decision, one.wait);
            let ring = peeking.shape.ring_hinted(&peeking.head, &peeking.hints, &peeking.slots);
            let expected = peeking.shape.check_at(ring, now, 1).unwrap();
            prop_assert_eq!(&decision, &expected);
            let Ok(admitted) = expected else {
                prop_assert_eq!(wait, None);
                continue;
            };
            let more = admitted.remaining() + 1;
            let dry = peeking.shape.peek_at(ring, now, more).unwrap();
            let dry_wait = dry.err().map(|denied| denied.retry_after_nanos());
            prop_assert!(dry_wait.is_some(), "{} units fit right after {} remained", more, more - 1);
            prop_assert_eq!(wait, dry_wait, "at {} ns, remaining {}", t, admitted.remaining());
        }
    }

    /// With several policies, the one pass the tower layer makes
    /// answers as the three it made before: the decision as `check`'s,
    /// the wait as a dry run of `remaining + 1` units right after, and
    /// each policy's state as `policy_states` reads it after the
    /// admission — on a ring with hints (a limiter's) and without (a
    /// keyed state's). And `policy_states`, after an admission or a
    /// denial, says what each policy's window holds (by brute force
    /// from every admission's time).
        #[test]
    fn several_policies_grow_as_the_dry_run_and_the_states_say(
        policies in prop::collection::vec((1u32..12, 1u64..40), 2..4),
        hinted in any::<bool>(),
        calls in prop::collection::vec((0u64..6, 1u32..4, any::<bool>()), 1..80),
    ) {
        let (growing, peeking) = (Ring::with_policies(&policies), Ring::with_policies(&policies));
        let smallest = policies.iter().map(|&(limit, _)| limit).min().unwrap();
        // Every admission's effective time, oldest first: each policy's
        // state by brute force from it.
        let mut log: Vec<u64> = Vec::new();
        let expected_states = |log: &[u64], t: u64| {
            let t_eff = log.last().map_or(t, |&last| last.max(t));
            let raw: Vec<(u32, u64)> = policies
                .iter()
                .map(|&(limit, window)| {
                    let last = &log[log.len().saturating_sub(limit as usize)..];
                    let live: Vec<u64> = last.iter().copied().filter(|&at| at + window > t_eff).collect();
                    (limit - live.len() as u32, live.first().map_or(0, |&at| at + window))
                })
                .collect();
            crate::decision::PolicyStates::growing(&raw, t)
        };
        let mut t = 0;
        for (dt, n, grow) in calls {
            t += dt;
            if !grow {
                // Other traffic: weighted calls that move the log on.
                let n = n.min(smallest);
                let answer = growing.call(t, n, false);
                prop_assert_eq!(answer, peeking.call(t, n, false));
                if answer.0 {
                    log.extend((0..n).map(|_| answer.1));
                }
                continue;
            }
            let now = growing.shape.now(t, 0);
            let one_states = crate::ring::StatesOut::new(None);
            let one = growing.shape.check_growing_at(growing.view(hinted), now, &one_states).unwrap();
            let ring = peeking.view(hinted);
            let expected = peeking.shape.check_at(ring, now, 1).unwrap();
            prop_assert_eq!(&one.decision, &expected);
            let states = peeking.shape.policy_states(ring, now);
            prop_assert_eq!(states, Some(expected_states(log_after(&mut log, &expected), t)), "at {} ns", t);
            let Ok(admitted) = expected else {
                prop_assert_eq!((one.wait, one_states.get()), (None, None));
                continue;
            };
            let more = admitted.remaining() + 1;
            let dry = peeking.shape.peek_at(ring, now, more).unwrap();
            let dry_wait = dry.err().map(|denied| denied.retry_after_nanos());
            prop_assert!(dry_wait.is_some(), "{} units fit right after {} remained", more, more - 1);
            prop_assert_eq!(one.wait, dry_wait, "at {} ns, remaining {}", t, admitted.remaining());
            prop_assert_eq!(one_states.get(), states, "at {} ns", t);
        }
    }

    /// The expiry hint is a guess too: overwritten before every call
    /// with garbage or any live count, it changes no count (rings of 8
    /// slots and more keep one; windows long enough to hold many live
    /// admissions).
    #[test]
    fn no_expiry_hint_changes_a_count(
        limit in 8u32..40,
        window in 1u64..200,
        calls in prop::collection::vec(
            (0u64..8, 0u32..4, any::<bool>(), prop::option::of(any::<u64>()), 0u64..48),
            1..120,
        ),
    ) {
        let (clean, scrambled) = (Ring::new(limit, window), Ring::new(limit, window));
        let mut t = 0;
        for (dt, n, admit, garbage, position) in calls {
            t += dt;
            let hint = garbage.unwrap_or(position);
            scrambled.hints.expiry.store(hint, Ordering::Relaxed);
            same_answer(&clean, &scrambled, t, n, admit, &hint)?;
        }
    }

    #[test]
    fn no_guess_changes_an_answer(
        limit in prop_oneof![1u32..12, 17u32..40],
        window in 1u64..40,
        calls in prop::collection::vec((0u64..6, 0u32..4, any::<bool>(), scramble()), 1..80),
    ) {
        let (clean, scrambled) = (Ring::new(limit, window), Ring::new(limit, window));
        let mut t = 0;
        for (dt, n, admit, how) in calls {
            t += dt;
            let hw = scrambled.head.load(Ordering::Relaxed);
            let frontier = clean.hints.frontier.load(Ordering::Relaxed);
            let word = match how {
                Scramble::Keep => None,
                Scramble::Garbage(word) => Some(word),
                Scramble::AheadOfHead(j) => Some(head::index(hw) + j),
                Scramble::AheadOfFrontier(j) => Some(frontier.max(head::index(hw)) + j),
                Scramble::BehindHead(j) => Some(head::index(hw).wrapping_sub(j)),
            };
            if let Some(word) = word {
                scrambled.hints.frontier.store(word, Ordering::Relaxed);
            }
            same_answer(&clean, &scrambled, t, n, admit, &how)?;
        }
    }
}
