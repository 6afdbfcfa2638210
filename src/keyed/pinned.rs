//! [`PinnedKeys`]: a [`KeyedLimiter`] pinned to the calling thread, whose
//! calls share one guard of the key map's memory reclamation.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use std::collections::hash_map::RandomState;
use std::time::Duration;

use papaya::{Guard, LocalGuard};

use super::{KeyedLimiter, with_map};
use crate::algorithm::{Algorithm, Log};
use crate::clock::{Clock, QuantaClock};
use crate::decision::{Admitted, Denied};
use crate::key_size::KeySize;

/// A [`KeyedLimiter`] pinned to the calling thread ([`KeyedLimiter::pin`]):
/// the same calls, answered exactly as the limiter answers them, sharing
/// one guard of the key map's memory reclamation instead of taking one
/// each.
///
/// Every keyed call pins the map while it reads a key's state, so that a
/// state evicted or replaced meanwhile is not freed under it. Pinning and
/// unpinning take a thread-local lookup, a store and an atomic swap on the
/// thread's reservation every call; a `PinnedKeys` pins once, so a caller with many keys to decide at once
/// — a batch of jobs, the keys of one request (client, user, route) — pays
/// it once for all of them (BENCHMARKS.md, "Where the time goes").
///
/// Hold it for a batch, not for the life of a thread: while it lives, no
/// state removed from the map (evicted, reset, removed or replaced by a
/// reconfiguration) since it was taken is freed, so a long-held pin keeps
/// that memory allocated (not counted against
/// [`max_bytes`](KeyedLimiter::max_bytes), which counts the keys in the
/// map). [`refresh`](Self::refresh) lets it go without dropping the pin.
/// It is neither `Send` nor `Sync`: the guard belongs to the thread that
/// took it (so it cannot be held across an `.await` in a `Send` future).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
///
/// let limiter = KeyedLimiter::<String>::new(2, Duration::from_secs(60))?;
/// let pinned = limiter.pin();
/// for job in ["alice", "bob", "alice", "alice"] {
///     let _ = pinned.admit(job);
/// }
/// assert_eq!(pinned.check("bob")?.remaining(), 0);
/// assert!(pinned.check("alice").is_err(), "two admitted, the third denied");
/// drop(pinned);
/// assert!(limiter.check("alice").is_err(), "the same limiter, the same state");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A pin stays on the thread that took it:
///
/// ```compile_fail
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
///
/// let limiter = KeyedLimiter::<u64>::new(1, Duration::from_secs(1)).unwrap();
/// let pinned = limiter.pin();
/// std::thread::scope(|s| {
///     s.spawn(move || pinned.admit(&1).is_ok()); // error: `PinnedKeys` is not `Send`
/// });
/// ```
pub struct PinnedKeys<'a, K, C: Clock = QuantaClock, S = RandomState, A = Log> {
    limiter: &'a KeyedLimiter<K, C, S, A>,
    /// A guard of the map's collector, whichever representation the map
    /// has (fixed when the limiter was built, so every call's `with_map!`
    /// finds the map this guard was taken from; papaya checks it on every
    /// lookup and panics on a foreign guard).
    guard: LocalGuard<'a>,
}

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Pins this limiter to the calling thread for a batch of calls: see
    /// [`PinnedKeys`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// let pinned = limiter.pin();
    /// let admitted = (0..100u64).filter(|key| pinned.admit(&(key % 5)).is_ok()).count();
    /// assert_eq!(admitted, 50, "ten for each of five keys");
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a pin does nothing until its calls are made"]
    pub fn pin(&self) -> PinnedKeys<'_, K, C, S, A> {
        PinnedKeys {
            limiter: self,
            guard: with_map!(&self.map, map => map.guard()),
        }
    }
}

