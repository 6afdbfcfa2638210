//! `slidelog serve` end to end: the binary serving Envoy's rate-limit API on
//! loopback, asked by a real tonic client (Envoy's own protos): exact
//! sliding windows at the edge where a fixed window would admit twice,
//! nested and wildcard descriptors, several limits on one descriptor,
//! `hits_addend`, shadow mode, unlimited and unknown descriptors, malformed
//! requests, health, reloads that keep the history (an invalid one
//! refused), and replicas sharing a real redis-server or a real 3-master
//! Redis Cluster staying exact together.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::serve::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: tier
    value: gold
    rate_limits:
      - {unit: second, requests_per_unit: 5}
      - {window: 60s, requests_per_unit: 6, name: per-minute}
  - key: path
    value: /health
    rate_limit: {unlimited: true}
  - key: user
    descriptors:
      - key: action
        value: login
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
"#;

/// Sleeps until the wall clock is `at` seconds into a second.
fn until_fraction(at: f64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = f64::from(now.subsec_nanos()) / 1e9;
    let wait = if into < at {
        at - into
    } else {
        1.0 - into + at
    };
    std::thread::sleep(Duration::from_secs_f64(wait));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_windows_and_envoy_semantics_over_grpc() {
    let dir = temp_dir("semantics");
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let server = Server::start(&dir);
    let mut client = server.client().await;
    let ip = |a: &'static str| [("remote_address", a)];

    // Exact at the edge: three late in one second; just after the next
    // whole second a fixed-window service would start counting afresh and
    // admit three more. The sliding window holds them until a full second
    // after the first three.
    until_fraction(0.75);
    let first = Instant::now();
    for left in [2, 1, 0] {
        let s = one(&mut client, "edge", &ip("10.0.0.1"), None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, left));
        let limit = s.current_limit.unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (3, 1)); // SECOND
        // Room grows when the first of the three leaves: a second after
        // it (exactly a second for the first, read with its own time).
        let reset = s.duration_until_reset.unwrap();
        let reset = Duration::new(reset.seconds as u64, reset.nanos as u32);
        assert!(
            reset > Duration::ZERO && reset <= Duration::from_secs(1),
            "{reset:?}"
        );
        if left == 2 {
            assert_eq!(reset, Duration::from_secs(1));
        }
    }
    until_fraction(0.05); // past the boundary a fixed window resets at
    assert!(first.elapsed() < Duration::from_millis(900));
    let s = one(&mut client, "edge", &ip("10.0.0.1"), None).await;
    assert_eq!(code(&s), Code::OverLimit, "a fixed window would admit here");
    let reset = s.duration_until_reset.unwrap();
    assert!(reset.seconds == 0 && reset.nanos > 0, "{reset:?}");
    // Each address has its own limit (a key without a value).
    let s = one(&mut client, "edge", &ip("10.0.0.2"), None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 2));
    // A second after the first three, room again.
    tokio::time::sleep(
        Duration::from_secs(1).saturating_sub(first.elapsed()) + Duration::from_millis(50),
    )
    .await;
    let s = one(&mut client, "edge", &ip("10.0.0.1"), None).await;
    assert_eq!(code(&s), Code::Ok);

    // Several limits on one descriptor, all or nothing on one ring.
    let gold = [("tier", "gold")];
    admits(&mut client, "edge", &gold, 5).await;
    let s = one(&mut client, "edge", &gold, None).await;
    assert_eq!(code(&s), Code::OverLimit);
    assert_eq!(s.current_limit.unwrap().requests_per_unit, 5);
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let s = one(&mut client, "edge", &gold, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 0));
    let s = one(&mut client, "edge", &gold, None).await;
    assert_eq!(code(&s), Code::OverLimit, "the minute's six are used");
    let limit = s.current_limit.unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (6, 0, "per-minute")
    );

    // Nested descriptors and hits_addend (a weighted check).
    let login = [("user", "ann"), ("action", "login")];
    let s = one(&mut client, "edge", &login, Some(2)).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 0));
    assert_eq!(
        code(&one(&mut client, "edge", &login, None).await),
        Code::OverLimit
    );
    // A weight past every limit (past u32::MAX too) is over and takes
    // nothing, where an error would let Envoy admit it.
    let bob = [("user", "bob"), ("action", "login")];
    for weight in [3, u64::MAX] {
        let s = one(&mut client, "edge", &bob, Some(weight)).await;
        assert_eq!(code(&s), Code::OverLimit, "weight {weight}");
    }
    let other_user = one(&mut client, "edge", &bob, None).await;
    assert_eq!(
        (code(&other_user), other_user.limit_remaining),
        (Code::Ok, 1)
    );
    // No rule for this path of the tree, an unknown domain, unlimited: OK.
    let s = one(
        &mut client,
        "edge",
        &[("user", "ann"), ("action", "logout")],
        None,
    )
    .await;
    assert_eq!((code(&s), s.current_limit), (Code::Ok, None));
    assert_eq!(
        code(&one(&mut client, "nowhere", &ip("10.0.0.1"), None).await),
        Code::Ok
    );
    admits(&mut client, "edge", &[("path", "/health")], 10).await;

    // Shadow mode: decided and counted, answered OK.
    let canary = [("canary", "x")];
    assert_eq!(
        code(&one(&mut client, "edge", &canary, None).await),
        Code::Ok
    );
    let s = one(&mut client, "edge", &canary, None).await;
    assert_eq!(
        (code(&s), s.limit_remaining),
        (Code::Ok, 0),
        "over, but in shadow mode"
    );

    // Overall OVER_LIMIT if any descriptor is over; each has its status.
    let both = ask(
        &mut client,
        "edge",
        vec![descriptor(&ip("10.0.0.9"), None), descriptor(&login, None)],
    )
    .await;
    assert_eq!(Code::try_from(both.overall_code).unwrap(), Code::OverLimit);
    assert_eq!(code(&both.statuses[0]), Code::Ok);
    assert_eq!(code(&both.statuses[1]), Code::OverLimit);

    // Malformed requests: INVALID_ARGUMENT.
    for bad in [
        RateLimitRequest {
            domain: String::new(),
            descriptors: vec![descriptor(&ip("1.1.1.1"), None)],
            hits_addend: 0,
        },
        RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![descriptor(&[], None)],
            hits_addend: 0,
        },
        RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![],
            hits_addend: 0,
        },
    ] {
        let status = client.should_rate_limit(bad).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    }

    // Health: SERVING.
    assert_eq!(health_of(server.port, "").await, Ok(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_keep_history_and_refuse_invalid_files() {
    let dir = temp_dir("reload");
    let file = dir.join("api.yaml");
    let config = |limit: u32| {
        format!(
            "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n"
        )
    };
    std::fs::write(&file, config(5)).unwrap();
    let server = Server::start(&file);
    let mut client = server.client().await;
    let me = [("client", "c1")];
    for left in [4, 3, 2, 1] {
        let s = one(&mut client, "api", &me, None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, left));
    }
    // Cut to 3 while four are in the window: denied at once, no free burst.
    std::fs::write(&file, config(3)).unwrap();
    server.wait_for("reloaded");
    let s = one(&mut client, "api", &me, None).await;
    assert_eq!(code(&s), Code::OverLimit);
    assert_eq!(s.current_limit.unwrap().requests_per_unit, 3);
    // An invalid file is refused with its line; the cut stays in force.
    std::fs::write(&file, "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: lightyear, requests_per_unit: 9}\n").unwrap();
    let refused = server.wait_for("reload refused");
    assert!(
        refused.contains("api.yaml") && refused.contains("line 4") && refused.contains("lightyear"),
        "{refused}"
    );
    assert_eq!(
        code(&one(&mut client, "api", &me, None).await),
        Code::OverLimit
    );
    // Raised to 10: all four still count (the cut kept each admission
    // still in the window).
    std::fs::write(&file, config(10)).unwrap();
    server.wait_for("reloaded");
    let s = one(&mut client, "api", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 5));

    // A missing or invalid file at start: a clear error, exit 2.
    for (path, needle) in [
        (dir.join("missing.yaml"), "missing.yaml"),
        (
            {
                let bad = dir.join("bad.yaml");
                std::fs::write(
                    &bad,
                    "domain: x\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n",
                )
                .unwrap();
                bad
            },
            "`unit`",
        ),
    ] {
        let (code, _, stderr) = serve_once(&path, &["--grpc", "127.0.0.1:0"]);
        assert_eq!(code, Some(2));
        assert!(stderr.contains(needle), "{stderr}");
    }
}

/// Reloads as files are really replaced: an editor writing a new file and
/// renaming it over the old one, and a Kubernetes ConfigMap volume, whose
/// file is a link through `..data`, a link to a timestamped directory that
/// an update swaps for another (a new link renamed over `..data`).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_follow_renames_and_configmap_swaps() {
    use std::os::unix::fs::symlink;
    let config = |limit: u32| {
        format!(
            "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n"
        )
    };
    let limit_now = |client: &mut RateLimitServiceClient<Channel>, who: &'static str| {
        let mut client = client.clone();
        async move {
            one(&mut client, "api", &[("client", who)], None)
                .await
                .current_limit
                .unwrap()
                .requests_per_unit
        }
    };

    // An editor's save: write beside, rename over.
    let dir = temp_dir("rename");
    let file = dir.join("api.yaml");
    std::fs::write(&file, config(5)).unwrap();
    let server = Server::start(&file);
    let mut client = server.client().await;
    assert_eq!(limit_now(&mut client, "a").await, 5);
    let swap = dir.join(".api.yaml.swp");
    std::fs::write(&swap, config(7)).unwrap();
    std::fs::rename(&swap, &file).unwrap();
    server.wait_for("reloaded");
    assert_eq!(limit_now(&mut client, "a").await, 7);
    drop(server);

    // A ConfigMap volume: dir/api.yaml -> ..data/api.yaml, ..data -> ..v1.
    let dir = temp_dir("configmap");
    let version = |name: &str, limit: u32| {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("api.yaml"), config(limit)).unwrap();
    };
    version("..v1", 3);
    symlink("..v1", dir.join("..data")).unwrap();
    symlink("..data/api.yaml", dir.join("api.yaml")).unwrap();
    // What editors leave beside a file being edited: a lock (a dangling
    // link) and a hidden copy of the same domain. Hidden files are not read.
    symlink("user@host.1234", dir.join(".#api.yaml")).unwrap();
    std::fs::write(dir.join(".api.yaml"), config(99)).unwrap();
    for config_path in [dir.join("api.yaml"), dir.clone()] {
        let server = Server::start(&config_path);
        let mut client = server.client().await;
        let now = limit_now(&mut client, "b").await;
        let next = now + 1;
        let name = format!("..v{next}");
        version(&name, next);
        symlink(&name, dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        server.wait_for("reloaded");
        assert_eq!(
            limit_now(&mut client, "b").await,
            next,
            "{}",
            config_path.display()
        );
    }
}

