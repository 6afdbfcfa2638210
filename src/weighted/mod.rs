//! An exact weighted sliding-window log: budgets of units (tokens, bytes,
//! compute time) per window, with limits up to `u32::MAX`, charges after
//! the fact and reservations.
//!
//! A [`WeightedLog`] keeps one entry per call — its effective time and its
//! units — and a window's **usage** is the sum of the units of the entries
//! live in it at `t` (time `> t - W`). Memory grows with the calls in the
//! window, not with the units: 16 bytes an entry (see "Memory"), where the
//! unit ring of a [`Limiter`](crate::Limiter) keeps 8 bytes per unit of
//! limit and refuses limits above [`MAX_LIMIT`](crate::MAX_LIMIT).
//!
//! ```
//! use std::time::Duration;
//! use slidelog::weighted::WeightedLog;
//!
//! // 5,000,000 tokens a day.
//! let budget = WeightedLog::new(5_000_000, Duration::from_secs(86_400))?;
//! // A request that will use about 2,000 tokens: hold them.
//! let held = budget.reserve_at(2_000, 0).unwrap();
//! // It used 1,200: 800 go back, as if 1,200 had been taken at 0.
//! held.commit_at(1_200, 5);
//! assert_eq!(budget.usage_at(5).used(), 1_200);
//! // A streamed response whose size is known only at the end: charged
//! // whatever the room.
//! let usage = budget.charge_at(4_999_000, 9);
//! assert_eq!((usage.used(), usage.overdrawn()), (5_000_200, 200));
//! // While the window is overdrawn, even a check of nothing answers over.
//! assert!(budget.check_n_at(0, 10).is_err());
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! # The specification
//!
//! Called sequentially with non-decreasing times, a log of policies
//! `(L_i, W_i)` answers every call as this reference does (the *weighted
//! deque*, `tests/weighted.rs`): a deque of entries `(t, units)`, one per
//! recorded call, and
//!
//! * [`check_n_at`](WeightedLog::check_n_at)`(n, now)` admits iff
//!   `used_i(t) + n <= L_i` for **every** policy `i`, where `used_i(t)` sums
//!   the entries with time `> t - W_i`, and then records `(t, n)`; a denial
//!   records nothing. All or nothing across the policies, as the unit
//!   ring's several policies are: a request one policy refuses records
//!   nothing in the others. `n > min L_i` is
//!   [`ExceedsLimit`](crate::DenyReason::ExceedsLimit) (the policy with the
//!   smallest limit); otherwise a denial's
//!   [`retry_after`](crate::Denied::retry_after) is exact — the latest, over
//!   the violated policies, of the time enough of the window's oldest
//!   entries have left it for `n` to fit, counted from `now`, and
//!   [`Denied::policy`](crate::Denied::policy) the first such policy on a
//!   tie — and an admission's [`remaining`](crate::Admitted::remaining) is
//!   the least `L_i - used_i - n` (its [`policy`](crate::Admitted::policy)
//!   the first with that least). A check of `0` units records nothing and
//!   answers over while some window is overdrawn (`used_i > L_i`).
//! * [`peek_n_at`](WeightedLog::peek_n_at) answers as `check_n_at` and
//!   records nothing.
//! * [`charge_at`](WeightedLog::charge_at)`(n, now)` records `(t, n)`
//!   whatever the room — the work already happened — and returns the
//!   [`Usage`] after it: a window may be overdrawn, and remembers it
//!   exactly until those entries leave it.
//! * [`reserve_at`](WeightedLog::reserve_at)`(n, now)` is `check_n_at`
//!   whose admission is held by a [`Reservation`];
//!   [`commit_at`](Reservation::commit_at)`(m, now)` with `m <= n` sets the
//!   reservation's entry to `m` units (every window's usage becomes as if
//!   `m` had been admitted at the reservation's time); with `m > n` it
//!   leaves the `n` in place and charges `m - n` at the commit's time;
//!   [`cancel`](Reservation::cancel) sets it to 0; dropping it keeps all `n`.
//!
//! `t`, the **effective time**, is `max(now, newest)`, where `newest` is
//! the time of the newest recorded entry (the unit ring's clamp,
//! docs/design.md §2): times along the log never decrease, whatever the
//! callers' readings, and every guarantee below is stated on these times
//! ([`Admitted::at`](crate::Admitted::at), [`Usage::at`]). `now` is also
//! clamped to `u64::MAX - W` for the longest window `W`, so that no `t + W`
//! overflows.
//!
//! **Why the excess of a commit is charged at the commit's time.** The
//! reservation admitted `n` at `t_r`; the call then used `m > n`. The units
//! beyond `n` were never judged against the window: they are work that
//! already happened, which is what a charge records, at the time it
//! becomes known. Recording them at `t_r` instead would add units to a
//! past that other calls' decisions between `t_r` and the commit were
//! judged on, and would let them leave the window earlier (at `t_r + W`)
//! than any charge of the same work would: charging at the commit keeps
//! the log a record in time order, its usage never less than that
//! alternative's at any time.
//!
//! # The per-key capacity, and when a denial can be spurious
//!
//! The log holds at most `C` entries ([`WeightedBuilder::capacity`],
//! [`DEFAULT_CAPACITY`] by default; calls at the same effective time share
//! one entry). When recording would make `C + 1`, after dropping what has
//! left the longest window, the two **oldest** entries merge into one
//! stamped with the **newer** one's time.
//!
//! **Never an over-admission.** A merge moves units only to a later time,
//! so each unit is counted in every window at least as long as it would
//! have been: at every time and for every policy, the log's usage is at
//! least the exact usage of the same records. An admission needs
//! `used + n <= L` on the log's usage, so the exact usage admits it too:
//! every admission is one the exact log of the same records would make
//! (the property test `merging_never_admits_what_the_exact_log_denies`
//! checks it, with capacities of 1 to 6 entries).
//!
//! **When a denial can be spurious.** Only the front entry is ever a merge
//! (a merge takes the front and the next, and the result is the front); so
//! the log's usage exceeds the exact usage at `t` in policy `i` only if
//! the front holds units of calls older than `t - W_i` while its stamp
//! `s` is live: `s > t - W_i`. The last merge that stamped `s` happened
//! when the log held `C + 1` entries, all live in the longest window: the
//! two merged, the newer of them at `s`, and `C - 1` newer still (the one
//! being recorded among them). Entries at `s` and after leave no window
//! before the front does; so `(t - W_i, t]` holds recorded calls at `C`
//! distinct effective times or more (a cancelled reservation counts as
//! a call at its time). Hence:
//!
//! * **A window that holds recorded calls at fewer than `C` distinct
//!   effective times is counted exactly**, and a denial by it is the exact
//!   log's; a denial's wait is the log's own (exact for what it counts, so
//!   never shorter than the exact log's);
//! * otherwise the log over-counts it by at most the front's units whose
//!   calls have left the window, and each unit is counted at most until
//!   the time it was merged into (the `C`-th newest call's time when the
//!   merge happened) plus `W_i`.
//!
//! A caller who wants no spurious denial at all gives each key a capacity
//! above the most calls its windows can hold (for one policy, `L` calls
//! when every call takes a unit; `L / n_min` when every call takes at
//! least `n_min` units).
//!
//! # Concurrency: a short critical section
//!
//! One lock per log (per key), held for one decision: seek the per-policy
//! sums to `t` (each entry crossed once per policy as time moves on),
//! compare, append or add to one entry. A denial's wait walks the oldest
//! live entries of the violated policies, and a merge, a purge or a
//! reservation's return touches one entry and the sums. No lock is shared
//! between keys; no call waits on anything but that lock, and the lock is
//! never held across a clock read, an allocation of another log or a call
//! back into the caller.
//!
//! A lock, not the unit ring's compare-and-swap, because a weighted
//! decision reads a *sum*: the unit ring admits `n` units by reading the
//! one slot, admission `c + n - 1 - L`, whose expiry decides everything,
//! and commits with one CAS on the next slot. Here the deciding quantity is
//! the sum of a variable number of entries of arbitrary weight, and a
//! reservation's return changes an entry anywhere in the window. Making
//! that lock-free would need a multi-word snapshot of the window and its
//! sums committed atomically with the append (or one word per unit, which
//! is the ring this log exists to avoid). In the common case the critical
//! section moves each policy's start past the entries that left, compares
//! and appends: a few loads and stores per policy, no allocation but the
//! buffer's amortised growth. Its cost is that a thread descheduled while
//! holding it blocks the other calls of that one key (the unit ring's P8
//! progress does not hold here).
//!
//! To measure, beside the unit ring's `check_n_at` on one key: an
//! uncontended `check_n_at` and `charge_at` on a log of 100 live entries
//! and of `C` (a full log); the same with 2 threads on one key and on two
//! keys; a denial with a full log (its wait walks the window's entries);
//! a `reserve_at` followed by `commit_at(m < n)`.
//!
//! The loom models in `loom-tests/tests/weighted.rs` check two admitters
//! racing on one log, a charge racing a check and a reservation's commit
//! racing a check, against every sequential order; their negative control
//! decides under the lock and records under a second one, and loom finds
//! the interleaving where both admitters get in.
//!
//! # Memory
//!
//! A log of `P` policies takes `size_of::<WeightedLog>()` inline (120
//! bytes on 64-bit Linux), 32 bytes per policy on the heap (its limit and
//! window, its running sum and first live entry), and 16 bytes per entry
//! (an `(u64 time, u64 units)` pair) in a buffer that grows with the live
//! entries and gives memory back when they fall below a quarter of it:
//! [`WeightedLog::bytes`] reports the total. At one policy of 10^6 units a
//! minute and 100 calls a minute, it is 2,200 bytes (measured: a buffer
//! of 128 entries; 16.5 KB at 1,000 calls a minute); the unit ring for the
//! same limit keeps `8 × 10^6` bytes, 8 MB, per key. For limits of at most
//! 2^20 units where calls take a unit or a few, the ring is smaller (8
//! bytes per unit of limit against 16 per call) and lock-free; for large
//! budgets spent by few heavy calls, this log.

