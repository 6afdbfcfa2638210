//! The configuration described: `--check` and `GET /rlconfig`.

use super::*;

/// `slidelog serve --check`: loads the configuration as a start or a
/// reload would, and prints each domain with its descriptors (limits,
/// blocks, unlimited ones and those with no limit of their own).
///
/// ```
/// let file = std::env::temp_dir().join(format!("slidelog-doc-check-{}.yaml", std::process::id()));
/// std::fs::write(&file, "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5}\n").unwrap();
/// slidelog::serve::check(&file, false)?;
/// # std::fs::remove_file(&file).unwrap();
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
///
/// The configuration's error: the file, the line and the reason.
pub fn check(path: &std::path::Path, merge_domains: bool) -> Result<(), String> {
    let config = Config::load(path, merge_domains)?;
    let domains = config.domains.len();
    println!(
        "{}: valid, {domains} domain{}",
        path.display(),
        if domains == 1 { "" } else { "s" }
    );
    print!("{}", describe_config(&config));
    Ok(())
}

/// Each domain of `config`, by name, with its descriptors in order (their
/// limits, names, `replaces` and modes), a line each: what `--check`
/// prints and `GET /rlconfig` serves.
pub(super) fn describe_config(config: &Config) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut domains: Vec<_> = config.domains.iter().collect();
    domains.sort_by_key(|(name, _)| name.as_str());
    for (name, rules) in domains {
        let _ = writeln!(out, "domain {name}:");
        let mut stack: Vec<&Rule> = rules.iter().rev().collect();
        while let Some(rule) = stack.pop() {
            let what = match &rule.limit {
                Limit::None => "no limit of its own".to_string(),
                Limit::Unlimited => "unlimited".to_string(),
                Limit::Blocked(..) => "blocked (requests_per_unit: 0)".to_string(),
                Limit::Quota(quota, _) => quota
                    .policies()
                    .iter()
                    .map(|p| format!("{} per {}", p.limit, super::parse::show_duration(p.window)))
                    .collect::<Vec<_>>()
                    .join(" and "),
            };
            let mut flags = String::new();
            for (on, flag) in [
                (rule.shadow, "shadow_mode"),
                (rule.quota_mode, "quota_mode"),
                (rule.shared, "share_threshold"),
            ] {
                if on {
                    flags.push_str(", ");
                    flags.push_str(flag);
                }
            }
            let names = rule.limit.shown().iter().filter(|s| !s.name.is_empty());
            for shown in names {
                flags.push_str(&format!(", named {}", shown.name));
            }
            for replaced in &rule.replaces {
                flags.push_str(&format!(", replaces {replaced}"));
            }
            let _ = writeln!(out, "  {}: {what}{flags}", rule.label);
            stack.extend(rule.children.iter().rev());
        }
    }
    out
}
