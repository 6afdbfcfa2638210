//! The tower layer on a real axum server over real TCP: exact counts per
//! window with a ManualClock, header values, 429 bodies, Retry-After
//! rounding, clones sharing state, spoofed forwarding headers ignored.

#![cfg(feature = "tower")]

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::Request;
use slidelog::tower::{DenyStyle, HeaderKey, HeaderStyle, KeyFn, PeerIp, RateLimitLayer};
use slidelog::{KeyedLimiter, ManualClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request over a fresh connection (`Connection: close`).
async fn get_path(addr: SocketAddr, path: &str, extra: &[(&str, &str)]) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in extra {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

async fn serve(app: Router) -> SocketAddr {
    serve_on("127.0.0.1:0", app).await
}

/// Serves `app` on `bind` (an address with port 0), with the peer address
/// as axum's `ConnectInfo`.
async fn serve_on(bind: &str, app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Resident set size in bytes (Linux).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// A keyed limiter of `limit` per `secs` seconds on its own manual clock.
fn manual<K: std::hash::Hash + Eq + slidelog::KeySize>(
    limit: u32,
    secs: u64,
) -> Arc<KeyedLimiter<K, ManualClock>> {
    manual_on(limit, secs, &ManualClock::new())
}

fn by_peer() -> KeyFn<impl Fn(&Request<Body>) -> Option<IpAddr> + Clone> {
    KeyFn::new(|req: &Request<Body>| {
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
    })
}

#[tokio::test]
async fn exact_counts_headers_and_429() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<IpAddr, ManualClock>::with_clock(5, Duration::from_secs(10), clock.clone())
            .unwrap(),
    );
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(Arc::clone(&limiter), by_peer()));
    let addr = serve(app).await;

    for remaining in (0..5).rev() {
        let r = get_path(addr, "/", &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, "hello", "the inner body passes untouched");
        assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=5;w=10"));
        // `t`: until the oldest admission in the window (all at 0) leaves it
        // and the quota grows again; not 0 while `r > 0`.
        let t = 10;
        assert_eq!(
            r.header("ratelimit"),
            Some(format!("\"default\";r={remaining};t={t}").as_str())
        );
    }
    clock.advance(Duration::from_millis(9_700)); // 300 ms left: Retry-After rounds up to 1
    let r = get_path(addr, "/", &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("ratelimit"), Some("\"default\";r=0;t=1"));
    assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=5;w=10"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.body, "Too Many Requests: rate limit exceeded\n");
    clock.advance(Duration::from_millis(300));
    assert_eq!(
        get_path(addr, "/", &[]).await.status,
        200,
        "exactly at the window edge"
    );
}

#[tokio::test]
async fn inner_service_is_not_called_when_denied() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let limiter = manual::<IpAddr>(2, 60);
    let counter = Arc::clone(&calls);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    (http::StatusCode::IM_A_TEAPOT, "teapot")
                }
            }),
        )
        .layer(RateLimitLayer::new(limiter, by_peer()).header_style(HeaderStyle::Legacy));
    let addr = serve(app).await;
    for _ in 0..5 {
        let _ = get_path(addr, "/", &[]).await;
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    let r = get_path(addr, "/", &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("x-ratelimit-limit"), Some("2"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(r.header("retry-after"), Some("60"));
}

#[tokio::test]
async fn spoofed_forwarding_headers_are_ignored_by_default() {
    let limiter = manual::<IpAddr>(1, 60);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(Arc::clone(&limiter), by_peer()));
    let addr = serve(app).await;
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", "1.1.1.1")])
            .await
            .status,
        200
    );
    // A new spoofed address does not buy a new bucket.
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", "2.2.2.2")])
            .await
            .status,
        429
    );
    assert_eq!(limiter.len(), 1);

    // Opting in keys by the header.
    let trusting = manual::<IpAddr>(1, 60);
    let peer_then_forwarded = PeerIp::new().trust_forwarded();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(
            Arc::clone(&trusting),
            peer_then_forwarded,
        ));
    let addr = serve(app).await;
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", "1.1.1.1")])
            .await
            .status,
        200
    );
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", "2.2.2.2")])
            .await
            .status,
        200
    );
    // No forwarding header: the peer address, from axum's ConnectInfo
    // (read with the `tower` feature alone).
    assert_eq!(get_path(addr, "/", &[]).await.status, 200);
}

