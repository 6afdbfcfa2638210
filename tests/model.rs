//! P2, sequential exactness (the crate guide's "Guarantees"): the lock-free
//! ring equals the reference model.

mod common;

use std::time::Duration;

use common::{Model, ModelDecision, max_in_window, observed};
use proptest::prelude::*;
use slidelog::{KeyedLimiter, Limiter, ManualClock};

/// A time step that hits the edges: 0, exactly the window, one either side,
/// or something random.
fn step(window: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        2 => Just(window),
        2 => Just(window.saturating_sub(1)),
        2 => Just(window + 1),
        3 => 0..=window.saturating_mul(2),
        1 => 0..4u64,
    ]
}

fn scenario() -> impl Strategy<Value = (u32, u64, Vec<(u64, u32)>)> {
    (
        prop_oneof![Just(1u32), Just(2), Just(3), 1..=12u32, Just(64)],
        prop_oneof![
            Just(1u64),
            Just(2),
            Just(10),
            1..=1_000u64,
            Just(1_000_000_000)
        ],
    )
        .prop_flat_map(|(limit, window)| {
            let op = (step(window), 0..=limit + 2);
            (Just(limit), Just(window), prop::collection::vec(op, 1..200))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn ring_equals_model((limit, window, ops) in scenario()) {
        let limiter = Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
        let mut model = Model::new(limit, window);
        let mut t = 0u64;
        let mut admitted = Vec::new();
        for (i, (dt, n)) in ops.into_iter().enumerate() {
            t += dt;
            let expect = model.decide(t, n);
            let got = limiter.check_n_at(n, t);
            if let Ok(a) = got {
                prop_assert_eq!(a.at(), t, "sequential non-decreasing time is never clamped");
                for _ in 0..n { admitted.push(a.at()); }
            }
            prop_assert_eq!(observed(got), expect, "step {} at t={} n={}", i, t, n);
        }
        prop_assert!(max_in_window(&mut admitted, window) <= limit as usize);
    }

    /// The clock-driven forms agree with the `_at` forms.
    #[test]
    fn clock_forms_equal_model((limit, window, ops) in scenario()) {
        let clock = ManualClock::new();
        let limiter = Limiter::with_clock(limit, Duration::from_nanos(window), clock.clone()).unwrap();
        let mut model = Model::new(limit, window);
        for (dt, n) in ops {
            clock.advance(Duration::from_nanos(dt));
            let t = slidelog::Clock::now(&clock);
            let got = if n == 1 { limiter.check() } else { limiter.check_n(n) };
            prop_assert_eq!(observed(got), model.decide(t, n));
        }
    }

    /// A clock that jumps backwards never causes over-admission (§2): the
    /// recorded `at()` times respect the limit, and never go backwards.
    #[test]
    fn backwards_clock_never_over_admits(
        limit in 1..6u32,
        window in 1..50u64,
        times in prop::collection::vec((0..200u64, 1..3u32), 1..150),
    ) {
        let limiter = Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
        let mut ats = Vec::new();
        let mut last = 0;
        for (t, n) in times {
            if let Ok(a) = limiter.check_n_at(n, t) {
                prop_assert!(a.at() >= t && a.at() >= last);
                last = a.at();
                for _ in 0..n { ats.push(a.at()); }
            }
        }
        prop_assert!(max_in_window(&mut ats, window) <= limit as usize);
    }
}

/// One step of the hinted-count scenario: `check_n`, `admit` (of one unit;
/// `admit_n` of any other number) or a peek.
#[derive(Clone, Copy, Debug)]
enum HintOp {
    Check(u32),
    Admit(u32),
    Peek(u32),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Rings large enough to keep the expiry hint (8 slots and more), with
    /// dense traffic so that many admissions are live, and `admit` and
    /// `admit_n` (which never move the hint) and peeks mixed in, so that
    /// the count often starts from a stale hint: every count, decision and
    /// wait still equals the model's, and `admit` and `admit_n` decide
    /// exactly as `check_n`. A keyed
    /// state of the same limit answers alike (from 64 slots on it keeps
    /// its own expiry hint in its allocation).
    #[test]
    fn hinted_counts_equal_model(
        limit in prop_oneof![Just(8u32), Just(9), 10..=40u32, Just(64), Just(300)],
        window in prop_oneof![Just(10u64), 20..=200u64, Just(1_000)],
        ops in prop::collection::vec(
            (
                prop_oneof![4 => Just(0u64), 4 => 1..4u64, 2 => 0..40u64, 1 => 0..1_500u64],
                prop_oneof![
                    6 => Just(HintOp::Check(1)),
                    3 => Just(HintOp::Admit(1)),
                    1 => (0..=3u32).prop_map(HintOp::Admit),
                    1 => (0..=3u32).prop_map(HintOp::Check),
                    1 => (0..=2u32).prop_map(HintOp::Peek),
                ],
            ),
            1..600,
        ),
    ) {
        let limiter = Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
        let keyed = KeyedLimiter::<u64, ManualClock>::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
        let mut model = Model::new(limit, window);
        let mut t = 0u64;
        for (i, (dt, op)) in ops.into_iter().enumerate() {
            t += dt;
            match op {
                HintOp::Check(n) => {
                    let expect = model.decide(t, n);
                    prop_assert_eq!(observed(limiter.check_n_at(n, t)), expect, "step {} check_n({}) at {}", i, n, t);
                    prop_assert_eq!(observed(keyed.check_n_at(&7, n, t)), expect, "keyed: step {} check_n({}) at {}", i, n, t);
                }
                HintOp::Admit(n) => {
                    let expect = model.decide(t, n);
                    let answers = if n == 1 {
                        [(limiter.admit_at(t), "limiter"), (keyed.admit_at(&7, t), "keyed")]
                    } else {
                        [(limiter.admit_n_at(n, t), "limiter admit_n"), (keyed.admit_n_at(&7, n, t), "keyed admit_n")]
                    };
                    for (got, which) in answers {
                        match expect {
                            ModelDecision::Admitted { .. } => prop_assert!(got.is_ok(), "{}: step {} admit at {}: {:?}", which, i, t, got),
                            ModelDecision::Denied { retry_after } => prop_assert_eq!(
                                got.map_err(|d| d.retry_after_nanos()), Err(retry_after), "{}: step {} admit at {}", which, i, t
                            ),
                            other => prop_assert!(false, "unexpected model answer {:?}", other),
                        }
                    }
                }
                HintOp::Peek(n) => {
                    // A peek answers what a check would, recording nothing.
                    let mut probe = model.clone();
                    let expect = probe.decide(t, n);
                    prop_assert_eq!(observed(limiter.peek_n_at(n, t)), expect, "step {} peek_n({}) at {}", i, n, t);
                    prop_assert_eq!(observed(keyed.peek_n_at(&7, n, t)), expect, "keyed: step {} peek_n({}) at {}", i, n, t);
                }
            }
        }
    }
}

#[test]
fn time_zero_is_a_valid_instant() {
    let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new()).unwrap();
    for left in (0..3).rev() {
        let a = limiter.check().unwrap();
        assert_eq!((a.at(), a.remaining()), (0, left));
    }
    assert_eq!(
        limiter.check().unwrap_err().retry_after(),
        Duration::from_secs(1)
    );
}

#[test]
fn retry_after_is_exact() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(2, Duration::from_millis(100), clock.clone()).unwrap();
    limiter.check().unwrap();
    clock.advance(Duration::from_millis(30));
    limiter.check().unwrap();
    clock.advance(Duration::from_millis(10));
    let denied = limiter.check().unwrap_err();
    assert_eq!(denied.retry_after(), Duration::from_millis(60));
    clock.advance(denied.retry_after() - Duration::from_nanos(1));
    assert!(
        limiter.check().is_err(),
        "one nanosecond early must be denied"
    );
    clock.advance(Duration::from_nanos(1));
    assert_eq!(limiter.check().unwrap().remaining(), 0);
}

