//! [`Reservation`]: units admitted and held until the call says how many
//! it used.

use super::log::WeightedLog;
use super::usage::Usage;
use crate::decision::Admitted;

/// Units held by [`WeightedLog::reserve_at`]: admitted, and recorded, at
/// the reservation's time, until [`commit_at`](Self::commit_at) says how
/// many were used. Dropping it without a commit keeps all of them (the
/// work may have happened); [`cancel`](Self::cancel) returns them all.
///
/// ```
/// use std::time::Duration;
/// use slidelog::weighted::WeightedLog;
///
/// let log = WeightedLog::new(1_000, Duration::from_secs(60))?;
/// let held = log.reserve_at(800, 0).unwrap();
/// assert!(log.check_n_at(300, 1).is_err()); // held
/// held.cancel();
/// assert!(log.check_n_at(300, 2).is_ok());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping a reservation keeps all its units: commit or cancel it"]
pub struct Reservation<'a> {
    pub(super) log: &'a WeightedLog,
    pub(super) admitted: Admitted,
    pub(super) units: u32,
}

impl Reservation<'_> {
    /// The units held.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// assert_eq!(log.reserve_at(4, 0).unwrap().units(), 4);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn units(&self) -> u32 {
        self.units
    }

    /// The admission that holds them: its effective time and the room
    /// left after it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// let held = log.reserve_at(4, 3).unwrap();
    /// assert_eq!((held.admitted().at(), held.admitted().remaining()), (3, 6));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn admitted(&self) -> Admitted {
        self.admitted
    }

    /// Settles the reservation at `used` units, at `now`. Up to the units
    /// held, the rest goes back at the reservation's time: every window's
    /// usage becomes exactly as if `used` had been admitted then (nothing
    /// is taken back from units that already left every window). Beyond
    /// them, the excess is charged at `now`, whatever the room (see the
    /// module docs for why at `now`). Returns the usage after it at `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidelog::weighted::WeightedLog;
    ///
    /// let log = WeightedLog::new(1_000, Duration::from_nanos(100))?;
    /// log.reserve_at(500, 0).unwrap().commit_at(200, 10);
    /// assert_eq!(log.usage_at(10).used(), 200);
    /// // Used more than held: the 300 beyond are charged at 50, and stay
    /// // after the reservation's 500 leave at 120.
    /// let usage = log.reserve_at(500, 20).unwrap().commit_at(800, 50);
    /// assert_eq!(usage.used(), 1_000);
    /// assert_eq!(log.usage_at(100).used(), 800);
    /// assert_eq!(log.usage_at(120).used(), 300);
    /// assert_eq!(log.usage_at(150).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn commit_at(self, used: u32, now: u64) -> Usage {
        let log = self.log;
        let mut entries = log.lock();
        if used <= self.units {
            entries.give_back(self.admitted.at, u64::from(self.units - used));
            log.usage(&mut entries, now)
        } else {
            log.charge(&mut entries, used - self.units, now)
        }
    }

    /// Returns every unit held, at the reservation's time: the windows
    /// are as if it had never been admitted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slidelog::weighted::WeightedLog;
    /// let log = WeightedLog::new(10, Duration::from_secs(1))?;
    /// log.reserve_at(10, 0).unwrap().cancel();
    /// assert_eq!(log.usage_at(0).used(), 0);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn cancel(self) {
        self.log
            .lock()
            .give_back(self.admitted.at, u64::from(self.units));
    }
}
