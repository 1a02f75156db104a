//! What the workers report, as the lines `percore serve` prints on stderr.

use std::fmt::{Arguments, Write as _};
use std::io::Write;

use crate::worker::{Event, Outcome, Pinning, WorkerLive};

/// Writes one line to stderr in a single `write`: the master and its workers share
/// the descriptor, and `eprintln!` writes a line in pieces that can interleave.
pub fn say(line: Arguments<'_>) {
    let line = format!("{line}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Where a worker runs, as its lines say it: `cpu 3`, or `unpinned` (anywhere the
/// master's CPU mask allows) with `--no-pin`.
struct Place(usize, Pinning);

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Pinning::Pinned => write!(f, "cpu {}", self.0),
            Pinning::Unpinned => f.write_str("unpinned"),
        }
    }
}

/// Prints `event` as one line (SIGUSR1's live figures: one per worker), each
/// worker's place as `pinning` says.
pub(crate) fn event(event: &Event<'_>, pinning: Pinning) {
    let place = |cpu: usize| Place(cpu, pinning);
    match event {
        Event::Listening(addr) => say(format_args!("listening on {addr}")),
        Event::Started { index, pid, cpu, .. } => {
            say(format_args!("worker {index} pid {pid} {}", place(*cpu)))
        }
        Event::Died { index, cpu, exit, restart_in } => say(format_args!(
            "worker {index} {} {exit}; restarting in {} ms",
            place(*cpu),
            restart_in.as_millis()
        )),
        Event::RestartFailed { index, error, retry_in } => say(format_args!(
            "percore: cannot restart worker {index}: {error}; trying again in {} ms",
            retry_in.as_millis()
        )),
        Event::Reloading { generation } => say(format_args!("percore: reloading: generation {generation}")),
        Event::ReloadFailed(error) => say(format_args!("percore: reload failed, the workers go on: {error}")),
        Event::Upgrading { pid } => say(format_args!("percore: upgrading: new master pid {pid}")),
        Event::Upgraded => say(format_args!("percore: upgraded: the new master is ready; workers retiring")),
        Event::UpgradeFailed(error) => {
            say(format_args!("percore: upgrade failed, this master goes on: {error}"))
        }
        Event::Live(workers) => {
            for worker in *workers {
                let live = worker.live;
                if live.pid == 0 {
                    say(format_args!("live: worker {} {}: starting", worker.index, place(worker.cpu)));
                    continue;
                }
                say(format_args!(
                    "live: worker {} pid {} {}: {} connections, {} open, {} failed, {} requests, {} refused",
                    worker.index,
                    live.pid,
                    place(worker.cpu),
                    live.connections,
                    live.open,
                    live.failed,
                    live.requests,
                    live.refused
                ));
            }
        }
        Event::Stats(workers) => say(format_args!("stats: {}", stats_line(workers, pinning))),
        Event::Stopping(stopped @ (Outcome::GaveUp { .. } | Outcome::Unclean { .. })) => {
            say(format_args!("percore: {stopped}"))
        }
        Event::Stopping(_) => {}
        Event::Failed { index, cpu, error } => {
            say(format_args!("percore: worker {index} ({}): {error}", place(*cpu)))
        }
        Event::Stopped { index, pid, cpu, stats, counts, retired } => say(format_args!(
            "worker {index} pid {pid} {} {}: {} connections, {} failed, {} requests, {} refused",
            place(*cpu),
            if *retired { "retired" } else { "stopped" },
            stats.connections(),
            stats.failed,
            counts.requests,
            counts.refused
        )),
    }
}

/// `worker 0 cpu 0: 71234 req/s, 100 open | worker 1 cpu 1: ...`
fn stats_line(workers: &[WorkerLive], pinning: Pinning) -> String {
    let mut line = String::new();
    for worker in workers {
        let separator = if line.is_empty() { "" } else { " | " };
        let rate = worker.per_second.unwrap_or(0.0);
        let _ = write!(
            line,
            "{separator}worker {} {}: {rate:.0} req/s, {} open",
            worker.index,
            Place(worker.cpu, pinning),
            worker.live.open
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::Live;

    #[test]
    fn the_stats_line_gives_each_workers_rate_and_open_connections() {
        let live = |open| Live { pid: 7, connections: 9, open, failed: 0, requests: 100, refused: 0 };
        let workers = [
            WorkerLive { index: 0, cpu: 2, live: live(100), per_second: Some(71_234.4) },
            WorkerLive { index: 1, cpu: 3, live: live(0), per_second: None },
        ];
        assert_eq!(
            stats_line(&workers, Pinning::Pinned),
            "worker 0 cpu 2: 71234 req/s, 100 open | worker 1 cpu 3: 0 req/s, 0 open"
        );
        // Unpinned, a worker has no CPU of its own to name.
        assert_eq!(
            stats_line(&workers, Pinning::Unpinned),
            "worker 0 unpinned: 71234 req/s, 100 open | worker 1 unpinned: 0 req/s, 0 open"
        );
    }
}
