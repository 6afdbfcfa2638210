//! A [`tower::Layer`](https://docs.rs/tower/latest/tower/trait.Layer.html) that rate-limits HTTP (and gRPC) requests per key and
//! answers `429 Too Many Requests` with exact `Retry-After` and IETF
//! `RateLimit` headers. Feature `tower`.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use slidelog::KeyedLimiter;
//! use slidelog::tower::{HeaderKey, RateLimitLayer};
//!
//! // 5 requests per 10 seconds per API key (requests without one share a key).
//! let limiter = Arc::new(KeyedLimiter::<String>::new(5, Duration::from_secs(10))?);
//! let layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"));
//! // axum: Router::new().route("/", get(handler)).layer(layer)
//! # let _ = layer;
//! # Ok::<(), slidelog::ConfigError>(())
//! ```

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::hash_map::RandomState;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::algorithm::{Algorithm, RateLimit as SingleKey};
use crate::clock::Clock;
use crate::counter::SlidingCounter;
use crate::decision::{Admitted, Denied, DenyReason};
use crate::keyed::KeyedLimiter;
use crate::limiter::Limiter;
use crate::policy::Policy;
use crate::sync::atomic::{AtomicBool, Ordering};

/// Picks the key a request is limited by.
///
/// `None` means "no key could be found": the request is then limited under
/// the layer's fallback key (see [`RateLimitLayer::fallback_key`]), never
/// let through unlimited.
pub trait KeyExtractor<B>: Clone + Send + Sync + 'static {
    /// The key type.
    type Key: Hash + Eq + Clone + Send + Sync + 'static;

    /// The key of `request`, if it has one.
    fn extract(&self, request: &Request<B>) -> Option<Self::Key>;
}

/// One key for every request: a global limit.
///
/// ```
/// use slidelog::tower::{GlobalKey, KeyExtractor};
/// let request = http::Request::new(());
/// assert_eq!(GlobalKey.extract(&request), Some(()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GlobalKey;

impl<B> KeyExtractor<B> for GlobalKey {
    type Key = ();
    fn extract(&self, _: &Request<B>) -> Option<()> {
        Some(())
    }
}

/// The peer's IP address, from a [`SocketAddr`] or [`IpAddr`] request
/// extension, or axum's [`ConnectInfo`] (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`); with hyper or
/// tonic, insert the accepted connection's address yourself. A request
/// with no address has no key: see [`RateLimitLayer::new`].
///
/// Forwarding headers are **ignored** unless you opt in with
/// [`trust_forwarded`](Self::trust_forwarded): anyone can send
/// `X-Forwarded-For: 1.2.3.4`, so trusting it without a proxy that
/// overwrites it lets a client pick its own key.
///
/// [`ConnectInfo`]: https://docs.rs/axum/latest/axum/extract/struct.ConnectInfo.html
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use slidelog::tower::{KeyExtractor, PeerIp};
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 4242)));
/// request.headers_mut().insert("x-forwarded-for", "1.2.3.4".parse().unwrap());
/// assert_eq!(PeerIp::new().extract(&request), Some(IpAddr::from([10, 0, 0, 1])));
/// assert_eq!(PeerIp::new().trust_forwarded().extract(&request), Some(IpAddr::from([1, 2, 3, 4])));
/// ```
///
/// **IPv6.** One client usually holds a whole /64 (and often more) and can
/// rotate through its addresses at will, so keying by the full IPv6 address
/// gives it a fresh limit per request. Key by the prefix instead: the
/// recommended setting is [`ipv6_prefix(64)`](Self::ipv6_prefix) (what a
/// residential or cloud customer is assigned); IPv4 addresses (and
/// IPv4-mapped IPv6 ones) are always keyed whole. The default keeps the full
/// address (128), as before this option existed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerIp {
    trust_forwarded: bool,
    ipv6_prefix: u8,
}

impl Default for PeerIp {
    fn default() -> Self {
        PeerIp {
            trust_forwarded: false,
            ipv6_prefix: 128,
        }
    }
}

impl PeerIp {
    /// The connection's peer address; forwarding headers ignored.
    ///
    /// ```
    /// let _ = slidelog::tower::PeerIp::new();
    /// ```
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// Also trust `X-Forwarded-For` (its first address) and `Forwarded`
    /// (`for=`), before the peer address. Only behind a proxy that sets
    /// them; otherwise clients choose their own key.
    ///
    /// ```
    /// let _ = slidelog::tower::PeerIp::new().trust_forwarded();
    /// ```
    pub fn trust_forwarded(mut self) -> Self {
        self.trust_forwarded = true;
        self
    }

