//! The Redis backend against a real `redis-server` on loopback.
//!
//! The harness uses `SLIDELOG_REDIS_URL` if set, otherwise starts
//! `redis-server` from PATH on a free port (and stops it), otherwise skips
//! with a printed notice — unless `SLIDELOG_REQUIRE_REDIS=1` (set by
//! `.ci/run`), when a missing server is a failure.

#![cfg(feature = "redis")]

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::max_in_window;

#[path = "../examples/redis.rs"]
#[allow(dead_code)]
mod example;
use slidelog::redis::{FailurePolicy, Layout, RedisLimitError, RedisLimiter};

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

impl Server {
    fn kill(&mut self) {
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn limiter(
    url: &str,
    limit: u32,
    window: Duration,
    layout: Layout,
    prefix: &str,
) -> RedisLimiter {
    RedisLimiter::builder(url, limit, window)
        .layout(layout)
        .prefix(prefix)
        .connect()
        .await
        .unwrap()
}

/// The reference-model property test through Redis, both layouts.
#[test]
fn both_layouts_equal_the_model() {
    let Some(server) = server() else { return };
    let rt = runtime();
    let url = server.url.clone();
    common::redis_model::layouts_equal_the_model(&rt, 48, |limit, window, layout, id| {
        let url = url.clone();
        async move {
            let l = limiter(&url, limit, window, layout, &format!("model{id}:")).await;
            (l, "k".to_string())
        }
    });
}

/// Several policies per key (`.and`), both layouts, against the
/// multi-policy model (P7 on Redis).
#[test]
fn several_policies_equal_the_model() {
    let Some(server) = server() else { return };
    let rt = runtime();
    let url = server.url.clone();
    common::redis_model::policies_equal_the_model(&rt, 48, |policies, layout, id| {
        let url = url.clone();
        async move {
            let mut b = RedisLimiter::builder(url.as_str(), policies[0].0, policies[0].1)
                .layout(layout)
                .prefix(format!("multi{id}:"));
            for &(limit, window) in &policies[1..] {
                b = b.and(limit, window);
            }
            (b.connect().await.unwrap(), "k".to_string())
        }
    });
}

/// Live reconfiguration (P9 on Redis), both layouts, against the model
/// with reconfigurations interleaved: a key keeps what every policy set
/// that has called it needs (the ring grows, never shrinks while the key
/// lives; the sorted set trims by the longest window that has judged it).
#[test]
fn reconfigurations_equal_the_model() {
    let Some(server) = server() else { return };
    let rt = runtime();
    let url = server.url.clone();
    common::redis_model::reconfigurations_equal_the_model(&rt, 64, |policies, layout, id| {
        let url = url.clone();
        async move {
            let mut b = RedisLimiter::builder(url.as_str(), policies[0].0, policies[0].1)
                .layout(layout)
                .prefix(format!("reconf{id}:"));
            for &(limit, window) in &policies[1..] {
                b = b.and(limit, window);
            }
            (b.connect().await.unwrap(), "k".to_string())
        }
    });
}

/// Several policies at 16-digit Unix microsecond times, windows of any
/// microsecond, both layouts, against the model: every boundary, retry
/// time and growth to the microsecond (the server's own times; Lua's
/// default number format rounds them to 14 digits).
#[test]
fn several_policies_at_unix_times_equal_the_model() {
    let Some(server) = server() else { return };
    let rt = runtime();
    let url = server.url.clone();
    common::redis_model::policies_equal_the_model_at_unix_times(
        &rt,
        256,
        |policies, layout, id| {
            let url = url.clone();
            async move {
                let mut b = RedisLimiter::builder(url.as_str(), policies[0].0, policies[0].1)
                    .layout(layout)
                    .prefix(format!("unix{id}:"));
                for &(limit, window) in &policies[1..] {
                    b = b.and(limit, window);
                }
                (b.connect().await.unwrap(), "k".to_string())
            }
        },
    );
}

/// Two limiters of different policy sets (`with_quota`) alternating at
/// random on the same keys, both layouts, a few thousand calls: each call
/// equals the model judging it by its own limiter's policies over what the
/// key keeps, and no window of a length both use holds more than the
/// largest limit of that length.
#[test]
fn alternating_policy_sets_equal_the_model() {
    let Some(server) = server() else { return };
    let rt = runtime();
    let url = server.url.clone();
    common::redis_model::alternating_policy_sets_equal_the_model(&rt, 48, |a, b, layout, id| {
        let url = url.clone();
        async move {
            let mut builder = RedisLimiter::builder(url.as_str(), a[0].0, a[0].1)
                .layout(layout)
                .prefix(format!("alt{id}:"));
            for &(limit, window) in &a[1..] {
                builder = builder.and(limit, window);
            }
            let first = builder.connect().await.unwrap();
            let second = first.with_quota(&quota(&b));
            (first, second, "k".to_string())
        }
    });
}

/// A `Quota` of `policies`.
fn quota(policies: &[(u32, Duration)]) -> slidelog::Quota {
    let mut quota = slidelog::Quota::new(policies[0].0, policies[0].1).unwrap();
    for &(limit, window) in &policies[1..] {
        quota = quota.and(limit, window).unwrap();
    }
    quota
}

/// A 16-digit Unix time in microseconds, for the server-time override.
const UNIX_US: u64 = 1_765_432_109_876_543;

/// 10 and 5 a minute on one key, alternating (two `with_quota` siblings,
/// or two replicas on different configurations mid-deploy): the minute
/// holds 10 admissions, the largest limit, whichever limiter asks; both
/// layouts.
#[test]
fn two_policy_sets_on_one_key_hold_the_largest_limit() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let minute = Duration::from_secs(60);
        for layout in [Layout::SortedSet, Layout::Ring] {
            let ten = limiter(&server.url, 10, minute, layout, &format!("two-{layout:?}:")).await;
            let five = ten.with_quota(&slidelog::Quota::new(5, minute).unwrap());
            let mut admitted = [0, 0];
            for i in 0..50 {
                for (side, l) in [&ten, &five].into_iter().enumerate() {
                    let t = UNIX_US + (2 * i + side as u64) * 1_000;
                    if l.check_n_at_server_time_override("k", 1, t)
                        .await
                        .unwrap()
                        .is_ok()
                    {
                        admitted[side] += 1;
                    }
                }
            }
            assert_eq!(
                admitted,
                [8, 2],
                "{layout:?}: admitted (10/min, 5/min) in one minute"
            );
        }
    });
}

/// 10 a minute, 10 admitted; cut to 5 a minute (a call meets it) and
/// restored to 10 within two seconds: nothing more fits in the minute,
/// both layouts.
#[test]
fn a_cut_and_restore_admits_nothing_more_in_the_window() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let minute = Duration::from_secs(60);
        for layout in [Layout::SortedSet, Layout::Ring] {
            let l = limiter(&server.url, 10, minute, layout, &format!("cut-{layout:?}:")).await;
            for i in 0..10 {
                let admitted = l.check_n_at_server_time_override("k", 1, UNIX_US + i).await;
                assert!(admitted.unwrap().is_ok(), "{layout:?} {i}");
            }
            l.reconfigure(slidelog::Quota::new(5, minute).unwrap())
                .unwrap();
            let cut = l
                .check_n_at_server_time_override("k", 1, UNIX_US + 1_000_000)
                .await;
            assert!(cut.unwrap().is_err(), "{layout:?}: 10 in a window of 5");
            l.reconfigure(slidelog::Quota::new(10, minute).unwrap())
                .unwrap();
            for i in 0..5 {
                let t = UNIX_US + 2_000_000 + i;
                let denied = l.check_n_at_server_time_override("k", 1, t).await.unwrap();
                // The oldest of the ten leaves at its minute's end.
                assert_eq!(
                    denied.unwrap_err().retry_after(),
                    Duration::from_micros(60_000_000 - 2_000_000 - i),
                    "{layout:?} {i}"
                );
            }
        }
    });
}

