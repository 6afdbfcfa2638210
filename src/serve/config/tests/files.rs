//! Files and directories, fixtures and hostile input.

use super::super::files::is_config_file;
use super::*;

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
    let dir = std::env::temp_dir().join(format!("slidelog-config-names-{}", std::process::id()));
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
