//! The weighted log against the weighted deque model: every decision,
//! effective time, remaining count, retry time, deciding policy and usage,
//! over several policies of limits from 1 to `u32::MAX`, with checks,
//! peeks, charges, reservations, commits and cancels; the capacity merge
//! never admitting what the exact log denies, and denying spuriously only
//! as the module docs bound it; racing threads never putting more than the
//! limit in a window.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use slidelog::weighted::{Reservation, Usage, WeightedLog};
use slidelog::{Admitted, ConfigError, Denied, DenyReason};

/// The weighted deque: one entry per recorded call, `(effective time,
/// units)`, never merged and never dropped; a window's usage is the sum of
/// the entries with time `> t - W`.
#[derive(Clone, Debug)]
struct Model {
    policies: Vec<(u32, u64)>,
    entries: Vec<(u64, u64)>,
    newest: u64,
}

/// What the model (or the log, translated) answers to a check or a peek.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Admitted {
        at: u64,
        remaining: u32,
        policy: usize,
    },
    /// Denied until the absolute time `until` (from the caller's reading).
    Denied {
        until: u64,
        policy: usize,
    },
    ExceedsLimit {
        policy: usize,
    },
}

fn observed(now: u64, result: Result<Admitted, Denied>) -> Decision {
    match result {
        Ok(a) => Decision::Admitted {
            at: a.at(),
            remaining: a.remaining(),
            policy: a.policy(),
        },
        Err(d) => match d.reason() {
            DenyReason::ExceedsLimit { .. } => Decision::ExceedsLimit { policy: d.policy() },
            DenyReason::RateLimited => Decision::Denied {
                until: now + d.retry_after_nanos(),
                policy: d.policy(),
            },
            other => panic!("unexpected denial {other:?}"),
        },
    }
}

/// A [`Usage`] as `(at, used, limit, policy)`.
fn usage_tuple(u: Usage) -> (u64, u64, u32, usize) {
    (u.at(), u.used(), u.limit(), u.policy())
}

impl Model {
    fn new(policies: &[(u32, u64)]) -> Self {
        Model {
            policies: policies.to_vec(),
            entries: Vec::new(),
            newest: 0,
        }
    }

    fn t(&self, now: u64) -> u64 {
        now.max(self.newest)
    }

    fn used(&self, i: usize, t: u64) -> u64 {
        let w = self.policies[i].1;
        self.entries
            .iter()
            .filter(|e| e.0 + w > t)
            .map(|e| e.1)
            .sum()
    }

    /// Distinct effective times of the recorded calls live in policy `i`'s
    /// window at `t`.
    fn instants(&self, i: usize, t: u64) -> usize {
        let w = self.policies[i].1;
        let live = self.entries.iter().filter(|e| e.0 + w > t).map(|e| e.0);
        live.collect::<BTreeSet<_>>().len()
    }

    /// Records `n > 0` units at `t`; the entry's index.
    fn record(&mut self, t: u64, n: u64) -> usize {
        self.entries.push((t, n));
        self.newest = t;
        self.entries.len() - 1
    }

    /// The decision for `n` units at `now`, recording nothing.
    fn judge(&self, n: u32, now: u64) -> Decision {
        let (min_policy, min) = self
            .policies
            .iter()
            .enumerate()
            .min_by_key(|&(i, p)| (p.0, i))
            .map(|(i, p)| (i, p.0))
            .unwrap();
        if n > min {
            return Decision::ExceedsLimit { policy: min_policy };
        }
        let t = self.t(now);
        let n = u64::from(n);
        let mut denied: Option<(u64, usize)> = None;
        let mut left: Option<(u64, usize)> = None;
        for (i, &(limit, window)) in self.policies.iter().enumerate() {
            let used = self.used(i, t);
            let limit = u64::from(limit);
            if used + n > limit {
                // The oldest live entries leave first; the one whose
                // leaving makes room for `n` decides.
                let need = used + n - limit;
                let mut gone = 0;
                let mut until = None;
                for e in self.entries.iter().filter(|e| e.0 + window > t) {
                    gone += e.1;
                    if gone >= need {
                        until = Some(e.0 + window);
                        break;
                    }
                }
                let until = until.unwrap();
                if denied.is_none_or(|(u, _)| until > u) {
                    denied = Some((until, i));
                }
            } else {
                let room = limit - used - n;
                if left.is_none_or(|(r, _)| room < r) {
                    left = Some((room, i));
                }
            }
        }
        if let Some((until, policy)) = denied {
            return Decision::Denied { until, policy };
        }
        let (room, policy) = left.unwrap();
        Decision::Admitted {
            at: t,
            remaining: room as u32,
            policy,
        }
    }

