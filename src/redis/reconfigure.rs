//! The policies in force: [`Rules`], the accessors,
//! [`reconfigure`](RedisLimiter::reconfigure),
//! [`with_quota`](RedisLimiter::with_quota) and
//! [`requota`](RedisLimiter::requota).

use std::time::Duration;

use super::{Options, RedisLimiter, Shared};
use crate::error::ConfigError;
use crate::policy::Policy;
use crate::ring::Shape;

/// The policies as the scripts take them: replaced whole by
/// [`RedisLimiter::reconfigure`].
pub(super) struct Rules {
    /// The policies as given, and in microseconds.
    pub(super) policies: Vec<Policy>,
    pub(super) rules: Vec<(u32, u64)>,
    /// How a ring without a header is read (µs): the largest limit, with the
    /// longest window among those.
    pub(super) ring: (u32, u64),
    pub(super) min_limit: u32,
    pub(super) min_policy: u8,
    /// How many reconfigurations made these (a pre-check entry of another
    /// generation is ignored).
    pub(super) generation: u64,
}

impl Rules {
    pub(super) fn new(policies: Vec<Policy>, generation: u64) -> Result<Rules, ConfigError> {
        // Validates every policy (as the in-process limiters do).
        Shape::new(&policies)?;
        let us = |w: Duration| u64::try_from(w.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX);
        let rules: Vec<(u32, u64)> = policies.iter().map(|p| (p.limit, us(p.window))).collect();
        let ring = *rules
            .iter()
            .max_by_key(|&&(limit, window)| (limit, window))
            .expect("at least one policy");
        let (min_policy, &(min_limit, _)) = rules
            .iter()
            .enumerate()
            .min_by_key(|&(i, &(limit, _))| (limit, i))
            .expect("at least one policy");
        Ok(Rules {
            policies,
            rules,
            ring,
            min_limit,
            min_policy: min_policy as u8,
            generation,
        })
    }
}

impl RedisLimiter {
    /// The per-key limit (the first policy's).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { assert!(limiter.limit() >= 1); }
    /// ```
    pub fn limit(&self) -> u32 {
        self.shared.rules.load().rules[0].0
    }