/// A server that records no peer address gives `PeerIp` no key.
/// Answered 400 saying the request carries no rate-limit key (gRPC:
/// INVALID_ARGUMENT) by default, or 500 when the operator says it can only
/// be the server's misconfiguration; never a 429 with a made-up
/// Retry-After, and never let through; with a fallback key the requests
/// share one limit.
#[tokio::test]
async fn a_missing_key_is_refused_not_a_429() {
    use slidelog::tower::MissingKey;
    async fn serve_without_peer(app: Router) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }
    let limiter = manual::<IpAddr>(1, 60);
    let called = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = Arc::clone(&called);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { "ok" }
            }),
        )
        .layer(RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new()));
    let addr = serve_without_peer(app).await;
    let r = get_path(addr, "/", &[]).await;
    assert_eq!(
        (r.status, r.body.trim()),
        (
            400,
            "400 Bad Request: the request carries no rate-limit key"
        )
    );
    // The client gets the status and why, not the server's set-up (that
    // goes to the log, once, naming the extractor and the fix).
    for detail in ["PeerIp", "connect_info", "fallback", "SocketAddr"] {
        assert!(!r.body.contains(detail), "leaks {detail}: {}", r.body);
    }
    assert_eq!(r.header("retry-after"), None);
    assert_eq!(
        called.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "never let through"
    );

    let grpc = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new()).deny_style(DenyStyle::Grpc),
    );
    let r = get_path(serve_without_peer(grpc).await, "/", &[]).await;
    assert_eq!(r.header("grpc-status"), Some("3"));
    let server_error = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new())
            .on_missing_key(MissingKey::ServerError),
    );
    let r = get_path(serve_without_peer(server_error).await, "/", &[]).await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("Internal Server Error"), "{}", r.body);
    let grpc = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new())
            .on_missing_key(MissingKey::ServerError)
            .deny_style(DenyStyle::Grpc),
    );
    let r = get_path(serve_without_peer(grpc).await, "/", &[]).await;
    assert_eq!(r.header("grpc-status"), Some("13"));

    // The operator's choices: a missing API key is the client's 401; a
    // health check without a key passes through unlimited.
    let keyed = manual::<String>(1, 60);
    let reject = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&keyed), HeaderKey::new("x-api-key"))
            .on_missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED)),
    );
    let addr = serve(reject).await;
    let r = get_path(addr, "/", &[]).await;
    assert_eq!(
        (r.status, r.body.trim()),
        (
            401,
            "401 Unauthorized: the request carries no rate-limit key"
        )
    );
    assert_eq!(get_path(addr, "/", &[("x-api-key", "k")]).await.status, 200);
    assert_eq!(get_path(addr, "/", &[("x-api-key", "k")]).await.status, 429);
    let allow = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&keyed), HeaderKey::new("x-api-key"))
            .on_missing_key(MissingKey::Allow),
    );
    let addr = serve(allow).await;
    for _ in 0..3 {
        let r = get_path(addr, "/", &[]).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "unlimited");
        assert_eq!(r.header("ratelimit"), None);
    }
    assert_eq!(keyed.len(), 1, "no key was made for keyless requests");

    let shared = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new())
            .fallback_key(IpAddr::from([0, 0, 0, 0])),
    );
    let addr = serve_without_peer(shared).await;
    assert_eq!(get_path(addr, "/", &[]).await.status, 200);
    assert_eq!(
        get_path(addr, "/", &[]).await.status,
        429,
        "one shared limit"
    );
}

#[tokio::test]
async fn clones_share_one_limiter_and_grpc_mode() {
    let limiter = manual::<String>(3, 60);
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"))
        .fallback_key("anonymous".into());
    // Two routers built from clones of one layer.
    let a = serve(
        Router::new()
            .route("/", get(|| async { "a" }))
            .layer(layer.clone()),
    )
    .await;
    let b = serve(Router::new().route("/", get(|| async { "b" })).layer(layer)).await;
    let key = [("x-api-key", "k1")];
    assert_eq!(get_path(a, "/", &key).await.status, 200);
    assert_eq!(get_path(b, "/", &key).await.status, 200);
    assert_eq!(get_path(a, "/", &key).await.status, 200);
    assert_eq!(
        get_path(b, "/", &key).await.status,
        429,
        "the clones share the limit"
    );
    assert_eq!(
        get_path(b, "/", &[]).await.status,
        200,
        "no key: the shared fallback"
    );

    let grpc =
        RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")).deny_style(DenyStyle::Grpc);
    let g = serve(Router::new().route("/", get(|| async { "g" })).layer(grpc)).await;
    let r = get_path(g, "/", &key).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("8"));
    assert_eq!(r.header("content-type"), Some("application/grpc"));
}

/// The keyed counter behind the layer: per-key budgets, 429 with the
/// counter's `Retry-After` (when its oldest slot leaves the window).
#[tokio::test]
async fn keyed_counter_backend() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<String>::builder(3, Duration::from_secs(10))
            .sliding_counter(10)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(
            Arc::clone(&limiter),
            HeaderKey::new("x-api-key"),
        ));
    let addr = serve(app).await;
    let key = |k: &'static str| [("x-api-key", k)];
    for remaining in (0..3).rev() {
        let r = get_path(addr, "/", &key("a")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=3;w=10"));
        // The counter's oldest slot [0, 1 s) leaves the window at 10 s.
        let t = 10;
        assert_eq!(
            r.header("ratelimit"),
            Some(format!("\"default\";r={remaining};t={t}").as_str())
        );
    }
    clock.advance(Duration::from_millis(2_500)); // slot [0, 1 s) leaves at 10 s
    let r = get_path(addr, "/", &key("a")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("8"), "7.5 s rounded up");
    assert_eq!(
        get_path(addr, "/", &key("b")).await.status,
        200,
        "keys are independent"
    );
    clock.advance(Duration::from_millis(7_500));
    assert_eq!(get_path(addr, "/", &key("a")).await.status, 200);
    assert_eq!(limiter.len(), 2);
}

