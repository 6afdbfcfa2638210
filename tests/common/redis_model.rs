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
    policies_equal_the_model_from(rt, cases, 1_000_000, false, connect);
}

/// [`policies_equal_the_model`] at 16-digit Unix microsecond times, with
/// windows of whole seconds and any number of microseconds: every
/// boundary to the microsecond, where the server's own clock puts it.
pub fn policies_equal_the_model_at_unix_times<F, Fut>(
    rt: &tokio::runtime::Runtime,
    cases: u32,
    connect: F,
) where
    F: Fn(Vec<(u32, Duration)>, Layout, u64) -> Fut,
    Fut: Future<Output = (RedisLimiter, String)>,
{
    policies_equal_the_model_from(rt, cases, 1_765_432_109_876_543, true, connect);
}

/// The cases start at `start` (µs); `odd_us`: windows not of whole seconds.
fn policies_equal_the_model_from<F, Fut>(
    rt: &tokio::runtime::Runtime,
    cases: u32,
    start: u64,
    odd_us: bool,
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
    let strategy = (
        prop::collection::vec((1..5u32, 1..40u64, 0..1_000_000u64), 1..=3),
        any::<bool>(),
        prop::collection::vec(
            (
                prop_oneof![
                    3 => prop_oneof![Just(0u64), 0..3_000_000u64, 0..40_000_000u64]
                        .prop_map(|dt| (dt, None)),
                    // A policy's window, a microsecond short, exact or over.
                    2 => (0..3usize, 0..3u64).prop_map(|edge| (0, Some(edge))),
                ],
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
            let us: Vec<(u32, u64)> = policies
                .iter()
                .map(|&(l, s, us)| (l, s * 1_000_000 + if odd_us { us } else { 0 }))
                .collect();
            let given = us
                .iter()
                .map(|&(l, w)| (l, Duration::from_micros(w)))
                .collect();
            rt.block_on(async {
                let (l, key) = connect(given, layout, id).await;
                let mut model = MultiModel::new(&us);
                let mut t = start;
                for (i, ((dt, edge), n)) in ops.into_iter().enumerate() {
                    t += match edge {
                        Some((p, d)) => us[p % us.len()].1 + d - 1,
                        None => dt,
                    };
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
/// multi-policy model with reconfigurations interleaved. A key keeps what
/// every policy set that has called it needs ([`Kept`]): the ring layout
/// the newest admissions up to the largest limit, the sorted set every
/// admission within the longest window. `connect(policies, layout, case)`
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
                let mut model = MultiModel::new(&us).keeping_all();
                let mut kept = Kept::new(layout);
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
                    let want = if reaches {
                        kept.decide(&mut model, t, n)
                    } else {
                        in_nanos(model.decide(t, n))
                    };
                    let got = l.check_n_at_server_time_override(&key, n, t).await.unwrap();
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

/// What a Redis key keeps for the model: the largest limit and the
/// longest window of every policy set that has called it (a call that
/// found the key, or an admission that made it), none before it exists.
/// The ring layout keeps the newest admissions up to that limit, the
/// sorted set every admission within that window.
pub struct Kept {
    layout: Layout,
    needs: Option<(u32, u64)>,
}

impl Kept {
    pub fn new(layout: Layout) -> Kept {
        Kept {
            layout,
            needs: None,
        }
    }

    /// The decision (in nanoseconds) of a call under `model.policies`
    /// (a `keeping_all` model) that reaches Redis, at `t` for `n` units,
    /// after dropping what the key does not keep.
    pub fn decide(
        &mut self,
        model: &mut super::multi::MultiModel,
        t: u64,
        n: u32,
    ) -> super::multi::MultiDecision {
        let largest = model.policies.iter().map(|p| p.0).max().unwrap();
        let longest = model.policies.iter().map(|p| p.1).max().unwrap();
        let grown = self.needs.map_or((largest, longest), |(l, w)| {
            (l.max(largest), w.max(longest))
        });
        match (self.layout, self.needs) {
            (Layout::Ring, Some((size, _))) => model.truncate(size as usize),
            (Layout::Ring, None) => model.truncate(0),
            _ => model.forget_up_to(t.saturating_sub(grown.1)),
        }
        let decision = model.decide(t, n);
        let admitted = matches!(decision, super::multi::MultiDecision::Admitted { .. }) && n > 0;
        if self.needs.is_some() || admitted {
            self.needs = Some(grown);
        }
        in_nanos(decision)
    }
}

/// Two limiters of different policy sets on the same keys (`with_quota`,
/// or replicas on different configurations), calls alternating at random
/// between them at 16-digit Unix microsecond times, against the model with
/// each call judged by its own limiter's policies over everything the key
/// keeps ([`Kept`]); and no window of a length both use holds more
/// admissions than the largest limit of that length. `connect(a, b, layout,
/// case)` builds the two limiters (windows in µs) and the key.
pub fn alternating_policy_sets_equal_the_model<F, Fut>(
    rt: &tokio::runtime::Runtime,
    cases: u32,
    connect: F,
) where
    F: Fn(Vec<(u32, Duration)>, Vec<(u32, Duration)>, Layout, u64) -> Fut,
    Fut: Future<Output = (RedisLimiter, RedisLimiter, String)>,
{
    use super::multi::{MultiDecision, MultiModel, observed_multi};
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    // Windows of whole seconds and some microseconds (so that the keys
    // outlive a case on the server's real clock, and boundaries fall on
    // any microsecond).
    let policies = || {
        prop::collection::vec(
            (1..7u32, 1..30u64, 0..1_000_000u64).prop_map(|(l, s, us)| (l, s * 1_000_000 + us)),
            1..=3,
        )
    };
    let step = (
        any::<bool>(),
        prop_oneof![Just(0u64), 0..1_000u64, 0..3_000_000u64, 0..40_000_000u64],
        0..=4u32,
    );
    let strategy = (
        policies(),
        policies(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(step, 1..120),
    );
    runner
        .run(&strategy, |(a, mut b, share, ring, ops)| {
            // Often a window length in both sets (replicas that differ in
            // a limit only).
            if share {
                b[0].1 = a[0].1;
            }
            let layout = if ring {
                Layout::Ring
            } else {
                Layout::SortedSet
            };
            let id = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let given = |p: &[(u32, u64)]| {
                p.iter()
                    .map(|&(l, w)| (l, Duration::from_micros(w)))
                    .collect()
            };
            rt.block_on(async {
                let (la, lb, key) = connect(given(&a), given(&b), layout, id).await;
                let mut model = MultiModel::new(&a).keeping_all();
                let mut kept = Kept::new(layout);
                // Every admitted unit's time (ns).
                let mut admitted: Vec<u64> = Vec::new();
                let mut t = 1_765_432_109_876_543u64;
                for (on_a, dt, n) in ops {
                    t += dt;
                    let (l, policies) = if on_a { (&la, &a) } else { (&lb, &b) };
                    model.set_policies(policies);
                    let reaches = n <= policies.iter().map(|p| p.0).min().unwrap();
                    let want = if reaches {
                        kept.decide(&mut model, t, n)
                    } else {
                        in_nanos(model.decide(t, n))
                    };
                    let got = l.check_n_at_server_time_override(&key, n, t).await.unwrap();
                    prop_assert_eq!(
                        observed_multi(t * 1_000, got),
                        want,
                        "{:?} t={} n={} on {}: {:?} / {:?}",
                        layout,
                        t,
                        n,
                        if on_a { "a" } else { "b" },
                        &a,
                        &b
                    );
                    if let MultiDecision::Admitted { at, .. } = want {
                        admitted.extend(std::iter::repeat_n(at, n as usize));
                    }
                }
                // A window length both limiters use: no such window holds
                // more than the largest limit of that length.
                for &(_, window) in &a {
                    let limits = a.iter().chain(&b).filter(|p| p.1 == window);
                    let largest = limits.clone().map(|p| p.0).max().unwrap();
                    if b.iter().any(|p| p.1 == window) {
                        let mut times = admitted.clone();
                        let fullest = super::max_in_window(&mut times, window * 1_000);
                        prop_assert!(
                            fullest <= largest as usize,
                            "{:?}: {} in one window of {} µs, limits {:?}",
                            layout,
                            fullest,
                            window,
                            limits.collect::<Vec<_>>()
                        );
                    }
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
