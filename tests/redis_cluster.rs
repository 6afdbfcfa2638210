//! The Redis backend on a real 3-master Redis Cluster on loopback.
//!
//! The cluster comes from `common::redis_cluster` (three masters started,
//! joined and torn down per test; skipped with a printed reason without
//! `redis-server`, a failure under `SLIDELOG_REQUIRE_REDIS_CLUSTER=1`).

#![cfg(feature = "redis")]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use common::max_in_window;
use common::redis_cluster::{Cluster, cli, cluster};
use slidelog::redis::{FailurePolicy, Layout, RedisLimitError, RedisLimiter};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn limiter(
    cluster: &Cluster,
    limit: u32,
    window: Duration,
    layout: Layout,
    prefix: &str,
) -> RedisLimiter {
    RedisLimiter::cluster_builder(cluster.seeds(), limit, window)
        .layout(layout)
        .prefix(prefix)
        .connect()
        .await
        .unwrap()
}

/// Keys land on all three shards (checked with `CLUSTER KEYSLOT` against
/// each master's slots), and on every shard each key admits exactly its
/// limit, both layouts.
#[test]
fn keys_spread_over_all_shards_admit_exactly_the_limit() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    for layout in [Layout::SortedSet, Layout::Ring] {
        let prefix = format!("spread-{layout:?}:");
        let l = rt.block_on(limiter(
            &cluster,
            3,
            Duration::from_secs(60),
            layout,
            &prefix,
        ));
        let mut owners = BTreeSet::new();
        for k in 0..24 {
            let key = format!("k{k}");
            owners.insert(cluster.owner(&l.redis_key(&key)));
            let admitted = rt.block_on(async {
                let mut admitted = 0;
                for _ in 0..5 {
                    if l.check(&key).await.unwrap().is_ok() {
                        admitted += 1;
                    }
                }
                admitted
            });
            assert_eq!(admitted, 3, "{layout:?} key {key}");
        }
        assert_eq!(owners.len(), 3, "keys on every shard: {owners:?}");
    }
}

/// The reference-model property test through the cluster, both layouts,
/// each case on its own key (so the cases spread over the shards).
#[test]
fn both_layouts_equal_the_model_on_a_cluster() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let cluster = &cluster;
    common::redis_model::layouts_equal_the_model(&rt, 32, |limit, window, layout, id| async move {
        let l = limiter(cluster, limit, window, layout, "model:").await;
        (l, format!("case{id}"))
    });
}

/// Several policies per key on the cluster, keys spread over the shards.
#[test]
fn several_policies_equal_the_model_on_a_cluster() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let cluster = &cluster;
    common::redis_model::policies_equal_the_model(&rt, 24, |policies, layout, id| async move {
        let mut b = RedisLimiter::cluster_builder(cluster.seeds(), policies[0].0, policies[0].1)
            .layout(layout)
            .prefix("multi:");
        for &(limit, window) in &policies[1..] {
            b = b.and(limit, window);
        }
        (b.connect().await.unwrap(), format!("case{id}"))
    });
}