    /// Keys IPv6 clients by their first `bits` bits (at most 128; larger
    /// values mean 128): every address of one /`bits` network shares a
    /// limit. Recommended: 64. IPv4 is unaffected.
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use slidelog::tower::{KeyExtractor, PeerIp};
    /// let mut request = http::Request::new(());
    /// let client: IpAddr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
    /// request.extensions_mut().insert(SocketAddr::new(client, 443));
    /// let network: IpAddr = "2001:db8:1:2::".parse().unwrap();
    /// assert_eq!(PeerIp::new().ipv6_prefix(64).extract(&request), Some(network));
    /// assert_eq!(PeerIp::new().extract(&request), Some(client));
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = bits.min(128);
        self
    }

    /// `ip` as a key: IPv6 masked to the prefix, IPv4 (also IPv4-mapped)
    /// whole.
    fn key(&self, ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V6(v6) if self.ipv6_prefix < 128 => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.ipv6_prefix))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
            other => other,
        }
    }
}

impl PeerIp {
    /// The client's address, before masking.
    fn peer<B>(&self, request: &Request<B>) -> Option<IpAddr> {
        if self.trust_forwarded {
            if let Some(ip) = forwarded_ip(request.headers()) {
                return Some(ip);
            }
        }
        let ext = request.extensions();
        if let Some(addr) = ext.get::<SocketAddr>() {
            return Some(addr.ip());
        }
        if let Some(ip) = ext.get::<IpAddr>() {
            return Some(*ip);
        }
        if let Some(info) = ext.get::<axum::extract::ConnectInfo<SocketAddr>>() {
            return Some(info.0.ip());
        }
        None
    }
}

impl<B> KeyExtractor<B> for PeerIp {
    type Key = IpAddr;

    fn extract(&self, request: &Request<B>) -> Option<IpAddr> {
        self.peer(request).map(|ip| self.key(ip))
    }
}

/// The client address from `Forwarded: for=...` or `X-Forwarded-For`, if one
/// parses. Malformed values are ignored, never an error.
pub(crate) fn forwarded_ip(headers: &HeaderMap) -> Option<IpAddr> {
    for value in headers.get_all("forwarded") {
        let Ok(text) = value.to_str() else { continue };
        for part in text.split([';', ',']) {
            let Some((name, v)) = part.split_once('=') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("for") {
                if let Some(ip) = parse_node(v.trim().trim_matches('"')) {
                    return Some(ip);
                }
            }
        }
    }
    let first = headers
        .get("x-forwarded-for")?
        .to_str()
        .ok()?
        .split(',')
        .next()?;
    parse_node(first.trim())
}

/// `1.2.3.4`, `1.2.3.4:80`, `[::1]`, `[::1]:80` or `::1`.
fn parse_node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    text.strip_prefix('[')?.split(']').next()?.parse().ok()
}

/// The value of a request header, e.g. an API key.
///
/// The value is chosen by the client, and servers accept header blocks of
/// hundreds of KiB: a value longer than [`max_len`](Self::max_len) bytes
/// (default [`DEFAULT_MAX_KEY_LEN`]) is never stored whole. It is keyed by a
/// 128-bit digest instead (two independently, randomly keyed SipHash-1-3
/// hashes, so clients cannot aim collisions), written as a NUL byte and 32
/// hex digits: no header value can equal it, since header values cannot
/// contain NUL. Digests are per `HeaderKey` (and its clones), so for limits
/// shared across processes (Redis) keep `max_len` above your real keys.
///
/// ```
/// use slidelog::tower::{HeaderKey, KeyExtractor};
/// let request = http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
/// assert_eq!(HeaderKey::new("x-api-key").extract(&request), Some("k1".to_string()));
///
/// let long = "k".repeat(100_000);
/// let request = http::Request::builder().header("x-api-key", long.as_str()).body(()).unwrap();
/// let key = HeaderKey::new("x-api-key").extract(&request).unwrap();
/// assert_eq!(key.len(), 33); // a digest, not the value
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
    digest: (RandomState, RandomState),
}

/// The longest header value [`HeaderKey`] keys by as it is, in bytes.
pub const DEFAULT_MAX_KEY_LEN: usize = 256;

impl HeaderKey {
    /// Keys requests by the header `name`.
    ///
    /// # Panics
    ///
    /// If `name` is not a valid header name; use [`try_new`](Self::try_new)
    /// for names that come from configuration.
    ///
    /// ```
    /// let _ = slidelog::tower::HeaderKey::new("authorization");
    /// ```
    pub fn new(name: &'static str) -> Self {
        HeaderKey::named(HeaderName::from_static(name))
    }

    fn named(name: HeaderName) -> Self {
        HeaderKey {
            name,
            max_len: DEFAULT_MAX_KEY_LEN,
            digest: (RandomState::new(), RandomState::new()),
        }
    }

