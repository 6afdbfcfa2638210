//! `slidelog serve` on envoyproxy/ratelimit's own situations: its example
//! configuration directory and the calls of its integration scripts, its
//! runtime directory's layout (any file name, subdirectories, hidden files
//! and a Kubernetes ConfigMap's links, an empty directory), its YAML 1.1
//! reading (units in any case, `yes`/`on` booleans, a missing
//! `requests_per_unit` as 0), and its refused files, each refused here too.

mod common;

use std::path::Path;
use std::process::Command;

use common::serve::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

const SECOND: i32 = 1;
const MINUTE: i32 = 2;
const HOUR: i32 = 3;
const DAY: i32 = 4;

/// `slidelog serve --check` on `config` (with `extra` flags): its exit
/// code and what it said on stdout and stderr.
fn check(config: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--check", "--config", config.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said.into_owned())
}

/// The overall code of one request of several descriptors.
async fn overall(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: &[&[(&str, &str)]],
) -> Code {
    let descriptors = descriptors.iter().map(|e| descriptor(e, None)).collect();
    Code::try_from(ask(client, domain, descriptors).await.overall_code).unwrap()
}

/// Upstream's example configuration directory (its `config.yaml` and
/// `example.yaml`, in our words, the second opening with `---` as
/// upstream's does), loaded as its integration setup loads it, and the
/// calls its integration scripts make through Envoy, each a request of
/// the descriptors Envoy's example routes build from the headers sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_integration_scripts_over_grpc() {
    let dir = temp_dir("upstream-integration");
    std::fs::write(
        dir.join("config.yaml"),
        "---\ndomain: mongo_cps\ndescriptors:\n  - {key: database, value: users, rate_limit: {unit: second, requests_per_unit: 500}}\n  - {key: database, value: default, rate_limit: {unit: second, requests_per_unit: 500}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("example.yaml"),
        r#"---
domain: rl
descriptors:
  - key: category
    value: account
    rate_limit: {replaces: [{name: bkthomps}, {name: fake_name}], unit: minute, requests_per_unit: 4}
  - key: source_cluster
    value: proxy
    descriptors:
      - {key: destination_cluster, value: bkthomps, rate_limit: {replaces: [{name: bkthomps}], unit: minute, requests_per_unit: 2}}
      - {key: destination_cluster, value: mock, rate_limit: {unit: minute, requests_per_unit: 1}}
      - {key: destination_cluster, value: override, rate_limit: {replaces: [{name: banned_limit}], unit: minute, requests_per_unit: 2}}
      - {key: destination_cluster, value: fake, rate_limit: {name: fake_name, unit: minute, requests_per_unit: 2}}
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - {key: bar, rate_limit: {unit: minute, requests_per_unit: 3}}
      - {key: bar, value: bkthomps, rate_limit: {name: bkthomps, unit: minute, requests_per_unit: 1}}
      - {key: bar, value: banned, rate_limit: {name: banned_limit, unit: minute, requests_per_unit: 0}}
      - {key: baz, rate_limit: {unit: second, requests_per_unit: 1}}
      - {key: baz, value: not-so-shady, rate_limit: {unit: minute, requests_per_unit: 3}}
      - {key: baz, value: shady, rate_limit: {unit: minute, requests_per_unit: 3}, shadow_mode: true}
      - {key: bay, rate_limit: {unlimited: true}}
  - {key: unspec, detailed_metric: true, rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: qux, rate_limit: {unlimited: true}}
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {service_with_quota: {name: service_1}}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata: {service_with_quota: {name: service_2}}
"#,
    )
    .unwrap();
    let server = Server::start(&dir);
    let mut client = server.client().await;
    let c = &mut client;

    let s = one(c, "mongo_cps", &[("database", "users")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, 499));

    // simple-get: foo and baz headers, one descriptor.
    let shady = [("foo", "test"), ("baz", "shady")];
    assert_eq!(overall(c, "rl", &[&shady]).await, Code::Ok);
    // trigger-ratelimit: three a minute, the fourth over.
    let not_so = [("foo", "pelle"), ("baz", "not-so-shady")];
    for call in 0..4 {
        let want = if call < 3 { Code::Ok } else { Code::OverLimit };
        assert_eq!(overall(c, "rl", &[&not_so]).await, want, "call {call}");
    }
    // trigger-shadow-mode-key: over its three, still answered OK.
    let shady = [("foo", "pelle"), ("baz", "shady")];
    for call in 0..6 {
        assert_eq!(overall(c, "rl", &[&shady]).await, Code::Ok, "call {call}");
    }

    // replaces: a replacing limit lifts the banned one, while its own
    // room lasts.
    let banned = [("foo", "bkthomps"), ("bar", "banned")];
    let to = |cluster: &'static str| {
        [
            ("source_cluster", "proxy"),
            ("destination_cluster", cluster),
        ]
    };
    assert_eq!(overall(c, "rl", &[&banned]).await, Code::OverLimit);
    assert_eq!(
        overall(c, "rl", &[&banned, &to("mock")]).await,
        Code::OverLimit
    );
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &[&banned, &to("override")]).await, want);
    }
    // ... and leaves the replaced limit as it was for other requests.
    let named = [("foo", "my_foo"), ("bar", "bkthomps")];
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &[&named, &to("bkthomps")]).await, want);
    }
    for want in [Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &[&named, &to("not_bkthomps")]).await, want);
    }
    assert_eq!(
        overall(c, "rl", &[&named, &to("bkthomps")]).await,
        Code::OverLimit
    );
    // ... and one limit replaces two.
    let account = [("category", "account")];
    for want in [Code::Ok, Code::Ok, Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(
            overall(c, "rl", &[&named, &to("fake"), &account]).await,
            want
        );
    }
    let other = [("foo", "foo_2"), ("bar", "bkthomps")];
    for want in [Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &[&other]).await, want);
    }
    let third = [("foo", "foo_3"), ("bar", "bar_3")];
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &[&third, &to("fake")]).await, want);
    }
    assert_eq!(
        overall(c, "rl", &[&named, &to("fake"), &account]).await,
        Code::OverLimit
    );

    // quota: over only when both services' quotas are.
    let services: [&[(&str, &str)]; 2] = [&[("service", "service_1")], &[("service", "service_2")]];
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "rl", &services).await, want);
    }
    // value-included-in-stats-key-when-unspecified: two a minute.
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(
            overall(c, "rl", &[&[("unspec", "unspecified_value")]]).await,
            want
        );
    }
}

