//! Running `slidelog serve` as an operator runs envoyproxy/ratelimit: its
//! environment variables, its `/healthcheck` and config-load counters,
//! listening addresses by host name, what the service says on stderr
//! (where it listens, a configuration still broken at SIGHUP, a Redis that
//! stops answering and comes back), a watcher that reloads only for the
//! configuration's own files, and `--version`.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::serve::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

const FIVE_A_MINUTE: &str = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";

/// The stderr lines that arrive within `wait`.
fn lines_within(server: &Server, wait: Duration) -> Vec<String> {
    let deadline = Instant::now() + wait;
    let mut lines = Vec::new();
    while let Ok(line) = server
        .log
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
    {
        lines.push(line);
    }
    lines
}

/// An upstream deployment's environment, and no flag: the configuration
/// from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, gRPC on GRPC_PORT, HTTP
/// on PORT, Prometheus on PROMETHEUS_ADDR under the family names
/// upstream's exporter gives, SHADOW_MODE; `/healthcheck` answers `OK`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_environment_configures_the_service() {
    let root = temp_dir("upstream-env");
    let config = root.join("ratelimit").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("edge.yaml"), FIVE_A_MINUTE).unwrap();
    let (grpc, http_port, metrics) = (free_port(), free_port(), free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .arg("serve")
        .env("RUNTIME_ROOT", &root)
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .env("RUNTIME_WATCH_ROOT", "false")
        .env("GRPC_PORT", grpc.to_string())
        .env("GRPC_HOST", "127.0.0.1")
        .env("HOST", "127.0.0.1")
        .env("PORT", http_port.to_string())
        .env("USE_PROMETHEUS", "true")
        .env("PROMETHEUS_ADDR", format!("127.0.0.1:{metrics}"))
        .env("SHADOW_MODE", "true")
        .env("LOG_LEVEL", "debug");
    let server = Server::run(command, grpc);
    let mut client = server.client().await;
    for _ in 0..5 {
        let s = one(&mut client, "edge", &[("remote_address", "10.0.0.1")], None).await;
        assert_eq!(code(&s), Code::Ok);
    }
    let r = ask(
        &mut client,
        "edge",
        vec![descriptor(&[("remote_address", "10.0.0.1")], None)],
    )
    .await;
    assert_eq!(
        (code(&r.statuses[0]), r.overall_code),
        (Code::OverLimit, Code::Ok as i32),
        "SHADOW_MODE answers OK overall"
    );
    assert_eq!(
        http(http_port, "GET", "/healthcheck", "").await,
        (200, "OK".to_string())
    );
    // Upstream's families beside ours: five admitted (the fifth near the
    // limit), one over (answered OK by the global shadow mode), by domain
    // and the descriptor's first level.
    let text = scrape(metrics).await;
    for series in [
        r#"slidelog_rls_hits_total{domain="edge",descriptor="remote_address"} 6"#,
        r#"ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address"} 6"#,
        r#"ratelimit_service_rate_limit_within_limit{domain="edge",key1="remote_address"} 5"#,
        r#"ratelimit_service_rate_limit_near_limit{domain="edge",key1="remote_address"} 1"#,
        r#"ratelimit_service_rate_limit_over_limit{domain="edge",key1="remote_address"} 1"#,
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    // A flag wins over its variable.
    drop(server);
    let other = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--grpc", &format!("127.0.0.1:{other}")])
        .env("RUNTIME_ROOT", &root)
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .env("GRPC_PORT", grpc.to_string())
        .env("PORT", http_port.to_string());
    let server = Server::run(command, other);
    let mut client = server.client().await;
    let s = one(&mut client, "edge", &[("remote_address", "10.0.0.2")], None).await;
    assert_eq!(code(&s), Code::Ok);
    // What the service cannot do is refused at start, with the variable.
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .arg("serve")
        .env("RUNTIME_ROOT", &root)
        .env("BACKEND_TYPE", "memcache")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BACKEND_TYPE=memcache"));
}

/// Listening addresses by host name, each one said at start; config loads
/// (the one at start included) counted as upstream's exporter names them;
/// `--version`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_by_name_are_said_at_start() {
    let file = config_file("by-name", FIVE_A_MINUTE);
    let (grpc, http_port, metrics) = (free_port(), free_port(), free_port());
    let server = Server::spawn(
        &file,
        &[
            "--grpc",
            &format!("localhost:{grpc}"),
            "--http",
            &format!("localhost:{http_port}"),
            "--metrics",
            &format!("localhost:{metrics}"),
        ],
        grpc,
    );
    server.wait_for(&format!("metrics (GET /metrics) on 127.0.0.1:{metrics}"));
    server.wait_for(&format!(
        "/healthcheck, GET /rlconfig) on 127.0.0.1:{http_port}"
    ));
    let mut client = server.client().await;
    let s = one(&mut client, "edge", &[("remote_address", "10.0.0.1")], None).await;
    assert_eq!(code(&s), Code::Ok);
    std::fs::write(&file, FIVE_A_MINUTE.replace("5}", "6}")).unwrap();
    server.wait_for("reloaded");
    std::fs::write(&file, "domain: edge\ndescriptors: [").unwrap();
    server.wait_for("reload refused");
    let text = scrape(metrics).await;
    for series in [
        "ratelimit_service_config_load_success 2",
        "ratelimit_service_config_load_error 1",
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--version"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && version.contains(env!("CARGO_PKG_VERSION")),
        "{version}"
    );
}

