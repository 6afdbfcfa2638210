//! The layer and the service: check the backend, then call the inner
//! service with the rate-limit headers added, or answer the denial.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;

use super::backend::{Backend, Verdict};
use super::body::{BodyMode, WrapBody};
use super::deny::{Denial, DenyHook, DenyStyle, MissingKey, Style, denial, missing_key};
use super::extract::KeyExtractor;
use super::headers::{HeaderStyle, Headers, PolicyList, Written, list_headers};
use crate::decision::Admitted;
use crate::decision::{DecidedBy, PolicySet};
use crate::policy::Policy;
use crate::sync::atomic::{AtomicBool, Ordering};

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
    options: Arc<Options<L, X, K>>,
    /// How responses carry their bodies ([`BodyMode`]).
    body: PhantomData<fn() -> R>,
}

/// What a [`RateLimitLayer`] was configured with.
struct Options<L: ?Sized, X, K> {
    backend: Arc<L>,
    extractor: X,
    fallback: Option<K>,
    /// What a request without a key (and no fallback) gets.
    missing: MissingKey,
    headers: HeaderStyle,
    deny: DenyStyle,
    /// The backend's policies when the layer was built, for the headers:
    /// read in place while the backend's `generation` is theirs (a backend
    /// never reconfigured: every request), with no atomic but the
    /// generation's load (BENCHMARKS.md, "Over HTTP", session 30).
    first: Described,
    /// The backend's policies after a reconfiguration (`generation` moved
    /// from `first`'s): asked again each time it moves, once for the layer
    /// and every service and clone made from it.
    described: Arc<ArcSwap<Described>>,
    /// The backend's [`base_policies`](Backend::base_policies), read when
    /// the layer was built: what a verdict said [`DecidedBy::Base`] names
    /// (every decision of a limiter of this crate never reconfigured).
    base: Described,
    /// Builds the denial response instead of the default body.
    on_deny: Option<DenyHook>,
    /// The status when the backend cannot decide (503 by default).
    unavailable: http::StatusCode,
    /// The `limiter` label of the layer's metrics.
    name: crate::observe::Name,
    /// Whether a request without a key was logged yet (once per layer and
    /// its clones).
    missing_logged: Arc<AtomicBool>,
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
    fn options_mut(&mut self) -> &mut Options<L, X, K> {
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

impl<S, L: ?Sized, X: Clone, K: Clone, R> tower::Layer<S> for RateLimitLayer<L, X, K, R> {
    type Service = RateLimitService<S, L, X, K, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service built by [`RateLimitLayer`].
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::{GlobalKey, RateLimitLayer};
/// use tower::Layer;
/// let limiter = Arc::new(KeyedLimiter::<()>::new(1, Duration::from_secs(1))?);
/// let inner = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
/// });
/// let _service = RateLimitLayer::new(limiter, GlobalKey).layer(inner);
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub struct RateLimitService<S, L: ?Sized, X, K, R = WrapBody> {
    inner: S,
    layer: RateLimitLayer<L, X, K, R>,
}

impl<S: Clone, L: ?Sized, X: Clone, K: Clone, R> Clone for RateLimitService<S, L, X, K, R> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, L: ?Sized, X, K, R> fmt::Debug for RateLimitService<S, L, X, K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl<S: Clone, L: ?Sized, X, K, R> RateLimitService<S, L, X, K, R> {
    /// The readied inner service, for a call after an await, leaving a
    /// fresh clone in its place (tower's readiness contract).
    fn ready_clone(&mut self) -> S {
        let fresh = self.inner.clone();
        core::mem::replace(&mut self.inner, fresh)
    }
}

impl<S, L: ?Sized, X, K, R, ReqBody, ResBody> tower::Service<Request<ReqBody>>
    for RateLimitService<S, L, X, K, R>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    L: Backend<K>,
    X: KeyExtractor<ReqBody, Key = K>,
    K: Clone + Send + 'static,
    R: BodyMode<ResBody>,
{
    type Response = Response<R::Body>;
    type Error = S::Error;
    type Future = ResponseFuture<L::Future, S, ReqBody, ResBody, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let layer = &*self.layer.options;
        // The policies the layer was built with while the backend keeps
        // them; after a reconfiguration, the current ones (described anew
        // when the generation moves, for every clone: they share
        // `described`). Read before the decision, and again after it below.
        let generation = layer.backend.generation();
        let current;
        let described = if generation == layer.first.generation {
            &layer.first
        } else {
            current = layer.reconfigured(generation);
            &*current
        };
        let key = layer
            .extractor
            .extract(&request)
            .or_else(|| layer.fallback.clone());
        // Matched in place, not moved into a tuple: a verdict is a few
        // hundred bytes (BENCHMARKS.md, "Over HTTP").
        let now = key.as_ref().and_then(|key| layer.backend.check_now(key));
        // **The policies that decided**: those the verdict names (see
        // `said`); for a backend that does not say, read after the
        // decision, so that a reconfiguration the decision saw is seen
        // here too (see `decided_by`).
        let after;
        let own;
        let (policies, written) = match &now {
            // The backend said which policies decided: those name it.
            Some(Verdict {
                decided_by: DecidedBy::Base,
                ..
            }) => (Some(&layer.base.policies), Some(&layer.base.written)),
            Some(Verdict {
                decided_by: DecidedBy::Policies(set),
                ..
            }) => {
                if let Some(known) = [described, &layer.base]
                    .into_iter()
                    .find(|known| set.matches(&known.policies))
                {
                    (Some(&known.policies), Some(&known.written))
                } else {
                    // The layer's description of a later generation, if
                    // it is theirs; else written for this response (a
                    // key's own quota).
                    let later = layer.backend.generation();
                    if later != generation {
                        after = layer.reconfigured(later);
                        if set.matches(&after.policies) {
                            (Some(&after.policies), Some(&after.written))
                        } else {
                            own = Some(set_list(set));
                            (own.as_ref(), None)
                        }
                    } else {
                        own = Some(set_list(set));
                        (own.as_ref(), None)
                    }
                }
            }
            Some(verdict) => {
                let later = layer.backend.generation();
                let after_described = if later != generation {
                    after = layer.reconfigured(later);
                    Some(&**after)
                } else {
                    None
                };
                // A key with its own quota is described by its own policies.
                own = key
                    .as_ref()
                    .and_then(|k| layer.backend.key_policies(k))
                    .map(|own| PolicyList::new(&own));
                decided_by(
                    verdict,
                    own.as_ref(),
                    after_described,
                    (&described.policies, Some(&described.written)),
                )
            }
            None => {
                own = key
                    .as_ref()
                    .and_then(|k| layer.backend.key_policies(k))
                    .map(|own| PolicyList::new(&own));
                match &own {
                    Some(own) => (Some(own), None),
                    None => (Some(&described.policies), Some(&described.written)),
                }
            }
        };
        let style = Style {
            // No description fits the decision (see `decided_by`): no
            // rate-limit fields rather than another configuration's.
            headers: if policies.is_some() {
                layer.headers
            } else {
                HeaderStyle::None
            },
            deny: layer.deny,
            policies: policies.unwrap_or(&described.policies),
            written,
            hook: layer.on_deny.as_ref(),
            unavailable: layer.unavailable,
            name: &layer.name,
        };
        let headers = match (key, &now) {
            // Decided at once (in process): call the inner service below,
            // the one `poll_ready` readied, with no clone of it.
            (Some(key), Some(verdict)) => match verdict.decision {
                Ok(admitted) => admitted_headers(&style, verdict, &admitted),
                Err(denied) => {
                    // The hook sees the request's head and key.
                    let (parts, _body) = request.into_parts();
                    let response = denial(
                        &style,
                        denied,
                        verdict.per_policy.as_ref(),
                        Some(&parts),
                        Some(&key),
                    );
                    return ResponseFuture::new(State::Done {
                        response: Some(response),
                    });
                }
            },
            (Some(key), None) => {
                let redescribe: Redescribe = {
                    let (backend, cache) =
                        (Arc::clone(&layer.backend), Arc::clone(&layer.described));
                    let key = key.clone();
                    Box::new(move || {
                        let later = backend.generation();
                        let after = (later != generation).then(|| {
                            arc_swap::Guard::into_inner(described_at(&*backend, &cache, later))
                        });
                        let own = backend.key_policies(&key).map(|own| PolicyList::new(&own));
                        (own, after)
                    })
                };
                return ResponseFuture::new(State::Checking {
                    pending: Box::pin(Pending {
                        redescribe,
                        base: layer.base.clone(),
                        key: style
                            .hook
                            .as_ref()
                            .map(|_| Box::new(key.clone()) as Box<dyn core::any::Any + Send>),
                        check: layer.backend.check(key),
                        // Before `ready_clone`: the style borrows the layer.
                        style: OwnedStyle::from(&style),
                        request: Some((request, self.ready_clone())),
                    }),
                });
            }
            (None, _) => {
                let missing = layer.missing;
                // Relaxed: only decides whether to log; no data depends on it.
                if !layer.missing_logged.swap(true, Ordering::Relaxed) {
                    let hint = KeyExtractor::<ReqBody>::missing_key_hint(&layer.extractor);
                    tracing::error!(
                        "slidelog: {} found no rate-limit key for a request and no fallback key \
                         is set; answering {missing:?} (logged once per layer). {hint}",
                        core::any::type_name::<X>()
                    );
                }
                let status = match missing {
                    MissingKey::Allow => None,
                    MissingKey::Reject(status) => Some(status),
                    MissingKey::ServerError => Some(http::StatusCode::INTERNAL_SERVER_ERROR),
                };
                if let Some(status) = status {
                    return ResponseFuture::new(State::Done {
                        response: Some(missing_key(style.deny, status)),
                    });
                }
                Headers::None
            }
        };
        // Admitted, or let through without a key: the one place that calls
        // the inner service.
        ResponseFuture::new(State::Calling {
            call: self.inner.call(request),
            headers,
        })
    }
}

impl<L: Backend<K> + ?Sized, X, K> Options<L, X, K> {
    /// The backend's policies at `generation`, not the first one's: the
    /// shared description, written anew if it is of another generation.
    /// Out of line: a backend never reconfigured does not call it.
    #[inline(never)]
    fn reconfigured(&self, generation: u64) -> arc_swap::Guard<Arc<Described>> {
        described_at(&*self.backend, &self.described, generation)
    }
}

/// `backend`'s policies at `generation` from the shared description
/// `cache`, written anew if it is of another generation.
fn described_at<L: Backend<K> + ?Sized, K>(
    backend: &L,
    cache: &ArcSwap<Described>,
    generation: u64,
) -> arc_swap::Guard<Arc<Described>> {
    let described = cache.load();
    if described.generation == generation {
        return described;
    }
    cache.store(Arc::new(Described::of(backend)));
    cache.load()
}

/// For a check that is awaited: after its verdict, the key's own policies
/// and the layer's description at the generation read then, if it moved
/// from the one read before the check (see [`decided_by`]).
type Redescribe = Box<dyn Fn() -> (Option<PolicyList>, Option<Arc<Described>>) + Send>;

/// **Which description a verdict that does not say its policies gets**
/// ([`DecidedBy::Unsaid`]; see [`said`] for one that does): the first of the key's own
/// policies (read after the decision), the layer's description at the
/// generation read after the decision (if it moved during it) and the one
/// read before it, that fits the verdict (see [`fits`]); `None` if none
/// does. The description cached for a generation is what the backend
/// answered for it, but a backend's generation and its decisions are two
/// reads: the keyed limiter moves each key to new policies after the
/// generation moved, the single-key limiter moves the generation after its
/// policies changed. So a decision racing a reconfiguration may have been
/// made by the configuration on either side of it, and only one of them
/// can describe it; a verdict that neither describes (two
/// reconfigurations within one decision) is sent without rate-limit
/// fields.
fn decided_by<'a>(
    verdict: &Verdict,
    own: Option<&'a PolicyList>,
    after: Option<&'a Described>,
    before: (&'a PolicyList, Option<&'a Written>),
) -> (Option<&'a PolicyList>, Option<&'a Written>) {
    if let Some(own) = own
        && fits(verdict, own)
    {
        return (Some(own), None);
    }
    if let Some(after) = after
        && fits(verdict, &after.policies)
    {
        return (Some(&after.policies), Some(&after.written));
    }
    if fits(verdict, before.0) {
        return (Some(before.0), before.1);
    }
    (None, None)
}

/// **The description of policies a backend said decided** (`set`): the
/// layer's description read before the decision, of its base policies, of
/// the generation read after it, if one of them is of `set` (their values
/// written once); else `own`, `set` written per response.
fn said<'a>(
    set: &PolicySet,
    own: Option<&'a PolicyList>,
    after: Option<&'a Described>,
    before: (&'a PolicyList, Option<&'a Written>),
    base: &'a Described,
) -> (Option<&'a PolicyList>, Option<&'a Written>) {
    if set.matches(before.0) {
        return (Some(before.0), before.1);
    }
    if set.matches(&base.policies) {
        return (Some(&base.policies), Some(&base.written));
    }
    if let Some(after) = after
        && set.matches(&after.policies)
    {
        return (Some(&after.policies), Some(&after.written));
    }
    (own, None)
}

