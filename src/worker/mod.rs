//! Processes, not threads: a master binds one `SO_REUSEPORT` listener per worker,
//! forks one worker process per CPU, each pinned to its CPU and running one loop, and
//! supervises them: restarts, reloads, binary upgrades, graceful stops. Any
//! [`Service`] can be served this way.
//!
//! The library prints nothing: what happens is reported to the caller's closure as
//! an [`Event`], in the master or (for its own end) in a worker, and [`run`] returns
//! how the workers stopped or a typed [`Error`].
//!
//! Signals, as nginx's: TERM, INT and QUIT stop gracefully (a second INT stops at
//! once); HUP reloads (the service's configuration is loaded again and a new
//! generation of workers takes over the same listeners while the old one drains);
//! USR2 upgrades the binary (the program on disk is executed with the listeners,
//! and this master retires once the new one is ready); USR1 reports every worker's
//! live figures.

mod child;
mod cpus;
mod error;
mod listeners;
mod live;
mod master;
mod restart;
mod service;
mod upgrade;

pub use cpus::{allowed_cpus, parse_cpu_list, plan};
pub use error::{Error, WorkerError};
pub use live::{Live, WorkerLive};
pub use service::Service;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::listen::{ListenOptions, Opening};
use crate::reactor::{Config, Counts, Stats};
use crate::sys;
pub use crate::sys::Exit;

/// How to run the workers. [`Options::new`] gives what `percore serve` does by
/// default, for an address and a protocol's first speaker; change what differs with
/// struct update syntax:
///
/// ```no_run
/// use percore::listen::Opening;
/// use percore::reactor::{Flow, Io, Protocol, Verdict};
/// use percore::worker::{self, Options, PortSharing};
///
/// /// Greets each connection, and closes it.
/// struct Greeter;
/// impl Protocol for Greeter {
///     type Conn = ();
///     fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
///         io.write(b"220 hello\r\n");
///         Flow::Close
///     }
///     fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
///         Verdict::close(input.len())
///     }
/// }
///
/// // The server speaks first; the port is shared with the sockets already on it.
/// let addr = ([127, 0, 0, 1], 2525).into();
/// let options = Options { port_sharing: PortSharing::Join, ..Options::new(addr, Opening::ServerSpeaksFirst) };
/// worker::run(&options, || Ok(Greeter), |_event| {})?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Address all workers listen on.
    pub addr: SocketAddr,
    /// The CPU of each worker, one entry per worker (see [`plan`]).
    pub cpus: Vec<usize>,
    /// Whether each worker is pinned to its CPU.
    pub pinning: Pinning,
    /// The workers' scheduling policy.
    pub scheduling: Scheduling,
    /// Each listener's options; its backlog is capped at `net.core.somaxconn`.
    pub listen: ListenOptions,
    /// Whether the address may already be held by other sockets.
    pub port_sharing: PortSharing,
    /// How the kernel picks a worker for a new connection.
    pub steering: Steering,
    /// How long a graceful stop (or a retiring generation) waits for open
    /// connections.
    pub shutdown_timeout: Duration,
    /// How long a draining worker keeps an idle keep-alive connection, so that a
    /// client sending on it right then gets an answer, not a close.
    pub drain_grace: Duration,
    /// How often to report every worker's live figures ([`Event::Stats`]); `None`:
    /// never (SIGUSR1 still asks once).
    pub stats_interval: Option<Duration>,
    /// Limits of each worker's loop.
    pub reactor: Config,
}

impl Options {
    /// Workers listening on `addr` for a protocol whose first speaker is `opening`,
    /// with `percore serve`'s defaults: one worker on each CPU this process may run
    /// on ([`allowed_cpus`], as `taskset` sets it), each pinned to its CPU, under
    /// `SCHED_BATCH`; a backlog of `net.core.somaxconn` (the most the kernel allows;
    /// 4096 if it cannot be read); the address held by no other socket; connections
    /// spread by the kernel's hash; a graceful stop waiting 10 s for open
    /// connections, and idle ones kept 1 s; no periodic report; the loop's
    /// [`Config::default`]. Its `max_connections` is not fitted to the open-file
    /// limit: see [`raise_open_file_limit`] and [`OTHER_FDS`].
    pub fn new(addr: SocketAddr, opening: Opening) -> Options {
        let backlog = somaxconn().unwrap_or(ListenOptions::default().backlog);
        Options {
            addr,
            cpus: allowed_cpus(),
            pinning: Pinning::Pinned,
            scheduling: Scheduling::Batch,
            listen: ListenOptions { backlog, opening },
            port_sharing: PortSharing::Exclusive,
            steering: Steering::Hash,
            shutdown_timeout: Duration::from_secs(10),
            drain_grace: Duration::from_secs(1),
            stats_interval: None,
            reactor: Config::default(),
        }
    }
}

impl Default for Options {
    /// [`Options::new`] on `0.0.0.0:8080`, the client speaking first, as `percore
    /// serve` listens by default.
    fn default() -> Options {
        Options::new(([0, 0, 0, 0], 8080).into(), Opening::ClientSpeaksFirst)
    }
}

/// Whether a worker runs on its CPU alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Each worker is pinned to its CPU (`sched_setaffinity`).
    Pinned,
    /// Workers run where the scheduler puts them, within the inherited mask.
    Unpinned,
}

/// The workers' scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// `SCHED_OTHER`, the default Linux policy.
    Normal,
    /// `SCHED_BATCH`: a worker woken by new requests does not preempt another task
    /// on its CPU (a load generator sharing it) but runs when that task blocks, and
    /// then answers a batch of requests instead of one; on CPUs of its own it
    /// changes nothing.
    Batch,
}

