//! Key extractors: which key a request is limited by (the peer address,
//! a header, a function of the request, or one global key).

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::net::{IpAddr, SocketAddr};

use http::header::HeaderName;
use http::{HeaderMap, Request};

/// Picks the key a request is limited by.
///
/// `None` means "no key could be found": the request is then limited under
/// the layer's fallback key (see [`RateLimitLayer::fallback_key`]), or
/// without one refused as [`RateLimitLayer::new`] says; never let through
/// unlimited.
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
/// address (128).
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
pub(super) fn parse_node(text: &str) -> Option<IpAddr> {
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
