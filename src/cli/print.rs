//! What the workers report, as the lines `percore serve` prints on stderr.

use std::fmt::Arguments;
use std::io::Write;

use crate::http::Counts;
use crate::worker::{Event, Stopped};

/// Writes one line to stderr in a single `write`: the master and its workers share
/// the descriptor, and `eprintln!` writes a line in pieces that can interleave.
pub fn say(line: Arguments<'_>) {
    let line = format!("{line}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Prints `event` as one line; `counts` says what a worker's protocol counted.
pub(crate) fn event<P>(event: &Event<'_, P>, counts: &impl Fn(&P) -> Option<Counts>) {
    match event {
        Event::Listening(addr) => say(format_args!("listening on {addr}")),
        Event::Started { index, pid, cpu } => say(format_args!("worker {index} pid {pid} cpu {cpu}")),
        Event::Died { index, cpu, exit, restart_in } => {
            say(format_args!("worker {index} cpu {cpu} {exit}; restarting in {} ms", restart_in.as_millis()))
        }
        Event::RestartFailed { index, error, retry_in } => say(format_args!(
            "percore: cannot restart worker {index}: {error}; trying again in {} ms",
            retry_in.as_millis()
        )),
        Event::Stopping(stopped @ (Stopped::GaveUp { .. } | Stopped::Unclean { .. })) => {
            say(format_args!("percore: {stopped}"))
        }
        Event::Stopping(_) => {}
        Event::Failed { index, cpu, error } => {
            say(format_args!("percore: worker {index} (cpu {cpu}): {error}"))
        }
        Event::Stopped { index, pid, cpu, stats, protocol } => {
            let counts = counts(protocol).unwrap_or_default();
            say(format_args!(
                "worker {index} pid {pid} cpu {cpu} stopped: {} connections, {} requests, {} errors",
                stats.accepted,
                counts.requests,
                stats.errors + counts.errors
            ))
        }
    }
}
