//! Progress on stderr: an `indicatif` bar when stderr is a terminal, plain
//! periodic lines otherwise (never a `\r` into a log file).
//!
//! `SLIDELOG_PROGRESS_SECS` sets the interval of the plain lines (default
//! 5 s; 0 prints one per update, for tests).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One task's progress.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    every: Duration,
    last: Option<Instant>,
}

/// What the position counts.
#[derive(Clone, Copy)]
pub(crate) enum Unit {
    /// Bytes of input (a bar when the total is known).
    Bytes,
    /// Checks run in a timed phase of `seconds`.
    Seconds,
    /// Steps of a fixed count.
    Steps,
}

impl Progress {
    /// Progress of `label` towards `total` (if known).
    pub(crate) fn new(label: &str, total: Option<u64>, unit: Unit) -> Progress {
        let every = std::env::var("SLIDELOG_PROGRESS_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Duration::from_secs(5), Duration::from_secs_f64);
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = match (unit, total) {
                (Unit::Bytes, Some(_)) => {
                    "{prefix} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta}) {msg}"
                }
                (Unit::Bytes, None) => "{spinner} {prefix} {bytes} ({bytes_per_sec}) {msg}",
                (Unit::Seconds, _) => "{prefix} [{bar:30}] {elapsed} {msg}",
                (Unit::Steps, _) => "{prefix} [{bar:30}] {pos}/{len} {msg}",
            };
            let bar = match total {
                Some(total) => {
                    ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                }
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label.to_string());
            bar
        });
        // Plain lines start one interval in: a run shorter than that
        // prints none (no stale "0%" line in a redirected log).
        let last = bar.is_none().then(Instant::now);
        Progress {
            bar,
            label: label.to_string(),
            every,
            last,
        }
    }

    /// Moves to `position`; `message` says the rest (lines, rates). Plain
    /// output prints `label: message` at most once per interval.
    pub(crate) fn update(&mut self, position: u64, message: impl FnOnce() -> String) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(position);
                bar.set_message(message());
            }
            None => {
                let due = self.last.is_none_or(|last| last.elapsed() >= self.every);
                if due {
                    self.last = Some(Instant::now());
                    eprintln!("{}: {}", self.label, message());
                }
            }
        }
    }

    /// Prints a line of results to stdout without tearing the bar.
    pub(crate) fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Clears the bar (plain output has nothing to clear).
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Counts the bytes read through it, for a byte progress bar.
pub(crate) struct Counting<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R> Counting<R> {
    /// `inner`, and the shared count of bytes read from it.
    pub(crate) fn new(inner: R) -> (Self, std::rc::Rc<std::cell::Cell<u64>>) {
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        (
            Counting {
                inner,
                read: std::rc::Rc::clone(&read),
            },
            read,
        )
    }
}

impl<R: std::io::Read> std::io::Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}
