//! An exact weighted sliding-window log: budgets of units (tokens, bytes,
//! compute time) per window, with limits up to `u32::MAX`, charges after
//! the fact and reservations.
//!
//! A [`WeightedLog`] keeps one entry per call — its effective time and its
//! units — and a window's **usage** is the sum of the units of the entries
//! live in it at `t` (time `> t - W`). Memory grows with the calls in the
//! window, not with the units: 16 bytes an entry (see "Memory"), where the
//! unit ring of a [`Limiter`](crate::Limiter) keeps 8 bytes per unit of
//! limit and refuses limits above [`MAX_LIMIT`](crate::MAX_LIMIT).
//!
//! ```
//! use std::time::Duration;
//! use slidelog::weighted::WeightedLog;
//!
//! // 5,000,000 tokens a day.
//! let budget = WeightedLog::new(5_000_000, Duration::from_secs(86_400))?;
//! // A request that will use about 2,000 tokens: hold them.
//! let held = budget.reserve_at(2_000, 0).unwrap();
//! // It used 1,200: 800 go back, as if 1,200 had been taken at 0.
//! held.commit_at(1_200, 5);
//! assert_eq!(budget.usage_at(5).used(), 1_200);
//! // A streamed response whose size is known only at the end: charged
//! // whatever the room.
//! let usage = budget.charge_at(4_999_000, 9);
//! assert_eq!((usage.used(), usage.overdrawn()), (5_000_200, 200));
//! // While the window is overdrawn, even a check of nothing answers over.
//! assert!(budget.check_n_at(0, 10).is_err());
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! # The specification
//!
//! Called sequentially with non-decreasing times, a log of policies
//! `(L_i, W_i)` answers every call as this reference does (the *weighted
//! deque*, `tests/weighted.rs`): a deque of entries `(t, units)`, one per
//! recorded call, and
//!
//! * [`check_n_at`](WeightedLog::check_n_at)`(n, now)` admits iff
//!   `used_i(t) + n <= L_i` for **every** policy `i`, where `used_i(t)` sums
//!   the entries with time `> t - W_i`, and then records `(t, n)`; a denial
//!   records nothing. All or nothing across the policies, as the unit
//!   ring's several policies are: a request one policy refuses records
//!   nothing in the others. `n > min L_i` is
//!   [`ExceedsLimit`](crate::DenyReason::ExceedsLimit) (the policy with the
//!   smallest limit); otherwise a denial's
//!   [`retry_after`](crate::Denied::retry_after) is exact — the latest, over
//!   the violated policies, of the time enough of the window's oldest
//!   entries have left it for `n` to fit, counted from `now`, and
//!   [`Denied::policy`](crate::Denied::policy) the first such policy on a
//!   tie — and an admission's [`remaining`](crate::Admitted::remaining) is
//!   the least `L_i - used_i - n` (its [`policy`](crate::Admitted::policy)
//!   the first with that least). A check of `0` units records nothing and
//!   answers over while some window is overdrawn (`used_i > L_i`).
//! * [`peek_n_at`](WeightedLog::peek_n_at) answers as `check_n_at` and
//!   records nothing.
//! * [`charge_at`](WeightedLog::charge_at)`(n, now)` records `(t, n)`
//!   whatever the room — the work already happened — and returns the
//!   [`Usage`] after it: a window may be overdrawn, and remembers it
//!   exactly until those entries leave it.
//! * [`reserve_at`](WeightedLog::reserve_at)`(n, now)` is `check_n_at`
//!   whose admission is held by a [`Reservation`];
//!   [`commit_at`](Reservation::commit_at)`(m, now)` with `m <= n` sets the
//!   reservation's entry to `m` units (every window's usage becomes as if
//!   `m` had been admitted at the reservation's time); with `m > n` it
//!   leaves the `n` in place and charges `m - n` at the commit's time;
//!   [`cancel`](Reservation::cancel) sets it to 0; dropping it keeps all `n`.
//!
//! `t`, the **effective time**, is `max(now, newest)`, where `newest` is
//! the time of the newest recorded entry (the unit ring's clamp,
//! docs/design.md §2): times along the log never decrease, whatever the
//! callers' readings, and every guarantee below is stated on these times
//! ([`Admitted::at`](crate::Admitted::at), [`Usage::at`]). `now` is also
//! clamped to `u64::MAX - W` for the longest window `W`, so that no `t + W`
//! overflows.
//!
//! The excess of a commit is charged at the commit's time because those
//! units were never judged against the window: recording them at the
//! reservation's time would add units to a past other calls were judged
//! on, and let them leave the window earlier than a charge of the same
//! work (docs/design.md §11, "Charges and reservations").
//!
//! # The per-key capacity, and when a denial can be spurious
//!
//! The log holds at most `C` entries ([`WeightedBuilder::capacity`],
//! [`DEFAULT_CAPACITY`] by default; calls at the same effective time share
//! one entry). When recording would make `C + 1`, after dropping what has
//! left the longest window, the two **oldest** entries merge into one
//! stamped with the **newer** one's time. A merge moves units only to a
//! later time, so (docs/design.md §11 has the argument):
//!
//! * **never an over-admission**: at every time and for every policy the
//!   log's usage is at least the exact usage of the same records, so every
//!   admission is one the exact log would make (the property test
//!   `merging_never_admits_what_the_exact_log_denies` checks it, with
//!   capacities of 1 to 6 entries);
//! * **a window that holds recorded calls at fewer than `C` distinct
//!   effective times is counted exactly**, and a denial by it is the exact
//!   log's (a cancelled reservation counts as a call at its time); a
//!   denial's wait is the log's own, never shorter than the exact log's;
//! * otherwise the log over-counts the window by at most the front entry's
//!   units whose calls have left it, and each unit is counted at most until
//!   the time it was merged into (the `C`-th newest call's time when the
//!   merge happened) plus `W_i`.
//!
//! A caller who wants no spurious denial at all gives each key a capacity
//! above the most calls its windows can hold (for one policy, `L` calls
//! when every call takes a unit; `L / n_min` when every call takes at
//! least `n_min` units).
//!
//! # Concurrency: a short critical section
//!
//! One lock per log (per key), held for one call: seek the per-policy
//! sums to `t`, compare, append or add to one entry (a denial's wait, a
//! merge, a purge or a reservation's return touch a few entries and the
//! sums). No lock is shared between keys, and none is held across a clock
//! read, an allocation of another log or a call back into the caller. A
//! thread descheduled while holding it blocks the other calls of that one
//! key: the unit ring's P8 progress does not hold here. Why a lock and not
//! the unit ring's compare-and-swap, what it costs and what to measure, and
//! which loom models (`loom-tests/tests/weighted.rs`) check the critical
//! section: docs/design.md §11.
//!
//! # Memory
//!
//! A log of `P` policies takes `size_of::<WeightedLog>()` inline (120
//! bytes on 64-bit Linux), 32 bytes per policy on the heap (its limit and
//! window, its running sum and first live entry), and 16 bytes per entry
//! (an `(u64 time, u64 units)` pair) in a buffer that grows with the live
//! entries and gives memory back when they fall below a quarter of it:
//! [`WeightedLog::bytes`] reports the total. At one policy of 10^6 units a
//! minute and 100 calls a minute, it is 2,200 bytes (measured: a buffer
//! of 128 entries; 16.5 KB at 1,000 calls a minute); the unit ring for the
//! same limit keeps `8 × 10^6` bytes, 8 MB, per key. For limits of at most
//! 2^20 units where calls take a unit or a few, the ring is smaller (8
//! bytes per unit of limit against 16 per call) and lock-free; for large
//! budgets spent by few heavy calls, this log.
//!
//! # Where each part lives
//!
//! | file | what |
//! |---|---|
//! | `builder.rs` | [`WeightedBuilder`], [`DEFAULT_CAPACITY`], [`WeightedLog::new`] and [`WeightedLog::builder`] |
//! | `log.rs` | [`WeightedLog`]: its calls, the lock, the effective time, the decision |
//! | `reservation.rs` | [`Reservation`]: [`commit_at`](Reservation::commit_at), [`cancel`](Reservation::cancel) |
//! | `usage.rs` | [`Usage`] |
//! | `entries.rs` | the entries, the per-policy running sums, the capacity merge, a reservation's return |

mod builder;
mod entries;
mod log;
mod reservation;
mod usage;

pub use self::builder::{DEFAULT_CAPACITY, WeightedBuilder};
pub use self::log::WeightedLog;
pub use self::reservation::Reservation;
pub use self::usage::Usage;

/// Only under `--cfg slidelog_loom`: the log's deliberately broken variant.
#[cfg(slidelog_loom)]
#[doc(hidden)]
pub mod loom_hooks {
    /// A deliberately broken step of [`super::WeightedLog`] (model checker
    /// only).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub enum WeightedFlaw {
        /// The log as designed.
        #[default]
        None,
        /// Decide and record in two critical sections: a racing call can
        /// record between the two, and both admit against the same room.
        SplitSection,
    }
}
