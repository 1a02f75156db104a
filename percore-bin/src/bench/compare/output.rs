//! What a comparison says, point by point: each round's figures, each target's
//! medians, and a verdict on each figure of each target against the baseline, as
//! text, JSON (`percore-compare/2`) and Markdown tables, with a grid's medians
//! against the connections (the charts are `plot`'s).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::comparison::{Comparison, Measured, Point};
use super::stats::{self, Direction};
use crate::bench::args::CompareArgs;

/// The JSON report's format tag; its fields are documented in docs/bench.md.
const FORMAT: &str = "percore-compare/2";

/// A figure measured each round, compared as a ratio to the baseline's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    ServerCpu,
    Rate,
    P50,
    P99,
}

impl Figure {
    /// Its name in the JSON report.
    fn key(self) -> &'static str {
        match self {
            Figure::ServerCpu => "server_cpu_per_response",
            Figure::Rate => "responses_per_sec",
            Figure::P50 => "p50_latency",
            Figure::P99 => "p99_latency",
        }
    }

    /// Its name in words.
    pub fn words(self) -> &'static str {
        match self {
            Figure::ServerCpu => "CPU per response",
            Figure::Rate => "responses per second",
            Figure::P50 => "median latency",
            Figure::P99 => "99th percentile latency",
        }
    }

    pub fn of(self, m: &Measured) -> Option<f64> {
        match self {
            Figure::ServerCpu => m.server_us(),
            Figure::Rate => Some(m.per_second()),
            Figure::P50 => Some(m.p50_us as f64),
            Figure::P99 => Some(m.p99_us as f64),
        }
    }
}

/// The figure a point's verdicts lead with: server CPU per response where every
/// round read some, else responses per second.
pub fn lead_figure(point: &Point) -> Figure {
    let mut all = point.rounds.iter().flat_map(|round| &round.measured);
    if point.rounds.is_empty() || all.any(|m| m.server_us().is_none_or(|us| us <= 0.0)) {
        Figure::Rate
    } else {
        Figure::ServerCpu
    }
}

/// A judgement (a "verdict" in the report): target `target` against the baseline on
/// `figure`.
pub struct Judgement {
    pub target: usize,
    pub figure: Figure,
    pub comparison: stats::Comparison,
}

impl Judgement {
    /// In plain words, as the report prints it.
    fn words(&self, names: &[String]) -> String {
        let c = &self.comparison;
        let (name, base, figure) = (&names[self.target], &names[0], self.figure.words());
        let ci = format!("{:.0}% CI {:.2}–{:.2}", c.confidence * 100.0, c.interval.0, c.interval.1);
        let (side, count) = match c.direction {
            Direction::Lower => ("lower", c.below),
            Direction::Higher => ("higher", c.above),
            Direction::Same => {
                return format!(
                "{name}: no difference in {figure} from {base} beyond the noise of {} rounds ({:.2}×, {ci})",
                c.rounds, c.median
            )
            }
        };
        format!("{name}: {:.2}× {base}'s {figure} ({ci}; {side} in {count} of {} rounds)", c.median, c.rounds)
    }
}

/// The judgements at `point` of every target after the first, on the lead figure
/// and the latencies.
fn judgements(point: &Point) -> Vec<Judgement> {
    let figures = [lead_figure(point), Figure::P50, Figure::P99];
    let mut judgements = Vec::new();
    for target in 1..point.targets.len() {
        for figure in figures {
            let ratios: Vec<f64> = point
                .rounds
                .iter()
                .filter_map(|round| Some(figure.of(round.of(target)?)? / figure.of(round.of(0)?)?))
                .collect();
            if let Some(comparison) = stats::compare(&ratios) {
                judgements.push(Judgement { target, figure, comparison });
            }
        }
    }
    judgements
}

