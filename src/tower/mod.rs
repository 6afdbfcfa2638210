//! A [`tower::Layer`](https://docs.rs/tower/latest/tower/trait.Layer.html) that rate-limits HTTP (and gRPC) requests per key and
//! answers `429 Too Many Requests` with exact `Retry-After` and IETF
//! `RateLimit` headers. Feature `tower`.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use slidelog::KeyedLimiter;
//! use slidelog::tower::{HeaderKey, RateLimitLayer};
//!
//! // 5 requests per 10 seconds per API key; a request without one is
//! // answered 400 (`.on_missing_key(..)` chooses otherwise, and
//! // `.fallback_key(..)` makes such requests share one key).
//! let limiter = Arc::new(KeyedLimiter::<String>::new(5, Duration::from_secs(10))?);
//! let layer = RateLimitLayer::new(limiter, HeaderKey::new("x-api-key"));
//! // axum: Router::new().route("/", get(handler)).layer(layer)
//! # let _ = layer;
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! # Reconfiguration
//!
//! A backend reconfigured at run time (`reconfigure`, `set_quota`) is
//! described by the configuration that **decided** each response: the
//! backend's [`Verdict::decided_by`] names its policies, and the response's
//! `RateLimit-Policy` field is theirs. A keyed limiter names the state
//! that decided (a key the walk has not moved yet is named by its old
//! policies), a [`Limiter`](crate::Limiter) the generation that answered,
//! a [`SlidingCounter`](crate::SlidingCounter) the limit it read, the
//! Redis limiter the rules its script call was given. A backend that does
//! not say ([`DecidedBy::Unsaid`]: a custom one, a `dyn RateLimit`) is
//! described by the policies the layer reads after its decision if they
//! fit it (the named policy is one of them and `remaining` within its
//! limit), else by those it read before; if neither fits it is sent
//! without `RateLimit` fields rather than with another configuration's
//! (`tests/tower_reconfigure.rs`).
//!
//! # One limit for a whole app: wrap the router
//!
//! axum's `Router::layer` boxes every route's layered service, and on
//! each request clones that box and boxes its future, whatever the layer
//! does: a layer that does nothing, mounted that way, costs a trivial
//! handler 883 instructions a request, 14% of its own (BENCHMARKS.md,
//! "Over HTTP"). Where one limit covers the whole app, wrap
//! the router as one service instead: the layer then runs once per
//! request, with no boxing, and limits every request the router answers
//! (unmatched paths too). With [`inner_body`](RateLimitLayer::inner_body)
//! the wrapped router's responses are still axum's, so `axum::serve`
//! takes it as it is. Call `with_state(())` on the router first, as
//! `axum::serve(listener, router)` does for a bare router and as axum
//! advises for a router used as a service: its handlers then become routes
//! once, where a router wrapped as built makes them again on every
//! request:
//!
//! ```no_run
//! use std::net::{IpAddr, SocketAddr};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use axum::{Router, ServiceExt, extract::Request, routing::get};
//! use slidelog::KeyedLimiter;
//! use slidelog::tower::{PeerIp, RateLimitLayer};
//! use tower::Layer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = Arc::new(KeyedLimiter::<IpAddr>::new(100, Duration::from_secs(60))?);
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .with_state(()); // handlers made routes once, not per request
//! let limited = RateLimitLayer::new(limiter, PeerIp::new()).inner_body().layer(app);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // PeerIp reads the peer's address from axum's `ConnectInfo`.
//! let service = ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(limited);
//! axum::serve(listener, service).await?;
//! # Ok(())
//! # }
//! ```

// Where each part lives (a map for readers of the source; the module's
// documentation above is the user's):
//
// | file | what |
// |---|---|
// | `layer.rs` | `RateLimitLayer`: its options and builder |
// | `service.rs` | `RateLimitService` and its `ResponseFuture`: one request's way |
// | `describe.rs` | which policies describe a response; an admission's headers |
// | `headers.rs` | the `RateLimit` / `X-RateLimit` fields |
// | `deny.rs` | a denial's response, its hook, its event and metric; `Style` |
// | `extract.rs` | key extractors |
// | `peer.rs` | the peer address behind trusted proxies |
// | `body.rs` | how responses carry their bodies |
mod body;
mod deny;
mod describe;
mod extract;
mod headers;
mod layer;
mod peer;
mod service;

