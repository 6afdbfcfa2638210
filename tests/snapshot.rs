//! Snapshot and restore (feature `serde`) keep P2: a limiter restored in
//! a "new process" — a clock with another origin, after a gap, through
//! JSON — decides exactly as the multi-policy model that never stopped.

#![cfg(feature = "serde")]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::gate::{Gated, gate};
use common::multi::{MultiDecision, MultiModel, observed_multi};
use proptest::prelude::*;
use slidelog::snapshot::{Anchor, KeyedSnapshot, RestoreError, Snapshot};
use slidelog::{KeyedLimiter, Limiter, ManualClock, Quota};

/// Limits on both sides of 11: a keyed state inside its map entry or boxed
/// (`keyed/state.rs`).
fn policies() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec(
        (prop_oneof![3 => 1..=5u32, 1 => 10..=14u32], 1..=40u64),
        1..=3,
    )
}

fn ops() -> impl Strategy<Value = Vec<(u64, u32)>> {
    prop::collection::vec(
        (
            prop_oneof![3 => Just(0u64), 3 => 0..=12u64, 1 => Just(40u64)],
            0..=3u32,
        ),
        0..40,
    )
}

fn limiter(policies: &[(u32, u64)], clock: &ManualClock) -> Limiter<ManualClock> {
    let mut b = Limiter::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(l, w) in &policies[1..] {
        b = b.and(l, Duration::from_nanos(w));
    }
    b.clock(clock.clone()).build().unwrap()
}

/// A decision of the restored limiter, whose clock reads `t + shift` at
/// the model's time `t`, in the model's time.
fn unshift(d: MultiDecision, shift: u64) -> MultiDecision {
    match d {
        MultiDecision::Admitted {
            at,
            remaining,
            policy,
        } => MultiDecision::Admitted {
            at: at - shift,
            remaining,
            policy,
        },
        MultiDecision::Denied { until, policy } => MultiDecision::Denied {
            until: until - shift,
            policy,
        },
        other => other,
    }
}

const UNIX: u64 = 1_700_000_000_000_000_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_restored_limiter_decides_as_if_it_never_stopped(
        policies in policies(),
        before in ops(),
        gap in 0..60u64,
        after in ops(),
        origin in 1_000u64..1_000_000,
    ) {
        let mut model = MultiModel::new(&policies);
        let clock = ManualClock::new();
        let old = limiter(&policies, &clock);
        let mut t = 100u64;
        for &(dt, n) in &before {
            t += dt;
            let _ = old.check_n_at(n, t);
            model.decide(t, n);
        }
        // Process one stops at `t` (Unix UNIX + t); process two starts
        // `gap` later with its clock at `origin`.
        let snapshot = old.snapshot_at(Anchor::new(t, UNIX + t));
        let json = serde_json::to_string(&snapshot).unwrap();
        let back: Snapshot = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &snapshot);
        t += gap;
        let new_clock = ManualClock::new();
        new_clock.set(origin);
        let mut new = limiter(&policies, &new_clock);
        new.restore_at(&back, Anchor::new(origin, UNIX + t)).unwrap();
        // Model time `t` is `origin` on the new clock.
        let shift = origin as i128 - t as i128;
        for (i, &(dt, n)) in after.iter().enumerate() {
            t += dt;
            let here = (t as i128 + shift) as u64;
            let got = observed_multi(here, new.check_n_at(n, here));
            let got = match got {
                MultiDecision::Admitted { at, remaining, policy } => MultiDecision::Admitted {
                    at: (at as i128 - shift) as u64, remaining, policy },
                MultiDecision::Denied { until, policy } => MultiDecision::Denied {
                    until: (until as i128 - shift) as u64, policy },
                other => other,
            };
            prop_assert_eq!(got, model.decide(t, n), "after the restore, step {}", i);
        }
    }

    #[test]
    fn a_restored_keyed_limiter_decides_as_if_it_never_stopped(
        policies in policies(),
        before in prop::collection::vec((0..3u64, 0..=12u64, 0..=3u32), 0..40),
        gap in 0..60u64,
        after in prop::collection::vec((0..3u64, 0..=12u64, 0..=3u32), 0..40),
    ) {
        let build = |clock: &ManualClock| {
            let mut b = KeyedLimiter::<u64>::builder(policies[0].0, Duration::from_nanos(policies[0].1));
            for &(l, w) in &policies[1..] {
                b = b.and(l, Duration::from_nanos(w));
            }
            b.clock(clock.clone()).build().unwrap()
        };
        let mut models: HashMap<u64, MultiModel> = HashMap::new();
        let clock = ManualClock::new();
        let old = build(&clock);
        let mut t = 100u64;
        for &(key, dt, n) in &before {
            t += dt;
            let _ = old.check_n_at(&key, n, t);
            models.entry(key).or_insert_with(|| MultiModel::new(&policies)).decide(t, n);
        }
        let snapshot = old.snapshot_at(Anchor::new(t, UNIX + t));
        let json = serde_json::to_string(&snapshot).unwrap();
        let back: KeyedSnapshot<u64> = serde_json::from_str(&json).unwrap();
        t += gap;
        let shift = 5_000u64; // the new clock runs 5 µs ahead of model time
        let new_clock = ManualClock::new();
        new_clock.set(t + shift);
        let mut new = build(&new_clock);
        new.restore_at(&back, Anchor::new(t + shift, UNIX + t)).unwrap();
        for (i, &(key, dt, n)) in after.iter().enumerate() {
            t += dt;
            new_clock.set(t + shift);
            let got = unshift(observed_multi(t + shift, new.check_n_at(&key, n, t + shift)), shift);
            let want = models.entry(key).or_insert_with(|| MultiModel::new(&policies)).decide(t, n);
            prop_assert_eq!(got, want, "after the restore, step {} key {}", i, key);
        }
    }
}

