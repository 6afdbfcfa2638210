//! A load run for `slidelog serve`: concurrent calls of `ShouldRateLimit`
//! with one descriptor each, for a fixed time, then calls per second and
//! latency percentiles (the figures in BENCHMARKS.md).
//!
//! ```sh
//! cargo run --release --features serve -- serve --config examples/envoy/ratelimit.yaml --grpc 127.0.0.1:8081 &
//! cargo run --release --features serve --example rls_load -- http://127.0.0.1:8081 10s 32
//! ```
//! (pin the two to different cores with `taskset -c 0` / `taskset -c 1`).
//!
//! The client is lean on purpose, so that it measures the server rather
//! than itself: one HTTP/2 connection (the `h2` crate directly, as Envoy
//! keeps one to its rate-limit cluster), every request body protobuf-encoded
//! once before the clock starts, one thread. Each reply is still decoded and
//! its `grpc-status` read: a failed call is counted, never timed as a success.

use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message;

#[path = "../src/bin/slidelog/cpu.rs"]
mod cpu;

const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// A gRPC message: the 5-byte frame header (uncompressed, length), then
/// the protobuf.
fn grpc_frame(message: &impl Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut framed = Vec::with_capacity(5 + body.len());
    framed.push(0);
    framed.extend_from_slice(&u32::try_from(body.len()).expect("small").to_be_bytes());
    framed.extend_from_slice(&body);
    framed.into()
}

/// The request for client `task`'s `n`th call: 256 client addresses per
/// task, so a mix of admissions and (mostly) denials.
fn request(task: usize, n: usize) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".into(),
                value: format!("10.0.{}.{}", task % 256, n % 256),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// What one call came to.
enum Outcome {
    Ok,
    OverLimit,
    Failed(String),
}

async fn call(
    mut send: h2::client::SendRequest<Bytes>,
    authority: &str,
    body: Bytes,
) -> Result<Outcome, h2::Error> {
    let request = http::Request::post(format!("http://{authority}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a valid request");
    send = send.ready().await?;
    let (response, mut stream) = send.send_request(request, false)?;
    stream.send_data(body, true)?;
    let response = response.await?;
    let (head, mut body) = response.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await?.unwrap_or_default();
    let status = trailers
        .get("grpc-status")
        .or_else(|| head.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("missing");
    if status != "0" {
        return Ok(Outcome::Failed(format!("grpc-status {status}")));
    }
    let Some(message) = data.get(5..) else {
        return Ok(Outcome::Failed("a reply without a message".into()));
    };
    Ok(match RateLimitResponse::decode(message) {
        Ok(r) if r.overall_code == Code::OverLimit as i32 => Outcome::OverLimit,
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Failed(format!("undecodable reply: {e}")),
    })
}

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
    if concurrency == 0 {
        return Err("the number of calls in flight must be at least 1".into());
    }
    let uri: http::Uri = url.parse()?;
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{url}: no host:port"))?
        .to_string();
    let tcp = tokio::net::TcpStream::connect(&authority).await?;
    tcp.set_nodelay(true)?;
    let (send, connection) = h2::client::handshake(tcp).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("rls_load: connection: {e}");
        }
    });
    // Every distinct body, encoded before the clock starts.
    let bodies: Vec<Vec<Bytes>> = (0..concurrency)
        .map(|task| (0..256).map(|n| grpc_frame(&request(task, n))).collect())
        .collect();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|bodies| {
            let send = send.clone();
            let authority = authority.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let (mut over, mut failed) = (0u64, Vec::new());
                let mut n = 0;
                while Instant::now() < deadline {
                    let body = bodies[n % bodies.len()].clone();
                    n += 1;
                    let sent = Instant::now();
                    let outcome = call(send.clone(), &authority, body).await;
                    let took = sent.elapsed();
                    match outcome {
                        Ok(Outcome::Ok) => latencies.push(took),
                        Ok(Outcome::OverLimit) => {
                            latencies.push(took);
                            over += 1;
                        }
                        Ok(Outcome::Failed(why)) => failed.push(why),
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (latencies, over, failed)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let (mut over, mut failed) = (0, Vec::new());
    for task in tasks {
        let (l, o, f) = task.await?;
        latencies.extend(l);
        over += o;
        failed.extend(f);
    }
    let elapsed = started.elapsed().as_secs_f64();
    if latencies.is_empty() {
        return Err(format!(
            "{url}: no call succeeded ({} failed; first: {})",
            failed.len(),
            failed.first().map_or("none", String::as_str)
        )
        .into());
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{url}: {} calls in {elapsed:.1} s = {:.0}/s ({concurrency} in flight, {over} over limit, {} failed); latency p50 {:?} p99 {:?} max {:?}; client on {}",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        failed.len(),
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or_default(),
        cpu::cpu_model()
    );
    if let Some(first) = failed.first() {
        eprintln!("rls_load: first failure: {first}");
    }
    Ok(())
}