/// A window grown while the key lives recalls its admissions, as the
/// in-process `Limiter` does; the key lives the longest window in force
/// after its last admission, and a window grown after that recalls
/// nothing (the key has expired), where `Limiter` still recalls what its
/// ring kept. Both layouts.
#[test]
fn a_grown_window_recalls_what_the_key_still_holds() {
    use slidelog::{Limiter, ManualClock, Quota};
    let Some(server) = server() else { return };
    let rt = runtime();
    let second = Duration::from_secs(1);
    let ten = Duration::from_secs(10);
    // In process: 2 a second, two admitted; grown to 2 per 10 s 5 s later
    // (and 2 s later), both recalled.
    let clock = ManualClock::new();
    let local = Limiter::with_clock(2, second, clock.clone()).unwrap();
    local.check_n(2).unwrap();
    clock.advance(Duration::from_secs(5));
    local.reconfigure(Quota::new(2, ten).unwrap()).unwrap();
    assert!(local.check().is_err(), "in process: recalled");
    rt.block_on(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        for layout in [Layout::SortedSet, Layout::Ring] {
            let l = limiter(&server.url, 2, second, layout, &format!("grow-{layout:?}:")).await;
            for key in ["live", "expired"] {
                let two = l.check_n_at_server_time_override(key, 2, UNIX_US).await;
                assert!(two.unwrap().is_ok());
                let ttl: i64 = redis::cmd("PTTL")
                    .arg(l.redis_key(key))
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(
                    ttl > 0 && ttl <= 1_001,
                    "{layout:?}: the key lives 1 s: {ttl}"
                );
            }
            // The server's clock passes the second: the key is gone.
            tokio::time::sleep(Duration::from_millis(1_100)).await;
            let gone: i64 = redis::cmd("EXISTS")
                .arg(l.redis_key("expired"))
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(gone, 0, "{layout:?}");
            l.reconfigure(Quota::new(2, ten).unwrap()).unwrap();
            let t = UNIX_US + 5_000_000;
            let fresh = l.check_n_at_server_time_override("expired", 1, t).await;
            assert_eq!(
                fresh.unwrap().unwrap().remaining(),
                1,
                "{layout:?}: nothing recalled"
            );
            // Grown before the key expired (the server-time override
            // stands for the five seconds): both recalled.
            let l2 = limiter(
                &server.url,
                2,
                second,
                layout,
                &format!("grow2-{layout:?}:"),
            )
            .await;
            let two = l2.check_n_at_server_time_override("live", 2, UNIX_US).await;
            assert!(two.unwrap().is_ok());
            l2.reconfigure(Quota::new(2, ten).unwrap()).unwrap();
            let recalled = l2.check_n_at_server_time_override("live", 1, t).await;
            assert_eq!(
                recalled.unwrap().unwrap_err().retry_after(),
                Duration::from_secs(5),
                "{layout:?}: recalled, as in process"
            );
        }
    });
}

/// Window boundaries, retry times and growth to the microsecond at
/// 16-digit Unix microsecond times (Lua's default number format keeps 14
/// digits), with one policy and with a shorter policy beside a longer one,
/// both layouts.
#[test]
fn boundaries_are_exact_to_the_microsecond_at_unix_times() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let two = Duration::from_secs(2);
        for layout in [Layout::SortedSet, Layout::Ring] {
            let one = limiter(&server.url, 1, two, layout, &format!("us1-{layout:?}:")).await;
            let both = RedisLimiter::builder(server.url.as_str(), 1, two)
                .and(100, Duration::from_secs(4))
                .layout(layout)
                .prefix(format!("us2-{layout:?}:"))
                .connect()
                .await
                .unwrap();
            for l in [&one, &both] {
                let policies = l.policies().len();
                let (admitted, grows) = l
                    .check_n_with_growth_at_server_time_override("k", 1, UNIX_US)
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(admitted.at(), UNIX_US * 1_000);
                assert_eq!(grows, two, "{layout:?} {policies}: ours leaves in 2 s");
                let late = UNIX_US + 2_000_000 - 1;
                let denied = l.check_n_at_server_time_override("k", 1, late).await;
                assert_eq!(
                    denied.unwrap().unwrap_err().retry_after(),
                    Duration::from_micros(1),
                    "{layout:?} {policies}: one microsecond before the boundary"
                );
                let at = UNIX_US + 2_000_000;
                let (admitted, grows) = l
                    .check_n_with_growth_at_server_time_override("k", 1, at)
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(admitted.remaining(), 0, "{layout:?} {policies}");
                assert_eq!(grows, two, "{layout:?} {policies}");
            }
            // Three a second: the second admission, 10 µs after the first,
            // leaves the room at one until the first leaves.
            let three = limiter(&server.url, 3, two, layout, &format!("us3-{layout:?}:")).await;
            let first = three.check_n_at_server_time_override("k", 1, UNIX_US).await;
            assert!(first.unwrap().is_ok());
            let (admitted, grows) = three
                .check_n_with_growth_at_server_time_override("k", 1, UNIX_US + 10)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(admitted.remaining(), 1);
            assert_eq!(grows, two - Duration::from_micros(10), "{layout:?}");
        }
    });
}

