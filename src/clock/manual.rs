//! [`ManualClock`]: a clock that moves only when told to.

use core::fmt;
use std::time::Duration;

use super::Clock;
use crate::sync::Arc;
use crate::sync::atomic::{AtomicU64, Ordering};

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
}
