//! Several policies on one ring: "10 per second **and** 100 per minute",
//! exactly and all or nothing.
//!
//! A ring of the largest limit `L` holds every admission any of the
//! policies needs: policy `(L_i, W_i)` admits `n` units at admission index
//! `c` iff admission `c + n - 1 - L_i` has left its window, and that
//! admission is one of the last `L >= L_i`. So one ring, one set of slot
//! reads and one compare-and-swap commit a request against every policy at
//! once (see `RingRef::check_multi`), where chained limiters leak units: a
//! chain consumes a unit from the first limiter even when a later one
//! rejects.

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config;
use crate::decision::{Admitted, Denied};
use crate::error::ConfigError;
use crate::ring::{Geometry, MAX_POLICIES as MAX, Outcome, RingRef, Rule};

/// The most policies one limiter (or one key's [`Quota`]) checks at once.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Limiter, MAX_POLICIES};
///
/// let mut builder = Limiter::builder(1, Duration::from_secs(1));
/// for i in 1..=MAX_POLICIES as u32 {
///     builder = builder.and(i + 1, Duration::from_secs(u64::from(i) + 1));
/// }
/// assert_eq!(
///     builder.build().unwrap_err(),
///     ConfigError::TooManyPolicies { count: MAX_POLICIES + 1, max: MAX_POLICIES }
/// );
/// ```
pub const MAX_POLICIES: usize = MAX;

/// One policy: at most `limit` admissions in any window of length `window`.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{Limiter, Policy};
///
/// let limiter = Limiter::builder(10, Duration::from_secs(1))
///     .and(100, Duration::from_secs(60))
///     .build()?;
/// assert_eq!(limiter.policies()[1], Policy::new(100, Duration::from_secs(60)));
/// assert_eq!(limiter.policies()[1].to_string(), "100 per 60s");
/// # Ok::<(), slidelog::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Policy {
    /// Admissions allowed in any window.
    pub limit: u32,
    /// The window.
    pub window: Duration,
}

impl Policy {
    /// `limit` per `window` (validated when a limiter or [`Quota`] is built).
    pub const fn new(limit: u32, window: Duration) -> Self {
        Policy { limit, window }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.limit, self.window)
    }
}

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
}

impl Shape {
    /// Validates `policies` (at least one) and sizes the ring for them.
    pub(crate) fn new(policies: &[Policy]) -> Result<Shape, ConfigError> {
        if policies.len() > MAX {
            return Err(ConfigError::TooManyPolicies {
                count: policies.len(),
                max: MAX,
            });
        }
        let mut rules = Vec::with_capacity(policies.len());
        for policy in policies {
            let geometry = config::geometry(policy.limit, policy.window)?;
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
        Ok(Shape {
            geometry,
            first: policies[0],
            all: (policies.len() > 1).then(|| policies.into()),
            rules: (rules.len() > 1).then(|| rules.into_boxed_slice()),
            min_limit,
            min_policy,
        })
    }

    /// One policy.
    pub(crate) fn single(limit: u32, window: Duration) -> Result<Shape, ConfigError> {
        Shape::new(&[Policy::new(limit, window)])
    }

    #[cfg(slidelog_loom)]
    pub(crate) fn with_flaw(mut self, flaw: crate::ring::Flaw) -> Self {
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

    /// Words of a ring: `head` and `L` slots (keyed states; the keyed map
    /// is not compiled for the model checker).
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    #[inline]
    pub(crate) fn words(&self) -> usize {
        self.geometry.limit() as usize + 1
    }

    /// `Some(denial)` if `n` units can never fit (more than the smallest
    /// limit).
    #[inline]
    pub(crate) fn exceeds(&self, n: u32) -> Option<Denied> {
        (n > self.min_limit)
            .then(|| Denied::exceeds_limit(n, self.min_limit).with_policy(self.min_policy))
    }

    /// A view of a ring of this shape.
    #[inline]
    pub(crate) fn ring<'a>(
        &'a self,
        head: &'a crate::sync::atomic::AtomicU64,
        slots: &'a [crate::sync::atomic::AtomicU64],
    ) -> RingRef<'a> {
        RingRef {
            geometry: &self.geometry,
            head,
            slots,
            hint: None,
        }
    }

