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
use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;
use crate::ring::{MAX_POLICIES as MAX, Shape};

/// The most policies one limiter (or one key's [`Quota`]) checks at once.
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
pub const MAX_POLICIES: usize = MAX;

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
    /// `limit` per `window` (validated when a limiter or [`Quota`] is built).
    pub const fn new(limit: u32, window: Duration) -> Self {
        Policy { limit, window }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.limit, self.window)
    }
}

/// The policies one key of a [`KeyedLimiter`](crate::KeyedLimiter) is
/// limited by, chosen per key with
/// [`KeyedBuilder::quota`](crate::KeyedBuilder::quota) (a free and a paid
/// tier, say). Validated when made, so choosing one never fails; cloning
/// one is a reference-count increment, and keys given clones of one quota
/// share its description.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Quota};
///
/// let paid = Quota::new(100, Duration::from_secs(1))?.and(5_000, Duration::from_secs(3600))?;
/// assert_eq!(paid.policies().len(), 2);
/// assert_eq!(Quota::new(0, Duration::from_secs(1)).unwrap_err(), ConfigError::ZeroLimit);
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Quota {
    pub(crate) shape: Arc<Shape>,
}

impl Quota {
    /// `limit` admissions per `window`.
    ///
    /// # Errors
    ///
    /// As [`Limiter::new`](crate::Limiter::new): a zero or too large limit
    /// or window.
    pub fn new(limit: u32, window: Duration) -> Result<Quota, ConfigError> {
        Ok(Quota {
            shape: Arc::new(Shape::single(limit, window)?),
        })
    }

    /// This quota and `limit` per `window` too.
    ///
    /// # Errors
    ///
    /// A bad limit or window, or more than [`MAX_POLICIES`] policies.
    pub fn and(self, limit: u32, window: Duration) -> Result<Quota, ConfigError> {
        let mut policies = self.shape.policies().to_vec();
        policies.push(Policy::new(limit, window));
        Ok(Quota {
            shape: Arc::new(Shape::new(&policies)?),
        })
    }

    /// The policies, in the order given.
    pub fn policies(&self) -> &[Policy] {
        self.shape.policies()
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Quota").field(&self.policies()).finish()
    }
}

impl PartialEq for Quota {
    fn eq(&self, other: &Self) -> bool {
        self.policies() == other.policies()
    }
}

impl Eq for Quota {}