/// Several clients, each with its own cluster connection, on one key: no
/// window of the server's clock holds more than the limit, and the limit is
/// reached.
#[test]
fn clients_on_one_key_never_over_admit() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let (limit, window) = (10u32, Duration::from_millis(500));
    for layout in [Layout::SortedSet, Layout::Ring] {
        let prefix = format!("many-{layout:?}:");
        let times = rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..4 {
                let l = limiter(&cluster, limit, window, layout, &prefix).await;
                tasks.push(tokio::spawn(async move {
                    let mut at = Vec::new();
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(1_200) {
                        if let Ok(a) = l.check("shared").await.unwrap() {
                            at.push(a.at());
                        }
                    }
                    at
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        });
        let mut times = times;
        let fullest = max_in_window(&mut times, window.as_nanos() as u64);
        assert!(
            fullest <= limit as usize,
            "{layout:?}: {fullest} in one window"
        );
        assert!(
            times.len() >= 2 * limit as usize,
            "{layout:?}: {} admitted",
            times.len()
        );
    }
}

/// A shard stalled, then killed mid-run: stalled, its key's check fails
/// at the timeout as `RedisLimitError::Timeout`; killed, its keys follow
/// the failure policy (a typed error, or a denial for `Closed`, or an
/// admission for `Open`), while the keys of the other shards keep being
/// answered exactly.
#[test]
fn a_killed_shard_follows_the_policy_and_the_others_answer() {
    let Some(mut cluster) = cluster() else { return };
    let rt = runtime();
    let prefix = "kill:";
    let timeout = Duration::from_millis(500);
    let connect = |policy: FailurePolicy| {
        RedisLimiter::cluster_builder(cluster.seeds(), 2, Duration::from_secs(60))
            .prefix(prefix)
            .failure_policy(policy)
            .timeout(timeout)
            .connect()
    };
    let (error, closed, open) = rt.block_on(async {
        (
            connect(FailurePolicy::Error).await.unwrap(),
            connect(FailurePolicy::Closed).await.unwrap(),
            connect(FailurePolicy::Open).await.unwrap(),
        )
    });
    // One key per shard.
    let mut by_owner: HashMap<u16, String> = HashMap::new();
    for k in 0.. {
        let key = format!("k{k}");
        by_owner
            .entry(cluster.owner(&format!("{prefix}{key}")))
            .or_insert(key);
        if by_owner.len() == 3 {
            break;
        }
    }
    let victim = cluster.nodes[0].port;
    let dead_key = by_owner[&victim].clone();
    let live_keys: Vec<String> = by_owner
        .iter()
        .filter(|(p, _)| **p != victim)
        .map(|(_, k)| k.clone())
        .collect();
    rt.block_on(async {
        assert!(error.check(&dead_key).await.unwrap().is_ok());
        assert!(open.ping().await.is_ok(), "every primary answers");
    });
    // Stalled first (SIGSTOP, well under the cluster's node timeout): its
    // key's check fails at the timeout given, as `Timeout` naming it.
    let shard = cluster.nodes[0].child.as_ref().unwrap();
    common::redis_server::signal(shard, "-STOP");
    let stalled = rt.block_on(error.check(&dead_key));
    common::redis_server::signal(shard, "-CONT");
    assert!(
        matches!(stalled, Err(RedisLimitError::Timeout(t)) if t == timeout),
        "{stalled:?}"
    );
    cluster.nodes[0].kill();
    rt.block_on(async {
        let failed = error.check(&dead_key).await;
        assert!(
            matches!(
                failed,
                Err(RedisLimitError::Redis(_) | RedisLimitError::Timeout(_))
            ),
            "{failed:?}"
        );
        let denied = closed.check(&dead_key).await.unwrap();
        assert!(denied.is_err(), "Closed denies: {denied:?}");
        let admitted = open.check(&dead_key).await.unwrap();
        assert!(admitted.is_ok(), "Open admits: {admitted:?}");
        // A ping asks every primary: one down fails it, whatever the policy.
        let ping = open.ping().await;
        assert!(
            matches!(
                ping,
                Err(RedisLimitError::Redis(_) | RedisLimitError::Timeout(_))
            ),
            "{ping:?}"
        );
        for key in &live_keys {
            // Exact as before on the shards still up: 2 admitted, then denied.
            assert!(error.check(key).await.unwrap().is_ok(), "{key}");
            assert!(error.check(key).await.unwrap().is_ok(), "{key}");
            assert!(error.check(key).await.unwrap().is_err(), "{key}");
        }
    });
}

/// `SCRIPT FLUSH` on the node that owns a key: the next check reloads the
/// script there (`NOSCRIPT`) and answers exactly.
#[test]
fn script_flush_on_one_node_is_survived() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    for layout in [Layout::SortedSet, Layout::Ring] {
        let prefix = format!("flush-{layout:?}:");
        let l = rt.block_on(limiter(
            &cluster,
            2,
            Duration::from_secs(60),
            layout,
            &prefix,
        ));
        let owner = cluster.owner(&format!("{prefix}k"));
        rt.block_on(async { assert!(l.check("k").await.unwrap().is_ok()) });
        assert!(cli(owner, &["script", "flush"]).unwrap().contains("OK"));
        rt.block_on(async {
            assert!(
                l.check("k").await.unwrap().is_ok(),
                "reloaded after the flush"
            );
            assert!(l.check("k").await.unwrap().is_err(), "and still exact");
        });
    }
}

/// Whether the node on `port` sees the node `id` owning `slot`.
fn sees_owner(port: u16, slot: u16, id: &str) -> bool {
    let nodes = cli(port, &["cluster", "nodes"]).unwrap_or_default();
    nodes
        .lines()
        .filter(|line| line.starts_with(id))
        .flat_map(|line| line.split_whitespace().skip(8))
        .any(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
        })
}

