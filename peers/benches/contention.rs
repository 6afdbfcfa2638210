//! One key shared by 2 (and 4) threads: every call admitted, every call
//! denied, and an overloaded key (offered ~100x its limit). Reported as
//! aggregate time per call (wall time / total calls).

// criterion's macros generate undocumented `pub fn`s.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use common::{MutexLog, parallel};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use governor::{Quota, RateLimiter};
use slidelog::{Clock, Limiter, QuantaClock, SlidingCounter};

/// `(name, limit, window)` and the equivalent governor quota.
fn scenario(name: &str) -> (u32, Duration, Quota) {
    match name {
        // 10 per 10 ns: more than the threads can offer.
        "allow" => (
            10,
            Duration::from_nanos(10),
            Quota::with_period(Duration::from_nanos(1))
                .unwrap()
                .allow_burst(NonZeroU32::new(10).unwrap()),
        ),
        // Full for an hour.
        "deny" => (
            10,
            Duration::from_secs(3600),
            Quota::per_hour(NonZeroU32::new(10).unwrap()),
        ),
        // 100 per 100 µs = 1M/s, offered ~100M/s by two threads.
        _ => (
            100,
            Duration::from_micros(100),
            Quota::with_period(Duration::from_micros(1))
                .unwrap()
                .allow_burst(NonZeroU32::new(100).unwrap()),
        ),
    }
}

fn contention(c: &mut Criterion) {
    for case in ["allow", "deny", "overload"] {
        let mut g = c.benchmark_group(format!("contended_{case}"));
        g.throughput(Throughput::Elements(1));
        for threads in [2usize, 4] {
            let (limit, window, quota) = scenario(case);

            let limiter = Arc::new(Limiter::new(limit, window).unwrap());
            if case == "deny" {
                while limiter.check().is_ok() {}
            }
            g.bench_with_input(BenchmarkId::new("slidelog", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&limiter);
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check().is_ok());
                        }
                    })
                })
            });

            let gov = Arc::new(RateLimiter::direct(quota));
            if case == "deny" {
                while gov.check().is_ok() {}
            }
            g.bench_with_input(BenchmarkId::new("governor", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&gov);
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check().is_ok());
                        }
                    })
                })
            });

            let counter = Arc::new(SlidingCounter::new(limit, window, 10).unwrap());
            if case == "deny" {
                while counter.check().is_ok() {}
            }
            g.bench_with_input(BenchmarkId::new("counter", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let l = Arc::clone(&counter);
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check().is_ok());
                        }
                    })
                })
            });

            let clock = QuantaClock::new();
            let log = Arc::new(MutexLog::new(limit, window.as_nanos() as u64));
            if case == "deny" {
                while log.check_at(clock.now()) {}
            }
            g.bench_with_input(BenchmarkId::new("mutex_log", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    let (l, clock) = (Arc::clone(&log), clock.clone());
                    parallel(t, iters, move |_, n| {
                        for _ in 0..n {
                            black_box(l.check_at(clock.now()));
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, contention);
fn main() {
    common::criterion_main(benches);
}