/// Many clients (tasks with their own connections) on one key: no window
/// holds more than the limit, on the server's clock.
#[test]
fn concurrent_clients_never_over_admit() {
    let Some(server) = server() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for layout in [Layout::SortedSet, Layout::Ring] {
        let (limit, window) = (10u32, Duration::from_millis(200));
        let mut ats = rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..6 {
                let l = limiter(
                    &server.url,
                    limit,
                    window,
                    layout,
                    &format!("conc{layout:?}:"),
                )
                .await;
                tasks.push(tokio::spawn(async move {
                    let mut ats = Vec::new();
                    let stop = Instant::now() + Duration::from_millis(700);
                    while Instant::now() < stop {
                        if let Ok(a) = l.check("shared").await.unwrap() {
                            ats.push(a.at());
                        }
                    }
                    ats
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        });
        assert!(
            ats.len() >= limit as usize,
            "{layout:?}: {} admitted",
            ats.len()
        );
        let max = max_in_window(&mut ats, window.as_nanos() as u64);
        assert!(
            max <= limit as usize,
            "{layout:?}: {max} admissions in one window"
        );
    }
}

#[test]
fn faults_follow_the_policy() {
    let rt = runtime();
    // A refused connection: reported as refused (the redis error as the
    // source), at once, not as a timeout.
    rt.block_on(async {
        let start = Instant::now();
        let err = RedisLimiter::builder("redis://127.0.0.1:1/", 5, Duration::from_secs(1))
            .timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, RedisLimitError::Redis(e) if e.is_connection_refusal()),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
        assert!(
            start.elapsed() < Duration::from_millis(400),
            "{:?}",
            start.elapsed()
        );
        // The same for a cluster whose seeds all refuse.
        let err =
            RedisLimiter::cluster_builder(["redis://127.0.0.1:1/"], 5, Duration::from_secs(1))
                .timeout(Duration::from_millis(500))
                .connect()
                .await
                .unwrap_err();
        assert!(matches!(err, RedisLimitError::Redis(_)), "{err}");
        assert!(
            RedisLimiter::builder("not a url", 5, Duration::from_secs(1))
                .connect()
                .await
                .is_err()
        );
        assert!(matches!(
            RedisLimiter::builder("redis://127.0.0.1/", 0, Duration::from_secs(1))
                .connect()
                .await,
            Err(RedisLimitError::Config(_))
        ));
    });

    let Some(mut server) = server() else { return };
    if server.child.is_none() {
        eprintln!("NOTICE: external SLIDELOG_REDIS_URL: not killing it; skipping the kill test");
        return;
    }
    rt.block_on(async {
        let mk = |policy| {
            RedisLimiter::builder(server.url.clone(), 5, Duration::from_secs(10))
                .failure_policy(policy)
                .timeout(Duration::from_millis(300))
                .prefix("faults:")
                .connect()
        };
        let (error, open, closed) = (
            mk(FailurePolicy::Error).await.unwrap(),
            mk(FailurePolicy::Open).await.unwrap(),
            mk(FailurePolicy::Closed).await.unwrap(),
        );
        assert!(error.check("k").await.unwrap().is_ok());

        // SCRIPT FLUSH: the next check reloads the script transparently.
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(error.check("k").await.unwrap().unwrap().remaining(), 3);

        // The server dies mid-run: every policy answers within the timeout.
        server.kill();
        let start = Instant::now();
        assert!(error.check("k").await.is_err());
        assert!(open.check("k").await.unwrap().is_ok());
        let denied = closed.check("k").await.unwrap().unwrap_err();
        assert_eq!(denied.reason(), slidelog::DenyReason::Unavailable);
        assert_eq!(denied.retry_after(), Duration::from_millis(300));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no hang: {:?}",
            start.elapsed()
        );
        assert!(error.stats().failures >= 1);

        // Behind the tower layer, over a real socket: a store that cannot
        // decide is not rate limiting. Fail closed answers 503 with
        // Retry-After (429 on request), fail open passes; neither claims
        // `RateLimit` fields.
        #[cfg(feature = "tower")]
        {
            use slidelog::tower::{Backend, HeaderKey, RateLimitLayer};
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            /// Serves `layer` on loopback and sends one GET with a key:
            /// the status line and the lower-cased head.
            async fn over_http(
                layer: RateLimitLayer<RedisLimiter, HeaderKey, String>,
            ) -> (String, String) {
                let app = axum::Router::new()
                    .route("/", axum::routing::get(|| async { "ok" }))
                    .layer(layer);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
                let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream
                    .write_all(
                        b"GET / HTTP/1.1\r\nHost: t\r\nx-key: k\r\nConnection: close\r\n\r\n",
                    )
                    .await
                    .unwrap();
                let mut raw = String::new();
                stream.read_to_string(&mut raw).await.unwrap();
                let head = raw.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
                (head.lines().next().unwrap().to_string(), head)
            }
            let closed = Arc::new(closed);
            let (status, head) = over_http(RateLimitLayer::new(
                Arc::clone(&closed),
                HeaderKey::new("x-key"),
            ))
            .await;
            assert!(status.contains(" 503 "), "{head}");
            assert!(head.contains("\nretry-after: 1"), "{head}");
            assert!(!head.contains("ratelimit"), "{head}");
            let (status, head) = over_http(
                RateLimitLayer::new(Arc::clone(&closed), HeaderKey::new("x-key"))
                    .unavailable_status(http::StatusCode::TOO_MANY_REQUESTS),
            )
            .await;
            assert!(status.contains(" 429 "), "{head}");
            assert!(!head.contains("ratelimit"), "{head}");
            let open = Arc::new(open);
            let verdict = Backend::check(&*open, "k".to_string()).await;
            assert!(verdict.degraded && verdict.decision.is_ok());
            let (status, head) =
                over_http(RateLimitLayer::new(open, HeaderKey::new("x-key"))).await;
            assert!(status.contains(" 200 "), "{head}");
            assert!(
                !head.contains("ratelimit"),
                "fail open claims no r=0: {head}"
            );
        }
    });
}

/// A server that stops answering (SIGSTOP, as a stalled or paused Redis
/// does) fails each check at the configured timeout with
/// `RedisLimitError::Timeout` naming it — not with the client's own
/// "timed out" I/O error — and fail closed denies with that timeout as
/// `retry_after`. Once it resumes it runs what was sent meanwhile: the
/// check that timed out is counted, so a timeout never admits more.
#[test]
fn a_stalled_server_times_out_as_configured() {
    let Some(server) = server() else { return };
    let Some(child) = &server.child else {
        eprintln!("NOTICE: external SLIDELOG_REDIS_URL: not stopping it; skipping");
        return;
    };
    let signal = |name: &str| common::redis_server::signal(child, name);
    let timeout = Duration::from_millis(200);
    runtime().block_on(async {
        let mk = |policy| {
            RedisLimiter::builder(server.url.clone(), 5, Duration::from_secs(60))
                .failure_policy(policy)
                .timeout(timeout)
                .prefix("stalled:")
                .connect()
        };
        let (error, closed) = (
            mk(FailurePolicy::Error).await.unwrap(),
            mk(FailurePolicy::Closed).await.unwrap(),
        );
        assert_eq!(error.check("k").await.unwrap().unwrap().remaining(), 4);
        assert!(closed.ping().await.is_ok());
        signal("-STOP");
        let stalled = error.check("k").await;
        let denied = closed.check("k").await;
        // A ping tells the stall whatever the failure policy.
        let ping = closed.ping().await;
        signal("-CONT");
        assert!(
            matches!(ping, Err(RedisLimitError::Timeout(t)) if t == timeout),
            "{ping:?}"
        );
        assert!(
            matches!(stalled, Err(RedisLimitError::Timeout(t)) if t == timeout),
            "{stalled:?}"
        );
        let denied = denied.unwrap().unwrap_err();
        assert_eq!(denied.reason(), slidelog::DenyReason::Unavailable);
        assert_eq!(denied.retry_after(), timeout);
        // Both late checks ran once the server resumed (each connection's
        // own: a look through `closed` first, which its late check
        // precedes on its connection).
        assert!(closed.peek_n("k", 1).await.is_ok());
        assert!(closed.ping().await.is_ok());
        assert_eq!(error.check("k").await.unwrap().unwrap().remaining(), 1);
    });
}

/// The failure hook is told of each failed call, with its error, whatever
/// the failure policy answers; a call that succeeds tells it nothing.
#[test]
fn the_failure_hook_is_told_each_failure() {
    let Some(server) = server() else { return };
    let Some(child) = &server.child else {
        eprintln!("NOTICE: external SLIDELOG_REDIS_URL: not stopping it; skipping");
        return;
    };
    let timeout = Duration::from_millis(200);
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = Arc::clone(&told);
    runtime().block_on(async {
        let limiter = RedisLimiter::builder(server.url.clone(), 5, Duration::from_secs(60))
            .failure_policy(FailurePolicy::Open)
            .timeout(timeout)
            .prefix("hook:")
            .on_failure(move |e| hook.lock().unwrap().push(e.to_string()))
            .connect()
            .await
            .unwrap();
        assert!(limiter.check("k").await.unwrap().is_ok());
        assert!(told.lock().unwrap().is_empty());
        common::redis_server::signal(child, "-STOP");
        let open = limiter.check("k").await;
        common::redis_server::signal(child, "-CONT");
        assert!(open.unwrap().is_ok(), "fails open");
        let told = told.lock().unwrap().clone();
        assert_eq!(told, [RedisLimitError::Timeout(timeout).to_string()]);
    });
}

/// The pre-check tier denies locally what Redis would certainly deny, and
/// never what it would admit.
#[test]
fn local_precheck_saves_round_trips() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let l = RedisLimiter::builder(server.url.clone(), 5, Duration::from_millis(300))
            .prefix("pre:")
            .local_precheck(true)
            .connect()
            .await
            .unwrap();
        let start = Instant::now();
        let (mut admitted, mut attempts) = (0, 0);
        while start.elapsed() < Duration::from_millis(1000) {
            attempts += 1;
            if l.check("abuser").await.unwrap().is_ok() {
                admitted += 1;
            }
        }
        let stats = l.stats();
        println!(
            "precheck: {attempts} checks, {} round trips, {} local denials, {admitted} admitted",
            stats.round_trips, stats.local_denials
        );
        assert!(stats.local_denials > stats.round_trips, "{stats:?}");
        // Never denies what Redis would admit: the key still gets its full
        // quota in each window (5 per 300 ms over ~1 s: at least 3 windows).
        assert!(admitted >= 15, "admitted {admitted}");
        assert!(admitted <= 5 * 5, "admitted {admitted}");
    });
}

