//! How a denial (or a request without a key) is answered: the status,
//! body and headers, a custom hook, and the denial's log event and metric.

use core::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use super::headers::{
    HeaderStyle, PolicyList, Written, ceil_seconds, list_headers, number_value, policy_name,
};
use crate::decision::{Denied, DenyReason, PolicyStates};
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
    /// The denied request's head: method, URI, headers, extensions.
    pub request: Option<&'a http::request::Parts>,
    /// The key the request was limited under (see [`key`](Self::key)).
    key_any: Option<&'a (dyn core::any::Any + Send)>,
}

impl Denial<'_> {
    /// The key the request was limited under, as the layer's key type `K`
    /// (`None` for another type).
    ///
    /// ```
    /// # use std::sync::Arc; use std::time::Duration;
    /// # use slidelog::{KeyedLimiter, tower::{Denial, HeaderKey, RateLimitLayer}};
    /// # let limiter = Arc::new(KeyedLimiter::<String>::new(10, Duration::from_secs(1))?);
    /// let _ = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key")).deny_with(|d: &Denial<'_>| {
    ///     let key = d.key::<String>().map_or("?", String::as_str);
    ///     http::Response::new(bytes::Bytes::from(format!("{key}: slow down")))
    /// });
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn key<K: 'static>(&self) -> Option<&K> {
        self.key_any?.downcast_ref()
    }
}

/// A denial-response builder.
pub(super) type DenyHook = Arc<dyn Fn(&Denial<'_>) -> Response<Bytes> + Send + Sync>;

/// How one response is written: the layer's choices and the policies that
/// describe the request's key, borrowed from the layer for the length of
/// `call` (an in-process decision writes its response there, with nothing
/// copied); a check that waits keeps an `OwnedStyle` (service.rs).
pub(super) struct Style<'a> {
    pub(super) headers: HeaderStyle,
    pub(super) deny: DenyStyle,
    pub(super) policies: &'a PolicyList,
    /// The values the layer wrote for its policies, when they are the
    /// key's (a key with policies of its own has them written per
    /// response).
    pub(super) written: Option<&'a Written>,
    pub(super) hook: Option<&'a DenyHook>,
    /// The status when the backend cannot decide.
    pub(super) unavailable: http::StatusCode,
    /// The `limiter` label of the layer's metrics.
    pub(super) name: &'a crate::observe::Name,
}

/// What the layer answers a request its extractor found no key for (and
/// no [`fallback_key`](super::RateLimitLayer::fallback_key) is set): see
/// [`RateLimitLayer::on_missing_key`](super::RateLimitLayer::on_missing_key).
/// By default such a request is the client's error: `400 Bad Request`
/// saying it carries no rate-limit key (gRPC `INVALID_ARGUMENT`).
/// Whatever the choice, the first such request is logged once per layer (a
/// `tracing` error naming the extractor, with the fix when there is one);
/// the client never sees set-up details.
///
/// ```
/// use slidelog::tower::MissingKey;
/// assert_eq!(MissingKey::default(), MissingKey::Reject(http::StatusCode::BAD_REQUEST));
/// let _ = MissingKey::Reject(http::StatusCode::UNAUTHORIZED);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingKey {
    /// `500 Internal Server Error` (gRPC `INTERNAL`), for a key that only a
    /// misconfigured server can miss (`PeerIp` on a server that records
    /// no peer address).
    ServerError,
    /// Pass the request to the inner service, unlimited and without
    /// rate-limit headers: for requests the extractor skips on purpose
    /// (health checks, some methods or paths, a `KeyFn` returning `None`).
    Allow,
    /// Refuse with this status and a short body naming it and saying the
    /// request carries no rate-limit key, e.g. `401` for a missing API key
    /// (gRPC: `UNAUTHENTICATED` for 401, `PERMISSION_DENIED` for 403,
    /// `INVALID_ARGUMENT` for other 4xx, `INTERNAL` otherwise). The default
    /// is `Reject(400)`.
    Reject(StatusCode),
}

impl Default for MissingKey {
    fn default() -> Self {
        MissingKey::Reject(StatusCode::BAD_REQUEST)
    }
}

