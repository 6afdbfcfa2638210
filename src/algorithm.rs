//! The two algorithms behind one interface: [`RateLimit`] for a single key
//! (the exact [`Limiter`] or the approximate [`SlidingCounter`]), and
//! [`Algorithm`] for what a [`KeyedLimiter`](crate::KeyedLimiter) keeps per
//! key ([`Log`] or [`Counter`]).

use std::time::Duration;

use crate::clock::Clock;
use crate::counter::SlidingCounter;
use crate::decision::{Admitted, Denied};
use crate::limiter::Limiter;
use crate::policy::Policy;

// What a keyed limiter keeps per key (the keyed map is not compiled for the
// model checker).
#[cfg(not(slidelog_loom))]
mod per_key;
#[cfg(not(slidelog_loom))]
pub(crate) use per_key::sealed;
#[cfg(not(slidelog_loom))]
pub use per_key::{Algorithm, Counter, Log};

/// A single-key rate limiter: the exact [`Limiter`] or the approximate
/// [`SlidingCounter`], behind one interface (for the tower layer, the demo,
/// or your own code).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock, RateLimit, SlidingCounter};
///
/// fn drain(limiter: &dyn RateLimit) -> u32 {
///     let mut admitted = 0;
///     while limiter.check_n_at(1, 0).is_ok() {
///         admitted += 1;
///     }
///     admitted
/// }
///
/// let exact = Limiter::with_clock(5, Duration::from_secs(1), ManualClock::new())?;
/// let approx = SlidingCounter::with_clock(5, Duration::from_secs(1), 10, ManualClock::new())?;
/// assert_eq!(drain(&exact), 5);
/// assert_eq!(drain(&approx), 5);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait RateLimit: Send + Sync {
    /// Checks `n` units at `now` (nanoseconds on the limiter's clock), all or
    /// nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, RateLimit};
    /// let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new())?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert_eq!(dynamic.check_n_at(2, 0).unwrap().remaining(), 1);
    /// assert!(dynamic.check_n_at(2, 0).is_err()); // all or nothing: 1 fits, 2 do not
    /// assert!(dynamic.check_n_at(1, 0).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied>;

    /// What [`check_n_at`](Self::check_n_at) would answer, recording
    /// nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, RateLimit};
    /// let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new())?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert_eq!(dynamic.peek_n_at(3, 0).unwrap().remaining(), 0);
    /// assert_eq!(dynamic.peek_n_at(3, 0).unwrap().remaining(), 0); // nothing was recorded
    /// assert!(dynamic.peek_n_at(4, 0).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied>;

    /// The limiter's current time: nanoseconds on its clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, RateLimit};
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(3, Duration::from_secs(1), clock.clone())?;
    /// clock.advance(Duration::from_millis(5));
    /// assert_eq!((&limiter as &dyn RateLimit).now(), 5_000_000);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn now(&self) -> u64;

    /// Admissions allowed per window (the first policy's, with several).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit, SlidingCounter};
    /// let exact = Limiter::new(10, Duration::from_secs(1))?;
    /// let approx = SlidingCounter::new(1_000_000, Duration::from_secs(60), 60)?;
    /// assert_eq!((&exact as &dyn RateLimit).limit(), 10);
    /// assert_eq!((&approx as &dyn RateLimit).limit(), 1_000_000);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn limit(&self) -> u32;

    /// The window (the first policy's, with several).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::builder(10, Duration::from_secs(1)).and(100, Duration::from_secs(60)).build()?;
    /// assert_eq!((&limiter as &dyn RateLimit).window(), Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn window(&self) -> Duration;

    /// Every policy checked (by default the one of
    /// [`limit`](Self::limit) and [`window`](Self::window)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Policy, RateLimit};
    /// let limiter = Limiter::builder(10, Duration::from_secs(1)).and(100, Duration::from_secs(60)).build()?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert_eq!(dynamic.policies().len(), 2);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn policies(&self) -> Vec<Policy> {
        vec![Policy::new(self.limit(), self.window())]
    }

    /// A number that changes when the policies change at run time (a
    /// reconfiguration), so that a cache of [`policies`](Self::policies)
    /// knows to refresh; 0 by default (never changes).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Quota, RateLimit};
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// let seen = dynamic.generation();
    /// limiter.reconfigure(Quota::new(5, Duration::from_secs(1))?)?;
    /// assert_ne!(dynamic.generation(), seen);
    /// assert_eq!(dynamic.limit(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn generation(&self) -> u64 {
        0
    }

    /// Checks one request now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit, SlidingCounter};
    /// let exact = Limiter::new(1, Duration::from_secs(60))?;
    /// let approx = SlidingCounter::new(1, Duration::from_secs(60), 10)?;
    /// for limiter in [&exact as &dyn RateLimit, &approx] {
    ///     assert_eq!(limiter.check().unwrap().remaining(), 0);
    ///     assert!(limiter.check().unwrap_err().retry_after() > Duration::ZERO);
    /// }
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn check(&self) -> Result<Admitted, Denied> {
        self.check_n_at(1, self.now())
    }

    /// Checks `n` units now, all or nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::new(5, Duration::from_secs(60))?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert_eq!(dynamic.check_n(3).unwrap().remaining(), 2);
    /// assert!(dynamic.check_n(3).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn check_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.check_n_at(n, self.now())
    }
    /// [`check_n_at`](Self::check_n_at), and for an admission how long
    /// until `remaining` next grows (see [`Limiter::check_n_with_growth`],
    /// which reads it in the same pass; by default, and for the
    /// [`SlidingCounter`], a dry run of `remaining + 1` units right after
    /// finds it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, RateLimit, SlidingCounter};
    /// let exact = Limiter::with_clock(2, Duration::from_secs(1), ManualClock::new())?;
    /// let approx = SlidingCounter::with_clock(2, Duration::from_secs(1), 10, ManualClock::new())?;
    /// for limiter in [&exact as &dyn RateLimit, &approx] {
    ///     let (admitted, grows) = limiter.check_n_with_growth_at(2, 0).unwrap();
    ///     assert_eq!((admitted.remaining(), grows), (0, Duration::from_secs(1)));
    /// }
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        let admitted = self.check_n_at(n, now)?;
        let grows =
            crate::decision::growth_by_dry_run(&admitted, |more| Some(self.peek_n_at(more, now)));
        Ok((admitted, grows))
    }
    /// [`check_n_with_growth_at`](Self::check_n_with_growth_at) now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::new(2, Duration::from_secs(60))?;
    /// let (admitted, grows) = (&limiter as &dyn RateLimit).check_n_with_growth(1)?;
    /// // One more fits now; the window next frees a unit when this admission leaves it.
    /// assert_eq!(admitted.remaining(), 1);
    /// assert!(grows <= Duration::from_secs(60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn check_n_with_growth(&self, n: u32) -> Result<(Admitted, Duration), Denied> {
        self.check_n_with_growth_at(n, self.now())
    }

    /// Admits one request at `now` or denies it: `check_n_at(1, now)`'s
    /// decision without its count of `remaining` (which the exact
    /// [`Limiter`] then skips: see [`Limiter::admit`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, RateLimit};
    /// let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert!(dynamic.admit_at(0).is_ok());
    /// assert!(dynamic.admit_at(0).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn admit_at(&self, now: u64) -> Result<(), Denied> {
        self.check_n_at(1, now).map(|_| ())
    }

    /// [`admit_at`](Self::admit_at) now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::new(1, Duration::from_secs(60))?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert!(dynamic.admit().is_ok());
    /// assert!(dynamic.admit().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn admit(&self) -> Result<(), Denied> {
        self.admit_at(self.now())
    }

    /// What [`check`](Self::check) would answer now, recording nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::new(1, Duration::from_secs(60))?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert!(dynamic.peek().is_ok());
    /// assert!(dynamic.check().is_ok()); // the peek took nothing
    /// assert!(dynamic.peek().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn peek(&self) -> Result<Admitted, Denied> {
        self.peek_n_at(1, self.now())
    }

    /// What [`check_n`](Self::check_n) would answer now, recording nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, RateLimit};
    /// let limiter = Limiter::new(4, Duration::from_secs(60))?;
    /// let dynamic: &dyn RateLimit = &limiter;
    /// assert_eq!(dynamic.peek_n(4).unwrap().remaining(), 0);
    /// assert!(dynamic.peek_n(5).is_err());
    /// assert_eq!(dynamic.check().unwrap().remaining(), 3); // nothing was recorded
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    fn peek_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.peek_n_at(n, self.now())
    }
}

