//! The weighted log itself, single-threaded: entries `(time, units)` in
//! strictly increasing time, one running sum per policy, the capacity merge
//! and the return of a reservation's units. [`super::WeightedLog`] keeps
//! one behind its lock.

use std::collections::VecDeque;

/// One policy in nanoseconds: at most `limit` units in any window of
/// `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) limit: u64,
    pub(crate) window: u64,
}

/// One recorded call (or several at one effective time, coalesced; or, at
/// the front only, several merged by the capacity rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Effective time (the front's: the newest time merged into it).
    at: u64,
    /// Units; a `u64` so that coalesced and merged charges cannot overflow
    /// it (2^32 charges of `u32::MAX` units would be needed).
    units: u64,
}

/// One policy's view of the log: the first entry live in its window, by
/// absolute index (entries ever popped plus the position in the deque), and
/// the units of every entry from there to the newest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Live {
    start: u64,
    sum: u64,
}

/// The entries and the per-policy sums.
///
/// Invariants (checked by `debug_check` in tests): times strictly increase
/// along `entries`; every entry except the front is one instant's units,
/// exactly; the front holds the units of every call whose time lies in
/// `[floor, front.at]` (more than its own instant's only after a capacity
/// merge); `live[i].sum` is the sum of the entries from `live[i].start` on.
#[derive(Debug)]
pub(crate) struct Entries {
    entries: VecDeque<Entry>,
    /// The absolute index of `entries[0]`.
    first: u64,
    /// The oldest call time the front entry holds (see the invariants).
    floor: u64,
    /// The newest recorded entry's effective time: the clamp (0 before any).
    newest: u64,
    /// One per policy, in the order given.
    live: Box<[Live]>,
}

impl Entries {
    /// An empty log for `policies` policies.
    pub(crate) fn new(policies: usize) -> Self {
        Entries {
            entries: VecDeque::new(),
            first: 0,
            floor: 0,
            newest: 0,
            live: vec![Live::default(); policies].into_boxed_slice(),
        }
    }

    /// The effective time of the newest recorded entry (0 before any).
    pub(crate) fn newest(&self) -> u64 {
        self.newest
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Heap bytes: the entries' buffer and the per-policy sums.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<Entry>() + self.live.len() * size_of::<Live>()
    }

    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    fn entry(&self, absolute: u64) -> Entry {
        self.entries[(absolute - self.first) as usize]
    }

    /// Moves every policy's first live entry to what is live at `t` (an
    /// entry is live in window `W` at `t` iff `at + W > t`), forwards or
    /// backwards: amortised constant for non-decreasing `t`, each entry
    /// crossed once per policy. `t` is at least [`newest`](Self::newest),
    /// so nothing the log popped is live at `t`.
    pub(crate) fn seek(&mut self, t: u64, rules: &[Rule]) {
        debug_assert!(t >= self.newest);
        let end = self.end();
        for (i, rule) in rules.iter().enumerate() {
            let window = rule.window;
            let mut live = self.live[i];
            while live.start < end {
                let e = self.entry(live.start);
                if e.at + window > t {
                    break;
                }
                live.sum -= e.units;
                live.start += 1;
            }
            while live.start > self.first {
                let e = self.entry(live.start - 1);
                if e.at + window <= t {
                    break;
                }
                live.sum += e.units;
                live.start -= 1;
            }
            self.live[i] = live;
        }
    }

    /// Units live in policy `i`'s window at the last [`seek`](Self::seek).
    pub(crate) fn used(&self, i: usize) -> u64 {
        self.live[i].sum
    }

    /// When `need` (at least 1, at most [`used`](Self::used)`(i)`) of
    /// policy `i`'s live units will have left its window of `window`, if
    /// nothing is returned meanwhile: the time the entry whose leaving
    /// completes them leaves. Linear in the entries it walks.
    pub(crate) fn until(&self, i: usize, need: u64, window: u64) -> u64 {
        debug_assert!(need >= 1 && need <= self.live[i].sum);
        let mut left = 0;
        let from = (self.live[i].start - self.first) as usize;
        for e in self.entries.range(from..) {
            left += e.units;
            if left >= need {
                return e.at + window;
            }
        }
        unreachable!("the window holds at least the units that must leave")
    }

    /// Records `units` (at least 1) at `t` (at least [`newest`](Self::newest),
    /// with the log [`seek`](Self::seek)ed to `t`): drops what has left the
    /// longest window, adds to the newest entry when it is of the same
    /// instant, else appends one, and when that leaves more than `capacity`
    /// entries merges the two oldest into one stamped with the newer's time
    /// (units leave no earlier than they would have: see the module docs).
    pub(crate) fn record(&mut self, t: u64, units: u64, rules: &[Rule], capacity: usize) {
        debug_assert!(units > 0 && t >= self.newest);
        let longest = rules.iter().map(|r| r.window).max().unwrap_or(0);
        self.purge(t, longest);
        match self.entries.back_mut() {
            Some(back) if back.at == t => back.units += units,
            _ => {
                if self.entries.is_empty() {
                    self.floor = t;
                }
                self.entries.push_back(Entry { at: t, units });
            }
        }
        // Every window holds the entry just written (a window is at least
        // 1 ns and the log is at `t`): no start moves past it.
        for live in self.live.iter_mut() {
            live.sum += units;
        }
        self.newest = t;
        if self.entries.len() > capacity.max(1) {
            self.merge_oldest();
        }
    }