/// Moves the slot of `key` from the master on port `from` to the one on
/// `to` as `redis-cli --cluster reshard` does: `to` importing, `from`
/// migrating, the slot's keys migrated; with `finish`, the slot then given
/// to `to` on every node (the target first), until every node sees it so.
fn move_slot(cluster: &Cluster, key: &str, from: u16, to: u16, finish: bool) {
    let id = |port| cli(port, &["cluster", "myid"]).unwrap().trim().to_owned();
    let slot = cli(from, &["cluster", "keyslot", key]).unwrap();
    let slot = slot.trim();
    let (from_id, to_id) = (id(from), id(to));
    let ok = |port: u16, args: &[&str]| {
        let answer = cli(port, args).unwrap();
        assert!(answer.contains("OK"), "{args:?} on {port}: {answer}");
    };
    ok(to, &["cluster", "setslot", slot, "importing", &from_id]);
    ok(from, &["cluster", "setslot", slot, "migrating", &to_id]);
    let keys = cli(from, &["cluster", "getkeysinslot", slot, "100"]).unwrap();
    for moved in keys.lines().filter(|k| !k.is_empty()) {
        let to = to.to_string();
        ok(from, &["migrate", "127.0.0.1", &to, moved, "0", "5000"]);
    }
    if !finish {
        return;
    }
    let others = cluster.nodes.iter().map(|n| n.port).filter(|&p| p != to);
    for port in std::iter::once(to).chain(others) {
        ok(port, &["cluster", "setslot", slot, "node", &to_id]);
    }
    let slot: u16 = slot.parse().unwrap();
    let start = Instant::now();
    while !cluster
        .nodes
        .iter()
        .all(|n| sees_owner(n.port, slot, &to_id))
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "slot {slot} not settled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A key's slot moves under a connected limiter: the node its slot map
/// names has handed the slot on (`MOVED`) to a node that is migrating it
/// (`ASK`). The call follows both redirections, lands on the key's new
/// node and counts there; both layouts.
#[test]
fn a_call_follows_its_slot_through_a_reshard() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let minute = Duration::from_secs(60);
    for layout in [Layout::SortedSet, Layout::Ring] {
        let prefix = format!("reshard-{layout:?}:");
        let key = rt
            .block_on(limiter(&cluster, 5, minute, layout, &prefix))
            .redis_key("k");
        let first = cluster.owner(&key);
        let others: Vec<u16> = cluster
            .nodes
            .iter()
            .map(|n| n.port)
            .filter(|&p| p != first)
            .collect();
        let (target, stale) = (others[0], others[1]);
        // The limiter connects while the slot is on `stale`.
        move_slot(&cluster, &key, first, stale, true);
        let l = rt.block_on(limiter(&cluster, 5, minute, layout, &prefix));
        rt.block_on(async {
            for left in [4, 3] {
                let admitted = l.check("k").await.unwrap().unwrap();
                assert_eq!(admitted.remaining(), left, "{layout:?}");
            }
        });
        // Behind its back: back to `first`, then on its way to `target`.
        move_slot(&cluster, &key, stale, first, true);
        move_slot(&cluster, &key, first, target, false);
        rt.block_on(async {
            let moving = l.check("k").await;
            assert!(
                matches!(&moving, Ok(Ok(a)) if a.remaining() == 2),
                "{layout:?}: {moving:?}"
            );
        });
        move_slot(&cluster, &key, first, target, true);
        assert_eq!(cluster.owner(&key), target);
        rt.block_on(async {
            for left in [1, 0] {
                let admitted = l.check("k").await.unwrap().unwrap();
                assert_eq!(admitted.remaining(), left, "{layout:?}");
            }
            assert!(l.check("k").await.unwrap().is_err(), "{layout:?}");
        });
        assert_eq!(l.stats().failures, 0, "{layout:?}");
    }
}

/// `until_ready` waits out the exact `retry_after` on the cluster too.
#[test]
fn until_ready_waits_on_a_cluster() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let l = rt.block_on(limiter(
        &cluster,
        1,
        Duration::from_millis(200),
        Layout::Ring,
        "wait:",
    ));
    rt.block_on(async {
        let start = Instant::now();
        let first = l.until_ready("k").await.unwrap();
        let second = l.until_ready("k").await.unwrap();
        assert!(
            second.at() >= first.at() + 200_000_000,
            "{first:?} {second:?}"
        );
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "{:?}",
            start.elapsed()
        );
        assert!(
            matches!(
                l.until_n_ready("k", 2).await,
                Err(RedisLimitError::Refused(_))
            ),
            "2 > limit"
        );
    });
}

