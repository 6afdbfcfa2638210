//! The response body: the inner service's, untouched, or a denial's short
//! body.

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The response body: the inner service's, untouched, or the short body
    /// of a denial. Produced by [`RateLimitService`] (see its example); implements
    /// [`http_body::Body`].
    pub struct RateLimitBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
    }
}

impl<B> RateLimitBody<B> {
    pub(super) fn inner(body: B) -> Self {
        RateLimitBody {
            kind: Kind::Inner { body },
        }
    }

    pub(super) fn full(data: Bytes) -> Self {
        RateLimitBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B> fmt::Debug for RateLimitBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RateLimitBody")
    }
}

impl<B> Body for RateLimitBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// How a [`RateLimitService`](super::RateLimitService) types its responses'
/// bodies: [`WrapBody`] (the default) or [`InnerBody`], chosen with
/// [`RateLimitLayer::inner_body`](super::RateLimitLayer::inner_body).
/// Sealed: these two are the choices.
///
/// ```
/// use slidelog::tower::{BodyMode, InnerBody, WrapBody};
/// // The response body type each mode gives a service whose body is axum's.
/// fn body_of<M: BodyMode<axum::body::Body>>() -> &'static str {
///     std::any::type_name::<M::Body>()
/// }
/// assert!(body_of::<WrapBody>().contains("RateLimitBody"));
/// assert_eq!(body_of::<InnerBody>(), std::any::type_name::<axum::body::Body>());
/// ```
pub trait BodyMode<B>: sealed::Sealed {
    /// The body of the service's responses.
    type Body;

    /// An admitted request's response body: the inner service's.
    #[doc(hidden)]
    fn inner(body: B) -> Self::Body;

    /// A response the layer writes itself (a denial, a refused request
    /// without a key), from its bytes.
    #[doc(hidden)]
    fn full(data: Bytes) -> Self::Body;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::WrapBody {}
    impl Sealed for super::InnerBody {}
}

/// The default [`BodyMode`]: responses carry a [`RateLimitBody`], which is
/// the inner service's body for an admitted request and the layer's own
/// for a denial. Works with any inner body type.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::{GlobalKey, RateLimitLayer, WrapBody};
/// use tower::Layer;
/// fn serve<S: tower::Service<http::Request<()>>>(_: S) {}
/// let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
/// let layer: RateLimitLayer<_, _, _, WrapBody> = RateLimitLayer::new(limiter, GlobalKey);
/// // Any inner body, a `String` too.
/// let inner = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
/// });
/// serve(layer.layer(inner));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WrapBody;

/// The [`BodyMode`] of [`RateLimitLayer::inner_body`](super::RateLimitLayer::inner_body):
/// responses carry the inner service's own body type `B`, and the layer
/// builds its denials' bodies with `B::from(Bytes)`.
///
/// axum answers a route's response with its own `axum::body::Body`, boxing
/// any other body type on every response: with this mode an axum handler's
/// body passes through the layer and axum unchanged, one allocation fewer
/// for every admitted request.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::{GlobalKey, InnerBody, RateLimitLayer};
/// let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1))?);
/// let _layer: RateLimitLayer<_, _, _, InnerBody> =
///     RateLimitLayer::new(limiter, GlobalKey).inner_body();
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
///
/// A body type without `From<Bytes>` (here `String`, which [`WrapBody`]
/// carries: see its example) cannot carry the layer's own answers; the
/// compiler says so (``the trait `From<Bytes>` is not implemented for
/// `String` ``, required for `InnerBody` to implement `BodyMode<String>`).
///
/// ```compile_fail,E0277
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::{GlobalKey, RateLimitLayer};
/// use tower::Layer;
/// fn serve<S: tower::Service<http::Request<()>>>(_: S) {}
/// let limiter = Arc::new(KeyedLimiter::<()>::new(10, Duration::from_secs(1)).unwrap());
/// let inner = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
/// });
/// serve(RateLimitLayer::new(limiter, GlobalKey).inner_body().layer(inner));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct InnerBody;

impl<B> BodyMode<B> for WrapBody {
    type Body = RateLimitBody<B>;

    #[inline]
    fn inner(body: B) -> RateLimitBody<B> {
        RateLimitBody::inner(body)
    }

    fn full(data: Bytes) -> RateLimitBody<B> {
        RateLimitBody::full(data)
    }
}

impl<B: From<Bytes>> BodyMode<B> for InnerBody {
    type Body = B;

    #[inline]
    fn inner(body: B) -> B {
        body
    }

    fn full(data: Bytes) -> B {
        B::from(data)
    }
}
