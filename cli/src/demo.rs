//! `slidelog demo`: threads against one limiter, then against many keys,
//! each admission kept and the windows counted afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use slidelog::algorithm::Algorithm;
use slidelog::{KeyedLimiter, Limiter, RateLimit, SlidingCounter};

use crate::args::{Algo, DemoArgs};
use crate::progress;
use crate::redis_demo;

fn redis_demo(args: &DemoArgs, url: &str) -> Result<(), String> {
    // Redis's clock has microseconds: a window below 10 ms says little.
    let window = if args.window == DemoArgs::default().window {
        Duration::from_millis(100)
    } else {
        args.window
    };
    let clients = args.threads.unwrap_or(4);
    check_threads(clients)?;
    redis_demo::run(&redis_demo::Options {
        url,
        clients,
        limit: args.limit,
        window,
        duration: args.duration,
    })
}

/// What one phase measured.
struct Report {
    checks: u64,
    admitted: u64,
    elapsed: Duration,
    /// The most admissions of one key in any window `(t - W, t]`.
    max_in_window: usize,
    /// What the phase is judged on: `max_in_window` for the log, the most
    /// admissions of one key in any `N` consecutive slots for the counter.
    judged: usize,
}

pub(crate) fn demo(args: &DemoArgs) -> Result<(), String> {
    // A limit or window no limiter takes is refused before a banner names it.
    slidelog::Quota::new(args.limit, args.window).map_err(|e| e.to_string())?;
    if let Some(url) = &args.redis {
        return redis_demo(args, url);
    }
    let threads = args.threads.unwrap_or_else(|| {
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2)
    });
    if threads == 0 || args.keys == 0 {
        return Err("--threads and --keys must be at least 1".into());
    }
    check_threads(threads)?;
    let clock = checked_clock(DEFAULT_MAX_CLOCK_SKEW, "slidelog demo");
    let window_ns = args.window.as_nanos() as u64;
    println!(
        "slidelog demo: {threads} {}, limit {} per {:?}, {:?} per phase",
        if threads == 1 { "thread" } else { "threads" },
        args.limit,
        args.window,
        args.duration
    );

    // The one-key limiter and the bytes it measures itself to hold; the
    // counter's slot width (its guarantee is per run of N slots).
    let (one, one_bytes, width): (Arc<dyn RateLimit>, usize, Option<u64>) = match args.algorithm {
        Algo::Log => {
            let log = Limiter::builder(args.limit, args.window)
                .clock(clock.clone())
                .build()
                .map_err(|e| e.to_string())?;
            let bytes = log.memory_bytes();
            (Arc::new(log), bytes, None)
        }
        Algo::Counter => {
            let counter =
                SlidingCounter::with_clock(args.limit, args.window, args.slots, clock.clone())
                    .map_err(|e| e.to_string())?;
            let (bytes, width) = (counter.memory_bytes(), counter.slot_width());
            (Arc::new(counter), bytes, Some(width.as_nanos() as u64))
        }
    };
    let judge = Judge {
        window: window_ns,
        slots: width.map(|w| (w, u64::from(args.slots))),
    };
    let single = run_phase("one key", threads, args.duration, &judge, {
        let one = Arc::clone(&one);
        move |_, _| one.check().ok().map(|a| (0, a.at()))
    });

    // Room for the keys made up front, up to a million: a run touches only
    // the keys its calls reach, and `--keys 1000000000` must not allocate a
    // table for a billion before the first call.
    let keys = usize::try_from(args.keys).unwrap_or(usize::MAX);
    let builder = KeyedLimiter::<u64>::builder(args.limit, args.window)
        .clock(clock)
        .max_keys(keys)
        .capacity(keys.min(1 << 20));
    let (many, keyed_bytes) = match args.algorithm {
        Algo::Log => keyed_phase(
            builder.build().map_err(|e| e.to_string())?,
            args,
            threads,
            &judge,
        ),
        Algo::Counter => keyed_phase(
            builder
                .sliding_counter(args.slots)
                .build()
                .map_err(|e| e.to_string())?,
            args,
            threads,
            &judge,
        ),
    };
    let keys = args.keys;

    println!();
    println!(
        "{:<12} {:>14} {:>12} {:>14} {:>16} {:>8} {:>14}",
        "phase",
        "checks/s",
        "admitted",
        "denied",
        "max in window",
        if judge.slots.is_some() {
            "N slots"
        } else {
            "exact"
        },
        "bytes per key"
    );
    let rows = [
        ("one key", &single, one_bytes),
        (&*format!("{keys} keys"), &many, keyed_bytes),
    ];
    let mut held = true;
    for (name, r, bytes) in rows {
        let ok = r.judged <= args.limit as usize;
        held &= ok;
        println!(
            "{:<12} {:>14.0} {:>12} {:>14} {:>10} / {:<3} {:>8} {:>14}",
            name,
            r.checks as f64 / r.elapsed.as_secs_f64(),
            r.admitted,
            r.checks - r.admitted,
            r.max_in_window,
            args.limit,
            if ok { "yes" } else { "NO" },
            bytes
        );
    }
    println!();
    match (held, judge.slots) {
        (true, None) => {
            println!(
                "exact: yes — no window of {:?} held more than {} admissions (per key).",
                args.window, args.limit
            );
            Ok(())
        }
        (true, Some((width, n))) => {
            println!(
                "counter guarantee: yes — no {n} consecutive slots of {:?} held more than {} \
                 admissions (per key); a sliding window may hold up to one slot's more \
                 (approximate by design).",
                Duration::from_nanos(width),
                args.limit
            );
            Ok(())
        }
        (false, None) => Err("a window held more admissions than the limit".into()),
        (false, Some(_)) => Err("N consecutive slots held more admissions than the limit".into()),
    }
}

