//! Live reconfiguration (P9): after a change, every decision is the new
//! policies' over the history the old configuration kept — the newest
//! `L_old` admissions and everything after — against the deque model with
//! reconfigurations interleaved (grow, shrink, add and drop policies; keyed,
//! with evictions and per-key quotas), and on racing threads.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::gate::{Gated, gate};
use common::max_in_window;
use common::multi::{MultiModel, observed_multi};
use proptest::prelude::*;
use slidelog::{KeyedLimiter, Limiter, ManualClock, Policy, Quota};

/// 1 to 3 policies of small limits and windows (some above 11: a keyed
/// state then no longer fits inside its map entry, `keyed/state.rs`).
fn policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec(
        (prop_oneof![3 => 1..=6u32, 1 => 10..=14u32], 1..=40u64),
        1..=3,
    )
}

fn quota(policies: &[(u32, u64)]) -> Quota {
    let mut quota = Quota::new(policies[0].0, Duration::from_nanos(policies[0].1)).unwrap();
    for &(limit, window) in &policies[1..] {
        quota = quota.and(limit, Duration::from_nanos(window)).unwrap();
    }
    quota
}

fn as_policies(policies: &[(u32, u64)]) -> Vec<Policy> {
    policies
        .iter()
        .map(|&(l, w)| Policy::new(l, Duration::from_nanos(w)))
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    /// Move the clock by `dt` (backwards if negative), then `n` units.
    Check(i64, u32),
    /// What a check would answer, recording nothing.
    Peek(u32),
    /// New policies.
    Reconfigure(Vec<(u32, u64)>),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let dt = prop_oneof![4 => Just(0i64), 4 => 0..=12i64, 1 => Just(40i64), 1 => -15..0i64];
    let n = prop_oneof![6 => Just(1u32), 2 => 0..=7u32];
    let op = prop_oneof![
        12 => (dt, n.clone()).prop_map(|(dt, n)| Op::Check(dt, n)),
        2 => n.prop_map(Op::Peek),
        2 => policies().prop_map(Op::Reconfigure),
    ];
    prop::collection::vec(op, 1..150)
}

/// What happened, in order: for the window bound.
enum Event {
    /// `n` units admitted at effective time `t` under configuration `config`.
    Admit { t: u64, n: u32, config: usize },
    /// Configuration `config` took over.
    Config { config: usize },
}