/// The example configuration in `examples/envoy/` loads and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_config_serves() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/envoy/ratelimit.yaml");
    let server = Server::start(&path);
    let mut client = server.client().await;
    admits(&mut client, "edge", &[("remote_address", "192.0.2.1")], 10).await;
    let s = one(
        &mut client,
        "edge",
        &[("remote_address", "192.0.2.1")],
        None,
    )
    .await;
    assert_eq!(code(&s), Code::OverLimit);
    let s = one(
        &mut client,
        "edge",
        &[("api_key", "k1"), ("path", "/api")],
        None,
    )
    .await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 99));
    let s = one(&mut client, "edge", &[("path", "/health")], None).await;
    assert_eq!(code(&s), Code::Ok);
}

/// `--metrics`: Prometheus series per domain and descriptor, scraped over
/// HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_per_domain_and_descriptor() {
    let dir = temp_dir("metrics");
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let metrics_port = free_port();
    let server = Server::start_with(&dir, &["--metrics", &format!("127.0.0.1:{metrics_port}")]);
    let mut client = server.client().await;
    for _ in 0..4 {
        let _ = one(
            &mut client,
            "edge",
            &[("remote_address", "198.51.100.1")],
            None,
        )
        .await;
    }
    let _ = one(&mut client, "edge", &[("canary", "x")], None).await;
    let _ = one(&mut client, "edge", &[("canary", "x")], None).await;
    let scrape = scrape(metrics_port).await;
    for series in [
        r#"slidelog_rls_hits_total{domain="edge",descriptor="remote_address"} 4"#,
        r#"slidelog_rls_over_limit_total{domain="edge",descriptor="remote_address"} 1"#,
        r#"slidelog_rls_near_limit_total{domain="edge",descriptor="remote_address"} 1"#,
        r#"slidelog_rls_shadow_mode_total{domain="edge",descriptor="canary"} 1"#,
        "# HELP slidelog_rls_request_seconds",
    ] {
        assert!(scrape.contains(series), "no {series} in\n{scrape}");
    }
    // At a ratio of 0.3, an admission using more than floor(0.9) = 0 of 3
    // is near: all three.
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let server = Server::start_with(&dir, &["--metrics", &metrics, "--near-limit-ratio", "0.3"]);
    let mut client = server.client().await;
    for _ in 0..4 {
        one(
            &mut client,
            "edge",
            &[("remote_address", "198.51.100.1")],
            None,
        )
        .await;
    }
    let series = r#"slidelog_rls_near_limit_total{domain="edge",descriptor="remote_address"} 3"#;
    let text = self::scrape(port).await;
    assert!(text.contains(series), "no {series} in\n{text}");
}

/// A descriptor carrying its own `limit` (what Envoy sends for a route's
/// `limit` override).
fn overridden(entries: &[(&str, &str)], requests_per_unit: u32, unit: i32) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(
            envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride {
                requests_per_unit,
                unit,
            },
        ),
        ..descriptor(entries, None)
    }
}

/// envoyproxy/ratelimit's own examples load unchanged and mean what its
/// README says: a zero limit blocks (example 3), a value ending in `*`
/// matches by prefix, after an exact value and before no value (example
/// 9; each value its own log), an unlimited descriptor reports
/// `u32::MAX` remaining (example 5), and `replaces` drops the named limit
/// when both match one request (example 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_examples_mean_what_upstream_says() {
    const UPSTREAM: &str = r#"
domain: upstream
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /api/special
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ldap
    rate_limit: {unlimited: true}
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: minute
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: minute
"#;
    const SECOND: i32 = 1;
    let (_server, mut client) = serving("upstream", UPSTREAM).await;
    let d = "upstream";
    // Example 3: blocked, whatever the other addresses get.
    for _ in 0..3 {
        let s = one(&mut client, d, &[("remote_address", "50.0.0.5")], None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::OverLimit, 0));
        let limit = s.current_limit.unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (0, SECOND));
        assert_eq!(s.duration_until_reset.unwrap().seconds, 1);
    }
    let s = one(&mut client, d, &[("remote_address", "50.0.0.6")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 9));
    // Example 9: the wildcard, between the exact value and no value.
    let path = |p: &'static str| [("path", p)];
    for (value, left) in [("/api/a", 1), ("/api/a", 0), ("/api/b", 1)] {
        let s = one(&mut client, d, &path(value), None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, left), "{value}");
    }
    let s = one(&mut client, d, &path("/api/a"), None).await;
    assert_eq!(code(&s), Code::OverLimit);
    let s = one(&mut client, d, &path("/api/special"), None).await;
    assert_eq!(s.limit_remaining, 4, "the exact value first");
    let s = one(&mut client, d, &path("/apiary"), None).await;
    assert_eq!(s.limit_remaining, 2, "no match by prefix: the key alone");
    // Example 5.
    let s = one(&mut client, d, &[("ldap", "x")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, u32::MAX));
    // Example 7: both match, so `specific_limit` is replaced (not checked,
    // not counted); alone, it applies.
    let first = [("key_1", "value_1"), ("user", "bkthomps")];
    let second = [("key_2", "value_2"), ("user", "bkthomps")];
    let r = ask(
        &mut client,
        d,
        vec![descriptor(&first, None), descriptor(&second, None)],
    )
    .await;
    assert_eq!(
        (code(&r.statuses[0]), r.statuses[0].current_limit.as_ref()),
        (Code::Ok, None)
    );
    assert_eq!(r.statuses[1].limit_remaining, 9);
    let s = one(&mut client, d, &first, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 4));
}

/// A refill (`is_negative_hits`) is answered `OK` with the room left and
/// records nothing: it neither takes room (as an ordinary hit would) nor
/// gives any back (an exact log keeps each admission for its window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refills_and_looks_are_answered_and_change_nothing() {
    let (_server, mut client) = serving("refills", CONFIG).await;
    let me = [("user", "u1"), ("action", "login")]; // 2 a minute
    let refill = |hits: u64| RateLimitDescriptor {
        is_negative_hits: true,
        ..descriptor(&me, Some(hits))
    };
    let s = one(&mut client, "edge", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 1));
    for (hits, left) in [(1, 1), (5, 1)] {
        let r = ask(&mut client, "edge", vec![refill(hits)]).await;
        let s = &r.statuses[0];
        assert_eq!(
            (code(s), s.limit_remaining),
            (Code::Ok, left),
            "refill {hits}"
        );
        assert_eq!(s.current_limit.as_ref().unwrap().requests_per_unit, 2);
    }
    // A descriptor's own `hits_addend` of 0 is a look too (upstream's
    // check without an increment); the request's 0 is its default, 1.
    for _ in 0..2 {
        let s = one(&mut client, "edge", &me, Some(0)).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 1), "a look");
    }
    let s = one(&mut client, "edge", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 0));
    let s = one(&mut client, "edge", &me, Some(0)).await;
    assert_eq!(
        (code(&s), s.limit_remaining),
        (Code::Ok, 0),
        "a look at a full log"
    );
    // Full: a refill is still OK, and gives nothing back.
    let r = ask(&mut client, "edge", vec![refill(1)]).await;
    assert_eq!(
        (code(&r.statuses[0]), r.overall_code),
        (Code::Ok, Code::Ok as i32)
    );
    assert_eq!(
        code(&one(&mut client, "edge", &me, None).await),
        Code::OverLimit
    );
}

/// envoyproxy/ratelimit's newer fields, as its README's examples 9 and 11
/// and its service's code read them: `*` anywhere in a value,
/// `share_threshold` (every value of the wildcard in one log, also for a
/// limit below it), `quota_mode` (over only when all quota-mode
/// descriptors are; under `--all-or-nothing`, one over stops the others'
/// count, as a shadow-mode one does), and `value_to_metric` and
/// `metadata`, which load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_upstream_fields_mean_what_upstream_says() {
    const NEWER: &str = r#"