    /// The window (the first policy's; microsecond precision).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { let _ = limiter.window(); }
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.shared.rules.load().rules[0].1)
    }

    /// Every policy now, in the order given.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { assert!(!limiter.policies().is_empty()); }
    /// ```
    pub fn policies(&self) -> Vec<Policy> {
        self.shared.rules.load().policies.clone()
    }

    /// Changes the policies of every key, for this limiter and its clones,
    /// keeping what Redis holds. Other processes sharing the keys judge by
    /// their own configuration until they change it too.
    ///
    /// Every call that starts after this returns sends the new policies,
    /// and Redis judges them over what the key holds, never a mix; local
    /// pre-check denials of the old policies are dropped.
    ///
    /// What a key holds, whoever calls it (this limiter before and after,
    /// [`with_quota`](Self::with_quota) siblings, replicas on other
    /// configurations): from the first call of each policy set that finds
    /// the key or admits into it, what that set can still count — in the
    /// ring layout the newest admissions up to the largest limit of those
    /// sets, in the sorted set every admission within their longest
    /// window. No call, of a smaller limit or a shorter window, drops
    /// that; the key expires that longest window after the last call that
    /// wrote it (an admission, or a call that grew what it holds).
    /// So every call is exact over the key's history as far as any policy
    /// set on it reaches, and where every limiter uses one window length,
    /// no such window ever holds more admissions than the largest limit in
    /// force in it (a cut and a restore within the window admit nothing
    /// more: the window's admissions are all still there).
    ///
    /// As [`Limiter::reconfigure`](crate::Limiter::reconfigure), a smaller
    /// limit, a shorter window or an added policy takes effect at once over
    /// that history, and a larger limit or a longer window counts only what
    /// the key holds. Unlike it: the key expires (above), so a window grown
    /// after the key's longest window has passed since its last write
    /// recalls nothing, where `Limiter` recalls what its ring kept however
    /// old; and the sorted set holds nothing older than the longest window
    /// that has judged the key, so a window grown past that recalls nothing
    /// older.
    ///
    /// # Errors
    ///
    /// None for a [`Quota`](crate::Quota), which is validated when made.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// limiter.reconfigure(slidelog::Quota::new(50, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.limit(), 50);
    /// # Ok(()) }
    /// ```
    pub fn reconfigure(&self, quota: crate::Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self
            .shared
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let generation = self.shared.rules.load().generation + 1;
        let rules = Rules::new(quota.policies().to_vec(), generation)?;
        self.shared.rules.store(std::sync::Arc::new(rules));
        if let Some(map) = &self.shared.precheck {
            map.pin().clear();
        }
        Ok(())
    }

    /// Another limiter on this one's connection, with `quota`'s policies
    /// for every key and this one's options (layout, prefix, failure
    /// policy, timeout, local pre-check, name, failure hook; not its
    /// [`quota`](super::RedisBuilder::quota) function): no new connection is opened, so a service
    /// that decides keys under many policy sets (`slidelog serve`, one per
    /// configured or requested limit) holds one connection, not one per set.
    ///
    /// The two are separate limiters on the same Redis keys:
    /// [`reconfigure`](Self::reconfigure) on one does not change the other,
    /// each keeps its own [`stats`](Self::stats), and a key checked through
    /// both is judged each time by the policies of the limiter asked, over
    /// what the key holds: what both policy sets can count (see
    /// [`reconfigure`](Self::reconfigure)). 10 and 5 a minute alternating
    /// on one key admit 10 in the minute, as two replicas on those
    /// configurations do.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let strict = limiter.with_quota(&slidelog::Quota::new(2, Duration::from_secs(60))?);
    /// assert_eq!(strict.limit(), 2);
    /// assert!(strict.check("admin").await?.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn with_quota(&self, quota: &crate::Quota) -> RedisLimiter {
        let rules = Rules::new(quota.policies().to_vec(), 0)
            .expect("a Quota's policies are validated when it is made");
        let shared = &self.shared;
        let prefix = shared.prefix.clone();
        RedisLimiter {
            conn: self.conn.clone(),
            shared: std::sync::Arc::new(Shared::new(
                shared.script.clone(),
                rules,
                shared.layout,
                prefix,
                Options {
                    policy: shared.policy,
                    timeout: shared.timeout,
                    max_key_len: shared.max_key_len,
                    // Its own count of calls in flight, to the same bound.
                    max_in_flight: shared.max_in_flight,
                    precheck: shared.precheck.as_ref().map(|_| shared.precheck_keys),
                    name: shared.name.clone(),
                    // Every key of the sibling has `quota`.
                    quota: None,
                    on_failure: shared.on_failure.clone(),
                },
            )),
        }
    }

    /// Judges every key by the quota the builder's
    /// [`quota`](super::RedisBuilder::quota) function answers from now on,
    /// after its answers changed (a reloaded configuration): the policy
    /// sets made from its earlier answers, and local pre-check denials, are
    /// dropped. What Redis holds is kept: a key's next call sends its new
    /// policies, judged over its history (see
    /// [`reconfigure`](Self::reconfigure)). Without a quota function it
    /// only drops the pre-check's denials.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// // The configuration the quota function reads was reloaded.
    /// limiter.requota();
    /// # Ok(()) }
    /// ```
    pub fn requota(&self) {
        let _one_at_a_time = self
            .shared
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(quotas) = &self.shared.quotas {
            quotas.forget();
        }
        // After the rules are forgotten: a call that reads this count reads
        // the new rules (SeqCst: the load in `ask_told` that sees it sees
        // the forgetting before it). A call that read the count before, and
        // is denied after, stores the old count with its denial, and the
        // pre-check never answers with it (`precheck.rs`).
        self.shared
            .requotas
            .fetch_add(1, crate::sync::atomic::Ordering::SeqCst);
        if let Some(map) = &self.shared.precheck {
            map.pin().clear();
        }
    }

    /// The rules `key` is judged by: its own quota's, if the builder's
    /// quota function gives it one, else the limiter's.
    pub(super) fn rules_for(&self, key: &str) -> std::sync::Arc<Rules> {
        let rules = self.shared.rules.load_full();
        match &self.shared.quotas {
            Some(quotas) => quotas.rules_for(key, rules.generation).unwrap_or(rules),
            None => rules,
        }
    }

    /// How many times [`reconfigure`](Self::reconfigure) changed this
    /// limiter (and its clones).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { let _ = limiter.generation(); }
    /// ```
    pub fn generation(&self) -> u64 {
        self.shared.rules.load().generation
    }
}
