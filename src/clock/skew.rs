//! How far a clock read on different cores steps back: [`SkewReport`],
//! [`QuantaClock::measure_skew`] and [`QuantaClock::checked`].
//!
//! Threads hand a token back and forth through one atomic word, each
//! reading the clock on either side of the hand-off: a reading taken after
//! the hand-off happened after the one taken before it, so if it is
//! smaller, the clock stepped back between the two threads' cores by at
//! least the difference.

use core::fmt;
use std::time::Duration;

use super::QuantaClock;
use crate::sync::Backoff;
use crate::sync::atomic::{AtomicU64, Ordering};

/// Hand-offs per ordered pair of threads in [`QuantaClock::measure_skew`]
/// and [`QuantaClock::checked`].
const ROUNDS: u32 = 200;

/// The largest step back measured between two threads.
///
/// ```
/// use slidelog::SkewReport;
/// let report = SkewReport::measure(2, 10, |_| 7);
/// let pair = report.pairs()[0];
/// assert_eq!((pair.from, pair.to), (0, 1));
/// assert_eq!(pair.back, std::time::Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairSkew {
    /// The thread whose reading came first.
    pub from: usize,
    /// The thread whose reading came after it (after the hand-off).
    pub to: usize,
    /// The largest amount by which `to`'s reading was smaller than
    /// `from`'s: a lower bound on how far `to`'s core lags `from`'s.
    pub back: Duration,
    /// The smallest gap between the two readings when `to`'s was not
    /// smaller: the hand-off's latency plus the lag. A lag of `from`'s
    /// core behind `to`'s shorter than the hand-off itself shows no step
    /// back; this says how short.
    pub min_gap: Duration,
}

/// What [`SkewReport::measure`] found: for each ordered pair of threads,
/// the largest step back of one's reading against an earlier one of the
/// other.
///
/// The threads are not pinned to cores: they run where the scheduler puts
/// them (one thread per available core, all busy at once, are usually
/// spread over the cores, but nothing guarantees it), so a report measures
/// the cores the threads ran on, and a skew the hand-off's latency hides
/// (see [`PairSkew::min_gap`]) is not seen. A step back is always real:
/// it is a lower bound on the skew between some two cores.
///
/// # Examples
///
/// A source whose thread 0 runs a thousand ticks behind the others:
///
/// ```
/// use std::sync::Mutex;
/// use std::time::Duration;
/// use slidelog::SkewReport;
///
/// let ticks = Mutex::new(1_000_000u64);
/// let report = SkewReport::measure(3, 20, |thread| {
///     let mut ticks = ticks.lock().unwrap();
///     *ticks += 1;
///     if thread == 0 { *ticks - 1_000 } else { *ticks }
/// });
/// // A reading on thread 0 right after one on another thread is 999 behind.
/// assert_eq!(report.max_back(), Duration::from_nanos(999));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkewReport {
    threads: usize,
    rounds: u32,
    pairs: Vec<PairSkew>,
}