    /// Values longer than `max_len` bytes are keyed by their digest.
    ///
    /// ```
    /// use slidelog::tower::{HeaderKey, KeyExtractor};
    /// let key = HeaderKey::new("x-api-key").max_len(4);
    /// let request = http::Request::builder().header("x-api-key", "12345").body(()).unwrap();
    /// assert_ne!(key.extract(&request), Some("12345".to_string()));
    /// ```
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    /// Keys requests by the header `name`, if it is a valid header name.
    ///
    /// # Errors
    ///
    /// `name` is not a valid HTTP header name.
    ///
    /// ```
    /// assert!(slidelog::tower::HeaderKey::try_new("x-api-key").is_ok());
    /// assert!(slidelog::tower::HeaderKey::try_new("not a header").is_err());
    /// ```
    pub fn try_new(name: &str) -> Result<Self, http::header::InvalidHeaderName> {
        Ok(HeaderKey::named(HeaderName::from_bytes(name.as_bytes())?))
    }
}

impl<B> KeyExtractor<B> for HeaderKey {
    type Key = String;

    fn extract(&self, request: &Request<B>) -> Option<String> {
        // Non-UTF-8 values are keyed by their bytes, lossily: still distinct
        // from every valid value that differs.
        let value = request.headers().get(&self.name)?.as_bytes();
        if value.len() > self.max_len {
            let (a, b) = &self.digest;
            return Some(format!(
                "\0{:016x}{:016x}",
                a.hash_one(value),
                b.hash_one(value)
            ));
        }
        Some(String::from_utf8_lossy(value).into_owned())
    }
}

/// Keys requests with a closure.
///
/// ```
/// use slidelog::tower::{KeyExtractor, KeyFn};
/// let by_path = KeyFn::new(|req: &http::Request<()>| Some(req.uri().path().to_string()));
/// let request = http::Request::builder().uri("/a").body(()).unwrap();
/// assert_eq!(by_path.extract(&request), Some("/a".to_string()));
/// ```
#[derive(Clone)]
pub struct KeyFn<F>(F);

impl<F> KeyFn<F> {
    /// Wraps `f`.
    ///
    /// ```
    /// let _ = slidelog::tower::KeyFn::new(|_: &http::Request<()>| Some(1u8));
    /// ```
    pub fn new(f: F) -> Self {
        KeyFn(f)
    }
}

impl<F> fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyFn")
    }
}

impl<B, K, F> KeyExtractor<B> for KeyFn<F>
where
    F: Fn(&Request<B>) -> Option<K> + Clone + Send + Sync + 'static,
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    type Key = K;
    fn extract(&self, request: &Request<B>) -> Option<K> {
        (self.0)(request)
    }
}

/// Which rate-limit headers to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// IETF httpapi (draft-ietf-httpapi-ratelimit-headers-12, November 2026;
    /// the same fields since -10):
    /// `RateLimit-Policy: "default";q=5;w=10` and `RateLimit:
    /// "default";r=4;t=10`, where `t` is the seconds until the quota next
    /// grows (the oldest admission in the window leaves it), 0 only for an
    /// empty window.
    #[default]
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`
    /// (seconds until a request can be admitted).
    Legacy,
    /// Only `Retry-After` on denials.
    None,
}

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

/// Whole seconds, rounded **up** (a 300 ms wait is `1`, never `0`).
///
/// ```
/// use std::time::Duration;
/// use slidelog::tower::ceil_seconds;
/// assert_eq!(ceil_seconds(Duration::from_millis(300)), 1);
/// assert_eq!(ceil_seconds(Duration::from_secs(2)), 2);
/// assert_eq!(ceil_seconds(Duration::from_nanos(2_000_000_001)), 3);
/// assert_eq!(ceil_seconds(Duration::ZERO), 0);
/// ```
pub fn ceil_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The header values for one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Headers(pub(crate) Vec<(HeaderName, HeaderValue)>);

/// The name of policy `i` in the IETF headers: `"default"` for a limiter
/// of one policy; with several, its window (`"1s"`, `"1m"`, `"1h"`,
/// `"250ms"`, …), with `-i` appended when two policies share a window.
///
/// ```
/// use std::time::Duration;
/// use slidelog::Policy;
/// use slidelog::tower::policy_name;
/// let ps = [
///     Policy::new(10, Duration::from_secs(1)),
///     Policy::new(100, Duration::from_secs(60)),
///     Policy::new(500, Duration::from_secs(60)),
/// ];
/// assert_eq!(policy_name(&ps, 0), "1s");
/// assert_eq!(policy_name(&ps, 1), "1m");
/// assert_eq!(policy_name(&ps, 2), "1m-2");
/// assert_eq!(policy_name(&ps[..1], 0), "default");
/// ```
pub fn policy_name(policies: &[Policy], i: usize) -> String {
    if policies.len() <= 1 {
        return "default".to_string();
    }
    let label = |w: Duration| -> String {
        let ns = w.as_nanos();
        const S: u128 = 1_000_000_000;
        if ns % (3_600 * S) == 0 {
            format!("{}h", ns / (3_600 * S))
        } else if ns % (60 * S) == 0 {
            format!("{}m", ns / (60 * S))
        } else if ns % S == 0 {
            format!("{}s", ns / S)
        } else if ns % 1_000_000 == 0 {
            format!("{}ms", ns / 1_000_000)
        } else {
            format!("{ns}ns")
        }
    };
    let name = label(policies[i].window);
    let shared = policies[..i].iter().any(|p| label(p.window) == name);
    if shared { format!("{name}-{i}") } else { name }
}

