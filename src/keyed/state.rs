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
//! default policies' size.

use std::sync::Arc;

use papaya::HashMap;

use crate::ring::Shape;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The most words a state keeps inside its map entry: a ring of 11 slots
/// with its head (the log at limits up to 11), or a counter of 9 slots.
/// The entry of an 8-byte key is then 120 bytes: one 128-byte block from
/// glibc's malloc, where the boxed layout takes two at a limit of 10 (a
/// 32-byte entry and an 88-byte ring: 48 and 96 bytes).
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

/// Words inside the map entry when they fit in [`INLINE_WORDS`], else boxed
/// (a key whose own quota or a reconfiguration made its state larger than
/// the default's).
pub(super) enum Inline {
    Here {
        /// The state's words: `words[..len]`.
        len: u32,
        words: [AtomicU64; INLINE_WORDS],
    },
    Boxed(Box<[AtomicU64]>),
}

impl Words for Inline {
    fn build(len: usize, mut init: impl FnMut(usize) -> u64) -> Self {
        match u32::try_from(len) {
            Ok(short) if len <= INLINE_WORDS => Inline::Here {
                len: short,
                words: core::array::from_fn(|i| AtomicU64::new(if i < len { init(i) } else { 0 })),
            },
            _ => Inline::Boxed(Box::build(len, init)),
        }
    }
}

impl core::ops::Deref for Inline {
    type Target = [AtomicU64];

    #[inline(always)]
    fn deref(&self) -> &[AtomicU64] {
        match self {
            // `len <= INLINE_WORDS` (`build`): the range is in bounds.
            Inline::Here { len, words } => &words[..*len as usize],
            Inline::Boxed(words) => words,
        }
    }
}

/// A key's state: its words (`head` in word 0: the ring's `L + 1` words,
/// `L + 2` from 64 slots on, see `Shape::ring_in`; or the counter's
/// `N + 3`), and the key's own policies when a per-key quota chose other
/// than the default ones.
pub(super) struct KeyState<W> {
    pub(super) words: W,
    pub(super) quota: Option<Arc<Shape>>,
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
/// limiter was built: states inside the entries (default policies of at
/// most [`INLINE_WORDS`] words) or boxed.
pub(super) enum Keys<K, S> {
    Inline(HashMap<K, KeyState<Inline>, S>),
    Boxed(HashMap<K, KeyState<Box<[AtomicU64]>>, S>),
}

impl<K, S> Keys<K, S> {
    /// Whether the states live inside the map's entries.
    pub(super) fn inline(&self) -> bool {
        matches!(self, Keys::Inline(_))
    }
}

/// Runs `$body` with `$map` bound to the keyed limiter's map, whichever its
/// representation (the body is compiled once for each).
macro_rules! with_map {
    ($keys:expr, $map:ident => $body:expr) => {
        match $keys {
            $crate::keyed::state::Keys::Inline($map) => $body,
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
    fn an_inline_entry_of_an_eight_byte_key_is_120_bytes() {
        assert_eq!(
            core::mem::size_of::<u64>() + core::mem::size_of::<KeyState<Inline>>(),
            120
        );
        assert_eq!(core::mem::size_of::<KeyState<Box<[AtomicU64]>>>(), 24);
    }

    /// A limiter keeps its states inside the map's entries exactly when
    /// its default state fits: a log of up to 11 slots, a counter of up to 9;
    /// and charges each key what that layout takes.
    #[test]
    fn the_map_keeps_small_states_inline() {
        use crate::KeyedLimiter;
        use std::time::Duration;
        let second = Duration::from_secs(1);
        for limit in [1, 5, 11, 12, 13, 64, 100] {
            let log = KeyedLimiter::<u64>::new(limit, second).unwrap();
            assert_eq!(log.map.inline(), limit <= 11, "log of {limit}");
            let expected = match limit {
                ..=11 => 144,
                64.. => 8 * (limit as usize + 2) + 56,
                _ => 8 * (limit as usize + 1) + 56,
            };
            assert_eq!(log.bytes_per_key(), expected, "log of {limit}");
        }
        for slots in [8, 9, 10, 60] {
            let counter = KeyedLimiter::<u64>::builder(100, second)
                .sliding_counter(slots)
                .build()
                .unwrap();
            assert_eq!(counter.map.inline(), slots <= 9, "counter of {slots}");
        }
    }

    #[test]
    fn words_read_back_as_built_in_either_place() {
        for len in [1, 2, 11, INLINE_WORDS, INLINE_WORDS + 1, 100] {
            let inline = Inline::build(len, |i| 7 * i as u64 + 1);
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
