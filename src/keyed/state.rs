//! A key's state and where its words live (docs/design.md §7, "Where a
//! key's words live").
//!
//! A keyed call is bound by its dependent loads: papaya's table, the map
//! entry (the key, compared), then the state's words. A state of at most
//! [`INLINE_WORDS`] words lives **inside the entry** ([`Inline`]), so the
//! entry's load brings the ring with it: one dependent miss fewer per call,
//! and one allocation per key instead of two. Larger states keep their
//! words in an allocation of their own (`Box<[AtomicU64]>`): inline room
//! for them would be dead weight in every entry. The limiter picks one
//! representation for its whole map when it is built ([`Keys`]), from the
//! default policies' size: the narrowest inline width that holds them (4,
//! 8 or 12 words), so that no limit pays more memory than boxed words did.

use std::sync::Arc;

use papaya::HashMap;

use super::hasher::MapHasher;
use crate::ring::Shape;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The most words a state keeps inside its map entry: a ring of 11 slots
/// with its head (the log at limits up to 11), or a counter of 9 slots.
pub(super) const INLINE_WORDS: usize = 12;

/// Where a key's words live: a slice of atomic words, built once.
pub(super) trait Words:
    core::ops::Deref<Target = [AtomicU64]> + Send + Sync + 'static
{
    /// `len` words, word `i` holding `init(i)`.
    fn build(len: usize, init: impl FnMut(usize) -> u64) -> Self;
}

impl Words for Box<[AtomicU64]> {
    fn build(len: usize, mut init: impl FnMut(usize) -> u64) -> Self {
        (0..len).map(|i| AtomicU64::new(init(i))).collect()
    }
}

/// Up to `N` words inside the map entry, else boxed (a key whose own quota
/// or a reconfiguration made its state wider than the map's width).
///
/// An 8-byte key's entry is `24 + 8 N` bytes: 56, 88 and 120 for the
/// widths used (blocks of 64, 96 and 128 bytes from glibc's malloc), where
/// the boxed layout takes a 32-byte entry and the words apart (48 bytes
/// plus 32 to 112 for 2 to 12 words): the inline entry takes as much at
/// limits 4 and 8, and 16 to 32 bytes less at every other limit up to 11.
pub(super) enum Inline<const N: usize> {
    Here {
        /// The state's words: `words[..len]`.
        len: u32,
        words: [AtomicU64; N],
    },
    Boxed(Box<[AtomicU64]>),
}

impl<const N: usize> Words for Inline<N> {
    fn build(len: usize, mut init: impl FnMut(usize) -> u64) -> Self {
        if len > N {
            return Inline::Boxed(Box::build(len, init));
        }
        Inline::Here {
            // `len <= N <= 12`: no truncation.
            len: len as u32,
            words: core::array::from_fn(|i| AtomicU64::new(if i < len { init(i) } else { 0 })),
        }
    }
}

impl<const N: usize> core::ops::Deref for Inline<N> {
    type Target = [AtomicU64];

    #[inline(always)]
    fn deref(&self) -> &[AtomicU64] {
        match self {
            // `len <= N` (`build`): the range is in bounds.
            Inline::Here { len, words } => &words[..*len as usize],
            Inline::Boxed(words) => words,
        }
    }
}

/// A key's state: its words (`head` in word 0: the ring's `L + 1` words,
/// `L + 2` from 64 slots on, see `Shape::ring_in`; or the counter's
/// `N + 3`), and the key's own policies when a per-key quota chose other
/// than the default ones.
///
/// `quota` first (`repr(C)`): every call reads it, and the map's entry
/// puts the key just before the state, so the key, `quota` and the
/// words' start (`head`) share the entry's first line.
#[repr(C)]
pub(super) struct KeyState<W> {
    pub(super) quota: Option<Arc<Shape>>,
    pub(super) words: W,
}

/// A successor state parked during a reconfiguration (`keyed/reconfig.rs`):
/// boxed, copied into the map's representation when swapped in.
pub(super) type Parked = KeyState<Box<[AtomicU64]>>;

impl<W: Words> KeyState<W> {
    #[inline]
    pub(super) fn quota(&self) -> Option<&Shape> {
        self.quota.as_deref()
    }

    /// A copy of a state nobody writes any more (a parked successor), in
    /// representation `V`.
    pub(super) fn copy<V: Words>(&self) -> KeyState<V> {
        KeyState {
            // Relaxed: the words were written before the successor was
            // parked, and we found it parked (papaya's loads are Acquire).
            words: V::build(self.words.len(), |i| self.words[i].load(Ordering::Relaxed)),
            quota: self.quota.clone(),
        }
    }
}

/// The map of keys to states, in the representation chosen when the
/// limiter was built: states inside the entries, in the narrowest width
/// that holds the default policies' state, or boxed.
pub(super) enum Keys<K, S> {
    Inline4(Map<K, Inline<4>, S>),
    Inline8(Map<K, Inline<8>, S>),
    Inline12(Map<K, Inline<INLINE_WORDS>, S>),
    Boxed(Map<K, Box<[AtomicU64]>, S>),
}

/// One representation's map: key to state, hashed by the limiter's
/// [`MapHasher`].
pub(super) type Map<K, W, S> = HashMap<K, KeyState<W>, MapHasher<S>>;