impl<'a, K, C, S, A> PinnedKeys<'a, K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// The limiter this pin makes its calls on.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.pin().limiter().limit(), 10);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limiter(&self) -> &'a KeyedLimiter<K, C, S, A> {
        self.limiter
    }

    /// [`KeyedLimiter::check`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.check("10.0.0.1").is_ok());
    /// assert!(pinned.check("10.0.0.1").is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limiter = self.limiter;
        limiter.check_when(
            Some(&self.guard),
            key,
            #[inline(always)]
            || limiter.clock.now(),
        )
    }

    /// [`KeyedLimiter::check_n`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(1))?;
    /// let pinned = limiter.pin();
    /// assert_eq!(pinned.check_n(&1, 3)?.remaining(), 2);
    /// assert!(pinned.check_n(&1, 3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limiter = self.limiter;
        limiter.check_n_when(
            Some(&self.guard),
            key,
            n,
            #[inline(always)]
            || limiter.clock.now(),
        )
    }

    /// [`KeyedLimiter::check_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.check_at(&1, 0).is_ok());
    /// assert_eq!(pinned.check_at(&1, 4).unwrap_err().retry_after_nanos(), 6);
    /// assert!(pinned.check_at(&1, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at<Q>(&self, key: &Q, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.limiter.check_when(Some(&self.guard), key, || now)
    }

    /// [`KeyedLimiter::check_n_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(4, Duration::from_nanos(10), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// assert_eq!(pinned.check_n_at(&1, 3, 0).unwrap().remaining(), 1);
    /// assert!(pinned.check_n_at(&1, 2, 5).is_err());
    /// assert!(pinned.check_n_at(&1, 2, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.limiter.check_n_when(Some(&self.guard), key, n, || now)
    }

    /// [`KeyedLimiter::admit`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.admit("alice").is_ok());
    /// assert!(pinned.admit("alice").is_err());
    /// assert!(pinned.admit("bob").is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limiter = self.limiter;
        limiter.admit_when(
            Some(&self.guard),
            key,
            #[inline(always)]
            || limiter.clock.now(),
        )
    }

    /// [`KeyedLimiter::admit_n`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.admit_n(&7, 5).is_ok());
    /// assert!(pinned.admit_n(&7, 1).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n<Q>(&self, key: &Q, n: u32) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limiter = self.limiter;
        limiter.admit_n_when(
            Some(&self.guard),
            key,
            n,
            #[inline(always)]
            || limiter.clock.now(),
        )
    }

    /// [`KeyedLimiter::admit_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.admit_at(&1, 0).is_ok());
    /// assert_eq!(pinned.admit_at(&1, 9).unwrap_err().retry_after_nanos(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_at<Q>(&self, key: &Q, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.limiter.admit_when(Some(&self.guard), key, || now)
    }

    /// [`KeyedLimiter::admit_n_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(10), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.admit_n_at(&1, 3, 0).is_ok());
    /// assert!(pinned.admit_n_at(&1, 1, 9).is_err());
    /// assert!(pinned.admit_n_at(&1, 3, 10).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.limiter.admit_n_when(Some(&self.guard), key, n, || now)
    }

    /// [`KeyedLimiter::check_n_with_growth`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(2, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// let (admitted, grows) = pinned.check_n_with_growth(&1, 2)?;
    /// assert_eq!(admitted.remaining(), 0);
    /// assert!(grows > Duration::from_secs(59), "the units leave the window in a minute");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n_with_growth<Q>(&self, key: &Q, n: u32) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limiter = self.limiter;
        limiter.check_n_growing_when(Some(&self.guard), key, n, || limiter.clock.now())
    }

    /// [`KeyedLimiter::check_n_with_growth_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(2, Duration::from_nanos(100), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// pinned.check_at(&1, 0)?;
    /// let (admitted, grows) = pinned.check_n_with_growth_at(&1, 1, 30)?;
    /// assert_eq!(admitted.remaining(), 0);
    /// assert_eq!(grows, Duration::from_nanos(70), "the admission at 0 leaves at 100");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
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
        self.limiter
            .check_n_growing_when(Some(&self.guard), key, n, || now)
    }

    /// [`KeyedLimiter::peek`], under this pin: what `check` would answer
    /// now, recording nothing and creating no key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// assert!(pinned.peek("alice").is_ok());
    /// assert!(limiter.is_empty(), "a peek creates no key");
    /// pinned.check("alice")?;
    /// assert!(pinned.peek("alice").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, 1, self.limiter.clock.now())
    }

    /// [`KeyedLimiter::peek_n`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(3, Duration::from_secs(60))?;
    /// let pinned = limiter.pin();
    /// pinned.admit(&1)?;
    /// assert_eq!(pinned.peek_n(&1, 2)?.remaining(), 0);
    /// assert!(pinned.peek_n(&1, 3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, n, self.limiter.clock.now())
    }

    /// [`KeyedLimiter::peek_n_at`], under this pin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// let pinned = limiter.pin();
    /// pinned.admit_at(&1, 0)?;
    /// assert_eq!(pinned.peek_n_at(&1, 1, 4).unwrap_err().retry_after_nanos(), 6);
    /// assert!(pinned.peek_n_at(&1, 1, 10).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.limiter.peek_held(Some(&self.guard), key, n, now)
    }

    /// Lets the memory of states removed from the map since the pin was
    /// taken (or last refreshed) be freed, keeping the pin: for a pin held
    /// across a long batch. No answer changes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(1, Duration::from_secs(60))?;
    /// let mut pinned = limiter.pin();
    /// assert!(pinned.admit(&1).is_ok());
    /// limiter.reset(&1);
    /// pinned.refresh();
    /// assert!(pinned.admit(&1).is_ok(), "a reset key starts empty");
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn refresh(&mut self) {
        // Every reference a call took under the guard ended with the call
        // (answers are copied out), so none outlives this.
        self.guard.refresh();
    }
}

impl<K, C: Clock, S, A> fmt::Debug for PinnedKeys<'_, K, C, S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedKeys")
            .field("limiter", &self.limiter.name)
            .finish_non_exhaustive()
    }
}
