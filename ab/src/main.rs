//! Two builds of slidelog in one process: `old` (a git worktree at some
//! revision) and `new` (the working tree), measured in alternating rounds
//! of [`CALLS`] calls with the order flipped every round, so that the
//! host's moods hit both alike. Run it through `ab/run`, which checks out
//! `old`, aligns the code and builds this.
//!
//! A mode is `<check|admit>-<scenario>[-<clock>]`:
//! - scenarios `small` (L = 10, W = 10 ns: every call admitted, as in
//!   `side_by_side`; at W = 100 ns a call faster than 10 ns is denied a
//!   share of the time, and the mode would measure that mix), `big` (L = 2^20,
//!   W = 1 µs: the count of `remaining` at work),
//!   `deny` (10 per hour, full), `two` (`small` from two threads at once,
//!   wall time over all calls), `keyed` (10,000 `u64` keys, L = 10,
//!   W = 1 µs, keys in a scattered order), `keyed-deny` (every key full),
//!   `keyed-1k` (1,000 keys), `keyed-deny-100k` (100,000 keys, every one
//!   full: more than an L2 holds), `keyed-half` (`keyed` calling only the
//!   even keys: the states between them are not called) and `keyed-two`
//!   (two threads, one on the even keys and one on the odd ones: states
//!   created one after the other, so neighbours in memory, are called by
//!   different threads; wall time over all calls);
//! - clocks: none for `QuantaClock::new()`, `upkeep` for
//!   `QuantaClock::recent(1 ms)`, `at` for the time passed in (`check_at`,
//!   20 ns apart; single-key scenarios only).

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[path = "../../cli/src/cpu.rs"]
mod cpu;

/// Calls per round.
const CALLS: u64 = 1_000_000;

const USAGE: &str = "usage: slidelog-ab [--rounds N] <check|admit>-<small|big|deny|two|keyed|keyed-deny|keyed-1k|keyed-deny-100k|keyed-half|keyed-two>[-upkeep|-at] ...";

