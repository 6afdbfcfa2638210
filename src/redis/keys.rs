//! [`Layout`] and the Redis name of a key; forgetting a key.

use super::{RedisLimitError, RedisLimiter};

/// How admissions are stored in Redis.
///
/// ```
/// use slidelog::redis::Layout;
/// assert_eq!(Layout::default(), Layout::SortedSet);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Layout {
    /// A sorted set, one member per admission (the classic layout).
    #[default]
    SortedSet,
    /// A ring of 8-byte slots in one string, one per unit of the largest
    /// limit that has judged the key.
    Ring,
}

impl RedisLimiter {
    /// Forgets `key`'s history (e.g. after a successful login, clear the
    /// failed attempts): deletes its Redis key, for every process sharing
    /// it, and this limiter's pre-check entry. `true` if it existed.
    ///
    /// # Errors
    ///
    /// A key longer than the limit, or a failed or timed-out round trip
    /// (whatever the [`FailurePolicy`](super::FailurePolicy): a reset that
    /// did not happen must not look done).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// limiter.remove("login:alice").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self, key: &str) -> Result<bool, RedisLimitError> {
        self.key_fits(key)?;
        let full_key = self.redis_key(key);
        if let Some(map) = &self.shared.precheck {
            map.pin().remove(&full_key);
        }
        self.bounded(self.conn.delete(&full_key))
            .await
            .map(|removed| removed > 0)
    }

    /// [`remove`](Self::remove), for callers that only want the key fresh.
    ///
    /// # Errors
    ///
    /// As for [`remove`](Self::remove).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// // A password reset went through: the lockout starts over.
    /// limiter.reset("login:alice").await?;
    /// # Ok(()) }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<(), RedisLimitError> {
        self.remove(key).await.map(drop)
    }

    /// The storage layout.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { let _ = limiter.layout(); }
    /// ```
    pub fn layout(&self) -> Layout {
        self.shared.layout
    }

    /// The Redis key for `key`, e.g. for `MEMORY USAGE`: the prefix, then
    /// in the ring layout `ring:` and the key; in the sorted-set layout the
    /// key, after `log:` when the key itself begins with `ring:` or `log:`.
    ///
    /// So the two layouts never name the same Redis key, whatever the keys
    /// (the sorted-set key `ring:u` is not the ring layout's `u`), and
    /// each layout names distinct keys distinctly; the marker goes before
    /// the key, so a hash tag in the prefix or the key still decides the
    /// cluster slot.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { assert!(limiter.redis_key("u").ends_with('u')); }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        redis_name(&self.shared.prefix, self.shared.layout, key)
    }

    /// Refuses a key longer than the builder's
    /// [`max_key_len`](super::RedisBuilder::max_key_len), before any round
    /// trip.
    pub(super) fn key_fits(&self, key: &str) -> Result<(), RedisLimitError> {
        if key.len() > self.shared.max_key_len {
            return Err(RedisLimitError::KeyTooLong {
                len: key.len(),
                max: self.shared.max_key_len,
            });
        }
        Ok(())
    }
}

/// The Redis key of `key` under `prefix` in `layout`
/// ([`RedisLimiter::redis_key`]). Ring names begin `prefix + "ring:"`;
/// sorted-set names never do, since a key that begins `ring:` (or `log:`,
/// which keeps the escape one to one) is written after `log:`.
pub(super) fn redis_name(prefix: &str, layout: Layout, key: &str) -> String {
    let marker = match layout {
        Layout::Ring => "ring:",
        Layout::SortedSet if key.starts_with("ring:") || key.starts_with("log:") => "log:",
        Layout::SortedSet => "",
    };
    [prefix, marker, key].concat()
}
