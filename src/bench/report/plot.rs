//! `--plot FILE.svg`: the latency by percentile, its x axis log-scaled by
//! 1/(1 - p) as HdrHistogram's plotter draws it (50%, 90%, 99%, 99.9%, ... equally
//! spaced, so the tail gets the room it deserves), above the responses per second
//! over the run.

use std::path::Path;

use plotters::prelude::*;

use super::run_info::{trimmed, Number};
use super::{Report, PERCENTILES};

const SIZE: (u32, u32) = (900, 760);
const FONT: &str = "sans-serif";
/// The deepest percentile drawn: 99.9999%, as 1/(1 - p).
const DEEPEST: f64 = 1e6;

/// Draws `report` as SVG to `path`.
pub fn draw(report: &Report, path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw --plot {}: {e}", path.display());
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let title = match &report.runs[..] {
        [run] => run.to_string(),
        runs => format!("{} runs merged", runs.len()),
    };
    let root = root.titled(&title, (FONT, 16)).map_err(|e| fail(&e))?;
    let (top, bottom) = root.split_vertically(SIZE.1 * 11 / 20);
    percentiles(&top, report).map_err(|e| fail(&e))?;
    per_second(&bottom, report).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Drawn<'a> = Result<(), DrawingAreaErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>>;

/// Latency against 1/(1 - p), from the histogram's own quantile iteration.
fn percentiles<'a>(area: &Area<'a>, report: &Report) -> Drawn<'a> {
    let latency = &report.latency;
    // The deepest percentile the responses can tell: with n of them, 1 - 1/n.
    let deepest = (latency.len().max(2) as f64).min(DEEPEST);
    let x_max = 10f64.powf(deepest.log10().ceil()).max(100.0);
    let unit = Unit::for_micros(if latency.is_empty() { 0 } else { latency.max() });
    let points: Vec<(f64, f64)> = latency
        .iter_quantiles(5)
        .map(|v| (1.0 / (1.0 - v.quantile_iterated_to()), unit.of(v.value_iterated_to() as f64)))
        .map(|(x, y)| (if x.is_finite() { x.min(x_max) } else { x_max }, y))
        .collect();
    let y_max = points.iter().map(|&(_, y)| y).fold(0.0, f64::max).max(unit.of(1.0)) * 1.1;
    let ticks: Vec<f64> =
        std::iter::successors(Some(1.0), |x| Some(x * 10.0)).take_while(|&x| x <= x_max).collect();
    let ticks = [vec![1.0, 2.0], ticks[1..].to_vec()].concat();
    let mut chart = chart(area, "latency by percentile")
        .build_cartesian_2d((1.0..x_max).log_scale().with_key_points(ticks), 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc(format!("latency ({})", unit.name))
        .x_label_formatter(&|x| percentile_label(*x))
        .draw()?;
    chart.draw_series(LineSeries::new(points, BLUE.stroke_width(2)))?;
    // The percentiles the text report lists, as dots on the curve.
    let listed = PERCENTILES.iter().filter(|(_, q)| *q < 1.0).filter(|_| !latency.is_empty());
    let dots = listed.map(|&(_, q)| (1.0 / (1.0 - q), unit.of(latency.value_at_quantile(q) as f64)));
    chart.draw_series(dots.map(|point| Circle::new(point, 3, BLUE.filled())))?;
    Ok(())
}

/// Responses per second, second by second, each at its middle. A last second under
/// a tenth of one is left out: a rate over so little time says nothing.
fn per_second<'a>(area: &Area<'a>, report: &Report) -> Drawn<'a> {
    let run = report.duration.as_secs_f64();
    let rates: Vec<(f64, f64)> = (report.per_second.iter().enumerate())
        .map(|(i, &n)| (i as f64, (run - i as f64).clamp(0.0, 1.0), n))
        .filter(|&(_, length, _)| length >= 0.1)
        .map(|(start, length, n)| (start + length / 2.0, n as f64 / length))
        .collect();
    let x_max = run.max(1.0);
    let y_max = rates.iter().map(|&(_, r)| r).fold(0.0, f64::max).max(1.0) * 1.1;
    let mut chart = chart(area, "responses per second").build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the start")
        .y_desc("responses/s")
        .y_label_formatter(&|r| Number(r.round()).to_string())
        .draw()?;
    chart.draw_series(LineSeries::new(rates.iter().copied(), RED.stroke_width(2)))?;
    chart.draw_series(rates.into_iter().map(|point| Circle::new(point, 2, RED.filled())))?;
    Ok(())
}

/// A chart on `area` with the caption and margins both have.
fn chart<'a, 'b>(area: &'a Area<'b>, caption: &str) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, (FONT, 15))
        .margin(12)
        // Room for the last label, centred on the axis's end.
        .margin_right(36)
        .x_label_area_size(36)
        .y_label_area_size(64);
    builder
}

/// `2` as `50%`, `1000` as `99.9%`: the percentile whose 1/(1 - p) is `x`.
fn percentile_label(x: f64) -> String {
    // Six decimals: the deepest percentile drawn, 99.9999%, needs four.
    format!("{}%", trimmed(100.0 * (1.0 - 1.0 / x), 6))
}

/// The unit of the latency axis: the one the highest value reads best in.
struct Unit {
    name: &'static str,
    micros: f64,
}

impl Unit {
    fn for_micros(max: u64) -> Unit {
        match max {
            0..1_000 => Unit { name: "µs", micros: 1.0 },
            1_000..1_000_000 => Unit { name: "ms", micros: 1e3 },
            _ => Unit { name: "s", micros: 1e6 },
        }
    }

    fn of(&self, micros: f64) -> f64 {
        micros / self.micros
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    #[test]
    fn the_axis_reads_in_percentiles() {
        let labels: Vec<String> =
            [1.0, 2.0, 10.0, 100.0, 1e3, 1e4, 1e6].into_iter().map(percentile_label).collect();
        assert_eq!(labels, ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.9999%"]);
    }

    #[test]
    fn a_plot_is_an_svg_with_both_charts_even_when_empty() {
        let path = std::env::temp_dir().join(format!("percore-plot-{}.svg", std::process::id()));
        for latencies in [vec![], (1..=10_000).collect::<Vec<u64>>()] {
            let mut report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
            for &micros in &latencies {
                report.latency.saturating_record(micros * 100);
            }
            report.per_second = vec![4000, 5000, 1000];
            report.duration = Duration::from_millis(2500);
            draw(&report, &path).expect("drawn");
            let svg = std::fs::read_to_string(&path).expect("written");
            let _ = std::fs::remove_file(&path);
            assert!(svg.starts_with("<svg"), "{svg}");
            // The axis goes as deep as the responses tell: 99% for none, 99.99% for 10,000.
            let deepest = if latencies.is_empty() { "99%" } else { "99.99%" };
            for text in ["latency by percentile", "responses per second", deepest] {
                assert!(svg.contains(text), "no {text:?} in the SVG");
            }
        }
    }
}