/// A single-key limiter (exact log or counter) as a global limit, behind a
/// trait object chosen at run time.
#[tokio::test]
async fn single_key_backends_limit_globally() {
    use slidelog::tower::GlobalKey;
    use slidelog::{Limiter, RateLimit, SlidingCounter};
    for exact in [true, false] {
        let clock = ManualClock::new();
        let limiter: Arc<dyn RateLimit> = if exact {
            Arc::new(Limiter::with_clock(2, Duration::from_secs(4), clock.clone()).unwrap())
        } else {
            Arc::new(
                SlidingCounter::with_clock(2, Duration::from_secs(4), 4, clock.clone()).unwrap(),
            )
        };
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter, GlobalKey));
        let addr = serve(app).await;
        assert_eq!(get_path(addr, "/", &[]).await.status, 200);
        let r = get_path(addr, "/", &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit"), Some("\"default\";r=0;t=4"));
        let r = get_path(addr, "/", &[("x-forwarded-for", "9.9.9.9")]).await;
        assert_eq!(r.status, 429, "one budget for everyone (exact: {exact})");
        assert_eq!(r.header("retry-after"), Some("4"));
        clock.advance(Duration::from_secs(4));
        assert_eq!(get_path(addr, "/", &[]).await.status, 200);
    }
}

/// A flood of long `x-api-key` values through the layer never
/// stores a value whole: `HeaderKey` keys values longer than its maximum by
/// a 33-byte digest, so 1,000 clients with 64 KiB keys cost what 1,000
/// short keys cost; distinct long values stay distinct keys, and one long
/// value is limited like any key.
#[tokio::test]
async fn long_header_keys_are_never_stored_whole() {
    use tower::{Service, ServiceExt};
    let limiter = manual::<String>(2, 60);
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"));
    let mut service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
        }));
    let long = 64 << 10;
    let rss_before = rss();
    for client in 0..1_000 {
        let key = format!("{client:06}{}", "x".repeat(long - 6));
        let request = Request::builder()
            .header("x-api-key", key)
            .body(Body::empty())
            .unwrap();
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        assert_eq!(response.status(), 200, "client {client}");
    }
    assert_eq!(limiter.len(), 1_000, "distinct long values stay distinct");
    // 1,000 keys stored whole would hold 64 MiB; the digests hold 33 bytes
    // each. (RSS is shared with the tests running beside this one, so the
    // bound is loose.)
    if let (Some(before), Some(after)) = (rss_before, rss()) {
        let grown = after.saturating_sub(before);
        println!("RSS {} -> {} KiB", before / 1024, after / 1024);
        assert!(grown < 32 << 20, "RSS grew by {} KiB", grown / 1024);
    }
    let per_key = limiter.bytes_per_key() + 64;
    assert!(
        limiter.memory_bytes() <= 1_000 * per_key,
        "{} bytes for 1,000 keys: long values were stored",
        limiter.memory_bytes()
    );
    let same = format!("{:06}{}", 7, "x".repeat(long - 6));
    let request = Request::builder()
        .header("x-api-key", same.as_str())
        .body(Body::empty())
        .unwrap();
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), 200, "the second of two");
    let request = Request::builder()
        .header("x-api-key", same.as_str())
        .body(Body::empty())
        .unwrap();
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(
        response.status(),
        429,
        "one long value is limited like any key"
    );
}

/// Over a real IPv6 socket on [::1], `PeerIp::new().ipv6_prefix(64)`
/// keys the client by its /64 (here `::`), so a client rotating addresses
/// inside its network shares one limit; the default keys the full address.
#[tokio::test]
async fn peer_ip_keys_ipv6_clients_by_prefix_over_a_real_socket() {
    let network: IpAddr = "::".parse().unwrap();
    let host: IpAddr = "::1".parse().unwrap();

    let limiter = manual::<IpAddr>(1, 60);
    let by_net = serve_on(
        "[::1]:0",
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(
                Arc::clone(&limiter),
                PeerIp::new().ipv6_prefix(64),
            )),
    )
    .await;
    assert!(by_net.is_ipv6());
    assert_eq!(get_path(by_net, "/", &[]).await.status, 200);
    assert_eq!(get_path(by_net, "/", &[]).await.status, 429);
    assert!(limiter.peek(&network).is_err(), "keyed by the /64");
    assert!(limiter.peek(&host).is_ok(), "not by the full address");

    let limiter = manual::<IpAddr>(1, 60);
    let by_host = serve_on(
        "[::1]:0",
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new())),
    )
    .await;
    assert_eq!(get_path(by_host, "/", &[]).await.status, 200);
    assert!(
        limiter.peek(&host).is_err(),
        "the default keys the full address"
    );
    assert!(limiter.peek(&network).is_ok());
}