/// **The window bound** (docs/design.md §6) for the admission that ends
/// `events`, under `configs[config]` at `t`: for each policy `(L, W)` in
/// force, the window `(t - W, t]` holds at most the largest limit in force
/// during it — whenever every configuration in force during it had a window
/// of at least `W` (a shorter one admits more in a longer span by design),
/// whatever the clock read at each change. `Err` names the window.
fn window_bound(events: &[Event], configs: &[Vec<(u32, u64)>]) -> Result<(), String> {
    let Some(&Event::Admit { t, config, .. }) = events.last() else {
        return Ok(());
    };
    for &(_, window) in &configs[config] {
        let mut units = 0u64;
        let mut largest = 0u32;
        let mut covered = true;
        let mut take = |c: usize| {
            largest = largest.max(configs[c].iter().map(|p| p.0).max().unwrap());
            configs[c].iter().map(|p| p.1).max().unwrap() >= window
        };
        for event in events.iter().rev() {
            match *event {
                // Effective times never decrease: the window starts here.
                Event::Admit { t: at, .. } if at + window <= t => break,
                Event::Admit { n, config, .. } => {
                    units += u64::from(n);
                    covered &= take(config);
                }
                Event::Config { config } => covered &= take(config),
            }
        }
        if covered && units > u64::from(largest) {
            return Err(format!(
                "{units} units in the window of {window} ending at {t}, largest limit {largest}"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// One key: every answer (decision, effective time, remaining, retry
    /// time, deciding policy) equals the model's, across reconfigurations
    /// that keep every admission still inside a window in force; and no
    /// window holds more than the largest limit in force during it.
    #[test]
    fn limiter_equals_the_model_across_reconfigurations(
        initial in policies(),
        ops in ops(),
    ) {
        let clock = ManualClock::new();
        let limiter =
            Limiter::with_clock(initial[0].0, Duration::from_nanos(initial[0].1), clock.clone())
                .unwrap();
        limiter.reconfigure(quota(&initial)).unwrap();
        let mut model = MultiModel::new(&initial);
        let mut configs = vec![initial.clone()];
        let mut events = vec![Event::Config { config: 0 }];
        let mut now = 100i64;
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Check(dt, n) => {
                    now = (now + dt).max(0);
                    let t = now as u64;
                    let got = observed_multi(t, limiter.check_n_at(*n, t));
                    prop_assert_eq!(got, model.decide(t, *n), "step {} at {} n {}", i, t, n);
                    if let common::multi::MultiDecision::Admitted { at, .. } = got && *n > 0 {
                        let config = configs.len() - 1;
                        events.push(Event::Admit { t: at, n: *n, config });
                        let bound = window_bound(&events, &configs);
                        prop_assert!(bound.is_ok(), "step {}: {}", i, bound.unwrap_err());
                    }
                }
                Op::Peek(n) => {
                    let t = now as u64;
                    let got = observed_multi(t, limiter.peek_n_at(*n, t));
                    prop_assert_eq!(got, model.clone().decide(t, *n), "peek, step {}", i);
                }
                Op::Reconfigure(policies) => {
                    let t = now as u64;
                    clock.set(t);
                    limiter.reconfigure(quota(policies)).unwrap();
                    model.reconfigure_at(policies, t);
                    configs.push(policies.clone());
                    events.push(Event::Config { config: configs.len() - 1 });
                    prop_assert_eq!(limiter.policies(), as_policies(policies));
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum KeyedOp {
    /// Advance the clock by `dt`, then `n` units for `key`.
    Check { key: u64, dt: u64, n: u32 },
    /// New default policies.
    Reconfigure(Vec<(u32, u64)>),
    /// A run-time quota for `key`.
    SetQuota(u64, Vec<(u32, u64)>),
    /// Back to the quota function or the default.
    ClearQuota(u64),
    /// Evict idle keys.
    Sweep,
}

fn keyed_ops() -> impl Strategy<Value = Vec<KeyedOp>> {
    let check = (
        0..5u64,
        prop_oneof![3 => 0..=6u64, 1 => 20..=60u64],
        0..=6u32,
    )
        .prop_map(|(key, dt, n)| KeyedOp::Check { key, dt, n });
    let op = prop_oneof![
        14 => check,
        2 => policies().prop_map(KeyedOp::Reconfigure),
        2 => (0..5u64, policies()).prop_map(|(k, p)| KeyedOp::SetQuota(k, p)),
        1 => (0..5u64).prop_map(KeyedOp::ClearQuota),
        1 => Just(KeyedOp::Sweep),
    ];
    prop::collection::vec(op, 1..160)
}

/// The keyed model: one deque per key, each key's policies chosen as the
/// limiter chooses them (run-time quota, then the quota function, then the
/// default), eviction mirrored (a key idle for its longest window plus the
/// margin is forgotten).
struct KeyedModel {
    default: Vec<(u32, u64)>,
    tier: Vec<(u32, u64)>,
    overrides: HashMap<u64, Vec<(u32, u64)>>,
    keys: HashMap<u64, MultiModel>,
    margin: u64,
}

impl KeyedModel {
    /// Keys 3 and 4 are on the quota function's tier.
    fn desired(&self, key: u64) -> Vec<(u32, u64)> {
        match self.overrides.get(&key) {
            Some(p) => p.clone(),
            None if key >= 3 => self.tier.clone(),
            None => self.default.clone(),
        }
    }

    /// The keys a change walks (`only`: one key's quota changed; `None`:
    /// every key) move to their desired policies at `now` if those differ,
    /// or if they carry a surplus (which the move then re-judges).
    fn follow(&mut self, only: Option<u64>, now: u64) {
        let desired: Vec<(u64, Vec<(u32, u64)>)> = self
            .keys
            .keys()
            .filter(|&&k| only.is_none_or(|o| o == k))
            .map(|&k| (k, self.desired(k)))
            .collect();
        for (key, policies) in desired {
            let model = self.keys.get_mut(&key).unwrap();
            if model.policies != policies || model.carries() {
                model.reconfigure_at(&policies, now);
            }
        }
    }

    /// A key is evicted once its newest admission is past its horizon (the
    /// longest window, or a carried ring's) by the margin.
    fn sweep(&mut self, now: u64) {
        let margin = self.margin;
        self.keys
            .retain(|_, m| m.newest().is_some_and(|t| t + m.horizon() + margin > now));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Many keys: default reconfigurations, run-time quotas set and cleared,
    /// a quota function's tier and sweeps in between; each key's answers
    /// equal its own model's.
    #[test]
    fn keyed_equals_the_model_across_reconfigurations(
        default in policies(),
        tier in policies(),
        ops in keyed_ops(),
    ) {
        let clock = ManualClock::new();
        let tier_quota = quota(&tier);
        let mut builder = KeyedLimiter::<u64>::builder(default[0].0, Duration::from_nanos(default[0].1));
        for &(limit, window) in &default[1..] {
            builder = builder.and(limit, Duration::from_nanos(window));
        }
        let limiter = builder
            .quota(move |k: &u64| (*k >= 3).then(|| tier_quota.clone()))
            .clock(clock.clone())
            .build()
            .unwrap();
        let margin = default.iter().map(|p| p.1).max().unwrap();
        let mut model = KeyedModel {
            default: default.clone(),
            tier,
            overrides: HashMap::new(),
            keys: HashMap::new(),
            margin,
        };
        let mut now = 0;
        for (i, op) in ops.iter().enumerate() {
            match op {
                KeyedOp::Check { key, dt, n } => {
                    now += dt;
                    clock.set(now);
                    let got = observed_multi(now, limiter.check_n_at(key, *n, now));
                    let desired = model.desired(*key);
                    // The limiter keeps no state for a key it never
                    // admitted anything for (zero units, or more than the
                    // smallest limit).
                    let want = match model.keys.get_mut(key) {
                        Some(m) => m.decide(now, *n),
                        None => {
                            let mut m = MultiModel::new(&desired);
                            let want = m.decide(now, *n);
                            if *n > 0 && want != common::multi::MultiDecision::ExceedsLimit {
                                model.keys.insert(*key, m);
                            }
                            want
                        }
                    };
                    prop_assert_eq!(got, want, "op {} key {} at {} n {}", i, key, now, n);
                    prop_assert_eq!(
                        limiter.policies_for(key).to_vec(),
                        as_policies(&model.desired(*key))
                    );
                }
                KeyedOp::Reconfigure(policies) => {
                    limiter.reconfigure(quota(policies)).unwrap();
                    model.default = policies.clone();
                    model.follow(None, now);
                    prop_assert_eq!(limiter.policies(), as_policies(policies));
                }
                KeyedOp::SetQuota(key, policies) => {
                    limiter.set_quota(*key, quota(policies)).unwrap();
                    model.overrides.insert(*key, policies.clone());
                    model.follow(Some(*key), now);
                }
                KeyedOp::ClearQuota(key) => {
                    let had = limiter.clear_quota(key);
                    prop_assert_eq!(had, model.overrides.remove(key).is_some());
                    // Nothing to clear: no key moves.
                    if had {
                        model.follow(Some(*key), now);
                    }
                }
                KeyedOp::Sweep => {
                    limiter.retain_recent();
                    model.sweep(now);
                    prop_assert_eq!(limiter.len(), model.keys.len(), "op {}: live keys", i);
                }
            }
        }
    }
}

/// Shrinking under load: threads admit at increasing times while the limit
/// is cut from 100 to 10 per window; every window ending at an admission
/// that started after `reconfigure` returned holds at most 10 admissions
/// (old and new alike), and before it at most 100.
#[test]
fn shrinking_under_racing_threads_holds_the_new_limit() {
    const WINDOW: u64 = 10_000;
    for round in 0..20 {
        let limiter = Arc::new(
            Limiter::with_clock(100, Duration::from_nanos(WINDOW), ManualClock::new()).unwrap(),
        );
        let time = Arc::new(AtomicU64::new(1));
        let done = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(3));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, time, done, start) = (
                    Arc::clone(&limiter),
                    Arc::clone(&time),
                    Arc::clone(&done),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    start.wait();
                    let mut admitted = Vec::new();
                    let mut after_change = 0;
                    while after_change < 3_000 {
                        let after = done.load(Ordering::SeqCst);
                        after_change += u32::from(after);
                        let t = time.fetch_add(3, Ordering::SeqCst);
                        if let Ok(a) = limiter.check_at(t) {
                            admitted.push((a.at(), after));
                        }
                    }
                    admitted
                })
            })
            .collect();
        start.wait();
        // Let some admissions through first, at a varying point.
        while time.load(Ordering::SeqCst) < 300 + 200 * round {
            std::hint::spin_loop();
        }
        limiter
            .reconfigure(Quota::new(10, Duration::from_nanos(WINDOW)).unwrap())
            .unwrap();
        done.store(true, Ordering::SeqCst);
        let admitted: Vec<(u64, bool)> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let mut all: Vec<u64> = admitted.iter().map(|&(t, _)| t).collect();
        all.sort_unstable();
        assert!(max_in_window(&mut all.clone(), WINDOW) <= 100);
        let post: Vec<u64> = admitted.iter().filter(|a| a.1).map(|a| a.0).collect();
        assert!(
            !post.is_empty(),
            "round {round}: nothing admitted after the change"
        );
        for &end in &post {
            let in_window = all
                .iter()
                .filter(|&&t| t + WINDOW > end && t <= end)
                .count();
            assert!(
                in_window <= 10,
                "round {round}: {in_window} admissions in the window ending at {end}, after the cut to 10"
            );
        }
    }
}

/// A cut and a restore under load: two threads admit at increasing times
/// while the limit goes from 100 to 10 and back to 100 per window (the
/// clock read at each change is the workers' time). No window holds more
/// than 100: the cut carries what is still in the window, the admissions
/// racing it included. Reports the windows over 100 and asserts none.
#[test]
fn a_cut_and_a_restore_under_racing_threads_hold_the_largest_limit() {
    const WINDOW: u64 = 10_000;
    let mut excesses = Vec::new();
    for round in 0..20 {
        let clock = ManualClock::new();
        let limiter = Arc::new(
            Limiter::with_clock(100, Duration::from_nanos(WINDOW), clock.clone()).unwrap(),
        );
        let time = Arc::new(AtomicU64::new(1));
        let done = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(3));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, time, done, start) = (
                    Arc::clone(&limiter),
                    Arc::clone(&time),
                    Arc::clone(&done),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    start.wait();
                    let mut admitted = Vec::new();
                    let mut after_change = 0;
                    while after_change < 3_000 {
                        after_change += u32::from(done.load(Ordering::SeqCst));
                        let t = time.fetch_add(3, Ordering::SeqCst);
                        if let Ok(a) = limiter.check_at(t) {
                            admitted.push(a.at());
                        }
                    }
                    admitted
                })
            })
            .collect();
        start.wait();
        // Let most of the first window's 100 through, at a varying point.
        while time.load(Ordering::SeqCst) < 300 + 100 * round {
            std::hint::spin_loop();
        }
        for limit in [10, 100] {
            clock.set(time.load(Ordering::SeqCst));
            limiter
                .reconfigure(Quota::new(limit, Duration::from_nanos(WINDOW)).unwrap())
                .unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let mut all: Vec<u64> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let most = max_in_window(&mut all, WINDOW);
        if most > 100 {
            excesses.push((round, most));
        }
    }
    assert_eq!(excesses, vec![], "(round, most in one window) over 100");
}

