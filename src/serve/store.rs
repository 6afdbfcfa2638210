//! Where the logs live: in process or in Redis.

use std::collections::HashMap;
use std::time::Duration;

use tonic::Status;

use crate::redis::RedisLimiter;
use crate::{Admitted, Denied, KeyedLimiter, Quota};

use super::*;

/// Where the logs live.
// One store per service: the Redis variant's size is paid once.
#[allow(clippy::large_enum_variant)]
pub(super) enum Store {
    /// In process: one keyed limiter whose per-key quotas come from the
    /// configuration.
    Local(Box<KeyedLimiter<String, crate::ClockChoice>>),
    /// Redis, shared by every replica of the service: one limiter per
    /// distinct set of policies, all on the same key names, so a key whose
    /// policies change keeps its history (the ring script rebuilds it).
    Redis {
        target: RedisTarget,
        tls: Box<RedisTls>,
        /// What every key starts with.
        prefix: String,
        /// The longest a round trip (or connecting) may take.
        timeout: Duration,
        /// The one connection, made on first use (the service starts while
        /// Redis is down, answering UNAVAILABLE until it is up).
        base: tokio::sync::OnceCell<RedisLimiter>,
        /// A limiter per policy set, each on `base`'s connection; at most
        /// [`POLICY_SETS`] of them (request overrides choose the sets).
        limiters: std::sync::Mutex<HashMap<Vec<crate::Policy>, RedisLimiter>>,
        /// Whether the last call failed: a Redis that stops answering is
        /// told once, and again when it answers.
        failing: std::sync::atomic::AtomicBool,
    },
}

/// The longest limiter key kept in Redis, in bytes: a descriptor whose key
/// is longer (its entries are the client's) is answered over the limit
/// ([`Store::refuses`]).
pub(super) const REDIS_MAX_KEY: usize = 8_192;

/// Most Redis limiters kept at once. Beyond it the map is emptied and they
/// are made again as asked: each is a few allocations on the shared
/// connection, so a client sending ever new limit overrides costs memory
/// up to this bound, never connections.
pub(super) const POLICY_SETS: usize = 1_024;

impl Store {
    /// Whether this store cannot keep `key`: Redis keeps keys up to
    /// [`REDIS_MAX_KEY`] bytes. Such a descriptor is answered over the
    /// limit: an error would let Envoy's default (failing open) admit
    /// every request whose value is long enough.
    pub(super) fn refuses(&self, key: &str) -> bool {
        matches!(self, Store::Redis { .. }) && key.len() > REDIS_MAX_KEY
    }

    /// `n` units for `key` under `quota`, recorded unless `dry`; an
    /// admission recorded also says when `remaining` next grows (from the
    /// same pass, or the same Redis round trip; zero for a dry run).
    pub(super) async fn check(
        &self,
        key: &str,
        quota: &Quota,
        n: u32,
        dry: bool,
    ) -> Result<Result<(Admitted, Duration), Denied>, Status> {
        let untimed = |decision: Result<Admitted, Denied>| decision.map(|a| (a, Duration::ZERO));
        match self {
            Store::Local(limiter) if dry => Ok(untimed(limiter.peek_n(key, n))),
            Store::Local(limiter) => Ok(limiter.check_n_with_growth(key, n)),
            Store::Redis { failing, .. } => {
                let limiter = self.redis_for(quota).await?;
                let answer = if dry {
                    limiter.peek_n(key, n).await.map(untimed)
                } else {
                    limiter.check_n_with_growth(key, n).await
                };
                // Relaxed: a flag for what stderr says, ordering nothing.
                use std::sync::atomic::Ordering::Relaxed;
                match &answer {
                    Err(e) if !failing.swap(true, Relaxed) => eprintln!(
                        "slidelog serve: Redis stopped answering ({e}): calls are UNAVAILABLE until it answers again"
                    ),
                    Ok(_) if failing.load(Relaxed) && failing.swap(false, Relaxed) => {
                        eprintln!("slidelog serve: Redis answers calls again");
                    }
                    _ => {}
                }
                answer.map_err(unavailable)
            }
        }
    }

    /// Makes the store's connection if it has none yet: `Ok` once it is
    /// made (at once in process).
    pub(super) async fn connect(&self) -> Result<(), Status> {
        match self {
            Store::Local(_) => Ok(()),
            Store::Redis { .. } => self.base().await.map(drop),
        }
    }

    /// Whether the store answers: in process always; Redis if reached and
    /// answering a ping ([`RedisLimiter::ping`]: on a cluster, every
    /// primary).
    pub(super) async fn ping(&self) -> Result<(), Status> {
        match self {
            Store::Local(_) => Ok(()),
            Store::Redis { .. } => self.base().await?.ping().await.map_err(unavailable),
        }
    }

    pub(super) async fn redis_for(&self, quota: &Quota) -> Result<RedisLimiter, Status> {
        let base = self.base().await?;
        let Store::Redis { limiters, .. } = self else {
            unreachable!("called for the Redis store")
        };
        let mut limiters = limiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(limiter) = limiters.get(quota.policies()) {
            return Ok(limiter.clone());
        }
        if limiters.len() >= POLICY_SETS {
            limiters.clear();
        }
        let limiter = base.with_quota(quota);
        limiters.insert(quota.policies().to_vec(), limiter.clone());
        Ok(limiter)
    }

    /// The Redis store's one connection, made on first use.
    pub(super) async fn base(&self) -> Result<&RedisLimiter, Status> {
        let Store::Redis {
            target,
            tls,
            prefix,
            timeout,
            base,
            ..
        } = self
        else {
            unreachable!("called for the Redis store")
        };
        base.get_or_try_init(|| async {
            // Each call is made by a limiter of its key's quota
            // (`redis_for`); this one's policies judge nothing.
            let policies = local::unlimited().policies()[0];
            let builder = match target {
                RedisTarget::Node(url) => {
                    RedisLimiter::builder(url.as_str(), policies.limit, policies.window)
                }
                RedisTarget::Cluster(nodes) => RedisLimiter::cluster_builder(
                    nodes.iter().map(String::as_str),
                    policies.limit,
                    policies.window,
                ),
            };
            tls.apply(builder)
                .layout(crate::redis::Layout::Ring)
                .prefix(prefix.as_str())
                .timeout(*timeout)
                .max_key_len(REDIS_MAX_KEY)
                .name("rls")
                .connect()
                .await
                .map_err(unavailable)
        })
        .await
    }
}

/// A Redis failure as the call's `UNAVAILABLE`, its message naming Redis
/// once.
pub(super) fn unavailable(e: crate::redis::RedisLimitError) -> Status {
    let message = e.to_string();
    if message.starts_with("redis") {
        Status::unavailable(message)
    } else {
        Status::unavailable(format!("redis: {message}"))
    }
}
