//! An Envoy rate-limit service (`envoy.service.ratelimit.
//! v3.RateLimitService/ShouldRateLimit`, and `grpc.health.v1.Health`) with
//! exact sliding windows, configured with envoyproxy/ratelimit's YAML files:
//! the `slidelog serve` command, and a library to mount the service in a
//! tonic server of your own.
//!
//! - [`Config`] loads a configuration (a file, a directory, or YAML text);
//! - [`Service::builder`] makes the service from it and [`Settings`], its
//!   logs in process or in Redis ([`ServiceBuilder::redis`]);
//!   [`Service::into_server`] is the tonic server to `add_service`
//!   (examples/serve_embedded.rs), and [`Service::reload`] applies a new
//!   configuration with every key's history kept;
//! - [`run`] is `slidelog serve` itself: the service with health, metrics,
//!   the HTTP port, reloads on change and SIGHUP, until SIGTERM.
//!
//! ```
//! use slidelog::serve::{Config, Service};
//!
//! let config = Config::from_yaml(
//!     "domain: edge
//! descriptors:
//!   - key: remote_address
//!     rate_limit: {unit: second, requests_per_unit: 10}
//! ",
//! )?;
//! let server = Service::builder(config).build()?.into_server();
//! let _router = tonic::transport::Server::builder().add_service(server);
//! # Ok::<(), String>(())
//! ```
//!
//! Each matched descriptor value is one key of an exact sliding-window log
//! (a `KeyedLimiter` whose per-key quotas come from the configuration);
//! `hits_addend` is a weighted check (a look — a descriptor's own
//! `hits_addend` of 0, or a refill, `is_negative_hits` — is answered with
//! the room left and records nothing); several limits on one
//! descriptor are one ring, all or nothing; with `--response-headers` an
//! answer carries the `RateLimit-*` headers ([`HeaderNames`]) for Envoy to
//! add to the client's response. The configuration is re-read when its files
//! change and on SIGHUP: a valid one takes effect with every key's history
//! kept (live reconfiguration), an invalid one is refused with the file,
//! line and reason, and the previous one stays in force.
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | this map; the options and settings a service is made with |
//! | `service.rs` | [`Service`]: the configuration now and the store, made from settings |
//! | `matched.rs` | request decoding: a descriptor matched to its rule, key and quota |
//! | `decide.rs` | the decision: each descriptor checked, the request's answer |
//! | `response.rs` | response building: `RateLimit-*` headers, dynamic metadata, units |
//! | `store.rs` | where the logs live: the backend every decision goes through (the in-process keyed limiter, or Redis connected on first use) |
//! | `local.rs` | the in-process store's limiter, memory budget and `--when-full` |
//! | `watch.rs` | reload: a new configuration applied, on file changes and SIGHUP |
//! | `state.rs` | `--state-file`: the in-process logs saved and restored |
//! | `health.rs` | gRPC health and `/healthcheck`: serving once the store is ready |
//! | `endpoints.rs` | `--http`: `POST /json`, `GET /healthcheck`, `GET /rlconfig` |
//! | `prometheus.rs`, `tally.rs` | `--metrics`: the exporter, the families, a descriptor's counts |
//! | `describe.rs` | `--check` and `/rlconfig`: the configuration described |
//! | `run.rs` | [`run`]: the whole service until SIGTERM or Ctrl-C |
//! | `config/` | envoyproxy/ratelimit's YAML: parsing, validation, matching |
//! | `json.rs` | proto3's JSON mapping of `ShouldRateLimit` for `POST /json` |
//! | `key.rs` | a descriptor's limiter key, written and read back |
//! | `tls.rs` | TLS for gRPC (reloaded certificates) and for `rediss://` |
//! | `env.rs` | envoyproxy/ratelimit's environment variables as flags |
//! | `parse.rs` | what users type: durations, policies, sizes, addresses |

mod config;
mod decide;
mod describe;
mod endpoints;
mod env;
mod health;
#[doc(hidden)]
pub mod json;
#[doc(hidden)]
pub mod key;
mod local;
mod matched;
#[doc(hidden)]
pub mod parse;
mod prometheus;
mod response;
mod run;
mod service;
mod state;
mod store;
mod tally;
#[cfg(test)]
mod tests;
mod tls;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

// For `parse`, which the binary compiles in itself too.
use crate::MAX_LIMIT;

pub use config::Config;
#[doc(hidden)]
pub use config::Unit;
pub use describe::check;
#[doc(hidden)]
pub use env::with_upstream_env;
pub use run::run;
pub use service::{Service, ServiceBuilder};
pub use tls::{GrpcTls, RedisTls};

pub(crate) use config::{Limit, Rule};

use describe::*;
use endpoints::*;
use health::*;
use matched::*;
use prometheus::*;
use response::*;
use service::*;
use state::*;
use store::*;
use tally::Tally;
use watch::*;