/// The keyed limiter under the same race: two threads on a handful of keys
/// while the default is cut; per key, windows ending after the change hold
/// at most the new limit.
#[test]
fn keyed_shrinking_under_racing_threads_holds_the_new_limit() {
    const WINDOW: u64 = 10_000;
    let limiter = Arc::new(
        KeyedLimiter::<u64, ManualClock>::with_clock(
            50,
            Duration::from_nanos(WINDOW),
            ManualClock::new(),
        )
        .unwrap(),
    );
    let time = Arc::new(AtomicU64::new(1));
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (limiter, time, done, start) = (
                Arc::clone(&limiter),
                Arc::clone(&time),
                Arc::clone(&done),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                start.wait();
                let mut admitted = Vec::new();
                let mut after_change = 0;
                let mut i = 0u64;
                while after_change < 20_000 {
                    i += 1;
                    let key = i % 4;
                    let after = done.load(Ordering::SeqCst);
                    after_change += u32::from(after);
                    let t = time.fetch_add(1, Ordering::SeqCst);
                    if let Ok(a) = limiter.check_at(&key, t) {
                        admitted.push((key, a.at(), after));
                    }
                }
                admitted
            })
        })
        .collect();
    start.wait();
    while time.load(Ordering::SeqCst) < 2_000 {
        std::hint::spin_loop();
    }
    limiter
        .reconfigure(Quota::new(5, Duration::from_nanos(WINDOW)).unwrap())
        .unwrap();
    done.store(true, Ordering::SeqCst);
    let admitted: Vec<(u64, u64, bool)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    for key in 0..4 {
        let all: Vec<u64> = admitted
            .iter()
            .filter(|a| a.0 == key)
            .map(|a| a.1)
            .collect();
        assert!(max_in_window(&mut all.clone(), WINDOW) <= 50, "key {key}");
        let post: Vec<u64> = admitted
            .iter()
            .filter(|a| a.0 == key && a.2)
            .map(|a| a.1)
            .collect();
        assert!(
            !post.is_empty(),
            "key {key}: nothing admitted after the change"
        );
        for &end in &post {
            let in_window = all
                .iter()
                .filter(|&&t| t + WINDOW > end && t <= end)
                .count();
            assert!(
                in_window <= 5,
                "key {key}: {in_window} in the window ending at {end}"
            );
        }
    }
}

