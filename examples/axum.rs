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
use axum::routing::get;
use slidelog::KeyedLimiter;
use slidelog::tower::{PeerIp, RateLimitLayer};

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
    // (forwarding headers are not trusted unless asked: clients could spoof
    // them; behind a proxy, see `PeerIp::trust_forwarded`).
    let app = Router::new()
        .route("/", get(|| async { "hello from a rate-limited server\n" }))
        // `inner_body`: responses keep axum's own body type (denials are
        // built as one), so axum does not box every response body again.
        .layer(RateLimitLayer::new(limiter, PeerIp::new()).inner_body());

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
