//! [`Requests`]: CSV/TSV records (the `csv` crate) or combined-format
//! lines, read one request at a time.

use std::io::BufRead;

use super::lines::{LineCap, MAX_LINE, QuoteCount, csv_line_too_long, line_too_long};
use super::{Columns, InputFormat, Request, quote};

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
#[derive(Debug)]
pub enum Requests<R: BufRead> {
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
    pub fn open(
        input: R,
        format: InputFormat,
        delimiter: u8,
        columns: &Columns,
    ) -> Result<Self, String> {
        Requests::open_capped(input, format, delimiter, columns, MAX_LINE)
    }

    /// [`open`](Self::open), with lines capped at `max_line` bytes.
    pub(super) fn open_capped(
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
    pub fn next_request(&mut self, columns: &Columns) -> Result<Option<Request>, String> {
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
pub(super) fn combined_fields(text: &str) -> Result<Vec<String>, String> {
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