/// Growing keeps what the old ring kept: a client that used 3 of 3 and is
/// raised to 5 gets exactly 2 more in the same window.
#[test]
fn growing_counts_what_was_kept() {
    let limiter = Limiter::with_clock(3, Duration::from_secs(1), ManualClock::new()).unwrap();
    for _ in 0..3 {
        limiter.check_at(0).unwrap();
    }
    limiter
        .reconfigure(Quota::new(5, Duration::from_secs(1)).unwrap())
        .unwrap();
    assert_eq!(limiter.check_at(1).unwrap().remaining(), 1);
    assert_eq!(limiter.check_at(2).unwrap().remaining(), 0);
    let denied = limiter.check_at(3).unwrap_err();
    // The oldest of the five (at 0) leaves at 1 s.
    assert_eq!(denied.retry_after_nanos(), 1_000_000_000 - 3);
    assert_eq!(limiter.limit(), 5);
}

/// An added policy judges the kept history at once, and `Denied::policy`
/// names it by the new configuration's order.
#[test]
fn an_added_policy_decides_at_once() {
    let limiter = Limiter::with_clock(10, Duration::from_secs(1), ManualClock::new()).unwrap();
    limiter.check_n_at(4, 0).unwrap();
    let quota = Quota::new(10, Duration::from_secs(1))
        .unwrap()
        .and(4, Duration::from_secs(60))
        .unwrap();
    limiter.reconfigure(quota).unwrap();
    let denied = limiter.check_at(2_000_000_000).unwrap_err();
    assert_eq!(denied.policy(), 1);
    assert_eq!(denied.retry_after_nanos(), 58_000_000_000);
}