/// What one mode measures.
#[derive(Clone, Copy, Debug)]
struct Mode {
    admit: bool,
    scenario: Scenario,
    clock: ClockKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scenario {
    Small,
    Big,
    Deny,
    Two,
    /// `threads` threads on `keys` keys; with `halves`, thread `t` calls
    /// only the keys `k % 2 == t` (created interleaved with the others).
    Keyed {
        keys: u64,
        deny: bool,
        threads: usize,
        halves: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ClockKind {
    Tsc,
    Upkeep,
    Passed,
}

impl Scenario {
    /// One thread on every one of `keys` keys.
    fn keyed(keys: u64, deny: bool) -> Scenario {
        Scenario::Keyed {
            keys,
            deny,
            threads: 1,
            halves: false,
        }
    }

    /// `threads` threads (one or two) on the even and odd halves of
    /// 10,000 keys.
    fn halves(threads: usize) -> Scenario {
        Scenario::Keyed {
            keys: 10_000,
            deny: false,
            threads,
            halves: true,
        }
    }
}

impl Mode {
    fn parse(text: &str) -> Result<Mode, String> {
        let bad = || format!("{text}: not a mode\n{USAGE}");
        let (op, rest) = text.split_once('-').ok_or_else(bad)?;
        let admit = match op {
            "check" => false,
            "admit" => true,
            _ => return Err(bad()),
        };
        let (rest, clock) = match rest.rsplit_once('-') {
            Some((rest, "upkeep")) => (rest, ClockKind::Upkeep),
            Some((rest, "at")) => (rest, ClockKind::Passed),
            _ => (rest, ClockKind::Tsc),
        };
        let scenario = match rest {
            "small" => Scenario::Small,
            "big" => Scenario::Big,
            "deny" => Scenario::Deny,
            "two" => Scenario::Two,
            "keyed" => Scenario::keyed(10_000, false),
            "keyed-deny" => Scenario::keyed(10_000, true),
            "keyed-1k" => Scenario::keyed(1_000, false),
            "keyed-deny-100k" => Scenario::keyed(100_000, true),
            "keyed-half" => Scenario::halves(1),
            "keyed-two" => Scenario::halves(2),
            _ => return Err(bad()),
        };
        let keyed = matches!(scenario, Scenario::Keyed { .. });
        if clock == ClockKind::Passed && (keyed || scenario == Scenario::Two) {
            return Err(format!(
                "{text}: `-at` is for one thread on one key\n{USAGE}"
            ));
        }
        Ok(Mode {
            admit,
            scenario,
            clock,
        })
    }

    /// `(limit, window)` of a single-key scenario.
    fn quota(self) -> (u32, Duration) {
        match self.scenario {
            Scenario::Big => (1 << 20, Duration::from_micros(1)),
            Scenario::Deny => (10, Duration::from_secs(3600)),
            _ => (10, Duration::from_nanos(10)),
        }
    }
}

/// One round of a mode on one build: the time its calls took.
type Round = Box<dyn FnMut() -> Duration>;

/// What fills key `k` of a keyed mode before the rounds (nothing for the
/// others). `measure` fills both builds' keys in turn, two by two, so that
/// their states lie side by side in memory: filled one build after the
/// other, each map's states would sit in a region of its own, and at
/// 10,000 keys and more where a region lands (its pages, what else uses
/// its cache sets) moves a build's time by more than a change does
/// (BENCHMARKS.md, "Where the time goes").
type Fill = Box<dyn FnMut(u64)>;

/// The round of `mode` on the build `$lib` (`old` or `new`: the same code
/// for both, compiled against each), and its [`Fill`].
macro_rules! round {
    ($lib:ident, $mode:expr) => {{
        let mode: Mode = $mode;
        let (upkeep, clock) = match mode.clock {
            ClockKind::Upkeep => {
                let (clock, upkeep) = $lib::QuantaClock::recent(Duration::from_millis(1))
                    .map_err(|e| e.to_string())?;
                (Some(upkeep), clock)
            }
            _ => (None, $lib::QuantaClock::new()),
        };
        let (round, fill): (Round, Fill) = match mode.scenario {
            Scenario::Keyed {
                keys,
                deny,
                threads,
                halves,
            } => {
                let window = if deny {
                    Duration::from_secs(3600)
                } else {
                    Duration::from_micros(1)
                };
                let l = Arc::new(
                    $lib::KeyedLimiter::<u64, _>::with_clock(10, window, clock)
                        .map_err(|e| e.to_string())?,
                );
                let filled = Arc::clone(&l);
                let fill: Fill = Box::new(move |k| {
                    for _ in 0..if deny { 10 } else { 1 } {
                        let _ = filled.check(&k);
                    }
                });
                let admit = mode.admit;
                let calls = move |t: u64, n: u64| {
                    let mut sum = 0u64;
                    for i in 0..n {
                        let k = if halves {
                            scatter(i, keys / 2) * 2 + t
                        } else {
                            scatter(i, keys)
                        };
                        sum += if admit {
                            u64::from(l.admit(&k).is_ok())
                        } else {
                            black_box(l.check(&k)).map_or(0, |a| u64::from(a.remaining()))
                        };
                    }
                    black_box(sum);
                };
                let round: Round = Box::new(move || {
                    let _keep = &upkeep;
                    on_threads(threads, |t| calls(t as u64, CALLS / threads as u64))
                });
                (round, fill)
            }
            _ => {
                let (limit, window) = mode.quota();
                let l =
                    $lib::Limiter::with_clock(limit, window, clock).map_err(|e| e.to_string())?;
                let (admit, passed) = (mode.admit, mode.clock == ClockKind::Passed);
                if mode.scenario == Scenario::Deny {
                    // Full for an hour from the first call's time.
                    for _ in 0..10 {
                        let _ = if passed {
                            l.check_at(1 << 40)
                        } else {
                            l.check()
                        };
                    }
                }
                let threads = if mode.scenario == Scenario::Two { 2 } else { 1 };
                let round: Round = Box::new(move || {
                    let _keep = &upkeep;
                    let calls = |l: &$lib::Limiter<$lib::QuantaClock>, n: u64| {
                        let mut sum = 0u64;
                        for i in 0..n {
                            let t = (1 << 40) + i * 20;
                            sum += match (admit, passed) {
                                (true, false) => u64::from(l.admit().is_ok()),
                                (true, true) => u64::from(l.admit_at(black_box(t)).is_ok()),
                                (false, false) => {
                                    black_box(l.check()).map_or(0, |a| u64::from(a.remaining()))
                                }
                                (false, true) => black_box(l.check_at(black_box(t)))
                                    .map_or(0, |a| u64::from(a.remaining())),
                            };
                        }
                        black_box(sum);
                    };
                    on_threads(threads, |_| calls(&l, CALLS / threads as u64))
                });
                (round, Box::new(|_| ()))
            }
        };
        (round, fill)
    }};
}

/// Key `i` of `0..keys`, scattered as the benches scatter theirs
/// (`benches/common/mod.rs`, `scatter`: no division timed with the calls).
#[inline]
fn scatter(i: u64, keys: u64) -> u64 {
    ((u128::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) * u128::from(keys)) >> 64) as u64
}

/// The wall time of `work(t)` run on `threads` threads at once (`t = 0`
/// on the calling thread), started together.
fn on_threads(threads: usize, work: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 1..threads {
            let (work, barrier) = (&work, &barrier);
            s.spawn(move || {
                barrier.wait();
                work(t);
            });
        }
        barrier.wait();
        work(0);
    });
    start.elapsed()
}

