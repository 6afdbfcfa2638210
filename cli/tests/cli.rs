//! The `slidelog` binary: demo, replay (numbers checked against the reference
//! model), and clear errors on malformed input.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use common::{Model, ModelDecision};

fn slidelog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_slidelog"))
}

/// The integer after `"name":` at the top level of our JSON (the totals come
/// first in the object).
fn json_number(json: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {json}"))
        + key.len();
    json[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Runs `command`, which must succeed; its stdout.
fn succeeds(command: &mut Command) -> String {
    String::from_utf8(succeeded(command).stdout).unwrap()
}

/// Runs `command`, which must succeed; its output.
fn succeeded(command: &mut Command) -> std::process::Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `command`, which must fail; its stderr.
fn fails(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write_temp(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("slidelog-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// Random traffic over a few keys, with RFC 3339 or epoch timestamps.
fn traffic(seed: u64, rows: usize, rfc3339: bool) -> (String, Vec<(u64, String)>) {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut csv = String::from("when,client,path\n");
    let mut events = Vec::new();
    let mut t_ms = 1_714_564_800_000u64; // 2024-05-01T12:00:00Z
    for _ in 0..rows {
        t_ms += next() % 120;
        let key = format!("10.0.0.{}", next() % 5);
        let secs = t_ms / 1000;
        let ms = t_ms % 1000;
        let stamp = if rfc3339 {
            // Seconds within 2024-05-01 (same day for these row counts).
            let sod = secs - 1_714_521_600;
            format!(
                "2024-05-01T{:02}:{:02}:{:02}.{ms:03}Z",
                sod / 3600,
                sod % 3600 / 60,
                sod % 60
            )
        } else {
            format!("{secs}.{ms:03}")
        };
        csv.push_str(&format!("{stamp},\"{key}\",/api\n"));
        events.push((t_ms * 1_000_000, key));
    }
    (csv, events)
}

#[test]
fn replay_matches_the_reference_model() {
    for (seed, rfc3339) in [(1u64, true), (2, false), (3, true)] {
        let (csv, events) = traffic(seed, 3_000, rfc3339);
        let path = write_temp(&format!("traffic-{seed}.csv"), &csv);
        let json = succeeds(
            slidelog()
                .args([
                    "replay",
                    path.to_str().unwrap(),
                    "--limit",
                    "5/1s",
                    "--time-column",
                    "when",
                ])
                .args(["--key-column", "client", "--format", "json"]),
        );

        let mut models: HashMap<String, Model> = HashMap::new();
        let (mut admitted, mut denied) = (0, 0);
        for (t, key) in &events {
            let model = models
                .entry(key.clone())
                .or_insert_with(|| Model::new(5, 1_000_000_000));
            match model.decide(*t, 1) {
                ModelDecision::Admitted { .. } => admitted += 1,
                _ => denied += 1,
            }
        }
        assert!(
            denied > 0 && admitted > 0,
            "the traffic should exercise both"
        );
        assert_eq!(json_number(&json, "requests"), events.len() as u64);
        assert_eq!(json_number(&json, "admitted"), admitted, "{json}");
        assert_eq!(json_number(&json, "denied"), denied, "{json}");
    }
}

#[test]
fn replay_reads_stdin_and_tsv() {
    let mut child = slidelog()
        .args([
            "replay",
            "-",
            "--limit",
            "1/1m",
            "--time-column",
            "t",
            "--key-column",
            "k",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"t\tk\n1\ta\n2\ta\n3\tb\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("exact log"), "{table}");
    let line = table.lines().find(|l| l.starts_with("exact log")).unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(2).collect();
    assert_eq!(numbers, ["3", "2", "1"], "{table}");
}

#[test]
fn malformed_input_fails_with_line_and_column() {
    let cases = [
        ("when,client\n1,a\nsoon,b\n", "line 3"),
        ("when,client\n2024-13-01T00:00:00Z,a\n", "line 2"),
        ("time,client\n1,a\n", "line 1"),
        ("when,client\n100,a\n1,b\n", "line 3"),
        ("when,client\n1,\"a\n", "line 2"),
        ("", "empty"),
    ];
    for (i, (contents, expect)) in cases.into_iter().enumerate() {
        let path = write_temp(&format!("bad-{i}.csv"), contents);
        let out = slidelog()
            .args(["replay", path.to_str().unwrap(), "--limit", "5/1s"])
            .args(["--time-column", "when", "--key-column", "client"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "case {i} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "case {i}: {err}");
        assert!(!err.contains("panicked"), "case {i}: {err}");
        // A bad timestamp and time going back name the way past them; the
        // other failures are not skipped that way (a missing column, an
        // unclosed quote that runs to the end, nothing to read).
        let skippable = i < 2 || i == 3;
        assert_eq!(
            err.contains("--skip-malformed skips"),
            skippable,
            "case {i}: {err}"
        );
    }
    let out = slidelog()
        .args([
            "replay",
            "/nonexistent/file.csv",
            "--limit",
            "1/1s",
            "--time-column",
            "a",
            "--key-column",
            "b",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = slidelog()
        .args([
            "replay",
            "-",
            "--limit",
            "0/1s",
            "--time-column",
            "a",
            "--key-column",
            "b",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
}

/// Runs `slidelog demo` with `args` (200 ms phases, 100 keys), expects
/// success, and returns its standard output.
fn demo(args: &[&str]) -> String {
    succeeds(
        slidelog()
            .args(["demo", "--duration", "200ms", "--keys", "100"])
            .args(args),
    )
}

#[test]
fn demo_proves_itself() {
    let text = demo(&["--threads", "2", "--limit", "5", "--window", "1ms"]);
    for word in [
        "checks/s",
        "admitted",
        "denied",
        "max in window",
        "exact: yes",
    ] {
        assert!(text.contains(word), "missing {word}: {text}");
    }
    // A key space far beyond memory: the run touches only the keys its
    // calls reach (a table made up front for them all cannot be allocated).
    let text = succeeds(
        slidelog()
            .args(["demo", "--duration", "100ms", "--threads", "2"])
            .args(["--keys", "1000000000000"]),
    );
    assert!(
        text.contains("1000000000000 keys") && text.contains("exact: yes"),
        "{text}"
    );
}

/// A limit or window the demo cannot take is refused before any banner,
/// and a zero duration is refused naming what it is: a window, or the
/// run's length — while `--tolerance 0s` (no timestamp may go back) is a
/// tolerance like any other.
#[test]
fn zero_and_out_of_range_values_are_refused_by_name() {
    for (flag, value) in [("--limit", "0"), ("--window", "100000d")] {
        let out = slidelog()
            .args(["demo", "--duration", "200ms", "--keys", "10", flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        assert!(
            out.stdout.is_empty(),
            "{flag} {value}: a banner was printed"
        );
        assert!(!out.stderr.is_empty(), "{flag} {value}: no reason given");
    }
    let error = fails(slidelog().args(["demo", "--window", "0s"]));
    assert!(error.contains("a window must be longer"), "{error}");
    let error = fails(slidelog().args(["demo", "--duration", "0s"]));
    assert!(
        error.contains("is zero") && !error.contains("window"),
        "{error}"
    );
    let csv = write_temp("tolerance_zero.csv", "t,k\n1,a\n2,a\n3,b\n");
    let out = succeeded(
        slidelog()
            .arg("replay")
            .arg(&csv)
            .args(["--limit", "1/1h", "--time-column", "t", "--key-column", "k"])
            .args(["--time-unit", "s", "--format", "json", "--tolerance", "0s"]),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["admitted"], 2);
    assert_eq!(json["denied"], 1);
    let backwards = write_temp("tolerance_zero_back.csv", "t,k\n2,a\n1,a\n");
    let error = fails(
        slidelog()
            .arg("replay")
            .arg(&backwards)
            .args(["--limit", "1/1h", "--time-column", "t", "--key-column", "k"])
            .args(["--time-unit", "s", "--tolerance", "0s"]),
    );
    assert!(error.contains("goes back"), "{error}");
}

/// The counter in both phases, judged on its own guarantee (N consecutive
/// slots), and far smaller per key than the log at a large limit.
#[test]
fn demo_with_the_counter() {
    let run = |algorithm: &str| {
        demo(&[
            "--limit",
            "1000",
            "--window",
            "5ms",
            "--algorithm",
            algorithm,
            "--slots",
            "5",
        ])
    };
    let bytes_per_key = |text: &str| -> usize {
        let row = text.lines().find(|l| l.starts_with("100 keys")).unwrap();
        row.split_whitespace().last().unwrap().parse().unwrap()
    };
    let counter = run("counter");
    assert!(counter.contains("counter guarantee: yes"), "{counter}");
    assert!(counter.contains("N slots"), "{counter}");
    let log = run("log");
    assert!(log.contains("exact: yes"), "{log}");
    // 7 words per key against 1,001.
    assert!(
        bytes_per_key(&counter) * 10 < bytes_per_key(&log),
        "{counter}\n{log}"
    );
    let out = slidelog()
        .args(["demo", "--algorithm", "counter", "--slots", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("slot"));
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        vec!["--help"],
        vec!["demo", "--help"],
        vec!["bench", "--help"],
        vec!["replay", "--help"],
    ] {
        let out = slidelog().args(&sub).output().unwrap();
        assert!(out.status.success(), "{sub:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
}

/// `slidelog bench` names the host its figures were measured on, above
/// them: a ratio means little without it.
#[test]
fn bench_prints_the_cpu_model_above_its_figures() {
    let stdout = succeeds(slidelog().args(["bench", "--seconds", "0.5"]));
    let lines: Vec<&str> = stdout.lines().collect();
    let cpu = lines
        .iter()
        .position(|l| {
            l.strip_prefix("CPU: ")
                .is_some_and(|m| !m.trim().is_empty())
        })
        .unwrap_or_else(|| panic!("no CPU line in:\n{stdout}"));
    let first_figure = lines
        .iter()
        .position(|l| l.starts_with("allow, 1 thread"))
        .unwrap_or_else(|| panic!("no figures in:\n{stdout}"));
    assert!(
        cpu < first_figure,
        "the CPU line comes after the figures:\n{stdout}"
    );
}

/// A budget out of range is refused with the range and the value given,
/// before anything runs.
#[test]
fn bench_refuses_a_budget_out_of_range() {
    for seconds in ["0", "3600", "NaN", "inf"] {
        let stderr = fails(slidelog().args(["bench", "--seconds", seconds]));
        assert!(
            stderr.contains("--seconds must be more than 0 and less than 3600"),
            "{seconds}: {stderr}"
        );
    }
    // No threads for the contended rows is refused too, not run on one.
    let stderr = fails(slidelog().args(["bench", "--threads", "0", "--seconds", "1"]));
    assert!(stderr.contains("--threads must be at least 1"), "{stderr}");
    // Nor a hundred thousand threads (a typo), in bench or demo: refused
    // before any starts.
    for command in ["bench", "demo"] {
        let out = slidelog()
            .args([command, "--threads", "100000"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: {stderr}");
        assert!(
            stderr.contains("--threads 100000 is more than 1024"),
            "{command}: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{command} started: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The model's admitted and denied counts for `events` at `limit` per `window_ns`.
fn model_counts(events: &[(u64, String)], limit: u32, window_ns: u64) -> (u64, u64) {
    let mut models: HashMap<String, Model> = HashMap::new();
    let (mut admitted, mut denied) = (0, 0);
    for (t, key) in events {
        let model = models
            .entry(key.clone())
            .or_insert_with(|| Model::new(limit, window_ns));
        match model.decide(*t, 1) {
            ModelDecision::Admitted { .. } => admitted += 1,
            _ => denied += 1,
        }
    }
    (admitted, denied)
}

fn replay_json(path: &std::path::Path, args: &[&str]) -> String {
    succeeds(
        slidelog()
            .args(["replay", path.to_str().unwrap(), "--format", "json"])
            .args(args),
    )
}

/// Epoch milliseconds are read as milliseconds (detected by
/// magnitude, or forced with --time-unit), not as seconds: three rows
/// 100 ms apart under 1/1s admit one.
#[test]
fn replay_reads_epoch_milliseconds() {
    let path = write_temp(
        "ms.csv",
        "ts,ip\n1764504000000,a\n1764504000100,a\n1764504000200,a\n",
    );
    let json = replay_json(
        &path,
        &[
            "--limit",
            "1/1s",
            "--time-column",
            "ts",
            "--key-column",
            "ip",
        ],
    );
    assert_eq!(json_number(&json, "admitted"), 1, "{json}");
    assert_eq!(json_number(&json, "denied"), 2, "{json}");
    // Forced: small numbers read as milliseconds (by magnitude they would
    // be seconds, 100 s apart, all admitted).
    let path = write_temp("ms-small.csv", "ts,ip\n100,a\n200,a\n300,a\n");
    let args = [
        "--limit",
        "1/1s",
        "--time-column",
        "ts",
        "--key-column",
        "ip",
    ];
    let json = replay_json(&path, &args);
    assert_eq!(json_number(&json, "admitted"), 3, "{json}");
    let json = replay_json(&path, &[&args[..], &["--time-unit", "ms"]].concat());
    assert_eq!(json_number(&json, "admitted"), 1, "{json}");
    // Epoch-ms traffic against the model.
    let (_, events) = traffic(7, 2_000, false);
    let mut csv = String::from("when,client\n");
    for (t, key) in &events {
        csv.push_str(&format!("{},{key}\n", t / 1_000_000));
    }
    let path = write_temp("ms-traffic.csv", &csv);
    let json = replay_json(
        &path,
        &[
            "--limit",
            "5/1s",
            "--time-column",
            "when",
            "--key-column",
            "client",
        ],
    );
    let (admitted, denied) = model_counts(&events, 5, 1_000_000_000);
    assert!(admitted > 0 && denied > 0);
    assert_eq!(json_number(&json, "admitted"), admitted, "{json}");
    assert_eq!(json_number(&json, "denied"), denied, "{json}");
}

/// An nginx/Apache combined log, generated from the same traffic,
/// replays to the model's numbers, keyed by the client address (or by
/// another field with --key-column).
#[test]
fn replay_reads_the_combined_log_format() {
    let (_, events) = traffic(11, 2_000, true);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let _ = months;
    let mut log = String::new();
    // Whole seconds: the combined format has no fraction.
    let events: Vec<(u64, String)> = events
        .into_iter()
        .map(|(t, k)| (t / 1_000_000_000 * 1_000_000_000, k))
        .collect();
    for (t, key) in &events {
        let sod = t / 1_000_000_000 - 1_714_521_600; // 2024-05-01
        log.push_str(&format!(
            "{key} - user{} [01/May/2024:{:02}:{:02}:{:02} +0000] \"GET /a?q=\\\"x\\\" HTTP/1.1\" 200 512 \"-\" \"curl/8.0\"\n",
            key.len(),
            sod / 3600,
            sod % 3600 / 60,
            sod % 60
        ));
    }
    let path = write_temp("access.log", &log);
    let json = replay_json(&path, &["--input", "combined", "--limit", "3/2s"]);
    let (admitted, denied) = model_counts(&events, 3, 2_000_000_000);
    assert!(admitted > 0 && denied > 0);
    assert_eq!(json_number(&json, "requests"), events.len() as u64);
    assert_eq!(json_number(&json, "admitted"), admitted, "{json}");
    assert_eq!(json_number(&json, "denied"), denied, "{json}");
    // Keyed by the user field: every line has the same user, one key.
    let json = replay_json(
        &path,
        &[
            "--input",
            "combined",
            "--limit",
            "3/2s",
            "--key-column",
            "user",
        ],
    );
    assert_eq!(json_number(&json, "keys"), 1, "{json}");
}

/// No header (columns by number), a UTF-8 BOM, date-times without
/// a zone taken in --tz, and short error messages for huge bad fields.
#[test]
fn replay_no_header_bom_zones_and_short_errors() {
    let path = write_temp(
        "nohdr.csv",
        "\u{feff}2026-11-30 13:00:00,a\n2026-11-30 13:00:00.5,a\n",
    );
    let json = replay_json(
        &path,
        &[
            "--no-header",
            "--time-column",
            "1",
            "--key-column",
            "2",
            "--limit",
            "1/1s",
            "--tz",
            "Europe/Paris",
        ],
    );
    assert_eq!(json_number(&json, "admitted"), 1, "{json}");
    assert_eq!(json_number(&json, "denied"), 1, "{json}");
    let path = write_temp("bom.csv", "\u{feff}when,who\n1,a\n");
    let json = replay_json(
        &path,
        &[
            "--time-column",
            "when",
            "--key-column",
            "who",
            "--limit",
            "1/1s",
        ],
    );
    assert_eq!(json_number(&json, "admitted"), 1, "{json}");
    let huge = format!("when,who\n{},a\n", "x".repeat(1_000_000));
    let path = write_temp("huge.csv", &huge);
    let out = slidelog()
        .args(["replay", path.to_str().unwrap(), "--limit", "1/1s"])
        .args(["--time-column", "when", "--key-column", "who"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.len() < 500,
        "{} bytes: {}",
        err.len(),
        &err[..err.len().min(300)]
    );
    let out = slidelog()
        .args([
            "replay",
            path.to_str().unwrap(),
            "--limit",
            "1/1s",
            "--input",
            "combined",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// Stacked `--limit` flags are one multi-policy limiter per key: a
/// request counts against every policy or none, and each denial is
/// credited to the policy that decided it.
#[test]
fn stacked_limits_are_one_multi_policy_limiter() {
    // 2 per 10 s and 3 per 60 s: t=5 is refused by the first, t=11 by the
    // second (whose window still holds 0, 0 and 10), t=60 fits again.
    let path = write_temp(
        "stacked.csv",
        "when,client\n0,a\n0,a\n5,a\n10,a\n11,a\n60,a\n0,b\n",
    );
    let stdout = succeeds(
        slidelog()
            .args(["replay", path.to_str().unwrap()])
            .args(["--limit", "2/10s", "--limit", "3/60s", "--time-unit", "s"])
            .args([
                "--time-column",
                "when",
                "--key-column",
                "client",
                "--format",
                "json",
            ])
            .args(["--tolerance", "60s"]),
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["requests"], 7);
    assert_eq!(json["admitted"], 5);
    assert_eq!(json["denied"], 2);
    assert_eq!(json["policies"][0]["decided"], 1);
    assert_eq!(json["policies"][1]["decided"], 1);
}

/// `replay --plot` draws the timeline and the top keys; progress goes to
/// stderr as plain lines (stderr is not a terminal here), never `\r`.
#[test]
fn replay_plots_and_reports_progress_without_carriage_returns() {
    let mut log = String::from("when,client\n");
    for i in 0..10_000u64 {
        // 10 requests per ms from "noisy", one per 10 ms from "quiet".
        log.push_str(&format!("{},noisy\n", i * 100_000));
        if i % 100 == 0 {
            log.push_str(&format!("{},quiet\n", i * 100_000));
        }
    }
    let path = write_temp("plot.csv", &log);
    let svg = std::env::temp_dir().join(format!("slidelog-plot-{}.svg", std::process::id()));
    let out = slidelog()
        .env("SLIDELOG_PROGRESS_SECS", "0")
        .args([
            "replay",
            path.to_str().unwrap(),
            "--limit",
            "100/1s",
            "--time-unit",
            "ns",
        ])
        .args(["--time-column", "when", "--key-column", "client"])
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !err.contains('\r'),
        "a carriage return in plain progress: {err:?}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("replay: ") && l.contains("lines/s")),
        "{err}"
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(
        drawn.starts_with("<svg"),
        "{}",
        &drawn[..drawn.len().min(200)]
    );
    assert!(drawn.contains("requests per second"));
    assert!(drawn.contains("noisy"), "the top key is drawn");
    assert!(
        !drawn.contains(">quiet<"),
        "a key never denied is not a top offender"
    );
}

/// A plot with nowhere to go is refused before the replay runs: no report
/// first and an error after it.
#[test]
fn replay_refuses_a_plot_with_no_directory_before_it_reads() {
    let path = write_temp("noplot.csv", "when,client\n1,a\n2,a\n");
    let nowhere = std::env::temp_dir()
        .join(format!("slidelog-no-such-dir-{}", std::process::id()))
        .join("out.svg");
    let out = slidelog()
        .args(["replay", path.to_str().unwrap(), "--limit", "1/1s"])
        .args(["--time-column", "when", "--key-column", "client"])
        .arg("--plot")
        .arg(&nowhere)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--plot") && err.contains("there is no directory"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "the report was printed before the error: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The report's key line: a table of offenders when some key was denied,
/// one line saying none was otherwise, and a count that agrees in number.
#[test]
fn replay_says_when_no_key_was_denied() {
    let calm = write_temp("calm.csv", "when,client\n1,a\n2,b\n3,a\n");
    let run = |path: &std::path::Path, limit: &str| {
        succeeds(
            slidelog()
                .args(["replay", path.to_str().unwrap(), "--limit", limit])
                .args(["--time-column", "when", "--key-column", "client"]),
        )
    };
    let out = run(&calm, "2/1h");
    assert!(out.contains("2 keys; none was denied"), "{out}");
    assert!(!out.contains("top offenders"), "{out}");
    let out = run(&calm, "1/1h");
    assert!(out.contains("2 keys; top offenders:"), "{out}");
    let lonely = write_temp("lonely.csv", "when,client\n1,a\n2,a\n");
    let out = run(&lonely, "1/1h");
    assert!(out.contains("1 key; top offenders:"), "{out}");
    let row = out.lines().last().unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["a", "2", "1", "1"],
        "{out}"
    );
}

/// A log's text reaches the terminal and the chart escaped: a key or a
/// field carrying ESC, a carriage return, BEL or Unicode's direction
/// overrides cannot clear the screen, retitle the window, overwrite a line
/// or reorder what is shown, in the offenders table, in the malformed
/// lines' summary, in an error, or in the SVG (where such characters make
/// the file unreadable).
#[test]
fn log_text_is_shown_escaped() {
    let evil = "\u{1b}[2J\rX\u{202e}\u{7}";
    let log = format!("when,client\n1,\"{evil}\"\n2,\"{evil}\"\n\"9\u{1b}]0;pwned\u{7}\",a\n");
    let path = write_temp("evil.csv", &log);
    let dir = std::env::temp_dir().join(format!("slidelog-evil-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plot = dir.join("evil.svg");
    let out = succeeded(
        slidelog()
            .args(["replay", path.to_str().unwrap(), "--limit", "1/1h"])
            .args(["--time-column", "when", "--key-column", "client"])
            .args(["--skip-malformed=50%", "--plot", plot.to_str().unwrap()]),
    );
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    for (what, text) in [("stdout", &stdout), ("stderr", &stderr), ("svg", &svg)] {
        for hidden in ['\u{1b}', '\r', '\u{7}', '\u{202e}'] {
            assert!(
                !text.contains(hidden),
                "{what} shows {hidden:?} raw:\n{text:?}"
            );
        }
    }
    assert!(
        stdout.contains("\\u{1b}[2J\\u{d}X\\u{202e}\\u{7}"),
        "{stdout}"
    );
    assert!(stderr.contains("\\u{1b}]0;pwned\\u{7}"), "{stderr}");
    assert!(svg.contains("\\u{1b}[2J"), "{svg}");
    // Stopping at the bad timestamp: the error shows it escaped too.
    let err = fails(
        slidelog()
            .args(["replay", path.to_str().unwrap(), "--limit", "1/1h"])
            .args(["--time-column", "when", "--key-column", "client"]),
    );
    assert!(
        !err.contains('\u{1b}') && err.contains("\\u{1b}]0;pwned"),
        "{err:?}"
    );
}

/// A line longer than 1 MiB (a corrupt or hostile log) is one malformed
/// line: named, with the way past it, and skipped and counted with
/// `--skip-malformed`, the lines after it read as ever.
#[test]
fn a_line_over_a_mib_is_malformed() {
    let huge = "k".repeat((1 << 20) + 1);
    let path = write_temp(
        "huge.csv",
        &format!("when,client\n1,a\n2,{huge}\n3,a\n4,b\n"),
    );
    let columns = ["--time-column", "when", "--key-column", "client"];
    let err = fails(
        slidelog()
            .args(["replay", path.to_str().unwrap(), "--limit", "1/1h"])
            .args(columns),
    );
    assert!(
        err.contains("line 3: longer than 1 MiB") && err.contains("--skip-malformed skips"),
        "{err}"
    );
    let json = replay_json(
        &path,
        &[
            "--limit",
            "1/1h",
            "--skip-malformed=1",
            "--time-column",
            "when",
            "--key-column",
            "client",
        ],
    );
    assert_eq!(json_number(&json, "malformed"), 1, "{json}");
    assert_eq!(json_number(&json, "requests"), 3, "{json}");
    assert_eq!(json_number(&json, "denied"), 1, "{json}");
}

/// `--skip-malformed` takes an optional value, so a log named after it is
/// taken for the value: the error says so, and how to write it instead.
#[test]
fn a_log_after_skip_malformed_is_explained() {
    let path = write_temp("after.log", "when,client\n1,a\n");
    let err = fails(
        slidelog()
            .args([
                "replay",
                "--limit",
                "1/1s",
                "--time-column",
                "when",
                "--key-column",
                "client",
            ])
            .arg("--skip-malformed")
            .arg(&path),
    );
    assert!(
        err.contains("is it the log?") && err.contains("--skip-malformed=1%"),
        "{err}"
    );
    // A value that is neither a limit nor a file: no such hint.
    let err = fails(
        slidelog()
            .args(["replay", path.to_str().unwrap(), "--limit", "1/1s"])
            .args(["--skip-malformed", "lots"]),
    );
    assert!(
        err.contains("a number of lines") && !err.contains("is it the log?"),
        "{err}"
    );
}

/// The demo's progress is plain lines when stderr is not a terminal.
#[test]
fn demo_progress_is_plain_off_a_terminal() {
    let out = slidelog()
        .env("SLIDELOG_PROGRESS_SECS", "0")
        .args([
            "demo",
            "--duration",
            "300ms",
            "--keys",
            "100",
            "--threads",
            "2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\r'), "{err:?}");
    assert!(err.contains("checks/s"), "{err}");
}

/// A real log is not clean: `--skip-malformed` counts unreadable lines
/// (bad fields, bad timestamps, truncated combined lines), shows the first
/// ones with their line numbers, replays the rest to the model's numbers,
/// and fails only above its limit; a gzip-compressed log is read directly;
/// `--json` is `--format json`; `--key-column ip` names the combined log's
/// host.
#[test]
fn replay_survives_real_logs() {
    let (_, events) = traffic(23, 1_500, true);
    let events: Vec<(u64, String)> = events
        .into_iter()
        .map(|(t, k)| (t / 1_000_000_000 * 1_000_000_000, k))
        .collect();
    let line_of = |t: u64, key: &str| {
        let sod = t / 1_000_000_000 - 1_714_521_600;
        format!(
            "{key} - - [01/May/2024:{:02}:{:02}:{:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl\"\n",
            sod / 3600,
            sod % 3600 / 60,
            sod % 60
        )
    };
    let mut log = String::new();
    let mut bad_lines = Vec::new();
    for (i, (t, key)) in events.iter().enumerate() {
        if i % 100 == 7 {
            log.push_str("garbage without any structure\n");
            bad_lines.push(log.lines().count());
        }
        if i % 250 == 3 {
            log.push_str(&line_of(*t, key).replace("May/2024", "Mai/2024"));
            bad_lines.push(log.lines().count());
        }
        log.push_str(&line_of(*t, key));
    }
    let malformed = bad_lines.len() as u64;
    let (admitted, denied) = model_counts(&events, 3, 2_000_000_000);

    // Without the flag: the first bad line is an error naming it.
    let path = write_temp("dirty.log", &log);
    let out = slidelog()
        .args([
            "replay",
            path.to_str().unwrap(),
            "--input",
            "combined",
            "--limit",
            "3/2s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("line {}", bad_lines[0])),
        "{stderr}"
    );

    // With it: the numbers of the clean lines, the bad ones counted.
    let out = slidelog()
        .args([
            "replay",
            path.to_str().unwrap(),
            "--input",
            "combined",
            "--json",
        ])
        .args([
            "--limit",
            "3/2s",
            "--key-column",
            "ip",
            "--skip-malformed",
            "5%",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let json = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        json_number(&json, "requests"),
        events.len() as u64,
        "{json}"
    );
    assert_eq!(json_number(&json, "admitted"), admitted, "{json}");
    assert_eq!(json_number(&json, "denied"), denied, "{json}");
    assert_eq!(json_number(&json, "malformed"), malformed, "{json}");
    assert!(
        stderr.contains(&format!(
            "skipped {malformed} malformed or out-of-order lines"
        )) && stderr.contains(&format!("line {}", bad_lines[0])),
        "{stderr}"
    );
    // Above the limit (a count this time): an error that says so.
    let stderr = fails(
        slidelog()
            .args([
                "replay",
                path.to_str().unwrap(),
                "--input",
                "combined",
                "--json",
            ])
            .args(["--limit", "3/2s", "--skip-malformed", "3"]),
    );
    assert!(stderr.contains("more than 3 malformed lines"), "{stderr}");

    // The same log gzip-compressed: read directly, the same numbers.
    let gz = write_temp("dirty.log.gz", "");
    {
        let mut encoder = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::default(),
        );
        encoder.write_all(log.as_bytes()).unwrap();
        encoder.finish().unwrap();
    }
    let json = replay_json(
        &gz,
        &[
            "--input",
            "combined",
            "--limit",
            "3/2s",
            "--skip-malformed=2%",
        ],
    );
    assert_eq!(json_number(&json, "admitted"), admitted, "{json}");
    // The default limit without a value is 1%: 21 of 1,521 is above it.
    let stderr = fails(
        slidelog()
            .args(["replay", gz.to_str().unwrap(), "--input", "combined"])
            .args(["--limit", "3/2s", "--skip-malformed"]),
    );
    assert!(stderr.contains("above --skip-malformed 1%"), "{stderr}");
    assert_eq!(json_number(&json, "malformed"), malformed, "{json}");
}

/// IPv6 clients keyed by prefix as the tower layer's `ipv6_prefix` does;
/// a policy given twice is refused; a CSV run on a combined log suggests
/// `--input combined`; a long key does not break the table's columns.
#[test]
fn replay_keys_prefixes_and_explains() {
    let csv = "ts,ip\n0,2001:db8::1\n0,2001:db8::2\n0,2001:db8:0:1::1\n0,10.0.0.1\n";
    let path = write_temp("v6.csv", csv);
    let args = [
        "--time-column",
        "ts",
        "--key-column",
        "ip",
        "--limit",
        "1/1s",
    ];
    let json = replay_json(&path, &args);
    assert_eq!(json_number(&json, "denied"), 0, "{json}");
    let json = replay_json(&path, &[&args[..], &["--ipv6-prefix", "64"]].concat());
    assert_eq!(
        json_number(&json, "denied"),
        1,
        "one /64, two addresses: {json}"
    );
    assert_eq!(json_number(&json, "keys"), 3, "{json}");
    assert!(json.contains("2001:db8::/64"), "{json}");

    let stderr = fails(
        slidelog()
            .args(["replay", path.to_str().unwrap()])
            .args(["--time-column", "ts", "--key-column", "ip"])
            .args(["--limit", "1/1s", "--limit", "5/1m", "--limit", "1/1s"]),
    );
    assert!(stderr.contains("given twice"), "{stderr}");

    let combined = write_temp(
        "looks-combined.log",
        "10.0.0.1 - - [01/May/2024:00:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl\"\n",
    );
    let stderr = fails(
        slidelog()
            .args(["replay", combined.to_str().unwrap()])
            .args([
                "--time-column",
                "ts",
                "--key-column",
                "ip",
                "--limit",
                "1/1s",
            ]),
    );
    assert!(stderr.contains("--input combined"), "{stderr}");

    let long = "k".repeat(200);
    let path = write_temp("long.csv", &format!("ts,ip\n0,{long}\n0,{long}\n"));
    let out = slidelog()
        .args(["replay", path.to_str().unwrap()])
        .args([
            "--time-column",
            "ts",
            "--key-column",
            "ip",
            "--limit",
            "1/1s",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with("kkk"))
        .expect("the offender's row");
    assert!(row.chars().count() <= 32 + 3 * 13, "{row}");
    assert!(row.contains('…'), "{row}");
    assert!(row.trim_end().ends_with('1'), "{row}");
}

/// A reader that stops early (`slidelog demo | head -1`) ends the process
/// quietly, as it ends other command-line tools: killed by `SIGPIPE`, not
/// by a `println!` panic with its message and backtrace on stderr.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    /// `SIGPIPE`'s number on Linux and the BSDs.
    const SIGPIPE: i32 = 13;

    let mut child = slidelog()
        .args(["demo", "--duration", "300ms", "--keys", "100"])
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here, with the phases still to run and print.
    assert!(first.starts_with("slidelog demo:"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(SIGPIPE),
        "{:?}, stderr: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// What a new user meets replaying a log: an nginx log given as CSV is
/// told to use `--input combined`; a malformed line without
/// `--skip-malformed` says how to skip it; a line far out of order is
/// skipped and counted under `--skip-malformed` rather than ending the
/// run; the skip report gives its count and one example a line.
#[test]
fn replay_tells_a_new_user_the_way() {
    let nginx = write_temp(
        "access.log",
        "10.0.0.1 - - [30/Nov/2026:12:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8\"\n",
    );
    let error = fails(slidelog().args(["replay", nginx.to_str().unwrap(), "--limit", "1/1m"]));
    assert!(error.contains("try --input combined"), "{error}");

    let csv = write_temp(
        "skips.csv",
        "t,k\n1,a\n2,a\nnot-a-time,a\n100,b\n5,a\n101,b\n3,c\n102,a\n",
    );
    let args = |extra: &[&str]| {
        let mut command = slidelog();
        command
            .args(["replay", csv.to_str().unwrap(), "--limit", "2/1m"])
            .args([
                "--time-column",
                "t",
                "--key-column",
                "k",
                "--time-unit",
                "s",
            ])
            .args(["--format", "json"])
            .args(extra);
        command
    };
    let error = fails(&mut args(&[]));
    assert!(
        error.contains("line 4") && error.contains("--skip-malformed skips and counts such lines"),
        "{error}"
    );
    let out = args(&["--skip-malformed=10", "--tolerance", "10s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let json = String::from_utf8(out.stdout).unwrap();
    // The bad time and the two lines 95 s back (5 and 3) are skipped.
    assert_eq!(json_number(&json, "malformed"), 3, "{json}");
    assert_eq!(json_number(&json, "requests"), 5, "{json}");
    let report: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.contains("skipped 3 malformed or out-of-order lines:"))
        .collect();
    assert!(report.len() >= 4, "{stderr}");
    assert!(report[1].trim_start().starts_with("line 4"), "{stderr}");
    assert!(
        report[2].contains("line 6") && report[2].contains("goes back"),
        "{stderr}"
    );
    assert!(report[3].contains("line 8"), "{stderr}");
}
