//! The upkeep thread of [`QuantaClock::recent`] clocks: one per process,
//! shared by every [`Upkeep`](super::Upkeep) guard alive.

use std::sync::{Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Clock, QuantaClock};
use crate::sync::Arc;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The running thread: stopped (and joined) when the last guard's
/// reference drops.
#[derive(Debug)]
pub(super) struct Running {
    published: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The running thread, if some guard still holds it.
static RUNNING: Mutex<Weak<Running>> = Mutex::new(Weak::new());

impl Running {
    /// The running thread, or a new one publishing every `interval`.
    pub(super) fn shared(interval: Duration) -> Result<Arc<Running>, std::io::Error> {
        if interval.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an upkeep interval must be longer than zero (the thread would spin)",
            ));
        }
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(alive) = running.upgrade() {
            return Ok(alive);
        }
        let counting = QuantaClock::new();
        // Published before any clock reads it: a clock's origin is
        // never the empty cell's 0. Relaxed: see `Clock::now`.
        let published = Arc::new(AtomicU64::new(counting.now()));
        let stop = Arc::new(AtomicBool::new(false));
        let (to, stopped) = (Arc::clone(&published), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("slidelog-upkeep".into())
            .spawn(move || {
                // Relaxed, the flag: it guards no data, and the
                // `unpark` that follows its store synchronizes with
                // the `park` it ends, so the next load sees it. The
                // time: see `Clock::now`.
                while !stopped.load(Ordering::Relaxed) {
                    to.store(counting.now(), Ordering::Relaxed);
                    std::thread::park_timeout(interval);
                }
            })?;
        let alive = Arc::new(Running {
            published,
            stop,
            thread: Some(thread),
        });
        *running = Arc::downgrade(&alive);
        Ok(alive)
    }

    /// Where the thread publishes the time.
    pub(super) fn published(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.published)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Relaxed: see the thread's loop (the `unpark` after it).
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // A panicked upkeep thread has nothing left to stop.
            let _ = thread.join();
        }
    }
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use std::time::Duration;

    use crate::clock::{Clock, QuantaClock};
    use crate::sync::Arc;

    /// The upkeep thread is one per process: tests that start or stop it
    /// take turns, each holding this for its length.
    fn upkeep_turn() -> std::sync::MutexGuard<'static, ()> {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TURN.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits (bounded) until `clock` has moved `by` nanoseconds past
    /// `from`, and returns its last reading.
    fn moved(clock: &QuantaClock, from: u64, by: u64) -> u64 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut read = clock.now();
        while read - from < by && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            read = clock.now();
        }
        read
    }

    /// A `recent` clock reads the time the upkeep thread publishes (inline,
    /// no counter read): it counts from its own creation, moves as the
    /// thread publishes, and never runs ahead of a counting clock created
    /// before it by more than an upkeep interval (its origin may be that
    /// stale).
    #[test]
    fn a_recent_clock_follows_the_upkeep_thread() {
        let _turn = upkeep_turn();
        let interval = Duration::from_millis(1);
        let counting = QuantaClock::new();
        let (recent, _upkeep) = QuantaClock::recent(interval).expect("the upkeep thread starts");
        let start = recent.now();
        assert!(start >= QuantaClock::ORIGIN);
        assert!(
            start - QuantaClock::ORIGIN < 1_000_000_000,
            "a new clock reads {start}"
        );
        // It moves 10 ms: the thread publishes every interval, however late
        // a loaded machine schedules it.
        let read = moved(&recent, start, 10_000_000);
        let exact = counting.now();
        assert!(
            read - start >= 10_000_000,
            "the recent clock stood still at {read}"
        );
        // Between two publications the time stands still: reads in a row
        // repeat (a counter read never does).
        let reads: Vec<u64> = (0..1_000).map(|_| recent.now()).collect();
        assert!(
            reads.windows(2).any(|w| w[0] == w[1]),
            "the recent clock read a counter: {:?}",
            &reads[..4]
        );
        // An interval, and a little for the two clocks' scalings of one
        // calibration.
        let slack = interval.as_nanos() as u64 + 100_000;
        assert!(
            read <= exact + slack,
            "the recent clock ({read}) ran ahead of the counting one ({exact})"
        );
    }

    /// `recent` clocks share one upkeep thread while a guard is alive: the
    /// second clock keeps moving after the first guard is dropped, the
    /// time stands still once the last one is, and the next `recent` clock
    /// starts a thread of its own.
    #[test]
    fn recent_clocks_share_one_thread_until_the_last_guard_drops() {
        let _turn = upkeep_turn();
        let interval = Duration::from_millis(1);
        let (first, first_guard) = QuantaClock::recent(interval).expect("the thread starts");
        let (second, second_guard) = QuantaClock::recent(interval).expect("shared");
        assert!(Arc::ptr_eq(&first_guard._running, &second_guard._running));
        drop(first_guard);
        let from = second.now();
        assert!(
            moved(&second, from, 5_000_000) - from >= 5_000_000,
            "the second clock stood still with its guard alive"
        );
        drop(second_guard);
        // Stopped and joined: nothing publishes any more.
        let (a, b) = (first.now(), second.now());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            (first.now(), second.now()),
            (a, b),
            "the thread kept publishing"
        );
        let (third, _guard) = QuantaClock::recent(interval).expect("a new thread starts");
        let from = third.now();
        assert!(
            moved(&third, from, 5_000_000) - from >= 5_000_000,
            "a clock after the last guard stood still"
        );
        assert_eq!(second.now(), b);
    }

    #[test]
    fn a_zero_upkeep_interval_is_refused() {
        let refused = QuantaClock::recent(Duration::ZERO).map(|_| ()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
    }
}
