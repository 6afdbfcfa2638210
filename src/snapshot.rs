//! Snapshot and restore (feature `serde`): a limiter's live admissions as a
//! serde value, anchored to wall-clock time, so that a restarted process is
//! not a free burst.
//!
//! A limiter's clock counts nanoseconds from its own origin (for
//! [`QuantaClock`](crate::QuantaClock), [`QuantaClock::ORIGIN`](crate::QuantaClock::ORIGIN)
//! before it was created), which means nothing to another process. A snapshot therefore
//! records each admission as nanoseconds since the Unix epoch, converted
//! through an [`Anchor`] (a clock reading and the wall time it was taken
//! at); restoring converts back through the new process's anchor. Restored
//! admissions are judged exactly as if the limiter had never stopped: those
//! that no policy counts any more are dropped, the rest fill the ring. One
//! dated after the restore itself (a snapshot from a host whose wall clock
//! ran ahead, or a corrupt file) counts as made at the restore, which denies
//! no less than the truth and for at most one window.
//!
//! ```
//! use std::time::Duration;
//! use slidelog::{Limiter, ManualClock};
//! use slidelog::snapshot::Anchor;
//!
//! let old = Limiter::builder(3, Duration::from_secs(10)).clock(ManualClock::new()).build()?;
//! old.check_n_at(3, 0).unwrap();
//! // Process one, at its clock's 4 s, which was Unix time 1_700_000_000 s.
//! let snapshot = old.snapshot_at(Anchor::new(4_000_000_000, 1_700_000_000_000_000_000));
//! let json = serde_json::to_string(&snapshot).unwrap();
//!
//! // Process two starts 1 s later, with a clock whose origin is elsewhere
//! // (its 3600 s is Unix time 1_700_000_001 s).
//! let clock = ManualClock::new();
//! clock.set(3_600_000_000_000);
//! let mut new = Limiter::builder(3, Duration::from_secs(10)).clock(clock).build()?;
//! let restored = new.restore_at(&serde_json::from_str(&json).unwrap(),
//!                               Anchor::new(3_600_000_000_000, 1_700_000_001_000_000_000))?;
//! assert_eq!(restored.admissions, 3);
//! // Five seconds after the burst, exactly as if it had never stopped:
//! // the window frees 10 s after the burst, 5 s from now.
//! let denied = new.check_at(3_600_000_000_000).unwrap_err();
//! assert_eq!(denied.retry_after(), Duration::from_secs(5));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::policy::Policy;

/// The snapshot format this version writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

/// A clock reading and the wall-clock time (nanoseconds since the Unix
/// epoch) it corresponds to: the bridge between a limiter's clock and a
/// snapshot's wall-clock times.
///
/// ```
/// use slidelog::snapshot::Anchor;
/// // The clock read 5 s when the wall clock read 1_700_000_000 s.
/// let anchor = Anchor::new(5_000_000_000, 1_700_000_000_000_000_000);
/// assert_eq!(anchor.to_unix(7_000_000_000), 1_700_000_002_000_000_000);
/// assert_eq!(anchor.to_clock(1_700_000_002_000_000_000), 7_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Anchor {
    /// A reading of the limiter's clock.
    pub clock_nanos: u64,
    /// The Unix time of that reading, in nanoseconds.
    pub unix_nanos: u64,
}

impl Anchor {
    /// `clock_nanos` on the limiter's clock is `unix_nanos` since the epoch.
    ///
    /// ```
    /// use slidelog::snapshot::Anchor;
    /// const BOOT: Anchor = Anchor::new(0, 1_700_000_000_000_000_000);
    /// assert_eq!(BOOT.clock_nanos, 0);
    /// ```
    pub const fn new(clock_nanos: u64, unix_nanos: u64) -> Anchor {
        Anchor {
            clock_nanos,
            unix_nanos,
        }
    }

    /// `clock` now, and the system's wall clock now.
    ///
    /// ```
    /// use slidelog::{ManualClock, snapshot::Anchor};
    /// let anchor = Anchor::now(&ManualClock::new());
    /// assert_eq!(anchor.clock_nanos, 0);
    /// assert!(anchor.unix_nanos > 1_600_000_000_000_000_000);
    /// ```
    pub fn now<C: Clock + ?Sized>(clock: &C) -> Anchor {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Anchor::new(clock.now(), unix)
    }

    /// The Unix time of clock reading `t` (nanoseconds; saturating at
    /// `u64::MAX`).
    ///
    /// ```
    /// use slidelog::snapshot::Anchor;
    /// let anchor = Anchor::new(10, 1_000);
    /// assert_eq!(anchor.to_unix(15), 1_005);
    /// assert_eq!(anchor.to_unix(0), 990); // before the anchor's reading
    /// ```
    pub fn to_unix(&self, t: u64) -> u64 {
        shift(t, self.clock_nanos, self.unix_nanos)
    }