domain: newer
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    metadata: {team: storage, tags: [a, b]}
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
"#;
    let (_server, mut client) = serving("newer", NEWER).await;
    let d = "newer";
    // Example 11: five and five of one shared threshold, then the next
    // value is over; apart, each value has its own ten.
    for (value, left) in [("files/a.pdf", 5), ("files/b.csv", 0)] {
        let mut s = DescriptorStatus::default();
        for _ in 0..5 {
            s = one(&mut client, d, &[("files", value)], None).await;
            assert_eq!(code(&s), Code::Ok, "{value}");
        }
        assert_eq!(s.limit_remaining, left, "after five of {value}");
    }
    let s = one(&mut client, d, &[("files", "files/c.txt")], None).await;
    assert_eq!(code(&s), Code::OverLimit);
    let unshared = [("files_no_share", "files_no_share/a.pdf")];
    admits(&mut client, d, &unshared, 10).await;
    let a = one(&mut client, d, &unshared, None).await;
    let b = one(
        &mut client,
        d,
        &[("files_no_share", "files_no_share/b.csv")],
        None,
    )
    .await;
    assert_eq!(
        (code(&a), code(&b), b.limit_remaining),
        (Code::OverLimit, Code::Ok, 9)
    );
    // Example 9's middle wildcard: each matching value its own log.
    for value in ["/api/123/action", "/api/123/action", "/api/user-id/action"] {
        let s = one(&mut client, d, &[("path", value)], None).await;
        assert_eq!(code(&s), Code::Ok, "{value}");
    }
    let s = one(&mut client, d, &[("path", "/api/123/action")], None).await;
    assert_eq!(code(&s), Code::OverLimit);
    let s = one(&mut client, d, &[("path", "/api/123/other")], None).await;
    assert_eq!((code(&s), s.current_limit), (Code::Ok, None), "unmatched");
    // Shared at the wildcard's level, the limit one level down.
    for (route, method, want) in [
        ("api/v1", "GET", Code::Ok),
        ("api/v2", "GET", Code::Ok),
        ("api/v3", "GET", Code::Ok),
        ("api/v4", "GET", Code::OverLimit),
        ("api/v1", "POST", Code::Ok),
    ] {
        let s = one(
            &mut client,
            d,
            &[("route", route), ("method", method)],
            None,
        )
        .await;
        assert_eq!(code(&s), want, "{route} {method}");
    }
    // Quota mode: over only when every quota-mode descriptor is.
    let quota = |v: &str| descriptor(&[("quota", v)], None);
    let r = ask(&mut client, d, vec![quota("a")]).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    let r = ask(&mut client, d, vec![quota("a"), quota("b")]).await;
    assert_eq!(
        (code(&r.statuses[0]), code(&r.statuses[1]), r.overall_code),
        (Code::OverLimit, Code::Ok, Code::Ok as i32),
        "one quota of two over"
    );
    let r = ask(&mut client, d, vec![quota("a"), quota("b")]).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32, "both over");
    let plain = descriptor(&[("plain", "x")], None);
    let r = ask(&mut client, d, vec![quota("c"), plain.clone()]).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    let r = ask(&mut client, d, vec![quota("d"), plain]).await;
    assert_eq!(
        (code(&r.statuses[0]), r.overall_code),
        (Code::Ok, Code::OverLimit as i32),
        "a limit not in quota mode over"
    );
    // All or nothing (upstream's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT):
    // a descriptor that would be over stops every other's count, in quota
    // mode or shadow mode too; a request with none over counts them all.
    let file = config_file("newer-all", NEWER);
    let server = Server::start_with(&file, &["--all-or-nothing"]);
    let plain = |v: &str| descriptor(&[("plain", v)], None);
    let shadowed = |v: &str| descriptor(&[("shadowed", v)], None);
    let mut client = server.client().await;
    ask(&mut client, d, vec![quota("a")]).await;
    let r = ask(&mut client, d, vec![quota("a"), quota("b")]).await;
    assert_eq!(
        (code(&r.statuses[0]), code(&r.statuses[1]), r.overall_code),
        (Code::OverLimit, Code::Ok, Code::Ok as i32),
        "one quota of two over: the request is not over"
    );
    let s = one(&mut client, d, &[("quota", "b")], None).await;
    assert_eq!(code(&s), Code::Ok, "`b` was counted beside an over quota");
    let r = ask(&mut client, d, vec![quota("a"), plain("y")]).await;
    assert_eq!(
        (code(&r.statuses[1]), r.overall_code),
        (Code::Ok, Code::OverLimit as i32),
        "its one quota over"
    );
    let s = one(&mut client, d, &[("plain", "y")], None).await;
    assert_eq!(
        code(&s),
        Code::Ok,
        "`plain=y` was counted beside an over quota"
    );
    // A shadow-mode descriptor over: answered OK, and the others uncounted.
    ask(&mut client, d, vec![shadowed("s")]).await;
    let r = ask(&mut client, d, vec![shadowed("s"), plain("z")]).await;
    assert_eq!(r.overall_code, Code::Ok as i32, "shadow mode answers OK");
    let s = one(&mut client, d, &[("plain", "z")], None).await;
    assert_eq!(
        code(&s),
        Code::Ok,
        "`plain=z` was counted beside an over shadow"
    );
    // None over: every descriptor counted.
    let r = ask(&mut client, d, vec![quota("e"), plain("w")]).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    let r = ask(&mut client, d, vec![quota("e")]).await;
    assert_eq!(code(&r.statuses[0]), Code::OverLimit, "`e` was counted");
    let s = one(&mut client, d, &[("plain", "w")], None).await;
    assert_eq!(code(&s), Code::OverLimit, "`plain=w` was counted");
}

/// The global modes, as envoyproxy/ratelimit's `SHADOW_MODE` and
/// `QUOTA_MODE` settings: `--shadow-mode` answers every request OK overall
/// while each status still says over; `--quota-mode` makes every
/// descriptor (an unlimited one aside, an unmatched one included) a quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_shadow_and_quota_modes() {
    let file = config_file("global-modes", CONFIG);
    // Two a minute: each `me` fills its log.
    let me = |user: &str| descriptor(&[("user", user), ("action", "login")], Some(2));
    let metrics_port = free_port();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let shadow = Server::start_with(&file, &["--shadow-mode", "--metrics", &metrics]);
    let mut client = shadow.client().await;
    ask(&mut client, "edge", vec![me("10.1.0.1")]).await;
    let r = ask(&mut client, "edge", vec![me("10.1.0.1")]).await;
    assert_eq!(
        (code(&r.statuses[0]), r.overall_code),
        (Code::OverLimit, Code::Ok as i32)
    );
    let text = scrape(metrics_port).await;
    for series in [
        r#"slidelog_rls_global_shadow_mode_total{domain="edge"} 1"#,
        r#"slidelog_rls_over_limit_total{domain="edge",descriptor="user.action=login"} 1"#,
        "# HELP slidelog_rls_global_shadow_mode_total",
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    let quota = Server::start_with(&file, &["--quota-mode"]);
    let mut client = quota.client().await;
    let health = descriptor(&[("path", "/health")], None); // unlimited
    let unmatched = descriptor(&[("nobody", "x")], None);
    ask(&mut client, "edge", vec![me("10.1.0.2")]).await;
    let r = ask(&mut client, "edge", vec![me("10.1.0.2"), me("10.1.0.3")]).await;
    assert_eq!(
        (code(&r.statuses[0]), r.overall_code),
        (Code::OverLimit, Code::Ok as i32),
        "one quota of two over"
    );
    let r = ask(&mut client, "edge", vec![me("10.1.0.2"), unmatched.clone()]).await;
    assert_eq!(
        r.overall_code,
        Code::Ok as i32,
        "an unmatched one is a quota that fits"
    );
    let r = ask(&mut client, "edge", vec![me("10.1.0.2"), health]).await;
    assert_eq!(
        r.overall_code,
        Code::OverLimit as i32,
        "an unlimited one is no quota"
    );
    let r = ask(&mut client, "edge", vec![me("10.1.0.2"), me("10.1.0.3")]).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32, "both over");
}

/// `--response-headers` (envoyproxy/ratelimit's
/// `LIMIT_RESPONSE_HEADERS_ENABLED`): each answer with a limited descriptor
/// carries `RateLimit-Limit`, `-Remaining` and `-Reset` for Envoy to add to
/// the client's response — of the descriptor closest to its limit, the
/// reset in whole seconds until the room grows, a look's too — under the
/// names given; none without the flag, and a bad name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_headers_tell_the_client_its_room() {
    let file = config_file("response-headers", CONFIG);
    let headers = |r: &RateLimitResponse| -> Vec<(String, String)> {
        let added = r.response_headers_to_add.iter();
        added.map(|h| (h.key.clone(), h.value.clone())).collect()
    };
    let told = |limit: u32, remaining: u32, reset: u64| {
        [
            ("RateLimit-Limit", limit.to_string()),
            ("RateLimit-Remaining", remaining.to_string()),
            ("RateLimit-Reset", reset.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    };
    let ip = |a: &str| descriptor(&[("remote_address", a)], None); // 3 a second
    let gold = descriptor(&[("tier", "gold")], None); // 5 a second, 6 a minute
    let server = Server::start_with(&file, &["--response-headers"]);
    let mut client = server.client().await;
    let r = ask(&mut client, "edge", vec![ip("10.9.0.1")]).await;
    assert_eq!(headers(&r), told(3, 2, 1));
    // The descriptor closest to its limit: the address (1 left), not the
    // tier (4 left of 5).
    let r = ask(&mut client, "edge", vec![gold.clone(), ip("10.9.0.1")]).await;
    assert_eq!(headers(&r), told(3, 1, 1));
    ask(&mut client, "edge", vec![ip("10.9.0.1")]).await;
    let r = ask(&mut client, "edge", vec![ip("10.9.0.1"), gold.clone()]).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(headers(&r), told(3, 0, 1), "the one over");
    // A look (hits 0) reports when the room grows too: within the minute.
    let login = [("user", "u9"), ("action", "login")]; // 2 a minute
    one(&mut client, "edge", &login, None).await;
    let r = ask(&mut client, "edge", vec![descriptor(&login, Some(0))]).await;
    let h = headers(&r);
    assert_eq!(h[..2], told(2, 1, 0)[..2], "{h:?}");
    let reset: u64 = h[2].1.parse().unwrap();
    assert!((1..=60).contains(&reset), "{h:?}");
    // Nothing limited, nothing told.
    let health = descriptor(&[("path", "/health")], None);
    let r = ask(&mut client, "edge", vec![health.clone()]).await;
    assert!(headers(&r).is_empty(), "{:?}", headers(&r));
    // Other names; and none without the flag.
    let named = Server::start_with(
        &file,
        &["--response-headers", "--limit-header", "X-RateLimit-Limit"],
    );
    let r = ask(&mut named.client().await, "edge", vec![ip("10.9.0.2")]).await;
    let mut expected = told(3, 2, 1);
    expected[0].0 = "X-RateLimit-Limit".into();
    assert_eq!(headers(&r), expected);
    let plain = Server::start(&file);
    let r = ask(&mut plain.client().await, "edge", vec![ip("10.9.0.3")]).await;
    assert!(headers(&r).is_empty(), "{:?}", headers(&r));
    for (flags, error) in [
        (
            &["--response-headers", "--reset-header", "Rate Reset"][..],
            "is not an HTTP header name",
        ),
        (&["--remaining-header", "X-Left"][..], "--response-headers"),
    ] {
        let (code, _, stderr) = serve_once(&file, &[&["--grpc", "127.0.0.1:1"], flags].concat());
        assert_eq!(code, Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(error), "{flags:?}: {stderr}");
    }
}

/// `--http`: `POST /json` is `ShouldRateLimit` in proto3's JSON, as
/// envoyproxy/ratelimit's HTTP port serves it (200 when not over, 429 when
/// over, 400 with the reason when malformed), beside `GET /healthcheck`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_over_http_answers_as_upstream() {
    let file = config_file("http-json", CONFIG);
    let port = free_port();
    let server = Server::start_with(&file, &["--http", &format!("127.0.0.1:{port}")]);
    let ask = |body: &'static str| http(port, "POST", "/json", body);
    let me = r#"{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.7.0.1"}]}]}"#;
    let parse = |body: &str| serde_json::from_str::<serde_json::Value>(body).unwrap();
    for left in [2, 1, 0] {
        let (status, body) = ask(me).await;
        assert_eq!(status, 200, "{body}");
        let r = parse(&body);
        assert_eq!(r["overallCode"], "OK", "{body}");
        let s = &r["statuses"][0];
        assert_eq!(
            s["currentLimit"],
            serde_json::json!({"requestsPerUnit": 3, "unit": "SECOND"})
        );
        // A remaining of 0 is left out, as protobuf's JSON leaves defaults.
        let remaining = if left == 0 {
            serde_json::Value::Null
        } else {
            left.into()
        };
        assert_eq!(s["limitRemaining"], remaining, "{body}");
        assert!(
            s["durationUntilReset"].as_str().unwrap().ends_with('s'),
            "{body}"
        );
    }
    let (status, body) = ask(me).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(parse(&body)["statuses"][0]["code"], "OVER_LIMIT", "{body}");
    // proto names are read too; an unknown descriptor is OK.
    let (status, body) = ask(r#"{"domain": "edge", "hits_addend": 1, "descriptors": [{"entries": [{"key": "nobody"}]}]}"#).await;
    assert_eq!(
        (status, parse(&body)),
        (
            200,
            serde_json::json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})
        )
    );
    for (body, says) in [
        ("{", "not JSON"),
        (
            r#"{"domain": "edge", "descriptor": []}"#,
            "unknown field \"descriptor\"",
        ),
        (r#"{"domain": "edge", "descriptors": []}"#, "no descriptors"),
    ] {
        let (status, text) = ask(body).await;
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
    }
    assert_eq!(
        http(port, "GET", "/healthcheck", "").await,
        (200, "OK".to_string())
    );
    assert_eq!(http(port, "GET", "/json", "").await.0, 405);
    // The configuration in force, as `--check` prints it, after a reload.
    let (status, text) = http(port, "GET", "/rlconfig", "").await;
    assert_eq!(status, 200);
    assert!(
        text.starts_with("domain edge:\n") && text.contains("\n  remote_address: 3 per 1s\n"),
        "{text}"
    );
    std::fs::write(
        &file,
        CONFIG.replace("requests_per_unit: 3}", "requests_per_unit: 4}"),
    )
    .unwrap();
    server.wait_for("reloaded");
    let text = http(port, "GET", "/rlconfig", "").await.1;
    assert!(text.contains("\n  remote_address: 4 per 1s\n"), "{text}");
    drop(server);
}

