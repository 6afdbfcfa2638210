//! [`KeyedLimiter`]: one exact ring per key on a `papaya` map, with idle-key
//! eviction and a hard cap on live keys.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`KeyedLimiter`] (its fields, constructors), [`KeyedCounter`], the guard a call pins |
//! | `builder.rs` | [`KeyedBuilder`]: policies, per-key quotas, key cap and byte budget, clock, hasher |
//! | `calls.rs` | the `check`, `admit` and `peek` families on one key |
//! | `lookup.rs` | a key's lookup (`decide_at`, `settle`), a new key's insertion, `peek`'s dry runs |
//! | `evict.rs` | keys out: the byte budget, `unlink`, idle sweeps, `remove`, `reset` |
//! | `info.rs` | sizes, policies, name, window, clock |
//! | `snapshot.rs` | snapshot and restore (feature `serde`) |
//! | `state.rs` | a key's state and where its words live |
//! | `hasher.rs` | the default hasher (SipHash keys kept inline) |
//! | `pinned.rs` | [`PinnedKeys`]: many calls under one pinned guard |
//! | `reconfig.rs` | `reconfigure`: moving every key to new policies |
//! | `tests.rs` | unit tests: `peek_at` against `peek` |

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
/// read 5-8% slower (BENCHMARKS.md, "Where the time goes").
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

mod builder;
mod calls;
mod evict;
mod info;
mod lookup;
#[cfg(feature = "serde")]
mod snapshot;
#[cfg(all(test, not(slidelog_loom)))]
mod tests;

pub use builder::KeyedBuilder;

/// What `KeyedLimiter::check_then_peek` found on a key's state (with
/// several policies, each one's state is written where the caller asked).
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
