//! [`RedisLimitError`]: why a call failed.

use core::fmt;
use std::time::Duration;

use crate::decision::Denied;
use crate::error::ConfigError;

/// Why a Redis check failed.
///
/// ```
/// use std::time::Duration;
/// use slidelog::redis::RedisLimitError;
/// let e = RedisLimitError::Timeout(Duration::from_millis(5));
/// assert!(e.to_string().contains("5ms"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// The limit or window is invalid.
    Config(ConfigError),
    /// Redis answered with an error, or the connection failed.
    Redis(::redis::RedisError),
    /// No answer within the configured timeout.
    Timeout(Duration),
    /// The script answered something unexpected.
    Protocol(String),
    /// A wait
    /// ([`RedisLimiter::until_n_ready`](super::RedisLimiter::until_n_ready))
    /// for a request that can never be admitted (more units than the
    /// limit).
    Refused(Denied),
    /// The key is longer than the builder's
    /// [`max_key_len`](super::RedisBuilder::max_key_len): refused before
    /// any round trip (a client-chosen key of hundreds of KiB per client
    /// would otherwise fill Redis's memory, and this process's pre-check
    /// map).
    KeyTooLong {
        /// The key's length in bytes.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// As many round trips as the builder's
    /// [`max_in_flight`](super::RedisBuilder::max_in_flight) were waiting
    /// for Redis: refused at once, nothing sent.
    Overloaded {
        /// The configured maximum.
        max_in_flight: usize,
    },
}

impl fmt::Display for RedisLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisLimitError::Config(e) => write!(f, "invalid configuration: {e}"),
            RedisLimitError::Redis(e) => write!(f, "redis: {e}"),
            RedisLimitError::Timeout(t) => write!(f, "redis did not answer within {t:?}"),
            RedisLimitError::Protocol(m) => write!(f, "unexpected answer from the script: {m}"),
            RedisLimitError::Refused(denied) => write!(f, "refused: {denied}"),
            RedisLimitError::Overloaded { max_in_flight } => write!(
                f,
                "{max_in_flight} calls already wait for redis (max_in_flight): refused at once"
            ),
            RedisLimitError::KeyTooLong { len, max } => {
                write!(
                    f,
                    "rate-limit key of {len} bytes is longer than the maximum of {max}"
                )
            }
        }
    }
}

impl std::error::Error for RedisLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisLimitError::Config(e) => Some(e),
            RedisLimitError::Redis(e) => Some(e),
            RedisLimitError::Refused(d) => Some(d),
            _ => None,
        }
    }
}

impl From<::redis::RedisError> for RedisLimitError {
    fn from(e: ::redis::RedisError) -> Self {
        RedisLimitError::Redis(e)
    }
}

impl From<ConfigError> for RedisLimitError {
    fn from(e: ConfigError) -> Self {
        RedisLimitError::Config(e)
    }
}
