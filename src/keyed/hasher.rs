//! The hasher of a keyed limiter's map: the user's, or — for the default
//! `RandomState` — the same SipHash-1-3 with its integer writes inline.
//!
//! std's `RandomState` hashes with SipHash-1-3 under two random keys, but
//! its hasher has no integer path: a `u64`, `u32` or IP-address key goes
//! through the byte-slice `write`, out of line, with its tail handling.
//! The `siphasher` crate's `SipHasher13` is the same function with inline
//! `write_u64` and friends. A limiter built with the default hasher
//! therefore keys a `SipHasher13` from its `RandomState` (two outputs of it
//! under its secret keys: random as they are) and hashes with that: the
//! same resistance to hash flooding, and a keyed call over `u64` keys
//! about 60 instructions shorter (a denial's 398 → 335), 8-9% faster with
//! the time passed in and 5-8% with the clock read (BENCHMARKS.md, "Where
//! the time goes"). A hasher the user chose
//! ([`KeyedBuilder::hasher`](crate::KeyedBuilder::hasher)) is used as given.

use core::hash::{BuildHasher, Hash, Hasher};

use siphasher::sip::SipHasher13;

/// The keys of a randomly keyed SipHash-1-3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SipKeys(u64, u64);

impl SipKeys {
    /// Two keys drawn from `seed`: its hashes of two constants, as secret
    /// and as random as its own keys.
    pub(crate) fn from_seed(seed: &impl BuildHasher) -> SipKeys {
        SipKeys(seed.hash_one(0u8), seed.hash_one(1u8))
    }

    #[inline(always)]
    fn hasher(self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.0, self.1)
    }
}

/// The map's hasher: SipHash-1-3 under random keys (the default), or the
/// user's `S`.
#[derive(Clone, Debug)]
pub(crate) enum MapHasher<S> {
    /// The default: `RandomState`'s function, inline (see the module docs).
    Sip13(SipKeys),
    /// A hasher the user chose.
    Given(S),
}

impl<S> MapHasher<S> {
    /// `given`, unless the builder drew `sip` keys for its default hasher.
    pub(crate) fn new(given: S, sip: Option<SipKeys>) -> MapHasher<S> {
        match sip {
            Some(keys) => MapHasher::Sip13(keys),
            None => MapHasher::Given(given),
        }
    }
}

impl<S: BuildHasher> BuildHasher for MapHasher<S> {
    type Hasher = MapHash<S::Hasher>;

    fn build_hasher(&self) -> MapHash<S::Hasher> {
        match self {
            MapHasher::Sip13(keys) => MapHash::Sip13(keys.hasher()),
            MapHasher::Given(s) => MapHash::Given(s.build_hasher()),
        }
    }

    /// What papaya calls for every lookup: one branch, then either hash in
    /// straight-line code (the same value as [`build_hasher`](Self::build_hasher)'s).
    #[inline(always)]
    fn hash_one<T: Hash>(&self, x: T) -> u64 {
        match self {
            MapHasher::Sip13(keys) => {
                let mut h = keys.hasher();
                x.hash(&mut h);
                h.finish()
            }
            MapHasher::Given(s) => s.hash_one(x),
        }
    }
}

/// [`MapHasher`]'s hasher, for whoever builds one rather than calling
/// `hash_one`: every write goes to the hasher chosen, each method to its
/// own (a hasher may hash `write_u64(x)` otherwise than `write` of `x`'s
/// bytes, and `hash_one` calls the one the key's `Hash` calls).
#[derive(Clone, Debug)]
pub(crate) enum MapHash<H> {
    Sip13(SipHasher13),
    Given(H),
}

/// Forwards each listed `Hasher` method to the hasher chosen.
macro_rules! forward {
    ($($name:ident($ty:ty)),* $(,)?) => {
        $(
            #[inline]
            fn $name(&mut self, i: $ty) {
                match self {
                    MapHash::Sip13(h) => h.$name(i),
                    MapHash::Given(h) => h.$name(i),
                }
            }
        )*
    };
}

impl<H: Hasher> Hasher for MapHash<H> {
    #[inline]
    fn finish(&self) -> u64 {
        match self {
            MapHash::Sip13(h) => h.finish(),
            MapHash::Given(h) => h.finish(),
        }
    }

