//! Draws BENCHMARKS.md's chart (ns per call by scenario: slidelog's `check`
//! and `admit`, governor, governor reading `remaining` where the CSV has it,
//! and the `Mutex<VecDeque>` log) from the CSV that `cargo bench -p
//! slidelog-peers --bench side_by_side` writes, so the picture is
//! regenerated, never drawn by hand (from the repository's root):
//!
//! ```sh
//! cargo bench -p slidelog-peers --bench side_by_side          # writes target/side_by_side.csv
//! cargo run -p slidelog-peers --example bench_chart           # writes target/benchmarks.svg
//! cargo run -p slidelog-peers --example bench_chart -- IN.csv OUT.svg
//! cargo run -p slidelog-peers --example bench_chart -- --docs # replaces the tracked docs/benchmarks.svg
//! ```
//!
//! The tracked chart is only replaced when asked (`--docs`, or naming it as
//! the output): a partial run (`SIDE_BY_SIDE_ONLY=...`) must not silently
//! overwrite the full picture.

use plotters::prelude::*;

/// One scenario's medians, ns per call.
struct Row {
    name: String,
    bars: [Option<f64>; 5],
}

const SERIES: [(&str, RGBColor); 5] = [
    ("slidelog check", RGBColor(31, 119, 180)),
    ("slidelog admit", RGBColor(44, 160, 44)),
    ("governor", RGBColor(255, 127, 14)),
    ("governor reading remaining", RGBColor(214, 39, 40)),
    ("Mutex<VecDeque> log", RGBColor(127, 127, 127)),
];

/// Where each series is in the CSV row: `slidelog`, `slidelog_admit`,
/// `governor`, `governor_remaining` (column 9: a CSV may lack it, and a row
/// may leave it empty; either draws no bar), `mutex_log`.
const COLUMNS: [usize; 5] = [1, 2, 3, 9, 4];

/// The chart BENCHMARKS.md shows.
const TRACKED: &str = "docs/benchmarks.svg";

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_chart: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut docs = false;
    let mut paths = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--docs" => docs = true,
            "-h" | "--help" => {
                println!("usage: bench_chart [IN.csv [OUT.svg]] [--docs]");
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                return Err(format!(
                    "unknown option {flag} (usage: bench_chart [IN.csv [OUT.svg]] [--docs])"
                )
                .into());
            }
            _ => paths.push(arg),
        }
    }
    if paths.len() > 2 {
        return Err("at most two paths: IN.csv OUT.svg".into());
    }
    let mut paths = paths.into_iter();
    let input = paths
        .next()
        .unwrap_or_else(|| "target/side_by_side.csv".into());
    let output = paths.next().unwrap_or_else(|| {
        if docs {
            TRACKED.into()
        } else {
            "target/benchmarks.svg".into()
        }
    });
    let mut rows = Vec::new();
    let mut cpu = None;
    let mut reader = csv::Reader::from_path(&input).map_err(|e| {
        format!("{input}: {e} (run `cargo bench -p slidelog-peers --bench side_by_side` first)")
    })?;
    for record in reader.records() {
        let record = record?;
        let number = |i: usize| record.get(i).and_then(|v| v.parse::<f64>().ok());
        // Column 7, the host, if the CSV has that column.
        cpu = cpu.or_else(|| record.get(7).filter(|c| !c.is_empty()).map(String::from));
        rows.push(Row {
            name: record.get(0).unwrap_or("").to_string(),
            bars: COLUMNS.map(number),
        });
    }
    if rows.is_empty() {
        return Err(format!("{input} holds no scenario").into());
    }
    if let Some(dir) = std::path::Path::new(&output).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let max = rows
        .iter()
        .flat_map(|r| r.bars.iter().flatten())
        .fold(0.0f64, |m, &v| m.max(v))
        .max(1.0);

    let (label_w, bar_h, gap, top, width) = (540i32, 12i32, 14i32, 60i32, 1300i32);
    let plot_w = width - label_w - 90;
    let row_h = SERIES.len() as i32 * bar_h + gap;
    let height = top + rows.len() as i32 * row_h + 30;
    let root = SVGBackend::new(&output, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let text = |size: i32| ("sans-serif", size).into_font();
    let title = "ns per call (lower is better), medians of alternating rounds in one process";
    let title = match &cpu {
        Some(cpu) => format!("{title}, on {cpu}"),
        None => title.to_string(),
    };
    root.draw(&Text::new(title, (10, 10), text(16)))?;
    for (i, (name, color)) in SERIES.iter().enumerate() {
        let x = 10 + i as i32 * 230;
        root.draw(&Rectangle::new([(x, 36), (x + 14, 48)], color.filled()))?;
        root.draw(&Text::new(*name, (x + 20, 35), text(13)))?;
    }
    for (r, row) in rows.iter().enumerate() {
        let y0 = top + r as i32 * row_h;
        root.draw(&Text::new(row.name.clone(), (10, y0 + bar_h), text(12)))?;
        for (i, value) in row.bars.iter().enumerate() {
            let Some(v) = value else { continue };
            let y = y0 + i as i32 * bar_h;
            let w = ((v / max) * plot_w as f64).round().max(1.0) as i32;
            root.draw(&Rectangle::new(
                [(label_w, y), (label_w + w, y + bar_h - 2)],
                SERIES[i].1.filled(),
            ))?;
            root.draw(&Text::new(
                format!("{v:.1}"),
                (label_w + w + 4, y),
                text(11),
            ))?;
        }
    }
    root.present()?;
    println!("wrote {output} ({} scenarios)", rows.len());
    Ok(())
}
