//! limitador (Kuadrant's Envoy rate-limit service; its in-memory store,
//! crate `limitador` 0.14 with default features off) beside slidelog on
//! the same calls across the edge of a window.
//!
//! limitador counts in **expiring counters**: a counter starts at a key's
//! first hit and is forgotten a period later, whatever it held. So after
//! one hit at 0 and two at 500 ms (3 per second: full), the counter expires
//! at 1 s and three more are admitted at once: five admissions within half
//! a second. slidelog's log keeps the two at 500 ms until 1.5 s, so on the
//! same timeline it admits one at 1 s, exactly what the window allows.
//!
//! limitador reads the wall clock, so this test runs in real time (about
//! one second); slidelog replays the recorded call times on a
//! [`ManualClock`] and is checked call by call against the reference model.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{Model, ModelDecision, max_in_window, observed};
use limitador::RateLimiter;
use limitador::limit::{Context, Limit};
use slidelog::{Limiter, ManualClock};

const LIMIT: u32 = 3;
const WINDOW: Duration = Duration::from_secs(1);

/// The context limitador's Envoy service builds for one descriptor.
fn context(address: &str) -> Context<'static> {
    let mut ctx = Context::default();
    ctx.list_binding(
        "descriptors".into(),
        vec![HashMap::from([(
            "remote_address".to_string(),
            address.to_string(),
        )])],
    );
    ctx
}

#[test]
fn limitador_admits_five_in_one_window_where_slidelog_admits_three() {
    let limitador = RateLimiter::new(1_000);
    limitador.add_limit(Limit::new(
        "edge",
        u64::from(LIMIT),
        WINDOW.as_secs(),
        [],
        ["descriptors[0].remote_address"
            .try_into()
            .expect("a valid CEL variable")],
    ));
    let namespace = "edge".into();
    let ctx = context("10.0.0.1");

    // The calls: (ns since the first, limitador admitted).
    let start = Instant::now();
    let mut calls: Vec<(u64, bool)> = Vec::new();
    let call = |calls: &mut Vec<(u64, bool)>| {
        let at = u64::try_from(start.elapsed().as_nanos()).expect("short test");
        let result = limitador
            .check_rate_limited_and_update(&namespace, &ctx, 1)
            .expect("the in-memory store does not fail");
        calls.push((at, !result.limited));
    };
    call(&mut calls);
    sleep(WINDOW / 2);
    call(&mut calls);
    call(&mut calls);
    // Full now: wait (without hitting) for the moment limitador forgets
    // its counter, then three more at once.
    let give_up = start + 5 * WINDOW;
    while limitador
        .is_rate_limited(&namespace, &ctx, 1)
        .expect("the in-memory store does not fail")
        .limited
    {
        assert!(
            Instant::now() < give_up,
            "limitador's counter never expired"
        );
        sleep(Duration::from_millis(1));
    }
    // limitador times its counter from its own reading of the first hit,
    // so it may forget it a little before a full window has passed since
    // ours (a loaded host measured 996 ms): wait until our first call has
    // left the window too, so that slidelog has exactly one unit of room.
    let first_leaves = start + WINDOW + Duration::from_millis(1);
    if let Some(rest) = first_leaves.checked_duration_since(Instant::now()) {
        sleep(rest);
    }
    for _ in 0..3 {
        call(&mut calls);
    }

    let window = u64::try_from(WINDOW.as_nanos()).expect("one second");
    let mut theirs: Vec<u64> = calls.iter().filter(|c| c.1).map(|c| c.0).collect();
    assert_eq!(theirs.len(), 6, "limitador admitted every call: {calls:?}");
    let theirs_max = max_in_window(&mut theirs, window);
    assert!(
        theirs_max > LIMIT as usize,
        "limitador kept to {theirs_max} per window here: {calls:?}"
    );

    // slidelog on the same timeline: the reference model's decision at
    // every call, and never more than LIMIT in any window.
    let clock = ManualClock::new();
    let ours_limiter = Limiter::with_clock(LIMIT, WINDOW, clock.clone()).expect("a valid quota");
    let mut model = Model::new(LIMIT, window);
    let mut ours = Vec::new();
    for &(at, _) in &calls {
        clock.set(at);
        let got = observed(ours_limiter.check());
        assert_eq!(got, model.decide(at, 1), "at {at} ns");
        if matches!(got, ModelDecision::Admitted { .. }) {
            ours.push(at);
        }
    }
    let ours_max = max_in_window(&mut ours.clone(), window);
    assert!(ours_max <= LIMIT as usize, "slidelog: {ours:?}");
    // Exactly the room the window had: the first, the two at 500 ms, and
    // one of the last three (the first admission has left by then).
    assert_eq!(ours.len(), 4, "slidelog admitted {ours:?} of {calls:?}");
    eprintln!(
        "limitador admitted {} calls ({theirs_max} in one window of {WINDOW:?}), slidelog {} (at most {ours_max})",
        theirs.len(),
        ours.len()
    );
}
