//! The same exact sliding-window log across processes, on Redis (7+).
//! Feature `redis`.
//!
//! One Redis key per limited entity (so it works on Redis Cluster), server
//! `TIME` as the only clock, one round trip per check (a Lua script loaded
//! once and called with `EVALSHA`, reloaded on `NOSCRIPT`), `PEXPIRE` so idle
//! keys vanish, and denials that record nothing. Two layouts:
//!
//! * [`Layout::SortedSet`]: the classic sorted set, one member per admission
//!   (score: server time in microseconds; members are unique, so two
//!   requests in the same microsecond both count). `O(log n)` per check.
//! * [`Layout::Ring`]: the in-process ring stored in one Redis string,
//!   8 bytes per slot plus an 8-byte head, `O(1)` per admission (`O(log L)`
//!   to count `remaining`).
//!
//! Keys are `prefix + key` in the sorted-set layout and `prefix + "ring:" +
//! key` in the ring layout: the two layouts store different Redis types, so
//! a deployment that switches layouts (same prefix) starts each key afresh
//! in its own name instead of failing with `WRONGTYPE` until the old keys
//! expire (the old keys expire on their own). A sorted-set key that itself
//! begins with `ring:` or `log:` is stored as `prefix + "log:" + key`, so
//! that no key of one layout names a key of the other
//! ([`RedisLimiter::redis_key`]). Each check touches one Redis key, so every
//! script runs in one cluster slot; to keep several keys in one slot, put a
//! hash tag in them: `rl:{user42}:search`, `rl:{user42}:upload`. On Redis
//! Cluster, connect with [`RedisLimiter::cluster_builder`]: checks are
//! routed to the shard that owns the key, and the script is loaded on every
//! primary and reloaded wherever `NOSCRIPT` comes back.
//!
//! With feature `redis-tls`, a `rediss://` URL connects over TLS (rustls),
//! trusting the system's roots or [`RedisBuilder::tls_root_cert`], with a
//! client certificate if [`RedisBuilder::tls_client_cert`] gives one.
//!
//! # Examples
//!
//! ```no_run
//! # async fn demo() -> Result<(), slidelog::redis::RedisLimitError> {
//! use std::time::Duration;
//! use slidelog::redis::{FailurePolicy, Layout, RedisLimiter};
//!
//! let limiter = RedisLimiter::builder("redis://127.0.0.1/", 100, Duration::from_secs(60))
//!     .layout(Layout::Ring)
//!     .failure_policy(FailurePolicy::Closed)
//!     .local_precheck(true)
//!     .connect()
//!     .await?;
//! match limiter.check("user42").await? {
//!     Ok(admitted) => println!("{} left", admitted.remaining()),
//!     Err(denied) => println!("retry in {:?}", denied.retry_after()),
//! }
//! # Ok(()) }
//! ```

use core::fmt;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::ClusterClient;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Client, Script, ScriptInvocation};

use crate::clock::{Clock, QuantaClock};
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::policy::Policy;
use crate::ring::Shape;
use crate::sync::atomic::{AtomicU64, Ordering};

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

/// What a check answers when Redis cannot be reached, times out or fails.
///
/// ```
/// use slidelog::redis::FailurePolicy;
/// assert_eq!(FailurePolicy::default(), FailurePolicy::Error);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Return the error to the caller (`Err(RedisLimitError)`).
    #[default]
    Error,
    /// Fail open: admit (with `remaining` 0 and `at` 0).
    Open,
    /// Fail closed: deny with [`DenyReason::Unavailable`](crate::DenyReason::Unavailable)
    /// and `retry_after` equal to the timeout (the tower layer answers
    /// `503 Service Unavailable`, see
    /// [`unavailable_status`](crate::tower::RateLimitLayer::unavailable_status)).
    Closed,
}

/// Why a Redis check failed.
///
/// ```
/// use std::time::Duration;
/// use slidelog::redis::RedisLimitError;
/// let e = RedisLimitError::Timeout(Duration::from_millis(5));
/// assert!(e.to_string().contains("5ms"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// The limit or window is invalid.
    Config(ConfigError),
    /// Redis answered with an error, or the connection failed.
    Redis(::redis::RedisError),
    /// No answer within the configured timeout.
    Timeout(Duration),
    /// The script answered something unexpected.
    Protocol(String),
    /// A wait ([`RedisLimiter::until_n_ready`]) for a request that can
    /// never be admitted (more units than the limit).
    Refused(Denied),
    /// The key is longer than the builder's
    /// [`max_key_len`](RedisBuilder::max_key_len): refused before any round
    /// trip (a client-chosen key of hundreds of KiB per client would
    /// otherwise fill Redis's memory, and this process's pre-check map).
    KeyTooLong {
        /// The key's length in bytes.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
}

impl fmt::Display for RedisLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisLimitError::Config(e) => write!(f, "invalid configuration: {e}"),
            RedisLimitError::Redis(e) => write!(f, "redis: {e}"),
            RedisLimitError::Timeout(t) => write!(f, "redis did not answer within {t:?}"),
            RedisLimitError::Protocol(m) => write!(f, "unexpected answer from the script: {m}"),
            RedisLimitError::Refused(denied) => write!(f, "refused: {denied}"),
            RedisLimitError::KeyTooLong { len, max } => {
                write!(
                    f,
                    "rate-limit key of {len} bytes is longer than the maximum of {max}"
                )
            }
        }
    }
}

impl std::error::Error for RedisLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisLimitError::Config(e) => Some(e),
            RedisLimitError::Redis(e) => Some(e),
            RedisLimitError::Refused(d) => Some(d),
            _ => None,
        }
    }
}

impl From<::redis::RedisError> for RedisLimitError {
    fn from(e: ::redis::RedisError) -> Self {
        RedisLimitError::Redis(e)
    }
}

impl From<ConfigError> for RedisLimitError {
    fn from(e: ConfigError) -> Self {
        RedisLimitError::Config(e)
    }
}

/// Both scripts take `KEYS[1]` and `ARGV`: `n`, a unique member prefix, a
/// server-time override (`''` for none, tests only), the number of policies
/// `P`, the ring's size `L` and base window `W` (the policy of the largest
/// limit, the longest such: how a ring without a header is read), then `P`
/// pairs `limit, window`, then `'1'` for a dry run (a peek: decide, record
/// nothing); times are in microseconds. Every policy is checked against
/// the one log, all or nothing. They answer `{1, remaining, t_eff, policy,
/// grows}` (the least room, the first policy with it, and the time until
/// that least room grows: the latest time, among the policies with that
/// little room, their oldest admission in their window leaves it — the
/// IETF `t`; 0 if one of them holds nothing, and for a dry run of the
/// sorted set) or `{0, retry_after, now, policy, 0}` (the longest wait over
/// the violated policies and the first policy with it).
///
/// A key keeps what every policy set that has called it while it lives
/// needs, whoever calls: its longest window (and in the ring layout its
/// largest limit) only grows until the key expires, so that limiters of
/// different policies on one key (replicas mid-deploy, `with_quota`
/// siblings) never drop what another one still counts.
///
/// Numbers reach Redis commands through `int`, `string.format('%d')`: Lua
/// turns a number into a string with 14 significant digits, which would
/// round 16-digit Unix microseconds.
const SORTED_SET: &str = r#"
local function int(x) return string.format('%d', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) end
local n, P = tonumber(ARGV[1]), tonumber(ARGV[4])
local dry = ARGV[7 + 2 * P] == '1'
local longest = 0
for i = 1, P do
  local w = tonumber(ARGV[6 + 2 * i])
  if w > longest then longest = w end
end
-- The longest window any caller has judged the key by: the member
-- 'w<window>' at score -inf (an admission's member holds a ':'; a key
-- written without it is judged by this caller's windows).
local meta = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '-inf')[1]
local stored = 0
if meta then stored = tonumber(string.sub(meta, 2)) end
local kept = math.max(longest, stored)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(-inf', int(now - kept))
local m = 0
if meta then m = 1 end
local total = redis.call('ZCARD', KEYS[1]) - m
-- This caller's windows join the key's (an existing key, or one this
-- call creates).
if longest > stored and (m == 1 or total > 0 or (n > 0 and not dry)) then
  if meta then redis.call('ZREM', KEYS[1], meta) end
  redis.call('ZADD', KEYS[1], '-inf', 'w' .. int(longest))
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(kept / 1000) + 1))
  m = 1
