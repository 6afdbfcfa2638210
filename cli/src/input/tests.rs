//! Unit and property tests of the log reader.

use super::lines::LineTooLong;
use super::requests::combined_fields;
use super::*;
use proptest::prelude::*;

fn utc() -> Clock {
    Clock {
        unit: None,
        tz: TimeZone::UTC,
        tz_name: "UTC".into(),
    }
}

/// Hidden characters are escaped, everything else (any script, emoji,
/// spaces) shown as it is, and text with nothing hidden not copied.
#[test]
fn printable_escapes_only_what_hides() {
    assert!(matches!(printable("ünïcödé 名前 🚀 a b"), Cow::Borrowed(_)));
    assert_eq!(
        printable("a\u{1b}[31mb\r\u{7}\u{202e}c\u{2066}\u{9}"),
        "a\\u{1b}[31mb\\u{d}\\u{7}\\u{202e}c\\u{2066}\\u{9}"
    );
    assert_eq!(quote("\u{1b}"), "`\\u{1b}`");
}

#[test]
fn epoch_units_by_magnitude_and_forced() {
    let c = utc();
    assert_eq!(c.parse("1").unwrap(), 1_000_000_000);
    assert_eq!(c.parse("1.5").unwrap(), 1_500_000_000);
    let ms = 1_764_504_000_123i128;
    assert_eq!(c.parse("1764504000123").unwrap(), ms * 1_000_000);
    assert_eq!(c.parse("1764504000").unwrap(), 1_764_504_000_000_000_000);
    assert_eq!(
        c.parse("1764504000123456").unwrap(),
        ms * 1_000_000 + 456_000
    );
    assert_eq!(
        c.parse("1764504000123456789").unwrap(),
        ms * 1_000_000 + 456_789
    );
    assert!(
        c.parse("17645040001234567890123")
            .unwrap_err()
            .contains("plausible")
    );
    let forced = Clock {
        unit: Some(TimeUnit::Ms),
        ..utc()
    };
    assert_eq!(forced.parse("100").unwrap(), 100_000_000);
    assert!(
        forced
            .parse("99999999999999999")
            .unwrap_err()
            .contains("2262")
    );
}

#[test]
fn dates_with_and_without_zones() {
    let c = utc();
    let z = c.parse("2026-11-30T12:00:00Z").unwrap();
    assert_eq!(c.parse("2026-11-30T13:00:00+01:00").unwrap(), z);
    assert_eq!(
        c.parse("2026-11-30 12:00:00").unwrap(),
        z,
        "no zone: --tz UTC"
    );
    assert_eq!(
        c.parse("2026-11-30T12:00:00.250Z").unwrap(),
        z + 250_000_000
    );
    let paris = Clock {
        unit: None,
        tz: TimeZone::get("Europe/Paris").unwrap(),
        tz_name: "Europe/Paris".into(),
    };
    assert_eq!(paris.parse("2026-11-30 13:00:00").unwrap(), z);
    let e = c.parse("2024-13-01T00:00:00Z").unwrap_err();
    assert!(
        e.contains("not a timestamp") && e.contains("--tz UTC"),
        "{e}"
    );
}

#[test]
fn long_input_is_quoted_short() {
    let long = "x".repeat(10_000_000);
    let e = utc().parse(&long).unwrap_err();
    assert!(e.len() < 400, "{} bytes", e.len());
}

#[test]
fn combined_lines() {
    let f = combined_fields(
        r#"203.0.113.9 - frank [30/Nov/2026:12:00:00 +0000] "GET /a?q=\"x\" HTTP/1.1" 200 512 "-" "curl/8""#,
    )
    .unwrap();
    assert_eq!(f[0], "203.0.113.9");
    assert_eq!(f[2], "frank");
    assert_eq!(f[3], "30/Nov/2026:12:00:00 +0000");
    assert_eq!(f[4], "GET /a?q=\"x\" HTTP/1.1");
    assert_eq!(f[8], "curl/8");
    assert!(combined_fields("just words").is_err());
    assert!(combined_fields("h - - [30/Nov/2026").is_err());
}

/// Every request, or the error in its place, until the end.
fn drain(
    input: &str,
    format: InputFormat,
    columns: &Columns,
    cap: usize,
) -> Vec<Result<(u64, String), String>> {
    let delimiter = if format == InputFormat::Tsv {
        b'\t'
    } else {
        b','
    };
    let mut requests = match Requests::open_capped(
        std::io::Cursor::new(input.as_bytes().to_vec()),
        format,
        delimiter,
        columns,
        cap,
    ) {
        Ok(requests) => requests,
        Err(e) => return vec![Err(e)],
    };
    let mut out = Vec::new();
    for _ in 0..100 {
        match requests.next_request(columns) {
            Ok(Some(r)) => out.push(Ok((r.line, r.key))),
            Ok(None) => return out,
            Err(e) => out.push(Err(e)),
        }
    }
    panic!("no end: {out:?}");
}

