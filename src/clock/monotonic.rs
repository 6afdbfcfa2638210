//! [`MonotonicClock`]: the operating system's monotonic clock.

use super::{Clock, QuantaClock};

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
/// ([`ClockChoice::within`](super::ClockChoice::within)).
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
