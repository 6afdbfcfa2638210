//! `reconfigure`: a new generation of policies, the log carried over.

use super::*;

impl<C: Clock> Limiter<C> {
    /// Changes the policies of this limiter while other threads check it,
    /// keeping what it has admitted.
    ///
    /// The log carries over: the new configuration judges every admission
    /// of the old ring still inside a window of the old or the new policies
    /// (at the clock's reading, or at the newest admission's time if
    /// earlier) and at least the newest `L`, the new largest limit; then
    /// everything after. A ring cut below what it holds keeps the surplus
    /// (never more slots than the old ring), judged on the several
    /// policies' path, until a later reconfiguration finds it outside every
    /// window in force. So no sequence of changes lets a
    /// window hold more than the largest limit in force in it: 10 a minute,
    /// all used, cut to 5 and restored to 10 within the minute admits
    /// nothing more in it.
    ///
    /// Every check that starts after this returns is judged entirely by the
    /// new policies — `remaining`, `retry_after` and [`Denied::policy`]
    /// included — and a racing check by exactly one of the two
    /// configurations, never a mix. So a smaller limit, a shorter window or
    /// an added policy takes effect at once over the history: a client that
    /// used 80 of 100 and is cut to 50 waits until its window holds fewer
    /// than 50. A larger limit or a longer window can count only what the
    /// old configuration kept: admissions it had already let go (pushed out
    /// of its ring, or outside every window in force) are not recalled. See
    /// the crate guide, "Changing limits at run time".
    ///
    /// Checks never wait for it: a check that meets the closed ring finds
    /// its successor linked and moves on (lock-free). Reconfigurations are
    /// serialised with each other; each copies the log once per attempt,
    /// `O(L_old + L_new)`, and retries only when an admission landed
    /// meanwhile. The replaced ring is freed once no check can still hold
    /// it.
    ///
    /// # Errors
    ///
    /// None today for a [`Quota`], which is validated when made; the
    /// `Result` keeps one signature across the limiters.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(100, Duration::from_secs(60), clock.clone())?;
    /// limiter.check_n(80).unwrap();
    /// // An incident: every client is cut to 50 a minute, at once.
    /// limiter.reconfigure(Quota::new(50, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.limit(), 50);
    /// assert!(limiter.check().is_err()); // 80 in the window, the limit is 50
    /// // Restored a second later: the 80 still count against the 100.
    /// clock.advance(Duration::from_secs(1));
    /// limiter.reconfigure(Quota::new(100, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.check().unwrap().remaining(), 19);
    /// clock.advance(Duration::from_secs(59));
    /// assert_eq!(limiter.check().unwrap().remaining(), 98);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, quota: Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = self.current.get();
        let old = held.as_deref().unwrap_or(&self.first);
        let shape = Self::successor_shape(&old.shape, &quota);
        // What is still live is judged at this reading, or at the newest
        // admission if earlier (`Shape::successor`).
        let now = old.shape.now(self.clock.now(), 0).judged;
        let horizon = old.shape.geometry.horizon();
        let closed = old.ring().close_into(|kept| {
            // Linked before the close (SeqCst, so also before the Release
            // CAS): whoever sees the ring closed finds it. An earlier
            // attempt's successor is dropped here unread: readers look at
            // `next` only after seeing the ring closed, and a close that
            // failed wrote nothing.
            old.next.set(Some(Arc::new(Generation::with_log(
                &shape, kept, now, horizon,
            ))));
        });
        if !closed {
            // Closed by an eviction (the model checker's hook): an idle ring
            // keeps nothing that counts; link an empty successor.
            old.next.set(Some(Arc::new(Generation::new(shape))));
        }
        let next = old.next.get().clone();
        self.current.set(next);
        // Relaxed: a count for `generation`, and a hint for `with_current`
        // (which falls back to `first` while `current` is empty); the new
        // policies themselves are published by `current`.
        self.generation.fetch_add(1, Ordering::Relaxed);
        // `current` points past `old` now: unlink its successor so that the
        // generations before do not stay chained (see `after`).
        old.next.set(None);
        Ok(())
    }

    /// The shape a reconfiguration builds: the quota's (under the model
    /// checker, carrying the old ring's flaw, or the old shape itself for the
    /// `OldPolicies` control).
    pub(super) fn successor_shape(old: &Shape, quota: &Quota) -> Shape {
        #[cfg(slidelog_loom)]
        {
            let flaw = old.geometry.flaw();
            if flaw == crate::flaw::Flaw::OldPolicies {
                return old.clone();
            }
            (*quota.shape).clone().with_flaw(flaw)
        }
        #[cfg(not(slidelog_loom))]
        {
            let _ = old;
            (*quota.shape).clone()
        }
    }
}