type HealthClient = tonic_health::pb::health_client::HealthClient<Channel>;

/// A gRPC health client of the service on `port`, and the request for
/// `service`'s health.
async fn health_client(
    port: u16,
    service: &str,
) -> (HealthClient, tonic_health::pb::HealthCheckRequest) {
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let request = tonic_health::pb::HealthCheckRequest {
        service: service.into(),
    };
    (HealthClient::new(channel), request)
}

/// The health a gRPC health check reads for `service` on `port`
/// (1 SERVING, 2 NOT_SERVING), or the error code it gets.
async fn health_of(port: u16, service: &str) -> Result<i32, tonic::Code> {
    let (mut health, request) = health_client(port, service).await;
    match health.check(request).await {
        Ok(reply) => Ok(reply.into_inner().status),
        Err(status) => Err(status.code()),
    }
}

/// Health as envoyproxy/ratelimit tells it: under the server's name "",
/// the service's own and upstream's `ratelimit` (what checks written for
/// it ask), and on `GET /healthcheck`; not serving while Redis has not
/// been reached, serving once it is; not serving from SIGTERM on, while
/// calls in flight finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_told_as_upstream_tells_it() {
    const SERVING: Result<i32, tonic::Code> = Ok(1);
    const NOT_SERVING: Result<i32, tonic::Code> = Ok(2);
    let file = config_file("health", CONFIG);
    let http_port = free_port();
    let local = Server::start_with(&file, &["--http", &format!("127.0.0.1:{http_port}")]);
    for name in [
        "",
        "ratelimit",
        "envoy.service.ratelimit.v3.RateLimitService",
    ] {
        assert_eq!(health_of(local.port, name).await, SERVING, "{name:?}");
    }
    assert_eq!(
        health_of(local.port, "other").await,
        Err(tonic::Code::NotFound)
    );
    assert_eq!(http(http_port, "GET", "/healthcheck", "").await.0, 200);
    // A watcher sees SIGTERM as NOT_SERVING before the server stops.
    let (mut watcher, request) = health_client(local.port, "ratelimit").await;
    let mut updates = watcher.watch(request).await.unwrap().into_inner();
    assert_eq!(updates.message().await.unwrap().unwrap().status, 1);
    terminate(&local.child);
    let next = tokio::time::timeout(Duration::from_secs(10), updates.message());
    let update = next.await.expect("an update within 10 s");
    assert_eq!(update.unwrap().unwrap().status, 2);
    drop((updates, watcher));
    local.wait_for("stopped");

    // Redis not up yet: not serving, then serving once it answers.
    let Some((mut redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let _ = redis.kill();
    let _ = redis.wait();
    let http_port = free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let http_addr = format!("127.0.0.1:{http_port}");
    let server = Server::start_with(&file, &["--redis", &url, "--http", &http_addr]);
    server.wait_for("not serving until it answers");
    assert_eq!(health_of(server.port, "ratelimit").await, NOT_SERVING);
    assert_eq!(health_of(server.port, "").await, NOT_SERVING);
    assert_eq!(
        http(http_port, "GET", "/healthcheck", "").await,
        (500, String::new())
    );
    let mut redis = common::redis_server::restart_on(port);
    server.wait_for("redis reached; serving");
    assert_eq!(health_of(server.port, "ratelimit").await, SERVING);
    assert_eq!(http(http_port, "GET", "/healthcheck", "").await.0, 200);
    let mut client = server.client().await;
    let s = one(&mut client, "edge", &[("remote_address", "10.5.0.1")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 2));
    drop(server);
    let _ = redis.kill();
    let _ = redis.wait();
}

/// `--redis-health-check-active-connection` (upstream's
/// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`): health says not serving while a
/// Redis that was reached stalls or dies, and serving again once it
/// answers (a restarted one too); a stall that fails one ping only leaves
/// it serving. Beside it, on the same Redis at the same
/// moments, a service without the flag stays serving, as upstream's
/// default does; the flag without a Redis is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_redis_with_the_active_connection_check() {
    let file = per_minute("redis-health", 5);
    let (exit, _, err) = serve_once(
        &file,
        &[
            "--grpc",
            "127.0.0.1:0",
            "--redis-health-check-active-connection",
        ],
    );
    assert_eq!(exit, Some(2), "{err}");
    assert!(
        err.contains("--redis-health-check-active-connection") && err.contains("--redis"),
        "{err}"
    );

    let Some((redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let (checked_http, plain_http) = (free_port(), free_port());
    let checked = Server::start_with(
        &file,
        &[
            "--redis",
            &url,
            "--redis-timeout",
            "200ms",
            "--redis-health-check-active-connection",
            "--http",
            &format!("127.0.0.1:{checked_http}"),
        ],
    );
    let plain = Server::start_with(
        &file,
        &[
            "--redis",
            &url,
            "--http",
            &format!("127.0.0.1:{plain_http}"),
        ],
    );
    assert_eq!(healthcheck_becomes(checked_http, 200).await, 200);
    assert_eq!(healthcheck_becomes(plain_http, 200).await, 200);

    // One slow ping is not a Redis gone: health stays serving. A ping sent
    // during a stall of 1.3 s fails if the stall lasts its 200 ms timeout
    // out, so pings sent in its first 1.1 s: pings are 1 s apart while
    // they answer, 1.2 s once one has failed, so exactly one fails.
    // (The resume is timed on a thread of its own, so that a slow poll
    // cannot lengthen the stall.)
    signal(&redis, libc::SIGSTOP);
    let start = Instant::now();
    let pid = redis.id().to_string();
    let resume = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1_300));
        let sent = Command::new("kill").args(["-CONT", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -CONT {pid}");
    });
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_millis(3_000) {
        seen.push(http(checked_http, "GET", "/healthcheck", "").await.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    resume.join().unwrap();
    assert!(seen.iter().all(|&status| status == 200), "{seen:?}");

    signal(&redis, libc::SIGSTOP);
    let stalled = healthcheck_becomes(checked_http, 500).await;
    let grpc_stalled = health_of(checked.port, "ratelimit").await;
    let plain_stalled = http(plain_http, "GET", "/healthcheck", "").await.0;
    signal(&redis, libc::SIGCONT);
    assert_eq!(stalled, 500);
    assert_eq!(grpc_stalled, Ok(2));
    assert_eq!(plain_stalled, 200, "without the flag, health stays serving");
    let told = checked.wait_for("not serving until it answers");
    assert!(told.contains("within 200ms"), "{told}");
    assert_eq!(healthcheck_becomes(checked_http, 200).await, 200);
    checked.wait_for("redis answers again; serving");
    assert_eq!(health_of(checked.port, "ratelimit").await, Ok(1));

    // Killed, then started again on its port: the connection is made anew.
    let mut redis = redis;
    let _ = redis.kill();
    let _ = redis.wait();
    assert_eq!(healthcheck_becomes(checked_http, 500).await, 500);
    assert_eq!(http(plain_http, "GET", "/healthcheck", "").await.0, 200);
    let mut redis = common::redis_server::restart_on(port);
    assert_eq!(healthcheck_becomes(checked_http, 200).await, 200);
    let mut client = checked.client().await;
    let s = one(&mut client, "edge", &[("remote_address", "10.7.0.1")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 4));
    drop((checked, plain));
    let _ = redis.kill();
    let _ = redis.wait();
}

/// The `GET /healthcheck` status on `port` once it is `want`, or the last
/// one after 10 s.
async fn healthcheck_becomes(port: u16, want: u16) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = http(port, "GET", "/healthcheck", "").await.0;
        if status == want || Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Redis over TLS (`rediss://`), as envoyproxy/ratelimit's `REDIS_TLS_*`:
/// `--redis-ca` trusts a private CA and `--redis-client-cert` /
/// `--redis-client-key` answer a Redis that asks clients for a certificate
/// (without them it refuses the service, which says so and is not
/// serving). Flags that cannot work are refused at start: certificates for
/// a plain `redis://` URL, a file with no PEM of its kind, a certificate
/// without its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_with_a_client_certificate() {
    let pki = common::redis_tls::Pki::new("serve");
    let Some(redis) = common::redis_tls::TlsRedis::start(&pki, "server", true) else {
        return;
    };
    let file = per_minute("tls", 2);
    let path = |name: &str| pki.path(name).display().to_string();
    let url = redis.url();
    let trusting = ["--redis", &url, "--redis-ca", &path("ca.pem")];
    let anonymous = Server::start_with(&file, &trusting);
    let refused = anonymous.wait_for("not serving until it answers");
    assert!(
        refused.contains("redis: received fatal alert: CertificateRequired")
            && !refused.contains("redis: redis:"),
        "{refused}"
    );
    assert_eq!(health_of(anonymous.port, "ratelimit").await, Ok(2));
    drop(anonymous);
    let client_cert = ["--redis-client-cert", &path("client.pem")];
    let client_key = ["--redis-client-key", &path("client.key")];
    let server = Server::start_with(&file, &[&trusting[..], &client_cert, &client_key].concat());
    let mut client = server.client().await;
    let me = [("remote_address", "10.9.0.1")];
    for left in [1, 0] {
        let s = one(&mut client, "edge", &me, None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, left));
    }
    let s = one(&mut client, "edge", &me, None).await;
    assert_eq!(code(&s), Code::OverLimit);
    assert_eq!(health_of(server.port, "ratelimit").await, Ok(1));
    drop(server);

    let grpc = format!("127.0.0.1:{}", free_port());
    let plain = redis.plain_url();
    let server_key = path("server.key");
    let mismatched = [
        &trusting[..],
        &client_cert,
        &["--redis-client-key", &server_key],
    ]
    .concat();
    let refusals: [(&[&str], &str); 6] = [
        (
            &["--redis", &plain, "--redis-ca", &path("ca.pem")],
            "not redis://",
        ),
        (
            &["--redis", &url, "--redis-ca", &path("client.key")],
            "no PEM certificate",
        ),
        (
            &["--redis-ca", &path("ca.pem")],
            "need --redis or --redis-cluster",
        ),
        (
            &["--redis", &url, "--redis-client-cert", &path("client.pem")],
            "--redis-client-key",
        ),
        (
            &["--redis", &plain, "--redis-tls-skip-hostname-verification"],
            "not redis://",
        ),
        (&mismatched, "KeyMismatch"),
    ];
    for (args, reason) in refusals {
        let (code, _, stderr) = serve_once(&file, &[&["--grpc", grpc.as_str()], args].concat());
        assert!(code.is_some_and(|c| c != 0), "{args:?}: {code:?}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
    drop(redis);

    // A Redis whose certificate names another host: refused, unless
    // --redis-tls-skip-hostname-verification (the CA still checked).
    let Some(redis) = common::redis_tls::TlsRedis::start(&pki, "elsewhere", false) else {
        return;
    };
    let url = redis.url();
    let trusting = ["--redis", &url, "--redis-ca", &path("ca.pem")];
    let strict = Server::start_with(&file, &trusting);
    let refused = strict.wait_for("not serving until it answers");
    assert!(refused.contains("not valid for name"), "{refused}");
    drop(strict);
    let skip = ["--redis-tls-skip-hostname-verification"];
    let server = Server::start_with(&file, &[&trusting[..], &skip].concat());
    let s = one(&mut server.client().await, "edge", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 1));
}

/// A channel to `port` over TLS, trusting `pki`'s CA for `localhost`,
/// presenting `pki`'s client certificate if `identity`.
async fn tls_channel(
    port: u16,
    pki: &common::redis_tls::Pki,
    identity: bool,
) -> Result<Channel, tonic::transport::Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.read("ca.pem")))
        .domain_name("localhost");
    if identity {
        tls = tls.identity(Identity::from_pem(
            pki.read("client.pem"),
            pki.read("client.key"),
        ));
    }
    Channel::from_shared(format!("https://127.0.0.1:{port}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

/// gRPC over TLS, as envoyproxy/ratelimit's `GRPC_SERVER_USE_TLS`:
/// `--grpc-tls-cert` and `--grpc-tls-key` serve the rate-limit and health
/// services over TLS (a plaintext client is refused), and
/// `--grpc-client-ca` refuses a client without a certificate that CA
/// signed. Files that cannot work are refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_and_mutual_tls() {
    let pki = common::redis_tls::Pki::new("grpc");
    let file = per_minute("grpc-tls", 2);
    let path = |name: &str| pki.path(name).display().to_string();
    let (cert, key) = (path("server.pem"), path("server.key"));
    let tls = [
        "--grpc-tls-cert",
        cert.as_str(),
        "--grpc-tls-key",
        key.as_str(),
    ];
    let me = [("remote_address", "10.9.0.2")];

    let port = free_port();
    let grpc = format!("127.0.0.1:{port}");
    let server = Server::spawn(
        &file,
        &[&["--grpc", grpc.as_str()], &tls[..]].concat(),
        port,
    );
    let mut plain = server.client().await;
    let refused = plain
        .should_rate_limit(RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![descriptor(&me, None)],
            hits_addend: 0,
        })
        .await;
    assert!(refused.is_err(), "a plaintext client was served");
    let channel = tls_channel(port, &pki, false).await.unwrap();
    let mut client = RateLimitServiceClient::new(channel.clone());
    for left in [1, 0] {
        let s = one(&mut client, "edge", &me, None).await;
        assert_eq!((code(&s), s.limit_remaining), (Code::Ok, left));
    }
    assert_eq!(
        code(&one(&mut client, "edge", &me, None).await),
        Code::OverLimit
    );
    let health = HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .unwrap();
    assert_eq!(health.into_inner().status, 1);
    drop(server);

    let port = free_port();
    let grpc = format!("127.0.0.1:{port}");
    let ca = path("ca.pem");
    let mutual = [
        &["--grpc", grpc.as_str(), "--grpc-client-ca", ca.as_str()],
        &tls[..],
    ]
    .concat();
    let server = Server::spawn(&file, &mutual, port);
    let anonymous = match tls_channel(port, &pki, false).await {
        Ok(channel) => RateLimitServiceClient::new(channel)
            .should_rate_limit(RateLimitRequest {
                domain: "edge".into(),
                descriptors: vec![descriptor(&me, None)],
                hits_addend: 0,
            })
            .await
            .map(drop)
            .map_err(|status| status.to_string()),
        Err(e) => Err(e.to_string()),
    };
    assert!(
        anonymous.is_err(),
        "a client without a certificate was served"
    );
    let mut client = RateLimitServiceClient::new(tls_channel(port, &pki, true).await.unwrap());
    let s = one(&mut client, "edge", &[("remote_address", "10.9.0.3")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 1));
    drop(server);

    // --grpc-client-san: the certificate must name it, for health too.
    for (san, served) in [
        ("client.slidelog.test", true),
        ("other.slidelog.test", false),
    ] {
        let port = free_port();
        let grpc = format!("127.0.0.1:{port}");
        let named = [
            &mutual[2..],
            &["--grpc", grpc.as_str(), "--grpc-client-san", san],
        ]
        .concat();
        let server = Server::spawn(&file, &named, port);
        let channel = tls_channel(port, &pki, true).await.unwrap();
        let call = RateLimitServiceClient::new(channel.clone())
            .should_rate_limit(RateLimitRequest {
                domain: "edge".into(),
                descriptors: vec![descriptor(&[("remote_address", "10.9.0.4")], None)],
                hits_addend: 0,
            })
            .await;
        let health = HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest {
                service: "ratelimit".into(),
            })
            .await;
        if served {
            assert_eq!(call.unwrap().into_inner().overall_code, Code::Ok as i32);
            assert_eq!(health.unwrap().into_inner().status, 1);
        } else {
            for refused in [call.map(drop), health.map(drop)] {
                let status = refused.unwrap_err();
                assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
                assert!(status.message().contains(san), "{status:?}");
            }
        }
        drop(server);
    }

    // The same on a Unix socket (where tonic's own look for the client's
    // certificate does not reach).
    let socket = file.parent().unwrap().join("rls-tls.sock");
    let uds = [&mutual[2..], &["--grpc-uds", socket.to_str().unwrap()]].concat();
    let server = Server::spawn(
        &file,
        &[&uds[..], &["--grpc-client-san", "client.slidelog.test"]].concat(),
        0,
    );
    let client_tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(pki.read("ca.pem")))
        .identity(tonic::transport::Identity::from_pem(
            pki.read("client.pem"),
            pki.read("client.key"),
        ))
        .domain_name("localhost");
    let mut client = RateLimitServiceClient::new(uds_channel(&socket, Some(client_tls)).await);
    let s = one(&mut client, "edge", &[("remote_address", "10.9.0.5")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 1));
    drop(server);

    let grpc = format!("127.0.0.1:{}", free_port());
    let other_key = path("client.key");
    let refusals: [(&[&str], &str); 6] = [
        (&["--grpc-tls-cert", &cert], "--grpc-tls-key"),
        (
            &["--grpc-tls-cert", &cert, "--grpc-tls-key", &other_key],
            "KeyMismatch",
        ),
        (
            &[
                &tls[..],
                &["--grpc-client-ca", &ca, "--grpc-client-san", "not a name!"],
            ]
            .concat(),
            "not a DNS name",
        ),
        (
            &[&tls[..], &["--grpc-client-san", "a.test"]].concat(),
            "--grpc-client-ca",
        ),
        (
            &["--grpc-tls-cert", &cert, "--grpc-tls-key", &cert],
            "no PEM private key",
        ),
        (&["--grpc-client-ca", &ca], "--grpc-tls-cert"),
    ];
    for (args, reason) in refusals {
        let (code, _, stderr) = serve_once(&file, &[&["--grpc", grpc.as_str()], args].concat());
        assert!(code.is_some_and(|c| c != 0), "{args:?}: {code:?}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

/// `--redis-timeout` (upstream's `REDIS_TIMEOUT`): a Redis that stops
/// answering (SIGSTOP) fails each call `UNAVAILABLE` once the timeout
/// given has passed, naming it (without the flag, the library's 1 s), and
/// the service answers again once Redis does — having counted the late
/// call, which Redis ran when it resumed: a timeout can only make a log
/// hold more, never admit more. The flag without a Redis is refused at
/// start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_fails_calls_after_the_timeout_given() {
    let file = per_minute("redis-timeout", 5);
    let (code_without, _, err) =
        serve_once(&file, &["--grpc", "127.0.0.1:0", "--redis-timeout", "50ms"]);
    assert_eq!(code_without, Some(2), "{err}");
    assert!(
        err.contains("--redis-timeout") && err.contains("--redis"),
        "{err}"
    );
    let (code_zero, _, err) = serve_once(
        &file,
        &[
            "--grpc",
            "127.0.0.1:0",
            "--redis",
            "redis://127.0.0.1/",
            "--redis-timeout",
            "0s",
        ],
    );
    assert_eq!(code_zero, Some(2), "{err}");

    let Some((mut redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let ask_stalled = |flags: &'static [&'static str], expect: &'static str| {
        let file = file.clone();
        let url = url.clone();
        let redis = &redis;
        async move {
            let server = Server::start_with(&file, &[&["--redis", url.as_str()], flags].concat());
            let mut client = server.client().await;
            let s = one(&mut client, "edge", &[("remote_address", "10.6.0.1")], None).await;
            assert_eq!(code(&s), Code::Ok);
            signal(redis, libc::SIGSTOP);
            let only = descriptor(&[("remote_address", "10.6.0.1")], None);
            let stalled = try_ask(&mut client, "edge", vec![only]).await;
            signal(redis, libc::SIGCONT);
            let status = stalled.expect_err("a call to a stalled Redis fails");
            assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
            assert!(status.message().contains(expect), "{status:?}");
            // Redis answers again, and so does the service: 5 a minute, the
            // first call, the late one and this one counted.
            let s = one(&mut client, "edge", &[("remote_address", "10.6.0.1")], None).await;
            assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 2));
        }
    };
    ask_stalled(&["--redis-timeout", "150ms"], "within 150ms").await;
    ask_stalled(&["--redis-prefix", "default-timeout:"], "within 1s").await;
    let _ = redis.kill();
    let _ = redis.wait();
}

