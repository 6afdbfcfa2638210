//! Bytes per key and per limiter, measured with a counting allocator:
//! slidelog against governor and the `Mutex<VecDeque>` log. Prints a table
//! (`cargo bench -p slidelog-peers --bench memory`); no timing.

mod common;

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::{Quota, RateLimiter};
use slidelog::{KeyedLimiter, Limiter, ManualClock};

#[path = "../../tests/common/counting.rs"]
mod counting;

use counting::{Counting, live};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn measure<T>(make: impl FnOnce() -> T) -> (T, isize) {
    let before = live();
    let value = make();
    (value, live() - before)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing.
    const KEYS: u64 = 100_000;
    println!("bytes per key ({KEYS} keys, each filled to its limit), and per single-key limiter");
    println!(
        "{:>6} {:>14} {:>14} {:>16} {:>16} {:>16} {:>16}",
        "limit",
        "slidelog/key",
        "governor/key",
        "mutex_log/key",
        "slidelog/one",
        "governor/one",
        "mutex_log/one"
    );
    for limit in [10u32, 100, 1000] {
        let window = Duration::from_secs(3600);
        let (slide, bytes) = measure(|| {
            let l = KeyedLimiter::<u64>::builder(limit, window)
                .clock(ManualClock::new())
                .max_keys(KEYS as usize)
                .build()
                .unwrap();
            for k in 0..KEYS {
                l.check_n(&k, limit).unwrap();
            }
            l
        });
        let slide_key = bytes as f64 / KEYS as f64;
        drop(slide);

        let quota = Quota::per_hour(NonZeroU32::new(limit).unwrap());
        let (gov, bytes) = measure(|| {
            let g = RateLimiter::keyed(quota);
            for k in 0..KEYS {
                let _ = g.check_key_n(&k, NonZeroU32::new(limit).unwrap());
            }
            g
        });
        let gov_key = bytes as f64 / KEYS as f64;
        drop(gov);

        let (log, bytes) = measure(|| {
            let m: Mutex<HashMap<u64, VecDeque<u64>>> = Mutex::new(HashMap::new());
            {
                let mut map = m.lock().unwrap();
                for k in 0..KEYS {
                    let deque = map.entry(k).or_default();
                    deque.extend(std::iter::repeat_n(0, limit as usize));
                }
            }
            m
        });
        let log_key = bytes as f64 / KEYS as f64;
        drop(log);

        let (one, slide_one) =
            measure(|| Limiter::with_clock(limit, window, ManualClock::new()).unwrap());
        let slide_one = slide_one as usize + std::mem::size_of_val(&one);
        let (gov_one, gov_bytes) = measure(|| RateLimiter::direct(quota));
        let gov_one_bytes = gov_bytes as usize + std::mem::size_of_val(&gov_one);
        let (log_one, log_bytes) = measure(|| {
            let l = common::MutexLog::new(limit, 1);
            for t in 0..limit as u64 {
                l.check_at(t);
            }
            l
        });
        let log_one_bytes = log_bytes as usize + std::mem::size_of_val(&log_one);
        println!(
            "{limit:>6} {slide_key:>14.1} {gov_key:>14.1} {log_key:>16.1} {slide_one:>16} {gov_one_bytes:>16} {log_one_bytes:>16}"
        );
    }
}