impl SkewReport {
    /// Measures `read` (nanoseconds; called with the index of the thread
    /// that reads) from `threads` threads at once: for each ordered pair,
    /// `rounds` hand-offs each way, one pair at a time (the others wait).
    /// Fewer than two threads measure nothing.
    ///
    /// ```
    /// use slidelog::{Clock, MonotonicClock, SkewReport};
    /// let clock = MonotonicClock::new();
    /// let report = SkewReport::measure(2, 50, |_| clock.now());
    /// assert_eq!(report.pairs().len(), 2);
    /// ```
    pub fn measure(threads: usize, rounds: u32, read: impl Fn(usize) -> u64 + Sync) -> SkewReport {
        let pairs: Vec<(usize, usize)> = (0..threads)
            .flat_map(|a| (a + 1..threads).map(move |b| (a, b)))
            .collect();
        // Per pair: `rounds` readings by each thread, then the first
        // thread's last, after which the next pair starts.
        let steps = 2 * u64::from(rounds) + 1;
        let token = Token {
            step: AtomicU64::new(0),
            reading: AtomicU64::new(0),
        };
        let mut found: Vec<PairSkew> = pairs
            .iter()
            .flat_map(|&(a, b)| {
                [(a, b), (b, a)].map(|(from, to)| PairSkew {
                    from,
                    to,
                    back: Duration::ZERO,
                    min_gap: Duration::MAX,
                })
            })
            .collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|me| {
                    let (pairs, token, read) = (&pairs, &token, &read);
                    scope.spawn(move || {
                        let mut mine = Vec::new();
                        for (p, &(a, b)) in pairs.iter().enumerate() {
                            if me != a && me != b {
                                continue;
                            }
                            let base = p as u64 * steps;
                            let (back, gap) = token.hand_off(me == a, base, rounds, || read(me));
                            mine.push((p, me == b, back, gap));
                        }
                        mine
                    })
                })
                .collect();
            for handle in handles {
                let Ok(mine) = handle.join() else {
                    continue;
                };
                // What a thread measured: the step back of its own reading
                // against its partner's earlier one.
                for (p, is_b, back, gap) in mine {
                    let entry = &mut found[2 * p + usize::from(!is_b)];
                    entry.back = Duration::from_nanos(back);
                    entry.min_gap = Duration::from_nanos(gap);
                }
            }
        });
        SkewReport {
            threads,
            rounds,
            pairs: found,
        }
    }

    /// The largest step back over every pair: the skew measured.
    ///
    /// ```
    /// let report = slidelog::SkewReport::measure(2, 5, |_| 0);
    /// assert_eq!(report.max_back(), std::time::Duration::ZERO);
    /// ```
    pub fn max_back(&self) -> Duration {
        self.pairs
            .iter()
            .map(|pair| pair.back)
            .max()
            .unwrap_or_default()
    }

    /// Each ordered pair's measurement.
    ///
    /// ```
    /// let report = slidelog::SkewReport::measure(3, 5, |_| 0);
    /// assert_eq!(report.pairs().len(), 6);
    /// ```
    pub fn pairs(&self) -> &[PairSkew] {
        &self.pairs
    }

    /// How many threads measured.
    ///
    /// ```
    /// assert_eq!(slidelog::SkewReport::measure(2, 5, |_| 0).threads(), 2);
    /// ```
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Hand-offs per ordered pair.
    ///
    /// ```
    /// assert_eq!(slidelog::SkewReport::measure(2, 5, |_| 0).rounds(), 5);
    /// ```
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
}

impl fmt::Display for SkewReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a clock read on {} threads stepped back by up to {:?}",
            self.threads,
            self.max_back()
        )
    }
}

/// The word two threads hand back and forth: the step it is at, and the
/// reading that goes with it.
struct Token {
    /// The last step taken: a thread waits until it is the one before
    /// its own. Steps only advance, one per hand-off.
    step: AtomicU64,
    /// The reading of the last step's thread, written before the step.
    reading: AtomicU64,
}

impl Token {
    /// One pair's hand-offs from steps `base + 1` on: `rounds` readings
    /// each way, the first thread (`first`) taking the odd steps and the
    /// other the even ones, then the first thread's last turn, which reads
    /// against the other's last reading and ends the pair (the step the
    /// next pair waits for). Returns the largest step back of this
    /// thread's readings against the partner's readings just before them,
    /// and the smallest forward gap.
    fn hand_off(&self, first: bool, base: u64, rounds: u32, read: impl Fn() -> u64) -> (u64, u64) {
        let (mut back, mut gap) = (0u64, u64::MAX);
        let turns = if first { rounds + 1 } else { rounds };
        let mut step = base + if first { 1 } else { 2 };
        for _ in 0..turns {
            // The step before ours: the partner's reading (or, for the
            // pair's first step, the end of the previous pair).
            self.wait_for(step - 1);
            let ours = read();
            if step - 1 > base {
                // Relaxed: the Acquire in `wait_for` pairs with the
                // partner's Release store of the step, after its reading
                // (and after its clock read, which so happened before ours).
                let theirs = self.reading.load(Ordering::Relaxed);
                match theirs.checked_sub(ours) {
                    Some(stepped) => back = back.max(stepped),
                    None => gap = gap.min(ours - theirs),
                }
            }
            // Relaxed: published by the Release store of the step below.
            self.reading.store(ours, Ordering::Relaxed);
            // Release: our reading, and our clock read before it, happen
            // before the partner's Acquire of the step.
            self.step.store(step, Ordering::Release);
            step += 2;
        }
        (back, gap)
    }

