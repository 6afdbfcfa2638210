//! Building a [`WeightedLog`]: its policies, validated, and its capacity.

use core::num::NonZeroUsize;
use std::time::Duration;

use super::entries::{Entries, Rule};
use super::log::WeightedLog;
use crate::config::MAX_WINDOW;
use crate::error::ConfigError;
use crate::policy::{MAX_POLICIES, Policy};
use crate::sync::Mutex;

#[cfg(slidelog_loom)]
use super::loom_hooks;

/// The entries a [`WeightedLog`] keeps before it merges its oldest two
/// (16 bytes each: 64 KiB at most per log).
///
/// ```
/// use std::time::Duration;
/// use slidelog::weighted::{DEFAULT_CAPACITY, WeightedLog};
///
/// let log = WeightedLog::new(1_000_000, Duration::from_secs(60))?;
/// assert_eq!(log.capacity(), DEFAULT_CAPACITY);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub const DEFAULT_CAPACITY: usize = 4096;

/// Builds a [`WeightedLog`] of several policies or another capacity.
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use slidelog::weighted::WeightedLog;
///
/// let log = WeightedLog::builder(u32::MAX, Duration::from_secs(3600))
///     .and(100_000_000, Duration::from_secs(60))
///     .capacity(NonZeroUsize::new(256).unwrap())
///     .build()?;
/// assert_eq!((log.policies().len(), log.capacity()), (2, 256));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until built"]
pub struct WeightedBuilder {
    policies: Vec<Policy>,
    capacity: NonZeroUsize,
}

impl WeightedBuilder {
    /// Adds a policy: at most `limit` units in any window of `window` too.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::builder(10, Duration::from_secs(1))
    ///     .and(15, Duration::from_secs(60))
    ///     .build()?;
    /// log.check_n_at(10, 0).unwrap();
    /// // The second later, the minute's policy has 5 left.
    /// assert_eq!(log.check_n_at(5, 1_000_000_000).unwrap().policy(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn and(mut self, limit: u32, window: Duration) -> Self {
        self.policies.push(Policy::new(limit, window));
        self
    }

    /// The most entries the log keeps before merging its two oldest
    /// (see the module docs: merges never over-admit, and cannot deny
    /// spuriously while the windows hold calls at fewer than `capacity`
    /// distinct times).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::builder(100, Duration::from_nanos(10))
    ///     .capacity(NonZeroUsize::new(2).unwrap())
    ///     .build()?;
    /// for t in 0..5 {
    ///     log.charge_at(1, t);
    /// }
    /// assert_eq!(log.len(), 2);
    /// // Nothing is lost: all 5 units are counted.
    /// assert_eq!(log.usage_at(5).used(), 5);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn capacity(mut self, capacity: NonZeroUsize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The log, or why the policies are invalid.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`], [`ConfigError::ZeroWindow`],
    /// [`ConfigError::WindowTooLarge`] (above
    /// [`MAX_WINDOW`]) for a policy, and
    /// [`ConfigError::TooManyPolicies`] for more than
    /// [`MAX_POLICIES`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::ConfigError;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let err = WeightedLog::builder(0, Duration::from_secs(1)).build().unwrap_err();
    /// assert_eq!(err, ConfigError::ZeroLimit);
    /// ```
    pub fn build(self) -> Result<WeightedLog, ConfigError> {
        if self.policies.len() > MAX_POLICIES {
            return Err(ConfigError::TooManyPolicies {
                count: self.policies.len(),
                max: MAX_POLICIES,
            });
        }
        let mut rules = Vec::with_capacity(self.policies.len());
        for policy in &self.policies {
            if policy.limit == 0 {
                return Err(ConfigError::ZeroLimit);
            }
            if policy.window.is_zero() {
                return Err(ConfigError::ZeroWindow);
            }
            if policy.window > MAX_WINDOW {
                return Err(ConfigError::WindowTooLarge {
                    window: policy.window,
                    max: MAX_WINDOW,
                });
            }
            rules.push(Rule {
                limit: u64::from(policy.limit),
                window: policy.window.as_nanos() as u64,
            });
        }
        let (min_policy, min_limit) = self
            .policies
            .iter()
            .enumerate()
            .min_by_key(|&(i, p)| (p.limit, i))
            .map(|(i, p)| (i as u8, p.limit))
            .expect("at least one policy");
        let longest = rules.iter().map(|r| r.window).max().unwrap_or(0);
        Ok(WeightedLog {
            entries: Mutex::new(Entries::new(rules.len())),
            rules: rules.into_boxed_slice(),
            min_limit,
            min_policy,
            max_now: u64::MAX - longest,
            capacity: self.capacity.get(),
            #[cfg(slidelog_loom)]
            flaw: loom_hooks::WeightedFlaw::None,
        })
    }
}

impl WeightedLog {
    /// A log of one policy: at most `limit` units in any window of
    /// `window`, with the [`DEFAULT_CAPACITY`].
    ///
    /// # Errors
    ///
    /// As [`WeightedBuilder::build`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(u32::MAX, Duration::from_secs(86_400))?;
    /// assert!(log.check_n_at(u32::MAX, 0).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(limit: u32, window: Duration) -> Result<WeightedLog, ConfigError> {
        Self::builder(limit, window).build()
    }

    /// A builder whose first policy is `limit` per `window`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::builder(10, Duration::from_secs(1)).build()?;
    /// assert_eq!(log.policies().len(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn builder(limit: u32, window: Duration) -> WeightedBuilder {
        WeightedBuilder {
            policies: vec![Policy::new(limit, window)],
            capacity: NonZeroUsize::new(DEFAULT_CAPACITY).expect("nonzero"),
        }
    }
}