/// `--response-dynamic-metadata` (upstream's `RESPONSE_DYNAMIC_METADATA`):
/// the domain, each descriptor's entries, own limit and hits_addend, and
/// the configured `metadata` of the descriptors that passed, merged
/// (nested mappings key by key, the first descriptor's value kept); an
/// unlimited descriptor's and an over one's left out. Without the flag,
/// none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_metadata_tells_what_upstream_tells() {
    use envoy_types::pb::google::protobuf::value::Kind;
    use envoy_types::pb::google::protobuf::{Struct, Value};
    let file = config_file(
        "metadata",
        r#"
domain: meta
descriptors:
  - key: user
    metadata: {team: a, nested: {x: 1}}
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    metadata: {team: b, nested: {y: 2}, extra: true}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: health
    metadata: {never: here}
    rate_limit: {unlimited: true}
"#,
    );
    // A compact rendering of a protobuf value, for comparing.
    fn show(value: &Value) -> String {
        match &value.kind {
            Some(Kind::StringValue(s)) => format!("{s:?}"),
            Some(Kind::NumberValue(n)) => n.to_string(),
            Some(Kind::BoolValue(b)) => b.to_string(),
            Some(Kind::ListValue(list)) => {
                let items: Vec<String> = list.values.iter().map(show).collect();
                format!("[{}]", items.join(","))
            }
            Some(Kind::StructValue(s)) => shown(s),
            _ => "null".into(),
        }
    }
    fn shown(s: &Struct) -> String {
        let mut fields: Vec<String> = s
            .fields
            .iter()
            .map(|(k, v)| format!("{k}:{}", show(v)))
            .collect();
        fields.sort();
        format!("{{{}}}", fields.join(","))
    }
    let request = || RateLimitRequest {
        domain: "meta".into(),
        descriptors: vec![
            descriptor(&[("user", "u1")], None),
            overridden(&[("path", "/a")], 7, 2),
            descriptor(&[("health", "x")], Some(1)),
        ],
        hits_addend: 0,
    };
    let server = Server::start_with(&file, &["--response-dynamic-metadata"]);
    let mut client = server.client().await;
    let first = client
        .should_rate_limit(request())
        .await
        .unwrap()
        .into_inner();
    let descriptors = r#"descriptors:[{entries:["user=u1"]},{entries:["path=/a"],limit:"requests_per_unit:7 unit:MINUTE"},{entries:["health=x"],hitsAddend:1}]"#;
    assert_eq!(
        shown(&first.dynamic_metadata.unwrap()),
        format!(
            r#"{{{descriptors},domain:"meta",metadata:{{extra:true,nested:{{x:1,y:2}},team:"a"}}}}"#
        )
    );
    // The user is over now: only the path's metadata.
    let second = client
        .should_rate_limit(request())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.overall_code, Code::OverLimit as i32);
    assert_eq!(
        shown(&second.dynamic_metadata.unwrap()),
        format!(
            r#"{{{descriptors},domain:"meta",metadata:{{extra:true,nested:{{y:2}},team:"b"}}}}"#
        )
    );
    drop(server);
    let server = Server::start(&file);
    let plain = server
        .client()
        .await
        .should_rate_limit(request())
        .await
        .unwrap();
    assert_eq!(plain.into_inner().dynamic_metadata, None);
}