mod entries;

use core::num::NonZeroUsize;
use core::ops::DerefMut;
use std::sync::PoisonError;
use std::time::Duration;

use self::entries::{Entries, Rule};
use crate::config::MAX_WINDOW;
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::policy::{MAX_POLICIES, Policy};
use crate::sync::Mutex;

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

/// An exact weighted sliding-window log of one or several policies (see
/// the [module docs](self)).
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
    rules: Box<[Rule]>,
    /// The smallest limit and the first policy that has it.
    min_limit: u32,
    min_policy: u8,
    /// The latest `now` judged (so that `t + W` never overflows).
    max_now: u64,
    capacity: usize,
    entries: Mutex<Entries>,
    #[cfg(slidelog_loom)]
    flaw: loom_hooks::WeightedFlaw,
}

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

/// What a window holds after a [`charge_at`](WeightedLog::charge_at), a
/// [`commit_at`](Reservation::commit_at) or a
/// [`usage_at`](WeightedLog::usage_at): the usage of the policy with the
/// least room left (the first such), which may be past its limit.
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
    at: u64,
    used: u64,
    limit: u32,
    policy: u32,
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

/// Units held by [`WeightedLog::reserve_at`]: admitted, and recorded, at
/// the reservation's time, until [`commit_at`](Self::commit_at) says how
/// many were used. Dropping it without a commit keeps all of them (the
/// work may have happened); [`cancel`](Self::cancel) returns them all.
///
/// ```
/// use std::time::Duration;
/// use slidelog::weighted::WeightedLog;
///
/// let log = WeightedLog::new(1_000, Duration::from_secs(60))?;
/// let held = log.reserve_at(800, 0).unwrap();
/// assert!(log.check_n_at(300, 1).is_err()); // held
/// held.cancel();
/// assert!(log.check_n_at(300, 2).is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping a reservation keeps all its units: commit or cancel it"]
pub struct Reservation<'a> {
    log: &'a WeightedLog,
    admitted: Admitted,
    units: u32,
}