#[test]
fn weighted_is_all_or_nothing() {
    let limiter = Limiter::with_clock(5, Duration::from_secs(1), ManualClock::new()).unwrap();
    assert_eq!(limiter.check_n(3).unwrap().remaining(), 2);
    let denied = limiter.check_n(3).unwrap_err();
    assert!(denied.is_rate_limited());
    assert_eq!(
        limiter.check_n(0).unwrap().remaining(),
        2,
        "a denial takes nothing"
    );
    assert_eq!(limiter.check_n(2).unwrap().remaining(), 0);
    assert!(!limiter.check_n(6).unwrap_err().is_rate_limited());
}

#[test]
fn zero_units_record_nothing() {
    let limiter = Limiter::with_clock(2, Duration::from_secs(1), ManualClock::new()).unwrap();
    for _ in 0..10 {
        assert_eq!(limiter.check_n(0).unwrap().remaining(), 2);
    }
    limiter.check().unwrap();
    limiter.check().unwrap();
    assert_eq!(limiter.check_n(0).unwrap().remaining(), 0);
}

#[test]
fn saturates_beyond_the_encodable_time() {
    let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new()).unwrap();
    let a = limiter.check_at(u64::MAX).unwrap();
    assert!(a.at() < u64::MAX);
    assert!(limiter.check_at(u64::MAX).is_err());
}

#[test]
fn model_matches_a_worked_example() {
    // The model itself must be right: L = 2, W = 10.
    let mut m = Model::new(2, 10);
    assert_eq!(m.decide(0, 1), ModelDecision::Admitted { remaining: 1 });
    assert_eq!(m.decide(5, 1), ModelDecision::Admitted { remaining: 0 });
    assert_eq!(m.decide(9, 1), ModelDecision::Denied { retry_after: 1 });
    assert_eq!(m.decide(10, 1), ModelDecision::Admitted { remaining: 0 });
    assert_eq!(m.decide(12, 2), ModelDecision::Denied { retry_after: 8 });
    assert_eq!(m.decide(12, 3), ModelDecision::ExceedsLimit);
    let mut times = vec![0, 5, 10, 15];
    assert_eq!(max_in_window(&mut times, 10), 2);
    let mut times = vec![0, 5, 9];
    assert_eq!(max_in_window(&mut times, 10), 3);
}
