//! Which policies describe a response: those that decided it, or the
//! backend's read around the decision; the headers of an admission.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::deny::{DenyHook, DenyStyle, Style};
use super::headers::{HeaderStyle, Headers, PolicyList, Written, list_headers};
use crate::backend::{Backend, Verdict};
use crate::decision::Admitted;
use crate::decision::PolicySet;
use crate::policy::Policy;

/// `backend`'s policies at `generation` from the shared description
/// `cache`, written anew if it is of another generation.
pub(super) fn described_at<L: Backend<K> + ?Sized, K>(
    backend: &L,
    cache: &ArcSwap<Described>,
    generation: u64,
) -> arc_swap::Guard<Arc<Described>> {
    let described = cache.load();
    if described.generation == generation {
        return described;
    }
    cache.store(Arc::new(Described::of(backend)));
    cache.load()
}

/// For a check that is awaited: after its verdict, the key's own policies
/// and the layer's description at the generation read then, if it moved
/// from the one read before the check (see [`decided_by`]).
pub(super) type Redescribe = Box<dyn Fn() -> (Option<PolicyList>, Option<Arc<Described>>) + Send>;

/// **Which description a verdict that does not say its policies gets**
/// ([`DecidedBy::Unsaid`]; see [`said`] for one that does): the first of the key's own
/// policies (read after the decision), the layer's description at the
/// generation read after the decision (if it moved during it) and the one
/// read before it, that fits the verdict (see [`fits`]); `None` if none
/// does. The description cached for a generation is what the backend
/// answered for it, but a backend's generation and its decisions are two
/// reads: the keyed limiter moves each key to new policies after the
/// generation moved, the single-key limiter moves the generation after its
/// policies changed. So a decision racing a reconfiguration may have been
/// made by the configuration on either side of it, and only one of them
/// can describe it; a verdict that neither describes (two
/// reconfigurations within one decision) is sent without rate-limit
/// fields.
pub(super) fn decided_by<'a>(
    verdict: &Verdict,
    own: Option<&'a PolicyList>,
    after: Option<&'a Described>,
    before: (&'a PolicyList, Option<&'a Written>),
) -> (Option<&'a PolicyList>, Option<&'a Written>) {
    if let Some(own) = own
        && fits(verdict, own)
    {
        return (Some(own), None);
    }
    if let Some(after) = after
        && fits(verdict, &after.policies)
    {
        return (Some(&after.policies), Some(&after.written));
    }
    if fits(verdict, before.0) {
        return (Some(before.0), before.1);
    }
    (None, None)
}

/// **The description of policies a backend said decided** (`set`): the
/// layer's description read before the decision, of its base policies, of
/// the generation read after it, if one of them is of `set` (their values
/// written once); else `own`, `set` written per response.
pub(super) fn said<'a>(
    set: &PolicySet,
    own: Option<&'a PolicyList>,
    after: Option<&'a Described>,
    before: (&'a PolicyList, Option<&'a Written>),
    base: &'a Described,
) -> (Option<&'a PolicyList>, Option<&'a Written>) {
    if set.matches(before.0) {
        return (Some(before.0), before.1);
    }
    if set.matches(&base.policies) {
        return (Some(&base.policies), Some(&base.written));
    }
    if let Some(after) = after
        && set.matches(&after.policies)
    {
        return (Some(&after.policies), Some(&after.written));
    }
    (own, None)
}

/// `set` as a list written per response.
pub(super) fn set_list(set: &PolicySet) -> PolicyList {
    let mut policies = [Policy::new(0, core::time::Duration::ZERO); crate::MAX_POLICIES];
    let len = set.write_into(&mut policies);
    PolicyList::new(&policies[..len])
}