/// Sends `child` SIGTERM (a service's signal to stop, calls in flight
/// finishing).
fn terminate(child: &Child) {
    signal(child, libc::SIGTERM);
}

/// Sends `child` the signal `signal`.
#[allow(unsafe_code)]
fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: `kill` takes two integers and touches no memory of ours; the
    // pid is our child's, not yet waited for, so it names no other process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// The gRPC certificate and key are read again on SIGHUP (and every 10 s,
/// as upstream reloads them): a new pair serves the next handshakes without
/// a restart, and a pair whose key is not the certificate's (caught half
/// written, say) is refused, the previous staying in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_certificate_reloads_without_a_restart() {
    let pki = common::redis_tls::Pki::new("reload");
    let file = per_minute("grpc-reload", 5);
    let dir = file.parent().unwrap();
    let (cert, key) = (dir.join("grpc.pem"), dir.join("grpc.key"));
    let install = |pem: &str, private: &str| {
        std::fs::copy(pki.path(pem), &cert).unwrap();
        std::fs::copy(pki.path(private), &key).unwrap();
    };
    install("server.pem", "server.key");
    let port = free_port();
    let grpc = format!("127.0.0.1:{port}");
    let args = [
        "--grpc",
        grpc.as_str(),
        "--grpc-tls-cert",
        cert.to_str().unwrap(),
        "--grpc-tls-key",
        key.to_str().unwrap(),
    ];
    let server = Server::spawn(&file, &args, port);
    // Whether a client trusting `ca` alone is served.
    let trusted_by = |ca: &'static str| {
        let pki = &pki;
        async move {
            let tls = tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(pki.read(ca)))
                .domain_name("localhost");
            let Ok(channel) = Channel::from_shared(format!("https://127.0.0.1:{port}"))
                .unwrap()
                .tls_config(tls)
                .unwrap()
                .connect()
                .await
            else {
                return false;
            };
            let mut client = RateLimitServiceClient::new(channel);
            let only = descriptor(&[("remote_address", "10.9.1.1")], None);
            try_ask(&mut client, "edge", vec![only]).await.is_ok()
        }
    };
    assert!(trusted_by("ca.pem").await);
    assert!(!trusted_by("other-ca.pem").await);

    install("other-server.pem", "other-server.key");
    signal(&server.child, libc::SIGHUP);
    server.wait_for("reloaded the gRPC certificate");
    assert!(trusted_by("other-ca.pem").await);
    assert!(!trusted_by("ca.pem").await);

    install("server.pem", "other-server.key");
    signal(&server.child, libc::SIGHUP);
    let refused = server.wait_for("gRPC certificate reload refused");
    assert!(refused.contains("KeyMismatch"), "{refused}");
    assert!(trusted_by("other-ca.pem").await);
}

/// A channel to the service on the Unix socket `socket`, over TLS if
/// `tls` says how.
async fn uds_channel(socket: &Path, tls: Option<tonic::transport::ClientTlsConfig>) -> Channel {
    let endpoint = match tls {
        Some(tls) => tonic::transport::Endpoint::from_static("https://localhost")
            .tls_config(tls)
            .unwrap(),
        None => tonic::transport::Endpoint::from_static("http://localhost"),
    };
    let to = socket.to_path_buf();
    endpoint
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let to = to.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(to).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .unwrap()
}

/// `--grpc-uds`: gRPC on a Unix domain socket (for an Envoy beside the
/// service), made where one left by a killed process lay, refused where
/// another service answers, and removed when the service stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_on_a_unix_socket() {
    let file = config_file("uds", CONFIG);
    let dir = file.parent().unwrap();
    let socket = dir.join("rls.sock");
    let path = socket.to_str().unwrap();
    // A socket file no process listens on any more.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let server = Server::spawn(&file, &["--grpc-uds", path], 0);
    let mut client = RateLimitServiceClient::new(uds_channel(&socket, None).await);
    let s = one(&mut client, "edge", &[("remote_address", "10.6.0.1")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 2));
    let (code, _, stderr) = serve_once(&file, &["--grpc-uds", path]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("another process is serving on it"),
        "{stderr}"
    );
    terminate(&server.child);
    server.wait_for("stopped");
    assert!(!socket.exists(), "the socket outlived the service");
}

/// `--state-file`: the in-process logs outlive a restart (saved at
/// SIGTERM, restored at start, a request's own limit too), so a restart
/// is no free burst; a file that is not a saved state is reported and
/// the service starts empty rather than not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_outlives_a_restart() {
    let file = config_file("state", CONFIG);
    let dir = file.parent().unwrap();
    let state = dir.join("state.json");
    let keep = ["--state-file", state.to_str().unwrap()];
    let login = [("user", "u7"), ("action", "login")]; // 2 a minute
    let own = || overridden(&[("client", "c7")], 1, 2); // 1 a minute
    let first = Server::start_with(&file, &keep);
    let mut client = first.client().await;
    admits(&mut client, "edge", &login, 2).await;
    let r = ask(&mut client, "edge", vec![own()]).await;
    assert_eq!(code(&r.statuses[0]), Code::Ok);
    drop(client);
    terminate(&first.child);
    first.wait_for("saved 3 admissions of 2 keys");
    first.wait_for("stopped");
    let second = Server::start_with(&file, &keep);
    let mut client = second.client().await;
    let s = one(&mut client, "edge", &login, None).await;
    assert_eq!(code(&s), Code::OverLimit, "the log came back");
    let r = ask(&mut client, "edge", vec![own()]).await;
    assert_eq!(
        code(&r.statuses[0]),
        Code::OverLimit,
        "the override's log too"
    );
    let other = [("user", "u8"), ("action", "login")];
    assert_eq!(
        code(&one(&mut client, "edge", &other, None).await),
        Code::Ok
    );
    drop((client, second));
    // Saved every 100 ms too: a kill (no SIGTERM) loses at most that.
    let often = [&keep[..], &["--state-interval", "100ms"]].concat();
    let fourth = Server::start_with(&file, &often);
    let login = [("user", "u9"), ("action", "login")];
    admits(&mut fourth.client().await, "edge", &login, 2).await;
    // Both of u9's admissions in the file.
    let saved = |text: &str| {
        let Ok(state) = serde_json::from_str::<serde_json::Value>(text) else {
            return false;
        };
        let keys = state["keys"].as_array().cloned().unwrap_or_default();
        keys.iter().any(|k| {
            k["key"].as_str().is_some_and(|key| key.contains("u9"))
                && k["admissions"].as_array().is_some_and(|a| a.len() == 2)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&state).is_ok_and(|t| saved(&t)) {
        assert!(Instant::now() < deadline, "no periodic save within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(fourth); // SIGKILL
    let fifth = Server::start_with(&file, &keep);
    let s = one(&mut fifth.client().await, "edge", &login, None).await;
    assert_eq!(code(&s), Code::OverLimit, "the periodic save came back");
    drop(fifth);
    std::fs::write(&state, "{ not a state").unwrap();
    let third = Server::start_with(&file, &keep);
    let s = one(&mut third.client().await, "edge", &login, None).await;
    assert_eq!(
        (code(&s), s.limit_remaining),
        (Code::Ok, 1),
        "started empty"
    );
}

/// The HTTP/2 frame types read from a raw connection to `server` within
/// `wait` (after the client preface and an empty SETTINGS), until it
/// closes or `wait` passes.
fn frames_within(server: &Server, wait: Duration) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap(); // SETTINGS, empty
    let deadline = Instant::now() + wait;
    let mut types = Vec::new();
    let mut header = [0u8; 9];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return types;
        }
        tcp.set_read_timeout(Some(left)).unwrap();
        if tcp.read_exact(&mut header).is_err() {
            return types; // closed, or `wait` passed
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; len];
        if tcp.read_exact(&mut payload).is_err() {
            return types;
        }
        types.push(header[3]);
    }
}