/// The pre-check remembers at most its capacity of keys: with room for
/// two, a third key's denial is not remembered, and its next check makes
/// the round trip (the first two's are answered locally).
#[test]
fn local_precheck_is_bounded() {
    let Some(server) = server() else { return };
    runtime().block_on(async {
        let l = RedisLimiter::builder(server.url.clone(), 1, Duration::from_secs(60))
            .prefix("bounded:")
            .local_precheck_capacity(2)
            .connect()
            .await
            .unwrap();
        for key in ["a", "b", "c"] {
            assert!(l.check(key).await.unwrap().is_ok());
            assert!(l.check(key).await.unwrap().is_err());
        }
        assert_eq!((l.stats().round_trips, l.stats().local_denials), (6, 0));
        for key in ["a", "b", "c"] {
            assert!(l.check(key).await.unwrap().is_err());
        }
        assert_eq!((l.stats().round_trips, l.stats().local_denials), (7, 2));
    });
}

/// `MEMORY USAGE` per admitted entry for both layouts (printed for
/// BENCHMARKS.md; asserted only loosely).
#[test]
fn memory_usage_per_entry() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        for layout in [Layout::SortedSet, Layout::Ring] {
            let limit = 1000;
            let l = Arc::new(
                limiter(
                    &server.url,
                    limit,
                    Duration::from_secs(60),
                    layout,
                    &format!("mem{layout:?}:"),
                )
                .await,
            );
            for _ in 0..limit {
                assert!(l.check("k").await.unwrap().is_ok());
            }
            assert!(l.check("k").await.unwrap().is_err());
            let bytes: i64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(l.redis_key("k"))
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut conn)
                .await
                .unwrap();
            println!(
                "{layout:?}: MEMORY USAGE {bytes} bytes for {limit} admissions = {:.1} bytes each",
                bytes as f64 / f64::from(limit)
            );
            let ttl: i64 = redis::cmd("PTTL")
                .arg(l.redis_key("k"))
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(ttl > 0 && ttl <= 60_001, "PEXPIRE set: {ttl}");
            if layout == Layout::Ring {
                assert!(bytes < 16 * i64::from(limit), "{bytes}");
            }
        }
    });
}

/// Child mode of `concurrent_processes_never_over_admit`: when
/// `SLIDELOG_REDIS_CHILD` names a server, hammer one key for a while and
/// print the admitted times; otherwise do nothing.
#[test]
fn child_process_client() {
    let Ok(url) = std::env::var("SLIDELOG_REDIS_CHILD") else {
        return;
    };
    let layout = if std::env::var("SLIDELOG_REDIS_LAYOUT").as_deref() == Ok("ring") {
        Layout::Ring
    } else {
        Layout::SortedSet
    };
    let rt = runtime();
    rt.block_on(async {
        // Generous timeouts: four processes start at once on a busy machine.
        let l = RedisLimiter::builder(url, 10, Duration::from_millis(200))
            .layout(layout)
            .prefix(if layout == Layout::Ring {
                "procs:ring:"
            } else {
                "procs:zset:"
            })
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .unwrap();
        let stop = Instant::now() + Duration::from_millis(700);
        while Instant::now() < stop {
            if let Ok(a) = l.check("shared").await.unwrap() {
                println!("AT {}", a.at());
            }
        }
    });
}

/// Several processes on one key: no window holds more than the limit; and
/// the round-trip throughput of one client, for BENCHMARKS.md.
#[test]
fn concurrent_processes_never_over_admit() {
    let Some(server) = server() else { return };
    let exe = std::env::current_exe().unwrap();
    for layout in ["sorted", "ring"] {
        let children: Vec<_> = (0..4)
            .map(|_| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "child_process_client",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("SLIDELOG_REDIS_CHILD", &server.url)
                    .env("SLIDELOG_REDIS_LAYOUT", layout)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut ats: Vec<u64> = Vec::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            ats.extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| l.strip_prefix("AT ")?.trim().parse::<u64>().ok()),
            );
        }
        assert!(
            ats.len() >= 10,
            "{layout}: {} admitted across processes",
            ats.len()
        );
        let max = max_in_window(&mut ats, 200_000_000);
        assert!(
            max <= 10,
            "{layout}: {max} admissions in one window across processes"
        );
    }
    // Round-trip throughput of one client, sequential checks.
    let rt = runtime();
    rt.block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let l = limiter(&server.url, 100, Duration::from_secs(1), layout, &format!("rtt{layout:?}:")).await;
            let start = Instant::now();
            let n = 2_000;
            for i in 0..n {
                let _ = l.check(&format!("k{}", i % 50)).await.unwrap();
            }
            let per = start.elapsed() / n;
            println!("{layout:?}: {per:?} per check round trip ({:.0} checks/s, one connection, sequential)", 1.0 / per.as_secs_f64());
        }
    });
}

/// Behind the tower layer, a Redis admission reports the IETF `t`: the
/// time until the oldest admission in the reported policy's window leaves
/// it, not 0 while `r > 0`; both layouts, two policies.
#[cfg(feature = "tower")]
#[test]
fn the_layer_gets_the_time_until_the_quota_grows() {
    use slidelog::tower::Backend;
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let limiter = RedisLimiter::builder(server.url.as_str(), 2, Duration::from_secs(1))
                .and(5, Duration::from_secs(60))
                .layout(layout)
                .prefix(format!("grows-{layout:?}:"))
                .connect()
                .await
                .unwrap();
            let first = Backend::check(&limiter, "k".to_string()).await;
            let admitted = first.decision.unwrap();
            assert_eq!(
                (admitted.remaining(), admitted.policy()),
                (1, 0),
                "{layout:?}"
            );
            assert_eq!(
                first.wait,
                Duration::from_secs(1),
                "{layout:?}: ours is the oldest"
            );
            let second = Backend::check(&limiter, "k".to_string()).await;
            assert_eq!(second.decision.unwrap().remaining(), 0);
            assert!(
                second.wait > Duration::ZERO && second.wait <= Duration::from_secs(1),
                "{layout:?}: {:?}",
                second.wait
            );
            let third = Backend::check(&limiter, "k".to_string()).await;
            let denied = third.decision.unwrap_err();
            assert_eq!(denied.policy(), 0);
        }
    });
}

/// Through the backend trait a Redis request's units are judged as in
/// process: a dry run records nothing and waits for nothing, units are
/// recorded all or nothing, more than the limit never fit; both layouts.
#[test]
fn the_backend_judges_units_and_dry_runs() {
    use slidelog::{Backend, DenyReason, Request};
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let limiter = RedisLimiter::builder(server.url.as_str(), 10, Duration::from_secs(60))
                .layout(layout)
                .prefix(format!("judge-{layout:?}:"))
                .connect()
                .await
                .unwrap();
            let judge = |request| Backend::judge(&limiter, "k".to_string(), request);
            let look = judge(Request::units(4).dry()).await;
            assert_eq!(look.decision.unwrap().remaining(), 6, "{layout:?}");
            assert_eq!(look.wait, Duration::ZERO, "{layout:?}");
            let four = judge(Request::units(4)).await;
            assert_eq!(
                four.decision.unwrap().remaining(),
                6,
                "{layout:?}: the look recorded nothing"
            );
            assert_eq!(four.wait, Duration::from_secs(60), "{layout:?}");
            assert!(
                judge(Request::units(7).dry()).await.decision.is_err(),
                "{layout:?}"
            );
            let seven = judge(Request::units(7)).await.decision.unwrap_err();
            assert_eq!(seven.reason(), DenyReason::RateLimited, "{layout:?}");
            let one = judge(Request::one()).await;
            assert_eq!(
                one.decision.unwrap().remaining(),
                5,
                "{layout:?}: the denial recorded nothing"
            );
            let never = judge(Request::units(11)).await.decision.unwrap_err();
            assert!(
                matches!(
                    never.reason(),
                    DenyReason::ExceedsLimit {
                        requested: 11,
                        limit: 10
                    }
                ),
                "{layout:?}: {never:?}"
            );
            assert!(!never.is_rate_limited());
        }
    });
}

