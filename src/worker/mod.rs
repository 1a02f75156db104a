//! Processes, not threads: a master binds one `SO_REUSEPORT` listener per worker,
//! forks one worker process per CPU, each pinned to its CPU and running one loop, and
//! supervises them. Any [`Protocol`] can be served this way.

/// Writes one line to stderr in a single `write`: the master and its workers share
/// the descriptor, and `eprintln!` writes a line in pieces that can interleave.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

mod args;
mod child;
mod cpus;
mod master;

pub use args::{main, plan_or_exit, CpuList, Sched, ServerArgs};
pub use cpus::{allowed_cpus, parse_cpu_list, plan};

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crate::reactor::{Config, Protocol};
use crate::{listen, sys};

/// How to run the workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Address all workers listen on.
    pub addr: SocketAddr,
    /// The CPU of each worker, one entry per worker (see [`plan`]).
    pub cpus: Vec<usize>,
    /// Pin each worker to its CPU.
    pub pin: bool,
    /// Run workers under `SCHED_BATCH` (see [`ServerArgs::sched`]).
    pub batch_scheduling: bool,
    /// Accept queue length of each listener, capped at `net.core.somaxconn`.
    pub backlog: u32,
    /// How long a graceful stop waits for open connections.
    pub shutdown_timeout: Duration,
    /// The client sends first (HTTP, echo): see [`listen::bind`].
    pub client_speaks_first: bool,
    /// Limits of each worker's loop.
    pub reactor: Config,
}

/// How the workers ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM or SIGINT, and every worker finished its connections.
    Gracefully,
    /// A second SIGINT cut the graceful stop short.
    AtOnce,
    /// A worker kept dying; the message says which and how.
    GaveUp(String),
    /// A worker crashed or was killed while stopping; the message says which.
    Unclean(String),
}

/// Binds the listeners, prints `listening on ADDR:PORT` on stderr, forks the workers
/// (each builds its protocol with `make_protocol`), and supervises them until they
/// stop. Errors are one-line messages for the user.
///
/// ```no_run
/// use std::time::Duration;
/// use percore::http::{Hello, HelloConfig};
/// use percore::reactor::Config;
/// use percore::worker::{self, Options};
///
/// let options = Options {
///     addr: ([0, 0, 0, 0], 8080).into(),
///     cpus: worker::plan(&worker::allowed_cpus(), None, None)?, // one worker per CPU
///     pin: true,
///     batch_scheduling: true,
///     backlog: 4096,
///     shutdown_timeout: Duration::from_secs(10),
///     client_speaks_first: true,
///     reactor: Config::default(),
/// };
/// let config = HelloConfig::default();
/// let stopped = worker::run(&options, || Ok(Hello::new(&config)))?;
/// std::process::exit(if stopped == worker::Stopped::Gracefully { 0 } else { 1 });
/// # Ok::<(), String>(())
/// ```
pub fn run<P: Protocol>(
    options: &Options,
    make_protocol: impl Fn() -> std::io::Result<P>,
) -> Result<Stopped, String> {
    let backlog = clamp_backlog(options.backlog);
    let listeners =
        bind_all(options, backlog).map_err(|e| format!("cannot listen on {}: {e}", options.addr))?;
    let local = listeners[0].local_addr().map_err(|e| e.to_string())?;
    say!("listening on {local}");
    let master = master::Master::new(options, listeners, make_protocol).map_err(|e| e.to_string())?;
    master.run().map_err(|e| format!("master: {e}"))
}

/// One listener per worker on the same address; with port 0, the first bind picks
/// the port and the others join it.
fn bind_all(options: &Options, backlog: i32) -> std::io::Result<Vec<TcpListener>> {
    let mut addr = options.addr;
    let mut listeners = Vec::with_capacity(options.cpus.len());
    for _ in &options.cpus {
        let listener = listen::bind(addr, backlog, options.client_speaks_first)?;
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// The kernel silently caps a backlog at `net.core.somaxconn`; say so instead.
fn clamp_backlog(backlog: u32) -> i32 {
    let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .unwrap_or(4096);
    if backlog > somaxconn {
        say!(
            "percore: warning: --backlog {backlog} is above net.core.somaxconn ({somaxconn}), using {somaxconn}; \
             see sysctl.conf"
        );
    }
    backlog.min(somaxconn).min(i32::MAX as u32) as i32
}

/// Descriptors a worker holds beside its connections: listener, epoll, signalfd,
/// stdio, the reserve for `EMFILE`.
const OTHER_FDS: u64 = 16;

/// Raises this process's open-file limit to its hard limit (workers inherit it) and
/// warns, in one line, when that is below what `max_conns` per worker needs. Returns
/// the connections a worker can hold: `max_conns`, or fewer if the limit says so.
pub(crate) fn raise_fd_limit(max_conns: u64) -> u64 {
    // Unknown (getrlimit failed): assume no limit rather than cap connections at 0.
    let limit = sys::raise_nofile_limit().unwrap_or(u64::MAX);
    let needed = max_conns + OTHER_FDS;
    if limit < needed {
        say!(
            "percore: warning: open-file limit {limit} is below the {needed} that --max-conns {max_conns} needs \
             per worker; raise it with ulimit -n (see sysctl.conf)"
        );
    }
    max_conns.min(limit.saturating_sub(OTHER_FDS)).max(1)
}
