//! The hot-path scenarios as criterion groups, slidelog against governor with
//! the same quotas, at a small limit (10) and a large one (2^20 in 1 µs),
//! and the keyed rows with the default idle margin, a long margin and keys
//! revisited only after they went idle. (Ratios to compare against the
//! targets come from `benches/side_by_side.rs`, which alternates the
//! contenders in one process; these groups run one after the other.)

// criterion's macros generate undocumented `pub fn`s.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use common::{key, parallel};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use governor::{Quota, RateLimiter};
use slidelog::{KeyedLimiter, Limiter};

fn quota(limit: u32, deny: bool) -> Quota {
    if deny {
        Quota::per_hour(NonZeroU32::new(limit).unwrap())
    } else {
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(NonZeroU32::new(limit).unwrap())
    }
}

/// One key: allow at L = 10 (W = 100 ns) and L = 2^20 (W = 1 µs), deny at
/// 10 per hour, on 1 and 2 threads.
fn single_key(c: &mut Criterion) {
    for (case, limit, window, deny) in [
        ("allow_L10", 10u32, Duration::from_nanos(100), false),
        ("allow_L2^20", 1 << 20, Duration::from_micros(1), false),
        ("deny_L10", 10, Duration::from_secs(3600), true),
    ] {
        let mut g = c.benchmark_group(format!("scenario_{case}"));
        g.throughput(Throughput::Elements(1));
        for threads in [1usize, 2] {
            let ours = Arc::new(Limiter::new(limit, window).unwrap());
            let theirs = Arc::new(RateLimiter::direct(quota(limit, deny)));
            if deny {
                while ours.check().is_ok() {}
                while theirs.check().is_ok() {}
            }
            g.bench_with_input(BenchmarkId::new("slidelog", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&ours);
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check().is_ok());
                        }
                    })
                })
            });
            g.bench_with_input(
                BenchmarkId::new("slidelog_admit", threads),
                &threads,
                |b, &t| {
                    b.iter_custom(|iters| {
                        let l = Arc::clone(&ours);
                        parallel(t, iters, move |_, n| {
                            for _ in 0..n {
                                black_box(l.admit().is_ok());
                            }
                        })
                    })
                },
            );
            g.bench_with_input(BenchmarkId::new("governor", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&theirs);
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check().is_ok());
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

/// Keyed, 10 per 1 µs: 10k keys with the default idle margin (1 and 2
/// threads on disjoint keys) and with a one-hour margin, and 1M keys, each
/// revisited only long after it went idle.
fn keyed(c: &mut Criterion) {
    let window = Duration::from_micros(1);
    for (case, keys, margin) in [
        ("keyed_10k_default_margin", 10_000u64, None),
        (
            "keyed_10k_long_margin",
            10_000,
            Some(Duration::from_secs(3600)),
        ),
        ("keyed_revisit_after_idle_1M", 1_000_000, None),
    ] {
        let mut g = c.benchmark_group(format!("scenario_{case}"));
        g.throughput(Throughput::Elements(1));
        if keys > 10_000 {
            g.sample_size(20);
        }
        let mut builder = KeyedLimiter::<u64>::builder(10, window);
        if let Some(margin) = margin {
            builder = builder.idle_margin(margin);
        }
        let ours = Arc::new(builder.build().unwrap());
        let theirs = Arc::new(RateLimiter::keyed(
            Quota::with_period(Duration::from_nanos(100))
                .unwrap()
                .allow_burst(NonZeroU32::new(10).unwrap()),
        ));
        for k in 0..keys {
            let _ = ours.check(&k);
            let _ = theirs.check_key(&k);
        }
        let thread_counts: &[usize] = if keys > 10_000 { &[1] } else { &[1, 2] };
        for &threads in thread_counts {
            g.bench_with_input(BenchmarkId::new("slidelog", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&ours);
                    parallel(t, iters, move |me, n| {
                        for i in 0..n {
                            black_box(l.check(&key(i, me, t, keys)).is_ok());
                        }
                    })
                })
            });
            g.bench_with_input(
                BenchmarkId::new("slidelog_admit", threads),
                &threads,
                |b, &t| {
                    b.iter_custom(|iters| {
                        let l = Arc::clone(&ours);
                        parallel(t, iters, move |me, n| {
                            for i in 0..n {
                                black_box(l.admit(&key(i, me, t, keys)).is_ok());
                            }
                        })
                    })
                },
            );
            g.bench_with_input(BenchmarkId::new("governor", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&theirs);
                    parallel(t, iters, move |me, n| {
                        for i in 0..n {
                            black_box(l.check_key(&key(i, me, t, keys)).is_ok());
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, single_key, keyed);
fn main() {
    common::criterion_main(benches);
}
