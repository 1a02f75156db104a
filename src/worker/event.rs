//! What the workers report as they run ([`Event`]), and how they ended ([`Outcome`]).

use std::io;
use std::time::Duration;

use super::error::WorkerError;
use super::live::WorkerLive;
use super::restart;
use crate::listen::Address;
use crate::reactor::{Counts, Stats};
use crate::sys::Exit;

/// How the workers ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// SIGTERM, SIGINT or SIGQUIT, and every worker finished its connections.
    Gracefully,
    /// A second SIGINT cut the graceful stop short.
    AtOnce,
    /// A binary upgrade: the new master is serving, and this one's workers drained.
    Upgraded,
    /// Worker `index` failed to start 5 times within 10 s, the last time this way;
    /// the master stopped the others. (A worker killed while it served, as the OOM
    /// killer does, is restarted however often it dies.)
    GaveUp {
        /// The worker.
        index: usize,
        /// Its CPU.
        cpu: usize,
        /// How it died the last time.
        last: Exit,
    },
    /// Worker `index` crashed or was killed while stopping.
    Unclean {
        /// The worker.
        index: usize,
        /// How it ended.
        exit: Exit,
    },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Gracefully => f.write_str("stopped gracefully"),
            Outcome::AtOnce => f.write_str("stopped at once"),
            Outcome::Upgraded => f.write_str("upgraded: the new master serves"),
            Outcome::GaveUp { index, cpu, last } => write!(
                f,
                "worker {index} (cpu {cpu}) failed to start {} times within {} s, last it {last}; giving up",
                restart::CRASH_LIMIT,
                restart::CRASH_WINDOW.as_secs()
            ),
            Outcome::Unclean { index, exit } => write!(f, "worker {index} {exit} while stopping"),
        }
    }
}

/// What the master and its workers report as they go. The caller prints them,
/// counts them or ignores them; `percore serve` prints one line for each.
#[derive(Debug)]
pub enum Event<'a> {
    /// The listeners are bound (or were inherited), on this address (`unix:PATH`
    /// for a Unix socket).
    Listening(Address),
    /// Worker `index` of `generation` was started, or restarted, as process `pid`.
    Started {
        /// The worker.
        index: usize,
        /// Its process.
        pid: i32,
        /// Its CPU.
        cpu: usize,
        /// Its generation: 1, then one more at each reload.
        generation: u32,
    },
    /// Worker `index` died unexpectedly; it is restarted after `restart_in`.
    Died {
        /// The worker.
        index: usize,
        /// Its CPU.
        cpu: usize,
        /// How it ended.
        exit: Exit,
        /// The back-off before its restart.
        restart_in: Duration,
    },
    /// Forking worker `index` again failed; it is tried again after `retry_in`.
    RestartFailed {
        /// The worker.
        index: usize,
        /// Why.
        error: io::Error,
        /// When it is tried again.
        retry_in: Duration,
    },
    /// A reload (SIGHUP) loaded the configuration and starts `generation`.
    Reloading {
        /// The new generation.
        generation: u32,
    },
    /// A reload could not load the configuration: the workers go on as they were.
    ReloadFailed(io::Error),
    /// A binary upgrade (SIGUSR2) started the program on disk as process `pid`.
    Upgrading {
        /// The new master.
        pid: i32,
    },
    /// The new master of an upgrade is ready: this one's workers drain, then it exits.
    Upgraded,
    /// A binary upgrade failed: this master and its workers go on.
    UpgradeFailed(io::Error),
    /// SIGUSR1: every worker's live figures.
    Live(&'a [WorkerLive]),
    /// Every `stats_interval`: every worker's live figures and rates.
    Stats(&'a [WorkerLive]),
    /// The master gives up or a worker ended badly while stopping (see [`Outcome`]).
    Stopping(&'a Outcome),
    /// In a worker: it could not run; it exits with status 1.
    Failed {
        /// The worker.
        index: usize,
        /// Its CPU.
        cpu: usize,
        /// Why.
        error: WorkerError,
    },
    /// In a worker: it stopped, with what its loop and its protocol counted.
    Stopped {
        /// The worker.
        index: usize,
        /// Its process.
        pid: u32,
        /// Its CPU.
        cpu: usize,
        /// What the loop counted.
        stats: Stats,
        /// What the protocol counted (see [`Protocol::counts`](crate::reactor::Protocol::counts)).
        counts: Counts,
        /// It was retired by a reload or an upgrade rather than stopped.
        retired: bool,
    },
}