/// Keys created while `reconfigure` walks the map: none keeps the old
/// policies (the insert handshake). Each key holds one admission; under the
/// new limit of 2, two more units never fit, under the old limit of 5 they
/// would.
#[test]
fn keys_inserted_during_a_reconfiguration_follow_it() {
    for round in 0..10u64 {
        let limiter = Arc::new(
            KeyedLimiter::<u64, ManualClock>::with_clock(
                5,
                Duration::from_secs(60),
                ManualClock::new(),
            )
            .unwrap(),
        );
        let start = Arc::new(Barrier::new(3));
        let inserters: Vec<_> = (0..2u64)
            .map(|thread| {
                let (limiter, start) = (Arc::clone(&limiter), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..5_000u64 {
                        limiter.check_at(&(i * 2 + thread), 1).unwrap();
                    }
                })
            })
            .collect();
        start.wait();
        // Some keys exist already, some come after: vary the point.
        std::thread::sleep(Duration::from_micros(50 * round));
        limiter
            .reconfigure(Quota::new(2, Duration::from_secs(60)).unwrap())
            .unwrap();
        for inserter in inserters {
            inserter.join().unwrap();
        }
        for key in 0..10_000u64 {
            assert!(
                limiter.peek_n_at(&key, 2, 2).is_err(),
                "round {round}: key {key} still has the old limit"
            );
        }
    }
}

const SECOND: u64 = 1_000_000_000;
const MINUTE: Duration = Duration::from_secs(60);

/// How many of `tries` single checks at `t` are admitted.
fn admitted_at(limiter: &Limiter<ManualClock>, t: u64, tries: u32) -> u32 {
    (0..tries).filter(|_| limiter.check_at(t).is_ok()).count() as u32
}

