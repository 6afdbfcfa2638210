//! The IETF `RateLimit` / `RateLimit-Policy` headers and `Retry-After`
//! (draft-ietf-httpapi-ratelimit-headers), and the policies a response
//! describes.

use core::hash::Hash;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::decision::PolicyStates;
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

/// `RateLimit-Policy` (a constant: its name is checked when compiled, not
/// per response).
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The rate-limit fields of one decision, compact: an admitted request's
/// future carries them from `call` to the inner service's response, and
/// every move of that future copies them (BENCHMARKS.md, "Over HTTP").
/// The names are the variant's; `Legacy` keeps its three
/// numbers and writes them as the response gets them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Headers {
    /// No fields.
    #[default]
    None,
    /// `RateLimit-Policy` and `RateLimit`.
    Ietf {
        policy: HeaderValue,
        state: HeaderValue,
    },
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    Legacy {
        limit: u32,
        remaining: u32,
        reset: u64,
    },
}

impl Headers {
    /// Writes the fields into `map`: over any it has, or, with
    /// `keep_existing`, only those it lacks (a denial hook's own stay).
    pub(crate) fn write_to(self, map: &mut HeaderMap, keep_existing: bool) {
        let mut put = |name: HeaderName, value: HeaderValue| {
            if !keep_existing || !map.contains_key(&name) {
                map.insert(name, value);
            }
        };
        match self {
            Headers::None => {}
            Headers::Ietf { policy, state } => {
                put(RATELIMIT_POLICY, policy);
                put(RATELIMIT, state);
            }
            Headers::Legacy {
                limit,
                remaining,
                reset,
            } => {
                put(X_LIMIT, number_value(limit.into()));
                put(X_REMAINING, number_value(remaining.into()));
                put(X_RESET, number_value(reset));
            }
        }
    }

    /// The `i`-th value, in the order they are written.
    #[cfg(test)]
    pub(crate) fn value(&self, i: usize) -> Option<HeaderValue> {
        let mut map = HeaderMap::new();
        self.clone().write_to(&mut map, false);
        map.values().nth(i).cloned()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        *self == Headers::None
    }
}

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
    if policies.len() <= 1 {
        out.push_str("default");
        return;
    }
    /// A window's label: its value in the largest unit that divides it
    /// (from whole seconds and the nanoseconds past them: every response
    /// names each policy, and 128-bit divisions cost more than the rest of
    /// the item).
    fn label(w: Duration) -> (u128, &'static str) {
        let (secs, nanos) = (w.as_secs(), w.subsec_nanos());
        match (secs, nanos) {
            (s, 0) if s.is_multiple_of(3_600) => (u128::from(s / 3_600), "h"),
            (s, 0) if s.is_multiple_of(60) => (u128::from(s / 60), "m"),
            (s, 0) => (u128::from(s), "s"),
            (s, n) if n.is_multiple_of(1_000_000) => {
                (u128::from(s) * 1_000 + u128::from(n / 1_000_000), "ms")
            }
            _ => (w.as_nanos(), "ns"),
        }
    }
    let own = label(policies[i].window);
    out.push_str(itoa::Buffer::new().format(own.0));
    out.push_str(own.1);
    // Equal labels are equal windows (a label is its window, exactly).
    if policies[..i].iter().any(|p| p.window == policies[i].window) {
        out.push('-');
        out.push_str(itoa::Buffer::new().format(i));
    }
}

/// Builds the rate-limit headers for `policies`, reporting on policy
/// `which` (the one closest to exhaustion, or the one that denied).
/// `wait` is the time until `remaining` next grows (see [`Verdict::wait`]);
/// the legacy reset is the time until a request can be admitted: 0 while
/// `remaining > 0`, else `wait`.
#[cfg(test)]
pub(crate) fn rate_limit_headers(
    style: HeaderStyle,
    policies: &[Policy],
    which: usize,
    remaining: u32,
    wait: Duration,
    per_policy: Option<&PolicyStates>,
) -> Headers {
    let list = PolicyList::new(policies);
    list_headers(style, &list, None, which, remaining, wait, per_policy)
}

