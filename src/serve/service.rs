//! The service: its configuration now and its store, made from settings.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use crate::Quota;

use arc_swap::ArcSwap;

use super::*;

/// Envoy's rate-limit service (`envoy.service.ratelimit.v3.RateLimitService`)
/// with exact sliding windows: the configuration now, and the limiter of
/// every key, in process or in Redis. It implements tonic's
/// [`RateLimitService`]; [`Service::into_server`] makes the server to
/// mount with `tonic::transport::Server::builder().add_service(..)`
/// (examples/serve_embedded.rs).
///
/// ```
/// use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
///     RateLimitDescriptor, rate_limit_descriptor::Entry,
/// };
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
/// use slidelog::serve::{Config, Service};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = Config::from_yaml(
///     "domain: edge
/// descriptors:
///   - key: client
///     rate_limit: {unit: minute, requests_per_unit: 2}
/// ",
/// )?;
/// let service = Service::builder(config).build()?;
/// let request = RateLimitRequest {
///     domain: "edge".into(),
///     descriptors: vec![RateLimitDescriptor {
///         entries: vec![Entry { key: "client".into(), value: "alice".into() }],
///         ..Default::default()
///     }],
///     ..Default::default()
/// };
/// let mut codes = Vec::new();
/// for _ in 0..3 {
///     let answer = service.should_rate_limit(tonic::Request::new(request.clone())).await?;
///     codes.push(answer.into_inner().overall_code);
/// }
/// assert_eq!(codes, [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]);
/// # Ok(())
/// # }
/// ```
pub struct Service {
    pub(super) config: Arc<ArcSwap<Config>>,
    pub(super) store: Box<dyn Store>,
    pub(super) modes: Modes,
    /// The `RateLimit-*` headers' names, if answers carry them.
    pub(super) headers: Option<HeaderNames>,
    /// See [`Settings::near_limit_ratio`].
    pub(super) near_limit_ratio: f64,
    /// See [`Settings::dynamic_metadata`].
    pub(super) dynamic_metadata: bool,
    /// Whether metrics are served (their labels are built only then).
    pub(super) metrics: bool,
    /// Held while `--state-file` is written ([`Service::save`]).
    pub(super) saving: std::sync::Mutex<()>,
    /// What a new client gets while the in-process store is full.
    pub(super) full: local::Full,
}

/// The quota of a limiter key under `config`: the override it was made
/// with, or its descriptor's configured limit now.
pub(super) fn quota_of(config: &Config, key: &str) -> Option<Quota> {
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

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("domains", &self.config.load().domains.len())
            .field("store", &self.store.kind())
            .field("modes", &self.modes)
            .finish_non_exhaustive()
    }
}

/// Makes a [`Service`] from a configuration and [`Settings`]: in process
/// by default, in Redis with [`ServiceBuilder::redis`].
///
/// ```
/// use slidelog::serve::{Config, Modes, RedisTarget, Service, Settings};
///
/// let config = Config::from_yaml("domain: edge\ndescriptors: []\n")?;
/// // Redis is reached on the first call, not here.
/// let service = Service::builder(config)
///     .settings(Settings { modes: Modes { shadow_mode: true, ..Modes::default() }, ..Settings::default() })
///     .redis(RedisTarget::Node("redis://127.0.0.1:6379/".into()))
///     .build()?;
/// # drop(service);
/// # Ok::<(), String>(())
/// ```
#[derive(Debug)]
pub struct ServiceBuilder {
    config: Config,
    settings: Settings,
}

impl ServiceBuilder {
    /// How the service answers and where it keeps the logs (replacing
    /// what was set before, a [`redis`](Self::redis) target included).
    ///
    /// ```
    /// use slidelog::serve::{Config, Service, Settings};
    ///
    /// let settings = Settings { max_memory: 16 << 20, ..Settings::default() };
    /// let service = Service::builder(Config::default()).settings(settings).build()?;
    /// # drop(service);
    /// # Ok::<(), String>(())
    /// ```
    pub fn settings(mut self, settings: Settings) -> ServiceBuilder {
        self.settings = settings;
        self
    }

    /// Keeps the logs in this Redis, shared by every replica, instead of in
    /// process ([`Settings::redis`]).
    ///
    /// ```
    /// use slidelog::serve::{Config, RedisTarget, Service};
    ///
    /// let service = Service::builder(Config::default())
    ///     .redis(RedisTarget::Node("redis://127.0.0.1:6379/".into()))
    ///     .build()?;
    /// # drop(service);
    /// # Ok::<(), String>(())
    /// ```
    pub fn redis(mut self, target: RedisTarget) -> ServiceBuilder {
        self.settings.redis = Some(target);
        self
    }

    /// Makes the service. The in-process store is sized now (its memory
    /// budget, [`Settings::max_memory`]); a Redis is reached on the first
    /// call, which is answered `UNAVAILABLE` until it answers.
    ///
    /// ```
    /// use slidelog::serve::{Config, Service};
    ///
    /// let service = Service::builder(Config::default()).build()?;
    /// # drop(service);
    /// # Ok::<(), String>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A memory budget too small for one key.
    pub fn build(self) -> Result<Service, String> {
        Service::new(self.config, self.settings)
    }
}

impl Service {
    /// A builder of the service for `config`, with [`Settings::default`].
    ///
    /// ```
    /// use slidelog::serve::{Config, Service};
    ///
    /// let service = Service::builder(Config::default()).build()?;
    /// # drop(service);
    /// # Ok::<(), String>(())
    /// ```
    pub fn builder(config: Config) -> ServiceBuilder {
        ServiceBuilder {
            config,
            settings: Settings::default(),
        }
    }

    /// The tonic server of this service, to mount with
    /// `tonic::transport::Server::builder().add_service(..)`. Keep an
    /// `Arc` of the service ([`RateLimitServiceServer::from_arc`]) to
    /// [`reload`](Self::reload) it while it serves.
    ///
    /// ```
    /// use slidelog::serve::{Config, Service};
    ///
    /// let server = Service::builder(Config::default()).build()?.into_server();
    /// let _router = tonic::transport::Server::builder().add_service(server);
    /// # Ok::<(), String>(())
    /// ```
    pub fn into_server(self) -> RateLimitServiceServer<Service> {
        RateLimitServiceServer::new(self)
    }

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
        let store: Box<dyn Store> = match redis {
            Some(target) => {
                let current = Arc::clone(&config);
                let quota: QuotaOf = Arc::new(move |key: &str| quota_of(&current.load(), key));
                Box::new(Redis::new(
                    target,
                    redis_tls,
                    redis_prefix,
                    redis_timeout,
                    quota,
                ))
            }
            None => {
                let current = Arc::clone(&config);
                let (clock, skew) = crate::ClockChoice::within(max_clock_skew);
                if let Some(skew) = skew {
                    eprintln!(
                        "slidelog serve: warning: {skew}; the in-process logs read the operating system's monotonic clock instead"
                    );
                }
                Box::new(InProcess(local::limiter(max_memory, clock, move |key| {
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
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(request.get_ref()).await.map(Response::new)
    }
}
