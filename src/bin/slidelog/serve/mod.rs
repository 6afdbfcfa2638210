//! `slidelog serve`: an Envoy rate-limit service (`envoy.service.ratelimit.
//! v3.RateLimitService/ShouldRateLimit`, and `grpc.health.v1.Health`) with
//! exact sliding windows, configured with envoyproxy/ratelimit's YAML files.
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

mod config;
pub(crate) mod env;
mod json;
mod key;
mod local;
mod tally;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit, rate_limit::Unit as PbUnit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::collections::HashMap;

use slidelog::redis::RedisLimiter;
use slidelog::{Admitted, Denied, DenyReason, KeyedLimiter, Quota};
use tonic::{Request, Response, Status};

use config::{Config, Limit, Rule, Unit};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};
use tally::Tally;
pub(crate) use tls::{GrpcTls, RedisTls};

/// What `slidelog serve` was asked to do.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) config: PathBuf,
    pub(crate) grpc: Listen,
    /// TLS on the gRPC port, if asked for.
    pub(crate) grpc_tls: Option<GrpcTls>,
    pub(crate) metrics: Option<SocketAddr>,
    /// Where to serve HTTP/1.1: `POST /json`, `GET /healthcheck` and `GET
    /// /rlconfig` ([`serve_http`]).
    pub(crate) http: Option<SocketAddr>,
    /// Join the descriptors of a domain that several files define.
    pub(crate) merge_domains: bool,
    /// How long a client's connection is served before it is asked to
    /// reconnect (an HTTP/2 GOAWAY; its calls in flight finish), so that
    /// clients spread over replicas started after them
    /// (envoyproxy/ratelimit's `GRPC_MAX_CONNECTION_AGE`). Its
    /// `GRPC_MAX_CONNECTION_AGE_GRACE` has no counterpart: tonic's grace
    /// closes a connection at age plus grace without the GOAWAY, failing
    /// its calls in flight, which Envoy admits by default.
    pub(crate) max_connection_age: Duration,
    /// Where the in-process logs are kept across a restart: saved when
    /// the service stops, restored when it starts ([`Service::restore`]).
    pub(crate) state_file: Option<PathBuf>,
    /// How often the state is saved besides (`None`: only at the stop),
    /// so that a crash loses at most this much of it.
    pub(crate) state_interval: Option<Duration>,
    /// Say not serving while Redis does not answer, after it was first
    /// reached too (envoyproxy/ratelimit's
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`): [`watch_redis`].
    pub(crate) redis_health_check: bool,
    pub(crate) settings: Settings,
}

/// Where gRPC is served.
#[derive(Clone, Debug)]
pub(crate) enum Listen {
    /// A TCP address (`--grpc`).
    Tcp(SocketAddr),
    /// A Unix domain socket (`--grpc-uds`), for an Envoy beside the
    /// service (its `pipe` address): made at start, replacing one no
    /// process listens on any more, and removed at shutdown.
    Unix(PathBuf),
}

/// How the service answers and where it keeps the logs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) modes: Modes,
    /// Add `RateLimit-*` headers to each answer, under these names.
    pub(crate) headers: Option<HeaderNames>,
    /// An admission counts as near its limit when more than this share of
    /// the limit is used after it (envoyproxy/ratelimit's
    /// `NEAR_LIMIT_RATIO`; the `near_limit` metric).
    pub(crate) near_limit_ratio: f64,
    /// Answer with dynamic metadata (envoyproxy/ratelimit's
    /// `RESPONSE_DYNAMIC_METADATA`): [`dynamic_metadata`].
    pub(crate) dynamic_metadata: bool,
    /// Whether metrics are served (their labels are built only then):
    /// [`run`] sets it from [`Options::metrics`].
    pub(crate) metrics: bool,
    /// Keep the logs in Redis, shared by every replica.
    pub(crate) redis: Option<RedisTarget>,
    /// The CA and client certificate for a `rediss://` Redis.
    pub(crate) redis_tls: RedisTls,
    /// What the service's Redis keys start with (envoyproxy/ratelimit's
    /// `CACHE_KEY_PREFIX`): services with different prefixes share a Redis
    /// and no log.
    pub(crate) redis_prefix: String,
    /// The longest a Redis round trip (or connecting) may take before the
    /// call is answered `UNAVAILABLE` (envoyproxy/ratelimit's
    /// `REDIS_TIMEOUT`).
    pub(crate) redis_timeout: Duration,
    /// The in-process store's memory budget in bytes (`--max-memory`).
    pub(crate) max_memory: usize,
    /// The most the TSC may step back between cores for the in-process
    /// store to read it (`--max-clock-skew`; else the monotonic clock).
    pub(crate) max_clock_skew: Duration,
    /// Answer a new client OVER_LIMIT while the in-process store is full
    /// (`--when-full deny`); else OK, recording nothing.
    pub(crate) deny_when_full: bool,
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
            redis_timeout: slidelog::redis::DEFAULT_TIMEOUT,
            max_memory: DEFAULT_MAX_MEMORY,
            max_clock_skew: Duration::from_micros(1),
            deny_when_full: false,
        }
    }
}

/// `--max-memory`'s default: about 1,500,000 keys of a limit up to 11.
pub(crate) const DEFAULT_MAX_MEMORY: usize = 512 << 20;

/// `--near-limit-ratio`'s default, as upstream's.
pub(crate) const DEFAULT_NEAR_LIMIT_RATIO: f64 = 0.8;

/// `--redis-prefix`'s default.
pub(crate) const DEFAULT_REDIS_PREFIX: &str = "slidelog-rls:";

/// Whether an admission that leaves `remaining` of `limit` is near the
/// limit at `ratio`: more used than `floor(limit * ratio)`, as
/// envoyproxy/ratelimit computes its threshold.
fn near_limit(limit: u32, remaining: u32, ratio: f64) -> bool {
    let threshold = (f64::from(limit) * ratio).floor();
    f64::from(limit.saturating_sub(remaining)) > threshold
}

/// How a request's descriptors make its answer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Modes {
    /// Look at every descriptor first, and count none if one would be
    /// over (in shadow or quota mode too), as upstream's
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`.
    pub(crate) all_or_nothing: bool,
    /// Answer every request OK overall (envoyproxy/ratelimit's global
    /// `SHADOW_MODE`): each descriptor's status still says what was
    /// decided, and what fitted is counted.
    pub(crate) shadow_mode: bool,
    /// Every limited descriptor in quota mode (its global `QUOTA_MODE`).
    pub(crate) quota_mode: bool,
}

/// The names of the three headers `--response-headers` adds to an answer's
/// `response_headers_to_add`, for Envoy to put on the client's response
/// (envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`, with its
/// `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER` and `LIMIT_RESET_HEADER`):
/// the limit of the descriptor closest to its limit ([`closest`]), what
/// remains of it, and the seconds until that grows.
#[derive(Clone, Debug)]
pub(crate) struct HeaderNames {
    pub(crate) limit: String,
    pub(crate) remaining: String,
    pub(crate) reset: String,
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

impl HeaderNames {
    /// The three headers for `status`: its limit, what remains, and its
    /// `duration_until_reset` in whole seconds, rounded up (a wait of
    /// 0.2 s is 1: a client that waits the seconds told finds the room).
    fn values(&self, status: &DescriptorStatus) -> Vec<HeaderValue> {
        let limit = status
            .current_limit
            .as_ref()
            .map_or(0, |l| l.requests_per_unit);
        let reset = status.duration_until_reset.as_ref().map_or(0, |d| {
            let whole = u64::try_from(d.seconds).unwrap_or(0);
            whole + u64::from(d.nanos > 0)
        });
        [
            (&self.limit, u64::from(limit)),
            (&self.remaining, u64::from(status.limit_remaining)),
            (&self.reset, reset),
        ]
        .into_iter()
        .map(|(key, value)| HeaderValue {
            key: key.clone(),
            value: value.to_string(),
            ..Default::default()
        })
        .collect()
    }
}

/// The descriptor whose status the `RateLimit-*` headers report, chosen as
/// envoyproxy/ratelimit chooses it, from each status and its verdict
/// `(over, in quota mode)`: the last one over its limit that is not in
/// quota mode (it is why the request is refused); else, among those with
/// a limit (a `current_limit`), the first with the fewest remaining.
/// `None` if no descriptor is limited.
fn closest(statuses: &[DescriptorStatus], verdicts: &[(bool, bool)]) -> Option<usize> {
    let mut chosen = None;
    let mut least = u32::MAX;
    for (i, (status, &(over, quota_mode))) in statuses.iter().zip(verdicts).enumerate() {
        if status.current_limit.is_some() && status.limit_remaining < least {
            (chosen, least) = (Some(i), status.limit_remaining);
        }
        if over && !quota_mode {
            (chosen, least) = (Some(i), 0);
        }
    }
    chosen
}

/// A Redis for the logs.
#[derive(Clone, Debug)]
pub(crate) enum RedisTarget {
    Node(String),
    Cluster(Vec<String>),
}

/// Where the logs live.
// One store per service: the Redis variant's size is paid once.
#[allow(clippy::large_enum_variant)]
enum Store {
    /// In process: one keyed limiter whose per-key quotas come from the
    /// configuration.
    Local(Box<KeyedLimiter<String, slidelog::ClockChoice>>),
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
        limiters: std::sync::Mutex<HashMap<Vec<slidelog::Policy>, RedisLimiter>>,
        /// Whether the last call failed: a Redis that stops answering is
        /// told once, and again when it answers.
        failing: std::sync::atomic::AtomicBool,
    },
}