end
local wait, wp, rem, rp = -1, 0, -1, 0
local held, left = {}, {}
for i = 1, P do
  local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  local inw = total
  if W < kept then inw = redis.call('ZCOUNT', KEYS[1], '(' .. int(now - W), '+inf') end
  if n > 0 and inw + n > L then
    local r = m + total + n - L - 1
    local e = redis.call('ZRANGE', KEYS[1], r, r, 'WITHSCORES')
    local w = tonumber(e[2]) + W - now
    if w > wait then wait, wp = w, i - 1 end
  else
    -- (Zero units are always admitted; after a cut the window may hold
    -- more than the new limit: no room, not less.)
    held[i], left[i] = inw + n, math.max(L - inw - n, 0)
    if rem < 0 or left[i] < rem then rem, rp = left[i], i - 1 end
  end
end
-- Every policy's room and growth after the call (`k` units recorded by
-- it), appended to the answer when there are several (what a `RateLimit`
-- field lists per policy); not for a dry run, which recorded nothing to
-- count from.
local function told(answer, k)
  if P == 1 or dry then return answer end
  for i = 1, P do
    local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local inw = total + k
    if W < kept then inw = redis.call('ZCOUNT', KEYS[1], '(' .. int(now - W), '+inf') end
    local room, g = math.max(L - inw, 0), 0
    if inw > 0 then
      local e = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now - W), '+inf', 'WITHSCORES', 'LIMIT', inw - (L - room), 1)
      if e[2] then g = tonumber(e[2]) + W - now end
    end
    answer[#answer + 1] = room
    answer[#answer + 1] = g
  end
  return answer
end
if wait >= 0 then return told({0, wait, now, wp, 0}, 0) end
for i = 1, n do
  if dry then break end
  redis.call('ZADD', KEYS[1], int(now), ARGV[2] .. ':' .. int(i))
end
if n > 0 and not dry then
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(kept / 1000) + 1))
end
-- When `rem` grows: each policy with that little room gains a unit once
-- its oldest admission in its window leaves (past the excess a cut left),
-- and the latest of those; never (0) if one holds nothing.
local grows = 0
for i = 1, P do
  if not dry and left[i] == rem and grows >= 0 then
    local L, W = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local e = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now - W), '+inf', 'WITHSCORES', 'LIMIT', held[i] - (L - rem), 1)
    if e[2] then
      grows = math.max(grows, tonumber(e[2]) + W - now)
    else
      grows = -1
    end
  end
end
return told({1, rem, now, rp, math.max(grows, 0)}, n)
"#;

/// The ring of docs/design.md §2 in one string: a header of three 8-byte
/// words — the head (admissions so far), `-W` (negative: it marks the
/// header) and `L` — then `L` 8-byte slots (`t_eff + W`), big-endian
/// doubles (exact for integers below 2^53 µs). `L` is the largest limit
/// and `W` the longest window of every policy set that has called the key
/// while it lives: a caller with more (or longer) needs grows the ring
/// first, keeping every admission; none shrinks it. Policy `i` admits `n`
/// units iff admission `head + n - 1 - L_i` has left its window `W_i`
/// (docs/design.md §4, several policies). A ring without the header is
/// read as written under the caller's `L` and `W` (`ARGV[5]`, `ARGV[6]`)
/// and rewritten with it.
const RING: &str = r#"
local function int(x) return string.format('%d', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) end
local n, P = tonumber(ARGV[1]), tonumber(ARGV[4])
local L, W = 0, 0
for i = 1, P do
  local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  if Li > L then L = Li end
  if Wi > W then W = Wi end
end
local raw = redis.call('GET', KEYS[1])
local function num(off)
  if (not raw) or #raw < off + 8 then return 0 end
  return (struct.unpack('>d', raw, off + 1))
end
local head, Ls, Ws, base = num(0), L, W, 24
if raw then
  if num(8) < 0 then
    Ws, Ls = -num(8), num(16)
  else
    Ls, Ws, base = tonumber(ARGV[5]), tonumber(ARGV[6]), 8
  end
  if Ls > L then L = Ls end
  if Ws > W then W = Ws end
end
if raw and (base ~= 24 or Ls ~= L or Ws ~= W) then
  -- Grown (or given its header): every admission kept, in order.
  local kept = {}
  local from = head - Ls
  if from < 0 then from = 0 end
  for i = from, head - 1 do
    local d = num(base + 8 * (i % Ls))
    if d ~= 0 then kept[#kept + 1] = d - Ws end
  end
  head = #kept
  local parts = {struct.pack('>d', head), struct.pack('>d', -W), struct.pack('>d', L)}
  for j = 1, #kept do parts[#parts + 1] = struct.pack('>d', kept[j] + W) end
  raw = table.concat(parts)
  redis.call('SET', KEYS[1], raw)
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(W / 1000) + 1))
end
local function slot(i) return num(24 + 8 * (i % L)) end
local teff = now
local prev = slot(head + L - 1)
if prev - W > teff then teff = prev - W end
-- Each policy's units left once `k` more are admitted now, and when that
-- room grows: the oldest admission in its window after them leaves it,
-- the first live candidate, else (all expired) ours; never (-1) for an
-- empty window and no units.
local function states(k)
  local left, grow = {}, {}
  for i = 1, P do
    local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    local function alive(d) return d ~= 0 and d - W + Wi > teff end
    local lo, hi = 0, Li - k
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if alive(slot(head + k + L - Li + mid)) then hi = mid else lo = mid + 1 end
    end
    local g = -1
    if lo < Li - k then
      g = slot(head + k + L - Li + lo) - W + Wi - now
    elseif k > 0 then
      g = teff + Wi - now
    end
    left[i], grow[i] = lo, g
  end
  return left, grow
