//! The one decision path: the current generation answers, or the ones
//! that followed a reconfiguration; the tower layer's growth reads.

use super::*;
use judge::CheckGrowing;

impl<C: Clock> Limiter<C> {
    /// **The answer** of the current generation: `op` judges on the
    /// generation `first`, at the time `read` returns (read once, when the
    /// ring asks for it: docs/design.md §4, "Where the time is read"), until
    /// a reconfiguration closes it; then at that same reading on the
    /// generations that followed (out of line: only a reconfigured limiter
    /// pays for the pin and the pointer).
    ///
    /// The out-of-line path answers through `moved`, a place of its own,
    /// not as its return value: a returned `Result` is written through a
    /// pointer into the caller's result, which would then live in memory
    /// on the inlined path too, where every `check` would store its answer
    /// and copy it (14 instructions a `check`, time passed in:
    /// BENCHMARKS.md, "Where the time goes").
    #[inline(always)]
    pub(super) fn decide<T, J: Judge<T>>(
        &self,
        read: impl FnOnce() -> u64,
        op: J,
    ) -> Result<T, Denied> {
        let first = &self.first;
        let shape = &first.shape;
        let mut reading = 0;
        let answer = op.judge(
            shape,
            first.ring(),
            #[inline(always)]
            || {
                reading = read();
                shape.now(reading, 0)
            },
        );
        match answer {
            Some(answer) => answer,
            None => {
                let mut moved = None;
                self.decide_moved(reading, &op, &mut moved);
                moved.expect("decide_moved returns only once it has answered")
            }
        }
    }

    /// [`decide`](Self::decide) on the generations after `first`, at the
    /// reading `read`: writes the answer into `out` (see `decide`).
    #[cold]
    #[inline(never)]
    pub(super) fn decide_moved<T, J: Judge<T>>(
        &self,
        read: u64,
        op: &J,
        out: &mut Option<Result<T, Denied>>,
    ) {
        let mut held = self.current.get();
        loop {
            let generation = held.as_deref().unwrap_or(&self.first);
            let shape = &generation.shape;
            if let Some(answer) = op.judge(shape, generation.ring(), || shape.now(read, 0)) {
                *out = Some(answer);
                return;
            }
            held = self.after(generation);
        }
    }

    /// **The successor** of a generation whose ring we saw closed: its
    /// `next`, or — once a later reconfiguration unlinked that — `current`.
    ///
    /// We read CLOSED with an Acquire slot load, which synchronises with
    /// the close's Release CAS; `next` was linked before that CAS, so it is
    /// visible unless unlinked since, and it is unlinked only after
    /// `current` moved past this generation, which the SeqCst load of
    /// `current` then sees (both links are SeqCst).
    pub(super) fn after(&self, closed: &Generation) -> crate::link::Held<Generation> {
        let next = closed.next.get();
        if next.is_some() {
            return next;
        }
        let current = self.current.get();
        assert!(
            current
                .as_deref()
                .is_some_and(|g| !core::ptr::eq(g, closed)),
            "a Limiter's ring is closed only by a reconfiguration, which links its successor first"
        );
        current
    }

    /// Applies `f` to the current generation (no load while it is `first`).
    #[inline]
    pub(super) fn with_current<T>(&self, f: impl FnOnce(&Generation) -> T) -> T {
        // Relaxed: a hint to skip the load; `current` is empty until set.
        if self.generation.load(Ordering::Relaxed) == 0 {
            return f(&self.first);
        }
        let held = self.current.get();
        f(held.as_deref().unwrap_or(&self.first))
    }

    /// One request at `now`, as [`check_at`](Self::check_at), and — if
    /// admitted — how many nanoseconds after `now` its `remaining` next
    /// grows (`None`: ask a dry run) and (with several policies, written in
    /// `states`) each one's state, read with the count (the tower layer's
    /// `RateLimit` field; see [`Growing`]); the policies of the generation
    /// that answered are written in `decided`.
    // Read by the backend, which loom builds leave out.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn check_growing_at(
        &self,
        now: u64,
        states: &StatesOut,
        decided: &core::cell::Cell<DecidedBy>,
    ) -> Result<(Admitted, Option<u64>), Denied> {
        let first = &self.first.shape;
        self.decide(
            || now,
            CheckGrowing {
                states,
                decided,
                first,
            },
        )
    }

    /// The policies the limiter was built with (its first generation's).
    // Read by the backend, which loom builds leave out.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn built_policies(&self) -> &[Policy] {
        self.first.shape.policies()
    }

    /// With several policies, each one's room and wait at `now` (for the
    /// tower layer's `RateLimit` field); `None` with one policy.
    // Read by the backend, which loom builds leave out.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn policy_states_at(&self, now: u64) -> Option<crate::decision::PolicyStates> {
        self.with_current(|g| g.shape.policy_states(g.ring(), g.shape.now(now, 0)))
    }
}