/// The longest limiter key kept in Redis, in bytes: a descriptor whose key
/// is longer (its entries are the client's) is answered over the limit
/// ([`Store::refuses`]).
const REDIS_MAX_KEY: usize = 8_192;

/// Most Redis limiters kept at once. Beyond it the map is emptied and they
/// are made again as asked: each is a few allocations on the shared
/// connection, so a client sending ever new limit overrides costs memory
/// up to this bound, never connections.
const POLICY_SETS: usize = 1_024;

impl Store {
    /// Whether this store cannot keep `key`: Redis keeps keys up to
    /// [`REDIS_MAX_KEY`] bytes. Such a descriptor is answered over the
    /// limit: an error would let Envoy's default (failing open) admit
    /// every request whose value is long enough.
    fn refuses(&self, key: &str) -> bool {
        matches!(self, Store::Redis { .. }) && key.len() > REDIS_MAX_KEY
    }

    /// `n` units for `key` under `quota`, recorded unless `dry`; an
    /// admission recorded also says when `remaining` next grows (from the
    /// same pass, or the same Redis round trip; zero for a dry run).
    async fn check(
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
    async fn connect(&self) -> Result<(), Status> {
        match self {
            Store::Local(_) => Ok(()),
            Store::Redis { .. } => self.base().await.map(drop),
        }
    }

    /// Whether the store answers: in process always; Redis if reached and
    /// answering a ping ([`RedisLimiter::ping`]: on a cluster, every
    /// primary).
    async fn ping(&self) -> Result<(), Status> {
        match self {
            Store::Local(_) => Ok(()),
            Store::Redis { .. } => self.base().await?.ping().await.map_err(unavailable),
        }
    }

    async fn redis_for(&self, quota: &Quota) -> Result<RedisLimiter, Status> {
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
    async fn base(&self) -> Result<&RedisLimiter, Status> {
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
                .layout(slidelog::redis::Layout::Ring)
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

/// The response's dynamic metadata, as envoyproxy/ratelimit builds it:
/// the `domain`; each descriptor's `entries` (`key=value`), its own
/// `limit` (in protobuf's text form) and `hitsAddend` where given; the
/// request's `hitsAddend` if not 0; and `metadata`, the configured
/// `metadata` of every descriptor that passed (answered OK, and limited
/// or unmatched, not unlimited), merged (mappings merged key by key, the
/// first descriptor's value kept otherwise).
fn dynamic_metadata(
    request: &RateLimitRequest,
    matched: &[Option<Matched<'_>>],
    statuses: &[DescriptorStatus],
) -> Struct {
    use envoy_types::pb::google::protobuf::ListValue;
    let string = |s: String| Value {
        kind: Some(Kind::StringValue(s)),
    };
    let number = |n: f64| Value {
        kind: Some(Kind::NumberValue(n)),
    };
    let object = |fields: HashMap<String, Value>| Value {
        kind: Some(Kind::StructValue(Struct { fields })),
    };
    let list = |values: Vec<Value>| Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    };
    let descriptors = request.descriptors.iter().map(|d| {
        let mut fields = HashMap::new();
        let entries = d.entries.iter();
        fields.insert(
            "entries".into(),
            list(
                entries
                    .map(|e| string(format!("{}={}", e.key, e.value)))
                    .collect(),
            ),
        );
        if let Some(limit) = &d.limit {
            let unit = envoy_types::pb::envoy::r#type::v3::RateLimitUnit::try_from(limit.unit)
                .map_or("UNKNOWN", |unit| unit.as_str_name());
            fields.insert(
                "limit".into(),
                string(format!(
                    "requests_per_unit:{} unit:{unit}",
                    limit.requests_per_unit
                )),
            );
        }
        if let Some(hits) = &d.hits_addend {
            fields.insert("hitsAddend".into(), number(hits.value as f64));
        }
        object(fields)
    });
    let mut fields = HashMap::new();
    fields.insert("domain".into(), string(request.domain.clone()));
    fields.insert("descriptors".into(), list(descriptors.collect()));
    if request.hits_addend != 0 {
        fields.insert("hitsAddend".into(), number(f64::from(request.hits_addend)));
    }
    let mut passed = Struct::default();
    for (m, status) in matched.iter().zip(statuses) {
        let rule = m.as_ref().and_then(|m| m.rule);
        if status.code == Code::Ok as i32
            && let Some(rule) = rule
            && !matches!(rule.limit, Limit::Unlimited)
            && let Some(metadata) = &rule.metadata
        {
            merge(&mut passed, metadata);
        }
    }
    if !passed.fields.is_empty() {
        fields.insert(
            "metadata".into(),
            Value {
                kind: Some(Kind::StructValue(passed)),
            },
        );
    }
    Struct { fields }
}

/// `from`'s fields into `into`'s: a field both have as mappings is merged,
/// any other field `into` has is kept (upstream's `mergeMetadata`).
fn merge(into: &mut Struct, from: &Struct) {
    for (key, value) in &from.fields {
        match (into.fields.get_mut(key), &value.kind) {
            (None, _) => {
                into.fields.insert(key.clone(), value.clone());
            }
            (
                Some(Value {
                    kind: Some(Kind::StructValue(inner)),
                }),
                Some(Kind::StructValue(more)),
            ) => merge(inner, more),
            (Some(_), _) => {}
        }
    }
}

/// A Redis failure as the call's `UNAVAILABLE`, its message naming Redis
/// once.
fn unavailable(e: slidelog::redis::RedisLimitError) -> Status {
    let message = e.to_string();
    if message.starts_with("redis") {
        Status::unavailable(message)
    } else {
        Status::unavailable(format!("redis: {message}"))
    }
}

/// The quota of a limiter key under `config`: the override it was made
/// with, or its descriptor's configured limit now.
fn quota_of(config: &Config, key: &str) -> Option<Quota> {
    let key::Decoded {
        domain,
        entries,
        over,
    } = key::decode(key)?;
    if let Some((requests, unit)) = over {
        return Quota::new(requests, unit.duration()).ok();
    }
    match &config.matching(&domain, &entries)?.limit {
        Limit::Quota(quota, _) => Some(quota.clone()),
        _ => None,
    }
}

fn pb_unit(unit: Option<Unit>) -> PbUnit {
    match unit {
        Some(Unit::Second) => PbUnit::Second,
        Some(Unit::Minute) => PbUnit::Minute,
        Some(Unit::Hour) => PbUnit::Hour,
        Some(Unit::Day) => PbUnit::Day,
        Some(Unit::Week) => PbUnit::Week,
        Some(Unit::Month) => PbUnit::Month,
        Some(Unit::Year) => PbUnit::Year,
        None => PbUnit::Unknown,
    }
}

fn from_pb_unit(unit: i32) -> Option<Unit> {
    // envoy.type.v3.RateLimitUnit: 1 second .. 4 day, 5 month, 6 year, 7 week.
    Some(match unit {
        1 => Unit::Second,
        2 => Unit::Minute,
        3 => Unit::Hour,
        4 => Unit::Day,
        5 => Unit::Month,
        6 => Unit::Year,
        7 => Unit::Week,
        _ => return None,
    })
}

fn pb_duration(d: Duration) -> envoy_types::pb::google::protobuf::Duration {
    envoy_types::pb::google::protobuf::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// The service: the configuration now, and the limiter of every key.
pub(crate) struct Service {
    config: Arc<ArcSwap<Config>>,
    store: Store,
    modes: Modes,
    /// The `RateLimit-*` headers' names, if answers carry them.
    headers: Option<HeaderNames>,
    /// See [`Settings::near_limit_ratio`].
    near_limit_ratio: f64,
    /// See [`Settings::dynamic_metadata`].
    dynamic_metadata: bool,
    /// Whether metrics are served (their labels are built only then).
    metrics: bool,
    /// Held while `--state-file` is written ([`Service::save`]).
    saving: std::sync::Mutex<()>,
    /// What a new client gets while the in-process store is full.
    full: local::Full,
}

/// Whether a refill (`is_negative_hits`) has been reported.
static REFILLS: std::sync::Once = std::sync::Once::new();

/// One descriptor of a request, matched.
struct Matched<'c> {
    key: String,
    /// The configured descriptor it matched: `None` only for a request's
    /// own limit in a known domain, which applies whether or not the
    /// domain configures the descriptor (as in envoyproxy/ratelimit).
    rule: Option<&'c Rule>,
    hits: u32,
    /// A look: a descriptor's own `hits_addend` of 0 (upstream's check
    /// without an increment) or a refill (`is_negative_hits`), answered
    /// with the room left, recording
    /// nothing and returning nothing (see [`Service::matched`]).
    look: bool,
    /// A request's own limit (`RateLimitDescriptor.limit`), honoured.
    over: Option<(u32, Unit)>,
    /// The policies this descriptor is checked by (`None`: not limited):
    /// the request's own limit, else its rule's.
    quota: Option<Quota>,
    /// Its key is longer than the store keeps ([`Store::refuses`]).
    refused: bool,
}

impl Matched<'_> {
    /// The zero limit (`requests_per_unit: 0`) that decides this
    /// descriptor — its place among the limits shown and its window — if
    /// any: the request's own limit, else its rule's.
    /// A limited descriptor whose key the store refuses is blocked too
    /// (reported by its first limit, with no wait to tell).
    fn blocked(&self) -> Option<(usize, Duration)> {
        if self.refused && self.quota.is_some() {
            return Some((0, Duration::ZERO));
        }
        match (self.limit(), self.over) {
            (_, Some((0, unit))) => Some((0, unit.duration())),
            (Limit::Blocked(_, zero, window), None) => Some((*zero, *window)),
            _ => None,
        }
    }

    /// The configured limit (`Limit::None` without a rule).
    fn limit(&self) -> &Limit {
        self.rule.map_or(&Limit::None, |rule| &rule.limit)
    }

    /// Whether it is in shadow mode: its rule's, unless the request brought
    /// its own limit (which envoyproxy/ratelimit never shadows).
    fn shadow(&self) -> bool {
        self.over.is_none() && self.rule.is_some_and(|rule| rule.shadow)
    }

    /// The `descriptor` label of its metrics: its rule's path, or one
    /// label for every unconfigured descriptor a request limits itself
    /// (their keys are the client's: a label each would let clients grow
    /// the series without bound).
    fn label(&self) -> &str {
        self.rule.map_or("(unconfigured)", |rule| &rule.label)
    }
}

impl Service {
    pub(crate) fn new(config: Config, settings: Settings) -> Result<Service, String> {
        let Settings {
            modes,
            headers,
            near_limit_ratio,
            dynamic_metadata,
            metrics,
            redis,
            redis_tls,
            redis_prefix,
            redis_timeout,
            max_memory,
            max_clock_skew,
            deny_when_full,
        } = settings;
        let config = Arc::new(ArcSwap::from_pointee(config));
        let store = match redis {
            Some(target) => Store::Redis {
                target,
                tls: Box::new(redis_tls),
                prefix: redis_prefix,
                timeout: redis_timeout,
                base: tokio::sync::OnceCell::new(),
                limiters: std::sync::Mutex::new(HashMap::new()),
                failing: std::sync::atomic::AtomicBool::new(false),
            },
            None => {
                let current = Arc::clone(&config);
                let (clock, skew) = slidelog::ClockChoice::within(max_clock_skew);
                if let Some(skew) = skew {
                    eprintln!(
                        "slidelog serve: warning: {skew}; the in-process logs read the operating system's monotonic clock instead"
                    );
                }
                Store::Local(Box::new(local::limiter(max_memory, clock, move |key| {
                    quota_of(&current.load(), key)
                })?))
            }
        };
        Ok(Service {
            config,
            store,
            modes,
            headers,
            near_limit_ratio,
            dynamic_metadata,
            metrics,
            saving: std::sync::Mutex::new(()),
            full: local::Full::new(deny_when_full),
        })
    }

    /// Restores the logs saved in `path` (`--state-file`) into the
    /// in-process store, for the keys the configuration still limits
    /// (each under its limits now): a restart is no free burst. A missing
    /// file is a first start. A file that cannot be read is reported and
    /// the service starts empty: refusing to start would leave Envoy,
    /// which fails open by default, admitting everything. Returns what to
    /// report.
    pub(crate) fn restore(&mut self, path: &std::path::Path) -> String {
        let shown = path.display();
        let Store::Local(limiter) = &mut self.store else {
            return format!("--state-file {shown}: kept in Redis, nothing to restore");
        };
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return format!("no saved state at {shown} (a first start)");
            }
            Err(e) => return format!("--state-file {shown}: {e}; starting empty"),
        };
        let mut snapshot: slidelog::snapshot::KeyedSnapshot<String> =
            match serde_json::from_slice(&text) {
                Ok(snapshot) => snapshot,
                Err(e) => {
                    return format!(
                        "--state-file {shown}: not a saved state ({e}); starting empty"
                    );
                }
            };
        let config = self.config.load();
        let before = snapshot.keys.len();
        snapshot
            .keys
            .retain(|k| quota_of(&config, &k.key).is_some());
        match limiter.restore(&snapshot) {
            Ok(restored) => format!(
                "restored {} admissions of {} keys from {shown} ({} keys no longer limited, {} admissions expired, {} keys over the budget)",
                restored.admissions,
                restored.keys,
                before - snapshot.keys.len(),
                restored.expired,
                restored.refused_keys,
            ),
            Err(e) => format!("--state-file {shown}: {e}; starting empty"),
        }
    }

    /// Saves the in-process logs to `path` (`--state-file`): written
    /// beside it, then renamed over it, so a crash mid-write leaves the
    /// last state whole. Returns what to report.
    pub(crate) fn save(&self, path: &std::path::Path) -> Result<String, String> {
        let Store::Local(limiter) = &self.store else {
            return Ok(String::new());
        };
        // One save at a time: a periodic one and the last share the file
        // written beside the state.
        let _saving = self
            .saving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let shown = path.display();
        let snapshot = limiter.snapshot();
        let text =
            serde_json::to_vec(&snapshot).map_err(|e| format!("--state-file {shown}: {e}"))?;
        let partial = partial(path);
        std::fs::write(&partial, &text)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| format!("--state-file {shown}: {e}"))?;
        let admissions: usize = snapshot.keys.iter().map(|k| k.admissions.len()).sum();
        Ok(format!(
            "saved {admissions} admissions of {} keys to {shown}",
            snapshot.keys.len()
        ))
    }

