//! A comparison's data: its targets, the rounds as they ran, and what each load
//! measured.

use super::super::report::RunCounts;
use super::super::run::BenchOptions;
use crate::units::as_usize;

/// One target: its name, where its load goes, whose CPU is read, what runs before
/// each of its rounds.
#[derive(Clone, Debug)]
pub struct Compared {
    pub name: String,
    pub options: BenchOptions,
    pub pid: Option<u32>,
    pub(super) prepare: Option<String>,
}

impl Compared {
    /// The same target loaded with `connections`.
    pub fn with(&self, connections: u64) -> Compared {
        let mut target = self.clone();
        target.options.connections = as_usize(connections);
        target
    }
}

/// What one load of one target measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The target's index in the comparison.
    pub target: usize,
    pub responses: u64,
    pub errors: u64,
    /// The load's time, as its report gives it.
    pub seconds: f64,
    /// The time the load took from start to end, threads started and stopped: the
    /// window the CPU figures are read over.
    pub wall: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Seconds of CPU the target's server used over the load, when its pid is known.
    pub server_cpu: Option<f64>,
    /// Seconds of CPU this process (the load generator) used over the load.
    pub client_cpu: f64,
}

impl Measured {
    pub fn per_second(&self) -> f64 {
        self.responses as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }

    /// Microseconds of server CPU per response.
    pub fn server_us(&self) -> Option<f64> {
        self.server_cpu.filter(|_| self.responses > 0).map(|cpu| cpu * 1e6 / self.responses as f64)
    }

    /// Microseconds of the load generator's CPU per response.
    pub fn client_us(&self) -> Option<f64> {
        (self.responses > 0).then(|| self.client_cpu * 1e6 / self.responses as f64)
    }

    /// The server's CPU over the load's time: 1.0 is one CPU kept busy throughout.
    pub fn server_share(&self) -> Option<f64> {
        self.server_cpu.map(|cpu| cpu / self.wall.max(f64::MIN_POSITIVE))
    }
}

/// A round: the order its targets were loaded in, and what each measured (in that
/// order).
#[derive(Clone, Debug)]
pub struct Round {
    pub order: Vec<usize>,
    pub measured: Vec<Measured>,
}

impl Round {
    pub fn of(&self, target: usize) -> Option<&Measured> {
        self.measured.iter().find(|m| m.target == target)
    }
}

/// One point of the grid: the targets loaded with `connections`, their servers
/// (those `--serve` starts) on CPUs `cpus`, and its rounds as they ran.
#[derive(Debug)]
pub struct Point {
    pub connections: u64,
    /// The server CPU set as written, when `--server-cpus` gave one.
    pub cpus: Option<String>,
    /// The targets at this point, in order (the first is the baseline).
    pub targets: Vec<Compared>,
    pub rounds: Vec<Round>,
}

/// A comparison as it ran: its points, each with its rounds complete, and why it
/// stopped early, if it did.
#[derive(Debug)]
pub struct Comparison {
    /// The targets' names, in order (the first is the baseline).
    pub names: Vec<String>,
    pub seed: u64,
    /// How many server CPU sets the grid has: with more than one, the report names
    /// each line by its target and its set.
    pub cpu_sets: usize,
    pub points: Vec<Point>,
    /// Every load's counts (warm-ups aside), added: what --fail-on judges.
    pub counts: RunCounts,
    pub stopped: Option<String>,
}

impl Comparison {
    /// How many rounds were completed, over every point.
    pub fn rounds(&self) -> usize {
        self.points.iter().map(|point| point.rounds.len()).sum()
    }

    /// The name of target `target` at `point` as the grid's charts and tables give
    /// it: with its server CPU set when there are several.
    pub fn series_name(&self, point: &Point, target: usize) -> String {
        match (&point.cpus, self.cpu_sets > 1) {
            (Some(cpus), true) => format!("{} (CPUs {cpus})", self.names[target]),
            _ => self.names[target].clone(),
        }
    }
}