    /// Pops the entries that left the longest window at `t` (so left every
    /// window, at `t` and at every later effective time), and gives back
    /// memory when the log holds under a quarter of its buffer.
    fn purge(&mut self, t: u64, longest: u64) {
        while let Some(front) = self.entries.front() {
            if front.at + longest > t {
                break;
            }
            debug_assert!(self.live.iter().all(|l| l.start > self.first));
            self.entries.pop_front();
            self.first += 1;
            if let Some(next) = self.entries.front() {
                self.floor = next.at;
            }
        }
        let (len, cap) = (self.entries.len(), self.entries.capacity());
        if cap > 16 && len * 4 < cap {
            self.entries.shrink_to((len * 2).max(8));
        }
    }

    /// Merges the two oldest entries into one stamped with the newer's
    /// time. A window that held only the newer one now counts the older's
    /// units too (the conservative error the module docs bound).
    fn merge_oldest(&mut self) {
        let oldest = self.entries.pop_front().expect("at least two entries");
        self.first += 1;
        self.entries[0].units += oldest.units;
        for live in self.live.iter_mut() {
            if live.start < self.first {
                // It held both: the same units, from the merged entry.
                live.start = self.first;
            } else if live.start == self.first {
                // It held the newer only: the older's units join it.
                live.sum += oldest.units;
            }
        }
    }

    /// Takes back `units` of those recorded at `at` (a reservation's
    /// return), from wherever they are: their own entry, or the front if a
    /// merge folded them into it; nothing if they already left every
    /// window (popped), since then they count in no window at any later
    /// effective time either.
    pub(crate) fn give_back(&mut self, at: u64, units: u64) {
        let Some(front) = self.entries.front() else {
            return;
        };
        // A reservation of nothing recorded no entry.
        if units == 0 || at < self.floor {
            return;
        }
        let k = if at <= front.at {
            0
        } else {
            match self.entries.binary_search_by_key(&at, |e| e.at) {
                Ok(k) => k,
                Err(_) => {
                    debug_assert!(false, "a recorded time is an entry's or the front's");
                    return;
                }
            }
        };
        let units = units.min(self.entries[k].units);
        self.entries[k].units -= units;
        let absolute = self.first + k as u64;
        for live in self.live.iter_mut() {
            if live.start <= absolute {
                live.sum -= units;
            }
        }
    }

    /// Checks the invariants (tests only).
    #[cfg(test)]
    pub(crate) fn debug_check(&self) {
        for pair in self.entries.iter().zip(self.entries.iter().skip(1)) {
            assert!(pair.0.at < pair.1.at, "times increase");
        }
        for live in self.live.iter() {
            assert!(live.start >= self.first && live.start <= self.end());
            let from = (live.start - self.first) as usize;
            let sum: u64 = self.entries.range(from..).map(|e| e.units).sum();
            assert_eq!(sum, live.sum);
        }
        if let Some(front) = self.entries.front() {
            assert!(self.floor <= front.at);
        }
    }
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    const RULES: [Rule; 2] = [
        Rule {
            limit: 100,
            window: 10,
        },
        Rule {
            limit: 1000,
            window: 30,
        },
    ];

    #[test]
    fn merge_keeps_units_and_sums() {
        let mut log = Entries::new(2);
        for t in [0, 5, 12, 20] {
            log.seek(t, &RULES);
            log.record(t, 3, &RULES, 2);
            log.debug_check();
        }
        assert_eq!(log.len(), 2);
        log.seek(20, &RULES);
        // The 30 ns window holds all 12 units (the calls at 0 and 5 merged
        // into the one at 12); the 10 ns window counts the merged units too
        // (12 > 20 - 10): 6 more than the exact 6.
        assert_eq!((log.used(0), log.used(1)), (12, 12));
        // Returns find the merged front by time.
        log.give_back(0, 3);
        log.give_back(20, 1);
        log.debug_check();
        assert_eq!((log.used(0), log.used(1)), (8, 8));
        // Backwards and forwards again.
        log.seek(42, &RULES);
        assert_eq!((log.used(0), log.used(1)), (0, 2));
        log.seek(20, &RULES);
        assert_eq!((log.used(0), log.used(1)), (8, 8));
        log.debug_check();
    }

    #[test]
    fn a_popped_time_returns_nothing() {
        let mut log = Entries::new(2);
        log.seek(0, &RULES);
        log.record(0, 5, &RULES, 8);
        log.seek(40, &RULES);
        log.record(40, 2, &RULES, 8);
        log.give_back(0, 5);
        log.debug_check();
        assert_eq!((log.used(0), log.used(1)), (2, 2));
    }
}
