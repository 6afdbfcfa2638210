//! The script call: what the scripts take, the call, and the reading of
//! its answer.

use std::sync::Arc;
use std::time::Duration;

use ::redis::ScriptInvocation;

use super::reconfigure::Rules;
use super::{RedisLimitError, RedisLimiter};
use crate::clock::Clock;
use crate::decision::{Admitted, Denied};
use crate::sync::atomic::Ordering;

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
pub(super) const SORTED_SET: &str = include_str!("sorted_set.lua");

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
///
/// A call reads what its decision needs, not the ring (`GETRANGE`, each
/// slot at most once): the header, the slot before the head, each
/// policy's deciding slot and the `O(log L_i)` slots of its binary search
/// for the first live candidate (the search's last 128 candidates in one
/// read); it writes the admitted run from the head as at most two
/// `SETRANGE`s (the run wraps at most once, the header riding on its part
/// at slot 0). Its cost grows with `log L` at most. A ring that grows (or
/// gains the header) is read and rewritten whole, once.
pub(super) const RING: &str = include_str!("ring.lua");

/// What one script call told: the decision, when the room of the policy
/// it names grows, and (with several policies, not for a dry run) each
/// policy's room.
pub(super) struct Told {
    pub(super) decision: Result<Admitted, Denied>,
    pub(super) grows: Duration,
    /// Read by `RedisLimiter::judged` (judged.rs).
    pub(super) rooms: Rooms,
    /// The policies that decided (the call's one configuration; `None`:
    /// none did, as for a key too long or a failed call). Read by
    /// `RedisLimiter::judged` (judged.rs).
    pub(super) rules: Option<Arc<Rules>>,
}

impl Told {
    /// A decision made without a round trip (more units than the least
    /// limit, a denial the pre-check remembers): no growth, no rooms, and
    /// the call's `rules`.
    fn untimed(decision: Result<Admitted, Denied>, rules: &Arc<Rules>) -> Told {
        Told {
            decision,
            grows: Duration::ZERO,
            rooms: Rooms::default(),
            rules: Some(Arc::clone(rules)),
        }
    }
}

/// Each policy's units left and the wait until that grows, in the order
/// given (`len` 0: not told).
#[derive(Clone, Copy, Default)]
pub(super) struct Rooms {
    pub(super) len: u8,
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

    pub(super) fn as_slice(&self) -> &[(u32, Duration)] {
        &self.items[..usize::from(self.len)]
    }
}

/// A script's answer, read: the five words every answer begins with, and
/// the rooms after them.
struct Answer {
    admitted: bool,
    /// An admission's `remaining`, a denial's `retry_after` (µs).
    value: u64,
    /// The time the script judged at (an admission's `t_eff`), in ns
    /// since the Unix epoch.
    at_ns: u64,
    /// The policy it names (0 if the script named none of the call's).
    policy: u8,
    /// When an admission's least room grows.
    grows: Duration,
    rooms: Rooms,
}

impl Answer {
    /// `answer` to a call of `policies` policies; an answer of another
    /// shape is [`RedisLimitError::Protocol`].
    fn read(answer: &[i64], policies: usize) -> Result<Answer, RedisLimitError> {
        let (Some(&[admitted, value, at, policy, grows]), rooms) = (
            answer.get(..5).and_then(|a| <&[i64; 5]>::try_from(a).ok()),
            Rooms::told(answer.get(5..).unwrap_or_default(), policies),
        ) else {
            return Err(RedisLimitError::Protocol(format!("{answer:?}")));
        };
        Ok(Answer {
            admitted: admitted == 1,
            value: u64::try_from(value).unwrap_or(0),
            at_ns: u64::try_from(at).unwrap_or(0).saturating_mul(1_000),
            policy: u8::try_from(policy)
                .ok()
                .filter(|&p| usize::from(p) < policies)
                .unwrap_or(0),
            grows: Duration::from_micros(u64::try_from(grows).unwrap_or(0)),
            rooms,
        })
    }
}

impl RedisLimiter {
    /// [`run_timed`](Self::run_timed) without the failure policy: a failed
    /// or timed-out round trip is an `Err`.
    pub(super) async fn ask(
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
    pub(super) async fn ask_told(
        &self,
        key: &str,
        n: u32,
        now_us: Option<u64>,
        dry: bool,
    ) -> Result<Told, RedisLimitError> {
        self.key_fits(key)?;
        // One configuration for the whole call, even if `reconfigure` or
        // `requota` races: the count of requotas first, then the rules.
        let requotas = self.shared.requotas.load(Ordering::SeqCst);
        let rules = self.rules_for(key);
        if n > rules.min_limit {
            return Ok(Told::untimed(
                Err(Denied::exceeds_limit(n, rules.min_limit).with_policy(rules.min_policy)),
                &rules,
            ));
        }
        let full_key = self.redis_key(key);
        let local_now = self.shared.clock.now();
        if now_us.is_none()
            && let Some(denied) =
                self.remembered_denial(&full_key, n, local_now, (&rules, requotas))
        {
            return Ok(Told::untimed(Err(denied), &rules));
        }
        let answer = self.call(&full_key, n, now_us, dry, &rules).await?;
        let answer = Answer::read(&answer, rules.rules.len())?;
        if answer.admitted {
            return Ok(Told {
                decision: Ok(Admitted {
                    at: answer.at_ns,
                    remaining: u32::try_from(answer.value).unwrap_or(0),
                    policy: answer.policy.into(),
                }),
                grows: answer.grows,
                rooms: answer.rooms,
                rules: Some(rules),
            });
        }
        let retry_ns = answer.value.saturating_mul(1_000);
        self.remember_denial(
            full_key,
            n,
            local_now,
            retry_ns,
            answer.policy,
            (&rules, requotas),
        );
        Ok(Told {
            rooms: answer.rooms,
            ..Told::untimed(
                Err(Denied::rate_limited(retry_ns.max(1)).with_policy(answer.policy)),
                &rules,
            )
        })
    }

    /// One call of the script for `n` units of `full_key` under `rules`
    /// (counted, and timed with feature `metrics`), bounded by the timeout.
    async fn call(
        &self,
        full_key: &str,
        n: u32,
        now_us: Option<u64>,
        dry: bool,
        rules: &Rules,
    ) -> Result<Vec<i64>, RedisLimitError> {
        // Relaxed: a statistic.
        self.shared.round_trips.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("slidelog_redis_round_trips_total", "limiter" => self.shared.name.label())
            .increment(1);
        let invocation = self.invocation(full_key, n, now_us, dry, rules);
        #[cfg(feature = "metrics")]
        let sent = std::time::Instant::now();
        let answer = self.bounded(self.conn.invoke(&invocation)).await;
        #[cfg(feature = "metrics")]
        metrics::histogram!("slidelog_redis_round_trip_seconds", "limiter" => self.shared.name.label())
            .record(sent.elapsed().as_secs_f64());
        answer
    }

    /// The script's key and arguments (see [`SORTED_SET`]) for `n` units of
    /// `full_key` under `rules`.
    fn invocation(
        &self,
        full_key: &str,
        n: u32,
        now_us: Option<u64>,
        dry: bool,
        rules: &Rules,
    ) -> ScriptInvocation<'_> {
        // Relaxed: a counter that only has to give unique members.
        let member = format!(
            "{}:{}",
            self.shared.member,
            self.shared.sequence.fetch_add(1, Ordering::Relaxed)
        );
        let mut invocation = self.shared.script.key(full_key);
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
        invocation
    }
}
