//! Several policies on one ring, all or nothing (docs/design.md §4,
//! "Several policies").

use super::count::Count;
use super::rule::Rule;
use super::view::View;
use super::word::slot;
use super::{Outcome, RingRef, report};
use crate::flaw::Flaw;
use crate::policy::MAX_POLICIES;
use crate::sync::{Backoff, after_lost_race};

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
        /// Each policy's live count for its expiry hint, stored once the
        /// admission commits ([`Count::noted`]).
        noted: [u32; MAX_POLICIES],
        /// When `remaining` next grows, if the caller asked for each
        /// policy's state (see [`Counted::grows_at`]).
        grows_at: Option<u64>,
    },
}

/// Each policy's `(remaining, grows_at)` after an admission, in the order
/// given: its room and the time (judged, nanoseconds) its oldest
/// admission then alive leaves its window, when that room grows by one (0
/// for an empty window). What the IETF `RateLimit` field lists per policy.
pub(crate) type PolicyGrowth = [(u32, u64); MAX_POLICIES];

/// A growth that never comes: an empty window's (no units asked, no
/// admission alive), whose room is whole. The latest growth among tied
/// policies is then never too — the fewest units left cannot grow — and an
/// admission reports none.
const NEVER: u64 = u64::MAX;

/// What [`RingRef::remaining_multi`] counted.
struct Counted {
    /// The fewest units left over the policies.
    remaining: u32,
    /// The (first) policy with that few.
    policy: u8,
    /// Each policy's live count for its expiry hint.
    noted: [u32; MAX_POLICIES],
    /// Under [`report::GROWTH`]: when the fewest units left next grows —
    /// the latest growth among the policies with that few (each must grow
    /// before a request for one unit more fits), which is when a dry run
    /// of `remaining + 1` units would be admitted; `None` if it never does
    /// ([`NEVER`]).
    grows_at: Option<u64>,
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
    ///
    /// `R` says what an admission reports ([`report`]): with
    /// [`report::DECISION`] (`admit`) no policy's `remaining` is counted,
    /// and the outcome carries 0 for it; otherwise the fewest units left
    /// over the policies. Under [`report::GROWTH`] an admission also
    /// reports when the fewest units left next grows, read in the same pass
    /// as the count, and with `states` (the tower layer's) writes each
    /// policy's [`PolicyGrowth`] there.
    #[inline(always)]
    pub(crate) fn check_multi<const R: u8>(
        &self,
        now: u64,
        n: u32,
        policies: &[Rule],
        mut states: Option<&mut PolicyGrowth>,
    ) -> Outcome {
        let g = self.geometry;
        let n64 = u64::from(n);
        let backoff = Backoff::new();
        let mut losses = 0u32;
        loop {
            let (view, d, remaining, policy, noted, grows_at) =
                match self.judge_multi::<R>(now, n64, policies, states.as_deref_mut()) {
                    Judged::Fits {
                        view,
                        d,
                        remaining,
                        policy,
                        noted,
                        grows_at,
                    } => (view, d, remaining, policy, noted, grows_at),
                    judged => return judged.outcome(g.window()),
                };
            let admitted = Outcome::Admitted {
                at: d - g.window(),
                remaining,
                policy,
                grows_at,
            };
            let committed = match n {
                0 => true,
                1 => self
                    .claim(view.pos, view.s, slot::pack(d, view.stamp, false))
                    .inspect(|()| self.advance_head(view.hw, view.c, view.c, 1))
                    // Another admission took slot `c`: pause, then judge
                    // again (a batch waits with its own backoff).
                    .inspect_err(|_| {
                        after_lost_race(losses);
                        losses = losses.saturating_add(1);
                    })
                    .is_ok(),
                _ => self.commit_batch(&view, n64, d, &backoff),
            };
            if committed {
                self.note_policies(&noted[..policies.len()]);
                return admitted;
            }
        }
    }

