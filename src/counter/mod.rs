//! [`SlidingCounter`]: the approximate sliding-window counter, for limits too
//! large for an exact log.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the limits ([`MAX_COUNTER_LIMIT`], [`MAX_SLOTS`]), the word's count width, `CLOSED`, [`CounterMode`] |
//! | `config.rs` | `CounterConfig`: validated limit, window and mode; the word codec; sub-window numbers and starts (`absolute`, `start`, `locate`); `Divider` |
//! | `state.rs` | `CounterRef`: one counter state (head, its absolute sub-window, the summary, the archive): `check`, `peek`, the estimate, `next_fit`, `close_if_idle` |
//! | `sliding.rs` | [`SlidingCounter`]: the type, its constructors, limit and [`reconfigure`](SlidingCounter::reconfigure), accessors, the model checker's hooks |
//! | `calls.rs` | [`SlidingCounter`]'s decisions: `check`, `admit`, `peek` with their `_n`, `_at` and growth forms |
//! | `tests.rs` | unit tests of the codec, the state and the public calls |
//!
//! A keyed counter ([`KeyedCounter`](crate::KeyedCounter)) holds one
//! `CounterRef` state per key (`algorithm/per_key.rs`) and shares one
//! `CounterConfig`.
//!
//! # Time
//!
//! The counter judges a request read at `asked` at `max(asked, floor)`
//! (`CounterRef::check`, `CounterRef::peek`; `floor` is a keyed counter's
//! eviction floor, [`crate::floor`], and 0 for a [`SlidingCounter`]), and
//! a denial's wait counts from `asked`. A reading before head's sub-window
//! counts in head's sub-window, at its start (`CounterConfig::locate`: the
//! counter's clamp). The reading is not clamped from above: a sub-window
//! number is taken of `min(t, 2^63 - 1)` (`CounterConfig::absolute`).

/// The largest limit of a [`SlidingCounter`]: counts are 24-bit fields.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{SlidingCounter, MAX_COUNTER_LIMIT};
/// assert!(SlidingCounter::new(MAX_COUNTER_LIMIT, Duration::from_secs(1), 10).is_ok());
/// assert!(SlidingCounter::new(MAX_COUNTER_LIMIT + 1, Duration::from_secs(1), 10).is_err());
/// ```
pub const MAX_COUNTER_LIMIT: u32 = (1 << COUNT_BITS) - 1;

/// The most sub-window slots of a [`SlidingCounter`].
///
/// ```
/// use std::time::Duration;
/// use slidelog::{SlidingCounter, MAX_SLOTS};
/// assert!(SlidingCounter::new(10, Duration::from_secs(3600), MAX_SLOTS).is_ok());
/// ```
pub const MAX_SLOTS: u32 = 1 << 16;

/// Word codec: `epoch << count_bits | count`, with `count_bits` just wide
/// enough for `limit + 1` (so a count never reaches the all-ones field and
/// [`CLOSED`] is never a live word), and the epoch (the sub-window number
/// `t / width`) in the remaining 39 to 62 bits, compared with wrapping
/// arithmetic. Small limits leave room for long epochs: at L = 100 the epoch
/// has 57 bits. Counts are at most 24 bits ([`MAX_COUNTER_LIMIT`]).
const COUNT_BITS: u32 = 24;

/// A closed counter (a keyed counter being evicted): every check on it fails
/// and looks the key up again.
pub(crate) const CLOSED: u64 = u64::MAX;

/// How the counter estimates the requests in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterMode {
    /// `N` sub-window counters of width `W / N`; the estimate is the sum of
    /// the last `N` (the current one included).
    Slots(u32),
    /// Two fixed windows of width `W`: the previous window's count scaled by
    /// how much of it still overlaps `(t - W, t]`, plus the current count.
    TwoWindow,
}

mod calls;
mod config;
mod sliding;
mod state;
#[cfg(all(test, not(slidelog_loom)))]
mod tests;

// For the keyed counter (`algorithm/per_key.rs`), which the model checker
// does not build.
#[cfg_attr(slidelog_loom, allow(unused_imports))]
pub(crate) use config::CounterConfig;
pub use sliding::SlidingCounter;
#[cfg_attr(slidelog_loom, allow(unused_imports))]
pub(crate) use state::CounterRef;
