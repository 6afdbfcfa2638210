//! [`Verdict`]: what a backend answers for one request.

use std::time::Duration;

use crate::decision::{Admitted, DecidedBy, Denied, PolicyStates};

/// What a backend answers for one request.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::Backend;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = KeyedLimiter::<u64>::new(2, Duration::from_secs(60))?;
/// let verdict = Backend::check(&limiter, 7).await;
/// assert_eq!(verdict.decision.unwrap().remaining(), 1);
/// // The admission just made is the oldest in the window: the quota grows
/// // back when it leaves, 60 s from now.
/// assert_eq!(verdict.wait, Duration::from_secs(60));
/// # Ok::<(), slidelog::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The decision.
    pub decision: Result<Admitted, Denied>,
    /// For an admission: how long until `remaining` next grows (the IETF
    /// `t`): until the oldest admission still in the window leaves it, or,
    /// while a cut limit leaves the window holding more than the limit, the
    /// admission whose leaving brings it under;
    /// zero only for an empty window. (While `remaining > 0` a request fits
    /// now; at `remaining == 0` this is also the wait for the next one.)
    /// Zero for a dry run ([`Request::dry`](crate::Request::dry)).
    pub wait: Duration,
    /// Whether the backend could not decide and its failure policy
    /// answered (Redis down: fail open admits, fail closed denies with
    /// [`DenyReason::Unavailable`](crate::DenyReason::Unavailable)). The
    /// tower layer then sends no `RateLimit` fields: nothing was counted.
    pub degraded: bool,
    /// With several policies, each one's room and wait in the order given:
    /// the IETF `RateLimit` field lists one item per policy from these
    /// (`None`: one item, for the policy the decision names).
    pub per_policy: Option<PolicyStates>,
    /// The policies that made the decision, which its `RateLimit-Policy`
    /// field names ([`DecidedBy::Unsaid`], the default: the tower layer
    /// names the backend's policies read around the decision that fit it),
    /// exactly, while the backend is reconfigured (see the tower module's
    /// "Reconfiguration"). [`DecidedBy::Base`] names the backend's own
    /// [`base_policies`](crate::Backend::base_policies): a backend that
    /// passes on an inner store's verdict names that store's policies
    /// instead (see [`Backend`](crate::Backend), "A backend of your own").
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Policy, Quota};
    /// use slidelog::{Backend, DecidedBy, PolicySet};
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(10, Duration::from_secs(60), ManualClock::new())?;
    /// // The policies it was built with.
    /// assert_eq!(Backend::check_now(&limiter, &7).unwrap().decided_by, DecidedBy::Base);
    /// limiter.reconfigure(Quota::new(100, Duration::from_secs(60))?)?;
    /// let moved = PolicySet::new(&[Policy::new(100, Duration::from_secs(60))]);
    /// assert_eq!(Backend::check_now(&limiter, &7).unwrap().decided_by, DecidedBy::Policies(moved));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub decided_by: DecidedBy,
}

impl Verdict {
    /// A verdict of `decision`, `wait` until an admission's `remaining`
    /// grows, and nothing else said: not degraded, one `RateLimit` item,
    /// [`DecidedBy::Unsaid`]. A backend of its own says more by naming the
    /// fields before it (`Verdict { decided_by, ..Verdict::new(decision, wait) }`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{Limiter, Policy};
    /// use slidelog::{DecidedBy, PolicySet, Verdict};
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// let decision = limiter.check();
    /// let verdict = Verdict {
    ///     decided_by: DecidedBy::Policies(PolicySet::new(&limiter.policies())),
    ///     ..Verdict::new(decision, Duration::from_secs(1))
    /// };
    /// assert!(!verdict.degraded);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(decision: Result<Admitted, Denied>, wait: Duration) -> Verdict {
        Verdict {
            decision,
            wait,
            degraded: false,
            per_policy: None,
            decided_by: DecidedBy::Unsaid,
        }
    }

    /// A verdict to be written in place (`local::keyed_verdict`): each field is
    /// overwritten, or, for `per_policy`, left `None` by one policy. Each
    /// policy's state is written in the verdict's own field, not carried
    /// through the limiter's return values: a field written in place is not
    /// copied on the way (BENCHMARKS.md, "Over HTTP").
    pub(super) fn placeholder() -> Verdict {
        Verdict {
            decision: Ok(Admitted {
                at: 0,
                remaining: 0,
                policy: 0,
            }),
            wait: Duration::ZERO,
            degraded: false,
            per_policy: None,
            decided_by: DecidedBy::Base,
        }
    }
}

/// A verdict from a decision and, for an admission, how long until its
/// `remaining` grows (see [`Verdict::wait`]).
pub(super) fn grown(decision: Result<(Admitted, Duration), Denied>) -> Verdict {
    let (decision, wait) = match decision {
        Ok((admitted, wait)) => (Ok(admitted), wait),
        Err(denied) => (Err(denied), Duration::ZERO),
    };
    Verdict::new(decision, wait)
}
