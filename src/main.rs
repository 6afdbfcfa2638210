//! `slidelog`: a demo that proves itself.
//!
//! `slidelog` (or `slidelog demo`) runs several threads against one limiter
//! and then against many keys, on embedded defaults, and reports checks/s,
//! admissions, denials and the largest number of admissions it saw in any
//! window — which must never exceed the limit.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use slidelog::{KeyedLimiter, Limiter, RateLimit, SlidingCounter};

#[path = "cli/bench.rs"]
mod bench;
#[path = "cli/csv.rs"]
mod csv;
#[path = "cli/mutex_log.rs"]
mod mutex_log;
#[path = "cli/parse.rs"]
mod parse;
#[path = "cli/replay.rs"]
mod replay;

use parse::duration as parse_duration;

#[derive(Parser, Debug)]
#[command(
    name = "slidelog",
    version,
    about = "Exact lock-free sliding-window-log rate limiting: demo and tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Hammer one limiter, then many keys, from several threads, and check
    /// that no window ever held more than the limit (the default command).
    Demo(DemoArgs),
    /// The one-minute side-by-side of the crate's limiters (exact log,
    /// approximate counter) and a Mutex<VecDeque> log on this machine.
    Bench(BenchArgs),
    /// Replay a traffic log (CSV/TSV with a header row) through limiters and
    /// report admitted, denied and the top offenders per policy.
    Replay(ReplayArgs),
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Total time budget in seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Threads for the contended rows.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// The traffic log: CSV or TSV with a header row; `-` for stdin.
    file: String,
    /// A policy N/WINDOW, e.g. `100/1m` (repeat for stacked limits: a request
    /// must fit all of them).
    #[arg(long = "limit", required = true, value_parser = parse::policy)]
    limits: Vec<parse::Policy>,
    /// The column holding timestamps (RFC 3339 or Unix epoch seconds).
    #[arg(long)]
    time_column: String,
    /// The column holding the key (client IP, API key, user).
    #[arg(long)]
    key_column: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = replay::Format::Table)]
    format: replay::Format,
    /// Field delimiter (default: tab for .tsv files or a tab-separated
    /// header, comma otherwise).
    #[arg(long)]
    delimiter: Option<char>,
    /// How far timestamps may go backwards before it is an error.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    tolerance: Duration,
    /// Slots of the approximate counter the exact log is compared with.
    #[arg(long, default_value_t = 10)]
    slots: u32,
    /// How many top offenders to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
}

/// Which limiter the demo's one-key phase uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Algorithm {
    /// The exact sliding-window log.
    Log,
    /// The approximate sliding-window counter (10 slots).
    Counter,
}

#[derive(Args, Debug, Clone)]
struct DemoArgs {
    /// Worker threads (default: the number of CPUs, at least 2).
    #[arg(long)]
    threads: Option<usize>,
    /// Distinct keys in the keyed phase.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Admissions allowed per window (per key in the keyed phase).
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// The window, e.g. `10ms`, `1s`, `2m`.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    window: Duration,
    /// How long each phase runs, e.g. `2s`.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    duration: Duration,
    /// The algorithm of the one-key phase.
    #[arg(long, value_enum, default_value_t = Algorithm::Log)]
    algorithm: Algorithm,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            threads: None,
            keys: 10_000,
            limit: 100,
            window: Duration::from_millis(10),
            duration: Duration::from_secs(2),
            algorithm: Algorithm::Log,
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Demo(DemoArgs::default())) {
        Command::Demo(args) => demo(&args),
        Command::Bench(args) => bench::run(args.seconds, args.threads.max(1)),
        Command::Replay(args) => replay::run(&replay::Options {
            file: args.file,
            policies: args.limits,
            time_column: args.time_column,
            key_column: args.key_column,
            format: args.format,
            delimiter: args.delimiter,
            tolerance: args.tolerance,
            slots: args.slots,
            top: args.top,
        }),
    };
    if let Err(message) = result {
        eprintln!("slidelog: {message}");
        std::process::exit(2);
    }
}

/// What one phase measured.
struct Report {
    checks: u64,
    admitted: u64,
    elapsed: Duration,
    max_in_window: usize,
}

