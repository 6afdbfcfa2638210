//! Memory: bytes per key measured with a counting allocator, and a flood of
//! 1,000,000 distinct keys against a capped map stays bounded.

use std::time::Duration;

use std::collections::hash_map::RandomState;

use slidelog::algorithm::Algorithm;
use slidelog::{DenyReason, KeyedLimiter, Limiter, ManualClock};

#[path = "common/counting.rs"]
mod counting;

use counting::{Counting, live};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Resident set size in bytes (Linux), for the record.
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// One test, run in sequence, so the global counter is not shared between
/// concurrently running tests.
#[test]
fn memory() {
    // The flood first, so its RSS is not inflated by the larger maps below.
    flood_of_new_keys_stays_bounded();
    flood_of_long_keys_stays_within_the_budget();
    keys_with_quotas_are_budgeted_by_what_they_take();
    bytes_per_key();
    counter_bytes_per_key();
    #[cfg(feature = "tower")]
    sliced_bytes_keys_are_charged_what_they_keep();
}

/// A `bytes::Bytes` key sliced from a large buffer keeps nothing but its
/// own bytes once the buffer's owner is gone: the map stores a compact
/// copy, so the byte budget counts what is really kept.
#[cfg(feature = "tower")]
fn sliced_bytes_keys_are_charged_what_they_keep() {
    let limiter = KeyedLimiter::<bytes::Bytes>::builder(1, Duration::from_secs(60))
        .clock(ManualClock::new())
        .max_bytes(4 << 20)
        .build()
        .unwrap();
    let before = live();
    for i in 0..64u8 {
        // A 1 MiB request body; the key is 16 bytes of it.
        let buffer = bytes::Bytes::from(vec![i; 1 << 20]);
        let key = buffer.slice(1000..1016);
        drop(buffer);
        assert!(limiter.check(&key).is_ok());
    }
    let grew = live() - before;
    assert_eq!(limiter.len(), 64);
    assert!(
        grew < (1 << 20),
        "64 keys of 16 bytes kept {grew} bytes alive (the buffers they were sliced from)"
    );
    assert!(
        limiter.memory_bytes() as isize >= grew / 2,
        "{} vs {grew}",
        limiter.memory_bytes()
    );
}

/// The keyed counter: `8 (N + 3)` bytes of state per key whatever the
/// limit, plus the map entry; a million-per-window limit costs what a limit
/// of 10 costs.
fn counter_bytes_per_key() {
    let keys = 100_000u64;
    let mut measured = Vec::new();
    for limit in [10u32, 1_000_000] {
        let keyed = KeyedLimiter::<u64>::builder(limit, Duration::from_secs(1))
            .sliding_counter(10)
            .clock(ManualClock::new())
            .max_keys(keys as usize)
            .build()
            .unwrap();
        let per_key = fill_and_measure(&keyed, keys);
        println!(
            "counter, 10 slots, limit {limit}: {per_key:.1} bytes per key (state 104); estimate {}",
            keyed.bytes_per_key()
        );
        assert!(per_key >= 104.0, "{per_key}");
        measured.push(per_key);
    }
    assert!(
        (measured[0] - measured[1]).abs() < 1.0,
        "the counter's memory does not depend on the limit: {measured:?}"
    );
}

fn bytes_per_key() {
    for limit in [10u32, 100, 1000] {
        let before = live();
        let limiter = Limiter::new(limit, Duration::from_secs(1)).unwrap();
        let single = live() - before;
        assert_eq!(
            single as usize,
            8 * limit as usize,
            "one Limiter allocates only its slots"
        );
        assert!(limiter.memory_bytes() >= single as usize);

        let keys = 100_000u64;
        // A manual clock that never moves: no key becomes idle mid-measurement.
        let keyed = KeyedLimiter::<u64>::builder(limit, Duration::from_secs(1))
            .clock(ManualClock::new())
            .max_keys(keys as usize)
            .build()
            .unwrap();
        let per_key = fill_and_measure(&keyed, keys);
        let ring = 8.0 * (limit as f64 + 1.0);
        println!(
            "limit {limit}: {per_key:.1} bytes per key (ring {ring}, map {:.1}); estimate {}",
            per_key - ring,
            keyed.bytes_per_key()
        );
        assert!(per_key >= ring, "{per_key}");
    }
}

/// Admits once for each of `keys` new keys and returns the heap bytes per
/// key it took, checking the documented estimate is within 50% of it.
fn fill_and_measure<A: Algorithm>(
    keyed: &KeyedLimiter<u64, ManualClock, RandomState, A>,
    keys: u64,
) -> f64 {
    let before = live();
    for k in 0..keys {
        keyed.check(&k).unwrap();
    }
    assert_eq!(keyed.len(), keys as usize);
    let per_key = (live() - before) as f64 / keys as f64;
    let estimate = keyed.bytes_per_key() as f64;
    assert!(
        (per_key - estimate).abs() / per_key < 0.5,
        "estimate {estimate} vs measured {per_key}"
    );
    per_key
}