/// Builds the rate-limit headers for `policies`, reporting on policy
/// `which` (the one closest to exhaustion, or the one that denied).
/// `wait` is the time until `remaining` next grows (see [`Verdict::wait`]);
/// the legacy reset is the time until a request can be admitted: 0 while
/// `remaining > 0`, else `wait`.
pub(crate) fn rate_limit_headers(
    style: HeaderStyle,
    policies: &[Policy],
    which: usize,
    remaining: u32,
    wait: Duration,
) -> Headers {
    let num = |n: u64| HeaderValue::from(n);
    let mut out = Vec::new();
    let which = which.min(policies.len().saturating_sub(1));
    let Some(reported) = policies.get(which) else {
        return Headers(out);
    };
    match style {
        HeaderStyle::Ietf => {
            let policy = (0..policies.len())
                .map(|i| {
                    format!(
                        "\"{}\";q={};w={}",
                        policy_name(policies, i),
                        policies[i].limit,
                        ceil_seconds(policies[i].window)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let state = format!(
                "\"{}\";r={remaining};t={}",
                policy_name(policies, which),
                ceil_seconds(wait)
            );
            // Only digits, unit letters and fixed ASCII: always valid
            // header values.
            if let (Ok(p), Ok(s)) = (
                HeaderValue::from_str(&policy),
                HeaderValue::from_str(&state),
            ) {
                out.push((HeaderName::from_static("ratelimit-policy"), p));
                out.push((HeaderName::from_static("ratelimit"), s));
            }
        }
        HeaderStyle::Legacy => {
            out.push((
                HeaderName::from_static("x-ratelimit-limit"),
                num(u64::from(reported.limit)),
            ));
            out.push((
                HeaderName::from_static("x-ratelimit-remaining"),
                num(u64::from(remaining)),
            ));
            let reset = if remaining > 0 { Duration::ZERO } else { wait };
            out.push((
                HeaderName::from_static("x-ratelimit-reset"),
                num(ceil_seconds(reset)),
            ));
        }
        HeaderStyle::None => {}
    }
    Headers(out)
}

/// What a backend answers for one request.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::Backend;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = KeyedLimiter::<u64>::new(2, Duration::from_secs(60))?;
/// let verdict = Backend::check(&limiter, 7).await;
/// assert_eq!(verdict.decision.unwrap().remaining(), 1);
/// // The admission just made is the oldest in the window: the quota grows
/// // back when it leaves, 60 s from now.
/// assert_eq!(verdict.wait, Duration::from_secs(60));
/// # Ok::<(), slidelog::ConfigError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The decision.
    pub decision: Result<Admitted, Denied>,
    /// For an admission: how long until `remaining` next grows, i.e. until
    /// the oldest admission still in the window leaves it (the IETF `t`);
    /// zero only for an empty window. (While `remaining > 0` a request fits
    /// now; at `remaining == 0` this is also the wait for the next one.)
    pub wait: Duration,
}

/// A limiter the layer can ask: the in-process [`KeyedLimiter`] (exact log
/// or counter per key), a single-key [`Limiter`] or [`SlidingCounter`] (one
/// limit for all keys), any `dyn` [`RateLimit`](crate::RateLimit), or
/// (feature `redis`) the
/// Redis limiter.
///
/// ```
/// use std::time::Duration;
/// use slidelog::KeyedLimiter;
/// use slidelog::tower::Backend;
/// let limiter = KeyedLimiter::<String>::new(5, Duration::from_secs(10))?;
/// assert_eq!(Backend::<String>::policy(&limiter), (5, Duration::from_secs(10)));
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait Backend<K>: Send + Sync + 'static {
    /// The future of one check.
    type Future: Future<Output = Verdict> + Send + 'static;
    /// Checks one request for `key`.
    fn check(&self, key: K) -> Self::Future;
    /// `(quota, window)` of the first policy.
    fn policy(&self) -> (u32, Duration);
    /// Every policy, for the `RateLimit-Policy` header (by default the one
    /// of [`policy`](Self::policy)).
    fn policies(&self) -> Vec<Policy> {
        let (limit, window) = self.policy();
        vec![Policy::new(limit, window)]
    }
    /// The policies of `key` when they differ from
    /// [`policies`](Self::policies) (a per-key quota), for its headers;
    /// `None` (the default) when every key has the backend's policies.
    fn key_policies(&self, key: &K) -> Option<Vec<Policy>> {
        let _ = key;
        None
    }
}

impl<K, C, S, A> Backend<K> for KeyedLimiter<K, C, S, A>
where
    K: Hash + Eq + crate::KeySize + Clone + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
    A: Algorithm,
{
    type Future = core::future::Ready<Verdict>;

    fn check(&self, key: K) -> Self::Future {
        let now = self.clock().now();
        let decision = self.check_n_at(&key, 1, now);
        core::future::ready(verdict(decision, |n| self.peek_n_at(&key, n, now)))
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        KeyedLimiter::policies(self).to_vec()
    }

    fn key_policies(&self, key: &K) -> Option<Vec<Policy>> {
        self.has_quotas()
            .then(|| self.policies_for(key).to_vec())
            .filter(|p| p.as_slice() != KeyedLimiter::policies(self))
    }
}

/// A verdict from a decision; `peek(n)` answers a dry run of `n` units: with
/// `remaining + 1` units it is denied exactly until the oldest admission in
/// the window leaves it, when `remaining` grows (with several policies:
/// until the smallest remaining grows). A window with room for that many
/// more (`remaining` is the smallest limit) answers `ExceedsLimit`, not a
/// wait: 0.
fn verdict(
    decision: Result<Admitted, Denied>,
    peek: impl FnOnce(u32) -> Result<Admitted, Denied>,
) -> Verdict {
    let wait = match decision {
        Ok(a) if a.remaining() < u32::MAX => peek(a.remaining() + 1)
            .err()
            .filter(Denied::is_rate_limited)
            .map_or(Duration::ZERO, |d| d.retry_after()),
        _ => Duration::ZERO,
    };
    Verdict { decision, wait }
}

/// A single-key limiter as a backend: one limit shared by every key (use it
/// with [`GlobalKey`], or to cap a whole service whatever the extractor).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::SlidingCounter;
/// use slidelog::tower::{Backend, GlobalKey, RateLimitLayer};
///
/// let counter = Arc::new(SlidingCounter::new(10_000, Duration::from_secs(1), 10)?);
/// assert_eq!(Backend::<()>::policy(&*counter), (10_000, Duration::from_secs(1)));
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(counter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for SlidingCounter<C> {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        single_key_check(self)
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }
}

/// A single-key exact log as a backend: one limit shared by every key.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::Limiter;
/// use slidelog::tower::{Backend, GlobalKey, RateLimitLayer};
///
/// let limiter = Arc::new(Limiter::new(100, Duration::from_secs(1))?);
/// assert_eq!(Backend::<()>::policy(&*limiter), (100, Duration::from_secs(1)));
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(limiter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K, C: Clock + 'static> Backend<K> for Limiter<C> {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        single_key_check(self)
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        Limiter::policies(self).to_vec()
    }
}