    /// Applies a new configuration: every live key whose limits changed
    /// keeps its history under the new ones.
    pub(crate) fn reload(&self, config: Config) {
        self.config.store(Arc::new(config));
        // (Redis: each call sends its key's policies now; the script moves
        // a key's ring to them the first time it meets them.)
        // In process: every live key moves to its quota in the new
        // configuration, keeping its log (a key no longer limited, to the
        // smallest state, soon evicted).
        if let Store::Local(limiter) = &self.store {
            let _ = limiter.reconfigure(local::unlimited());
        }
    }

    /// `ShouldRateLimit`, decided.
    pub(crate) async fn decide(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let started = Instant::now();
        if request.domain.is_empty() {
            return Err(Status::invalid_argument("the domain is empty"));
        }
        if request.descriptors.is_empty() {
            return Err(Status::invalid_argument("no descriptors"));
        }
        let config = self.config.load();
        let mut matched: Vec<Option<Matched<'_>>> = Vec::with_capacity(request.descriptors.len());
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            matched.push(self.matched(
                &config,
                &request.domain,
                descriptor,
                request.hits_addend,
                i,
            )?);
        }
        // `replaces`: a matched limit that another matched limit of the
        // request names in its `replaces` is not checked, as in
        // envoyproxy/ratelimit (its descriptor is answered as unmatched).
        let replaced: Vec<&str> = matched
            .iter()
            .flatten()
            .filter(|m| m.over.is_none())
            .filter_map(|m| m.rule)
            .flat_map(|rule: &Rule| rule.replaces.iter().map(String::as_str))
            .collect();
        let named = |m: &Matched<'_>| {
            m.over.is_none()
                && m.limit()
                    .shown()
                    .iter()
                    .any(|s| !s.name.is_empty() && replaced.contains(&s.name.as_str()))
        };
        for slot in matched.iter_mut() {
            if slot.as_ref().is_some_and(named) {
                *slot = None;
            }
        }
        // All or nothing: refuse everything if the request would be over,
        // recording nothing (a concurrent request can still fill a window
        // between this look and the checks below: see the docs).
        let mut dry = false;
        // `--all-or-nothing`: a descriptor that would be over — in shadow
        // or quota mode too — stops every other's count, as upstream's
        // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT does.
        if self.modes.all_or_nothing {
            for m in matched.iter().flatten() {
                let over = match (m.blocked(), &m.quota) {
                    (Some(_), _) => !m.look,
                    (None, Some(quota)) => self
                        .store
                        .check(&m.key, quota, m.hits, true)
                        .await?
                        .is_err(),
                    (None, None) => false,
                };
                if over {
                    dry = true;
                    break;
                }
            }
        }
        let mut statuses = Vec::with_capacity(matched.len());
        let mut verdicts = Vec::with_capacity(matched.len());
        for m in &matched {
            let status = match m {
                None => DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
                Some(m) => self.status(&request.domain, m, dry).await?,
            };
            verdicts.push((
                status.code == Code::OverLimit as i32,
                self.quota_mode(m.as_ref()),
            ));
            statuses.push(status);
        }
        let over = config::overall_over(verdicts.iter().copied());
        if over && self.modes.shadow_mode && self.metrics {
            metrics::counter!("slidelog_rls_global_shadow_mode_total", "domain" => request.domain.clone())
                .increment(1);
            // Upstream's family (its exporter's name, no label).
            metrics::counter!("ratelimit_service_global_shadow_mode").increment(1);
        }
        let overall = if over && !self.modes.shadow_mode {
            Code::OverLimit
        } else {
            Code::Ok
        };
        if self.metrics {
            metrics::histogram!("slidelog_rls_request_seconds")
                .record(started.elapsed().as_secs_f64());
        }
        // The headers describe what was decided, shadow mode or not (as
        // upstream adds them before its global shadow mode answers OK).
        let response_headers_to_add = self
            .headers
            .as_ref()
            .and_then(|names| Some(names.values(&statuses[closest(&statuses, &verdicts)?])))
            .unwrap_or_default();
        let dynamic_metadata = self
            .dynamic_metadata
            .then(|| dynamic_metadata(request, &matched, &statuses));
        Ok(RateLimitResponse {
            overall_code: overall as i32,
            statuses,
            response_headers_to_add,
            dynamic_metadata,
            ..Default::default()
        })
    }

    /// Whether a descriptor (`None`: unmatched or replaced) counts in
    /// quota mode (see [`config::overall_over`]): every one under
    /// `--quota-mode` but an unlimited one, and a limit its rule puts in
    /// `quota_mode` — as in envoyproxy/ratelimit, where the global mode
    /// also takes in the unmatched and a request's own limits, and a
    /// request's own limit is never in a rule's quota mode.
    fn quota_mode(&self, m: Option<&Matched<'_>>) -> bool {
        let global = self.modes.quota_mode;
        match m {
            Some(m) if m.over.is_none() => match m.limit() {
                Limit::Unlimited => false,
                Limit::Quota(..) | Limit::Blocked(..) => {
                    global || m.rule.is_some_and(|rule| rule.quota_mode)
                }
                Limit::None => global,
            },
            _ => global,
        }
    }

    fn matched<'c>(
        &self,
        config: &'c Config,
        domain: &str,
        descriptor: &RateLimitDescriptor,
        request_hits: u32,
        index: usize,
    ) -> Result<Option<Matched<'c>>, Status> {
        if descriptor.entries.is_empty() {
            return Err(Status::invalid_argument(format!(
                "descriptor {index} has no entries"
            )));
        }
        let mut entries = Vec::with_capacity(descriptor.entries.len());
        for entry in &descriptor.entries {
            if entry.key.is_empty() {
                return Err(Status::invalid_argument(format!(
                    "descriptor {index} has an entry without a key"
                )));
            }
            entries.push((entry.key.clone(), entry.value.clone()));
        }
        // Hits past `u32::MAX` are past every limit: over, as any weight
        // above the limit is (an error here would fail open in Envoy, and
        // the weight may come from a response's token count).
        // A descriptor's own 0 is a look, as upstream reads it ("check
        // only"); the request's 0 is its default, 1.
        let hits = match descriptor.hits_addend.as_ref().map(|h| h.value) {
            Some(h) => u32::try_from(h).unwrap_or(u32::MAX),
            None => request_hits.max(1),
        };
        // A refill gives back hits an earlier call counted. The log cannot:
        // its ring only records admissions, each kept until it leaves its
        // window. So a refill is answered as envoyproxy/ratelimit answers
        // one — OK, with the room left — and changes nothing; the first
        // one is reported.
        let refill = descriptor.is_negative_hits;
        if refill {
            REFILLS.call_once(|| {
                eprintln!(
                    "slidelog serve: a descriptor with is_negative_hits (a refill) is answered OK \
                     and changes nothing: an exact log keeps each admission until it leaves its \
                     window (reported once)"
                );
            });
        }
        let look = refill || hits == 0;
        let hits = if look { 0 } else { hits };
        let over = match &descriptor.limit {
            None => None,
            Some(limit) => {
                let unit = from_pb_unit(limit.unit).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "descriptor {index}: a limit override without a unit"
                    ))
                })?;
                Some((limit.requests_per_unit, unit))
            }
        };
        // The levels matched by a wildcard with `share_threshold`: their
        // values share one log, so the key holds the pattern instead.
        let mut shared: Vec<(usize, &str)> = Vec::new();
        let rule = config.walk(domain, &entries, |i, rule| {
            if let (true, Some(pattern)) = (rule.shared, rule.value.as_deref()) {
                shared.push((i, pattern));
            }
        });
        // A request's own limit applies to any descriptor of a known
        // domain; otherwise only a configured descriptor is limited.
        if rule.is_none() && (over.is_none() || !config.domains.contains_key(domain)) {
            return Ok(None);
        }
        // A request's own limit keys by its own values, as upstream's.
        if rule.is_some() && over.is_none() {
            for (i, pattern) in shared {
                entries[i].1 = pattern.to_owned();
            }
        }
        let quota = match (over, rule.map_or(&Limit::None, |rule| &rule.limit)) {
            // A zero blocks, as a zero in the configuration does.
            (Some((0, _)), _) => None,
            (Some((rpu, unit)), _) => Some(Quota::new(rpu, unit.duration()).map_err(|e| {
                Status::invalid_argument(format!(
                    "descriptor {index}: a limit override of {rpu} per {unit:?}: {e}"
                ))
            })?),
            (None, Limit::Quota(quota, _)) => Some(quota.clone()),
            (None, Limit::None | Limit::Unlimited | Limit::Blocked(..)) => None,
        };
        let key = key::encode(domain, &entries, over);
        let refused = self.store.refuses(&key);
        Ok(Some(Matched {
            refused,
            key,
            rule,
            hits,
            look,
            over,
            quota,
        }))
    }

    async fn status(
        &self,
        domain: &str,
        m: &Matched<'_>,
        dry: bool,
    ) -> Result<DescriptorStatus, Status> {
        let ok = DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        };
        let shown = match (m.limit(), m.over) {
            (_, Some((rpu, unit))) => vec![config::Shown {
                requests_per_unit: rpu,
                unit: Some(unit),
                name: String::new(),
            }],
            (Limit::Quota(_, shown) | Limit::Blocked(shown, ..), None) => shown.clone(),
            // As envoyproxy/ratelimit answers an unlimited descriptor.
            (Limit::Unlimited, None) => {
                return Ok(DescriptorStatus {
                    limit_remaining: u32::MAX,
                    ..ok
                });
            }
            (Limit::None, None) => return Ok(ok),
        };
        let limit_of = |policy: usize| {
            let s = &shown[policy.min(shown.len() - 1)];
            RateLimit {
                name: s.name.clone(),
                requests_per_unit: s.requests_per_unit,
                unit: pb_unit(s.unit) as i32,
            }
        };
        let tally = self.metrics.then(|| {
            let stat_path = m
                .rule
                .filter(|_| m.over.is_none())
                .map(|r| &r.stat_path[..]);
            Tally::new(domain, m.label(), stat_path, m.hits)
        });
        if let Some(tally) = &tally {
            tally.asked();
        }
        let quota = match (m.blocked(), &m.quota) {
            // No request fits a zero limit: over for a window, whatever is
            // asked (a look, which asks for nothing, changes nothing).
            (Some((zero, window)), _) if !m.look => {
                return Ok(self.over(tally.as_ref(), m, window, limit_of(zero)));
            }
            (Some((zero, window)), _) => {
                return Ok(DescriptorStatus {
                    current_limit: Some(limit_of(zero)),
                    duration_until_reset: Some(pb_duration(window)),
                    ..ok
                });
            }
            (None, Some(quota)) => quota,
            (None, None) => return Ok(ok),
        };
        let dry = dry || m.look;
        let decision = self.store.check(&m.key, quota, m.hits, dry).await?;
        Ok(match decision {
            Ok((admitted, growth)) if !dry => {
                let limit = &shown[admitted.policy().min(shown.len() - 1)];
                if let Some(tally) = &tally {
                    tally.within(near_limit(
                        limit.requests_per_unit,
                        admitted.remaining(),
                        self.near_limit_ratio,
                    ));
                }
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: Some(limit_of(admitted.policy())),
                    limit_remaining: admitted.remaining(),
                    duration_until_reset: Some(pb_duration(growth)),
                    ..Default::default()
                }
            }
            // A dry run of an all-or-nothing request that another
            // descriptor refused, or a look (no hits): nothing was
            // recorded for this one, so a second look tells when its room
            // grows.
            Ok((admitted, _)) => {
                let room = admitted.remaining().saturating_add(m.hits);
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: Some(limit_of(admitted.policy())),
                    limit_remaining: room,
                    duration_until_reset: Some(pb_duration(
                        self.growth(&m.key, quota, room).await?,
                    )),
                    ..Default::default()
                }
            }
            Err(denied) if matches!(denied.reason(), DenyReason::KeyCapacity) => {
                let Store::Local(store) = &self.store else {
                    unreachable!("only the in-process store has a memory budget")
                };
                self.full.met(store);
                if let Some(tally) = &tally {
                    tally.full();
                }
                if self.full.deny {
                    return Ok(self.over(tally.as_ref(), m, Duration::ZERO, limit_of(0)));
                }
                // Nothing recorded: the client is as new as it was.
                let limit = limit_of(0);
                DescriptorStatus {
                    code: Code::Ok as i32,
                    limit_remaining: limit.requests_per_unit.saturating_sub(m.hits),
                    current_limit: Some(limit),
                    duration_until_reset: Some(pb_duration(Duration::ZERO)),
                    ..Default::default()
                }
            }
            Err(denied) => {
                let wait = match denied.reason() {
                    DenyReason::RateLimited => denied.retry_after(),
                    _ => Duration::ZERO,
                };
                self.over(tally.as_ref(), m, wait, limit_of(denied.policy()))
            }
        })
    }

    /// When the room `room` left for `key` under `quota` next grows, for a
    /// status that recorded nothing: the wait until `room + 1` units fit,
    /// or zero when they never can (the window holds no admission) or
    /// already do (an admission left it since the room was read).
    async fn growth(&self, key: &str, quota: &Quota, room: u32) -> Result<Duration, Status> {
        let more = self.store.check(key, quota, room.saturating_add(1), true);
        Ok(match more.await? {
            Err(denied) if matches!(denied.reason(), DenyReason::RateLimited) => {
                denied.retry_after()
            }
            _ => Duration::ZERO,
        })
    }

    fn over(
        &self,
        tally: Option<&Tally>,
        m: &Matched<'_>,
        wait: Duration,
        limit: RateLimit,
    ) -> DescriptorStatus {
        if let Some(tally) = tally {
            tally.over(m.shadow());
        }
        if m.shadow() {
            return DescriptorStatus {
                code: Code::Ok as i32,
                current_limit: Some(limit),
                limit_remaining: 0,
                duration_until_reset: Some(pb_duration(wait)),
                ..Default::default()
            };
        }
        DescriptorStatus {
            code: Code::OverLimit as i32,
            current_limit: Some(limit),
            limit_remaining: 0,
            duration_until_reset: Some(pb_duration(wait)),
            ..Default::default()
        }
    }
}

