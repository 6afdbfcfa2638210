//! Key extractors: which key a request is limited by (a header, a function
//! of the request, or one global key; the peer address is `peer.rs`).

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;

use http::Request;
use http::header::HeaderName;

/// Picks the key a request is limited by.
///
/// `None` means "no key could be found": the request is then limited under
/// the layer's fallback key (see [`RateLimitLayer::fallback_key`](super::RateLimitLayer::fallback_key)), or
/// without one refused as [`RateLimitLayer::new`](super::RateLimitLayer::new) says; never let through
/// unlimited.
pub trait KeyExtractor<B>: Clone + Send + Sync + 'static {
    /// The key type.
    type Key: Hash + Eq + Clone + Send + Sync + 'static;

    /// The key of `request`, if it has one.
    fn extract(&self, request: &Request<B>) -> Option<Self::Key>;

    /// What a server operator should change when this extractor finds no
    /// key (logged once per layer; never sent to clients). Empty by default.
    fn missing_key_hint(&self) -> &'static str {
        ""
    }
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

/// The value of a request header, e.g. an API key.
///
/// The key is the value itself when it is UTF-8 and at most
/// [`max_len`](Self::max_len) bytes (default [`DEFAULT_MAX_KEY_LEN`]): distinct
/// values are distinct keys. The value is chosen by the client, and servers
/// accept header blocks of hundreds of KiB, so a longer value is never
/// stored whole, and a value that is not UTF-8 (header values may hold any
/// byte from 0x80 up) is not converted lossily, which would give `[0xFF]`,
/// `[0xFE]` and `"\u{FFFD}"` one key. Both are keyed by a 128-bit digest of
/// the raw bytes instead (two independently, randomly keyed SipHash-1-3
/// hashes, so clients cannot aim collisions), written as a NUL byte and 32
/// hex digits: no header value can equal it, since header values cannot
/// contain NUL. Digests are per `HeaderKey` (and its clones), so for limits
/// shared across processes (Redis) keep `max_len` above your real keys.
///
/// A header sent more than once is keyed by its first line, the one
/// `HeaderMap::get` returns: the value your handlers read (and, say,
/// authenticate) is the value limited: a client is never authenticated by
/// one line and limited by another. A proxy that *appends* an identity header to the client's
/// leaves the client's line first: have it replace the header instead.
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
///
/// let twice = http::Request::builder()
///     .header("x-api-key", "k1")
///     .header("x-api-key", "k2")
///     .body(())
///     .unwrap();
/// assert_eq!(HeaderKey::new("x-api-key").extract(&twice), Some("k1".to_string()));
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
        let value = request.headers().get(&self.name)?.as_bytes();
        match core::str::from_utf8(value) {
            Ok(text) if value.len() <= self.max_len => Some(text.to_owned()),
            // Too long, or not UTF-8 (a lossy conversion would merge every
            // invalid byte into U+FFFD): keyed by the digest of the raw
            // bytes, which no header value can equal (it starts with NUL).
            _ => {
                let (a, b) = &self.digest;
                Some(format!(
                    "\0{:016x}{:016x}",
                    a.hash_one(value),
                    b.hash_one(value)
                ))
            }
        }
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

/// Stored as an exact-size copy ([`compact`](crate::KeySize::compact)): a `Bytes`
/// sliced from a request's buffer would otherwise keep the whole buffer
/// alive while the budget counted only the slice.
impl crate::KeySize for bytes::Bytes {
    /// The bytes viewed: exactly what the stored (compacted) copy holds.
    fn heap_bytes(&self) -> usize {
        self.len()
    }

    fn compact(self) -> Self {
        bytes::Bytes::copy_from_slice(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_header_values_are_distinct_keys() {
        let key = HeaderKey::new("x-api-key");
        let extract = |bytes: &[u8]| {
            let mut request = Request::new(());
            request
                .headers_mut()
                .insert("x-api-key", http::HeaderValue::from_bytes(bytes).unwrap());
            key.extract(&request).unwrap()
        };
        let keys = [
            extract(&[0xFF]),
            extract(&[0xFE]),
            extract("\u{FFFD}".as_bytes()),
            extract(&[0xEF, 0xBF]),
            extract(b"a"),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(keys[2], "\u{FFFD}");
        assert_eq!(extract(&[0xFF]), keys[0], "the same bytes, the same key");
        // No value grows into a longer key than the digest or itself.
        let invalid = [0xFFu8; 256];
        assert_eq!(extract(&invalid).len(), 33);
    }
}
