//! [`WeightedLog`] and its calls: one lock per log, held for one decision.

use core::ops::DerefMut;
use std::sync::PoisonError;
use std::time::Duration;

use super::entries::{Entries, Rule};
use super::reservation::Reservation;
use super::usage::Usage;
use crate::decision::{Admitted, Denied};
use crate::policy::Policy;
use crate::sync::Mutex;

#[cfg(slidelog_loom)]
use super::loom_hooks;

/// An exact weighted sliding-window log of one or several policies (see
/// the [module docs](crate::weighted)).
///
/// Time is an argument, in nanoseconds on the caller's clock (as the
/// `_at` forms of [`Limiter`](crate::Limiter) take it); the log never reads
/// a clock.
///
/// ```
/// use std::time::Duration;
/// use slidelog::weighted::WeightedLog;
///
/// // 1,000 tokens per second and 20,000 per minute, all or nothing.
/// let log = WeightedLog::builder(1_000, Duration::from_secs(1))
///     .and(20_000, Duration::from_secs(60))
///     .build()?;
/// assert_eq!(log.check_n_at(600, 0).unwrap().remaining(), 400);
/// let denied = log.check_n_at(600, 500_000_000).unwrap_err();
/// // The 600 leave the one-second window at 1 s: 0.5 s from now.
/// assert_eq!(denied.retry_after(), Duration::from_millis(500));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct WeightedLog {
    pub(super) rules: Box<[Rule]>,
    /// The smallest limit and the first policy that has it.
    pub(super) min_limit: u32,
    pub(super) min_policy: u8,
    /// The latest `now` judged (so that `t + W` never overflows).
    pub(super) max_now: u64,
    pub(super) capacity: usize,
    pub(super) entries: Mutex<Entries>,
    #[cfg(slidelog_loom)]
    pub(super) flaw: loom_hooks::WeightedFlaw,
}