/// The gRPC face of a shared [`Service`].
struct Grpc(Arc<Service>);

#[tonic::async_trait]
impl RateLimitService for Grpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.0.decide(request.get_ref()).await.map(Response::new)
    }
}

/// Loads the configuration, then serves until SIGTERM or Ctrl-C (calls in
/// flight finish), re-reading it on change and on SIGHUP.
/// `slidelog serve --check`: loads the configuration as a start or a
/// reload would, and prints each domain with its descriptors (limits,
/// blocks, unlimited ones and those with no limit of their own).
pub(crate) fn check(path: &std::path::Path, merge_domains: bool) -> Result<(), String> {
    let config = Config::load(path, merge_domains)?;
    let domains = config.domains.len();
    println!(
        "{}: valid, {domains} domain{}",
        path.display(),
        if domains == 1 { "" } else { "s" }
    );
    print!("{}", describe_config(&config));
    Ok(())
}

/// Each domain of `config`, by name, with its descriptors in order (their
/// limits, names, `replaces` and modes), a line each: what `--check`
/// prints and `GET /rlconfig` serves.
fn describe_config(config: &Config) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut domains: Vec<_> = config.domains.iter().collect();
    domains.sort_by_key(|(name, _)| name.as_str());
    for (name, rules) in domains {
        let _ = writeln!(out, "domain {name}:");
        let mut stack: Vec<&Rule> = rules.iter().rev().collect();
        while let Some(rule) = stack.pop() {
            let what = match &rule.limit {
                Limit::None => "no limit of its own".to_string(),
                Limit::Unlimited => "unlimited".to_string(),
                Limit::Blocked(..) => "blocked (requests_per_unit: 0)".to_string(),
                Limit::Quota(quota, _) => quota
                    .policies()
                    .iter()
                    .map(|p| format!("{} per {}", p.limit, crate::parse::show_duration(p.window)))
                    .collect::<Vec<_>>()
                    .join(" and "),
            };
            let mut flags = String::new();
            for (on, flag) in [
                (rule.shadow, "shadow_mode"),
                (rule.quota_mode, "quota_mode"),
                (rule.shared, "share_threshold"),
            ] {
                if on {
                    flags.push_str(", ");
                    flags.push_str(flag);
                }
            }
            let names = rule.limit.shown().iter().filter(|s| !s.name.is_empty());
            for shown in names {
                flags.push_str(&format!(", named {}", shown.name));
            }
            for replaced in &rule.replaces {
                flags.push_str(&format!(", replaces {replaced}"));
            }
            let _ = writeln!(out, "  {}: {what}{flags}", rule.label);
            stack.extend(rule.children.iter().rev());
        }
    }
    out
}

