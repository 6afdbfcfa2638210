//! Unit tests of the replay.

use super::*;

fn options(policies: &[&str]) -> Options {
    Options {
        file: "test.csv".into(),
        policies: policies
            .iter()
            .map(|p| super::super::parse::policy(p).unwrap())
            .collect(),
        time_column: Some("ts".into()),
        key_column: Some("ip".into()),
        input: InputFormat::Csv,
        no_header: false,
        time_unit: None,
        tz: "UTC".into(),
        format: Format::Json,
        delimiter: None,
        tolerance: Duration::from_secs(1),
        slots: 10,
        top: 10,
        plot: None,
        skip_malformed: None,
        ipv6_prefix: 128,
    }
}

#[test]
fn json_escapes_keys() {
    let csv = "ts,ip\n0,\"a\"\"b\\c\"\n0,\"a\"\"b\\c\"\n";
    let s = replay(csv.as_bytes(), &options(&["1/1s"]), |_| {}).unwrap();
    let json: serde_json::Value = serde_json::from_str(&to_json(&s, &options(&["1/1s"]))).unwrap();
    assert_eq!(json["top_offenders"][0]["key"], "a\"b\\c");
    assert_eq!(json["admitted"], 1);
}

#[test]
fn stacked_policies_take_all_or_nothing() {
    let csv = "ts,ip\n0,a\n0.1,a\n0.2,a\n0.3,b\n";
    let s = replay(csv.as_bytes(), &options(&["2/1s", "10/1m"]), |_| {}).unwrap();
    assert_eq!((s.requests, s.admitted, s.denied), (4, 3, 1));
    assert_eq!(s.policies[0].1, 1);
    assert_eq!(s.policies[1].1, 0);
}

#[test]
fn errors_name_line_and_column() {
    let e = replay(
        "ts,ip\n0,a\nnope,b\n".as_bytes(),
        &options(&["1/1s"]),
        |_| {},
    )
    .err()
    .unwrap();
    assert!(e.contains("line 3") && e.contains("`ts`"), "{e}");
    let e = replay("time,ip\n0,a\n".as_bytes(), &options(&["1/1s"]), |_| {})
        .err()
        .unwrap();
    assert!(e.contains("line 1") && e.contains("`ts`"), "{e}");
    let e = replay("ts,ip\n10,a\n5,b\n".as_bytes(), &options(&["1/1s"]), |_| {})
        .err()
        .unwrap();
    assert!(e.contains("line 3") && e.contains("back"), "{e}");
    let e = replay("ts,ip\n10\n".as_bytes(), &options(&["1/1s"]), |_| {})
        .err()
        .unwrap();
    assert!(e.contains("line 2") && e.contains("`ip`"), "{e}");
}
