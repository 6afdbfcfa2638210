//! The CPU model, printed beside every timing figure: a ratio means little
//! without the host it was measured on. (Shared with the benches and the
//! examples, which include this file.)

/// The CPU model, as `/proc/cpuinfo` names it (`unknown` elsewhere), with
/// the data caches one core sees when Linux lists them: `AMD EPYC (L1d 32
/// KiB, L2 1 MiB, L3 32 MiB)`. A keyed limiter's figures turn on whether
/// its states fit in L2, and one vendor's "EPYC" or "Xeon" spans parts with
/// 512 KiB to 2 MiB of it.
pub(crate) fn cpu_model() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    match data_caches() {
        Some(caches) => format!("{model} ({caches})"),
        None => model,
    }
}

/// CPU 0's data and unified caches from sysfs, smallest level first
/// (`L1d 32 KiB, L2 1 MiB, L3 32 MiB`), or `None` where sysfs lists none.
fn data_caches() -> Option<String> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let read = |index: &std::path::Path, name: &str| {
        std::fs::read_to_string(index.join(name))
            .ok()
            .map(|text| text.trim().to_string())
    };
    let mut caches: Vec<(u32, String)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| {
            let index = entry.ok()?.path();
            let level: u32 = read(&index, "level")?.parse().ok()?;
            let kind = read(&index, "type")?;
            let label = match kind.as_str() {
                "Data" => format!("L{level}d"),
                "Unified" => format!("L{level}"),
                _ => return None, // instruction caches hold no states
            };
            Some((level, format!("{label} {}", size(&read(&index, "size")?)?)))
        })
        .collect();
    caches.sort();
    (!caches.is_empty()).then(|| {
        caches
            .into_iter()
            .map(|(_, cache)| cache)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// sysfs's `32K` or `1024K` as `32 KiB` or `1 MiB`.
fn size(text: &str) -> Option<String> {
    let kib: u64 = text.strip_suffix('K')?.parse().ok()?;
    Some(if kib >= 1024 && kib.is_multiple_of(1024) {
        format!("{} MiB", kib / 1024)
    } else {
        format!("{kib} KiB")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        use super::size;
        assert_eq!(size("32K").as_deref(), Some("32 KiB"));
        assert_eq!(size("1024K").as_deref(), Some("1 MiB"));
        assert_eq!(size("32768K").as_deref(), Some("32 MiB"));
        assert_eq!(size("1280K").as_deref(), Some("1280 KiB"));
        assert_eq!(size("1M"), None);
        assert_eq!(size("K"), None);
    }
}
