//! Time sources: the [`Clock`] trait, [`QuantaClock`], [`MonotonicClock`],
//! [`ClockChoice`] and [`ManualClock`]; [`SkewReport`]: how far a clock
//! read on different cores steps back.

use core::fmt;
use std::time::Duration;

use crate::sync::Arc;
use crate::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(slidelog_loom))]
mod skew;
#[cfg(not(slidelog_loom))]
pub use skew::{PairSkew, Skew, SkewReport};

/// A source of time: nanoseconds since an arbitrary, fixed origin.
///
/// The limiter only ever compares readings of one clock, so the origin does
/// not matter.
///
/// **What the guarantees hold in: the clock's own time line.** At most
/// `limit` admissions in any window `(t - W, t]` is a statement about the
/// readings the admissions were made at. A reading that goes backwards
/// cannot break it: the ring clamps each admission to the newest one
/// already recorded. In real time it holds as well when the clock is
/// monotonic *across threads* (a reading that happens after another is
/// never smaller) and runs at the real rate: [`MonotonicClock`] (the
/// operating system's monotonic clock) is.
///
/// A TSC clock ([`QuantaClock`]) reads each core's own counter, and on some
/// hosts the cores' counters disagree by a constant offset (measure it with
/// [`QuantaClock::measure_skew`]). With cores at most `S` apart, an
/// admission made on a core that lags by `S` is recorded `S` early and
/// leaves the window `S` early for the other cores: a real window
/// `(τ - W, τ]` holds the admissions of clock readings in a span of
/// `W + S`, i.e. at most `limit` plus those of `S` more of clock time
/// (a second full `limit` only if `S` approaches `W`). Threads on a core
/// that runs `S` ahead see each admission leave up to `S` late, and are
/// denied up to `S` past the window. [`QuantaClock::checked`] and
/// [`ClockChoice::within`] refuse a TSC clock whose measured skew is above
/// a bound.
///
/// # Examples
///
/// A clock of your own, e.g. from a timestamp your server already holds:
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Clock, Limiter};
///
/// #[derive(Debug)]
/// struct Fixed(u64);
/// impl Clock for Fixed {
///     fn now(&self) -> u64 { self.0 }
/// }
///
/// let limiter = Limiter::with_clock(1, Duration::from_secs(1), Fixed(42))?;
/// assert_eq!(limiter.check().unwrap().at(), 42);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

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
        let running = upkeep::Running::shared(interval)?;
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
fn process_clock() -> (quanta::Clock, Option<u64>) {
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
    /// call that reads the time (BENCHMARKS.md, "Where the time goes",
    /// session 22).
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
    _running: Arc<upkeep::Running>,
}

/// The upkeep thread of [`QuantaClock::recent`] clocks: one per process,
/// shared by every [`Upkeep`] guard alive.
#[cfg(not(slidelog_loom))]
mod upkeep {
    use std::sync::{Mutex, PoisonError, Weak};
    use std::thread::JoinHandle;
    use std::time::Duration;

    use super::{Clock, QuantaClock};
    use crate::sync::Arc;
    use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// The running thread: stopped (and joined) when the last guard's
    /// reference drops.
    #[derive(Debug)]
    pub(super) struct Running {
        published: Arc<AtomicU64>,
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    /// The running thread, if some guard still holds it.
    static RUNNING: Mutex<Weak<Running>> = Mutex::new(Weak::new());

    impl Running {
        /// The running thread, or a new one publishing every `interval`.
        pub(super) fn shared(interval: Duration) -> Result<Arc<Running>, std::io::Error> {
            if interval.is_zero() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "an upkeep interval must be longer than zero (the thread would spin)",
                ));
            }
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(alive) = running.upgrade() {
                return Ok(alive);
            }
            let counting = QuantaClock::new();
            // Published before any clock reads it: a clock's origin is
            // never the empty cell's 0. Relaxed: see `Clock::now`.
            let published = Arc::new(AtomicU64::new(counting.now()));
            let stop = Arc::new(AtomicBool::new(false));
            let (to, stopped) = (Arc::clone(&published), Arc::clone(&stop));
            let thread = std::thread::Builder::new()
                .name("slidelog-upkeep".into())
                .spawn(move || {
                    // Relaxed, the flag: it guards no data, and the
                    // `unpark` that follows its store synchronizes with
                    // the `park` it ends, so the next load sees it. The
                    // time: see `Clock::now`.
                    while !stopped.load(Ordering::Relaxed) {
                        to.store(counting.now(), Ordering::Relaxed);
                        std::thread::park_timeout(interval);
                    }
                })?;
            let alive = Arc::new(Running {
                published,
                stop,
                thread: Some(thread),
            });
            *running = Arc::downgrade(&alive);
            Ok(alive)
        }

        /// Where the thread publishes the time.
        pub(super) fn published(&self) -> Arc<AtomicU64> {
            Arc::clone(&self.published)
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            // Relaxed: see the thread's loop (the `unpark` after it).
            self.stop.store(true, Ordering::Relaxed);
            if let Some(thread) = self.thread.take() {
                thread.thread().unpark();
                // A panicked upkeep thread has nothing left to stop.
                let _ = thread.join();
            }
        }
    }
}

