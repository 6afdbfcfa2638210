//! A streaming CSV/TSV record reader: one record in memory at a time,
//! RFC 4180 quoting (`"a,b"`, `""` for a quote, newlines inside quotes).

use std::io::BufRead;

/// Reads records from `input`, tracking the line number where each starts.
pub(crate) struct Records<R> {
    input: R,
    delimiter: u8,
    line: u64,
    buf: Vec<u8>,
}

/// One parsed record and the line it started on (the header is line 1).
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) line: u64,
    pub(crate) fields: Vec<String>,
}

impl<R: BufRead> Records<R> {
    pub(crate) fn new(input: R, delimiter: u8) -> Self {
        Records {
            input,
            delimiter,
            line: 0,
            buf: Vec::new(),
        }
    }

    /// The next record, `Ok(None)` at the end; blank lines are skipped.
    pub(crate) fn next_record(&mut self) -> Result<Option<Record>, String> {
        loop {
            self.buf.clear();
            let read = self
                .input
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| format!("line {}: read error: {e}", self.line + 1))?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            let start = self.line;
            // A quoted field may span lines: read on while a quote is open.
            while open_quote(&self.buf) {
                let more = self
                    .input
                    .read_until(b'\n', &mut self.buf)
                    .map_err(|e| format!("line {}: read error: {e}", self.line + 1))?;
                if more == 0 {
                    return Err(format!("line {start}: unterminated quoted field"));
                }
                self.line += 1;
            }
            let text = std::str::from_utf8(&self.buf)
                .map_err(|_| format!("line {start}: not valid UTF-8"))?;
            let text = text.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let fields =
                split(text, self.delimiter as char).map_err(|e| format!("line {start}: {e}"))?;
            return Ok(Some(Record {
                line: start,
                fields,
            }));
        }
    }
}

/// Whether `bytes` ends inside a quoted field.
fn open_quote(bytes: &[u8]) -> bool {
    bytes.iter().filter(|&&b| b == b'"').count() % 2 == 1
}

/// Splits one record.
fn split(text: &str, delimiter: char) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
        } else if c == '"' && at_start {
            quoted = true;
            at_start = false;
        } else if c == delimiter {
            fields.push(std::mem::take(&mut field));
            at_start = true;
        } else {
            if c == '"' {
                return Err("a quote inside an unquoted field".into());
            }
            field.push(c);
            at_start = false;
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    fields.push(field);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(text: &str, delimiter: u8) -> Result<Vec<(u64, Vec<String>)>, String> {
        let mut r = Records::new(text.as_bytes(), delimiter);
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            out.push((rec.line, rec.fields));
        }
        Ok(out)
    }

    #[test]
    fn parses_quotes_and_lines() {
        let got = all(
            "a,b\n1,\"x,y\"\n\n2,\"say \"\"hi\"\"\"\r\n3,\"two\nlines\"\n4,z",
            b',',
        )
        .unwrap();
        assert_eq!(got[0], (1, vec!["a".into(), "b".into()]));
        assert_eq!(got[1], (2, vec!["1".into(), "x,y".into()]));
        assert_eq!(got[2], (4, vec!["2".into(), "say \"hi\"".into()]));
        assert_eq!(got[3], (5, vec!["3".into(), "two\nlines".into()]));
        assert_eq!(got[4], (7, vec!["4".into(), "z".into()]));
        assert_eq!(all("a\tb\n1\t2\n", b'\t').unwrap()[1].1, vec!["1", "2"]);
    }

    #[test]
    fn reports_bad_input_with_its_line() {
        assert!(all("a\n\"open\n", b',').unwrap_err().contains("line 2"));
        assert!(all("a\nx\"y\n", b',').unwrap_err().contains("line 2"));
        let bytes: &[u8] = b"a\n\xff\xfe\n";
        let mut r = Records::new(bytes, b',');
        r.next_record().unwrap();
        assert!(r.next_record().unwrap_err().contains("line 2"));
    }

    proptest! {
        #[test]
        fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut r = Records::new(&bytes[..], b',');
            for _ in 0..100 {
                match r.next_record() {
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        }
    }
}