/// A cut and a restore keep every admission still in the window: 10 a
/// minute, all 10 used, cut to 5 and back to 10 within 2 s — no 11th in
/// that minute (keeping only the newest 5 across the cut would admit 5
/// more: 15 in a minute under limits never above 10).
#[test]
fn a_cut_and_a_restore_never_admit_past_the_largest_limit() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(10, MINUTE, clock.clone()).unwrap();
    assert_eq!(admitted_at(&limiter, 0, 10), 10);
    clock.set(SECOND);
    limiter.reconfigure(Quota::new(5, MINUTE).unwrap()).unwrap();
    assert_eq!(admitted_at(&limiter, SECOND, 5), 0);
    clock.set(2 * SECOND);
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    assert_eq!(
        admitted_at(&limiter, 2 * SECOND, 5),
        0,
        "past 10 in a minute"
    );
    let denied = limiter.check_at(2 * SECOND).unwrap_err();
    assert_eq!(denied.retry_after_nanos(), 58 * SECOND);
    // The minute over, the whole limit again.
    assert_eq!(admitted_at(&limiter, 60 * SECOND, 11), 10);
}

/// The carried ring is never larger than the ring it came from, and a
/// later reconfiguration that finds the surplus expired shrinks it back.
#[test]
fn a_carried_ring_shrinks_once_its_surplus_expires() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(100, MINUTE, clock.clone()).unwrap();
    let full = limiter.memory_bytes();
    limiter.check_n_at(100, 0).unwrap();
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    let carried = limiter.memory_bytes();
    // 100 slots carried, plus the one policy's description (16 bytes).
    assert!(carried <= full + 16, "{carried} > {full} + 16");
    clock.set(SECOND);
    limiter
        .reconfigure(Quota::new(100, MINUTE).unwrap())
        .unwrap();
    assert!(limiter.check_at(SECOND).is_err(), "101 in a minute");
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    // Still carried while no newer admission has left the surplus out of
    // the window (a check racing a change may be judged that early).
    clock.set(60 * SECOND);
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    assert_eq!(limiter.memory_bytes(), carried);
    limiter.check_at(60 * SECOND).unwrap();
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    let fresh = Limiter::with_clock(10, MINUTE, ManualClock::new()).unwrap();
    assert_eq!(limiter.memory_bytes(), fresh.memory_bytes());
    assert_eq!(admitted_at(&limiter, 60 * SECOND, 11), 9);
}

/// A cut to a longer window, then back to the limit over it: the first
/// ten are still in the 2-minute window at 70 s, so nothing fits.
#[test]
fn a_cut_to_a_longer_window_keeps_what_it_holds() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(10, MINUTE, clock.clone()).unwrap();
    assert_eq!(admitted_at(&limiter, 0, 10), 10);
    clock.set(SECOND);
    limiter
        .reconfigure(Quota::new(5, 2 * MINUTE).unwrap())
        .unwrap();
    clock.set(70 * SECOND);
    assert_eq!(admitted_at(&limiter, 70 * SECOND, 5), 0);
    limiter
        .reconfigure(Quota::new(10, 2 * MINUTE).unwrap())
        .unwrap();
    assert_eq!(
        admitted_at(&limiter, 70 * SECOND, 5),
        0,
        "past 10 in 2 minutes"
    );
    assert_eq!(admitted_at(&limiter, 120 * SECOND, 11), 10);
}

/// Several policies: 10 a second and 20 a minute, both full; cut to 5/s and
/// 10/min, then back: the minute still holds 20, and the minute's policy
/// names the denial.
#[test]
fn a_cut_and_a_restore_of_several_policies_keep_the_longer_window() {
    let clock = ManualClock::new();
    let both = |per_second: u32, per_minute: u32| {
        Quota::new(per_second, Duration::from_secs(1))
            .unwrap()
            .and(per_minute, MINUTE)
            .unwrap()
    };
    let limiter = Limiter::builder(10, Duration::from_secs(1))
        .and(20, MINUTE)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(admitted_at(&limiter, 0, 10), 10);
    assert_eq!(admitted_at(&limiter, SECOND, 11), 10);
    clock.set(2 * SECOND);
    limiter.reconfigure(both(5, 10)).unwrap();
    clock.set(3 * SECOND);
    limiter.reconfigure(both(10, 20)).unwrap();
    let denied = limiter.check_at(3 * SECOND).unwrap_err();
    assert_eq!(denied.policy(), 1);
    assert_eq!(denied.retry_after_nanos(), 57 * SECOND);
    assert_eq!(
        admitted_at(&limiter, 3 * SECOND, 10),
        0,
        "past 20 in a minute"
    );
}

