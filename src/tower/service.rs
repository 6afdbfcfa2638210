//! The layer and the service: check the backend, then call the inner
//! service with the rate-limit headers added, or answer the denial.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;

use super::body::{BodyMode, WrapBody};
use super::deny::{MissingKey, Style, denial, missing_key};
use super::describe::{
    Described, OwnedStyle, Redescribe, admitted_headers, decided_by, described_at, said, set_list,
};
use super::extract::KeyExtractor;
use super::headers::{HeaderStyle, Headers, PolicyList};
use super::layer::RateLimitLayer;
use crate::backend::{Backend, Verdict};
use crate::decision::DecidedBy;
use crate::sync::atomic::Ordering;

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
    pub(super) inner: S,
    pub(super) layer: RateLimitLayer<L, X, K, R>,
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

impl<S, L: ?Sized, X: Clone, K: Clone, R> tower::Layer<S> for RateLimitLayer<L, X, K, R> {
    type Service = RateLimitService<S, L, X, K, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            layer: self.clone(),
        }
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
