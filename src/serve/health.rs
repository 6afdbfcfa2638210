//! The service's health: gRPC's health service and `GET /healthcheck`,
//! serving once the store is ready.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;

use super::*;

/// The gRPC health service names told the service's health: the server as
/// a whole (""), the rate-limit service's own name, and `ratelimit`, the
/// name envoyproxy/ratelimit reports under (health checks written for it
/// ask for that).
pub(super) const HEALTH_NAMES: [&str; 3] = [
    "",
    <RateLimitServiceServer<Service> as tonic::server::NamedService>::NAME,
    "ratelimit",
];

/// The service's health, as envoyproxy/ratelimit keeps it: serving once
/// its store is ready (with Redis, once it has been reached), and no more
/// from SIGTERM on; told by gRPC's health service ([`HEALTH_NAMES`]) and by
/// `GET /healthcheck`.
pub(super) struct Health {
    pub(super) reporter: tonic_health::server::HealthReporter,
    /// Held while a change is told, so that the last status told is the
    /// state's last.
    pub(super) state: tokio::sync::Mutex<HealthState>,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HealthState {
    pub(super) store_ready: bool,
    /// Redis stopped answering after it was reached (only watched with
    /// `--redis-health-check-active-connection`: [`watch_redis`]).
    pub(super) store_lost: bool,
    pub(super) stopping: bool,
}

impl HealthState {
    pub(super) fn serving(self) -> bool {
        self.store_ready && !self.store_lost && !self.stopping
    }
}

impl Health {
    pub(super) fn new(reporter: tonic_health::server::HealthReporter) -> Health {
        Health {
            reporter,
            state: tokio::sync::Mutex::new(HealthState::default()),
        }
    }

    pub(super) async fn serving(&self) -> bool {
        self.state.lock().await.serving()
    }

    /// Changes the state, then tells every name.
    pub(super) async fn update(&self, change: impl FnOnce(&mut HealthState)) {
        let mut state = self.state.lock().await;
        change(&mut state);
        let status = if state.serving() {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        for name in HEALTH_NAMES {
            self.reporter.set_service_status(name, status).await;
        }
    }
}

/// Connects the store (Redis: retrying, from 100 ms to 5 s apart, saying
/// so once on stderr), then reports the service healthy. Until then every
/// call is answered `UNAVAILABLE` and health says not serving.
pub(super) async fn connect_store(service: Arc<Service>, health: Arc<Health>) {
    let mut pause = Duration::from_millis(100);
    let mut told = false;
    loop {
        match service.store.connect().await {
            Ok(()) => break,
            Err(error) if !told => {
                eprintln!(
                    "slidelog serve: {}; not serving until it answers",
                    error.message()
                );
                told = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    if told {
        eprintln!("slidelog serve: redis reached; serving");
    }
    health.update(|state| state.store_ready = true).await;
}

/// How often [`watch_redis`] pings Redis once it answered (and, when it
/// does not, once its timeout has passed).
pub(super) const REDIS_HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// How many pings in a row must fail before [`watch_redis`] says not
/// serving: one ping slower than a tight `--redis-timeout` (a fork for a
/// snapshot, a busy moment) is not a Redis gone.
pub(super) const REDIS_HEALTH_FAILURES: u32 = 2;

/// With `--redis-health-check-active-connection` (envoyproxy/ratelimit's
/// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`), once the store was reached:
/// pings Redis every [`REDIS_HEALTH_INTERVAL`] ([`Store::ping`]: on a
/// cluster every primary, the whole ping bounded by `--redis-timeout`),
/// says not serving once [`REDIS_HEALTH_FAILURES`] pings in a row have
/// failed and serving again at the first that answers, and says each
/// change once on stderr. Calls are answered all along, as Redis lets
/// them be: health tells a load balancer or Envoy's health checker to
/// prefer another replica, not this one to stop.
pub(super) async fn watch_redis(service: Arc<Service>, health: Arc<Health>) {
    let mut failures = 0;
    loop {
        tokio::time::sleep(REDIS_HEALTH_INTERVAL).await;
        let was_lost = failures >= REDIS_HEALTH_FAILURES;
        match service.store.ping().await {
            Ok(()) => {
                failures = 0;
                if was_lost {
                    eprintln!("slidelog serve: redis answers again; serving");
                    health.update(|state| state.store_lost = false).await;
                }
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                if failures == REDIS_HEALTH_FAILURES {
                    eprintln!(
                        "slidelog serve: {}; not serving until it answers",
                        error.message()
                    );
                    health.update(|state| state.store_lost = true).await;
                }
            }
        }
    }
}