    /// A check: the decision, and the entry it recorded.
    fn check(&mut self, n: u32, now: u64) -> (Decision, Option<usize>) {
        let d = self.judge(n, now);
        let entry = match d {
            Decision::Admitted { at, .. } if n > 0 => Some(self.record(at, u64::from(n))),
            _ => None,
        };
        (d, entry)
    }

    fn usage(&self, now: u64) -> (u64, u64, u32, usize) {
        let t = self.t(now);
        let mut least: Option<(i128, usize)> = None;
        for (i, &(limit, _)) in self.policies.iter().enumerate() {
            let room = i128::from(limit) - i128::from(self.used(i, t));
            if least.is_none_or(|(r, _)| room < r) {
                least = Some((room, i));
            }
        }
        let (_, i) = least.unwrap();
        (t, self.used(i, t), self.policies[i].0, i)
    }

    fn charge(&mut self, n: u32, now: u64) -> (u64, u64, u32, usize) {
        let t = self.t(now);
        if n > 0 {
            self.record(t, u64::from(n));
        }
        self.usage(now)
    }

    /// Commits a reservation of `held` units recorded as `entry`.
    fn commit(
        &mut self,
        entry: Option<usize>,
        held: u32,
        used: u32,
        now: u64,
    ) -> (u64, u64, u32, usize) {
        if used <= held {
            if let Some(k) = entry {
                self.entries[k].1 = u64::from(used);
            }
            self.usage(now)
        } else {
            self.charge(used - held, now)
        }
    }

    fn cancel(&mut self, entry: Option<usize>) {
        if let Some(k) = entry {
            self.entries[k].1 = 0;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u32),
    Peek(u32),
    Charge(u32),
    Reserve(u32),
    /// Commit the reservation at this index (mod the open ones) at
    /// `used`, given as a fraction of the held units (`used = held * p /
    /// 4`, so 0, some, all, or more).
    Commit(usize, u32),
    Cancel(usize),
    /// Drop a reservation without settling it.
    Forget(usize),
    Usage,
}

/// 1 to 3 policies: tiny limits (so that windows fill), large ones up to
/// `u32::MAX`, short windows that overlap.
fn policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    let limit = prop_oneof![
        4 => 1..=20u32,
        1 => Just(u32::MAX),
        1 => Just(u32::MAX - 1),
        1 => 1_000_000_000..=u32::MAX,
    ];
    prop::collection::vec((limit, 1..=40u64), 1..=3)
}

/// Units: small ones, and large ones that matter to large limits.
fn units() -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 0..=8u32,
        2 => 0..=25u32,
        1 => Just(u32::MAX),
        1 => Just(u32::MAX / 2),
        1 => 1_000_000_000..=u32::MAX,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => units().prop_map(Op::Check),
        2 => units().prop_map(Op::Peek),
        3 => units().prop_map(Op::Charge),
        3 => units().prop_map(Op::Reserve),
        3 => (any::<usize>(), 0..=6u32).prop_map(|(i, p)| Op::Commit(i, p)),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::Forget),
        1 => Just(Op::Usage),
    ]
}