impl Reservation<'_> {
    /// The units held.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// assert_eq!(log.reserve_at(4, 0).unwrap().units(), 4);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn units(&self) -> u32 {
        self.units
    }

    /// The admission that holds them: its effective time and the room
    /// left after it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// let held = log.reserve_at(4, 3).unwrap();
    /// assert_eq!((held.admitted().at(), held.admitted().remaining()), (3, 6));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn admitted(&self) -> Admitted {
        self.admitted
    }

    /// Settles the reservation at `used` units, at `now`. Up to the units
    /// held, the rest goes back at the reservation's time: every window's
    /// usage becomes exactly as if `used` had been admitted then (nothing
    /// is taken back from units that already left every window). Beyond
    /// them, the excess is charged at `now`, whatever the room (see the
    /// module docs for why at `now`). Returns the usage after it at `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(1_000, Duration::from_nanos(100))?;
    /// log.reserve_at(500, 0).unwrap().commit_at(200, 10);
    /// assert_eq!(log.usage_at(10).used(), 200);
    /// // Used more than held: the 300 beyond are charged at 50, and stay
    /// // after the reservation's 500 leave at 120.
    /// let usage = log.reserve_at(500, 20).unwrap().commit_at(800, 50);
    /// assert_eq!(usage.used(), 1_000);
    /// assert_eq!(log.usage_at(100).used(), 800);
    /// assert_eq!(log.usage_at(120).used(), 300);
    /// assert_eq!(log.usage_at(150).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn commit_at(self, used: u32, now: u64) -> Usage {
        let log = self.log;
        let mut entries = log.lock();
        if used <= self.units {
            entries.give_back(self.admitted.at, u64::from(self.units - used));
            log.usage(&mut entries, now)
        } else {
            log.charge(&mut entries, used - self.units, now)
        }
    }

    /// Returns every unit held, at the reservation's time: the windows
    /// are as if it had never been admitted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// log.reserve_at(10, 0).unwrap().cancel();
    /// assert_eq!(log.usage_at(0).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn cancel(self) {
        self.log
            .lock()
            .give_back(self.admitted.at, u64::from(self.units));
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

    fn lock(&self) -> impl DerefMut<Target = Entries> + '_ {
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

    fn charge(&self, entries: &mut Entries, n: u32, now: u64) -> Usage {
        let t = self.effective(entries, now).1;
        entries.seek(t, &self.rules);
        if n > 0 {
            entries.record(t, u64::from(n), &self.rules, self.capacity);
        }
        self.usage(entries, now)
    }

    fn usage(&self, entries: &mut Entries, now: u64) -> Usage {
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

/// Only under `--cfg slidelog_loom`: the log's deliberately broken variant.
#[cfg(slidelog_loom)]
#[doc(hidden)]
pub mod loom_hooks {
    /// A deliberately broken step of [`super::WeightedLog`] (model checker
    /// only).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub enum WeightedFlaw {
        /// The log as designed.
        #[default]
        None,
        /// Decide and record in two critical sections: a racing call can
        /// record between the two, and both admit against the same room.
        SplitSection,
    }
}
