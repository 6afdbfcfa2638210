//! A tonic gRPC server behind the rate-limit layer: 3 calls per 10 seconds
//! per API key (the `x-api-key` metadata), denials answered the gRPC way
//! (`RESOURCE_EXHAUSTED`, with `retry-after` and the `ratelimit` headers as
//! metadata).
//!
//! ```sh
//! cargo run --example grpc --features tower            # serves 127.0.0.1:$PORT (default 50051)
//! cargo run --example grpc --features tower -- client  # five calls as "alice"
//! ```

use std::sync::Arc;
use std::time::Duration;

use slidelog::KeyedLimiter;
use slidelog::tower::{DenyStyle, HeaderKey, RateLimitLayer};

#[path = "grpc/greeter.rs"]
mod greeter;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::var("PORT").unwrap_or_else(|_| "50051".into());
    let addr = format!("127.0.0.1:{port}");
    if std::env::args().nth(1).as_deref() == Some("client") {
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))?
            .connect()
            .await?;
        for i in 1..=5 {
            match greeter::say_hello(channel.clone(), "alice", "alice").await {
                Ok(reply) => println!("call {i}: {}", reply.into_inner().message),
                Err(status) => println!(
                    "call {i}: {:?} {} (retry-after: {:?})",
                    status.code(),
                    status.message(),
                    status.metadata().get("retry-after")
                ),
            }
        }
        return Ok(());
    }
    let limiter = Arc::new(KeyedLimiter::<String>::new(3, Duration::from_secs(10))?);
    let layer =
        RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")).deny_style(DenyStyle::Grpc);
    println!("gRPC on {addr}: 3 calls per 10 s per x-api-key");
    tonic::transport::Server::builder()
        .layer(layer)
        .add_service(greeter::Greeter)
        .serve(addr.parse()?)
        .await?;
    Ok(())
}