/// Upstream reads every file of its runtime directory, whatever its name
/// and in subdirectories, but hidden ones (with `RUNTIME_IGNOREDOTFILES`,
/// which its README asks for with ConfigMaps): so does a directory given
/// to `--config`. A ConfigMap volume (each file a link through `..data`)
/// loads each file once; an editor's hidden copy of a domain is not read;
/// a link to a directory is not followed. An empty directory serves,
/// limits nothing, and takes a file written into it later.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_directory_serves_every_visible_file() {
    use std::os::unix::fs::symlink;
    let per_minute = |domain: &str, n: u32| {
        format!(
            "domain: {domain}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: {n}}}\n"
        )
    };
    let dir = temp_dir("upstream-runtime");
    let write = |at: &str, text: &str| {
        let path = dir.join(at);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("basic.yaml", &per_minute("basic", 1));
    write("another.conf", &per_minute("another", 2));
    write("limits", &per_minute("plain", 3));
    write("team/a/deep.yml", &per_minute("deep", 4));
    write(".basic.yaml.swp", &per_minute("basic", 99));
    write("team/.git/HEAD", "ref: refs/heads/main\n");
    write(
        "..2026_01_01_00_00_00.1/mapped.yaml",
        &per_minute("mapped", 5),
    );
    symlink("..2026_01_01_00_00_00.1", dir.join("..data")).unwrap();
    symlink("..data/mapped.yaml", dir.join("mapped.yaml")).unwrap();
    symlink("team", dir.join("team-again")).unwrap();

    let (status, said) = check(&dir, &[]);
    assert_eq!(status, Some(0), "{said}");
    assert!(said.contains("valid, 5 domains"), "{said}");
    let server = Server::start(&dir);
    let mut client = server.client().await;
    for (domain, n) in [
        ("basic", 1),
        ("another", 2),
        ("plain", 3),
        ("deep", 4),
        ("mapped", 5),
    ] {
        let s = one(&mut client, domain, &[("k", "x")], None).await;
        assert_eq!(
            (
                code(&s),
                s.limit_remaining,
                s.current_limit.map(|l| l.requests_per_unit)
            ),
            (Code::Ok, n - 1, Some(n)),
            "{domain}"
        );
    }
    drop(server);

    let empty = temp_dir("upstream-empty");
    let server = Server::start(&empty);
    let mut client = server.client().await;
    for domain in ["basic", "edge", "later"] {
        let s = one(&mut client, domain, &[("k", "x")], None).await;
        assert_eq!((code(&s), s.current_limit), (Code::Ok, None), "{domain:?}");
    }
    std::fs::write(empty.join("later"), per_minute("later", 1)).unwrap();
    server.wait_for("reloaded");
    for want in [Code::Ok, Code::OverLimit] {
        assert_eq!(
            code(&one(&mut client, "later", &[("k", "x")], None).await),
            want
        );
    }
}