end
-- Every policy's room and growth after the call, appended to the answer
-- when there are several (what a `RateLimit` field lists per policy).
local function told(answer, left, grow)
  if P > 1 then
    for i = 1, P do
      answer[#answer + 1] = left[i]
      answer[#answer + 1] = math.max(grow[i], 0)
    end
  end
  return answer
end
local wait, wp = -1, 0
for i = 1, P do
  local Li, Wi = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  if n > 0 then
    local d = slot(head + n - 1 + L - Li)
    if d ~= 0 and d - W + Wi > teff and d - W + Wi - now > wait then wait, wp = d - W + Wi - now, i - 1 end
  end
end
if wait >= 0 then
  local left, grow = states(0)
  return told({0, wait, now, wp, 0}, left, grow)
end
local left, grow = states(n)
-- The fewest units left grows at the latest growth among the policies
-- with that few, never if one of them never does.
local rem, rp, grows = -1, 0, 0
for i = 1, P do
  if rem < 0 or left[i] < rem then
    rem, rp, grows = left[i], i - 1, grow[i]
  elseif left[i] == rem and grows >= 0 and (grow[i] < 0 or grow[i] > grows) then
    grows = grow[i]
  end
end
if grows < 0 then grows = 0 end
if n > 0 and ARGV[7 + 2 * P] ~= '1' then
  local d = struct.pack('>d', teff + W)
  for i = 0, n - 1 do
    redis.call('SETRANGE', KEYS[1], int(24 + 8 * ((head + i) % L)), d)
  end
  redis.call('SETRANGE', KEYS[1], 0, struct.pack('>d', head + n) .. struct.pack('>d', -W) .. struct.pack('>d', L))
  redis.call('PEXPIRE', KEYS[1], int(math.ceil(W / 1000) + 1))
end
return told({1, rem, teff, rp, grows}, left, grow)
"#;

/// What one script call told: the decision, when the room of the policy
/// it names grows, and (with several policies, not for a dry run) each
/// policy's room.
struct Told {
    decision: Result<Admitted, Denied>,
    grows: Duration,
    /// Read by the tower layer's backend.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    rooms: Rooms,
    /// The policies that decided (the call's one configuration; `None`:
    /// nothing was asked). Read by the tower layer's backend.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    rules: Option<std::sync::Arc<Rules>>,
}

/// Each policy's units left and the wait until that grows, in the order
/// given (`len` 0: not told).
#[derive(Clone, Copy, Default)]
struct Rooms {
    len: u8,
    items: [(u32, Duration); crate::MAX_POLICIES],
}

impl Rooms {
    /// From the script's `room, grows_in_µs` pairs after the five words of
    /// its answer: none unless a pair for each of `policies`.
    fn told(pairs: &[i64], policies: usize) -> Rooms {
        let mut rooms = Rooms::default();
        if policies > crate::MAX_POLICIES || pairs.len() != 2 * policies {
            return rooms;
        }
        for (item, pair) in rooms.items.iter_mut().zip(pairs.chunks_exact(2)) {
            *item = (
                u32::try_from(pair[0]).unwrap_or(0),
                Duration::from_micros(u64::try_from(pair[1]).unwrap_or(0)),
            );
        }
        rooms.len = policies as u8;
        rooms
    }

    #[cfg(feature = "tower")]
    fn as_slice(&self) -> &[(u32, Duration)] {
        &self.items[..usize::from(self.len)]
    }
}

/// A decision and its growth as `check_n_with_growth` answers them.
fn transpose_growth(
    (decision, grows): (Result<Admitted, Denied>, Duration),
) -> Result<(Admitted, Duration), Denied> {
    decision.map(|admitted| (admitted, grows))
}

/// Counters for observability.
///
/// ```
/// let stats = slidelog::redis::RedisStats::default();
/// assert_eq!(stats.round_trips, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Checks that went to Redis.
    pub round_trips: u64,
    /// Checks denied locally by the pre-check tier (no round trip).
    pub local_denials: u64,
    /// Checks that failed (connection, timeout, script), whatever the policy.
    pub failures: u64,
}

/// Options for a [`RedisLimiter`]; see [`RedisLimiter::builder`].
///
/// ```
/// use std::time::Duration;
/// use slidelog::redis::{Layout, RedisLimiter};
/// let _builder = RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1)).layout(Layout::Ring);
/// ```
#[derive(Debug, Clone)]
pub struct RedisBuilder {
    /// One node's URL, or (a cluster) the seed nodes' URLs.
    target: Target,
    /// The policies (the first from `builder`).
    policies: Vec<Policy>,
    layout: Layout,
    prefix: String,
    policy: FailurePolicy,
    timeout: Duration,
    /// The pre-check's capacity in keys, if it is on.
    precheck: Option<usize>,
    max_key_len: usize,
    name: crate::observe::Name,
    #[cfg(feature = "redis-tls")]
    tls: Tls,
}

/// Where a [`RedisBuilder`] connects.
#[derive(Debug, Clone)]
enum Target {
    Node(String),
    Cluster(Vec<String>),
}

/// The longest key a [`RedisLimiter`] accepts by default, in bytes.
pub const DEFAULT_MAX_KEY_LEN: usize = 512;

/// The longest a check (or the connection) may take unless
/// [`RedisBuilder::timeout`] says otherwise.
///
/// ```
/// assert_eq!(slidelog::redis::DEFAULT_TIMEOUT, std::time::Duration::from_secs(1));
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

impl RedisBuilder {
    /// The longest key accepted, in bytes (default [`DEFAULT_MAX_KEY_LEN`]);
    /// a longer one is refused with [`RedisLimitError::KeyTooLong`] before
    /// any round trip, whatever the failure policy.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.max_key_len(128);
    /// ```
    pub fn max_key_len(mut self, max: usize) -> Self {
        self.max_key_len = max;
        self
    }

    /// Every key is also limited to `limit` per `window`: several policies,
    /// checked all or nothing in the one script against one log per key
    /// (the ring layout keeps a ring of the largest limit), as for
    /// [`Limiter::builder`](crate::Limiter::builder).
    ///
    /// ```
    /// use std::time::Duration;
    /// let _b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
    ///     .and(100, Duration::from_secs(60));
    /// ```
    pub fn and(mut self, limit: u32, window: Duration) -> Self {
        self.policies.push(Policy::new(limit, window));
        self
    }

    /// The storage layout (default: sorted set).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.layout(slidelog::redis::Layout::Ring);
    /// ```
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The `limiter` label of this limiter's metrics (feature `metrics`);
    /// `"default"` otherwise.
    ///
    /// ```
    /// # let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 1, std::time::Duration::from_secs(1));
    /// let _ = b.name("api");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = crate::observe::Name::new(name);
        self
    }

    /// The prefix of every Redis key (default `slidelog:`).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.prefix("rl:{tenant7}:"); // a hash tag keeps a tenant's keys in one slot
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// What to answer when Redis fails (default: return the error).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.failure_policy(slidelog::redis::FailurePolicy::Open);
    /// ```
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The longest a check (or the connection) may take
    /// ([`DEFAULT_TIMEOUT`], 1 s, unless set): past it the check fails
    /// with [`RedisLimitError::Timeout`] and the failure policy decides.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.timeout(std::time::Duration::from_millis(50));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Deny locally, without a round trip, a request that is certain to be
    /// denied: one for at least as many units as a denial Redis gave this
    /// process, before that denial's retry time. It never denies what Redis
    /// would admit under this limiter's policies (entries only leave Redis
    /// at their deadline), whatever other policies check the key elsewhere
    /// (another process's [`reconfigure`](RedisLimiter::reconfigure), a
    /// [`with_quota`](RedisLimiter::with_quota) sibling): a key keeps what
    /// every policy set that calls it counts. Only a
    /// [`remove`](RedisLimiter::remove) or `reset` elsewhere frees a key
    /// early; a denial remembered here before it stands until its retry
    /// time. It remembers at most [`DEFAULT_PRECHECK_KEYS`] keys' denials
    /// (see [`local_precheck_capacity`](Self::local_precheck_capacity)).
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.local_precheck(true);
    /// ```
    pub fn local_precheck(mut self, on: bool) -> Self {
        self.precheck = on.then_some(self.precheck.unwrap_or(DEFAULT_PRECHECK_KEYS));
        self
    }

    /// Turns the [local pre-check](Self::local_precheck) on, remembering at
    /// most `keys` keys' denials: when it is full, the expired ones are
    /// dropped, and a denial that still finds no room is not remembered
    /// (its key's next check makes the round trip). Keys are the callers',
    /// so without a bound a client naming new keys would grow the map
    /// without end.
    ///
    /// ```
    /// let b = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, std::time::Duration::from_secs(1));
    /// let _ = b.local_precheck_capacity(10_000);
    /// ```
    pub fn local_precheck_capacity(mut self, keys: usize) -> Self {
        self.precheck = Some(keys);
        self
    }

    /// Trusts the certificate authorities in `pem` (PEM, one or more
    /// certificates) for a `rediss://` connection, instead of the system's
    /// roots: a Redis whose certificate a private CA signed. Feature
    /// `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://redis.internal:6380/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/ca.pem")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_cert = Some(pem.into());
        self
    }

    /// Presents this certificate (PEM, its chain after it) and private key
    /// (PEM: PKCS #8, PKCS #1 or SEC1) to a Redis that asks for one (mutual
    /// TLS, `tls-auth-clients yes`). Feature `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://redis.internal:6380/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/ca.pem")?)
    ///     .tls_client_cert(std::fs::read("/etc/rl/client.pem")?, std::fs::read("/etc/rl/client.key")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_client_cert(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls.client = Some((cert.into(), key.into()));
        self
    }

    /// Accepts a `rediss://` server's certificate whatever host names it
    /// is for, still requiring a chain to a trusted root: for a Redis whose
    /// certificate does not name the address it is reached at (GCP
    /// Memorystore's, say). Anyone with a certificate from the same roots
    /// could then pose as the server: trust a private CA
    /// ([`tls_root_cert`](Self::tls_root_cert)) with it. Feature
    /// `redis-tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    ///
    /// let limiter = RedisLimiter::builder("rediss://10.0.0.3:6378/", 100, Duration::from_secs(60))
    ///     .tls_root_cert(std::fs::read("/etc/redis/server-ca.pem")?)
    ///     .tls_accept_invalid_hostnames(true)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis-tls")]
    pub fn tls_accept_invalid_hostnames(mut self, accept: bool) -> Self {
        self.tls.any_hostname = accept;
        self
    }

    /// Connects (one multiplexed connection, reconnecting as needed).
    ///
    /// # Errors
    ///
    /// An invalid limit, window or URL; a refused connection
    /// ([`RedisLimitError::Redis`], the `redis` error as the source); or no
    /// connection within the timeout ([`RedisLimitError::Timeout`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use slidelog::redis::{RedisLimitError, RedisLimiter};
    /// let refused = RedisLimiter::builder("redis://127.0.0.1:1/", 10, std::time::Duration::from_secs(1))
    ///     .timeout(std::time::Duration::from_millis(200))
    ///     .connect()
    ///     .await;
    /// assert!(matches!(refused, Err(RedisLimitError::Redis(e)) if e.is_connection_refusal()));
    /// # });
    /// ```
    pub async fn connect(self) -> Result<RedisLimiter, RedisLimitError> {
        let rules = Rules::new(self.policies, 0)?;
        crate::observe::describe();
        let conn = match &self.target {
            Target::Node(url) => {
                #[cfg(feature = "redis-tls")]
                let client = self.tls.client(url)?;
                #[cfg(not(feature = "redis-tls"))]
                let client = Client::open(url.as_str())?;
                // No retry of the first connection: a refused one is
                // reported as refused at once, not as a timeout.
                let manager_config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(backstop(self.timeout)))
                    .set_response_timeout(Some(backstop(self.timeout)))
                    .set_number_of_retries(0)
                    .set_max_delay(self.timeout);
                Conn::Node(
                    tokio::time::timeout(
                        self.timeout,
                        ConnectionManager::new_with_config(client, manager_config),
                    )
                    .await
                    .map_err(|_| RedisLimitError::Timeout(self.timeout))??,
                )
            }
            Target::Cluster(nodes) => {
                let client = ClusterClient::builder(nodes.iter().map(String::as_str));
                #[cfg(feature = "redis-tls")]
                let client = self.tls.cluster(client, nodes)?;
                let client = client
                    .connection_timeout(backstop(self.timeout))
                    .response_timeout(backstop(self.timeout))
                    // Redirections during a reshard (`MOVED`, `ASK`,
                    // `TRYAGAIN`) followed several times, each wait short:
                    // the call's own timeout bounds them all.
                    .retries(CLUSTER_RETRIES)
                    .min_retry_wait(1)
                    .max_retry_wait(50)
                    .build()?;
                Conn::Cluster(
                    tokio::time::timeout(self.timeout, client.get_async_connection())
                        .await
                        .map_err(|_| RedisLimitError::Timeout(self.timeout))??,
                )
            }
        };
        let script = Script::new(match self.layout {
            Layout::SortedSet => SORTED_SET,
            Layout::Ring => RING,
        });
        let prefix = self.prefix;
        Ok(RedisLimiter {
            conn,
            shared: std::sync::Arc::new(Shared::new(
                script,
                rules,
                self.layout,
                prefix,
                Options {
                    policy: self.policy,
                    timeout: self.timeout,
                    max_key_len: self.max_key_len,
                    precheck: self.precheck,
                    name: self.name,
                },
            )),
        })
    }
}

