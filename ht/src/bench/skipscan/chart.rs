//! The chart of `ht bench skipscan`: per mode and cache state a panel of median milliseconds
//! (log scale) against the fraction of the object ids asked for (log scale), one line per
//! method.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

/// One panel: a title, the fractions (percent) and per method its median ms per fraction
/// (NaN: not run).
pub struct Panel {
    pub title: String,
    pub fractions: Vec<f64>,
    pub lines: Vec<(String, Vec<f64>)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

/// Draws the panels in a grid of two columns (warm, cold) into an SVG file.
pub fn draw(path: &Path, panels: &[Panel], rows: u64) -> anyhow::Result<()> {
    if panels.is_empty() {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let cols = panels.len().min(2);
    let grid_rows = panels.len().div_ceil(cols);
    let size = (520 * cols as u32, 60 + 400 * grid_rows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let root = root
        .titled(
            &format!("ht bench skipscan: {rows} rows, median ms against % of object ids"),
            ("sans-serif", 18),
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let areas = root.split_evenly((grid_rows, cols));
    for (panel, area) in panels.iter().zip(&areas) {
        draw_panel(panel, area).with_context(|| format!("drawing {}", panel.title))?;
    }
    root.present()
        .map_err(|e| anyhow::anyhow!("writing {}: {e:?}", path.display()))?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, plotters::coord::Shift>,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    let (fmin, fmax) = panel
        .fractions
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &f| (a.min(f), b.max(f)));
    let ms: Vec<f64> = panel
        .lines
        .iter()
        .flat_map(|(_, t)| t.iter().copied())
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let (ymin, ymax) = ms
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let (ymin, ymax) = if ms.is_empty() {
        (0.1, 1.0)
    } else {
        (ymin / 2.0, ymax * 2.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(
            (fmin / 1.5..fmax * 1.5).log_scale(),
            (ymin..ymax).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("% of object ids")
        .y_desc("ms")
        .x_label_formatter(&|v| label(*v))
        .y_label_formatter(&|v| label(*v))
        .draw()
        .map_err(err)?;
    for (k, (name, t)) in panel.lines.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let points: Vec<(f64, f64)> = panel
            .fractions
            .iter()
            .zip(t)
            .filter(|(_, v)| v.is_finite() && **v > 0.0)
            .map(|(&f, &v)| (f, v))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// A tick value without the float noise of a log axis's steps (0.30000000000000004 -> 0.3).
fn label(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    format!("{r}")
}
