//! `slidelog`: a demo that proves itself.
//!
//! `slidelog` (or `slidelog demo`) runs several threads against one limiter
//! and then against many keys, on embedded defaults, and reports checks/s,
//! admissions, denials and the largest number of admissions it saw in any
//! window — which must never exceed the limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use slidelog::algorithm::Algorithm;
use slidelog::{KeyedLimiter, Limiter, RateLimit, SlidingCounter};

mod bench;
mod cpu;
mod input;
mod mutex_log;
mod parse;
mod plot;
mod progress;
#[cfg(feature = "redis")]
mod redis_demo;
mod replay;
#[cfg(feature = "serve")]
mod serve;

use parse::{duration as parse_duration, positive_duration, window as parse_window};

#[derive(Parser, Debug)]
#[command(
    name = "slidelog",
    version,
    propagate_version = true,
    about = "Exact lock-free sliding-window-log rate limiting: demo and tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Hammer one limiter, then many keys, from several threads, and check
    /// that no window ever held more than the limit (the default command).
    Demo(DemoArgs),
    /// The one-minute side-by-side of the crate's limiters (exact log,
    /// approximate counter) and a Mutex<VecDeque> log on this machine.
    Bench(BenchArgs),
    /// Replay a traffic log (CSV/TSV, or an nginx/Apache combined log;
    /// plain or .gz) through the exact limiter and the approximate counter,
    /// and report admitted, denied and the top offenders per policy.
    Replay(ReplayArgs),
    /// Serve Envoy's rate-limit API (gRPC ShouldRateLimit, health) with
    /// exact sliding windows, configured with envoyproxy/ratelimit's YAML
    /// (needs a binary built with `--features serve`).
    Serve(Box<ServeArgs>),
}

#[derive(Args, Debug)]
struct ServeArgs {
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
enum WhenFull {
    /// OK, recording nothing.
    #[default]
    Admit,
    /// OVER_LIMIT.
    Deny,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Total time budget in seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Threads for the contended rows.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// The traffic log (CSV, TSV or the combined log format), read directly
    /// when gzip-compressed (`.gz`); `-` for stdin.
    file: String,
    /// A policy N/WINDOW, e.g. `100/1m` (repeat for stacked limits: a request
    /// must fit all of them; each policy once).
    #[arg(long = "limit", required = true, value_parser = parse::policy)]
    limits: Vec<parse::Policy>,
    /// The column holding timestamps: RFC 3339, a date-time without a zone
    /// (in --tz), or Unix epoch s/ms/us/ns (by magnitude, or --time-unit).
    /// A column number from 1 with --no-header. Not used with --input
    /// combined.
    #[arg(long)]
    time_column: Option<String>,
    /// The column holding the key (client IP, API key, user); with --input
    /// combined a field name (default `host`, also called `ip`; or ident,
    /// user, request, status, bytes, referer, agent).
    #[arg(long)]
    key_column: Option<String>,
    /// The input format: csv (default), tsv, or combined (nginx/Apache
    /// combined log format).
    #[arg(long, value_enum, default_value_t = input::InputFormat::Csv)]
    input: input::InputFormat,
    /// CSV/TSV without a header row: --time-column and --key-column are
    /// column numbers from 1.
    #[arg(long)]
    no_header: bool,
    /// The unit of numeric timestamps (default: by magnitude: seconds below
    /// 1e11, then ms, us, ns).
    #[arg(long, value_enum)]
    time_unit: Option<input::TimeUnit>,
    /// The time zone of date-times written without one (an IANA name such
    /// as Europe/Paris, or UTC).
    #[arg(long, default_value = "UTC")]
    tz: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = replay::Format::Table)]
    format: replay::Format,
    /// Shorthand for `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Skip lines that cannot be read (bad fields, bad timestamps, lines over 1 MiB): count
    /// them, show the first few, and fail only above LIMIT, a count (`100`)
    /// or a share of the lines (`0.5%`; the default without a value: `1%`).
    #[arg(long, value_name = "LIMIT", num_args = 0..=1, default_missing_value = "1%",
          value_parser = replay::parse_malformed_limit)]
    skip_malformed: Option<replay::MalformedLimit>,
    /// Key IPv6 addresses by this prefix length, as the tower layer's
    /// `PeerIp::ipv6_prefix` does (one client often holds a whole /64);
    /// 128 (the default) keys each address.
    #[arg(long, value_name = "BITS", default_value_t = 128,
          value_parser = clap::value_parser!(u8).range(0..=128))]
    ipv6_prefix: u8,
    /// Field delimiter (default: tab for .tsv files or a tab-separated
    /// header, comma otherwise).
    #[arg(long)]
    delimiter: Option<char>,
    /// How far timestamps may go backwards before it is an error (`0s`:
    /// not at all).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    tolerance: Duration,
    /// Slots of the approximate counter the exact log is compared with.
    #[arg(long, default_value_t = 10)]
    slots: u32,
    /// How many top offenders to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Also draw admitted vs denied per second over the log, and the top
    /// keys, into this SVG file.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<std::path::PathBuf>,
}

