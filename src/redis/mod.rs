//! The same exact sliding-window log across processes, on Redis (7+).
//! Feature `redis`.
//!
//! One Redis key per limited entity (so it works on Redis Cluster), server
//! `TIME` as the only clock, one round trip per check (a Lua script loaded
//! once and called with `EVALSHA`, reloaded on `NOSCRIPT`), `PEXPIRE` so idle
//! keys vanish, and denials that record nothing. Two layouts:
//!
//! * [`Layout::SortedSet`]: the classic sorted set, one member per admission
//!   (score: server time in microseconds; members are unique, so two
//!   requests in the same microsecond both count). `O(log n)` per check.
//! * [`Layout::Ring`]: the in-process ring stored in one Redis string,
//!   8 bytes per slot plus an 8-byte head, `O(1)` per admission (`O(log L)`
//!   to count `remaining`).
//!
//! Keys are `prefix + key` in the sorted-set layout and `prefix + "ring:" +
//! key` in the ring layout: the two layouts store different Redis types, so
//! a deployment that switches layouts (same prefix) starts each key afresh
//! in its own name instead of failing with `WRONGTYPE` until the old keys
//! expire (the old keys expire on their own). A sorted-set key that itself
//! begins with `ring:` or `log:` is stored as `prefix + "log:" + key`, so
//! that no key of one layout names a key of the other
//! ([`RedisLimiter::redis_key`]). Each check touches one Redis key, so every
//! script runs in one cluster slot; to keep several keys in one slot, put a
//! hash tag in them: `rl:{user42}:search`, `rl:{user42}:upload`. On Redis
//! Cluster, connect with [`RedisLimiter::cluster_builder`]: checks are
//! routed to the shard that owns the key, and the script is loaded on every
//! primary and reloaded wherever `NOSCRIPT` comes back.
//!
//! With feature `redis-tls`, a `rediss://` URL connects over TLS (rustls),
//! trusting the system's roots or [`RedisBuilder::tls_root_cert`], with a
//! client certificate if [`RedisBuilder::tls_client_cert`] gives one.
//!
//! # Examples
//!
//! ```no_run
//! # async fn demo() -> Result<(), slidelog::redis::RedisLimitError> {
//! use std::time::Duration;
//! use slidelog::redis::{FailurePolicy, Layout, RedisLimiter};
//!
//! let limiter = RedisLimiter::builder("redis://127.0.0.1/", 100, Duration::from_secs(60))
//!     .layout(Layout::Ring)
//!     .failure_policy(FailurePolicy::Closed)
//!     .local_precheck(true)
//!     .connect()
//!     .await?;
//! match limiter.check("user42").await? {
//!     Ok(admitted) => println!("{} left", admitted.remaining()),
//!     Err(denied) => println!("retry in {:?}", denied.retry_after()),
//! }
//! # Ok(()) }
//! ```
//!
//! # Where each part lives
//!
//! A check's way: a public call (`limiter.rs`) asks the script
//! (`script.rs`: the key's length, the least limit, the pre-check of
//! `precheck.rs`, then one round trip through `conn.rs` and the reading of
//! the answer); a round trip that fails is answered by the failure policy
//! (`failure.rs`).
//!
//! | file | what |
//! |---|---|
//! | `limiter.rs` | the public calls: checks, peeks, waits; [`RedisStats`] |
//! | `script.rs` | the script call (`ask`): its arguments, the round trip, the reading of its answer (`Told`, `Rooms`) |
//! | `sorted_set.lua`, `ring.lua` | the two layouts' scripts |
//! | `precheck.rs` | the local pre-check tier: denials remembered and answered again without a round trip |
//! | `conn.rs` | one node or a cluster: a script call routed to its key's node, sent again while its slot moves; every round trip bounded by the timeout |
//! | `failure.rs` | [`FailurePolicy`]: what a failed call answers; the [`on_failure`](RedisBuilder::on_failure) hook |
//! | `health.rs` | [`ping`](RedisLimiter::ping); a cluster's slots and a key on each primary |
//! | `keys.rs` | [`Layout`], a key's Redis name, [`remove`](RedisLimiter::remove) |
//! | `reconfigure.rs` | the policies in force (`Rules`), [`reconfigure`](RedisLimiter::reconfigure), [`with_quota`](RedisLimiter::with_quota), [`requota`](RedisLimiter::requota) |
//! | `quotas.rs` | per-key quotas ([`RedisBuilder::quota`]): the rules of each policy set, a bounded cache |
//! | `builder.rs` | [`RedisBuilder`]: the options, [`connect`](RedisBuilder::connect) |
//! | `tls.rs` | the TLS material of a `rediss://` connection (feature `redis-tls`) |
//! | `error.rs` | [`RedisLimitError`] |
//! | `judged.rs` | the limiter as a [`Backend`](crate::Backend): one key's decision with each policy's room |
//! | `tests.rs` | unit tests: cluster slots, a key on each primary, key names |