/// The `q` quantile of `sorted`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn measure(mode_text: &str, rounds: usize) -> Result<(), String> {
    let mode = Mode::parse(mode_text)?;
    let ((mut old, mut old_fill), (mut new, mut new_fill)) = (round!(old, mode), round!(new, mode));
    if let Scenario::Keyed { keys, .. } = mode.scenario {
        // Two keys at a time: within each build, keys `2j` and `2j + 1`
        // stay neighbours (`keyed-two` calls them from different threads).
        for pair in (0..keys).step_by(2) {
            for fill in [&mut old_fill, &mut new_fill] {
                (pair..(pair + 2).min(keys)).for_each(&mut *fill);
            }
        }
    }
    let (mut ratios, mut old_ns, mut new_ns) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let (o, n) = if r % 2 == 0 {
            let o = old();
            (o, new())
        } else {
            let n = new();
            (old(), n)
        };
        ratios.push(n.as_secs_f64() / o.as_secs_f64());
        old_ns.push(o.as_secs_f64() * 1e9 / CALLS as f64);
        new_ns.push(n.as_secs_f64() * 1e9 / CALLS as f64);
    }
    for v in [&mut ratios, &mut old_ns, &mut new_ns] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "{mode_text:22} new/old {:.3} ({:.3}-{:.3})   old {:.2} ns   new {:.2} ns",
        quantile(&ratios, 0.5),
        quantile(&ratios, 0.25),
        quantile(&ratios, 0.75),
        quantile(&old_ns, 0.5),
        quantile(&new_ns, 0.5),
    );
    Ok(())
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1).peekable();
    let mut rounds = 41;
    let mut modes = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                let n = args.next().ok_or(USAGE)?;
                rounds = n
                    .parse()
                    .map_err(|_| format!("--rounds {n}: not a number"))?;
                if rounds == 0 {
                    return Err("--rounds must be at least 1".into());
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => modes.push(arg),
        }
    }
    if modes.is_empty() {
        modes = [
            "check-small",
            "check-big",
            "check-deny",
            "admit-small",
            "admit-big",
            "admit-deny",
        ]
        .map(String::from)
        .to_vec();
    }
    for mode in &modes {
        Mode::parse(mode)?;
    }
    println!("{} rounds of {CALLS} calls on {}", rounds, cpu::cpu_model());
    for mode in &modes {
        measure(mode, rounds)?;
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("slidelog-ab: {e}");
        std::process::exit(2);
    }
}
