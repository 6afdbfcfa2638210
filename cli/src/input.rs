//! `slidelog replay`'s input: CSV or TSV (with the `csv` crate) or the
//! nginx/Apache combined log format, streamed one request at a time, and
//! timestamps (with `jiff`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, BufRead, Read};

use jiff::tz::TimeZone;

/// How the input is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InputFormat {
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
pub(crate) enum TimeUnit {
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
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 100;
    let shown = printable(text);
    match shown.char_indices().nth(MAX) {
        Some((cut, _)) => format!("`{}…` ({} bytes)", &shown[..cut], text.len()),
        None => format!("`{shown}`"),
    }
}

/// Whether `c` is kept from a terminal or a chart: control characters
/// (ESC, CR, BEL, …) and Unicode's invisible direction marks and overrides.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` (a log's key or field) as it may be shown on a terminal or in a
/// chart: hidden characters ([`is_hidden`]) written as escapes
/// (`\u{1b}`), so that a log cannot clear the screen, retitle the window,
/// overwrite a line or reorder what is shown, nor make an SVG unreadable.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
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
pub(crate) struct Clock {
    /// Forced unit of epoch numbers (`None`: by magnitude).
    pub(crate) unit: Option<TimeUnit>,
    /// The zone of date-times written without one.
    pub(crate) tz: TimeZone,
    /// Its name, for messages.
    pub(crate) tz_name: String,
}

impl Clock {
    /// Parses a timestamp to nanoseconds since the Unix epoch: an epoch
    /// number (unit by magnitude or `--time-unit`, fraction allowed), RFC
    /// 3339 with an offset, or a date-time without one (in `--tz`).
    pub(crate) fn parse(&self, text: &str) -> Result<i128, String> {
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
pub(crate) struct Request {
    /// The line it started on (1-based).
    pub(crate) line: u64,
    pub(crate) time: String,
    pub(crate) key: String,
}

/// Which columns hold the time and the key.
#[derive(Clone, Debug)]
pub(crate) struct Columns {
    pub(crate) time: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) no_header: bool,
}

/// Counts the quote characters that pass through, so that a quote left open
/// at the end of the input (which the `csv` crate reads leniently, as a
/// field running to the end) is reported: in well-formed CSV every quoted
/// field has two, and a quote inside one is doubled.
pub(crate) struct QuoteCount<R> {
    inner: R,
    quotes: u64,
}

impl<R: Read> Read for QuoteCount<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.quotes += buf[..n].iter().filter(|&&b| b == b'"').count() as u64;
        Ok(n)
    }
}

/// The longest line a log may have, in bytes (without its newline).
/// Longer ones are malformed: no web server writes them, and a reader that
/// held one whole would let one line of a hostile or corrupt file take any
/// amount of memory.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// What [`LineCap`] reports, once, for a line over its cap.
#[derive(Debug)]
struct LineTooLong {
    line: u64,
    max: usize,
}

impl core::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let max = self.max;
        if max.is_multiple_of(1 << 20) {
            write!(f, "line {}: longer than {} MiB", self.line, max >> 20)
        } else {
            write!(f, "line {}: longer than {max} bytes", self.line)
        }
    }
}

impl std::error::Error for LineTooLong {}

/// Whether a reader's error is [`LineTooLong`]'s (a line a reader moves past,
/// so `--skip-malformed` can skip it).
pub(crate) fn is_line_too_long(error: &str) -> bool {
    error.starts_with("line ") && error.contains(": longer than ") && !error.contains('\n')
}

/// The line-too-long error inside a reader's error, if that is what it is.
fn line_too_long(e: &io::Error) -> Option<String> {
    e.get_ref()?
        .downcast_ref::<LineTooLong>()
        .map(ToString::to_string)
}

/// [`line_too_long`] for the CSV reader's errors.
fn csv_line_too_long(e: &csv::Error) -> Option<String> {
    match e.kind() {
        csv::ErrorKind::Io(io) => line_too_long(io),
        _ => None,
    }
}