/// A clock move (mostly forwards, on or past window edges, sometimes
/// backwards: the clamp) and an operation.
fn steps() -> impl Strategy<Value = Vec<(i64, Op)>> {
    let dt = prop_oneof![
        4 => Just(0i64),
        4 => 0..=12i64,
        1 => Just(40i64),
        1 => Just(41i64),
        1 => -15..0i64,
    ];
    prop::collection::vec((dt, op()), 1..150)
}

fn build(policies: &[(u32, u64)], capacity: Option<usize>) -> WeightedLog {
    let mut b = WeightedLog::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(limit, window) in &policies[1..] {
        b = b.and(limit, Duration::from_nanos(window));
    }
    if let Some(c) = capacity {
        b = b.capacity(NonZeroUsize::new(c).unwrap());
    }
    b.build().unwrap()
}

/// An open reservation: the log's, the model's entry, the units held.
struct Open<'a> {
    held: Reservation<'a>,
    entry: Option<usize>,
    units: u32,
}

/// The exact run: the log and the model answer every operation alike.
fn run_exact(policies: &[(u32, u64)], steps: &[(i64, Op)]) -> Result<(), TestCaseError> {
    let log = build(policies, None);
    let mut model = Model::new(policies);
    let mut open: Vec<Open<'_>> = Vec::new();
    let mut now: u64 = 1_000;
    for &(dt, op) in steps {
        now = now.saturating_add_signed(dt);
        match op {
            Op::Check(n) => {
                let (want, _) = model.check(n, now);
                prop_assert_eq!(observed(now, log.check_n_at(n, now)), want, "check {}", n);
            }
            Op::Peek(n) => {
                let want = model.judge(n, now);
                prop_assert_eq!(observed(now, log.peek_n_at(n, now)), want, "peek {}", n);
            }
            Op::Charge(n) => {
                let want = model.charge(n, now);
                prop_assert_eq!(usage_tuple(log.charge_at(n, now)), want, "charge {}", n);
            }
            Op::Reserve(n) => {
                let (want, entry) = model.check(n, now);
                let got = log.reserve_at(n, now);
                let got_d = observed(now, got.as_ref().map(|r| r.admitted()).map_err(|d| *d));
                prop_assert_eq!(got_d, want, "reserve {}", n);
                if let Ok(held) = got {
                    prop_assert_eq!(held.units(), n);
                    open.push(Open {
                        held,
                        entry,
                        units: n,
                    });
                }
            }
            Op::Commit(i, p) if !open.is_empty() => {
                let o = open.remove(i % open.len());
                let used = (u64::from(o.units) * u64::from(p) / 4).min(u64::from(u32::MAX)) as u32;
                let want = model.commit(o.entry, o.units, used, now);
                prop_assert_eq!(
                    usage_tuple(o.held.commit_at(used, now)),
                    want,
                    "commit {}",
                    used
                );
            }
            Op::Cancel(i) if !open.is_empty() => {
                let o = open.remove(i % open.len());
                model.cancel(o.entry);
                o.held.cancel();
            }
            Op::Forget(i) if !open.is_empty() => {
                let _kept_whole = open.remove(i % open.len());
            }
            Op::Commit(..) | Op::Cancel(_) | Op::Forget(_) => {}
            Op::Usage => {
                prop_assert_eq!(usage_tuple(log.usage_at(now)), model.usage(now));
            }
        }
        // Every policy's usage, at the effective time.
        let t = model.t(now);
        for i in 0..policies.len() {
            prop_assert_eq!(log.used_at(i, t), Some(model.used(i, t)), "policy {}", i);
        }
        prop_assert!(log.len() <= log.capacity());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Sequentially (with the default capacity, which these runs never
    /// reach) every answer is the weighted deque's.
    #[test]
    fn every_answer_is_the_models(policies in policies(), steps in steps()) {
        run_exact(&policies, &steps)?;
    }

    /// With a capacity of 1 to 6 entries, merges happen all the time. The
    /// model records exactly what the log recorded; then, at every step
    /// and for every policy: the log's usage is at least the exact usage;
    /// it is the exact usage while the window holds recorded calls at
    /// fewer than `C` distinct times; and every admission of the log is
    /// one the exact model makes.
    #[test]
    fn merging_never_admits_what_the_exact_log_denies(
        policies in policies(),
        capacity in 1..=6usize,
        steps in steps(),
    ) {
        let log = build(&policies, Some(capacity));
        let mut model = Model::new(&policies);
        let mut open: Vec<Open<'_>> = Vec::new();
        let mut now: u64 = 1_000;
        for &(dt, op) in &steps {
            now = now.saturating_add_signed(dt);
            match op {
                Op::Check(n) | Op::Peek(n) | Op::Reserve(n) => {
                    let exact = model.judge(n, now);
                    let got = match op {
                        Op::Reserve(_) => log.reserve_at(n, now).map(|held| {
                            let admitted = held.admitted();
                            (admitted, Some(held))
                        }),
                        Op::Check(_) => log.check_n_at(n, now).map(|a| (a, None)),
                        _ => log.peek_n_at(n, now).map(|a| (a, None)),
                    };
                    match got {
                        Ok((admitted, held)) => {
                            let Decision::Admitted { at, remaining, .. } = exact else {
                                return Err(TestCaseError::fail(format!(
                                    "over-admission: {n} at {now} admitted, exact {exact:?}"
                                )));
                            };
                            prop_assert_eq!(admitted.at(), at);
                            prop_assert!(admitted.remaining() <= remaining);
                            if !matches!(op, Op::Peek(_)) {
                                let entry = (n > 0).then(|| model.record(at, u64::from(n)));
                                if let Some(held) = held {
                                    open.push(Open { held, entry, units: n });
                                }
                            }
                        }
                        Err(denied) => {
                            // A denial the exact log would not make needs a
                            // window of `C` or more instants (checked for
                            // every policy below, through its usage).
                            if let (Decision::Denied { until, .. }, DenyReason::RateLimited) =
                                (exact, denied.reason())
                            {
                                prop_assert!(now + denied.retry_after_nanos() >= until);
                            }
                        }
                    }
                }
                Op::Charge(n) => {
                    model.charge(n, now);
                    log.charge_at(n, now);
                }
                Op::Commit(i, p) if !open.is_empty() => {
                    let o = open.remove(i % open.len());
                    let used =
                        (u64::from(o.units) * u64::from(p) / 4).min(u64::from(u32::MAX)) as u32;
                    model.commit(o.entry, o.units, used, now);
                    o.held.commit_at(used, now);
                }
                Op::Cancel(i) if !open.is_empty() => {
                    let o = open.remove(i % open.len());
                    model.cancel(o.entry);
                    o.held.cancel();
                }
                Op::Forget(i) if !open.is_empty() => {
                    let _kept_whole = open.remove(i % open.len());
                }
                Op::Commit(..) | Op::Cancel(_) | Op::Forget(_) | Op::Usage => {}
            }
            let t = model.t(now);
            for i in 0..policies.len() {
                let (got, exact) = (log.used_at(i, t).unwrap(), model.used(i, t));
                prop_assert!(got >= exact, "policy {} under-counted: {} < {}", i, got, exact);
                if model.instants(i, t) < capacity {
                    prop_assert_eq!(got, exact, "policy {}: a window of fewer than C instants", i);
                }
            }
            prop_assert!(log.len() <= capacity);
        }
    }
}

/// Final units of every admitted call (`(effective time, units)`), and
/// the most any window of `window` holds of them.
fn max_in_window(mut calls: Vec<(u64, u64)>, window: u64) -> u64 {
    calls.sort_unstable();
    let (mut sum, mut from, mut most) = (0u64, 0usize, 0u64);
    for &(t, units) in &calls {
        sum += units;
        while calls[from].0 + window <= t {
            sum -= calls[from].1;
            from += 1;
        }
        most = most.max(sum);
    }
    most
}

/// Threads racing on one log with readings from one shared clock, checking
/// and reserving (then committing part, all or none of it): no window of
/// the recorded effective times holds more than the limit of the calls'
/// final units. Reported as the count of windows over it, asserted zero.
#[test]
fn racing_threads_never_exceed_the_window() {
    const THREADS: u64 = 4;
    const CALLS: u64 = if cfg!(debug_assertions) {
        3_000
    } else {
        20_000
    };
    let (limit, window) = (100u32, 50u64);
    let log = Arc::new(build(&[(limit, window), (150, 120)], Some(16)));
    let clock = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|seed| {
            let (log, clock) = (Arc::clone(&log), Arc::clone(&clock));
            std::thread::spawn(move || {
                let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut admitted = Vec::new();
                for _ in 0..CALLS {
                    let r = next();
                    if r % 4 == 0 {
                        clock.fetch_add(r % 3, Ordering::Relaxed);
                    }
                    let now = clock.load(Ordering::Relaxed);
                    let n = (r >> 8) as u32 % 30;
                    if r % 3 == 0 {
                        if let Ok(held) = log.reserve_at(n, now) {
                            let at = held.admitted().at();
                            let used = match (r >> 20) % 3 {
                                0 => {
                                    held.cancel();
                                    0
                                }
                                1 => {
                                    let used = n / 2;
                                    held.commit_at(used, now);
                                    used
                                }
                                _ => n,
                            };
                            admitted.push((at, u64::from(used)));
                        }
                    } else if let Ok(a) = log.check_n_at(n, now) {
                        admitted.push((a.at(), u64::from(n)));
                    }
                }
                admitted
            })
        })
        .collect();
    let calls: Vec<(u64, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let mut excesses = 0;
    for (lim, w) in [(limit, window), (150, 120)] {
        if max_in_window(calls.clone(), w) > u64::from(lim) {
            excesses += 1;
        }
    }
    assert_eq!(excesses, 0, "windows over their limit");
    // The threads did race for the room: some calls were denied.
    assert!(calls.len() < (THREADS * CALLS) as usize);
}

#[test]
fn invalid_policies_are_refused() {
    let refuse = |limit, window| WeightedLog::new(limit, window).unwrap_err();
    assert_eq!(refuse(0, Duration::from_secs(1)), ConfigError::ZeroLimit);
    assert_eq!(refuse(1, Duration::ZERO), ConfigError::ZeroWindow);
    assert!(matches!(
        refuse(1, slidelog::MAX_WINDOW + Duration::from_nanos(1)),
        ConfigError::WindowTooLarge { .. }
    ));
    let mut b = WeightedLog::builder(1, Duration::from_secs(1));
    for _ in 0..slidelog::MAX_POLICIES {
        b = b.and(2, Duration::from_secs(2));
    }
    assert!(matches!(
        b.build().unwrap_err(),
        ConfigError::TooManyPolicies { .. }
    ));
}

/// Times at the top of the range: `t + W` never overflows, readings are
/// clamped to `u64::MAX - W`.
#[test]
fn the_largest_readings_are_clamped() {
    let log = WeightedLog::new(u32::MAX, Duration::from_secs(1)).unwrap();
    let a = log.check_n_at(u32::MAX, u64::MAX).unwrap();
    assert_eq!(a.at(), u64::MAX - 1_000_000_000);
    let denied = log.check_n_at(1, u64::MAX).unwrap_err();
    assert_eq!(denied.retry_after(), Duration::from_secs(1));
}

/// A budget of 5,000,000 a day, and a memory in proportion to the calls.
#[test]
fn large_budgets_take_memory_by_calls() {
    let log = WeightedLog::new(5_000_000, Duration::from_secs(86_400)).unwrap();
    let empty = log.bytes();
    for call in 0..1_000u64 {
        log.check_n_at(4_000, call * 1_000_000).unwrap();
    }
    assert!(log.check_n_at(1_000_001, 1_000_000_000).is_err());
    assert_eq!(log.usage_at(1_000_000_000).used(), 4_000_000);
    assert!(log.bytes() - empty <= 1_024 * 16, "{}", log.bytes());
}
