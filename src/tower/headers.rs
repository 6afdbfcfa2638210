//! The IETF `RateLimit` / `RateLimit-Policy` headers and `Retry-After`
//! (draft-ietf-httpapi-ratelimit-headers), and the policies a response
//! describes.

use core::hash::Hash;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue};

use crate::policy::Policy;

/// Which rate-limit headers to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// IETF httpapi (draft-ietf-httpapi-ratelimit-headers-12, November 2026;
    /// the same fields since -10):
    /// `RateLimit-Policy: "default";q=5;w=10` and `RateLimit:
    /// "default";r=4;t=10`, where `t` is the seconds until the quota next
    /// grows (the oldest admission in the window leaves it), 0 only for an
    /// empty window. With several policies both fields list one item per
    /// policy — `RateLimit: "1s";r=0;t=1, "1m";r=57;t=40` — so a client
    /// sees that the minute still has room while the second is spent (a
    /// backend that cannot tell, Redis, sends the deciding policy's item).
    #[default]
    Ietf,
    /// As [`Ietf`](Self::Ietf), but `RateLimit` carries one item: the
    /// policy closest to exhaustion (or the one that denied).
    IetfClosest,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`
    /// (seconds until a request can be admitted).
    Legacy,
    /// Only `Retry-After` on denials.
    None,
}

/// Whole seconds, rounded **up** (a 300 ms wait is `1`, never `0`).
///
/// ```
/// use std::time::Duration;
/// use slidelog::tower::ceil_seconds;
/// assert_eq!(ceil_seconds(Duration::from_millis(300)), 1);
/// assert_eq!(ceil_seconds(Duration::from_secs(2)), 2);
/// assert_eq!(ceil_seconds(Duration::from_nanos(2_000_000_001)), 3);
/// assert_eq!(ceil_seconds(Duration::ZERO), 0);
/// ```
pub fn ceil_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The header values for one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Headers(pub(crate) Vec<(HeaderName, HeaderValue)>);

/// The name of policy `i` in the IETF headers: `"default"` for a limiter
/// of one policy; with several, its window (`"1s"`, `"1m"`, `"1h"`,
/// `"250ms"`, …), with `-i` appended when two policies share a window.
///
/// ```
/// use std::time::Duration;
/// use slidelog::Policy;
/// use slidelog::tower::policy_name;
/// let ps = [
///     Policy::new(10, Duration::from_secs(1)),
///     Policy::new(100, Duration::from_secs(60)),
///     Policy::new(500, Duration::from_secs(60)),
/// ];
/// assert_eq!(policy_name(&ps, 0), "1s");
/// assert_eq!(policy_name(&ps, 1), "1m");
/// assert_eq!(policy_name(&ps, 2), "1m-2");
/// assert_eq!(policy_name(&ps[..1], 0), "default");
/// ```
pub fn policy_name(policies: &[Policy], i: usize) -> String {
    let mut name = String::new();
    write_policy_name(&mut name, policies, i);
    name
}

/// [`policy_name`], written into `out`.
fn write_policy_name(out: &mut String, policies: &[Policy], i: usize) {
    use core::fmt::Write;
    if policies.len() <= 1 {
        out.push_str("default");
        return;
    }
    /// A window's label: its value in the largest unit that divides it.
    fn label(w: Duration) -> (u128, &'static str) {
        const S: u128 = 1_000_000_000;
        let ns = w.as_nanos();
        [(3_600 * S, "h"), (60 * S, "m"), (S, "s"), (1_000_000, "ms")]
            .into_iter()
            .find(|&(unit, _)| ns.is_multiple_of(unit))
            .map_or((ns, "ns"), |(unit, name)| (ns / unit, name))
    }
    let own = label(policies[i].window);
    let _ = write!(out, "{}{}", own.0, own.1);
    if policies[..i].iter().any(|p| label(p.window) == own) {
        let _ = write!(out, "-{i}");
    }
}

