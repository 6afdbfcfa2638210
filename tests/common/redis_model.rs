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