/// The IETF `t` is the time until the oldest admission still in
/// the window leaves it (when `r` next grows), not the time until one more
/// request fits (which is 0 whenever `r > 0`).
#[tokio::test]
async fn ietf_t_counts_down_to_the_oldest_admission() {
    use slidelog::tower::Backend;
    let clock = ManualClock::new();
    let limiter =
        KeyedLimiter::<u64, ManualClock>::with_clock(5, Duration::from_secs(10), clock.clone())
            .unwrap();
    let first = Backend::check(&limiter, 1).await;
    assert_eq!(first.decision.unwrap().remaining(), 4);
    assert_eq!(first.wait, Duration::from_secs(10));
    clock.advance(Duration::from_secs(4));
    let second = Backend::check(&limiter, 1).await;
    assert_eq!(second.decision.unwrap().remaining(), 3);
    assert_eq!(
        second.wait,
        Duration::from_secs(6),
        "the admission at 0 leaves at 10"
    );
    clock.advance(Duration::from_secs(6));
    let third = Backend::check(&limiter, 1).await;
    assert_eq!(third.decision.unwrap().remaining(), 3, "the first one left");
    assert_eq!(
        third.wait,
        Duration::from_secs(4),
        "the one at 4 leaves at 14"
    );
}

/// Several policies: one `RateLimit-Policy` item per policy, and one
/// `RateLimit` item per policy (each policy's own room and wait), so a
/// client sees the minute's room while the second is spent; with
/// `HeaderStyle::IetfClosest`, the one item of the policy closest to
/// exhaustion (or the one that denied, whose wait is the `Retry-After`).
#[tokio::test]
async fn one_policy_item_per_policy_and_the_closest_to_exhaustion() {
    let every = [
        "\"1s\";r=2;t=1, \"1m\";r=3;t=60",
        "\"1s\";r=1;t=1, \"1m\";r=2;t=60",
        "\"1s\";r=0;t=1, \"1m\";r=1;t=60",
        "\"1s\";r=0;t=1, \"1m\";r=1;t=60",
        "\"1s\";r=2;t=1, \"1m\";r=0;t=59",
        "\"1s\";r=3;t=0, \"1m\";r=0;t=58",
    ];
    let closest = [
        "\"1s\";r=2;t=1",
        "\"1s\";r=1;t=1",
        "\"1s\";r=0;t=1",
        "\"1s\";r=0;t=1",
        "\"1m\";r=0;t=59",
        "\"1m\";r=0;t=58",
    ];
    // A keyed limiter (one client: one key), and a single-key `Limiter`
    // behind `GlobalKey`: the same answers.
    for ((style, expected), single) in [
        (HeaderStyle::Ietf, every),
        (HeaderStyle::IetfClosest, closest),
    ]
    .into_iter()
    .flat_map(|case| [(case, false), (case, true)])
    {
        let clock = ManualClock::new();
        let route = Router::new().route("/", get(|| async { "hello" }));
        let app = if single {
            let limiter = Arc::new(
                slidelog::Limiter::builder(3, Duration::from_secs(1))
                    .and(4, Duration::from_secs(60))
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            );
            route.layer(
                RateLimitLayer::<_, _, ()>::new(limiter, slidelog::tower::GlobalKey)
                    .header_style(style),
            )
        } else {
            let limiter = Arc::new(
                KeyedLimiter::<IpAddr>::builder(3, Duration::from_secs(1))
                    .and(4, Duration::from_secs(60))
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            );
            route.layer(RateLimitLayer::new(limiter, by_peer()).header_style(style))
        };
        let addr = serve(app).await;
        let policy = "\"1s\";q=3;w=1, \"1m\";q=4;w=60";
        let mut seen = Vec::new();
        // 2 left this second, 3 this minute; then 1 and 2; then 0 and 1.
        for _ in 0..3 {
            let r = get_path(addr, "/", &[]).await;
            assert_eq!(
                (r.status, r.header("ratelimit-policy")),
                (200, Some(policy))
            );
            seen.push(r.header("ratelimit").unwrap_or("").to_string());
        }
        let r = get_path(addr, "/", &[]).await;
        assert_eq!((r.status, r.header("retry-after")), (429, Some("1")));
        seen.push(r.header("ratelimit").unwrap_or("").to_string());
        // A second later the per-second policy has room, the minute has one.
        clock.advance(Duration::from_secs(1));
        let r = get_path(addr, "/", &[]).await;
        assert_eq!(r.status, 200);
        seen.push(r.header("ratelimit").unwrap_or("").to_string());
        clock.advance(Duration::from_secs(1));
        let r = get_path(addr, "/", &[]).await;
        assert_eq!(r.status, 429, "the minute's four are used");
        assert_eq!(r.header("retry-after"), Some("58"));
        seen.push(r.header("ratelimit").unwrap_or("").to_string());
        assert_eq!(seen, expected, "{style:?}, single-key limiter: {single}");
    }
}

