//! Keys out: the byte budget, unlinking, idle sweeps, `remove` and `reset`.

use super::*;

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Whether the live keys fill half the key cap or half the byte budget:
    /// automatic sweeps run only then. Below it, idle keys stay (memory is
    /// bounded by the caps either way), so a steady population of keys that
    /// come back after more than the window plus the idle margin is not
    /// evicted and re-created over and over (each re-creation counted as a
    /// new key that paid for the next sweep); a flood of new keys reaches
    /// half the cap and is swept from there on.
    #[inline]
    pub(super) fn under_pressure(&self, live: usize) -> bool {
        // Relaxed: a heuristic.
        live >= self.max_keys / 2 || self.house.bytes.load(Ordering::Relaxed) >= self.max_bytes / 2
    }

    /// What a live key costs the budget: its state and map entry, the
    /// key's own heap bytes, and a per-key quota's description (counted for
    /// each key that holds it, though clones share one).
    #[inline]
    pub(super) fn cost(&self, key: &K, quota: Option<&Shape>) -> usize {
        let state = match quota {
            None => self.bytes_per_key(),
            Some(shape) => {
                Self::bytes_per_key_for(self.algorithm.words(Some(shape)), self.map.width())
                    .saturating_add(core::mem::size_of::<Shape>() + shape.heap_bytes() + 16)
            }
        };
        state.saturating_add(key.heap_bytes())
    }

    /// The policies `key` gets if it is new: `None` for the default ones.
    pub(super) fn quota_for(&self, key: &K) -> Option<Arc<Shape>> {
        let shape = self
            .config
            .override_for(key)
            .or_else(|| self.quota.as_ref()?(key).map(|quota| quota.shape))
            .or_else(|| self.config.default())?;
        // The builder's default policies need no description of their own.
        (shape.policies() != self.algorithm.policies()).then_some(shape)
    }

    /// Takes one place under `max_keys` and `cost` bytes under `max_bytes`.
    #[inline]
    pub(super) fn reserve(&self, cost: usize) -> bool {
        // Relaxed: the counts guard memory, not other data; the map's own
        // synchronisation orders the insertions themselves.
        let house = &*self.house;
        if house
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                (live < self.max_keys).then_some(live + 1)
            })
            .is_err()
        {
            return false;
        }
        let fits = house
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bytes| {
                bytes.checked_add(cost).filter(|&b| b <= self.max_bytes)
            })
            .is_ok();
        if !fits {
            house.live.fetch_sub(1, Ordering::Relaxed);
        }
        fits
    }

    /// Gives back a place and `cost` bytes.
    #[inline]
    pub(super) fn release(&self, cost: usize) {
        // Relaxed: see `reserve`.
        self.house.live.fetch_sub(1, Ordering::Relaxed);
        self.house.bytes.fetch_sub(cost, Ordering::Relaxed);
    }

    /// Removes `key` if it still maps to the closed `ring` (whoever removes
    /// it releases its place and counts the eviction); whether this call
    /// removed it.
    pub(super) fn unlink<Q, W: Words>(
        &self,
        map: &Map<K, W, S>,
        key: &Q,
        ring: &KeyState<W>,
        guard: &impl Guard,
    ) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Ok(Some((removed, state))) =
            map.remove_if(key, |_, current| core::ptr::eq(current, ring), guard)
        else {
            return false;
        };
        self.release(self.cost(removed, state.quota()));
        // Relaxed: a statistic.
        self.house.evicted.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Evicts idle keys; at most one sweep runs at a time.
    ///
    /// An automatic sweep (`at_cap == false`) runs after every
    /// `max(64, live / 2)` new keys once the keys fill half a cap (see
    /// `under_pressure`). At the cap (`at_cap`), a sweep runs only
    /// if some key may be idle by now (`next_idle`) and it is paid for:
    /// `live / 8` refusals since the last one, or a quarter margin of time.
    /// So a flood of new keys at the cap costs O(1) amortised per request,
    /// never a full scan each.
    ///
    /// A sweep judges idleness by the limiter's own clock, never by the
    /// reading of the caller that triggered it: a reading from the future
    /// could otherwise evict keys that are live at the present (and store a
    /// `next_idle` far ahead that blocks the cap's sweeps), and a stale one
    /// would only evict less.
    pub(super) fn sweep(&self, at_cap: bool) -> usize {
        let house = &*self.house;
        let now = self.clock.now();
        // Relaxed throughout: heuristics that only decide when to scan.
        if at_cap {
            if now < house.next_idle.load(Ordering::Relaxed) {
                return 0;
            }
            let last = house.last_sweep.load(Ordering::Relaxed);
            let refused = house.refused.load(Ordering::Relaxed);
            let live = house.live.load(Ordering::Relaxed);
            if refused < live / 8 && now < last.saturating_add(self.idle_margin / 4) {
                return 0;
            }
        }
        self.sweep_exclusive(now).unwrap_or(0)
    }

    /// A full sweep if no other sweep is running (`None` otherwise), with
    /// the bookkeeping the automatic sweeps steer by.
    pub(super) fn sweep_exclusive(&self, now: u64) -> Option<usize> {
        let house = &*self.house;
        // Acquire/Release make successive sweeps ordered (a try-lock);
        // the statistics themselves are Relaxed heuristics.
        house
            .sweeping
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let (evicted, next_idle) = self.evict_idle(now);
        self.observe_sweep(evicted);
        house.last_sweep.store(now, Ordering::Relaxed);
        house.next_idle.store(next_idle, Ordering::Relaxed);
        house.inserts.store(0, Ordering::Relaxed);
        house.refused.store(0, Ordering::Relaxed);
        house.sweeping.store(false, Ordering::Release);
        Some(evicted)
    }

    /// Closes and removes every key idle at `now`; returns how many, and a
    /// lower bound on when the next key can become idle.
    pub(super) fn evict_idle(&self, now: u64) -> (usize, u64) {
        // A key admitted from now on becomes idle at or after this.
        // (Per-key quotas may have shorter windows: no bound beyond now.)
        let earliest = match (&self.quota, self.config.unchanged()) {
            (None, true) => self.algorithm.earliest_idle(now),
            _ => now,
        };
        let mut next_idle = earliest.saturating_add(self.idle_margin);
        let evicted = with_map!(&self.map, map => {
            let guard = map.guard();
            let mut evicted = 0;
            for (key, ring) in map.iter(&guard) {
                match self.algorithm.close_if_idle(
                    &ring.words,
                    ring.quota(),
                    now,
                    self.idle_margin,
                    &self.floor,
                ) {
                    // Closed for reconfiguration: its mover swaps it.
                    Ok(()) if self.config.successor(ring).is_some() => {}
                    // Closed: no admission can land in it any more.
                    Ok(()) => evicted += usize::from(self.unlink(map, key, ring, &guard)),
                    Err(idle_at) => next_idle = next_idle.min(idle_at),
                }
            }
            evicted
        });
        (evicted, next_idle)
    }

    /// Reports a sweep (feature `tracing`: a debug event when it evicted;
    /// feature `metrics`: the live-key gauge and the eviction counter).
    #[cfg_attr(
        not(any(feature = "tracing", feature = "metrics")),
        allow(unused_variables)
    )]
    pub(super) fn observe_sweep(&self, evicted: usize) {
        #[cfg(feature = "tracing")]
        if evicted > 0 {
            tracing::debug!(
                target: "slidelog",
                evicted,
                live = self.len(),
                "swept idle keys"
            );
        }
        #[cfg(feature = "metrics")]
        {
            metrics::counter!("slidelog_keys_evicted_total", "limiter" => self.name.label())
                .increment(evicted as u64);
            self.observe_live();
        }
    }

    /// Evicts every idle key now (a key whose newest admission expired more
    /// than the idle margin ago); returns how many were evicted. Decisions
    /// are unchanged: an idle key behaves exactly like an absent one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_secs(1), clock.clone())?;
    /// limiter.check(&1).unwrap();
    /// limiter.check(&2).unwrap();
    /// assert_eq!(limiter.len(), 2);
    /// clock.advance(Duration::from_secs(2)); // window + idle margin (one window)
    /// assert_eq!(limiter.retain_recent(), 2);
    /// assert!(limiter.is_empty());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn retain_recent(&self) -> usize {
        let now = self.clock.now();
        // If an automatic sweep is running, scan anyway but leave its
        // statistics alone.
        self.sweep_exclusive(now).unwrap_or_else(|| {
            let evicted = self.evict_idle(now).0;
            self.observe_sweep(evicted);
            evicted
        })
    }

    /// How many keys have been evicted since the limiter was built (by
    /// automatic sweeps and [`retain_recent`](Self::retain_recent)): a
    /// steady key population keeps this near zero; a flood of new keys at
    /// the cap drives it up.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_secs(1), clock.clone())?;
    /// limiter.check(&1).unwrap();
    /// clock.advance(Duration::from_secs(2));
    /// limiter.retain_recent();
    /// assert_eq!(limiter.evicted(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn evicted(&self) -> u64 {
        // Relaxed: a statistic.
        self.house.evicted.load(Ordering::Relaxed)
    }

    /// Forgets `key`: its history is dropped and its next request starts
    /// with the whole quota, as a key never seen (after a successful login,
    /// say). `true` if the key held state. A check racing the removal may
    /// be counted in the forgotten state; every later one starts afresh.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(3, Duration::from_secs(60))?;
    /// for _ in 0..3 {
    ///     limiter.check("mallory").unwrap();
    /// }
    /// assert!(limiter.check("mallory").is_err());
    /// assert!(limiter.remove("mallory"));
    /// assert_eq!(limiter.check("mallory").unwrap().remaining(), 2);
    /// assert!(!limiter.remove("nobody"));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let cost = with_map!(&self.map, map => {
            let guard = map.guard();
            map.remove_entry(key, &guard)
                .map(|(removed, state)| self.cost(removed, state.quota()))
        });
        self.config.forget_restored(key);
        let Some(cost) = cost else {
            return false;
        };
        self.release(cost);
        self.observe_live();
        true
    }

    /// [`remove`](Self::remove), for callers that think of it as a reset.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<u64>::new(1, Duration::from_secs(60))?;
    /// limiter.check(&7).unwrap();
    /// limiter.reset(&7);
    /// assert!(limiter.check(&7).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reset<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.remove(key);
    }
}