/// `set` as a list written per response.
fn set_list(set: &PolicySet) -> PolicyList {
    let mut policies = [Policy::new(0, core::time::Duration::ZERO); crate::MAX_POLICIES];
    let len = set.write_into(&mut policies);
    PolicyList::new(&policies[..len])
}

/// Whether `policies` can have decided `verdict`: the policy it names is
/// one of them, its `remaining` is at most that policy's limit, and each
/// policy's state (with several) is one of theirs, within its limit. Two
/// configurations differ in a limit or a number of policies, so a verdict
/// of one does not fit the other but where their answers coincide.
fn fits(verdict: &Verdict, policies: &PolicyList) -> bool {
    if verdict.degraded {
        return true;
    }
    let states_fit = verdict.per_policy.as_ref().is_none_or(|states| {
        states.as_slice().len() == policies.len()
            && states
                .as_slice()
                .iter()
                .zip(policies.iter())
                .all(|(&(remaining, _), policy)| remaining <= policy.limit)
    });
    let named_fits = match &verdict.decision {
        Ok(admitted) => policies
            .get(admitted.policy())
            .is_some_and(|policy| admitted.remaining() <= policy.limit),
        Err(denied) => {
            denied.reason() != crate::DenyReason::RateLimited || denied.policy() < policies.len()
        }
    };
    states_fit && named_fits
}

