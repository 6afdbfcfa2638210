//! The Redis limiter as a [`Backend`]: one key's decision with everything
//! a caller that reports per policy needs, each policy's room and the
//! policies that decided, from the same script call.

use core::future::Future;
use std::time::Duration;

use super::script::{Rooms, Told};
use super::{RedisLimitError, RedisLimiter};
use crate::backend::{Backend, Request, Verdict};
use crate::decision::{Admitted, DecidedBy, Denied, PolicySet, PolicyStates};
use crate::policy::Policy;

/// A decision on a key, as [`RedisLimiter::judged`] gives it.
struct Judged {
    /// Admitted or denied (a failed call answered by the failure policy).
    decision: Result<Admitted, Denied>,
    /// For an admission recorded, when the room of the policy it names
    /// grows.
    grows: Duration,
    /// The store failed and the failure policy answered.
    degraded: bool,
    /// Each policy's room, when the script told them.
    per_policy: Option<PolicyStates>,
    /// The policies the script judged by.
    decided_by: DecidedBy,
}

impl RedisLimiter {
    /// Decides `request` for `key` and tells each policy's room: a key too
    /// long to store is refused as over the limit would be (it can never be
    /// counted), and a failed call is answered by the failure policy, with
    /// `FailurePolicy::Error` denying (refusing is safer than letting a
    /// request through unlimited).
    async fn judged(&self, key: &str, request: Request) -> Judged {
        let dry = !request.record;
        let (told, degraded) = match self.ask_told(key, request.units, None, dry).await {
            Ok(told) => (told, false),
            Err(RedisLimitError::KeyTooLong { .. }) => {
                let retry = self.timeout_denial().retry_after_nanos();
                (Told::without_rules(Err(Denied::rate_limited(retry))), false)
            }
            Err(e) => {
                let decision = match self.fail(e) {
                    Ok(decision) => decision,
                    Err(_) => Err(self.timeout_denial()),
                };
                (Told::without_rules(decision), true)
            }
        };
        // Every policy's item, as in process, when the script told each
        // one's room.
        let per_policy = (told.rooms.len > 0).then(|| PolicyStates::new(told.rooms.as_slice()));
        let decided_by = match &told.rules {
            Some(rules) => DecidedBy::Policies(PolicySet::new(&rules.policies)),
            None => DecidedBy::Unsaid,
        };
        Judged {
            decision: told.decision,
            // A dry run's verdict waits for nothing (see `Verdict::wait`).
            grows: if dry { Duration::ZERO } else { told.grows },
            degraded,
            per_policy,
            decided_by,
        }
    }
}

impl Told {
    /// A decision no script call made: no rooms, no policies.
    fn without_rules(decision: Result<Admitted, Denied>) -> Self {
        Told {
            decision,
            grows: Duration::ZERO,
            rooms: Rooms::default(),
            rules: None,
        }
    }
}

/// The exact log on Redis, shared across processes: each request is one
/// script call, which also tells every policy's room for the `RateLimit`
/// field. A key too long to store is refused as over the limit; a failed
/// call is answered by the limiter's [`FailurePolicy`](super::FailurePolicy),
/// `Error` denying.
///
/// ```no_run
/// # async fn f() -> Result<(), slidelog::redis::RedisLimitError> {
/// use std::time::Duration;
/// use slidelog::Backend;
/// use slidelog::redis::RedisLimiter;
///
/// let limiter = RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
///     .connect()
///     .await?;
/// let verdict = Backend::check(&limiter, "user42".to_string()).await;
/// if !verdict.degraded {
///     println!("{:?}", verdict.decision);
/// }
/// # Ok(()) }
/// ```
impl Backend<String> for RedisLimiter {
    type Future = core::pin::Pin<Box<dyn Future<Output = Verdict> + Send>>;

    fn judge(&self, key: String, request: Request) -> Self::Future {
        let limiter = self.clone();
        Box::pin(async move {
            let judged = limiter.judged(&key, request).await;
            Verdict {
                degraded: judged.degraded,
                per_policy: judged.per_policy,
                decided_by: judged.decided_by,
                ..Verdict::new(judged.decision, judged.grows)
            }
        })
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        RedisLimiter::policies(self)
    }

    fn key_policies(&self, key: &String) -> Option<Vec<Policy>> {
        self.shared.quotas.as_ref()?;
        Some(self.rules_for(key).policies.clone()).filter(|p| *p != RedisLimiter::policies(self))
    }

    fn generation(&self) -> u64 {
        RedisLimiter::generation(self)
    }
}
