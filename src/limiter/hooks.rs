//! The loom models' hooks (`--cfg slidelog_loom`).

use super::*;

/// Hooks for the model checker (`--cfg slidelog_loom`): broken variants and
/// the eviction handshake, driven through the shipped ring.
#[cfg(slidelog_loom)]
#[doc(hidden)]
impl<C: Clock> Limiter<C> {
    pub fn with_flaw(
        limit: u32,
        window: Duration,
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        Ok(Limiter::from_shape(
            Shape::single(limit, window)?.with_flaw(flaw),
            clock,
        ))
    }

    /// Every single takes the general path (the lazy-head scan), never the
    /// fast path: its races then need two threads instead of three.
    pub fn with_flaw_general(
        limit: u32,
        window: Duration,
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        let shape = Shape::single(limit, window)?
            .with_flaw(flaw)
            .with_general_only();
        Ok(Limiter::from_shape(shape, clock))
    }

    /// Several policies, `(limit, window in ns)`, with a flaw.
    pub fn with_flaw_policies(
        policies: &[(u32, u64)],
        clock: C,
        flaw: crate::flaw::Flaw,
    ) -> Result<Self, ConfigError> {
        let policies: Vec<Policy> = policies
            .iter()
            .map(|&(limit, window)| Policy::new(limit, Duration::from_nanos(window)))
            .collect();
        Ok(Limiter::from_shape(
            Shape::new(&policies)?.with_flaw(flaw),
            clock,
        ))
    }

    /// `None` if the ring was closed for eviction. Judged no earlier than
    /// the floor, as a keyed limiter does.
    pub fn try_check_n_at(
        &self,
        n: u32,
        now: u64,
        floor: &crate::floor::Floor,
    ) -> Option<Result<Admitted, Denied>> {
        self.with_current(|g| {
            let now = g.shape.now(now, floor.get());
            g.shape.check_at(g.ring(), now, n)
        })
    }

    /// Closes the current generation's ring for eviction if idle.
    pub fn close_if_idle(&self, now: u64, margin: u64, floor: &crate::floor::Floor) -> bool {
        self.with_current(|g| g.ring().close_if_idle(now, margin, floor).is_ok())
    }

    /// A keyed sweep's step on this limiter's current generation: close it
    /// if idle, then tell an eviction from a ring a reconfiguration closed
    /// (which a keyed sweep leaves to its mover).
    pub fn sweep_step(&self, now: u64, margin: u64, floor: &crate::floor::Floor) -> Swept {
        let held = self.current.get();
        let generation = held.as_deref().unwrap_or(&self.first);
        if generation.ring().close_if_idle(now, margin, floor).is_err() {
            return Swept::Busy;
        }
        let moving = generation.next.get().is_some()
            || self
                .current
                .get()
                .as_deref()
                .is_some_and(|current| !core::ptr::eq(current, generation));
        if moving && generation.shape.geometry.flaw() != crate::flaw::Flaw::EvictMoving {
            Swept::Moving
        } else {
            Swept::Evicted
        }
    }
}

/// What a keyed sweep did with a ring (model checker only).
#[cfg(slidelog_loom)]
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swept {
    /// Still in use: left open.
    Busy,
    /// Closed by a reconfiguration: left to its mover.
    Moving,
    /// Closed and forgotten.
    Evicted,
}