/// Weighted: 10 units at once, cut to 4 and back to 10: 6 more units do not
/// fit in the same minute, and 10 do once it has passed.
#[test]
fn a_cut_and_a_restore_hold_for_weighted_requests() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(10, MINUTE, clock.clone()).unwrap();
    limiter.check_n_at(10, 0).unwrap();
    limiter.reconfigure(Quota::new(4, MINUTE).unwrap()).unwrap();
    assert!(limiter.check_n_at(4, 1).is_err());
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    assert!(limiter.check_n_at(6, 1).is_err(), "16 units in a minute");
    assert!(limiter.check_n_at(1, 1).is_err());
    assert_eq!(limiter.check_n_at(10, 60 * SECOND).unwrap().remaining(), 0);
}

/// The keyed limiter's moves carry too: a default cut and restore, and a
/// key's own quota cut and cleared.
#[test]
fn keyed_cuts_and_restores_never_admit_past_the_largest_limit() {
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(10, MINUTE, clock.clone()).unwrap();
    limiter.check_n_at(&1, 10, 0).unwrap();
    for _ in 0..10 {
        limiter.check_at(&2, 0).unwrap();
    }
    clock.set(SECOND);
    limiter.reconfigure(Quota::new(5, MINUTE).unwrap()).unwrap();
    limiter
        .set_quota(2, Quota::new(3, MINUTE).unwrap())
        .unwrap();
    clock.set(2 * SECOND);
    limiter
        .reconfigure(Quota::new(10, MINUTE).unwrap())
        .unwrap();
    assert!(limiter.clear_quota(&2));
    let t = 2 * SECOND;
    let admitted = (0..10)
        .filter(|i| limiter.check_at(&(1 + i % 2), t).is_ok())
        .count();
    assert_eq!(admitted, 0, "past 10 in a minute");
    assert!(limiter.check_n_at(&1, 5, t).is_err());
    assert_eq!(
        limiter.check_n_at(&1, 10, 60 * SECOND).unwrap().remaining(),
        0
    );
    assert_eq!(
        limiter.check_n_at(&2, 10, 60 * SECOND).unwrap().remaining(),
        0
    );
}

/// A snapshot of a carrying ring lists its surplus, and a restore keeps it
/// — into a limiter built with the cut's policies too — so a restore and
/// then the raise decide as the raise alone would: nothing more in that
/// minute.
#[cfg(feature = "serde")]
#[test]
fn a_snapshot_of_a_carried_ring_keeps_the_carried_admissions() {
    use slidelog::snapshot::Anchor;
    const UNIX: u64 = 1_700_000_000_000_000_000;
    let clock = ManualClock::new();
    let old = Limiter::with_clock(10, MINUTE, clock.clone()).unwrap();
    old.check_n_at(10, 0).unwrap();
    clock.set(SECOND);
    old.reconfigure(Quota::new(5, MINUTE).unwrap()).unwrap();
    let snapshot = old.snapshot_at(Anchor::new(SECOND, UNIX + SECOND));
    assert_eq!(snapshot.admissions, vec![UNIX; 10]);
    for mut new in [
        Limiter::with_clock(5, MINUTE, clock.clone()).unwrap(),
        Limiter::with_clock(10, MINUTE, clock.clone()).unwrap(),
    ] {
        new.restore_at(&snapshot, Anchor::new(SECOND, UNIX + SECOND))
            .unwrap();
        assert!(new.check_at(SECOND).is_err());
        new.reconfigure(Quota::new(10, MINUTE).unwrap()).unwrap();
        assert_eq!(admitted_at(&new, 2 * SECOND, 5), 0, "past 10 in a minute");
        assert_eq!(admitted_at(&new, 60 * SECOND, 11), 10);
    }
}

/// A check whose reading is older than the reconfiguration's (it raced the
/// change) still meets every admission its window holds: liveness is
/// judged no later than the newest admission.
#[test]
fn a_check_reading_before_a_cut_and_restore_meets_its_whole_window() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(2, Duration::from_nanos(10), clock.clone()).unwrap();
    limiter.check_at(0).unwrap();
    limiter.check_at(1).unwrap();
    clock.set(10);
    limiter
        .reconfigure(Quota::new(1, Duration::from_nanos(10)).unwrap())
        .unwrap();
    limiter
        .reconfigure(Quota::new(2, Duration::from_nanos(10)).unwrap())
        .unwrap();
    // Read at 9: the window (-1, 9] holds both.
    assert_eq!(limiter.check_at(9).unwrap_err().retry_after_nanos(), 1);
    assert_eq!(limiter.check_at(10).unwrap().remaining(), 0);
}

