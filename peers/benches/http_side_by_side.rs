//! HTTP side by side: plain axum, axum behind a layer that does nothing,
//! axum behind the slidelog layer, and axum behind tower_governor, each
//! rate limiter keyed by the peer IP with its rate-limit headers on, on the
//! path that admits everything and on the 429 path, each layer mounted
//! with `Router::layer` and around the whole router. The layer that does
//! nothing (`tower::layer::util::Identity`) is the floor any layer starts
//! from: what mounting one costs axum, before the layer does any work.
//!
//! The server runs on one core (a current-thread tokio runtime on a pinned
//! thread) and a load generator on the other: `CONNECTIONS` keep-alive
//! HTTP/1.1 connections, each sending its next request when the last
//! response is in, for `SECONDS` per round. Rounds alternate between the
//! contenders (the host is noisy: only ratios from interleaved rounds
//! compare) and the medians are reported with the CPU model.
//!
//! `cargo bench -p slidelog-peers --features tower --bench
//! http_side_by_side` (add `-- quick` for shorter rounds).

use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use slidelog::KeyedLimiter;
use slidelog::tower::{InnerBody, PeerIp, RateLimitLayer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

mod common;

use common::{cpu_model, median};

const CONNECTIONS: usize = 16;

/// Which server: plain, or behind one of the three layers.
#[derive(Clone, Copy, Debug)]
enum Contender {
    Plain,
    /// A layer that does nothing (`Identity`).
    Nothing,
    Slidelog,
    TowerGovernor,
}

/// A server on core 0; dropping it stops the server.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The app, its handler made a route once (`with_state(())`), as
/// `axum::serve(listener, app)` and `Router::into_make_service*` do: served
/// through `ServiceExt`'s make-service (the one every mount here shares), a
/// router left as built would turn its handler into a route again on every
/// request, and re-apply a `Router::layer` layer with it (axum's
/// `Router::with_state` docs, "A note about performance").
fn plain() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .with_state(())
}

/// slidelog's layer: admit everything (more than any round sends), or one
/// per hour; responses keep axum's body type (`inner_body`), as
/// tower_governor's do.
fn slidelog_layer(deny: bool) -> RateLimitLayer<KeyedLimiter<IpAddr>, PeerIp, IpAddr, InnerBody> {
    let (limit, window) = if deny {
        (1, Duration::from_secs(3600))
    } else {
        (1 << 20, Duration::from_millis(1))
    };
    let limiter = Arc::new(KeyedLimiter::<IpAddr>::new(limit, window).unwrap());
    RateLimitLayer::new(limiter, PeerIp::new()).inner_body()
}

/// tower_governor's layer with the same two quotas.
fn governor_layer<B>(
    deny: bool,
) -> GovernorLayer<
    tower_governor::key_extractor::PeerIpKeyExtractor,
    governor::middleware::StateInformationMiddleware,
    B,
> {
    let mut builder = GovernorConfigBuilder::default();
    if deny {
        builder.per_second(3600).burst_size(1);
    } else {
        builder.per_nanosecond(1).burst_size(u32::MAX);
    }
    GovernorLayer::new(builder.use_headers().finish().unwrap())
}

fn pin(core: usize) {
    if let Some(id) = core_affinity::get_core_ids().and_then(|ids| ids.get(core).copied()) {
        core_affinity::set_for_current(id);
    }
}

/// Serves `service` (the router, or a layer around it) with the peer's
/// address until `stopped`.
async fn run<S>(
    listener: tokio::net::TcpListener,
    service: S,
    stopped: impl Future<Output = ()> + Send + 'static,
) where
    S: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let service = axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
        SocketAddr,
    >(service);
    axum::serve(listener, service)
        .with_graceful_shutdown(stopped)
        .await
        .unwrap();
}

/// How a layer is mounted: `Router::layer` (axum boxes each route's
/// layered service and its future), or around the whole router as one
/// service (no per-route boxing; the way to put one limit on a whole app).
#[derive(Clone, Copy, Debug)]
enum Mount {
    RouterLayer,
    AroundRouter,
}