/// The operating system's monotonic clock ([`std::time::Instant`]:
/// `clock_gettime(CLOCK_MONOTONIC)` on Linux, through the vDSO, about
/// 20-25 ns a read), in nanoseconds since the clock was created plus
/// [`MonotonicClock::ORIGIN`] (the head start [`QuantaClock`] has, for
/// the same reason: restored snapshots).
///
/// The kernel keeps this clock consistent across cores (it stops trusting
/// a TSC whose cores disagree), so a reading that happens after another,
/// on any core, is never smaller, and the limiter's guarantees hold in real
/// time (see [`Clock`]). It costs about twice a [`QuantaClock`] read: the
/// clock to choose where the TSC is skewed across cores
/// ([`ClockChoice::within`]).
///
/// Cloning is a copy; clones share the origin.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Clock, KeyedLimiter, Limiter, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// assert!(clock.now() >= MonotonicClock::ORIGIN);
/// let limiter = Limiter::with_clock(1, Duration::from_secs(60), clock)?;
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_err());
/// let keyed = KeyedLimiter::<u64>::builder(1, Duration::from_secs(60))
///     .clock(MonotonicClock::new())
///     .build()?;
/// assert!(keyed.check(&7).is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    /// The reading of a clock just created, in nanoseconds (as
    /// [`QuantaClock::ORIGIN`]).
    ///
    /// ```
    /// use slidelog::{MonotonicClock, QuantaClock};
    /// assert_eq!(MonotonicClock::ORIGIN, QuantaClock::ORIGIN);
    /// ```
    pub const ORIGIN: u64 = QuantaClock::ORIGIN;

    /// A clock counting from now.
    ///
    /// ```
    /// use slidelog::{Clock, MonotonicClock};
    /// let clock = MonotonicClock::new();
    /// let (a, b) = (clock.now(), clock.now());
    /// assert!(b >= a);
    /// ```
    pub fn new() -> Self {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> u64 {
        // `Instant` never reads before the origin (it saturates); 2^64 ns
        // less the head start is 167 years.
        let since = self.origin.elapsed().as_nanos();
        u64::try_from(since)
            .unwrap_or(u64::MAX)
            .saturating_add(Self::ORIGIN)
    }
}

/// A clock chosen at run time: the TSC clock where its cores agree, else
/// the operating system's monotonic clock ([`ClockChoice::within`]). A
/// read is one predictable branch and the chosen clock's read.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ClockChoice, Limiter};
///
/// let (clock, refused) = ClockChoice::within(Duration::from_micros(10));
/// if let Some(skew) = &refused {
///     eprintln!("warning: {skew}; using the monotonic clock");
/// }
/// let limiter = Limiter::with_clock(10, Duration::from_secs(1), clock)?;
/// assert!(limiter.check().is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub enum ClockChoice {
    /// The calibrated TSC ([`QuantaClock`]).
    Quanta(QuantaClock),
    /// The operating system's monotonic clock ([`MonotonicClock`]).
    Monotonic(MonotonicClock),
}

impl ClockChoice {
    /// [`QuantaClock::checked`]: the TSC clock if its skew across cores,
    /// measured now, is at most `bound`; otherwise the monotonic clock and
    /// the [`Skew`] that refused the TSC (to log as a warning). Measuring
    /// takes a moment (see [`QuantaClock::measure_skew`]): call it once,
    /// at start, and clone the clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Clock, ClockChoice};
    /// // No TSC passes a bound of zero unless no reading ever steps back.
    /// let (clock, refused) = ClockChoice::within(Duration::ZERO);
    /// assert_eq!(matches!(clock, ClockChoice::Monotonic(_)), refused.is_some());
    /// assert!(clock.now() > 0);
    /// ```
    #[cfg(not(slidelog_loom))]
    pub fn within(bound: Duration) -> (ClockChoice, Option<Skew>) {
        match QuantaClock::checked(bound) {
            Ok(quanta) => (ClockChoice::Quanta(quanta), None),
            Err(skew) => (ClockChoice::Monotonic(MonotonicClock::new()), Some(skew)),
        }
    }
}

impl Clock for ClockChoice {
    #[inline]
    fn now(&self) -> u64 {
        match self {
            ClockChoice::Quanta(clock) => clock.now(),
            ClockChoice::Monotonic(clock) => clock.now(),
        }
    }
}

