//! The names the crate's metrics carry (feature `metrics`): one label set
//! per family, every family described, each series labelled with the
//! `limiter` that emitted it (a name given to the limiter or layer;
//! `"default"` otherwise).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `slidelog_requests_total` | counter | `limiter`, `decision` (`admitted`, `denied`, `unavailable`) |
//! | `slidelog_denials_total` | counter | `limiter`, `reason`, `policy` |
//! | `slidelog_keys_live` | gauge | `limiter` |
//! | `slidelog_keys_evicted_total` | counter | `limiter` |
//! | `slidelog_keys_refused_total` | counter | `limiter` |
//! | `slidelog_redis_round_trips_total` | counter | `limiter` |
//! | `slidelog_redis_local_denials_total` | counter | `limiter` |
//! | `slidelog_redis_failures_total` | counter | `limiter` |
//! | `slidelog_redis_round_trip_seconds` | histogram | `limiter` |

use std::sync::Arc;

/// A limiter's or layer's name, for the `limiter` label (cheap to clone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Name(Option<Arc<str>>);

impl Name {
    pub(crate) fn new(name: impl Into<String>) -> Name {
        Name(Some(Arc::from(name.into())))
    }

    /// The label value (`"default"` when none was given).
    #[cfg(feature = "metrics")]
    pub(crate) fn label(&self) -> metrics::SharedString {
        match &self.0 {
            Some(name) => metrics::SharedString::from(Arc::clone(name)),
            None => metrics::SharedString::const_str("default"),
        }
    }

    /// The name as text.
    pub(crate) fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("default")
    }
}

/// Describes every family (help text and unit) to the installed recorder:
/// called whenever a limiter or layer is built, so a recorder installed
/// before it gets the descriptions (describing twice is harmless).
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "slidelog_requests_total",
        Unit::Count,
        "Requests the tower layer judged, by decision (admitted, denied, unavailable: the store could not decide)."
    );
    describe_counter!(
        "slidelog_denials_total",
        Unit::Count,
        "Requests the tower layer denied, by reason and by the policy that decided (its RateLimit name)."
    );
    describe_gauge!(
        "slidelog_keys_live",
        Unit::Count,
        "Keys a keyed limiter holds now."
    );
    describe_counter!(
        "slidelog_keys_evicted_total",
        Unit::Count,
        "Idle keys a keyed limiter evicted."
    );
    describe_counter!(
        "slidelog_keys_refused_total",
        Unit::Count,
        "New keys refused at the key cap or byte budget."
    );
    describe_counter!(
        "slidelog_redis_round_trips_total",
        Unit::Count,
        "Checks sent to Redis."
    );
    describe_counter!(
        "slidelog_redis_local_denials_total",
        Unit::Count,
        "Denials the local pre-check answered without a round trip."
    );
    describe_counter!(
        "slidelog_redis_failures_total",
        Unit::Count,
        "Redis checks that failed or timed out (answered by the failure policy)."
    );
    describe_histogram!(
        "slidelog_redis_round_trip_seconds",
        Unit::Seconds,
        "Redis round-trip time of a check, answered or failed."
    );
}

#[cfg(not(feature = "metrics"))]
pub(crate) fn describe() {}