/// Admissions no policy counts any more at the restore are dropped, and a
/// snapshot of another version is refused with a clear error.
#[test]
fn expired_admissions_are_dropped_and_versions_checked() {
    let clock = ManualClock::new();
    let old = limiter(&[(5, 10), (6, 100)], &clock);
    old.check_n_at(2, 0).unwrap();
    old.check_n_at(2, 95).unwrap();
    let snapshot = old.snapshot_at(Anchor::new(95, UNIX + 95));
    assert_eq!(snapshot.admissions, vec![UNIX, UNIX, UNIX + 95, UNIX + 95]);
    let mut new = limiter(&[(5, 10), (6, 100)], &clock);
    let restored = new
        .restore_at(&snapshot, Anchor::new(100, UNIX + 100))
        .unwrap();
    // The two at 0 left the 100 ns window exactly at 100.
    assert_eq!((restored.admissions, restored.expired), (2, 2));
    assert_eq!(new.check_n_at(3, 100).unwrap().remaining(), 0);

    let mut future = snapshot.clone();
    future.version = 99;
    let err = new
        .restore_at(&future, Anchor::new(100, UNIX + 100))
        .unwrap_err();
    assert_eq!(
        err,
        RestoreError::Version {
            found: 99,
            expected: 1
        }
    );
    assert!(err.to_string().contains("99"));
}

/// Admissions after the restore's own time (a snapshot from a host whose
/// wall clock ran ahead, or a corrupt file) count as made at the restore:
/// they deny for one window from then, never for the years they name.
/// Single and keyed limiters alike.
#[test]
fn admissions_from_the_future_count_as_now() {
    let clock = ManualClock::new();
    let snapshot = Snapshot {
        version: slidelog::snapshot::SNAPSHOT_VERSION,
        taken_at_unix_nanos: UNIX,
        policies: Vec::new(),
        generation: 0,
        admissions: vec![UNIX + 50, UNIX + 86_400_000_000_000, u64::MAX],
    };
    let mut single = limiter(&[(4, 100)], &clock);
    let restored = single
        .restore_at(&snapshot, Anchor::new(10, UNIX + 10))
        .unwrap();
    assert_eq!((restored.admissions, restored.expired), (3, 0));
    assert_eq!(single.check_at(10).unwrap().remaining(), 0);
    let denied = single.check_at(10).unwrap_err();
    assert_eq!(denied.retry_after_nanos(), 100);
    assert_eq!(single.check_n_at(4, 110).unwrap().remaining(), 0);

    let keyed_snapshot = KeyedSnapshot {
        version: slidelog::snapshot::SNAPSHOT_VERSION,
        taken_at_unix_nanos: UNIX,
        policies: Vec::new(),
        generation: 0,
        keys: vec![slidelog::snapshot::KeyAdmissions {
            key: 7u64,
            admissions: snapshot.admissions.clone(),
        }],
    };
    let mut keyed =
        KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(100), clock.clone())
            .unwrap();
    keyed
        .restore_at(&keyed_snapshot, Anchor::new(10, UNIX + 10))
        .unwrap();
    assert_eq!(keyed.check_at(&7, 109).unwrap_err().retry_after_nanos(), 1);
    assert_eq!(keyed.check_n_at(&7, 3, 110).unwrap().remaining(), 0);
}

