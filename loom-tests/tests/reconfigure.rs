//! P9: a reconfiguration racing an admission (single or weighted) or an
//! eviction sweep never loses an admission, never lets the old policies
//! judge after the change, and never has a sweep forget a ring that is
//! being moved — each with a negative control that must be caught.

#![cfg(slidelog_loom)]

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::explore;
use loom::thread;
use slidelog::loom_hooks::{Flaw, Floor, Swept};
use slidelog::{Limiter, ManualClock, Quota};

/// `limit` per 10 ns with the given flaw, holding one admission at 0.
fn busy(limit: u32, flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    let limiter =
        Limiter::with_flaw(limit, Duration::from_nanos(10), ManualClock::new(), flaw).unwrap();
    limiter.check_at(0).unwrap();
    Arc::new(limiter)
}

fn per_10ns(limit: u32) -> Quota {
    Quota::new(limit, Duration::from_nanos(10)).unwrap()
}

/// 2 per 10 ns holding [0]; one thread admits a single at 1 while the limit
/// is cut to 1. Either the single linearizes first (admitted, and the new
/// ring keeps it) or after (denied by the new limit). At 10 the admission
/// at 0 has left: the window holds the single iff it was admitted.
fn single_races_reconfiguration(flaw: Flaw) {
    explore(2, move || {
        let limiter = busy(2, flaw);
        let l = Arc::clone(&limiter);
        let admitter = thread::spawn(move || l.check_at(1).is_ok());
        limiter.reconfigure(per_10ns(1)).unwrap();
        let admitted = admitter.join().unwrap();
        let later = limiter.check_at(10);
        if admitted {
            assert!(
                later.is_err(),
                "an admission made before the change was lost, or the old limit still judges"
            );
        } else {
            assert!(later.is_ok(), "denied at 10 with nothing in the window");
        }
    });
}

#[test]
fn single_admission_races_reconfiguration() {
    single_races_reconfiguration(Flaw::None);
}

/// Negative control: publishing the successor without closing the old ring
/// lets the single land in the old ring after its log was copied.
#[test]
#[should_panic(expected = "was lost")]
fn control_open_migration_loses_a_single() {
    single_races_reconfiguration(Flaw::OpenMigration);
}

/// Negative control: a successor judged by the old policies admits at 10
/// under the old limit of 2.
#[test]
#[should_panic(expected = "old limit still judges")]
fn control_old_policies_are_caught() {
    single_races_reconfiguration(Flaw::OldPolicies);
}

/// 3 per 10 ns holding [0]; a weighted request of 2 at 1 races a cut to 2
/// (which keeps all three: each is still in the window). Admitted first:
/// the window at 10 holds both units (full); after: denied (1 + 2 > 2),
/// and at 10 the window is empty.
fn weighted_races_reconfiguration(flaw: Flaw) {
    explore(2, move || {
        let limiter = busy(3, flaw);
        let l = Arc::clone(&limiter);
        let admitter = thread::spawn(move || l.check_n_at(2, 1).is_ok());
        limiter.reconfigure(per_10ns(2)).unwrap();
        let admitted = admitter.join().unwrap();
        let later = limiter.check_at(10);
        if admitted {
            assert!(
                later.is_err(),
                "a weighted admission before the change was lost"
            );
        } else {
            assert_eq!(
                later.map(|a| a.remaining()).ok(),
                Some(1),
                "the window at 10 is empty"
            );
        }
    });
}

#[test]
fn weighted_admission_races_reconfiguration() {
    weighted_races_reconfiguration(Flaw::None);
}

/// Negative control: without the close, the batch commits in the old ring
/// after the copy.
#[test]
#[should_panic(expected = "was lost")]
fn control_open_migration_loses_a_batch() {
    weighted_races_reconfiguration(Flaw::OpenMigration);
}

/// 2 per 10 ns holding [0]; a single at 1 races a cut to 1, which is then
/// restored to 2. A cut keeps every admission still in the window, so the
/// single, if admitted before the cut, sits in the carried ring past the
/// new limit and counts again after the restore (the window at 5 is full);
/// admitted after the restore, it counts as well; between the two it is
/// denied, and the window at 5 holds only the admission at 0.
fn single_races_a_cut_and_restore(flaw: Flaw) {
    explore(2, move || {
        let limiter = busy(2, flaw);
        let l = Arc::clone(&limiter);
        let admitter = thread::spawn(move || l.check_at(1).is_ok());
        limiter.reconfigure(per_10ns(1)).unwrap();
        limiter.reconfigure(per_10ns(2)).unwrap();
        let admitted = admitter.join().unwrap();
        let later = limiter.check_at(5);
        if admitted {
            assert!(later.is_err(), "an admission carried past the cut was lost");
        } else {
            assert!(later.is_ok(), "denied at 5 with one in the window");
        }
    });
}

#[test]
fn single_admission_races_a_cut_and_is_carried() {
    single_races_a_cut_and_restore(Flaw::None);
}

/// Negative control: a cut that keeps only the newest `L_new` drops the
/// single admitted before it, which no longer counts after the restore.
#[test]
#[should_panic(expected = "was lost")]
fn control_a_cut_without_carry_loses_the_single() {
    single_races_a_cut_and_restore(Flaw::NoCarry);
}

/// 1 per 10 ns holding [0], at 5 (busy until 10): a keyed sweep's step
/// races a change to 2 per 10 ns. The sweep must never forget the ring —
/// before the change it is busy, after it the old ring is closed but moving
/// and the new one holds the admission. Afterwards the window at 5 holds
/// the admission at 0 (one more fits under the new limit, not two).
fn sweep_races_reconfiguration(flaw: Flaw) {
    explore(2, move || {
        let limiter = busy(1, flaw);
        let floor = Arc::new(Floor::new());
        let (l, f) = (Arc::clone(&limiter), Arc::clone(&floor));
        let sweeper = thread::spawn(move || l.sweep_step(5, 0, &f));
        limiter.reconfigure(per_10ns(2)).unwrap();
        let swept = sweeper.join().unwrap();
        assert_ne!(swept, Swept::Evicted, "a sweep forgot a ring being moved");
        assert_eq!(
            limiter.check_n_at(1, 5).map(|a| a.remaining()).ok(),
            Some(0)
        );
    });
}

#[test]
fn sweep_races_reconfiguration_and_leaves_it_to_the_mover() {
    sweep_races_reconfiguration(Flaw::None);
}

/// Negative control: a sweep that takes "closed" for "idle" forgets the ring
/// the reconfiguration closed.
#[test]
#[should_panic(expected = "forgot a ring being moved")]
fn control_sweep_evicting_a_moving_ring_is_caught() {
    sweep_races_reconfiguration(Flaw::EvictMoving);
}