/// Any [`RateLimit`](crate::RateLimit) behind a trait object, e.g. an algorithm chosen at
/// run time.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use slidelog::{Limiter, RateLimit, SlidingCounter};
/// use slidelog::tower::{GlobalKey, RateLimitLayer};
///
/// let exact = true;
/// let limiter: Arc<dyn RateLimit> = if exact {
///     Arc::new(Limiter::new(100, Duration::from_secs(1))?)
/// } else {
///     Arc::new(SlidingCounter::new(100, Duration::from_secs(1), 10)?)
/// };
/// let layer: RateLimitLayer<_, _, ()> = RateLimitLayer::new(limiter, GlobalKey);
/// # let _ = layer;
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
impl<K> Backend<K> for dyn SingleKey {
    type Future = core::future::Ready<Verdict>;

    fn check(&self, _: K) -> Self::Future {
        single_key_check(self)
    }

    fn policy(&self) -> (u32, Duration) {
        (self.limit(), self.window())
    }

    fn policies(&self) -> Vec<Policy> {
        SingleKey::policies(self)
    }
}

fn single_key_check<R: SingleKey + ?Sized>(limiter: &R) -> core::future::Ready<Verdict> {
    let now = limiter.now();
    let decision = limiter.check_n_at(1, now);
    core::future::ready(verdict(decision, |n| limiter.peek_n_at(n, now)))
}

/// The [`tower::Layer`](https://docs.rs/tower/latest/tower/trait.Layer.html): wraps a service so that each request is first
/// checked against a keyed limiter.
///
/// Denied requests never reach the inner service; admitted requests pass
/// untouched (body, errors), with rate-limit headers added to the response.
/// Cloning the layer or the service shares the same limiter.
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
pub struct RateLimitLayer<L: ?Sized, X, K> {
    backend: Arc<L>,
    extractor: X,
    fallback: Option<K>,
    headers: HeaderStyle,
    deny: DenyStyle,
    /// The backend's policies, for the headers (asked once).
    policies: PolicyList,
    /// Builds the denial response instead of the default body.
    on_deny: Option<DenyHook>,
    /// Whether a request without a key was logged yet (once per layer and
    /// its clones).
    missing_logged: Arc<AtomicBool>,
}

