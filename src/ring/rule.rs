//! [`Rule`]: one policy as a multi-policy ring checks it, in nanoseconds.

/// One policy of a multi-policy ring, in nanoseconds: at most `limit`
/// admissions in any window of `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Rule {
    pub(crate) limit: u64,
    pub(crate) window: u64,
}