impl WeightedLog {
    /// The policies, in the order given.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Policy;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(5, Duration::from_secs(2))?;
    /// assert_eq!(log.policies(), vec![Policy::new(5, Duration::from_secs(2))]);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn policies(&self) -> Vec<Policy> {
        self.rules
            .iter()
            .map(|r| Policy::new(r.limit as u32, Duration::from_nanos(r.window)))
            .collect()
    }

    /// The most entries kept before the two oldest merge.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::{DEFAULT_CAPACITY, WeightedLog};
    /// let log = WeightedLog::new(5, Duration::from_secs(2))?;
    /// assert_eq!(log.capacity(), DEFAULT_CAPACITY);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries held (calls at distinct effective times still inside the
    /// longest window as of the newest entry, at most
    /// [`capacity`](Self::capacity)). A snapshot under concurrency.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_nanos(10))?;
    /// log.charge_at(5, 0);
    /// log.charge_at(5, 0); // the same instant: one entry
    /// log.charge_at(5, 3);
    /// assert_eq!(log.len(), 2);
    /// log.charge_at(5, 13); // the two older ones have left
    /// assert_eq!(log.len(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the log holds no entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_nanos(10))?;
    /// assert!(log.is_empty());
    /// log.charge_at(5, 0);
    /// assert!(!log.is_empty());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the log takes: itself, its policies and sums, and its entries'
    /// buffer (16 bytes an entry, the buffer's allocated size).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// // 10^6 tokens a minute, 100 calls in the minute.
    /// let log = WeightedLog::new(1_000_000, Duration::from_secs(60))?;
    /// for call in 0..100u64 {
    ///     log.charge_at(10_000, call * 600_000_000);
    /// }
    /// assert!(log.bytes() < 2_500); // the unit ring: 8,000,000
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn bytes(&self) -> usize {
        size_of::<Self>() + self.rules.len() * size_of::<Rule>() + self.lock().heap_bytes()
    }

    /// Admits `n` units at `now` iff every policy's window has room for
    /// them (`used + n <= limit`), recording them; a denial records
    /// nothing. A check of 0 units answers over while a window is
    /// overdrawn.
    ///
    /// # Errors
    ///
    /// [`Denied`]: [`RateLimited`](crate::DenyReason::RateLimited) with the
    /// exact wait, or [`ExceedsLimit`](crate::DenyReason::ExceedsLimit) for
    /// more units than the smallest limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(100, Duration::from_nanos(50))?;
    /// assert_eq!(log.check_n_at(70, 0).unwrap().remaining(), 30);
    /// assert_eq!(log.check_n_at(20, 10).unwrap().remaining(), 10);
    /// // 40 fit once the 70 leave, at 50.
    /// assert_eq!(log.check_n_at(40, 20).unwrap_err().retry_after_nanos(), 30);
    /// assert!(log.check_n_at(40, 50).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        #[cfg(slidelog_loom)]
        if self.flaw == loom_hooks::WeightedFlaw::SplitSection {
            return self.check_split(n, now);
        }
        let mut entries = self.lock();
        let decision = self.judge(&mut entries, n, now);
        if let Ok(admitted) = decision
            && n > 0
        {
            entries.record(admitted.at, u64::from(n), &self.rules, self.capacity);
        }
        decision
    }

    /// What [`check_n_at`](Self::check_n_at) would answer, recording
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`check_n_at`](Self::check_n_at).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_secs(1))?;
    /// assert_eq!(log.peek_n_at(60, 0).unwrap().remaining(), 40);
    /// assert!(log.peek_n_at(101, 0).is_err());
    /// assert_eq!(log.usage_at(0).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let mut entries = self.lock();
        self.judge(&mut entries, n, now)
    }

    /// Records `n` units at `now` whatever the room — the work already
    /// happened — and returns the usage after it. A window may be
    /// overdrawn: it remembers it exactly until those entries leave.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(100, Duration::from_nanos(50))?;
    /// assert_eq!(log.charge_at(150, 0).overdrawn(), 50);
    /// let denied = log.check_n_at(0, 10).unwrap_err();
    /// assert_eq!(denied.retry_after_nanos(), 40); // the 150 leave at 50
    /// assert!(log.check_n_at(100, 50).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn charge_at(&self, n: u32, now: u64) -> Usage {
        let mut entries = self.lock();
        self.charge(&mut entries, n, now)
    }

    /// Admits `n` units as [`check_n_at`](Self::check_n_at) does and holds
    /// them in a [`Reservation`], to be settled by
    /// [`commit_at`](Reservation::commit_at) or
    /// [`cancel`](Reservation::cancel).
    ///
    /// # Errors
    ///
    /// As [`check_n_at`](Self::check_n_at); a denial holds nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(4_000, Duration::from_secs(60))?;
    /// let held = log.reserve_at(3_000, 0).unwrap();
    /// assert!(log.reserve_at(3_000, 1).is_err());
    /// held.commit_at(1_000, 2); // 2,000 back
    /// assert!(log.reserve_at(3_000, 3).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reserve_at(&self, n: u32, now: u64) -> Result<Reservation<'_>, Denied> {
        let admitted = self.check_n_at(n, now)?;
        Ok(Reservation {
            log: self,
            admitted,
            units: n,
        })
    }

    /// The usage at `now` of the policy with the least room, recording
    /// nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(100, Duration::from_nanos(10))?;
    /// log.charge_at(30, 0);
    /// assert_eq!(log.usage_at(9).used(), 30);
    /// assert_eq!(log.usage_at(10).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn usage_at(&self, now: u64) -> Usage {
        let mut entries = self.lock();
        self.usage(&mut entries, now)
    }

    /// The units live at `now` in policy `policy`'s window (`None` for no
    /// such policy), recording nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::builder(100, Duration::from_nanos(10))
    ///     .and(1_000, Duration::from_nanos(100))
    ///     .build()?;
    /// log.charge_at(30, 0);
    /// assert_eq!(log.used_at(0, 20), Some(0));
    /// assert_eq!(log.used_at(1, 20), Some(30));
    /// assert_eq!(log.used_at(2, 20), None);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn used_at(&self, policy: usize, now: u64) -> Option<u64> {
        if policy >= self.rules.len() {
            return None;
        }
        let mut entries = self.lock();
        let t = self.effective(&entries, now).1;
        entries.seek(t, &self.rules);
        Some(entries.used(policy))
    }

    pub(super) fn lock(&self) -> impl DerefMut<Target = Entries> + '_ {
        // A panic under the lock (none is expected: the section allocates
        // at most) leaves the entries and sums consistent at every step
        // that can unwind (the buffer's growth), so a poisoned log is
        // still sound.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The caller's reading, clamped so that `t + W` fits, and the
    /// effective time `max(read, newest)`.
    fn effective(&self, entries: &Entries, now: u64) -> (u64, u64) {
        let read = now.min(self.max_now);
        (read, read.max(entries.newest()))
    }

    /// The decision for `n` units at `now`, recording nothing.
    fn judge(&self, entries: &mut Entries, n: u32, now: u64) -> Result<Admitted, Denied> {
        if n > self.min_limit {
            return Err(Denied::exceeds_limit(n, self.min_limit).with_policy(self.min_policy));
        }
        let (read, t) = self.effective(entries, now);
        entries.seek(t, &self.rules);
        let n = u64::from(n);
        let mut denied: Option<(u64, usize)> = None;
        let mut left: Option<(u64, usize)> = None;
        for (i, rule) in self.rules.iter().enumerate() {
            let total = entries.used(i) + n;
            if total > rule.limit {
                let until = entries.until(i, total - rule.limit, rule.window);
                if denied.is_none_or(|(u, _)| until > u) {
                    denied = Some((until, i));
                }
            } else {
                let room = rule.limit - total;
                if left.is_none_or(|(r, _)| room < r) {
                    left = Some((room, i));
                }
            }
        }
        if let Some((until, policy)) = denied {
            return Err(Denied::rate_limited(until - read).with_policy(policy as u8));
        }
        let (remaining, policy) = left.expect("at least one policy");
        Ok(Admitted {
            at: t,
            remaining: remaining as u32,
            policy: policy as u32,
        })
    }

    pub(super) fn charge(&self, entries: &mut Entries, n: u32, now: u64) -> Usage {
        let t = self.effective(entries, now).1;
        entries.seek(t, &self.rules);
        if n > 0 {
            entries.record(t, u64::from(n), &self.rules, self.capacity);
        }
        self.usage(entries, now)
    }

    pub(super) fn usage(&self, entries: &mut Entries, now: u64) -> Usage {
        let t = self.effective(entries, now).1;
        entries.seek(t, &self.rules);
        let mut least: Option<(i128, usize)> = None;
        for (i, rule) in self.rules.iter().enumerate() {
            let room = i128::from(rule.limit) - i128::from(entries.used(i));
            if least.is_none_or(|(r, _)| room < r) {
                least = Some((room, i));
            }
        }
        let (_, policy) = least.expect("at least one policy");
        Usage {
            at: t,
            used: entries.used(policy),
            limit: self.rules[policy].limit as u32,
            policy: policy as u32,
        }
    }
}

#[cfg(slidelog_loom)]
impl WeightedLog {
    /// This log with protocol variant `flaw` (model checker only).
    #[doc(hidden)]
    pub fn with_flaw(mut self, flaw: loom_hooks::WeightedFlaw) -> Self {
        self.flaw = flaw;
        self
    }

    /// [`loom_hooks::WeightedFlaw::SplitSection`]: decides under the lock,
    /// lets it go, and records under a second one without judging again.
    fn check_split(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let decision = {
            let mut entries = self.lock();
            self.judge(&mut entries, n, now)
        };
        if let Ok(admitted) = decision
            && n > 0
        {
            let mut entries = self.lock();
            let t = admitted.at.max(entries.newest());
            entries.seek(t, &self.rules);
            entries.record(t, u64::from(n), &self.rules, self.capacity);
        }
        decision
    }
}
