//! Where the logs live: a [`Backend`] every decision goes through — the
//! in-process keyed limiter, or the Redis limiter connected on first use —
//! each key judged by the quota the configuration gives it now, and what
//! the service asks of a store beyond its decisions.

use crate::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tonic::Status;

use crate::redis::{RedisLimitError, RedisLimiter};
use crate::{Admitted, Backend, Denied, Policy, Quota, Request, Verdict};

use super::local::Local;
use super::*;

/// A verdict on its way: one type for every store.
pub(super) type Judging = Pin<Box<dyn Future<Output = Verdict> + Send>>;

/// A store's connection, or its ping, on its way.
pub(super) type Reaching<'a> = Pin<Box<dyn Future<Output = Result<(), Status>> + Send + 'a>>;

/// A key's quota under the configuration now ([`quota_of`]).
pub(super) type QuotaOf = Arc<dyn Fn(&str) -> Option<Quota> + Send + Sync>;

/// The quota of a key the configuration does not limit, which a store's
/// builder needs as its default: 11 units a nanosecond, the most whose
/// log a map entry keeps inline. Every call the service decides is for a
/// key its configuration limits, so only a key the configuration stopped
/// limiting meets it — a live key a reload took the limit from, or a call
/// racing that reload — and such a key is, as it should be, limited in name
/// only; in process its state is the smallest, idle at once and evicted by
/// the next sweep.
pub(super) fn unconfigured() -> Policy {
    Policy::new(11, Duration::from_nanos(1))
}

/// The longest limiter key kept in Redis, in bytes: a descriptor whose key
/// is longer (its entries are the client's) is answered over the limit
/// ([`Store::refuses`]).
pub(super) const REDIS_MAX_KEY: usize = 8_192;

/// A store: its decisions through [`Backend`], and what the service asks
/// of it beyond them (the in-process limiter's memory budget and state
/// file, Redis's connection and health).
pub(super) trait Store: Backend<String, Future = Judging> {
    /// How the service describes it.
    fn kind(&self) -> &'static str;

    /// The in-process limiter, if the logs live in process.
    fn local(&self) -> Option<&Local> {
        None
    }

    /// The in-process limiter, to restore its logs into.
    fn local_mut(&mut self) -> Option<&mut Local> {
        None
    }

    /// Whether this store cannot keep `key`: Redis keeps keys up to
    /// [`REDIS_MAX_KEY`] bytes. Such a descriptor is answered over the
    /// limit: an error would let Envoy's default (failing open) admit
    /// every request whose value is long enough.
    fn refuses(&self, key: &str) -> bool {
        let _ = key;
        false
    }

    /// Makes the store's connection if it has none yet: `Ok` once it is
    /// made (at once in process).
    fn connect(&self) -> Reaching<'_> {
        Box::pin(async { Ok(()) })
    }

    /// Whether the store answers: in process always; Redis if reached and
    /// answering a ping ([`RedisLimiter::ping`]: on a cluster, every
    /// primary).
    fn ping(&self) -> Reaching<'_> {
        Box::pin(async { Ok(()) })
    }

    /// The call's answer when a verdict could not be decided (degraded):
    /// `UNAVAILABLE`, saying why.
    fn failure(&self) -> Status {
        Status::unavailable("the store could not decide")
    }

    /// Every key is judged by the quota the configuration gives it now
    /// (after a reload), keeping its history.
    fn requota(&self);
}

impl dyn Store {
    /// `request` for `key`: decided at once in process, awaited from
    /// Redis; an admission recorded also says when `remaining` next grows
    /// (zero for a dry run), a verdict the store could not decide is the
    /// call's `UNAVAILABLE`.
    pub(super) async fn judge_key(
        &self,
        key: &String,
        request: Request,
    ) -> Result<Result<(Admitted, Duration), Denied>, Status> {
        let verdict = match self.judge_now(key, request) {
            Some(verdict) => verdict,
            None => self.judge(key.clone(), request).await,
        };
        if verdict.degraded {
            return Err(self.failure());
        }
        Ok(verdict.decision.map(|admitted| (admitted, verdict.wait)))
    }
}

/// In process: one keyed limiter whose per-key quotas come from the
/// configuration ([`local::limiter`]).
pub(super) struct InProcess(pub(super) Local);

impl Backend<String> for InProcess {
    type Future = Judging;

    fn judge(&self, key: String, request: Request) -> Judging {
        Box::pin(Backend::judge(&self.0, key, request))
    }

    fn judge_now(&self, key: &String, request: Request) -> Option<Verdict> {
        Backend::judge_now(&self.0, key, request)
    }

    fn policy(&self) -> (u32, Duration) {
        Backend::<String>::policy(&self.0)
    }
}

impl Store for InProcess {
    fn kind(&self) -> &'static str {
        "in process"
    }

    fn local(&self) -> Option<&Local> {
        Some(&self.0)
    }

    fn local_mut(&mut self) -> Option<&mut Local> {
        Some(&mut self.0)
    }

    fn requota(&self) {
        self.0.requota();
    }
}

