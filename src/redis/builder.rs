//! [`RedisBuilder`]: the options, and [`connect`](RedisBuilder::connect).

use std::time::Duration;

#[cfg(not(feature = "redis-tls"))]
use ::redis::Client;
use ::redis::Script;
use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::ClusterClient;

use super::conn::{CLUSTER_RETRIES, Conn};
use super::failure::FailureHook;
use super::quotas::QuotaFn;
use super::reconfigure::Rules;
use super::script::{RING, SORTED_SET};
#[cfg(feature = "redis-tls")]
use super::tls::Tls;
use super::{
    DEFAULT_PRECHECK_KEYS, FailurePolicy, Layout, Options, RedisLimitError, RedisLimiter, Shared,
};
use crate::policy::Policy;

/// Options for a [`RedisLimiter`]; see [`RedisLimiter::builder`].
///
/// ```
/// use std::time::Duration;
/// use slidelog::redis::{Layout, RedisLimiter};
/// let _builder = RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1)).layout(Layout::Ring);
/// ```
#[derive(Debug, Clone)]
pub struct RedisBuilder {
    /// One node's URL, or (a cluster) the seed nodes' URLs.
    target: Target,
    /// The policies (the first from `builder`).
    policies: Vec<Policy>,
    layout: Layout,
    prefix: String,
    policy: FailurePolicy,
    timeout: Duration,
    /// The pre-check's capacity in keys, if it is on.
    precheck: Option<usize>,
    max_key_len: usize,
    max_in_flight: usize,
    name: crate::observe::Name,
    /// Per-key quotas.
    quota: Option<QuotaFn>,
    /// Told of every failed call.
    on_failure: Option<FailureHook>,
    #[cfg(feature = "redis-tls")]
    tls: Tls,
}

/// Where a [`RedisBuilder`] connects.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Node(String),
    Cluster(Vec<String>),
}

/// The longest key a [`RedisLimiter`] accepts by default, in bytes.
pub const DEFAULT_MAX_KEY_LEN: usize = 512;

/// The most round trips a [`RedisLimiter`] (with its clones) keeps waiting
/// for Redis at once unless [`RedisBuilder::max_in_flight`] says otherwise.
///
/// ```
/// assert_eq!(slidelog::redis::DEFAULT_MAX_IN_FLIGHT, 1_024);
/// ```
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1_024;

/// The longest a check (or the connection) may take unless
/// [`RedisBuilder::timeout`] says otherwise.
///
/// ```
/// assert_eq!(slidelog::redis::DEFAULT_TIMEOUT, std::time::Duration::from_secs(1));
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

impl RedisBuilder {
    /// The longest key accepted, in bytes (default [`DEFAULT_MAX_KEY_LEN`]);
    /// a longer one is refused with [`RedisLimitError::KeyTooLong`] before
    /// any round trip, whatever the failure policy.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.max_key_len(128);
    /// ```
    pub fn max_key_len(mut self, max: usize) -> Self {
        self.max_key_len = max;
        self
    }

    /// Every key is also limited to `limit` per `window`: several policies,
    /// checked all or nothing in the one script against one log per key
    /// (the ring layout keeps a ring of the largest limit), as for
    /// [`Limiter::builder`](crate::Limiter::builder).
    ///
    /// ```
    /// use std::time::Duration;
    /// let _b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60));
    /// ```
    pub fn and(mut self, limit: u32, window: Duration) -> Self {
        self.policies.push(Policy::new(limit, window));
        self
    }

