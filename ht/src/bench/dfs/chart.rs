//! The chart of `ht bench dfs`, drawn with `plotters`: two panels, total inserts/s of the load
//! and cells/s of the full scan after it, one pair of bars per backend (commit-log flush off,
//! on).

use std::path::Path;

use plotters::prelude::*;

/// One backend's figures: (flush off, flush on); NaN where not run.
pub struct Bars {
    pub backend: String,
    pub inserts_per_s: [f64; 2],
    pub scan_cells_per_s: [f64; 2],
}

const OFF: RGBColor = RGBColor(144, 205, 244);
const ON: RGBColor = RGBColor(43, 108, 176);

pub fn draw(path: &Path, title: &str, bars: &[Bars]) -> anyhow::Result<()> {
    if bars.is_empty() {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let width = (200 + 110 * bars.len() as u32).max(560);
    let root = SVGBackend::new(path, (width, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let root = root
        .titled(title, ("sans-serif", 16))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let panels = root.split_evenly((2, 1));
    panel(
        &panels[0],
        "load: total inserts/s (light: commit-log flush off, dark: on)",
        bars,
        |b| b.inserts_per_s,
    )?;
    panel(&panels[1], "full scan after the load: cells/s", bars, |b| {
        b.scan_cells_per_s
    })?;
    root.present()
        .map_err(|e| anyhow::anyhow!("writing {}: {e:?}", path.display()))?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    bars: &[Bars],
    value: impl Fn(&Bars) -> [f64; 2],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    let max = bars
        .iter()
        .flat_map(&value)
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max);
    let n = bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, 0.0..max * 1.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()
        .map_err(err)?;
    for (i, b) in bars.iter().enumerate() {
        chart
            .draw_series(std::iter::once(Text::new(
                b.backend.clone(),
                (i as f64 + 0.1, max * 1.07),
                ("sans-serif", 12),
            )))
            .map_err(err)?;
        for (j, (v, color)) in value(b).into_iter().zip([OFF, ON]).enumerate() {
            if !v.is_finite() {
                continue;
            }
            let x0 = i as f64 + 0.1 + 0.4 * j as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x0 + 0.38, v)],
                    color.filled(),
                )))
                .map_err(err)?;
        }
    }
    Ok(())
}
