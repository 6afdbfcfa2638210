//! The weighted log's critical section: two admitters racing for the same
//! room, a charge racing a check, a reservation's commit racing a check.
//! In every interleaving the answers are those of some sequential order of
//! the same calls (replayed on a fresh log, which `tests/weighted.rs`
//! proves equal to the weighted deque model), and no window holds more
//! than the limit of admitted units. Negative control: deciding and
//! recording in two critical sections, which loom catches.

#![cfg(slidelog_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use slidelog::weighted::loom_hooks::WeightedFlaw;
use slidelog::weighted::{Usage, WeightedLog};
use slidelog::{Admitted, Denied};

const WINDOW: u64 = 10;

fn log(limit: u32, flaw: WeightedFlaw) -> WeightedLog {
    WeightedLog::new(limit, Duration::from_nanos(WINDOW))
        .unwrap()
        .with_flaw(flaw)
}

type Decision = Result<Admitted, Denied>;

/// Two threads each ask for 2 of 3 units at the same instant: one gets
/// them, the other is denied until they leave, in every interleaving.
fn two_admitters(flaw: WeightedFlaw) {
    loom::model(move || {
        let shared = Arc::new(log(3, flaw));
        let spawn = || {
            let l = Arc::clone(&shared);
            thread::spawn(move || l.check_n_at(2, 0))
        };
        let (a, b) = (spawn(), spawn());
        let answers = [a.join().unwrap(), b.join().unwrap()];
        let admitted: u64 = answers.iter().filter(|d| d.is_ok()).count() as u64 * 2;
        assert!(admitted <= 3, "over-admission: {answers:?}");
        assert_eq!(shared.usage_at(0).used(), admitted);
        // The sequential answers: the first admitted with 1 left, the
        // second denied for the whole window.
        let first = log(3, WeightedFlaw::None);
        let want = [first.check_n_at(2, 0), first.check_n_at(2, 0)];
        assert!(
            answers == want || answers == [want[1], want[0]],
            "not linearizable: {answers:?}"
        );
    });
}

#[test]
fn two_admitters_share_the_room() {
    two_admitters(WeightedFlaw::None);
}

/// Negative control: deciding under the lock and recording under a second
/// one lets both admitters in (4 units in a window of 3).
#[test]
#[should_panic(expected = "over-admission")]
fn control_split_section_is_caught() {
    two_admitters(WeightedFlaw::SplitSection);
}

/// A charge of 2 after the fact races a check of 1, with 1 already used of
/// 3: either the check goes first (admitted, and the charge overdraws to
/// 4) or the charge does (3 used, the check denied until the first unit
/// leaves) — never a mix.
#[test]
fn charge_races_check() {
    loom::model(|| {
        let shared = Arc::new(log(3, WeightedFlaw::None));
        shared.charge_at(1, 0);
        let charger = {
            let l = Arc::clone(&shared);
            thread::spawn(move || l.charge_at(2, 1))
        };
        let checker = {
            let l = Arc::clone(&shared);
            thread::spawn(move || l.check_n_at(1, 1))
        };
        let got: (Usage, Decision) = (charger.join().unwrap(), checker.join().unwrap());
        let replay = |charge_first: bool| {
            let l = log(3, WeightedFlaw::None);
            l.charge_at(1, 0);
            if charge_first {
                let u = l.charge_at(2, 1);
                (u, l.check_n_at(1, 1))
            } else {
                let d = l.check_n_at(1, 1);
                (l.charge_at(2, 1), d)
            }
        };
        assert!(
            got == replay(true) || got == replay(false),
            "not linearizable: {got:?}"
        );
        // The log remembers the overdraw exactly.
        let used = shared.usage_at(1).used();
        assert_eq!(used, if got.1.is_ok() { 4 } else { 3 });
    });
}

/// A reservation of 3 of 4 units, committed at 1, races a check of 2: the
/// check is admitted before the reservation (which is then denied) or
/// after the commit, and denied while the 3 are held.
#[test]
fn commit_races_check() {
    loom::model(|| {
        let shared = Arc::new(log(4, WeightedFlaw::None));
        let reserver = {
            let l = Arc::clone(&shared);
            thread::spawn(move || match l.reserve_at(3, 0) {
                Ok(held) => (Ok(held.admitted()), Some(held.commit_at(1, 1))),
                Err(denied) => (Err(denied), None),
            })
        };
        let checker = {
            let l = Arc::clone(&shared);
            thread::spawn(move || l.check_n_at(2, 1))
        };
        let (reserved, committed) = reserver.join().unwrap();
        let checked = checker.join().unwrap();
        let got = (reserved, committed, checked);
        // The check before the reservation, between it and the commit, or
        // after the commit.
        let replay = |at: usize| {
            let l = log(4, WeightedFlaw::None);
            let mut checked = None;
            if at == 0 {
                checked = Some(l.check_n_at(2, 1));
            }
            let (reserved, committed) = match l.reserve_at(3, 0) {
                Ok(held) => {
                    let admitted = held.admitted();
                    if at == 1 {
                        checked = Some(l.check_n_at(2, 1));
                    }
                    (Ok(admitted), Some(held.commit_at(1, 1)))
                }
                Err(denied) => (Err(denied), None),
            };
            if at == 2 {
                checked = Some(l.check_n_at(2, 1));
            }
            (reserved, committed, checked.unwrap())
        };
        assert!(
            (0..3).any(|at| got == replay(at)),
            "not linearizable: {got:?}"
        );
        let held = match got.0 {
            Ok(_) => 1,
            Err(_) => 0,
        };
        let checked = if got.2.is_ok() { 2 } else { 0 };
        assert_eq!(shared.usage_at(1).used(), held + checked);
    });
}