pub(crate) fn run(options: &Options) -> Result<(), String> {
    let config = Config::load(&options.config, options.merge_domains)?;
    let domains = config.domains.len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        if let Some(addr) = options.metrics {
            serve_metrics(addr).await?;
        }
        let settings = Settings {
            metrics: options.metrics.is_some(),
            ..options.settings.clone()
        };
        let mut service = Service::new(config, settings)?;
        // The configuration at start counts as a load, as upstream's.
        metrics::counter!("ratelimit_service_config_load_success").increment(1);
        if let Store::Local(store) = &service.store {
            eprintln!(
                "slidelog serve: logs in process, within --max-memory {} (keys idle past their longest window make room); while full, new clients are answered {} (--when-full {})",
                local::size(store.max_bytes()),
                if service.full.deny { "OVER_LIMIT" } else { "OK unrecorded" },
                if service.full.deny { "deny" } else { "admit" },
            );
        }
        if let Some(path) = &options.state_file {
            eprintln!("slidelog serve: {}", service.restore(path));
            let probe = partial(path);
            let written = std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe));
            if let Err(e) = written {
                eprintln!(
                    "slidelog serve: --state-file {}: cannot be written ({e}); the logs will not be kept across a restart",
                    path.display()
                );
            }
        }
        let service = Arc::new(service);
        let kept = Arc::clone(&service);
        if let (Some(path), Some(every)) = (&options.state_file, options.state_interval) {
            tokio::spawn(save_every(Arc::clone(&service), path.clone(), every));
        }
        watch(&options.config, options.merge_domains, Arc::clone(&service))?;
        let (reporter, health_service) = tonic_health::server::health_reporter();
        let health = Arc::new(Health::new(reporter));
        // Every name told from the start: not serving until the store is
        // ready, which in process it is at once.
        health.update(|_| {}).await;
        let connecting = connect_store(Arc::clone(&service), Arc::clone(&health));
        if matches!(service.store, Store::Local(_)) {
            connecting.await;
        } else if options.redis_health_check {
            let (service, health) = (Arc::clone(&service), Arc::clone(&health));
            tokio::spawn(async move {
                connecting.await;
                watch_redis(service, health).await;
            });
        } else {
            tokio::spawn(connecting);
        }
        if let Some(addr) = options.http {
            serve_http(addr, Arc::clone(&service), Arc::clone(&health)).await?;
        }
        // TLS is ours, not tonic's: the certificate in force is read again
        // as it changes (tls.rs).
        let acceptor = options
            .grpc_tls
            .as_ref()
            .map(|tls| {
                tls.reload_as_they_change();
                tls.acceptor()
            })
            .transpose()?;
        let mut server =
            tonic::transport::Server::builder().max_connection_age(options.max_connection_age);
        let router = match options.grpc_tls.as_ref().filter(|tls| tls.client_san.is_some()) {
            None => server
                .add_service(health_service)
                .add_service(RateLimitServiceServer::new(Grpc(service))),
            Some(tls) => server
                .add_service(tonic::service::interceptor::InterceptedService::new(
                    health_service,
                    tls.interceptor(),
                ))
                .add_service(RateLimitServiceServer::with_interceptor(
                    Grpc(service),
                    tls.interceptor(),
                )),
        };
        // SIGTERM or Ctrl-C: health says so first, then calls in flight
        // finish.
        let stop = async move {
            shutdown_signal().await;
            health.update(|state| state.stopping = true).await;
        };
        let tls = match &options.grpc_tls {
            None => "",
            Some(tls) if tls.mutual() => " over mutual TLS",
            Some(_) => " over TLS",
        };
        let announce = |on: &dyn std::fmt::Display| {
            eprintln!(
                "slidelog serve: {domains} domain{} from {}, gRPC on {on}{tls}",
                if domains == 1 { "" } else { "s" },
                options.config.display(),
            );
        };
        let served = match &options.grpc {
            Listen::Tcp(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("--grpc {addr}: {e}"))?;
                announce(&listener.local_addr().map_err(|e| e.to_string())?);
                let incoming =
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                match acceptor {
                    Some(acceptor) => {
                        let incoming = tls::incoming(incoming, acceptor);
                        router.serve_with_incoming_shutdown(incoming, stop).await
                    }
                    None => router.serve_with_incoming_shutdown(incoming, stop).await,
                }
            }
            #[cfg(unix)]
            Listen::Unix(path) => {
                let listener = bind_unix(path)?;
                announce(&format!("unix:{}", path.display()));
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
                let served = match acceptor {
                    Some(acceptor) => {
                        let incoming = tls::incoming(incoming, acceptor);
                        router.serve_with_incoming_shutdown(incoming, stop).await
                    }
                    None => router.serve_with_incoming_shutdown(incoming, stop).await,
                };
                let _ = std::fs::remove_file(path);
                served
            }
            #[cfg(not(unix))]
            Listen::Unix(_) => return Err("--grpc-uds needs a Unix system".into()),
        };
        served.map_err(|e| e.to_string())?;
        if let Some(path) = &options.state_file {
            eprintln!("slidelog serve: {}", kept.save(path)?);
        }
        eprintln!("slidelog serve: stopped");
        Ok(())
    })
}

