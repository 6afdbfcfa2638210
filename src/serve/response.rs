//! Building an answer: the `RateLimit-*` headers, dynamic metadata and
//! the protobuf forms of units and durations.

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, rate_limit::Unit as PbUnit,
};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};

use super::*;

impl HeaderNames {
    /// The three headers for `status`: its limit, what remains, and its
    /// `duration_until_reset` in whole seconds, rounded up (a wait of
    /// 0.2 s is 1: a client that waits the seconds told finds the room).
    pub(super) fn values(&self, status: &DescriptorStatus) -> Vec<HeaderValue> {
        let limit = status
            .current_limit
            .as_ref()
            .map_or(0, |l| l.requests_per_unit);
        let reset = status.duration_until_reset.as_ref().map_or(0, |d| {
            let whole = u64::try_from(d.seconds).unwrap_or(0);
            whole + u64::from(d.nanos > 0)
        });
        [
            (&self.limit, u64::from(limit)),
            (&self.remaining, u64::from(status.limit_remaining)),
            (&self.reset, reset),
        ]
        .into_iter()
        .map(|(key, value)| HeaderValue {
            key: key.clone(),
            value: value.to_string(),
            ..Default::default()
        })
        .collect()
    }
}

/// The descriptor whose status the `RateLimit-*` headers report, chosen as
/// envoyproxy/ratelimit chooses it, from each status and its verdict
/// `(over, in quota mode)`: the last one over its limit that is not in
/// quota mode (it is why the request is refused); else, among those with
/// a limit (a `current_limit`), the first with the fewest remaining.
/// `None` if no descriptor is limited.
pub(super) fn closest(statuses: &[DescriptorStatus], verdicts: &[(bool, bool)]) -> Option<usize> {
    let mut chosen = None;
    let mut least = u32::MAX;
    for (i, (status, &(over, quota_mode))) in statuses.iter().zip(verdicts).enumerate() {
        if status.current_limit.is_some() && status.limit_remaining < least {
            (chosen, least) = (Some(i), status.limit_remaining);
        }
        if over && !quota_mode {
            (chosen, least) = (Some(i), 0);
        }
    }
    chosen
}

/// The response's dynamic metadata, as envoyproxy/ratelimit builds it:
/// the `domain`; each descriptor's `entries` (`key=value`), its own
/// `limit` (in protobuf's text form) and `hitsAddend` where given; the
/// request's `hitsAddend` if not 0; and `metadata`, the configured
/// `metadata` of every descriptor that passed (answered OK, and limited
/// or unmatched, not unlimited), merged (mappings merged key by key, the
/// first descriptor's value kept otherwise).
pub(super) fn dynamic_metadata(
    request: &RateLimitRequest,
    matched: &[Option<Matched<'_>>],
    statuses: &[DescriptorStatus],
) -> Struct {
    use envoy_types::pb::google::protobuf::ListValue;
    let string = |s: String| Value {
        kind: Some(Kind::StringValue(s)),
    };
    let number = |n: f64| Value {
        kind: Some(Kind::NumberValue(n)),
    };
    let object = |fields: HashMap<String, Value>| Value {
        kind: Some(Kind::StructValue(Struct { fields })),
    };
    let list = |values: Vec<Value>| Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    };
    let descriptors = request.descriptors.iter().map(|d| {
        let mut fields = HashMap::new();
        let entries = d.entries.iter();
        fields.insert(
            "entries".into(),
            list(
                entries
                    .map(|e| string(format!("{}={}", e.key, e.value)))
                    .collect(),
            ),
        );
        if let Some(limit) = &d.limit {
            let unit = envoy_types::pb::envoy::r#type::v3::RateLimitUnit::try_from(limit.unit)
                .map_or("UNKNOWN", |unit| unit.as_str_name());
            fields.insert(
                "limit".into(),
                string(format!(
                    "requests_per_unit:{} unit:{unit}",
                    limit.requests_per_unit
                )),
            );
        }
        if let Some(hits) = &d.hits_addend {
            fields.insert("hitsAddend".into(), number(hits.value as f64));
        }
        object(fields)
    });
    let mut fields = HashMap::new();
    fields.insert("domain".into(), string(request.domain.clone()));
    fields.insert("descriptors".into(), list(descriptors.collect()));
    if request.hits_addend != 0 {
        fields.insert("hitsAddend".into(), number(f64::from(request.hits_addend)));
    }
    let mut passed = Struct::default();
    for (m, status) in matched.iter().zip(statuses) {
        let rule = m.as_ref().and_then(|m| m.rule);
        if status.code == Code::Ok as i32
            && let Some(rule) = rule
            && !matches!(rule.limit, Limit::Unlimited)
            && let Some(metadata) = &rule.metadata
        {
            merge(&mut passed, metadata);
        }
    }
    if !passed.fields.is_empty() {
        fields.insert(
            "metadata".into(),
            Value {
                kind: Some(Kind::StructValue(passed)),
            },
        );
    }
    Struct { fields }
}

/// `from`'s fields into `into`'s: a field both have as mappings is merged,
/// any other field `into` has is kept (upstream's `mergeMetadata`).
pub(super) fn merge(into: &mut Struct, from: &Struct) {
    for (key, value) in &from.fields {
        match (into.fields.get_mut(key), &value.kind) {
            (None, _) => {
                into.fields.insert(key.clone(), value.clone());
            }
            (
                Some(Value {
                    kind: Some(Kind::StructValue(inner)),
                }),
                Some(Kind::StructValue(more)),
            ) => merge(inner, more),
            (Some(_), _) => {}
        }
    }
}

pub(super) fn pb_unit(unit: Option<Unit>) -> PbUnit {
    match unit {
        Some(Unit::Second) => PbUnit::Second,
        Some(Unit::Minute) => PbUnit::Minute,
        Some(Unit::Hour) => PbUnit::Hour,
        Some(Unit::Day) => PbUnit::Day,
        Some(Unit::Week) => PbUnit::Week,
        Some(Unit::Month) => PbUnit::Month,
        Some(Unit::Year) => PbUnit::Year,
        None => PbUnit::Unknown,
    }
}

pub(super) fn pb_duration(d: Duration) -> envoy_types::pb::google::protobuf::Duration {
    envoy_types::pb::google::protobuf::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}
