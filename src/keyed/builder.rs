//! [`KeyedBuilder`]: the options of a [`KeyedLimiter`].

use super::*;

/// Options for a [`KeyedLimiter`]; see [`KeyedLimiter::builder`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
///
/// let limiter = KeyedLimiter::<String>::builder(5, Duration::from_secs(10))
///     .max_keys(1_000)
///     .capacity(100)
///     .build()?;
/// assert!(limiter.check("k").is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct KeyedBuilder<K, C, S, A = Log> {
    /// The default policies (the first from `builder`).
    pub(super) policies: Vec<Policy>,
    pub(super) quota: Option<QuotaFn<K>>,
    pub(super) max_keys: Option<usize>,
    pub(super) max_bytes: Option<usize>,
    pub(super) idle_margin: Option<Duration>,
    pub(super) capacity: usize,
    pub(super) clock: C,
    pub(super) hasher: S,
    /// The keys of the default hasher's function, inline, drawn from its
    /// `RandomState` (`keyed/hasher.rs`); `None` once a hasher is chosen.
    pub(super) sip: Option<SipKeys>,
    /// The counter's mode (unused by the log).
    pub(super) mode: CounterMode,
    /// The `limiter` label of its metrics.
    pub(super) name: crate::observe::Name,
    pub(super) _marker: core::marker::PhantomData<fn(K) -> A>,
}

impl<K, C: Clone, S: Clone, A> Clone for KeyedBuilder<K, C, S, A> {
    fn clone(&self) -> Self {
        KeyedBuilder {
            policies: self.policies.clone(),
            quota: self.quota.clone(),
            max_keys: self.max_keys,
            max_bytes: self.max_bytes,
            idle_margin: self.idle_margin,
            capacity: self.capacity,
            clock: self.clock.clone(),
            hasher: self.hasher.clone(),
            sip: self.sip,
            mode: self.mode,
            name: self.name.clone(),
            _marker: core::marker::PhantomData,
        }
    }
}

