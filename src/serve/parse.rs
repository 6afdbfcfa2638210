//! Parsers for what users type: durations (`250ms`), policies (`100/1m`),
//! sizes (`512MiB`), addresses, ratios and header names. None of them
//! panics on any input. (The binary compiles this file in itself when the
//! library is built without `serve`: `MAX_LIMIT` comes from the parent
//! module either way.)

use std::num::{IntErrorKind, ParseIntError};
use std::time::Duration;

use super::MAX_LIMIT;

/// A window (`--window`, a policy's `/1m`): a [`duration`] longer than
/// zero, the error saying what it is.
pub fn window(text: &str) -> Result<Duration, String> {
    positive(text, "a window")
}

/// A length of time that must pass (`--duration`): a [`duration`] longer
/// than zero.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    positive(text, "it")
}

/// [`duration`], refused when zero: "`0s` is zero: `what` must be longer
/// than that".
fn positive(text: &str, what: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "`{}` is zero: {what} must be longer than that",
            text.trim()
        ));
    }
    Ok(d)
}

/// Parses `250ms`, `1s`, `1.5s`, `1m`, `1h`, `10us`, `5ns` (a bare number
/// is seconds), zero included (`0s`: a tolerance of none).
pub fn duration(text: &str) -> Result<Duration, String> {
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

/// A size in bytes above zero (`--max-memory`): `512MiB`, `2GiB`, `1.5GB`,
/// `64KiB`, or a bare number of bytes.
pub fn size(text: &str) -> Result<u64, String> {
    let bytes = text
        .trim()
        .parse::<bytesize::ByteSize>()
        .map_err(|e| format!("`{text}` is not a size (try 512MiB, 2GiB): {e}"))?
        .as_u64();
    if bytes == 0 {
        return Err(format!("`{text}` is zero bytes: give a size above zero"));
    }
    Ok(bytes)
}

/// An address to listen on (`--grpc`, `--http`, `--metrics`): an IP
/// address and port (`0.0.0.0:8081`, `[::1]:8081`), or a host name and
/// port (`localhost:8081`), resolved now to its first address.
pub fn listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let text = text.trim();
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    if !text.contains(':') {
        return Err(format!(
            "`{text}` has no port (try 0.0.0.0:8081 or localhost:8081)"
        ));
    }
    text.to_socket_addrs()
        .map_err(|e| format!("`{text}`: {e}"))?
        .next()
        .ok_or_else(|| format!("`{text}` names no address"))
}

/// A share from 0 to 1 (`--near-limit-ratio`), e.g. `0.8`.
pub fn ratio(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("`{text}` is not a ratio from 0 to 1 (e.g. 0.8)")),
    }
}

/// A header name as HTTP allows one (a token: letters, digits and
/// ``!#$%&'*+-.^_`|~``), kept as written.
pub fn header_name(name: &str) -> Result<String, String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !name.is_empty() && name.bytes().all(token) {
        Ok(name.to_owned())
    } else {
        Err(format!("{name:?} is not an HTTP header name"))
    }
}

/// A policy `N/WINDOW`, e.g. `100/1m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The most requests admitted in any window.
    pub limit: u32,
    /// The window's length.
    pub window: Duration,
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.limit, show_duration(self.window))
    }
}