/// [`rate_limit_headers`], with the values the layer wrote once for its
/// own policies when `policies` are those (`written`, see [`Written`]):
/// per response only a `RateLimit` value the layer has not written is,
/// with integers through `itoa` (no `core::fmt` on the hot path).
pub(super) fn list_headers(
    style: HeaderStyle,
    policies: &PolicyList,
    written: Option<&Written>,
    which: usize,
    remaining: u32,
    wait: Duration,
    per_policy: Option<&PolicyStates>,
) -> Headers {
    let which = which.min(policies.len().saturating_sub(1));
    let Some(reported) = policies.get(which) else {
        return Headers::None;
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
            // `"1s";r=4;t=1` (and `"1s";q=10;w=1, "1m";q=100;w=60` when
            // the layer has no value written for the policies).
            let item = |state: &mut String, i: usize, r: u32, t: Duration| {
                write_item(state, |out| policies.write_name(out, i), r, ceil_seconds(t));
            };
            // One item with nothing remaining (every denial's, and the
            // last admission's in a window): the layer's, if it wrote it.
            let spent = match (every, written) {
                (None, Some(written)) if remaining == 0 => written.spent(which, ceil_seconds(wait)),
                _ => None,
            };
            let state = match spent {
                Some(value) => Ok(value),
                None => scratch_value(|state| match every {
                    Some(states) => {
                        for (i, &(r, t)) in states.iter().enumerate() {
                            if i > 0 {
                                state.push_str(", ");
                            }
                            item(state, i, r, t);
                        }
                    }
                    None => item(state, which, remaining, wait),
                }),
            };
            // Only digits, unit letters and fixed ASCII: always valid
            // header values.
            let policy = match written {
                Some(written) => Ok(written.policy.clone()),
                None => scratch_value(|text| write_policy_text(text, policies)),
            };
            match (policy, state) {
                (Ok(policy), Ok(state)) => Headers::Ietf { policy, state },
                _ => Headers::None,
            }
        }
        HeaderStyle::Legacy => {
            let reset = if remaining > 0 { Duration::ZERO } else { wait };
            Headers::Legacy {
                limit: reported.limit,
                remaining,
                reset: ceil_seconds(reset),
            }
        }
        HeaderStyle::None => Headers::None,
    }
}

/// One `RateLimit` item, `"name";r=R;t=T`, into `out` (`name` writes the
/// policy's name).
fn write_item(out: &mut String, name: impl FnOnce(&mut String), r: u32, t: u64) {
    out.push('"');
    name(out);
    out.push_str("\";r=");
    out.push_str(itoa::Buffer::new().format(r));
    out.push_str(";t=");
    out.push_str(itoa::Buffer::new().format(t));
}

/// A header value written by `write` into this thread's scratch buffer and
/// copied out once: one allocation of the value's exact size (a `String`
/// of its own handed over as the value's bytes would be a second: `Bytes`
/// keeps a spare capacity behind a separately allocated header).
fn scratch_value(
    write: impl FnOnce(&mut String),
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    thread_local! {
        static SCRATCH: core::cell::RefCell<String> = const { core::cell::RefCell::new(String::new()) };
    }
    SCRATCH.with_borrow_mut(|text| {
        text.clear();
        write(text);
        HeaderValue::from_str(text)
    })
}

/// The `RateLimit-Policy` value of `policies`:
/// `"1s";q=10;w=1, "1m";q=100;w=60`.
fn policy_text(policies: &[Policy]) -> String {
    let mut text = String::with_capacity(24 * policies.len());
    write_policy_text(&mut text, policies);
    text
}

/// [`policy_text`], written into `text`.
fn write_policy_text(text: &mut String, policies: &[Policy]) {
    for (i, p) in policies.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push('"');
        write_policy_name(text, policies, i);
        text.push_str("\";q=");
        text.push_str(itoa::Buffer::new().format(p.limit));
        text.push_str(";w=");
        text.push_str(itoa::Buffer::new().format(ceil_seconds(p.window)));
    }
}

/// The `RateLimit-Policy` value of a layer's policies, written once per
/// configuration and **interned**: each distinct value is leaked once for
/// the life of the process (a few dozen bytes per distinct set of policies
/// a layer is ever configured with), so the value each response carries is
/// a static one — no allocation, no copy, and no reference count that every
/// request on every core would write.
pub(super) fn interned_policy_value(policies: &[Policy]) -> HeaderValue {
    // Digits, unit letters and fixed visible ASCII: a valid value.
    HeaderValue::from_static(intern(policy_text(policies)))
}