/// An answer that does not reach the inner service: for HTTP, `status`
/// with `body` (a line of text, its newline included) as a plain-text
/// body; for gRPC, an empty body with `grpc-status` and a
/// (percent-encoded) `grpc-message`.
pub(super) fn refusal(
    deny: DenyStyle,
    status: StatusCode,
    body: Bytes,
    grpc: (&'static str, &'static str),
) -> Response<Bytes> {
    let mut response = Response::new(match deny {
        DenyStyle::Http | DenyStyle::ProblemJson => body,
        DenyStyle::Grpc => Bytes::new(),
    });
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

/// The refusal of a request without a key ([`MissingKey::ServerError`] or
/// [`MissingKey::Reject`]): the status's own reason phrase and that the
/// request carries no rate-limit key, nothing about the server's set-up.
pub(super) fn missing_key(deny: DenyStyle, status: StatusCode) -> Response<Bytes> {
    let grpc = match status.as_u16() {
        401 => ("16", "unauthenticated"),
        403 => ("7", "permission%20denied"),
        400..=499 => ("3", "no%20rate-limit%20key"),
        _ => ("13", "no%20rate-limit%20key"),
    };
    let reason = status.canonical_reason().unwrap_or("Refused");
    let body = Bytes::from(format!(
        "{} {reason}: the request carries no rate-limit key\n",
        status.as_u16()
    ));
    refusal(deny, status, body, grpc)
}

/// The answer when the backend could not decide and its failure policy
/// denies ([`DenyReason::Unavailable`]): `status` (503 by default, see
/// [`unavailable_status`](super::RateLimitLayer::unavailable_status)) with
/// a `Retry-After` and no `RateLimit` fields (nothing was counted); gRPC
/// `UNAVAILABLE`.
fn unavailable(deny: DenyStyle, status: StatusCode, denied: &Denied) -> Response<Bytes> {
    let reason = status.canonical_reason().unwrap_or("Unavailable");
    let mut response = refusal(
        deny,
        status,
        Bytes::from(format!(
            "{} {reason}: the rate limiter cannot decide now\n",
            status.as_u16()
        )),
        ("14", "rate%20limiter%20unavailable"),
    );
    response.headers_mut().insert(
        RETRY_AFTER,
        number_value(ceil_seconds(denied.retry_after()).max(1)),
    );
    response
}

/// The 429 (or gRPC `RESOURCE_EXHAUSTED`) answer for a denial.
pub(super) fn denial(
    style: &Style<'_>,
    denied: Denied,
    per_policy: Option<&PolicyStates>,
    request: Option<&http::request::Parts>,
    key: Option<&(dyn core::any::Any + Send)>,
) -> Response<Bytes> {
    let Style {
        headers,
        deny,
        policies,
        written,
        hook,
        unavailable: unavailable_status,
        name: limiter,
    } = style;
    let (headers, deny) = (*headers, *deny);
    if denied.reason() == DenyReason::Unavailable && hook.is_none() {
        observe_denial(limiter, &denied, "");
        return unavailable(deny, *unavailable_status, &denied);
    }
    let which = denied.policy().min(policies.len().saturating_sub(1));
    let wait = if denied.reason() == DenyReason::RateLimited {
        denied.retry_after()
    } else {
        policies.get(which).map_or(Duration::ZERO, |p| p.window)
    };
    // The layer's interned name, or one written for a key's own quota.
    let name: std::borrow::Cow<'static, str> = match policies.name(which) {
        Some(interned) => interned.into(),
        None => policy_name(policies, which).into(),
    };
    observe_denial(limiter, &denied, &name);
    // The body's line, static: a 429 allocates and formats no body.
    let line = match denied.reason() {
        DenyReason::RateLimited => "Too Many Requests: rate limit exceeded\n",
        DenyReason::KeyCapacity => "Too Many Requests: too many clients\n",
        DenyReason::Unavailable => "the rate limiter cannot decide now\n",
        _ => "Too Many Requests: the request can never fit the limit\n",
    };
    let message = line.trim_end();
    let mut response = match (hook, deny) {
        (Some(hook), _) => hook(&Denial {
            denied,
            policies,
            policy_name: name.into_owned(),
            request,
            key_any: key,
        }),
        (None, DenyStyle::ProblemJson) => problem_json(message, &name, wait),
        (None, _) => refusal(
            deny,
            StatusCode::TOO_MANY_REQUESTS,
            Bytes::from_static(line.as_bytes()),
            ("8", "rate%20limit%20exceeded"),
        ),
    };
    let h = response.headers_mut();
    // A hook's response keeps the fields it set; ours has none of them,
    // so it is not asked (each question is a lookup).
    let hooked = hook.is_some();
    if !hooked || !h.contains_key(RETRY_AFTER) {
        h.insert(RETRY_AFTER, number_value(ceil_seconds(wait).max(1)));
    }
    // Nothing was counted when the store failed: no `RateLimit` fields.
    if denied.reason() != DenyReason::Unavailable {
        list_headers(headers, policies, *written, which, 0, wait, per_policy).write_to(h, hooked);
    }
    response
}

/// An RFC 9457 problem-details 429 of type `quota-exceeded`.
pub(super) fn problem_json(message: &str, policy: &str, wait: Duration) -> Response<Bytes> {
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
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// A denial's `tracing` event (debug) and `metrics` counters, if enabled.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(super) fn observe_denial(limiter: &crate::observe::Name, denied: &Denied, policy: &str) {
    let reason = match denied.reason() {
        DenyReason::RateLimited => "rate_limited",
        DenyReason::KeyCapacity => "key_capacity",
        DenyReason::Unavailable => "unavailable",
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
    {
        let decision = if denied.reason() == DenyReason::Unavailable {
            "unavailable"
        } else {
            "denied"
        };
        metrics::counter!(
            "slidelog_requests_total",
            "limiter" => limiter.label(),
            "decision" => decision
        )
        .increment(1);
        metrics::counter!(
            "slidelog_denials_total",
            "limiter" => limiter.label(),
            "reason" => reason,
            "policy" => policy.to_string()
        )
        .increment(1);
    }
}
