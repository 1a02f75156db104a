//! Live figures: each worker publishes what its loop and protocol counted into its
//! counters in memory shared with the master, once a second; the master reads them all
//! when asked (SIGUSR1) and at each `--stats` interval.

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::reactor::{Counts, Stats};
use crate::sys::SharedCounters;

/// A worker's figures, as last published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// The worker's process; 0 before it first published.
    pub pid: u32,
    /// Connections since it started, accepted or opened ([`Stats::connections`]).
    pub connections: u64,
    /// Connections open.
    pub open: u64,
    /// Connections dropped because a socket call failed.
    pub failed: u64,
    /// Requests its protocol answered, refusals included.
    pub requests: u64,
    /// Requests its protocol refused.
    pub refused: u64,
}

/// A worker's live figures for a report: which worker, and (at an interval) its
/// requests per second since the last one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkerLive {
    /// The worker.
    pub index: usize,
    /// Its CPU.
    pub cpu: usize,
    /// What it last published.
    pub live: Live,
    /// Requests per second over the interval, for `--stats`.
    pub per_second: Option<f64>,
}

/// Every worker's live figures, in counters shared by the master and its workers: a
/// set per worker index.
#[derive(Debug)]
pub(crate) struct SharedLive {
    counters: SharedCounters,
}

const PID: usize = 0;
const CONNECTIONS: usize = 1;
const OPEN: usize = 2;
const REQUESTS: usize = 3;
const FAILED: usize = 4;
const REFUSED: usize = 5;

impl SharedLive {
    /// Figures for `workers` workers, shared with the processes forked from now on.
    pub(crate) fn new(workers: usize) -> io::Result<SharedLive> {
        Ok(SharedLive { counters: SharedCounters::new(workers)? })
    }

    /// Worker `index` publishes its figures.
    pub(crate) fn publish(&self, index: usize, stats: Stats, counts: Counts) {
        let Some(counters) = self.counters.sets().get(index) else { return };
        let store = |field: usize, value: u64| counters[field].store(value, Ordering::Relaxed);
        store(PID, u64::from(std::process::id()));
        store(CONNECTIONS, stats.connections());
        store(OPEN, stats.open as u64);
        store(REQUESTS, counts.requests);
        store(FAILED, stats.failed);
        store(REFUSED, counts.refused);
    }

    /// Clears worker `index`'s figures, before a new worker takes the index: until
    /// it publishes its own, its figures are none (pid 0), not its predecessor's.
    pub(crate) fn clear(&self, index: usize) {
        let Some(counters) = self.counters.sets().get(index) else { return };
        for counter in counters.iter() {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// Worker `index`'s figures, as last published.
    pub(crate) fn read(&self, index: usize) -> Live {
        let Some(counters) = self.counters.sets().get(index) else { return Live::default() };
        let load = |field: usize| counters[field].load(Ordering::Relaxed);
        Live {
            pid: u32::try_from(load(PID)).unwrap_or(0),
            connections: load(CONNECTIONS),
            open: load(OPEN),
            requests: load(REQUESTS),
            failed: load(FAILED),
            refused: load(REFUSED),
        }
    }
}

/// The master's view of the shared figures: every worker's figures, with its rate since the
/// last `--stats` report, and when the next report is due.
#[derive(Debug)]
pub(crate) struct LiveFigures {
    shared: SharedLive,
    every: Option<Duration>,
    next: Option<Instant>,
    last_at: Instant,
    last_requests: Vec<u64>,
}

impl LiveFigures {
    pub(crate) fn new(shared: SharedLive, every: Option<Duration>) -> LiveFigures {
        let now = Instant::now();
        let workers = shared.counters.sets().len();
        LiveFigures {
            shared,
            every,
            next: every.map(|every| now + every),
            last_at: now,
            last_requests: vec![0; workers],
        }
    }

    pub(crate) fn shared(&self) -> &SharedLive {
        &self.shared
    }

    /// When the next `--stats` report is due.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.next
    }

    /// Every worker's figures at `now` (worker `i` on `cpus[i]`), with its rate since
    /// the last report.
    pub(crate) fn read(&self, cpus: &[usize], now: Instant) -> Vec<WorkerLive> {
        let elapsed = now.saturating_duration_since(self.last_at).as_secs_f64();
        cpus.iter()
            .enumerate()
            .map(|(index, &cpu)| {
                let live = self.shared.read(index);
                let counted =
                    live.requests.saturating_sub(self.last_requests.get(index).copied().unwrap_or(0));
                let per_second = (elapsed > 0.0).then(|| counted as f64 / elapsed);
                WorkerLive { index, cpu, live, per_second }
            })
            .collect()
    }

    /// The `--stats` report, if it is due at `now`: the figures, and the next report set.
    pub(crate) fn due(&mut self, cpus: &[usize], now: Instant) -> Option<Vec<WorkerLive>> {
        if self.next.is_none_or(|at| at > now) {
            return None;
        }
        let lives = self.read(cpus, now);
        self.next = self.every.map(|every| now + every);
        self.last_at = now;
        self.last_requests = lives.iter().map(|worker| worker.live.requests).collect();
        Some(lives)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reactor::Counts;

    #[test]
    fn figures_are_read_back_with_their_rate_and_reported_when_due() {
        let every = Duration::from_secs(2);
        let mut live = LiveFigures::new(SharedLive::new(2).expect("a shared mapping"), Some(every));
        let (start, cpus) = (live.last_at, [5, 6]);
        let stats = Stats { accepted: 2, opened: 1, failed: 1, open: 2 };
        let counts = Counts { requests: 100, refused: 4 };
        live.shared().publish(1, stats, counts);
        let figures =
            Live { pid: std::process::id(), connections: 3, open: 2, failed: 1, requests: 100, refused: 4 };
        let read = live.read(&cpus, start + Duration::from_secs(4));
        assert_eq!(read[1], WorkerLive { index: 1, cpu: 6, live: figures, per_second: Some(25.0) });
        assert_eq!((read[0].live, read[0].per_second), (Live::default(), Some(0.0)));
        assert_eq!(live.read(&cpus, start)[1].per_second, None, "no time, no rate");
        // Due at its time, not a moment before; the next one `every` later, and the
        // rates counted from there.
        assert_eq!(live.due(&cpus, start + every - Duration::from_millis(1)), None);
        let due = live.due(&cpus, start + every).expect("due");
        assert_eq!(due[1].per_second, Some(50.0));
        assert_eq!(live.next(), Some(start + every + every));
        live.shared().publish(1, stats, Counts { requests: 160, ..counts });
        assert_eq!(live.read(&cpus, start + every + Duration::from_secs(3))[1].per_second, Some(20.0));
    }
}
