//! The reference model of docs/design.md §1 for one or several policies:
//! one deque of effective times, checked against every policy with the
//! classic log's rule, all or nothing.

use std::collections::VecDeque;

/// What the model decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiDecision {
    /// Admitted at `at`, with `remaining` left under `policy` (the first
    /// policy with the fewest left).
    Admitted {
        at: u64,
        remaining: u32,
        policy: usize,
    },
    /// Denied until the absolute time `until`, decided by `policy` (the
    /// first violated policy with the latest `until`).
    Denied { until: u64, policy: usize },
    /// More units than the smallest limit.
    ExceedsLimit,
}

/// Every policy `(limit, window ns)` over one log of effective times.
#[derive(Clone, Debug)]
pub struct MultiModel {
    pub policies: Vec<(u32, u64)>,
    log: VecDeque<u64>,
    /// The newest admission's time: the clamp.
    newest: u64,
    /// Keep only the newest `L` (a ring's history); `false`: keep every
    /// admission (a Redis sorted set's, trimmed by age instead).
    truncating: bool,
    /// After a reconfiguration that carried more live admissions than the
    /// new largest limit: the ring's slots and how long an admission is
    /// kept after its time (`None`: the largest limit and the longest
    /// window).
    carried: Option<(usize, u64)>,
}

impl MultiModel {
    pub fn new(policies: &[(u32, u64)]) -> Self {
        MultiModel {
            policies: policies.to_vec(),
            log: VecDeque::new(),
            newest: 0,
            truncating: true,
            carried: None,
        }
    }

    /// The model after `prefix` (effective times, oldest first) was admitted.
    pub fn with_prefix(policies: &[(u32, u64)], prefix: &[u64]) -> Self {
        MultiModel {
            policies: policies.to_vec(),
            log: prefix.iter().copied().collect(),
            newest: prefix.last().copied().unwrap_or(0),
            truncating: true,
            carried: None,
        }
    }

    /// The newest admission's effective time, if any was made.
    pub fn newest(&self) -> Option<u64> {
        (!self.log.is_empty()).then_some(self.newest)
    }

    fn largest_limit(&self) -> usize {
        self.policies.iter().map(|p| p.0).max().unwrap() as usize
    }

    /// The slots of the ring the model mirrors: the largest limit, or what
    /// a reconfiguration carried.
    fn slots(&self) -> usize {
        self.carried
            .map_or(self.largest_limit(), |(slots, _)| slots)
    }

    fn longest_window(&self) -> u64 {
        self.policies.iter().map(|p| p.1).max().unwrap()
    }

    /// How long after its time an admission is kept: the longest window,
    /// or a carried ring's horizon (the longest window in force when its
    /// surplus was carried).
    pub fn horizon(&self) -> u64 {
        self.carried
            .map_or(self.longest_window(), |(_, horizon)| horizon)
    }

    /// Whether a reconfiguration left more admissions than the largest
    /// limit (a carried ring).
    pub fn carries(&self) -> bool {
        self.carried.is_some()
    }

    /// A model that keeps every admission (see `truncating`).
    pub fn keeping_all(mut self) -> Self {
        self.truncating = false;
        self
    }

    /// New policies, the history untouched (a Redis key not yet called
    /// under them).
    pub fn set_policies(&mut self, policies: &[(u32, u64)]) {
        self.policies = policies.to_vec();
    }

    /// Keeps the newest `keep` admissions.
    pub fn truncate(&mut self, keep: usize) {
        while self.log.len() > keep {
            self.log.pop_front();
        }
    }

    /// The contract of an in-process reconfiguration at `now`: every
    /// admission the old ring holds that is still inside its horizon or the
    /// new longest window (at `now`, or at the newest admission if earlier)
    /// is kept, and at least the newest `L_new` (what
    /// any ring of the new largest limit keeps); the new `policies` judge
    /// them and everything after. Kept past `L_new`, the surplus stays until
    /// a later reconfiguration finds it outside every such window.
    pub fn reconfigure_at(&mut self, policies: &[(u32, u64)], now: u64) {
        self.truncate(self.slots());
        let old_horizon = self.horizon();
        self.policies = policies.to_vec();
        let horizon = old_horizon.max(self.longest_window());
        // As of the newest admission, if earlier (a racing check is judged
        // no earlier than it).
        let now = self.log.back().map_or(now, |&newest| newest.min(now));
        let live = self.log.iter().filter(|&&t| t + horizon > now).count();
        let largest = self.largest_limit();
        if live > largest {
            self.truncate(live);
            self.carried = Some((live, horizon));
        } else {
            self.truncate(largest);
            self.carried = None;
        }
    }