/// A clock that moves only when told to: for tests, simulations and replay.
///
/// Starts at 0 ns; clones share the same time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(shared.now(), 5_000_000);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at 0 ns.
    ///
    /// ```
    /// use slidelog::{Clock, ManualClock};
    /// assert_eq!(ManualClock::new().now(), 0);
    /// ```
    pub fn new() -> Self {
        ManualClock::starting_at(0)
    }

    /// A clock at `nanos`.
    ///
    /// ```
    /// use slidelog::{Clock, ManualClock};
    /// assert_eq!(ManualClock::starting_at(7).now(), 7);
    /// ```
    pub fn starting_at(nanos: u64) -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(nanos)),
        }
    }

    /// Moves the time forward by `by` (saturating at `u64::MAX` ns).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(clock.now(), 1_000_000_000);
    /// ```
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the time is a value, not a publication; the limiter's
        // safety holds for any timestamps, so no ordering is needed.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// Sets the time to `nanos`, also backwards (to test clocks that jump).
    ///
    /// ```
    /// use slidelog::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.set(100);
    /// clock.set(40);
    /// assert_eq!(clock.now(), 40);
    /// ```
    pub fn set(&self, nanos: u64) {
        // Relaxed: see `advance`.
        self.nanos.store(nanos, Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("nanos", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        // Relaxed: see `advance`; reads of one location never go backwards
        // (coherence), so a thread never sees its clock move back.
        self.nanos.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_and_saturates() {
        let clock = ManualClock::new();
        let other = clock.clone();
        assert_eq!(clock.now(), 0);
        other.advance(Duration::from_nanos(3));
        assert_eq!(clock.now(), 3);
        clock.advance(Duration::MAX);
        assert_eq!(other.now(), u64::MAX);
        clock.set(10);
        assert_eq!(other.now(), 10);
    }

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

    /// A `recent` clock reads the time the upkeep thread publishes (inline,
    /// no counter read): it counts from its own creation, moves as the
    /// thread publishes, and never runs ahead of a counting clock created
    /// before it by more than an upkeep interval (its origin may be that
    /// stale).
    /// The upkeep thread is one per process: tests that start or stop it
    /// take turns, each holding this for its length.
    fn upkeep_turn() -> std::sync::MutexGuard<'static, ()> {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TURN.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits (bounded) until `clock` has moved `by` nanoseconds past
    /// `from`, and returns its last reading.
    fn moved(clock: &QuantaClock, from: u64, by: u64) -> u64 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut read = clock.now();
        while read - from < by && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            read = clock.now();
        }
        read
    }

    #[test]
    fn a_recent_clock_follows_the_upkeep_thread() {
        let _turn = upkeep_turn();
        let interval = Duration::from_millis(1);
        let counting = QuantaClock::new();
        let (recent, _upkeep) = QuantaClock::recent(interval).expect("the upkeep thread starts");
        let start = recent.now();
        assert!(start >= QuantaClock::ORIGIN);
        assert!(
            start - QuantaClock::ORIGIN < 1_000_000_000,
            "a new clock reads {start}"
        );
        // It moves 10 ms: the thread publishes every interval, however late
        // a loaded machine schedules it.
        let read = moved(&recent, start, 10_000_000);
        let exact = counting.now();
        assert!(
            read - start >= 10_000_000,
            "the recent clock stood still at {read}"
        );
        // Between two publications the time stands still: reads in a row
        // repeat (a counter read never does).
        let reads: Vec<u64> = (0..1_000).map(|_| recent.now()).collect();
        assert!(
            reads.windows(2).any(|w| w[0] == w[1]),
            "the recent clock read a counter: {:?}",
            &reads[..4]
        );
        // An interval, and a little for the two clocks' scalings of one
        // calibration.
        let slack = interval.as_nanos() as u64 + 100_000;
        assert!(
            read <= exact + slack,
            "the recent clock ({read}) ran ahead of the counting one ({exact})"
        );
    }

    /// `recent` clocks share one upkeep thread while a guard is alive: the
    /// second clock keeps moving after the first guard is dropped, the
    /// time stands still once the last one is, and the next `recent` clock
    /// starts a thread of its own.
    #[test]
    fn recent_clocks_share_one_thread_until_the_last_guard_drops() {
        let _turn = upkeep_turn();
        let interval = Duration::from_millis(1);
        let (first, first_guard) = QuantaClock::recent(interval).expect("the thread starts");
        let (second, second_guard) = QuantaClock::recent(interval).expect("shared");
        assert!(Arc::ptr_eq(&first_guard._running, &second_guard._running));
        drop(first_guard);
        let from = second.now();
        assert!(
            moved(&second, from, 5_000_000) - from >= 5_000_000,
            "the second clock stood still with its guard alive"
        );
        drop(second_guard);
        // Stopped and joined: nothing publishes any more.
        let (a, b) = (first.now(), second.now());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            (first.now(), second.now()),
            (a, b),
            "the thread kept publishing"
        );
        let (third, _guard) = QuantaClock::recent(interval).expect("a new thread starts");
        let from = third.now();
        assert!(
            moved(&third, from, 5_000_000) - from >= 5_000_000,
            "a clock after the last guard stood still"
        );
        assert_eq!(second.now(), b);
    }

    #[test]
    fn a_zero_upkeep_interval_is_refused() {
        let refused = QuantaClock::recent(Duration::ZERO).map(|_| ()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
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
