//! `slidelog serve` with many distinct clients, in process: every client's
//! first request is admitted (tens of thousands of them, on the
//! repository's own example configuration), each is limited exactly
//! afterwards, the service's memory stays within `--max-memory`, and a
//! full store answers new clients as `--when-full` says, saying so on
//! stderr once, not once a call.

mod common;

use std::path::Path;
use std::time::Duration;

use common::serve::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

/// Client `i`'s address: distinct for every `i` below 2^24.
fn address(i: u32) -> String {
    format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255)
}

/// One call for each client in `clients` (a `remote_address` descriptor of
/// domain `edge`), `tasks` calls in flight; the codes in client order.
async fn first_calls(
    client: &RateLimitServiceClient<Channel>,
    clients: std::ops::Range<u32>,
    tasks: u32,
) -> Vec<Code> {
    let mut handles = Vec::new();
    for task in 0..tasks {
        let mut client = client.clone();
        let clients = clients.clone();
        handles.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for i in clients.filter(|i| i % tasks == task) {
                let s = one(
                    &mut client,
                    "edge",
                    &[("remote_address", &address(i))],
                    None,
                )
                .await;
                codes.push((i, code(&s)));
            }
            codes
        }));
    }
    let mut codes = Vec::new();
    for handle in handles {
        codes.extend(handle.await.unwrap());
    }
    codes.sort_by_key(|&(i, _)| i);
    codes.into_iter().map(|(_, c)| c).collect()
}

/// The resident memory of process `pid`, in bytes (Linux).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib * 1024
}

/// The value of the Prometheus series whose line starts with `series`.
fn series(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The repository's example (10 a second per `remote_address`): 20,000
/// distinct clients each get their first request admitted, then each of
/// a sample is limited exactly (10 in a second, the 11th over), and the
/// service's resident memory stays far below its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_of_the_example_config_is_admitted_first() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/envoy/ratelimit.yaml");
    let metrics = free_port();
    let server = Server::start_with(&path, &["--metrics", &format!("127.0.0.1:{metrics}")]);
    let client = server.client().await;
    let clients = 20_000;
    let codes = first_calls(&client, 0..clients, 16).await;
    let refused: Vec<usize> = (0..codes.len()).filter(|&i| codes[i] != Code::Ok).collect();
    assert!(
        refused.is_empty(),
        "{} of {clients} first requests refused, the first of them client {:?}",
        refused.len(),
        refused.first()
    );
    // Exact per key afterwards: fresh clients, ten in a burst, then over.
    let mut c = client.clone();
    for i in (clients..clients + 20).map(address) {
        for n in 0..10 {
            let s = one(&mut c, "edge", &[("remote_address", &i)], None).await;
            assert_eq!(code(&s), Code::Ok, "call {n} of client {i}");
            assert_eq!(s.limit_remaining, 9 - n);
        }
        let s = one(&mut c, "edge", &[("remote_address", &i)], None).await;
        assert_eq!(code(&s), Code::OverLimit, "the 11th call of client {i}");
    }
    let text = scrape(metrics).await;
    let live = series(&text, "slidelog_keys_live{limiter=\"rls\"}").unwrap_or(0.0);
    assert!(live >= 1.0, "no live keys reported: {text}");
    let refused = series(&text, "slidelog_keys_refused_total{limiter=\"rls\"}").unwrap_or(0.0);
    assert_eq!(refused, 0.0, "keys refused at the budget");
    let resident = rss(server.child.id());
    assert!(
        resident < 256 << 20,
        "the service holds {} MiB for 20,020 clients",
        resident >> 20
    );
}

/// 10 a minute per client, so that no key is idle (and evictable) during
/// the test.
fn per_minute_config(name: &str) -> std::path::PathBuf {
    per_minute(name, 10)
}