/// A restore with the system clock: the snapshot of one QuantaClock limiter
/// restored into another (different origins) keeps the window full.
#[test]
fn restore_between_quanta_clocks() {
    let old = Limiter::new(3, Duration::from_secs(60)).unwrap();
    old.check_n(3).unwrap();
    let snapshot = old.snapshot();
    let mut new = Limiter::new(3, Duration::from_secs(60)).unwrap();
    let restored = new.restore(&snapshot).unwrap();
    assert_eq!(restored.admissions, 3);
    let denied = new.check().unwrap_err();
    assert!(denied.retry_after() > Duration::from_secs(59), "{denied:?}");
}

/// A snapshot taken while a change of policies moves the keys holds every
/// key's admissions, moving or not (no check runs). The changing thread is
/// held at each of its hashes of one key — before its state is closed for
/// the change, between the close and the swap of its successor into the
/// map, and after — and a snapshot is taken at each.
#[test]
fn a_snapshot_holds_the_keys_a_change_is_moving() {
    let hour = Duration::from_secs(3_600);
    for set_quota in [false, true] {
        let limiter = std::sync::Arc::new(
            KeyedLimiter::<Gated, ManualClock>::with_clock(2_000, hour, ManualClock::new())
                .unwrap(),
        );
        for key in 0..100 {
            limiter.check_n_at(&Gated(key), 3, 0).unwrap();
        }
        limiter.check_n_at(&Gated::STOP_TOO, 1_000, 0).unwrap();
        let l = std::sync::Arc::clone(&limiter);
        let (changing, changer) = gate(move || {
            let quota = Quota::new(1_500, hour).unwrap();
            if set_quota {
                l.set_quota(Gated::STOP_TOO, quota).unwrap();
            } else {
                l.reconfigure(quota).unwrap();
            }
        });
        let mut stops = 0;
        while changing.next() {
            stops += 1;
            let snapshot = limiter.snapshot_at(Anchor::new(1, UNIX));
            let held = |key: Gated| {
                snapshot
                    .keys
                    .iter()
                    .find(|k| k.key == key)
                    .map_or(0, |k| k.admissions.len())
            };
            assert_eq!(
                held(Gated::STOP_TOO),
                1_000,
                "set_quota {set_quota}, stop {stops}: the moving key's admissions"
            );
            assert_eq!(
                snapshot.keys.len(),
                101,
                "set_quota {set_quota}, stop {stops}"
            );
            changing.go();
        }
        changer.join().unwrap();
        assert!(stops >= 1, "the change never hashed the key");
        assert_eq!(
            limiter
                .check_n_at(&Gated::STOP_TOO, 500, 2)
                .unwrap()
                .remaining(),
            0
        );
    }
}

/// A key restored into a limiter whose policies for it hold fewer
/// admissions than the snapshot had (a VIP key with 500 of its 1,000 an
/// hour, restored where the default is 10 an hour) keeps them all for a
/// later change: once `set_quota` (or a raised default) gives it 1,000 an
/// hour again, 500 are left, not 990. Until then the default judges it; a
/// `remove` forgets them.
#[test]
fn a_restored_key_keeps_its_admissions_for_a_later_quota() {
    let hour = Duration::from_secs(3_600);
    let clock = ManualClock::new();
    let vip = Quota::new(1_000, hour).unwrap();
    let old = KeyedLimiter::<u64, ManualClock>::with_clock(10, hour, clock.clone()).unwrap();
    old.set_quota(7, vip.clone()).unwrap();
    old.check_n_at(&7, 500, 0).unwrap();
    let snapshot = old.snapshot_at(Anchor::new(0, UNIX));
    for (change, expect_left) in [("set_quota", 500), ("reconfigure", 500), ("remove", 1_000)] {
        let mut new =
            KeyedLimiter::<u64, ManualClock>::with_clock(10, hour, clock.clone()).unwrap();
        let restored = new.restore_at(&snapshot, Anchor::new(1, UNIX + 1)).unwrap();
        assert_eq!(restored.keys, 1);
        assert!(
            new.check_at(&7, 1).is_err(),
            "{change}: the default judges it"
        );
        match change {
            "set_quota" => new.set_quota(7, vip.clone()).unwrap(),
            "reconfigure" => new.reconfigure(vip.clone()).unwrap(),
            _ => {
                assert!(new.remove(&7));
                new.set_quota(7, vip.clone()).unwrap();
            }
        }
        assert_eq!(
            new.peek_n_at(&7, 1, 2)
                .map(|a| a.remaining() + 1)
                .unwrap_or(0),
            expect_left,
            "{change}: units left"
        );
        assert!(new.check_n_at(&7, expect_left, 2).is_ok(), "{change}");
        assert!(new.check_at(&7, 2).is_err(), "{change}: over the quota");
    }
}