    /// Spins, then yields, until the token is at `step`. Spinning first
    /// keeps the hand-off short (a yield costs microseconds, which hide a
    /// skew shorter than them); yielding later lets a partner that shares
    /// the core run.
    fn wait_for(&self, step: u64) {
        /// Loads, one spin hint apart, before the wait starts yielding:
        /// about half a millisecond, long enough for a partner that the
        /// scheduler put on the same core to be moved to another.
        const SPINS: u32 = 1 << 14;
        let backoff = Backoff::new();
        let mut spins = 0u32;
        // Acquire: pairs with the Release store of `step` (see
        // `hand_off`).
        while self.step.load(Ordering::Acquire) != step {
            if spins < SPINS {
                spins += 1;
                // A fresh backoff's spin: one hint.
                Backoff::new().spin();
            } else {
                backoff.snooze();
            }
        }
    }
}

/// A TSC clock refused for its skew across cores
/// ([`QuantaClock::checked`]).
///
/// ```
/// use std::time::Duration;
/// use slidelog::QuantaClock;
/// if let Err(skew) = QuantaClock::checked(Duration::ZERO) {
///     assert!(skew.measured() > skew.bound());
///     println!("{skew}");
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skew {
    bound: Duration,
    report: SkewReport,
}

impl Skew {
    /// The largest step back measured.
    ///
    /// ```
    /// # use std::time::Duration;
    /// if let Err(skew) = slidelog::QuantaClock::checked(Duration::ZERO) {
    ///     assert!(skew.measured() > Duration::ZERO);
    /// }
    /// ```
    pub fn measured(&self) -> Duration {
        self.report.max_back()
    }

    /// The bound it exceeded.
    ///
    /// ```
    /// # use std::time::Duration;
    /// if let Err(skew) = slidelog::QuantaClock::checked(Duration::from_nanos(1)) {
    ///     assert_eq!(skew.bound(), Duration::from_nanos(1));
    /// }
    /// ```
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// The whole measurement.
    ///
    /// ```
    /// # use std::time::Duration;
    /// if let Err(skew) = slidelog::QuantaClock::checked(Duration::ZERO) {
    ///     assert!(skew.report().threads() >= 2);
    /// }
    /// ```
    pub fn report(&self) -> &SkewReport {
        &self.report
    }
}

impl fmt::Display for Skew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the TSC clock read on {} threads stepped back by {:?}, more than the {:?} allowed",
            self.report.threads,
            self.measured(),
            self.bound
        )
    }
}

impl std::error::Error for Skew {}

impl QuantaClock {
    /// Measures how far this process's TSC clock steps back between cores:
    /// one thread per [available core](std::thread::available_parallelism),
    /// `rounds` hand-offs each way per pair ([`SkewReport::measure`]; the
    /// threads are not pinned). On a host whose cores' counters agree, every
    /// step back is 0; a host whose core lags by `S` shows up to `S`, less
    /// the hand-off's latency. Takes about `threads² × rounds` hand-offs
    /// (2 threads, 200 rounds: well under a millisecond on idle cores,
    /// where a hand-off takes tens of nanoseconds; on cores busy with other
    /// work a hand-off can take up to a millisecond, and hides a skew
    /// shorter than it: see [`PairSkew::min_gap`]).
    ///
    /// ```
    /// let report = slidelog::QuantaClock::measure_skew(100);
    /// println!("{report}");
    /// ```
    pub fn measure_skew(rounds: u32) -> SkewReport {
        // The counter scaled from 0, not a clock's reading: a clock reads
        // a counter behind its origin's count as the origin, which would
        // hide most of a lag larger than the clock's age.
        let (clock, _) = super::quanta::process_clock();
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        SkewReport::measure(threads, rounds, |_| clock.delta_as_nanos(0, clock.raw()))
    }