/// The keyed phase on any per-key algorithm; returns its report and the
/// limiter's bytes per key.
fn keyed_phase<A: Algorithm>(
    keyed: KeyedLimiter<u64, slidelog::ClockChoice, std::collections::hash_map::RandomState, A>,
    args: &DemoArgs,
    threads: usize,
    judge: &Judge,
) -> (Report, usize) {
    let keyed = Arc::new(keyed);
    let keys = args.keys;
    let report = run_phase(&format!("{keys} keys"), threads, args.duration, judge, {
        let keyed = Arc::clone(&keyed);
        move |worker, i| {
            // Half the traffic from 16 abusive keys, half spread over all
            // keys (a cheap multiplicative hash of the call number).
            let spread = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ worker as u64;
            let key = if i % 2 == 0 {
                spread % keys.min(16)
            } else {
                spread % keys
            };
            keyed.check(&key).ok().map(|a| (key, a.at()))
        }
    });
    (report, keyed.bytes_per_key())
}

/// What a phase is judged on: the exact rule (no window of `window` ns
/// holds more than the limit), or the counter's (no `n` consecutive slots of
/// `width` ns do).
struct Judge {
    window: u64,
    slots: Option<(u64, u64)>,
}

/// The most the TSC clock may step back between cores before `demo` and
/// `serve` read the operating system's monotonic clock instead (the
/// `Clock` docs: a skew of `S` can let a real window hold what `S` more
/// of clock time admits). Steps shorter than a hand-off between cores
/// (tens of nanoseconds) are not seen by the measurement.
const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_micros(1);

/// The clock for this process's limiters: the TSC (quanta) if its skew
/// across cores, measured now, is within `bound`, else the operating
/// system's monotonic clock, with a warning on stderr saying why.
fn checked_clock(bound: Duration, who: &str) -> slidelog::ClockChoice {
    let (clock, skew) = slidelog::ClockChoice::within(bound);
    if let Some(skew) = skew {
        eprintln!("{who}: warning: {skew}; the operating system's monotonic clock is used instead");
    }
    clock
}

/// The most threads `demo` and `bench` start.
const MAX_THREADS: usize = 1024;

/// Refuses more than [`MAX_THREADS`] threads, before anything starts:
/// beyond that a run times the scheduler, not the limiter, and a typo
/// (`--threads 100000`) would start a hundred thousand threads.
pub(crate) fn check_threads(threads: usize) -> Result<(), String> {
    if threads > MAX_THREADS {
        return Err(format!(
            "--threads {threads} is more than {MAX_THREADS}: more threads than cores time the scheduler, not the limiter"
        ));
    }
    Ok(())
}

/// Runs `check(worker, i)` on `threads` threads for `duration`, with a live
/// progress line, and verifies the admitted `(key, at)` pairs.
fn run_phase<F>(name: &str, threads: usize, duration: Duration, judge: &Judge, check: F) -> Report
where
    F: Fn(usize, u64) -> Option<(u64, u64)> + Send + Sync + Clone + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|worker| {
            let (stop, checks, check) = (Arc::clone(&stop), Arc::clone(&checks), check.clone());
            thread::spawn(move || {
                let mut admitted = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        if let Some(pair) = check(worker, i) {
                            admitted.push(pair);
                        }
                        i += 1;
                    }
                    checks.fetch_add(1024, Ordering::Relaxed);
                }
                admitted
            })
        })
        .collect();
    // A bar on a terminal, plain periodic lines into a log file.
    let total_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let mut progress = progress::Progress::new(name, Some(total_ms), progress::Unit::Seconds);
    while start.elapsed() < duration {
        thread::sleep(Duration::from_millis(100).min(duration));
        let done = checks.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        progress.update(
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            || {
                format!(
                    "{:.1}s, {done} checks, {:.0} checks/s",
                    elapsed.as_secs_f64(),
                    done as f64 / elapsed.as_secs_f64()
                )
            },
        );
    }
    progress.finish();
    stop.store(true, Ordering::Relaxed);
    let mut admitted: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker panicked"))
        .collect();
    let elapsed = start.elapsed();
    admitted.sort_unstable();
    let fullest = max_in_window(&admitted, judge.window);
    let judged = match judge.slots {
        None => fullest,
        // Slot numbers are sorted like the times: the same scan counts
        // admissions in any `n` consecutive slots.
        // Sub-window k is [ceil(k W / n), ceil((k + 1) W / n)): t lies in
        // floor(t n / W) (the counter's numbering, also where n does not
        // divide W, where `at / width` would not be).
        Some((_, n)) => {
            let slot = |at: u64| (u128::from(at) * u128::from(n) / u128::from(judge.window)) as u64;
            let slots: Vec<(u64, u64)> = admitted.iter().map(|&(k, at)| (k, slot(at))).collect();
            max_in_window(&slots, n)
        }
    };
    Report {
        checks: checks.load(Ordering::Relaxed),
        admitted: admitted.len() as u64,
        elapsed,
        max_in_window: fullest,
        judged,
    }
}

/// The largest number of admissions of one key in any window `(t - W, t]`,
/// over `(key, at)` pairs sorted by key then time.
fn max_in_window(sorted: &[(u64, u64)], window: u64) -> usize {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sorted.len() {
        if sorted[lo].0 != sorted[hi].0 {
            lo = hi;
        }
        while sorted[lo].1 + window <= sorted[hi].1 {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_counting_is_per_key() {
        let pairs = [(1, 0), (1, 5), (1, 10), (2, 1), (2, 2), (2, 3)];
        assert_eq!(max_in_window(&pairs, 10), 3);
        assert_eq!(max_in_window(&pairs[..3], 10), 2);
    }
}