/// Which limiter the demo uses, for one key and per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Algo {
    /// The exact sliding-window log.
    Log,
    /// The approximate sliding-window counter (`--slots` sub-windows).
    Counter,
}

#[derive(Args, Debug, Clone)]
struct DemoArgs {
    /// Worker threads (default: the number of CPUs, at least 2).
    #[arg(long)]
    threads: Option<usize>,
    /// Distinct keys in the keyed phase.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Admissions allowed per window (per key in the keyed phase).
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// The window, e.g. `10ms`, `1s`, `2m`.
    #[arg(long, default_value = "10ms", value_parser = parse_window)]
    window: Duration,
    /// How long each phase runs, e.g. `2s`.
    #[arg(long, default_value = "2s", value_parser = positive_duration)]
    duration: Duration,
    /// The algorithm of both phases: `log` (exact; judged on "no window
    /// holds more than the limit") or `counter` (approximate; judged on its
    /// own guarantee, "no N consecutive slots hold more than the limit").
    #[arg(long, value_enum, default_value_t = Algo::Log)]
    algorithm: Algo,
    /// Sub-windows of the counter (`--algorithm counter`).
    #[arg(long, default_value_t = 10)]
    slots: u32,
    /// Run against the Redis at this URL instead (e.g.
    /// `redis://127.0.0.1/`): one client per thread, each with its own
    /// connection, on one shared key, both layouts (needs a binary built
    /// with `--features redis`).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            threads: None,
            keys: 10_000,
            limit: 100,
            window: Duration::from_millis(10),
            duration: Duration::from_secs(2),
            algorithm: Algo::Log,
            slots: 10,
            redis: None,
        }
    }
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `slidelog serve` reads envoyproxy/ratelimit's variables too.
    #[cfg(feature = "serve")]
    let args =
        serve::env::with_upstream_env(args, |name| std::env::var(name).ok()).unwrap_or_else(|e| {
            eprintln!("slidelog serve: {e}");
            std::process::exit(2);
        });
    let cli = Cli::parse_from(args);
    let command = cli.command.unwrap_or(Command::Demo(DemoArgs::default()));
    if !matches!(command, Command::Serve(_)) {
        die_quietly_on_broken_pipe();
    }
    let result = match command {
        Command::Demo(args) => demo(&args),
        Command::Bench(args) => bench::run(args.seconds, args.threads),
        Command::Serve(args) => run_serve(*args),
        Command::Replay(args) => replay::run(&replay::Options {
            file: args.file,
            policies: args.limits,
            time_column: args.time_column,
            key_column: args.key_column,
            input: args.input,
            no_header: args.no_header,
            time_unit: args.time_unit,
            tz: args.tz,
            format: if args.json {
                replay::Format::Json
            } else {
                args.format
            },
            skip_malformed: args.skip_malformed,
            ipv6_prefix: args.ipv6_prefix,
            delimiter: args.delimiter,
            tolerance: args.tolerance,
            slots: args.slots,
            top: args.top,
            plot: args.plot,
        }),
    };
    if let Err(message) = result {
        eprintln!("slidelog: {message}");
        std::process::exit(2);
    }
}