/// A quota function gives each key its own policies, sent with each call
/// and judged over what the key holds; after its answers change,
/// `requota` judges by the new ones, the key's history kept; both layouts.
#[test]
fn a_quota_function_gives_each_key_its_policies() {
    use slidelog::Backend;
    use std::sync::atomic::{AtomicU32, Ordering};
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let vip = Arc::new(AtomicU32::new(5));
            let configured = Arc::clone(&vip);
            let limiter = RedisLimiter::builder(server.url.as_str(), 2, Duration::from_secs(60))
                .layout(layout)
                .prefix(format!("quota-fn-{layout:?}:"))
                .local_precheck(true)
                .quota(move |key: &str| {
                    let limit = configured.load(Ordering::SeqCst);
                    (key == "vip").then(|| quota(&[(limit, Duration::from_secs(60))]))
                })
                .connect()
                .await
                .unwrap();
            // The others: the limiter's 2 a minute.
            assert!(limiter.check_n("other", 2).await.unwrap().is_ok());
            assert!(limiter.check("other").await.unwrap().is_err(), "{layout:?}");
            // Its own 5 a minute.
            let four = limiter.check_n("vip", 4).await.unwrap().unwrap();
            assert_eq!(four.remaining(), 1, "{layout:?}");
            assert_eq!(
                Backend::key_policies(&limiter, &"vip".to_string()),
                Some(vec![slidelog::Policy::new(5, Duration::from_secs(60))])
            );
            assert_eq!(Backend::key_policies(&limiter, &"other".to_string()), None);
            assert!(
                limiter.check_n("vip", 2).await.unwrap().is_err(),
                "{layout:?}"
            );
            // Cut to 3: the 4 it holds are over; the pre-check's denial of
            // the old quota is dropped, not answered under the new one.
            vip.store(3, Ordering::SeqCst);
            limiter.requota();
            assert!(limiter.check("vip").await.unwrap().is_err(), "{layout:?}");
            // Raised to 6: the 4 it holds leave 2.
            vip.store(6, Ordering::SeqCst);
            limiter.requota();
            assert_eq!(
                limiter.check("vip").await.unwrap().unwrap().remaining(),
                1,
                "{layout:?}"
            );
        }
    });
}

/// A Redis verdict names the rules its script call judged by (the layer's
/// `RateLimit-Policy` is theirs), before and after a reconfiguration, the
/// pre-check's local denials included.
#[cfg(feature = "tower")]
#[test]
fn a_verdict_names_the_rules_that_decided_it() {
    use slidelog::tower::{Backend, DecidedBy, PolicySet};
    use slidelog::{Policy, Quota};
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let minute = Duration::from_secs(60);
        let limiter = RedisLimiter::builder(server.url.as_str(), 1, minute)
            .prefix("decided:")
            .local_precheck(true)
            .connect()
            .await
            .unwrap();
        let named = |limit| DecidedBy::Policies(PolicySet::new(&[Policy::new(limit, minute)]));
        let first = Backend::check(&limiter, "k".to_string()).await;
        assert_eq!((first.decision.is_ok(), first.decided_by), (true, named(1)));
        for _ in 0..2 {
            // Denied by Redis, then by the pre-check.
            let denied = Backend::check(&limiter, "k".to_string()).await;
            assert_eq!(
                (denied.decision.is_err(), denied.decided_by),
                (true, named(1))
            );
        }
        limiter.reconfigure(Quota::new(3, minute).unwrap()).unwrap();
        let moved = Backend::check(&limiter, "k".to_string()).await;
        assert_eq!(moved.decision.unwrap().remaining(), 1);
        assert_eq!(moved.decided_by, named(3));
    });
}

/// The pre-check's local denials name the policy Redis named (here the
/// 1 s policy, index 1), not policy 0; and a deployment that switches from
/// the sorted-set layout to the ring under the same prefix keeps working
/// (the layouts use different key names), its keys starting afresh.
#[test]
fn precheck_denials_name_the_policy_and_layouts_switch_cleanly() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let l = RedisLimiter::builder(server.url.clone(), 5, Duration::from_secs(10))
            .and(3, Duration::from_secs(1))
            .prefix("policy:")
            .local_precheck(true)
            .connect()
            .await
            .unwrap();
        for _ in 0..3 {
            assert!(l.check("k").await.unwrap().is_ok());
        }
        let from_redis = l.check("k").await.unwrap().unwrap_err();
        assert_eq!(from_redis.policy(), 1);
        let before = l.stats();
        let local = l.check("k").await.unwrap().unwrap_err();
        assert_eq!(
            l.stats().local_denials,
            before.local_denials + 1,
            "answered locally"
        );
        assert_eq!(
            local.policy(),
            1,
            "the pre-check names the policy Redis named"
        );

        // Same prefix, the other layout: no WRONGTYPE.
        for layout in [Layout::SortedSet, Layout::Ring, Layout::SortedSet] {
            let l = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(10))
                .prefix("switch:")
                .layout(layout)
                .connect()
                .await
                .unwrap();
            let first = l.check("k").await;
            assert!(
                matches!(first, Ok(Ok(_)) | Ok(Err(_))),
                "{layout:?}: {first:?}"
            );
        }
        let ring = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(10))
            .prefix("switch:")
            .layout(Layout::Ring)
            .connect()
            .await
            .unwrap();
        assert_ne!(ring.redis_key("k"), "switch:k");
    });
}

/// Both layouts on one prefix at once, with sorted-set keys that spell the
/// ring layout's names (`ring:k`) and the escape's (`log:k`, `log:ring:k`):
/// every key has a Redis key of its own, so none fails with `WRONGTYPE` or
/// shares another's log.
#[test]
fn keys_of_both_layouts_never_share_a_redis_key() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let on_one_prefix =
            |layout| limiter(&server.url, 2, Duration::from_secs(10), layout, "both:");
        let (ring, set) = (
            on_one_prefix(Layout::Ring).await,
            on_one_prefix(Layout::SortedSet).await,
        );
        let keys = ["k", "ring:k", "log:k", "log:ring:k", "ring:log:k"];
        let mut names = std::collections::HashSet::new();
        for key in keys {
            assert!(names.insert(ring.redis_key(key)), "ring {key}");
            assert!(names.insert(set.redis_key(key)), "sorted set {key}");
        }
        // Each key's log fills on its own: two admissions each, then a
        // denial, in both layouts, interleaved.
        for round in 0..3 {
            for key in keys {
                for (layout, l) in [("ring", &ring), ("sorted set", &set)] {
                    let decision = l.check(key).await;
                    assert!(
                        matches!(decision, Ok(Ok(_)) if round < 2)
                            || matches!(decision, Ok(Err(_)) if round == 2),
                        "{layout} {key} round {round}: {decision:?}"
                    );
                }
            }
        }
        // Keys without the markers keep their names.
        assert_eq!(set.redis_key("user42"), "both:user42");
        assert_eq!(ring.redis_key("user42"), "both:ring:user42");
    });
}