fn serve(contender: Contender, deny: bool, mount: Mount) -> Server {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        pin(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let stopped = async move {
                let _ = stopped.await;
            };
            // Around the router: each layer's service wraps the router
            // as it is (every contender's response is already axum's).
            use tower::Layer;
            use tower::layer::util::Identity;
            match (contender, mount) {
                (Contender::Plain, _) => run(listener, plain(), stopped).await,
                (Contender::Nothing, Mount::RouterLayer) => {
                    run(listener, plain().layer(Identity::new()), stopped).await
                }
                (Contender::Nothing, Mount::AroundRouter) => {
                    run(listener, Identity::new().layer(plain()), stopped).await
                }
                (Contender::Slidelog, Mount::RouterLayer) => {
                    run(listener, plain().layer(slidelog_layer(deny)), stopped).await
                }
                (Contender::Slidelog, Mount::AroundRouter) => {
                    run(listener, slidelog_layer(deny).layer(plain()), stopped).await
                }
                (Contender::TowerGovernor, Mount::RouterLayer) => {
                    run(listener, plain().layer(governor_layer(deny)), stopped).await
                }
                (Contender::TowerGovernor, Mount::AroundRouter) => {
                    run(listener, governor_layer(deny).layer(plain()), stopped).await
                }
            }
        });
    });
    Server {
        addr: addr_rx.recv().unwrap(),
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// One keep-alive connection sending requests until `until`; returns the
/// responses and how many had `status`.
async fn connection(addr: SocketAddr, until: Instant, status: &'static str) -> (u64, u64) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let (mut responses, mut matching) = (0, 0);
    let mut line = String::new();
    let mut body = Vec::new();
    while Instant::now() < until {
        write
            .write_all(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
            .await
            .unwrap();
        let mut length = 0;
        let mut first = true;
        loop {
            line.clear();
            if read.read_line(&mut line).await.unwrap() == 0 {
                return (responses, matching);
            }
            if first {
                matching += u64::from(line.split_whitespace().nth(1) == Some(status));
                first = false;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        body.resize(length, 0);
        read.read_exact(&mut body).await.unwrap();
        black_box(&body);
        responses += 1;
    }
    (responses, matching)
}

/// Requests per second against `server` for `seconds`, and the share of
/// responses with `status`.
fn load(addr: SocketAddr, seconds: f64, status: &'static str) -> (f64, f64) {
    std::thread::spawn(move || {
        pin(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let start = Instant::now();
            let until = start + Duration::from_secs_f64(seconds);
            let tasks: Vec<_> = (0..CONNECTIONS)
                .map(|_| tokio::spawn(connection(addr, until, status)))
                .collect();
            let (mut responses, mut matching) = (0, 0);
            for task in tasks {
                let (r, m) = task.await.unwrap();
                responses += r;
                matching += m;
            }
            let rate = responses as f64 / start.elapsed().as_secs_f64();
            (rate, matching as f64 / responses.max(1) as f64)
        })
    })
    .join()
    .unwrap()
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (rounds, seconds) = if quick { (3, 1.0) } else { (7, 3.0) };
    println!("CPU: {}", cpu_model());
    println!(
        "{CONNECTIONS} keep-alive connections, server on core 0, client on core 1, {rounds} alternating rounds of {seconds} s\n"
    );
    println!(
        "| path | plain axum req/s | nothing req/s | slidelog req/s | tower_governor req/s | nothing / plain | slidelog / plain | tower_governor / plain | slidelog / nothing | slidelog / tower_governor |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (path, deny, status, mount) in [
        ("admit all", false, "200", Mount::RouterLayer),
        ("429", true, "429", Mount::RouterLayer),
        (
            "admit all, around the router",
            false,
            "200",
            Mount::AroundRouter,
        ),
        ("429, around the router", true, "429", Mount::AroundRouter),
    ] {
        let contenders = [
            Contender::Plain,
            Contender::Nothing,
            Contender::Slidelog,
            Contender::TowerGovernor,
        ];
        let mut rates = vec![Vec::new(); contenders.len()];
        for _ in 0..rounds {
            for (i, &contender) in contenders.iter().enumerate() {
                let server = serve(contender, deny, mount);
                // Warm up (and, on the 429 path, use the one admission).
                let _ = load(server.addr, 0.2, status);
                let (rate, share) = load(server.addr, seconds, status);
                let expected = if matches!(contender, Contender::Plain | Contender::Nothing) {
                    "200"
                } else {
                    status
                };
                if expected == status {
                    assert!(
                        share > 0.99,
                        "{contender:?} on {path}: only {share:.3} answered {status}"
                    );
                }
                rates[i].push(rate);
            }
        }
        let [plain, nothing, ours, theirs]: [f64; 4] = rates
            .into_iter()
            .map(median)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        println!(
            "| {path} | {plain:.0} | {nothing:.0} | {ours:.0} | {theirs:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} |",
            nothing / plain,
            ours / plain,
            theirs / plain,
            ours / nothing,
            ours / theirs
        );
    }
}
