//! [`FailurePolicy`]: what a call answers when Redis fails, and the hook
//! told of each failure.

use std::sync::Arc;

use super::{RedisLimitError, RedisLimiter};
use crate::decision::{Admitted, Denied};
use crate::sync::atomic::Ordering;

/// What a check answers when Redis cannot be reached, times out or fails.
///
/// ```
/// use slidelog::redis::FailurePolicy;
/// assert_eq!(FailurePolicy::default(), FailurePolicy::Error);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Return the error to the caller (`Err(RedisLimitError)`).
    #[default]
    Error,
    /// Fail open: admit (with `remaining` 0 and `at` 0).
    Open,
    /// Fail closed: deny with [`DenyReason::Unavailable`](crate::DenyReason::Unavailable)
    /// and `retry_after` equal to the timeout (the tower layer answers
    /// `503 Service Unavailable`: its layer's `unavailable_status`).
    Closed,
}

/// What [`RedisBuilder::on_failure`](super::RedisBuilder::on_failure) is
/// given: told of every failed call.
type Told = dyn Fn(&RedisLimitError) + Send + Sync;

/// The failure hook, shared by a builder's copies and a limiter's clones.
#[derive(Clone)]
pub(super) struct FailureHook(pub(super) Arc<Told>);

impl core::fmt::Debug for FailureHook {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FailureHook(..)")
    }
}

impl RedisLimiter {
    /// The denial of a failed check: the store could not decide; retry
    /// after the timeout.
    pub(super) fn timeout_denial(&self) -> Denied {
        Denied::unavailable(
            u64::try_from(self.shared.timeout.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
        )
    }

    pub(super) fn fail(
        &self,
        error: RedisLimitError,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        // Relaxed: a statistic.
        self.shared.failures.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::debug!(target: "slidelog", error = %error, policy = ?self.shared.policy, "Redis check failed");
        #[cfg(feature = "metrics")]
        metrics::counter!("slidelog_redis_failures_total", "limiter" => self.shared.name.label())
            .increment(1);
        if let Some(hook) = &self.shared.on_failure {
            (hook.0)(&error);
        }
        match self.shared.policy {
            FailurePolicy::Error => Err(error),
            FailurePolicy::Open => Ok(Ok(Admitted {
                at: 0,
                remaining: 0,
                policy: 0,
            })),
            FailurePolicy::Closed => Ok(Err(self.timeout_denial())),
        }
    }
}