impl<K, C, S, A> fmt::Debug for KeyedBuilder<K, C, S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("policies", &self.policies)
            .field("quota", &self.quota.as_ref().map(|_| "per key"))
            .field("max_keys", &self.max_keys)
            .field("max_bytes", &self.max_bytes)
            .field("idle_margin", &self.idle_margin)
            .field("capacity", &self.capacity)
            .field("algorithm", &core::any::type_name::<A>())
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + KeySize, C: Clock, S: BuildHasher, A: Algorithm> KeyedBuilder<K, C, S, A> {
    /// The `limiter` label of this limiter's metrics (feature `metrics`),
    /// so that two limiters in one process are told apart; `"default"`
    /// otherwise.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let logins = slidelog::KeyedLimiter::<String>::builder(5, Duration::from_secs(60))
    ///     .name("logins")
    ///     .build()?;
    /// assert_eq!(logins.name(), "logins");
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = crate::observe::Name::new(name);
        self
    }

    /// The most keys held at once (the memory bound). Default: as many as
    /// fit in 256 MiB at the default limit (at most 1,048,576, at least
    /// 1): the budget holds whatever the limit. With per-key quotas
    /// ([`quota`](Self::quota)) the count is taken at the least a key can
    /// take, and the byte budget ([`max_bytes`](Self::max_bytes)) bounds
    /// what the keys really take: a large default that the quotas stand in
    /// front of does not shrink it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{KeyedLimiter, Quota};
    /// let l = KeyedLimiter::<u32>::builder(1, Duration::from_secs(1)).max_keys(3).build()?;
    /// assert_eq!(l.max_keys(), 3);
    /// // Every key has its own 10 a second: the large default does not
    /// // size the key count.
    /// let ten = Quota::new(10, Duration::from_secs(1))?;
    /// let quoted = KeyedLimiter::<u32>::builder(1 << 20, Duration::from_secs(1))
    ///     .quota(move |_| Some(ten.clone()))
    ///     .build()?;
    /// assert!(quoted.max_keys() >= 1_000_000);
    /// assert_eq!(quoted.max_bytes(), 256 << 20);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = Some(max_keys);
        self
    }

    /// The memory budget in bytes: rings (or counters), map entries **and
    /// the keys' own heap bytes** ([`KeySize`]), so that long keys chosen by
    /// clients cannot exhaust memory. A new key that does not fit is refused
    /// with [`DenyReason::KeyCapacity`] (after a sweep for idle keys), as at
    /// `max_keys`. Default: 256 MiB, or what `max_keys` keys of no heap bytes
    /// take if that is more.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{DenyReason, KeyedLimiter};
    /// let l = KeyedLimiter::<String>::builder(1, Duration::from_secs(1))
    ///     .max_bytes(4096)
    ///     .build()?;
    /// assert!(l.check("short").is_ok());
    /// let huge = "x".repeat(10_000);
    /// assert_eq!(l.check(huge.as_str()).unwrap_err().reason(), DenyReason::KeyCapacity);
    /// assert!(l.memory_bytes() <= 4096);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// How long after its newest admission expires a key counts as idle and
    /// may be evicted. Default: one window; shorter values are raised to one
    /// window. Exactness does not depend on it (a reading older than an
    /// eviction is judged at the eviction floor), but a longer margin keeps
    /// a key that comes back now and then from being evicted and re-created,
    /// and keeps the floor further behind the present.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = slidelog::KeyedLimiter::<u32>::builder(1, Duration::from_secs(1))
    ///     .idle_margin(Duration::from_secs(5))
    ///     .build()?;
    /// # let _ = l;
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn idle_margin(mut self, margin: Duration) -> Self {
        self.idle_margin = Some(margin);
        self
    }

    /// Pre-sizes the map for `capacity` keys (avoids resizes while warming
    /// up), at most as many as `max_keys` and the memory budget hold.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let l = slidelog::KeyedLimiter::<u32>::builder(1, Duration::from_secs(1)).capacity(4096).build()?;
    /// assert!(l.is_empty());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Uses another clock, e.g. a [`ManualClock`](crate::ManualClock).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    /// let l = KeyedLimiter::<u32>::builder(1, Duration::from_secs(1)).clock(ManualClock::new()).build()?;
    /// assert_eq!(l.check(&1).unwrap().at(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedBuilder<K, C2, S, A> {
        let mode = self.mode;
        self.convert(|_| clock, |hasher| hasher, mode)
    }

    /// Uses another hasher, as given. The default is randomly keyed
    /// SipHash-1-3, the function of std's `RandomState`, which resists hash
    /// flooding: its keys are drawn from a `RandomState` and it is computed
    /// by the `siphasher` crate, whose integer writes are inline where
    /// std's go through its byte-slice `write` out of line (a keyed call
    /// with the time passed in: 8-9% less time over `u64` keys, 3-8% over
    /// strings and IP addresses; BENCHMARKS.md, "Where the time goes").
    /// A `RandomState` given here hashes with std's own code.
    ///
    /// Only trade the default for a faster kind of hash if keys cannot be
    /// chosen by an attacker. (What hashing costs: SipHash of a `u64` key is
    /// about a quarter of a keyed `admit`'s instructions; governor's keyed
    /// limiter hashes with SipHash too.) A fixed hasher, for instance,
    /// makes runs reproducible in tests:
    ///
    /// ```
    /// use std::collections::hash_map::DefaultHasher;
    /// use std::hash::BuildHasherDefault;
    /// use std::time::Duration;
    ///
    /// // SipHash under fixed keys: the same hashes in every run, so never
    /// // for keys an attacker picks.
    /// let l = slidelog::KeyedLimiter::<u64>::builder(1, Duration::from_secs(1))
    ///     .hasher(BuildHasherDefault::<DefaultHasher>::default())
    ///     .build()?;
    /// assert!(l.check(&7).is_ok());
    /// assert!(l.check(&7).is_err());
    /// assert!(l.check(&8).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> KeyedBuilder<K, C, S2, A> {
        let mode = self.mode;
        KeyedBuilder {
            sip: None,
            ..self.convert(|clock| clock, |_| hasher, mode)
        }
    }

    /// Keeps the approximate sliding-window counter per key instead of the
    /// exact log: `slots` sub-windows, `8 (slots + 3)` bytes per key whatever
    /// the limit (see [`SlidingCounter`](crate::SlidingCounter) for the
    /// guarantee and the measured error).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedCounter, KeyedLimiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter: KeyedCounter<String, ManualClock> =
    ///     KeyedLimiter::<String>::builder(1_000_000, Duration::from_secs(60))
    ///         .sliding_counter(60)
    ///         .clock(clock.clone())
    ///         .build()?;
    /// assert_eq!(limiter.check_n("tenant-a", 999_999).unwrap().remaining(), 1);
    /// assert!(limiter.check_n("tenant-a", 2).is_err());
    /// assert!(limiter.check_n("tenant-b", 2).is_ok());
    /// // 63 words of state (head, its absolute sub-window, the summary, 60
    /// // slots), the map entry, and a String key's 16 extra bytes.
    /// assert_eq!(limiter.bytes_per_key(), 8 * 63 + 56 + 16);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn sliding_counter(self, slots: u32) -> KeyedBuilder<K, C, S, Counter> {
        self.counter_mode(CounterMode::Slots(slots))
    }

    /// Keeps the two-window (weighted) counter per key: 24 bytes per key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{CounterMode, KeyedLimiter};
    /// let limiter = KeyedLimiter::<u64>::builder(100, Duration::from_secs(1)).two_window().build()?;
    /// assert_eq!(limiter.algorithm().mode(), CounterMode::TwoWindow);
    /// assert!(limiter.check_n(&1, 100).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn two_window(self) -> KeyedBuilder<K, C, S, Counter> {
        self.counter_mode(CounterMode::TwoWindow)
    }

    /// Keeps a counter in the given mode per key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{ConfigError, CounterMode, KeyedLimiter};
    /// let err = KeyedLimiter::<u64>::builder(100, Duration::from_secs(1))
    ///     .counter_mode(CounterMode::Slots(0))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, ConfigError::ZeroSlots);
    /// ```
    pub fn counter_mode(self, mode: CounterMode) -> KeyedBuilder<K, C, S, Counter> {
        self.convert(|clock| clock, |hasher| hasher, mode)
    }

    /// The same options with another clock, hasher or algorithm.
    fn convert<C2, S2, A2>(
        self,
        clock: impl FnOnce(C) -> C2,
        hasher: impl FnOnce(S) -> S2,
        mode: CounterMode,
    ) -> KeyedBuilder<K, C2, S2, A2> {
        KeyedBuilder {
            policies: self.policies,
            quota: self.quota,
            max_keys: self.max_keys,
            max_bytes: self.max_bytes,
            idle_margin: self.idle_margin,
            capacity: self.capacity,
            clock: clock(self.clock),
            hasher: hasher(self.hasher),
            sip: self.sip,
            mode,
            name: self.name,
            _marker: core::marker::PhantomData,
        }
    }
}