/// A line over the cap is one malformed line, named, and reading goes
/// on at the next, in every format: an overlong field, an overlong
/// field whose quote never closes (the record is dropped, not read
/// into the lines after it), an overlong last line with no newline,
/// and an overlong header (an error at the start).
#[test]
fn lines_over_the_cap_are_dropped_and_named() {
    let long = "x".repeat(100);
    let csv = Columns {
        time: Some("t".into()),
        key: Some("k".into()),
        no_header: false,
    };
    let ok = |line: u64, key: &str| Ok((line, key.to_string()));
    let too_long = |line: u64| Err(format!("line {line}: longer than 50 bytes"));
    assert_eq!(
        drain(
            &format!("t,k\n1,a\n2,{long}\n3,c\n"),
            InputFormat::Csv,
            &csv,
            50
        ),
        [ok(2, "a"), too_long(3), ok(4, "c")]
    );
    assert_eq!(
        drain(
            &format!("t,k\n1,a\n2,\"{long}\n3,c\n4,d\n"),
            InputFormat::Csv,
            &csv,
            50
        ),
        [ok(2, "a"), too_long(3), ok(4, "c"), ok(5, "d")]
    );
    assert_eq!(
        drain(
            &format!("t\tk\n1\ta\n2\t{long}"),
            InputFormat::Tsv,
            &csv,
            50
        ),
        [ok(2, "a"), too_long(3)]
    );
    assert_eq!(
        drain(&format!("t,k{long}\n1,a\n"), InputFormat::Csv, &csv, 50),
        [too_long(1)]
    );
    // A line of exactly the cap is a line.
    let exact = "y".repeat(48);
    assert_eq!(
        drain(&format!("t,k\n1,{exact}\n"), InputFormat::Csv, &csv, 50),
        [ok(2, &exact)]
    );

    let combined = Columns {
        time: None,
        key: None,
        no_header: false,
    };
    let line = |ip: &str, agent: &str| {
        format!(
            "{ip} - - [30/Nov/2026:12:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"{agent}\"\n"
        )
    };
    let log = [
        line("1.1.1.1", "a"),
        line("2.2.2.2", &long),
        "\n".into(),
        line("3.3.3.3", "c"),
    ]
    .concat();
    assert_eq!(
        drain(&log, InputFormat::Combined, &combined, 90),
        [
            ok(1, "1.1.1.1"),
            Err("line 2: longer than 90 bytes".into()),
            ok(4, "3.3.3.3")
        ]
    );
    // The default cap, in MiB.
    assert_eq!(
        LineTooLong {
            line: 7,
            max: MAX_LINE
        }
        .to_string(),
        "line 7: longer than 1 MiB"
    );
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,60}") {
        let _ = utc().parse(&s);
        let _ = combined_fields(&s);
        let _ = quote(&s);
    }

    /// Untrusted logs, as bytes (invalid UTF-8, NULs, open quotes,
    /// BOMs, very long lines): every reader yields requests or a clear
    /// error naming a line, and never panics; an error is never empty.
    #[test]
    fn readers_never_panic_on_arbitrary_bytes(
        input in prop::collection::vec(
            prop_oneof![
                8 => any::<u8>(),
                2 => Just(b'\n'),
                1 => Just(b'"'),
                1 => Just(b','),
                1 => Just(b'['),
                1 => Just(b']'),
            ],
            0..600,
        ),
        format in prop_oneof![
            Just(InputFormat::Csv),
            Just(InputFormat::Tsv),
            Just(InputFormat::Combined),
        ],
        no_header in any::<bool>(),
    ) {
        let columns = Columns {
            time: (format != InputFormat::Combined && !no_header).then(|| "t".to_string()),
            key: None,
            no_header,
        };
        let delimiter = if format == InputFormat::Tsv { b'\t' } else { b',' };
        let clock = utc();
        match Requests::open(std::io::Cursor::new(input), format, delimiter, &columns) {
            Err(e) => prop_assert!(!e.is_empty()),
            Ok(mut requests) => {
                for _ in 0..1_000 {
                    match requests.next_request(&columns) {
                        Ok(Some(request)) => {
                            let _ = clock.parse(&request.time);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            prop_assert!(!e.is_empty());
                            break;
                        }
                    }
                }
            }
        }
    }
}
