//! Async waiting: sleep exactly until `retry_after`, then try again.
//! Feature `async` (on with `tower`).

use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::algorithm::RateLimit;
use crate::clock::Clock;
use crate::counter::SlidingCounter;
use crate::decision::{Admitted, Denied};
use crate::keyed::KeyedLimiter;
use crate::limiter::Limiter;

/// A random duration in `[0, max)`, from std's randomly keyed hasher.
fn jitter(max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
    Duration::from_nanos(random % (max.as_nanos().min(u128::from(u64::MAX)) as u64).max(1))
}

/// Waits until `check` admits, sleeping each denial's `retry_after` (plus up
/// to `max_jitter`). Cancel-safe: dropping the future reserves nothing.
async fn wait_until<F>(mut check: F, max_jitter: Duration) -> Result<Admitted, Denied>
where
    F: FnMut() -> Result<Admitted, Denied>,
{
    loop {
        match check() {
            Ok(admitted) => return Ok(admitted),
            Err(denied) if !denied.is_rate_limited() => return Err(denied),
            Err(denied) => tokio::time::sleep(denied.retry_after() + jitter(max_jitter)).await,
        }
    }
}

impl<C: Clock> Limiter<C> {
    /// Waits until one request is admitted: sleeps exactly `retry_after`
    /// after each denial (tokio timers). Cancel-safe: dropping the future
    /// reserves nothing. (With a [`ManualClock`](crate::ManualClock) the
    /// sleeps are real time while the clock stands still: advance it.)
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::{Duration, Instant};
    /// use slidelog::Limiter;
    ///
    /// let limiter = Limiter::new(1, Duration::from_millis(20))?;
    /// let start = Instant::now();
    /// limiter.until_ready().await;
    /// limiter.until_ready().await; // waits for the first admission to expire
    /// assert!(start.elapsed() >= Duration::from_millis(19));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_ready(&self) -> Admitted {
        self.until_n_ready(1)
            .await
            .expect("1 unit always fits a limit >= 1")
    }

    /// Waits until `n` units are admitted together.
    ///
    /// # Errors
    ///
    /// `n > limit` can never be admitted: [`DenyReason::ExceedsLimit`](crate::DenyReason::ExceedsLimit) at once.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let limiter = slidelog::Limiter::new(2, Duration::from_millis(10))?;
    /// assert!(limiter.until_n_ready(2).await.is_ok());
    /// assert!(limiter.until_n_ready(3).await.is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready(&self, n: u32) -> Result<Admitted, Denied> {
        wait_until(|| self.check_n(n), Duration::ZERO).await
    }

    /// Like [`until_n_ready`](Self::until_n_ready), adding a random delay
    /// below `max_jitter` to each sleep so that waiting clients do not all
    /// retry at the same instant.
    ///
    /// # Errors
    ///
    /// As for [`until_n_ready`](Self::until_n_ready).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let limiter = slidelog::Limiter::new(1, Duration::from_millis(5))?;
    /// limiter.until_n_ready_with_jitter(1, Duration::from_millis(2)).await.unwrap();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready_with_jitter(
        &self,
        n: u32,
        max_jitter: Duration,
    ) -> Result<Admitted, Denied> {
        wait_until(|| self.check_n(n), max_jitter).await
    }
}

impl<C: Clock> SlidingCounter<C> {
    /// Waits until one request is admitted (see [`Limiter::until_ready`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_millis(10), 2)?;
    /// counter.until_ready().await;
    /// counter.until_ready().await; // about 5 to 10 ms later
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_ready(&self) -> Admitted {
        self.until_n_ready(1)
            .await
            .expect("1 unit always fits a limit >= 1")
    }

    /// Waits until `n` units are admitted (see [`Limiter::until_n_ready`]).
    ///
    /// # Errors
    ///
    /// `n > limit`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_millis(10), 2)?;
    /// counter.until_n_ready(1).await.unwrap();
    /// counter.until_n_ready(1).await.unwrap();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready(&self, n: u32) -> Result<Admitted, Denied> {
        self.until_n_ready_with_jitter(n, Duration::ZERO).await
    }

    /// Like [`until_n_ready`](Self::until_n_ready), adding a random delay
    /// below `max_jitter` to each sleep (see
    /// [`Limiter::until_n_ready_with_jitter`]).
    ///
    /// # Errors
    ///
    /// `n > limit`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let counter = slidelog::SlidingCounter::new(1, Duration::from_millis(10), 2)?;
    /// counter.until_n_ready_with_jitter(1, Duration::from_millis(2)).await.unwrap();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready_with_jitter(
        &self,
        n: u32,
        max_jitter: Duration,
    ) -> Result<Admitted, Denied> {
        wait_until(|| RateLimit::check_n(self, n), max_jitter).await
    }
}

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + crate::KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Waits until one request for `key` is admitted (see
    /// [`Limiter::until_ready`]).
    ///
    /// Unlike [`Limiter::until_ready`], a keyed wait can fail, so it returns
    /// a `Result`: a key that is not live yet needs a place under
    /// `max_keys` and the byte budget, and a full limiter refuses it.
    ///
    /// # Errors
    ///
    /// Only [`DenyReason::KeyCapacity`](crate::DenyReason::KeyCapacity)
    /// (a new key at a full `max_keys` or byte budget), returned at once:
    /// waiting for room among other clients' keys is not this key's wait.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<String>::new(1, Duration::from_millis(10))?;
    /// limiter.until_ready("a").await.unwrap();
    /// limiter.until_ready("a").await.unwrap();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_ready<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.until_n_ready(key, 1).await
    }

    /// Waits until `n` units for `key` are admitted together.
    ///
    /// # Errors
    ///
    /// `n > limit`, or a new key at a full `max_keys`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(2, Duration::from_millis(10))?;
    /// assert!(limiter.until_n_ready(&1, 2).await.is_ok());
    /// assert!(limiter.until_n_ready(&1, 3).await.is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.until_n_ready_with_jitter(key, n, Duration::ZERO).await
    }

    /// Like [`until_n_ready`](Self::until_n_ready), adding a random delay
    /// below `max_jitter` to each sleep (see
    /// [`Limiter::until_n_ready_with_jitter`]).
    ///
    /// # Errors
    ///
    /// `n > limit`, or a new key at a full limiter.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(1, Duration::from_millis(5))?;
    /// limiter.until_n_ready_with_jitter(&1, 1, Duration::from_millis(2)).await.unwrap();
    /// limiter.until_n_ready_with_jitter(&1, 1, Duration::from_millis(2)).await.unwrap();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_n_ready_with_jitter<Q>(
        &self,
        key: &Q,
        n: u32,
        max_jitter: Duration,
    ) -> Result<Admitted, Denied>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        wait_until(|| self.check_n(key, n), max_jitter).await
    }
}
