//! [`ClockChoice`]: the TSC clock where its cores agree, else the
//! monotonic clock.

#[cfg(not(slidelog_loom))]
use std::time::Duration;

#[cfg(not(slidelog_loom))]
use super::Skew;
use super::{Clock, MonotonicClock, QuantaClock};

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
