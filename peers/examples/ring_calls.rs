//! Makes `N` calls of one kind with the time passed in (a manual clock, no
//! clock read): the deterministic measure of a call's instructions
//! (BENCHMARKS.md, "Where the time goes"). Count `N` calls and none under
//! callgrind; the difference over `N` is one call's:
//!
//! ```sh
//! cargo build --release -p slidelog-peers --example ring_calls
//! count() { # one run's instructions, quanta's clock calibration left out
//!   valgrind --tool=callgrind --callgrind-out-file=cg.out "$@" >/dev/null 2>&1
//!   total=$(callgrind_annotate cg.out | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
//!   calib=$(callgrind_annotate --inclusive=yes cg.out |
//!     awk '/OnceCell<T>::initialize \[/ {gsub(",", "", $1); print $1; exit}')
//!   echo $((total - ${calib:-0}))
//! }
//! echo $(( ($(count target/release/examples/ring_calls allow-big check 200000) - $(count target/release/examples/ring_calls allow-big check 0)) / 200000 ))
//! ```
//!
//! The calibration (the largest `OnceCell<T>::initialize`, quanta's
//! global clock) loops until the TSC reads steadily, so its count moves
//! from run to run by up to tens of instructions per call at this `N`;
//! left in, it reads as a change that is not there (BENCHMARKS.md, "Over
//! HTTP").
//!
//! Scenarios (each with `check` or `admit`; the `governor-…` ones call
//! governor's `check` either way): `allow-small` (L = 10, W = 100 ns, a call every 20 ns),
//! `allow-expired` (L = 10, W = 10 ns, a call every 20 ns: every earlier admission has expired,
//! as in `side_by_side`'s one-thread row at L = 10),
//! `allow-big` (L = 2^20, W = 1 µs), `deny` (10 per hour, full),
//! `policies` (three policies on one ring: 10 per 100 ns, 100 per 1 µs,
//! 1,000 per 10 µs, a call every 15 ns) and `policies-deny` (10 per second,
//! 100 per minute, 1,000 per hour, the first full), `keyed-policies` and
//! `keyed-policies-deny` (the same on one key of a `KeyedLimiter`),
//! `weighted` (`check_n(4)`, or `admit_n(4)`: L = 1,000, W = 1 µs, a call
//! every 20 ns) and `weighted-deny` (10 per hour, full), `keyed`
//! (10,000 keys, L = 10, W = 1 µs, keys in a scattered order; `KEYS`
//! overrides the count), `keyed-deny` (every key full) and `keyed-live`
//! (the same keys at W = 60 µs and a call every 2 ns: a key's few
//! admissions still alive when it comes back, their number varying),
//! `keyed-std` and `keyed-deny-std` (`keyed` and `keyed-deny` with a
//! `RandomState` given as the hasher: std's own SipHash code, where the
//! default computes the same function with the `siphasher` crate), and
//! `governor-allow`, `governor-deny`, `governor-keyed`,
//! `governor-keyed-deny`, `governor-weighted` (`check_n(4)`, burst 1,000
//! refilled one per nanosecond) and `governor-weighted-deny` with the same
//! quotas. Run without valgrind it
//! prints how many calls were admitted and the time per call (the calls
//! alone: setup such as filling the keys is not timed).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use slidelog::{KeyedLimiter, Limiter, ManualClock};

#[path = "common/args.rs"]
mod args;
#[path = "../benches/common/mod.rs"]
mod common;

const USAGE: &str = "usage: ring_calls <allow-small|allow-expired|allow-big|deny|policies|policies-deny|keyed-policies|keyed-policies-deny|weighted|weighted-deny|keyed|keyed-deny|keyed-live|keyed-std|keyed-deny-std|governor-allow|governor-weighted|governor-weighted-deny|governor-deny|governor-keyed|governor-keyed-deny> <check|admit> <calls>";

/// The first reading: far from the clock's start, as a running process's.
const T0: u64 = 1 << 55;

/// The `i`-th call's key among `keys`, in an order unrelated to creation
/// (the benches' [`common::scatter`]).
fn key(i: u64, keys: u64) -> u64 {
    common::scatter(i, keys)
}

/// `calls` calls of `call(i)`: how many were admitted, and how long the
/// calls took (the scenario's setup, such as filling 10,000 keys, is not
/// timed).
fn repeat(calls: u64, mut call: impl FnMut(u64) -> bool) -> (u64, Duration) {
    let start = Instant::now();
    let admitted = (0..calls).map(|i| u64::from(black_box(call(i)))).sum();
    (admitted, start.elapsed())
}

