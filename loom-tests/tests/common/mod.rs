//! Shared by the loom models: the reference model of DESIGN.md §1 and the
//! checks run on every interleaving's results.

#![allow(dead_code)]

use std::collections::VecDeque;

use std::sync::Arc;
use std::time::Duration;

use slidelog::loom_hooks::Flaw;
use slidelog::{Admitted, Denied, Limiter, ManualClock};

/// A shared limiter of `limit` per `window` ns on a manual clock, built with
/// the given (possibly broken) protocol variant.
pub fn limiter(limit: u32, window: u64, flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    Arc::new(
        Limiter::with_flaw(
            limit,
            Duration::from_nanos(window),
            ManualClock::new(),
            flaw,
        )
        .unwrap(),
    )
}

/// One call a thread made and what it got.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub now: u64,
    pub n: u32,
    pub result: Result<Admitted, Denied>,
}

/// The classic log (test oracle).
struct Model {
    limit: u32,
    window: u64,
    log: VecDeque<u64>,
}

impl Model {
    fn decide(&mut self, t: u64, n: u32) -> Result<(), u64> {
        while let Some(&front) = self.log.front() {
            if front + self.window <= t {
                self.log.pop_front();
            } else {
                break;
            }
        }
        let len = self.log.len() as u32;
        if len + n <= self.limit {
            self.log.extend(std::iter::repeat_n(t, n as usize));
            Ok(())
        } else {
            Err(self.log[(len + n - self.limit - 1) as usize] + self.window - t)
        }
    }
}

/// P1: no window of length `window` holds more than `limit` of the admitted
/// `at()` times (one per unit).
pub fn assert_no_over_admission(calls: &[Call], limit: u32, window: u64) {
    let mut times: Vec<u64> = calls
        .iter()
        .filter_map(|c| c.result.ok().map(|a| (a.at(), c.n)))
        .flat_map(|(t, n)| std::iter::repeat_n(t, n as usize))
        .collect();
    times.sort_unstable();
    let mut lo = 0;
    for hi in 0..times.len() {
        while times[lo] + window <= times[hi] {
            lo += 1;
        }
        assert!(
            hi - lo < limit as usize,
            "over-admission: {} admissions in a window of {window} ns (limit {limit}): {times:?}",
            hi - lo + 1
        );
    }
}

/// Linearizability: some interleaving of the threads' calls, in program order
/// per thread, fed to the model at each call's effective time (its `now`,
/// clamped to the newest admission so far), reproduces every decision, every
/// `at()` and every absolute retry time (`now + retry_after`).
pub fn assert_linearizable(threads: &[Vec<Call>], limit: u32, window: u64, prefix: &[u64]) {
    let mut cursor = vec![0; threads.len()];
    let mut model = Model {
        limit,
        window,
        log: prefix.iter().copied().collect(),
    };
    let last = prefix.last().copied().unwrap_or(0);
    let total: usize = threads.iter().map(Vec::len).sum();
    assert!(
        search(threads, &mut cursor, &mut model, last, total),
        "no sequential order explains {threads:#?}"
    );
}

fn search(
    threads: &[Vec<Call>],
    cursor: &mut [usize],
    model: &mut Model,
    last_at: u64,
    left: usize,
) -> bool {
    if left == 0 {
        return true;
    }
    for t in 0..threads.len() {
        let Some(call) = threads[t].get(cursor[t]) else {
            continue;
        };
        let saved = model.log.clone();
        let eff = call.now.max(last_at);
        let fits = match (model.decide(eff, call.n), call.result) {
            (Ok(()), Ok(a)) => a.at() == eff,
            (Err(retry), Err(d)) => {
                d.is_rate_limited() && call.now + d.retry_after_nanos() == eff + retry
            }
            _ => false,
        };
        if fits {
            let next_last = if call.result.is_ok() && call.n > 0 {
                eff
            } else {
                last_at
            };
            cursor[t] += 1;
            if search(threads, cursor, model, next_last, left - 1) {
                return true;
            }
            cursor[t] -= 1;
        }
        model.log = saved;
    }
    false
}

/// Admitted units in a list of calls.
pub fn admitted_units(calls: &[Call]) -> u32 {
    calls.iter().filter(|c| c.result.is_ok()).map(|c| c.n).sum()
}
