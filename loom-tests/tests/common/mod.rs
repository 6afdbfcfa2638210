//! Shared by the loom models: the reference model of DESIGN.md §1 and the
//! checks run on every interleaving's results.

#![allow(dead_code)]

use std::collections::VecDeque;

use std::sync::Arc;
use std::time::Duration;

use slidelog::loom_hooks::Flaw;
use slidelog::{Admitted, Denied, Limiter, ManualClock, SlidingCounter};

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

/// A key's state that the keyed map can evict: the exact ring (through
/// [`Limiter`]) or the counter (through [`SlidingCounter`]).
pub trait Evictable: Send + Sync + 'static {
    /// One unit at `now`; `None` if the state was closed for eviction.
    fn try_check_at(&self, now: u64) -> Option<Result<Admitted, Denied>>;
    /// Closes the state if idle at `now` with `margin`.
    fn close_if_idle(&self, now: u64, margin: u64) -> bool;
}

impl Evictable for Limiter<ManualClock> {
    fn try_check_at(&self, now: u64) -> Option<Result<Admitted, Denied>> {
        self.try_check_n_at(1, now)
    }
    fn close_if_idle(&self, now: u64, margin: u64) -> bool {
        Limiter::close_if_idle(self, now, margin)
    }
}

impl Evictable for SlidingCounter<ManualClock> {
    fn try_check_at(&self, now: u64) -> Option<Result<Admitted, Denied>> {
        self.try_check_n_at(1, now)
    }
    fn close_if_idle(&self, now: u64, margin: u64) -> bool {
        SlidingCounter::close_if_idle(self, now, margin)
    }
}

/// P5, the keyed map's eviction handshake over two states of one key: the
/// map is modelled by a generation word choosing between the old state and
/// its replacement (papaya itself is not loom-aware; real-thread stress
/// tests cover it). The evictor closes the old state at 25 (margin 10),
/// then publishes the new one; two admitters at 25 that find the old one
/// closed publish it themselves (first one wins) and look again.
///
/// `make` returns (old, new) for a limit of 1, the old one holding one unit
/// at 0 that has left the window by 15. Exactly one admitter succeeds, and
/// its admission is visible to the key's current state at 26.
pub fn evict_while_admitting<T: Evictable>(make: impl Fn() -> [T; 2] + Send + Sync + 'static) {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;
    loom::model(move || {
        let states = Arc::new(make());
        let current = Arc::new(AtomicUsize::new(0));
        let admit = |now: u64| {
            let states = Arc::clone(&states);
            let current = Arc::clone(&current);
            thread::spawn(move || {
                loop {
                    // Acquire pairs with the publication below.
                    let g = current.load(Ordering::Acquire);
                    match states[g].try_check_at(now) {
                        Some(result) => return result.is_ok(),
                        // Closed: replace the state in the "map" (as the
                        // keyed limiter does: remove it, insert a fresh
                        // one; whoever comes first wins) and look again.
                        None => {
                            let _ =
                                current.compare_exchange(g, 1, Ordering::AcqRel, Ordering::Acquire);
                        }
                    }
                }
            })
        };
        let evictor = {
            let states = Arc::clone(&states);
            let current = Arc::clone(&current);
            thread::spawn(move || {
                if states[0].close_if_idle(25, 10) {
                    // Release pairs with the admitters' Acquire loads.
                    let _ = current.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
                }
            })
        };
        let a = admit(25);
        let b = admit(25);
        evictor.join().unwrap();
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(
            admitted.iter().filter(|&&x| x).count(),
            1,
            "duplicated or lost: {admitted:?}"
        );
        // The admission at 25 must be visible to the key's current state.
        let g = current.load(Ordering::Acquire);
        assert!(
            states[g].try_check_at(26).is_some_and(|r| r.is_err()),
            "lost admission: the current state admits again at 26"
        );
    });
}
