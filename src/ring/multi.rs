//! Several policies on one ring, all or nothing (docs/design.md §4,
//! "Several policies").

use super::count::first_alive;
use super::shape::{MAX_POLICIES, Rule};
use super::view::View;
use super::word::slot;
use super::{Outcome, RingRef};
use crate::flaw::Flaw;
use crate::sync::Backoff;
use crate::sync::atomic::Ordering;

/// What [`RingRef::judge_multi`] found.
enum Judged {
    Closed,
    Denied {
        available_at: u64,
        policy: u8,
    },
    Fits {
        view: View,
        d: u64,
        remaining: u32,
        policy: u8,
    },
}

impl<'a> RingRef<'a> {
    /// Checks `n` units at `now` against several policies at once, all or
    /// nothing: admitted iff for every policy `(L_i, W_i)` admission
    /// `c + n - 1 - L_i` has left its window, i.e. (deadlines growing along
    /// the log) the window `(t_eff - W_i, t_eff]` holds at most `L_i - n`
    /// admissions — the single-policy chain argument (docs/design.md §2) once
    /// per policy. The ring has `L = max L_i` slots and stores deadlines
    /// `t + W` for the window `W` of a policy with that limit, which is
    /// among `policies` (so slot deadlines still grow by at least `W` per
    /// lap: no ABA, and the batch fill's reasoning holds unchanged).
    ///
    /// The commit is the protocol of `check_many` with an eager head:
    /// claims happen only at a validated `head` whose slot is unclaimed (a
    /// claimed one is helped first), so head lags at most the admission
    /// being committed. `n` must be at most every `L_i`.
    pub(crate) fn check_multi(&self, now: u64, n: u32, policies: &[Rule]) -> Outcome {
        let g = self.geometry;
        let n64 = u64::from(n);
        let backoff = Backoff::new();
        loop {
            let (view, d, remaining, policy) = match self.judge_multi(now, n64, policies) {
                Judged::Fits {
                    view,
                    d,
                    remaining,
                    policy,
                } => (view, d, remaining, policy),
                judged => return judged.outcome(g.window()),
            };
            let admitted = Outcome::admitted(d - g.window(), remaining, policy);
            let committed = match n {
                0 => true,
                1 => self
                    .claim(view.pos, view.s, slot::pack(d, view.stamp, false))
                    .inspect(|()| self.advance_head(view.hw, view.c, view.c, 1))
                    .is_ok(),
                _ => self.commit_batch(&view, n64, d, &backoff),
            };
            if committed {
                return admitted;
            }
        }
    }

    /// What `check_multi(now, n)` would answer now, recording nothing.
    pub(crate) fn peek_multi(&self, now: u64, n: u32, policies: &[Rule]) -> Outcome {
        self.judge_multi(now, u64::from(n), policies)
            .outcome(self.geometry.window())
    }

    /// Judges `n` units at `now` against every policy on a view with `head`
    /// at the frontier.
    fn judge_multi(&self, now: u64, n: u64, policies: &[Rule]) -> Judged {
        let g = self.geometry;
        // The word of admission `c + n - 1 - L_i` for every policy `i`: it
        // decides policy `i` (it must have left that policy's window). Its
        // slot lies `k_i = n - 1 + L - L_i` places after `c` (fewer than L:
        // n <= L_i).
        let k = |rule: &Rule| n - 1 + g.len() - rule.limit;
        let read = self.frontier(|v| {
            let mut words = [0u64; MAX_POLICIES];
            if n == 0 {
                return Some(words);
            }
            for (rule, word) in policies.iter().zip(words.iter_mut()) {
                let k = k(rule);
                *word = if k == 0 {
                    v.s
                } else {
                    let index = g.advance(v.c, k);
                    let w = self.load_slot(g.position(index));
                    // Slot `c` read unclaimed (if claimed, the caller helps
                    // and reads again): every other must be past the frontier.
                    if !g.claimed(v.s, v.c) && self.torn_past_frontier(w, index) {
                        return None;
                    }
                    w
                };
            }
            Some(words)
        });
        let Some((view, words)) = read else {
            return Judged::Closed;
        };
        let d = g.deadline_for(now, view.p);
        let t_eff = d - g.window();
        if n > 0 {
            let mut latest: Option<(u64, u8)> = None;
            for (i, (rule, &w)) in policies.iter().zip(&words).enumerate() {
                if g.flaw() == Flaw::OnePolicy && rule.limit != g.len() {
                    continue;
                }
                let deadline = slot::deadline(w);
                // Deadline 0: never written (the fresh ring's "lap -1").
                // Otherwise the admission counts for policy `i` until
                // `t + W_i = deadline - W + W_i`.
                if deadline != 0 && deadline + rule.window > d {
                    let available_at = deadline + rule.window - g.window();
                    if latest.is_none_or(|(at, _)| available_at > at) {
                        latest = Some((available_at, i as u8));
                    }
                }
            }
            if let Some((available_at, policy)) = latest {
                return Judged::Denied {
                    available_at,
                    policy,
                };
            }
        }
        let (remaining, policy) = self.remaining_multi(&view, n, t_eff, policies);
        Judged::Fits {
            view,
            d,
            remaining,
            policy,
        }
    }