#[cfg(feature = "redis")]
fn redis_demo(args: &DemoArgs, url: &str) -> Result<(), String> {
    // Redis's clock has microseconds: a window below 10 ms says little.
    let window = if args.window == DemoArgs::default().window {
        Duration::from_millis(100)
    } else {
        args.window
    };
    let clients = args.threads.unwrap_or(4);
    check_threads(clients)?;
    redis_demo::run(&redis_demo::Options {
        url,
        clients,
        limit: args.limit,
        window,
        duration: args.duration,
    })
}

#[cfg(not(feature = "redis"))]
fn redis_demo(_: &DemoArgs, url: &str) -> Result<(), String> {
    Err(format!(
        "this slidelog was built without Redis support: cargo run --release --features redis -- demo --redis {url}"
    ))
}

#[cfg(feature = "serve")]
fn run_serve(args: ServeArgs) -> Result<(), String> {
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

#[cfg(not(feature = "serve"))]
fn run_serve(_: ServeArgs) -> Result<(), String> {
    Err("this slidelog was built without the Envoy service: cargo install slidelog --features serve (or cargo run --release --features serve -- serve ...)".into())
}

/// What one phase measured.
struct Report {
    checks: u64,
    admitted: u64,
    elapsed: Duration,
    /// The most admissions of one key in any window `(t - W, t]`.
    max_in_window: usize,
    /// What the phase is judged on: `max_in_window` for the log, the most
    /// admissions of one key in any `N` consecutive slots for the counter.
    judged: usize,
}

/// Lets a closed stdout end the process quietly, as it ends other command-line
/// tools: `slidelog replay … | head` stops when `head` has its lines. Rust
/// ignores `SIGPIPE` at startup, so a write to a closed pipe fails instead
/// and `println!` panics with a backtrace. Not for `serve`: a server
/// outlives its clients' connections and must not die of one.
#[cfg(unix)]
#[allow(unsafe_code)]
fn die_quietly_on_broken_pipe() {
    // SAFETY: `signal` only sets the disposition of `SIGPIPE` back to the
    // default, with a handler of libc's own (`SIG_DFL`), no Rust code run
    // from the signal; it is called once, at the start of `main`, before
    // this process starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Elsewhere there is no `SIGPIPE`: a closed stdout fails the write.
#[cfg(not(unix))]
fn die_quietly_on_broken_pipe() {}

fn demo(args: &DemoArgs) -> Result<(), String> {
    // A limit or window no limiter takes is refused before a banner names it.
    slidelog::Quota::new(args.limit, args.window).map_err(|e| e.to_string())?;
    if let Some(url) = &args.redis {
        return redis_demo(args, url);
    }
    let threads = args.threads.unwrap_or_else(|| {
        thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2)
    });
    if threads == 0 || args.keys == 0 {
        return Err("--threads and --keys must be at least 1".into());
    }
    check_threads(threads)?;
    let clock = checked_clock(DEFAULT_MAX_CLOCK_SKEW, "slidelog demo");
    let window_ns = args.window.as_nanos() as u64;
    println!(
        "slidelog demo: {threads} {}, limit {} per {:?}, {:?} per phase",
        if threads == 1 { "thread" } else { "threads" },
        args.limit,
        args.window,
        args.duration
    );

    // The one-key limiter and the bytes it measures itself to hold; the
    // counter's slot width (its guarantee is per run of N slots).
    let (one, one_bytes, width): (Arc<dyn RateLimit>, usize, Option<u64>) = match args.algorithm {
        Algo::Log => {
            let log = Limiter::builder(args.limit, args.window)
                .clock(clock.clone())
                .build()
                .map_err(|e| e.to_string())?;
            let bytes = log.memory_bytes();
            (Arc::new(log), bytes, None)
        }
        Algo::Counter => {
            let counter =
                SlidingCounter::with_clock(args.limit, args.window, args.slots, clock.clone())
                    .map_err(|e| e.to_string())?;
            let (bytes, width) = (counter.memory_bytes(), counter.slot_width());
            (Arc::new(counter), bytes, Some(width.as_nanos() as u64))
        }
    };
    let judge = Judge {
        window: window_ns,
        slots: width.map(|w| (w, u64::from(args.slots))),
    };
    let single = run_phase("one key", threads, args.duration, &judge, {
        let one = Arc::clone(&one);
        move |_, _| one.check().ok().map(|a| (0, a.at()))
    });

    // Room for the keys made up front, up to a million: a run touches only
    // the keys its calls reach, and `--keys 1000000000` must not allocate a
    // table for a billion before the first call.
    let keys = usize::try_from(args.keys).unwrap_or(usize::MAX);
    let builder = KeyedLimiter::<u64>::builder(args.limit, args.window)
        .clock(clock)
        .max_keys(keys)
        .capacity(keys.min(1 << 20));
    let (many, keyed_bytes) = match args.algorithm {
        Algo::Log => keyed_phase(
            builder.build().map_err(|e| e.to_string())?,
            args,
            threads,
            &judge,
        ),
        Algo::Counter => keyed_phase(
            builder
                .sliding_counter(args.slots)
                .build()
                .map_err(|e| e.to_string())?,
            args,
            threads,
            &judge,
        ),
    };
    let keys = args.keys;

    println!();
    println!(
        "{:<12} {:>14} {:>12} {:>14} {:>16} {:>8} {:>14}",
        "phase",
        "checks/s",
        "admitted",
        "denied",
        "max in window",
        if judge.slots.is_some() {
            "N slots"
        } else {
            "exact"
        },
        "bytes per key"
    );
    let rows = [
        ("one key", &single, one_bytes),
        (&*format!("{keys} keys"), &many, keyed_bytes),
    ];
    let mut held = true;
    for (name, r, bytes) in rows {
        let ok = r.judged <= args.limit as usize;
        held &= ok;
        println!(
            "{:<12} {:>14.0} {:>12} {:>14} {:>10} / {:<3} {:>8} {:>14}",
            name,
            r.checks as f64 / r.elapsed.as_secs_f64(),
            r.admitted,
            r.checks - r.admitted,
            r.max_in_window,
            args.limit,
            if ok { "yes" } else { "NO" },
            bytes
        );
    }
    println!();
    match (held, judge.slots) {
        (true, None) => {
            println!(
                "exact: yes — no window of {:?} held more than {} admissions (per key).",
                args.window, args.limit
            );
            Ok(())
        }
        (true, Some((width, n))) => {
            println!(
                "counter guarantee: yes — no {n} consecutive slots of {:?} held more than {} \
                 admissions (per key); a sliding window may hold up to one slot's more \
                 (approximate by design).",
                Duration::from_nanos(width),
                args.limit
            );
            Ok(())
        }
        (false, None) => Err("a window held more admissions than the limit".into()),
        (false, Some(_)) => Err("N consecutive slots held more admissions than the limit".into()),
    }
}

/// The keyed phase on any per-key algorithm; returns its report and the
/// limiter's bytes per key.
fn keyed_phase<A: Algorithm>(
    keyed: KeyedLimiter<u64, slidelog::ClockChoice, std::collections::hash_map::RandomState, A>,
    args: &DemoArgs,
    threads: usize,
    judge: &Judge,
) -> (Report, usize) {
    let keyed = Arc::new(keyed);
    let keys = args.keys;
    let report = run_phase(&format!("{keys} keys"), threads, args.duration, judge, {
        let keyed = Arc::clone(&keyed);
        move |worker, i| {
            // Half the traffic from 16 abusive keys, half spread over all
            // keys (a cheap multiplicative hash of the call number).
            let spread = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ worker as u64;
            let key = if i % 2 == 0 {
                spread % keys.min(16)
            } else {
                spread % keys
            };
            keyed.check(&key).ok().map(|a| (key, a.at()))
        }
    });
    (report, keyed.bytes_per_key())
}

/// What a phase is judged on: the exact rule (no window of `window` ns
/// holds more than the limit), or the counter's (no `n` consecutive slots of
/// `width` ns do).
struct Judge {
    window: u64,
    slots: Option<(u64, u64)>,
}

/// The most the TSC clock may step back between cores before `demo` and
/// `serve` read the operating system's monotonic clock instead (the
/// `Clock` docs: a skew of `S` can let a real window hold what `S` more
/// of clock time admits). Steps shorter than a hand-off between cores
/// (tens of nanoseconds) are not seen by the measurement.
const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_micros(1);

/// The clock for this process's limiters: the TSC (quanta) if its skew
/// across cores, measured now, is within `bound`, else the operating
/// system's monotonic clock, with a warning on stderr saying why.
fn checked_clock(bound: Duration, who: &str) -> slidelog::ClockChoice {
    let (clock, skew) = slidelog::ClockChoice::within(bound);
    if let Some(skew) = skew {
        eprintln!("{who}: warning: {skew}; the operating system's monotonic clock is used instead");
    }
    clock
}

/// The most threads `demo` and `bench` start.
const MAX_THREADS: usize = 1024;

/// Refuses more than [`MAX_THREADS`] threads, before anything starts:
/// beyond that a run times the scheduler, not the limiter, and a typo
/// (`--threads 100000`) would start a hundred thousand threads.
fn check_threads(threads: usize) -> Result<(), String> {
    if threads > MAX_THREADS {
        return Err(format!(
            "--threads {threads} is more than {MAX_THREADS}: more threads than cores time the scheduler, not the limiter"
        ));
    }
    Ok(())
}

/// Runs `check(worker, i)` on `threads` threads for `duration`, with a live
/// progress line, and verifies the admitted `(key, at)` pairs.
fn run_phase<F>(name: &str, threads: usize, duration: Duration, judge: &Judge, check: F) -> Report
where
    F: Fn(usize, u64) -> Option<(u64, u64)> + Send + Sync + Clone + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|worker| {
            let (stop, checks, check) = (Arc::clone(&stop), Arc::clone(&checks), check.clone());
            thread::spawn(move || {
                let mut admitted = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        if let Some(pair) = check(worker, i) {
                            admitted.push(pair);
                        }
                        i += 1;
                    }
                    checks.fetch_add(1024, Ordering::Relaxed);
                }
                admitted
            })
        })
        .collect();
    // A bar on a terminal, plain periodic lines into a log file.
    let total_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let mut progress = progress::Progress::new(name, Some(total_ms), progress::Unit::Seconds);
    while start.elapsed() < duration {
        thread::sleep(Duration::from_millis(100).min(duration));
        let done = checks.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        progress.update(
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            || {
                format!(
                    "{:.1}s, {done} checks, {:.0} checks/s",
                    elapsed.as_secs_f64(),
                    done as f64 / elapsed.as_secs_f64()
                )
            },
        );
    }
    progress.finish();
    stop.store(true, Ordering::Relaxed);
    let mut admitted: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker panicked"))
        .collect();
    let elapsed = start.elapsed();
    admitted.sort_unstable();
    let fullest = max_in_window(&admitted, judge.window);
    let judged = match judge.slots {
        None => fullest,
        // Slot numbers are sorted like the times: the same scan counts
        // admissions in any `n` consecutive slots.
        // Sub-window k is [ceil(k W / n), ceil((k + 1) W / n)): t lies in
        // floor(t n / W) (the counter's numbering, also where n does not
        // divide W; `at / width` was wrong there).
        Some((_, n)) => {
            let slot = |at: u64| (u128::from(at) * u128::from(n) / u128::from(judge.window)) as u64;
            let slots: Vec<(u64, u64)> = admitted.iter().map(|&(k, at)| (k, slot(at))).collect();
            max_in_window(&slots, n)
        }
    };
    Report {
        checks: checks.load(Ordering::Relaxed),
        admitted: admitted.len() as u64,
        elapsed,
        max_in_window: fullest,
        judged,
    }
}

/// The largest number of admissions of one key in any window `(t - W, t]`,
/// over `(key, at)` pairs sorted by key then time.
fn max_in_window(sorted: &[(u64, u64)], window: u64) -> usize {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sorted.len() {
        if sorted[lo].0 != sorted[hi].0 {
            lo = hi;
        }
        while sorted[lo].1 + window <= sorted[hi].1 {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_counting_is_per_key() {
        let pairs = [(1, 0), (1, 5), (1, 10), (2, 1), (2, 2), (2, 3)];
        assert_eq!(max_in_window(&pairs, 10), 3);
        assert_eq!(max_in_window(&pairs[..3], 10), 2);
    }
}
