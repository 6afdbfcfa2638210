//! Live reconfiguration of a [`KeyedLimiter`]: the default policies and
//! per-key quotas changed at run time, each live key's log carried over
//! (docs/design.md §6, "Reconfiguration").
//!
//! A key moves to its new policies by the ring's close for reconfiguration
//! ([`RingRef::close_into`](crate::ring::RingRef)): the successor state is
//! built from the frozen log and parked in `moving` (by the old state's
//! address) *before* the close, then swapped into the map in place of the
//! old state. A check that meets the closed state finds the successor in
//! `moving` and swaps it in itself, so no check waits for a migration.
//! Migrations are serialised by `lock`; checks never take it. A change
//! waits for the inserts that may have chosen the old policies before it
//! walks the map (the grace period of [`crate::grace`]), so the walk moves
//! every key created under the old policies, and no key keeps them after
//! the change returns.

use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use papaya::{Compute, Guard, Operation};

use super::KeyedLimiter;
use super::state::{KeyState, Map, Parked, Words, with_map};
use crate::algorithm::sealed::Sealed;
use crate::algorithm::{Algorithm, Log};
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::grace::{Entered, Grace};
use crate::key_size::KeySize;
use crate::link::Link;
use crate::quota::Quota;
use crate::ring::Shape;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What a keyed limiter's configuration is now, beyond its builder's.
pub(super) struct Reconfig<K> {
    /// The default policies since the last `reconfigure` (empty: the
    /// builder's).
    default: Link<Shape>,
    /// Per-key quotas set at run time; they take precedence over the
    /// builder's quota function.
    overrides: papaya::HashMap<K, Arc<Shape>>,
    /// Whether anything was ever changed: while not, the fast paths that
    /// assume the builder's policies for an absent key stay on.
    changed: AtomicBool,
    /// Whether a run-time quota was ever set.
    quotas_set: AtomicBool,
    /// The epoch, bumped by every change, and the inserts in flight that
    /// a change waits for.
    grace: Grace,
    /// Successors of states closed for reconfiguration, by the closed
    /// state's address, until swapped into the map.
    moving: papaya::HashMap<usize, Arc<Parked>>,
    /// Admissions a restore could not fit in a key's ring (older than the
    /// newest `L` it kept, or no longer counted by its policies then), by
    /// key, sorted: merged into the key's state when a change moves it to
    /// policies that count them.
    restored: papaya::HashMap<K, Arc<[u64]>>,
    /// Whether a restore ever kept any (`restored` is looked at only then).
    any_restored: AtomicBool,
    lock: Mutex<()>,
}

impl<K: Hash + Eq> Reconfig<K> {
    pub(super) fn new() -> Self {
        Reconfig {
            default: Link::empty(),
            overrides: papaya::HashMap::new(),
            changed: AtomicBool::new(false),
            quotas_set: AtomicBool::new(false),
            grace: Grace::new(),
            moving: papaya::HashMap::new(),
            restored: papaya::HashMap::new(),
            any_restored: AtomicBool::new(false),
            lock: Mutex::new(()),
        }
    }

    /// Whether the builder's configuration still holds for every key
    /// without a quota function's own.
    #[inline]
    pub(super) fn unchanged(&self) -> bool {
        // Relaxed: a change is published by the grace period's epoch (see
        // `bump`); a check racing it may judge by either configuration.
        !self.changed.load(Ordering::Relaxed)
    }

    /// Whether some key may have a run-time quota.
    pub(super) fn has_quotas(&self) -> bool {
        // Relaxed: a hint; see `unchanged`.
        self.quotas_set.load(Ordering::Relaxed)
    }

    /// Changes so far, continued past a restored snapshot's (see
    /// [`KeyedLimiter::generation`]).
    pub(super) fn generation(&self) -> u64 {
        self.grace.epoch()
    }