/// A key with its own quota is described by its own policies
/// in the headers; other keys by the default ones.
#[tokio::test]
async fn quota_keys_get_their_own_policy_headers() {
    let paid = slidelog::Quota::new(4, Duration::from_secs(1))
        .unwrap()
        .and(50, Duration::from_secs(60))
        .unwrap();
    let limiter = Arc::new(
        KeyedLimiter::<String>::builder(2, Duration::from_secs(1))
            .quota(move |k: &String| k.starts_with("paid").then(|| paid.clone()))
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")));
    let addr = serve(app).await;
    let free = get_path(addr, "/", &[("x-api-key", "free-1")]).await;
    assert_eq!(free.header("ratelimit-policy"), Some("\"default\";q=2;w=1"));
    assert_eq!(free.header("ratelimit"), Some("\"default\";r=1;t=1"));
    let paid = get_path(addr, "/", &[("x-api-key", "paid-1")]).await;
    assert_eq!(
        paid.header("ratelimit-policy"),
        Some("\"1s\";q=4;w=1, \"1m\";q=50;w=60")
    );
    assert_eq!(
        paid.header("ratelimit"),
        Some("\"1s\";r=3;t=1, \"1m\";r=49;t=60")
    );
}

/// Behind trusted proxies over a real socket: the key is the rightmost
/// address no trusted proxy added. A spoofed leftmost `X-Forwarded-For`
/// entry or a client-sent `Forwarded` never changes it; with two trusted
/// hops (the peer and one more) it is the third address from the right of
/// the chain (`X-Forwarded-For`, then the peer); malformed chains key by
/// the peer, and nothing panics.
#[tokio::test]
async fn forwarded_chains_key_by_the_rightmost_untrusted_address() {
    let limiter = manual::<IpAddr>(1, 60);
    let peer_ip = PeerIp::new().trusted_hops(2);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(Arc::clone(&limiter), peer_ip));
    let addr = serve(app).await;
    let key = |s: &str| s.parse::<IpAddr>().unwrap();
    // The client 1.1.1.1, as the load balancer (10.0.0.1) appended it.
    let chain = "1.1.1.1, 10.0.0.1";
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", chain)])
            .await
            .status,
        200
    );
    assert!(limiter.peek(&key("1.1.1.1")).is_err(), "keyed by 1.1.1.1");
    // Spoofed entries on the left, a client-sent `Forwarded`: the same key.
    for spoof in [
        &[("x-forwarded-for", "6.6.6.6, 1.1.1.1, 10.0.0.1")][..],
        &[("x-forwarded-for", "7.7.7.7,8.8.8.8, 1.1.1.1, 10.0.0.1")][..],
        &[("forwarded", "for=9.9.9.9"), ("x-forwarded-for", chain)][..],
    ] {
        assert_eq!(get_path(addr, "/", spoof).await.status, 429, "{spoof:?}");
    }
    assert_eq!(limiter.len(), 1);

    // Malformed chains fall back to the peer (127.0.0.1), never panic.
    let many = vec!["10.9.9.9"; 10_000].join(",");
    let peer = key("127.0.0.1");
    for (i, bad) in [
        "garbage, 10.0.0.1",
        "[::1]x, 10.0.0.1",
        "1.1.1.1:99999, 10.0.0.1",
        "\"[2001:db8::1]\", 10.0.0.1",
        many.as_str(),
    ]
    .into_iter()
    .enumerate()
    {
        let reply = get_path(addr, "/", &[("x-forwarded-for", bad)]).await;
        if i == 4 {
            // Every address trusted by count would need 10,001 hops: the
            // third from the right is a 10.9.9.9 entry.
            assert_eq!(reply.status, 200);
            assert!(limiter.peek(&key("10.9.9.9")).is_err());
        } else if i == 0 {
            assert_eq!(reply.status, 200, "{bad}: keyed by the peer");
            assert!(limiter.peek(&peer).is_err());
        } else {
            assert_eq!(reply.status, 429, "{bad}: the peer again");
        }
    }

    // Trusting the proxies' network instead of a count, with the peer in it.
    let limiter = manual::<IpAddr>(1, 60);
    let peer_ip = PeerIp::new()
        .trusted_network("127.0.0.0/8".parse().unwrap())
        .trusted_network("10.0.0.0/8".parse().unwrap());
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(Arc::clone(&limiter), peer_ip));
    let addr = serve(app).await;
    let chain = "6.6.6.6, 2.2.2.2, 10.1.1.1, 10.2.2.2";
    assert_eq!(
        get_path(addr, "/", &[("x-forwarded-for", chain)])
            .await
            .status,
        200
    );
    assert!(limiter.peek(&key("2.2.2.2")).is_err(), "keyed by 2.2.2.2");
    assert_eq!(limiter.len(), 1);
}