/// `--max-connection-age`: a connection older than it is asked to go away
/// (an HTTP/2 GOAWAY, frame type 7), so that clients reconnect and spread
/// over replicas started after them; by default (a day) it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_connections_are_asked_to_reconnect() {
    const GOAWAY: u8 = 7;
    let file = config_file("connection-age", CONFIG);
    let aging = Server::start_with(&file, &["--max-connection-age", "500ms"]);
    let types = frames_within(&aging, Duration::from_secs(5));
    assert!(types.contains(&GOAWAY), "frames {types:?}");
    let lasting = Server::start(&file);
    let types = frames_within(&lasting, Duration::from_millis(1_500));
    assert!(
        !types.is_empty() && !types.contains(&GOAWAY),
        "frames {types:?}"
    );
    // A client keeps being answered across the reconnections.
    let mut client = aging.client().await;
    for _ in 0..3 {
        let s = one(&mut client, "edge", &[("remote_address", "10.8.0.1")], None).await;
        assert_eq!(code(&s), Code::Ok);
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// `slidelog serve --check --config config` with `extra` flags: its exit
/// code, stdout and stderr.
fn serve_check(config: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    serve_once(config, &[&["--check"], extra].concat())
}

/// `slidelog serve --config config` with `args`, run to its exit (a
/// check, or a start that fails): its exit code, stdout and stderr. One
/// still running after 20 s (a start that should have failed, and serves)
/// is killed, and its code is `None`.
fn serve_once(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read as it comes, so that a long output cannot stall the child.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    (
        status.code(),
        stdout.join().unwrap(),
        stderr.join().unwrap(),
    )
}

/// `--check` loads a configuration as a start would and exits: 0 and each
/// descriptor on stdout, or 2 and the file, line and reason; it serves
/// nothing and needs no `--grpc`.
#[test]
fn check_validates_a_configuration_without_serving() {
    let dir = temp_dir("check");
    // `yaml` written as `name`, and `slidelog serve --check` run on it.
    let check = |name: &str, yaml: &str| {
        let file = dir.join(name);
        std::fs::write(&file, yaml).unwrap();
        serve_check(&file, &[])
    };
    let (code, stdout, stderr) = check(
        "good.yaml",
        "domain: d\ndescriptors:\n  - key: ip\n    rate_limits:\n      - {unit: second, requests_per_unit: 5}\n      - {window: 90s, requests_per_unit: 50, name: slow, replaces: [{name: other}]}\n  - key: path\n    value: /api/*\n    share_threshold: true\n    quota_mode: true\n    descriptors:\n      - {key: method, rate_limit: {unit: minute, requests_per_unit: 0}}\n",
    );
    assert_eq!(code, Some(0), "{stdout} {stderr}");
    for line in [
        "valid, 1 domain",
        "domain d:",
        "  ip: 5 per 1s and 50 per 90s, named slow, replaces other",
        "  path=/api/*: no limit of its own, quota_mode, share_threshold",
        "  path=/api/*.method: blocked (requests_per_unit: 0)",
    ] {
        assert!(stdout.contains(line), "`{line}` in:\n{stdout}");
    }
    let (code, stdout, stderr) = check(
        "bad.yaml",
        "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("share_threshold"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

/// A domain in two files of a directory: refused, or with
/// `--merge-domains` (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`) one
/// domain with both files' descriptors, served; a key and value both files
/// define at the top is refused either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_a_domain_split_across_files() {
    let dir = temp_dir("merge");
    std::fs::write(
        dir.join("a.yaml"),
        "domain: shop\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        "domain: shop\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
    )
    .unwrap();
    let check = |extra: &[&str]| serve_check(&dir, extra);
    let (code_, _, stderr) = check(&[]);
    assert_eq!(code_, Some(2), "{stderr}");
    assert!(
        stderr.contains("b.yaml") && stderr.contains("--merge-domains"),
        "{stderr}"
    );
    let (code_, stdout, stderr) = check(&["--merge-domains"]);
    assert_eq!(code_, Some(0), "{stderr}");
    assert!(
        stdout.contains("  ip: 1 per 1m") && stdout.contains("  user: 2 per 1m"),
        "{stdout}"
    );
    let server = Server::start_with(&dir, &["--merge-domains"]);
    let mut client = server.client().await;
    for (entries, left) in [([("ip", "10.0.0.1")], 0), ([("user", "u")], 1)] {
        let s = one(&mut client, "shop", &entries, None).await;
        assert_eq!(
            (code(&s), s.limit_remaining),
            (Code::Ok, left),
            "{entries:?}"
        );
    }
    std::fs::write(
        dir.join("c.yaml"),
        "domain: shop\ndescriptors:\n  - key: ip\n    rate_limit: {unit: hour, requests_per_unit: 5}\n",
    )
    .unwrap();
    let (code_, _, stderr) = check(&["--merge-domains"]);
    assert_eq!(code_, Some(2), "{stderr}");
    assert!(
        stderr.contains("c.yaml") && stderr.contains("`ip`"),
        "{stderr}"
    );
}

/// A request's own limit is honoured: the descriptor is checked by it (in
/// a log of its own, apart from the configured limit's), and its status
/// names it; a zero blocks; a unit-less or too large override is
/// `INVALID_ARGUMENT`.
/// An override limits any descriptor of a known domain, configured or not
/// (as envoyproxy/ratelimit), and nothing in an unknown domain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_limit_overrides_are_honoured() {
    let (_server, mut client) = serving("overrides", CONFIG).await;
    const MINUTE: i32 = 2;
    const HOUR: i32 = 3;
    let me = [("remote_address", "10.9.0.1")];
    for i in 0..6 {
        let r = ask(&mut client, "edge", vec![overridden(&me, 5, HOUR)]).await;
        let s = &r.statuses[0];
        let limit = s.current_limit.as_ref().expect("the override is shown");
        assert_eq!((limit.requests_per_unit, limit.unit), (5, HOUR));
        if i < 5 {
            assert_eq!((code(s), s.limit_remaining), (Code::Ok, 4 - i), "call {i}");
        } else {
            assert_eq!(code(s), Code::OverLimit);
        }
    }
    // The configured 3 per second for the same address: a log of its own.
    let s = one(&mut client, "edge", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 2));
    // Another override is another log.
    let r = ask(&mut client, "edge", vec![overridden(&me, 7, MINUTE)]).await;
    assert_eq!(r.statuses[0].limit_remaining, 6);
    // A descriptor the domain does not configure is limited by its own
    // limit, as envoyproxy/ratelimit does; in an unknown domain, nothing is.
    let nobody = || vec![overridden(&[("nobody", "x")], 1, MINUTE)];
    let r = ask(&mut client, "edge", nobody()).await;
    assert_eq!(
        (code(&r.statuses[0]), r.statuses[0].limit_remaining),
        (Code::Ok, 0)
    );
    let r = ask(&mut client, "edge", nobody()).await;
    assert_eq!(code(&r.statuses[0]), Code::OverLimit);
    // A request's own limit is never shadowed (envoyproxy/ratelimit's
    // rule), though its descriptor's configured one is.
    let canary = || vec![overridden(&[("canary", "x")], 1, HOUR)];
    for expected in [Code::Ok, Code::OverLimit] {
        let r = ask(&mut client, "edge", canary()).await;
        assert_eq!(code(&r.statuses[0]), expected);
    }
    for _ in 0..2 {
        let r = ask(&mut client, "elsewhere", nobody()).await;
        assert_eq!(
            (code(&r.statuses[0]), r.statuses[0].current_limit.as_ref()),
            (Code::Ok, None)
        );
    }
    // A zero blocks, as a zero in the configuration does.
    for _ in 0..2 {
        let r = ask(&mut client, "edge", vec![overridden(&me, 0, MINUTE)]).await;
        let s = &r.statuses[0];
        assert_eq!((code(s), s.limit_remaining), (Code::OverLimit, 0));
        assert_eq!(s.current_limit.as_ref().unwrap().requests_per_unit, 0);
        assert_eq!(s.duration_until_reset.unwrap().seconds, 60);
    }
    for (rpu, unit, why) in [
        (3, 0, "without a unit"),
        (
            slidelog::MAX_LIMIT + 1,
            MINUTE,
            "above the maximum of 1048576",
        ),
        (u32::MAX, HOUR, "above the maximum of 1048576"),
    ] {
        let refused = client
            .should_rate_limit(RateLimitRequest {
                domain: "edge".into(),
                descriptors: vec![overridden(&me, rpu, unit)],
                hits_addend: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains(why), "{}", refused.message());
    }
}

/// A descriptor's entries are the client's text: no key or value, whatever
/// characters it carries, names another descriptor's log or a limit of its
/// own: a value ending `\u{1f}\u{0}1000/Second` is limited by its rule's 3 a
/// second, and one spelling another address's `3/Second` override keeps a
/// log apart from that override's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_cannot_forge_a_limit_or_a_log() {
    let (_server, mut client) = serving("forged", CONFIG).await;
    const SECOND: i32 = 1;
    // The configured 3 per second, whatever the value says.
    for forged in [
        "10.9.0.2\u{1f}\u{0}1000/Second",
        "\u{0}1000/Second\u{1f}",
        "\u{1b}\u{1f}\u{1e}\u{0}",
    ] {
        let me = [("remote_address", forged)];
        for i in 0..4 {
            let s = one(&mut client, "edge", &me, None).await;
            if i < 3 {
                assert_eq!(
                    (code(&s), s.limit_remaining),
                    (Code::Ok, 2 - i),
                    "{forged:?}, call {i}"
                );
            } else {
                assert_eq!(
                    code(&s),
                    Code::OverLimit,
                    "{forged:?}: more than 3 a second"
                );
            }
        }
    }
    // A value spelling the override of another address: its own log, not
    // the override's.
    let forged = [("remote_address", "10.9.0.3\u{1f}\u{0}3/Second")];
    admits(&mut client, "edge", &forged, 3).await;
    let address = [("remote_address", "10.9.0.3")];
    let r = ask(&mut client, "edge", vec![overridden(&address, 3, SECOND)]).await;
    assert_eq!(
        (code(&r.statuses[0]), r.statuses[0].limit_remaining),
        (Code::Ok, 2)
    );
    // Keys carrying the separators are entries like any other.
    let s = one(&mut client, "edge", &[("remote_address\u{1e}x", "1")], None).await;
    assert_eq!(code(&s), Code::Ok);
}