/// The redis client's own connection and response timeouts for a limiter
/// whose calls take at most `timeout`: twice it. Each call (and the
/// connection) is bounded by `timeout` through `tokio::time::timeout`,
/// whose expiry is [`RedisLimitError::Timeout`] naming it. The client's
/// timers of the same length would expire first and answer a bare I/O
/// "timed out" instead (`tests/redis.rs`,
/// `a_stalled_server_times_out_as_configured`); twice as long, they only
/// reap what no call waits for any more.
fn backstop(timeout: Duration) -> Duration {
    timeout.saturating_mul(2)
}

/// A builder's TLS material (feature `redis-tls`): kept out of `Debug`.
#[cfg(feature = "redis-tls")]
#[derive(Clone, Default)]
struct Tls {
    /// PEM: the CAs trusted instead of the system's roots.
    root_cert: Option<Vec<u8>>,
    /// PEM: the client's certificate and its private key.
    client: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether the server's certificate may name other hosts.
    any_hostname: bool,
}

#[cfg(feature = "redis-tls")]
impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("root_cert", &self.root_cert.is_some())
            .field("client_cert", &self.client.is_some())
            .field("any_hostname", &self.any_hostname)
            .finish()
    }
}

#[cfg(feature = "redis-tls")]
impl Tls {
    fn is_set(&self) -> bool {
        self.root_cert.is_some() || self.client.is_some() || self.any_hostname
    }

    fn certificates(&self) -> ::redis::TlsCertificates {
        ::redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| ::redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_cert.clone(),
        }
    }

    /// TLS options are for `rediss://` URLs only: on a `redis://` one
    /// they would be ignored (one node) or turn TLS on unasked (a cluster).
    fn refuse_plain(url: &str) -> Result<(), ::redis::RedisError> {
        // (Schemes are case-insensitive.)
        if url
            .get(..9)
            .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
        {
            Ok(())
        } else {
            Err(::redis::RedisError::from((
                ::redis::ErrorKind::InvalidClientConfig,
                "TLS options given for a URL that is not rediss://",
            )))
        }
    }

    fn client(&self, url: &str) -> Result<Client, ::redis::RedisError> {
        if !self.is_set() {
            return Client::open(url);
        }
        Tls::refuse_plain(url)?;
        let client = Client::build_with_tls(url, self.certificates())?;
        if !self.any_hostname {
            return Ok(client);
        }
        let info = client.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        Client::open(info.set_addr(addr))
    }

    fn cluster(
        &self,
        builder: ::redis::cluster::ClusterClientBuilder,
        nodes: &[String],
    ) -> Result<::redis::cluster::ClusterClientBuilder, ::redis::RedisError> {
        if !self.is_set() {
            return Ok(builder);
        }
        nodes.iter().try_for_each(|url| Tls::refuse_plain(url))?;
        Ok(builder
            .certs(self.certificates())
            .danger_accept_invalid_hostnames(self.any_hostname))
    }
}

/// The builder's options a limiter keeps (and [`RedisLimiter::with_quota`]
/// copies).
struct Options {
    policy: FailurePolicy,
    timeout: Duration,
    max_key_len: usize,
    /// The pre-check's capacity in keys, if it is on.
    precheck: Option<usize>,
    name: crate::observe::Name,
}

/// An async limiter whose state lives in Redis: the same specification as
/// [`KeyedLimiter`](crate::KeyedLimiter), shared by every process that uses
/// the same Redis keys.
///
/// `Admitted::at()` is the server's time in nanoseconds since the Unix epoch
/// (microsecond precision, from Redis `TIME`).
///
/// ```no_run
/// # async fn f() -> Result<(), slidelog::redis::RedisLimitError> {
/// use std::time::Duration;
/// let limiter = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1))
///     .connect()
///     .await?;
/// assert!(limiter.check("k").await?.is_ok());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisLimiter {
    conn: Conn,
    shared: std::sync::Arc<Shared>,
}

/// One node (a reconnecting manager) or a cluster (routed by key slot).
#[derive(Clone)]
enum Conn {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Runs the script on the node that owns its key; on `NOSCRIPT` the
    /// `redis` crate loads it (on every primary, for a cluster) and retries.
    /// On a cluster, a call that still meets a slot on the move (`MOVED`,
    /// `ASK`, `TRYAGAIN` after the client's own redirections) is sent again,
    /// at most [`CLUSTER_RETRIES`] times (the caller's timeout bounds it):
    /// Redis answers those before the script runs, so nothing is counted
    /// twice.
    async fn invoke(&self, invocation: &ScriptInvocation<'_>) -> ::redis::RedisResult<Vec<i64>> {
        async fn on<C: ConnectionLike>(
            mut conn: C,
            invocation: &ScriptInvocation<'_>,
        ) -> ::redis::RedisResult<Vec<i64>> {
            invocation.invoke_async(&mut conn).await
        }
        match self {
            Conn::Node(c) => on(c.clone(), invocation).await,
            Conn::Cluster(c) => {
                let mut again = 0;
                loop {
                    match on(c.clone(), invocation).await {
                        Err(e) if again < CLUSTER_RETRIES && slot_on_the_move(&e) => {
                            again += 1;
                            tokio::time::sleep(Duration::from_millis(u64::from(again))).await;
                        }
                        answer => return answer,
                    }
                }
            }
        }
    }

    /// `PING` to a node; on a cluster, a keyed read (`TYPE`, of a key no
    /// limiter writes) that lands on each primary `CLUSTER SLOTS` lists and
    /// one of `prefix`'s keys can land on, failing if any does not answer.
    /// (The `redis` crate's own fan-out of `PING` skips a primary it has
    /// lost its connection to, and a `PING` routed to a slot goes to any
    /// node when its owner cannot be reached: either would read a killed
    /// shard as answering. A keyed read sent elsewhere is redirected to the
    /// owner, which must answer.)
    async fn ping(&self, prefix: &str) -> ::redis::RedisResult<()> {
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

    /// `DEL key`: how many keys it removed.
    async fn delete(&self, key: &str) -> ::redis::RedisResult<i64> {
        let mut command = ::redis::cmd("DEL");
        command.arg(key);
        match self {
            Conn::Node(c) => command.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => command.query_async(&mut c.clone()).await,
        }
    }
}

/// How many times a cluster call follows redirections (the `redis`
/// crate's retries), and then how many times [`Conn::invoke`] sends a
/// script call again that still met a slot on the move.
const CLUSTER_RETRIES: u32 = 8;

/// Whether `error` is a cluster's answer for a key whose slot is moving
/// or has moved: the call did not run, and sent again it lands.
fn slot_on_the_move(error: &::redis::RedisError) -> bool {
    use ::redis::{ErrorKind, ServerErrorKind};
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
        )
    )
}