/// Passes its input on a line at a time (a `fill_buf` never reaches past a
/// newline), and no line longer than `max` bytes: at a line's first byte
/// past the cap it fails once with [`LineTooLong`], then drops the rest of
/// that line unread into any buffer and goes on from the next. So a reader
/// on top holds at most `max` bytes of a line, whatever the file holds.
pub(crate) struct LineCap<R> {
    inner: R,
    max: usize,
    /// Lines passed or dropped whole.
    lines: u64,
    /// Bytes of the current line passed on.
    len: usize,
    /// The last `fill_buf`'s bytes not yet consumed, and whether they end
    /// their line.
    filled: usize,
    ends_line: bool,
    /// Past a line's cap: its rest is dropped before anything else.
    dropping: bool,
}

impl<R: BufRead> LineCap<R> {
    fn new(inner: R, max: usize) -> Self {
        LineCap {
            inner,
            max,
            lines: 0,
            len: 0,
            filled: 0,
            ends_line: false,
            dropping: false,
        }
    }

    /// Drops the rest of an overlong line, through its newline.
    fn drop_rest(&mut self) -> io::Result<()> {
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.inner.consume(i + 1);
                    break;
                }
                None => {
                    let n = buf.len();
                    self.inner.consume(n);
                }
            }
        }
        self.dropping = false;
        self.lines += 1;
        self.len = 0;
        Ok(())
    }
}

impl<R: BufRead> BufRead for LineCap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.dropping {
            self.drop_rest()?;
        }
        let buf = self.inner.fill_buf()?;
        let (n, ends_line) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let content = n - usize::from(ends_line);
        if self.len + content > self.max {
            self.dropping = true;
            self.filled = 0;
            let too_long = LineTooLong {
                line: self.lines + 1,
                max: self.max,
            };
            return Err(io::Error::new(io::ErrorKind::InvalidData, too_long));
        }
        self.filled = n;
        self.ends_line = ends_line;
        Ok(&buf[..n])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.filled);
        self.inner.consume(amt);
        self.filled -= amt;
        if self.ends_line && self.filled == 0 {
            self.lines += 1;
            self.len = 0;
            self.ends_line = false;
        } else {
            self.len += amt;
        }
    }
}

impl<R: BufRead> Read for LineCap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// The CSV/TSV reader over the capped input.
type CsvReader<R> = csv::Reader<QuoteCount<LineCap<R>>>;

/// A CSV/TSV reader on `input`, headers read by the caller.
fn csv_reader<R: BufRead>(input: QuoteCount<LineCap<R>>, delimiter: u8) -> CsvReader<R> {
    csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(input)
}

/// A stream of requests.
pub(crate) enum Requests<R: BufRead> {
    Delimited {
        /// `None` only while a reader is rebuilt past an overlong line.
        reader: Option<CsvReader<R>>,
        delimiter: u8,
        /// Lines before the reader's first (it numbers its own from 1).
        base: u64,
        /// Where the last record started (for the open-quote error).
        last_line: u64,
        record: csv::StringRecord,
        time: usize,
        key: usize,
    },
    Combined {
        input: LineCap<R>,
        line: u64,
        buf: Vec<u8>,
        key: usize,
    },
}

/// The fields of a combined-format line, in order.
const COMBINED_FIELDS: [&str; 9] = [
    "host", "ident", "user", "time", "request", "status", "bytes", "referer", "agent",
];

impl<R: BufRead> Requests<R> {
    /// Opens `input` as `format` (`delimiter`: for CSV/TSV).
    pub(crate) fn open(
        input: R,
        format: InputFormat,
        delimiter: u8,
        columns: &Columns,
    ) -> Result<Self, String> {
        Requests::open_capped(input, format, delimiter, columns, MAX_LINE)
    }

