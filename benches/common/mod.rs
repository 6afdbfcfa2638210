//! Shared by the benches: the classic `Mutex<VecDeque>` log baseline, and a
//! runner that measures several threads in parallel.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The classic sliding-window log behind a mutex (the baseline).
#[derive(Debug)]
pub struct MutexLog {
    limit: usize,
    window: u64,
    log: Mutex<VecDeque<u64>>,
}

impl MutexLog {
    pub fn new(limit: u32, window: u64) -> Self {
        MutexLog {
            limit: limit as usize,
            window,
            log: Mutex::new(VecDeque::with_capacity(limit as usize)),
        }
    }

    #[inline]
    pub fn check_n_at(&self, n: u32, now: u64) -> bool {
        let mut log = self.log.lock().unwrap();
        while log.front().is_some_and(|&t| t + self.window <= now) {
            log.pop_front();
        }
        if log.len() + n as usize <= self.limit {
            log.extend(std::iter::repeat_n(now, n as usize));
            true
        } else {
            false
        }
    }

    #[inline]
    pub fn check_at(&self, now: u64) -> bool {
        self.check_n_at(1, now)
    }
}

/// Runs `work(thread, iters_per_thread)` on `threads` pinned threads at once
/// and returns the wall time of the slowest. A round in which the threads'
/// busy spans overlap by less than 80% (the machine is shared: one thread was
/// descheduled) is discarded and run again, up to 5 times.
pub fn parallel<F>(threads: usize, iters: u64, work: F) -> Duration
where
    F: Fn(usize, u64) + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let per_thread = iters.div_ceil(threads as u64).max(1);
    let mut last = Duration::ZERO;
    for _attempt in 0..5 {
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (work, barrier) = (Arc::clone(&work), Arc::clone(&barrier));
                let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
                thread::spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    barrier.wait();
                    let start = Instant::now();
                    work(i, per_thread);
                    (start, Instant::now())
                })
            })
            .collect();
        let spans: Vec<(Instant, Instant)> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let first = spans.iter().map(|s| s.0).min().unwrap();
        let last_end = spans.iter().map(|s| s.1).max().unwrap();
        let latest_start = spans.iter().map(|s| s.0).max().unwrap();
        let earliest_end = spans.iter().map(|s| s.1).min().unwrap();
        let total = last_end - first;
        let overlap = earliest_end.saturating_duration_since(latest_start);
        // Report per-call time across all threads: total work / wall time.
        last = total.mul_f64(iters as f64 / (per_thread * threads as u64) as f64);
        if overlap.as_secs_f64() >= 0.8 * total.as_secs_f64() {
            break;
        }
    }
    last
}
