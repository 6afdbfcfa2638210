//! The public API's common traits, checked at compile time, and
//! the uniform check / peek / until_ready family.

use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::time::Duration;

use slidelog::{
    Admitted, ConfigError, CounterMode, Denied, DenyReason, KeyedBuilder, KeyedCounter,
    KeyedLimiter, Limiter, ManualClock, QuantaClock, RateLimit, SlidingCounter,
};

fn send_sync<T: Send + Sync>() {}
fn debug<T: Debug>() {}
fn value<T: Clone + Copy + Debug + PartialEq + Eq + Hash + Send + Sync>() {}
fn error<T: std::error::Error + Display + Send + Sync + 'static>() {}

/// Compile-time: these calls only type-check if the traits hold.
#[test]
fn public_types_have_the_common_traits() {
    send_sync::<Limiter>();
    send_sync::<Limiter<ManualClock>>();
    send_sync::<SlidingCounter>();
    send_sync::<KeyedLimiter<u64>>();
    send_sync::<KeyedLimiter<String, ManualClock>>();
    send_sync::<KeyedCounter<String>>();
    debug::<Limiter>();
    debug::<SlidingCounter<ManualClock>>();
    debug::<KeyedLimiter<u64>>();
    debug::<KeyedBuilder<u64, QuantaClock, std::collections::hash_map::RandomState>>();
    value::<Admitted>();
    value::<Denied>();
    value::<DenyReason>();
    value::<ConfigError>();
    value::<CounterMode>();
    error::<Denied>();
    error::<ConfigError>();
    fn clone_default<T: Clone + Default + Debug>() {}
    clone_default::<ManualClock>();
    fn clone<T: Clone>() {}
    clone::<QuantaClock>();
    clone::<KeyedBuilder<u64, ManualClock, std::collections::hash_map::RandomState>>();
}

#[cfg(feature = "redis")]
#[test]
fn the_redis_limiter_is_send_sync_clone_debug() {
    fn all<T: Send + Sync + Clone + Debug>() {}
    all::<slidelog::redis::RedisLimiter>();
    all::<slidelog::redis::RedisBuilder>();
    error::<slidelog::redis::RedisLimitError>();
}

#[cfg(feature = "tower")]
#[test]
fn the_layer_and_extractors_have_the_common_traits() {
    use slidelog::tower::{DenyStyle, GlobalKey, HeaderKey, HeaderStyle, PeerIp, RateLimitLayer};
    use std::sync::Arc;
    send_sync::<RateLimitLayer<KeyedLimiter<String>, HeaderKey, String>>();
    send_sync::<RateLimitLayer<KeyedLimiter<std::net::IpAddr>, PeerIp, std::net::IpAddr>>();
    fn clone_debug<T: Clone + Debug + Send + Sync>() {}
    clone_debug::<RateLimitLayer<KeyedLimiter<String>, HeaderKey, String>>();
    clone_debug::<HeaderKey>();
    type Inner = tower::util::BoxCloneSyncService<
        http::Request<()>,
        http::Response<()>,
        std::convert::Infallible,
    >;
    clone_debug::<slidelog::tower::RateLimitService<Inner, KeyedLimiter<String>, HeaderKey, String>>(
    );
    fn eq_default<T: Clone + Copy + Debug + Default + PartialEq + Eq + Hash>() {}
    eq_default::<GlobalKey>();
    eq_default::<PeerIp>();
    eq_default::<HeaderStyle>();
    eq_default::<DenyStyle>();
    let limiter = Arc::new(KeyedLimiter::<String>::new(1, Duration::from_secs(1)).unwrap());
    let layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"))
        .fallback_key("anonymous".to_string());
    assert!(format!("{layer:?}").contains("RateLimitLayer"));
}

