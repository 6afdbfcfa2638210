//! The reference-model property test through a Redis limiter, shared by the
//! single-node and the cluster tests: times injected through the test hook
//! (so steps of exactly the window can be tested), windows of whole seconds
//! (PEXPIRE runs on the server's real clock, so a key must not expire
//! between two checks of one case), both layouts.

use std::future::Future;
use std::time::Duration;

use proptest::prelude::*;
use slidelog::redis::{Layout, RedisLimiter};

use super::{Model, ModelDecision, observed};

/// Runs `cases` cases; `connect(limit, window, layout, case)` builds the
/// limiter and the key each case uses.
pub fn layouts_equal_the_model<F, Fut>(rt: &tokio::runtime::Runtime, cases: u32, connect: F)
where
    F: Fn(u32, Duration, Layout, u64) -> Fut,
    Fut: Future<Output = (RedisLimiter, String)>,
{
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    let strategy = (1..5u32, 1..40u64, any::<bool>()).prop_flat_map(|(limit, seconds, ring)| {
        let window = seconds * 1_000_000;
        let step = prop_oneof![
            Just(0u64),
            Just(window),
            Just(window - 1),
            Just(window + 1),
            0..2 * window
        ];
        (
            Just(limit),
            Just(window),
            Just(ring),
            prop::collection::vec((step, 0..=limit + 1), 1..50),
        )
    });
    runner
        .run(&strategy, |(limit, window_us, ring, ops)| {
            let layout = if ring {
                Layout::Ring
            } else {
                Layout::SortedSet
            };
            let id = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            rt.block_on(async {
                let (l, key) = connect(limit, Duration::from_micros(window_us), layout, id).await;
                let mut model = Model::new(limit, window_us);
                let mut t = 1_000_000u64;
                for (dt, n) in ops {
                    t += dt;
                    let got = l.check_n_at_server_time_override(&key, n, t).await.unwrap();
                    let expect = match model.decide(t, n) {
                        ModelDecision::Denied { retry_after } => ModelDecision::Denied {
                            retry_after: retry_after * 1000,
                        },
                        other => other,
                    };
                    prop_assert_eq!(observed(got), expect, "{:?} t={} n={}", layout, t, n);
                }
                Ok(())
            })
        })
        .unwrap();
}

/// Several policies (`.and`) through Redis, both layouts, against the
/// multi-policy model: `connect(policies, layout, case)` builds the limiter
/// (windows in µs, whole seconds) and the key.
pub fn policies_equal_the_model<F, Fut>(rt: &tokio::runtime::Runtime, cases: u32, connect: F)
where
    F: Fn(Vec<(u32, Duration)>, Layout, u64) -> Fut,
    Fut: Future<Output = (RedisLimiter, String)>,
{
    use super::multi::{MultiModel, observed_multi};
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    let strategy = (
        prop::collection::vec((1..5u32, 1..40u64), 1..=3),
        any::<bool>(),
        prop::collection::vec(
            (
                prop_oneof![Just(0u64), 0..3_000_000u64, 0..40_000_000u64],
                0..=5u32,
            ),
            1..40,
        ),
    );
    runner
        .run(&strategy, |(policies, ring, ops)| {
            let layout = if ring {
                Layout::Ring
            } else {
                Layout::SortedSet
            };
            let id = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let us: Vec<(u32, u64)> = policies.iter().map(|&(l, s)| (l, s * 1_000_000)).collect();
            let given = us
                .iter()
                .map(|&(l, w)| (l, Duration::from_micros(w)))
                .collect();
            rt.block_on(async {
                let (l, key) = connect(given, layout, id).await;
                let mut model = MultiModel::new(&us);
                let mut t = 1_000_000u64;
                for (i, (dt, n)) in ops.into_iter().enumerate() {
                    t += dt;
                    // Every other call also asks when `remaining` grows:
                    // the model's latest growth among the policies with
                    // the fewest units left (0 if it never grows).
                    let (got, grows) = if i % 2 == 0 {
                        (
                            l.check_n_at_server_time_override(&key, n, t).await.unwrap(),
                            None,
                        )
                    } else {
                        match l
                            .check_n_with_growth_at_server_time_override(&key, n, t)
                            .await
                            .unwrap()
                        {
                            Ok((admitted, grows)) => (Ok(admitted), Some(grows)),
                            Err(denied) => (Err(denied), None),
                        }
                    };
                    let want = in_nanos(model.decide(t, n));
                    prop_assert_eq!(
                        observed_multi(t * 1_000, got),
                        want,
                        "{:?} t={} n={} policies {:?}",
                        layout,
                        t,
                        n,
                        &us
                    );
                    if let Some(grows) = grows {
                        let want = model.grows_at(t).map_or(0, |g| g - t);
                        prop_assert_eq!(
                            grows,
                            Duration::from_micros(want),
                            "growth: {:?} t={} n={} policies {:?}",
                            layout,
                            t,
                            n,
                            &us
                        );
                    }
                }
                Ok(())
            })
        })
        .unwrap();
}

