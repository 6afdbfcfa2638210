//! `slidelog serve`'s flags, and the shell that hands them to the service.

use std::time::Duration;

use clap::Args;

use crate::parse::{self, duration as parse_duration};
use slidelog::serve;

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The configuration: a YAML file, or a directory of them (one domain
    /// each; hidden files skipped), in envoyproxy/ratelimit's format;
    /// re-read on change and on SIGHUP.
    #[arg(long, value_name = "PATH")]
    config: std::path::PathBuf,
    /// Where to serve gRPC, e.g. `0.0.0.0:8081` or `localhost:8081`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse::listen_addr, required_unless_present_any = ["check", "grpc_uds"])]
    grpc: Option<std::net::SocketAddr>,
    /// Serve gRPC on this Unix domain socket instead (envoyproxy/ratelimit's
    /// GRPC_UDS), for an Envoy beside the service (a `pipe` address): made
    /// at start, replacing a socket no process listens on, removed at exit.
    #[arg(long, value_name = "PATH", conflicts_with = "grpc")]
    grpc_uds: Option<std::path::PathBuf>,
    /// Serve gRPC over TLS with this certificate (PEM, its chain after it;
    /// envoyproxy/ratelimit's GRPC_SERVER_TLS_CERT), read again with its key
    /// every 10 s and on SIGHUP (a rotated pair serves without a restart).
    /// Health is served over it too; `--http` and `--metrics` stay plain.
    #[arg(long, value_name = "PATH", requires = "grpc_tls_key")]
    grpc_tls_cert: Option<std::path::PathBuf>,
    /// The gRPC certificate's private key (PEM; GRPC_SERVER_TLS_KEY).
    #[arg(long, value_name = "PATH", requires = "grpc_tls_cert")]
    grpc_tls_key: Option<std::path::PathBuf>,
    /// Mutual TLS on the gRPC port: refuse a client without a certificate
    /// signed by a CA in this PEM file (GRPC_CLIENT_TLS_CACERT).
    #[arg(long, value_name = "PATH", requires = "grpc_tls_cert")]
    grpc_client_ca: Option<std::path::PathBuf>,
    /// With `--grpc-client-ca`: a client's certificate must also name this
    /// DNS name (or IP address), else its calls are UNAUTHENTICATED
    /// (GRPC_CLIENT_TLS_SAN).
    #[arg(long, value_name = "NAME", requires = "grpc_client_ca")]
    grpc_client_san: Option<String>,
    /// Check the configuration and exit: each domain and its descriptors on
    /// stdout and 0 if valid; the file, line and reason and 2 if not (for
    /// CI, or before a reload).
    #[arg(long, conflicts_with_all = ["grpc", "grpc_uds", "metrics", "http", "all_or_nothing", "shadow_mode", "quota_mode", "response_headers", "response_dynamic_metadata", "near_limit_ratio", "max_connection_age", "redis", "redis_cluster", "redis_prefix", "redis_timeout", "redis_health_check_active_connection", "redis_ca", "redis_client_cert", "redis_tls_skip_hostname_verification", "grpc_tls_cert", "state_file", "max_memory", "when_full", "max_clock_skew"])]
    check: bool,
    /// Where to serve Prometheus metrics (`/metrics`), e.g. `0.0.0.0:9102`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse::listen_addr)]
    metrics: Option<std::net::SocketAddr>,
    /// Where to serve HTTP/1.1, e.g. `0.0.0.0:8080`: `POST /json` asks
    /// ShouldRateLimit in proto3's JSON (200 OK, 429 over, 400 malformed)
    /// and `GET /healthcheck` answers 200 while serving (else 500), as
    /// envoyproxy/ratelimit's HTTP port does (for clients without gRPC,
    /// and curl); `GET /rlconfig` prints the configuration in force.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse::listen_addr)]
    http: Option<std::net::SocketAddr>,
    /// Count none of a request's descriptors when one of them would be
    /// over, whether in shadow mode, in quota mode or neither (upstream's
    /// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, which this flag stands
    /// for); without it, each descriptor that fits is counted even when
    /// another is over, as upstream does by default.
    #[arg(long)]
    all_or_nothing: bool,
    /// Answer every request OK overall, whatever its descriptors' statuses
    /// (envoyproxy/ratelimit's SHADOW_MODE): each status still says over,
    /// and the metrics count it; for trying limits out before enforcing.
    #[arg(long)]
    shadow_mode: bool,
    /// Every limited descriptor in quota mode (envoyproxy/ratelimit's
    /// QUOTA_MODE): a request is over only when all its descriptors are.
    #[arg(long)]
    quota_mode: bool,
    /// Add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to each
    /// answer's response_headers_to_add, for Envoy to put on the client's
    /// response (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED):
    /// the descriptor closest to its limit, what remains of it, and the
    /// seconds until that grows.
    #[arg(long)]
    response_headers: bool,
    /// The limit header's name (LIMIT_LIMIT_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Limit", value_parser = parse::header_name, requires = "response_headers")]
    limit_header: String,
    /// The remaining header's name (LIMIT_REMAINING_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Remaining", value_parser = parse::header_name, requires = "response_headers")]
    remaining_header: String,
    /// The reset header's name (LIMIT_RESET_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Reset", value_parser = parse::header_name, requires = "response_headers")]
    reset_header: String,
    /// A domain defined by several files of a `--config` directory has
    /// their descriptors joined, in the files' order (envoyproxy/ratelimit's
    /// MERGE_DOMAIN_CONFIG); without it, such a domain is refused. A key
    /// and value defined twice at the top is refused either way.
    #[arg(long)]
    merge_domains: bool,
    /// An admission counts in the near_limit metric when more than this
    /// share of its limit is used after it (envoyproxy/ratelimit's
    /// NEAR_LIMIT_RATIO), from 0 to 1.
    #[arg(long, value_name = "RATIO", default_value_t = 0.8, value_parser = parse::ratio)]
    near_limit_ratio: f64,
    /// Answer with dynamic metadata, for Envoy's access logs and later
    /// filters (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA): the
    /// domain, each descriptor's entries (and its own limit and
    /// hits_addend), the request's hits_addend, and the `metadata` of the
    /// configured descriptors that passed, merged.
    #[arg(long)]
    response_dynamic_metadata: bool,
    /// How long a client's connection is served before it is asked to
    /// reconnect (an HTTP/2 GOAWAY; its calls in flight finish), so that
    /// clients spread over replicas started after them
    /// (envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse::positive_duration)]
    max_connection_age: Duration,
    /// Keep the logs in this Redis (`redis://host:port/`), shared by every
    /// replica of the service, exactly.
    #[arg(long, value_name = "URL", conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// Keep the logs in this Redis Cluster (seed nodes, comma-separated).
    #[arg(long, value_name = "URL,URL,..", value_delimiter = ',')]
    redis_cluster: Option<Vec<String>>,
    /// Trust the CA certificates in this PEM file, instead of the system's
    /// roots, for a Redis reached over TLS (`rediss://` URLs;
    /// envoyproxy/ratelimit's REDIS_TLS_CACERT).
    #[arg(long, value_name = "PATH")]
    redis_ca: Option<std::path::PathBuf>,
    /// Present this certificate (PEM) to a Redis that asks clients for one
    /// (mutual TLS, `tls-auth-clients yes`; REDIS_TLS_CLIENT_CERT).
    #[arg(long, value_name = "PATH", requires = "redis_client_key")]
    redis_client_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM; REDIS_TLS_CLIENT_KEY).
    #[arg(long, value_name = "PATH", requires = "redis_client_cert")]
    redis_client_key: Option<std::path::PathBuf>,
    /// Accept a Redis certificate whatever host names it is for, still
    /// requiring its chain to a trusted root
    /// (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION; for a certificate that does
    /// not name the address Redis is reached at, e.g. GCP Memorystore's).
    /// Use it with `--redis-ca`.
    #[arg(long)]
    redis_tls_skip_hostname_verification: bool,
    /// Keep the in-process logs across restarts in this file: saved when
    /// the service stops (SIGTERM, Ctrl-C), restored at start for the keys
    /// the configuration still limits, so that a restart is no free burst.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["redis", "redis_cluster"])]
    state_file: Option<std::path::PathBuf>,
    /// Save the state file this often too, so that a crash (a kill, the
    /// machine lost) loses at most this much of it; e.g. `30s`.
    #[arg(long, value_name = "DURATION", requires = "state_file", value_parser = parse::positive_duration)]
    state_interval: Option<Duration>,
    /// What the service's Redis keys start with (envoyproxy/ratelimit's
    /// CACHE_KEY_PREFIX): services with different prefixes share a Redis
    /// and no log. (In a Redis Cluster, a `{hash tag}` in it would put
    /// every key on one shard.)
    #[arg(long, value_name = "PREFIX", default_value = "slidelog-rls:")]
    redis_prefix: String,
    /// The longest a Redis round trip (or connecting) may take, e.g.
    /// `15ms` (envoyproxy/ratelimit's REDIS_TIMEOUT); past it the call is
    /// answered UNAVAILABLE, which Envoy admits unless its filter fails
    /// closed. Below Envoy's own timeout for the call (the rate-limit
    /// filter's `timeout`, 20 ms by default), a stalled Redis does not pile
    /// up calls that Envoy has already given up on. Default: 1s.
    #[arg(long, value_name = "DURATION", value_parser = parse::positive_duration)]
    redis_timeout: Option<Duration>,
    /// Say not serving (gRPC health and `/healthcheck`) while Redis does not
    /// answer, after it was first reached too: it is pinged every second
    /// (every primary of a cluster), and two pings in a row that fail or
    /// take longer than `--redis-timeout` say not serving until one
    /// answers (envoyproxy/ratelimit's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
    /// Without it, health turns serving once Redis is reached and stays so.
    #[arg(long)]
    redis_health_check_active_connection: bool,
    /// The in-process store's memory budget (`512MiB`, `2GiB`, `1GB`; a
    /// bare number is bytes): every live key's log, map entry and key
    /// bytes. A key of a limit up to 11 with a 30-byte key takes about 340
    /// bytes (so the default holds about 1,500,000 such clients at once);
    /// a larger limit L adds 8 (L + 1) bytes. Keys idle past their longest
    /// window make room for new ones; when live keys fill it, the service
    /// says so on stderr (at most once a minute) and answers new clients as
    /// `--when-full` says.
    #[arg(long, value_name = "SIZE", default_value = "512MiB", value_parser = parse::size)]
    max_memory: u64,
    /// What a new client gets while live keys fill `--max-memory`: `admit`
    /// answers OK without recording it (as Envoy treats a service that
    /// fails), `deny` answers OVER_LIMIT. Clients already known are limited
    /// exactly either way.
    #[arg(long, value_enum, value_name = "ACTION", default_value = "admit")]
    when_full: WhenFull,
    /// The most the TSC clock may step back between cores, measured at
    /// start, for the in-process logs to read it; past that they read the
    /// operating system's monotonic clock instead, and stderr says so (a
    /// skew lets a real window hold what that much more clock time admits).
    #[arg(long, value_name = "DURATION", default_value = "1us", value_parser = parse_duration)]
    max_clock_skew: Duration,
}

