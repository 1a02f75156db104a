//! A comparison's grid before it runs, said in words with how long it will take,
//! and its progress, a line on standard error after each load.

use std::time::{Duration, SystemTime};

use time::OffsetDateTime;

use super::comparison::{Measured, Point};
use super::output::count;
use crate::bench::args::CompareArgs;

/// What a load costs beyond its duration, in the estimate: its connections opened
/// and closed, the report made, the next one's threads started.
const LOAD_OVERHEAD: Duration = Duration::from_millis(300);
/// What starting a set's servers costs, in the estimate.
const START_OVERHEAD: Duration = Duration::from_secs(1);

/// The grid a comparison runs: its points, and the loads they take.
pub struct Plan {
    connections: Vec<u64>,
    cpu_sets: usize,
    targets: usize,
    rounds: u32,
    /// How long a load runs, when it runs for a time (not `-n`).
    load: Option<Duration>,
    /// A warm-up of each target at each point.
    warmup: Duration,
}

impl Plan {
    pub fn new(args: &CompareArgs, targets: usize) -> Plan {
        Plan {
            connections: args.connections.clone(),
            cpu_sets: args.server_cpus.len().max(1),
            targets,
            rounds: args.rounds,
            load: match args.load.requests {
                Some(_) => None,
                None => Some(args.load.duration.unwrap_or(Duration::from_secs(10))),
            },
            warmup: args.warmup,
        }
    }

    /// Connection counts times server CPU sets.
    pub fn points(&self) -> usize {
        self.connections.len() * self.cpu_sets
    }

    /// Measured loads: points × targets × rounds.
    pub fn loads(&self) -> usize {
        self.points() * self.targets * self.rounds as usize
    }

    /// How long the grid should take (prepare commands aside), when its loads run for
    /// a time.
    pub fn estimate(&self) -> Option<Duration> {
        let load = self.load?;
        let loads = (load + LOAD_OVERHEAD) * self.loads() as u32;
        let warmups = if self.warmup.is_zero() { Duration::ZERO } else { self.warmup + LOAD_OVERHEAD };
        let starts = START_OVERHEAD * self.cpu_sets as u32;
        Some(loads + warmups * (self.points() * self.targets) as u32 + starts)
    }

    /// The plan in words, with when it should end if it started at `now`.
    pub fn words(&self, now: SystemTime) -> String {
        let connections: Vec<String> = self.connections.iter().map(u64::to_string).collect();
        let grid = format!(
            "compare: {} (-c {} on {}), {} targets, {}: {} loads",
            count(self.points(), "point"),
            connections.join(","),
            count(self.cpu_sets, "server CPU set"),
            self.targets,
            count(self.rounds as usize, "round"),
            self.loads(),
        );
        let Some(estimate) = self.estimate() else {
            return format!("{grid} of a set number of requests; how long they take is not known before");
        };
        let end = OffsetDateTime::from(now + estimate);
        format!(
            "{grid} of {}, with {} warm-ups of {}: about {} (until {:02}:{:02} UTC)",
            seconds(self.load.unwrap_or_default()),
            self.points() * self.targets,
            seconds(self.warmup),
            minutes(estimate),
            end.hour(),
            end.minute()
        )
    }
}

/// `2.5s`, `10s`.
fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

/// `40 s` under a minute, else `12 min`, rounded up.
fn minutes(duration: Duration) -> String {
    let secs = duration.as_secs_f64().ceil() as u64;
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min", secs.div_ceil(60))
    }
}

/// The loads done of the plan's.
pub struct Progress {
    done: usize,
    total: usize,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress { done: 0, total }
    }

    /// Says on standard error that `target`'s load of round `round` (0-based) of
    /// `rounds` at `point` measured `measured`.
    pub fn loaded(&mut self, point: &Point, round: usize, rounds: u32, target: &str, measured: &Measured) {
        self.done += 1;
        let cpus = point.cpus.as_deref().map_or(String::new(), |cpus| format!(" CPUs {cpus}"));
        let width = self.total.to_string().len();
        eprintln!(
            "[{:>width$}/{}] c{}{cpus} round {}/{rounds} {target}: {:.0} responses/s, p99 {:.2} ms, {} errors",
            self.done,
            self.total,
            point.connections,
            round + 1,
            measured.per_second(),
            measured.p99_us as f64 / 1000.0,
            measured.errors,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_every_load_and_warmup() {
        let plan = Plan {
            connections: vec![30, 100, 1000, 5000],
            cpu_sets: 2,
            targets: 3,
            rounds: 5,
            load: Some(Duration::from_secs(10)),
            warmup: Duration::from_secs(1),
        };
        // 120 × 10.3 s + 24 × 1.3 s + 2 × 1 s.
        assert_eq!(plan.estimate(), Some(Duration::from_millis(1_236_000 + 31_200 + 2_000)));
        let words = plan.words(SystemTime::UNIX_EPOCH);
        assert!(words.starts_with("compare: 8 points (-c 30,100,1000,5000 on 2 server CPU sets), 3 targets, 5 rounds: 120 loads of 10s, with 24 warm-ups of 1s: about 22 min (until 00:21 UTC)"), "{words}");
        let counted = Plan { load: None, ..plan };
        assert_eq!(counted.estimate(), None);
        assert!(counted.words(SystemTime::UNIX_EPOCH).ends_with("how long they take is not known before"));
    }
}