/// Live reconfiguration through Redis, both layouts, against the
/// multi-policy model with reconfigurations interleaved. Redis meets a
/// key's new policies at the key's next call: the ring layout then rebuilds
/// a ring written under another size or base window, keeping its newest
/// admissions (several changes between two calls act as one); the sorted
/// set keeps every admission its calls have not trimmed by age (within the
/// longest window at the call's time). `connect(policies, layout, case)`
/// builds the limiter.
pub fn reconfigurations_equal_the_model<F, Fut>(
    rt: &tokio::runtime::Runtime,
    cases: u32,
    connect: F,
) where
    F: Fn(Vec<(u32, Duration)>, Layout, u64) -> Fut,
    Fut: Future<Output = (RedisLimiter, String)>,
{
    use super::multi::{MultiModel, observed_multi};
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    let policies = || prop::collection::vec((1..5u32, 1..40u64), 1..=3);
    let step = prop_oneof![
        6 => (prop_oneof![Just(0u64), 0..3_000_000u64, 0..40_000_000u64], 0..=5u32)
            .prop_map(|(dt, n)| (dt, n, None)),
        1 => policies().prop_map(|p| (0, 0, Some(p))),
    ];
    let strategy = (
        policies(),
        any::<bool>(),
        prop::collection::vec(step, 1..40),
    );
    let in_us = |p: &[(u32, u64)]| -> Vec<(u32, u64)> {
        p.iter().map(|&(l, s)| (l, s * 1_000_000)).collect()
    };
    // A ring's size and base window: the largest limit, the longest window
    // among those.
    let dims = |p: &[(u32, u64)]| *p.iter().max_by_key(|&&(l, w)| (l, w)).unwrap();
    runner
        .run(&strategy, |(policies, ring, ops)| {
            let layout = if ring {
                Layout::Ring
            } else {
                Layout::SortedSet
            };
            let id = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let us = in_us(&policies);
            let given = us
                .iter()
                .map(|&(l, w)| (l, Duration::from_micros(w)))
                .collect();
            rt.block_on(async {
                let (l, key) = connect(given, layout, id).await;
                let mut model = if ring {
                    MultiModel::new(&us)
                } else {
                    MultiModel::new(&us).keeping_all()
                };
                // The ring's dimensions as the key's last call wrote it.
                let mut written: Option<(u32, u64)> = None;
                let mut t = 1_000_000u64;
                for (dt, n, change) in ops {
                    if let Some(policies) = change {
                        let us = in_us(&policies);
                        let mut quota =
                            slidelog::Quota::new(us[0].0, Duration::from_micros(us[0].1)).unwrap();
                        for &(limit, window) in &us[1..] {
                            quota = quota.and(limit, Duration::from_micros(window)).unwrap();
                        }
                        l.reconfigure(quota).unwrap();
                        prop_assert_eq!(l.policies()[0].limit, us[0].0);
                        model.set_policies(&us);
                        continue;
                    }
                    t += dt;
                    // A request above the smallest limit is refused before
                    // Redis is asked: the key is not touched.
                    let reaches = n <= model.policies.iter().map(|p| p.0).min().unwrap();
                    if !reaches {
                    } else if ring {
                        let now = dims(&model.policies);
                        if let Some(old) = written.filter(|&old| old != now) {
                            model.truncate(old.0 as usize);
                        }
                        written = Some(now);
                    } else {
                        let longest = model.policies.iter().map(|p| p.1).max().unwrap();
                        model.forget_up_to(t.saturating_sub(longest));
                    }
                    let got = l.check_n_at_server_time_override(&key, n, t).await.unwrap();
                    let want = in_nanos(model.decide(t, n));
                    prop_assert_eq!(
                        observed_multi(t * 1_000, got),
                        want,
                        "{:?} t={} n={} policies {:?}",
                        layout,
                        t,
                        n,
                        &model.policies
                    );
                }
                Ok(())
            })
        })
        .unwrap();
}

/// A model decision made in microseconds (Redis `TIME`), in nanoseconds.
fn in_nanos(decision: super::multi::MultiDecision) -> super::multi::MultiDecision {
    use super::multi::MultiDecision;
    match decision {
        MultiDecision::Admitted {
            at,
            remaining,
            policy,
        } => MultiDecision::Admitted {
            at: at * 1_000,
            remaining,
            policy,
        },
        MultiDecision::Denied { until, policy } => MultiDecision::Denied {
            until: until * 1_000,
            policy,
        },
        other => other,
    }
}