    /// The fewest units left over the policies after admitting `n` at `c`
    /// at `t_eff`, and the (first) policy with that few. Exact before the
    /// commit CAS, as [`remaining_after`](Self::remaining_after).
    fn remaining_multi(&self, view: &View, n: u64, t_eff: u64, policies: &[Rule]) -> (u32, u8) {
        let g = self.geometry;
        let horizon = t_eff + g.window();
        let mut best = (u32::MAX, 0u8);
        for (i, rule) in policies.iter().enumerate() {
            // Candidates: admissions c + n - L_i .. c - 1, oldest first, at
            // `n + L - L_i + k` places after c (fewer than L).
            let free = rule.limit - n;
            let base = n + g.len() - rule.limit;
            let alive = |k: u64| {
                // Relaxed: these slots were published to us by the Acquire
                // loads of the view (see `remaining_after`).
                let deadline = slot::deadline(
                    self.slot(g.position_plus(view.pos, base + k))
                        .load(Ordering::Relaxed),
                );
                deadline != 0 && deadline + rule.window > horizon
            };
            let remaining = if free == 0 || !alive(free - 1) {
                free
            } else {
                first_alive(free, alive)
            } as u32;
            if remaining < best.0 {
                best = (remaining, i as u8);
            }
        }
        best
    }
}

impl RingRef<'_> {
    /// Each policy's room at `now` (judged time) and when it next grows
    /// (the absolute time the oldest admission in its window leaves it; 0
    /// for an empty window), into `out`: what the IETF `RateLimit` field
    /// lists per policy. Read-only and not linearized with racing
    /// admissions (a header, not a decision). `false` if the ring is
    /// closed.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn policy_states(
        &self,
        now: u64,
        policies: &[Rule],
        out: &mut [(u32, u64)],
    ) -> bool {
        let g = self.geometry;
        let Some((view, ())) = self.frontier(|_| Some(())) else {
            return false;
        };
        let t_eff = g.deadline_for(now, view.p) - g.window();
        for (rule, state) in policies.iter().zip(out.iter_mut()) {
            let base = g.len() - rule.limit;
            // Admission `c - L_i + k` (its deadline moved to this policy's
            // window), as `remaining_multi` reads it.
            let leaves = |k: u64| {
                let deadline = slot::deadline(self.load_slot(g.position_plus(view.pos, base + k)));
                (deadline != 0).then(|| deadline - g.window() + rule.window)
            };
            let alive = |k: u64| leaves(k).is_some_and(|at| at > t_eff);
            let free = rule.limit;
            let remaining = if !alive(free - 1) {
                free
            } else {
                first_alive(free, alive)
            };
            let grows_at = if remaining < free {
                leaves(remaining).unwrap_or(0)
            } else {
                0
            };
            *state = (remaining as u32, grows_at);
        }
        true
    }
}

impl Judged {
    /// The answer, recording nothing (a fit is admitted at its `t_eff`).
    fn outcome(self, window: u64) -> Outcome {
        match self {
            Judged::Closed => Outcome::Closed,
            Judged::Denied {
                available_at,
                policy,
            } => Outcome::Denied {
                available_at,
                policy,
            },
            Judged::Fits {
                d,
                remaining,
                policy,
                ..
            } => Outcome::admitted(d - window, remaining, policy),
        }
    }
}
