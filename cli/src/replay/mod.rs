//! `slidelog replay`: a traffic log through the exact limiter (and, for
//! comparison, the approximate counter), streamed one record at a time.
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | the options, the run over the log, the per-key and per-second tallies |
//! | `report.rs` | the table and the JSON printed from them |
//! | `tests.rs` | unit tests |

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::time::Duration;

use slidelog::{KeyedLimiter, ManualClock, SlidingCounter};

use super::input::{self, Columns, InputFormat, Requests, TimeUnit};
use super::parse::Policy;
use super::progress::{Counting, Progress, Unit};

mod report;
#[cfg(test)]
mod tests;

use report::{print_table, to_json, top_keys};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
}

/// What `replay` was asked to do.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) file: String,
    pub(crate) policies: Vec<Policy>,
    pub(crate) time_column: Option<String>,
    pub(crate) key_column: Option<String>,
    pub(crate) input: InputFormat,
    pub(crate) no_header: bool,
    pub(crate) time_unit: Option<TimeUnit>,
    pub(crate) tz: String,
    pub(crate) format: Format,
    pub(crate) delimiter: Option<char>,
    pub(crate) tolerance: Duration,
    pub(crate) slots: u32,
    pub(crate) top: usize,
    /// Draw the timeline and the top keys into this SVG.
    pub(crate) plot: Option<std::path::PathBuf>,
    /// Skip unreadable lines, up to this many.
    pub(crate) skip_malformed: Option<MalformedLimit>,
    /// Key IPv6 addresses by this prefix (128: whole).
    pub(crate) ipv6_prefix: u8,
}

/// How many unreadable lines `--skip-malformed` tolerates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum MalformedLimit {
    /// At most this many lines.
    Count(u64),
    /// At most this share of the lines, in percent.
    Percent(f64),
}

/// `100` or `0.5%`.
pub(crate) fn parse_malformed_limit(text: &str) -> Result<MalformedLimit, String> {
    let text = text.trim();
    match text.strip_suffix('%') {
        Some(percent) => percent
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && (0.0..=100.0).contains(p))
            .map(MalformedLimit::Percent)
            .ok_or_else(|| format!("`{text}`: a share from 0% to 100%")),
        None => text.parse::<u64>().map(MalformedLimit::Count).map_err(|_| {
            // `--skip-malformed access.log`: the flag's optional value
            // took the log's name.
            let file = text == "-" || std::path::Path::new(text).is_file();
            let hint = if file {
                " (is it the log? put the log before --skip-malformed, or write \
                     --skip-malformed=1%)"
            } else {
                ""
            };
            format!("`{text}`: a number of lines, or a share such as 1%{hint}")
        }),
    }
}

impl MalformedLimit {
    fn exceeded(self, malformed: u64, lines: u64) -> bool {
        match self {
            MalformedLimit::Count(n) => malformed > n,
            MalformedLimit::Percent(p) => malformed as f64 > p / 100.0 * lines as f64,
        }
    }
}

impl core::fmt::Display for MalformedLimit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MalformedLimit::Count(n) => write!(f, "{n}"),
            MalformedLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The malformed lines shown (the rest are counted).
const MALFORMED_SHOWN: usize = 5;

#[derive(Debug, Default, Clone, Copy)]
struct KeyStats {
    admitted: u64,
    denied: u64,
}

/// One policy: its approximate counters per key, and how many denials of
/// the exact limiter it decided.
struct Lane {
    policy: Policy,
    counters: HashMap<String, SlidingCounter<ManualClock>>,
    denied_by: u64,
}

/// The totals, for printing.
#[derive(Debug)]
pub(crate) struct Summary {
    requests: u64,
    admitted: u64,
    denied: u64,
    counter_admitted: u64,
    counter_denied: u64,
    differs: u64,
    policies: Vec<(Policy, u64)>,
    keys: Vec<(String, KeyStats)>,
    slots: u32,
    /// Per second of the log (from its first record): admitted, denied.
    timeline: std::collections::BTreeMap<u64, (u64, u64)>,
    /// Lines skipped as unreadable, and the first few errors.
    malformed: u64,
    malformed_shown: Vec<String>,
}

