//! Time sources: the [`Clock`] trait, [`QuantaClock`], [`MonotonicClock`],
//! [`ClockChoice`] and [`ManualClock`]; [`SkewReport`]: how far a clock
//! read on different cores steps back.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the [`Clock`] trait (and its impls for references and `Arc`) |
//! | `quanta.rs` | [`QuantaClock`]: the process's one `quanta::Clock`, the inline TSC read and its scaling, [`Upkeep`] |
//! | `upkeep.rs` | the upkeep thread of [`QuantaClock::recent`] clocks |
//! | `monotonic.rs` | [`MonotonicClock`]: the operating system's monotonic clock |
//! | `choice.rs` | [`ClockChoice`]: the TSC clock where its cores agree, else the monotonic clock |
//! | `manual.rs` | [`ManualClock`]: a clock that moves when told |
//! | `skew.rs` | [`SkewReport`], [`Skew`]: measuring how far a clock steps back between cores |
//!
//! A clock only reads the time: a limiter reads it once per request and
//! judges at that reading (floored and clamped by the limiter, never here).

mod choice;
mod manual;
mod monotonic;
mod quanta;
#[cfg(not(slidelog_loom))]
mod skew;
#[cfg(not(slidelog_loom))]
mod upkeep;

pub use choice::ClockChoice;
pub use manual::ManualClock;
pub use monotonic::MonotonicClock;
pub use quanta::{QuantaClock, Upkeep};
#[cfg(not(slidelog_loom))]
pub use skew::{PairSkew, Skew, SkewReport};

/// A source of time: nanoseconds since an arbitrary, fixed origin.
///
/// The limiter only ever compares readings of one clock, so the origin does
/// not matter.
///
/// **What the guarantees hold in: the clock's own time line.** At most
/// `limit` admissions in any window `(t - W, t]` is a statement about the
/// readings the admissions were made at. A reading that goes backwards
/// cannot break it: the ring clamps each admission to the newest one
/// already recorded. In real time it holds as well when the clock is
/// monotonic *across threads* (a reading that happens after another is
/// never smaller) and runs at the real rate: [`MonotonicClock`] (the
/// operating system's monotonic clock) is.
///
/// A TSC clock ([`QuantaClock`]) reads each core's own counter, and on some
/// hosts the cores' counters disagree by a constant offset (measure it with
/// [`QuantaClock::measure_skew`]). With cores at most `S` apart, an
/// admission made on a core that lags by `S` is recorded `S` early and
/// leaves the window `S` early for the other cores: a real window
/// `(τ - W, τ]` holds the admissions of clock readings in a span of
/// `W + S`, i.e. at most `limit` plus those of `S` more of clock time
/// (a second full `limit` only if `S` approaches `W`). Threads on a core
/// that runs `S` ahead see each admission leave up to `S` late, and are
/// denied up to `S` past the window. [`QuantaClock::checked`] and
/// [`ClockChoice::within`] refuse a TSC clock whose measured skew is above
/// a bound.
///
/// # Examples
///
/// A clock of your own, e.g. from a timestamp your server already holds:
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Clock, Limiter};
///
/// #[derive(Debug)]
/// struct Fixed(u64);
/// impl Clock for Fixed {
///     fn now(&self) -> u64 { self.0 }
/// }
///
/// let limiter = Limiter::with_clock(1, Duration::from_secs(1), Fixed(42))?;
/// assert_eq!(limiter.check().unwrap().at(), 42);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}