/// The backend's policies as the headers describe them, at one generation.
#[derive(Clone)]
struct Described {
    policies: PolicyList,
    /// Their `RateLimit-Policy` value and spent items (interned: static
    /// strings).
    written: Written,
    generation: u64,
}

impl Described {
    fn of<L: Backend<K> + ?Sized, K>(backend: &L) -> Described {
        // The policies between two equal readings of the generation: a
        // description labelled with a generation holds that generation's
        // policies (a reconfiguration between the reads is read again).
        // Past a few attempts, labelled with the first reading: a request
        // that reads a later one describes it anew, and `decided_by`
        // checks what it is given.
        let mut generation = backend.generation();
        let mut policies = backend.policies();
        for _ in 0..3 {
            let again = backend.generation();
            if again == generation {
                break;
            }
            generation = again;
            policies = backend.policies();
        }
        Described::named(&policies, generation)
    }

    /// `policies` described, labelled `generation`.
    fn named(policies: &[Policy], generation: u64) -> Described {
        let policies = PolicyList::named(policies);
        Described {
            written: Written::of(&policies),
            policies,
            generation,
        }
    }
}

/// A [`Style`] that outlives `call`: a pending check's.
struct OwnedStyle {
    headers: HeaderStyle,
    deny: DenyStyle,
    policies: PolicyList,
    written: Option<Written>,
    hook: Option<DenyHook>,
    unavailable: http::StatusCode,
    name: crate::observe::Name,
}

