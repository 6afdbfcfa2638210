//! `slidelog replay --plot out.svg`: admitted vs denied per second over the
//! log, and the top keys, drawn with `plotters`.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

const ADMITTED: RGBColor = RGBColor(44, 160, 44);
const DENIED: RGBColor = RGBColor(214, 39, 40);

/// Draws `timeline` (second → (admitted, denied)) and `top` (key,
/// admitted, denied) into the SVG at `path`.
pub(crate) fn draw(
    path: &Path,
    timeline: &BTreeMap<u64, (u64, u64)>,
    top: &[(String, u64, u64)],
) -> Result<(), Box<dyn std::error::Error>> {
    let (width, height) = (1200u32, 420 + 24 * top.len().max(1) as u32);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(400);

    let first = timeline.keys().next().copied().unwrap_or(0);
    let last = timeline
        .keys()
        .next_back()
        .copied()
        .unwrap_or(0)
        .max(first + 1);
    let peak = timeline
        .values()
        .map(|&(a, d)| a.max(d))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut chart = ChartBuilder::on(&upper)
        .caption("requests per second of the log", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0u64..(last - first + 1), 0u64..peak + peak / 10 + 1)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first record")
        .y_desc("requests")
        .draw()?;
    let series = |pick: fn(&(u64, u64)) -> u64| {
        // Seconds without records are zeros, not gaps.
        (0..=(last - first))
            .map(move |s| (s, timeline.get(&(first + s)).map_or(0, pick)))
            .collect::<Vec<_>>()
    };
    chart
        .draw_series(LineSeries::new(series(|v| v.0), ADMITTED.stroke_width(2)))?
        .label("admitted")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], ADMITTED.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(series(|v| v.1), DENIED.stroke_width(2)))?
        .label("denied")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], DENIED.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    // The top keys: one bar per key, admitted then denied.
    let text = ("sans-serif", 13).into_font();
    lower.draw(&Text::new(
        if top.is_empty() {
            "no key was denied".to_string()
        } else {
            format!(
                "top {} keys by denials (green admitted, red denied)",
                top.len()
            )
        },
        (12, 4),
        text.clone(),
    ))?;
    let most = top.iter().map(|(_, a, d)| a + d).max().unwrap_or(1).max(1);
    let (label_w, bar_w) = (320i32, width as i32 - 320 - 140);
    for (i, (key, admitted, denied)) in top.iter().enumerate() {
        let y = 26 + 24 * i as i32;
        let shown: String = crate::input::printable(key).chars().take(40).collect();
        lower.draw(&Text::new(shown, (12, y + 2), text.clone()))?;
        let a = (*admitted as f64 / most as f64 * bar_w as f64).round() as i32;
        let d = (*denied as f64 / most as f64 * bar_w as f64).round() as i32;
        lower.draw(&Rectangle::new(
            [(label_w, y), (label_w + a, y + 16)],
            ADMITTED.filled(),
        ))?;
        lower.draw(&Rectangle::new(
            [(label_w + a, y), (label_w + a + d.max(1), y + 16)],
            DENIED.filled(),
        ))?;
        lower.draw(&Text::new(
            format!("{admitted} / {denied}"),
            (label_w + a + d + 6, y + 2),
            text.clone(),
        ))?;
    }
    root.present()?;
    Ok(())
}