    /// [`open`](Self::open), with lines capped at `max_line` bytes.
    fn open_capped(
        mut input: R,
        format: InputFormat,
        delimiter: u8,
        columns: &Columns,
        max_line: usize,
    ) -> Result<Self, String> {
        // A UTF-8 byte-order mark is not part of the first field.
        let bom = input
            .fill_buf()
            .map_err(|e| format!("line 1: read error: {e}"))?
            .starts_with(b"\xEF\xBB\xBF");
        if bom {
            input.consume(3);
        }
        if format == InputFormat::Combined {
            if columns.time.is_some() {
                return Err(
                    "--time-column is not used with --input combined (the time is the bracketed field)"
                        .into(),
                );
            }
            // `ip` (and `client`) name the host field, as users call it.
            let name = match columns.key.as_deref().unwrap_or("host") {
                "ip" | "client" | "remote_addr" => "host",
                name => name,
            };
            let key = COMBINED_FIELDS
                .iter()
                .position(|&f| f == name && f != "time")
                .ok_or_else(|| {
                    format!(
                        "--key-column {} is not a field of the combined format (host or ip, ident, user, request, status, bytes, referer, agent)",
                        quote(name)
                    )
                })?;
            return Ok(Requests::Combined {
                input: LineCap::new(input, max_line),
                line: 0,
                buf: Vec::new(),
                key,
            });
        }
        let (Some(time_name), Some(key_name)) = (&columns.time, &columns.key) else {
            let peek = input
                .fill_buf()
                .map_err(|e| format!("line 1: read error: {e}"))?;
            let first = peek.split(|&b| b == b'\n').next().unwrap_or_default();
            let hint = if looks_combined(&String::from_utf8_lossy(first)) {
                "; the lines look like the combined (nginx/Apache) log format: try --input combined"
            } else {
                " (or --input combined for an nginx/Apache access log)"
            };
            return Err(format!(
                "--time-column and --key-column are required for CSV/TSV input{hint}"
            ));
        };
        let mut reader = csv_reader(
            QuoteCount {
                inner: LineCap::new(input, max_line),
                quotes: 0,
            },
            delimiter,
        );
        let mut record = csv::StringRecord::new();
        let (time, key) = if columns.no_header {
            let index = |name: &str, flag: &str| {
                name.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i >= 1)
                    .map(|i| i - 1)
                    .ok_or_else(|| {
                        format!(
                            "{flag} {}: with --no-header, columns are numbers from 1",
                            quote(name)
                        )
                    })
            };
            (
                index(time_name, "--time-column")?,
                index(key_name, "--key-column")?,
            )
        } else {
            let read = reader.read_record(&mut record).map_err(|e| {
                csv_line_too_long(&e).unwrap_or_else(|| format!("line 1: {}", csv_error(&e)))
            })?;
            if !read {
                return Err("the input is empty: expected a header row".into());
            }
            let find = |name: &str| {
                record.iter().position(|f| f.trim() == name).ok_or_else(|| {
                    let columns: Vec<&str> = record.iter().collect();
                    let line = columns.join(",");
                    let combined = looks_combined(&line);
                    format!(
                        "line 1: no column named {} (columns: {}){}",
                        quote(name),
                        quote(&columns.join(", ")),
                        if combined {
                            "; this looks like a combined (nginx/Apache) log: try --input combined"
                        } else {
                            ""
                        }
                    )
                })
            };
            (find(time_name)?, find(key_name)?)
        };
        Ok(Requests::Delimited {
            reader: Some(reader),
            delimiter,
            base: 0,
            last_line: 1,
            record,
            time,
            key,
        })
    }

    /// The next request, `Ok(None)` at the end; blank lines are skipped.
    pub(crate) fn next_request(&mut self, columns: &Columns) -> Result<Option<Request>, String> {
        match self {
            Requests::Delimited {
                reader: slot,
                delimiter,
                base,
                last_line,
                record,
                time,
                key,
            } => loop {
                let reader = slot.as_mut().expect("rebuilt after each overlong line");
                let line = *base + reader.position().line() + 1;
                let read = match reader.read_record(record) {
                    Ok(read) => read,
                    Err(e) => {
                        let Some(too_long) = csv_line_too_long(&e) else {
                            return Err(format!("line {line}: {}", csv_error(&e)));
                        };
                        // Go on from the line after it, with a reader of
                        // its own: the record cut short is dropped, quotes
                        // and all.
                        let mut input = slot.take().expect("taken once").into_inner();
                        input
                            .inner
                            .drop_rest()
                            .map_err(|e| format!("{too_long}; {e}"))?;
                        input.quotes = 0;
                        *base = input.inner.lines;
                        *slot = Some(csv_reader(input, *delimiter));
                        return Err(too_long);
                    }
                };
                if !read {
                    if reader.get_ref().quotes % 2 == 1 {
                        return Err(format!(
                            "line {last_line}: a quoted field is not closed before the end of the input"
                        ));
                    }
                    return Ok(None);
                }
                let line = record.position().map_or(line, |p| *base + p.line());
                *last_line = line;
                if record.len() == 1 && record[0].trim().is_empty() {
                    continue;
                }
                let field = |idx: usize, name: &Option<String>| {
                    record.get(idx).map(str::to_owned).ok_or_else(|| {
                        format!(
                            "line {line}: missing column {} (column {})",
                            quote(name.as_deref().unwrap_or("")),
                            idx + 1
                        )
                    })
                };
                return Ok(Some(Request {
                    line,
                    time: field(*time, &columns.time)?,
                    key: field(*key, &columns.key)?,
                }));
            },
            Requests::Combined {
                input,
                line,
                buf,
                key,
            } => loop {
                buf.clear();
                *line += 1;
                let read = input.read_until(b'\n', buf).map_err(|e| {
                    line_too_long(&e).unwrap_or_else(|| format!("line {line}: read error: {e}"))
                })?;
                if read == 0 {
                    return Ok(None);
                }
                let text = String::from_utf8_lossy(buf);
                let text = text.trim_end_matches(['\n', '\r']);
                if text.trim().is_empty() {
                    continue;
                }
                let fields = combined_fields(text).map_err(|e| format!("line {line}: {e}"))?;
                let time = jiff::fmt::strtime::parse("%d/%b/%Y:%H:%M:%S %z", &fields[3])
                    .and_then(|t| t.to_timestamp())
                    .map_err(|e| {
                        format!(
                            "line {line}: the time {} is not like 30/Nov/2026:12:00:00 +0000 ({e})",
                            quote(&fields[3])
                        )
                    })?;
                let key_field = fields.get(*key).cloned().ok_or_else(|| {
                    format!(
                        "line {line}: no field `{}` on this line",
                        COMBINED_FIELDS[*key]
                    )
                })?;
                return Ok(Some(Request {
                    line: *line,
                    time: time.to_string(),
                    key: key_field,
                }));
            },
        }
    }
}