/// Checks what a full store does for clients kept and not kept, and that
/// the service says it is full once, with its numbers, and stays healthy.
async fn limited_exactly_while_full(
    server: &Server,
    codes: &[Code],
    kept: usize,
    http_port: u16,
    deny: bool,
) {
    assert!(
        (50..1_000).contains(&kept),
        "{kept} clients fit in 64 KiB: the budget did not bound the store"
    );
    assert!(
        codes[..kept].iter().all(|&c| c == Code::Ok),
        "a client the store kept was refused"
    );
    let after = &codes[kept..];
    let want = if deny { Code::OverLimit } else { Code::Ok };
    assert!(
        after.iter().all(|&c| c == want),
        "clients past the budget: {:?} where every one should be {want:?}",
        after.iter().filter(|&&c| c != want).count()
    );
    let line = server.wait_for("the in-process store is full");
    assert!(line.contains("live keys take"), "{line}");
    assert!(line.contains("of --max-memory 64.0 KiB"), "{line}");
    assert!(line.contains(" so far"), "the first report: {line}");
    // Reported once, not once a client: nothing more within a second.
    std::thread::sleep(Duration::from_millis(300));
    let more: Vec<String> = server
        .log
        .try_iter()
        .filter(|l| l.contains("store is full"))
        .collect();
    assert!(
        more.is_empty(),
        "reported again within the minute: {more:?}"
    );
    // Clients kept are limited exactly: 10 a minute, one already taken.
    let mut c = server.client().await;
    for i in [0, kept as u32 / 2, kept as u32 - 1].map(address) {
        for n in 1..10 {
            let s = one(&mut c, "edge", &[("remote_address", &i)], None).await;
            assert_eq!(code(&s), Code::Ok, "call {n} of kept client {i}");
        }
        let s = one(&mut c, "edge", &[("remote_address", &i)], None).await;
        assert_eq!(code(&s), Code::OverLimit, "the 11th call of client {i}");
    }
    // A client the store could not keep: answered as configured each time,
    // nothing recorded for it.
    let late = address(999);
    for _ in 0..15 {
        let s = one(&mut c, "edge", &[("remote_address", &late)], None).await;
        assert_eq!(code(&s), want);
        if !deny {
            assert_eq!(s.limit_remaining, 9, "a client not kept was recorded");
        }
    }
    let (status, _) = http(http_port, "GET", "/healthcheck", "").await;
    assert_eq!(status, 200, "a full store is still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_admits_new_clients_unrecorded() {
    let (server, codes, kept, http_port) = filled("full-admit", "admit").await;
    limited_exactly_while_full(&server, &codes, kept, http_port, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_denies_new_clients_when_told() {
    let (server, codes, kept, http_port) = filled("full-deny", "deny").await;
    limited_exactly_while_full(&server, &codes, kept, http_port, true).await;
}

/// A service of 10 a minute per client in a 64 KiB store under
/// `--when-full action`, after the first call of 1,000 new clients, one at
/// a time (so that the store fills in client order): the codes of those
/// calls, how many clients the store kept (by
/// `slidelog_rls_store_full_total`, which counts each client met while
/// full), and the HTTP port.
async fn filled(name: &str, action: &str) -> (Server, Vec<Code>, usize, u16) {
    let http_port = free_port();
    let metrics = free_port();
    let server = Server::start_with(
        &per_minute_config(name),
        &[
            "--max-memory",
            "64KiB",
            "--when-full",
            action,
            "--http",
            &format!("127.0.0.1:{http_port}"),
            "--metrics",
            &format!("127.0.0.1:{metrics}"),
        ],
    );
    server.wait_for("within --max-memory 64.0 KiB");
    let client = server.client().await;
    let codes = first_calls(&client, 0..1_000, 1).await;
    let text = scrape(metrics).await;
    let full: f64 = text
        .lines()
        .filter(|l| l.starts_with("slidelog_rls_store_full_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (server, codes, 1_000 - full as usize, http_port)
}

/// A reload that takes a descriptor's limit away leaves its live keys no
/// larger than they were (they move to the smallest state, to be evicted):
/// the service's resident memory barely moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_taken_away_frees_rather_than_grows() {
    let dir = temp_dir("limit-away");
    let file = dir.join("config.yaml");
    let both = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";
    std::fs::write(&file, both).unwrap();
    let server = Server::start(&dir);
    let client = server.client().await;
    let codes = first_calls(&client, 0..2_000, 4).await;
    assert!(codes.iter().all(|&c| c == Code::Ok));
    let before = rss(server.child.id());
    std::fs::write(
        &file,
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    )
    .unwrap();
    server.wait_for("reloaded");
    let mut c = client.clone();
    // The descriptor is no longer limited.
    for _ in 0..20 {
        let s = one(&mut c, "edge", &[("remote_address", &address(0))], None).await;
        assert_eq!(code(&s), Code::Ok);
    }
    let after = rss(server.child.id());
    assert!(
        after < before + (32 << 20),
        "a reload that took a limit away grew the service from {} to {} MiB",
        before >> 20,
        after >> 20
    );
}
