//! `percore bench compare`: two or more targets loaded in interleaved rounds, the
//! order rotated from one round to the next so that a machine's drift falls on each
//! alike; each target's server CPU read from /proc over each round when its pid is
//! known; and a verdict on each target against the first (the baseline) from the
//! per-round ratios (see [`stats`]). Lists of connections and of server CPU sets
//! make a grid, each of whose points is such a comparison (see [`plan`]).

mod comparison;
mod netns;
mod output;
mod plan;
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
use comparison::{Compared, Comparison, Measured, Point, Round};
use netns::Netns;
use output::Figure;
use plan::{Plan, Progress};
use process::Server;

pub fn run(args: &CompareArgs) -> Result<(), String> {
    let interrupted = super::on_ctrl_c().map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    let names = names(args);
    let plan = Plan::new(args, names.len());
    if args.report.plot.is_some() && plan.points() > 1 {
        super::usage("--plot draws one point's rounds; a grid's charts are --rate-plot and --p99-plot");
    }
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |t| t.as_secs())
    });
    eprintln!("{}", plan.words(SystemTime::now()));
    let mut comparison = Comparison {
        names: names.into_iter().map(str::to_string).collect(),
        seed,
        cpu_sets: args.server_cpus.len(),
        points: Vec::new(),
        counts: RunCounts::default(),
        stopped: None,
    };
    let mut progress = Progress::new(plan.loads());
    // Removed (dropped) at the end of `run`, once the servers in it are stopped.
    let netns = args.netns.then(Netns::create).transpose()?;
    if let Some(netns) = &netns {
        eprintln!(
            "compare: the servers run in network namespace {}, at {}; the load from {} over a veth pair",
            netns.name(),
            netns.server_addr,
            netns.local_addr
        );
    }
    if let Err(e) = grid(&mut comparison, args, netns.as_ref(), &interrupted, &mut progress) {
        comparison.stopped = Some(e);
    } else if interrupted.load(Ordering::Relaxed) {
        comparison.stopped = Some("interrupted".to_string());
    }
    output::output(&comparison, args)?;
    if let (Some(path), [point]) = (&args.report.plot, &comparison.points[..]) {
        plot::rounds(&comparison, point, path)?;
    }
    for (path, figure) in [(&args.rate_plot, Figure::Rate), (&args.p99_plot, Figure::P99)] {
        if let Some(path) = path {
            plot::grid(&comparison, figure, path)?;
        }
    }
    match &comparison.stopped {
        Some(why) if why != "interrupted" => Err(why.clone()),
        _ => args.report.fail_on.check_counts(&comparison.counts),
    }
}

/// The targets' names, in order (the first is the baseline); a usage error (exit
/// status 2) when they are fewer than two, given twice, or unknown to an option, or
/// cannot be placed as asked (see [`check_placement`]).
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
    check_placement(args, &names);
    check_trust(args);
    names
}

/// A usage error (exit status 2) when the servers are to be moved (several CPU sets,
/// each given once) or put in a namespace (--netns) and a target is not a server
/// compare starts (with {port} and no URL, for --netns).
fn check_placement(args: &CompareArgs, names: &[&str]) {
    if args.netns {
        for name in names {
            let serve = args.serves.iter().find(|(served, _)| served == name);
            let why = match serve {
                None => Some("is not started by --serve"),
                Some((_, command)) if !command.contains("{port}") => {
                    Some("has no {port} in its --serve command")
                }
                Some(_) if args.targets.iter().any(|(given, _)| given == name) => Some("is given a URL"),
                Some(_) => None,
            };
            if let Some(why) = why {
                super::usage(&format!(
                    "--netns: {name} {why}; compare starts every server in the namespace and gives it its URL"
                ));
            }
        }
    }
    let mut sets = HashSet::new();
    if let Some(twice) = args.server_cpus.iter().find(|set| !sets.insert(set.as_str())) {
        super::usage(&format!("--server-cpus {twice} is given twice"));
    }
    if args.server_cpus.len() > 1 {
        if let Some(name) = names.iter().find(|name| !args.serves.iter().any(|(served, _)| served == *name)) {
            super::usage(&format!(
                "--server-cpus is given {} times, but {name} is not started by --serve: \
                 only a server compare starts can be moved from one CPU set to the next",
                args.server_cpus.len()
            ));
        }
    }
}