/// The watcher reloads for the configuration's own file only: a log
/// written beside it (as when the service's stderr goes there) makes no
/// reload, a change to the file makes one; a SIGHUP that finds the file
/// still broken says so every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_follow_the_configuration_only() {
    let file = config_file("watcher", FIVE_A_MINUTE);
    let server = Server::start(&file);
    let log = file.with_file_name("serve.log");
    for i in 0..20 {
        std::fs::write(&log, format!("line {i}\n")).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let said = lines_within(&server, Duration::from_millis(600));
    assert!(
        !said.iter().any(|l| l.contains("reload")),
        "a log beside the file made a reload: {said:?}"
    );
    std::fs::write(&file, FIVE_A_MINUTE.replace("5}", "7}")).unwrap();
    let said = lines_within(&server, Duration::from_millis(800));
    assert_eq!(
        said.iter().filter(|l| l.contains("reloaded")).count(),
        1,
        "{said:?}"
    );
    std::fs::write(&file, "domain: edge\ndescriptors: [").unwrap();
    server.wait_for("reload refused");
    let pid = server.child.id().to_string();
    for _ in 0..2 {
        let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(sent.success());
        server.wait_for("reload refused");
    }
}

/// A Redis that stops answering after the start is said once on stderr,
/// whatever the calls that fail meanwhile, and said again when it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_is_said_once() {
    let Some((mut redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let file = config_file("redis-said", FIVE_A_MINUTE);
    let url = format!("redis://127.0.0.1:{port}/");
    let server = Server::start_with(&file, &["--redis", &url, "--redis-timeout", "100ms"]);
    let mut client = server.client().await;
    let s = one(&mut client, "edge", &[("remote_address", "10.0.0.1")], None).await;
    assert_eq!(code(&s), Code::Ok);
    common::redis_server::signal(&redis, "-STOP");
    for _ in 0..3 {
        let only = descriptor(&[("remote_address", "10.0.0.1")], None);
        let failed = try_ask(&mut client, "edge", vec![only]).await;
        assert_eq!(failed.unwrap_err().code(), tonic::Code::Unavailable);
    }
    common::redis_server::signal(&redis, "-CONT");
    let s = one(&mut client, "edge", &[("remote_address", "10.0.0.1")], None).await;
    assert_eq!(code(&s), Code::Ok);
    let said = lines_within(&server, Duration::from_millis(300));
    let early: Vec<String> = server.early.lock().unwrap().drain(..).collect();
    let said: Vec<&String> = early.iter().chain(&said).collect();
    let stopped = said
        .iter()
        .filter(|l| l.contains("Redis stopped answering"))
        .count();
    let again = said
        .iter()
        .filter(|l| l.contains("Redis answers calls again"))
        .count();
    let _ = redis.kill();
    let _ = redis.wait();
    assert_eq!((stopped, again), (1, 1), "{said:?}");
}
