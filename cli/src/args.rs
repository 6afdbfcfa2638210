//! The command line: the subcommands and their flags (clap), and the
//! demo's defaults. `serve`'s flags are in `serve_command.rs`.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::input;
use crate::parse::{self, duration as parse_duration, positive_duration, window as parse_window};
use crate::replay;
use crate::serve_command::ServeArgs;

#[derive(Parser, Debug)]
#[command(
    name = "slidelog",
    version,
    propagate_version = true,
    about = "Exact lock-free sliding-window-log rate limiting: demo and tools"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Hammer one limiter, then many keys, from several threads, and check
    /// that no window ever held more than the limit (the default command).
    Demo(DemoArgs),
    /// The one-minute side-by-side of the crate's limiters (exact log,
    /// approximate counter) and a Mutex<VecDeque> log on this machine.
    Bench(BenchArgs),
    /// Replay a traffic log (CSV/TSV, or an nginx/Apache combined log;
    /// plain or .gz) through the exact limiter and the approximate counter,
    /// and report admitted, denied and the top offenders per policy.
    Replay(ReplayArgs),
    /// Serve Envoy's rate-limit API (gRPC ShouldRateLimit, health) with
    /// exact sliding windows, configured with envoyproxy/ratelimit's YAML.
    Serve(Box<ServeArgs>),
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Total time budget in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) seconds: f64,
    /// Threads for the contended rows.
    #[arg(long, default_value_t = 2)]
    pub(crate) threads: usize,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// The traffic log (CSV, TSV or the combined log format), read directly
    /// when gzip-compressed (`.gz`); `-` for stdin.
    pub(crate) file: String,
    /// A policy N/WINDOW, e.g. `100/1m` (repeat for stacked limits: a request
    /// must fit all of them; each policy once).
    #[arg(long = "limit", required = true, value_parser = parse::policy)]
    pub(crate) limits: Vec<parse::Policy>,
    /// The column holding timestamps: RFC 3339, a date-time without a zone
    /// (in --tz), or Unix epoch s/ms/us/ns (by magnitude, or --time-unit).
    /// A column number from 1 with --no-header. Not used with --input
    /// combined.
    #[arg(long)]
    pub(crate) time_column: Option<String>,
    /// The column holding the key (client IP, API key, user); with --input
    /// combined a field name (default `host`, also called `ip`; or ident,
    /// user, request, status, bytes, referer, agent).
    #[arg(long)]
    pub(crate) key_column: Option<String>,
    /// The input format: csv (default), tsv, or combined (nginx/Apache
    /// combined log format).
    #[arg(long, value_enum, default_value_t = input::InputFormat::Csv)]
    pub(crate) input: input::InputFormat,
    /// CSV/TSV without a header row: --time-column and --key-column are
    /// column numbers from 1.
    #[arg(long)]
    pub(crate) no_header: bool,
    /// The unit of numeric timestamps (default: by magnitude: seconds below
    /// 1e11, then ms, us, ns).
    #[arg(long, value_enum)]
    pub(crate) time_unit: Option<input::TimeUnit>,
    /// The time zone of date-times written without one (an IANA name such
    /// as Europe/Paris, or UTC).
    #[arg(long, default_value = "UTC")]
    pub(crate) tz: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = replay::Format::Table)]
    pub(crate) format: replay::Format,
    /// Shorthand for `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
    /// Skip lines that cannot be read (bad fields, bad timestamps, lines over 1 MiB): count
    /// them, show the first few, and fail only above LIMIT, a count (`100`)
    /// or a share of the lines (`0.5%`; the default without a value: `1%`).
    #[arg(long, value_name = "LIMIT", num_args = 0..=1, default_missing_value = "1%",
          value_parser = replay::parse_malformed_limit)]
    pub(crate) skip_malformed: Option<replay::MalformedLimit>,
    /// Key IPv6 addresses by this prefix length, as the tower layer's
    /// `PeerIp::ipv6_prefix` does (one client often holds a whole /64);
    /// 128 (the default) keys each address.
    #[arg(long, value_name = "BITS", default_value_t = 128,
          value_parser = clap::value_parser!(u8).range(0..=128))]
    pub(crate) ipv6_prefix: u8,
    /// Field delimiter (default: tab for .tsv files or a tab-separated
    /// header, comma otherwise).
    #[arg(long)]
    pub(crate) delimiter: Option<char>,
    /// How far timestamps may go backwards before it is an error (`0s`:
    /// not at all).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) tolerance: Duration,
    /// Slots of the approximate counter the exact log is compared with.
    #[arg(long, default_value_t = 10)]
    pub(crate) slots: u32,
    /// How many top offenders to list.
    #[arg(long, default_value_t = 10)]
    pub(crate) top: usize,
    /// Also draw admitted vs denied per second over the log, and the top
    /// keys, into this SVG file.
    #[arg(long, value_name = "OUT.svg")]
    pub(crate) plot: Option<std::path::PathBuf>,
}

/// Which limiter the demo uses, for one key and per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Algo {
    /// The exact sliding-window log.
    Log,
    /// The approximate sliding-window counter (`--slots` sub-windows).
    Counter,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct DemoArgs {
    /// Worker threads (default: the number of CPUs, at least 2).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Distinct keys in the keyed phase.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) keys: u64,
    /// Admissions allowed per window (per key in the keyed phase).
    #[arg(long, default_value_t = 100)]
    pub(crate) limit: u32,
    /// The window, e.g. `10ms`, `1s`, `2m`.
    #[arg(long, default_value = "10ms", value_parser = parse_window)]
    pub(crate) window: Duration,
    /// How long each phase runs, e.g. `2s`.
    #[arg(long, default_value = "2s", value_parser = positive_duration)]
    pub(crate) duration: Duration,
    /// The algorithm of both phases: `log` (exact; judged on "no window
    /// holds more than the limit") or `counter` (approximate; judged on its
    /// own guarantee, "no N consecutive slots hold more than the limit").
    #[arg(long, value_enum, default_value_t = Algo::Log)]
    pub(crate) algorithm: Algo,
    /// Sub-windows of the counter (`--algorithm counter`).
    #[arg(long, default_value_t = 10)]
    pub(crate) slots: u32,
    /// Run against the Redis at this URL instead (e.g.
    /// `redis://127.0.0.1/`): one client per thread, each with its own
    /// connection, on one shared key, both layouts.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            threads: None,
            keys: 10_000,
            limit: 100,
            window: Duration::from_millis(10),
            duration: Duration::from_secs(2),
            algorithm: Algo::Log,
            slots: 10,
            redis: None,
        }
    }
}
