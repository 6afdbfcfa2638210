//! [`Quota`]: a validated set of policies for the keys that choose it.

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;
use crate::policy::Policy;
use crate::ring::Shape;

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
    /// A bad limit or window, or more than [`MAX_POLICIES`](crate::MAX_POLICIES) policies.
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