    forward!(
        write(&[u8]),
        write_u8(u8),
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_usize(usize),
        write_i8(i8),
        write_i16(i16),
        write_i32(i32),
        write_i64(i64),
        write_i128(i128),
        write_isize(isize),
    );
}

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;
    use std::collections::hash_map::RandomState;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// A deterministic hasher, to tell whose function ran.
    #[derive(Clone, Default)]
    struct Fnv;

    struct FnvHash(u64);

    impl Hasher for FnvHash {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }

    impl BuildHasher for Fnv {
        type Hasher = FnvHash;
        fn build_hasher(&self) -> FnvHash {
            FnvHash(0xcbf2_9ce4_8422_2325)
        }
    }

    /// `hash_one` (what papaya calls) and a built hasher (what anyone else
    /// may use) agree on every kind of key, for both variants: a map that
    /// hashed one key two ways would lose it.
    #[test]
    fn hash_one_equals_the_built_hasher() {
        // The built hasher is the point: it is compared with `hash_one`.
        #[allow(clippy::manual_hash_one)]
        fn both<S: BuildHasher, T: Hash>(h: &MapHasher<S>, x: T) -> (u64, u64) {
            let mut built = h.build_hasher();
            x.hash(&mut built);
            (h.hash_one(&x), built.finish())
        }
        let hashers = [
            MapHasher::new(Fnv, Some(SipKeys::from_seed(&RandomState::new()))),
            MapHasher::new(Fnv, None),
        ];
        for h in &hashers {
            let (a, b) = both(h, 42u64);
            assert_eq!(a, b);
            let (a, b) = both(h, "alice");
            assert_eq!(a, b);
            let (a, b) = both(h, String::from("alice"));
            assert_eq!(a, b);
            let (a, b) = both(h, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
            assert_eq!(a, b);
            let (a, b) = both(h, IpAddr::V6(Ipv6Addr::LOCALHOST));
            assert_eq!(a, b);
            let (a, b) = both(h, (7u32, -3i128, 'x', true));
            assert_eq!(a, b);
        }
    }

    /// The default computes SipHash-1-3 under its keys (the `siphasher`
    /// crate's, as written out here), and a hasher the user chose is the
    /// one that runs.
    #[test]
    fn each_variant_hashes_with_its_own_function() {
        let keys = SipKeys(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let sip = MapHasher::new(Fnv, Some(keys));
        let mut reference = SipHasher13::new_with_keys(keys.0, keys.1);
        99u64.hash(&mut reference);
        assert_eq!(sip.hash_one(99u64), reference.finish());
        let given = MapHasher::new(Fnv, None);
        assert_eq!(given.hash_one(99u64), Fnv.hash_one(99u64));
        assert_ne!(sip.hash_one(99u64), given.hash_one(99u64));
    }

    /// The builder wires it: its own `RandomState` becomes the inline
    /// SipHash, through every change of clock or algorithm; a hasher given
    /// is the one a limiter calls, whatever comes after it.
    #[test]
    fn the_builder_keeps_the_default_until_a_hasher_is_given() {
        use crate::sync::atomic::{AtomicUsize, Ordering};
        use crate::{KeyedLimiter, ManualClock};
        use std::sync::Arc;
        use std::time::Duration;

        let second = Duration::from_secs(1);
        let default = KeyedLimiter::<u64>::builder(1, second);
        assert!(default.sip.is_some());
        assert!(default.clone().clock(ManualClock::new()).sip.is_some());
        assert!(default.clone().sliding_counter(4).sip.is_some());
        let given = default.hasher(RandomState::new());
        assert!(given.sip.is_none());
        assert!(given.clock(ManualClock::new()).sip.is_none());

        /// `Fnv`, counting the hashers built.
        #[derive(Clone)]
        struct Counting(Arc<AtomicUsize>);
        impl BuildHasher for Counting {
            type Hasher = FnvHash;
            fn build_hasher(&self) -> FnvHash {
                // Relaxed: a count, read on this thread after the calls.
                self.0.fetch_add(1, Ordering::Relaxed);
                Fnv.build_hasher()
            }
        }
        let built = Arc::new(AtomicUsize::new(0));
        let limiter = KeyedLimiter::<u64>::builder(1, second)
            .hasher(Counting(Arc::clone(&built)))
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(limiter.check(&7).is_ok());
        assert!(limiter.check(&7).is_err());
        assert!(
            built.load(Ordering::Relaxed) >= 2,
            "the given hasher hashed each lookup"
        );
    }

    /// Two default hashers draw different keys: a key's hash, and so a
    /// flooding attacker's collisions, are not the same across limiters.
    #[test]
    fn default_keys_are_random() {
        let a = MapHasher::new(Fnv, Some(SipKeys::from_seed(&RandomState::new())));
        let b = MapHasher::new(Fnv, Some(SipKeys::from_seed(&RandomState::new())));
        assert_ne!(a.hash_one("key"), b.hash_one("key"));
    }
}
