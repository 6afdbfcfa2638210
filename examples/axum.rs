//! A small axum server whose `/` is limited to 5 requests per 10 seconds per
//! client IP.
//!
//! ```sh
//! cargo run --example axum --features tower        # PORT=3000 by default
//! for i in $(seq 7); do curl -si localhost:3000/ | head -1; done
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::Request;
use slidelog::KeyedLimiter;
use slidelog::tower::{KeyFn, RateLimitLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::var("PORT") {
        Ok(p) => p
            .parse()
            .map_err(|_| format!("PORT={p} is not a port number"))?,
        Err(_) => 3000,
    };
    let limiter = Arc::new(KeyedLimiter::<IpAddr>::new(5, Duration::from_secs(10))?);
    // The peer address that axum records with `into_make_service_with_connect_info`
    // (forwarding headers are not trusted: clients could spoof them).
    let by_ip = KeyFn::new(|req: &Request<Body>| {
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
    });
    let app = Router::new()
        .route("/", get(|| async { "hello from a rate-limited server\n" }))
        .layer(RateLimitLayer::new(limiter, by_ip));

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "listening on http://{}/ (5 requests per 10 s per IP)",
        listener.local_addr()?
    );
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
