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
    /// The one key: the limit its state has, or 0 while absent.
    key: AtomicU32,
}

impl Keyed {
    fn new(flaw: Flaw) -> Arc<Keyed> {
        Arc::new(Keyed {
            grace: Grace::with_flaw(flaw),
            default: AtomicU32::new(OLD),
            key: AtomicU32::new(0),
        })
    }

    /// A check of the absent key: announce, choose, publish, leave.
    fn insert(&self) {
        let entered = self.grace.enter();
        let limit = self.default.load(Ordering::Acquire);
        let _ = self
            .key
            .compare_exchange(0, limit, Ordering::AcqRel, Ordering::Acquire);
        drop(entered);
    }

    /// `reconfigure(limit)`: publish, wait for the old inserts, walk.
    fn reconfigure(&self, limit: u32) {
        self.default.store(limit, Ordering::Release);
        self.grace.advance();
        let found = self.key.load(Ordering::Acquire);
        if found != 0 && found != limit {
            // The migration (a close and a swap in the limiter): the only
            // writer of a present key.
            self.key.store(limit, Ordering::Release);
        }
    }

    /// What a check that starts now finds: the key's limit, or `None`
    /// while absent (its insert then reads the default anew).
    fn found(&self) -> Option<u32> {
        Some(self.key.load(Ordering::Acquire)).filter(|&limit| limit != 0)
    }
}

/// One insert races `changes` (each a new default, in order): after the
/// last change returns, a check on the changing thread that finds the key
/// finds the last default; once both threads are done, the key holds it.
fn insert_races_changes(flaw: Flaw, changes: &'static [u32]) {
    explore(3, move || {
        let keyed = Keyed::new(flaw);
        let k = Arc::clone(&keyed);
        let inserter = thread::spawn(move || k.insert());
        for &limit in changes {
            keyed.reconfigure(limit);
        }
        let last = *changes.last().unwrap();
        if let Some(limit) = keyed.found() {
            assert_eq!(limit, last, "a key kept the old policies after the change returned");
        }
        inserter.join().unwrap();
        assert_eq!(
            keyed.found(),
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
