//! The hot-path scenarios, slidelog against governor with the same quotas,
//! measured in **alternating rounds in one process** (slidelog, governor,
//! slidelog, ...) and reported as medians and their ratio. On these VMs a
//! cache-line ping-pong costs 57 ns in one hour and 395 ns in the next, so
//! only ratios from interleaved rounds compare; criterion's groups run one
//! contender after the other.
//!
//! `cargo bench -p slidelog-peers --bench side_by_side` (add `-- quick` for fewer rounds;
//! `SIDE_BY_SIDE_ONLY=deny` runs the scenarios whose name contains `deny`;
//! `-- record` writes this host's tables into BENCHMARKS.md, "Per host").
//! The CPU model is printed first: on one host the work after the clock read
//! hides behind it, on another it does not, so a ratio means little without
//! the host it was measured on.
//!
//! Governor's `check` answers the decision only, like slidelog's `admit`;
//! the `check` ratio sets slidelog's `check`, which also counts
//! `remaining`, against it. The last column adds the like-for-like pair:
//! slidelog's `check` reading `remaining()`, against governor with its
//! `StateInformationMiddleware` reading `remaining_burst_capacity()` (each
//! answer used, so neither compiler drops the work behind it).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{MutexLog, cpu_model, key, median, parallel};
use entries::{ENTRY, Recording};
use governor::middleware::StateInformationMiddleware;
use governor::{Quota, RateLimiter};
use slidelog::{Clock, KeyedLimiter, Limiter, QuantaClock};

/// Where the keyed rows' map entries sit (printed after the table): a
/// keyed state at L = 10 lives inside papaya's map entry, 120 bytes for a
/// `u64` key. glibc places blocks of that size allocated one after another
/// 128 bytes apart, so such a run of entries shares one offset from a
/// 64-byte line; other allocations made meanwhile (the maps' tables as they
/// grow) start new runs, and a row's entries sit at a mix of offsets. At 0
/// or 16 past a line the 112 bytes a call reads span two lines, at 32 or
/// 48 three, one of them shared with the next entry;
/// `examples/entry_alignment.rs` times each offset (BENCHMARKS.md, "Where
/// the time goes"). Counted while a scenario is built, not
/// while it runs.
#[allow(unsafe_code)]
mod entries {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A keyed map entry at L = 10 with a `u64` key.
    pub(crate) use crate::common::KEYED_ENTRY as ENTRY;

    /// Whether [`Recording`] counts (only while a scenario is built).
    static ON: AtomicBool = AtomicBool::new(false);
    /// Blocks of `ENTRY` bytes allocated at 0, 16, 32 and 48 bytes past a
    /// line (glibc aligns to 16).
    static AT: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

    /// The system allocator, counting where its `ENTRY`-byte blocks start
    /// while [`record`] runs.
    pub(crate) struct Recording;

