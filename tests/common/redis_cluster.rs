//! A real 3-master Redis Cluster on loopback for a test (or three masters
//! with a replica each): `redis-server --cluster-enabled yes` on free ports, joined with
//! `redis-cli --cluster create`, ready at `cluster_state:ok` on every node,
//! stopped (and their files removed) on drop. Without `redis-server` or
//! `redis-cli` a test skips with a printed reason, unless
//! `SLIDELOG_REQUIRE_REDIS_CLUSTER=1` (set by `.ci/run`): then a cluster
//! that cannot start fails it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One redis-server of the cluster.
pub struct Node {
    pub child: Option<Child>,
    pub port: u16,
}

impl Node {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running 3-master cluster, stopped (and its files removed) on drop.
pub struct Cluster {
    pub nodes: Vec<Node>,
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn required() -> bool {
    std::env::var("SLIDELOG_REQUIRE_REDIS_CLUSTER").as_deref() == Ok("1")
}

fn skip(reason: String) -> Option<Cluster> {
    assert!(
        !required(),
        "SLIDELOG_REQUIRE_REDIS_CLUSTER=1 but the cluster could not start: {reason}"
    );
    // Straight to the terminal (eprintln! is captured for passing tests).
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "skipped: Redis Cluster tests: {reason}; set SLIDELOG_REQUIRE_REDIS_CLUSTER=1 to fail instead"
    );
    None
}

pub fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn cluster() -> Option<Cluster> {
    cluster_with(|_| Vec::new())
}

/// [`cluster`] with more arguments for the node on `port`.
pub fn cluster_with(extra: impl Fn(u16) -> Vec<String>) -> Option<Cluster> {
    cluster_of(0, extra)
}

/// Three masters with a replica each (six nodes, the masters first in
/// `nodes`), for failover: a killed master's replica takes its slots
/// after the node timeout (2 s).
pub fn cluster_with_replicas() -> Option<Cluster> {
    cluster_of(1, |_| Vec::new())
}

fn cluster_of(replicas: usize, extra: impl Fn(u16) -> Vec<String>) -> Option<Cluster> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slidelog-cluster-{}-{id}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cluster = Cluster {
        nodes: Vec::new(),
        dir: dir.clone(),
    };
    let start = Instant::now();
    for _ in 0..3 * (1 + replicas) {
        let dir = dir.clone();
        let extra = &extra;
        let started = super::redis_server::start(move |port| {
            let mut args: Vec<String> = ["--cluster-enabled", "yes"].map(String::from).to_vec();
            args.push("--cluster-config-file".into());
            args.push(format!("nodes-{port}.conf"));
            args.extend(["--cluster-node-timeout", "2000"].map(String::from));
            // A killed shard must not stop the others from answering.
            args.extend(["--cluster-require-full-coverage", "no"].map(String::from));
            args.extend(["--save", "", "--appendonly", "no"].map(String::from));
            // A replica's first sync at once, not after the default 5 s.
            args.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
            args.push("--dir".into());
            args.push(dir.display().to_string());
            args.extend(extra(port));
            args
        });
        match started {
            Ok((child, port)) => cluster.nodes.push(Node {
                child: Some(child),
                port,
            }),
            Err(e) => return skip(e),
        }
    }
    let addresses: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match created {
        Ok(status) if status.success() => {}
        Ok(status) => return skip(format!("redis-cli --cluster create: {status}")),
        Err(e) => return skip(format!("redis-cli: {e}")),
    }
    for node in &cluster.nodes {
        loop {
            let info = cli(node.port, &["cluster", "info"]).unwrap_or_default();
            if info.contains("cluster_state:ok") {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                return skip(format!("no cluster_state:ok on {}: {info}", node.port));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Some(cluster)
}

impl Cluster {
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// The port of the master that owns `key`'s slot.
    pub fn owner(&self, key: &str) -> u16 {
        let port = self.nodes.iter().find(|n| n.child.is_some()).unwrap().port;
        let slot: u16 = cli(port, &["cluster", "keyslot", key])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let nodes = cli(node.port, &["cluster", "nodes"]).unwrap_or_default();
            for line in nodes.lines().filter(|l| l.contains("myself")) {
                for range in line.split_whitespace().skip(8) {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    if let (Ok(lo), Ok(hi)) = (lo.parse::<u16>(), hi.parse::<u16>())
                        && (lo..=hi).contains(&slot)
                    {
                        return node.port;
                    }
                }
            }
        }
        panic!("no master owns slot {slot} of {key}");
    }
}