/// `text`, leaked once for the life of the process and shared by every
/// caller that interns the same text (see [`interned_policy_value`]).
fn intern(text: String) -> &'static str {
    static INTERNED: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut interned = INTERNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match interned.get(text.as_str()) {
        Some(&value) => value,
        None => {
            let value: &'static str = Box::leak(text.into_boxed_str());
            interned.insert(value);
            value
        }
    }
}

/// How many seconds [`Written`] writes each policy's spent `RateLimit`
/// item for: `t = 0 ..= 60` (every wait of a window up to a minute, the
/// last minute of a longer one).
const SPENT_SECONDS: u64 = 60;

/// The values a layer writes once per configuration of its own policies,
/// so that a response copies them (each a static string: no allocation,
/// no copy of the text, no reference count written by every core):
/// `RateLimit-Policy`, and each policy's `RateLimit` item with nothing
/// remaining — `"1m";r=0;t=T` for `T` up to [`SPENT_SECONDS`], the item
/// of every denial and of a window's last admission. Interned as
/// `RateLimit-Policy` is ([`intern`]), and so is each list of policy names'
/// table of items: each is leaked once for the life of the process (61
/// items of about 20 bytes per policy name, and names are windows).
///
/// A spent item past the table (a longer window's wait) is written when
/// asked for and kept as this thread's last one ([`LAST_SPENT`]): a
/// client refused again and again within a second is answered with the
/// value written for the first refusal, a reference count copied.
#[derive(Clone, Debug)]
pub(super) struct Written {
    /// The `RateLimit-Policy` value ([`interned_policy_value`]).
    pub(super) policy: HeaderValue,
    /// Policy `i`'s spent item at `t` seconds, at `i * (SPENT_SECONDS +
    /// 1) + t`: values of interned text, checked once when written.
    spent: &'static [HeaderValue],
    /// The policies' names, in order (interned with the table).
    names: &'static [&'static str],
}

/// A spent item past [`SPENT_SECONDS`]: its table's address (one per
/// list of policy names, never freed), the policy's index, `t`.
type SpentKey = (usize, usize, u64);

thread_local! {
    /// The last spent item this thread wrote past its table, and which
    /// ([`Written::spent`]).
    static LAST_SPENT: core::cell::RefCell<Option<(SpentKey, HeaderValue)>> =
        const { core::cell::RefCell::new(None) };
}

