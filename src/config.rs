//! Validation of a limiter's limit and window.

use std::time::Duration;

use crate::error::ConfigError;

/// The largest `limit` a log limiter accepts: 2^20 = 1,048,576 admissions per
/// window, 8 MiB of slots per key (the ring's slot and `head` codecs are
/// sized for it).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Limiter, MAX_LIMIT};
///
/// assert!(Limiter::new(MAX_LIMIT, Duration::from_secs(1)).is_ok());
/// assert!(matches!(
///     Limiter::new(MAX_LIMIT + 1, Duration::from_secs(1)),
///     Err(ConfigError::LimitTooLarge { .. })
/// ));
/// ```
pub const MAX_LIMIT: u32 = 1 << 20;

/// The longest window: 2^61 ns, about 73 years (deadlines are 62-bit
/// nanosecond counts).
///
/// ```
/// use slidelog::MAX_WINDOW;
/// assert!(MAX_WINDOW.as_secs() > 73 * 365 * 24 * 3600);
/// ```
pub const MAX_WINDOW: Duration = Duration::from_nanos(1 << 61);

/// Validates a limit.
pub(crate) fn limit(limit: u32) -> Result<u32, ConfigError> {
    if limit == 0 {
        return Err(ConfigError::ZeroLimit);
    }
    if limit > MAX_LIMIT {
        return Err(ConfigError::LimitTooLarge {
            limit,
            max: MAX_LIMIT,
        });
    }
    Ok(limit)
}

/// Validates a window and returns it in nanoseconds.
pub(crate) fn window_nanos(window: Duration) -> Result<u64, ConfigError> {
    if window.is_zero() {
        return Err(ConfigError::ZeroWindow);
    }
    if window > MAX_WINDOW {
        return Err(ConfigError::WindowTooLarge {
            window,
            max: MAX_WINDOW,
        });
    }
    // Fits: MAX_WINDOW is 2^61 ns.
    Ok(window.as_nanos() as u64)
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_limits() {
        assert_eq!(limit(0).unwrap_err(), ConfigError::ZeroLimit);
        assert_eq!(
            limit(MAX_LIMIT + 1).unwrap_err(),
            ConfigError::LimitTooLarge {
                limit: MAX_LIMIT + 1,
                max: MAX_LIMIT
            }
        );
        assert_eq!(
            limit(u32::MAX).unwrap_err(),
            ConfigError::LimitTooLarge {
                limit: u32::MAX,
                max: MAX_LIMIT
            }
        );
        assert!(limit(1).is_ok());
        assert!(limit(MAX_LIMIT).is_ok());
    }

    #[test]
    fn rejects_bad_windows() {
        assert_eq!(
            window_nanos(Duration::ZERO).unwrap_err(),
            ConfigError::ZeroWindow
        );
        assert_eq!(window_nanos(Duration::from_nanos(1)).unwrap(), 1);
        assert_eq!(window_nanos(MAX_WINDOW).unwrap(), 1 << 61);
        let too_long = MAX_WINDOW + Duration::from_nanos(1);
        assert_eq!(
            window_nanos(too_long).unwrap_err(),
            ConfigError::WindowTooLarge {
                window: too_long,
                max: MAX_WINDOW
            }
        );
        assert!(matches!(
            window_nanos(Duration::MAX).unwrap_err(),
            ConfigError::WindowTooLarge { .. }
        ));
    }

    #[test]
    fn errors_have_messages() {
        let msg = ConfigError::LimitTooLarge { limit: 5, max: 4 }.to_string();
        assert!(msg.contains('5') && msg.contains('4'), "{msg}");
        assert!(ConfigError::ZeroWindow.to_string().contains("window"));
    }
}