/// Redis Cluster's slot of `key`: CRC16/XMODEM of its [`hash_tag`] or of
/// the whole key, modulo 16,384.
fn cluster_slot(key: &[u8]) -> u16 {
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
fn keys_on_each_primary(prefix: &str, slots: &::redis::Value) -> ::redis::RedisResult<Vec<String>> {
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

/// The policies as the scripts take them: replaced whole by
/// [`RedisLimiter::reconfigure`].
struct Rules {
    /// The policies as given, and in microseconds.
    policies: Vec<Policy>,
    rules: Vec<(u32, u64)>,
    /// How a ring without a header is read (µs): the largest limit, with the
    /// longest window among those.
    ring: (u32, u64),
    min_limit: u32,
    min_policy: u8,
    /// How many reconfigurations made these (a pre-check entry of another
    /// generation is ignored).
    generation: u64,
}

impl Rules {
    fn new(policies: Vec<Policy>, generation: u64) -> Result<Rules, ConfigError> {
        // Validates every policy (as the in-process limiters do).
        Shape::new(&policies)?;
        let us = |w: Duration| u64::try_from(w.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX);
        let rules: Vec<(u32, u64)> = policies.iter().map(|p| (p.limit, us(p.window))).collect();
        let ring = *rules
            .iter()
            .max_by_key(|&&(limit, window)| (limit, window))
            .expect("at least one policy");
        let (min_policy, &(min_limit, _)) = rules
            .iter()
            .enumerate()
            .min_by_key(|&(i, &(limit, _))| (limit, i))
            .expect("at least one policy");
        Ok(Rules {
            policies,
            rules,
            ring,
            min_limit,
            min_policy: min_policy as u8,
            generation,
        })
    }
}

/// Everything but the connection, shared by clones.
struct Shared {
    script: Script,
    /// The policies now (SeqCst loads and stores, see `arc_swap`).
    rules: arc_swap::ArcSwap<Rules>,
    layout: Layout,
    prefix: String,
    policy: FailurePolicy,
    timeout: Duration,
    max_key_len: usize,
    /// Per key: the local time before which `units` (or more) are
    /// certainly denied, the policy Redis said denied them, and the
    /// generation of the rules it judged by.
    precheck: Option<papaya::HashMap<String, (u64, u32, u8, u64)>>,
    /// The most keys `precheck` holds.
    precheck_keys: usize,
    clock: QuantaClock,
    member: String,
    /// One reconfiguration at a time (so generations count up by one).
    reconfiguring: std::sync::Mutex<()>,
    /// The `limiter` label of its metrics.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    name: crate::observe::Name,
    sequence: AtomicU64,
    round_trips: AtomicU64,
    local_denials: AtomicU64,
    failures: AtomicU64,
}

impl Shared {
    fn new(
        script: Script,
        rules: Rules,
        layout: Layout,
        prefix: String,
        options: Options,
    ) -> Shared {
        Shared {
            script,
            rules: arc_swap::ArcSwap::from_pointee(rules),
            layout,
            prefix,
            policy: options.policy,
            timeout: options.timeout,
            max_key_len: options.max_key_len,
            precheck: options.precheck.map(|_| papaya::HashMap::new()),
            precheck_keys: options.precheck.unwrap_or(0),
            clock: QuantaClock::new(),
            // Unique per limiter (each RandomState is keyed anew): sorted-set
            // members are this, then a count.
            member: format!("{:016x}", RandomState::new().hash_one(std::process::id())),
            reconfiguring: std::sync::Mutex::new(()),
            name: options.name,
            sequence: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
            local_denials: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("policies", &self.shared.rules.load().policies)
            .field("layout", &self.shared.layout)
            .field("prefix", &self.shared.prefix)
            .field("policy", &self.shared.policy)
            .finish_non_exhaustive()
    }
}

/// The most keys' denials the local pre-check remembers unless
/// [`RedisBuilder::local_precheck_capacity`] says otherwise.
pub const DEFAULT_PRECHECK_KEYS: usize = 100_000;

impl RedisLimiter {
    /// Options for a limiter of `limit` admissions per `window` per key on
    /// the Redis at `url` (`redis://host:port/db`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let _builder = slidelog::redis::RedisLimiter::builder("redis://127.0.0.1/", 10, Duration::from_secs(1));
    /// ```
    pub fn builder(url: impl Into<String>, limit: u32, window: Duration) -> RedisBuilder {
        RedisBuilder::new(Target::Node(url.into()), limit, window)
    }

    /// Options for a limiter on a **Redis Cluster**, given seed nodes
    /// (`redis://host:port` URLs; the rest of the cluster is discovered).
    /// Each check is routed to the shard that owns its key (one key per
    /// check, so every script runs in one slot), the script is loaded on
    /// every primary and reloaded on whichever node answers `NOSCRIPT`
    /// (after a failover or a `SCRIPT FLUSH`). During a reshard a check
    /// follows its slot's redirections (`MOVED`, `ASK`, `TRYAGAIN`) within
    /// its timeout. The same options as [`builder`](Self::builder).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidelog::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// use slidelog::redis::RedisLimiter;
    /// let limiter = RedisLimiter::cluster_builder(
    ///     ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"],
    ///     100,
    ///     Duration::from_secs(60),
    /// )
    /// .connect()
    /// .await?;
    /// assert!(limiter.check("user42").await?.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn cluster_builder(
        nodes: impl IntoIterator<Item = impl Into<String>>,
        limit: u32,
        window: Duration,
    ) -> RedisBuilder {
        RedisBuilder::new(
            Target::Cluster(nodes.into_iter().map(Into::into).collect()),
            limit,
            window,
        )
    }
}

impl RedisBuilder {
    fn new(target: Target, limit: u32, window: Duration) -> RedisBuilder {
        RedisBuilder {
            target,
            policies: vec![Policy::new(limit, window)],
            layout: Layout::default(),
            prefix: "slidelog:".into(),
            policy: FailurePolicy::default(),
            timeout: DEFAULT_TIMEOUT,
            precheck: None,
            max_key_len: DEFAULT_MAX_KEY_LEN,
            name: crate::observe::Name::default(),
            #[cfg(feature = "redis-tls")]
            tls: Tls::default(),
        }
    }
}

impl RedisLimiter {
    /// Checks one request for `key`.
    ///
    /// # Errors
    ///
    /// With [`FailurePolicy::Error`], a connection error, timeout or script
    /// error; the other policies answer instead.
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Err(denied) = limiter.check("user42").await? {
    ///     println!("retry in {:?}", denied.retry_after());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check(&self, key: &str) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.check_n(key, 1).await
    }

    /// Checks `n` units for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let upload = limiter.check_n("user42", 5).await?; // 5 units, all or nothing
    /// # let _ = upload; Ok(()) }
    /// ```
    pub async fn check_n(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run(key, n, None).await
    }

    /// [`check_n`](Self::check_n), and for an admission how long until
    /// the key's `remaining` next grows, from the same round trip (see
    /// [`Limiter::check_n_with_growth`](crate::Limiter::check_n_with_growth)):
    /// the IETF `RateLimit` field's `t`, Envoy's `duration_until_reset`,
    /// by the server's clock. Zero when it never grows by waiting (`n == 0`
    /// on an empty window), and for an admission the failure policy made
    /// ([`FailurePolicy::Open`]).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Ok((admitted, grows)) = limiter.check_n_with_growth("user42", 1).await? {
    ///     let t = grows.as_secs() + u64::from(grows.subsec_nanos() > 0);
    ///     println!("RateLimit: \"default\";r={};t={t}", admitted.remaining());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_n_with_growth(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<(Admitted, Duration), Denied>, RedisLimitError> {
        Ok(transpose_growth(self.run_timed(key, n, None).await?))
    }

    /// What [`check`](Self::check) would answer for `key` now, recording
    /// nothing (one round trip; the local pre-check may answer a denial
    /// without it).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// if let Ok(room) = limiter.peek("user:42").await? {
    ///     println!("{} more requests fit now", room.remaining() + 1);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self, key: &str) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.peek_n(key, 1).await
    }

    /// [`peek`](Self::peek) for `n` units.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// // Would a batch of 5 fit now? Nothing is recorded either way.
    /// match limiter.peek_n("user:42", 5).await? {
    ///     Ok(_) => println!("the batch fits"),
    ///     Err(denied) => println!("retry the batch in {:?}", denied.retry_after()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek_n(
        &self,
        key: &str,
        n: u32,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        match self.ask(key, n, None, true).await {
            Err(e) if !matches!(e, RedisLimitError::KeyTooLong { .. }) => self.fail(e),
            answer => answer.map(|(decision, _)| decision),
        }
    }

    /// Forgets `key`'s history (e.g. after a successful login, clear the
    /// failed attempts): deletes its Redis key, for every process sharing
    /// it, and this limiter's pre-check entry. `true` if it existed.
    ///
    /// # Errors
    ///
    /// A key longer than the limit, or a failed or timed-out round trip
    /// (whatever the [`FailurePolicy`]: a reset that did not happen must
    /// not look done).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// limiter.remove("login:alice").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self, key: &str) -> Result<bool, RedisLimitError> {
        if key.len() > self.shared.max_key_len {
            return Err(RedisLimitError::KeyTooLong {
                len: key.len(),
                max: self.shared.max_key_len,
            });
        }
        let full_key = self.redis_key(key);
        if let Some(map) = &self.shared.precheck {
            map.pin().remove(&full_key);
        }
        self.bounded(self.conn.delete(&full_key))
            .await
            .map(|removed| removed > 0)
    }

    /// One round trip, bounded by the timeout: its answer, its error as
    /// [`RedisLimitError::Redis`], or [`RedisLimitError::Timeout`].
    async fn bounded<T>(
        &self,
        round_trip: impl Future<Output = ::redis::RedisResult<T>>,
    ) -> Result<T, RedisLimitError> {
        match tokio::time::timeout(self.shared.timeout, round_trip).await {
            Ok(answer) => answer.map_err(RedisLimitError::Redis),
            Err(_) => Err(RedisLimitError::Timeout(self.shared.timeout)),
        }
    }

    /// Whether Redis answers: a `PING`, or on a cluster a read of a key on
    /// every primary that one of this limiter's keys can land on (all of
    /// them, unless the [`prefix`](RedisBuilder::prefix) has a hash tag),
    /// bounded by the [`timeout`](RedisBuilder::timeout). For a health
    /// check: a limiter whose Redis does not answer fails its calls or
    /// decides them by its [`FailurePolicy`].
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::Timeout`] if no answer came within the timeout
    /// (a stalled server, a lost network), [`RedisLimitError::Redis`] for
    /// a refused connection or an error reply (whatever the
    /// [`FailurePolicy`]: it decides requests, not health) — such as an
    /// ACL that denies the limiter's user `PING`, or on a cluster
    /// `CLUSTER SLOTS` or `TYPE`.
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

    /// Waits until one request for `key` is admitted: sleeps each denial's
    /// exact `retry_after` (tokio timers), as the in-process limiters'
    /// `until_ready` do, and returns the admission. Cancel-safe: dropping
    /// the future reserves nothing.
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check): a failure ends the wait (with
    /// [`FailurePolicy::Closed`] a failure is a denial, so the wait goes on
    /// until Redis answers again).
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let admitted = limiter.until_ready("user42").await?;
    /// println!("{} left", admitted.remaining());
    /// # Ok(()) }
    /// ```
    pub async fn until_ready(&self, key: &str) -> Result<Admitted, RedisLimitError> {
        self.until_n_ready(key, 1).await
    }

    /// Waits until `n` units for `key` are admitted together.
    ///
    /// # Errors
    ///
    /// As for [`check_n`](Self::check_n); `n > limit` can never be admitted:
    /// [`RedisLimitError::Refused`] with
    /// [`DenyReason::ExceedsLimit`](crate::DenyReason::ExceedsLimit), at once.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), slidelog::redis::RedisLimitError> {
    /// let upload = limiter.until_n_ready("user42", 3).await?;
    /// # let _ = upload; Ok(()) }
    /// ```
    pub async fn until_n_ready(&self, key: &str, n: u32) -> Result<Admitted, RedisLimitError> {
        loop {
            match self.check_n(key, n).await? {
                Ok(admitted) => return Ok(admitted),
                Err(denied) if denied.is_rate_limited() => {
                    tokio::time::sleep(denied.retry_after()).await;
                }
                Err(denied) => return Err(RedisLimitError::Refused(denied)),
            }
        }
    }

    /// Test hook: the scripts with the server's time replaced by `now_us`
    /// (the public calls never pass a time: Redis `TIME` is the only clock).
    #[doc(hidden)]
    pub async fn check_n_at_server_time_override(
        &self,
        key: &str,
        n: u32,
        now_us: u64,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run(key, n, Some(now_us)).await
    }

    /// Test hook: [`check_n_with_growth`](Self::check_n_with_growth) with
    /// the server's time replaced by `now_us`.
    #[doc(hidden)]
    pub async fn check_n_with_growth_at_server_time_override(
        &self,
        key: &str,
        n: u32,
        now_us: u64,
    ) -> Result<Result<(Admitted, Duration), Denied>, RedisLimitError> {
        Ok(transpose_growth(
            self.run_timed(key, n, Some(now_us)).await?,
        ))
    }

    async fn run(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
    ) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        self.run_timed(key, n, now_us)
            .await
            .map(|(decision, _)| decision)
    }

    /// [`run`](Self::run), with the time until the reported policy's
    /// oldest admission in its window leaves it (zero for a denial, a
    /// failure or a local denial).
    async fn run_timed(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
    ) -> Result<(Result<Admitted, Denied>, Duration), RedisLimitError> {
        match self.ask(key, n, now_us, false).await {
            Err(e) if !matches!(e, RedisLimitError::KeyTooLong { .. }) => {
                self.fail(e).map(|d| (d, Duration::ZERO))
            }
            answer => answer,
        }
    }

    /// [`run_timed`](Self::run_timed) without the failure policy: a failed
    /// or timed-out round trip is an `Err`.
    async fn ask(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
        dry: bool,
    ) -> Result<(Result<Admitted, Denied>, Duration), RedisLimitError> {
        self.ask_told(key, n, now_us, dry)
            .await
            .map(|told| (told.decision, told.grows))
    }

    /// [`ask`](Self::ask), with every policy's room as the script told it.
    async fn ask_told(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
        dry: bool,
    ) -> Result<Told, RedisLimitError> {
        if key.len() > self.shared.max_key_len {
            return Err(RedisLimitError::KeyTooLong {
                len: key.len(),
                max: self.shared.max_key_len,
            });
        }
        // One configuration for the whole call, even if `reconfigure` races.
        let rules = self.shared.rules.load_full();
        let untimed = |decision: Result<Admitted, Denied>| Told {
            decision,
            grows: Duration::ZERO,
            rooms: Rooms::default(),
            rules: Some(std::sync::Arc::clone(&rules)),
        };
        if n > rules.min_limit {
            return Ok(untimed(Err(
                Denied::exceeds_limit(n, rules.min_limit).with_policy(rules.min_policy)
            )));
        }
        let full_key = self.redis_key(key);
        let local_now = self.shared.clock.now();
        if let Some(map) = &self.shared.precheck
            && now_us.is_none()
            && let Some(&(until, units, policy, generation)) = map.pin().get(&full_key)
            && n >= units
            && local_now < until
            && generation == rules.generation
        {
            // Relaxed: a statistic.
            self.shared.local_denials.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            metrics::counter!(
                "slidelog_redis_local_denials_total",
                "limiter" => self.shared.name.label()
            )
            .increment(1);
            // The policy Redis named: the same answer, without
            // the round trip.
            return Ok(untimed(Err(
                Denied::rate_limited(until - local_now).with_policy(policy)
            )));
        }
        // Relaxed: statistics and a unique-member counter.
        self.shared.round_trips.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("slidelog_redis_round_trips_total", "limiter" => self.shared.name.label())
            .increment(1);
        let member = format!(
            "{}:{}",
            self.shared.member,
            self.shared.sequence.fetch_add(1, Ordering::Relaxed)
        );
        let mut invocation = self.shared.script.key(&full_key);
        invocation.arg(n).arg(member);
        match now_us {
            Some(now) => invocation.arg(now),
            None => invocation.arg(""),
        };
        invocation
            .arg(rules.rules.len())
            .arg(rules.ring.0)
            .arg(rules.ring.1);
        for &(limit, window) in &rules.rules {
            invocation.arg(limit).arg(window);
        }
        invocation.arg(if dry { "1" } else { "0" });
        #[cfg(feature = "metrics")]
        let sent = std::time::Instant::now();
        let answer = self.bounded(self.conn.invoke(&invocation)).await;
        #[cfg(feature = "metrics")]
        metrics::histogram!("slidelog_redis_round_trip_seconds", "limiter" => self.shared.name.label())
            .record(sent.elapsed().as_secs_f64());
        let answer = answer?;
        let (Some(&[admitted, value, at, policy, grows]), rooms) = (
            answer.get(..5).and_then(|a| <&[i64; 5]>::try_from(a).ok()),
            Rooms::told(answer.get(5..).unwrap_or_default(), rules.rules.len()),
        ) else {
            return Err(RedisLimitError::Protocol(format!("{answer:?}")));
        };
        let value = u64::try_from(value).unwrap_or(0);
        let at_ns = u64::try_from(at).unwrap_or(0).saturating_mul(1_000);
        let policy = u8::try_from(policy)
            .ok()
            .filter(|&p| usize::from(p) < rules.rules.len())
            .unwrap_or(0);
        if admitted == 1 {
            let grows = Duration::from_micros(u64::try_from(grows).unwrap_or(0));
            Ok(Told {
                decision: Ok(Admitted {
                    at: at_ns,
                    remaining: u32::try_from(value).unwrap_or(0),
                    policy: policy.into(),
                }),
                grows,
                rooms,
                rules: Some(std::sync::Arc::clone(&rules)),
            })
        } else {
            let retry_ns = value.saturating_mul(1_000);
            if let Some(map) = &self.shared.precheck {
                let map = map.pin();
                let cap = self.shared.precheck_keys;
                if map.len() >= cap {
                    map.retain(|_, &(until, _, _, _)| until > local_now);
                }
                // Full of live denials: this one is not remembered (a miss
                // costs a round trip, never a wrong answer).
                if map.len() < cap || map.contains_key(&full_key) {
                    // From the time we *sent* the request: Redis judged it
                    // later, so the true retry time is no earlier than this.
                    map.insert(
                        full_key,
                        (
                            local_now.saturating_add(retry_ns),
                            n,
                            policy,
                            rules.generation,
                        ),
                    );
                }
            }
            Ok(Told {
                rooms,
                ..untimed(Err(
                    Denied::rate_limited(retry_ns.max(1)).with_policy(policy)
                ))
            })
        }
    }

    /// The denial of a failed check: the store could not decide; retry
    /// after the timeout.
    fn timeout_denial(&self) -> Denied {
        Denied::unavailable(
            u64::try_from(self.shared.timeout.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
        )
    }

    fn fail(&self, error: RedisLimitError) -> Result<Result<Admitted, Denied>, RedisLimitError> {
        // Relaxed: a statistic.
        self.shared.failures.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::debug!(target: "slidelog", error = %error, policy = ?self.shared.policy, "Redis check failed");
        #[cfg(feature = "metrics")]
        metrics::counter!("slidelog_redis_failures_total", "limiter" => self.shared.name.label())
            .increment(1);
        match self.shared.policy {
            FailurePolicy::Error => Err(error),
            FailurePolicy::Open => Ok(Ok(Admitted {
                at: 0,
                remaining: 0,
                policy: 0,
            })),
            FailurePolicy::Closed => Ok(Err(self.timeout_denial())),
        }
    }

    /// Round trips, local denials and failures so far.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) {
    /// let stats = limiter.stats();
    /// println!("{} round trips saved", stats.local_denials);
    /// # }
    /// ```
    pub fn stats(&self) -> RedisStats {
        // Relaxed: statistics.
        RedisStats {
            round_trips: self.shared.round_trips.load(Ordering::Relaxed),
            local_denials: self.shared.local_denials.load(Ordering::Relaxed),
            failures: self.shared.failures.load(Ordering::Relaxed),
        }
    }

    /// The per-key limit (the first policy's).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { assert!(limiter.limit() >= 1); }
    /// ```
    pub fn limit(&self) -> u32 {
        self.shared.rules.load().rules[0].0
    }

    /// The window (the first policy's; microsecond precision).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { let _ = limiter.window(); }
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.shared.rules.load().rules[0].1)
    }

    /// Every policy now, in the order given.
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { assert!(!limiter.policies().is_empty()); }
    /// ```
    pub fn policies(&self) -> Vec<Policy> {
        self.shared.rules.load().policies.clone()
    }

    /// Changes the policies of every key, for this limiter and its clones,
    /// keeping what Redis holds. Other processes sharing the keys judge by
    /// their own configuration until they change it too.
    ///
    /// Every call that starts after this returns sends the new policies,
    /// and Redis judges them over what the key holds, never a mix; local
    /// pre-check denials of the old policies are dropped.
    ///
    /// What a key holds, whoever calls it (this limiter before and after,
    /// [`with_quota`](Self::with_quota) siblings, replicas on other
    /// configurations): from the first call of each policy set that finds
    /// the key or admits into it, what that set can still count — in the
    /// ring layout the newest admissions up to the largest limit of those
    /// sets, in the sorted set every admission within their longest
    /// window. No call, of a smaller limit or a shorter window, drops
    /// that; the key expires that longest window after the last call that
    /// wrote it (an admission, or a call that grew what it holds).
    /// So every call is exact over the key's history as far as any policy
    /// set on it reaches, and where every limiter uses one window length,
    /// no such window ever holds more admissions than the largest limit in
    /// force in it (a cut and a restore within the window admit nothing
    /// more: the window's admissions are all still there).
    ///
    /// As [`Limiter::reconfigure`](crate::Limiter::reconfigure), a smaller
    /// limit, a shorter window or an added policy takes effect at once over
    /// that history, and a larger limit or a longer window counts only what
    /// the key holds. Unlike it: the key expires (above), so a window grown
    /// after the key's longest window has passed since its last write
    /// recalls nothing, where `Limiter` recalls what its ring kept however
    /// old; and the sorted set holds nothing older than the longest window
    /// that has judged the key, so a window grown past that recalls nothing
    /// older.
    ///
    /// # Errors
    ///
    /// None for a [`Quota`](crate::Quota), which is validated when made.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// limiter.reconfigure(slidelog::Quota::new(50, Duration::from_secs(60))?)?;
    /// assert_eq!(limiter.limit(), 50);
    /// # Ok(()) }
    /// ```
    pub fn reconfigure(&self, quota: crate::Quota) -> Result<(), ConfigError> {
        let _one_at_a_time = self
            .shared
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let generation = self.shared.rules.load().generation + 1;
        let rules = Rules::new(quota.policies().to_vec(), generation)?;
        self.shared.rules.store(std::sync::Arc::new(rules));
        if let Some(map) = &self.shared.precheck {
            map.pin().clear();
        }
        Ok(())
    }

    /// Another limiter on this one's connection, with `quota`'s policies
    /// and this one's options (layout, prefix, failure policy, timeout,
    /// local pre-check, name): no new connection is opened, so a service
    /// that decides keys under many policy sets (`slidelog serve`, one per
    /// configured or requested limit) holds one connection, not one per set.
    ///
    /// The two are separate limiters on the same Redis keys:
    /// [`reconfigure`](Self::reconfigure) on one does not change the other,
    /// each keeps its own [`stats`](Self::stats), and a key checked through
    /// both is judged each time by the policies of the limiter asked, over
    /// what the key holds: what both policy sets can count (see
    /// [`reconfigure`](Self::reconfigure)). 10 and 5 a minute alternating
    /// on one key admit 10 in the minute, as two replicas on those
    /// configurations do.
    ///
    /// ```no_run
    /// # async fn f(limiter: slidelog::redis::RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let strict = limiter.with_quota(&slidelog::Quota::new(2, Duration::from_secs(60))?);
    /// assert_eq!(strict.limit(), 2);
    /// assert!(strict.check("admin").await?.is_ok());
    /// # Ok(()) }
    /// ```
    pub fn with_quota(&self, quota: &crate::Quota) -> RedisLimiter {
        let rules = Rules::new(quota.policies().to_vec(), 0)
            .expect("a Quota's policies are validated when it is made");
        let shared = &self.shared;
        let prefix = shared.prefix.clone();
        RedisLimiter {
            conn: self.conn.clone(),
            shared: std::sync::Arc::new(Shared::new(
                shared.script.clone(),
                rules,
                shared.layout,
                prefix,
                Options {
                    policy: shared.policy,
                    timeout: shared.timeout,
                    max_key_len: shared.max_key_len,
                    precheck: shared.precheck.as_ref().map(|_| shared.precheck_keys),
                    name: shared.name.clone(),
                },
            )),
        }
    }

    /// How many times [`reconfigure`](Self::reconfigure) changed this
    /// limiter (and its clones).
    ///
    /// ```
    /// # fn f(limiter: &slidelog::redis::RedisLimiter) { let _ = limiter.generation(); }
    /// ```
    pub fn generation(&self) -> u64 {
        self.shared.rules.load().generation
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
}

