//! [`RateLimitLayer`]: what the layer is configured with, and its builder.

use core::fmt;
use core::marker::PhantomData;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::Response;

use super::body::WrapBody;
use super::deny::{Denial, DenyHook, DenyStyle, MissingKey};
use super::describe::{Described, described_at};
use super::headers::HeaderStyle;
use crate::backend::Backend;
use crate::sync::atomic::AtomicBool;

/// The [`tower::Layer`](https://docs.rs/tower/latest/tower/trait.Layer.html): wraps a service so that each request is first
/// checked against a keyed limiter.
///
/// Denied requests never reach the inner service; admitted requests pass
/// untouched (body, errors), with rate-limit headers added to the response.
/// Cloning the layer or the service shares the same limiter.
///
/// `R`, the last type parameter, is how responses carry their bodies: a
/// [`RateLimitBody`](super::RateLimitBody) around the inner service's
/// ([`WrapBody`], the default), or the inner service's own body type
/// ([`InnerBody`](super::InnerBody), chosen with
/// [`inner_body`](Self::inner_body); for axum, one allocation a request
/// fewer).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::{DenyStyle, HeaderStyle, PeerIp, RateLimitLayer};
///
/// let limiter = Arc::new(KeyedLimiter::<std::net::IpAddr>::new(100, Duration::from_secs(60))?);
/// let layer = RateLimitLayer::new(limiter, PeerIp::new())
///     .header_style(HeaderStyle::Legacy)
///     .deny_style(DenyStyle::Http);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct RateLimitLayer<L: ?Sized, X, K, R = WrapBody> {
    /// Shared by the layer's clones and services (axum makes a service and
    /// clones it for every request: one reference count each time, not
    /// every option).
    pub(super) options: Arc<Options<L, X, K>>,
    /// How responses carry their bodies ([`BodyMode`](super::BodyMode)).
    pub(super) body: PhantomData<fn() -> R>,
}

/// What a [`RateLimitLayer`] was configured with.
pub(super) struct Options<L: ?Sized, X, K> {
    pub(super) backend: Arc<L>,
    pub(super) extractor: X,
    pub(super) fallback: Option<K>,
    /// What a request without a key (and no fallback) gets.
    pub(super) missing: MissingKey,
    pub(super) headers: HeaderStyle,
    pub(super) deny: DenyStyle,
    /// The backend's policies when the layer was built, for the headers:
    /// read in place while the backend's `generation` is theirs (a backend
    /// never reconfigured: every request), with no atomic but the
    /// generation's load (BENCHMARKS.md, "Over HTTP").
    pub(super) first: Described,
    /// The backend's policies after a reconfiguration (`generation` moved
    /// from `first`'s): asked again each time it moves, once for the layer
    /// and every service and clone made from it.
    pub(super) described: Arc<ArcSwap<Described>>,
    /// The backend's [`base_policies`](Backend::base_policies), read when
    /// the layer was built: what a verdict said [`DecidedBy::Base`] names
    /// (every decision of a limiter of this crate never reconfigured).
    pub(super) base: Described,
    /// Builds the denial response instead of the default body.
    pub(super) on_deny: Option<DenyHook>,
    /// The status when the backend cannot decide (503 by default).
    pub(super) unavailable: http::StatusCode,
    /// The `limiter` label of the layer's metrics.
    pub(super) name: crate::observe::Name,
    /// Whether a request without a key was logged yet (once per layer and
    /// its clones).
    pub(super) missing_logged: Arc<AtomicBool>,
}

impl<L: ?Sized, X, K, R> Clone for RateLimitLayer<L, X, K, R> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            options: Arc::clone(&self.options),
            body: PhantomData,
        }
    }
}

impl<L: ?Sized, X: Clone, K: Clone> Clone for Options<L, X, K> {
    fn clone(&self) -> Self {
        Options {
            backend: Arc::clone(&self.backend),
            extractor: self.extractor.clone(),
            fallback: self.fallback.clone(),
            missing: self.missing,
            headers: self.headers,
            deny: self.deny,
            first: self.first.clone(),
            described: Arc::clone(&self.described),
            base: self.base.clone(),
            on_deny: self.on_deny.clone(),
            unavailable: self.unavailable,
            name: self.name.clone(),
            missing_logged: Arc::clone(&self.missing_logged),
        }
    }
}

impl<L: ?Sized, X, K, R> fmt::Debug for RateLimitLayer<L, X, K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("headers", &self.options.headers)
            .field("deny", &self.options.deny)
            .finish_non_exhaustive()
    }
}

