//! [`KeyedLimiter`]: one exact ring per key on a `papaya` map, with idle-key
//! eviction and a hard cap on live keys.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use papaya::Guard;

use crate::algorithm::{Algorithm, Counter, Log};
use crate::clock::{Clock, QuantaClock};
use crate::counter::CounterMode;
use crate::decision::{Admitted, Denied, DenyReason};
use crate::decision::{DecidedBy, PolicySet, PolicyStates};
use crate::error::ConfigError;
use crate::floor::Floor;
use crate::grace::Entered;
use crate::key_size::KeySize;
use crate::policy::Policy;
use crate::quota::Quota;
use crate::ring::Shape;
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

mod hasher;
mod pinned;
mod reconfig;
mod state;

use hasher::{MapHasher, SipKeys};
pub use pinned::PinnedKeys;
use state::{KeyState, Keys, Map, Words, with_map};

/// The guard a keyed call pins the map with: its own (`None`), or one a
/// [`PinnedKeys`] holds for the calls it makes.
type Held<'p, 'g> = Option<&'p papaya::LocalGuard<'g>>;

/// The guard a keyed call runs under: `held` (a [`PinnedKeys`]'s, taken
/// from this map) if given, else one of `map` pinned for the call and kept
/// in `pinned` (a `let` of the caller's, so that it lives through the
/// call). A macro, not a function taking the call as a closure: with the
/// decision inside a closure, the unpinned keyed rows of `side_by_side`
/// read 5-8% slower (BENCHMARKS.md, "Where the time goes", session 40).
macro_rules! guard_for {
    ($held:expr, $map:expr, $pinned:ident) => {
        match $held {
            Some(guard) => guard,
            None => {
                $pinned = $map.guard();
                &$pinned
            }
        }
    };
}

/// What `KeyedLimiter::check_then_peek` found on a key's state (with
/// several policies, each one's state is written where the caller asked).
#[allow(dead_code)] // read by the tower layer only
pub(crate) enum Layered {
    /// Admitted, with the wait until `remaining` grows (zero when unknown:
    /// `remaining + 1` units can never fit).
    Admitted(Admitted, Duration),
    /// Denied by the key's state.
    Denied(Denied),
}

/// The most keys a [`KeyedLimiter`] holds by default: as many as fit in
/// 256 MiB of rings and map entries, at most 1,048,576 (and at least one).
/// No floor overrides the budget: at L = 2^20 (8 MiB per ring) that is 31
/// keys (a floor of 1,024 keys would allow 8 GiB).
const DEFAULT_BUDGET_BYTES: usize = 256 << 20;
const DEFAULT_MAX_KEYS_CAP: usize = 1 << 20;

/// Bytes of papaya's table per key (its slots at its load factor: a
/// metadata byte and an entry pointer each), measured with a counting
/// allocator at 100k `u64` keys: what a key costs beyond its entry and the
/// words boxed outside it (see `KeyedLimiter::bytes_per_key`).
const TABLE_BYTES_PER_KEY: usize = 24;

/// An automatic sweep runs after this many new keys, or after half the live
/// keys' worth, whichever is more (so sweeping costs O(1) amortised per
/// new key).
const SWEEP_MIN_INSERTS: usize = 64;

/// The counter's slots when a builder switches to it without saying.
const DEFAULT_SLOTS: u32 = 10;

/// Chooses a key's policies when it is first seen (see
/// [`KeyedBuilder::quota`]).
type QuotaFn<K> = Arc<dyn Fn(&K) -> Option<Quota> + Send + Sync>;

/// Housekeeping state, written only when keys come and go: its own cache
/// line so it does not bounce the read-mostly fields every check reads.
#[derive(Default)]
struct Housekeeping {
    /// Keys in the map plus insertions in flight (each holds a reservation).
    live: AtomicUsize,
    /// Their bytes: `bytes_per_key` plus each key's heap bytes.
    bytes: AtomicUsize,
    /// New keys since the last sweep.
    inserts: AtomicUsize,
    /// A sweep is running (one at a time).
    sweeping: AtomicBool,
    /// When the last sweep started (clock nanoseconds).
    last_sweep: AtomicU64,
    /// No live key can become idle before this time (a lower bound found by
    /// the last sweep: admissions only push idle times later, and keys
    /// created since then become idle later still).
    next_idle: AtomicU64,
    /// New-key requests refused at the cap since the last sweep.
    refused: AtomicUsize,
    /// Keys evicted since the limiter was built.
    evicted: AtomicU64,
}