/// Every limiter has the same check / peek family; a peek records nothing.
#[test]
fn check_and_peek_everywhere() {
    let clock = ManualClock::new();
    let w = Duration::from_secs(1);
    let log = Limiter::with_clock(2, w, clock.clone()).unwrap();
    let counter = SlidingCounter::with_clock(2, w, 10, clock.clone()).unwrap();
    for one in [&log as &dyn RateLimit, &counter] {
        assert_eq!(one.peek().unwrap().remaining(), 1);
        assert_eq!(one.peek_n(2).unwrap().remaining(), 0);
        assert!(one.peek_n(3).is_err());
        one.check().unwrap();
        assert_eq!(one.peek().unwrap().remaining(), 0);
        one.check().unwrap();
        assert!(one.peek().is_err());
        assert!(one.check().is_err());
    }
    assert!(log.peek().is_err() && counter.peek().is_err());
    assert!(log.peek_n(0).is_ok());
    let keyed = KeyedLimiter::<String, ManualClock>::with_clock(1, w, clock.clone()).unwrap();
    assert!(keyed.peek("a").is_ok() && keyed.peek_n("a", 1).is_ok());
    assert!(keyed.is_empty());
    keyed.check("a").unwrap();
    assert!(keyed.peek("a").is_err());
    assert!(keyed.peek_n("a", 2).is_err());
}

/// `admit` decides exactly as `check` (recording the same admission) on
/// every limiter, through the trait and directly, keyed too.
#[test]
fn admit_everywhere() {
    let clock = ManualClock::new();
    let w = Duration::from_secs(1);
    let log = Limiter::with_clock(2, w, clock.clone()).unwrap();
    let counter = SlidingCounter::with_clock(2, w, 10, clock.clone()).unwrap();
    for one in [&log as &dyn RateLimit, &counter] {
        one.admit().unwrap();
        assert_eq!(one.peek().unwrap().remaining(), 0, "admit recorded one");
        one.admit().unwrap();
        let denied = one.admit().unwrap_err();
        assert_eq!(denied.retry_after(), one.check().unwrap_err().retry_after());
    }
    clock.advance(w);
    assert!(log.admit().is_ok() && counter.admit().is_ok());
    assert!(log.admit_at(slidelog::Clock::now(&clock)).is_ok());
    assert!(log.admit().is_err());
    let keyed = KeyedLimiter::<String, ManualClock>::with_clock(1, w, clock.clone()).unwrap();
    keyed.admit("a").unwrap();
    assert!(
        keyed.check("a").is_err(),
        "admit recorded the key's one admission"
    );
    assert!(keyed.admit("a").is_err());
    assert!(keyed.admit("b").is_ok());
    assert_eq!(keyed.len(), 2);
}

/// `Denied` prints its wait as a duration; both results read as sentences.
#[test]
fn decisions_print_for_people() {
    let limiter = Limiter::with_clock(1, Duration::from_secs(1), ManualClock::new()).unwrap();
    let admitted = limiter.check_at(0).unwrap();
    assert_eq!(
        admitted.to_string(),
        "admitted at 0 ns, 0 more fit in the window"
    );
    let denied = limiter.check_at(44_497).unwrap_err();
    let debug = format!("{denied:?}");
    assert!(debug.contains("999.955503ms"), "{debug}");
    assert!(!debug.contains("999955503"), "{debug}");
    assert_eq!(denied.to_string(), "rate limited: retry after 999.955503ms");
    let never = limiter.check_n(2).unwrap_err();
    assert_eq!(
        never.to_string(),
        "2 units can never be admitted by a limit of 1"
    );
}

#[cfg(feature = "async")]
#[tokio::test]
async fn the_until_ready_family_everywhere() {
    let w = Duration::from_millis(5);
    let jitter = Duration::from_millis(1);
    let log = Limiter::new(1, w).unwrap();
    let _: Admitted = log.until_ready().await;
    log.until_n_ready(1).await.unwrap();
    log.until_n_ready_with_jitter(1, jitter).await.unwrap();
    assert!(log.until_n_ready(2).await.is_err());
    let counter = SlidingCounter::new(1, w, 5).unwrap();
    let _: Admitted = counter.until_ready().await;
    counter.until_n_ready(1).await.unwrap();
    counter.until_n_ready_with_jitter(1, jitter).await.unwrap();
    let keyed = KeyedLimiter::<u64>::new(1, w).unwrap();
    keyed.until_ready(&1).await.unwrap();
    keyed.until_n_ready(&1, 1).await.unwrap();
    keyed
        .until_n_ready_with_jitter(&1, 1, jitter)
        .await
        .unwrap();
    // The one way a keyed wait fails: a new key at a full limiter.
    let full = KeyedLimiter::<u64>::builder(1, Duration::from_secs(60))
        .max_keys(1)
        .build()
        .unwrap();
    full.check(&1).unwrap();
    let refused = full.until_ready(&2).await.unwrap_err();
    assert_eq!(refused.reason(), DenyReason::KeyCapacity);
}
