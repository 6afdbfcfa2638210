//! Starting a `redis-server` for a test, proof against two races that a
//! "bind port 0, drop it, start the server there, wait for a connect" harness
//! loses now and then:
//!
//! - another test (or process) takes the port between the probe and the
//!   server's own bind: our server exits, and a connect reaches *theirs*,
//!   which may go away mid-test;
//! - a connect to a port nobody listens on yet can succeed against itself
//!   (TCP simultaneous open when the kernel picks the destination port as
//!   the source port), so "connect succeeded" does not mean "server up".
//!
//! So a server counts as ready only when `INFO server` on its port answers
//! with *its* `process_id`; a server that exited is restarted on a new port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port whose cluster-bus twin (port + 10000) is free too.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// `INFO server` over a raw connection: does the server on `port` report
/// process id `pid`?
pub fn answers_as(port: u16, pid: u32) -> bool {
    let ask = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(b"INFO server\r\n")?;
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let Some(len) = header.trim_end().strip_prefix('$') else {
            return Ok(false); // an error reply, e.g. LOADING
        };
        let len: usize = len.parse().unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let body = String::from_utf8_lossy(&body);
        Ok(body
            .lines()
            .any(|line| line.trim_end() == format!("process_id:{pid}")))
    };
    ask().unwrap_or(false)
}

/// Starts `redis-server --port <port> --bind 127.0.0.1 <args(port)>` on a
/// free port and waits until it answers as itself. Returns the child and
/// its port, or why it could not start (`Err` after 5 attempts or 20 s).
/// A throwaway `redis-server` (no persistence) for one test, or `None`
/// with a visible notice when there is none — a failure instead when
/// `SLIDELOG_REQUIRE_REDIS=1` (set by `.ci/run`).
pub fn start_or_skip() -> Option<(Child, u16)> {
    start_or_skip_with(|_| Vec::new())
}

/// [`start_or_skip`] with more arguments for the server on `port`.
pub fn start_or_skip_with(args: impl Fn(u16) -> Vec<String>) -> Option<(Child, u16)> {
    match start(|port| {
        let mut all = ["--save", "", "--appendonly", "no"]
            .map(String::from)
            .to_vec();
        all.extend(args(port));
        all
    }) {
        Ok(started) => Some(started),
        Err(e) => {
            assert!(
                std::env::var("SLIDELOG_REQUIRE_REDIS").as_deref() != Ok("1"),
                "SLIDELOG_REQUIRE_REDIS=1 but redis-server could not be started: {e}"
            );
            // Straight to the terminal (eprintln! is captured for passing
            // tests): a skip must be visible in the summary.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipped: no redis-server ({e}); set SLIDELOG_REQUIRE_REDIS=1 to fail instead"
            );
            None
        }
    }
}

pub fn start(args: impl Fn(u16) -> Vec<String>) -> Result<(Child, u16), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(args(port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server: {e}"))?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Lost the port (or a bad argument): try a fresh port.
                last = format!("redis-server on {port} exited: {status}");
                break;
            }
            if answers_as(port, child.id()) {
                return Ok((child, port));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-server on {port} did not answer in 20 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(last)
}

/// A throwaway `redis-server` on `port` again, after the test stopped the
/// one it had there (clients must find it by reconnecting; not waited for).
pub fn restart_on(port: u16) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// How many clients the server at `url` has connected (`CLIENT LIST`).
pub fn client_count(url: &str) -> usize {
    let out = Command::new("redis-cli")
        .args(["-u", url, "client", "list"])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("id="))
        .count()
}

/// Sends the server process `child` a signal by name (`-STOP`, `-CONT`):
/// a stalled Redis, as a paused VM or a long fork shows one.
pub fn signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, pid.as_str()]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill {signal} {pid}");
}