mod builder;
mod conn;
mod error;
mod failure;
mod health;
mod judged;
mod keys;
mod limiter;
mod precheck;
mod quotas;
mod reconfigure;
mod script;
#[cfg(test)]
mod tests;
#[cfg(feature = "redis-tls")]
mod tls;

pub use builder::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_KEY_LEN, DEFAULT_TIMEOUT, RedisBuilder};
pub use error::RedisLimitError;
pub use failure::FailurePolicy;
pub use keys::Layout;
pub use limiter::RedisStats;
pub use precheck::DEFAULT_PRECHECK_KEYS;

use core::fmt;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use ::redis::Script;

use crate::clock::QuantaClock;
use crate::sync::atomic::{AtomicU64, AtomicUsize};
use conn::Conn;
use reconfigure::Rules;

/// An async limiter whose state lives in Redis: the same specification as
/// [`KeyedLimiter`](crate::KeyedLimiter), shared by every process that uses
/// the same Redis keys.
///
/// `Admitted::at()` is the server's time in nanoseconds since the Unix epoch
/// (microsecond precision, from Redis `TIME`).
///
/// ```no_run
/// # async fn f() -> Result<(), slidelog::redis::RedisLimitError> {
/// use std::time::Duration;
/// let limiter = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
///     .connect()
///     .await?;
/// assert!(limiter.check("k").await?.is_ok());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisLimiter {
    conn: Conn,
    shared: std::sync::Arc<Shared>,
}

/// Everything but the connection, shared by clones.
struct Shared {
    script: Script,
    /// The policies now (SeqCst loads and stores, see `arc_swap`).
    rules: arc_swap::ArcSwap<Rules>,
    /// Per-key quotas, if the builder was given a quota function.
    quotas: Option<quotas::Quotas>,
    /// Told of every failed call.
    on_failure: Option<failure::FailureHook>,
    layout: Layout,
    prefix: String,
    policy: FailurePolicy,
    timeout: Duration,
    max_key_len: usize,
    /// The most round trips waiting for Redis at once
    /// ([`RedisBuilder::max_in_flight`]).
    max_in_flight: usize,
    /// Round trips waiting for Redis now (`conn.rs`, `InFlight`).
    in_flight: AtomicUsize,
    /// Per key: the denial Redis gave this process (`precheck.rs`).
    precheck: Option<papaya::HashMap<String, precheck::Remembered>>,
    /// How many times [`RedisLimiter::requota`] ran: a denial judged by a
    /// key's quota read before the last one is not remembered for it.
    requotas: AtomicU64,
    /// The most keys `precheck` holds.
    precheck_keys: usize,
    clock: QuantaClock,
    member: String,
    /// One reconfiguration at a time (so generations count up by one).
    reconfiguring: std::sync::Mutex<()>,
    /// The `limiter` label of its metrics.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    name: crate::observe::Name,
    sequence: AtomicU64,
    round_trips: AtomicU64,
    local_denials: AtomicU64,
    failures: AtomicU64,
}

impl Shared {
    fn new(
        script: Script,
        rules: Rules,
        layout: Layout,
        prefix: String,
        options: Options,
    ) -> Shared {
        Shared {
            script,
            rules: arc_swap::ArcSwap::from_pointee(rules),
            quotas: options.quota.map(quotas::Quotas::new),
            on_failure: options.on_failure,
            layout,
            prefix,
            policy: options.policy,
            timeout: options.timeout,
            max_key_len: options.max_key_len,
            max_in_flight: options.max_in_flight,
            in_flight: AtomicUsize::new(0),
            precheck: options.precheck.map(|_| papaya::HashMap::new()),
            precheck_keys: options.precheck.unwrap_or(0),
            clock: QuantaClock::new(),
            // Unique per limiter (each RandomState is keyed anew): sorted-set
            // members are this, then a count.
            member: format!("{:016x}", RandomState::new().hash_one(std::process::id())),
            reconfiguring: std::sync::Mutex::new(()),
            name: options.name,
            sequence: AtomicU64::new(0),
            requotas: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
            local_denials: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }
}

/// The builder's options a limiter keeps (and [`RedisLimiter::with_quota`]
/// copies).
struct Options {
    policy: FailurePolicy,
    timeout: Duration,
    max_key_len: usize,
    max_in_flight: usize,
    /// The pre-check's capacity in keys, if it is on.
    precheck: Option<usize>,
    name: crate::observe::Name,
    /// Per-key quotas.
    quota: Option<quotas::QuotaFn>,
    /// Told of every failed call.
    on_failure: Option<failure::FailureHook>,
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("policies", &self.shared.rules.load().policies)
            .field("layout", &self.shared.layout)
            .field("prefix", &self.shared.prefix)
            .field("policy", &self.shared.policy)
            .finish_non_exhaustive()
    }
}
