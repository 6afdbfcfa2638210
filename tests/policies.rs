//! P7 and P2 for several policies on one ring, against the multi-policy deque
//! model: every decision, effective time, remaining count, retry time and
//! deciding policy, for policies in any order, weighted requests and clocks
//! that go backwards.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::max_in_window;
use common::multi::{MultiDecision, MultiModel, observed_multi};
use proptest::prelude::*;
use slidelog::{
    Admitted, ConfigError, Denied, DenyReason, KeyedLimiter, Limiter, MAX_POLICIES, ManualClock,
    Quota,
};

/// 1 to 4 policies of small limits and windows (so that windows overlap and
/// both short and long ones decide), any order, duplicates allowed.
fn policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec((1..=6u32, 1..=40u64), 1..=4)
}

/// Steps: a clock move (forwards, on a window edge, or backwards) and `n`.
fn steps(max_n: u32) -> impl Strategy<Value = Vec<(i64, u32)>> {
    let dt = prop_oneof![
        4 => Just(0i64),
        4 => 0..=12i64,
        1 => Just(40i64),
        1 => Just(41i64),
        1 => -15..0i64,
    ];
    let n = prop_oneof![6 => Just(1u32), 2 => 0..=max_n + 1];
    prop::collection::vec((dt, n), 1..120)
}

fn build(policies: &[(u32, u64)]) -> Limiter<ManualClock> {
    let mut builder = Limiter::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(limit, window) in &policies[1..] {
        builder = builder.and(limit, Duration::from_nanos(window));
    }
    builder.clock(ManualClock::new()).build().unwrap()
}

/// Policies of 6 to 12 (2 or 3 of them): those of 8 or more keep an expiry
/// hint on a `Limiter`, and the steps below keep enough admissions alive to
/// move it, so the hinted count and its search run against the model.
fn hinted_policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec((6..=12u32, 1..=60u64), 2..=3)
}

/// The steps as `(step, time, n)`: the clock starts at 100 and moves by
/// each step's `dt`, never below 0.
fn timed(steps: &[(i64, u32)]) -> impl Iterator<Item = (usize, u64, u32)> + '_ {
    steps.iter().enumerate().scan(100i64, |now, (i, &(dt, n))| {
        *now = (*now + dt).max(0);
        Some((i, *now as u64, n))
    })
}

/// Every answer of `check_n_at` (and, with `peek_first`, of `peek_n_at`
/// before it) against the multi-policy model.
fn equals_the_model(
    policies: &[(u32, u64)],
    steps: &[(i64, u32)],
    peek_first: bool,
) -> Result<(), TestCaseError> {
    let limiter = build(policies);
    decides_as_the_model(
        policies,
        steps,
        |_| peek_first,
        |n, t| limiter.peek_n_at(n, t),
        |n, t| limiter.check_n_at(n, t),
    )
}

