//! `POST /json`: `ShouldRateLimit` over HTTP/1.1 in proto3's JSON mapping,
//! as envoyproxy/ratelimit serves it for clients without gRPC (a Lua
//! script, `curl`):
//!
//! ```text
//! $ slidelog serve --config examples/envoy/ratelimit.yaml --grpc 127.0.0.1:8081 --http 127.0.0.1:8080 &
//! $ curl -d '{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}' 127.0.0.1:8080/json
//! {"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":10,"unit":"SECOND"},"limitRemaining":9,"durationUntilReset":"1s"}]}
//! ```
//!
//! The request is read as protobuf's JSON parser reads one: each field
//! by its JSON name (`hitsAddend`) or its proto name (`hits_addend`),
//! integers as numbers or decimal strings, the unit by name or number,
//! `null` as absent, an unknown field refused. The response is written as
//! its JSON printer writes one: fields holding their default (0, empty,
//! `UNKNOWN`) left out, enums by name, a duration as seconds with an `s`.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{
    Duration as PbDuration, Struct as PbStruct, UInt64Value, Value as PbValue,
};
use serde_json::{Map, Value, json};

/// `envoy.type.v3.RateLimitUnit`'s names, by number.
const UNITS: [&str; 8] = [
    "UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK",
];

/// The request in `body`, or what is wrong with it (a path to the field,
/// and why).
pub fn request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let mut request = RateLimitRequest::default();
    for (name, field) in fields(
        &value,
        "the request",
        &["domain", "descriptors", "hits_addend"],
    )? {
        match name {
            "domain" => request.domain = string(field, "domain")?,
            "descriptors" => {
                for (i, d) in list(field, "descriptors")?.iter().enumerate() {
                    request
                        .descriptors
                        .push(descriptor(d, &format!("descriptors[{i}]"))?);
                }
            }
            _ => request.hits_addend = integer(field, "hitsAddend", u32::MAX.into())? as u32,
        }
    }
    Ok(request)
}

fn descriptor(value: &Value, at: &str) -> Result<RateLimitDescriptor, String> {
    let names = ["entries", "limit", "hits_addend", "is_negative_hits"];
    let mut d = RateLimitDescriptor::default();
    for (name, field) in fields(value, at, &names)? {
        match name {
            "entries" => {
                for (i, e) in list(field, &format!("{at}.entries"))?.iter().enumerate() {
                    let at = format!("{at}.entries[{i}]");
                    let mut entry = Entry::default();
                    for (name, field) in fields(e, &at, &["key", "value"])? {
                        let text = string(field, &format!("{at}.{name}"))?;
                        match name {
                            "key" => entry.key = text,
                            _ => entry.value = text,
                        }
                    }
                    d.entries.push(entry);
                }
            }
            "limit" => {
                let at = format!("{at}.limit");
                let mut limit = RateLimitOverride::default();
                for (name, field) in fields(field, &at, &["requests_per_unit", "unit"])? {
                    match name {
                        "requests_per_unit" => {
                            let at = format!("{at}.requestsPerUnit");
                            limit.requests_per_unit = integer(field, &at, u32::MAX.into())? as u32;
                        }
                        _ => limit.unit = unit(field, &format!("{at}.unit"))?,
                    }
                }
                d.limit = Some(limit);
            }
            "hits_addend" => {
                let value = integer(field, &format!("{at}.hitsAddend"), u64::MAX)?;
                d.hits_addend = Some(UInt64Value { value });
            }
            _ => d.is_negative_hits = boolean(field, &format!("{at}.isNegativeHits"))?,
        }
    }
    Ok(d)
}

/// The fields of the object `value` (at `at`) that are not `null`, each by
/// its proto name (one of `names`), whether written so or by its JSON
/// name; `null` itself is an absent object.
fn fields<'v>(
    value: &'v Value,
    at: &str,
    names: &[&'static str],
) -> Result<Vec<(&'static str, &'v Value)>, String> {
    let object = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Object(object) => object,
        other => return Err(format!("{at}: an object was expected, not {other}")),
    };
    let mut seen = Vec::with_capacity(object.len());
    for (key, field) in object {
        let Some(&name) = names.iter().find(|n| **n == key || camel(n) == *key) else {
            return Err(format!("{at}: unknown field {key:?}"));
        };
        if seen.iter().any(|(n, _)| *n == name) {
            return Err(format!(
                "{at}: {key:?} given twice (as {name:?} and its JSON name)"
            ));
        }
        if !field.is_null() {
            seen.push((name, field));
        }
    }
    Ok(seen)
}

/// A proto name's JSON name: `hits_addend` → `hitsAddend`.
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

fn list<'v>(value: &'v Value, at: &str) -> Result<&'v [Value], String> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("{at}: a list was expected, not {value}"))
}

