//! A load run for `slidelog serve`: concurrent gRPC clients call
//! `ShouldRateLimit` with one descriptor for a fixed time, then print
//! calls per second and latency percentiles (the figures in BENCHMARKS.md).
//!
//! ```sh
//! cargo run --release --features serve -- serve --config examples/envoy/ratelimit.yaml --grpc 127.0.0.1:8081 &
//! cargo run --release --features serve --example rls_load -- http://127.0.0.1:8081 10s 32
//! ```
//! (pin the two to different cores with `taskset -c 0` / `taskset -c 1`).

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8081".into());
    let seconds: f64 = args
        .next()
        .map(|s| s.trim_end_matches('s').parse())
        .transpose()?
        .unwrap_or(10.0);
    let concurrency: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(32);
    let channel = tonic::transport::Channel::from_shared(url.clone())?
        .connect()
        .await?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|i| {
            let mut client = RateLimitServiceClient::new(channel.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut over = 0u64;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    n += 1;
                    // 256 client addresses: a mix of admissions and denials.
                    let request = RateLimitRequest {
                        domain: "edge".into(),
                        descriptors: vec![RateLimitDescriptor {
                            entries: vec![Entry {
                                key: "remote_address".into(),
                                value: format!("10.0.{}.{}", i % 256, n % 256),
                            }],
                            ..Default::default()
                        }],
                        hits_addend: 0,
                    };
                    let sent = Instant::now();
                    let reply = client.should_rate_limit(request).await;
                    latencies.push(sent.elapsed());
                    if reply.is_ok_and(|r| r.into_inner().overall_code == 2) {
                        over += 1;
                    }
                }
                (latencies, over)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut over = 0;
    for task in tasks {
        let (l, o) = task.await?;
        latencies.extend(l);
        over += o;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{url}: {} calls in {elapsed:.1} s = {:.0}/s ({concurrency} in flight, {over} over limit); latency p50 {:?} p99 {:?} max {:?}",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or_default()
    );
    Ok(())
}
