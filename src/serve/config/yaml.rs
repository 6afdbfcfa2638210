//! Parsing: a file's serde shape, units, YAML 1.1's scalars, and errors
//! that say where.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::*;

/// One file: a domain and its descriptor tree.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) domain: String,
    #[serde(default)]
    pub(super) descriptors: Vec<DescriptorConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DescriptorConfig {
    pub(super) key: String,
    pub(super) value: Option<String>,
    pub(super) rate_limit: Option<RateLimitConfig>,
    /// Extension: several limits on this descriptor, all or nothing.
    pub(super) rate_limits: Option<Vec<RateLimitConfig>>,
    #[serde(default)]
    pub(super) descriptors: Vec<DescriptorConfig>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    pub(super) shadow_mode: bool,
    /// Over, it fails the request only when every quota-mode descriptor
    /// of the request is over (envoyproxy/ratelimit's `quota_mode`).
    #[serde(default, deserialize_with = "yaml11_bool")]
    pub(super) quota_mode: bool,
    /// Every value a wildcard matches shares one log.
    #[serde(default, deserialize_with = "yaml11_bool")]
    pub(super) share_threshold: bool,
    /// Accepted for compatibility: the metrics' `descriptor` label is the
    /// configured path, never a client's value, so that clients cannot
    /// grow the series (upstream's `detailed_metric` and
    /// `value_to_metric` add request values to its metric keys).
    #[serde(default, deserialize_with = "yaml11_bool")]
    #[allow(dead_code)]
    pub(super) detailed_metric: bool,
    /// Accepted for compatibility (see `detailed_metric`).
    #[serde(default, deserialize_with = "yaml11_bool")]
    #[allow(dead_code)]
    pub(super) value_to_metric: bool,
    /// Returned in the response's dynamic metadata, merged over the
    /// descriptors that pass, with `--response-dynamic-metadata`
    /// (envoyproxy/ratelimit's `RESPONSE_DYNAMIC_METADATA`).
    #[serde(default)]
    pub(super) metadata: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimitConfig {
    pub(super) unit: Option<Unit>,
    /// Missing or null: 0, which blocks (as upstream, whose field is a
    /// plain integer).
    #[serde(default, deserialize_with = "yaml11_count")]
    pub(super) requests_per_unit: u32,
    /// Extension: any window (`90s`, `250ms`, `2h`) instead of `unit`.
    pub(super) window: Option<String>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    pub(super) unlimited: bool,
    pub(super) name: Option<String>,
    /// The named limits this one replaces when both match one request.
    #[serde(default)]
    pub(super) replaces: Vec<Replace>,
}

/// `replaces: [{name: ..}]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Replace {
    pub(super) name: String,
}

/// envoyproxy/ratelimit's units, named in any case (`second`, `SECOND`,
/// `Minute`), as upstream looks a name up upper-cased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A second.
    Second,
    /// A minute.
    Minute,
    /// An hour.
    Hour,
    /// A day (24 hours).
    Day,
    /// A week (7 days).
    Week,
    /// A month (30 days).
    Month,
    /// A year (365 days).
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit `name` is, in any case (`UNKNOWN`, upstream's zero, is
    /// none).
    fn named(name: &str) -> Option<Unit> {
        Some(match name.to_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    pub(crate) fn duration(self) -> Duration {
        let day = 86_400;
        Duration::from_secs(match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => day,
            Unit::Week => 7 * day,
            Unit::Month => 30 * day,
            Unit::Year => 365 * day,
        })
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unit, D::Error> {
        deserializer.deserialize_str(Scalar("a unit", |name| {
            Unit::named(name).ok_or_else(|| {
                format!(
                    "invalid rate limit unit '{name}' (second, minute, hour, day, week, month or year, in any case)"
                )
            })
        }))
    }
}

/// A scalar read from its text as written (`yes`, `0x10`, `~`), whatever
/// YAML 1.2 would make of it, by the function given: what the YAML 1.1
/// readers below read with. An error is placed at the scalar.
pub(super) struct Scalar<T>(&'static str, fn(&str) -> Result<T, String>);

impl<T> serde::de::Visitor<'_> for Scalar<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        (self.1)(text).map_err(E::custom)
    }
}

/// YAML 1.1's null, which upstream's reader takes as the zero value.
pub(super) fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A boolean as upstream's YAML reader (go-yaml v2, YAML 1.1) reads one:
/// `true`/`false`, `yes`/`no`, `on`/`off`, `y`/`n` (lower, capitalised or
/// upper case); null is false.
pub(super) fn yaml11_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    deserializer.deserialize_str(Scalar("a boolean", |text| match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Ok(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Ok(false)
        }
        _ if is_null(text) => Ok(false),
        _ => Err(format!(
            "`{text}` is not a boolean (true or false, yes or no, on or off)"
        )),
    }))
}