fn string(value: &Value, at: &str) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{at}: a string was expected, not {value}"))
}

fn boolean(value: &Value, at: &str) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{at}: true or false was expected, not {value}"))
}

/// An integer from 0 to `max`: a JSON number without a fraction, or a
/// decimal string (protobuf's JSON form of a 64-bit integer).
fn integer(value: &Value, at: &str, max: u64) -> Result<u64, String> {
    let parsed = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            // `3.0` and `3e2` are integers too; `3.5`, `-1` are not.
            let f = n.as_f64()?;
            (f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f)).then_some(f as u64)
        }),
        Value::String(s) => s.parse::<u64>().ok(),
        _ => None,
    };
    parsed
        .filter(|n| *n <= max)
        .ok_or_else(|| format!("{at}: an integer from 0 to {max} was expected, not {value}"))
}

/// A unit by name (`"MINUTE"`) or number (2).
fn unit(value: &Value, at: &str) -> Result<i32, String> {
    let named = value
        .as_str()
        .and_then(|name| UNITS.iter().position(|u| *u == name));
    match (named, value) {
        (Some(i), _) => Ok(i as i32),
        (None, Value::Number(_)) => Ok(integer(value, at, i32::MAX as u64)? as i32),
        _ => Err(format!(
            "{at}: one of {} was expected, not {value}",
            UNITS.join(", ")
        )),
    }
}

/// The response as protobuf's JSON printer writes it.
pub fn response(response: &RateLimitResponse) -> Value {
    let mut out = Map::new();
    put(&mut out, "overallCode", code(response.overall_code));
    let statuses: Vec<Value> = response.statuses.iter().map(status).collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    let headers: Vec<Value> = response
        .response_headers_to_add
        .iter()
        .map(header)
        .collect();
    if !headers.is_empty() {
        out.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    if let Some(metadata) = &response.dynamic_metadata {
        out.insert("dynamicMetadata".into(), object(metadata));
    }
    Value::Object(out)
}

/// A `google.protobuf.Struct` as JSON: the object it stands for.
fn object(object: &PbStruct) -> Value {
    Value::Object(
        object
            .fields
            .iter()
            .map(|(key, value)| (key.clone(), dynamic(value)))
            .collect(),
    )
}

/// A `google.protobuf.Value` as JSON. A whole number is written without a
/// fraction, as protobuf's printer writes it; one JSON cannot hold (NaN,
/// an infinity) as null.
fn dynamic(value: &PbValue) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 => {
            // Exact: a whole number under 2^53.
            json!(*n as i64)
        }
        Some(Kind::NumberValue(n)) => {
            serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
        }
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StructValue(s)) => object(s),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(dynamic).collect()),
    }
}

fn status(status: &DescriptorStatus) -> Value {
    let mut out = Map::new();
    put(&mut out, "code", code(status.code));
    if let Some(limit) = &status.current_limit {
        out.insert("currentLimit".into(), rate_limit(limit));
    }
    if status.limit_remaining != 0 {
        out.insert("limitRemaining".into(), status.limit_remaining.into());
    }
    if let Some(d) = &status.duration_until_reset {
        out.insert("durationUntilReset".into(), duration(d).into());
    }
    Value::Object(out)
}

fn rate_limit(limit: &RateLimit) -> Value {
    let mut out = Map::new();
    if !limit.name.is_empty() {
        out.insert("name".into(), limit.name.clone().into());
    }
    if limit.requests_per_unit != 0 {
        out.insert("requestsPerUnit".into(), limit.requests_per_unit.into());
    }
    let unit = usize::try_from(limit.unit).ok().and_then(|u| UNITS.get(u));
    match unit {
        Some(&"UNKNOWN") => {}
        Some(name) => put(&mut out, "unit", Some(json!(name))),
        None => put(&mut out, "unit", Some(json!(limit.unit))),
    }
    Value::Object(out)
}

fn header(header: &HeaderValue) -> Value {
    let mut out = Map::new();
    for (name, text) in [("key", &header.key), ("value", &header.value)] {
        if !text.is_empty() {
            out.insert(name.into(), text.clone().into());
        }
    }
    Value::Object(out)
}

/// A code by name, or `None` for `UNKNOWN` (the default, left out).
fn code(code: i32) -> Option<Value> {
    match Code::try_from(code) {
        Ok(Code::Unknown) => None,
        Ok(code) => Some(code.as_str_name().into()),
        Err(_) => Some(code.into()),
    }
}

fn put(out: &mut Map<String, Value>, name: &str, value: Option<Value>) {
    if let Some(value) = value {
        out.insert(name.into(), value);
    }
}