/// The Redis key of `key` under `prefix` in `layout`
/// ([`RedisLimiter::redis_key`]). Ring names begin `prefix + "ring:"`;
/// sorted-set names never do, since a key that begins `ring:` (or `log:`,
/// which keeps the escape one to one) is written after `log:`.
fn redis_name(prefix: &str, layout: Layout, key: &str) -> String {
    let marker = match layout {
        Layout::Ring => "ring:",
        Layout::SortedSet if key.starts_with("ring:") || key.starts_with("log:") => "log:",
        Layout::SortedSet => "",
    };
    [prefix, marker, key].concat()
}

#[cfg(feature = "tower")]
impl crate::tower::Backend<String> for RedisLimiter {
    type Future =
        core::pin::Pin<Box<dyn core::future::Future<Output = crate::tower::Verdict> + Send>>;

    fn check(&self, key: String) -> Self::Future {
        let limiter = self.clone();
        Box::pin(async move {
            let (told, degraded) = match limiter.ask_told(&key, 1, None, false).await {
                Ok(told) => (told, false),
                // A client's key too long to store: refused as over the
                // limit would be (it can never be counted).
                Err(RedisLimitError::KeyTooLong { .. }) => {
                    let retry = limiter.timeout_denial().retry_after_nanos();
                    let told = Told {
                        decision: Err(Denied::rate_limited(retry)),
                        grows: Duration::ZERO,
                        rooms: Rooms::default(),
                        rules: None,
                    };
                    (told, false)
                }
                // The store failed: the failure policy answers, and
                // `FailurePolicy::Error` behind HTTP denies (refusing is
                // safer than letting a request through unlimited).
                Err(e) => {
                    let decision = match limiter.fail(e) {
                        Ok(decision) => decision,
                        Err(_) => Err(limiter.timeout_denial()),
                    };
                    let told = Told {
                        decision,
                        grows: Duration::ZERO,
                        rooms: Rooms::default(),
                        rules: None,
                    };
                    (told, true)
                }
            };
            // Every policy's item in the `RateLimit` field, as in process,
            // when the script told each one's room.
            let per_policy = (told.rooms.len > 0)
                .then(|| crate::tower::PolicyStates::new(told.rooms.as_slice()));
            // The policies the script judged by: the call's rules.
            let decided_by = match &told.rules {
                Some(rules) => {
                    crate::tower::DecidedBy::Policies(crate::tower::PolicySet::new(&rules.policies))
                }
                None => crate::tower::DecidedBy::Unsaid,
            };
            crate::tower::Verdict {
                degraded,
                per_policy,
                decided_by,
                ..crate::tower::Verdict::new(told.decision, told.grows)
            }
        })
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        RedisLimiter::policies(self)
    }

