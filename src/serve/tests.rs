//! Any request a client can send is answered — a status per
//! descriptor, or `INVALID_ARGUMENT` — never a panic, and no status
//! shows more room than its limit.

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};

use super::decide::*;
use super::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::google::protobuf::UInt64Value;
use proptest::prelude::*;

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 2}
      - {window: 90s, requests_per_unit: 4, name: burst}
    descriptors:
      - key: path
        value: /free
        rate_limit: {unlimited: true}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /a*
    rate_limit: {unit: second, requests_per_unit: 2, replaces: [{name: burst}]}
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: files
    value: f*s
    share_threshold: true
    quota_mode: true
    descriptors:
      - key: client
        rate_limit: {unit: second, requests_per_unit: 2}
"#;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("client".to_string()),
        Just("tenant".to_string()),
        Just("path".to_string()),
        Just("/free".to_string()),
        Just("canary".to_string()),
        Just("blocked".to_string()),
        Just("/ab".to_string()),
        Just("quota".to_string()),
        Just("files".to_string()),
        Just("fs".to_string()),
        Just("f/s".to_string()),
        Just("a\u{1f}\u{0}9/Second".to_string()),
        ".{0,6}",
    ]
}

fn descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    (
        proptest::collection::vec((text(), text()), 0..3),
        proptest::option::of((prop_oneof![0..8u32, any::<u32>()], -1..9i32)),
        proptest::option::of(prop_oneof![0..6u64, any::<u64>()]),
        any::<bool>(),
    )
        .prop_map(
            |(entries, limit, hits, is_negative_hits)| RateLimitDescriptor {
                entries: entries
                    .into_iter()
                    .map(|(key, value)| Entry { key, value })
                    .collect(),
                limit: limit.map(|(requests_per_unit, unit)| RateLimitOverride {
                    requests_per_unit,
                    unit,
                }),
                hits_addend: hits.map(|value| UInt64Value { value }),
                is_negative_hits,
            },
        )
}

/// A descriptor the configuration limits in quota mode (often, so
/// that requests hold several, some over and some not).
fn quota_descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    (
        prop_oneof![
            Just(vec![("quota", "a")]),
            Just(vec![("quota", "b")]),
            Just(vec![("files", "fs"), ("client", "c")]),
            Just(vec![("files", "f/s"), ("client", "c")]),
        ],
        proptest::option::of(0..3u64),
    )
        .prop_map(|(entries, hits)| RateLimitDescriptor {
            entries: entries
                .into_iter()
                .map(|(key, value)| Entry {
                    key: key.to_string(),
                    value: value.to_string(),
                })
                .collect(),
            hits_addend: hits.map(|value| UInt64Value { value }),
            ..Default::default()
        })
}

fn request() -> impl Strategy<Value = RateLimitRequest> {
    (
        prop_oneof![Just("edge".to_string()), Just(String::new()), text()],
        proptest::collection::vec(prop_oneof![descriptor(), quota_descriptor()], 0..4),
        prop_oneof![0..4u32, any::<u32>()],
    )
        .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
            domain,
            descriptors,
            hits_addend,
        })
}

#[test]
fn near_limit_is_upstreams_threshold() {
    for limit in 1..=1_000u32 {
        for remaining in 0..=limit {
            // At 0.8, as the metric counted before it had a ratio.
            let before = u64::from(remaining) * 5 < u64::from(limit);
            assert_eq!(
                near_limit(limit, remaining, 0.8),
                before,
                "{remaining} of {limit}"
            );
            // 0 counts every admission, 1 none.
            assert!(near_limit(limit, remaining, 0.0) == (remaining < limit));
            assert!(!near_limit(limit, remaining, 1.0));
        }
    }
    // Upstream's floor: at 0.7 of 3 the threshold is floor(2.1) = 2,
    // so 2 used is not near and 3 is.
    assert!(!near_limit(3, 1, 0.7));
    assert!(near_limit(3, 0, 0.7));
}

#[test]
fn the_headers_tell_the_descriptor_upstream_tells() {
    let limited = |remaining: u32| DescriptorStatus {
        current_limit: Some(RateLimit {
            requests_per_unit: 10,
            ..Default::default()
        }),
        limit_remaining: remaining,
        ..Default::default()
    };
    let unlimited = DescriptorStatus {
        limit_remaining: u32::MAX,
        ..Default::default()
    };
    let unmatched = DescriptorStatus::default();
    let fits = (false, false);
    // The first with the fewest remaining.
    let statuses = [limited(5), limited(2), unlimited.clone(), limited(2)];
    assert_eq!(closest(&statuses, &[fits; 4]), Some(1));
    // The last over its limit outside quota mode, even after one with
    // none left (a shadowed one) and one over in quota mode.
    let statuses = [limited(0), limited(0), limited(0), limited(0), limited(3)];
    let verdicts = [fits, (true, false), (true, false), (true, true), fits];
    assert_eq!(closest(&statuses, &verdicts), Some(2));
    // An over quota counts by what remains, like any other.
    let verdicts = [(true, true), (true, true), fits, fits, fits];
    assert_eq!(closest(&statuses, &verdicts), Some(0));
    // Nothing limited, nothing told.
    assert_eq!(closest(&[unlimited, unmatched], &[fits; 2]), None);
    // The values: the limit, what remains, whole seconds rounded up.
    let status = DescriptorStatus {
        duration_until_reset: Some(pb_duration(Duration::from_millis(1_200))),
        ..limited(4)
    };
    let names = HeaderNames {
        limit: "X-Limit".into(),
        ..HeaderNames::default()
    };
    let told: Vec<(String, String)> = names
        .values(&status)
        .into_iter()
        .map(|h| (h.key, h.value))
        .collect();
    let expected = [
        ("X-Limit", "10"),
        ("RateLimit-Remaining", "4"),
        ("RateLimit-Reset", "2"),
    ];
    assert_eq!(told, expected.map(|(k, v)| (k.to_string(), v.to_string())));
}