pub(crate) fn run(options: &Options) -> Result<(), String> {
    // A plot with nowhere to go fails before a long replay, not after it.
    if let Some(path) = &options.plot {
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(format!(
                "--plot {}: there is no directory {}",
                path.display(),
                dir.display()
            ));
        }
    }
    let (input, total): (Box<dyn Read>, Option<u64>) = if options.file == "-" {
        (Box::new(io::stdin().lock()), None)
    } else {
        let file = File::open(&options.file).map_err(|e| format!("{}: {e}", options.file))?;
        let len = file.metadata().ok().map(|m| m.len());
        (Box::new(file), len)
    };
    // Progress counts the bytes read from the file (compressed or not).
    let (input, read) = Counting::new(input);
    let mut input = BufReader::with_capacity(1 << 20, input);
    let gzip = input
        .fill_buf()
        .map_err(|e| format!("{}: {e}", options.file))?
        .starts_with(&[0x1f, 0x8b]);
    let input: Box<dyn Read> = if gzip {
        Box::new(flate2::bufread::MultiGzDecoder::new(input))
    } else {
        Box::new(input)
    };
    let mut progress = Progress::new("replay", total, Unit::Bytes);
    let started = std::time::Instant::now();
    let summary = replay(
        BufReader::with_capacity(1 << 20, input),
        options,
        |requests| {
            progress.update(read.get(), || {
                let mib = read.get() as f64 / (1 << 20) as f64;
                let rate = requests as f64 / started.elapsed().as_secs_f64().max(1e-9);
                match total {
                    Some(total) if total > 0 => format!(
                        "{mib:.1} MiB read ({:.0}%), {requests} lines, {rate:.0} lines/s",
                        100.0 * read.get() as f64 / total as f64
                    ),
                    _ => format!("{mib:.1} MiB read, {requests} lines, {rate:.0} lines/s"),
                }
            });
        },
    );
    progress.finish();
    let summary = summary?;
    if summary.malformed > 0 {
        let shown = summary.malformed_shown.len();
        eprintln!(
            "replay: skipped {} malformed or out-of-order line{}{}:",
            summary.malformed,
            if summary.malformed == 1 { "" } else { "s" },
            if summary.malformed as usize > shown {
                format!("; the first {shown}")
            } else {
                String::new()
            }
        );
        for example in &summary.malformed_shown {
            eprintln!("  {example}");
        }
    }
    match options.format {
        Format::Table => print_table(&summary, options),
        Format::Json => println!("{}", to_json(&summary, options)),
    }
    if let Some(path) = &options.plot {
        super::plot::draw(path, &summary.timeline, &top_keys(&summary, options))
            .map_err(|e| format!("--plot {}: {e}", path.display()))?;
        eprintln!("replay: wrote {}", path.display());
    }
    Ok(())
}