/// What [`run`] serves: the command line of `slidelog serve`, read.
///
/// ```
/// use slidelog::serve::{Listen, Options, Settings};
///
/// let options = Options {
///     config: "ratelimit.yaml".into(),
///     grpc: Listen::Tcp("127.0.0.1:8081".parse().unwrap()),
///     grpc_tls: None,
///     metrics: None,
///     http: None,
///     merge_domains: false,
///     max_connection_age: std::time::Duration::from_secs(24 * 3600),
///     state_file: None,
///     state_interval: None,
///     redis_health_check: false,
///     settings: Settings::default(),
/// };
/// assert!(options.settings.redis.is_none());
/// ```
#[derive(Debug)]
pub struct Options {
    /// The configuration: a YAML file, or a directory of them (one domain
    /// each), re-read when it changes and on SIGHUP.
    pub config: PathBuf,
    /// Where gRPC is served.
    pub grpc: Listen,
    /// TLS on the gRPC port, if asked for.
    pub grpc_tls: Option<GrpcTls>,
    /// Where Prometheus metrics (`GET /metrics`) are served, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Where to serve HTTP/1.1: `POST /json`, `GET /healthcheck` and `GET
    /// /rlconfig`.
    pub http: Option<SocketAddr>,
    /// Join the descriptors of a domain that several files define.
    pub merge_domains: bool,
    /// How long a client's connection is served before it is asked to
    /// reconnect (an HTTP/2 GOAWAY; its calls in flight finish), so that
    /// clients spread over replicas started after them
    /// (envoyproxy/ratelimit's `GRPC_MAX_CONNECTION_AGE`). Its
    /// `GRPC_MAX_CONNECTION_AGE_GRACE` has no counterpart: tonic's grace
    /// closes a connection at age plus grace without the GOAWAY, failing
    /// its calls in flight, which Envoy admits by default.
    pub max_connection_age: Duration,
    /// Where the in-process logs are kept across a restart: saved when
    /// the service stops, restored when it starts.
    pub state_file: Option<PathBuf>,
    /// How often the state is saved besides (`None`: only at the stop),
    /// so that a crash loses at most this much of it.
    pub state_interval: Option<Duration>,
    /// Say not serving while Redis does not answer, after it was first
    /// reached too (envoyproxy/ratelimit's
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`).
    pub redis_health_check: bool,
    /// How the service answers and where it keeps the logs.
    pub settings: Settings,
}

/// Where [`run`] serves gRPC.
///
/// ```
/// use slidelog::serve::Listen;
///
/// let tcp = Listen::Tcp("0.0.0.0:8081".parse().unwrap());
/// let unix = Listen::Unix("/run/ratelimit.sock".into());
/// assert!(matches!(tcp, Listen::Tcp(_)) && matches!(unix, Listen::Unix(_)));
/// ```
#[derive(Clone, Debug)]
pub enum Listen {
    /// A TCP address (`--grpc`).
    Tcp(SocketAddr),
    /// A Unix domain socket (`--grpc-uds`), for an Envoy beside the
    /// service (its `pipe` address): made at start, replacing one no
    /// process listens on any more, and removed at shutdown.
    Unix(PathBuf),
}

/// How the service answers and where it keeps the logs; [`Default`] is
/// `slidelog serve`'s defaults (in process, 512 MiB).
///
/// ```
/// use slidelog::serve::{HeaderNames, Modes, Settings};
///
/// let settings = Settings {
///     modes: Modes { shadow_mode: true, ..Modes::default() },
///     headers: Some(HeaderNames::default()),
///     max_memory: 64 << 20,
///     ..Settings::default()
/// };
/// assert!(settings.redis.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct Settings {
    /// How a request's descriptors make its answer.
    pub modes: Modes,
    /// Add `RateLimit-*` headers to each answer, under these names.
    pub headers: Option<HeaderNames>,
    /// An admission counts as near its limit when more than this share of
    /// the limit is used after it (envoyproxy/ratelimit's
    /// `NEAR_LIMIT_RATIO`; the `near_limit` metric).
    pub near_limit_ratio: f64,
    /// Answer with dynamic metadata (envoyproxy/ratelimit's
    /// `RESPONSE_DYNAMIC_METADATA`): the domain, each descriptor's
    /// entries, and the `metadata` of the configured descriptors that
    /// passed.
    pub dynamic_metadata: bool,
    /// Whether metrics are recorded, through the `metrics` facade to the
    /// recorder installed (their labels are built only then): [`run`]
    /// sets it from [`Options::metrics`].
    pub metrics: bool,
    /// Keep the logs in Redis, shared by every replica.
    pub redis: Option<RedisTarget>,
    /// The CA and client certificate for a `rediss://` Redis.
    pub redis_tls: RedisTls,
    /// What the service's Redis keys start with (envoyproxy/ratelimit's
    /// `CACHE_KEY_PREFIX`): services with different prefixes share a Redis
    /// and no log.
    pub redis_prefix: String,
    /// The longest a Redis round trip (or connecting) may take before the
    /// call is answered `UNAVAILABLE` (envoyproxy/ratelimit's
    /// `REDIS_TIMEOUT`).
    pub redis_timeout: Duration,
    /// The in-process store's memory budget in bytes (`--max-memory`).
    pub max_memory: usize,
    /// The most the TSC may step back between cores for the in-process
    /// store to read it (`--max-clock-skew`; else the monotonic clock).
    pub max_clock_skew: Duration,
    /// Answer a new client OVER_LIMIT while the in-process store is full
    /// (`--when-full deny`); else OK, recording nothing.
    pub deny_when_full: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            modes: Modes::default(),
            headers: None,
            near_limit_ratio: DEFAULT_NEAR_LIMIT_RATIO,
            dynamic_metadata: false,
            metrics: false,
            redis: None,
            redis_tls: RedisTls::default(),
            redis_prefix: DEFAULT_REDIS_PREFIX.into(),
            redis_timeout: crate::redis::DEFAULT_TIMEOUT,
            max_memory: DEFAULT_MAX_MEMORY,
            max_clock_skew: Duration::from_micros(1),
            deny_when_full: false,
        }
    }
}

