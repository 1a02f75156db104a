//! Processes, not threads: a master binds one `SO_REUSEPORT` listener per worker,
//! forks one worker process per CPU, each pinned to its CPU and running one loop, and
//! supervises them. Any [`Protocol`] can be served this way.
//!
//! The library prints nothing: what happens is reported to the caller's closure as
//! an [`Event`], in the master or (for its own end) in a worker, and [`run`] returns
//! how the workers stopped or a typed [`Error`].

mod child;
mod cpus;
mod error;
mod master;

pub use cpus::{allowed_cpus, parse_cpu_list, plan};
pub use error::{Error, WorkerError};

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crate::listen::{self, ListenOptions};
use crate::reactor::{Config, Protocol, Stats};
use crate::sys;
pub use crate::sys::Exit;

/// How to run the workers.
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
    /// How long a graceful stop waits for open connections.
    pub shutdown_timeout: Duration,
    /// Limits of each worker's loop.
    pub reactor: Config,
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

/// How the workers ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM or SIGINT, and every worker finished its connections.
    Gracefully,
    /// A second SIGINT cut the graceful stop short.
    AtOnce,
    /// Worker `index` died 5 times within 10 s (a crash loop), the last time this
    /// way; the master stopped the others.
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
            Stopped::GaveUp { index, cpu, last } => write!(
                f,
                "worker {index} (cpu {cpu}) died {} times within {} s, last it {last}; giving up",
                master::CRASH_LIMIT,
                master::CRASH_WINDOW.as_secs()
            ),
            Stopped::Unclean { index, exit } => write!(f, "worker {index} {exit} while stopping"),
        }
    }
}

/// What the master and its workers report as they go. The caller prints them,
/// counts them or ignores them; `percore serve` prints one line for each.
#[derive(Debug)]
pub enum Event<'a, P> {
    /// The listeners are bound, on this address (its port picked, for port 0).
    Listening(SocketAddr),
    /// Worker `index` was started, or restarted, as process `pid`.
    Started {
        /// The worker.
        index: usize,
        /// Its process.
        pid: i32,
        /// Its CPU.
        cpu: usize,
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
    /// In a worker: it stopped, with what its loop counted and its protocol (to ask
    /// it for its own counts).
    Stopped {
        /// The worker.
        index: usize,
        /// Its process.
        pid: u32,
        /// Its CPU.
        cpu: usize,
        /// What the loop counted.
        stats: Stats,
        /// The protocol it served.
        protocol: &'a P,
    },
}

/// Binds the listeners, forks the workers (each builds its protocol with
/// `make_protocol`), and supervises them until they stop; `report` hears of
/// everything that happens, in the master and in the workers.
///
/// The master forks, so it must be the only thread of its process (a fork copies
/// the calling thread alone, and a lock another thread held would stay locked in
/// the child for ever): with more than one, `run` returns [`Error::Threaded`].
///
/// ```no_run
/// use std::time::Duration;
/// use percore::http::{Hello, HelloConfig};
/// use percore::listen::ListenOptions;
/// use percore::reactor::Config;
/// use percore::worker::{self, Event, Options, Pinning, Scheduling};
///
/// let options = Options {
///     addr: ([0, 0, 0, 0], 8080).into(),
///     cpus: worker::plan(&worker::allowed_cpus(), None, None)?, // one worker per CPU
///     pinning: Pinning::Pinned,
///     scheduling: Scheduling::Batch,
///     listen: ListenOptions::default(),
///     shutdown_timeout: Duration::from_secs(10),
///     reactor: Config::default(),
/// };
/// let config = HelloConfig::default();
/// let stopped = worker::run(&options, || Ok(Hello::new(&config)), |event: Event<'_, Hello>| {
///     if let Event::Listening(addr) = event {
///         println!("listening on {addr}");
///     }
/// })?;
/// println!("{stopped}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run<P: Protocol>(
    options: &Options,
    make_protocol: impl Fn() -> io::Result<P>,
    report: impl Fn(Event<'_, P>),
) -> Result<Stopped, Error> {
    let threads = sys::thread_count().map_err(Error::Setup)?;
    if threads > 1 {
        return Err(Error::Threaded { threads });
    }
    let listeners = bind_all(options).map_err(|error| Error::Listen { addr: options.addr, error })?;
    let local = listeners[0].local_addr().map_err(Error::Setup)?;
    report(Event::Listening(local));
    let master = master::Master::new(options, listeners, make_protocol, report).map_err(Error::Setup)?;
    master.run().map_err(Error::Master)
}

/// One listener per worker on the same address; with port 0, the first bind picks
/// the port and the others join it.
fn bind_all(options: &Options) -> io::Result<Vec<TcpListener>> {
    let mut addr = options.addr;
    let mut listeners = Vec::with_capacity(options.cpus.len());
    for _ in &options.cpus {
        let listener = listen::bind(addr, &options.listen)?;
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// `net.core.somaxconn`, the kernel's cap on every listener's backlog, if readable.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?.trim().parse().ok()
}

/// Descriptors a worker holds beside its connections: listener, epoll, signalfd,
/// stdio, the reserve for `EMFILE`.
pub const OTHER_FDS: u64 = 16;

/// Raises this process's open-file limit to its hard limit (workers inherit it) and
/// returns the new limit; `None` when it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    sys::raise_nofile_limit().ok()
}