impl<C: Clock> RateLimit for Limiter<C> {
    #[inline]
    fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        Limiter::check_n_at(self, n, now)
    }
    fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        Limiter::peek_n_at(self, n, now)
    }
    fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        Limiter::check_n_with_growth_at(self, n, now)
    }
    #[inline]
    fn admit_at(&self, now: u64) -> Result<(), Denied> {
        Limiter::admit_at(self, now)
    }
    #[inline]
    fn now(&self) -> u64 {
        self.clock().now()
    }
    fn limit(&self) -> u32 {
        Limiter::limit(self)
    }
    fn window(&self) -> Duration {
        Limiter::window(self)
    }
    fn policies(&self) -> Vec<Policy> {
        Limiter::policies(self)
    }
    fn generation(&self) -> u64 {
        Limiter::generation(self)
    }
}

impl<C: Clock> RateLimit for SlidingCounter<C> {
    #[inline]
    fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        SlidingCounter::check_n_at(self, n, now)
    }
    fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        SlidingCounter::peek_n_at(self, n, now)
    }
    fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        SlidingCounter::check_n_with_growth_at(self, n, now)
    }
    #[inline]
    fn now(&self) -> u64 {
        self.clock().now()
    }
    fn limit(&self) -> u32 {
        SlidingCounter::limit(self)
    }
    fn window(&self) -> Duration {
        SlidingCounter::window(self)
    }
    fn generation(&self) -> u64 {
        SlidingCounter::generation(self)
    }
}