/// What upstream's YAML 1.1 reader makes of a file, served: a unit in
/// any case is that unit (and reported so), `yes`/`on`/`y` are true
/// wherever a boolean is taken, `requests_per_unit` missing is 0 (every
/// call over, reported with its unit, none counted), and a count with
/// `_`s is that count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_1_1_files_serve_as_upstream_reads_them() {
    let (_server, mut client) = serving(
        "upstream-yaml11",
        r#"
domain: old
descriptors:
  - key: a
    rate_limit: {unit: SECOND, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: Hour, requests_per_unit: 1_000}
  - key: canary
    shadow_mode: yes
    rate_limit: {unit: Minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: on}
  - key: stop
    rate_limit: {unit: DAY}
  - key: service
    value: one
    quota_mode: Y
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service
    value: two
    quota_mode: True
    rate_limit: {unit: minute, requests_per_unit: 2}
"#,
    )
    .await;
    let c = &mut client;
    let s = one(c, "old", &[("a", "x")], None).await;
    let limit = s.current_limit.clone().unwrap();
    assert_eq!(
        (
            code(&s),
            s.limit_remaining,
            limit.requests_per_unit,
            limit.unit
        ),
        (Code::Ok, 1, 2, SECOND)
    );
    let s = one(c, "old", &[("b", "x")], None).await;
    let limit = s.current_limit.clone().unwrap();
    assert_eq!((s.limit_remaining, limit.unit), (999, HOUR));
    for call in 0..3 {
        let s = one(c, "old", &[("canary", "x")], None).await;
        assert_eq!(code(&s), Code::Ok, "shadow, call {call}");
        assert_eq!(s.current_limit.unwrap().unit, MINUTE);
    }
    let s = one(c, "old", &[("free", "x")], None).await;
    assert_eq!((code(&s), s.limit_remaining), (Code::Ok, u32::MAX));
    for call in 0..2 {
        let s = one(c, "old", &[("stop", "x")], None).await;
        let limit = s.current_limit.clone().unwrap();
        assert_eq!(
            (
                code(&s),
                s.limit_remaining,
                limit.requests_per_unit,
                limit.unit
            ),
            (Code::OverLimit, 0, 0, DAY),
            "call {call}"
        );
    }
    let both: [&[(&str, &str)]; 2] = [&[("service", "one")], &[("service", "two")]];
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(c, "old", &both).await, want, "quota mode");
    }
}

