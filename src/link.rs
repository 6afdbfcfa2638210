//! [`Link`]: a shared, replaceable reference to an immutable-once-published
//! value (a reconfigured [`Limiter`](crate::Limiter)'s current generation,
//! and each generation's successor).
//!
//! Shipped code uses [`arc_swap`]: a load borrows the value without
//! touching its reference count (no shared write on the read path), and a
//! replaced value is freed when its last reader lets go. Its loads and
//! stores are sequentially consistent. Under the model checker (which
//! cannot see `arc_swap`'s atomics) a loom `Mutex` stands in: as strong, so
//! the protocol loom checks is the one that ships.

use std::sync::Arc;

/// A replaceable `Option<Arc<T>>`.
pub(crate) struct Link<T> {
    #[cfg(not(slidelog_loom))]
    inner: arc_swap::ArcSwapOption<T>,
    #[cfg(slidelog_loom)]
    inner: crate::sync::Mutex<Option<Arc<T>>>,
}

/// What [`Link::get`] holds: derefs to `Option<Arc<T>>`.
#[cfg(not(slidelog_loom))]
pub(crate) type Held<T> = arc_swap::Guard<Option<Arc<T>>>;
#[cfg(slidelog_loom)]
pub(crate) type Held<T> = Option<Arc<T>>;

impl<T> Link<T> {
    /// A link to nothing.
    pub(crate) fn empty() -> Self {
        Link {
            #[cfg(not(slidelog_loom))]
            inner: arc_swap::ArcSwapOption::empty(),
            #[cfg(slidelog_loom)]
            inner: crate::sync::Mutex::new(None),
        }
    }

    /// The value linked now (SeqCst: sees every store that precedes the
    /// load in the single total order, in particular every store that
    /// happens-before it).
    #[inline]
    pub(crate) fn get(&self) -> Held<T> {
        #[cfg(not(slidelog_loom))]
        return self.inner.load();
        #[cfg(slidelog_loom)]
        return self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
    }

    /// Links `value` (SeqCst), dropping this link's hold on the old one.
    pub(crate) fn set(&self, value: Option<Arc<T>>) {
        #[cfg(not(slidelog_loom))]
        self.inner.store(value);
        #[cfg(slidelog_loom)]
        {
            *self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
        }
    }
}