/// Fills the limiter at `T0` through `admit_at` when `deny`, then makes
/// `calls` calls at `t(i)` through `admit_at` or `check_at`.
fn fill_then_repeat(
    deny: bool,
    admit: bool,
    calls: u64,
    admit_at: impl Fn(u64) -> bool,
    check_at: impl Fn(u64) -> bool,
    t: impl Fn(u64) -> u64,
) -> (u64, Duration) {
    if deny {
        while admit_at(T0) {}
    }
    if admit {
        repeat(calls, |i| admit_at(t(i)))
    } else {
        repeat(calls, |i| check_at(t(i)))
    }
}

/// governor's quota of 10: per hour (`deny`), or one per `period` with
/// bursts of 10.
fn governor_quota(deny: bool, period: Duration) -> Result<Quota, String> {
    let ten = NonZeroU32::new(10).expect("10 > 0");
    Ok(if deny {
        Quota::per_hour(ten)
    } else {
        Quota::with_period(period)
            .ok_or("a valid period")?
            .allow_burst(ten)
    })
}

fn main() {
    args::exit_on_error(run);
}

fn run() -> Result<(), String> {
    let (scenario, admit, calls) = args::what_op_count(USAGE, ["check", "admit"], "calls")?;
    let op = if admit { "admit" } else { "check" };
    let keys: u64 = match std::env::var("KEYS") {
        Ok(k) => k.parse().map_err(|_| format!("KEYS={k}: not a number"))?,
        Err(_) => 10_000,
    };
    let hour = Duration::from_secs(3600);
    let (admitted, took) = match scenario.as_str() {
        "allow-small" | "allow-expired" | "allow-big" | "deny" => {
            let (limit, window, step) = match scenario.as_str() {
                "allow-small" => (10, Duration::from_nanos(100), 20),
                "allow-expired" => (10, Duration::from_nanos(10), 20),
                "allow-big" => (1 << 20, Duration::from_micros(1), 20),
                _ => (10, hour, 1),
            };
            let l = Limiter::with_clock(limit, window, ManualClock::new())
                .map_err(|e| e.to_string())?;
            if scenario == "deny" {
                for i in 0..10 {
                    l.check_at(T0 + i).map_err(|e| e.to_string())?;
                }
            }
            let t = |i: u64| T0 + 100 + i * step;
            if admit {
                repeat(calls, |i| l.admit_at(t(i)).is_ok())
            } else {
                repeat(calls, |i| black_box(l.check_at(t(i))).is_ok())
            }
        }
        "policies" | "policies-deny" | "keyed-policies" | "keyed-policies-deny" => {
            // Three policies on one ring of 1,000 slots: allowing, 10 per
            // 100 ns, 100 per 1 us and 1,000 per 10 us at a call every 15
            // ns (about 7, 67 and 667 alive: each policy's count has work);
            // denying, 10 per second, 100 per minute and 1,000 per hour,
            // the first full.
            let deny = scenario.ends_with("-deny");
            let ns = Duration::from_nanos;
            let [a, b, c] = if deny {
                [
                    (10, ns(1_000_000_000)),
                    (100, ns(60_000_000_000)),
                    (1_000, hour),
                ]
            } else {
                [(10, ns(100)), (100, ns(1_000)), (1_000, ns(10_000))]
            };
            let t = |i: u64| T0 + 100 + i * 15;
            // The same three policies on either builder.
            macro_rules! three_policies {
                ($builder:expr) => {
                    $builder
                        .and(b.0, b.1)
                        .and(c.0, c.1)
                        .clock(ManualClock::new())
                        .build()
                        .map_err(|e| e.to_string())?
                };
            }
            if scenario.starts_with("keyed") {
                let l = three_policies!(KeyedLimiter::<u64>::builder(a.0, a.1));
                fill_then_repeat(
                    deny,
                    admit,
                    calls,
                    |at| l.admit_at(&7, at).is_ok(),
                    |at| black_box(l.check_at(&7, at)).is_ok(),
                    t,
                )
            } else {
                let l = three_policies!(Limiter::builder(a.0, a.1));
                fill_then_repeat(
                    deny,
                    admit,
                    calls,
                    |at| l.admit_at(at).is_ok(),
                    |at| black_box(l.check_at(at)).is_ok(),
                    t,
                )
            }
        }
        "weighted" | "weighted-deny" => {
            // Four units a call: L = 1,000, W = 1 us, a call every 20 ns
            // (about 200 units alive), or 10 per hour, full.
            let deny = scenario == "weighted-deny";
            let (limit, window) = if deny {
                (10, hour)
            } else {
                (1_000, Duration::from_micros(1))
            };
            let l = Limiter::with_clock(limit, window, ManualClock::new())
                .map_err(|e| e.to_string())?;
            if deny {
                l.check_n_at(10, T0).map_err(|e| e.to_string())?;
            }
            let t = |i: u64| T0 + 100 + i * 20;
            if admit {
                repeat(calls, |i| l.admit_n_at(4, t(i)).is_ok())
            } else {
                repeat(calls, |i| black_box(l.check_n_at(4, t(i))).is_ok())
            }
        }
        "keyed" | "keyed-deny" | "keyed-live" | "keyed-std" | "keyed-deny-std" => {
            let (window, fill, step) = match scenario.as_str() {
                "keyed-deny" | "keyed-deny-std" => (hour, 10, 1),
                // A key comes back every 20 µs on average, at irregular
                // gaps: one to five admissions alive in its window of
                // 60 µs, more or fewer from call to call.
                "keyed-live" => (Duration::from_micros(60), 1, 2),
                _ => (Duration::from_micros(1), 1, 20),
            };
            // The keys filled, then the calls, on a limiter of either hasher.
            macro_rules! fill_and_call {
                ($limiter:expr) => {{
                    let l = $limiter.map_err(|e| e.to_string())?;
                    for k in 0..keys {
                        for _ in 0..fill {
                            let _ = l.check_at(&k, T0);
                        }
                    }
                    let t = |i: u64| T0 + 1 + i * step;
                    if admit {
                        repeat(calls, |i| l.admit_at(&key(i, keys), t(i)).is_ok())
                    } else {
                        repeat(calls, |i| {
                            black_box(l.check_at(&key(i, keys), t(i))).is_ok()
                        })
                    }
                }};
            }
            if scenario.ends_with("-std") {
                // A `RandomState` given: std's own SipHash code (the
                // default computes the same function with `siphasher`).
                fill_and_call!(
                    KeyedLimiter::<u64>::builder(10, window)
                        .clock(ManualClock::new())
                        .hasher(std::collections::hash_map::RandomState::new())
                        .build()
                )
            } else {
                fill_and_call!(KeyedLimiter::<u64, ManualClock>::with_clock(
                    10,
                    window,
                    ManualClock::new()
                ))
            }
        }
        "governor-weighted" | "governor-weighted-deny" => {
            let clock = FakeRelativeClock::default();
            let deny = scenario == "governor-weighted-deny";
            let thousand = NonZeroU32::new(if deny { 10 } else { 1_000 }).expect("> 0");
            let quota = if deny {
                Quota::per_hour(thousand)
            } else {
                Quota::with_period(Duration::from_nanos(1))
                    .ok_or("a valid period")?
                    .allow_burst(thousand)
            };
            let g = RateLimiter::direct_with_clock(quota, clock.clone());
            let four = NonZeroU32::new(4).expect("4 > 0");
            if deny {
                let _ = g.check_n(thousand);
            }
            repeat(calls, |_| {
                if !deny {
                    clock.advance(Duration::from_nanos(20));
                }
                black_box(g.check_n(four)).is_ok_and(|r| r.is_ok())
            })
        }
        "governor-allow" | "governor-deny" => {
            let clock = FakeRelativeClock::default();
            let deny = scenario == "governor-deny";
            let quota = governor_quota(deny, Duration::from_nanos(10))?;
            let g = RateLimiter::direct_with_clock(quota, clock.clone());
            if deny {
                for _ in 0..10 {
                    let _ = g.check();
                }
            }
            repeat(calls, |_| {
                if !deny {
                    clock.advance(Duration::from_nanos(20));
                }
                black_box(g.check()).is_ok()
            })
        }
        "governor-keyed" | "governor-keyed-deny" => {
            let clock = FakeRelativeClock::default();
            let deny = scenario == "governor-keyed-deny";
            let quota = governor_quota(deny, Duration::from_nanos(100))?;
            let g = RateLimiter::dashmap_with_clock(quota, clock.clone());
            for k in 0..keys {
                for _ in 0..(if deny { 10 } else { 1 }) {
                    let _ = g.check_key(&k);
                }
            }
            repeat(calls, |i| {
                if !deny {
                    clock.advance(Duration::from_nanos(20));
                }
                black_box(g.check_key(&key(i, keys))).is_ok()
            })
        }
        _ => return Err(USAGE.into()),
    };
    let per = took.as_nanos() as f64 / calls.max(1) as f64;
    println!(
        "{scenario} {op}: {admitted} of {calls} admitted; {per:.1} ns per call on {}",
        common::cpu_model()
    );
    Ok(())
}
