//! `--plot FILE.svg` of a comparison: each target's lead figure round by round, so
//! that a machine's drift, which falls on every target alike, shows.

use std::path::Path;

use plotters::prelude::*;

use super::comparison::Comparison;
use super::output::{lead_figure, Figure};

const SIZE: (u32, u32) = (900, 500);
const FONT: &str = "sans-serif";

/// Draws `comparison` as SVG to `path`.
pub fn draw(comparison: &Comparison, path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw --plot {}: {e}", path.display());
    let figure = lead_figure(comparison);
    let series: Vec<Vec<(f64, f64)>> = (0..comparison.targets.len())
        .map(|target| {
            let values = comparison.rounds.iter().enumerate();
            values.filter_map(|(i, round)| Some(((i + 1) as f64, figure.of(round.of(target)?)?))).collect()
        })
        .collect();
    let y_max = series.iter().flatten().map(|&(_, y)| y).fold(0.0, f64::max).max(f64::MIN_POSITIVE) * 1.1;
    let x_max = comparison.rounds.len().max(1) as f64 + 0.5;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let caption = format!("{} by round", figure.words());
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FONT, 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(0.5..x_max, 0.0..y_max)
        .map_err(|e| fail(&e))?;
    let unit = if figure == Figure::Rate { "responses/s" } else { "µs" };
    chart
        .configure_mesh()
        .x_desc("round")
        .y_desc(format!("{} ({unit})", figure.words()))
        .x_labels(comparison.rounds.len().max(1))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| fail(&e))?;
    for (target, points) in series.into_iter().enumerate() {
        let color = Palette99::pick(target).to_rgba();
        let name = comparison.targets[target].name.clone();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| fail(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}