/// Upstream's refused files (its test fixtures' situations, in our words)
/// are refused, each with its reason, at a check as at a start; two files
/// of one domain are refused unless merged, and a key and value both
/// define is refused even then.
#[test]
fn upstream_refused_files_are_refused() {
    let dir = temp_dir("upstream-refused");
    let refused = |name: &str, yaml: &str, reason: &str| {
        let file = dir.join(name);
        std::fs::write(&file, yaml).unwrap();
        let (status, said) = check(&file, &[]);
        assert_eq!(status, Some(2), "{name}: {said}");
        assert!(
            said.contains(name) && said.contains(reason),
            "{name}: {said}"
        );
    };
    refused(
        "unlimited_with_unit.yaml",
        "domain: test-domain\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: day\n      requests_per_unit: 25\n",
        "should not specify rate limit unit when unlimited",
    );
    refused(
        "bad_limit_unit.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: foo\n      requests_per_unit: 5\n",
        "invalid rate limit unit 'foo'",
    );
    refused("empty_domain.yaml", "descriptors:\n", "domain");
    refused(
        "empty_key.yaml",
        "domain: test-domain\ndescriptors:\n  - value: value1\n",
        "key",
    );
    refused(
        "duplicate_key.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n\n  - key: key1\n    value: value1\n",
        "twice",
    );
    refused(
        "replaces_self.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    descriptors:\n      - key: subkey1\n        rate_limit:\n          name: self\n          replaces:\n            - name: self\n          unit: second\n          requests_per_unit: 5\n",
        "its own name `self`",
    );
    refused(
        "replaces_empty.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    descriptors:\n      - key: subkey1\n        rate_limit:\n          name: self\n          replaces:\n            - name:\n          unit: second\n          requests_per_unit: 5\n",
        "without a `name`",
    );
    refused("bad_yaml.yaml", "'''\n", "line");
    refused(
        "misspelled_key.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    ratelimit:\n      unit: day\n      requests_per_unit: 5\n",
        "ratelimit",
    );
    refused(
        "misspelled_key2.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n",
        "requestsperunit",
    );
    refused(
        "non_string_key.yaml",
        "0.25: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: day\n      requests_per_unit: 5\n",
        "0.25",
    );
    refused(
        "non_map_list.yaml",
        "domain: test-domain\ndescriptors:\n  - a\n  - b\n  - c\n",
        "descriptors",
    );
    // The same unit-less limit: refused unless it is unlimited.
    refused(
        "no_unit.yaml",
        "domain: test-domain\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5}\n",
        "`unit`",
    );

    // Domains across files (upstream's duplicate and merge fixtures).
    let files = temp_dir("upstream-domains");
    let domain = |name: &str, key: &str, n: u32| {
        std::fs::write(
            files.join(name),
            format!(
                "domain: test-domain\ndescriptors:\n  - key: {key}\n    value: {key}-value\n    rate_limit:\n      unit: minute\n      requests_per_unit: {n}\n"
            ),
        )
        .unwrap();
    };
    domain("merge_domain_key1.yaml", "key1", 10);
    std::fs::write(
        files.join("duplicate_domain.yaml"),
        "domain: test-domain\ndescriptors:\n",
    )
    .unwrap();
    let (status, said) = check(&files, &[]);
    assert_eq!(status, Some(2), "{said}");
    assert!(said.contains("domain `test-domain`"), "{said}");
    let (status, said) = check(&files, &["--merge-domains"]);
    assert_eq!(status, Some(0), "{said}");
    domain("merge_domain_key2.yaml", "key2", 20);
    let (status, said) = check(&files, &["--merge-domains"]);
    assert_eq!(status, Some(0), "{said}");
    assert!(
        said.contains("key1=key1-value: 10 per 1m") && said.contains("key2=key2-value: 20 per 1m"),
        "{said}"
    );
    domain("merge_domain_key3.yaml", "key1", 30);
    let (status, said) = check(&files, &["--merge-domains"]);
    assert_eq!(status, Some(2), "{said}");
    assert!(
        said.contains("merge_domain_key3.yaml") && said.contains("key1"),
        "{said}"
    );
}
