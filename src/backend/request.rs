//! [`Request`]: what a backend is asked for one key.

/// What a backend is asked for one key: how many units, all or nothing,
/// and whether an admission is recorded (a dry run records nothing: it
/// tells whether the units would fit now).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Backend, KeyedLimiter, Request};
///
/// let limiter = KeyedLimiter::<u64>::new(10, Duration::from_secs(60))?;
/// let look = Backend::judge_now(&limiter, &7, Request::units(4).dry()).unwrap();
/// assert_eq!(look.decision.unwrap().remaining(), 6);
/// let upload = Backend::judge_now(&limiter, &7, Request::units(4)).unwrap();
/// assert_eq!(upload.decision.unwrap().remaining(), 6, "the look recorded nothing");
/// assert_eq!((Request::one().units, Request::one().record), (1, true));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// How many units, all or nothing.
    pub units: u32,
    /// Whether an admission is recorded (`false`: a dry run).
    pub record: bool,
}

impl Request {
    /// One unit, recorded: what [`Backend::check`](crate::Backend::check)
    /// asks.
    ///
    /// ```
    /// assert_eq!(slidelog::Request::one(), slidelog::Request::units(1));
    /// ```
    pub const fn one() -> Request {
        Request::units(1)
    }

    /// `n` units, all or nothing, recorded.
    ///
    /// ```
    /// assert_eq!(slidelog::Request::units(5).units, 5);
    /// ```
    pub const fn units(n: u32) -> Request {
        Request {
            units: n,
            record: true,
        }
    }

    /// The same units as a dry run: judged, recording nothing.
    ///
    /// ```
    /// assert!(!slidelog::Request::units(5).dry().record);
    /// ```
    pub const fn dry(self) -> Request {
        Request {
            record: false,
            ..self
        }
    }
}