impl<K: core::hash::Hash + Eq, S: core::hash::BuildHasher> Keys<K, S> {
    /// An empty map for states of `words` words (the default policies'),
    /// in the narrowest width that holds them ([`width_for`]).
    pub(super) fn new(words: usize, hasher: MapHasher<S>, capacity: usize) -> Keys<K, S> {
        fn table<K, V, S>(hasher: S, capacity: usize) -> HashMap<K, V, S> {
            HashMap::builder()
                .hasher(hasher)
                .capacity(capacity)
                // Blocking resizes: with an unfinished incremental resize
                // every later lookup pays for the table's migration
                // (measured ~10x slower lookups in a feasibility study).
                .resize_mode(papaya::ResizeMode::Blocking)
                .build()
        }
        match width_for(words) {
            4 => Keys::Inline4(table(hasher, capacity)),
            8 => Keys::Inline8(table(hasher, capacity)),
            INLINE_WORDS => Keys::Inline12(table(hasher, capacity)),
            _ => Keys::Boxed(table(hasher, capacity)),
        }
    }
}

impl<K, S> Keys<K, S> {
    /// The most words a state keeps inside this map's entries (0: boxed).
    pub(super) fn width(&self) -> usize {
        match self {
            Keys::Inline4(_) => 4,
            Keys::Inline8(_) => 8,
            Keys::Inline12(_) => INLINE_WORDS,
            Keys::Boxed(_) => 0,
        }
    }
}

/// The width of a map whose default state has `words` words: the
/// narrowest inline width that holds it, or 0 (boxed).
pub(super) const fn width_for(words: usize) -> usize {
    match words {
        ..=4 => 4,
        5..=8 => 8,
        9..=INLINE_WORDS => INLINE_WORDS,
        _ => 0,
    }
}

/// Bytes of one `KeyState` in a map of `width` (see [`Keys::width`]).
pub(super) const fn state_size(width: usize) -> usize {
    use core::mem::size_of;
    match width {
        0 => size_of::<Parked>(),
        4 => size_of::<KeyState<Inline<4>>>(),
        8 => size_of::<KeyState<Inline<8>>>(),
        _ => size_of::<KeyState<Inline<INLINE_WORDS>>>(),
    }
}

/// Runs `$body` with `$map` bound to the keyed limiter's map, whichever its
/// representation (the body is compiled once for each).
macro_rules! with_map {
    ($keys:expr, $map:ident => $body:expr) => {
        match $keys {
            $crate::keyed::state::Keys::Inline4($map) => $body,
            $crate::keyed::state::Keys::Inline8($map) => $body,
            $crate::keyed::state::Keys::Inline12($map) => $body,
            $crate::keyed::state::Keys::Boxed($map) => $body,
        }
    };
}
pub(super) use with_map;

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    /// The layout the memory estimate and the docs count on.
    #[test]
    fn an_eight_byte_key_entry_is_24_bytes_plus_its_inline_words() {
        let entry = |state: usize| core::mem::size_of::<u64>() + state;
        assert_eq!(entry(state_size(4)), 56);
        assert_eq!(entry(state_size(8)), 88);
        assert_eq!(entry(state_size(INLINE_WORDS)), 120);
        assert_eq!(entry(state_size(0)), 32);
        // The quota pointer first: beside the key and `head` in the entry.
        assert_eq!(core::mem::offset_of!(KeyState<Inline<4>>, quota), 0);
        assert_eq!(
            core::mem::offset_of!(KeyState<Inline<INLINE_WORDS>>, quota),
            0
        );
    }

    /// A limiter keeps its states inside the map's entries exactly when
    /// its default state fits 12 words — a log of up to 11 slots, a counter
    /// of up to 9 — in the narrowest width that holds it, and charges each
    /// key what that layout takes.
    #[test]
    fn the_map_keeps_small_states_inline() {
        use crate::KeyedLimiter;
        use std::time::Duration;
        let second = Duration::from_secs(1);
        for limit in [1, 3, 4, 7, 8, 11, 12, 13, 64, 100] {
            let log = KeyedLimiter::<u64>::new(limit, second).unwrap();
            let (width, bytes) = match limit {
                ..=3 => (4, 80),
                4..=7 => (8, 112),
                8..=11 => (INLINE_WORDS, 144),
                12..=63 => (0, 8 * (limit as usize + 1) + 56),
                _ => (0, 8 * (limit as usize + 2) + 56),
            };
            assert_eq!(log.map.width(), width, "log of {limit}");
            assert_eq!(log.bytes_per_key(), bytes, "log of {limit}");
        }
        for (slots, width) in [
            (1, 4),
            (5, 8),
            (6, INLINE_WORDS),
            (9, INLINE_WORDS),
            (10, 0),
            (60, 0),
        ] {
            let counter = KeyedLimiter::<u64>::builder(100, second)
                .sliding_counter(slots)
                .build()
                .unwrap();
            assert_eq!(counter.map.width(), width, "counter of {slots}");
        }
    }

    #[test]
    fn words_read_back_as_built_in_either_place() {
        for len in [1, 2, 11, INLINE_WORDS, INLINE_WORDS + 1, 100] {
            let inline = Inline::<INLINE_WORDS>::build(len, |i| 7 * i as u64 + 1);
            let boxed = <Box<[AtomicU64]>>::build(len, |i| 7 * i as u64 + 1);
            assert_eq!(matches!(inline, Inline::Here { .. }), len <= INLINE_WORDS);
            let read = |w: &[AtomicU64]| -> Vec<u64> {
                w.iter().map(|w| w.load(Ordering::Relaxed)).collect()
            };
            assert_eq!(inline.len(), len);
            assert_eq!(read(&inline), read(&boxed));
            assert_eq!(read(&inline)[len - 1], 7 * (len as u64 - 1) + 1);
        }
    }
}
