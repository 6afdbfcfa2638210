//! [`Shape`]: a validated set of policies and the ring geometry that serves
//! them, the single- or multi-policy dispatch, and the one place a ring's
//! [`Outcome`] becomes the caller's answer.

use std::time::Duration;

use super::geometry::{Geometry, Now};
use super::rule::Rule;
use super::{Hints, Outcome, RingRef, report};
use crate::config;
use crate::decision::{Admitted, Denied, PolicyStates};
use crate::error::ConfigError;
use crate::policy::{MAX_POLICIES, Policy};
use crate::sync::atomic::AtomicU64;

/// The multi-policy check, out of line: the single-policy paths keep the
/// ring's parts in registers (a call by reference would make every check
/// write them to the stack first).
#[cold]
#[inline(never)]
fn multi<const R: u8>(ring: RingRef<'_>, now: u64, n: u32, rules: &[Rule]) -> Outcome {
    ring.check_multi::<R>(now, n, rules, None)
}

/// [`multi`] of one unit for the tower layer: an admission also writes each
/// policy's state into `states`, read with the count.
#[inline(never)]
fn multi_growing(
    ring: RingRef<'_>,
    now: u64,
    rules: &[Rule],
    states: &mut super::multi::PolicyGrowth,
) -> Outcome {
    ring.check_multi::<{ report::GROWTH }>(now, 1, rules, Some(states))
}

/// What [`Shape::check_growing_at`] answers: the decision and, for an
/// admission, how many nanoseconds after the caller's reading `remaining`
/// next grows (the tower layer's IETF `t`; `None` when denied), read in one
/// pass. With several policies each one's state, read in the same pass, is
/// written into the caller's cell instead (`PolicyStates`, 200 bytes, would
/// make every answer a `memcpy` on its way out, one policy's too:
/// BENCHMARKS.md, "Over HTTP").
#[derive(Clone, Copy, Debug)]
#[allow(unreachable_pub)] // named by the sealed per-key trait; unexported
pub struct Growing {
    pub(crate) decision: Result<Admitted, Denied>,
    pub(crate) wait: Option<u64>,
}

/// Where [`Shape::check_growing_at`] writes each policy's state on an
/// admission (left as it was otherwise): the tower verdict's own field.
pub(crate) type StatesOut = core::cell::Cell<Option<PolicyStates>>;

/// A validated set of policies and the ring geometry that serves them.
#[derive(Clone, Debug)]
#[allow(unreachable_pub)] // named by the sealed per-key trait; unexported
pub struct Shape {
    pub(crate) geometry: Geometry,
    /// The first policy, inline: a single-policy limiter allocates nothing
    /// but its slots.
    first: Policy,
    /// With more than one policy, all of them in the order given.
    all: Option<Box<[Policy]>>,
    /// With more than one policy, the same in nanoseconds (`None`: the
    /// single-policy fast paths).
    rules: Option<Box<[Rule]>>,
    /// The smallest limit and the first policy that has it.
    min_limit: u32,
    min_policy: u8,
    /// Expiry hints a keyed state keeps before its slots: none below 64
    /// slots, else one (one policy) or one per policy (several). Kept, not
    /// derived from `geometry` and `rules`, so that every keyed call finds
    /// its slots after one byte's load.
    keyed_hints: u8,
}

impl Shape {
    /// Validates `policies` (at least one) and sizes the ring for them.
    pub(crate) fn new(policies: &[Policy]) -> Result<Shape, ConfigError> {
        if policies.len() > MAX_POLICIES {
            return Err(ConfigError::TooManyPolicies {
                count: policies.len(),
                max: MAX_POLICIES,
            });
        }
        let mut rules = Vec::with_capacity(policies.len());
        for policy in policies {
            let geometry = Geometry::new(
                config::limit(policy.limit)?,
                config::window_nanos(policy.window)?,
            );
            rules.push(Rule {
                limit: u64::from(geometry.limit()),
                window: geometry.window(),
            });
        }
        // The ring: the largest limit, with the longest window among the
        // policies of that limit (slot deadlines are `t + W` for it).
        let base = *rules
            .iter()
            .max_by_key(|r| (r.limit, r.window))
            .expect("at least one policy");
        let longest = rules.iter().map(|r| r.window).max().unwrap_or(base.window);
        let geometry =
            Geometry::new(base.limit as u32, base.window).with_linger(longest - base.window);
        let (min_policy, min_limit) = policies
            .iter()
            .enumerate()
            .min_by_key(|&(i, p)| (p.limit, i))
            .map(|(i, p)| (i as u8, p.limit))
            .expect("at least one policy");
        let keyed_hints = Self::keyed_hints(&geometry, &rules);
        Ok(Shape {
            geometry,
            first: policies[0],
            all: (policies.len() > 1).then(|| policies.into()),
            rules: (rules.len() > 1).then(|| rules.into_boxed_slice()),
            min_limit,
            min_policy,
            keyed_hints,
        })
    }

