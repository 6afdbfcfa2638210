//! What a keyed limiter tells about itself: sizes, policies, name, clock.

use super::*;

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// The number of live keys. Approximate under concurrency (insertions and
    /// evictions in flight).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(1, Duration::from_secs(1))?;
    /// limiter.check(&1).unwrap();
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        with_map!(&self.map, map => map.len())
    }

    /// Whether no key is live. Approximate under concurrency.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(1, Duration::from_secs(1))?;
    /// assert!(limiter.is_empty());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An estimate of the heap bytes held: `bytes_per_key()` per live key
    /// plus the keys' own heap bytes ([`KeySize`]); what the memory budget
    /// ([`KeyedBuilder::max_bytes`]) counts. Includes insertions in flight.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// limiter.check(&1).unwrap();
    /// assert_eq!(limiter.memory_bytes(), limiter.bytes_per_key());
    /// let by_name = slidelog::KeyedLimiter::<String>::new(10, Duration::from_secs(1))?;
    /// by_name.check("a-rather-long-api-key").unwrap();
    /// assert_eq!(by_name.memory_bytes(), by_name.bytes_per_key() + 21);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        // Relaxed: a statistic.
        self.house.bytes.load(Ordering::Relaxed)
    }

    /// The memory budget: see [`KeyedBuilder::max_bytes`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.max_bytes(), 256 << 20);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes per live key: the map entry (the key and its state) and the
    /// entry's share of papaya's table, about 24 bytes at its load factor.
    /// A state of at most 12 words — a log of up to 11 slots (`limit + 1`
    /// words), a counter of up to 9 — lives inside the entry, in the
    /// narrowest of three widths that holds the default one: 80 bytes per
    /// 8-byte key up to a limit of 3, 112 up to 7, 144 up to 11. A larger
    /// state keeps its words in an allocation of their own: `8 (limit + 1)`
    /// bytes for a log (8 more from a limit of 64 on, for its expiry hint;
    /// with several policies, 8 for each policy's)
    /// beside a 32-byte entry. Longer keys add `size_of::<K>()` beyond 8
    /// (and their own heap bytes, counted by
    /// [`memory_bytes`](Self::memory_bytes)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.bytes_per_key(), 144);
    /// let large = slidelog::KeyedLimiter::<u64>::new(100, Duration::from_secs(1))?;
    /// assert_eq!(large.bytes_per_key(), 8 * 102 + 56);
    /// // Two policies: `head`, each one's hint, 100 slots.
    /// let two = slidelog::KeyedLimiter::<u64>::builder(10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60))
    ///     .build()?;
    /// assert_eq!(two.bytes_per_key(), 8 * 103 + 56);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn bytes_per_key(&self) -> usize {
        Self::bytes_per_key_for(self.algorithm.words(None), self.map.width())
    }

    /// [`bytes_per_key`](Self::bytes_per_key) for a state of `words` words
    /// in a map of `width` (the most words a state keeps inside an entry;
    /// 0: boxed).
    pub(super) fn bytes_per_key_for(words: usize, width: usize) -> usize {
        let boxed = if words > width { 8 * words } else { 0 };
        core::mem::size_of::<K>() + state::state_size(width) + boxed + TABLE_BYTES_PER_KEY
    }

    /// The most keys held at once.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert!(limiter.max_keys() >= 1024);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The per-key limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.limit(), 10);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        match self.config.default() {
            Some(shape) => shape.limit(),
            None => self.algorithm.limit(),
        }
    }

    /// The builder's default policies (those of a state without a quota
    /// of its own).
    pub(crate) fn built_policies(&self) -> &[Policy] {
        self.algorithm.policies()
    }

    /// The default policies now, in the order given (a key's own
    /// [`quota`](KeyedBuilder::quota) may differ; the latest
    /// `reconfigure`'s once reconfigured).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::builder(10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60))
    ///     .build()?;
    /// assert_eq!(limiter.policies()[1].limit, 100);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn policies(&self) -> Vec<Policy> {
        match self.config.default() {
            Some(shape) => shape.policies().to_vec(),
            None => self.algorithm.policies().to_vec(),
        }
    }

    /// The policies that limit `key`: its [`quota`](KeyedBuilder::quota)'s
    /// if one chose other policies (for a key not seen yet, the ones it
    /// would get), else the default ones.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, Quota};
    /// let paid = Quota::new(100, Duration::from_secs(1))?;
    /// let limiter = KeyedLimiter::<u64>::builder(10, Duration::from_secs(1))
    ///     .quota(move |k: &u64| (*k >= 1000).then(|| paid.clone()))
    ///     .build()?;
    /// assert_eq!(limiter.policies_for(&1).to_vec()[0].limit, 10);
    /// assert_eq!(limiter.policies_for(&1000).to_vec()[0].limit, 100);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn policies_for(&self, key: &K) -> std::borrow::Cow<'_, [Policy]> {
        if self.quota.is_none() && self.config.unchanged() {
            return std::borrow::Cow::Borrowed(self.algorithm.policies());
        }
        let held = with_map!(&self.map, map => {
            let guard = map.guard();
            map.get(key, &guard).map(|state| state.quota.clone())
        });
        let quota = match held {
            Some(quota) => quota,
            None => self.quota_for(key),
        };
        match quota {
            Some(shape) => std::borrow::Cow::Owned(shape.policies().to_vec()),
            None => std::borrow::Cow::Borrowed(self.algorithm.policies()),
        }
    }

    /// Sets the live-key gauge (feature `metrics`) from the count of keys
    /// held, after an insertion or a removal.
    #[inline]
    pub(super) fn observe_live(&self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("slidelog_keys_live", "limiter" => self.name.label())
            // Relaxed: a statistic.
            .set(self.house.live.load(Ordering::Relaxed) as f64);
    }

    /// The name this limiter's metrics carry as their `limiter` label
    /// ([`KeyedBuilder::name`]; `"default"` when none was given).
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Whether a per-key quota function was given.
    pub(crate) fn has_quotas(&self) -> bool {
        self.quota.is_some() || self.config.has_quotas()
    }

    /// See `generation` (keyed/reconfig.rs); 0 for a keyed counter.
    pub(crate) fn config_generation(&self) -> u64 {
        self.config.generation()
    }

    /// The window (the first policy's).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let limiter = slidelog::KeyedLimiter::<u64>::new(10, Duration::from_secs(1))?;
    /// assert_eq!(limiter.window(), Duration::from_secs(1));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn window(&self) -> Duration {
        match self.config.default() {
            Some(shape) => shape.window(),
            None => Duration::from_nanos(self.algorithm.window_nanos()),
        }
    }

    /// The limiter's clock.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::{Clock, KeyedLimiter, ManualClock};
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_secs(1), ManualClock::new())?;
    /// assert_eq!(limiter.clock().now(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// What this limiter keeps per key: [`Log`] (exact) or [`Counter`]
    /// (approximate).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use slidelog::CounterMode;
    /// let limiter = slidelog::KeyedCounter::<u64>::counter(10, Duration::from_secs(1), 5)?;
    /// assert_eq!(limiter.algorithm().mode(), CounterMode::Slots(5));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }
}