/// Saves the state to `path` every `every` (`--state-interval`), off the
/// runtime's workers; a failure is reported each time.
async fn save_every(service: Arc<Service>, path: PathBuf, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (service, path) = (Arc::clone(&service), path.clone());
        match tokio::task::spawn_blocking(move || service.save(&path)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("slidelog serve: {e}"),
            Err(e) => eprintln!("slidelog serve: saving the state: {e}"),
        }
    }
}

/// Where `--state-file`'s state is written before it is renamed over
/// `path` (and where a start tries whether it can be).
fn partial(path: &std::path::Path) -> PathBuf {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    PathBuf::from(partial)
}

/// The gRPC health service names told the service's health: the server as
/// a whole (""), the rate-limit service's own name, and `ratelimit`, the
/// name envoyproxy/ratelimit reports under (health checks written for it
/// ask for that).
const HEALTH_NAMES: [&str; 3] = [
    "",
    <RateLimitServiceServer<Grpc> as tonic::server::NamedService>::NAME,
    "ratelimit",
];

/// The service's health, as envoyproxy/ratelimit keeps it: serving once
/// its store is ready (with Redis, once it has been reached), and no more
/// from SIGTERM on; told by gRPC's health service ([`HEALTH_NAMES`]) and by
/// `GET /healthcheck`.
struct Health {
    reporter: tonic_health::server::HealthReporter,
    /// Held while a change is told, so that the last status told is the
    /// state's last.
    state: tokio::sync::Mutex<HealthState>,
}

#[derive(Clone, Copy, Debug, Default)]
struct HealthState {
    store_ready: bool,
    /// Redis stopped answering after it was reached (only watched with
    /// `--redis-health-check-active-connection`: [`watch_redis`]).
    store_lost: bool,
    stopping: bool,
}

impl HealthState {
    fn serving(self) -> bool {
        self.store_ready && !self.store_lost && !self.stopping
    }
}

impl Health {
    fn new(reporter: tonic_health::server::HealthReporter) -> Health {
        Health {
            reporter,
            state: tokio::sync::Mutex::new(HealthState::default()),
        }
    }

    async fn serving(&self) -> bool {
        self.state.lock().await.serving()
    }

    /// Changes the state, then tells every name.
    async fn update(&self, change: impl FnOnce(&mut HealthState)) {
        let mut state = self.state.lock().await;
        change(&mut state);
        let status = if state.serving() {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        for name in HEALTH_NAMES {
            self.reporter.set_service_status(name, status).await;
        }
    }
}

/// Connects the store (Redis: retrying, from 100 ms to 5 s apart, saying
/// so once on stderr), then reports the service healthy. Until then every
/// call is answered `UNAVAILABLE` and health says not serving.
async fn connect_store(service: Arc<Service>, health: Arc<Health>) {
    let mut pause = Duration::from_millis(100);
    let mut told = false;
    loop {
        match service.store.connect().await {
            Ok(()) => break,
            Err(error) if !told => {
                eprintln!(
                    "slidelog serve: {}; not serving until it answers",
                    error.message()
                );
                told = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    if told {
        eprintln!("slidelog serve: redis reached; serving");
    }
    health.update(|state| state.store_ready = true).await;
}

/// How often [`watch_redis`] pings Redis once it answered (and, when it
/// does not, once its timeout has passed).
const REDIS_HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// How many pings in a row must fail before [`watch_redis`] says not
/// serving: one ping slower than a tight `--redis-timeout` (a fork for a
/// snapshot, a busy moment) is not a Redis gone.
const REDIS_HEALTH_FAILURES: u32 = 2;

/// With `--redis-health-check-active-connection` (envoyproxy/ratelimit's
/// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`), once the store was reached:
/// pings Redis every [`REDIS_HEALTH_INTERVAL`] ([`Store::ping`]: on a
/// cluster every primary, the whole ping bounded by `--redis-timeout`),
/// says not serving once [`REDIS_HEALTH_FAILURES`] pings in a row have
/// failed and serving again at the first that answers, and says each
/// change once on stderr. Calls are answered all along, as Redis lets
/// them be: health tells a load balancer or Envoy's health checker to
/// prefer another replica, not this one to stop.
async fn watch_redis(service: Arc<Service>, health: Arc<Health>) {
    let mut failures = 0;
    loop {
        tokio::time::sleep(REDIS_HEALTH_INTERVAL).await;
        let was_lost = failures >= REDIS_HEALTH_FAILURES;
        match service.store.ping().await {
            Ok(()) => {
                failures = 0;
                if was_lost {
                    eprintln!("slidelog serve: redis answers again; serving");
                    health.update(|state| state.store_lost = false).await;
                }
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                if failures == REDIS_HEALTH_FAILURES {
                    eprintln!(
                        "slidelog serve: {}; not serving until it answers",
                        error.message()
                    );
                    health.update(|state| state.store_lost = true).await;
                }
            }
        }
    }
}

/// Listens on the Unix socket `path`. A socket file already there that no
/// process answers on (left by one that was killed) is replaced; one that
/// answers is another service's, and refused.
#[cfg(unix)]
fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    let bind = || {
        tokio::net::UnixListener::bind(path)
            .map_err(|e| format!("--grpc-uds {}: {e}", path.display()))
    };
    let error = match bind() {
        Ok(listener) => return Ok(listener),
        Err(error) => error,
    };
    let socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !socket {
        return Err(error);
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(format!(
            "--grpc-uds {}: another process is serving on it",
            path.display()
        ));
    }
    std::fs::remove_file(path).map_err(|e| format!("--grpc-uds {}: {e}", path.display()))?;
    bind()
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    eprintln!("slidelog serve: shutting down (calls in flight finish)");
}

/// Re-reads the configuration when `path` changes (a file watcher) and on
/// SIGHUP.
fn watch(path: &std::path::Path, merge_domains: bool, service: Arc<Service>) -> Result<(), String> {
    // `true`: asked by SIGHUP, whose outcome is always told.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let on_change = tx.clone();
    let root = path.to_path_buf();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Only a change to a file the configuration is read from: a log
        // written into its directory is none of its business.
        let relevant = event.is_ok_and(|e| {
            !e.kind.is_access() && e.paths.iter().any(|p| config::is_config_change(&root, p))
        });
        if relevant {
            let _ = on_change.send(false);
        }
    })
    .map_err(|e| format!("watching {}: {e}", path.display()))?;
    use notify::Watcher;
    // Watch the directory (editors replace files by renaming over them).
    let watched = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from)
    };
    let depth = if path.is_dir() {
        notify::RecursiveMode::Recursive
    } else {
        notify::RecursiveMode::NonRecursive
    };
    watcher
        .watch(&watched, depth)
        .map_err(|e| format!("watching {}: {e}", watched.display()))?;
    #[cfg(unix)]
    {
        let on_hup = tx;
        tokio::spawn(async move {
            if let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            {
                while hup.recv().await.is_some() {
                    let _ = on_hup.send(true);
                }
            }
        });
    }
    let path = path.to_path_buf();
    tokio::spawn(async move {
        let _watcher = watcher; // lives as long as the loop
        let mut last = None::<String>;
        while let Some(mut asked) = rx.recv().await {
            // Let a burst of events (write, rename) settle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while let Ok(hup) = rx.try_recv() {
                asked |= hup;
            }
            match Config::load(&path, merge_domains) {
                Ok(config) => {
                    let domains = config.domains.len();
                    // Moving every live key is a walk over the store: off
                    // the threads that answer calls.
                    let moving = Arc::clone(&service);
                    let _ = tokio::task::spawn_blocking(move || moving.reload(config)).await;
                    last = None;
                    metrics::counter!("ratelimit_service_config_load_success").increment(1);
                    eprintln!(
                        "slidelog serve: reloaded {} ({domains} domain{}); history kept",
                        path.display(),
                        if domains == 1 { "" } else { "s" }
                    );
                }
                Err(e) => {
                    metrics::counter!("ratelimit_service_config_load_error").increment(1);
                    // A file saved twice with the same fault is told once; a
                    // SIGHUP always hears back.
                    if asked || last.as_deref() != Some(e.as_str()) {
                        eprintln!(
                            "slidelog serve: reload refused, the previous configuration stays: {e}"
                        );
                    }
                    last = Some(e);
                }
            }
        }
    });
    Ok(())
}