/// An exact sliding-window-log limiter per key: at most `limit` admissions
/// of each key in any window `(t - W, t]`.
///
/// Each key owns one ring of `limit` 8-byte slots (plus an 8-byte head),
/// created on first touch in a [`papaya`] concurrent map; lookups are
/// lock-free. Concurrent first requests for one key share one ring.
///
/// **Eviction.** A key whose newest admission is older than the window plus
/// an idle margin (default: one more window) is indistinguishable from an
/// absent key, so it can be dropped without changing any decision. Its ring
/// is closed first (a compare-and-swap that makes every late admission on it
/// fail and look the key up again), then removed. Sweeps run inside the
/// calls that create keys, amortised O(1) per new key, once the live keys
/// fill half of `max_keys` or half of the byte budget (below that, idle keys
/// stay: a steady population is not evicted and re-created), and on demand
/// with [`retain_recent`](Self::retain_recent); they judge idleness by the
/// limiter's own clock, never by a caller's reading.
///
/// **Stale readings.** A caller may hold a clock reading for any time (a
/// thread descheduled between reading the clock and checking). Before a
/// sweep closes a key's state it raises the limiter's *eviction floor* to
/// the time from which that state's admissions no longer count, and every
/// check is judged at `max(now, floor)`: a reading older than an eviction is
/// admitted at the floor (see [`Admitted::at`]) instead of next to history
/// the fresh state cannot see, so no window of any key ever holds more than
/// `limit` admissions. The floor trails the clock by at least the idle
/// margin; for current readings it is one load of a rarely written word.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeyedLimiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(100), clock.clone())?;
/// limiter.check_at(&7, 0).unwrap();
/// clock.set(250);
/// assert_eq!(limiter.retain_recent(), 1); // idle: window 100 + margin 100
/// // A reading taken at 50, before the eviction, is judged at the floor
/// // (100, where the evicted admission at 0 has left the window).
/// assert_eq!(limiter.check_at(&7, 50).unwrap().at(), 100);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
///
/// **Memory bound.** At most `max_keys` keys live at once (default: as many
/// as fit in 256 MiB, see [`KeyedBuilder::max_keys`]). A new key that would
/// exceed it is denied with [`DenyReason::KeyCapacity`] when no idle key can
/// be evicted; existing keys are never evicted while they hold admissions in
/// their window. A byte budget ([`KeyedBuilder::max_bytes`], default
/// 256 MiB) counts every live key's ring, map entry **and the key's own
/// heap bytes** ([`KeySize`]), so memory stays within it however long the
/// keys are (an attacker's long keys fill it sooner, never past it).
///
/// **Algorithm.** The fourth type parameter says what each key keeps: the
/// exact log ([`Log`], the default) or the approximate sliding-window
/// counter ([`Counter`]: `8 (N + 3)` bytes per key whatever the limit; see
/// [`KeyedCounter`] and the builder's
/// [`sliding_counter`](KeyedBuilder::sliding_counter)). Eviction, the key
/// cap and every method work the same for both.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeyedLimiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedLimiter::<String, ManualClock>::with_clock(2, Duration::from_secs(1), clock.clone())?;
/// assert!(limiter.check("alice").is_ok());
/// assert!(limiter.check("alice").is_ok());
/// assert!(limiter.check("alice").is_err());
/// assert!(limiter.check("bob").is_ok()); // every key has its own log
///
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check("alice").is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct KeyedLimiter<K, C: Clock = QuantaClock, S = RandomState, A = Log> {
    map: Keys<K, S>,
    algorithm: A,
    /// Per-key policies, if the builder chose them.
    quota: Option<QuotaFn<K>>,
    clock: C,
    max_keys: usize,
    /// The memory budget: rings, map entries and key heap bytes.
    max_bytes: usize,
    idle_margin: u64,
    /// The eviction floor: every check judges at `max(now, floor)`, so no
    /// admission overlaps the history of an evicted key (see
    /// [`crate::floor`]). Read by every check, written only by sweeps that
    /// evict: it shares the read-mostly line with the fields above.
    floor: Floor,
    house: CachePadded<Housekeeping>,
    /// Run-time changes of the policies (`keyed/reconfig.rs`).
    config: reconfig::Reconfig<K>,
    /// The `limiter` label of its metrics.
    name: crate::observe::Name,
}

