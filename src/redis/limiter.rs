//! The public calls: checks, peeks, waits, and the statistics.

use std::time::Duration;

use super::{RedisLimitError, RedisLimiter};
use crate::decision::{Admitted, Denied};
use crate::sync::atomic::Ordering;

/// Counters for observability.
///
/// ```
/// let stats = slidelog::redis::RedisStats::default();
/// assert_eq!(stats.round_trips, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Checks that went to Redis.
    pub round_trips: u64,
    /// Checks denied locally by the pre-check tier (no round trip).
    pub local_denials: u64,
    /// Checks that failed (connection, timeout, script), whatever the policy.
    pub failures: u64,
}

/// A decision and its growth as `check_n_with_growth` answers them.
fn transpose_growth(
    (decision, grows): (Result<Admitted, Denied>, Duration),
) -> Result<(Admitted, Duration), Denied> {
    decision.map(|admitted| (admitted, grows))
}

impl RedisLimiter {
    /// Checks one request for `key`.
    ///
    /// # Errors
    ///
    /// With [`FailurePolicy::Error`](super::FailurePolicy::Error), a
    /// connection error, timeout or script error; the other policies answer
    /// instead.
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Err(denied) = limiter.check("user42").await? {
    ///     println!("retry in {:?}", denied.retry_after());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check(&self, key: &str) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.check_n(key, 1).await
    }

    /// Checks `n` units for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let upload = limiter.check_n("user42", 5).await?; // 5 units, all or nothing
    /// # let _ = upload; Ok(()) }
    /// ```
    pub async fn check_n(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run(key, n, None).await
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// the key's `remaining` next grows, from the same round trip (see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)):
    /// the IETF `RateLimit` field's `t`, Envoy's `duration_until_reset`,
    /// by the server's clock. Zero when it never grows by waiting (`n == 0`
    /// on an empty window), and for an admission the failure policy made
    /// ([`FailurePolicy::Open`](super::FailurePolicy::Open)).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Ok((admitted, grows)) = limiter.check_n_with_growth("user42", 1).await? {
    ///     let t = grows.as_secs() + u64::from(grows.subsec_nanos() > 0);
    ///     println!("RateLimit: \"default\";r={};t={t}", admitted.remaining());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_n_with_growth(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<(Admitted, Duration), Denied>, RedisLimitError> {
        Ok(transpose_growth(self.run_timed(key, n, None).await?))
    }

    /// What [`check`](Self::check) would answer for `key` now, recording
    /// nothing (one round trip; the local pre-check may answer a denial
    /// without it).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Ok(room) = limiter.peek("user:42").await? {
    ///     println!("{} more requests fit now", room.remaining() + 1);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self, key: &str) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.peek_n(key, 1).await
    }

    /// [`peek`](Self::peek) for `n` units.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// // Would a batch of 5 fit now? Nothing is recorded either way.
    /// match limiter.peek_n("user:42", 5).await? {
    ///     Ok(_) => println!("the batch fits"),
    ///     Err(denied) => println!("retry the batch in {:?}", denied.retry_after()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek_n(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        match self.ask(key, n, None, true).await {
            Err(e) if !matches!(e, RedisLimitError::KeyTooLong { .. }) => self.fail(e),
            answer => answer.map(|(decision, _)| decision),
        }
    }

    /// Waits until one request for `key` is admitted: sleeps each denial's
    /// exact `retry_after` (tokio timers), as the in-process limiters'
    /// `until_ready` do, and returns the admission. Cancel-safe: dropping
    /// the future reserves nothing.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check): a failure ends the wait (with
    /// [`FailurePolicy::Closed`](super::FailurePolicy::Closed) a failure
    /// is a denial, so the wait goes on until Redis answers again).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let admitted = limiter.until_ready("user42").await?;
    /// println!("{} left", admitted.remaining());
    /// # Ok(()) }
    /// ```
    pub async fn until_ready(&self, key: &str) -> Result<Admitted, RedisLimitError> {
        self.until_n_ready(key, 1).await
    }

    /// Waits until `n` units for `key` are admitted together.
    ///
    /// # Errors
    ///
    /// As for [`check_n`](Self::check_n); `n > limit` can never be admitted:
    /// [`RedisLimitError::Refused`] with
    /// [`DenyReason::ExceedsLimit`](crate::DenyReason::ExceedsLimit), at once.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let upload = limiter.until_n_ready("user42", 3).await?;
    /// # let _ = upload; Ok(()) }
    /// ```
    pub async fn until_n_ready(&self, key: &str, n: u32) -> Result<Admitted, RedisLimitError> {
        loop {
            match self.check_n(key, n).await? {
                Ok(admitted) => return Ok(admitted),
                Err(denied) if denied.is_rate_limited() => {
                    tokio::time::sleep(denied.retry_after()).await;
                }
                Err(denied) => return Err(RedisLimitError::Refused(denied)),
            }
        }
    }

    /// Test hook: the scripts with the server's time replaced by `now_us`
    /// (the public calls never pass a time: Redis `TIME` is the only clock).
    #[doc(hidden)]
    pub async fn check_n_at_server_time_override(
        &self,
        key: &str,
        n: u32,
        now_us: u64,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run(key, n, Some(now_us)).await
    }

    /// Test hook: [`check_n_with_growth`](Self::check_n_with_growth) with
    /// the server's time replaced by `now_us`.
    #[doc(hidden)]
    pub async fn check_n_with_growth_at_server_time_override(
        &self,
        key: &str,
        n: u32,
        now_us: u64,
    ) -> Result<Result<(Admitted, Duration), Denied>, RedisLimitError> {
        Ok(transpose_growth(
            self.run_timed(key, n, Some(now_us)).await?,
        ))
    }

    async fn run(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run_timed(key, n, now_us)
            .await
            .map(|(decision, _)| decision)
    }

    /// [`run`](Self::run), with the time until the reported policy's
    /// oldest admission in its window leaves it (zero for a denial, a
    /// failure or a local denial).
    async fn run_timed(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
    ) -> Result<(Result<Admitted, Denied>, Duration), RedisLimitError> {
        match self.ask(key, n, now_us, false).await {
            Err(e) if !matches!(e, RedisLimitError::KeyTooLong { .. }) => {
                self.fail(e).map(|d| (d, Duration::ZERO))
            }
            answer => answer,
        }
    }

    /// Round trips, local denials and failures so far.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) {
    /// let stats = limiter.stats();
    /// println!("{} round trips saved", stats.local_denials);
    /// # }
    /// ```
    pub fn stats(&self) -> RedisStats {
        // Relaxed: statistics.
        RedisStats {
            round_trips: self.shared.round_trips.load(Ordering::Relaxed),
            local_denials: self.shared.local_denials.load(Ordering::Relaxed),
            failures: self.shared.failures.load(Ordering::Relaxed),
        }
    }
}