fn csv_error(e: &csv::Error) -> String {
    let text = e.to_string();
    quote(&text).trim_matches('`').to_string()
}

/// Whether `line` looks like a combined-format line (`1.2.3.4 - -
/// [30/Nov/2026:...] "GET / ..." 200 ...`).
fn looks_combined(line: &str) -> bool {
    line.contains(" [") && line.contains("] \"")
}

/// Splits a combined-format line: `host ident user [time] "request" status
/// bytes "referer" "agent"` (the last two optional; quoted fields may hold
/// `\"`).
fn combined_fields(text: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::with_capacity(9);
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (field, tail) = if let Some(inner) = rest.strip_prefix('[') {
            let end = inner
                .find(']')
                .ok_or_else(|| format!("an unclosed `[` in {}", quote(text)))?;
            (inner[..end].to_string(), &inner[end + 1..])
        } else if let Some(inner) = rest.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = inner.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            out.push(next);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => out.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("an unclosed quote in {}", quote(text)))?;
            (out, &inner[end + 1..])
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            (rest[..end].to_string(), &rest[end..])
        };
        fields.push(field);
        rest = tail.trim_start();
    }
    if fields.len() < 7 {
        return Err(format!(
            "not a combined-format line (host ident user [time] \"request\" status bytes ...): {}",
            quote(text)
        ));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
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
}
