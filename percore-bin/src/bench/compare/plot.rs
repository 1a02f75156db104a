//! A comparison's charts as SVG: `--plot`, one point's lead figure round by round,
//! so that a machine's drift, which falls on every target alike, shows; and a grid's
//! `--rate-plot` and `--p99-plot`, each point's median against the connections, a
//! line per target and server CPU set, as the classic hello-server studies drew them.

use std::path::Path;

use plotters::prelude::*;

use super::comparison::{Comparison, Point};
use super::output::{lead_figure, series, Figure};

const SIZE: (u32, u32) = (900, 500);
const FONT: &str = "sans-serif";

/// Draws `point`'s lead figure round by round to `path`.
pub fn rounds(comparison: &Comparison, point: &Point, path: &Path) -> Result<(), String> {
    let figure = lead_figure(point);
    let lines = (0..comparison.names.len())
        .map(|target| {
            let values = point.rounds.iter().enumerate();
            let points =
                values.filter_map(|(i, round)| Some(((i + 1) as f64, figure.of(round.of(target)?)?)));
            (comparison.names[target].clone(), points.collect())
        })
        .collect();
    let xs = (1..=point.rounds.len()).map(|round| round.to_string()).collect();
    let chart = Chart { caption: format!("{} by round", figure.words()), x: ("round", xs), figure, lines };
    chart.draw(path).map_err(|e| format!("cannot draw --plot {}: {e}", path.display()))
}

/// Draws each point's median of `figure` against its connections to `path`.
pub fn grid(comparison: &Comparison, figure: Figure, path: &Path) -> Result<(), String> {
    let (connections, series) = series(comparison, figure);
    let lines = series
        .into_iter()
        .map(|line| {
            let values = line.medians.iter().enumerate();
            let points = values.filter_map(|(i, median)| Some(((i + 1) as f64, (*median)?)));
            (line.name, points.collect())
        })
        .collect();
    let xs = connections.iter().map(u64::to_string).collect();
    let caption = format!("{} against connections", figure.words());
    let chart = Chart { caption, x: ("connections", xs), figure, lines };
    let option = if figure == Figure::Rate { "--rate-plot" } else { "--p99-plot" };
    chart.draw(path).map_err(|e| format!("cannot draw {option} {}: {e}", path.display()))
}

/// A line chart: its caption, the x axis's name and labels (at 1, 2, ...), the
/// figure on the y axis, and its lines, each a name and its points.
struct Chart {
    caption: String,
    x: (&'static str, Vec<String>),
    figure: Figure,
    lines: Vec<(String, Vec<(f64, f64)>)>,
}

impl Chart {
    fn draw(self, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        // Latencies are drawn in milliseconds, the unit the report gives them in.
        // The legend goes where the lines are not: responses/s falls as connections
        // grow, latency rises.
        let (y_name, scale, decimals, legend) = match self.figure {
            Figure::Rate => ("responses/s".to_string(), 1.0, 0, SeriesLabelPosition::UpperRight),
            Figure::ServerCpu => {
                (format!("{} (µs)", self.figure.words()), 1.0, 1, SeriesLabelPosition::UpperRight)
            }
            Figure::P50 | Figure::P99 => {
                (format!("{} (ms)", self.figure.words()), 1e-3, 2, SeriesLabelPosition::UpperLeft)
            }
        };
        let lines: Vec<(String, Vec<(f64, f64)>)> = self
            .lines
            .into_iter()
            .map(|(name, points)| (name, points.into_iter().map(|(x, y)| (x, y * scale)).collect()))
            .collect();
        let y_max = lines.iter().flat_map(|(_, points)| points).map(|&(_, y)| y).fold(0.0, f64::max);
        let y_max = y_max.max(f64::MIN_POSITIVE) * 1.1;
        let (x_name, labels) = self.x;
        let x_max = labels.len().max(1) as f64 + 0.5;
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(self.caption, (FONT, 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d(0.5..x_max, 0.0..y_max)?;
        let label = |x: &f64| {
            let at = x.round();
            let index = at as usize;
            let whole = (x - at).abs() < 1e-6 && index >= 1;
            whole.then(|| labels.get(index - 1).cloned()).flatten().unwrap_or_default()
        };
        chart
            .configure_mesh()
            .x_desc(x_name)
            .y_desc(y_name)
            .x_labels(labels.len().max(1))
            .x_label_formatter(&label)
            .y_label_formatter(&|y| format!("{y:.decimals$}"))
            .draw()?;
        for (i, (name, points)) in lines.into_iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(legend)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    }
}
