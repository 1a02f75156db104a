//! `percore bench compare`: two or more targets loaded in interleaved rounds, the
//! order rotated from one round to the next so that a machine's drift falls on each
//! alike; each target's server CPU read from /proc over each round when its pid is
//! known; and a verdict on each target against the first (the baseline) from the
//! per-round ratios (see [`stats`]).

mod comparison;
mod output;
mod plot;
mod process;
mod stats;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use super::args::CompareArgs;
use super::report::{LatencySummary, Report, RunCounts, Stop, PERCENTILES};
use super::run::{self, BenchOptions, Outputs};
use super::target::Target;
use comparison::{Compared, Comparison, Measured, Round};
use process::Server;

pub fn run(args: &CompareArgs) -> Result<(), String> {
    let interrupted = super::on_ctrl_c().map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    let (targets, _servers) = targets(args)?;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |t| t.as_secs())
    });
    let mut comparison =
        Comparison { targets, seed, rounds: Vec::new(), counts: RunCounts::default(), stopped: None };
    if let Err(e) = rounds(&mut comparison, args, &interrupted) {
        comparison.stopped = Some(e);
    } else if interrupted.load(Ordering::Relaxed) {
        comparison.stopped = Some("interrupted".to_string());
    }
    // The servers stop (dropped) after the report is out.
    output::output(&comparison, args)?;
    if let Some(path) = &args.report.plot {
        plot::draw(&comparison, path)?;
    }
    match &comparison.stopped {
        Some(why) if why != "interrupted" => Err(why.clone()),
        _ => args.report.fail_on.check_counts(&comparison.counts),
    }
}