impl<L: ?Sized, X: Clone, K: Clone> Clone for RateLimitLayer<L, X, K> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            backend: Arc::clone(&self.backend),
            extractor: self.extractor.clone(),
            fallback: self.fallback.clone(),
            headers: self.headers,
            deny: self.deny,
            policies: self.policies,
            on_deny: self.on_deny.clone(),
            missing_logged: Arc::clone(&self.missing_logged),
        }
    }
}

impl<L: ?Sized, X, K> fmt::Debug for RateLimitLayer<L, X, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("headers", &self.headers)
            .field("deny", &self.deny)
            .finish_non_exhaustive()
    }
}

impl<L: ?Sized, X, K> RateLimitLayer<L, X, K>
where
    L: Backend<K>,
{
    /// Limits requests by the key `extractor` finds, against `backend`.
    /// A request for which no key is found is never let through unlimited:
    /// unless a shared fallback key is set with
    /// [`fallback_key`](Self::fallback_key), it is answered **500 Internal
    /// Server Error** (gRPC: `INTERNAL`) with the reason in the body, and
    /// the first one is logged (a `tracing` error): a missing key is a
    /// server misconfiguration (e.g. `PeerIp` on a server that does not
    /// record peer addresses), not the client's fault, so it is not a 429
    /// with a made-up `Retry-After`.
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
        RateLimitLayer {
            policies: PolicyList::new(&backend.policies()),
            backend,
            extractor,
            fallback: None,
            headers: HeaderStyle::default(),
            deny: DenyStyle::default(),
            on_deny: None,
            missing_logged: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<L: ?Sized, X, K> RateLimitLayer<L, X, K> {
    /// The key shared by requests without one. By default there is none,
    /// and such requests are denied with 429.
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
        self.fallback = Some(key);
        self
    }

    /// Removes the fallback key set by [`fallback_key`](Self::fallback_key):
    /// requests without a key are denied again.
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
        self.fallback = None;
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
        self.headers = style;
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
        self.deny = style;
        self
    }

    /// Builds every denial's response with `hook` instead of the
    /// [`DenyStyle`]'s body (a JSON error of your API's shape, say). The
    /// layer then adds `Retry-After` and the rate-limit headers unless the
    /// hook set them. Requests without a key are still answered by the
    /// layer (a 500 that explains the misconfiguration).
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
    ///     let body = format!(
    ///         r#"{{"error":"slow down","retry_after_ms":{}}}"#,
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
        self.on_deny = Some(Arc::new(hook));
        self
    }
}

/// What a [`deny_with`](RateLimitLayer::deny_with) hook is told.
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
type DenyHook = Arc<dyn Fn(&Denial<'_>) -> Response<Bytes> + Send + Sync>;

impl<S, L: ?Sized, X: Clone, K: Clone> tower::Layer<S> for RateLimitLayer<L, X, K> {
    type Service = RateLimitService<S, L, X, K>;

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
pub struct RateLimitService<S, L: ?Sized, X, K> {
    inner: S,
    layer: RateLimitLayer<L, X, K>,
}

/// The old name of [`RateLimitService`], which shared its name with the
/// [`slidelog::RateLimit`](crate::RateLimit) trait.
#[deprecated(since = "0.1.0", note = "renamed `RateLimitService`")]
pub type RateLimit<S, L, X, K> = RateLimitService<S, L, X, K>;

impl<S: Clone, L: ?Sized, X: Clone, K: Clone> Clone for RateLimitService<S, L, X, K> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, L: ?Sized, X, K> fmt::Debug for RateLimitService<S, L, X, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl<S, L: ?Sized, X, K, ReqBody, ResBody> tower::Service<Request<ReqBody>>
    for RateLimitService<S, L, X, K>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    L: Backend<K>,
    X: KeyExtractor<ReqBody, Key = K>,
    K: Clone,
{
    type Response = Response<RateLimitBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<L::Future, S, ReqBody, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let key = self
            .layer
            .extractor
            .extract(&request)
            .or_else(|| self.layer.fallback.clone());
        // Hand the ready service to the future, keep a fresh clone here
        // (tower's readiness contract).
        let ready = self.inner.clone();
        let inner = core::mem::replace(&mut self.inner, ready);
        // A key with its own quota is described by its own policies.
        let policies = match key
            .as_ref()
            .and_then(|k| self.layer.backend.key_policies(k))
        {
            Some(own) => PolicyList::new(&own),
            None => self.layer.policies,
        };
        let style = (
            self.layer.headers,
            self.layer.deny,
            policies,
            self.layer.on_deny.clone(),
        );
        match key {
            Some(key) => ResponseFuture {
                state: State::Checking {
                    check: self.layer.backend.check(key),
                    request: Some((request, inner)),
                },
                style,
            },
            None => {
                // Relaxed: only decides whether to log; no data depends on it.
                if !self.layer.missing_logged.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "slidelog: a request had no rate-limit key and no fallback key is set; \
                         answering 500. {MISSING_KEY_HELP}"
                    );
                }
                ResponseFuture {
                    state: State::Done {
                        response: Some(missing_key(style.1)),
                    },
                    style,
                }
            }
        }
    }
}