impl<K: Hash + Eq + KeySize, C: Clock, S: BuildHasher> KeyedBuilder<K, C, S, Log> {
    /// Every key is also limited to `limit` per `window`: several policies
    /// per key, checked all or nothing on one ring of the largest limit (see
    /// [`Limiter::builder`](crate::Limiter::builder)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<String>::builder(10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.check_n("alice", 10).unwrap();
    /// let denied = limiter.check("alice").unwrap_err();
    /// assert_eq!((denied.policy(), denied.retry_after()), (0, Duration::from_secs(1)));
    /// assert!(limiter.check("bob").is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn and(mut self, limit: u32, window: Duration) -> Self {
        self.policies.push(Policy::new(limit, window));
        self
    }

    /// Chooses each key's policies when the key is first seen (a free and a
    /// paid tier, say): `Some(quota)` limits the key by that [`Quota`] (its
    /// ring sized for it), `None` by the builder's policies. The function
    /// runs once per key lifetime (again if the key is evicted and comes
    /// back), never on the check of a key already present; a quota's ring
    /// and description count against the memory budget. It runs inside
    /// the key's insert, which a change of policies
    /// ([`reconfigure`](KeyedLimiter::reconfigure) and the like) waits
    /// for: it should be quick, and must not change the limiter's policies
    /// itself.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock, Quota};
    ///
    /// let paid = Quota::new(100, Duration::from_secs(1))?.and(1_000, Duration::from_secs(60))?;
    /// let limiter = KeyedLimiter::<String>::builder(2, Duration::from_secs(1))
    ///     .quota(move |key: &String| key.starts_with("paid:").then(|| paid.clone()))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert!(limiter.check_n("free:ann", 3).is_err()); // the default: 2 per second
    /// assert_eq!(limiter.check_n("paid:bob", 3).unwrap().remaining(), 97);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn quota<F>(mut self, quota: F) -> Self
    where
        F: Fn(&K) -> Option<Quota> + Send + Sync + 'static,
    {
        self.quota = Some(Arc::new(quota));
        self
    }
}

