//! Snapshot and restore of a keyed limiter's live admissions (feature
//! `serde`).

use super::*;

#[cfg(feature = "serde")]
impl<K, C, S> KeyedLimiter<K, C, S, Log>
where
    K: Hash + Eq + KeySize + Clone,
    C: Clock,
    S: BuildHasher,
{
    /// Every key's live admissions, anchored to the system's wall clock now
    /// (see [`crate::snapshot`]). Keys with nothing that counts are left
    /// out. Exact when no check races it, also while a change of policies
    /// ([`reconfigure`](Self::reconfigure), [`set_quota`](Self::set_quota))
    /// moves keys: a key being moved is read from its new state. Records
    /// the limiter's [`generation`](Self::generation).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<String>::new(10, Duration::from_secs(1))?;
    /// limiter.check_n("alice", 2).unwrap();
    /// let snapshot = limiter.snapshot();
    /// assert_eq!(snapshot.keys[0].key, "alice");
    /// assert_eq!(snapshot.keys[0].admissions.len(), 2);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> crate::snapshot::KeyedSnapshot<K> {
        self.snapshot_at(crate::snapshot::Anchor::now(&self.clock))
    }

    /// The live admissions at `anchor.clock_nanos`, as Unix times through
    /// `anchor`.
    pub fn snapshot_at(
        &self,
        anchor: crate::snapshot::Anchor,
    ) -> crate::snapshot::KeyedSnapshot<K> {
        let keys = with_map!(&self.map, map => {
            let guard = map.guard();
            map.iter(&guard)
                .filter_map(|(key, state)| {
                    let mut times =
                        self.live_admissions(map, key, state, anchor.clock_nanos, &guard);
                    // What a restore kept aside for a later change of the
                    // key's policies counts too: a snapshot without it would
                    // restore as if it never happened.
                    if let Some(aside) = self.config.restored_for(key) {
                        times.extend(aside.iter().filter(|&&t| t <= anchor.clock_nanos));
                        times.sort_unstable();
                    }
                    let admissions: Vec<u64> =
                        times.into_iter().map(|t| anchor.to_unix(t)).collect();
                    (!admissions.is_empty()).then(|| crate::snapshot::KeyAdmissions {
                        key: key.clone(),
                        admissions,
                    })
                })
                .collect()
        });
        crate::snapshot::KeyedSnapshot {
            version: crate::snapshot::SNAPSHOT_VERSION,
            taken_at_unix_nanos: anchor.unix_nanos,
            policies: self.policies().to_vec(),
            generation: self.generation(),
            keys,
        }
    }

    /// `key`'s live admissions at `now`, from its `state` or, if a change of
    /// policies closed it, from its successor (parked, or swapped into the
    /// map); none if it was closed for eviction (nothing in it counts).
    fn live_admissions<'g, W: Words>(
        &self,
        map: &'g Map<K, W, S>,
        key: &K,
        mut state: &'g KeyState<W>,
        now: u64,
        guard: &'g impl Guard,
    ) -> Vec<u64>
    where
        K: 'g,
    {
        let default = self.algorithm.default_shape();
        loop {
            let shape = state.quota().unwrap_or(default);
            if let Some(times) = shape.ring_in(&state.words).admissions(now) {
                return times;
            }
            // Closed. For a change of policies: its successor, parked
            // before the close, holds the log (a parked state is never
            // closed; once swapped in, the map holds a copy of it).
            if let Some(next) = self.config.successor(state)
                && let Some(times) = next
                    .quota()
                    .unwrap_or(default)
                    .ring_in(&next.words)
                    .admissions(now)
            {
                return times;
            }
            // Swapped in already (and no longer parked), or closed for
            // eviction: whatever the key holds now.
            match map.get(key, guard) {
                Some(current) if !core::ptr::eq(current, state) => state = current,
                _ => return Vec::new(),
            }
        }
    }

    /// Adds a snapshot's admissions to this limiter's, key by key, judged
    /// from now on as if the limiter that took it had never stopped
    /// (anchored to the system's wall clock now). Each key gets the
    /// policies this limiter gives it (its [`quota`](KeyedBuilder::quota)
    /// or the default); admissions no policy counts any more are dropped.
    /// Keys beyond the key cap or memory budget are refused and counted.
    /// Needs `&mut`: restore before sharing the limiter.
    ///
    /// A restored key whose policies hold fewer admissions than the
    /// snapshot has (a key restored under a smaller default than the quota
    /// it had) keeps the older ones aside: a later change of its policies
    /// ([`set_quota`](Self::set_quota), [`clear_quota`](Self::clear_quota),
    /// [`reconfigure`](Self::reconfigure)) gives them back as far as its
    /// new policies count them; [`remove`](Self::remove) forgets them
    /// (they are not counted in [`max_bytes`](Self::max_bytes): at most
    /// the snapshot's own size). The [`generation`](Self::generation)
    /// continues past the snapshot's.
    ///
    /// # Errors
    ///
    /// [`RestoreError::Version`](crate::snapshot::RestoreError::Version)
    /// for a snapshot of another format version.
    pub fn restore(
        &mut self,
        snapshot: &crate::snapshot::KeyedSnapshot<K>,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        let anchor = crate::snapshot::Anchor::now(&self.clock);
        self.restore_at(snapshot, anchor)
    }

    /// [`restore`](Self::restore) with an explicit anchor.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    /// use slidelog::snapshot::Anchor;
    ///
    /// let old = KeyedLimiter::<u64, ManualClock>::with_clock(2, Duration::from_secs(60), ManualClock::new())?;
    /// old.check_n_at(&7, 2, 0).unwrap();
    /// let snapshot = old.snapshot_at(Anchor::new(0, 1_000_000_000_000));
    /// let mut new = KeyedLimiter::<u64, ManualClock>::with_clock(2, Duration::from_secs(60), ManualClock::new())?;
    /// let restored = new.restore_at(&snapshot, Anchor::new(5, 1_000_000_000_005))?;
    /// assert_eq!((restored.keys, restored.admissions), (1, 2));
    /// assert!(new.check_at(&7, 5).is_err(), "no free burst after a restart");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_at(
        &mut self,
        snapshot: &crate::snapshot::KeyedSnapshot<K>,
        anchor: crate::snapshot::Anchor,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        crate::snapshot::check_version(snapshot.version)?;
        // `&mut self`: no insert or change runs meanwhile.
        self.config.continue_past(snapshot.generation);
        let mut report = crate::snapshot::Restored::default();
        with_map!(&self.map, map => {
            for entry in &snapshot.keys {
                self.restore_key(map, entry, anchor, &mut report);
            }
        });
        Ok(report)
    }

    /// Adds one key's admissions from a snapshot (see
    /// [`restore_at`](Self::restore_at); `&mut self` there: no check runs
    /// meanwhile, so replacing the key's state loses nothing).
    fn restore_key<W: Words>(
        &self,
        map: &Map<K, W, S>,
        entry: &crate::snapshot::KeyAdmissions<K>,
        anchor: crate::snapshot::Anchor,
        report: &mut crate::snapshot::Restored,
    ) {
        let now = anchor.clock_nanos;
        let guard = map.guard();
        let existing = map.get(&entry.key, &guard);
        let quota = match existing {
            Some(state) => state.quota.clone(),
            None => self.quota_for(&entry.key),
        };
        let shape = quota.as_deref().unwrap_or(self.algorithm.default_shape());
        let current = existing
            .and_then(|state| shape.ring_in(&state.words).admissions(now))
            .unwrap_or_default();
        let already = current.len();
        let g = shape.geometry;
        // The snapshot's, and what an earlier entry of the same key kept
        // aside.
        let aside = self.config.take_restored(&entry.key);
        let restored = || {
            entry
                .admissions
                .iter()
                .map(|&u| anchor.to_clock(u).min(now))
                .chain(aside.iter().flat_map(|times| times.iter().copied()))
        };
        let mut all: Vec<u64> = current.iter().copied().chain(restored()).collect();
        let (times, expired) = crate::snapshot::live_times(current, restored(), now, &g);
        report.expired += expired;
        // What the ring does not hold (the oldest: `times` is the newest of
        // them all) waits for a change of the key's policies that counts
        // it (`Reconfig::restored`): the key is restored for it even if
        // its ring stays empty.
        all.sort_unstable();
        all.truncate(all.len() - times.len());
        if all.is_empty() && times.is_empty() {
            return;
        }
        let cost = self.cost(&entry.key, quota.as_deref());
        if existing.is_none() && !self.reserve(cost) {
            report.refused_keys += 1;
            return;
        }
        if !all.is_empty() {
            self.config.keep_restored(entry.key.clone(), all.into());
        }
        use crate::algorithm::sealed::Sealed;
        let algorithm = &self.algorithm;
        let words = W::build(
            algorithm.words(quota.as_deref()),
            algorithm.initial(quota.as_deref(), now),
        );
        shape.ring_in(&words).fill_fresh(&times);
        report.admissions += times.len().saturating_sub(already);
        report.keys += 1;
        map.insert(
            entry.key.clone().compact(),
            KeyState { words, quota },
            &guard,
        );
    }
}
