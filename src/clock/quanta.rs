//! [`QuantaClock`]: the calibrated TSC clock, read inline where it counts
//! TSC ticks, and its `recent` form on an upkeep thread's time.

use core::fmt;
#[cfg(not(slidelog_loom))]
use std::time::Duration;

use super::Clock;
use crate::sync::Arc;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The default clock: [`quanta`]'s calibrated TSC clock (10-15 ns a read),
/// reading nanoseconds since an origin [`QuantaClock::ORIGIN`] (2^55 ns, about
/// 417 days) before the clock was created. The head start lets a limiter
/// restored from a [snapshot](crate::snapshot) in a new process place the
/// admissions made before the process started at their exact times.
///
/// [`QuantaClock::recent`] opts into an upkeep thread instead: a read is
/// then one load of the time the thread publishes, inline, and a
/// subtraction (under 1 ns where a counter read takes 14, on the host of
/// BENCHMARKS.md) at the cost of the upkeep interval's granularity (e.g.
/// 1 ms).
///
/// Cloning is cheap and clones share the origin.
///
/// # Examples
///
/// ```
/// use slidelog::{Clock, QuantaClock};
///
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// let b = clock.clone().now();
/// assert!(b >= a);
/// ```
#[derive(Clone)]
pub struct QuantaClock {
    clock: quanta::Clock,
    /// The origin in the reading's own units: `clock`'s raw count, or (a
    /// `Recent` reading) the published time when the clock was created.
    origin_raw: u64,
    /// Nanoseconds per tick ([`tsc::per_tick`]) of a clock that reads the
    /// time stamp counter inline ([`tsc::read`]; `clock` then counts its
    /// ticks), else 0 and the time comes from `reading`. A field of its
    /// own, tested first: the counter's case costs one test of the factor
    /// it loads anyway (a tag matched against three cases compiles to two
    /// compares).
    per_tick: u64,
    /// The inline read's offset: the origin's nanoseconds less
    /// [`ORIGIN`](Self::ORIGIN), so that a reading is one multiply and one
    /// subtraction ([`tsc::since`]); 0 where `per_tick` is.
    offset: u64,
    reading: Reading,
}

/// Where a [`QuantaClock`] that does not read the counter inline takes its
/// time.
#[derive(Clone, Debug)]
enum Reading {
    /// The time an upkeep thread publishes here (`QuantaClock::recent`):
    /// a counting clock's reading, in nanoseconds.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    Recent(Arc<AtomicU64>),
    /// Quanta's own read (`raw`: `clock_gettime` where quanta found no
    /// usable TSC).
    Quanta,
}

impl QuantaClock {
    /// The reading of a clock just created, in nanoseconds: windows up to
    /// this long restore exactly from a snapshot.
    ///
    /// ```
    /// use slidelog::{Clock, QuantaClock};
    /// assert!(QuantaClock::new().now() >= QuantaClock::ORIGIN);
    /// ```
    pub const ORIGIN: u64 = 1 << 55;

    /// A clock that reads the time stamp counter on every call.
    ///
    /// ```
    /// let clock = slidelog::QuantaClock::new();
    /// # let _ = clock;
    /// ```
    pub fn new() -> Self {
        let (clock, per_tick) = process_clock();
        let origin_raw = clock.raw();
        // `per_tick` is never 0 (`tsc::per_tick`).
        let per_tick = per_tick.unwrap_or(0);
        QuantaClock {
            clock,
            origin_raw,
            per_tick,
            offset: tsc::offset(origin_raw, per_tick, Self::ORIGIN),
            reading: Reading::Quanta,
        }
    }

    /// A clock that reads the time an upkeep thread publishes: the thread
    /// reads a counting [`QuantaClock`] every `interval` and stores the
    /// reading where every `recent` clock loads it, inline (`quanta`'s own
    /// recent time is a call into quanta, which clobbers the registers a
    /// limiter's loads sit in; docs/design.md §4). One thread serves the
    /// process: it starts with the first `recent` clock, later calls share
    /// it (and its interval) while any [`Upkeep`] it returned is alive, and
    /// it stops when the last is dropped; the time then stands still
    /// (denials would never expire), so keep the guard as long as the clock
    /// is used.
    ///
    /// # Errors
    ///
    /// A zero `interval` (the thread would spin on a core; an error of kind
    /// `InvalidInput`), or the upkeep thread could not be spawned.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, QuantaClock};
    ///
    /// let (clock, _upkeep) = QuantaClock::recent(Duration::from_millis(1))?;
    /// let limiter = Limiter::with_clock(10, Duration::from_secs(1), clock)?;
    /// assert!(limiter.check().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(not(slidelog_loom))]
    pub fn recent(interval: Duration) -> Result<(Self, Upkeep), std::io::Error> {
        let running = super::upkeep::Running::shared(interval)?;
        let published = running.published();
        let clock = QuantaClock {
            clock: process_clock().0,
            // Relaxed: see `Clock::now`.
            origin_raw: published.load(Ordering::Relaxed),
            per_tick: 0,
            offset: 0,
            reading: Reading::Recent(published),
        };
        Ok((clock, Upkeep { _running: running }))
    }
}

