//! A key's lookup: the state a call asks ([`Next`]), a new key's
//! insertion, and the dry runs of `peek`.

use super::*;

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// The lookup behind every keyed decision (`check`, `check_n`, `admit`,
    /// `admit_n`, the growth and the layer's reads, at a time given or
    /// read): finds or creates `key`'s state and asks `op` (the state's
    /// answer, `None` if it was closed) at the time `read` returns;
    /// `fresh` maps what an absent key answers to `n == 0`. Under `held`,
    /// a [`PinnedKeys`]'s guard, if given; else under one pinned for the
    /// call.
    ///
    /// The time is read once, after the lookup (docs/design.md §4, "Where
    /// the time is read"): the lookup's dependent loads (the table, the
    /// entry, the key) do not need it, and run while the clock is read.
    ///
    /// Inlined into each caller, with `op` asked in one place: a live key
    /// within its limits answers there. Everything else — an absent key, a
    /// request over the limit, a closed state — goes through
    /// [`settle`](Self::settle), out of line, which says whom to ask next
    /// or answers itself.
    #[inline(always)]
    pub(super) fn decide_at<Q, R>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
        op: impl Fn(&A, &[AtomicU64], Option<&Shape>, u64, u64) -> Option<Result<R, Denied>>,
        fresh: impl FnOnce(Admitted) -> R,
    ) -> Result<R, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        with_map!(&self.map, map => self.decide_in(map, held, key, n, read, &op, fresh))
    }

    /// [`decide_at`](Self::decide_at) on the map in its representation.
    #[expect(
        clippy::too_many_arguments,
        reason = "decide_at's arguments and the map it dispatched to, each used apart"
    )]
    #[inline(always)]
    pub(super) fn decide_in<W: Words, Q, R>(
        &self,
        map: &Map<K, W, S>,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
        op: &impl Fn(&A, &[AtomicU64], Option<&Shape>, u64, u64) -> Option<Result<R, Denied>>,
        fresh: impl FnOnce(Admitted) -> R,
    ) -> Result<R, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        // Pin once per call (docs/design.md §7), unless a `PinnedKeys`
        // holds a guard for the calls it makes.
        let pinned;
        let guard = guard_for!(held, map, pinned);
        let mut found = map.get(key, guard);
        let now = read();
        loop {
            // The floor is loaded after the lookup found (or made) this
            // state, and again on every retry: a state that replaced an
            // evicted one is only reached after the eviction's raise.
            if let Some(state) = found
                && self.algorithm.exceeds(state.quota(), n).is_none()
                && let Some(decision) = op(
                    &self.algorithm,
                    &state.words,
                    state.quota(),
                    now,
                    self.floor.get(),
                )
            {
                return decision;
            }
            found = match self.settle(map, key, n, now, found, guard) {
                Next::Ask(state) => Some(state),
                Next::Fresh(admitted) => return Ok(fresh(admitted)),
                Next::Deny(denied) => return Err(denied),
            };
        }
    }

    /// Whom [`decide_at`](Self::decide_at) asks next, after `found` (the
    /// state the lookup found, if any) did not answer: a state inserted for
    /// an absent key, or the key's state after a closed one was swapped
    /// for its successor or unlinked; or the answer itself — an absent key
    /// asked for no units, a request over the limit.
    #[inline(never)]
    pub(super) fn settle<'g, W: Words, Q>(
        &'g self,
        map: &'g Map<K, W, S>,
        key: &Q,
        n: u32,
        now: u64,
        mut found: Option<&'g KeyState<W>>,
        guard: &'g impl Guard,
    ) -> Next<'g, W>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            let Some(state) = found else {
                // An absent key is a fresh state: nothing to record (and,
                // without per-key quotas, no key to copy).
                if n == 0 && self.quota.is_none() && self.config.unchanged() {
                    return Next::Fresh(self.algorithm.fresh(None, 0, now, self.floor.get()));
                }
                let owned = key.to_owned().compact();
                if n == 0 {
                    // Nothing to insert: the key's policies answer.
                    let quota = self.quota_for(&owned);
                    if let Some(denied) = self.algorithm.exceeds(quota.as_deref(), 0) {
                        return Next::Deny(denied);
                    }
                    let floor = self.floor.get();
                    return Next::Fresh(self.algorithm.fresh(quota.as_deref(), 0, now, floor));
                }
                // Announced before the policies are chosen, until the key is
                // published: a change of policies waits for it before its
                // walk (the grace period, `crate::grace`).
                let entered = self.config.enter();
                let quota = self.quota_for(&owned);
                if let Some(denied) = self.algorithm.exceeds(quota.as_deref(), n) {
                    return Next::Deny(denied);
                }
                return match self.insert(map, owned, quota, now, guard, entered) {
                    Ok(state) => Next::Ask(state),
                    Err(denied) => Next::Deny(denied),
                };
            };
            // Over the limit, or closed (the state answered nothing). Never
            // by a closed state's limits: its successor answers.
            if let Some(denied) = self.algorithm.exceeds(state.quota(), n)
                && !self.algorithm.is_closed(&state.words, state.quota())
            {
                return Next::Deny(denied);
            }
            match self.config.successor(state) {
                // Closed for reconfiguration: swap its successor in (if the
                // reconfiguring thread has not yet) and look again.
                Some(successor) => self.relink(map, key.to_owned(), state, &successor, guard),
                // Closed for eviction: unlink it and look again.
                None => {
                    self.unlink(map, key, state, guard);
                }
            }
            // Whatever the key holds now is asked, never settled unasked: a
            // live state must answer, not be taken for a closed one.
            found = map.get(key, guard);
            if let Some(state) = found {
                return Next::Ask(state);
            }
        }
    }

    /// [`peek_n_at`](Self::peek_n_at), under the guard `held` if given.
    pub(super) fn peek_held<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        now: u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let live = with_map!(&self.map, map => {
            let pinned;
            let guard = guard_for!(held, map, pinned);
            map.get(key, guard).and_then(|state| self.peek_state(state, n, now))
        });
        if let Some(decision) = live {
            return decision;
        }
        // Absent or being evicted: a fresh state (of the key's quota).
        let quota = match (&self.quota, self.config.unchanged()) {
            (None, true) => None,
            _ => self.quota_for(&key.to_owned()),
        };
        if let Some(denied) = self.algorithm.exceeds(quota.as_deref(), n) {
            return Err(denied);
        }
        Ok(self
            .algorithm
            .fresh(quota.as_deref(), n, now, self.floor.get()))
    }

    /// What the live `state` answers to a peek of `n` units at `now` (its
    /// successor if it was closed for reconfiguration); `None` if it was
    /// closed for eviction.
    pub(super) fn peek_state<W: Words>(
        &self,
        state: &KeyState<W>,
        n: u32,
        now: u64,
    ) -> Option<Result<Admitted, Denied>> {
        let floor = self.floor.get();
        let answer = match self.algorithm.exceeds(state.quota(), n) {
            Some(denied) => {
                (!self.algorithm.is_closed(&state.words, state.quota())).then_some(Err(denied))
            }
            None => self
                .algorithm
                .peek(&state.words, state.quota(), n, now, floor),
        };
        if answer.is_some() {
            return answer;
        }
        // Closed for reconfiguration: its successor answers.
        let next = self.config.successor(state)?;
        if let Some(denied) = self.algorithm.exceeds(next.quota(), n) {
            return Some(Err(denied));
        }
        self.algorithm
            .peek(&next.words, next.quota(), n, now, self.floor.get())
    }

    /// Inserts a fresh state for `key`, or returns the state a racing
    /// thread inserted first. Cold: it runs once per key lifetime.
    ///
    /// `entered` announced the insert before its `quota` was chosen; it
    /// leaves once the key is published (so a sweep at the key cap, which
    /// runs before, delays a change of policies; the sweep after does not).
    #[cold]
    #[inline(never)]
    pub(super) fn insert<'g, W: Words>(
        &self,
        map: &'g Map<K, W, S>,
        owned: K,
        quota: Option<Arc<Shape>>,
        now: u64,
        guard: &'g impl Guard,
        entered: Entered<'_>,
    ) -> Result<&'g KeyState<W>, Denied>
    where
        K: 'g,
    {
        let cost = self.cost(&owned, quota.as_deref());
        if !self.reserve(cost) {
            // At the cap: try to make room, then try once more.
            self.sweep(true);
            if !self.reserve(cost) {
                // Racing inserters may have created this very key.
                if let Some(ring) = map.get(&owned, guard) {
                    return Ok(ring);
                }
                // Relaxed: heuristics (see `sweep`).
                self.house.refused.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "tracing")]
                tracing::debug!(
                    target: "slidelog",
                    live = self.house.live.load(Ordering::Relaxed),
                    max_keys = self.max_keys,
                    "new key refused: the key cap or memory budget is full"
                );
                #[cfg(feature = "metrics")]
                metrics::counter!("slidelog_keys_refused_total", "limiter" => self.name.label())
                    .increment(1);
                let next_idle = self.house.next_idle.load(Ordering::Relaxed);
                let next_sweep = self
                    .house
                    .last_sweep
                    .load(Ordering::Relaxed)
                    .saturating_add(self.idle_margin / 4);
                return Err(Denied {
                    retry_after: next_idle.max(next_sweep).saturating_sub(now).max(1),
                    reason: DenyReason::KeyCapacity,
                    policy: 0,
                });
            }
        }
        let algorithm = &self.algorithm;
        let created = now.max(self.floor.get());
        let make = || {
            let words = algorithm.words(quota.as_deref());
            KeyState {
                words: W::build(words, algorithm.initial(quota.as_deref(), created)),
                quota,
            }
        };
        let inserted = map.try_insert_with(owned, make, guard);
        // Published (or found): a change may walk the map now.
        drop(entered);
        match inserted {
            Ok(ring) => {
                self.observe_live();
                // Relaxed: a heuristic counter.
                let inserts = self.house.inserts.fetch_add(1, Ordering::Relaxed) + 1;
                let live = self.house.live.load(Ordering::Relaxed);
                if inserts >= SWEEP_MIN_INSERTS.max(live / 2) && self.under_pressure(live) {
                    self.sweep(false);
                }
                Ok(ring)
            }
            Err(existing) => {
                // Another thread created the key first: share its ring.
                self.release(cost);
                Ok(existing)
            }
        }
    }
}

/// What [`KeyedLimiter::settle`] tells the lookup: ask this state, or the
/// answer itself.
pub(super) enum Next<'g, W> {
    Ask(&'g KeyState<W>),
    Fresh(Admitted),
    Deny(Denied),
}