/// The backend a layer asks, and its answer: the crate's own
/// ([`crate::Backend`]), named here too.
pub use crate::backend::{Backend, Verdict};
pub use crate::decision::{DecidedBy, PolicySet, PolicyStates};
pub use body::{BodyMode, InnerBody, RateLimitBody, WrapBody};
pub use deny::{Denial, DenyStyle, MissingKey};
pub use extract::{DEFAULT_MAX_KEY_LEN, GlobalKey, HeaderKey, KeyExtractor, KeyFn};
pub use headers::{HeaderStyle, ceil_seconds, policy_name};
/// A network of trusted proxies for [`PeerIp::trusted_network`] (the
/// `ipnet` crate's type): `"10.0.0.0/8".parse()`.
pub use ipnet::IpNet;
pub use layer::RateLimitLayer;
pub use peer::{ForwardedHeader, MAX_TRUSTED_NETWORKS, PeerIp};
pub use service::{RateLimitService, ResponseFuture};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use headers::rate_limit_headers;
    use http::HeaderValue;
    use proptest::prelude::*;
    use std::time::Duration;

    #[test]
    fn ietf_headers() {
        let h = rate_limit_headers(
            HeaderStyle::Ietf,
            &[Policy::new(5, Duration::from_secs(10))],
            0,
            4,
            Duration::from_millis(9_500),
            None,
        );
        assert_eq!(h.value(0).unwrap(), "\"default\";q=5;w=10");
        assert_eq!(h.value(1).unwrap(), "\"default\";r=4;t=10");
        let legacy = rate_limit_headers(
            HeaderStyle::Legacy,
            &[Policy::new(5, Duration::from_secs(10))],
            0,
            4,
            Duration::from_millis(9_500),
            None,
        );
        assert_eq!(legacy.value(2).unwrap(), "0", "a request fits now");
        let h = rate_limit_headers(
            HeaderStyle::Legacy,
            &[Policy::new(5, Duration::from_millis(1500))],
            0,
            0,
            Duration::from_millis(300),
            None,
        );
        assert_eq!(h.value(2).unwrap(), "1");
        assert!(
            rate_limit_headers(
                HeaderStyle::None,
                &[Policy::new(5, Duration::from_secs(1))],
                0,
                0,
                Duration::ZERO,
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn one_header_item_per_policy() {
        let policies = [
            Policy::new(10, Duration::from_secs(1)),
            Policy::new(100, Duration::from_secs(60)),
        ];
        let h = rate_limit_headers(
            HeaderStyle::Ietf,
            &policies,
            1,
            7,
            Duration::from_millis(1500),
            None,
        );
        assert_eq!(h.value(0).unwrap(), "\"1s\";q=10;w=1, \"1m\";q=100;w=60");
        assert_eq!(h.value(1).unwrap(), "\"1m\";r=7;t=2");
        let legacy = rate_limit_headers(HeaderStyle::Legacy, &policies, 1, 7, Duration::ZERO, None);
        assert_eq!(legacy.value(0).unwrap(), "100");
    }

    /// The layer's `RateLimit-Policy` value is written once per distinct
    /// policy list and shared as a static string.
    #[test]
    fn policy_values_are_interned() {
        let a = [Policy::new(5, Duration::from_secs(10))];
        let b = [
            Policy::new(10, Duration::from_secs(1)),
            Policy::new(100, Duration::from_secs(60)),
        ];
        let (a1, a2) = (
            headers::interned_policy_value(&a),
            headers::interned_policy_value(&a),
        );
        assert_eq!(a1, "\"default\";q=5;w=10");
        assert_eq!(a1.as_bytes().as_ptr(), a2.as_bytes().as_ptr(), "one copy");
        let b1 = headers::interned_policy_value(&b);
        assert_eq!(b1, "\"1s\";q=10;w=1, \"1m\";q=100;w=60");
        assert_ne!(a1.as_bytes().as_ptr(), b1.as_bytes().as_ptr());
        // The same text as a list written per response (a key's own quota).
        let written = rate_limit_headers(HeaderStyle::Ietf, &b, 0, 3, Duration::ZERO, None);
        assert_eq!(written.value(0), Some(b1));
        // A layer's list names its policies once, from the same strings; a
        // list made per request writes them, and its items read alike.
        let c = [
            Policy::new(10, Duration::from_secs(1)),
            Policy::new(100, Duration::from_secs(60)),
            Policy::new(7, Duration::from_secs(60)),
        ];
        let (named, again) = (
            headers::PolicyList::named(&c),
            headers::PolicyList::named(&c),
        );
        let states = PolicyStates::new(&[
            (1, Duration::ZERO),
            (2, Duration::ZERO),
            (3, Duration::ZERO),
        ]);
        let mut items = Vec::new();
        for list in [named, headers::PolicyList::new(&c)] {
            let h = headers::list_headers(
                HeaderStyle::Ietf,
                &list,
                None,
                0,
                0,
                Duration::ZERO,
                Some(&states),
            );
            items.push(h.value(1));
        }
        assert_eq!(
            items[0].as_ref().unwrap(),
            "\"1s\";r=1;t=0, \"1m\";r=2;t=0, \"1m-2\";r=3;t=0"
        );
        assert_eq!(items[0], items[1]);
        let mut written = [String::new(), String::new()];
        named.write_name(&mut written[0], 2);
        again.write_name(&mut written[1], 2);
        assert_eq!(written[0], policy_name(&c, 2));
        assert_eq!(written[0], written[1]);
    }

    /// Numbers up to an hour are static slices of one table, and read as
    /// http's own conversion writes them; larger ones are written out.
    #[test]
    fn numbers_are_static_up_to_an_hour() {
        for n in (0..=3_700).chain([9_999, 10_000, 86_400, u64::MAX]) {
            let value = headers::number_value(n);
            assert_eq!(value, HeaderValue::from(n), "{n}");
            let again = headers::number_value(n);
            let shared = value.as_bytes().as_ptr() == again.as_bytes().as_ptr();
            assert_eq!(shared, n <= 3_600, "{n}: one static copy up to an hour");
        }
    }

    /// A layer's spent `RateLimit` items (nothing remaining, up to a
    /// minute to wait) are written once and read as those written per
    /// response; the rest are written per response.
    #[test]
    fn spent_items_are_written_once() {
        let one = [Policy::new(5, Duration::from_secs(3_600))];
        let three = [
            Policy::new(10, Duration::from_secs(1)),
            Policy::new(100, Duration::from_secs(60)),
            Policy::new(7, Duration::from_secs(60)),
        ];
        for (policies, style) in [
            (&one[..], HeaderStyle::Ietf),
            (&three[..], HeaderStyle::IetfClosest),
        ] {
            let named = headers::PolicyList::named(policies);
            let written = headers::Written::of(&named);
            assert_eq!(
                written.policy,
                headers::interned_policy_value(policies),
                "the layer's `RateLimit-Policy`"
            );
            // A second layer of the same policies shares the table.
            let again = headers::Written::of(&headers::PolicyList::named(policies));
            assert_eq!(
                written.table(),
                again.table(),
                "one table per list of names"
            );
            for which in 0..policies.len() {
                for (remaining, millis) in [
                    (0, 0),
                    (0, 300),
                    (0, 59_001),
                    (0, 60_000),
                    (0, 60_001),
                    (1, 2_000),
                    (0, 3_600_000),
                ] {
                    let wait = Duration::from_millis(millis);
                    let write = |list: &headers::PolicyList, written| {
                        headers::list_headers(style, list, written, which, remaining, wait, None)
                    };
                    let (a, b) = (write(&named, Some(&written)), write(&named, Some(&written)));
                    let fresh = write(&headers::PolicyList::new(policies), None);
                    assert_eq!(a, fresh, "{which} {remaining} {millis}");
                    let (a, b) = (a.value(1).unwrap(), b.value(1).unwrap());
                    let shared = a.as_bytes().as_ptr() == b.as_bytes().as_ptr();
                    // Up to a minute from the table, past it the
                    // thread's last item: the second write copies the
                    // first's either way.
                    assert_eq!(
                        shared,
                        remaining == 0,
                        "{which} {remaining} {millis}: written once?"
                    );
                }
            }
            // Past the table the last item is kept per table, policy and
            // `t`: another of any of them is written anew, and right.
            let last = policies.len() - 1;
            let cases = [
                (last, 120_000),
                (last, 121_000),
                (0, 121_000),
                (last, 121_000),
            ];
            for (which, millis) in cases {
                let wait = Duration::from_millis(millis);
                let got =
                    headers::list_headers(style, &named, Some(&written), which, 0, wait, None);
                let fresh = headers::list_headers(
                    style,
                    &headers::PolicyList::new(policies),
                    None,
                    which,
                    0,
                    wait,
                    None,
                );
                assert_eq!(got, fresh, "{which} {millis}");
            }
        }
        // And per table: another list's policy 0 at the same `t` is its own.
        for policies in [&one[..], &three[..], &one[..]] {
            let named = headers::PolicyList::named(policies);
            let written = headers::Written::of(&named);
            let wait = Duration::from_secs(300);
            let write = |list: &headers::PolicyList, written| {
                headers::list_headers(HeaderStyle::Ietf, list, written, 0, 0, wait, None)
            };
            let fresh = write(&headers::PolicyList::new(policies), None);
            assert_eq!(write(&named, Some(&written)), fresh, "{policies:?}");
        }
        // Every policy's item at once (several policies' states): written
        // per response, as before.
        let named = headers::PolicyList::named(&three);
        let written = headers::Written::of(&named);
        let one_table = headers::Written::of(&headers::PolicyList::named(&one));
        assert_ne!(
            written.table(),
            one_table.table(),
            "other names, another table"
        );
        let states = PolicyStates::new(&[
            (0, Duration::from_secs(1)),
            (5, Duration::ZERO),
            (0, Duration::from_secs(30)),
        ]);
        let h = headers::list_headers(
            HeaderStyle::Ietf,
            &named,
            Some(&written),
            0,
            0,
            Duration::from_secs(1),
            Some(&states),
        );
        assert_eq!(
            h.value(1).unwrap(),
            "\"1s\";r=0;t=1, \"1m\";r=5;t=0, \"1m-2\";r=0;t=30"
        );
    }

    proptest! {
        /// Malformed, huge or non-UTF-8 headers: a key or the fallback,
        /// never a panic.
        #[test]
        fn extractors_never_panic(
            xff in prop::collection::vec(any::<u8>(), 0..300),
            fwd in "\\PC{0,200}",
            api in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut builder = http::Request::builder();
            if let Ok(v) = HeaderValue::from_bytes(&xff) { builder = builder.header("x-forwarded-for", v); }
            if let Ok(v) = HeaderValue::from_str(&fwd) { builder = builder.header("forwarded", v); }
            if let Ok(v) = HeaderValue::from_bytes(&api) { builder = builder.header("x-api-key", v); }
            let mut request = builder.body(()).unwrap();
            request.extensions_mut().insert(std::net::SocketAddr::from(([10, 0, 0, 1], 80)));
            for header in [ForwardedHeader::XForwardedFor, ForwardedHeader::Forwarded, ForwardedHeader::XRealIp] {
                for hops in [0, 1, 2, 255] {
                    let peer_ip = PeerIp::new().forwarded_by(header).trusted_hops(hops);
                    prop_assert!(peer_ip.extract(&request).is_some());
                    let peer_ip = peer_ip.trusted_network("0.0.0.0/0".parse().unwrap());
                    prop_assert!(peer_ip.extract(&request).is_some());
                }
            }
            let _ = HeaderKey::new("x-api-key").extract(&request);
        }

        /// A policy's name is its window in the largest unit that divides
        /// it (the definition, on the window's 128-bit nanoseconds), with
        /// `-i` when an earlier policy has the same label; whatever the
        /// windows, and never a panic.
        #[test]
        fn policy_names_are_the_windows_largest_unit(
            windows in prop::collection::vec(
                prop_oneof![
                    (0u64..50, prop::sample::select(vec![1u64, 1_000_000, 1_000_000_000, 60_000_000_000, 3_600_000_000_000]))
                        .prop_map(|(k, unit)| Duration::from_nanos(k * unit)),
                    (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
                    any::<u64>().prop_map(Duration::from_nanos),
                ],
                2..5,
            ),
        ) {
            fn label(w: Duration) -> String {
                const S: u128 = 1_000_000_000;
                let ns = w.as_nanos();
                let (value, unit) = [(3_600 * S, "h"), (60 * S, "m"), (S, "s"), (1_000_000, "ms")]
                    .into_iter()
                    .find(|&(unit, _)| ns.is_multiple_of(unit))
                    .map_or((ns, "ns"), |(unit, name)| (ns / unit, name));
                format!("{value}{unit}")
            }
            let policies: Vec<Policy> = windows.iter().map(|&w| Policy::new(1, w)).collect();
            for (i, &w) in windows.iter().enumerate() {
                let own = label(w);
                let expected = if windows[..i].iter().any(|&e| label(e) == own) {
                    format!("{own}-{i}")
                } else {
                    own
                };
                prop_assert_eq!(policy_name(&policies, i), expected);
            }
        }

        /// Header formatting always yields valid header values.
        #[test]
        fn headers_always_valid(q in any::<u32>(), r in any::<u32>(), w in any::<u64>(), t in any::<u64>()) {
            for style in [HeaderStyle::Ietf, HeaderStyle::Legacy] {
                let h = rate_limit_headers(style, &[Policy::new(q, Duration::from_nanos(w))], 0, r, Duration::from_nanos(t), None);
                prop_assert!(!h.is_empty());
            }
            prop_assert!(ceil_seconds(Duration::from_nanos(t)) * 1_000_000_000 >= t);
        }
    }
}
