//! One limit shared by several processes, through Redis: two clients (two
//! connections, as two servers behind a load balancer would have) share
//! "5 per 10 seconds" on one key exactly; a reconfiguration and a reset
//! reach both.
//!
//! ```sh
//! redis-server &                                         # or docker run -p 6379:6379 redis
//! cargo run --example redis --features redis             # redis://127.0.0.1/
//! cargo run --example redis --features redis -- redis://host:6379/
//! ```

use std::time::Duration;

use slidelog::Quota;
use slidelog::redis::{Layout, RedisLimitError, RedisLimiter};

/// Runs the walk-through against `url` under key prefix `prefix`; returns
/// what it printed.
pub(crate) async fn walk_through(url: &str, prefix: &str) -> Result<String, RedisLimitError> {
    let mut out = String::new();
    let mut say = |line: String| {
        println!("{line}");
        out.push_str(&line);
        out.push('\n');
    };
    let connect = || {
        RedisLimiter::builder(url, 5, Duration::from_secs(10))
            .layout(Layout::Ring)
            .prefix(prefix)
            .connect()
    };
    let (a, b) = (connect().await?, connect().await?);
    a.reset("user:42").await?; // start clean if run twice
    let mut admitted = 0;
    for i in 0..8 {
        let client = if i % 2 == 0 { &a } else { &b };
        let name = if i % 2 == 0 { "server A" } else { "server B" };
        match client.check("user:42").await? {
            Ok(ok) => {
                admitted += 1;
                say(format!("{name}: admitted, {} left", ok.remaining()));
            }
            Err(denied) => say(format!(
                "{name}: denied, retry in {:.1} s",
                denied.retry_after().as_secs_f64()
            )),
        }
    }
    say(format!(
        "{admitted} of 8 admitted across both servers (limit 5)"
    ));

    // An incident: both cut to 3 — each process reconfigures its limiter;
    // the key's history in Redis is kept.
    for client in [&a, &b] {
        client
            .reconfigure(Quota::new(3, Duration::from_secs(10)).expect("a valid quota"))
            .expect("a validated quota");
    }
    let room = a.peek("user:42").await?;
    say(format!(
        "after the cut to 3: {}",
        match room {
            Ok(_) => "room left".to_string(),
            Err(d) => format!("still denied for {:.1} s", d.retry_after().as_secs_f64()),
        }
    ));
    // A support agent clears the key: both servers admit again at once.
    a.reset("user:42").await?;
    let after = b.check("user:42").await?;
    say(format!(
        "after the reset, server B: {}",
        if after.is_ok() { "admitted" } else { "denied" }
    ));
    a.reset("user:42").await?;
    Ok(out)
}

#[allow(dead_code)] // (the Redis tests include this file for `walk_through`)
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1/".into());
    if let Err(e) = walk_through(&url, "slidelog-example:").await {
        match e {
            RedisLimitError::Redis(e) if e.is_connection_refusal() => eprintln!(
                "no Redis at {url}: start one (`redis-server`, or `docker run -p 6379:6379 redis`), or pass its URL"
            ),
            e => eprintln!("{url}: {e}"),
        }
        std::process::exit(1);
    }
}