/// Redis, shared by every replica of the service: one limiter, connected
/// on first use (the service starts while Redis is down, answering
/// `UNAVAILABLE` until it is up), whose quota function reads the
/// configuration, so each call sends its key's policies (and a key whose
/// policies change keeps its history: the ring script rebuilds it).
pub(super) struct Redis(Arc<Reach>);

/// How Redis is reached, and what it said last.
struct Reach {
    target: RedisTarget,
    tls: RedisTls,
    /// What every key starts with.
    prefix: String,
    /// The longest a round trip (or connecting) may take.
    timeout: Duration,
    quota: QuotaOf,
    /// The limiter, once connected.
    limiter: tokio::sync::OnceCell<RedisLimiter>,
    /// Whether the last call failed: a Redis that stops answering is told
    /// once, and again when it answers.
    failing: Arc<AtomicBool>,
    /// The last failure, for the calls it answers `UNAVAILABLE`.
    failure: Arc<Mutex<String>>,
}

impl Redis {
    pub(super) fn new(
        target: RedisTarget,
        tls: RedisTls,
        prefix: String,
        timeout: Duration,
        quota: QuotaOf,
    ) -> Redis {
        Redis(Arc::new(Reach {
            target,
            tls,
            prefix,
            timeout,
            quota,
            limiter: tokio::sync::OnceCell::new(),
            failing: Arc::new(AtomicBool::new(false)),
            failure: Arc::new(Mutex::new(String::new())),
        }))
    }
}

impl Reach {
    /// The limiter, connected on first use.
    async fn limiter(&self) -> Result<&RedisLimiter, Status> {
        self.limiter
            .get_or_try_init(|| async {
                let default = unconfigured();
                let builder = match &self.target {
                    RedisTarget::Node(url) => {
                        RedisLimiter::builder(url.as_str(), default.limit, default.window)
                    }
                    RedisTarget::Cluster(nodes) => RedisLimiter::cluster_builder(
                        nodes.iter().map(String::as_str),
                        default.limit,
                        default.window,
                    ),
                };
                let quota = Arc::clone(&self.quota);
                let (failing, failure) = (Arc::clone(&self.failing), Arc::clone(&self.failure));
                self.tls
                    .apply(builder)
                    .layout(crate::redis::Layout::Ring)
                    .prefix(self.prefix.as_str())
                    .timeout(self.timeout)
                    .max_key_len(REDIS_MAX_KEY)
                    .name("rls")
                    .quota(move |key: &str| quota(key))
                    .on_failure(move |e| {
                        // Relaxed: a flag for what stderr says, ordering
                        // nothing (the words are under their lock).
                        if !failing.swap(true, Relaxed) {
                            eprintln!(
                                "slidelog serve: Redis stopped answering ({e}): calls are UNAVAILABLE until it answers again"
                            );
                        }
                        *failure.lock().unwrap_or_else(PoisonError::into_inner) = words(e);
                    })
                    .connect()
                    .await
                    .map_err(unavailable)
            })
            .await
    }

    /// A verdict the store could not decide, for `status`'s reason.
    fn undecided(&self, status: &Status) -> Verdict {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = status.message().into();
        let retry = u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX);
        Verdict {
            degraded: true,
            ..Verdict::new(Err(Denied::unavailable(retry.max(1))), Duration::ZERO)
        }
    }
}

impl Backend<String> for Redis {
    type Future = Judging;

    fn judge(&self, key: String, request: Request) -> Judging {
        let reach = Arc::clone(&self.0);
        Box::pin(async move {
            let limiter = match reach.limiter().await {
                Ok(limiter) => limiter,
                Err(status) => return reach.undecided(&status),
            };
            let verdict = Backend::judge(limiter, key, request).await;
            // Relaxed: see `on_failure` above.
            if !verdict.degraded
                && reach.failing.load(Relaxed)
                && reach.failing.swap(false, Relaxed)
            {
                eprintln!("slidelog serve: Redis answers calls again");
            }
            verdict
        })
    }

    fn policy(&self) -> (u32, Duration) {
        let default = unconfigured();
        (default.limit, default.window)
    }
}

impl Store for Redis {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn refuses(&self, key: &str) -> bool {
        key.len() > REDIS_MAX_KEY
    }

    fn connect(&self) -> Reaching<'_> {
        Box::pin(async { self.0.limiter().await.map(drop) })
    }

    fn ping(&self) -> Reaching<'_> {
        Box::pin(async { self.0.limiter().await?.ping().await.map_err(unavailable) })
    }

    fn failure(&self) -> Status {
        Status::unavailable(
            self.0
                .failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }

    fn requota(&self) {
        if let Some(limiter) = self.0.limiter.get() {
            limiter.requota();
        }
    }
}

/// A Redis failure in words, naming Redis once.
fn words(e: &RedisLimitError) -> String {
    let message = e.to_string();
    if message.starts_with("redis") {
        message
    } else {
        format!("redis: {message}")
    }
}

/// A Redis failure as the call's `UNAVAILABLE`.
pub(super) fn unavailable(e: RedisLimitError) -> Status {
    Status::unavailable(words(&e))
}