impl<L: ?Sized, X, K> RateLimitLayer<L, X, K>
where
    L: Backend<K>,
{
    /// Limits requests by the key `extractor` finds, against `backend`.
    /// A request for which no key is found is limited under the
    /// [`fallback_key`](Self::fallback_key) if one is set, else answered as
    /// [`on_missing_key`](Self::on_missing_key) says: by default **400 Bad
    /// Request** (gRPC: `INVALID_ARGUMENT`) saying the request carries no
    /// rate-limit key — never a 429 with a made-up `Retry-After`, never
    /// let through. The first one is logged (a `tracing` error naming the
    /// extractor and the fix, e.g. for `PeerIp` on a server that does not
    /// record peer addresses).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{GlobalKey, RateLimitLayer};
    /// let limiter = Arc::new(KeyedLimiter::<()>::new(1000, Duration::from_secs(1))?);
    /// let _global = RateLimitLayer::new(limiter, GlobalKey);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn new(backend: Arc<L>, extractor: X) -> Self {
        crate::observe::describe();
        let first = Described::of(&*backend);
        let base = Described::named(&backend.base_policies(), 0);
        let options = Options {
            base,
            described: Arc::new(ArcSwap::from_pointee(first.clone())),
            first,
            backend,
            extractor,
            fallback: None,
            missing: MissingKey::default(),
            headers: HeaderStyle::default(),
            deny: DenyStyle::default(),
            on_deny: None,
            unavailable: http::StatusCode::SERVICE_UNAVAILABLE,
            name: crate::observe::Name::default(),
            missing_logged: Arc::new(AtomicBool::new(false)),
        };
        RateLimitLayer {
            options: Arc::new(options),
            body: PhantomData,
        }
    }
}

impl<L: ?Sized, X: Clone, K: Clone, R> RateLimitLayer<L, X, K, R> {
    /// The options to change (copied first if a clone shares them).
    pub(super) fn options_mut(&mut self) -> &mut Options<L, X, K> {
        Arc::make_mut(&mut self.options)
    }

    /// What a request without a key gets when no fallback key is set
    /// (default `MissingKey::Reject(400)`): pass it through unlimited, or
    /// refuse it with a chosen status.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{HeaderKey, MissingKey, RateLimitLayer};
    /// let limiter = Arc::new(KeyedLimiter::<String>::new(10, Duration::from_secs(1))?);
    /// // No API key: 401, not a server error.
    /// let _layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"))
    ///     .on_missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED));
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn on_missing_key(mut self, missing: MissingKey) -> Self {
        self.options_mut().missing = missing;
        self
    }

    /// The key shared by requests without one. By default there is none,
    /// and such requests are answered as
    /// [`on_missing_key`](RateLimitLayer::on_missing_key) says.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{HeaderKey, RateLimitLayer};
    /// let limiter = Arc::new(KeyedLimiter::<String>::new(10, Duration::from_secs(1))?);
    /// let _shared = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"))
    ///     .fallback_key("anonymous".to_string());
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn fallback_key(mut self, key: K) -> Self {
        self.options_mut().fallback = Some(key);
        self
    }

    /// Removes the fallback key set by [`fallback_key`](Self::fallback_key):
    /// requests without a key are refused again (see
    /// [`new`](RateLimitLayer::new)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{HeaderKey, RateLimitLayer};
    /// let limiter = Arc::new(KeyedLimiter::<String>::new(10, Duration::from_secs(1))?);
    /// let _strict = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"))
    ///     .fallback_key("anonymous".to_string())
    ///     .no_fallback_key();
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn no_fallback_key(mut self) -> Self {
        self.options_mut().fallback = None;
        self
    }

