//! One key's decision with everything a caller that reports per policy
//! needs (the tower layer's backend reads it): each policy's room and the
//! policies that decided, from the same script call.

use std::time::Duration;

use super::script::{Rooms, Told};
use super::{RedisLimitError, RedisLimiter};
use crate::decision::{Admitted, DecidedBy, Denied, PolicySet, PolicyStates};

/// A decision on one unit of a key, as [`RedisLimiter::judge_one`] gives it.
pub(crate) struct Judged {
    /// Admitted or denied (a failed call answered by the failure policy).
    pub(crate) decision: Result<Admitted, Denied>,
    /// How far the growth form would wait (zero here: one unit).
    pub(crate) grows: Duration,
    /// The store failed and the failure policy answered.
    pub(crate) degraded: bool,
    /// Each policy's room, when the script told them.
    pub(crate) per_policy: Option<PolicyStates>,
    /// The policies the script judged by.
    pub(crate) decided_by: DecidedBy,
}

impl RedisLimiter {
    /// Decides one unit of `key` and tells each policy's room: a key too
    /// long to store is refused as over the limit would be (it can never be
    /// counted), and a failed call is answered by the failure policy, with
    /// `FailurePolicy::Error` denying (refusing is safer than letting a
    /// request through unlimited).
    pub(crate) async fn judge_one(&self, key: &str) -> Judged {
        let (told, degraded) = match self.ask_told(key, 1, None, false).await {
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
            grows: told.grows,
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
