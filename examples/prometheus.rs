//! Rate-limit metrics for Prometheus: the `metrics` feature's counters and
//! gauges through `metrics-exporter-prometheus`, on an axum app limited by
//! the tower layer (10 per second and 100 per minute per client address).
//!
//! ```sh
//! cargo run --example prometheus --features tower,metrics
//! ```
//!
//! It sends a burst of requests through the app, then prints what a
//! Prometheus scrape of `/metrics` would read, e.g.
//! `slidelog_requests_total{decision="denied",reason="rate_limited",policy="1s"} 5`.
//! In a real server, serve `handle.render()` on the `/metrics` route as
//! below and point Prometheus at it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::Request;
use metrics_exporter_prometheus::PrometheusBuilder;
use slidelog::KeyedLimiter;
use slidelog::tower::{PeerIp, RateLimitLayer};
use tower::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Install the recorder first: every counter the crate touches lands here.
    let handle = PrometheusBuilder::new().install_recorder()?;

    let limiter = Arc::new(
        KeyedLimiter::<IpAddr>::builder(10, Duration::from_secs(1))
            .and(100, Duration::from_secs(60))
            .build()?,
    );
    let metrics = handle.clone();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(Arc::clone(&limiter), PeerIp::new()))
        // The scrape endpoint sits outside the limited routes.
        .route("/metrics", get(move || async move { metrics.render() }));

    let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)), 40_000);
    for _ in 0..15 {
        let mut request = Request::get("/").body(Body::empty())?;
        request.extensions_mut().insert(ConnectInfo(client));
        let response = app.clone().oneshot(request).await?;
        println!("GET / -> {}", response.status());
    }
    limiter.retain_recent(); // a sweep: the live-key gauge

    let scrape = app
        .oneshot(Request::get("/metrics").body(Body::empty())?)
        .await?;
    let body = axum::body::to_bytes(scrape.into_body(), 1 << 20).await?;
    println!("\n# GET /metrics\n{}", String::from_utf8_lossy(&body));
    Ok(())
}
