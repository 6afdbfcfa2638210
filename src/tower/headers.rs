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
    /// empty window.
    #[default]
    Ietf,
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
    if policies.len() <= 1 {
        return "default".to_string();
    }
    let label = |w: Duration| -> String {
        let ns = w.as_nanos();
        const S: u128 = 1_000_000_000;
        if ns % (3_600 * S) == 0 {
            format!("{}h", ns / (3_600 * S))
        } else if ns % (60 * S) == 0 {
            format!("{}m", ns / (60 * S))
        } else if ns % S == 0 {
            format!("{}s", ns / S)
        } else if ns % 1_000_000 == 0 {
            format!("{}ms", ns / 1_000_000)
        } else {
            format!("{ns}ns")
        }
    };
    let name = label(policies[i].window);
    let shared = policies[..i].iter().any(|p| label(p.window) == name);
    if shared { format!("{name}-{i}") } else { name }
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
) -> Headers {
    let num = |n: u64| HeaderValue::from(n);
    let mut out = Vec::new();
    let which = which.min(policies.len().saturating_sub(1));
    let Some(reported) = policies.get(which) else {
        return Headers(out);
    };
    match style {
        HeaderStyle::Ietf => {
            let policy = (0..policies.len())
                .map(|i| {
                    format!(
                        "\"{}\";q={};w={}",
                        policy_name(policies, i),
                        policies[i].limit,
                        ceil_seconds(policies[i].window)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let state = format!(
                "\"{}\";r={remaining};t={}",
                policy_name(policies, which),
                ceil_seconds(wait)
            );
            // Only digits, unit letters and fixed ASCII: always valid
            // header values.
            if let (Ok(p), Ok(s)) = (
                HeaderValue::from_str(&policy),
                HeaderValue::from_str(&state),
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
