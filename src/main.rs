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
use slidelog::{KeyedLimiter, Limiter};

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
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            threads: None,
            keys: 10_000,
            limit: 100,
            window: Duration::from_millis(10),
            duration: Duration::from_secs(2),
        }
    }
}

/// Parses `250ms`, `1s`, `1.5s`, `1m`, `1h`, `10us`, `5ns` (a bare number is seconds).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (try 250ms, 1s, 1m, 1h)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use ns, us, ms, s, m, h)"
            ));
        }
    };
    let seconds = value * scale;
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 1e9 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Demo(DemoArgs::default())) {
        Command::Demo(args) => demo(&args),
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

    let one = Arc::new(Limiter::new(args.limit, args.window).map_err(|e| e.to_string())?);
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
        ("one key", &single, one.memory_bytes()),
        (&*format!("{keys} keys"), &many, keyed.bytes_per_key()),
    ];
    let mut exact = true;
    for (name, r, bytes) in rows {
        let ok = r.max_in_window <= args.limit as usize;
        exact &= ok;
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
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn window_counting_is_per_key() {
        let pairs = [(1, 0), (1, 5), (1, 10), (2, 1), (2, 2), (2, 3)];
        assert_eq!(max_in_window(&pairs, 10), 3);
        assert_eq!(max_in_window(&pairs[..3], 10), 2);
    }
}