/// Every answer of `check(n, t)` along `steps` (and, where `peek_at(step)`,
/// of `peek(n, t)` before it) against the multi-policy model.
fn decides_as_the_model(
    policies: &[(u32, u64)],
    steps: &[(i64, u32)],
    peek_at: impl Fn(usize) -> bool,
    peek: impl Fn(u32, u64) -> Result<Admitted, Denied>,
    check: impl Fn(u32, u64) -> Result<Admitted, Denied>,
) -> Result<(), TestCaseError> {
    let mut model = MultiModel::new(policies);
    for (i, t, n) in timed(steps) {
        if peek_at(i) {
            // A peek answers what the check will, and records nothing.
            let peeked = observed_multi(t, peek(n, t));
            let mut shadow = model.clone();
            prop_assert_eq!(peeked, shadow.decide(t, n), "peek, step {}", i);
        }
        let got = observed_multi(t, check(n, t));
        let want = model.decide(t, n);
        prop_assert_eq!(
            got,
            want,
            "step {} at {} n {} policies {:?}",
            i,
            t,
            n,
            policies
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn limiter_equals_the_multi_policy_model(
        policies in policies(),
        steps in steps(7),
        peek_first in any::<bool>(),
    ) {
        equals_the_model(&policies, &steps, peek_first)?;
    }

    #[test]
    fn hinted_policies_equal_the_multi_policy_model(
        policies in hinted_policies(),
        steps in steps(3),
        peek_first in any::<bool>(),
    ) {
        equals_the_model(&policies, &steps, peek_first)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `admit` and `admit_n` (which count no `remaining`) decide as
    /// `check_n` would: steps through `admit_at` (one unit) or `admit_n_at`
    /// (any other number, more than the smallest limit included) where the
    /// mask's bit says so, the rest through `check_n_at`, all against one
    /// model, so that each path also sees the log the other left.
    #[test]
    fn admit_decides_as_the_multi_policy_model(
        policies in policies(),
        steps in steps(7),
        admit_mask in any::<u64>(),
    ) {
        let limiter = build(&policies);
        let mut model = MultiModel::new(&policies);
        for (i, t, n) in timed(&steps) {
            let want = model.decide(t, n);
            if (admit_mask >> (i % 64)) & 1 == 1 {
                let got = if n == 1 { limiter.admit_at(t) } else { limiter.admit_n_at(n, t) };
                match (got, want) {
                    (Ok(()), MultiDecision::Admitted { .. }) => {}
                    (Err(denied), want) => {
                        prop_assert_eq!(observed_multi(t, Err(denied)), want, "admit, step {} at {}", i, t);
                    }
                    (Ok(()), want) => {
                        prop_assert!(false, "admit, step {} at {}: admitted, the model says {:?}", i, t, want);
                    }
                }
            } else {
                let got = observed_multi(t, limiter.check_n_at(n, t));
                prop_assert_eq!(got, want, "check, step {} at {} n {}", i, t, n);
            }
        }
    }
}

/// Every answer of `check(n, t)` along `steps` against the model, with
/// the time until `remaining` grows an admission reports: the model's
/// latest growth among the policies with the fewest units left, counted
/// from the caller's `t` (0 where it never grows by waiting).
fn grows_as_the_model(
    policies: &[(u32, u64)],
    steps: &[(i64, u32)],
    check: impl Fn(u32, u64) -> Result<(Admitted, Duration), Denied>,
) -> Result<(), TestCaseError> {
    let mut model = MultiModel::new(policies);
    for (i, t, n) in timed(steps) {
        let got = check(n, t);
        let want = model.decide(t, n);
        let decision = got.map(|(admitted, _)| admitted);
        prop_assert_eq!(
            observed_multi(t, decision),
            want,
            "step {} at {} n {} policies {:?}",
            i,
            t,
            n,
            policies
        );
        if let (Ok((_, grows)), MultiDecision::Admitted { at, .. }) = (got, want) {
            let want = model.grows_at(at).map_or(0, |g| g - t);
            prop_assert_eq!(
                grows,
                Duration::from_nanos(want),
                "growth, step {} at {} n {} policies {:?}",
                i,
                t,
                n,
                policies
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `check_n_with_growth_at` decides as `check_n_at` and reports when
    /// `remaining` grows in the same pass: one policy or several, small
    /// limits and large (hinted) ones, weighted requests and none.
    #[test]
    fn growth_is_the_models(
        policies in prop_oneof![policies(), hinted_policies(), (1..=12u32, 1..=60u64).prop_map(|p| vec![p])],
        steps in steps(4),
    ) {
        let limiter = build(&policies);
        grows_as_the_model(&policies, &steps, |n, t| limiter.check_n_with_growth_at(n, t))?;
    }

    /// The same through a keyed limiter: keyed states of small limits (no
    /// hints) and of 64 or more (a hint per policy), the policies the
    /// limiter's own or the key's quota (over a default of 1 per second).
    #[test]
    fn keyed_growth_is_the_models(
        policies in prop_oneof![policies(), keyed_hinted_policies()],
        steps in steps(3),
        as_quota in any::<bool>(),
    ) {
        let limiter = if as_quota {
            let ns = Duration::from_nanos;
            let mut quota = Quota::new(policies[0].0, ns(policies[0].1)).unwrap();
            for &(limit, window) in &policies[1..] {
                quota = quota.and(limit, ns(window)).unwrap();
            }
            KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
                .quota(move |&key: &u64| (key == 7).then(|| quota.clone()))
                .clock(ManualClock::new())
                .build()
                .unwrap()
        } else {
            build_keyed(&policies, &ManualClock::new())
        };
        grows_as_the_model(&policies, &steps, |n, t| limiter.check_n_with_growth_at(&7, n, t))?;
    }
}

/// The order policies are given in changes only the indices reported.
#[test]
fn policy_indices_follow_the_order_given() {
    let a = build(&[(2, 10), (5, 100)]);
    let b = build(&[(5, 100), (2, 10)]);
    for t in [0, 0, 0, 10, 10, 10, 20, 20, 20, 30] {
        let (ra, rb) = (a.check_at(t), b.check_at(t));
        assert_eq!(ra.is_ok(), rb.is_ok(), "at {t}");
        match (ra, rb) {
            (Ok(x), Ok(y)) => {
                assert_eq!(x.remaining(), y.remaining());
                assert_eq!(x.policy(), 1 - y.policy(), "at {t}");
            }
            (Err(x), Err(y)) => {
                assert_eq!(x.retry_after(), y.retry_after());
                assert_eq!(x.policy(), 1 - y.policy(), "at {t}");
            }
            _ => unreachable!(),
        }
    }
}

/// A chained pair of limiters leaks: the first consumes a unit even when the
/// second refuses. One multi-policy ring does not.
#[test]
fn a_refusal_by_one_policy_records_nothing_in_the_others() {
    let limiter = build(&[(3, 10), (4, 1_000)]);
    for t in [0, 0, 0] {
        limiter.check_at(t).unwrap();
    }
    limiter.check_at(10).unwrap(); // 4 this long window
    // Refused by the long window, over and over: nothing recorded.
    for t in 20..60 {
        let denied = limiter.check_at(t).unwrap_err();
        assert_eq!(denied.policy(), 1);
        assert_eq!(t + denied.retry_after_nanos(), 1_000);
    }
    assert_eq!(limiter.check_at(1_000).unwrap().remaining(), 2);
}

#[test]
fn exceeds_the_smallest_limit() {
    let limiter = build(&[(8, 10), (3, 100), (5, 1_000)]);
    let denied = limiter.check_n_at(4, 0).unwrap_err();
    assert_eq!(
        denied.reason(),
        DenyReason::ExceedsLimit {
            requested: 4,
            limit: 3
        }
    );
    assert_eq!(denied.policy(), 1);
    assert_eq!(limiter.check_n_at(3, 0).unwrap().remaining(), 0);
}

#[test]
fn config_errors_never_panic() {
    let err = |b: slidelog::LimiterBuilder<slidelog::QuantaClock>| b.build().unwrap_err();
    let one = || Limiter::builder(1, Duration::from_secs(1));
    assert_eq!(
        err(one().and(0, Duration::from_secs(1))),
        ConfigError::ZeroLimit
    );
    assert_eq!(err(one().and(1, Duration::ZERO)), ConfigError::ZeroWindow);
    assert!(matches!(
        err(one().and(u32::MAX, Duration::from_secs(1))),
        ConfigError::LimitTooLarge { .. }
    ));
    let mut many = one();
    for i in 0..MAX_POLICIES as u64 {
        many = many.and(2, Duration::from_secs(i + 2));
    }
    assert_eq!(
        err(many),
        ConfigError::TooManyPolicies {
            count: MAX_POLICIES + 1,
            max: MAX_POLICIES
        }
    );
    // Exactly MAX_POLICIES is fine, duplicates included.
    let mut full = one();
    for _ in 1..MAX_POLICIES {
        full = full.and(1, Duration::from_secs(1));
    }
    assert!(full.build().is_ok());
}

fn build_keyed(policies: &[(u32, u64)], clock: &ManualClock) -> KeyedLimiter<u64, ManualClock> {
    let mut builder =
        KeyedLimiter::<u64>::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(limit, window) in &policies[1..] {
        builder = builder.and(limit, Duration::from_nanos(window));
    }
    builder.clock(clock.clone()).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Per key, with sweeps in between: a key is evicted only once its
    /// newest admission has left the *longest* window (plus the margin), so
    /// eviction never forgets what a policy still counts.
    #[test]
    fn keyed_equals_the_multi_policy_model(
        policies in policies(),
        ops in prop::collection::vec((0..4u64, 0..=50u64, 0..=7u32, prop::bool::weighted(0.1)), 1..150),
    ) {
        let clock = ManualClock::new();
        let limiter = build_keyed(&policies, &clock);
        let mut models: HashMap<u64, MultiModel> = HashMap::new();
        let mut now = 0;
        for (i, &(key, dt, n, sweep)) in ops.iter().enumerate() {
            now += dt;
            clock.set(now);
            if sweep {
                limiter.retain_recent();
            }
            let got = observed_multi(now, limiter.check_n_at(&key, n, now));
            let want = models.entry(key).or_insert_with(|| MultiModel::new(&policies)).decide(now, n);
            prop_assert_eq!(got, want, "op {} key {} at {} n {} policies {:?}", i, key, now, n, &policies);
        }
    }
}

/// A key's ring of 64 slots or more keeps each policy's expiry hint
/// beside `head`: one policy of 64 to 72 among one or two of 6 to 40, in
/// any order, and steps that keep dozens of admissions alive, so the
/// hinted counts, their stores and their searches run against the model
/// on a keyed state's layout (a peek before some checks).
fn keyed_hinted_policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    (
        (64..=72u32, 1..=200u64),
        prop::collection::vec((6..=40u32, 1..=120u64), 1..=2),
        0..3usize,
    )
        .prop_map(|(big, mut others, at)| {
            others.insert(at.min(others.len()), big);
            others
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn keyed_hinted_policies_equal_the_multi_policy_model(
        policies in keyed_hinted_policies(),
        steps in steps(3),
        peeks in prop::collection::vec(any::<bool>(), 120),
    ) {
        let limiter = build_keyed(&policies, &ManualClock::new());
        decides_as_the_model(
            &policies,
            &steps,
            |i| peeks[i],
            |n, t| limiter.peek_n_at(&1, n, t),
            |n, t| limiter.check_n_at(&1, n, t),
        )?;
    }
}

/// Two tiers of keys racing on threads, each key's quota chosen when it is
/// first seen: no key ever exceeds any policy of its own tier, and at one
/// instant each tier admits exactly its smallest limit.
#[test]
fn per_key_quotas_race_on_threads() {
    const FREE: [(u32, u64); 2] = [(3, 1_000), (5, 10_000)];
    const PAID: [(u32, u64); 2] = [(10, 1_000), (25, 10_000)];
    let paid = Quota::new(PAID[0].0, Duration::from_nanos(PAID[0].1))
        .unwrap()
        .and(PAID[1].0, Duration::from_nanos(PAID[1].1))
        .unwrap();
    let limiter = Arc::new(
        KeyedLimiter::<u64>::builder(FREE[0].0, Duration::from_nanos(FREE[0].1))
            .and(FREE[1].0, Duration::from_nanos(FREE[1].1))
            .quota(move |key: &u64| (key % 2 == 1).then(|| paid.clone()))
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    // At one instant: exactly the smallest limit per tier, whoever races.
    let admitted_at_once = |key: u64| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                std::thread::spawn(move || {
                    (0..20)
                        .filter(|_| limiter.check_at(&key, 0).is_ok())
                        .count()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<usize>()
    };
    assert_eq!(admitted_at_once(100), 3, "free tier");
    assert_eq!(admitted_at_once(101), 10, "paid tier");

    // Then a shared clock that threads move on: record every admission.
    let time = Arc::new(AtomicU64::new(1_000_000));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let limiter = Arc::clone(&limiter);
            let time = Arc::clone(&time);
            std::thread::spawn(move || {
                let mut admitted: Vec<(u64, u64)> = Vec::new();
                for i in 0..20_000u64 {
                    let now = time.fetch_add(u64::from(i % 7 == 0), Ordering::Relaxed);
                    let key = (i + t) % 6;
                    let n = if i % 11 == 0 { 2 } else { 1 };
                    if let Ok(a) = limiter.check_n_at(&key, n, now) {
                        admitted.extend(std::iter::repeat_n((key, a.at()), n as usize));
                    }
                }
                admitted
            })
        })
        .collect();
    let mut per_key: HashMap<u64, Vec<u64>> = HashMap::new();
    for h in handles {
        for (key, at) in h.join().unwrap() {
            per_key.entry(key).or_default().push(at);
        }
    }
    for (key, times) in &mut per_key {
        let tier = if key % 2 == 1 { PAID } else { FREE };
        for (limit, window) in tier {
            let most = max_in_window(times, window);
            assert!(
                most <= limit as usize,
                "key {key}: {most} admissions in {window} ns (limit {limit})"
            );
        }
        // The clock moved ~12k ns: each key's tier was used, not just denied.
        assert!(
            times.len() >= tier[1].0 as usize,
            "key {key}: {} admissions",
            times.len()
        );
    }
}

#[test]
fn quotas_and_policies_need_the_log() {
    let err = KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
        .and(5, Duration::from_secs(60))
        .sliding_counter(10)
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::CounterPolicies);
    let err = KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
        .quota(|_| None)
        .two_window()
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::CounterPolicies);
    assert!(err.to_string().contains("exact log"));
}

/// A reading from before an eviction is judged at the eviction floor, which
/// must cover the *longest* window: the ring's own (largest-limit) policy
/// here has the shorter window.
#[test]
fn a_stale_reading_after_eviction_respects_the_longest_window() {
    let clock = ManualClock::new();
    // Ring policy: 2 per 10 ns; the other: 1 per 1000 ns.
    let limiter = build_keyed(&[(2, 10), (1, 1_000)], &clock);
    assert_eq!(limiter.check_at(&7, 0).unwrap().at(), 0);
    clock.set(5_000);
    assert_eq!(limiter.retain_recent(), 1);
    let admitted = limiter.check_at(&7, 50).unwrap();
    let mut times = vec![0, admitted.at()];
    assert!(
        max_in_window(&mut times, 1_000) <= 1,
        "two admissions within 1000 ns across the eviction: {times:?}"
    );
}