/// A count as upstream's YAML reader reads an integer: `_`s ignored, a
/// sign, `0x`, `0o` and `0b` prefixes, a leading `0` for octal; null is 0.
pub(super) fn yaml11_count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    deserializer.deserialize_str(Scalar("a whole number", |text| {
        yaml11_uint(text)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("`{text}` is not a whole number from 0 to {}", u32::MAX))
    }))
}

/// An integer's text as YAML 1.1 (go-yaml v2) reads it, if it is one and
/// not negative.
pub(super) fn yaml11_uint(text: &str) -> Option<u64> {
    if is_null(text) {
        return Some(0);
    }
    // Only text beginning with a digit or a sign is tried as a number.
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        return None;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let (negative, digits) = match plain.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
    };
    let prefixed = |lower: &str, upper: &str| {
        digits
            .strip_prefix(lower)
            .or_else(|| digits.strip_prefix(upper))
    };
    let (radix, body) = if let Some(body) = prefixed("0x", "0X") {
        (16, body)
    } else if let Some(body) = prefixed("0o", "0O") {
        (8, body)
    } else if let Some(body) = prefixed("0b", "0B") {
        (2, body)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let n = u64::from_str_radix(body, radix).ok()?;
    (!negative || n == 0).then_some(n)
}

/// Where and what a YAML error is: the place first, once (the parser's
/// message ends with it too).
pub(super) fn located(e: serde_yaml_ng::Error) -> String {
    let message = e.to_string();
    match e.location() {
        Some(at) => {
            let (line, column) = (at.line(), at.column());
            let what = message
                .strip_suffix(&format!(" at line {line} column {column}"))
                .unwrap_or(&message);
            format!("line {line}, column {column}: {}", readable(what))
        }
        None => readable(&message),
    }
}

/// A parser's message as a person reads it: the file's own type named
/// for what it is, and a quoted value (a log written into the directory
/// is one long string) cut short.
pub(super) fn readable(what: &str) -> String {
    // The first HEAD and the last TAIL characters of a message that has at
    // least CUT more between them; a shorter one whole.
    const HEAD: usize = 120;
    const TAIL: usize = 60;
    const CUT: usize = 40;
    let what = what.replace(
        "expected struct FileConfig",
        "expected a mapping with `domain` and `descriptors`",
    );
    let count = what.chars().count();
    if count < HEAD + CUT + TAIL {
        return what;
    }
    let head: String = what.chars().take(HEAD).collect();
    let tail: String = what.chars().skip(count - TAIL).collect();
    format!("{head}…{tail}")
}

/// Parses one file's text into its domain and tree: its first YAML
/// document, as upstream reads; a later one that is not empty is refused
/// (upstream would pass over its limits without a word).
pub(crate) fn parse(text: &str) -> Result<(String, Vec<Rule>), String> {
    let mut documents = serde_yaml_ng::Deserializer::from_str(text);
    let file = match documents.next() {
        Some(first) => FileConfig::deserialize(first).map_err(located)?,
        None => return Err("`domain` is missing (the file has no YAML document)".into()),
    };
    for (i, later) in documents.enumerate() {
        if !serde_yaml_ng::Value::deserialize(later)
            .map_err(located)?
            .is_null()
        {
            return Err(format!(
                "YAML document {} (after a `---`): a file holds one domain, and \
                 envoyproxy/ratelimit reads only a file's first document",
                i + 2
            ));
        }
    }
    if file.domain.trim().is_empty() {
        return Err("`domain` is empty".into());
    }
    let rules = compile(&file.descriptors, "", &[])?;
    Ok((file.domain, rules))
}
