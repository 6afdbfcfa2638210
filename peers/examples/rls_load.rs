//! A load run for `slidelog serve`: concurrent calls of `ShouldRateLimit`
//! with one descriptor each, for a fixed time, over many distinct clients,
//! then calls per second and latency percentiles (the figures in
//! BENCHMARKS.md), with admitted, over-limit, failed and (from the
//! service's metrics, if given) store-full calls counted apart.
//!
//! ```sh
//! cargo run --release -- serve --config examples/envoy/ratelimit.yaml --grpc 127.0.0.1:8081 --metrics 127.0.0.1:9102 &
//! cargo run --release -p slidelog-peers --example rls_load -- http://127.0.0.1:8081 10s 16 200000 127.0.0.1:9102
//! ```
//! (pin the two to different cores with `taskset -c 0` / `taskset -c 1`).
//! Arguments: the service's URL, the run's length, the calls in flight,
//! the distinct clients (`remote_address` values; default 200,000), and the
//! service's `--metrics` address (optional).
//!
//! The traffic is shaped like an edge's: calls go round the clients, so
//! each of them calls now and then and is admitted, and one call in 16
//! comes from one of 16 hot clients, which exceed the example's 10 a
//! second and are answered over the limit.
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

#[path = "../../cli/src/cpu.rs"]
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

/// The request of client `client`: its own `remote_address`.
fn request(client: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".into(),
                value: format!(
                    "10.{}.{}.{}",
                    client >> 16,
                    (client >> 8) & 255,
                    client & 255
                ),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// The hot clients, which make one call in 16 and go over their limit.
const HOT_CLIENTS: u32 = 16;

/// The sum of the Prometheus series of `family` served at `addr`'s
/// `/metrics` (0 if none).
async fn metric(addr: &str, family: &str) -> Result<f64, Box<dyn std::error::Error>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
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
    let concurrency: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(16);
    if concurrency == 0 {
        return Err("the number of calls in flight must be at least 1".into());
    }
    let clients: u32 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200_000);
    if clients <= HOT_CLIENTS {
        return Err(format!("more than {HOT_CLIENTS} clients, please").into());
    }
    let metrics = args.next();
    let full_before = match &metrics {
        Some(addr) => metric(addr, "slidelog_rls_store_full_total").await?,
        None => 0.0,
    };
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
    // Every distinct body, encoded before the clock starts: the hot
    // clients' first, then the others'.
    let bodies: std::sync::Arc<Vec<Bytes>> =
        std::sync::Arc::new((0..clients).map(|c| grpc_frame(&request(c))).collect());
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let send = send.clone();
            let authority = authority.clone();
            let bodies = std::sync::Arc::clone(&bodies);
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let (mut over, mut failed) = (0u64, Vec::new());
                // Task `task` goes round the cold clients from its own
                // place; every 16th call is a hot client's.
                let cold = clients - HOT_CLIENTS;
                let mut next = (task as u64 * u64::from(cold) / concurrency as u64) as u32;
                let mut n = 0u32;
                while Instant::now() < deadline {
                    n = n.wrapping_add(1);
                    let client = if n.is_multiple_of(16) {
                        (n / 16) % HOT_CLIENTS
                    } else {
                        next = (next + 1) % cold;
                        HOT_CLIENTS + next
                    };
                    let body = bodies[client as usize].clone();
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
    let answered = latencies.len() as u64;
    let full = match &metrics {
        Some(addr) => {
            let after = metric(addr, "slidelog_rls_store_full_total").await?;
            format!("{:.0}", after - full_before)
        }
        None => "unknown (no metrics address given)".into(),
    };
    println!(
        "{url}: {answered} calls answered in {elapsed:.1} s = {:.0}/s ({concurrency} in flight, {clients} distinct clients): {} admitted, {over} over limit, {} failed; of them answered for a full store: {full}; latency p50 {:?} p99 {:?} max {:?}; client on {}",
        answered as f64 / elapsed,
        answered - over,
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
