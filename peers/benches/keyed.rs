//! Keyed: 10k and 1M keys, one thread and two threads on disjoint keys,
//! allow and deny — slidelog on papaya (the exact log and the counter per
//! key) against governor's DashMap store — and a flood of fresh keys
//! (insert + eviction path).

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
use slidelog::{KeyedLimiter, ManualClock};

const LIMIT: u32 = 10;

fn keyed(c: &mut Criterion) {
    for keys in [10_000u64, 1_000_000] {
        for case in ["allow", "deny"] {
            let mut g = c.benchmark_group(format!("keyed_{case}_{}k", keys / 1000));
            g.throughput(Throughput::Elements(1));
            if keys > 10_000 {
                g.sample_size(20);
            }
            // allow: 10 per 10 ns (each key is revisited far later than that);
            // deny: 10 per hour, every key filled first.
            let window = if case == "allow" {
                Duration::from_nanos(10)
            } else {
                Duration::from_secs(3600)
            };
            let quota = if case == "allow" {
                Quota::with_period(Duration::from_nanos(1))
                    .unwrap()
                    .allow_burst(NonZeroU32::new(LIMIT).unwrap())
            } else {
                Quota::per_hour(NonZeroU32::new(LIMIT).unwrap())
            };

            let slide = Arc::new(
                KeyedLimiter::<u64>::builder(LIMIT, window)
                    // Keys are revisited long after a 10 ns window: keep them
                    // (governor's store keeps them too, until retain_recent).
                    .idle_margin(Duration::from_secs(3600))
                    .max_keys(keys as usize * 2)
                    .capacity(keys as usize)
                    .build()
                    .unwrap(),
            );
            // The approximate counter per key, 10 slots, same options.
            let counter = Arc::new(
                KeyedLimiter::<u64>::builder(LIMIT, window)
                    .sliding_counter(10)
                    .idle_margin(Duration::from_secs(3600))
                    .max_keys(keys as usize * 2)
                    .capacity(keys as usize)
                    .build()
                    .unwrap(),
            );
            let gov = Arc::new(RateLimiter::keyed(quota));
            let fill = if case == "deny" { LIMIT } else { 1 };
            for k in 0..keys {
                for _ in 0..fill {
                    let _ = slide.check(&k);
                    let _ = counter.check(&k);
                    let _ = gov.check_key(&k);
                }
            }

            for threads in [1usize, 2] {
                g.bench_with_input(BenchmarkId::new("slidelog", threads), &threads, |b, &t| {
                    b.iter_custom(|iters| {
                        let l = Arc::clone(&slide);
                        parallel(t, iters, move |me, n| {
                            for i in 0..n {
                                black_box(l.check(&key(i, me, t, keys)).is_ok());
                            }
                        })
                    })
                });
                g.bench_with_input(BenchmarkId::new("counter", threads), &threads, |b, &t| {
                    b.iter_custom(|iters| {
                        let l = Arc::clone(&counter);
                        parallel(t, iters, move |me, n| {
                            for i in 0..n {
                                black_box(l.check(&key(i, me, t, keys)).is_ok());
                            }
                        })
                    })
                });
                g.bench_with_input(BenchmarkId::new("governor", threads), &threads, |b, &t| {
                    b.iter_custom(|iters| {
                        let l = Arc::clone(&gov);
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
}

/// Every call a key never seen before; keys go idle and are evicted (slidelog:
/// automatically, capped at 100k keys; governor: `retain_recent` every 64k).
fn flood(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_flood");
    g.throughput(Throughput::Elements(1));
    let clock = ManualClock::new();
    let slide = KeyedLimiter::<u64>::builder(LIMIT, Duration::from_millis(1))
        .clock(clock.clone())
        .max_keys(100_000)
        .build()
        .unwrap();
    let mut next = 0u64;
    g.bench_function("slidelog", |b| {
        b.iter(|| {
            next += 1;
            if next.is_multiple_of(16) {
                clock.advance(Duration::from_micros(1));
            }
            black_box(slide.check(&next).is_ok())
        })
    });
    let gov = RateLimiter::keyed(Quota::with_period(Duration::from_micros(100)).unwrap());
    let mut next = 0u64;
    g.bench_function("governor", |b| {
        b.iter(|| {
            next += 1;
            if next.is_multiple_of(65_536) {
                gov.retain_recent();
            }
            black_box(gov.check_key(&next).is_ok())
        })
    });
    g.finish();
}

/// The keyed row as a new user writes it: `KeyedLimiter::<u64>::new(10,
/// 1 µs)` with the **default** idle margin, one thread cycling over 10,000
/// keys on the real clock (each key comes back long after it went idle),
/// against governor with the same quota. Sweeps wait for memory pressure,
/// so a revisit finds its key rather than evicting and re-creating it.
fn keyed_default_margin(c: &mut Criterion) {
    let keys = 10_000u64;
    let mut g = c.benchmark_group("keyed_allow_default_margin_10k");
    g.throughput(Throughput::Elements(1));
    let slide = KeyedLimiter::<u64>::new(LIMIT, Duration::from_micros(1)).unwrap();
    let gov = RateLimiter::keyed(
        Quota::with_period(Duration::from_nanos(100))
            .unwrap()
            .allow_burst(NonZeroU32::new(LIMIT).unwrap()),
    );
    for k in 0..keys {
        let _ = slide.check(&k);
        let _ = gov.check_key(&k);
    }
    let mut i = 0u64;
    g.bench_function("slidelog", |b| {
        b.iter(|| {
            i += 1;
            black_box(slide.check(&key(i, 0, 1, keys)).is_ok())
        })
    });
    let mut i = 0u64;
    g.bench_function("governor", |b| {
        b.iter(|| {
            i += 1;
            black_box(gov.check_key(&key(i, 0, 1, keys)).is_ok())
        })
    });
    g.finish();
}

criterion_group!(benches, keyed, flood, keyed_default_margin);
fn main() {
    common::criterion_main(benches);
}