/// The process's one `quanta::Clock`, cloned for every [`QuantaClock`],
/// and its nanoseconds per TSC tick if it counts them ([`tsc::per_tick`]).
///
/// Building a `quanta::Clock` runs `CPUID` to find the TSC, and `CPUID`
/// traps to the hypervisor on a virtual machine (about 45 µs per clock on
/// the 2-vCPU VM of BENCHMARKS.md, where a `Limiter::new` takes 0.2 µs
/// without it). A clone shares the calibration (plain data) and costs
/// nothing; each `QuantaClock` still takes its own origin.
pub(super) fn process_clock() -> (quanta::Clock, Option<u64>) {
    static CLOCK: std::sync::OnceLock<(quanta::Clock, Option<u64>)> = std::sync::OnceLock::new();
    let (clock, per_tick) = CLOCK.get_or_init(|| {
        let clock = quanta::Clock::new();
        let per_tick = tsc::per_tick(&clock);
        (clock, per_tick)
    });
    (clock.clone(), *per_tick)
}

/// Reading the time stamp counter inline.
///
/// `quanta::Clock::raw` is a call out of line (it also holds the
/// `clock_gettime` fallback), and a call clobbers the caller-saved
/// registers: on the hot path, whatever a limiter loaded before the read
/// must then wait in callee-saved registers or on the stack. Where the
/// clock counts TSC ticks, `QuantaClock` takes the counter itself and
/// scales it by quanta's calibration, read once into a fixed-point factor
/// ([`per_tick`]): one multiply, where quanta's scaling also matches on
/// its source and shifts by a variable count.
mod tsc {
    /// Nanoseconds per tick in 0.64 fixed point, as `clock` calibrated
    /// them, if `clock` counts TSC ticks so that [`read`] returns what its
    /// `raw` would: quanta scales deltas only on its TSC source (on its
    /// `clock_gettime` fallback a delta is already nanoseconds), so a
    /// scaled delta proves the TSC. A TSC whose calibration came out at
    /// one tick per nanosecond or slower reads as "no" (the factor would
    /// not fit below 1.0): the slower `raw`, still right. Off x86-64 there
    /// is no inline read: always `None`.
    ///
    /// The factor is quanta's nanoseconds for `2^40` ticks times `2^24`:
    /// at most a nanosecond per `2^40` ticks (six minutes at 3 GHz) away
    /// from quanta's own scaling, well inside the error of quanta's
    /// calibration itself; and the clock stays linear. A factor below 1.0
    /// in 0.64 makes the scaling a multiply whose high word is the answer,
    /// with no shift after it: the scaling is on the critical path of every
    /// call that reads the time (BENCHMARKS.md, "Where the time goes").
    pub(super) fn per_tick(clock: &quanta::Clock) -> Option<u64> {
        const PROBE: u64 = 1 << 40;
        let nanos = clock.delta_as_nanos(0, PROBE);
        (cfg!(target_arch = "x86_64") && nanos > 0 && nanos < PROBE).then_some(nanos << 24)
    }

    /// Nanoseconds for `ticks` at `per_tick` (0.64 fixed point).
    #[inline(always)]
    pub(super) fn nanos(ticks: u64, per_tick: u64) -> u64 {
        // The high word of a 64 x 64 bit product: no overflow, and below
        // `ticks` (the factor is below 1.0).
        ((u128::from(ticks) * u128::from(per_tick)) >> 64) as u64
    }

    /// What [`since`] subtracts for a clock whose origin reads
    /// `origin_raw` and whose reading there is `origin`.
    pub(super) fn offset(origin_raw: u64, per_tick: u64, origin: u64) -> u64 {
        nanos(origin_raw, per_tick).wrapping_sub(origin)
    }

    /// The reading at counter `ticks`, at or past the origin's count:
    /// `nanos(ticks) - nanos(origin_raw) + origin`, one subtraction after
    /// the multiply (the counter's value waits for nothing else). The
    /// scale of the difference, `nanos(ticks - origin_raw)`, is the same
    /// or a nanosecond less (the two fractions dropped); both are
    /// monotonic in `ticks`, so the clock never goes backwards.
    #[inline(always)]
    pub(super) fn since(ticks: u64, per_tick: u64, offset: u64) -> u64 {
        nanos(ticks, per_tick).wrapping_sub(offset)
    }

    /// The reading of a counter behind the origin's count: the origin.
    #[cold]
    #[inline(never)]
    pub(super) fn behind(origin: u64) -> u64 {
        origin
    }

    /// The time stamp counter, as quanta's TSC source reads it (`RDTSC`).
    /// Called only for a clock that counts it ([`per_tick`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(super) fn read() -> Option<u64> {
        // SAFETY: `RDTSC` exists on every x86-64 processor and touches no
        // memory; it is the instruction quanta's TSC source executes, and
        // it runs here only where that source is the clock's (`per_tick`).
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }

    /// Off x86-64: no inline read.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    pub(super) fn read() -> Option<u64> {
        None
    }
}

impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

impl fmt::Debug for QuantaClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantaClock")
            .field("recent", &matches!(self.reading, Reading::Recent(_)))
            .finish_non_exhaustive()
    }
}

impl Clock for QuantaClock {
    /// Inline: the TSC read and its scaling, or a `recent` clock's load of
    /// the upkeep thread's time (a limiter inlines its clock read into
    /// every path that asks for the time). Quanta's own read, where it
    /// found no usable TSC, stays out of line.
    #[inline(always)]
    fn now(&self) -> u64 {
        if self.per_tick != 0
            && let Some(ticks) = tsc::read()
        {
            // A counter behind the origin (another core's, a moment
            // earlier) reads as the origin, as quanta's delta does: a
            // branch to a cold call, so that the common case has no
            // conditional move on the chain every caller waits for (see
            // `Geometry::now`); the multiply waits for the counter alone.
            if ticks < self.origin_raw {
                return tsc::behind(Self::ORIGIN);
            }
            return tsc::since(ticks, self.per_tick, self.offset);
        }
        match self.reading {
            // One load of the time the upkeep thread published. Relaxed:
            // the time is a value, not a publication (no other data is
            // read through it), and reads of one location never go
            // backwards (coherence).
            Reading::Recent(ref published) => {
                published
                    .load(Ordering::Relaxed)
                    .saturating_sub(self.origin_raw)
                    + Self::ORIGIN
            }
            Reading::Quanta => self.now_read(),
        }
    }
}

impl QuantaClock {
    /// [`now`](Clock::now) on a clock that reads neither the inline TSC nor
    /// the upkeep thread's time: quanta's `raw`, out of line (its
    /// `clock_gettime` fallback where quanta found no usable TSC).
    #[inline(never)]
    fn now_read(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin_raw, self.clock.raw()) + Self::ORIGIN
    }
}

/// Keeps the upkeep thread of [`QuantaClock::recent`] clocks running; the
/// thread stops when the last `Upkeep` of the process is dropped, and the
/// time its clocks read then stands still.
///
/// ```
/// # use std::time::Duration;
/// let (_clock, upkeep) = slidelog::QuantaClock::recent(Duration::from_millis(1))?;
/// drop(upkeep);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Upkeep {
    #[cfg(not(slidelog_loom))]
    pub(super) _running: Arc<super::upkeep::Running>,
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Where the clock counts TSC ticks, the inline read is what quanta's
    /// `raw` reads (a `raw` reading lies between two inline ones; on a clock
    /// without the TSC, `raw` reads `clock_gettime` nanoseconds, which this
    /// would catch if `per_tick` took that clock for the TSC), and the
    /// fixed-point scale agrees with quanta's to a part in a million.
    #[test]
    fn the_inline_tsc_read_is_quantas() {
        let (clock, per_tick) = process_clock();
        assert_eq!(per_tick, tsc::per_tick(&clock));
        let Some(per_tick) = per_tick else {
            return;
        };
        for _ in 0..3 {
            let before = tsc::read().expect("x86-64");
            let raw = clock.raw();
            let after = tsc::read().expect("x86-64");
            assert!(
                before <= raw && raw <= after,
                "{before} <= {raw} <= {after}"
            );
        }
        let start = clock.raw();
        std::thread::sleep(Duration::from_millis(5));
        let end = clock.raw();
        let quanta = clock.delta_as_nanos(start, end);
        let ours = tsc::nanos(end - start, per_tick);
        // At least most of the 5 ms slept (quanta's calibration is its own).
        assert!(quanta >= 4_000_000, "{quanta}");
        assert!(
            ours.abs_diff(quanta) <= quanta / 1_000_000 + 1,
            "{ours} vs {quanta}"
        );
    }

    /// Clocks share the process's `quanta::Clock`, not its readings: each
    /// counts from its own creation (plus the head start).
    #[test]
    fn quanta_clocks_count_from_their_own_creation() {
        let first = QuantaClock::new();
        std::thread::sleep(Duration::from_millis(20));
        let second = QuantaClock::new();
        let (a, b) = (first.now(), second.now());
        assert!(b >= QuantaClock::ORIGIN);
        // 20 ms apart, less whatever passed between the two reads.
        assert!(
            a - QuantaClock::ORIGIN >= 10_000_000 + (b - QuantaClock::ORIGIN),
            "the first clock ({a}) should be about 20 ms ahead of the second ({b})"
        );
    }

    #[test]
    fn quanta_clock_moves_forward() {
        let clock = QuantaClock::new();
        let a = clock.now();
        let mut b = clock.now();
        // Spin until the counter visibly moves (no sleep; bounded).
        for _ in 0..10_000_000 {
            if b > a {
                break;
            }
            b = clock.now();
        }
        assert!(b > a, "quanta clock did not advance: {a} -> {b}");
    }
}