    /// The clock reading of Unix time `unix` (0 if it precedes the clock's
    /// origin: an admission older than that is restored at the origin,
    /// which can only deny more; [`QuantaClock`](crate::QuantaClock) starts
    /// 417 days after its origin, so this concerns only longer windows or
    /// hand-set clocks).
    ///
    /// ```
    /// use slidelog::snapshot::Anchor;
    /// let anchor = Anchor::new(1_000, 1_700_000_000_000_000_000);
    /// assert_eq!(anchor.to_clock(1_700_000_000_000_000_500), 1_500);
    /// assert_eq!(anchor.to_clock(1_600_000_000_000_000_000), 0); // before the clock's origin
    /// ```
    pub fn to_clock(&self, unix: u64) -> u64 {
        shift(unix, self.unix_nanos, self.clock_nanos)
    }
}

/// `t - from + to`, saturating into `u64`.
fn shift(t: u64, from: u64, to: u64) -> u64 {
    let v = i128::from(t) - i128::from(from) + i128::from(to);
    v.clamp(0, i128::from(u64::MAX)) as u64
}

/// The live admissions of a [`Limiter`](crate::Limiter), taken with
/// [`Limiter::snapshot`](crate::Limiter::snapshot).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
/// use slidelog::snapshot::{Anchor, SNAPSHOT_VERSION};
///
/// let limiter = Limiter::builder(3, Duration::from_secs(10)).clock(ManualClock::new()).build()?;
/// limiter.check_n_at(2, 1_000).unwrap();
/// let snapshot = limiter.snapshot_at(Anchor::new(0, 1_700_000_000_000_000_000));
/// assert_eq!(snapshot.version, SNAPSHOT_VERSION);
/// assert_eq!(snapshot.admissions, [1_700_000_000_000_001_000; 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Snapshot {
    /// [`SNAPSHOT_VERSION`] when written.
    pub version: u32,
    /// When it was taken, in nanoseconds since the Unix epoch.
    pub taken_at_unix_nanos: u64,
    /// The policies of the limiter it was taken from (informative: a
    /// restore judges by the restoring limiter's policies).
    pub policies: Vec<Policy>,
    /// The [`generation`](crate::Limiter::generation) of the limiter it was
    /// taken from: a restore continues past it (0 when absent, in a
    /// snapshot written before it was recorded).
    #[serde(default)]
    pub generation: u64,
    /// The effective times of the admissions that still counted for some
    /// policy, in nanoseconds since the Unix epoch, oldest first.
    pub admissions: Vec<u64>,
}

/// The live admissions of every key of a
/// [`KeyedLimiter`](crate::KeyedLimiter), taken with
/// [`KeyedLimiter::snapshot`](crate::KeyedLimiter::snapshot).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeyedLimiter, ManualClock};
/// use slidelog::snapshot::Anchor;
///
/// let limiter = KeyedLimiter::<String, _>::with_clock(3, Duration::from_secs(10), ManualClock::new())?;
/// limiter.check_at("alice", 0).unwrap();
/// limiter.check_n_at("bob", 2, 0).unwrap();
/// let mut snapshot = limiter.snapshot_at(Anchor::new(0, 1_000));
/// snapshot.keys.sort_by(|a, b| a.key.cmp(&b.key));
/// assert_eq!(snapshot.keys[0].key, "alice");
/// assert_eq!(snapshot.keys[1].admissions, [1_000, 1_000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyedSnapshot<K> {
    /// [`SNAPSHOT_VERSION`] when written.
    pub version: u32,
    /// When it was taken, in nanoseconds since the Unix epoch.
    pub taken_at_unix_nanos: u64,
    /// The default policies of the limiter it was taken from.
    pub policies: Vec<Policy>,
    /// The [`generation`](crate::KeyedLimiter::generation) of the limiter
    /// it was taken from: a restore continues past it (0 when absent, in a
    /// snapshot written before it was recorded).
    #[serde(default)]
    pub generation: u64,
    /// Every key with admissions that still counted.
    pub keys: Vec<KeyAdmissions<K>>,
}

