//! Envoy's rate-limit service mounted in a tonic server of your own: the
//! configuration in envoyproxy/ratelimit's YAML, the limits exact sliding
//! windows kept in process, the service beside your other gRPC services.
//!
//! ```text
//! cargo run --example serve_embedded --features serve
//! ```
//!
//! It serves on a free local port, asks three times for the same client
//! (two a minute allowed), prints the answers, and stops. Point Envoy's
//! `envoy.filters.http.ratelimit` at such a server to limit its traffic.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidelog::serve::{Config, Service, Settings};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `Config::load(path, false)` reads a file or a directory instead.
    let config = Config::from_yaml(CONFIG)?;
    let service = Service::builder(config)
        .settings(Settings {
            max_memory: 64 << 20,
            ..Settings::default()
        })
        .build()?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.into_server())
            // .add_service(your_other_service)
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                async {
                    let _ = stopped.await;
                },
            ),
    );
    println!("rate-limit service on {addr}");

    let mut client = RateLimitServiceClient::connect(format!("http://{addr}")).await?;
    let request = RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".into(),
                value: "10.0.0.1".into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    };
    for call in 1..=3 {
        let answer = client
            .should_rate_limit(request.clone())
            .await?
            .into_inner();
        let code = Code::try_from(answer.overall_code).unwrap_or(Code::Unknown);
        let remaining = answer.statuses[0].limit_remaining;
        println!("call {call}: {code:?}, {remaining} remaining");
    }

    let _ = stop.send(());
    server.await??;
    Ok(())
}
