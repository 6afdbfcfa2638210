//! `slidelog bench`: the one-minute side-by-side of the crate's limiters and
//! a `Mutex<VecDeque>` log on this machine, printed as ratios. Criterion
//! (`cargo bench`) remains the reference.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use slidelog::{Clock, Limiter, ManualClock, QuantaClock, RateLimit, SlidingCounter};

use super::mutex_log::MutexLog;
use super::progress::{Progress, Unit};

/// Measurements `run` makes: 6 single-key cases x 3 limiters, 3 keyed cases
/// x 2, 2 references.
const STEPS: u32 = 26;

/// Nanoseconds per call of `f` run on `threads` threads for about `budget`,
/// as aggregate wall time / total calls; the median of three rounds.
fn measure<F>(threads: usize, budget: Duration, f: F) -> f64
where
    F: Fn() + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let mut rounds: Vec<f64> = (0..3)
        .map(|_| {
            let barrier = Arc::new(Barrier::new(threads));
            let start = Instant::now();
            let calls: u64 = (0..threads)
                .map(|_| {
                    let (f, barrier) = (Arc::clone(&f), Arc::clone(&barrier));
                    thread::spawn(move || {
                        barrier.wait();
                        let begin = Instant::now();
                        let mut calls = 0u64;
                        while begin.elapsed() < budget / 3 {
                            for _ in 0..256 {
                                f();
                            }
                            calls += 256;
                        }
                        calls
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .sum();
            start.elapsed().as_nanos() as f64 / calls.max(1) as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[1]
}

pub(crate) fn run(seconds: f64, threads: usize) -> Result<(), String> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 3600.0) {
        return Err(format!(
            "--seconds must be more than 0 and less than 3600 (got {seconds})"
        ));
    }
    if threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    crate::demo::check_threads(threads)?;
    // 26 measurements share the budget (each runs three rounds of a third),
    // less a tenth for setting up the limiters and threads.
    let started = Instant::now();
    let budget = Duration::from_secs_f64(seconds * 0.9 / f64::from(STEPS));
    let clock = QuantaClock::new();
    // 6 single-key cases x 3 limiters, 3 keyed cases x 2, 2 references.
    let mut progress = Progress::new("bench", Some(u64::from(STEPS)), Unit::Steps);
    let mut step = 0u64;
    let mut done = |progress: &mut Progress, what: &str| {
        step += 1;
        progress.update(step, || format!("{step}/{STEPS} {what}"));
    };
    println!(
        "slidelog bench: ns per call (lower is better) and ratio to the Mutex<VecDeque> log; {threads} {} for the contended rows",
        if threads == 1 { "thread" } else { "threads" }
    );
    println!("CPU: {}", super::cpu::cpu_model());
    println!(
        "{:<24} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "case", "log", "counter", "mutex log", "log/mutex", "counter/mutex"
    );
    // `admit`: the decision without the count of `remaining`.
    for (case, limit, window, t, admit) in [
        (
            "allow, 1 thread",
            10u32,
            Duration::from_nanos(10),
            1usize,
            false,
        ),
        (
            "allow (admit), 1 thread",
            10,
            Duration::from_nanos(10),
            1,
            true,
        ),
        ("deny, 1 thread", 10, Duration::from_secs(3600), 1, false),
        (
            "allow, contended",
            10,
            Duration::from_nanos(10),
            threads,
            false,
        ),
        (
            "deny, contended",
            10,
            Duration::from_secs(3600),
            threads,
            false,
        ),
        (
            "overloaded, contended",
            100,
            Duration::from_micros(100),
            threads,
            false,
        ),
    ] {
        let log = Arc::new(Limiter::new(limit, window).map_err(|e| e.to_string())?);
        let counter = Arc::new(SlidingCounter::new(limit, window, 10).map_err(|e| e.to_string())?);
        let mutex = Arc::new(MutexLog::new(limit, window.as_nanos() as u64));
        if window > Duration::from_secs(1) {
            while log.check().is_ok() {}
            while counter.check().is_ok() {}
            while mutex.check_at(clock.now()) {}
        }
        let a = measure(t, budget, {
            let l = Arc::clone(&log);
            move || {
                black_box(if admit {
                    l.admit().is_ok()
                } else {
                    l.check().is_ok()
                });
            }
        });
        done(&mut progress, case);
        let b = measure(t, budget, {
            let c = Arc::clone(&counter);
            move || {
                black_box(if admit {
                    c.admit().is_ok()
                } else {
                    RateLimit::check(&*c).is_ok()
                });
            }
        });
        done(&mut progress, case);
        let m = measure(t, budget, {
            let (m, clock) = (Arc::clone(&mutex), clock.clone());
            move || {
                black_box(m.check_at(clock.now()));
            }
        });
        done(&mut progress, case);
        progress.println(&format!(
            "{case:<24} {a:>12.1} {b:>12.1} {m:>12.1} {:>12.2} {:>12.2}",
            a / m,
            b / m
        ));
    }
    // Per key: `KeyedLimiter::<u64>::new(10, 1 µs)` as a new user writes it
    // (default idle margin), each thread cycling over its own 5,000 keys; and
    // keys revisited only after they went idle (each check finds its key
    // idle: the revisit path).
    progress.println("");
    progress.println(&format!(
        "{:<40} {:>12} {:>12}",
        "keyed (10 per 1 us, default margin)", "log", "counter"
    ));
    for (case, t, keys) in [
        ("allow, 10k keys, 1 thread", 1usize, 10_000u64),
        ("allow, 10k keys, disjoint threads", threads, 10_000),
        ("revisit after idle, 1M keys, 1 thread", 1, 1_000_000),
    ] {
        let window = Duration::from_micros(1);
        let log =
            Arc::new(slidelog::KeyedLimiter::<u64>::new(10, window).map_err(|e| e.to_string())?);
        let counter = Arc::new(
            slidelog::KeyedCounter::<u64>::counter(10, window, 10).map_err(|e| e.to_string())?,
        );
        let per_thread = keys / t as u64;
        let a = measure(t, budget, {
            let l = Arc::clone(&log);
            move || {
                let k = next_key(per_thread, t);
                black_box(l.check(&k).is_ok());
            }
        });
        done(&mut progress, case);
        let b = measure(t, budget, {
            let c = Arc::clone(&counter);
            move || {
                let k = next_key(per_thread, t);
                black_box(c.check(&k).is_ok());
            }
        });
        done(&mut progress, case);
        progress.println(&format!("{case:<40} {a:>12.1} {b:>12.1}"));
    }
    // The clock's share, for reference.
    let manual = Arc::new(
        Limiter::with_clock(10, Duration::from_secs(3600), ManualClock::new())
            .map_err(|e| e.to_string())?,
    );
    while manual.check_at(0).is_ok() {}
    let deny_at = measure(1, budget, move || {
        black_box(manual.check_at(black_box(1)).is_err());
    });
    done(&mut progress, "references");
    let quanta = measure(1, budget, move || {
        black_box(clock.now());
    });
    done(&mut progress, "references");
    progress.finish();
    println!();
    println!(
        "for reference: deny with the time passed in {deny_at:.1} ns; one quanta clock read {quanta:.1} ns"
    );
    println!("criterion benches (cargo bench) are the reference; see BENCHMARKS.md");
    println!(
        "took {:.1} s of the {seconds} s asked",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

std::thread_local! {
    /// This thread's position in its key cycle, and its key range.
    static CURSOR: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, u64::MAX)) };
}

/// The next key of this thread's own range of `per_thread` keys (the
/// `threads` threads of a round get disjoint ranges, the same ones every
/// round; keys spread by a multiplicative hash).
fn next_key(per_thread: u64, threads: usize) -> u64 {
    static NEXT_BASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    CURSOR.with(|c| {
        let (i, base) = c.get();
        let base = if base == u64::MAX {
            NEXT_BASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % threads as u64
                * per_thread
        } else {
            base
        };
        c.set((i + 1, base));
        base + i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % per_thread.max(1)
    })
}