fn quota_of(policies: &[(u32, u64)]) -> Quota {
    let mut quota = Quota::new(policies[0].0, Duration::from_nanos(policies[0].1)).unwrap();
    for &(limit, window) in &policies[1..] {
        quota = quota.and(limit, Duration::from_nanos(window)).unwrap();
    }
    quota
}

proptest! {
    /// A key with its own quota, snapshotted, restored where the default
    /// holds fewer admissions, then given its quota again: it decides
    /// exactly as the limiter that never stopped.
    #[test]
    fn a_restored_key_given_its_quota_again_decides_as_if_it_never_stopped(
        own in policies(),
        default in 1..=3u32,
        before in ops(),
        after in ops(),
    ) {
        let clock = ManualClock::new();
        let keyed = |clock: &ManualClock| {
            KeyedLimiter::<u64, ManualClock>::with_clock(default, Duration::from_nanos(7), clock.clone())
                .unwrap()
        };
        let old = keyed(&clock);
        old.set_quota(7, quota_of(&own)).unwrap();
        let mut t = 0;
        for &(dt, n) in &before {
            t += dt;
            let _ = old.check_n_at(&7, n, t);
        }
        let snapshot = old.snapshot_at(Anchor::new(t, UNIX + t));
        clock.set(t);
        let mut new = keyed(&clock);
        new.restore_at(&snapshot, Anchor::new(t, UNIX + t)).unwrap();
        new.set_quota(7, quota_of(&own)).unwrap();
        for &(dt, n) in &after {
            t += dt;
            prop_assert_eq!(old.check_n_at(&7, n, t), new.check_n_at(&7, n, t), "at {}", t);
        }
    }
}

/// A restore never brings a limiter's generation back to one that named
/// another configuration: continuing past its own (a restore into a
/// reconfigured limiter) and past the snapshot's (a new process).
#[test]
fn a_restore_continues_the_generation() {
    let clock = ManualClock::new();
    let second = Duration::from_secs(1);
    let quota = |limit| Quota::new(limit, second).unwrap();

    let mut single = limiter(&[(3, 1_000_000_000)], &clock);
    single.reconfigure(quota(5)).unwrap();
    assert_eq!(single.generation(), 1);
    let snapshot = single.snapshot_at(Anchor::new(0, UNIX));
    single.restore_at(&snapshot, Anchor::new(0, UNIX)).unwrap();
    assert!(single.generation() > 1, "{}", single.generation());
    let after = single.generation();
    single.reconfigure(quota(6)).unwrap();
    assert!(single.generation() > after);

    for _ in 0..3 {
        single.reconfigure(quota(4)).unwrap();
    }
    let snapshot = single.snapshot_at(Anchor::new(0, UNIX));
    let mut restarted = limiter(&[(3, 1_000_000_000)], &clock);
    restarted
        .restore_at(&snapshot, Anchor::new(0, UNIX))
        .unwrap();
    assert!(restarted.generation() > single.generation());

    let keyed = KeyedLimiter::<u64, ManualClock>::with_clock(3, second, clock.clone()).unwrap();
    for limit in [4, 5, 6] {
        keyed.reconfigure(quota(limit)).unwrap();
    }
    keyed.check_at(&1, 0).unwrap();
    let snapshot = keyed.snapshot_at(Anchor::new(0, UNIX));
    let mut restarted =
        KeyedLimiter::<u64, ManualClock>::with_clock(6, second, clock.clone()).unwrap();
    restarted
        .restore_at(&snapshot, Anchor::new(0, UNIX))
        .unwrap();
    assert!(restarted.generation() > 3, "{}", restarted.generation());
    let after = restarted.generation();
    restarted.reconfigure(quota(2)).unwrap();
    assert!(restarted.generation() > after);
}