    // SAFETY: every call is forwarded to the system allocator unchanged;
    // `alloc` only reads the address it returns.
    unsafe impl GlobalAlloc for Recording {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's layout, passed on.
            let block = unsafe { System.alloc(layout) };
            // Relaxed: the thread that builds sets the flag and reads the
            // counters around the allocations it counts (`record`); one made
            // meanwhile on another thread may or may not be counted.
            if layout.size() == ENTRY && ON.load(Ordering::Relaxed) && !block.is_null() {
                AT[block as usize % 64 / 16].fetch_add(1, Ordering::Relaxed);
            }
            block
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's layout, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, block: *mut u8, layout: Layout, size: usize) -> *mut u8 {
            // SAFETY: the caller's block, layout and size, passed on.
            unsafe { System.realloc(block, layout, size) }
        }

        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            // SAFETY: the caller's block and layout, passed on.
            unsafe { System.dealloc(block, layout) }
        }
    }

    /// Runs `build`, and counts the `ENTRY`-byte blocks allocated meanwhile
    /// at each offset from a line. (The benches build their limiters on the
    /// main thread; a key created by a round's thread is not counted.)
    pub(crate) fn record<T>(build: impl FnOnce() -> T) -> (T, [usize; 4]) {
        for at in &AT {
            at.store(0, Ordering::Relaxed);
        }
        ON.store(true, Ordering::Relaxed);
        let built = build();
        ON.store(false, Ordering::Relaxed);
        (built, AT.each_ref().map(|at| at.load(Ordering::Relaxed)))
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// One contender: runs `calls` calls on `threads` threads, returns ns/call
/// (aggregate: wall time / total calls).
type Round = Box<dyn Fn(u64) -> f64>;

/// The contenders of a scenario: slidelog's `check` (which counts
/// `remaining`) and `admit` (the decision only, like governor's `check`),
/// governor, and (one key) the `Mutex<VecDeque>` log.
struct Contenders {
    check: Round,
    admit: Round,
    governor: Round,
    mutex: Option<Round>,
    /// Both reading `remaining`: slidelog's `check` and governor's with
    /// `StateInformationMiddleware` (see the module docs).
    remaining: Option<(Round, Round)>,
    /// Keeps slidelog's upkeep thread running while the rounds read it
    /// (governor's upkeep clock keeps quanta's).
    _upkeep: Option<slidelog::Upkeep>,
}

/// A scenario: its name, how to build the contenders, calls per round.
type Scenario = (&'static str, Box<dyn Fn() -> Contenders>, u64);

fn time(threads: usize, calls: u64, work: impl Fn(usize, u64) + Send + Sync + 'static) -> f64 {
    parallel(threads, calls, work).as_nanos() as f64 / calls as f64
}

/// Rounds of `call` on `threads` threads.
fn rounds(threads: usize, call: impl Fn() -> bool + Send + Sync + 'static) -> Round {
    let call = Arc::new(call);
    Box::new(move |calls| {
        let call = Arc::clone(&call);
        time(threads, calls, move |_, n| {
            for _ in 0..n {
                black_box(call());
            }
        })
    })
}

/// Rounds of `call` on one thread, its answer (a `remaining`) kept.
fn counted(call: impl Fn() -> u32 + Send + Sync + 'static) -> Round {
    let call = Arc::new(call);
    Box::new(move |calls| {
        let call = Arc::clone(&call);
        time(1, calls, move |_, n| {
            for _ in 0..n {
                black_box(call());
            }
        })
    })
}

/// governor's quota for `limit` per hour (`deny`), or bursts of `limit`
/// refilled one per nanosecond.
fn quota(limit: u32, deny: bool) -> Quota {
    let limit = NonZeroU32::new(limit).unwrap();
    if deny {
        Quota::per_hour(limit)
    } else {
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(limit)
    }
}

/// The limiters' window: an hour for a deny row (its window fills and
/// stays full), else `window`.
fn window_of(window: Duration, deny: bool) -> Duration {
    if deny {
        Duration::from_secs(3600)
    } else {
        window
    }
}

/// governor's quota beside a keyed limit of `limit` per `window`: `limit`
/// per hour (`deny`), or bursts of `limit` refilled one per `window /
/// limit` (at least a nanosecond).
fn keyed_quota(limit: u32, window: Duration, deny: bool) -> Quota {
    let burst = NonZeroU32::new(limit).unwrap();
    if deny {
        Quota::per_hour(burst)
    } else {
        Quota::with_period(window / limit)
            .unwrap_or_else(|| Quota::with_period(Duration::from_nanos(1)).unwrap())
            .allow_burst(burst)
    }
}

/// Calls `call` `times` times on each of `keys` keys, in `step` passes
/// (pass `first` takes the keys `first`, `first + step`, ...).
fn fill_keys(keys: u64, step: usize, times: u32, mut call: impl FnMut(&u64)) {
    for first in 0..step as u64 {
        for k in (first..keys).step_by(step) {
            for _ in 0..times {
                call(&k);
            }
        }
    }
}

/// One key: `threads` threads call it; `raced`: two threads race on each
/// contender first (a server's burst: for a deny row, the race fills the
/// window), and the rounds time what follows.
fn single(limit: u32, window: Duration, deny: bool, threads: usize, raced: bool) -> Contenders {
    let window = window_of(window, deny);
    let ours = Arc::new(Limiter::new(limit, window).unwrap());
    let theirs = Arc::new(RateLimiter::direct(quota(limit, deny)));
    let stated = Arc::new(
        RateLimiter::direct(quota(limit, deny)).with_middleware::<StateInformationMiddleware>(),
    );
    let mutex = Arc::new(MutexLog::new(limit, window.as_nanos() as u64));
    let clock = QuantaClock::new();
    if deny && !raced {
        while ours.check().is_ok() {}
        while theirs.check().is_ok() {}
        while stated.check().is_ok() {}
        while mutex.check_at(clock.now()) {}
    }
    if raced {
        let (o, t) = (Arc::clone(&ours), Arc::clone(&theirs));
        let (m, c) = (Arc::clone(&mutex), clock.clone());
        let s = Arc::clone(&stated);
        parallel(2, 400_000, move |_, n| {
            for _ in 0..n {
                black_box(o.admit().is_ok());
                black_box(t.check().is_ok());
                black_box(s.check().is_ok());
                black_box(m.check_at(c.now()));
            }
        });
    }
    let (o, r) = (Arc::clone(&ours), Arc::clone(&ours));
    Contenders {
        check: rounds(threads, move || o.check().is_ok()),
        admit: rounds(threads, move || ours.admit().is_ok()),
        governor: rounds(threads, move || theirs.check().is_ok()),
        mutex: Some(rounds(threads, move || mutex.check_at(clock.now()))),
        remaining: (threads == 1).then(|| both_remaining(r, stated)),
        _upkeep: None,
    }
}

/// A limiter governor builds with `StateInformationMiddleware`, on `C`.
type Stated<C> = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    C,
    StateInformationMiddleware,
>;

/// The like-for-like pair on one key: slidelog's `check` and governor's
/// state snapshot, each reading `remaining` (`u32::MAX` when denied).
fn both_remaining<C, G>(ours: Arc<Limiter<C>>, theirs: Arc<Stated<G>>) -> (Round, Round)
where
    C: Clock + Send + Sync + 'static,
    G: governor::clock::Clock + Send + Sync + 'static,
{
    (
        counted(move || ours.check().map_or(u32::MAX, |a| a.remaining())),
        counted(move || {
            theirs
                .check()
                .map_or(u32::MAX, |s| s.remaining_burst_capacity())
        }),
    )
}

/// One key, one thread, **both limiters on an upkeep clock**: a
/// read is a load of the time a background thread publishes every
/// millisecond, a few nanoseconds on any host, where a TSC read costs
/// 9-25 ns by host. What remains is each limiter's own work after the
/// clock read: the part that hides behind a slow TSC read on one host and
/// is exposed on another. (The time stands still between two updates: at
/// L = 2^20 a millisecond's admissions never fill the ring, and governor's
/// burst of 2^20 at one per nanosecond never runs out.)
fn upkeep(limit: u32, window: Duration, deny: bool) -> Contenders {
    let window = window_of(window, deny);
    let interval = Duration::from_millis(1);
    let their_clock = governor::clock::QuantaUpkeepClock::from_interval(interval).unwrap();
    let (clock, upkeep) = QuantaClock::recent(interval).unwrap();
    let ours = Arc::new(Limiter::with_clock(limit, window, clock).unwrap());
    let theirs = Arc::new(RateLimiter::direct_with_clock(
        quota(limit, deny),
        their_clock.clone(),
    ));
    let stated = Arc::new(
        RateLimiter::direct_with_clock(quota(limit, deny), their_clock)
            .with_middleware::<StateInformationMiddleware>(),
    );
    if deny {
        while ours.check().is_ok() {}
        while theirs.check().is_ok() {}
        while stated.check().is_ok() {}
    }
    let (o, r) = (Arc::clone(&ours), Arc::clone(&ours));
    Contenders {
        check: rounds(1, move || o.check().is_ok()),
        admit: rounds(1, move || ours.admit().is_ok()),
        governor: rounds(1, move || theirs.check().is_ok()),
        mutex: None,
        remaining: Some(both_remaining(r, stated)),
        _upkeep: Some(upkeep),
    }
}

/// One key, one thread, **three policies at once**, the README's first
/// example: ours on one ring of 1,000 slots, all or nothing; governor's way
/// is three limiters checked in turn (each reading the clock; a refusal by
/// a later one leaks the units the earlier ones took, which these quotas
/// never meet). Allowing: 10 per 10 ns, 100 per 100 ns, 1,000 per 1 us
/// (governor: bursts of 10, 100 and 1,000 refilled one per nanosecond),
/// every call admitted. Denying: 10 per second, 100 per minute, 1,000 per
/// hour, the first full (governor's chain stops at its first limiter).
/// `keyed`: the same on one key of a `KeyedLimiter` (each policy counted
/// from its expiry hint, the state's words after `head`) and of three
/// keyed governor limiters. `threads` threads call it (two: the policies'
/// path under contention, its `head` kept eager).
fn policies(deny: bool, keyed: bool, threads: usize) -> Contenders {
    let ns = Duration::from_nanos;
    let limits = [10, 100, 1_000];
    let windows = if deny {
        [ns(1_000_000_000), ns(60_000_000_000), ns(3_600_000_000_000)]
    } else {
        [ns(10), ns(100), ns(1_000)]
    };
    let quotas = limits.iter().zip(windows).map(|(&limit, window)| {
        let burst = NonZeroU32::new(limit).unwrap();
        if deny {
            Quota::with_period(window / limit)
                .unwrap()
                .allow_burst(burst)
        } else {
            quota(limit, false)
        }
    });
    if keyed {
        let ours = Arc::new(
            KeyedLimiter::<u64>::builder(limits[0], windows[0])
                .and(limits[1], windows[1])
                .and(limits[2], windows[2])
                .build()
                .unwrap(),
        );
        let chain: Arc<Vec<_>> = Arc::new(quotas.map(RateLimiter::keyed).collect());
        if deny {
            while ours.admit(&7).is_ok() {}
            while chain[0].check_key(&7).is_ok() {}
        }
        let o = Arc::clone(&ours);
        return Contenders {
            check: rounds(threads, move || o.check(&7).is_ok()),
            admit: rounds(threads, move || ours.admit(&7).is_ok()),
            governor: rounds(threads, move || {
                chain.iter().all(|g| g.check_key(&7).is_ok())
            }),
            mutex: None,
            remaining: None,
            _upkeep: None,
        };
    }
    let ours = Arc::new(
        Limiter::builder(limits[0], windows[0])
            .and(limits[1], windows[1])
            .and(limits[2], windows[2])
            .build()
            .unwrap(),
    );
    let chain: Arc<Vec<_>> = Arc::new(quotas.map(RateLimiter::direct).collect());
    if deny {
        while ours.admit().is_ok() {}
        while chain[0].check().is_ok() {}
    }
    let o = Arc::clone(&ours);
    Contenders {
        check: rounds(threads, move || o.check().is_ok()),
        admit: rounds(threads, move || ours.admit().is_ok()),
        governor: rounds(threads, move || chain.iter().all(|g| g.check().is_ok())),
        mutex: None,
        remaining: None,
        _upkeep: None,
    }
}

/// How a keyed scenario sets its keys up.
#[derive(Clone, Copy)]
enum Keys {
    /// Created in one interleaved pass, default idle margin.
    Interleaved,
    /// Each thread's keys created together (see `keyed`).
    PerThread,
    /// A one-hour idle margin (keys never swept during the run).
    LongMargin,
    /// Every key full (10 per hour) before the run: every check denies.
    Full,
    /// Created in one pass on a fragmented heap ([`fragment_heap`]), as in
    /// a server that has run for a while.
    Fragmented,
}

/// Leaves the heap as a long-running process has it: 200,000 small blocks
/// (24 to 223 bytes), every third one freed, the rest kept. Allocations
/// that follow fill the holes, scattered over some 25 MB, instead of
/// following one another. (Only the last scenario calls it: the blocks are
/// kept for the life of the process.)
fn fragment_heap() {
    let mut blocks: Vec<Box<[u8]>> = (0..200_000usize)
        .map(|i| vec![1u8; 24 + (i * 37) % 200].into_boxed_slice())
        .collect();
    let mut i = 0;
    blocks.retain(|_| {
        i += 1;
        i % 3 != 0
    });
    black_box(&blocks);
    std::mem::forget(blocks);
}

/// `Keys::PerThread`: each thread's keys are created together (as when
/// every thread creates the keys it sees), instead of in one interleaved
/// pass: per-key states are separate allocations (papaya's entry, 120 bytes
/// at L = 10 with the ring inside), so states created one after the other
/// share cache lines, and two threads on disjoint keys created interleaved
/// can write to shared lines.
fn keyed(limit: u32, window: Duration, keys: u64, threads: usize, setup: Keys) -> Contenders {
    let deny = matches!(setup, Keys::Full);
    let window = window_of(window, deny);
    if matches!(setup, Keys::Fragmented) {
        fragment_heap();
    }
    // As a new user writes it: default idle margin, default max_keys.
    let mut builder = KeyedLimiter::<u64>::builder(limit, window);
    if matches!(setup, Keys::LongMargin) {
        builder = builder.idle_margin(Duration::from_secs(3600));
    }
    let ours = Arc::new(builder.build().unwrap());
    let theirs = Arc::new(RateLimiter::keyed(keyed_quota(limit, window, deny)));
    let step = if matches!(setup, Keys::PerThread) {
        threads
    } else {
        1
    };
    fill_keys(keys, step, if deny { limit } else { 1 }, |k| {
        let _ = ours.check(k);
        let _ = theirs.check_key(k);
    });
    let o = Arc::clone(&ours);
    Contenders {
        check: keyed_rounds(threads, keys, move |k| o.check(k).is_ok()),
        admit: keyed_rounds(threads, keys, move |k| ours.admit(k).is_ok()),
        governor: keyed_rounds(threads, keys, move |k| theirs.check_key(k).is_ok()),
        mutex: None,
        remaining: None,
        _upkeep: None,
    }
}

/// How many calls a pinned scenario makes under one pin ([`keyed_pinned`]).
const PIN_BATCH: u64 = 64;

/// 10,000 keys on one thread, our calls made through a
/// [`slidelog::PinnedKeys`] taken once per [`PIN_BATCH`] calls (a caller
/// deciding a batch of keys at once), governor's as ever. Denials: every
/// key full at 10 per hour; admissions: L = 10, W = 1 µs.
fn keyed_pinned(deny: bool) -> Contenders {
    let keys = 10_000;
    let window = window_of(Duration::from_micros(1), deny);
    let ours = Arc::new(KeyedLimiter::<u64>::new(10, window).unwrap());
    let theirs = Arc::new(RateLimiter::keyed(keyed_quota(10, window, deny)));
    fill_keys(keys, 1, if deny { 10 } else { 1 }, |k| {
        let _ = ours.check(k);
        let _ = theirs.check_key(k);
    });
    // `me` is 0 on one thread.
    let pinned = |call: fn(&slidelog::PinnedKeys<'_, u64>, &u64) -> bool| -> Round {
        let ours = Arc::clone(&ours);
        Box::new(move |calls| {
            let ours = Arc::clone(&ours);
            time(1, calls, move |me, n| {
                let mut i = 0;
                while i < n {
                    let pin = ours.pin();
                    for i in i..n.min(i + PIN_BATCH) {
                        black_box(call(&pin, &key(i, me, 1, keys)));
                    }
                    i += PIN_BATCH;
                }
            })
        })
    };
    Contenders {
        check: pinned(|pin, k| pin.check(k).is_ok()),
        admit: pinned(|pin, k| pin.admit(k).is_ok()),
        governor: keyed_rounds(1, keys, move |k| theirs.check_key(k).is_ok()),
        mutex: None,
        remaining: None,
        _upkeep: None,
    }
}

/// Rounds of `call` on `threads` threads, each over its share of `keys`
/// (see [`key`]).
fn keyed_rounds(
    threads: usize,
    keys: u64,
    call: impl Fn(&u64) -> bool + Send + Sync + 'static,
) -> Round {
    let call = Arc::new(call);
    Box::new(move |calls| {
        let call = Arc::clone(&call);
        time(threads, calls, move |me, n| {
            for i in 0..n {
                black_box(call(&key(i, me, threads, keys)));
            }
        })
    })
}

/// 10,000 keys on one thread, **both limiters on an upkeep clock**
/// (see [`upkeep`]): a keyed call's own work after the clock read. Denials:
/// every key full at 10 per hour; admissions: L = 10, W = 1 µs (with the
/// time standing still for a millisecond, a key meets about two calls in
/// it, far from its ten).
fn keyed_upkeep(deny: bool) -> Contenders {
    let keys = 10_000;
    let window = window_of(Duration::from_micros(1), deny);
    let interval = Duration::from_millis(1);
    let their_clock = governor::clock::QuantaUpkeepClock::from_interval(interval).unwrap();
    let (clock, upkeep) = QuantaClock::recent(interval).unwrap();
    let ours = Arc::new(
        KeyedLimiter::<u64>::builder(10, window)
            .clock(clock)
            .build()
            .unwrap(),
    );
    let theirs = Arc::new(RateLimiter::dashmap_with_clock(
        keyed_quota(10, window, deny),
        their_clock,
    ));
    fill_keys(keys, 1, if deny { 10 } else { 1 }, |k| {
        let _ = ours.check(k);
        let _ = theirs.check_key(k);
    });
    let o = Arc::clone(&ours);
    Contenders {
        check: keyed_rounds(1, keys, move |k| o.check(k).is_ok()),
        admit: keyed_rounds(1, keys, move |k| ours.admit(k).is_ok()),
        governor: keyed_rounds(1, keys, move |k| theirs.check_key(k).is_ok()),
        mutex: None,
        remaining: None,
        _upkeep: Some(upkeep),
    }
}

/// Nanoseconds per `QuantaClock::now()` read back to back (median of seven
/// rounds of a million). On a host whose TSC read is slow to repeat (AMD
/// EPYC, Zen 4, under KVM: about 9.6 ns) this is the floor under every
/// contender that reads the clock once a call, governor's among them; work
/// after the read hides beneath it only up to a point (BENCHMARKS.md,
/// "Where the time goes").
fn clock_floor() -> f64 {
    let clock = QuantaClock::new();
    let reads = 1_000_000;
    median(
        (0..7)
            .map(|_| {
                let start = std::time::Instant::now();
                for _ in 0..reads {
                    black_box(clock.now());
                }
                start.elapsed().as_nanos() as f64 / reads as f64
            })
            .collect(),
    )
}

/// The hot path's speed targets, per row: (the row's scenario, the bound
/// on `admit`'s ratio to governor, the bound on `check`'s), each bound
/// `None` where that call has none. BENCHMARKS.md's targets table keeps
/// them per host.
const TARGETS: &[(&str, Option<f64>, Option<f64>)] = &[
    ("allow 1 thread, L = 10, W = 10 ns", Some(1.0), Some(1.25)),
    ("allow 1 thread, L = 2^20, W = 1 us", Some(1.0), Some(1.25)),
    ("deny 1 thread, 10 per hour, full", Some(1.0), Some(1.25)),
    (
        "keyed allow 1 thread, 10k keys, L = 10, W = 1 us",
        Some(1.0),
        Some(1.25),
    ),
    (
        "keyed deny 1 thread, 10k keys, 10 per hour, full",
        Some(1.0),
        None,
    ),
    (
        "allow 2 threads one key, L = 10, W = 10 ns",
        None,
        Some(1.5),
    ),
    (
        "allow 2 threads one key, L = 2^20, W = 1 us",
        None,
        Some(1.5),
    ),
    ("deny 2 threads one key, 10 per hour, full", None, Some(1.5)),
    (
        "keyed allow 2 threads disjoint, 10k keys, L = 10, W = 1 us (each thread's keys together)",
        None,
        Some(0.6),
    ),
];

/// Prints each of [`TARGETS`] whose row ran (`ratios`: per row, `check`'s
/// and `admit`'s ratio to governor) with this run's ratio and whether it
/// holds: `admit`'s targets first, then `check`'s.
fn print_targets(out: &mut Report, ratios: &[(&str, f64, f64)]) {
    let ran: Vec<_> = TARGETS
        .iter()
        .filter_map(|&(row, admit, check)| {
            let &(_, c, a) = ratios.iter().find(|(name, ..)| *name == row)?;
            Some([("admit", row, a, admit), ("check", row, c, check)])
        })
        .collect();
    let rows: Vec<_> = [0, 1]
        .into_iter()
        .flat_map(|call| ran.iter().map(move |pair| pair[call]))
        .filter_map(|(call, row, ratio, bound)| Some((call, row, ratio, bound?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    out.line("\nThe targets in this run:\n".into());
    out.line("| call | scenario | ratio to governor | target | met |".into());
    out.line("|---|---|---|---|---|".into());
    for (call, row, ratio, bound) in rows {
        // Judged as printed: a ratio that reads 1.00 meets a bound of 1.0.
        let met = if (ratio * 100.0).round() <= bound * 100.0 {
            "yes"
        } else {
            "no"
        };
        out.line(format!(
            "| {call} | {row} | {ratio:.2} | ≤ {bound:.2} | {met} |"
        ));
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let record = std::env::args().any(|a| a == "record");
    let mut report = Report::default();
    let only = std::env::var("SIDE_BY_SIDE_ONLY").unwrap_or_default();
    // The host goes beside every figure: on screen, and in each CSV row
    // (the chart names it).
    let cpu = cpu_model();
    println!("CPU: {cpu}");
    let floor = clock_floor();
    println!(
        "One clock read alone: {floor:.1} ns (QuantaClock, back to back: the floor of a call that reads the clock once)\n",
    );
    // `cargo bench` passes `--bench`; `cargo test --benches` does not run us.
    let rounds = if quick { 3 } else { 7 };
    let big = 1 << 20;
    let us = Duration::from_micros(1);
    // The small allow rows' window, 10 per 10 ns, is governor's quota there
    // (bursts of 10, one more per nanosecond): every call of either is
    // admitted. (10 per 100 ns would be one call per 10 ns: a limiter
    // answering faster than that is denied a share of its calls, and the
    // row then measures that mix, not an admission.)
    let scenarios: Vec<Scenario> = vec![
        (
            "allow 1 thread, L = 10, W = 10 ns",
            Box::new(|| single(10, Duration::from_nanos(10), false, 1, false)),
            2_000_000,
        ),
        (
            "allow 1 thread, L = 2^20, W = 1 us",
            Box::new(move || single(big, us, false, 1, false)),
            2_000_000,
        ),
        (
            "deny 1 thread, 10 per hour, full",
            Box::new(move || single(10, us, true, 1, false)),
            4_000_000,
        ),
        (
            "allow 1 thread, L = 2^20, W = 1 us, both on an upkeep clock",
            Box::new(move || upkeep(big, us, false)),
            2_000_000,
        ),
        (
            "deny 1 thread, 10 per hour, full, both on an upkeep clock",
            Box::new(move || upkeep(10, us, true)),
            4_000_000,
        ),
        (
            "allow 1 thread after 2 threads raced, L = 10, W = 10 ns",
            Box::new(|| single(10, Duration::from_nanos(10), false, 1, true)),
            2_000_000,
        ),
        (
            "deny 1 thread after 2 threads raced to fill, 100 per hour",
            Box::new(move || single(100, us, true, 1, true)),
            4_000_000,
        ),
        (
            "allow 2 threads one key, L = 10, W = 10 ns",
            Box::new(|| single(10, Duration::from_nanos(10), false, 2, false)),
            1_000_000,
        ),
        (
            "allow 2 threads one key, L = 2^20, W = 1 us",
            Box::new(move || single(big, us, false, 2, false)),
            1_000_000,
        ),
        (
            "deny 2 threads one key, 10 per hour, full",
            Box::new(move || single(10, us, true, 2, false)),
            4_000_000,
        ),
        (
            "allow 1 thread, 3 policies (10 per 10 ns, 100 per 100 ns, 1,000 per 1 us); governor: 3 limiters in turn",
            Box::new(|| policies(false, false, 1)),
            2_000_000,
        ),
        (
            "deny 1 thread, 3 policies (10 per second, 100 per minute, 1,000 per hour), the first full; governor: 3 limiters in turn",
            Box::new(|| policies(true, false, 1)),
            4_000_000,
        ),
        (
            "allow 2 threads one key, 3 policies (as above); governor: 3 limiters in turn",
            Box::new(|| policies(false, false, 2)),
            1_000_000,
        ),
        (
            "keyed allow 1 thread, one key, 3 policies (as above); governor: 3 keyed limiters in turn",
            Box::new(|| policies(false, true, 1)),
            2_000_000,
        ),
        (
            "keyed deny 1 thread, one key, 3 policies (as above), the first full; governor: 3 keyed limiters in turn",
            Box::new(|| policies(true, true, 1)),
            4_000_000,
        ),
        (
            "keyed allow 1 thread, 10k keys, L = 10, W = 1 us",
            Box::new(move || keyed(10, us, 10_000, 1, Keys::Interleaved)),
            2_000_000,
        ),
        (
            "keyed allow 1 thread, 10k keys, L = 10, W = 1 us, one-hour idle margin",
            Box::new(move || keyed(10, us, 10_000, 1, Keys::LongMargin)),
            2_000_000,
        ),
        (
            "keyed deny 1 thread, 10k keys, 10 per hour, full",
            Box::new(move || keyed(10, us, 10_000, 1, Keys::Full)),
            2_000_000,
        ),
        (
            "keyed allow 1 thread, 10k keys, L = 10, W = 1 us, a pin per 64 calls (ours)",
            Box::new(|| keyed_pinned(false)),
            2_000_000,
        ),
        (
            "keyed deny 1 thread, 10k keys, 10 per hour, full, a pin per 64 calls (ours)",
            Box::new(|| keyed_pinned(true)),
            2_000_000,
        ),
        (
            "keyed allow 1 thread, 10k keys, L = 10, W = 1 us, both on an upkeep clock",
            Box::new(|| keyed_upkeep(false)),
            2_000_000,
        ),
        (
            "keyed deny 1 thread, 10k keys, 10 per hour, full, both on an upkeep clock",
            Box::new(|| keyed_upkeep(true)),
            2_000_000,
        ),
        // 1k keys: both limiters' states fit in any L2 (ours 144-166 bytes a
        // key at L = 10 with papaya's table: under 0.2 MB), so these rows
        // time the call's work; the 10k rows above add whether 1.4-1.7 MB of
        // ours fits (a 2 MiB L2: yes; AMD Zen 4's 1 MiB: no; governor's
        // 0.2 MB: both).
        (
            "keyed allow 1 thread, 1k keys, L = 10, W = 1 us",
            Box::new(move || keyed(10, us, 1_000, 1, Keys::Interleaved)),
            2_000_000,
        ),
        (
            "keyed deny 1 thread, 1k keys, 10 per hour, full",
            Box::new(move || keyed(10, us, 1_000, 1, Keys::Full)),
            2_000_000,
        ),
        // 100k keys: more than a 2 MiB L2 holds of our entries (144 bytes a
        // key at L = 10: 14 MB), not of governor's (16-byte buckets in
        // DashMap's tables: about 2 MB). 1M keys: more than either fits.
        (
            "keyed deny 1 thread, 100k keys, 10 per hour, full",
            Box::new(move || keyed(10, us, 100_000, 1, Keys::Full)),
            1_000_000,
        ),
        (
            "keyed deny 1 thread, 1M keys, 10 per hour, full",
            Box::new(move || keyed(10, us, 1_000_000, 1, Keys::Full)),
            1_000_000,
        ),
        (
            "keyed allow 2 threads disjoint, 10k keys, L = 10, W = 1 us (keys created interleaved)",
            Box::new(move || keyed(10, us, 10_000, 2, Keys::Interleaved)),
            2_000_000,
        ),
        (
            "keyed allow 2 threads disjoint, 10k keys, L = 10, W = 1 us (each thread's keys together)",
            Box::new(move || keyed(10, us, 10_000, 2, Keys::PerThread)),
            2_000_000,
        ),
        // Last: the heap stays fragmented.
        (
            "keyed allow 1 thread, 10k keys, L = 10, W = 1 us, fragmented heap",
            Box::new(move || keyed(10, us, 10_000, 1, Keys::Fragmented)),
            2_000_000,
        ),
    ];
    // A renamed row must not drop its target from the summary unseen.
    for &(row, ..) in TARGETS {
        assert!(
            scenarios.iter().any(|(name, ..)| *name == row),
            "a target's row is no scenario: {row:?}"
        );
    }
    // The figures also go to a CSV file, from which
    // `cargo run -p slidelog-peers --example bench_chart -- --docs` draws
    // BENCHMARKS.md's chart (the repository's target/: a bench runs in its
    // package's directory).
    let out = std::env::var("SIDE_BY_SIDE_CSV").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/side_by_side.csv").into()
    });
    if let Some(dir) = std::path::Path::new(&out).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let mut csv = csv::Writer::from_path(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
    csv.write_record([
        "scenario",
        "slidelog",
        "slidelog_admit",
        "governor",
        "mutex_log",
        "ratio",
        "admit_ratio",
        "cpu",
        "slidelog_remaining",
        "governor_remaining",
        "remaining_ratio",
    ])
    .unwrap();
    report.line(
        "| scenario | check / governor | admit / governor | slidelog check ns/call | slidelog admit ns/call | governor ns/call | mutex log ns/call | both reading remaining: ratio (slidelog / governor ns) |".into()
    );
    report.line("|---|---|---|---|---|---|---|---|".into());
    // One thread on one key reading the TSC: each contender against the
    // clock's floor too. Governor's own figure moves with where its code
    // lands in this binary (BENCHMARKS.md, "Where the time goes"); the floor does
    // not, and a call that reads the clock once cannot beat it.
    let mut against_floor = Vec::new();
    // Per keyed row: its entries at each offset from a line (`entries`).
    let mut entry_offsets = Vec::new();
    // Per row: `check` / governor and `admit` / governor ([`TARGETS`]).
    let mut ratios = Vec::new();
    for (name, make, calls) in scenarios {
        if !name.contains(only.as_str()) {
            continue;
        }
        let (c, placed) = entries::record(make);
        if placed.iter().sum::<usize>() > 0 {
            entry_offsets.push((name, placed));
        }
        // Warm up every contender, then alternate, the order reversed every
        // round so that neither of slidelog's calls always follows
        // governor's round: a row whose states outgrow the L2 meets what the
        // round before left in the caches. The reversal makes the order fair;
        // it does not steady such a row, whose spread comes from where its
        // states sit in memory (BENCHMARKS.md, the Intel per-host rows).
        (c.check)(calls / 10);
        (c.admit)(calls / 10);
        (c.governor)(calls / 10);
        if let Some(m) = &c.mutex {
            m(calls / 10);
        }
        if let Some((ours, theirs)) = &c.remaining {
            ours(calls / 10);
            theirs(calls / 10);
        }
        let (mut a, mut d, mut b, mut m) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                a.push((c.check)(calls));
                b.push((c.governor)(calls));
                d.push((c.admit)(calls));
            } else {
                d.push((c.admit)(calls));
                b.push((c.governor)(calls));
                a.push((c.check)(calls));
            }
            if let Some(mutex) = &c.mutex {
                m.push(mutex(calls));
            }
            if let Some((ours, theirs)) = &c.remaining {
                ra.push(ours(calls));
                rb.push(theirs(calls));
            }
        }
        let (a, d, b) = (median(a), median(d), median(b));
        let m = (!m.is_empty()).then(|| median(m));
        let r = (!ra.is_empty()).then(|| (median(ra), median(rb)));
        let shown = m.map_or("—".to_string(), |m| format!("{m:.1}"));
        let remaining_shown = r.map_or("—".to_string(), |(ra, rb)| {
            format!("{:.2} ({ra:.1} / {rb:.1})", ra / rb)
        });
        report.line(format!(
            "| {name} | {:.2} | {:.2} | {a:.1} | {d:.1} | {b:.1} | {shown} | {remaining_shown} |",
            a / b,
            d / b
        ));
        let mutex_field = m.map_or(String::new(), |m| format!("{m:.1}"));
        let (ra, rb, rr) = r.map_or((String::new(), String::new(), String::new()), |(ra, rb)| {
            (
                format!("{ra:.1}"),
                format!("{rb:.1}"),
                format!("{:.2}", ra / rb),
            )
        });
        if name.contains("1 thread") && !name.contains("upkeep") && !name.starts_with("keyed") {
            against_floor.push((name, a, d, b));
        }
        ratios.push((name, a / b, d / b));
        csv.write_record([
            name.to_string(),
            format!("{a:.1}"),
            format!("{d:.1}"),
            format!("{b:.1}"),
            mutex_field,
            format!("{:.2}", a / b),
            format!("{:.2}", d / b),
            cpu.clone(),
            ra,
            rb,
            rr,
        ])
        .unwrap();
    }
    csv.flush().unwrap();
    if !against_floor.is_empty() {
        report.line(format!("\nAgainst the clock's floor ({floor:.1} ns):\n"));
        report.line("| scenario | check / floor | admit / floor | governor / floor |".into());
        report.line("|---|---|---|---|".into());
        for (name, a, d, b) in against_floor {
            report.line(format!(
                "| {name} | {:.2} | {:.2} | {:.2} |",
                a / floor,
                d / floor,
                b / floor
            ));
        }
    }
    print_targets(&mut report, &ratios);
    if !entry_offsets.is_empty() {
        println!(
            "\nWhere the keyed rows' map entries start ({ENTRY}-byte blocks, by bytes past a 64-byte line):\n"
        );
        println!("| scenario | at 0 | at 16 | at 32 | at 48 |");
        println!("|---|---|---|---|---|");
        for (name, [a, b, c, d]) in entry_offsets {
            println!("| {name} | {a} | {b} | {c} | {d} |");
        }
    }
    println!("\n(written to {out})");
    if record {
        let head = format!(
            "**{cpu}**, {}, commit {}: {rounds} alternating rounds, medians; clock floor {floor:.1} ns.\n",
            command_line("date", &["-u", "+%Y-%m-%d"]),
            command_line("git", &["rev-parse", "--short", "HEAD"]),
        );
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../BENCHMARKS.md");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let text = recorded(&text, &cpu, &format!("{head}\n{}", report.text));
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("(this host's table recorded in {path})");
    }
}

/// What the run prints and, with `record`, writes into BENCHMARKS.md: the
/// tables, line by line.
#[derive(Default)]
struct Report {
    text: String,
}

impl Report {
    /// Prints `line` and keeps it.
    fn line(&mut self, line: String) {
        println!("{line}");
        self.text.push_str(&line);
        self.text.push('\n');
    }
}

/// The first line a command prints, or `unknown` if it cannot run.
fn command_line(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// BENCHMARKS.md's `text` with `cpu`'s block (between
/// `<!-- side_by_side: CPU -->` and `<!-- /side_by_side -->`) replaced by
/// `block`, or, for a host with none yet, a new block added before
/// `<!-- side_by_side: hosts end -->`.
fn recorded(text: &str, cpu: &str, block: &str) -> String {
    let open = format!("<!-- side_by_side: {cpu} -->");
    let close = "<!-- /side_by_side -->";
    let new = format!("{open}\n{block}{close}");
    if let Some(start) = text.find(&open) {
        let end = start
            + text[start..]
                .find(close)
                .unwrap_or_else(|| panic!("BENCHMARKS.md: {open} is never closed"))
            + close.len();
        return format!("{}{new}{}", &text[..start], &text[end..]);
    }
    let end = "<!-- side_by_side: hosts end -->";
    let at = text
        .find(end)
        .unwrap_or_else(|| panic!("BENCHMARKS.md has no {end:?} marker"));
    format!("{}{new}\n\n{}", &text[..at], &text[at..])
}