    /// Drops the admissions at or before `t` (what a Redis sorted set's trim
    /// removes); the clamp stays.
    pub fn forget_up_to(&mut self, t: u64) {
        while self.log.front().is_some_and(|&e| e <= t) {
            self.log.pop_front();
        }
    }

    /// `n` units at caller time `now` (judged at `max(now, newest)`).
    pub fn decide(&mut self, now: u64, n: u32) -> MultiDecision {
        let min = self.policies.iter().map(|p| p.0).min().unwrap();
        if n > min {
            return MultiDecision::ExceedsLimit;
        }
        let t = now.max(self.newest);
        // Keep the newest `L` (the largest limit): no policy of limit
        // `L_i <= L` counts more than the newest `L_i` entries (an admitted
        // log never holds more than `L_i` in one of its windows), so the
        // older ones decide nothing — and these are exactly what a ring of
        // `L` slots keeps, which a reconfiguration hands on.
        if self.truncating {
            self.truncate(self.slots());
        }
        let len = self.log.len();
        let mut denied: Option<(u64, usize)> = None;
        let mut left: Option<(u32, usize)> = None;
        for (i, &(limit, window)) in self.policies.iter().enumerate() {
            let in_window = self.log.iter().filter(|&&e| e + window > t).count();
            // Zero units are always admitted (a probe of the room left,
            // which a shrinking reconfiguration can leave below zero).
            if n > 0 && in_window + n as usize > limit as usize {
                // The entry that must leave: the (in + n - L)-th oldest in
                // the window.
                let leave = self.log[len + n as usize - limit as usize - 1];
                let until = leave + window;
                if denied.is_none_or(|(u, _)| until > u) {
                    denied = Some((until, i));
                }
            } else {
                let rem = limit.saturating_sub(in_window as u32 + n);
                if left.is_none_or(|(r, _)| rem < r) {
                    left = Some((rem, i));
                }
            }
        }
        if let Some((until, policy)) = denied {
            return MultiDecision::Denied { until, policy };
        }
        if n > 0 {
            self.log.extend(std::iter::repeat_n(t, n as usize));
            self.newest = t;
        }
        let (remaining, policy) = left.unwrap();
        MultiDecision::Admitted {
            at: t,
            remaining,
            policy,
        }
    }
}

impl MultiModel {
    /// When the fewest units left at judged time `t` (after a decision
    /// there) next grows: for each policy with that few, the time the
    /// admission whose leaving gives it one unit more leaves its window
    /// (its oldest in the window, unless a cut left it over-full), and the
    /// latest of those; `None` if one of them has an empty window (its
    /// room is whole: the fewest can never grow by waiting).
    pub fn grows_at(&self, t: u64) -> Option<u64> {
        let windows: Vec<(u32, Vec<u64>)> = self
            .policies
            .iter()
            .map(|&(limit, window)| {
                let inside = self.log.iter().filter(|&&e| e + window > t);
                (limit, inside.map(|&e| e + window).collect())
            })
            .collect();
        let room =
            |&(limit, ref leaving): &(u32, Vec<u64>)| limit.saturating_sub(leaving.len() as u32);
        let fewest = windows.iter().map(room).min()?;
        let mut latest = 0;
        for w in windows.iter().filter(|w| room(w) == fewest) {
            let (limit, leaving) = w;
            // One more unit of room once `len - (limit - fewest) + 1` of
            // them have left (oldest first).
            let k = (leaving.len() + 1).checked_sub((limit - fewest) as usize)?;
            latest = latest.max(*leaving.get(k.checked_sub(1)?)?);
        }
        Some(latest)
    }
}

/// A limiter's answer to a call at `now`, in the model's terms.
pub fn observed_multi(
    now: u64,
    result: Result<slidelog::Admitted, slidelog::Denied>,
) -> MultiDecision {
    match result {
        Ok(a) => MultiDecision::Admitted {
            at: a.at(),
            remaining: a.remaining(),
            policy: a.policy(),
        },
        Err(d) => match d.reason() {
            slidelog::DenyReason::ExceedsLimit { .. } => MultiDecision::ExceedsLimit,
            _ => MultiDecision::Denied {
                until: now + d.retry_after_nanos(),
                policy: d.policy(),
            },
        },
    }
}