/// Prints the report (text, or JSON with --json) and writes --markdown.
pub fn output(comparison: &Comparison, args: &CompareArgs) -> Result<(), String> {
    let judged: Vec<Vec<Judgement>> = comparison.points.iter().map(judgements).collect();
    let text = if args.report.json {
        let json = serde_json::to_string_pretty(&to_json(comparison, &judged)).map_err(|e| e.to_string())?;
        json + "\n"
    } else {
        text(comparison, &judged)
    };
    super::super::print(&text)?;
    if let Some(path) = &args.markdown {
        std::fs::write(path, markdown(comparison, &judged))
            .map_err(|e| format!("cannot write --markdown {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `1 round`, `2 rounds`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn micros(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |us| format!("{us:.2} µs"))
}

fn millis(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn share(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |share| format!("{:.0}%", share * 100.0))
}

/// The median of a target's figure over a point's rounds.
fn median_of(point: &Point, target: usize, figure: Figure) -> Option<f64> {
    let mut values: Vec<f64> = point.rounds.iter().filter_map(|round| figure.of(round.of(target)?)).collect();
    values.sort_by(f64::total_cmp);
    (!values.is_empty()).then(|| stats::median(&values))
}

/// A target's medians at a point as the reports print them: responses/s, p50, p99,
/// server CPU per response.
fn medians(point: &Point, target: usize) -> [String; 4] {
    let latency = |figure| median_of(point, target, figure).map_or("–".into(), |us| millis(us as u64));
    [
        format!("{:.0}", median_of(point, target, Figure::Rate).unwrap_or(0.0)),
        latency(Figure::P50),
        latency(Figure::P99),
        micros(median_of(point, target, Figure::ServerCpu)),
    ]
}

/// The point in words, for a heading: `c100` and its server CPU set, if one was given.
fn point_words(point: &Point) -> String {
    match &point.cpus {
        Some(cpus) => format!("-c {}, servers on CPUs {cpus}", point.connections),
        None => format!("-c {}", point.connections),
    }
}

fn text(comparison: &Comparison, judged: &[Vec<Judgement>]) -> String {
    let names = &comparison.names;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} targets, {}, {}, the order rotated from seed {}; the baseline is {}",
        names.len(),
        count(comparison.points.len(), "point"),
        count(comparison.rounds(), "round"),
        comparison.seed,
        names[0]
    );
    for (point, judgements) in comparison.points.iter().zip(judged) {
        let _ = writeln!(out, "\n{}:", point_words(point));
        for (i, round) in point.rounds.iter().enumerate() {
            for m in &round.measured {
                let _ = writeln!(
                    out,
                    "round {:<3} {:<12} {:>12.0} responses/s  p50 {:>9}  p99 {:>9}  errors {:<5} server {:>10}  client {:>10}  server busy {:>4}",
                    i + 1,
                    names[m.target],
                    m.per_second(),
                    millis(m.p50_us),
                    millis(m.p99_us),
                    m.errors,
                    micros(m.server_us()),
                    micros(m.client_us()),
                    share(m.server_share()),
                );
            }
        }
        let _ = writeln!(out, "medians over the rounds:");
        for (target, name) in names.iter().enumerate() {
            let [rate, p50, p99, cpu] = medians(point, target);
            let _ = writeln!(
                out,
                "  {name:<12} {rate:>12} responses/s  p50 {p50:>9}  p99 {p99:>9}  server {cpu:>10}/response"
            );
        }
        let _ = writeln!(out, "against {}:", names[0]);
        for judgement in judgements {
            let _ = writeln!(out, "  {}", judgement.words(names));
        }
    }
    if let Some(why) = &comparison.stopped {
        let _ = writeln!(out, "\nstopped after {}: {why}", count(comparison.rounds(), "round"));
    }
    out
}

fn markdown(comparison: &Comparison, judged: &[Vec<Judgement>]) -> String {
    let names = &comparison.names;
    let command: Vec<String> = std::env::args().map(|arg| shell_quoted(&arg)).collect();
    let mut out = format!("```sh\n{}\n```\n", command.join(" "));
    if comparison.points.len() > 1 {
        for figure in [Figure::Rate, Figure::P99] {
            out += &grid_table(comparison, figure);
        }
    }
    for (point, judgements) in comparison.points.iter().zip(judged) {
        let lead = lead_figure(point);
        let _ = writeln!(out, "\n### {}\n", point_words(point));
        let _ = writeln!(
            out,
            "| target | responses/s | p50 | p99 | server CPU/response | {} vs {} |",
            lead.words(),
            names[0]
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for (target, name) in names.iter().enumerate() {
            let judgement = judgements.iter().find(|v| v.target == target && v.figure == lead);
            let versus = judgement.map_or("–".to_string(), |v| {
                let c = &v.comparison;
                format!(
                    "{:.2}× ({:.0}% CI {:.2}–{:.2})",
                    c.median,
                    c.confidence * 100.0,
                    c.interval.0,
                    c.interval.1
                )
            });
            let [rate, p50, p99, cpu] = medians(point, target);
            let _ = writeln!(out, "| {name} | {rate} | {p50} | {p99} | {cpu} | {versus} |");
        }
        let rounds = count(point.rounds.len(), "round");
        let _ = writeln!(out, "\n{rounds}, medians; a ratio is the median of per-round ratios.");
        for judgement in judgements {
            let _ = writeln!(out, "- {}", judgement.words(names));
        }
    }
    if let Some(why) = &comparison.stopped {
        let _ = writeln!(out, "\nStopped after {}: {why}.", count(comparison.rounds(), "round"));
    }
    out
}

/// A grid's medians of `figure` as a Markdown table: a row per connection count, a
/// column per target and server CPU set, as the charts draw them.
fn grid_table(comparison: &Comparison, figure: Figure) -> String {
    let (connections, series) = series(comparison, figure);
    let heads: Vec<&str> = series.iter().map(|line| line.name.as_str()).collect();
    let mut out = format!("\n### {} (median of each point's rounds)\n\n", figure.words());
    let _ = writeln!(out, "| connections | {} |", heads.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(heads.len()));
    for (row, connections) in connections.iter().enumerate() {
        let cells: Vec<String> = series
            .iter()
            .map(|line| {
                line.medians[row].map_or("–".to_string(), |value| match figure {
                    Figure::Rate => format!("{value:.0}"),
                    _ => millis(value as u64),
                })
            })
            .collect();
        let _ = writeln!(out, "| {connections} | {} |", cells.join(" | "));
    }
    out
}

/// A line of a grid: a target on a server CPU set, named as the charts and tables
/// name it, with its median of a figure at each of the grid's connection counts.
pub struct Series {
    pub name: String,
    pub medians: Vec<Option<f64>>,
}

/// A grid's connection counts, each once in the order they ran, and its lines of
/// `figure`: each target on each server CPU set.
pub fn series(comparison: &Comparison, figure: Figure) -> (Vec<u64>, Vec<Series>) {
    let mut connections: Vec<u64> = Vec::new();
    for point in &comparison.points {
        if !connections.contains(&point.connections) {
            connections.push(point.connections);
        }
    }
    let mut sets: Vec<Option<&str>> = comparison.points.iter().map(|point| point.cpus.as_deref()).collect();
    sets.dedup();
    let mut series = Vec::new();
    for set in sets {
        let points: Vec<&Point> =
            comparison.points.iter().filter(|point| point.cpus.as_deref() == set).collect();
        for target in 0..comparison.names.len() {
            let at = |c: u64| points.iter().find(|point| point.connections == c);
            let medians = connections
                .iter()
                .map(|&c| at(c).and_then(|point| median_of(point, target, figure)))
                .collect();
            series.push(Series { name: comparison.series_name(points[0], target), medians });
        }
    }
    (connections, series)
}

/// `arg` as a POSIX shell reads it back: bare when it is plain, else in quotes.
fn shell_quoted(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

fn to_json(comparison: &Comparison, judged: &[Vec<Judgement>]) -> Value {
    let points: Vec<Value> = comparison
        .points
        .iter()
        .zip(judged)
        .map(|(point, judgements)| point_json(comparison, point, judgements))
        .collect();
    json!({
        "format": FORMAT,
        "seed": comparison.seed,
        "stopped": comparison.stopped,
        "targets": comparison.names,
        "points": points,
    })
}

fn point_json(comparison: &Comparison, point: &Point, judgements: &[Judgement]) -> Value {
    let names = &comparison.names;
    let targets: Vec<Value> = point
        .targets
        .iter()
        .map(|t| json!({ "name": t.name, "url": t.options.target.as_str(), "pid": t.pid }))
        .collect();
    let rounds: Vec<Value> = point
        .rounds
        .iter()
        .enumerate()
        .map(|(i, round)| {
            json!({
                "round": i + 1,
                "order": round.order.iter().map(|&t| &names[t]).collect::<Vec<_>>(),
                "results": round.measured.iter().map(|m| measured_json(m, &names[m.target])).collect::<Vec<_>>(),
            })
        })
        .collect();
    let judgements: Vec<Value> = judgements
        .iter()
        .map(|v| {
            let c = &v.comparison;
            json!({
                "target": names[v.target],
                "baseline": names[0],
                "figure": v.figure.key(),
                "median": c.median,
                "range": [c.range.0, c.range.1],
                "interval": [c.interval.0, c.interval.1],
                "confidence": c.confidence,
                "rounds_lower": c.below,
                "rounds_higher": c.above,
                "rounds": c.rounds,
                "direction": match c.direction {
                    Direction::Lower => "lower",
                    Direction::Higher => "higher",
                    Direction::Same => "same",
                },
                "words": v.words(names),
            })
        })
        .collect();
    json!({
        "connections": point.connections,
        "server_cpus": point.cpus,
        "targets": targets,
        "rounds": rounds,
        "verdicts": judgements,
    })
}

fn measured_json(m: &Measured, name: &str) -> Value {
    json!({
        "target": name,
        "responses": m.responses,
        "errors": m.errors,
        "duration_s": m.seconds,
        "responses_per_sec": m.per_second(),
        "p50_us": m.p50_us,
        "p99_us": m.p99_us,
        "server_cpu_s": m.server_cpu,
        "server_cpu_us_per_response": m.server_us(),
        "server_cpu_share": m.server_share(),
        "client_cpu_us_per_response": m.client_us(),
    })
}
