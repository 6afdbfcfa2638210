//! One node or a cluster: a script call routed to its key's node, sent
//! again while its slot moves, and every round trip bounded by the timeout.

use std::time::Duration;

use ::redis::ScriptInvocation;
use ::redis::aio::{ConnectionLike, ConnectionManager};
use ::redis::cluster_async::ClusterConnection;

use super::{RedisLimitError, RedisLimiter};
use crate::sync::atomic::{AtomicUsize, Ordering};

/// One node (a reconnecting manager) or a cluster (routed by key slot).
#[derive(Clone)]
pub(super) enum Conn {
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
    pub(super) async fn invoke(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> ::redis::RedisResult<Vec<i64>> {
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

    /// `DEL key`: how many keys it removed.
    pub(super) async fn delete(&self, key: &str) -> ::redis::RedisResult<i64> {
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
pub(super) const CLUSTER_RETRIES: u32 = 8;

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

impl RedisLimiter {
    /// One round trip, bounded by the timeout and by the calls in flight:
    /// its answer, its error as [`RedisLimitError::Redis`],
    /// [`RedisLimitError::Timeout`], or, with `max_in_flight` calls already
    /// waiting, [`RedisLimitError::Overloaded`] at once.
    pub(super) async fn bounded<T>(
        &self,
        round_trip: impl Future<Output = ::redis::RedisResult<T>>,
    ) -> Result<T, RedisLimitError> {
        let Some(_waiting) = InFlight::take(&self.shared.in_flight, self.shared.max_in_flight)
        else {
            return Err(RedisLimitError::Overloaded {
                max_in_flight: self.shared.max_in_flight,
            });
        };
        match tokio::time::timeout(self.shared.timeout, round_trip).await {
            Ok(answer) => answer.map_err(RedisLimitError::Redis),
            Err(_) => Err(RedisLimitError::Timeout(self.shared.timeout)),
        }
    }
}

/// One round trip's place among those waiting for Redis, given back when
/// it ends (answered, failed, timed out or dropped).
///
/// Relaxed, here and in `drop`: the count bounds how many calls wait and
/// orders no other memory; increments and decrements of one atomic are
/// totally ordered whatever their ordering, so it is exact.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    /// A place, if fewer than `max` are taken (a refused call never counts,
    /// even for an instant).
    fn take(count: &'a AtomicUsize, max: usize) -> Option<InFlight<'a>> {
        let mut taken = count.load(Ordering::Relaxed);
        loop {
            if taken >= max {
                return None;
            }
            match count.compare_exchange_weak(
                taken,
                taken + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(InFlight(count)),
                Err(now) => taken = now,
            }
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