/// A snapshot written without a generation (an earlier release's) still
/// restores, as generation 0.
#[test]
fn a_snapshot_without_a_generation_restores() {
    let clock = ManualClock::new();
    let keyed =
        KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_secs(1), clock.clone())
            .unwrap();
    keyed.check_n_at(&7, 2, 0).unwrap();
    let mut json: serde_json::Value =
        serde_json::to_value(keyed.snapshot_at(Anchor::new(0, UNIX))).unwrap();
    assert!(json.as_object_mut().unwrap().remove("generation").is_some());
    let old: KeyedSnapshot<u64> = serde_json::from_value(json).unwrap();
    let mut restored =
        KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_secs(1), clock).unwrap();
    restored.restore_at(&old, Anchor::new(0, UNIX)).unwrap();
    assert_eq!(restored.check_at(&7, 0).unwrap().remaining(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Snapshots are untrusted input (a file, a request): arbitrary JSON is
    /// refused with an error or restored, and a restored value of any shape
    /// (times out of order, duplicated, at the ends of the range, more than
    /// the limit, keys many times over) never panics and never leaves a
    /// window over its limit.
    #[test]
    fn untrusted_snapshots_never_panic(
        json in "\\PC{0,200}",
        times in prop::collection::vec(prop_oneof![
            Just(0u64), Just(u64::MAX), Just(1u64 << 62), any::<u64>(), 0..1_000_000_000u64,
        ], 0..40),
        keys in prop::collection::vec(0..4u8, 0..12),
        version in prop_oneof![Just(slidelog::snapshot::SNAPSHOT_VERSION), any::<u32>()],
    ) {
        let _ = serde_json::from_str::<Snapshot>(&json);
        let _ = serde_json::from_str::<KeyedSnapshot<String>>(&json);
        let clock = ManualClock::new();
        let mut one = limiter(&[(3, 1_000_000_000)], &clock);
        let snapshot = Snapshot {
            version,
            taken_at_unix_nanos: times.first().copied().unwrap_or(0),
            policies: Vec::new(),
            generation: 0,
            admissions: times.clone(),
        };
        let anchor = Anchor { clock_nanos: 1 << 40, unix_nanos: 1_000_000_000 };
        match one.restore_at(&snapshot, anchor) {
            Ok(_) => {
                // At most the limit survive: a fourth check at the anchor's
                // time is denied if three were restored in its window.
                let admitted = (0..4).filter(|_| one.check_at(anchor.clock_nanos).is_ok()).count();
                prop_assert!(admitted <= 3);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        let mut keyed = KeyedLimiter::<u8, ManualClock>::with_clock(3, Duration::from_secs(1), clock).unwrap();
        let keyed_snapshot = KeyedSnapshot {
            version,
            taken_at_unix_nanos: 0,
            policies: Vec::new(),
            generation: 0,
            keys: keys
                .iter()
                .map(|&key| slidelog::snapshot::KeyAdmissions { key, admissions: times.clone() })
                .collect(),
        };
        if keyed.restore_at(&keyed_snapshot, anchor).is_ok() {
            for &key in &keys {
                let admitted = (0..4).filter(|_| keyed.check_at(&key, anchor.clock_nanos).is_ok()).count();
                prop_assert!(admitted <= 3);
            }
        }
    }
}

/// What a restore keeps aside (a key with more admissions than its ring
/// under the restoring limiter's policies) is in the next snapshot too: 5
/// admitted under 6 a minute, restored where the default is 4 a minute,
/// snapshotted again and restored under 6 a minute — the window still
/// holds 5, so 2 more do not fit.
#[test]
fn a_snapshot_holds_what_a_restore_kept_aside() {
    let minute = Duration::from_secs(60);
    let keyed = |limit| {
        KeyedLimiter::<u64, ManualClock>::with_clock(limit, minute, ManualClock::new()).unwrap()
    };
    let first = keyed(6);
    first.check_n_at(&1, 5, 0).unwrap();
    let taken = first.snapshot_at(Anchor::new(0, UNIX));
    let mut smaller = keyed(4);
    smaller.restore_at(&taken, Anchor::new(0, UNIX)).unwrap();
    let again = smaller.snapshot_at(Anchor::new(0, UNIX));
    assert_eq!(again.keys.len(), 1);
    assert_eq!(again.keys[0].admissions.len(), 5, "the one kept aside");
    let mut last = keyed(6);
    last.restore_at(&again, Anchor::new(0, UNIX)).unwrap();
    assert!(
        last.check_n_at(&1, 2, 1).is_err(),
        "7 in a window of a minute under a limit of 6"
    );
    assert_eq!(last.check_n_at(&1, 1, 1).unwrap().remaining(), 0);
}