/// A backend reconfigured between requests: the next responses send the
/// new `RateLimit-Policy` and are judged by the new limit over the kept
/// history — for the keyed limiter (default policies and a run-time quota)
/// and for a single-key limiter behind the same layer type.
#[tokio::test]
async fn reconfigured_backends_send_the_new_policy_and_deny_by_it() {
    let limiter = manual::<String>(5, 10);
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(
            Arc::clone(&limiter),
            HeaderKey::new("x-api-key"),
        ));
    let addr = serve(app).await;
    let key = [("x-api-key", "tenant")];
    for _ in 0..3 {
        assert_eq!(get_path(addr, "/", &key).await.status, 200);
    }
    // Cut to 2 per 10 s: 3 already in the window, so denied at once.
    limiter
        .reconfigure(slidelog::Quota::new(2, Duration::from_secs(10)).unwrap())
        .unwrap();
    let r = get_path(addr, "/", &key).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=2;w=10"));
    assert_eq!(r.header("ratelimit"), Some("\"default\";r=0;t=10"));
    // A tenant upgraded at run time: its own policy, over the history the
    // cut kept (all 3, each still in the window).
    limiter
        .set_quota(
            "tenant".to_string(),
            slidelog::Quota::new(4, Duration::from_secs(10)).unwrap(),
        )
        .unwrap();
    let r = get_path(addr, "/", &key).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=4;w=10"));
    assert_eq!(r.header("ratelimit"), Some("\"default\";r=0;t=10"));
    // Another key follows the default.
    let other = get_path(addr, "/", &[("x-api-key", "other")]).await;
    assert_eq!(
        other.header("ratelimit-policy"),
        Some("\"default\";q=2;w=10")
    );

    let single = Arc::new(
        slidelog::Limiter::with_clock(3, Duration::from_secs(10), ManualClock::new()).unwrap(),
    );
    let app =
        Router::new()
            .route("/", get(|| async { "hello" }))
            .layer(RateLimitLayer::<_, _, ()>::new(
                Arc::clone(&single),
                slidelog::tower::GlobalKey,
            ));
    let addr = serve(app).await;
    assert_eq!(get_path(addr, "/", &[]).await.status, 200);
    assert_eq!(get_path(addr, "/", &[]).await.status, 200);
    single
        .reconfigure(
            slidelog::Quota::new(2, Duration::from_secs(10))
                .unwrap()
                .and(5, Duration::from_secs(60))
                .unwrap(),
        )
        .unwrap();
    let r = get_path(addr, "/", &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"10s\";q=2;w=10, \"1m\";q=5;w=60")
    );
    // Reconfigured again: the layer's description of the last
    // reconfiguration is stale in its turn, and is written anew.
    single
        .reconfigure(slidelog::Quota::new(7, Duration::from_secs(10)).unwrap())
        .unwrap();
    for left in [4, 3] {
        let r = get_path(addr, "/", &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=7;w=10"));
        assert_eq!(
            r.header("ratelimit"),
            Some(format!("\"default\";r={left};t=10").as_str())
        );
    }
}

/// A `deny_with` hook sees the request's head and the key: it can log the
/// client and vary the answer by route.
#[tokio::test]
async fn deny_hooks_see_the_request_and_the_key() {
    let limiter = manual::<String>(1, 60);
    let layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")).deny_with(
        |d: &slidelog::tower::Denial<'_>| {
            let key = d.key::<String>().cloned().unwrap_or_default();
            let request = d.request.expect("the layer passes the request head");
            let body = format!(
                "{} {} by {key} ({} agent)",
                request.method,
                request.uri.path(),
                request.headers.get("user-agent").map_or("no", |_| "an")
            );
            let status = if request.uri.path().starts_with("/api") {
                http::StatusCode::TOO_MANY_REQUESTS
            } else {
                http::StatusCode::SERVICE_UNAVAILABLE
            };
            http::Response::builder()
                .status(status)
                .body(bytes::Bytes::from(body))
                .unwrap()
        },
    );
    let app = Router::new()
        .route("/api/x", get(|| async { "x" }))
        .route("/page", get(|| async { "page" }))
        .layer(layer);
    let addr = serve(app).await;
    let key = [("x-api-key", "alice"), ("user-agent", "test")];
    assert_eq!(get_path(addr, "/api/x", &key).await.status, 200);
    let r = get_path(addr, "/api/x", &key).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.body, "GET /api/x by alice (an agent)");
    assert_eq!(r.header("retry-after"), Some("60"));
    let r = get_path(addr, "/page", &[("x-api-key", "alice")]).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body, "GET /page by alice (no agent)");
}

/// A `deny_with` hook's own `Retry-After` and `RateLimit` fields are kept;
/// the layer adds only the ones the hook left out.
#[tokio::test]
async fn a_deny_hooks_own_fields_are_kept() {
    let limiter = manual::<String>(1, 60);
    let layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")).deny_with(
        |d: &slidelog::tower::Denial<'_>| {
            let own = d.key::<String>().is_some_and(|key| key == "own");
            let mut answer = http::Response::builder().status(429);
            if own {
                answer = answer
                    .header("retry-after", "3600")
                    .header("ratelimit", "\"mine\";r=0;t=3600");
            }
            answer.body(bytes::Bytes::from_static(b"later\n")).unwrap()
        },
    );
    let app = Router::new().route("/", get(|| async { "x" })).layer(layer);
    let addr = serve(app).await;
    for key in ["own", "plain"] {
        let key = [("x-api-key", key)];
        assert_eq!(get_path(addr, "/", &key).await.status, 200);
        let r = get_path(addr, "/", &key).await;
        assert_eq!((r.status, r.body.as_str()), (429, "later\n"));
        assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=1;w=60"));
        if key[0].1 == "own" {
            assert_eq!(r.header("retry-after"), Some("3600"));
            assert_eq!(r.header("ratelimit"), Some("\"mine\";r=0;t=3600"));
        } else {
            assert_eq!(r.header("retry-after"), Some("60"));
            assert_eq!(r.header("ratelimit"), Some("\"default\";r=0;t=60"));
        }
    }
}

/// The keyed limiter behind a backend that only answers through the
/// awaited future (no `check_now`), as an out-of-process store does.
struct Awaited(Arc<KeyedLimiter<IpAddr, ManualClock>>);

