//! `slidelog`: a demo that proves itself.
//!
//! `slidelog` (or `slidelog demo`) runs several threads against one limiter
//! and then against many keys, on embedded defaults, and reports checks/s,
//! admissions, denials and the largest number of admissions it saw in any
//! window — which must never exceed the limit.
//!
//! | file | what it owns |
//! |---|---|
//! | `main.rs` | the entry: the subcommand run, SIGPIPE's default restored |
//! | `args.rs` | the subcommands' flags (clap), the demo's defaults |
//! | `demo.rs` | `slidelog demo`: the phases and the window count that judges them |
//! | `redis_demo.rs` | `slidelog demo --redis URL` |
//! | `bench.rs`, `mutex_log.rs`, `cpu.rs`, `progress.rs` | `slidelog bench`, its `Mutex<VecDeque>` contender, the CPU's name, progress lines |
//! | `replay/` | `slidelog replay`: the run, its report and chart (`plot.rs`) |
//! | `lib.rs`, `input/` | the replay's log reader, a library for the fuzz targets |
//! | `serve_command.rs` | `slidelog serve`'s flags, handed to the service |

use clap::Parser;
use slidelog::serve::parse;
use slidelog_cli::input;

mod args;
mod bench;
mod cpu;
mod demo;
mod mutex_log;
mod plot;
mod progress;
mod redis_demo;
mod replay;
mod serve_command;

use args::{Cli, Command, DemoArgs};

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `slidelog serve` reads envoyproxy/ratelimit's variables too.
    let args = slidelog::serve::with_upstream_env(args, |name| std::env::var(name).ok())
        .unwrap_or_else(|e| {
            eprintln!("slidelog serve: {e}");
            std::process::exit(2);
        });
    let cli = Cli::parse_from(args);
    let command = cli.command.unwrap_or(Command::Demo(DemoArgs::default()));
    if !matches!(command, Command::Serve(_)) {
        die_quietly_on_broken_pipe();
    }
    let result = match command {
        Command::Demo(args) => demo::demo(&args),
        Command::Bench(args) => bench::run(args.seconds, args.threads),
        Command::Serve(args) => serve_command::run_serve(*args),
        Command::Replay(args) => replay::run(&replay::Options {
            file: args.file,
            policies: args.limits,
            time_column: args.time_column,
            key_column: args.key_column,
            input: args.input,
            no_header: args.no_header,
            time_unit: args.time_unit,
            tz: args.tz,
            format: if args.json {
                replay::Format::Json
            } else {
                args.format
            },
            skip_malformed: args.skip_malformed,
            ipv6_prefix: args.ipv6_prefix,
            delimiter: args.delimiter,
            tolerance: args.tolerance,
            slots: args.slots,
            top: args.top,
            plot: args.plot,
        }),
    };
    if let Err(message) = result {
        eprintln!("slidelog: {message}");
        std::process::exit(2);
    }
}

/// Lets a closed stdout end the process quietly, as it ends other command-line
/// tools: `slidelog replay … | head` stops when `head` has its lines. Rust
/// ignores `SIGPIPE` at startup, so a write to a closed pipe fails instead
/// and `println!` panics with a backtrace. Not for `serve`: a server
/// outlives its clients' connections and must not die of one.
#[cfg(unix)]
#[allow(unsafe_code)]
fn die_quietly_on_broken_pipe() {
    // SAFETY: `signal` only sets the disposition of `SIGPIPE` back to the
    // default, with a handler of libc's own (`SIG_DFL`), no Rust code run
    // from the signal; it is called once, at the start of `main`, before
    // this process starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Elsewhere there is no `SIGPIPE`: a closed stdout fails the write.
#[cfg(not(unix))]
fn die_quietly_on_broken_pipe() {}