    /// **The successor's shape** when a ring of these policies takes over
    /// `kept` — a closed ring's log, effective times oldest first, whose
    /// admissions that ring kept for `old_horizon` after their time — at
    /// `now`; and how many of `kept` it keeps: always the newest
    /// (docs/design.md §6, "What a reconfiguration keeps").
    ///
    /// It keeps every admission still inside the old horizon or these
    /// policies' longest window at `now`, or at the newest admission's time
    /// if earlier (`live`), and at least the newest
    /// `L` (the largest limit) as any ring does: `max(L, live)` slots, never
    /// more than `kept` holds. A ring of `L` slots is this shape itself, its
    /// single-policy fast path intact. A larger one carries the surplus: it
    /// is judged on the several policies' path, which judges policy `i` by
    /// admission `c + n - 1 - L_i` on any ring of at least `L_i` slots, and
    /// keeps its admissions for the longer of the two horizons (its
    /// `linger`), until a later reconfiguration finds them expired.
    pub(crate) fn successor(&self, kept: &[u64], now: u64, old_horizon: u64) -> (Shape, usize) {
        let slots = self.geometry.len() as usize;
        let horizon = old_horizon.max(self.geometry.horizon());
        // Live as of the newest admission, if earlier than `now`: a check
        // racing the change may have read any earlier time, but it is
        // judged no earlier than the newest admission (the clamp), so
        // nothing its window could hold is dropped.
        let now = kept.last().map_or(now, |&newest| newest.min(now));
        // Effective times never decrease along the log: the live ones are
        // its newest.
        let live = kept.len() - kept.partition_point(|&t| t.saturating_add(horizon) <= now);
        if live <= slots || self.geometry.flaw() == crate::flaw::Flaw::NoCarry {
            return (self.clone(), kept.len().min(slots));
        }
        let rules = self.rules.clone().unwrap_or_else(|| {
            Box::new([Rule {
                limit: self.geometry.len(),
                window: self.geometry.window(),
            }])
        });
        // `live <= kept.len() <= MAX_LIMIT`: the old ring's slots.
        let geometry = self.geometry.resized(live as u32, horizon);
        let shape = Shape {
            keyed_hints: Self::keyed_hints(&geometry, &rules),
            geometry,
            rules: Some(rules),
            ..self.clone()
        };
        (shape, live)
    }

