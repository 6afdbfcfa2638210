//! Two threads on disjoint keys, with the keys' map entries placed at a
//! chosen offset from a cache line: what the "keys created interleaved"
//! row of `side_by_side` measures depends on where the allocator put the
//! entries (BENCHMARKS.md, "Where the time goes").
//!
//! ```sh
//! cargo run --release -p slidelog-peers --example entry_alignment [rounds]
//! ```
//!
//! A keyed limiter at L = 10 keeps each key's ring inside papaya's map
//! entry: 120 bytes for a `u64` key. glibc's malloc places blocks of that
//! size allocated one after another 128 bytes apart at 16-byte alignment,
//! so a run of entries starts at one offset `o` from a 64-byte line (0,
//! 16, 32 or 48); other allocations in between start new runs, and
//! `side_by_side` prints how many of each keyed row's entries sit at each
//! offset. A call reads the entry from its key to the last slot it
//! uses (112 bytes) and writes `head` and one slot; at `o = 32` or `48` an
//! entry's last slots share a line with the next entry's key, quota and
//! `head`. With the keys created interleaved (key 0 for thread 0, key 1
//! for thread 1, ...), neighbours belong to different threads, and each
//! such line moves between the cores on every other call.
//!
//! This example's allocator places the entries itself, 128 bytes apart,
//! one limiter per layout: each offset with the keys created interleaved,
//! `o = 48` with each thread's keys together, and `o = 0` and `48` with
//! the keys created in a shuffled order. It then times the limiters in alternating rounds on two pinned threads (the
//! benches' runner, `benches/common`):
//! medians of ns per call (wall time over both threads' calls) and their
//! ratio to `o = 0`.

// The placing allocator below is the experiment (the crate's only other
// `unsafe` is the clock's `RDTSC`).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use slidelog::KeyedLimiter;

#[path = "../benches/common/mod.rs"]
mod common;

use common::{cpu_model, median, parallel};

/// Keys per limiter, and the limit and window of `side_by_side`'s row.
const KEYS: u64 = 10_000;
const LIMIT: u32 = 10;
const WINDOW: Duration = Duration::from_micros(1);
/// Calls per round, over both threads.
const CALLS: u64 = 2_000_000;

/// The size of one map entry (`benches/common`).
const ENTRY: usize = common::KEYED_ENTRY;
/// The distance between placed entries: glibc's for an `ENTRY`-byte block.
const STRIDE: usize = 128;

/// Where the next placed entry goes (0: the allocator places nothing).
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// How many entries were placed since the last [`place_at`].
static PLACED: AtomicUsize = AtomicUsize::new(0);
/// The placement region: `[start, end)` (0, 0 until [`Region::new`]).
static REGION: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));

/// The system allocator, except that while [`NEXT`] is set every block of
/// `ENTRY` bytes is placed there, `STRIDE` bytes after the last.
struct Placing;