    /// A TSC clock, if the skew [measured](Self::measure_skew) between the
    /// cores now is at most `bound`; else the [`Skew`] measured (fall back
    /// to a [`MonotonicClock`](super::MonotonicClock): see
    /// [`ClockChoice::within`](super::ClockChoice::within)).
    ///
    /// # Errors
    ///
    /// [`Skew`] when a reading on one core was more than `bound` behind
    /// one taken before it on another.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, QuantaClock};
    /// match QuantaClock::checked(Duration::from_micros(10)) {
    ///     Ok(clock) => drop(Limiter::with_clock(10, Duration::from_secs(1), clock)?),
    ///     Err(skew) => eprintln!("warning: {skew}"),
    /// }
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn checked(bound: Duration) -> Result<QuantaClock, Skew> {
        let report = QuantaClock::measure_skew(ROUNDS);
        if report.max_back() > bound {
            return Err(Skew { bound, report });
        }
        Ok(QuantaClock::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, MonotonicClock};

    /// A perfectly consistent source: one shared counter, read by
    /// `fetch_add` (each reading after the last, whatever the thread).
    fn ticks() -> AtomicU64 {
        AtomicU64::new(1 << 40)
    }

    #[test]
    fn a_consistent_source_shows_no_step_back() {
        let ticks = ticks();
        let report = SkewReport::measure(4, 50, |_| ticks.fetch_add(1, Ordering::SeqCst));
        assert_eq!(report.pairs().len(), 12);
        assert_eq!(report.max_back(), Duration::ZERO, "{report:?}");
        // Every hand-off was seen: the next reading is one tick later.
        for pair in report.pairs() {
            assert_eq!(pair.min_gap, Duration::from_nanos(1), "{pair:?}");
        }
    }

    /// Thread 2 lags by a million ticks: every pair that reads on it after
    /// another thread shows the lag (less the one tick between the two
    /// readings), and no other pair steps back.
    #[test]
    fn a_lagging_thread_is_found() {
        const LAG: u64 = 1_000_000;
        let ticks = ticks();
        let report = SkewReport::measure(4, 50, |thread| {
            let now = ticks.fetch_add(1, Ordering::SeqCst);
            if thread == 2 { now - LAG } else { now }
        });
        assert_eq!(report.max_back(), Duration::from_nanos(LAG - 1));
        for pair in report.pairs() {
            let want = if pair.to == 2 { LAG - 1 } else { 0 };
            assert_eq!(pair.back, Duration::from_nanos(want), "{pair:?}");
        }
    }

    /// The operating system's monotonic clock never steps back between
    /// threads.
    #[test]
    fn the_monotonic_clock_shows_no_step_back() {
        let clock = MonotonicClock::new();
        let threads = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .max(2);
        let report = SkewReport::measure(threads, 200, |_| clock.now());
        assert_eq!(report.max_back(), Duration::ZERO, "{report:?}");
    }

    /// The TSC clock on this host: printed, not asserted (hosts differ).
    #[test]
    fn the_tsc_clock_is_measured() {
        let report = QuantaClock::measure_skew(200);
        println!("{report}: {:?}", report.pairs());
        assert_eq!(report.rounds(), 200);
        match QuantaClock::checked(Duration::from_secs(1)) {
            Ok(_) => {}
            Err(skew) => assert!(skew.measured() > Duration::from_secs(1)),
        }
    }
}