    /// What `check_multi(now, n)` would answer now, recording nothing.
    pub(crate) fn peek_multi(&self, now: u64, n: u32, policies: &[Rule]) -> Outcome {
        let judged = self.judge_multi::<{ report::REMAINING }>(now, u64::from(n), policies, None);
        if let Judged::Fits { noted, .. } = &judged
            && self.geometry.flaw() == Flaw::TrustHint
        {
            // The broken variant: a peek's effective time may be later than
            // the next admission's (see `note_expired`).
            self.note_policies(&noted[..policies.len()]);
        }
        judged.outcome(self.geometry.window())
    }

    /// Judges `n` units at `now` against every policy on a view with `head`
    /// at the frontier, counting `remaining` unless `R` is
    /// [`report::DECISION`] (and, into `states`, each policy's
    /// [`PolicyGrowth`]).
    ///
    /// Each policy is judged as its word is read, inside the view: the
    /// judgement is a function of `now`, slot `c - 1` and the words, so
    /// judging before the view's re-validation decides nothing a torn view
    /// could leak (a torn view is thrown away with its judgement), and no
    /// array of words waits for it.
    #[inline(always)]
    fn judge_multi<const R: u8>(
        &self,
        now: u64,
        n: u64,
        policies: &[Rule],
        states: Option<&mut PolicyGrowth>,
    ) -> Judged {
        let g = self.geometry;
        let read = self.frontier(
            #[inline(always)]
            |v| {
                // The deadline `t_eff + W` (the clamp on the newest admission).
                let d = g.deadline_for(now, v.p);
                let mut latest: Option<(u64, u8)> = None;
                if n == 0 {
                    return Some((d, latest));
                }
                // Slot `c` read claimed: `frontier` helps and reads again, so
                // this view's words are not judged.
                let claimed = g.claimed(v.s, v.c);
                for (i, rule) in policies.iter().enumerate() {
                    // The word of admission `c + n - 1 - L_i` decides policy `i`
                    // (it must have left that policy's window). Its slot lies
                    // `k = n - 1 + L - L_i` places after `c` (fewer than L:
                    // n <= L_i).
                    let k = n - 1 + g.len() - rule.limit;
                    let w = if k == 0 {
                        v.s
                    } else {
                        let index = g.advance(v.c, k);
                        let w = self.load_slot(g.position(index));
                        // Slot `c` read unclaimed: every other must be past the
                        // frontier.
                        if !claimed && self.torn_past_frontier(w, index) {
                            return None;
                        }
                        w
                    };
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
                Some((d, latest))
            },
        );
        let Some((view, (d, latest))) = read else {
            return Judged::Closed;
        };
        if let Some((available_at, policy)) = latest {
            return Judged::Denied {
                available_at,
                policy,
            };
        }
        let counted = if R == report::DECISION {
            Counted {
                remaining: 0,
                policy: 0,
                noted: [Count::KEEP; MAX_POLICIES],
                grows_at: None,
            }
        } else {
            self.remaining_multi::<R>(&view, n, d, policies, states)
        };
        Judged::Fits {
            view,
            d,
            remaining: counted.remaining,
            policy: counted.policy,
            noted: counted.noted,
            grows_at: counted.grows_at,
        }
    }

    /// The fewest units left over the policies after admitting `n` at `c`
    /// with deadline `d = t_eff + W`, the (first) policy with that few, and
    /// each policy's live count for its expiry hint; with `states` (under
    /// [`report::GROWTH`]), each policy's [`PolicyGrowth`] too. Exact
    /// before the commit CAS, as [`remaining_after`](Self::remaining_after).
    ///
    /// Policy `i`'s candidates are admissions `c + n - L_i .. c - 1`, alive
    /// while `deadline + W_i > t_eff + W` (a zero deadline: never written,
    /// alive for none). With `t_i = max(t_eff + W - W_i, 0)` that is
    /// `deadline > t_i`, both when `t_eff + W >= W_i` (subtract) and when
    /// not (then every written deadline counts, and `0 > 0` does not): a
    /// single ring's liveness at time `t_i`, so each policy is counted as
    /// one ring of `L_i` slots would be ([`remaining_policy`]), with its
    /// own hint on a ring that keeps them (a [`crate::Limiter`]'s, for a
    /// policy of 8 or more). Its room grows when its oldest admission then
    /// alive leaves: that admission's deadline ([`growth_after`]) moved to
    /// its window, `deadline - W + W_i`.
    ///
    /// [`remaining_policy`]: Self::remaining_policy
    /// [`growth_after`]: Self::growth_after
    fn remaining_multi<const R: u8>(
        &self,
        view: &View,
        n: u64,
        d: u64,
        policies: &[Rule],
        mut states: Option<&mut PolicyGrowth>,
    ) -> Counted {
        let g = self.geometry;
        let mut counted = Counted {
            remaining: u32::MAX,
            policy: 0,
            noted: [Count::KEEP; MAX_POLICIES],
            grows_at: None,
        };
        for (i, rule) in policies.iter().enumerate() {
            let (skip, free) = (n + g.len() - rule.limit, rule.limit - n);
            let count = self.count_policy(i, rule, view.pos, skip, free, d);
            counted.noted[i] = count.noted();
            let fewer = count.remaining < counted.remaining;
            if fewer {
                (counted.remaining, counted.policy) = (count.remaining, i as u8);
            }
            if R == report::GROWTH {
                // No units and no admission alive: this policy's room is
                // whole, and grows never ([`NEVER`], 0 in its state).
                let grows_at = if n > 0 || u64::from(count.remaining) < free {
                    let oldest = self.growth_after(view.pos, skip, free, count.remaining, d);
                    self.leaves(oldest, rule)
                } else {
                    NEVER
                };
                if let Some(states) = states.as_deref_mut() {
                    let shown = if grows_at == NEVER { 0 } else { grows_at };
                    states[i] = (count.remaining, shown);
                }
                // The fewest so far: alone (then its growth), or tied.
                if count.remaining == counted.remaining {
                    let latest = if fewer { None } else { counted.grows_at };
                    counted.grows_at = latest.max(Some(grows_at));
                }
            }
        }
        counted.grows_at = counted.grows_at.filter(|&at| at != NEVER);
        counted
    }

    /// Policy `i`'s count ([`remaining_policy`](Self::remaining_policy)):
    /// its `free` candidates from `skip` places after position `at`, alive
    /// at its threshold `t_i = max(d - W_i, 0)` (see `remaining_multi`),
    /// from its expiry hint if the ring keeps one and the policy is large
    /// enough to use it.
    #[inline(always)]
    fn count_policy(
        &self,
        i: usize,
        rule: &Rule,
        at: usize,
        skip: u64,
        free: u64,
        d: u64,
    ) -> Count {
        let hint = self
            .policy_expiry
            .get(i)
            .filter(|_| self.geometry.hinted_limit(rule.limit));
        self.remaining_policy(hint, at, skip, free, d.saturating_sub(rule.window))
    }

    /// When the admission of `deadline` (`t + W`, the ring's window) leaves
    /// policy `rule`'s window: `t + W_i`. Saturating: a word re-read from a
    /// view a racing admitter made stale may be anything (the attempt, or
    /// the header, is thrown away or not linearized).
    #[inline(always)]
    fn leaves(&self, deadline: u64, rule: &Rule) -> u64 {
        (deadline + rule.window).saturating_sub(self.geometry.window())
    }
}

impl RingRef<'_> {
    /// Each policy's room at `now` (judged time) and when it next grows
    /// (the absolute time the oldest admission in its window leaves it; 0
    /// for an empty window), into `out`: what the IETF `RateLimit` field
    /// lists per policy. Read-only and not linearized with racing
    /// admissions (a header, not a decision). `false` if the ring is
    /// closed.
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
        let d = g.deadline_for(now, view.p);
        for (i, (rule, state)) in policies.iter().zip(out.iter_mut()).enumerate() {
            // Nothing added: the last `L_i` admissions are the candidates,
            // counted as `remaining_multi` counts them (from the hints,
            // which only an admission's commit stores).
            let (skip, free) = (g.len() - rule.limit, rule.limit);
            let remaining = self
                .count_policy(i, rule, view.pos, skip, free, d)
                .remaining;
            let grows_at = if u64::from(remaining) < free {
                self.leaves(self.growth_after(view.pos, skip, free, remaining, d), rule)
            } else {
                0
            };
            *state = (remaining, grows_at);
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
