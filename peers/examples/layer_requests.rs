//! Drives requests through an axum app in process, with no network: the
//! deterministic measure of what a rate-limit layer costs per request
//! (BENCHMARKS.md, "Over HTTP"). Count the instructions of `N` requests and
//! of none under callgrind; the difference over `N` is one request's:
//!
//! ```sh
//! cargo build --release -p slidelog-peers --features tower --example layer_requests
//! count() { # one run's instructions, quanta's clock calibration left out
//!   valgrind --tool=callgrind --callgrind-out-file=cg.out "$@" >/dev/null 2>&1
//!   total=$(callgrind_annotate cg.out | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
//!   calib=$(callgrind_annotate --inclusive=yes cg.out |
//!     awk '/OnceCell<T>::initialize \[/ {gsub(",", "", $1); print $1; exit}')
//!   echo $((total - ${calib:-0}))
//! }
//! echo $(( ($(count target/release/examples/layer_requests slidelog admit 200000) - $(count target/release/examples/layer_requests slidelog admit 0)) / 200000 ))
//! ```
//!
//! The calibration (the largest `OnceCell<T>::initialize`, quanta's
//! global clock) loops until the TSC reads steadily, so its count moves
//! from run to run by up to tens of instructions per call at this `N`;
//! left in, it reads as a change that is not there (BENCHMARKS.md, "Over
//! HTTP").
//!
//! Build it with `--features tower` alone for the figures in BENCHMARKS.md
//! (`metrics` adds the layer's counters to every request).
//!
//! Mounts: `plain` (no layer), `identity` (a layer that does nothing,
//! through `Router::layer`: what axum's wrapping of a route costs any
//! layer), `slidelog` and `tower_governor` (each with its
//! rate-limit headers, through `Router::layer`), `slidelog-outer` (the layer
//! around the whole router), `slidelog-policies` (three policies per key, one `RateLimit` item each),
//! `slidelog-bare` (`HeaderStyle::None`) and
//! `slidelog-inner` (`inner_body`: the route's body left as axum's own). Paths:
//! `admit` (a limit no run reaches) or `deny` (one request per hour). Both
//! layers key by the peer IP, which the request carries as axum's
//! `ConnectInfo`. Run without valgrind it prints the answers' statuses and
//! the time per request.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response};
use slidelog::KeyedLimiter;
use slidelog::tower::{HeaderStyle, PeerIp, RateLimitLayer};
use tower::Service;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

#[path = "common/args.rs"]
mod args;
#[path = "../../cli/src/cpu.rs"]
mod cpu;

const USAGE: &str = "usage: layer_requests <plain|identity|slidelog|slidelog-policies|slidelog-outer|slidelog-bare|slidelog-inner|tower_governor> <admit|deny> <requests>";

/// The slidelog layer's limiter: a limit no run reaches, or one per hour.
fn limiter(deny: bool) -> Arc<KeyedLimiter<IpAddr>> {
    let (limit, window) = if deny {
        (1, Duration::from_secs(3600))
    } else {
        (1 << 20, Duration::from_millis(1))
    };
    Arc::new(KeyedLimiter::new(limit, window).expect("a valid quota"))
}

/// Three policies per key, as the README's first example has: limits no
/// run reaches (the largest a million an hour), or one per hour (then two
/// a day and three a week).
fn three_policies(deny: bool) -> Arc<KeyedLimiter<IpAddr>> {
    let (limits, windows) = if deny {
        ([1, 2, 3], [3600, 86_400, 604_800].map(Duration::from_secs))
    } else {
        (
            [1 << 18, 1 << 19, 1 << 20],
            [1, 1_000, 3_600_000].map(Duration::from_millis),
        )
    };
    let builder = KeyedLimiter::builder(limits[0], windows[0])
        .and(limits[1], windows[1])
        .and(limits[2], windows[2]);
    Arc::new(builder.build().expect("valid quotas"))
}

/// Serves `requests` requests (plus two to warm up) from one client through
/// `app`, polling each response future to completion; returns how many
/// answers had each status (200, 429, other).
fn drive<S, B>(mut app: S, requests: u64) -> [u64; 3]
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let peer = SocketAddr::from(([10, 0, 0, 1], 4000));
    let mut cx = Context::from_waker(Waker::noop());
    let mut statuses = [0u64; 3];
    for _ in 0..requests + 2 {
        let mut request = Request::get("/")
            .body(Body::empty())
            .expect("a valid request");
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut answer = std::pin::pin!(app.call(request));
        let response = loop {
            if let Poll::Ready(response) = answer.as_mut().poll(&mut cx) {
                break response.expect("axum's services do not fail");
            }
        };
        let i = match response.status().as_u16() {
            200 => 0,
            429 => 1,
            _ => 2,
        };
        statuses[i] += 1;
        std::hint::black_box(&response);
    }
    statuses
}

fn main() {
    args::exit_on_error(run);
}

fn run() -> Result<(), String> {
    let (mount, deny, requests) = args::what_op_count(USAGE, ["admit", "deny"], "requests")?;
    let path = if deny { "deny" } else { "admit" };
    // The handler made a route once, as `axum::serve(listener, app)` does:
    // a router called as a service as built would make it again (and
    // re-apply a `Router::layer` layer) on every request.
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .with_state(());
    let start = Instant::now();
    let statuses = match mount.as_str() {
        "plain" => drive(router, requests),
        "identity" => drive(router.layer(tower::layer::util::Identity::new()), requests),
        "slidelog" => drive(
            router.layer(RateLimitLayer::new(limiter(deny), PeerIp::new())),
            requests,
        ),
        "slidelog-policies" => drive(
            router.layer(RateLimitLayer::new(three_policies(deny), PeerIp::new())),
            requests,
        ),
        "slidelog-bare" => drive(
            router.layer(
                RateLimitLayer::new(limiter(deny), PeerIp::new()).header_style(HeaderStyle::None),
            ),
            requests,
        ),
        "slidelog-inner" => drive(
            router.layer(RateLimitLayer::new(limiter(deny), PeerIp::new()).inner_body()),
            requests,
        ),
        "slidelog-outer" => drive(
            tower::Layer::layer(&RateLimitLayer::new(limiter(deny), PeerIp::new()), router),
            requests,
        ),
        "tower_governor" => {
            let mut builder = GovernorConfigBuilder::default();
            if deny {
                builder.per_second(3600).burst_size(1);
            } else {
                builder.per_nanosecond(1).burst_size(u32::MAX);
            }
            let config = builder.use_headers().finish().ok_or("a valid quota")?;
            drive(router.layer(GovernorLayer::new(config)), requests)
        }
        _ => return Err(USAGE.into()),
    };
    let per = start.elapsed().as_nanos() as f64 / (requests + 2) as f64;
    println!(
        "{mount} {path}: 200: {}, 429: {}, other: {}; {per:.0} ns per request on {}",
        statuses[0],
        statuses[1],
        statuses[2],
        cpu::cpu_model()
    );
    Ok(())
}