/// A duration as protobuf's JSON writes one: seconds, with 3, 6 or 9
/// fractional digits when there is a fraction, and an `s`.
fn duration(d: &PbDuration) -> String {
    let sign = if d.seconds < 0 || d.nanos < 0 {
        "-"
    } else {
        ""
    };
    let (seconds, nanos) = (d.seconds.unsigned_abs(), d.nanos.unsigned_abs());
    let fraction = match nanos {
        0 => String::new(),
        n if n % 1_000_000 == 0 => format!(".{:03}", n / 1_000_000),
        n if n % 1_000 == 0 => format!(".{:06}", n / 1_000),
        n => format!(".{n:09}"),
    };
    format!("{sign}{seconds}{fraction}s")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn requests_read_as_protojson_reads_them() {
        let body = br#"{
            "domain": "edge",
            "hits_addend": "2",
            "descriptors": [
                {"entries": [{"key": "remote_address", "value": "10.0.0.1"}, {"key": "path"}]},
                {"entries": [{"key": "k", "value": "v"}], "hitsAddend": 0, "isNegativeHits": null,
                 "limit": {"requests_per_unit": 5, "unit": "MINUTE"}},
                {"entries": [], "is_negative_hits": true, "limit": {"requestsPerUnit": "7", "unit": 7}}
            ]
        }"#;
        let r = request(body).unwrap();
        assert_eq!((r.domain.as_str(), r.hits_addend), ("edge", 2));
        let [a, b, c] = &r.descriptors[..] else {
            panic!("{r:?}")
        };
        let entries: Vec<(&str, &str)> = a
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(entries, [("remote_address", "10.0.0.1"), ("path", "")]);
        assert_eq!(
            (a.hits_addend, a.limit, a.is_negative_hits),
            (None, None, false)
        );
        assert_eq!(b.hits_addend, Some(UInt64Value { value: 0 }), "a look");
        let limit = |rpu, unit| {
            Some(RateLimitOverride {
                requests_per_unit: rpu,
                unit,
            })
        };
        assert_eq!(b.limit, limit(5, 2));
        assert_eq!((c.limit, c.is_negative_hits), (limit(7, 7), true));
        assert_eq!(request(b"{}").unwrap(), RateLimitRequest::default());
    }

    #[test]
    fn bad_requests_say_where_and_why() {
        for (body, says) in [
            (&b"{"[..], "not JSON"),
            (b"[]", "the request: an object was expected"),
            (
                b"{\"domian\": \"x\"}",
                "the request: unknown field \"domian\"",
            ),
            (b"{\"domain\": 3}", "domain: a string was expected, not 3"),
            (b"{\"hitsAddend\": 1, \"hits_addend\": 2}", "given twice"),
            (
                b"{\"hitsAddend\": -1}",
                "hitsAddend: an integer from 0 to 4294967295",
            ),
            (b"{\"hitsAddend\": 4294967296}", "hitsAddend: an integer"),
            (b"{\"hitsAddend\": 1.5}", "hitsAddend: an integer"),
            (b"{\"descriptors\": {}}", "descriptors: a list was expected"),
            (
                b"{\"descriptors\": [{\"entries\": [{\"key\": 1}]}]}",
                "descriptors[0].entries[0].key: a string",
            ),
            (
                b"{\"descriptors\": [{\"limit\": {\"unit\": \"FORTNIGHT\"}}]}",
                "descriptors[0].limit.unit: one of UNKNOWN",
            ),
            (
                b"{\"descriptors\": [{\"isNegativeHits\": \"yes\"}]}",
                "isNegativeHits: true or false",
            ),
            (
                b"{\"descriptors\": [{\"hitsAddend\": \"18446744073709551616\"}]}",
                "hitsAddend: an integer from 0 to 18446744073709551615",
            ),
        ] {
            let error = request(body).unwrap_err();
            assert!(
                error.contains(says),
                "{}: {error}",
                String::from_utf8_lossy(body)
            );
        }
        // Integers written as floats are integers, as protojson reads them.
        assert_eq!(request(b"{\"hitsAddend\": 3.0}").unwrap().hits_addend, 3);
    }

    #[test]
    fn responses_print_as_protojson_prints_them() {
        let limit = |rpu, unit, name: &str| RateLimit {
            name: name.into(),
            requests_per_unit: rpu,
            unit,
        };
        let r = RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: Code::OverLimit as i32,
                    current_limit: Some(limit(1, 2, "")),
                    duration_until_reset: Some(PbDuration {
                        seconds: 59,
                        nanos: 500_000_000,
                    }),
                    ..Default::default()
                },
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: Some(limit(2, 7, "weekly")),
                    limit_remaining: 1,
                    duration_until_reset: Some(PbDuration {
                        seconds: 0,
                        nanos: 1_500,
                    }),
                    ..Default::default()
                },
                DescriptorStatus::default(),
            ],
            response_headers_to_add: vec![HeaderValue {
                key: "RateLimit-Remaining".into(),
                value: "0".into(),
                ..Default::default()
            }],
            dynamic_metadata: Some(PbStruct {
                fields: [
                    ("domain", Kind::StringValue("d".into())),
                    ("n", Kind::NumberValue(3.0)),
                    ("half", Kind::NumberValue(0.5)),
                    ("nan", Kind::NumberValue(f64::NAN)),
                    ("none", Kind::NullValue(0)),
                    ("yes", Kind::BoolValue(true)),
                    (
                        "list",
                        Kind::ListValue(envoy_types::pb::google::protobuf::ListValue {
                            values: vec![PbValue {
                                kind: Some(Kind::StructValue(PbStruct::default())),
                            }],
                        }),
                    ),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), PbValue { kind: Some(v) }))
                .collect(),
            }),
            ..Default::default()
        };
        let expected = json!({
            "overallCode": "OVER_LIMIT",
            "statuses": [
                {"code": "OVER_LIMIT", "currentLimit": {"requestsPerUnit": 1, "unit": "MINUTE"},
                 "durationUntilReset": "59.500s"},
                {"code": "OK", "currentLimit": {"name": "weekly", "requestsPerUnit": 2, "unit": "WEEK"},
                 "limitRemaining": 1, "durationUntilReset": "0.000001500s"},
                {}
            ],
            "responseHeadersToAdd": [{"key": "RateLimit-Remaining", "value": "0"}],
            "dynamicMetadata": {"domain": "d", "n": 3, "half": 0.5, "nan": null, "none": null,
                                "yes": true, "list": [{}]}
        });
        assert_eq!(response(&r), expected);
        assert_eq!(response(&RateLimitResponse::default()), json!({}));
        assert_eq!(
            duration(&PbDuration {
                seconds: 3,
                nanos: 0
            }),
            "3s"
        );
        assert_eq!(
            duration(&PbDuration {
                seconds: 0,
                nanos: 120_000
            }),
            "0.000120s"
        );
    }

    /// Any JSON, its objects' keys mostly the request's own field names
    /// (so that the walk goes deep), its leaves any JSON value.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            "\\PC{0,6}".prop_map(Value::from),
            (0..8usize).prop_map(|u| Value::from(UNITS[u])),
        ];
        let names = prop_oneof![
            8 => proptest::sample::select(vec![
                "domain", "descriptors", "hitsAddend", "hits_addend", "entries", "key",
                "value", "limit", "requestsPerUnit", "requests_per_unit", "unit",
                "isNegativeHits", "is_negative_hits",
            ])
            .prop_map(str::to_owned),
            1 => "\\PC{0,6}",
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((names.clone(), inner), 0..5)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any body is read or refused with a message, never a panic: any
        /// bytes, and any JSON shaped like a request or not.
        #[test]
        fn any_body_is_answered(
            body in proptest::collection::vec(any::<u8>(), 0..64),
            value in any_json(),
        ) {
            let _ = request(&body);
            if let Err(message) = request(value.to_string().as_bytes()) {
                prop_assert!(!message.is_empty());
            }
        }

        /// A request written in either spelling reads back as it was.
        #[test]
        fn requests_read_back(
            domain in "\\PC{0,8}",
            hits in any::<u32>(),
            entries in proptest::collection::vec(("\\PC{0,6}", "\\PC{0,6}"), 0..3),
            own in proptest::option::of((any::<u32>(), 0..8i32)),
            addend in proptest::option::of(any::<u64>()),
            snake in any::<bool>(),
        ) {
            let name = |n: &str| if snake { n.to_owned() } else { camel(n) };
            let mut d = Map::new();
            let list: Vec<Value> =
                entries.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
            d.insert("entries".into(), list.into());
            if let Some((rpu, unit)) = own {
                d.insert("limit".into(), json!({name("requests_per_unit"): rpu, "unit": UNITS[unit as usize]}));
            }
            if let Some(a) = addend {
                d.insert(name("hits_addend"), a.to_string().into());
            }
            let body = json!({"domain": domain, name("hits_addend"): hits, "descriptors": [d]});
            let r = request(body.to_string().as_bytes()).unwrap();
            prop_assert_eq!(&r.domain, &domain);
            prop_assert_eq!(r.hits_addend, hits);
            let got: Vec<(String, String)> =
                r.descriptors[0].entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
            prop_assert_eq!(got, entries);
            let limit = r.descriptors[0].limit.map(|l| (l.requests_per_unit, l.unit));
            prop_assert_eq!(limit, own);
            prop_assert_eq!(r.descriptors[0].hits_addend.map(|h| h.value), addend);
        }
    }
}