/// Builds the rate-limit headers for `policies`, reporting on policy
/// `which` (the one closest to exhaustion, or the one that denied).
/// `wait` is the time until `remaining` next grows (see [`Verdict::wait`]);
/// the legacy reset is the time until a request can be admitted: 0 while
/// `remaining > 0`, else `wait`.
pub(crate) fn rate_limit_headers(
    style: HeaderStyle,
    policies: &[Policy],
    which: usize,
    remaining: u32,
    wait: Duration,
    per_policy: Option<&super::PolicyStates>,
) -> Headers {
    let num = |n: u64| HeaderValue::from(n);
    let mut out = Vec::with_capacity(3);
    let which = which.min(policies.len().saturating_sub(1));
    let Some(reported) = policies.get(which) else {
        return Headers(out);
    };
    // Every policy's item, if the backend told each one's state.
    let every = match (style, per_policy) {
        (HeaderStyle::Ietf, Some(states)) if states.as_slice().len() == policies.len() => {
            Some(states.as_slice())
        }
        _ => None,
    };
    match style {
        HeaderStyle::Ietf | HeaderStyle::IetfClosest => {
            use core::fmt::Write;
            // One buffer per field, handed to the header value without a
            // copy: `"1s";q=10;w=1, "1m";q=100;w=60` and `"1s";r=4;t=1`.
            let mut policy = String::with_capacity(24 * policies.len());
            for (i, p) in policies.iter().enumerate() {
                if i > 0 {
                    policy.push_str(", ");
                }
                policy.push('"');
                write_policy_name(&mut policy, policies, i);
                let _ = write!(policy, "\";q={};w={}", p.limit, ceil_seconds(p.window));
            }
            let mut state = String::with_capacity(32 * every.map_or(1, <[_]>::len));
            match every {
                Some(states) => {
                    for (i, &(r, t)) in states.iter().enumerate() {
                        if i > 0 {
                            state.push_str(", ");
                        }
                        state.push('"');
                        write_policy_name(&mut state, policies, i);
                        let _ = write!(state, "\";r={r};t={}", ceil_seconds(t));
                    }
                }
                None => {
                    state.push('"');
                    write_policy_name(&mut state, policies, which);
                    let _ = write!(state, "\";r={remaining};t={}", ceil_seconds(wait));
                }
            }
            // Only digits, unit letters and fixed ASCII: always valid
            // header values.
            if let (Ok(p), Ok(s)) = (
                HeaderValue::from_maybe_shared(bytes::Bytes::from(policy)),
                HeaderValue::from_maybe_shared(bytes::Bytes::from(state)),
            ) {
                out.push((HeaderName::from_static("ratelimit-policy"), p));
                out.push((HeaderName::from_static("ratelimit"), s));
            }
        }
        HeaderStyle::Legacy => {
            out.push((
                HeaderName::from_static("x-ratelimit-limit"),
                num(u64::from(reported.limit)),
            ));
            out.push((
                HeaderName::from_static("x-ratelimit-remaining"),
                num(u64::from(remaining)),
            ));
            let reset = if remaining > 0 { Duration::ZERO } else { wait };
            out.push((
                HeaderName::from_static("x-ratelimit-reset"),
                num(ceil_seconds(reset)),
            ));
        }
        HeaderStyle::None => {}
    }
    Headers(out)
}

/// Up to [`MAX_POLICIES`](crate::MAX_POLICIES) policies, inline: each
/// response copies them instead of sharing a reference count that every
/// request on every core would write.
#[derive(Clone, Copy)]
pub(super) struct PolicyList {
    len: u8,
    items: [Policy; crate::MAX_POLICIES],
}

impl PolicyList {
    /// The first `MAX_POLICIES` of `policies` (every backend of this crate
    /// has at most that many).
    pub(super) fn new(policies: &[Policy]) -> Self {
        let mut items = [Policy::new(0, Duration::ZERO); crate::MAX_POLICIES];
        let len = policies.len().min(items.len());
        items[..len].copy_from_slice(&policies[..len]);
        PolicyList {
            len: len as u8,
            items,
        }
    }
}

impl core::ops::Deref for PolicyList {
    type Target = [Policy];
    fn deref(&self) -> &[Policy] {
        &self.items[..usize::from(self.len)]
    }
}
