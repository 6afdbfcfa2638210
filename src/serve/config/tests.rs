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
    let e = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 3}\n")
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
    let e = parse("domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n")
        .unwrap_err();
    assert!(e.contains("`a=b`") && e.contains("share_threshold"), "{e}");
    let e = parse("domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n").unwrap_err();
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
        "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N", "~", "null", "",
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

mod files;

/// A message is cut only where the cut removes something: one a little
/// over the head's length is whole, not its head and its tail overlapping.
#[test]
fn readable_cuts_only_long_messages() {
    let unit = "invalid rate limit unit 'fortnight' (second, minute, hour, day, week, month or year, in any case)";
    let message = format!("descriptors[0].rate_limit.unit: {unit}");
    assert_eq!(super::yaml::readable(&message), message);
    let long = format!("{}{}", "x".repeat(1_000), unit);
    let cut = super::yaml::readable(&long);
    assert_eq!(cut.chars().count(), 120 + 1 + 60);
    assert!(cut.ends_with("in any case)") && cut.contains('…'), "{cut}");
}
