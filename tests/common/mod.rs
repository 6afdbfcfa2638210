//! The reference model of docs/design.md §1: a deque of admitted timestamps.
//!
//! This is the test oracle. It lives in the test tree, never in `src/`.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::hash::Hash;

pub mod gate;
pub mod multi;

use multi::{MultiDecision, MultiModel};
#[cfg(feature = "redis")]
pub mod redis_cluster;
#[cfg(feature = "redis")]
pub mod redis_model;
#[cfg(feature = "redis")]
pub mod redis_server;
#[cfg(feature = "redis-tls")]
pub mod redis_tls;

/// What the model decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelDecision {
    /// Admitted with `remaining` left.
    Admitted { remaining: u32 },
    /// Denied: admissible after `retry_after` ns.
    Denied { retry_after: u64 },
    /// `n > limit`: never admissible.
    ExceedsLimit,
}

/// The classic sliding-window log of one policy: [`MultiModel`] with one
/// policy, answered in the single-policy terms of [`ModelDecision`]. (One
/// model for the whole spec: the property tests, the loom linearizability
/// search and this adapter all decide through `MultiModel::decide`.)
#[derive(Clone, Debug)]
pub struct Model(MultiModel);

impl Model {
    pub fn new(limit: u32, window: u64) -> Self {
        Model(MultiModel::new(&[(limit, window)]))
    }

    /// `decide(t, n)` exactly as docs/design.md §1 states it (for
    /// non-decreasing `t`; an older `t` is judged at the newest admission's
    /// time, the clamp of §2).
    pub fn decide(&mut self, t: u64, n: u32) -> ModelDecision {
        match self.0.decide(t, n) {
            MultiDecision::Admitted { remaining, .. } => ModelDecision::Admitted { remaining },
            MultiDecision::Denied { until, .. } => ModelDecision::Denied {
                retry_after: until - t,
            },
            MultiDecision::ExceedsLimit => ModelDecision::ExceedsLimit,
        }
    }
}

/// One model per key.
#[derive(Debug)]
pub struct KeyedModel<K> {
    limit: u32,
    window: u64,
    keys: HashMap<K, Model>,
}

impl<K: Hash + Eq + Clone> KeyedModel<K> {
    pub fn new(limit: u32, window: u64) -> Self {
        KeyedModel {
            limit,
            window,
            keys: HashMap::new(),
        }
    }

    pub fn decide(&mut self, key: &K, t: u64, n: u32) -> ModelDecision {
        let (limit, window) = (self.limit, self.window);
        self.keys
            .entry(key.clone())
            .or_insert_with(|| Model::new(limit, window))
            .decide(t, n)
    }
}

