//! Shared by the benches: the `Mutex<VecDeque>` log baseline (the same one
//! `slidelog bench` uses), a runner that measures several threads in
//! parallel, and the criterion benches' `main`, which names the CPU.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

#[path = "../../../cli/src/mutex_log.rs"]
mod mutex_log;

#[allow(unused_imports)] // the keyed bench has no mutex-log baseline
pub(crate) use mutex_log::MutexLog;

#[path = "../../../cli/src/cpu.rs"]
mod cpu;

#[allow(unused_imports)] // the memory bench's figures do not depend on it
pub(crate) use cpu::cpu_model;

/// The size of one keyed map entry at L = 10 with a `u64` key: 24 bytes
/// and the state's 12 inline words (the crate's unit test
/// `an_eight_byte_key_entry_is_24_bytes_plus_its_inline_words`). The
/// allocators of `side_by_side` (which counts where such entries start)
/// and `examples/entry_alignment.rs` (which places them) look for it.
pub const KEYED_ENTRY: usize = 120;

/// A criterion bench's `main`: what `criterion_main!` expands to, after
/// printing the CPU model. The host decides how the work after the clock
/// read overlaps it, so a figure means little without the host it was
/// measured on (BENCHMARKS.md, "Per host").
pub fn criterion_main(groups: fn()) {
    println!("CPU: {}\n", cpu_model());
    groups();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
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

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Key `i` of `0..keys`, scattered: the Weyl sequence `i·φ` (consecutive
/// calls hit unrelated keys) scaled into range by a multiply's high word.
/// No division: a 64-bit `div` is timed with every call of both
/// contenders, and took 4-5 ns of a keyed call in `ring_calls` (the time
/// passed in) on the Zen 2 host (BENCHMARKS.md, "Where the time goes").
#[inline]
pub fn scatter(i: u64, keys: u64) -> u64 {
    ((u128::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) * u128::from(keys)) >> 64) as u64
}

/// The `i`-th key of thread `t` of `threads` over `keys`: each thread its
/// own `keys / threads`, interleaved (thread `t` calls the keys `≡ t` mod
/// `threads`), scattered ([`scatter`]).
#[inline]
pub fn key(i: u64, t: usize, threads: usize, keys: u64) -> u64 {
    scatter(i, keys / threads as u64) * threads as u64 + t as u64
}