impl slidelog::tower::Backend<IpAddr> for Awaited {
    type Future = <KeyedLimiter<IpAddr, ManualClock> as slidelog::tower::Backend<IpAddr>>::Future;
    fn judge(&self, key: IpAddr, request: slidelog::Request) -> Self::Future {
        slidelog::tower::Backend::judge(&*self.0, key, request)
    }
    fn policy(&self) -> (u32, Duration) {
        slidelog::tower::Backend::<IpAddr>::policy(&*self.0)
    }
    fn policies(&self) -> Vec<slidelog::Policy> {
        slidelog::tower::Backend::<IpAddr>::policies(&*self.0)
    }
}

/// A verdict known inside `call` (in-process backends: the inner service
/// is called at once) and one awaited (the inner service cloned for later)
/// answer alike: statuses, every header, bodies, and the key a `deny_with`
/// hook is shown.
#[tokio::test]
async fn immediate_and_awaited_verdicts_answer_alike() {
    let hook = |denial: &slidelog::tower::Denial<'_>| {
        let key = denial.key::<IpAddr>().map(ToString::to_string);
        http::Response::builder()
            .status(429)
            .body(bytes::Bytes::from(format!("slow down, {key:?}")))
            .unwrap()
    };
    let (now, later) = (ManualClock::new(), ManualClock::new());
    let immediate =
        serve(Router::new().route("/", get(|| async { "hello" })).layer(
            RateLimitLayer::new(common::two_policy_limiter(&now), by_peer()).deny_with(hook),
        ))
        .await;
    let awaited = serve(
        Router::new().route("/", get(|| async { "hello" })).layer(
            RateLimitLayer::new(
                Arc::new(Awaited(common::two_policy_limiter(&later))),
                by_peer(),
            )
            .deny_with(hook),
        ),
    )
    .await;
    let mut statuses = Vec::new();
    for step in 0..8 {
        if step == 4 {
            now.advance(Duration::from_secs(1));
            later.advance(Duration::from_secs(1));
        }
        let (a, b) = (
            get_path(immediate, "/", &[]).await,
            get_path(awaited, "/", &[]).await,
        );
        assert_eq!(shown(&a), shown(&b), "step {step}");
        statuses.push(a.status);
    }
    assert_eq!(statuses, [200, 200, 429, 429, 200, 429, 429, 429]);
    let denied = get_path(immediate, "/", &[]).await;
    assert_eq!(denied.body, "slow down, Some(\"127.0.0.1\")");
}

/// A single-key `Limiter` as the backend: the IETF `t` of each admitted
/// response is the time until the oldest admission still in the window
/// leaves it (read with the count), as a keyed limiter's is.
#[tokio::test]
async fn single_limiter_backend_reports_t_until_the_oldest_live_admission() {
    let clock = ManualClock::new();
    let single =
        Arc::new(slidelog::Limiter::with_clock(3, Duration::from_secs(10), clock.clone()).unwrap());
    let keyed = Arc::new(
        KeyedLimiter::<(), ManualClock>::with_clock(3, Duration::from_secs(10), clock.clone())
            .unwrap(),
    );
    let single_addr = serve(Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::<_, _, ()>::new(Arc::clone(&single), slidelog::tower::GlobalKey),
    ))
    .await;
    let keyed_addr = serve(Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(Arc::clone(&keyed), slidelog::tower::GlobalKey),
    ))
    .await;
    // (seconds to advance first, remaining, t): admissions at 0, 4, 8, 11.
    for (advance, remaining, t) in [(0, 2, 10), (4, 1, 6), (4, 0, 2), (3, 0, 3)] {
        clock.advance(Duration::from_secs(advance));
        for addr in [single_addr, keyed_addr] {
            let r = get_path(addr, "/", &[]).await;
            assert_eq!(r.status, 200);
            assert_eq!(
                r.header("ratelimit"),
                Some(format!("\"default\";r={remaining};t={t}").as_str()),
                "after {advance} s more"
            );
        }
    }
}

