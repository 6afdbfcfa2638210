//! The tower layer's backend (feature `tower`).

use std::time::Duration;

use super::script::{Rooms, Told};
use super::{RedisLimitError, RedisLimiter};
use crate::decision::Denied;
use crate::policy::Policy;

impl crate::tower::Backend<String> for RedisLimiter {
    type Future =
        core::pin::Pin<Box<dyn core::future::Future<Output = crate::tower::Verdict> + Send>>;

    fn check(&self, key: String) -> Self::Future {
        let limiter = self.clone();
        Box::pin(async move {
            let (told, degraded) = match limiter.ask_told(&key, 1, None, false).await {
                Ok(told) => (told, false),
                // A client's key too long to store: refused as over the
                // limit would be (it can never be counted).
                Err(RedisLimitError::KeyTooLong { .. }) => {
                    let retry = limiter.timeout_denial().retry_after_nanos();
                    let told = Told {
                        decision: Err(Denied::rate_limited(retry)),
                        grows: Duration::ZERO,
                        rooms: Rooms::default(),
                        rules: None,
                    };
                    (told, false)
                }
                // The store failed: the failure policy answers, and
                // `FailurePolicy::Error` behind HTTP denies (refusing is
                // safer than letting a request through unlimited).
                Err(e) => {
                    let decision = match limiter.fail(e) {
                        Ok(decision) => decision,
                        Err(_) => Err(limiter.timeout_denial()),
                    };
                    let told = Told {
                        decision,
                        grows: Duration::ZERO,
                        rooms: Rooms::default(),
                        rules: None,
                    };
                    (told, true)
                }
            };
            // Every policy's item in the `RateLimit` field, as in process,
            // when the script told each one's room.
            let per_policy = (told.rooms.len > 0)
                .then(|| crate::tower::PolicyStates::new(told.rooms.as_slice()));
            // The policies the script judged by: the call's rules.
            let decided_by = match &told.rules {
                Some(rules) => {
                    crate::tower::DecidedBy::Policies(crate::tower::PolicySet::new(&rules.policies))
                }
                None => crate::tower::DecidedBy::Unsaid,
            };
            crate::tower::Verdict {
                degraded,
                per_policy,
                decided_by,
                ..crate::tower::Verdict::new(told.decision, told.grows)
            }
        })
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        RedisLimiter::policies(self)
    }

    fn generation(&self) -> u64 {
        RedisLimiter::generation(self)
    }
}
