//! The in-process store: one keyed limiter whose every key has the quota
//! the configuration gives it, within a memory budget (`--max-memory`), and
//! what a new client gets while live keys fill that budget (`--when-full`).

use crate::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{ClockChoice, KeyedLimiter, Quota};

use super::store::unconfigured;

/// The in-process store's limiter.
pub(super) type Local = KeyedLimiter<String, ClockChoice>;

/// The in-process limiter: per-key quotas from `quota` (a key without one,
/// [`unconfigured`]), `max_memory` bytes for the keys' logs, entries and
/// key bytes, and no count of keys beyond what those bytes hold, on
/// `clock`.
pub(super) fn limiter(
    max_memory: usize,
    clock: ClockChoice,
    quota: impl Fn(&String) -> Option<Quota> + Send + Sync + 'static,
) -> Result<Local, String> {
    let default = unconfigured();
    KeyedLimiter::<String>::builder(default.limit, default.window)
        .clock(clock)
        .quota(quota)
        .max_bytes(max_memory)
        .max_keys(usize::MAX)
        .name("rls")
        .build()
        .map_err(|e| match e {
            crate::ConfigError::MaxBytesBelowOneKey { per_key, .. } => {
                format!("--max-memory {max_memory} is below one key ({per_key} bytes)")
            }
            e => e.to_string(),
        })
}

/// The least often a full store is reported on stderr.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// What the service does while live keys fill its memory budget.
#[derive(Debug)]
pub(super) struct Full {
    /// `--when-full deny`: answer a new client OVER_LIMIT (else OK,
    /// recording nothing).
    pub(super) deny: bool,
    started: Instant,
    /// Milliseconds after `started` of the last report, plus one (0: none
    /// yet).
    reported: AtomicU64,
    /// New clients met since the last report.
    met: AtomicU64,
}

impl Full {
    pub(super) fn new(deny: bool) -> Full {
        Full {
            deny,
            started: Instant::now(),
            reported: AtomicU64::new(0),
            met: AtomicU64::new(0),
        }
    }

    /// A new client found the store full: counted, and reported on stderr
    /// with the store's numbers at most once every [`REPORT_EVERY`].
    pub(super) fn met(&self, store: &Local) {
        // Relaxed, here and below: counts for a report, ordering nothing.
        self.met.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let last = self.reported.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= REPORT_EVERY.as_millis() as u64;
        if !due
            || self
                .reported
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let met = self.met.swap(0, Ordering::Relaxed);
        eprintln!(
            "slidelog serve: the in-process store is full: {} live keys take {} of --max-memory {}, none idle; {met} new client{} {} (--when-full {}) {}; raise --max-memory to limit them",
            store.len(),
            size(store.memory_bytes()),
            size(store.max_bytes()),
            if met == 1 { "" } else { "s" },
            if self.deny {
                "answered OVER_LIMIT"
            } else {
                "answered OK unrecorded"
            },
            if self.deny { "deny" } else { "admit" },
            if last == 0 {
                "so far"
            } else {
                "since the last report"
            },
        );
    }
}

/// `bytes` as a person reads a size (`256.0 KiB`, `512.0 MiB`).
pub(super) fn size(bytes: usize) -> String {
    bytesize::ByteSize::b(bytes as u64)
        .display()
        .iec()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_below_one_key_says_so() {
        let clock = ClockChoice::Monotonic(crate::MonotonicClock::new());
        let err = limiter(16, clock, |_| None).unwrap_err();
        assert!(
            err.starts_with("--max-memory 16 is below one key ("),
            "{err}"
        );
    }

    #[test]
    fn reports_at_most_once_a_minute() {
        let clock = ClockChoice::Monotonic(crate::MonotonicClock::new());
        let store = limiter(1 << 20, clock, |_| None).unwrap();
        let full = Full::new(false);
        full.met(&store);
        let first = full.reported.load(Ordering::Relaxed);
        assert_ne!(first, 0, "the first meeting is reported");
        for _ in 0..1_000 {
            full.met(&store);
        }
        assert_eq!(full.reported.load(Ordering::Relaxed), first);
        assert_eq!(full.met.load(Ordering::Relaxed), 1_000);
    }
}