/// Formats a duration the way `duration` parses it.
pub fn show_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, scale) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Parses a policy `N/WINDOW` ([`Policy`]).
pub fn policy(text: &str) -> Result<Policy, String> {
    let (limit, window) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not a policy: write N/WINDOW, e.g. 100/1m"))?;
    let above = || format!("`{text}`: the limit is above the maximum of {MAX_LIMIT}");
    let limit: u32 = limit.trim().parse().map_err(|e: ParseIntError| {
        if *e.kind() == IntErrorKind::PosOverflow {
            above()
        } else {
            format!("`{limit}` in `{text}` is not a whole number of requests")
        }
    })?;
    if limit == 0 {
        return Err(format!("`{text}`: the limit must be at least 1"));
    }
    if limit > MAX_LIMIT {
        return Err(above());
    }
    Ok(Policy {
        limit,
        window: self::window(window)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(listen_addr("0.0.0.0:8081").unwrap().port(), 8081);
        assert_eq!(listen_addr("[::1]:9").unwrap().port(), 9);
        let local = listen_addr("localhost:8081").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 8081, "{local}");
        assert!(listen_addr("localhost").unwrap_err().contains("no port"));
        assert!(listen_addr("localhost:http2").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(size("512MiB"), Ok(512 << 20));
        assert_eq!(size(" 2GiB "), Ok(2 << 30));
        assert_eq!(size("1GB"), Ok(1_000_000_000));
        assert_eq!(size("4096"), Ok(4096));
        assert!(size("0").unwrap_err().contains("zero"));
        assert!(size("lots").unwrap_err().contains("not a size"));
        assert!(size("").is_err());
    }

    #[test]
    fn ratios() {
        for (text, r) in [("0.8", 0.8), ("0", 0.0), ("1", 1.0), (" 0.25 ", 0.25)] {
            assert_eq!(ratio(text), Ok(r));
        }
        for bad in ["", "1.01", "-0.1", "NaN", "inf", "80%", "x"] {
            let error = ratio(bad).unwrap_err();
            assert!(error.contains("is not a ratio from 0 to 1"), "{error}");
        }
    }

    #[test]
    fn header_names() {
        for good in ["RateLimit-Limit", "x-ratelimit-reset", "A", "a.b_c~1!"] {
            assert_eq!(header_name(good), Ok(good.to_string()));
        }
        for bad in [
            "",
            "Rate Limit",
            "X-Limit:",
            "X-Limit\r\nSet-Cookie",
            "Größe",
            "a\tb",
        ] {
            let error = header_name(bad).unwrap_err();
            assert!(error.contains("is not an HTTP header name"), "{error}");
        }
    }

    /// A header name is refused exactly when the `http` crate (which
    /// Envoy's clients and our layer use) refuses it: every character up
    /// to U+00FF alone, and inside a name.
    #[cfg(feature = "tower")]
    #[test]
    fn header_names_are_http_tokens() {
        for c in (0..=255u8).map(char::from) {
            for name in [c.to_string(), format!("x-{c}-y")] {
                assert_eq!(
                    header_name(&name).is_ok(),
                    http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
                    "{name:?}"
                );
            }
        }
    }

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
            "ms",
            "1..2s",
            "-1s",
            "99999999999999999999999999999h",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
            assert!(window(bad).is_err(), "{bad}");
            assert!(positive_duration(bad).is_err(), "{bad}");
        }
    }

    /// Zero is a duration (a tolerance of none) but neither a window nor
    /// a run's length, and each refusal names what it refuses.
    #[test]
    fn zero_is_a_tolerance_and_nothing_else() {
        for zero in ["0s", "0", "0.0ms", " 0h "] {
            assert_eq!(duration(zero), Ok(Duration::ZERO), "{zero}");
            let error = window(zero).unwrap_err();
            assert!(error.contains("a window must be longer"), "{zero}: {error}");
            let error = positive_duration(zero).unwrap_err();
            assert!(
                error.contains("is zero") && !error.contains("window"),
                "{zero}: {error}"
            );
        }
        assert_eq!(window("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(positive_duration("1ns"), Ok(Duration::from_nanos(1)));
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
    fn a_limit_too_large_says_so() {
        assert!(policy(&format!("{MAX_LIMIT}/1s")).is_ok());
        let most = format!("the maximum of {MAX_LIMIT}");
        for big in [
            format!("{}/1s", MAX_LIMIT + 1),
            format!("{}/1s", u32::MAX),
            "99999999999/1s".to_string(),
        ] {
            let error = policy(&big).unwrap_err();
            assert!(error.contains(&most), "{big}: {error}");
        }
        let error = policy("-1/1s").unwrap_err();
        assert!(error.contains("not a whole number"), "{error}");
    }

    proptest! {
        /// No input panics any parser.
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = duration(&s);
            let _ = window(&s);
            let _ = positive_duration(&s);
            let _ = policy(&s);
            let _ = header_name(&s);
            let _ = ratio(&s);
        }
    }
}