/// Checks per second and latency, one client sequential and 64 checks in
/// flight, on the cluster and on one of its nodes' standalone twin (a plain
/// redis-server), both layouts (printed; the figures are in BENCHMARKS.md).
#[test]
fn throughput_is_measured() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    let (mut single, single_port) = common::redis_server::start(|_| {
        ["--save", "", "--appendonly", "no"]
            .map(String::from)
            .to_vec()
    })
    .unwrap();
    let single_url = format!("redis://127.0.0.1:{single_port}/");
    for layout in [Layout::SortedSet, Layout::Ring] {
        for on_cluster in [false, true] {
            let l = rt.block_on(async {
                let builder = if on_cluster {
                    RedisLimiter::cluster_builder(cluster.seeds(), 1_000, Duration::from_secs(1))
                } else {
                    RedisLimiter::builder(single_url.as_str(), 1_000, Duration::from_secs(1))
                };
                builder
                    .layout(layout)
                    .prefix(format!("tput-{layout:?}:"))
                    .connect()
                    .await
                    .unwrap()
            });
            for in_flight in [1usize, 64] {
                let rounds = if in_flight == 1 { 2_000 } else { 60 };
                let (answered, lat, elapsed) = rt.block_on(async {
                    let mut lat = Vec::new();
                    let start = Instant::now();
                    let mut answered = 0usize;
                    for round in 0..rounds {
                        let mut batch = Vec::with_capacity(in_flight);
                        for i in 0..in_flight {
                            let l = l.clone();
                            let key = format!("k{}", (round * in_flight + i) % 97);
                            batch.push(tokio::spawn(async move {
                                let t = Instant::now();
                                let r = l.check(&key).await;
                                (r.is_ok(), t.elapsed())
                            }));
                        }
                        for b in batch {
                            let (ok, took) = b.await.unwrap();
                            answered += usize::from(ok);
                            lat.push(took);
                        }
                    }
                    (answered, lat, start.elapsed())
                });
                let total = rounds * in_flight;
                assert_eq!(answered, total, "every check answered");
                let mut lat = lat;
                lat.sort_unstable();
                println!(
                    "throughput {:?} {} in flight {}: {:.0} checks/s, p50 {:?}, p99 {:?}",
                    layout,
                    if on_cluster { "cluster" } else { "single node" },
                    in_flight,
                    total as f64 / elapsed.as_secs_f64(),
                    lat[lat.len() / 2],
                    lat[lat.len() * 99 / 100]
                );
            }
        }
    }
    let _ = single.kill();
    let _ = single.wait();
}

/// A cluster over TLS (`rediss://` seeds, a private CA): the client
/// discovers the shards as TLS tells them and each key admits exactly its
/// limit, on every shard; a CA that did not sign the nodes' certificate is
/// refused.
#[cfg(feature = "redis-tls")]
#[test]
fn a_cluster_over_tls_admits_exactly_the_limit() {
    let pki = common::redis_tls::Pki::new("cluster");
    let Some((cluster, tls_ports)) = common::redis_tls::cluster_or_skip(&pki) else {
        return;
    };
    let seeds: Vec<String> = tls_ports
        .iter()
        .map(|port| format!("rediss://127.0.0.1:{port}/"))
        .collect();
    let window = Duration::from_secs(60);
    runtime().block_on(async {
        let l = RedisLimiter::cluster_builder(seeds.iter().map(String::as_str), 2, window)
            .layout(Layout::Ring)
            .tls_root_cert(pki.read("ca.pem"))
            .connect()
            .await
            .unwrap();
        let mut owners = BTreeSet::new();
        for k in 0..12 {
            let key = format!("k{k}");
            owners.insert(cluster.owner(&l.redis_key(&key)));
            for left in [1, 0] {
                assert_eq!(l.check(&key).await.unwrap().unwrap().remaining(), left);
            }
            assert!(l.check(&key).await.unwrap().is_err(), "{key}");
        }
        assert_eq!(owners.len(), 3, "keys on every shard: {owners:?}");
        let strange = RedisLimiter::cluster_builder(seeds.iter().map(String::as_str), 2, window)
            .tls_root_cert(pki.read("other-ca.pem"))
            .connect()
            .await;
        assert!(strange.is_err(), "connected trusting another CA");
    });
}