impl From<&Style<'_>> for OwnedStyle {
    fn from(style: &Style<'_>) -> OwnedStyle {
        OwnedStyle {
            headers: style.headers,
            deny: style.deny,
            policies: *style.policies,
            written: style.written.cloned(),
            hook: style.hook.cloned(),
            unavailable: style.unavailable,
            name: style.name.clone(),
        }
    }
}

impl OwnedStyle {
    fn style(&self) -> Style<'_> {
        Style {
            headers: self.headers,
            deny: self.deny,
            policies: &self.policies,
            written: self.written.as_ref(),
            hook: self.hook.as_ref(),
            unavailable: self.unavailable,
            name: &self.name,
        }
    }
}

/// The rate-limit headers of an admission (and its count in the metrics).
fn admitted_headers(style: &Style<'_>, verdict: &Verdict, admitted: &Admitted) -> Headers {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "slidelog_requests_total",
        "limiter" => style.name.label(),
        "decision" => "admitted"
    )
    .increment(1);
    // Admitted by a failure policy (fail open): nothing was counted, so no
    // `RateLimit` fields.
    if verdict.degraded {
        return Headers::default();
    }
    list_headers(
        style.headers,
        style.policies,
        style.written,
        admitted.policy(),
        admitted.remaining(),
        verdict.wait,
        verdict.per_policy.as_ref(),
    )
}