impl<K: Hash + Eq + KeySize> KeyedLimiter<K, QuantaClock, RandomState> {
    /// A keyed limiter admitting at most `limit` requests per `window` for
    /// each key, on the default [`QuantaClock`], with default options.
    ///
    /// # Errors
    ///
    /// As for [`Limiter::new`](crate::Limiter::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(100, Duration::from_secs(1))?;
    /// assert!(limiter.check(&42).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(limit: u32, window: Duration) -> Result<Self, ConfigError> {
        KeyedLimiter::builder(limit, window).build()
    }

    /// A builder for the options: `max_keys`, idle margin, initial capacity,
    /// clock and hasher.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64>::builder(10, Duration::from_secs(1))
    ///     .max_keys(10_000)
    ///     .idle_margin(Duration::from_secs(2))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(limiter.max_keys(), 10_000);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn builder(limit: u32, window: Duration) -> KeyedBuilder<K, QuantaClock, RandomState> {
        let hasher = RandomState::new();
        KeyedBuilder {
            policies: vec![Policy::new(limit, window)],
            quota: None,
            max_keys: None,
            max_bytes: None,
            idle_margin: None,
            capacity: 0,
            clock: QuantaClock::new(),
            sip: Some(SipKeys::from_seed(&hasher)),
            hasher,
            mode: CounterMode::Slots(DEFAULT_SLOTS),
            name: crate::observe::Name::default(),
            _marker: core::marker::PhantomData,
        }
    }
}

impl<K: Hash + Eq + KeySize, C: Clock> KeyedLimiter<K, C, RandomState> {
    /// A keyed limiter on the given clock.
    ///
    /// # Errors
    ///
    /// As for [`Limiter::new`](crate::Limiter::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let keyed = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_secs(1), clock.clone())?;
    /// assert!(keyed.check(&7).is_ok());
    /// assert!(keyed.check(&7).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn with_clock(limit: u32, window: Duration, clock: C) -> Result<Self, ConfigError> {
        KeyedLimiter::builder(limit, window).clock(clock).build()
    }
}

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
    policies: Vec<Policy>,
    quota: Option<QuotaFn<K>>,
    max_keys: Option<usize>,
    max_bytes: Option<usize>,
    idle_margin: Option<Duration>,
    capacity: usize,
    clock: C,
    hasher: S,
    /// The keys of the default hasher's function, inline, drawn from its
    /// `RandomState` (`keyed/hasher.rs`); `None` once a hasher is chosen.
    sip: Option<SipKeys>,
    /// The counter's mode (unused by the log).
    mode: CounterMode,
    /// The `limiter` label of its metrics.
    name: crate::observe::Name,
    _marker: core::marker::PhantomData<fn(K) -> A>,
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
    /// strings and IP addresses; BENCHMARKS.md, "Where the time goes",
    /// session 38). A `RandomState` given here hashes with std's own code.
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

