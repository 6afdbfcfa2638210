//! Several policies on one ring: "10 per second **and** 100 per minute",
//! exactly and all or nothing.
//!
//! A ring of the largest limit `L` holds every admission any of the
//! policies needs: policy `(L_i, W_i)` admits `n` units at admission index
//! `c` iff admission `c + n - 1 - L_i` has left its window, and that
//! admission is one of the last `L >= L_i`. So one ring, one set of slot
//! reads and one compare-and-swap commit a request against every policy at
//! once (see `ring/multi.rs`), where chained limiters leak units: a
//! chain consumes a unit from the first limiter even when a later one
//! rejects.

use core::fmt;
use std::time::Duration;

/// The most policies one limiter (or one key's [`Quota`](crate::Quota))
/// checks at once: the most one ring serves.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Limiter, MAX_POLICIES};
///
/// let mut builder = Limiter::builder(1, Duration::from_secs(1));
/// for i in 1..=MAX_POLICIES as u32 {
///     builder = builder.and(i + 1, Duration::from_secs(u64::from(i) + 1));
/// }
/// assert_eq!(
///     builder.build().unwrap_err(),
///     ConfigError::TooManyPolicies { count: MAX_POLICIES + 1, max: MAX_POLICIES }
/// );
/// ```
pub const MAX_POLICIES: usize = 8;

/// One policy: at most `limit` admissions in any window of length `window`.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, Policy};
///
/// let limiter = Limiter::builder(10, Duration::from_secs(1))
///     .and(100, Duration::from_secs(60))
///     .build()?;
/// assert_eq!(limiter.policies()[1], Policy::new(100, Duration::from_secs(60)));
/// assert_eq!(limiter.policies()[1].to_string(), "100 per 60s");
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Policy {
    /// Admissions allowed in any window.
    pub limit: u32,
    /// The window.
    pub window: Duration,
}

impl Policy {
    /// `limit` per `window` (validated when a limiter or [`Quota`](crate::Quota) is built).
    pub const fn new(limit: u32, window: Duration) -> Self {
        Policy { limit, window }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.limit, self.window)
    }
}