    /// Gives each key the quota `quota` answers for it (`None`: the
    /// limiter's policies), as [`KeyedBuilder::quota`](crate::KeyedBuilder::quota)
    /// does in process: every call sends its key's policies, and Redis
    /// judges them over what the key holds (see
    /// [`reconfigure`](RedisLimiter::reconfigure)). The function is asked
    /// on every call; each policy set it answers is made into the script's
    /// arguments once (at most 1 024 sets are kept, then made again as
    /// asked). After its answers change (a reloaded configuration), call
    /// [`requota`](RedisLimiter::requota).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Quota;
    /// use slidelog::redis::RedisLimiter;
    /// let _b = RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
    ///     .quota(|key: &str| {
    ///         key.starts_with("vip:").then(|| Quota::new(100, Duration::from_secs(1)).unwrap())
    ///     });
    /// ```
    pub fn quota<F>(mut self, quota: F) -> Self
    where
        F: Fn(&str) -> Option<crate::Quota> + Send + Sync + 'static,
    {
        self.quota = Some(QuotaFn(std::sync::Arc::new(quota)));
        self
    }

    /// Calls `hook` with the error of every call that fails (a refused
    /// connection, a timeout, a script error), whatever the
    /// [failure policy](Self::failure_policy) then answers: to log why the
    /// limiter answered without Redis. It runs on the failing call's task,
    /// before the call answers; it should be quick.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::redis::{FailurePolicy, RedisLimiter};
    /// let _b = RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
    ///     .failure_policy(FailurePolicy::Open)
    ///     .on_failure(|e| eprintln!("admitting without Redis: {e}"));
    /// ```
    pub fn on_failure<F>(mut self, hook: F) -> Self
    where
        F: Fn(&RedisLimitError) + Send + Sync + 'static,
    {
        self.on_failure = Some(FailureHook(std::sync::Arc::new(hook)));
        self
    }

