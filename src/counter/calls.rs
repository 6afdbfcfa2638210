//! [`SlidingCounter`]'s decisions: `check`, `admit` and `peek`, each with
//! its `_n` and `_at` forms, and the growth forms of `check_n`.

use std::time::Duration;

use super::sliding::SlidingCounter;
use crate::clock::Clock;
use crate::decision::{Admitted, Denied};

impl<C: Clock> SlidingCounter<C> {
    /// Checks one request now.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_secs(60), 6)?;
    /// assert!(counter.check().is_ok());
    /// assert!(counter.check().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check(&self) -> Result<Admitted, Denied> {
        self.check_n_at(1, self.clock.now())
    }

    /// Checks `n` units now, all or nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(3, Duration::from_secs(60), 6)?;
    /// assert!(counter.check_n(2).is_ok());
    /// assert!(counter.check_n(2).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.check_n_at(n, self.clock.now())
    }

    /// Checks one request at `now` (clock nanoseconds).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.check_at(5).is_ok());
    /// // The admission counts in slot [0, 10): it leaves the window at 100.
    /// assert_eq!(counter.check_at(50).unwrap_err().retry_after_nanos(), 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.check_n_at(1, now)
    }

    /// Admits one request now or denies it: [`check`](Self::check)'s
    /// decision, for callers that do not read `remaining` (the same API as
    /// [`Limiter::admit`](crate::Limiter::admit); the counter's count costs
    /// nothing extra, so this is `check` without its result).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_secs(60), 6)?;
    /// assert!(counter.admit().is_ok());
    /// assert!(counter.admit().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit(&self) -> Result<(), Denied> {
        self.admit_at(self.clock.now())
    }

    /// [`admit`](Self::admit) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.admit_at(5).is_ok());
    /// assert_eq!(counter.admit_at(50).unwrap_err().retry_after_nanos(), 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_at(&self, now: u64) -> Result<(), Denied> {
        self.check_n_at(1, now).map(|_| ())
    }

    /// Admits `n` units now, all or none: [`check_n`](Self::check_n)'s
    /// decision (the same API as [`Limiter::admit_n`](crate::Limiter::admit_n);
    /// here `check_n` without its result).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(5, Duration::from_secs(60), 6)?;
    /// assert!(counter.admit_n(4).is_ok());
    /// assert!(counter.admit_n(2).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n(&self, n: u32) -> Result<(), Denied> {
        self.admit_n_at(n, self.clock.now())
    }

    /// [`admit_n`](Self::admit_n) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.admit_n_at(4, 5).is_ok());
    /// assert!(counter.admit_n_at(1, 50).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n_at(&self, n: u32, now: u64) -> Result<(), Denied> {
        self.check_n_at(n, now).map(|_| ())
    }

    /// Checks `n` units at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{DenyReason, ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert!(counter.check_n_at(4, 0).is_ok());
    /// assert!(matches!(counter.check_n_at(5, 0).unwrap_err().reason(), DenyReason::ExceedsLimit { .. }));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let limit = self.current_limit();
        if n > limit {
            return Err(Denied::exceeds_limit(n, limit));
        }
        self.state(limit)
            .check(n, now, 0)
            .expect("a SlidingCounter is never closed")
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// `remaining` next grows (the IETF `RateLimit` field's `t`; see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)),
    /// found by a dry run of `remaining + 1` units right after the check.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::SlidingCounter;
    /// let counter = SlidingCounter::new(10, Duration::from_secs(1), 10)?;
    /// let (admitted, grows) = counter.check_n_with_growth(10).unwrap();
    /// assert_eq!(admitted.remaining(), 0);
    /// assert!(grows > Duration::ZERO && grows <= Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth(&self, n: u32) -> Result<(Admitted, Duration), Denied> {
        self.check_n_with_growth_at(n, self.clock.now())
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at `now`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(2, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// let (admitted, grows) = counter.check_n_with_growth_at(2, 30)?;
    /// assert_eq!((admitted.remaining(), grows), (0, counter.peek_n_at(1, 30).unwrap_err().retry_after()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth_at(&self, n: u32, now: u64) -> Result<(Admitted, Duration), Denied> {
        self.check_growth_judged(n, now).0
    }

    /// [`check_n_with_growth_at`](Self::check_n_with_growth_at), and the
    /// limit it judged by (the tower layer names it).
    pub(crate) fn check_growth_judged(
        &self,
        n: u32,
        now: u64,
    ) -> (Result<(Admitted, Duration), Denied>, u32) {
        // One limit for the check and its dry run: a reconfiguration
        // between the two would give the admission another limit's `t`.
        let limit = self.current_limit();
        if n > limit {
            return (Err(Denied::exceeds_limit(n, limit)), limit);
        }
        let state = self.state(limit);
        let admitted = match state
            .check(n, now, 0)
            .expect("a SlidingCounter is never closed")
        {
            Ok(admitted) => admitted,
            Err(denied) => return (Err(denied), limit),
        };
        let grows = crate::decision::growth_by_dry_run(&admitted, |more| {
            (more <= limit).then(|| state.peek(more, now, 0)).flatten()
        });
        (Ok((admitted, grows)), limit)
    }

    /// What [`check_n_at`](Self::check_n_at) would answer, recording
    /// nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(2, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert_eq!(counter.peek_n_at(2, 0).unwrap().remaining(), 0);
    /// counter.check_n_at(2, 0).unwrap();
    /// assert_eq!(counter.peek_n_at(1, 30).unwrap_err().retry_after_nanos(), 70);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        self.peek_inner(n, now)
    }

    /// What [`check`](Self::check) would answer now, recording nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_secs(1), 10, ManualClock::new())?;
    /// assert!(counter.peek().is_ok());
    /// counter.check().unwrap();
    /// assert!(counter.peek().is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek(&self) -> Result<Admitted, Denied> {
        self.peek_inner(1, self.clock.now())
    }

    /// What [`check_at`](Self::check_at) would answer, recording nothing:
    /// [`peek`](Self::peek) at `now` (clock nanoseconds).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(1, Duration::from_nanos(100), 10, ManualClock::new())?;
    /// assert_eq!(counter.peek_at(5).unwrap().remaining(), 0);
    /// counter.check_at(5).unwrap();
    /// // The admission counts in slot [0, 10): it leaves the window at 100.
    /// assert_eq!(counter.peek_at(50).unwrap_err().retry_after_nanos(), 50);
    /// assert!(counter.peek_at(100).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_at(&self, now: u64) -> Result<Admitted, Denied> {
        self.peek_inner(1, now)
    }

    /// What [`check_n`](Self::check_n) would answer now, recording nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ManualClock, SlidingCounter};
    /// let counter = SlidingCounter::with_clock(4, Duration::from_secs(1), 10, ManualClock::new())?;
    /// assert_eq!(counter.peek_n(3).unwrap().remaining(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n(&self, n: u32) -> Result<Admitted, Denied> {
        self.peek_inner(n, self.clock.now())
    }

    fn peek_inner(&self, n: u32, now: u64) -> Result<Admitted, Denied> {
        let limit = self.current_limit();
        if n > limit {
            return Err(Denied::exceeds_limit(n, limit));
        }
        self.state(limit)
            .peek(n, now, 0)
            .expect("a SlidingCounter is never closed")
    }
}
