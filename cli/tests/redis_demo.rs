//! `slidelog demo --redis URL` against a real `redis-server` on loopback:
//! `SLIDELOG_REDIS_URL` if set, otherwise one started from PATH on a free
//! port, otherwise skipped with a printed notice — unless
//! `SLIDELOG_REQUIRE_REDIS=1`, when a missing server is a failure.

mod common;

use std::process::Child;

/// A Redis for one test: ours (killed on drop) or the one in the environment.
struct Server {
    child: Option<Child>,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn server() -> Option<Server> {
    if let Ok(url) = std::env::var("SLIDELOG_REDIS_URL") {
        return Some(Server { child: None, url });
    }
    let (child, port) = common::redis_server::start_or_skip()?;
    Some(Server {
        child: Some(child),
        url: format!("redis://127.0.0.1:{port}/"),
    })
}

/// `slidelog demo --redis URL`: clients with their own connections on one
/// shared key, both layouts, judged exact on Redis's clock.
#[test]
fn the_demo_runs_against_redis() {
    let Some(server) = server() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args([
            "demo",
            "--redis",
            &server.url,
            "--duration",
            "300ms",
            "--limit",
            "20",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("exact: yes"), "{stdout}");
    assert!(
        stdout.contains("Ring") && stdout.contains("SortedSet"),
        "{stdout}"
    );
}