    fn generation(&self) -> u64 {
        RedisLimiter::generation(self)
    }
}

#[cfg(test)]
mod tests {
    use super::{Layout, cluster_slot, keys_on_each_primary, redis_name};
    use proptest::prelude::*;

    /// Slots as Redis computes them (`CLUSTER KEYSLOT`, and the Redis
    /// Cluster specification's hash tag examples).
    #[test]
    fn cluster_slots_are_redis_own() {
        assert_eq!(cluster_slot(b"foo"), 12_182);
        assert_eq!(cluster_slot(b"123456789"), 0x31C3);
        assert_eq!(
            cluster_slot(b"{user1000}.following"),
            cluster_slot(b"user1000")
        );
        assert_ne!(cluster_slot(b"foo{}{bar}"), cluster_slot(b"bar"));
        assert_eq!(cluster_slot(b"foo{{bar}}zap"), cluster_slot(b"{bar"));
        assert_eq!(cluster_slot(b"foo{bar}{zap}"), cluster_slot(b"bar"));
    }

    /// One key per primary, each in that primary's slots; a hash-tagged
    /// prefix reaches only the primary of its slot.
    #[test]
    fn a_key_lands_on_each_primary() {
        use ::redis::Value;
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
            ])
        };
        let range = |start: i64, end: i64, port: i64| {
            Value::Array(vec![Value::Int(start), Value::Int(end), node(port)])
        };
        // The primary on port 1 owns two ranges, the one on port 3 one slot.
        let slots = Value::Array(vec![
            range(0, 5000, 1),
            range(5001, 5001, 3),
            range(5002, 10_000, 2),
            range(10_001, 16_383, 1),
        ]);
        let keys = keys_on_each_primary("p:", &slots).unwrap();
        let owners: Vec<u16> = keys.iter().map(|k| cluster_slot(k.as_bytes())).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(owners[0] <= 5000 || owners[0] > 10_000, "{owners:?}");
        assert_eq!(owners[1], 5001, "{owners:?}");
        assert!((5002..=10_000).contains(&owners[2]), "{owners:?}");
        let tagged = keys_on_each_primary("{t}:", &slots).unwrap();
        assert_eq!(tagged.len(), 1, "{tagged:?}");
        assert_eq!(cluster_slot(tagged[0].as_bytes()), cluster_slot(b"t"));
        assert!(keys_on_each_primary("p:", &Value::Int(1)).is_err());
        assert!(keys_on_each_primary("p:", &Value::Array(vec![range(5, 16_384, 1)])).is_err());
    }

    /// Keys built from the markers' pieces, so that prefixes of one
    /// another and spellings of the other layout's names are common.
    fn key() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof!["ring:", "log:", "ring", "log", ":", "x", ""],
            0..4,
        )
        .prop_map(|parts| parts.concat())
    }

    fn layout() -> impl Strategy<Value = Layout> {
        prop_oneof![Just(Layout::Ring), Just(Layout::SortedSet)]
    }

    proptest! {
        /// Two keys name one Redis key only if they are the same key in the
        /// same layout.
        /// `b` is drawn at random or from `a` with a marker put before it
        /// or taken off it, where collisions would be.
        #[test]
        fn names_are_one_to_one(
            a in key(),
            other in key(),
            derive in 0..5usize,
            la in layout(),
            lb in layout(),
        ) {
            let b = match derive {
                0 => format!("ring:{a}"),
                1 => format!("log:{a}"),
                2 => a.strip_prefix("ring:").unwrap_or(&other).to_owned(),
                3 => a.strip_prefix("log:").unwrap_or(&other).to_owned(),
                _ => other,
            };
            let (x, y) = (redis_name("p:", la, &a), redis_name("p:", lb, &b));
            prop_assert_eq!(x == y, (la, &a) == (lb, &b), "{:?} {:?} / {:?} {:?}", la, a, lb, b);
        }

        /// Any `CLUSTER SLOTS` answer, however malformed (bounds out of
        /// range or reversed, fields missing or of other types, ranges
        /// overlapping), is read without a panic; one that is read gives at
        /// most a key per primary, each in a slot whose last range names
        /// that primary, and one for every primary owning a slot when the
        /// prefix has no hash tag.
        #[test]
        fn any_cluster_slots_answer_is_read_safely(
            ranges in proptest::collection::vec(
                (
                    prop_oneof![12 => 0..16_384i64, 1 => Just(-1i64), 1 => any::<i64>()],
                    prop_oneof![4 => 0..64i64, 2 => 0..16_384i64, 1 => any::<i64>()],
                    0..4i64,
                    0..32u8,
                ),
                0..6,
            ),
            tagged in any::<bool>(),
        ) {
            use ::redis::Value;
            let answer = Value::Array(
                ranges
                    .iter()
                    .map(|&(start, len, primary, shape)| (start, start.wrapping_add(len), primary, shape))
                    .map(|(start, end, primary, shape)| match shape {
                        0 => Value::Int(start),
                        1 => Value::Array(vec![Value::Int(start), Value::Int(end)]),
                        2 => Value::Array(vec![Value::Int(start), Value::Nil, Value::Int(primary)]),
                        _ => Value::Array(vec![Value::Int(start), Value::Int(end), Value::Int(primary)]),
                    })
                    .collect(),
            );
            let prefix = if tagged { "{t}p:" } else { "p:" };
            let Ok(keys) = keys_on_each_primary(prefix, &answer) else {
                return Ok(());
            };
            // Who owns each slot, as read: the last range over it.
            let mut owner = vec![None; 16_384];
            for &(start, len, primary, _) in &ranges {
                owner[start as usize..=(start + len) as usize].fill(Some(primary));
            }
            let mut owning: Vec<i64> = owner.iter().flatten().copied().collect();
            owning.sort_unstable();
            owning.dedup();
            let mut reached: Vec<i64> = keys
                .iter()
                .map(|key| owner[usize::from(cluster_slot(key.as_bytes()))].expect("an owned slot"))
                .collect();
            reached.sort_unstable();
            let all = reached.len();
            reached.dedup();
            prop_assert_eq!(reached.len(), all, "two keys on one primary: {:?}", keys);
            if !tagged {
                prop_assert_eq!(all, owning.len(), "{:?}", keys);
            }
        }
    }

    #[test]
    fn plain_keys_keep_their_names() {
        assert_eq!(redis_name("p:", Layout::SortedSet, "user42"), "p:user42");
        assert_eq!(redis_name("p:", Layout::Ring, "user42"), "p:ring:user42");
        assert_eq!(
            redis_name("p:", Layout::SortedSet, "ring:u"),
            "p:log:ring:u"
        );
        assert_eq!(redis_name("p:", Layout::Ring, "ring:u"), "p:ring:ring:u");
    }
}