/// Replays `input` (header row first) and returns the totals.
pub(crate) fn replay<R: BufRead>(
    mut input: R,
    options: &Options,
    mut progress: impl FnMut(u64),
) -> Result<Summary, String> {
    if options.policies.is_empty() {
        return Err("give at least one --limit N/WINDOW".into());
    }
    for (i, policy) in options.policies.iter().enumerate() {
        if options.policies[..i].contains(policy) {
            return Err(format!(
                "--limit {policy} is given twice (each policy once: a request must fit every one)"
            ));
        }
    }
    let delimiter = match options.delimiter {
        Some(d) if d.is_ascii() => d as u8,
        Some(d) => return Err(format!("the delimiter `{d}` must be one ASCII character")),
        None if options.input == InputFormat::Tsv || options.file.ends_with(".tsv") => b'\t',
        None => {
            // Sniff the first line: tabs and no commas means TSV.
            let head = input
                .fill_buf()
                .map_err(|e| format!("line 1: read error: {e}"))?;
            let first = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
            if first.contains(&b'\t') && !first.contains(&b',') {
                b'\t'
            } else {
                b','
            }
        }
    };
    let columns = Columns {
        time: options.time_column.clone(),
        key: options.key_column.clone(),
        no_header: options.no_header,
    };
    let tz = if options.tz.eq_ignore_ascii_case("utc") {
        jiff::tz::TimeZone::UTC
    } else {
        jiff::tz::TimeZone::get(&options.tz)
            .map_err(|e| format!("--tz {}: {e}", input::quote(&options.tz)))?
    };
    let clock_of_log = input::Clock {
        unit: options.time_unit,
        tz,
        tz_name: options.tz.clone(),
    };
    let mut records = Requests::open(input, options.input, delimiter, &columns)?;
    let time_label = match (options.input, &options.time_column) {
        (InputFormat::Combined, _) => "time".to_string(),
        (_, Some(name)) => format!("`{name}`"),
        (_, None) => "time".to_string(),
    };
    let tolerance = u64::try_from(options.tolerance.as_nanos())
        .unwrap_or(u64::MAX / 4)
        .min(u64::MAX / 4);

    let clock = ManualClock::new();
    // The stacked --limit flags are one multi-policy limiter per key: a
    // request counts against every policy or against none.
    let first = options.policies[0];
    let mut builder = KeyedLimiter::<String>::builder(first.limit, first.window);
    for policy in &options.policies[1..] {
        builder = builder.and(policy.limit, policy.window);
    }
    let exact = builder
        .clock(clock.clone())
        .max_keys(usize::MAX / 2)
        .build()
        .map_err(|e| {
            let flags: Vec<String> = options
                .policies
                .iter()
                .map(|p| format!("--limit {p}"))
                .collect();
            format!("{}: {e}", flags.join(" "))
        })?;
    let mut lanes: Vec<Lane> = options
        .policies
        .iter()
        .map(|&policy| Lane {
            policy,
            counters: HashMap::new(),
            denied_by: 0,
        })
        .collect();
    SlidingCounter::with_clock(
        1,
        options.policies[0].window,
        options.slots,
        ManualClock::new(),
    )
    .map_err(|e| format!("--slots {}: {e}", options.slots))?;

    let mut stats: HashMap<String, KeyStats> = HashMap::new();
    let (mut base, mut newest) = (None::<i128>, None::<i128>);
    let mut summary = Summary {
        requests: 0,
        admitted: 0,
        denied: 0,
        counter_admitted: 0,
        counter_denied: 0,
        differs: 0,
        policies: Vec::new(),
        keys: Vec::new(),
        slots: options.slots,
        timeline: std::collections::BTreeMap::new(),
        malformed: 0,
        malformed_shown: Vec::new(),
    };
    let mut lines = 0u64;
    // A line that cannot be read: an error, or (--skip-malformed) counted.
    let skip = |summary: &mut Summary, error: String| {
        let Some(limit) = options.skip_malformed else {
            return Err(format!(
                "{error}; --skip-malformed skips and counts such lines"
            ));
        };
        summary.malformed += 1;
        if summary.malformed_shown.len() < MALFORMED_SHOWN {
            summary.malformed_shown.push(error.clone());
        }
        if let MalformedLimit::Count(n) = limit
            && summary.malformed > n
        {
            return Err(format!(
                "more than {n} malformed lines (--skip-malformed {limit}); the last: {error}"
            ));
        }
        Ok(())
    };
    let mut last_error_line = None;
    loop {
        let request = match records.next_request(&columns) {
            Ok(Some(request)) => request,
            Ok(None) => break,
            Err(error) => {
                // A reader error on the line it failed on again cannot be
                // skipped (it would not move on).
                let line = error_line(&error);
                if line.is_some() && line == last_error_line {
                    return Err(error);
                }
                last_error_line = line;
                lines += 1;
                // A line too long is one a reader moves past; another
                // reader error (a quote open to the end) cannot be skipped.
                if options.skip_malformed.is_none() && !input::is_line_too_long(&error) {
                    return Err(error);
                }
                skip(&mut summary, error)?;
                continue;
            }
        };
        lines += 1;
        let line = request.line;
        let key = key_of(request.key, options.ipv6_prefix);
        let ts = match clock_of_log.parse(&request.time) {
            Ok(ts) => ts,
            Err(e) => {
                skip(
                    &mut summary,
                    format!("line {line}, column {time_label}: {e}"),
                )?;
                continue;
            }
        };
        let latest = newest.unwrap_or(ts);
        if ts < latest - tolerance as i128 {
            // Far out of order: a line of another log, or a clock stepped
            // back; skipped and counted like a malformed line when asked.
            let error = format!(
                "line {line}, column {time_label}: the timestamp goes back {:?} (more than the tolerance {:?}); sort the file or raise --tolerance",
                Duration::from_nanos(u64::try_from(latest - ts).unwrap_or(u64::MAX)),
                options.tolerance
            );
            skip(&mut summary, error)?;
            continue;
        }
        newest = Some(latest.max(ts));
        let base = *base.get_or_insert(ts - tolerance as i128);
        let t = u64::try_from(ts - base).map_err(|_| {
            format!("line {line}, column {time_label}: the timestamp is out of range")
        })?;
        clock.set(clock_now(&clock).max(t));
        summary.requests += 1;
        if summary.requests.is_multiple_of(4_096) {
            progress(summary.requests);
        }
        if summary.requests.is_multiple_of(65_536) {
            // Keyed limiters sweep on their own only under memory pressure;
            // a long log of many keys is swept as it goes.
            exact.retain_recent();
        }

        // Exact: every policy at once, all or nothing.
        let pass = match exact.check_at(key.as_str(), t) {
            Ok(_) => true,
            Err(denied) => {
                lanes[denied.policy()].denied_by += 1;
                false
            }
        };
        // Approximate: the same stacking with sliding counters.
        let mut counter_pass = true;
        for lane in &mut lanes {
            let policy = lane.policy;
            let counter = match lane.counters.get(key.as_str()) {
                Some(c) => c,
                None => lane.counters.entry(key.clone()).or_insert(
                    SlidingCounter::with_clock(
                        policy.limit,
                        policy.window,
                        options.slots,
                        ManualClock::new(),
                    )
                    .map_err(|e| format!("--limit {policy} with --slots {}: {e}", options.slots))?,
                ),
            };
            if counter.check_n_at(0, t).map(|a| a.remaining()).unwrap_or(0) == 0 {
                counter_pass = false;
            }
        }
        if counter_pass {
            for lane in &lanes {
                let _ = lane.counters[key.as_str()].check_at(t);
            }
        }

        if options.plot.is_some() {
            let second = summary.timeline.entry(t / 1_000_000_000).or_default();
            if pass {
                second.0 += 1;
            } else {
                second.1 += 1;
            }
        }
        let entry = stats.entry(key.clone()).or_default();
        if pass {
            summary.admitted += 1;
            entry.admitted += 1;
        } else {
            summary.denied += 1;
            entry.denied += 1;
        }
        if counter_pass {
            summary.counter_admitted += 1;
        } else {
            summary.counter_denied += 1;
        }
        summary.differs += u64::from(pass != counter_pass);
    }
    if let Some(limit) = options.skip_malformed
        && limit.exceeded(summary.malformed, lines)
    {
        return Err(format!(
            "{} of {lines} lines are malformed, above --skip-malformed {limit} (first: {})",
            summary.malformed,
            summary.malformed_shown.join("; ")
        ));
    }
    summary.policies = lanes.iter().map(|l| (l.policy, l.denied_by)).collect();
    let mut keys: Vec<(String, KeyStats)> = stats.into_iter().collect();
    keys.sort_by(|a, b| b.1.denied.cmp(&a.1.denied).then_with(|| a.0.cmp(&b.0)));
    summary.keys = keys;
    Ok(summary)
}

/// The line number an error names (`line N...`).
fn error_line(error: &str) -> Option<u64> {
    let rest = error.strip_prefix("line ")?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The key as the tower layer's `PeerIp::ipv6_prefix` would make it: an
/// IPv6 address masked to `prefix` bits (IPv4 and IPv4-mapped whole).
fn key_of(key: String, prefix: u8) -> String {
    if prefix >= 128 {
        return key;
    }
    match key
        .trim()
        .parse::<std::net::IpAddr>()
        .map(|ip| ip.to_canonical())
    {
        Ok(std::net::IpAddr::V6(v6)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            format!(
                "{}/{prefix}",
                std::net::Ipv6Addr::from(u128::from(v6) & mask)
            )
        }
        _ => key,
    }
}

fn clock_now(clock: &ManualClock) -> u64 {
    slidelog::Clock::now(clock)
}