    /// The storage layout (default: sorted set).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.layout(slidelog::redis::Layout::Ring);
    /// ```
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The `limiter` label of this limiter's metrics (feature `metrics`);
    /// `"default"` otherwise.
    ///
    /// ```
    /// # let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 1, std::time::Duration::from_secs(1));
    /// let _ = b.name("api");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = crate::observe::Name::new(name);
        self
    }

    /// The prefix of every Redis key (default `slidelog:`).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.prefix("rl:{tenant7}:"); // a hash tag keeps a tenant's keys in one slot
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// What to answer when Redis fails (default: return the error).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.failure_policy(slidelog::redis::FailurePolicy::Open);
    /// ```
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The longest a check (or the connection) may take
    /// ([`DEFAULT_TIMEOUT`], 1 s, unless set): past it the check fails
    /// with [`RedisLimitError::Timeout`] and the failure policy decides.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.timeout(std::time::Duration::from_millis(50));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most round trips this limiter and its clones keep waiting for
    /// Redis at once ([`DEFAULT_MAX_IN_FLIGHT`] unless set; at least 1).
    /// A call beyond them fails at once with
    /// [`RedisLimitError::Overloaded`], without a round trip, and the
    /// failure policy answers it: a Redis that slows down or stops
    /// answering makes callers fail fast instead of piling up behind the
    /// timeout (each waiting call holds its task and its share of the
    /// connection's queue until its timeout).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.max_in_flight(256);
    /// ```
    pub fn max_in_flight(mut self, calls: usize) -> Self {
        self.max_in_flight = calls.max(1);
        self
    }

    /// Deny locally, without a round trip, a request that is certain to be
    /// denied: one for at least as many units as a denial Redis gave this
    /// process, before that denial's retry time. It never denies what Redis
    /// would admit under this limiter's policies (or a key's own
    /// [`quota`](Self::quota), [`requota`](RedisLimiter::requota) called
    /// when its answers change) (entries only leave Redis
    /// at their deadline), whatever other policies check the key elsewhere
    /// (another process's [`reconfigure`](RedisLimiter::reconfigure), a
    /// [`with_quota`](RedisLimiter::with_quota) sibling): a key keeps what
    /// every policy set that calls it counts. Only a
    /// [`remove`](RedisLimiter::remove) or `reset` elsewhere frees a key
    /// early; a denial remembered here before it stands until its retry
    /// time. It remembers at most [`DEFAULT_PRECHECK_KEYS`] keys' denials
    /// (see [`local_precheck_capacity`](Self::local_precheck_capacity)).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.local_precheck(true);
    /// ```
    pub fn local_precheck(mut self, on: bool) -> Self {
        self.precheck = on.then_some(self.precheck.unwrap_or(DEFAULT_PRECHECK_KEYS));
        self
    }

    /// Turns the [local pre-check](Self::local_precheck) on, remembering at
    /// most `keys` keys' denials: when it is full, the expired ones are
    /// dropped, and a denial that still finds no room is not remembered
    /// (its key's next check makes the round trip). Keys are the callers',
    /// so without a bound a client naming new keys would grow the map
    /// without end.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.local_precheck_capacity(10_000);
    /// ```
    pub fn local_precheck_capacity(mut self, keys: usize) -> Self {
        self.precheck = Some(keys);
        self
    }

    /// Trusts the certificate authorities in `pem` (PEM, one or more
    /// certificates) for a `rediss://` connection, instead of the system's
    /// roots: a Redis whose certificate a private CA signed. Feature
    /// `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://redis.internal:6380/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/ca.pem")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_cert = Some(pem.into());
        self
    }

    /// Presents this certificate (PEM, its chain after it) and private key
    /// (PEM: PKCS #8, PKCS #1 or SEC1) to a Redis that asks for one (mutual
    /// TLS, `tls-auth-clients yes`). Feature `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://redis.internal:6380/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/ca.pem")?)
    ///     .tls_client_cert(std::fs::read("/etc/rl/client.pem")?, std::fs::read("/etc/rl/client.key")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_client_cert(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls.client = Some((cert.into(), key.into()));
        self
    }

    /// Accepts a `rediss://` server's certificate whatever host names it
    /// is for, still requiring a chain to a trusted root: for a Redis whose
    /// certificate does not name the address it is reached at (GCP
    /// Memorystore's, say). Anyone with a certificate from the same roots
    /// could then pose as the server: trust a private CA
    /// ([`tls_root_cert`](Self::tls_root_cert)) with it. Feature
    /// `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://10.0.0.3:6378/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/server-ca.pem")?)
    ///     .tls_accept_invalid_hostnames(true)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_accept_invalid_hostnames(mut self, accept: bool) -> Self {
        self.tls.any_hostname = accept;
        self
    }

    /// Connects (one multiplexed connection, reconnecting as needed).
    ///
    /// # Errors
    ///
    /// An invalid limit, window or URL; a refused connection
    /// ([`RedisLimitError::Redis`], the `redis` error as the source); or no
    /// connection within the timeout ([`RedisLimitError::Timeout`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use slidelog::redis::{RedisLimitError, RedisLimiter};
    /// let refused = RedisLimiter::builder("redis://127.0.0.1:1/", 10, std::time::Duration::from_secs(1))
    ///     .timeout(std::time::Duration::from_millis(200))
    ///     .connect()
    ///     .await;
    /// assert!(matches!(refused, Err(RedisLimitError::Redis(e)) if e.is_connection_refusal()));
    /// # });
    /// ```
    pub async fn connect(self) -> Result<RedisLimiter, RedisLimitError> {
        let rules = Rules::new(self.policies, 0)?;
        crate::observe::describe();
        let conn = match &self.target {
            Target::Node(url) => {
                #[cfg(feature = "redis-tls")]
                let client = self.tls.client(url)?;
                #[cfg(not(feature = "redis-tls"))]
                let client = Client::open(url.as_str())?;
                // No retry of the first connection: a refused one is
                // reported as refused at once, not as a timeout.
                let manager_config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(backstop(self.timeout)))
                    .set_response_timeout(Some(backstop(self.timeout)))
                    .set_number_of_retries(0)
                    .set_max_delay(self.timeout);
                Conn::Node(
                    tokio::time::timeout(
                        self.timeout,
                        ConnectionManager::new_with_config(client, manager_config),
                    )
                    .await
                    .map_err(|_| RedisLimitError::Timeout(self.timeout))??,
                )
            }
            Target::Cluster(nodes) => {
                let client = ClusterClient::builder(nodes.iter().map(String::as_str));
                #[cfg(feature = "redis-tls")]
                let client = self.tls.cluster(client, nodes)?;
                let client = client
                    .connection_timeout(backstop(self.timeout))
                    .response_timeout(backstop(self.timeout))
                    // Redirections during a reshard (`MOVED`, `ASK`,
                    // `TRYAGAIN`) followed several times, each wait short:
                    // the call's own timeout bounds them all.
                    .retries(CLUSTER_RETRIES)
                    .min_retry_wait(1)
                    .max_retry_wait(50)
                    .build()?;
                Conn::Cluster(
                    tokio::time::timeout(self.timeout, client.get_async_connection())
                        .await
                        .map_err(|_| RedisLimitError::Timeout(self.timeout))??,
                )
            }
        };
        let script = Script::new(match self.layout {
            Layout::SortedSet => SORTED_SET,
            Layout::Ring => RING,
        });
        let prefix = self.prefix;
        Ok(RedisLimiter {
            conn,
            shared: std::sync::Arc::new(Shared::new(
                script,
                rules,
                self.layout,
                prefix,
                Options {
                    policy: self.policy,
                    timeout: self.timeout,
                    max_key_len: self.max_key_len,
                    max_in_flight: self.max_in_flight,
                    precheck: self.precheck,
                    name: self.name,
                    quota: self.quota,
                    on_failure: self.on_failure,
                },
            )),
        })
    }
}

