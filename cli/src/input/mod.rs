//! `slidelog replay`'s input: CSV or TSV (with the `csv` crate) or the
//! nginx/Apache combined log format, streamed one request at a time, and
//! timestamps (with `jiff`).
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | the formats, time units and columns; timestamps (`Clock`); quoting what a log holds for a message |
//! | `lines.rs` | the byte stream under the readers: lines over 1 MiB refused, quotes counted |
//! | `requests.rs` | `Requests`: CSV/TSV records or combined-format lines, one request at a time |
//! | `tests.rs` | unit and property tests |

use std::borrow::Cow;
use std::fmt::Write as _;

use jiff::tz::TimeZone;

/// How the input is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Comma-separated, with a header row unless `--no-header` (a header
    /// with tabs and no commas, or a `.tsv` file, is read as TSV).
    Csv,
    /// Tab-separated.
    Tsv,
    /// The nginx/Apache combined log format: the key is the client address,
    /// the time the bracketed `[30/Nov/2026:12:00:00 +0000]`.
    Combined,
}

/// The unit of numeric (epoch) timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

impl TimeUnit {
    fn nanos(self) -> u128 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
        }
    }

    /// The unit of an epoch number by its magnitude: seconds up to 1e11
    /// (the year 5138), then milliseconds, microseconds, nanoseconds.
    fn guess(integer_part: u128) -> Option<TimeUnit> {
        match integer_part {
            0..100_000_000_000 => Some(TimeUnit::S),
            100_000_000_000..100_000_000_000_000 => Some(TimeUnit::Ms),
            100_000_000_000_000..100_000_000_000_000_000 => Some(TimeUnit::Us),
            100_000_000_000_000_000..100_000_000_000_000_000_000 => Some(TimeUnit::Ns),
            _ => None,
        }
    }
}

/// At most ~100 characters of `text`, [`printable`], for an error message
/// (a 10 MB field must not become a 10 MB error).
pub fn quote(text: &str) -> String {
    const MAX: usize = 100;
    let shown = printable(text);
    match shown.char_indices().nth(MAX) {
        Some((cut, _)) => format!("`{}…` ({} bytes)", &shown[..cut], text.len()),
        None => format!("`{shown}`"),
    }
}

/// Whether `c` is kept from a terminal or a chart: control characters
/// (ESC, CR, BEL, …) and Unicode's invisible direction marks and overrides.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` (a log's key or field) as it may be shown on a terminal or in a
/// chart: hidden characters ([`is_hidden`]) written as escapes
/// (`\u{1b}`), so that a log cannot clear the screen, retitle the window,
/// overwrite a line or reorder what is shown, nor make an SVG unreadable.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.contains(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden(c) {
            // Writing to a `String` cannot fail.
            let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// How timestamps are read.
#[derive(Clone, Debug)]
pub struct Clock {
    /// Forced unit of epoch numbers (`None`: by magnitude).
    pub unit: Option<TimeUnit>,
    /// The zone of date-times written without one.
    pub tz: TimeZone,
    /// Its name, for messages.
    pub tz_name: String,
}

impl Clock {
    /// Parses a timestamp to nanoseconds since the Unix epoch: an epoch
    /// number (unit by magnitude or `--time-unit`, fraction allowed), RFC
    /// 3339 with an offset, or a date-time without one (in `--tz`).
    pub fn parse(&self, text: &str) -> Result<i128, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty timestamp".into());
        }
        if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return self.epoch(t);
        }
        if let Ok(ts) = t.parse::<jiff::Timestamp>() {
            return Ok(ts.as_nanosecond());
        }
        if let Ok(dt) = t.parse::<jiff::civil::DateTime>() {
            return self
                .tz
                .to_timestamp(dt)
                .map(|ts| ts.as_nanosecond())
                .map_err(|e| format!("{} in --tz {}: {e}", quote(t), self.tz_name));
        }
        Err(format!(
            "{} is not a timestamp (RFC 3339 like 2026-11-30T12:00:00Z; a date-time without a \
             zone, taken in --tz {}; or Unix epoch s/ms/us/ns)",
            quote(t),
            self.tz_name
        ))
    }

    fn epoch(&self, t: &str) -> Result<i128, String> {
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        if int.is_empty() && frac.is_empty() || frac.contains('.') {
            return Err(format!("{} is not a number", quote(t)));
        }
        let integer: u128 = if int.is_empty() {
            0
        } else {
            int.parse()
                .map_err(|_| format!("{} is out of any plausible range", quote(t)))?
        };
        let unit = match self.unit {
            Some(unit) => unit,
            None => TimeUnit::guess(integer)
                .ok_or_else(|| format!("{} is out of any plausible range", quote(t)))?,
        };
        let scale = unit.nanos();
        let mut ns = integer
            .checked_mul(scale)
            .ok_or_else(|| format!("{} is out of any plausible range", quote(t)))?;
        // The fraction, to the nanosecond (digits past it are dropped).
        let mut place = scale;
        for d in frac.bytes().take(30) {
            place /= 10;
            ns += u128::from(d - b'0') * place;
        }
        // Nanoseconds in an i64 (up to the year 2262), as the limiters use.
        if ns > i64::MAX as u128 {
            return Err(format!(
                "{} is out of any plausible range (after the year 2262)",
                quote(t)
            ));
        }
        Ok(ns as i128)
    }
}

/// One request of the log.
#[derive(Debug)]
pub struct Request {
    /// The line it started on (1-based).
    pub line: u64,
    pub time: String,
    pub key: String,
}

/// Which columns hold the time and the key.
#[derive(Clone, Debug)]
pub struct Columns {
    pub time: Option<String>,
    pub key: Option<String>,
    pub no_header: bool,
}

mod lines;
mod requests;
#[cfg(test)]
mod tests;

pub use lines::{LineCap, MAX_LINE, QuoteCount, is_line_too_long};
pub use requests::Requests;
