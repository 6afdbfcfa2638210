//! [`Usage`]: what a window holds after a charge, a commit or a reading.

/// What a window holds after a
/// [`charge_at`](super::WeightedLog::charge_at), a
/// [`commit_at`](super::Reservation::commit_at) or a
/// [`usage_at`](super::WeightedLog::usage_at): the usage of the policy with
/// the least room left (the first such), which may be past its limit.
///
/// ```
/// use std::time::Duration;
/// use slidelog::weighted::WeightedLog;
///
/// let log = WeightedLog::new(100, Duration::from_secs(1))?;
/// let usage = log.charge_at(130, 7);
/// assert_eq!((usage.at(), usage.used(), usage.limit()), (7, 130, 100));
/// assert_eq!((usage.remaining(), usage.overdrawn(), usage.policy()), (0, 30, 0));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Usage {
    pub(super) at: u64,
    pub(super) used: u64,
    pub(super) limit: u32,
    pub(super) policy: u32,
}

impl Usage {
    /// The effective time it was read at.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_secs(1))?;
    /// log.charge_at(1, 50);
    /// // A reading before the newest entry is judged at the newest entry.
    /// assert_eq!(log.charge_at(1, 20).at(), 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn at(&self) -> u64 {
        self.at
    }

    /// The units live in [`policy`](Self::policy)'s window.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_nanos(10))?;
    /// log.charge_at(40, 0);
    /// assert_eq!(log.charge_at(2, 9).used(), 42);
    /// assert_eq!(log.usage_at(10).used(), 2); // the 40 left at 10
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn used(&self) -> u64 {
        self.used
    }

    /// That policy's limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_secs(1))?;
    /// assert_eq!(log.usage_at(0).limit(), 100);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The index of the policy with the least room left (in the order
    /// given, 0 = the first; the first such on a tie).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::builder(100, Duration::from_secs(1))
    ///     .and(50, Duration::from_secs(60))
    ///     .build()?;
    /// assert_eq!(log.charge_at(10, 0).policy(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn policy(&self) -> usize {
        self.policy as usize
    }

    /// Units left before the limit: `limit - used`, or 0 when overdrawn.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_secs(1))?;
    /// assert_eq!(log.charge_at(30, 0).remaining(), 70);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn remaining(&self) -> u32 {
        u64::from(self.limit).saturating_sub(self.used) as u32
    }

    /// Units past the limit: `used - limit`, or 0.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_secs(1))?;
    /// assert_eq!(log.charge_at(250, 0).overdrawn(), 150);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn overdrawn(&self) -> u64 {
        self.used.saturating_sub(u64::from(self.limit))
    }
}
