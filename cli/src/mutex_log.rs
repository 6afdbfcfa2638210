//! The classic sliding-window log behind a mutex: the baseline of
//! `slidelog bench` and of the criterion benches (`benches/common`).

use std::collections::VecDeque;
use std::sync::Mutex;

/// A deque of admitted timestamps behind one lock.
#[derive(Debug)]
pub(crate) struct MutexLog {
    limit: usize,
    window: u64,
    log: Mutex<VecDeque<u64>>,
}

#[allow(dead_code)] // each user takes the calls it needs
impl MutexLog {
    pub(crate) fn new(limit: u32, window: u64) -> Self {
        MutexLog {
            limit: limit as usize,
            window,
            log: Mutex::new(VecDeque::with_capacity(limit as usize)),
        }
    }

    /// `n` units at `now`, all or nothing.
    #[inline]
    pub(crate) fn check_n_at(&self, n: u32, now: u64) -> bool {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
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

    /// One request at `now`.
    #[inline]
    pub(crate) fn check_at(&self, now: u64) -> bool {
        self.check_n_at(1, now)
    }
}
