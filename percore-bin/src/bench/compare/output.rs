//! What a comparison says: each round's figures, each target's medians, and a
//! verdict on each figure of each target against the baseline, as text, JSON
//! (`percore-compare/1`) and a Markdown table (the plot of the rounds is `plot`'s).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::comparison::{Comparison, Measured};
use super::stats::{self, Direction};
use crate::bench::args::CompareArgs;

/// The JSON report's format tag; its fields are documented in docs/bench.md.
const FORMAT: &str = "percore-compare/1";

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

/// The figure a verdict leads with: server CPU per response where every round
/// read some, else responses per second.
pub fn lead_figure(comparison: &Comparison) -> Figure {
    let mut all = comparison.rounds.iter().flat_map(|round| &round.measured);
    if comparison.rounds.is_empty() || all.any(|m| m.server_us().is_none_or(|us| us <= 0.0)) {
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
    fn words(&self, names: &[&str]) -> String {
        let c = &self.comparison;
        let (name, base, figure) = (names[self.target], names[0], self.figure.words());
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

/// The judgements of every target after the first, on the lead figure and the latencies.
pub fn judgements(comparison: &Comparison) -> Vec<Judgement> {
    let figures = [lead_figure(comparison), Figure::P50, Figure::P99];
    let mut judgements = Vec::new();
    for target in 1..comparison.targets.len() {
        for figure in figures {
            let ratios: Vec<f64> = comparison
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
    let judgements = judgements(comparison);
    let text = if args.report.json {
        let json =
            serde_json::to_string_pretty(&to_json(comparison, &judgements)).map_err(|e| e.to_string())?;
        json + "\n"
    } else {
        text(comparison, &judgements)
    };
    super::super::print(&text)?;
    if let Some(path) = &args.markdown {
        std::fs::write(path, markdown(comparison, &judgements))
            .map_err(|e| format!("cannot write --markdown {}: {e}", path.display()))?;
    }
    Ok(())
}

fn names(comparison: &Comparison) -> Vec<&str> {
    comparison.targets.iter().map(|t| t.name.as_str()).collect()
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

/// The median of a target's figure over the rounds.
fn median_of(comparison: &Comparison, target: usize, figure: Figure) -> Option<f64> {
    let mut values: Vec<f64> =
        comparison.rounds.iter().filter_map(|round| figure.of(round.of(target)?)).collect();
    values.sort_by(f64::total_cmp);
    (!values.is_empty()).then(|| stats::median(&values))
}

/// A target's medians as the reports print them: responses/s, p50, p99, server
/// CPU per response.
fn medians(comparison: &Comparison, target: usize) -> [String; 4] {
    let latency = |figure| median_of(comparison, target, figure).map_or("–".into(), |us| millis(us as u64));
    [
        format!("{:.0}", median_of(comparison, target, Figure::Rate).unwrap_or(0.0)),
        latency(Figure::P50),
        latency(Figure::P99),
        micros(median_of(comparison, target, Figure::ServerCpu)),
    ]
}

fn text(comparison: &Comparison, judgements: &[Judgement]) -> String {
    let names = names(comparison);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} targets, {} rounds, the order rotated from seed {}; the baseline is {}",
        names.len(),
        comparison.rounds.len(),
        comparison.seed,
        names[0]
    );
    for (i, round) in comparison.rounds.iter().enumerate() {
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
    if let Some(why) = &comparison.stopped {
        let _ = writeln!(out, "stopped after {} rounds: {why}", comparison.rounds.len());
    }
    let _ = writeln!(out, "\nmedians over the rounds:");
    for (target, name) in names.iter().enumerate() {
        let [rate, p50, p99, cpu] = medians(comparison, target);
        let _ = writeln!(
            out,
            "  {name:<12} {rate:>12} responses/s  p50 {p50:>9}  p99 {p99:>9}  server {cpu:>10}/response"
        );
    }
    let _ = writeln!(out, "\nagainst {}:", names[0]);
    for judgement in judgements {
        let _ = writeln!(out, "  {}", judgement.words(&names));
    }
    out
}

fn markdown(comparison: &Comparison, judgements: &[Judgement]) -> String {
    let names = names(comparison);
    let lead = lead_figure(comparison);
    let command: Vec<String> = std::env::args().map(|arg| shell_quoted(&arg)).collect();
    let mut out = format!("```sh\n{}\n```\n\n", command.join(" "));
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
        let [rate, p50, p99, cpu] = medians(comparison, target);
        let _ = writeln!(out, "| {name} | {rate} | {p50} | {p99} | {cpu} | {versus} |");
    }
    let _ = writeln!(
        out,
        "\n{} rounds, medians; a ratio is the median of per-round ratios.",
        comparison.rounds.len()
    );
    for judgement in judgements {
        let _ = writeln!(out, "- {}", judgement.words(&names));
    }
    out
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

fn to_json(comparison: &Comparison, judgements: &[Judgement]) -> Value {
    let names = names(comparison);
    let targets: Vec<Value> = comparison
        .targets
        .iter()
        .map(|t| json!({ "name": t.name, "url": t.options.target.as_str(), "pid": t.pid }))
        .collect();
    let rounds: Vec<Value> = comparison
        .rounds
        .iter()
        .enumerate()
        .map(|(i, round)| {
            json!({
                "round": i + 1,
                "order": round.order.iter().map(|&t| names[t]).collect::<Vec<_>>(),
                "results": round.measured.iter().map(|m| measured_json(m, names[m.target])).collect::<Vec<_>>(),
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
                "words": v.words(&names),
            })
        })
        .collect();
    json!({
        "format": FORMAT,
        "seed": comparison.seed,
        "stopped": comparison.stopped,
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
