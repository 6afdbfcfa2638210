//! Snapshot and restore of a limiter's live admissions (feature `serde`).

use super::*;

#[cfg(feature = "serde")]
impl<C: Clock> Limiter<C> {
    /// The live admissions, anchored to the system's wall clock now (see
    /// [`crate::snapshot`]). Exact when no check races it; a racing
    /// admission may or may not be included.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::Limiter;
    /// let limiter = Limiter::new(10, Duration::from_secs(1))?;
    /// limiter.check_n(3).unwrap();
    /// assert_eq!(limiter.snapshot().admissions.len(), 3);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> crate::snapshot::Snapshot {
        self.snapshot_at(crate::snapshot::Anchor::now(&self.clock))
    }

    /// The live admissions at `anchor.clock_nanos`, as Unix times through
    /// `anchor`.
    pub fn snapshot_at(&self, anchor: crate::snapshot::Anchor) -> crate::snapshot::Snapshot {
        crate::snapshot::Snapshot {
            version: crate::snapshot::SNAPSHOT_VERSION,
            taken_at_unix_nanos: anchor.unix_nanos,
            policies: self.policies(),
            generation: self.generation(),
            admissions: self
                .admissions(anchor.clock_nanos)
                .into_iter()
                .map(|t| anchor.to_unix(t))
                .collect(),
        }
    }

    /// The current generation's live admissions at `now`, following a
    /// reconfiguration that closes it meanwhile.
    pub(super) fn admissions(&self, now: u64) -> Vec<u64> {
        let mut held = self.current.get();
        loop {
            let generation = held.as_deref().unwrap_or(&self.first);
            if let Some(times) = generation.ring().admissions(now) {
                return times;
            }
            held = self.after(generation);
        }
    }

    /// Adds a snapshot's admissions to this limiter's, judged from now on
    /// as if the limiter that took it had never stopped (anchored to the
    /// system's wall clock now). Admissions no policy counts any more are
    /// dropped; live ones past the largest limit (a snapshot of a larger
    /// ring, or of one that carries admissions past a cut) are carried, up
    /// to the snapshot's own count, as a cut carries them (see
    /// [`reconfigure`](Self::reconfigure)). Needs `&mut`: restore before
    /// sharing the limiter.
    ///
    /// # Errors
    ///
    /// [`RestoreError::Version`](crate::snapshot::RestoreError::Version)
    /// for a snapshot of another format version.
    pub fn restore(
        &mut self,
        snapshot: &crate::snapshot::Snapshot,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        let anchor = crate::snapshot::Anchor::now(&self.clock);
        self.restore_at(snapshot, anchor)
    }

    /// [`restore`](Self::restore) with an explicit anchor: `anchor.clock_nanos`
    /// on this limiter's clock is `anchor.unix_nanos`.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore).
    pub fn restore_at(
        &mut self,
        snapshot: &crate::snapshot::Snapshot,
        anchor: crate::snapshot::Anchor,
    ) -> Result<crate::snapshot::Restored, crate::snapshot::RestoreError> {
        crate::snapshot::check_version(snapshot.version)?;
        let now = anchor.clock_nanos;
        let existing = self.admissions(now);
        let already = existing.len();
        let shape = self.with_current(|g| g.shape.clone());
        let g = shape.geometry;
        // Every live admission, up to the larger of this ring and the
        // snapshot's log (a carried ring's surplus included): a ring larger
        // than `L` carries the surplus as a reconfiguration's successor does.
        let cap = (g.limit() as usize).max(snapshot.admissions.len());
        let (times, expired) = crate::snapshot::live_times(
            existing,
            snapshot.admissions.iter().map(|&u| anchor.to_clock(u)),
            now,
            &g.resized(
                cap.min(crate::config::MAX_LIMIT as usize) as u32,
                g.horizon(),
            ),
        );
        // A fresh ring, then the merged log: `&mut self` means no check
        // runs meanwhile, and no reader holds a generation. The count
        // restarts (`current` is empty again); the generation continues
        // past this limiter's and the snapshot's.
        self.restored = self.generation().max(snapshot.generation).saturating_add(1);
        self.first = Generation::with_log(&shape.ordinary(), &times, now, g.horizon());
        self.current.set(None);
        self.generation = AtomicU64::new(0);
        Ok(crate::snapshot::Restored {
            admissions: times.len().saturating_sub(already),
            expired,
            ..Default::default()
        })
    }
}
