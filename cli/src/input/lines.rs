//! The byte stream under the readers: each line capped at [`MAX_LINE`]
//! bytes, and the quotes that pass counted.

use std::io::{self, BufRead, Read};

/// Counts the quote characters that pass through, so that a quote left open
/// at the end of the input (which the `csv` crate reads leniently, as a
/// field running to the end) is reported: in well-formed CSV every quoted
/// field has two, and a quote inside one is doubled.
#[derive(Debug)]
pub struct QuoteCount<R> {
    pub(super) inner: R,
    pub(super) quotes: u64,
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
pub const MAX_LINE: usize = 1 << 20;

/// What [`LineCap`] reports, once, for a line over its cap.
#[derive(Debug)]
pub(super) struct LineTooLong {
    pub(super) line: u64,
    pub(super) max: usize,
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
pub fn is_line_too_long(error: &str) -> bool {
    error.starts_with("line ") && error.contains(": longer than ") && !error.contains('\n')
}

/// The line-too-long error inside a reader's error, if that is what it is.
pub(super) fn line_too_long(e: &io::Error) -> Option<String> {
    e.get_ref()?
        .downcast_ref::<LineTooLong>()
        .map(ToString::to_string)
}

/// [`line_too_long`] for the CSV reader's errors.
pub(super) fn csv_line_too_long(e: &csv::Error) -> Option<String> {
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
#[derive(Debug)]
pub struct LineCap<R> {
    inner: R,
    max: usize,
    /// Lines passed or dropped whole.
    pub(super) lines: u64,
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
    pub(super) fn new(inner: R, max: usize) -> Self {
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
    pub(super) fn drop_rest(&mut self) -> io::Result<()> {
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