/// Serves Prometheus metrics on `addr` (`/metrics`).
async fn serve_metrics(addr: SocketAddr) -> Result<(), String> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("--metrics: {e}"))?;
    describe();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { handle.render() }),
    );
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("slidelog serve: metrics (GET /metrics) on {bound}");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

/// `--http`: `POST /json`, `ShouldRateLimit` in proto3's JSON mapping
/// (200 when the request is not over, 429 when it is, 400 with the reason
/// for a malformed one, 503 while the store cannot answer), `GET
/// /healthcheck` (200 `OK` while serving, else 500 with no body), as envoyproxy/
/// ratelimit's HTTP port has them, and `GET /rlconfig`, the configuration
/// in force (as `--check` prints it; upstream's debug port has one).
async fn serve_http(
    addr: SocketAddr,
    service: Arc<Service>,
    health: Arc<Health>,
) -> Result<(), String> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let current = Arc::clone(&service);
    let rlconfig = move || async move { describe_config(&current.config.load()) };
    let decide = move |body: axum::body::Bytes| async move {
        let request = match json::request(&body) {
            Ok(request) => request,
            Err(reason) => return (StatusCode::BAD_REQUEST, reason + "\n").into_response(),
        };
        match service.decide(&request).await {
            Ok(response) => {
                let status = if response.overall_code == Code::OverLimit as i32 {
                    StatusCode::TOO_MANY_REQUESTS
                } else {
                    StatusCode::OK
                };
                let body = json::response(&response).to_string();
                (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
            }
            Err(error) => {
                let status = match error.code() {
                    tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
                    tonic::Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                (status, format!("{}\n", error.message())).into_response()
            }
        }
    };
    let app = axum::Router::new()
        .route("/json", axum::routing::post(decide))
        .route("/rlconfig", axum::routing::get(rlconfig))
        .route(
            "/healthcheck",
            axum::routing::get(move || async move {
                // Upstream's answers: `OK`, or 500 with no body.
                if health.serving().await {
                    (StatusCode::OK, "OK")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "")
                }
            }),
        );
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("slidelog serve: HTTP (POST /json, GET /healthcheck, GET /rlconfig) on {bound}");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_histogram};
    for (family, what) in [
        (
            "ratelimit_service_rate_limit_total_hits",
            "Hits per domain and descriptor (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_over_limit",
            "Hits over the limit (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_near_limit",
            "Hits admitted near the limit (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_within_limit",
            "Hits admitted (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_shadow_mode",
            "Hits over the limit answered OK in shadow mode (upstream's family).",
        ),
        (
            "ratelimit_service_config_load_success",
            "Configuration loads that took effect, the one at start included (upstream's family).",
        ),
        (
            "ratelimit_service_global_shadow_mode",
            "Requests over the limit answered OK under --shadow-mode (upstream's family).",
        ),
        (
            "ratelimit_service_config_load_error",
            "Configuration reloads refused (upstream's family).",
        ),
    ] {
        describe_counter!(family, Unit::Count, what);
    }
    describe_counter!(
        "slidelog_rls_hits_total",
        Unit::Count,
        "Hits (hits_addend units) per domain and descriptor."
    );
    describe_counter!(
        "slidelog_rls_over_limit_total",
        Unit::Count,
        "Descriptors answered OVER_LIMIT."
    );
    describe_counter!(
        "slidelog_rls_near_limit_total",
        Unit::Count,
        "Admissions that left more of the limit used than --near-limit-ratio."
    );
    describe_counter!(
        "slidelog_rls_shadow_mode_total",
        Unit::Count,
        "Over-limit descriptors answered OK in shadow mode."
    );
    describe_counter!(
        "slidelog_rls_store_full_total",
        Unit::Count,
        "Descriptors of new clients met while the in-process store was full (answered as --when-full says)."
    );
    describe_counter!(
        "slidelog_rls_global_shadow_mode_total",
        Unit::Count,
        "Requests over the limit answered OK under --shadow-mode."
    );
    describe_histogram!(
        "slidelog_rls_request_seconds",
        Unit::Seconds,
        "Time to decide one ShouldRateLimit call."
    );
}

#[cfg(test)]
mod tests {
    //! Any request a client can send is answered — a status per
    //! descriptor, or `INVALID_ARGUMENT` — never a panic, and no status
    //! shows more room than its limit.

    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry, RateLimitOverride,
    };
    use envoy_types::pb::google::protobuf::UInt64Value;
    use proptest::prelude::*;

    const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 2}
      - {window: 90s, requests_per_unit: 4, name: burst}
    descriptors:
      - key: path
        value: /free
        rate_limit: {unlimited: true}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /a*
    rate_limit: {unit: second, requests_per_unit: 2, replaces: [{name: burst}]}
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: files
    value: f*s
    share_threshold: true
    quota_mode: true
    descriptors:
      - key: client
        rate_limit: {unit: second, requests_per_unit: 2}