/// The targets' names, in order (the first is the baseline); a usage error (exit
/// status 2) when they are fewer than two, given twice, or unknown to an option.
fn names(args: &CompareArgs) -> Vec<&str> {
    let mut names: Vec<&str> = args.targets.iter().map(|(name, _)| name.as_str()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    for name in &names {
        if !seen.insert(name) {
            super::usage(&format!("target {name} is named twice"));
        }
    }
    for (name, _) in &args.serves {
        if seen.insert(name) {
            names.push(name);
        }
    }
    for (what, list) in [("--pid", &args.pids), ("--serve", &args.serves), ("--prepare", &args.prepares)] {
        let mut given = HashSet::new();
        for (name, _) in list.iter() {
            if !seen.contains(name.as_str()) {
                super::usage(&format!("{what} {name}=...: no target is named {name}"));
            }
            if !given.insert(name) {
                super::usage(&format!("{what} {name}=... is given twice"));
            }
        }
    }
    if names.len() < 2 {
        super::usage("a comparison needs two targets or more (NAME=URL, or --serve NAME=COMMAND)");
    }
    names
}

/// The targets the command line names, in order (the first is the baseline), with
/// the servers started for them (kept until the end).
fn targets(args: &CompareArgs) -> Result<(Vec<Compared>, Vec<Server>), String> {
    let names = names(args);
    let lookup = |list: &[(String, String)], name: &str| {
        list.iter().find(|(given, _)| given == name).map(|(_, value)| value.clone())
    };
    let cpus = args
        .server_cpus
        .as_ref()
        .map(|list| list.0.iter().map(|cpu| cpu.to_string()).collect::<Vec<_>>().join(","));
    let (mut targets, mut servers) = (Vec::new(), Vec::new());
    for name in names {
        let mut url = lookup(&args.targets, name);
        let mut pid = match lookup(&args.pids, name) {
            Some(text) => Some(
                text.parse::<u32>()
                    .ok()
                    .filter(|&pid| process::is_alive(pid))
                    .ok_or_else(|| format!("--pid {name}={text}: no such process"))?,
            ),
            None => None,
        };
        let given =
            url.as_deref().map(|url| Target::parse(url).map_err(|e| format!("{name}: {e}"))).transpose()?;
        if let Some(command) = lookup(&args.serves, name) {
            let listens = given.as_ref().map(Target::resolve).transpose()?;
            let (server, addr) = Server::start(name, &command, cpus.as_deref(), listens)?;
            url.get_or_insert(format!("http://{addr}/"));
            pid.get_or_insert(server.pid());
            servers.push(server);
        }
        let url = url.ok_or_else(|| format!("target {name} has no URL"))?;
        let target = Target::parse(&url).map_err(|e| format!("{name}: {e}"))?;
        let options = super::options(&args.load, target, None)?;
        targets.push(Compared {
            name: name.to_string(),
            options,
            pid,
            prepare: lookup(&args.prepares, name),
        });
    }
    Ok((targets, servers))
}

/// Runs the rounds, each target once a round in the round's order; stops early on
/// an error or Ctrl-C, keeping the rounds complete.
fn rounds(comparison: &mut Comparison, args: &CompareArgs, interrupted: &AtomicBool) -> Result<(), String> {
    let count = comparison.targets.len();
    for round in 0..args.rounds as usize {
        let order = rotated(count, comparison.seed, round);
        let mut measured = Vec::with_capacity(count);
        for &index in &order {
            let target = &comparison.targets[index];
            if let Some(command) = &target.prepare {
                process::prepare(&target.name, command)?;
            }
            if round == 0 && !args.warmup.is_zero() {
                let warmup = BenchOptions { stop: Stop::After(args.warmup), ..target.options.clone() };
                load(target, &warmup, interrupted)?;
            }
            let Some((done, counts)) = load(target, &target.options, interrupted)? else { return Ok(()) };
            comparison.counts.add(&counts);
            measured.push(Measured { target: index, ..done });
        }
        comparison.rounds.push(Round { order, measured });
    }
    Ok(())
}

/// One load of `target` as `options` say, and its counts; `None` when Ctrl-C cut it
/// short.
fn load(
    target: &Compared,
    options: &BenchOptions,
    interrupted: &AtomicBool,
) -> Result<Option<(Measured, RunCounts)>, String> {
    let gone = |pid| format!("{}: its server (pid {pid}) is gone", target.name);
    let server_before = target.pid.map(|pid| process::tree_cpu(pid).ok_or_else(|| gone(pid))).transpose()?;
    let (client_before, began) = (process::own_cpu(), Instant::now());
    let report = run::run(options, interrupted, Outputs { log: None, progress: None })
        .map_err(|e| format!("{}: {e}", target.name))?;
    let wall = began.elapsed().as_secs_f64();
    let client_cpu = process::own_cpu() - client_before;
    let server_after = target.pid.map(|pid| process::tree_cpu(pid).ok_or_else(|| gone(pid))).transpose()?;
    if interrupted.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let server_cpu = server_before.zip(server_after).map(|(before, after)| after - before);
    // A tree that lost CPU lost processes: its server died and was reaped meanwhile.
    if let (Some(pid), Some(cpu)) = (target.pid, server_cpu) {
        if cpu < 0.0 {
            return Err(gone(pid));
        }
    }
    Ok(Some((measured(&report, wall, server_cpu, client_cpu), report.counts)))
}

fn measured(report: &Report, wall: f64, server_cpu: Option<f64>, client_cpu: f64) -> Measured {
    let latency = LatencySummary::of(&report.latency);
    let at =
        |p: &str| PERCENTILES.iter().position(|(name, _)| *name == p).map_or(0, |i| latency.percentiles[i]);
    Measured {
        target: 0,
        responses: report.counts.requests,
        errors: report.counts.errors.total() + report.counts.status.failed(),
        seconds: report.duration.as_secs_f64(),
        wall,
        p50_us: at("50"),
        p99_us: at("99"),
        server_cpu,
        client_cpu,
    }
}

/// The order of round `round`: the targets rotated by `seed + round`, so that each
/// comes first, second, ... in turn.
pub fn rotated(count: usize, seed: u64, round: usize) -> Vec<usize> {
    let start = (seed.wrapping_add(round as u64) % count as u64) as usize;
    (0..count).map(|i| (start + i) % count).collect()
}