/// How a test changes a keyed limiter's policies for key `Gated::STOP`
/// (and, for the default, every other key's).
#[derive(Clone, Copy, Debug)]
enum Change {
    Default,
    SetQuota,
}

impl Change {
    fn apply(self, limiter: &KeyedLimiter<Gated, ManualClock>, quota: Quota) {
        match self {
            Change::Default => limiter.reconfigure(quota).unwrap(),
            Change::SetQuota => limiter.set_quota(Gated::STOP, quota).unwrap(),
        }
    }
}

/// A key whose insert chose its policies before a change and published the
/// key after the change began: once the change returns, every check of the
/// key is judged by the new policies (16 an hour cut to 1: three checks of
/// 5 exceed the limit), whichever thread makes it. The inserting thread is
/// held after it chose the policies (at its insertion's hash of the key)
/// until the change has begun, and held again at its next hash of the key
/// (if any) while the checks run.
#[test]
fn a_key_inserted_across_a_change_has_the_new_policies_when_it_returns() {
    let hour = Duration::from_secs(3_600);
    for change in [Change::Default, Change::SetQuota] {
        let limiter = Arc::new(
            KeyedLimiter::<Gated, ManualClock>::with_clock(16, hour, ManualClock::new()).unwrap(),
        );
        for key in 0..1_000 {
            limiter.check(&Gated(key)).unwrap();
        }
        let l = Arc::clone(&limiter);
        let (stops, inserter) = gate(move || l.check(&Gated::STOP).is_ok());
        // The lookup's hash, then the insertion's (the policies chosen).
        assert!(stops.next());
        stops.go();
        assert!(stops.next());
        let l = Arc::clone(&limiter);
        let changer = std::thread::spawn(move || change.apply(&l, Quota::new(1, hour).unwrap()));
        while limiter.generation() == 0 {
            std::thread::yield_now();
        }
        // A change that does not wait for the insert returns meanwhile.
        for _ in 0..20_000 {
            if changer.is_finished() {
                break;
            }
            std::thread::yield_now();
        }
        stops.go();
        // Published: at the inserter's next hash of the key, or once its
        // check returned.
        stops.next();
        changer.join().unwrap();
        let after: Vec<bool> = (0..3)
            .map(|_| limiter.check_n(&Gated::STOP, 5).is_ok())
            .collect();
        drop(stops);
        let inserted = inserter.join().unwrap();
        assert_eq!(
            after, [false; 3],
            "{change:?}: checks of 5 after the change to 1 an hour were admitted"
        );
        assert!(inserted, "{change:?}: the key's first check was denied");
        assert_eq!(limiter.policies_for(&Gated::STOP)[0].limit, 1);
    }
}

/// A check whose insert raced a change of the default completes while the
/// change's walk over the map is stopped (holding the change's lock): the
/// check never waits for the walk. The inserting thread is held after it
/// chose the policies until the change has begun; the changing thread is
/// held at its first hash of a key in its walk. (A check that waited for
/// the walk would never return here: the test would hang.)
#[test]
fn a_check_that_raced_a_change_does_not_wait_for_its_walk() {
    let hour = Duration::from_secs(3_600);
    let limiter = Arc::new(
        KeyedLimiter::<Gated, ManualClock>::with_clock(16, hour, ManualClock::new()).unwrap(),
    );
    for key in 0..1_000 {
        limiter.check(&Gated(key)).unwrap();
    }
    limiter.check(&Gated::STOP_TOO).unwrap();
    let l = Arc::clone(&limiter);
    let (inserting, inserter) = gate(move || l.check(&Gated::STOP).is_ok());
    // The lookup's hash, then the insertion's (the policies chosen).
    assert!(inserting.next());
    inserting.go();
    assert!(inserting.next());
    let l = Arc::clone(&limiter);
    let (changing, changer) = gate(move || l.reconfigure(Quota::new(1, hour).unwrap()).unwrap());
    while limiter.generation() == 0 {
        std::thread::yield_now();
    }
    inserting.go();
    // Its later hashes, if any, do not stop it.
    drop(inserting);
    // The walk, at a held key.
    assert!(changing.next());
    assert!(inserter.join().unwrap(), "the new key's first check");
    changing.go();
    while changing.next() {
        changing.go();
    }
    changer.join().unwrap();
    assert!(limiter.check(&Gated::STOP).is_err());
}