    /// Continues the generation past a restored snapshot's (`&mut` in the
    /// caller: nothing runs concurrently).
    #[cfg(feature = "serde")]
    pub(super) fn continue_past(&self, generation: u64) {
        self.grace.continue_past(generation);
    }

    /// Announces an insert, before it chooses the new key's policies; the
    /// insert leaves when the result is dropped, after publishing the key
    /// (see [`crate::grace`]).
    #[inline]
    pub(super) fn enter(&self) -> Entered<'_> {
        self.grace.enter()
    }

    /// Publishes a change (after its new policies are linked) and waits
    /// for the inserts that may have chosen the old ones: a walk over the
    /// map after this sees their keys.
    fn bump(&self) {
        // Relaxed: a hint for `unchanged`; the epoch publishes the change
        // itself (a SeqCst read-modify-write in `advance`).
        self.changed.store(true, Ordering::Relaxed);
        self.grace.advance();
    }

    /// Whether a restore kept admissions that did not fit (see `restored`).
    fn has_restored(&self) -> bool {
        // Relaxed: set by a restore, which has `&mut` of the limiter.
        self.any_restored.load(Ordering::Relaxed)
    }

    /// Keeps `times` (sorted), admissions of `key` a restore could not fit
    /// in its ring, for a later change (`&mut` in the caller).
    #[cfg(feature = "serde")]
    pub(super) fn keep_restored(&self, key: K, times: Arc<[u64]>) {
        // Relaxed: see `has_restored`.
        self.any_restored.store(true, Ordering::Relaxed);
        self.restored.pin().insert(key, times);
    }

    /// Takes what a restore kept for `key` (`&mut` in the caller).
    #[cfg(feature = "serde")]
    pub(super) fn take_restored(&self, key: &K) -> Option<Arc<[u64]>> {
        if !self.has_restored() {
            return None;
        }
        self.restored.pin().remove(key).cloned()
    }

    /// What a restore kept for `key`, left in place (for a snapshot).
    #[cfg(feature = "serde")]
    pub(super) fn restored_for(&self, key: &K) -> Option<Arc<[u64]>> {
        if !self.has_restored() {
            return None;
        }
        self.restored.pin().get(key).cloned()
    }

    /// Forgets what a restore kept for `key` (removed or reset).
    pub(super) fn forget_restored<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.has_restored() {
            self.restored.pin().remove(key);
        }
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current default, if a `reconfigure` replaced the builder's.
    pub(super) fn default(&self) -> Option<Arc<Shape>> {
        self.default.get().clone()
    }

    /// A per-key quota set at run time.
    pub(super) fn override_for(&self, key: &K) -> Option<Arc<Shape>> {
        if self.unchanged() {
            return None;
        }
        self.overrides.pin().get(key).cloned()
    }

    /// The successor parked for the closed `state`, if it was closed for
    /// reconfiguration. Read after seeing the state closed (an Acquire slot
    /// load): the successor was parked before the close.
    pub(super) fn successor<W: Words>(&self, state: &KeyState<W>) -> Option<Arc<Parked>> {
        if self.unchanged() {
            return None;
        }
        self.moving.pin().get(&address(state)).cloned()
    }
}

fn address<W>(state: &KeyState<W>) -> usize {
    core::ptr::from_ref(state) as usize
}

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Swaps `successor` into the map in place of `old` (and nothing else):
    /// by the migrating thread, or by a check that met `old` closed.
    pub(super) fn relink<W: Words>(
        &self,
        map: &Map<K, W, S>,
        key: K,
        old: &KeyState<W>,
        successor: &Parked,
        guard: &impl Guard,
    ) {
        let swapped = map.compute(
            key,
            |entry| match entry {
                Some((_, current)) if core::ptr::eq(current, old) => {
                    Operation::Insert(successor.copy())
                }
                _ => Operation::Abort(()),
            },
            guard,
        );
        if let Compute::Updated {
            old: (key, old),
            new: (_, new),
        } = swapped
        {
            // Relaxed: see `reserve`. The key keeps its place; its bytes
            // follow its new ring (which may exceed the budget a little:
            // a reconfiguration never drops a live key).
            let house = &*self.house;
            house
                .bytes
                .fetch_add(self.cost(key, new.quota()), Ordering::Relaxed);
            house
                .bytes
                .fetch_sub(self.cost(key, old.quota()), Ordering::Relaxed);
        }
    }
}