/// Whether `policies` can have decided `verdict`: the policy it names is
/// one of them, its `remaining` is at most that policy's limit, and each
/// policy's state (with several) is one of theirs, within its limit. Two
/// configurations differ in a limit or a number of policies, so a verdict
/// of one does not fit the other but where their answers coincide.
pub(super) fn fits(verdict: &Verdict, policies: &PolicyList) -> bool {
    if verdict.degraded {
        return true;
    }
    let states_fit = verdict.per_policy.as_ref().is_none_or(|states| {
        states.as_slice().len() == policies.len()
            && states
                .as_slice()
                .iter()
                .zip(policies.iter())
                .all(|(&(remaining, _), policy)| remaining <= policy.limit)
    });
    let named_fits = match &verdict.decision {
        Ok(admitted) => policies
            .get(admitted.policy())
            .is_some_and(|policy| admitted.remaining() <= policy.limit),
        Err(denied) => {
            denied.reason() != crate::DenyReason::RateLimited || denied.policy() < policies.len()
        }
    };
    states_fit && named_fits
}

/// The backend's policies as the headers describe them, at one generation.
#[derive(Clone)]
pub(super) struct Described {
    pub(super) policies: PolicyList,
    /// Their `RateLimit-Policy` value and spent items (interned: static
    /// strings).
    pub(super) written: Written,
    pub(super) generation: u64,
}

impl Described {
    pub(super) fn of<L: Backend<K> + ?Sized, K>(backend: &L) -> Described {
        // The policies between two equal readings of the generation: a
        // description labelled with a generation holds that generation's
        // policies (a reconfiguration between the reads is read again).
        // Past a few attempts, labelled with the first reading: a request
        // that reads a later one describes it anew, and `decided_by`
        // checks what it is given.
        let mut generation = backend.generation();
        let mut policies = backend.policies();
        for _ in 0..3 {
            let again = backend.generation();
            if again == generation {
                break;
            }
            generation = again;
            policies = backend.policies();
        }
        Described::named(&policies, generation)
    }

    /// `policies` described, labelled `generation`.
    pub(super) fn named(policies: &[Policy], generation: u64) -> Described {
        let policies = PolicyList::named(policies);
        Described {
            written: Written::of(&policies),
            policies,
            generation,
        }
    }
}

/// A [`Style`] that outlives `call`: a pending check's.
pub(super) struct OwnedStyle {
    pub(super) headers: HeaderStyle,
    pub(super) deny: DenyStyle,
    pub(super) policies: PolicyList,
    pub(super) written: Option<Written>,
    pub(super) hook: Option<DenyHook>,
    pub(super) unavailable: http::StatusCode,
    pub(super) name: crate::observe::Name,
}

impl From<&Style<'_>> for OwnedStyle {
    fn from(style: &Style<'_>) -> OwnedStyle {
        OwnedStyle {
            headers: style.headers,
            deny: style.deny,
            policies: *style.policies,
            written: style.written.cloned(),
            hook: style.hook.cloned(),
            unavailable: style.unavailable,
            name: style.name.clone(),
        }
    }
}

impl OwnedStyle {
    pub(super) fn style(&self) -> Style<'_> {
        Style {
            headers: self.headers,
            deny: self.deny,
            policies: &self.policies,
            written: self.written.as_ref(),
            hook: self.hook.as_ref(),
            unavailable: self.unavailable,
            name: &self.name,
        }
    }
}

/// The rate-limit headers of an admission (and its count in the metrics).
pub(super) fn admitted_headers(
    style: &Style<'_>,
    verdict: &Verdict,
    admitted: &Admitted,
) -> Headers {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "slidelog_requests_total",
        "limiter" => style.name.label(),
        "decision" => "admitted"
    )
    .increment(1);
    // Admitted by a failure policy (fail open): nothing was counted, so no
    // `RateLimit` fields.
    if verdict.degraded {
        return Headers::default();
    }
    list_headers(
        style.headers,
        style.policies,
        style.written,
        admitted.policy(),
        admitted.remaining(),
        verdict.wait,
        verdict.per_policy.as_ref(),
    )
}