fn flood_of_new_keys_stays_bounded() {
    let (limit, cap) = (10u32, 10_000usize);
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::<u64>::builder(limit, Duration::from_millis(10))
        .clock(clock.clone())
        .max_keys(cap)
        .build()
        .unwrap();
    let start = live();
    let rss_start = rss();
    let flood = 1_000_000u64;
    let (mut admitted, mut refused, mut peak) = (0u64, 0u64, 0isize);
    for k in 0..flood {
        // 1,000 new keys per millisecond: ~20,000 per window + margin, twice the cap.
        if k % 1_000 == 0 {
            clock.advance(Duration::from_millis(1));
        }
        match keyed.check(&k) {
            Ok(_) => admitted += 1,
            Err(d) => {
                assert_eq!(d.reason(), DenyReason::KeyCapacity);
                refused += 1;
            }
        }
        assert!(keyed.len() <= cap);
        if k % 10_000 == 0 {
            peak = peak.max(live() - start);
        }
    }
    peak = peak.max(live() - start);
    let bound = (cap * keyed.bytes_per_key()) as isize * 3;
    println!(
        "flood: {admitted} admitted, {refused} refused, peak heap {} KiB (cap x per-key = {} KiB), \
         RSS {:?} -> {:?} KiB",
        peak / 1024,
        cap * keyed.bytes_per_key() / 1024,
        rss_start.map(|r| r / 1024),
        rss().map(|r| r / 1024)
    );
    assert!(
        admitted > cap as u64,
        "idle keys were evicted to admit new ones"
    );
    assert!(refused > 0, "the flood ran above the cap");
    assert!(peak <= bound, "heap grew to {peak} bytes, bound {bound}");
}

/// Per-key quotas in front of a large default (a service whose every key
/// has a limit from its configuration): 200,000 distinct keys of 10 a
/// second are all admitted, each once more up to its limit and then
/// refused by its own limit, and the live heap stays within the byte
/// budget. The default's 8 MiB ring does not size the key count.
fn keys_with_quotas_are_budgeted_by_what_they_take() {
    let ten = slidelog::Quota::new(10, Duration::from_secs(1)).unwrap();
    let start = live();
    let keyed = KeyedLimiter::<String>::builder(u32::MAX >> 12, Duration::from_secs(1))
        .quota(move |_| Some(ten.clone()))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let keys = 200_000u32;
    let key = |i: u32| {
        format!(
            "edge\u{1f}remote_address\u{1f}10.{}.{}.{}",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        )
    };
    for i in 0..keys {
        let k = key(i);
        let first = keyed.check(k.as_str());
        assert!(first.is_ok(), "key {i}'s first request: {first:?}");
    }
    assert_eq!(keyed.len(), keys as usize);
    for i in (0..keys).step_by(997) {
        let k = key(i);
        for _ in 1..10 {
            keyed.check(k.as_str()).unwrap();
        }
        assert_eq!(
            keyed.check(k.as_str()).unwrap_err().reason(),
            DenyReason::RateLimited
        );
    }
    let heap = (live() - start) as usize;
    println!(
        "quotas: {keys} keys, memory_bytes {} ({} a key), heap {heap}, budget {}",
        keyed.memory_bytes(),
        keyed.memory_bytes() / keys as usize,
        keyed.max_bytes()
    );
    assert!(keyed.memory_bytes() <= keyed.max_bytes());
    assert!(
        heap <= keyed.max_bytes(),
        "heap {heap} over the budget {}",
        keyed.max_bytes()
    );
}

/// The default configuration's budget counts the keys' own heap
/// bytes. 8,000 new keys of 64 KiB each (512 MiB offered; all admitted and
/// stored whole before, RSS growing by 64 KiB a key) against
/// `KeyedLimiter::<String>::new(100, 60 s)`: the live heap stays within the
/// 256 MiB budget (plus one key being built), `memory_bytes()` counts the
/// key bytes, and the keys beyond the budget are refused at the cap.
fn flood_of_long_keys_stays_within_the_budget() {
    let keyed = KeyedLimiter::<String>::new(100, Duration::from_secs(60)).unwrap();
    let budget = keyed.max_bytes();
    assert_eq!(budget, 256 << 20);
    let start = live();
    let rss_start = rss();
    let (mut admitted, mut refused, mut peak) = (0usize, 0usize, 0isize);
    let long = 64 << 10;
    for k in 0..8_000usize {
        let key = format!("{k:08}{}", "k".repeat(long - 8));
        match keyed.check(key.as_str()) {
            Ok(_) => admitted += 1,
            Err(d) => {
                assert_eq!(d.reason(), DenyReason::KeyCapacity);
                refused += 1;
            }
        }
        drop(key);
        if k % 64 == 0 {
            peak = peak.max(live() - start);
        }
        assert!(keyed.memory_bytes() <= budget);
    }
    peak = peak.max(live() - start);
    println!(
        "long keys: {admitted} admitted, {refused} refused, memory_bytes {} KiB, peak heap {} KiB \
         (budget {} KiB), RSS {:?} -> {:?} KiB",
        keyed.memory_bytes() / 1024,
        peak / 1024,
        budget / 1024,
        rss_start.map(|r| r / 1024),
        rss().map(|r| r / 1024)
    );
    assert!(refused > 0, "the flood went past the budget");
    assert!(
        keyed.memory_bytes() >= admitted * long,
        "memory_bytes counts the key bytes"
    );
    // The budget, the papaya table's slack around it, and one key in flight.
    let bound = budget as isize + (budget / 8) as isize + 2 * long as isize;
    assert!(peak <= bound, "heap grew to {peak} bytes, bound {bound}");
    // Refused only once another long key no longer fits the budget.
    let one_more = long + keyed.bytes_per_key();
    assert!(
        keyed.memory_bytes() + one_more > budget,
        "refused with {} of {budget} bytes used",
        keyed.memory_bytes()
    );
}
