//! Parsers for what users type and what traffic logs contain: durations
//! (`250ms`), policies (`100/1m`) and timestamps (RFC 3339 or Unix epoch
//! seconds). None of them panics on any input.

use std::time::Duration;

/// Parses `250ms`, `1s`, `1.5s`, `1m`, `1h`, `10us`, `5ns` (a bare number
/// is seconds).
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a duration (try 250ms, 1s, 1m, 1h)"
        ));
    }
    let scale_ns: u128 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use ns, us, ms, s, m, h, d)"
            ));
        }
    };
    let nanos = decimal_scaled(number, scale_ns)
        .ok_or_else(|| format!("`{text}` is not a duration (try 250ms, 1s, 1m, 1h)"))?;
    if nanos == 0 {
        return Err(format!(
            "`{text}` is zero: a window must be longer than that"
        ));
    }
    let nanos = u64::try_from(nanos).map_err(|_| format!("`{text}` is too long"))?;
    Ok(Duration::from_nanos(nanos))
}

/// `int[.frac]` times `scale`, exactly, in integers (no float rounding).
fn decimal_scaled(number: &str, scale: u128) -> Option<u128> {
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.len() > 30
    {
        return None;
    }
    let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut value = whole.checked_mul(scale)?;
    let mut unit = scale;
    for digit in frac.bytes() {
        unit /= 10;
        if unit == 0 {
            break; // finer than a nanosecond: truncated
        }
        value = value.checked_add(u128::from(digit - b'0') * unit)?;
    }
    Some(value)
}

/// A policy `N/WINDOW`, e.g. `100/1m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) limit: u32,
    pub(crate) window: Duration,
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.limit, show_duration(self.window))
    }
}

/// Formats a duration the way `duration` parses it.
pub(crate) fn show_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, scale) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= scale && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

pub(crate) fn policy(text: &str) -> Result<Policy, String> {
    let (limit, window) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not a policy: write N/WINDOW, e.g. 100/1m"))?;
    let limit: u32 = limit
        .trim()
        .parse()
        .map_err(|_| format!("`{limit}` in `{text}` is not a whole number of requests"))?;
    if limit == 0 {
        return Err(format!("`{text}`: the limit must be at least 1"));
    }
    Ok(Policy {
        limit,
        window: duration(window)?,
    })
}

/// Parses a timestamp to nanoseconds since the Unix epoch: RFC 3339
/// (`2024-05-01T12:00:00.250Z`, `2024-05-01 12:00:00+02:00`, fraction
/// optional) or Unix epoch seconds with an optional fraction
/// (`1714564800.25`).
pub(crate) fn timestamp(text: &str) -> Result<i128, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty timestamp".into());
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') || t.starts_with('-') {
        let (negative, digits) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t),
        };
        let ns = decimal_scaled(digits, 1_000_000_000)
            .ok_or_else(|| format!("`{t}` is not a Unix timestamp"))?;
        let ns = i128::try_from(ns).map_err(|_| format!("`{t}` is out of range"))?;
        return Ok(if negative { -ns } else { ns });
    }
    rfc3339(t).ok_or_else(|| {
        format!("`{t}` is not a timestamp (RFC 3339 like 2024-05-01T12:00:00Z, or Unix seconds)")
    })
}

fn rfc3339(t: &str) -> Option<i128> {
    let b = t.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(range)?;
        if s.bytes().all(|c| c.is_ascii_digit()) && !s.is_empty() {
            s.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &t[19..];
    let mut frac_ns: i128 = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut scale = 100_000_000i128;
        for d in r[..digits].bytes() {
            frac_ns += i128::from(d - b'0') * scale;
            scale /= 10;
        }
        rest = &r[digits..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let o = &rest[1..];
            if o.len() != 5 || o.as_bytes()[2] != b':' {
                return None;
            }
            let (oh, om): (i64, i64) = (o[..2].parse().ok()?, o[3..].parse().ok()?);
            if oh > 23
                || om > 59
                || !o[..2].bytes().all(|c| c.is_ascii_digit())
                || !o[3..].bytes().all(|c| c.is_ascii_digit())
            {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(i128::from(secs) * 1_000_000_000 + frac_ns)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(duration("10"), Ok(Duration::from_secs(10)));
        for bad in [
            "",
            "abc",
            "5 parsecs",
            "0s",
            "ms",
            "1..2s",
            "-1s",
            "99999999999999999999999999999h",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn policies() {
        assert_eq!(
            policy("100/1m"),
            Ok(Policy {
                limit: 100,
                window: Duration::from_secs(60)
            })
        );
        assert_eq!(policy("5/250ms").unwrap().to_string(), "5/250ms");
        for bad in [
            "100",
            "0/1s",
            "x/1s",
            "10/",
            "/1s",
            "10/0s",
            "99999999999/1s",
        ] {
            assert!(policy(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp("0"), Ok(0));
        assert_eq!(timestamp("1.5"), Ok(1_500_000_000));
        assert_eq!(timestamp("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(timestamp("1970-01-01T00:00:01.25Z"), Ok(1_250_000_000));
        assert_eq!(timestamp("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(timestamp("1969-12-31 23:00:00-01:00"), Ok(0));
        assert_eq!(
            timestamp("2024-02-29T00:00:00Z"),
            Ok(1_709_164_800_000_000_000)
        );
        assert_eq!(
            timestamp("2024-05-01T12:00:00.000000001Z"),
            Ok(1_714_564_800_000_000_001)
        );
        for bad in [
            "",
            "yesterday",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+1:00",
            "2024-01-01T25:00:00Z",
            "2024-01-01T00:00:00.Z",
            "1.2.3",
            "€€€€-01-01T00:00:00Z",
        ] {
            assert!(timestamp(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        /// No input panics any parser.
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = duration(&s);
            let _ = policy(&s);
            let _ = timestamp(&s);
        }

        /// Structured near-misses of RFC 3339 never panic either.
        #[test]
        fn rfc3339_like_never_panics(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2}|.{0,3})") {
            let _ = timestamp(&s);
        }

        /// RFC 3339 round trip against a known-good formatting.
        #[test]
        fn unix_seconds_and_rfc3339_agree(secs in 0i64..4_000_000_000, nanos in 0u32..1_000_000_000) {
            let days = secs.div_euclid(86_400);
            let sod = secs.rem_euclid(86_400);
            // civil_from_days (Hinnant)
            let z = days + 719_468;
            let era = z.div_euclid(146_097);
            let doe = z - era * 146_097;
            let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            let mp = (5 * doy + 2) / 153;
            let d = doy - (153 * mp + 2) / 5 + 1;
            let m = if mp < 10 { mp + 3 } else { mp - 9 };
            let y = yoe + era * 400 + i64::from(m <= 2);
            let text = format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z", sod / 3600, sod % 3600 / 60, sod % 60);
            let expect = i128::from(secs) * 1_000_000_000 + i128::from(nanos);
            prop_assert_eq!(timestamp(&text), Ok(expect));
            prop_assert_eq!(timestamp(&format!("{secs}.{nanos:09}")), Ok(expect));
        }
    }
}
