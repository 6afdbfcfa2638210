//! The CPU model, printed beside every timing figure: a ratio means little
//! without the host it was measured on. (Shared with the benches and the
//! examples, which include this file.)

/// The CPU model, as `/proc/cpuinfo` names it (`unknown` elsewhere).
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}