    /// These policies on a ring of their own largest limit, keeping their
    /// admissions for their own longest window: the shape itself unless it
    /// carries admissions ([`successor`](Self::successor)).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn ordinary(&self) -> Shape {
        let Some(rules) = &self.rules else {
            return self.clone();
        };
        let largest = rules.iter().map(|r| r.limit).max().unwrap_or(1);
        let longest = rules.iter().map(|r| r.window).max().unwrap_or(1);
        if largest == self.geometry.len() && longest == self.geometry.horizon() {
            return self.clone();
        }
        // `largest <= MAX_LIMIT`: a validated policy's.
        let geometry = self.geometry.resized(largest as u32, longest);
        Shape {
            keyed_hints: Self::keyed_hints(&geometry, rules),
            geometry,
            rules: (rules.len() > 1).then(|| rules.clone()),
            ..self.clone()
        }
    }

    /// Whether the ring has more slots than its largest limit: it carries
    /// admissions a reconfiguration or a restore kept past it (a later
    /// move re-judges them).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn carries(&self) -> bool {
        self.rules
            .as_deref()
            .is_some_and(|rules| rules.iter().all(|r| r.limit < self.geometry.len()))
    }

    /// The expiry hints a keyed state of `geometry` keeps before its slots.
    fn keyed_hints(geometry: &Geometry, rules: &[Rule]) -> u8 {
        if geometry.keyed_hint() {
            rules.len() as u8
        } else {
            0
        }
    }

    /// One policy.
    pub(crate) fn single(limit: u32, window: Duration) -> Result<Shape, ConfigError> {
        Shape::new(&[Policy::new(limit, window)])
    }

    #[cfg(slidelog_loom)]
    pub(crate) fn with_flaw(mut self, flaw: crate::flaw::Flaw) -> Self {
        self.geometry = self.geometry.with_flaw(flaw);
        self
    }

    #[cfg(slidelog_loom)]
    pub(crate) fn with_general_only(mut self) -> Self {
        self.geometry = self.geometry.with_general_only();
        self
    }

    /// The heap bytes of the description (not the ring).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.all.as_deref().map_or(0, core::mem::size_of_val)
            + self.rules.as_deref().map_or(0, core::mem::size_of_val)
    }

    /// The policies as given.
    #[inline]
    pub(crate) fn policies(&self) -> &[Policy] {
        self.all
            .as_deref()
            .unwrap_or(core::slice::from_ref(&self.first))
    }

    /// The first policy's limit (the limiter's `limit()`).
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        self.first.limit
    }

    /// The first policy's window.
    #[inline]
    pub(crate) fn window(&self) -> Duration {
        self.first.window
    }

    /// Words of a keyed state's ring ([`ring_in`](Self::ring_in)): `head`,
    /// from 64 slots on the expiry hint (each policy's, with several), and
    /// `L` slots (the keyed map is not compiled for the model checker).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline]
    pub(crate) fn words(&self) -> usize {
        self.keyed_header() + self.geometry.limit() as usize
    }

    /// Words before a keyed state's slots: `head`, and the expiry hints
    /// the ring keeps.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline(always)]
    fn keyed_header(&self) -> usize {
        1 + usize::from(self.keyed_hints)
    }

    /// `Some(denial)` if `n` units can never fit (more than the smallest
    /// limit).
    #[inline]
    pub(crate) fn exceeds(&self, n: u32) -> Option<Denied> {
        (n > self.min_limit)
            .then(|| Denied::exceeds_limit(n, self.min_limit).with_policy(self.min_policy))
    }

    /// A view of a ring of this shape whose `head` and guesses live apart
    /// from its slots (a [`crate::Limiter`]'s: on one padded line).
    #[inline]
    pub(crate) fn ring_hinted<'a>(
        &'a self,
        head: &'a AtomicU64,
        hints: &'a Hints,
        slots: &'a [AtomicU64],
    ) -> RingRef<'a> {
        RingRef {
            geometry: &self.geometry,
            head,
            slots,
            frontier: Some(&hints.frontier),
            expiry: Some(&hints.expiry),
            policy_expiry: &hints.policies,
        }
    }

    /// A view of the ring laid out in `words`, a keyed state's one
    /// allocation of [`words`](Self::words) words: `head`, if the ring has
    /// 64 slots or more the expiry hints (one, or one per policy: the one
    /// policy's path reads the first as `expiry`, several policies' read
    /// them all as `policy_expiry`, so neither branches on which), then the
    /// `L` slots. No frontier guess: 8 more bytes on every key for a head
    /// CAS saved on most admissions measured no faster over 10,000 keys
    /// (BENCHMARKS.md, "Where the time goes"). A fresh state's zero hint is
    /// a guess like any other.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn ring_in<'a>(&'a self, words: &'a [AtomicU64]) -> RingRef<'a> {
        debug_assert_eq!(words.len(), self.words());
        let (header, slots) = words.split_at(self.keyed_header());
        RingRef {
            geometry: &self.geometry,
            head: &header[0],
            slots,
            frontier: None,
            expiry: header.get(1),
            policy_expiry: &header[1..],
        }
    }

    /// A request read at `read` on the limiter's clock and judged no
    /// earlier than `floor` (a keyed limiter's eviction floor; 0 for one
    /// key): the one place a `now` is floored and clamped.
    #[inline(always)]
    pub(crate) fn now(&self, read: u64, floor: u64) -> Now {
        self.geometry.now(read, floor)
    }

    /// `n <= min limit` units at `now`, all or nothing; `None` if the ring
    /// was closed for eviction.
    #[inline(always)]
    pub(crate) fn check_at(
        &self,
        ring: RingRef<'_>,
        now: Now,
        n: u32,
    ) -> Option<Result<Admitted, Denied>> {
        self.units_at::<{ report::REMAINING }>(ring, now, n)
    }

    /// [`check_at`](Self::check_at) without counting `remaining` (`admit_n`).
    #[inline(always)]
    pub(crate) fn admit_n_at(
        &self,
        ring: RingRef<'_>,
        now: Now,
        n: u32,
    ) -> Option<Result<(), Denied>> {
        self.units_at::<{ report::DECISION }>(ring, now, n)
            .map(|decision| decision.map(drop))
    }

    /// `n` units at `now` reporting `R`, decided.
    #[inline(always)]
    fn units_at<const R: u8>(
        &self,
        ring: RingRef<'_>,
        now: Now,
        n: u32,
    ) -> Option<Result<Admitted, Denied>> {
        self.decide(self.units::<R>(ring, now, n), now)
    }

    /// The outcome of `n` units at `now` reporting `R`: the one-policy
    /// ring's or the several policies' path.
    #[inline(always)]
    fn units<const R: u8>(&self, ring: RingRef<'_>, now: Now, n: u32) -> Outcome {
        match &self.rules {
            None => ring.check::<R>(now.judged, n),
            Some(rules) => multi::<R>(ring, now.judged, n, rules),
        }
    }

    /// One unit at `now`, decided exactly as [`check_at`](Self::check_at)
    /// but without counting `remaining` (the keyed limiter's, which the
    /// model checker does not build).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn admit_at(&self, ring: RingRef<'_>, now: Now) -> Option<Result<(), Denied>> {
        self.admit_when(ring, || now)
    }

    /// [`admit_at`](Self::admit_at) at the time `when` reads, read once the
    /// loads that do not need it are issued
    /// ([`RingRef::check_one_when`]).
    #[inline(always)]
    pub(crate) fn admit_when(
        &self,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<(), Denied>> {
        self.one_unit::<{ report::DECISION }, _>(ring, when, |outcome, now| match outcome {
            Outcome::Admitted { .. } => Some(Ok(())),
            outcome => self.decide(outcome, now).map(|decision| decision.map(drop)),
        })
    }

    /// One unit counting `remaining` ([`check_at`](Self::check_at) of 1) at
    /// the time `when` reads, as [`admit_when`](Self::admit_when).
    #[inline(always)]
    pub(crate) fn check_when(
        &self,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
    ) -> Option<Result<Admitted, Denied>> {
        self.one_unit::<{ report::REMAINING }, _>(ring, when, |outcome, now| {
            self.decide(outcome, now)
        })
    }

    /// One unit reporting `R`, its outcome and the time `when` read handed
    /// to `finish` (see [`RingRef::check_one_when`]).
    #[inline(always)]
    fn one_unit<const R: u8, T>(
        &self,
        ring: RingRef<'_>,
        when: impl FnOnce() -> Now,
        finish: impl Fn(Outcome, Now) -> T,
    ) -> T {
        match &self.rules {
            None => ring.check_one_when::<R, T>(when, finish),
            Some(rules) => {
                let now = when();
                finish(multi::<R>(ring, now.judged, 1, rules), now)
            }
        }
    }

    /// One unit at `now`, as [`check_at`](Self::check_at), and — for an
    /// admission — how long after `now` `remaining` next grows (the wait a
    /// dry run of `remaining + 1` units would answer) and, with several
    /// policies, each one's state, written in `states`; both read in the
    /// same pass as the count. A wait counts from the caller's reading, as
    /// a denial's does.
    #[inline(always)]
    pub(crate) fn check_growing_at(
        &self,
        ring: RingRef<'_>,
        now: Now,
        states: &StatesOut,
    ) -> Option<Growing> {
        let finish = |outcome: Outcome, now: Now, raw: Option<&[(u32, u64)]>| {
            let decision = self.decide(outcome, now)?;
            let wait = match outcome {
                Outcome::Admitted { grows_at, .. } => {
                    if let Some(raw) = raw {
                        states.set(Some(PolicyStates::growing(raw, now.read)));
                    }
                    grows_at.map(|at| at.saturating_sub(now.read))
                }
                _ => None,
            };
            Some(Growing { decision, wait })
        };
        match &self.rules {
            None => self.one_unit::<{ report::GROWTH }, _>(
                ring,
                || now,
                |outcome, now| finish(outcome, now, None),
            ),
            Some(rules) => {
                let mut raw = [(0, 0); MAX_POLICIES];
                let outcome = multi_growing(ring, now.judged, rules, &mut raw);
                // One policy on a carrying ring answers as one policy does.
                let several = self.all.is_some().then_some(&raw[..rules.len()]);
                finish(outcome, now, several)
            }
        }
    }

    /// `n` units at `now`, decided as [`check_at`](Self::check_at);
    /// an admission also reports how many nanoseconds after the caller's
    /// reading `remaining` next grows, read in the same pass as the count
    /// (the wait a dry run of `remaining + 1` units would answer; 0 when
    /// it never does: no units asked, and a window with the fewest left
    /// holds no admission). `n` is at most the smallest limit.
    pub(crate) fn check_n_growing_at(
        &self,
        ring: RingRef<'_>,
        now: Now,
        n: u32,
    ) -> Option<Result<(Admitted, u64), Denied>> {
        let outcome = self.units::<{ report::GROWTH }>(ring, now, n);
        let grows_at = match outcome {
            Outcome::Admitted { grows_at, .. } => grows_at,
            _ => None,
        };
        let wait = grows_at.map_or(0, |at| at.saturating_sub(now.read));
        Some(self.decide(outcome, now)?.map(|admitted| (admitted, wait)))
    }

    /// What [`check_at`](Self::check_at) would answer, recording nothing.
    pub(crate) fn peek_at(
        &self,
        ring: RingRef<'_>,
        now: Now,
        n: u32,
    ) -> Option<Result<Admitted, Denied>> {
        let outcome = match &self.rules {
            None => ring.peek(now.judged, n),
            Some(rules) => ring.peek_multi(now.judged, n, rules),
        };
        self.decide(outcome, now)
    }

    /// With several policies, each one's `(remaining, wait until it next
    /// grows)` at `now`, in the order given (see `RingRef::policy_states`);
    /// `None` with one policy or a closed ring.
    pub(crate) fn policy_states(&self, ring: RingRef<'_>, now: Now) -> Option<PolicyStates> {
        // One policy (on a carrying ring too): none.
        self.all.as_ref()?;
        let rules = self.rules.as_deref()?;
        let mut raw = [(0u32, 0u64); MAX_POLICIES];
        if !ring.policy_states(now.judged, rules, &mut raw) {
            return None;
        }
        Some(PolicyStates::growing(&raw[..rules.len()], now.read))
    }

    /// **The answer** to a request at `now`: the one place an [`Outcome`]
    /// becomes [`Admitted`] or [`Denied`]. A denial's wait counts from the
    /// caller's reading (`now.read`), not from the floored time it was
    /// judged at. `None` if the ring was closed.
    #[inline(always)]
    pub(crate) fn decide(&self, outcome: Outcome, now: Now) -> Option<Result<Admitted, Denied>> {
        match outcome {
            Outcome::Admitted {
                at,
                remaining,
                policy,
                ..
            } => Some(Ok(Admitted {
                at,
                remaining,
                policy: policy.into(),
            })),
            Outcome::Denied {
                available_at,
                policy,
            } => Some(Err(Denied::rate_limited(
                available_at.saturating_sub(now.read),
            )
            .with_policy(policy))),
            Outcome::Closed => None,
        }
    }

    /// What a fresh ring answers to `n <= min limit` units at `now`.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn fresh(&self, n: u32, now: Now) -> Admitted {
        Admitted {
            at: now.judged,
            remaining: self.min_limit - n,
            policy: self.min_policy.into(),
        }
    }

    /// When an admission made at `now` or later stops counting for every
    /// policy, at the earliest.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn earliest_idle(&self, now: u64) -> u64 {
        self.geometry
            .clamp(now)
            .saturating_add(self.geometry.window())
            .saturating_add(self.geometry.linger())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A successor keeps the live admissions (inside the longer horizon),
    /// at least its largest limit, never more slots than it was handed;
    /// a ring of its largest limit is the ordinary shape, fast path and all.
    #[test]
    fn a_successor_carries_what_is_live_and_never_more_than_it_was_given() {
        let shape = Shape::single(2, Duration::from_nanos(10)).unwrap();
        let kept = [1, 2, 3, 4, 15];
        // At 12 with a horizon of 10: 3, 4 and 15 are live.
        let (carried, keep) = shape.successor(&kept, 12, 10);
        // Judged no later than the newest admission (5): at 100, all five.
        let (all, _) = shape.successor(&[1, 2, 3, 4, 5], 100, 10);
        assert_eq!(all.geometry.limit(), 5);
        assert_eq!((carried.geometry.limit(), keep), (3, 3));
        assert!(carried.carries() && carried.rules.is_some());
        assert_eq!(carried.policies(), shape.policies());
        let back = carried.ordinary();
        assert_eq!(back.geometry.limit(), 2);
        assert!(!back.carries() && back.rules.is_none());
        // An old horizon of 20: all five, kept for 20.
        let (carried, keep) = shape.successor(&kept, 12, 20);
        assert_eq!((carried.geometry.limit(), keep), (5, 5));
        assert_eq!(carried.geometry.horizon(), 20);
        // Nothing live: the newest 2 on the ordinary ring.
        let (ordinary, keep) = shape.successor(&[1, 2, 3, 4, 50], 100, 10);
        assert_eq!((ordinary.geometry.limit(), keep), (2, 2));
        assert!(ordinary.rules.is_none() && !ordinary.carries());
    }
}