pin_project! {
    /// The future of [`RateLimitService`]: checks the limiter, then calls the
    /// inner service or answers the denial. Returned by
    /// `RateLimitService::call`; see [`RateLimitService`] for an example.
    pub struct ResponseFuture<F, S, ReqBody, ResBody, R = WrapBody>
    where
        S: tower::Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<F, S, ReqBody>,
        // The inner service's body type, and how the response carries it
        // ([`BodyMode`]).
        body: PhantomData<fn() -> (ResBody, R)>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, ReqBody>
    where
        S: tower::Service<Request<ReqBody>>,
    {
        // Boxed: only a backend that decides asynchronously (Redis) waits
        // here, and a future is as large as its largest state; an
        // in-process decision's future, moved several times on its way to
        // the server, never enters this one.
        Checking { pending: Pin<Box<Pending<F, S, ReqBody>>> },
        Calling { #[pin] call: S::Future, headers: Headers },
        // The layer's own answer: its body typed when it is returned.
        Done { response: Option<Response<Bytes>> },
    }
}

pin_project! {
    /// A request whose verdict the backend is still working out, and how
    /// its response is written.
    struct Pending<F, S, ReqBody> {
        #[pin]
        check: F,
        request: Option<(Request<ReqBody>, S)>,
        // A copy of the key, kept only for a `deny_with` hook.
        key: Option<Box<dyn core::any::Any + Send>>,
        // The description read before the check.
        style: OwnedStyle,
        // The description read after it.
        redescribe: Redescribe,
        // The layer's description of the backend's base policies.
        base: Described,
    }
}

impl<F, S, ReqBody, ResBody, R> ResponseFuture<F, S, ReqBody, ResBody, R>
where
    S: tower::Service<Request<ReqBody>>,
{
    #[inline(always)]
    fn new(state: State<F, S, ReqBody>) -> Self {
        ResponseFuture {
            state,
            body: PhantomData,
        }
    }
}

impl<F, S, ReqBody, ResBody, R> fmt::Debug for ResponseFuture<F, S, ReqBody, ResBody, R>
where
    S: tower::Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<F, S, ReqBody, ResBody, R> Future for ResponseFuture<F, S, ReqBody, ResBody, R>
where
    F: Future<Output = Verdict>,
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    R: BodyMode<ResBody>,
{
    type Output = Result<Response<R::Body>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking { pending } => {
                    let pending = pending.as_mut().project();
                    let verdict = core::task::ready!(pending.check.poll(cx));
                    let Some((request, mut inner)) = pending.request.take() else {
                        unreachable!("polled after completion")
                    };
                    // The policies that decided, as for an in-process
                    // decision: those the backend said, else those read
                    // around the decision that fit it (see `decided_by`).
                    let (own, after) = match verdict.decided_by {
                        DecidedBy::Policies(set)
                            if !set.matches(&pending.style.policies)
                                && !set.matches(&pending.base.policies) =>
                        {
                            let (_, after) = (pending.redescribe)();
                            match after {
                                Some(after) if set.matches(&after.policies) => (None, Some(after)),
                                _ => (Some(set_list(&set)), None),
                            }
                        }
                        DecidedBy::Unsaid => (pending.redescribe)(),
                        _ => (None, None),
                    };
                    let mut style = pending.style.style();
                    let named = match verdict.decided_by {
                        DecidedBy::Base => {
                            (Some(&pending.base.policies), Some(&pending.base.written))
                        }
                        DecidedBy::Policies(set) => said(
                            &set,
                            own.as_ref(),
                            after.as_deref(),
                            (style.policies, style.written),
                            &*pending.base,
                        ),
                        _ => decided_by(
                            &verdict,
                            own.as_ref(),
                            after.as_deref(),
                            (style.policies, style.written),
                        ),
                    };
                    match named {
                        (Some(policies), written) => {
                            style.policies = policies;
                            style.written = written;
                        }
                        (None, _) => style.headers = HeaderStyle::None,
                    }
                    match verdict.decision {
                        Ok(admitted) => {
                            let headers = admitted_headers(&style, &verdict, &admitted);
                            let call = inner.call(request);
                            this.state.set(State::Calling { call, headers });
                        }
                        Err(denied) => {
                            // The hook sees the request's head and key.
                            let (parts, _body) = request.into_parts();
                            let key = pending.key.take();
                            let response = denial(
                                &style,
                                denied,
                                verdict.per_policy.as_ref(),
                                Some(&parts),
                                key.as_deref(),
                            );
                            this.state.set(State::Done {
                                response: Some(response),
                            });
                        }
                    }
                }
                StateProj::Calling { call, headers } => {
                    let response = core::task::ready!(call.poll(cx))?;
                    let (mut parts, body) = response.into_parts();
                    core::mem::take(headers).write_to(&mut parts.headers, false);
                    return Poll::Ready(Ok(Response::from_parts(parts, R::inner(body))));
                }
                StateProj::Done { response } => {
                    let Some(response) = response.take() else {
                        unreachable!("polled after completion")
                    };
                    return Poll::Ready(Ok(response.map(R::full)));
                }
            }
        }
    }
}