/// Live reconfiguration (exact log only: [`Log`]).
impl<K, C, S> KeyedLimiter<K, C, S, Log>
where
    K: Hash + Eq + KeySize + Clone,
    C: Clock,
    S: BuildHasher,
{
    /// Moves `key`'s live `state` to the policies it should have now
    /// (`owned` makes the copy of the key the map needs). Called with
    /// `config.lock` held.
    fn migrate<W: Words>(
        &self,
        map: &Map<K, W, S>,
        key: &K,
        owned: impl FnOnce() -> K,
        state: &KeyState<W>,
        guard: &impl Guard,
    ) {
        let desired = self.quota_for(key);
        let same = match (&desired, state.quota()) {
            (None, None) => true,
            // A carrying state moves on every walk: its surplus shrinks
            // once expired.
            (Some(want), Some(have)) => want.policies() == have.policies() && !have.carries(),
            _ => false,
        };
        if same {
            return;
        }
        let moving = self.config.moving.pin();
        let at = address(state);
        // What stays of a restore's older admissions, by the last attempt.
        let mut rest = None;
        let closed = self.algorithm.close_into(
            &state.words,
            state.quota(),
            desired.as_deref(),
            self.clock.now(),
            &mut |words, carried| {
                // A carrying ring's own shape, with `desired`'s policies.
                let shape = carried.or_else(|| desired.clone());
                let words = self.with_restored(key, shape.as_deref(), words, &mut rest);
                // Parked before the close (papaya's insert is a Release
                // store, the close a Release CAS after it): whoever sees the
                // state closed finds its successor. An earlier attempt's is
                // replaced unread: nobody looks before the close.
                moving.insert(
                    at,
                    Arc::new(KeyState {
                        words,
                        quota: shape,
                    }),
                );
            },
        );
        if closed && let Some(rest) = rest {
            let restored = self.config.restored.pin();
            if rest.is_empty() {
                restored.remove(key);
            } else {
                restored.insert(key.clone(), rest);
            }
        }
        if closed && let Some(successor) = moving.get(&at).cloned() {
            self.relink(map, owned(), state, &successor, guard);
        }
        // (Closed for eviction first: the next insert of the key gets the
        // desired policies.)
        moving.remove(&at);
    }

    /// The successor's `words` (for policies `to`) with the admissions a
    /// restore could not fit in `key`'s ring merged in: as many of the
    /// newest as the new ring holds and its policies still count. What
    /// does not fit is left in `rest`, for a later change, once the close
    /// succeeds (an attempt that fails leaves the restored ones as they
    /// were); what no policy of the new ones counts any more is dropped.
    fn with_restored(
        &self,
        key: &K,
        to: Option<&Shape>,
        words: Box<[AtomicU64]>,
        rest: &mut Option<Arc<[u64]>>,
    ) -> Box<[AtomicU64]> {
        if !self.config.has_restored() {
            return words;
        }
        let restored = self.config.restored.pin();
        let Some(older) = restored.get(key) else {
            return words;
        };
        let now = self.clock.now();
        let shape = to.unwrap_or(self.algorithm.default_shape());
        let moved = shape.ring_in(&words).admissions(now).unwrap_or_default();
        let from_ring = moved.len();
        // All of them, oldest first; the ring keeps the newest `L` of
        // those its policies still count at `now`, the rest stays aside.
        let longest = shape.geometry.window() + shape.geometry.linger();
        let mut all: Vec<u64> = moved.into_iter().chain(older.iter().copied()).collect();
        all.sort_unstable();
        let counted = all.partition_point(|&t| t.saturating_add(longest) <= now);
        let split = all.len() - (all.len() - counted).min(shape.geometry.limit() as usize);
        let kept = &all[split..];
        *rest = Some(all[counted..split].into());
        if kept.len() == from_ring {
            return words;
        }
        let words =
            <Box<[AtomicU64]> as Words>::build(words.len(), self.algorithm.initial(to, now));
        shape.ring_in(&words).fill_fresh(kept);
        words
    }

    /// Changes the default policies — those of every key without its own
    /// quota, live keys included — while other threads check, keeping each
    /// key's log.
    ///
    /// The contract is [`Limiter::reconfigure`](crate::Limiter::reconfigure)'s,
    /// per key: a key's new policies judge every admission of its old ring
    /// still inside a window of the old or the new policies (at least the
    /// newest `L`) and everything after, never a mix; every check that
    /// starts after this returns is judged by the new policies. A key cut
    /// below what it holds carries the surplus (never more slots than its
    /// old ring) until a later move of the key finds it outside every
    /// window in force, or the key is evicted, so a cut and a restore never
    /// let a window hold more than the largest limit in force. Keys with their
    /// own quota (from [`KeyedBuilder::quota`](crate::KeyedBuilder::quota)
    /// or [`set_quota`](Self::set_quota)) keep it.
    ///
    /// Live keys are moved before this returns (a walk over the map,
    /// `O(keys · L)`), keys inserted while it runs included: it first
    /// waits for the inserts in flight that may have chosen the old
    /// policies (docs/design.md §6, "Keys inserted during a change"), so
    /// no key keeps them once it returns. Checks never wait for it (nor
    /// take its lock). A [quota function](crate::KeyedBuilder::quota) must
    /// not call it: it would wait for the insert that called the function. A key's bytes follow its new ring: growing limits
    /// can take the map past [`max_bytes`](Self::max_bytes) (no live key is
    /// dropped for it; new keys are refused until it fits again).
    ///
    /// # Errors
    ///
    /// None for a [`Quota`], which is validated when made.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedLimiter::<&str, ManualClock>::with_clock(
    ///     100, Duration::from_secs(60), ManualClock::new())?;
    /// limiter.check_n(&"tenant", 80).unwrap();
    /// limiter.reconfigure(Quota::new(50, Duration::from_secs(60))?)?;
    /// assert!(limiter.check(&"tenant").is_err()); // 80 in the window
    /// assert_eq!(limiter.check(&"other").unwrap().remaining(), 49);
    /// assert_eq!(limiter.policies()[0].limit, 50);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, default: Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self.config.lock();
        self.config.default.set(Some(default.shape));
        self.config.bump();
        self.migrate_all();
        Ok(())
    }

    /// Moves every live key to the quota the builder's
    /// [`quota`](crate::KeyedBuilder::quota) function gives it now, keeping
    /// its log: for a function whose answers changed (it reads a
    /// configuration that was reloaded). The default policies stay as they
    /// are, and so do the quotas of [`set_quota`](Self::set_quota).
    ///
    /// The contract is [`reconfigure`](Self::reconfigure)'s, for each key
    /// whose quota changed: every check that starts after this returns is
    /// judged by the function's answer of now (a key created meanwhile
    /// included), over the key's log; a key the function no longer answers
    /// for goes to the default. As there, live keys are moved before this
    /// returns (a walk over the map), checks never wait for it, and a quota
    /// function must not call it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, RwLock};
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Quota};
    ///
    /// // The per-key limit a configuration gives (reloaded below).
    /// let limit = Arc::new(RwLock::new(100));
    /// let configured = Arc::clone(&limit);
    /// let limiter = KeyedLimiter::<&str>::builder(10, Duration::from_secs(60))
    ///     .clock(ManualClock::new())
    ///     .quota(move |_| Quota::new(*configured.read().unwrap(), Duration::from_secs(60)).ok())
    ///     .build()?;
    /// limiter.check_n(&"tenant", 80).unwrap();
    /// *limit.write().unwrap() = 50;
    /// limiter.requota();
    /// assert!(limiter.check(&"tenant").is_err()); // 80 in the window
    /// assert_eq!(limiter.policies_for(&"tenant")[0].limit, 50);
    /// assert_eq!(limiter.policies()[0].limit, 10); // the default stays
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn requota(&self) {
        let _one_at_a_time = self.config.lock();
        self.config.bump();
        self.migrate_all();
    }

    /// Gives `key` its own quota from now on, live or not: above the
    /// builder's [`quota`](crate::KeyedBuilder::quota) function and the
    /// default, until [`clear_quota`](Self::clear_quota). A live key keeps
    /// its log (as [`reconfigure`](Self::reconfigure) does).
    ///
    /// Every check of `key` that starts after this returns is judged by
    /// `quota`, a check that creates the key meanwhile included (as for
    /// [`reconfigure`](Self::reconfigure)). A key restored with more
    /// admissions than its ring then held gets the older ones back, as far
    /// as `quota` counts them (see [`restore`](Self::restore)).
    ///
    /// Run-time quotas are kept in a map of their own until cleared (they
    /// are not evicted with idle keys, and not counted in
    /// [`max_bytes`](Self::max_bytes)).
    ///
    /// # Errors
    ///
    /// None for a [`Quota`], which is validated when made.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(
    ///     10, Duration::from_secs(1), ManualClock::new())?;
    /// limiter.check_n(&7, 10).unwrap();
    /// limiter.set_quota(7, Quota::new(100, Duration::from_secs(1))?)?; // upgraded
    /// assert_eq!(limiter.check(&7).unwrap().remaining(), 89);
    /// assert!(limiter.clear_quota(&7));
    /// assert!(limiter.check(&7).is_err()); // back to 10 a second
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn set_quota(&self, key: K, quota: Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self.config.lock();
        self.config.overrides.pin().insert(key.clone(), quota.shape);
        // Relaxed: a hint for the tower layer; `bump` publishes.
        self.config.quotas_set.store(true, Ordering::Relaxed);
        self.config.bump();
        self.migrate_key(&key);
        Ok(())
    }

    /// Removes the quota [`set_quota`](Self::set_quota) gave `key`: it goes
    /// back to the builder's quota function or the default, keeping its
    /// log. `false` if it had none.
    pub fn clear_quota<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let _one_at_a_time = self.config.lock();
        let Some((key, _)) = self
            .config
            .overrides
            .pin()
            .remove_entry(key)
            .map(|(k, v)| (k.clone(), v.clone()))
        else {
            return false;
        };
        self.config.bump();
        self.migrate_key(&key);
        true
    }

    /// How many times the policies were changed at run time
    /// ([`reconfigure`](Self::reconfigure), [`set_quota`](Self::set_quota),
    /// [`clear_quota`](Self::clear_quota)): a cache of
    /// [`policies`](KeyedLimiter::policies) is current while this is
    /// unchanged. A [`restore`](Self::restore) continues past both this
    /// limiter's generation and the snapshot's (one more than the larger),
    /// so no number names two configurations.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, Quota};
    /// let limiter = KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// limiter.reconfigure(Quota::new(5, Duration::from_secs(1))?)?;
    /// assert_eq!(limiter.generation(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn generation(&self) -> u64 {
        self.config.generation()
    }

    fn migrate_key(&self, key: &K) {
        with_map!(&self.map, map => {
            let guard = map.guard();
            if let Some(state) = map.get(key, &guard) {
                self.migrate(map, key, || key.clone(), state, &guard);
            }
        });
    }

    fn migrate_all(&self) {
        with_map!(&self.map, map => {
            let guard = map.guard();
            for (key, state) in map.iter(&guard) {
                self.migrate(map, key, || key.clone(), state, &guard);
            }
        });
    }
}