/// A keyed limiter of 2 per second and 3 per minute per address on
/// `clock`: two policies, so headers and metrics name each.
pub fn two_policy_limiter(
    clock: &slidelog::ManualClock,
) -> std::sync::Arc<slidelog::KeyedLimiter<std::net::IpAddr, slidelog::ManualClock>> {
    std::sync::Arc::new(
        slidelog::KeyedLimiter::<std::net::IpAddr>::builder(2, std::time::Duration::from_secs(1))
            .and(3, std::time::Duration::from_secs(60))
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

/// Converts a limiter result into the model's terms.
pub fn observed(result: Result<slidelog::Admitted, slidelog::Denied>) -> ModelDecision {
    match result {
        Ok(a) => ModelDecision::Admitted {
            remaining: a.remaining(),
        },
        Err(d) => match d.reason() {
            slidelog::DenyReason::ExceedsLimit { .. } => ModelDecision::ExceedsLimit,
            _ => ModelDecision::Denied {
                retry_after: d.retry_after_nanos(),
            },
        },
    }
}

/// The largest number of timestamps in any window `(t - W, t]` (sorts `times`).
pub fn max_in_window(times: &mut [u64], window: u64) -> usize {
    times.sort_unstable();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..times.len() {
        // Entries at or before times[hi] - W have expired at times[hi].
        while times[lo] + window <= times[hi] {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// One step of a keyed property test: a check of `n` units for `key` after
/// the clock moved `dt`, or an explicit sweep after it moved `dt`.
#[derive(Clone, Debug)]
pub enum KeyedOp {
    Check { key: u64, dt: u64, n: u32 },
    Sweep { dt: u64 },
}

/// Keyed steps over 6 keys, with clock moves that sit on the window's edges
/// (`W - 1`, `W`, `W + 1`) and jumps long enough for keys to go idle.
pub fn keyed_ops(
    limit: u32,
    window: u64,
) -> impl proptest::strategy::Strategy<Value = Vec<KeyedOp>> {
    use proptest::prelude::*;
    let dt = prop_oneof![
        4 => Just(0u64),
        2 => Just(window),
        1 => Just(window - 1),
        1 => Just(window + 1),
        3 => 0..=window,
        1 => Just(2 * window),
        1 => Just(3 * window + 1),
        1 => Just(4 * window + 1),
    ];
    let op = prop_oneof![
        10 => (0..6u64, dt.clone(), 0..=limit + 1).prop_map(|(key, dt, n)| KeyedOp::Check { key, dt, n }),
        1 => dt.prop_map(|dt| KeyedOp::Sweep { dt }),
    ];
    prop::collection::vec(op, 1..250)
}

/// The driver the keyed property tests share: it applies each [`KeyedOp`]
/// to a keyed limiter on `clock`, and tells a legitimate refusal at the key
/// cap (every live key still busy) from a wrong one.
pub struct KeyedDriver {
    clock: slidelog::ManualClock,
    max_keys: usize,
    /// How long after its last admission a key may still hold state that
    /// counts (and so be refused eviction).
    busy_for: u64,
    last_admit: HashMap<u64, u64>,
}

/// What one [`KeyedOp`] asks of the limiter under test.
pub enum Step {
    /// A sweep ran (`retain_recent`); nothing to compare.
    Swept,
    /// Check `n` units of `key` at `now` (the clock already moved).
    Check { key: u64, now: u64, n: u32 },
}

impl KeyedDriver {
    pub fn new(clock: &slidelog::ManualClock, max_keys: usize, busy_for: u64) -> Self {
        KeyedDriver {
            clock: clock.clone(),
            max_keys,
            busy_for,
            last_admit: HashMap::new(),
        }
    }

    /// Moves the clock for `op`, runs `sweep` for a sweep, and says what to
    /// check.
    pub fn step(&mut self, op: &KeyedOp, sweep: impl FnOnce()) -> Step {
        use slidelog::Clock;
        let (KeyedOp::Sweep { dt } | KeyedOp::Check { dt, .. }) = *op;
        self.clock.advance(std::time::Duration::from_nanos(dt));
        match *op {
            KeyedOp::Sweep { .. } => {
                sweep();
                Step::Swept
            }
            KeyedOp::Check { key, n, .. } => Step::Check {
                key,
                now: self.clock.now(),
                n,
            },
        }
    }

    /// Whether `got` was refused at the key cap, which is right only when
    /// every live key may still count admissions (the cap never evicts a
    /// busy key): an `Err` of the property test otherwise.
    pub fn refused<T>(
        &self,
        got: &Result<T, slidelog::Denied>,
        now: u64,
    ) -> Result<bool, proptest::test_runner::TestCaseError> {
        match got {
            Err(d) if d.reason() == slidelog::DenyReason::KeyCapacity => {
                let busy = self
                    .last_admit
                    .values()
                    .filter(|&&t| t + self.busy_for > now)
                    .count();
                proptest::prop_assert!(busy >= self.max_keys, "refused with only {busy} busy keys");
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Records an admission of `key` at `now`.
    pub fn admitted(&mut self, key: u64, now: u64) {
        self.last_admit.insert(key, now);
    }
}

/// The sliding-window counter as documented, written plainly (a map of
/// sub-window counts, sequential time): the oracle for the lock-free counter
/// in property tests. `Slots(N)`: sub-window `k` spans `[ceil(k W / N),
/// ceil((k + 1) W / N))` (all of width `W / N` when N divides W); a request is
/// admitted iff the counts of its sub-window and the `N - 1` before it, plus
/// `n`, are at most the limit; `retry_after` runs until the oldest non-empty
/// one leaves. `TwoWindow`: the previous window's count weighted by its
/// overlap (rounded up) plus the current one's; `retry_after` runs until that
/// estimate next drops.
pub struct CounterModel {
    limit: u64,
    window: u64,
    /// Sub-windows per window: N, or 1 (two-window mode). Slot `k` spans
    /// `[ceil(k W / per), ceil((k + 1) W / per))`, so `per` consecutive
    /// slots span exactly `W` (plain u128 arithmetic here, independent of
    /// the crate's reciprocal division).
    per: u64,
    /// `None`: the two-window mode.
    slots: Option<u64>,
    counts: HashMap<u64, u64>,
}

impl CounterModel {
    pub fn new(limit: u32, window: u64, mode: slidelog::CounterMode) -> Self {
        let slots = match mode {
            slidelog::CounterMode::Slots(n) => Some(u64::from(n)),
            _ => None,
        };
        CounterModel {
            limit: u64::from(limit),
            window,
            per: slots.unwrap_or(1),
            slots,
            counts: HashMap::new(),
        }
    }

    /// The estimate at `t`: the sum of the N slots up to `t`'s, or the
    /// current window's count plus the previous one's weighted by the part
    /// of it still inside `(t - W, t]` (rounded up).
    pub fn estimate(&self, t: u64) -> u64 {
        let e = (u128::from(t) * u128::from(self.per) / u128::from(self.window)) as u64;
        let start_of = |k: u64| {
            (u128::from(k) * u128::from(self.window)).div_ceil(u128::from(self.per)) as u64
        };
        let count = |s: u64| self.counts.get(&s).copied().unwrap_or(0);
        match self.slots {
            Some(slots) => (e.saturating_sub(slots - 1)..=e).map(count).sum(),
            None => {
                let previous = if e == 0 { 0 } else { count(e - 1) };
                let left = self.window - (t - start_of(e));
                count(e) + (previous * left).div_ceil(self.window)
            }
        }
    }

    /// The decision at `t` (non-decreasing) for `n <= limit` units, as
    /// `Ok((at, remaining))` or `Err(retry_after)`: the wait until the
    /// first time the estimate admits `n`, found by trying each
    /// nanosecond (the estimate only falls while nothing is admitted).
    pub fn decide(&mut self, t: u64, n: u32) -> Result<(u64, u32), u64> {
        let n = u64::from(n);
        let used = self.estimate(t);
        if n > 0 && used + n > self.limit {
            let fits = (t + 1..)
                .find(|&u| self.estimate(u) + n <= self.limit)
                .expect("the estimate empties within two windows");
            return Err(fits - t);
        }
        let e = (u128::from(t) * u128::from(self.per) / u128::from(self.window)) as u64;
        *self.counts.entry(e).or_default() += n;
        Ok((t, self.limit.saturating_sub(used + n) as u32))
    }
}
