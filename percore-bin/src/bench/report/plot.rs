//! `--plot FILE.svg`: the latency by percentile, its x axis log-scaled by
//! 1/(1 - p) as HdrHistogram's plotter draws it (50%, 90%, 99%, 99.9%, ... equally
//! spaced, so the tail gets the room it deserves), above the responses per second
//! over the run.

use std::path::Path;

use plotters::prelude::*;

use super::figures::{Report, PERCENTILES};
use super::run_info::{trimmed, Number};

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

    /// A report over 2.5 s of `count` latencies, 100 µs apart from 100 µs.
    fn report_of(count: u64) -> Report {
        let mut report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
        for micros in 1..=count {
            report.latency.saturating_record(micros * 100);
        }
        report.per_second = vec![4000, 5000, 1000];
        report.duration = Duration::from_millis(2500);
        report
    }

    fn drawn(report: &Report) -> String {
        let path = std::env::temp_dir().join(format!("percore-plot-{}-{:p}.svg", std::process::id(), report));
        draw(report, &path).expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("written");
        let _ = std::fs::remove_file(&path);
        svg
    }

    /// The value of `name="..."` in an SVG element.
    fn attribute<'a>(element: &'a str, name: &str) -> &'a str {
        let start = element.find(&format!(" {name}=\"")).expect("the attribute") + name.len() + 3;
        &element[start..start + element[start..].find('"').expect("its end")]
    }

    /// Every `<polyline>`: its stroke colour and its points.
    fn polylines(svg: &str) -> Vec<(&str, Vec<(i32, i32)>)> {
        let point = |xy: &str| {
            let (x, y) = xy.split_once(',').expect("x,y");
            (x.parse().expect("x"), y.parse().expect("y"))
        };
        svg.split("<polyline")
            .skip(1)
            .map(|element| {
                (
                    attribute(element, "stroke"),
                    attribute(element, "points").split_whitespace().map(point).collect(),
                )
            })
            .collect()
    }

    /// A chart's plotting area, in the SVG's pixels.
    #[derive(Clone, Copy, Debug)]
    struct Frame {
        left: i32,
        right: i32,
        top: i32,
        bottom: i32,
    }

    impl Frame {
        /// Where `fraction` of the way along the x axis is.
        fn x(&self, fraction: f64) -> f64 {
            self.left as f64 + fraction * (self.right - self.left) as f64
        }

        /// How far above the x axis `fraction` of the height is.
        fn height(&self, fraction: f64) -> f64 {
            fraction * (self.bottom - self.top) as f64
        }
    }

    /// The charts' frames, top to bottom, from their axes: the black lines longer
    /// than a tick, vertical (y) and horizontal (x).
    fn frames(lines: &[(&str, Vec<(i32, i32)>)]) -> Vec<Frame> {
        let black = (lines.iter().filter(|(stroke, p)| *stroke == "#000000" && p.len() == 2))
            .map(|(_, p)| (p[0], p[1]));
        let span = |from: i32, to: i32| (from.min(to), from.max(to));
        let ys: Vec<(i32, i32)> = black
            .clone()
            .filter(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() > 20)
            .map(|(a, b)| span(a.1, b.1))
            .collect();
        let xs: Vec<(i32, i32)> = black
            .filter(|(a, b)| a.1 == b.1 && (a.0 - b.0).abs() > 20)
            .map(|(a, b)| span(a.0, b.0))
            .collect();
        assert_eq!(ys.len(), xs.len(), "an x axis for each y axis: {ys:?} {xs:?}");
        ys.into_iter()
            .zip(xs)
            .map(|((top, bottom), (left, right))| Frame { left, right, top, bottom })
            .collect()
    }

    /// The points of the first line drawn in `colour`.
    fn curve<'a>(lines: &'a [(&str, Vec<(i32, i32)>)], colour: &str) -> &'a [(i32, i32)] {
        &lines.iter().find(|(stroke, _)| *stroke == colour).expect("a curve in that colour").1
    }

    #[test]
    fn the_charts_are_stacked_and_the_curve_spans_its_axes() {
        let svg = drawn(&report_of(10_000));
        let lines = polylines(&svg);
        let height = SIZE.1 as i32;
        let [latency, rates] = frames(&lines)[..] else { panic!("two charts") };
        // Percentiles above (about 11/20 of the height), rates below, each with room.
        assert!(latency.top < height / 10 && latency.bottom > height * 9 / 20, "{latency:?}");
        assert!(latency.bottom < rates.top && rates.bottom - rates.top > height / 4, "{rates:?}");
        assert!(rates.bottom < height, "{rates:?}");
        let curve = curve(&lines, "#0000FF");
        let xs = curve.iter().map(|&(x, _)| x);
        // From 0% at the y axis to the deepest percentile 10,000 responses tell, at the
        // end, going right all the way.
        assert_eq!((xs.clone().min(), xs.max()), (Some(latency.left), Some(latency.right)), "{curve:?}");
        let step = |pair: &[(i32, i32)]| pair[1].0 - pair[0].0;
        let width = latency.right - latency.left;
        assert!(curve.windows(2).all(|pair| (0..width / 10).contains(&step(pair))), "{curve:?}");
        // The slowest response (1 s) is a tenth of the chart's height below its top,
        // the fastest (100 µs) at its foot, and the axis reads in seconds up to 1.1.
        let peak = curve.iter().map(|&(_, y)| y).min().expect("points");
        let headroom = latency.height(1.0 - 1.0 / 1.1);
        assert!(((peak - latency.top) as f64 - headroom).abs() < 3.0, "peak at {peak} in {latency:?}");
        assert!((latency.bottom - curve[0].1).abs() < 2, "starts at {:?} in {latency:?}", curve[0]);
        assert!(svg.contains("\nlatency (s)\n"), "the latency axis is not in seconds");
        let top_label = (svg.split("<text").skip(1))
            .filter(|text| attribute(text, "text-anchor") == "end")
            .filter(|text| attribute(text, "y").parse::<i32>().expect("y") <= latency.bottom + 2)
            .map(|text| text.split('\n').nth(1).expect("a label").parse::<f64>().expect("a number"))
            .fold(0.0, f64::max);
        assert!((1.0..=1.1).contains(&top_label), "the latency axis is labelled up to {top_label}");
        // A dot on the curve for each percentile the text lists but 100%.
        let dots: Vec<i32> = (svg.split("<circle").skip(1))
            .filter(|circle| attribute(circle, "fill") == "#0000FF")
            .map(|circle| attribute(circle, "cx").parse().expect("cx"))
            .collect();
        assert_eq!(dots.len(), PERCENTILES.len() - 1, "{dots:?}");
        // In order along the axis, 50% right of 0%, 99.9% left of 99.99%.
        assert!(dots.windows(2).all(|pair| pair[0] < pair[1]), "{dots:?}");
        assert!(dots.iter().all(|&x| latency.left < x && x < latency.right), "{dots:?} in {latency:?}");
    }

    #[test]
    fn each_seconds_rate_is_drawn_at_its_middle() {
        // 4000, 5000, then 1000 in the last half second: 2000/s.
        let svg = drawn(&report_of(100));
        let lines = polylines(&svg);
        let [_, rates] = frames(&lines)[..] else { panic!("two charts") };
        let points = curve(&lines, "#FF0000");
        let y_max = 5000.0 * 1.1;
        let expected =
            [(0.5, 4000.0), (1.5, 5000.0), (2.25, 2000.0)].map(|(x, rate)| (x / 2.5, rate / y_max));
        assert_eq!(points.len(), expected.len(), "{points:?}");
        for (&(x, y), (along, up)) in points.iter().zip(expected) {
            let (x_off, y_off) = (x as f64 - rates.x(along), (rates.bottom - y) as f64 - rates.height(up));
            assert!(x_off.abs() < 2.0 && y_off.abs() < 2.0, "{points:?} in {rates:?}, not at {expected:?}");
        }
    }

    #[test]
    fn the_latency_axis_reads_in_the_unit_of_its_highest_value() {
        let names = [0, 999, 1000, 999_999, 1_000_000].map(|max| Unit::for_micros(max).name);
        assert_eq!(names, ["µs", "µs", "ms", "ms", "s"]);
    }

    #[test]
    fn the_axis_reads_in_percentiles() {
        let labels: Vec<String> =
            [1.0, 2.0, 10.0, 100.0, 1e3, 1e4, 1e6].into_iter().map(percentile_label).collect();
        assert_eq!(labels, ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.9999%"]);
    }

    #[test]
    fn a_plot_is_an_svg_with_both_charts_even_when_empty() {
        // The axis goes as deep as the responses tell: 99% for none, 99.99% for 10,000.
        for (count, deepest, deeper) in [(0, "99%", "99.9%"), (10_000, "99.99%", "99.999%")] {
            let svg = drawn(&report_of(count));
            assert!(svg.starts_with("<svg"), "{svg}");
            for text in ["latency by percentile", "responses per second", &format!("\n{deepest}\n")] {
                assert!(svg.contains(text), "no {text:?} in the SVG");
            }
            assert!(!svg.contains(&format!("\n{deeper}\n")), "{deeper} drawn for {count} responses");
        }
    }
}
