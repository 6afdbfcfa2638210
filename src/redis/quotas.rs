//! Per-key quotas: the builder's [`quota`](super::RedisBuilder::quota)
//! function, and the rules of each policy set it answers, kept in a
//! bounded cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::reconfigure::Rules;
use crate::policy::Policy;
use crate::quota::Quota;

/// A key's own quota, `None` for the limiter's policies.
type KeyQuota = dyn Fn(&str) -> Option<Quota> + Send + Sync;

/// A quota function, shared by a builder's copies.
#[derive(Clone)]
pub(super) struct QuotaFn(pub(super) Arc<KeyQuota>);

impl core::fmt::Debug for QuotaFn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("QuotaFn(..)")
    }
}

/// Most policy sets whose rules are kept at once. Beyond it the cache is
/// emptied and they are made again as asked: a quota function that
/// answers ever new sets (limits a client chooses) costs memory up to
/// this bound.
pub(super) const POLICY_SETS: usize = 1_024;

/// The quota function and the rules of the policy sets it answered.
pub(super) struct Quotas {
    quota: QuotaFn,
    rules: Mutex<HashMap<Vec<Policy>, Arc<Rules>>>,
}

impl Quotas {
    pub(super) fn new(quota: QuotaFn) -> Quotas {
        Quotas {
            quota,
            rules: Mutex::new(HashMap::new()),
        }
    }

    /// The rules `key`'s quota makes, `None` when the function gives it
    /// none; made under `generation` (see `Rules::generation`) the first
    /// time its policy set is met.
    pub(super) fn rules_for(&self, key: &str, generation: u64) -> Option<Arc<Rules>> {
        let quota = (self.quota.0)(key)?;
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(made) = rules.get(quota.policies()) {
            return Some(Arc::clone(made));
        }
        if rules.len() >= POLICY_SETS {
            rules.clear();
        }
        let made = Arc::new(
            Rules::new(quota.policies().to_vec(), generation)
                .expect("a Quota's policies are validated when it is made"),
        );
        rules.insert(quota.policies().to_vec(), Arc::clone(&made));
        Some(made)
    }

    /// Forgets every policy set's rules (the function's answers changed).
    pub(super) fn forget(&self) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
