//! Validation: a file's descriptors checked and compiled into rules.

use std::collections::HashMap;

use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value};

use crate::Quota;

use super::yaml::*;
use super::*;

pub(super) fn compile(
    descriptors: &[DescriptorConfig],
    parent: &str,
    parent_stat: &[String],
) -> Result<Vec<Rule>, String> {
    let mut rules: Vec<Rule> = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        // An empty value is none (upstream keys a descriptor by its key
        // alone then).
        let value = d.value.clone().filter(|v| !v.is_empty());
        let here = match &value {
            Some(v) => format!("{}={}", d.key, v),
            None => d.key.clone(),
        };
        let label = if parent.is_empty() {
            here
        } else {
            format!("{parent}.{here}")
        };
        let mut stat_path = parent_stat.to_vec();
        stat_path.push(match &value {
            Some(v) => format!("{}_{v}", d.key),
            None => d.key.clone(),
        });
        if d.key.is_empty() {
            return Err(format!("descriptor `{label}`: `key` is empty"));
        }
        if rules.iter().any(|r| r.key == d.key && r.value == value) {
            return Err(format!(
                "descriptor `{label}` is defined twice at the same level"
            ));
        }
        let limits: Vec<&RateLimitConfig> = match (&d.rate_limit, &d.rate_limits) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "descriptor `{label}`: give `rate_limit` or `rate_limits`, not both"
                ));
            }
            (Some(one), None) => vec![one],
            (None, Some(many)) => many.iter().collect(),
            (None, None) => Vec::new(),
        };
        let limit = if limits.is_empty() {
            Limit::None
        } else if limits.iter().any(|l| l.unlimited) {
            if limits.len() > 1 {
                return Err(format!(
                    "descriptor `{label}`: `unlimited` cannot be combined with other limits"
                ));
            }
            // Upstream's words; its `requests_per_unit` is passed over.
            let what = match (&limits[0].unit, &limits[0].window) {
                (Some(_), _) => Some("unit"),
                (None, Some(_)) => Some("window"),
                (None, None) => None,
            };
            if let Some(what) = what {
                return Err(format!(
                    "descriptor `{label}`: should not specify rate limit {what} when unlimited"
                ));
            }
            Limit::Unlimited
        } else {
            let mut quota: Option<Quota> = None;
            let mut shown = Vec::new();
            let mut blocked = None;
            for l in &limits {
                let rpu = l.requests_per_unit;
                let window = match (&l.unit, &l.window) {
                    (Some(unit), None) => unit.duration(),
                    (None, Some(w)) => crate::serve::parse::window(w)
                        .map_err(|e| format!("descriptor `{label}`: window `{w}`: {e}"))?,
                    (Some(_), Some(_)) => {
                        return Err(format!(
                            "descriptor `{label}`: give `unit` or `window`, not both"
                        ));
                    }
                    (None, None) => {
                        return Err(format!(
                            "descriptor `{label}`: `unit` (second, minute, hour, day, week, month, year) or `window` is missing"
                        ));
                    }
                };
                if rpu == 0 {
                    // No request ever fits: the descriptor is blocked
                    // (the first zero reported), whatever its other limits.
                    blocked.get_or_insert((shown.len(), window));
                } else {
                    quota = Some(
                        match quota {
                            None => Quota::new(rpu, window),
                            Some(q) => q.and(rpu, window),
                        }
                        .map_err(|e| format!("descriptor `{label}`: {e}"))?,
                    );
                }
                shown.push(Shown {
                    requests_per_unit: rpu,
                    unit: l.unit,
                    name: l.name.clone().unwrap_or_default(),
                });
            }
            match (blocked, quota) {
                (Some((zero, window)), _) => Limit::Blocked(shown, zero, window),
                (None, Some(quota)) => Limit::Quota(quota, shown),
                // Every limit is a zero or a quota's: not met.
                (None, None) => Limit::None,
            }
        };
        let pattern = value.as_deref().and_then(Pattern::new);
        if d.share_threshold && pattern.is_none() {
            return Err(format!(
                "descriptor `{label}`: `share_threshold` needs a wildcard `value` (one with a `*`)"
            ));
        }
        let mut replaces = Vec::new();
        for l in &limits {
            for r in &l.replaces {
                if r.name.is_empty() {
                    return Err(format!(
                        "descriptor `{label}`: a `replaces` entry without a `name`"
                    ));
                }
                if limit.shown().iter().any(|s| s.name == r.name) {
                    return Err(format!(
                        "descriptor `{label}`: a limit cannot replace its own name `{}`",
                        r.name
                    ));
                }
                replaces.push(r.name.clone());
            }
        }
        rules.push(Rule {
            key: d.key.clone(),
            value,
            pattern,
            shared: d.share_threshold,
            limit,
            shadow: d.shadow_mode,
            quota_mode: d.quota_mode,
            replaces,
            metadata: d
                .metadata
                .as_ref()
                .map(|m| metadata(m).map_err(|e| format!("descriptor `{label}`: `metadata`: {e}")))
                .transpose()?
                .filter(|m| !m.fields.is_empty()),
            children: compile(&d.descriptors, &label, &stat_path)?,
            label,
            stat_path,
        });
    }
    Ok(rules)
}

/// A descriptor's `metadata` as protobuf's `Struct`: a mapping, its keys
/// scalars (a number or a boolean key is written out, as upstream's YAML
/// reader does), its values any YAML (numbers become doubles).
pub(super) fn metadata(yaml: &serde_yaml_ng::Value) -> Result<Struct, String> {
    match proto_value(yaml)?.kind {
        Some(Kind::StructValue(fields)) => Ok(fields),
        _ => Err("a mapping is wanted".into()),
    }
}

pub(super) fn proto_value(yaml: &serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    let kind = match yaml {
        Y::Null => Kind::NullValue(0),
        Y::Bool(b) => Kind::BoolValue(*b),
        Y::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Y::String(s) => Kind::StringValue(s.clone()),
        Y::Sequence(items) => Kind::ListValue(ListValue {
            values: items.iter().map(proto_value).collect::<Result<_, _>>()?,
        }),
        Y::Mapping(map) => {
            let mut fields = HashMap::with_capacity(map.len());
            for (key, value) in map {
                let key = match key {
                    Y::String(s) => s.clone(),
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    _ => return Err("a key that is not a string, a number or a boolean".into()),
                };
                fields.insert(key, proto_value(value)?);
            }
            Kind::StructValue(Struct { fields })
        }
        Y::Tagged(tagged) => return proto_value(&tagged.value),
    };
    Ok(Value { kind: Some(kind) })
}