impl Written {
    /// The values of a layer's own policies (`list`, named).
    pub(super) fn of(list: &PolicyList) -> Written {
        type Table = (&'static [HeaderValue], &'static [&'static str]);
        static TABLES: std::sync::Mutex<std::collections::BTreeMap<Vec<&'static str>, Table>> =
            std::sync::Mutex::new(std::collections::BTreeMap::new());
        let names: Vec<&'static str> = (0..list.len())
            .map(|i| list.name(i).unwrap_or_else(|| intern(policy_name(list, i))))
            .collect();
        let mut tables = TABLES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (spent, names) = *tables.entry(names).or_insert_with_key(|names| {
            let mut spent = Vec::with_capacity(names.len() * (SPENT_SECONDS as usize + 1));
            for name in names {
                for t in 0..=SPENT_SECONDS {
                    // A window's label, digits and fixed ASCII: a valid
                    // value.
                    let mut text = String::new();
                    write_item(&mut text, |out| out.push_str(name), 0, t);
                    spent.push(HeaderValue::from_static(intern(text)));
                }
            }
            let spent: &'static [HeaderValue] = Box::leak(spent.into_boxed_slice());
            let names: &'static [&'static str] = Box::leak(names.clone().into_boxed_slice());
            (spent, names)
        });
        Written {
            policy: interned_policy_value(list),
            spent,
            names,
        }
    }

    /// Where its table of items lies (one per list of policy names).
    #[cfg(test)]
    pub(super) fn table(&self) -> *const HeaderValue {
        self.spent.as_ptr()
    }

    /// Policy `i`'s `RateLimit` item with nothing remaining, `t` seconds
    /// until its quota grows: from the table, or past it this thread's
    /// last such item if it is the one asked for, else written now and
    /// kept as the last; `None` for a policy the layer does not have.
    fn spent(&self, i: usize, t: u64) -> Option<HeaderValue> {
        if t <= SPENT_SECONDS {
            // `t <= SPENT_SECONDS`: no truncation.
            return self
                .spent
                .get(i * (SPENT_SECONDS as usize + 1) + t as usize)
                .cloned();
        }
        let name = self.names.get(i)?;
        let key = (self.spent.as_ptr() as usize, i, t);
        LAST_SPENT.with_borrow_mut(|last| match last {
            Some((at, value)) if *at == key => Some(value.clone()),
            _ => {
                let value =
                    scratch_value(|text| write_item(text, |out| out.push_str(name), 0, t)).ok()?;
                *last = Some((key, value.clone()));
                Some(value)
            }
        })
    }
}

/// The largest number [`number_value`] takes from its table: an hour in
/// seconds (`Retry-After`, `X-RateLimit-Reset`; and most limits and
/// remainders of `X-RateLimit-Limit`, `-Remaining`).
const TABLED: u64 = 3_600;

/// How many digits `n` has (`n <= 9_999`).
const fn digits_of(n: u64) -> usize {
    match n {
        0..=9 => 1,
        10..=99 => 2,
        100..=999 => 3,
        _ => 4,
    }
}

/// Where `n`'s digits start in [`NUMBERS`]: after every shorter number's.
const fn number_at(n: u64) -> usize {
    let digits = digits_of(n);
    // `n <= TABLED`: no truncation.
    let n = n as usize;
    match digits {
        1 => n,
        2 => 10 + 2 * (n - 10),
        3 => 190 + 3 * (n - 100),
        _ => 2_890 + 4 * (n - 1_000),
    }
}

/// The decimal digits of `0 ..= TABLED`, one number after another
/// (`"012…99100…3600"`), written when compiled.
static NUMBERS: [u8; number_at(TABLED) + digits_of(TABLED)] = {
    let mut out = [0; number_at(TABLED) + digits_of(TABLED)];
    let mut n = 0;
    while n <= TABLED {
        let (at, mut rest, mut i) = (number_at(n), n, digits_of(n));
        while i > 0 {
            i -= 1;
            out[at + i] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        n += 1;
    }
    out
};

/// `n` as a header value: a static slice of [`NUMBERS`] up to
/// [`TABLED`] (no allocation: http's `HeaderValue::from(u64)` allocates
/// its digits), written out above it.
pub(super) fn number_value(n: u64) -> HeaderValue {
    if n <= TABLED {
        let at = number_at(n);
        if let Ok(text) = core::str::from_utf8(&NUMBERS[at..at + digits_of(n)]) {
            return HeaderValue::from_static(text);
        }
    }
    HeaderValue::from(n)
}

/// Up to [`MAX_POLICIES`](crate::MAX_POLICIES) policies, inline: each
/// response copies them instead of sharing a reference count that every
/// request on every core would write.
#[derive(Clone, Copy)]
pub(super) struct PolicyList {
    len: u8,
    items: [Policy; crate::MAX_POLICIES],
    /// Each policy's name ([`policy_name`]), interned, for a layer's own
    /// list (written once per configuration: each response's `RateLimit`
    /// items then copy them); `None` for a list made per request (a key's
    /// own quota), whose names are written as its items are.
    names: Option<[&'static str; crate::MAX_POLICIES]>,
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
            names: None,
        }
    }

    /// [`new`](Self::new), with each policy's name interned (a layer's
    /// list, once per configuration).
    pub(super) fn named(policies: &[Policy]) -> Self {
        let mut list = PolicyList::new(policies);
        let mut names = [""; crate::MAX_POLICIES];
        for (i, name) in names.iter_mut().enumerate().take(list.len()) {
            *name = intern(policy_name(&list, i));
        }
        list.names = Some(names);
        list
    }

    /// Policy `i`'s interned name, if this list has them (a layer's).
    pub(super) fn name(&self, i: usize) -> Option<&'static str> {
        self.names.filter(|_| i < self.len()).map(|names| names[i])
    }

    /// Writes policy `i`'s name into `out`.
    #[inline]
    pub(super) fn write_name(&self, out: &mut String, i: usize) {
        match self.names {
            Some(names) => out.push_str(names[i]),
            None => write_policy_name(out, self, i),
        }
    }
}

impl core::ops::Deref for PolicyList {
    type Target = [Policy];
    fn deref(&self) -> &[Policy] {
        &self.items[..usize::from(self.len)]
    }
}
