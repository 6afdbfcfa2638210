//! `slidelog demo --redis URL`: the shared limit across processes, tried
//! in one command against a running `redis-server`. Several clients, each
//! with its own connection (as separate processes would have), hammer one
//! key; every admission's time is Redis's own clock, and no window of it
//! holds more than the limit.

use std::time::{Duration, Instant};

use slidelog::redis::{Layout, RedisLimitError, RedisLimiter};

/// What to run against `url`.
pub(crate) struct Options<'a> {
    pub(crate) url: &'a str,
    pub(crate) clients: usize,
    pub(crate) limit: u32,
    pub(crate) window: Duration,
    pub(crate) duration: Duration,
}

pub(crate) fn run(options: &Options<'_>) -> Result<(), String> {
    // One thread: the clients are I/O-bound, interleaved on their awaits.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(demo(options))
}

async fn connect(
    options: &Options<'_>,
    layout: Layout,
    prefix: &str,
) -> Result<RedisLimiter, String> {
    RedisLimiter::builder(options.url, options.limit, options.window)
        .layout(layout)
        .prefix(prefix)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .map_err(|e| match e {
            RedisLimitError::Redis(e) if e.is_connection_refusal() => format!(
                "no Redis at {}: start one (`redis-server`, or `docker run -p 6379:6379 redis`) or pass --redis URL",
                options.url
            ),
            e => format!("{}: {e}", options.url),
        })
}

async fn demo(options: &Options<'_>) -> Result<(), String> {
    if options.clients == 0 {
        return Err("--threads must be at least 1".into());
    }
    // Fail before printing anything if there is no Redis.
    connect(options, Layout::Ring, "slidelog-demo:probe:").await?;
    println!(
        "slidelog demo --redis {}: {} clients (one connection each), limit {} per {:?} on one shared key, {:?} per layout",
        options.url, options.clients, options.limit, options.window, options.duration
    );
    let window_ns = options.window.as_nanos() as u64;
    let run_id = std::process::id();
    let mut exact = true;
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>16} {:>8}",
        "layout", "checks/s", "admitted", "denied", "max in window", "exact"
    );
    for layout in [Layout::Ring, Layout::SortedSet] {
        let prefix = format!("slidelog-demo:{run_id}:");
        let mut clients = Vec::new();
        for _ in 0..options.clients {
            clients.push(connect(options, layout, &prefix).await?);
        }
        let started = Instant::now();
        let deadline = started + options.duration;
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|limiter| {
                tokio::spawn(async move {
                    let (mut admitted, mut checks) = (Vec::new(), 0u64);
                    while Instant::now() < deadline {
                        checks += 1;
                        match limiter.check("shared").await {
                            Ok(Ok(a)) => admitted.push(a.at()),
                            Ok(Err(_)) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Ok((admitted, checks))
                })
            })
            .collect();
        let (mut times, mut checks) = (Vec::new(), 0u64);
        for task in tasks {
            let (admitted, n) = task.await.map_err(|e| e.to_string())??;
            times.extend(admitted);
            checks += n;
        }
        let elapsed = started.elapsed();
        times.sort_unstable();
        let mut most = 0;
        let mut lo = 0;
        for hi in 0..times.len() {
            while times[lo] + window_ns <= times[hi] {
                lo += 1;
            }
            most = most.max(hi - lo + 1);
        }
        let ok = most <= options.limit as usize;
        exact &= ok;
        println!(
            "{:<12} {:>10.0} {:>10} {:>10} {:>10} / {:<3} {:>8}",
            format!("{layout:?}"),
            checks as f64 / elapsed.as_secs_f64(),
            times.len(),
            checks - times.len() as u64,
            most,
            options.limit,
            if ok { "yes" } else { "NO" }
        );
        let cleanup = connect(options, layout, &prefix).await?;
        let _ = cleanup.remove("shared").await;
    }
    println!();
    if exact {
        println!(
            "exact: yes (no window of Redis's clock held more than the limit, across every client)"
        );
        Ok(())
    } else {
        Err("a window held more than the limit".into())
    }
}
