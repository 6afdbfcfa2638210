//! The calls on a key: the `check`, `admit` and `peek` families.

use super::*;

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Checks one request for `key` now. Keys may be borrowed forms, as with
    /// std maps (`&str` for `String` keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.check("10.0.0.1").is_ok());
    /// assert!(limiter.check("10.0.0.1").is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_when(
            None,
            key,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// Checks `n` units for `key` now, all or nothing (see
    /// [`Limiter::check_n`](crate::Limiter::check_n), and its cost: a
    /// slot written per unit admitted with the exact log; one step with
    /// the counter).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(1))?;
    /// assert_eq!(limiter.check_n(&1, 3).unwrap().remaining(), 2);
    /// assert!(limiter.check_n(&1, 3).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_when(
            None,
            key,
            n,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// Checks one request for `key` at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.check_at(&1, 0).is_ok());
    /// assert_eq!(limiter.check_at(&1, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at<Q>(&self, key: &Q, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_when(None, key, || now)
    }

    /// Checks `n` units for `key` at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{DenyReason, KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(2, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.check_n_at(&1, 2, 0).is_ok());
    /// assert!(matches!(
    ///     limiter.check_n_at(&1, 3, 0).unwrap_err().reason(),
    ///     DenyReason::ExceedsLimit { .. }
    /// ));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_when(None, key, n, || now)
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// the key's `remaining` next grows, from the same lookup and (with
    /// the exact log) the same pass as the count: the IETF `RateLimit`
    /// field's `t`, Envoy's `duration_until_reset` (see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)).
    /// Zero when it never grows by waiting (`n == 0` on an empty window).
    /// The approximate counter finds it with a dry run after its check.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(10, Duration::from_secs(60))?;
    /// let (admitted, grows) = limiter.check_n_with_growth("alice", 3)?;
    /// assert_eq!(admitted.remaining(), 7);
    /// // Alice's first admissions are the oldest: they leave in a minute.
    /// assert!(grows > Duration::from_secs(59) && grows <= Duration::from_secs(60));
    /// let header = format!("\"default\";r={};t={}", admitted.remaining(), grows.as_secs().max(1));
    /// # let _ = header;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth<Q>(&self, key: &Q, n: u32) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_growing_when(None, key, n, || self.clock.now())
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(100), ManualClock::new())?;
    /// let (admitted, grows) = limiter.check_n_with_growth_at(&1, 2, 10)?;
    /// assert_eq!((admitted.remaining(), grows), (1, Duration::from_nanos(100)));
    /// let (admitted, grows) = limiter.check_n_with_growth_at(&1, 1, 40)?;
    /// assert_eq!((admitted.remaining(), grows), (0, Duration::from_nanos(70)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth_at<Q>(
        &self,
        key: &Q,
        n: u32,
        now: u64,
    ) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_growing_when(None, key, n, || now)
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at the time
    /// `read` returns (read once, after the lookup).
    #[inline(always)]
    pub(super) fn check_n_growing_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            |algorithm, words, quota, now, floor| {
                algorithm.check_n_growing(words, quota, n, now, floor)
            },
            // An absent key asked for no units: an empty window.
            |admitted| (admitted, Duration::ZERO),
        )
    }

    /// One unit for `key` at the time `read` gives: `check_n_when` of 1,
    /// through the one-unit path ([`Algorithm::check_one`]), whose outcome
    /// never joins the weighted path's.
    #[inline(always)]
    pub(super) fn check_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        read: impl FnOnce() -> u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.check_one(words, quota, now, floor),
            |admitted| admitted,
        )
    }

    /// `n` units for `key` at the time `read` returns (read once, after the
    /// key's lookup: see [`decide_at`](Self::decide_at)).
    #[inline(always)]
    pub(super) fn check_n_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.check(words, quota, n, now, floor),
            |admitted| admitted,
        )
    }

    /// One unit for `key` at the time `read` gives (called after the key's
    /// lookup, as [`check`](Self::check) reads its clock) and, if admitted,
    /// how long until its `remaining` grows — read with the count (one
    /// policy), or the wait of a dry run of `remaining + 1` units on the
    /// same state (zero if that many can never fit): all from one lookup of
    /// the key. The tower layer's IETF `t` is that wait.
    ///
    /// With several policies, each policy's state (for the headers) is
    /// written in `states`, for an admission and for a denial by the state
    /// (`Ok(Layered::Denied(..))`) alike: in the verdict's own field, not
    /// copied through the return values. An `Err` is a denial without a
    /// state (a key refused by the budget).
    ///
    /// The policies of the state that decided are written in `decided`:
    /// [`DecidedBy::Base`] for the builder's default shape (a byte: the
    /// state's quota pointer is `None`), else the key's own shape's,
    /// whether a quota or a reconfiguration gave them (a key the walk has
    /// not moved yet is decided, and named, by its old policies).
    #[inline]
    pub(crate) fn check_then_peek<Q>(
        &self,
        key: &Q,
        read: impl FnOnce() -> u64,
        states: &core::cell::Cell<Option<PolicyStates>>,
        decided: &core::cell::Cell<DecidedBy>,
    ) -> Result<Layered, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            None,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| {
                // With several policies each one's state is written in
                // `states` (on an admission) by the same pass as the count.
                let growing = algorithm.check_growing(words, quota, now, floor, states)?;
                // The state answered: its shape decided.
                decided.set(match quota {
                    None => DecidedBy::Base,
                    Some(shape) => DecidedBy::Policies(PolicySet::new(shape.policies())),
                });
                let admitted = match growing.decision {
                    Ok(admitted) => admitted,
                    Err(denied) => {
                        if let Some(found) = algorithm.policy_states(words, quota, now, floor) {
                            states.set(Some(found));
                        }
                        return Some(Ok(Layered::Denied(denied)));
                    }
                };
                let wait = match growing.wait {
                    // Found with the count: no second pass.
                    Some(nanos) => Duration::from_nanos(nanos),
                    None => algorithm.growth_by_dry_run(words, quota, &admitted, now, floor),
                };
                Some(Ok(Layered::Admitted(admitted, wait)))
            },
            |admitted| Layered::Admitted(admitted, Duration::ZERO),
        )
    }

    /// Admits one request for `key` now or denies it, like
    /// [`check`](Self::check) but without counting
    /// [`remaining`](Admitted::remaining) (see [`Limiter::admit`](crate::Limiter::admit)):
    /// the same decision, recorded the same way, on the shortest path.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.admit("alice").is_ok());
    /// assert!(limiter.admit("alice").is_err());
    /// assert!(limiter.admit("bob").is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_when(
            None,
            key,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// [`admit`](Self::admit) at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.admit_at(&1, 0).is_ok());
    /// assert_eq!(limiter.admit_at(&1, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn admit_at<Q>(&self, key: &Q, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_when(None, key, || now)
    }

    /// Admits `n` units for `key` now, all or none, like
    /// [`check_n`](Self::check_n) but without counting
    /// [`remaining`](Admitted::remaining) (see
    /// [`Limiter::admit_n`](crate::Limiter::admit_n)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(5, Duration::from_secs(60))?;
    /// assert!(limiter.admit_n("alice", 4).is_ok());
    /// assert!(limiter.admit_n("alice", 2).is_err()); // one left: nothing taken
    /// assert!(limiter.admit_n("alice", 1).is_ok());
    /// assert!(limiter.admit_n("bob", 5).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n<Q>(&self, key: &Q, n: u32) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_n_when(
            None,
            key,
            n,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// [`admit_n`](Self::admit_n) at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.admit_n_at(&1, 3, 0).is_ok());
    /// assert_eq!(limiter.admit_n_at(&1, 2, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn admit_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_n_when(None, key, n, || now)
    }

    /// [`admit_n`](Self::admit_n) at the time `read` returns.
    #[inline(always)]
    pub(super) fn admit_n_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.admit_n(words, quota, n, now, floor),
            |_| (),
        )
    }

    /// [`admit`](Self::admit) at the time `read` returns (read once, after
    /// the key's lookup: see [`decide_at`](Self::decide_at)).
    #[inline(always)]
    pub(super) fn admit_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        read: impl FnOnce() -> u64,
    ) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.admit(words, quota, now, floor),
            |_| (),
        )
    }

    /// What [`check`](Self::check) would answer for `key` now, recording
    /// nothing and creating no key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.peek("alice").is_ok());
    /// assert!(limiter.is_empty(), "a peek creates no key");
    /// limiter.check("alice").unwrap();
    /// assert!(limiter.peek("alice").is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, 1, self.clock.now())
    }

    /// What [`check_at`](Self::check_at) would answer for `key` at `now`
    /// (the clock's nanoseconds), recording nothing and creating no key:
    /// [`peek`](Self::peek) with the time passed in.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.peek_at(&1, 0).is_ok());
    /// assert!(limiter.is_empty(), "a peek creates no key");
    /// limiter.check_at(&1, 0).unwrap();
    /// assert_eq!(limiter.peek_at(&1, 3).unwrap_err().retry_after_nanos(), 7);
    /// assert!(limiter.peek_at(&1, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_at<Q>(&self, key: &Q, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_held(None, key, 1, now)
    }

    /// What [`check_n`](Self::check_n) would answer for `key` now,
    /// recording nothing and creating no key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(60))?;
    /// assert_eq!(limiter.peek_n(&1, 5).unwrap().remaining(), 0);
    /// assert!(limiter.peek_n(&1, 6).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, n, self.clock.now())
    }

    /// What [`check_n_at`](Self::check_n_at) would answer for `key`,
    /// recording nothing and creating no key.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.peek_n_at(&1, 1, 0).is_ok());
    /// assert!(limiter.is_empty());
    /// limiter.check_at(&1, 0).unwrap();
    /// assert_eq!(limiter.peek_n_at(&1, 1, 3).unwrap_err().retry_after_nanos(), 7);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_held(None, key, n, now)
    }
}
