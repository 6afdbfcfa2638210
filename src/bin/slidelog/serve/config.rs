//! The service's configuration: envoyproxy/ratelimit's YAML format, so
//! existing files load unchanged (its zero limits, which block, its
//! wildcard values with `*` anywhere, `share_threshold`, `quota_mode`,
//! `replaces`, `detailed_metric`, `value_to_metric` and `metadata`
//! included), read as its YAML 1.1 reader reads them (units in any case,
//! `yes`/`on`/`y` booleans, `1_000` and `0x10` counts, a missing
//! `requests_per_unit` as 0), plus two documented extensions (`window`
//! for any duration instead of `unit`, and `rate_limits` for several
//! limits on one descriptor, checked all or nothing on one ring).
//!
//! ```yaml
//! domain: edge
//! descriptors:
//!   - key: remote_address            # no value: each address its own limit
//!     rate_limit: {unit: second, requests_per_unit: 10}
//!   - key: api_key
//!     value: partner
//!     rate_limits:                   # extension: several limits at once
//!       - {unit: second, requests_per_unit: 100}
//!       - {window: 90s, requests_per_unit: 5000}
//!     shadow_mode: true              # decide and count, answer OK
//!   - key: path
//!     value: /health
//!     rate_limit: {unlimited: true}
//! ```

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value};
use serde::{Deserialize, Deserializer};
use slidelog::Quota;

/// One file: a domain and its descriptor tree.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    domain: String,
    #[serde(default)]
    descriptors: Vec<DescriptorConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorConfig {
    key: String,
    value: Option<String>,
    rate_limit: Option<RateLimitConfig>,
    /// Extension: several limits on this descriptor, all or nothing.
    rate_limits: Option<Vec<RateLimitConfig>>,
    #[serde(default)]
    descriptors: Vec<DescriptorConfig>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    shadow_mode: bool,
    /// Over, it fails the request only when every quota-mode descriptor
    /// of the request is over (envoyproxy/ratelimit's `quota_mode`).
    #[serde(default, deserialize_with = "yaml11_bool")]
    quota_mode: bool,
    /// Every value a wildcard matches shares one log.
    #[serde(default, deserialize_with = "yaml11_bool")]
    share_threshold: bool,
    /// Accepted for compatibility: the metrics' `descriptor` label is the
    /// configured path, never a client's value, so that clients cannot
    /// grow the series (upstream's `detailed_metric` and
    /// `value_to_metric` add request values to its metric keys).
    #[serde(default, deserialize_with = "yaml11_bool")]
    #[allow(dead_code)]
    detailed_metric: bool,
    /// Accepted for compatibility (see `detailed_metric`).
    #[serde(default, deserialize_with = "yaml11_bool")]
    #[allow(dead_code)]
    value_to_metric: bool,
    /// Returned in the response's dynamic metadata, merged over the
    /// descriptors that pass, with `--response-dynamic-metadata`
    /// (envoyproxy/ratelimit's `RESPONSE_DYNAMIC_METADATA`).
    #[serde(default)]
    metadata: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitConfig {
    unit: Option<Unit>,
    /// Missing or null: 0, which blocks (as upstream, whose field is a
    /// plain integer).
    #[serde(default, deserialize_with = "yaml11_count")]
    requests_per_unit: u32,
    /// Extension: any window (`90s`, `250ms`, `2h`) instead of `unit`.
    window: Option<String>,
    #[serde(default, deserialize_with = "yaml11_bool")]
    unlimited: bool,
    name: Option<String>,
    /// The named limits this one replaces when both match one request.
    #[serde(default)]
    replaces: Vec<Replace>,
}

/// `replaces: [{name: ..}]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Replace {
    name: String,
}

/// envoyproxy/ratelimit's units, named in any case (`second`, `SECOND`,
/// `Minute`), as upstream looks a name up upper-cased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub(crate) const ALL: [Unit; 7] = [
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
struct Scalar<T>(&'static str, fn(&str) -> Result<T, String>);

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
fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A boolean as upstream's YAML reader (go-yaml v2, YAML 1.1) reads one:
/// `true`/`false`, `yes`/`no`, `on`/`off`, `y`/`n` (lower, capitalised or
/// upper case); null is false.
fn yaml11_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
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
fn yaml11_count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    deserializer.deserialize_str(Scalar("a whole number", |text| {
        yaml11_uint(text)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("`{text}` is not a whole number from 0 to {}", u32::MAX))
    }))
}

/// An integer's text as YAML 1.1 (go-yaml v2) reads it, if it is one and
/// not negative.
fn yaml11_uint(text: &str) -> Option<u64> {
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

/// One limit as `DescriptorStatus.current_limit` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) requests_per_unit: u32,
    /// `None` for a `window` that is not a unit.
    pub(crate) unit: Option<Unit>,
    pub(crate) name: String,
}

/// What a matched descriptor is limited by.
#[derive(Clone, Debug)]
pub(crate) enum Limit {
    /// A node without a limit of its own (only its children limit).
    None,
    /// `unlimited: true`: always OK, never counted.
    Unlimited,
    /// The policies, and how each is reported.
    Quota(Quota, Vec<Shown>),
    /// `requests_per_unit: 0` (envoyproxy/ratelimit's block list): every
    /// request is over, none counted. How each limit is reported, which
    /// of them is the zero, and its window.
    Blocked(Vec<Shown>, usize, Duration),
}

impl Limit {
    /// How the limits are reported (empty for none or unlimited).
    pub(crate) fn shown(&self) -> &[Shown] {
        match self {
            Limit::Quota(_, shown) | Limit::Blocked(shown, ..) => shown,
            Limit::None | Limit::Unlimited => &[],
        }
    }
}