fn demo(args: &DemoArgs) -> Result<(), String> {
    let threads = args.threads.unwrap_or_else(|| {
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2)
    });
    if threads == 0 || args.keys == 0 {
        return Err("--threads and --keys must be at least 1".into());
    }
    let window_ns = args.window.as_nanos() as u64;
    println!(
        "slidelog demo: {threads} threads, limit {} per {:?}, {:?} per phase",
        args.limit, args.window, args.duration
    );

    // The one-key limiter and the bytes it measures itself to hold.
    let (one, one_bytes): (Arc<dyn RateLimit>, usize) = match args.algorithm {
        Algorithm::Log => {
            let log = Limiter::new(args.limit, args.window).map_err(|e| e.to_string())?;
            let bytes = log.memory_bytes();
            (Arc::new(log), bytes)
        }
        Algorithm::Counter => {
            let counter =
                SlidingCounter::new(args.limit, args.window, 10).map_err(|e| e.to_string())?;
            let bytes = counter.memory_bytes();
            (Arc::new(counter), bytes)
        }
    };
    let single = run_phase("one key", threads, args.duration, window_ns, {
        let one = Arc::clone(&one);
        move |_, _| one.check().ok().map(|a| (0, a.at()))
    });

    let keyed = Arc::new(
        KeyedLimiter::<u64>::builder(args.limit, args.window)
            .max_keys(args.keys as usize)
            .capacity(args.keys as usize)
            .build()
            .map_err(|e| e.to_string())?,
    );
    let keys = args.keys;
    let many = run_phase(
        &format!("{keys} keys"),
        threads,
        args.duration,
        window_ns,
        {
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
        },
    );

    println!();
    println!(
        "{:<12} {:>14} {:>12} {:>14} {:>16} {:>8} {:>14}",
        "phase", "checks/s", "admitted", "denied", "max in window", "exact", "bytes per key"
    );
    let rows = [
        ("one key", &single, one_bytes),
        (&*format!("{keys} keys"), &many, keyed.bytes_per_key()),
    ];
    let mut exact = true;
    for (i, (name, r, bytes)) in rows.into_iter().enumerate() {
        // The counter is approximate: its one-key row is reported, not judged.
        let judged = i > 0 || args.algorithm == Algorithm::Log;
        let ok = r.max_in_window <= args.limit as usize || !judged;
        exact &= ok;
        println!(
            "{:<12} {:>14.0} {:>12} {:>14} {:>10} / {:<3} {:>8} {:>14}",
            name,
            r.checks as f64 / r.elapsed.as_secs_f64(),
            r.admitted,
            r.checks - r.admitted,
            r.max_in_window,
            args.limit,
            if !judged {
                "approx"
            } else if ok {
                "yes"
            } else {
                "NO"
            },
            bytes
        );
    }
    println!();
    if exact {
        println!(
            "exact: yes — no window of {:?} held more than {} admissions (per key).",
            args.window, args.limit
        );
        Ok(())
    } else {
        Err("a window held more admissions than the limit".into())
    }
}

/// Runs `check(worker, i)` on `threads` threads for `duration`, with a live
/// progress line, and verifies the admitted `(key, at)` pairs.
fn run_phase<F>(name: &str, threads: usize, duration: Duration, window: u64, check: F) -> Report
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
    while start.elapsed() < duration {
        thread::sleep(Duration::from_millis(100).min(duration));
        let done = checks.load(Ordering::Relaxed);
        eprint!(
            "\r  {name}: {:>5.1}s  {:>12} checks  {:>12.0} checks/s",
            start.elapsed().as_secs_f64(),
            done,
            done as f64 / start.elapsed().as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    }
    stop.store(true, Ordering::Relaxed);
    let mut admitted: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker panicked"))
        .collect();
    let elapsed = start.elapsed();
    eprintln!();
    admitted.sort_unstable();
    Report {
        checks: checks.load(Ordering::Relaxed),
        admitted: admitted.len() as u64,
        elapsed,
        max_in_window: max_in_window(&admitted, window),
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