"#;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("client".to_string()),
            Just("tenant".to_string()),
            Just("path".to_string()),
            Just("/free".to_string()),
            Just("canary".to_string()),
            Just("blocked".to_string()),
            Just("/ab".to_string()),
            Just("quota".to_string()),
            Just("files".to_string()),
            Just("fs".to_string()),
            Just("f/s".to_string()),
            Just("a\u{1f}\u{0}9/Second".to_string()),
            ".{0,6}",
        ]
    }

    fn descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
        (
            proptest::collection::vec((text(), text()), 0..3),
            proptest::option::of((prop_oneof![0..8u32, any::<u32>()], -1..9i32)),
            proptest::option::of(prop_oneof![0..6u64, any::<u64>()]),
            any::<bool>(),
        )
            .prop_map(
                |(entries, limit, hits, is_negative_hits)| RateLimitDescriptor {
                    entries: entries
                        .into_iter()
                        .map(|(key, value)| Entry { key, value })
                        .collect(),
                    limit: limit.map(|(requests_per_unit, unit)| RateLimitOverride {
                        requests_per_unit,
                        unit,
                    }),
                    hits_addend: hits.map(|value| UInt64Value { value }),
                    is_negative_hits,
                },
            )
    }

    /// A descriptor the configuration limits in quota mode (often, so
    /// that requests hold several, some over and some not).
    fn quota_descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
        (
            prop_oneof![
                Just(vec![("quota", "a")]),
                Just(vec![("quota", "b")]),
                Just(vec![("files", "fs"), ("client", "c")]),
                Just(vec![("files", "f/s"), ("client", "c")]),
            ],
            proptest::option::of(0..3u64),
        )
            .prop_map(|(entries, hits)| RateLimitDescriptor {
                entries: entries
                    .into_iter()
                    .map(|(key, value)| Entry {
                        key: key.to_string(),
                        value: value.to_string(),
                    })
                    .collect(),
                hits_addend: hits.map(|value| UInt64Value { value }),
                ..Default::default()
            })
    }

    fn request() -> impl Strategy<Value = RateLimitRequest> {
        (
            prop_oneof![Just("edge".to_string()), Just(String::new()), text()],
            proptest::collection::vec(prop_oneof![descriptor(), quota_descriptor()], 0..4),
            prop_oneof![0..4u32, any::<u32>()],
        )
            .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
                domain,
                descriptors,
                hits_addend,
            })
    }

    #[test]
    fn near_limit_is_upstreams_threshold() {
        for limit in 1..=1_000u32 {
            for remaining in 0..=limit {
                // At 0.8, as the metric counted before it had a ratio.
                let before = u64::from(remaining) * 5 < u64::from(limit);
                assert_eq!(
                    near_limit(limit, remaining, 0.8),
                    before,
                    "{remaining} of {limit}"
                );
                // 0 counts every admission, 1 none.
                assert!(near_limit(limit, remaining, 0.0) == (remaining < limit));
                assert!(!near_limit(limit, remaining, 1.0));
            }
        }
        // Upstream's floor: at 0.7 of 3 the threshold is floor(2.1) = 2,
        // so 2 used is not near and 3 is.
        assert!(!near_limit(3, 1, 0.7));
        assert!(near_limit(3, 0, 0.7));
    }

    #[test]
    fn the_headers_tell_the_descriptor_upstream_tells() {
        let limited = |remaining: u32| DescriptorStatus {
            current_limit: Some(RateLimit {
                requests_per_unit: 10,
                ..Default::default()
            }),
            limit_remaining: remaining,
            ..Default::default()
        };
        let unlimited = DescriptorStatus {
            limit_remaining: u32::MAX,
            ..Default::default()
        };
        let unmatched = DescriptorStatus::default();
        let fits = (false, false);
        // The first with the fewest remaining.
        let statuses = [limited(5), limited(2), unlimited.clone(), limited(2)];
        assert_eq!(closest(&statuses, &[fits; 4]), Some(1));
        // The last over its limit outside quota mode, even after one with
        // none left (a shadowed one) and one over in quota mode.
        let statuses = [limited(0), limited(0), limited(0), limited(0), limited(3)];
        let verdicts = [fits, (true, false), (true, false), (true, true), fits];
        assert_eq!(closest(&statuses, &verdicts), Some(2));
        // An over quota counts by what remains, like any other.
        let verdicts = [(true, true), (true, true), fits, fits, fits];
        assert_eq!(closest(&statuses, &verdicts), Some(0));
        // Nothing limited, nothing told.
        assert_eq!(closest(&[unlimited, unmatched], &[fits; 2]), None);
        // The values: the limit, what remains, whole seconds rounded up.
        let status = DescriptorStatus {
            duration_until_reset: Some(pb_duration(Duration::from_millis(1_200))),
            ..limited(4)
        };
        let names = HeaderNames {
            limit: "X-Limit".into(),
            ..HeaderNames::default()
        };
        let told: Vec<(String, String)> = names
            .values(&status)
            .into_iter()
            .map(|h| (h.key, h.value))
            .collect();
        let expected = [
            ("X-Limit", "10"),
            ("RateLimit-Remaining", "4"),
            ("RateLimit-Reset", "2"),
        ];
        assert_eq!(told, expected.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    proptest! {
        #[test]
        fn any_request_is_answered(
            requests in proptest::collection::vec(request(), 1..6),
            (all_or_nothing, shadow_mode, quota_mode) in any::<(bool, bool, bool)>(),
            headers in any::<bool>(),
        ) {
            let (domain, rules) = config::parse(CONFIG).unwrap();
            let mut config = Config::default();
            config.domains.insert(domain.clone(), rules.clone());
            let mut oracle = Config::default();
            oracle.domains.insert(domain, rules);
            // Quota mode: every descriptor but an unlimited one under
            // `--quota-mode`, else a configured limit with `quota_mode`,
            // not overridden by the request.
            let in_quota_mode = |domain: &str, d: &RateLimitDescriptor| {
                let entries: Vec<(String, String)> =
                    d.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
                let rule = oracle.matching(domain, &entries);
                let own = d.limit.is_some();
                if !own && rule.is_some_and(|rule| matches!(rule.limit, Limit::Unlimited)) {
                    return false;
                }
                quota_mode
                    || !own
                        && rule.is_some_and(|rule| {
                            rule.quota_mode
                                && matches!(rule.limit, Limit::Quota(..) | Limit::Blocked(..))
                        })
            };
            let modes = Modes { all_or_nothing, shadow_mode, quota_mode };
            let settings = Settings {
                modes,
                headers: headers.then(HeaderNames::default),
                ..Settings::default()
            };
            let service = Service::new(config, settings).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            for request in &requests {
                match rt.block_on(service.decide(request)) {
                    Ok(response) => {
                        prop_assert_eq!(response.statuses.len(), request.descriptors.len());
                        // Over if any descriptor not in quota mode is,
                        // or every one in quota mode is (one at least).
                        let (mut plain_over, mut quotas) = (false, Vec::new());
                        for (s, d) in response.statuses.iter().zip(&request.descriptors) {
                            let over = s.code == Code::OverLimit as i32;
                            if in_quota_mode(&request.domain, d) {
                                quotas.push(over);
                            } else {
                                plain_over |= over;
                            }
                        }
                        let over = plain_over || (!quotas.is_empty() && quotas.iter().all(|o| *o));
                        prop_assert_eq!(
                            response.overall_code == Code::OverLimit as i32,
                            over && !shadow_mode
                        );
                        // The headers: none unless asked for or with no
                        // limited descriptor; else a limit and reset of a
                        // descriptor with the remaining told, which is 0 if
                        // a descriptor outside quota mode is over, else the
                        // fewest of any limited one.
                        let limited: Vec<&DescriptorStatus> =
                            response.statuses.iter().filter(|s| s.current_limit.is_some()).collect();
                        let added = &response.response_headers_to_add;
                        if !headers || limited.is_empty() {
                            prop_assert!(added.is_empty(), "{:?}", added);
                        } else {
                            let value = |key: &str| {
                                let found = added.iter().find(|h| h.key == key);
                                found.map(|h| h.value.parse::<u64>().unwrap())
                            };
                            let (limit, remaining, reset) = (
                                value("RateLimit-Limit"),
                                value("RateLimit-Remaining"),
                                value("RateLimit-Reset"),
                            );
                            prop_assert_eq!(added.len(), 3);
                            let fewest = limited.iter().map(|s| s.limit_remaining).min().unwrap();
                            let told = if plain_over { 0 } else { fewest };
                            prop_assert_eq!(remaining, Some(u64::from(told)));
                            let seconds = |s: &DescriptorStatus| {
                                s.duration_until_reset.as_ref().map(|d| {
                                    d.seconds as u64 + u64::from(d.nanos > 0)
                                })
                            };
                            prop_assert!(
                                limited.iter().any(|s| {
                                    u64::from(s.limit_remaining) == u64::from(told)
                                        && limit == Some(u64::from(s.current_limit.as_ref().unwrap().requests_per_unit))
                                        && reset == seconds(s)
                                }),
                                "{:?} for {:?}", added, response.statuses
                            );
                        }
                        for s in &response.statuses {
                            if let Some(limit) = &s.current_limit {
                                prop_assert!(
                                    s.limit_remaining <= limit.requests_per_unit,
                                    "{:?} for {:?}", s, request
                                );
                            }
                        }
                    }
                    Err(status) => {
                        prop_assert_eq!(status.code(), tonic::Code::InvalidArgument, "{:?}", status);
                    }
                }
            }
        }
    }
}