/// The header style, the denial style, the policies and the denial hook,
/// for one response.
type Style = (HeaderStyle, DenyStyle, PolicyList, Option<DenyHook>);

/// Up to [`MAX_POLICIES`](crate::MAX_POLICIES) policies, inline: each
/// response copies them instead of sharing a reference count that every
/// request on every core would write.
#[derive(Clone, Copy)]
struct PolicyList {
    len: u8,
    items: [Policy; crate::MAX_POLICIES],
}

impl PolicyList {
    /// The first `MAX_POLICIES` of `policies` (every backend of this crate
    /// has at most that many).
    fn new(policies: &[Policy]) -> Self {
        let mut items = [Policy::new(0, Duration::ZERO); crate::MAX_POLICIES];
        let len = policies.len().min(items.len());
        items[..len].copy_from_slice(&policies[..len]);
        PolicyList {
            len: len as u8,
            items,
        }
    }
}

impl core::ops::Deref for PolicyList {
    type Target = [Policy];
    fn deref(&self) -> &[Policy] {
        &self.items[..usize::from(self.len)]
    }
}

/// What to do about a request without a key.
const MISSING_KEY_HELP: &str = "PeerIp needs the peer address: serve axum with \
    `into_make_service_with_connect_info::<SocketAddr>()`, or insert a `SocketAddr` request \
    extension (hyper, tonic); or set `RateLimitLayer::fallback_key` to share one limit among \
    requests without a key.";

