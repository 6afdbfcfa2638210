//! One key, one thread: allow path, deny path and `check_n(4)`, with the
//! default clock and with the time passed in, against governor and the
//! `Mutex<VecDeque>` log under the same quotas; and what building a limiter
//! costs.

// criterion's macros generate undocumented `pub fn`s.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use common::MutexLog;
use criterion::{Criterion, Throughput, criterion_group};
use governor::{Quota, RateLimiter};
use slidelog::{Clock, Limiter, ManualClock, QuantaClock, SlidingCounter};

/// Allow path: every call admitted. A limit of 10 per 10 ns with time moving
/// at least 1 ns per call (`check_at`) or at the real clock's pace.
fn allow(c: &mut Criterion) {
    let mut g = c.benchmark_group("allow");
    g.throughput(Throughput::Elements(1));

    let limiter = Limiter::new(10, Duration::from_nanos(10)).unwrap();
    g.bench_function("slidelog/clock", |b| {
        b.iter(|| black_box(limiter.check().is_ok()))
    });

    let limiter = Limiter::with_clock(10, Duration::from_nanos(10), ManualClock::new()).unwrap();
    let mut t = 0u64;
    g.bench_function("slidelog/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(limiter.check_at(black_box(t)).is_ok())
        })
    });

    let gov = RateLimiter::direct(
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(NonZeroU32::new(10).unwrap()),
    );
    g.bench_function("governor/clock", |b| {
        b.iter(|| black_box(gov.check().is_ok()))
    });

    // 10 slots of 1 ns: nearly every admission opens a new slot (archive +
    // head move), the counter's slowest admission path.
    let counter = SlidingCounter::new(10, Duration::from_nanos(10), 10).unwrap();
    g.bench_function("counter/clock", |b| {
        b.iter(|| black_box(counter.check().is_ok()))
    });
    let counter =
        SlidingCounter::with_clock(10, Duration::from_nanos(10), 10, ManualClock::new()).unwrap();
    let mut t = 0u64;
    g.bench_function("counter/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(counter.check_at(black_box(t)).is_ok())
        })
    });

    let log = MutexLog::new(10, 10);
    let clock = QuantaClock::new();
    g.bench_function("mutex_log/clock", |b| {
        b.iter(|| black_box(log.check_at(clock.now())))
    });
    let mut t = 0u64;
    let log = MutexLog::new(10, 10);
    g.bench_function("mutex_log/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(log.check_at(black_box(t)))
        })
    });
    g.finish();
}

/// Deny path: the window is full for an hour.
fn deny(c: &mut Criterion) {
    let mut g = c.benchmark_group("deny");
    g.throughput(Throughput::Elements(1));

    let limiter = Limiter::new(10, Duration::from_secs(3600)).unwrap();
    while limiter.check().is_ok() {}
    g.bench_function("slidelog/clock", |b| {
        b.iter(|| black_box(limiter.check().is_err()))
    });

    let limiter = Limiter::with_clock(10, Duration::from_secs(3600), ManualClock::new()).unwrap();
    while limiter.check_at(0).is_ok() {}
    let mut t = 0u64;
    g.bench_function("slidelog/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(limiter.check_at(black_box(t)).is_err())
        })
    });

    let gov = RateLimiter::direct(Quota::per_hour(NonZeroU32::new(10).unwrap()));
    while gov.check().is_ok() {}
    g.bench_function("governor/clock", |b| {
        b.iter(|| black_box(gov.check().is_err()))
    });

    let counter = SlidingCounter::new(10, Duration::from_secs(3600), 10).unwrap();
    while counter.check().is_ok() {}
    g.bench_function("counter/clock", |b| {
        b.iter(|| black_box(counter.check().is_err()))
    });
    let counter =
        SlidingCounter::with_clock(10, Duration::from_secs(3600), 10, ManualClock::new()).unwrap();
    while counter.check_at(0).is_ok() {}
    let mut t = 0u64;
    g.bench_function("counter/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(counter.check_at(black_box(t)).is_err())
        })
    });

    let log = MutexLog::new(10, 3_600_000_000_000);
    let clock = QuantaClock::new();
    while log.check_at(clock.now()) {}
    g.bench_function("mutex_log/clock", |b| {
        b.iter(|| black_box(!log.check_at(clock.now())))
    });
    g.finish();
}

/// Weighted: `check_n(4)` admitted every call.
fn check_n(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_n4");
    g.throughput(Throughput::Elements(1));
    let four = NonZeroU32::new(4).unwrap();

    let limiter = Limiter::with_clock(16, Duration::from_nanos(4), ManualClock::new()).unwrap();
    let mut t = 0u64;
    g.bench_function("slidelog/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(limiter.check_n_at(4, black_box(t)).is_ok())
        })
    });
    let limiter = Limiter::new(16, Duration::from_nanos(4)).unwrap();
    g.bench_function("slidelog/clock", |b| {
        b.iter(|| black_box(limiter.check_n(4).is_ok()))
    });

    let gov = RateLimiter::direct(
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(NonZeroU32::new(16).unwrap()),
    );
    g.bench_function("governor/clock", |b| {
        b.iter(|| black_box(gov.check_n(four).is_ok()))
    });

    let log = MutexLog::new(16, 4);
    let mut t = 0u64;
    g.bench_function("mutex_log/check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(log.check_n_at(4, black_box(t)))
        })
    });
    g.finish();
}

/// The clock alone, for reference.
fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    g.throughput(Throughput::Elements(1));
    let clock = QuantaClock::new();
    g.bench_function("quanta/now", |b| b.iter(|| black_box(clock.now())));
    let (recent, _upkeep) = QuantaClock::recent(Duration::from_millis(1)).unwrap();
    g.bench_function("quanta/recent", |b| b.iter(|| black_box(recent.now())));
    g.finish();
}

/// Building a limiter, against building governor's (each builds a clock:
/// ours clones the process's quanta clock, governor's `direct` builds a
/// quanta clock, whose `CPUID` traps to the hypervisor on a VM).
fn build(c: &mut Criterion) {
    let mut g = c.benchmark_group("build");
    g.throughput(Throughput::Elements(1));
    g.bench_function("slidelog/QuantaClock::new", |b| {
        b.iter(|| black_box(QuantaClock::new()))
    });
    g.bench_function("slidelog/Limiter::new", |b| {
        b.iter(|| black_box(Limiter::new(10, Duration::from_secs(1)).unwrap()))
    });
    let quota = Quota::per_second(NonZeroU32::new(10).unwrap());
    g.bench_function("governor/direct", |b| {
        b.iter(|| black_box(RateLimiter::direct(quota)))
    });
    g.finish();
}

criterion_group!(benches, allow, deny, check_n, clocks, build);
fn main() {
    common::criterion_main(benches);
}
