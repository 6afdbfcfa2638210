//! Configuration errors.

use core::fmt;
use std::time::Duration;

/// Why a limiter could not be built.
///
/// Every constructor validates its input and returns this error instead of
/// panicking.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Limiter};
///
/// let err = Limiter::new(0, Duration::from_secs(1)).unwrap_err();
/// assert_eq!(err, ConfigError::ZeroLimit);
/// assert_eq!(err.to_string(), "the limit must be at least 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// The limit was 0: nothing could ever be admitted.
    ZeroLimit,
    /// The limit is above [`MAX_LIMIT`](crate::MAX_LIMIT) (each admission in
    /// the window costs 8 bytes, so the log is capped at 8 MiB per key).
    LimitTooLarge {
        /// The limit that was asked for.
        limit: u32,
        /// The largest limit supported.
        max: u32,
    },
    /// The window was zero.
    ZeroWindow,
    /// The window does not fit the 62-bit deadline encoding
    /// (see [`MAX_WINDOW`](crate::MAX_WINDOW)).
    WindowTooLarge {
        /// The window that was asked for.
        window: Duration,
        /// The largest window supported.
        max: Duration,
    },
    /// `max_keys` was 0 (a keyed limiter could hold no key).
    ZeroMaxKeys,
    /// A keyed limiter's `max_bytes` was 0: no key would ever fit.
    ZeroMaxBytes,
    /// A keyed limiter's `max_bytes` is less than one key takes with no
    /// heap bytes of its own (its map entry and log; with per-key quotas,
    /// the least any key can take), so no key would ever fit. The budget
    /// counts bytes: `max_bytes(64)` is 64 bytes, not 64 MiB.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ConfigError, KeyedLimiter};
    /// let err = KeyedLimiter::<u64>::builder(10, Duration::from_secs(1)).max_bytes(64).build().unwrap_err();
    /// assert_eq!(err, ConfigError::MaxBytesBelowOneKey { max_bytes: 64, per_key: 144 });
    /// ```
    MaxBytesBelowOneKey {
        /// The budget asked for.
        max_bytes: usize,
        /// What one key takes at the least
        /// ([`KeyedLimiter::bytes_per_key`](crate::KeyedLimiter::bytes_per_key)).
        per_key: usize,
    },
    /// More policies than [`MAX_POLICIES`](crate::MAX_POLICIES).
    TooManyPolicies {
        /// The number of policies given.
        count: usize,
        /// The most one limiter checks.
        max: usize,
    },
    /// Several policies or per-key quotas were asked of the approximate
    /// sliding-window counter, which keeps one count per sub-window of one
    /// window: they need the exact log (the default algorithm).
    CounterPolicies,
    /// A [`SlidingCounter`](crate::SlidingCounter) was asked for 0 slots.
    ZeroSlots,
    /// A [`SlidingCounter`](crate::SlidingCounter) was asked for more slots
    /// than [`MAX_SLOTS`](crate::MAX_SLOTS) or than its window has
    /// nanoseconds.
    TooManySlots {
        /// The number of slots asked for.
        slots: u32,
        /// The largest number of slots for this window.
        max: u32,
    },
    /// A [`SlidingCounter`](crate::SlidingCounter) was reconfigured to
    /// another window: its slots are laid out for its own window, so only
    /// the limit can change at run time.
    CounterWindow {
        /// The window asked for.
        window: Duration,
        /// The counter's window.
        counter: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroLimit => f.write_str("the limit must be at least 1"),
            ConfigError::LimitTooLarge { limit, max } => {
                write!(f, "the limit {limit} is above the maximum of {max}")
            }
            ConfigError::ZeroWindow => f.write_str("the window must be longer than zero"),
            ConfigError::WindowTooLarge { window, max } => {
                write!(
                    f,
                    "the window {window:?} is longer than the maximum of {max:?}"
                )
            }
            ConfigError::ZeroMaxKeys => f.write_str("max_keys must be at least 1"),
            ConfigError::ZeroMaxBytes => f.write_str("max_bytes must be at least 1"),
            ConfigError::MaxBytesBelowOneKey { max_bytes, per_key } => write!(
                f,
                "max_bytes {max_bytes} is less than one key takes ({per_key} bytes): no key would ever fit (the budget is in bytes)"
            ),
            ConfigError::TooManyPolicies { count, max } => {
                write!(f, "{count} policies is more than the maximum of {max}")
            }
            ConfigError::CounterPolicies => f.write_str(
                "several policies or per-key quotas need the exact log, not the sliding-window counter",
            ),
            ConfigError::ZeroSlots => f.write_str("a sliding counter needs at least 1 slot"),
            ConfigError::TooManySlots { slots, max } => {
                write!(
                    f,
                    "{slots} slots is more than the maximum of {max} for this window"
                )
            }
            ConfigError::CounterWindow { window, counter } => write!(
                f,
                "a sliding counter keeps its window ({counter:?}) when reconfigured, not {window:?}: build a new one"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