    /// A view of a ring of this shape that keeps an expiry hint (see
    /// `RingRef::remaining_after`).
    #[inline]
    pub(crate) fn ring_hinted<'a>(
        &'a self,
        head: &'a crate::sync::atomic::AtomicU64,
        hint: &'a crate::sync::atomic::AtomicU64,
        slots: &'a [crate::sync::atomic::AtomicU64],
    ) -> RingRef<'a> {
        RingRef {
            hint: Some(hint),
            ..self.ring(head, slots)
        }
    }

    /// One unit at `now`.
    #[inline]
    pub(crate) fn check_one<const COUNT: bool>(&self, ring: RingRef<'_>, now: u64) -> Outcome {
        match &self.rules {
            None => ring.check_one::<COUNT>(now),
            Some(rules) => ring.check_multi(now, 1, rules),
        }
    }

    /// `n <= min limit` units at `now`, all or nothing.
    #[inline]
    pub(crate) fn check(&self, ring: RingRef<'_>, now: u64, n: u32) -> Outcome {
        match &self.rules {
            None => ring.check(now, n),
            Some(rules) => ring.check_multi(now, n, rules),
        }
    }

    /// What `check` would answer, recording nothing.
    pub(crate) fn peek(&self, ring: RingRef<'_>, now: u64, n: u32) -> Outcome {
        match &self.rules {
            None => ring.peek(now, n),
            Some(rules) => ring.peek_multi(now, n, rules),
        }
    }

    /// The caller's answer (see [`Geometry::decision`]).
    #[inline]
    pub(crate) fn decision(&self, outcome: Outcome, now: u64) -> Option<Result<Admitted, Denied>> {
        self.geometry.decision(outcome, now)
    }

    /// What a fresh ring answers to `n <= min limit` units at `now`.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn fresh(&self, n: u32, now: u64) -> Admitted {
        Admitted {
            at: self.geometry.clamp_now(now),
            remaining: self.min_limit - n,
            policy: self.min_policy,
        }
    }

    /// When an admission made at `now` or later stops counting for every
    /// policy, at the earliest.
    #[cfg_attr(slidelog_loom, allow(dead_code))]
    pub(crate) fn earliest_idle(&self, now: u64) -> u64 {
        self.geometry
            .clamp_now(now)
            .saturating_add(self.geometry.window())
            .saturating_add(self.geometry.linger())
    }
}

/// The policies one key of a [`KeyedLimiter`](crate::KeyedLimiter) is
/// limited by, chosen per key with
/// [`KeyedBuilder::quota`](crate::KeyedBuilder::quota) (a free and a paid
/// tier, say). Validated when made, so choosing one never fails; cloning
/// one is a reference-count increment, and keys given clones of one quota
/// share its description.
///
/// ```
/// use std::time::Duration;
/// use slidelog::{ConfigError, Quota};
///
/// let paid = Quota::new(100, Duration::from_secs(1))?.and(5_000, Duration::from_secs(3600))?;
/// assert_eq!(paid.policies().len(), 2);
/// assert_eq!(Quota::new(0, Duration::from_secs(1)).unwrap_err(), ConfigError::ZeroLimit);
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Quota {
    pub(crate) shape: Arc<Shape>,
}

impl Quota {
    /// `limit` admissions per `window`.
    ///
    /// # Errors
    ///
    /// As [`Limiter::new`](crate::Limiter::new): a zero or too large limit
    /// or window.
    pub fn new(limit: u32, window: Duration) -> Result<Quota, ConfigError> {
        Ok(Quota {
            shape: Arc::new(Shape::single(limit, window)?),
        })
    }

    /// This quota and `limit` per `window` too.
    ///
    /// # Errors
    ///
    /// A bad limit or window, or more than [`MAX_POLICIES`] policies.
    pub fn and(self, limit: u32, window: Duration) -> Result<Quota, ConfigError> {
        let mut policies = self.shape.policies().to_vec();
        policies.push(Policy::new(limit, window));
        Ok(Quota {
            shape: Arc::new(Shape::new(&policies)?),
        })
    }

    /// The policies, in the order given.
    pub fn policies(&self) -> &[Policy] {
        self.shape.policies()
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Quota").field(&self.policies()).finish()
    }
}

impl PartialEq for Quota {
    fn eq(&self, other: &Self) -> bool {
        self.policies() == other.policies()
    }
}

impl Eq for Quota {}
