//! One descriptor's decision in a rate-limit service, side by side:
//! limitador's in-memory `check_rate_limited_and_update` (the crate behind
//! Kuadrant's Envoy rate-limit service, default features off: no RocksDB)
//! against what `slidelog serve` does per descriptor (the limiter key built
//! from the descriptor, and `check_n_with_growth` on a `KeyedLimiter`: the
//! decision and, for an admission, `duration_until_reset` from the same
//! pass).
//!
//! Each call starts from the descriptor's value as a string, as both
//! services do per request: limitador builds its CEL context
//! (`descriptors[0].remote_address`), slidelog its key. Rounds alternate
//! between the two (the host is noisy: only interleaved rounds compare) and
//! the medians are printed beside the CPU model.
//!
//! `cargo bench -p slidelog-peers --bench rls_side_by_side` (add `-- quick` for fewer rounds).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use limitador::RateLimiter;
use limitador::limit::{Context, Limit};
use slidelog::KeyedLimiter;

mod common;

use common::{cpu_model, median};

/// Distinct descriptor values (client addresses).
const VALUES: usize = 65_536;

fn values() -> Vec<String> {
    (0..VALUES)
        .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
        .collect()
}

/// limitador, as its Envoy service calls it: one namespace per domain, the
/// descriptor bound as `descriptors[0]`, one limit per address.
fn limitador(limit: u64, seconds: u64) -> impl FnMut(&str) -> bool {
    let limiter = RateLimiter::new(1_000_000);
    limiter.add_limit(Limit::new(
        "edge",
        limit,
        seconds,
        [],
        ["descriptors[0].remote_address"
            .try_into()
            .expect("a valid CEL variable")],
    ));
    let namespace = "edge".into();
    move |value: &str| {
        let mut ctx = Context::default();
        ctx.list_binding(
            "descriptors".into(),
            vec![HashMap::from([(
                "remote_address".to_string(),
                value.to_string(),
            )])],
        );
        let result = limiter
            .check_rate_limited_and_update(&namespace, &ctx, 1)
            .expect("the in-memory store does not fail");
        !result.limited
    }
}

/// slidelog, as `slidelog serve` decides one descriptor in process.
fn slidelog(limit: u32, window: Duration) -> impl FnMut(&str) -> bool {
    let limiter = KeyedLimiter::<String>::new(limit, window).expect("a valid quota");
    move |value: &str| {
        let mut key = String::with_capacity(32);
        key.push_str("edge\u{1f}remote_address\u{1e}");
        key.push_str(value);
        match limiter.check_n_with_growth(&key, 1) {
            Ok((admitted, until_reset)) => {
                black_box((admitted.remaining(), until_reset));
                true
            }
            Err(denied) => {
                black_box(denied.retry_after());
                false
            }
        }
    }
}

/// ns per call of `decide` over `calls` calls cycling through `values`,
/// and how many were admitted.
fn round(decide: &mut dyn FnMut(&str) -> bool, values: &[String], calls: usize) -> (f64, usize) {
    let started = Instant::now();
    let mut admitted = 0;
    for i in 0..calls {
        admitted += usize::from(decide(black_box(&values[(i * 40_503) % values.len()])));
    }
    (started.elapsed().as_nanos() as f64 / calls as f64, admitted)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (rounds, calls) = if quick { (3, 20_000) } else { (9, 100_000) };
    println!("CPU: {}", cpu_model());
    println!("one descriptor's decision, ns per call (median of {rounds} alternating rounds)");
    let values = values();
    // allow: 65,536 addresses at 64 per second each (the rounds spread a
    // few calls over each); deny: 256 addresses, 3 per hour, full.
    let scenarios: [(&str, &[String], u64, u64, bool); 2] = [
        ("allow, 65,536 addresses, 64 per 1 s", &values, 64, 1, false),
        (
            "deny, 256 addresses, 3 per hour, full",
            &values[..256],
            3,
            3_600,
            true,
        ),
    ];
    println!("| scenario | limitador | slidelog | slidelog / limitador |");
    println!("|---|---|---|---|");
    for (name, values, limit, seconds, fill) in scenarios {
        let mut theirs = limitador(limit, seconds);
        let mut ours = slidelog(
            u32::try_from(limit).expect("small"),
            Duration::from_secs(seconds),
        );
        // Warm up: every address seen once (for deny: every window full).
        for value in values {
            for _ in 0..if fill { limit } else { 1 } {
                theirs(value);
                ours(value);
            }
        }
        let (mut t, mut o) = (Vec::new(), Vec::new());
        let (mut t_admitted, mut o_admitted) = (0, 0);
        for _ in 0..rounds {
            let (ns, n) = round(&mut theirs, values, calls);
            t.push(ns);
            t_admitted += n;
            let (ns, n) = round(&mut ours, values, calls);
            o.push(ns);
            o_admitted += n;
        }
        let (t, o) = (median(t), median(o));
        println!("| {name} | {t:.0} | {o:.0} | {:.2} |", o / t);
        println!(
            "  (admitted: limitador {t_admitted}, slidelog {o_admitted} of {} each)",
            rounds * calls
        );
    }
}
