//! The command line the instruction examples share: `<what> <op> <count>`,
//! with errors printed (not debug-formatted) and exit status 2.

/// Runs `run`; if it fails, prints its message and exits with status 2.
pub(crate) fn exit_on_error(run: impl FnOnce() -> Result<(), String>) {
    if let Err(message) = run() {
        eprintln!("{message}");
        std::process::exit(2);
    }
}

/// The arguments `<what> <op> <count>`, `op` one of `ops`: `what`, whether
/// `op` is the second of `ops`, and the count (of `unit`, for the error).
pub(crate) fn what_op_count(
    usage: &str,
    ops: [&str; 2],
    unit: &str,
) -> Result<(String, bool, u64), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [what, op, count] = args.as_slice() else {
        return Err(usage.into());
    };
    let second = match op.as_str() {
        op if op == ops[0] => false,
        op if op == ops[1] => true,
        _ => return Err(usage.into()),
    };
    let count = count
        .parse()
        .map_err(|_| format!("{count}: not a number of {unit}\n{usage}"))?;
    Ok((what.clone(), second, count))
}