/// Whether the listening address may be shared with sockets of other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSharing {
    /// Another socket on the address is an error ([`Error::AddressInUse`]): without
    /// this check `SO_REUSEPORT` would share the port with any process of the same
    /// user, and split its connections.
    Exclusive,
    /// Joins the sockets already there, as `SO_REUSEPORT` allows.
    Join,
}

/// How the kernel picks the listener, and so the worker, for a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steering {
    /// By a hash of the connection's addresses and ports (the kernel's default).
    Hash,
    /// To the worker on the CPU that received the connection, by a classic BPF
    /// program on the `SO_REUSEPORT` group: for a NIC whose queues are pinned to the
    /// workers' CPUs, the connection then stays on one CPU's caches.
    Cpu,
}

/// How the workers ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
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

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Gracefully => f.write_str("stopped gracefully"),
            Stopped::AtOnce => f.write_str("stopped at once"),
            Stopped::Upgraded => f.write_str("upgraded: the new master serves"),
            Stopped::GaveUp { index, cpu, last } => write!(
                f,
                "worker {index} (cpu {cpu}) failed to start {} times within {} s, last it {last}; giving up",
                restart::CRASH_LIMIT,
                restart::CRASH_WINDOW.as_secs()
            ),
            Stopped::Unclean { index, exit } => write!(f, "worker {index} {exit} while stopping"),
        }
    }
}

/// What the master and its workers report as they go. The caller prints them,
/// counts them or ignores them; `percore serve` prints one line for each.
#[derive(Debug)]
pub enum Event<'a> {
    /// The listeners are bound (or were inherited), on this address.
    Listening(SocketAddr),
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
    /// The master gives up or a worker ended badly while stopping (see [`Stopped`]).
    Stopping(&'a Stopped),
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

/// Opens the listeners (or takes the ones passed by systemd or an upgrading master),
/// loads the service, forks the workers, and supervises them until they stop;
/// `report` hears of everything that happens, in the master and in the workers.
///
/// The master forks, so it must be the only thread of its process (a fork copies
/// the calling thread alone, and a lock another thread held would stay locked in
/// the child for ever): with more than one, `run` returns [`Error::Threaded`].
///
/// ```no_run
/// use std::time::Duration;
/// use percore::http::{Hello, HelloConfig};
/// use percore::listen::Opening;
/// use percore::worker::{self, Event, Options};
///
/// let options = Options {
///     cpus: worker::plan(&worker::allowed_cpus(), None, Some(2))?, // two workers
///     shutdown_timeout: Duration::from_secs(30),
///     ..Options::new(([0, 0, 0, 0], 8080).into(), Opening::ClientSpeaksFirst)
/// };
/// let config = HelloConfig::default();
/// let hello = || Ok(Hello::new(&config));
/// let stopped = worker::run(&options, hello, |event: Event<'_>| {
///     if let Event::Listening(addr) = event {
///         println!("listening on {addr}");
///     }
/// })?;
/// println!("{stopped}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run<S: Service>(options: &Options, service: S, report: impl Fn(Event<'_>)) -> Result<Stopped, Error> {
    if options.cpus.is_empty() {
        return Err(Error::NoWorkers);
    }
    let threads = sys::thread_count().map_err(Error::Setup)?;
    if threads > 1 {
        return Err(Error::Threaded { threads });
    }
    // Blocked before anything is said: a signal sent once `Listening` is reported
    // must reach the signalfd, not take its default action (HUP's is to terminate).
    let signals = sys::SignalFd::new().map_err(Error::Setup)?;
    let listeners = listeners::Listeners::open(options)?;
    let local = listeners.local_addr().map_err(Error::Setup)?;
    let config = service.load().map_err(Error::Load)?;
    report(Event::Listening(local));
    let master =
        master::Master::new(options, listeners, signals, service, config, report).map_err(Error::Setup)?;
    master.run().map_err(Error::Master)
}

/// `net.core.somaxconn`, the kernel's cap on every listener's backlog, if readable.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?.trim().parse().ok()
}

/// Descriptors a worker holds beside its connections: listener, epoll, signalfd,
/// timerfd, stdio, the reserve for `EMFILE`.
pub const OTHER_FDS: u64 = 16;

/// Raises this process's open-file limit to its hard limit (workers inherit it) and
/// returns the new limit; `None` when it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    sys::raise_nofile_limit().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::Opening;
    use crate::reactor::Unused;

    #[test]
    fn run_refuses_a_process_of_several_threads() {
        // The test harness runs this on a thread of its own: two at least.
        let options = Options::new(([127, 0, 0, 1], 0).into(), Opening::ClientSpeaksFirst);
        match run(&options, || Ok(Unused), |_| {}) {
            Err(Error::Threaded { threads }) => assert!(threads > 1, "{threads}"),
            other => panic!("{other:?}"),
        }
    }

    /// The soft and hard open-file limits, from /proc.
    fn open_file_limits() -> (String, String) {
        let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
        let line = limits.lines().find(|line| line.starts_with("Max open files")).expect("its line");
        let mut words = line["Max open files".len()..].split_whitespace().map(str::to_owned);
        (words.next().expect("soft"), words.next().expect("hard"))
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one_and_said() {
        let raised = raise_open_file_limit().expect("a limit");
        let (soft, hard) = open_file_limits();
        assert_eq!(soft, hard);
        let expected = if soft == "unlimited" { u64::MAX } else { soft.parse().expect("a number") };
        assert_eq!(raised, expected);
    }

    #[test]
    fn somaxconn_is_read_from_the_kernel() {
        let text = std::fs::read_to_string("/proc/sys/net/core/somaxconn").expect("readable here");
        assert_eq!(somaxconn().map(|n| n.to_string()), Some(text.trim().to_owned()));
    }
}