    /// The `limiter` label of this layer's metrics (feature `metrics`:
    /// `slidelog_requests_total`, `slidelog_denials_total`), so that two
    /// layers in one process are told apart; `"default"` otherwise.
    ///
    /// ```
    /// # use std::sync::Arc; use std::time::Duration;
    /// # use slidelog::{KeyedLimiter, tower::{GlobalKey, RateLimitLayer}};
    /// # let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
    /// let _ = RateLimitLayer::new(limiter, GlobalKey).name("api");
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.options_mut().name = crate::observe::Name::new(name);
        self
    }

    /// The status answered when the backend cannot decide (Redis down or
    /// slow, and its [`FailurePolicy`](crate::redis::FailurePolicy) denies):
    /// `503 Service Unavailable` by default, with `Retry-After` (the
    /// store's timeout) and no `RateLimit` fields, since nothing was
    /// counted; `429` if clients should treat it as rate limiting. gRPC:
    /// `UNAVAILABLE` either way. A [`deny_with`](Self::deny_with) hook, if
    /// set, answers these too (its [`Denial`](super::Denial) says
    /// [`DenyReason::Unavailable`](crate::DenyReason::Unavailable)).
    ///
    /// ```
    /// # use std::sync::Arc; use std::time::Duration;
    /// # use slidelog::{KeyedLimiter, tower::{GlobalKey, RateLimitLayer}};
    /// # let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
    /// let _ = RateLimitLayer::new(limiter, GlobalKey)
    ///     .unavailable_status(http::StatusCode::TOO_MANY_REQUESTS);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn unavailable_status(mut self, status: http::StatusCode) -> Self {
        self.options_mut().unavailable = status;
        self
    }

    /// Which rate-limit headers to send (default: IETF).
    ///
    /// ```
    /// # use std::sync::Arc; use std::time::Duration;
    /// # use slidelog::{KeyedLimiter, tower::{GlobalKey, HeaderStyle, RateLimitLayer}};
    /// # let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
    /// let _ = RateLimitLayer::new(limiter, GlobalKey).header_style(HeaderStyle::None);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn header_style(mut self, style: HeaderStyle) -> Self {
        self.options_mut().headers = style;
        self
    }

    /// How denials are answered (default: HTTP 429).
    ///
    /// ```
    /// # use std::sync::Arc; use std::time::Duration;
    /// # use slidelog::{KeyedLimiter, tower::{DenyStyle, GlobalKey, RateLimitLayer}};
    /// # let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
    /// let _grpc = RateLimitLayer::new(limiter, GlobalKey).deny_style(DenyStyle::Grpc);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn deny_style(mut self, style: DenyStyle) -> Self {
        self.options_mut().deny = style;
        self
    }

    /// Builds every denial's response with `hook` instead of the
    /// [`DenyStyle`]'s body (a JSON error of your API's shape, say, or one
    /// that varies by route). The hook is told the denial, the policies,
    /// the request's head ([`Denial::request`]: method, URI, headers) and
    /// the key ([`Denial::key`]). The layer then adds `Retry-After` and the
    /// rate-limit headers unless the hook set them. Requests without a key
    /// are answered as [`on_missing_key`](Self::on_missing_key) says.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use bytes::Bytes;
    /// use http::{Response, StatusCode};
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{Denial, GlobalKey, RateLimitLayer};
    ///
    /// let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
    /// let _layer = RateLimitLayer::new(limiter, GlobalKey).deny_with(|denial: &Denial<'_>| {
    ///     let path = denial.request.map_or("", |r| r.uri.path());
    ///     let body = format!(
    ///         r#"{{"error":"slow down","path":"{path}","retry_after_ms":{}}}"#,
    ///         denial.denied.retry_after().as_millis()
    ///     );
    ///     Response::builder()
    ///         .status(StatusCode::TOO_MANY_REQUESTS)
    ///         .header("content-type", "application/json")
    ///         .body(Bytes::from(body))
    ///         .unwrap()
    /// });
    /// # Ok::<(), slidelog::ConfigError>(())
    /// ```
    pub fn deny_with<F>(mut self, hook: F) -> Self
    where
        F: Fn(&Denial<'_>) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.options_mut().on_deny = Some(Arc::new(hook));
        self
    }

    /// Responses carry the inner service's own body type instead of a
    /// [`RateLimitBody`](super::RateLimitBody) ([`InnerBody`](super::InnerBody)):
    /// an admitted request's body passes through unchanged, and the
    /// layer's own answers (denials, requests without a key) are built with
    /// `B::from(Bytes)`, so the inner body type must implement
    /// `From<bytes::Bytes>` (axum's `Body` and `http_body_util::Full<Bytes>`
    /// do; tonic's `Body` does not: a tonic server keeps the default).
    ///
    /// For axum: a route's response body that is not axum's own `Body` is
    /// boxed into one on every response; with this mode the handler's body
    /// reaches axum as it was, one allocation fewer for every admitted
    /// request. Every other option is kept.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use axum::{Router, body::Body, routing::get};
    /// use http::Request;
    /// use slidelog::KeyedLimiter;
    /// use slidelog::tower::{GlobalKey, RateLimitLayer};
    /// use tower::ServiceExt;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Arc::new(KeyedLimiter::<()>::new(1, Duration::from_secs(60))?);
    /// let app = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(RateLimitLayer::new(limiter, GlobalKey).inner_body());
    /// let get = || ServiceExt::<Request<Body>>::oneshot(app.clone(), Request::new(Body::empty()));
    /// assert_eq!(get().await.unwrap().status(), 200);
    /// assert_eq!(get().await.unwrap().status(), 429);
    /// # Ok::<(), slidelog::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn inner_body(self) -> RateLimitLayer<L, X, K, super::InnerBody> {
        RateLimitLayer {
            options: self.options,
            body: PhantomData,
        }
    }
}

impl<L: Backend<K> + ?Sized, X, K> Options<L, X, K> {
    /// The backend's policies at `generation`, not the first one's: the
    /// shared description, written anew if it is of another generation.
    /// Out of line: a backend never reconfigured does not call it.
    #[inline(never)]
    pub(super) fn reconfigured(&self, generation: u64) -> arc_swap::Guard<Arc<Described>> {
        described_at(&*self.backend, &self.described, generation)
    }
}
