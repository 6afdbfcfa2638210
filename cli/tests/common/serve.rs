//! The harness of `slidelog serve`'s end-to-end tests: the binary started
//! on loopback with a configuration, a tonic client of Envoy's own protos,
//! and small HTTP exchanges (metrics, health, JSON).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

/// A running `slidelog serve`, killed on drop; its stderr lines arrive on
/// `log`, except those that came before it said it serves, kept in `early`.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: mpsc::Receiver<String>,
    pub early: Mutex<VecDeque<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(config: &Path) -> Server {
        Server::start_with(config, &[])
    }

    pub fn start_with(config: &Path, extra: &[&str]) -> Server {
        let port = free_port();
        let grpc = format!("127.0.0.1:{port}");
        Server::spawn(config, &[&["--grpc", &grpc], extra].concat(), port)
    }

    /// `slidelog serve --config config` with `args` (saying where to serve
    /// gRPC: on `port`, or 0 for none), once it serves.
    pub fn spawn(config: &Path, args: &[&str], port: u16) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
        command
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(args);
        Server::run(command, port)
    }

    /// `command` (a `slidelog serve` serving gRPC on `port`), once it
    /// serves.
    pub fn run(mut command: Command, port: u16) -> Server {
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let server = Server {
            child,
            port,
            log,
            early: Mutex::new(VecDeque::new()),
        };
        // What a start says before "gRPC on" (tasks it starts first may
        // speak first) stays for the test to wait for.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match server.log.recv_timeout(left) {
                Ok(line) if line.contains("gRPC on") => return server,
                Ok(line) => server.early.lock().unwrap().push_back(line),
                Err(_) => panic!("slidelog serve did not say `gRPC on` within 10 s"),
            }
        }
    }

    /// Waits (up to 10 s) for a stderr line containing `needle`, passing
    /// over the lines before it.
    pub fn wait_for(&self, needle: &str) -> String {
        let mut early = self.early.lock().unwrap();
        while let Some(line) = early.pop_front() {
            if line.contains(needle) {
                return line;
            }
        }
        drop(early);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("no `{needle}` from slidelog serve within 10 s"),
            }
        }
    }

    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap()
    }
}

/// `config` written as `config.yaml` in a directory of its own, `name`.
pub fn config_file(name: &str, config: &str) -> PathBuf {
    let file = temp_dir(name).join("config.yaml");
    std::fs::write(&file, config).unwrap();
    file
}

/// A configuration (in a directory of its own, `name`) limiting domain
/// `edge`'s `remote_address` to `n` a minute.
pub fn per_minute(name: &str, n: u32) -> PathBuf {
    config_file(
        name,
        &format!(
            "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {{unit: minute, requests_per_unit: {n}}}\n"
        ),
    )
}

/// A service on `config` (written in a directory of its own, `name`),
/// and a client of it.
pub async fn serving(name: &str, config: &str) -> (Server, RateLimitServiceClient<Channel>) {
    let file = config_file(name, config);
    let server = Server::start(&file);
    let client = server.client().await;
    (server, client)
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("slidelog-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        hits_addend: hits.map(|value| envoy_types::pb::google::protobuf::UInt64Value { value }),
        ..Default::default()
    }
}

pub async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
) -> RateLimitResponse {
    try_ask(client, domain, descriptors).await.unwrap()
}

/// [`ask`], the call's failure returned.
pub async fn try_ask(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
) -> Result<RateLimitResponse, tonic::Status> {
    client
        .should_rate_limit(RateLimitRequest {
            domain: domain.into(),
            descriptors,
            hits_addend: 0,
        })
        .await
        .map(tonic::Response::into_inner)
}

/// One descriptor's status.
pub async fn one(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    entries: &[(&str, &str)],
    hits: Option<u64>,
) -> DescriptorStatus {
    let response = ask(client, domain, vec![descriptor(entries, hits)]).await;
    assert_eq!(response.statuses.len(), 1);
    response.statuses[0].clone()
}

pub fn code(status: &DescriptorStatus) -> Code {
    Code::try_from(status.code).unwrap()
}

/// Asks for one descriptor `n` times; each must be admitted.
pub async fn admits(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    entries: &[(&str, &str)],
    n: usize,
) {
    for i in 0..n {
        let s = one(client, domain, entries, None).await;
        assert_eq!(code(&s), Code::Ok, "call {i} of {n} for {entries:?}");
    }
}

/// A free port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The Prometheus text served on `port`'s `/metrics`.
pub async fn scrape(port: u16) -> String {
    http(port, "GET", "/metrics", "").await.1
}

/// One HTTP/1.1 exchange with `port`: the response's status and body.
pub async fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok());
    let (_, body) = text.split_once("\r\n\r\n").unwrap_or_default();
    (
        status.unwrap_or_else(|| panic!("no status in {text:?}")),
        body.to_string(),
    )
}
