//! [`Judge`]: what one call asks of a generation (`check`, `admit`, their
//! weighted and growth forms, `peek`), judged by its [`Shape`].

use super::*;

/// One decision on a generation: `None` if its ring was closed. (Types,
/// not closures, so that `#[inline(always)]` keeps each check one
/// straight-line body on the hot path.)
pub(super) trait Judge<T> {
    /// `when` reads the request's time; the judge calls it once.
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<T, Denied>>;
}

/// `check`: one unit, counting `remaining`.
pub(super) struct CheckOne;
/// `admit`: one unit.
pub(super) struct AdmitOne;
/// `check_n`: `n` units.
pub(super) struct CheckN(pub(super) u32);
/// `admit_n`: `n` units.
pub(super) struct AdmitN(pub(super) u32);
/// `peek_n`: what `check_n` would answer.
pub(super) struct PeekN(pub(super) u32);
/// `check` that also reads when `remaining` next grows and, with several
/// policies, writes each one's state in its cell, and the policies that
/// decided in `decided` (the tower layer).
pub(super) struct CheckGrowing<'a> {
    pub(super) states: &'a StatesOut,
    pub(super) decided: &'a core::cell::Cell<DecidedBy>,
    /// The first generation's shape: a decision on it is said
    /// [`DecidedBy::Base`](DecidedBy::Base) (a pointer
    /// compare, no copy).
    pub(super) first: &'a Shape,
}
/// `check_n_with_growth`: `n` units, and when `remaining` next grows.
pub(super) struct CheckNGrowing(pub(super) u32);

impl Judge<(Admitted, Option<u64>)> for CheckGrowing<'_> {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(Admitted, Option<u64>), Denied>> {
        let Growing { decision, wait } = shape.check_growing_at(ring, when(), self.states)?;
        // This generation answered: its policies decided.
        self.decided.set(if core::ptr::eq(shape, self.first) {
            DecidedBy::Base
        } else {
            DecidedBy::Policies(PolicySet::new(shape.policies()))
        });
        Some(decision.map(|admitted| (admitted, wait)))
    }
}

impl Judge<Admitted> for CheckOne {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        shape.check_when(ring, when)
    }
}

impl Judge<()> for AdmitOne {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(), Denied>> {
        shape.admit_when(ring, when)
    }
}

/// **More than the smallest limit**: `Some(answer)` when `n` units can
/// never fit — the denial, or `None` (judge on the successor) if the ring
/// was closed, since a closed ring's limits never answer; `None` when they
/// may fit.
#[inline(always)]
pub(super) fn never_fits<T>(
    shape: &Shape,
    ring: RingRef<'_>,
    n: u32,
) -> Option<Option<Result<T, Denied>>> {
    let denied = shape.exceeds(n)?;
    Some((!ring.is_closed()).then_some(Err(denied)))
}

impl Judge<Admitted> for CheckN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.check_at(ring, now, self.0))
    }
}

impl Judge<()> for AdmitN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(), Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.admit_n_at(ring, now, self.0))
    }
}

impl Judge<(Admitted, u64)> for CheckNGrowing {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(Admitted, u64), Denied>> {
        let now = when();
        never_fits(shape, ring, self.0)
            .unwrap_or_else(|| shape.check_n_growing_at(ring, now, self.0))
    }
}

impl Judge<Admitted> for PeekN {
    #[inline(always)]
    fn judge(
        &self,
        shape: &Shape,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        let now = when();
        never_fits(shape, ring, self.0).unwrap_or_else(|| shape.peek_at(ring, now, self.0))
    }
}