/// A ring written before the ring kept its size and window in a header
/// (head, then the deadlines) is read as written under the current
/// configuration and carried over: a full ring stays full.
#[test]
fn a_ring_in_the_headerless_format_is_carried_over() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let l = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(10))
            .layout(Layout::Ring)
            .prefix("legacy:")
            .connect()
            .await
            .unwrap();
        // Two admissions at 1 s and 2 s (µs), window 10 s, head = 2.
        let mut raw = Vec::new();
        for word in [2.0f64, 11_000_000.0, 12_000_000.0] {
            raw.extend_from_slice(&word.to_be_bytes());
        }
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("SET")
            .arg(l.redis_key("k"))
            .arg(raw)
            .query_async(&mut conn)
            .await
            .unwrap();
        let denied = l
            .check_n_at_server_time_override("k", 1, 3_000_000)
            .await
            .unwrap()
            .unwrap_err();
        // The oldest (at 1 s) leaves at 11 s.
        assert_eq!(denied.retry_after(), Duration::from_secs(8));
        // Raised to 3: one more fits, over the two carried.
        l.reconfigure(slidelog::Quota::new(3, Duration::from_secs(10)).unwrap())
            .unwrap();
        let admitted = l
            .check_n_at_server_time_override("k", 1, 3_000_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(admitted.remaining(), 0);
    });
}

/// `peek` answers what `check` would and records nothing; `remove` /
/// `reset` forget a key for every client (both layouts), and its local
/// pre-check entry too.
#[test]
fn peek_remove_and_reset() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let l = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(60))
                .layout(layout)
                .prefix(format!("reset-{layout:?}:"))
                .local_precheck(true)
                .connect()
                .await
                .unwrap();
            assert_eq!(l.peek("k").await.unwrap().unwrap().remaining(), 1);
            assert_eq!(l.peek_n("k", 2).await.unwrap().unwrap().remaining(), 0);
            assert_eq!(
                l.check("k").await.unwrap().unwrap().remaining(),
                1,
                "{layout:?}"
            );
            assert_eq!(l.peek("k").await.unwrap().unwrap().remaining(), 0);
            assert!(l.peek_n("k", 2).await.unwrap().is_err());
            assert_eq!(l.check("k").await.unwrap().unwrap().remaining(), 0);
            assert!(l.check("k").await.unwrap().is_err());
            assert!(l.peek("k").await.unwrap().is_err());
            // Another client sees the same key; one reset frees it for all.
            let other = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(60))
                .layout(layout)
                .prefix(format!("reset-{layout:?}:"))
                .connect()
                .await
                .unwrap();
            assert!(other.check("k").await.unwrap().is_err());
            assert!(l.remove("k").await.unwrap());
            assert!(!l.remove("k").await.unwrap(), "already gone");
            assert_eq!(
                l.check("k").await.unwrap().unwrap().remaining(),
                1,
                "pre-check entry gone"
            );
            assert_eq!(other.check("k").await.unwrap().unwrap().remaining(), 0);
            l.reset("k").await.unwrap();
            assert_eq!(other.peek("k").await.unwrap().unwrap().remaining(), 1);
            assert!(matches!(
                l.remove(&"x".repeat(10_000)).await,
                Err(RedisLimitError::KeyTooLong { .. })
            ));
        }
    });
}

/// `with_quota`: other policies on the same connection and the same keys,
/// configured apart from the limiter it came from.
#[test]
fn with_quota_shares_the_connection_and_the_keys() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let minute = Duration::from_secs(60);
        for layout in [Layout::SortedSet, Layout::Ring] {
            let base = limiter(&server.url, 5, minute, layout, &format!("wq-{layout:?}:")).await;
            for _ in 0..3 {
                assert!(base.check("k").await.unwrap().is_ok());
            }
            let before = common::redis_server::client_count(&server.url);
            let derived: Vec<RedisLimiter> = (1..=20)
                .map(|limit| base.with_quota(&slidelog::Quota::new(limit, minute).unwrap()))
                .collect();
            for (limit, d) in (1..).zip(&derived) {
                assert_eq!(d.limit(), limit);
                assert_eq!(d.layout(), layout);
                let fresh = d.check(&format!("fresh-{limit}")).await.unwrap().unwrap();
                assert_eq!(fresh.remaining(), limit - 1, "{layout:?}");
            }
            assert_eq!(
                common::redis_server::client_count(&server.url),
                before,
                "no new connection"
            );
            // The same keys: three admitted through the base fill a window of 2.
            let strict = &derived[1];
            assert!(strict.check("k").await.unwrap().is_err(), "{layout:?}");
            // Configured apart.
            strict
                .reconfigure(slidelog::Quota::new(9, minute).unwrap())
                .unwrap();
            assert_eq!((strict.limit(), base.limit()), (9, 5));
            assert_eq!(base.stats().round_trips, 3, "its own statistics");
        }
    });
}

