//! How a denial (or a request without a key) is answered: the status,
//! body and headers, a custom hook, and the denial's log event and metric.

use core::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use super::body::RateLimitBody;
use super::headers::{ceil_seconds, policy_name, rate_limit_headers};
use super::service::Style;
use crate::decision::{Denied, DenyReason};
use crate::policy::Policy;

/// How a denial is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DenyStyle {
    /// HTTP `429 Too Many Requests` with a short text body.
    #[default]
    Http,
    /// gRPC: HTTP 200 with `grpc-status: 8` (`RESOURCE_EXHAUSTED`) and a
    /// `grpc-message`, as tonic clients expect.
    Grpc,
    /// HTTP 429 with an RFC 9457 problem-details body
    /// (`application/problem+json`) of type `quota-exceeded`, listing the
    /// `violated-policies` by their `RateLimit-Policy` names, as the IETF
    /// draft suggests:
    /// `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
    /// "title":"Request cannot be satisfied as assigned quota has been exceeded",
    /// "status":429,"detail":"...","violated-policies":["1m"]}`.
    ProblemJson,
}

/// What a [`deny_with`](super::RateLimitLayer::deny_with) hook is told.
#[derive(Debug)]
#[non_exhaustive]
pub struct Denial<'a> {
    /// The denial (its [`retry_after`](Denied::retry_after), reason and
    /// deciding [`policy`](Denied::policy)).
    pub denied: Denied,
    /// Every policy of the backend, in the order given.
    pub policies: &'a [Policy],
    /// The deciding policy's name in the `RateLimit` headers.
    pub policy_name: String,
}

/// A denial-response builder.
pub(super) type DenyHook = Arc<dyn Fn(&Denial<'_>) -> Response<Bytes> + Send + Sync>;

/// What to do about a request without a key.
pub(super) const MISSING_KEY_HELP: &str = "PeerIp needs the peer address: serve axum with \
    `into_make_service_with_connect_info::<SocketAddr>()`, or insert a `SocketAddr` request \
    extension (hyper, tonic); or set `RateLimitLayer::fallback_key` to share one limit among \
    requests without a key.";

/// An answer that does not reach the inner service: for HTTP, `status`
/// with `text` as a plain-text body; for gRPC, an empty body with
/// `grpc-status` and a (percent-encoded) `grpc-message`.
pub(super) fn refusal<B>(
    deny: DenyStyle,
    status: StatusCode,
    text: &str,
    grpc: (&'static str, &'static str),
) -> Response<RateLimitBody<B>> {
    let mut response = Response::new(RateLimitBody::full(match deny {
        DenyStyle::Http | DenyStyle::ProblemJson => Bytes::from(format!("{text}\n")),
        DenyStyle::Grpc => Bytes::new(),
    }));
    let h = response.headers_mut();
    match deny {
        DenyStyle::Http | DenyStyle::ProblemJson => {
            h.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            *response.status_mut() = status;
        }
        DenyStyle::Grpc => {
            h.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            h.insert("grpc-status", HeaderValue::from_static(grpc.0));
            h.insert("grpc-message", HeaderValue::from_static(grpc.1));
        }
    }
    response
}

/// The answer to a request without a key (and no fallback key): a server
/// error that explains itself (gRPC `INTERNAL`).
pub(super) fn missing_key<B>(deny: DenyStyle) -> Response<RateLimitBody<B>> {
    refusal(
        deny,
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("Internal Server Error: no rate-limit key for this request. {MISSING_KEY_HELP}"),
        ("13", "no%20rate-limit%20key"),
    )
}

/// The 429 (or gRPC `RESOURCE_EXHAUSTED`) answer for a denial.
pub(super) fn denial<B>(style: &Style, denied: Denied) -> Response<RateLimitBody<B>> {
    let (headers, deny, policies, hook) = style;
    let (headers, deny) = (*headers, *deny);
    let which = denied.policy().min(policies.len().saturating_sub(1));
    let wait = if denied.reason() == DenyReason::RateLimited {
        denied.retry_after()
    } else {
        policies.get(which).map_or(Duration::ZERO, |p| p.window)
    };
    let name = policy_name(policies, which);
    observe_denial(&denied, &name);
    let message = match denied.reason() {
        DenyReason::RateLimited => "Too Many Requests: rate limit exceeded",
        DenyReason::KeyCapacity => "Too Many Requests: too many clients",
        _ => "Too Many Requests: the request can never fit the limit",
    };
    let mut response = match (hook, deny) {
        (Some(hook), _) => {
            let (parts, body) = hook(&Denial {
                denied,
                policies,
                policy_name: name,
            })
            .into_parts();
            Response::from_parts(parts, RateLimitBody::full(body))
        }
        (None, DenyStyle::ProblemJson) => problem_json(message, &name, wait),
        (None, _) => refusal(
            deny,
            StatusCode::TOO_MANY_REQUESTS,
            message,
            ("8", "rate%20limit%20exceeded"),
        ),
    };
    let h = response.headers_mut();
    if !h.contains_key(RETRY_AFTER) {
        h.insert(RETRY_AFTER, HeaderValue::from(ceil_seconds(wait).max(1)));
    }
    for (name, value) in rate_limit_headers(headers, policies, which, 0, wait).0 {
        if !h.contains_key(&name) {
            h.insert(name, value);
        }
    }
    response
}

/// An RFC 9457 problem-details 429 of type `quota-exceeded`.
pub(super) fn problem_json<B>(
    message: &str,
    policy: &str,
    wait: Duration,
) -> Response<RateLimitBody<B>> {
    // Policy names are digits, unit letters and `-`; the message is fixed
    // ASCII: nothing to escape.
    let body = format!(
        concat!(
            r#"{{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
            r#""title":"Request cannot be satisfied as assigned quota has been exceeded","#,
            r#""status":429,"detail":"{} (retry after {} s)","violated-policies":["{}"]}}"#
        ),
        message,
        ceil_seconds(wait).max(1),
        policy
    );
    let mut response = Response::new(RateLimitBody::full(Bytes::from(body)));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// A denial's `tracing` event (debug) and `metrics` counter, if enabled.
pub(super) fn observe_denial(denied: &Denied, policy: &str) {
    let reason = match denied.reason() {
        DenyReason::RateLimited => "rate_limited",
        DenyReason::KeyCapacity => "key_capacity",
        _ => "exceeds_limit",
    };
    tracing::debug!(
        target: "slidelog",
        reason,
        policy,
        retry_after_ms = denied.retry_after().as_millis() as u64,
        "request denied"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("slidelog_requests_total", "decision" => "denied", "reason" => reason, "policy" => policy.to_string())
        .increment(1);
}