/// The redis client's own connection and response timeouts for a limiter
/// whose calls take at most `timeout`: twice it. Each call (and the
/// connection) is bounded by `timeout` through `tokio::time::timeout`,
/// whose expiry is [`RedisLimitError::Timeout`] naming it. The client's
/// timers of the same length would expire first and answer a bare I/O
/// "timed out" instead (`tests/redis.rs`,
/// `a_stalled_server_times_out_as_configured`); twice as long, they only
/// reap what no call waits for any more.
fn backstop(timeout: Duration) -> Duration {
    timeout.saturating_mul(2)
}

impl RedisLimiter {
    /// Options for a limiter of `limit` admissions per `window` per key on
    /// the Redis at `url` (`redis://host:port/db`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let _builder = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1));
    /// ```
    pub fn builder(url: impl Into<String>, limit: u32, window: Duration) -> RedisBuilder {
        RedisBuilder::new(Target::Node(url.into()), limit, window)
    }

    /// Options for a limiter on a **Redis Cluster**, given seed nodes
    /// (`redis://host:port` URLs; the rest of the cluster is discovered).
    /// Each check is routed to the shard that owns its key (one key per
    /// check, so every script runs in one slot), the script is loaded on
    /// every primary and reloaded on whichever node answers `NOSCRIPT`
    /// (after a failover or a `SCRIPT FLUSH`). During a reshard a check
    /// follows its slot's redirections (`MOVED`, `ASK`, `TRYAGAIN`) within
    /// its timeout. The same options as [`builder`](Self::builder).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidelog::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    /// let limiter = RedisLimiter::cluster_builder(
    ///     ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"],
    ///     100,
    ///     Duration::from_secs(60),
    /// )
    /// .connect()
    /// .await?;
    /// assert!(limiter.check("user42").await?.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn cluster_builder(
        nodes: impl IntoIterator<Item = impl Into<String>>,
        limit: u32,
        window: Duration,
    ) -> RedisBuilder {
        RedisBuilder::new(
            Target::Cluster(nodes.into_iter().map(Into::into).collect()),
            limit,
            window,
        )
    }
}

impl RedisBuilder {
    fn new(target: Target, limit: u32, window: Duration) -> RedisBuilder {
        RedisBuilder {
            target,
            policies: vec![Policy::new(limit, window)],
            layout: Layout::default(),
            prefix: "slidelog:".into(),
            policy: FailurePolicy::default(),
            timeout: DEFAULT_TIMEOUT,
            precheck: None,
            max_key_len: DEFAULT_MAX_KEY_LEN,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            name: crate::observe::Name::default(),
            quota: None,
            on_failure: None,
            #[cfg(feature = "redis-tls")]
            tls: Tls::default(),
        }
    }
}