/// The Redis round-trip histogram and counters through a real Prometheus
/// recorder (local to this test), labelled by the limiter's name.
#[cfg(feature = "metrics")]
#[test]
fn round_trips_are_timed_and_labelled() {
    let Some(server) = server() else { return };
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let rt = runtime();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let l = RedisLimiter::builder(server.url.clone(), 2, Duration::from_secs(60))
                .name("edge")
                .prefix("timed:")
                .connect()
                .await
                .unwrap();
            for _ in 0..3 {
                let _ = l.check("k").await.unwrap();
            }
        })
    });
    let scrape = handle.render();
    assert!(
        scrape.contains(r#"slidelog_redis_round_trips_total{limiter="edge"} 3"#),
        "{scrape}"
    );
    assert!(
        scrape.contains(r#"slidelog_redis_round_trip_seconds_count{limiter="edge"} 3"#),
        "{scrape}"
    );
}

/// `examples/redis.rs` against a real server: two clients share the limit
/// exactly, a cut and a reset reach both.
#[test]
fn the_example_walks_through() {
    let Some(server) = server() else { return };
    let out = runtime()
        .block_on(example::walk_through(&server.url, "example-test:"))
        .unwrap();
    assert!(out.contains("5 of 8 admitted across both servers"), "{out}");
    assert!(out.contains("after the cut to 3: still denied"), "{out}");
    assert!(out.contains("after the reset, server B: admitted"), "{out}");
}

/// `rediss://` with a private CA (`tls_root_cert`): exact over TLS, both
/// layouts; a CA that did not sign the server's certificate is refused at
/// connect, and certificates given for a plain `redis://` URL (one node or
/// a cluster's seeds) are refused rather than ignored.
#[cfg(feature = "redis-tls")]
#[test]
fn tls_with_a_private_ca_is_exact() {
    let pki = common::redis_tls::Pki::new("private-ca");
    let Some(redis) = common::redis_tls::TlsRedis::start(&pki, "server", false) else {
        return;
    };
    let url = redis.url();
    let window = Duration::from_secs(60);
    runtime().block_on(async {
        for layout in [Layout::SortedSet, Layout::Ring] {
            let l = RedisLimiter::builder(url.as_str(), 3, window)
                .layout(layout)
                .tls_root_cert(pki.read("ca.pem"))
                .connect()
                .await
                .unwrap();
            for left in [2, 1, 0] {
                assert_eq!(l.check("k").await.unwrap().unwrap().remaining(), left);
            }
            assert!(l.check("k").await.unwrap().is_err(), "{layout:?}");
        }
        // The scheme in capitals is the same scheme.
        let shouted = RedisLimiter::builder(url.replacen("rediss", "REDISS", 1), 3, window)
            .tls_root_cert(pki.read("ca.pem"))
            .connect()
            .await
            .unwrap();
        assert!(shouted.check("shouted").await.unwrap().is_ok());
        let strange = RedisLimiter::builder(url.as_str(), 3, window)
            .tls_root_cert(pki.read("other-ca.pem"))
            .connect()
            .await;
        let Err(RedisLimitError::Redis(e)) = strange else {
            panic!("connected trusting another CA: {strange:?}");
        };
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");
        let plain = redis.plain_url();
        let on_plain = RedisLimiter::builder(plain.as_str(), 3, window)
            .tls_root_cert(pki.read("ca.pem"))
            .connect()
            .await;
        let seeds = RedisLimiter::cluster_builder([plain.as_str()], 3, window)
            .tls_root_cert(pki.read("ca.pem"))
            .connect()
            .await;
        for refused in [on_plain, seeds] {
            let Err(e) = refused else {
                panic!("certificates used on a redis:// URL");
            };
            assert!(e.to_string().contains("not rediss://"), "{e}");
        }
    });
}

/// Mutual TLS (`tls-auth-clients yes`): without a client certificate the
/// server refuses the client; with one its CA signed, exact.
#[cfg(feature = "redis-tls")]
#[test]
fn mutual_tls_presents_the_client_certificate() {
    let pki = common::redis_tls::Pki::new("mutual");
    let Some(redis) = common::redis_tls::TlsRedis::start(&pki, "server", true) else {
        return;
    };
    let url = redis.url();
    let builder = || {
        RedisLimiter::builder(url.as_str(), 2, Duration::from_secs(60))
            .tls_root_cert(pki.read("ca.pem"))
    };
    runtime().block_on(async {
        let anonymous = match builder().connect().await {
            Ok(l) => l.check("k").await.map(drop),
            Err(e) => Err(e),
        };
        assert!(anonymous.is_err(), "served a client without a certificate");
        let l = builder()
            .tls_client_cert(pki.read("client.pem"), pki.read("client.key"))
            .connect()
            .await
            .unwrap();
        assert_eq!(l.check("k").await.unwrap().unwrap().remaining(), 1);
        assert_eq!(l.check("k").await.unwrap().unwrap().remaining(), 0);
        assert!(l.check("k").await.unwrap().is_err());
    });
}

/// A server whose certificate names another host (GCP Memorystore's,
/// say): refused ("not valid for name") unless `tls_accept_invalid_hostnames`,
/// which still requires the chain to a trusted root.
#[cfg(feature = "redis-tls")]
#[test]
fn tls_accepts_another_hostname_only_when_asked() {
    let pki = common::redis_tls::Pki::new("hostname");
    let Some(redis) = common::redis_tls::TlsRedis::start(&pki, "elsewhere", false) else {
        return;
    };
    let url = redis.url();
    let builder = |ca: &str| {
        RedisLimiter::builder(url.as_str(), 2, Duration::from_secs(60)).tls_root_cert(pki.read(ca))
    };
    runtime().block_on(async {
        let strict = builder("ca.pem").connect().await;
        let Err(RedisLimitError::Redis(e)) = strict else {
            panic!("connected to a certificate for another host: {strict:?}");
        };
        assert!(e.to_string().contains("not valid for name"), "{e}");
        let l = builder("ca.pem")
            .tls_accept_invalid_hostnames(true)
            .connect()
            .await
            .unwrap();
        assert_eq!(l.check("k").await.unwrap().unwrap().remaining(), 1);
        let strange = builder("other-ca.pem")
            .tls_accept_invalid_hostnames(true)
            .connect()
            .await;
        let Err(RedisLimitError::Redis(e)) = strange else {
            panic!("any hostname accepted any issuer: {strange:?}");
        };
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    });
}

/// Behind the tower layer, a Redis limiter of several policies tells each
/// policy's room, as the in-process limiter does, so that the `RateLimit`
/// field carries one item per policy: the same rooms call by call (both
/// layouts), waits within the window of each policy.
#[cfg(feature = "tower")]
#[test]
fn each_policy_is_told_as_in_process() {
    use slidelog::tower::Backend;
    let Some(server) = server() else { return };
    let rt = runtime();
    let (short, long) = (Duration::from_secs(10), Duration::from_secs(3600));
    for layout in [Layout::SortedSet, Layout::Ring] {
        rt.block_on(async {
            let redis = RedisLimiter::builder(&server.url, 3, short)
                .and(5, long)
                .layout(layout)
                .prefix(format!("told-{layout:?}:"))
                .connect()
                .await
                .unwrap();
            let keyed = slidelog::KeyedLimiter::<String>::builder(3, short)
                .and(5, long)
                .clock(slidelog::ManualClock::new())
                .build()
                .unwrap();
            for call in 0..5 {
                let there = Backend::check(&redis, "k".to_string()).await;
                let here = Backend::check(&keyed, "k".to_string()).await;
                assert_eq!(
                    there.decision.is_ok(),
                    here.decision.is_ok(),
                    "{layout:?} call {call}"
                );
                let (there, here) = (there.per_policy.unwrap(), here.per_policy.unwrap());
                let rooms = |states: &slidelog::tower::PolicyStates| {
                    states.as_slice().iter().map(|s| s.0).collect::<Vec<_>>()
                };
                assert_eq!(rooms(&there), rooms(&here), "{layout:?} call {call}");
                for ((&(_, wait), &(_, want)), window) in there
                    .as_slice()
                    .iter()
                    .zip(here.as_slice())
                    .zip([short, long])
                {
                    assert!(
                        wait <= window && want.saturating_sub(wait) < Duration::from_secs(2),
                        "{layout:?} call {call}: waits {wait:?} against {want:?}"
                    );
                }
            }
        });
    }
}

/// The ring's searches beyond the last 128 candidates (slot by slot, then
/// the last ones in one read, wrapping the ring's end or not) against the
/// multi-policy model: limits of 129 to 1,500, bursts of up to 400 units,
/// every other call asking when `remaining` grows.
#[test]
fn long_rings_equal_the_model() {
    use common::multi::{MultiDecision, MultiModel, observed_multi};
    use proptest::prelude::*;
    let Some(server) = server() else { return };
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    let strategy = (
        prop::collection::vec((129..1_500u32, 1..40u64), 1..=3),
        prop::collection::vec(
            (
                prop_oneof![Just(0u64), 0..3_000_000u64, 0..40_000_000u64],
                prop_oneof![0..=3u32, 0..=400u32],
            ),
            1..60,
        ),
    );
    runner
        .run(&strategy, |(policies, ops)| {
            let id = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let us: Vec<(u32, u64)> = policies.iter().map(|&(l, s)| (l, s * 1_000_000)).collect();
            let least = us.iter().map(|p| p.0).min().unwrap();
            rt.block_on(async {
                let mut b = RedisLimiter::builder(
                    server.url.as_str(),
                    us[0].0,
                    Duration::from_micros(us[0].1),
                )
                .layout(Layout::Ring)
                .prefix(format!("long{id}:"));
                for &(limit, window) in &us[1..] {
                    b = b.and(limit, Duration::from_micros(window));
                }
                let l = b.connect().await.unwrap();
                let mut model = MultiModel::new(&us);
                let mut t = 1_765_432_109_000_000u64;
                for (i, (dt, n)) in ops.into_iter().enumerate() {
                    t += dt;
                    let n = n.min(least);
                    let (got, grows) = if i % 2 == 0 {
                        let got = l.check_n_at_server_time_override("k", n, t).await.unwrap();
                        (got, None)
                    } else {
                        match l
                            .check_n_with_growth_at_server_time_override("k", n, t)
                            .await
                            .unwrap()
                        {
                            Ok((admitted, grows)) => (Ok(admitted), Some(grows)),
                            Err(denied) => (Err(denied), None),
                        }
                    };
                    let want = match model.decide(t, n) {
                        MultiDecision::Admitted {
                            at,
                            remaining,
                            policy,
                        } => MultiDecision::Admitted {
                            at: at * 1_000,
                            remaining,
                            policy,
                        },
                        MultiDecision::Denied { until, policy } => MultiDecision::Denied {
                            until: until * 1_000,
                            policy,
                        },
                        other => other,
                    };
                    prop_assert_eq!(
                        observed_multi(t * 1_000, got),
                        want,
                        "t={} n={} policies {:?}",
                        t,
                        n,
                        &us
                    );
                    if let Some(grows) = grows {
                        let want = model.grows_at(t).map_or(0, |g| g - t);
                        prop_assert_eq!(
                            grows,
                            Duration::from_micros(want),
                            "growth: t={} n={} policies {:?}",
                            t,
                            n,
                            &us
                        );
                    }
                }
                Ok(())
            })
        })
        .unwrap();
}

/// `CONFIG RESETSTAT`: `INFO commandstats` counts from here.
async fn reset_stats(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
}

/// `EVALSHA`'s calls and Redis time per call (µs) since the last
/// [`reset_stats`], from `INFO commandstats`.
async fn evalsha_stats(conn: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let line = stats
        .lines()
        .find(|line| line.starts_with("cmdstat_evalsha:"))
        .unwrap_or_else(|| panic!("no cmdstat_evalsha in {stats}"));
    let field = |name: &str| -> f64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .parse()
            .unwrap()
    };
    (field("calls"), field("usec_per_call"))
}

