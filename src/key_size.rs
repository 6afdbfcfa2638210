//! [`KeySize`]: the heap bytes a key holds, counted against a keyed
//! limiter's memory budget.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The heap bytes a key owns besides its inline size, so that a
/// [`KeyedLimiter`](crate::KeyedLimiter)'s memory budget holds whatever the
/// keys weigh (keys are often chosen by clients: an API-key header, a path).
///
/// Implemented for integers, `bool`, `char`, IP and socket addresses,
/// `String`, `Box<str>`, `Arc<str>`, `Cow<'static, str>`, `&'static str`,
/// `Vec<T>`, `Box<[T]>`, `[T; N]`, `Box<T>`, `Arc<T>`, `Arc<[u8]>`, `Option`,
/// tuples of up to four keys, and (feature `tower`) `bytes::Bytes`. For your own key
/// type, return what it allocates (the default, 0, suits keys that own no
/// heap memory):
///
/// ```
/// use std::time::Duration;
/// use slidelog::{KeySize, KeyedLimiter};
///
/// #[derive(Hash, PartialEq, Eq, Clone)]
/// struct Tenant { id: u32, region: String }
///
/// impl KeySize for Tenant {
///     fn heap_bytes(&self) -> usize {
///         self.region.heap_bytes()
///     }
/// }
///
/// let limiter = KeyedLimiter::<Tenant>::new(10, Duration::from_secs(1))?;
/// let acme = Tenant { id: 7, region: "eu-west".into() };
/// assert!(limiter.check(&acme).is_ok());
/// assert_eq!(limiter.memory_bytes(), limiter.bytes_per_key() + "eu-west".len());
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
pub trait KeySize: Sized {
    /// Bytes this key keeps alive on the heap (not counting
    /// `size_of::<Self>()`): everything it owns, and every shared buffer it
    /// pins, unless [`compact`](Self::compact) copies it out first.
    fn heap_bytes(&self) -> usize {
        0
    }

    /// The key as the map stores it, called once when a key is inserted:
    /// a key that pins more memory than [`heap_bytes`](Self::heap_bytes)
    /// counts (a `bytes::Bytes` sliced from a large request buffer) returns
    /// a compact copy, so the budget counts what is really kept. The
    /// default returns the key unchanged.
    ///
    /// ```
    /// use slidelog::KeySize;
    /// assert_eq!(String::from("k").compact(), "k");
    /// ```
    fn compact(self) -> Self {
        self
    }
}

macro_rules! inline_keys {
    ($($t:ty),* $(,)?) => { $(impl KeySize for $t {})* };
}

inline_keys!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    bool,
    char,
    (),
    IpAddr,
    Ipv4Addr,
    Ipv6Addr,
    SocketAddr,
    &'static str
);

impl KeySize for String {
    fn heap_bytes(&self) -> usize {
        self.capacity()
    }

    fn compact(mut self) -> Self {
        self.shrink_to_fit();
        self
    }
}

impl KeySize for Box<str> {
    fn heap_bytes(&self) -> usize {
        self.len()
    }
}

impl<T: KeySize> KeySize for Vec<T> {
    fn heap_bytes(&self) -> usize {
        self.capacity() * core::mem::size_of::<T>() + self.iter().map(T::heap_bytes).sum::<usize>()
    }

    fn compact(self) -> Self {
        let mut compact: Vec<T> = self.into_iter().map(T::compact).collect();
        compact.shrink_to_fit();
        compact
    }
}

impl<T: KeySize> KeySize for Box<[T]> {
    fn heap_bytes(&self) -> usize {
        core::mem::size_of_val::<[T]>(self) + self.iter().map(T::heap_bytes).sum::<usize>()
    }
}

impl<T: KeySize, const N: usize> KeySize for [T; N] {
    fn heap_bytes(&self) -> usize {
        self.iter().map(T::heap_bytes).sum()
    }
}

impl<T: KeySize> KeySize for Box<T> {
    fn heap_bytes(&self) -> usize {
        core::mem::size_of::<T>() + (**self).heap_bytes()
    }
}

/// Counted whole, as for `Arc<str>`.
impl<T: KeySize> KeySize for Arc<T> {
    fn heap_bytes(&self) -> usize {
        2 * core::mem::size_of::<usize>() + core::mem::size_of::<T>() + (**self).heap_bytes()
    }
}

impl KeySize for std::borrow::Cow<'static, str> {
    fn heap_bytes(&self) -> usize {
        match self {
            std::borrow::Cow::Borrowed(_) => 0,
            std::borrow::Cow::Owned(s) => s.capacity(),
        }
    }
}

/// The shared allocation (two reference counts plus the bytes), counted
/// whole: an `Arc` key usually lives only in the map.
impl KeySize for Arc<str> {
    fn heap_bytes(&self) -> usize {
        2 * core::mem::size_of::<usize>() + self.len()
    }
}

impl KeySize for Arc<[u8]> {
    fn heap_bytes(&self) -> usize {
        2 * core::mem::size_of::<usize>() + self.len()
    }
}

impl<T: KeySize> KeySize for Option<T> {
    fn heap_bytes(&self) -> usize {
        self.as_ref().map_or(0, T::heap_bytes)
    }
}

macro_rules! tuple_keys {
    ($(($($t:ident . $i:tt),+)),* $(,)?) => {
        $(impl<$($t: KeySize),+> KeySize for ($($t,)+) {
            fn heap_bytes(&self) -> usize {
                0 $(+ self.$i.heap_bytes())+
            }
        })*
    };
}

tuple_keys!((A.0), (A.0, B.1), (A.0, B.1, C.2), (A.0, B.1, C.2, D.3));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(7u64.heap_bytes(), 0);
        let s = String::from("abc");
        assert_eq!(s.heap_bytes(), s.capacity());
        assert_eq!(Box::<str>::from("abcd").heap_bytes(), 4);
        assert_eq!(vec![1u8; 10].heap_bytes(), 10);
        assert_eq!([7u64; 4].heap_bytes(), 0);
        assert_eq!([String::from("ab"), String::from("c")].heap_bytes(), 3);
        assert_eq!(vec![String::from("ab")].heap_bytes(), 24 + 2);
        assert_eq!(Arc::<str>::from("ab").heap_bytes(), 2 + 16);
        assert_eq!((String::from("ab"), 3u8).heap_bytes(), 2);
        assert_eq!(Some(String::from("xyz")).heap_bytes(), 3);
        assert_eq!(None::<String>.heap_bytes(), 0);
    }
}