/// A `value` with `*` in it, envoyproxy/ratelimit's wildcard: each `*`
/// matches any run of characters (none included), at any place, as
/// often as it occurs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The text between the `*`s: at least two parts (the first and the
    /// last empty where the pattern begins or ends with `*`).
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern `value` is, if it has a `*`.
    pub(crate) fn new(value: &str) -> Option<Pattern> {
        value.contains('*').then(|| Pattern {
            parts: value.split('*').map(str::to_owned).collect(),
        })
    }

    /// Whether `value` is one of the pattern's: it begins with the first
    /// part, ends with the last, and holds the parts between in order in
    /// what is left between them (the leftmost place of each leaves the
    /// most room for the rest, so a first fit is a fit if any is).
    pub(crate) fn matches(&self, value: &str) -> bool {
        let (first, rest) = self.parts.split_first().expect("two parts at least");
        let (last, middle) = rest.split_last().expect("two parts at least");
        let fixed: usize = self.parts.iter().map(String::len).sum();
        if value.len() < fixed
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        // The first and the last part do not overlap (`fixed` fits), so
        // this is the text strictly between them.
        let mut between = &value[first.len()..value.len() - last.len()];
        for part in middle {
            match between.find(part.as_str()) {
                Some(at) => between = &between[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// One node of a domain's descriptor tree.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub(crate) key: String,
    /// `None`: each distinct value has its own limit.
    pub(crate) value: Option<String>,
    /// `value` as a wildcard, if it has a `*`.
    pub(crate) pattern: Option<Pattern>,
    /// `share_threshold`: the values its wildcard matches share one log
    /// (their limiter keys hold the pattern in place of the value).
    pub(crate) shared: bool,
    pub(crate) limit: Limit,
    pub(crate) shadow: bool,
    /// `quota_mode`: over, it fails the request only if every quota-mode
    /// descriptor of the request is over ([`overall_over`]).
    pub(crate) quota_mode: bool,
    /// The names of the limits this one replaces (`replaces`): when a
    /// request matches both, those are not checked.
    pub(crate) replaces: Vec<String>,
    /// For metrics: the path of keys (and values where given) to here.
    pub(crate) label: String,
    /// The path as upstream's metrics name it: each level's `key`, or
    /// `key_value` where a value is given (its `key1`, `key2`, ... labels).
    pub(crate) stat_path: Vec<String>,
    /// `metadata`, as the response's dynamic metadata carries it (`None`
    /// for none, or an empty mapping, as upstream).
    pub(crate) metadata: Option<Struct>,
    pub(crate) children: Vec<Rule>,
}

/// Every domain's tree.
#[derive(Debug, Default)]
pub(crate) struct Config {
    pub(crate) domains: HashMap<String, Vec<Rule>>,
}

impl Config {
    /// Loads `path`: a YAML file, or the files of a directory that
    /// [`config_files`] lists (one domain each; none is an empty
    /// configuration, which limits nothing). Errors name the file, the
    /// line and what is wrong. A domain in two files is refused, unless
    /// `merge_domains` (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`): then
    /// a later file's descriptors join the domain's, after them, and one
    /// with a key and value the domain already has is refused.
    pub(crate) fn load(path: &Path, merge_domains: bool) -> Result<Config, String> {
        let files = config_files(path)?;
        let mut config = Config::default();
        for file in &files {
            let text = match std::fs::read_to_string(file) {
                Ok(text) => text,
                // Gone since the directory was listed (or a dangling
                // link): not read, as upstream's loader.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && file != path => continue,
                Err(e) => return Err(format!("{}: {e}", file.display())),
            };
            let (domain, rules) = parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            match config.domains.get_mut(&domain) {
                None => {
                    config.domains.insert(domain, rules);
                }
                Some(_) if !merge_domains => {
                    return Err(format!(
                        "{}: domain `{domain}` is also defined by an earlier file \
                         (--merge-domains joins them)",
                        file.display()
                    ));
                }
                Some(known) => {
                    for rule in rules {
                        if known
                            .iter()
                            .any(|r| r.key == rule.key && r.value == rule.value)
                        {
                            return Err(format!(
                                "{}: domain `{domain}`: descriptor `{}` is also defined by an \
                                 earlier file",
                                file.display(),
                                rule.label
                            ));
                        }
                        known.push(rule);
                    }
                }
            }
        }
        Ok(config)
    }

    /// The rule that limits `entries` of `domain`: at each level the
    /// descriptor with this key and this value, else the first with this
    /// key and a wildcard value that matches it (`value: /api/*/users`,
    /// envoyproxy/ratelimit's: see [`Pattern`]), else the one with this
    /// key and no value; `None` if the tree has no such path.
    pub(crate) fn matching(&self, domain: &str, entries: &[(String, String)]) -> Option<&Rule> {
        self.walk(domain, entries, |_, _| {})
    }

    /// [`matching`](Self::matching), calling `each` with every entry's
    /// index and the rule it matched, from the root down (also on a path
    /// that then ends unmatched).
    pub(crate) fn walk<'c>(
        &'c self,
        domain: &str,
        entries: &[(String, String)],
        mut each: impl FnMut(usize, &'c Rule),
    ) -> Option<&'c Rule> {
        let mut level = self.domains.get(domain)?;
        let mut found = None;
        for (i, (key, value)) in entries.iter().enumerate() {
            let rule = level
                .iter()
                .find(|r| r.key == *key && r.value.as_deref() == Some(value))
                .or_else(|| {
                    level.iter().find(|r| {
                        r.key == *key && r.pattern.as_ref().is_some_and(|p| p.matches(value))
                    })
                })
                .or_else(|| level.iter().find(|r| r.key == *key && r.value.is_none()))?;
            each(i, rule);
            found = Some(rule);
            level = &rule.children;
        }
        found
    }
}

/// The files a load of `root` reads, in order: `root` itself if it is not
/// a directory; else every file below it whatever its name, in its
/// subdirectories too, as envoyproxy/ratelimit's runtime loader reads
/// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`, but hidden ones (see
/// [`is_config_file`]). A link to a file is read through; a link to a
/// directory is not followed and a dangling link is passed over, as
/// upstream's loader does (so a Kubernetes ConfigMap volume, each file a
/// link through the hidden `..data`, reads each file once).
pub(crate) fn config_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    if !root.is_dir() {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = entry.path();
            if !is_config_file(root, &path) {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_dir() {
                dirs.push(path);
            } else if !kind.is_symlink() {
                files.push(path);
            } else {
                match std::fs::metadata(&path) {
                    Ok(target) if target.is_dir() => {}
                    Ok(_) => files.push(path),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("{}: {e}", path.display())),
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a load of `root` reads `path` (or, for a directory, looks
/// into it), by its name alone: `root` itself, or a path below the
/// directory `root` none of whose names below it is hidden (begins with
/// `.`: an editor's lock or copy, `.#api.yaml`, `.api.yaml.swp`, a
/// Kubernetes ConfigMap's `..data` and `..2024_…` directories), as
/// upstream's loader with `RUNTIME_IGNOREDOTFILES` (which its README
/// asks for with ConfigMaps).
pub(crate) fn is_config_file(root: &Path, path: &Path) -> bool {
    let (root, path) = (lexical(root), lexical(path));
    match path.strip_prefix(&root) {
        Ok(below) => below
            .components()
            .all(|name| !name.as_os_str().as_encoded_bytes().starts_with(b".")),
        Err(_) => false,
    }
}

/// Whether a change at `path` (a file written, made, renamed or removed)
/// may change what a load of `root` reads: one of [`is_config_file`]'s,
/// or a Kubernetes ConfigMap's swap, which renames a new `..data` link
/// over the old in `root`'s directory (or the directory `root` is in) and
/// touches no visible name. An editor's hidden files, a log or a state
/// file written elsewhere are not changes.
pub(crate) fn is_config_change(root: &Path, path: &Path) -> bool {
    if is_config_file(root, path) {
        return true;
    }
    let dir = if root.is_dir() {
        lexical(root)
    } else {
        lexical(root.parent().unwrap_or(Path::new(".")))
    };
    lexical(path)
        .strip_prefix(&dir)
        .ok()
        .and_then(|below| below.components().next())
        .is_some_and(|name| name.as_os_str().as_encoded_bytes().starts_with(b".."))
}

/// `path` absolute (from the working directory) without `.` components,
/// so that `./a.yaml` and `a.yaml` compare equal; links and `..` are left
/// as they are.
fn lexical(path: &Path) -> PathBuf {
    let absolute = if path.is_relative() {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |dir| dir.join(path))
    } else {
        path.to_path_buf()
    };
    absolute
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// Whether a request is over, from whether each of its limited
/// descriptors is over and is in quota mode: envoyproxy/ratelimit's rule,
/// over if any descriptor not in quota mode is over, or if there are
/// quota-mode descriptors and every one of them is over.
pub(crate) fn overall_over(descriptors: impl IntoIterator<Item = (bool, bool)>) -> bool {
    let (mut quotas, mut quotas_over) = (0usize, 0usize);
    for (over, quota_mode) in descriptors {
        if !quota_mode && over {
            return true;
        }
        quotas += usize::from(quota_mode);
        quotas_over += usize::from(quota_mode && over);
    }
    quotas > 0 && quotas == quotas_over
}

/// Where and what a YAML error is: the place first, once (the parser's
/// message ends with it too).
fn located(e: serde_yaml_ng::Error) -> String {
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
fn readable(what: &str) -> String {
    const MOST: usize = 120;
    let what = what.replace(
        "expected struct FileConfig",
        "expected a mapping with `domain` and `descriptors`",
    );
    if what.chars().count() <= MOST {
        return what;
    }
    let head: String = what.chars().take(MOST).collect();
    let tail: String = {
        let mut t: Vec<char> = what.chars().rev().take(60).collect();
        t.reverse();
        t.into_iter().collect()
    };
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

fn compile(
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
                    (None, Some(w)) => crate::parse::window(w)
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
fn metadata(yaml: &serde_yaml_ng::Value) -> Result<Struct, String> {
    match proto_value(yaml)?.kind {
        Some(Kind::StructValue(fields)) => Ok(fields),
        _ => Err("a mapping is wanted".into()),
    }
}

fn proto_value(yaml: &serde_yaml_ng::Value) -> Result<Value, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn envoy_files_load_and_match_as_envoy_does() {
        let yaml = r#"
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    rate_limit:
      unit: second
      requests_per_unit: 50
  - key: remote_address
    descriptors:
      - key: path
        rate_limits:
          - {unit: second, requests_per_unit: 2}
          - {window: 90s, requests_per_unit: 10, name: slow}
    shadow_mode: true
  - key: path
    value: /health
    rate_limit: {unlimited: true}
"#;
        let (domain, rules) = parse(yaml).unwrap();
        let config = Config {
            domains: HashMap::from([(domain, rules)]),
        };
        let rule = |e: &[(&str, &str)]| config.matching("mongo_cps", &entries(e));
        assert_eq!(
            rule(&[("database", "users")]).unwrap().label,
            "database=users"
        );
        assert_eq!(rule(&[("database", "other")]).unwrap().label, "database");
        let nested = rule(&[("remote_address", "1.2.3.4"), ("path", "/x")]).unwrap();
        assert_eq!(nested.label, "remote_address.path");
        match &nested.limit {
            Limit::Quota(q, shown) => {
                assert_eq!(q.policies().len(), 2);
                assert_eq!(q.policies()[1].window, Duration::from_secs(90));
                assert_eq!((shown[1].unit, shown[1].name.as_str()), (None, "slow"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            rule(&[("path", "/health")]).unwrap().limit,
            Limit::Unlimited
        ));
        assert!(rule(&[("path", "/other")]).is_none());
        assert!(rule(&[("unknown", "x")]).is_none());
        assert!(
            config
                .matching("other_domain", &entries(&[("database", "users")]))
                .is_none()
        );
        assert!(
            rule(&[("remote_address", "1.2.3.4")])
                .unwrap()
                .children
                .len()
                == 1
        );
    }

    #[test]
    fn errors_say_where_and_what() {
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
            .unwrap_err();
        assert!(e.contains("line 4") && e.contains("fortnight"), "{e}");
        assert_eq!(e.matches("line 4").count(), 1, "the place said once: {e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unt: 1}\n")
            .unwrap_err();
        assert!(
            e.contains("line 4") && e.contains("requests_per_unt"),
            "{e}"
        );
        let e =
            parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 3}\n")
                .unwrap_err();
        assert!(e.contains("`a`") && e.contains("`unit`"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 2000000}\n")
            .unwrap_err();
        assert!(e.contains("`a`") && e.contains("maximum"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}\n")
            .unwrap_err();
        assert!(e.contains("`a`") && e.contains("without a `name`"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: x, replaces: [{name: x}]}\n")
            .unwrap_err();
        assert!(e.contains("`a`") && e.contains("its own name `x`"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    metadata: [x]\n").unwrap_err();
        assert!(e.contains("`a`: `metadata`: a mapping"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n    metadata: {[x]: 1}\n").unwrap_err();
        assert!(e.contains("`a`: `metadata`: a key"), "{e}");
        let e = parse("domain: ''\n").unwrap_err();
        assert!(e.contains("domain"), "{e}");
        let e = parse("domain: d\ndescriptors:\n  - key: a\n  - key: a\n").unwrap_err();
        assert!(e.contains("twice"), "{e}");
        assert!(parse(": : :").is_err());
    }

    /// envoyproxy/ratelimit's zero limit, wildcard values and `replaces`:
    /// a zero blocks its descriptor whatever its other limits; at each
    /// level the exact value wins, then the first wildcard whose prefix
    /// begins the value, then the key alone.
    #[test]
    fn zeros_wildcards_and_replaces_load() {
        let yaml = r#"
domain: d
descriptors:
  - key: ip
    value: 10.0.0.1
    rate_limits:
      - {unit: second, requests_per_unit: 5}
      - {unit: minute, requests_per_unit: 0, name: banned}
  - key: path
    value: /a*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /ab*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /abc
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 4, replaces: [{name: banned}, {name: other}]}
"#;
        let (domain, rules) = parse(yaml).unwrap();
        let mut config = Config::default();
        config.domains.insert(domain, rules);
        let rule = |pairs: &[(&str, &str)]| config.matching("d", &entries(pairs));
        match &rule(&[("ip", "10.0.0.1")]).unwrap().limit {
            Limit::Blocked(shown, 1, window) => {
                assert_eq!(shown.len(), 2);
                assert_eq!(*window, Duration::from_secs(60));
            }
            other => panic!("{other:?}"),
        }
        let limit_of = |path: &str| match &rule(&[("path", path)]).unwrap().limit {
            Limit::Quota(q, _) => q.policies()[0].limit,
            other => panic!("{other:?}"),
        };
        // The first wildcard in the file's order, as upstream.
        assert_eq!(limit_of("/abd"), 1);
        assert_eq!(limit_of("/a"), 1);
        assert_eq!(limit_of("/abc"), 3);
        assert_eq!(limit_of("/b"), 4);
        assert_eq!(
            rule(&[("path", "/b")]).unwrap().replaces,
            ["banned", "other"]
        );
    }

    /// envoyproxy/ratelimit's newer fields: `*` anywhere in a value (its
    /// README's example 9), `share_threshold` (example 11, refused without
    /// a wildcard), `quota_mode`, and `value_to_metric` and `metadata`,
    /// which load and change no match.
    #[test]
    fn wildcards_anywhere_and_newer_fields_load() {
        let yaml = r#"
domain: d
descriptors:
  - key: path
    value: /api/*/action
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: route
    value: /api/*/resource/*/action
    value_to_metric: true
    metadata: {owner: team-a, tags: [x, y], nested: {n: 1}}
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: ends
    value: ab*ba
    rate_limit: {unit: hour, requests_per_unit: 1}
"#;
        let (domain, rules) = parse(yaml).unwrap();
        let mut config = Config::default();
        config.domains.insert(domain, rules);
        let label = |key: &str, value: &str| {
            config
                .matching("d", &entries(&[(key, value)]))
                .map(|r| r.label.clone())
        };
        assert_eq!(
            label("path", "/api/123/action").as_deref(),
            Some("path=/api/*/action")
        );
        assert_eq!(
            label("path", "/api//action").as_deref(),
            Some("path=/api/*/action")
        );
        assert_eq!(label("path", "/api/123/other"), None);
        assert_eq!(
            label("route", "/api/v1/resource/123/action").as_deref(),
            Some("route=/api/*/resource/*/action")
        );
        assert_eq!(label("route", "/api/v1/action/resource/1"), None);
        // The first and last parts may not overlap: `aba` is too short.
        assert_eq!(label("ends", "aba"), None);
        assert!(label("ends", "abba").is_some());
        let rule = config.matching("d", &entries(&[("path", "/api/1/action")]));
        assert!(rule.is_some_and(|r| r.quota_mode && !r.shared));
        let rule = config.matching("d", &entries(&[("files", "files/a.pdf")]));
        assert!(rule.is_some_and(|r| r.shared && !r.quota_mode));
        let e =
            parse("domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n")
                .unwrap_err();
        assert!(e.contains("`a=b`") && e.contains("share_threshold"), "{e}");
        let e =
            parse("domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n").unwrap_err();
        assert!(e.contains("wildcard"), "{e}");
    }

    /// One file's configuration.
    fn config_of(yaml: &str) -> Config {
        let (domain, rules) = parse(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let mut config = Config::default();
        config.domains.insert(domain, rules);
        config
    }

    /// The limit of the descriptor `entries` match in the only domain, `d`.
    fn limit_of<'c>(config: &'c Config, pairs: &[(&str, &str)]) -> &'c Limit {
        &config
            .matching("d", &entries(pairs))
            .unwrap_or_else(|| panic!("no match for {pairs:?}"))
            .limit
    }

    /// A one-descriptor file, `key: k`, with these lines of `rate_limit`.
    fn one_limit(rate_limit: &str) -> String {
        format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n{rate_limit}")
    }

    /// Upstream upper-cases a unit's name and looks it up among its seven
    /// (`UNKNOWN`, the protocol's zero, is none of them).
    #[test]
    fn units_are_read_in_any_case() {
        for (names, seconds) in [
            (["second", "SECOND", "Second", "sEcOnD"], 1),
            (["minute", "MINUTE", "Minute", "minUTE"], 60),
            (["hour", "HOUR", "Hour", "hOUR"], 3_600),
            (["day", "DAY", "Day", "dAy"], 86_400),
            (["week", "WEEK", "Week", "wEEK"], 7 * 86_400),
            (["month", "MONTH", "Month", "moNTH"], 30 * 86_400),
            (["year", "YEAR", "Year", "yeaR"], 365 * 86_400),
        ] {
            for name in names {
                let config = config_of(&one_limit(&format!(
                    "      unit: {name}\n      requests_per_unit: 3\n"
                )));
                match limit_of(&config, &[("k", "x")]) {
                    Limit::Quota(q, shown) => {
                        assert_eq!(q.policies()[0].window.as_secs(), seconds, "{name}");
                        assert_eq!(
                            shown[0].unit.map(Unit::duration),
                            Some(q.policies()[0].window)
                        );
                    }
                    other => panic!("{name}: {other:?}"),
                }
            }
        }
        for name in ["unknown", "UNKNOWN", "foo", "seconds", "1"] {
            let e = parse(&one_limit(&format!(
                "      unit: {name}\n      requests_per_unit: 5\n"
            )))
            .unwrap_err();
            assert!(
                e.contains("line 5") && e.contains(&format!("invalid rate limit unit '{name}'")),
                "{e}"
            );
        }
    }

    /// Upstream reads YAML 1.1, whose booleans are `yes`/`no`, `on`/`off`
    /// and `y`/`n` besides `true`/`false`, in three cases each, and null
    /// as false: every field that takes a boolean reads them so. A value
    /// or a key is text, whatever it looks like.
    #[test]
    fn booleans_are_yaml_1_1_ones() {
        let trues = [
            "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y",
        ];
        let falses = [
            "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N", "~",
            "null", "",
        ];
        for (words, on) in [(&trues[..], true), (&falses[..], false)] {
            for word in words {
                let yaml = format!(
                    "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: {word}\n    quota_mode: {word}\n    detailed_metric: {word}\n    value_to_metric: {word}\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n  - key: b\n    value: x*\n    share_threshold: {word}\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
                );
                let config = config_of(&yaml);
                let rule = |k: &str, v: &str| config.matching("d", &entries(&[(k, v)])).unwrap();
                let a = rule("a", "1");
                assert_eq!((a.shadow, a.quota_mode), (on, on), "{word:?}");
                assert_eq!(rule("b", "x1").shared, on, "{word:?}");
                // Not unlimited, a limit needs its unit.
                match parse(&one_limit(&format!("      unlimited: {word}\n"))) {
                    Ok((_, rules)) => assert!(on && matches!(rules[0].limit, Limit::Unlimited)),
                    Err(e) => assert!(!on && e.contains("`unit`"), "{word:?}: {e}"),
                }
            }
        }
        for word in ["maybe", "1", "0", "yES", "tRUE", "[true]", "{a: 1}"] {
            let e = parse(&format!(
                "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: {word}\n"
            ))
            .unwrap_err();
            assert!(
                e.contains("line 4") && e.contains("shadow_mode"),
                "{word}: {e}"
            );
        }
        // Text stays text: a value that YAML would read as a number or a
        // boolean is matched as written, as upstream's string fields take
        // a scalar's text.
        let config = config_of(
            "domain: d\ndescriptors:\n  - key: port\n    value: 8080\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: yes\n    value: on\n    rate_limit: {unit: second, requests_per_unit: 2}\n  - key: flag\n    value: true\n    rate_limit: {unit: second, requests_per_unit: 3}\n",
        );
        for (pair, limit) in [
            (("port", "8080"), 1),
            (("yes", "on"), 2),
            (("flag", "true"), 3),
        ] {
            match limit_of(&config, &[pair]) {
                Limit::Quota(q, _) => assert_eq!(q.policies()[0].limit, limit, "{pair:?}"),
                other => panic!("{pair:?}: {other:?}"),
            }
        }
    }

    /// Upstream's `requests_per_unit` is a plain integer: missing or null
    /// it is 0, which blocks every call (and counts none), reported with
    /// its unit. It is read as YAML 1.1 reads an integer.
    #[test]
    fn a_missing_requests_per_unit_blocks() {
        for rate_limit in [
            "      unit: second\n",
            "      unit: second\n      requests_per_unit:\n",
            "      unit: second\n      requests_per_unit: ~\n",
            "      unit: second\n      requests_per_unit: -0\n",
            "      unit: second\n      name: stop\n",
        ] {
            let config = config_of(&one_limit(rate_limit));
            match limit_of(&config, &[("k", "x")]) {
                Limit::Blocked(shown, 0, window) => {
                    assert_eq!(*window, Duration::from_secs(1));
                    assert_eq!(
                        (shown[0].requests_per_unit, shown[0].unit),
                        (0, Some(Unit::Second))
                    );
                }
                other => panic!("{rate_limit}: {other:?}"),
            }
        }
        // Beside another limit, a missing count still blocks.
        let config = config_of(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second, requests_per_unit: 5}\n      - {unit: minute}\n",
        );
        assert!(matches!(
            limit_of(&config, &[("k", "x")]),
            Limit::Blocked(_, 1, _)
        ));
        for (written, count) in [
            ("1_000", 1_000),
            ("0x10", 16),
            ("0X1f", 31),
            ("010", 8),
            ("0o10", 8),
            ("0b101", 5),
            ("+7", 7),
            ("1__2", 12),
        ] {
            let config = config_of(&one_limit(&format!(
                "      unit: hour\n      requests_per_unit: {written}\n"
            )));
            match limit_of(&config, &[("k", "x")]) {
                Limit::Quota(q, _) => assert_eq!(q.policies()[0].limit, count, "{written}"),
                other => panic!("{written}: {other:?}"),
            }
        }
        for written in [
            "-1",
            "1.5",
            "1e3",
            "08",
            "0x",
            "_5",
            "4294967296",
            "five",
            ".5",
            "2024-01-01",
        ] {
            let e = parse(&one_limit(&format!(
                "      unit: hour\n      requests_per_unit: {written}\n"
            )))
            .unwrap_err();
            assert!(
                e.contains("line 6") && e.contains("requests_per_unit") && e.contains(written),
                "{written}: {e}"
            );
        }
    }

    /// Upstream refuses a unit on an unlimited limit, in its words, and
    /// passes over a `requests_per_unit` there; `window` is refused as the
    /// unit is. `unlimited: false` is an ordinary limit.
    #[test]
    fn unlimited_with_a_unit_is_refused() {
        for extra in [
            "      unit: day\n      requests_per_unit: 25\n",
            "      unit: DAY\n",
            "      window: 90s\n",
        ] {
            let e = parse(&one_limit(&format!("      unlimited: true\n{extra}"))).unwrap_err();
            assert!(
                e.contains("`k`") && e.contains("should not specify rate limit"),
                "{extra}: {e}"
            );
        }
        let config = config_of(&one_limit(
            "      unlimited: true\n      requests_per_unit: 25\n",
        ));
        assert!(matches!(limit_of(&config, &[("k", "x")]), Limit::Unlimited));
        let config = config_of(&one_limit(
            "      unlimited: false\n      unit: day\n      requests_per_unit: 25\n",
        ));
        assert!(matches!(limit_of(&config, &[("k", "x")]), Limit::Quota(..)));
    }

    /// An empty `value` is none, as upstream keys a descriptor by its key
    /// alone then: it matches every value, and beside the key alone it is
    /// a duplicate.
    #[test]
    fn an_empty_value_is_none() {
        for value in ["''", "\"\"", "", "~"] {
            let config = config_of(&format!(
                "domain: d\ndescriptors:\n  - key: k\n    value: {value}\n    rate_limit: {{unit: second, requests_per_unit: 4}}\n"
            ));
            let rule = config.matching("d", &entries(&[("k", "any")])).unwrap();
            assert_eq!(
                (rule.label.as_str(), rule.value.as_deref()),
                ("k", None),
                "{value}"
            );
            let e = parse(&format!(
                "domain: d\ndescriptors:\n  - key: k\n  - key: k\n    value: {value}\n"
            ))
            .unwrap_err();
            assert!(e.contains("twice"), "{value}: {e}");
        }
    }

    /// Upstream reads a file's first YAML document: a trailing `---` (as
    /// generated files often end) loads; a second domain after one is
    /// refused rather than passed over.
    #[test]
    fn a_file_is_its_first_document() {
        let one = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n";
        for text in [
            format!("---\n{one}"),
            format!("{one}---\n"),
            format!("---\n{one}...\n---\n# nothing\n"),
        ] {
            let config = config_of(&text);
            assert!(
                matches!(limit_of(&config, &[("k", "x")]), Limit::Quota(..)),
                "{text}"
            );
        }
        let e = parse(&format!("{one}---\ndomain: e\n")).unwrap_err();
        assert!(e.contains("document 2") && e.contains("first"), "{e}");
        let e = parse("").unwrap_err();
        assert!(e.contains("domain"), "{e}");
    }

    /// A directory of upstream's shape: `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`
    /// with files of any name, subdirectories, an editor's leftovers, a
    /// Kubernetes ConfigMap's links through `..data`, a link to a
    /// directory and a dangling link.
    #[cfg(unix)]
    #[test]
    fn a_directory_loads_every_visible_file_below_it() {
        use std::os::unix::fs::symlink;
        let root = std::env::temp_dir().join(format!("slidelog-config-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let file = |at: &str, domain: &str| {
            let path = root.join(at);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                path,
                format!("domain: {domain}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"),
            )
            .unwrap();
        };
        // An empty directory: a configuration that limits nothing.
        std::fs::create_dir_all(&root).unwrap();
        let empty = Config::load(&root, false).unwrap();
        assert!(empty.domains.is_empty());
        assert!(empty.matching("any", &entries(&[("k", "x")])).is_none());

        file("a.yaml", "a");
        file("b.conf", "b");
        file("c", "c");
        file("sub/d.yml", "d");
        file("sub/deeper/e.txt", "e");
        // Hidden: the same domains again, which would be refused if read.
        file(".a.yaml.swp", "a");
        file(".git/objects/b", "b");
        file("sub/.d.yml", "d");
        symlink("user@host.42", root.join(".#a.yaml")).unwrap();
        // A ConfigMap: f.yaml -> ..data/f.yaml, ..data -> ..2026_01_01_00_00_00.1
        file("..2026_01_01_00_00_00.1/f.yaml", "f");
        symlink("..2026_01_01_00_00_00.1", root.join("..data")).unwrap();
        symlink("..data/f.yaml", root.join("f.yaml")).unwrap();
        // Not followed (its files would be read twice), and dangling.
        symlink("sub", root.join("again")).unwrap();
        symlink("nowhere.yaml", root.join("gone.yaml")).unwrap();

        let listed: Vec<String> = config_files(&root)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            listed,
            [
                "a.yaml",
                "b.conf",
                "c",
                "f.yaml",
                "sub/d.yml",
                "sub/deeper/e.txt"
            ]
        );
        let config = Config::load(&root, false).unwrap();
        let mut domains: Vec<&str> = config.domains.keys().map(String::as_str).collect();
        domains.sort_unstable();
        assert_eq!(domains, ["a", "b", "c", "d", "e", "f"]);
        // The file root loads whatever its name; an error names the file.
        assert_eq!(
            Config::load(&root.join("b.conf"), false)
                .unwrap()
                .domains
                .len(),
            1
        );
        std::fs::write(root.join("sub/deeper/notes.md"), "# not a configuration\n").unwrap();
        let e = Config::load(&root, false).unwrap_err();
        assert!(e.contains("notes.md") && e.contains("domain"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// What a load reads, and what changes may change it, by name.
    #[test]
    fn config_files_and_changes_are_told_by_name() {
        let dir =
            std::env::temp_dir().join(format!("slidelog-config-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |p: &str| dir.join(p);
        for (path, file, change) in [
            ("a.yaml", true, true),
            ("notes", true, true),
            ("sub/b.yml", true, true),
            ("sub/deeper", true, true),
            (".a.yaml.swp", false, false),
            (".#a.yaml", false, false),
            ("sub/.b.yml", false, false),
            (".git/config", false, false),
            ("..data", false, true),
            ("..data_tmp", false, true),
            ("..2026_01_01_00_00_00.1/a.yaml", false, true),
            ("sub/..data", false, false),
        ] {
            assert_eq!(is_config_file(&dir, &at(path)), file, "{path}");
            assert_eq!(is_config_change(&dir, &at(path)), change, "{path}");
        }
        let outside = dir.with_extension("log");
        assert!(!is_config_file(&dir, &outside) && !is_config_change(&dir, &outside));
        // Relative to the working directory, `.` components aside.
        let cwd = std::env::current_dir().unwrap();
        assert!(is_config_file(Path::new("."), Path::new("./a.yaml")));
        assert!(is_config_file(Path::new("x.yaml"), Path::new("./x.yaml")));
        assert!(is_config_file(&cwd.join("x.yaml"), Path::new("x.yaml")));
        assert!(is_config_change(Path::new("x.yaml"), Path::new("./..data")));
        assert!(!is_config_change(
            Path::new("x.yaml"),
            Path::new("./.x.yaml.swp")
        ));
        // A file root: itself, and a ConfigMap's swap beside it.
        let root = at("api.yaml");
        for (path, file, change) in [
            ("api.yaml", true, true),
            ("other.yaml", false, false),
            (".api.yaml.swp", false, false),
            ("..data", false, true),
            ("..2026_01_01_00_00_00.1/api.yaml", false, true),
        ] {
            assert_eq!(is_config_file(&root, &at(path)), file, "{path}");
            assert_eq!(is_config_change(&root, &at(path)), change, "{path}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Upstream's basic and shadow-mode fixtures' situations: a value with
    /// no limit of its own lets its children limit, and its key's default
    /// does not apply to it (a value listed without a limit is let
    /// through); a request deeper than the tree, or that leaves it, has no
    /// limit; names and modes are the descriptor's own.
    #[test]
    fn upstream_basic_fixture_matches_as_upstream() {
        let config = config_of(
            r#"
domain: d
descriptors:
  - key: key1
    value: value1
    descriptors:
      - {key: subkey1, rate_limit: {unit: second, requests_per_unit: 5}}
      - key: subkey1
        value: subvalue1
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 10}
  - {key: key2, shadow_mode: true, rate_limit: {unit: minute, requests_per_unit: 20}}
  - {key: key2, value: value2, rate_limit: {unit: minute, requests_per_unit: 30}}
  - {key: key2, value: value3}
  - {key: key4, rate_limit: {name: key4_rate_limit, unit: day, requests_per_unit: 1}}
  - key: key5
    value: value5
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - {key: subkey5, value: subvalue5, rate_limit: {unit: day, requests_per_unit: 25}}
  - {key: key6, rate_limit: {unlimited: true}}
"#,
        );
        let found = |pairs: &[(&str, &str)]| {
            config
                .matching("d", &entries(pairs))
                .and_then(|r| match &r.limit {
                    Limit::Quota(q, shown) => Some((
                        q.policies()[0].limit,
                        shown[0].unit,
                        shown[0].name.clone(),
                        r.shadow,
                    )),
                    Limit::Unlimited => Some((u32::MAX, None, String::new(), r.shadow)),
                    _ => None,
                })
        };
        let none = String::new;
        for (pairs, want) in [
            (&[("key1", "something")][..], None),
            (&[("key1", "value1")], None),
            (&[("key2", "value2"), ("subkey", "subvalue")], None),
            (&[("key5", "value5"), ("subkey5", "subvalue")], None),
            (&[("key2", "value3")], None),
            (
                &[("key1", "value1"), ("subkey1", "something")],
                Some((5, Some(Unit::Second), none(), false)),
            ),
            (
                &[("key1", "value1"), ("subkey1", "subvalue1")],
                Some((10, Some(Unit::Second), none(), true)),
            ),
            (
                &[("key2", "something")],
                Some((20, Some(Unit::Minute), none(), true)),
            ),
            (
                &[("key2", "value2")],
                Some((30, Some(Unit::Minute), none(), false)),
            ),
            (
                &[("key4", "x")],
                Some((1, Some(Unit::Day), "key4_rate_limit".into(), false)),
            ),
            (
                &[("key5", "value5"), ("subkey5", "subvalue5")],
                Some((25, Some(Unit::Day), none(), false)),
            ),
            (&[("key6", "x")], Some((u32::MAX, None, none(), false))),
        ] {
            assert_eq!(found(pairs), want, "{pairs:?}");
        }
        assert!(
            config
                .matching("other", &entries(&[("key2", "x")]))
                .is_none()
        );
    }

    /// A glob of literal parts and `*`s, matched by brute force: the
    /// reference for [`Pattern::matches`].
    fn glob(pattern: &[u8], value: &[u8]) -> bool {
        match pattern.split_first() {
            None => value.is_empty(),
            Some((b'*', rest)) => (0..=value.len()).any(|skip| glob(rest, &value[skip..])),
            Some((c, rest)) => value
                .split_first()
                .is_some_and(|(v, tail)| v == c && glob(rest, tail)),
        }
    }

    /// The overall code: any descriptor not in quota mode over, or every
    /// quota-mode descriptor over (and at least one).
    #[test]
    fn quota_mode_fails_a_request_only_when_every_quota_is_over() {
        let cases: [(&[(bool, bool)], bool); 8] = [
            (&[], false),
            (&[(false, false)], false),
            (&[(true, false)], true),
            (&[(true, true)], true),
            (&[(true, true), (false, true)], false),
            (&[(true, true), (true, true)], true),
            (&[(true, true), (false, true), (true, false)], true),
            (&[(true, true), (false, false)], true),
        ];
        for (descriptors, over) in cases {
            assert_eq!(
                overall_over(descriptors.iter().copied()),
                over,
                "{descriptors:?}"
            );
        }
    }

    /// Hostile files: nesting deeper than any tree needs, and aliases that
    /// expand exponentially ("billion laughs"), are refused with a message,
    /// not a stack overflow or an endless expansion.
    #[test]
    fn hostile_files_are_refused() {
        let depth = 1_000;
        let deep = format!(
            "domain: d\ndescriptors: {}{}",
            "[{key: a, descriptors: ".repeat(depth),
            "[]}]".repeat(depth)
        );
        let e = parse(&deep).unwrap_err();
        assert!(e.contains("recursion"), "{e}");
        // Each level's two children hold the level before: 2^30 descriptors.
        let mut laughs = String::from(
            "domain: d\ndescriptors:\n  - key: k0\n    descriptors: &d0\n      - {key: a}\n      - {key: b}\n",
        );
        for i in 1..30 {
            let p = i - 1;
            laughs.push_str(&format!(
                "  - key: k{i}\n    descriptors: &d{i}\n      - {{key: a, descriptors: *d{p}}}\n      - {{key: b, descriptors: *d{p}}}\n"
            ));
        }
        let e = parse(&laughs).unwrap_err();
        assert!(e.contains("repetition limit"), "{e}");
        // A few levels of the same are a tree like any other.
        let few: String = laughs
            .lines()
            .take(6 + 3 * 4)
            .map(|l| format!("{l}\n"))
            .collect();
        let (_, rules) = parse(&few).unwrap();
        assert_eq!(rules.len(), 4);
    }

    proptest::proptest! {
        /// Any text, and any few edits of a valid file: a configuration
        /// or an error, never a panic.
        #[test]
        fn parse_never_panics(
            text in "\\PC{0,200}",
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), 0..3u8,
                 proptest::sample::select(vec![' ', '\n', ':', '-', '{', '}', '[', ']', ',', '&', '*', '!', '0', '9', 'a', '"', '#', '|'])),
                1..6),
        ) {
            let _ = parse(&text);
            let mut yaml: Vec<char> = "domain: d\ndescriptors:\n  - key: a\n    value: b\n    rate_limits:\n      - {unit: second, requests_per_unit: 2}\n      - {window: 90s, requests_per_unit: 10}\n    descriptors:\n      - key: c\n        rate_limit: {unlimited: true}\n".chars().collect();
            for (at, op, c) in edits {
                let i = at.index(yaml.len() + 1);
                match op {
                    0 => yaml.insert(i, c),
                    1 if i < yaml.len() => { yaml.remove(i); }
                    _ if i < yaml.len() => yaml[i] = c,
                    _ => {}
                }
            }
            let _ = parse(&yaml.into_iter().collect::<String>());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// A wildcard matches exactly the values a brute-force glob does
        /// (short parts of a two-letter alphabet, so that parts recur and
        /// overlap, and values that often hold them).
        #[test]
        fn patterns_match_as_globs_do(
            parts in proptest::collection::vec("a|b|ab|ba|aa|", 2..6),
            value in proptest::collection::vec("a|b|ab|ba", 0..5),
        ) {
            let value = value.concat();
            let pattern = parts.join("*");
            let p = Pattern::new(&pattern).unwrap();
            proptest::prop_assert_eq!(
                p.matches(&value),
                glob(pattern.as_bytes(), value.as_bytes()),
                "{} on {}", pattern, value
            );
        }
    }
}