/// The ring script's Redis time per call (`INFO commandstats`,
/// `usec_per_call` of `EVALSHA`) at L = 10, 10^4 and 10^6, printed for
/// docs/redis.md, in two cases of 2,000 checks each, half admitted and
/// half denied:
///
/// - full: the key is filled to its limit (one admission every `W / L`,
///   the newest ones in one call), then checks of one unit, two per
///   `W / L`: the first finds the oldest admission just left, the second
///   finds none;
/// - half full: half the limit in one call, then by turns one unit
///   (admitted) and the whole limit (denied), one pair per `2 W / L`: the
///   room is found by a binary search over the whole ring.
///
/// The script reads the slots a decision needs, not the ring: its time per
/// call at L = 10^6 stays within 3× the one at L = 10 when full, and
/// within 5× when half full (there each check's binary search reads about
/// 4 times as many slots at L = 10^6 as at L = 10).
#[test]
fn ring_script_cost_does_not_grow_with_the_limit() {
    let Some(server) = server() else { return };
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let window = Duration::from_secs(60);
        let w = window.as_micros() as u64;
        let t0 = 1_700_000_000_000_000u64;
        let (mut full, mut half) = (Vec::new(), Vec::new());
        for limit in [10u32, 10_000, 1_000_000] {
            let l = RedisLimiter::builder(server.url.as_str(), limit, window)
                .layout(Layout::Ring)
                .prefix(format!("cost{limit}:"))
                .timeout(Duration::from_secs(60))
                .connect()
                .await
                .unwrap();
            let step = w / u64::from(limit);

            let singles = limit.min(1_000);
            for i in 0..singles {
                let at = t0 + u64::from(i) * step;
                assert!(
                    l.check_n_at_server_time_override("full", 1, at)
                        .await
                        .unwrap()
                        .is_ok()
                );
            }
            if limit > singles {
                let at = t0 + u64::from(singles) * step;
                let rest = limit - singles;
                assert!(
                    l.check_n_at_server_time_override("full", rest, at)
                        .await
                        .unwrap()
                        .is_ok()
                );
            }
            reset_stats(&mut conn).await;
            let (mut admitted, mut denied) = (0, 0);
            for j in 0..2_000u64 {
                let at = t0 + w + j / 2 * step;
                match l
                    .check_n_at_server_time_override("full", 1, at)
                    .await
                    .unwrap()
                {
                    Ok(a) => {
                        assert_eq!((j % 2, a.remaining()), (0, 0), "L = {limit}, check {j}");
                        admitted += 1;
                    }
                    Err(d) => {
                        assert_eq!(j % 2, 1, "L = {limit}, check {j}");
                        assert_eq!(d.retry_after(), Duration::from_micros(step));
                        denied += 1;
                    }
                }
            }
            let (calls, usec) = evalsha_stats(&mut conn).await;
            println!(
                "ring, L = {limit}, full: {usec:.2} µs of Redis time per EVALSHA \
                 ({calls} calls: {admitted} admitted, {denied} denied)"
            );
            assert_eq!(
                (admitted, denied, calls),
                (1_000, 1_000, 2_000.0),
                "L = {limit}"
            );
            full.push(usec);

            assert!(
                l.check_n_at_server_time_override("half", limit / 2, t0)
                    .await
                    .unwrap()
                    .is_ok()
            );
            reset_stats(&mut conn).await;
            let (mut admitted, mut denied) = (0, 0);
            for j in 0..2_000u64 {
                let at = t0 + j / 2 * 2 * step;
                let n = if j % 2 == 0 { 1 } else { limit };
                match l
                    .check_n_at_server_time_override("half", n, at)
                    .await
                    .unwrap()
                {
                    Ok(_) => {
                        assert_eq!(j % 2, 0, "L = {limit}, check {j}");
                        admitted += 1;
                    }
                    Err(_) => {
                        assert_eq!(j % 2, 1, "L = {limit}, check {j}");
                        denied += 1;
                    }
                }
            }
            let (calls, usec) = evalsha_stats(&mut conn).await;
            println!(
                "ring, L = {limit}, half full: {usec:.2} µs of Redis time per EVALSHA \
                 ({calls} calls: {admitted} admitted, {denied} denied)"
            );
            assert_eq!(
                (admitted, denied, calls),
                (1_000, 1_000, 2_000.0),
                "L = {limit}"
            );
            half.push(usec);
        }
        for (case, figures, bound) in [("full", &full, 3.0), ("half full", &half, 5.0)] {
            assert!(
                figures[2] < bound * figures[0],
                "{case}: µs per call at L = 10^6 against L = 10: {figures:?}"
            );
        }
    });
}

/// A call that read its key's quota before a `requota`, and is denied by
/// Redis after it, is not remembered by the pre-check for the key's new
/// quota: the next check is judged by Redis under the new one. (Redis is
/// kept busy by a looping script so the call is in flight across the
/// `requota`.)
#[test]
fn a_denial_judged_before_requota_is_not_remembered() {
    let Some(server) = server() else { return };
    runtime().block_on(async {
        for layout in [Layout::Ring, Layout::SortedSet] {
            let limit = Arc::new(std::sync::Mutex::new(1u32));
            let configured = Arc::clone(&limit);
            let prefix = format!("requota-precheck-{layout:?}:");
            let limiter = RedisLimiter::builder(server.url.clone(), 1_000, Duration::from_secs(60))
                .layout(layout)
                .local_precheck(true)
                .timeout(Duration::from_secs(5))
                .prefix(prefix.as_str())
                .quota(move |_| {
                    slidelog::Quota::new(*configured.lock().unwrap(), Duration::from_secs(60)).ok()
                })
                .connect()
                .await
                .unwrap();
            assert!(limiter.check("k").await.unwrap().is_ok());
            let client = redis::Client::open(server.url.as_str()).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let busy = tokio::spawn(async move {
                let looped: redis::RedisResult<i64> = redis::cmd("EVAL")
                    .arg(
                        "local function us() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end \
                         local start = us() while us() - start < 300000 do end return 1",
                    )
                    .arg(0)
                    .query_async(&mut conn)
                    .await;
                looped
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            let in_flight = {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.check("k").await })
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
            *limit.lock().unwrap() = 100;
            limiter.requota();
            let old = in_flight.await.unwrap().unwrap();
            assert!(old.is_err(), "{layout:?}: judged under the quota of 1: {old:?}");
            assert_eq!(busy.await.unwrap().unwrap(), 1);
            let now = limiter.check("k").await.unwrap();
            assert_eq!(now.unwrap().remaining(), 98, "{layout:?}");
            assert_eq!(limiter.stats().local_denials, 0, "{layout:?}");
        }
    });
}