/// A layer whose responses carry the inner body type (`inner_body`)
/// answers exactly as the default one: statuses, every header and every
/// body, for admissions, each deny style, a `deny_with` hook, a request
/// without a key and a verdict that is awaited; and an axum route's body
/// type is left as axum's own.
#[tokio::test]
async fn the_inner_body_mode_answers_as_the_wrapped_one() {
    use slidelog::tower::{Denial, MissingKey};
    use tower::Layer;

    // The inner-body service's response is axum's `Body`: nothing to box.
    fn answers_axum_bodies<S>(_: &S)
    where
        S: tower::Service<Request<Body>, Response = http::Response<Body>>,
    {
    }
    let plain = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(Body::from("hi")))
    });
    answers_axum_bodies(
        &RateLimitLayer::new(manual::<()>(1, 60), slidelog::tower::GlobalKey)
            .inner_body()
            .layer(plain),
    );

    let hook = |d: &Denial<'_>| {
        http::Response::builder()
            .status(418)
            .body(bytes::Bytes::from(format!("hook for {}", d.policy_name)))
            .unwrap()
    };
    // Keyed by a header (absent: no key) or awaited through a backend
    // without `check_now`.
    let by_header = |clock: &ManualClock, deny: DenyStyle, hooked: bool| {
        let layer = RateLimitLayer::new(
            manual_on::<String>(2, 60, clock),
            HeaderKey::new("x-api-key"),
        )
        .deny_style(deny)
        .on_missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED));
        if hooked { layer.deny_with(hook) } else { layer }
    };
    for (deny, hooked) in [
        (DenyStyle::Http, false),
        (DenyStyle::ProblemJson, false),
        (DenyStyle::Grpc, false),
        (DenyStyle::Http, true),
    ] {
        let (wrapped_clock, inner_clock) = (ManualClock::new(), ManualClock::new());
        let route = || Router::new().route("/", get(|| async { "hello" }));
        let wrapped = serve(route().layer(by_header(&wrapped_clock, deny, hooked))).await;
        let inner = serve(route().layer(by_header(&inner_clock, deny, hooked).inner_body())).await;
        let awaited_wrapped = serve(route().layer(RateLimitLayer::new(
            Arc::new(Awaited(common::two_policy_limiter(&wrapped_clock))),
            by_peer(),
        )))
        .await;
        let awaited_inner = serve(
            route().layer(
                RateLimitLayer::new(
                    Arc::new(Awaited(common::two_policy_limiter(&inner_clock))),
                    by_peer(),
                )
                .inner_body(),
            ),
        )
        .await;
        let mut statuses = Vec::new();
        for step in 0..5 {
            let key: &[(&str, &str)] = if step == 4 {
                &[]
            } else {
                &[("x-api-key", "k")]
            };
            let (a, b) = (
                get_path(wrapped, "/", key).await,
                get_path(inner, "/", key).await,
            );
            assert_eq!(
                shown(&a),
                shown(&b),
                "{deny:?} hooked {hooked}, step {step}"
            );
            let (a, b) = (
                get_path(awaited_wrapped, "/", &[]).await,
                get_path(awaited_inner, "/", &[]).await,
            );
            assert_eq!(shown(&a), shown(&b), "{deny:?} awaited, step {step}");
            statuses.push((a.status, b.body.is_empty()));
        }
        // Admitted twice, then denied by the per-second policy.
        assert_eq!(statuses[..3], [(200, false), (200, false), (429, false)]);
        let denied = get_path(inner, "/", &[("x-api-key", "k")]).await;
        match (deny, hooked) {
            (_, true) => assert_eq!(
                (denied.status, denied.body.as_str()),
                (418, "hook for default")
            ),
            (DenyStyle::Grpc, _) => assert_eq!(denied.header("grpc-status"), Some("8")),
            (DenyStyle::ProblemJson, _) => assert!(denied.body.contains("quota-exceeded")),
            _ => assert_eq!(denied.status, 429),
        }
        if deny != DenyStyle::Grpc {
            assert_eq!(get_path(inner, "/", &[]).await.status, 401);
        }
    }
}

/// A keyed limiter of `limit` per `secs` seconds on `clock`.
fn manual_on<K: std::hash::Hash + Eq + slidelog::KeySize>(
    limit: u32,
    secs: u64,
    clock: &ManualClock,
) -> Arc<KeyedLimiter<K, ManualClock>> {
    Arc::new(KeyedLimiter::with_clock(limit, Duration::from_secs(secs), clock.clone()).unwrap())
}

/// A reply as two layers are compared: its status, its headers but the
/// date, sorted, and its body.
fn shown(r: &Reply) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .cloned()
        .collect();
    headers.sort();
    (r.status, headers, r.body.clone())
}

/// The layer wrapped around the whole router (the module docs' "one limit
/// for a whole app"): `axum::serve` takes it as it is with `inner_body`,
/// `PeerIp` reads the peer from `ConnectInfo`, and one key's quota covers
/// every path, unmatched ones included; the handler runs only for
/// admitted requests.
#[tokio::test]
async fn the_layer_wrapped_around_the_router_limits_every_path() {
    use axum::ServiceExt;
    use tower::Layer;

    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = Router::new().route(
        "/a",
        get(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { "a" }
        }),
    );
    let limited = RateLimitLayer::new(manual::<IpAddr>(3, 60), PeerIp::new())
        .inner_body()
        .layer(app.with_state(()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let service = ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
            SocketAddr,
        >(limited);
        axum::serve(listener, service).await.unwrap();
    });
    let statuses = [
        get_path(addr, "/a", &[]).await,
        get_path(addr, "/missing", &[]).await,
        get_path(addr, "/a", &[]).await,
        get_path(addr, "/a", &[]).await,
        get_path(addr, "/missing", &[]).await,
    ]
    .map(|r| (r.status, r.header("ratelimit").map(str::to_owned), r.body));
    let expected = [
        (200, Some("\"default\";r=2;t=60"), "a"),
        (404, Some("\"default\";r=1;t=60"), ""),
        (200, Some("\"default\";r=0;t=60"), "a"),
        (429, Some("\"default\";r=0;t=60"), "Too Many Requests"),
        (429, Some("\"default\";r=0;t=60"), "Too Many Requests"),
    ];
    for (i, ((status, ratelimit, body), want)) in statuses.iter().zip(expected).enumerate() {
        assert_eq!(*status, want.0, "request {i}");
        assert_eq!(ratelimit.as_deref(), want.1, "request {i}");
        if want.0 != 429 {
            assert_eq!(body, want.2, "request {i}");
        }
    }
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the handler ran for the two admitted requests to /a only"
    );
}