impl<K, C, S, A> KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + KeySize,
    C: Clock,
    S: BuildHasher,
    A: Algorithm,
{
    /// Checks one request for `key` now. Keys may be borrowed forms, as with
    /// std maps (`&str` for `String` keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.check("10.0.0.1").is_ok());
    /// assert!(limiter.check("10.0.0.1").is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_when(
            None,
            key,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// Checks `n` units for `key` now, all or nothing (see
    /// [`Limiter::check_n`](crate::Limiter::check_n), and its cost: a
    /// slot written per unit admitted with the exact log; one step with
    /// the counter).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(1))?;
    /// assert_eq!(limiter.check_n(&1, 3).unwrap().remaining(), 2);
    /// assert!(limiter.check_n(&1, 3).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_when(
            None,
            key,
            n,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// Checks one request for `key` at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.check_at(&1, 0).is_ok());
    /// assert_eq!(limiter.check_at(&1, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn check_at<Q>(&self, key: &Q, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_when(None, key, || now)
    }

    /// Checks `n` units for `key` at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{DenyReason, KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(2, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.check_n_at(&1, 2, 0).is_ok());
    /// assert!(matches!(
    ///     limiter.check_n_at(&1, 3, 0).unwrap_err().reason(),
    ///     DenyReason::ExceedsLimit { .. }
    /// ));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_when(None, key, n, || now)
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// the key's `remaining` next grows, from the same lookup and (with
    /// the exact log) the same pass as the count: the IETF `RateLimit`
    /// field's `t`, Envoy's `duration_until_reset` (see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)).
    /// Zero when it never grows by waiting (`n == 0` on an empty window).
    /// The approximate counter finds it with a dry run after its check.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(10, Duration::from_secs(60))?;
    /// let (admitted, grows) = limiter.check_n_with_growth("alice", 3)?;
    /// assert_eq!(admitted.remaining(), 7);
    /// // Alice's first admissions are the oldest: they leave in a minute.
    /// assert!(grows > Duration::from_secs(59) && grows <= Duration::from_secs(60));
    /// let header = format!("\"default\";r={};t={}", admitted.remaining(), grows.as_secs().max(1));
    /// # let _ = header;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth<Q>(&self, key: &Q, n: u32) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_growing_when(None, key, n, || self.clock.now())
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(100), ManualClock::new())?;
    /// let (admitted, grows) = limiter.check_n_with_growth_at(&1, 2, 10)?;
    /// assert_eq!((admitted.remaining(), grows), (1, Duration::from_nanos(100)));
    /// let (admitted, grows) = limiter.check_n_with_growth_at(&1, 1, 40)?;
    /// assert_eq!((admitted.remaining(), grows), (0, Duration::from_nanos(70)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn check_n_with_growth_at<Q>(
        &self,
        key: &Q,
        n: u32,
        now: u64,
    ) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_growing_when(None, key, n, || now)
    }

    /// [`check_n_with_growth`](Self::check_n_with_growth) at the time
    /// `read` returns (read once, after the lookup).
    #[inline(always)]
    fn check_n_growing_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<(Admitted, Duration), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            |algorithm, words, quota, now, floor| {
                algorithm.check_n_growing(words, quota, n, now, floor)
            },
            // An absent key asked for no units: an empty window.
            |admitted| (admitted, Duration::ZERO),
        )
    }

    /// One unit for `key` at the time `read` gives: `check_n_when` of 1,
    /// through the one-unit path ([`Algorithm::check_one`]), whose outcome
    /// never joins the weighted path's.
    #[inline(always)]
    fn check_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        read: impl FnOnce() -> u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.check_one(words, quota, now, floor),
            |admitted| admitted,
        )
    }

    /// `n` units for `key` at the time `read` returns (read once, after the
    /// key's lookup: see [`decide_at`](Self::decide_at)).
    #[inline(always)]
    fn check_n_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.check(words, quota, n, now, floor),
            |admitted| admitted,
        )
    }

    /// One unit for `key` at the time `read` gives (called after the key's
    /// lookup, as [`check`](Self::check) reads its clock) and, if admitted,
    /// how long until its `remaining` grows — read with the count (one
    /// policy), or the wait of a dry run of `remaining + 1` units on the
    /// same state (zero if that many can never fit): all from one lookup of
    /// the key. The tower layer's IETF `t` is that wait.
    ///
    /// With several policies, each policy's state (for the headers) is
    /// written in `states`, for an admission and for a denial by the state
    /// (`Ok(Layered::Denied(..))`) alike: in the verdict's own field, not
    /// copied through the return values. An `Err` is a denial without a
    /// state (a key refused by the budget).
    ///
    /// The policies of the state that decided are written in `decided`:
    /// [`DecidedBy::Base`] for the builder's default shape (a byte: the
    /// state's quota pointer is `None`), else the key's own shape's,
    /// whether a quota or a reconfiguration gave them (a key the walk has
    /// not moved yet is decided, and named, by its old policies).
    #[allow(dead_code)] // read by the tower layer only
    #[inline]
    pub(crate) fn check_then_peek<Q>(
        &self,
        key: &Q,
        read: impl FnOnce() -> u64,
        states: &core::cell::Cell<Option<PolicyStates>>,
        decided: &core::cell::Cell<DecidedBy>,
    ) -> Result<Layered, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            None,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| {
                // With several policies each one's state is written in
                // `states` (on an admission) by the same pass as the count.
                let growing = algorithm.check_growing(words, quota, now, floor, states)?;
                // The state answered: its shape decided.
                decided.set(match quota {
                    None => DecidedBy::Base,
                    Some(shape) => DecidedBy::Policies(PolicySet::new(shape.policies())),
                });
                let admitted = match growing.decision {
                    Ok(admitted) => admitted,
                    Err(denied) => {
                        if let Some(found) = algorithm.policy_states(words, quota, now, floor) {
                            states.set(Some(found));
                        }
                        return Some(Ok(Layered::Denied(denied)));
                    }
                };
                let wait = match growing.wait {
                    // Found with the count: no second pass.
                    Some(nanos) => Duration::from_nanos(nanos),
                    None => algorithm.growth_by_dry_run(words, quota, &admitted, now, floor),
                };
                Some(Ok(Layered::Admitted(admitted, wait)))
            },
            |admitted| Layered::Admitted(admitted, Duration::ZERO),
        )
    }

    /// Admits one request for `key` now or denies it, like
    /// [`check`](Self::check) but without counting
    /// [`remaining`](Admitted::remaining) (see [`Limiter::admit`](crate::Limiter::admit)):
    /// the same decision, recorded the same way, on the shortest path.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.admit("alice").is_ok());
    /// assert!(limiter.admit("alice").is_err());
    /// assert!(limiter.admit("bob").is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_when(
            None,
            key,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// [`admit`](Self::admit) at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.admit_at(&1, 0).is_ok());
    /// assert_eq!(limiter.admit_at(&1, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn admit_at<Q>(&self, key: &Q, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_when(None, key, || now)
    }

    /// Admits `n` units for `key` now, all or none, like
    /// [`check_n`](Self::check_n) but without counting
    /// [`remaining`](Admitted::remaining) (see
    /// [`Limiter::admit_n`](crate::Limiter::admit_n)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<String>::new(5, Duration::from_secs(60))?;
    /// assert!(limiter.admit_n("alice", 4).is_ok());
    /// assert!(limiter.admit_n("alice", 2).is_err()); // one left: nothing taken
    /// assert!(limiter.admit_n("alice", 1).is_ok());
    /// assert!(limiter.admit_n("bob", 5).is_ok());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    #[inline]
    pub fn admit_n<Q>(&self, key: &Q, n: u32) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_n_when(
            None,
            key,
            n,
            #[inline(always)]
            || self.clock.now(),
        )
    }

    /// [`admit_n`](Self::admit_n) at `now` (clock nanoseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(3, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.admit_n_at(&1, 3, 0).is_ok());
    /// assert_eq!(limiter.admit_n_at(&1, 2, 4).unwrap_err().retry_after_nanos(), 6);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a denied request must not go ahead: use the result"]
    pub fn admit_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.admit_n_when(None, key, n, || now)
    }

    /// [`admit_n`](Self::admit_n) at the time `read` returns.
    #[inline(always)]
    fn admit_n_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        n: u32,
        read: impl FnOnce() -> u64,
    ) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            n,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.admit_n(words, quota, n, now, floor),
            |_| (),
        )
    }

    /// [`admit`](Self::admit) at the time `read` returns (read once, after
    /// the key's lookup: see [`decide_at`](Self::decide_at)).
    #[inline(always)]
    fn admit_when<Q>(
        &self,
        held: Held<'_, '_>,
        key: &Q,
        read: impl FnOnce() -> u64,
    ) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_at(
            held,
            key,
            1,
            read,
            #[inline(always)]
            |algorithm, words, quota, now, floor| algorithm.admit(words, quota, now, floor),
            |_| (),
        )
    }

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
    fn decide_at<Q, R>(
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
    fn decide_in<W: Words, Q, R>(
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
    fn settle<'g, W: Words, Q>(
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

    /// What [`check`](Self::check) would answer for `key` now, recording
    /// nothing and creating no key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<String>::new(1, Duration::from_secs(60))?;
    /// assert!(limiter.peek("alice").is_ok());
    /// assert!(limiter.is_empty(), "a peek creates no key");
    /// limiter.check("alice").unwrap();
    /// assert!(limiter.peek("alice").is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, 1, self.clock.now())
    }

    /// What [`check_n`](Self::check_n) would answer for `key` now,
    /// recording nothing and creating no key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// let limiter = KeyedLimiter::<u64>::new(5, Duration::from_secs(60))?;
    /// assert_eq!(limiter.peek_n(&1, 5).unwrap().remaining(), 0);
    /// assert!(limiter.peek_n(&1, 6).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    #[must_use = "a peek only answers; it admits nothing"]
    pub fn peek_n<Q>(&self, key: &Q, n: u32) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_n_at(key, n, self.clock.now())
    }

    /// What [`check_n_at`](Self::check_n_at) would answer for `key`,
    /// recording nothing and creating no key.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedLimiter, ManualClock};
    ///
    /// let limiter = KeyedLimiter::<u64, ManualClock>::with_clock(1, Duration::from_nanos(10), ManualClock::new())?;
    /// assert!(limiter.peek_n_at(&1, 1, 0).is_ok());
    /// assert!(limiter.is_empty());
    /// limiter.check_at(&1, 0).unwrap();
    /// assert_eq!(limiter.peek_n_at(&1, 1, 3).unwrap_err().retry_after_nanos(), 7);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn peek_n_at<Q>(&self, key: &Q, n: u32, now: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.peek_held(None, key, n, now)
    }

    /// [`peek_n_at`](Self::peek_n_at), under the guard `held` if given.
    fn peek_held<Q>(
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
    fn peek_state<W: Words>(
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
    fn insert<'g, W: Words>(
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

    /// Whether the live keys fill half the key cap or half the byte budget:
    /// automatic sweeps run only then. Below it, idle keys stay (memory is
    /// bounded by the caps either way), so a steady population of keys that
    /// come back after more than the window plus the idle margin is not
    /// evicted and re-created over and over (each re-creation counted as a
    /// new key that paid for the next sweep); a flood of new keys reaches
    /// half the cap and is swept from there on.
    #[inline]
    fn under_pressure(&self, live: usize) -> bool {
        // Relaxed: a heuristic.
        live >= self.max_keys / 2 || self.house.bytes.load(Ordering::Relaxed) >= self.max_bytes / 2
    }

    /// What a live key costs the budget: its state and map entry, the
    /// key's own heap bytes, and a per-key quota's description (counted for
    /// each key that holds it, though clones share one).
    #[inline]
    fn cost(&self, key: &K, quota: Option<&Shape>) -> usize {
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
    fn quota_for(&self, key: &K) -> Option<Arc<Shape>> {
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
    fn reserve(&self, cost: usize) -> bool {
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
    fn release(&self, cost: usize) {
        // Relaxed: see `reserve`.
        self.house.live.fetch_sub(1, Ordering::Relaxed);
        self.house.bytes.fetch_sub(cost, Ordering::Relaxed);
    }

    /// Removes `key` if it still maps to the closed `ring` (whoever removes
    /// it releases its place and counts the eviction); whether this call
    /// removed it.
    fn unlink<Q, W: Words>(
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
    fn sweep(&self, at_cap: bool) -> usize {
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
    fn sweep_exclusive(&self, now: u64) -> Option<usize> {
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
    fn evict_idle(&self, now: u64) -> (usize, u64) {
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
    fn observe_sweep(&self, evicted: usize) {
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
    fn bytes_per_key_for(words: usize, width: usize) -> usize {
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
    #[allow(dead_code)] // read by the tower layer only
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
    fn observe_live(&self) {
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
    #[allow(dead_code)] // read by the tower layer only
    pub(crate) fn has_quotas(&self) -> bool {
        self.quota.is_some() || self.config.has_quotas()
    }

    /// See `generation` (keyed/reconfig.rs); 0 for a keyed counter.
    #[allow(dead_code)] // read by the tower layer only
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

/// A [`KeyedLimiter`] that keeps the approximate sliding-window
/// [`Counter`] per key: `8 (N + 3)` bytes per key whatever the limit.
///
/// Build one with [`KeyedCounter::counter`], [`KeyedCounter::counter_with_clock`]
/// or the builder's [`sliding_counter`](KeyedBuilder::sliding_counter) /
/// [`two_window`](KeyedBuilder::two_window). Everything else (eviction,
/// `max_keys`, the tower layer, `until_ready`) works as for the log.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeyedCounter, ManualClock};
///
/// let clock = ManualClock::new();
/// let per_tenant = KeyedCounter::<String, ManualClock>::counter_with_clock(
///     1_000_000, Duration::from_secs(60), 60, clock.clone())?;
/// assert!(per_tenant.check_n("acme", 1_000_000).is_ok());
/// let denied = per_tenant.check("acme").unwrap_err();
/// assert_eq!(denied.retry_after(), Duration::from_secs(60));
/// clock.advance(denied.retry_after());
/// assert!(per_tenant.check("acme").is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub type KeyedCounter<K, C = QuantaClock, S = RandomState> = KeyedLimiter<K, C, S, Counter>;

impl<K: Hash + Eq + KeySize> KeyedLimiter<K, QuantaClock, RandomState, Counter> {
    /// A keyed counter with `slots` sub-windows per key, on the default
    /// clock, with default options (see [`KeyedLimiter::builder`] for the
    /// rest: [`sliding_counter`](KeyedBuilder::sliding_counter)).
    ///
    /// # Errors
    ///
    /// As for [`SlidingCounter::new`](crate::SlidingCounter::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::KeyedCounter;
    /// let limiter = KeyedCounter::<u64>::counter(1_000, Duration::from_secs(1), 10)?;
    /// assert_eq!(limiter.check_n(&1, 600).unwrap().remaining(), 400);
    /// assert!(limiter.check_n(&1, 600).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn counter(limit: u32, window: Duration, slots: u32) -> Result<Self, ConfigError> {
        KeyedLimiter::builder(limit, window)
            .sliding_counter(slots)
            .build()
    }
}

impl<K: Hash + Eq + KeySize, C: Clock> KeyedLimiter<K, C, RandomState, Counter> {
    /// A keyed counter with `slots` sub-windows per key, on the given clock.
    ///
    /// # Errors
    ///
    /// As for [`SlidingCounter::new`](crate::SlidingCounter::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::{KeyedCounter, ManualClock};
    /// let limiter = KeyedCounter::<u64, ManualClock>::counter_with_clock(2, Duration::from_secs(1), 4, ManualClock::new())?;
    /// assert!(limiter.check_n(&9, 2).is_ok());
    /// assert!(limiter.check(&9).is_err());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn counter_with_clock(
        limit: u32,
        window: Duration,
        slots: u32,
        clock: C,
    ) -> Result<Self, ConfigError> {
        KeyedLimiter::builder(limit, window)
            .sliding_counter(slots)
            .clock(clock)
            .build()
    }
}

impl<K, C, S, A> fmt::Debug for KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq,
    C: Clock + fmt::Debug,
    S: BuildHasher,
    A: Algorithm,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("algorithm", &self.algorithm)
            .field("limit", &self.algorithm.limit())
            .field(
                "window",
                &Duration::from_nanos(self.algorithm.window_nanos()),
            )
            .field("max_keys", &self.max_keys)
            .field("keys", &with_map!(&self.map, map => map.len()))
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// What [`KeyedLimiter::settle`] tells the lookup: ask this state, or the
/// answer itself.
enum Next<'g, W> {
    Ask(&'g KeyState<W>),
    Fresh(Admitted),
    Deny(Denied),
}
