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
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | this map; the loaded tree ([`Config`], [`Rule`], [`Limit`]) and matching |
//! | `yaml.rs` | parsing: the file's serde shape, units, YAML 1.1 scalars, errors located |
//! | `compile.rs` | validation: a file's descriptors checked and made into rules |
//! | `files.rs` | which files of a directory are read, and which changes matter |
//! | `tests.rs`, `tests/files.rs` | unit tests |

mod compile;
mod files;
#[cfg(test)]
mod tests;
mod yaml;

use compile::*;
pub(crate) use files::{config_files, is_config_change};
pub use yaml::Unit;
pub(crate) use yaml::parse;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::Quota;
use envoy_types::pb::google::protobuf::Struct;

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

/// A rate-limit configuration in envoyproxy/ratelimit's YAML format: every
/// domain's descriptor tree, validated. [`Default`] is an empty one, which
/// limits nothing.
///
/// ```
/// use slidelog::serve::Config;
///
/// let config = Config::from_yaml(
///     "domain: edge
/// descriptors:
///   - key: remote_address
///     rate_limit: {unit: second, requests_per_unit: 10}
/// ",
/// )?;
/// assert_eq!(config.domains().collect::<Vec<_>>(), ["edge"]);
/// assert!(Config::from_yaml("domain: edge\ndescriptors: 3\n").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Default)]
pub struct Config {
    pub(crate) domains: HashMap<String, Vec<Rule>>,
}

impl Config {
    /// Parses one file's text: a domain and its descriptors.
    ///
    /// ```
    /// use slidelog::serve::Config;
    ///
    /// let config = Config::from_yaml("domain: edge\ndescriptors: []\n")?;
    /// assert_eq!(config.domains().next(), Some("edge"));
    /// # Ok::<(), String>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Text that is not a valid configuration: the message says the line
    /// and the reason.
    pub fn from_yaml(text: &str) -> Result<Config, String> {
        let (domain, rules) = parse(text)?;
        let mut config = Config::default();
        config.domains.insert(domain, rules);
        Ok(config)
    }

    /// The domains configured, in no particular order.
    ///
    /// ```
    /// use slidelog::serve::Config;
    ///
    /// assert_eq!(Config::default().domains().count(), 0);
    /// ```
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// Whether a configured descriptor matches `entries` in `domain` (for
    /// the fuzz targets).
    #[doc(hidden)]
    pub fn matches(&self, domain: &str, entries: &[(String, String)]) -> bool {
        self.matching(domain, entries).is_some()
    }

    /// Loads `path`: a YAML file, or every file below a directory, in
    /// its subdirectories too, hidden ones passed over (one domain each;
    /// none is an empty configuration, which limits nothing). Errors name the file, the
    /// line and what is wrong. A domain in two files is refused, unless
    /// `merge_domains` (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`): then
    /// a later file's descriptors join the domain's, after them, and one
    /// with a key and value the domain already has is refused.
    ///
    /// ```
    /// use slidelog::serve::Config;
    ///
    /// let dir = std::env::temp_dir().join(format!("slidelog-doc-load-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// std::fs::write(dir.join("edge.yaml"), "domain: edge\ndescriptors: []\n").unwrap();
    /// let config = Config::load(&dir, false)?;
    /// assert_eq!(config.domains().count(), 1);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), String>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A file that cannot be read or is not a valid configuration, or a
    /// domain defined twice: the message names the file, line and reason.
    pub fn load(path: &Path, merge_domains: bool) -> Result<Config, String> {
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