// SAFETY: every block handed out is either the system allocator's, or a
// distinct `STRIDE`-byte piece of the leaked region (`NEXT` moves by
// `STRIDE` with each placement, and the region holds every piece: see
// `place_at`), aligned to 16 bytes and never handed out twice; `dealloc`
// returns to the system only what the system allocated.
unsafe impl GlobalAlloc for Placing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == ENTRY && layout.align() <= 16 {
            let at = NEXT.load(Ordering::Relaxed);
            if at != 0 {
                // Only the main thread creates keys (`limiter`).
                NEXT.store(at + STRIDE, Ordering::Relaxed);
                PLACED.fetch_add(1, Ordering::Relaxed);
                return at as *mut u8;
            }
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let (start, end) = (
            REGION.0.load(Ordering::Relaxed),
            REGION.1.load(Ordering::Relaxed),
        );
        if (start..end).contains(&(ptr as usize)) {
            return; // placed: the region is never freed
        }
        // SAFETY: not placed, so the system allocated it with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Placing = Placing;

/// Places the following entries from `at` on.
fn place_at(at: usize) {
    PLACED.store(0, Ordering::Relaxed);
    NEXT.store(at, Ordering::Relaxed);
}

/// Stops placing; returns how many entries were placed.
fn stop_placing() -> usize {
    NEXT.store(0, Ordering::Relaxed);
    PLACED.load(Ordering::Relaxed)
}

/// The order a limiter's keys are created in.
#[derive(Clone, Copy)]
enum Order {
    /// 0, 1, 2, ...: neighbours belong to different threads.
    Interleaved,
    /// Each thread's keys together (the even ones, then the odd ones).
    Together,
    /// A shuffled order: a neighbour belongs to either thread.
    Shuffled,
}

/// The keys in `order`.
fn creation(order: Order) -> Vec<u64> {
    match order {
        Order::Interleaved => (0..KEYS).collect(),
        Order::Together => (0..KEYS).step_by(2).chain((1..KEYS).step_by(2)).collect(),
        Order::Shuffled => {
            let mut keys: Vec<u64> = (0..KEYS).collect();
            // Fisher-Yates with a fixed xorshift: the same order every run.
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            for i in (1..keys.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                keys.swap(i, (x % (i as u64 + 1)) as usize);
            }
            keys
        }
    }
}

/// A limiter over `KEYS` keys whose entries start `offset` bytes after a
/// 64-byte line at `base`, created in `order`.
fn limiter(base: usize, offset: usize, order: Order) -> Arc<KeyedLimiter<u64>> {
    let limiter = KeyedLimiter::<u64>::builder(LIMIT, WINDOW)
        .capacity(KEYS as usize * 2)
        .build()
        .expect("L = 10, W = 1 µs is a valid quota");
    // One key first, outside the region: the map's table is allocated then.
    let _ = limiter.check(&u64::MAX);
    place_at(base + offset);
    for key in creation(order) {
        let _ = limiter.check(&key);
    }
    let placed = stop_placing();
    assert_eq!(
        placed, KEYS as usize,
        "every key's entry placed: is an entry still {ENTRY} bytes?"
    );
    Arc::new(limiter)
}

/// One round: two pinned threads, `CALLS / 2` calls each on their own
/// keys; ns per call (wall time over both threads' calls).
fn round(limiter: &Arc<KeyedLimiter<u64>>) -> f64 {
    let limiter = Arc::clone(limiter);
    let took = parallel(2, CALLS, move |me, n| {
        for i in 0..n {
            black_box(limiter.check(&common::key(i, me, 2, KEYS)).is_ok());
        }
    });
    took.as_nanos() as f64 / CALLS as f64
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|r| r.parse()) {
        None => 7,
        Some(Ok(r)) if r > 0 => r,
        Some(_) => {
            eprintln!("usage: entry_alignment [rounds (at least 1)]");
            std::process::exit(2);
        }
    };
    let setups: [(&str, usize, Order); 7] = [
        ("o = 0, interleaved", 0, Order::Interleaved),
        ("o = 16, interleaved", 16, Order::Interleaved),
        ("o = 32, interleaved", 32, Order::Interleaved),
        ("o = 48, interleaved", 48, Order::Interleaved),
        ("o = 48, each thread's keys together", 48, Order::Together),
        ("o = 0, shuffled", 0, Order::Shuffled),
        ("o = 48, shuffled", 48, Order::Shuffled),
    ];
    // One region for every limiter's entries, leaked.
    let span = KEYS as usize * STRIDE + 64;
    let layout = Layout::from_size_align(span * setups.len(), 4096).expect("a valid layout");
    // SAFETY: a layout of non-zero size.
    let region = unsafe { System.alloc(layout) } as usize;
    assert!(region != 0, "the placement region could not be allocated");
    REGION.0.store(region, Ordering::Relaxed);
    REGION.1.store(region + layout.size(), Ordering::Relaxed);
    let limiters: Vec<_> = setups
        .iter()
        .enumerate()
        .map(|(i, &(_, offset, order))| limiter(region + i * span, offset, order))
        .collect();

    println!("CPU: {}", cpu_model());
    let mut times = vec![Vec::new(); setups.len()];
    for _ in 0..rounds {
        for (limiter, times) in limiters.iter().zip(&mut times) {
            times.push(round(limiter));
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    println!("| entries | ns per call | / o = 0 |\n|---|---|---|");
    for ((name, ..), median) in setups.iter().zip(&medians) {
        println!("| {name} | {median:.1} | {:.2} |", median / medians[0]);
    }
}