/// `--max-memory`'s default: about 1,500,000 keys of a limit up to 11.
///
/// ```
/// assert_eq!(slidelog::serve::DEFAULT_MAX_MEMORY, 512 << 20);
/// ```
pub const DEFAULT_MAX_MEMORY: usize = 512 << 20;

/// `--near-limit-ratio`'s default, as upstream's.
///
/// ```
/// assert_eq!(slidelog::serve::DEFAULT_NEAR_LIMIT_RATIO, 0.8);
/// ```
pub const DEFAULT_NEAR_LIMIT_RATIO: f64 = 0.8;

/// `--redis-prefix`'s default.
///
/// ```
/// assert_eq!(slidelog::serve::DEFAULT_REDIS_PREFIX, "slidelog-rls:");
/// ```
pub const DEFAULT_REDIS_PREFIX: &str = "slidelog-rls:";

/// How a request's descriptors make its answer.
///
/// ```
/// use slidelog::serve::Modes;
///
/// let modes = Modes { all_or_nothing: true, ..Modes::default() };
/// assert!(!modes.shadow_mode && !modes.quota_mode);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Modes {
    /// Look at every descriptor first, and count none if one would be
    /// over (in shadow or quota mode too), as upstream's
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`.
    pub all_or_nothing: bool,
    /// Answer every request OK overall (envoyproxy/ratelimit's global
    /// `SHADOW_MODE`): each descriptor's status still says what was
    /// decided, and what fitted is counted.
    pub shadow_mode: bool,
    /// Every limited descriptor in quota mode (its global `QUOTA_MODE`).
    pub quota_mode: bool,
}

/// The names of the three headers `--response-headers` adds to an answer's
/// `response_headers_to_add`, for Envoy to put on the client's response
/// (envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`, with its
/// `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER` and `LIMIT_RESET_HEADER`):
/// the limit of the descriptor closest to its limit, what remains of it,
/// and the seconds until that grows.
///
/// ```
/// use slidelog::serve::HeaderNames;
///
/// let names = HeaderNames { limit: "X-RateLimit-Limit".into(), ..HeaderNames::default() };
/// assert_eq!(names.remaining, "RateLimit-Remaining");
/// ```
#[derive(Clone, Debug)]
pub struct HeaderNames {
    /// The limit's header (`LIMIT_LIMIT_HEADER`).
    pub limit: String,
    /// The remaining room's header (`LIMIT_REMAINING_HEADER`).
    pub remaining: String,
    /// The header of the seconds until the room grows (`LIMIT_RESET_HEADER`).
    pub reset: String,
}

impl Default for HeaderNames {
    /// envoyproxy/ratelimit's defaults.
    fn default() -> Self {
        HeaderNames {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

/// A Redis for the logs ([`Settings::redis`]), shared by every replica.
///
/// ```
/// use slidelog::serve::RedisTarget;
///
/// let one = RedisTarget::Node("redis://127.0.0.1:6379/".into());
/// let cluster = RedisTarget::Cluster(vec!["redis://10.0.0.1:7000/".into()]);
/// assert!(matches!(one, RedisTarget::Node(_)) && matches!(cluster, RedisTarget::Cluster(_)));
/// ```
#[derive(Clone, Debug)]
pub enum RedisTarget {
    /// One Redis (`redis://` or `rediss://` URL).
    Node(String),
    /// A Redis Cluster: its seed nodes' URLs.
    Cluster(Vec<String>),
}