/// An answer that does not reach the inner service: for HTTP, `status`
/// with `text` as a plain-text body; for gRPC, an empty body with
/// `grpc-status` and a (percent-encoded) `grpc-message`.
fn refusal<B>(
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
fn missing_key<B>(deny: DenyStyle) -> Response<RateLimitBody<B>> {
    refusal(
        deny,
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("Internal Server Error: no rate-limit key for this request. {MISSING_KEY_HELP}"),
        ("13", "no%20rate-limit%20key"),
    )
}

/// The 429 (or gRPC `RESOURCE_EXHAUSTED`) answer for a denial.
fn denial<B>(style: &Style, denied: Denied) -> Response<RateLimitBody<B>> {
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
fn problem_json<B>(message: &str, policy: &str, wait: Duration) -> Response<RateLimitBody<B>> {
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
fn observe_denial(denied: &Denied, policy: &str) {
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

pin_project! {
    /// The future of [`RateLimitService`]: checks the limiter, then calls the
    /// inner service or answers the denial. Returned by
    /// `RateLimitService::call`; see [`RateLimitService`] for an example.
    pub struct ResponseFuture<F, S, ReqBody, ResBody>
    where
        S: tower::Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<F, S, ReqBody, ResBody>,
        style: Style,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, ReqBody, ResBody>
    where
        S: tower::Service<Request<ReqBody>>,
    {
        Checking { #[pin] check: F, request: Option<(Request<ReqBody>, S)> },
        Calling { #[pin] call: S::Future, headers: Headers },
        Done { response: Option<Response<RateLimitBody<ResBody>>> },
    }
}

impl<F, S, ReqBody, ResBody> fmt::Debug for ResponseFuture<F, S, ReqBody, ResBody>
where
    S: tower::Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<F, S, ReqBody, ResBody> Future for ResponseFuture<F, S, ReqBody, ResBody>
where
    F: Future<Output = Verdict>,
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<RateLimitBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking { check, request } => {
                    let verdict = core::task::ready!(check.poll(cx));
                    let Some((request, mut inner)) = request.take() else {
                        unreachable!("polled after completion")
                    };
                    let (style, _, policies, _) = &*this.style;
                    match verdict.decision {
                        Ok(admitted) => {
                            #[cfg(feature = "metrics")]
                            metrics::counter!("slidelog_requests_total", "decision" => "admitted")
                                .increment(1);
                            let headers = rate_limit_headers(
                                *style,
                                policies,
                                admitted.policy(),
                                admitted.remaining(),
                                verdict.wait,
                            );
                            let call = inner.call(request);
                            this.state.set(State::Calling { call, headers });
                        }
                        Err(denied) => {
                            let response = denial(this.style, denied);
                            this.state.set(State::Done {
                                response: Some(response),
                            });
                        }
                    }
                }
                StateProj::Calling { call, headers } => {
                    let response = core::task::ready!(call.poll(cx))?;
                    let (mut parts, body) = response.into_parts();
                    for (name, value) in core::mem::take(&mut headers.0) {
                        parts.headers.insert(name, value);
                    }
                    return Poll::Ready(Ok(Response::from_parts(
                        parts,
                        RateLimitBody::inner(body),
                    )));
                }
                StateProj::Done { response } => {
                    let Some(response) = response.take() else {
                        unreachable!("polled after completion")
                    };
                    return Poll::Ready(Ok(response));
                }
            }
        }
    }
}

pin_project! {
    /// The response body: the inner service's, untouched, or the short body
    /// of a denial. Produced by [`RateLimit`] (see its example); implements
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
    fn inner(body: B) -> Self {
        RateLimitBody {
            kind: Kind::Inner { body },
        }
    }

    fn full(data: Bytes) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ietf_headers() {
        let h = rate_limit_headers(
            HeaderStyle::Ietf,
            &[Policy::new(5, Duration::from_secs(10))],
            0,
            4,
            Duration::from_millis(9_500),
        );
        assert_eq!(h.0[0].1, "\"default\";q=5;w=10");
        assert_eq!(h.0[1].1, "\"default\";r=4;t=10");
        let legacy = rate_limit_headers(
            HeaderStyle::Legacy,
            &[Policy::new(5, Duration::from_secs(10))],
            0,
            4,
            Duration::from_millis(9_500),
        );
        assert_eq!(legacy.0[2].1, "0", "a request fits now");
        let h = rate_limit_headers(
            HeaderStyle::Legacy,
            &[Policy::new(5, Duration::from_millis(1500))],
            0,
            0,
            Duration::from_millis(300),
        );
        assert_eq!(h.0[2].1, "1");
        assert!(
            rate_limit_headers(
                HeaderStyle::None,
                &[Policy::new(5, Duration::from_secs(1))],
                0,
                0,
                Duration::ZERO
            )
            .0
            .is_empty()
        );
    }

    #[test]
    fn one_header_item_per_policy() {
        let policies = [
            Policy::new(10, Duration::from_secs(1)),
            Policy::new(100, Duration::from_secs(60)),
        ];
        let h = rate_limit_headers(
            HeaderStyle::Ietf,
            &policies,
            1,
            7,
            Duration::from_millis(1500),
        );
        assert_eq!(h.0[0].1, "\"1s\";q=10;w=1, \"1m\";q=100;w=60");
        assert_eq!(h.0[1].1, "\"1m\";r=7;t=2");
        let legacy = rate_limit_headers(HeaderStyle::Legacy, &policies, 1, 7, Duration::ZERO);
        assert_eq!(legacy.0[0].1, "100");
    }

    #[test]
    fn forwarded_parsing() {
        let mut h = HeaderMap::new();
        h.insert(
            "forwarded",
            "for=\"[2001:db8::1]:4711\";proto=https".parse().unwrap(),
        );
        assert_eq!(forwarded_ip(&h), Some("2001:db8::1".parse().unwrap()));
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.7, 10.0.0.1".parse().unwrap());
        assert_eq!(forwarded_ip(&h), Some("203.0.113.7".parse().unwrap()));
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "garbage".parse().unwrap());
        h.insert("forwarded", "for=unknown".parse().unwrap());
        assert_eq!(forwarded_ip(&h), None);
    }

    proptest! {
        /// Malformed, huge or non-UTF-8 headers: a key or the fallback,
        /// never a panic.
        #[test]
        fn extractors_never_panic(
            xff in prop::collection::vec(any::<u8>(), 0..300),
            fwd in "\\PC{0,200}",
            api in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut builder = http::Request::builder();
            if let Ok(v) = HeaderValue::from_bytes(&xff) { builder = builder.header("x-forwarded-for", v); }
            if let Ok(v) = HeaderValue::from_str(&fwd) { builder = builder.header("forwarded", v); }
            if let Ok(v) = HeaderValue::from_bytes(&api) { builder = builder.header("x-api-key", v); }
            let request = builder.body(()).unwrap();
            let _ = PeerIp::new().trust_forwarded().extract(&request);
            let _ = HeaderKey::new("x-api-key").extract(&request);
        }

        /// Header formatting always yields valid header values.
        #[test]
        fn headers_always_valid(q in any::<u32>(), r in any::<u32>(), w in any::<u64>(), t in any::<u64>()) {
            for style in [HeaderStyle::Ietf, HeaderStyle::Legacy] {
                let h = rate_limit_headers(style, &[Policy::new(q, Duration::from_nanos(w))], 0, r, Duration::from_nanos(t));
                prop_assert!(!h.0.is_empty());
            }
            prop_assert!(ceil_seconds(Duration::from_nanos(t)) * 1_000_000_000 >= t);
        }
    }
}