/// Two replicas of the service sharing one real `redis-server` stay exact
/// together: one limit of 5 per minute per address, asked alternately
/// through both, admits exactly 5; a reload on one replica (cut to 3)
/// keeps the shared history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_redis_stay_exact() {
    let Some((mut redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let dir = temp_dir("replicas");
    let file = dir.join("api.yaml");
    let config = |limit: u32| {
        format!(
            "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n"
        )
    };
    std::fs::write(&file, config(5)).unwrap();
    let a = Server::start_with(&file, &["--redis", &url]);
    let other = temp_dir("replicas-b");
    let file_b = other.join("api.yaml");
    std::fs::write(&file_b, config(5)).unwrap();
    let b = Server::start_with(&file_b, &["--redis", &url]);
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let me = [("client", "shared")];
    let mut ok = 0;
    for i in 0..12 {
        let client = if i % 2 == 0 { &mut ca } else { &mut cb };
        let s = one(client, "api", &me, None).await;
        if code(&s) == Code::Ok {
            ok += 1;
        }
    }
    assert_eq!(ok, 5, "exactly the limit across both replicas");
    // A look (hits 0) through Redis: no room, and when it grows (within
    // the minute); at a key with no admission, all the room and no wait.
    let s = one(&mut ca, "api", &me, Some(0)).await;
    let reset = s.duration_until_reset.unwrap();
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 0));
    assert!(reset.seconds > 0 && reset.seconds <= 60, "{reset:?}");
    let s = one(&mut cb, "api", &[("client", "nobody")], Some(0)).await;
    let reset = s.duration_until_reset.unwrap();
    assert_eq!((s.limit_remaining, reset.seconds, reset.nanos), (5, 0, 0));
    // A service with another prefix shares the Redis and none of its logs.
    let c = Server::start_with(&file, &["--redis", &url, "--redis-prefix", "other-rls:"]);
    let s = one(&mut c.client().await, "api", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 4));
    drop(c);
    // A new address: room on both, growing when its one admission
    // leaves, a minute after it by the server's clock (from the same
    // round trip as the decision).
    let s = one(&mut cb, "api", &[("client", "fresh")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 4));
    let reset = s.duration_until_reset.unwrap();
    assert_eq!((reset.seconds, reset.nanos), (60, 0));
    // Replica B cut to 3 and raised to 6: the shared key keeps its history
    // (all 5 admissions: a key keeps what every limit on it counts).
    std::fs::write(&file_b, config(3)).unwrap();
    b.wait_for("reloaded");
    assert_eq!(code(&one(&mut cb, "api", &me, None).await), Code::OverLimit);
    std::fs::write(&file_b, config(6)).unwrap();
    b.wait_for("reloaded");
    let s = one(&mut cb, "api", &me, None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 0));
    // Fifty distinct request overrides: fifty policy sets, no new
    // connection (each replica holds one).
    let before = common::redis_server::client_count(&url);
    for rpu in 1..=50 {
        let r = ask(&mut ca, "api", vec![overridden(&me, rpu, 3)]).await;
        assert_eq!(r.statuses[0].limit_remaining, rpu - 1, "override {rpu}");
    }
    assert_eq!(
        common::redis_server::client_count(&url),
        before,
        "a connection per policy set"
    );
    // A value too long for a Redis key is over the limit, not an error
    // (which Envoy, failing open by default, would let through), and
    // does not fail the other descriptors of its request.
    let long = "v".repeat(9_000);
    let r = ask(
        &mut ca,
        "api",
        vec![
            descriptor(&[("client", &long)], None),
            descriptor(&[("client", "other")], None),
        ],
    )
    .await;
    assert_eq!(
        (
            code(&r.statuses[0]),
            code(&r.statuses[1]),
            r.statuses[1].limit_remaining
        ),
        (Code::OverLimit, Code::Ok, 4)
    );
    drop((a, b));
    let _ = redis.kill();
    let _ = redis.wait();
}

/// Two replicas of the service on a real 3-master Redis Cluster stay exact
/// together: sixteen addresses (their keys spread over the shards), each
/// asked twelve times at once through both replicas, admit exactly 5 each
/// under one limit, and a descriptor with two limits (all or nothing on one
/// ring) admits exactly the tighter one. With
/// `--redis-health-check-active-connection`, a replica says not serving
/// once a shard is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_a_redis_cluster_stay_exact() {
    let Some(mut cluster) = common::redis_cluster::cluster() else {
        return;
    };
    let seeds = cluster.seeds().join(",");
    let config = "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: tenant\n    rate_limits:\n      - {unit: hour, requests_per_unit: 6}\n      - {window: 90s, requests_per_unit: 4, name: burst}\n";
    let replicas: Vec<Server> = ["cluster-a", "cluster-b"]
        .iter()
        .map(|name| {
            let file = temp_dir(name).join("api.yaml");
            std::fs::write(&file, config).unwrap();
            Server::start_with(&file, &["--redis-cluster", &seeds])
        })
        .collect();
    let clients = [replicas[0].client().await, replicas[1].client().await];

    let addresses: Vec<String> = (0..16).map(|i| format!("10.1.0.{i}")).collect();
    let mut calls = Vec::new();
    for address in &addresses {
        for i in 0..12 {
            let mut client = clients[i % 2].clone();
            let address = address.clone();
            calls.push(tokio::spawn(async move {
                let s = one(&mut client, "api", &[("client", &address)], None).await;
                (address, code(&s))
            }));
        }
    }
    let mut admitted: std::collections::HashMap<String, usize> = Default::default();
    for call in calls {
        let (address, code) = call.await.unwrap();
        *admitted.entry(address).or_default() += usize::from(code == Code::Ok);
    }
    for address in &addresses {
        assert_eq!(admitted[address], 5, "{address}: {admitted:?}");
    }
    // The keys really are on more than one shard.
    let holding = cluster
        .nodes
        .iter()
        .filter(|node| {
            common::redis_cluster::cli(node.port, &["dbsize"])
                .and_then(|n| n.trim().parse::<u64>().ok())
                .is_some_and(|n| n > 0)
        })
        .count();
    assert!(holding >= 2, "every key on one shard: not a cluster test");

    // Two limits on one descriptor, through both replicas in turn: 4 per
    // 90 s binds first, and its denial names it.
    let mut ok = 0;
    for i in 0..10 {
        let mut client = clients[i % 2].clone();
        let s = one(&mut client, "api", &[("tenant", "t1")], None).await;
        if code(&s) == Code::Ok {
            ok += 1;
        } else {
            assert_eq!(s.current_limit.map(|l| l.name), Some("burst".into()));
        }
    }
    assert_eq!(ok, 4, "the tighter of the two limits across both replicas");

    // A replica watching Redis: serving while every shard answers, not
    // serving once one is killed (its keys' calls fail, the others' pass).
    let http_port = free_port();
    let file = temp_dir("cluster-watched").join("api.yaml");
    std::fs::write(&file, config).unwrap();
    let watched = Server::start_with(
        &file,
        &[
            "--redis-cluster",
            &seeds,
            "--redis-timeout",
            "300ms",
            "--redis-health-check-active-connection",
            "--http",
            &format!("127.0.0.1:{http_port}"),
        ],
    );
    assert_eq!(healthcheck_becomes(http_port, 200).await, 200);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        http(http_port, "GET", "/healthcheck", "").await.0,
        200,
        "pinged and answered"
    );
    cluster.nodes[0].kill();
    assert_eq!(healthcheck_becomes(http_port, 500).await, 500);
    watched.wait_for("not serving until it answers");
    drop((watched, replicas));
}

/// With Redis as the store, a reload judges each key by its new limit,
/// over the history Redis keeps: 5 a minute, 4 asked; cut to 3, over; raised
/// to 6, one more leaves 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_judges_redis_keys_by_their_new_limits_keeping_history() {
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
    use slidelog::serve::{Config, RedisTarget, Service};
    let Some((mut redis, port)) = common::redis_server::start_or_skip() else {
        return;
    };
    let config = |limit: u32| {
        Config::from_yaml(&format!(
            "domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n"
        ))
        .unwrap()
    };
    let service = Service::builder(config(5))
        .redis(RedisTarget::Node(format!("redis://127.0.0.1:{port}/")))
        .build()
        .unwrap();
    let ask = || async {
        let request = RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![descriptor(&[("client", "alice")], None)],
            ..Default::default()
        };
        let answer = service
            .should_rate_limit(tonic::Request::new(request))
            .await;
        let answer = answer.expect("Redis answers").into_inner();
        let status = answer.statuses[0].clone();
        (code(&status), status.limit_remaining)
    };
    for remaining in (1..5).rev() {
        assert_eq!(ask().await, (Code::Ok, remaining));
    }
    service.reload(config(3));
    assert_eq!(ask().await.0, Code::OverLimit, "4 in the minute, over 3");
    service.reload(config(6));
    assert_eq!(ask().await, (Code::Ok, 1), "4 kept, one more of 6");
    let _ = redis.kill();
    let _ = redis.wait();
}
