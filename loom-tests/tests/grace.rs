//! P9 for a keyed limiter: a key inserted while its policies change is
//! judged by the new policies once the change returns — the grace period
//! of `src/grace.rs`, through the shipped `Grace`, with negative controls
//! that must be caught.
//!
//! The keyed map itself is not loom-aware (papaya): one key is modelled by
//! a word holding the limit its state was created with (0: absent), the
//! default policies by a word holding the default limit. An insert
//! announces itself, reads the default, and publishes the key if absent
//! (papaya's insertion: a CAS, Release; its lookups, Acquire). A change
//! publishes the new default, advances the grace period, then walks: it
//! moves the key to the new default if present.

#![cfg(slidelog_loom)]

use std::sync::Arc;

mod common;

use common::explore;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use slidelog::loom_hooks::{Flaw, Grace};

const OLD: u32 = 4;

struct Keyed {
    grace: Grace,
    /// The default limit (a `Link` in the limiter: Release stores,
    /// Acquire loads).
    default: AtomicU32,
    /// The keys: the limit each one's state has, or 0 while absent.
    keys: [AtomicU32; 2],
}

impl Keyed {
    fn new(flaw: Flaw) -> Arc<Keyed> {
        Arc::new(Keyed {
            grace: Grace::with_flaw(flaw),
            default: AtomicU32::new(OLD),
            keys: [AtomicU32::new(0), AtomicU32::new(0)],
        })
    }

    /// A check of absent key `key`: announce, choose, publish, leave.
    fn insert(&self, key: usize) {
        let entered = self.grace.enter();
        let limit = self.default.load(Ordering::Acquire);
        let _ = self.keys[key].compare_exchange(0, limit, Ordering::AcqRel, Ordering::Acquire);
        drop(entered);
    }

    /// `reconfigure(limit)`: publish, wait for the old inserts, walk.
    fn reconfigure(&self, limit: u32) {
        self.default.store(limit, Ordering::Release);
        self.grace.advance();
        for key in &self.keys {
            let found = key.load(Ordering::Acquire);
            if found != 0 && found != limit {
                // The migration (a close and a swap in the limiter): the
                // only writer of a present key.
                key.store(limit, Ordering::Release);
            }
        }
    }

    /// What a check of `key` that starts now finds: the key's limit, or
    /// `None` while absent (its insert then reads the default anew).
    fn found(&self, key: usize) -> Option<u32> {
        Some(self.keys[key].load(Ordering::Acquire)).filter(|&limit| limit != 0)
    }
}

/// One insert races `changes` (each a new default, in order): after the
/// last change returns, a check on the changing thread that finds the key
/// finds the last default; once both threads are done, the key holds it.
fn insert_races_changes(flaw: Flaw, changes: &'static [u32]) {
    explore(3, move || {
        let keyed = Keyed::new(flaw);
        let k = Arc::clone(&keyed);
        let inserter = thread::spawn(move || k.insert(0));
        for &limit in changes {
            keyed.reconfigure(limit);
        }
        let last = *changes.last().unwrap();
        if let Some(limit) = keyed.found(0) {
            assert_eq!(
                limit, last,
                "a key kept the old policies after the change returned"
            );
        }
        inserter.join().unwrap();
        assert_eq!(
            keyed.found(0),
            Some(last),
            "a key kept the old policies after the change returned"
        );
    });
}

#[test]
fn an_insert_racing_a_change_gets_the_new_policies() {
    insert_races_changes(Flaw::None, &[1]);
}

/// Two changes back to back: the second waits on the other parity.
#[test]
fn an_insert_racing_two_changes_gets_the_last_policies() {
    insert_races_changes(Flaw::None, &[1, 2]);
}

/// Negative control: a change that walks without waiting misses a key
/// whose insert chose the old default and published after the walk.
#[test]
#[should_panic(expected = "kept the old policies")]
fn control_no_grace_is_caught() {
    insert_races_changes(Flaw::NoGrace, &[1]);
}

/// Negative control: an insert that counts itself under a guessed epoch
/// without confirming it may be counted where the change no longer looks,
/// and still read the old default.
#[test]
#[should_panic(expected = "kept the old policies")]
fn control_unconfirmed_entry_is_caught() {
    insert_races_changes(Flaw::UnconfirmedEntry, &[1]);
}

/// Two inserts of two keys race one change (the change's zero must cover
/// both leaves: the second decrement continues the first's release
/// sequence).
fn two_inserts_race_a_change(flaw: Flaw) {
    explore(3, move || {
        let keyed = Keyed::new(flaw);
        let inserters: Vec<_> = (0..2)
            .map(|key| {
                let k = Arc::clone(&keyed);
                thread::spawn(move || k.insert(key))
            })
            .collect();
        keyed.reconfigure(1);
        for inserter in inserters {
            inserter.join().unwrap();
        }
        for key in 0..2 {
            assert_eq!(
                keyed.found(key),
                Some(1),
                "a key kept the old policies after the change returned"
            );
        }
    });
}

#[test]
fn two_inserts_racing_a_change_get_the_new_policies() {
    two_inserts_race_a_change(Flaw::None);
}

#[test]
#[should_panic(expected = "kept the old policies")]
fn control_no_grace_is_caught_with_two_inserts() {
    two_inserts_race_a_change(Flaw::NoGrace);
}