/// What `slidelog serve` answers a new client while its in-process store
/// is full (`--when-full`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WhenFull {
    /// OK, recording nothing.
    #[default]
    Admit,
    /// OVER_LIMIT.
    Deny,
}

pub(crate) fn run_serve(args: ServeArgs) -> Result<(), String> {
    // `--grpc` or `--grpc-uds` is required unless `--check`, which
    // conflicts with both.
    let grpc = match (args.grpc, args.grpc_uds) {
        (Some(addr), _) => serve::Listen::Tcp(addr),
        (None, Some(path)) => serve::Listen::Unix(path),
        (None, None) => return serve::check(&args.config, args.merge_domains),
    };
    let redis = match (args.redis, args.redis_cluster) {
        (Some(url), _) => Some(serve::RedisTarget::Node(url)),
        (None, Some(nodes)) => Some(serve::RedisTarget::Cluster(nodes)),
        (None, None) => None,
    };
    if redis.is_none() && args.redis_timeout.is_some() {
        return Err("--redis-timeout is for a Redis: give --redis or --redis-cluster too".into());
    }
    if redis.is_none() && args.redis_health_check_active_connection {
        return Err("--redis-health-check-active-connection is for a Redis: give --redis or --redis-cluster too".into());
    }
    let redis_tls = serve::RedisTls::load(
        redis.as_ref(),
        args.redis_ca.as_deref(),
        args.redis_client_cert
            .as_deref()
            .zip(args.redis_client_key.as_deref()),
        args.redis_tls_skip_hostname_verification,
    )?;
    let grpc_tls = args
        .grpc_tls_cert
        .as_deref()
        .zip(args.grpc_tls_key.as_deref())
        .map(|(cert, key)| {
            serve::GrpcTls::load(
                cert,
                key,
                args.grpc_client_ca.as_deref(),
                args.grpc_client_san.as_deref(),
            )
        })
        .transpose()?;
    serve::run(&serve::Options {
        config: args.config,
        grpc,
        grpc_tls,
        metrics: args.metrics,
        http: args.http,
        merge_domains: args.merge_domains,
        max_connection_age: args.max_connection_age,
        state_file: args.state_file,
        state_interval: args.state_interval,
        redis_health_check: args.redis_health_check_active_connection,
        settings: serve::Settings {
            modes: serve::Modes {
                all_or_nothing: args.all_or_nothing,
                shadow_mode: args.shadow_mode,
                quota_mode: args.quota_mode,
            },
            headers: args.response_headers.then_some(serve::HeaderNames {
                limit: args.limit_header,
                remaining: args.remaining_header,
                reset: args.reset_header,
            }),
            near_limit_ratio: args.near_limit_ratio,
            dynamic_metadata: args.response_dynamic_metadata,
            redis,
            redis_tls,
            redis_prefix: args.redis_prefix,
            redis_timeout: args
                .redis_timeout
                .unwrap_or(slidelog::redis::DEFAULT_TIMEOUT),
            max_memory: usize::try_from(args.max_memory).unwrap_or(usize::MAX),
            max_clock_skew: args.max_clock_skew,
            deny_when_full: args.when_full == WhenFull::Deny,
            // From `metrics` above, by `serve::run`.
            ..serve::Settings::default()
        },
    })
}
