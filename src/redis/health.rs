//! [`ping`](RedisLimiter::ping): whether Redis answers, on a cluster on
//! every primary one of the limiter's keys can land on.

use super::conn::Conn;
use super::{RedisLimitError, RedisLimiter};

impl RedisLimiter {
    /// Whether Redis answers: a `PING`, or on a cluster a read of a key on
    /// every primary that one of this limiter's keys can land on (all of
    /// them, unless the [`prefix`](super::RedisBuilder::prefix) has a hash
    /// tag), bounded by the [`timeout`](super::RedisBuilder::timeout). For
    /// a health check: a limiter whose Redis does not answer fails its
    /// calls or decides them by its [`FailurePolicy`](super::FailurePolicy).
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::Timeout`] if no answer came within the timeout
    /// (a stalled server, a lost network), [`RedisLimitError::Redis`] for
    /// a refused connection or an error reply (whatever the
    /// [`FailurePolicy`](super::FailurePolicy): it decides requests, not
    /// health) — such as an ACL that denies the limiter's user `PING`, or
    /// on a cluster `CLUSTER SLOTS` or `TYPE`.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) {
    /// if let Err(e) = limiter.ping().await {
    ///     eprintln!("not serving: {e}");
    /// }
    /// # }
    /// ```
    pub async fn ping(&self) -> Result<(), RedisLimitError> {
        self.bounded(self.conn.ping(&self.shared.prefix)).await
    }
}

impl Conn {
    /// `PING` to a node; on a cluster, a keyed read (`TYPE`, of a key no
    /// limiter writes) that lands on each primary `CLUSTER SLOTS` lists and
    /// one of `prefix`'s keys can land on, failing if any does not answer.
    /// (The `redis` crate's own fan-out of `PING` skips a primary it has
    /// lost its connection to, and a `PING` routed to a slot goes to any
    /// node when its owner cannot be reached: either would read a killed
    /// shard as answering. A keyed read sent elsewhere is redirected to the
    /// owner, which must answer.)
    pub(super) async fn ping(&self, prefix: &str) -> ::redis::RedisResult<()> {
        let mut c = match self {
            Conn::Node(c) => return ::redis::cmd("PING").query_async(&mut c.clone()).await,
            Conn::Cluster(c) => c.clone(),
        };
        let slots: ::redis::Value = ::redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut c)
            .await?;
        for key in keys_on_each_primary(prefix, &slots)? {
            ::redis::cmd("TYPE")
                .arg(&key)
                .query_async::<()>(&mut c)
                .await?;
        }
        Ok(())
    }
}

/// Redis Cluster's slot of `key`: CRC16/XMODEM of its [`hash_tag`] or of
/// the whole key, modulo 16,384.
pub(super) fn cluster_slot(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key).unwrap_or(key)) % CLUSTER_SLOTS
}

/// A key's hash tag: the text between its first `{` and the next `}`, if
/// not empty.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    Some(&rest[..close]).filter(|tag| !tag.is_empty())
}

/// The slots of a Redis Cluster.
const CLUSTER_SLOTS: u16 = 16_384;

/// For each primary in a `CLUSTER SLOTS` answer, a key under `prefix` in
/// one of its slots: `prefix + "ping:" + n` for the least such `n`. A
/// primary none of them lands on (a `prefix` with a hash tag puts every
/// key in one slot) holds none of a limiter's keys, and has none.
pub(super) fn keys_on_each_primary(
    prefix: &str,
    slots: &::redis::Value,
) -> ::redis::RedisResult<Vec<String>> {
    use ::redis::Value;
    let Value::Array(ranges) = slots else {
        return Err(unexpected("CLUSTER SLOTS", slots));
    };
    // Each slot's primary, as an index into `primaries` (or none).
    let mut owner = vec![usize::MAX; usize::from(CLUSTER_SLOTS)];
    let mut primaries: Vec<&Value> = Vec::new();
    for range in ranges {
        let bounds = match range {
            Value::Array(fields) => match (fields.first(), fields.get(1), fields.get(2)) {
                (Some(&Value::Int(start)), Some(&Value::Int(end)), Some(primary)) => {
                    usize::try_from(start)
                        .ok()
                        .zip(usize::try_from(end).ok())
                        .filter(|&(start, end)| start <= end && end < owner.len())
                        .map(|bounds| (bounds, primary))
                }
                _ => None,
            },
            _ => None,
        };
        let Some(((start, end), primary)) = bounds else {
            return Err(unexpected("CLUSTER SLOTS", range));
        };
        let index = primaries
            .iter()
            .position(|p| *p == primary)
            .unwrap_or_else(|| {
                primaries.push(primary);
                primaries.len() - 1
            });
        owner[start..=end].fill(index);
    }
    let mut keys: Vec<Option<String>> = vec![None; primaries.len()];
    // Primaries that own a slot (in an answer whose ranges overlap, a
    // later range takes an earlier one's slots).
    let mut owning = vec![false; primaries.len()];
    for &index in owner.iter().filter(|&&index| index != usize::MAX) {
        owning[index] = true;
    }
    let mut missing = owning.iter().filter(|&&owns| owns).count();
    // One slot for every key under a hash-tagged prefix; otherwise each
    // primary's least `n` lies well within this bound (about 16,384 tries
    // for a primary of one slot).
    let tries = if hash_tag(prefix.as_bytes()).is_some() {
        1
    } else {
        1 << 20
    };
    for n in 0..tries {
        if missing == 0 {
            break;
        }
        let key = format!("{prefix}ping:{n}");
        let primary = owner[usize::from(cluster_slot(key.as_bytes()))];
        if let Some(slot @ None) = keys.get_mut(primary) {
            *slot = Some(key);
            missing -= 1;
        }
    }
    Ok(keys.into_iter().flatten().collect())
}

/// An answer of a shape `command` never answers.
fn unexpected(command: &'static str, answer: &::redis::Value) -> ::redis::RedisError {
    ::redis::RedisError::from((
        ::redis::ErrorKind::UnexpectedReturnType,
        command,
        format!("{answer:?}"),
    ))
}