/// One key's live admissions in a [`KeyedSnapshot`]: written by hand, it
/// seeds a limiter with a history (say, from another system's log).
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeyedLimiter, ManualClock};
/// use slidelog::snapshot::{Anchor, KeyAdmissions, KeyedSnapshot, SNAPSHOT_VERSION};
///
/// let snapshot = KeyedSnapshot {
///     version: SNAPSHOT_VERSION,
///     taken_at_unix_nanos: 0,
///     policies: Vec::new(), // informative only
///     generation: 0,
///     keys: vec![KeyAdmissions { key: "alice".to_string(), admissions: vec![0, 0] }],
/// };
/// let mut limiter = KeyedLimiter::<String, _>::with_clock(2, Duration::from_secs(10), ManualClock::new())?;
/// limiter.restore_at(&snapshot, Anchor::new(0, 0))?;
/// assert!(limiter.check_at("alice", 1).is_err()); // both units already taken
/// assert!(limiter.check_at("bob", 1).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyAdmissions<K> {
    /// The key.
    pub key: K,
    /// Effective times, nanoseconds since the Unix epoch, oldest first.
    pub admissions: Vec<u64>,
}

/// What a restore did.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, ManualClock};
/// use slidelog::snapshot::{Anchor, SNAPSHOT_VERSION, Snapshot};
///
/// // Two admissions at Unix 0 s and one at 9 s, restored at Unix 10 s into a 5 s window
/// // (the new process's clock then reads 100 s).
/// let snapshot = Snapshot {
///     version: SNAPSHOT_VERSION,
///     taken_at_unix_nanos: 9_000_000_000,
///     policies: Vec::new(),
///     generation: 0,
///     admissions: vec![0, 0, 9_000_000_000],
/// };
/// let clock = ManualClock::new();
/// clock.set(100_000_000_000);
/// let mut limiter = Limiter::builder(3, Duration::from_secs(5)).clock(clock).build()?;
/// let restored = limiter.restore_at(&snapshot, Anchor::new(100_000_000_000, 10_000_000_000))?;
/// assert_eq!((restored.admissions, restored.expired), (1, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Restored {
    /// Admissions written back (they count for some policy now).
    pub admissions: usize,
    /// Admissions left out: no policy counts them any more, or a newer
    /// `limit` of them already decides every request.
    pub expired: usize,
    /// Keys restored (keyed limiters).
    pub keys: usize,
    /// Keys refused because the key cap or memory budget was full (keyed
    /// limiters; their admissions are lost, which can only admit more).
    pub refused_keys: usize,
}

/// Why a snapshot could not be restored.
///
/// ```
/// use std::time::Duration;
/// use slidelog::Limiter;
/// use slidelog::snapshot::{RestoreError, SNAPSHOT_VERSION};
///
/// let mut limiter = Limiter::new(3, Duration::from_secs(5))?;
/// let mut snapshot = limiter.snapshot();
/// snapshot.version = SNAPSHOT_VERSION + 1; // from a later release
/// let err = limiter.restore(&snapshot).unwrap_err();
/// assert!(matches!(err, RestoreError::Version { found, .. } if found == SNAPSHOT_VERSION + 1));
/// println!("{err}"); // snapshot version 2 cannot be restored by this version (reads 1)
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RestoreError {
    /// The snapshot was written by an incompatible version.
    Version {
        /// The version in the snapshot.
        found: u32,
        /// The version this crate reads.
        expected: u32,
    },
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::Version { found, expected } => write!(
                f,
                "snapshot version {found} cannot be restored by this version (reads {expected})"
            ),
        }
    }
}

impl std::error::Error for RestoreError {}

/// Checks a snapshot's version.
pub(crate) fn check_version(version: u32) -> Result<(), RestoreError> {
    if version == SNAPSHOT_VERSION {
        Ok(())
    } else {
        Err(RestoreError::Version {
            found: version,
            expected: SNAPSHOT_VERSION,
        })
    }
}

/// Merges `restored` clock times into `existing`, keeps the ones some policy
/// of the ring (`geometry`) still counts at `now` (`t + longest window >
/// now`), and at most the newest `L`, sorted; returns them and how many
/// were left out.
///
/// A restored time after `now` (a snapshot from a host whose wall clock ran
/// ahead, or a corrupt file) counts as made at `now`: whenever it truly
/// happened, that was before the restore, so it leaves the window no
/// earlier than it would have (nothing is admitted that the log would
/// deny), and no later than one window from now (a time years ahead would
/// otherwise refuse everything for years).
pub(crate) fn live_times(
    mut existing: Vec<u64>,
    restored: impl IntoIterator<Item = u64>,
    now: u64,
    geometry: &crate::ring::Geometry,
) -> (Vec<u64>, usize) {
    // Whatever no policy counts any more has left the longest window.
    let longest = geometry.window() + geometry.linger();
    let limit = geometry.limit() as usize;
    existing.extend(restored.into_iter().map(|t| t.min(now)));
    let total = existing.len();
    existing.retain(|&t| t.saturating_add(longest) > now);
    existing.sort_unstable();
    if existing.len() > limit {
        existing.drain(..existing.len() - limit);
    }
    let kept = existing.len();
    (existing, total - kept)
}