proptest! {
    #[test]
    fn any_request_is_answered(
        requests in proptest::collection::vec(request(), 1..6),
        (all_or_nothing, shadow_mode, quota_mode) in any::<(bool, bool, bool)>(),
        headers in any::<bool>(),
    ) {
        let (domain, rules) = config::parse(CONFIG).unwrap();
        let mut config = Config::default();
        config.domains.insert(domain.clone(), rules.clone());
        let mut oracle = Config::default();
        oracle.domains.insert(domain, rules);
        // Quota mode: every descriptor but an unlimited one under
        // `--quota-mode`, else a configured limit with `quota_mode`,
        // not overridden by the request.
        let in_quota_mode = |domain: &str, d: &RateLimitDescriptor| {
            let entries: Vec<(String, String)> =
                d.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
            let rule = oracle.matching(domain, &entries);
            let own = d.limit.is_some();
            if !own && rule.is_some_and(|rule| matches!(rule.limit, Limit::Unlimited)) {
                return false;
            }
            quota_mode
                || !own
                    && rule.is_some_and(|rule| {
                        rule.quota_mode
                            && matches!(rule.limit, Limit::Quota(..) | Limit::Blocked(..))
                    })
        };
        let modes = Modes { all_or_nothing, shadow_mode, quota_mode };
        let settings = Settings {
            modes,
            headers: headers.then(HeaderNames::default),
            ..Settings::default()
        };
        let service = Service::new(config, settings).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for request in &requests {
            match rt.block_on(service.decide(request)) {
                Ok(response) => {
                    prop_assert_eq!(response.statuses.len(), request.descriptors.len());
                    // Over if any descriptor not in quota mode is,
                    // or every one in quota mode is (one at least).
                    let (mut plain_over, mut quotas) = (false, Vec::new());
                    for (s, d) in response.statuses.iter().zip(&request.descriptors) {
                        let over = s.code == Code::OverLimit as i32;
                        if in_quota_mode(&request.domain, d) {
                            quotas.push(over);
                        } else {
                            plain_over |= over;
                        }
                    }
                    let over = plain_over || (!quotas.is_empty() && quotas.iter().all(|o| *o));
                    prop_assert_eq!(
                        response.overall_code == Code::OverLimit as i32,
                        over && !shadow_mode
                    );
                    // The headers: none unless asked for or with no
                    // limited descriptor; else a limit and reset of a
                    // descriptor with the remaining told, which is 0 if
                    // a descriptor outside quota mode is over, else the
                    // fewest of any limited one.
                    let limited: Vec<&DescriptorStatus> =
                        response.statuses.iter().filter(|s| s.current_limit.is_some()).collect();
                    let added = &response.response_headers_to_add;
                    if !headers || limited.is_empty() {
                        prop_assert!(added.is_empty(), "{:?}", added);
                    } else {
                        let value = |key: &str| {
                            let found = added.iter().find(|h| h.key == key);
                            found.map(|h| h.value.parse::<u64>().unwrap())
                        };
                        let (limit, remaining, reset) = (
                            value("RateLimit-Limit"),
                            value("RateLimit-Remaining"),
                            value("RateLimit-Reset"),
                        );
                        prop_assert_eq!(added.len(), 3);
                        let fewest = limited.iter().map(|s| s.limit_remaining).min().unwrap();
                        let told = if plain_over { 0 } else { fewest };
                        prop_assert_eq!(remaining, Some(u64::from(told)));
                        let seconds = |s: &DescriptorStatus| {
                            s.duration_until_reset.as_ref().map(|d| {
                                d.seconds as u64 + u64::from(d.nanos > 0)
                            })
                        };
                        prop_assert!(
                            limited.iter().any(|s| {
                                u64::from(s.limit_remaining) == u64::from(told)
                                    && limit == Some(u64::from(s.current_limit.as_ref().unwrap().requests_per_unit))
                                    && reset == seconds(s)
                            }),
                            "{:?} for {:?}", added, response.statuses
                        );
                    }
                    for s in &response.statuses {
                        if let Some(limit) = &s.current_limit {
                            prop_assert!(
                                s.limit_remaining <= limit.requests_per_unit,
                                "{:?} for {:?}", s, request
                            );
                        }
                    }
                }
                Err(status) => {
                    prop_assert_eq!(status.code(), tonic::Code::InvalidArgument, "{:?}", status);
                }
            }
        }
    }
}
