//! Observability: `metrics` counters and gauges, read
//! back through a real Prometheus recorder, and `tracing` events, captured
//! by a subscriber, for denials, sweeps and refusals; the RFC 9457 problem
//! body and the denial hook over the tower layer.

#![cfg(all(feature = "tower", feature = "metrics"))]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusBuilder;
use slidelog::tower::{Denial, DenyStyle, PeerIp, RateLimitLayer};
use slidelog::{KeyedLimiter, ManualClock};
use tower::ServiceExt;

fn app(
    limiter: Arc<KeyedLimiter<IpAddr, ManualClock>>,
    layer: impl Fn(
        RateLimitLayer<KeyedLimiter<IpAddr, ManualClock>, PeerIp, IpAddr>,
    ) -> RateLimitLayer<KeyedLimiter<IpAddr, ManualClock>, PeerIp, IpAddr>,
) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer(RateLimitLayer::new(limiter, PeerIp::new())))
}

async fn get_from(app: &Router, last_octet: u8) -> Response<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last_octet)), 1234);
    request.extensions_mut().insert(ConnectInfo(peer));
    app.clone().oneshot(request).await.unwrap()
}

/// Every event's fields, as `name=value` strings.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={:?} ", field.name(), value));
            }
        }
        let mut fields = Fields(format!("{} ", event.metadata().target()));
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn counters_events_and_denial_bodies() {
    let handle = PrometheusBuilder::new().install_recorder().unwrap();
    let events = Events::default();
    let _guard = tracing::subscriber::set_default(events.clone());

    let clock = ManualClock::new();
    let limited = common::two_policy_limiter(&clock);
    let plain = app(Arc::clone(&limited), |l| l);
    for _ in 0..2 {
        assert_eq!(get_from(&plain, 1).await.status(), StatusCode::OK);
    }
    assert_eq!(
        get_from(&plain, 1).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // RFC 9457 problem details, naming the violated policy.
    let problem = app(Arc::clone(&limited), |l| {
        l.deny_style(DenyStyle::ProblemJson)
    });
    let response = get_from(&problem, 1).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(response.headers()["retry-after"], "1");
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        json["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(json["status"], 429);
    assert_eq!(json["violated-policies"][0], "1s");

    // A hook's own body; the layer still adds Retry-After and RateLimit.
    let hooked = app(Arc::clone(&limited), |l| {
        l.deny_with(|d: &Denial<'_>| {
            Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .body(Bytes::from(format!(
                    "busy: {} {}",
                    d.policy_name,
                    d.denied.policy()
                )))
                .unwrap()
        })
    });
    let response = get_from(&hooked, 1).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert!(response.headers().contains_key("ratelimit"));
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    assert_eq!(&body[..], b"busy: 1s 0");

    // A second later the minute policy decides.
    clock.advance(Duration::from_secs(1));
    assert_eq!(get_from(&plain, 1).await.status(), StatusCode::OK);
    assert_eq!(
        get_from(&plain, 1).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // A second limiter and layer, named.
    let admin_keys = Arc::new(
        KeyedLimiter::<IpAddr>::builder(5, Duration::from_secs(1))
            .name("admin-keys")
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let admin = app(admin_keys, |l| l.name("admin"));
    assert_eq!(get_from(&admin, 7).await.status(), StatusCode::OK);
    assert_eq!(get_from(&admin, 8).await.status(), StatusCode::OK);

    // Sweep after the longest window and the margin: one key evicted.
    clock.advance(Duration::from_secs(200));
    assert_eq!(limited.retain_recent(), 1);

    let scrape = handle.render();
    let line = |needle: &str| {
        scrape
            .lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{scrape}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    // One label set per family: decisions by limiter, denials by reason
    // and policy in their own family.
    assert_eq!(
        line(r#"slidelog_requests_total{limiter="default",decision="admitted"}"#),
        "3"
    );
    assert_eq!(
        line(r#"slidelog_requests_total{limiter="default",decision="denied"}"#),
        "4"
    );
    assert_eq!(
        line(r#"slidelog_denials_total{limiter="default",reason="rate_limited",policy="1s"}"#),
        "3"
    );
    assert_eq!(
        line(r#"slidelog_denials_total{limiter="default",reason="rate_limited",policy="1m"}"#),
        "1"
    );
    assert_eq!(
        line(r#"slidelog_keys_evicted_total{limiter="default"}"#),
        "1"
    );
    assert_eq!(line(r#"slidelog_keys_live{limiter="default"}"#), "0");
    // A second, named limiter behind a named layer is told apart, and its
    // live keys are counted as they are created (no sweep needed).
    assert_eq!(
        line(r#"slidelog_requests_total{limiter="admin",decision="admitted"}"#),
        "2"
    );
    assert_eq!(line(r#"slidelog_keys_live{limiter="admin-keys"}"#), "2");
    for family in [
        "slidelog_requests_total",
        "slidelog_denials_total",
        "slidelog_keys_live",
        "slidelog_keys_evicted_total",
    ] {
        assert!(
            scrape.contains(&format!("# HELP {family} ")),
            "no help text for {family} in\n{scrape}"
        );
    }
    let label_sets = |family: &str| {
        scrape
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .map(|l| {
                l.split('{')
                    .nth(1)
                    .unwrap()
                    .split('}')
                    .next()
                    .unwrap()
                    .split(',')
                    .map(|kv| kv.split('=').next().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect::<std::collections::HashSet<_>>()
    };
    assert_eq!(label_sets("slidelog_requests_total").len(), 1, "{scrape}");
    assert_eq!(label_sets("slidelog_denials_total").len(), 1, "{scrape}");

    let events = events.0.lock().unwrap().clone();
    let denials = events
        .iter()
        .filter(|e| e.contains("request denied"))
        .count();
    assert_eq!(denials, 4, "{events:#?}");
    assert!(
        events.iter().all(|e| e.starts_with("slidelog ")),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.contains("swept idle keys") && e.contains("evicted=1")),
        "{events:#?}"
    );
}
