//! The local pre-check tier: denials Redis gave this process, answered
//! again without a round trip until their retry time.

use super::RedisLimiter;
use super::reconfigure::Rules;
use crate::decision::Denied;
use crate::sync::atomic::Ordering;

/// The most keys' denials the local pre-check remembers unless
/// [`RedisBuilder::local_precheck_capacity`](super::RedisBuilder::local_precheck_capacity)
/// says otherwise.
pub const DEFAULT_PRECHECK_KEYS: usize = 100_000;

/// A denial Redis gave this process, as the pre-check keeps it per key.
#[derive(Clone, Copy, Debug)]
pub(super) struct Remembered {
    /// The local time before which `units` (or more) are certainly denied.
    until: u64,
    units: u32,
    /// The policy Redis said denied them.
    policy: u8,
    /// The generation of the rules it judged by.
    generation: u64,
    /// The count of requotas read before those rules.
    requotas: u64,
}

impl RedisLimiter {
    /// The denial this process remembers for `n` units of `full_key` at
    /// local time `local_now`: one Redis gave for at most `n` units, before
    /// its retry time, under `rules` as read after the same count of
    /// [`requota`](RedisLimiter::requota)s (counted as a local denial). A
    /// denial judged by a quota read before a `requota` never answers
    /// after it, even if it was stored after it.
    pub(super) fn remembered_denial(
        &self,
        full_key: &str,
        n: u32,
        local_now: u64,
        (rules, requotas): (&Rules, u64),
    ) -> Option<Denied> {
        if let Some(map) = &self.shared.precheck
            && let Some(&Remembered {
                until,
                units,
                policy,
                generation,
                requotas: read,
            }) = map.pin().get(full_key)
            && n >= units
            && local_now < until
            && generation == rules.generation
            && read == requotas
        {
            // Relaxed: a statistic.
            self.shared.local_denials.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            metrics::counter!(
                "slidelog_redis_local_denials_total",
                "limiter" => self.shared.name.label()
            )
            .increment(1);
            // The policy Redis named: the same answer, without
            // the round trip.
            return Some(Denied::rate_limited(until - local_now).with_policy(policy));
        }
        None
    }

    /// Remembers Redis's denial of `n` units of `full_key` under `rules`,
    /// read after `requotas` requotas (`policy` violated, retry in
    /// `retry_ns`), for a call sent at local time `local_now`.
    pub(super) fn remember_denial(
        &self,
        full_key: String,
        n: u32,
        local_now: u64,
        retry_ns: u64,
        policy: u8,
        (rules, requotas): (&Rules, u64),
    ) {
        if let Some(map) = &self.shared.precheck {
            let map = map.pin();
            let cap = self.shared.precheck_keys;
            if map.len() >= cap {
                map.retain(|_, remembered| remembered.until > local_now);
            }
            // Full of live denials: this one is not remembered (a miss
            // costs a round trip, never a wrong answer).
            if map.len() < cap || map.contains_key(&full_key) {
                // From the time we *sent* the request: Redis judged it
                // later, so the true retry time is no earlier than this.
                map.insert(
                    full_key,
                    Remembered {
                        until: local_now.saturating_add(retry_ns),
                        units: n,
                        policy,
                        generation: rules.generation,
                        requotas,
                    },
                );
            }
        }
    }
}