impl<K: Hash + Eq + KeySize, C: Clock, S: BuildHasher, A: Algorithm> KeyedBuilder<K, C, S, A> {
    /// Builds the limiter.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a bad limit, window or counter mode (as for
    /// [`Limiter::new`](crate::Limiter::new) and
    /// [`SlidingCounter::new`](crate::SlidingCounter::new)),
    /// `max_keys == 0`, or a `max_bytes` too small for one key
    /// ([`ConfigError::MaxBytesBelowOneKey`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{ConfigError, KeyedLimiter};
    /// let err = KeyedLimiter::<u32>::builder(1, Duration::from_secs(1)).max_keys(0).build().unwrap_err();
    /// assert_eq!(err, ConfigError::ZeroMaxKeys);
    /// ```
    pub fn build(self) -> Result<KeyedLimiter<K, C, S, A>, ConfigError> {
        let algorithm = A::configure(&self.policies, self.mode)?;
        if self.quota.is_some() && !A::QUOTAS {
            return Err(ConfigError::CounterPolicies);
        }
        // The idle margin's default and floor: the longest window.
        let window = self
            .policies
            .iter()
            .map(|p| p.window.as_nanos() as u64)
            .max()
            .unwrap_or(0);
        let width = state::width_for(algorithm.words(None));
        let per_key = KeyedLimiter::<K, C, S, A>::bytes_per_key_for(algorithm.words(None), width);
        // The least a key takes: with per-key quotas, one whose log fits
        // the entry inline.
        let least = if self.quota.is_some() {
            KeyedLimiter::<K, C, S, A>::bytes_per_key_for(0, width)
        } else {
            per_key
        };
        // The keys the budget holds by default: counted at what each key
        // takes at the least, so that a large default quota that per-key
        // quotas stand in front of does not shrink the count (the byte
        // budget bounds what the keys really take).
        let max_keys = match self.max_keys {
            Some(0) => return Err(ConfigError::ZeroMaxKeys),
            Some(n) => n,
            None => (DEFAULT_BUDGET_BYTES / least).clamp(1, DEFAULT_MAX_KEYS_CAP),
        };
        let max_bytes = match self.max_bytes {
            Some(0) => return Err(ConfigError::ZeroMaxBytes),
            Some(max_bytes) if max_bytes < least => {
                return Err(ConfigError::MaxBytesBelowOneKey {
                    max_bytes,
                    per_key: least,
                });
            }
            Some(n) => n,
            None => DEFAULT_BUDGET_BYTES.max(max_keys.saturating_mul(least)),
        };
        let idle_margin = self
            .idle_margin
            .map(|m| u64::try_from(m.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(window)
            .max(window);
        crate::observe::describe();
        let map = Keys::new(
            algorithm.words(None),
            MapHasher::new(self.hasher, self.sip),
            // No more room up front than the cap and the budget can hold.
            self.capacity.min(max_keys).min(max_bytes / least),
        );
        Ok(KeyedLimiter {
            map,
            algorithm,
            quota: self.quota,
            clock: self.clock,
            max_keys,
            max_bytes,
            idle_margin,
            floor: Floor::new(),
            house: CachePadded::new(Housekeeping::default()),
            config: reconfig::Reconfig::new(),
            name: self.name,
        })
    }
}
