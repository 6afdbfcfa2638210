//! Rate-limit metrics for Prometheus: the `metrics` feature's counters,
//! gauges and histograms through `metrics-exporter-prometheus`, on an axum
//! app limited by the tower layer (10 per second and 100 per minute per
//! client address), with `/metrics` served for scraping.
//!
//! ```sh
//! cargo run --example prometheus --features tower,metrics          # serves until Ctrl-C
//! curl -s localhost:9898/metrics | grep slidelog_                  # in another shell
//! cargo run --example prometheus --features tower,metrics -- --once # burst, scrape, exit
//! ```
//!
//! It binds `127.0.0.1:$PORT` (default 9898), sends itself a burst of 15
//! requests over HTTP (10 admitted, 5 denied), then serves `/` and
//! `/metrics`. With `--once` it scrapes itself, prints the scrape and
//! exits. Point Prometheus at `/metrics`: `slidelog_requests_total{limiter=
//! "api",decision="denied"} 5`, `slidelog_denials_total{limiter="api",
//! reason="rate_limited",policy="1s"} 5`, `slidelog_keys_live{limiter=
//! "clients"} 1`, each family with its `# HELP`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use slidelog::KeyedLimiter;
use slidelog::tower::{PeerIp, RateLimitLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The app: `/` limited per client address, `/metrics` (outside the limit)
/// rendering `handle`.
pub(crate) fn app(handle: PrometheusHandle) -> Result<Router, slidelog::ConfigError> {
    let limiter = Arc::new(
        KeyedLimiter::<IpAddr>::builder(10, Duration::from_secs(1))
            .and(100, Duration::from_secs(60))
            .name("clients")
            .build()?,
    );
    Ok(Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()).name("api"))
        // The scrape endpoint sits outside the limited routes.
        .route("/metrics", get(move || async move { handle.render() })))
}

/// Serves `app` on `listener` with peer addresses (for `PeerIp`).
pub(crate) async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}

/// `GET path` over a fresh connection: the status and the body.
pub(crate) async fn get_over_http(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

#[allow(dead_code)] // (the scrape test includes this file for `app`)
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let once = std::env::args().any(|a| a == "--once");
    // Install the recorder first: every series the crate touches lands here.
    let handle = PrometheusBuilder::new().install_recorder()?;
    let port = std::env::var("PORT").unwrap_or_else(|_| "9898".into());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}"))
        .await
        .map_err(|e| format!("127.0.0.1:{port}: {e} (set PORT to another port)"))?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener, app(handle)?));
    for _ in 0..15 {
        let (status, _) = get_over_http(addr, "/").await?;
        println!("GET / -> {status}");
    }
    if once {
        let (_, scrape) = get_over_http(addr, "/metrics").await?;
        println!("\n# GET /metrics\n{scrape}");
        return Ok(());
    }
    println!("\nscrape http://{addr}/metrics (Ctrl-C to stop)");
    server.await??;
    Ok(())
}