/// The scheme of the URL of a server compare starts: https when the load is told
/// whom to trust (--cacert, --insecure), for a study of servers over TLS.
fn served_scheme(args: &CompareArgs) -> &'static str {
    if args.load.trusts() {
        "https"
    } else {
        "http"
    }
}

/// A usage error (exit status 2) for an https:// target with no one to trust, found
/// before any server starts (a usage error exits at once, leaving none to stop).
fn check_trust(args: &CompareArgs) {
    if args.load.trusts() {
        return;
    }
    let https = args.targets.iter().find(|(_, url)| Target::parse(url).is_ok_and(|target| target.is_https()));
    if let Some((name, url)) = https {
        super::usage(&format!("{name}={url}: an https:// target needs --cacert FILE or --insecure"));
    }
}

/// Runs the grid: for each server CPU set, its servers started, then each
/// connection count's rounds; stops early on an error or Ctrl-C, keeping the rounds
/// complete.
fn grid(
    comparison: &mut Comparison,
    args: &CompareArgs,
    netns: Option<&Netns>,
    interrupted: &AtomicBool,
    progress: &mut Progress,
) -> Result<(), String> {
    let sets: Vec<Option<&str>> = match &args.server_cpus[..] {
        [] => vec![None],
        sets => sets.iter().map(|set| Some(set.as_str())).collect(),
    };
    for cpus in sets {
        // Stopped (dropped) at the end of their set, before the next set's start.
        let (targets, _servers) = targets(args, &comparison.names, cpus, netns)?;
        for &connections in &args.connections {
            let targets: Vec<Compared> = targets.iter().map(|target| target.with(connections)).collect();
            let mut point =
                Point { connections, cpus: cpus.map(str::to_string), targets, rounds: Vec::new() };
            let first_round = comparison.rounds();
            let done = rounds(
                &mut point,
                &mut comparison.counts,
                args,
                comparison.seed,
                first_round,
                interrupted,
                progress,
            );
            if !point.rounds.is_empty() {
                comparison.points.push(point);
            }
            if !done? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The targets the command line names, in order (the first is the baseline), with
/// the servers started for them on `cpus`, in `netns` if given (kept until the
/// caller drops them).
fn targets(
    args: &CompareArgs,
    names: &[String],
    cpus: Option<&str>,
    netns: Option<&Netns>,
) -> Result<(Vec<Compared>, Vec<Server>), String> {
    let lookup = |list: &[(String, String)], name: &str| {
        list.iter().find(|(given, _)| given == name).map(|(_, value)| value.clone())
    };
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
            let (server, addr) = Server::start(name, &command, cpus, listens, netns)?;
            url.get_or_insert(format!("{}://{addr}/", served_scheme(args)));
            pid.get_or_insert(server.pid());
            servers.push(server);
        }
        let url = url.ok_or_else(|| format!("target {name} has no URL"))?;
        let target = Target::parse(&url).map_err(|e| format!("{name}: {e}"))?;
        let options = super::options(&args.load, args.connections[0], target, None)?;
        targets.push(Compared { name: name.clone(), options, pid, prepare: lookup(&args.prepares, name) });
    }
    Ok((targets, servers))
}

/// Runs a point's rounds, each target once a round in the round's order; `Ok(false)`
/// when Ctrl-C cut it short. `first_round` is how many rounds the comparison ran
/// before, so that the order goes on rotating from point to point.
fn rounds(
    point: &mut Point,
    counts: &mut RunCounts,
    args: &CompareArgs,
    seed: u64,
    first_round: usize,
    interrupted: &AtomicBool,
    progress: &mut Progress,
) -> Result<bool, String> {
    let count = point.targets.len();
    for round in 0..args.rounds as usize {
        let order = rotated(count, seed, first_round + round);
        let mut measured = Vec::with_capacity(count);
        for &index in &order {
            let target = &point.targets[index];
            if let Some(command) = &target.prepare {
                process::prepare(&target.name, command)?;
            }
            if round == 0 && !args.warmup.is_zero() {
                let warmup = BenchOptions { stop: Stop::After(args.warmup), ..target.options.clone() };
                if load(target, &warmup, interrupted)?.is_none() {
                    return Ok(false);
                }
            }
            let Some((done, load_counts)) = load(target, &target.options, interrupted)? else {
                return Ok(false);
            };
            counts.add(&load_counts);
            progress.loaded(point, round, args.rounds, &target.name, &done);
            measured.push(Measured { target: index, ..done });
        }
        point.rounds.push(Round { order, measured });
    }
    Ok(true)
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
